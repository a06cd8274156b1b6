/* sextant published: every row of a published-runs CSV estimated with its
 * published shape and layout and compared with its published figure, in the
 * source's own metric and FLOP convention (planner/published_row.c reads the
 * rows); per source group the mean absolute and signed errors, and the rows
 * that cannot be estimated with the reason.  With a plan, `plan` on the same
 * model, GPU type and count says whether the published layout is among
 * sextant's best. */
#include "planner.h"

#include <math.h>
#include <stdlib.h>
#include <string.h>

#define GROUPS_MAX 64
#define REASONS_MAX 16

typedef struct {
    char name[64];
    int rows, estimated;
    double sum_abs, sum_signed;
} group_stats;

typedef struct {
    char reason[48];
    int count;
} reason_count;

typedef struct {
    group_stats group[GROUPS_MAX];
    int ngroups;
    reason_count reason[REASONS_MAX];
    int nreasons;
    int rows, estimated;
    int unfit;                     /* estimated rows whose published layout sextant says does not fit */
    double sum_abs, sum_signed;
} published_totals;

static group_stats *group_of(published_totals *s, const char *name)
{
    for (int i = 0; i < s->ngroups; i++)
        if (!strcmp(s->group[i].name, name)) return &s->group[i];
    if (s->ngroups == GROUPS_MAX) return &s->group[GROUPS_MAX - 1];   /* the last one takes the rest */
    group_stats *g = &s->group[s->ngroups++];
    snprintf(g->name, sizeof g->name, "%s", name);
    return g;
}

static void count_reason(published_totals *s, const char *reason)
{
    for (int i = 0; i < s->nreasons; i++)
        if (!strcmp(s->reason[i].reason, reason)) { s->reason[i].count++; return; }
    if (s->nreasons == REASONS_MAX) return;
    snprintf(s->reason[s->nreasons].reason, sizeof s->reason[0].reason, "%s", reason);
    s->reason[s->nreasons++].count = 1;
}

/* A JSON string's body: the CSV's free text may hold quotes and backslashes. */
static void json_text(FILE *out, const char *text)
{
    for (const char *c = text; *c; c++) {
        if (*c == '"' || *c == '\\') fputc('\\', out);
        if ((unsigned char)*c >= 0x20) fputc(*c, out);
    }
}

/* A Markdown cell: '|' would end it. */
static void md_text(FILE *out, const char *text)
{
    for (const char *c = text; *c; c++) fputc(*c == '|' ? '/' : *c, out);
}

/* Where the published layout ranks among `plan`'s five best for the same model, GPU and count. */
static void plan_column(FILE *out, const published_row *row, const estimate_t *e, plan_request *req, plan_result *res)
{
    char why[512];
    memset(req, 0, sizeof *req);
    req->model = &row->model;
    req->gpu[0] = row->gpu;
    req->node[0] = row->node;
    req->ngpu_types = 1;
    req->gpu_counts[0] = row->layout.gpus;
    req->ncounts = 1;
    req->seq = row->layout.seq;
    req->gbs = row->layout.gbs;
    req->tokens = 1e12;
    req->objective = OBJECTIVE_TIME;
    req->top = 5;
    req->max_zero = 3;
    req->precision = row->layout.precision;
    /* the run's own kernels and practices, so that only the layout differs */
    req->attention = row->layout.attention;
    req->loss = row->layout.loss;
    req->logit_metrics = row->layout.logit_metrics;
    req->tp_overlap = row->layout.tp_overlap;
    req->grad_sync = row->layout.grad_sync;
    req->grad_accum = row->layout.grad_accum;
    req->expert_gemm = row->layout.expert_gemm;
    req->expert_rows = row->layout.expert_rows;
    req->zero_waits = row->layout.zero_waits;
    req->cp_comm = row->layout.cp_comm;
    req->fp32_grads = row->layout.fp32_grads;
    if (plan_search(req, res, 0, why, sizeof why) != 0 || res->ntop == 0) {
        fprintf(out, " no feasible plan | |");
        return;
    }
    const layout_t *l = &row->layout;
    int rank = 0;
    for (int i = 0; i < res->ntop && !rank; i++) {
        const layout_t *c = &res->top[i].layout;
        if (c->tp == l->tp && c->pp == l->pp && c->mbs == l->mbs && c->vpp == l->vpp && layout_cp(c) == layout_cp(l))
            rank = i + 1;
    }
    const plan_candidate *w = &res->top[0];
    if (rank) fprintf(out, " rank %d of the top 5 |", rank);
    else if (e->step_s >= w->step_s)
        fprintf(out, " not in the top 5 (%.1f%% slower than the winner) |", 100.0 * (e->step_s / w->step_s - 1.0));
    else  /* a depth or degree the search does not try (VPP, CP) */
        fprintf(out, " outside the search, %.1f%% faster than its winner |", 100.0 * (1.0 - e->step_s / w->step_s));
    fprintf(out, " TP %lld PP %lld DP %lld VPP %lld mbs %lld %s ZeRO %d%s, %.1f%% MFU |", (long long)w->layout.tp,
            (long long)w->layout.pp, (long long)w->layout.dp, (long long)w->layout.vpp, (long long)w->layout.mbs,
            recompute_name(w->layout.recompute), w->layout.zero, w->layout.sp ? " SP" : "", 100.0 * w->mfu);
}

