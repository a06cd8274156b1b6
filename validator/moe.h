/* A mixture-of-experts layer with expert parallelism in the training step
 * (validator/moe.c): the router (fp32 logits), top-k with softmax gates, the
 * token dispatch and combine as grouped NCCL send/recv over the EP group, the
 * local experts' GEMMs through cuBLAS, and the backward the same way in reverse.
 *
 * The layer replaces the dense MLP between train.c's mlp_norm and mlp_residual:
 * moe_forward reads the norm's output and writes the branch the residual adds;
 * moe_backward reads the branch's gradient and writes the norm output's.  The
 * router and the experts are this file's own parameters, gradients and AdamW
 * state: the routers reduced over DP, the experts over DP / EP (Megatron's
 * expert-data-parallel group), in moe_step before the optimizer. */
#ifndef SEXTANT_MOE_H
#define SEXTANT_MOE_H

/* cublasLt.h declares one function without a prototype */
#pragma GCC diagnostic push
#pragma GCC diagnostic ignored "-Wstrict-prototypes"
#include <cublasLt.h>
#pragma GCC diagnostic pop
#include <cublas_v2.h>
#include <nccl.h>
#include <stddef.h>
#include <stdint.h>

#include "kernels.h"
#include "moe_plan.h"
#include "schedule.h"
#include "zero.h"

/* what moe.c borrows from train.c */
typedef struct {
    void (*mark)(const char *name, int end);                            /* profiling, in the pass running */
    void (*mark_on)(const char *name, int end, cudaStream_t on);       /* the same on another stream */
    float (*init)(int which, int layer, uint64_t index, float stddev);  /* a weight's initial value */
    uint16_t (*to_bf16)(float f);
    int init_which;   /* the first tensor number free for init: router, experts' up, experts' down */
} moe_hooks;

typedef struct {
    int E, k, C, F, N;      /* experts, picks a token, this rank's share of an expert's FFN width (SwiGLU),
                               tokens a micro-batch on this rank (with TP its sequence-parallel share) */
    int L, Lmodel, layer0;  /* MoE layers on this rank, in the model, the first one's index */
    int ep, ep_rank, dp;    /* EP group inside DP: experts over dp / ep ranks each */
    int tp, tp_rank, Fm;    /* expert TP = TP (with SP, EP 1): every expert's width Fm over tp ranks, F = Fm / tp;
                               the routed rows gathered over the TP group and their partial sums sent back */
    int cp;                 /* context parallelism: the micro-batch's sequence over cp ranks (dp counts DP x CP, the
                               gradients' group, and EP is carved from it, as Megatron's) */
    int dp_rank;            /* this rank's place in the gradients' group (DP x CP) */
    int zero;               /* the layout's ZeRO stage where the data-parallel group shards (--dp above 1), else 0 */
    const int *model_layer; /* the model's index of each of the L layers (interleaving reorders them); read by moe_init */
    const pipe_action *schedule;   /* the step's actions, and layers a chunk and chunks on this stage: ZeRO-3's */
    int nschedule, Lc, vpp;        /* order of the experts' gathers (zero_plan.h) */
    int my_rank;
    double dloss;           /* the loss's gradient per token (1 / global tokens), scales the auxiliary loss */
    cublasHandle_t blas;
    cudaStream_t stream;
    ncclComm_t ep_comm, dp_comm, edp_comm, tp_comm, cp_comm;   /* NULL where the group has one rank */
    moe_hooks hooks;
    zero_mark_fn zero_mark;   /* the profile's mark in a given pass on a given stream (zero.c's, and the gathers' waits) */
    cudaStream_t comm;        /* the data-parallel reductions' stream */
} moe_config;

/* one forward's routing, kept for its backward */
typedef struct {
    const void *key;          /* the layer's saved block */
    moe_exchange x;
    sx_bf16 *xe, *h, *act;    /* the experts' input, up output and gate-weighted activation: x.rows_in rows,
                                 stream-ordered */
    float *gates;             /* their gates, SX_MOE_GATE_ROW floats a row */
} moe_call;

#define MOE_CALLS_MAX 512
enum { MOE_POOL_KEPT, MOE_POOL_SCRATCH, MOE_POOLS };   /* moe_state.pools */

/* Streams the experts' GEMMs of one loop share, expert e on stream e mod MOE_STREAMS, so that experts
 * whose GEMMs fill less than the GPU run side by side: Transformer Engine's grouped GEMM issues its
 * GEMMs over 4 compute streams (transformer_engine/common/util/multi_stream.cpp), as the grouped_gemm
 * package's cuBLAS path does (NUM_STREAM 4). */
#define MOE_STREAMS 4

