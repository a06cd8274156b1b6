/* The GEMM time model's fit (docs/model.md, "GEMM time over M, N, K"):
 * its three global parameters (the tiles' MMA rate, a tile's fixed time, a
 * GEMM's fixed time) fitted to calibrate's gemm_us rows by least squares on
 * the relative error, and judged by leave-one-model-out: fitted on every
 * model's shapes but one, it predicts the one left out, beside the two paths
 * the planner had before it (calibrate's efficiency curve, and the measured
 * table with its lines over the tokens, falling back to the curve). */
#include <ctype.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>
#include <time.h>

#include "outfile.h"
#include "planner.h"

/* The group a gemm_us row came from and its linear layer: the model and the linear calibrate named inside the
 * source's last parenthesis ("... (gpt2 qkv, as the training step runs it)"). */
static void row_group(const char *source, char *group, size_t len, char *linear, size_t linear_len)
{
    const char *open = strrchr(source, '(');
    size_t n = 0, l = 0;
    const char *p = open ? open + 1 : "";
    for (; *p && !isspace((unsigned char)*p) && *p != ',' && *p != ')'; p++)
        if (n + 1 < len) group[n++] = *p;
    group[n] = '\0';
    if (*p == ' ')
        for (p++; *p && !isspace((unsigned char)*p) && *p != ',' && *p != ')'; p++)
            if (l + 1 < linear_len) linear[l++] = *p;
    linear[l] = '\0';
    if (!n) snprintf(group, len, "?");
}

/* "..., 132 SMs, ..." in calibrate's source: the SM count CUDA reported; 0 when absent. */
static double source_sms(const char *source)
{
    const char *at = strstr(source, " SMs");
    if (!at) return 0.0;
    const char *p = at;
    while (p > source && isdigit((unsigned char)p[-1])) p--;
    return p < at ? atof(p) : 0.0;
}

int gemm_fit_read(const char *path, const char *gpu_name, gemm_fit_data *d, char *err, size_t errlen)
{
    memset(d, 0, sizeof *d);
    csv_table t;
    if (csv_table_read(path, &t, err, errlen) != 0) return -1;
    int rc = -1;
    for (int r = 0; r < t.nrows; r++) {
        const char *gpu = csv_table_cell(&t, r, "gpu"), *key = csv_table_cell(&t, r, "key");
        const char *value = csv_table_cell(&t, r, "value"), *source = csv_table_cell(&t, r, "source");
        if (!gpu || !key || !value || !source) {
            snprintf(err, errlen, "%s:%d: not an overlay row (gpu,key,value,source)", path, t.line[r]);
            goto done;
        }
        if (strcasecmp(gpu, gpu_name) || strncmp(key, "gemm_us:", 8)) continue;
        if (d->n == GEMM_FIT_ROWS_MAX) { snprintf(err, errlen, "%s: more than %d gemm_us rows", path, GEMM_FIT_ROWS_MAX); goto done; }
        gemm_fit_row *row = &d->row[d->n];
        long long m, n, k;
        char tail;
        double us;
        if (sscanf(key + 8, "%lldx%lldx%lld%c", &m, &n, &k, &tail) != 3 || m < 1 || n < 1 || k < 1) {
            snprintf(err, errlen, "%s:%d:key: '%s' is not gemm_us:MxNxK", path, t.line[r], key);
            goto done;
        }
        if (csv_get_double(&t, r, "value", 1e-3, 1e9, &us, err, errlen)) goto done;
        *row = (gemm_fit_row){(double)m, (double)n, (double)k, us * 1e-6, 0, GEMM_KIND_UNKNOWN, {0}, {0}};
        row_group(source, row->group, sizeof row->group, row->linear, sizeof row->linear);
        double sms = source_sms(source);
        if (sms > 0.0) d->sms = sms;
        d->n++;
    }
    if (d->n < 4) {
        snprintf(err, errlen, "%s: %d gemm_us rows for %s, at least 4 needed (sextant calibrate writes them)", path, d->n, gpu_name);
        goto done;
    }
    if (d->sms <= 0.0) {
        snprintf(err, errlen, "%s: no 'N SMs' in the gemm_us rows' source: the SM count calibrate reported is needed", path);
        goto done;
    }
    for (int i = 0; i < d->n; i++) {
        int known = 0;
        for (int g = 0; g < d->ngroups && !known; g++) known = !strcmp(d->group[g], d->row[i].group);
        if (!known && d->ngroups < GEMM_FIT_GROUPS_MAX) snprintf(d->group[d->ngroups++], sizeof d->group[0], "%s", d->row[i].group);
    }
    rc = 0;
done:
    csv_table_free(&t);
    return rc;
}

