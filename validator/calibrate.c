/* sextant-gpu calibrate (commands.h): the microbenchmarks, GEMM and attention tables and fits
 * that make a GPU's hwdb overlay; the power model is calibrate_power.c's, the step fit
 * calibrate_step_fit.c's. */
#include <cuda_runtime_api.h>
#include <errno.h>
#include <gsl/gsl_fit.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <time.h>

#include "bench.h"
#include "calibrate_issue.h"
#include "calibrate_optimizer.h"
#include "calibrate_power.h"
#include "commands.h"
#include "fp8_calibrate.h"
#include "gpu_check.h"
#include "gpu_timing.h"
#include "kernels.h"
#include "outfile.h"
#include "power.h"
#include "train.h"

/* Times the fused attention's forward and backward over transformer shapes and
 * returns, for each pass, the fraction of `peak` it reaches on the FLOPs the
 * planner's op list assigns it (flash_attention_flops: causal, backward 2.5 x
 * forward): the sum of those FLOPs over the sum of the times, so the longer
 * shapes weigh more.  0 for a pass whose kernel failed. */
/* Our fused attention's time for each listed model's heads, at sequence 1024 to
 * 8192 and batch 1 up to 32k tokens, launched back to back: the table the planner
 * reads per shape (overlay keys flash_fwd_us / flash_bwd_us: batch x heads,
 * sequence, head size; its line over the batch for other micro-batches). */
typedef struct {
    int n[2];
    hw_gemm_time shape[2][HWDB_ATTENTION_TIMES_MAX];
    char what[HWDB_ATTENTION_TIMES_MAX][48];
    /* the unfused attention (cuBLAS batched GEMMs and our softmax, as the step runs them):
     * overlay keys unfused_fwd_us / unfused_bwd_us, the same sizes */
    int un[2];
    hw_gemm_time unfused[2][HWDB_ATTENTION_TIMES_MAX];
    char unfused_what[HWDB_ATTENTION_TIMES_MAX][48];
} attention_timing;

/* one more row of a shape table unless the shape is there or the table is full */
static void timing_add(hw_gemm_time *table, int *count, char (*what)[48], const char *name, hw_gemm_time row)
{
    for (int j = 0; j < *count; j++)
        if (table[j].m == row.m && table[j].n == row.n && table[j].k == row.k && table[j].kv == row.kv) return;
    if (*count == HWDB_ATTENTION_TIMES_MAX) return;
    if (what) snprintf(what[*count], sizeof what[0], "%.40s heads", name);
    table[(*count)++] = row;
}

static int time_flash_shape(flash_ctx *f, double t[2], double mhz[2])
{
    flash_prepare(f);
    int failed = 0;
    for (int pass = 0; pass < 2; pass++) {   /* forward first: the backward reads its out and lse */
        f->backward = pass;
        flash_error = cudaSuccess;
        /* about 2 ms per batch at 150 TFLOP/s, at least one call */
        int reps = (int)(2e-3 / (flash_attention_flops(f->B, f->H, f->T, f->D, 1, pass) / 150e12)) + 1;
        t[pass] = time_back_to_back(run_flash, f, reps > 50 ? 50 : reps, 100.0f);
        mhz[pass] = last_clock_mhz;
        if (flash_error != cudaSuccess) {
            fprintf(stderr, "sextant-gpu: flash attention %s (B %d T %d H %d KV %d D %d): %s\n", pass ? "backward" : "forward",
                    f->B, f->T, f->H, f->KV, f->D, cudaGetErrorString(flash_error));
            (void)cudaGetLastError();
            failed = 1;
        }
    }
    flash_release(f);
    return failed ? -1 : 0;
}

static int clock_scaling = 0; /* calibrate --clock-scaling: 1 */
static int power_model_asked = 1; /* calibrate --warm: 0 (--power-model, the default, kept for old scripts) */
static int step_fit_asked = 1;    /* calibrate --no-step-fit: 0 */

