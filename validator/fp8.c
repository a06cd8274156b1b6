/* FP8 GEMMs for the training step: Transformer Engine's per-tensor recipe on cuBLASLt.
 *
 * Each GEMM casts its two bf16 operands to FP8 right before it runs (kernels/fp8.cu): the
 * amax of the tensor now, the scale max(format) / amax, the cast with saturation.  Weights
 * and activations go to E4M3 (3 mantissa bits, range 448), gradients to E5M2 (2 bits, range
 * 57344: gradients span more decades than they need digits).  This is "current" scaling, one
 * more read of each operand than TE's delayed scaling (the amax of earlier steps), chosen
 * because it cannot overflow on a step whose values jumped.  cuBLASLt multiplies the
 * product by both operands' 1 / scale and writes bf16 with fp32 accumulation; the forward
 * uses the fast accumulation TE uses there, the two backward GEMMs full fp32 accumulation
 * (TE's defaults: the gradients are the precision-sensitive part).
 *
 * cuBLASLt's FP8 kernels take A transposed and B not (column-major "TN"): both operands
 * K-contiguous.  In row-major W[out, in] terms:
 *   forward  y[N, out]  = x W^T   A = W     [out, in]  B = x     [N, in]    K = in
 *   dgrad    dx[N, in]  = dy W    A = W^T   [in, out]  B = dy    [N, out]   K = out
 *   wgrad    dW[out,in] += dy^T x A = x^T   [in, N]    B = dy^T  [out, N]   K = N
 * so the cast writes the transposed copy where a GEMM needs one.
 *
 * Two casts are made once for two GEMMs, as Transformer Engine makes them (and the planner costs
 * them, docs/model.md "FP8 GEMMs"): the output gradient dy is cast into both layouts by the dgrad
 * and read again by the wgrad right after it; and in training (fp8_weight_cache) each weight is
 * cast once per step into both layouts, kept with its own scale until fp8_step_begin. */
#include "fp8.h"

#include <math.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "reference.h"
#include "gpu_check.h"
#include "gpu_timing.h"

#define FP8_ALGOS 8

typedef struct {
    int m, n, k, lda, ldb, ldc, accumulate, fast, bias;
    cudaDataType_t ta, tb; /* CUDA_R_8F_E4M3 / _E5M2, or CUDA_R_16BF for calibrate's bf16 reference */
    cublasLtMatmulDesc_t desc;
    cublasLtMatrixLayout_t a, b, c;
    cublasLtMatmulAlgo_t algo[FP8_ALGOS]; /* the heuristic's answers, best first */
    int nalgo, chosen;                    /* chosen: the first that ran, -1 before the first call */
    int usable;
} fp8_plan;

#define FP8_PLANS 96
static fp8_plan plans[FP8_PLANS];
static int nplans;
static cublasLtHandle_t lt_handle;
static void *lt_ws;
static size_t lt_ws_bytes;
/* device: amax of A, amax of B, 1/scale of A, 1/scale of B, each at its own 256 bytes.  cuBLASLt
 * wants scale pointers 16-byte aligned (PyTorch #159957, from the cuBLAS team).  Packed as four
 * floats, every FP8 cublasLtMatmul on 2 x H200 (cuBLAS 13) came back not supported (status 15);
 * this spacing is the likely fix, not yet run on a GPU. */
#define SLOT_STRIDE 64
#define AMAX_SLOT(i) (slots + SLOT_STRIDE * (i))
#define SCALE_INV_SLOT(i) (slots + SLOT_STRIDE * (2 + (i)))
static float *slots;
static sx_fp8 *op_a, *op_b;          /* the current GEMM's FP8 operands */
static size_t op_a_bytes, op_b_bytes;
static sx_fp8 *op_dyt;               /* the output gradient transposed, cast by the dgrad for the wgrad */
static size_t op_dyt_bytes;
/* the dgrad's dy, whose casts (op_b, op_dyt) and scale (slot 1) the next wgrad may take: only
 * the wgrad right after it, of the same tensor */
