/* planner: the analytical model.  One op list per pipeline stage and
 * micro-batch, built from (model, layout), costed against the hardware
 * database; every formula is one function below, derived in docs/model.md.
 *
 * Units: SI throughout (bytes, seconds, FLOP, FLOP/s, US dollars). */
#ifndef SEXTANT_PLANNER_H
#define SEXTANT_PLANNER_H

#include <stdint.h>
#include <stdio.h>

#include "hwdb.h"
#include "models.h"

#define SEXTANT_VERSION "0.1.0"

typedef enum { RECOMPUTE_NONE = 0, RECOMPUTE_SELECTIVE, RECOMPUTE_FULL } recompute_t;
/* The attention kernel: the frameworks' fused kernel, FlashAttention-2 or later and cuDNN (flash); the
 * materialised s x s scores (unfused); the first generation of fused kernels, what frameworks ran before
 * FlashAttention-2 of July 2023 (flash1: FlashAttention-1's CUDA kernels, as xformers ran them; flash1-triton:
 * its Triton port, MosaicML's MPT); or sextant-gpu's own fused kernel, as calibrate measured it (sextant).  The
 * fused ones share the work and the memory and differ in speed (docs/model.md, "Attention kernel generations"). */
typedef enum {
    ATTENTION_FLASH = 0,
    ATTENTION_UNFUSED,
    ATTENTION_FLASH1,
    ATTENTION_SEXTANT,
    ATTENTION_FLASH1_TRITON,
    ATTENTION_COUNT
} attention_impl_t;
/* How context parallelism exchanges K and V (docs/model.md, "Context parallelism"): Megatron's ring of
 * send/recv overlapped with attention, or Llama 3's all-gather before it. */
typedef enum { CP_COMM_RING = 0, CP_COMM_ALLGATHER } cp_comm_t;
/* The loss kernel (docs/model.md, "The loss"): one fused pass in the activation precision that writes the
 * gradient in place (llm.c, sextant's trainer, Megatron with its cross-entropy fusion); the frameworks'
 * default, the logits cast to fp32 and the log-softmax materialised (PyTorch's cross_entropy on .float()
 * logits); or a fused kernel that writes the gradient to a new buffer in the backward (flash-attn's
 * cross-entropy, llm-foundry's default). */
typedef enum { LOSS_FUSED = 0, LOSS_FP32, LOSS_FUSED_OUTPLACE } loss_kernel_t;
/* Tensor-parallel communication beside the GEMMs (docs/model.md, "Overlap"): none, as sextant's trainer
 * runs it; or Megatron's backward overlap (its default since 2022): the all-gather of a column-parallel
 * layer's input runs beside the input-gradient GEMM and the reduce-scatter (all-reduce without sequence
 * parallelism) of that input gradient beside the weight-gradient GEMM. */
typedef enum { TP_OVERLAP_NONE = 0, TP_OVERLAP_BACKWARD } tp_overlap_t;
/* When the data-parallel gradient reduction and parameter gather run (docs/model.md, "Overlap"): beside
 * the last micro-batch's backward and the next step's first forward (Megatron's --overlap-grad-reduce and
 * --overlap-param-gather, sextant's trainer), or after the pipeline has drained, exposed (DeepSpeed's
 * engine: its pipeline schedule reduces the tied and then the other gradients after the last backward). */
typedef enum { GRAD_SYNC_OVERLAP = 0, GRAD_SYNC_AFTER } grad_sync_t;
/* How a step's micro-batches add up their gradients (docs/model.md, "Gradient accumulation"): in place, the
 * weight-gradient GEMMs adding into the gradient buffer (Megatron's gradient-accumulation fusion, sextant's
 * trainer); or DeepSpeed's BF16 optimizer (its bf16 runs with ZeRO 0 or 1): after every micro-batch's
 * backward the 16-bit gradients are added into an fp32 copy in separate memory passes, the fp32 copy is
 * all-reduced over DP at the step and, with ZeRO 1, the updated 16-bit weights all-gathered. */
typedef enum { GRAD_ACCUM_IN_PLACE = 0, GRAD_ACCUM_FP32_COPY } grad_accum_t;
/* How a MoE layer's expert GEMMs are launched (docs/model.md, "Mixture of experts"): one cuBLAS GEMM per
 * expert, over a few streams (Transformer Engine's GroupedLinear, Megatron-Core's and NeMo's --moe-grouped-gemm
 * with TE; sextant's trainer), each GEMM in its own waves with its own split-K and fixed cost; or one
 * grouped kernel whose tiles of every expert share the waves (DeepSeek's DeepGEMM, CUTLASS grouped GEMMs,
 * torch._grouped_mm). */
typedef enum { EXPERT_GEMM_STREAMS = 0, EXPERT_GEMM_GROUPED } expert_gemm_t;
/* how the rows fall on a MoE layer's experts: as a router deals them, each expert its own count (default), or every
 * expert the same (padded to a capacity, or dealt evenly): docs/model.md, "Mixture of experts" */
typedef enum { EXPERT_ROWS_ROUTED = 0, EXPERT_ROWS_EVEN } expert_rows_t;
/* Where ZeRO-2/3's per-micro-batch collectives wait (docs/model.md, "ZeRO-3 and FSDP"): each micro-batch's first
 * gather and last reduce-scatter at its forward's start and backward's end (FSDP, DeepSpeed), or only the step's first
 * and last, the neighbouring micro-batch hiding the others (sextant's training step). */
typedef enum { ZERO_WAITS_MICROBATCH = 0, ZERO_WAITS_STEP } zero_waits_t;
/* Megatron-Core's --recompute-modules beside selective recomputation (docs/model.md, "Recomputed
 * modules"): outputs dropped after the forward and recomputed in the backward, a bit each. */
enum {
    RECOMPUTE_MODULE_LAYERNORM = 1u,   /* the norms before the attention and the FFN (their consumers' inputs) */
    RECOMPUTE_MODULE_MLA_UP_PROJ = 2u, /* MLA's up-projections and rotary embedding (the attention's Q, K, V) */
    RECOMPUTE_MODULE_MOE_ACT = 4u,     /* the routed experts' activation (the down-projection's input) */
    RECOMPUTE_MODULES_ALL = 7u
};

typedef struct {
    int64_t gpus, tp, pp, dp, vpp, mbs, gbs, seq, gpus_per_node;
    int64_t first_stage_layers, last_stage_layers; /* the pipeline's first and last stage's layers (Megatron's
                                                     --decoder-first/last-pipeline-num-layers); 0: pipeline_split's */
    int64_t cp;        /* context parallel degree: each rank holds seq/cp tokens; 0 (a zeroed layout) means 1 */
    int64_t ep;        /* expert parallel degree, inside DP x CP: each rank holds experts/ep; 0 means 1 */
    int64_t etp;       /* expert tensor parallel degree (Megatron's --expert-tensor-parallel-size): each routed
                          expert split over etp ranks; 0 means tp, Megatron's default */
    int ep_overlap;    /* EP all-to-alls overlapped with another micro-batch's compute (docs/model.md) */
    cp_comm_t cp_comm;
    recompute_t recompute;
    loss_kernel_t loss;
    int64_t logit_metrics;     /* training metrics computed on each micro-batch's logits after its backward, each a
                                  forward-only fp32 cross-entropy (Composer's default train metrics: 2); 0: none */
    int64_t recompute_layers;  /* with full recomputation, on this many layers of each stage (Megatron's
                                  --recompute-num-layers, block method), the rest keep their activations; 0: all */
    unsigned recompute_modules; /* with selective recomputation, RECOMPUTE_MODULE_* recomputed as well; 0: none */
    attention_impl_t attention;
    int sp;            /* sequence parallelism (needs tp > 1 to matter) */
    tp_overlap_t tp_overlap;
    grad_sync_t grad_sync;
    grad_accum_t grad_accum;
    expert_gemm_t expert_gemm;
    expert_rows_t expert_rows;
    zero_waits_t zero_waits;
    int zero;          /* 0..3; Megatron's distributed optimizer is zero 1 */
    int fp32_grads;    /* gradients accumulated in fp32: 18 instead of 16 B/param */
    precision_t precision;
} layout_t;

typedef struct {
    double tokens;                 /* training tokens D */
    double price_usd_per_gpu_hour; /* cost of one GPU-hour */
} job_t;

/* ---- the op list ------------------------------------------------------- */

typedef enum { OP_GEMM = 0, OP_ATTENTION, OP_MEMBOUND, OP_COMM } op_kind_t;
typedef enum { PASS_FWD = 0, PASS_BWD, PASS_RECOMPUTE, PASS_STEP } pass_t;
typedef enum { COLL_ALLREDUCE = 0, COLL_REDUCE_SCATTER, COLL_ALLGATHER, COLL_SENDRECV, COLL_ALLTOALL } coll_t;
/* GROUP_DP is the gradient's group: DP x CP ranks (dp_group_size); GROUP_EP the expert-parallel group
 * (ep ranks etp apart, inside TP x CP x DP); GROUP_EDP the experts' gradient group, tp x cp x dp / (etp x ep)
 * ranks; GROUP_ETP the expert tensor-parallel group, etp neighbouring ranks */
