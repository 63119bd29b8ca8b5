/* cuda_weights.c — the CUDA backend's weights: converted to bf16 on the host (from bf16,
 * f16 or f32), fused (q|k|v, gate|up) and uploaded through a pinned double buffer into
 * slabs of pool memory. Entry point: cu_load_weights. */
#include "cuda_int.h"

#include "ns_cuda.h"
#include "ns_err.h"
#include "ns_log.h"
#include "ref/rope_kv.h"

#include <stdlib.h>
#include <string.h>

#define WSLAB                                                                                      \
  (256ull << 20) /* weights share pool blocks of this size; larger ones get their own              \
                  */
#define WALIGN 256ull
#define STAGE  (16ull << 20) /* bytes per half of the pinned staging buffer */

/* One device tensor to fill: the concatenation of n sources' rows. */
typedef struct witem {
  tensor_t *dst;
  const tensor_t *src[3];
  int64_t rows[3];
  int n;
  int64_t cols; /* 1 for vectors */
  const char *what;
  uint64_t bytes;
  char *dev;
} witem;

typedef struct stager {
  cu_be *c;
  uint16_t *buf[2];
  cudaEvent_t ev[2];
  int cur;
} stager;

void cu_free_weights(cu_be *c) {
  cu_step_bufs_free(c); /* sized for the model: load_weights makes them again */
  for (int i = 0; i < c->n_wblk; i++)
    mem_pool_free(c->pool, c->wblk[i]);
  free(c->wblk);
  c->wblk = NULL;
  c->n_wblk = c->cap_wblk = 0;
  free(c->base.w.layers);
  memset(&c->base.w, 0, sizeof c->base.w);
  c->inv_freq = NULL;
  c->stats.weight_bytes = 0;
}

static int wblock(cu_be *c, uint64_t bytes, char **out) {
  if (c->n_wblk == c->cap_wblk) {
    int cap = c->cap_wblk ? 2 * c->cap_wblk : 16;
    void **p = realloc(c->wblk, (size_t)cap * sizeof *p);
    if (!p) return NS_ENOMEM;
    c->wblk = p;
    c->cap_wblk = cap;
  }
  void *d;
  int rc = mem_pool_alloc(c->pool, bytes, &d);
  if (rc) {
    ns_log_error("cuda backend: weights: no pool block of %llu bytes", (unsigned long long)bytes);
    return rc;
  }
  c->wblk[c->n_wblk++] = d;
  c->stats.weight_bytes += mem_pool_block_size(c->pool, d);
  *out = d;
  return 0;
}

static uint64_t pow2ceil(uint64_t v) {
  uint64_t p = 1;
  while (p < v)
    p <<= 1;
  return p;
}

/* Give every item a device address: bump allocation through WSLAB slabs. */
static int place(cu_be *c, witem *it, int n) {
  uint64_t left = 0;
  for (int i = 0; i < n; i++)
    if (it[i].bytes <= WSLAB) left += it[i].bytes;
  char *slab = NULL;
  uint64_t size = 0, used = 0;
  for (int i = 0; i < n; i++) {
    int rc;
    if (it[i].bytes > WSLAB) {
      if ((rc = wblock(c, it[i].bytes, &it[i].dev))) return rc;
      continue;
    }
    if (!slab || used + it[i].bytes > size) {
      size = pow2ceil(left) < WSLAB ? pow2ceil(left) : WSLAB;
      if ((rc = wblock(c, size, &slab))) return rc;
      used = 0;
    }
    it[i].dev = slab + used;
    used += it[i].bytes;
    left -= it[i].bytes;
  }
  return 0;
}

static void to_bf16(uint16_t *d, const void *s, ns_dtype dt, size_t n) {
  if (dt == NS_BF16) {
    memcpy(d, s, n * 2);
  } else if (dt == NS_F16) {
    for (size_t i = 0; i < n; i++)
      d[i] = ns_f32_to_bf16(ns_f16_to_f32(((const uint16_t *)s)[i]));
  } else {
    for (size_t i = 0; i < n; i++)
      d[i] = ns_f32_to_bf16(((const float *)s)[i]);
  }
}