static struct { const sx_bf16 *dy; int N, out, valid; } dy_cast;
static const float one = 1.0f, zero = 0.0f;

/* The weight cache: each weight's FP8 copies, plain and transposed, and its amax and 1 / scale
 * (device, at their own 256 bytes), cast at its first GEMM of a step.  Keyed by the weight's
 * address, so only for weights that stay where they are (not ZeRO-3's shared gather buffers). */
typedef struct {
    const sx_bf16 *w;
    int out, in;
    unsigned step;
    sx_fp8 *plain, *transposed;
    float *amax_scale;   /* [0] amax, [SLOT_STRIDE] 1 / scale */
} weight_cast;
static weight_cast *weights;
static int nweights, weights_cap, weight_cache_on;
static unsigned weight_step = 1;
static size_t weight_cache_bytes;

int fp8_supported(char *why, size_t len)
{
    int dev = 0, major = 0, minor = 0;
    if (cudaGetDevice(&dev) != cudaSuccess ||
        cudaDeviceGetAttribute(&major, cudaDevAttrComputeCapabilityMajor, dev) != cudaSuccess ||
        cudaDeviceGetAttribute(&minor, cudaDevAttrComputeCapabilityMinor, dev) != cudaSuccess) {
        snprintf(why, len, "cannot read the GPU's compute capability");
        return -1;
    }
    if (major * 10 + minor < 89) {
        snprintf(why, len, "FP8 GEMMs need compute capability 8.9 or later (Ada, Hopper); this GPU is sm_%d%d", major,
                 minor);
        return -1;
    }
    return 0;
}

void fp8_init(cublasLtHandle_t lt, void *workspace, size_t workspace_bytes)
{
    lt_handle = lt;
    lt_ws = workspace;
    lt_ws_bytes = workspace_bytes;
    if (!slots) {
        CK(cudaMalloc((void **)&slots, 4 * SLOT_STRIDE * sizeof *slots));
        CK(cudaMemset(slots, 0, 4 * SLOT_STRIDE * sizeof *slots));
    }
}

static void grow(sx_fp8 **buf, size_t *have, size_t bytes)
{
    if (bytes <= *have) return;
    if (*buf) CK(cudaFree(*buf));
    CK(cudaMalloc((void **)buf, bytes));
    *have = bytes;
}

size_t fp8_buffer_bytes(void) { return op_a_bytes + op_b_bytes + op_dyt_bytes + weight_cache_bytes; }

void fp8_weight_cache(int on) { weight_cache_on = on; }

void fp8_step_begin(void) { weight_step++; }

static void weights_free(void)
{
    for (int i = 0; i < nweights; i++) {
        CK(cudaFree(weights[i].plain));
        CK(cudaFree(weights[i].transposed));
        CK(cudaFree(weights[i].amax_scale));
    }
    free(weights);
    weights = NULL;
    nweights = weights_cap = 0;
    weight_cache_bytes = 0;
}

/* Destroys the plans from `keep` on. */
static void plans_truncate(int keep)
{
    for (int i = keep; i < nplans; i++) {
        CB(cublasLtMatrixLayoutDestroy(plans[i].a));
        CB(cublasLtMatrixLayoutDestroy(plans[i].b));
        CB(cublasLtMatrixLayoutDestroy(plans[i].c));
        CB(cublasLtMatmulDescDestroy(plans[i].desc));
    }
    if (keep < nplans) nplans = keep;
}

void fp8_free(void)
{
    plans_truncate(0);
    if (op_a) CK(cudaFree(op_a));
    if (op_b) CK(cudaFree(op_b));
    if (op_dyt) CK(cudaFree(op_dyt));
    if (slots) CK(cudaFree(slots));
    op_a = op_b = op_dyt = NULL;
    slots = NULL;
    op_a_bytes = op_b_bytes = op_dyt_bytes = 0;
    dy_cast.valid = 0;
    weights_free();
    weight_cache_on = 0;
}

