/* sextant-gpu train: a real GPT-2-family training step on one GPU, laid out
 * as the planner's memory model says (parameters, gradients, AdamW state and
 * activations each in one allocation), trained on synthetic tokens whose
 * next token is mostly a function of the current one, so the loss must fall.
 *
 * bf16 storage, fp32 accumulation (cuBLAS), fp32 master weights and Adam
 * moments; unfused causal attention (cuBLAS batched GEMMs around our softmax
 * kernel); the vocabulary padded to a multiple of 128 as Megatron and llm.c do.
 *
 * Reports the median step time over the timed steps with its spread,
 * tokens/s, TFLOP/s and MFU by the planner's model-FLOP count, peak memory
 * from our own accounting and from the device, each against the planner. */
/* cublasLt.h declares one function without a prototype */
#pragma GCC diagnostic push
#pragma GCC diagnostic ignored "-Wstrict-prototypes"
#include <cublasLt.h>
#pragma GCC diagnostic pop
#include <cublas_v2.h>
#include <cuda_runtime_api.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "kernels.h"
#include "planner.h"
#include "train.h"

#define CK(call)                                                                                                 \
    do {                                                                                                         \
        cudaError_t e_ = (call);                                                                                 \
        if (e_ != cudaSuccess) {                                                                                 \
            fprintf(stderr, "sextant-gpu train: %s:%d: %s: %s\n", __FILE__, __LINE__, #call, cudaGetErrorString(e_)); \
            exit(1);                                                                                             \
        }                                                                                                        \
    } while (0)
#define CB(call)                                                                                                 \
    do {                                                                                                         \
        cublasStatus_t s_ = (call);                                                                              \
        if (s_ != CUBLAS_STATUS_SUCCESS) {                                                                       \
            fprintf(stderr, "sextant-gpu train: %s:%d: %s: cuBLAS status %d\n", __FILE__, __LINE__, #call, (int)s_); \
            exit(1);                                                                                             \
        }                                                                                                        \
    } while (0)

typedef sx_bf16 bf16;

/* ---- parameters: one allocation, in this order ------------------------- */

/* Tensors a family lacks have size 0: LLaMA has no position table, no biases
 * and no norm biases; a tied model has no separate head. */
enum { P_WTE, P_WPE, P_LN1W, P_LN1B, P_QKVW, P_QKVB, P_ATTW, P_ATTB, P_LN2W, P_LN2B, P_FCW, P_FCB, P_PROJW, P_PROJB,
       P_LNFW, P_LNFB, P_HEAD, P_COUNT };

typedef struct {
    int L, C, H, KV, D, F, V, Vp, maxT, B, T;
    int qkv;            /* (H + 2 KV) D: the fused QKV projection's width */
    int up;             /* the FFN's first GEMM width: F, or 2F for SwiGLU (gate | up) */
    int rms, swiglu, bias, learned_pos, tied;
    int flash;          /* fused attention: no s x s scores, a log-sum-exp per row instead */
    size_t sizes[P_COUNT];
    size_t offsets[P_COUNT];
    size_t count;                 /* parameters, with the padded vocabulary rows */
} shapes;

static int is_layer_param(int p) { return p >= P_LN1W && p <= P_PROJB; }

static void param_shapes(shapes *s)
{
    size_t L = (size_t)s->L, C = (size_t)s->C, A = (size_t)s->H * s->D;
    size_t ln_bias = s->rms ? 0 : 1, bias = s->bias ? 1 : 0;
    size_t sz[P_COUNT] = {(size_t)s->Vp * C, s->learned_pos ? (size_t)s->maxT * C : 0, L * C, ln_bias * L * C,
                          L * s->qkv * C, bias * L * s->qkv, L * C * A, bias * L * C, L * C, ln_bias * L * C,
                          L * s->up * C, bias * L * s->up, L * C * s->F, bias * L * C, C, ln_bias * C,
                          s->tied ? 0 : (size_t)s->Vp * C};
    s->count = 0;
    for (int i = 0; i < P_COUNT; i++) {
        s->sizes[i] = sz[i];
        s->offsets[i] = s->count;
        /* keep every tensor 16-byte aligned for the vectorised kernels */
        s->count += (sz[i] + 7) & ~(size_t)7;
    }
}

/* ---- activations saved for backward, one allocation -------------------- */

typedef struct {
    bf16 *encoded;      /* N C: embedding output = residual into layer 0 */
    bf16 *residual;     /* L+1 x N C: the residual stream entering each layer, and the last */
    bf16 *resid_mid;    /* L N C: after attention */
    bf16 *ln1, *ln2;    /* L N C */
    float *ln1_mean, *ln1_rstd, *ln2_mean, *ln2_rstd; /* L N (no means for RMSNorm) */
    bf16 *qkv;          /* L N qkv */
    bf16 *att;          /* L B H T T: softmax output (unfused) */
    float *lse;         /* L B H T: log-sum-exp per query row (flash) */
    bf16 *atty;         /* L N H D */
    bf16 *fch;          /* L N up: before the activation */
    bf16 *fch_act;      /* L N F: after GELU or SwiGLU */
    bf16 *lnf;          /* N C */
    float *lnf_mean, *lnf_rstd;
    bf16 *logits;       /* N Vp, then dlogits in place */
    float *losses;      /* N */
    size_t bytes;
} activations;

static size_t carve(char **cursor, size_t bytes)
{
    size_t aligned = (bytes + 255) & ~(size_t)255;
    *cursor += aligned;
    return aligned;
}

/* Lays out (base == NULL: only sizes) the activations. */
static size_t layout_activations(activations *a, char *base, const shapes *s)
{
    size_t N = (size_t)s->B * s->T, C = (size_t)s->C, L = (size_t)s->L, A = (size_t)s->H * s->D;
    size_t BHTT = (size_t)s->B * s->H * s->T * s->T, means = s->rms ? 0 : 1;
    char *p = base;
    size_t total = 0;
#define TAKE(field, type, count) do { a->field = (count) != 0 ? (type *)p : NULL; total += carve(&p, (count) * sizeof(type)); } while (0)
    TAKE(encoded, bf16, N * C);
    TAKE(residual, bf16, (L + 1) * N * C);
    TAKE(resid_mid, bf16, L * N * C);
    TAKE(ln1, bf16, L * N * C);
    TAKE(ln2, bf16, L * N * C);
    TAKE(ln1_mean, float, means * L * N);
    TAKE(ln1_rstd, float, L * N);
    TAKE(ln2_mean, float, means * L * N);
    TAKE(ln2_rstd, float, L * N);
    TAKE(qkv, bf16, L * N * s->qkv);
    TAKE(att, bf16, s->flash ? 0 : L * BHTT);
    TAKE(lse, float, s->flash ? L * (size_t)s->B * s->H * s->T : 0);
    TAKE(atty, bf16, L * N * A);
    TAKE(fch, bf16, L * N * s->up);
    TAKE(fch_act, bf16, L * N * s->F);
    TAKE(lnf, bf16, N * C);
    TAKE(lnf_mean, float, means * N);
    TAKE(lnf_rstd, float, N);
    TAKE(logits, bf16, N * (size_t)s->Vp);
    TAKE(losses, float, N);
#undef TAKE
    a->bytes = total;
    return total;
}

/* Scratch for backward, reused by every layer: the planner's
 * backward_workspace_bytes() counts exactly these (docs/model.md). */
typedef struct {
    bf16 *dresidual;   /* N C */
    bf16 *dbuf_c;      /* N C */
    bf16 *dqkv;        /* N qkv */
    bf16 *datt;        /* B H T T (unfused) */
    float *flash_ws;   /* B H T, flash's backward (rowsum of dO * O) */
    bf16 *dfch;        /* N up */
    bf16 *dact;        /* N F, SwiGLU only: the gradient of silu(gate) * up while dgate, dup are written */
    bf16 *ones;        /* N, for the bias fallback when cuBLASLt offers no bias epilogue */
    size_t bytes;
} scratch_buffers;

static size_t layout_scratch(scratch_buffers *g, char *base, const shapes *s)
{
    size_t N = (size_t)s->B * s->T, C = (size_t)s->C;
    char *p = base;
    size_t total = 0;
#define TAKE(field, count) do { g->field = (count) != 0 ? (bf16 *)p : NULL; total += carve(&p, (count) * sizeof(bf16)); } while (0)
    TAKE(dresidual, N * C);
    TAKE(dbuf_c, N * C);
    TAKE(dqkv, N * s->qkv);
    TAKE(datt, s->flash ? 0 : (size_t)s->B * s->H * s->T * s->T);
    g->flash_ws = NULL;
    TAKE(dfch, N * s->up);
    TAKE(dact, s->swiglu ? N * s->F : 0);
    TAKE(ones, s->bias ? N : 0);
#undef TAKE
    if (s->flash) {
        size_t ws = sx_flash_attention_backward_workspace_bytes(s->B, s->T, s->H);
        g->flash_ws = (float *)p;
        total += carve(&p, ws);
    }
    g->bytes = total;
    return total;
}

/* ---- the profiling pass: events around every op of one step ------------ */

static cublasHandle_t blas;
static cublasLtHandle_t lt;
static void *lt_workspace;
#define LT_WORKSPACE_BYTES (32u << 20)
static cudaStream_t stream;

#define PROFILE_MAX 4096
static int profiling;
static int profile_count;
static cudaEvent_t profile_events[2 * PROFILE_MAX];
static const char *profile_names[PROFILE_MAX];

static void profile_mark(const char *name, int end)
{
    if (!profiling || profile_count >= PROFILE_MAX) return;
    if (!end) profile_names[profile_count] = name;
    CK(cudaEventRecord(profile_events[2 * profile_count + end], stream));
    if (end) profile_count++;
}
/* Brackets one op with events when profiling; otherwise runs it bare. */
#define OP(name, stmt) do { profile_mark(name, 0); stmt; profile_mark(name, 1); } while (0)

/* ---- GEMMs, row-major in the PyTorch convention W[out, in] ------------- */

static const float one = 1.0f, zero = 0.0f;

#define LTC(call)                                                                                                \
    do {                                                                                                         \
        cublasStatus_t s_ = (call);                                                                              \
        if (s_ != CUBLAS_STATUS_SUCCESS) {                                                                       \
            fprintf(stderr, "sextant-gpu train: %s:%d: %s: cuBLASLt status %d\n", __FILE__, __LINE__, #call, (int)s_); \
            exit(1);                                                                                             \
        }                                                                                                        \
    } while (0)

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
    LTC(cublasLtMatmulDescCreate(&p->desc, CUBLAS_COMPUTE_32F, CUDA_R_32F));
    LTC(cublasLtMatmulDescSetAttribute(p->desc, CUBLASLT_MATMUL_DESC_TRANSA, &opa, sizeof opa));
    LTC(cublasLtMatmulDescSetAttribute(p->desc, CUBLASLT_MATMUL_DESC_TRANSB, &opb, sizeof opb));
    LTC(cublasLtMatmulDescSetAttribute(p->desc, CUBLASLT_MATMUL_DESC_EPILOGUE, &epi, sizeof epi));
    LTC(cublasLtMatmulDescSetAttribute(p->desc, CUBLASLT_MATMUL_DESC_BIAS_DATA_TYPE, &bias_type, sizeof bias_type));
    LTC(cublasLtMatrixLayoutCreate(&p->a, CUDA_R_16BF, ta ? k : m, ta ? m : k, lda));
    LTC(cublasLtMatrixLayoutCreate(&p->b, CUDA_R_16BF, tb ? n : k, tb ? k : n, ldb));
    LTC(cublasLtMatrixLayoutCreate(&p->c, CUDA_R_16BF, m, n, ldc));
    cublasLtMatmulPreference_t pref;
    size_t ws = LT_WORKSPACE_BYTES;
    LTC(cublasLtMatmulPreferenceCreate(&pref));
    LTC(cublasLtMatmulPreferenceSetAttribute(pref, CUBLASLT_MATMUL_PREF_MAX_WORKSPACE_BYTES, &ws, sizeof ws));
    cublasLtMatmulHeuristicResult_t result;
    int found = 0;
    if (cublasLtMatmulAlgoGetHeuristic(lt, p->desc, p->a, p->b, p->c, p->c, pref, 1, &result, &found) ==
            CUBLAS_STATUS_SUCCESS && found > 0) {
        p->algo = result.algo;
        p->usable = 1;
    }
    LTC(cublasLtMatmulPreferenceDestroy(pref));
    return p;
}

/* D = op(A) op(B) (+ C) with `bias` in the epilogue; 0 when cuBLASLt has
 * no algorithm for it, and the caller falls back to plain GEMMs. */
static int lt_gemm(int ta, int tb, int m, int n, int k, const bf16 *A, int lda, const bf16 *Bm, int ldb, int accumulate,
                   bf16 *C, int ldc, cublasLtEpilogue_t epi, const void *bias)
{
    lt_plan *p = lt_find(ta, tb, m, n, k, lda, ldb, ldc, accumulate, epi);
    if (!p || !p->usable) return 0;
    LTC(cublasLtMatmulDescSetAttribute(p->desc, CUBLASLT_MATMUL_DESC_BIAS_POINTER, &bias, sizeof bias));
    LTC(cublasLtMatmul(lt, p->desc, &one, A, p->a, Bm, p->b, accumulate ? &one : &zero, C, p->c, C, p->c, &p->algo,
                       lt_workspace, LT_WORKSPACE_BYTES, stream));
    return 1;
}

static void lt_free(void)
{
    for (int i = 0; i < lt_nplans; i++) {
        LTC(cublasLtMatrixLayoutDestroy(lt_plans[i].a));
        LTC(cublasLtMatrixLayoutDestroy(lt_plans[i].b));
        LTC(cublasLtMatrixLayoutDestroy(lt_plans[i].c));
        LTC(cublasLtMatmulDescDestroy(lt_plans[i].desc));
    }
    lt_nplans = 0;
}

static int bias_fallbacks;   /* GEMMs whose bias ran as a separate rank-one GEMM */

/* y[N, out] = x[N, in] W^T (+ bias, in the GEMM's epilogue) */
static void linear_forward(const char *name, bf16 *y, const bf16 *x, const bf16 *w, const bf16 *bias, const bf16 *ones, int N,
                           int in, int out)
{
    profile_mark(name, 0);
    if (!bias || !lt_gemm(1, 0, out, N, in, w, in, x, in, 0, y, out, CUBLASLT_EPILOGUE_BIAS, bias)) {
        CB(cublasGemmEx(blas, CUBLAS_OP_T, CUBLAS_OP_N, out, N, in, &one, w, CUDA_R_16BF, in, x, CUDA_R_16BF, in, &zero, y,
                        CUDA_R_16BF, out, CUBLAS_COMPUTE_32F, CUBLAS_GEMM_DEFAULT));
        if (bias) { /* y += bias 1^T, a rank-one update */
            bias_fallbacks++;
            CB(cublasGemmEx(blas, CUBLAS_OP_N, CUBLAS_OP_N, out, N, 1, &one, bias, CUDA_R_16BF, out, ones, CUDA_R_16BF, 1,
                            &one, y, CUDA_R_16BF, out, CUBLAS_COMPUTE_32F, CUBLAS_GEMM_DEFAULT));
        }
    }
    profile_mark(name, 1);
}

/* dx = dy W; dW += dy^T x; dbias = dy^T 1 (in the weight GEMM's epilogue:
 * one micro-batch per step, so the bias gradient is written, not summed) */
static void linear_backward(const char *dgrad, const char *wgrad, bf16 *dx, bf16 *dw, bf16 *dbias, const bf16 *dy,
                            const bf16 *x, const bf16 *w, const bf16 *ones, int N, int in, int out)
{
    profile_mark(dgrad, 0);
    CB(cublasGemmEx(blas, CUBLAS_OP_N, CUBLAS_OP_N, in, N, out, &one, w, CUDA_R_16BF, in, dy, CUDA_R_16BF, out, &zero, dx,
                    CUDA_R_16BF, in, CUBLAS_COMPUTE_32F, CUBLAS_GEMM_DEFAULT));
    profile_mark(dgrad, 1);
    profile_mark(wgrad, 0);
    if (!dbias || !lt_gemm(0, 1, in, out, N, x, in, dy, out, 1, dw, in, CUBLASLT_EPILOGUE_BGRADB, dbias)) {
        CB(cublasGemmEx(blas, CUBLAS_OP_N, CUBLAS_OP_T, in, out, N, &one, x, CUDA_R_16BF, in, dy, CUDA_R_16BF, out, &one, dw,
                        CUDA_R_16BF, in, CUBLAS_COMPUTE_32F, CUBLAS_GEMM_DEFAULT));
        if (dbias) {
            bias_fallbacks++;
            CB(cublasGemmEx(blas, CUBLAS_OP_N, CUBLAS_OP_N, out, 1, N, &one, dy, CUDA_R_16BF, out, ones, CUDA_R_16BF, N, &one,
                            dbias, CUDA_R_16BF, out, CUBLAS_COMPUTE_32F, CUBLAS_GEMM_DEFAULT));
        }
    }
    profile_mark(wgrad, 1);
}

/* Pointer arrays for the batched attention GEMMs.  Heads are ordered
 * group-major, i = (g B + b) KV + kv with head h = kv G + g (G = H / KV query
 * heads per key/value head), so that the G heads sharing a key/value head sit
 * in G consecutive slices of B KV: the dK and dV GEMMs then run once per slice,
 * the first writing and the rest accumulating, and no two GEMMs of one launch
 * write the same dK or dV. */
typedef struct {
    const void **q, **k, **v, **s, **o;      /* forward operands, B H each */
    const void **dq, **ds, **dout;           /* B H each */
    const void **dk, **dv;                   /* B KV each */
    void *block;
} attention_ptrs;

static void attention_pointers(attention_ptrs *ap, const bf16 *qkv, const bf16 *att, const bf16 *out, const bf16 *dqkv,
                               const bf16 *datt, const bf16 *dout, const shapes *s)
{
    int BH = s->B * s->H, BKV = s->B * s->KV, T = s->T, D = s->D, G = s->H / s->KV, W = s->qkv, A = s->H * s->D;
    size_t slots = 8 * (size_t)BH + 2 * (size_t)BKV;
    const void **host = malloc(slots * sizeof *host);
    if (!host) { fprintf(stderr, "sextant-gpu train: out of host memory\n"); exit(1); }
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
    CB(cublasGemmBatchedEx(blas, ta, tb, m, n, k, &one, (const void *const *)(A), CUDA_R_16BF, lda,                 \
                           (const void *const *)(B), CUDA_R_16BF, ldb, beta, (void *const *)(Cm), CUDA_R_16BF, ldc, \
                           count, CUBLAS_COMPUTE_32F, CUBLAS_GEMM_DEFAULT))

/* Forward of causal attention from the layer's qkv into atty. */
static void attention_forward(const attention_ptrs *ap, bf16 *att, const bf16 *scores, const shapes *s)
{
    int BH = s->B * s->H, T = s->T, D = s->D, W = s->qkv, A = s->H * s->D;
    /* S^T = K Q^T, column-major: S row-major [T, T], into the shared
     * scratch; the softmax writes the probabilities kept for backward */
    BATCHED(CUBLAS_OP_T, CUBLAS_OP_N, T, T, D, ap->k, W, ap->q, W, &zero, ap->ds, T, BH);
    CK(sx_softmax_causal_forward(att, scores, BH, T, 1.0f / sqrtf((float)D), stream));
    /* O^T = V^T P^T */
    BATCHED(CUBLAS_OP_N, CUBLAS_OP_N, D, T, T, ap->v, W, ap->s, T, &zero, ap->o, A, BH);
}

static void attention_backward(const attention_ptrs *ap, bf16 *att, bf16 *datt, const shapes *s)
{
    int BH = s->B * s->H, BKV = s->B * s->KV, T = s->T, D = s->D, W = s->qkv, A = s->H * s->D, G = s->H / s->KV;
    BATCHED(CUBLAS_OP_T, CUBLAS_OP_N, T, T, D, ap->v, W, ap->dout, A, &zero, ap->ds, T, BH);  /* dP = dO V^T */
    for (int g = 0; g < G; g++)                                                              /* dV = P^T dO */
        BATCHED(CUBLAS_OP_N, CUBLAS_OP_T, D, T, T, ap->dout + g * BKV, A, ap->s + g * BKV, T, g ? &one : &zero, ap->dv, W, BKV);
    CK(sx_softmax_causal_backward(datt, att, datt, BH, T, 1.0f / sqrtf((float)D), stream));
    BATCHED(CUBLAS_OP_N, CUBLAS_OP_N, D, T, T, ap->k, W, ap->ds, T, &zero, ap->dq, W, BH); /* dQ = dS K */
    for (int g = 0; g < G; g++)                                                              /* dK = dS^T Q */
        BATCHED(CUBLAS_OP_N, CUBLAS_OP_T, D, T, T, ap->q + g * BKV, W, ap->ds + g * BKV, T, g ? &one : &zero, ap->dk, W, BKV);
}

/* ---- the model ----------------------------------------------------------- */

typedef struct {
    shapes s;
    bf16 *params, *grads;
    float *master, *m, *v;
    activations act;
    scratch_buffers scr;
    void *act_block, *scr_block, *norm_ws, *emb_ws;
    size_t norm_ws_bytes, emb_ws_bytes;
    attention_ptrs *layer_ptrs;   /* one set per layer */
    int32_t *inputs, *targets;
    size_t accounted_bytes;       /* everything this program allocated */
    double predicted_bytes;       /* the planner's peak, for the out-of-memory message */
} gpt;

/* A tensor of one layer (or the whole tensor), NULL when the family lacks it. */
static bf16 *param(const gpt *g, bf16 *base, int which, int layer)
{
    if (g->s.sizes[which] == 0) return NULL;
    size_t per_layer = g->s.sizes[which] / (is_layer_param(which) ? (size_t)g->s.L : 1);
    return base + g->s.offsets[which] + (size_t)layer * per_layer;
}

static uint16_t to_bf16(float f)
{
    uint32_t u;
    memcpy(&u, &f, 4);
    u += 0x7fff + ((u >> 16) & 1);
    return (uint16_t)(u >> 16);
}

static float gaussian(unsigned long long *state)
{
    double u1, u2;
    *state = *state * 6364136223846793005ULL + 1442695040888963407ULL;
    u1 = ((*state >> 11) + 1.0) / 9007199254740993.0;
    *state = *state * 6364136223846793005ULL + 1442695040888963407ULL;
    u2 = (*state >> 11) / 9007199254740992.0;
    return (float)(sqrt(-2.0 * log(u1)) * cos(6.283185307179586 * u2));
}

static void *device_alloc(gpt *g, size_t bytes)
{
    void *p;
    cudaError_t err = cudaMalloc(&p, bytes);
    if (err == cudaErrorMemoryAllocation) {
        size_t free_bytes, total;
        cudaGetLastError();
        CK(cudaMemGetInfo(&free_bytes, &total));
        fprintf(stderr, "sextant-gpu train: out of memory allocating %.3f GiB after %.3f GiB: predicted peak %.3f GiB, "
                "device %.3f GiB free of %.3f GiB\n", bytes / 1073741824.0, g->accounted_bytes / 1073741824.0,
                g->predicted_bytes / 1073741824.0, free_bytes / 1073741824.0, total / 1073741824.0);
        exit(3);
    }
    CK(err);
    g->accounted_bytes += bytes;
    return p;
}

/* GPT-2's initialisation (LLaMA's is the same in spirit): N(0, 0.02),
 * residual projections scaled by 1/sqrt(2L), norms at 1 and biases at 0. */
static void gpt_init(gpt *g)
{
    shapes *s = &g->s;
    float *host = malloc(s->count * sizeof *host);
    uint16_t *half = malloc(s->count * sizeof *half);
    if (!host || !half) { fprintf(stderr, "sextant-gpu train: out of host memory\n"); exit(1); }
    memset(host, 0, s->count * sizeof *host);
    unsigned long long seed = 1337;
    for (int p = 0; p < P_COUNT; p++) {
        float *t = host + s->offsets[p];
        int is_norm_weight = p == P_LN1W || p == P_LN2W || p == P_LNFW;
        int is_bias = p == P_LN1B || p == P_LN2B || p == P_LNFB || p == P_QKVB || p == P_ATTB || p == P_FCB || p == P_PROJB;
        float scale = (p == P_ATTW || p == P_PROJW) ? 0.02f / sqrtf(2.0f * (float)s->L) : 0.02f;
        for (size_t i = 0; i < s->sizes[p]; i++)
            t[i] = is_norm_weight ? 1.0f : is_bias ? 0.0f : scale * gaussian(&seed);
        if (p == P_WTE || p == P_HEAD) /* padded vocabulary rows stay zero */
            for (size_t i = (size_t)s->V * s->C; i < s->sizes[p]; i++) t[i] = 0.0f;
    }
    for (size_t i = 0; i < s->count; i++) half[i] = to_bf16(host[i]);
    CK(cudaMemcpy(g->master, host, s->count * sizeof(float), cudaMemcpyHostToDevice));
    CK(cudaMemcpy(g->params, half, s->count * sizeof(bf16), cudaMemcpyHostToDevice));
    CK(cudaMemset(g->m, 0, s->count * sizeof(float)));
    CK(cudaMemset(g->v, 0, s->count * sizeof(float)));
    CK(cudaMemset(g->grads, 0, s->count * sizeof(bf16)));
    free(half);
    free(host);
}

/* Synthetic tokens: each next token is (7 t + 3) mod 4096, except one in ten
 * drawn at random, so a model that learns the rule reaches a loss well under
 * ln(V) but never zero. */
static void make_batch(int32_t *inputs, int32_t *targets, int n, int V, unsigned long long *state)
{
    int tok = 0;
    for (int i = 0; i <= n; i++) {
        *state = *state * 6364136223846793005ULL + 1442695040888963407ULL;
        int next = ((*state >> 33) % 10 == 0) ? (int)((*state >> 20) % (unsigned long long)V) : (7 * tok + 3) % 4096;
        if (i < n) inputs[i] = tok;
        if (i > 0) targets[i - 1] = tok;
        tok = next % V;
    }
}

static void norm_forward(const gpt *g, bf16 *out, float *mean, float *rstd, const bf16 *x, const bf16 *w, const bf16 *b, int N)
{
    if (g->s.rms) CK(sx_rmsnorm_forward(out, rstd, x, w, N, g->s.C, 1e-5f, stream));
    else CK(sx_layernorm_forward(out, mean, rstd, x, w, b, N, g->s.C, 1e-5f, stream));
}

/* dx += the norm's input gradient: the residual branch's gradient is already in dx */
static void norm_backward(const gpt *g, bf16 *dx, bf16 *dw, bf16 *db, const bf16 *dy, const bf16 *x, const bf16 *w,
                          const float *mean, const float *rstd, int accumulate, int N)
{
    if (g->s.rms)
        CK(sx_rmsnorm_backward(dx, dw, SX_BF16, dy, x, w, rstd, accumulate, g->norm_ws, g->norm_ws_bytes, N, g->s.C, stream));
    else
        CK(sx_layernorm_backward(dx, dw, db, SX_BF16, dy, x, w, mean, rstd, accumulate, g->norm_ws, g->norm_ws_bytes, N,
                                 g->s.C, stream));
}

static const float *at(const float *base, size_t offset) { return base ? base + offset : NULL; }

static void gpt_forward(gpt *g)
{
    const shapes *s = &g->s;
    activations *a = &g->act;
    bf16 *P = g->params, *ones = g->scr.ones;
    int N = s->B * s->T, C = s->C, A = s->H * s->D;
    OP("embedding", CK(sx_embedding_forward(a->encoded, g->inputs, param(g, P, P_WTE, 0), param(g, P, P_WPE, 0), s->B, s->T,
                                             C, s->Vp, stream));
                     CK(cudaMemcpyAsync(a->residual, a->encoded, (size_t)N * C * sizeof(bf16), cudaMemcpyDeviceToDevice, stream)));
    for (int l = 0; l < s->L; l++) {
        size_t nc = (size_t)l * N * C, n1 = (size_t)l * N;
        bf16 *x = a->residual + nc, *ln1 = a->ln1 + nc, *qkv = a->qkv + (size_t)l * N * s->qkv;
        bf16 *att = s->flash ? NULL : a->att + (size_t)l * s->B * s->H * s->T * s->T, *atty = a->atty + (size_t)l * N * A;
        bf16 *mid = a->resid_mid + nc, *ln2 = a->ln2 + nc;
        bf16 *fch = a->fch + (size_t)l * N * s->up, *act = a->fch_act + (size_t)l * N * s->F;
        bf16 *next = a->residual + (size_t)(l + 1) * N * C;
        OP("attn_norm", norm_forward(g, ln1, (float *)at(a->ln1_mean, n1), a->ln1_rstd + n1, x, param(g, P, P_LN1W, l),
                                     param(g, P, P_LN1B, l), N));
        linear_forward("qkv", qkv, ln1, param(g, P, P_QKVW, l), param(g, P, P_QKVB, l), ones, N, C, s->qkv);
        if (s->flash)
            OP("attention", CK(sx_flash_attention_forward(atty, a->lse + (size_t)l * s->B * s->H * s->T, qkv,
                                                           qkv + (size_t)s->H * s->D, qkv + (size_t)(s->H + s->KV) * s->D, s->B,
                                                           s->T, s->H, s->KV, s->D, s->qkv, s->qkv,
                                                           1.0f / sqrtf((float)s->D), stream)));
        else
            OP("attention", attention_forward(&g->layer_ptrs[l], att, g->scr.datt, s));
        linear_forward("attn_out", g->scr.dbuf_c, atty, param(g, P, P_ATTW, l), param(g, P, P_ATTB, l), ones, N, A, C);
        OP("attn_residual", CK(sx_residual_add(mid, NULL, x, g->scr.dbuf_c, (size_t)N * C, stream)));
        OP("mlp_norm", norm_forward(g, ln2, (float *)at(a->ln2_mean, n1), a->ln2_rstd + n1, mid, param(g, P, P_LN2W, l),
                                    param(g, P, P_LN2B, l), N));
        linear_forward("mlp_up", fch, ln2, param(g, P, P_FCW, l), param(g, P, P_FCB, l), ones, N, C, s->up);
        if (s->swiglu) OP("swiglu", CK(sx_swiglu_forward(act, fch, fch + s->F, N, s->F, s->up, stream)));
        else OP("gelu", CK(sx_gelu_forward(act, fch, (size_t)N * s->F, stream)));
        linear_forward("mlp_down", g->scr.dbuf_c, act, param(g, P, P_PROJW, l), param(g, P, P_PROJB, l), ones, N, s->F, C);
        OP("mlp_residual", CK(sx_residual_add(next, NULL, mid, g->scr.dbuf_c, (size_t)N * C, stream)));
    }
    bf16 *last = a->residual + (size_t)s->L * N * C;
    OP("final_norm", norm_forward(g, a->lnf, a->lnf_mean, a->lnf_rstd, last, param(g, P, P_LNFW, 0), param(g, P, P_LNFB, 0), N));
    bf16 *head = s->tied ? param(g, P, P_WTE, 0) : param(g, P, P_HEAD, 0);
    linear_forward("lm_head", a->logits, a->lnf, head, NULL, NULL, N, C, s->Vp);
    /* loss and, fused, dlogits = (softmax - onehot) / N in place */
    OP("cross_entropy", CK(sx_cross_entropy_fused(a->losses, a->logits, a->logits, g->targets, N, s->V, s->Vp, 1.0f / (float)N,
                                                  stream)));
}

static void gpt_backward(gpt *g)
{
    const shapes *s = &g->s;
    activations *a = &g->act;
    scratch_buffers *r = &g->scr;
    bf16 *P = g->params, *G = g->grads, *ones = r->ones;
    int N = s->B * s->T, C = s->C, A = s->H * s->D;
    OP("zero_grads", CK(cudaMemsetAsync(g->grads, 0, s->count * sizeof(bf16), stream)));
    /* logits = lnf head^T: dlnf = dlogits head, dhead += dlogits^T lnf */
    int head = s->tied ? P_WTE : P_HEAD;
    linear_backward("lm_head_dgrad", "lm_head_wgrad", r->dbuf_c, param(g, G, head, 0), NULL, a->logits, a->lnf,
                    param(g, P, head, 0), NULL, N, C, s->Vp);
    bf16 *last = a->residual + (size_t)s->L * N * C;
    OP("final_norm_bwd", norm_backward(g, r->dresidual, param(g, G, P_LNFW, 0), param(g, G, P_LNFB, 0), r->dbuf_c, last,
                                       param(g, P, P_LNFW, 0), a->lnf_mean, a->lnf_rstd, 0, N));
    for (int l = s->L - 1; l >= 0; l--) {
        size_t nc = (size_t)l * N * C, n1 = (size_t)l * N;
        bf16 *x = a->residual + nc, *ln1 = a->ln1 + nc;
        bf16 *att = s->flash ? NULL : a->att + (size_t)l * s->B * s->H * s->T * s->T, *atty = a->atty + (size_t)l * N * A;
        bf16 *qkv = a->qkv + (size_t)l * N * s->qkv;
        bf16 *mid = a->resid_mid + nc, *ln2 = a->ln2 + nc;
        bf16 *fch = a->fch + (size_t)l * N * s->up, *act = a->fch_act + (size_t)l * N * s->F;
        /* MLP: dresidual holds d(next) = d(mid) from the residual branch */
        bf16 *dact = s->swiglu ? r->dact : r->dfch;
        linear_backward("mlp_down_dgrad", "mlp_down_wgrad", dact, param(g, G, P_PROJW, l), param(g, G, P_PROJB, l),
                        r->dresidual, act, param(g, P, P_PROJW, l), ones, N, s->F, C);
        if (s->swiglu)
            OP("swiglu_bwd", CK(sx_swiglu_backward(r->dfch, r->dfch + s->F, dact, fch, fch + s->F, N, s->F, s->up, stream)));
        else
            OP("gelu_bwd", CK(sx_gelu_backward(r->dfch, fch, r->dfch, (size_t)N * s->F, stream)));
        linear_backward("mlp_up_dgrad", "mlp_up_wgrad", r->dbuf_c, param(g, G, P_FCW, l), param(g, G, P_FCB, l), r->dfch, ln2,
                        param(g, P, P_FCW, l), ones, N, C, s->up);
        OP("mlp_norm_bwd", norm_backward(g, r->dresidual, param(g, G, P_LN2W, l), param(g, G, P_LN2B, l), r->dbuf_c, mid,
                                         param(g, P, P_LN2W, l), at(a->ln2_mean, n1), a->ln2_rstd + n1, 1, N));
        /* attention: dresidual now holds d(mid) = d(x) from the residual branch */
        bf16 *datty = r->dbuf_c;
        linear_backward("attn_out_dgrad", "attn_out_wgrad", datty, param(g, G, P_ATTW, l), param(g, G, P_ATTB, l),
                        r->dresidual, atty, param(g, P, P_ATTW, l), ones, N, A, C);
        if (s->flash) {
            size_t ws = sx_flash_attention_backward_workspace_bytes(s->B, s->T, s->H);
            size_t hd = (size_t)s->H * s->D, kd = (size_t)(s->H + s->KV) * s->D;
            OP("attention_bwd", CK(sx_flash_attention_backward(r->dqkv, r->dqkv + hd, r->dqkv + kd, datty, atty,
                                                                a->lse + (size_t)l * s->B * s->H * s->T, qkv, qkv + hd,
                                                                qkv + kd, s->B, s->T, s->H, s->KV, s->D, s->qkv, s->qkv,
                                                                1.0f / sqrtf((float)s->D), r->flash_ws, ws, stream)));
        } else
            OP("attention_bwd", attention_backward(&g->layer_ptrs[l], att, r->datt, s));
        linear_backward("qkv_dgrad", "qkv_wgrad", r->dbuf_c, param(g, G, P_QKVW, l), param(g, G, P_QKVB, l), r->dqkv, ln1,
                        param(g, P, P_QKVW, l), ones, N, C, s->qkv);
        OP("attn_norm_bwd", norm_backward(g, r->dresidual, param(g, G, P_LN1W, l), param(g, G, P_LN1B, l), r->dbuf_c, x,
                                          param(g, P, P_LN1W, l), at(a->ln1_mean, n1), a->ln1_rstd + n1, 1, N));
    }
    OP("embedding_bwd", CK(sx_embedding_backward(param(g, G, P_WTE, 0), param(g, G, P_WPE, 0), SX_BF16, r->dresidual,
                                                  g->inputs, g->emb_ws, g->emb_ws_bytes, s->B, s->T, C, s->Vp, stream)));
}

static void gpt_update(gpt *g, int step)
{
    sx_adamw_params hp = {3e-4f, 0.9f, 0.95f, 1e-8f, 0.0f, step, 1.0f, NULL};
    OP("optimizer", CK(sx_adamw(g->master, g->m, g->v, g->params, g->grads, g->s.count, &hp, stream)));
}

/* ---- reports: CSV (docs/validation's columns), JSON, an SVG plot -------- */

typedef struct {
    const char *op, *pass;
    double predicted_s, measured_s;         /* predicted < 0: not in the op list */
    double predicted_bytes, measured_bytes; /* the step row only */
} report_row;

typedef struct {
    const model_t *m;
    const hw_gpu *gpu;
    const train_options *o;
    int timed_steps;
    double spread, tokens_per_s, flops_per_s, mfu, first_loss, last_loss;
} report_info;

/* Opens `path`.tmp for writing; the caller renames it when complete, so a
 * failed run never leaves a half-written report behind. */
static FILE *open_tmp(const char *path, char *tmp, size_t len, const char *flag)
{
    snprintf(tmp, len, "%s.tmp", path);
    FILE *f = fopen(tmp, "w");
    if (!f) fprintf(stderr, "sextant-gpu train: %s %s: cannot write\n", flag, path);
    return f;
}

static int close_tmp(FILE *f, const char *tmp, const char *path, const char *flag)
{
    if (fclose(f) != 0 || rename(tmp, path) != 0) {
        fprintf(stderr, "sextant-gpu train: %s %s: write failed\n", flag, path);
        remove(tmp);
        return 1;
    }
    return 0;
}

static void csv_number(FILE *f, double x) { if (x >= 0) fprintf(f, "%.6e", x); }

static int write_csv(const char *path, const report_info *in, const report_row *rows, int n)
{
    char tmp[4200];
    FILE *f = open_tmp(path, tmp, sizeof tmp, "--csv");
    if (!f) return 1;
    fprintf(f, "model,gpu,gpus,tp,pp,dp,mbs,gbs,seq,recompute,zero,op,predicted_s,measured_s,predicted_bytes,measured_bytes,"
               "calibrated\n");
    for (int i = 0; i < n; i++) {
        fprintf(f, "%s,%s,1,1,1,1,%d,%d,%d,none,0,%s,", in->m->name, in->gpu->name, in->o->mbs, in->o->mbs, in->o->seq,
                rows[i].op);
        csv_number(f, rows[i].predicted_s);
        fputc(',', f);
        csv_number(f, rows[i].measured_s);
        fputc(',', f);
        if (rows[i].predicted_bytes > 0) fprintf(f, "%.0f", rows[i].predicted_bytes);
        fputc(',', f);
        if (rows[i].measured_bytes > 0) fprintf(f, "%.0f", rows[i].measured_bytes);
        fprintf(f, ",%d\n", in->o->calibrated);
    }
    return close_tmp(f, tmp, path, "--csv");
}

static int write_json(const char *path, const report_info *in, const report_row *rows, int n)
{
    char tmp[4200];
    FILE *f = open_tmp(path, tmp, sizeof tmp, "--json");
    if (!f) return 1;
    const report_row *step = &rows[n - 1];
    fprintf(f, "{\n  \"model\": \"%s\", \"gpu\": \"%s\", \"gpus\": 1, \"tp\": 1, \"pp\": 1, \"dp\": 1,\n", in->m->name,
            in->gpu->name);
    fprintf(f, "  \"mbs\": %d, \"gbs\": %d, \"seq\": %d, \"recompute\": \"none\", \"zero\": 0, \"attention\": \"%s\", "
               "\"calibrated\": %s,\n", in->o->mbs, in->o->mbs, in->o->seq, in->o->flash ? "flash" : "unfused",
            in->o->calibrated ? "true" : "false");
    fprintf(f, "  \"step\": {\"predicted_s\": %.6e, \"measured_s\": %.6e, \"timed_steps\": %d, \"spread\": %.4f},\n",
            step->predicted_s, step->measured_s, in->timed_steps, in->spread);
    fprintf(f, "  \"memory\": {\"predicted_bytes\": %.0f, \"measured_bytes\": %.0f},\n", step->predicted_bytes,
            step->measured_bytes);
    fprintf(f, "  \"tokens_per_s\": %.1f, \"model_flops_per_s\": %.6e, \"mfu\": %.4f,\n", in->tokens_per_s, in->flops_per_s,
            in->mfu);
    fprintf(f, "  \"loss\": {\"first\": %.4f, \"last\": %.4f},\n  \"ops\": [\n", in->first_loss, in->last_loss);
    for (int i = 0; i < n - 1; i++) {
        fprintf(f, "    {\"op\": \"%s\", \"pass\": \"%s\", ", rows[i].op, rows[i].pass);
        if (rows[i].predicted_s >= 0) fprintf(f, "\"predicted_s\": %.6e, ", rows[i].predicted_s);
        else fprintf(f, "\"predicted_s\": null, ");
        fprintf(f, "\"measured_s\": %.6e}%s\n", rows[i].measured_s, i + 2 < n ? "," : "");
    }
    fprintf(f, "  ]\n}\n");
    return close_tmp(f, tmp, path, "--json");
}

/* Predicted against measured time per op on log axes, the diagonal drawn:
 * the worst-predicted op is the point farthest from it. */
static int write_plot(const char *path, const report_info *in, const report_row *rows, int n)
{
    if (system("command -v gnuplot >/dev/null 2>&1") != 0) {
        fprintf(stderr, "sextant-gpu train: --plot needs gnuplot (Debian: apt-get install gnuplot-nox); no plot written\n");
        return 0;
    }
    char script[4200], tmp[4200];
    snprintf(script, sizeof script, "%s.gp.tmp", path);
    snprintf(tmp, sizeof tmp, "%s.tmp", path);
    FILE *f = fopen(script, "w");
    if (!f) { fprintf(stderr, "sextant-gpu train: --plot %s: cannot write\n", path); return 1; }
    fprintf(f, "set terminal svg size 900,700 dynamic\nset output '%s'\nset logscale xy\n", tmp);
    fprintf(f, "set title '%s on %s, micro-batch %d, seq %d: time per op and step'\n", in->m->name, in->gpu->name, in->o->mbs,
            in->o->seq);
    fprintf(f, "set xlabel 'measured ms'\nset ylabel 'predicted ms'\nset key top left\n");
    fprintf(f, "$ops << EOD\n");
    for (int i = 0; i < n; i++)
        if (rows[i].predicted_s > 0 && rows[i].measured_s > 0)
            fprintf(f, "%.6f %.6f %s\n", rows[i].measured_s * 1e3, rows[i].predicted_s * 1e3, rows[i].op);
    fprintf(f, "EOD\nplot $ops using 1:2 with points pt 7 title 'op', $ops using 1:2:3 with labels offset 1,0.5 font ',8' "
               "notitle, x title 'prediction = measurement' lc rgb 'gray'\n");
    fclose(f);
    char cmd[8600];
    snprintf(cmd, sizeof cmd, "gnuplot '%s'", script);
    int rc = system(cmd);
    remove(script);
    if (rc != 0 || rename(tmp, path) != 0) {
        fprintf(stderr, "sextant-gpu train: --plot %s: gnuplot failed\n", path);
        remove(tmp);
        return 1;
    }
    return 0;
}

static int compare_double(const void *a, const void *b)
{
    double x = *(const double *)a, y = *(const double *)b;
    return (x > y) - (x < y);
}

int train_gpt(const model_t *model, const hw_gpu *gpu, const hw_node *node, const train_options *o, cublasHandle_t handle,
              cudaStream_t s)
{
    blas = handle;
    stream = s;
    int gpt2 = !strcasecmp(model->family, "gpt2") || !strcasecmp(model->family, "gpt");
    int llama = !strcasecmp(model->family, "llama") || !strcasecmp(model->family, "mistral");
    if ((!gpt2 && !llama) || model->experts > 1) {
        fprintf(stderr, "sextant-gpu train: %s is a %s model; the training step covers the GPT-2 and dense LLaMA families\n",
                model->name, model->family);
        return 2;
    }
    if (model->position == POS_LEARNED && o->seq > model->max_positions) {
        fprintf(stderr, "sextant-gpu train: --seq %d exceeds %s's %lld positions\n", o->seq, model->name,
                (long long)model->max_positions);
        return 2;
    }
    if (model->heads % model->kv_heads || model->heads * model->head_dim > model->hidden) {
        fprintf(stderr, "sextant-gpu train: %s: heads %lld, kv heads %lld, head size %lld do not fit the step's buffers\n",
                model->name, (long long)model->heads, (long long)model->kv_heads, (long long)model->head_dim);
        return 2;
    }
    /* what runs: no dropout (as llm.c), and the planner is told so */
    model_t run = *model;
    run.dropout = 0;
    const model_t *m = &run;
    gpt g;
    memset(&g, 0, sizeof g);
    g.s.L = (int)m->layers; g.s.C = (int)m->hidden; g.s.H = (int)m->heads; g.s.KV = (int)m->kv_heads;
    g.s.D = (int)m->head_dim; g.s.F = (int)m->ffn; g.s.V = (int)m->vocab;
    g.s.Vp = (int)padded_vocab(m, 1);
    g.s.maxT = (int)m->max_positions; g.s.B = o->mbs; g.s.T = o->seq;
    g.s.qkv = (g.s.H + 2 * g.s.KV) * g.s.D;
    g.s.swiglu = m->ffn_kind == FFN_SWIGLU;
    g.s.up = g.s.swiglu ? 2 * g.s.F : g.s.F;
    g.s.rms = m->norm == NORM_RMSNORM;
    g.s.bias = m->bias;
    g.s.learned_pos = m->position == POS_LEARNED;
    g.s.tied = m->tied_embeddings;
    g.s.flash = o->flash;
    if (g.s.flash && g.s.D != 64 && g.s.D != 128) {
        fprintf(stderr, "sextant-gpu train: --attention flash: head size %d; the fused kernel has 64 and 128\n", g.s.D);
        return 2;
    }
    param_shapes(&g.s);
    int N = g.s.B * g.s.T;

    /* the planner's view of the same run, before anything is allocated */
    layout_t l = {0};
    l.gpus = l.tp = l.pp = l.dp = l.vpp = 1;
    l.mbs = o->mbs; l.gbs = o->mbs; l.seq = o->seq; l.gpus_per_node = node->gpus_per_node;
    l.recompute = RECOMPUTE_NONE; l.attention = o->flash ? ATTENTION_FLASH : ATTENTION_UNFUSED; l.precision = PREC_BF16;
    job_t job = {1e9, 1.0};
    static estimate_t e;
    char err[256];
    if (estimate_layout(m, gpu, node, &l, &job, &e, err, sizeof err) != 0) {
        fprintf(stderr, "sextant-gpu train: %s\n", err);
        return 2;
    }
    g.predicted_bytes = e.memory.total;
    size_t free_before, total_mem;
    CK(cudaMemGetInfo(&free_before, &total_mem));
    /* refuse what will not fit rather than fail half-way through allocating */
    double context = gpu->context_bytes > 0 ? gpu->context_bytes : 0.0;
    if (e.memory.total - context > (double)free_before) {
        fprintf(stderr, "sextant-gpu train: %s at micro-batch %d, seq %d does not fit: predicted %.2f GiB, %.2f GiB free of "
                "%.2f GiB on the device\n", m->name, o->mbs, o->seq, e.memory.total / 1073741824.0,
                free_before / 1073741824.0, total_mem / 1073741824.0);
        return 3;
    }

    g.params = device_alloc(&g, g.s.count * sizeof(bf16));
    g.grads = device_alloc(&g, g.s.count * sizeof(bf16));
    g.master = device_alloc(&g, g.s.count * sizeof(float));
    g.m = device_alloc(&g, g.s.count * sizeof(float));
    g.v = device_alloc(&g, g.s.count * sizeof(float));
    size_t state_bytes = g.accounted_bytes;
    g.act_block = device_alloc(&g, layout_activations(&g.act, NULL, &g.s));
    layout_activations(&g.act, g.act_block, &g.s);
    g.scr_block = device_alloc(&g, layout_scratch(&g.scr, NULL, &g.s));
    layout_scratch(&g.scr, g.scr_block, &g.s);
    g.norm_ws_bytes = sx_norm_backward_workspace_bytes(g.s.C);
    g.norm_ws = device_alloc(&g, g.norm_ws_bytes);
    g.emb_ws_bytes = sx_embedding_backward_workspace_bytes(N, g.s.C, g.s.Vp);
    g.emb_ws = device_alloc(&g, g.emb_ws_bytes);
    g.inputs = device_alloc(&g, (size_t)N * sizeof(int32_t));
    g.targets = device_alloc(&g, (size_t)N * sizeof(int32_t));
    lt_workspace = device_alloc(&g, LT_WORKSPACE_BYTES);
    LTC(cublasLtCreate(&lt));
    g.layer_ptrs = calloc((size_t)g.s.L, sizeof *g.layer_ptrs);
    if (!g.layer_ptrs) { fprintf(stderr, "sextant-gpu train: out of host memory\n"); exit(1); }
    for (int i = 0; i < g.s.L && !g.s.flash; i++)
        attention_pointers(&g.layer_ptrs[i], g.act.qkv + (size_t)i * N * g.s.qkv,
                           g.act.att + (size_t)i * g.s.B * g.s.H * g.s.T * g.s.T,
                           g.act.atty + (size_t)i * N * g.s.H * g.s.D, g.scr.dqkv, g.scr.datt, g.scr.dbuf_c, &g.s);
    if (g.scr.ones) {
        uint16_t *ones = malloc((size_t)N * sizeof *ones);
        if (!ones) { fprintf(stderr, "sextant-gpu train: out of host memory\n"); exit(1); }
        for (int i = 0; i < N; i++) ones[i] = to_bf16(1.0f);
        CK(cudaMemcpy(g.scr.ones, ones, (size_t)N * sizeof *ones, cudaMemcpyHostToDevice));
        free(ones);
    }
    gpt_init(&g);

    int32_t *host_in = malloc((size_t)N * sizeof *host_in), *host_tg = malloc((size_t)N * sizeof *host_tg);
    float *host_loss = malloc((size_t)N * sizeof *host_loss);
    double *step_s = malloc((size_t)o->steps * sizeof *step_s);
    unsigned long long data_state = 42;
    cudaEvent_t t0, t1;
    CK(cudaEventCreate(&t0));
    CK(cudaEventCreate(&t1));
    double first_loss = 0, last_loss = 0;
    int timed = 0;
    printf("# sextant-gpu train %s: mbs %d, seq %d, vocab %d padded to %d, %.1fM parameters, %s, %s, %s%s\n", m->name, o->mbs,
           o->seq, g.s.V, g.s.Vp, (double)g.s.count / 1e6, g.s.rms ? "RMSNorm" : "LayerNorm", g.s.swiglu ? "SwiGLU" : "GELU",
           g.s.KV < g.s.H ? "grouped-query attention" : "multi-head attention",
           g.s.learned_pos ? "" : ", no RoPE (the planner does not cost it either: docs/validation/README.md)");
    printf("# attention: %s\n", g.s.flash ? "flash (fused kernel, kernels/attention.cu)" : "unfused (cuBLAS batched GEMMs + causal softmax)");
    for (int step = 1; step <= o->steps; step++) {
        make_batch(host_in, host_tg, N, g.s.V, &data_state);
        CK(cudaMemcpy(g.inputs, host_in, (size_t)N * sizeof *host_in, cudaMemcpyHostToDevice));
        CK(cudaMemcpy(g.targets, host_tg, (size_t)N * sizeof *host_tg, cudaMemcpyHostToDevice));
        CK(cudaEventRecord(t0, stream));
        gpt_forward(&g);
        gpt_backward(&g);
        gpt_update(&g, step);
        CK(cudaEventRecord(t1, stream));
        CK(cudaEventSynchronize(t1));
        CK(cudaGetLastError());
        float ms;
        CK(cudaEventElapsedTime(&ms, t0, t1));
        CK(cudaMemcpy(host_loss, g.act.losses, (size_t)N * sizeof *host_loss, cudaMemcpyDeviceToHost));
        double loss = 0;
        for (int i = 0; i < N; i++) loss += host_loss[i];
        loss /= N;
        if (!isfinite(loss)) {
            fprintf(stderr, "sextant-gpu train: step %d: loss is %f\n", step, loss);
            return 1;
        }
        if (step == 1) first_loss = loss;
        last_loss = loss;
        if (step > o->warmup) step_s[timed++] = ms * 1e-3;
        if (step == 1 || step % 10 == 0 || step == o->steps)
            printf("step %4d  loss %.4f  %.2f ms\n", step, loss, ms);
    }
    /* the profiling pass: one more step with events around every op */
    for (int i = 0; i < 2 * PROFILE_MAX; i++) CK(cudaEventCreate(&profile_events[i]));
    make_batch(host_in, host_tg, N, g.s.V, &data_state);
    CK(cudaMemcpy(g.inputs, host_in, (size_t)N * sizeof *host_in, cudaMemcpyHostToDevice));
    CK(cudaMemcpy(g.targets, host_tg, (size_t)N * sizeof *host_tg, cudaMemcpyHostToDevice));
    profiling = 1;
    profile_count = 0;
    CK(cudaEventRecord(t0, stream));
    gpt_forward(&g);
    gpt_backward(&g);
    gpt_update(&g, o->steps + 1);
    CK(cudaEventRecord(t1, stream));
    CK(cudaEventSynchronize(t1));
    profiling = 0;
    float profiled_ms;
    CK(cudaEventElapsedTime(&profiled_ms, t0, t1));
    enum { NAMES = 64 };
    const char *names[NAMES];
    double op_s[NAMES];
    int nnames = 0;
    for (int i = 0; i < profile_count; i++) {
        float ms;
        CK(cudaEventElapsedTime(&ms, profile_events[2 * i], profile_events[2 * i + 1]));
        int k = 0;
        while (k < nnames && strcmp(names[k], profile_names[i])) k++;
        if (k == nnames && nnames < NAMES) { names[nnames] = profile_names[i]; op_s[nnames++] = 0; }
        if (k < NAMES) op_s[k] += ms * 1e-3;
    }
    size_t free_after;
    CK(cudaMemGetInfo(&free_after, &total_mem));
    qsort(step_s, (size_t)timed, sizeof *step_s, compare_double);
    double median = step_s[timed / 2], spread = (step_s[timed - 1] - step_s[0]) / median;
    double tokens = (double)N;
    double mfu = e.model_flops_per_step / median / gpu->peak_flops[PREC_BF16];
    printf("\nloss %.4f -> %.4f over %d steps (ln V = %.4f)%s\n", first_loss, last_loss, o->steps, log((double)g.s.V),
           last_loss < first_loss - 1.0 ? "" : "   LOSS DID NOT FALL");
    printf("step time: median %.2f ms over %d timed steps (spread %.1f%%), predicted %.2f ms (%+.1f%%)\n", median * 1e3, timed,
           100.0 * spread, e.step_s * 1e3, 100.0 * (e.step_s / median - 1.0));
    printf("tokens/s %.0f, %.1f model TFLOP/s, MFU %.1f%% (planner's model FLOPs %.4g per step)\n", tokens / median,
           e.model_flops_per_step / median / 1e12, 100.0 * mfu, e.model_flops_per_step);
    double device_used = (double)(total_mem - free_after);
    printf("memory: allocated by us %.3f GiB (model state %.3f, activations %.3f, scratch %.3f), device used %.3f GiB;\n"
           "        predicted %.3f GiB (%+.1f%% against the device): weights+grads+Adam %.3f, activations %.3f, logits %.3f, "
           "other %.3f\n",
           g.accounted_bytes / 1073741824.0, state_bytes / 1073741824.0, g.act.bytes / 1073741824.0,
           g.scr.bytes / 1073741824.0, device_used / 1073741824.0, e.memory.total / 1073741824.0,
           100.0 * (e.memory.total / device_used - 1.0),
           (e.memory.weights + e.memory.gradients + e.memory.optimizer) / 1073741824.0, e.memory.activations / 1073741824.0,
           e.memory.logits / 1073741824.0, e.memory.other / 1073741824.0);
    /* op by op: the planner's op list against the profiling pass */
    printf("\nprofiling pass: %.2f ms with %d event pairs (%+.1f%% on the timed median: what the events cost)\n",
           profiled_ms, profile_count, 100.0 * (profiled_ms * 1e-3 / median - 1.0));
    printf("%-20s %-5s %12s %12s %8s\n", "op", "pass", "predicted ms", "measured ms", "error");
    /* one row per op of the planner's list, the step last */
    report_row *rows = calloc((size_t)e.first_stage.nops + 2, sizeof *rows);
    if (!rows) { fprintf(stderr, "sextant-gpu train: out of host memory\n"); exit(1); }
    int nrows = 0;
    for (int i = 0; i < e.first_stage.nops; i++) {
        const op_t *op = &e.first_stage.ops[i];
        if (op->kind == OP_COMM || (op->kind == OP_MEMBOUND && op->bytes <= 0)) continue;
        report_row *r = &rows[nrows++];
        r->op = op->name;
        r->pass = pass_name(op->pass);
        r->predicted_s = op->time_s * (double)op->count;
        for (int k = 0; k < nnames; k++)
            if (!strcmp(names[k], op->name)) r->measured_s = op_s[k];
        printf("%-20s %-5s %12.4f %12.4f %+7.1f%%%s\n", r->op, r->pass, r->predicted_s * 1e3, r->measured_s * 1e3,
               r->measured_s > 0 ? 100.0 * (r->predicted_s / r->measured_s - 1.0) : 0.0,
               r->measured_s > 0 ? "" : "   (not executed)");
    }
    for (int k = 0; k < nnames; k++)
        if (!strcmp(names[k], "zero_grads")) {
            report_row *r = &rows[nrows++];
            r->op = "zero_grads";
            r->pass = "bwd";
            r->predicted_s = -1.0;   /* not in the op list */
            r->measured_s = op_s[k];
            printf("%-20s %-5s %12s %12.4f   (not in the op list)\n", r->op, r->pass, "", r->measured_s * 1e3);
        }
    report_row *step = &rows[nrows++];
    step->op = "step";
    step->pass = "all";
    step->predicted_s = e.step_s;
    step->measured_s = median;
    step->predicted_bytes = e.memory.total;
    step->measured_bytes = device_used;
    report_info info = {m, gpu, o, timed, spread, tokens / median, e.model_flops_per_step / median, mfu, first_loss, last_loss};
    int write_failed = 0;
    if (o->csv) write_failed |= write_csv(o->csv, &info, rows, nrows);
    if (o->json) write_failed |= write_json(o->json, &info, rows, nrows);
    if (o->plot) write_failed |= write_plot(o->plot, &info, rows, nrows);
    free(rows);
    if (write_failed) return 2;
    for (int i = 0; i < 2 * PROFILE_MAX; i++) CK(cudaEventDestroy(profile_events[i]));
    int ok = last_loss < first_loss - 1.0;
    free(host_in); free(host_tg); free(host_loss); free(step_s);
    CK(cudaEventDestroy(t0));
    CK(cudaEventDestroy(t1));
    if (bias_fallbacks) printf("note: %d bias GEMMs ran outside the epilogue (cuBLASLt offered no algorithm)\n", bias_fallbacks);
    lt_free();
    LTC(cublasLtDestroy(lt));
    CK(cudaFree(lt_workspace));
    for (int i = 0; i < g.s.L; i++)
        if (g.layer_ptrs[i].block) CK(cudaFree(g.layer_ptrs[i].block));
    free(g.layer_ptrs);
    void *blocks[] = {g.params, g.grads, g.master, g.m, g.v, g.act_block, g.scr_block, g.norm_ws, g.emb_ws, g.inputs, g.targets};
    for (size_t i = 0; i < sizeof blocks / sizeof blocks[0]; i++) CK(cudaFree(blocks[i]));
    return ok ? 0 : 1;
}
