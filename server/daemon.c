/* daemon.c — `nanoserve serve`: settings, engine, HTTP server and API on one libuv loop;
 * signals (drain on SIGTERM/SIGINT, API keys on SIGHUP) and sd_notify. Entry point:
 * srv_serve_main (main thread, which runs the loop). */
#include "api.h"
#include "cli.h"
#include "metrics.h"
#include "ns_err.h"
#include "ns_log.h"
#include "sdnotify.h"

#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#define MAX_SETS       128
#define CLOSE_POLL_MS  50
#define CLOSE_GRACE_MS 3000 /* after the last request: let final bytes reach the clients */
#define DRAIN_EXTRA_MS 5000 /* after the drain deadline: close whatever is left */

typedef struct daemon_s {
  uv_loop_t loop;
  cfg_t cfg;
  eng_t *eng; /* NULL once stopped */
  http_server_t *http;
  srv_metrics_t *metrics;
  api_srv_t api;
  srv_sdnotify_t sd;
  uv_async_t async;
  uv_signal_t sig_term, sig_int, sig_hup;
  uv_timer_t drain_timer, close_timer, watchdog;
  int draining, closing, exit_code;
  uint64_t close_started_ms;
} daemon_t;

static void usage(FILE *f) {
  fprintf(f, "usage: nanoserve serve [--config FILE] [--set key=value]...\n"
             "serves the OpenAI-compatible HTTP API (engine.model on server.host:server.port;\n"
             "defaults: models/tiny on 127.0.0.1:8080). SIGTERM/SIGINT drain and exit, a second\n"
             "one stops at once; SIGHUP reloads server.api_keys_file.\n");
}

/* ---- shutdown ------------------------------------------------------------------------------ */

/* Fail what the engine still holds (final error events / 503s) and stop its thread. */
static void stop_engine(daemon_t *d) {
  if (!d->eng) return;
  eng_t *e = d->eng;
  d->eng = NULL;
  d->api.eng = NULL; /* later submissions answer 503 */
  eng_stop(e, srv_api_event, &d->api);
}

static void close_handle(uv_handle_t *h) {
  if (h->loop && !uv_is_closing(h)) uv_close(h, NULL);
}

static void on_http_closed(void *arg) {
  daemon_t *d = arg;
  d->http = NULL;
  d->api.http = NULL;
}

static void close_everything(daemon_t *d) {
  if (d->closing) return;
  d->closing = 1;
  stop_engine(d); /* before the async handle closes: eng_stop may still notify */
  if (d->http) http_server_close(d->http, on_http_closed, d);
  close_handle((uv_handle_t *)&d->async);
  close_handle((uv_handle_t *)&d->sig_term);
  close_handle((uv_handle_t *)&d->sig_int);
  close_handle((uv_handle_t *)&d->sig_hup);
  close_handle((uv_handle_t *)&d->drain_timer);
  close_handle((uv_handle_t *)&d->close_timer);
  close_handle((uv_handle_t *)&d->watchdog);
}

/* After the last request: wait (bounded) for the connections to take their last bytes. */
static void on_close_poll(uv_timer_t *t) {
  daemon_t *d = t->data;
  http_stats_t st = {0};
  if (d->http) http_server_stats(d->http, &st);
  if (st.open_connections == 0 || uv_now(&d->loop) - d->close_started_ms >= CLOSE_GRACE_MS) {
    ns_log_info("daemon: stopped");
    close_everything(d);
  }
}

static void finish(daemon_t *d) {
  if (d->close_started_ms || d->closing) return;
  stop_engine(d);
  d->close_started_ms = uv_now(&d->loop);
  uv_timer_start(&d->close_timer, on_close_poll, 0, CLOSE_POLL_MS);
}

static void on_idle(void *ud) {
  daemon_t *d = ud;
  if (d->draining) finish(d);
}

static void on_drain_timeout(uv_timer_t *t) {
  daemon_t *d = t->data;
  if (d->eng) {
    ns_log_warn("daemon: server.drain_timeout_s (%g s) passed with %d request(s) in flight; "
                "failing them",
                d->cfg.server.drain_timeout_s, srv_api_live(&d->api));
    stop_engine(d); /* their final error events free the calls: on_idle follows */
    uv_timer_start(&d->drain_timer, on_drain_timeout, DRAIN_EXTRA_MS, 0);
    if (srv_api_live(&d->api) == 0) finish(d);
  } else { /* something still open long after: close it */
    ns_log_warn("daemon: %d request(s) still open after the drain; closing", srv_api_live(&d->api));
    close_everything(d);
  }
}