/* The plan of one column-major TN problem D[m, n] = A^T B (+ C), asked of the heuristic once. */
static fp8_plan *plan_of(int m, int n, int k, int lda, int ldb, int ldc, int accumulate, int fast, int bias,
                         cudaDataType_t ta, cudaDataType_t tb)
{
    for (int i = 0; i < nplans; i++) {
        fp8_plan *p = &plans[i];
        if (p->m == m && p->n == n && p->k == k && p->lda == lda && p->ldb == ldb && p->ldc == ldc &&
            p->accumulate == accumulate && p->fast == fast && p->bias == bias && p->ta == ta && p->tb == tb)
            return p;
    }
    if (nplans == FP8_PLANS) {
        fprintf(stderr, "sextant-gpu train: rank %d: more than %d FP8 GEMM shapes\n", my_rank, FP8_PLANS);
        exit(1);
    }
    fp8_plan *p = &plans[nplans++];
    memset(p, 0, sizeof *p);
    *p = (fp8_plan){.m = m, .n = n, .k = k, .lda = lda, .ldb = ldb, .ldc = ldc, .accumulate = accumulate, .fast = fast,
                    .bias = bias, .ta = ta, .tb = tb};
    cublasOperation_t opa = CUBLAS_OP_T, opb = CUBLAS_OP_N;
    cublasLtEpilogue_t epi = bias ? CUBLASLT_EPILOGUE_BIAS : CUBLASLT_EPILOGUE_DEFAULT;
    cudaDataType_t bias_type = CUDA_R_16BF;
    int8_t fast_accum = (int8_t)fast;
    CB(cublasLtMatmulDescCreate(&p->desc, CUBLAS_COMPUTE_32F, CUDA_R_32F));
    CB(cublasLtMatmulDescSetAttribute(p->desc, CUBLASLT_MATMUL_DESC_TRANSA, &opa, sizeof opa));
    CB(cublasLtMatmulDescSetAttribute(p->desc, CUBLASLT_MATMUL_DESC_TRANSB, &opb, sizeof opb));
    CB(cublasLtMatmulDescSetAttribute(p->desc, CUBLASLT_MATMUL_DESC_EPILOGUE, &epi, sizeof epi));
    if (bias) CB(cublasLtMatmulDescSetAttribute(p->desc, CUBLASLT_MATMUL_DESC_BIAS_DATA_TYPE, &bias_type, sizeof bias_type));
    if (ta != CUDA_R_16BF) {
        const float *sa = SCALE_INV_SLOT(0), *sb = SCALE_INV_SLOT(1);
        CB(cublasLtMatmulDescSetAttribute(p->desc, CUBLASLT_MATMUL_DESC_A_SCALE_POINTER, &sa, sizeof sa));
        CB(cublasLtMatmulDescSetAttribute(p->desc, CUBLASLT_MATMUL_DESC_B_SCALE_POINTER, &sb, sizeof sb));
        CB(cublasLtMatmulDescSetAttribute(p->desc, CUBLASLT_MATMUL_DESC_FAST_ACCUM, &fast_accum, sizeof fast_accum));
    }
    CB(cublasLtMatrixLayoutCreate(&p->a, ta, k, m, lda));
    CB(cublasLtMatrixLayoutCreate(&p->b, tb, k, n, ldb));
    CB(cublasLtMatrixLayoutCreate(&p->c, CUDA_R_16BF, m, n, ldc));
    cublasLtMatmulPreference_t pref;
    size_t ws = lt_ws_bytes;
    CB(cublasLtMatmulPreferenceCreate(&pref));
    CB(cublasLtMatmulPreferenceSetAttribute(pref, CUBLASLT_MATMUL_PREF_MAX_WORKSPACE_BYTES, &ws, sizeof ws));
    cublasLtMatmulHeuristicResult_t result[FP8_ALGOS];
    int found = 0;
    /* no algorithm is an answer, not an error: the caller decides (the bias moves out of the epilogue) */
    if (cublasLtMatmulAlgoGetHeuristic(lt_handle, p->desc, p->a, p->b, p->c, p->c, pref, FP8_ALGOS, result, &found) ==
            CUBLAS_STATUS_SUCCESS && found > 0) {
        for (int i = 0; i < found && i < FP8_ALGOS; i++) p->algo[i] = result[i].algo;
        p->nalgo = found < FP8_ALGOS ? found : FP8_ALGOS;
        p->usable = 1;
    }
    p->chosen = -1;
    CB(cublasLtMatmulPreferenceDestroy(pref));
    return p;
}

