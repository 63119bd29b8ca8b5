/* cuda_gemm.c — the CUDA backend's GEMMs: row-major y = x . w^T through cuBLASLt as the
 * column-major D[N, T] = W^T[N, K] . X[K, T], descriptors, layouts and algorithms cached per
 * shape and alignment, or through kernels/gemm.cu. Batch-invariant by default: one cuBLASLt
 * algorithm that does not split K pinned per (N, K, layout, alignment) for every T (the
 * heuristic's pick per T can split K for some T and not others: a row's bits then depend on
 * how many rows share the call). Entry points: cu_gemm_run; cu_gemm_run_dec (k_gemm_dec, K in
 * fixed segments) for decode steps. */
#include "cuda_gemm.h"

#include "gemm.h"
#include "ns_cuda.h"
#include "ns_err.h"

#include <cublasLt.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#define CACHE_SLOTS 1024 /* open addressing; flushed when 3/4 full */

typedef struct gkey {
  int T, N, K, ldx, ldy, y_f32, bias;
  int al_x, al_w, al_y; /* pointer alignments (bytes, up to 256) the algorithm may assume */
} gkey;

typedef struct gent {
  int used;
  gkey k;
  cublasLtMatmulDesc_t desc;
  cublasLtMatrixLayout_t a, b, c;
  cublasLtMatmulAlgo_t algo;
  int own; /* T 0 entries: no cuBLASLt algorithm runs every T; kernels/gemm.cu does */
} gent;

struct cu_gemm {
  int mode, n_sm;
  cublasLtHandle_t h;
  void *ws;
  size_t ws_bytes;
  void *dec_ws; /* k_gemm_dec's, counters zeroed at create */
  size_t dec_ws_bytes;
  gent *slots;
  int n_used;
};

static void ent_clear(gent *e) {
  if (!e->used) return;
  if (e->desc) cublasLtMatmulDescDestroy(e->desc);
  if (e->a) cublasLtMatrixLayoutDestroy(e->a);
  if (e->b) cublasLtMatrixLayoutDestroy(e->b);
  if (e->c) cublasLtMatrixLayoutDestroy(e->c);
  memset(e, 0, sizeof *e);
}

static void flush(cu_gemm *g) {
  for (int i = 0; i < CACHE_SLOTS; i++)
    ent_clear(&g->slots[i]);
  g->n_used = 0;
}

int cu_gemm_mode_parse(const char *s) {
  if (!s || !*s) return -1;
  static const char *names[] = {"own", "pinned", "nosplit", "heuristic"};
  for (int i = 0; i < 4; i++)
    if (!strcmp(s, names[i])) return i;
  return -1;
}

const char *cu_gemm_mode_name(int mode) {
  static const char *names[] = {"own", "pinned", "nosplit", "heuristic"};
  return mode >= 0 && mode < 4 ? names[mode] : "?";
}

int cu_gemm_create(void *workspace, size_t ws_bytes, void *dec_ws, size_t dec_ws_bytes, int mode,
                   int n_sm, cu_gemm **out) {
  *out = NULL;
  if (mode < CU_GEMM_OWN || mode > CU_GEMM_HEURISTIC) return NS_EINVAL;
  if (!dec_ws) dec_ws_bytes = 0;
  if (dec_ws_bytes) { /* the counters start at zero; device memory, so memset then wait */
    NS_CUDA_CHECK(cudaMemset(dec_ws, 0, dec_ws_bytes));
    NS_CUDA_CHECK(cudaDeviceSynchronize());
  }
  cu_gemm *g = calloc(1, sizeof *g);
  if (!g) return NS_ENOMEM;
  g->mode = mode;
  g->n_sm = n_sm;
  g->slots = calloc(CACHE_SLOTS, sizeof *g->slots);
  if (!g->slots) {
    free(g);
    return NS_ENOMEM;
  }
  cublasStatus_t st = cublasLtCreate(&g->h);
  if (st != CUBLAS_STATUS_SUCCESS) {
    free(g->slots);
    free(g);
    NS_CUBLAS_CHECK(st);
  }
  g->ws = workspace;
  g->ws_bytes = ws_bytes;
  g->dec_ws = dec_ws;
  g->dec_ws_bytes = dec_ws_bytes;
  *out = g;
  return 0;
}

void cu_gemm_destroy(cu_gemm *g) {
  if (!g) return;
  flush(g);
  free(g->slots);
  cublasLtDestroy(g->h);
  free(g);
}

static int align_of(const void *p) {
  uintptr_t v = (uintptr_t)p;
  int a = 256;
  while (a > 2 && (v & (uintptr_t)(a - 1)))
    a >>= 1;
  return a;
}

static uint32_t khash(const gkey *k) {
  const uint32_t *w = (const uint32_t *)k;
  uint32_t h = 2166136261u;
  for (size_t i = 0; i < sizeof *k / 4; i++)
    h = (h ^ w[i]) * 16777619u;
  return h;
}

