#!/usr/bin/env python3
"""Writes OUT/pytorch_model.bin (zip) and OUT/legacy/pytorch_model.bin (legacy
format) with torch.save, and OUT/expected.json: per tensor its dtype
(safetensors spelling), shape and the hex of t.contiguous()'s bytes, i.e. what
a safetensors conversion must hold. Exits 3 when torch is absent.
Usage: /usr/bin/python3 write_bin.py OUT"""
import collections
import json
import os
import sys

try:
    import torch
except Exception as e:  # noqa: BLE001
    print(f"python3-torch not available: {e}", file=sys.stderr)
    sys.exit(3)

NAMES = {torch.float32: "F32", torch.float16: "F16", torch.bfloat16: "BF16", torch.int64: "I64",
         torch.bool: "BOOL", torch.int8: "I8", torch.float64: "F64"}
out = sys.argv[1]
torch.manual_seed(7)
base = torch.randn(4, 6)
sd = collections.OrderedDict()
sd["a.weight"] = torch.randn(3, 4)
sd["a.half"] = torch.randn(5).half()
sd["a.bf16"] = torch.randn(2, 3).bfloat16()
sd["b.ids"] = torch.arange(7, dtype=torch.int64) * 1000003
sd["b.mask"] = torch.tensor([True, False, True])
sd["b.i8"] = torch.tensor([-128, 0, 127], dtype=torch.int8)
sd["b.f64"] = torch.randn(2, dtype=torch.float64)
sd["view.t"] = base.t()              # strided
sd["view.slice"] = base[1:3, 2:5]    # storage offset + strided
sd["tied.a"] = base                  # two names, one storage
sd["tied.b"] = base
sd["scalar"] = torch.tensor(3.5)
sd["empty"] = torch.zeros(0, 3)
torch.save(sd, os.path.join(out, "pytorch_model.bin"))
os.makedirs(os.path.join(out, "legacy"), exist_ok=True)
torch.save(sd, os.path.join(out, "legacy", "pytorch_model.bin"), _use_new_zipfile_serialization=False)
exp = {}
for k, v in sd.items():
    c = v.contiguous().reshape(-1)
    raw = c.view(torch.uint8).numpy().tobytes() if c.numel() else b""
    exp[k] = {"dtype": NAMES[v.dtype], "shape": list(v.shape), "hex": raw.hex()}
with open(os.path.join(out, "expected.json"), "w") as f:
    json.dump(exp, f)
