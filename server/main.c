/* main.c — the nanoserve binary: everything happens in srv_cli_main (cli.c). */
#include "cli.h"

int main(int argc, char **argv) {
  return srv_cli_main(argc, argv);
}
