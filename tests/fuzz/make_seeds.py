#!/usr/bin/env python3
"""Writes the libFuzzer seed corpus for safetensors_header_fuzz into DIR.

Small hand-made files (valid, and one per broken rule), generated at fuzz time
so that no binary files are tracked. Usage: make_seeds.py DIR
"""
import json
import os
import struct
import sys


def st(header_text, data=b"", pad_to_8=False):
    h = header_text.encode("utf-8") if isinstance(header_text, str) else header_text
    if pad_to_8:
        h += b" " * (-len(h) % 8)
    return struct.pack("<Q", len(h)) + h + data


def main():
    out = sys.argv[1]
    os.makedirs(out, exist_ok=True)
    u8 = lambda shape, a, b: {"dtype": "U8", "shape": shape, "data_offsets": [a, b]}
    seeds = {
        "valid_empty.safetensors": st("{}", pad_to_8=True),
        "valid_two.safetensors": st(json.dumps({"__metadata__": {"format": "pt"},
                                                "a": {"dtype": "F32", "shape": [2], "data_offsets": [0, 8]},
                                                "b": u8([3], 8, 11)}, separators=(",", ":")),
                                    bytes(range(11)), pad_to_8=True),
        "valid_scalar_zero.safetensors": st('{"s":{"dtype":"F64","shape":[],"data_offsets":[0,8]},'
                                            '"z":{"dtype":"BF16","shape":[0,4],"data_offsets":[8,8]}}', bytes(8)),
        "valid_subbyte.safetensors": st(' {"q":{"dtype":"F4","shape":[2,2],"data_offsets":[0,2]},'
                                        '"r":{"dtype":"F6_E2M3","shape":[4],"data_offsets":[2,5]}} ', b"\xab" * 5),
        "bad_dup.safetensors": st('{"a":' + json.dumps(u8([1], 0, 1)) + ',"a":' + json.dumps(u8([1], 1, 2)) + "}",
                                  bytes(2)),
        "bad_info.safetensors": st('{"a":{"dtype":"F32","shape":[2,2],"data_offsets":[0,12]}}', bytes(12)),
        "bad_json.safetensors": st('{"a":{"dtype":"U8","shape":[1],"data_offsets":[0,1]'),
        "bad_offset.safetensors": st(json.dumps({"a": u8([2], 0, 2), "b": u8([2], 3, 5)}), bytes(5)),
        "bad_utf8.safetensors": st(b'{"\xed\xa0\x80":{}}'),
        "html_page.safetensors": b"<!DOCTYPE html><html><body>404</body></html>\n",
        "lfs_pointer.safetensors": b"version https://git-lfs.github.com/spec/v1\n"
                                   b"oid sha256:" + b"4d" * 32 + b"\nsize 12345\n",
        "index_bad_shard.json": b'{"weight_map":{"a":"../model.safetensors"}}',
        "index_valid.json": b'{"metadata":{"total_size":16},"weight_map":{"a":"model-00001-of-00002.safetensors",'
                            b'"b":"model-00002-of-00002.safetensors"}}\n',
    }
    for name, data in seeds.items():
        with open(os.path.join(out, name), "wb") as f:
            f.write(data)


if __name__ == "__main__":
    main()