/* Which GEMM of `model`'s linear layer `linear` a shape m x n x k is, as calibrate timed it (forward T x out x in,
 * dgrad T x in x out, wgrad in x out x T, in that order, so a shape two of them share is the first), and whether
 * it is the weight gradient of a biased linear (every one but the LM head's in a model with biases). */
static gemm_kind_t shape_kind(const model_t *model, const char *linear, double m, double n, double k, int *bias_gradient)
{
    *bias_gradient = 0;
    static stage_ops ops;
    if (build_calibration_ops(model, &ops) != 0) return GEMM_KIND_UNKNOWN;
    for (int i = 0; i < ops.nops; i++) {
        const op_t *op = &ops.ops[i];
        if (op->kind != OP_GEMM || op->pass != PASS_FWD || op->batch > 1 || strcmp(op->name, linear)) continue;
        double in = (double)op->k, out = (double)op->n;
        if (n == out && k == in) return GEMM_KIND_FORWARD;
        if (n == in && k == out) return GEMM_KIND_DGRAD;
        if (m == in && n == out) {
            *bias_gradient = linear_has_bias(model, op->name);
            return GEMM_KIND_WGRAD;
        }
    }
    return GEMM_KIND_UNKNOWN;
}

int gemm_fit_mark_bias(gemm_fit_data *d, const model_zoo *zoo)
{
    int marked = 0;
    for (int i = 0; i < d->n; i++) {
        gemm_fit_row *r = &d->row[i];
        const model_t *model = model_zoo_find(zoo, r->group);
        r->kind = model ? shape_kind(model, r->linear, r->m, r->n, r->k, &r->bias_gradient) : GEMM_KIND_UNKNOWN;
        if (!model) r->bias_gradient = 0;
        marked += r->bias_gradient;
    }
    return marked;
}

/* Solves the 3 x 3 system a x = b by Gaussian elimination with pivoting; -1 when singular. */
static int solve3(double a[3][3], double b[3], double x[3])
{
    for (int c = 0; c < 3; c++) {
        int p = c;
        for (int r = c + 1; r < 3; r++)
            if (fabs(a[r][c]) > fabs(a[p][c])) p = r;
        if (fabs(a[p][c]) < 1e-300) return -1;
        for (int j = 0; j < 3; j++) { double s = a[c][j]; a[c][j] = a[p][j]; a[p][j] = s; }
        double s = b[c]; b[c] = b[p]; b[p] = s;
        for (int r = 0; r < 3; r++) {
            if (r == c) continue;
            double f = a[r][c] / a[c][c];
            for (int j = 0; j < 3; j++) a[r][j] -= f * a[c][j];
            b[r] -= f * b[c];
        }
    }
    for (int c = 0; c < 3; c++) x[c] = b[c] / a[c][c];
    return 0;
}

/* Is row i in the training set when `held_out` is left out (NULL: all rows)? */
static int trains(const gemm_fit_data *d, int i, const char *held_out)
{
    return !held_out || strcmp(d->row[i].group, held_out);
}

