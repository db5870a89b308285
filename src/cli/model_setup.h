/* model_setup.h — the model + session + sampler trio of the generation commands. */
#ifndef SI_CLI_MODEL_SETUP_H
#define SI_CLI_MODEL_SETUP_H

#include "cli/cli_common.h"

typedef struct cli_setup_t {
    si_model *m;
    si_session *s;
    si_sampler *smp;
} cli_setup_t;

/* Loads everything o names; on failure prints the error and returns the exit status. */
int cli_setup(const cli_gen_opts *o, cli_setup_t *out);
void cli_teardown(cli_setup_t *c);

#endif
