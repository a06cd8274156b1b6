/* The power model's step-level fit (docs/model.md, "Clock under the power
 * cap", "Fitting it to measured steps"): the clock exponent and the fused
 * attention's energy per FLOP chosen so that the planner's steps match steps
 * that `validate` measured, everything else as `calibrate`'s power model
 * measured it.  Those two are the terms calibrate's own samples pin down
 * worst: its capped samples give exponents from 1.5 to 12, and our fused
 * attention runs slower inside a step than alone, so its energy alone is not
 * its energy in a step. */
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>
#include <time.h>
#include <unistd.h>

#include "outfile.h"
#include "planner.h"

/* The fit's box: exponent in [0, 4], attention energy from a quarter to four
 * times calibrate's.  Grid steps: 0.125 and 2^(1/8); then a grid ten times finer
 * around the best. */
#define FIT_EXPONENT_MAX 4.0
#define FIT_EXPONENT_STEP 0.125
#define FIT_ENERGY_OCTAVES 2.0
#define FIT_ENERGY_STEPS_PER_OCTAVE 8
/* The clock time's regression needs a run within 3% of the top clock and clocks 10% apart. */
#define CLOCK_TIME_TOP_SPAN 0.03
#define CLOCK_TIME_MIN_SPREAD 0.10

static int field(const csv_table *t, int row, const char *column, char *out, size_t outlen, char *err, size_t errlen)
{
    return csv_get_string(t, row, column, 0, out, outlen, err, errlen);
}

/* validate's log of the run beside its CSV (A.csv -> A.log), open for reading; NULL when there is none. */
static FILE *run_log(const char *csv_path)
{
    char path[600];
    size_t n = strlen(csv_path);
    if (n < 4 || strcmp(csv_path + n - 4, ".csv") || n + 1 > sizeof path) return NULL;
    snprintf(path, sizeof path, "%.*s.log", (int)(n - 4), csv_path);
    return fopen(path, "r");
}

/* What a run's log says beside its CSV, read in one pass (0, 1 and "not said" where there is no log or line):
 *   clock_hz   NVML's mean SM clock, from "power: W W and M MHz SM clock ..." (Hz);
 *   ep         the expert parallelism, from the header "# mixture of experts: ..., expert parallelism E (...)" (for
 *              CSVs that predate their ep column, 2026-11-26);
 *   imbalance  the busiest EP rank's imbalance the planner took, from "MoE load imbalance: ... (--moe-imbalance X":
 *              X (a random route's own draw since 2026-11-28), 0 where not said;
 *   balanced   1 where the route dealt every expert the same rows ("MoE rows over rank 0's ... (route: balanced)"),
 *              which validate prices with even rows. */
typedef struct {
    double clock_hz;
    int64_t ep;
    double imbalance;
    int balanced;
} run_log_facts;

static run_log_facts read_run_log(const char *csv_path)
{
    run_log_facts facts = {0.0, 1, 0.0, 0};
    FILE *f = run_log(csv_path);
    if (!f) return facts;
    char line[1024];
    int have_clock = 0, have_ep = 0;
    while (fgets(line, sizeof line, f)) {
        double watts, mhz, x;
        long long ep;
        if (!have_clock && sscanf(line, "power: %lf W and %lf MHz SM clock", &watts, &mhz) == 2) {
            facts.clock_hz = mhz > 0.0 ? mhz * 1e6 : 0.0;
            have_clock = 1;
        }
        const char *at = strncmp(line, "# mixture of experts:", 21) ? NULL : strstr(line, "expert parallelism ");
        if (!have_ep && at && sscanf(at, "expert parallelism %lld", &ep) == 1) {
            facts.ep = ep >= 1 ? (int64_t)ep : 1;
            have_ep = 1;
        }
        at = strncmp(line, "MoE load imbalance:", 19) ? NULL : strstr(line, "(--moe-imbalance ");
        if (at && sscanf(at, "(--moe-imbalance %lf", &x) == 1 && x >= 1.0) facts.imbalance = x;
        if (!strncmp(line, "MoE rows over rank 0's", 22) && strstr(line, "(route: balanced)")) facts.balanced = 1;
    }
    fclose(f);
    return facts;
}

/* Row r of a validate CSV, when it is rank 0's forward op, added to the run's forward ops by name (the rows of
 * one name summed). */