/* What calibrate's row i holds beyond the tile model: a weight gradient adds into its gradient, as the training step
 * runs it (linear.c: beta = 1) (docs/model.md, "GEMM time over M, N, K") */
static double row_accumulate_s(const gemm_fit_data *d, int i, const gemm_fit_params *p)
{
    const gemm_fit_row *r = &d->row[i];
    return r->kind == GEMM_KIND_WGRAD ? r->m * r->n * p->accumulate_s_per_element : 0.0;
}

/* The model's time for row i with parameters p (the fused bias gradient's factor on the rows that have one). */
static double row_tiles_s(const gemm_fit_data *d, int i, const gemm_fit_params *p, double membw)
{
    const gemm_fit_row *r = &d->row[i];
    double bytes = 2.0 * (r->m * r->k + r->k * r->n + r->m * r->n);
    double t = gemm_tile_wave_s(1.0, r->m, r->n, r->k, d->sms, p->tile_flop_per_s, p->tile_s, p->fixed_s, bytes, membw);
    t += row_accumulate_s(d, i, p);
    return r->bias_gradient && p->bias_grad_factor > 0.0 ? t * p->bias_grad_factor : t;
}

int gemm_fit_tiles(const gemm_fit_data *d, const char *held_out, gemm_fit_params *p)
{
    /* first the plain GEMMs: time = fixed + waves tile + waves 2 TM TN k_cta sms / rate is linear in (fixed,
     * tile, 1/rate): least squares on the relative error, each row weighted by 1 / measured^2 */
    double a[3][3] = {{0}}, b[3] = {0}, x[3];
    int used = 0;
    for (int i = 0; i < d->n; i++) {
        if (!trains(d, i, held_out) || d->row[i].bias_gradient) continue;
        const gemm_fit_row *r = &d->row[i];
        double waves, k_cta;
        gemm_waves(1.0, r->m, r->n, r->k, d->sms, &waves, &k_cta);
        double f[3] = {1.0, waves, waves * 2.0 * GEMM_TILE_M * GEMM_TILE_N * k_cta * d->sms};
        double w = 1.0 / (r->seconds * r->seconds), tiles = r->seconds - row_accumulate_s(d, i, p);
        for (int u = 0; u < 3; u++) {
            b[u] += w * f[u] * tiles;
            for (int v = 0; v < 3; v++) a[u][v] += w * f[u] * f[v];
        }
        used++;
    }
    if (used < 3 || solve3(a, b, x) != 0 || x[2] <= 0.0) return -1;
    p->fixed_s = x[0];
    p->tile_s = x[1];
    p->tile_flop_per_s = 1.0 / x[2];
    /* then the weight gradients with the bias gradient in their epilogue: one factor on the plain model's time,
     * least squares on the relative error (f minimises sum (f q - 1)^2, q = plain / measured) */
    double sq = 0.0, sqq = 0.0;
    p->bias_grad_factor = 0.0;
    for (int i = 0; i < d->n; i++) {
        if (!trains(d, i, held_out) || !d->row[i].bias_gradient) continue;
        double q = row_tiles_s(d, i, p, 0.0) / d->row[i].seconds;
        sq += q;
        sqq += q * q;
    }
    if (sqq > 0.0) p->bias_grad_factor = sq / sqq;
    return 0;
}

int gemm_fit_curve(const gemm_fit_data *d, const char *held_out, double peak, double *e_max, double *half_flops)
{
    /* calibrate's own fit (validator.c, calibrate_gemms): 1/eff = 1/e_max + (F_half/e_max) / F, weighted by F */
    double sw = 0, sx = 0, sy = 0, sxx = 0, sxy = 0;
    for (int i = 0; i < d->n; i++) {
        if (!trains(d, i, held_out)) continue;
        const gemm_fit_row *r = &d->row[i];
        double F = 2.0 * r->m * r->n * r->k, x = 1e9 / F, y = r->seconds * peak / F, w = F / 1e9;
        sw += w; sx += w * x; sy += w * y; sxx += w * x * x; sxy += w * x * y;
    }
    double det = sw * sxx - sx * sx;
    if (det <= 0.0) return -1;
    double c0 = (sxx * sy - sx * sxy) / det, c1 = (sw * sxy - sx * sy) / det;
    if (c0 <= 0.0) return -1;
    *e_max = 1.0 / c0;
    *half_flops = c1 / c0 * 1e9;
    return 0;
}

