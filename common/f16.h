/*
 * f16.h - IEEE 754 binary16 <-> binary32.
 *
 * f32 -> f16 rounds to nearest, ties to even; values beyond the f16 range
 * become infinities, tiny ones f16 subnormals or signed zeros; NaN stays NaN
 * (quiet, sign kept).  f16 -> f32 is exact.
 */
#ifndef NV_F16_H
#define NV_F16_H

#include <stddef.h>
#include <stdint.h>

float nv_f16_to_f32(uint16_t h);
uint16_t nv_f32_to_f16(float f);

/* bf16 (the top half of an f32) -> f32, exact */
float nv_bf16_to_f32(uint16_t b);
/* f32 -> bf16, round to nearest even, NaN kept */
uint16_t nv_f32_to_bf16(float f);

#endif
