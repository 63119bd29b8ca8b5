/* kv_layout.h — where a KV cache page lives in device memory (k_kv_layout, k_kv_page): pages
 * are grouped in slabs (pool blocks); kernels that read or write the cache take a layout. */
#ifndef K_KV_LAYOUT_H
#define K_KV_LAYOUT_H

#include <stddef.h>
#include <stdint.h>

#ifdef __cplusplus
extern "C" {
#endif

/* Page p is in slab p / pages_per_slab; a slab is laid out
 *   [n_layers][2 (k, v)][pages_per_slab][page_tokens][n_kv_heads][head_dim] bf16,
 * so one page of one layer's k (or v) is page_tokens * n_kv_heads * head_dim contiguous
 * values, and cache slot s (= page * page_tokens + offset) of a layer is token offset
 * s % page_tokens of page s / page_tokens. slabs is a device array of device pointers. */
typedef struct k_kv_layout {
  void *const *slabs; /* device memory: [n_slabs] slab bases, 16-byte aligned */
  int n_slabs;
  int pages_per_slab;
  int page_tokens;
  int n_kv_heads;
  int head_dim;
  int n_layers;
} k_kv_layout;

/* Bytes of one slab of layout l. */
static inline size_t k_kv_slab_bytes(const k_kv_layout *l) {
  return (size_t)l->n_layers * 2 * (size_t)l->pages_per_slab * (size_t)l->page_tokens *
         (size_t)l->n_kv_heads * (size_t)l->head_dim * 2;
}

#ifdef __cplusplus
}
#endif

#ifdef __CUDACC__
#include <cuda_bf16.h>
/* First value of page `page` of layer `layer`'s k (kv 0) or v (kv 1). */
__device__ __forceinline__ __nv_bfloat16 *k_kv_page(const k_kv_layout &l, int layer, int kv,
                                                    int page) {
  int slab = page / l.pages_per_slab, in = page - slab * l.pages_per_slab;
  size_t page_elems = (size_t)l.page_tokens * l.n_kv_heads * l.head_dim;
  size_t at = ((size_t)(layer * 2 + kv) * l.pages_per_slab + in) * page_elems;
  return (__nv_bfloat16 *)l.slabs[slab] + at;
}
#endif
#endif