/* 1 when p ran; 0 when cuBLASLt refused every algorithm the heuristic offered (p is then marked
 * unusable).  The heuristic does not see the pointers, so cublasLtMatmul may still answer "not
 * supported" (status 15): the first call tries the answers in turn, and a caller can fall back
 * (the bias out of the epilogue, the other accumulation).  Any other failure stops the run. */
static int run_plan(fp8_plan *p, const void *A, const void *Bm, sx_bf16 *C, const sx_bf16 *bias, cudaStream_t stream)
{
    if (!p->usable) return 0;
    if (p->bias) CB(cublasLtMatmulDescSetAttribute(p->desc, CUBLASLT_MATMUL_DESC_BIAS_POINTER, &bias, sizeof bias));
    const float *beta = p->accumulate ? &one : &zero;
    if (p->chosen >= 0) {
        CB(cublasLtMatmul(lt_handle, p->desc, &one, A, p->a, Bm, p->b, beta, C, p->c, C, p->c, &p->algo[p->chosen], lt_ws,
                           lt_ws_bytes, stream));
        return 1;
    }
    for (int i = 0; i < p->nalgo; i++) {
        cublasStatus_t status = cublasLtMatmul(lt_handle, p->desc, &one, A, p->a, Bm, p->b, beta, C, p->c, C, p->c,
                                               &p->algo[i], lt_ws, lt_ws_bytes, stream);
        if (status == CUBLAS_STATUS_NOT_SUPPORTED) continue;
        CB(status);
        p->chosen = i;
        return 1;
    }
    p->usable = 0;
    return 0;
}

/* Runs a GEMM without bias in the accumulation asked for, else in the other one; with neither,
 * stops the run with one line (FP8 wants dimensions that are multiples of 16). */
static void run_fp8(const char *what, int m, int n, int k, int lda, int ldb, int ldc, int accumulate, int fast,
                    cudaDataType_t ta, cudaDataType_t tb, const void *A, const void *Bm, sx_bf16 *C, cudaStream_t stream)
{
    for (int tries = 0; tries < 2; tries++, fast = !fast)
        if (run_plan(plan_of(m, n, k, lda, ldb, ldc, accumulate, fast, 0, ta, tb), A, Bm, C, NULL, stream)) return;
    fprintf(stderr, "sextant-gpu train: rank %d: cuBLASLt runs no FP8 algorithm for the %s GEMM %d x %d x %d (FP8 wants "
            "multiples of 16)\n", my_rank, what, m, n, k);
    exit(1);
}

/* src [rows, cols] bf16 -> dst in `fmt`, plain or transposed, its 1 / scale in SCALE_INV_SLOT(slot) */
static void cast(sx_fp8 *dst, int transposed, const sx_bf16 *src, int rows, int cols, sx_fp8_format fmt, int slot,
                 cudaStream_t stream)
{
    CK(sx_fp8_amax(AMAX_SLOT(slot), src, (size_t)rows * cols, stream));
    CK(sx_fp8_cast(transposed ? NULL : dst, transposed ? dst : NULL, SCALE_INV_SLOT(slot), src, AMAX_SLOT(slot), rows, cols,
                   fmt, stream));
}

/* W [out, in] in E4M3 as GEMM operand A, its 1 / scale in slot 0: plain (forward) or transposed (dgrad).
 * With the cache on, the step's first GEMM of W casts both layouts once; later ones copy its scale. */
