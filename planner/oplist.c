/* The op list of one pipeline stage for one micro-batch on one GPU: the
 * single description of a training step that the planner costs and the
 * validator executes.  docs/model.md, "The op list", derives every count. */
#include "planner.h"

#include <math.h>
#include <string.h>
#include <strings.h>

/* How a pipeline splits L layers over p stages (docs/model.md, "Uneven pipeline stages").  What
 * --first-stage-layers and --last-stage-layers give, the rest evenly over the other stages (Megatron's
 * --decoder-first/last-pipeline-num-layers).  Without them, L/p each where p divides L; else ceil(L/p) on
 * every middle stage and the R layers left shared by the first and the last so that neither holds more
 * layer-equivalents than it must: the embedding counts as one on the first stage; the head as one and each
 * multi-token prediction module as two (its layer and its head) on the last.  So Megatron-DeepSpeed's
 * type:transformer|embedding partition placed BLOOM's 70 layers over 12 stages (5, 6 x 10, 5), Meta took a
 * layer off Llama 3 405B's first and last stage (7, 8 x 14, 7) and NVIDIA's DeepSeek-V3 recipes give
 * the prediction module and the loss a stage of their own.  A count below 1 is layout_check's to refuse. */
void pipeline_split(const model_t *m, const layout_t *l, int64_t *first, int64_t *middle, int64_t *last)
{
    int64_t layers = m->layers, pp = l->pp > 1 ? l->pp : 1;
    if (pp == 1) {
        *first = *middle = *last = layers;
        return;
    }
    int64_t f = l->first_stage_layers, k = l->last_stage_layers;
    if (f > 0 || k > 0) {
        int64_t others = pp - (f > 0) - (k > 0), rest = layers - f - k;
        int64_t even = others > 0 ? rest / others : 0;
        *first = f > 0 ? f : even;
        *last = k > 0 ? k : even;
        *middle = pp > 2 ? even : *first;
        return;
    }
    if (layers % pp == 0) {
        *first = *middle = *last = layers / pp;
        return;
    }
    int64_t per_middle = (layers + pp - 1) / pp, ends = layers - per_middle * (pp - 2);
    /* even when first + 1 = (ends - first) + head; the first takes the half layer */
    int64_t head = 1 + 2 * (m->mtp_layers > 0 ? m->mtp_layers : 0);
    int64_t on_first = (ends + head) / 2;
    if (on_first > ends - 1) on_first = ends - 1;
    if (on_first < 1) on_first = 1;
    *first = on_first;
    *last = ends - on_first;
    *middle = pp > 2 ? per_middle : *first;
}

/* Whether the counts pipeline_split gives add up to the model's layers, each stage holding one or more. */
static int pipeline_split_valid(const model_t *m, const layout_t *l)
{
    int64_t first, middle, last, pp = l->pp > 1 ? l->pp : 1, layers = m->layers;
    pipeline_split(m, l, &first, &middle, &last);
    if (pp == 1) return layers >= 1;
    return first >= 1 && last >= 1 && (pp == 2 || middle >= 1) &&
           first + last + (pp - 2) * middle == layers;
}

int pipeline_split_check(const model_t *m, const layout_t *l, char *err, size_t errlen)
{
    int64_t first, middle, last, pp = l->pp > 1 ? l->pp : 1, layers = m->layers;
    if ((l->first_stage_layers > 0 || l->last_stage_layers > 0) && pp == 1) {
        snprintf(err, errlen, "--%s-stage-layers: needs --pp of 2 or more", l->first_stage_layers > 0 ? "first" : "last");
        return -1;
    }
    if (pipeline_split_valid(m, l)) return 0;
    pipeline_split(m, l, &first, &middle, &last);
    if (l->first_stage_layers > 0 || l->last_stage_layers > 0)
        snprintf(err, errlen, "--first-stage-layers %lld --last-stage-layers %lld: %lld layers do not split over PP %lld "
                 "as first %lld, %lld middle stage(s) of an equal count, last %lld",
                 (long long)l->first_stage_layers, (long long)l->last_stage_layers, (long long)layers, (long long)pp,
                 (long long)first, (long long)(pp - 2), (long long)last);
    else
        snprintf(err, errlen, "--pp %lld: %lld layers leave a stage empty", (long long)pp, (long long)layers);
    return -1;
}

int64_t layers_on_stage(const model_t *m, const layout_t *l, int64_t stage)
{
    int64_t first, middle, last;
    pipeline_split(m, l, &first, &middle, &last);
    if (stage == 0) return first;
    return stage >= l->pp - 1 ? last : middle;
}

int pipeline_split_is_even(const model_t *m, const layout_t *l)
{
    int64_t first, middle, last;
    pipeline_split(m, l, &first, &middle, &last);
    return first == middle && middle == last;
}

int pipeline_middle_is_distinct(const model_t *m, const layout_t *l)
{
    if (l->pp <= 2) return 0;
    if (layers_on_stage(m, l, 1) != layers_on_stage(m, l, 0)) return 1;
    /* every layer of one kind: equal counts hold equal MoE layers (the search asks this on every cache miss) */
    if (!model_is_moe(m) || (m->dense_layers <= 0 && m->moe_layer_freq <= 1)) return 0;
    return moe_layers_on_stage(m, l, 1) != moe_layers_on_stage(m, l, 0);
}

int64_t first_layer_on_stage(const model_t *m, const layout_t *l, int64_t stage)
{
    int64_t first, middle, last;
    pipeline_split(m, l, &first, &middle, &last);
    return stage == 0 ? 0 : first + (stage - 1) * middle;
}

typedef struct {
    stage_ops *out;
    const layout_t *l;
    double act_bytes;   /* bytes per activation element: 2 for 16-bit, 4 for fp32/tf32 */
    int sixteen_bit;    /* the GEMMs pushed now stay 16-bit in an fp8 run (the output layer, the router) */
    int norm_fed;       /* the next GEMM takes a norm's output as TE's LayerNormLinear writes it: in FP8 in
                           an fp8 run, gathered so with SP (docs/model.md, "FP8 GEMMs"); gemm() clears it */
    int input_recomputed; /* the next GEMM's input is a module's output recomputed in the backward (--recompute-
                             modules): it saves nothing (docs/model.md, "Recomputed modules"); gemm() clears it */
    int overflow;
    /* TP collectives waiting for the next GEMM's input and weight gradients to run beside (1 + op index) */
    int beside_dgrad, beside_wgrad;
} builder;

static int op_index(const builder *b, const op_t *op) { return op ? (int)(op - b->out->ops) + 1 : 0; }

static op_t *push(builder *b, const char *name, op_kind_t kind, pass_t pass, int64_t count)
{
    if (b->out->nops >= OPS_MAX) { b->overflow = 1; return NULL; }
    op_t *op = &b->out->ops[b->out->nops++];
    memset(op, 0, sizeof *op);
    op->name = name;
    op->kind = kind;
    op->pass = pass;
    op->count = count;
    return op;
}

/* A GEMM (m x k) * (k x n): 2mnk FLOP, each operand read once and the result
 * written once.  `saved` is the input kept for the weight gradient, in 16 bit;
 * an FP8 GEMM keeps it as the FP8 transposed copy its cast wrote, one byte an
 * element (docs/model.md, "FP8 GEMMs"). */
static void gemm(builder *b, const char *fwd, const char *dgrad, const char *wgrad, int64_t count,
                 double m, double n, double k, double saved, int recompute_full)
{
    double flops = 2.0 * m * n * k;
    double bytes = b->act_bytes * (m * k + k * n + m * n);
    if (b->l->precision == PREC_FP8 && !b->sixteen_bit) saved /= b->act_bytes;
    if (b->input_recomputed) saved = 0.0;
    b->input_recomputed = 0;
    op_t *op = push(b, fwd, OP_GEMM, PASS_FWD, count);
    if (!op) return;
    op->m = (int64_t)m; op->n = (int64_t)n; op->k = (int64_t)k; op->batch = 1;
    op->sixteen_bit = b->sixteen_bit;
    op->norm_fed = b->norm_fed;
    b->norm_fed = 0;
    op->flops = op->model_flops = op->hardware_flops = flops;
    op->bytes = bytes;
    op->saved_bytes = recompute_full ? 0.0 : saved;
    if (recompute_full) {
        op_t *re = push(b, fwd, OP_GEMM, PASS_RECOMPUTE, count);
        if (!re) return;
        *re = *op;
        re->pass = PASS_RECOMPUTE;
        re->model_flops = 0.0;
        re->saved_bytes = 0.0;
    }
    /* dX = dY W^T is (m x n)(n x k); dW = X^T dY is (k x m)(m x n): same FLOPs. */
    op_t *dx = push(b, dgrad, OP_GEMM, PASS_BWD, count);
    if (!dx) return;
    *dx = *op;
    dx->pass = PASS_BWD; dx->name = dgrad; dx->n = (int64_t)k; dx->k = (int64_t)n; dx->saved_bytes = 0;
    op_t *dw = push(b, wgrad, OP_GEMM, PASS_BWD, count);
    if (!dw) return;
    *dw = *op;
    dw->pass = PASS_BWD; dw->name = wgrad; dw->m = (int64_t)k; dw->k = (int64_t)m; dw->saved_bytes = 0;
    dw->weight_gradient = 1;
    /* in place (--grad-accum in-place): the GEMM adds into the gradient, reading each output element before it
     * writes it back at the gradient's width (docs/model.md, "GEMM time over M, N, K") */
    if (b->l->grad_accum == GRAD_ACCUM_IN_PLACE) {
        dw->accumulate_bytes = accumulated_gradient_bytes(b->l);
        dw->bytes += (2.0 * dw->accumulate_bytes - b->act_bytes) * k * n;
    }
    /* the TP collectives of this GEMM's input, launched before it (tp_entry), run beside its gradients */
    if (b->beside_dgrad) b->out->ops[b->beside_dgrad - 1].window_op = op_index(b, dx);
    if (b->beside_wgrad) b->out->ops[b->beside_wgrad - 1].window_op = op_index(b, dw);
    b->beside_dgrad = b->beside_wgrad = 0;
}

