/* The training step (validator/train.c, step.h): the step's report: measured ops against the planner's
 * op list, CSV, JSON and the plot. */
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "step.h"

static const char *recompute_label(const train_options *o) { return o->l.recompute == RECOMPUTE_FULL ? "full" : "none"; }

static void csv_number(FILE *f, double x) { if (x >= 0) fprintf(f, "%.6e", x); }

void csv_rows(FILE *f, const report_info *in, const report_row *rows, int n, int calibrated)
{
    const train_options *o = in->o;
    for (int i = 0; i < n; i++) {
        fprintf(f, "%s,%s,%d,%lld,%lld,%lld,%lld,%lld,%lld,%s,%d,%s,", in->m->name, in->gpu->name, in->gpus,
                (long long)o->l.tp, (long long)o->l.pp, (long long)o->l.dp, (long long)o->l.mbs, (long long)o->l.gbs,
                (long long)o->l.seq, recompute_label(o), o->l.zero, rows[i].op);
        csv_number(f, rows[i].predicted_s);
        fputc(',', f);
        csv_number(f, rows[i].measured_s);
        fputc(',', f);
        if (rows[i].predicted_bytes > 0) fprintf(f, "%.0f", rows[i].predicted_bytes);
        fputc(',', f);
        if (rows[i].measured_bytes > 0) fprintf(f, "%.0f", rows[i].measured_bytes);
        fprintf(f, ",%d,%d,%d,%s,%d,%s,%lld,%lld,%lld,%lld,%lld\n", calibrated, in->rank, in->stage, rows[i].pass,
                o->l.sp && o->l.tp > 1, train_fused_attention(o) ? "flash" : "unfused", (long long)(o->l.vpp > 1 ? o->l.vpp : 1),
                (long long)(o->l.cp > 1 ? o->l.cp : 1), (long long)o->l.first_stage_layers, (long long)o->l.last_stage_layers,
                (long long)layout_ep(&o->l));
    }
}

const char csv_header[] =
    "model,gpu,gpus,tp,pp,dp,mbs,gbs,seq,recompute,zero,op,predicted_s,measured_s,predicted_bytes,measured_bytes,"
    "calibrated,rank,stage,pass,sp,attention,vpp,cp,first_stage_layers,last_stage_layers,ep\n";

