/* test_safetensors.c — the safetensors reader against files written by the
 * test's own writer (tw.c): valid files, and every malformed case it must refuse. */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <cmocka.h>

#include "ns_err.h"
#include "safetensors.h"
#include "tw.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

static char *dir;
static char err[1024];

static int setup(void **state) {
  (void)state;
  dir = tw_tmpdir();
  return dir ? 0 : -1;
}

static int teardown(void **state) {
  (void)state;
  tw_rmdir(dir);
  dir = NULL;
  return 0;
}

/* err names the file, and the tensor when one is given. */
static void assert_err_names(const char *path, const char *tensor) {
  if (!strstr(err, path)) fail_msg("error '%s' does not name the file %s", err, path);
  if (tensor && !strstr(err, tensor))
    fail_msg("error '%s' does not name the tensor %s", err, tensor);
}

/* Open path and expect code, with a message naming the file (and tensor). */
static void expect_fail(const char *path, int code, const char *tensor) {
  st_file *st = (st_file *)1;
  err[0] = '\0';
  int rc = st_open(path, &st, err, sizeof err);
  if (rc != code)
    fail_msg("%s: rc %d (%s), want %d; err '%s'", path, rc, ns_strerror(rc), code, err);
  assert_null(st);
  assert_err_names(path, tensor);
}

static void test_valid(void **state) {
  (void)state;
  const float a[6] = {1.5f, -2.0f, 3.25f, 0.0f, 1e-3f, -7.0f};
  const uint16_t b[4] = {0x3f80, 0xc000, 0x4049, 0x0000}; /* bf16 1, -2, 3.140625, 0 */
  const uint16_t h[4] = {0x3c00, 0xbc00, 0x4200, 0x7bff}; /* f16 1, -1, 3, 65504 */
  const float s = 42.0f;
  const tw_tensor t[] = {
      {"w.a", "F32", 2, {2, 3}, a, sizeof a}, {"w.b", "BF16", 1, {4}, b, sizeof b},
      {"w.h", "F16", 2, {2, 2}, h, sizeof h}, {"scalar", "F32", 0, {0}, &s, sizeof s},
      {"empty", "F32", 2, {0, 5}, NULL, 0},
  };
  const char *path = tw_path(dir, "ok.safetensors");
  assert_int_equal(tw_write(path, t, 5, 0), 0);
  st_file *st;
  int rc = st_open(path, &st, err, sizeof err);
  if (rc) fail_msg("st_open: %s", err);
  assert_int_equal(st_count(st), 5);
  assert_string_equal(st_path(st), path);
  const st_tensor *x = st_find(st, "w.a");
  assert_non_null(x);
  assert_int_equal(x->dtype, NS_F32);
  assert_int_equal(x->ndim, 2);
  assert_int_equal(x->shape[0], 2);
  assert_int_equal(x->shape[1], 3);
  assert_int_equal(x->nbytes, sizeof a);
  assert_memory_equal(x->data, a, sizeof a);
  x = st_find(st, "w.b");
  assert_non_null(x);
  assert_int_equal(x->dtype, NS_BF16);
  assert_int_equal(x->ndim, 1);
  assert_int_equal(x->shape[0], 4);
  float f[4];
  ns_convert_to_f32(f, x->data, x->dtype, 4);
  assert_true(f[0] == 1.0f && f[1] == -2.0f && f[2] == 3.140625f && f[3] == 0.0f);
  x = st_find(st, "w.h");
  assert_non_null(x);
  assert_int_equal(x->dtype, NS_F16);
  ns_convert_to_f32(f, x->data, x->dtype, 4);
  assert_true(f[0] == 1.0f && f[1] == -1.0f && f[2] == 3.0f && f[3] == 65504.0f);
  x = st_find(st, "scalar");
  assert_non_null(x);
  assert_int_equal(x->ndim, 0);
  assert_memory_equal(x->data, &s, 4);
  x = st_find(st, "empty");
  assert_non_null(x);
  assert_int_equal(x->nbytes, 0);
  assert_null(st_find(st, "w"));
  assert_null(st_find(st, "w.c"));
  assert_null(st_find(st, "__metadata__"));
  /* st_at lists them in name order */
  for (size_t i = 1; i < st_count(st); i++)
    assert_true(strcmp(st_at(st, i - 1)->name, st_at(st, i)->name) < 0);
  assert_null(st_at(st, 5));
  st_close(st);
}

