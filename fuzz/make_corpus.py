#!/usr/bin/env python3
"""Writes the .npy seed corpus for fuzz_npy (and the replay test): valid files as NumPy writes them
(versions 1.0/2.0/3.0, <f4, <f2, <u2) and one of each corruption the reader must refuse. Deterministic."""
import os
import struct
import sys

out = sys.argv[1] if len(sys.argv) > 1 else os.path.join(os.path.dirname(__file__), "corpus", "npy")
os.makedirs(out, exist_ok=True)


def npy(dict_text, data, major=1, pad=True):
    h = dict_text
    len_bytes = 2 if major == 1 else 4
    if pad:
        unpadded = 8 + len_bytes + len(h) + 1
        h += " " * ((64 - unpadded % 64) % 64)
    h += "\n"
    hb = h.encode("utf-8" if major == 3 else "latin1")
    length = struct.pack("<H", len(hb)) if major == 1 else struct.pack("<I", len(hb))
    return b"\x93NUMPY" + bytes([major, 0]) + length + hb + data


def d(descr, shape, fortran=False):
    s = "(" + ", ".join(str(x) for x in shape) + ("," if len(shape) == 1 else "") + ")"
    return "{'descr': '%s', 'fortran_order': %s, 'shape': %s, }" % (descr, "True" if fortran else "False", s)


f32 = struct.pack("<6f", 0.5, -1.25, 3.0, 0.0, 1e-3, -7.5)
files = {
    "valid_f32_v1.npy": npy(d("<f4", (1, 1, 2, 3)), f32),
    "valid_f32_v2.npy": npy(d("<f4", (1, 2, 1, 3)), f32, major=2),
    "valid_f32_v3.npy": npy(d("<f4", (1, 3, 2, 1)), f32, major=3),
    "valid_bf16_u2.npy": npy(d("<u2", (1, 1, 2, 2)), struct.pack("<4H", 0x3F80, 0xC000, 0x0000, 0x7F80)),
    "valid_f16.npy": npy(d("<f2", (1, 1, 1, 4)), struct.pack("<4H", 0x3C00, 0xC000, 0x0001, 0x7C00)),
    "valid_unpadded_dq.npy": npy('{"descr": "<f4", "fortran_order": False, "shape": (1, 1, 1, 1)}',
                                 struct.pack("<f", 2.0), pad=False),
    "bad_magic.npy": b"\x93NUMPZ" + npy(d("<f4", (1, 1, 1, 1)), b"\0" * 4)[6:],
    "bad_version.npy": b"\x93NUMPY\x07\x00" + npy(d("<f4", (1, 1, 1, 1)), b"\0" * 4)[8:],
    "truncated_header.npy": npy(d("<f4", (1, 1, 2, 3)), f32)[:37],
    "truncated_data.npy": npy(d("<f4", (1, 1, 2, 3)), f32)[:-5],
    "size_mismatch.npy": npy(d("<f4", (2, 1, 2, 3)), f32),
    "huge_shape.npy": npy(d("<f4", (65536, 65536, 65536, 64)), f32),
    "overflow_shape.npy": npy(d("<f4", (2**62, 2**62, 1, 1)), f32),
    "fortran.npy": npy(d("<f4", (1, 1, 2, 3), fortran=True), f32),
    "two_d.npy": npy(d("<f4", (2, 3)), f32),
    "zero_dim.npy": npy(d("<f4", (1, 0, 2, 3)), b""),
    "valid_f64.npy": npy(d("<f8", (1, 1, 1, 3)), struct.pack("<3d", 0.1, -3.0, 1e300)),
    "int64.npy": npy(d("<i8", (1, 1, 1, 1)), b"\0" * 8),
    "big_endian.npy": npy(d(">f4", (1, 1, 1, 1)), b"\0" * 4),
    "bad_dict.npy": npy("{'descr': '<f4', 'fortran_order': Maybe, 'shape': (1, 1, 1, 1)}", b"\0" * 4),
    "extra_key.npy": npy("{'descr': '<f4', 'fortran_order': False, 'shape': (1, 1, 1, 1), 'x': 1}", b"\0" * 4),
    "huge_header_len.npy": b"\x93NUMPY\x02\x00" + struct.pack("<I", 0xFFFFFFF0) + b"{}",
}
for name, data in files.items():
    with open(os.path.join(out, name), "wb") as f:
        f.write(data)
print(f"wrote {len(files)} files to {out}")
