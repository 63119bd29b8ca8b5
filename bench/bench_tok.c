/* bench_tok.c — tokenizer throughput on the Llama 2 tokenizer: encode MB/s and streaming
 * decode tokens/s, median of 5 runs. Usage: bench_tok [LLAMA2_DIR] [MB] */
#include "tokenizer.h"

#include <cjson/cJSON.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#define RUNS 5

static double now_s(void) {
  struct timespec ts;
  clock_gettime(CLOCK_MONOTONIC, &ts);
  return (double)ts.tv_sec + (double)ts.tv_nsec * 1e-9;
}

static int cmp_d(const void *a, const void *b) {
  double x = *(const double *)a, y = *(const double *)b;
  return (x > y) - (x < y);
}

static char *slurp(const char *path, size_t *len) {
  FILE *f = fopen(path, "rb");
  if (!f) return NULL;
  fseek(f, 0, SEEK_END);
  long n = ftell(f);
  fseek(f, 0, SEEK_SET);
  char *p = malloc((size_t)n + 1);
  *len = p ? fread(p, 1, (size_t)n, f) : 0;
  fclose(f);
  return p;
}

int main(int argc, char **argv) {
  const char *dir = argc > 1 ? argv[1] : NS_SOURCE_DIR "/../shared/tokenizers/llama2";
  size_t mb = argc > 2 ? (size_t)atoi(argv[2]) : 4;
  char path[4096], err[256];
  tok_t *tok;
  if (tok_load_dir(dir, &tok, err, sizeof err) != 0) {
    fprintf(stderr, "bench_tok: %s\n", err);
    return 1;
  }
  /* The text: the golden strings (English, accents, CJK, emoji, code, digits, whitespace)
   * joined into ~4 KB prompts, repeated until MB megabytes. Each prompt is one encode. */
  snprintf(path, sizeof path, "%s/golden_encodings.json", dir);
  size_t glen;
  char *gj = slurp(path, &glen);
  cJSON *g = gj ? cJSON_ParseWithLength(gj, glen) : NULL;
  if (!cJSON_IsArray(g)) {
    fprintf(stderr, "bench_tok: cannot read %s\n", path);
    return 1;
  }
  size_t cap = 4096 + 512, plen = 0;
  char *prompt = malloc(cap);
  while (plen < 4096) {
    const cJSON *e;
    cJSON_ArrayForEach(e, g) {
      const char *t = cJSON_GetObjectItem(e, "text")->valuestring;
      size_t n = strlen(t);
      if (plen + n + 1 >= cap) break;
      memcpy(prompt + plen, t, n);
      plen += n;
      prompt[plen] = plen % 3 ? ' ' : '\n';
      plen++;
    }
  }
  size_t reps = mb * 1024 * 1024 / plen;
  double enc[RUNS], dec[RUNS];
  size_t ntok = 0;
  int32_t *all = NULL;
  for (int r = 0; r < RUNS; r++) {
    double t0 = now_s();
    for (size_t i = 0; i < reps; i++) {
      int32_t *ids;
      size_t n;
      if (tok_encode(tok, prompt, plen, 1, &ids, &n) != 0) return 1;
      if (!all) {
        all = ids;
        ntok = n;
      } else {
        free(ids);
      }
    }
    enc[r] = (double)(reps * plen) / (now_s() - t0) / 1e6;
    tok_stream_t *s;
    tok_stream_new(tok, 1, &s);
    t0 = now_s();
    size_t out = 0;
    for (size_t i = 0; i < reps / 4 + 1; i++) {
      for (size_t j = 0; j < ntok; j++) {
        const char *c;
        size_t n;
        tok_stream_push(s, all[j], &c, &n);
        out += n;
      }
      const char *c;
      size_t n;
      tok_stream_flush(s, &c, &n);
    }
    dec[r] = (double)((reps / 4 + 1) * ntok) / (now_s() - t0) / 1e6;
    tok_stream_free(s);
    if (out == 0) return 1;
  }
  qsort(enc, RUNS, sizeof *enc, cmp_d);
  qsort(dec, RUNS, sizeof *dec, cmp_d);
  printf("llama2 encode: %.1f MB/s (median of %d; %zu prompts of %zu bytes = %.1f MB, "
         "%zu tokens each)\n",
         enc[RUNS / 2], RUNS, reps, plen, (double)(reps * plen) / 1e6, ntok);
  printf("llama2 stream decode: %.1f M tokens/s (median of %d)\n", dec[RUNS / 2], RUNS);
  free(all);
  free(prompt);
  cJSON_Delete(g);
  free(gj);
  tok_free(tok);
  return 0;
}
