/* cpu_pool.c — persistent worker threads woken per job by a generation counter, so a
 * matmul costs one broadcast and one wait, never a thread creation. Entry: be_pool_run. */
#include "cpu_pool.h"

#include "ns_err.h"

#include <pthread.h>
#include <stdlib.h>
#include <unistd.h>

typedef struct worker {
  be_pool *pool;
  int index;
  pthread_t tid;
} worker;

struct be_pool {
  int size;
  worker *workers; /* [size - 1] */
  pthread_mutex_t mu;
  pthread_cond_t wake, done;
  unsigned long gen; /* bumped per job */
  int stop;
  int pending; /* workers still running the current job */
  int n;       /* threads of the current job */
  be_pool_fn fn;
  void *ctx;
};

static void *worker_main(void *arg) {
  worker *w = arg;
  be_pool *p = w->pool;
  unsigned long seen = 0;
  pthread_mutex_lock(&p->mu);
  for (;;) {
    while (!p->stop && p->gen == seen)
      pthread_cond_wait(&p->wake, &p->mu);
    if (p->stop) break;
    seen = p->gen;
    if (w->index >= p->n) continue;
    be_pool_fn fn = p->fn;
    void *ctx = p->ctx;
    int n = p->n;
    pthread_mutex_unlock(&p->mu);
    fn(ctx, w->index, n);
    pthread_mutex_lock(&p->mu);
    if (--p->pending == 0) pthread_cond_signal(&p->done);
  }
  pthread_mutex_unlock(&p->mu);
  return NULL;
}

int be_pool_create(int n_threads, be_pool **out) {
  *out = NULL;
  if (n_threads < 0) return NS_EINVAL;
  if (n_threads == 0) {
    long n = sysconf(_SC_NPROCESSORS_ONLN);
    n_threads = n > 0 ? (int)n : 1;
  }
  be_pool *p = calloc(1, sizeof *p);
  if (!p) return NS_ENOMEM;
  p->size = n_threads;
  if (pthread_mutex_init(&p->mu, NULL)) goto fail_pool;
  if (pthread_cond_init(&p->wake, NULL)) goto fail_mutex;
  if (pthread_cond_init(&p->done, NULL)) goto fail_wake;
  p->workers = calloc((size_t)n_threads, sizeof *p->workers);
  if (!p->workers) goto fail_done;
  int started = 0;
  for (; started < n_threads - 1; started++) {
    worker *w = &p->workers[started];
    w->pool = p;
    w->index = started + 1;
    if (pthread_create(&w->tid, NULL, worker_main, w)) break;
  }
  if (started < n_threads - 1) {
    p->size = started + 1;
    be_pool_destroy(p);
    return NS_EIO;
  }
  *out = p;
  return 0;
fail_done:
  pthread_cond_destroy(&p->done);
fail_wake:
  pthread_cond_destroy(&p->wake);
fail_mutex:
  pthread_mutex_destroy(&p->mu);
fail_pool:
  free(p);
  return NS_ENOMEM;
}

void be_pool_destroy(be_pool *p) {
  if (!p) return;
  pthread_mutex_lock(&p->mu);
  p->stop = 1;
  pthread_cond_broadcast(&p->wake);
  pthread_mutex_unlock(&p->mu);
  for (int i = 0; i < p->size - 1; i++)
    pthread_join(p->workers[i].tid, NULL);
  pthread_cond_destroy(&p->done);
  pthread_cond_destroy(&p->wake);
  pthread_mutex_destroy(&p->mu);
  free(p->workers);
  free(p);
}

int be_pool_size(const be_pool *p) {
  return p->size;
}

void be_pool_run(be_pool *p, be_pool_fn fn, void *ctx, int n) {
  if (n <= 0 || n > p->size) n = p->size;
  if (n == 1) {
    fn(ctx, 0, 1);
    return;
  }
  pthread_mutex_lock(&p->mu);
  p->fn = fn;
  p->ctx = ctx;
  p->n = n;
  p->pending = n - 1;
  p->gen++;
  pthread_cond_broadcast(&p->wake);
  pthread_mutex_unlock(&p->mu);
  fn(ctx, 0, n);
  pthread_mutex_lock(&p->mu);
  while (p->pending > 0)
    pthread_cond_wait(&p->done, &p->mu);
  pthread_mutex_unlock(&p->mu);
}
