/* lg_opts.c — nanoserve-loadgen's command line: options, their checks, the --url parser
 * and the help text. Entry: lg_opts_parse. */
#include "lg.h"

#include "ns_err.h"

#include <ctype.h>
#include <errno.h>
#include <getopt.h>
#include <math.h>
#include <stdarg.h>
#include <stdlib.h>
#include <string.h>

#define LG_VERSION "0.1.0"

static const char usage_text[] =
    "usage: nanoserve-loadgen [--url http://HOST:PORT] [load shape] [workload] [output]\n"
    "\n"
    "Sends OpenAI-style completion requests to a server and measures TTFT, TPOT, ITL and\n"
    "end-to-end latency percentiles, throughput and goodput.\n"
    "\n"
    "target:\n"
    "  --url URL             http://host[:port][/prefix] (default http://127.0.0.1:8080)\n"
    "  --endpoint E          completions (default) or chat\n"
    "  --model NAME          model field (default: the id /v1/models reports, else none)\n"
    "  --api-key KEY         sent as Authorization: Bearer KEY\n"
    "  --stream, --no-stream SSE streaming (default) or one JSON reply per request\n"
    "  --ignore-eos          send ignore_eos: true so output lengths are exact\n"
    "  --temperature T       send a temperature (default: the server's)\n"
    "  --no-probe            do not ask /v1/models first\n"
    "load shape (closed loop unless --rate):\n"
    "  --concurrency N       closed loop: N requests always in flight (default 1)\n"
    "  --rate R              open loop: R requests/s on average\n"
    "  --burstiness B        gamma-distributed gaps with shape B, mean 1/R (1 = Poisson)\n"
    "  --max-concurrency M   open loop: at most M in flight; later arrivals wait, their\n"
    "                        latency still counted from when they were due\n"
    "  --requests N          measured requests (default 100 unless --duration)\n"
    "  --duration S          stop sending after S seconds of measurement\n"
    "  --warmup K | Ks       K requests (or K seconds) first, not measured\n"
    "  --seed N              arrivals, lengths and prompts (default 0)\n"
    "  --timeout S           per request (default 600)\n"
    "workload:\n"
    "  --dataset D           random (default) or FILE.jsonl: {\"prompt\": text or ids} or\n"
    "                        {\"messages\": [...]}, optional \"max_tokens\"\n"
    "  --input-len N         random: prompt length in token ids (default 128)\n"
    "  --output-len N        max_tokens (default 128; without it a JSONL item's own\n"
    "                        max_tokens is used)\n"
    "  --len-dist D          fixed (default), uniform or normal, for both lengths\n"
    "  --len-spread F        uniform: +-F*len; normal: sd F*len (default 0.25)\n"
    "  --vocab-min N, --vocab-max N   random ids in [min, max) (default 100, 1000)\n"
    "output:\n"
    "  --slo-ttft-ms MS, --slo-tpot-ms MS   goodput: requests/s meeting all given SLOs\n"
    "  --json FILE           every figure and every parameter\n"
    "  --csv FILE            one row per request\n"
    "  --progress, --no-progress   the live line on stderr (default: when it is a TTY)\n"
    "\n"
    "Exit: 0 all requests succeeded; 1 some failed or none was sent; 2 bad usage; 130 SIGINT.\n";

enum {
  O_URL = 256,
  O_ENDPOINT,
  O_MODEL,
  O_API_KEY,
  O_STREAM,
  O_NO_STREAM,
  O_IGNORE_EOS,
  O_TEMP,
  O_NO_PROBE,
  O_CONC,
  O_RATE,
  O_BURST,
  O_MAXCONC,
  O_REQUESTS,
  O_DURATION,
  O_WARMUP,
  O_SEED,
  O_TIMEOUT,
  O_DATASET,
  O_INLEN,
  O_OUTLEN,
  O_LENDIST,
  O_LENSPREAD,
  O_VMIN,
  O_VMAX,
  O_SLO_TTFT,
  O_SLO_TPOT,
  O_JSON,
  O_CSV,
  O_PROGRESS,
  O_NO_PROGRESS,
  O_HELP,
  O_VERSION
};