/* The four ways to cost row i (GEMM_FIT_METHODS): the curve, the table then the curve, the tiles, the
 * table then the tiles; each bound below by the launch as the planner's ops are. */
static void predict_row(const gemm_fit_data *d, int i, const hw_gpu *g, double peak, const hw_gemm_time *table,
                        int ntable, double e_max, double half, const gemm_fit_params *p, double out[GEMM_FIT_METHODS])
{
    const gemm_fit_row *r = &d->row[i];
    double membw = g->hbm_bytes_per_s * g->membound_efficiency;
    double F = 2.0 * r->m * r->n * r->k, bytes = 2.0 * (r->m * r->k + r->k * r->n + r->m * r->n);
    double curve = roofline_s(F, peak * e_max * F / (F + half), bytes, membw);
    double tiles = row_tiles_s(d, i, p, membw);
    double measured = measured_shape_s(table, ntable, r->m, r->n, r->k, 0.0, 1);
    out[0] = curve;
    out[1] = measured > 0.0 ? measured : curve;
    out[2] = tiles;
    out[3] = measured > 0.0 ? measured : tiles;
    for (int j = 0; j < GEMM_FIT_METHODS; j++)
        if (out[j] < g->launch_overhead_s) out[j] = g->launch_overhead_s;
}

int gemm_fit_lomo(const gemm_fit_data *d, const hw_gpu *g, gemm_fit_result *res)
{
    memset(res, 0, sizeof *res);
    double peak = g->peak_flops[PREC_BF16] > 0.0 ? g->peak_flops[PREC_BF16] : g->peak_flops[PREC_FP16];
    if (peak <= 0.0 || d->ngroups < 2) return -1;
    /* calibrate's weight gradients add into a 16-bit gradient (validator/linear.c) */
    const double accumulate = gemm_accumulate_s(1.0, 2.0, 2.0, g->hbm_bytes_per_s * g->membound_efficiency,
                                                g->gemm_accumulate_read_factor, g->gemm_accumulate_write_factor);
    res->all.accumulate_s_per_element = accumulate;
    if (gemm_fit_tiles(d, NULL, &res->all) != 0) return -1;
    if (gemm_fit_curve(d, NULL, peak, &res->curve_e_max, &res->curve_half_flops) != 0) return -1;
    static hw_gemm_time table[GEMM_FIT_ROWS_MAX];
    for (int h = 0; h < d->ngroups; h++) {
        const char *out = d->group[h];
        gemm_fit_params p = {.accumulate_s_per_element = accumulate};
        double e_max, half;
        if (gemm_fit_tiles(d, out, &p) != 0 || gemm_fit_curve(d, out, peak, &e_max, &half) != 0) return -1;
        res->held[h] = p;
        int ntable = 0;
        for (int i = 0; i < d->n; i++)
            if (trains(d, i, out))
                table[ntable++] = (hw_gemm_time){(int64_t)d->row[i].m, (int64_t)d->row[i].n, (int64_t)d->row[i].k, 0,
                                                 d->row[i].seconds};
        for (int i = 0; i < d->n; i++) {
            if (trains(d, i, out)) continue;
            double t[GEMM_FIT_METHODS];
            predict_row(d, i, g, peak, table, ntable, e_max, half, &p, t);
            for (int j = 0; j < GEMM_FIT_METHODS; j++) res->error[i][j] = t[j] / d->row[i].seconds - 1.0;
        }
    }
    /* the fit on every row, judged on its own rows: the in-sample error beside the held-out one */
    for (int i = 0; i < d->n; i++) {
        double t = row_tiles_s(d, i, &res->all, g->hbm_bytes_per_s * g->membound_efficiency);
        if (t < g->launch_overhead_s) t = g->launch_overhead_s;
        res->in_sample[i] = t / d->row[i].seconds - 1.0;
    }
    return 0;
}

