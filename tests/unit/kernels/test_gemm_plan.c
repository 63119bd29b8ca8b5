/* test_gemm_plan.c — the decode GEMM's plan on the host (no GPU needed): the segment length
 * k_gemm_dec_seg(N, K) is a multiple of 128, from 256 below K, or all of K; the
 * workspace a call needs stays within k_gemm_dec_ws_max for every T over model and odd shapes;
 * calls with bad arguments or too small a workspace are refused before anything is launched. */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <cmocka.h>

#include "gemm.h"
#include "ns_err.h"

/* N and K of the projections and lm heads of tinyllama-1.1b, llama3.2-1b, llama3-8b and
 * Qwen2 / Mistral shapes, then odd sizes */
static const int Ns[] = {1,     8,     64,    65,    200,   2048,   2560,  3072,  4096,
                         5632,  6144,  8192,  11264, 14336, 16384,  18944, 28672, 32000,
                         40896, 40960, 57344, 65536, 99999, 128256, 151936};
static const int Ks[] = {8,    40,   128,  256,  264,   1000,  2048,
                         3584, 4096, 5632, 8192, 14336, 18944, 65536};
#define COUNT(a) (sizeof(a) / sizeof((a)[0]))

static void test_segment_length(void **state) {
  (void)state;
  for (size_t i = 0; i < COUNT(Ns); i++)
    for (size_t j = 0; j < COUNT(Ks); j++) {
      const int N = Ns[i], K = Ks[j], S = k_gemm_dec_seg(N, K);
      assert_true(S > 0 && S % 128 == 0);
      if (S < K)
        assert_true(S >= 256); /* a multiple of 128 from 256 */
      else
        assert_int_equal(S, (K + 127) / 128 * 128); /* one segment: all of K */
    }
  /* the fewest rounds, then the shortest item: N 2048 K 5632 fills one round with 8 segments
   * of 768 (the last 256); N 4096 K 14336 with 4 of 3584; N 11264 K 2048 takes two rounds of
   * 768 rather than three of 512 */
  assert_int_equal(k_gemm_dec_seg(2048, 5632), 768);
  assert_int_equal(k_gemm_dec_seg(4096, 14336), 3584);
  assert_int_equal(k_gemm_dec_seg(11264, 2048), 768);
  /* a cost tie goes to the longer segment: N 960 K 13312 costs two rounds of 384 + 128 or one
   * of 896 + 128, and takes 896 */
  assert_int_equal(k_gemm_dec_seg(960, 13312), 896);
  assert_int_equal(k_gemm_dec_seg(0, 4096), 0);
  assert_int_equal(k_gemm_dec_seg(4096, 0), 0);
  assert_int_equal(k_gemm_dec_seg(-1, 4096), 0);
}

static void test_workspace_bound(void **state) {
  (void)state;
  const size_t max = k_gemm_dec_ws_max();
  assert_true(max > 0);
  for (size_t i = 0; i < COUNT(Ns); i++)
    for (size_t j = 0; j < COUNT(Ks); j++)
      for (int T = 1; T <= 1100; T += T < 80 ? 1 : 37)
        assert_true(k_gemm_dec_ws_bytes(T, Ns[i], Ks[j]) <= max);
  assert_int_equal(k_gemm_dec_ws_bytes(0, 4096, 4096), 0);
  assert_int_equal(k_gemm_dec_ws_bytes(1, 0, 4096), 0);
}

/* Host addresses that are never read: every call below returns before a launch. */
#define P(a) ((void *)(uintptr_t)(a))

