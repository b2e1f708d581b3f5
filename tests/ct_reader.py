#!/usr/bin/env python3
"""A compressed-tensors checkpoint read from the format's description alone (python3 stdlib, no
code shared with lmq): config.json checked against the quantization_config schema, every tensor
of model.safetensors unpacked (pack-quantized int32 words, naive-/int-quantized int8,
float-quantized e4m3) and dequantised with its scales and zero points, then compared bit for bit
with a float checkpoint of the same weights (lmq's own decoding, exported as plain fp32).

usage: ct_reader.py EXPORT_DIR REFERENCE_DIR
"""
import array
import json
import re
import struct
import sys

FORMATS = {"pack-quantized", "naive-quantized", "int-quantized", "float-quantized"}
STRATEGIES = {"tensor", "channel", "group", "block", "token", "tensor_group"}
DTYPES = {"F32": ("f", 4), "F16": ("e", 2), "I8": ("b", 1), "I32": ("i", 4), "I64": ("q", 8), "F8_E4M3": ("B", 1)}
TORCH = {"float32": "F32", "float16": "F16", "bfloat16": "BF16"}
CONV1D = re.compile(r".*\.(attn\.c_attn|attn\.c_proj|mlp\.c_fc|mlp\.c_proj)$")  # GPT-2's [in, out] modules


class Bad(Exception):
    pass


def need(cond, what):
    if not cond:
        raise Bad(what)


def read_safetensors(path):
    """{name: (dtype, shape, bytes)}, from the 8-byte little-endian header size and JSON header."""
    with open(path, "rb") as f:
        blob = f.read()
    (n,) = struct.unpack_from("<Q", blob, 0)
    header = json.loads(blob[8:8 + n])
    out = {}
    for name, t in header.items():
        if name == "__metadata__":
            continue
        b, e = t["data_offsets"]
        out[name] = (t["dtype"], t["shape"], blob[8 + n + b:8 + n + e])
    return out


