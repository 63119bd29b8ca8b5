/* cfg_dump.c — the table's two outputs: a cfg_t as nested JSON (cfg_dump_json) and the
 * Markdown settings table for the README (cfg_doc_markdown). */
#include "cfg_int.h"
#include "ns_buf.h"

#include <cjson/cJSON.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

/* ---- JSON dump ---- */

/* The object for the sections of a dotted name ("engine" for "engine.model"), created on
 * first use; *leaf gets the last component. NULL when out of memory. */
static cJSON *section_of(cJSON *root, const char *name, const char **leaf) {
  cJSON *obj = root;
  const char *p = name, *dot;
  while ((dot = strchr(p, '.')) != NULL) {
    char part[64];
    size_t n = (size_t)(dot - p);
    if (n >= sizeof part) return NULL;
    memcpy(part, p, n);
    part[n] = '\0';
    cJSON *sub = cJSON_GetObjectItemCaseSensitive(obj, part);
    if (!sub) {
      sub = cJSON_CreateObject();
      if (!sub || !cJSON_AddItemToObject(obj, part, sub)) {
        cJSON_Delete(sub);
        return NULL;
      }
    }
    obj = sub;
    p = dot + 1;
  }
  *leaf = p;
  return obj;
}

/* cJSON indents with tabs and writes ":\t"; the project's JSON uses two spaces. Strings
 * cannot hold a raw tab (cJSON escapes it), so every tab is layout. malloc'd (the header
 * promises free(), not cJSON_free()). */
static char *untab(const char *s) {
  size_t tabs = 0;
  for (const char *p = s; *p; p++)
    tabs += *p == '\t';
  char *out = malloc(strlen(s) + tabs + 1), *o = out;
  if (!out) return NULL;
  for (const char *p = s; *p; p++) {
    if (*p != '\t')
      *o++ = *p;
    else if (p > s && p[-1] == ':')
      *o++ = ' ';
    else
      *o++ = ' ', *o++ = ' ';
  }
  *o = '\0';
  return out;
}

char *cfg_dump_json(const cfg_t *c) {
  size_t n;
  const cfg_row *rows = cfg_rows(&n);
  char *out = NULL, *printed = NULL;
  cJSON *root = cJSON_CreateObject();
  if (!root) return NULL;
  for (size_t i = 0; i < n; i++) {
    const cfg_row *r = &rows[i];
    const char *leaf;
    cJSON *obj = section_of(root, r->name, &leaf);
    if (!obj) goto out;
    cfg__val v = cfg__get(c, r);
    char text[64];
    cJSON *item = NULL;
    switch (r->type) {
    case CFG_BOOL: item = cJSON_CreateBool(v.i != 0); break;
    case CFG_INT:
    case CFG_INT64: item = cJSON_CreateNumber((double)v.i); break; /* bounds are < 2^53 */
    case CFG_DOUBLE: item = cJSON_CreateNumber(v.d); break;
    case CFG_STRING: item = cJSON_CreateString(v.s); break;
    case CFG_ENUM:
      cfg__fmt_value(r, &v, text, sizeof text);
      item = cJSON_CreateString(text);
      break;
    }
    if (!item || !cJSON_AddItemToObject(obj, leaf, item)) {
      cJSON_Delete(item);
      goto out;
    }
  }
  printed = cJSON_Print(root);
  if (printed) out = untab(printed);
out:
  cJSON_free(printed);
  cJSON_Delete(root);
  return out;
}

/* ---- Markdown doc ---- */

/* Text for a table cell: '|' would end the cell. */
static void sb_cell(ns_buf *b, const char *s) {
  for (; *s; s++) {
    if (*s == '|')
      ns_buf_puts(b, "\\|");
    else
      ns_buf_put(b, s, 1);
  }
}

static void sb_code_list(ns_buf *b, const char *const *names) {
  for (size_t k = 0; names[k]; k++) {
    ns_buf_puts(b, k ? ", `" : "`");
    sb_cell(b, names[k]);
    ns_buf_puts(b, "`");
  }
}

char *cfg_doc_markdown(void) {
  size_t n;
  const cfg_row *rows = cfg_rows(&n);
  ns_buf b = {0};
  ns_buf_puts(&b, "| Setting | Type | Default | Range / values | Description |\n"
                  "|---|---|---|---|---|\n");
  for (size_t i = 0; i < n; i++) {
    const cfg_row *r = &rows[i];
    cfg__val v = cfg__default(r);
    char text[200];
    ns_buf_puts(&b, "| `");
    ns_buf_puts(&b, r->name);
    ns_buf_puts(&b, "` | ");
    ns_buf_puts(&b, cfg__type_name(r->type));
    ns_buf_puts(&b, " | `");
    cfg__fmt_value(r, &v, text, sizeof text);
    if (r->type == CFG_STRING) ns_buf_puts(&b, "\"");
    sb_cell(&b, text);
    if (r->type == CFG_STRING) ns_buf_puts(&b, "\"");
    ns_buf_puts(&b, "` | ");
    switch (r->type) {
    case CFG_BOOL: ns_buf_puts(&b, "`true`, `false`"); break;
    case CFG_ENUM: sb_code_list(&b, r->names); break;
    case CFG_STRING:
      if (r->names) {
        ns_buf_puts(&b, "empty, or ");
        sb_code_list(&b, r->names);
      } else {
        ns_buf_puts(&b, r->flags & CFG_NONEMPTY ? "non-empty" : "any");
      }
      break;
    default:
      cfg__fmt_range(r, text, sizeof text);
      ns_buf_puts(&b, "`");
      sb_cell(&b, text);
      ns_buf_puts(&b, "`");
    }
    ns_buf_puts(&b, " | ");
    sb_cell(&b, r->help);
    ns_buf_puts(&b, " |\n");
  }
  if (b.oom) {
    free(b.p);
    return NULL;
  }
  return b.p;
}
