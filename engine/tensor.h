/* tensor.h — the plain tensor descriptor every engine module and backend shares:
 * a data pointer (host or device, per backend), a dtype and a row-major shape. */
#ifndef ENG_TENSOR_H
#define ENG_TENSOR_H

#include <stddef.h>
#include <stdint.h>

#ifdef __cplusplus
extern "C" {
#endif

typedef enum ns_dtype { NS_F32 = 0, NS_F16 = 1, NS_BF16 = 2, NS_I32 = 3 } ns_dtype;

#define TENSOR_MAX_DIMS 4

/* Contiguous, row-major: shape[ndim-1] varies fastest. The tensor does not own
 * data (it points into a mapped file, a backend arena or a caller's buffer). */
typedef struct tensor_t {
  void *data;
  ns_dtype dtype;
  int ndim;
  int64_t shape[TENSOR_MAX_DIMS];
} tensor_t;

size_t ns_dtype_size(ns_dtype dt);
const char *ns_dtype_name(ns_dtype dt);
int64_t tensor_numel(const tensor_t *t);
size_t tensor_nbytes(const tensor_t *t);

/* Scalar conversions (round-to-nearest-even for the narrowing ones). */
float ns_bf16_to_f32(uint16_t h);
uint16_t ns_f32_to_bf16(float f);
float ns_f16_to_f32(uint16_t h);
uint16_t ns_f32_to_f16(float f);
/* Convert n elements of src (dtype sdt) into dst floats. */
void ns_convert_to_f32(float *dst, const void *src, ns_dtype sdt, size_t n);

#ifdef __cplusplus
}
#endif
#endif