static void layout_text(char *buf, size_t len, const layout_t *l)
{
    char vpp[32] = "", recompute[48];
    if (l->vpp > 1) snprintf(vpp, sizeof vpp, " VPP %lld", (long long)l->vpp);
    snprintf(recompute, sizeof recompute, "%s", recompute_name(l->recompute));
    if (l->recompute == RECOMPUTE_FULL && l->recompute_layers > 0)
        snprintf(recompute, sizeof recompute, "full on %lld layers per stage", (long long)l->recompute_layers);
    if (l->cp > 1) snprintf(vpp + strlen(vpp), sizeof vpp - strlen(vpp), " CP %lld %s", (long long)l->cp, cp_comm_name(l->cp_comm));
    if (layout_ep(l) > 1) snprintf(vpp + strlen(vpp), sizeof vpp - strlen(vpp), " EP %lld", (long long)layout_ep(l));
    snprintf(buf, len, "TP %lld PP %lld DP %lld%s mbs %lld gbs %lld, %s, ZeRO %d%s%s, %s, %s", (long long)l->tp,
             (long long)l->pp, (long long)l->dp, vpp, (long long)l->mbs, (long long)l->gbs,
             precision_name(l->precision), l->zero, l->sp ? ", SP" : "",
             l->tp > 1 && l->tp_overlap == TP_OVERLAP_BACKWARD ? ", TP overlap" : "", recompute, attention_name(l->attention));
}

static void print_row_table(FILE *out, const published_row *row, const estimate_t *e, int estimated, double predicted,
                            double error, int with_plan, plan_request *req, plan_result *res)
{
    char layout[256] = "";
    if (estimated) layout_text(layout, sizeof layout, &row->layout);
    fprintf(out, "| %s | %d | ", row->case_name, row->line);
    md_text(out, row->model.name);
    fprintf(out, " | %s %lld | %s | %s %.4g |", row->gpu ? row->gpu->name : "?", (long long)row->layout.gpus, layout,
            published_metric_name(row->metric), row->value);
    if (!estimated) {
        fprintf(out, " not estimated | | ");
        md_text(out, row->skip_class[0] ? row->skip_detail : "");
        fprintf(out, " |%s\n", with_plan ? " | |" : "");
        return;
    }
    fprintf(out, " %.4g%s | %+.1f%% | %s |", predicted, e->fits ? "" : " (does not fit)", 100.0 * error,
            published_convention(row));
    if (with_plan) plan_column(out, row, e, req, res);
    fputc('\n', out);
}

