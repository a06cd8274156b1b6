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

enum { P_WTE, P_WPE, P_LN1W, P_LN1B, P_QKVW, P_QKVB, P_ATTW, P_ATTB, P_LN2W, P_LN2B, P_FCW, P_FCB, P_PROJW, P_PROJB,
       P_LNFW, P_LNFB, P_COUNT };

typedef struct {
    int L, C, H, V, Vp, maxT, B, T;
    size_t sizes[P_COUNT];
    size_t offsets[P_COUNT];
    size_t count;                 /* parameters, with the padded vocabulary rows */
} shapes;

static void param_shapes(shapes *s)
{
    size_t L = (size_t)s->L, C = (size_t)s->C;
    size_t sz[P_COUNT] = {(size_t)s->Vp * C, (size_t)s->maxT * C, L * C, L * C, L * 3 * C * C, L * 3 * C, L * C * C, L * C,
                          L * C, L * C, L * 4 * C * C, L * 4 * C, L * 4 * C * C, L * C, C, C};
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
    float *ln1_mean, *ln1_rstd, *ln2_mean, *ln2_rstd; /* L N */
    bf16 *qkv;          /* L N 3C */
    bf16 *att;          /* L B H T T: softmax output */
    bf16 *atty;         /* L N C */
    bf16 *fch;          /* L N 4C: before GELU */
    bf16 *fch_gelu;     /* L N 4C */
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
    size_t N = (size_t)s->B * s->T, C = (size_t)s->C, L = (size_t)s->L;
    size_t BHTT = (size_t)s->B * s->H * s->T * s->T;
    char *p = base, *start = base;
    size_t total = 0;
#define TAKE(field, type, count) do { a->field = (type *)p; total += carve(&p, (count) * sizeof(type)); } while (0)
    TAKE(encoded, bf16, N * C);
    TAKE(residual, bf16, (L + 1) * N * C);
    TAKE(resid_mid, bf16, L * N * C);
    TAKE(ln1, bf16, L * N * C);
    TAKE(ln2, bf16, L * N * C);
    TAKE(ln1_mean, float, L * N);
    TAKE(ln1_rstd, float, L * N);
    TAKE(ln2_mean, float, L * N);
    TAKE(ln2_rstd, float, L * N);
    TAKE(qkv, bf16, L * N * 3 * C);
    TAKE(att, bf16, L * BHTT);
    TAKE(atty, bf16, L * N * C);
    TAKE(fch, bf16, L * N * 4 * C);
    TAKE(fch_gelu, bf16, L * N * 4 * C);
    TAKE(lnf, bf16, N * C);
    TAKE(lnf_mean, float, N);
    TAKE(lnf_rstd, float, N);
    TAKE(logits, bf16, N * (size_t)s->Vp);
    TAKE(losses, float, N);
#undef TAKE
    (void)start;
    a->bytes = total;
    return total;
}

/* Scratch for backward, reused by every layer. */
typedef struct {
    bf16 *dresidual;   /* N C */
    bf16 *dbuf_c;      /* N C */
    bf16 *dqkv;        /* N 3C */
    bf16 *datt;        /* B H T T */
    bf16 *dfch;        /* N 4C */
    bf16 *ones;        /* N, for bias rows and bias gradients */
    size_t bytes;
} scratch_buffers;

static size_t layout_scratch(scratch_buffers *g, char *base, const shapes *s)
{
    size_t N = (size_t)s->B * s->T, C = (size_t)s->C;
    char *p = base;
    size_t total = 0;
#define TAKE(field, count) do { g->field = (bf16 *)p; total += carve(&p, (count) * sizeof(bf16)); } while (0)
    TAKE(dresidual, N * C);
    TAKE(dbuf_c, N * C);
    TAKE(dqkv, N * 3 * C);
    TAKE(datt, (size_t)s->B * s->H * s->T * s->T);
    TAKE(dfch, N * 4 * C);
    TAKE(ones, N);
#undef TAKE
    g->bytes = total;
    return total;
}

/* ---- the profiling pass: events around every op of one step ------------ */

static cublasHandle_t blas;
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