void gemm_fit_summary(const gemm_fit_data *d, const gemm_fit_result *res, const char *group, int bias_gradient, int method,
                      double *mean_abs, double *mean_signed, double *worst, int *count)
{
    double sa = 0, ss = 0, w = 0;
    int n = 0;
    for (int i = 0; i < d->n; i++) {
        if ((group && strcmp(d->row[i].group, group)) || (bias_gradient >= 0 && d->row[i].bias_gradient != bias_gradient))
            continue;
        double e = method < 0 ? res->in_sample[i] : res->error[i][method];
        sa += fabs(e);
        ss += e;
        if (fabs(e) > fabs(w)) w = e;
        n++;
    }
    *mean_abs = n ? sa / n : 0.0;
    *mean_signed = n ? ss / n : 0.0;
    *worst = w;
    *count = n;
}

static const char *const method_name[GEMM_FIT_METHODS] = {"curve", "table, else curve", "tiles", "table, else tiles"};

void gemm_fit_report(FILE *out, const gemm_fit_data *d, const gemm_fit_result *res)
{
    int nbias = 0;
    for (int i = 0; i < d->n; i++) nbias += d->row[i].bias_gradient;
    fprintf(out, "fit on all %d rows: rate %.1f TFLOP/s, tile %.3f us per wave, fixed %.2f us per GEMM (%.0f SMs, "
                 "%.0f x %.0f tiles) on the %d plain GEMMs;\n  the %d weight gradients with a fused bias gradient take %.3f "
                 "times that\n",
            d->n, res->all.tile_flop_per_s / 1e12, res->all.tile_s * 1e6, res->all.fixed_s * 1e6, d->sms, GEMM_TILE_M,
            GEMM_TILE_N, d->n - nbias, nbias, res->all.bias_grad_factor);
    double a, s, w;
    int n;
    gemm_fit_summary(d, res, NULL, -1, -1, &a, &s, &w, &n);
    fprintf(out, "  in-sample: mean |error| %.1f%%, signed %+.1f%%, worst %+.1f%%\n", 100 * a, 100 * s, 100 * w);
    fprintf(out, "calibrate's curve on all rows: e_max %.4f, F_half %.3f GFLOP\n\n", res->curve_e_max,
            res->curve_half_flops / 1e9);
    fprintf(out, "leave one model out: fitted on the others, predicting the held-out model's shapes\n");
    fprintf(out, "%-14s %5s %-42s", "held out", "rows", "held-out fit (rate, tile, fixed, bias factor)");
    for (int j = 0; j < GEMM_FIT_METHODS; j++) fprintf(out, " | %-26s", method_name[j]);
    fprintf(out, "\n");
    for (int h = 0; h <= d->ngroups; h++) {
        const char *group = h < d->ngroups ? d->group[h] : NULL;
        char fit[64] = "";
        if (group)
            snprintf(fit, sizeof fit, "%.0f TFLOP/s, %.3f us, %.2f us, %.3f", res->held[h].tile_flop_per_s / 1e12,
                     res->held[h].tile_s * 1e6, res->held[h].fixed_s * 1e6, res->held[h].bias_grad_factor);
        gemm_fit_summary(d, res, group, -1, 0, &a, &s, &w, &n);
        fprintf(out, "%-14.14s %5d %-42s", group ? group : "all", n, fit);
        for (int j = 0; j < GEMM_FIT_METHODS; j++) {
            gemm_fit_summary(d, res, group, -1, j, &a, &s, &w, &n);
            char cell[40];
            snprintf(cell, sizeof cell, "%5.1f%% %+6.1f%% (%+6.1f%%)", 100 * a, 100 * s, 100 * w);
            fprintf(out, " | %-26s", cell);
        }
        fprintf(out, "\n");
    }
    for (int subset = 0; subset < 2; subset++) {
        gemm_fit_summary(d, res, NULL, subset, 0, &a, &s, &w, &n);
        fprintf(out, "%-14s %5d %-42s", subset ? "  fused bias" : "  plain", n, "");
        for (int j = 0; j < GEMM_FIT_METHODS; j++) {
            gemm_fit_summary(d, res, NULL, subset, j, &a, &s, &w, &n);
            char cell[40];
            snprintf(cell, sizeof cell, "%5.1f%% %+6.1f%% (%+6.1f%%)", 100 * a, 100 * s, 100 * w);
            fprintf(out, " | %-26s", cell);
        }
        fprintf(out, "\n");
    }
    static const char *const kind_name[] = {"  ?", "  forward", "  dgrad", "  wgrad"};
    for (int kind = GEMM_KIND_FORWARD; kind <= GEMM_KIND_WGRAD; kind++) {
        fprintf(out, "%-14s", kind_name[kind]);
        for (int j = -1; j < GEMM_FIT_METHODS; j++) {
            double sa = 0, ss = 0, worst = 0;
            int count = 0;
            for (int i = 0; i < d->n; i++) {
                if (d->row[i].kind != (gemm_kind_t)kind) continue;
                double e = res->error[i][j < 0 ? 0 : j];
                sa += fabs(e);
                ss += e;
                if (fabs(e) > fabs(worst)) worst = e;
                count++;
            }
            if (j < 0) { fprintf(out, " %5d %-42s", count, ""); continue; }
            char cell[40];
            snprintf(cell, sizeof cell, "%5.1f%% %+6.1f%% (%+6.1f%%)", count ? 100 * sa / count : 0.0,
                     count ? 100 * ss / count : 0.0, 100 * worst);
            fprintf(out, " | %-26s", cell);
        }
        fprintf(out, "\n");
    }
    fprintf(out, "(each cell: mean |error|, mean signed error, worst; error = predicted / measured - 1; the last five\n"
                 " lines split all held-out rows: plain GEMMs and weight gradients that reduce the bias gradient in their\n"
                 " epilogue, then by the GEMM calibrate timed: forward, dgrad, wgrad)\n");
}

