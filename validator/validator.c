/* sextant-gpu: the validator's first half, on one GPU.
 *
 *   sextant-gpu calibrate [--gpu NAME] [--out FILE] [--gemm-models A,B,...] [--warm | --no-step-fit]
 *       microbenchmarks (device copy, bf16 GEMMs over transformer shapes,
 *       a memory-bound kernel, launch overhead, our fused attention forward
 *       and backward) and the GPU's power model (NVML), fitted with GSL into
 *       the hwdb overlay that estimate/plan read with --calibration; then the
 *       step fit: six GPT-2 training runs refine the power model.
 *   sextant-gpu calibrate --comm [--gpus N] [--gpu NAME] [--out FILE] ...
 *       NCCL collectives over the GPUs of one node, one process per GPU
 *       (validator/comm.c, validator/launch.c), fitted into the node's
 *       intra-node latency and bandwidth; then a GEMM beside each collective
 *       (validator/overlap.c): the slowdowns of overlapping them.
 *   sextant-gpu ops MODEL [--gpu NAME] [--mbs N] [--seq N] [--calibration FILE] [--csv FILE]
 *       executes the planner's own op list of one micro-batch, op by op
 *       (cuBLAS for GEMMs and attention's batched GEMMs, our kernels for the
 *       memory-bound ops), and prints predicted against measured, per op.
 *
 *   sextant-gpu train MODEL [--tp N --pp N --dp N --sp --zero 1 --recompute full ...]
 *       a real training step (validator/train.c), on one GPU or one process
 *       per GPU, measured against the planner.  See docs/validation/README.md. */
#include <cjson/cJSON.h>
#include <cublas_v2.h>
#include <cuda_runtime_api.h>
#include <gsl/gsl_fit.h>
#include <gsl/gsl_multifit.h>
#include <errno.h>
#include <fcntl.h>
#include <math.h>
#include <spawn.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>
#include <time.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <unistd.h>

#include "comm.h"
#include "launch.h"
#include "outfile.h"
#include "plan_file.h"
#include "kernels.h"
#include "reference.h"
#include "planner.h"
#include "power.h"
#include "train.h"
#include "fp8.h"
#include "fp8_calibrate.h"
#include "gpu_check.h"
#include "gpu_timing.h"

#define TIMED_RUNS 15
#define WARMUP_RUNS 3

static cublasHandle_t blas;
static cudaStream_t stream;
static void *workspace;             /* cuBLAS's, then the kernels' */
static const size_t workspace_bytes = 64u << 20;
#define CUBLAS_WORKSPACE_BYTES (32u << 20)
static void *kernel_workspace;      /* norm and embedding backward */
static size_t kernel_workspace_bytes;
static int32_t *token_ids;

/* ---- device buffers ----------------------------------------------------- */

/* Four scratch buffers, each large enough for the largest operand, filled
 * with random bf16: ops read real numbers, never zeros.  The values matter to
 * tensor-core GEMMs: under the power cap the clock follows the switching that
 * the operands cause (H. He, "Strangely, matrix multiplications on GPUs run
 * faster when given predictable data", thonking.ai, 2024: on an A100 a
 * GEMM of normal data ran 13% slower than of zeros).  SCRATCH_UNIFORM: all
 * four in [-1, 1), calibrate's default; SCRATCH_NORMAL: normal with the
 * scales a training step sees (buffer 0, activations and x: 1; buffer 1,
 * weights: 0.02; buffer 2, outputs: 1; buffer 3, gradients dy: 1e-3),
 * calibrate --data normal. */
enum { SCRATCH_UNIFORM = 0, SCRATCH_NORMAL = 1 };
static void *scratch[4];
static size_t scratch_bytes;
static int scratch_data = SCRATCH_UNIFORM;

static float lcg_unit(unsigned *seed) /* (0, 1) */
{
    *seed = *seed * 1664525u + 1013904223u;
    return ((float)(*seed >> 8) + 0.5f) / 16777216.0f;
}

/* n bf16 values of the buffer's distribution: uniform in [-1, 1) or normal
 * with standard deviation sigma (Box-Muller) */
static void scratch_fill_host(uint16_t *host, size_t n, int normal, float sigma, unsigned *seed)
{
    for (size_t i = 0; i < n; i++) {
        if (!normal) {
            host[i] = sx_ref_f2bf(lcg_unit(seed) * 2.0f - 1.0f);
            continue;
        }
        float u1 = lcg_unit(seed), u2 = lcg_unit(seed);
        float r = sqrtf(-2.0f * logf(u1));
        host[i] = sx_ref_f2bf(sigma * r * cosf(6.2831853f * u2));
        if (i + 1 < n) host[++i] = sx_ref_f2bf(sigma * r * sinf(6.2831853f * u2));
    }
}

static void scratch_init(size_t bytes)
{
    static const float sigma[4] = {1.0f, 0.02f, 1.0f, 1e-3f};
    scratch_bytes = bytes;
    size_t chunk = 16u << 20;
    uint16_t *host = malloc(chunk);
    if (!host) { fprintf(stderr, "sextant-gpu: out of host memory\n"); exit(1); }
    unsigned seed = 12345;
    if (scratch_data == SCRATCH_UNIFORM) scratch_fill_host(host, chunk / 2, 0, 1.0f, &seed);
    for (int b = 0; b < 4; b++) {
        if (scratch_data == SCRATCH_NORMAL) scratch_fill_host(host, chunk / 2, 1, sigma[b], &seed);
        CUDA_CHECK(cudaMalloc(&scratch[b], bytes));
        for (size_t off = 0; off < bytes; off += chunk) {
            size_t n = bytes - off < chunk ? bytes - off : chunk;
            CUDA_CHECK(cudaMemcpy((char *)scratch[b] + off, host, n, cudaMemcpyHostToDevice));
        }
    }
    free(host);
}

static void scratch_free(void)
{
    for (int b = 0; b < 4; b++) CUDA_CHECK(cudaFree(scratch[b]));
}

static void need(double bytes, const char *what)
{
    if (bytes > (double)scratch_bytes) {
        fprintf(stderr, "sextant-gpu: %s needs %.0f MB, scratch holds %.0f MB\n", what, bytes / 1e6, scratch_bytes / 1e6);
        exit(1);
    }
}

/* ---- timing -------------------------------------------------------------- */

typedef void (*launch_fn)(const void *ctx);

static int compare_float(const void *a, const void *b)
{
    float x = *(const float *)a, y = *(const float *)b;
    return (x > y) - (x < y);
}

/* Median of TIMED_RUNS event-timed runs after warm-up, in seconds; the
 * spread (max - min) / median goes to *spread. */
static double time_median(launch_fn fn, const void *ctx, double *spread)
{
    cudaEvent_t start, stop;
    CUDA_CHECK(cudaEventCreate(&start));
    CUDA_CHECK(cudaEventCreate(&stop));
    for (int i = 0; i < WARMUP_RUNS; i++) fn(ctx);
    float ms[TIMED_RUNS];
    for (int i = 0; i < TIMED_RUNS; i++) {
        CUDA_CHECK(cudaEventRecord(start, stream));
        fn(ctx);
        CUDA_CHECK(cudaEventRecord(stop, stream));
        CUDA_CHECK(cudaEventSynchronize(stop));
        CUDA_CHECK(cudaEventElapsedTime(&ms[i], start, stop));
    }
    CUDA_CHECK(cudaGetLastError());
    qsort(ms, TIMED_RUNS, sizeof ms[0], compare_float);
    double median = ms[TIMED_RUNS / 2] * 1e-3;
    if (spread) *spread = (ms[TIMED_RUNS - 1] - ms[0]) * 1e-3 / median;
    CUDA_CHECK(cudaEventDestroy(start));
    CUDA_CHECK(cudaEventDestroy(stop));
    return median;
}

/* Seconds per launch of fn issued `reps` times back to back, the CPU ahead of
 * the GPU as in a training step (so no launch latency in the figure): the
 * median of five batches after at least one batch and warm_ms of warm-up
 * (compute-bound kernels: long enough for the power cap to settle the clock
 * where a step's sustained work holds it). */
static double last_clock_mhz; /* the SM clock after time_back_to_back's median batch */
/* Cool timing (train_time_is_cool): a batch that would warm first runs instead after
 * CALIBRATE_COOL_IDLE_MS of idle, at the top clock (train.h). */
static double time_back_to_back(launch_fn fn, const void *ctx, int reps, float warm_ms)
{
    const int cool = warm_ms > 0.0f && train_time_is_cool();
    if (cool) warm_ms = 0.0f;
    enum { BATCHES = 5 };
    cudaEvent_t start, stop;
    CUDA_CHECK(cudaEventCreate(&start));
    CUDA_CHECK(cudaEventCreate(&stop));
    float ms[BATCHES], warmed = 0.0f;
    double mhz[BATCHES];
    for (int b = -1; b < BATCHES; b++) {
        if (b >= 0 && cool) {
            CUDA_CHECK(cudaStreamSynchronize(stream));
            idle_ms(CALIBRATE_COOL_IDLE_MS);
        }
        CUDA_CHECK(cudaEventRecord(start, stream));
        for (int r = 0; r < reps; r++) fn(ctx);
        CUDA_CHECK(cudaEventRecord(stop, stream));
        if (b >= 0) mhz[b] = sm_clock_after(stream); /* the clock this batch left: the probe queues behind it */
        CUDA_CHECK(cudaEventSynchronize(stop));
        if (b < 0) {
            float t;
            CUDA_CHECK(cudaEventElapsedTime(&t, start, stop));
            warmed += t;
            if (warmed < warm_ms) b--;
        } else {
            CUDA_CHECK(cudaEventElapsedTime(&ms[b], start, stop));
        }
    }
    CUDA_CHECK(cudaGetLastError());
    CUDA_CHECK(cudaEventDestroy(start));
    CUDA_CHECK(cudaEventDestroy(stop));
    return median_batch_ms(ms, mhz, BATCHES, &last_clock_mhz) * 1e-3 / reps;
}

/* ---- the ops ----------------------------------------------------------- */

typedef struct {
    int64_t m, n, k, batch;
    long long stride_a, stride_b, stride_c;
} gemm_shape;

/* Row-major C[m,n] = A[m,k] B[k,n] in bf16 with fp32 accumulation, as
 * column-major C^T = B^T A^T. */
static void run_gemm(const void *ctx)
{
    const gemm_shape *g = ctx;
    const float alpha = 1.0f, beta = 0.0f;
    if (g->batch <= 1)
        CUBLAS_CHECK(cublasGemmEx(blas, CUBLAS_OP_N, CUBLAS_OP_N, (int)g->n, (int)g->m, (int)g->k, &alpha, scratch[1],
                                  CUDA_R_16BF, (int)g->n, scratch[0], CUDA_R_16BF, (int)g->k, &beta, scratch[2],
                                  CUDA_R_16BF, (int)g->n, CUBLAS_COMPUTE_32F, CUBLAS_GEMM_DEFAULT));
    else
        CUBLAS_CHECK(cublasGemmStridedBatchedEx(blas, CUBLAS_OP_N, CUBLAS_OP_N, (int)g->n, (int)g->m, (int)g->k, &alpha,
                                                scratch[1], CUDA_R_16BF, (int)g->n, g->stride_b, scratch[0], CUDA_R_16BF,
                                                (int)g->k, g->stride_a, &beta, scratch[2], CUDA_R_16BF, (int)g->n,
                                                g->stride_c, (int)g->batch, CUBLAS_COMPUTE_32F, CUBLAS_GEMM_DEFAULT));
}

static double time_gemm(int64_t m, int64_t n, int64_t k, int64_t batch)
{
    gemm_shape g = {m, n, k, batch, (long long)(m * k), (long long)(k * n), (long long)(m * n)};
    need(2.0 * (double)batch * (double)(m * k > k * n ? (m * k > m * n ? m * k : m * n) : (k * n > m * n ? k * n : m * n)),
         "a GEMM");
    return time_median(run_gemm, &g, NULL);
}

typedef struct {
    const char *name;
    const model_t *model;
    int64_t tokens, hidden, ffn, vocab, seq, mbs, heads, params;
    int rmsnorm;
} membound_ctx;

static cudaError_t membound_error;  /* the last kernel's answer, checked by the caller */