/* An expert GEMM takes the cuBLASLt algorithm of its 16-row bucket (moe.c, algo_for): rows r in (16(b-1), 16b], the
 * heuristic asked before the first step at 16b, the bucket's most rows.  On Hopper the heuristic fits the tile's
 * width to the rows (211 rows: one 128 x 216 tile; 233: two 256 x 120 ones), so an algorithm chosen for a bucket's
 * top covers every row count of the bucket with at most 15 rows to spare, and a row count that is a multiple of 16
 * gets its own choice.  The 128-row buckets asked at their middle this replaced (for GEMMs under 64 GFLOP) ran
 * Mixtral 8x7B's experts at 256 rows 1.2-1.7x slower than the heuristic's choice for each exact shape: at 211 rows
 * an algorithm chosen for 320 took two 192-wide tiles and split K (one H200, dev/cuda/expert_grouped versions 7
 * and 8, docs/validation/2026-11-28-expert-algos).  Asking the heuristic for each exact shape in the step costs
 * 186 us of host time a query, the GPU waiting (archive/2026-11-26-h100-expert-rows); through cublasGemmEx, which
 * asks again for nearly every new row count, 121-258 us a call on Mixtral (docs/validation/2026-11-27-expert-rows-
 * load).  SEXTANT_MOE_LARGE=ex sends the GEMMs of MOE_EXACT_GEMM_FLOPS or more through cublasGemmEx. */
#define MOE_EXACT_GEMM_FLOPS 64e9
#define MOE_ALGO_BUCKET 16

/* an expert GEMM's cuBLASLt algorithm, kept for every shape of its bucket (moe.c) */
typedef struct {
    int used, ta, tb, mb, nb, kb, lda, ldb, ldc, usable;
    cublasLtMatmulAlgo_t algo;
} moe_algo;
#define MOE_ALGOS_MAX 8192    /* Mixtral's six GEMMs at EP 2: 3000 16-row buckets up to 8192 rows */
#define MOE_ALGO_SLOTS 16384  /* the open-addressed table's size: at most half full */

typedef struct {
    moe_config c;
    int El, up, edp;
    int groups;                         /* the ranks whose counts a call gathers: ep, or tp */
    float aux_scale;
    sx_bf16 *params, *grads;
    float *master, *m, *v;
    moe_shards sh;                      /* what of [routers][experts] this rank keeps (moe_plan.h) */
    zero_state ez;                      /* the experts' ZeRO-2/3 over the expert-data-parallel group (sh.experts_zero) */
    zero_bucket *ebuckets;              /* one a layer: its experts */
    size_t zero_bytes;                  /* ez's buffers */
    cudaEvent_t updated, router_ready, *experts_ready;   /* ZeRO-1/2: the step's optimizer, the gathers after it */
    unsigned char *gather_pending;      /* one a layer: the forward has not yet waited for its gather this step */
    int router_pending;
    sx_bf16 *xs, *dlogits;              /* scratch: N k rows of C (the dispatch's sorted rows, then the experts'
                                           outputs back in that order; the combine's gradient); N rows of E */
    float *dgate;                       /* N k */
    int32_t *host_counts;               /* pinned, ep x E */
    cudaEvent_t counted;
    cudaMemPool_t pools[MOE_POOLS];     /* the data-dependent rows: MOE_POOL_KEPT, MOE_POOL_SCRATCH */
    moe_call calls[MOE_CALLS_MAX];
    double imbalance_sum, imbalance_max;
    long imbalance_calls;
    /* the spread of rows over this rank's experts, every call: the busiest expert's rows over the mean, the
     * coefficient of variation, the mean rows, the share of experts given no rows, whose GEMMs are not launched
     * (sums over imbalance_calls) */
    double expert_busiest_sum, expert_cv_sum, expert_rows_sum, expert_empty_sum;
    cublasLtHandle_t lt;
    /* the experts' GEMMs of one loop run over MOE_STREAMS streams, forked from and joined to the step's */
    cudaStream_t gemm_streams[MOE_STREAMS];
    cudaEvent_t gemm_fork, gemm_joined[MOE_STREAMS];
    void *lt_workspace[MOE_STREAMS];      /* one a stream: GEMMs that run at once take one each */
    cublasLtMatmulDesc_t lt_desc[2][2];   /* [transa][transb] */
    cublasLtMatmulPreference_t lt_pref;
    cublasLtMatrixLayout_t lt_layout[3];  /* A, B, C: reshaped for each call (cheaper than made anew) */
    moe_algo *algos;                    /* MOE_ALGO_SLOTS, hashed by shape bucket */
    int nalgos;
    long heuristics, fallbacks;         /* heuristic queries, GEMMs that fell back to cublasGemmEx */
    long prewarmed;                     /* of the queries, those moe_init made before the first step */
    double prewarm_s;                   /* and the host's seconds they took */
    long gemm_calls;                    /* expert GEMMs issued, and the host's seconds issuing them */
    long exact_calls;                   /* of them, of MOE_EXACT_GEMM_FLOPS or more (SEXTANT_MOE_LARGE=ex's) */
    double gemm_host_s;
    long fwd_gemm_calls;                /* of them, the forward's (and recomputation's), issued after the routing sync
                                           with the GPU's queue empty, and their host seconds: the issue the planner's
                                           floor prices (gemm_issue_us), where the backward's calls can also wait on a
                                           full launch queue */
    double fwd_gemm_host_s;
    size_t connect_bytes;               /* device memory the EP and expert-DP groups' first use took (NCCL's buffers) */
    size_t connect_ep_bytes, connect_edp_bytes;   /* of it, each group's */
    int gemm_ex;                        /* SEXTANT_MOE_GEMM=ex: every expert GEMM through cublasGemmEx (the first way) */
    int large_ex;                       /* SEXTANT_MOE_LARGE=ex: those of MOE_EXACT_GEMM_FLOPS or more through it */
    int lanes;                          /* SEXTANT_MOE_STREAMS: the streams expert e takes in turn, e mod lanes */
    int32_t *balanced_idx;              /* SEXTANT_MOE_ROUTE=balanced: slot s's expert s mod E, else NULL */
    int32_t *random_idx;                /* SEXTANT_MOE_ROUTE=random: L x N x k experts drawn at random, else NULL */
    size_t bytes;                       /* device memory allocated at set-up */
    /* the step's gradient reductions issued beside the backward (moe_grads_ready), a layer at a time */
    cudaEvent_t *grads_written;         /* one a layer: its last backward done on the step's stream */
    unsigned char *reduced;             /* one a layer: its reductions issued this step */
} moe_state;