static void print_row_json(FILE *out, const published_row *row, const estimate_t *e, int estimated, double predicted,
                           double error, int first)
{
    fprintf(out, "%s    {\"case\": \"", first ? "" : ",\n");
    json_text(out, row->case_name);
    fprintf(out, "\", \"line\": %d, \"source_group\": \"", row->line);
    json_text(out, row->group);
    fprintf(out, "\", \"model\": \"");
    json_text(out, row->model.name);
    fprintf(out, "\", \"gpu\": \"%s\", \"metric\": \"%s\", \"published\": %.6g, \"estimated\": %s",
            row->gpu ? row->gpu->name : "", published_metric_name(row->metric), row->value, estimated ? "true" : "false");
    if (estimated) {
        const layout_t *l = &row->layout;
        fprintf(out, ", \"family\": \"%s\"", parallelism_family_name(parallelism_family(l)));
        fprintf(out, ", \"predicted\": %.9g, \"signed_err\": %.9g, \"convention\": \"%s\", \"fits\": %s, \"step_s\": %.6g, "
                "\"compute_s\": %.6g, \"tp_comm_s\": %.6g, \"pp_comm_s\": %.6g, \"dp_comm_s\": %.6g, \"bubble_s\": %.6g, "
                "\"optimizer_s\": %.6g, \"memory_gib\": %.4g, \"sm_clock_mhz\": %.6g, "
                "\"layout\": {\"gpus\": %lld, \"tp\": %lld, \"cp\": %lld, \"pp\": %lld, \"dp\": %lld, \"vpp\": %lld, \"mbs\": %lld, "
                "\"gbs\": %lld, \"seq\": %lld, \"zero\": %d, \"sp\": %d, \"recompute\": \"%s\", \"recompute_layers\": %lld, \"loss\": \"%s\", \"logit_metrics\": %lld, \"attention\": \"%s\", "
                "\"tp_overlap\": \"%s\", \"precision\": \"%s\"}",
                predicted, error, published_convention(row), e->fits ? "true" : "false", e->step_s, e->compute_s, e->tp_comm_s,
                e->pp_comm_s, e->dp_comm_s, e->bubble_s, e->optimizer_s, e->memory.total / 1073741824.0,
                e->step_clock_hz / 1e6, (long long)l->gpus,
                (long long)l->tp, (long long)l->cp, (long long)l->pp, (long long)l->dp, (long long)l->vpp, (long long)l->mbs,
                (long long)l->gbs, (long long)l->seq, l->zero, l->sp, recompute_name(l->recompute),
                (long long)l->recompute_layers, loss_kernel_name(l->loss), (long long)l->logit_metrics, attention_name(l->attention), tp_overlap_name(l->tp_overlap),
                precision_name(l->precision));
    } else {
        fprintf(out, ", \"reason\": \"");
        json_text(out, row->skip_class);
        fprintf(out, "\", \"detail\": \"");
        json_text(out, row->skip_detail);
        fputc('"', out);
    }
    fputc('}', out);
}

/* One line per GPU among the estimated rows whose figures an overlay changed ("calibration: ..."). */
static void print_calibrations(FILE *out, const hw_gpu *const *used, int nused)
{
    char line[1024];
    for (int i = 0; i < nused; i++)
        if (calibration_line(used[i], line, sizeof line)) fprintf(out, "%s: %s\n", used[i]->name, line);
}

static void print_totals_table(FILE *out, const published_totals *s)
{
    fprintf(out, "\n| source group | rows | estimated | mean abs error | mean signed error |\n|---|---|---|---|---|\n");
    for (int i = 0; i < s->ngroups; i++) {
        const group_stats *g = &s->group[i];
        fprintf(out, "| ");
        md_text(out, g->name);
        if (g->estimated)
            fprintf(out, " | %d | %d | %.1f%% | %+.1f%% |\n", g->rows, g->estimated, 100.0 * g->sum_abs / g->estimated,
                    100.0 * g->sum_signed / g->estimated);
        else
            fprintf(out, " | %d | 0 | | |\n", g->rows);
    }
    if (s->nreasons) {
        fprintf(out, "\n| not estimable | rows |\n|---|---|\n");
        for (int i = 0; i < s->nreasons; i++) fprintf(out, "| %s | %d |\n", s->reason[i].reason, s->reason[i].count);
    }
    fprintf(out, "\n%d of %d rows estimated", s->estimated, s->rows);
    if (s->estimated)
        fprintf(out, ": mean absolute error %.1f%%, mean signed error %+.1f%% (positive: sextant too optimistic)",
                100.0 * s->sum_abs / s->estimated, 100.0 * s->sum_signed / s->estimated);
    fprintf(out, ".\n");
    /* every published run ran: a layout said not to fit is the memory model's error */
    if (s->estimated)
        fprintf(out, "Memory: %d of the %d estimated rows' published layouts do not fit by sextant's memory model "
                     "(each ran, so each is an error of that model).\n", s->unfit, s->estimated);
}