/* y[N, out] = x[N, in] W^T (+ bias) */
static void linear_forward(const char *name, bf16 *y, const bf16 *x, const bf16 *w, const bf16 *bias, const bf16 *ones, int N,
                           int in, int out)
{
    profile_mark(name, 0);
    CB(cublasGemmEx(blas, CUBLAS_OP_T, CUBLAS_OP_N, out, N, in, &one, w, CUDA_R_16BF, in, x, CUDA_R_16BF, in, &zero, y,
                    CUDA_R_16BF, out, CUBLAS_COMPUTE_32F, CUBLAS_GEMM_DEFAULT));
    if (bias) /* y += bias 1^T, a rank-one update */
        CB(cublasGemmEx(blas, CUBLAS_OP_N, CUBLAS_OP_N, out, N, 1, &one, bias, CUDA_R_16BF, out, ones, CUDA_R_16BF, 1, &one,
                        y, CUDA_R_16BF, out, CUBLAS_COMPUTE_32F, CUBLAS_GEMM_DEFAULT));
    profile_mark(name, 1);
}

/* dx = dy W; dW += dy^T x; dbias += dy^T 1; `name` is the forward op's */
static void linear_backward(const char *dgrad, const char *wgrad, bf16 *dx, bf16 *dw, bf16 *dbias, const bf16 *dy,
                            const bf16 *x, const bf16 *w, const bf16 *ones, int N, int in, int out)
{
    profile_mark(dgrad, 0);
    CB(cublasGemmEx(blas, CUBLAS_OP_N, CUBLAS_OP_N, in, N, out, &one, w, CUDA_R_16BF, in, dy, CUDA_R_16BF, out, &zero, dx,
                    CUDA_R_16BF, in, CUBLAS_COMPUTE_32F, CUBLAS_GEMM_DEFAULT));
    profile_mark(dgrad, 1);
    profile_mark(wgrad, 0);
    CB(cublasGemmEx(blas, CUBLAS_OP_N, CUBLAS_OP_T, in, out, N, &one, x, CUDA_R_16BF, in, dy, CUDA_R_16BF, out, &one, dw,
                    CUDA_R_16BF, in, CUBLAS_COMPUTE_32F, CUBLAS_GEMM_DEFAULT));
    if (dbias)
        CB(cublasGemmEx(blas, CUBLAS_OP_N, CUBLAS_OP_N, out, 1, N, &one, dy, CUDA_R_16BF, out, ones, CUDA_R_16BF, N, &one,
                        dbias, CUDA_R_16BF, out, CUBLAS_COMPUTE_32F, CUBLAS_GEMM_DEFAULT));
    profile_mark(wgrad, 1);
}

/* Per (batch, head) pointer arrays for the batched attention GEMMs. */
typedef struct {
    const void **q, **k, **v, **s, **o;      /* forward operands */
    const void **dq, **dk, **dv, **ds, **dout;
    void *block;
} attention_ptrs;

static void attention_pointers(attention_ptrs *ap, const bf16 *qkv, const bf16 *att, const bf16 *out, const bf16 *dqkv,
                               const bf16 *datt, const bf16 *dout, const shapes *s)
{
    int BH = s->B * s->H, C = s->C, T = s->T, d = C / s->H;
    const void **host = malloc(10 * (size_t)BH * sizeof *host);
    if (!host) { fprintf(stderr, "sextant-gpu train: out of host memory\n"); exit(1); }
    for (int b = 0; b < s->B; b++)
        for (int h = 0; h < s->H; h++) {
            int i = b * s->H + h;
            size_t row = (size_t)b * T * 3 * C + (size_t)h * d;
            host[0 * BH + i] = qkv + row;
            host[1 * BH + i] = qkv + row + C;
            host[2 * BH + i] = qkv + row + 2 * C;
            host[3 * BH + i] = att + (size_t)i * T * T;
            host[4 * BH + i] = out + (size_t)b * T * C + (size_t)h * d;
            host[5 * BH + i] = dqkv + row;
            host[6 * BH + i] = dqkv + row + C;
            host[7 * BH + i] = dqkv + row + 2 * C;
            host[8 * BH + i] = datt + (size_t)i * T * T;
            host[9 * BH + i] = dout + (size_t)b * T * C + (size_t)h * d;
        }
    if (!ap->block) CK(cudaMalloc(&ap->block, 10 * (size_t)BH * sizeof(void *)));
    CK(cudaMemcpy(ap->block, host, 10 * (size_t)BH * sizeof(void *), cudaMemcpyHostToDevice));
    free(host);
    const void **dev = ap->block;
    ap->q = dev; ap->k = dev + BH; ap->v = dev + 2 * BH; ap->s = dev + 3 * BH; ap->o = dev + 4 * BH;
    ap->dq = dev + 5 * BH; ap->dk = dev + 6 * BH; ap->dv = dev + 7 * BH; ap->ds = dev + 8 * BH; ap->dout = dev + 9 * BH;
}