typedef enum { GROUP_TP = 0, GROUP_PP, GROUP_DP, GROUP_CP, GROUP_EP, GROUP_EDP, GROUP_ETP } group_t;
/* How a communication op meets the compute timeline (docs/model.md, "Overlap"). */
/* OVERLAP_ATTENTION: one step of context parallelism's KV ring, hidden behind the attention of the block
 * received before it. */
/* OVERLAP_MICROBATCH: an EP all-to-all hidden behind the compute of the micro-batch beside it (Megatron's
 * combined 1F1B, --overlap-moe-expert-parallel-comm; DeepSeek's DualPipe). */
/* OVERLAP_GEMM: a TP collective launched asynchronously beside one GEMM of the backward (op_t.window_op). */
typedef enum { EXPOSED = 0, OVERLAP_BWD, OVERLAP_FWD, OVERLAP_ATTENTION, OVERLAP_MICROBATCH, OVERLAP_GEMM } overlap_t;

typedef struct {
    const char *name;       /* static string, shared with the validator */
    op_kind_t kind;
    pass_t pass;
    int64_t count;          /* instances per micro-batch (PASS_STEP: per step) */
    int64_t m, n, k, batch; /* GEMM: batch x (m x k) * (k x n); attention: batch = b*heads, m=n=s, k=d */
    int64_t kv_batch;       /* attention: b * KV heads (grouped-query attention); else 0 */
    int weight_gradient;    /* GEMM: the backward dW = X^T dY (its operands are both activations) */
    int sixteen_bit;        /* GEMM: stays 16-bit in an fp8 run (Megatron's output layer, the router;
                               docs/model.md, "FP8 GEMMs") */
    int norm_fed;           /* GEMM: its input is a norm's output, which TE's LayerNormLinear writes in FP8
                               itself: only the transposed copy is cast (docs/model.md, "FP8 GEMMs") */
    int bias_gradient;      /* GEMM: a weight gradient whose kernel also reduces the bias gradient in its epilogue, as
                               sextant-gpu's step runs a biased linear (cuBLASLt BGRADB) */
    int optimizer;          /* MEMBOUND: the optimizer step (AdamW: fp32 master, m, v in and out, the gradient in, the
                               weights out), at the GPU's optimizer_membound_efficiency where calibrate measured it
                               (docs/model.md, "The optimizer's bandwidth") */
    int separate_launches;  /* GEMM with batch > 1: each problem of the batch is a launch of its own (one cuBLAS
                               GEMM per expert, EXPERT_GEMM_STREAMS); 0: one launch whose tiles share the waves */
    int routed_rows;        /* GEMM with batch > 1: each expert's rows are its own, as a router deals them (the expected
                               row tiles over the balanced shape's: routed_row_tiles); 0: every expert the same */
    double rows_load;       /* GEMM with batch > 1: the busiest EP rank's routed rows over the balanced expert's, whose
                               shape m (k for a weight gradient) is; the waves' time scales by it, the launches' fixed
                               cost does not (docs/model.md, "Mixture of experts"); 0 or 1: none */
    double accumulate_bytes; /* GEMM: a weight gradient added into the gradient in place (beta = 1), the gradient's
                               element bytes; 0: its output written (docs/model.md, "GEMM time over M, N, K") */
    double flops;           /* executed per instance: what the time is costed on */
    double model_flops;     /* per instance, MFU convention (0 for recomputation and memory-bound ops) */
    double hardware_flops;  /* per instance, HFU convention (model + recomputation) */
    double bytes;           /* device-memory traffic per instance */
    double saved_bytes;     /* activation bytes kept for backward per instance */
    coll_t coll;
    group_t group;
    int64_t group_size;
    double comm_bytes;      /* collective buffer size S per instance */
    int64_t pieces;         /* separate collectives of comm_bytes / pieces each that the op stands for (a layer
                               each for ZeRO-3, a bucket each for the gradients); 0 or 1: one */
    int crosses_node;
    overlap_t overlap;
    int window_op;          /* OVERLAP_GEMM: 1 + the index in the stage's list of the GEMM it runs beside; 0 none */
    double time_s;          /* per instance, filled in by costing */
    double clock_bound_s;   /* of time_s, the seconds that follow the SM clock (docs/model.md, "Clock under
                               the power cap"); 0 without the GPU's power model */
    double energy_j;        /* switching energy per instance at the top clock; 0 without the power model */
    double internode_share; /* all-to-all: the inter-node bytes a node-limited dispatcher sends, as a share of
                               the plain exchange's (0: 1, the plain exchange) */
    int host_sync;          /* 1: the host waits for this op's result before it launches what follows (the MoE
                               dispatcher's counts: their all-gather, or at EP 1 their copy): host_sync_s added to it */
    double host_lead_s;     /* input to op_cost: the seconds of this op's issue the host had done when the GPU started
                               it (cost_stage carries it along the forward after the routing sync; 0 elsewhere) */
} op_t;

/* DeepSeek-V3 with every option reaches about 240 (its MTP module, MLA, dense and MoE layers, full
 * recomputation, TP, SP, CP, ZeRO-3, the all-to-all's chunk sort); a longer list fails the estimate with
 * ESTIMATE_INTERNAL, which plan counts apart (REJECT_INTERNAL) */
#define OPS_MAX 320

typedef struct {
    int64_t stage;          /* pipeline stage index */
    int64_t layers;         /* transformer layers on this GPU (all its virtual chunks) */
    int first, last;        /* holds the embedding / the LM head and loss */
    double params;          /* parameters held by one GPU of the stage, before ZeRO sharding (experts included) */
    double expert_params;   /* of them, the routed experts', sharded over EP and reduced over dp x cp / ep */
    double fp8_weights;     /* of them, the weights of FP8 GEMMs (fp8 runs; 0 otherwise): TE keeps an FP8 copy
                               and its transpose of each, cast once per step (docs/model.md, "FP8 GEMMs") */
    int64_t moe_layers;     /* of its layers, those with routed experts */
    int nops;
    op_t ops[OPS_MAX];
} stage_ops;

/* Builds the op list of one pipeline stage, one micro-batch, one GPU. */
int build_stage_ops(const model_t *m, const layout_t *l, int64_t stage, stage_ops *out);
/* The op list `sextant-gpu calibrate` times a model's linear layers by and `fit-gemm` reads them back by: one
 * GPU, no parallelism, micro-batch 1 of 1024 tokens, bf16, unfused attention.  Its forward GEMMs of batch 1
 * are the linear layers (op name = the linear's); -1 when the op list overflows. */
int build_calibration_ops(const model_t *m, stage_ops *out);
/* Whether the linear layer named `linear` adds a bias: every one but the LM head's, in a model with biases. */
int linear_has_bias(const model_t *m, const char *linear);
/* The vocabulary rounded up to a multiple of 128 x TP, as Megatron pads it. */
int64_t padded_vocab(const model_t *m, int64_t tp);
/* How the pipeline splits the model's layers (docs/model.md, "Uneven pipeline stages"): the layers on the
 * first stage, on each middle stage (stages 1 .. p-2, all alike) and on the last.  With one stage all three
 * are L.  Counts that do not add up are pipeline_split_check's to refuse. */
void pipeline_split(const model_t *m, const layout_t *l, int64_t *first, int64_t *middle, int64_t *last);
/* 0, or -1 with one line naming the flag when the split leaves a stage empty or does not add up. */
int pipeline_split_check(const model_t *m, const layout_t *l, char *err, size_t errlen);
/* Layers held by stage `stage`, and the index of its first layer, as pipeline_split places them in order. */
int64_t layers_on_stage(const model_t *m, const layout_t *l, int64_t stage);
int64_t first_layer_on_stage(const model_t *m, const layout_t *l, int64_t stage);
/* Whether every stage holds the same layers (L/p each). */
int pipeline_split_is_even(const model_t *m, const layout_t *l);
/* Whether the middle stages hold other layers than the first (their count, or their MoE layers'): when they
 * do not, the estimate lets the first stage, with the embedding and the most micro-batches in flight, stand
 * for them (an upper bound on their memory, their time within the embedding's lookup and one send/recv). */
int pipeline_middle_is_distinct(const model_t *m, const layout_t *l);

/* Whether the model's attention is causal (every family but BERT's). */
int model_is_causal(const model_t *m);

/* KV heads one GPU holds at TP degree tp (replicated when tp exceeds them). */
double local_kv_heads(const model_t *m, int64_t tp);
/* The context parallel degree, 1 for a zeroed layout's 0. */
int64_t layout_cp(const layout_t *l);
/* Bytes of one weight or activation element: 4 in fp32 and tf32, else 2 (FP8 training keeps
 * 16-bit weights and activations; only its GEMM operands are cast). */
double element_bytes(precision_t p);
/* Bytes of one gradient element as the step reduces it: 4 with --fp32-grads or DeepSpeed's fp32 copy
 * (--grad-accum fp32-copy), else the element's. */