static const struct option longopts[] = {{"url", 1, 0, O_URL},
                                         {"endpoint", 1, 0, O_ENDPOINT},
                                         {"model", 1, 0, O_MODEL},
                                         {"api-key", 1, 0, O_API_KEY},
                                         {"stream", 0, 0, O_STREAM},
                                         {"no-stream", 0, 0, O_NO_STREAM},
                                         {"ignore-eos", 0, 0, O_IGNORE_EOS},
                                         {"temperature", 1, 0, O_TEMP},
                                         {"no-probe", 0, 0, O_NO_PROBE},
                                         {"concurrency", 1, 0, O_CONC},
                                         {"rate", 1, 0, O_RATE},
                                         {"burstiness", 1, 0, O_BURST},
                                         {"max-concurrency", 1, 0, O_MAXCONC},
                                         {"requests", 1, 0, O_REQUESTS},
                                         {"duration", 1, 0, O_DURATION},
                                         {"warmup", 1, 0, O_WARMUP},
                                         {"seed", 1, 0, O_SEED},
                                         {"timeout", 1, 0, O_TIMEOUT},
                                         {"dataset", 1, 0, O_DATASET},
                                         {"input-len", 1, 0, O_INLEN},
                                         {"output-len", 1, 0, O_OUTLEN},
                                         {"len-dist", 1, 0, O_LENDIST},
                                         {"len-spread", 1, 0, O_LENSPREAD},
                                         {"vocab-min", 1, 0, O_VMIN},
                                         {"vocab-max", 1, 0, O_VMAX},
                                         {"slo-ttft-ms", 1, 0, O_SLO_TTFT},
                                         {"slo-tpot-ms", 1, 0, O_SLO_TPOT},
                                         {"json", 1, 0, O_JSON},
                                         {"csv", 1, 0, O_CSV},
                                         {"progress", 0, 0, O_PROGRESS},
                                         {"no-progress", 0, 0, O_NO_PROGRESS},
                                         {"help", 0, 0, O_HELP},
                                         {"version", 0, 0, O_VERSION},
                                         {0, 0, 0, 0}};

static int bad(const char *fmt, ...) __attribute__((format(printf, 1, 2)));
static int bad(const char *fmt, ...) {
  va_list ap;
  va_start(ap, fmt);
  fprintf(stderr, "nanoserve-loadgen: ");
  vfprintf(stderr, fmt, ap);
  fprintf(stderr, "\n(nanoserve-loadgen --help lists the options)\n");
  va_end(ap);
  return LG_EXIT_USAGE;
}

static int num(const char *opt, const char *s, double lo, double hi, double *out) {
  char *end;
  errno = 0;
  double v = strtod(s, &end);
  if (end == s || *end || errno || !isfinite(v) || v < lo || v > hi) {
    char range[96];
    snprintf(range, sizeof range, "a number in [%g, %g]", lo, hi);
    fprintf(stderr, "nanoserve-loadgen: --%s '%s': expected %s\n", opt, s, range);
    return LG_EXIT_USAGE;
  }
  *out = v;
  return 0;
}

static int integer(const char *opt, const char *s, long lo, long hi, long *out) {
  char *end;
  errno = 0;
  long v = strtol(s, &end, 10);
  if (end == s || *end || errno || v < lo || v > hi) {
    fprintf(stderr, "nanoserve-loadgen: --%s '%s': expected an integer in [%ld, %ld]\n", opt, s, lo,
            hi);
    return LG_EXIT_USAGE;
  }
  *out = v;
  return 0;
}

/* ---- --url ----------------------------------------------------------------------------------- */