static void calibrate_attention(double peak, const char *models, const model_zoo *zoo, double sustained_mhz,
                                double *fwd_eff, double *bwd_eff, attention_timing *at)
{
    static const int shapes[][5] = {
        /* B, T, H, KV, D */
        {16, 1024, 12, 12, 64},  /* GPT-2 124M, micro-batch 16 */
        {4, 2048, 32, 8, 64},    /* LLaMA 3.2 1B, micro-batch 4 (GQA 32/8) */
        {8, 1024, 16, 16, 128},  /* D = 128, multi-head */
        {2, 2048, 32, 8, 128},   /* LLaMA 3 8B, micro-batch 2 (GQA 32/8) */
    };
    int nshapes = (int)(sizeof shapes / sizeof shapes[0]);
    double flops[2] = {0, 0}, seconds[2] = {0, 0};
    int failed = 0;
    if (clock_scaling && sustained_mhz > 0)
        printf("\nfused attention: the times below are brought to the reference clock, %.0f MHz (time alone x clock alone "
               "/ %.0f); the MHz columns give the clock alone", sustained_mhz, sustained_mhz);
    printf("\n%-36s %9s %9s %8s %9s %9s %8s\n", "fused causal attention (flash)", "fwd ms", "TFLOP/s", "of peak", "bwd ms",
           "TFLOP/s", "of peak");
    for (int i = 0; i < nshapes; i++) {
        flash_ctx f = {.B = shapes[i][0], .T = shapes[i][1], .H = shapes[i][2], .KV = shapes[i][3], .D = shapes[i][4]};
        double t[2], mhz[2], F[2] = {flash_attention_flops(f.B, f.H, f.T, f.D, 1, 0), flash_attention_flops(f.B, f.H, f.T, f.D, 1, 1)};
        scratch_refresh();
        if (time_flash_shape(&f, t, mhz) != 0) { failed = 1; continue; }
        for (int pass = 0; pass < 2; pass++) t[pass] = seconds_at_clock(t[pass], mhz[pass], clock_scaling ? sustained_mhz : 0.0);
        for (int pass = 0; pass < 2; pass++) { flops[pass] += F[pass]; seconds[pass] += t[pass]; }
        char shape[64];
        snprintf(shape, sizeof shape, "B %d T %d H %d KV %d D %d", f.B, f.T, f.H, f.KV, f.D);
        printf("%-36s %9.3f %9.1f %7.1f%% %9.3f %9.1f %7.1f%%\n", shape, t[0] * 1e3, F[0] / t[0] / 1e12,
               100.0 * F[0] / t[0] / peak, t[1] * 1e3, F[1] / t[1] / 1e12, 100.0 * F[1] / t[1] / peak);
    }
    *fwd_eff = failed || seconds[0] <= 0 ? 0.0 : flops[0] / seconds[0] / peak;
    *bwd_eff = failed || seconds[1] <= 0 ? 0.0 : flops[1] / seconds[1] / peak;
    printf("attention efficiency (planner FLOPs: causal 2 b h s^2 d forward, 2.5 x that backward; sum over shapes):\n"
           "  forward %.3f, backward %.3f of the bf16 peak %.0f TFLOP/s\n", *fwd_eff, *bwd_eff, peak / 1e12);

    at->n[0] = at->n[1] = at->un[0] = at->un[1] = 0;
    printf("\n%-14s %5s %5s %4s %4s %4s %9s %9s %8s %8s %8s %8s %11s %11s\n", "model heads", "B", "T", "H", "KV", "D",
           "fwd ms", "bwd ms", "fwd", "bwd", "fwd MHz", "bwd MHz", "unfused fwd", "unfused bwd");
    char list[512];
    snprintf(list, sizeof list, "%s", models);
    for (char *save = NULL, *name = strtok_r(list, ",", &save); name; name = strtok_r(NULL, ",", &save)) {
        const model_t *m = model_zoo_find(zoo, name);
        if (!m) continue;
        int fused = m->head_dim == 64 || m->head_dim == 128; /* the fused kernel's head sizes */
        /* the planner takes an untimed head configuration's rate from these, by head size and sequence */
        for (int T = 1024; T <= 8192; T *= 2)
            for (int B = 1; B <= 32 && B * T <= 32768; B *= 2) {
                flash_ctx f = {.B = B, .T = T, .H = (int)m->heads, .KV = (int)m->kv_heads, .D = (int)m->head_dim};
                double t[2] = {0, 0}, mhz[2] = {0, 0}, u[2] = {0, 0}, umhz[2] = {0, 0};
                if (2.0 * B * (double)T * (f.H + 2 * f.KV) * f.D > (double)scratch_bytes) continue;
                scratch_refresh();
                int have_fused = fused && time_flash_shape(&f, t, mhz) == 0;
                scratch_refresh();
                int have_unfused = train_time_unfused_attention(B, T, f.H, f.KV, f.D, scratch, scratch_bytes, u, umhz) == 0;
                if (!have_fused && !have_unfused) continue;
                for (int pass = 0; pass < 2; pass++) {
                    double ref = clock_scaling ? sustained_mhz : 0.0;
                    if (have_fused) t[pass] = seconds_at_clock(t[pass], mhz[pass], ref);
                    if (have_unfused) u[pass] = seconds_at_clock(u[pass], umhz[pass], ref);
                }
                char fwd[16] = "-", bwd[16] = "-";
                if (have_unfused) {
                    snprintf(fwd, sizeof fwd, "%.3f", u[0] * 1e3);
                    snprintf(bwd, sizeof bwd, "%.3f", u[1] * 1e3);
                }
                if (have_fused)
                    printf("%-14s %5d %5d %4d %4d %4d %9.3f %9.3f %7.1f%% %7.1f%% %8.0f %8.0f %11s %11s\n", name, B, T, f.H,
                           f.KV, f.D, t[0] * 1e3, t[1] * 1e3, 100 * flash_attention_flops(B, f.H, T, f.D, 1, 0) / t[0] / peak,
                           100 * flash_attention_flops(B, f.H, T, f.D, 1, 1) / t[1] / peak, mhz[0], mhz[1], fwd, bwd);
                else
                    printf("%-14s %5d %5d %4d %4d %4d %9s %9s %8s %8s %8s %8s %11s %11s\n", name, B, T, f.H, f.KV, f.D, "-",
                           "-", "-", "-", "-", "-", fwd, bwd);
                for (int pass = 0; pass < 2; pass++) {
                    hw_gemm_time shape = {(int64_t)B * f.H, T, f.D, (int64_t)B * f.KV, 0.0};
                    if (have_fused) {
                        shape.seconds = t[pass];
                        timing_add(at->shape[pass], &at->n[pass], pass ? NULL : at->what, name, shape);
                    }
                    if (have_unfused) {
                        shape.seconds = u[pass];
                        timing_add(at->unfused[pass], &at->un[pass], pass ? NULL : at->unfused_what, name, shape);
                    }
                }
            }
    }
}

