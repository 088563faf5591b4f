// bf16 storage (simd/bf16.h): a bf16 element is the upper 16 bits of an fp32, held in a uint16_t
// array (GL_EXT_shader_16bit_storage, device feature storageBuffer16BitAccess), so every element is
// loaded and stored on its own (no read-modify-write of a neighbour). Arithmetic stays fp32:
//   bf16 -> fp32: exact, the bits shifted up by 16;
//   fp32 -> bf16: round to nearest, ties to even, on the bits: u + 0x7fff + (bit 16 of u), the
//                 upper half; a NaN keeps its sign and gets its quiet bit (never rounds to inf);
//                 infinities, signed zeros and subnormals follow from the same rule, and values
//                 above bf16's largest finite round to infinity, as float_to_bf16 does.
#extension GL_EXT_shader_16bit_storage : require
#extension GL_EXT_shader_explicit_arithmetic_types_int16 : require

// The conversions between a buffer element and an fp32 are macros: a function with a uint16_t
// parameter or result would hold a 16-bit value outside a buffer, which needs the Int16
// capability (shaderInt16); a load converted at once, or a conversion stored at once, needs only
// StorageBuffer16BitAccess.
#define bf16_to_float(h) uintBitsToFloat(uint(h) << 16)

// The bf16 bits (in the low 16 bits of the result) of the fp32 with bits u.
uint bf16_bits_of(uint u) {
  if ((u & 0x7fffffffu) > 0x7f800000u) return (u >> 16) | 0x40u;  // NaN: quiet, keep the sign
  u += 0x7fffu + ((u >> 16) & 1u);
  return u >> 16;
}
uint bf16_bits(float x) { return bf16_bits_of(floatBitsToUint(x)); }

#define float_to_bf16(x) uint16_t(bf16_bits(x))

// x rounded to the nearest bf16, as an fp32 (what a bf16 store and load give back).
float round_bf16(float x) { return uintBitsToFloat(bf16_bits(x) << 16); }
