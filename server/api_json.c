/* api_json.c — request bodies held to RFC 8259 before cJSON reads them, and duplicate names
 * resolved as Python's json resolves them. Entry points: api_json_check, api_json_last_wins.
 *
 * cJSON is lenient where the reference servers' parser (Python's json) is not: it reads
 * numbers through strtod, so 02, 1., 1.e0 and 00.5 pass, and copies control characters inside
 * strings; a body one server reads differently from another (a proxy, a gateway) is what
 * request-smuggling tricks are made of. cJSON still does the parsing; this only refuses what
 * is not JSON. And cJSON keeps a number only as a double, so an integer past 2^53 (a 64-bit
 * seed) loses its low bits: api_json_exact_ints hands such numbers their text. */
#include "api.h"

#include "ns_err.h"

#include <errno.h>
#include <math.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

/* Open containers at most: cJSON's own nesting limit (CJSON_NESTING_LIMIT, 1000), so that a
 * text this accepts is one cJSON can read. */
#define JSON_DEPTH 1000

static size_t skip_ws(const char *s, size_t n, size_t i) {
  while (i < n && (s[i] == ' ' || s[i] == '\t' || s[i] == '\n' || s[i] == '\r'))
    i++;
  return i;
}

static int is_digit(char c) {
  return c >= '0' && c <= '9';
}

static int is_hex(char c) {
  return is_digit(c) || (c >= 'a' && c <= 'f') || (c >= 'A' && c <= 'F');
}

/* The string at s[i] == '"': the index past its closing quote, or 0 where it is not one (a raw
 * control character, an unknown escape, a \u without four hex digits, no closing quote). */
static size_t string_end(const char *s, size_t n, size_t i) {
  for (i++; i < n; i++) {
    const unsigned char c = (unsigned char)s[i];
    if (c == '"') return i + 1;
    if (c < 0x20) return 0;
    if (c != '\\') continue;
    if (++i >= n) return 0;
    if (s[i] == 'u') {
      if (i + 4 >= n || !is_hex(s[i + 1]) || !is_hex(s[i + 2]) || !is_hex(s[i + 3]) ||
          !is_hex(s[i + 4]))
        return 0;
      i += 4;
    } else if (!memchr("\"\\/bfnrt", s[i], 8)) {
      return 0;
    }
  }
  return 0;
}

/* digits from i: the index past them, or 0 where there is none */
static size_t digits_end(const char *s, size_t n, size_t i) {
  const size_t from = i;
  while (i < n && is_digit(s[i]))
    i++;
  return i > from ? i : 0;
}

/* The number at i: -? (0 | [1-9][0-9]*) (. [0-9]+)? ([eE] [+-]? [0-9]+)?; the index past it,
 * or 0. */
static size_t number_end(const char *s, size_t n, size_t i) {
  if (i < n && s[i] == '-') i++;
  if (i < n && s[i] == '0')
    i++;
  else if (!(i = digits_end(s, n, i)))
    return 0;
  if (i < n && s[i] == '.' && !(i = digits_end(s, n, i + 1))) return 0;
  if (i < n && (s[i] == 'e' || s[i] == 'E')) {
    i++;
    if (i < n && (s[i] == '+' || s[i] == '-')) i++;
    if (!(i = digits_end(s, n, i))) return 0;
  }
  return i;
}

static size_t literal_end(const char *s, size_t n, size_t i) {
  static const char *const lits[] = {"true", "false", "null"};
  for (size_t k = 0; k < sizeof lits / sizeof lits[0]; k++) {
    const size_t len = strlen(lits[k]);
    if (n - i >= len && !memcmp(s + i, lits[k], len)) return i + len;
  }
  return 0;
}

int api_json_check(const char *s, size_t n, size_t *at) {
  char open[JSON_DEPTH]; /* '{' or '[' of each open container */
  int depth = 0;
  enum { VALUE, MEMBER, AFTER } want = VALUE;
  size_t i = 0;
  for (;;) {
    i = skip_ws(s, n, i);
    if (want == AFTER) { /* after a value: a comma, its container's close, or the end */
      if (depth == 0) {
        if (i == n) return 0;
        break;
      }
      if (i < n && s[i] == ',') {
        i++;
        want = open[depth - 1] == '{' ? MEMBER : VALUE;
      } else if (i < n && s[i] == (open[depth - 1] == '{' ? '}' : ']')) {
        i++;
        depth--;
      } else {
        break;
      }
      continue;
    }
    if (want == MEMBER) { /* a name, then a colon, then its value */
      const size_t e = i < n && s[i] == '"' ? string_end(s, n, i) : 0;
      if (!e) break;
      i = skip_ws(s, n, e);
      if (i >= n || s[i] != ':') break;
      i++;
      want = VALUE;
      continue;
    }
    if (i >= n) break;
    const char c = s[i];
    if (c == '{' || c == '[') {
      if (depth == JSON_DEPTH) break;
      open[depth++] = c;
      i = skip_ws(s, n, i + 1);
      if (i < n && s[i] == (c == '{' ? '}' : ']')) { /* empty */
        i++;
        depth--;
        want = AFTER;
      } else {
        want = c == '{' ? MEMBER : VALUE;
      }
      continue;
    }
    const size_t e = c == '"'                  ? string_end(s, n, i)
                     : c == '-' || is_digit(c) ? number_end(s, n, i)
                                               : literal_end(s, n, i);
    if (!e) break;
    i = e;
    want = AFTER;
  }
  *at = i;
  return -1;
}