static void test_refusals(void **state) {
  (void)state;
  void *y = P(0x10000), *x = P(0x20000), *w = P(0x30000), *b = P(0x40000);
  const int N = 4096, K = 4096; /* T = 1 splits K over blocks: a workspace is needed */
  assert_true(k_gemm_dec_ws_bytes(1, N, K) > 0);
  assert_int_equal(k_gemm_dec(NULL, 0, N, x, K, w, NULL, 1, N, K, NULL, 0, 132, 0), NS_EINVAL);
  assert_int_equal(k_gemm_dec(y, 0, N, x, K - 8, w, NULL, 1, N, K, NULL, 0, 132, 0),
                   NS_EINVAL); /* ldx < K */
  assert_int_equal(k_gemm_dec(y, 0, N - 1, x, K, w, NULL, 1, N, K, NULL, 0, 132, 0),
                   NS_EINVAL); /* ldy < N */
  assert_int_equal(k_gemm_dec(y, 1, N, x, K, w, b, 1, N, K, NULL, 0, 132, 0),
                   NS_EINVAL); /* bias with fp32 out */
  assert_int_equal(k_gemm_dec(y, 0, N, P(0x20002), K, w, NULL, 1, N, K, NULL, 0, 132, 0),
                   NS_EINVAL); /* x not 16-byte aligned */
  assert_int_equal(k_gemm_dec(y, 0, N, x, 1004, w, NULL, 1, N, 1004, NULL, 0, 132, 0),
                   NS_EINVAL); /* K not a multiple of 8 */
  assert_int_equal(k_gemm_dec(y, 0, N, x, K, w, NULL, -1, N, K, NULL, 0, 132, 0), NS_EINVAL);
  assert_int_equal(k_gemm_dec(y, 0, N, x, K, w, NULL, 0, N, K, NULL, 0, 132, 0), 0); /* no rows */
  const size_t need = k_gemm_dec_ws_bytes(1, N, K);
  assert_int_equal(k_gemm_dec(y, 0, N, x, K, w, NULL, 1, N, K, NULL, 0, 132, 0), NS_ERANGE);
  assert_int_equal(k_gemm_dec(y, 0, N, x, K, w, NULL, 1, N, K, P(0x50000), need - 16, 132, 0),
                   NS_ERANGE);
  assert_int_equal(k_gemm_dec(y, 0, N, x, K, w, NULL, 1, N, K, P(0x50004), need, 132, 0),
                   NS_EINVAL); /* workspace not 16-byte aligned */
}

/* k_gemm_dec_lazy refuses as k_gemm_dec (and without a descriptor), leaving the descriptor
 * empty; k_dec_part_finish refuses descriptors that do not describe partials. */
static void test_lazy_refusals(void **state) {
  (void)state;
  void *y = P(0x10000), *x = P(0x20000), *w = P(0x30000);
  const int N = 4096, K = 4096;
  k_dec_part p = {P(0x60000), NULL, 1, N, 4, 16, 64, 0};
  assert_int_equal(k_gemm_dec_lazy(y, N, x, K, w, NULL, 1, N, K, NULL, 0, 132, NULL, 0), NS_EINVAL);
  assert_int_equal(k_gemm_dec_lazy(y, N, x, K - 8, w, NULL, 1, N, K, NULL, 0, 132, &p, 0),
                   NS_EINVAL);
  assert_null(p.part);
  p.part = P(0x60000);
  assert_int_equal(k_gemm_dec_lazy(y, N, x, K, w, NULL, 1, N, K, NULL, 0, 132, &p, 0), NS_ERANGE);
  assert_null(p.part);
  assert_int_equal(k_gemm_dec_lazy(y, N, x, K, w, NULL, 0, N, K, NULL, 0, 132, &p, 0), 0);
  assert_null(p.part); /* no rows: nothing left pending */
  k_dec_part ok = {P(0x60000), NULL, 16, N, 4, 16, 64, 0}, bad;
  assert_int_equal(k_dec_part_finish(NULL, y, N, 0), NS_EINVAL);
  assert_int_equal(k_dec_part_finish(&ok, NULL, N, 0), NS_EINVAL);
  assert_int_equal(k_dec_part_finish(&ok, y, N - 1, 0), NS_EINVAL); /* ldy < N */
  bad = ok, bad.part = NULL;
  assert_int_equal(k_dec_part_finish(&bad, y, N, 0), NS_EINVAL);
  bad = ok, bad.T = 17; /* more rows than a tile */
  assert_int_equal(k_dec_part_finish(&bad, y, N, 0), NS_EINVAL);
  bad = ok, bad.nseg = 0;
  assert_int_equal(k_dec_part_finish(&bad, y, N, 0), NS_EINVAL);
  bad = ok, bad.bn = 60; /* tiles not of whole 8-column groups */
  assert_int_equal(k_dec_part_finish(&bad, y, N, 0), NS_EINVAL);
}

