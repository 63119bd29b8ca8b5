/* cfg_cli.c — `nanoserve config dump|check|doc`: the settings as the operator sees them.
 * Entry point cfg_cli_main; exit codes 0 ok, 1 invalid configuration, 2 bad usage. */
#include "cfg_int.h"
#include "ns_err.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#define ERR_BYTES 65536 /* room for every problem of a badly broken file */

static void usage(FILE *f) {
  fprintf(f,
          "usage: nanoserve config dump [--config FILE] [--set key=value ...]\n"
          "       nanoserve config check FILE [--set key=value ...]\n"
          "       nanoserve config doc\n"
          "\n"
          "  dump   print the effective configuration (defaults, FILE, then each --set) as JSON\n"
          "  check  validate FILE (and the overrides); print 'FILE: ok' or every problem\n"
          "  doc    print the table of all settings (Markdown)\n");
}

void cfg_print_errors(const char *prefix, const char *err) {
  const char *p = err;
  while (*p) {
    const char *nl = strchr(p, '\n');
    size_t n = nl ? (size_t)(nl - p) : strlen(p);
    fprintf(stderr, "%s%.*s\n", prefix, (int)n, p);
    p += n + (nl ? 1 : 0);
  }
}

typedef struct opts {
  const char *file; /* --config FILE (dump) or the FILE operand (check) */
  const char **sets;
  int nsets;
} opts;

/* Parse [--config FILE] [--set k=v]... [operand]; operand is allowed for check only. */
static int parse_opts(int argc, char **argv, int want_operand, opts *o) {
  o->file = NULL;
  o->nsets = 0;
  o->sets = calloc((size_t)argc + 1, sizeof *o->sets);
  if (!o->sets) return -1;
  for (int i = 0; i < argc; i++) {
    const char *a = argv[i];
    if (strcmp(a, "--set") == 0) {
      if (i + 1 >= argc) return -1;
      o->sets[o->nsets++] = argv[++i];
    } else if (strncmp(a, "--set=", 6) == 0) {
      o->sets[o->nsets++] = a + 6;
    } else if (!want_operand && strcmp(a, "--config") == 0) {
      if (i + 1 >= argc || o->file) return -1;
      o->file = argv[++i];
    } else if (!want_operand && strncmp(a, "--config=", 9) == 0) {
      if (o->file) return -1;
      o->file = a + 9;
    } else if (want_operand && a[0] != '-' && !o->file) {
      o->file = a;
    } else {
      return -1;
    }
  }
  if (want_operand && !o->file) return -1;
  return 0;
}

/* Build the effective configuration into c; print every problem; 0 when valid.
 * prefix labels problems that are not about the file itself. */
static int build(cfg_t *c, const opts *o, const char *prefix, char *err) {
  int bad = 0;
  cfg_init(c);
  if (o->file && cfg__load_file(c, o->file, err, ERR_BYTES, 1) != 0) {
    cfg_print_errors("", err);
    bad = 1;
  }
  for (int i = 0; i < o->nsets; i++) {
    if (cfg_set(c, o->sets[i], err, ERR_BYTES) != 0) {
      cfg_print_errors("--set: ", err);
      bad = 1;
    }
  }
  if (cfg_validate(c, err, ERR_BYTES) != 0) {
    cfg_print_errors(prefix, err);
    bad = 1;
  }
  return bad;
}

static int cmd_dump_or_check(int argc, char **argv, int check) {
  opts o;
  if (parse_opts(argc, argv, check, &o) != 0) {
    free(o.sets);
    usage(stderr);
    return 2;
  }
  char *err = malloc(ERR_BYTES);
  char *prefix = check ? malloc(strlen(o.file) + 3) : NULL;
  if (!err || (check && !prefix)) {
    fprintf(stderr, "nanoserve config: %s\n", ns_strerror(NS_ENOMEM));
    free(err);
    free(prefix);
    free(o.sets);
    return 1;
  }
  if (prefix) sprintf(prefix, "%s: ", o.file);
  cfg_t c;
  int rc = build(&c, &o, prefix ? prefix : "", err) ? 1 : 0;
  if (rc == 0 && check) {
    printf("%s: ok\n", o.file);
  } else if (rc == 0) {
    char *json = cfg_dump_json(&c);
    if (json)
      printf("%s\n", json);
    else
      fprintf(stderr, "nanoserve config: %s\n", ns_strerror(NS_ENOMEM)), rc = 1;
    free(json);
  }
  if (fflush(stdout) != 0) rc = 1;
  cfg_free(&c);
  free(prefix);
  free(err);
  free(o.sets);
  return rc;
}

static int cmd_doc(int argc) {
  if (argc != 0) {
    usage(stderr);
    return 2;
  }
  char *doc = cfg_doc_markdown();
  if (!doc) {
    fprintf(stderr, "nanoserve config: %s\n", ns_strerror(NS_ENOMEM));
    return 1;
  }
  fputs(doc, stdout);
  free(doc);
  return fflush(stdout) == 0 ? 0 : 1;
}

int cfg_cli_main(int argc, char **argv) {
  if (argc < 2) {
    usage(stderr);
    return 2;
  }
  const char *sub = argv[1];
  if (strcmp(sub, "dump") == 0) return cmd_dump_or_check(argc - 2, argv + 2, 0);
  if (strcmp(sub, "check") == 0) return cmd_dump_or_check(argc - 2, argv + 2, 1);
  if (strcmp(sub, "doc") == 0) return cmd_doc(argc - 2);
  if (strcmp(sub, "help") == 0 || strcmp(sub, "--help") == 0 || strcmp(sub, "-h") == 0) {
    usage(stdout);
    return 0;
  }
  fprintf(stderr, "nanoserve config: unknown subcommand '%s'\n\n", sub);
  usage(stderr);
  return 2;
}