/* Convert n elements of src into device memory at dst through the staging halves. */
static int stage(stager *s, char *dst, const void *src, ns_dtype dt, size_t n) {
  size_t per = STAGE / 2 / sizeof(uint16_t), es = ns_dtype_size(dt); /* elements a half holds */
  for (size_t i = 0; i < n; i += per) {
    size_t k = n - i < per ? n - i : per;
    int h = s->cur;
    s->cur ^= 1;
    NS_CUDA_CHECK(cudaEventSynchronize(s->ev[h])); /* the copy that last used this half */
    to_bf16(s->buf[h], (const char *)src + i * es, dt, k);
    NS_CUDA_CHECK(cudaMemcpyAsync(dst + i * 2, s->buf[h], k * 2, cudaMemcpyHostToDevice, s->c->st));
    NS_CUDA_CHECK(cudaEventRecord(s->ev[h], s->c->st));
  }
  return 0;
}

static int check_src(const witem *w) {
  int present = 0;
  for (int i = 0; i < w->n; i++)
    present += w->src[i]->data != NULL;
  if (present != w->n) {
    ns_log_error("cuda backend: weight %s is missing", w->what);
    return NS_EINVAL;
  }
  for (int i = 0; i < w->n; i++) {
    ns_dtype dt = w->src[i]->dtype;
    if (tensor_numel(w->src[i]) != w->rows[i] * w->cols ||
        (dt != NS_F32 && dt != NS_F16 && dt != NS_BF16)) {
      ns_log_error("cuda backend: weight %s has an unexpected shape or dtype", w->what);
      return NS_EINVAL;
    }
  }
  return 0;
}

static void add(witem *it, int *n, tensor_t *dst, const tensor_t *const *src, const int64_t *rows,
                int k, int64_t cols, const char *what) {
  witem *w = &it[(*n)++];
  memset(w, 0, sizeof *w);
  w->dst = dst;
  w->n = k;
  w->cols = cols;
  w->what = what;
  int64_t total = 0;
  for (int i = 0; i < k; i++) {
    w->src[i] = src[i];
    w->rows[i] = rows[i];
    total += rows[i];
  }
  w->bytes = ((uint64_t)(total * cols) * 2 + WALIGN - 1) / WALIGN * WALIGN;
  dst->dtype = NS_BF16;
  dst->ndim = cols == 1 ? 1 : 2;
  dst->shape[0] = total;
  dst->shape[1] = cols == 1 ? 0 : cols;
}

