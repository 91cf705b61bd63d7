#!/usr/bin/env python3
"""Writes the libFuzzer seed corpus for pickle_fuzz into DIR.

Every seed starts with the layer byte of pickle_fuzz.cc (0 = whole file,
1 = bare state-dict pickle, 2 = legacy header pickle). Hand-made pickles and
stored zips (no torch needed); with python3-torch also real torch.save files
(zip, protocol 4, legacy). Usage: make_pickle_seeds.py DIR
"""
import io
import os
import struct
import sys
import zipfile


def s(text):  # BINUNICODE
    b = text.encode()
    return b"X" + struct.pack("<I", len(b)) + b


def i(v):  # BININT
    return b"J" + struct.pack("<i", v)


def ints(vs):
    return b"(" + b"".join(i(v) for v in vs) + b"t"


ODICT = b"ccollections\nOrderedDict\n)R"


def tensor(cls, key, numel, offset, size, stride):
    pid = b"(" + s("storage") + b"ctorch\n" + cls.encode() + b"\n" + s(key) + s("cpu") + i(numel) + b"tQ"
    return (b"ctorch._utils\n_rebuild_tensor_v2\n(" + pid + i(offset) + ints(size) + ints(stride)
            + b"\x89" + ODICT + b"tR")


def state_dict(items):
    return b"\x80\x02" + ODICT + b"(" + b"".join(s(k) + v for k, v in items) + b"u."


def stored_zip(entries):
    buf = io.BytesIO()
    with zipfile.ZipFile(buf, "w", zipfile.ZIP_STORED) as z:
        for name, data in entries:
            z.writestr(name, data)
    return buf.getvalue()


def main():
    out = sys.argv[1]
    os.makedirs(out, exist_ok=True)
    seeds = {}
    floats = struct.pack("<6f", *range(6))
    pkl = state_dict([("w", tensor("FloatStorage", "0", 6, 0, [2, 3], [3, 1])),
                      ("v", tensor("FloatStorage", "0", 6, 1, [2], [2])),
                      ("h", tensor("HalfStorage", "1", 2, 0, [2], [1]))])
    seeds["sd.pkl"] = b"\x01" + pkl
    seeds["header_int.pkl"] = b"\x02\x80\x02M\xe9\x03."
    seeds["header_dict.pkl"] = b"\x02\x80\x02}q\x00(" + s("little_endian") + b"\x88u."
    seeds["zip.bin"] = b"\x00" + stored_zip([("archive/data.pkl", pkl), ("archive/data/0", floats),
                                             ("archive/data/1", b"\x00\x3c\x00\x40"), ("archive/version", b"3\n")])
    seeds["evil.pkl"] = b"\x01\x80\x02cos\nsystem\n" + s("id") + b"\x85R."
    try:
        import torch
        from torch import nn
        torch.manual_seed(0)
        m = nn.Sequential(nn.Linear(3, 2), nn.LayerNorm(2))
        sd = m.state_dict()
        sd["half"] = torch.randn(2, 2).half()
        sd["view"] = torch.arange(12.0).reshape(3, 4)[1:, ::2]
        for name, kw in [("torch_zip.bin", {}), ("torch_p4.bin", {"pickle_protocol": 4}),
                         ("torch_legacy.bin", {"_use_new_zipfile_serialization": False})]:
            buf = io.BytesIO()
            torch.save(sd, buf, **kw)
            seeds[name] = b"\x00" + buf.getvalue()
    except Exception as e:  # noqa: BLE001
        print(f"make_pickle_seeds: no torch seeds ({e})", file=sys.stderr)
    for name, data in seeds.items():
        with open(os.path.join(out, name), "wb") as f:
            f.write(data)


if __name__ == "__main__":
    main()