double gradient_bytes(const layout_t *l);
double accumulated_gradient_bytes(const layout_t *l);
/* Bytes a parameter's gradients hold, unsharded: the reduced element, and with the fp32 copy the 16-bit
 * gradient the backward writes as well. */
double gradient_memory_bytes(const layout_t *l);
/* The ranks a gradient is reduced over (and ZeRO shards over): DP x CP. */
int64_t dp_group_size(const layout_t *l);
/* The expert parallel degree, 1 for a zeroed layout's 0. */
int64_t layout_ep(const layout_t *l);
/* The expert tensor parallel degree: tp for a layout's 0 (Megatron's default). */
int64_t layout_etp(const layout_t *l);
/* The ranks an expert's gradient is reduced over: tp x cp x dp / (etp x ep) (Megatron's expert-data-parallel
 * group; dp x cp / ep when etp is tp). */
int64_t expert_dp_group_size(const layout_t *l);
/* MoE layers a stage is costed with: the first and the last their own, a middle one the most any middle
 * stage holds. */
int64_t moe_layers_on_stage(const model_t *m, const layout_t *l, int64_t stage);
/* The busiest EP rank's routed tokens over the mean: 1 without EP (each rank runs all the experts on its own
 * tokens, nothing to wait for), else the imbalance capped by the capacity factor (moe_load_factor). */
double moe_rank_load(const model_t *m, const layout_t *l);
/* The part of layout_check that expert parallelism adds (errlen 0: no message, err may be NULL). */
int layout_check_ep(const model_t *m, const layout_t *l, char *err, size_t errlen);
/* Tokens of one micro-batch that one rank holds: seq x mbs / cp. */
double rank_tokens(const layout_t *l);
/* Transient memory of context parallelism's KV exchange in one layer (docs/model.md). */
double cp_kv_transient_bytes(const model_t *m, const layout_t *l);
/* The K and V one token keeps per layer: MLA's latent and rotary key, else 2 x KV heads x head size. */
double kv_cache_bytes_per_token(const model_t *m, double elem_bytes);

/* ---- the estimate ------------------------------------------------------ */

#define WARNINGS_MAX 16

typedef struct {
    double weights, gradients, optimizer, activations, logits, other, total, capacity;
    double workspace;         /* the backward's transient gradients, counted inside `other` */
    double routed_grads;      /* of workspace, a MoE layer's routed rows' gradients (moe_routed_grad_bytes) */
    double params;            /* parameters held by this GPU before ZeRO sharding */
    double inflight_microbatches;
    int64_t stage;
} memory_breakdown;

typedef struct {
    const model_t *model;
    const hw_gpu *gpu;
    const hw_node *node;
    layout_t layout;
    job_t job;

    int64_t microbatches;          /* m = gbs / (mbs * dp) */
    memory_breakdown memory;       /* the heaviest stage */
    int fits;

    /* seconds per step */
    double step_s, compute_s, tp_comm_s, pp_comm_s, dp_comm_s, bubble_s, optimizer_s;
    double cp_comm_s;              /* context parallelism's KV exchange, what the attention does not hide */
    double ep_comm_s;              /* expert parallelism's token dispatch and combine (all-to-all), exposed */
    double microbatch_s;           /* slowest stage, forward + backward of one micro-batch */
    double stage_microbatch_s[3];  /* the first, a middle and the last stage's (STAGE_*); equal ones when
                                      the pipeline has no middle stage or no stages */
    int64_t slowest_stage;

    /* FLOPs per step, whole model, global batch */
    double model_flops_per_step, hardware_flops_per_step, six_nd_per_step;
    double attention_flops_per_step, logits_flops_per_step;
    /* The same two counts with a causal model's attention over the full s x s, as Megatron-LM and
     * Narayanan et al.'s formula count it: for numbers published that way.  MFU and HFU divide the
     * counts above, the half a causal model needs (docs/model.md, "Conventions, kept apart"). */
    double model_flops_full_attention_per_step, hardware_flops_full_attention_per_step;
    double params_total, params_active;

    double mfu, hfu, tokens_per_s, tokens_per_s_per_gpu, tflops_per_gpu;
    double steps, time_to_train_s, gpu_hours, cost_usd;

    double tp_ratio, tp_ratio_limit, tp_link_bytes_per_s;
    double bubble_fraction;

    /* the clock under the power cap (docs/model.md); clock_fraction 1 and the rest 0 without the
     * GPU's power model; all 0 when the time was not computed (a cached estimate of a layout that
     * does not fit) */
    double clock_fraction;         /* the step's SM clock / the top clock */
    double step_clock_hz;          /* the step's SM clock */
    double top_clock_power_w;      /* average power the step would draw at the top clock */
    double step_static_w;          /* the static power the step was settled with: the leakiest of its GPUs' (the
                                      chips' spread, power_static_spread_w), the calibrated one's without it */
    double step_power_w;           /* ... at step_clock_hz */
    double clock_bound_top_s;      /* seconds per step at the top clock of the work that follows the clock */
    double clock_bound_s;          /* ... as the step runs it, at step_clock_hz (clock_bound_stretch) */
    double overlap_slowdown_s;     /* of the step, the compute's loss beside overlapped collectives, and */
    double overlap_beside_s;       /* those collectives' seconds (alone) beside it: the clock is settled without either
                                      (overlapped_comm_parts; the slowest stage's, set with the power model) */

    int nwarnings;
    char warnings[WARNINGS_MAX][256];

    stage_ops first_stage, middle_stage, last_stage;  /* costed; the middle is stage 1 (the first again when
                                                        PP is 2 or less), standing for stages 1 .. p-2 */
} estimate_t;

/* The stages an estimate costs, in the order of stage_microbatch_s. */
enum { STAGE_FIRST = 0, STAGE_MIDDLE, STAGE_LAST, STAGE_KINDS };
/* The op list that stands for pipeline stage `stage` of e's layout. */
const stage_ops *estimate_stage_ops(const estimate_t *e, int64_t stage);

/* Whether the GPU runs a fused (FlashAttention-style) kernel: sm80 and newer, not volta or turing
 * (hwdb's arch column; docs/model.md, "Time and cost"). */
int gpu_has_fused_attention(const hw_gpu *gpu);
/* The rate of an uncalibrated GEMM of `flops` FLOPs in precision p (docs/model.md, "FP8 GEMMs"). */
double gemm_flop_per_s(const hw_gpu *gpu, double flops, precision_t p);
/* planner/op_cost.c.  One op's seconds per instance on this GPU, node and layout (a collective's without the
 * step's overlap, which the stage's costing applies); sets op->clock_bound_s and op->energy_j for the power
 * model, and op->crosses_node for a collective. */
double op_cost(op_t *op, const hw_gpu *gpu, const hw_node *node, const layout_t *l);
/* The host's issue that bounds an op (the forward's expert GEMMs launched one an expert, after the routing sync);
 * 0 for any other op. */
double op_host_issue_s(const op_t *op, const hw_gpu *gpu);
/* The bandwidth per direction (bytes/s) and latency (s) of the link a group's traffic crosses, and whether
 * it leaves the node (docs/model.md, "The network at scale"). */
void group_link(const hw_gpu *gpu, const hw_node *node, const layout_t *l, group_t group, double *bw,
                double *latency, int *crosses);
/* Whether the GPU's power model is on: calibrate measured it (docs/model.md, "Clock under the power cap"). */
int power_model_on(const hw_gpu *gpu);
/* How a step's GEMMs follow the clock (docs/model.md, "GEMM time against the clock"): the overlay's
 * clock_time_factor K and clock_time_exponent b, 1 where it gives none (the plain 1 / x). */
double gpu_clock_time_factor(const hw_gpu *gpu);
double gpu_clock_time_exponent(const hw_gpu *gpu);
/* The attention kernel a run on this GPU uses unless told otherwise: flash where it runs, else unfused. */
attention_impl_t default_attention(const hw_gpu *gpu);

/* Checks a layout against the model and GPU count.  Returns -1 with one
 * message naming the flag for input that cannot be estimated. */
int layout_check(const model_t *m, const layout_t *l, char *err, size_t errlen);
/* The part of it that context parallelism adds: the degree, its exchange, the sequence it splits. */
int layout_check_cp(const model_t *m, const layout_t *l, char *err, size_t errlen);
/* What estimate_layout, estimate_layout_fast and estimate_layout_cached return besides 0: -1 for input they
 * cannot estimate (the message names the flag), ESTIMATE_INTERNAL for a failure of their own (an op list past
 * OPS_MAX, the cache out of memory: a bug or the machine, never the layout), with its message. */
#define ESTIMATE_INTERNAL (-2)
/* Costs the layout.  The estimate refers to model, gpu and node: keep them alive. */
int estimate_layout(const model_t *m, const hw_gpu *gpu, const hw_node *node, const layout_t *l,
                    const job_t *job, estimate_t *e, char *err, size_t errlen);

/* The same estimate without composing the warnings' text. */
int estimate_layout_fast(const model_t *m, const hw_gpu *gpu, const hw_node *node, const layout_t *l,
                         const job_t *job, estimate_t *e, char *err, size_t errlen);