/* The overlay at `path` with gpu's fitted rows in place of old ones (appended when absent). */
int gemm_fit_overlay_text(const char *path, const char *gpu, const gemm_fit_data *d, const gemm_fit_result *res,
                          char **text, size_t *len, char *err, size_t errlen)
{
    time_t now = time(NULL);
    char date[32], groups[200] = "", source[600];
    strftime(date, sizeof date, "%Y-%m-%d", gmtime(&now));
    for (int g = 0, used = 0; g < d->ngroups && used < (int)sizeof groups - 40; g++)
        used += snprintf(groups + used, sizeof groups - (size_t)used, "%s%.30s", g ? ", " : "", d->group[g]);
    double a, s, w, ca, cs, cw;
    int n;
    gemm_fit_summary(d, res, NULL, -1, 2, &a, &s, &w, &n);
    gemm_fit_summary(d, res, NULL, -1, 0, &ca, &cs, &cw, &n);
    const char *base = strrchr(path, '/');
    snprintf(source, sizeof source,
             "sextant fit-gemm %s on the %d gemm_us rows of %s (%s)%s; leave-one-model-out mean |error| %.1f%%, signed "
             "%+.1f%%, worst %+.1f%% (calibrate's curve: %.1f%%, %+.1f%%, %+.1f%%)",
             date, d->n, base ? base + 1 : path, groups,
             res->all.accumulate_s_per_element > 0.0 ? ", the weight gradients' read of their gradient taken out" : "",
             100 * a, 100 * s, 100 * w, 100 * ca, 100 * cs, 100 * cw);
    char rows[5][800];
    snprintf(rows[0], sizeof rows[0], "%s,gemm_tile_tflops,%.2f,\"%s\"\n", gpu, res->all.tile_flop_per_s / 1e12, source);
    snprintf(rows[1], sizeof rows[1], "%s,gemm_tile_us,%.4f,\"%s\"\n", gpu, res->all.tile_s * 1e6, source);
    snprintf(rows[2], sizeof rows[2], "%s,gemm_fixed_us,%.3f,\"%s\"\n", gpu, res->all.fixed_s * 1e6, source);
    snprintf(rows[3], sizeof rows[3], "%s,sm_count,%.0f,\"sextant fit-gemm %s: the SM count sextant-gpu calibrate reported in the "
             "source of the gemm_us rows of %s\"\n", gpu, d->sms, date, base ? base + 1 : path);
    snprintf(rows[4], sizeof rows[4], "%s,gemm_bias_grad_factor,%.4f,\"%s\"\n", gpu, res->all.bias_grad_factor, source);
    static const char *const keys[5] = {"gemm_tile_tflops,", "gemm_tile_us,", "gemm_fixed_us,", "sm_count,",
                                        "gemm_bias_grad_factor,"};
    const char *const row_text[5] = {rows[0], rows[1], rows[2], rows[3], rows[4]};
    int nkeys = res->all.bias_grad_factor > 0.0 ? 5 : 4; /* no factor without such rows: an old one is dropped */
    return overlay_replace_rows(path, gpu, keys, row_text, nkeys, 5, text, len, err, errlen);
}