/* The fixed GPU time of a memory-bound kernel: our LayerNorm forward over
 * 256 to 8192 rows of 768, launched back to back as a step launches its
 * kernels, fitted with GSL to t = t0 + bytes / bw; the intercept t0 is what a
 * small kernel costs beyond its bytes (ramp-up and tail), which the planner
 * adds to every memory-bound op.  Never negative.  (Timed one launch at a
 * time, t0 came out 7.2 us on an H100: the launch latency, which a step
 * hides.) */
static double membound_overhead(double large_bw)
{
    enum { SIZES = 6 };
    double bytes[SIZES], seconds[SIZES];
    printf("\n%-28s %10s %10s %10s\n", "layernorm fwd, rows x 768", "MB", "us", "GB/s");
    for (int i = 0; i < SIZES; i++) {
        int64_t rows = (int64_t)256 << i;
        membound_ctx c = {"attn_norm", NULL, rows, 768, 3072, 50304, 1024, 32, 12, 0, 0};
        seconds[i] = time_back_to_back(run_membound, &c, 200, 0.0f);
        bytes[i] = 2.0 * (double)rows * 768 * 2 + 2.0 * 768 * 2;
        printf("%-28lld %10.2f %10.2f %10.0f\n", (long long)rows, bytes[i] / 1e6, seconds[i] * 1e6, bytes[i] / seconds[i] / 1e9);
    }
    double c0, c1, cov00, cov01, cov11, sumsq;
    gsl_fit_linear(bytes, 1, seconds, 1, SIZES, &c0, &c1, &cov00, &cov01, &cov11, &sumsq);
    printf("fit: t = %.2f us + bytes / %.0f GB/s (GSL least squares); at 32768 rows %.0f GB/s\n", c0 * 1e6,
           c1 > 0 ? 1e-9 / c1 : 0.0, large_bw / 1e9);
    return c0 > 0 ? c0 : 0.0;
}

/* The zoo models whose linear layers and attention heads calibrate times by default: the ones the
 * one-GPU validation reports train, and GPT-3 5B for heads of size 128 (most models since 2023 have
 * them; without a timed one the planner priced LLaMA 3.2 3B's attention 16% fast on an H200,
 * docs/validation/2026-11-26-h200-heldout) and GEMMs 4096 wide. */
#define CALIBRATE_GEMM_MODELS "gpt2,gpt2-medium,llama3.2-1b,gpt3-5b"
#define GEMM_TOKENS_MIN 1024
#define GEMM_TOKENS_MAX 32768

typedef struct {
    int n;
    hw_gemm_time shape[HWDB_GEMM_TIMES_MAX];
    char what[HWDB_GEMM_TIMES_MAX][48];
    double e_max, half_gflop;
    double sustained_mhz; /* median SM clock after the GEMMs of 10 GFLOP or more: the power cap's clock */
} gemm_timing;

static void gemm_timing_add(gemm_timing *gt, int64_t m, int64_t n, int64_t k, double seconds, const char *what)
{
    for (int i = 0; i < gt->n; i++)
        if (gt->shape[i].m == m && gt->shape[i].n == n && gt->shape[i].k == k) return; /* two models, one shape */
    if (gt->n == HWDB_GEMM_TIMES_MAX) return;
    gt->shape[gt->n] = (hw_gemm_time){m, n, k, 0, seconds};
    snprintf(gt->what[gt->n], sizeof gt->what[0], "%.47s", what);
    gt->n++;
}

/* Times the forward, dgrad and wgrad GEMMs of every distinct linear layer of
 * the listed models (the planner's own op list names them: qkv, attn_out,
 * mlp_up, mlp_down, lm_head) at 1024 to 32768 tokens, through the training
 * step's own code (train_time_linear), with --clock-scaling brings those of
 * 1 GFLOP or more to the reference clock (seconds_at_clock; the smaller ones
 * wait on DRAM and launches more than on the clock), and fits the planner's efficiency curve
 * eff(F) = e_max F / (F + F_half) to them with GSL for the shapes the table
 * does not hold (other models, tensor-parallel shards).  -1 after one stderr
 * line. */