/* The modules of Megatron's --recompute-modules this layout recomputes (with selective recomputation only). */
static unsigned recomputed_modules(const layout_t *l)
{
    return l->recompute == RECOMPUTE_SELECTIVE ? l->recompute_modules : 0u;
}

/* Output-discarding recomputation (Megatron's --recompute-modules): the forward ops pushed since `first`
 * run once more in the backward, as `recompute` copies that save nothing (docs/model.md, "Recomputed
 * modules"). */
static void recompute_again(builder *b, int first)
{
    int end = b->out->nops;
    for (int i = first; i < end; i++) {
        if (b->out->ops[i].pass != PASS_FWD) continue;
        op_t *re = push(b, b->out->ops[i].name, b->out->ops[i].kind, PASS_RECOMPUTE, b->out->ops[i].count);
        if (!re) return;
        *re = b->out->ops[i];
        re->pass = PASS_RECOMPUTE;
        re->model_flops = 0.0;
        re->saved_bytes = 0.0;
    }
}

/* A memory-bound op moving `bytes` forward and `bwd_bytes` backward. */
static void membound(builder *b, const char *fwd, const char *bwd, int64_t count, double bytes,
                     double bwd_bytes, double flops, double saved, int recompute_full)
{
    op_t *op = push(b, fwd, OP_MEMBOUND, PASS_FWD, count);
    if (!op) return;
    op->bytes = bytes;
    op->flops = flops;
    op->saved_bytes = recompute_full ? 0.0 : saved;
    if (recompute_full) {
        op_t *re = push(b, fwd, OP_MEMBOUND, PASS_RECOMPUTE, count);
        if (!re) return;
        *re = *op;
        re->pass = PASS_RECOMPUTE;
        re->saved_bytes = 0.0;
    }
    if (!bwd) return;
    op_t *back = push(b, bwd, OP_MEMBOUND, PASS_BWD, count);
    if (!back) return;
    back->bytes = bwd_bytes;
    back->flops = 2.0 * flops;
}

static op_t *collective(builder *b, const char *name, pass_t pass, int64_t count, coll_t coll,
                        group_t group, int64_t group_size, double bytes, overlap_t overlap)
{
    if (group_size <= 1 || count <= 0) return NULL;
    op_t *op = push(b, name, OP_COMM, pass, count);
    if (!op) return NULL;
    op->coll = coll;
    op->group = group;
    op->group_size = group_size;
    op->comm_bytes = bytes;
    op->overlap = overlap;
    return op;
}

/* Megatron's gradient bucket, 40M elements (docs/model.md, "Overlap"): the step's gradient reduction and
 * parameter gather run as that many collectives. */
static int64_t buckets(double bytes, double bytes_per_element)
{
    double n = ceil(bytes / (40e6 * bytes_per_element));
    return n > 1.0 ? (int64_t)n : 1;
}

/* Sets how many collectives an op stands for (op_t.pieces), when it was pushed. */
static void in_pieces(op_t *op, int64_t pieces)
{
    if (op) op->pieces = pieces > 1 ? pieces : 1;
}

/* Megatron's tensor-parallel region boundary: an all-reduce without
 * sequence parallelism, a reduce-scatter (forward) / all-gather (backward)
 * with it.  The entry boundary is the conjugate. */
static void tp_exit(builder *b, const char *ar, const char *rs, const char *ag_bwd, int64_t count,
                    double bytes, int recompute_full)
{
    const layout_t *l = b->l;
    if (l->tp <= 1) return;
    if (!l->sp) {
        collective(b, ar, PASS_FWD, count, COLL_ALLREDUCE, GROUP_TP, l->tp, bytes, EXPOSED);
        if (recompute_full) collective(b, ar, PASS_RECOMPUTE, count, COLL_ALLREDUCE, GROUP_TP, l->tp, bytes, EXPOSED);
    } else {
        collective(b, rs, PASS_FWD, count, COLL_REDUCE_SCATTER, GROUP_TP, l->tp, bytes, EXPOSED);
        if (recompute_full) collective(b, rs, PASS_RECOMPUTE, count, COLL_REDUCE_SCATTER, GROUP_TP, l->tp, bytes, EXPOSED);
        collective(b, ag_bwd, PASS_BWD, count, COLL_ALLGATHER, GROUP_TP, l->tp, bytes, EXPOSED);
    }
}

/* With sequence parallelism the region's input is kept sharded (1/t of it
 * saved), so the backward gathers it again for the weight gradient
 * (Korthikanti et al. 2022, section 4.2.2).  With --tp-overlap backward (Megatron's
 * default) that gather runs beside the input-gradient GEMM and the input gradient's
 * reduction beside the weight-gradient GEMM (the next gemm() pairs them); the validator
 * runs them exposed. */
static void tp_entry(builder *b, const char *ag, const char *ar_bwd, const char *rs_bwd, const char *regather,
                     int64_t count, double bytes, int recompute_full)
{
    const layout_t *l = b->l;
    if (l->tp <= 1) return;
    overlap_t beside = l->tp_overlap == TP_OVERLAP_BACKWARD ? OVERLAP_GEMM : EXPOSED;
    op_t *reduce;
    if (!l->sp) {
        reduce = collective(b, ar_bwd, PASS_BWD, count, COLL_ALLREDUCE, GROUP_TP, l->tp, bytes, beside);
    } else {
        /* TE's LayerNormLinear gathers the norm's FP8 output, one byte an element, forward and again for
         * the weight gradient; the input gradient's reduce-scatter stays 16-bit */
        double gathered = l->precision == PREC_FP8 && b->norm_fed ? bytes / b->act_bytes : bytes;
        collective(b, ag, PASS_FWD, count, COLL_ALLGATHER, GROUP_TP, l->tp, gathered, EXPOSED);
        if (recompute_full) collective(b, ag, PASS_RECOMPUTE, count, COLL_ALLGATHER, GROUP_TP, l->tp, gathered, EXPOSED);
        op_t *gather = collective(b, regather, PASS_BWD, count, COLL_ALLGATHER, GROUP_TP, l->tp, gathered, beside);
        if (beside == OVERLAP_GEMM) b->beside_dgrad = op_index(b, gather);
        reduce = collective(b, rs_bwd, PASS_BWD, count, COLL_REDUCE_SCATTER, GROUP_TP, l->tp, bytes, beside);
    }
    if (beside == OVERLAP_GEMM) b->beside_wgrad = op_index(b, reduce);
}

int model_is_causal(const model_t *m) { return strcasecmp(m->family, "bert") != 0; }

/* KV heads per GPU: split across the TP group, or replicated (one per GPU)
 * when the group is wider than the model has KV heads, as Megatron does. */
double local_kv_heads(const model_t *m, int64_t tp)
{
    return m->kv_heads >= tp ? (double)m->kv_heads / (double)tp : 1.0;
}

int64_t layout_cp(const layout_t *l) { return l->cp > 1 ? l->cp : 1; }

double element_bytes(precision_t p) { return (p == PREC_FP32 || p == PREC_TF32) ? 4.0 : 2.0; }

double gradient_bytes(const layout_t *l)
{
    return l->fp32_grads || l->grad_accum == GRAD_ACCUM_FP32_COPY ? 4.0 : element_bytes(l->precision);
}

/* The element a weight gradient adds into in place: the gradient's (fp32 with --fp32-grads), at least 16 bit (an
 * fp8 run's GEMMs write 16-bit gradients) */
double accumulated_gradient_bytes(const layout_t *l)
{
    double g = gradient_bytes(l);
    return g > 2.0 ? g : 2.0;
}

double gradient_memory_bytes(const layout_t *l)
{
    return gradient_bytes(l) + (l->grad_accum == GRAD_ACCUM_FP32_COPY ? element_bytes(l->precision) : 0.0);
}

int64_t dp_group_size(const layout_t *l) { return l->dp * layout_cp(l); }

double rank_tokens(const layout_t *l) { return (double)l->seq * (double)l->mbs / (double)layout_cp(l); }

int64_t layout_ep(const layout_t *l) { return l->ep > 1 ? l->ep : 1; }

double moe_rank_load(const model_t *m, const layout_t *l)
{
    if (!model_is_moe(m) || layout_ep(l) == 1) return 1.0;
    return moe_load_factor(model_moe_imbalance(m), m->capacity_factor, 0);
}

int64_t layout_etp(const layout_t *l) { return l->etp > 0 ? l->etp : l->tp; }

/* Megatron's expert-data-parallel group: the world over expert TP x EP x PP (parallel_state.py), that is the
 * dense layers' TP x CP x DP ranks of a stage over ETP x EP */
int64_t expert_dp_group_size(const layout_t *l)
{
    int64_t edp = l->tp * dp_group_size(l) / (layout_etp(l) * layout_ep(l));
    return edp > 1 ? edp : 1;
}

/* MoE layers on one stage.  Layer i sits, with v chunks per stage of L/(p v) layers each, in chunk i / (L/(p v))
 * on stage chunk mod p (Megatron's interleaved placement); else on the stages in order, as pipeline_split sizes
 * them. */
static int64_t moe_layers_exactly_on_stage(const model_t *m, const layout_t *l, int64_t stage)
{
    int64_t pp = l->pp > 1 ? l->pp : 1, vpp = l->vpp > 1 ? l->vpp : 1;
    int64_t first, middle, last;
    pipeline_split(m, l, &first, &middle, &last);
    int64_t chunk = vpp > 1 && m->layers % (pp * vpp) == 0 && first == middle && middle == last
                        ? m->layers / (pp * vpp) : 0;
    int64_t n = 0;
    for (int64_t i = 0; i < m->layers; i++) {
        int64_t at = chunk ? (i / chunk) % pp : i < first ? 0 : 1 + (middle > 0 ? (i - first) / middle : 0);
        if (at > pp - 1) at = pp - 1;
        n += at == stage && model_layer_is_moe(m, i);
    }
    return n;
}

