/* sextant-gpu train: a real GPT-2- or LLaMA-family training step, on one GPU
 * or on tp x pp x dp GPUs (one process each), laid out as the planner's
 * memory model says and measured against the planner's own op list.
 *
 *   - Tensor parallelism as Megatron splits it: QKV and the MLP's first GEMM
 *     by columns, the attention output and the MLP's second GEMM by rows, an
 *     all-reduce after each row-parallel GEMM (and its conjugate in the
 *     backward); with sequence parallelism the norms and residuals hold 1/tp
 *     of the tokens, and the all-reduces become all-gather + reduce-scatter.
 *     The vocabulary is split too: the embedding is looked up in each rank's
 *     rows and summed, the cross-entropy is computed from three all-reduces.
 *   - Pipeline parallelism with the 1F1B schedule and NCCL send/recv, the
 *     layers assigned to stages as the planner assigns them.
 *   - Data parallelism: gradients reduced per bucket (one bucket per layer)
 *     on a second stream while the backward goes on; ZeRO-1 reduce-scatters
 *     them instead, runs AdamW on the rank's shard and all-gathers the
 *     parameters, which the next forward waits for bucket by bucket.
 *     ZeRO-2 and ZeRO-3 (validator/zero.c) shard the gradients, and ZeRO-3 the
 *     parameters too: each bucket reduce-scattered as the backward completes
 *     it, every micro-batch; ZeRO-3 gathers each bucket before its forward
 *     and its backward, the next one prefetched on the second stream.
 *   - Full recomputation keeps each layer's input and recomputes the layer
 *     in its backward.
 *
 * bf16 storage, fp32 accumulation (cuBLAS), fp32 master weights and Adam
 * moments; the vocabulary padded to a multiple of 128 x tp (Megatron).
 *
 * Reports the median step time over the timed steps with its spread,
 * tokens/s, TFLOP/s and MFU by the planner's model-FLOP count, peak memory
 * from our own accounting and from the device, each against the planner, and
 * op by op from a separate profiling step. */
#include <math.h>
#include <nccl.h>
#include <pthread.h>
#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>
#include <time.h>
#include <unistd.h>

#include "cp.h"
#include "kernels.h"
#include "reference.h"
#include "kernels_internal.h"
#include "launch.h"
#include "model_ref.h"
#include "moe.h"
#include "outfile.h"
#include "plot.h"
#include "schedule.h"
#include "planner.h"
#include "power.h"
#include "train.h"
#include "zero.h"
#include "loss_trend.h"
#include "fp8.h"

#include "gpu_check.h"
#include "gpu_context.h"
#include "gpu_timing.h"
int my_rank;   /* for error lines (gpu_check.h) */

typedef sx_bf16 bf16;

static void *host_alloc(size_t bytes)
{
    void *p = malloc(bytes ? bytes : 1);
    if (!p) { fprintf(stderr, "sextant-gpu train: rank %d: out of host memory (%zu bytes)\n", my_rank, bytes); exit(1); }
    return p;
}

/* ---- the shapes one rank holds -------------------------------------------- */

/* Tensors a family lacks have size 0: LLaMA has no position table, no biases
 * and no norm biases; a tied model has no separate head, except on the last
 * stage of a pipeline whose first stage holds the table. */
enum { P_WTE, P_WPE, P_LN1W, P_LN1B, P_QKVW, P_QKVB, P_ATTW, P_ATTB, P_LN2W, P_LN2B, P_FCW, P_FCB, P_PROJW, P_PROJB,
       P_LNFW, P_LNFB, P_HEAD, P_COUNT };

static int is_layer_param(int p) { return p >= P_LN1W && p <= P_PROJB; }

typedef struct {
    int L, layer0, Lmodel;    /* layers on this stage, the first one's index in the model, the model's */
    int vpp, Lc;              /* model chunks on this stage (interleaved 1F1B) and layers in each: L = vpp Lc */
    int C, H, KV, D, F;       /* H, KV, F: this rank's share of the heads and of the FFN */
    int Hm, KVm, Fm;          /* the model's */
    int V, Vp, Vl, vocab0;    /* vocabulary, padded (all ranks), this rank's rows and the first of them */
    int maxT, B, T, N, Nl;    /* N = B T tokens; Nl those in norms and residuals (N / tp with SP) */
    int qkv, up;              /* the fused QKV width and the FFN's first GEMM width (2F for SwiGLU) */
    int rms, swiglu, bias, learned_pos, tied;
    int rope;                 /* rotary positions on q and k (LLaMA) */
    float rope_theta;
    int flash, recompute;     /* recompute: full recomputation */
    int first, last;          /* this stage holds the embedding / the final norm, head and loss */
    int tp, tp_rank, sp, dp, dp_rank, pp, pp_rank;
    int cp, cp_rank;          /* context parallelism (validator/cp.c): T is this rank's seq / cp tokens */
    int head_copy;            /* a tied model's last stage keeps its own copy of the table */
    int grads_sharded;        /* ZeRO-2/3 over dp > 1: a rank keeps its slice of each gradient bucket */
    int moe, E, topk, ep;     /* every layer's MLP a mixture of E experts, topk a token, over ep ranks (validator/moe.c) */
} shapes;

/* ---- parameters: one allocation, bucket by bucket --------------------------
 * Buckets in memory order: the embedding (first stage), one per layer, the
 * final norm and untied head (last stage), a tied head's copy (last stage of
 * a pipeline).  A bucket is the unit of the data-parallel reduction, so it is
 * contiguous and padded to a multiple of 8 dp elements: with ZeRO-1 each rank
 * owns one 1/dp slice of every bucket, 16-byte aligned. */
enum { B_EMBED = -1, B_FINAL = -2, B_HEAD = -3 };

typedef struct {
    size_t offset, size;     /* elements, padded */
    size_t shard_offset;     /* ZeRO-1: where this bucket's slice sits in the optimizer state */
    int kind;                /* B_EMBED, B_FINAL, B_HEAD or the layer index */
} bucket;

#define BUCKETS_MAX 512

typedef struct {
    size_t size[P_COUNT];    /* per layer for layer tensors, whole otherwise */
    size_t offset[P_COUNT];  /* inside the layer's bucket for layer tensors, absolute otherwise */
    size_t layer_base, layer_stride;
    size_t count;            /* all parameters with padding */
    size_t shard_count;      /* ZeRO-1: the optimizer state's elements on this rank */
    int nbuckets;
    bucket buckets[BUCKETS_MAX];
} param_layout;

static size_t align8(size_t n) { return (n + 7) & ~(size_t)7; }

static void param_shapes(const shapes *s, param_layout *p)
{
    size_t C = (size_t)s->C, A = (size_t)s->H * s->D;
    size_t ln_bias = s->rms ? 0 : 1, bias = s->bias ? 1 : 0;
    size_t sz[P_COUNT] = {s->first ? (size_t)s->Vl * C : 0,
                          s->first && s->learned_pos ? (size_t)s->maxT * C : 0,
                          C, ln_bias * C, (size_t)s->qkv * C, bias * s->qkv, C * A, bias * C, C, ln_bias * C,
                          (size_t)s->up * C, bias * s->up, C * s->F, bias * C,
                          s->last ? C : 0, s->last ? ln_bias * C : 0,
                          s->last && (!s->tied || s->head_copy) ? (size_t)s->Vl * C : 0};
    if (s->moe) sz[P_FCW] = sz[P_FCB] = sz[P_PROJW] = sz[P_PROJB] = 0;   /* the experts are moe.c's */
    memcpy(p->size, sz, sizeof sz);
    size_t unit = 8 * (size_t)s->dp;
    p->nbuckets = 0;
    p->count = 0;
    p->shard_count = 0;
#define BUCKET(k, body)                                                                                          \
    do {                                                                                                         \
        size_t start_ = p->count, inner_ = 0;                                                                    \
        body;                                                                                                    \
        size_t padded_ = (inner_ + unit - 1) / unit * unit;                                                      \
        if (padded_ > 0) {                                                                                       \
            bucket *b_ = &p->buckets[p->nbuckets++];                                                             \
            b_->offset = start_; b_->size = padded_; b_->kind = (k);                                             \
            b_->shard_offset = p->shard_count;                                                                   \
            p->shard_count += padded_ / (size_t)s->dp;                                                           \
            p->count += padded_;                                                                                 \
        }                                                                                                        \
    } while (0)
#define TENSOR(which, absolute) do { p->offset[which] = (absolute) ? start_ + inner_ : inner_; inner_ += align8(sz[which]); } while (0)
    BUCKET(B_EMBED, { TENSOR(P_WTE, 1); TENSOR(P_WPE, 1); });
    p->layer_base = p->count;
    p->layer_stride = 0;
    for (int l = 0; l < s->L; l++)
        BUCKET(l, { for (int w = P_LN1W; w <= P_PROJB; w++) TENSOR(w, 0); if (l == 0) p->layer_stride = (inner_ + unit - 1) / unit * unit; });
    BUCKET(B_FINAL, { TENSOR(P_LNFW, 1); TENSOR(P_LNFB, 1); if (!s->head_copy) TENSOR(P_HEAD, 1); });
    if (s->head_copy) BUCKET(B_HEAD, { TENSOR(P_HEAD, 1); });
#undef TENSOR
#undef BUCKET
}

/* ---- activations saved for backward, one allocation per micro-batch in flight */

typedef struct {
    bf16 *x;             /* the layer's input (residual stream), Nl C */
    bf16 *ln1, *ln2;     /* the norms' outputs, Nl C */
    float *ln1_mean, *ln1_rstd, *ln2_mean, *ln2_rstd; /* Nl (no means for RMSNorm) */
    bf16 *qkv;           /* N qkv */
    bf16 *att;           /* B H T T: softmax output (unfused) */
    float *lse;          /* B H T: log-sum-exp per query row (flash) */
    bf16 *atty;          /* N H D */
    bf16 *mid;           /* after attention, Nl C */
    bf16 *fch;           /* N up: before the activation */
    bf16 *fch_act;       /* N F */
    bf16 *out;           /* the layer's output: the next layer's input */
    void *moe;           /* MoE: the routing moe.c keeps for the backward */
} layer_acts;

/* one layer's activations, every pointer but x and out */
typedef struct {
    size_t ln, stat, qkv, att, lse, atty, fch, fch_act;   /* element counts */
    size_t moe;                                           /* bytes */
} layer_sizes;

static layer_sizes sizes_of_layer(const shapes *s)
{
    size_t N = (size_t)s->N, Nl = (size_t)s->Nl, C = (size_t)s->C;
    layer_sizes z = {Nl * C, Nl, N * s->qkv, s->flash ? 0 : (size_t)s->B * s->H * s->T * s->T,
                     s->flash ? (size_t)s->B * s->H * s->T : 0, N * (size_t)s->H * s->D, N * s->up, N * s->F, 0};
    if (s->moe) {
        z.fch = z.fch_act = 0;
        z.moe = moe_saved_bytes(s->N, s->E, s->topk, s->ep, s->C);
    }
    return z;
}

static size_t carve(char **cursor, size_t bytes)
{
    size_t aligned = (bytes + 255) & ~(size_t)255;
    *cursor += aligned;
    return aligned;
}

typedef struct {
    bf16 *input;            /* Nl C: the chunk's input (interleaved: a buffer of the input pool, set by the forward) */
    bf16 *residual;         /* Lc x Nl C: each layer's output */
    char *layers;           /* Lc x one layer's block (none with full recomputation) */
    size_t layer_bytes;
    bf16 *lnf;              /* Nl C (last stage) */
    float *lnf_mean, *lnf_rstd;
    bf16 *logits;           /* N Vl, then dlogits in place */
    size_t bytes;
} slot_acts;

/* Lays out (base == NULL: only sizes) one layer's block. */
static size_t layout_layer(layer_acts *a, char *base, const shapes *s)
{
    layer_sizes z = sizes_of_layer(s);
    size_t means = s->rms ? 0 : 1;
    char *p = base;
    size_t total = 0;
#define TAKE(field, type, count) do { a->field = (count) != 0 && base ? (type *)p : NULL; total += carve(&p, (count) * sizeof(type)); } while (0)
    TAKE(ln1, bf16, z.ln);
    TAKE(ln2, bf16, z.ln);
    TAKE(mid, bf16, z.ln);
    TAKE(ln1_mean, float, means * z.stat);
    TAKE(ln1_rstd, float, z.stat);
    TAKE(ln2_mean, float, means * z.stat);
    TAKE(ln2_rstd, float, z.stat);
    TAKE(qkv, bf16, z.qkv);
    TAKE(att, bf16, z.att);
    TAKE(lse, float, z.lse);
    TAKE(atty, bf16, z.atty);
    TAKE(fch, bf16, z.fch);
    TAKE(fch_act, bf16, z.fch_act);
    TAKE(moe, char, z.moe);
#undef TAKE
    return total;
}

/* Interleaved: the last chunk's head activations (final norm, logits), one
 * pool of the schedule's size, lent to a slot by its forward. */
static size_t layout_head(slot_acts *a, char *base, const shapes *s)
{
    size_t Nl = (size_t)s->Nl, N = (size_t)s->N, C = (size_t)s->C, means = s->rms ? 0 : 1;
    char *p = base;
    size_t total = 0;
#define TAKE(field, type, count) do { a->field = (count) != 0 && base ? (type *)p : NULL; total += carve(&p, (count) * sizeof(type)); } while (0)
    TAKE(lnf, bf16, Nl * C);
    TAKE(lnf_mean, float, means * Nl);
    TAKE(lnf_rstd, float, Nl);
    TAKE(logits, bf16, N * s->Vl);
#undef TAKE
    return total;
}

/* One micro-batch's activations of one chunk: with interleaving its input
 * and its head live in pools of their own (schedule.h), so every slot is the
 * same size and any chunk can use it. */
static size_t layout_slot(slot_acts *a, char *base, const shapes *s)
{
    int own_input = s->vpp == 1, head = s->last && s->vpp == 1;
    size_t Nl = (size_t)s->Nl, C = (size_t)s->C;
    char *p = base;
    size_t total = 0;
    layer_acts probe;
    a->layer_bytes = layout_layer(&probe, NULL, s);
#define TAKE(field, type, count) do { a->field = (count) != 0 && base ? (type *)p : NULL; total += carve(&p, (count) * sizeof(type)); } while (0)
    TAKE(input, bf16, own_input ? Nl * C : 0);
    TAKE(residual, bf16, (size_t)s->Lc * Nl * C);
    TAKE(layers, char, s->recompute ? 0 : (size_t)s->Lc * a->layer_bytes);
#undef TAKE
    if (head) {
        total += layout_head(a, base ? p : NULL, s);   /* last in the slot: nothing follows it */
    } else {
        a->lnf = a->logits = NULL;
        a->lnf_mean = a->lnf_rstd = NULL;
    }
    a->bytes = total;
    return total;
}

/* Scratch for backward (and the tensor-parallel gathers), reused by every
 * layer and micro-batch: the planner's backward_workspace_bytes() counts the
 * backward's part (docs/model.md). */
typedef struct {
    bf16 *dresidual;   /* Nl C: the gradient of the residual stream */
    bf16 *dbuf_c;      /* N C: a GEMM's output before its tensor-parallel reduction */
    bf16 *dqkv;        /* N qkv */
    bf16 *datt;        /* B H T T (unfused) */
    float *flash_ws;   /* flash's backward (rowsum of dO * O) */
    bf16 *dfch;        /* N up */
    bf16 *dact;        /* N F, SwiGLU only */
    bf16 *ones;        /* N, for the bias fallback when cuBLASLt offers no bias epilogue */
    bf16 *gathered;    /* N C, SP: a norm's output gathered over the group */
    bf16 *dfull;       /* N C, SP: the residual gradient gathered over the group */
    bf16 *dlocal;      /* Nl C, SP: a reduce-scatter's result */
    float *ce_stats;   /* 4 N, vocabulary-parallel cross-entropy */
    float *losses;     /* m N: every micro-batch's per-token loss (last stage) */
    int32_t *inputs, *targets, *ids_shifted, *targets_shifted;  /* m N each */
    size_t bytes;
} scratch_buffers;

static size_t layout_scratch(scratch_buffers *g, char *base, const shapes *s, int microbatches)
{
    size_t N = (size_t)s->N, C = (size_t)s->C, Nl = (size_t)s->Nl, m = (size_t)microbatches;
    char *p = base;
    size_t total = 0;
#define TAKE(field, type, count) do { g->field = (count) != 0 && base ? (void *)p : NULL; total += carve(&p, (count) * sizeof(type)); } while (0)
    TAKE(dresidual, bf16, Nl * C);
    TAKE(dbuf_c, bf16, N * C);
    TAKE(dqkv, bf16, N * s->qkv);
    TAKE(datt, bf16, s->flash ? 0 : (size_t)s->B * s->H * s->T * s->T);
    TAKE(flash_ws, char, s->flash ? sx_flash_attention_backward_workspace_bytes(s->B, s->T, s->H) : 0);
    TAKE(dfch, bf16, s->moe ? 0 : N * s->up);
    TAKE(dact, bf16, s->swiglu && !s->moe ? N * s->F : 0);
    TAKE(ones, bf16, s->bias ? N : 0);
    TAKE(gathered, bf16, s->sp && s->tp > 1 ? N * C : 0);
    TAKE(dfull, bf16, s->sp && s->tp > 1 ? N * C : 0);
    TAKE(dlocal, bf16, s->sp && s->tp > 1 ? Nl * C : 0);
    TAKE(ce_stats, float, s->last && s->tp > 1 ? 4 * N : 0);
    TAKE(losses, float, s->last ? m * N : 0);
    TAKE(inputs, int32_t, m * N);
    TAKE(targets, int32_t, m * N);
    TAKE(ids_shifted, int32_t, s->tp > 1 ? m * N : 0);
    TAKE(targets_shifted, int32_t, s->tp > 1 ? m * N : 0);
#undef TAKE
    g->bytes = total;
    return total;
}

/* ---- the profiling step: events around every op ---------------------------- */

#define PROFILE_MAX 32768
static int profiling;
static int profile_count;
static pass_t current_pass;       /* forward, backward, recompute or step: which row of the op list an op is */
static cudaEvent_t *profile_events;
static int profile_events_made;
typedef struct { const char *name; pass_t pass; } profile_tag;
static profile_tag *profile_tags;

/* SEXTANT_CLOCK_PROBE=all or a list of op names (attention,mlp_up,...): the SM clock right
 * after those ops of the profiling step and at the end of every timed step, by
 * sx_sm_clock_probe (CLOCK_PROBE_US each; the profiling step's time includes them, the timed
 * steps' do not).  A diagnostic: at what clock a kernel runs inside a step, against calibrate's
 * clock for it alone. */
/* CLOCK_PROBE_US: gpu_timing.h */
static const char *clock_probe_ops;
static float *clock_probe_mhz; /* device: PROFILE_MAX slots for the ops, then one per step */
static int clock_probe_wanted(const char *name)
{
    if (!clock_probe_ops) return 0;
    if (!strcmp(clock_probe_ops, "all")) return 1;
    size_t n = strlen(name);
    for (const char *p = clock_probe_ops; (p = strstr(p, name)) != NULL; p += n)
        if ((p == clock_probe_ops || p[-1] == ',') && (p[n] == ',' || p[n] == '\0')) return 1;
    return 0;
}

static void profile_mark_on(const char *name, int end, cudaStream_t on)
{
    if (!profiling || profile_count >= PROFILE_MAX) return;
    if (!end) {
        profile_tags[profile_count].name = name;
        profile_tags[profile_count].pass = current_pass;
        while (profile_events_made < 2 * profile_count + 2) CK(cudaEventCreate(&profile_events[profile_events_made++]));
    }
    CK(cudaEventRecord(profile_events[2 * profile_count + end], on));
    if (end && clock_probe_wanted(name)) CK(sx_sm_clock_probe(clock_probe_mhz + profile_count, CLOCK_PROBE_US, on));
    if (end) profile_count++;
}
static void profile_mark(const char *name, int end) { profile_mark_on(name, end, gpu_ctx.stream); }

/* an environment variable holding an integer in [lo, hi]; `unset` when absent or empty; exits
 * with one line naming it otherwise */
static int env_int_in(const char *name, int lo, int hi, int unset)
{
    const char *text = getenv(name);
    if (!text || !*text) return unset;
    char *end;
    long v = strtol(text, &end, 10);
    if (*end || v < lo || v > hi) {
        fprintf(stderr, "sextant-gpu train: %s=%s: expected an integer from %d to %d\n", name, text, lo, hi);
        exit(2);
    }
    return (int)v;
}

/* SEXTANT_REPLAY=R, a diagnostic: after the profiling step, one more step in which every
 * GEMM of a linear layer and every attention runs R more times back to back on the step's
 * own operands, timed apart (forward, dgrad and the attention rewrite their own outputs,
 * which they do not read; wgrad writes a spare dW).  Set beside the profiling step's time
 * for the same op and calibrate's, it tells what the operands' values cost (calibrate
 * times random data) from what the step around the op costs (the clock it holds, the
 * caches). */
static int replay_runs;
static int replaying;
static int replay_count;
static cudaEvent_t *replay_events;
static int replay_events_made;
static profile_tag *replay_tags;
static void *replay_dw, *replay_dbias;
static size_t replay_dw_bytes, replay_dbias_bytes;
static int replay_dw_refused;

static void replay_mark(const char *name, int end)
{
    if (!end) {
        replay_tags[replay_count].name = name;
        replay_tags[replay_count].pass = current_pass;
        while (replay_events_made < 2 * replay_count + 2) CK(cudaEventCreate(&replay_events[replay_events_made++]));
    }
    CK(cudaEventRecord(replay_events[2 * replay_count + end], gpu_ctx.stream));
    if (end) replay_count++;
}
static int replay_wanted(void) { return replaying && replay_count < PROFILE_MAX; }
/* an op whose outputs do not feed its inputs (attention): profiled, and in the replay step run
 * replay_runs more times back to back */
#define OP_REPLAYED(name, stmt)                                            \
    do {                                                                   \
        OP(name, stmt);                                                    \
        if (replay_wanted()) {                                             \
            replay_mark(name, 0);                                          \
            for (int replay_ = 0; replay_ < replay_runs; replay_++) stmt;  \
            replay_mark(name, 1);                                          \
        }                                                                  \
    } while (0)