static int calibrate_gemms(const char *models, const model_zoo *zoo, const hw_gpu *g, gemm_timing *gt)
{
    gt->n = 0;
    double peak = g->peak_flops[PREC_BF16] > 0 ? g->peak_flops[PREC_BF16] : g->peak_flops[PREC_FP16];
    enum { ROWS = HWDB_GEMM_TIMES_MAX };
    static struct { int64_t tokens, in, out; double t[3], mhz[3]; char what[48]; } row[ROWS];
    static double loaded_mhz[3 * ROWS];
    int rows = 0, nloaded = 0;
    printf("\nGEMMs of the models' linear layers, as the training step runs them (bf16, fp32 accumulation; "
           "as measured, before clock scaling)\n");
    printf("%-14s %-9s %7s %7s %7s %11s %11s %11s %8s %8s %8s %17s\n", "model", "linear", "tokens", "in", "out", "fwd us",
           "dgrad us", "wgrad us", "fwd", "dgrad", "wgrad", "MHz fwd/dgr/wgr");
    char list[512];
    snprintf(list, sizeof list, "%s", models);
    for (char *save = NULL, *name = strtok_r(list, ",", &save); name; name = strtok_r(NULL, ",", &save)) {
        const model_t *model = model_zoo_find(zoo, name);
        if (!model) { fprintf(stderr, "sextant-gpu: --gemm-models: unknown model '%s'\n", name); return -1; }
        static stage_ops ops;
        if (build_calibration_ops(model, &ops) != 0) {
            fprintf(stderr, "sextant-gpu: --gemm-models: no op list for '%s'\n", name);
            return -1;
        }
        for (int i = 0; i < ops.nops; i++) {
            const op_t *op = &ops.ops[i];
            if (op->kind != OP_GEMM || op->pass != PASS_FWD || op->batch > 1) continue;
            int in = (int)op->k, out = (int)op->n, bias = linear_has_bias(model, op->name);
            for (int64_t tokens = GEMM_TOKENS_MIN; tokens <= GEMM_TOKENS_MAX && rows < ROWS; tokens *= 2) {
                size_t need_bytes = (size_t)tokens * (size_t)(out > in ? out : in) * 2 * 2;
                if (need_bytes > scratch_bytes) break; /* the logits of a large vocabulary at many tokens */
                double *t = row[rows].t, *mhz = row[rows].mhz;
                scratch_refresh(); /* fresh operands: the last shape's outputs lie where this one reads */
                if (train_time_linear((int)tokens, in, out, bias, scratch, scratch_bytes, t, mhz) != 0) return -1;
                double F = 2.0 * (double)tokens * in * out;
                printf("%-14s %-9s %7lld %7d %7d %11.1f %11.1f %11.1f %7.1f%% %7.1f%% %7.1f%% %5.0f/%5.0f/%5.0f\n", name,
                       op->name, (long long)tokens, in, out, t[0] * 1e6, t[1] * 1e6, t[2] * 1e6, 100 * F / t[0] / peak,
                       100 * F / t[1] / peak, 100 * F / t[2] / peak, mhz[0], mhz[1], mhz[2]);
                row[rows].tokens = tokens;
                row[rows].in = in;
                row[rows].out = out;
                snprintf(row[rows].what, sizeof row[rows].what, "%.20s %.20s", name, op->name);
                for (int j = 0; j < 3 && F >= 1e10; j++)
                    if (mhz[j] > 0) loaded_mhz[nloaded++] = mhz[j];
                rows++;
            }
        }
    }
    sort_ascending(loaded_mhz, (size_t)nloaded);
    gt->sustained_mhz = nloaded ? loaded_mhz[nloaded / 2] : 0.0;
    const double ref_mhz = clock_scaling ? gt->sustained_mhz : 0.0;
    printf("SM clock after the GEMMs of 10 GFLOP or more: median %.0f MHz over %d, 10%%-90%% %.0f-%.0f MHz; %s\n",
           gt->sustained_mhz, nloaded, nloaded ? loaded_mhz[nloaded / 10] : 0.0,
           nloaded ? loaded_mhz[nloaded * 9 / 10] : 0.0,
           ref_mhz > 0 ? "--clock-scaling: the times of 1 GFLOP or more are brought to that clock"
                       : "times written as measured (--clock-scaling brings them to that clock)");

    static double x[3 * ROWS], y[3 * ROWS], w[3 * ROWS];
    int points = 0;
    for (int r = 0; r < rows; r++) {
        double F = 2.0 * (double)row[r].tokens * (double)row[r].in * (double)row[r].out, t[3];
        for (int j = 0; j < 3; j++) t[j] = F >= 1e9 ? seconds_at_clock(row[r].t[j], row[r].mhz[j], ref_mhz) : row[r].t[j];
        gemm_timing_add(gt, row[r].tokens, row[r].out, row[r].in, t[0], row[r].what);
        gemm_timing_add(gt, row[r].tokens, row[r].in, row[r].out, t[1], row[r].what);
        gemm_timing_add(gt, row[r].in, row[r].out, row[r].tokens, t[2], row[r].what);
        for (int j = 0; j < 3; j++, points++) {
            /* 1/eff = 1/e_max + (F_half/e_max) / F, weighted by size: the large GEMMs hold
             * most of a step's time */
            x[points] = 1e9 / F;
            y[points] = t[j] * peak / F;
            w[points] = F / 1e9;
        }
    }
    if (gt->n == HWDB_GEMM_TIMES_MAX || rows == ROWS)
        fprintf(stderr, "sextant-gpu: note: the GEMM table is full (%d shapes); later shapes are left to the curve\n",
                HWDB_GEMM_TIMES_MAX);
    if (points < 2) { fprintf(stderr, "sextant-gpu: --gemm-models: no GEMM to time\n"); return -1; }
    double c0, c1, cov00, cov01, cov11, chisq;
    gsl_fit_wlinear(x, 1, w, 1, y, 1, (size_t)points, &c0, &c1, &cov00, &cov01, &cov11, &chisq);
    gt->e_max = 1.0 / c0;
    gt->half_gflop = c1 / c0;
    printf("\n%d GEMM shapes timed; fit: efficiency(F) = %.3f x F / (F + %.3g GFLOP)   (GSL weighted least squares on 1/eff, "
           "chi^2 %.3g)\n", gt->n, gt->e_max, gt->half_gflop, chisq);
    if (gt->e_max > 1.0 || gt->e_max < 0.05 || gt->half_gflop < 0) {
        fprintf(stderr, "sextant-gpu: the GEMM fit is implausible (plateau %.3f, half %.3g GFLOP); not writing it\n", gt->e_max,
                gt->half_gflop);
        return -1;
    }
    return 0;
}

/* calibrate's flags: the switches set the file's statics and scratch_data; the flags with a
 * value are read where they are used.  0, or 2 after one stderr line. */