static void print_totals_json(FILE *out, const published_totals *s)
{
    double n = s->estimated ? (double)s->estimated : 1.0;
    fprintf(out, "\n  ],\n  \"rows_total\": %d,\n  \"rows_estimated\": %d,\n  \"mean_abs_err\": %.9g,\n"
            "  \"mean_signed_err\": %.9g,\n  \"rows_not_fitting\": %d,\n  \"not_estimable\": {", s->rows, s->estimated, s->sum_abs / n,
            s->sum_signed / n, s->unfit);
    for (int i = 0; i < s->nreasons; i++)
        fprintf(out, "%s\"%s\": %d", i ? ", " : "", s->reason[i].reason, s->reason[i].count);
    fprintf(out, "},\n  \"groups\": [");
    for (int i = 0; i < s->ngroups; i++) {
        const group_stats *g = &s->group[i];
        double k = g->estimated ? (double)g->estimated : 1.0;
        fprintf(out, "%s\n    {\"source_group\": \"", i ? "," : "");
        json_text(out, g->name);
        fprintf(out, "\", \"rows\": %d, \"rows_estimated\": %d, \"mean_abs_err\": %.6f, \"mean_signed_err\": %.6f}",
                g->rows, g->estimated, g->sum_abs / k, g->sum_signed / k);
    }
    fprintf(out, "\n  ]\n}\n");
}

/* Estimates a row marked estimable: 1 with its prediction and signed error, or 0 with the row marked
 * "layout refused by the estimate". */
static int estimate_row(published_row *row, estimate_t *e, double *predicted, double *error)
{
    if (row->skip_class[0]) return 0;
    char why[512];
    job_t job = {1e12, row->gpu->cloud_usd_per_gpu_hour};
    if (estimate_layout(&row->model, row->gpu, row->node, &row->layout, &job, e, why, sizeof why) != 0) {
        snprintf(row->skip_class, sizeof row->skip_class, "layout refused by the estimate");
        snprintf(row->skip_detail, sizeof row->skip_detail, "%.190s", why);
        return 0;
    }
    *predicted = published_predicted(row, e);
    *error = published_signed_error(row, *predicted);
    return 1;
}

/* An estimated row as the summaries need it. */
typedef struct {
    int group;                     /* index into published_totals.group */
    parallelism_family_t family;
    double err;                    /* signed, as throughput */
} estimated_row;

/* The bands of the rows of every group but skip_group, family by family, widened to all families' spread. */
static void bands_of(const estimated_row *rows, int n, int skip_group, uncertainty_bands *b, double *scratch, double trim)
{
    for (int f = 0; f < FAMILY_COUNT; f++) {
        int k = 0;
        for (int i = 0; i < n; i++)
            if (rows[i].family == (parallelism_family_t)f && rows[i].group != skip_group) scratch[k++] = rows[i].err;
        uncertainty_from_errors(b, (parallelism_family_t)f, scratch, k);
    }
    int k = 0;
    for (int i = 0; i < n; i++)
        if (rows[i].group != skip_group) scratch[k++] = rows[i].err;
    uncertainty_widen_to_pooled(b, scratch, k, trim);
}

/* Of each source group's rows, how many lie inside the bands made without that group (leave one source out),
 * into inside[g] and count[g]; the total inside over all rows returned as a fraction. */