/* Build descriptors and pick an algorithm for key k into e (cleared on failure). */
static int ent_build(cu_gemm *g, gent *e, const gkey *k) {
  cublasLtMatmulPreference_t pref = NULL;
  int rc = 0;
  e->used = 1;
  e->k = *k;
  cudaDataType_t dt = k->y_f32 ? CUDA_R_32F : CUDA_R_16BF;
  cublasOperation_t tA = CUBLAS_OP_T, tB = CUBLAS_OP_N;
#define TRYB(stmt)                                                                                 \
  do {                                                                                             \
    cublasStatus_t s_ = (stmt);                                                                    \
    if (s_ != CUBLAS_STATUS_SUCCESS) {                                                             \
      ns_log_error("cuBLAS: %s failed: status %d (%s:%d)", #stmt, (int)s_, __FILE__, __LINE__);    \
      rc = NS_ECUDA;                                                                               \
      goto end;                                                                                    \
    }                                                                                              \
  } while (0)
  TRYB(cublasLtMatmulDescCreate(&e->desc, CUBLAS_COMPUTE_32F, CUDA_R_32F));
  TRYB(cublasLtMatmulDescSetAttribute(e->desc, CUBLASLT_MATMUL_DESC_TRANSA, &tA, sizeof tA));
  TRYB(cublasLtMatmulDescSetAttribute(e->desc, CUBLASLT_MATMUL_DESC_TRANSB, &tB, sizeof tB));
  if (k->bias) {
    cublasLtEpilogue_t ep = CUBLASLT_EPILOGUE_BIAS;
    cudaDataType_t bt = CUDA_R_16BF;
    TRYB(cublasLtMatmulDescSetAttribute(e->desc, CUBLASLT_MATMUL_DESC_EPILOGUE, &ep, sizeof ep));
    TRYB(cublasLtMatmulDescSetAttribute(e->desc, CUBLASLT_MATMUL_DESC_BIAS_DATA_TYPE, &bt,
                                        sizeof bt));
  }
  /* column-major views: A = w as K x N (ld K), B = x as K x T (ld ldx), C = y as N x T */
  TRYB(cublasLtMatrixLayoutCreate(&e->a, CUDA_R_16BF, (uint64_t)k->K, (uint64_t)k->N, k->K));
  if (k->T > 0) { /* T 0: the entry of an algorithm pinned for every T, no layouts */
    TRYB(cublasLtMatrixLayoutCreate(&e->b, CUDA_R_16BF, (uint64_t)k->K, (uint64_t)k->T, k->ldx));
    TRYB(cublasLtMatrixLayoutCreate(&e->c, dt, (uint64_t)k->N, (uint64_t)k->T, k->ldy));
  }
  TRYB(cublasLtMatmulPreferenceCreate(&pref));
  uint64_t wsb = g->ws_bytes;
  uint32_t ax = (uint32_t)k->al_x, aw = (uint32_t)k->al_w, ay = (uint32_t)k->al_y;
  TRYB(cublasLtMatmulPreferenceSetAttribute(pref, CUBLASLT_MATMUL_PREF_MAX_WORKSPACE_BYTES, &wsb,
                                            sizeof wsb));
  TRYB(cublasLtMatmulPreferenceSetAttribute(pref, CUBLASLT_MATMUL_PREF_MIN_ALIGNMENT_A_BYTES, &aw,
                                            sizeof aw));
  TRYB(cublasLtMatmulPreferenceSetAttribute(pref, CUBLASLT_MATMUL_PREF_MIN_ALIGNMENT_B_BYTES, &ax,
                                            sizeof ax));
  TRYB(cublasLtMatmulPreferenceSetAttribute(pref, CUBLASLT_MATMUL_PREF_MIN_ALIGNMENT_C_BYTES, &ay,
                                            sizeof ay));
  TRYB(cublasLtMatmulPreferenceSetAttribute(pref, CUBLASLT_MATMUL_PREF_MIN_ALIGNMENT_D_BYTES, &ay,
                                            sizeof ay));
  if (g->mode != CU_GEMM_HEURISTIC) { /* algorithms that split K change a row's bits */
    uint32_t none = CUBLASLT_REDUCTION_SCHEME_NONE;
    TRYB(cublasLtMatmulPreferenceSetAttribute(pref, CUBLASLT_MATMUL_PREF_REDUCTION_SCHEME_MASK,
                                              &none, sizeof none));
  }
  if (g->mode == CU_GEMM_OWN || g->mode == CU_GEMM_PINNED) {
    if (k->T > 0) goto end; /* runs the algorithm of the T = 0 entry */
    /* one algorithm for every T: the first the heuristic proposes for T = PIN_T that runs
     * every probe T */
    static const int probe[] = {1,   2,   3,   7,    8,    16,   17,   64,   100,
                                128, 255, 256, 1000, 2048, 4096, 8192, 16384};
    enum { PIN_T = 128, N_RES = 16 };
    cublasLtMatmulHeuristicResult_t res[N_RES];
    cublasLtMatrixLayout_t lb = NULL, lc = NULL;
    int n = 0, found = 0;
    cublasStatus_t hs = cublasLtMatrixLayoutCreate(&lb, CUDA_R_16BF, (uint64_t)k->K, PIN_T, k->ldx);
    if (hs == CUBLAS_STATUS_SUCCESS)
      hs = cublasLtMatrixLayoutCreate(&lc, dt, (uint64_t)k->N, PIN_T, k->ldy);
    if (hs == CUBLAS_STATUS_SUCCESS)
      hs = cublasLtMatmulAlgoGetHeuristic(g->h, e->desc, e->a, lb, lc, lc, pref, N_RES, res, &n);
    if (lb) cublasLtMatrixLayoutDestroy(lb);
    if (lc) cublasLtMatrixLayoutDestroy(lc);
    lb = lc = NULL;
    TRYB(hs);
    for (int r = 0; r < n && !found; r++) {
      int ok = 1;
      for (size_t i = 0; i < sizeof probe / sizeof probe[0] && ok; i++) {
        cublasLtMatmulHeuristicResult_t chk;
        ok = cublasLtMatrixLayoutCreate(&lb, CUDA_R_16BF, (uint64_t)k->K, (uint64_t)probe[i],
                                        k->ldx) == CUBLAS_STATUS_SUCCESS &&
             cublasLtMatrixLayoutCreate(&lc, dt, (uint64_t)k->N, (uint64_t)probe[i], k->ldy) ==
                 CUBLAS_STATUS_SUCCESS &&
             cublasLtMatmulAlgoCheck(g->h, e->desc, e->a, lb, lc, lc, &res[r].algo, &chk) ==
                 CUBLAS_STATUS_SUCCESS &&
             chk.workspaceSize <= g->ws_bytes;
        if (lb) cublasLtMatrixLayoutDestroy(lb);
        if (lc) cublasLtMatrixLayoutDestroy(lc);
        lb = lc = NULL;
      }
      if (ok) {
        e->algo = res[r].algo;
        found = 1;
      }
    }
    if (!found && g->mode == CU_GEMM_PINNED && k->K % 8 == 0 && k->ldx % 8 == 0 && k->al_x >= 16 &&
        k->al_w >= 16) {
      e->own = 1; /* what k_gemm_supported asks */
    } else if (!found) {
      ns_log_error("cuBLASLt: no one algorithm runs every T for N=%d K=%d (out %s, bias %d)", k->N,
                   k->K, k->y_f32 ? "f32" : "bf16", k->bias);
      rc = NS_EUNSUPPORTED;
    }
    goto end;
  }
  cublasLtMatmulHeuristicResult_t res;
  int n = 0;
  TRYB(cublasLtMatmulAlgoGetHeuristic(g->h, e->desc, e->a, e->b, e->c, e->c, pref, 1, &res, &n));
  if (n < 1) {
    ns_log_error("cuBLASLt: no algorithm for T=%d N=%d K=%d (out %s, bias %d)", k->T, k->N, k->K,
                 k->y_f32 ? "f32" : "bf16", k->bias);
    rc = NS_EUNSUPPORTED;
    goto end;
  }
  e->algo = res.algo;
#undef TRYB
end:
  if (pref) cublasLtMatmulPreferenceDestroy(pref);
  if (rc) ent_clear(e);
  return rc;
}

/* The cache entry for key k (built on a miss), or NULL with *rc set. */
static gent *lookup(cu_gemm *g, const gkey *k, int *rc) {
  uint32_t h = khash(k) & (CACHE_SLOTS - 1);
  for (int i = 0; i < CACHE_SLOTS; i++) {
    gent *s = &g->slots[(h + i) & (CACHE_SLOTS - 1)];
    if (!s->used) break;
    if (memcmp(&s->k, k, sizeof *k) == 0) return s;
  }
  if (g->n_used >= CACHE_SLOTS * 3 / 4) flush(g);
  gent *e = NULL;
  for (int i = 0; i < CACHE_SLOTS && !e; i++) {
    gent *s = &g->slots[(h + i) & (CACHE_SLOTS - 1)];
    if (!s->used) e = s;
  }
  if ((*rc = ent_build(g, e, k))) return NULL;
  g->n_used++;
  return e;
}

int cu_gemm_run(cu_gemm *g, void *y, int y_f32, int ldy, const void *x, int ldx, const void *w,
                const void *bias, int T, int N, int K, cudaStream_t st) {
  if (!g || !y || !x || !w || T < 0 || N <= 0 || K <= 0 || ldx < K || ldy < N || (bias && y_f32))
    return NS_EINVAL;
  if (T == 0) return 0;
  if (g->mode == CU_GEMM_OWN && k_gemm_supported(x, ldx, w, K))
    return k_gemm(y, y_f32, ldy, x, ldx, w, bias, T, N, K, g->n_sm, st);
  gkey k;
  memset(&k, 0, sizeof k);
  k = (gkey){T, N, K, ldx, ldy, y_f32 != 0, bias != NULL, align_of(x), align_of(w), align_of(y)};
  int rc = 0;
  const cublasLtMatmulAlgo_t *algo = NULL;
  if (g->mode == CU_GEMM_OWN || g->mode == CU_GEMM_PINNED) {
    /* the algorithm pinned for every T lives in the entry of T = 0 (no layouts of its own) */
    gkey p = k;
    p.T = 0;
    gent *pe = lookup(g, &p, &rc);
    if (!pe) return rc;
    if (pe->own) return k_gemm(y, y_f32, ldy, x, ldx, w, bias, T, N, K, g->n_sm, st);
    algo = &pe->algo;
  }
  gent *e = lookup(g, &k, &rc);
  if (!e) return rc;
  if (algo) {
    gkey p = k;
    p.T = 0;
    gent *pe = lookup(g, &p, &rc); /* again: building e may have flushed the cache */
    if (!pe) return rc;
    algo = &pe->algo;
  } else {
    algo = &e->algo;
  }
  if (bias)
    NS_CUBLAS_CHECK(cublasLtMatmulDescSetAttribute(e->desc, CUBLASLT_MATMUL_DESC_BIAS_POINTER,
                                                   &bias, sizeof bias));
  const float one = 1.0f, zero = 0.0f;
  NS_CUBLAS_CHECK(cublasLtMatmul(g->h, e->desc, &one, w, e->a, x, e->b, &zero, y, e->c, y, e->c,
                                 algo, g->ws, g->ws_bytes, st));
  return 0;
}

/* A decode-GEMM call's operands: NS_EINVAL, 1 (no rows: nothing to do), NS_EUNSUPPORTED (not
 * a shape k_gemm_dec takes) or 0. */
static int dec_check(const cu_gemm *g, const void *y, int ldy, const void *x, int ldx,
                     const void *w, int T, int N, int K) {
  if (!g || !y || !x || !w || T < 0 || N <= 0 || K <= 0 || ldx < K || ldy < N) return NS_EINVAL;
  if (T == 0) return 1;
  return k_gemm_supported(x, ldx, w, K) ? 0 : NS_EUNSUPPORTED;
}

int cu_gemm_run_dec(cu_gemm *g, void *y, int y_f32, int ldy, const void *x, int ldx, const void *w,
                    const void *bias, int T, int N, int K, cudaStream_t st) {
  int rc = bias && y_f32 ? NS_EINVAL : dec_check(g, y, ldy, x, ldx, w, T, N, K);
  if (rc) return rc > 0 ? 0 : rc;
  return k_gemm_dec(y, y_f32, ldy, x, ldx, w, bias, T, N, K, g->dec_ws, g->dec_ws_bytes, g->n_sm,
                    st);
}

int cu_gemm_run_dec_gu(cu_gemm *g, void *out, int ldo, const void *x, int ldx, const void *w,
                       const void *bias, int T, int I, int K, cudaStream_t st) {
  if (!g) return NS_EINVAL;
  return k_gemm_dec_gu(out, ldo, x, ldx, w, bias, T, I, K, g->n_sm, st);
}

int cu_gemm_run_dec_swiglu(cu_gemm *g, void *y, int ldy, void *x, const k_dec_part *gp,
                           const void *gu, const void *w, const void *bias, int T, int N, int K,
                           void *ws, size_t ws_bytes, k_dec_part *out, cudaStream_t st) {
  if (!g || !out) return NS_EINVAL;
  return k_gemm_dec_swiglu(y, ldy, x, gp, gu, w, bias, T, N, K, ws, ws_bytes, g->n_sm, out, st);
}

int cu_gemm_run_dec_lazy(cu_gemm *g, void *y, int ldy, const void *x, int ldx, const void *w,
                         const void *bias, int T, int N, int K, k_dec_part *out, cudaStream_t st) {
  int rc = out ? dec_check(g, y, ldy, x, ldx, w, T, N, K) : NS_EINVAL;
  if (rc == NS_EINVAL) return rc;
  out->part = NULL;
  if (rc) return rc > 0 ? 0 : rc;
  return k_gemm_dec_lazy(y, ldy, x, ldx, w, bias, T, N, K, g->dec_ws, g->dec_ws_bytes, g->n_sm, out,
                         st);
}
