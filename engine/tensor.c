/* tensor.c — dtype sizes, names and the scalar bf16/f16/f32 conversions that
 * loaders and the CPU backend share (tensor.h). */
#include "tensor.h"

#include <math.h>
#include <string.h>

size_t ns_dtype_size(ns_dtype dt) {
  switch (dt) {
  case NS_F32: return 4;
  case NS_F16: return 2;
  case NS_BF16: return 2;
  case NS_I32: return 4;
  }
  return 0;
}

const char *ns_dtype_name(ns_dtype dt) {
  switch (dt) {
  case NS_F32: return "F32";
  case NS_F16: return "F16";
  case NS_BF16: return "BF16";
  case NS_I32: return "I32";
  }
  return "?";
}

int64_t tensor_numel(const tensor_t *t) {
  int64_t n = 1;
  for (int i = 0; i < t->ndim; i++)
    n *= t->shape[i];
  return n;
}

size_t tensor_nbytes(const tensor_t *t) {
  return (size_t)tensor_numel(t) * ns_dtype_size(t->dtype);
}

float ns_bf16_to_f32(uint16_t h) {
  uint32_t u = (uint32_t)h << 16;
  float f;
  memcpy(&f, &u, 4);
  return f;
}

uint16_t ns_f32_to_bf16(float f) {
  uint32_t u;
  memcpy(&u, &f, 4);
  if ((u & 0x7fffffffu) > 0x7f800000u) return (uint16_t)((u >> 16) | 0x40); /* quiet NaN */
  u += 0x7fffu + ((u >> 16) & 1u);                                          /* nearest even */
  return (uint16_t)(u >> 16);
}

float ns_f16_to_f32(uint16_t h) {
  uint32_t sign = (uint32_t)(h & 0x8000u) << 16;
  uint32_t exp = (h >> 10) & 0x1fu;
  uint32_t man = h & 0x3ffu;
  uint32_t u;
  if (exp == 0) {
    if (man == 0) {
      u = sign;
    } else { /* subnormal: renormalise */
      int e = -1;
      do {
        e++;
        man <<= 1;
      } while ((man & 0x400u) == 0);
      u = sign | ((uint32_t)(127 - 15 - e) << 23) | ((man & 0x3ffu) << 13);
    }
  } else if (exp == 31) {
    u = sign | 0x7f800000u | (man << 13);
  } else {
    u = sign | ((exp + 127 - 15) << 23) | (man << 13);
  }
  float f;
  memcpy(&f, &u, 4);
  return f;
}

uint16_t ns_f32_to_f16(float f) {
  uint32_t u;
  memcpy(&u, &f, 4);
  uint32_t sign = (u >> 16) & 0x8000u;
  uint32_t absu = u & 0x7fffffffu;
  if (absu > 0x7f800000u) return (uint16_t)(sign | 0x7e00u);  /* NaN */
  if (absu >= 0x477ff000u) return (uint16_t)(sign | 0x7c00u); /* overflow -> inf */
  if (absu < 0x38800000u) {                                   /* subnormal or zero */
    float a;
    memcpy(&a, &absu, 4);
    /* scale so the f16 subnormal unit (2^-24) becomes 1, round to nearest even */
    float scaled = a * 16777216.0f;
    uint32_t m = (uint32_t)nearbyintf(scaled);
    return (uint16_t)(sign | m);
  }
  uint32_t exp = ((absu >> 23) - 127 + 15);
  uint32_t man = absu & 0x7fffffu;
  uint32_t h = (exp << 10) | (man >> 13);
  uint32_t rest = man & 0x1fffu;
  if (rest > 0x1000u || (rest == 0x1000u && (h & 1u))) h++;
  return (uint16_t)(sign | h);
}

void ns_convert_to_f32(float *dst, const void *src, ns_dtype sdt, size_t n) {
  const uint16_t *s16 = src;
  switch (sdt) {
  case NS_F32: memcpy(dst, src, n * 4); break;
  case NS_BF16:
    for (size_t i = 0; i < n; i++)
      dst[i] = ns_bf16_to_f32(s16[i]);
    break;
  case NS_F16:
    for (size_t i = 0; i < n; i++)
      dst[i] = ns_f16_to_f32(s16[i]);
    break;
  case NS_I32:
    for (size_t i = 0; i < n; i++)
      dst[i] = (float)((const int32_t *)src)[i];
    break;
  }
}