static double loso_coverage(const estimated_row *rows, int n, int ngroups, double trim, int *inside, int *count,
                            double *scratch)
{
    int inside_all = 0, rows_all = 0;
    uncertainty_bands b;
    for (int g = 0; g < ngroups; g++) {
        inside[g] = count[g] = 0;
        bands_of(rows, n, g, &b, scratch, trim);
        for (int i = 0; i < n; i++) {
            if (rows[i].group != g) continue;
            count[g]++;
            parallelism_family_t f = rows[i].family;
            inside[g] += b.rows[f] > 0 && rows[i].err >= b.err_low[f] && rows[i].err <= b.err_high[f];
        }
        inside_all += inside[g];
        rows_all += count[g];
    }
    return rows_all ? (double)inside_all / rows_all : 0.0;
}

/* The pooled trim: the largest of 5%, 4.5%, ... 0.5% (the narrowest band) whose leave-one-source-out coverage
 * reaches 80%, the target for sources never seen; 0.5% when none does (docs/model.md, "Uncertainty
 * bands").  A rule, not a number fitted once: it is taken again whenever the errors move. */
#define BAND_COVERAGE_TARGET 0.80
static double pooled_trim_by_loso(const estimated_row *rows, int n, int ngroups, double *scratch)
{
    int inside[GROUPS_MAX], count[GROUPS_MAX];
    for (int step = 10; step > 1; step--)
        if (loso_coverage(rows, n, ngroups, 0.005 * step, inside, count, scratch) >= BAND_COVERAGE_TARGET)
            return 0.005 * step;
    return 0.005;
}

/* Per family: rows, mean |error|, mean signed error and the band; then the bands' coverage of each source
 * group when that group is left out of them (leave-one-source-out: what a source never seen can expect). */
static void print_families(FILE *out, const published_totals *s, const estimated_row *rows, int n, double *scratch)
{
    uncertainty_bands b;
    double trim = pooled_trim_by_loso(rows, n, s->ngroups, scratch);
    bands_of(rows, n, -1, &b, scratch, trim);
    fprintf(out, "\n| parallelism family | rows | mean abs error | mean signed error | band (10th to 90th percentile, widened to all families' %.1fth to %.1fth) |\n"
                 "|---|---|---|---|---|\n", 100.0 * trim, 100.0 * (1.0 - trim));
    for (int f = 0; f < FAMILY_COUNT; f++) {
        int k = 0;
        double sum_abs = 0.0, sum = 0.0;
        for (int i = 0; i < n; i++)
            if (rows[i].family == (parallelism_family_t)f) {
                k++;
                sum_abs += fabs(rows[i].err);
                sum += rows[i].err;
            }
        if (!k) { fprintf(out, "| %s | 0 | | | |\n", parallelism_family_name((parallelism_family_t)f)); continue; }
        fprintf(out, "| %s | %d | %.1f%% | %+.1f%% | %+.1f%% to %+.1f%% |\n", parallelism_family_name((parallelism_family_t)f),
                k, 100.0 * sum_abs / k, 100.0 * sum / k, 100.0 * b.err_low[f], 100.0 * b.err_high[f]);
    }
    fprintf(out, "\nLeave one source out: each group's rows against bands made from the other groups' rows (the trim, "
                 "%.1f%%, the largest whose coverage over all groups reaches %.0f%%).\n\n"
                 "| source group left out | rows | inside its band |\n|---|---|---|\n", 100.0 * trim,
            100.0 * BAND_COVERAGE_TARGET);
    int inside[GROUPS_MAX], count[GROUPS_MAX], inside_all = 0, rows_all = 0;
    loso_coverage(rows, n, s->ngroups, trim, inside, count, scratch);
    for (int g = 0; g < s->ngroups; g++) {
        if (!count[g]) continue;
        inside_all += inside[g];
        rows_all += count[g];
        fprintf(out, "| ");
        md_text(out, s->group[g].name);
        fprintf(out, " | %d | %d (%.0f%%) |\n", count[g], inside[g], 100.0 * inside[g] / count[g]);
    }
    if (rows_all) fprintf(out, "| all | %d | %d (%.0f%%) |\n", rows_all, inside_all, 100.0 * inside_all / rows_all);
}

