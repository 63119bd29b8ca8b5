/* cli.h — the nanoserve command line: subcommand dispatch and usage text.
 * Main thread only; returns the process exit code. */
#ifndef SRV_CLI_H
#define SRV_CLI_H

int srv_cli_main(int argc, char **argv);
/* `nanoserve serve ...` (argv[0] == "serve", daemon.c): runs the daemon until a signal
 * stops it. Returns 0 after a clean stop, 1 on startup failure, 2 on bad usage. */
int srv_serve_main(int argc, char **argv);

#endif