/* The search's fast path.  A cache remembers the parts of a stage's cost
 * (its layers' ops, the pipeline's send/recv, the data-parallel reduction and
 * optimizer step), each costed once by the functions behind estimate_layout
 * and reused by every layout that shares that part's inputs.  It is valid
 * while the models, GPUs and nodes it has seen stay unchanged in memory. */
typedef struct estimate_cache estimate_cache;
estimate_cache *estimate_cache_new(void);   /* NULL when out of memory */
void estimate_cache_free(estimate_cache *cache);
/* estimate_layout_fast's numbers, field for field, except that the op lists
 * (first_stage, middle_stage, last_stage) are left untouched.  With skip_time_if_unfit, a
 * layout that does not fit gets its memory and `fits` only: step time,
 * throughput and cost stay zero. */
int estimate_layout_cached(estimate_cache *cache, const model_t *m, const hw_gpu *gpu, const hw_node *node,
                           const layout_t *l, const job_t *job, int skip_time_if_unfit, estimate_t *e, char *err,
                           size_t errlen);

/* ---- formulas (docs/model.md) ----------------------------------------- */

double six_n_d_flops(double params, double tokens);
double narayanan_model_flops(double batch, double seq, double layers, double hidden, double vocab);
double narayanan_full_recompute_flops(double batch, double seq, double layers, double hidden,
                                      double vocab);
double chinchilla_tokens(double params);
/* Korthikanti et al. 2022, Table 2: bytes per layer per micro-batch, 16-bit. */
double korthikanti_activation_bytes_per_layer(double seq, double mbs, double hidden, double heads,
                                              double tp, int sp, recompute_t recompute);
/* Weights, gradients and Adam's state per parameter, unsharded: 2 + gradient_bytes + 12. */
double adam_bytes_per_param(double gradient_bytes);
/* A FlashAttention-style kernel's efficiency at s tokens relative to its prior's, read at 2048 (docs/model.md,
 * "Attention kernel generations"). */
double flash_sequence_factor(double s);
/* DeepSpeed's BF16 optimizer, per parameter and micro-batch: the bytes its gradient accumulation moves
 * (docs/model.md, "Gradient accumulation"), from the 16-bit gradient's element size. */
double fp32_copy_accumulate_bytes_per_param(double grad16_bytes);
/* A GEMM FLOP's energy at a precision: FP8 at energy_16bit x peak_16bit / peak_matrix (docs/model.md, "FP8 GEMMs"). */
double gemm_energy_j_per_flop(double energy_16bit, double peak_16bit, double peak_matrix, int fp8);
/* The mean latency of a ring step over n ranks on `nodes` nodes: the network's for nodes - 1 of the n - 1 steps, the
 * node's for the rest (NCCL's tuning model; docs/model.md, "The network at scale"). */
double ring_step_latency_s(double n, double nodes, double intra_s, double inter_s);
/* FLOPs a step of `tokens` tokens gains when its K and V projections are counted per query head (docs/model.md,
 * "Published runs"); 0 without grouped-query attention. */
double kv_per_head_extra_flops(double tokens, double layers, double hidden, double head_dim, double heads, double kv_heads);
/* Bytes a logit holds beyond its 16-bit value while the loss runs (docs/model.md, "The loss"). */
double loss_held_bytes_per_logit(loss_kernel_t loss, double elem_bytes);
double ring_allreduce_s(double n, double bytes, double bytes_per_s, double latency_s);
double ring_reduce_scatter_s(double n, double bytes, double bytes_per_s, double latency_s);
double ring_allgather_s(double n, double bytes, double bytes_per_s, double latency_s);
double sendrecv_s(double bytes, double bytes_per_s, double latency_s);
double moe_alltoall_bytes(double tokens, double top_k, double hidden, double elem_bytes);
double alltoall_s(double n, double bytes, double bytes_per_s, double latency_s);
double alltoall_pairs_s(double n, double pair_s);
double alltoall_two_level_s(double n, double n_local, double bytes, double bw_intra, double latency_intra,
                            double bw_inter, double latency_inter, double internode_share);
double moe_load_factor(double imbalance, double capacity_factor, int pad_to_capacity);
double moe_dropped_fraction(double imbalance, double capacity_factor);
double moe_remote_node_copies(double top_k, double nodes, double groups, double group_limit);
double host_sync_s(double launch_overhead_s);
/* The least time of a forward op of `launches` expert GEMMs issued one by one after the routing sync (docs/model.md,
 * "Mixture of experts"): launches x gemm_issue_s, or x launch_overhead_s where gemm_issue_s is 0. */
double expert_gemm_issue_s(double launches, double gemm_issue_s, double launch_overhead_s);
double host_issue_lead_s(double lead_s, double op_s, double issue_s);
double moe_counts_bytes(double ep, double experts);
double moe_gemm_workspace_bytes(void);
double moe_sort_chunks_bytes(double rows, double hidden, double elem_bytes, double local_experts, double ep);
double cp_kv_block_bytes(double kv_heads, double head_dim, double seq, double cp, double mbs, double elem_bytes);
/* The bytes one ring step's dK, dV addition moves: two KV blocks read, one written. */
double cp_ring_attention_length(double seq, double cp);
double cp_dkv_add_bytes(double kv_block_bytes);
double cp_kv_pack_bytes(double kv_block_bytes);
/* The ring's forward: its send/recv shares the attention's stream priority (Megatron's, TE's and the validator's
 * default), so each step's transfer waits for the attention kernel beside it, exposed in full.  Its backward: each
 * step's transfer runs beside that step's block, hidden by it (cp_ring_exposed_s; docs/model.md, "Context
 * parallelism"). */
#define CP_RING_SERIALISED_FWD 1
#define CP_RING_SERIALISED_BWD 0
double cp_ring_exposed_s(double transfer_s, double attention_s, double cp, int serialised);
/* nccl-tests' bus bandwidth: algorithm bandwidth times the ring's factor. */
double bus_bandwidth(coll_t coll, double n, double bytes, double seconds);
double tp_compute_comm_ratio(double hidden, double tp, double bytes_per_value);
double tp_ratio_limit(double hidden, double bytes_per_value, double flops, double bytes_per_s);
double pipeline_bubble_fraction(double pp, double microbatches, double vpp);
double pipeline_inflight_microbatches(double pp, double microbatches, double vpp, double stage);
double pipeline_inflight_heads(double pp, double microbatches, double vpp);
double roofline_s(double flops, double flop_per_s, double bytes, double bytes_per_s);
double fp8_cast_bytes(double m, double k, int backward, int weight_gradient, int norm_fed);
double fp8_weight_cast_bytes(double fp8_weights);
double fp8_weight_copy_bytes(double fp8_weights);
/* "GEMM time over M, N, K": the output tile one CTA computes (cuBLAS's Hopper bf16 kernels: 128 x 128 and
 * 128 x 256; the fit's leave-one-model-out error chose 128 x 128, docs/model.md) and the least K one split-K
 * share keeps. */
#define GEMM_TILE_M 128.0
#define GEMM_TILE_N 128.0
#define GEMM_SPLIT_K_MIN 256.0
/* A calibrated shape's time from `table` (GEMMs m x n x k, or attention shapes), exactly or on the line through
 * shapes that differ from it in the first size (or, with third_varies, the third; third_varies < 0: the exact
 * shape only); 0 when there is none
 * (planner/op_cost.c; docs/model.md, "Step time"). */
double measured_shape_s(const hw_gemm_time *table, int count, double m, double n, double k, double kv, int third_varies);
void gemm_waves(double batch, double m, double n, double k, double sms, double *waves, double *k_per_cta);
/* The time a GEMM of `elements` outputs adds when it adds into them (beta = 1) instead of writing them
 * (docs/model.md, "GEMM time over M, N, K", accumulating weight gradients). */
double gemm_accumulate_s(double elements, double accumulate_bytes, double written_bytes, double bytes_per_s,
                         double read_factor, double write_factor);
double gemm_tile_wave_s(double batch, double m, double n, double k, double sms, double tile_flop_per_s, double tile_s,
                        double fixed_s, double bytes, double bytes_per_s);
/* "Mixture of experts": the whole tiles (or K steps) of `tile` rows an expert's GEMM runs on average when a router
 * deals its rows: rows / tile + 1/2. */
double routed_row_tiles(double rows, double tile);
/* The K a Hopper bf16 GEMM kernel loops over in one step (64 elements, 128 bytes): a weight gradient's routed rows
 * (its K) round up to it. */
#define GEMM_K_STEP 64.0
double zero_unit_buffer_bytes(int zero, double layer_params, double big_params, double weight_bytes, double grad_bytes);
/* The parameters of a stage's wrapped units for ZeRO-2/3 (one TP rank's share): a layer (a MoE layer
 * with its rank's experts), and the largest unit that is not a layer (the embedding on the first stage,
 * the head or the tied table on the last), 0 on a middle stage. */
void zero_unit_params(const model_t *m, const layout_t *l, int first, int last, double *layer, double *big);
double overlapped_comm_cost_s(double comm, double window, double tail_fraction, double sc, double sm);
/* The same cost in its parts: what the compute beside the collective lost, and the collective's seconds (alone)
 * that ran beside the compute. */