/* The estimate builds the first, one middle and the last stage, and the middle one stands for them all
 * (estimate.c, settle_time_at): so it gets the most MoE layers any middle stage holds (DeepSeek's dense
 * first layers notwithstanding), the first and the last their own. */
int64_t moe_layers_on_stage(const model_t *m, const layout_t *l, int64_t stage)
{
    if (!model_is_moe(m)) return 0;
    int64_t held = layers_on_stage(m, l, stage), n = 0;
    if (stage == 0 || stage >= l->pp - 1) n = moe_layers_exactly_on_stage(m, l, stage);
    else
        for (int64_t s = 1; s < l->pp - 1 && n < held; s++) {   /* the busiest middle stage; stop once one is all MoE */
            int64_t here = moe_layers_exactly_on_stage(m, l, s);
            if (here > n) n = here;
        }
    return n < held ? n : held;
}

/* One layer's KV exchange buffers, live only while its attention runs: the
 * ring's block in use and the one arriving, and in the backward the same
 * for dK, dV (4 blocks); the all-gather's whole-sequence K and V and their
 * gradients before the reduce-scatter (2 x cp blocks). */
double cp_kv_transient_bytes(const model_t *m, const layout_t *l)
{
    double cp = (double)layout_cp(l);
    if (cp <= 1.0) return 0.0;
    double B = element_bytes(l->precision);
    double block = cp_kv_block_bytes(local_kv_heads(m, l->tp), (double)m->head_dim, (double)l->seq, cp,
                                     (double)l->mbs, B);
    return l->cp_comm == CP_COMM_ALLGATHER ? 2.0 * cp * block : 4.0 * block;
}

/* Context parallelism's KV exchange of one layer (docs/model.md, "Context
 * parallelism"), after the attention ops whose compute hides the ring. */
static void cp_exchange(builder *b, const model_t *m, int64_t count, int recompute)
{
    const layout_t *l = b->l;
    int64_t cp = layout_cp(l);
    if (cp <= 1) return;
    double block = cp_kv_block_bytes(local_kv_heads(m, l->tp), (double)m->head_dim, (double)l->seq, (double)cp,
                                     (double)l->mbs, b->act_bytes);
    if (l->cp_comm == CP_COMM_RING) {
        /* each attention call packs its K, V into the ring's send buffer first, forward and backward */
        const pass_t packs[3] = {PASS_FWD, PASS_RECOMPUTE, PASS_BWD};
        for (int i = 0; i < 3; i++) {
            if (packs[i] == PASS_RECOMPUTE && !recompute) continue;
            op_t *pack = push(b, "cp_kv_pack", OP_MEMBOUND, packs[i], count);
            if (pack) pack->bytes = cp_kv_pack_bytes(block);
        }
        /* cp - 1 steps each way round the ring; the backward passes K, V and the dK, dV accumulated so far */
        int64_t steps = count * (cp - 1);
        collective(b, "cp_ring_kv", PASS_FWD, steps, COLL_SENDRECV, GROUP_CP, cp, block, OVERLAP_ATTENTION);
        if (recompute)
            collective(b, "cp_ring_kv", PASS_RECOMPUTE, steps, COLL_SENDRECV, GROUP_CP, cp, block, OVERLAP_ATTENTION);
        collective(b, "cp_ring_kv_dkv_bwd", PASS_BWD, steps, COLL_SENDRECV, GROUP_CP, cp, 2.0 * block,
                   OVERLAP_ATTENTION);
        /* at each step the dK, dV that arrived are added to those the step computed: both read, one written */
        op_t *add = push(b, "cp_dkv_add", OP_MEMBOUND, PASS_BWD, steps);
        if (add) add->bytes = cp_dkv_add_bytes(block);
        return;
    }
    /* Llama 3: K and V gathered whole before the attention, exposed; the backward gathers them again
     * (nothing of the whole sequence is kept) and reduce-scatters dK, dV to their owners */
    double whole = block * (double)cp;
    collective(b, "cp_allgather_kv", PASS_FWD, count, COLL_ALLGATHER, GROUP_CP, cp, whole, EXPOSED);
    if (recompute) collective(b, "cp_allgather_kv", PASS_RECOMPUTE, count, COLL_ALLGATHER, GROUP_CP, cp, whole, EXPOSED);
    collective(b, "cp_allgather_kv_bwd", PASS_BWD, count, COLL_ALLGATHER, GROUP_CP, cp, whole, EXPOSED);
    collective(b, "cp_reduce_scatter_dkv", PASS_BWD, count, COLL_REDUCE_SCATTER, GROUP_CP, cp, whole, EXPOSED);
}

/* The head size the attention core runs at: MLA's scores use qk_nope + qk_rope per head and its
 * weighted sum v_head_dim, so their mean gives the core's 4 s^2 d FLOPs per head exactly. */
static double attention_head_dim(const model_t *m)
{
    if (!model_is_mla(m)) return (double)m->head_dim;
    return (double)(m->qk_nope_head_dim + m->qk_rope_head_dim + m->v_head_dim) / 2.0;
}

/* Multi-head latent attention's projections (DeepSeek-V2 section 2.1, Megatron-Core's MLA): the
 * down projections and their norms on every TP rank whole, the up projections split by heads.
 * Returns the width of the queries, keys and values the attention reads, per token. */
static double mla_projections(builder *b, const model_t *m, int64_t count, double T, double sharded_input, int full)
{
    const double B = b->act_bytes, h = (double)m->hidden, heads = (double)m->heads / (double)b->l->tp;
    const double qk = (double)(m->qk_nope_head_dim + m->qk_rope_head_dim), v = (double)m->v_head_dim;
    const double q_lora = (double)m->q_lora_rank, kv_lora = (double)m->kv_lora_rank, rope = (double)m->qk_rope_head_dim;
    if (m->q_lora_rank > 0) {
        gemm(b, "q_down", "q_down_dgrad", "q_down_wgrad", count, T, q_lora, h, sharded_input, full);
        membound(b, "q_norm", "q_norm_bwd", count, 2.0 * T * q_lora * B, 4.0 * T * q_lora * B, 5.0 * T * q_lora,
                 T * q_lora * B, full);
        int up = b->out->nops;
        gemm(b, "q_up", "q_up_dgrad", "q_up_wgrad", count, T, heads * qk, q_lora, T * q_lora * B, full);
        if (recomputed_modules(b->l) & RECOMPUTE_MODULE_MLA_UP_PROJ) recompute_again(b, up);
    } else {
        gemm(b, "q_proj", "q_proj_dgrad", "q_proj_wgrad", count, T, heads * qk, h, sharded_input, full);
    }
    /* the latent and the one rotary key all heads share */
    gemm(b, "kv_down", "kv_down_dgrad", "kv_down_wgrad", count, T, kv_lora + rope, h, 0.0, full);
    membound(b, "kv_norm", "kv_norm_bwd", count, 2.0 * T * kv_lora * B, 4.0 * T * kv_lora * B, 5.0 * T * kv_lora,
             T * kv_lora * B, full);
    int up = b->out->nops;
    gemm(b, "kv_up", "kv_up_dgrad", "kv_up_wgrad", count, T, heads * (qk - rope + v), kv_lora, T * kv_lora * B, full);
    if (recomputed_modules(b->l) & RECOMPUTE_MODULE_MLA_UP_PROJ) recompute_again(b, up);
    return heads * (2.0 * qk + v);
}

/* The bytes of K and V one token leaves in a layer's KV cache (docs/model.md, "Multi-head latent
 * attention"): MLA keeps the latent and the shared rotary key, kv_lora + qk_rope values, where
 * ordinary attention keeps 2 x KV heads x head size. */
double kv_cache_bytes_per_token(const model_t *m, double elem_bytes)
{
    if (model_is_mla(m)) return (double)(m->kv_lora_rank + m->qk_rope_head_dim) * elem_bytes;
    return 2.0 * (double)m->kv_heads * (double)m->head_dim * elem_bytes;
}