/* calibrate --issue, --optimizer: only the host's issue of an expert GEMM, or the optimizer's bandwidth, into an
 * overlay of one row */
static int issue_only, optimizer_only;

static int calibrate_flags(int argc, char **argv)
{
    for (int i = 2; i < argc; i++) {
        if (!strcmp(argv[i], "--clock-scaling")) { clock_scaling = 1; continue; }
        if (!strcmp(argv[i], "--power-model")) { power_model_asked = 1; continue; }
        if (!strcmp(argv[i], "--warm")) { power_model_asked = 0; continue; }
        if (!strcmp(argv[i], "--no-step-fit")) { step_fit_asked = 0; continue; }
        if (!strcmp(argv[i], "--issue")) { issue_only = 1; continue; }
        if (!strcmp(argv[i], "--optimizer")) { optimizer_only = 1; continue; }
        if (!strcmp(argv[i], "--data") && i + 1 < argc) {
            i++;
            if (!strcmp(argv[i], "uniform")) scratch_data = SCRATCH_UNIFORM;
            else if (!strcmp(argv[i], "normal")) scratch_data = SCRATCH_NORMAL;
            else {
                fprintf(stderr, "sextant-gpu: calibrate: --data %s: expected uniform or normal\n", argv[i]);
                return 2;
            }
            continue;
        }
        if ((!strcmp(argv[i], "--gpu") || !strcmp(argv[i], "--out") || !strcmp(argv[i], "--gemm-models") ||
             !strcmp(argv[i], "--step-runs")) &&
            i + 1 < argc) {
            i++;
            continue;
        }
        fprintf(stderr, "sextant-gpu: calibrate: %s flag %s\n", argv[i][0] == '-' ? "unknown or incomplete" : "unexpected",
                argv[i]);
        return 2;
    }
    return 0;
}

/* What calibrate measured, for the overlay. */
typedef struct {
    double e_max, half_gflop, copy_bw, launch_s, context_bytes, membound_overhead_s, gemm_issue_s;
    const optimizer_timing *opt;
    const power_model *pm;
    int fp8_ok;
    double fp8_relative, fp8_relative_backward;
    const gemm_timing *gt;
    int attention_ok;
    double attention_fwd, attention_bwd;
    const attention_timing *at;
} overlay_values;

/* The overlay's row of the host's issue of an expert GEMM (calibrate_issue.c). */
static void write_issue_row(FILE *f, const hw_gpu *g, double gemm_issue_s, const char *source)
{
    fprintf(f, "%s,gemm_issue_us,%.3f,\"%s (host time per cuBLASLt expert GEMM issued as a grouped linear issues it: "
               "layouts reshaped, bucket algorithm, 4 streams; median of 5 x 256 calls)\"\n",
            g->name, gemm_issue_s * 1e6, source);
}

/* The overlay's row of the optimizer's bandwidth, from AdamW at the largest size timed (none when nothing was) */
static void write_optimizer_row(FILE *f, const hw_gpu *g, const optimizer_timing *t, const char *source)
{
    double e = optimizer_efficiency(t, g->hbm_bytes_per_s);
    if (e <= 0.0 || e > 1.0) return;
    fprintf(f, "%s,optimizer_membound_efficiency,%.4f,\"%s (sx_adamw over %.0fM parameters, %.0f bytes each, bf16 "
               "gradients and weights; median of the timed runs)\"\n",
            g->name, e, source, t->params[t->n - 1] / 1e6, OPTIMIZER_BYTES_PER_PARAM);
}

/* calibrate's table of the optimizer's timings, on stdout */
static void print_optimizer(const hw_gpu *g, const optimizer_timing *t)
{
    for (int i = 0; i < t->n; i++) {
        double adamw_bw = OPTIMIZER_BYTES_PER_PARAM * t->params[i] / t->adamw_s[i];
        double copy_bw = 2.0 * 4.0 * t->params[i] / t->copy_s[i];
        printf("adamw %5.0fM      %8.0f GB/s (%.3f of hwdb's HBM), %.3f ms; copy of its master %.0f GB/s (%.3f); "
               "adamw / copy %.3f\n",
               t->params[i] / 1e6, adamw_bw / 1e9, adamw_bw / g->hbm_bytes_per_s, t->adamw_s[i] * 1e3, copy_bw / 1e9,
               copy_bw / g->hbm_bytes_per_s, adamw_bw / copy_bw);
    }
}

/* Writes the overlay to out_path (outfile.c: complete or not at all); 0, or 2 after one stderr
 * line. */