/* "batched b=4" in a published row's notes: its batch; 1 otherwise. */
static double notes_batch(const char *notes)
{
    const char *b = notes ? strstr(notes, "b=") : NULL;
    double v = b ? atof(b + 2) : 0.0;
    return b && strstr(notes, "batched") && v >= 1.0 ? v : 1.0;
}

int gemm_fit_published(FILE *out, const char *path, const char *gpu_prefix, const gemm_fit_data *d,
                       const gemm_fit_result *res, const hw_gpu *g, char *err, size_t errlen)
{
    csv_table t;
    if (csv_table_read(path, &t, err, errlen) != 0) return -1;
    double peak = g->peak_flops[PREC_BF16] > 0.0 ? g->peak_flops[PREC_BF16] : g->peak_flops[PREC_FP16];
    double membw = g->hbm_bytes_per_s * g->membound_efficiency;
    double sum[2][2] = {{0}}, signed_sum[2][2] = {{0}};
    int n = 0;
    const char *shown = strstr(path, "data/published/"); /* the data root's own spelling is no one's business */
    fprintf(out, "\n%s rows of %s (bf16, with a shape): TFLOP/s published against predicted by the tiles fitted on all "
                 "rows, and by calibrate's curve\n", gpu_prefix, shown ? shown : path);
    fprintf(out, "%6s %6s %6s %3s %9s | %9s %7s %9s %7s | %9s %7s  %s\n", "m", "n", "k", "b", "published", "tiles", "error",
            "as m,k,n", "error", "curve", "error", "source");
    for (int r = 0; r < t.nrows; r++) {
        const char *gpu = csv_table_cell(&t, r, "gpu"), *dtype = csv_table_cell(&t, r, "dtype");
        const char *notes = csv_table_cell(&t, r, "notes"), *source = csv_table_cell(&t, r, "source");
        const char *mc = csv_table_cell(&t, r, "m");
        if (!gpu || !dtype || strncasecmp(gpu, gpu_prefix, strlen(gpu_prefix)) || strncasecmp(dtype, "bf16", 4) || !mc || !*mc)
            continue;
        double m, nn, k, tflops;
        if (csv_get_double(&t, r, "m", 1, 1e7, &m, err, errlen) || csv_get_double(&t, r, "n", 1, 1e7, &nn, err, errlen) ||
            csv_get_double(&t, r, "k", 1, 1e7, &k, err, errlen) ||
            csv_get_double(&t, r, "tflops", 1e-3, 1e5, &tflops, err, errlen)) {
            csv_table_free(&t);
            return -1;
        }
        double b = notes_batch(notes), F = 2.0 * b * m * nn * k;
        /* the source's order, and with n and k swapped (MAMF's README and its header disagree) */
        double shape[2][3] = {{m, nn, k}, {m, k, nn}}, predicted[3];
        for (int o = 0; o < 2; o++) {
            const double *s = shape[o];
            double bytes = 2.0 * b * (s[0] * s[2] + s[2] * s[1] + s[0] * s[1]);
            predicted[o] = F / gemm_tile_wave_s(b, s[0], s[1], s[2], d->sms, res->all.tile_flop_per_s, res->all.tile_s,
                                                 res->all.fixed_s, bytes, membw) / 1e12;
        }
        double bytes = 2.0 * b * (m * k + k * nn + m * nn);
        predicted[2] = F / roofline_s(F, peak * res->curve_e_max * (F / b) / (F / b + res->curve_half_flops), bytes, membw) / 1e12;
        double e[3];
        for (int j = 0; j < 3; j++) e[j] = predicted[j] / tflops - 1.0;
        fprintf(out, "%6.0f %6.0f %6.0f %3.0f %9.1f | %9.1f %+6.1f%% %9.1f %+6.1f%% | %9.1f %+6.1f%%  %.40s\n", m, nn, k, b, tflops,
                predicted[0], 100 * e[0], predicted[1], 100 * e[1], predicted[2], 100 * e[2], source ? source : "");
        for (int j = 0; j < 2; j++) {
            double ej = j == 0 ? e[0] : e[2]; /* [0]: tiles in the source's order, [1]: the curve */
            sum[j][0] += fabs(ej);
            signed_sum[j][0] += ej;
        }
        n++;
    }
    csv_table_free(&t);
    if (n)
        fprintf(out, "%d rows: tiles mean |error| %.1f%%, signed %+.1f%%; curve %.1f%%, %+.1f%% (error = predicted / "
                     "published - 1 in TFLOP/s)\n",
                n, 100 * sum[0][0] / n, 100 * signed_sum[0][0] / n, 100 * sum[1][0] / n, 100 * signed_sum[1][0] / n);
    return 0;
}