int write_json(const char *path, const report_info *in, const report_row *rows, int n, const double *ranks, int nranks)
{
    outfile out;
    char err[PATH_MAX + 256];
    if (outfile_open(&out, path, err, sizeof err) != 0) { fprintf(stderr, "sextant-gpu train: --json: %s\n", err); return 1; }
    FILE *f = out.f;
    const train_options *o = in->o;
    const report_row *step = &rows[n - 1];
    fprintf(f, "{\n  \"model\": \"%s\", \"gpu\": \"%s\", \"gpus\": %d, \"tp\": %lld, \"pp\": %lld, \"vpp\": %lld, \"dp\": %lld, "
            "\"sp\": %s,\n", in->m->name, in->gpu->name, in->gpus, (long long)o->l.tp, (long long)o->l.pp,
            (long long)(o->l.vpp > 1 ? o->l.vpp : 1), (long long)o->l.dp,
            o->l.sp && o->l.tp > 1 ? "true" : "false");
    fprintf(f, "  \"cp\": %lld, \"ep\": %lld,\n", (long long)(o->l.cp > 1 ? o->l.cp : 1), (long long)layout_ep(&o->l));
    fprintf(f, "  \"mbs\": %lld, \"gbs\": %lld, \"seq\": %lld, \"recompute\": \"%s\", \"zero\": %d, \"attention\": \"%s\", "
               "\"calibrated\": %s,\n", (long long)o->l.mbs, (long long)o->l.gbs, (long long)o->l.seq, recompute_label(o),
               o->l.zero, train_fused_attention(o) ? "flash" : "unfused",
            o->calibrated ? "true" : "false");
    fprintf(f, "  \"step\": {\"predicted_s\": %.6e, \"measured_s\": %.6e, \"timed_steps\": %d, \"spread\": %.4f},\n",
            step->predicted_s, step->measured_s, in->timed_steps, in->spread);
    fprintf(f, "  \"memory\": {\"predicted_bytes\": %.0f, \"measured_bytes\": %.0f},\n", step->predicted_bytes,
            step->measured_bytes);
    fprintf(f, "  \"tokens_per_s\": %.1f, \"model_flops_per_s\": %.6e, \"mfu\": %.4f,\n", in->tokens_per_s, in->flops_per_s,
            in->mfu);
    fprintf(f, "  \"power\": {\"measured_w\": %.1f, \"measured_sm_mhz\": %.0f, \"measured_celsius\": %.1f, "
               "\"predicted_w\": %.1f, \"predicted_sm_mhz\": %.0f},\n",
            in->measured_w, in->measured_mhz, in->measured_c, in->predicted_w, in->predicted_mhz);
    fprintf(f, "  \"loss\": {\"first\": %.4f, \"last\": %.4f},\n  \"ranks\": [\n", in->first_loss, in->last_loss);
    for (int r = 0; r < nranks; r++)
        fprintf(f, "    {\"rank\": %d, \"step_s\": %.6e, \"device_bytes\": %.0f}%s\n", r, ranks[8 * r], ranks[8 * r + 2],
                r + 1 < nranks ? "," : "");
    fprintf(f, "  ],\n  \"ops\": [\n");
    for (int i = 0; i < n - 1; i++) {
        fprintf(f, "    {\"op\": \"%s\", \"pass\": \"%s\", ", rows[i].op, rows[i].pass);
        if (rows[i].predicted_s >= 0) fprintf(f, "\"predicted_s\": %.6e, ", rows[i].predicted_s);
        else fprintf(f, "\"predicted_s\": null, ");
        fprintf(f, "\"measured_s\": %.6e}%s\n", rows[i].measured_s, i + 2 < n ? "," : "");
    }
    fprintf(f, "  ]\n}\n");
    if (outfile_commit(&out, err, sizeof err) != 0) {
        fprintf(stderr, "sextant-gpu train: --json: %s\n", err);
        return 1;
    }
    return 0;
}

/* The per-op plot of this rank's rows (validator/plot.c). */
int write_plot(const char *path, const report_info *in, const report_row *rows, int n)
{
    const char **ops = host_alloc((size_t)n * sizeof *ops);
    double *predicted = host_alloc((size_t)n * sizeof *predicted), *measured = host_alloc((size_t)n * sizeof *measured);
    for (int i = 0; i < n; i++) {
        ops[i] = rows[i].op;
        predicted[i] = rows[i].predicted_s;
        measured[i] = rows[i].measured_s;
    }
    char title[1024];
    snprintf(title, sizeof title, "%.64s on %d x %.64s, tp %lld pp %lld dp %lld, micro-batch %lld, seq %lld: time per op and step (rank 0)",
             in->m->name, in->gpus, in->gpu->name, (long long)in->o->l.tp, (long long)in->o->l.pp, (long long)in->o->l.dp,
             (long long)in->o->l.mbs, (long long)in->o->l.seq);
    int rc = plot_predicted_measured(path, title, ops, predicted, measured, n);
    free(ops); free(predicted); free(measured);
    return rc == 1;   /* no gnuplot: said so, the run still counts */
}

/* The op list this rank's stage runs, costed by the planner. */
const stage_ops *stage_list(const estimate_t *e, const shapes *s)
{
    return s->last ? &e->last_stage : &e->first_stage;
}

double measured_of(const measured_op *ms, int n, const char *name, pass_t pass, int *calls, double *fastest)
{
    for (int i = 0; i < n; i++)
        if (ms[i].pass == pass && !strcmp(ms[i].name, name)) {
            if (calls) *calls = ms[i].calls;
            if (fastest) *fastest = ms[i].fastest;
            return ms[i].seconds;
        }
    if (calls) *calls = 0;
    if (fastest) *fastest = 0;
    return 0.0;
}

