#!/usr/bin/env python3
"""Writes the seed corpora of http_headers_fuzz and hub_json_fuzz into
DIR/http_headers and DIR/hub_json: real-looking header values and Hub answers
(valid, and a few broken ones), generated at fuzz time so that nothing binary
is tracked. Usage: make_hub_seeds.py DIR
"""
import json
import os
import sys


def main():
    out = sys.argv[1]
    headers = {
        "content_range": "bytes 0-1048575/26214733",
        "content_range_star": "bytes */1234",
        "content_range_bad": "bytes 5-2/10",
        "etag": '"7c5d3f4b8b76583b422fcb9189ad6c89d5d97a094541ce8932dce3ecabde1421"',
        "etag_weak": 'W/"1a2b3c"',
        "linked_size": "9223372036854775807",
        "commit": "0123456789abcdef0123456789abcdef01234567",
        "link": '<https://huggingface.co/api/models/a/b/tree/main?cursor=abc>; rel="next", <x>; rel="prev"',
        "link_other_host": '<https://evil.example/x>; rel=next',
        "location_rel": "../../resolve/main/config.json\x00https://hub/a/b/resolve/main/x/y",
        "location_abs": "//cdn.example/blobs/x?sig=1\x00http://h/p",
        "retry_after": "7",
        "retry_after_date": "Wed, 21 Oct 2015 07:28:00 GMT",
        "ratelimit": '"api";r=0;t=42',
        "ratelimit_ietf": "limit=500, remaining=0, reset=20",
    }
    sha = "0123456789abcdef0123456789abcdef01234567"
    docs = {
        "revision": {"id": "a/b", "sha": sha},
        "tree": [{"type": "file", "oid": sha, "size": 12, "path": "config.json"},
                 {"type": "directory", "oid": sha, "size": 0, "path": "sub"},
                 {"type": "file", "oid": sha, "size": 134, "path": "sub/w.safetensors",
                  "lfs": {"oid": "a" * 64, "size": 1048576, "pointerSize": 134}}],
        "preupload": {"files": [{"path": "a.bin", "uploadMode": "lfs", "shouldIgnore": False, "oid": "b" * 64},
                                {"path": "c.json", "uploadMode": "regular", "shouldIgnore": False}]},
        "lfs_batch": {"transfer": "multipart", "objects": [
            {"oid": "c" * 64, "size": 30, "actions": {
                "upload": {"href": "http://cdn/u", "header": {"chunk_size": "16", "00001": "http://p/1",
                                                              "00002": "http://p/2"}},
                "verify": {"href": "http://hub/v"}}},
            {"oid": "d" * 64, "size": 5},
            {"oid": "e" * 64, "size": 9, "error": {"code": 403, "message": "no"}}]},
        "commit": {"commitOid": sha, "commitUrl": "http://hub/a/b/commit/" + sha,
                   "pullRequestUrl": "http://hub/a/b/discussions/3"},
        "repo": {"url": "http://hub/a/b"},
        "refs": {"branches": [{"name": "main", "ref": "refs/heads/main", "targetCommit": sha}],
                 "tags": [{"name": "v1", "ref": "refs/tags/v1", "targetCommit": sha}], "converts": [],
                 "pullRequests": [{"name": "refs/pr/1", "ref": "refs/pr/1", "targetCommit": sha}]},
        "commits": [{"id": sha, "title": "Add weights", "message": "m", "date": "2026-12-01T10:00:00.000Z",
                     "authors": [{"user": "alice", "avatar": "x"}]}, {"id": sha, "title": "Initial commit"}],
        "error_body": {"error": "Repository Not Found for url"},
        "error_body_list": {"error": ["first", "second"], "errors": [{"message": "m"}]},
        "tree_cache": {"format_version": 1, "files": {"config.json": {"size": 12, "blob_id": sha},
                                                      "w.safetensors": {"size": 9, "blob_id": sha,
                                                                        "lfs_sha256": "f" * 64, "lfs_size": 9}}},
    }
    for sub, items in (("http_headers", headers), ("hub_json", docs)):
        d = os.path.join(out, sub)
        os.makedirs(d, exist_ok=True)
        for name, v in items.items():
            data = v if isinstance(v, str) else json.dumps(v)
            with open(os.path.join(d, name), "wb") as f:
                f.write(data.encode("utf-8"))
    with open(os.path.join(out, "hub_json", "broken"), "wb") as f:
        f.write(b'{"files": [{"path": 1, "uploadMode": null}], "objects": {"x": []}, "sha": [' + b"[" * 80)


if __name__ == "__main__":
    main()