static void test_open_mem_same_parser(void **state) {
  (void)state;
  const float a[2] = {1, 2};
  const tw_tensor t[] = {{"x", "F32", 1, {2}, a, sizeof a}};
  const char *path = tw_path(dir, "mem.safetensors");
  assert_int_equal(tw_write(path, t, 1, 0), 0);
  FILE *fp = fopen(path, "rb");
  assert_non_null(fp);
  char buf[512];
  size_t n = fread(buf, 1, sizeof buf, fp);
  fclose(fp);
  st_file *st;
  assert_int_equal(st_open_mem(buf, n, "buf.safetensors", &st, err, sizeof err), 0);
  assert_int_equal(st_count(st), 1);
  assert_memory_equal(st_find(st, "x")->data, a, sizeof a);
  st_close(st);
  /* one byte short: the tensor's data no longer fits */
  assert_int_equal(st_open_mem(buf, n - 1, "buf.safetensors", &st, err, sizeof err), NS_EFORMAT);
  assert_non_null(strstr(err, "buf.safetensors"));
  assert_non_null(strstr(err, "'x'"));
}

static void test_missing_file(void **state) {
  (void)state;
  expect_fail(tw_path(dir, "nope.safetensors"), NS_ENOENT, NULL);
}

static void test_truncated(void **state) {
  (void)state;
  const char *path = tw_path(dir, "short.safetensors");
  FILE *f = fopen(path, "wb");
  fwrite("\x10\0\0\0\0", 1, 5, f);
  fclose(f);
  expect_fail(path, NS_EFORMAT, NULL);
  assert_non_null(strstr(err, "shorter"));
  path = tw_path(dir, "empty.safetensors");
  fclose(fopen(path, "wb"));
  expect_fail(path, NS_EFORMAT, NULL);
}

static void test_header_past_eof(void **state) {
  (void)state;
  const char *path = tw_path(dir, "past.safetensors");
  assert_int_equal(tw_write_raw(path, "{}      ", 4000, NULL, 0), 0);
  expect_fail(path, NS_EFORMAT, NULL);
  assert_non_null(strstr(err, "past the end"));
  path = tw_path(dir, "absurd.safetensors");
  assert_int_equal(tw_write_raw(path, "{}      ", 1ll << 40, NULL, 0), 0);
  expect_fail(path, NS_EFORMAT, NULL);
  assert_non_null(strstr(err, "absurd"));
}

static void test_header_not_json(void **state) {
  (void)state;
  const char *path = tw_path(dir, "notjson.safetensors");
  assert_int_equal(tw_write_raw(path, "{\"a\": nope}     ", -1, NULL, 0), 0);
  expect_fail(path, NS_EFORMAT, NULL);
  assert_non_null(strstr(err, "JSON"));
  path = tw_path(dir, "array.safetensors");
  assert_int_equal(tw_write_raw(path, "[1, 2]  ", -1, NULL, 0), 0);
  expect_fail(path, NS_EFORMAT, NULL);
  assert_non_null(strstr(err, "object"));
  path = tw_path(dir, "trailing.safetensors");
  assert_int_equal(tw_write_raw(path, "{} {}   ", -1, NULL, 0), 0);
  expect_fail(path, NS_EFORMAT, NULL);
  path = tw_path(dir, "nul.safetensors");
  assert_int_equal(tw_write_raw(path, "{}", 8, "\0\0\0\0\0\0", 6), 0);
  expect_fail(path, NS_EFORMAT, NULL);
  path = tw_path(dir, "meta.safetensors");
  assert_int_equal(tw_write_raw(path, "{\"__metadata__\": 3}", -1, NULL, 0), 0);
  expect_fail(path, NS_EFORMAT, "__metadata__");
}

/* One tensor entry in a header over 16 data bytes. */
static void expect_entry_fail(const char *file, const char *entry, int code, const char *tensor,
                              const char *why) {
  char hdr[1024];
  snprintf(hdr, sizeof hdr, "{%s}", entry);
  const char *path = tw_path(dir, file);
  static const uint8_t data[16];
  assert_int_equal(tw_write_raw(path, hdr, -1, data, sizeof data), 0);
  expect_fail(path, code, tensor);
  if (why && !strstr(err, why)) fail_msg("error '%s' does not say '%s'", err, why);
}