static void begin_drain(daemon_t *d, int signum) {
  if (d->draining) {
    ns_log_warn("daemon: signal %d again: stopping now", signum);
    close_everything(d);
    return;
  }
  d->draining = 1;
  d->api.draining = 1;
  ns_log_info("daemon: signal %d: draining %d request(s) for up to %g s", signum,
              srv_api_live(&d->api), d->cfg.server.drain_timeout_s);
  if (srv_sdnotify_send(&d->sd, "STOPPING=1") != 0) ns_log_warn("daemon: sd_notify failed");
  http_server_stop_listening(d->http);
  if (d->eng) eng_drain(d->eng);
  uv_timer_start(&d->drain_timer, on_drain_timeout,
                 (uint64_t)(d->cfg.server.drain_timeout_s * 1000.0), 0);
  if (srv_api_live(&d->api) == 0) finish(d);
}

/* ---- loop callbacks -------------------------------------------------------------------------- */

static void on_signal(uv_signal_t *s, int signum) {
  daemon_t *d = s->data;
  if (signum == SIGHUP) {
    /* The log level is read once at start (ns_log_configure is not safe while the engine
     * thread logs); only the API keys reload. */
    int rc = d->http ? http_auth_reload(d->http) : 0;
    if (rc)
      ns_log_error("daemon: SIGHUP: reloading %s failed (%s); the old keys stay",
                   d->cfg.server.api_keys_file, ns_strerror(rc));
    else
      ns_log_info("daemon: SIGHUP: API keys reloaded (%zu); other settings need a restart",
                  d->http ? http_auth_key_count(d->http) : 0);
    return;
  }
  begin_drain(d, signum);
}

static void on_async(uv_async_t *h) {
  daemon_t *d = h->data;
  srv_api_poll(&d->api);
}

/* The engine thread: events are waiting. */
static void on_engine_notify(void *ud) {
  daemon_t *d = ud;
  uv_async_send(&d->async);
}

static void on_watchdog(uv_timer_t *t) {
  daemon_t *d = t->data;
  if (srv_api_healthy(&d->api) && srv_sdnotify_send(&d->sd, "WATCHDOG=1") != 0)
    ns_log_warn("daemon: sd_notify WATCHDOG=1 failed");
}

/* ---- startup -------------------------------------------------------------------------------- */

static int parse_args(int argc, char **argv, cfg_t *cfg) {
  const char *config = NULL;
  const char *sets[MAX_SETS];
  int n_sets = 0;
  for (int i = 1; i < argc; i++) {
    const char *o = argv[i];
    if (strcmp(o, "--help") == 0 || strcmp(o, "-h") == 0) {
      usage(stdout);
      return 1;
    }
    if ((strcmp(o, "--config") == 0 || strcmp(o, "--set") == 0) && i + 1 < argc) {
      if (o[2] == 'c')
        config = argv[++i];
      else if (n_sets < MAX_SETS)
        sets[n_sets++] = argv[++i];
      else {
        fprintf(stderr, "serve: more than %d --set options\n", MAX_SETS);
        return 2;
      }
      continue;
    }
    fprintf(stderr, "serve: unknown or incomplete option '%s'\n", o);
    usage(stderr);
    return 2;
  }
  char err[4096];
  int rc = 0;
  if (config && (rc = cfg_load_file(cfg, config, err, sizeof err))) goto bad;
  for (int i = 0; i < n_sets; i++)
    if ((rc = cfg_set(cfg, sets[i], err, sizeof err))) goto bad;
  if ((rc = cfg_validate(cfg, err, sizeof err))) goto bad;
  return 0;
bad:
  cfg_print_errors("serve: ", err[0] ? err : ns_strerror(rc));
  return 3;
}

