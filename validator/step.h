/* The training step's internals, shared by the files it is cut into (validator/train.c and
 * step_*.c, linear.c, train_check.c, gradient_check.c): the shapes one rank holds, the layouts of
 * its buffers, the model on this rank (gpt), the profiling marks, and each file's functions.  Not
 * for code outside the step: train.h is the step's contract. */
#ifndef SEXTANT_STEP_H
#define SEXTANT_STEP_H

#include <nccl.h>
#include <stddef.h>
#include <stdint.h>

#include "cp.h"
#include "fp8.h"
#include "gpu_check.h"
#include "gpu_context.h"
#include "gpu_timing.h"
#include "kernels.h"
#include "launch.h"
#include "loss_trend.h"
#include "model_ref.h"
#include "moe.h"
#include "outfile.h"
#include "planner.h"
#include "plot.h"
#include "power.h"
#include "reference.h"
#include "schedule.h"
#include "train.h"
#include "zero.h"

typedef sx_bf16 bf16;

/* Tensors a family lacks have size 0: LLaMA has no position table, no biases
 * and no norm biases; a tied model has no separate head, except on the last
 * stage of a pipeline whose first stage holds the table. */
enum { P_WTE, P_WPE, P_LN1W, P_LN1B, P_QKVW, P_QKVB, P_ATTW, P_ATTB, P_LN2W, P_LN2B, P_FCW, P_FCB, P_PROJW, P_PROJB,
       P_LNFW, P_LNFB, P_HEAD, P_COUNT };

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

#define PROFILE_MAX 32768

/* side: 1 when not on the step's stream; host_*_s: launch_clock_s() when the host began and ended issuing the call */
typedef struct { const char *name; pass_t pass; int side; double host_begin_s, host_end_s; } profile_tag;

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

/* Brackets one op with events when profiling; otherwise runs it bare. */
#define OP(name, stmt) do { profile_mark(name, 0); stmt; profile_mark(name, 1); } while (0)

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
    /* device memory each split took (the order of split_communicators: tp, dp, pp, tied, cp, ep, edp): the report's
     * NCCL line */
    size_t split_bytes[7];
    size_t use_bytes[7];         /* each group's first use (comm_warmup; the EP groups' in moe_init), split_bytes' order */
    size_t world_use_bytes;      /* the world communicator's first collective (comm_warmup) */
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

typedef struct {
    const char *name;
    pass_t pass;
    double seconds;
    int calls;
    double fastest;
} measured_op;

#define MEASURED_MAX 128

typedef struct {
    const measured_op *ops;
    int nops;
    double p2p_fastest, p2p_total, dp_exposed, median, device_used;
    double p2p_wait;   /* interleaved: the compute stream's waits for transfers; < 0 with one stream */
} measured_step;

/* ---- train.c ---- */

void *host_alloc(size_t bytes);

/* ---- step_layout.c ---- */

void param_shapes(const shapes *s, param_layout *p);
size_t layout_layer(layer_acts *a, char *base, const shapes *s);
size_t layout_head(slot_acts *a, char *base, const shapes *s);
size_t layout_slot(slot_acts *a, char *base, const shapes *s);
size_t layout_scratch(scratch_buffers *g, char *base, const shapes *s, int microbatches);

/* ---- step_profile.c ---- */

extern int profiling;
extern int profile_count;
extern pass_t current_pass;
extern cudaEvent_t *profile_events;
extern int profile_events_made;
extern profile_tag *profile_tags;
extern double profile_host_t0_s;   /* launch_clock_s() when the profiling step's first event was issued */
extern const char *clock_probe_ops;
extern float *clock_probe_mhz;
extern int replay_runs;
extern int replaying;
extern int replay_count;
extern cudaEvent_t *replay_events;
extern int replay_events_made;
extern profile_tag *replay_tags;
extern void *replay_dw, *replay_dbias;
extern size_t replay_dw_bytes, replay_dbias_bytes;
void profile_mark_on(const char *name, int end, cudaStream_t on);
int env_int_in(const char *name, int lo, int hi, int unset);
void replay_mark(const char *name, int end);
int replay_reserve(void **buf, size_t *have, size_t bytes);
void replay_free(void);

/* ---- linear.c ---- */

extern int train_fp8;
extern int bias_fallbacks;
extern int bias_accumulate;
void lt_free(void);
void linear_forward(const char *name, bf16 *y, const bf16 *x, const bf16 *w, const bf16 *bias, const bf16 *ones, int N,
                    int in, int out);
void linear_backward(const char *dgrad, const char *wgrad, bf16 *dx, bf16 *dw, bf16 *dbias, const bf16 *dy,
                     const bf16 *x, const bf16 *w, const bf16 *ones, int N, int in, int out);
