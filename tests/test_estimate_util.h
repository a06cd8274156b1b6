/* Shared by the estimate's suites (test_estimate, test_estimate_power) over
 * the shipped fixture (test_shipped.h): a layout on 8-GPU nodes with selective
 * recomputation in bf16, a model's estimate on a GPU into `e`, and one costed
 * op of the first stage. */
#ifndef SEXTANT_TEST_ESTIMATE_UTIL_H
#define SEXTANT_TEST_ESTIMATE_UTIL_H

#include "test_shipped.h"

static inline layout_t layout(int64_t gpus, int64_t tp, int64_t pp, int64_t mbs, int64_t gbs, int64_t seq)
{
    layout_t l;
    memset(&l, 0, sizeof l);
    l.gpus = gpus;
    l.tp = tp;
    l.pp = pp;
    l.dp = gpus / (tp * pp);
    l.vpp = 1;
    l.mbs = mbs;
    l.gbs = gbs;
    l.seq = seq;
    l.gpus_per_node = 8;
    l.recompute = RECOMPUTE_SELECTIVE;
    l.precision = PREC_BF16;
    return l;
}

/* a model that is not (or not as) in the zoo, into `e` */
static inline const estimate_t *run_model(const model_t *m, const hw_gpu *g, layout_t l, estimate_t *e)
{
    const hw_node *n = hwdb_find_node(&db, g->node);
    l.gpus_per_node = n->gpus_per_node;
    job_t job = {2e12, g->cloud_usd_per_gpu_hour};
    char err[512];
    if (estimate_layout(m, g, n, &l, &job, e, err, sizeof err) != 0) {
        print_error("%s\n", err);
        fail();
    }
    return e;
}

/* The costed op of a name and pass on the first stage, or a test failure. */
static inline const op_t *costed_op(const estimate_t *e, const char *name, pass_t pass)
{
    for (int i = 0; i < e->first_stage.nops; i++)
        if (!strcmp(e->first_stage.ops[i].name, name) && e->first_stage.ops[i].pass == pass) return &e->first_stage.ops[i];
    print_error("no op %s (%s)\n", name, pass_name(pass));
    fail();
    return NULL;
}

#endif
