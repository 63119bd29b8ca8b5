/* embed.h — CPU reference of the token embedding gather (ref_embed).
 * fp32 throughout: the CPU backend converts bf16/f16 weights to fp32 at load. */
#ifndef K_REF_EMBED_H
#define K_REF_EMBED_H

#include <stdint.h>

#ifdef __cplusplus
extern "C" {
#endif

/* out[t, :] = table[ids[t], :] for t < n_tokens. table is [vocab, hidden] row-major,
 * out rows are ldo floats apart (ldo >= hidden). Returns 0, or NS_ERANGE when an id is
 * outside [0, vocab) (rows before it are written). Any thread; no allocation. */
int ref_embed(float *out, int ldo, const float *table, const int32_t *ids, int n_tokens, int hidden,
              int vocab);

#ifdef __cplusplus
}
#endif
#endif