/* k_dec_part_drops: partials of 16 MiB and more as written (T x N x nseg floats) are dropped
 * by their consumer: llama3-8b's q|k|v at 128 and 96 rows; not its o or down at 128 (4
 * segments, 8 MiB) on their own, its q|k|v at 64 rows (12 MiB), a call that left none, or no
 * descriptor. And every call's of a layer whose split calls write 32 MiB or more: llama3-8b's
 * at 128 rows (24 + 8 + 8 MiB), not at 64 (20), nor tinyllama-1.1b's or llama3.2-1b's at 128
 * (23.5 and 22: their o and down 8 MiB each, their q|k|v 7.5 and 6). */
static void test_dec_part_drops(void **state) {
  (void)state;
  const float *f = (const float *)P(0x60000);
  const k_dec_part qkv128 = {f, NULL, 128, 6144, 8, 128, 128, 0},
                   qkv96 = {f, NULL, 96, 6144, 8, 128, 128, 0},
                   o128 = {f, NULL, 128, 4096, 4, 128, 128, 0},
                   qkv64 = {f, NULL, 64, 6144, 8, 64, 64, 0},
                   none = {NULL, NULL, 128, 6144, 8, 128, 128, 0};
  assert_true(k_dec_part_drops(&qkv128, 0) && k_dec_part_drops(&qkv96, 0));
  assert_false(k_dec_part_drops(&o128, 0) || k_dec_part_drops(&qkv64, 0) ||
               k_dec_part_drops(&none, 0));
  assert_false(k_dec_part_drops(NULL, 0));
  const double MiB = 1048576.0;
  /* llama3-8b (hidden 4096, q|k|v 6144, intermediate 14336), tinyllama-1.1b (2048, 2560,
   * 5632), llama3.2-1b (2048, 3072, 8192) */
  const double l8_128 = k_dec_layer_part_bytes(128, 4096, 6144, 14336),
               l8_64 = k_dec_layer_part_bytes(64, 4096, 6144, 14336),
               tl_128 = k_dec_layer_part_bytes(128, 2048, 2560, 5632),
               l1_128 = k_dec_layer_part_bytes(128, 2048, 3072, 8192);
  assert_true(l8_128 == 40 * MiB && l8_64 == 20 * MiB);
  assert_true(tl_128 == 23.5 * MiB && l1_128 == 22 * MiB);
  assert_true(k_dec_part_drops(&o128, l8_128));
  assert_false(k_dec_part_drops(&o128, tl_128) || k_dec_part_drops(&o128, l1_128) ||
               k_dec_part_drops(&qkv64, l8_64) || k_dec_part_drops(&none, l8_128));
  assert_true(k_dec_layer_part_bytes(0, 4096, 6144, 14336) == 0 &&
              k_dec_layer_part_bytes(128, 4096, 0, 14336) == 0);
}

/* k_gemm_dec_swiglu: the rows a block makes (T x the segment <= 1024), refusals before any
 * launch, rows it cannot make reported unsupported (the caller then runs the SwiGLU on its
 * own), the lazy descriptor left empty. */