int cu_load_weights(backend_t *be, const model_t *m) {
  cu_be *c = cu_impl(be);
  const model_cfg *g = &m->cfg;
  if (c->parent) return NS_EINVAL; /* a lane uses its parent's */
  cu_free_weights(c);
  if (c->dead) return NS_ECUDA;
  if (g->n_layers <= 0 || g->hidden <= 0 || g->vocab_size <= 0 || g->n_heads <= 0 ||
      g->n_kv_heads <= 0 || g->n_heads % g->n_kv_heads || g->head_dim <= 0 ||
      g->intermediate <= 0) {
    ns_log_error("cuda backend: unsupported model dimensions");
    return NS_EUNSUPPORTED;
  }
  if (g->head_dim % 8 || g->head_dim > 256 || g->n_heads / g->n_kv_heads > 16) {
    ns_log_error("cuda backend: head_dim %d / GQA group %d unsupported (head_dim must be a "
                 "multiple of 8 up to 256, the group at most 16)",
                 g->head_dim, g->n_heads / g->n_kv_heads);
    return NS_EUNSUPPORTED;
  }
  be->cfg = *g;
  int64_t H = g->hidden, V = g->vocab_size, I = g->intermediate;
  int64_t qd = (int64_t)g->n_heads * g->head_dim, kvd = (int64_t)g->n_kv_heads * g->head_dim;
  be_weights *w = &be->w;
  int rc = NS_ENOMEM, n = 0;
  stager s = {c, {NULL, NULL}, {NULL, NULL}, 0};
  witem *it = calloc((size_t)(3 + 8 * g->n_layers), sizeof *it);
  w->layers = calloc((size_t)g->n_layers, sizeof *w->layers);
  float *inv = malloc((size_t)g->head_dim / 2 * sizeof *inv);
  if (!it || !w->layers || !inv) goto err;

  int64_t one_v = V, one_h = H;
  const tensor_t *e1[1] = {&m->embed}, *n1[1] = {&m->final_norm}, *l1[1] = {&m->lm_head};
  add(it, &n, &w->embed, e1, &one_v, 1, H, "embed_tokens");
  add(it, &n, &w->final_norm, n1, &one_h, 1, 1, "norm");
  int tied = m->lm_head.data == NULL || m->lm_head.data == m->embed.data;
  if (!tied) add(it, &n, &w->lm_head, l1, &one_v, 1, H, "lm_head");
  for (int l = 0; l < g->n_layers; l++) {
    const layer_weights *sl = &m->layers[l];
    be_layer *d = &w->layers[l];
    const tensor_t *qkv[3] = {&sl->wq, &sl->wk, &sl->wv}, *bqkv[3] = {&sl->bq, &sl->bk, &sl->bv};
    const tensor_t *gu[2] = {&sl->w_gate, &sl->w_up};
    const tensor_t *an[1] = {&sl->attn_norm}, *mn[1] = {&sl->mlp_norm}, *wo[1] = {&sl->wo};
    const tensor_t *wd[1] = {&sl->w_down};
    int64_t qkv_rows[3] = {qd, kvd, kvd}, gu_rows[2] = {I, I};
    add(it, &n, &d->attn_norm, an, &one_h, 1, 1, "input_layernorm");
    add(it, &n, &d->wqkv, qkv, qkv_rows, 3, H, "q/k/v_proj");
    int nb = (sl->bq.data != NULL) + (sl->bk.data != NULL) + (sl->bv.data != NULL);
    if (nb) add(it, &n, &d->bqkv, bqkv, qkv_rows, 3, 1, "q/k/v_proj.bias");
    add(it, &n, &d->wo, wo, &one_h, 1, qd, "o_proj");
    add(it, &n, &d->mlp_norm, mn, &one_h, 1, 1, "post_attention_layernorm");
    add(it, &n, &d->w_gate_up, gu, gu_rows, 2, H, "gate/up_proj");
    add(it, &n, &d->w_down, wd, &one_h, 1, I, "down_proj");
  }
  for (int i = 0; i < n; i++)
    if ((rc = check_src(&it[i]))) goto err;
  if ((rc = place(c, it, n))) goto err;
  /* inv_freq gets a block of its own (small: one min_block) */
  char *fblk;
  if ((rc = wblock(c, (uint64_t)g->head_dim / 2 * sizeof(float), &fblk))) goto err;
  c->inv_freq = (float *)fblk;

  rc = NS_ECUDA;
  void *hb;
  if (mem_pool_alloc(c->pinned, STAGE, &hb)) {
    rc = NS_ENOMEM;
    goto err;
  }
  s.buf[0] = hb;
  s.buf[1] = (uint16_t *)((char *)hb + STAGE / 2);
  if (cudaEventCreateWithFlags(&s.ev[0], cudaEventDisableTiming) != cudaSuccess ||
      cudaEventCreateWithFlags(&s.ev[1], cudaEventDisableTiming) != cudaSuccess)
    goto err;
  for (int i = 0; i < n; i++) {
    char *dst = it[i].dev;
    for (int k = 0; k < it[i].n; k++) {
      size_t cnt = (size_t)(it[i].rows[k] * it[i].cols);
      if ((rc = stage(&s, dst, it[i].src[k]->data, it[i].src[k]->dtype, cnt))) goto err;
      dst += cnt * 2;
    }
    it[i].dst->data = it[i].dev;
  }
  if (tied) w->lm_head = w->embed;
  ref_rope_inv_freq(inv, g->head_dim, g->rope_theta, (int)g->rope, g->rope_factor,
                    g->rope_low_freq_factor, g->rope_high_freq_factor, g->rope_original_max_pos);
  if (cudaMemcpyAsync(c->inv_freq, inv, (size_t)g->head_dim / 2 * sizeof(float),
                      cudaMemcpyHostToDevice, c->st) != cudaSuccess ||
      cudaStreamSynchronize(c->st) != cudaSuccess) {
    ns_log_error("cuda backend: weight upload failed: %s", cudaGetErrorString(cudaGetLastError()));
    rc = NS_ECUDA;
    goto err;
  }
  rc = 0;
  goto end;
err:
  if (s.buf[0]) cudaStreamSynchronize(c->st); /* the staging buffer goes back to the pool */
  cu_free_weights(c);
end:
  for (int i = 0; i < 2; i++)
    if (s.ev[i]) cudaEventDestroy(s.ev[i]);
  if (s.buf[0]) mem_pool_free(c->pinned, s.buf[0]);
  free(it);
  free(inv);
  if (rc == 0) {
    rc = cu_step_bufs_ensure(c, c->sb.cap_tok > c->init_tok ? c->sb.cap_tok : c->init_tok,
                             c->sb.cap_pages, c->sb.cap_hist);
    if (rc) cu_free_weights(c);
  }
  return cu_done(c, rc);
}