/* The bytes of one layer's saved block (train.c's layer activations hold one). */
size_t moe_saved_bytes(int N, int E, int k, int groups);

/* Allocates, fills the initial weights (the same values whatever ep), and opens the EP
 * group's connections.  Exits after one stderr line on a CUDA, cuBLAS or NCCL error. */
/* Whether SEXTANT_MOE_ROUTE=balanced deals every expert the same rows (docs/guide.md, the environment): the planner
 * then prices the run's experts with even rows (--expert-rows even). */
int moe_route_balanced(void);
/* SEXTANT_MOE_ROUTE's value: router (the default), random or balanced */
const char *moe_route_name(void);

void moe_init(moe_state *st, const moe_config *c);
/* keep = 0: a forward whose backward recomputes it (full recomputation): its routed rows go back to the pool at its
 * end, as a checkpointed forward keeps nothing but the layer's input */
void moe_forward(moe_state *st, void *saved, const sx_bf16 *xn, sx_bf16 *out, int layer, int keep);
void moe_backward(moe_state *st, void *saved, const sx_bf16 *xn, const sx_bf16 *dout, sx_bf16 *dxn, int layer);
void moe_zero_grads(moe_state *st);
/* Once the step's last backward through layer l has written its gradients: the router's reduced over DP and the
 * experts' over the expert-data-parallel group on `comm`, beside the backward of the layers before it, as
 * Megatron's overlapped reduction does with the experts' gradients in its buckets.  The caller has the step
 * wait for `comm` before moe_step (train.c's optimizer step does). */
int moe_grads_ready(moe_state *st, int l, cudaStream_t comm);   /* 1: issued on comm; 0: nothing to reduce */
/* the gradients' reductions moe_grads_ready did not issue, and AdamW, after the step's backward; with ZeRO-1/2 the
 * sharded parameters then gathered on the comm stream, each layer's waited for by its first forward (moe_params_take) */
void moe_step(moe_state *st, const sx_adamw_params *hp);

/* ZeRO over the MoE layers (moe_plan.h's moe_shards), called where the step calls zero.c for the dense layers:
 * the step begins (ZeRO-3: the first gather once `optimizer_done` is reached); layer l's parameters are about to be
 * read (backward 1 in a backward or its recomputation: ZeRO-3's gather; ZeRO-1/2 the first forward of the step waits
 * for the layer's gather); the backward is about to write layer l's gradients, and has (ZeRO-2/3: the experts'
 * gradient buffer, then its reduce-scatter; moe_grads_give returns 1 when it issued one); the held-back
 * reduce-scatters out before the step waits for its reductions. */
void moe_step_begin(moe_state *st, cudaEvent_t optimizer_done);
void moe_params_take(moe_state *st, int l, int backward);
void moe_grads_take(moe_state *st, int l);
int moe_grads_give(moe_state *st);
void moe_grads_flush(moe_state *st);
void moe_free(moe_state *st);
/* The most a stream-ordered pool of the data-dependent rows (MOE_POOL_KEPT or MOE_POOL_SCRATCH) reserved from the
 * driver, and the most its live allocations held at once (bytes), for the report: the difference is the pool's
 * fragmentation. */
size_t moe_pool_high_bytes(const moe_state *st, int pool);
size_t moe_pool_used_high_bytes(const moe_state *st, int pool);

#endif