static int write_overlay(const char *out_path, const hw_gpu *g, const char *source, const overlay_values *v)
{
    outfile out;
    char err[PATH_MAX + 256];
    if (outfile_open(&out, out_path, err, sizeof err) != 0) { fprintf(stderr, "sextant-gpu: --out: %s\n", err); return 2; }
    FILE *f = out.f;
    fprintf(f, "gpu,key,value,source\n");
    fprintf(f, "%s,gemm_efficiency,%.4f,\"%s\"\n", g->name, v->e_max, source);
    fprintf(f, "%s,gemm_half_gflop,%.4f,\"%s\"\n", g->name, v->half_gflop, source);
    fprintf(f, "%s,membound_efficiency,%.4f,\"%s (device copy)\"\n", g->name, v->copy_bw / g->hbm_bytes_per_s, source);
    fprintf(f, "%s,launch_overhead_us,%.3f,\"%s\"\n", g->name, v->launch_s * 1e6, source);
    write_issue_row(f, g, v->gemm_issue_s, source);
    write_optimizer_row(f, g, v->opt, source);
    fprintf(f, "%s,context_memory_gib,%.4f,\"%s\"\n", g->name, v->context_bytes / 1073741824.0, source);
    fprintf(f, "%s,membound_overhead_us,%.3f,\"%s (layernorm forward, 256 to 8192 rows of 768, GSL fit)\"\n", g->name,
            v->membound_overhead_s * 1e6, source);
    if (v->pm->ok) {
        fprintf(f, "%s,power_cap_w,%.1f,\"%s (NVML enforced power limit)\"\n", g->name, v->pm->cap_w, source);
        fprintf(f, "%s,clock_max_mhz,%.0f,\"%s (NVML maximum SM clock)\"\n", g->name, v->pm->top_mhz, source);
        fprintf(f, "%s,power_static_w,%.2f,\"%s (power model fit, rms %.1f W)\"\n", g->name, v->pm->static_w, source,
                v->pm->rms_w);
        fprintf(f, "%s,energy_gemm_pj_per_flop,%.5f,\"%s (power model fit)\"\n", g->name, v->pm->e_gemm * 1e12, source);
        fprintf(f, "%s,energy_attention_pj_per_flop,%.5f,\"%s (power model fit)\"\n", g->name, v->pm->e_attention * 1e12,
                source);
        fprintf(f, "%s,energy_pj_per_byte,%.3f,\"%s (power model fit)\"\n", g->name, v->pm->e_byte * 1e12, source);
        fprintf(f, "%s,clock_energy_exponent,%.2f,\"%s (power model fit)\"\n", g->name, v->pm->exponent, source);
    }
    if (v->fp8_ok)
        fprintf(f, "%s,fp8_gemm_relative_efficiency,%.4f,\"%s (E4M3 per-tensor scaled against bf16, cuBLASLt, the GEMMs "
                   "of 10 GFLOP or more)\"\n", g->name, v->fp8_relative, source);
    if (v->fp8_ok && v->fp8_relative_backward > 0.05 && v->fp8_relative_backward <= 2.0)
        fprintf(f, "%s,fp8_backward_gemm_relative_efficiency,%.4f,\"%s (the same without fast accumulation, as TE runs the "
                   "backward's GEMMs)\"\n", g->name, v->fp8_relative_backward, source);
    for (int i = 0; i < v->gt->n; i++)
        fprintf(f, "%s,gemm_us:%lldx%lldx%lld,%.3f,\"%s (%s, as the training step runs it)\"\n", g->name,
                (long long)v->gt->shape[i].m, (long long)v->gt->shape[i].n, (long long)v->gt->shape[i].k, v->gt->shape[i].seconds * 1e6,
                source, v->gt->what[i]);

    if (v->attention_ok) {
        fprintf(f, "%s,attention_fwd_efficiency,%.4f,\"%s (sx_flash_attention_forward, causal, 4 shapes)\"\n", g->name,
                v->attention_fwd, source);
        fprintf(f, "%s,attention_bwd_efficiency,%.4f,\"%s (sx_flash_attention_backward, causal, 4 shapes)\"\n", g->name,
                v->attention_bwd, source);
        for (int pass = 0; pass < 2; pass++)
            for (int i = 0; i < v->at->n[pass]; i++)
                fprintf(f, "%s,flash_%s_us:%lldx%lldx%lldx%lld,%.3f,\"%s (%s, our fused attention, causal)\"\n",
                        g->name, pass ? "bwd" : "fwd", (long long)v->at->shape[pass][i].m, (long long)v->at->shape[pass][i].n,
                        (long long)v->at->shape[pass][i].k, (long long)v->at->shape[pass][i].kv, v->at->shape[pass][i].seconds * 1e6,
                        source, v->at->what[i]);
    }
    for (int pass = 0; pass < 2; pass++)
        for (int i = 0; i < v->at->un[pass]; i++)
            fprintf(f, "%s,unfused_%s_us:%lldx%lldx%lldx%lld,%.3f,\"%s (%s, unfused attention: cuBLAS batched GEMMs "
                       "and our causal softmax, as the training step runs them)\"\n",
                    g->name, pass ? "bwd" : "fwd", (long long)v->at->unfused[pass][i].m, (long long)v->at->unfused[pass][i].n,
                    (long long)v->at->unfused[pass][i].k, (long long)v->at->unfused[pass][i].kv,
                    v->at->unfused[pass][i].seconds * 1e6, source, v->at->unfused_what[i]);
    if (outfile_commit(&out, err, sizeof err) != 0) { fprintf(stderr, "sextant-gpu: --out: %s\n", err); return 2; }
    return 0;
}

/* A one-row overlay (--out) of calibrate --issue or --optimizer, for a shipped overlay whose other rows stay as they
 * were measured: `row` writes the figure `measured` with the source made of the flag, the date and the device.
 * Returns the exit status. */