static void test_offsets(void **state) {
  (void)state;
  expect_entry_fail("range.safetensors",
                    "\"t.range\":{\"dtype\":\"F32\",\"shape\":[5],\"data_offsets\":[0,20]}",
                    NS_EFORMAT, "t.range", "past the data section");
  expect_entry_fail("order.safetensors",
                    "\"t.order\":{\"dtype\":\"F32\",\"shape\":[0],\"data_offsets\":[8,4]}",
                    NS_EFORMAT, "t.order", "begin 8 > end 4");
  expect_entry_fail("size.safetensors",
                    "\"t.size\":{\"dtype\":\"F32\",\"shape\":[3],\"data_offsets\":[0,16]}",
                    NS_EFORMAT, "t.size", "need 12");
  expect_entry_fail("size16.safetensors",
                    "\"t.bf\":{\"dtype\":\"BF16\",\"shape\":[2,2],\"data_offsets\":[0,16]}",
                    NS_EFORMAT, "t.bf", "need 8");
  expect_entry_fail("negoff.safetensors",
                    "\"t.neg\":{\"dtype\":\"F32\",\"shape\":[1],\"data_offsets\":[-4,0]}",
                    NS_EFORMAT, "t.neg", "negative");
  expect_entry_fail("fracoff.safetensors",
                    "\"t.frac\":{\"dtype\":\"F32\",\"shape\":[1],\"data_offsets\":[0.5,4.5]}",
                    NS_EFORMAT, "t.frac", "not an integer");
  expect_entry_fail("hugeoff.safetensors",
                    "\"t.huge\":{\"dtype\":\"F32\",\"shape\":[1],"
                    "\"data_offsets\":[18446744073709551612,18446744073709551616]}",
                    NS_EFORMAT, "t.huge", NULL);
  expect_entry_fail("threeoff.safetensors",
                    "\"t.three\":{\"dtype\":\"F32\",\"shape\":[1],\"data_offsets\":[0,4,8]}",
                    NS_EFORMAT, "t.three", "data_offsets");
}

static void test_overlap_and_duplicates(void **state) {
  (void)state;
  expect_entry_fail("overlap.safetensors",
                    "\"t.first\":{\"dtype\":\"F32\",\"shape\":[2],\"data_offsets\":[0,8]},"
                    "\"t.second\":{\"dtype\":\"F32\",\"shape\":[2],\"data_offsets\":[4,12]}",
                    NS_EFORMAT, "t.second", "overlaps");
  assert_non_null(strstr(err, "t.first"));
  expect_entry_fail("same.safetensors",
                    "\"t.a\":{\"dtype\":\"F32\",\"shape\":[2],\"data_offsets\":[0,8]},"
                    "\"t.b\":{\"dtype\":\"BF16\",\"shape\":[4],\"data_offsets\":[0,8]}",
                    NS_EFORMAT, NULL, "overlaps");
  expect_entry_fail("dup.safetensors",
                    "\"t.dup\":{\"dtype\":\"F32\",\"shape\":[2],\"data_offsets\":[0,8]},"
                    "\"t.dup\":{\"dtype\":\"F32\",\"shape\":[2],\"data_offsets\":[8,16]}",
                    NS_EFORMAT, "t.dup", "duplicate");
  /* Back to back, and an empty tensor at a used offset, are fine. */
  const char *path = tw_path(dir, "adjacent.safetensors");
  static const uint8_t data[16];
  assert_int_equal(tw_write_raw(path,
                                "{\"a\":{\"dtype\":\"F32\",\"shape\":[2],\"data_offsets\":[0,8]},"
                                "\"b\":{\"dtype\":\"F16\",\"shape\":[4],\"data_offsets\":[8,16]},"
                                "\"c\":{\"dtype\":\"F16\",\"shape\":[0],\"data_offsets\":[4,4]}}",
                                -1, data, sizeof data),
                   0);
  st_file *st;
  assert_int_equal(st_open(path, &st, err, sizeof err), 0);
  assert_int_equal(st_count(st), 3);
  st_close(st);
}

