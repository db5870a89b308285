/* model_setup.c — loading the model, session and sampler the generation commands share. */
#include "cli/model_setup.h"

#include <stdlib.h>

int cli_setup(const cli_gen_opts *o, cli_setup_t *out) {
    out->m = NULL;
    out->s = NULL;
    out->smp = NULL;
    si_status st;
    if (!o->model) return cli_fail("no model given (use -m FILE)") + 1;
    if ((st = si_model_load(o->model, &o->mp, &out->m)) ||
        (st = si_session_create_params(
             out->m, &(si_session_params){SI_SESSION_DEFAULT_BATCH, o->kv_dtype}, &out->s)) ||
        (st = si_sampler_create(&o->sp, si_model_n_vocab(out->m), &out->smp))) {
        int rc = cli_fail_status(st);
        cli_teardown(out);
        return rc;
    }
    return 0;
}

void cli_teardown(cli_setup_t *c) {
    si_sampler_free(c->smp);
    si_session_free(c->s);
    si_model_free(c->m);
    c->m = NULL;
    c->s = NULL;
    c->smp = NULL;
}