typedef void (*overlay_row_fn)(FILE *f, const hw_gpu *g, const void *measured, const char *source);
static int write_one_row_overlay(const char *out_path, const hw_gpu *g, const char *flag, const char *device,
                                 overlay_row_fn row, const void *measured)
{
    time_t now = time(NULL);
    char date[32], source[512], err[PATH_MAX + 256];
    strftime(date, sizeof date, "%Y-%m-%d", gmtime(&now));
    snprintf(source, sizeof source, "sextant-gpu calibrate %s %s on %s", flag, date, device);
    outfile out;
    if (outfile_open(&out, out_path, err, sizeof err) != 0) { fprintf(stderr, "sextant-gpu: --out: %s\n", err); return 2; }
    fprintf(out.f, "gpu,key,value,source\n");
    row(out.f, g, measured, source);
    if (outfile_commit(&out, err, sizeof err) != 0) { fprintf(stderr, "sextant-gpu: --out: %s\n", err); return 2; }
    printf("overlay written to %s\n", out_path);
    return 0;
}

static void issue_row(FILE *f, const hw_gpu *g, const void *issue_s, const char *source)
{
    write_issue_row(f, g, *(const double *)issue_s, source);
}

static void optimizer_row(FILE *f, const hw_gpu *g, const void *timing, const char *source)
{
    write_optimizer_row(f, g, timing, source);
}

/* calibrate --issue: the host's issue of an expert GEMM alone, printed and written as a one-row overlay (--out).
 * Returns the exit status. */
static int calibrate_issue_only(const hw_gpu *g, const char *device, const char *out_path)
{
    double issue_s = calibrate_gemm_issue_s();
    printf("# sextant-gpu calibrate --issue on %s (hwdb row %s)\n", device, g->name);
    printf("expert GEMM issue  %8.2f us of host time per cuBLASLt call\n", issue_s * 1e6);
    return out_path ? write_one_row_overlay(out_path, g, "--issue", device, issue_row, &issue_s) : 0;
}

/* calibrate --optimizer: the optimizer's bandwidth alone, printed and written as a one-row overlay (--out).  Returns
 * the exit status. */
static int calibrate_optimizer_only(const hw_gpu *g, const char *device, const char *out_path)
{
    printf("# sextant-gpu calibrate --optimizer on %s (hwdb row %s)\n", device, g->name);
    optimizer_timing t;
    calibrate_optimizer(&t);
    print_optimizer(g, &t);
    if (!out_path) return 0;
    if (optimizer_efficiency(&t, g->hbm_bytes_per_s) <= 0.0) {
        fprintf(stderr, "sextant-gpu: calibrate --optimizer: no size fitted in free memory; nothing written\n");
        return 1;
    }
    return write_one_row_overlay(out_path, g, "--optimizer", device, optimizer_row, &t);
}

