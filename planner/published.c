/* sextant published: every run of models/published_runs.csv estimated with
 * its published layout and compared with its published throughput, in the
 * paper's own FLOP convention; then `plan` on the same model, GPU type and
 * count, to see whether the published layout is among sextant's best. */
#include "planner.h"

#include <math.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>

typedef struct {
    char run[64], model[64], gpu[64], recompute[16], unit[32], convention[48], attention[16];
    int64_t gpus, tp, pp, dp, vpp, mbs, gbs, seq, cp;
    int sp, zero;
    double measured;
    char source[512];
} published_run;

static int read_run(const csv_table *t, int r, published_run *p, char *err, size_t errlen)
{
    memset(p, 0, sizeof *p);
    int64_t sp, zero;
    if (csv_get_string(t, r, "run", 0, p->run, sizeof p->run, err, errlen) ||
        csv_get_string(t, r, "model", 0, p->model, sizeof p->model, err, errlen) ||
        csv_get_string(t, r, "gpu", 0, p->gpu, sizeof p->gpu, err, errlen) ||
        csv_get_int64(t, r, "gpus", 1, 10000000, &p->gpus, err, errlen) ||
        csv_get_int64(t, r, "tp", 1, 100000, &p->tp, err, errlen) ||
        csv_get_int64(t, r, "pp", 1, 100000, &p->pp, err, errlen) ||
        csv_get_int64(t, r, "dp", 1, 10000000, &p->dp, err, errlen) ||
        csv_get_int64(t, r, "vpp", 0, 1000, &p->vpp, err, errlen) ||
        csv_get_int64(t, r, "mbs", 0, 100000, &p->mbs, err, errlen) ||
        csv_get_int64(t, r, "gbs", 1, 100000000, &p->gbs, err, errlen) ||
        csv_get_int64(t, r, "seq", 1, 100000000, &p->seq, err, errlen) ||
        csv_get_string(t, r, "recompute", 0, p->recompute, sizeof p->recompute, err, errlen) ||
        csv_get_int64(t, r, "sp", 0, 1, &sp, err, errlen) || csv_get_int64(t, r, "zero", 0, 3, &zero, err, errlen) ||
        csv_get_double(t, r, "measured", 1e-9, 1e12, &p->measured, err, errlen) ||
        csv_get_string(t, r, "measured_unit", 0, p->unit, sizeof p->unit, err, errlen) ||
        csv_get_string(t, r, "flop_convention", 0, p->convention, sizeof p->convention, err, errlen) ||
        csv_get_string(t, r, "attention", 0, p->attention, sizeof p->attention, err, errlen) ||
        csv_get_string(t, r, "source", 0, p->source, sizeof p->source, err, errlen))
        return -1;
    p->sp = (int)sp;
    p->zero = (int)zero;
    p->cp = 1;
    if (!strncmp(p->source, "cp=", 3)) p->cp = strtoll(p->source + 3, NULL, 10);
    if (p->cp < 1) p->cp = 1;
    return 0;
}

/* The estimate's throughput in the unit and FLOP convention the paper used. */
static double predicted_in_unit(const published_run *p, const estimate_t *e, const char **convention_note)
{
    if (!strcmp(p->unit, "tokens_per_s_per_gpu")) { *convention_note = "tokens"; return e->tokens_per_s_per_gpu; }
    if (!strcmp(p->unit, "tokens_per_s")) { *convention_note = "tokens"; return e->tokens_per_s; }
    double gpus = (double)e->layout.gpus;
    if (!strcmp(p->convention, "narayanan-with-recompute")) {
        /* SC'21 counts the recomputed forward: sextant's hardware FLOPs */
        *convention_note = "hardware FLOPs";
        double tflops = e->hardware_flops_per_step / e->step_s / gpus / 1e12;
        return !strcmp(p->unit, "mfu") ? tflops * 1e12 / e->gpu->peak_flops[e->layout.precision] : tflops;
    }
    *convention_note = "model FLOPs";
    double tflops = e->model_flops_per_step / e->step_s / gpus / 1e12;
    return !strcmp(p->unit, "mfu") ? tflops * 1e12 / e->gpu->peak_flops[e->layout.precision] : tflops;
}

static recompute_t parse_recompute(const char *text)
{
    if (!strcasecmp(text, "none")) return RECOMPUTE_NONE;
    if (!strcasecmp(text, "full")) return RECOMPUTE_FULL;
    return RECOMPUTE_SELECTIVE;
}

