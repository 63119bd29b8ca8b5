/* cpu_pool.h — a small persistent pthread pool for the CPU backend: be_pool_run runs one
 * function on every thread (the caller included) and returns when all are done. */
#ifndef ENG_CPU_POOL_H
#define ENG_CPU_POOL_H

#ifdef __cplusplus
extern "C" {
#endif

typedef struct be_pool be_pool;

/* fn(ctx, i, n) runs once for each i in [0, n); i = 0 on the calling thread. */
typedef void (*be_pool_fn)(void *ctx, int i, int n);

/* n_threads in total including the caller (0: the online CPU count). Returns 0,
 * NS_EINVAL or NS_ENOMEM / NS_EIO (thread creation failed; nothing is left running). */
int be_pool_create(int n_threads, be_pool **out);
/* Stops and joins the workers. NULL is fine. */
void be_pool_destroy(be_pool *p);
int be_pool_size(const be_pool *p);
/* Run fn on min(n, size) threads (n <= 0: all) and wait for them. One caller at a time
 * (the thread owning the backend); fn must not call be_pool_run. */
void be_pool_run(be_pool *p, be_pool_fn fn, void *ctx, int n);

#ifdef __cplusplus
}
#endif
#endif