/* ---- integers past a double's precision --------------------------------------------------- */

/* The next number of s from i (skipping strings: a name or a text may hold digits, and
 * outside strings only numbers hold '-' or digits): its start, *end past it; n where none. */
static size_t next_number(const char *s, size_t n, size_t i, size_t *end) {
  while (i < n) {
    if (s[i] == '"') {
      const size_t e = string_end(s, n, i);
      i = e ? e : n;
    } else if (s[i] == '-' || is_digit(s[i])) {
      *end = number_end(s, n, i);
      return *end ? i : n;
    } else {
      i++;
    }
  }
  return n;
}

/* The number nodes under item in document order (cJSON's tree keeps it), each paired with the
 * text's next number from *at; those of more than 15 digits, which a double may not hold
 * exactly, get their text. 0, NS_EINVAL where the text runs out first, or NS_ENOMEM. */
static int keep_texts(cJSON *item, const char *s, size_t n, size_t *at) {
  for (; item; item = item->next) {
    if (cJSON_IsNumber(item)) {
      size_t end = 0;
      const size_t i = next_number(s, n, *at, &end);
      if (i == n) return NS_EINVAL;
      *at = end;
      int digits = 0;
      for (size_t k = i; k < end; k++)
        digits += is_digit(s[k]);
      if (digits > 15 && !item->valuestring) {
        char *t = malloc(end - i + 1);
        if (!t) return NS_ENOMEM;
        memcpy(t, s + i, end - i);
        t[end - i] = '\0';
        item->valuestring = t; /* cJSON_Delete frees it with the node */
      }
    }
    const int rc = keep_texts(item->child, s, n, at);
    if (rc) return rc;
  }
  return 0;
}

int api_json_exact_ints(cJSON *root, const char *s, size_t n) {
  size_t at = 0, end;
  const int rc = keep_texts(root, s, n, &at);
  return rc ? rc : next_number(s, n, at, &end) == n ? 0 : NS_EINVAL;
}

int api_json_int64(const cJSON *v, int64_t lo, uint64_t hi, uint64_t *bits) {
  if (!cJSON_IsNumber(v)) return -1;
  const char *t = v->valuestring;
  if (t && !strpbrk(t, ".eE")) { /* an integer's own digits */
    char *end = NULL;
    errno = 0;
    if (t[0] == '-') {
      const long long x = strtoll(t, &end, 10);
      if (errno || *end || x < lo) return -1;
      *bits = (uint64_t)(int64_t)x;
    } else {
      const unsigned long long x = strtoull(t, &end, 10);
      if (errno || *end || x > hi) return -1;
      *bits = (uint64_t)x;
    }
    return 0;
  }
  /* a double: exact below 2^53; past it (written with a fraction or an exponent) its low
   * digits are gone, so it is no integer one can trust */
  const double d = v->valuedouble;
  if (!isfinite(d) || floor(d) != d || fabs(d) > 9007199254740992.0 || d < (double)lo ||
      d > (double)hi)
    return -1;
  *bits = d < 0 ? (uint64_t)(int64_t)d : (uint64_t)d;
  return 0;
}

/* ---- duplicate names ----------------------------------------------------------------------- */

typedef struct {
  cJSON *item;
  size_t pos; /* among the object's members */
} member_t;

static int by_name_then_pos(const void *a, const void *b) {
  const member_t *x = a, *y = b;
  const int c = strcmp(x->item->string, y->item->string);
  return c ? c : x->pos < y->pos ? -1 : x->pos > y->pos;
}

/* One object's duplicates out (sorted by name, so n log n however many members), then its
 * members' own. Returns NS_ENOMEM without changing anything where the sort's array fails. */
static int last_wins(cJSON *o) {
  size_t n = 0;
  for (cJSON *c = o->child; c; c = c->next)
    n++;
  if (cJSON_IsObject(o) && n > 1) {
    member_t *m = malloc(n * sizeof *m);
    if (!m) return NS_ENOMEM;
    size_t k = 0;
    for (cJSON *c = o->child; c; c = c->next, k++)
      m[k] = (member_t){c, k};
    qsort(m, n, sizeof *m, by_name_then_pos);
    for (k = 0; k + 1 < n; k++)
      if (!strcmp(m[k].item->string, m[k + 1].item->string))
        cJSON_Delete(cJSON_DetachItemViaPointer(o, m[k].item));
    free(m);
  }
  for (cJSON *c = o->child; c; c = c->next)
    if (cJSON_IsObject(c) || cJSON_IsArray(c)) {
      const int rc = last_wins(c);
      if (rc) return rc;
    }
  return 0;
}

int api_json_last_wins(cJSON *root) {
  return cJSON_IsObject(root) || cJSON_IsArray(root) ? last_wins(root) : 0;
}