static void run_membound(const void *ctx)
{
    const membound_ctx *c = ctx;
    const char *n = c->name;
    int N = (int)c->tokens, C = (int)c->hidden;
    sx_bf16 *a = scratch[0], *b = scratch[1], *out = scratch[2];
    float *stats = scratch[3];
    cudaError_t err = cudaSuccess;
    if (!strcmp(n, "attn_norm") || !strcmp(n, "mlp_norm") || !strcmp(n, "final_norm")) {
        err = c->rmsnorm ? sx_rmsnorm_forward(out, stats, a, b, N, C, 1e-5f, stream)
                         : sx_layernorm_forward(out, stats, stats + N, a, b, b, N, C, 1e-5f, stream);
    } else if (strstr(n, "norm_bwd")) {
        float *dweight = (float *)((char *)scratch[3] + 2 * sizeof(float) * (size_t)N);
        err = c->rmsnorm ? sx_rmsnorm_backward(out, dweight, SX_F32, a, b, b, stats, 0, kernel_workspace, kernel_workspace_bytes, N, C, stream)
                         : sx_layernorm_backward(out, dweight, dweight + C, SX_F32, a, b, b, stats, stats + N, 0,
                                                 kernel_workspace, kernel_workspace_bytes, N, C, stream);
    } else if (!strcmp(n, "gelu")) {
        err = sx_gelu_forward(out, a, (size_t)N * (size_t)c->ffn, stream);
    } else if (!strcmp(n, "gelu_bwd")) {
        err = sx_gelu_backward(out, a, b, (size_t)N * (size_t)c->ffn, stream);
    } else if (!strcmp(n, "swiglu")) {
        err = sx_swiglu_forward(out, a, a + c->ffn, N, (int)c->ffn, 2 * (int)c->ffn, stream);
    } else if (!strcmp(n, "swiglu_bwd")) {
        err = sx_swiglu_backward(out, out + c->ffn, b, a, a + c->ffn, N, (int)c->ffn, 2 * (int)c->ffn, stream);
    } else if (!strcmp(n, "rope") || !strcmp(n, "rope_bwd")) {
        /* in place on the q and k columns of a fused qkv buffer [N, (H+2KV)D]; the base
         * (10000 here) changes the angles, not the time */
        const model_t *m = c->model;
        int H = (int)m->heads, KV = (int)m->kv_heads, D = (int)m->head_dim, ld = (H + 2 * KV) * D;
        err = strcmp(n, "rope") ? sx_rope_backward(out, (int)c->mbs, (int)c->seq, H, KV, D, ld, 10000.0f, stream)
                                : sx_rope_forward(out, (int)c->mbs, (int)c->seq, H, KV, D, ld, 10000.0f, stream);
    } else if (strstr(n, "residual")) {
        err = sx_residual_add(out, NULL, a, b, (size_t)N * (size_t)C, stream);
    } else if (!strcmp(n, "embedding")) {
        err = sx_embedding_forward(out, token_ids, a, c->model->position == POS_LEARNED ? b : NULL,
                                   (int)c->mbs, (int)c->seq, C, (int)c->vocab, stream);
    } else if (!strcmp(n, "embedding_bwd")) {
        err = sx_embedding_backward(out, c->model->position == POS_LEARNED ? b : NULL, SX_BF16, a,
                                    token_ids, kernel_workspace, kernel_workspace_bytes, (int)c->mbs, (int)c->seq, C,
                                    (int)c->vocab, stream);
    } else if (!strcmp(n, "cross_entropy")) {
        /* forward and backward fused in one kernel, as llm.c does */
        err = sx_cross_entropy_fused((float *)scratch[1], out, a, token_ids, N, (int)c->model->vocab,
                                     (int)c->vocab, 1.0f / (float)N, stream);
    } else if (!strcmp(n, "optimizer")) {
        sx_adamw_params hp = {3e-4f, 0.9f, 0.95f, 1e-8f, 0.1f, 1, 1.0f, NULL};
        float *p = scratch[0], *m = scratch[1], *v = scratch[2];
        const sx_bf16 *grad = scratch[3];
        sx_bf16 *weights = (sx_bf16 *)scratch[3] + c->params;
        err = sx_adamw(p, m, v, weights, grad, (size_t)c->params, &hp, stream);
    }
    if (err != cudaSuccess && membound_error == cudaSuccess) membound_error = err;
}

/* Token ids must be valid rows: fill scratch[3]'s head with ids < vocab. */
static void fill_token_ids(int64_t n, int64_t vocab)
{
    int32_t *ids = malloc((size_t)n * sizeof *ids);
    for (int64_t i = 0; i < n; i++) ids[i] = (int32_t)((i * 7919) % vocab);
    CUDA_CHECK(cudaMemcpy(scratch[3], ids, (size_t)n * sizeof *ids, cudaMemcpyHostToDevice));
    free(ids);
}

typedef struct {
    int64_t batch, s, d;
    int backward;
} attention_ctx;

/* Unfused causal attention: scores = Q K^T, causal softmax, out = P V; the
 * backward is four batched GEMMs around the softmax backward. */
static void run_attention(const void *ctx)
{
    const attention_ctx *a = ctx;
    gemm_shape scores = {a->s, a->s, a->d, a->batch, (long long)(a->s * a->d), (long long)(a->d * a->s), (long long)(a->s * a->s)};
    gemm_shape values = {a->s, a->d, a->s, a->batch, (long long)(a->s * a->s), (long long)(a->s * a->d), (long long)(a->s * a->d)};
    float scale = 1.0f / sqrtf((float)a->d);
    run_gemm(&scores);
    CUDA_CHECK(sx_softmax_causal_forward(scratch[3], scratch[2], (int)a->batch, (int)a->s, scale, stream));
    run_gemm(&values);
    if (!a->backward) return;
    run_gemm(&scores);  /* dP = dO V^T */
    run_gemm(&values);  /* dV = P^T dO */
    CUDA_CHECK(sx_softmax_causal_backward(scratch[3], scratch[3], scratch[2], (int)a->batch, (int)a->s, scale, stream));
    run_gemm(&values);  /* dQ = dS K */
    run_gemm(&values);  /* dK = dS^T Q */
}

/* The fused attention (kernels/attention.cu), causal, on one fused qkv buffer
 * [B*T, (H+2KV)D] as the training step runs it: q, k, v in scratch[0], out in
 * scratch[1], dout in scratch[2], dqkv in scratch[3]. */
typedef struct {
    int B, T, H, KV, D, backward;
    float *lse;
    void *ws;
    size_t ws_bytes;
    int copies;          /* operand sets rotated through, so that L2 does not keep one for the next call */
    size_t copy_elems;   /* elements from one set to the next in each scratch buffer */
    int64_t hidden, up_cols, ffn; /* the layer around it, for SEXTANT_ATTENTION_HEAT (time_heated) */
} flash_ctx;

static cudaError_t flash_error;     /* the last kernel's answer, checked by the caller */

static void run_flash(const void *ctx)
{
    const flash_ctx *f = ctx;
    const int ld = (f->H + 2 * f->KV) * f->D;
    const size_t ko = (size_t)f->H * (size_t)f->D, vo = (size_t)(f->H + f->KV) * (size_t)f->D;
    const float scale = 1.0f / sqrtf((float)f->D);
    /* a training step's attention reads q, k, v and out written long before (and in the
     * backward dout just written): one set per call, in turn, as train_time_linear does */
    static unsigned call;
    const size_t at = f->copies > 1 ? (size_t)(call++ % (unsigned)f->copies) * f->copy_elems : 0;
    const sx_bf16 *q = (const sx_bf16 *)scratch[0] + at;
    sx_bf16 *out = (sx_bf16 *)scratch[1] + at, *dout = (sx_bf16 *)scratch[2] + at, *dq = (sx_bf16 *)scratch[3] + at;
    cudaError_t err = f->backward
        ? sx_flash_attention_backward(dq, dq + ko, dq + vo, dout, out, f->lse, q, q + ko, q + vo, f->B, f->T, f->H, f->KV,
                                      f->D, ld, ld, scale, f->ws, f->ws_bytes, stream)
        : sx_flash_attention_forward(out, f->lse, q, q + ko, q + vo, f->B, f->T, f->H, f->KV, f->D, ld, ld, scale, stream);
    if (err != cudaSuccess && flash_error == cudaSuccess) flash_error = err;
}

/* Times the fused attention's forward and backward over transformer shapes and
 * returns, for each pass, the fraction of `peak` it reaches on the FLOPs the
 * planner's op list assigns it (flash_attention_flops: causal, backward 2.5 x
 * forward): the sum of those FLOPs over the sum of the times, so the longer
 * shapes weigh more.  0 for a pass whose kernel failed. */
/* Our fused attention's time for each listed model's heads, at batch 1 to 32
 * and sequence 1024 and 2048, launched back to back: the table the planner
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

/* SEXTANT_ATTENTION_HEAT=1, a diagnostic: each timed attention call inside its layer's GEMMs.
 * The step's fused attention takes 14-29% longer than calibrate's back-to-back time (H100,
 * 2026-11-25), not for L2 (rotating the operands changed calibrate's times by under 2%) nor
 * for the operands' values (calibrate --data normal; SEXTANT_REPLAY on the step's own
 * operands, docs/validation/2026-11-24-h100-step/gemm-data).  The suspect left is the clock that
 * the GEMMs around it hold under the power cap.  Heated, every call follows the GEMMs of one
 * layer at the same tokens (qkv, attn_out, mlp up and down; twice for the backward, as dgrad
 * and wgrad), so the attention's share of the time is the step's, and only the attention is
 * timed, between its own events.  The GEMMs use the scratch buffers' upper half, which the
 * attention's operand sets never reach.  It did not close the gap
 * (docs/validation/archive/2026-11-25-h100-heated-attention), so it is not the default. */
typedef struct {
    int64_t tokens, hidden, attn_width, qkv_cols, up_cols, ffn;
    int passes;
} heater;

static void run_heater(const heater *h)
{
    const float alpha = 1.0f, beta = 0.0f;
    const size_t half = scratch_bytes / 2;
    const int64_t in[4] = {h->hidden, h->attn_width, h->hidden, h->ffn};
    const int64_t out[4] = {h->qkv_cols, h->hidden, h->up_cols, h->hidden};
    for (int p = 0; p < h->passes; p++)
        for (int i = 0; i < 4; i++)
            CUBLAS_CHECK(cublasGemmEx(blas, CUBLAS_OP_N, CUBLAS_OP_N, (int)out[i], (int)h->tokens, (int)in[i], &alpha,
                                      (char *)scratch[1] + half, CUDA_R_16BF, (int)out[i], (char *)scratch[0] + half,
                                      CUDA_R_16BF, (int)in[i], &beta, (char *)scratch[2] + half, CUDA_R_16BF,
                                      (int)out[i], CUBLAS_COMPUTE_32F, CUBLAS_GEMM_DEFAULT));
}

/* Seconds per call of fn, each call after the heater's GEMMs, the CPU ahead of the GPU: the
 * median of `reps` calls after warm_ms of the same untimed; last_clock_mhz the clock after the last. */
static double time_heated(launch_fn fn, const void *ctx, const heater *h, int reps, float warm_ms)
{
    enum { MAX_REPS = 64 };
    if (reps > MAX_REPS) reps = MAX_REPS;
    cudaEvent_t start[MAX_REPS], stop[MAX_REPS];
    for (int r = 0; r < reps; r++) {
        CUDA_CHECK(cudaEventCreate(&start[r]));
        CUDA_CHECK(cudaEventCreate(&stop[r]));
    }
    /* the power cap answers the power averaged over a window much longer than one call:
     * heat for warm_ms first (a few calls were not enough, 2026-11-25) */
    cudaEvent_t warm_start, warm_stop;
    CUDA_CHECK(cudaEventCreate(&warm_start));
    CUDA_CHECK(cudaEventCreate(&warm_stop));
    for (float warmed = 0.0f; warmed < warm_ms;) {
        CUDA_CHECK(cudaEventRecord(warm_start, stream));
        for (int r = 0; r < 5; r++) {
            run_heater(h);
            fn(ctx);
        }
        CUDA_CHECK(cudaEventRecord(warm_stop, stream));
        CUDA_CHECK(cudaEventSynchronize(warm_stop));
        float t;
        CUDA_CHECK(cudaEventElapsedTime(&t, warm_start, warm_stop));
        warmed += t;
    }
    CUDA_CHECK(cudaEventDestroy(warm_start));
    CUDA_CHECK(cudaEventDestroy(warm_stop));
    for (int r = 0; r < reps; r++) {
        run_heater(h);
        CUDA_CHECK(cudaEventRecord(start[r], stream));
        fn(ctx);
        CUDA_CHECK(cudaEventRecord(stop[r], stream));
    }
    last_clock_mhz = sm_clock_after(stream);
    float ms[MAX_REPS];
    for (int r = 0; r < reps; r++) {
        CUDA_CHECK(cudaEventSynchronize(stop[r]));
        CUDA_CHECK(cudaEventElapsedTime(&ms[r], start[r], stop[r]));
        CUDA_CHECK(cudaEventDestroy(start[r]));
        CUDA_CHECK(cudaEventDestroy(stop[r]));
    }
    CUDA_CHECK(cudaGetLastError());
    qsort(ms, (size_t)reps, sizeof ms[0], compare_float);
    return ms[reps / 2] * 1e-3;
}

static int attention_heated(void)
{
    const char *v = getenv("SEXTANT_ATTENTION_HEAT");
    return v && !strcmp(v, "1");
}

/* SEXTANT_ATTENTION_HEAT_MS: the heated warm-up, 400 ms unless given */
static float heat_warm_ms(void)
{
    const char *v = getenv("SEXTANT_ATTENTION_HEAT_MS");
    if (!v || !*v) return 400.0f;
    char *end;
    float ms = strtof(v, &end);
    if (*end || !(ms >= 0.0f && ms <= 10000.0f)) {
        fprintf(stderr, "sextant-gpu: SEXTANT_ATTENTION_HEAT_MS=%s: expected milliseconds in [0, 10000]\n", v);
        exit(2);
    }
    return ms;
}

static void flash_prepare(flash_ctx *f);
static void flash_release(flash_ctx *f);