int report_published(FILE *out, const hwdb *db, const model_zoo *zoo, const model_zoo *extra, const char *runs_path,
                     int with_plan, char *err, size_t errlen)
{
    csv_table t;
    if (csv_table_read(runs_path, &t, err, errlen) != 0) return -1;
    estimate_t *e = malloc(sizeof *e);
    plan_request *req = calloc(1, sizeof *req);
    plan_result *res = calloc(1, sizeof *res);
    if (!e || !req || !res) {
        free(e); free(req); free(res);
        csv_table_free(&t);
        snprintf(err, errlen, "out of memory");
        return -1;
    }
    int status = 0;
    double sum_abs = 0.0;
    int compared = 0;
    fprintf(out, "| run | model | GPUs | TP | PP | DP | published | predicted | error | convention | plan: published layout | plan: sextant's best |\n");
    fprintf(out, "|---|---|---|---|---|---|---|---|---|---|---|---|\n");
    for (int r = 0; r < t.nrows && !status; r++) {
        published_run p;
        if ((status = read_run(&t, r, &p, err, errlen))) break;
        const model_t *m = model_zoo_find(zoo, p.model);
        if (!m && extra) m = model_zoo_find(extra, p.model);
        const hw_gpu *g = hwdb_find_gpu(db, p.gpu);
        if (!m || !g) {
            snprintf(err, errlen, "%s:%d:%s: unknown %s '%s'", runs_path, t.line[r], m ? "gpu" : "model",
                     m ? "GPU" : "model", m ? p.gpu : p.model);
            status = -1;
            break;
        }
        const hw_node *node = hwdb_find_node(db, g->node);
        fprintf(out, "| %s | %s | %lld | %lld | %lld | %lld | %.4g %s |", p.run, p.model, (long long)p.gpus, (long long)p.tp,
                (long long)p.pp, (long long)p.dp, p.measured, p.unit);
        if (p.cp > 1) {
            fprintf(out, " not estimated | | | context parallelism (cp=%lld) is not modelled | |\n", (long long)p.cp);
            continue;
        }
        layout_t l = {0};
        l.gpus = p.gpus; l.tp = p.tp; l.pp = p.pp; l.dp = p.dp;
        l.vpp = p.vpp ? p.vpp : 1;
        l.mbs = p.mbs ? p.mbs : 1;
        l.gbs = p.gbs; l.seq = p.seq;
        l.gpus_per_node = node->gpus_per_node;
        l.recompute = parse_recompute(p.recompute);
        l.sp = p.sp; l.zero = p.zero;
        l.precision = g->peak_flops[PREC_BF16] > 0 ? PREC_BF16 : PREC_FP16;
        /* the attention kernels of the run's day: flash-style only from mid-2022 */
        l.attention = strcasecmp(p.attention, "unfused") ? ATTENTION_FLASH : ATTENTION_UNFUSED;
        job_t job = {1e12, g->cloud_usd_per_gpu_hour};
        char why[512];
        if (estimate_layout(m, g, node, &l, &job, e, why, sizeof why) != 0) {
            fprintf(out, " not estimated | | | %s | |\n", why);
            continue;
        }
        const char *convention;
        double predicted = predicted_in_unit(&p, e, &convention);
        double error = (predicted - p.measured) / p.measured;
        sum_abs += fabs(error);
        compared++;
        double published_time = e->step_s;
        fprintf(out, " %.4g%s | %+.1f%% | %s |", predicted, e->fits ? "" : " (does not fit)", 100.0 * error, convention);
        if (!with_plan) {
            fprintf(out, " | |\n");
            continue;
        }
        memset(req, 0, sizeof *req);
        req->model = m;
        req->gpu[0] = g;
        req->node[0] = node;
        req->ngpu_types = 1;
        req->gpu_counts[0] = p.gpus;
        req->ncounts = 1;
        req->seq = p.seq;
        req->gbs = p.gbs;
        req->tokens = 1e12;
        req->objective = OBJECTIVE_TIME;
        req->top = 5;
        req->max_zero = 3;
        req->precision = l.precision;
        if (plan_search(req, res, 0, why, sizeof why) != 0 || res->ntop == 0) {
            fprintf(out, " no feasible plan | |\n");
            continue;
        }
        int rank = 0;
        for (int i = 0; i < res->ntop && !rank; i++) {
            const layout_t *c = &res->top[i].layout;
            if (c->tp == l.tp && c->pp == l.pp && c->mbs == l.mbs && c->vpp == l.vpp) rank = i + 1;
        }
        const plan_candidate *w = &res->top[0];
        if (rank) fprintf(out, " rank %d of the top 5 |", rank);
        else fprintf(out, " not in the top 5 (%.1f%% slower than the winner) |", 100.0 * (published_time / w->step_s - 1.0));
        fprintf(out, " TP %lld PP %lld DP %lld VPP %lld mbs %lld %s ZeRO %d%s, %.1f%% MFU |\n", (long long)w->layout.tp,
                (long long)w->layout.pp, (long long)w->layout.dp, (long long)w->layout.vpp, (long long)w->layout.mbs,
                recompute_name(w->layout.recompute), w->layout.zero, w->layout.sp ? " SP" : "", 100.0 * w->mfu);
    }
    if (!status && compared)
        fprintf(out, "\nMean absolute error over %d estimated runs: %.1f%%.\n", compared, 100.0 * sum_abs / compared);
    free(e);
    free(req);
    free(res);
    csv_table_free(&t);
    return status;
}