static const sx_fp8 *weight_operand(const sx_bf16 *w, int out, int in, int transposed, cudaStream_t stream)
{
    if (!weight_cache_on) {
        grow(&op_a, &op_a_bytes, (size_t)out * in);
        cast(op_a, transposed, w, out, in, SX_E4M3, 0, stream);
        return op_a;
    }
    weight_cast *c = NULL;
    for (int i = 0; i < nweights && !c; i++)
        if (weights[i].w == w && weights[i].out == out && weights[i].in == in) c = &weights[i];
    if (!c) {
        if (nweights == weights_cap) {
            int cap = weights_cap ? 2 * weights_cap : 64;
            weight_cast *grown = realloc(weights, (size_t)cap * sizeof *grown);
            if (!grown) { fprintf(stderr, "sextant-gpu train: rank %d: out of host memory (FP8 weights)\n", my_rank); exit(1); }
            weights = grown;
            weights_cap = cap;
        }
        c = &weights[nweights++];
        *c = (weight_cast){.w = w, .out = out, .in = in, .step = 0};
        CK(cudaMalloc((void **)&c->plain, (size_t)out * in));
        CK(cudaMalloc((void **)&c->transposed, (size_t)out * in));
        CK(cudaMalloc((void **)&c->amax_scale, 2 * SLOT_STRIDE * sizeof(float)));
        weight_cache_bytes += 2 * (size_t)out * in + 2 * SLOT_STRIDE * sizeof(float);
    }
    if (c->step != weight_step) {
        CK(sx_fp8_amax(c->amax_scale, w, (size_t)out * in, stream));
        CK(sx_fp8_cast(c->plain, c->transposed, c->amax_scale + SLOT_STRIDE, w, c->amax_scale, out, in, SX_E4M3, stream));
        c->step = weight_step;
    }
    CK(cudaMemcpyAsync(SCALE_INV_SLOT(0), c->amax_scale + SLOT_STRIDE, sizeof(float), cudaMemcpyDeviceToDevice, stream));
    return transposed ? c->transposed : c->plain;
}

int fp8_linear_forward(sx_bf16 *y, const sx_bf16 *x, const sx_bf16 *w, const sx_bf16 *bias, int N, int in, int out,
                       cudaStream_t stream)
{
    dy_cast.valid = 0;
    const sx_fp8 *a = weight_operand(w, out, in, 0, stream);
    grow(&op_b, &op_b_bytes, (size_t)N * in);
    cast(op_b, 0, x, N, in, SX_E4M3, 1, stream);
    if (bias && run_plan(plan_of(out, N, in, in, in, out, 0, 1, 1, CUDA_R_8F_E4M3, CUDA_R_8F_E4M3), a, op_b, y, bias,
                         stream))
        return 1;
    run_fp8("forward", out, N, in, in, in, out, 0, 1, CUDA_R_8F_E4M3, CUDA_R_8F_E4M3, a, op_b, y, stream);
    return 0;
}

void fp8_linear_dgrad(sx_bf16 *dx, const sx_bf16 *dy, const sx_bf16 *w, int N, int in, int out, cudaStream_t stream)
{
    const sx_fp8 *a = weight_operand(w, out, in, 1, stream);
    grow(&op_b, &op_b_bytes, (size_t)N * out);
    grow(&op_dyt, &op_dyt_bytes, (size_t)N * out);
    /* dy in both layouts in one pass: plain here, transposed for the wgrad that follows */
    CK(sx_fp8_amax(AMAX_SLOT(1), dy, (size_t)N * out, stream));
    CK(sx_fp8_cast(op_b, op_dyt, SCALE_INV_SLOT(1), dy, AMAX_SLOT(1), N, out, SX_E5M2, stream));
    dy_cast.dy = dy;
    dy_cast.N = N;
    dy_cast.out = out;
    dy_cast.valid = 1;
    run_fp8("dgrad", in, N, out, out, out, in, 0, 0, CUDA_R_8F_E4M3, CUDA_R_8F_E5M2, a, op_b, dx, stream);
}