def values(t):
    """A tensor's numbers as a flat list (bf16 widened by hand: struct has no bf16)."""
    dtype, shape, data = t
    if dtype == "BF16":
        return [struct.unpack("<f", b"\0\0" + data[i:i + 2])[0] for i in range(0, len(data), 2)]
    code, size = DTYPES[dtype]
    return list(struct.unpack("<%d%s" % (len(data) // size, code), data))


def e4m3(b):
    """OCP fp8 e4m3: bias 7, 3 mantissa bits, subnormals, no infinities; S.1111.111 is NaN."""
    need(b & 0x7F != 0x7F, "fp8 NaN in weights")
    e, m = (b >> 3) & 15, b & 7
    v = (1 + m / 8) * 2.0 ** (e - 7) if e else m / 8 * 2.0 ** -6
    return -v if b & 0x80 else v


def f32s(xs):
    """xs rounded to fp32, as their bytes (the product of a small integer or an e4m3 value and an
    fp32 scale is exact in a double, so this is fp32's own single rounding)."""
    return struct.pack("<%df" % len(xs), *xs)


def check_args(a, where, weights):
    need(isinstance(a, dict), where + ": not a mapping")
    need(a.get("num_bits") in (2, 3, 4, 8), where + ": num_bits")
    need(a.get("type") in ("int", "float"), where + ": type")
    need(isinstance(a.get("symmetric"), bool), where + ": symmetric")
    need(a.get("strategy") in STRATEGIES, where + ": strategy")
    need(isinstance(a.get("dynamic"), bool), where + ": dynamic")
    if weights:
        need(a["dynamic"] is False, where + ": weights are static")
        need(a["strategy"] in ("tensor", "channel", "group"), where + ": weight strategy")
        need((a.get("group_size") is not None) == (a["strategy"] == "group"), where + ": group_size")
        need(a.get("actorder") in (None, "weight", "group"), where + ": actorder")
        need(a["type"] == "int" or (a["num_bits"] == 8 and a["symmetric"]), where + ": fp8 weights")
    else:
        need(a["num_bits"] == 8 and a["strategy"] in ("token", "tensor"), where + ": activations")


def check_config(cfg, tensors):
    """The schema; returns (groups, ignore): group name -> its scheme, and the ignored modules."""
    floats = {t[0] for n, t in tensors.items() if not re.search(r"\.weight_(scale|zero_point|shape|packed)$", n)
              and t[0] in ("F32", "F16", "BF16")}
    need(TORCH.get(cfg.get("torch_dtype")) in floats or not floats, "torch_dtype is not the float tensors' dtype")
    need(len(floats) <= 1, "float tensors of more than one dtype: %s" % sorted(floats))
    qc = cfg.get("quantization_config")
    if qc is None:
        return {}, []
    for k in ("quant_method", "format", "quantization_status", "config_groups", "ignore", "kv_cache_scheme",
              "global_compression_ratio", "sparsity_config", "transform_config", "version"):
        need(k in qc, "quantization_config lacks " + k)
    need(qc["quant_method"] == "compressed-tensors", "quant_method")
    need(qc["quantization_status"] == "compressed", "quantization_status")
    groups = qc["config_groups"]
    formats = set()
    for g, s in groups.items():
        for k in ("targets", "weights", "input_activations", "output_activations", "format"):
            need(k in s, "%s lacks %s" % (g, k))
        need(s["format"] in FORMATS, g + ": format " + str(s["format"]))
        check_args(s["weights"], g + ".weights", True)
        if s["input_activations"] is not None:
            check_args(s["input_activations"], g + ".input_activations", False)
            need(s["input_activations"]["dynamic"], g + ": lmq's activations are dynamic")
        w, fmt = s["weights"], s["format"]
        # the format follows from the weights: fp8 float-quantized; W8A8 int-quantized; 4 and 8 bits
        # packed; the other widths naive
        want = ("float-quantized" if w["type"] == "float" else
                "int-quantized" if s["input_activations"] else
                "pack-quantized" if w["num_bits"] in (4, 8) else "naive-quantized")
        need(fmt == want, "%s: format %s, the spec's for its weights is %s" % (g, fmt, want))
        formats.add(fmt)
    need(qc["format"] == (formats.pop() if len(formats) == 1 else "mixed-precision"), "top-level format")
    return groups, qc["ignore"]


def group_of(module, groups):
    for g, s in groups.items():
        if "Linear" in s["targets"] or module in s["targets"]:
            return s
    raise Bad(module + ": in no config group")


def unpacked(words, rows, cols, bits):
    """The codes of pack-quantized int32 words, unsigned (code + 2^(bits-1)), row-major: code c of a
    row sits at bits [bits·(c mod 32/bits), ...) of word c / (32/bits). Whole words per row and 4 or
    8 bits: little-endian bytes hold the codes in column order (a nibble pair low first), read in
    bulk; otherwise code by code."""
    pf, mask = 32 // bits, (1 << bits) - 1
    data = words[2]
    if cols % pf == 0 and bits == 8:
        return list(data)
    if cols % pf == 0 and bits == 4:
        both = bytearray(2 * len(data))
        both[0::2] = data.translate(bytes(b & 15 for b in range(256)))
        both[1::2] = data.translate(bytes(b >> 4 for b in range(256)))
        return list(both)
    wpr = (cols + pf - 1) // pf
    ws = [x & 0xFFFFFFFF for x in values(words)]
    return [ws[r * wpr + c // pf] >> (bits * (c % pf)) & mask for r in range(rows) for c in range(cols)]


def dequantise(module, s, tensors):
    """The module's weight as fp32 bytes, row-major [out, in]. The codes are indices u into levels
    (the code values), so that a group's (level − zero)·scale is computed once per level where the
    group is longer than the levels, and looked up."""
    w, fmt = s["weights"], s["format"]
    bits = w["num_bits"]
    scale = tensors[module + ".weight_scale"]
    scales = values(scale)
    zp = tensors.get(module + ".weight_zero_point")
    need((zp is None) == w["symmetric"], module + ": zero points iff asymmetric")
    if fmt == "pack-quantized":
        rows, cols = values(tensors[module + ".weight_shape"])
        words = tensors[module + ".weight_packed"]
        need(words[0] == "I32", module + ": weight_packed dtype")
        pf, half = 32 // bits, 1 << (bits - 1)
        need(words[1] == [rows, (cols + pf - 1) // pf], module + ": weight_packed shape")
        u, levels = unpacked(words, rows, cols, bits), [i - half for i in range(1 << bits)]
    else:
        weight = tensors[module + ".weight"]
        rows, cols = weight[1]
        want = "F8_E4M3" if fmt == "float-quantized" else "I8"
        need(weight[0] == want, "%s: weight is %s, not %s" % (module, weight[0], want))
        u = list(weight[2])
        if want == "F8_E4M3":
            present = set(u)
            levels = [e4m3(b) if b in present else None for b in range(256)]
        else:
            levels = [b - 256 if b >= 128 else b for b in range(256)]
    strategy = w["strategy"]
    gs = w["group_size"] if strategy == "group" else cols
    need(strategy != "group" or cols % gs == 0, module + ": groups do not divide the row")
    groups = 1 if strategy == "tensor" else cols // gs
    need(scale[1] == ([1] if strategy == "tensor" else [rows, groups]), module + ": weight_scale shape")
    z = [0] * (rows * groups)
    if zp is not None and fmt == "pack-quantized":
        pf, mask, half = 32 // bits, (1 << bits) - 1, 1 << (bits - 1)
        need(zp[1] == [(rows + pf - 1) // pf, groups], module + ": weight_zero_point shape")
        zw = [x & 0xFFFFFFFF for x in values(zp)]
        z = [(zw[(r // pf) * groups + g] >> (bits * (r % pf)) & mask) - half for r in range(rows) for g in range(groups)]
    elif zp is not None:
        need(zp[1] == [rows, groups] and zp[0] == "I8", module + ": weight_zero_point")
        z = values(zp)
    vals = []
    looked_up = gs > len(levels)
    for r in range(rows):
        for g in range(groups):
            k = 0 if strategy == "tensor" else r * groups + g
            zk, sk, c0 = z[k], scales[k], r * cols + g * gs
            if looked_up:
                tab = [(v - zk) * sk if v is not None else None for v in levels]
                vals.extend(map(tab.__getitem__, u[c0:c0 + gs]))
            else:
                vals.extend([(levels[i] - zk) * sk for i in u[c0:c0 + gs]])
    return rows, cols, f32s(vals)


def as_f32(t):
    return f32s(values(t)) if t[0] != "F32" else t[2]


def main(export_dir, ref_dir):
    cfg = json.load(open(export_dir + "/config.json"))
    tensors = read_safetensors(export_dir + "/model.safetensors")
    ref = read_safetensors(ref_dir + "/model.safetensors")
    groups, ignore = check_config(cfg, tensors)
    gpt2 = cfg.get("model_type") == "gpt2"
    modules = sorted(n[:-len(".weight_scale")] for n in tensors if n.endswith(".weight_scale"))
    for m in modules:
        need(m not in ignore, m + ": quantised but ignored")
        rows, cols, got = dequantise(m, group_of(m, groups), tensors)
        want = ref[m + ".weight"]
        if gpt2 and CONV1D.match(m):  # the float reference keeps HF's Conv1D [in, out]
            need(want[1] == [cols, rows], m + ": reference shape")
            v, t = array.array("f", want[2]), array.array("f", bytes(4 * rows * cols))
            for r in range(rows):
                t[r * cols:(r + 1) * cols] = v[r::rows]
            want = ("F32", [rows, cols], t.tobytes())  # a permutation of whole 4-byte values: any byte order
        need(want[1] == [rows, cols], "%s: shape %s, reference %s" % (m, [rows, cols], want[1]))
        if got != want[2]:
            i = next(k for k in range(0, len(got), 4) if got[k:k + 4] != want[2][k:k + 4]) // 4
            raise Bad("%s [%d, %d]: %r, lmq %r" % (m, i // cols, i % cols, struct.unpack_from("<f", got, 4 * i)[0],
                                                  struct.unpack_from("<f", want[2], 4 * i)[0]))
    plain = [n for n in tensors if not any(n.startswith(m + ".") for m in modules)]
    for n in plain:
        need(n in ref and as_f32(tensors[n]) == as_f32(ref[n]), n + ": float tensor differs from the reference")
    print("ct_reader: %s: %d quantised modules equal lmq's decoding bit for bit, %d float tensors; format %s" %
          (export_dir, len(modules), len(plain), cfg.get("quantization_config", {}).get("format", "none")))


if __name__ == "__main__":
    if len(sys.argv) != 3:
        sys.exit(__doc__)
    try:
        main(sys.argv[1], sys.argv[2])
    except (Bad, KeyError, ValueError, OSError) as e:
        sys.exit("ct_reader: %s: %s" % (sys.argv[1], e))
