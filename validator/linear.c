/* The training step (validator/train.c, step.h): the linear layers (cuBLAS and cuBLASLt GEMMs with the
 * bias in the epilogue, or FP8 through fp8.c) and the unfused causal attention (cuBLAS batched GEMMs
 * around our softmax), as the training step runs them and as calibrate times them (train_time_linear,
 * train_time_unfused_attention). */
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "step.h"

/* GEMMs, row-major in the PyTorch convention W[out, in] */

static const float one = 1.0f, zero = 0.0f;

/* One cuBLASLt problem (column-major D = op(A) op(B) + beta C with an
 * epilogue), its descriptors and chosen algorithm kept so that a step asks
 * the heuristic once per shape, not once per call. */
typedef struct {
    int ta, tb, m, n, k, lda, ldb, ldc, accumulate;
    cublasLtEpilogue_t epilogue;
    cublasLtMatmulDesc_t desc;
    cublasLtMatrixLayout_t a, b, c;
    cublasLtMatmulAlgo_t algo;
    int usable;
} lt_plan;
#define LT_PLANS 64
static lt_plan lt_plans[LT_PLANS];
static int lt_nplans;

static lt_plan *lt_find(int ta, int tb, int m, int n, int k, int lda, int ldb, int ldc, int accumulate, cublasLtEpilogue_t epi)
{
    for (int i = 0; i < lt_nplans; i++) {
        lt_plan *p = &lt_plans[i];
        if (p->ta == ta && p->tb == tb && p->m == m && p->n == n && p->k == k && p->lda == lda && p->ldb == ldb &&
            p->ldc == ldc && p->accumulate == accumulate && p->epilogue == epi)
            return p;
    }
    if (lt_nplans == LT_PLANS) return NULL;
    lt_plan *p = &lt_plans[lt_nplans++];
    *p = (lt_plan){ta, tb, m, n, k, lda, ldb, ldc, accumulate, epi, 0, 0, 0, 0, {{0}}, 0};
    cublasOperation_t opa = ta ? CUBLAS_OP_T : CUBLAS_OP_N, opb = tb ? CUBLAS_OP_T : CUBLAS_OP_N;
    cudaDataType_t bias_type = CUDA_R_16BF;
    CB(cublasLtMatmulDescCreate(&p->desc, CUBLAS_COMPUTE_32F, CUDA_R_32F));
    CB(cublasLtMatmulDescSetAttribute(p->desc, CUBLASLT_MATMUL_DESC_TRANSA, &opa, sizeof opa));
    CB(cublasLtMatmulDescSetAttribute(p->desc, CUBLASLT_MATMUL_DESC_TRANSB, &opb, sizeof opb));
    CB(cublasLtMatmulDescSetAttribute(p->desc, CUBLASLT_MATMUL_DESC_EPILOGUE, &epi, sizeof epi));
    CB(cublasLtMatmulDescSetAttribute(p->desc, CUBLASLT_MATMUL_DESC_BIAS_DATA_TYPE, &bias_type, sizeof bias_type));
    CB(cublasLtMatrixLayoutCreate(&p->a, CUDA_R_16BF, ta ? k : m, ta ? m : k, lda));
    CB(cublasLtMatrixLayoutCreate(&p->b, CUDA_R_16BF, tb ? n : k, tb ? k : n, ldb));
    CB(cublasLtMatrixLayoutCreate(&p->c, CUDA_R_16BF, m, n, ldc));
    cublasLtMatmulPreference_t pref;
    size_t ws = LT_WORKSPACE_BYTES;
    CB(cublasLtMatmulPreferenceCreate(&pref));
    CB(cublasLtMatmulPreferenceSetAttribute(pref, CUBLASLT_MATMUL_PREF_MAX_WORKSPACE_BYTES, &ws, sizeof ws));
    cublasLtMatmulHeuristicResult_t result;
    int found = 0;
    if (cublasLtMatmulAlgoGetHeuristic(gpu_ctx.lt, p->desc, p->a, p->b, p->c, p->c, pref, 1, &result, &found) ==
            CUBLAS_STATUS_SUCCESS && found > 0) {
        p->algo = result.algo;
        p->usable = 1;
    }
    CB(cublasLtMatmulPreferenceDestroy(pref));
    return p;
}

