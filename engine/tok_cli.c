/* tok_cli.c — `nanoserve tokenize`: text on stdin to ids (a JSON array), or with
 * --decode ids to text. Entry point tok_cli_main; exit codes 0 ok, 1 failure, 2 usage. */
#include "tok_int.h"

#include "ns_err.h"

#include <cjson/cJSON.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

static void usage(FILE *f) {
  fprintf(f, "usage: nanoserve tokenize (--model DIR | --tokenizer FILE) [--no-special] "
             "[--decode]\n"
             "\n"
             "  Reads text on stdin (verbatim, a trailing newline included) and prints its ids\n"
             "  as a JSON array. With --decode, reads a JSON array of ids and prints the text.\n"
             "  --model DIR       DIR/tokenizer.json (+ DIR/tokenizer_config.json)\n"
             "  --tokenizer FILE  FILE (+ tokenizer_config.json beside it, when present)\n"
             "  --no-special      encode without BOS/EOS; decode skipping special tokens\n");
}

static int read_stdin(tok_buf *b) {
  char chunk[65536];
  size_t n;
  while ((n = fread(chunk, 1, sizeof chunk, stdin)) > 0) {
    int rc = tok__buf_put(b, chunk, n);
    if (rc) return rc;
  }
  if (ferror(stdin)) return NS_EIO;
  return tok__buf_reserve(b, 0);
}

static int load(const char *model, const char *file, tok_t **tkp, char *err, size_t errlen) {
  if (model) return tok_load_dir(model, tkp, err, errlen);
  const char *slash = strrchr(file, '/');
  size_t dlen = slash ? (size_t)(slash - file) + 1 : 0;
  char *cfg = malloc(dlen + sizeof "tokenizer_config.json");
  if (!cfg) return NS_ENOMEM;
  memcpy(cfg, file, dlen);
  memcpy(cfg + dlen, "tokenizer_config.json", sizeof "tokenizer_config.json");
  int rc = tok_load(file, access(cfg, R_OK) == 0 ? cfg : NULL, tkp, err, errlen);
  free(cfg);
  return rc;
}

static int do_encode(const tok_t *tk, const tok_buf *in, int add_special) {
  int32_t *ids;
  size_t n;
  int rc = tok_encode(tk, in->p, in->len, add_special, &ids, &n);
  if (rc) {
    fprintf(stderr, "nanoserve tokenize: %s\n",
            rc == NS_EINVAL ? "input is not valid UTF-8" : ns_strerror(rc));
    return 1;
  }
  putchar('[');
  for (size_t i = 0; i < n; i++)
    printf(i ? ",%d" : "%d", ids[i]);
  printf("]\n");
  free(ids);
  return fflush(stdout) == 0 ? 0 : 1;
}

static int do_decode(const tok_t *tk, const tok_buf *in, int skip_special) {
  cJSON *arr = cJSON_ParseWithLength(in->p, in->len);
  int n = cJSON_GetArraySize(arr), status = 1;
  int32_t *ids = malloc(((size_t)(n > 0 ? n : 0) + 1) * sizeof *ids);
  if (!cJSON_IsArray(arr) || !ids) {
    fprintf(stderr, "nanoserve tokenize: --decode expects a JSON array of ids on stdin\n");
    goto out;
  }
  int i = 0;
  const cJSON *v;
  cJSON_ArrayForEach(v, arr) {
    if (!cJSON_IsNumber(v) || v->valuedouble != (double)(int32_t)v->valuedouble) {
      fprintf(stderr, "nanoserve tokenize: element %d is not an integer id\n", i);
      goto out;
    }
    ids[i++] = (int32_t)v->valuedouble;
  }
  char *text;
  size_t len;
  int rc = tok_decode(tk, ids, (size_t)n, skip_special, &text, &len);
  if (rc) {
    fprintf(stderr, "nanoserve tokenize: %s\n",
            rc == NS_EINVAL ? "an id is outside the vocabulary" : ns_strerror(rc));
    goto out;
  }
  status = fwrite(text, 1, len, stdout) == len && fflush(stdout) == 0 ? 0 : 1;
  free(text);
out:
  free(ids);
  cJSON_Delete(arr);
  return status;
}

int tok_cli_main(int argc, char **argv) {
  const char *model = NULL, *file = NULL;
  int no_special = 0, decode = 0;
  for (int i = 1; i < argc; i++) {
    const char *a = argv[i];
    if ((strcmp(a, "--model") == 0 || strcmp(a, "--tokenizer") == 0) && i + 1 < argc) {
      if (model || file) goto bad;
      *(a[2] == 'm' ? &model : &file) = argv[++i];
    } else if (strncmp(a, "--model=", 8) == 0 && !model && !file) {
      model = a + 8;
    } else if (strncmp(a, "--tokenizer=", 12) == 0 && !model && !file) {
      file = a + 12;
    } else if (strcmp(a, "--no-special") == 0) {
      no_special = 1;
    } else if (strcmp(a, "--decode") == 0) {
      decode = 1;
    } else if (strcmp(a, "--help") == 0 || strcmp(a, "-h") == 0) {
      usage(stdout);
      return 0;
    } else {
      goto bad;
    }
  }
  if (!model && !file) goto bad;
  char err[512];
  tok_t *tk = NULL;
  int rc = load(model, file, &tk, err, sizeof err);
  if (rc) {
    fprintf(stderr, "nanoserve tokenize: %s\n", err[0] ? err : ns_strerror(rc));
    return 1;
  }
  tok_buf in = {0};
  int status = 1;
  if ((rc = read_stdin(&in)))
    fprintf(stderr, "nanoserve tokenize: reading stdin failed\n");
  else
    status = decode ? do_decode(tk, &in, no_special) : do_encode(tk, &in, !no_special);
  tok__buf_free(&in);
  tok_free(tk);
  return status;
bad:
  usage(stderr);
  return 2;
}
