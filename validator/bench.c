/* Op timing for calibrate and ops, one process on one GPU (bench.h): the scratch buffers of
 * random operands, the median and back-to-back timers, and the ops they time (cuBLAS GEMMs, our
 * memory-bound kernels, our fused attention, the device copy). */
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "bench.h"
#include "gpu_check.h"
#include "gpu_timing.h"
#include "kernels.h"
#include "reference.h"
#include "train.h"

gpu_context bench;
void *kernel_workspace;
size_t kernel_workspace_bytes;
int32_t *token_ids;

/* ---- device buffers ----------------------------------------------------- */

void *scratch[4];
size_t scratch_bytes;
int scratch_data = SCRATCH_UNIFORM;

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

/* each buffer's block of random values, kept on the device so that scratch_refresh can write it
 * through the buffer again */
#define SCRATCH_BLOCK_BYTES ((size_t)16 << 20)
static void *scratch_block[4];

void scratch_init(size_t bytes)
{
    static const float sigma[4] = {1.0f, 0.02f, 1.0f, 1e-3f};
    scratch_bytes = bytes;
    uint16_t *host = malloc(SCRATCH_BLOCK_BYTES);
    if (!host) { fprintf(stderr, "sextant-gpu: out of host memory\n"); exit(1); }
    unsigned seed = 12345;
    if (scratch_data == SCRATCH_UNIFORM) scratch_fill_host(host, SCRATCH_BLOCK_BYTES / 2, 0, 1.0f, &seed);
    for (int b = 0; b < 4; b++) {
        if (scratch_data == SCRATCH_NORMAL) scratch_fill_host(host, SCRATCH_BLOCK_BYTES / 2, 1, sigma[b], &seed);
        CUDA_CHECK(cudaMalloc(&scratch[b], bytes));
        CUDA_CHECK(cudaMalloc(&scratch_block[b], SCRATCH_BLOCK_BYTES));
        CUDA_CHECK(cudaMemcpy(scratch_block[b], host, SCRATCH_BLOCK_BYTES, cudaMemcpyHostToDevice));
    }
    free(host);
    scratch_refresh();
}

/* Doubling copies: the block, then what is written so far after itself, log2(bytes / block) + 1
 * copies a buffer; calibrate's four 4 GiB buffers are 16 GiB of device copies, milliseconds
 * beside the 50 ms idles of each shape's cool batches. */
void scratch_refresh(void)
{
    for (int b = 0; b < 4; b++) {
        char *dst = scratch[b];
        size_t done = scratch_bytes < SCRATCH_BLOCK_BYTES ? scratch_bytes : SCRATCH_BLOCK_BYTES;
        CUDA_CHECK(cudaMemcpy(dst, scratch_block[b], done, cudaMemcpyDeviceToDevice));
        while (done < scratch_bytes) {
            size_t n = scratch_bytes - done < done ? scratch_bytes - done : done;
            CUDA_CHECK(cudaMemcpy(dst + done, dst, n, cudaMemcpyDeviceToDevice));
            done += n;
        }
    }
    CUDA_CHECK(cudaDeviceSynchronize());
}

void scratch_free(void)
{
    for (int b = 0; b < 4; b++) {
        CUDA_CHECK(cudaFree(scratch[b]));
        CUDA_CHECK(cudaFree(scratch_block[b]));
    }
}

void scratch_need(double bytes, const char *what)
{
    if (bytes > (double)scratch_bytes) {
        fprintf(stderr, "sextant-gpu: %s needs %.0f MB, scratch holds %.0f MB\n", what, bytes / 1e6, scratch_bytes / 1e6);
        exit(1);
    }
}

/* ---- timing -------------------------------------------------------------- */


/* Median of TIMED_RUNS event-timed runs after warm-up, in seconds; the
 * spread (max - min) / median goes to *spread. */
double time_median(launch_fn fn, const void *ctx, double *spread)
{
    cudaEvent_t start, stop;
    CUDA_CHECK(cudaEventCreate(&start));
    CUDA_CHECK(cudaEventCreate(&stop));
    for (int i = 0; i < WARMUP_RUNS; i++) fn(ctx);
    float ms[TIMED_RUNS];
    for (int i = 0; i < TIMED_RUNS; i++) {
        CUDA_CHECK(cudaEventRecord(start, bench.stream));
        fn(ctx);
        CUDA_CHECK(cudaEventRecord(stop, bench.stream));
        CUDA_CHECK(cudaEventSynchronize(stop));
        CUDA_CHECK(cudaEventElapsedTime(&ms[i], start, stop));
    }
    CUDA_CHECK(cudaGetLastError());
    sort_floats(ms, TIMED_RUNS);
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
double last_clock_mhz;
/* Cool timing (train_time_is_cool): a batch that would warm first runs instead after
 * CALIBRATE_COOL_IDLE_MS of idle, at the top clock (train.h). */
double time_back_to_back(launch_fn fn, const void *ctx, int reps, float warm_ms)
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
            CUDA_CHECK(cudaStreamSynchronize(bench.stream));
            idle_ms(CALIBRATE_COOL_IDLE_MS);
        }
        CUDA_CHECK(cudaEventRecord(start, bench.stream));
        for (int r = 0; r < reps; r++) fn(ctx);
        CUDA_CHECK(cudaEventRecord(stop, bench.stream));
        if (b >= 0) mhz[b] = sm_clock_after(bench.stream); /* the clock this batch left: the probe queues behind it */
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


