/* The op list of one pipeline stage for one micro-batch on one GPU: the
 * single description of a training step that the planner costs and the
 * validator executes.  docs/model.md, "The op list", derives every count. */
#include "planner.h"

#include <math.h>
#include <string.h>
#include <strings.h>

int64_t layers_on_stage(int64_t layers, int64_t pp, int64_t stage)
{
    int64_t per_stage = (layers + pp - 1) / pp;
    if (stage < pp - 1) return per_stage;
    return layers - per_stage * (pp - 1);
}

typedef struct {
    stage_ops *out;
    const layout_t *l;
    double act_bytes;   /* bytes per activation element: 2 for 16-bit, 4 for fp32/tf32 */
    int overflow;
} builder;

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
 * written once.  `saved` is the input kept for the weight gradient. */
static void gemm(builder *b, const char *fwd, const char *dgrad, const char *wgrad, int64_t count,
                 double m, double n, double k, double saved, int recompute_full)
{
    double flops = 2.0 * m * n * k;
    double bytes = b->act_bytes * (m * k + k * n + m * n);
    op_t *op = push(b, fwd, OP_GEMM, PASS_FWD, count);
    if (!op) return;
    op->m = (int64_t)m; op->n = (int64_t)n; op->k = (int64_t)k; op->batch = 1;
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
static int64_t buckets(double bytes, double element_bytes)
{
    double n = ceil(bytes / (40e6 * element_bytes));
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
 * (Korthikanti et al. 2022, section 4.2.2; Megatron overlaps it with the
 * input-gradient GEMM, the validator does not). */
static void tp_entry(builder *b, const char *ag, const char *ar_bwd, const char *rs_bwd, const char *regather,
                     int64_t count, double bytes, int recompute_full)
{
    const layout_t *l = b->l;
    if (l->tp <= 1) return;
    if (!l->sp) {
        collective(b, ar_bwd, PASS_BWD, count, COLL_ALLREDUCE, GROUP_TP, l->tp, bytes, EXPOSED);
    } else {
        collective(b, ag, PASS_FWD, count, COLL_ALLGATHER, GROUP_TP, l->tp, bytes, EXPOSED);
        if (recompute_full) collective(b, ag, PASS_RECOMPUTE, count, COLL_ALLGATHER, GROUP_TP, l->tp, bytes, EXPOSED);
        collective(b, regather, PASS_BWD, count, COLL_ALLGATHER, GROUP_TP, l->tp, bytes, EXPOSED);
        collective(b, rs_bwd, PASS_BWD, count, COLL_REDUCE_SCATTER, GROUP_TP, l->tp, bytes, EXPOSED);
    }
}

int model_is_causal(const model_t *m) { return strcasecmp(m->family, "bert") != 0; }

/* KV heads per GPU: split across the TP group, or replicated (one per GPU)
 * when the group is wider than the model has KV heads, as Megatron does. */
double local_kv_heads(const model_t *m, int64_t tp)
{
    return m->kv_heads >= tp ? (double)m->kv_heads / (double)tp : 1.0;
}

int64_t layout_cp(const layout_t *l) { return l->cp > 1 ? l->cp : 1; }

int64_t dp_group_size(const layout_t *l) { return l->dp * layout_cp(l); }

double rank_tokens(const layout_t *l) { return (double)l->seq * (double)l->mbs / (double)layout_cp(l); }

/* One layer's KV exchange buffers, live only while its attention runs: the
 * ring's block in use and the one arriving, and in the backward the same
 * for dK, dV (4 blocks); the all-gather's whole-sequence K and V and their
 * gradients before the reduce-scatter (2 x cp blocks). */
double cp_kv_transient_bytes(const model_t *m, const layout_t *l)
{
    double cp = (double)layout_cp(l);
    if (cp <= 1.0) return 0.0;
    double B = (l->precision == PREC_FP32 || l->precision == PREC_TF32) ? 4.0 : 2.0;
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
        /* cp - 1 steps each way round the ring; the backward passes K, V and the dK, dV accumulated so far */
        int64_t steps = count * (cp - 1);
        collective(b, "cp_ring_kv", PASS_FWD, steps, COLL_SENDRECV, GROUP_CP, cp, block, OVERLAP_ATTENTION);
        if (recompute)
            collective(b, "cp_ring_kv", PASS_RECOMPUTE, steps, COLL_SENDRECV, GROUP_CP, cp, block, OVERLAP_ATTENTION);
        collective(b, "cp_ring_kv_dkv_bwd", PASS_BWD, steps, COLL_SENDRECV, GROUP_CP, cp, 2.0 * block,
                   OVERLAP_ATTENTION);
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

static void transformer_layers(builder *b, const model_t *m, int64_t count)
{
    const layout_t *l = b->l;
    const double B = b->act_bytes;
    const double s = (double)l->seq, mb = (double)l->mbs, t = (double)l->tp;
    /* with context parallelism a rank's queries are its seq/cp tokens (chunks i and 2cp-1-i), its keys the whole sequence */
    const double cp = (double)layout_cp(l);
    const double sq = s / cp;                     /* queries (and tokens) of one rank per sequence */
    const double T = rank_tokens(l);              /* tokens per micro-batch on this rank */
    const double Tn = l->sp ? T / t : T;          /* tokens seen by norms and residuals */
    const double h = (double)m->hidden, d = (double)m->head_dim;
    const double heads = (double)m->heads / t;
    const double kv_heads = local_kv_heads(m, l->tp);
    const double f = (double)m->ffn / t;
    const double routed = (double)m->top_k;       /* expert FFNs each token passes through */
    const int full = l->recompute == RECOMPUTE_FULL;
    const double mask = m->dropout ? 1.0 : 0.0;   /* one byte per element */
    /* the residual branch's gradient is accumulated by the norm backward
     * (dx +=, one more read there); only dropout's mask needs a kernel here */
    const double residual_bwd_bytes = m->dropout ? 3.0 * Tn * h * B + mask * Tn * h : 0.0;
    const double sharded_input = l->sp ? T * h * B / t : T * h * B;

    /* attention block */
    membound(b, "attn_norm", "attn_norm_bwd", count, 2.0 * Tn * h * B, 4.0 * Tn * h * B, 5.0 * Tn * h,
             Tn * h * B, full);
    tp_entry(b, "tp_allgather_attn", "tp_allreduce_attn_bwd", "tp_reduce_scatter_attn_bwd", "tp_regather_attn", count,
             T * h * B, full);
    gemm(b, "qkv", "qkv_dgrad", "qkv_wgrad", count, T, (heads + 2.0 * kv_heads) * d, h, sharded_input, full);
    if (m->position == POS_ROPE) {
        /* rotary embedding, in place on the q and k columns of the qkv output (all T tokens,
         * the local heads): each element read and written once per pass, 6 FLOP per rotated
         * pair.  It saves nothing: attention saves the rotated q and k (qkv_saved below), and
         * the backward, the inverse rotation of dq and dk, needs only the positions. */
        double qk = T * (heads + kv_heads) * d;
        membound(b, "rope", "rope_bwd", count, 2.0 * qk * B, 2.0 * qk * B, 3.0 * qk, 0.0, full);
        /* membound() gives a backward twice its forward's FLOPs; the inverse rotation costs the same */
        if (!b->overflow) b->out->ops[b->out->nops - 1].flops = 3.0 * qk;
    }

    /* attention core: scores Q K^T and the weighted sum P V, 2 * 2*s*s*d per head over the full
     * s x s; a causal model needs only the half below the diagonal, and that half is what model
     * and hardware FLOPs count, so that neither ever exceeds what a kernel executes (docs/model.md,
     * "Conventions, kept apart").  A CP rank's share is its sq queries against all s keys, 1/cp of
     * the causal work too once the chunks are paired */
    double core_full = 4.0 * mb * heads * sq * s * d;
    double core_model = model_is_causal(m) ? core_full / 2.0 : core_full;
    double qkv_saved = T * (heads + 2.0 * kv_heads) * d * B;
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

    gemm(b, "attn_out", "attn_out_dgrad", "attn_out_wgrad", count, T, h, heads * d, T * heads * d * B, full);
    tp_exit(b, "tp_allreduce_attn", "tp_reduce_scatter_attn", "tp_allgather_attn_bwd", count, T * h * B, full);
    membound(b, "attn_residual", "attn_residual_bwd", count, 3.0 * Tn * h * B + mask * Tn * h,
             residual_bwd_bytes, Tn * h, mask * Tn * h, full);

    /* MLP block */
    membound(b, "mlp_norm", "mlp_norm_bwd", count, 2.0 * Tn * h * B, 4.0 * Tn * h * B, 5.0 * Tn * h,
             Tn * h * B, full);
    tp_entry(b, "tp_allgather_mlp", "tp_allreduce_mlp_bwd", "tp_reduce_scatter_mlp_bwd", "tp_regather_mlp", count,
             T * h * B, full);
    if (m->experts > 1)
        gemm(b, "router", "router_dgrad", "router_wgrad", count, T, (double)m->experts, h, 0.0, full);
    double up_width = m->ffn_kind == FFN_SWIGLU ? 2.0 * f : f;
    gemm(b, "mlp_up", "mlp_up_dgrad", "mlp_up_wgrad", count, T * routed, up_width, h,
         sharded_input * routed, full);
    if (m->ffn_kind == FFN_SWIGLU)
        membound(b, "swiglu", "swiglu_bwd", count, 3.0 * T * routed * f * B, 5.0 * T * routed * f * B,
                 4.0 * T * routed * f, 2.0 * T * routed * f * B, full);
    else
        membound(b, "gelu", "gelu_bwd", count, 2.0 * T * routed * f * B, 3.0 * T * routed * f * B,
                 8.0 * T * routed * f, T * routed * f * B, full);
    gemm(b, "mlp_down", "mlp_down_dgrad", "mlp_down_wgrad", count, T * routed, h, f,
         T * routed * f * B, full);
    tp_exit(b, "tp_allreduce_mlp", "tp_reduce_scatter_mlp", "tp_allgather_mlp_bwd", count, T * h * B, full);
    membound(b, "mlp_residual", "mlp_residual_bwd", count, 3.0 * Tn * h * B + mask * Tn * h,
             residual_bwd_bytes, Tn * h, mask * Tn * h, full);

    if (full) {
        /* what full recomputation keeps: each layer's input */
        op_t *keep = push(b, "layer_input", OP_MEMBOUND, PASS_FWD, count);
        if (!keep) return;
        keep->saved_bytes = sharded_input;
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
    gemm(b, "lm_head", "lm_head_dgrad", "lm_head_wgrad", 1, T, Vt, h, T * h * B, 0);
    for (int i = first_head_op; i < b->out->nops; i++) {
        b->out->ops[i].model_flops *= real_fraction;
        b->out->ops[i].hardware_flops *= real_fraction;
    }
    /* fused softmax cross-entropy over the local vocabulary shard: one pass
     * reads the logits and writes their gradient in place (llm.c, Megatron's
     * fused loss); the backward has nothing left to do */
    membound(b, "cross_entropy", NULL, 1, 2.0 * T * Vt * B, 0.0, 5.0 * T * Vt, 0.0, 0);
    /* vocabulary-parallel loss: max, sum of exponentials, target logit */
    collective(b, "tp_allreduce_loss", PASS_FWD, 3, COLL_ALLREDUCE, GROUP_TP, l->tp, T * 4.0, EXPOSED);
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

/* Parameters held by one GPU of the stage (before ZeRO sharding). */
static double stage_params(const model_t *m, const layout_t *l, int64_t layers, int first, int last)
{
    double t = (double)l->tp;
    double norms = 2.0 * model_norm_params(m);
    double per_layer = (model_layer_params(m) - norms) / t + norms;
    if (m->kv_heads < l->tp) /* each rank keeps a whole replicated KV head, not kv/t of one */
        per_layer += 2.0 * (double)m->hidden * (double)m->head_dim * (1.0 - (double)m->kv_heads / t);
    double params = (double)layers * per_layer;
    double padding = (double)(padded_vocab(m, l->tp) - m->vocab) * (double)m->hidden / t;
    if (first) params += model_embedding_params(m) / t + padding;
    if (last) {
        params += model_final_params(m);
        /* a tied head on a different stage keeps its own copy of the table */
        if (!m->tied_embeddings) params += model_head_params(m) / t + padding;
        else if (!first) params += (double)m->vocab * (double)m->hidden / t + padding;
    }
    return params;
}

void zero_unit_params(const model_t *m, const layout_t *l, int first, int last, double *layer, double *big)
{
    double t = (double)l->tp;
    *layer = model_layer_params(m) / t;
    double table = (double)padded_vocab(m, l->tp) * (double)m->hidden / t;
    double unit = 0.0;
    if (first) unit = table;                                   /* the embedding */
    if (last && (!first || !m->tied_embeddings)) unit = table > unit ? table : unit;   /* the head or its copy */
    *big = unit > *layer ? unit : 0.0;
}

static void step_ops(builder *b, const model_t *m, double params)
{
    const layout_t *l = b->l;
    double weight_bytes = l->precision == PREC_FP32 || l->precision == PREC_TF32 ? 4.0 : 2.0;
    double grad_bytes = l->fp32_grads ? 4.0 : weight_bytes;
    /* context parallel ranks hold the same weights and see different tokens: the gradient is reduced,
     * and ZeRO shards, over DP x CP (Megatron's data-parallel group with CP) */
    int64_t group = dp_group_size(l);
    double dp = (double)group;
    /* ZeRO-2/3 and FSDP reduce and gather a layer at a time; the rest in Megatron's buckets */
    int64_t layers = b->out->layers > 0 ? b->out->layers : 1;
    if (l->zero == 0) {
        in_pieces(collective(b, "dp_allreduce_grads", PASS_STEP, 1, COLL_ALLREDUCE, GROUP_DP, group,
                             params * grad_bytes, OVERLAP_BWD), buckets(params * grad_bytes, grad_bytes));
    } else {
        /* ZeRO-1 keeps whole gradients and reduces them once per step; from
         * ZeRO-2 on a rank keeps only its shard, so every micro-batch's
         * backward must reduce-scatter what it produced */
        in_pieces(collective(b, "dp_reduce_scatter_grads", l->zero >= 2 ? PASS_BWD : PASS_STEP, 1, COLL_REDUCE_SCATTER,
                             GROUP_DP, group, params * grad_bytes, OVERLAP_BWD),
                  l->zero >= 2 ? layers : buckets(params * grad_bytes, grad_bytes));
        if (l->zero < 3)
            in_pieces(collective(b, "dp_allgather_params", PASS_STEP, 1, COLL_ALLGATHER, GROUP_DP, group,
                                 params * weight_bytes, OVERLAP_FWD), buckets(params * weight_bytes, weight_bytes));
    }
    if (l->zero >= 2 && group > 1) {
        /* each micro-batch's reduce-scattered slice is added into the rank's gradient shard: read both,
         * write the shard (measured as its own kernel: docs/validation/h100x2-zero-2026-11-25) */
        op_t *add = push(b, "dp_grad_shard_add", OP_MEMBOUND, PASS_BWD, 1);
        if (add) {
            add->group = GROUP_DP;
            add->bytes = 3.0 * params / dp * grad_bytes;
        }
    }
    if (l->zero == 3) {
        /* ZeRO-3 gathers the weights before each forward and each backward */
        in_pieces(collective(b, "dp_allgather_params_fwd", PASS_FWD, 1, COLL_ALLGATHER, GROUP_DP, group,
                             params * weight_bytes, OVERLAP_FWD), layers);
        in_pieces(collective(b, "dp_allgather_params_bwd", PASS_BWD, 1, COLL_ALLGATHER, GROUP_DP, group,
                             params * weight_bytes, OVERLAP_BWD), layers);
    }
    /* AdamW over the local shard: read and write master weight, m and v in
     * fp32, read the gradient, write the 16-bit weight */
    double shard = l->zero >= 1 ? params / dp : params;
    /* the gradients are accumulated into over a step's micro-batches, so they
     * are cleared before its first (the validator measured it as its own op) */
    op_t *clear = push(b, "zero_grads", OP_MEMBOUND, PASS_STEP, 1);
    if (!clear) return;
    clear->bytes = (l->zero >= 2 ? params / dp : params) * grad_bytes;
    /* with sequence parallelism each rank's norm weights see 1/t of the
     * tokens: their gradients are summed over the TP group, one layer at a
     * time, once per step (Megatron's allreduce of the sequence-parallel
     * gradients), exposed */
    if (l->sp && l->tp > 1)
        collective(b, "tp_allreduce_norm_grads", PASS_STEP, b->out->layers + (b->out->last ? 1 : 0), COLL_ALLREDUCE,
                   GROUP_TP, l->tp, 2.0 * model_norm_params(m) * grad_bytes, EXPOSED);
    op_t *opt = push(b, "optimizer", OP_MEMBOUND, PASS_STEP, 1);
    if (!opt) return;
    double master = weight_bytes == 4.0 ? 0.0 : 8.0;
    opt->bytes = shard * (master + 16.0 + grad_bytes + weight_bytes);
    opt->flops = 12.0 * shard;
}

int build_stage_ops(const model_t *m, const layout_t *l, int64_t stage, stage_ops *out)
{
    /* each op is cleared as it is pushed: clearing all OPS_MAX slots costs more than the build */
    out->nops = 0;
    builder b = {out, l, (l->precision == PREC_FP32 || l->precision == PREC_TF32) ? 4.0 : 2.0, 0};
    out->stage = stage;
    out->first = stage == 0;
    out->last = stage == l->pp - 1;
    out->layers = layers_on_stage(m->layers, l->pp, stage);
    if (out->first) embedding(&b, m);
    transformer_layers(&b, m, out->layers);
    if (out->last) lm_head(&b, m);
    pipeline(&b, m, out->first, out->last);
    /* a tied table split over pipeline stages lives twice, on the first stage
     * (embedding) and on the last (head): after the backward the two
     * gradients are summed over a group of those two GPUs (Megatron's
     * embedding group), exposed: nothing is left to overlap it with */
    if (m->tied_embeddings && l->pp > 1 && (out->first || out->last)) {
        double grad_bytes = l->fp32_grads ? 4.0 : b.act_bytes;
        collective(&b, "pp_allreduce_tied_embedding", PASS_STEP, 1, COLL_ALLREDUCE, GROUP_PP, 2,
                   (double)padded_vocab(m, l->tp) / (double)l->tp * (double)m->hidden * grad_bytes, EXPOSED);
    }
    out->params = stage_params(m, l, out->layers, out->first, out->last);
    step_ops(&b, m, out->params);
    return b.overflow ? -1 : 0;
}