/* D = op(A) op(B) (+ C) with `bias` in the epilogue; 0 when cuBLASLt has
 * no algorithm for it, and the caller falls back to plain GEMMs. */
static int lt_gemm(int ta, int tb, int m, int n, int k, const bf16 *A, int lda, const bf16 *Bm, int ldb, int accumulate,
                   bf16 *C, int ldc, cublasLtEpilogue_t epi, const void *bias)
{
    lt_plan *p = lt_find(ta, tb, m, n, k, lda, ldb, ldc, accumulate, epi);
    if (!p || !p->usable) return 0;
    CB(cublasLtMatmulDescSetAttribute(p->desc, CUBLASLT_MATMUL_DESC_BIAS_POINTER, &bias, sizeof bias));
    CB(cublasLtMatmul(gpu_ctx.lt, p->desc, &one, A, p->a, Bm, p->b, accumulate ? &one : &zero, C, p->c, C, p->c, &p->algo,
                       gpu_ctx.lt_workspace, LT_WORKSPACE_BYTES, gpu_ctx.stream));
    return 1;
}

void lt_free(void)
{
    for (int i = 0; i < lt_nplans; i++) {
        CB(cublasLtMatrixLayoutDestroy(lt_plans[i].a));
        CB(cublasLtMatrixLayoutDestroy(lt_plans[i].b));
        CB(cublasLtMatrixLayoutDestroy(lt_plans[i].c));
        CB(cublasLtMatmulDescDestroy(lt_plans[i].desc));
    }
    lt_nplans = 0;
}

int train_fp8;        /* --precision fp8: the linear layers' GEMMs through fp8.c */

/* FP8 for every linear layer but the vocabulary projection, which stays in bf16 as in
 * Megatron with Transformer Engine (its logits feed the loss directly) */
static int use_fp8(const char *name) { return train_fp8 && strncmp(name, "lm_head", 7) != 0; }

int bias_fallbacks;   /* GEMMs whose bias ran as a separate rank-one GEMM */
int bias_accumulate;  /* a later micro-batch of the step: bias gradients add up, the epilogue would overwrite */

/* y[N, out] = x[N, in] W^T (+ bias, in the GEMM's epilogue); 1 when the bias
 * needed the rank-one fallback */
static int linear_forward_gemm(bf16 *y, const bf16 *x, const bf16 *w, const bf16 *bias, const bf16 *ones, int N, int in,
                               int out, int fp8)
{
    if (fp8 && (fp8_linear_forward(y, x, w, bias, N, in, out, gpu_ctx.stream) || !bias)) return 0;
    if (fp8) { /* the FP8 GEMM ran without its bias: the rank-one update below adds it */
        CB(cublasGemmEx(gpu_ctx.blas, CUBLAS_OP_N, CUBLAS_OP_N, out, N, 1, &one, bias, CUDA_R_16BF, out, ones, CUDA_R_16BF, 1, &one,
                        y, CUDA_R_16BF, out, CUBLAS_COMPUTE_32F, CUBLAS_GEMM_DEFAULT));
        return 1;
    }
    if (bias && lt_gemm(1, 0, out, N, in, w, in, x, in, 0, y, out, CUBLASLT_EPILOGUE_BIAS, bias)) return 0;
    CB(cublasGemmEx(gpu_ctx.blas, CUBLAS_OP_T, CUBLAS_OP_N, out, N, in, &one, w, CUDA_R_16BF, in, x, CUDA_R_16BF, in, &zero, y,
                    CUDA_R_16BF, out, CUBLAS_COMPUTE_32F, CUBLAS_GEMM_DEFAULT));
    if (!bias) return 0;
    /* y += bias 1^T, a rank-one update */
    CB(cublasGemmEx(gpu_ctx.blas, CUBLAS_OP_N, CUBLAS_OP_N, out, N, 1, &one, bias, CUDA_R_16BF, out, ones, CUDA_R_16BF, 1, &one, y,
                    CUDA_R_16BF, out, CUBLAS_COMPUTE_32F, CUBLAS_GEMM_DEFAULT));
    return 1;
}
void linear_forward(const char *name, bf16 *y, const bf16 *x, const bf16 *w, const bf16 *bias, const bf16 *ones, int N,
                    int in, int out)
{
    profile_mark(name, 0);
    bias_fallbacks += linear_forward_gemm(y, x, w, bias, ones, N, in, out, use_fp8(name));
    profile_mark(name, 1);
    if (replay_wanted()) {
        replay_mark(name, 0);
        for (int r = 0; r < replay_runs; r++) (void)linear_forward_gemm(y, x, w, bias, ones, N, in, out, use_fp8(name));
        replay_mark(name, 1);
    }
}