int gemm_fit_overlay(const char *in, const char *out, const hw_gpu *gpu, const model_zoo *zoo, const char *published,
                     FILE *report, char *err, size_t errlen)
{
    static gemm_fit_data data;
    static gemm_fit_result res;
    if (gemm_fit_read(in, gpu->name, &data, err, errlen) != 0) return -1;
    if (data.ngroups < 2) {
        snprintf(err, errlen, "%s: the gemm_us rows come from one model (%s): leaving one out needs two or more", in,
                 data.group[0]);
        return -1;
    }
    gemm_fit_mark_bias(&data, zoo);
    if (gemm_fit_lomo(&data, gpu, &res) != 0) {
        snprintf(err, errlen, "%s: the least squares fit failed (too few distinct shapes)", in);
        return -1;
    }
    fprintf(report, "%d gemm_us rows of %s on %s, from %d models\n", data.n, in, gpu->name, data.ngroups);
    gemm_fit_report(report, &data, &res);
    if (published && gemm_fit_published(report, published, "H100", &data, &res, gpu, err, errlen) != 0) return -1;
    char *text = NULL;
    size_t len = 0;
    int rc = gemm_fit_overlay_text(in, gpu->name, &data, &res, &text, &len, err, errlen);
    if (!rc) rc = outfile_write(out, text, len, err, errlen);
    free(text);
    return rc;
}