/* Row-major C[m,n] = A[m,k] B[k,n] in bf16 with fp32 accumulation, as
 * column-major C^T = B^T A^T. */
void run_gemm(const void *ctx)
{
    const gemm_shape *g = ctx;
    const float alpha = 1.0f, beta = 0.0f;
    if (g->batch <= 1)
        CUBLAS_CHECK(cublasGemmEx(bench.blas, CUBLAS_OP_N, CUBLAS_OP_N, (int)g->n, (int)g->m, (int)g->k, &alpha, scratch[1],
                                  CUDA_R_16BF, (int)g->n, scratch[0], CUDA_R_16BF, (int)g->k, &beta, scratch[2],
                                  CUDA_R_16BF, (int)g->n, CUBLAS_COMPUTE_32F, CUBLAS_GEMM_DEFAULT));
    else
        CUBLAS_CHECK(cublasGemmStridedBatchedEx(bench.blas, CUBLAS_OP_N, CUBLAS_OP_N, (int)g->n, (int)g->m, (int)g->k, &alpha,
                                                scratch[1], CUDA_R_16BF, (int)g->n, g->stride_b, scratch[0], CUDA_R_16BF,
                                                (int)g->k, g->stride_a, &beta, scratch[2], CUDA_R_16BF, (int)g->n,
                                                g->stride_c, (int)g->batch, CUBLAS_COMPUTE_32F, CUBLAS_GEMM_DEFAULT));
}


cudaError_t membound_error;

void run_membound(const void *ctx)
{
    const membound_ctx *c = ctx;
    const char *n = c->name;
    int N = (int)c->tokens, C = (int)c->hidden;
    sx_bf16 *a = scratch[0], *b = scratch[1], *out = scratch[2];
    float *stats = scratch[3];
    cudaError_t err = cudaSuccess;
    if (!strcmp(n, "attn_norm") || !strcmp(n, "mlp_norm") || !strcmp(n, "final_norm")) {
        err = c->rmsnorm ? sx_rmsnorm_forward(out, stats, a, b, N, C, 1e-5f, bench.stream)
                         : sx_layernorm_forward(out, stats, stats + N, a, b, b, N, C, 1e-5f, bench.stream);
    } else if (strstr(n, "norm_bwd")) {
        float *dweight = (float *)((char *)scratch[3] + 2 * sizeof(float) * (size_t)N);
        err = c->rmsnorm ? sx_rmsnorm_backward(out, dweight, SX_F32, a, b, b, stats, 0, kernel_workspace, kernel_workspace_bytes, N, C, bench.stream)
                         : sx_layernorm_backward(out, dweight, dweight + C, SX_F32, a, b, b, stats, stats + N, 0,
                                                 kernel_workspace, kernel_workspace_bytes, N, C, bench.stream);
    } else if (!strcmp(n, "gelu")) {
        err = sx_gelu_forward(out, a, (size_t)N * (size_t)c->ffn, bench.stream);
    } else if (!strcmp(n, "gelu_bwd")) {
        err = sx_gelu_backward(out, a, b, (size_t)N * (size_t)c->ffn, bench.stream);
    } else if (!strcmp(n, "swiglu")) {
        err = sx_swiglu_forward(out, a, a + c->ffn, N, (int)c->ffn, 2 * (int)c->ffn, bench.stream);
    } else if (!strcmp(n, "swiglu_bwd")) {
        err = sx_swiglu_backward(out, out + c->ffn, b, a, a + c->ffn, N, (int)c->ffn, 2 * (int)c->ffn, bench.stream);
    } else if (!strcmp(n, "rope") || !strcmp(n, "rope_bwd")) {
        /* in place on the q and k columns of a fused qkv buffer [N, (H+2KV)D]; the base
         * (10000 here) changes the angles, not the time */
        const model_t *m = c->model;
        int H = (int)m->heads, KV = (int)m->kv_heads, D = (int)m->head_dim, ld = (H + 2 * KV) * D;
        err = strcmp(n, "rope") ? sx_rope_backward(out, (int)c->mbs, (int)c->seq, H, KV, D, ld, 10000.0f, bench.stream)
                                : sx_rope_forward(out, (int)c->mbs, (int)c->seq, H, KV, D, ld, 10000.0f, bench.stream);
    } else if (strstr(n, "residual")) {
        err = sx_residual_add(out, NULL, a, b, (size_t)N * (size_t)C, bench.stream);
    } else if (!strcmp(n, "embedding")) {
        err = sx_embedding_forward(out, token_ids, a, c->model->position == POS_LEARNED ? b : NULL,
                                   (int)c->mbs, (int)c->seq, C, (int)c->vocab, bench.stream);
    } else if (!strcmp(n, "embedding_bwd")) {
        err = sx_embedding_backward(out, c->model->position == POS_LEARNED ? b : NULL, SX_BF16, a,
                                    token_ids, kernel_workspace, kernel_workspace_bytes, (int)c->mbs, (int)c->seq, C,
                                    (int)c->vocab, bench.stream);
    } else if (!strcmp(n, "cross_entropy")) {
        /* forward and backward fused in one kernel, as llm.c does */
        err = sx_cross_entropy_fused((float *)scratch[1], out, a, token_ids, N, (int)c->model->vocab,
                                     (int)c->vocab, 1.0f / (float)N, bench.stream);
    } else if (!strcmp(n, "zero_grads")) {
        /* the 16-bit gradients cleared before a step's first micro-batch */
        err = cudaMemsetAsync(scratch[3], 0, (size_t)c->params * sizeof(sx_bf16), bench.stream);
    } else if (!strcmp(n, "optimizer")) {
        sx_adamw_params hp = {3e-4f, 0.9f, 0.95f, 1e-8f, 0.1f, 1, 1.0f, NULL};
        float *p = scratch[0], *m = scratch[1], *v = scratch[2];
        const sx_bf16 *grad = scratch[3];
        sx_bf16 *weights = (sx_bf16 *)scratch[3] + c->params;
        err = sx_adamw(p, m, v, weights, grad, (size_t)c->params, &hp, bench.stream);
    }
    if (err != cudaSuccess && membound_error == cudaSuccess) membound_error = err;
}