#define BATCHED(ta, tb, m, n, k, A, lda, B, ldb, beta, Cm, ldc, count)                                              \
    CB(cublasGemmBatchedEx(blas, ta, tb, m, n, k, &one, (const void *const *)(A), CUDA_R_16BF, lda,                 \
                           (const void *const *)(B), CUDA_R_16BF, ldb, beta, (void *const *)(Cm), CUDA_R_16BF, ldc, \
                           count, CUBLAS_COMPUTE_32F, CUBLAS_GEMM_DEFAULT))

/* Forward of causal attention from the layer's qkv into atty. The pointer
 * arrays must point at this layer's buffers. */
static void attention_forward(const attention_ptrs *ap, bf16 *att, const bf16 *scores, const shapes *s)
{
    int BH = s->B * s->H, C = s->C, T = s->T, d = C / s->H;
    /* S^T = K Q^T, column-major: S row-major [T, T], into the shared
     * scratch; the softmax writes the probabilities kept for backward */
    BATCHED(CUBLAS_OP_T, CUBLAS_OP_N, T, T, d, ap->k, 3 * C, ap->q, 3 * C, &zero, ap->ds, T, BH);
    CK(sx_softmax_causal_forward(att, scores, BH, T, 1.0f / sqrtf((float)d), stream));
    /* O^T = V^T P^T */
    BATCHED(CUBLAS_OP_N, CUBLAS_OP_N, d, T, T, ap->v, 3 * C, ap->s, T, &zero, ap->o, C, BH);
}

static void attention_backward(const attention_ptrs *ap, bf16 *att, bf16 *datt, const shapes *s)
{
    int BH = s->B * s->H, C = s->C, T = s->T, d = C / s->H;
    BATCHED(CUBLAS_OP_T, CUBLAS_OP_N, T, T, d, ap->v, 3 * C, ap->dout, C, &zero, ap->ds, T, BH);  /* dP = dO V^T */
    BATCHED(CUBLAS_OP_N, CUBLAS_OP_T, d, T, T, ap->dout, C, ap->s, T, &zero, ap->dv, 3 * C, BH);  /* dV = P^T dO */
    CK(sx_softmax_causal_backward(datt, att, datt, BH, T, 1.0f / sqrtf((float)d), stream));
    BATCHED(CUBLAS_OP_N, CUBLAS_OP_N, d, T, T, ap->k, 3 * C, ap->ds, T, &zero, ap->dq, 3 * C, BH); /* dQ = dS K */
    BATCHED(CUBLAS_OP_N, CUBLAS_OP_T, d, T, T, ap->q, 3 * C, ap->ds, T, &zero, ap->dk, 3 * C, BH); /* dK = dS^T Q */
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
} gpt;

static bf16 *param(const gpt *g, bf16 *base, int which, int layer)
{
    size_t per_layer = g->s.sizes[which] / (which >= P_LN1W && which <= P_PROJB ? (size_t)g->s.L : 1);
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
    CK(cudaMalloc(&p, bytes));
    g->accounted_bytes += bytes;
    return p;
}

