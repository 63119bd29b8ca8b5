/* generate.h — `nanoserve generate`: load a model folder, run the CPU backend on one
 * prompt and stream the continuation to stdout (eng_generate_cli_main). */
#ifndef ENG_GENERATE_H
#define ENG_GENERATE_H

#ifdef __cplusplus
extern "C" {
#endif

/* `generate [--model DIR] --prompt TEXT [--max-tokens N] [--temperature T] [--top-p P]
 * [--top-k K] [--min-p P] [--seed S] [--stop STR]... [--json] [--config FILE]
 * [--set key=value]...` with argv[0] == "generate". Engine settings (engine.model,
 * engine.backend, engine.cpu_threads, engine.kv_page_tokens, engine.max_batch_tokens,
 * engine.max_seq_len) come from the settings table; --model overrides engine.model.
 * Returns the exit status: 0 ok, 1 failure (message on stderr), 2 bad usage. Main thread. */
int eng_generate_cli_main(int argc, char **argv);

#ifdef __cplusplus
}
#endif
#endif
