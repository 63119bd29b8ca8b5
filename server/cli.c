/* cli.c — `nanoserve SUBCOMMAND ...`: routes to each subcommand's entry point
 * and prints the usage text that lists them all. */
#include "cli.h"

#include "bench.h"
#include "cfg.h"
#include "generate.h"
#include "mkmodel.h"
#include "tokenizer.h"

#include <stdio.h>
#include <string.h>

#ifndef NANOSERVE_VERSION
#define NANOSERVE_VERSION "0.1.0"
#endif

static void usage(FILE *f) {
  fprintf(f, "usage: nanoserve COMMAND [options]\n"
             "\n"
             "commands:\n"
             "  serve [--config FILE] [--set key=value ...]\n"
             "                       run the HTTP daemon (OpenAI-compatible API); SIGTERM drains\n"
             "  config dump [--config FILE] [--set key=value ...]\n"
             "                       print the effective configuration as JSON\n"
             "  config check FILE [--set key=value ...]\n"
             "                       validate a config file; exit 0 if valid, 1 otherwise\n"
             "  config doc           print the settings table (Markdown)\n"
             "  generate [--model DIR] --prompt TEXT [--max-tokens N] [--temperature T]\n"
             "          [--top-p P] [--top-k K] [--seed S] [--stop STR]... [--json]\n"
             "                       continue a prompt on the CPU backend, streamed to stdout\n"
             "  bench [--model DIR] [--batch 1,32,128] [--ctx 128,512] [--steps N]\n"
             "        [--warmup N] [--json FILE|-] [--no-table]\n"
             "        [--config FILE] [--set key=value ...]\n"
             "                       time decode steps of the engine without HTTP, per batch\n"
             "                       size and context length (Markdown table, JSON)\n"
             "  tokenize (--model DIR | --tokenizer FILE) [--no-special] [--decode]\n"
             "                       text on stdin -> JSON array of ids on stdout; with\n"
             "                       --decode, a JSON array of ids -> text\n"
             "  mkmodel --shape NAME --out DIR [--seed N] [--dtype bf16|f16|f32]\n"
             "          [--tokenizer tokenizer.json]\n"
             "                       write a Hugging Face checkpoint folder with random\n"
             "                       weights in a real model's shape (--list: the shapes)\n"
             "  version              print the version\n"
             "  help                 print this text\n");
}

int srv_cli_main(int argc, char **argv) {
  if (argc < 2 || strcmp(argv[1], "help") == 0 || strcmp(argv[1], "--help") == 0 ||
      strcmp(argv[1], "-h") == 0) {
    usage(argc < 2 ? stderr : stdout);
    return argc < 2 ? 2 : 0;
  }
  const char *cmd = argv[1];
  if (strcmp(cmd, "version") == 0 || strcmp(cmd, "--version") == 0) {
    printf("nanoserve %s\n", NANOSERVE_VERSION);
    return 0;
  }
  if (strcmp(cmd, "serve") == 0) return srv_serve_main(argc - 1, argv + 1);
  if (strcmp(cmd, "config") == 0) return cfg_cli_main(argc - 1, argv + 1);
  if (strcmp(cmd, "generate") == 0) return eng_generate_cli_main(argc - 1, argv + 1);
  if (strcmp(cmd, "bench") == 0) return eng_bench_cli_main(argc - 1, argv + 1);
  if (strcmp(cmd, "tokenize") == 0) return tok_cli_main(argc - 1, argv + 1);
  if (strcmp(cmd, "mkmodel") == 0) return mkmodel_cli_main(argc - 1, argv + 1);
  fprintf(stderr, "nanoserve: unknown command '%s'\n\n", cmd);
  usage(stderr);
  return 2;
}