static int add_forward_row(const csv_table *t, int r, const char *op, power_fit_run *run, char *err, size_t errlen)
{
    const char *pass = csv_table_cell(t, r, "pass"), *rank = csv_table_cell(t, r, "rank");
    if (!pass || strcmp(pass, "fwd") || (rank && rank[0] && strcmp(rank, "0"))) return 0;
    double measured;
    if (csv_get_double(t, r, "measured_s", 0.0, 1e6, &measured, err, errlen)) return -1;
    int i = 0;
    while (i < run->nforward && strcmp(run->forward_op[i], op)) i++;
    if (i == run->nforward) {
        if (run->nforward == POWER_FIT_OPS_MAX || strlen(op) >= sizeof run->forward_op[0]) return 0;
        snprintf(run->forward_op[i], sizeof run->forward_op[i], "%s", op);
        run->forward_measured_s[i] = 0.0;
        run->nforward++;
    }
    run->forward_measured_s[i] += measured;
    return 0;
}

int power_fit_read_run(const char *path, const model_zoo *zoo, const hw_gpu *gpu, const hw_node *node, power_fit_run *run,
                       char *err, size_t errlen)
{
    memset(run, 0, sizeof *run);
    snprintf(run->path, sizeof run->path, "%s", path);
    const run_log_facts logged = read_run_log(path);
    csv_table t;
    if (csv_table_read(path, &t, err, errlen) != 0) return -1;
    /* one calibrated step row per stage on more than one GPU: the step is the slowest's */
    int row = -1, rc = -1;
    double slowest = 0.0;
    for (int r = 0; r < t.nrows; r++) {
        const char *op = csv_table_cell(&t, r, "op"), *calibrated = csv_table_cell(&t, r, "calibrated");
        if (!op || !calibrated || strcmp(calibrated, "1")) continue;
        if (strcmp(op, "step")) {
            if (add_forward_row(&t, r, op, run, err, errlen) != 0) goto done;
            continue;
        }
        double measured, bytes = 0.0;
        if (csv_get_double(&t, r, "measured_s", 1e-9, 1e6, &measured, err, errlen)) goto done;
        const char *cell = csv_table_cell(&t, r, "measured_bytes");
        if (cell && *cell && csv_get_double(&t, r, "measured_bytes", 0.0, 1e15, &bytes, err, errlen)) goto done;
        if (bytes > run->measured_bytes) run->measured_bytes = bytes;
        if (row < 0 || measured > slowest) {
            row = r;
            slowest = measured;
        }
    }
    if (row < 0) {
        snprintf(err, errlen, "%s: no calibrated step row (op = step, calibrated = 1): not a validate --csv file?", path);
        goto done;
    }
    char name[128], gpu_name[128], recompute[32], attention[32];
    layout_t *l = &run->layout;
    int64_t zero, sp = 0;
    l->vpp = 1;
    l->zero_waits = ZERO_WAITS_STEP;   /* validate's step: the trainer's schedule (docs/model.md, "ZeRO-3 and FSDP") */
    if (field(&t, row, "model", name, sizeof name, err, errlen) || field(&t, row, "gpu", gpu_name, sizeof gpu_name, err, errlen) ||
        field(&t, row, "recompute", recompute, sizeof recompute, err, errlen) ||
        field(&t, row, "attention", attention, sizeof attention, err, errlen) ||
        csv_get_int64(&t, row, "gpus", 1, 1 << 24, &l->gpus, err, errlen) ||
        csv_get_int64(&t, row, "tp", 1, 1 << 20, &l->tp, err, errlen) || csv_get_int64(&t, row, "pp", 1, 1 << 20, &l->pp, err, errlen) ||
        csv_get_int64(&t, row, "dp", 1, 1 << 24, &l->dp, err, errlen) ||
        csv_get_int64(&t, row, "mbs", 1, 1 << 20, &l->mbs, err, errlen) ||
        csv_get_int64(&t, row, "gbs", 1, 1 << 30, &l->gbs, err, errlen) ||
        csv_get_int64(&t, row, "seq", 1, 1 << 24, &l->seq, err, errlen) || csv_get_int64(&t, row, "zero", 0, 3, &zero, err, errlen) ||
        csv_get_double(&t, row, "measured_s", 1e-9, 1e6, &run->measured_s, err, errlen))
        goto done;
    if (csv_table_column(&t, "vpp") >= 0 && csv_get_int64(&t, row, "vpp", 1, 1000, &l->vpp, err, errlen)) goto done;
    if (csv_table_column(&t, "sp") >= 0 && csv_get_int64(&t, row, "sp", 0, 1, &sp, err, errlen)) goto done;
    /* context parallelism (the validator's ring), in CSVs from 2026-11-26 on */
    l->cp = 1;
    if (csv_table_column(&t, "cp") >= 0 && csv_get_int64(&t, row, "cp", 1, 1 << 10, &l->cp, err, errlen)) goto done;
    /* the pipeline's split as the run was given it (0: pipeline_split's own), in CSVs from 2026-11-26 on */
    if (csv_table_column(&t, "first_stage_layers") >= 0 &&
        (csv_get_int64(&t, row, "first_stage_layers", 0, 1 << 20, &l->first_stage_layers, err, errlen) ||
         csv_get_int64(&t, row, "last_stage_layers", 0, 1 << 20, &l->last_stage_layers, err, errlen)))
        goto done;
    /* expert parallelism, inside DP: the CSV's column from 2026-11-26 on, else the log's header */
    if (csv_table_column(&t, "ep") >= 0) {
        if (csv_get_int64(&t, row, "ep", 1, 1 << 20, &l->ep, err, errlen)) goto done;
    } else
        l->ep = logged.ep;
    l->zero = (int)zero;
    l->sp = (int)sp;
    l->gpus_per_node = node->gpus_per_node;
    l->precision = gpu->peak_flops[PREC_BF16] > 0 ? PREC_BF16 : PREC_FP16;
    if (strcasecmp(gpu_name, gpu->name) != 0) {
        snprintf(err, errlen, "%s:%d:gpu: '%s', but the fit is for %s", path, t.line[row], gpu_name, gpu->name);
        goto done;
    }
    const model_t *m = model_zoo_find(zoo, name);
    if (!m) {
        snprintf(err, errlen, "%s:%d:model: '%s' is not in the model zoo", path, t.line[row], name);
        goto done;
    }
    run->model = *m;
    run->model.dropout = 0; /* sextant-gpu trains without dropout: the model as executed */
    if (m->experts > 1 && logged.imbalance > 0.0) run->model.moe_imbalance = logged.imbalance;
    if (m->experts > 1 && logged.balanced) l->expert_rows = EXPERT_ROWS_EVEN;
    if (recompute_parse(recompute, &l->recompute) != 0) {
        snprintf(err, errlen, "%s:%d:recompute: '%s' is not one of none|selective|full", path, t.line[row], recompute);
        goto done;
    }
    if (attention_parse(attention, &l->attention) != 0) {
        snprintf(err, errlen, "%s:%d:attention: '%s' is not one of flash|unfused|sextant", path, t.line[row], attention);
        goto done;
    }
    /* a validate run's fused attention is sextant-gpu's own kernel (runs before 2026-11-26 call it flash) */
    if (attention_is_fused(l->attention)) l->attention = ATTENTION_SEXTANT;
    if (l->tp * l->pp * l->dp * l->cp != l->gpus) {
        snprintf(err, errlen, "%s:%d:gpus: %lld is not tp x pp x dp x cp", path, t.line[row], (long long)l->gpus);
        goto done;
    }
    run->measured_clock_hz = logged.clock_hz;
    rc = 0;
done:
    csv_table_free(&t);
    return rc;
}