int lg_url_parse(const char *url, lg_opts *o, char *err, size_t errlen) {
  const char *p = url;
  if (strlen(url) >= sizeof o->url) return ns_errf(err, errlen, NS_EINVAL, "too long");
  for (const char *q = url; *q; q++)
    if ((unsigned char)*q <= ' ' || *q == 0x7f)
      return ns_errf(err, errlen, NS_EINVAL, "contains a space or control character");
  if (strncasecmp(p, "https://", 8) == 0)
    return ns_errf(err, errlen, NS_EINVAL, "https is not supported (plain http only)");
  if (strncasecmp(p, "http://", 7) != 0)
    return ns_errf(err, errlen, NS_EINVAL, "expected http://host[:port][/prefix]");
  p += 7;
  const char *hs = p, *he;
  if (*p == '[') { /* [v6]:port */
    he = strchr(p, ']');
    if (!he) return ns_errf(err, errlen, NS_EINVAL, "missing ']' after an IPv6 address");
    hs = p + 1;
    p = he + 1;
  } else {
    while (*p && *p != ':' && *p != '/' && *p != '?' && *p != '#')
      p++;
    he = p;
  }
  if (he == hs) return ns_errf(err, errlen, NS_EINVAL, "no host");
  if ((size_t)(he - hs) >= sizeof o->host) return ns_errf(err, errlen, NS_EINVAL, "host too long");
  for (const char *q = hs; q < he; q++)
    if (!isalnum((unsigned char)*q) && !strchr(".-_:%", *q))
      return ns_errf(err, errlen, NS_EINVAL, "bad character '%c' in the host", *q);
  if (strchr(url, '@')) return ns_errf(err, errlen, NS_EINVAL, "user info is not supported");
  long port = 80;
  if (*p == ':') {
    char *end;
    p++;
    if (!isdigit((unsigned char)*p)) return ns_errf(err, errlen, NS_EINVAL, "bad port");
    errno = 0;
    port = strtol(p, &end, 10);
    if (errno || port < 1 || port > 65535 || (*end && *end != '/'))
      return ns_errf(err, errlen, NS_EINVAL, "bad port (1-65535)");
    p = end;
  }
  if (*p && *p != '/') return ns_errf(err, errlen, NS_EINVAL, "unexpected '%c' after the host", *p);
  if (strpbrk(p, "?#"))
    return ns_errf(err, errlen, NS_EINVAL, "a query or fragment is not allowed");
  size_t bl = strlen(p);
  while (bl && p[bl - 1] == '/')
    bl--;
  /* "http://h/v1" and "http://h/v1/" mean the same as "http://h": the API paths add /v1 */
  if (bl >= 3 && memcmp(p + bl - 3, "/v1", 3) == 0) bl -= 3;
  if (bl >= sizeof o->base) return ns_errf(err, errlen, NS_EINVAL, "path too long");
  memcpy(o->host, hs, (size_t)(he - hs));
  o->host[he - hs] = '\0';
  memcpy(o->base, p, bl);
  o->base[bl] = '\0';
  o->port = (int)port;
  int v6 = strchr(o->host, ':') != NULL;
  snprintf(o->authority, sizeof o->authority, v6 ? "[%s]:%d" : "%s:%d", o->host, o->port);
  snprintf(o->url, sizeof o->url, "%s", url);
  return 0;
}

/* ---- argv ------------------------------------------------------------------------------------ */

static void defaults(lg_opts *o) {
  memset(o, 0, sizeof *o);
  o->endpoint = LG_EP_COMPLETIONS;
  o->stream = 1;
  o->temperature = -1;
  o->dataset = "random";
  o->input_len = 128;
  o->output_len = 128;
  o->len_spread = 0.25;
  o->vocab_min = 100;
  o->vocab_max = 1000;
  o->burstiness = 1;
  o->timeout_s = 600;
  o->progress = -1;
  o->probe = 1;
}