/* dx = dy W */
static void linear_dgrad_gemm(bf16 *dx, const bf16 *dy, const bf16 *w, int N, int in, int out, int fp8)
{
    if (fp8) { fp8_linear_dgrad(dx, dy, w, N, in, out, gpu_ctx.stream); return; }
    CB(cublasGemmEx(gpu_ctx.blas, CUBLAS_OP_N, CUBLAS_OP_N, in, N, out, &one, w, CUDA_R_16BF, in, dy, CUDA_R_16BF, out, &zero, dx,
                    CUDA_R_16BF, in, CUBLAS_COMPUTE_32F, CUBLAS_GEMM_DEFAULT));
}
static void linear_dgrad(const char *name, bf16 *dx, const bf16 *dy, const bf16 *w, int N, int in, int out)
{
    profile_mark(name, 0);
    linear_dgrad_gemm(dx, dy, w, N, in, out, use_fp8(name));
    profile_mark(name, 1);
    if (replay_wanted()) {
        replay_mark(name, 0);
        for (int r = 0; r < replay_runs; r++) linear_dgrad_gemm(dx, dy, w, N, in, out, use_fp8(name));
        replay_mark(name, 1);
    }
}

/* dW += dy^T x; dbias (+)= dy^T 1, in the GEMM's epilogue for a step's first
 * micro-batch (the epilogue writes, it cannot add); 1 when the bias gradient
 * needed the fallback on a first micro-batch */
static int linear_wgrad_gemm(bf16 *dw, bf16 *dbias, const bf16 *dy, const bf16 *x, const bf16 *ones, int N, int in, int out,
                             int fp8)
{
    if (fp8) fp8_linear_wgrad(dw, dy, x, N, in, out, gpu_ctx.stream); /* the bias gradient below, in bf16 */
    else if (dbias && !bias_accumulate && lt_gemm(0, 1, in, out, N, x, in, dy, out, 1, dw, in, CUBLASLT_EPILOGUE_BGRADB, dbias))
        return 0;
    else
        CB(cublasGemmEx(gpu_ctx.blas, CUBLAS_OP_N, CUBLAS_OP_T, in, out, N, &one, x, CUDA_R_16BF, in, dy, CUDA_R_16BF, out, &one, dw,
                        CUDA_R_16BF, in, CUBLAS_COMPUTE_32F, CUBLAS_GEMM_DEFAULT));
    if (!dbias) return 0;
    CB(cublasGemmEx(gpu_ctx.blas, CUBLAS_OP_N, CUBLAS_OP_N, out, 1, N, &one, dy, CUDA_R_16BF, out, ones, CUDA_R_16BF, N, &one, dbias,
                    CUDA_R_16BF, out, CUBLAS_COMPUTE_32F, CUBLAS_GEMM_DEFAULT));
    return !bias_accumulate && !fp8;
}
static void linear_wgrad(const char *name, bf16 *dw, bf16 *dbias, const bf16 *dy, const bf16 *x, const bf16 *ones, int N,
                         int in, int out)
{
    profile_mark(name, 0);
    bias_fallbacks += linear_wgrad_gemm(dw, dbias, dy, x, ones, N, in, out, use_fp8(name));
    profile_mark(name, 1);
    if (replay_wanted() && replay_reserve(&replay_dw, &replay_dw_bytes, (size_t)in * out * sizeof(bf16)) &&
        (!dbias || replay_reserve(&replay_dbias, &replay_dbias_bytes, (size_t)out * sizeof(bf16)))) {
        replay_mark(name, 0);
        for (int r = 0; r < replay_runs; r++)
            (void)linear_wgrad_gemm(replay_dw, dbias ? replay_dbias : NULL, dy, x, ones, N, in, out, use_fp8(name));
        replay_mark(name, 1);
    }
}

