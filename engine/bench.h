/* bench.h — `nanoserve bench`: decode steps of the forward pass on the configured backend,
 * without HTTP or the scheduler, timed per batch size and context length
 * (eng_bench_cli_main). */
#ifndef ENG_BENCH_H
#define ENG_BENCH_H

#ifdef __cplusplus
extern "C" {
#endif

/* `bench [--model DIR] [--config FILE] [--set key=value]... [--batch B,...] [--ctx C,...]
 * [--steps N] [--warmup N] [--json FILE|-] [--no-table]` with argv[0] == "bench".
 * The backend comes from engine.backend, as in the daemon; --model overrides engine.model.
 * For each batch size B and context C: B sequences are prefilled with C seeded random ids
 * (steps of at most engine.max_batch_tokens rows), then run N warm-up and N timed greedy
 * decode steps of B one-token rows. Prints a Markdown table on stdout (unless --no-table
 * or --json -) and writes the same figures as JSON with --json.
 * Returns the exit status: 0 ok, 1 failure (message on stderr), 2 bad usage or a plan the
 * settings cannot hold (a batch above engine.max_batch, a KV cache too small, a context
 * past the model's). Main thread; it becomes the thread that owns the backend. */
int eng_bench_cli_main(int argc, char **argv);

#ifdef __cplusplus
}
#endif
#endif