/* a spare buffer of at least `bytes` for the replayed wgrad; 0 where the device has no room */
static int replay_reserve(void **buf, size_t *have, size_t bytes)
{
    if (*have >= bytes) return 1;
    if (*buf) CK(cudaFree(*buf));
    *buf = NULL;
    *have = 0;
    if (cudaMalloc(buf, bytes) != cudaSuccess) {
        (void)cudaGetLastError(); /* out of memory is not sticky: clear it */
        *buf = NULL;
        if (!replay_dw_refused)
            fprintf(stderr, "sextant-gpu train: SEXTANT_REPLAY: no room for a spare dW of %.1f MiB; those wgrads "
                            "are not replayed\n", bytes / 1048576.0);
        replay_dw_refused = 1;
        return 0;
    }
    CK(cudaMemset(*buf, 0, bytes)); /* dW accumulates: start from numbers */
    *have = bytes;
    return 1;
}
/* SEXTANT_REPLAY_COPIES=1, with SEXTANT_REPLAY: the fused attention of the replay step runs its R
 * times once more on copies of its operands in an allocation of their own, outside the step's one
 * allocation.  On an H100 the step's LLaMA attention backward took 17.5% longer than calibrate's,
 * with L2, the operands' values and the clock ruled out as far as measured
 * (docs/validation/archive/2026-11-25-h100-heated-attention): if the copies run at calibrate's speed, the
 * placement of the step's buffers is the cause; if at the step's, the step around them. */
static int replay_copies;
static void *replay_copy;
static size_t replay_copy_have;
static int replay_copy_refused;

/* the copies' layout in replay_copy: qkv, out, dout, dqkv, lse, workspace (part: their sizes) */
static void replay_copy_layout(const shapes *s, size_t at[7], size_t part[6])
{
    const size_t n_qkv = (size_t)s->B * s->T * s->qkv, n_out = (size_t)s->B * s->T * s->H * s->D;
    part[0] = part[3] = n_qkv * sizeof(bf16);
    part[1] = part[2] = n_out * sizeof(bf16);
    part[4] = (size_t)s->B * s->H * s->T * sizeof(float);
    part[5] = sx_flash_attention_backward_workspace_bytes(s->B, s->T, s->H);
    at[0] = 0;
    for (int i = 0; i < 6; i++) at[i + 1] = at[i] + (part[i] + 255) / 256 * 256;
}

static void run_attention_on_copies(const shapes *s, int backward)
{
    size_t at[7], part[6];
    replay_copy_layout(s, at, part);
    char *base = replay_copy;
    bf16 *cq = (bf16 *)(base + at[0]), *cout = (bf16 *)(base + at[1]), *cdout = (bf16 *)(base + at[2]);
    bf16 *cdq = (bf16 *)(base + at[3]);
    float *clse = (float *)(base + at[4]);
    const size_t hd = (size_t)s->H * s->D, kd = (size_t)(s->H + s->KV) * s->D;
    const float scale = 1.0f / sqrtf((float)s->D);
    CK(backward ? sx_flash_attention_backward(cdq, cdq + hd, cdq + kd, cdout, cout, clse, cq, cq + hd, cq + kd, s->B, s->T, s->H,
                                              s->KV, s->D, s->qkv, s->qkv, scale, base + at[5], part[5], gpu_ctx.stream)
                : sx_flash_attention_forward(cout, clse, cq, cq + hd, cq + kd, s->B, s->T, s->H, s->KV, s->D, s->qkv, s->qkv,
                                             scale, gpu_ctx.stream));
}

typedef struct { const shapes *s; int backward; } copies_run;
static void run_copies(const void *ctx, int r)
{
    (void)r;
    const copies_run *c = ctx;
    run_attention_on_copies(c->s, c->backward);
}

/* After the replay step, with the last layer's copies (the backward's operands of layer 0): each
 * pass back to back alone as calibrate times it (time_batches), after a second of idle;
 * milliseconds per call and the clock the batches left */
static void replay_copies_alone(const shapes *s, double ms_per_call[2], double mhz[2])
{
    ms_per_call[0] = ms_per_call[1] = mhz[0] = mhz[1] = 0.0;
    if (!replay_copy) return;
    for (int pass = 0; pass < 2; pass++) {
        CK(cudaStreamSynchronize(gpu_ctx.stream));
        sleep(1);
        const copies_run c = {s, pass};
        ms_per_call[pass] = 1e3 * time_batches(run_copies, &c, 20, &mhz[pass]);
    }
}

static void replay_attention_on_copies(const shapes *s, int backward, const bf16 *qkv, const bf16 *out, const float *lse,
                                       const bf16 *dout)
{
    size_t at[7], part[6];
    replay_copy_layout(s, at, part);
    const size_t lse_bytes = part[4];
    if (replay_copy_have < at[6]) {
        if (replay_copy) CK(cudaFree(replay_copy));
        replay_copy = NULL;
        replay_copy_have = 0;
        if (replay_copy_refused) return;
        if (cudaMalloc(&replay_copy, at[6]) != cudaSuccess) {
            (void)cudaGetLastError();
            replay_copy = NULL;
            replay_copy_refused = 1;
            fprintf(stderr, "sextant-gpu train: SEXTANT_REPLAY_COPIES: no room for %.1f MiB of copies; not replayed\n",
                    at[6] / 1048576.0);
            return;
        }
        replay_copy_have = at[6];
    }
    char *base = replay_copy;
    CK(cudaMemcpyAsync(base + at[0], qkv, part[0], cudaMemcpyDeviceToDevice, gpu_ctx.stream));
    CK(cudaMemcpyAsync(base + at[1], out, part[1], cudaMemcpyDeviceToDevice, gpu_ctx.stream));
    CK(cudaMemcpyAsync(base + at[4], lse, lse_bytes, cudaMemcpyDeviceToDevice, gpu_ctx.stream));
    if (backward) CK(cudaMemcpyAsync(base + at[2], dout, part[2], cudaMemcpyDeviceToDevice, gpu_ctx.stream));
    replay_mark(backward ? "attention_bwd_on_copies" : "attention_on_copies", 0);
    for (int r = 0; r < replay_runs; r++) run_attention_on_copies(s, backward);
    replay_mark(backward ? "attention_bwd_on_copies" : "attention_on_copies", 1);
}

static void replay_free(void)
{
    if (replay_dw) CK(cudaFree(replay_dw));
    if (replay_dbias) CK(cudaFree(replay_dbias));
    if (replay_copy) CK(cudaFree(replay_copy));
    replay_dw = replay_dbias = NULL;
    replay_copy = NULL;
    replay_dw_bytes = replay_dbias_bytes = replay_copy_have = 0;
}
/* Brackets one op with events when profiling; otherwise runs it bare. */
#define OP(name, stmt) do { profile_mark(name, 0); stmt; profile_mark(name, 1); } while (0)

/* ---- GEMMs, row-major in the PyTorch convention W[out, in] ----------------- */

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

static void lt_free(void)
{
    for (int i = 0; i < lt_nplans; i++) {
        CB(cublasLtMatrixLayoutDestroy(lt_plans[i].a));
        CB(cublasLtMatrixLayoutDestroy(lt_plans[i].b));
        CB(cublasLtMatrixLayoutDestroy(lt_plans[i].c));
        CB(cublasLtMatmulDescDestroy(lt_plans[i].desc));
    }
    lt_nplans = 0;
}

static int train_fp8;        /* --precision fp8: the linear layers' GEMMs through fp8.c */

/* FP8 for every linear layer but the vocabulary projection, which stays in bf16 as in
 * Megatron with Transformer Engine (its logits feed the loss directly) */
static int use_fp8(const char *name) { return train_fp8 && strncmp(name, "lm_head", 7) != 0; }