/* The planner's step for each run on `gpu` (and its clock, into clock_hz when not NULL); the sum of squared
 * relative errors. */
static int fit_cost(const hw_gpu *gpu, const hw_node *node, const power_fit_run *runs, int nruns, double *predicted,
                    double *clock_hz, double *bytes, double *cost, char *err, size_t errlen)
{
    static estimate_t e;
    job_t job = {1e9, gpu->cloud_usd_per_gpu_hour};
    double sum = 0.0;
    for (int i = 0; i < nruns; i++) {
        if (estimate_layout(&runs[i].model, gpu, node, &runs[i].layout, &job, &e, err, errlen) != 0) return -1;
        predicted[i] = e.step_s;
        if (clock_hz) clock_hz[i] = e.step_clock_hz;
        if (bytes) bytes[i] = e.memory.total;
        double relative = e.step_s / runs[i].measured_s - 1.0;
        sum += relative * relative;
    }
    *cost = sum;
    return 0;
}

/* A grid over (exponent, log energy), kept where the cost is least. */
static int fit_grid(hw_gpu *trial, const hw_node *node, const power_fit_run *runs, int nruns, double *scratch,
                    double exponent_lo, double exponent_hi, double exponent_step, double energy_lo, double energy_hi,
                    double energy_ratio, double *best_exponent, double *best_energy, double *best_cost, char *err,
                    size_t errlen)
{
    for (double g = exponent_lo; g <= exponent_hi + 1e-9; g += exponent_step) {
        for (double ea = energy_lo; ea <= energy_hi * (1.0 + 1e-9); ea *= energy_ratio) {
            trial->clock_energy_exponent = g < 0.0 ? 0.0 : g;
            trial->energy_attention_j_per_flop = ea;
            double cost;
            if (fit_cost(trial, node, runs, nruns, scratch, NULL, NULL, &cost, err, errlen) != 0) return -1;
            if (cost < *best_cost) {
                *best_cost = cost;
                *best_exponent = trial->clock_energy_exponent;
                *best_energy = ea;
            }
        }
    }
    return 0;
}

