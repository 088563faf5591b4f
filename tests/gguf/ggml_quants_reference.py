#!/usr/bin/python3
"""The reference of the Q8_0 and Q4_0 tests: ggml-quants.c's quantize_row_q8_0_ref and
quantize_row_q4_0_ref (llama.cpp's reference quantizers), transcribed from their C with numpy's
float32 arithmetic, and the blocks' dequantization.

  ggml_quants_reference.py IN.f32 OUT_PREFIX

IN.f32 holds n float32 values (n a multiple of 32). Writes OUT_PREFIX.q8_0 and OUT_PREFIX.q4_0 (the
blocks as ggml-common.h lays them out: an fp16 scale, then 32 int8 values or 16 bytes of nibbles)
and OUT_PREFIX.q8_0.f32, OUT_PREFIX.q4_0.f32 (the values the blocks give back).

The C, per block of 32:
  q8_0: amax = MAX(amax, fabsf(v)); d = amax / ((1 << 7) - 1); id = d ? 1.0f/d : 0.0f;
        y.d = GGML_FP32_TO_FP16(d); y.qs[j] = roundf(x[j]*id);
  q4_0: if (amax < fabsf(v)) { amax = fabsf(v); max = v; }  d = max / -8; id = d ? 1.0f/d : 0.0f;
        y.d = GGML_FP32_TO_FP16(d); xi0 = MIN(15, (int8_t)(x0 + 8.5f)) with x0 = x[j]*id, and
        xi1 likewise for x[16 + j]; y.qs[j] = xi0 | (xi1 << 4).
roundf rounds halves away from zero; (int8_t) of a float truncates toward zero; GGML_FP32_TO_FP16
rounds to the nearest even fp16; every product and sum is fp32.
"""
import sys

import numpy as np

f32 = np.float32


def roundf(v):
    # Halves away from zero. v + 0.5 in float64 is exact for a float32 v, so floor sees the true sum.
    a = np.floor(np.abs(np.float64(v)) + 0.5)
    return int(-a if v < 0 else a)


def q8_0(x):
    out, back = bytearray(), []
    for b in range(0, len(x), 32):
        blk = x[b:b + 32]
        amax = f32(0)
        for v in blk:
            a = f32(abs(v))
            amax = amax if amax > a else a
        d = f32(amax / f32(127))
        i = f32(f32(1) / d) if d != 0 else f32(0)
        h = np.float16(d)
        out += h.tobytes()
        for v in blk:
            q = roundf(f32(v * i))
            out += np.int8(q).tobytes()
            back.append(f32(f32(q) * f32(h)))
    return bytes(out), np.array(back, dtype=f32)


def q4_0(x):
    out, back = bytearray(), []
    for b in range(0, len(x), 32):
        blk = x[b:b + 32]
        amax, mx = f32(0), f32(0)
        for v in blk:
            if amax < f32(abs(v)):
                amax, mx = f32(abs(v)), v
        d = f32(mx / f32(-8))
        i = f32(f32(1) / d) if d != 0 else f32(0)
        h = np.float16(d)
        out += h.tobytes()
        q = [min(15, int(np.trunc(f32(f32(v * i) + f32(8.5))))) for v in blk]
        out += bytes(q[j] | (q[16 + j] << 4) for j in range(16))
        back += [f32(f32(v - 8) * f32(h)) for v in q]
    return bytes(out), np.array(back, dtype=f32)


def main():
    x = np.fromfile(sys.argv[1], dtype=np.float32)
    assert len(x) % 32 == 0, "n must be a multiple of 32"
    with np.errstate(over="ignore"):
        for name, fn in (("q8_0", q8_0), ("q4_0", q4_0)):
            blocks, back = fn(x)
            with open(f"{sys.argv[2]}.{name}", "wb") as f:
                f.write(blocks)
            back.tofile(f"{sys.argv[2]}.{name}.f32")


if __name__ == "__main__":
    main()