void linear_backward(const char *dgrad, const char *wgrad, bf16 *dx, bf16 *dw, bf16 *dbias, const bf16 *dy,
                     const bf16 *x, const bf16 *w, const bf16 *ones, int N, int in, int out)
{
    linear_dgrad(dgrad, dx, dy, w, N, in, out);
    linear_wgrad(wgrad, dw, dbias, dy, x, ones, N, in, out);
}

/* Where train_time_linear's operands lie: `rot` copies of each, so that the
 * GEMMs issued back to back read operands that are not left in L2 by the
 * previous call (a step's GEMMs read what other kernels wrote) */
typedef struct {
    bf16 *x, *w, *y, *dy, *dw, *dx, *bias, *dbias, *ones;
    size_t xs, ws, ys; /* elements per copy */
    int rot, N, in, out;
} linear_operands;

typedef struct { int which; const linear_operands *o; } linear_run;
static void run_linear_gemm(const void *ctx, int r)
{
    const linear_run *lr = ctx;
    const linear_operands *o = lr->o;
    int i = r % o->rot;
    bf16 *x = o->x + i * o->xs, *w = o->w + i * o->ws, *y = o->y + i * o->ys, *dy = o->dy + i * o->ys;
    bf16 *dw = o->dw + i * o->ws;
    if (lr->which == 0) linear_forward("calibrate", y, x, w, o->bias, o->ones, o->N, o->in, o->out);
    else if (lr->which == 1) linear_dgrad("calibrate", o->dx, dy, w, o->N, o->in, o->out);
    else linear_wgrad("calibrate", dw, o->dbias, dy, x, o->ones, o->N, o->in, o->out);
}

/* calibrate's own stream, cuBLAS handles and workspaces, as a step sets them up */
static void *calibrate_blas_ws, *calibrate_lt_ws;
static void calibrate_begin(void)
{
    CK(cudaStreamCreateWithFlags(&gpu_ctx.stream, cudaStreamNonBlocking));
    CB(cublasCreate(&gpu_ctx.blas));
    CB(cublasSetStream(gpu_ctx.blas, gpu_ctx.stream));
    CK(cudaMalloc(&calibrate_blas_ws, CUBLAS_WORKSPACE_BYTES));
    CK(cudaMalloc(&calibrate_lt_ws, LT_WORKSPACE_BYTES));
    gpu_ctx.lt_workspace = calibrate_lt_ws;
    CB(cublasSetWorkspace(gpu_ctx.blas, calibrate_blas_ws, CUBLAS_WORKSPACE_BYTES));
    CB(cublasLtCreate(&gpu_ctx.lt));
    bias_accumulate = 0;
}
static void calibrate_end(void)
{
    lt_free();
    CB(cublasLtDestroy(gpu_ctx.lt));
    CB(cublasDestroy(gpu_ctx.blas));
    CK(cudaFree(calibrate_lt_ws));
    CK(cudaFree(calibrate_blas_ws));
    CK(cudaStreamDestroy(gpu_ctx.stream));
    calibrate_lt_ws = calibrate_blas_ws = NULL;
    gpu_ctx.lt_workspace = NULL;
    gpu_ctx.blas = NULL;
    gpu_ctx.lt = NULL;
    gpu_ctx.stream = NULL;
}