/* A one-GPU run's clock-bound forward GEMMs as the planner prices them at the top clock (calibrate's times) and as
 * the run measured them, seconds per step, over the ops its CSV names; 0 in both when it has none. */
static int forward_gemm_seconds(const hw_gpu *gpu, const hw_node *node, const power_fit_run *run, double *top_s,
                                double *measured_s, char *err, size_t errlen)
{
    static estimate_t e;
    job_t job = {1e9, gpu->cloud_usd_per_gpu_hour};
    *top_s = *measured_s = 0.0;
    if (estimate_layout(&run->model, gpu, node, &run->layout, &job, &e, err, errlen) != 0) return -1;
    const stage_ops *ops = &e.first_stage;
    for (int i = 0; i < ops->nops; i++) {
        const op_t *op = &ops->ops[i];
        if (op->kind != OP_GEMM || op->pass != PASS_FWD || op->clock_bound_s <= 0.0) continue;
        int j = 0;
        while (j < run->nforward && strcmp(run->forward_op[j], op->name)) j++;
        if (j == run->nforward) continue;
        /* the CSV's rows of a name once, however many of the list's ops carry it */
        int seen = 0;
        for (int k = 0; k < i && !seen; k++)
            seen = ops->ops[k].kind == OP_GEMM && ops->ops[k].pass == PASS_FWD && ops->ops[k].clock_bound_s > 0.0 &&
                   !strcmp(ops->ops[k].name, op->name);
        *top_s += op->clock_bound_s * (double)op->count * (double)e.microbatches;
        if (!seen) *measured_s += run->forward_measured_s[j];
    }
    return 0;
}

/* "GEMM time against the clock": ln(measured / top-clock time) of the one-GPU runs' clock-bound forward GEMMs
 * regressed on ln(top clock / NVML's clock), by ordinary least squares: the intercept is ln(factor), the slope
 * the exponent.  out->time_runs 0 (not fitted, out->time_why says why) with fewer than 3 such runs, none within
 * CLOCK_TIME_TOP_SPAN of the top clock or clocks less than CLOCK_TIME_MIN_SPREAD apart, or a line outside the
 * overlay's bounds. */