cudaError_t flash_error;

void run_flash(const void *ctx)
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
                                      f->D, ld, ld, scale, f->ws, f->ws_bytes, bench.stream)
        : sx_flash_attention_forward(out, f->lse, q, q + ko, q + vo, f->B, f->T, f->H, f->KV, f->D, ld, ld, scale, bench.stream);
    if (err != cudaSuccess && flash_error == cudaSuccess) flash_error = err;
}

/* The operand sets, log-sum-exp and backward workspace of one attention shape. */
void flash_prepare(flash_ctx *f)
{
    double qkv_bytes = 2.0 * f->B * (double)f->T * (f->H + 2 * f->KV) * f->D;
    scratch_need(qkv_bytes, "the attention's qkv buffer");
    /* sets enough that a turn passes 192 MB (four times an H100's or H200's L2; a call reads
     * qkv, out and dout, writes out or dqkv), as many as the scratch buffers hold: one set left
     * warm in L2 agreed within 2% (docs/model.md, "How calibrate times the fused attention") */
    f->copy_elems = (((size_t)qkv_bytes + 4095) / 4096) * 4096 / sizeof(sx_bf16);
    f->copies = (int)(192e6 / (2.0 * qkv_bytes)) + 1;
    if (f->copies > 16) f->copies = 16;
    while (f->copies > 1 && (double)f->copies * (double)f->copy_elems * sizeof(sx_bf16) > (double)scratch_bytes)
        f->copies--;
    f->ws_bytes = sx_flash_attention_backward_workspace_bytes(f->B, f->T, f->T, f->H, f->KV, f->D);
    CUDA_CHECK(cudaMalloc((void **)&f->lse, (size_t)f->B * f->H * f->T * sizeof(float)));
    CUDA_CHECK(cudaMalloc(&f->ws, f->ws_bytes));
}

void flash_release(flash_ctx *f)
{
    CUDA_CHECK(cudaFree(f->lse));
    CUDA_CHECK(cudaFree(f->ws));
}

void run_copy(const void *ctx)
{
    size_t bytes = *(const size_t *)ctx;
    CUDA_CHECK(cudaMemcpyAsync(scratch[1], scratch[0], bytes, cudaMemcpyDeviceToDevice, bench.stream));
}

/* calibrate's and ops' stream and cuBLAS handle, with a workspace of BENCH_WORKSPACE_BYTES
 * (cuBLAS's CUBLAS_WORKSPACE_BYTES of it) */
void bench_open(void)
{
    CUDA_CHECK(cudaStreamCreate(&bench.stream));
    CUBLAS_CHECK(cublasCreate(&bench.blas));
    CUBLAS_CHECK(cublasSetStream(bench.blas, bench.stream));
    CUDA_CHECK(cudaMalloc(&bench.blas_workspace, BENCH_WORKSPACE_BYTES));
    CUBLAS_CHECK(cublasSetWorkspace(bench.blas, bench.blas_workspace, CUBLAS_WORKSPACE_BYTES));
}

void bench_close(void)
{
    CUBLAS_CHECK(cublasDestroy(bench.blas));
    CUDA_CHECK(cudaFree(bench.blas_workspace));
    CUDA_CHECK(cudaStreamDestroy(bench.stream));
}