static int time_flash_shape(flash_ctx *f, double t[2], double mhz[2])
{
    flash_prepare(f);
    int failed = 0;
    for (int pass = 0; pass < 2; pass++) {   /* forward first: the backward reads its out and lse */
        f->backward = pass;
        flash_error = cudaSuccess;
        /* about 2 ms per batch at 150 TFLOP/s, at least one call */
        int reps = (int)(2e-3 / (flash_attention_flops(f->B, f->H, f->T, f->D, 1, pass) / 150e12)) + 1;
        if (f->hidden > 0 && attention_heated()) {
            /* the heater's tokens as the step's, or as many as half a scratch buffer holds */
            const int64_t widest = f->up_cols > f->hidden ? f->up_cols : f->hidden;
            int64_t tokens = (int64_t)f->B * f->T;
            if (2.0 * (double)tokens * (double)widest > (double)(scratch_bytes / 2))
                tokens = (int64_t)(scratch_bytes / 2 / (2 * (size_t)widest));
            const heater h = {tokens, f->hidden, (int64_t)f->H * f->D, (int64_t)(f->H + 2 * f->KV) * f->D, f->up_cols,
                              f->ffn, pass + 1};
            t[pass] = time_heated(run_flash, f, &h, 21, heat_warm_ms());
        } else {
            t[pass] = time_back_to_back(run_flash, f, reps > 50 ? 50 : reps, 100.0f);
        }
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

/* The operand sets, log-sum-exp and backward workspace of one attention shape. */
static void flash_prepare(flash_ctx *f)
{
    double qkv_bytes = 2.0 * f->B * (double)f->T * (f->H + 2 * f->KV) * f->D;
    need(qkv_bytes, "the attention's qkv buffer");
    /* sets enough that a turn passes 192 MB (four times an H100's or H200's L2; a call reads
     * qkv, out and dout, writes out or dqkv), as many as the scratch buffers hold.
     * SEXTANT_FLASH_WARM=1: one set, L2 left warm between calls (what calibrate did until
     * 2026-11-24, kept to compare) */
    const char *warm = getenv("SEXTANT_FLASH_WARM");
    f->copy_elems = (((size_t)qkv_bytes + 4095) / 4096) * 4096 / sizeof(sx_bf16);
    f->copies = warm && !strcmp(warm, "1") ? 1 : (int)(192e6 / (2.0 * qkv_bytes)) + 1;
    if (f->copies > 16) f->copies = 16;
    while (f->copies > 1 && (double)f->copies * (double)f->copy_elems * sizeof(sx_bf16) > (double)scratch_bytes)
        f->copies--;
    f->ws_bytes = sx_flash_attention_backward_workspace_bytes(f->B, f->T, f->H);
    CUDA_CHECK(cudaMalloc((void **)&f->lse, (size_t)f->B * f->H * f->T * sizeof(float)));
    CUDA_CHECK(cudaMalloc(&f->ws, f->ws_bytes));
}

static void flash_release(flash_ctx *f)
{
    CUDA_CHECK(cudaFree(f->lse));
    CUDA_CHECK(cudaFree(f->ws));
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
        /* a layer of width H x D with a 4x MLP around it */
        const int64_t width = (int64_t)shapes[i][2] * shapes[i][4];
        flash_ctx f = {.B = shapes[i][0], .T = shapes[i][1], .H = shapes[i][2], .KV = shapes[i][3], .D = shapes[i][4],
                       .hidden = width, .up_cols = 4 * width, .ffn = 4 * width};
        double t[2], mhz[2], F[2] = {flash_attention_flops(f.B, f.H, f.T, f.D, 1, 0), flash_attention_flops(f.B, f.H, f.T, f.D, 1, 1)};
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
        for (int T = 1024; T <= 2048; T *= 2)
            for (int B = 1; B <= 32; B *= 2) {
                flash_ctx f = {.B = B, .T = T, .H = (int)m->heads, .KV = (int)m->kv_heads, .D = (int)m->head_dim,
                               .hidden = m->hidden, .up_cols = (m->ffn_kind == FFN_SWIGLU ? 2 : 1) * m->ffn,
                               .ffn = m->ffn};
                double t[2] = {0, 0}, mhz[2] = {0, 0}, u[2] = {0, 0}, umhz[2] = {0, 0};
                if (2.0 * B * (double)T * (f.H + 2 * f.KV) * f.D > (double)scratch_bytes) continue;
                int have_fused = fused && time_flash_shape(&f, t, mhz) == 0;
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

/* ---- commands ------------------------------------------------------------ */

static const char *arg_value(int argc, char **argv, const char *flag, const char *fallback)
{
    for (int i = 1; i + 1 < argc; i++)
        if (!strcmp(argv[i], flag)) return argv[i + 1];
    return fallback;
}

/* Loads the hwdb (with the overlay `calibration` applied when not NULL; `plain`,
 * when not NULL, gets it without) and, when zoo is not NULL, the model zoo.
 * -1 after one stderr line. */
static int load_data(hwdb *db, hwdb *plain, model_zoo *zoo, const char *calibration)
{
    char root[4096], path[4200], err[1024];
    find_data_root(root, sizeof root);
    snprintf(path, sizeof path, "%s/hwdb", root);
    if (hwdb_load(path, db, err, sizeof err) != 0 || (plain && hwdb_load(path, plain, err, sizeof err) != 0) ||
        (calibration && hwdb_apply_overlay(db, calibration, err, sizeof err) != 0)) {
        fprintf(stderr, "sextant-gpu: %s\n", err);
        return -1;
    }
    snprintf(path, sizeof path, "%s/models/zoo.csv", root);
    if (zoo && model_zoo_load(path, zoo, err, sizeof err) != 0) {
        fprintf(stderr, "sextant-gpu: %s\n", err);
        return -1;
    }
    return 0;
}

/* One stderr line when --gpu names a row that does not look like the GPU at hand: the row's datasheet
 * figures stay in every prediction, and calibrate writes its efficiencies as fractions of them (an
 * H100 calibrated as h200 predicts itself well under that row and nothing else). */
static void warn_if_other_gpu(const hw_gpu *g)
{
    struct cudaDeviceProp prop;
    int device;
    if (cudaGetDevice(&device) != cudaSuccess || cudaGetDeviceProperties(&prop, device) != cudaSuccess) return;
    char why[256];
    if (!hwdb_gpu_matches_device(g, prop.name, (double)prop.totalGlobalMem, why, sizeof why))
        fprintf(stderr, "sextant-gpu: warning: --gpu %s does not look like this GPU, %s (%s); predictions and overlays "
                        "use that row's datasheet figures\n", g->name, prop.name, why);
}

static void device_line(char *out, size_t len)
{
    struct cudaDeviceProp prop;
    int driver = 0, runtime = 0;
    CUDA_CHECK(cudaGetDeviceProperties(&prop, 0));
    CUDA_CHECK(cudaDriverGetVersion(&driver));
    CUDA_CHECK(cudaRuntimeGetVersion(&runtime));
    snprintf(out, len, "%.100s, %d SMs, %.1f GiB, CUDA driver %d.%d, runtime %d.%d", prop.name, prop.multiProcessorCount,
             (double)prop.totalGlobalMem / 1073741824.0, driver / 1000, (driver % 1000) / 10, runtime / 1000,
             (runtime % 1000) / 10);
}

static void run_copy(const void *ctx)
{
    size_t bytes = *(const size_t *)ctx;
    CUDA_CHECK(cudaMemcpyAsync(scratch[1], scratch[0], bytes, cudaMemcpyDeviceToDevice, stream));
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

/* The zoo models whose linear layers calibrate times by default: the ones the
 * one-GPU validation reports train. */
#define CALIBRATE_GEMM_MODELS "gpt2,gpt2-medium,llama3.2-1b"
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
        layout_t l = {0};
        l.gpus = l.tp = l.pp = l.dp = l.vpp = l.mbs = l.gbs = l.gpus_per_node = 1;
        l.seq = 1024;
        l.attention = ATTENTION_UNFUSED;
        l.precision = PREC_BF16;
        static stage_ops ops;
        if (build_stage_ops(model, &l, 0, &ops) != 0) {
            fprintf(stderr, "sextant-gpu: --gemm-models: no op list for '%s'\n", name);
            return -1;
        }
        for (int i = 0; i < ops.nops; i++) {
            const op_t *op = &ops.ops[i];
            if (op->kind != OP_GEMM || op->pass != PASS_FWD || op->batch > 1) continue;
            int in = (int)op->k, out = (int)op->n, bias = model->bias && strcmp(op->name, "lm_head") != 0;
            for (int64_t tokens = GEMM_TOKENS_MIN; tokens <= GEMM_TOKENS_MAX && rows < ROWS; tokens *= 2) {
                size_t need_bytes = (size_t)tokens * (size_t)(out > in ? out : in) * 2 * 2;
                if (need_bytes > scratch_bytes) break; /* the logits of a large vocabulary at many tokens */
                double *t = row[rows].t, *mhz = row[rows].mhz;
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


/* ---- the power model (docs/model.md, "Clock under the power cap") -------- */

/* One workload held for a second: its work per call and what NVML saw. */
typedef struct {
    char what[48];
    double duty;                                 /* the workload's share of the time; idle spin between */
    double gemm_flops, attention_flops, bytes;   /* per call */
    double gemm_rate, attention_rate, byte_rate; /* per second over the window */
    double watts, mhz, celsius, seconds;
    double speed;                                /* the rate of the work against its rate on a cool GPU (the top
                                                    clock): the clock fraction the power model sees */
    int energy_updates;
    int is_static;                               /* the spinning thread: static power, not work */
} power_sample;

typedef struct {
    int ok;
    double cap_w, top_mhz;
    /* static power: cold_w at cold_c (the GPU idle but for one thread), rising by w_per_c
     * per degree as leakage does; static_w at capped_c, the temperature the GPU holds at its cap */
    double cold_w, cold_c, w_per_c, capped_c, static_w;
    double e_gemm, e_attention, e_byte; /* J per FLOP, per byte at the top clock */
    double exponent, rms_w;
} power_model;

static double static_at(const power_model *pm, double celsius)
{
    return pm->cold_w + (celsius > 0 ? pm->w_per_c * (celsius - pm->cold_c) : 0.0);
}

/* a call of the workload, then the idle spin that sets its duty: one thread
 * of one SM counting cycles (the clock probe), the rest of the GPU idle */
typedef struct {
    launch_fn fn;
    const void *ctx;
    int gap_us;
} duty_ctx;
static float *gap_slot;

static void run_duty(const void *ctx)
{
    const duty_ctx *d = ctx;
    if (d->fn) d->fn(d->ctx);
    if (d->gap_us > 0) CUDA_CHECK(sx_sm_clock_probe(gap_slot, d->gap_us, stream));
}

/* Seconds of wall time since t0 (CLOCK_MONOTONIC). */
static double wall_since_s(const struct timespec *t0)
{
    struct timespec t;
    clock_gettime(CLOCK_MONOTONIC, &t);
    return (double)(t.tv_sec - t0->tv_sec) + 1e-9 * (double)(t.tv_nsec - t0->tv_nsec);
}

/* Keeps the GPU busy with chunks of calls for `seconds` of wall time, two
 * chunks in flight, and returns the calls made; *elapsed the wall time until
 * the last finished. */
static long run_for(const duty_ctx *d, int per_chunk, double seconds, double *elapsed)
{
    cudaEvent_t done[2];
    CUDA_CHECK(cudaEventCreateWithFlags(&done[0], cudaEventDisableTiming));
    CUDA_CHECK(cudaEventCreateWithFlags(&done[1], cudaEventDisableTiming));
    struct timespec t0;
    clock_gettime(CLOCK_MONOTONIC, &t0);
    long calls = 0;
    for (int chunk = 0;; chunk++) {
        for (int i = 0; i < per_chunk; i++) run_duty(d);
        calls += per_chunk;
        CUDA_CHECK(cudaEventRecord(done[chunk & 1], stream));
        if (chunk > 0) CUDA_CHECK(cudaEventSynchronize(done[(chunk - 1) & 1]));
        if (wall_since_s(&t0) >= seconds) break;
    }
    CUDA_CHECK(cudaStreamSynchronize(stream));
    *elapsed = wall_since_s(&t0);
    CUDA_CHECK(cudaEventDestroy(done[0]));
    CUDA_CHECK(cudaEventDestroy(done[1]));
    return calls;
}

/* One call's time on a cool GPU, at the top clock: after 300 ms idle, the mean over a
 * burst of about 2 ms (far shorter than the power cap takes to answer: hundreds of ms
 * on an H100, nvidia-smi at 200 ms), the faster of two bursts. */
static double cool_call_s(launch_fn fn, const void *ctx, double call_s)
{
    int calls = call_s > 0 ? (int)(2e-3 / call_s) : 1;
    calls = calls < 3 ? 3 : calls > 200 ? 200 : calls;
    cudaEvent_t start, stop;
    CUDA_CHECK(cudaEventCreate(&start));
    CUDA_CHECK(cudaEventCreate(&stop));
    double best = 0.0;
    for (int burst = 0; burst < 2; burst++) {
        idle_ms(300);
        CUDA_CHECK(cudaEventRecord(start, stream));
        for (int i = 0; i < calls; i++) fn(ctx);
        CUDA_CHECK(cudaEventRecord(stop, stream));
        CUDA_CHECK(cudaEventSynchronize(stop));
        float ms;
        CUDA_CHECK(cudaEventElapsedTime(&ms, start, stop));
        double per_call = ms * 1e-3 / calls;
        if (best == 0.0 || per_call < best) best = per_call;
    }
    CUDA_CHECK(cudaEventDestroy(start));
    CUDA_CHECK(cudaEventDestroy(stop));
    return best;
}

/* A workload at `duty` (call_s: one call's time, timed before): POWER_SETTLE_S
 * for the power cap and NVML's power reading to settle, then POWER_MEASURE_S
 * measured.  NVML's reading trails the work by about a second (nvidia-smi's
 * power.draw ramps over 1 s after a step in load, H100, driver 580), so both
 * are long against that.  -1 when NVML fails. */
#define POWER_SETTLE_S 1.5
#define POWER_MEASURE_S 2.0
/* a sample drawing less than this share of the cap runs at the top clock */
#define POWER_UNCAPPED 0.95
#define POWER_EXPONENT_DEFAULT 2.0
/* seconds of the square GEMM before the hot static sample; degrees apart below which the two static
 * samples give no slope */
#define POWER_HEAT_S 5.0
#define POWER_STATIC_MIN_DC 3.0
static int power_sample_run_for(launch_fn fn, const void *ctx, double call_s, double duty, double settle_s,
                                double measure_s, power_sample *ps)
{
    duty_ctx d = {fn, ctx, 0};
    if (duty < 1.0) {
        double gap_us = call_s * (1.0 - duty) / duty * 1e6;
        d.gap_us = gap_us < 1 ? 1 : gap_us > 100000 ? 100000 : (int)gap_us;
    }
    double period = call_s + d.gap_us * 1e-6;
    int per_chunk = period > 0.02 ? 1 : (int)(0.02 / period);
    /* below full duty the work runs at the top clock; at full duty, its rate against a cool burst's */
    double cool_s = duty < 1.0 || (ps->gemm_flops <= 0 && ps->attention_flops <= 0) ? 0.0 : cool_call_s(fn, ctx, call_s);
    double elapsed;
    run_for(&d, per_chunk, settle_s, &elapsed);
    power_window *w = power_window_begin();
    long calls = run_for(&d, per_chunk, measure_s, &elapsed);
    if (power_window_end(w, &ps->watts, &ps->mhz, &ps->celsius, &ps->seconds, &ps->energy_updates) != 0) return -1;
    ps->duty = duty;
    ps->gemm_rate = (double)calls * ps->gemm_flops / elapsed;
    ps->attention_rate = (double)calls * ps->attention_flops / elapsed;
    ps->byte_rate = (double)calls * ps->bytes / elapsed;
    ps->speed = cool_s > 0 ? fmin(1.0, cool_s * (double)calls / elapsed) : 1.0;
    return 0;
}

static int power_sample_run(launch_fn fn, const void *ctx, double call_s, double duty, power_sample *ps)
{
    return power_sample_run_for(fn, ctx, call_s, duty, POWER_SETTLE_S, POWER_MEASURE_S, ps);
}

/* a GEMM, then `ln_calls` LayerNorms: a step's alternation of tensor-core and memory-bound kernels */
typedef struct {
    gemm_shape gemm;
    membound_ctx ln;
    int ln_calls;
} mix_ctx;

static void run_mix(const void *ctx)
{
    const mix_ctx *x = ctx;
    run_gemm(&x->gemm);
    for (int i = 0; i < x->ln_calls; i++) run_membound(&x->ln);
}

static void run_spin(const void *ctx)
{
    (void)ctx;
    CUDA_CHECK(sx_sm_clock_probe(gap_slot, 1000, stream));
}

/* one burst's time from its event pair, kept when it ran inside the power window */
static void read_burst(cudaEvent_t pair[2], long cycle, long measured_from, double *burst_s, int *nburst)
{
    CUDA_CHECK(cudaEventSynchronize(pair[1]));
    float ms;
    CUDA_CHECK(cudaEventElapsedTime(&ms, pair[0], pair[1]));
    if (measured_from >= 0 && cycle >= measured_from && *nburst < 100000) burst_s[(*nburst)++] = ms * 1e-3;
}

/* The power limiter's window: the square GEMM in bursts at half duty, the
 * period from 2 to 512 ms.  The bursts alone would draw over the cap; their
 * average does not.  Bursts shorter than the window the limiter averages
 * over run at the top clock (speed 1), longer ones are held down: the period
 * where the speed falls bounds that window.  A diagnostic for
 * docs/validation/2026-11-25-h100-power; it feeds no overlay key. */
static void power_window_sweep(gemm_shape *gs, double call_cool_s, double call_s)
{
    printf("\npower limiter's window: GEMM %lldx%lldx%lld in bursts at 50%% duty (one thread spinning between)\n"
           "%10s %9s %7s %8s %7s %12s\n", (long long)gs->m, (long long)gs->n, (long long)gs->k, "period ms", "burst ms", "W",
           "NVML MHz", "C", "burst speed");
    static const double periods_ms[] = {2, 8, 32, 128, 512};
    enum { RING = 64 };
    cudaEvent_t ev[RING][2];
    for (int i = 0; i < RING; i++)
        for (int j = 0; j < 2; j++) CUDA_CHECK(cudaEventCreate(&ev[i][j]));
    for (size_t p = 0; p < sizeof periods_ms / sizeof periods_ms[0]; p++) {
        int burst = (int)(periods_ms[p] * 0.5e-3 / call_s + 0.5);
        if (burst < 1) burst = 1;
        double gap_s = burst * call_s;
        double *burst_s = malloc(sizeof(double) * 100000);
        if (!burst_s) { fprintf(stderr, "sextant-gpu: out of host memory\n"); exit(1); }
        int nburst = 0;
        power_window *w = NULL;
        long measured_from = -1, cycles = 0; /* the first burst inside the power window */
        struct timespec t0;
        clock_gettime(CLOCK_MONOTONIC, &t0);
        for (;; cycles++) {
            int slot = (int)(cycles % RING);
            if (cycles >= RING) /* the pair from RING bursts ago: done long since, or wait for it */
                read_burst(ev[slot], cycles - RING, measured_from, burst_s, &nburst);
            CUDA_CHECK(cudaEventRecord(ev[slot][0], stream));
            for (int i = 0; i < burst; i++) run_gemm(gs);
            CUDA_CHECK(cudaEventRecord(ev[slot][1], stream));
            for (double left = gap_s; left > 0; left -= 0.1)
                CUDA_CHECK(sx_sm_clock_probe(gap_slot, left > 0.1 ? 100000 : (int)(left * 1e6) + 1, stream));
            double elapsed = wall_since_s(&t0);
            if (!w && elapsed >= POWER_SETTLE_S) {
                w = power_window_begin();
                measured_from = cycles + 1;
            }
            if (elapsed >= POWER_SETTLE_S + POWER_MEASURE_S + periods_ms[p] * 1e-3) break;
        }
        CUDA_CHECK(cudaStreamSynchronize(stream));
        for (long c = cycles + 1 > RING ? cycles + 1 - RING : 0; c <= cycles; c++)
            read_burst(ev[c % RING], c, measured_from, burst_s, &nburst);
        double watts = 0, mhz = 0, celsius = 0, seconds = 0;
        int updates = 0;
        if (power_window_end(w, &watts, &mhz, &celsius, &seconds, &updates) != 0) watts = 0;
        sort_ascending(burst_s, (size_t)nburst);
        double median = nburst ? burst_s[nburst / 2] : 0.0;
        printf("%10.0f %9.2f %7.1f %8.0f %7.1f %12.3f\n", periods_ms[p], burst * call_s * 1e3, watts, mhz, celsius,
               median > 0 ? call_cool_s * burst / median : 0.0);
        free(burst_s);
    }
    for (int i = 0; i < RING; i++)
        for (int j = 0; j < 2; j++) CUDA_CHECK(cudaEventDestroy(ev[i][j]));
}

/* The switching energies at the top clock, by least squares (GSL) over the
 * work samples below the cap (at the top clock): P - static(T) = e_gemm
 * F_gemm/s + e_attention F_attention/s + e_byte bytes/s, static(T) at the
 * sample's temperature.  The residual's rms in pm->rms_w.  -1 when fewer
 * samples than unknowns. */
static int power_fit_energies(const power_sample *ps, int n, power_model *pm)
{
    int rows = 0;
    for (int i = 0; i < n; i++) rows += ps[i].watts < POWER_UNCAPPED * pm->cap_w && !ps[i].is_static;
    if (rows < 3) return -1;
    gsl_matrix *X = gsl_matrix_alloc((size_t)rows, 3);
    gsl_vector *y = gsl_vector_alloc((size_t)rows), *coef = gsl_vector_alloc(3);
    gsl_matrix *cov = gsl_matrix_alloc(3, 3);
    gsl_multifit_linear_workspace *ws = gsl_multifit_linear_alloc((size_t)rows, 3);
    if (!X || !y || !coef || !cov || !ws) { fprintf(stderr, "sextant-gpu: out of host memory\n"); exit(1); }
    for (int i = 0, r = 0; i < n; i++) {
        if (ps[i].watts >= POWER_UNCAPPED * pm->cap_w || ps[i].is_static) continue;
        gsl_matrix_set(X, (size_t)r, 0, ps[i].gemm_rate * 1e-12);      /* TFLOP/s and TB/s: coefficients near 1 */
        gsl_matrix_set(X, (size_t)r, 1, ps[i].attention_rate * 1e-12);
        gsl_matrix_set(X, (size_t)r, 2, ps[i].byte_rate * 1e-12);
        gsl_vector_set(y, (size_t)r, ps[i].watts - static_at(pm, ps[i].celsius));
        r++;
    }
    double chisq = 0.0;
    gsl_multifit_linear(X, y, coef, cov, &chisq, ws);
    pm->e_gemm = gsl_vector_get(coef, 0) * 1e-12;
    pm->e_attention = gsl_vector_get(coef, 1) * 1e-12;
    pm->e_byte = gsl_vector_get(coef, 2) * 1e-12;
    pm->rms_w = sqrt(chisq / rows);
    gsl_multifit_linear_free(ws);
    gsl_matrix_free(cov);
    gsl_vector_free(coef);
    gsl_vector_free(y);
    gsl_matrix_free(X);
    return 0;
}

static double sample_dynamic_w(const power_sample *p, const power_model *pm)
{
    return pm->e_gemm * p->gemm_rate + pm->e_attention * p->attention_rate + pm->e_byte * p->byte_rate;
}

/* One sample of a workload whose work per call is given (F and bytes). */
static int power_sample_of(power_sample *ps, const char *what, launch_fn fn, const void *ctx, double gemm_flops,
                           double attention_flops, double bytes, double duty)
{
    snprintf(ps->what, sizeof ps->what, "%s", what);
    ps->gemm_flops = gemm_flops;
    ps->attention_flops = attention_flops;
    ps->bytes = bytes;
    return power_sample_run(fn, ctx, time_median(fn, ctx, NULL), duty, ps);
}

/* The power model (docs/model.md, "Clock under the power cap"): workloads of
 * known work held for seconds each, on the scratch buffers' random operands
 * (the operands' values move a GEMM's power by a quarter: measured on the buffers
 * the GEMM tables had left, 2026-11-25) -- a spinning thread, the device copy, our
 * memory-bound kernels, GEMMs at full and partial duty, GEMMs between
 * LayerNorms, our fused attention -- with NVML's energy counter.  Then:
 *   static: the spinning thread's power, cold (first) and hot (after 5 s of
 *     GEMMs), as a line in the temperature (leakage), taken at the capped
 *     samples' temperature;
 *   e_gemm, e_attention, e_byte: least squares over the samples that stay
 *     below the cap (they run at the top clock);
 *   exponent: from the samples the cap holds down, each gives
 *     ln((P - static) / dynamic at the top clock) / ln(speed); the median.
 * pm->ok = 0 with the reason on stdout when NVML or the fit fails: the
 * overlay then leaves the power model out. */
static void calibrate_power(size_t copy_bytes, power_model *pm)
{
    memset(pm, 0, sizeof *pm);
    char why[256];
    printf("\npower (per workload: %.1f s to settle, then %.1f s measured; power from NVML's energy counter between its "
           "first and last step in that time; speed: the work's rate against 2 ms bursts on a cool GPU; NVML's mean SM "
           "clock for reference)\n", POWER_SETTLE_S, POWER_MEASURE_S);
    if (power_open(why, sizeof why) != 0) {
        printf("  not measured: %s; the overlay leaves the power model out\n", why);
        return;
    }
    pm->cap_w = power_limit_w();
    pm->top_mhz = power_max_sm_mhz();
    if (pm->cap_w <= 0 || pm->top_mhz <= 0) {
        printf("  not measured: NVML gives no power limit or maximum SM clock\n");
        return;
    }
    CUDA_CHECK(cudaMalloc((void **)&gap_slot, sizeof(float)));
    enum { SAMPLES_MAX = 24 };
    power_sample ps[SAMPLES_MAX];
    int n = 0, failed = 0;
    memset(ps, 0, sizeof ps);
    char what[48];

    failed |= power_sample_run(run_spin, NULL, 1e-3, 1.0, &ps[n]);
    ps[n].is_static = 1;
    snprintf(ps[n++].what, sizeof ps[0].what, "one thread spinning");
    snprintf(what, sizeof what, "device copy %zu MiB", copy_bytes >> 20);
    failed |= power_sample_of(&ps[n++], what, run_copy, &copy_bytes, 0, 0, 2.0 * (double)copy_bytes, 1.0);
    const double ln_bytes = 2.0 * 32768 * 768 * 2 + 2.0 * 768 * 2;
    membound_ctx ln = {"attn_norm", NULL, 32768, 768, 3072, 50304, 1024, 32, 12, 0, 0};
    failed |= power_sample_of(&ps[n++], "layernorm fwd 32768 x 768", run_membound, &ln, 0, 0, ln_bytes, 1.0);
    membound_ctx adamw = {"optimizer", NULL, 0, 0, 0, 0, 0, 0, 0, 500000000, 0};
    /* reads grad, p, m, v; writes p, m, v and the bf16 weights */
    failed |= power_sample_of(&ps[n++], "AdamW over 500M parameters", run_membound, &adamw, 0, 0, 500e6 * (2.0 + 12 + 12 + 2),
                              1.0);

    /* m, n, k, duty %: a square GEMM at full and partial duty, the LLaMA-style 1.24B's largest at 8192 tokens */
    static const int64_t gemms[][4] = {{8192, 8192, 8192, 100}, {8192, 8192, 8192, 60}, {8192, 8192, 8192, 30},
                                       {8192, 16384, 2048, 100}, {8192, 2048, 8192, 100}, {8192, 128256, 2048, 100}};
    for (size_t i = 0; i < sizeof gemms / sizeof gemms[0]; i++) {
        int64_t m = gemms[i][0], nn = gemms[i][1], k = gemms[i][2];
        gemm_shape gs = {m, nn, k, 1, (long long)(m * k), (long long)(k * nn), (long long)(m * nn)};
        need(2.0 * (double)(m * nn > m * k ? (m * nn > k * nn ? m * nn : k * nn) : (m * k > k * nn ? m * k : k * nn)), "a GEMM");
        snprintf(what, sizeof what, "GEMM %lldx%lldx%lld, %lld%% of the time", (long long)m, (long long)nn, (long long)k,
                 (long long)gemms[i][3]);
        failed |= power_sample_of(&ps[n++], what, run_gemm, &gs, 2.0 * (double)m * (double)nn * (double)k, 0,
                                  2.0 * ((double)m * k + (double)k * nn + (double)m * nn), gemms[i][3] / 100.0);
    }
    /* GEMMs between memory-bound kernels, as in a step */
    static const int64_t mixes[][4] = {{8192, 2048, 8192, 3}, {8192, 3072, 768, 1}}; /* m, n, k, LayerNorms per GEMM */
    for (size_t i = 0; i < sizeof mixes / sizeof mixes[0]; i++) {
        int64_t m = mixes[i][0], nn = mixes[i][1], k = mixes[i][2];
        mix_ctx mx = {{m, nn, k, 1, (long long)(m * k), (long long)(k * nn), (long long)(m * nn)}, ln, (int)mixes[i][3]};
        snprintf(what, sizeof what, "GEMM %lldx%lldx%lld + %d layernorm", (long long)m, (long long)nn, (long long)k,
                 mx.ln_calls);
        failed |= power_sample_of(&ps[n++], what, run_mix, &mx, 2.0 * (double)m * (double)nn * (double)k, 0,
                                  mx.ln_calls * ln_bytes + 2.0 * ((double)m * k + (double)k * nn + (double)m * nn), 1.0);
    }
    /* the fused attention of the LLaMA-style 1.24B at micro-batch 4, forward also at partial duty (alone it
     * comes near the cap) */
    flash_ctx f = {.B = 4, .T = 2048, .H = 32, .KV = 8, .D = 64};
    flash_prepare(&f);
    static const int passes[][2] = {{0, 100}, {0, 60}, {1, 100}}; /* backward, duty % */
    for (int i = 0; i < 3; i++) {
        f.backward = passes[i][0];
        flash_error = cudaSuccess;
        double qkv = 2.0 * f.B * (double)f.T * (f.H + 2 * f.KV) * f.D, out = 2.0 * f.B * (double)f.T * f.H * f.D;
        snprintf(what, sizeof what, "attention %s B4 T2048 H32/8 D64, %d%%", f.backward ? "bwd" : "fwd", passes[i][1]);
        failed |= power_sample_of(&ps[n++], what, run_flash, &f, 0, flash_attention_flops(f.B, f.H, f.T, f.D, 1, f.backward),
                                  f.backward ? 2.0 * qkv + 2.0 * out : qkv + out, passes[i][1] / 100.0);
        if (flash_error != cudaSuccess) failed = 1;
    }
    gemm_shape square = {8192, 8192, 8192, 1, 8192LL * 8192, 8192LL * 8192, 8192LL * 8192};
    double square_s = time_median(run_gemm, &square, NULL);
    power_window_sweep(&square, cool_call_s(run_gemm, &square, square_s), square_s);
    /* static power hot: the spinning thread again, right after POWER_HEAT_S of the square GEMM has
     * heated the chip to where it holds at its cap; measured briefly, before it cools */
    {
        duty_ctx hd = {run_gemm, &square, 0};
        double heated_s;
        run_for(&hd, 1, POWER_HEAT_S, &heated_s);
        failed |= power_sample_run_for(run_spin, NULL, 1e-3, 1.0, 0.3, 1.0, &ps[n]);
        ps[n].is_static = 1;
        snprintf(ps[n++].what, sizeof ps[0].what, "one thread spinning, hot");
    }
    flash_release(&f);
    CUDA_CHECK(cudaFree(gap_slot));
    gap_slot = NULL;
    if (failed) {
        printf("  not measured: an NVML reading or a kernel failed; the overlay leaves the power model out\n");
        return;
    }

    /* static power as leakage: linear in the temperature between the cold and the hot spin */
    const power_sample *cold = &ps[0], *hot = &ps[n - 1];
    pm->cold_w = cold->watts;
    pm->cold_c = cold->celsius;
    pm->w_per_c = hot->celsius - cold->celsius >= POWER_STATIC_MIN_DC && hot->watts > cold->watts
                      ? (hot->watts - cold->watts) / (hot->celsius - cold->celsius)
                      : 0.0;
    double capped_c = 0.0;
    int capped_samples = 0;
    for (int i = 0; i < n; i++)
        if (!ps[i].is_static && ps[i].watts >= POWER_UNCAPPED * pm->cap_w && ps[i].celsius > 0) {
            capped_c += ps[i].celsius;
            capped_samples++;
        }
    pm->capped_c = capped_samples ? capped_c / capped_samples : hot->celsius;
    pm->static_w = static_at(pm, pm->capped_c);
    if (power_fit_energies(ps, n, pm) != 0) {
        printf("  fewer than three workloads stayed below the cap; the overlay leaves the power model out\n");
        return;
    }
    double exponents[SAMPLES_MAX];
    int capped = 0;
    for (int i = 0; i < n; i++) {
        double dynamic = sample_dynamic_w(&ps[i], pm), held = ps[i].watts - static_at(pm, ps[i].celsius);
        if (!ps[i].is_static && ps[i].watts >= POWER_UNCAPPED * pm->cap_w && ps[i].speed < 0.99 && dynamic > held &&
            held > 0)
            exponents[capped++] = log(held / dynamic) / log(ps[i].speed);
    }
    sort_ascending(exponents, (size_t)capped);
    pm->exponent = capped ? exponents[capped / 2] : POWER_EXPONENT_DEFAULT;

    printf("%-40s %5s %9s %9s %7s %6s %8s %5s %7s %8s %4s\n", "workload", "duty", "GEMM TF/s", "attn TF/s", "GB/s", "speed",
           "NVML MHz", "C", "W", "model W", "cap");
    for (int i = 0; i < n; i++) {
        double model = static_at(pm, ps[i].celsius) + sample_dynamic_w(&ps[i], pm) * pow(ps[i].speed, pm->exponent);
        printf("%-40s %5.2f %9.1f %9.1f %7.0f %6.3f %8.0f %5.1f %7.1f %8.1f %4s\n", ps[i].what, ps[i].duty,
               ps[i].gemm_rate / 1e12, ps[i].attention_rate / 1e12, ps[i].byte_rate / 1e9, ps[i].speed, ps[i].mhz,
               ps[i].celsius, ps[i].watts, model, ps[i].watts >= POWER_UNCAPPED * pm->cap_w ? "yes" : "");
    }
    printf("static: %.1f W at %.1f C, %.1f W at %.1f C after %.0f s of GEMMs: %+.2f W per C%s; at the %.1f C the capped "
           "samples held: %.1f W\n", cold->watts, cold->celsius, hot->watts, hot->celsius, POWER_HEAT_S, pm->w_per_c,
           pm->w_per_c > 0 ? "" : " (taken as 0: less than a few degrees apart, or not rising)", pm->capped_c, pm->static_w);
    printf("model: P = %.1f W + (%.3f pJ/GEMM FLOP + %.3f pJ/attention FLOP + %.1f pJ/byte) x^%.2f per second of work; "
           "energies fit on the %s samples below %.0f%% of the %.0f W cap (rms %.1f W); exponent: median of %d capped "
           "samples (%.2f-%.2f)%s\n", pm->static_w, pm->e_gemm * 1e12, pm->e_attention * 1e12, pm->e_byte * 1e12,
           pm->exponent, "workload", 100 * POWER_UNCAPPED, pm->cap_w, pm->rms_w, capped,
           capped ? exponents[0] : 0.0, capped ? exponents[capped - 1] : 0.0,
           capped ? "" : " -- none, so 2 (energy per operation as the voltage squared, the voltage as the clock)");
    pm->ok = pm->static_w > 0 && pm->e_gemm > 0 && pm->e_attention > 0 && pm->e_byte >= 0 && pm->static_w < pm->cap_w &&
             pm->exponent >= 0 && pm->exponent <= 8;
    if (!pm->ok) printf("  the fit is implausible (a term not positive or static power above the cap); the overlay leaves it out\n");
}

static int cmd_calibrate(int argc, char **argv, const hwdb *db, const model_zoo *zoo, int *fit_steps)
{
    *fit_steps = 0;
    if (attention_heated()) (void)heat_warm_ms(); /* a bad value stops here, not after the GEMMs */
    for (int i = 2; i < argc; i++) {
        if (!strcmp(argv[i], "--clock-scaling")) { clock_scaling = 1; continue; }
        if (!strcmp(argv[i], "--power-model")) { power_model_asked = 1; continue; }
        if (!strcmp(argv[i], "--warm")) { power_model_asked = 0; continue; }
        if (!strcmp(argv[i], "--no-step-fit")) { step_fit_asked = 0; continue; }
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
    double membound_overhead_s = membound_overhead(ln_bw);
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
    double fp8_relative = 0.0;
    int fp8_ok = fp8_calibrate(g, gt.shape, gt.n, scratch, scratch_bytes, &fp8_relative) == 0 && fp8_relative > 0.05 &&
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
        outfile out;
        char err[PATH_MAX + 256];
        if (outfile_open(&out, out_path, err, sizeof err) != 0) { fprintf(stderr, "sextant-gpu: --out: %s\n", err); return 2; }
        FILE *f = out.f;
        fprintf(f, "gpu,key,value,source\n");
        fprintf(f, "%s,gemm_efficiency,%.4f,\"%s\"\n", g->name, e_max, source);
        fprintf(f, "%s,gemm_half_gflop,%.4f,\"%s\"\n", g->name, half_gflop, source);
        fprintf(f, "%s,membound_efficiency,%.4f,\"%s (device copy)\"\n", g->name, copy_bw / g->hbm_bytes_per_s, source);
        fprintf(f, "%s,launch_overhead_us,%.3f,\"%s\"\n", g->name, launch_s * 1e6, source);
        fprintf(f, "%s,context_memory_gib,%.4f,\"%s\"\n", g->name, context_bytes / 1073741824.0, source);
        fprintf(f, "%s,membound_overhead_us,%.3f,\"%s (layernorm forward, 256 to 8192 rows of 768, GSL fit)\"\n", g->name,
                membound_overhead_s * 1e6, source);
        if (pm.ok) {
            fprintf(f, "%s,power_cap_w,%.1f,\"%s (NVML enforced power limit)\"\n", g->name, pm.cap_w, source);
            fprintf(f, "%s,clock_max_mhz,%.0f,\"%s (NVML maximum SM clock)\"\n", g->name, pm.top_mhz, source);
            fprintf(f, "%s,power_static_w,%.2f,\"%s (power model fit, rms %.1f W)\"\n", g->name, pm.static_w, source,
                    pm.rms_w);
            fprintf(f, "%s,energy_gemm_pj_per_flop,%.5f,\"%s (power model fit)\"\n", g->name, pm.e_gemm * 1e12, source);
            fprintf(f, "%s,energy_attention_pj_per_flop,%.5f,\"%s (power model fit)\"\n", g->name, pm.e_attention * 1e12,
                    source);
            fprintf(f, "%s,energy_pj_per_byte,%.3f,\"%s (power model fit)\"\n", g->name, pm.e_byte * 1e12, source);
            fprintf(f, "%s,clock_energy_exponent,%.2f,\"%s (power model fit)\"\n", g->name, pm.exponent, source);
        }
        if (fp8_ok)
            fprintf(f, "%s,fp8_gemm_relative_efficiency,%.4f,\"%s (E4M3 per-tensor scaled against bf16, cuBLASLt, the GEMMs "
                       "of 10 GFLOP or more)\"\n", g->name, fp8_relative, source);
        for (int i = 0; i < gt.n; i++)
            fprintf(f, "%s,gemm_us:%lldx%lldx%lld,%.3f,\"%s (%s, as the training step runs it)\"\n", g->name,
                    (long long)gt.shape[i].m, (long long)gt.shape[i].n, (long long)gt.shape[i].k, gt.shape[i].seconds * 1e6,
                    source, gt.what[i]);

        if (attention_ok) {
            fprintf(f, "%s,attention_fwd_efficiency,%.4f,\"%s (sx_flash_attention_forward, causal, 4 shapes)\"\n", g->name,
                    attention_fwd, source);
            fprintf(f, "%s,attention_bwd_efficiency,%.4f,\"%s (sx_flash_attention_backward, causal, 4 shapes)\"\n", g->name,
                    attention_bwd, source);
            for (int pass = 0; pass < 2; pass++)
                for (int i = 0; i < at.n[pass]; i++)
                    fprintf(f, "%s,flash_%s_us:%lldx%lldx%lldx%lld,%.3f,\"%s (%s, our fused attention, causal)\"\n",
                            g->name, pass ? "bwd" : "fwd", (long long)at.shape[pass][i].m, (long long)at.shape[pass][i].n,
                            (long long)at.shape[pass][i].k, (long long)at.shape[pass][i].kv, at.shape[pass][i].seconds * 1e6,
                            source, at.what[i]);
        }
        for (int pass = 0; pass < 2; pass++)
            for (int i = 0; i < at.un[pass]; i++)
                fprintf(f, "%s,unfused_%s_us:%lldx%lldx%lldx%lld,%.3f,\"%s (%s, unfused attention: cuBLAS batched GEMMs "
                           "and our causal softmax, as the training step runs them)\"\n",
                        g->name, pass ? "bwd" : "fwd", (long long)at.unfused[pass][i].m, (long long)at.unfused[pass][i].n,
                        (long long)at.unfused[pass][i].k, (long long)at.unfused[pass][i].kv,
                        at.unfused[pass][i].seconds * 1e6, source, at.unfused_what[i]);
        if (outfile_commit(&out, err, sizeof err) != 0) { fprintf(stderr, "sextant-gpu: --out: %s\n", err); return 2; }
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

static int cmd_ops(int argc, char **argv, const hwdb *db, const model_zoo *zoo)
{
    if (argc < 3 || argv[2][0] == '-') { fprintf(stderr, "sextant-gpu: ops needs a MODEL\n"); return 2; }
    const model_t *zoo_model = model_zoo_find(zoo, argv[2]);
    if (!zoo_model) { fprintf(stderr, "sextant-gpu: unknown model '%s'\n", argv[2]); return 2; }
    /* the kernels here run without dropout: estimate the model as executed */
    static model_t executed;
    executed = *zoo_model;
    executed.dropout = 0;
    const model_t *m = &executed;
    const hw_gpu *g = hwdb_find_gpu(db, arg_value(argc, argv, "--gpu", "h100-sxm"));
    if (!g) { fprintf(stderr, "sextant-gpu: --gpu: unknown GPU\n"); return 2; }
    const hw_node *node = hwdb_find_node(db, g->node);
    const char *csv_path = arg_value(argc, argv, "--csv", NULL);
    const char *calibration = arg_value(argc, argv, "--calibration", NULL);
    layout_t l = {0};
    l.gpus = l.tp = l.pp = l.dp = l.vpp = 1;
    l.mbs = atoll(arg_value(argc, argv, "--mbs", "8"));
    l.seq = atoll(arg_value(argc, argv, "--seq", "1024"));
    l.gbs = l.mbs;
    l.gpus_per_node = node->gpus_per_node;
    l.recompute = RECOMPUTE_NONE;
    l.attention = ATTENTION_UNFUSED;  /* what this validator executes: no fused attention kernel yet */
    l.precision = PREC_BF16;
    if (l.mbs < 1 || l.seq < 1) { fprintf(stderr, "sextant-gpu: --mbs and --seq must be positive\n"); return 2; }
    job_t job = {1e9, 1.0};
    static estimate_t e;
    char err[512];
    if (estimate_layout(m, g, node, &l, &job, &e, err, sizeof err) != 0) { fprintf(stderr, "sextant-gpu: %s\n", err); return 2; }

    const stage_ops *s = &e.first_stage;
    int64_t T = l.mbs * l.seq;
    double biggest = 0;
    for (int i = 0; i < s->nops; i++) {
        const op_t *op = &s->ops[i];
        double sz = 0;
        if (op->kind == OP_GEMM) sz = 2.0 * fmax(fmax((double)op->m * (double)op->k, (double)op->k * (double)op->n), (double)op->m * (double)op->n);
        if (op->kind == OP_ATTENTION) sz = 2.0 * (double)op->batch * (double)op->m * (double)op->n;
        if (sz > biggest) biggest = sz;
    }
    double params = model_params_total(m);
    if (params * 4.0 > biggest) biggest = params * 4.0;
    if ((double)T * (double)(m->ffn_kind == FFN_SWIGLU ? 2 : 1) * (double)m->ffn * 2.0 * 2.0 > biggest)
        biggest = (double)T * (double)m->ffn * 8.0;
    size_t bytes = (size_t)(biggest * 1.05) + (64u << 20);
    scratch_init(bytes);
    fill_token_ids(T, m->vocab);
    kernel_workspace_bytes = sx_embedding_backward_workspace_bytes((int)T, (int)m->hidden, (int)m->vocab);
    if (kernel_workspace_bytes < (32u << 20)) kernel_workspace_bytes = 32u << 20;
    CUDA_CHECK(cudaMalloc(&kernel_workspace, kernel_workspace_bytes));

    char device[256];
    device_line(device, sizeof device);
    printf("# sextant-gpu ops %s on %s: mbs %lld, seq %lld, unfused attention, bf16, %s\n", m->name, device,
           (long long)l.mbs, (long long)l.seq, calibration ? calibration : "hwdb defaults (uncalibrated)");
    printf("%-22s %-9s %6s %12s %12s %12s %8s\n", "op", "pass", "count", "predicted ms", "measured ms", "spread", "error");
    FILE *csv = NULL;
    outfile csv_out;
    char csv_err[PATH_MAX + 256];
    if (csv_path) {
        if (outfile_open(&csv_out, csv_path, csv_err, sizeof csv_err) != 0) {
            fprintf(stderr, "sextant-gpu: --csv: %s\n", csv_err);
            return 2;
        }
        csv = csv_out.f;
        fprintf(csv, "model,gpu,gpus,tp,pp,dp,mbs,gbs,seq,recompute,zero,op,predicted_s,measured_s,predicted_bytes,measured_bytes,calibrated\n");
    }
    double predicted_total = 0, measured_total = 0;
    for (int i = 0; i < s->nops; i++) {
        const op_t *op = &s->ops[i];
        if (op->kind == OP_COMM || (op->kind == OP_MEMBOUND && op->bytes <= 0)) continue;
        double spread = 0, t = 0;
        if (op->kind == OP_GEMM) {
            gemm_shape shape = {op->m, op->n, op->k, 1, 0, 0, 0};
            t = time_median(run_gemm, &shape, &spread);
        } else if (op->kind == OP_ATTENTION) {
            attention_ctx a = {op->batch, op->m, op->k, op->pass == PASS_BWD};
            t = time_median(run_attention, &a, &spread);
        } else if (!strcmp(op->name, "cross_entropy_bwd")) {
            t = 0; /* fused into cross_entropy */
        } else {
            membound_ctx c = {op->name, m, T, m->hidden, m->ffn, padded_vocab(m, 1), l.seq, l.mbs, m->heads,
                              (int64_t)params, m->norm == NORM_RMSNORM};
            membound_error = cudaSuccess;
            cudaError_t stale = cudaGetLastError();  /* an earlier call's error must not be charged to this op */
            if (stale != cudaSuccess) fprintf(stderr, "sextant-gpu: before op %s: %s\n", op->name, cudaGetErrorString(stale));
            t = time_median(run_membound, &c, &spread);
            if (membound_error != cudaSuccess) {
                /* a kernel refused its arguments: report the op, keep going */
                fprintf(stderr, "sextant-gpu: op %s: %s\n", op->name, cudaGetErrorString(membound_error));
                (void)cudaGetLastError();
                t = NAN;
            }
        }
        double count = (double)op->count;
        double predicted = op->time_s * count, measured = t * count;
        if (isfinite(measured)) {
            predicted_total += predicted;
            measured_total += measured;
        }
        char name[64];
        snprintf(name, sizeof name, "%s%s", op->name, op->pass == PASS_RECOMPUTE ? "@recompute" : "");
        printf("%-22s %-9s %6lld %12.4f %12.4f %11.1f%% %+7.1f%%\n", name, pass_name(op->pass), (long long)op->count,
               predicted * 1e3, measured * 1e3, 100.0 * spread, measured > 0 ? 100.0 * (predicted / measured - 1.0) : 0.0);
        if (csv)
            fprintf(csv, "%s,%s,1,1,1,1,%lld,%lld,%lld,none,0,%s,%.6e,%.6e,%.0f,,%d\n", m->name, g->name, (long long)l.mbs,
                    (long long)l.gbs, (long long)l.seq, name, predicted, measured, op->bytes * count, calibration != NULL);
    }
    printf("%-22s %-9s %6s %12.4f %12.4f %12s %+7.1f%%\n", "step (sum of ops)", "", "", predicted_total * 1e3,
           measured_total * 1e3, "", 100.0 * (predicted_total / measured_total - 1.0));
    printf("tokens/s from the summed ops: predicted %.0f, measured %.0f\n", (double)T / predicted_total, (double)T / measured_total);
    if (csv) {
        fprintf(csv, "%s,%s,1,1,1,1,%lld,%lld,%lld,none,0,step,%.6e,%.6e,%.0f,,%d\n", m->name, g->name, (long long)l.mbs,
                (long long)l.gbs, (long long)l.seq, predicted_total, measured_total, e.memory.total, calibration != NULL);
        if (outfile_commit(&csv_out, csv_err, sizeof csv_err) != 0) { fprintf(stderr, "sextant-gpu: --csv: %s\n", csv_err); return 2; }
    }
    CUDA_CHECK(cudaFree(token_ids));
    CUDA_CHECK(cudaFree(kernel_workspace));
    scratch_free();
    return 0;
}

/* ---- train: one GPU, or one process per GPU ------------------------------ */

typedef struct {
    const model_t *m;
    const hw_gpu *gpu;
    const hw_node *node;
    train_options o;
} train_job;

static int train_body(launch_ctx *ctx, void *arg)
{
    train_job *job = arg;
    char device[256];
    device_line(device, sizeof device);
    if (!ctx || ctx->rank == 0) {
        printf("# on %s\n", device);
        warn_if_other_gpu(job->gpu);
    }
    return train_run(job->m, job->gpu, job->node, &job->o, ctx);
}

/* ---- validate --plan FILE: a faithful slice of a plan larger than the machine -- */

/* Picks the slice of plan p that `available` GPUs can run: the same TP group,
 * micro-batch, sequence, recomputation, attention and GPU type; as many
 * pipeline stages as fit, each with the plan's layers per stage; data
 * parallelism reduced to what is left, with the plan's micro-batches per
 * step (so each stage sees the same schedule); ZeRO shards follow the smaller
 * DP.  Prints which terms of the plan the slice measures.  Fills the model
 * and the options; -1 after one stderr line. */
static int slice_plan(const plan_file *p, const model_t *full_model, const hw_gpu *gpu, const hw_node *node, int available,
                      model_t *slice_model, train_options *o)
{
    layout_t plan_layout = p->layout;
    const layout_t *l = &plan_layout;
    if (plan_layout.gpus_per_node == 0) plan_layout.gpus_per_node = node->gpus_per_node;
    if (l->recompute == RECOMPUTE_SELECTIVE && l->attention == ATTENTION_UNFUSED) {
        fprintf(stderr, "sextant-gpu: --plan: selective recomputation of unfused attention is not in the training step\n");
        return -1;
    }
    /* the TP and CP groups are kept whole: a CP rank's sequence share is the plan's */
    const int64_t cp = layout_cp(l);
    if (l->tp * cp > available) {
        fprintf(stderr, "sextant-gpu: --plan: its TP x CP group needs %lld GPUs, %d here; nothing started\n",
                (long long)(l->tp * cp), available);
        return -1;
    }
    int64_t per_stage = layers_on_stage(full_model->layers, l->pp, 0);
    int64_t pp = available / (l->tp * cp) < l->pp ? available / (l->tp * cp) : l->pp;
    int64_t dp = available / (l->tp * cp * pp) < l->dp ? available / (l->tp * cp * pp) : l->dp;
    int64_t m = l->gbs / (l->mbs * l->dp);
    *slice_model = *full_model;
    if (pp < l->pp) slice_model->layers = per_stage * pp;
    o->tp = (int)l->tp; o->pp = (int)pp; o->dp = (int)dp;
    o->vpp = pp > 1 ? (int)l->vpp : 1;   /* chunks of the plan's size: layers per stage / vpp */
    o->mbs = (int)l->mbs; o->seq = (int)l->seq; o->gbs = (int)(l->mbs * dp * m);
    o->sp = l->sp; o->zero = l->zero; o->cp = (int)cp;
    o->ep = l->ep > 1 ? (int)l->ep : 1;
    if (dp % o->ep) {
        fprintf(stderr, "sextant-gpu: --plan: its EP group of %d needs %d data-parallel ranks, the slice has %lld; nothing "
                "started\n", o->ep, o->ep, (long long)dp);
        return -1;
    }
    if (o->ep > 1) printf("# --plan: expert parallelism %d: each rank holds %lld of %s's %lld experts\n", o->ep,
                          (long long)(full_model->experts / o->ep), p->model, (long long)full_model->experts);
    /* with flash attention selective recomputation recomputes nothing (docs/model.md, "Activations") */
    o->recompute = l->recompute == RECOMPUTE_FULL ? RECOMPUTE_FULL : RECOMPUTE_NONE;
    /* a plan costed with the first-generation fused kernel (flash1) runs on ours, the one fused kernel here */
    o->flash = attention_is_fused(l->attention);
    job_t job = {1e9, 1.0};
    static estimate_t full, slice;
    char err[256];
    if (estimate_layout(full_model, gpu, node, l, &job, &full, err, sizeof err) != 0) {
        fprintf(stderr, "sextant-gpu: --plan: %s\n", err);
        return -1;
    }
    layout_t sl = *l;
    sl.pp = pp; sl.dp = dp; sl.gpus = l->tp * cp * pp * dp; sl.gbs = o->gbs; sl.vpp = o->vpp;
    if (estimate_layout(slice_model, gpu, node, &sl, &job, &slice, err, sizeof err) != 0) {
        fprintf(stderr, "sextant-gpu: --plan: the slice: %s\n", err);
        return -1;
    }
    /* which of the plan's terms the slice runs as the plan would */
    int same_tp_link = full.tp_link_bytes_per_s == slice.tp_link_bytes_per_s;
    int stages_same = pp == l->pp;
    int dp_same = dp == l->dp && l->tp * cp * l->pp * l->dp <= l->gpus_per_node;
    int optimizer_same = dp == l->dp || l->zero == 0;
    /* the CP group is the plan's; its link is the slice's own when the plan's group is in one node */
    int cp_same = full.cp_comm_s == slice.cp_comm_s;
    double backed = full.compute_s + (same_tp_link ? full.tp_comm_s : 0) + (cp_same ? full.cp_comm_s : 0) + (stages_same ? full.pp_comm_s + full.bubble_s : 0) +
                    (dp_same ? full.dp_comm_s : 0) + (optimizer_same ? full.optimizer_s : 0);
    printf("# --plan: %s on %lld x %s: tp %lld, cp %lld, pp %lld, dp %lld, mbs %lld, gbs %lld, seq %lld, %s, ZeRO %d%s\n", p->model,
           (long long)l->gpus, p->gpu, (long long)l->tp, (long long)cp, (long long)l->pp, (long long)l->dp, (long long)l->mbs,
           (long long)l->gbs, (long long)l->seq, recompute_name(l->recompute), l->zero, l->sp ? ", SP" : "");
    char chunks[96] = "";
    if (o->vpp > 1) snprintf(chunks, sizeof chunks, ", interleaved: %d chunks of %lld layers per stage", o->vpp,
                             (long long)(per_stage / o->vpp));
    else if (l->vpp > 1) snprintf(chunks, sizeof chunks, "; one stage cannot interleave, the plan's vpp %lld is not run",
                                  (long long)l->vpp);
    printf("# slice on %d GPU%s: tp %d, cp %lld, pp %lld (%lld layers per stage, %lld layers in all%s%s), dp %lld, gbs %d (%lld "
           "micro-batches per step as in the plan)\n", (int)(l->tp * cp * pp * dp), l->tp * cp * pp * dp > 1 ? "s" : "", o->tp,
           (long long)cp,
           (long long)pp, (long long)per_stage, (long long)slice_model->layers,
           pp < l->pp && pp == 1 ? "; its one stage also holds the head, which the plan's first stage does not" : "", chunks,
           (long long)dp, o->gbs, (long long)m);
    printf("# the plan's predicted step %.3f s: compute %.3f (measured on the slice: same layers per stage, micro-batch, "
           "sequence, recomputation), TP %.3f (%s), CP %.3f (%s), PP %.3f + bubble %.3f (%s), DP %.3f (%s), optimizer %.3f (%s)\n",
           full.step_s, full.compute_s, full.tp_comm_s, same_tp_link ? "measured: the same group on the same link" : "predicted only",
           full.cp_comm_s, cp_same ? "measured: the same ring" : "predicted only: the slice's ring is on another link",
           full.pp_comm_s, full.bubble_s, stages_same ? "measured" : "predicted only: the slice has fewer stages",
           full.dp_comm_s, dp_same ? "measured" : "predicted only: the slice has a smaller or node-local DP group",
           full.optimizer_s, optimizer_same ? "measured" : "predicted only: the slice's ZeRO shards are larger");
    printf("# share of the plan's predicted step backed by measurement on the slice: %.1f%%\n", 100.0 * backed / full.step_s);
    printf("# the plan's peak memory per GPU %.2f GiB; the slice's %.2f GiB (its own prediction; measured below)\n",
           full.memory.total / 1073741824.0, slice.memory.total / 1073741824.0);
    return 0;
}

/* A whole number flag from min to max; -1 after one stderr line naming it. */
static int int_flag(int argc, char **argv, const char *flag, int fallback, int min, int max, int *out)
{
    const char *text = arg_value(argc, argv, flag, NULL);
    if (!text) { *out = fallback; return 0; }
    char *end;
    long v = strtol(text, &end, 10);
    if (end == text || *end || v < min || v > max) {
        fprintf(stderr, "sextant-gpu: train: %s '%s' is not a whole number from %d to %d\n", flag, text, min, max);
        return -1;
    }
    *out = (int)v;
    return 0;
}

/* A real number in (min, max]; -1 after one stderr line naming it. */
static int real_flag(int argc, char **argv, const char *flag, double fallback, double min, double max, double *out)
{
    const char *text = arg_value(argc, argv, flag, NULL);
    if (!text) { *out = fallback; return 0; }
    char *end;
    double v = strtod(text, &end);
    if (end == text || *end || !(v > min) || !(v <= max)) {
        fprintf(stderr, "sextant-gpu: train: %s '%s' is not a number above %g and at most %g\n", flag, text, min, max);
        return -1;
    }
    *out = v;
    return 0;
}

static int has_flag(int argc, char **argv, const char *flag)
{
    for (int i = 2; i < argc; i++)
        if (!strcmp(argv[i], flag)) return 1;
    return 0;
}

/* train forks its ranks when it needs several GPUs, so it runs before this
 * process makes any CUDA call. */
static int main_train(int argc, char **argv)
{
    static const char *const known[] = {"--gpu", "--mbs", "--gbs", "--seq", "--steps", "--tp", "--pp", "--vpp", "--dp",
                                        "--gpus", "--zero", "--recompute", "--attention", "--calibration", "--csv", "--json", "--plot",
                                        "--losses", "--timeout", "--warmup", "--sp", "--every-step", "--plan",
                                        "--lr", "--lr-warmup", "--cp", "--precision", "--ep", "--moe-imbalance"};
    const char *plan_path = arg_value(argc, argv, "--plan", NULL);
    int first_flag = plan_path && argc > 2 && argv[2][0] == '-' ? 2 : 3;
    if (!plan_path && (argc < 3 || argv[2][0] == '-')) { fprintf(stderr, "sextant-gpu: train needs a MODEL or --plan FILE\n"); return 2; }
    for (int i = first_flag; i < argc; i++) {
        if (argv[i][0] != '-') continue;
        int ok = 0;
        for (size_t k = 0; k < sizeof known / sizeof known[0] && !ok; k++) ok = !strcmp(argv[i], known[k]);
        if (!ok) { fprintf(stderr, "sextant-gpu: train: unknown flag %s\n", argv[i]); return 2; }
        if (strcmp(argv[i], "--sp") && strcmp(argv[i], "--every-step")) {
            if (i + 1 >= argc) { fprintf(stderr, "sextant-gpu: train: %s needs a value\n", argv[i]); return 2; }
            i++;
        }
    }
    static hwdb db, defaults;
    static model_zoo zoo;
    const char *calibration = arg_value(argc, argv, "--calibration", NULL);
    if (load_data(&db, &defaults, &zoo, calibration) != 0) return 2;
    static plan_file plan;
    if (plan_path && read_plan(plan_path, &plan) != 0) return 2;
    const char *model_name = plan_path ? plan.model : argv[2];
    const model_t *zoo_model = model_zoo_find(&zoo, model_name);
    if (!zoo_model) { fprintf(stderr, "sextant-gpu: unknown model '%s'\n", model_name); return 2; }
    static train_job job;
    job.m = zoo_model;
    job.gpu = hwdb_find_gpu(&db, arg_value(argc, argv, "--gpu", plan_path ? plan.gpu : "h100-sxm"));
    if (!job.gpu) { fprintf(stderr, "sextant-gpu: train: --gpu: unknown GPU\n"); return 2; }
    job.node = hwdb_find_node(&db, job.gpu->node);
    /* the same GPU on hwdb defaults: the report puts the uncalibrated prediction beside the calibrated one */
    job.o.uncal_gpu = hwdb_find_gpu(&defaults, job.gpu->name);
    job.o.uncal_node = job.o.uncal_gpu ? hwdb_find_node(&defaults, job.o.uncal_gpu->node) : NULL;
    const char *attention = arg_value(argc, argv, "--attention", "unfused");
    if (strcmp(attention, "unfused") && strcmp(attention, "flash")) {
        fprintf(stderr, "sextant-gpu: train: --attention '%s' is not one of unfused|flash\n", attention);
        return 2;
    }
    const char *precision = arg_value(argc, argv, "--precision", "bf16");
    if (strcmp(precision, "bf16") && strcmp(precision, "fp8")) {
        fprintf(stderr, "sextant-gpu: train: --precision '%s' is not one of bf16|fp8\n", precision);
        return 2;
    }
    job.o.fp8 = !strcmp(precision, "fp8");
    const char *recompute = arg_value(argc, argv, "--recompute", "none");
    if (strcmp(recompute, "none") && strcmp(recompute, "full")) {
        fprintf(stderr, "sextant-gpu: train: --recompute '%s' is not one of none|full\n", recompute);
        return 2;
    }
    train_options *o = &job.o;
    int gpus = 0, timeout = 120;
    if (int_flag(argc, argv, "--mbs", 8, 1, 1 << 20, &o->mbs) || int_flag(argc, argv, "--seq", 1024, 1, 1 << 20, &o->seq) ||
        int_flag(argc, argv, "--steps", 50, 1, 1 << 24, &o->steps) || int_flag(argc, argv, "--warmup", 5, 0, 1 << 20, &o->warmup) ||
        int_flag(argc, argv, "--tp", 1, 1, 1024, &o->tp) || int_flag(argc, argv, "--pp", 1, 1, 1024, &o->pp) ||
        int_flag(argc, argv, "--vpp", 1, 1, 1024, &o->vpp) ||
        int_flag(argc, argv, "--dp", 1, 1, 1 << 16, &o->dp) || int_flag(argc, argv, "--zero", 0, 0, 3, &o->zero) ||
        int_flag(argc, argv, "--cp", 1, 1, 1024, &o->cp) ||
        int_flag(argc, argv, "--ep", 1, 1, 1024, &o->ep) ||
        int_flag(argc, argv, "--gpus", 0, 1, 1 << 16, &gpus) || int_flag(argc, argv, "--timeout", 120, 1, 86400, &timeout) ||
        real_flag(argc, argv, "--lr", TRAIN_LR_DEFAULT, 0.0, 1.0, &o->lr) ||
        int_flag(argc, argv, "--lr-warmup", TRAIN_LR_WARMUP_DEFAULT, 0, 1 << 20, &o->lr_warmup))
        return 2;
    if (int_flag(argc, argv, "--gbs", o->mbs * o->dp, 1, 1 << 24, &o->gbs)) return 2;
    o->sp = has_flag(argc, argv, "--sp");
    o->quiet_steps = has_flag(argc, argv, "--every-step");
    o->recompute = !strcmp(recompute, "full") ? RECOMPUTE_FULL : RECOMPUTE_NONE;
    o->calibrated = calibration != NULL;
    o->flash = !strcmp(attention, "flash");
    o->csv = arg_value(argc, argv, "--csv", NULL);
    o->json = arg_value(argc, argv, "--json", NULL);
    o->plot = arg_value(argc, argv, "--plot", NULL);
    o->losses = arg_value(argc, argv, "--losses", NULL);
    static model_t executed;
    executed = *zoo_model;
    executed.dropout = 0;   /* the training step runs without dropout */
    /* the planner's assumption of the busiest EP rank's load, printed beside the measured one */
    double imbalance = 0.0;
    if (real_flag(argc, argv, "--moe-imbalance", 0.0, 0.0, 1e6, &imbalance)) return 2;
    if (imbalance > 0.0 && imbalance < 1.0) {
        fprintf(stderr, "sextant-gpu: train: --moe-imbalance %g: the busiest rank's load over the mean is at least 1\n", imbalance);
        return 2;
    }
    if (imbalance > 0.0) executed.moe_imbalance = imbalance;
    job.m = &executed;
    if (plan_path) {
        /* the GPUs here: --gpus, the launcher's, or every visible one */
        int available = gpus ? gpus : launch_launcher_ranks(NULL);
        if (!available) {
            char why[256];
            available = launch_visible_gpus(why, sizeof why);
            if (available == 0) { printf("sextant-gpu: no GPU found, skipping\n"); return 0; }
            if (available < 0) { fprintf(stderr, "sextant-gpu: cannot count the GPUs: %s\n", why); return 2; }
        }
        static model_t sliced;
        if (slice_plan(&plan, &executed, job.gpu, job.node, available, &sliced, o) != 0) return 2;
        job.m = &sliced;
        gpus = o->tp * o->pp * o->dp * o->cp;
    }
    if (train_check(job.m, o) != 0) return 2;
    int ranks = o->tp * o->pp * o->dp * o->cp;
    if (gpus && gpus != ranks) {
        fprintf(stderr, "sextant-gpu: train: --gpus %d but --tp %d x --pp %d x --dp %d x --cp %d = %d\n", gpus, o->tp, o->pp,
                o->dp, o->cp, ranks);
        return 2;
    }
    int launched = launch_launcher_ranks(NULL) > 0;
    if (ranks > 1 || launched) {
        if (!launched) {
            char why[256];
            int visible = launch_visible_gpus(why, sizeof why);
            if (visible == 0) { printf("sextant-gpu: no GPU found, skipping\n"); return 0; }
            if (visible > 0 && visible < ranks) {
                fprintf(stderr, "sextant-gpu: train: the layout needs %d GPUs (tp %d x pp %d x dp %d x cp %d), %d visible; "
                        "nothing started\n", ranks, o->tp, o->pp, o->dp, o->cp, visible);
                return 2;
            }
        }
        launch_options lo = {ranks, (double)timeout, 0.0};
        return launch_run(&lo, train_body, &job);
    }
    int devices = 0;
    if (cudaGetDeviceCount(&devices) != cudaSuccess || devices == 0) {
        printf("sextant-gpu: no GPU found, skipping\n");
        return 0;
    }
    return train_body(NULL, &job);
}

/* check-gradients: the real step on two tiny models (GPT-2's and LLaMA's
 * architectures, two layers) against the float64 reference. */
static int main_check(int argc, char **argv)
{
    (void)argc; (void)argv;
    int devices = 0;
    if (cudaGetDeviceCount(&devices) != cudaSuccess || devices == 0) {
        printf("sextant-gpu: no GPU found, skipping\n");
        return 0;
    }
    static hwdb db;
    static model_zoo zoo;
    if (load_data(&db, NULL, &zoo, NULL) != 0) return 2;
    const hw_gpu *gpu = hwdb_find_gpu(&db, "h100-sxm");
    const hw_node *node = hwdb_find_node(&db, gpu->node);
    char device[256];
    device_line(device, sizeof device);
    printf("# on %s\n", device);
    /* the families' architectures at a size the float64 reference runs in a second:
     * GPT-2 (LayerNorm, GELU, biases, learned positions, tied head) and LLaMA 3.2
     * (RMSNorm, SwiGLU, GQA 4/2, RoPE, tied head), and an untied LLaMA 2 */
    static const struct { const char *base, *name; int kv, ffn, tied; } tiny[] = {
        {"gpt2", "tiny-gpt2", 4, 256, 1}, {"llama3.2-1b", "tiny-llama3", 2, 96, 1}, {"llama2-7b", "tiny-llama2", 4, 96, 0}};
    int rc = 0;
    for (size_t i = 0; i < sizeof tiny / sizeof tiny[0]; i++) {
        const model_t *base = model_zoo_find(&zoo, tiny[i].base);
        if (!base) { fprintf(stderr, "sextant-gpu: check-gradients: %s is not in the zoo\n", tiny[i].base); return 2; }
        static model_t m;
        m = *base;
        snprintf(m.name, sizeof m.name, "%s", tiny[i].name);
        m.layers = 2; m.hidden = 64; m.heads = 4; m.kv_heads = tiny[i].kv; m.head_dim = 16; m.ffn = tiny[i].ffn;
        m.vocab = 100; m.max_positions = 64; m.seq = 16; m.tied_embeddings = tiny[i].tied; m.dropout = 0;
        train_options o = {0};
        o.mbs = 2; o.gbs = 2; o.seq = 16; o.steps = 8; o.warmup = 5; o.tp = o.pp = o.dp = 1;
        o.recompute = RECOMPUTE_NONE; o.check_gradients = 1;
        int r = train_run(&m, gpu, node, &o, NULL);
        if (r != 0) rc = 1;
        printf("\n");
    }
    model_zoo_free(&zoo);
    hwdb_free(&db);
    return rc;
}

/* ---- calibrate's step fit: the power model's two loosest terms fitted to real steps ---- */

/* The reference runs: a small model at three micro-batches, unfused and fused attention.  GPT-2 124M
 * because it fits every GPU we list and runs in seconds; fitted on its six runs, the H100's overlay
 * predicted GPT-2 350M and the LLaMA-style 1.24B within 5% (docs/validation/2026-11-25-h100-power). */
#define STEP_FIT_MODEL "gpt2"
#define STEP_FIT_STEPS 30
static const int step_fit_mbs[] = {8, 16, 32};

/* Runs this program with args (args[0] is replaced by its path), stdout and stderr into log_path;
 * its exit status, or -1 after one stderr line. */
static int run_self(char **args, const char *log_path)
{
    static char self[4096];
    ssize_t n = readlink("/proc/self/exe", self, sizeof self - 1);
    if (n <= 0) { fprintf(stderr, "sextant-gpu: calibrate: /proc/self/exe: %s\n", strerror(errno)); return -1; }
    self[n] = '\0';
    args[0] = self;
    posix_spawn_file_actions_t actions;
    if (posix_spawn_file_actions_init(&actions) != 0) { fprintf(stderr, "sextant-gpu: calibrate: posix_spawn: out of memory\n"); return -1; }
    posix_spawn_file_actions_addopen(&actions, STDOUT_FILENO, log_path, O_WRONLY | O_CREAT | O_TRUNC, 0644);
    posix_spawn_file_actions_adddup2(&actions, STDOUT_FILENO, STDERR_FILENO);
    pid_t pid;
    extern char **environ;
    int err = posix_spawn(&pid, self, &actions, NULL, args, environ);
    posix_spawn_file_actions_destroy(&actions);
    if (err != 0) { fprintf(stderr, "sextant-gpu: calibrate: cannot start %s: %s\n", self, strerror(err)); return -1; }
    int status;
    while (waitpid(pid, &status, 0) < 0)
        if (errno != EINTR) { fprintf(stderr, "sextant-gpu: calibrate: waitpid: %s\n", strerror(errno)); return -1; }
    return WIFEXITED(status) ? WEXITSTATUS(status) : 128 + (WIFSIGNALED(status) ? WTERMSIG(status) : 0);
}

/* The last line of a file that says something, for a failed run's one line. */
static void last_line(const char *path, char *out, size_t len)
{
    out[0] = '\0';
    FILE *f = fopen(path, "r");
    if (!f) return;
    char line[1024];
    while (fgets(line, sizeof line, f)) {
        line[strcspn(line, "\n")] = '\0';
        if (line[0]) snprintf(out, len, "%s", line);
    }
    fclose(f);
}

/* After calibrate wrote --out with a power model: train the reference model (one process per run, as
 * `sextant-gpu train` on that overlay), fit the clock exponent and the fused attention's energy to the
 * measured steps (planner/fit_power.c) and write the overlay again with them.  The runs' CSVs and logs
 * go to --step-runs DIR when given, else to a temporary folder removed afterwards.  On failure the
 * overlay stays as calibrate wrote it and the exit status is 1. */
static int calibrate_step_fit(int argc, char **argv, const model_zoo *zoo)
{
    const char *out_path = arg_value(argc, argv, "--out", NULL);
    const char *gpu_name = arg_value(argc, argv, "--gpu", "h100-sxm");
    const char *keep = arg_value(argc, argv, "--step-runs", NULL);
    const model_t *m = model_zoo_find(zoo, STEP_FIT_MODEL);
    if (!m) { fprintf(stderr, "sextant-gpu: calibrate: step fit: the model zoo has no %s\n", STEP_FIT_MODEL); return 2; }
    char dir[4096];
    if (keep) {
        snprintf(dir, sizeof dir, "%s", keep);
        if (mkdir(dir, 0755) != 0 && errno != EEXIST) {
            fprintf(stderr, "sextant-gpu: calibrate: --step-runs %s: %s\n", dir, strerror(errno));
            return 2;
        }
    } else {
        const char *tmpdir = getenv("TMPDIR");
        snprintf(dir, sizeof dir, "%s/sextant-steps-XXXXXX", tmpdir && *tmpdir ? tmpdir : "/tmp");
        if (!mkdtemp(dir)) { fprintf(stderr, "sextant-gpu: calibrate: mkdtemp %s: %s\n", dir, strerror(errno)); return 2; }
    }
    printf("\nstep fit: %s trained for %d steps at micro-batch", m->name, STEP_FIT_STEPS);
    for (size_t i = 0; i < sizeof step_fit_mbs / sizeof step_fit_mbs[0]; i++) printf(" %d", step_fit_mbs[i]);
    printf(", unfused and fused attention, on the overlay just written (runs in %s)\n", dir);

    static power_fit_run runs[2 * sizeof step_fit_mbs / sizeof step_fit_mbs[0]];
    static char csv_paths[sizeof runs / sizeof runs[0]][4200], log_paths[sizeof runs / sizeof runs[0]][4200];
    int succeeded[sizeof runs / sizeof runs[0]] = {0};
    int nruns = 0, nfiles = 0, rc = 1;
    hwdb db;
    int db_loaded = 0;
    char err[1024];
    for (int flash = 0; flash < 2; flash++) {
        for (size_t i = 0; i < sizeof step_fit_mbs / sizeof step_fit_mbs[0]; i++) {
            char mbs[16], seq[16], steps[16];
            snprintf(mbs, sizeof mbs, "%d", step_fit_mbs[i]);
            snprintf(seq, sizeof seq, "%lld", (long long)m->seq);
            snprintf(steps, sizeof steps, "%d", STEP_FIT_STEPS);
            char *csv = csv_paths[nfiles], *log = log_paths[nfiles];
            snprintf(csv, sizeof csv_paths[0], "%s/%s_%s_mbs%d.csv", dir, flash ? "flash" : "train", m->name, step_fit_mbs[i]);
            snprintf(log, sizeof log_paths[0], "%s/%s_%s_mbs%d.log", dir, flash ? "flash" : "train", m->name, step_fit_mbs[i]);
            nfiles++;
            char *args[] = {NULL, "train", (char *)m->name, "--gpu", (char *)gpu_name, "--mbs", mbs, "--seq", seq,
                            "--steps", steps, "--attention", flash ? "flash" : "unfused", "--calibration",
                            (char *)out_path, "--csv", csv, NULL};
            int status = run_self(args, log);
            if (status != 0) {
                char why[1024];
                last_line(log, why, sizeof why);
                printf("  %-32s failed (exit %d), left out: %s\n", strrchr(csv, '/') + 1, status, why);
                continue;
            }
            succeeded[nfiles - 1] = 1;
            printf("  %-32s done\n", strrchr(csv, '/') + 1);
        }
    }
    if (load_data(&db, NULL, NULL, out_path) != 0) goto done;
    db_loaded = 1;
    const hw_gpu *g = hwdb_find_gpu(&db, gpu_name);
    const hw_node *node = g ? hwdb_find_node(&db, g->node) : NULL;
    if (!g || !node) { fprintf(stderr, "sextant-gpu: calibrate: step fit: %s or its node is not in the hwdb\n", gpu_name); goto done; }
    for (int i = 0; i < nfiles; i++) {
        if (!succeeded[i]) continue;
        if (power_fit_read_run(csv_paths[i], zoo, g, node, &runs[nruns], err, sizeof err) != 0) {
            fprintf(stderr, "sextant-gpu: calibrate: step fit: %s\n", err);
            goto done;
        }
        nruns++;
    }
    static power_fit_result fit;
    if (power_fit_steps(g, node, runs, nruns, &fit, err, sizeof err) != 0) {
        fprintf(stderr, "sextant-gpu: calibrate: step fit: %s; %s keeps calibrate's own power model\n", err, out_path);
        goto done;
    }
    power_fit_report(stdout, g, runs, nruns, &fit);
    if (power_fit_write_overlay(out_path, out_path, g, "sextant-gpu calibrate step fit", runs, nruns, &fit, err,
                                sizeof err) != 0) {
        fprintf(stderr, "sextant-gpu: calibrate: step fit: --out %s\n", err);
        goto done;
    }
    printf("overlay written to %s with the step fit\n", out_path);
    rc = 0;
done:
    if (rc) fprintf(stderr, "sextant-gpu: calibrate: the step fit failed; %s holds calibrate's own power model\n", out_path);
    if (!keep) {
        for (int i = 0; i < nfiles; i++) {
            unlink(csv_paths[i]);
            unlink(log_paths[i]);
        }
        rmdir(dir);
    }
    if (db_loaded) hwdb_free(&db);
    return rc;
}

/* calibrate --comm forks its ranks, so it must run before this process
 * makes its first CUDA call; it needs only the hwdb. */
static int main_comm(int argc, char **argv)
{
    hwdb db;
    if (load_data(&db, NULL, NULL, NULL) != 0) return 2;
    int rc = comm_calibrate(argc, argv, &db);
    hwdb_free(&db);
    return rc;
}

/* Every file flag's target is looked at before any GPU work (outfile.c): a directory, device, FIFO, socket or
 * link is refused in one line now, not after a long run. */
static int refuse_unwritable_targets(int argc, char **argv)
{
    static const char *const file_flags[] = {"--out", "--csv", "--json", "--plot", "--losses", "--overlap-csv"};
    char err[PATH_MAX + 256];
    for (int i = 2; i + 1 < argc; i++)
        for (size_t f = 0; f < sizeof file_flags / sizeof file_flags[0]; f++)
            if (!strcmp(argv[i], file_flags[f]) && outfile_check_target(argv[i + 1], err, sizeof err) != 0) {
                fprintf(stderr, "sextant-gpu: %s: %s\n", file_flags[f], err);
                return 2;
            }
    return 0;
}

int main(int argc, char **argv)
{
    setvbuf(stdout, NULL, _IOLBF, 0);
    if (argc < 2 || (strcmp(argv[1], "calibrate") && strcmp(argv[1], "ops") && strcmp(argv[1], "train") &&
                     strcmp(argv[1], "check-gradients") && strcmp(argv[1], "check-fp8"))) {
        fprintf(stderr, "usage: sextant-gpu calibrate [--gpu NAME] [--out FILE] [--gemm-models A,B,...] [--clock-scaling]\n"
                        "                            [--data uniform|normal] [--warm | --no-step-fit] [--step-runs DIR]\n"
                        "       sextant-gpu calibrate --comm [--gpus N] [--gpu NAME] [--out FILE] [--min-bytes SIZE] [--max-bytes SIZE]\n"
                        "                                    [--warmup N] [--iters N] [--repeats N] [--timeout S]\n"
                        "                                    [--overlap-shapes MxNxK,...] [--overlap-bytes SIZE,...]\n"
                        "                                    [--overlap-repeats N] [--overlap-csv FILE] [--no-overlap]\n"
                        "       sextant-gpu ops MODEL [--gpu NAME] [--mbs N] [--seq N] [--calibration FILE] [--csv FILE]\n"
                        "       sextant-gpu train MODEL [--gpu NAME] [--mbs N] [--gbs N] [--seq N] [--steps N] [--warmup N]\n"
                        "                             [--tp N] [--pp N] [--vpp N] [--dp N] [--cp 2] [--sp] [--zero 0|1|2|3] [--recompute none|full]\n"
                        "                             [--gpus N] [--timeout S] [--attention unfused|flash] [--calibration FILE]\n"
                        "                             [--csv FILE] [--json FILE] [--plot FILE.svg] [--losses FILE] [--every-step]\n"
                        "                             [--lr RATE] [--lr-warmup STEPS] [--precision bf16|fp8]\n"
                        "                             [--ep N] [--moe-imbalance X]\n"
                        "         (several GPUs: one process each, forked here, or started by mpirun / srun)\n"
                        "       sextant-gpu check-gradients   (the step's gradients on tiny models against float64)\n"
                        "       sextant-gpu check-fp8         (the FP8 GEMMs of a linear layer against float64)\n");
        return 2;
    }
    if (refuse_unwritable_targets(argc, argv)) return 2;
    if (!strcmp(argv[1], "calibrate"))
        for (int i = 2; i < argc; i++)
            if (!strcmp(argv[i], "--comm")) return main_comm(argc, argv);
    if (!strcmp(argv[1], "train")) return main_train(argc, argv);
    if (!strcmp(argv[1], "check-gradients")) return main_check(argc, argv);
    if (!strcmp(argv[1], "check-fp8")) {
        int n = 0;
        if (cudaGetDeviceCount(&n) != cudaSuccess || n == 0) { printf("sextant-gpu: no GPU found, skipping\n"); return 0; }
        return fp8_check();
    }
    int devices = 0;
    if (cudaGetDeviceCount(&devices) != cudaSuccess || devices == 0) {
        printf("sextant-gpu: no GPU found, skipping\n");
        return 0;
    }
    hwdb db;
    model_zoo zoo;
    if (load_data(&db, NULL, &zoo, arg_value(argc, argv, "--calibration", NULL)) != 0) return 2;
    CUDA_CHECK(cudaStreamCreate(&stream));
    CUBLAS_CHECK(cublasCreate(&blas));
    CUBLAS_CHECK(cublasSetStream(blas, stream));
    CUDA_CHECK(cudaMalloc(&workspace, workspace_bytes));
    CUBLAS_CHECK(cublasSetWorkspace(blas, workspace, CUBLAS_WORKSPACE_BYTES));
    int rc, fit_steps = 0;
    if (!strcmp(argv[1], "calibrate")) rc = cmd_calibrate(argc, argv, &db, &zoo, &fit_steps);
    else rc = cmd_ops(argc, argv, &db, &zoo);
    CUBLAS_CHECK(cublasDestroy(blas));
    CUDA_CHECK(cudaFree(workspace));
    CUDA_CHECK(cudaStreamDestroy(stream));
    if (rc == 0 && fit_steps) {
        /* the training runs get the GPU to themselves: without this context, its memory and its power */
        CUDA_CHECK(cudaDeviceReset());
        rc = calibrate_step_fit(argc, argv, &zoo);
    }
    model_zoo_free(&zoo);
    hwdb_free(&db);
    return rc;
}
