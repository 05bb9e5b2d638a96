"""An independent Python reference of scout's tensor hash (schemas/tensor-hash.md, v2).

Written from the specification, not from the C++ code, so that the test vectors in
schemas/tensor-hash-vectors.json are checked by two implementations. Slow (pure Python):
use it for small tensors only.

    /usr/bin/python3 tensor_hash_ref.py --write-vectors ../../schemas/tensor-hash-vectors.json
regenerates the vectors file.
"""
import json
import struct
import sys

MASK = (1 << 64) - 1
POLY_LOW = 0x1B  # x^64 = x^4 + x^3 + x + 1 (mod P)
TAG = 0x73636F7574683032  # "scouth02"

DTYPES = {  # safetensors name -> (spec code, element size)
    "F64": (1, 8), "F32": (2, 4), "F16": (3, 2), "BF16": (4, 2), "I64": (5, 8), "I32": (6, 4),
    "I16": (7, 2), "I8": (8, 1), "U8": (9, 1), "BOOL": (10, 1), "F8_E4M3": (11, 1), "F8_E5M2": (12, 1),
    "U16": (13, 2), "U32": (14, 4), "U64": (15, 8),
}


def poly_mod(v):
    """Reduces a GF(2)[x] polynomial (a Python int, bit i = coefficient of x^i) modulo P."""
    p = (1 << 64) | POLY_LOW
    while v.bit_length() > 64:
        v ^= p << (v.bit_length() - 65)
    return v


def word_sum(data):
    """S: the data, read as 64-bit little-endian words w_k (last one zero-padded), as
    sum_k w_k x^(64k) mod P. Since w_k x^(64k) places word k's bits at 64k..64k+63, the
    whole sum is the data read as one little-endian integer, reduced mod P."""
    padded = bytes(data) + b"\0" * (-len(data) % 8)
    acc = 0
    for k in range(len(padded) // 8 - 1, -1, -1):  # Horner from the last word
        (w,) = struct.unpack_from("<Q", padded, 8 * k)
        acc = poly_mod(acc << 64) ^ w
    return acc


def fmix64(x):
    x ^= x >> 33
    x = (x * 0xFF51AFD7ED558CCD) & MASK
    x ^= x >> 33
    x = (x * 0xC4CEB9FE1A85EC53) & MASK
    x ^= x >> 33
    return x


def header_code(dtype, shape, byte_length):
    code, size = DTYPES[dtype]
    compact = code < 32 and len(shape) <= 15
    bits = code | (len(shape) << 5)
    pos = 9
    numel = 1
    for d in shape:
        if not compact:
            break
        if d < 0 or d >= 1 << 31:
            compact = False
            break
        n = d.bit_length()
        cost = 5 + max(n - 1, 0)
        if pos + cost > 63:
            compact = False
            break
        bits |= n << pos
        pos += 5
        if n > 1:
            bits |= (d & ((1 << (n - 1)) - 1)) << pos
            pos += n - 1
        numel *= d
    if compact and numel * size == byte_length:
        return bits
    h = fmix64(0xD16E57 ^ code)
    h = fmix64(h ^ len(shape))
    for d in shape:
        h = fmix64(h ^ (d & MASK))
    h = fmix64(h ^ byte_length)
    return h | (1 << 63)


def tensor_hash(dtype, shape, data):
    return fmix64(word_sum(data) ^ header_code(dtype, shape, len(data)) ^ TAG)


def splitmix64_bytes(seed, length):
    """The vectors' generator: consecutive splitmix64 outputs, little-endian, truncated."""
    out = bytearray()
    state = seed & MASK
    while len(out) < length:
        state = (state + 0x9E3779B97F4A7C15) & MASK
        z = state
        z = ((z ^ (z >> 30)) * 0xBF58476D1CE4E5B9) & MASK
        z = ((z ^ (z >> 27)) * 0x94D049BB133111EB) & MASK
        z ^= z >> 31
        out += struct.pack("<Q", z)
    return bytes(out[:length])


def vector_bytes(v):
    if "bytes_hex" in v:
        return bytes.fromhex(v["bytes_hex"])
    g = v["generator"]
    assert g["kind"] == "splitmix64"
    return splitmix64_bytes(g["seed"], g["length"])


def make_vectors():
    vs = []

    def add(name, dtype, shape, data=None, seed=None, length=None):
        v = {"name": name, "dtype": dtype, "shape": shape}
        if data is not None:
            v["bytes_hex"] = bytes(data).hex()
        else:
            v["generator"] = {"kind": "splitmix64", "seed": seed, "length": length}
        v["hash"] = "0x%016x" % tensor_hash(dtype, shape, vector_bytes(v))
        vs.append(v)

    add("empty f32", "F32", [0], b"")
    add("scalar f32 1.0", "F32", [], struct.pack("<f", 1.0))
    add("empty rank-2 f32", "F32", [0, 3], b"")
    add("u8 1 byte", "U8", [1], b"\x01")
    add("u8 3 bytes", "U8", [3], b"\x01\x02\x03")
    add("u8 4 bytes (trailing zero)", "U8", [4], b"\x01\x02\x03\x00")
    add("u8 8 bytes", "U8", [8], bytes(range(8)))
    add("u8 9 bytes", "U8", [9], bytes(range(9)))
    add("i64 single word", "I64", [1], struct.pack("<q", -1))
    add("f32 [4]", "F32", [4], struct.pack("<4f", 1, 2, 3, 4))
    add("f32 [2,2] same bytes", "F32", [2, 2], struct.pack("<4f", 1, 2, 3, 4))
    add("i32 [4] same bytes", "I32", [4], struct.pack("<4f", 1, 2, 3, 4))
    add("bf16 [8] same bytes", "BF16", [8], struct.pack("<4f", 1, 2, 3, 4))
    for n in (15, 16, 17, 127, 128, 129, 255, 256, 257, 511, 512, 513, 1000, 1023, 1024, 1025, 4096, 4101, 65536, 65543):
        add("u8 splitmix %d" % n, "U8", [n], seed=n, length=n)
    add("f32 [33,65] splitmix", "F32", [33, 65], seed=7, length=33 * 65 * 4)
    add("bf16 [3,5,7] splitmix", "BF16", [3, 5, 7], seed=11, length=3 * 5 * 7 * 2)
    add("f64 [1024,3] splitmix", "F64", [1024, 3], seed=13, length=1024 * 3 * 8)
    add("u8 1 MiB + 3 splitmix", "U8", [(1 << 20) + 3], seed=17, length=(1 << 20) + 3)
    add("f32 big shape (digest header)", "F32", [1 << 20, 1, 1, 1, 1, 1, 1, 1, 1, 1, 1, 1, 0], b"")
    return {
        "schema": "scout.tensor-hash-vectors",
        "spec_version": 2,
        "generator": "splitmix64: state = seed; for each 8 bytes: state += 0x9E3779B97F4A7C15; "
                     "z = state; z = (z ^ z>>30) * 0xBF58476D1CE4E5B9; z = (z ^ z>>27) * 0x94D049BB133111EB; "
                     "z ^= z>>31; emit z little-endian; truncate to length",
        "hash_format": "\"0x\" and 16 lowercase hex digits of the 64-bit hash",
        "vectors": vs,
    }


if __name__ == "__main__":
    if len(sys.argv) == 3 and sys.argv[1] == "--write-vectors":
        with open(sys.argv[2], "w") as f:
            json.dump(make_vectors(), f, indent=1)
            f.write("\n")
    else:
        print(__doc__)