static void test_swiglu_refusals(void **state) {
  (void)state;
  /* tinyllama-1.1b's down (segments of 1024), 2048 x 2048 (256), llama3-8b's down (4096),
   * whole tiles (one segment of 1024, of 128) */
  assert_true(k_gemm_dec_swiglu_ok(1, 2048, 5632) && !k_gemm_dec_swiglu_ok(2, 2048, 5632));
  assert_true(k_gemm_dec_swiglu_ok(4, 2048, 2048) && !k_gemm_dec_swiglu_ok(5, 2048, 2048));
  assert_false(k_gemm_dec_swiglu_ok(1, 4096, 14336));
  assert_true(k_gemm_dec_swiglu_ok(1, 16384, 1024) && !k_gemm_dec_swiglu_ok(2, 16384, 1024));
  assert_true(k_gemm_dec_swiglu_ok(8, 4096, 128) && !k_gemm_dec_swiglu_ok(9, 4096, 128));
  assert_false(k_gemm_dec_swiglu_ok(0, 2048, 5632) || k_gemm_dec_swiglu_ok(1, 2048, 5628));
  void *y = P(0x10000), *x = P(0x20000), *w = P(0x30000), *ws = P(0x50000);
  const int N = 2048, K = 5632;
  k_dec_part gp = {P(0x60000), NULL, 1, 2 * K, 4, 16, 64, 0};
  k_dec_part out = {P(0x60000), NULL, 1, N, 4, 16, 64, 0};
  const size_t wsb = k_gemm_dec_ws_max();
  assert_int_equal(k_gemm_dec_swiglu(y, N, x, NULL, NULL, w, NULL, 1, N, K, ws, wsb, 132, &out, 0),
                   NS_EINVAL);
  assert_null(out.part);
  assert_int_equal(k_gemm_dec_swiglu(y, N, x, &gp, NULL, w, NULL, 1, N, K, ws, wsb, 132, NULL, 0),
                   NS_EINVAL);
  assert_int_equal(
      k_gemm_dec_swiglu(y, N, NULL, &gp, NULL, w, NULL, 1, N, K, ws, wsb, 132, &out, 0),
      NS_EINVAL); /* no x to write */
  assert_int_equal(
      k_gemm_dec_swiglu(y, N, P(0x20004), &gp, NULL, w, NULL, 1, N, K, ws, wsb, 132, &out, 0),
      NS_EINVAL); /* x not 16-byte aligned */
  k_dec_part bad = gp;
  bad.N = K; /* not gate and up */
  assert_int_equal(k_gemm_dec_swiglu(y, N, x, &bad, NULL, w, NULL, 1, N, K, ws, wsb, 132, &out, 0),
                   NS_EINVAL);
  bad = gp, bad.T = 2; /* not the call's rows */
  assert_int_equal(k_gemm_dec_swiglu(y, N, x, &bad, NULL, w, NULL, 1, N, K, ws, wsb, 132, &out, 0),
                   NS_EINVAL);
  bad = gp, bad.T = 2;
  assert_int_equal(k_gemm_dec_swiglu(y, N, x, &bad, NULL, w, NULL, 2, N, K, ws, wsb, 132, &out, 0),
                   NS_EUNSUPPORTED);
  assert_int_equal(k_gemm_dec_swiglu(y, N, x, &gp, NULL, w, NULL, 1, N, K, NULL, 0, 132, &out, 0),
                   NS_ERANGE);
  /* gate|up as stored: exactly one of the two forms */
  void *gu = P(0x70000);
  assert_int_equal(k_gemm_dec_swiglu(y, N, x, &gp, gu, w, NULL, 1, N, K, ws, wsb, 132, &out, 0),
                   NS_EINVAL);
  assert_int_equal(k_gemm_dec_swiglu(y, N, x, NULL, NULL, w, NULL, 1, N, K, ws, wsb, 132, &out, 0),
                   NS_EINVAL);
  assert_int_equal(
      k_gemm_dec_swiglu(y, N, x, NULL, P(0x70002), w, NULL, 1, N, K, ws, wsb, 132, &out, 0),
      NS_EINVAL); /* not 16-byte aligned */
  assert_int_equal(k_gemm_dec_swiglu(y, N, x, NULL, gu, w, NULL, 2, N, K, ws, wsb, 132, &out, 0),
                   NS_EUNSUPPORTED);
  assert_null(out.part);
}

/* k_gemm_dec_gu: the gate|up calls it takes (whole tiles on a wgmma shape: more than 16 rows,
 * the product not split over K) and its refusals before any launch. */