typedef struct {
    double cost_s, slowdown_s, beside_s;
} overlap_cost;
overlap_cost overlapped_comm_parts(double comm, double window, double tail_fraction, double sc, double sm);
/* A stretch of compute a collective runs beside: its seconds alone, how much slower it runs beside the collective
 * and how much slower the collective runs beside it (docs/model.md, "Overlap is not free"). */
typedef struct {
    double t, sc, sm;
} overlap_segment;
/* overlapped_comm_parts over compute that changes as the collective runs: seg[0..n) in the order they run. */
overlap_cost overlapped_comm_walk(double comm, double tail_fraction, const overlap_segment *seg, int n);
/* ZeRO-3's gathers a held unit saves (docs/model.md, "ZeRO-3 and FSDP"): a unit's gather is skipped where the step
 * uses the unit it used last, as the validator's gather sequence and torchtitan's FSDP (the last block not
 * resharded after its forward) do.  Over a stage's 1F1B of m micro-batches after w warm-up forwards: how many
 * backwards follow a forward (each starts with the unit the forward ended with) and how many forwards follow a
 * backward (each starts with the unit that backward ended with, where the stage's first unit is a layer). */
void zero3_turns(double microbatches, double warmup, double *bwd_after_fwd, double *fwd_after_bwd);
double network_bus_bytes_per_s(double line_bytes_per_s, double message_bytes, double efficiency, double half_bytes);
/* NCCL's device memory figures of a GPU (docs/model.md, "Other memory"), bytes, 0 where not measured: the totals per
 * communicator of overlays before 2026-11-26, and the parts calibrate --comm measures since, used when split and
 * process are both set. */
typedef struct {
    double comm, first, p2p;            /* one communicator, the process's first, a send/recv-only one (totals) */
    double process;                     /* the world communicator: created, one small all-reduce run */
    double split;                       /* one more at its split */
    double collective;                  /* its buffers once collectives ran */
    double p2p_buffers;                 /* its send/recv buffers */
    double p2p_first;                   /* the process's first send/recv's, NCCL's one-time part with them */
} nccl_memory_figures;
/* A communicator a stage's rank opens beside the world's, one per group of more than one GPU: what runs on it. */
#define NCCL_GROUPS_MAX 8
typedef struct {
    const char *name;   /* "TP", "DP", "DP x CP", "CP", "tied embedding", "EP", "experts' DP", "expert TP", "PP" */
    int collective;     /* collectives run on it */
    int peers;          /* the ranks it sends to and receives from (0: no send/recv) */
    int pipeline;       /* the pipeline's (the totals price it at their send/recv-only figure) */
} nccl_group;
/* The groups of layout l (tied_group: the stage holds a tied table split over stages; moe: a mixture of experts),
 * in that order; 0 on one GPU. */
int nccl_groups(const layout_t *l, int tied_group, int moe, nccl_group out[NCCL_GROUPS_MAX]);
/* 1 when f carries the parts (split and process), else the totals price the communicators. */
int nccl_memory_by_parts(const nccl_memory_figures *f);
/* One group's bytes, and the world's (with the one-time send/recv part where any of the n groups runs send/recv). */
double nccl_group_bytes(const nccl_memory_figures *f, const nccl_group *g);
double nccl_world_bytes(const nccl_memory_figures *f, const nccl_group *groups, int n);
/* A GPU's NCCL memory figures, as its hwdb row and overlay give them. */
nccl_memory_figures gpu_nccl_figures(const hw_gpu *gpu);
/* NCCL's bytes for the communicators a stage's rank opens: the world's and its groups'. */
double nccl_memory_bytes(const layout_t *l, const nccl_memory_figures *f, int tied_group, int moe);
double other_memory_allowance(const layout_t *l, double context_bytes, const nccl_memory_figures *nccl, int tied_group,
                              int moe, double backward_workspace);
double moe_routed_grad_bytes(double rows, double hidden, double elem_bytes, int exchanged);
double backward_workspace_bytes(double tokens, double hidden, double qkv_width, double ffn_up_width,
                                double score_elements, double elem_bytes);
double flash_attention_flops(double b, double heads, double s, double d, int causal, int backward);
/* sextant-gpu's attention backward workspace (docs/model.md, "Other memory"): the dK, dV grid's block target (the
 * kernel's DKDV_BLOCKS in kernels/attention.cu; test_formulas checks the two agree), its split of a kv head's query
 * heads, the split's fp32 partials and the whole workspace, as sx_flash_attention_backward_workspace_bytes. */
#define ATTENTION_DKDV_BLOCKS 264
int attention_dkdv_splits(int64_t b, int64_t tk, int64_t kv, int64_t group);
double attention_dkdv_split_bytes(int64_t b, int64_t tk, int64_t h, int64_t kv, int64_t d);
double sextant_attention_workspace_bytes(int64_t b, int64_t tq, int64_t tk, int64_t h, int64_t kv, int64_t d);
double seconds_at_clock(double seconds, double clock_mhz, double ref_mhz);
/* A collective's energy above the static power over `seconds` (docs/model.md, "Clock under the power cap"). */
double collective_energy_j(double seconds, double collective_w, double static_w);
double expected_max_sigmas(double n);
double clock_bound_stretch(double x, double factor, double exponent);
double power_capped_clock_fraction(double static_w, double cap_w, double dynamic_j, double other_s, double gemm_s,
                                   double kernel_s, double exponent, double time_factor, double time_exponent,
                                   double x_min);
/* A kernel's rate at batch x heads b on the occupancy curve through two timed (b, rate) points
 * (docs/model.md, "Attention kernel generations"). */
double occupancy_rate(double b, double b1, double r1, double b2, double r2);
#define UNFUSED_ATTENTION_KERNELS_MAX 5
int unfused_attention_kernels(double s, double d, double elem_bytes, double mask_bytes, int backward,
                              double flops[UNFUSED_ATTENTION_KERNELS_MAX], double bytes[UNFUSED_ATTENTION_KERNELS_MAX]);


typedef enum { FORMAT_TABLE = 0, FORMAT_CSV, FORMAT_JSON } format_t;

/* ---- the layout search (sextant plan) ---------------------------------- */

typedef enum { OBJECTIVE_TIME = 0, OBJECTIVE_COST, OBJECTIVE_GPUS } objective_t;
typedef enum {
    REJECT_MEMORY = 0,      /* does not fit */
    REJECT_INDIVISIBLE,     /* heads, KV heads or batch do not divide */
    REJECT_TP_ACROSS_NODES, /* TP group would leave the node */
    REJECT_TP_RATIO,        /* above t_max, with --strict */
    REJECT_DEADLINE,        /* slower than --days */
    REJECT_BUDGET,          /* dearer than --budget */
    REJECT_CP,              /* context parallelism the sequence or attention cannot take */
    REJECT_INTERLEAVING,    /* VPP > 1 with micro-batches not a multiple of PP */
    REJECT_FRAMEWORK,       /* the --emit framework cannot run it */
    REJECT_EP,              /* EP not dividing the experts or dp x cp; MoE with TP and no SP */
    REJECT_INTERNAL,        /* the estimate failed on its own account (an op list past OPS_MAX): a bug */
    REJECT_COUNT
} reject_reason_t;

#define PLAN_TOP_MAX 32
/* plan searches context parallelism only from this sequence length on (or when --cp asks) */
#define PLAN_CP_MIN_SEQ 8192
#define PLAN_CP_MAX 16
#define PLAN_GPU_TYPES_MAX 64
#define PLAN_COUNTS_MAX 32

typedef struct {
    const model_t *model;
    const hw_gpu *gpu[PLAN_GPU_TYPES_MAX];
    const hw_node *node[PLAN_GPU_TYPES_MAX];
    int ngpu_types;
    int64_t gpu_counts[PLAN_COUNTS_MAX];
    int ncounts;
    int64_t seq;
    int64_t gbs;                   /* 0: search gbs_min..gbs_max (powers of two) */
    int64_t gbs_min, gbs_max;
    double tokens, price;          /* price 0: each GPU's cloud price */
    double max_days, max_budget;   /* 0: no limit */
    objective_t objective;
    int top;
    int strict;                    /* reject layouts above the TP ratio limit */
    int allow_tp_across_nodes;
    int max_zero;                  /* highest ZeRO stage the target framework has (3 when any) */
    const char *framework;         /* megatron, deepspeed, torchtitan: only layouts it can run; NULL: any */
    precision_t precision;         /* PREC_COUNT: each GPU's default */
    attention_impl_t attention;    /* ATTENTION_COUNT: each GPU's default (default_attention) */
    int fp32_grads;
    int64_t cp;                    /* 0: search 1..16 when seq >= PLAN_CP_MIN_SEQ, else 1 */
    cp_comm_t cp_comm;
    int64_t ep;                    /* 0: search 1 and the powers of two dividing a MoE model's experts */
    int64_t etp;                   /* 0: search expert TP 1 and TP (a MoE model with TP > 1); else this one */
    int ep_overlap;                /* every layout with the EP all-to-alls overlapped (--ep-overlap) */
    int uncached;                  /* cost every layout from scratch (estimate_layout_fast), without the
                                      search's cache: the reference for make bench and the tests */
    const struct uncertainty_bands *bands; /* hwdb/uncertainty.csv, or NULL: no bands printed */
    loss_kernel_t loss;            /* every layout's loss kernel */
    int64_t logit_metrics;         /* every layout's training metrics on the logits (--logit-metrics) */
    tp_overlap_t tp_overlap;       /* every layout's TP communication beside the GEMMs */
    grad_sync_t grad_sync;         /* every layout's gradient reduction: overlapped or after the flush */
    grad_accum_t grad_accum;       /* every layout's gradient accumulation (fp32-copy: ZeRO 0 and 1 only) */
    expert_gemm_t expert_gemm;     /* every layout's expert GEMMs: one launch per expert, or one grouped kernel */
    expert_rows_t expert_rows;     /* every layout's experts' rows: as routed, or even */
    zero_waits_t zero_waits;       /* every layout's ZeRO-2/3 waits: each micro-batch's, or the step's ends' */
} plan_request;