int explain_published(FILE *out, const hwdb *db, const model_zoo *zoo, const char *runs_path, const char *case_name,
                      char *err, size_t errlen)
{
    csv_table t;
    if (csv_table_read(runs_path, &t, err, errlen) != 0) return -1;
    estimate_t *e = malloc(sizeof *e);
    published_row *row = malloc(sizeof *row);
    int status = !e || !row ? -1 : 1, printed = 0;
    if (status < 0) snprintf(err, errlen, "out of memory");
    /* a case's rows share one layout, each in its own metric: the layout once, every metric's figure */
    for (int r = 0; r < t.nrows && status > 0; r++) {
        const char *name = csv_table_cell(&t, r, "case");
        if (!name || strcmp(name, case_name)) continue;
        if (published_row_read(&t, r, db, zoo, row, err, errlen) != 0) { status = -1; break; }
        double predicted = 0.0, error = 0.0;
        int estimated = estimate_row(row, e, &predicted, &error);
        if (!printed) {
            fprintf(out, "Published run %s (%s, line %d)\nSource: %s\n", row->case_name, runs_path, row->line, row->source);
            if (row->gpu && row->node)
                fprintf(out, "GPU %s, node %s: %lld GPUs per node, %lld NICs of %.0f Gb/s%s\n", row->gpu->name, row->node->name,
                        (long long)row->node->gpus_per_node, (long long)row->node->nics_per_node,
                        row->node->nic_bits_per_s / 1e9, row->node == &row->own_node ? " (the network the row names)" : "");
            if (estimated) {
                char layout[256];
                layout_text(layout, sizeof layout, &row->layout);
                fprintf(out, "Read as: %s; %s loss, %lld metrics on the logits, TP overlap %s, gradients synced %s, "
                             "accumulated %s, dropout %s%s%s (docs/model.md, \"Published runs\")\n",
                        layout, loss_kernel_name(row->layout.loss), (long long)row->layout.logit_metrics,
                        tp_overlap_name(row->layout.tp_overlap),
                        grad_sync_name(row->layout.grad_sync), grad_accum_name(row->layout.grad_accum),
                        row->model.dropout ? "on" : "off", model_is_moe(&row->model) ? ", expert GEMMs " : "",
                        model_is_moe(&row->model) ? expert_gemm_name(row->layout.expert_gemm) : "");
            }
        }
        if (!estimated) {
            fprintf(out, "%s %.4g: not estimated (%s: %s)\n", published_metric_name(row->metric), row->value,
                    row->skip_class, row->skip_detail);
            printed = 1;
            continue;
        }
        fprintf(out, "%s: published %.4g, predicted %.4g, %+.1f%% (%s; positive: sextant too optimistic)\n",
                published_metric_name(row->metric), row->value, predicted, 100.0 * error, published_convention(row));
        printed = 2;
    }
    if (status > 0 && !printed) {
        snprintf(err, errlen, "--explain: no case '%s' in %s", case_name, runs_path);
        status = -1;
    }
    if (status > 0 && printed == 2) {
        fputc('\n', out);
        report_explain(out, e);
    }
    free(e);
    free(row);
    csv_table_free(&t);
    return status < 0 ? -1 : 0;
}