int lg_opts_parse(int argc, char **argv, lg_opts *o) {
  defaults(o);
  const char *url = "http://127.0.0.1:8080";
  long conc = 0, l = 0;
  int have_requests = 0, rc = 0;
  opterr = 0;
  optind = 1;
  int c;
  while ((c = getopt_long(argc, argv, ":h", longopts, NULL)) != -1) {
    switch (c) {
    case O_URL: url = optarg; break;
    case O_ENDPOINT:
      if (strcmp(optarg, "completions") == 0)
        o->endpoint = LG_EP_COMPLETIONS;
      else if (strcmp(optarg, "chat") == 0)
        o->endpoint = LG_EP_CHAT;
      else
        return bad("--endpoint '%s': expected completions or chat", optarg);
      break;
    case O_MODEL: o->model = optarg; break;
    case O_API_KEY: o->api_key = optarg; break;
    case O_STREAM: o->stream = 1; break;
    case O_NO_STREAM: o->stream = 0; break;
    case O_IGNORE_EOS: o->ignore_eos = 1; break;
    case O_TEMP: rc = num("temperature", optarg, 0, 2, &o->temperature); break;
    case O_NO_PROBE: o->probe = 0; break;
    case O_CONC: rc = integer("concurrency", optarg, 1, 100000, &conc); break;
    case O_RATE: rc = num("rate", optarg, 1e-6, 1e7, &o->rate); break;
    case O_BURST: rc = num("burstiness", optarg, 0.01, 1000, &o->burstiness); break;
    case O_MAXCONC:
      rc = integer("max-concurrency", optarg, 1, 100000, &l);
      o->max_concurrency = (int)l;
      break;
    case O_REQUESTS:
      rc = integer("requests", optarg, 1, 1000000000L, &o->requests);
      have_requests = 1;
      break;
    case O_DURATION: rc = num("duration", optarg, 0.001, 1e7, &o->duration_s); break;
    case O_WARMUP: {
      size_t n = strlen(optarg);
      if (n > 1 && optarg[n - 1] == 's') {
        char tmp[64];
        snprintf(tmp, sizeof tmp, "%.*s", (int)(n - 1), optarg);
        rc = num("warmup", tmp, 0, 1e7, &o->warmup_s);
      } else {
        rc = integer("warmup", optarg, 0, 1000000000L, &o->warmup_requests);
      }
      break;
    }
    case O_SEED: {
      char *end;
      errno = 0;
      o->seed = strtoull(optarg, &end, 0);
      if (end == optarg || *end || errno) return bad("--seed '%s': expected an integer", optarg);
      break;
    }
    case O_TIMEOUT: rc = num("timeout", optarg, 0.001, 1e6, &o->timeout_s); break;
    case O_DATASET: o->dataset = optarg; break;
    case O_INLEN:
      rc = integer("input-len", optarg, 1, 10000000, &l);
      o->input_len = (int)l;
      break;
    case O_OUTLEN:
      rc = integer("output-len", optarg, 1, 10000000, &l);
      o->output_len = (int)l;
      o->output_len_set = 1;
      break;
    case O_LENDIST:
      if (strcmp(optarg, "fixed") == 0)
        o->len_dist = LG_LEN_FIXED;
      else if (strcmp(optarg, "uniform") == 0)
        o->len_dist = LG_LEN_UNIFORM;
      else if (strcmp(optarg, "normal") == 0)
        o->len_dist = LG_LEN_NORMAL;
      else
        return bad("--len-dist '%s': expected fixed, uniform or normal", optarg);
      break;
    case O_LENSPREAD: rc = num("len-spread", optarg, 0, 1, &o->len_spread); break;
    case O_VMIN:
      rc = integer("vocab-min", optarg, 0, 100000000, &l);
      o->vocab_min = (int)l;
      break;
    case O_VMAX:
      rc = integer("vocab-max", optarg, 1, 100000000, &l);
      o->vocab_max = (int)l;
      break;
    case O_SLO_TTFT: rc = num("slo-ttft-ms", optarg, 1e-6, 1e9, &o->slo_ttft_ms); break;
    case O_SLO_TPOT: rc = num("slo-tpot-ms", optarg, 1e-6, 1e9, &o->slo_tpot_ms); break;
    case O_JSON: o->json_path = optarg; break;
    case O_CSV: o->csv_path = optarg; break;
    case O_PROGRESS: o->progress = 1; break;
    case O_NO_PROGRESS: o->progress = 0; break;
    case 'h':
    case O_HELP: fputs(usage_text, stdout); return 1;
    case O_VERSION: printf("nanoserve-loadgen %s\n", LG_VERSION); return 1;
    case ':': return bad("%s needs a value", argv[optind - 1]);
    default: return bad("unknown option '%s'", argv[optind - 1]);
    }
    if (rc) return rc;
  }
  if (optind < argc) return bad("unexpected argument '%s'", argv[optind]);

  char err[256];
  if (lg_url_parse(url, o, err, sizeof err) != 0) return bad("bad --url '%s': %s", url, err);
  if (o->rate > 0) {
    if (conc) return bad("--concurrency is the closed loop; with --rate use --max-concurrency");
  } else {
    if (o->max_concurrency)
      return bad("--max-concurrency needs --rate (the closed loop uses --concurrency)");
    if (o->burstiness != 1) return bad("--burstiness needs --rate");
    o->concurrency = conc ? (int)conc : 1;
  }
  if (!have_requests && o->duration_s == 0) o->requests = 100;
  if (o->vocab_min >= o->vocab_max) return bad("--vocab-min must be below --vocab-max");
  if (o->warmup_s > 0 && o->warmup_requests > 0)
    return bad("--warmup takes a count or seconds, not both");
  return 0;
}
