/* gather.h — row gathers on the GPU: the token embedding lookup (k_embed) and the copy of
 * the rows whose logits are wanted (k_gather_rows). bf16 rows; references: ref/embed.h. */
#ifndef K_GATHER_H
#define K_GATHER_H

#include <cuda_runtime.h>
#include <stdint.h>

#ifdef __cplusplus
extern "C" {
#endif

/* out[t, :] = table[ids[t], :] for t < n_tokens; table [vocab, hidden] bf16, out rows ldo
 * values apart; ids in device memory. An id outside [0, vocab) gives a zero row (the
 * caller validates ids on the host). Returns 0, NS_EINVAL or NS_ECUDA. */
int k_embed(void *out, int ldo, const void *table, const int32_t *ids, int n_tokens, int hidden,
            int vocab, cudaStream_t st);

/* dst[i, :] = src[rows[i], :] for i < n (bf16, `cols` values; src rows lds apart, dst rows
 * ldd apart); rows in device memory; dst must not overlap src. Returns 0, NS_EINVAL or
 * NS_ECUDA. */
int k_gather_rows(void *dst, int ldd, const void *src, int lds, const int32_t *rows, int n,
                  int cols, cudaStream_t st);

#ifdef __cplusplus
}
#endif
#endif