typedef struct {
    layout_t layout;
    int gpu_type;
    double step_s, time_to_train_s, cost_usd, mfu, memory_total, memory_capacity, tokens_per_s;
    double compute_s, tp_comm_s, pp_comm_s, dp_comm_s, bubble_s;
    double clock_fraction, step_clock_hz, top_clock_power_w; /* the power model's (estimate_t) */
    double cp_comm_s;
} plan_candidate;

/* Candidates within this fraction of the best objective, on its GPU type and count, are tied:
 * among them the plan prefers fewer and cheaper communication patterns (plan_comm_order). */
#define PLAN_TIE_FRACTION 0.005

typedef struct {
    plan_candidate top[PLAN_TOP_MAX];
    int ntop;
    plan_candidate objective_best; /* the best by the objective alone, before the tie-break */
    int tie_broken;                /* 1: top[0] is not objective_best, which it ties with */
    plan_candidate frontier[PLAN_GPU_TYPES_MAX * PLAN_COUNTS_MAX]; /* best per (type, count), Pareto-filtered */
    int nfrontier;
    int64_t evaluated, feasible, rejected[REJECT_COUNT];
    double seconds;
} plan_result;

/* The tie-break's order of communication patterns: < 0 when a uses fewer or cheaper ones than b.
 * Lower ZeRO stage first, then no pipeline (smaller PP, then smaller VPP), then smaller TP, then SP
 * off; 0 when all are equal.  With why, the first difference in words ("ZeRO 1 against 3"). */
int plan_comm_order(const layout_t *a, const layout_t *b, char *why, size_t whylen);
/* Why `framework` (megatron, deepspeed, torchtitan) cannot run the layout, or NULL when it can. */
const char *framework_refusal(const char *framework, const layout_t *l);
/* Costs every layout the request allows (estimate_layout_cached) and keeps the best. */
int plan_search(const plan_request *req, plan_result *res, int show_progress, char *err, size_t errlen);
const char *reject_reason_name(reject_reason_t r);
/* The precision the search uses on `g`: --precision, else bf16 where the GPU has it, else fp16.  A GPU with no
 * tensor rate for it has none of its layouts costed. */
precision_t plan_precision(const plan_request *req, const hw_gpu *g);
void report_plan(FILE *out, const plan_request *req, const plan_result *res, format_t format);
/* Prints the winning plan as launch flags or a config: megatron, deepspeed, torchtitan.  With `overall` (the winner of the same search without the framework's limits), one line says when c
 * is not that winner, why, and how far behind it is; NULL: no such line.  A layout the framework
 * cannot run is refused. */
int emit_plan(FILE *out, const plan_request *req, const plan_candidate *c, const plan_candidate *overall,
              const char *framework, char *err, size_t errlen);

/* ---- uncertainty from the published runs (planner/uncertainty.c) ------ */

/* Layouts are grouped by how they parallelise, the families whose published-run errors differ: ZeRO-2/3
 * or FSDP, context parallel, pipeline (ZeRO 0/1), tensor x data parallel (ZeRO 0/1). */
typedef enum { FAMILY_SHARDED = 0, FAMILY_CONTEXT, FAMILY_PIPELINE, FAMILY_TP_DP, FAMILY_COUNT } parallelism_family_t;
parallelism_family_t parallelism_family(const layout_t *l);
const char *parallelism_family_name(parallelism_family_t f);

/* Per family: the published rows estimated and the band of their signed errors (predicted over published
 * throughput minus one): the 10th to 90th percentile of the family's rows (the values left when at most a
 * tenth is trimmed from each end), widened to every family's rows together with pooled_trim cut from each end,
 * the spread between sources that one family's few sources under-represent (docs/model.md, "Uncertainty
 * bands").  A prediction's band: the step time times (1 + err_low) to (1 + err_high). */
typedef struct uncertainty_bands {
    int rows[FAMILY_COUNT];
    double err_low[FAMILY_COUNT], err_high[FAMILY_COUNT];
    double pooled_trim;           /* the share of all families' errors trimmed from each end before widening */
} uncertainty_bands;

/* Sorts v[0..n) ascending (qsort with the one comparison of doubles the project needs). */
void sort_ascending(double *v, size_t n);
/* The 10th to 90th percentile of n signed errors (sorted in place), into family f. */
void uncertainty_from_errors(uncertainty_bands *b, parallelism_family_t f, double *errors, int n);
/* Every family's band widened to the trim to 1 - trim quantiles of the n errors of all families (sorted in
 * place); b->pooled_trim records it. */
void uncertainty_widen_to_pooled(uncertainty_bands *b, double *errors, int n, double trim);
/* Writes / reads hwdb/uncertainty.csv (family,rows,err_low,err_high,source). 0, or -1 with why. */
int uncertainty_write(const char *path, const uncertainty_bands *b, const char *source, char *err, size_t errlen);
int uncertainty_read(const char *path, uncertainty_bands *b, char *err, size_t errlen);
/* A step (or any duration) of the layout's family: its band, [low, high]; 0 when the family has no rows. */
int uncertainty_band(const uncertainty_bands *b, const layout_t *l, double seconds, double *low, double *high);

/* ---- published runs (planner/published_row.c, planner/published.c) ---- */

typedef enum {
    METRIC_MFU = 0, METRIC_TFLOPS_HW, METRIC_TFLOPS_MODEL, METRIC_TOKENS_PER_S_PER_GPU, METRIC_S_PER_ITER,
    METRIC_SAMPLES_PER_S, METRIC_GPU_HOURS, METRIC_COUNT
} published_metric_t;

/* One row of a published-runs CSV (data/published/README.md), as the estimate needs it. */
typedef struct {
    char case_name[128], group[64], gpu_text[128];
    char source[1024];
    int line;                      /* the CSV line the row starts on */
    model_t model;                 /* the row's shape (empty fields from the zoo model of the same name) */
    layout_t layout;
    const hw_gpu *gpu;             /* NULL when the GPU is not in the hardware database */
    const hw_node *node;           /* the GPU's node, or `own_node` when the row's text names its network */
    hw_node own_node;
    published_metric_t metric;
    double value;
    precision_t mfu_peak;          /* the peak the source's MFU divides by */
    int kv_counted_per_head;       /* the source's FLOPs count the K and V projections of every query head, as
                                      if the model had no grouped-query attention (docs/model.md, "Published runs") */
    int64_t cp, ep;
    int older_framework;           /* a 2021-2022 framework: unfused attention, no SP unless stated, dropout */
    int mbs_given;                 /* the row publishes its micro-batch (else 1 is taken, where that is safe) */
    double hours_tokens;           /* a gpu_hours row over this many tokens of one phase (10^12 for a row per
                                      trillion tokens): a throughput; 0 for a campaign of several phases */
    char skip_class[48];           /* empty when estimable, else the kind of reason (counted) */
    char skip_detail[200];         /* and this row's reason */
} published_row;

/* Reads row r.  0 (the row may still be marked not estimable), or -1 with "file:line:field: why" for a
 * row the format does not allow (a missing column, an unknown metric, a value that is not a number). */
int published_row_read(const csv_table *t, int r, const hwdb *db, const model_zoo *zoo, published_row *row,
                       char *err, size_t errlen);
const char *published_metric_name(published_metric_t m);
/* The estimate's figure in the row's metric and the source's FLOP convention. */
double published_predicted(const published_row *row, const estimate_t *e);
/* predicted / published - 1 as throughput (inverted for time metrics): positive means too optimistic. */
double published_signed_error(const published_row *row, double predicted);
const char *published_convention(const published_row *row);
/* Every row against its estimate (and, with_plan, its plan), per source group, as a table or JSON. */
int report_published(FILE *out, const hwdb *db, const model_zoo *zoo, const char *runs_path, format_t format,
                     int with_plan, char *err, size_t errlen);
/* One published case (its rows share a layout): how the row was read, each metric's published and predicted
 * figure, then `explain`'s derivation of the estimate.  -1 with why when the case is not in the file. */
