/* Op timing for calibrate and ops (validator/bench.c): one process on one GPU, its own stream
 * and cuBLAS handle (`bench`), four scratch buffers of random bf16, and the ops timed on them. */
#ifndef SEXTANT_BENCH_H
#define SEXTANT_BENCH_H

#include <stddef.h>
#include <stdint.h>

#include "gpu_context.h"
#include "planner.h"

#define TIMED_RUNS 15
#define WARMUP_RUNS 3
#define BENCH_WORKSPACE_BYTES (64u << 20)   /* cuBLAS's, then the kernels' */

extern gpu_context bench;            /* stream, blas, blas_workspace */
extern void *kernel_workspace;       /* norm and embedding backward */
extern size_t kernel_workspace_bytes;
extern int32_t *token_ids;

void bench_open(void);
void bench_close(void);

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
extern void *scratch[4];
extern size_t scratch_bytes;
extern int scratch_data;             /* SCRATCH_UNIFORM or SCRATCH_NORMAL, read by scratch_init */
void scratch_init(size_t bytes);
/* Every buffer back to the values scratch_init gave it.  The ops write their outputs into the
 * buffers, and the next shape would read them as operands: AdamW's fp32 state (0.2% of it NaN
 * or infinite read as bf16), then GEMM outputs that are all NaN.  GEMMs of NaNs draw less power
 * and ran 8192^3 10% faster on an H100 (docs/validation/2026-11-27-h100-calibrate-operands), so
 * calibrate refreshes before every shape and power sample it times. */
void scratch_refresh(void);
void scratch_free(void);
/* exits with one line when `bytes` exceed a scratch buffer */
void scratch_need(double bytes, const char *what);

/* ---- timing ---- */

typedef void (*launch_fn)(const void *ctx);

/* Median of TIMED_RUNS event-timed runs after warm-up, in seconds; the
 * spread (max - min) / median goes to *spread. */
double time_median(launch_fn fn, const void *ctx, double *spread);
/* Seconds per launch of fn issued `reps` times back to back (bench.c says how); the SM clock
 * after the median batch in last_clock_mhz */
double time_back_to_back(launch_fn fn, const void *ctx, int reps, float warm_ms);
extern double last_clock_mhz;

/* ---- the ops ---- */

typedef struct {
    int64_t m, n, k, batch;
    long long stride_a, stride_b, stride_c;
} gemm_shape;
/* Row-major C[m,n] = A[m,k] B[k,n] in bf16 with fp32 accumulation (ctx: a gemm_shape) */
void run_gemm(const void *ctx);

typedef struct {
    const char *name;
    const model_t *model;
    int64_t tokens, hidden, ffn, vocab, seq, mbs, heads, params;
    int rmsnorm;
} membound_ctx;
/* one memory-bound op of the planner's op list, by name (ctx: a membound_ctx) */
void run_membound(const void *ctx);
extern cudaError_t membound_error;  /* the last kernel's answer, checked by the caller */

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
} flash_ctx;
void run_flash(const void *ctx);
extern cudaError_t flash_error;     /* the last kernel's answer, checked by the caller */
/* The operand sets, log-sum-exp and backward workspace of one attention shape, and their release */
void flash_prepare(flash_ctx *f);
void flash_release(flash_ctx *f);

/* a device-to-device copy of *(const size_t *)ctx bytes, scratch[0] to scratch[1] */
void run_copy(const void *ctx);

#endif
