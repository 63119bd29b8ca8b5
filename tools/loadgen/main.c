/* main.c — nanoserve-loadgen: parse the options, load the workload, run it on one libuv
 * loop, then print the table and write --json / --csv. Exit codes are in lg.h. */
#include "lg.h"

#include <signal.h>
#include <stdlib.h>
#include <sys/resource.h>

/* Many connections at once: take the hard limit on open files. */
static void raise_nofile(void) {
  struct rlimit rl;
  if (getrlimit(RLIMIT_NOFILE, &rl) == 0 && rl.rlim_cur < rl.rlim_max) {
    rl.rlim_cur = rl.rlim_max;
    setrlimit(RLIMIT_NOFILE, &rl);
  }
}

int main(int argc, char **argv) {
  lg_opts o;
  int rc = lg_opts_parse(argc, argv, &o);
  if (rc == 1) return LG_EXIT_OK;
  if (rc) return rc;
  signal(SIGPIPE, SIG_IGN); /* a peer that closed shows as EPIPE on the write */
  raise_nofile();

  char err[512];
  lg_work *w = NULL;
  if (lg_work_open(&o, &w, err, sizeof err) != 0) {
    fprintf(stderr, "nanoserve-loadgen: %s\n", err);
    return LG_EXIT_USAGE;
  }
  lg_run r;
  if (lg_run_exec(&r, &o, w, err, sizeof err) != 0) {
    fprintf(stderr, "nanoserve-loadgen: %s\n", err);
    lg_run_free(&r);
    lg_work_free(w);
    return LG_EXIT_USAGE;
  }
  lg_result res;
  int exit_code = LG_EXIT_OK;
  if (lg_report_compute(&r, &res) != 0) {
    fprintf(stderr, "nanoserve-loadgen: out of memory computing the figures\n");
    exit_code = LG_EXIT_FAILED;
  } else {
    lg_report_table(stdout, &r, &res);
    fflush(stdout);
    if (o.json_path && lg_report_json(o.json_path, &r, &res, err, sizeof err) != 0) {
      fprintf(stderr, "nanoserve-loadgen: %s\n", err);
      exit_code = LG_EXIT_FAILED;
    }
    if (o.csv_path && lg_report_csv(o.csv_path, &r, err, sizeof err) != 0) {
      fprintf(stderr, "nanoserve-loadgen: %s\n", err);
      exit_code = LG_EXIT_FAILED;
    }
    long failed = res.sent - res.ok;
    if (r.interrupted) {
      fprintf(stderr, "nanoserve-loadgen: interrupted; figures cover what finished\n");
      exit_code = LG_EXIT_INT;
    } else if (res.sent == 0) {
      fprintf(stderr, "nanoserve-loadgen: no request was sent\n");
      exit_code = LG_EXIT_FAILED;
    } else if (failed > 0) {
      fprintf(stderr,
              "nanoserve-loadgen: %ld of %ld requests failed (%ld timeouts); first error: %s\n",
              failed, res.sent, res.timeouts, res.first_error ? res.first_error : "?");
      exit_code = LG_EXIT_FAILED;
    }
  }
  lg_run_free(&r);
  lg_work_free(w);
  return exit_code;
}
