/* cfg.h — placeholder until the settings table lands (being written now). */
#ifndef CFG_H
#define CFG_H
int cfg_cli_main(int argc, char **argv);
#endif
