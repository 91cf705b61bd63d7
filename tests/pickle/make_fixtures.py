#!/usr/bin/env python3
"""Writes torch.save checkpoints and an independent manifest of what they hold.

Usage: /usr/bin/python3 make_fixtures.py OUTDIR

Run with Debian's python3-torch (the independent writer of the pickle tests).
For every checkpoint FILE it writes FILE.json:
  {"tensors": [{"name", "dtype" (safetensors spelling), "shape", "stride",
                "storage_offset", "storage" (id shared by tensors with one
                storage), "data": [offset, length] into FILE.raw (the tensor's
                contiguous little-endian bytes), "f32": [offset, length] of
                t.float() bytes for floating tensors}...]}
and FILE.raw. Exits 3 when torch cannot be imported (tests skip).
"""
import collections
import json
import os
import sys

try:
    import torch
    from torch import nn
except Exception as e:  # noqa: BLE001
    print(f"python3-torch not available: {e}", file=sys.stderr)
    sys.exit(3)

DTYPES = {
    torch.float32: "F32", torch.float16: "F16", torch.bfloat16: "BF16", torch.float64: "F64",
    torch.int64: "I64", torch.int32: "I32", torch.int16: "I16", torch.int8: "I8",
    torch.uint8: "U8", torch.bool: "BOOL", torch.complex64: "C64",
}


def raw_bytes(t):
    c = t.detach().contiguous().reshape(-1)
    return c.view(torch.uint8).numpy().tobytes() if c.numel() else b""


def write_manifest(path, sd):
    blob = bytearray()
    ids = {}
    out = []
    for name, t in sd.items():
        data = raw_bytes(t)
        entry = {
            "name": name,
            "dtype": DTYPES[t.dtype],
            "shape": list(t.shape),
            "stride": list(t.stride()),
            "storage_offset": t.storage_offset(),
            "storage": ids.setdefault(t.storage().data_ptr(), len(ids)),
            "data": [len(blob), len(data)],
        }
        blob += data
        if t.dtype.is_floating_point:
            f = raw_bytes(t.float())
            entry["f32"] = [len(blob), len(f)]
            blob += f
        out.append(entry)
    with open(path + ".raw", "wb") as f:
        f.write(bytes(blob))
    with open(path + ".json", "w") as f:
        json.dump({"tensors": out}, f)


class Model(nn.Module):
    """A small module whose state dict has every case the reader handles."""

    def __init__(self):
        super().__init__()
        self.emb = nn.Embedding(10, 4)
        self.block = nn.Sequential(nn.Linear(4, 8), nn.LayerNorm(8), nn.BatchNorm1d(8))
        self.head = nn.Linear(4, 10, bias=False)
        self.head.weight = self.emb.weight  # tied weights: one storage, two names
        self.register_buffer("half_buf", torch.randn(3, 5).half())
        self.register_buffer("bf16_buf", torch.randn(2, 3).bfloat16())
        self.register_buffer("f64_buf", torch.randn(2, 2, dtype=torch.float64))
        self.register_buffer("ids", torch.arange(7, dtype=torch.int64) - 3)
        self.register_buffer("i32", torch.tensor([1, -2, 3], dtype=torch.int32))
        self.register_buffer("i16", torch.tensor([-300, 7], dtype=torch.int16))
        self.register_buffer("i8", torch.tensor([-5, 6], dtype=torch.int8))
        self.register_buffer("u8", torch.tensor([250, 1, 2], dtype=torch.uint8))
        self.register_buffer("mask", torch.tensor([True, False, True, True]))
        self.register_buffer("cplx", torch.randn(3, dtype=torch.complex64))
        base = torch.arange(24, dtype=torch.float32).reshape(4, 6)
        self.register_buffer("view", base[1:, ::2])  # offset 6, stride (6, 2)
        self.register_buffer("view_t", base.t())     # same storage, transposed
        self.register_buffer("scalar", torch.tensor(3.5))
        self.register_buffer("empty", torch.zeros(0, 3))


def main():
    out = sys.argv[1]
    os.makedirs(out, exist_ok=True)
    torch.manual_seed(0)
    m = Model()
    with torch.no_grad():
        m.block[2].running_mean.uniform_()
    sd = m.state_dict()  # an OrderedDict with a _metadata attribute

    def save(name, obj, **kw):
        path = os.path.join(out, name)
        torch.save(obj, path, **kw)
        write_manifest(path, obj)

    save("model.bin", sd)
    save("legacy.bin", sd, _use_new_zipfile_serialization=False)
    save("proto4.bin", sd, pickle_protocol=4)
    # The same tensor object under two names (a memo reference in the pickle).
    t = torch.randn(2, 3)
    save("same_object.bin", collections.OrderedDict([("a", t), ("b", t), ("c", t[1])]))
    # Parameters (torch._utils._rebuild_parameter), in a plain dict.
    save("params.bin", {"w": nn.Parameter(torch.randn(3, 2)), "b": nn.Parameter(torch.zeros(2), requires_grad=False)})
    save("params_legacy.bin", {"w": nn.Parameter(torch.randn(3, 2))}, _use_new_zipfile_serialization=False)

    # A sharded checkpoint with its index (transformers layout).
    names = list(sd.keys())
    shards = [collections.OrderedDict((k, sd[k]) for k in names[: len(names) // 2]),
              collections.OrderedDict((k, sd[k]) for k in names[len(names) // 2:])]
    weight_map = {}
    total = 0
    for i, shard in enumerate(shards):
        fname = f"pytorch_model-{i + 1:05d}-of-{len(shards):05d}.bin"
        save(fname, shard)
        for k, v in shard.items():
            weight_map[k] = fname
            total += v.numel() * v.element_size()
    with open(os.path.join(out, "pytorch_model.bin.index.json"), "w") as f:
        json.dump({"metadata": {"total_size": total}, "weight_map": weight_map}, f, indent=2)


if __name__ == "__main__":
    main()