int train_time_linear(int N, int in, int out, int with_bias, void *const buffers[4], size_t buffer_bytes, double seconds[3],
                      double clock_mhz[3])
{
    const size_t E = sizeof(bf16);
    size_t xs = (size_t)N * in, ys = (size_t)N * out, ws = (size_t)in * out;
    size_t vs = 256 * (((size_t)out * E + 255) / 256), os = 256 * (((size_t)N * E + 255) / 256);
    /* copies enough to pass 192 MB (four times an H100's or H200's L2) per turn, as many as fit */
    int rot = (int)((192u << 20) / ((xs + ws + ys) * E)) + 1;
    if (rot > 8) rot = 8;
    while (rot > 1 && ((rot + 1) * xs * E > buffer_bytes || rot * ys * E > buffer_bytes ||
                       2 * rot * ws * E + 2 * vs + os > buffer_bytes))
        rot--;
    if (N <= 0 || in <= 0 || out <= 0 || 2 * xs * E > buffer_bytes || ys * E > buffer_bytes ||
        2 * ws * E + 2 * vs + os > buffer_bytes) {
        fprintf(stderr, "sextant-gpu calibrate: GEMM %d x %d x %d does not fit the %.2f GiB buffers\n", N, out, in,
                buffer_bytes / 1073741824.0);
        return -1;
    }
    /* the buffers hold random bf16 in [-1, 1): x copies then dx; W copies, dW copies, the
     * biases and a vector for the bias fallback; y copies; dy copies */
    linear_operands o;
    o.xs = xs; o.ws = ws; o.ys = ys; o.rot = rot; o.N = N; o.in = in; o.out = out;
    o.x = buffers[0];
    o.dx = o.x + rot * xs;
    o.w = buffers[1];
    o.dw = o.w + rot * ws;
    bf16 *biases = (bf16 *)((char *)buffers[1] + 2 * rot * ws * E);
    o.bias = with_bias ? biases : NULL;
    o.dbias = with_bias ? (bf16 *)((char *)biases + vs) : NULL;
    o.ones = (bf16 *)((char *)biases + 2 * vs);
    o.y = buffers[2];
    o.dy = buffers[3];
    calibrate_begin();
    /* about 5 ms of GEMMs per batch: launch gaps hide as they do in a step */
    double flops = 2.0 * N * (double)in * out;
    int reps = (int)(5e-3 / (flops / 500e12)) + 1;
    if (reps > 1000) reps = 1000;
    for (int which = 0; which < 3; which++) {
        linear_run lr = {which, &o};
        seconds[which] = time_batches(run_linear_gemm, &lr, reps, clock_mhz ? clock_mhz + which : NULL);
    }
    calibrate_end();
    return 0;
}