static void test_gu_plan(void **state) {
  (void)state;
  /* llama3-8b (I 14336, K 4096): split up to 32 rows; whole tiles above (448 64 x 64 ones to
   * 64 rows, DEC_WHOLE_MID_NT; 128 x 112 to 128, 64 x 64 past) */
  assert_false(k_gemm_dec_gu_ok(16, 14336, 4096) || k_gemm_dec_gu_ok(32, 14336, 4096));
  assert_true(k_gemm_dec_gu_ok(33, 14336, 4096) && k_gemm_dec_gu_ok(64, 14336, 4096));
  assert_true(k_gemm_dec_gu_ok(65, 14336, 4096) && k_gemm_dec_gu_ok(128, 14336, 4096));
  assert_true(k_gemm_dec_gu_ok(129, 14336, 4096) && k_gemm_dec_gu_ok(256, 14336, 4096));
  /* llama3.2-1b (8192, 2048): one segment, so whole tiles from 17 rows */
  assert_false(k_gemm_dec_gu_ok(16, 8192, 2048));
  assert_true(k_gemm_dec_gu_ok(17, 8192, 2048) && k_gemm_dec_gu_ok(128, 8192, 2048));
  /* tinyllama-1.1b (5632, 2048): split up to 16 rows; whole from 17 (176 64-column tiles to
   * 64 rows: DEC_WHOLE_MID_NT, below 33 rows for its K of DEC_WHOLE_LOW_K; 88 128-column ones,
   * DEC_WHOLE_NT, to 128, 64 x 64 tiles past) */
  assert_false(k_gemm_dec_gu_ok(16, 5632, 2048));
  assert_true(k_gemm_dec_gu_ok(17, 5632, 2048) && k_gemm_dec_gu_ok(32, 5632, 2048));
  assert_true(k_gemm_dec_gu_ok(33, 5632, 2048) && k_gemm_dec_gu_ok(64, 5632, 2048));
  /* the same tiles of a K past DEC_WHOLE_LOW_K split up to 32 rows */
  assert_false(k_gemm_dec_gu_ok(17, 5632, 2112) || k_gemm_dec_gu_ok(32, 5632, 2112));
  assert_true(k_gemm_dec_gu_ok(33, 5632, 2112));
  assert_true(k_gemm_dec_gu_ok(65, 5632, 2048) && k_gemm_dec_gu_ok(128, 5632, 2048));
  assert_true(k_gemm_dec_gu_ok(129, 5632, 2048));
  assert_false(k_gemm_dec_gu_ok(0, 8192, 2048) || k_gemm_dec_gu_ok(32, 0, 2048) ||
               k_gemm_dec_gu_ok(32, 8192, 0));
  void *o = P(0x10000), *x = P(0x20000), *w = P(0x30000);
  assert_int_equal(k_gemm_dec_gu(NULL, 8192, x, 2048, w, NULL, 32, 8192, 2048, 132, 0), NS_EINVAL);
  assert_int_equal(k_gemm_dec_gu(o, 8191, x, 2048, w, NULL, 32, 8192, 2048, 132, 0), NS_EINVAL);
  assert_int_equal(k_gemm_dec_gu(o, 8192, x, 2047, w, NULL, 32, 8192, 2048, 132, 0), NS_EINVAL);
  assert_int_equal(k_gemm_dec_gu(o, 8192, x, 2048, w, NULL, -1, 8192, 2048, 132, 0), NS_EINVAL);
  assert_int_equal(k_gemm_dec_gu(o, 8192, x, 2048, w, NULL, 0, 8192, 2048, 132, 0), 0);
  assert_int_equal(k_gemm_dec_gu(o, 8192, x, 2048, w, NULL, 16, 8192, 2048, 132, 0),
                   NS_EUNSUPPORTED);
  assert_int_equal(k_gemm_dec_gu(o, 5632, x, 2112, w, NULL, 32, 5632, 2112, 132, 0),
                   NS_EUNSUPPORTED); /* split */
}

int main(void) {
  const struct CMUnitTest tests[] = {
      cmocka_unit_test(test_gu_plan),        cmocka_unit_test(test_swiglu_refusals),
      cmocka_unit_test(test_segment_length), cmocka_unit_test(test_workspace_bound),
      cmocka_unit_test(test_refusals),       cmocka_unit_test(test_lazy_refusals),
      cmocka_unit_test(test_dec_part_drops),
  };
  return cmocka_run_group_tests(tests, NULL, NULL);
}