void fp8_linear_wgrad(sx_bf16 *dw, const sx_bf16 *dy, const sx_bf16 *x, int N, int in, int out, cudaStream_t stream)
{
    grow(&op_a, &op_a_bytes, (size_t)N * in);
    cast(op_a, 1, x, N, in, SX_E4M3, 0, stream);
    /* the dgrad of this dy ran just before: its transposed cast and its scale (slot 1) are ready */
    if (!(dy_cast.valid && dy_cast.dy == dy && dy_cast.N == N && dy_cast.out == out)) {
        grow(&op_dyt, &op_dyt_bytes, (size_t)N * out);
        cast(op_dyt, 1, dy, N, out, SX_E5M2, 1, stream);
    }
    dy_cast.valid = 0;
    run_fp8("wgrad", in, out, N, N, N, in, 1, 0, CUDA_R_8F_E4M3, CUDA_R_8F_E5M2, op_a, op_dyt, dw, stream);
}

/* ---- calibrate: FP8 against bf16 on the same cuBLASLt path ------------------------------ */

/* seconds per call of p: the median of 5 batches of about 2 ms each, after 3 calls of warm-up;
 * -1 when no algorithm runs */
static double time_plan(fp8_plan *p, const void *A, const void *Bm, sx_bf16 *D, cudaStream_t stream)
{
    if (!run_plan(p, A, Bm, D, NULL, stream)) return -1.0;
    cudaEvent_t e0, e1;
    CK(cudaEventCreate(&e0));
    CK(cudaEventCreate(&e1));
    float ms = 0.0f, batch[5];
    for (int i = 0; i < 3; i++) run_plan(p, A, Bm, D, NULL, stream);
    CK(cudaEventRecord(e0, stream));
    run_plan(p, A, Bm, D, NULL, stream);
    CK(cudaEventRecord(e1, stream));
    CK(cudaEventSynchronize(e1));
    CK(cudaEventElapsedTime(&ms, e0, e1));
    int reps = ms > 0.0f ? (int)(2.0f / ms) : 1000;
    reps = reps < 5 ? 5 : reps > 1000 ? 1000 : reps;
    for (int b = 0; b < 5; b++) {
        CK(cudaEventRecord(e0, stream));
        for (int r = 0; r < reps; r++) run_plan(p, A, Bm, D, NULL, stream);
        CK(cudaEventRecord(e1, stream));
        CK(cudaEventSynchronize(e1));
        CK(cudaEventElapsedTime(&batch[b], e0, e1));
        batch[b] /= (float)reps;
    }
    CK(cudaEventDestroy(e0));
    CK(cudaEventDestroy(e1));
    sort_floats(batch, 5);
    return batch[2] * 1e-3;
}

int fp8_time_gemm(int M, int N, int K, void *const buffers[2], size_t buffer_bytes, cudaStream_t stream, double *fp8_s,
                  double *fp8_exact_s, double *bf16_s)
{
    /* buffers[0]: X [M, K] then D [M, N] after it; buffers[1]: W [N, K] */
    size_t x_bytes = (size_t)M * K * 2, d_bytes = (size_t)M * N * 2;
    if (x_bytes + d_bytes > buffer_bytes || (size_t)N * K * 2 > buffer_bytes) return -1;
    const sx_bf16 *X = buffers[0], *W = buffers[1];
    sx_bf16 *D = (sx_bf16 *)((char *)buffers[0] + x_bytes);
    grow(&op_a, &op_a_bytes, (size_t)N * K);
    grow(&op_b, &op_b_bytes, (size_t)M * K);
    cast(op_a, 0, W, N, K, SX_E4M3, 0, stream);
    cast(op_b, 0, X, M, K, SX_E4M3, 1, stream);
    /* the plans of one timing are dropped after it: calibrate times more shapes than a step runs */
    int keep = nplans;
    fp8_plan *p8 = plan_of(N, M, K, K, K, N, 0, 1, 0, CUDA_R_8F_E4M3, CUDA_R_8F_E4M3);
    fp8_plan *p8_exact = plan_of(N, M, K, K, K, N, 0, 0, 0, CUDA_R_8F_E4M3, CUDA_R_8F_E4M3);
    fp8_plan *p16 = plan_of(N, M, K, K, K, N, 0, 0, 0, CUDA_R_16BF, CUDA_R_16BF);
    *fp8_s = time_plan(p8, op_a, op_b, D, stream);
    *fp8_exact_s = time_plan(p8_exact, op_a, op_b, D, stream);
    *bf16_s = time_plan(p16, W, X, D, stream);
    plans_truncate(keep);
    return *fp8_s > 0 && *fp8_exact_s > 0 && *bf16_s > 0 ? 0 : -1;
}