static int clock_time_regression(const hw_gpu *gpu, const hw_node *node, const power_fit_run *runs, int nruns,
                                 power_fit_result *out, char *err, size_t errlen)
{
    double u[POWER_FIT_RUNS_MAX], y[POWER_FIT_RUNS_MAX], u_min = 1.0, u_max = 0.0;
    int n = 0;
    out->time_runs = 0;
    out->time_why = "fewer than 3 one-GPU runs with NVML's clock in their log";
    for (int i = 0; i < nruns; i++) {
        if (runs[i].layout.gpus != 1 || runs[i].measured_clock_hz <= 0.0 || runs[i].nforward == 0) continue;
        double top, measured;
        if (forward_gemm_seconds(gpu, node, &runs[i], &top, &measured, err, errlen) != 0) return -1;
        if (!(top > 0.0 && measured > 0.0)) continue;
        u[n] = log(gpu->clock_max_hz / runs[i].measured_clock_hz);
        y[n] = log(measured / top);
        u_min = fmin(u_min, u[n]);
        u_max = fmax(u_max, u[n]);
        n++;
    }
    if (n < 3) return 0;
    /* the factor is the time at the top clock: a line through runs that all ran well below it extrapolates
     * to it (the H200's 32 steps, all capped at 1512-1901 MHz, read an exponent of -0.06) */
    if (u_min > -log(1.0 - CLOCK_TIME_TOP_SPAN) || u_max - u_min < log(1.0 + CLOCK_TIME_MIN_SPREAD)) {
        out->time_why = "no run within 3% of the top clock, or clocks spread less than 10%";
        return 0;
    }
    double mu = 0.0, my = 0.0, suu = 0.0, suy = 0.0;
    for (int i = 0; i < n; i++) { mu += u[i]; my += y[i]; }
    mu /= n;
    my /= n;
    for (int i = 0; i < n; i++) {
        suu += (u[i] - mu) * (u[i] - mu);
        suy += (u[i] - mu) * (y[i] - my);
    }
    double slope = suy / suu, intercept = my - slope * mu, ss = 0.0;
    /* hwdb.c's bounds: outside them the runs showed no clock law the overlay could hold */
    if (!(slope >= 0.01 && slope <= 2.0 && exp(intercept) >= 0.5 && exp(intercept) <= 2.0)) {
        out->time_why = "the regression fell outside the overlay's bounds (factor 0.5-2, exponent 0.01-2)";
        return 0;
    }
    for (int i = 0; i < n; i++) ss += (y[i] - intercept - slope * u[i]) * (y[i] - intercept - slope * u[i]);
    out->time_factor = exp(intercept);
    out->time_exponent = slope;
    out->time_residual_sd = sqrt(ss / (n > 2 ? n - 2 : 1));
    out->time_runs = n;
    return 0;
}

int power_fit_steps(const hw_gpu *gpu, const hw_node *node, const power_fit_run *runs, int nruns, power_fit_result *out,
                    char *err, size_t errlen)
{
    memset(out, 0, sizeof *out);
    if (nruns < 2 || nruns > POWER_FIT_RUNS_MAX) {
        snprintf(err, errlen, "--runs: %d runs; the fit needs 2 to %d", nruns, POWER_FIT_RUNS_MAX);
        return -1;
    }
    if (!(gpu->clock_max_hz > 0.0 && gpu->power_static_w > 0.0 && gpu->energy_attention_j_per_flop > 0.0)) {
        snprintf(err, errlen, "%s has no power model in the overlay (sextant calibrate without --warm writes one)", gpu->name);
        return -1;
    }
    hw_gpu trial = *gpu;
    double calibrated = gpu->energy_attention_j_per_flop;
    if (fit_cost(&trial, node, runs, nruns, out->before_s, out->before_clock_hz, out->before_bytes, &out->before_cost, err, errlen) != 0)
        return -1;
    if (clock_time_regression(gpu, node, runs, nruns, out, err, errlen) != 0) return -1;
    if (out->time_runs > 0) {
        trial.clock_time_factor = out->time_factor;
        trial.clock_time_exponent = out->time_exponent;
    } else {
        out->time_factor = gpu->clock_time_factor;
        out->time_exponent = gpu->clock_time_exponent;
    }
    /* the grid starts from the overlay's two terms under the regressed clock time, not from "before" */
    double best_exponent = gpu->clock_energy_exponent, best_energy = calibrated, best_cost = out->before_cost;
    if (out->time_runs > 0) {
        double scratch_start[POWER_FIT_RUNS_MAX];
        if (fit_cost(&trial, node, runs, nruns, scratch_start, NULL, NULL, &best_cost, err, errlen) != 0) return -1;
    }
    double ratio = pow(2.0, 1.0 / FIT_ENERGY_STEPS_PER_OCTAVE), spread = pow(2.0, FIT_ENERGY_OCTAVES);
    double scratch[POWER_FIT_RUNS_MAX];
    if (fit_grid(&trial, node, runs, nruns, scratch, 0.0, FIT_EXPONENT_MAX, FIT_EXPONENT_STEP, calibrated / spread,
                 calibrated * spread, ratio, &best_exponent, &best_energy, &best_cost, err, errlen) != 0)
        return -1;
    double fine_ratio = pow(ratio, 0.1);
    double coarse_exponent = best_exponent, coarse_energy = best_energy;
    if (fit_grid(&trial, node, runs, nruns, scratch, fmax(0.0, coarse_exponent - FIT_EXPONENT_STEP),
                 fmin(FIT_EXPONENT_MAX, coarse_exponent + FIT_EXPONENT_STEP), FIT_EXPONENT_STEP / 10.0,
                 coarse_energy / ratio, coarse_energy * ratio, fine_ratio, &best_exponent, &best_energy, &best_cost, err,
                 errlen) != 0)
        return -1;
    trial.clock_energy_exponent = best_exponent;
    trial.energy_attention_j_per_flop = best_energy;
    if (fit_cost(&trial, node, runs, nruns, out->after_s, out->after_clock_hz, NULL, &out->after_cost, err, errlen) != 0)
        return -1;
    out->exponent = best_exponent;
    out->energy_attention_j_per_flop = best_energy;
    return 0;
}

