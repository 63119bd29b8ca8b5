/* test_example_sync.c — config/nanoserve.example.json must hold exactly the table's
 * settings, each at its default, so a new row without an example entry fails CI. */
#include "cfg.h"

#include <cjson/cJSON.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

static int failures;

#define FAIL(...)                                                                                  \
  do {                                                                                             \
    fprintf(stderr, "example: " __VA_ARGS__);                                                      \
    fputc('\n', stderr);                                                                           \
    failures++;                                                                                    \
  } while (0)

static const cfg_row *find_row(const char *name) {
  size_t n;
  const cfg_row *rows = cfg_rows(&n);
  for (size_t i = 0; i < n; i++)
    if (strcmp(rows[i].name, name) == 0) return &rows[i];
  return NULL;
}

/* Whether the JSON value equals the row's default, compared by the row's type. */
static int equals_default(const cfg_row *r, const cJSON *v) {
  switch (r->type) {
  case CFG_BOOL: return cJSON_IsBool(v) && (cJSON_IsTrue(v) ? 1 : 0) == r->def_i;
  case CFG_INT:
  case CFG_INT64: return cJSON_IsNumber(v) && v->valuedouble == (double)r->def_i;
  case CFG_DOUBLE: return cJSON_IsNumber(v) && v->valuedouble == r->def_d;
  case CFG_STRING: return cJSON_IsString(v) && strcmp(v->valuestring, r->def_s) == 0;
  case CFG_ENUM:
    if (!cJSON_IsString(v)) return 0;
    for (size_t k = 0; r->names[k]; k++)
      if (strcmp(r->names[k], v->valuestring) == 0) return r->values[k] == r->def_i;
    return 0;
  }
  return 0;
}

/* Visit every leaf, by dotted path; seen[i] counts how often row i appears. */
static void walk(const cJSON *obj, const char *prefix, int *seen) {
  size_t n;
  const cfg_row *rows = cfg_rows(&n);
  for (const cJSON *it = obj->child; it; it = it->next) {
    char name[256];
    snprintf(name, sizeof name, "%s%s%s", prefix, *prefix ? "." : "", it->string);
    if (cJSON_IsObject(it)) {
      walk(it, name, seen);
      continue;
    }
    const cfg_row *r = find_row(name);
    if (!r) {
      FAIL("'%s' is not a setting in the table (extra key)", name);
      continue;
    }
    seen[r - rows]++;
    if (!equals_default(r, it)) {
      char *text = cJSON_PrintUnformatted(it);
      FAIL("'%s' is %s, not its default", name, text ? text : "?");
      free(text);
    }
  }
}

int main(int argc, char **argv) {
  if (argc != 2) {
    fprintf(stderr, "usage: %s config/nanoserve.example.json\n", argv[0]);
    return 2;
  }
  FILE *f = fopen(argv[1], "rb");
  if (!f) {
    perror(argv[1]);
    return 1;
  }
  static char buf[1 << 20];
  size_t len = fread(buf, 1, sizeof buf - 1, f);
  fclose(f);
  buf[len] = '\0';
  cJSON *root = cJSON_Parse(buf);
  if (!cJSON_IsObject(root)) {
    fprintf(stderr, "example: %s is not a JSON object\n", argv[1]);
    return 1;
  }
  size_t n;
  const cfg_row *rows = cfg_rows(&n);
  int *seen = calloc(n, sizeof *seen);
  if (!seen) return 1;
  walk(root, "", seen);
  for (size_t i = 0; i < n; i++) {
    if (seen[i] == 0) FAIL("'%s' is missing", rows[i].name);
    if (seen[i] > 1) FAIL("'%s' appears %d times", rows[i].name, seen[i]);
  }
  /* and the loader takes it as it is */
  cfg_t c;
  char err[4096];
  cfg_init(&c);
  if (cfg_load_file(&c, argv[1], err, sizeof err) != 0 || cfg_validate(&c, err, sizeof err) != 0)
    FAIL("rejected by the loader:\n%s", err);
  cfg_free(&c);
  cJSON_Delete(root);
  free(seen);
  if (failures) {
    fprintf(stderr, "example: %d problem(s); update %s with the table\n", failures, argv[1]);
    return 1;
  }
  printf("example: %zu settings, all present at their defaults\n", n);
  return 0;
}
