/* cli.h — the nanoserve command line: subcommand dispatch and usage text.
 * Main thread only; returns the process exit code. */
#ifndef SRV_CLI_H
#define SRV_CLI_H

int srv_cli_main(int argc, char **argv);

#endif