int explain_published(FILE *out, const hwdb *db, const model_zoo *zoo, const char *runs_path, const char *case_name,
                      char *err, size_t errlen);
/* The bands of the rows report_published would estimate (for hwdb/uncertainty.csv). */
int published_bands(const hwdb *db, const model_zoo *zoo, const char *runs_path, uncertainty_bands *bands, char *err,
                    size_t errlen);

/* ---- the power model fitted to measured steps (planner/fit_power.c) ---- */

#define POWER_FIT_RUNS_MAX 64
#define POWER_FIT_OPS_MAX 64
/* One step `validate` measured: its calibrated step row, the model as it ran (no dropout), the layout. */
typedef struct {
    char path[512];
    model_t model;
    layout_t layout;
    double measured_s;
    double measured_clock_hz;   /* NVML's mean SM clock over the timed steps, from the run's log beside the CSV
                                   (its "power:" line); 0 where there is none */
    double measured_bytes;      /* the peak device memory of its most loaded GPU (the largest of its step rows'
                                   measured_bytes); 0 where the CSV has none */
    int nforward;               /* rank 0's forward ops in the CSV (calibrated rows), at most POWER_FIT_OPS_MAX */
    char forward_op[POWER_FIT_OPS_MAX][32];
    double forward_measured_s[POWER_FIT_OPS_MAX]; /* seconds per step, its rows of that name summed */
} power_fit_run;

typedef struct {
    double exponent, energy_attention_j_per_flop;  /* the fitted clock exponent and fused attention energy */
    /* how the steps' forward GEMMs follow the measured clock (docs/model.md, "GEMM time against the clock"):
     * clock_time_factor and clock_time_exponent regressed over time_runs one-GPU runs with NVML's clock in
     * their log, the residual's standard deviation in the log; time_runs 0: not fitted (time_why), the
     * overlay's kept */
    double time_factor, time_exponent, time_residual_sd;
    int time_runs;
    const char *time_why;       /* time_runs 0: why not (a static string) */
    double before_s[POWER_FIT_RUNS_MAX], after_s[POWER_FIT_RUNS_MAX]; /* each run's predicted step */
    double before_clock_hz[POWER_FIT_RUNS_MAX], after_clock_hz[POWER_FIT_RUNS_MAX]; /* ... and its SM clock */
    double before_bytes[POWER_FIT_RUNS_MAX];        /* ... and its peak memory per GPU (the fit does not move it) */
    double before_cost, after_cost;                 /* sums of squared relative errors */
} power_fit_result;

/* Reads a validate --csv file's calibrated step row for `gpu`, and the measured SM clock from the log of the
 * same name ending .log when there is one.  0, or -1 with "file:line:field: why". */
int power_fit_read_run(const char *path, const model_zoo *zoo, const hw_gpu *gpu, const hw_node *node, power_fit_run *run,
                       char *err, size_t errlen);
/* First the clock time's factor and exponent, by least squares of ln(measured / top-clock time) of the one-GPU
 * runs' clock-bound forward GEMMs on ln(top clock / NVML's clock); then, with them, least squares over the runs'
 * relative step errors, on a grid: the exponent in [0, 4], the attention energy within a factor 4 of gpu's
 * (docs/model.md, "Clock under the power cap").  gpu must carry a power model. */
int power_fit_steps(const hw_gpu *gpu, const hw_node *node, const power_fit_run *runs, int nruns, power_fit_result *out,
                    char *err, size_t errlen);
/* Leave one model out: for each model among the runs (by name), the fit on the other models' runs predicting
 * its own, into held_out_s[i] for run i.  *models: how many models; 0 where fewer than 3 models (no fold then
 * has two to fit on), held_out_s untouched.  0, or -1 with why in err. */
int power_fit_leave_one_model_out(const hw_gpu *gpu, const hw_node *node, const power_fit_run *runs, int nruns,
                                  double *held_out_s, int *models, char *err, size_t errlen);
/* The fit as a table: each run's measured step, predicted before and after (and held out, when held_out_s is
 * not NULL); the two terms, and each column's mean |error|, signed error and worst. */
void power_fit_report(FILE *out, const hw_gpu *gpu, const power_fit_run *runs, int nruns, const power_fit_result *fit,
                      const double *held_out_s, int models);
/* The overlay at overlay_path with gpu's two fitted rows in place of its old ones (appended when it had
 * none), every other line as it was; their source names fitted_by, the date and the runs.  *text is
 * malloc'd (the caller frees it).  0, or -1 with why in err. */
int power_fit_overlay_text(const char *overlay_path, const hw_gpu *gpu, const char *fitted_by, const power_fit_run *runs,
                           int nruns, const power_fit_result *fit, char **text, size_t *len, char *err, size_t errlen);
/* The same, written to out_path whole or not at all (a temporary file renamed); out_path may be
 * overlay_path.  0, or -1 with why in err. */
int power_fit_write_overlay(const char *overlay_path, const char *out_path, const hw_gpu *gpu, const char *fitted_by,
                            const power_fit_run *runs, int nruns, const power_fit_result *fit, char *err, size_t errlen);

/* ---- the GEMM time model fitted to calibrate's shapes (planner/fit_gemm.c) ---- */

#define GEMM_FIT_ROWS_MAX HWDB_GEMM_TIMES_MAX
#define GEMM_FIT_GROUPS_MAX 32
#define GEMM_FIT_METHODS 4    /* the curve; the table, else the curve; the tiles; the table, else the tiles */
typedef enum { GEMM_KIND_UNKNOWN = 0, GEMM_KIND_FORWARD, GEMM_KIND_DGRAD, GEMM_KIND_WGRAD } gemm_kind_t;
typedef struct {
    double m, n, k, seconds;
    int bias_gradient;        /* a weight gradient with its bias gradient fused (gemm_fit_mark_bias) */
    gemm_kind_t kind;         /* which of a linear's three GEMMs calibrate timed it as (gemm_fit_mark_bias) */
    char group[48];           /* the model calibrate took the shape from */
    char linear[32];          /* and the linear layer (qkv, attn_out, ...) */
} gemm_fit_row;

typedef struct {
    gemm_fit_row row[GEMM_FIT_ROWS_MAX];
    int n;
    char group[GEMM_FIT_GROUPS_MAX][48];
    int ngroups;
    double sms;               /* the SM count calibrate reported */
} gemm_fit_data;

typedef struct {
    double tile_flop_per_s, tile_s, fixed_s; /* fitted on the plain GEMMs */
    double bias_grad_factor;                 /* then on the fused bias gradients' rows; 0: none */
    double accumulate_s_per_element;         /* given, not fitted: what a weight gradient row adds per output element
                                                by adding into its 16-bit gradient, as calibrate times it */
} gemm_fit_params;

typedef struct {
    gemm_fit_params all;                             /* fitted on every row */
    gemm_fit_params held[GEMM_FIT_GROUPS_MAX];       /* fitted without group h */
    double curve_e_max, curve_half_flops;            /* calibrate's curve on every row */
    double error[GEMM_FIT_ROWS_MAX][GEMM_FIT_METHODS]; /* row i predicted with its group held out */
    double in_sample[GEMM_FIT_ROWS_MAX];             /* row i by the fit on every row */
} gemm_fit_result;

/* The overlay's gemm_us rows for gpu_name, grouped by the model named in their source.  0, or -1 with why. */
int gemm_fit_read(const char *path, const char *gpu_name, gemm_fit_data *d, char *err, size_t errlen);
/* Marks each row's kind (forward, dgrad, wgrad) and the weight gradients of a biased linear of its group's model
 * (the zoo's model and linear its source names; none when the zoo has no such model); the count of the latter. */
int gemm_fit_mark_bias(gemm_fit_data *d, const model_zoo *zoo);
/* The three parameters by least squares on the relative error over the plain rows not in held_out (NULL: all),
 * then the fused bias gradient's factor over the marked ones. */
int gemm_fit_tiles(const gemm_fit_data *d, const char *held_out, gemm_fit_params *p);
/* calibrate's curve e_max F / (F + F_half) fitted its own way to the same rows. */
int gemm_fit_curve(const gemm_fit_data *d, const char *held_out, double peak, double *e_max, double *half_flops);
/* The fit on all rows and, for each group, the others' fit predicting it by every method. */
int gemm_fit_lomo(const gemm_fit_data *d, const hw_gpu *g, gemm_fit_result *res);
/* Mean |error|, mean signed error and the worst of one method (-1: the in-sample fit) over a group (NULL: all),
 * and over the rows with (bias_gradient 1) or without (0) a fused bias gradient (-1: both). */
void gemm_fit_summary(const gemm_fit_data *d, const gemm_fit_result *res, const char *group, int bias_gradient, int method,
                      double *mean_abs, double *mean_signed, double *worst, int *count);
void gemm_fit_report(FILE *out, const gemm_fit_data *d, const gemm_fit_result *res);
/* The published GEMM rows of GPUs named gpu_prefix... (data/published/gemm.csv) against the fit. */
int gemm_fit_published(FILE *out, const char *path, const char *gpu_prefix, const gemm_fit_data *d,
                       const gemm_fit_result *res, const hw_gpu *g, char *err, size_t errlen);