int report_published(FILE *out, const hwdb *db, const model_zoo *zoo, const char *runs_path, format_t format,
                     int with_plan, char *err, size_t errlen)
{
    csv_table t;
    if (csv_table_read(runs_path, &t, err, errlen) != 0) return -1;
    estimate_t *e = malloc(sizeof *e);
    plan_request *req = calloc(1, sizeof *req);
    plan_result *res = calloc(1, sizeof *res);
    published_totals *s = calloc(1, sizeof *s);
    published_row *row = malloc(sizeof *row);
    estimated_row *done = malloc(sizeof *done * (size_t)(t.nrows + 1));
    double *scratch = malloc(sizeof *scratch * (size_t)(t.nrows + 1));
    int ndone = 0, nused = 0;
    enum { USED_MAX = 64 };
    const hw_gpu *used[USED_MAX];   /* the GPUs of the estimated rows, once each (the first 64) */
    int status = 0;
    if (!e || !req || !res || !s || !row || !done || !scratch) {
        snprintf(err, errlen, "out of memory");
        status = -1;
    }
    int json = format == FORMAT_JSON;
    if (!status && json) {
        fprintf(out, "{\n  \"runs\": \"");
        json_text(out, runs_path);
        fprintf(out, "\",\n  \"rows\": [\n");
    } else if (!status) {
        fprintf(out, "| case | line | model | GPUs | layout as estimated | published | predicted | error | convention |%s\n",
                with_plan ? " plan: published layout | plan: sextant's best |" : "");
        fprintf(out, "|---|---|---|---|---|---|---|---|---|%s\n", with_plan ? "---|---|" : "");
    }
    for (int r = 0; r < t.nrows && !status; r++) {
        if ((status = published_row_read(&t, r, db, zoo, row, err, errlen))) break;
        double predicted = 0.0, error = 0.0;
        int estimated = estimate_row(row, e, &predicted, &error);
        group_stats *g = group_of(s, row->group);
        g->rows++;
        s->rows++;
        if (estimated) done[ndone++] = (estimated_row){(int)(g - s->group), parallelism_family(&row->layout), error};
        if (estimated) {
            int seen = 0;
            for (int i = 0; i < nused && !seen; i++) seen = used[i] == row->gpu;
            if (!seen && nused < USED_MAX) used[nused++] = row->gpu;
            g->estimated++;
            g->sum_abs += fabs(error);
            g->sum_signed += error;
            s->estimated++;
            s->sum_abs += fabs(error);
            s->sum_signed += error;
            s->unfit += !e->fits;
        } else {
            count_reason(s, row->skip_class);
        }
        if (json) print_row_json(out, row, e, estimated, predicted, error, r == 0);
        else print_row_table(out, row, e, estimated, predicted, error, with_plan, req, res);
    }
    if (!status) {
        if (json) print_totals_json(out, s);
        else {
            print_totals_table(out, s);
            print_calibrations(out, used, nused);
            print_families(out, s, done, ndone, scratch);
        }
    }
    free(done);
    free(scratch);
    free(e);
    free(req);
    free(res);
    free(s);
    free(row);
    csv_table_free(&t);
    return status;
}

int published_bands(const hwdb *db, const model_zoo *zoo, const char *runs_path, uncertainty_bands *bands, char *err,
                    size_t errlen)
{
    csv_table t;
    if (csv_table_read(runs_path, &t, err, errlen) != 0) return -1;
    estimate_t *e = malloc(sizeof *e);
    published_row *row = malloc(sizeof *row);
    published_totals *s = calloc(1, sizeof *s);
    estimated_row *done = malloc(sizeof *done * (size_t)(t.nrows + 1));
    double *scratch = malloc(sizeof *scratch * (size_t)(t.nrows + 1));
    int ndone = 0, status = 0;
    if (!e || !row || !s || !done || !scratch) {
        snprintf(err, errlen, "out of memory");
        status = -1;
    }
    for (int r = 0; r < t.nrows && !status; r++) {
        if ((status = published_row_read(&t, r, db, zoo, row, err, errlen))) break;
        double predicted, error;
        group_stats *g = group_of(s, row->group);
        if (estimate_row(row, e, &predicted, &error))
            done[ndone++] = (estimated_row){(int)(g - s->group), parallelism_family(&row->layout), error};
    }
    memset(bands, 0, sizeof *bands);
    /* the same bands and trim as the report prints (print_families) */
    if (!status) bands_of(done, ndone, -1, bands, scratch, pooled_trim_by_loso(done, ndone, s->ngroups, scratch));
    free(scratch);
    free(done);
    free(s);
    free(e);
    free(row);
    csv_table_free(&t);
    return status;
}