static void test_dtype_and_shape(void **state) {
  (void)state;
  expect_entry_fail("i64.safetensors",
                    "\"t.i64\":{\"dtype\":\"I64\",\"shape\":[2],\"data_offsets\":[0,16]}",
                    NS_EUNSUPPORTED, "t.i64", "I64");
  expect_entry_fail("q9.safetensors",
                    "\"t.q9\":{\"dtype\":\"Q9\",\"shape\":[2],\"data_offsets\":[0,16]}", NS_EFORMAT,
                    "t.q9", "Q9");
  expect_entry_fail("dtnum.safetensors",
                    "\"t.dtnum\":{\"dtype\":7,\"shape\":[2],\"data_offsets\":[0,8]}", NS_EFORMAT,
                    "t.dtnum", "dtype");
  expect_entry_fail("negshape.safetensors",
                    "\"t.negshape\":{\"dtype\":\"F32\",\"shape\":[-2,-2],\"data_offsets\":[0,16]}",
                    NS_EFORMAT, "t.negshape", "negative");
  expect_entry_fail("strshape.safetensors",
                    "\"t.strshape\":{\"dtype\":\"F32\",\"shape\":\"4\",\"data_offsets\":[0,16]}",
                    NS_EFORMAT, "t.strshape", "shape");
  expect_entry_fail("fracshape.safetensors",
                    "\"t.frac\":{\"dtype\":\"F32\",\"shape\":[2.5],\"data_offsets\":[0,16]}",
                    NS_EFORMAT, "t.frac", "not an integer");
  /* 2^32 * 2^32 * 4 elements: numel overflows 64 bits */
  expect_entry_fail("overflow.safetensors",
                    "\"t.big\":{\"dtype\":\"F32\",\"shape\":[4294967296,4294967296,4],"
                    "\"data_offsets\":[0,16]}",
                    NS_EFORMAT, "t.big", "overflow");
  /* numel fits but numel * 4 does not */
  expect_entry_fail("overflow2.safetensors",
                    "\"t.big2\":{\"dtype\":\"F32\",\"shape\":[4294967296,1073741824],"
                    "\"data_offsets\":[0,16]}",
                    NS_EFORMAT, "t.big2", "overflow");
  expect_entry_fail("rank.safetensors",
                    "\"t.rank\":{\"dtype\":\"F32\",\"shape\":[1,1,1,1,1,1,1,1,1],"
                    "\"data_offsets\":[0,4]}",
                    NS_EFORMAT, "t.rank", "dimensions");
}

static void test_missing_fields(void **state) {
  (void)state;
  expect_entry_fail("nodtype.safetensors", "\"t.nodtype\":{\"shape\":[2],\"data_offsets\":[0,8]}",
                    NS_EFORMAT, "t.nodtype", "dtype");
  expect_entry_fail("noshape.safetensors",
                    "\"t.noshape\":{\"dtype\":\"F32\",\"data_offsets\":[0,8]}", NS_EFORMAT,
                    "t.noshape", "shape");
  expect_entry_fail("nooffs.safetensors", "\"t.nooffs\":{\"dtype\":\"F32\",\"shape\":[2]}",
                    NS_EFORMAT, "t.nooffs", "data_offsets");
  expect_entry_fail("notobj.safetensors", "\"t.notobj\":[1,2]", NS_EFORMAT, "t.notobj",
                    "not a JSON object");
  expect_entry_fail("emptyname.safetensors",
                    "\"\":{\"dtype\":\"F32\",\"shape\":[2],\"data_offsets\":[0,8]}", NS_EFORMAT,
                    NULL, "empty tensor name");
}

int main(void) {
  const struct CMUnitTest tests[] = {
      cmocka_unit_test(test_valid),           cmocka_unit_test(test_open_mem_same_parser),
      cmocka_unit_test(test_missing_file),    cmocka_unit_test(test_truncated),
      cmocka_unit_test(test_header_past_eof), cmocka_unit_test(test_header_not_json),
      cmocka_unit_test(test_offsets),         cmocka_unit_test(test_overlap_and_duplicates),
      cmocka_unit_test(test_dtype_and_shape), cmocka_unit_test(test_missing_fields),
  };
  return cmocka_run_group_tests(tests, setup, teardown);
}