/* The whole of sextant fit-gemm (and of calibrate's step after its GEMM table): the rows of `in` read, marked
 * with the zoo's models, fitted and held out, reported to `report` (with the published GEMMs of `published`
 * unless NULL), and the overlay with the fitted rows written to `out` (which may be `in`).  0, or -1 with why
 * ("FILE: ...") in err. */
int gemm_fit_overlay(const char *in, const char *out, const hw_gpu *gpu, const model_zoo *zoo, const char *published,
                     FILE *report, char *err, size_t errlen);
/* The overlay at path with gpu's gemm_tile_tflops, gemm_tile_us, gemm_fixed_us and sm_count rows from the fit
 * (their source: the date, the rows and the leave-one-model-out error), every other line as it was. */
int gemm_fit_overlay_text(const char *path, const char *gpu, const gemm_fit_data *d, const gemm_fit_result *res,
                          char **text, size_t *len, char *err, size_t errlen);

/* ---- reports ----------------------------------------------------------- */


/* The one line that says which overlay a GPU's numbers rest on ("calibration: ..."): 1, or 0 when
 * there is nothing to say (no overlay applied and none declined). */
int calibration_line(const hw_gpu *g, char *out, size_t outlen);
/* Where the GPU's overlay came from: "hwdb/measured" (the default), "--calibration", "hwdb defaults". */
const char *calibration_origin(const hw_gpu *g);
void report_estimate(FILE *out, const estimate_t *e, format_t format, int with_ops);
void report_explain(FILE *out, const estimate_t *e);
/* docs/SPEC.md's worked examples, reproduced through the formula functions. */
void report_spec_examples(FILE *out);

const char *recompute_name(recompute_t r);
const char *attention_name(attention_impl_t a);
/* 1 for the fused kernels (flash, flash1, flash1-triton, sextant): no s x s scores in memory, a log-sum-exp per row. */
int attention_is_fused(attention_impl_t a);
/* A first-generation fused kernel's speed over the frameworks' (flash): the GPU's flash1_relative_speed for flash1,
 * flash1_triton_relative_speed for flash1-triton (docs/model.md, "Attention kernel generations"); 1 for every other
 * kernel and where the GPU has no prior. */
double first_generation_speed(const hw_gpu *gpu, attention_impl_t a);
const char *cp_comm_name(cp_comm_t c);
const char *loss_kernel_name(loss_kernel_t k);
int loss_kernel_parse(const char *name, loss_kernel_t *out);
const char *tp_overlap_name(tp_overlap_t t);
const char *grad_sync_name(grad_sync_t g);
/* overlap|after: 0, or -1 for anything else (or NULL). */
int grad_sync_parse(const char *name, grad_sync_t *out);
const char *grad_accum_name(grad_accum_t g);
/* in-place|fp32-copy: 0, or -1 for anything else (or NULL). */
int grad_accum_parse(const char *name, grad_accum_t *out);
const char *expert_gemm_name(expert_gemm_t g);
/* streams|grouped: 0, or -1 for anything else (or NULL). */
int expert_gemm_parse(const char *name, expert_gemm_t *out);
const char *expert_rows_name(expert_rows_t r);
/* routed|even: 0, or -1 for anything else (or NULL). */
int expert_rows_parse(const char *name, expert_rows_t *out);
const char *zero_waits_name(zero_waits_t w);
int zero_waits_parse(const char *name, zero_waits_t *out);
/* none|backward: 0, or -1 for anything else (or NULL). */
int tp_overlap_parse(const char *name, tp_overlap_t *out);
/* A comma-separated list of layernorm, mla_up_proj, moe_act: 0 and the bits, or -1 naming nothing known. */
int recompute_modules_parse(const char *list, unsigned *out);
/* The modules as that list ("" for none). */
const char *recompute_modules_name(unsigned modules);
/* ring|allgather, ignoring case: 0, or -1 for anything else (or NULL). */
int cp_comm_parse(const char *name, cp_comm_t *out);
/* none|selective|full and flash|unfused|flash1|flash1-triton|sextant, ignoring case: 0, or -1 for anything else (or NULL). */
int recompute_parse(const char *name, recompute_t *out);
int attention_parse(const char *name, attention_impl_t *out);
const char *op_kind_name(op_kind_t k);
const char *pass_name(pass_t p);
const char *group_name(group_t g);
const char *coll_name(coll_t c);

/* ---- the layout flags (planner/layout_flags.c) ---------------------------
 * One parser for --tp, --pp, --dp, --vpp, --cp, --ep, --mbs, --gbs, --seq, --gpus-per-node, --sp, --zero,
 * --recompute, --recompute-layers, --recompute-modules, --attention, --precision, --loss, --tp-overlap,
 * --grad-sync, --grad-accum, --expert-gemm, --zero-waits, --cp-comm, --ep-overlap, --fp32-grads, --first-stage-layers and
 * --last-stage-layers, shared by sextant (estimate, explain, plan) and
 * sextant-gpu (train, ops).  Each program starts from its own defaults (layout_flags_init's template),
 * refuses the flags it does not take, and fills what depends on the model or GPU from `given`.
 * --gpus is not here: plan takes a range of counts and sextant-gpu the GPUs at hand. */
enum {
    LAYOUT_FLAG_TP = 1u << 0, LAYOUT_FLAG_PP = 1u << 1, LAYOUT_FLAG_DP = 1u << 2, LAYOUT_FLAG_VPP = 1u << 3,
    LAYOUT_FLAG_CP = 1u << 4, LAYOUT_FLAG_EP = 1u << 5, LAYOUT_FLAG_MBS = 1u << 6, LAYOUT_FLAG_GBS = 1u << 7,
    LAYOUT_FLAG_SEQ = 1u << 8, LAYOUT_FLAG_GPUS_PER_NODE = 1u << 9, LAYOUT_FLAG_SP = 1u << 10, LAYOUT_FLAG_ZERO = 1u << 11,
    LAYOUT_FLAG_RECOMPUTE = 1u << 12, LAYOUT_FLAG_RECOMPUTE_LAYERS = 1u << 13, LAYOUT_FLAG_RECOMPUTE_MODULES = 1u << 14,
    LAYOUT_FLAG_ATTENTION = 1u << 15, LAYOUT_FLAG_PRECISION = 1u << 16, LAYOUT_FLAG_LOSS = 1u << 17,
    LAYOUT_FLAG_TP_OVERLAP = 1u << 18, LAYOUT_FLAG_GRAD_SYNC = 1u << 19, LAYOUT_FLAG_CP_COMM = 1u << 20,
    LAYOUT_FLAG_EP_OVERLAP = 1u << 21, LAYOUT_FLAG_FP32_GRADS = 1u << 22, LAYOUT_FLAG_ETP = 1u << 23,
    LAYOUT_FLAG_GRAD_ACCUM = 1u << 24, LAYOUT_FLAG_LOGIT_METRICS = 1u << 25, LAYOUT_FLAG_FIRST_STAGE_LAYERS = 1u << 26,
    LAYOUT_FLAG_LAST_STAGE_LAYERS = 1u << 27, LAYOUT_FLAG_EXPERT_GEMM = 1u << 28, LAYOUT_FLAG_ZERO_WAITS = 1u << 29,
    LAYOUT_FLAG_EXPERT_ROWS = 1u << 30
};
typedef struct {
    layout_t l;        /* the program's defaults, with each flag given written over them */
    unsigned given;    /* LAYOUT_FLAG_* of the flags given */
} layout_flags;
/* f = the defaults (a zeroed layout when NULL), nothing given. */
void layout_flags_init(layout_flags *f, const layout_t *defaults);
/* argv[i] = flag, argv[i + 1] = value (NULL when there is none): 0 when flag is not a layout flag; 1 when it
 * is a switch (--sp, --ep-overlap, --fp32-grads; value unused); 2 when it took value; -1 with one line in err
 * naming the flag ("--tp: 'two' is not a positive integer"), which the caller prints after its prefix. */
int layout_flag_parse(const char *flag, const char *value, layout_flags *f, char *err, size_t errlen);
/* The i-th layout flag's name ("--tp", ...), NULL past the last: for the help's completeness test. */
const char *layout_flag_name(size_t i);
/* The LAYOUT_FLAG_* bit of flag, 0 when it is not a layout flag. */
unsigned layout_flag_bit(const char *flag);
/* A positive decimal number with an optional K/M/B/T (or G) suffix, 2T = 2e12: 0, or -1. */
int quantity_parse(const char *text, double *out);
/* A positive whole quantity_parse number up to max into *out: 0, or -1 with one line in err naming flag. */
int count_parse(const char *flag, const char *text, int64_t max, int64_t *out, char *err, size_t errlen);

/* The folder holding hwdb/ and models/ (planner/data_root.c says where it looks); sextant and sextant-gpu
 * both use it, so an installed binary finds its databases. */
void find_data_root(char *out, size_t outlen);

#endif