int cmd_calibrate(int argc, char **argv, const hwdb *db, const model_zoo *zoo, int *fit_steps)
{
    *fit_steps = 0;
    if (calibrate_flags(argc, argv) != 0) return 2;
    const char *gpu_name = arg_value(argc, argv, "--gpu", "h100-sxm");
    const char *out_path = arg_value(argc, argv, "--out", NULL);
    const char *step_runs = arg_value(argc, argv, "--step-runs", NULL);
    /* the step fit's folder is made now, not after minutes of calibration */
    if (step_runs && mkdir(step_runs, 0755) != 0 && errno != EEXIST) {
        fprintf(stderr, "sextant-gpu: calibrate: --step-runs %s: %s\n", step_runs, strerror(errno));
        return 2;
    }
    const hw_gpu *g = hwdb_find_gpu(db, gpu_name);
    if (!g) { fprintf(stderr, "sextant-gpu: --gpu: unknown GPU '%s'\n", gpu_name); return 2; }
    char device[256];
    device_line(device, sizeof device);
    warn_if_other_gpu(g);
    if (issue_only) return calibrate_issue_only(g, device, out_path);
    if (optimizer_only) return calibrate_optimizer_only(g, device, out_path);
    /* what the process holds before any tensor: context, cuBLAS, workspaces */
    size_t free_bytes, total_bytes;
    CUDA_CHECK(cudaMemGetInfo(&free_bytes, &total_bytes));
    double context_bytes = (double)(total_bytes - free_bytes);
    scratch_init((size_t)4 << 30);
    kernel_workspace_bytes = 32u << 20;
    CUDA_CHECK(cudaMalloc(&kernel_workspace, kernel_workspace_bytes));
    printf("# sextant-gpu calibrate on %s (hwdb row %s)\n", device, g->name);
    printf("# operands: %s\n", scratch_data == SCRATCH_NORMAL
                                    ? "normal, sigma 1 (x), 0.02 (W), 1e-3 (dy) (--data normal)"
                                    : "uniform in [-1, 1) (--data normal: the scales of a training step)");

    size_t copy_bytes = 1u << 30;
    double copy_s = time_median(run_copy, &copy_bytes, NULL);
    double copy_bw = 2.0 * (double)copy_bytes / copy_s;
    printf("device copy        %8.0f GB/s (read + write), %.2f of hwdb's %.0f GB/s\n", copy_bw / 1e9,
           copy_bw / g->hbm_bytes_per_s, g->hbm_bytes_per_s / 1e9);

    membound_ctx ln = {"attn_norm", NULL, 32768, 768, 3072, 50304, 1024, 32, 12, 0, 0};
    double ln_s = time_median(run_membound, &ln, NULL);
    double ln_bw = (2.0 * 32768 * 768 * 2 + 2.0 * 768 * 2) / ln_s;
    membound_ctx gelu = {"gelu", NULL, 32768, 768, 3072, 50304, 1024, 32, 12, 0, 0};
    double gelu_s = time_median(run_membound, &gelu, NULL);
    double gelu_bw = 2.0 * 32768 * 3072 * 2 / gelu_s;
    printf("layernorm fwd      %8.0f GB/s (32768 x 768), gelu fwd %.0f GB/s (32768 x 3072)\n", ln_bw / 1e9, gelu_bw / 1e9);

    membound_ctx tiny = {"attn_residual", NULL, 1, 32, 32, 32, 1, 1, 1, 0, 0};
    /* the median of five batches: one batch alone once read 14.7 us on an H100 whose host was busy */
    double launch_s = time_back_to_back(run_membound, &tiny, 2000, 0.0f);
    printf("launch overhead    %8.2f us per back-to-back kernel\n", launch_s * 1e6);
    double gemm_issue_s = calibrate_gemm_issue_s();
    printf("expert GEMM issue  %8.2f us of host time per cuBLASLt call (a grouped linear's, 4 streams)\n", gemm_issue_s * 1e6);
    double membound_overhead_s = membound_overhead(ln_bw);
    optimizer_timing opt;
    calibrate_optimizer(&opt);
    print_optimizer(g, &opt);
    printf("context memory     %8.3f GiB (CUDA context, cuBLAS and workspaces before any tensor)\n", context_bytes / 1073741824.0);

    /* The power model first (the default), on the scratch buffers' fresh random operands; with it,
     * the shapes below are timed cool, at the top clock, the model sets each step's clock, and the
     * step fit (calibrate_step_fit) refines it on real steps: on an H100 that put all 18 validation
     * runs within 5% (docs/validation/2026-11-25-h100-fitted).  With --warm, or when the GPU gives no
     * power readings or the fit is implausible, each shape is timed warm, at the clock its own power
     * settles at (15 of 18 within 5%, docs/validation/2026-11-25-h100-power). */
    power_model pm;
    memset(&pm, 0, sizeof pm);
    if (power_model_asked) calibrate_power(copy_bytes, &pm);
    train_time_cool(pm.ok);
    if (pm.ok) idle_ms(3000); /* the shapes below start on a GPU back near idle */
    printf("\nshapes timed %s\n", pm.ok ? "cool: each batch after 50 ms idle, at the top clock"
                                         : "warm: each after 100 ms of the same work, at the clock its power settles at");
    /* GEMMs: every linear layer of the models, its three GEMMs as the step runs them */
    gemm_timing gt;
    if (calibrate_gemms(arg_value(argc, argv, "--gemm-models", CALIBRATE_GEMM_MODELS), zoo, g, &gt) != 0) {
        sm_clock_free();
        scratch_free();
        return 2;
    }
    double e_max = gt.e_max, half_gflop = gt.half_gflop;
    /* FP8 at the same shapes, where the GPU has it: the planner's fp8_gemm_relative_efficiency */
    double fp8_relative = 0.0, fp8_relative_backward = 0.0;
    int fp8_ok = fp8_calibrate(g, gt.shape, gt.n, scratch, scratch_bytes, &fp8_relative, &fp8_relative_backward) == 0 &&
                 fp8_relative > 0.05 &&
                 fp8_relative <= 2.0;
    double peak = g->peak_flops[PREC_BF16] > 0 ? g->peak_flops[PREC_BF16] : g->peak_flops[PREC_FP16];
    double attention_fwd = 0.0, attention_bwd = 0.0;
    static attention_timing at;
    calibrate_attention(peak, arg_value(argc, argv, "--gemm-models", CALIBRATE_GEMM_MODELS), zoo, gt.sustained_mhz,
                        &attention_fwd, &attention_bwd, &at);
    /* a fraction outside (0, 1] is a failed or absurd measurement: leave the planner's default */
    int attention_ok = attention_fwd > 0.0 && attention_fwd <= 1.0 && attention_bwd > 0.0 && attention_bwd <= 1.0;
    if (!attention_ok)
        fprintf(stderr, "sextant-gpu: the attention efficiencies (%.3g, %.3g) are implausible; not writing them\n",
                attention_fwd, attention_bwd);

    time_t now = time(NULL);
    char date[32];
    strftime(date, sizeof date, "%Y-%m-%d", gmtime(&now));
    char source[512];
    snprintf(source, sizeof source, "sextant-gpu calibrate %s on %s%s", date, device,
             scratch_data == SCRATCH_NORMAL ? ", --data normal" : "");
    if (out_path) {
        overlay_values v = {e_max, half_gflop, copy_bw, launch_s, context_bytes, membound_overhead_s, gemm_issue_s, &opt, &pm, fp8_ok,
                            fp8_relative, fp8_relative_backward, &gt, attention_ok, attention_fwd, attention_bwd, &at};
        if (write_overlay(out_path, g, source, &v) != 0) return 2;
        char err[PATH_MAX + 256];
        printf("overlay written to %s\n", out_path);
        /* the GEMM time over M, N, K fitted to the table just written, as sextant fit-gemm does (docs/model.md);
         * a note, not a failure, when it cannot be (the shapes of one model only) */
        printf("\nGEMM time over M, N, K (sextant fit-gemm): ");
        if (gemm_fit_overlay(out_path, out_path, g, zoo, NULL, stdout, err, sizeof err) != 0)
            fprintf(stderr, "sextant-gpu: note: calibrate: the GEMM model was not fitted: %s\n", err);
        else
            printf("overlay written to %s with the GEMM model\n", out_path);
        *fit_steps = pm.ok && step_fit_asked;
    }
    sm_clock_free();
    power_close();
    CUDA_CHECK(cudaFree(kernel_workspace));
    scratch_free();
    return 0;
}