void attention_pointers(attention_ptrs *ap, const bf16 *qkv, const bf16 *att, const bf16 *out, const bf16 *dqkv,
                        const bf16 *datt, const bf16 *dout, const shapes *s)
{
    int BH = s->B * s->H, BKV = s->B * s->KV, T = s->T, D = s->D, G = s->H / s->KV, W = s->qkv, A = s->H * s->D;
    size_t slots = 8 * (size_t)BH + 2 * (size_t)BKV;
    const void **host = malloc(slots * sizeof *host);
    if (!host) { fprintf(stderr, "sextant-gpu train: rank %d: out of host memory\n", my_rank); exit(1); }
    for (int g = 0; g < G; g++)
        for (int b = 0; b < s->B; b++)
            for (int kv = 0; kv < s->KV; kv++) {
                int i = (g * s->B + b) * s->KV + kv, h = kv * G + g;
                size_t row = (size_t)b * T * W;
                size_t q = row + (size_t)h * D, k = row + (size_t)(s->H + kv) * D, v = row + (size_t)(s->H + s->KV + kv) * D;
                size_t scores = ((size_t)b * s->H + h) * T * T, o = (size_t)b * T * A + (size_t)h * D;
                host[0 * BH + i] = qkv + q;
                host[1 * BH + i] = qkv + k;
                host[2 * BH + i] = qkv + v;
                host[3 * BH + i] = att + scores;
                host[4 * BH + i] = out + o;
                host[5 * BH + i] = dqkv + q;
                host[6 * BH + i] = datt + scores;
                host[7 * BH + i] = dout + o;
                if (g == 0) {
                    host[8 * BH + b * s->KV + kv] = dqkv + k;
                    host[8 * BH + BKV + b * s->KV + kv] = dqkv + v;
                }
            }
    if (!ap->block) CK(cudaMalloc(&ap->block, slots * sizeof(void *)));
    CK(cudaMemcpy(ap->block, host, slots * sizeof(void *), cudaMemcpyHostToDevice));
    free(host);
    const void **dev = ap->block;
    ap->q = dev; ap->k = dev + BH; ap->v = dev + 2 * BH; ap->s = dev + 3 * BH; ap->o = dev + 4 * BH;
    ap->dq = dev + 5 * BH; ap->ds = dev + 6 * BH; ap->dout = dev + 7 * BH;
    ap->dk = dev + 8 * BH; ap->dv = dev + 8 * BH + BKV;
}

#define BATCHED(ta, tb, m, n, k, A, lda, B, ldb, beta, Cm, ldc, count)                                              \
    CB(cublasGemmBatchedEx(gpu_ctx.blas, ta, tb, m, n, k, &one, (const void *const *)(A), CUDA_R_16BF, lda,                 \
                           (const void *const *)(B), CUDA_R_16BF, ldb, beta, (void *const *)(Cm), CUDA_R_16BF, ldc, \
                           count, CUBLAS_COMPUTE_32F, CUBLAS_GEMM_DEFAULT))

/* Forward of causal attention from the layer's qkv into atty. */
void attention_forward(const attention_ptrs *ap, bf16 *att, const bf16 *scores, const shapes *s)
{
    int BH = s->B * s->H, T = s->T, D = s->D, W = s->qkv, A = s->H * s->D;
    /* S^T = K Q^T, column-major: S row-major [T, T], into the shared
     * scratch; the softmax writes the probabilities kept for backward */
    BATCHED(CUBLAS_OP_T, CUBLAS_OP_N, T, T, D, ap->k, W, ap->q, W, &zero, ap->ds, T, BH);
    CK(sx_softmax_causal_forward(att, scores, BH, T, 1.0f / sqrtf((float)D), gpu_ctx.stream));
    /* O^T = V^T P^T */
    BATCHED(CUBLAS_OP_N, CUBLAS_OP_N, D, T, T, ap->v, W, ap->s, T, &zero, ap->o, A, BH);
}