static void attention_block(builder *b, const model_t *m, int64_t count)
{
    const layout_t *l = b->l;
    const double B = b->act_bytes;
    const double s = (double)l->seq, mb = (double)l->mbs, t = (double)l->tp;
    /* with context parallelism a rank's queries are its seq/cp tokens (chunks i and 2cp-1-i), its keys the whole sequence */
    const double cp = (double)layout_cp(l);
    const double sq = s / cp;                     /* queries (and tokens) of one rank per sequence */
    const double T = rank_tokens(l);              /* tokens per micro-batch on this rank */
    const double Tn = l->sp ? T / t : T;          /* tokens seen by norms and residuals */
    const double h = (double)m->hidden, d = attention_head_dim(m);
    const double heads = (double)m->heads / t;
    const int mla = model_is_mla(m);
    const double kv_heads = mla ? heads : local_kv_heads(m, l->tp);
    const int full = l->recompute == RECOMPUTE_FULL;
    const double mask = m->dropout ? 1.0 : 0.0;   /* one byte per element */
    /* the residual branch's gradient is accumulated by the norm backward
     * (dx +=, one more read there); only dropout's mask needs a kernel here */
    const double residual_bwd_bytes = m->dropout ? 3.0 * Tn * h * B + mask * Tn * h : 0.0;
    const double sharded_input = l->sp ? T * h * B / t : T * h * B;

    /* attention block */
    const unsigned modules = recomputed_modules(l);
    const int up_recomputed = mla && (modules & RECOMPUTE_MODULE_MLA_UP_PROJ);
    int norm_op = b->out->nops;
    membound(b, "attn_norm", "attn_norm_bwd", count, 2.0 * Tn * h * B, 4.0 * Tn * h * B, 5.0 * Tn * h,
             Tn * h * B, full);
    if (modules & RECOMPUTE_MODULE_LAYERNORM) recompute_again(b, norm_op);
    /* Megatron's TE layer fuses the norm into the QKV GEMM (TELayerNormColumnParallelLinear); MLA's
     * down-projections are plain linears after a separate norm */
    b->norm_fed = !mla;
    b->input_recomputed = (modules & RECOMPUTE_MODULE_LAYERNORM) != 0;
    tp_entry(b, "tp_allgather_attn", "tp_allreduce_attn_bwd", "tp_reduce_scatter_attn_bwd", "tp_regather_attn", count,
             T * h * B, full);
    double qkv_width = mla ? mla_projections(b, m, count, T, sharded_input, full) : (heads + 2.0 * kv_heads) * d;
    if (!mla)
        gemm(b, "qkv", "qkv_dgrad", "qkv_wgrad", count, T, qkv_width, h, sharded_input, full);
    if (m->position == POS_ROPE) {
        /* rotary embedding, in place on the q and k columns of the qkv output (all T tokens,
         * the local heads): each element read and written once per pass, 6 FLOP per rotated
         * pair.  It saves nothing: attention saves the rotated q and k (qkv_saved below), and
         * the backward, the inverse rotation of dq and dk, needs only the positions.  MLA
         * rotates the qk_rope columns of each query head and the one shared key. */
        double qk = mla ? T * (heads + 1.0) * (double)m->qk_rope_head_dim : T * (heads + kv_heads) * d;
        int rope_op = b->out->nops;
        membound(b, "rope", "rope_bwd", count, 2.0 * qk * B, 2.0 * qk * B, 3.0 * qk, 0.0, full);
        /* membound() gives a backward twice its forward's FLOPs; the inverse rotation costs the same */
        if (!b->overflow) b->out->ops[b->out->nops - 1].flops = 3.0 * qk;
        if (up_recomputed) recompute_again(b, rope_op);
    }
    /* attention core: scores Q K^T and the weighted sum P V, 2 * 2*s*s*d per head over the full
     * s x s; a causal model needs only the half below the diagonal, and that half is what model
     * and hardware FLOPs count, so that neither ever exceeds what a kernel executes (docs/model.md,
     * "Conventions, kept apart").  A CP rank's share is its sq queries against all s keys, 1/cp of
     * the causal work too once the chunks are paired */
    double core_full = 4.0 * mb * heads * sq * s * d;
    double core_model = model_is_causal(m) ? core_full / 2.0 : core_full;
    /* MLA's up-projections recomputed: Q, K and V come again from the latents the up-projections keep */
    double qkv_saved = up_recomputed ? 0.0 : T * qkv_width * B;
    double scores = mb * heads * s * s;
    int unfused = l->attention == ATTENTION_UNFUSED;
    op_t *att = push(b, "attention", OP_ATTENTION, PASS_FWD, count);
    if (!att) return;
    att->batch = (int64_t)(mb * heads);
    att->kv_batch = (int64_t)(mb * kv_heads);
    att->m = (int64_t)sq;
    att->n = (int64_t)s;
    att->k = (int64_t)d;
    att->model_flops = att->hardware_flops = core_model;
    if (unfused) {
        /* the s x s scores are materialised whole, masked after the fact; the
         * softmax reads and writes them (and the dropout its mask) */
        double kflops[UNFUSED_ATTENTION_KERNELS_MAX], kbytes[UNFUSED_ATTENTION_KERNELS_MAX];
        int kernels = unfused_attention_kernels(s, d, B, mask * 3.0, 0, kflops, kbytes);
        att->flops = core_full;
        att->bytes = 0.0;
        for (int i = 0; i < kernels; i++) att->bytes += mb * heads * kbytes[i];
        double kept = l->recompute == RECOMPUTE_SELECTIVE ? 0.0 : scores * (B + mask * (1.0 + B));
        att->saved_bytes = full ? 0.0 : qkv_saved + kept;
    } else {
        /* flash-style: tiles stay on chip, masked tiles are skipped, and only
         * the output and the log-sum-exp (fp32) survive */
        att->flops = flash_attention_flops(mb, heads, s, d, model_is_causal(m), 0) / cp;
        /* Q and O are the rank's, K and V the whole sequence's (received or gathered) */
        att->bytes = B * (2.0 * T * heads * d + cp * T * 2.0 * kv_heads * d) + 4.0 * mb * heads * sq;
        att->saved_bytes = full ? 0.0 : qkv_saved + 4.0 * mb * heads * sq;
    }
    if (full || (unfused && l->recompute == RECOMPUTE_SELECTIVE)) {
        op_t *re = push(b, "attention", OP_ATTENTION, PASS_RECOMPUTE, count);
        if (!re) return;
        *re = *att;
        re->pass = PASS_RECOMPUTE;
        re->model_flops = 0.0;
        re->saved_bytes = 0.0;
    }
    op_t *att_bwd = push(b, "attention_bwd", OP_ATTENTION, PASS_BWD, count);
    if (!att_bwd) return;
    *att_bwd = *att;
    att_bwd->pass = PASS_BWD;
    att_bwd->name = "attention_bwd";
    att_bwd->saved_bytes = 0.0;
    att_bwd->model_flops = att_bwd->hardware_flops = 2.0 * core_model;
    /* flash's backward also recomputes Q K^T: 2.5 forward passes in all */
    att_bwd->flops = unfused ? 2.0 * att->flops : flash_attention_flops(mb, heads, s, d, model_is_causal(m), 1) / cp;
    att_bwd->bytes = 2.0 * att->bytes;
    if (unfused) {
        /* five kernels, each touching the s x s matrix once (P twice in all, dP
         * written and read, dS written and read twice) */
        double kflops[UNFUSED_ATTENTION_KERNELS_MAX], kbytes[UNFUSED_ATTENTION_KERNELS_MAX];
        int kernels = unfused_attention_kernels(s, d, B, mask * 3.0, 1, kflops, kbytes);
        att_bwd->bytes = 0.0;
        for (int i = 0; i < kernels; i++) att_bwd->bytes += mb * heads * kbytes[i];
    }
    cp_exchange(b, m, count, full);

    /* the output projection reads the heads' values: v_head_dim wide under MLA */
    double values = mla ? heads * (double)m->v_head_dim : heads * d;
    int out_op = b->out->nops;
    gemm(b, "attn_out", "attn_out_dgrad", "attn_out_wgrad", count, T, h, values, T * values * B, full);
    /* its input is the attention's output O, which a flash-style backward needs in 16 bit: an fp8 run
     * keeps O and the GEMM's FP8 transposed copy beside it (docs/model.md, "FP8 GEMMs") */
    if (l->precision == PREC_FP8 && !unfused && !full && !b->overflow)
        b->out->ops[out_op].saved_bytes = T * values * (B + 1.0);
    tp_exit(b, "tp_allreduce_attn", "tp_reduce_scatter_attn", "tp_allgather_attn_bwd", count, T * h * B, full);
    membound(b, "attn_residual", "attn_residual_bwd", count, 3.0 * Tn * h * B + mask * Tn * h,
             residual_bwd_bytes, Tn * h, mask * Tn * h, full);

}

/* A dense FFN of width ffn (split by TP) on the layer's tokens: Megatron's MLP, or a MoE layer's
 * shared experts under the names given. */
static void ffn_ops(builder *b, const model_t *m, int64_t count, double ffn, const char *const names[8])
{
    const layout_t *l = b->l;
    const double B = b->act_bytes, t = (double)l->tp, T = rank_tokens(l), h = (double)m->hidden;
    const double f = ffn / t;
    const int full = l->recompute == RECOMPUTE_FULL;
    const double sharded_input = l->sp ? T * h * B / t : T * h * B;
    double up_width = m->ffn_kind == FFN_SWIGLU ? 2.0 * f : f;
    gemm(b, names[0], names[1], names[2], count, T, up_width, h, sharded_input, full);
    if (m->ffn_kind == FFN_SWIGLU)
        membound(b, names[3], names[4], count, 3.0 * T * f * B, 5.0 * T * f * B, 4.0 * T * f, 2.0 * T * f * B, full);
    else
        membound(b, names[3], names[4], count, 2.0 * T * f * B, 3.0 * T * f * B, 8.0 * T * f, T * f * B, full);
    gemm(b, names[5], names[6], names[7], count, T, h, f, T * f * B, full);
}

static void mlp_norm(builder *b, const model_t *m, int64_t count)
{
    const layout_t *l = b->l;
    const double B = b->act_bytes, h = (double)m->hidden, Tn = l->sp ? rank_tokens(l) / (double)l->tp : rank_tokens(l);
    int norm_op = b->out->nops;
    membound(b, "mlp_norm", "mlp_norm_bwd", count, 2.0 * Tn * h * B, 4.0 * Tn * h * B, 5.0 * Tn * h, Tn * h * B,
             l->recompute == RECOMPUTE_FULL);
    if (recomputed_modules(l) & RECOMPUTE_MODULE_LAYERNORM) recompute_again(b, norm_op);
}

static void mlp_residual(builder *b, const model_t *m, int64_t count)
{
    const layout_t *l = b->l;
    const double B = b->act_bytes, h = (double)m->hidden, Tn = l->sp ? rank_tokens(l) / (double)l->tp : rank_tokens(l);
    const double mask = m->dropout ? 1.0 : 0.0;
    const double residual_bwd_bytes = m->dropout ? 3.0 * Tn * h * B + mask * Tn * h : 0.0;
    membound(b, "mlp_residual", "mlp_residual_bwd", count, 3.0 * Tn * h * B + mask * Tn * h, residual_bwd_bytes, Tn * h,
             mask * Tn * h, l->recompute == RECOMPUTE_FULL);
}