/* ---- check-fp8: the three GEMMs against float64 on the host ----------------------------- */

static double *random_bf16(sx_bf16 **dev, size_t n, double sigma, unsigned long long *state)
{
    double *h = malloc(n * sizeof *h);
    sx_bf16 *bits = malloc(n * sizeof *bits);
    if (!h || !bits) { fprintf(stderr, "sextant-gpu: check-fp8: out of host memory\n"); exit(1); }
    for (size_t i = 0; i < n; i++) {
        *state = *state * 6364136223846793005ull + 1442695040888963407ull;
        double u1 = ((*state >> 11) + 0.5) / 9007199254740992.0;
        *state = *state * 6364136223846793005ull + 1442695040888963407ull;
        double u2 = ((*state >> 11) + 0.5) / 9007199254740992.0;
        bits[i] = sx_ref_f2bf((float)(sigma * sqrt(-2.0 * log(u1)) * cos(6.283185307179586 * u2)));
        h[i] = sx_ref_bf2f(bits[i]);
    }
    CK(cudaMalloc((void **)dev, n * sizeof *bits));
    CK(cudaMemcpy(*dev, bits, n * sizeof *bits, cudaMemcpyHostToDevice));
    free(bits);
    return h;
}

/* ||got - want|| / ||want|| of n device bf16 values against the host's */
static double rel_error(const sx_bf16 *dev, const double *want, size_t n)
{
    sx_bf16 *bits = malloc(n * sizeof *bits);
    if (!bits) { fprintf(stderr, "sextant-gpu: check-fp8: out of host memory\n"); exit(1); }
    CK(cudaMemcpy(bits, dev, n * sizeof *bits, cudaMemcpyDeviceToHost));
    double num = 0.0, den = 0.0;
    for (size_t i = 0; i < n; i++) {
        double d = sx_ref_bf2f(bits[i]) - want[i];
        num += isfinite(d) ? d * d : INFINITY;
        den += want[i] * want[i];
    }
    free(bits);
    return sqrt(num / den);
}

/* One linear layer's forward (with bias), dgrad and wgrad (onto a dW already holding values);
 * the tolerances are twice the rms rounding of the operands: 2^-4 / sqrt 3 = 3.6% per E4M3
 * value and 2^-3 / sqrt 3 = 7.2% per E5M2 one, which a dot product of random terms keeps as
 * its relative error: sqrt(2) x 3.6% (forward) and sqrt(3.6^2 + 7.2^2)% (backward). */
