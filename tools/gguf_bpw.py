#!/usr/bin/env python3
"""Bits per weight of a GGUF file as llama.cpp counts them: every tensor's bytes over its elements."""
import struct
import sys

# ggml type id: (elements per block, bytes per block), from ggml-common.h's block structs
BLOCKS = {0: (1, 4), 1: (1, 2), 2: (32, 18), 3: (32, 20), 6: (32, 22), 7: (32, 24), 8: (32, 34),
          10: (256, 84), 11: (256, 110), 12: (256, 144), 13: (256, 176), 14: (256, 210),
          20: (32, 18), 23: (256, 136), 30: (1, 2)}
SCALAR = {0: 1, 1: 1, 2: 2, 3: 2, 4: 4, 5: 4, 6: 4, 7: 1, 10: 8, 11: 8, 12: 8}


def main(path):
    d = open(path, "rb").read()
    if d[:4] != b"GGUF":
        sys.exit(f"{path}: not a GGUF file")
    n_t, n_kv = struct.unpack_from("<QQ", d, 8)
    p = 24

    def string(p):
        n, = struct.unpack_from("<Q", d, p)
        return p + 8 + n

    def value(t, p):
        if t == 8:
            return string(p)
        if t == 9:
            et, n = struct.unpack_from("<IQ", d, p)
            p += 12
            for _ in range(n):
                p = value(et, p)
            return p
        return p + SCALAR[t]

    for _ in range(n_kv):
        p = string(p)
        t, = struct.unpack_from("<I", d, p)
        p = value(t, p + 4)
    bits = elems = 0
    for _ in range(n_t):
        p = string(p)
        nd, = struct.unpack_from("<I", d, p)
        dims = struct.unpack_from(f"<{nd}Q", d, p + 4)
        p += 4 + 8 * nd
        t, = struct.unpack_from("<I", d, p)
        p += 12
        if t not in BLOCKS:
            sys.exit(f"{path}: ggml type {t} is not in this table")
        n = 1
        for x in dims:
            n *= x
        per, size = BLOCKS[t]
        bits += n // per * size * 8
        elems += n
    print(f"{bits / elems:.3f}")


main(sys.argv[1])