static void dense_mlp_block(builder *b, const model_t *m, int64_t count)
{
    static const char *const names[8] = {"mlp_up", "mlp_up_dgrad", "mlp_up_wgrad", NULL, NULL,
                                         "mlp_down", "mlp_down_dgrad", "mlp_down_wgrad"};
    const char *act[8];
    memcpy(act, names, sizeof act);
    act[3] = m->ffn_kind == FFN_SWIGLU ? "swiglu" : "gelu";
    act[4] = m->ffn_kind == FFN_SWIGLU ? "swiglu_bwd" : "gelu_bwd";
    const layout_t *l = b->l;
    const double T = rank_tokens(l), h = (double)m->hidden;
    const int full = l->recompute == RECOMPUTE_FULL;
    mlp_norm(b, m, count);
    b->norm_fed = 1;   /* TELayerNormColumnParallelLinear: the norm fused into the first FFN GEMM */
    b->input_recomputed = (recomputed_modules(l) & RECOMPUTE_MODULE_LAYERNORM) != 0;
    tp_entry(b, "tp_allgather_mlp", "tp_allreduce_mlp_bwd", "tp_reduce_scatter_mlp_bwd", "tp_regather_mlp", count,
             T * h * b->act_bytes, full);
    ffn_ops(b, m, count, (double)m->ffn, act);
    tp_exit(b, "tp_allreduce_mlp", "tp_reduce_scatter_mlp", "tp_allgather_mlp_bwd", count, T * h * b->act_bytes, full);
    mlp_residual(b, m, count);
}

/* A grouped GEMM over the rank's local experts: built as one GEMM of all its routed tokens, then
 * reshaped to `experts` GEMMs of `per_expert` tokens each (the shape the kernel runs and its
 * efficiency follows), each expert's weights read once.  `load` is the busiest rank's tokens over
 * the mean: executed FLOPs carry it, model and hardware FLOPs count the mean.  The shape stays the
 * balanced expert's and the waves' time scales by the load (rows_load): the busiest rank's extra
 * rows fall unevenly on its experts, adding tiles, not a wave to each (docs/model.md, "Mixture of
 * experts").  One expert a rank runs the busiest rank's rows in its one GEMM. */
static void grouped_gemm(builder *b, const char *fwd, const char *dgrad, const char *wgrad, int64_t count,
                         double experts, double per_expert, double load, double n, double k, double saved, int full)
{
    int first = b->out->nops;
    gemm(b, fwd, dgrad, wgrad, count, experts * per_expert * load, n, k, saved, full);
    const int spread = experts > 1.0;   /* one expert a rank: its GEMM is the busiest rank's rows */
    double tokens = spread ? per_expert : per_expert * load;
    for (int i = first; i < b->out->nops; i++) {
        op_t *op = &b->out->ops[i];
        op->batch = (int64_t)experts;
        op->rows_load = spread ? load : 1.0;
        op->separate_launches = b->l->expert_gemm == EXPERT_GEMM_STREAMS;
        op->routed_rows = b->l->expert_rows == EXPERT_ROWS_ROUTED;
        if (op->weight_gradient) op->k = (int64_t)tokens;
        else op->m = (int64_t)tokens;
        op->model_flops /= load;
        op->hardware_flops /= load;
        op->bytes += b->act_bytes * k * n * (experts - 1.0);             /* every expert's weights */
    }
}

/* A MoE layer's FFN (docs/model.md, "Mixture of experts"), as Megatron-Core's all-to-all token
 * dispatcher runs it: each TP rank routes its 1/t share of the tokens (the sequence-parallel input),
 * sends each to its top_k experts' ranks (all-to-all in the EP group), the expert-TP group (etp ranks)
 * gathers what its experts received, the experts run as grouped GEMMs split by ETP, and the way back
 * is the mirror image (MoEAlltoAllTokenDispatcher: A2A over EP, then AG over ETP; RS over ETP, then
 * A2A).  With ETP 1 nothing is gathered: each rank's experts run on the tokens it received.  Shared
 * experts run beside them as an ordinary MLP over the attention's TP. */
/* A MoE layer's routing counts on their way to the host, before the dispatch (and again in a full recomputation; the
 * backward knows the sizes), with the host's wait (docs/model.md, "The dispatcher's counts and the host's wait"):
 * the all-to-all's split sizes, every EP rank's counts all-gathered over the EP group (Megatron's all-to-all
 * dispatcher); without EP, an expert TP group's gather of uneven row counts needs every ETP rank's the same way
 * (Megatron's output splits; validator/moe.c's gather); with no group at all they are still copied to the host,
 * where Transformer Engine's grouped linear takes its split sizes (Megatron's tokens_per_expert, the trainer's GEMM
 * sizes): the copy at a kernel's fixed cost. */
static void routing_counts(builder *b, int64_t count, int full, double ep, double etp, double E, overlap_t hide)
{
    const pass_t passes[2] = {PASS_FWD, PASS_RECOMPUTE};
    for (int i = 0; i < (full ? 2 : 1); i++) {
        op_t *op;
        if (ep > 1.0)
            op = collective(b, "ep_counts", passes[i], count, COLL_ALLGATHER, GROUP_EP, (int64_t)ep, moe_counts_bytes(ep, E),
                            hide);
        else if (etp > 1.0)
            op = collective(b, "ep_counts", passes[i], count, COLL_ALLGATHER, GROUP_ETP, (int64_t)etp,
                            moe_counts_bytes(etp, E), EXPOSED);
        else if ((op = push(b, "ep_counts", OP_MEMBOUND, passes[i], count)))
            op->bytes = E * 4.0;
        if (op) op->host_sync = 1;
    }
}