static int check_shape(int N, int in, int out, cudaStream_t stream)
{
    unsigned long long state = 0x5eed0000ull + (unsigned long long)(N * 31 + in * 7 + out);
    sx_bf16 *x, *w, *bias, *dy, *dw, *y, *dx;
    double *hx = random_bf16(&x, (size_t)N * in, 1.0, &state), *hw = random_bf16(&w, (size_t)out * in, 0.02, &state);
    double *hb = random_bf16(&bias, (size_t)out, 0.1, &state), *hdy = random_bf16(&dy, (size_t)N * out, 1e-3, &state);
    double *hdw = random_bf16(&dw, (size_t)out * in, 1e-2, &state);
    CK(cudaMalloc((void **)&y, (size_t)N * out * 2));
    CK(cudaMalloc((void **)&dx, (size_t)N * in * 2));
    double *ry = calloc((size_t)N * out, sizeof *ry), *rdx = calloc((size_t)N * in, sizeof *rdx);
    if (!ry || !rdx) { fprintf(stderr, "sextant-gpu: check-fp8: out of host memory\n"); exit(1); }
    for (int n = 0; n < N; n++)
        for (int o = 0; o < out; o++) {
            double s = hb[o];
            for (int i = 0; i < in; i++) s += hx[(size_t)n * in + i] * hw[(size_t)o * in + i];
            ry[(size_t)n * out + o] = s;
            for (int i = 0; i < in; i++) rdx[(size_t)n * in + i] += hdy[(size_t)n * out + o] * hw[(size_t)o * in + i];
        }
    for (int o = 0; o < out; o++)
        for (int i = 0; i < in; i++)
            for (int n = 0; n < N; n++) hdw[(size_t)o * in + i] += hdy[(size_t)n * out + o] * hx[(size_t)n * in + i];
    int in_epilogue = fp8_linear_forward(y, x, w, bias, N, in, out, stream);
    if (!in_epilogue) /* the reference has the bias: take it out again */
        for (int n = 0; n < N; n++)
            for (int o = 0; o < out; o++) ry[(size_t)n * out + o] -= hb[o];
    fp8_linear_dgrad(dx, dy, w, N, in, out, stream);
    fp8_linear_wgrad(dw, dy, x, N, in, out, stream);
    CK(cudaStreamSynchronize(stream));
    const char *name[3] = {"forward (E4M3 x E4M3)", "dgrad (E5M2 x E4M3)", "wgrad += (E4M3 x E5M2)"};
    double err[3] = {rel_error(y, ry, (size_t)N * out), rel_error(dx, rdx, (size_t)N * in), rel_error(dw, hdw, (size_t)out * in)};
    double tol[3] = {2.0 * sqrt(2.0) * 0.036, 2.0 * sqrt(0.036 * 0.036 + 0.072 * 0.072), 2.0 * sqrt(0.036 * 0.036 + 0.072 * 0.072)};
    int bad = 0;
    for (int k = 0; k < 3; k++) {
        printf("fp8 %-24s N %5d in %5d out %5d   rel. error %.4f (tolerance %.3f)%s%s\n", name[k], N, in, out, err[k], tol[k],
               k == 0 ? (in_epilogue ? ", bias in the epilogue" : ", bias left to the caller") : "",
               err[k] <= tol[k] ? "" : "   FAIL");
        bad += !(err[k] <= tol[k]);
    }
    sx_bf16 *dev[] = {x, w, bias, dy, dw, y, dx};
    for (size_t i = 0; i < sizeof dev / sizeof dev[0]; i++) CK(cudaFree(dev[i]));
    free(hx); free(hw); free(hb); free(hdy); free(hdw); free(ry); free(rdx);
    return bad;
}

int fp8_check(void)
{
    char why[256];
    if (fp8_supported(why, sizeof why) != 0) {
        printf("sextant-gpu check-fp8: %s; skipping\n", why);
        return 0;
    }
    cublasLtHandle_t lt;
    void *ws;
    cudaStream_t stream;
    size_t ws_bytes = 32u << 20;
    CB(cublasLtCreate(&lt));
    CK(cudaMalloc(&ws, ws_bytes));
    CK(cudaStreamCreate(&stream));
    fp8_init(lt, ws, ws_bytes);
    int bad = check_shape(64, 96, 80, stream) + check_shape(256, 768, 2304, stream) + check_shape(128, 3072, 768, stream);
    /* as training runs them: the weights cast once per step.  check_shape allocates new tensors each
     * time, so a stale cast (a freed address reused) would show unless every call begins a step */
    fp8_weight_cache(1);
    fp8_step_begin();
    bad += check_shape(256, 768, 2304, stream);
    fp8_step_begin();
    bad += check_shape(128, 3072, 768, stream);
    fp8_weight_cache(0);
    fp8_free();
    CK(cudaStreamDestroy(stream));
    CK(cudaFree(ws));
    CB(cublasLtDestroy(lt));
    printf("check-fp8: %s\n", bad ? "FAILED" : "all GEMMs within tolerance");
    return bad ? 1 : 0;
}