int power_fit_overlay_text(const char *overlay_path, const hw_gpu *gpu, const char *fitted_by, const power_fit_run *runs,
                           int nruns, const power_fit_result *fit, char **text, size_t *len, char *err, size_t errlen)
{
    time_t now = time(NULL);
    char date[32], source[400];
    strftime(date, sizeof date, "%Y-%m-%d", gmtime(&now));
    /* the runs by file name, as many as fit */
    int used = snprintf(source, sizeof source, "%s %s on %d validate runs:", fitted_by, date, nruns);
    for (int i = 0; i < nruns && used < (int)sizeof source - 48; i++) {
        const char *base = strrchr(runs[i].path, '/');
        used += snprintf(source + used, sizeof source - (size_t)used, " %.40s", base ? base + 1 : runs[i].path);
    }
    char row_exponent[512], row_energy[512], row_factor[640], row_time_exponent[640];
    snprintf(row_exponent, sizeof row_exponent, "%s,clock_energy_exponent,%.4f,\"%s\"\n", gpu->name, fit->exponent, source);
    snprintf(row_energy, sizeof row_energy, "%s,energy_attention_pj_per_flop,%.5f,\"%s\"\n", gpu->name,
             fit->energy_attention_j_per_flop * 1e12, source);
    snprintf(row_factor, sizeof row_factor, "%s,clock_time_factor,%.4f,\"%s (forward GEMMs of %d one-GPU runs against "
             "NVML's clock, residual sd %.3f)\"\n", gpu->name, fit->time_factor, source, fit->time_runs, fit->time_residual_sd);
    snprintf(row_time_exponent, sizeof row_time_exponent, "%s,clock_time_exponent,%.4f,\"%s (forward GEMMs of %d one-GPU "
             "runs against NVML's clock)\"\n", gpu->name, fit->time_exponent, source, fit->time_runs);
    static const char *const keys[4] = {"clock_energy_exponent,", "energy_attention_pj_per_flop,", "clock_time_factor,",
                                        "clock_time_exponent,"};
    const char *const rows[4] = {row_exponent, row_energy, row_factor, row_time_exponent};
    /* without a regression the overlay's clock time rows (if any) stay as they were */
    const int nkeys = fit->time_runs > 0 ? 4 : 2;
    return overlay_replace_rows(overlay_path, gpu->name, keys, rows, nkeys, nkeys, text, len, err, errlen);
}

int power_fit_leave_one_model_out(const hw_gpu *gpu, const hw_node *node, const power_fit_run *runs, int nruns,
                                  double *held_out_s, int *models, char *err, size_t errlen)
{
    *models = 0;
    static power_fit_run others[POWER_FIT_RUNS_MAX];
    static power_fit_result fold;
    int first_of[POWER_FIT_RUNS_MAX], nfirst = 0;
    for (int i = 0; i < nruns; i++) {
        int seen = 0;
        for (int j = 0; j < nfirst && !seen; j++) seen = !strcmp(runs[first_of[j]].model.name, runs[i].model.name);
        if (!seen) first_of[nfirst++] = i;
    }
    if (nfirst < 3) return 0;
    for (int k = 0; k < nfirst; k++) {
        const char *name = runs[first_of[k]].model.name;
        int n = 0;
        for (int i = 0; i < nruns; i++)
            if (strcmp(runs[i].model.name, name)) others[n++] = runs[i];
        if (power_fit_steps(gpu, node, others, n, &fold, err, errlen) != 0) return -1;
        hw_gpu fitted = *gpu;
        fitted.clock_energy_exponent = fold.exponent;
        fitted.energy_attention_j_per_flop = fold.energy_attention_j_per_flop;
        fitted.clock_time_factor = fold.time_factor;
        fitted.clock_time_exponent = fold.time_exponent;
        static estimate_t e;
        job_t job = {1e9, gpu->cloud_usd_per_gpu_hour};
        for (int i = 0; i < nruns; i++) {
            if (strcmp(runs[i].model.name, name)) continue;
            if (estimate_layout(&runs[i].model, &fitted, node, &runs[i].layout, &job, &e, err, errlen) != 0) return -1;
            held_out_s[i] = e.step_s;
        }
    }
    *models = nfirst;
    return 0;
}