/* GPT-2's initialisation: N(0, 0.02), residual projections scaled by 1/sqrt(2L), norms at 1 and 0. */
static void gpt_init(gpt *g)
{
    shapes *s = &g->s;
    float *host = malloc(s->count * sizeof *host);
    if (!host) { fprintf(stderr, "sextant-gpu train: out of host memory\n"); exit(1); }
    memset(host, 0, s->count * sizeof *host);
    unsigned long long seed = 1337;
    for (int p = 0; p < P_COUNT; p++) {
        float *t = host + s->offsets[p];
        int is_norm_weight = p == P_LN1W || p == P_LN2W || p == P_LNFW;
        int is_bias = p == P_LN1B || p == P_LN2B || p == P_LNFB || p == P_QKVB || p == P_ATTB || p == P_FCB || p == P_PROJB;
        float scale = (p == P_ATTW || p == P_PROJW) ? 0.02f / sqrtf(2.0f * (float)s->L) : 0.02f;
        for (size_t i = 0; i < s->sizes[p]; i++)
            t[i] = is_norm_weight ? 1.0f : is_bias ? 0.0f : scale * gaussian(&seed);
        if (p == P_WTE) /* padded vocabulary rows stay zero */
            for (size_t i = (size_t)s->V * s->C; i < s->sizes[p]; i++) t[i] = 0.0f;
    }
    uint16_t *half = malloc(s->count * sizeof *half);
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

static void gpt_forward(gpt *g)
{
    const shapes *s = &g->s;
    activations *a = &g->act;
    int N = s->B * s->T, C = s->C;
    OP("embedding", CK(sx_embedding_forward(a->encoded, g->inputs, param(g, g->params, P_WTE, 0), param(g, g->params, P_WPE, 0),
                                             s->B, s->T, C, s->Vp, stream));
                     CK(cudaMemcpyAsync(a->residual, a->encoded, (size_t)N * C * sizeof(bf16), cudaMemcpyDeviceToDevice, stream)));
    for (int l = 0; l < s->L; l++) {
        bf16 *x = a->residual + (size_t)l * N * C, *ln1 = a->ln1 + (size_t)l * N * C, *qkv = a->qkv + (size_t)l * N * 3 * C;
        bf16 *att = a->att + (size_t)l * s->B * s->H * s->T * s->T, *atty = a->atty + (size_t)l * N * C;
        bf16 *mid = a->resid_mid + (size_t)l * N * C, *ln2 = a->ln2 + (size_t)l * N * C;
        bf16 *fch = a->fch + (size_t)l * N * 4 * C, *gelu = a->fch_gelu + (size_t)l * N * 4 * C;
        bf16 *next = a->residual + (size_t)(l + 1) * N * C;
        OP("attn_norm", CK(sx_layernorm_forward(ln1, a->ln1_mean + (size_t)l * N, a->ln1_rstd + (size_t)l * N, x,
                                param(g, g->params, P_LN1W, l), param(g, g->params, P_LN1B, l), N, C, 1e-5f, stream)));
        linear_forward("qkv", qkv, ln1, param(g, g->params, P_QKVW, l), param(g, g->params, P_QKVB, l), g->scr.ones, N, C, 3 * C);
        OP("attention", attention_forward(&g->layer_ptrs[l], att, g->scr.datt, s));
        linear_forward("attn_out", g->scr.dbuf_c, atty, param(g, g->params, P_ATTW, l), param(g, g->params, P_ATTB, l), g->scr.ones, N,
                       C, C);
        OP("attn_residual", CK(sx_residual_add(mid, NULL, x, g->scr.dbuf_c, (size_t)N * C, stream)));
        OP("mlp_norm", CK(sx_layernorm_forward(ln2, a->ln2_mean + (size_t)l * N, a->ln2_rstd + (size_t)l * N, mid,
                                param(g, g->params, P_LN2W, l), param(g, g->params, P_LN2B, l), N, C, 1e-5f, stream)));
        linear_forward("mlp_up", fch, ln2, param(g, g->params, P_FCW, l), param(g, g->params, P_FCB, l), g->scr.ones, N, C, 4 * C);
        OP("gelu", CK(sx_gelu_forward(gelu, fch, (size_t)N * 4 * C, stream)));
        linear_forward("mlp_down", g->scr.dbuf_c, gelu, param(g, g->params, P_PROJW, l), param(g, g->params, P_PROJB, l), g->scr.ones,
                       N, 4 * C, C);
        OP("mlp_residual", CK(sx_residual_add(next, NULL, mid, g->scr.dbuf_c, (size_t)N * C, stream)));
    }
    bf16 *last = a->residual + (size_t)s->L * N * C;
    OP("final_norm", CK(sx_layernorm_forward(a->lnf, a->lnf_mean, a->lnf_rstd, last, param(g, g->params, P_LNFW, 0),
                                            param(g, g->params, P_LNFB, 0), N, C, 1e-5f, stream)));
    linear_forward("lm_head", a->logits, a->lnf, param(g, g->params, P_WTE, 0), NULL, NULL, N, C, s->Vp);
    /* loss and, fused, dlogits = (softmax - onehot) / N in place */
    OP("cross_entropy", CK(sx_cross_entropy_fused(a->losses, a->logits, a->logits, g->targets, N, s->V, s->Vp, 1.0f / (float)N,
                                                  stream)));
}

static void gpt_backward(gpt *g)
{
    const shapes *s = &g->s;
    activations *a = &g->act;
    scratch_buffers *r = &g->scr;
    int N = s->B * s->T, C = s->C;
    OP("zero_grads", CK(cudaMemsetAsync(g->grads, 0, s->count * sizeof(bf16), stream)));
    /* logits = lnf wte^T: dlnf = dlogits wte, dwte += dlogits^T lnf */
    linear_backward("lm_head_dgrad", "lm_head_wgrad", r->dbuf_c, param(g, g->grads, P_WTE, 0), NULL, a->logits, a->lnf, param(g, g->params, P_WTE, 0), NULL, N,
                    C, s->Vp);
    bf16 *last = a->residual + (size_t)s->L * N * C;
    OP("final_norm_bwd", CK(sx_layernorm_backward(r->dresidual, param(g, g->grads, P_LNFW, 0), param(g, g->grads, P_LNFB, 0), SX_BF16,
                                                   r->dbuf_c, last, param(g, g->params, P_LNFW, 0), a->lnf_mean, a->lnf_rstd, 0,
                                                   g->norm_ws, g->norm_ws_bytes, N, C, stream)));
    for (int l = s->L - 1; l >= 0; l--) {
        bf16 *x = a->residual + (size_t)l * N * C, *ln1 = a->ln1 + (size_t)l * N * C;
        bf16 *att = a->att + (size_t)l * s->B * s->H * s->T * s->T, *atty = a->atty + (size_t)l * N * C;
        bf16 *mid = a->resid_mid + (size_t)l * N * C, *ln2 = a->ln2 + (size_t)l * N * C;
        bf16 *fch = a->fch + (size_t)l * N * 4 * C, *gelu = a->fch_gelu + (size_t)l * N * 4 * C;
        /* MLP: dresidual holds d(next) = d(mid) from the residual branch */
        linear_backward("mlp_down_dgrad", "mlp_down_wgrad", r->dfch, param(g, g->grads, P_PROJW, l), param(g, g->grads, P_PROJB, l), r->dresidual, gelu,
                        param(g, g->params, P_PROJW, l), r->ones, N, 4 * C, C);
        OP("gelu_bwd", CK(sx_gelu_backward(r->dfch, fch, r->dfch, (size_t)N * 4 * C, stream)));
        linear_backward("mlp_up_dgrad", "mlp_up_wgrad", r->dbuf_c, param(g, g->grads, P_FCW, l), param(g, g->grads, P_FCB, l), r->dfch, ln2,
                        param(g, g->params, P_FCW, l), r->ones, N, C, 4 * C);
        OP("mlp_norm_bwd", CK(sx_layernorm_backward(r->dresidual, param(g, g->grads, P_LN2W, l), param(g, g->grads, P_LN2B, l), SX_BF16,
                                 r->dbuf_c, mid, param(g, g->params, P_LN2W, l), a->ln2_mean + (size_t)l * N,
                                 a->ln2_rstd + (size_t)l * N, 1, g->norm_ws, g->norm_ws_bytes, N, C, stream)));
        /* attention: dresidual now holds d(mid) = d(x) from the residual branch */
        bf16 *datty = r->dbuf_c;
        linear_backward("attn_out_dgrad", "attn_out_wgrad", datty, param(g, g->grads, P_ATTW, l), param(g, g->grads, P_ATTB, l), r->dresidual, atty,
                        param(g, g->params, P_ATTW, l), r->ones, N, C, C);
        OP("attention_bwd", attention_backward(&g->layer_ptrs[l], att, r->datt, s));
        linear_backward("qkv_dgrad", "qkv_wgrad", r->dbuf_c, param(g, g->grads, P_QKVW, l), param(g, g->grads, P_QKVB, l), r->dqkv, ln1,
                        param(g, g->params, P_QKVW, l), r->ones, N, C, 3 * C);
        OP("attn_norm_bwd", CK(sx_layernorm_backward(r->dresidual, param(g, g->grads, P_LN1W, l), param(g, g->grads, P_LN1B, l), SX_BF16,
                                 r->dbuf_c, x, param(g, g->params, P_LN1W, l), a->ln1_mean + (size_t)l * N,
                                 a->ln1_rstd + (size_t)l * N, 1, g->norm_ws, g->norm_ws_bytes, N, C, stream)));
    }
    OP("embedding_bwd", CK(sx_embedding_backward(param(g, g->grads, P_WTE, 0), param(g, g->grads, P_WPE, 0), SX_BF16,
                                                  r->dresidual, g->inputs, g->emb_ws, g->emb_ws_bytes, s->B, s->T, C, s->Vp,
                                                  stream)));
}

static void gpt_update(gpt *g, int step)
{
    sx_adamw_params hp = {3e-4f, 0.9f, 0.95f, 1e-8f, 0.0f, step, 1.0f, NULL};
    OP("optimizer", CK(sx_adamw(g->master, g->m, g->v, g->params, g->grads, g->s.count, &hp, stream)));
}

static int compare_double(const void *a, const void *b)
{
    double x = *(const double *)a, y = *(const double *)b;
    return (x > y) - (x < y);
}

int train_gpt(const model_t *m, const hw_gpu *gpu, const hw_node *node, const train_options *o, cublasHandle_t handle,
              cudaStream_t s)
{
    blas = handle;
    stream = s;
    if (strcasecmp(m->family, "gpt2") && strcasecmp(m->family, "gpt")) {
        fprintf(stderr, "sextant-gpu train: %s is a %s model; the training step covers the GPT-2 family only so far\n",
                m->name, m->family);
        return 2;
    }
    if (o->seq > m->max_positions) {
        fprintf(stderr, "sextant-gpu train: --seq %d exceeds %s's %lld positions\n", o->seq, m->name, (long long)m->max_positions);
        return 2;
    }
    gpt g;
    memset(&g, 0, sizeof g);
    g.s.L = (int)m->layers; g.s.C = (int)m->hidden; g.s.H = (int)m->heads; g.s.V = (int)m->vocab;
    g.s.Vp = (int)((m->vocab + 127) / 128 * 128);
    g.s.maxT = (int)m->max_positions; g.s.B = o->mbs; g.s.T = o->seq;
    param_shapes(&g.s);
    int N = g.s.B * g.s.T;

    size_t free_before, total_mem;
    CK(cudaMemGetInfo(&free_before, &total_mem));
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
    g.layer_ptrs = calloc((size_t)g.s.L, sizeof *g.layer_ptrs);
    for (int l = 0; l < g.s.L; l++)
        attention_pointers(&g.layer_ptrs[l], g.act.qkv + (size_t)l * N * 3 * g.s.C,
                           g.act.att + (size_t)l * g.s.B * g.s.H * g.s.T * g.s.T, g.act.atty + (size_t)l * N * g.s.C,
                           g.scr.dqkv, g.scr.datt, g.scr.dbuf_c, &g.s);
    uint16_t *ones = malloc((size_t)N * sizeof *ones);
    for (int i = 0; i < N; i++) ones[i] = to_bf16(1.0f);
    CK(cudaMemcpy(g.scr.ones, ones, (size_t)N * sizeof *ones, cudaMemcpyHostToDevice));
    free(ones);
    gpt_init(&g);

    /* the planner's view of the same run */
    layout_t l = {0};
    l.gpus = l.tp = l.pp = l.dp = l.vpp = 1;
    l.mbs = o->mbs; l.gbs = o->mbs; l.seq = o->seq; l.gpus_per_node = node->gpus_per_node;
    l.recompute = RECOMPUTE_NONE; l.attention = ATTENTION_UNFUSED; l.precision = PREC_BF16;
    job_t job = {1e9, 1.0};
    static estimate_t e;
    char err[256];
    if (estimate_layout(m, gpu, node, &l, &job, &e, err, sizeof err) != 0) {
        fprintf(stderr, "sextant-gpu train: %s\n", err);
        return 2;
    }

    int32_t *host_in = malloc((size_t)N * sizeof *host_in), *host_tg = malloc((size_t)N * sizeof *host_tg);
    float *host_loss = malloc((size_t)N * sizeof *host_loss);
    double *step_s = malloc((size_t)o->steps * sizeof *step_s);
    unsigned long long data_state = 42;
    cudaEvent_t t0, t1;
    CK(cudaEventCreate(&t0));
    CK(cudaEventCreate(&t1));
    double first_loss = 0, last_loss = 0;
    int timed = 0;
    printf("# sextant-gpu train %s: mbs %d, seq %d, vocab %d padded to %d, %.1fM parameters\n", m->name, o->mbs, o->seq,
           g.s.V, g.s.Vp, (double)g.s.count / 1e6);
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
    FILE *f = NULL;
    char tmp[4200];
    if (o->csv) {
        snprintf(tmp, sizeof tmp, "%s.tmp", o->csv);
        f = fopen(tmp, "w");
        if (!f) { fprintf(stderr, "sextant-gpu train: --csv %s: cannot write\n", o->csv); return 2; }
        fprintf(f, "model,gpu,gpus,tp,pp,dp,mbs,gbs,seq,recompute,zero,op,predicted_s,measured_s,predicted_bytes,measured_bytes,calibrated\n");
    }
    for (int i = 0; i < e.first_stage.nops; i++) {
        const op_t *op = &e.first_stage.ops[i];
        if (op->kind == OP_COMM || (op->kind == OP_MEMBOUND && op->bytes <= 0)) continue;
        double predicted = op->time_s * (double)op->count, measured = 0;
        for (int k = 0; k < nnames; k++)
            if (!strcmp(names[k], op->name)) measured = op_s[k];
        printf("%-20s %-5s %12.4f %12.4f %+7.1f%%%s\n", op->name, pass_name(op->pass), predicted * 1e3, measured * 1e3,
               measured > 0 ? 100.0 * (predicted / measured - 1.0) : 0.0,
               measured > 0 ? "" : "   (fused: the norm backward accumulates the residual gradient)");
        if (f)
            fprintf(f, "%s,%s,1,1,1,1,%d,%d,%d,none,0,%s,%.6e,%.6e,,,%d\n", m->name, gpu->name, o->mbs, o->mbs, o->seq,
                    op->name, predicted, measured, o->calibrated);
    }
    for (int k = 0; k < nnames; k++)
        if (!strcmp(names[k], "zero_grads")) {
            printf("%-20s %-5s %12s %12.4f   (not in the op list)\n", "zero_grads", "bwd", "", op_s[k] * 1e3);
            if (f)
                fprintf(f, "%s,%s,1,1,1,1,%d,%d,%d,none,0,zero_grads,,%.6e,,,%d\n", m->name, gpu->name, o->mbs, o->mbs, o->seq,
                        op_s[k], o->calibrated);
        }
    if (f) {
        fprintf(f, "%s,%s,1,1,1,1,%d,%d,%d,none,0,step,%.6e,%.6e,%.0f,%.0f,%d\n", m->name, gpu->name, o->mbs, o->mbs, o->seq,
                e.step_s, median, e.memory.total, device_used, o->calibrated);
        if (fclose(f) != 0 || rename(tmp, o->csv) != 0) { fprintf(stderr, "sextant-gpu train: --csv: write failed\n"); return 2; }
    }
    for (int i = 0; i < 2 * PROFILE_MAX; i++) CK(cudaEventDestroy(profile_events[i]));
    int ok = last_loss < first_loss - 1.0;
    free(host_in); free(host_tg); free(host_loss); free(step_s);
    CK(cudaEventDestroy(t0));
    CK(cudaEventDestroy(t1));
    for (int i = 0; i < g.s.L; i++) CK(cudaFree(g.layer_ptrs[i].block));
    free(g.layer_ptrs);
    void *blocks[] = {g.params, g.grads, g.master, g.m, g.v, g.act_block, g.scr_block, g.norm_ws, g.emb_ws, g.inputs, g.targets};
    for (size_t i = 0; i < sizeof blocks / sizeof blocks[0]; i++) CK(cudaFree(blocks[i]));
    return ok ? 0 : 1;
}