void attention_backward(const attention_ptrs *ap, bf16 *att, bf16 *datt, const shapes *s)
{
    int BH = s->B * s->H, BKV = s->B * s->KV, T = s->T, D = s->D, W = s->qkv, A = s->H * s->D, G = s->H / s->KV;
    BATCHED(CUBLAS_OP_T, CUBLAS_OP_N, T, T, D, ap->v, W, ap->dout, A, &zero, ap->ds, T, BH);  /* dP = dO V^T */
    for (int g = 0; g < G; g++)                                                              /* dV = P^T dO */
        BATCHED(CUBLAS_OP_N, CUBLAS_OP_T, D, T, T, ap->dout + g * BKV, A, ap->s + g * BKV, T, g ? &one : &zero, ap->dv, W, BKV);
    CK(sx_softmax_causal_backward(datt, att, datt, BH, T, 1.0f / sqrtf((float)D), gpu_ctx.stream));
    BATCHED(CUBLAS_OP_N, CUBLAS_OP_N, D, T, T, ap->k, W, ap->ds, T, &zero, ap->dq, W, BH); /* dQ = dS K */
    for (int g = 0; g < G; g++)                                                              /* dK = dS^T Q */
        BATCHED(CUBLAS_OP_N, CUBLAS_OP_T, D, T, T, ap->q + g * BKV, W, ap->ds + g * BKV, T, g ? &one : &zero, ap->dk, W, BKV);
}

/* calibrate: the unfused attention's forward (two batched GEMMs around the causal softmax)
 * and backward (dP, dV, the softmax backward, dQ, dK; dV and dK once per query head of a
 * KV head) as the step runs them, on the random data of calibrate's buffers: qkv then dout
 * in buffers[0], the probabilities in buffers[1], the output in buffers[2], dqkv then the
 * scores (the step's shared scratch) in buffers[3].  Seconds per call; -1 when the shape
 * does not fit the buffers. */
typedef struct { const attention_ptrs *ap; bf16 *att, *datt; const shapes *s; int backward; } attention_run;
static void run_unfused_attention(const void *ctx, int r)
{
    const attention_run *ar = ctx;
    (void)r;
    if (ar->backward) attention_backward(ar->ap, ar->att, ar->datt, ar->s);
    else attention_forward(ar->ap, ar->att, ar->datt, ar->s);
}

int train_time_unfused_attention(int B, int T, int H, int KV, int D, void *const buffers[4], size_t buffer_bytes,
                                 double seconds[2], double clock_mhz[2])
{
    const size_t E = sizeof(bf16);
    if (B <= 0 || T <= 0 || H <= 0 || KV <= 0 || D <= 0 || H % KV) return -1;
    shapes s;
    memset(&s, 0, sizeof s);
    s.B = B; s.T = T; s.H = H; s.KV = KV; s.D = D; s.qkv = (H + 2 * KV) * D;
    const size_t qkv_bytes = 256 * (((size_t)B * T * s.qkv * E + 255) / 256), out_bytes = (size_t)B * T * H * D * E;
    const size_t score_bytes = (size_t)B * H * T * T * E;
    if (qkv_bytes + out_bytes > buffer_bytes || score_bytes > buffer_bytes || qkv_bytes + score_bytes > buffer_bytes)
        return -1;
    bf16 *qkv = buffers[0], *dout = (bf16 *)((char *)buffers[0] + qkv_bytes), *att = buffers[1], *out = buffers[2];
    bf16 *dqkv = buffers[3], *datt = (bf16 *)((char *)buffers[3] + qkv_bytes);
    calibrate_begin();
    attention_ptrs ap = {0};
    attention_pointers(&ap, qkv, att, out, dqkv, datt, dout, &s);
    /* about 5 ms per batch at 300 TFLOP/s; cuBLAS computes the whole T x T square */
    const double fwd_flops = 4.0 * B * H * (double)T * T * D;
    for (int pass = 0; pass < 2; pass++) {
        attention_run ar = {&ap, att, datt, &s, pass};
        int reps = (int)(5e-3 / ((pass ? 2.0 : 1.0) * fwd_flops / 300e12)) + 1;
        if (reps > 200) reps = 200;
        /* the forward first: the backward reads its probabilities */
        seconds[pass] = time_batches(run_unfused_attention, &ar, reps, clock_mhz ? clock_mhz + pass : NULL);
    }
    CK(cudaFree(ap.block));
    calibrate_end();
    return 0;
}
