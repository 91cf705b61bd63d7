#!/usr/bin/env python3
"""Writes libFuzzer seed corpora for the `hubload serve` targets.

Usage: make_server_seeds.py COMMIT_DIR ROUTER_DIR
  COMMIT_DIR: NDJSON commit bodies and JSON request bodies (server_commit_fuzz)
  ROUTER_DIR: requests "FLAGS METHOD\\nTARGET\\nheaders\\n\\nBODY" (server_router_fuzz)
Generated at fuzz time so that no binary files are tracked.
"""
import json
import os
import sys


def line(key, value):
    return json.dumps({"key": key, "value": value}) + "\n"


def main():
    commit_dir, router_dir = sys.argv[1], sys.argv[2]
    os.makedirs(commit_dir, exist_ok=True)
    os.makedirs(router_dir, exist_ok=True)
    oid = "a" * 64
    bodies = {
        "commit_full": line("header", {"summary": "s", "description": "d", "parentCommit": "abcdef0"})
        + line("file", {"path": "a.txt", "content": "aGVsbG8=", "encoding": "base64"})
        + line("lfsFile", {"path": "w/m.bin", "oid": oid, "size": 5, "algo": "sha256"})
        + line("deletedFile", {"path": "old.txt"})
        + line("deletedFolder", {"path": "dir/"}),
        "commit_no_newline": json.dumps({"key": "header", "value": {"summary": "x"}}),
        "preupload": json.dumps({"files": [{"path": "x.bin", "size": 10, "sample": "eA=="}]}),
        "lfs_batch": json.dumps({"operation": "upload", "transfers": ["basic", "multipart"], "hash_algo": "sha256",
                                 "objects": [{"oid": oid, "size": 1}]}),
        "repo_create": json.dumps({"name": "n", "organization": "o", "type": "dataset", "private": True,
                                   "files": [{"path": "a", "content": "YQ==", "encoding": "base64"}]}),
        "paths_info": json.dumps({"paths": ["a", "b/c"], "expand": True}),
        "paths_form": "paths=a&paths=b%2Fc&expand=true",
        "complete": json.dumps({"oid": oid, "parts": [{"partNumber": 1, "etag": "\"x\""}]}),
        "branch": json.dumps({"startingPoint": "main", "emptyBranch": False, "overwrite": True}),
        "tag": json.dumps({"tag": "v1", "message": "m"}),
        "settings": json.dumps({"private": True, "gated": "auto"}),
    }
    for name, text in bodies.items():
        with open(os.path.join(commit_dir, name), "w") as f:
            f.write(text)
    auth = "Authorization: Bearer t\nHost: 127.0.0.1:8000\n"
    reqs = {
        "resolve": ("GET", "/org/model/resolve/main/config.json", "Range: bytes=0-3\n", ""),
        "resolve_lfs": ("HEAD", "/org/model/resolve/v1/w/model.safetensors", "", ""),
        "raw": ("GET", "/org/model/raw/refs%2Fpr%2F1/sub/dir/f.txt", "If-None-Match: \"x\"\n", ""),
        "info": ("GET", "/api/models/org/model/revision/main?blobs=true", "", ""),
        "tree": ("GET", "/api/models/org/model/tree/main/sub?recursive=true&expand=true&cursor=1&limit=1", "", ""),
        "dataset": ("GET", "/api/datasets/gpt2/tree/main", "", ""),
        "paths_info": ("POST", "/api/models/org/model/paths-info/main", "Content-Type: application/json\n",
                       bodies["paths_info"]),
        "preupload": ("POST", "/api/models/org/model/preupload/main", auth, bodies["preupload"]),
        "commit": ("POST", "/api/models/org/model/commit/main?create_pr=1", auth, bodies["commit_full"]),
        "batch": ("POST", "/org/model.git/info/lfs/objects/batch", auth, bodies["lfs_batch"]),
        "create": ("POST", "/api/repos/create", auth, bodies["repo_create"]),
        "branch": ("POST", "/api/models/org/model/branch/dev", auth, bodies["branch"]),
        "branch_delete": ("DELETE", "/api/models/org/model/branch/dev", auth, ""),
        "tag": ("POST", "/api/models/org/model/tag/main", auth, bodies["tag"]),
        "tag_delete": ("DELETE", "/api/models/org/model/tag/v1", auth, ""),
        "refs": ("GET", "/api/models/org/model/refs?include_prs=1", "", ""),
        "commits": ("GET", "/api/models/org/model/commits/main?limit=1&p=0&expand%5B%5D=formatted", "", ""),
        "commit_page": ("GET", "/org/model/commit/abcdef0", "Accept: application/json\n", ""),
        "discussion": ("GET", "/org/model/discussions/1", "", ""),
        "settings": ("PUT", "/api/models/org/model/settings", auth, bodies["settings"]),
        "redirect": ("GET", "/Org/model/resolve/main/config.json?x=1", "", ""),
        "whoami": ("GET", "/api/whoami-v2", auth, ""),
        "lfs_complete": ("POST", "/_lfs/models--org--model/" + oid + "/100/complete?exp=1&sig=00", "",
                         bodies["complete"]),
    }
    for name, (method, target, headers, body) in reqs.items():
        with open(os.path.join(router_dir, name), "wb") as f:
            f.write(b"\x00" + (method + "\n" + target + "\n" + headers + "\n" + body).encode())
    with open(os.path.join(router_dir, "cdn"), "wb") as f:
        f.write(b"\x01GET\n/models--org--model/" + oid.encode() + b"?exp=1&sig=00\nRange: bytes=-5\n\n")
    with open(os.path.join(router_dir, "prefix"), "wb") as f:
        f.write(b"\x02GET\n/p/api/models/org/model/tree/main\n\n")


if __name__ == "__main__":
    main()