static void moe_mlp_block(builder *b, const model_t *m, int64_t count)
{
    static const char *const shared_names[8] = {"shared_up", "shared_up_dgrad", "shared_up_wgrad", "shared_act",
                                                "shared_act_bwd", "shared_down", "shared_down_dgrad", "shared_down_wgrad"};
    const layout_t *l = b->l;
    const double B = b->act_bytes, t = (double)l->tp, T = rank_tokens(l), h = (double)m->hidden;
    const double E = (double)m->experts, k = (double)m->top_k, ep = (double)layout_ep(l);
    const double etp = (double)layout_etp(l);
    const double Tr = T / t;                       /* tokens a TP rank routes */
    const double f = (double)model_expert_ffn(m) / etp;
    const int full = l->recompute == RECOMPUTE_FULL;
    const double load = moe_rank_load(m, l);
    const double local = E / ep;                   /* experts a rank holds */
    const double Tg = T * k * etp / t;             /* routed rows a rank's experts run, balanced, after the ETP gather
                                                      (multiplied first: exactly T k when etp is t) */
    const double per_expert = Tg / local;          /* tokens each gets */
    mlp_norm(b, m, count);
    /* Megatron's router is a plain linear in 16 bit (or fp32), outside Transformer Engine's FP8 */
    const unsigned modules = recomputed_modules(l);
    b->sixteen_bit = 1;
    b->input_recomputed = (modules & RECOMPUTE_MODULE_LAYERNORM) != 0;
    gemm(b, "router", "router_dgrad", "router_wgrad", count, Tr, E, h, Tr * h * B, full);
    b->sixteen_bit = 0;
    /* softmax (or sigmoid) and top-k over the fp32 scores, the probabilities kept for backward */
    membound(b, "router_topk", "router_topk_bwd", count, 2.0 * Tr * E * 4.0, 2.0 * Tr * E * 4.0, 5.0 * Tr * E,
             Tr * k * 4.0, full);
    /* the tokens gathered into expert order before the dispatch, each read top_k times and written as k rows; its
     * backward sums each token's k row gradients (Megatron's permute; docs/model.md, "Mixture of experts") */
    membound(b, "moe_permute", "moe_permute_bwd", count, 2.0 * Tr * k * h * B, (k + 1.0) * Tr * h * B, 0.0, 0.0, full);
    double a2a = moe_alltoall_bytes(Tr, k, h, B);
    overlap_t hide = l->ep_overlap ? OVERLAP_MICROBATCH : EXPOSED;
    /* group-limited routing is costed with DeepSeek's dispatcher, one copy per target node over IB */
    double nodes = ep * etp / (double)l->gpus_per_node, share = 1.0;   /* the EP group spans etp x ep ranks */
    if (m->moe_group_limit > 0 && nodes > 1.0)
        share = moe_remote_node_copies(k, nodes, (double)m->moe_groups, (double)m->moe_group_limit) /
                moe_remote_node_copies(k, nodes, 0.0, 0.0);
    int first_ep_op = b->out->nops;
    routing_counts(b, count, full, ep, etp, E, hide);
    /* each row's gate travels with it, and its gradient back in the backward: Megatron-Core's all-to-all
     * dispatcher sends the permuted probs, which the experts apply in their activation, in a message of their own
     * (one latency more each way); DeepSeek's dispatcher in the same kernel as the rows (docs/model.md, "Mixture of
     * experts", permute and unpermute).  A number a row, fp32 */
    const double probs = moe_alltoall_bytes(Tr, k, 1.0, 4.0);
    const int64_t messages = m->moe_group_limit > 0 ? 1 : 2;
    in_pieces(collective(b, "ep_alltoall_dispatch", PASS_FWD, count, COLL_ALLTOALL, GROUP_EP, (int64_t)ep, a2a + probs, hide),
              messages);
    if (full)
        in_pieces(collective(b, "ep_alltoall_dispatch", PASS_RECOMPUTE, count, COLL_ALLTOALL, GROUP_EP, (int64_t)ep, a2a + probs,
                             hide), messages);
    in_pieces(collective(b, "ep_alltoall_dispatch_bwd", PASS_BWD, count, COLL_ALLTOALL, GROUP_EP, (int64_t)ep, a2a + probs, hide),
              messages);
    /* the received rows between the all-to-all's (or the expert TP gather's) rank-major order and the experts'
     * (Megatron's sort_chunks_by_idxs; validator/moe.c's chunk copy): once after the dispatch and once before the
     * combine, each pass; the busiest rank's rows */
    if (ep > 1.0 || etp > 1.0) {
        double sort = moe_sort_chunks_bytes(Tg * load, h, B, local, ep);
        membound(b, "moe_sort_chunks", "moe_sort_chunks_bwd", 2 * count, sort, sort, 0.0, 0.0, full);
    }
    const int64_t etp_ranks = layout_etp(l);
    double routed = Tg * h * B;                    /* what the ETP group's experts received, gathered */
    const double routed_probs = Tg * 4.0;          /* ... and their gates, gathered apart (as the all-to-all's) */
    in_pieces(collective(b, "moe_tp_allgather", PASS_FWD, count, COLL_ALLGATHER, GROUP_ETP, etp_ranks, routed + routed_probs,
                         EXPOSED), 2);
    if (full)
        in_pieces(collective(b, "moe_tp_allgather", PASS_RECOMPUTE, count, COLL_ALLGATHER, GROUP_ETP, etp_ranks,
                             routed + routed_probs, EXPOSED), 2);
    in_pieces(collective(b, "moe_tp_reduce_scatter_bwd", PASS_BWD, count, COLL_REDUCE_SCATTER, GROUP_ETP, etp_ranks,
                         routed + routed_probs, EXPOSED), 2);
    double up_width = m->ffn_kind == FFN_SWIGLU ? 2.0 * f : f;
    /* the routed rows kept for the backward are the busiest rank's, load x the mean: the memory that runs out is
     * that rank's, and a router that favours one rank's experts does so in every layer (measured: the busier
     * rank's pool of routed rows follows the imbalance; docs/model.md, "Mixture of experts", memory) */
    double Tk = Tg * load;
    grouped_gemm(b, "expert_up", "expert_up_dgrad", "expert_up_wgrad", count, local, per_expert, load, up_width, h,
                 Tk * h * B, full);
    int act_op = b->out->nops;
    if (m->ffn_kind == FFN_SWIGLU)
        membound(b, "expert_swiglu", "expert_swiglu_bwd", count, 3.0 * Tk * f * B, 5.0 * Tk * f * B, 4.0 * Tk * f,
                 2.0 * Tk * f * B, full);
    else
        membound(b, "expert_gelu", "expert_gelu_bwd", count, 2.0 * Tk * f * B, 3.0 * Tk * f * B, 8.0 * Tk * f,
                 Tk * f * B, full);
    if (modules & RECOMPUTE_MODULE_MOE_ACT) {
        recompute_again(b, act_op);
        b->input_recomputed = 1;
    }
    grouped_gemm(b, "expert_down", "expert_down_dgrad", "expert_down_wgrad", count, local, per_expert, load, h, f,
                 Tk * f * B, full);
    collective(b, "moe_tp_reduce_scatter", PASS_FWD, count, COLL_REDUCE_SCATTER, GROUP_ETP, etp_ranks, routed, EXPOSED);
    if (full) collective(b, "moe_tp_reduce_scatter", PASS_RECOMPUTE, count, COLL_REDUCE_SCATTER, GROUP_ETP, etp_ranks, routed, EXPOSED);
    collective(b, "moe_tp_allgather_bwd", PASS_BWD, count, COLL_ALLGATHER, GROUP_ETP, etp_ranks, routed, EXPOSED);
    collective(b, "ep_alltoall_combine", PASS_FWD, count, COLL_ALLTOALL, GROUP_EP, (int64_t)ep, a2a, hide);
    if (full) collective(b, "ep_alltoall_combine", PASS_RECOMPUTE, count, COLL_ALLTOALL, GROUP_EP, (int64_t)ep, a2a, hide);
    collective(b, "ep_alltoall_combine_bwd", PASS_BWD, count, COLL_ALLTOALL, GROUP_EP, (int64_t)ep, a2a, hide);
    /* after the combine, each token's k expert rows summed (Megatron-Core's unpermute; the experts weighed their
     * rows by the gates in their activation, activation_func_with_probs): k rows read and one written; the backward
     * hands each of the k rows its token's output gradient, one row read and k written, and keeps nothing of the
     * experts' outputs: the gates' gradient is the activation's (docs/model.md, "Mixture of experts") */
    membound(b, "moe_unpermute", "moe_unpermute_bwd", count, (k + 1.0) * Tr * h * B, (k + 1.0) * Tr * h * B,
             Tr * k * h, 0.0, full);
    for (int i = first_ep_op; i < b->out->nops; i++)
        if (b->out->ops[i].kind == OP_COMM && b->out->ops[i].group == GROUP_EP) b->out->ops[i].internode_share = share;
    if (m->shared_experts > 0) {
        tp_entry(b, "tp_allgather_shared", "tp_allreduce_shared_bwd", "tp_reduce_scatter_shared_bwd", "tp_regather_shared",
                 count, T * h * B, full);
        b->input_recomputed = (modules & RECOMPUTE_MODULE_LAYERNORM) != 0;   /* the norm's output again */
        ffn_ops(b, m, count, (double)(m->shared_experts * model_expert_ffn(m)), shared_names);
        tp_exit(b, "tp_allreduce_shared", "tp_reduce_scatter_shared", "tp_allgather_shared_bwd", count, T * h * B, full);
    }
    mlp_residual(b, m, count);
}

static void transformer_layers(builder *b, const model_t *m, int64_t count, int64_t moe)
{
    const layout_t *l = b->l;
    attention_block(b, m, count);
    if (count - moe > 0) dense_mlp_block(b, m, count - moe);
    if (moe > 0) moe_mlp_block(b, m, moe);
    if (l->recompute == RECOMPUTE_FULL) {
        /* what full recomputation keeps: each layer's input */
        op_t *keep = push(b, "layer_input", OP_MEMBOUND, PASS_FWD, count);
        if (!keep) return;
        double T = rank_tokens(l), h = (double)m->hidden;
        keep->saved_bytes = l->sp ? T * h * b->act_bytes / (double)l->tp : T * h * b->act_bytes;
    }
}

static void embedding(builder *b, const model_t *m)
{
    const layout_t *l = b->l;
    const double B = b->act_bytes, T = rank_tokens(l), h = (double)m->hidden;
    const double Tn = l->sp ? T / (double)l->tp : T;
    const int learned = m->position == POS_LEARNED;
    double reads = T * h * B * (learned ? 2.0 : 1.0);
    /* backward: the output gradient read once, each token's row of the table read and written
     * (an upper bound: tokens that repeat share a row), and with learned positions the
     * position table's rows read and written.  Layer 0's norm backward sums that gradient
     * while it writes the residual gradient (sx_layernorm_backward_pos); with sequence
     * parallelism it cannot (its rows are sharded), and the embedding reads the gathered
     * gradient a second time.  The position rows are charged here either way. */
    double bwd = 3.0 * T * h * B;
    if (learned) bwd += 2.0 * (double)l->seq / (double)layout_cp(l) * h * B + (l->sp && l->tp > 1 ? T * h * B : 0.0);
    membound(b, "embedding", "embedding_bwd", 1, reads + T * h * B, bwd, 0.0, m->dropout ? Tn * h : 0.0, 0);
    /* vocabulary-parallel lookup: each rank holds V/t rows, the sum finishes it */
    if (l->tp > 1)
        collective(b, l->sp ? "tp_reduce_scatter_embedding" : "tp_allreduce_embedding", PASS_FWD, 1,
                   l->sp ? COLL_REDUCE_SCATTER : COLL_ALLREDUCE, GROUP_TP, l->tp, T * h * B, EXPOSED);
    /* with sequence parallelism the lookup's backward needs every token's gradient */
    if (l->tp > 1 && l->sp)
        collective(b, "tp_allgather_embedding_bwd", PASS_BWD, 1, COLL_ALLGATHER, GROUP_TP, l->tp, T * h * B, EXPOSED);
}

int64_t padded_vocab(const model_t *m, int64_t tp)
{
    int64_t unit = 128 * tp;
    return (m->vocab + unit - 1) / unit * unit;
}

static void lm_head(builder *b, const model_t *m)
{
    const layout_t *l = b->l;
    const double B = b->act_bytes, T = rank_tokens(l), h = (double)m->hidden, t = (double)l->tp;
    /* the table is padded (Megatron, llm.c) so that its GEMMs keep the fast
     * path; what runs is the padded width, what MFU counts the real one */
    const double Tn = l->sp ? T / t : T, Vt = (double)padded_vocab(m, l->tp) / t;
    const double real_fraction = (double)m->vocab / (double)padded_vocab(m, l->tp);
    membound(b, "final_norm", "final_norm_bwd", 1, 2.0 * Tn * h * B, 3.0 * Tn * h * B, 5.0 * Tn * h,
             Tn * h * B, 0);
    tp_entry(b, "tp_allgather_head", "tp_allreduce_head_bwd", "tp_reduce_scatter_head_bwd", "tp_regather_head", 1,
             T * h * B, 0);
    int first_head_op = b->out->nops;
    /* Megatron-Core's output layer is its own ColumnParallelLinear, not a Transformer Engine module:
     * it runs in 16 bit in an fp8 run (docs/model.md, "FP8 GEMMs") */
    b->sixteen_bit = 1;
    gemm(b, "lm_head", "lm_head_dgrad", "lm_head_wgrad", 1, T, Vt, h, T * h * B, 0);
    b->sixteen_bit = 0;
    for (int i = first_head_op; i < b->out->nops; i++) {
        b->out->ops[i].model_flops *= real_fraction;
        b->out->ops[i].hardware_flops *= real_fraction;
    }
    if (l->loss == LOSS_FP32) {
        /* the frameworks' loss: the 16-bit logits cast to fp32 (read 2, write 4), the log-softmax written
         * (read 4, write 4); backward: the loss gradient written (4), the log-softmax's backward (read 4 + 4,
         * write 4), the cast back (read 4, write 2): 14 bytes a logit forward, 22 backward (docs/model.md,
         * "The loss") */
        membound(b, "cross_entropy", "cross_entropy_bwd", 1, 14.0 * T * Vt, 22.0 * T * Vt, 5.0 * T * Vt, 0.0, 0);
        if (!b->overflow) b->out->ops[b->out->nops - 1].flops = 3.0 * T * Vt;
    } else if (l->loss == LOSS_FUSED_OUTPLACE) {
        /* flash-attn's cross-entropy: the forward reads the 16-bit logits and keeps a log-sum-exp per row;
         * the backward reads them again and writes their gradient to a new buffer (docs/model.md, "The loss") */
        membound(b, "cross_entropy", "cross_entropy_bwd", 1, T * Vt * B, 2.0 * T * Vt * B, 5.0 * T * Vt, 0.0, 0);
    } else {
        /* fused softmax cross-entropy over the local vocabulary shard: one pass
         * reads the logits and writes their gradient in place (llm.c, Megatron's
         * fused loss); the backward has nothing left to do */
        membound(b, "cross_entropy", NULL, 1, 2.0 * T * Vt * B, 0.0, 5.0 * T * Vt, 0.0, 0);
    }
    if (l->logit_metrics > 0) {
        /* training metrics on the logits after the backward (Composer's cross-entropy and perplexity): each a
         * torch cross-entropy under autocast, the 16-bit logits cast to fp32 (read 2, write 4) and the
         * log-softmax written (read 4, write 4), no backward: 14 bytes a logit each (docs/model.md, "The loss") */
        double n = (double)l->logit_metrics;
        membound(b, "logit_metrics", NULL, 1, 14.0 * n * T * Vt, 0.0, 5.0 * n * T * Vt, 0.0, 0);
    }
    /* vocabulary-parallel loss: max, sum of exponentials, target logit */
    collective(b, "tp_allreduce_loss", PASS_FWD, 3, COLL_ALLREDUCE, GROUP_TP, l->tp, T * 4.0, EXPOSED);
}