void attention_pointers(attention_ptrs *ap, const bf16 *qkv, const bf16 *att, const bf16 *out, const bf16 *dqkv,
                        const bf16 *datt, const bf16 *dout, const shapes *s);
void attention_forward(const attention_ptrs *ap, bf16 *att, const bf16 *scores, const shapes *s);
void attention_backward(const attention_ptrs *ap, bf16 *att, bf16 *datt, const shapes *s);

/* ---- step_model.c ---- */

size_t param_offset(const gpt *g, int which, int layer);
bf16 *param(const gpt *g, bf16 *base, int which, int layer);
int bucket_index(const gpt *g, int kind);
void *device_alloc(gpt *g, size_t bytes);
float initial_value(int which, int layer, uint64_t index, float stddev);
/* The model's index of this stage's layer l: chunk c of stage s is virtual stage c pp + s, whose Lc layers follow the
 * previous virtual stage's. */
int model_layer_of(const shapes *s, int l);
void gpt_init(gpt *g);
void make_batch(int32_t *inputs, int32_t *targets, size_t n, int V, unsigned long long *state);

/* ---- step_comm.c ---- */

extern double *world_scratch;
void tp_allreduce(gpt *g, const char *name, bf16 *buf, size_t count);
void tp_allgather(gpt *g, const char *name, bf16 *full, const bf16 *local, size_t local_count);
void tp_reduce_scatter(gpt *g, const char *name, bf16 *local, const bf16 *full, size_t local_count);
void pp_exchange(gpt *g, const pipe_transfer *t, int next, int prev, size_t count, cudaStream_t on);
void tp_allreduce_norm_grads(gpt *g, int layer, int final);
void bucket_ready(gpt *g, int kind);
void step_wait(const char *name, cudaEvent_t event);
void wait_params(gpt *g, int kind);
void zero_mark(const char *name, int end, cudaStream_t on, pass_t pass);
void zero3_params(gpt *g, int kind);
void zero_grads_take(gpt *g, int kind);
void zero_grads_give(gpt *g, int layer, int final);
void host_wait(gpt *g, cudaEvent_t ev, const char *what);
void sync_stream(gpt *g, cudaStream_t on, const char *what);
void sync_all(gpt *g, const char *what);
void sync_compute(gpt *g, const char *what);
/* cudaMemGetInfo's free device bytes */
size_t device_free_bytes(void);
void comm_warmup(gpt *g);
double world_sum(gpt *g, double x);

/* ---- step_pass.c ---- */

layer_acts layer_at(const gpt *g, int slot, int l);
void stage_forward(gpt *g, const pipe_action *act);
void stage_backward(gpt *g, const pipe_action *act);

/* ---- step_schedule.c ---- */

void run_schedule(gpt *g);
void run_schedule_async(gpt *g);
void load_batch(gpt *g, const train_options *o, unsigned long long *state, int32_t *global_in, int32_t *global_tg);
void one_step(gpt *g, int step);
double step_loss(gpt *g, const train_options *o, float *host_loss);

/* ---- step_report.c ---- */

extern const char csv_header[];
void csv_rows(FILE *f, const report_info *in, const report_row *rows, int n, int calibrated);
int write_json(const char *path, const report_info *in, const report_row *rows, int n, const double *ranks, int nranks);
int write_plot(const char *path, const report_info *in, const report_row *rows, int n);
const stage_ops *stage_list(const estimate_t *e, const shapes *s);
double measured_of(const measured_op *ms, int n, const char *name, pass_t pass, int *calls, double *fastest);
double zero_exposed(const measured_op *ms, int n);
int op_rows(const estimate_t *e, const gpt *g, const measured_step *ms, report_row *rows, double *pp_transfer_out,
            double *bubble_out);

/* ---- gradient_check.c ---- */

int check_gradients(gpt *g, const train_options *o, const model_t *m);

/* ---- small helpers of several files ---- */

static inline int is_layer_param(int p) { return p >= P_LN1W && p <= P_PROJB; }

static inline void profile_mark(const char *name, int end) { profile_mark_on(name, end, gpu_ctx.stream); }

static inline int replay_wanted(void) { return replaying && replay_count < PROFILE_MAX; }

static inline int spg(const shapes *s) { return s->sp && s->tp > 1; }

/* The table the head multiplies with: its own, or the embedding's when tied on one stage. */
static inline int head_tensor(const shapes *s) { return s->tied && !s->head_copy ? P_WTE : P_HEAD; }

/* and the bucket it lies in */
static inline int head_bucket(const shapes *s) { return s->tied && !s->head_copy ? B_EMBED : s->head_copy ? B_HEAD : B_FINAL; }

static inline void barrier(gpt *g) { (void)world_sum(g, 0.0); }

#endif