/* Mean |error|, mean signed error and the worst error (by magnitude) of predicted against the runs' measured step
 * times, or (clock) their measured SM clocks, over the runs that have the measurement; how many runs that was. */
enum { SUMMARY_STEP, SUMMARY_CLOCK, SUMMARY_MEMORY };
static int error_summary(const power_fit_run *runs, int nruns, const double *predicted, int what, double *mean_abs,
                         double *mean_signed, double *worst)
{
    int n = 0;
    *mean_abs = *mean_signed = *worst = 0.0;
    for (int i = 0; i < nruns; i++) {
        double measured = what == SUMMARY_CLOCK ? runs[i].measured_clock_hz
                          : what == SUMMARY_MEMORY ? runs[i].measured_bytes : runs[i].measured_s;
        if (measured <= 0.0) continue;
        double e = predicted[i] / measured - 1.0;
        *mean_abs += fabs(e);
        *mean_signed += e;
        if (fabs(e) > fabs(*worst)) *worst = e;
        n++;
    }
    if (n > 0) { *mean_abs /= n; *mean_signed /= n; }
    return n;
}

void power_fit_report(FILE *out, const hw_gpu *gpu, const power_fit_run *runs, int nruns, const power_fit_result *fit,
                      const double *held_out_s, int models)
{
    int clocks = 0, memories = 0;
    for (int i = 0; i < nruns; i++) {
        clocks += runs[i].measured_clock_hz > 0.0;
        memories += runs[i].measured_bytes > 0.0;
    }
    fprintf(out, "%-44s %10s %10s %8s %10s %8s", "run", "measured", "before", "error", "after", "error");
    if (held_out_s) fprintf(out, " %10s %8s", "held out", "error");
    /* the SM clock NVML measured (MHz) and the one the power model settled the step at, before and after */
    if (clocks) fprintf(out, "  %6s %6s %6s", "MHz", "before", "after");
    /* the peak memory per GPU the run measured and the planner's (GiB), which the fit does not move */
    if (memories) fprintf(out, "  %7s %7s %7s", "GiB", "before", "error");
    fprintf(out, "\n");
    for (int i = 0; i < nruns; i++) {
        const char *base = strrchr(runs[i].path, '/');
        fprintf(out, "%-44.44s %8.2fms %8.2fms %+7.1f%% %8.2fms %+7.1f%%", base ? base + 1 : runs[i].path,
                runs[i].measured_s * 1e3, fit->before_s[i] * 1e3, 100.0 * (fit->before_s[i] / runs[i].measured_s - 1.0),
                fit->after_s[i] * 1e3, 100.0 * (fit->after_s[i] / runs[i].measured_s - 1.0));
        if (held_out_s)
            fprintf(out, " %8.2fms %+7.1f%%", held_out_s[i] * 1e3, 100.0 * (held_out_s[i] / runs[i].measured_s - 1.0));
        if (clocks && runs[i].measured_clock_hz > 0.0)
            fprintf(out, "  %6.0f %6.0f %6.0f", runs[i].measured_clock_hz / 1e6, fit->before_clock_hz[i] / 1e6,
                    fit->after_clock_hz[i] / 1e6);
        else if (clocks)
            fprintf(out, "  %6s %6s %6s", "-", "-", "-");
        if (memories && runs[i].measured_bytes > 0.0)
            fprintf(out, "  %7.3f %7.3f %+6.1f%%", runs[i].measured_bytes / 1073741824.0, fit->before_bytes[i] / 1073741824.0,
                    100.0 * (fit->before_bytes[i] / runs[i].measured_bytes - 1.0));
        fprintf(out, "\n");
    }
    if (fit->time_runs > 0)
        fprintf(out, "clock time (forward GEMMs of %d one-GPU runs against NVML's clock): factor %.3f -> %.3f, exponent "
                     "%.3f -> %.3f, residual sd %.3f\n", fit->time_runs, gpu_clock_time_factor(gpu),
                fit->time_factor, gpu_clock_time_exponent(gpu), fit->time_exponent,
                fit->time_residual_sd);
    else
        fprintf(out, "clock time: not fitted (%s); the overlay's kept (factor %.3f, exponent %.3f)\n", fit->time_why,
                gpu_clock_time_factor(gpu), gpu_clock_time_exponent(gpu));
    fprintf(out, "clock exponent %.3f -> %.3f, fused attention energy %.3f -> %.3f pJ/FLOP; rms step error %.2f%% -> %.2f%%\n",
            gpu->clock_energy_exponent, fit->exponent, gpu->energy_attention_j_per_flop * 1e12,
            fit->energy_attention_j_per_flop * 1e12, 100.0 * sqrt(fit->before_cost / nruns),
            100.0 * sqrt(fit->after_cost / nruns));
    double mean_abs, mean_signed, worst;
    error_summary(runs, nruns, fit->before_s, SUMMARY_STEP, &mean_abs, &mean_signed, &worst);
    fprintf(out, "before (the overlay as given): mean |error| %.1f%%, signed %+.1f%%, worst %+.1f%%\n", 100.0 * mean_abs,
            100.0 * mean_signed, 100.0 * worst);
    error_summary(runs, nruns, fit->after_s, SUMMARY_STEP, &mean_abs, &mean_signed, &worst);
    fprintf(out, "after (fitted on every run, in sample): mean |error| %.1f%%, signed %+.1f%%, worst %+.1f%%\n",
            100.0 * mean_abs, 100.0 * mean_signed, 100.0 * worst);
    if (held_out_s) {
        error_summary(runs, nruns, held_out_s, SUMMARY_STEP, &mean_abs, &mean_signed, &worst);
        fprintf(out, "held out (each of the %d models predicted by the fit on the others): mean |error| %.1f%%, signed "
                     "%+.1f%%, worst %+.1f%%\n", models, 100.0 * mean_abs, 100.0 * mean_signed, 100.0 * worst);
    } else {
        fprintf(out, "held out: not computed (leaving one model out needs runs of 3 models or more)\n");
    }
    if (clocks) {
        int n = error_summary(runs, nruns, fit->before_clock_hz, SUMMARY_CLOCK, &mean_abs, &mean_signed, &worst);
        fprintf(out, "SM clock, %d runs with NVML's in their log: before mean |error| %.1f%%, signed %+.1f%%, worst %+.1f%%;",
                n, 100.0 * mean_abs, 100.0 * mean_signed, 100.0 * worst);
        (void)error_summary(runs, nruns, fit->after_clock_hz, SUMMARY_CLOCK, &mean_abs, &mean_signed, &worst);
        fprintf(out, " after %.1f%%, %+.1f%%, %+.1f%%\n", 100.0 * mean_abs, 100.0 * mean_signed, 100.0 * worst);
    }
    if (memories) {
        int n = error_summary(runs, nruns, fit->before_bytes, SUMMARY_MEMORY, &mean_abs, &mean_signed, &worst);
        fprintf(out, "peak memory per GPU, %d runs: mean |error| %.1f%%, signed %+.1f%%, worst %+.1f%%\n", n,
                100.0 * mean_abs, 100.0 * mean_signed, 100.0 * worst);
    }
}

int power_fit_write_overlay(const char *overlay_path, const char *out_path, const hw_gpu *gpu, const char *fitted_by,
                            const power_fit_run *runs, int nruns, const power_fit_result *fit, char *err, size_t errlen)
{
    char *text;
    size_t len;
    if (power_fit_overlay_text(overlay_path, gpu, fitted_by, runs, nruns, fit, &text, &len, err, errlen) != 0) return -1;
    int rc = outfile_write(out_path, text, len, err, errlen);
    free(text);
    return rc;
}