/* DeepSeek-V3's multi-token prediction (docs/model.md, "Multi-token prediction"), on the last stage after
 * the model's own head: each module looks up the tokens one further ahead in the shared table, normalises
 * them and the previous depth's hidden state, projects the two concatenated (2h -> h, a column-parallel
 * linear whose output Megatron gathers over TP), runs one layer of the last layer's kind, and predicts through
 * the shared output layer with its own loss. */
static void mtp_modules(builder *b, const model_t *m)
{
    const layout_t *l = b->l;
    const double B = b->act_bytes, T = rank_tokens(l), h = (double)m->hidden, t = (double)l->tp;
    const double Tn = l->sp ? T / t : T;
    const int full = l->recompute == RECOMPUTE_FULL;
    const int64_t moe = model_mtp_layer_is_moe(m) ? 1 : 0;
    for (int64_t d = 0; d < m->mtp_layers; d++) {
        embedding(b, m);
        membound(b, "mtp_norm", "mtp_norm_bwd", 2, 2.0 * Tn * h * B, 3.0 * Tn * h * B, 5.0 * Tn * h, Tn * h * B, full);
        tp_entry(b, "tp_allgather_mtp", "tp_allreduce_mtp_bwd", "tp_reduce_scatter_mtp_bwd", "tp_regather_mtp", 1,
                 2.0 * T * h * B, full);
        gemm(b, "mtp_proj", "mtp_proj_dgrad", "mtp_proj_wgrad", 1, T, h / t, 2.0 * h, (l->sp ? Tn : T) * 2.0 * h * B, full);
        collective(b, "tp_allgather_mtp_proj", PASS_FWD, 1, COLL_ALLGATHER, GROUP_TP, l->tp, T * h * B, EXPOSED);
        transformer_layers(b, m, 1, moe);
        lm_head(b, m);
    }
}

static void pipeline(builder *b, const model_t *m, int first, int last)
{
    const layout_t *l = b->l;
    if (l->pp <= 1) return;
    /* Megatron sends 1/t of the boundary activations per TP rank */
    double bytes = rank_tokens(l) * (double)m->hidden * b->act_bytes / (double)l->tp;
    int64_t chunks = l->vpp > 1 ? l->vpp : 1;
    collective(b, "pp_send_activations", PASS_FWD, chunks - (last ? 1 : 0), COLL_SENDRECV, GROUP_PP, l->pp,
               bytes, EXPOSED);
    collective(b, "pp_send_grads", PASS_BWD, chunks - (first ? 1 : 0), COLL_SENDRECV, GROUP_PP, l->pp,
               bytes, EXPOSED);
}

/* Parameters held by one GPU of the stage (before ZeRO sharding), and of them the routed experts'.
 * TP splits what Megatron splits; MLA's down projections, the norms and the router stay whole;
 * the routed experts are split over ETP x EP instead (docs/model.md, "Mixture of experts", memory). */
static double stage_params(const model_t *m, const layout_t *l, int64_t layers, int64_t moe, int first, int last,
                           double *expert_params)
{
    double t = (double)l->tp;
    double norms = 2.0 * model_norm_params(m);
    double whole = model_attention_replicated_params(m);
    double attention = (model_attention_params_per_layer(m) - whole) / t + whole + norms;
    if (m->kv_heads < l->tp && !model_is_mla(m)) /* each rank keeps a whole replicated KV head, not kv/t of one */
        attention += 2.0 * (double)m->hidden * (double)m->head_dim * (1.0 - (double)m->kv_heads / t);
    /* the multi-token prediction modules live on the last stage: a layer each, and their projection and norms */
    double mtp = 0.0;
    if (last && m->mtp_layers > 0) {
        double h = (double)m->hidden;
        layers += m->mtp_layers;
        if (model_mtp_layer_is_moe(m)) moe += m->mtp_layers;
        mtp = (double)m->mtp_layers * (2.0 * h * h / t + 3.0 * model_norm_params(m));
    }
    double dense_ffn = model_dense_ffn_params(m) / t;
    double moe_ffn = model_router_params(m) + (double)m->shared_experts * model_ffn_params_per_expert(m) / t;
    *expert_params = (double)moe * (double)m->experts * model_ffn_params_per_expert(m) /
                     ((double)layout_etp(l) * (double)layout_ep(l));
    double params = (double)layers * attention + (double)(layers - moe) * dense_ffn + (double)moe * moe_ffn + *expert_params + mtp;
    double padding = (double)(padded_vocab(m, l->tp) - m->vocab) * (double)m->hidden / t;
    if (first) params += model_embedding_params(m) / t + padding;
    if (last) {
        params += model_final_params(m);
        /* a tied head on a different stage keeps its own copy of the table; so does an untied model's last stage
         * for its multi-token prediction modules, which look tokens up in the shared table */
        if (!m->tied_embeddings) params += model_head_params(m) / t + padding;
        if ((m->tied_embeddings || m->mtp_layers > 0) && !first) params += (double)m->vocab * (double)m->hidden / t + padding;
    }
    return params;
}

void zero_unit_params(const model_t *m, const layout_t *l, int first, int last, double *layer, double *big)
{
    double t = (double)l->tp;
    /* a MoE layer holds its rank's experts: 1/ep of the routed ones, each split over etp; they are gathered, and
     * so buffered, only where ZeRO shards them over an expert-data-parallel group of more than one rank (at one,
     * each rank keeps its experts whole: docs/validation/2026-11-27-h200x2-heldout-moe) */
    double routed = (double)m->experts > 1.0 ? (double)m->experts * model_ffn_params_per_expert(m) : 0.0;
    double experts = routed / ((layout_etp(l) == l->tp ? t : (double)layout_etp(l)) * (double)layout_ep(l));
    *layer = (model_layer_params(m) - routed) / t + (expert_dp_group_size(l) > 1 ? experts : 0.0);
    double table = (double)padded_vocab(m, l->tp) * (double)m->hidden / t;
    double unit = 0.0;
    if (first) unit = table;                                   /* the embedding */
    if (last && (!first || !m->tied_embeddings)) unit = table > unit ? table : unit;   /* the head or its copy */
    /* counted whatever its size against a layer, so that memory never grows with EP (the plan prunes
     * on that); the step allocates it only when it is the larger, one layer's worth at most too many */
    *big = unit;
}

/* The gradient reduction and ZeRO's gathers of `params` over `group` ranks: ZeRO-2/3 and FSDP reduce and
 * gather a layer at a time, the rest runs in Megatron's buckets (op_t.pieces). */
static void dp_collectives(builder *b, double params, group_t group_kind, int64_t group, const char *const names[7])
{
    const layout_t *l = b->l;
    double weight_bytes = element_bytes(l->precision);
    double grad_bytes = gradient_bytes(l);
    int64_t layers = b->out->layers > 0 ? b->out->layers : 1;
    /* DeepSpeed's BF16 optimizer all-reduces its fp32 gradients whole and, sharding the optimizer, gathers
     * the updated 16-bit weights (docs/model.md, "Gradient accumulation") */
    if (l->grad_accum == GRAD_ACCUM_FP32_COPY) {
        in_pieces(collective(b, names[0], PASS_STEP, 1, COLL_ALLREDUCE, group_kind, group, params * grad_bytes, OVERLAP_BWD),
                  buckets(params * grad_bytes, grad_bytes));
        if (l->zero == 1)
            in_pieces(collective(b, names[2], PASS_STEP, 1, COLL_ALLGATHER, group_kind, group, params * weight_bytes,
                                 OVERLAP_FWD), buckets(params * weight_bytes, weight_bytes));
        return;
    }
    if (l->zero == 0) {
        in_pieces(collective(b, names[0], PASS_STEP, 1, COLL_ALLREDUCE, group_kind, group, params * grad_bytes, OVERLAP_BWD),
                  buckets(params * grad_bytes, grad_bytes));
    } else {
        /* ZeRO-1 keeps whole gradients and reduces them once per step; from
         * ZeRO-2 on a rank keeps only its shard, so every micro-batch's
         * backward must reduce-scatter what it produced */
        in_pieces(collective(b, names[1], l->zero >= 2 ? PASS_BWD : PASS_STEP, 1, COLL_REDUCE_SCATTER, group_kind, group,
                             params * grad_bytes, OVERLAP_BWD),
                  l->zero >= 2 ? layers : buckets(params * grad_bytes, grad_bytes));
        if (l->zero < 3)
            in_pieces(collective(b, names[2], PASS_STEP, 1, COLL_ALLGATHER, group_kind, group, params * weight_bytes,
                                 OVERLAP_FWD), buckets(params * weight_bytes, weight_bytes));
    }
    if (l->zero >= 2 && group > 1) {
        /* each micro-batch's reduce-scattered slice is added into the rank's gradient shard: read both,
         * write the shard (measured as its own kernel: docs/validation/2026-11-25-h100x2-zero) */
        op_t *add = push(b, names[5], OP_MEMBOUND, PASS_BWD, 1);
        if (add) {
            add->group = group_kind;
            add->bytes = 3.0 * params / (double)group * grad_bytes;
        }
        /* and each micro-batch's gradients pass once more through memory, whole, on the compute stream: the
         * validator clears a bucket's buffer before the backward writes it (measured 1.86 ms a micro-batch for
         * LLaMA-3.2 3B's 6.4 GB on 2 x H200, docs/validation/2026-11-26-h200x2-zero-side); FSDP and DeepSpeed
         * make the same pass copying the gradients into the reduce-scatter's flat buffer */
        op_t *clear = push(b, names[6], OP_MEMBOUND, PASS_BWD, 1);
        if (clear) {
            clear->group = group_kind;
            clear->bytes = params * grad_bytes;
        }
    }
    if (l->zero == 3) {
        /* ZeRO-3 gathers the weights before each forward and each backward */
        in_pieces(collective(b, names[3], PASS_FWD, 1, COLL_ALLGATHER, group_kind, group, params * weight_bytes, OVERLAP_FWD),
                  layers);
        in_pieces(collective(b, names[4], PASS_BWD, 1, COLL_ALLGATHER, group_kind, group, params * weight_bytes, OVERLAP_BWD),
                  layers);
    }
}