static int bias_fallbacks;   /* GEMMs whose bias ran as a separate rank-one GEMM */
static int bias_accumulate;  /* a later micro-batch of the step: bias gradients add up, the epilogue would overwrite */

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
static void linear_forward(const char *name, bf16 *y, const bf16 *x, const bf16 *w, const bf16 *bias, const bf16 *ones, int N,
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

static void linear_backward(const char *dgrad, const char *wgrad, bf16 *dx, bf16 *dw, bf16 *dbias, const bf16 *dy,
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
static void attention_forward(const attention_ptrs *ap, bf16 *att, const bf16 *scores, const shapes *s)
{
    int BH = s->B * s->H, T = s->T, D = s->D, W = s->qkv, A = s->H * s->D;
    /* S^T = K Q^T, column-major: S row-major [T, T], into the shared
     * scratch; the softmax writes the probabilities kept for backward */
    BATCHED(CUBLAS_OP_T, CUBLAS_OP_N, T, T, D, ap->k, W, ap->q, W, &zero, ap->ds, T, BH);
    CK(sx_softmax_causal_forward(att, scores, BH, T, 1.0f / sqrtf((float)D), gpu_ctx.stream));
    /* O^T = V^T P^T */
    BATCHED(CUBLAS_OP_N, CUBLAS_OP_N, D, T, T, ap->v, W, ap->s, T, &zero, ap->o, A, BH);
}

static void attention_backward(const attention_ptrs *ap, bf16 *att, bf16 *datt, const shapes *s)
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

/* ---- the model on this rank ------------------------------------------------ */

typedef struct {
    shapes s;
    param_layout pl;
    int microbatches;             /* per step on this rank: gbs / (mbs dp) */
    bf16 *params, *grads;
    float *master, *m, *v;        /* the whole (ZeRO 0) or this rank's slice of every bucket (ZeRO-1) */
    int nslots;                   /* micro-batches in flight: min(pp - stage, m) for 1F1B, the schedule's count interleaved */
    slot_acts slots[64];
    void *slot_block;
    pipe_buffers pools;           /* interleaved: the schedule's inputs, heads and received gradients */
    bf16 *inputs[64], *grad_bufs[64];
    slot_acts heads[64];          /* lnf and logits only */
    cudaEvent_t *action_done;     /* interleaved: one per schedule action, on the stream that ran it */
    pipe_wait *waits;             /* interleaved: what each action waits for (schedule.h) */
    int last_group;
    layer_acts recomp;            /* full recomputation: the one layer whose activations are live */
    void *recomp_block;
    scratch_buffers scr;
    void *scr_block, *norm_ws, *emb_ws;
    size_t norm_ws_bytes, emb_ws_bytes;
    void *emb_grouping;           /* [slot] the embedding backward's grouping of each micro-batch's ids */
    size_t emb_grouping_bytes;    /* per slot */
    cudaEvent_t emb_fwd_at[64], emb_prepared[64];
    attention_ptrs *ptrs;         /* unfused attention: [slot][layer], or one for the recomputed layer */
    int32_t *host_ids;            /* pinned: 4 m N */
    size_t accounted_bytes;       /* everything this program allocated */
    double predicted_bytes;       /* the planner's peak, for the out-of-memory message */
    launch_ctx *ctx;
    ncclComm_t tp_comm, dp_comm, pp_comm, tied_comm, ep_comm, edp_comm;
    int tied_sync;                /* the tied table's two copies (first and last stage) add their gradients */
    cudaEvent_t grad_ready[BUCKETS_MAX], params_ready[BUCKETS_MAX], reduce_done, optimizer_done;
    int comm_used;                /* the second stream got work this step */
    pipe_action *schedule;        /* this stage's 1F1B actions, the same every step */
    int nschedule;
    cudaEvent_t synced;           /* recorded to wait for the compute stream alone */
    double lr;                    /* peak learning rate */
    int lr_warmup;                /* steps of linear warm-up */
    int zero;                     /* 2 or 3 with dp > 1: validator/zero.c shards gradients (and parameters); else 0 */
    zero_state zs;
    zero_bucket zb[BUCKETS_MAX];  /* pl.buckets as zero.c sees them */
    size_t zero_bytes;            /* what zero.c's buffers take */
    cp_state cps;                 /* context parallelism (cp > 1): the ring's buffers and stream */
    ncclComm_t cp_comm;
    moe_state moe;                /* MoE: the routers and experts, their state and exchange (validator/moe.c) */
} gpt;

static int spg(const shapes *s) { return s->sp && s->tp > 1; }

/* A tensor of one layer (or the whole tensor), NULL when this rank lacks it. */
static size_t param_offset(const gpt *g, int which, int layer)
{
    if (is_layer_param(which)) return g->pl.layer_base + (size_t)layer * g->pl.layer_stride + g->pl.offset[which];
    return g->pl.offset[which];
}

/* ZeRO-2/3: a gradient lives in the buffer of the bucket the backward writes now, and with
 * ZeRO-3 a parameter in the gathered buffer of the bucket held now; anything else is a bug. */
static bf16 *zero_tensor(const gpt *g, int grads, int which, int layer)
{
    size_t at = param_offset(g, which, layer);
    bf16 *p = grads ? zero_grad_at(&g->zs, at) : zero_param_at(&g->zs, at);
    if (!p) {
        fprintf(stderr, "sextant-gpu train: rank %d: internal: ZeRO-%d: the %s of tensor %d, layer %d, outside the bucket "
                "held\n", my_rank, g->zero, grads ? "gradient" : "parameter", which, layer);
        exit(1);
    }
    return p;
}

static bf16 *param(const gpt *g, bf16 *base, int which, int layer)
{
    if (g->pl.size[which] == 0) return NULL;
    if (g->zero && base == g->grads) return zero_tensor(g, 1, which, layer);
    if (g->zero == 3 && base == g->params) return zero_tensor(g, 0, which, layer);
    return base + param_offset(g, which, layer);
}

/* The table the head multiplies with: its own, or the embedding's when tied on one stage. */
static int head_tensor(const shapes *s) { return s->tied && !s->head_copy ? P_WTE : P_HEAD; }
/* and the bucket it lies in */
static int head_bucket(const shapes *s) { return s->tied && !s->head_copy ? B_EMBED : s->head_copy ? B_HEAD : B_FINAL; }

static int bucket_index(const gpt *g, int kind)
{
    for (int i = 0; i < g->pl.nbuckets; i++)
        if (g->pl.buckets[i].kind == kind) return i;
    return -1;
}

static void *device_alloc(gpt *g, size_t bytes)
{
    void *p;
    cudaError_t err = cudaMalloc(&p, bytes ? bytes : 256);
    if (err == cudaErrorMemoryAllocation) {
        size_t free_bytes, total;
        cudaGetLastError();
        CK(cudaMemGetInfo(&free_bytes, &total));
        fprintf(stderr, "sextant-gpu train: rank %d: out of memory allocating %.3f GiB after %.3f GiB: predicted peak %.3f GiB, "
                "device %.3f GiB free of %.3f GiB\n", my_rank, bytes / 1073741824.0, g->accounted_bytes / 1073741824.0,
                g->predicted_bytes / 1073741824.0, free_bytes / 1073741824.0, total / 1073741824.0);
        exit(3);
    }
    CK(err);
    g->accounted_bytes += bytes;
    return p;
}

static uint64_t splitmix64(uint64_t x)
{
    x += 0x9e3779b97f4a7c15ULL;
    x = (x ^ (x >> 30)) * 0xbf58476d1ce4e5b9ULL;
    x = (x ^ (x >> 27)) * 0x94d049bb133111ebULL;
    return x ^ (x >> 31);
}

/* The initial value of element `index` of tensor `which` in layer `layer` of
 * the whole model: a function of where it sits in the unsplit model only, so
 * every layout starts from the same weights as one GPU does.  Uniform with
 * GPT-2's standard deviation (0.02, residual projections 0.02 / sqrt(2L)). */
static float initial_value(int which, int layer, uint64_t index, float stddev)
{
    uint64_t h = splitmix64(((uint64_t)which << 56) ^ ((uint64_t)layer << 44) ^ index ^ 0x5eed5eedULL);
    double u = (double)(h >> 11) * (1.0 / 9007199254740992.0);
    return (float)(stddev * 1.7320508075688772 * (2.0 * u - 1.0));
}

/* The model's index of this stage's layer l: chunk c of stage s is virtual
 * stage c pp + s, whose Lc layers follow the previous virtual stage's. */
static int model_layer(const shapes *s, int l)
{
    if (s->vpp == 1) return s->layer0 + l;
    return (l / s->Lc * s->pp + s->pp_rank) * s->Lc + l % s->Lc;
}

/* Fills this rank's part of one tensor: the tensor-parallel split maps its
 * rows (QKV, MLP up, the tables) or columns (attention out, MLP down) back to
 * the whole model's. */
static int is_norm_weight(int which) { return which == P_LN1W || which == P_LN2W || which == P_LNFW; }
static int is_bias(int which)
{
    return which == P_LN1B || which == P_LN2B || which == P_LNFB || which == P_QKVB || which == P_ATTB ||
           which == P_FCB || which == P_PROJB;
}

/* The rows of one tensor as fill_tensor counts them (norm weights and biases, constants: one row). */
static size_t tensor_rows(const gpt *g, int which)
{
    size_t n = g->pl.size[which];
    if (n == 0) return 0;
    if (is_norm_weight(which) || is_bias(which)) return 1;
    return which == P_ATTW || which == P_PROJW ? (size_t)g->s.C : n / (size_t)g->s.C;
}

static void fill_tensor(const gpt *g, int which, int layer, float *dst, size_t row_lo, size_t row_hi)
{
    const shapes *s = &g->s;
    size_t n = g->pl.size[which];
    if (n == 0) return;
    int glayer = is_layer_param(which) ? model_layer(s, layer) : 0;
    if (is_norm_weight(which) || is_bias(which)) {
        for (size_t i = 0; i < n; i++) dst[i] = is_norm_weight(which) ? 1.0f : 0.0f;
        return;
    }
    float stddev = (which == P_ATTW || which == P_PROJW) ? 0.02f / sqrtf(2.0f * (float)s->Lmodel) : 0.02f;
    size_t C = (size_t)s->C, D = (size_t)s->D, r = (size_t)s->tp_rank;
    size_t cols = C, gcols = C;
    if (which == P_ATTW) { cols = (size_t)s->H * D; gcols = (size_t)s->Hm * D; }
    if (which == P_PROJW) { cols = (size_t)s->F; gcols = (size_t)s->Fm; }
    int hashed = which == P_HEAD && s->tied ? P_WTE : which;   /* a tied head's copy equals the table */
    for (size_t i = row_lo; i < row_hi; i++) {
        size_t grow = i, gcol0 = 0;
        if (which == P_QKVW) {
            size_t q = (size_t)s->H * D, k = (size_t)s->KV * D;
            if (i < q) grow = r * q + i;
            else if (i < q + k) grow = (size_t)s->Hm * D + r * k + (i - q);
            else grow = (size_t)(s->Hm + s->KVm) * D + r * k + (i - q - k);
        } else if (which == P_FCW) {
            size_t f = (size_t)s->F;
            grow = s->swiglu && i >= f ? (size_t)s->Fm + r * f + (i - f) : r * f + i;
        } else if (which == P_WTE || which == P_HEAD) {
            grow = (size_t)s->vocab0 + i;
        } else if (which == P_ATTW || which == P_PROJW) {
            gcol0 = r * cols;
        }
        int padded_row = (which == P_WTE || which == P_HEAD) && grow >= (size_t)s->V;
        for (size_t j = 0; j < cols; j++)
            dst[i * cols + j] = padded_row ? 0.0f : initial_value(hashed, glayer, grow * gcols + gcol0 + j, stddev);
    }
}

/* gpt_init's host work, split over threads: every (tensor, layer) in pieces of rows, each
 * piece filled in fp32 and rounded to bf16 by the thread that took it.  The values are a
 * function of their place in the model only, so the threads change nothing but the time
 * (a single thread took about 10 s for the LLaMA-style 1.24B on a lent H100 host). */
typedef struct { int which, layer; size_t row_lo, row_hi; } init_piece;
typedef struct {
    const gpt *g;
    float *host;
    uint16_t *half;
    const init_piece *pieces;
    int npieces;
    atomic_int next;
} init_work;

static void *init_worker(void *arg)
{
    init_work *w = arg;
    for (int k; (k = atomic_fetch_add(&w->next, 1)) < w->npieces;) {
        const init_piece *p = &w->pieces[k];
        const size_t off = param_offset(w->g, p->which, p->layer);
        const size_t cols = w->g->pl.size[p->which] / tensor_rows(w->g, p->which); /* pieces have rows */
        fill_tensor(w->g, p->which, p->layer, w->host + off, p->row_lo, p->row_hi);
        size_t lo = off + p->row_lo * cols, hi = off + p->row_hi * cols;
        for (size_t i = lo; i < hi; i++) w->half[i] = sx_ref_f2bf(w->host[i]);
    }
    return NULL;
}

static void gpt_init(gpt *g)
{
    const param_layout *pl = &g->pl;
    struct timespec t0, t1;
    clock_gettime(CLOCK_MONOTONIC, &t0);
    /* zeroed for the padding between tensors; calloc's pages are zeroed as the threads first touch them */
    float *host = calloc(pl->count ? pl->count : 1, sizeof *host);
    uint16_t *half = calloc(pl->count ? pl->count : 1, sizeof *half);
    if (!host || !half) {
        fprintf(stderr, "sextant-gpu train: rank %d: out of host memory (%zu initial weights)\n", my_rank, pl->count);
        exit(1);
    }
    enum { PIECE_ELEMENTS = 1 << 22 };
    int npieces = 0, cap = 64;
    init_piece *pieces = host_alloc((size_t)cap * sizeof *pieces);
    for (int w = 0; w < P_COUNT; w++) {
        int layers = is_layer_param(w) ? g->s.L : 1;
        size_t rows = tensor_rows(g, w);
        if (rows == 0) continue;
        size_t cols = pl->size[w] / rows, step = cols >= PIECE_ELEMENTS ? 1 : PIECE_ELEMENTS / cols;
        for (int l = 0; l < layers; l++)
            for (size_t r0 = 0; r0 < rows; r0 += step) {
                if (npieces == cap) {
                    cap *= 2;
                    init_piece *grown = realloc(pieces, (size_t)cap * sizeof *pieces);
                    if (!grown) { fprintf(stderr, "sextant-gpu train: rank %d: out of host memory\n", my_rank); exit(1); }
                    pieces = grown;
                }
                pieces[npieces++] = (init_piece){w, l, r0, r0 + step < rows ? r0 + step : rows};
            }
    }
    long cpus = sysconf(_SC_NPROCESSORS_ONLN);
    int nthreads = cpus < 1 ? 1 : cpus > 32 ? 32 : (int)cpus;
    init_work work = {.g = g, .host = host, .half = half, .pieces = pieces, .npieces = npieces};
    atomic_init(&work.next, 0);
    pthread_t tid[32];
    int started = 0;
    for (int t = 1; t < nthreads; t++) /* this thread is the first worker */
        if (pthread_create(&tid[started], NULL, init_worker, &work) == 0) started++;
    init_worker(&work);
    for (int t = 0; t < started; t++) pthread_join(tid[t], NULL);
    free(pieces);
    clock_gettime(CLOCK_MONOTONIC, &t1);
    if (my_rank == 0)
        printf("# initial weights: %zu values on the host in %.2f s (%d threads)\n", pl->count,
               (double)(t1.tv_sec - t0.tv_sec) + 1e-9 * (double)(t1.tv_nsec - t0.tv_nsec), started + 1);
    if (g->zero == 3) {
        /* ZeRO-3: this rank's slice of every bucket, the same values one GPU holds whole */
        for (int b = 0; b < pl->nbuckets; b++) {
            const zero_bucket *k = &g->zb[b];
            CK(cudaMemcpy(g->params + k->shard_offset, half + zero_slice_at(k, g->s.dp, g->s.dp_rank),
                          zero_slice_elems(k, g->s.dp) * sizeof(bf16), cudaMemcpyHostToDevice));
        }
    } else {
        CK(cudaMemcpy(g->params, half, pl->count * sizeof(bf16), cudaMemcpyHostToDevice));
    }
    if (g->s.dp > 1 && g->master != NULL && pl->shard_count != pl->count) {
        /* ZeRO-1: this rank's slice of every bucket */
        for (int b = 0; b < pl->nbuckets; b++) {
            const bucket *k = &pl->buckets[b];
            size_t slice = k->size / (size_t)g->s.dp;
            CK(cudaMemcpy(g->master + k->shard_offset, host + k->offset + (size_t)g->s.dp_rank * slice, slice * sizeof(float),
                          cudaMemcpyHostToDevice));
        }
    } else {
        CK(cudaMemcpy(g->master, host, pl->count * sizeof(float), cudaMemcpyHostToDevice));
    }
    size_t state = g->s.dp > 1 && pl->shard_count != pl->count ? pl->shard_count : pl->count;
    CK(cudaMemset(g->m, 0, state * sizeof(float)));
    CK(cudaMemset(g->v, 0, state * sizeof(float)));
    CK(cudaMemset(g->grads, 0, (g->zero ? pl->shard_count : pl->count) * sizeof(bf16)));
    free(half);
    free(host);
}

/* Synthetic tokens: each next token is (7 t + 3) mod 4096, except one in ten
 * drawn at random, so a model that learns the rule reaches a loss well under
 * ln(V) but never zero.  One stream per step for the whole global batch, so
 * every layout sees the same data. */
static void make_batch(int32_t *inputs, int32_t *targets, size_t n, int V, unsigned long long *state)
{
    int tok = 0;
    for (size_t i = 0; i <= n; i++) {
        *state = *state * 6364136223846793005ULL + 1442695040888963407ULL;
        int next = ((*state >> 33) % 10 == 0) ? (int)((*state >> 20) % (unsigned long long)V) : (7 * tok + 3) % 4096;
        if (i < n) inputs[i] = tok;
        if (i > 0) targets[i - 1] = tok;
        tok = next % V;
    }
}

/* ---- communication ----------------------------------------------------------- */

static void tp_allreduce(gpt *g, const char *name, bf16 *buf, size_t count)
{
    if (g->s.tp == 1) return;
    OP(name, NC(ncclAllReduce(buf, buf, count, ncclBfloat16, ncclSum, g->tp_comm, gpu_ctx.stream)));
}

static void tp_allgather(gpt *g, const char *name, bf16 *full, const bf16 *local, size_t local_count)
{
    OP(name, NC(ncclAllGather(local, full, local_count, ncclBfloat16, g->tp_comm, gpu_ctx.stream)));
}

static void tp_reduce_scatter(gpt *g, const char *name, bf16 *local, const bf16 *full, size_t local_count)
{
    OP(name, NC(ncclReduceScatter(full, local, local_count, ncclBfloat16, ncclSum, g->tp_comm, gpu_ctx.stream)));
}

/* One group of pipeline transfers (NULL: absent): the schedule puts each
 * transfer in one group on both sides (Megatron's send_forward_recv_backward
 * and send_backward_recv_forward), so that two neighbours exchanging at once
 * cannot wait on each other.  Activations go to the next stage, gradients to
 * the previous; the order of the calls is the same on every rank, so that
 * with two stages (next = previous) the sends and receives pair in order. */
typedef struct {
    const bf16 *act_send, *grad_send;
    bf16 *act_recv, *grad_recv;
} pipe_transfer;

static void pp_exchange(gpt *g, const pipe_transfer *t, int next, int prev, size_t count, cudaStream_t on)
{
    profile_mark_on("pp_sendrecv", 0, on);
    NC(ncclGroupStart());
    if (t->act_send) NC(ncclSend(t->act_send, count, ncclBfloat16, next, g->pp_comm, on));
    if (t->act_recv) NC(ncclRecv(t->act_recv, count, ncclBfloat16, prev, g->pp_comm, on));
    if (t->grad_send) NC(ncclSend(t->grad_send, count, ncclBfloat16, prev, g->pp_comm, on));
    if (t->grad_recv) NC(ncclRecv(t->grad_recv, count, ncclBfloat16, next, g->pp_comm, on));
    NC(ncclGroupEnd());
    profile_mark_on("pp_sendrecv", 1, on);
}

/* Sequence parallelism: each rank's norm gradients cover its tokens only. */
static void tp_allreduce_norm_grads(gpt *g, int layer, int final)
{
    if (!spg(&g->s)) return;
    bf16 *G = g->grads;
    int list[4] = {final ? P_LNFW : P_LN1W, final ? P_LNFB : P_LN1B, final ? -1 : P_LN2W, final ? -1 : P_LN2B};
    pass_t saved = current_pass;
    current_pass = PASS_STEP;   /* once per step, as the op list has it */
    profile_mark("tp_allreduce_norm_grads", 0);
    NC(ncclGroupStart());
    for (int i = 0; i < 4; i++) {
        if (list[i] < 0) continue;
        bf16 *t = param(g, G, list[i], layer);
        if (t) NC(ncclAllReduce(t, t, g->pl.size[list[i]], ncclBfloat16, ncclSum, g->tp_comm, gpu_ctx.stream));
    }
    NC(ncclGroupEnd());
    profile_mark("tp_allreduce_norm_grads", 1);
    current_pass = saved;
}

/* A bucket's gradients are complete (last micro-batch of the step): reduce
 * them on the second stream while the backward goes on. */
static void bucket_ready(gpt *g, int kind)
{
    int b = bucket_index(g, kind);
    if (b < 0) return;
    int tied = g->tied_sync && (kind == B_EMBED || kind == B_HEAD);
    int reduce_ranks = g->s.dp * g->s.cp;   /* gradients are summed over DP x CP */
    if (reduce_ranks == 1 && !tied) return;
    const bucket *k = &g->pl.buckets[b];
    pass_t saved = current_pass;
    current_pass = PASS_STEP;
    CK(cudaEventRecord(g->grad_ready[b], gpu_ctx.stream));
    CK(cudaStreamWaitEvent(gpu_ctx.comm_stream, g->grad_ready[b], 0));
    g->comm_used = 1;
    if (tied) {
        int t = kind == B_EMBED ? P_WTE : P_HEAD;
        bf16 *grad = param(g, g->grads, t, 0);
        profile_mark_on("pp_allreduce_tied_embedding", 0, gpu_ctx.comm_stream);
        NC(ncclAllReduce(grad, grad, g->pl.size[t], ncclBfloat16, ncclSum, g->tied_comm, gpu_ctx.comm_stream));
        profile_mark_on("pp_allreduce_tied_embedding", 1, gpu_ctx.comm_stream);
    }
    if (reduce_ranks > 1) {
        bf16 *grad = g->grads + k->offset;
        size_t slice = k->size / (size_t)g->s.dp;
        if (g->s.dp > 1 && g->pl.shard_count != g->pl.count) {
            profile_mark_on("dp_reduce_scatter_grads", 0, gpu_ctx.comm_stream);
            NC(ncclReduceScatter(grad, grad + (size_t)g->s.dp_rank * slice, slice, ncclBfloat16, ncclSum, g->dp_comm,
                                 gpu_ctx.comm_stream));
            profile_mark_on("dp_reduce_scatter_grads", 1, gpu_ctx.comm_stream);
        } else {
            profile_mark_on("dp_allreduce_grads", 0, gpu_ctx.comm_stream);
            NC(ncclAllReduce(grad, grad, k->size, ncclBfloat16, ncclSum, g->dp_comm, gpu_ctx.comm_stream));
            profile_mark_on("dp_allreduce_grads", 1, gpu_ctx.comm_stream);
        }
    }
    current_pass = saved;
}

/* The compute stream waits for an event of another stream, timed as a step op. */
static void step_wait(const char *name, cudaEvent_t event)
{
    pass_t saved = current_pass;
    current_pass = PASS_STEP;
    profile_mark(name, 0);
    CK(cudaStreamWaitEvent(gpu_ctx.stream, event, 0));
    profile_mark(name, 1);
    current_pass = saved;
}

/* ZeRO-1: before a bucket's parameters are read, the all-gather that
 * brought them after the last step's optimizer must be complete. */
static void zero3_params(gpt *g, int kind);
static void wait_params(gpt *g, int kind)
{
    if (g->zero == 3) { zero3_params(g, kind); return; }
    if (g->s.dp == 1 || g->pl.shard_count == g->pl.count) return;
    int b = bucket_index(g, kind);
    if (b < 0) return;
    step_wait("dp_allgather_wait", g->params_ready[b]);
}

/* ---- ZeRO-2/3: what the step asks of validator/zero.c ---------------------------- */

/* zero.c's profiling: a mark of `pass` on stream `on` */
static void zero_mark(const char *name, int end, cudaStream_t on, pass_t pass)
{
    pass_t saved = current_pass;
    current_pass = pass;
    profile_mark_on(name, end, on);
    current_pass = saved;
}

/* ZeRO-3: the step is about to read bucket `kind`'s parameters (in a backward or its
 * recomputation when the pass is not the forward) */
static void zero3_params(gpt *g, int kind)
{
    if (g->zero == 3) zero_take_params(&g->zs, bucket_index(g, kind), current_pass != PASS_FWD);
}

/* ZeRO-2/3: the backward is about to write bucket `kind`'s gradients */
static void zero_grads_take(gpt *g, int kind)
{
    if (g->zero) zero_grads_begin(&g->zs, bucket_index(g, kind));
}

/* ZeRO-2/3: this micro-batch's gradients of the bucket are complete (layer >= 0: a layer's,
 * final: the final norm's, whose sequence-parallel norm gradients are summed over TP first,
 * every micro-batch here since the buffer holds one micro-batch's) */
static void zero_grads_give(gpt *g, int layer, int final)
{
    if (!g->zero) return;
    if (layer >= 0 || final) tp_allreduce_norm_grads(g, layer < 0 ? 0 : layer, final);
    zero_grads_end(&g->zs);
    g->comm_used = 1;
}

/* ---- forward and backward ------------------------------------------------------ */

static void norm_forward(const gpt *g, bf16 *out, float *mean, float *rstd, const bf16 *x, const bf16 *w, const bf16 *b, int N)
{
    if (g->s.rms) CK(sx_rmsnorm_forward(out, rstd, x, w, N, g->s.C, 1e-5f, gpu_ctx.stream));
    else CK(sx_layernorm_forward(out, mean, rstd, x, w, b, N, g->s.C, 1e-5f, gpu_ctx.stream));
}

/* dx (+)= the norm's input gradient: the residual branch's gradient is already in dx */
static void norm_backward(const gpt *g, bf16 *dx, bf16 *dw, bf16 *db, const bf16 *dy, const bf16 *x, const bf16 *w,
                          const float *mean, const float *rstd, int accumulate, int N)
{
    if (g->s.rms)
        CK(sx_rmsnorm_backward(dx, dw, SX_BF16, dy, x, w, rstd, accumulate, g->norm_ws, g->norm_ws_bytes, N, g->s.C, gpu_ctx.stream));
    else
        CK(sx_layernorm_backward(dx, dw, db, SX_BF16, dy, x, w, mean, rstd, accumulate, g->norm_ws, g->norm_ws_bytes, N,
                                 g->s.C, gpu_ctx.stream));
}

/* The activations of layer l of the micro-batch in `slot` (with full
 * recomputation, all but its input and output live in the one shared block). */
static layer_acts layer_at(const gpt *g, int slot, int l)
{
    layer_acts a;
    const slot_acts *sa = &g->slots[slot];
    if (g->s.recompute) a = g->recomp;
    else layout_layer(&a, sa->layers + (size_t)(l % g->s.Lc) * sa->layer_bytes, &g->s);
    size_t nc = (size_t)g->s.Nl * g->s.C;
    int j = l % g->s.Lc;   /* its place in the chunk */
    a.x = j == 0 ? sa->input : sa->residual + (size_t)(j - 1) * nc;
    a.out = sa->residual + (size_t)j * nc;
    return a;
}

static const attention_ptrs *ptrs_at(const gpt *g, int slot, int l)
{
    if (g->s.flash) return NULL;
    return g->s.recompute ? &g->ptrs[0] : &g->ptrs[(size_t)slot * g->s.L + l];
}

static void layer_forward(gpt *g, const layer_acts *a, const attention_ptrs *ap, int l)
{
    const shapes *s = &g->s;
    bf16 *P = g->params, *ones = g->scr.ones;
    int N = s->N, Nl = s->Nl, C = s->C, A = s->H * s->D;
    size_t local = (size_t)Nl * C;
    OP("attn_norm", norm_forward(g, a->ln1, a->ln1_mean, a->ln1_rstd, a->x, param(g, P, P_LN1W, l), param(g, P, P_LN1B, l), Nl));
    const bf16 *in = a->ln1;
    if (spg(s)) { tp_allgather(g, "tp_allgather_attn", g->scr.gathered, a->ln1, local); in = g->scr.gathered; }
    linear_forward("qkv", a->qkv, in, param(g, P, P_QKVW, l), param(g, P, P_QKVB, l), ones, N, C, s->qkv);
    if (s->rope && s->cp > 1) OP("rope", cp_rope(&g->cps, a->qkv, s->rope_theta, 0));
    else if (s->rope) OP("rope", CK(sx_rope_forward(a->qkv, s->B, s->T, s->H, s->KV, s->D, s->qkv, s->rope_theta, gpu_ctx.stream)));
    if (s->cp > 1) cp_exchange_kv(&g->cps, a->qkv, "cp_ring_kv");
    if (s->cp > 1)
        OP("attention", cp_attention_forward(&g->cps, a->atty, a->lse, a->qkv));
    else if (s->flash)
        OP_REPLAYED("attention", CK(sx_flash_attention_forward(a->atty, a->lse, a->qkv, a->qkv + (size_t)s->H * s->D,
                                                       a->qkv + (size_t)(s->H + s->KV) * s->D, s->B, s->T, s->H, s->KV, s->D,
                                                       s->qkv, s->qkv, 1.0f / sqrtf((float)s->D), gpu_ctx.stream)));
    if (s->flash && s->cp == 1 && replay_copies && replay_wanted()) replay_attention_on_copies(s, 0, a->qkv, a->atty, a->lse, NULL);
    if (!s->flash)
        OP_REPLAYED("attention", attention_forward(ap, a->att, g->scr.datt, s));
    /* a row-parallel bias is added by one rank, so that the group's sum has it once */
    bf16 *row_bias = s->tp_rank == 0 ? param(g, P, P_ATTB, l) : NULL;
    linear_forward("attn_out", g->scr.dbuf_c, a->atty, param(g, P, P_ATTW, l), row_bias, ones, N, A, C);
    const bf16 *branch = g->scr.dbuf_c;
    if (spg(s)) {
        tp_reduce_scatter(g, "tp_reduce_scatter_attn", g->scr.dlocal, g->scr.dbuf_c, local);
        branch = g->scr.dlocal;
    } else {
        tp_allreduce(g, "tp_allreduce_attn", g->scr.dbuf_c, (size_t)N * C);
    }
    OP("attn_residual", CK(sx_residual_add(a->mid, NULL, a->x, branch, local, gpu_ctx.stream)));
    OP("mlp_norm", norm_forward(g, a->ln2, a->ln2_mean, a->ln2_rstd, a->mid, param(g, P, P_LN2W, l), param(g, P, P_LN2B, l), Nl));
    if (s->moe) {
        moe_forward(&g->moe, a->moe, a->ln2, g->scr.dbuf_c, l);
        OP("mlp_residual", CK(sx_residual_add(a->out, NULL, a->mid, g->scr.dbuf_c, local, gpu_ctx.stream)));
        return;
    }
    in = a->ln2;
    if (spg(s)) { tp_allgather(g, "tp_allgather_mlp", g->scr.gathered, a->ln2, local); in = g->scr.gathered; }
    linear_forward("mlp_up", a->fch, in, param(g, P, P_FCW, l), param(g, P, P_FCB, l), ones, N, C, s->up);
    if (s->swiglu) OP("swiglu", CK(sx_swiglu_forward(a->fch_act, a->fch, a->fch + s->F, N, s->F, s->up, gpu_ctx.stream)));
    else OP("gelu", CK(sx_gelu_forward(a->fch_act, a->fch, (size_t)N * s->F, gpu_ctx.stream)));
    row_bias = s->tp_rank == 0 ? param(g, P, P_PROJB, l) : NULL;
    linear_forward("mlp_down", g->scr.dbuf_c, a->fch_act, param(g, P, P_PROJW, l), row_bias, ones, N, s->F, C);
    branch = g->scr.dbuf_c;
    if (spg(s)) {
        tp_reduce_scatter(g, "tp_reduce_scatter_mlp", g->scr.dlocal, g->scr.dbuf_c, local);
        branch = g->scr.dlocal;
    } else {
        tp_allreduce(g, "tp_allreduce_mlp", g->scr.dbuf_c, (size_t)N * C);
    }
    OP("mlp_residual", CK(sx_residual_add(a->out, NULL, a->mid, branch, local, gpu_ctx.stream)));
}

/* Whether layer 0's norm backward also sums the position table's gradient, so that the
 * embedding backward reads the residual gradient once instead of twice: learned positions,
 * LayerNorm, the embedding on this rank, and every token's gradient here (no sequence
 * parallelism).  The planner's op list assumes the same (planner/oplist.c, embedding). */
static int position_grad_in_norm(const shapes *s)
{
    /* with ZeRO-2/3 layer 0's gradient buffer does not hold the embedding's bucket */
    /* with CP the rank's positions are two chunks of the table (cp.c gathers them) */
    return s->learned_pos && !s->rms && s->first && !spg(s) && !s->grads_sharded && s->cp == 1;
}

/* The dense MLP's backward from scr.dresidual; returns its input's gradient (before the norm). */
static const bf16 *mlp_backward(gpt *g, const layer_acts *a, int l)
{
    const shapes *s = &g->s;
    scratch_buffers *r = &g->scr;
    bf16 *P = g->params, *G = g->grads, *ones = r->ones;
    int N = s->N, C = s->C;
    size_t local = (size_t)s->Nl * C;
    const bf16 *dy = r->dresidual;
    if (spg(s)) { tp_allgather(g, "tp_allgather_mlp_bwd", r->dfull, r->dresidual, local); dy = r->dfull; }
    bf16 *dact = s->swiglu ? r->dact : r->dfch;
    linear_backward("mlp_down_dgrad", "mlp_down_wgrad", dact, param(g, G, P_PROJW, l), param(g, G, P_PROJB, l), dy,
                    a->fch_act, param(g, P, P_PROJW, l), ones, N, s->F, C);
    if (s->swiglu)
        OP("swiglu_bwd", CK(sx_swiglu_backward(r->dfch, r->dfch + s->F, dact, a->fch, a->fch + s->F, N, s->F, s->up, gpu_ctx.stream)));
    else
        OP("gelu_bwd", CK(sx_gelu_backward(r->dfch, a->fch, r->dfch, (size_t)N * s->F, gpu_ctx.stream)));
    const bf16 *in = a->ln2;
    if (spg(s)) { tp_allgather(g, "tp_regather_mlp", r->gathered, a->ln2, local); in = r->gathered; }
    linear_backward("mlp_up_dgrad", "mlp_up_wgrad", r->dbuf_c, param(g, G, P_FCW, l), param(g, G, P_FCB, l), r->dfch, in,
                    param(g, P, P_FCW, l), ones, N, C, s->up);
    if (spg(s)) { tp_reduce_scatter(g, "tp_reduce_scatter_mlp_bwd", r->dlocal, r->dbuf_c, local); return r->dlocal; }
    tp_allreduce(g, "tp_allreduce_mlp_bwd", r->dbuf_c, (size_t)N * C);
    return r->dbuf_c;
}

/* scr.dresidual holds the gradient of the layer's output; leaves its input's. */
static void layer_backward(gpt *g, const layer_acts *a, const attention_ptrs *ap, int l)
{
    const shapes *s = &g->s;
    scratch_buffers *r = &g->scr;
    bf16 *P = g->params, *G = g->grads, *ones = r->ones;
    int N = s->N, Nl = s->Nl, C = s->C, A = s->H * s->D;
    size_t local = (size_t)Nl * C;
    /* CP: the peer's K and V for this layer's attention backward come beside the MLP's */
    if (s->cp > 1) cp_exchange_kv(&g->cps, a->qkv, "cp_ring_kv_dkv_bwd");
    /* MLP: the dense one, or moe.c's mixture of experts */
    const bf16 *dn = r->dbuf_c;
    if (s->moe) moe_backward(&g->moe, a->moe, a->ln2, r->dresidual, r->dbuf_c, l);
    else dn = mlp_backward(g, a, l);
    OP("mlp_norm_bwd", norm_backward(g, r->dresidual, param(g, G, P_LN2W, l), param(g, G, P_LN2B, l), dn, a->mid,
                                     param(g, P, P_LN2W, l), a->ln2_mean, a->ln2_rstd, 1, Nl));
    /* attention: dresidual now holds d(mid) */
    const bf16 *dy = r->dresidual;
    if (spg(s)) { tp_allgather(g, "tp_allgather_attn_bwd", r->dfull, r->dresidual, local); dy = r->dfull; }
    bf16 *datty = r->dbuf_c;
    linear_backward("attn_out_dgrad", "attn_out_wgrad", datty, param(g, G, P_ATTW, l), param(g, G, P_ATTB, l), dy, a->atty,
                    param(g, P, P_ATTW, l), ones, N, A, C);
    if (s->cp > 1) {
        size_t ws = sx_flash_attention_backward_workspace_bytes(s->B, s->T, s->H);
        OP("attention_bwd", cp_attention_backward_peer(&g->cps, r->dqkv, datty, a->atty, a->lse, a->qkv, r->flash_ws, ws));
        cp_return_dkv(&g->cps);
        OP("attention_bwd", cp_attention_backward_own(&g->cps, r->dqkv, datty, a->atty, a->lse, a->qkv, r->flash_ws, ws));
        OP("cp_dkv_wait_add", cp_add_dkv(&g->cps, r->dqkv));
    } else if (s->flash) {
        size_t ws = sx_flash_attention_backward_workspace_bytes(s->B, s->T, s->H);
        size_t hd = (size_t)s->H * s->D, kd = (size_t)(s->H + s->KV) * s->D;
        OP_REPLAYED("attention_bwd", CK(sx_flash_attention_backward(r->dqkv, r->dqkv + hd, r->dqkv + kd, datty, a->atty, a->lse, a->qkv,
                                                            a->qkv + hd, a->qkv + kd, s->B, s->T, s->H, s->KV, s->D, s->qkv,
                                                            s->qkv, 1.0f / sqrtf((float)s->D), r->flash_ws, ws, gpu_ctx.stream)));
        if (replay_copies && replay_wanted()) replay_attention_on_copies(s, 1, a->qkv, a->atty, a->lse, datty);
    } else {
        OP_REPLAYED("attention_bwd", attention_backward(ap, a->att, r->datt, s));
    }
    if (s->rope && s->cp > 1) OP("rope_bwd", cp_rope(&g->cps, r->dqkv, s->rope_theta, 1));
    else if (s->rope) OP("rope_bwd", CK(sx_rope_backward(r->dqkv, s->B, s->T, s->H, s->KV, s->D, s->qkv, s->rope_theta, gpu_ctx.stream)));
    const bf16 *in = a->ln1;
    if (spg(s)) { tp_allgather(g, "tp_regather_attn", r->gathered, a->ln1, local); in = r->gathered; }
    linear_backward("qkv_dgrad", "qkv_wgrad", r->dbuf_c, param(g, G, P_QKVW, l), param(g, G, P_QKVB, l), r->dqkv, in,
                    param(g, P, P_QKVW, l), ones, N, C, s->qkv);
    dn = r->dbuf_c;
    if (spg(s)) { tp_reduce_scatter(g, "tp_reduce_scatter_attn_bwd", r->dlocal, r->dbuf_c, local); dn = r->dlocal; }
    else tp_allreduce(g, "tp_allreduce_attn_bwd", r->dbuf_c, (size_t)N * C);
    if (l == 0 && position_grad_in_norm(s))
        OP("attn_norm_bwd", CK(sx_layernorm_backward_pos(r->dresidual, param(g, G, P_LN1W, 0), param(g, G, P_LN1B, 0),
                                                          param(g, G, P_WPE, 0), SX_BF16, dn, a->x, param(g, P, P_LN1W, 0),
                                                          a->ln1_mean, a->ln1_rstd, 1, g->norm_ws, g->norm_ws_bytes,
                                                          s->B, s->T, C, gpu_ctx.stream)));
    else
        OP("attn_norm_bwd", norm_backward(g, r->dresidual, param(g, G, P_LN1W, l), param(g, G, P_LN1B, l), dn, a->x,
                                          param(g, P, P_LN1W, l), a->ln1_mean, a->ln1_rstd, 1, Nl));
}

/* Interleaved: the slot that a forward fills takes the input and head
 * buffers the schedule gave the micro-batch, until its backward. */
static slot_acts *bind_slot(gpt *g, const pipe_action *a)
{
    slot_acts *sa = &g->slots[a->slot];
    if (g->s.vpp == 1) return sa;
    sa->input = g->inputs[a->input];
    const slot_acts *h = a->head >= 0 ? &g->heads[a->head] : NULL;
    sa->lnf = h ? h->lnf : NULL;
    sa->lnf_mean = h ? h->lnf_mean : NULL;
    sa->lnf_rstd = h ? h->lnf_rstd : NULL;
    sa->logits = h ? h->logits : NULL;
    return sa;
}

/* The embedding backward's grouping of one micro-batch's ids (sorted by id, cut into
 * windows): it reads only the ids, so it runs on its own stream beside the forward pass, and
 * the backward pass has only the memory-bound apply.  It starts once the compute stream
 * reaches this forward, so the slot's previous micro-batch is through its backward. */
static void embedding_prepare(gpt *g, int slot, const int32_t *ids)
{
    const shapes *s = &g->s;
    CK(cudaEventRecord(g->emb_fwd_at[slot], gpu_ctx.stream));
    CK(cudaStreamWaitEvent(gpu_ctx.prep_stream, g->emb_fwd_at[slot], 0));
    CK(sx_embedding_backward_prepare((char *)g->emb_grouping + (size_t)slot * g->emb_grouping_bytes,
                                     g->emb_grouping_bytes, ids, s->N, s->C, s->tp > 1 ? s->Vl : s->Vp, gpu_ctx.prep_stream));
    CK(cudaEventRecord(g->emb_prepared[slot], gpu_ctx.prep_stream));
}

/* The forward of one micro-batch through one chunk of this stage's layers
 * (the embedding before the model's first, the head after its last). */
static void stage_forward(gpt *g, const pipe_action *act)
{
    const shapes *s = &g->s;
    int mb = act->microbatch, chunk = act->chunk;
    slot_acts *sa = bind_slot(g, act);
    int with_embedding = s->first && chunk == 0, with_head = s->last && chunk == s->vpp - 1;
    scratch_buffers *r = &g->scr;
    bf16 *P = g->params;
    int N = s->N, Nl = s->Nl, C = s->C;
    size_t local = (size_t)Nl * C;
    current_pass = PASS_FWD;
    const int32_t *ids = r->inputs + (size_t)mb * N;
    const int32_t *ids_local = s->tp > 1 ? r->ids_shifted + (size_t)mb * N : ids;
    if (with_embedding) {
        if (g->emb_grouping) embedding_prepare(g, act->slot, ids_local);
        wait_params(g, B_EMBED);
        bf16 *wte = param(g, P, P_WTE, 0);
        const bf16 *wpe = s->cp > 1 ? cp_positions(&g->cps, param(g, P, P_WPE, 0)) : param(g, P, P_WPE, 0);
        if (s->tp == 1) {
            OP("embedding", CK(sx_embedding_forward(sa->input, ids, wte, wpe, s->B, s->T, C, s->Vp, gpu_ctx.stream)));
        } else {
            /* each rank looks up the ids it owns (the position table on one rank); the sum completes it */
            bf16 *dst = spg(s) ? r->dbuf_c : sa->input;
            OP("embedding", CK(sx_embedding_forward_shard(dst, ids_local, wte, s->tp_rank == 0 ? wpe : NULL, s->B, s->T, C,
                                                          s->Vl, gpu_ctx.stream)));
            if (spg(s)) tp_reduce_scatter(g, "tp_reduce_scatter_embedding", sa->input, r->dbuf_c, local);
            else tp_allreduce(g, "tp_allreduce_embedding", sa->input, (size_t)N * C);
        }
    }
    for (int l = chunk * s->Lc; l < (chunk + 1) * s->Lc; l++) {
        wait_params(g, l);
        layer_acts a = layer_at(g, act->slot, l);
        layer_forward(g, &a, ptrs_at(g, act->slot, l), l);
    }
    if (!with_head) return;
    wait_params(g, B_FINAL);
    if (g->zero != 3) wait_params(g, B_HEAD);
    bf16 *x = sa->residual + (size_t)(s->Lc - 1) * local;
    OP("final_norm", norm_forward(g, sa->lnf, sa->lnf_mean, sa->lnf_rstd, x, param(g, P, P_LNFW, 0), param(g, P, P_LNFB, 0), Nl));
    const bf16 *in = sa->lnf;
    if (spg(s)) { tp_allgather(g, "tp_allgather_head", r->gathered, sa->lnf, local); in = r->gathered; }
    zero3_params(g, head_bucket(s));
    linear_forward("lm_head", sa->logits, in, param(g, P, head_tensor(s), 0), NULL, NULL, N, C, s->Vl);
    /* the mean over the global batch: this rank's micro-batches are m of the dp m in the step */
    float dloss = 1.0f / ((float)N * (float)g->microbatches * (float)s->dp * (float)s->cp);
    float *losses = r->losses + (size_t)mb * N;
    const int32_t *targets = r->targets + (size_t)mb * N;
    if (s->tp == 1) {
        /* loss and, fused, dlogits = (softmax - onehot) dloss in place */
        OP("cross_entropy", CK(sx_cross_entropy_fused(losses, sa->logits, sa->logits, targets, N, s->V, s->Vp, dloss, gpu_ctx.stream)));
        return;
    }
    const int32_t *tg = r->targets_shifted + (size_t)mb * N;
    int cols = s->V - s->vocab0;
    cols = cols < 0 ? 0 : cols > s->Vl ? s->Vl : cols;
    float *st = r->ce_stats;
    OP("cross_entropy", CK(sx_cross_entropy_shard_partial(st, sa->logits, tg, N, cols, s->Vl, gpu_ctx.stream)));
    OP("tp_allreduce_loss", NC(ncclAllReduce(st + N, st + N, (size_t)N, ncclFloat32, ncclMax, g->tp_comm, gpu_ctx.stream)));
    OP("cross_entropy", CK(sx_cross_entropy_shard_rescale(st, N, gpu_ctx.stream)));
    OP("tp_allreduce_loss", NC(ncclAllReduce(st + 2 * (size_t)N, st + 2 * (size_t)N, (size_t)N, ncclFloat32, ncclSum,
                                             g->tp_comm, gpu_ctx.stream)));
    OP("tp_allreduce_loss", NC(ncclAllReduce(st + 3 * (size_t)N, st + 3 * (size_t)N, (size_t)N, ncclFloat32, ncclSum,
                                             g->tp_comm, gpu_ctx.stream)));
    OP("cross_entropy", CK(sx_cross_entropy_shard_finish(losses, sa->logits, sa->logits, tg, st, N, cols, s->Vl, dloss, gpu_ctx.stream)));
}

/* The backward of one micro-batch through one chunk; on the step's last
 * micro-batch, every bucket is handed to the data-parallel reduction as soon
 * as it is complete. */
static void stage_backward(gpt *g, const pipe_action *act)
{
    const shapes *s = &g->s;
    int mb = act->microbatch, chunk = act->chunk, slot = act->slot;
    slot_acts *sa = &g->slots[slot];
    int with_embedding = s->first && chunk == 0, with_head = s->last && chunk == s->vpp - 1;
    scratch_buffers *r = &g->scr;
    if (act->grad_buf >= 0) {
        /* the output gradient arrived in a buffer of the pool: it becomes the one the backward works in */
        bf16 *t = r->dresidual;
        r->dresidual = g->grad_bufs[act->grad_buf];
        g->grad_bufs[act->grad_buf] = t;
    }
    bf16 *P = g->params, *G = g->grads;
    int N = s->N, Nl = s->Nl, C = s->C;
    size_t local = (size_t)Nl * C;
    int last_mb = mb == g->microbatches - 1;
    current_pass = PASS_BWD;
    bias_accumulate = mb > 0;
    if (with_head) {
        /* logits = lnf head^T: dlnf = dlogits head, dhead += dlogits^T lnf */
        const bf16 *in = sa->lnf;
        if (spg(s)) { tp_allgather(g, "tp_regather_head", r->gathered, sa->lnf, local); in = r->gathered; }
        int head = head_tensor(s);
        zero3_params(g, head_bucket(s));
        zero_grads_take(g, head_bucket(s));
        linear_backward("lm_head_dgrad", "lm_head_wgrad", r->dbuf_c, param(g, G, head, 0), NULL, sa->logits, in,
                        param(g, P, head, 0), NULL, N, C, s->Vl);
        if (head_bucket(s) != B_FINAL) {
            zero_grads_give(g, -1, 0);
            zero3_params(g, B_FINAL);
            zero_grads_take(g, B_FINAL);
        }
        const bf16 *dn = r->dbuf_c;
        if (spg(s)) { tp_reduce_scatter(g, "tp_reduce_scatter_head_bwd", r->dlocal, r->dbuf_c, local); dn = r->dlocal; }
        else tp_allreduce(g, "tp_allreduce_head_bwd", r->dbuf_c, (size_t)N * C);
        bf16 *x = sa->residual + (size_t)(s->Lc - 1) * local;
        OP("final_norm_bwd", norm_backward(g, r->dresidual, param(g, G, P_LNFW, 0), param(g, G, P_LNFB, 0), dn, x,
                                           param(g, P, P_LNFW, 0), sa->lnf_mean, sa->lnf_rstd, 0, Nl));
        if (g->zero) {
            zero_grads_give(g, -1, 1);
        } else if (last_mb) {
            tp_allreduce_norm_grads(g, 0, 1);
            bucket_ready(g, B_FINAL);
        }
    }
    for (int l = (chunk + 1) * s->Lc - 1; l >= chunk * s->Lc; l--) {
        layer_acts a = layer_at(g, slot, l);
        zero3_params(g, l);
        zero_grads_take(g, l);
        if (s->recompute) {
            /* the layer's forward again, from its saved input, into the shared block */
            current_pass = PASS_RECOMPUTE;
            layer_forward(g, &a, ptrs_at(g, slot, l), l);
            current_pass = PASS_BWD;
        }
        layer_backward(g, &a, ptrs_at(g, slot, l), l);
        if (g->zero) {
            zero_grads_give(g, l, 0);
        } else if (last_mb) {
            tp_allreduce_norm_grads(g, l, 0);
            bucket_ready(g, l);
        }
    }
    if (with_embedding) {
        zero_grads_take(g, B_EMBED);
        const bf16 *dy = r->dresidual;
        if (spg(s)) { tp_allgather(g, "tp_allgather_embedding_bwd", r->dfull, r->dresidual, local); dy = r->dfull; }
        const int32_t *ids = s->tp > 1 ? r->ids_shifted + (size_t)mb * N : r->inputs + (size_t)mb * N;
        const int V = s->tp > 1 ? s->Vl : s->Vp;
        bf16 *dwpe = position_grad_in_norm(s) ? NULL : param(g, G, P_WPE, 0); /* else summed by layer 0's norm */
        if (dwpe && s->cp > 1) dwpe = cp_position_grads_begin(&g->cps);
        if (!g->emb_grouping) {
            OP("embedding_bwd", CK(sx_embedding_backward(param(g, G, P_WTE, 0), dwpe, SX_BF16, dy, ids,
                                                          g->emb_ws, g->emb_ws_bytes, s->B, s->T, C, V, gpu_ctx.stream)));
        } else {
            void *grouping = (char *)g->emb_grouping + (size_t)slot * g->emb_grouping_bytes;
            CK(cudaStreamWaitEvent(gpu_ctx.stream, g->emb_prepared[slot], 0));
            OP("embedding_bwd", CK(sx_embedding_backward_apply(param(g, G, P_WTE, 0), dwpe, SX_BF16, dy,
                                                               grouping, g->emb_grouping_bytes, g->emb_ws,
                                                               g->emb_ws_bytes, s->B, s->T, C, V, gpu_ctx.stream)));
        }
        if (s->cp > 1 && s->learned_pos) cp_position_grads_end(&g->cps, param(g, G, P_WPE, 0));
        if (g->zero) zero_grads_give(g, -1, 0);
        else if (last_mb) bucket_ready(g, B_EMBED);
    }
    if (with_head && last_mb && !g->zero) bucket_ready(g, B_HEAD);
}

/* One step on this rank: the schedule of validator/schedule.c, 1F1B or
 * interleaved (with one stage, forward and backward of each micro-batch in
 * turn); the data-parallel wait and the optimizer follow in optimizer_step. */
/* The host waits for an event; with several ranks it watches NCCL's error
 * state and gives up after the launch timeout instead of hanging on a peer
 * that died. */
static void host_wait(gpt *g, cudaEvent_t ev, const char *what)
{
    if (g->ctx) {
        if (launch_event_wait(g->ctx, ev, what) != 0) exit(1);
    } else {
        CK(cudaEventSynchronize(ev));
    }
}

/* The host waits for everything enqueued so far on one stream. */
static void sync_stream(gpt *g, cudaStream_t on, const char *what)
{
    cudaEvent_t ev;
    CK(cudaEventCreateWithFlags(&ev, cudaEventDisableTiming));
    CK(cudaEventRecord(ev, on));
    host_wait(g, ev, what);
    CK(cudaEventDestroy(ev));
}

/* SEXTANT_TRAIN_TRACE=1, for finding where a pipeline stalls: every action is
 * printed when it is issued and again when the stream that ran it has
 * finished it (waited for with the launch timeout and NCCL's error checks),
 * so the last lines of each rank say whether the host or the device stopped,
 * and in which action.  It serialises the streams: no timing is meaningful. */
static int trace_actions = -1;

static void trace_action(gpt *g, const pipe_action *a, int i, cudaStream_t on, int done)
{
    if (trace_actions < 0) trace_actions = getenv("SEXTANT_TRAIN_TRACE") != NULL;
    if (!trace_actions) return;
    const char *kind = a->kind == PIPE_FORWARD ? "forward" : a->kind == PIPE_BACKWARD ? "backward" : "exchange";
    if (done) sync_stream(g, on, "a traced pipeline action");
    fprintf(stderr, "trace rank %d: action %d %s mb %d chunk %d (act %d/%d, grad %d/%d) %s\n", my_rank, i, kind,
            a->microbatch, a->chunk, a->act_send_mb, a->act_recv_mb, a->grad_send_mb, a->grad_recv_mb,
            done ? "done" : "issued");
    fflush(stderr);
}

/* One exchange of the schedule as one NCCL group on stream `on`. */
static void pp_group(gpt *g, const pipe_action *a, cudaStream_t on)
{
    const shapes *s = &g->s;
    size_t count = (size_t)s->Nl * s->C;
    /* interleaved, the stages form a ring: the last one's chunk c feeds the first one's chunk c + 1 */
    int prev = (s->pp_rank + s->pp - 1) % s->pp, next = (s->pp_rank + 1) % s->pp;
    pipe_transfer t = {NULL, NULL, NULL, NULL};
    if (a->act_send_mb >= 0) t.act_send = g->slots[a->act_send_slot].residual + (size_t)(s->Lc - 1) * count;
    if (a->act_recv_mb >= 0) t.act_recv = s->vpp == 1 ? g->slots[a->act_recv_slot].input : g->inputs[a->act_recv_slot];
    if (a->grad_send_mb >= 0) t.grad_send = g->scr.dresidual;
    if (a->grad_recv_mb >= 0) t.grad_recv = a->grad_recv_buf >= 0 ? g->grad_bufs[a->grad_recv_buf] : g->scr.dresidual;
    pp_exchange(g, &t, next, prev, count, on);
}

static void run_schedule(gpt *g)
{
    for (int i = 0; i < g->nschedule; i++) {
        const pipe_action *a = &g->schedule[i];
        trace_action(g, a, i, gpu_ctx.stream, 0);
        if (a->kind == PIPE_FORWARD) stage_forward(g, a);
        else if (a->kind == PIPE_BACKWARD) stage_backward(g, a);
        else pp_group(g, a, gpu_ctx.stream);
        trace_action(g, a, i, gpu_ctx.stream, 1);
    }
}

/* The compute stream waits for a transfer's group: the time it stands still
 * is the pipeline's bubble on this stage. */
static void pp_wait(gpt *g, int action) { step_wait("pp_wait", g->action_done[action]); }

/* Interleaved 1F1B: the same list, with every group of transfers on a stream
 * of its own, so that a stage waits only for the data it needs, not for its
 * neighbour to reach the same step (with one stream, each group held both
 * sides' computation until the slower of the two arrived: measured 3-12%
 * slower than predicted on 2 x H200).  The waits are pipeline_async_waits'
 * (schedule.h; checked against random durations by tests/test_schedule.c);
 * the step ends when the last group has. */
static void run_schedule_async(gpt *g)
{
    for (int i = 0; i < g->nschedule; i++) {
        const pipe_action *a = &g->schedule[i];
        const pipe_wait *w = &g->waits[i];
        trace_action(g, a, i, a->kind == PIPE_EXCHANGE ? gpu_ctx.pp_stream : gpu_ctx.stream, 0);
        if (a->kind == PIPE_EXCHANGE) {
            if (w->compute >= 0) CK(cudaStreamWaitEvent(gpu_ctx.pp_stream, g->action_done[w->compute], 0));
            pass_t saved = current_pass;
            current_pass = a->act_send_mb >= 0 || a->act_recv_mb >= 0 ? PASS_FWD : PASS_BWD;
            pp_group(g, a, gpu_ctx.pp_stream);
            current_pass = saved;
            CK(cudaEventRecord(g->action_done[i], gpu_ctx.pp_stream));
            trace_action(g, a, i, gpu_ctx.pp_stream, 1);
            continue;
        }
        for (int k = 0; k < 3; k++)
            if (w->groups[k] >= 0) pp_wait(g, w->groups[k]);
        if (a->kind == PIPE_FORWARD) stage_forward(g, a);
        else stage_backward(g, a);
        CK(cudaEventRecord(g->action_done[i], gpu_ctx.stream));
        trace_action(g, a, i, gpu_ctx.stream, 1);
    }
    if (g->last_group >= 0) pp_wait(g, g->last_group);
}

/* Linear warm-up over the first lr_warmup steps, then constant (llm.c's and GPT-2's
 * schedule without the decay: runs here are tens of steps).  Without it, GPT-2 124M at
 * micro-batch 32 spiked from 8.9 to 14.4 at step 30 in every run since 2026-11-23. */
static float learning_rate_at(const gpt *g, int step)
{
    if (g->lr_warmup > 0 && step < g->lr_warmup) return (float)(g->lr * step / g->lr_warmup);
    return (float)g->lr;
}

static void optimizer_step(gpt *g, int step)
{
    const shapes *s = &g->s;
    const param_layout *pl = &g->pl;
    current_pass = PASS_STEP;
    if (g->comm_used) {
        /* what of the reduction the backward did not hide */
        CK(cudaEventRecord(g->reduce_done, gpu_ctx.comm_stream));
        OP("dp_exposed", CK(cudaStreamWaitEvent(gpu_ctx.stream, g->reduce_done, 0)));
        g->comm_used = 0;
    }
    sx_adamw_params hp = {learning_rate_at(g, step), 0.9f, 0.95f, 1e-8f, 0.0f, step, 1.0f, NULL};
    /* after the wait above: its reductions share the data-parallel communicator, on this stream */
    if (s->moe) moe_step(&g->moe, &hp);
    int sharded = s->dp > 1 && pl->shard_count != pl->count;
    if (!sharded) {
        OP("optimizer", CK(sx_adamw(g->master, g->m, g->v, g->params, g->grads, pl->count, &hp, gpu_ctx.stream)));
        return;
    }
    profile_mark("optimizer", 0);
    for (int b = 0; b < pl->nbuckets; b++) {
        const bucket *k = &pl->buckets[b];
        size_t slice = k->size / (size_t)s->dp, at = k->offset + (size_t)s->dp_rank * slice;
        /* ZeRO-2/3 keep the gradients' slices alone, ZeRO-3 the parameters' too */
        bf16 *grad = g->grads + (g->zero ? k->shard_offset : at), *p16 = g->params + (g->zero == 3 ? k->shard_offset : at);
        CK(sx_adamw(g->master + k->shard_offset, g->m + k->shard_offset, g->v + k->shard_offset, p16, grad, slice, &hp,
                    gpu_ctx.stream));
    }
    profile_mark("optimizer", 1);
    CK(cudaEventRecord(g->optimizer_done, gpu_ctx.stream));
    if (g->zero == 3) return;   /* the next step gathers from the shards, bucket by bucket (zero.c) */
    /* every rank's updated slices to every rank, in the order the next forward reads them */
    CK(cudaStreamWaitEvent(gpu_ctx.comm_stream, g->optimizer_done, 0));
    for (int b = 0; b < pl->nbuckets; b++) {
        const bucket *k = &pl->buckets[b];
        size_t slice = k->size / (size_t)s->dp;
        bf16 *base = g->params + k->offset;
        profile_mark_on("dp_allgather_params", 0, gpu_ctx.comm_stream);
        NC(ncclAllGather(base + (size_t)s->dp_rank * slice, base, slice, ncclBfloat16, g->dp_comm, gpu_ctx.comm_stream));
        profile_mark_on("dp_allgather_params", 1, gpu_ctx.comm_stream);
        CK(cudaEventRecord(g->params_ready[b], gpu_ctx.comm_stream));
    }
}

/* ---- reports: CSV (docs/validation's columns), JSON, an SVG plot -------------- */

typedef struct {
    const char *op, *pass;
    double predicted_s, measured_s;         /* predicted < 0: not in the op list */
    double predicted_bytes, measured_bytes; /* the step row only */
} report_row;

typedef struct {
    const model_t *m;
    const hw_gpu *gpu;
    const train_options *o;
    int rank, stage, gpus;
    int timed_steps;
    double spread, tokens_per_s, flops_per_s, mfu, first_loss, last_loss;
    double measured_w, measured_mhz, measured_c; /* NVML over the timed steps; 0 when not available */
    double predicted_w, predicted_mhz;           /* the power model's; 0 without it */
} report_info;

static const char *recompute_label(const train_options *o) { return o->recompute == RECOMPUTE_FULL ? "full" : "none"; }

static void csv_number(FILE *f, double x) { if (x >= 0) fprintf(f, "%.6e", x); }

static void csv_rows(FILE *f, const report_info *in, const report_row *rows, int n, int calibrated)
{
    const train_options *o = in->o;
    for (int i = 0; i < n; i++) {
        fprintf(f, "%s,%s,%d,%d,%d,%d,%d,%d,%d,%s,%d,%s,", in->m->name, in->gpu->name, in->gpus, o->tp, o->pp, o->dp, o->mbs,
                o->gbs, o->seq, recompute_label(o), o->zero, rows[i].op);
        csv_number(f, rows[i].predicted_s);
        fputc(',', f);
        csv_number(f, rows[i].measured_s);
        fputc(',', f);
        if (rows[i].predicted_bytes > 0) fprintf(f, "%.0f", rows[i].predicted_bytes);
        fputc(',', f);
        if (rows[i].measured_bytes > 0) fprintf(f, "%.0f", rows[i].measured_bytes);
        fprintf(f, ",%d,%d,%d,%s,%d,%s,%d,%d\n", calibrated, in->rank, in->stage, rows[i].pass, o->sp && o->tp > 1,
                o->flash ? "flash" : "unfused", o->vpp > 1 ? o->vpp : 1, o->cp > 1 ? o->cp : 1);
    }
}

static const char csv_header[] =
    "model,gpu,gpus,tp,pp,dp,mbs,gbs,seq,recompute,zero,op,predicted_s,measured_s,predicted_bytes,measured_bytes,"
    "calibrated,rank,stage,pass,sp,attention,vpp,cp\n";

static int write_json(const char *path, const report_info *in, const report_row *rows, int n, const double *ranks, int nranks)
{
    outfile out;
    char err[PATH_MAX + 256];
    if (outfile_open(&out, path, err, sizeof err) != 0) { fprintf(stderr, "sextant-gpu train: --json: %s\n", err); return 1; }
    FILE *f = out.f;
    const train_options *o = in->o;
    const report_row *step = &rows[n - 1];
    fprintf(f, "{\n  \"model\": \"%s\", \"gpu\": \"%s\", \"gpus\": %d, \"tp\": %d, \"pp\": %d, \"vpp\": %d, \"dp\": %d, "
            "\"sp\": %s,\n", in->m->name, in->gpu->name, in->gpus, o->tp, o->pp, o->vpp > 1 ? o->vpp : 1, o->dp,
            o->sp && o->tp > 1 ? "true" : "false");
    fprintf(f, "  \"cp\": %d,\n", o->cp > 1 ? o->cp : 1);
    fprintf(f, "  \"mbs\": %d, \"gbs\": %d, \"seq\": %d, \"recompute\": \"%s\", \"zero\": %d, \"attention\": \"%s\", "
               "\"calibrated\": %s,\n", o->mbs, o->gbs, o->seq, recompute_label(o), o->zero, o->flash ? "flash" : "unfused",
            o->calibrated ? "true" : "false");
    fprintf(f, "  \"step\": {\"predicted_s\": %.6e, \"measured_s\": %.6e, \"timed_steps\": %d, \"spread\": %.4f},\n",
            step->predicted_s, step->measured_s, in->timed_steps, in->spread);
    fprintf(f, "  \"memory\": {\"predicted_bytes\": %.0f, \"measured_bytes\": %.0f},\n", step->predicted_bytes,
            step->measured_bytes);
    fprintf(f, "  \"tokens_per_s\": %.1f, \"model_flops_per_s\": %.6e, \"mfu\": %.4f,\n", in->tokens_per_s, in->flops_per_s,
            in->mfu);
    fprintf(f, "  \"power\": {\"measured_w\": %.1f, \"measured_sm_mhz\": %.0f, \"measured_celsius\": %.1f, "
               "\"predicted_w\": %.1f, \"predicted_sm_mhz\": %.0f},\n",
            in->measured_w, in->measured_mhz, in->measured_c, in->predicted_w, in->predicted_mhz);
    fprintf(f, "  \"loss\": {\"first\": %.4f, \"last\": %.4f},\n  \"ranks\": [\n", in->first_loss, in->last_loss);
    for (int r = 0; r < nranks; r++)
        fprintf(f, "    {\"rank\": %d, \"step_s\": %.6e, \"device_bytes\": %.0f}%s\n", r, ranks[8 * r], ranks[8 * r + 2],
                r + 1 < nranks ? "," : "");
    fprintf(f, "  ],\n  \"ops\": [\n");
    for (int i = 0; i < n - 1; i++) {
        fprintf(f, "    {\"op\": \"%s\", \"pass\": \"%s\", ", rows[i].op, rows[i].pass);
        if (rows[i].predicted_s >= 0) fprintf(f, "\"predicted_s\": %.6e, ", rows[i].predicted_s);
        else fprintf(f, "\"predicted_s\": null, ");
        fprintf(f, "\"measured_s\": %.6e}%s\n", rows[i].measured_s, i + 2 < n ? "," : "");
    }
    fprintf(f, "  ]\n}\n");
    if (outfile_commit(&out, err, sizeof err) != 0) {
        fprintf(stderr, "sextant-gpu train: --json: %s\n", err);
        return 1;
    }
    return 0;
}

/* The per-op plot of this rank's rows (validator/plot.c). */
static int write_plot(const char *path, const report_info *in, const report_row *rows, int n)
{
    const char **ops = host_alloc((size_t)n * sizeof *ops);
    double *predicted = host_alloc((size_t)n * sizeof *predicted), *measured = host_alloc((size_t)n * sizeof *measured);
    for (int i = 0; i < n; i++) {
        ops[i] = rows[i].op;
        predicted[i] = rows[i].predicted_s;
        measured[i] = rows[i].measured_s;
    }
    char title[1024];
    snprintf(title, sizeof title, "%.64s on %d x %.64s, tp %d pp %d dp %d, micro-batch %d, seq %d: time per op and step (rank 0)",
             in->m->name, in->gpus, in->gpu->name, in->o->tp, in->o->pp, in->o->dp, in->o->mbs, in->o->seq);
    int rc = plot_predicted_measured(path, title, ops, predicted, measured, n);
    free(ops); free(predicted); free(measured);
    return rc == 1;   /* no gnuplot: said so, the run still counts */
}

/* ---- checks before anything starts ------------------------------------------------ */

int train_check(const model_t *m, const train_options *o)
{
    int gpt2 = !strcasecmp(m->family, "gpt2") || !strcasecmp(m->family, "gpt");
    int llama = !strcasecmp(m->family, "llama") || !strcasecmp(m->family, "mistral") || !strcasecmp(m->family, "mixtral");
    int moe = m->experts > 1, ep = o->ep > 1 ? o->ep : 1;
    const char *bad = NULL;
    char why[256];
    if ((!gpt2 && !llama) || (moe && !llama)) {
        snprintf(why, sizeof why, "%s is a %s model; the training step covers the GPT-2 and LLaMA families (MoE: LLaMA-style)",
                 m->name, m->family);
        bad = why;
    } else if (moe && (m->dense_layers > 0 || m->moe_layer_freq > 1 || m->shared_experts > 0 || m->kv_lora_rank > 0 ||
                       (m->moe_ffn > 0 && m->moe_ffn != m->ffn) || m->capacity_factor > 0 || m->moe_groups > 0)) {
        snprintf(why, sizeof why, "%s: the training step's MoE has every layer a mixture of experts of width ffn, no shared "
                 "experts, MLA, capacity factor or group-limited routing", m->name);
        bad = why;
    } else if (moe && (m->experts > MOE_EXPERTS_MAX || m->top_k < 1 || m->top_k > SX_MOE_TOPK_MAX || m->top_k > m->experts ||
                       m->hidden % 8)) {
        snprintf(why, sizeof why, "%s: %lld experts, top-%lld, hidden %lld: the training step takes up to %d experts, top-k up "
                 "to %d, hidden a multiple of 8", m->name, (long long)m->experts, (long long)m->top_k, (long long)m->hidden,
                 MOE_EXPERTS_MAX, SX_MOE_TOPK_MAX);
        bad = why;
    } else if (moe && (o->tp > 1 || o->pp > 1 || o->recompute != RECOMPUTE_NONE || o->zero > 1)) {
        snprintf(why, sizeof why, "%s is a mixture of experts: the training step runs it with --tp 1 --pp 1, no recomputation "
                 "and --zero 0 or 1 (expert parallelism inside --dp)", m->name);
        bad = why;
    } else if (ep > 1 && !moe) {
        snprintf(why, sizeof why, "--ep %d: %s has no experts to split", ep, m->name);
        bad = why;
    } else if (o->ep < 0 || ep > MOE_EP_MAX || o->dp % ep || (moe && m->experts % ep)) {
        snprintf(why, sizeof why, "--ep %d: it must divide --dp %d and %s's %lld experts (at most %d)", o->ep, o->dp, m->name,
                 (long long)m->experts, MOE_EP_MAX);
        bad = why;
    } else if (m->position == POS_LEARNED && o->seq > m->max_positions) {
        snprintf(why, sizeof why, "--seq %d exceeds %s's %lld positions", o->seq, m->name, (long long)m->max_positions);
        bad = why;
    } else if (m->heads % m->kv_heads || m->heads * m->head_dim > m->hidden) {
        snprintf(why, sizeof why, "%s: heads %lld, kv heads %lld, head size %lld do not fit the step's buffers", m->name,
                 (long long)m->heads, (long long)m->kv_heads, (long long)m->head_dim);
        bad = why;
    } else if (o->mbs < 1 || o->seq < 1 || o->tp < 1 || o->pp < 1 || o->dp < 1) {
        bad = "--mbs, --seq, --tp, --pp and --dp must be positive";
    } else if (m->heads % o->tp || m->kv_heads % o->tp || m->ffn % o->tp) {
        snprintf(why, sizeof why, "--tp %d must divide %s's heads (%lld), KV heads (%lld) and FFN width (%lld)", o->tp, m->name,
                 (long long)m->heads, (long long)m->kv_heads, (long long)m->ffn);
        bad = why;
    } else if (o->pp > m->layers) {
        snprintf(why, sizeof why, "--pp %d exceeds %s's %lld layers", o->pp, m->name, (long long)m->layers);
        bad = why;
    } else if (o->gbs % (o->mbs * o->dp)) {
        snprintf(why, sizeof why, "--gbs %d is not a multiple of --mbs x --dp = %d", o->gbs, o->mbs * o->dp);
        bad = why;
    } else if (o->vpp > 1 && o->pp < 2) {
        snprintf(why, sizeof why, "--vpp %d: interleaving needs --pp of 2 or more", o->vpp);
        bad = why;
    } else if (o->vpp > PIPE_MAX_CHUNKS) {
        snprintf(why, sizeof why, "--vpp %d: at most %d chunks per stage", o->vpp, PIPE_MAX_CHUNKS);
        bad = why;
    } else if (o->vpp > 1 && m->layers % ((int64_t)o->pp * o->vpp)) {
        snprintf(why, sizeof why, "--vpp %d: %s's %lld layers do not split into --pp %d x --vpp %d equal chunks", o->vpp, m->name,
                 (long long)m->layers, o->pp, o->vpp);
        bad = why;
    } else if (o->vpp > 1 && (o->gbs / (o->mbs * o->dp)) % o->pp) {
        snprintf(why, sizeof why, "--vpp %d: interleaving needs micro-batches per step (gbs / (mbs x dp) = %d) to be a multiple "
                 "of --pp %d", o->vpp, o->gbs / (o->mbs * o->dp), o->pp);
        bad = why;
    } else if (o->gbs / (o->mbs * o->dp) > 4096) {
        bad = "--gbs: more than 4096 micro-batches per step";
    } else if (o->sp && o->tp > 1 && (o->mbs * o->seq) % o->tp) {
        snprintf(why, sizeof why, "--sp: mbs x seq = %d tokens do not split over --tp %d", o->mbs * o->seq, o->tp);
        bad = why;
    } else if (o->zero < 0 || o->zero > 3) {
        bad = "--zero: expected 0, 1 (the distributed optimizer), 2 (and sharded gradients) or 3 (and sharded parameters)";
    } else if (o->zero >= 2 && o->dp > 1 && o->pp > 1 && m->tied_embeddings) {
        /* the two stages' copies of a tied table would add sharded gradients of differently cut buckets */
        snprintf(why, sizeof why, "--zero %d with --pp %d and --dp %d: %s's tied embedding is summed across stages whole; "
                 "ZeRO-2/3 run with --pp 1 or an untied model", o->zero, o->pp, o->dp, m->name);
        bad = why;
    } else if (o->recompute != RECOMPUTE_NONE && o->recompute != RECOMPUTE_FULL) {
        bad = "--recompute: the training step has none and full";
    } else if (o->flash && m->head_dim != 64 && m->head_dim != 128) {
        snprintf(why, sizeof why, "--attention flash: head size %lld; the fused kernel has 64 and 128", (long long)m->head_dim);
        bad = why;
    } else if (o->cp > 2) {
        snprintf(why, sizeof why, "--cp %d: the training step's ring has one peer (--cp 2); longer rings are not built", o->cp);
        bad = why;
    } else if (o->cp == 2 && !o->flash) {
        bad = "--cp 2 needs --attention flash: the ring's blocks are the fused kernel's, merged by their log-sum-exp";
    } else if (o->cp == 2 && o->seq % (2 * o->cp)) {
        snprintf(why, sizeof why, "--cp %d: --seq %d is not divisible by 2 x cp = %d (causal load balancing gives each rank two "
                 "of 2 x cp chunks)", o->cp, o->seq, 2 * o->cp);
        bad = why;
    } else if (o->cp == 2 && (o->tp > 1 || o->pp > 1)) {
        bad = "--cp 2 with --tp or --pp: the training step runs context parallelism beside data parallelism only";
    } else if (o->cp == 2 && o->zero >= 1 && o->dp > 1) {
        bad = "--cp 2 with --zero and --dp 2 or more: the ZeRO shards would be cut over DP alone, the gradients summed over DP x CP";
    } else if (o->cp == 2 && model_is_moe(m)) {
        bad = "--cp 2 with a model with experts: the training step runs the ring on dense models only";
    } else if (o->cp == 2 && o->check_gradients) {
        bad = "check-gradients runs one GPU";
    } else if (o->steps < o->warmup + 3) {
        snprintf(why, sizeof why, "--steps must be at least %d", o->warmup + 3);
        bad = why;
    }
    if (bad) {
        fprintf(stderr, "sextant-gpu train: %s\n", bad);
        return -1;
    }
    return 0;
}

/* ---- the run ----------------------------------------------------------------------- */

/* Waits for everything enqueued so far on the compute and data-parallel
 * streams (the interleaved step joins its transfer stream into the compute
 * stream before it ends). */
static void sync_all(gpt *g, const char *what)
{
    sync_stream(g, gpu_ctx.stream, what);
    sync_stream(g, gpu_ctx.comm_stream, what);
}

/* Waits for the compute stream alone (the second stream may run on). */
static void sync_compute(gpt *g, const char *what)
{
    CK(cudaEventRecord(g->synced, gpu_ctx.stream));
    host_wait(g, g->synced, what);
}

static double *world_scratch;   /* device: 8 doubles per rank */

/* Every communicator once before the first step, with the operations and
 * sizes the step uses, communicator after communicator in the same order on
 * every rank and each finished before the next.  NCCL connects a
 * communicator's peers on its first use of them (NCCL_RUNTIME_CONNECT), in
 * the calling thread, which waits there for its peers to connect too; inside
 * a step, one rank's host could then wait in a collective's connection while
 * its peer's host waits in a pipeline transfer's, each for the other.  This
 * was the interleaved hang with m = pp: without the warm-up it still hangs,
 * with it it runs (docs/validation/2026-11-23-h200x2-m-eq-pp).  The buffers
 * touched are the gradients, zero until the first step, and scratch. */
static void comm_warmup(gpt *g)
{
    const shapes *s = &g->s;
    if (!g->ctx || getenv("SEXTANT_TRAIN_NO_COMM_WARMUP")) return;   /* the variable: to show the hang again */
    scratch_buffers *r = &g->scr;
    size_t N = (size_t)s->N, Nl = (size_t)s->Nl, C = (size_t)s->C;
    if (s->tp > 1) {
        if (spg(s)) {
            NC(ncclAllGather(r->dresidual, r->dbuf_c, Nl * C, ncclBfloat16, g->tp_comm, gpu_ctx.stream));
            NC(ncclReduceScatter(r->dbuf_c, r->dresidual, Nl * C, ncclBfloat16, ncclSum, g->tp_comm, gpu_ctx.stream));
        } else {
            NC(ncclAllReduce(r->dbuf_c, r->dbuf_c, N * C, ncclBfloat16, ncclSum, g->tp_comm, gpu_ctx.stream));
        }
        if (s->last) {
            NC(ncclAllReduce(r->ce_stats + N, r->ce_stats + N, N, ncclFloat32, ncclMax, g->tp_comm, gpu_ctx.stream));
            NC(ncclAllReduce(r->ce_stats + N, r->ce_stats + N, N, ncclFloat32, ncclSum, g->tp_comm, gpu_ctx.stream));
        }
        sync_all(g, "the tensor-parallel group's first use");
    }
    if (s->dp > 1 && g->zero) {
        zero_warmup(&g->zs);
        sync_all(g, "the data-parallel group's first use");
    } else if (s->dp * s->cp > 1) {
        int sharded = g->pl.shard_count != g->pl.count;
        for (int b = 0; b < g->pl.nbuckets; b++) {
            const bucket *k = &g->pl.buckets[b];
            bf16 *grad = g->grads + k->offset;
            size_t slice = k->size / (size_t)s->dp;
            if (sharded) {
                NC(ncclReduceScatter(grad, grad + (size_t)s->dp_rank * slice, slice, ncclBfloat16, ncclSum, g->dp_comm, gpu_ctx.stream));
                NC(ncclAllGather(grad + (size_t)s->dp_rank * slice, grad, slice, ncclBfloat16, g->dp_comm, gpu_ctx.stream));
            } else {
                NC(ncclAllReduce(grad, grad, k->size, ncclBfloat16, ncclSum, g->dp_comm, gpu_ctx.stream));
            }
        }
        sync_all(g, "the data-parallel group's first use");
    }
    if (s->cp > 1) {
        cp_warmup(&g->cps);
        sync_all(g, "the context-parallel ring's first transfers");
    }
    if (g->tied_sync) {
        int t = s->first ? P_WTE : P_HEAD;
        bf16 *grad = param(g, g->grads, t, 0);
        NC(ncclAllReduce(grad, grad, g->pl.size[t], ncclBfloat16, ncclSum, g->tied_comm, gpu_ctx.stream));
        sync_all(g, "the tied embedding's first all-reduce");
    }
    if (s->pp > 1) {
        /* both directions with each neighbour the schedule talks to (interleaved: a ring) */
        int ring = s->vpp > 1;
        int next = (s->pp_rank + 1) % s->pp, prev = (s->pp_rank + s->pp - 1) % s->pp;
        int to_next = ring || !s->last, from_prev = ring || !s->first;
        for (int direction = 0; direction < 2; direction++) {
            NC(ncclGroupStart());
            if (direction == 0 ? to_next : from_prev)
                NC(ncclSend(r->dresidual, Nl * C, ncclBfloat16, direction == 0 ? next : prev, g->pp_comm, gpu_ctx.stream));
            if (direction == 0 ? from_prev : to_next)
                NC(ncclRecv(r->dbuf_c, Nl * C, ncclBfloat16, direction == 0 ? prev : next, g->pp_comm, gpu_ctx.stream));
            NC(ncclGroupEnd());
        }
        sync_all(g, "the pipeline's first transfers");
    }
}

/* The sum over every rank of x (x itself on one GPU). */
static double world_sum(gpt *g, double x)
{
    if (!g->ctx) return x;
    CK(cudaMemcpyAsync(world_scratch, &x, sizeof x, cudaMemcpyHostToDevice, gpu_ctx.stream));
    NC(ncclAllReduce(world_scratch, world_scratch, 1, ncclFloat64, ncclSum, g->ctx->comm, gpu_ctx.stream));
    CK(cudaMemcpyAsync(&x, world_scratch, sizeof x, cudaMemcpyDeviceToHost, gpu_ctx.stream));
    sync_compute(g, "an all-reduce of the loss");
    return x;
}

static void barrier(gpt *g) { (void)world_sum(g, 0.0); }

/* This rank's micro-batches of one step: the global batch is one token
 * stream cut into gbs sequences; micro-batch i of data-parallel rank r holds
 * sequences (i dp + r) mbs onwards, so every layout trains on the same data. */
static void load_batch(gpt *g, const train_options *o, unsigned long long *state, int32_t *global_in, int32_t *global_tg)
{
    const shapes *s = &g->s;
    size_t N = (size_t)s->N, gn = (size_t)o->gbs * o->seq, mN = (size_t)g->microbatches * N;
    make_batch(global_in, global_tg, gn, s->V, state);
    int32_t *in = g->host_ids, *tg = in + mN, *in_shift = tg + mN, *tg_shift = in_shift + mN;
    for (int i = 0; i < g->microbatches; i++) {
        size_t from = ((size_t)i * s->dp + s->dp_rank) * (size_t)s->B * o->seq;
        if (s->cp > 1) {   /* the rank's two chunks of each sequence (cp_ring.h) */
            cp_local_tokens(in + (size_t)i * N, global_in + from, s->B, o->seq, s->cp, s->cp_rank);
            cp_local_tokens(tg + (size_t)i * N, global_tg + from, s->B, o->seq, s->cp, s->cp_rank);
            continue;
        }
        memcpy(in + (size_t)i * N, global_in + from, N * sizeof *in);
        memcpy(tg + (size_t)i * N, global_tg + from, N * sizeof *tg);
    }
    CK(cudaMemcpyAsync(g->scr.inputs, in, mN * sizeof *in, cudaMemcpyHostToDevice, gpu_ctx.stream));
    CK(cudaMemcpyAsync(g->scr.targets, tg, mN * sizeof *tg, cudaMemcpyHostToDevice, gpu_ctx.stream));
    if (s->tp > 1) {
        for (size_t i = 0; i < mN; i++) {
            in_shift[i] = in[i] - s->vocab0;
            tg_shift[i] = tg[i] - s->vocab0;
        }
        CK(cudaMemcpyAsync(g->scr.ids_shifted, in_shift, mN * sizeof *in, cudaMemcpyHostToDevice, gpu_ctx.stream));
        CK(cudaMemcpyAsync(g->scr.targets_shifted, tg_shift, mN * sizeof *tg, cudaMemcpyHostToDevice, gpu_ctx.stream));
    }
}

static void one_step(gpt *g, int step)
{
    current_pass = PASS_STEP;
    OP("zero_grads", CK(cudaMemsetAsync(g->grads, 0, (g->zero ? g->pl.shard_count : g->pl.count) * sizeof(bf16), gpu_ctx.stream)));
    if (g->s.moe) moe_zero_grads(&g->moe);
    if (g->zero) zero_step_begin(&g->zs, g->optimizer_done);
    if (g->s.vpp > 1) run_schedule_async(g);
    else run_schedule(g);
    optimizer_step(g, step);
}

/* The mean loss of the step's global batch: the last stage's first tensor-parallel
 * ranks hold it, every rank learns it. */
static double step_loss(gpt *g, const train_options *o, float *host_loss)
{
    double sum = 0.0;
    size_t n = (size_t)g->microbatches * g->s.N;
    if (g->s.last && g->s.tp_rank == 0) {
        CK(cudaMemcpyAsync(host_loss, g->scr.losses, n * sizeof *host_loss, cudaMemcpyDeviceToHost, gpu_ctx.stream));
        sync_compute(g, "the loss");
        for (size_t i = 0; i < n; i++) sum += host_loss[i];
    }
    return world_sum(g, sum) / ((double)o->gbs * o->seq);
}

/* The op list this rank's stage runs, costed by the planner. */
static const stage_ops *stage_list(const estimate_t *e, const shapes *s)
{
    return s->last ? &e->last_stage : &e->first_stage;
}

typedef struct {
    const char *name;
    pass_t pass;
    double seconds;
    int calls;
    double fastest;
} measured_op;

#define MEASURED_MAX 128

static double measured_of(const measured_op *ms, int n, const char *name, pass_t pass, int *calls, double *fastest)
{
    for (int i = 0; i < n; i++)
        if (ms[i].pass == pass && !strcmp(ms[i].name, name)) {
            if (calls) *calls = ms[i].calls;
            if (fastest) *fastest = ms[i].fastest;
            return ms[i].seconds;
        }
    if (calls) *calls = 0;
    if (fastest) *fastest = 0;
    return 0.0;
}

/* ZeRO-2/3: the compute stream's waits for their gathers and reduce-scatters, every pass */
static double zero_exposed(const measured_op *ms, int n)
{
    static const char *const waits[] = {"dp_allgather_params_fwd_exposed", "dp_allgather_params_bwd_exposed",
                                        "dp_reduce_scatter_grads_exposed"};
    double sum = 0.0;
    for (int i = 0; i < n; i++)
        for (size_t w = 0; w < sizeof waits / sizeof waits[0]; w++)
            if (!strcmp(ms[i].name, waits[w])) sum += ms[i].seconds;
    return sum;
}

/* ---- the gradient check: the real step against the float64 reference ---------- */

/* One forward and backward of the real training step (one GPU, one
 * micro-batch), then every parameter's gradient against validator/model_ref.c
 * computed in float64 from the same bf16 weights and tokens.
 * Tolerance: relative L2 error per tensor 5e-2 and loss 1e-2.  Every stored
 * activation and gradient is rounded to bf16 (2^-9 relative each), a value
 * passes through about ten such roundings between the loss and a first-layer
 * gradient, and the errors of a sum of thousands of terms mostly cancel: a
 * correct step lands near 1e-2; a wrong index, a missing term or a wrong
 * scale gives errors of order one. */
static int check_gradients(gpt *g, const train_options *o, const model_t *m)
{
    const shapes *s = &g->s;
    const param_layout *pl = &g->pl;
    size_t N = (size_t)s->N, gn = (size_t)o->gbs * s->T;
    int32_t *global_in = host_alloc(gn * sizeof *global_in), *global_tg = host_alloc(gn * sizeof *global_tg);
    unsigned long long state = 42;
    load_batch(g, o, &state, global_in, global_tg);
    current_pass = PASS_BWD;
    CK(cudaMemsetAsync(g->grads, 0, pl->count * sizeof(bf16), gpu_ctx.stream));
    if (g->s.vpp > 1) run_schedule_async(g);
    else run_schedule(g);
    CK(cudaStreamSynchronize(gpu_ctx.stream));
    uint16_t *params = host_alloc(pl->count * sizeof *params), *grads = host_alloc(pl->count * sizeof *grads);
    float *losses = host_alloc(N * sizeof *losses);
    CK(cudaMemcpy(params, g->params, pl->count * sizeof *params, cudaMemcpyDeviceToHost));
    CK(cudaMemcpy(grads, g->grads, pl->count * sizeof *grads, cudaMemcpyDeviceToHost));
    CK(cudaMemcpy(losses, g->scr.losses, N * sizeof *losses, cudaMemcpyDeviceToHost));
    double gpu_loss = 0;
    for (size_t i = 0; i < N; i++) gpu_loss += losses[i];
    gpu_loss /= (double)N;

    ref_config c = {0};
    c.L = s->L; c.C = s->C; c.H = s->H; c.KV = s->KV; c.D = s->D; c.F = s->F; c.V = s->V; c.Vp = s->Vp;
    c.maxT = s->maxT; c.B = s->B; c.T = s->T;
    c.rms = s->rms; c.swiglu = s->swiglu; c.bias = s->bias; c.learned_pos = s->learned_pos; c.tied = s->tied;
    c.rope = s->rope; c.rope_theta = s->rope_theta;
    double *ref_params[REF_COUNT] = {0}, *ref_grads[REF_COUNT] = {0}, *gpu_grads[REF_COUNT] = {0};
    int ok = 1;
    for (int w = 0; w < P_COUNT; w++) {
        size_t n = ref_tensor_size(&c, w);
        int layers = is_layer_param(w) ? s->L : 1;
        if (n != (size_t)layers * pl->size[w]) {
            fprintf(stderr, "sextant-gpu check: tensor %d: the reference holds %zu elements, the step %zu\n", w, n,
                    (size_t)layers * pl->size[w]);
            return 2;
        }
        if (n == 0) continue;
        ref_params[w] = host_alloc(n * sizeof(double));
        ref_grads[w] = host_alloc(n * sizeof(double));
        gpu_grads[w] = host_alloc(n * sizeof(double));
        for (int l = 0; l < layers; l++) {
            size_t at = param_offset(g, w, l), per = pl->size[w];
            for (size_t i = 0; i < per; i++) {
                ref_params[w][(size_t)l * per + i] = sx_ref_bf2f(params[at + i]);
                gpu_grads[w][(size_t)l * per + i] = sx_ref_bf2f(grads[at + i]);
            }
        }
    }
    int32_t *inputs = host_alloc(N * sizeof *inputs), *targets = host_alloc(N * sizeof *targets);
    memcpy(inputs, g->host_ids, N * sizeof *inputs);
    memcpy(targets, g->host_ids + (size_t)g->microbatches * N, N * sizeof *targets);
    double ref_loss = ref_model_loss_grads(&c, ref_params, ref_grads, inputs, targets);
    static const char *const names[P_COUNT] = {"wte", "wpe", "ln1.w", "ln1.b", "qkv.w", "qkv.b", "attn_out.w", "attn_out.b",
                                               "ln2.w", "ln2.b", "mlp_up.w", "mlp_up.b", "mlp_down.w", "mlp_down.b",
                                               "lnf.w", "lnf.b", "head"};
    printf("# gradient check: %s as L=%d C=%d H=%d KV=%d D=%d F=%d V=%d (padded %d), B=%d T=%d%s; the real step (bf16) "
           "against validator/model_ref.c (float64, same bf16 weights and tokens)\n", m->name, s->L, s->C, s->H, s->KV, s->D,
           s->F, s->V, s->Vp, s->B, s->T, s->rope ? ", RoPE" : "");
    double loss_err = fabs(gpu_loss - ref_loss) / fabs(ref_loss);
    int loss_ok = isfinite(ref_loss) && loss_err <= 1e-2;
    printf("%-12s %14s %14s %10s %s\n", "loss", "", "", "", "");
    printf("%-12s %14.6f %14.6f %10.2e %s\n", "", gpu_loss, ref_loss, loss_err, loss_ok ? "PASS" : "FAIL");
    ok &= loss_ok;
    printf("%-12s %14s %14s %10s %s\n", "gradient", "|ref| (L2)", "max |err|", "rel. L2", "");
    for (int w = 0; w < P_COUNT; w++) {
        size_t n = ref_tensor_size(&c, w);
        if (n == 0) continue;
        double num = 0, den = 0, worst = 0;
        for (size_t i = 0; i < n; i++) {
            double d = gpu_grads[w][i] - ref_grads[w][i];
            num += d * d;
            den += ref_grads[w][i] * ref_grads[w][i];
            if (fabs(d) > worst || !isfinite(d)) worst = fabs(d);
        }
        double rel = den > 0 ? sqrt(num / den) : sqrt(num);
        int pass = isfinite(rel) && rel <= 5e-2;
        ok &= pass;
        printf("%-12s %14.4e %14.4e %10.2e %s\n", names[w], sqrt(den), worst, rel, pass ? "PASS" : "FAIL");
        free(ref_params[w]); free(ref_grads[w]); free(gpu_grads[w]);
    }
    printf("gradient check %s: %s\n", m->name, ok ? "all tensors within tolerance" : "FAILED");
    free(params); free(grads); free(losses); free(inputs); free(targets); free(global_in); free(global_tg);
    return ok ? 0 : 1;
}

typedef struct {
    const measured_op *ops;
    int nops;
    double p2p_fastest, p2p_total, dp_exposed, median, device_used;
    double p2p_wait;   /* interleaved: the compute stream's waits for transfers; < 0 with one stream */
} measured_step;

/* The report's rows for one estimate: each op of the stage's list against the
 * profiling step, what ran but is not in the list, the pipeline's transfer
 * and bubble, the exposed data-parallel time and the step. */
static int op_rows(const estimate_t *e, const gpt *g, const measured_step *ms, report_row *rows, double *pp_transfer_out,
                   double *bubble_out)
{
    const shapes *s = &g->s;
    const stage_ops *ops = stage_list(e, s);
    int nrows = 0;
    double mbs_count = (double)g->microbatches, pp_predicted = 0.0, pp_transfers = 0.0;
    for (int i = 0; i < ops->nops; i++) {
        const op_t *op = &ops->ops[i];
        double times = op->pass == PASS_STEP ? 1.0 : mbs_count;
        if (op->kind == OP_COMM && op->group == GROUP_PP && op->pass != PASS_STEP) {
            pp_predicted += op->time_s * (double)op->count * times;
            pp_transfers += (double)op->count * times;
            continue;
        }
        if (op->kind == OP_MEMBOUND && op->bytes <= 0) continue;
        if (!s->first && !s->last && strstr(op->name, "embedding")) continue;   /* a middle stage */
        report_row *r = &rows[nrows++];
        r->op = op->name;
        r->pass = pass_name(op->pass);
        r->predicted_s = op->time_s * (double)op->count * times;
        r->measured_s = measured_of(ms->ops, ms->nops, op->name, op->pass, NULL, NULL);
    }
    /* what ran but the op list does not have */
    for (int k = 0; k < ms->nops; k++) {
        const char *name = ms->ops[k].name;
        if (!strcmp(name, "pp_sendrecv") || !strcmp(name, "pp_wait") || !strcmp(name, "dp_exposed") ||
            !strcmp(name, "dp_allgather_wait"))
            continue;
        int listed = 0;
        for (int i = 0; i < ops->nops && !listed; i++)
            listed = ops->ops[i].pass == ms->ops[k].pass && !strcmp(ops->ops[i].name, name);
        if (listed) continue;
        report_row *r = &rows[nrows++];
        r->op = name;
        r->pass = pass_name(ms->ops[k].pass);
        r->predicted_s = -1.0;
        r->measured_s = ms->ops[k].seconds;
    }
    double pp_transfer = pp_transfers * ms->p2p_fastest, bubble = ms->p2p_total - pp_transfer;
    if (ms->p2p_wait >= 0) {
        /* transfers beside the compute: only the compute's waits cost time, and the transfers' share
         * of them is the wait for a transfer that found its peer ready */
        bubble = ms->p2p_wait - pp_transfer;
    }
    if (bubble < 0) bubble = 0;
    if (s->pp > 1) {
        rows[nrows++] = (report_row){"pp_sendrecv", "all", pp_predicted, pp_transfer, 0, 0};
        rows[nrows++] = (report_row){"bubble", "all", e->bubble_s, bubble, 0, 0};
    }
    if (s->dp * s->cp > 1 || g->tied_sync) rows[nrows++] = (report_row){"dp_exposed", "step", e->dp_comm_s, ms->dp_exposed, 0, 0};
    rows[nrows++] = (report_row){"step", "all", e->step_s, ms->median, e->memory.total, ms->device_used};
    if (pp_transfer_out) *pp_transfer_out = pp_transfer;
    if (bubble_out) *bubble_out = bubble;
    return nrows;
}

/* Frees what gpt's set-up in train_run made: events, the libraries' handles
 * and workspaces, every device allocation, the communicators and the streams. */
static void gpt_free(gpt *g, int nptrs, void *blas_workspace)
{
    for (int b = 0; b < g->pl.nbuckets; b++) {
        CK(cudaEventDestroy(g->grad_ready[b]));
        CK(cudaEventDestroy(g->params_ready[b]));
    }
    if (g->zero) zero_free(&g->zs);
    if (g->s.cp > 1) cp_free(&g->cps);
    if (g->s.moe) moe_free(&g->moe);
    CK(cudaEventDestroy(g->reduce_done));
    CK(cudaEventDestroy(g->optimizer_done));
    CK(cudaEventDestroy(g->synced));
    if (g->action_done) {
        for (int i = 0; i < g->nschedule; i++) CK(cudaEventDestroy(g->action_done[i]));
        free(g->action_done);
        free(g->waits);
    }
    free(g->schedule);
    lt_free();
    fp8_free();
    CB(cublasLtDestroy(gpu_ctx.lt));
    CB(cublasDestroy(gpu_ctx.blas));
    for (int i = 0; i < nptrs; i++)
        if (g->ptrs[i].block) CK(cudaFree(g->ptrs[i].block));
    free(g->ptrs);
    CK(cudaFreeHost(g->host_ids));
    void *blocks[] = {g->params, g->grads, g->master, g->m, g->v, g->slot_block, g->recomp_block, g->scr_block,
                      g->norm_ws, g->emb_ws, g->emb_grouping, gpu_ctx.lt_workspace, blas_workspace, world_scratch,
                      g->zs.gathered[0], g->zs.gathered[1], g->zs.gathered[2], g->zs.work[0], g->zs.work[1], g->zs.work[2]};
    for (size_t i = 0; i < sizeof blocks / sizeof blocks[0]; i++)
        if (blocks[i]) CK(cudaFree(blocks[i]));
    if (g->ctx) {
        ncclComm_t comms[] = {g->tp_comm, g->dp_comm, g->pp_comm, g->tied_comm, g->cp_comm, g->ep_comm, g->edp_comm};
        for (size_t i = 0; i < sizeof comms / sizeof comms[0]; i++)
            if (comms[i]) NC(ncclCommDestroy(comms[i]));
    }
    CK(cudaStreamDestroy(gpu_ctx.stream));
    CK(cudaStreamDestroy(gpu_ctx.comm_stream));
    CK(cudaStreamDestroy(gpu_ctx.pp_stream));
    CK(cudaStreamDestroy(gpu_ctx.prep_stream));
    for (int i = 0; g->emb_grouping && i < g->nslots; i++) {
        CK(cudaEventDestroy(g->emb_fwd_at[i]));
        CK(cudaEventDestroy(g->emb_prepared[i]));
    }
}

static void *cp_alloc(void *ctx, size_t bytes) { return device_alloc(ctx, bytes); }

/* Context parallelism: the ring's state, buffers and stream (cp.c). */
static void cp_setup(gpt *g)
{
    const shapes *s = &g->s;
    cp_state *c = &g->cps;
    c->cp = s->cp; c->rank = s->cp_rank; c->my_rank = my_rank;
    c->B = s->B; c->Tl = s->T; c->H = s->H; c->KV = s->KV; c->D = s->D; c->ld = s->qkv; c->C = s->C;
    c->scale = 1.0f / sqrtf((float)s->D);
    c->compute = gpu_ctx.stream; c->comm = g->cp_comm; c->mark = profile_mark_on;
    cp_init(c, cp_alloc, g, s->learned_pos && s->first);
}

/* ZeRO-2/3: the buckets as zero.c sees them, its buffers and its order of gathers. */
static void zero_setup(gpt *g)
{
    const param_layout *pl = &g->pl;
    for (int b = 0; b < pl->nbuckets; b++)
        g->zb[b] = (zero_bucket){pl->buckets[b].offset, pl->buckets[b].size, pl->buckets[b].shard_offset,
                                 pl->buckets[b].kind >= 0};
    zero_state *z = &g->zs;
    z->stage = g->zero; z->dp = g->s.dp; z->rank = g->s.dp_rank; z->my_rank = my_rank;
    z->compute = gpu_ctx.stream; z->comm = gpu_ctx.comm_stream; z->dp_comm = g->dp_comm; z->mark = zero_mark;
    z->buckets = g->zb; z->nbuckets = pl->nbuckets;
    z->param_shard = g->params; z->grad_shard = g->grads;
    zero_buffer_elems(g->zb, pl->nbuckets, &z->small, &z->big);
    size_t before = g->accounted_bytes;
    for (int i = 0; i < 3; i++) {
        size_t elems = i == ZERO_BIG ? z->big : z->small;
        z->gathered[i] = g->zero == 3 && elems ? device_alloc(g, elems * sizeof(bf16)) : NULL;
        z->work[i] = elems ? device_alloc(g, elems * sizeof(bf16)) : NULL;
    }
    g->zero_bytes = g->accounted_bytes - before;
    const shapes *s = &g->s;
    zero_stage st = {g->zb, z->small, bucket_index(g, B_EMBED), bucket_index(g, B_FINAL), bucket_index(g, head_bucket(s)), bucket_index(g, 0),
                     s->Lc, s->vpp, s->first, s->last};
    if (zero_init(z, &st, g->schedule, g->nschedule) != 0) exit(1);
}

int train_run(const model_t *model, const hw_gpu *gpu, const hw_node *node, const train_options *o, launch_ctx *ctx)
{
    if (train_check(model, o) != 0) return 2;
    int nranks = ctx ? ctx->nranks : 1, rank = ctx ? ctx->rank : 0;
    my_rank = rank;
    const int cp = o->cp > 1 ? o->cp : 1;
    if (nranks != o->tp * o->pp * o->dp * cp) {
        fprintf(stderr, "sextant-gpu train: --tp %d x --pp %d x --dp %d x --cp %d = %d GPUs, but %d rank%s started\n", o->tp,
                o->pp, o->dp, cp, o->tp * o->pp * o->dp * cp, nranks, nranks == 1 ? " was" : "s were");
        return 2;
    }
    /* what runs: no dropout (as llm.c), and the planner is told so */
    model_t run = *model;
    run.dropout = 0;
    const model_t *m = &run;
    static gpt g;
    memset(&g, 0, sizeof g);
    g.ctx = ctx;
    shapes *s = &g.s;
    s->tp = o->tp; s->pp = o->pp; s->dp = o->dp;
    /* Megatron's rank order: TP innermost, then CP, DP, PP */
    s->cp = cp;
    s->tp_rank = rank % o->tp;
    s->cp_rank = (rank / o->tp) % cp;
    s->dp_rank = (rank / (o->tp * cp)) % o->dp;
    s->pp_rank = rank / (o->tp * cp * o->dp);
    s->sp = o->sp && o->tp > 1;
    s->Lmodel = (int)m->layers;
    s->L = (int)layers_on_stage(m->layers, o->pp, s->pp_rank);
    s->layer0 = (int)(layers_on_stage(m->layers, o->pp, 0) * s->pp_rank);
    s->vpp = o->vpp > 1 ? o->vpp : 1;
    s->Lc = s->L / s->vpp;   /* train_check: the layers split evenly into pp vpp chunks */
    s->first = s->pp_rank == 0;
    s->last = s->pp_rank == o->pp - 1;
    s->C = (int)m->hidden; s->Hm = (int)m->heads; s->KVm = (int)m->kv_heads; s->Fm = (int)m->ffn; s->D = (int)m->head_dim;
    s->H = s->Hm / o->tp; s->KV = s->KVm / o->tp; s->F = s->Fm / o->tp;
    s->V = (int)m->vocab;
    s->Vp = (int)padded_vocab(m, o->tp);
    s->Vl = s->Vp / o->tp;
    s->vocab0 = s->tp_rank * s->Vl;
    s->maxT = (int)m->max_positions; s->B = o->mbs; s->T = o->seq / cp;
    s->N = s->B * s->T;
    s->Nl = s->sp ? s->N / o->tp : s->N;
    s->qkv = (s->H + 2 * s->KV) * s->D;
    s->swiglu = m->ffn_kind == FFN_SWIGLU;
    s->up = s->swiglu ? 2 * s->F : s->F;
    s->rms = m->norm == NORM_RMSNORM;
    s->bias = m->bias;
    s->learned_pos = m->position == POS_LEARNED;
    s->rope = m->position == POS_ROPE;
    /* the zoo has no theta: LLaMA 3 uses 500000, LLaMA 2 and most others 10000 */
    s->rope_theta = !strncasecmp(m->name, "llama3", 6) ? 500000.0f : 10000.0f;
    s->tied = m->tied_embeddings;
    s->head_copy = s->tied && o->pp > 1 && s->last;
    s->flash = o->flash;
    s->recompute = o->recompute == RECOMPUTE_FULL;
    s->grads_sharded = o->zero >= 2 && o->dp > 1;
    g.zero = s->grads_sharded ? o->zero : 0;
    s->moe = m->experts > 1;
    s->E = (int)m->experts; s->topk = (int)m->top_k; s->ep = o->ep > 1 ? o->ep : 1;
    g.tied_sync = s->tied && o->pp > 1 && (s->first || s->last);
    g.microbatches = o->gbs / (o->mbs * o->dp);
    int max_actions = pipeline_max_actions(o->pp, g.microbatches, s->vpp);
    g.schedule = host_alloc((size_t)max_actions * sizeof *g.schedule);
    g.nschedule = pipeline_schedule(o->pp, s->pp_rank, g.microbatches, s->vpp, g.schedule, max_actions, &g.pools);
    if (g.nschedule < 0) { fprintf(stderr, "sextant-gpu train: rank %d: internal: the pipeline schedule does not fit\n", rank); exit(1); }
    g.nslots = g.pools.slots;
    int pool_max = (int)(sizeof g.slots / sizeof g.slots[0]);
    if (g.nslots > pool_max || g.pools.inputs > pool_max || g.pools.heads > pool_max || g.pools.grad_buffers > pool_max) {
        fprintf(stderr, "sextant-gpu train: --pp %d --vpp %d: more than %d micro-batches in flight\n", o->pp, s->vpp, pool_max);
        free(g.schedule); return 2;
    }
    if (s->L + 3 > BUCKETS_MAX) { fprintf(stderr, "sextant-gpu train: more than %d layers on a stage\n", BUCKETS_MAX - 3); free(g.schedule); return 2; }
    param_shapes(s, &g.pl);
    int N = s->N;

    if (o->fp8) {
        char why[256];
        if (fp8_supported(why, sizeof why) != 0) {
            fprintf(stderr, "sextant-gpu train: --precision fp8: %s\n", why);
            free(g.schedule); return 2;
        }
    }
    train_fp8 = o->fp8;
    /* the planner's view of the same run, before anything is allocated */
    layout_t l = {0};
    l.gpus = nranks; l.tp = o->tp; l.pp = o->pp; l.dp = o->dp; l.vpp = s->vpp;
    l.mbs = o->mbs; l.gbs = o->gbs; l.seq = o->seq;
    l.gpus_per_node = node->gpus_per_node > nranks ? node->gpus_per_node : nranks;
    l.recompute = o->recompute; l.attention = o->flash ? ATTENTION_SEXTANT : ATTENTION_UNFUSED;
    l.precision = o->fp8 ? PREC_FP8 : PREC_BF16;
    l.sp = s->sp; l.zero = o->zero; l.ep = s->ep;
    l.cp = cp; l.cp_comm = CP_COMM_RING;
    job_t job = {1e9, 1.0};
    static estimate_t e;
    char err[256];
    if (estimate_layout(m, gpu, node, &l, &job, &e, err, sizeof err) != 0) {
        fprintf(stderr, "sextant-gpu train: %s\n", err);
        free(g.schedule); return 2;
    }
    g.predicted_bytes = e.memory.total;
    static estimate_t e_uncal;
    int have_uncal = o->calibrated && o->uncal_gpu && o->uncal_node;
    if (have_uncal && estimate_layout(m, o->uncal_gpu, o->uncal_node, &l, &job, &e_uncal, err, sizeof err) != 0) {
        fprintf(stderr, "sextant-gpu train: %s\n", err);
        free(g.schedule); return 2;
    }
    size_t free_before, total_mem;
    CK(cudaMemGetInfo(&free_before, &total_mem));
    /* refuse what will not fit rather than fail half-way through allocating */
    double context = gpu->context_bytes > 0 ? gpu->context_bytes : 0.0;
    if (e.memory.total - context > (double)free_before) {
        fprintf(stderr, "sextant-gpu train: rank %d: %s at micro-batch %d, seq %d does not fit: predicted %.2f GiB, %.2f GiB free "
                "of %.2f GiB on the device\n", rank, m->name, o->mbs, o->seq, e.memory.total / 1073741824.0,
                free_before / 1073741824.0, total_mem / 1073741824.0);
        free(g.schedule); return 3;
    }

    /* streams and libraries of this process */
    CK(cudaStreamCreateWithFlags(&gpu_ctx.stream, cudaStreamNonBlocking));
    CK(cudaStreamCreateWithFlags(&gpu_ctx.comm_stream, cudaStreamNonBlocking));
    CK(cudaStreamCreateWithFlags(&gpu_ctx.pp_stream, cudaStreamNonBlocking));
    CK(cudaStreamCreateWithFlags(&gpu_ctx.prep_stream, cudaStreamNonBlocking));
    CB(cublasCreate(&gpu_ctx.blas));
    CB(cublasSetStream(gpu_ctx.blas, gpu_ctx.stream));
    void *blas_workspace = device_alloc(&g, CUBLAS_WORKSPACE_BYTES);
    CB(cublasSetWorkspace(gpu_ctx.blas, blas_workspace, CUBLAS_WORKSPACE_BYTES));
    CB(cublasLtCreate(&gpu_ctx.lt));
    gpu_ctx.lt_workspace = device_alloc(&g, LT_WORKSPACE_BYTES);
    if (train_fp8) fp8_init(gpu_ctx.lt, gpu_ctx.lt_workspace, LT_WORKSPACE_BYTES);
    CK(cudaMalloc((void **)&world_scratch, 8 * sizeof(double) * (size_t)nranks));

    /* the groups: tp fastest, then dp, then pp (Megatron's order) */
    if (ctx) {
        ncclConfig_t cfg = NCCL_CONFIG_INITIALIZER;
        cfg.blocking = 1;
        /* no splitShare: communicators sharing resources must not run at once,
         * and the data-parallel reduction runs beside the tensor-parallel ones */
        cfg.splitShare = 0;
        /* with CP the gradient group (dp_comm) is DP x CP, the ring's group the CP ranks */
        int dpcp = s->dp_rank * cp + s->cp_rank;
        NC(ncclCommSplit(ctx->comm, (s->pp_rank * o->dp + s->dp_rank) * cp + s->cp_rank, s->tp_rank, &g.tp_comm, &cfg));
        NC(ncclCommSplit(ctx->comm, s->pp_rank * o->tp + s->tp_rank, dpcp, &g.dp_comm, &cfg));
        NC(ncclCommSplit(ctx->comm, dpcp * o->tp + s->tp_rank, s->pp_rank, &g.pp_comm, &cfg));
        int tied_color = g.tied_sync ? dpcp * o->tp + s->tp_rank : NCCL_SPLIT_NOCOLOR;
        NC(ncclCommSplit(ctx->comm, tied_color, s->pp_rank, &g.tied_comm, &cfg));
        int cp_color = cp > 1 ? (s->pp_rank * o->dp + s->dp_rank) * o->tp + s->tp_rank : NCCL_SPLIT_NOCOLOR;
        NC(ncclCommSplit(ctx->comm, cp_color, s->cp_rank, &g.cp_comm, &cfg));
        if (s->moe) {
            /* EP: ep consecutive DP ranks (Megatron's order); the experts' DP: the ranks of one EP place */
            int ep_groups = o->dp / s->ep;
            NC(ncclCommSplit(ctx->comm, (s->pp_rank * ep_groups + s->dp_rank / s->ep) * o->tp + s->tp_rank, s->dp_rank % s->ep,
                             &g.ep_comm, &cfg));
            NC(ncclCommSplit(ctx->comm, (s->pp_rank * s->ep + s->dp_rank % s->ep) * o->tp + s->tp_rank, s->dp_rank / s->ep,
                             &g.edp_comm, &cfg));
        }
    }

    /* parameters, gradients, optimizer state, activations, scratch: each one allocation */
    const param_layout *pl = &g.pl;
    int sharded = o->zero >= 1 && o->dp > 1;
    size_t state = sharded ? pl->shard_count : pl->count;
    if (!sharded) g.pl.shard_count = g.pl.count;
    /* ZeRO-3 keeps its slice of the parameters, ZeRO-2 and 3 of the gradients */
    g.params = device_alloc(&g, (g.zero == 3 ? pl->shard_count : pl->count) * sizeof(bf16));
    g.grads = device_alloc(&g, (g.zero ? pl->shard_count : pl->count) * sizeof(bf16));
    g.master = device_alloc(&g, state * sizeof(float));
    g.m = device_alloc(&g, state * sizeof(float));
    g.v = device_alloc(&g, state * sizeof(float));
    size_t state_bytes = g.accounted_bytes;
    if (g.zero) zero_setup(&g);
    if (cp > 1) cp_setup(&g);
    /* the slots, and with interleaving the schedule's pools of inputs, heads and received gradients */
    size_t slot_bytes = layout_slot(&g.slots[0], NULL, s);
    size_t tensor_bytes = ((size_t)s->Nl * s->C * sizeof(bf16) + 255) & ~(size_t)255;
    size_t head_bytes = layout_head(&g.heads[0], NULL, s);
    size_t act_bytes = slot_bytes * (size_t)g.nslots + tensor_bytes * (size_t)(g.pools.inputs + g.pools.grad_buffers) +
                       head_bytes * (size_t)g.pools.heads;
    g.slot_block = device_alloc(&g, act_bytes);
    char *cursor = g.slot_block;
    for (int i = 0; i < g.nslots; i++, cursor += slot_bytes) layout_slot(&g.slots[i], cursor, s);
    for (int i = 0; i < g.pools.inputs; i++, cursor += tensor_bytes) g.inputs[i] = (bf16 *)cursor;
    for (int i = 0; i < g.pools.grad_buffers; i++, cursor += tensor_bytes) g.grad_bufs[i] = (bf16 *)cursor;
    for (int i = 0; i < g.pools.heads; i++, cursor += head_bytes) layout_head(&g.heads[i], cursor, s);
    if (s->vpp > 1) {
        g.action_done = host_alloc((size_t)g.nschedule * sizeof *g.action_done);
        for (int i = 0; i < g.nschedule; i++) CK(cudaEventCreateWithFlags(&g.action_done[i], cudaEventDisableTiming));
        g.waits = host_alloc((size_t)g.nschedule * sizeof *g.waits);
        g.last_group = pipeline_async_waits(g.schedule, g.nschedule, g.pools.grad_buffers, g.waits);
        if (g.last_group < -1) { fprintf(stderr, "sextant-gpu train: rank %d: internal: the schedule's waits\n", rank); exit(1); }
    }
    if (s->recompute) {
        size_t bytes = layout_layer(&g.recomp, NULL, s);
        g.recomp_block = device_alloc(&g, bytes);
        layout_layer(&g.recomp, g.recomp_block, s);
        act_bytes += bytes;
    }
    g.scr_block = device_alloc(&g, layout_scratch(&g.scr, NULL, s, g.microbatches));
    layout_scratch(&g.scr, g.scr_block, s, g.microbatches);
    g.norm_ws_bytes = sx_norm_backward_workspace_bytes(s->C);
    g.norm_ws = device_alloc(&g, g.norm_ws_bytes);
    /* The embedding backward as prepare (ids only, on prep_stream, beside the forward pass) and apply in the
     * backward.  On one H100 it gave the same losses as the one call, with embedding_bwd 59.9 instead of
     * 79.7 us (docs/validation/archive/2026-11-23-h100-embedding); on 2 x H200 all 18 parallel layouts matched one
     * GPU with it (docs/validation/2026-11-23-h200x2-emb-split).  SEXTANT_TRAIN_EMB_SPLIT=0: the one call. */
    const char *split = getenv("SEXTANT_TRAIN_EMB_SPLIT");
    const int emb_split = s->first && !(split && atoi(split) == 0);
    const int Vb = s->tp > 1 ? s->Vl : s->Vp;
    g.emb_ws_bytes = !s->first ? 0 : emb_split ? sx_embedding_apply_workspace_bytes(N, s->C)
                                                : sx_embedding_backward_workspace_bytes(N, s->C, Vb);
    g.emb_ws = s->first ? device_alloc(&g, g.emb_ws_bytes) : NULL;
    g.emb_grouping_bytes = emb_split ? (sx_embedding_grouping_bytes(N, s->C, Vb) + 255) & ~(size_t)255 : 0;
    g.emb_grouping = emb_split ? device_alloc(&g, g.emb_grouping_bytes * (size_t)g.nslots) : NULL;
    for (int i = 0; emb_split && i < g.nslots; i++) {
        CK(cudaEventCreateWithFlags(&g.emb_fwd_at[i], cudaEventDisableTiming));
        CK(cudaEventCreateWithFlags(&g.emb_prepared[i], cudaEventDisableTiming));
    }
    CK(cudaMallocHost((void **)&g.host_ids, 4 * (size_t)g.microbatches * N * sizeof(int32_t)));
    int nptrs = s->flash ? 0 : s->recompute ? 1 : g.nslots * s->L;
    g.ptrs = calloc((size_t)(nptrs ? nptrs : 1), sizeof *g.ptrs);
    if (!g.ptrs) { fprintf(stderr, "sextant-gpu train: out of host memory\n"); exit(1); }
    for (int i = 0; i < nptrs; i++) {
        layer_acts a = s->recompute ? g.recomp : layer_at(&g, i / s->L, i % s->L);
        attention_pointers(&g.ptrs[i], a.qkv, a.att, a.atty, g.scr.dqkv, g.scr.datt, g.scr.dbuf_c, s);
    }
    if (g.scr.ones) {
        uint16_t *ones = host_alloc((size_t)N * sizeof *ones);
        for (int i = 0; i < N; i++) ones[i] = sx_ref_f2bf(1.0f);
        CK(cudaMemcpy(g.scr.ones, ones, (size_t)N * sizeof *ones, cudaMemcpyHostToDevice));
        free(ones);
    }
    for (int b = 0; b < pl->nbuckets; b++) {
        CK(cudaEventCreateWithFlags(&g.grad_ready[b], cudaEventDisableTiming));
        CK(cudaEventCreateWithFlags(&g.params_ready[b], cudaEventDisableTiming));
    }
    CK(cudaEventCreateWithFlags(&g.reduce_done, cudaEventDisableTiming));
    CK(cudaEventCreateWithFlags(&g.optimizer_done, cudaEventDisableTiming));
    CK(cudaEventCreateWithFlags(&g.synced, cudaEventDisableTiming));
    g.lr = o->lr > 0.0 ? o->lr : TRAIN_LR_DEFAULT;
    g.lr_warmup = o->lr_warmup;
    gpt_init(&g);
    /* the host's own bound: each wait on the GPU has --timeout, a host stuck inside NCCL has this */
    int watchdog_s = ctx ? (int)(2.0 * ctx->timeout_s) + 1 : 0;
    if (watchdog_s > 0) launch_watchdog(rank, watchdog_s, "the communicators' first use");
    if (s->moe) {
        moe_config mc = {s->E, s->topk, s->C, s->F, N, s->L, s->Lmodel, s->layer0, s->ep, s->dp_rank % s->ep, o->dp, rank,
                         1.0 / ((double)N * g.microbatches * o->dp), gpu_ctx.blas, gpu_ctx.stream, g.ep_comm, g.dp_comm, g.edp_comm,
                         {profile_mark, initial_value, sx_ref_f2bf, P_COUNT}};
        moe_init(&g.moe, &mc);
        g.accounted_bytes += g.moe.bytes;
        state_bytes += g.moe.bytes;
    }
    comm_warmup(&g);
    if (watchdog_s > 0) launch_watchdog(rank, 0, NULL);
    if (o->check_gradients) {
        int rc = check_gradients(&g, o, m);
        gpt_free(&g, nptrs, blas_workspace);
        return rc;
    }
    profile_events = host_alloc(2 * (size_t)PROFILE_MAX * sizeof *profile_events);
    profile_tags = host_alloc((size_t)PROFILE_MAX * sizeof *profile_tags);
    profile_events_made = 0;
    /* the cross-entropy's layout (kernels_internal.h), to time one layout against another in
     * the step (4: the staged fallback the cluster layout replaced for long rows) */
    int ce_layout = env_int_in("SEXTANT_CE_LAYOUT", 0, 7, -1);
    if (ce_layout >= 0) sx_cross_entropy_tune(ce_layout);
    replay_runs = env_int_in("SEXTANT_REPLAY", 1, 1000, 0);
    replay_copies = env_int_in("SEXTANT_REPLAY_COPIES", 0, 1, 0);
    if (replay_runs > 0) {
        replay_events = host_alloc(2 * (size_t)PROFILE_MAX * sizeof *replay_events);
        replay_tags = host_alloc((size_t)PROFILE_MAX * sizeof *replay_tags);
        replay_events_made = 0;
    }
    clock_probe_ops = getenv("SEXTANT_CLOCK_PROBE");
    if (clock_probe_ops && !*clock_probe_ops) clock_probe_ops = NULL;
    if (clock_probe_ops) {
        CK(cudaMalloc((void **)&clock_probe_mhz, (PROFILE_MAX + (size_t)o->steps) * sizeof(float)));
        CK(cudaMemset(clock_probe_mhz, 0, (PROFILE_MAX + (size_t)o->steps) * sizeof(float)));
    }

    size_t global_tokens = (size_t)o->gbs * o->seq;
    int32_t *global_in = host_alloc(global_tokens * sizeof *global_in), *global_tg = host_alloc(global_tokens * sizeof *global_tg);
    float *host_loss = host_alloc((size_t)g.microbatches * N * sizeof *host_loss);
    double *step_s = host_alloc((size_t)o->steps * sizeof *step_s);
    double *step_losses = host_alloc((size_t)o->steps * sizeof *step_losses); /* every rank's, for the trend */
    unsigned long long data_state = 42;
    cudaEvent_t t0, t1;
    CK(cudaEventCreate(&t0));
    CK(cudaEventCreate(&t1));
    double first_loss = 0, last_loss = 0;
    int timed = 0;
    FILE *loss_file = NULL;
    outfile losses_out;
    char losses_err[PATH_MAX + 256];
    if (rank == 0 && o->losses) {
        if (outfile_open(&losses_out, o->losses, losses_err, sizeof losses_err) != 0) {
            fprintf(stderr, "sextant-gpu train: --losses: %s\n", losses_err);
            exit(2);
        }
        loss_file = losses_out.f;
    }
    if (rank == 0) {
        char chunks[64] = "";
        if (s->vpp > 1) snprintf(chunks, sizeof chunks, ", interleaved %d x %d layers", s->vpp, s->Lc);
        if (cp > 1) snprintf(chunks, sizeof chunks, ", cp %d: ring attention, %d tokens per rank", cp, s->T);
        printf("# sextant-gpu train %s: %d GPU%s (tp %d, pp %d%s, dp %d%s%s%s), mbs %d, gbs %d (%d micro-batch%s per rank), seq %d\n",
               m->name, nranks, nranks > 1 ? "s" : "", o->tp, o->pp, chunks, o->dp, s->sp ? ", sequence parallel" : "",
               sharded ? (g.zero == 3 ? ", ZeRO-3" : g.zero == 2 ? ", ZeRO-2" : ", ZeRO-1") : "", s->recompute ? ", full recomputation" : "", o->mbs, o->gbs, g.microbatches,
               g.microbatches == 1 ? "" : "es", o->seq);
        printf("# vocab %d padded to %d, %s, %s, %s, %s\n", s->V, s->Vp, s->rms ? "RMSNorm" : "LayerNorm",
               s->swiglu ? "SwiGLU" : "GELU", s->KVm < s->Hm ? "grouped-query attention" : "multi-head attention",
               s->learned_pos ? "learned positions" : s->rope ? "rotary positions" : "no positions");
        printf("# attention: %s\n", s->flash ? "flash (fused kernel, kernels/attention.cu)"
                                             : "unfused (cuBLAS batched GEMMs + causal softmax)");
        if (o->fp8)
            printf("# GEMMs: FP8 for the layers' linears (E4M3 weights and activations, E5M2 gradients, per-tensor scales "
                   "from each tensor's amax; validator/fp8.c), lm_head in bf16\n");
        if (s->moe)
            printf("# mixture of experts: %d experts, top-%d, expert parallelism %d (%d experts a rank; experts' gradients "
                   "over %d rank%s), Switch's auxiliary loss x %g in the gradients (not in the loss printed)\n", s->E, s->topk,
                   s->ep, s->E / s->ep, o->dp / s->ep, o->dp / s->ep == 1 ? "" : "s", MOE_AUX_COEFF);
        if (ctx) printf("# ranks started by %s\n", ctx->mode);
    }
    /* fault injection for the tests: SEXTANT_TRAIN_FAIL=RANK:STEP makes that rank die at that step */
    int fail_rank = -1, fail_step = -1;
    const char *fail = getenv("SEXTANT_TRAIN_FAIL");
    if (fail && sscanf(fail, "%d:%d", &fail_rank, &fail_step) != 2) fail_rank = -1;
    /* the GPU's power and clock over the timed steps (NVML; nothing when it is not there) */
    char nvml_why[256];
    int have_nvml = power_open(nvml_why, sizeof nvml_why) == 0;
    power_window *timed_window = NULL;
    double measured_w = 0.0, measured_mhz = 0.0, measured_c = 0.0;
    for (int step = 1; step <= o->steps; step++) {
        if (have_nvml && step == o->warmup + 1) timed_window = power_window_begin();
        if (rank == fail_rank && step == fail_step) {
            fprintf(stderr, "sextant-gpu train: rank %d: SEXTANT_TRAIN_FAIL: dying at step %d\n", rank, step);
            _exit(9);
        }
        if (watchdog_s > 0) launch_watchdog(rank, watchdog_s, "a training step");
        load_batch(&g, o, &data_state, global_in, global_tg);
        CK(cudaEventRecord(t0, gpu_ctx.stream));
        one_step(&g, step);
        CK(cudaEventRecord(t1, gpu_ctx.stream));
        if (clock_probe_ops) CK(sx_sm_clock_probe(clock_probe_mhz + PROFILE_MAX + step - 1, CLOCK_PROBE_US, gpu_ctx.stream));
        /* the compute stream only: ZeRO-1's all-gather may run on into the next step's forward */
        host_wait(&g, t1, "a training step");
        CK(cudaGetLastError());
        float ms;
        CK(cudaEventElapsedTime(&ms, t0, t1));
        double loss = step_loss(&g, o, host_loss);
        if (watchdog_s > 0) launch_watchdog(rank, 0, NULL);
        if (!isfinite(loss)) {
            fprintf(stderr, "sextant-gpu train: rank %d: step %d: loss is %f\n", rank, step, loss);
            return 1;
        }
        if (step == 1) first_loss = loss;
        last_loss = loss;
        step_losses[step - 1] = loss;
        if (step > o->warmup) step_s[timed++] = ms * 1e-3;
        if (loss_file) fprintf(loss_file, "%d %.6f\n", step, loss);
        if (rank == 0 && (o->quiet_steps || step == 1 || step % 10 == 0 || step == o->steps))
            printf("step %4d  loss %.6f  %.2f ms\n", step, loss, ms);
    }
    if (timed_window) {
        double window_s;
        int updates;
        if (power_window_end(timed_window, &measured_w, &measured_mhz, &measured_c, &window_s, &updates) != 0)
            measured_w = measured_mhz = measured_c = 0.0;
    }
    if (have_nvml) power_close();
    if (loss_file && outfile_commit(&losses_out, losses_err, sizeof losses_err) != 0) {
        fprintf(stderr, "sextant-gpu train: --losses: %s\n", losses_err);
        exit(2);
    }

    /* the profiling step: one more step with events around every op */
    if (watchdog_s > 0) launch_watchdog(rank, watchdog_s, "the profiling step");
    load_batch(&g, o, &data_state, global_in, global_tg);
    profiling = 1;
    profile_count = 0;
    CK(cudaEventRecord(t0, gpu_ctx.stream));
    one_step(&g, o->steps + 1);
    CK(cudaEventRecord(t1, gpu_ctx.stream));
    sync_all(&g, "the profiling step");
    profiling = 0;
    (void)step_loss(&g, o, host_loss);
    if (watchdog_s > 0) launch_watchdog(rank, 0, NULL);
    float profiled_ms;
    CK(cudaEventElapsedTime(&profiled_ms, t0, t1));
    measured_op ms_ops[MEASURED_MAX];
    int nms = 0;
    for (int i = 0; i < profile_count; i++) {
        float ms;
        CK(cudaEventElapsedTime(&ms, profile_events[2 * i], profile_events[2 * i + 1]));
        int k = 0;
        while (k < nms && (ms_ops[k].pass != profile_tags[i].pass || strcmp(ms_ops[k].name, profile_tags[i].name))) k++;
        if (k == nms) {
            if (nms == MEASURED_MAX) continue;
            ms_ops[nms++] = (measured_op){profile_tags[i].name, profile_tags[i].pass, 0.0, 0, 1e30};
        }
        ms_ops[k].seconds += ms * 1e-3;
        ms_ops[k].calls++;
        if (ms * 1e-3 < ms_ops[k].fastest) ms_ops[k].fastest = ms * 1e-3;
    }
    double clock_sum[MEASURED_MAX] = {0};
    int clock_n[MEASURED_MAX] = {0};
    double step_clock_median = 0.0;
    if (clock_probe_ops) {
        float *mhz = host_alloc((PROFILE_MAX + (size_t)o->steps) * sizeof *mhz);
        CK(cudaMemcpy(mhz, clock_probe_mhz, (PROFILE_MAX + (size_t)o->steps) * sizeof *mhz, cudaMemcpyDeviceToHost));
        for (int i = 0; i < profile_count; i++) {
            if (mhz[i] <= 0.0f) continue;
            for (int k = 0; k < nms; k++)
                if (ms_ops[k].pass == profile_tags[i].pass && !strcmp(ms_ops[k].name, profile_tags[i].name)) {
                    clock_sum[k] += mhz[i];
                    clock_n[k]++;
                    break;
                }
        }
        double *timed_mhz = host_alloc((size_t)o->steps * sizeof *timed_mhz);
        int nt = 0;
        for (int st = o->warmup; st < o->steps; st++)
            if (mhz[PROFILE_MAX + st] > 0.0f) timed_mhz[nt++] = mhz[PROFILE_MAX + st];
        sort_ascending(timed_mhz, (size_t)nt);
        if (nt) step_clock_median = timed_mhz[nt / 2];
        free(timed_mhz);
        free(mhz);
        CK(cudaFree(clock_probe_mhz));
        clock_probe_mhz = NULL;
    }
    /* SEXTANT_REPLAY: one more step, every linear layer's GEMMs and the attention replayed */
    measured_op replayed[MEASURED_MAX];
    int nreplayed = 0;
    if (replay_runs > 0) {
        if (watchdog_s > 0) launch_watchdog(rank, watchdog_s, "the replay step");
        load_batch(&g, o, &data_state, global_in, global_tg);
        replaying = 1;
        replay_count = 0;
        one_step(&g, o->steps + 2);
        sync_all(&g, "the replay step");
        replaying = 0;
        (void)step_loss(&g, o, host_loss);
        if (watchdog_s > 0) launch_watchdog(rank, 0, NULL);
        for (int i = 0; i < replay_count; i++) {
            float ms;
            CK(cudaEventElapsedTime(&ms, replay_events[2 * i], replay_events[2 * i + 1]));
            int k = 0;
            while (k < nreplayed && (replayed[k].pass != replay_tags[i].pass || strcmp(replayed[k].name, replay_tags[i].name)))
                k++;
            if (k == nreplayed) {
                if (nreplayed == MEASURED_MAX) continue;
                replayed[nreplayed++] = (measured_op){replay_tags[i].name, replay_tags[i].pass, 0.0, 0, 1e30};
            }
            replayed[k].seconds += ms * 1e-3 / replay_runs; /* per run, summed over the op's calls like the step's */
            replayed[k].calls++;
        }
        if (replay_copies && g.s.flash) {
            double alone[2], mhz[2];
            replay_copies_alone(&g.s, alone, mhz);
            if (rank == 0 && alone[0] > 0)
                printf("SEXTANT_REPLAY_COPIES: layer 0's attention on the copies, back to back alone after 1 s idle: "
                       "forward %.4f ms (%.0f MHz), backward %.4f ms (%.0f MHz) per call\n", alone[0], mhz[0], alone[1],
                       mhz[1]);
        }
        replay_free(); /* before the device's memory is read */
    }
    size_t free_after;
    CK(cudaMemGetInfo(&free_after, &total_mem));
    sort_ascending(step_s, (size_t)timed);
    double median = step_s[timed / 2], spread = (step_s[timed - 1] - step_s[0]) / median;
    double device_used = (double)(total_mem - free_after);

    /* Pipeline: a send/recv that finds its peer ready costs the transfer
     * alone; the fastest of the step stands for that cost, and the rest of
     * the time spent in send/recv is waiting for the other stage: the bubble. */
    int p2p_calls = 0, bwd_calls = 0;
    double p2p_fastest = 0.0, bwd_fastest = 0.0;
    double p2p_total = measured_of(ms_ops, nms, "pp_sendrecv", PASS_FWD, &p2p_calls, &p2p_fastest);
    double p2p_bwd = measured_of(ms_ops, nms, "pp_sendrecv", PASS_BWD, &bwd_calls, &bwd_fastest);
    if (bwd_calls && (!p2p_calls || bwd_fastest < p2p_fastest)) p2p_fastest = bwd_fastest;
    p2p_total += p2p_bwd;
    p2p_calls += bwd_calls;
    measured_step ms_step = {ms_ops, nms, p2p_calls ? p2p_fastest : 0.0, p2p_total,
                             measured_of(ms_ops, nms, "dp_exposed", PASS_STEP, NULL, NULL) +
                                 measured_of(ms_ops, nms, "dp_allgather_wait", PASS_STEP, NULL, NULL) +
                                 zero_exposed(ms_ops, nms),
                             median, device_used, s->vpp > 1 ? measured_of(ms_ops, nms, "pp_wait", PASS_STEP, NULL, NULL) : -1.0};
    const stage_ops *ops = stage_list(&e, s);
    report_row *rows = calloc((size_t)ops->nops + MEASURED_MAX + 8, sizeof *rows);
    report_row *rows_uncal = calloc((size_t)ops->nops + MEASURED_MAX + 8, sizeof *rows_uncal);
    if (!rows || !rows_uncal) { fprintf(stderr, "sextant-gpu train: out of host memory\n"); exit(1); }
    double pp_transfer = 0.0, bubble = 0.0;
    int nrows = op_rows(&e, &g, &ms_step, rows, &pp_transfer, &bubble);
    int nrows_uncal = have_uncal ? op_rows(&e_uncal, &g, &ms_step, rows_uncal, NULL, NULL) : 0;
    double dp_exposed = ms_step.dp_exposed;

    /* every rank's figures to every rank */
    double mine[8] = {median, spread, device_used, (double)g.accounted_bytes, bubble, dp_exposed, pp_transfer,
                      profiled_ms * 1e-3};
    double *all = host_alloc(8 * sizeof(double) * (size_t)nranks);
    if (ctx) {
        CK(cudaMemcpyAsync(world_scratch + 8 * (size_t)rank, mine, sizeof mine, cudaMemcpyHostToDevice, gpu_ctx.stream));
        NC(ncclAllGather(world_scratch + 8 * (size_t)rank, world_scratch, 8, ncclFloat64, ctx->comm, gpu_ctx.stream));
        CK(cudaMemcpyAsync(all, world_scratch, sizeof mine * (size_t)nranks, cudaMemcpyDeviceToHost, gpu_ctx.stream));
        sync_all(&g, "the report's all-gather");
    } else {
        memcpy(all, mine, sizeof mine);
    }
    double slowest = 0, peak = 0;
    int peak_rank = 0;
    for (int r = 0; r < nranks; r++) {
        if (all[8 * r] > slowest) slowest = all[8 * r];
        if (all[8 * r + 2] > peak) { peak = all[8 * r + 2]; peak_rank = r; }
    }
    double tokens_per_s = (double)global_tokens / slowest;
    double flops_per_s = e.model_flops_per_step / slowest;
    double mfu = flops_per_s / ((double)nranks * gpu->peak_flops[PREC_BF16]);
    /* whether the run learns: the losses' trend against their own noise (loss_trend.c) */
    loss_trend trend;
    loss_trend_judge(step_losses, o->steps, &trend);
    if (rank == 0) {
        char trend_line[256];
        loss_trend_describe(&trend, trend_line, sizeof trend_line);
        printf("\nloss %.4f -> %.4f over %d steps (ln V = %.4f)\n%s\n", first_loss, last_loss, o->steps, log((double)s->V),
               trend_line);
        printf("step time: median %.2f ms over %d timed steps (spread %.1f%%; slowest rank's median), predicted %.2f ms (%+.1f%%)\n",
               slowest * 1e3, timed, 100.0 * spread, e.step_s * 1e3, 100.0 * (e.step_s / slowest - 1.0));
        printf("tokens/s %.0f (%.0f per GPU), %.1f model TFLOP/s per GPU, MFU %.1f%% (planner's model FLOPs %.4g per step)\n",
               tokens_per_s, tokens_per_s / nranks, flops_per_s / nranks / 1e12, 100.0 * mfu, e.model_flops_per_step);
        printf("memory: peak device use %.3f GiB on rank %d; predicted %.3f GiB for the heaviest stage (%+.1f%%): "
               "weights+grads+Adam %.3f, activations %.3f, logits %.3f, other %.3f\n",
               peak / 1073741824.0, peak_rank, e.memory.total / 1073741824.0, 100.0 * (e.memory.total / peak - 1.0),
               (e.memory.weights + e.memory.gradients + e.memory.optimizer) / 1073741824.0, e.memory.activations / 1073741824.0,
               e.memory.logits / 1073741824.0, e.memory.other / 1073741824.0);
        printf("predicted step: compute %.2f ms, tp %.2f, pp %.2f, bubble %.2f, dp exposed %.2f, optimizer %.2f\n",
               e.compute_s * 1e3, e.tp_comm_s * 1e3, e.pp_comm_s * 1e3, e.bubble_s * 1e3, e.dp_comm_s * 1e3,
               e.optimizer_s * 1e3);
        if (measured_w > 0)
            printf("power: %.0f W and %.0f MHz SM clock at %.0f C over the timed steps (NVML: energy counter, clock every "
                   "5 ms%s)\n", measured_w, measured_mhz, measured_c, nranks > 1 ? "; rank 0's GPU" : "");
        if (e.step_clock_hz > 0)
            printf("power model: predicted %.0f W at %.0f MHz (%.0f W at the top clock%s)%s\n", e.step_power_w,
                   e.step_clock_hz / 1e6, e.top_clock_power_w, e.clock_fraction < 1.0 ? ", over the cap" : "",
                   measured_mhz > 0 ? "" : "; not measured here");
        if (s->moe && g.moe.imbalance_calls)
            printf("MoE load imbalance: measured %.3f mean, %.3f worst (the busiest EP rank's routed tokens over the mean, over "
                   "%ld layer calls of rank 0, every step); the planner assumes %.3f (--moe-imbalance %.3f%s)\n",
                   g.moe.imbalance_sum / g.moe.imbalance_calls, g.moe.imbalance_max, g.moe.imbalance_calls, moe_rank_load(m, &l),
                   model_moe_imbalance(m), s->ep == 1 ? "; with ep 1 no rank waits for another: load 1" : "");
        if (s->moe)
            printf("MoE buffers: the routed rows' (stream-ordered pool) peaked at %.3f GiB on rank 0, beside our %.3f GiB; "
                   "the EP groups' first use took %.3f GiB; expert GEMMs: %s, %ld cuBLASLt heuristic queries, %ld calls "
                   "through cublasGemmEx\n", moe_pool_high_bytes(&g.moe) / 1073741824.0, g.accounted_bytes / 1073741824.0,
                   g.moe.connect_bytes / 1073741824.0, g.moe.gemm_ex ? "cublasGemmEx (SEXTANT_MOE_GEMM=ex)" : "cuBLASLt",
                   g.moe.heuristics, g.moe.fallbacks);
        if (have_uncal)
            printf("uncalibrated (hwdb defaults): step %.2f ms (%+.1f%%), memory %.3f GiB (%+.1f%%)\n", e_uncal.step_s * 1e3,
                   100.0 * (e_uncal.step_s / slowest - 1.0), e_uncal.memory.total / 1073741824.0,
                   100.0 * (e_uncal.memory.total / peak - 1.0));
        if (nranks > 1) {
            printf("%-5s %-6s %-6s %12s %10s %12s %12s %12s %12s\n", "rank", "stage", "tp/dp", "median ms", "spread",
                   "device GiB", "ours GiB", "bubble ms", "dp exp. ms");
            for (int r = 0; r < nranks; r++)
                printf("%-5d %-6d %d/%-4d %12.2f %9.1f%% %12.3f %12.3f %12.2f %12.2f\n", r, r / (o->tp * cp * o->dp), r % o->tp,
                       (r / (o->tp * cp)) % o->dp, all[8 * r] * 1e3, 100.0 * all[8 * r + 1], all[8 * r + 2] / 1073741824.0,
                       all[8 * r + 3] / 1073741824.0, all[8 * r + 4] * 1e3, all[8 * r + 5] * 1e3);
        }
        if (s->vpp > 1)
            printf("our allocations: model state %.3f GiB, activations %.3f GiB (%d chunk slot%s of %d layers in flight, %d "
                   "inputs, %d heads, %d gradient buffers), scratch %.3f GiB (rank 0)\n", state_bytes / 1073741824.0,
                   act_bytes / 1073741824.0, g.nslots, g.nslots == 1 ? "" : "s", s->Lc, g.pools.inputs, g.pools.heads,
                   g.pools.grad_buffers, g.scr.bytes / 1073741824.0);
        else
            printf("our allocations: model state %.3f GiB, activations %.3f GiB (%d micro-batch%s in flight), scratch %.3f GiB "
                   "(rank 0)\n", state_bytes / 1073741824.0, act_bytes / 1073741824.0, g.nslots, g.nslots == 1 ? "" : "es",
                   g.scr.bytes / 1073741824.0);
        if (g.zero)
            printf("ZeRO-%d beside the shards: %.3f GiB, %s gradient buffers of %.2f M elements (a layer) x 2 + %.2f M "
                   "(the embedding or head, when larger); the planner counts %.3f GiB (zero_unit_buffer_bytes)\n", g.zero, g.zero_bytes / 1073741824.0,
                   g.zero == 3 ? "gathered parameter and" : "", g.zs.small / 1e6, g.zs.big / 1e6,
                   zero_unit_buffer_bytes(g.zero, (double)g.zs.small, (double)g.zs.big, 2.0, 2.0) / 1073741824.0);
    }
    /* one table per stage, from its first rank, stage after stage */
    report_info info = {m, gpu, o, rank, s->pp_rank, nranks, timed, spread, tokens_per_s, flops_per_s, mfu, first_loss,
                        last_loss, measured_w, measured_mhz, measured_c, e.step_power_w, e.step_clock_hz / 1e6};
    for (int stage = 0; stage < o->pp; stage++) {
        if (s->pp_rank == stage && s->tp_rank == 0 && s->dp_rank == 0 && s->cp_rank == 0) {
            printf("\nstage %d (rank %d), profiling step: %.2f ms with %d event pairs (%+.1f%% on the timed median: what the "
                   "events cost)\n", stage, rank, profiled_ms, profile_count, 100.0 * (profiled_ms * 1e-3 / median - 1.0));
            printf("%-28s %-5s %12s %12s %8s\n", "op", "pass", "predicted ms", "measured ms", "error");
            for (int i = 0; i < nrows; i++) {
                const report_row *r = &rows[i];
                if (r->predicted_s < 0)
                    printf("%-28s %-5s %12s %12.4f   (not in the op list)\n", r->op, r->pass, "", r->measured_s * 1e3);
                else
                    printf("%-28s %-5s %12.4f %12.4f %+7.1f%%%s\n", r->op, r->pass, r->predicted_s * 1e3, r->measured_s * 1e3,
                           r->measured_s > 0 ? 100.0 * (r->predicted_s / r->measured_s - 1.0) : 0.0,
                           r->measured_s > 0 ? "" : "   (not executed)");
            }
            if (clock_probe_ops) {
                printf("\nSM clock (SEXTANT_CLOCK_PROBE=%s): at the end of the timed steps median %.0f MHz; right after "
                       "each op of the profiling step:\n%-28s %-5s %6s %10s\n", clock_probe_ops, step_clock_median, "op",
                       "pass", "probes", "mean MHz");
                for (int k = 0; k < nms; k++)
                    if (clock_n[k])
                        printf("%-28s %-5s %6d %10.0f\n", ms_ops[k].name, pass_name(ms_ops[k].pass), clock_n[k],
                               clock_sum[k] / clock_n[k]);
            }
            if (nreplayed) {
                printf("\nReplayed (SEXTANT_REPLAY=%d): each GEMM and attention ran %d more times back to back on the step's own "
                       "operands, in a step of its own; ms per step as in the table above\n%-28s %-5s %12s %12s %12s %10s "
                       "%10s\n", replay_runs, replay_runs, "op", "pass", "predicted ms", "in step ms", "replayed ms",
                       "pred/repl", "step/repl");
                for (int k = 0; k < nreplayed; k++) {
                    const report_row *row = NULL;
                    /* SEXTANT_REPLAY_COPIES' rows beside their op's */
                    const char *copies = strstr(replayed[k].name, "_on_copies");
                    size_t base_len = copies ? (size_t)(copies - replayed[k].name) : strlen(replayed[k].name);
                    for (int i = 0; i < nrows && !row; i++)
                        if (strlen(rows[i].op) == base_len && !strncmp(rows[i].op, replayed[k].name, base_len) &&
                            !strcmp(rows[i].pass, pass_name(replayed[k].pass)))
                            row = &rows[i];
                    double pred = row && row->predicted_s >= 0 ? row->predicted_s : 0.0;
                    double in_step = row ? row->measured_s : 0.0, rep = replayed[k].seconds;
                    printf("%-28s %-5s %12.4f %12.4f %12.4f %+9.1f%% %+9.1f%%\n", replayed[k].name,
                           pass_name(replayed[k].pass), pred * 1e3, in_step * 1e3, rep * 1e3,
                           pred > 0 && rep > 0 ? 100.0 * (pred / rep - 1.0) : 0.0,
                           in_step > 0 && rep > 0 ? 100.0 * (in_step / rep - 1.0) : 0.0);
                }
            }
            fflush(stdout);
        }
        barrier(&g);
    }
    /* the CSV: every rank's rows, rank after rank, into one file renamed when complete */
    int write_failed = 0;
    if (o->csv) {
        /* the temporary file is named by rank 0's pid, which every rank learns from the sum */
        long tag = (long)world_sum(&g, rank == 0 ? (double)getpid() : 0.0);
        outfile out = {0};
        char csv_err[PATH_MAX + 256];
        for (int r = 0; r < nranks; r++) {
            if (r == rank) {
                if (outfile_open_shared(&out, o->csv, tag, r == 0, csv_err, sizeof csv_err) != 0) {
                    fprintf(stderr, "sextant-gpu train: rank %d: --csv: %s\n", rank, csv_err);
                    write_failed = 1;
                } else {
                    if (r == 0) fputs(csv_header, out.f);
                    csv_rows(out.f, &info, rows, nrows, o->calibrated);
                    if (nrows_uncal) csv_rows(out.f, &info, rows_uncal, nrows_uncal, 0);
                    /* rank 0 keeps its file open to commit or remove it once every rank has written */
                    if (r == 0) write_failed |= fflush(out.f) != 0;
                    else write_failed |= outfile_close(&out) != 0;
                }
            }
            barrier(&g);
        }
        write_failed = world_sum(&g, write_failed) > 0;
        if (rank == 0 && out.f) {
            if (write_failed) outfile_abort(&out);
            else if (outfile_commit(&out, csv_err, sizeof csv_err) != 0) {
                fprintf(stderr, "sextant-gpu train: --csv: %s\n", csv_err);
                write_failed = 1;
            }
        }
        if (rank == 0 && write_failed) fprintf(stderr, "sextant-gpu train: --csv %s: write failed, nothing written\n", o->csv);
    }
    if (rank == 0) {
        report_row *step = &rows[nrows - 1];
        step->measured_s = slowest;
        step->measured_bytes = peak;
        if (o->json) write_failed |= write_json(o->json, &info, rows, nrows, all, nranks);
        if (o->plot) write_failed |= write_plot(o->plot, &info, rows, nrows);
        if (bias_fallbacks) printf("note: %d bias GEMMs ran outside the epilogue (cuBLASLt offered no algorithm)\n", bias_fallbacks);
    }
    free(rows);
    free(rows_uncal);
    free(all);
    int ok = !loss_trend_fails(&trend);

    /* free what this rank allocated */
    for (int i = 0; i < profile_events_made; i++) CK(cudaEventDestroy(profile_events[i]));
    free(profile_events);
    free(profile_tags);
    free(global_in); free(global_tg); free(host_loss); free(step_s); free(step_losses);
    CK(cudaEventDestroy(t0));
    CK(cudaEventDestroy(t1));
    gpt_free(&g, nptrs, blas_workspace);
    if (write_failed) return 2;
    return ok ? 0 : 1;
}