static int start(daemon_t *d) {
  char err[1024];
  uv_loop_t *loop = &d->loop;
  d->async.data = d->sig_term.data = d->sig_int.data = d->sig_hup.data = d;
  d->drain_timer.data = d->close_timer.data = d->watchdog.data = d;
  if (uv_async_init(loop, &d->async, on_async) || uv_timer_init(loop, &d->drain_timer) ||
      uv_timer_init(loop, &d->close_timer) || uv_timer_init(loop, &d->watchdog) ||
      uv_signal_init(loop, &d->sig_term) || uv_signal_init(loop, &d->sig_int) ||
      uv_signal_init(loop, &d->sig_hup)) {
    fprintf(stderr, "serve: cannot set up the event loop\n");
    return 1;
  }
  int rc = eng_start(&d->cfg, on_engine_notify, d, &d->eng, err, sizeof err);
  if (rc) {
    fprintf(stderr, "serve: cannot start the engine: %s (%s)\n", err, ns_strerror(rc));
    return 1;
  }
  if (srv_metrics_new(&d->metrics) || srv_api_init(&d->api, loop, &d->cfg, d->eng, d->metrics)) {
    fprintf(stderr, "serve: out of memory\n");
    return 1;
  }
  d->api.on_idle = on_idle;
  d->api.idle_ud = d;
  if ((rc = http_server_create(loop, &d->cfg, &d->http))) {
    fprintf(stderr, "serve: cannot set up the HTTP server: %s (server.api_keys_file '%s')\n",
            ns_strerror(rc), d->cfg.server.api_keys_file);
    return 1;
  }
  if ((rc = srv_api_routes(&d->api, d->http))) {
    fprintf(stderr, "serve: cannot add the routes: %s\n", ns_strerror(rc));
    return 1;
  }
  if ((rc = http_server_listen(d->http))) {
    fprintf(stderr, "serve: cannot listen on %s:%d (server.host, server.port): %s\n",
            d->cfg.server.host, d->cfg.server.port, ns_strerror(rc));
    return 1;
  }
  uv_signal_start(&d->sig_term, on_signal, SIGTERM);
  uv_signal_start(&d->sig_int, on_signal, SIGINT);
  uv_signal_start(&d->sig_hup, on_signal, SIGHUP);
  const char *host = d->cfg.server.host;
  int v6 = strchr(host, ':') != NULL;
  printf("listening on http://%s%s%s:%d\n", v6 ? "[" : "", host, v6 ? "]" : "",
         http_server_port(d->http));
  fflush(stdout);
  ns_log_info("daemon: listening on %s port %d, model '%s', max context %d", host,
              http_server_port(d->http), d->api.model_name, d->api.max_context);
  if (srv_sdnotify_send(&d->sd, "READY=1") != 0) ns_log_warn("daemon: sd_notify READY=1 failed");
  if (d->sd.watchdog_us) {
    uint64_t ms = d->sd.watchdog_us / 2000;
    uv_timer_start(&d->watchdog, on_watchdog, 0, ms ? ms : 1);
  }
  return 0;
}

int srv_serve_main(int argc, char **argv) {
  static daemon_t d; /* one per process: signal handlers and the loop refer to it */
  memset(&d, 0, sizeof d);
  cfg_init(&d.cfg);
  int rc = parse_args(argc, argv, &d.cfg);
  if (rc) {
    cfg_free(&d.cfg);
    return rc == 1 ? 0 : rc == 2 ? 2 : 1;
  }
  ns_log_configure(d.cfg.log.level, d.cfg.log.format);
  if ((rc = srv_sdnotify_open(&d.sd)))
    ns_log_warn("daemon: NOTIFY_SOCKET/WATCHDOG_USEC unusable (%s); not notifying systemd",
                ns_strerror(rc));
  signal(SIGPIPE, SIG_IGN); /* a peer gone mid-write is an error code, not a death */
  if (uv_loop_init(&d.loop)) {
    fprintf(stderr, "serve: cannot create the event loop\n");
    cfg_free(&d.cfg);
    return 1;
  }
  d.exit_code = start(&d);
  if (d.exit_code) close_everything(&d);
  uv_run(&d.loop, UV_RUN_DEFAULT);
  stop_engine(&d); /* normally done already */
  srv_api_free(&d.api);
  srv_metrics_free(d.metrics);
  if (uv_loop_close(&d.loop)) ns_log_warn("daemon: the event loop closed with handles open");
  srv_sdnotify_close(&d.sd);
  cfg_free(&d.cfg);
  return d.exit_code;
}