/* ZeRO-2/3: the compute stream's waits for their gathers and reduce-scatters, every pass */
double zero_exposed(const measured_op *ms, int n)
{
    /* the dense layers' and, with a mixture of experts, the experts' over their own group (zero.h's names) */
    const char *const waits[] = {zero_dp_names.gather_fwd_exposed, zero_dp_names.gather_bwd_exposed,
                                 zero_dp_names.reduce_scatter_exposed, zero_edp_names.gather_fwd_exposed,
                                 zero_edp_names.gather_bwd_exposed, zero_edp_names.reduce_scatter_exposed};
    double sum = 0.0;
    for (int i = 0; i < n; i++)
        for (size_t w = 0; w < sizeof waits / sizeof waits[0]; w++)
            if (!strcmp(ms[i].name, waits[w])) sum += ms[i].seconds;
    return sum;
}

/* The report's rows for one estimate: each op of the stage's list against the
 * profiling step, what ran but is not in the list, the pipeline's transfer
 * and bubble, the exposed data-parallel time and the step. */
int op_rows(const estimate_t *e, const gpt *g, const measured_step *ms, report_row *rows, double *pp_transfer_out,
            double *bubble_out)
{
    const shapes *s = &g->s;
    const stage_ops *ops = stage_list(e, s);
    int nrows = 0;
    double mbs_count = (double)g->microbatches, pp_predicted = 0.0, pp_transfers = 0.0;
    for (int i = 0; i < ops->nops; i++) {
        const op_t *op = &ops->ops[i];
        double times = op->pass == PASS_STEP ? 1.0 : mbs_count;
        if (op->kind == OP_COMM && op->group == GROUP_PP && op->pass != PASS_STEP) {
            pp_predicted += op->time_s * (double)op->count * times;
            pp_transfers += (double)op->count * times;
            continue;
        }
        if (op->kind == OP_MEMBOUND && op->bytes <= 0) continue;
        if (!s->first && !s->last && strstr(op->name, "embedding")) continue;   /* a middle stage */
        report_row *r = &rows[nrows++];
        r->op = op->name;
        r->pass = pass_name(op->pass);
        r->predicted_s = op->time_s * (double)op->count * times;
        r->measured_s = measured_of(ms->ops, ms->nops, op->name, op->pass, NULL, NULL);
    }
    /* what ran but the op list does not have */
    for (int k = 0; k < ms->nops; k++) {
        const char *name = ms->ops[k].name;
        if (!strcmp(name, "pp_sendrecv") || !strcmp(name, "pp_wait") || !strcmp(name, "dp_exposed") ||
            !strcmp(name, "dp_allgather_wait"))
            continue;
        int listed = 0;
        for (int i = 0; i < ops->nops && !listed; i++)
            listed = ops->ops[i].pass == ms->ops[k].pass && !strcmp(ops->ops[i].name, name);
        if (listed) continue;
        report_row *r = &rows[nrows++];
        r->op = name;
        r->pass = pass_name(ms->ops[k].pass);
        r->predicted_s = -1.0;
        r->measured_s = ms->ops[k].seconds;
    }
    double pp_transfer = pp_transfers * ms->p2p_fastest, bubble = ms->p2p_total - pp_transfer;
    if (ms->p2p_wait >= 0) {
        /* transfers beside the compute: only the compute's waits cost time, and the transfers' share
         * of them is the wait for a transfer that found its peer ready */
        bubble = ms->p2p_wait - pp_transfer;
    }
    if (bubble < 0) bubble = 0;
    if (s->pp > 1) {
        rows[nrows++] = (report_row){"pp_sendrecv", "all", pp_predicted, pp_transfer, 0, 0};
        rows[nrows++] = (report_row){"bubble", "all", e->bubble_s, bubble, 0, 0};
    }
    if (s->dp * s->cp > 1 || g->tied_sync) rows[nrows++] = (report_row){"dp_exposed", "step", e->dp_comm_s, ms->dp_exposed, 0, 0};
    rows[nrows++] = (report_row){"step", "all", e->step_s, ms->median, e->memory.total, ms->device_used};
    if (pp_transfer_out) *pp_transfer_out = pp_transfer;
    if (bubble_out) *bubble_out = bubble;
    return nrows;
}