/* The weights of the stage's FP8 GEMMs, one GPU's shard: every forward GEMM but those kept in 16 bit
 * (a grouped GEMM holds one weight per expert).  0 unless the run is fp8. */
static double fp8_gemm_weights(const stage_ops *s, const layout_t *l)
{
    if (l->precision != PREC_FP8) return 0.0;
    double weights = 0.0;
    for (int i = 0; i < s->nops; i++) {
        const op_t *op = &s->ops[i];
        if (op->kind == OP_GEMM && op->pass == PASS_FWD && !op->sixteen_bit)
            weights += (double)op->k * (double)op->n * (double)(op->batch > 1 ? op->batch : 1) * (double)op->count;
    }
    return weights;
}

static void step_ops(builder *b, const model_t *m, double params, double expert_params)
{
    static const char *const dense_names[7] = {"dp_allreduce_grads", "dp_reduce_scatter_grads", "dp_allgather_params",
                                               "dp_allgather_params_fwd", "dp_allgather_params_bwd", "dp_grad_shard_add",
                                               "dp_grad_buffer_clear"};
    static const char *const expert_names[7] = {"edp_allreduce_grads", "edp_reduce_scatter_grads", "edp_allgather_params",
                                                "edp_allgather_params_fwd", "edp_allgather_params_bwd",
                                                "edp_grad_shard_add", "edp_grad_buffer_clear"};
    const layout_t *l = b->l;
    double weight_bytes = element_bytes(l->precision);
    double grad_bytes = gradient_bytes(l);
    /* context parallel ranks hold the same weights and see different tokens: the gradient is reduced,
     * and ZeRO shards, over DP x CP (Megatron's data-parallel group with CP); the routed experts'
     * over the expert-data-parallel group, tp x cp x dp / (etp x ep) ranks */
    double dense = params - expert_params;
    double dp = (double)dp_group_size(l), edp = (double)expert_dp_group_size(l);
    dp_collectives(b, dense, GROUP_DP, dp_group_size(l), dense_names);
    if (expert_params > 0.0) dp_collectives(b, expert_params, GROUP_EDP, expert_dp_group_size(l), expert_names);
    /* AdamW over the local shard: read and write master weight, m and v in
     * fp32, read the gradient, write the 16-bit weight */
    double shard = l->zero >= 1 ? dense / dp + expert_params / edp : params;
    /* the gradients are accumulated into over a step's micro-batches, so they
     * are cleared before its first (the validator measured it as its own op) */
    op_t *clear = push(b, "zero_grads", OP_MEMBOUND, PASS_STEP, 1);
    if (!clear) return;
    clear->bytes = (l->zero >= 2 ? shard : params) * grad_bytes;
    /* with sequence parallelism each rank's norm weights see 1/t of the
     * tokens: their gradients are summed over the TP group, one layer at a
     * time, once per step (Megatron's allreduce of the sequence-parallel
     * gradients), exposed */
    if (l->sp && l->tp > 1)
        collective(b, "tp_allreduce_norm_grads", PASS_STEP, b->out->layers + (b->out->last ? 1 : 0), COLL_ALLREDUCE,
                   GROUP_TP, l->tp, 2.0 * model_norm_params(m) * grad_bytes, EXPOSED);
    op_t *opt = push(b, "optimizer", OP_MEMBOUND, PASS_STEP, 1);
    if (!opt) return;
    opt->optimizer = 1;
    double master = weight_bytes == 4.0 ? 0.0 : 8.0;
    opt->bytes = shard * (master + 16.0 + grad_bytes + weight_bytes);
    opt->flops = 12.0 * shard;
    /* the new weights cast once into TE's FP8 cache; ZeRO-3 casts the weights it gathers for each
     * micro-batch, a kernel of the data-parallel part like its shard add */
    if (b->out->fp8_weights > 0.0) {
        op_t *cast = push(b, "fp8_weight_cast", OP_MEMBOUND, l->zero >= 3 ? PASS_FWD : PASS_STEP, 1);
        if (cast) {
            cast->bytes = fp8_weight_cast_bytes(b->out->fp8_weights);
            cast->group = GROUP_DP;
        }
    }
}

int build_stage_ops(const model_t *m, const layout_t *l, int64_t stage, stage_ops *out)
{
    /* each op is cleared as it is pushed: clearing all OPS_MAX slots costs more than the build */
    out->nops = 0;
    builder b = {.out = out, .l = l, .act_bytes = element_bytes(l->precision)};
    out->stage = stage;
    out->first = stage == 0;
    out->last = stage == l->pp - 1;
    out->layers = layers_on_stage(m, l, stage);
    if (out->first) embedding(&b, m);
    out->moe_layers = moe_layers_on_stage(m, l, stage);
    int64_t again = l->recompute == RECOMPUTE_FULL && l->recompute_layers > 0 && l->recompute_layers < out->layers
                        ? l->recompute_layers : 0;
    if (again) {
        /* Megatron's block method: the first `again` layers of the stage recompute whole, the rest keep
         * their activations (docs/model.md, "Activations"); MoE layers shared out in proportion */
        layout_t kept = *l;
        kept.recompute = RECOMPUTE_NONE;
        kept.recompute_layers = 0;
        int64_t moe_again = out->moe_layers * again / out->layers;
        transformer_layers(&b, m, again, moe_again);
        b.l = &kept;
        transformer_layers(&b, m, out->layers - again, out->moe_layers - moe_again);
        b.l = l;
    } else {
        transformer_layers(&b, m, out->layers, out->moe_layers);
    }
    if (out->last) lm_head(&b, m);
    if (out->last && m->mtp_layers > 0) mtp_modules(&b, m);
    pipeline(&b, m, out->first, out->last);
    /* a tied table split over pipeline stages lives twice, on the first stage
     * (embedding) and on the last (head, or the multi-token prediction's lookups):
     * after the backward the two gradients are summed over a group of those two
     * GPUs (Megatron's embedding group), exposed: nothing is left to overlap it with */
    if ((m->tied_embeddings || m->mtp_layers > 0) && l->pp > 1 && (out->first || out->last)) {
        double grad_bytes = gradient_bytes(l);
        collective(&b, "pp_allreduce_tied_embedding", PASS_STEP, 1, COLL_ALLREDUCE, GROUP_PP, 2,
                   (double)padded_vocab(m, l->tp) / (double)l->tp * (double)m->hidden * grad_bytes, EXPOSED);
    }
    /* a biased linear's weight gradient reduces its bias gradient too, in the GEMM's epilogue as sextant-gpu
     * runs it (cuBLASLt BGRADB): another, slower kernel (docs/model.md, "GEMM time over M, N, K") */
    if (m->bias)
        for (int i = 0; i < out->nops; i++)
            if (out->ops[i].weight_gradient && strcmp(out->ops[i].name, "lm_head_wgrad")) out->ops[i].bias_gradient = 1;
    out->params = stage_params(m, l, out->layers, out->moe_layers, out->first, out->last, &out->expert_params);
    out->fp8_weights = fp8_gemm_weights(out, l);
    if (l->grad_accum == GRAD_ACCUM_FP32_COPY) {
        /* DeepSpeed's BF16 optimizer, after each micro-batch's backward: every 16-bit gradient converted to
         * fp32 and added into the fp32 copy, two PyTorch kernels per parameter tensor (docs/model.md,
         * "Gradient accumulation") */
        op_t *add = push(&b, "grad_accumulate_fp32", OP_MEMBOUND, PASS_BWD, 1);
        if (add) add->bytes = out->params * fp32_copy_accumulate_bytes_per_param(element_bytes(l->precision));
    }
    step_ops(&b, m, out->params, out->expert_params);
    return b.overflow ? -1 : 0;
}

int build_calibration_ops(const model_t *m, stage_ops *out)
{
    layout_t l = {0};
    l.gpus = l.tp = l.pp = l.dp = l.vpp = l.mbs = l.gbs = l.gpus_per_node = 1;
    l.seq = 1024;
    l.attention = ATTENTION_UNFUSED;
    l.precision = PREC_BF16;
    return build_stage_ops(m, &l, 0, out);
}

int linear_has_bias(const model_t *m, const char *linear)
{
    return m->bias && strcmp(linear, "lm_head") != 0;
}
