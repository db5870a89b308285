/* commands.h — the subcommands of the swiftinfer binary; main.c dispatches to them.
 * Each takes the argv that starts at the subcommand name and returns the exit status. */
#ifndef SI_CLI_COMMANDS_H
#define SI_CLI_COMMANDS_H

int cmd_run(int argc, char **argv);
int cmd_chat(int argc, char **argv);
int cmd_info(int argc, char **argv);
int cmd_tokenize(int argc, char **argv);
int cmd_synth(int argc, char **argv);
int cmd_bench(int argc, char **argv);
int cmd_serve(int argc, char **argv);
int cmd_perplexity(int argc, char **argv);

#endif
