/* The training step (validator/train.c, step.h): the forward and backward of one micro-batch through
 * this stage's layers: norms, attention, MLP, embedding, head and loss. */
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "step.h"

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
layer_acts layer_at(const gpt *g, int slot, int l)
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
        /* its parameters (ZeRO's gather); under full recomputation the backward runs this forward again: nothing of
         * it is kept */
        moe_params_take(&g->moe, l, current_pass != PASS_FWD);
        moe_forward(&g->moe, a->moe, a->ln2, g->scr.dbuf_c, l, !(s->recompute && current_pass == PASS_FWD));
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
    if (s->moe) {
        moe_params_take(&g->moe, l, 1);
        moe_grads_take(&g->moe, l);
        moe_backward(&g->moe, a->moe, a->ln2, r->dresidual, r->dbuf_c, l);
        if (moe_grads_give(&g->moe)) g->comm_used = 1;   /* ZeRO-2/3: the experts' reduce-scatter */
    } else {
        dn = mlp_backward(g, a, l);
    }
    OP("mlp_norm_bwd", norm_backward(g, r->dresidual, param(g, G, P_LN2W, l), param(g, G, P_LN2B, l), dn, a->mid,
                                     param(g, P, P_LN2W, l), a->ln2_mean, a->ln2_rstd, 1, Nl));
    /* attention: dresidual now holds d(mid) */
    const bf16 *dy = r->dresidual;
    if (spg(s)) { tp_allgather(g, "tp_allgather_attn_bwd", r->dfull, r->dresidual, local); dy = r->dfull; }
    bf16 *datty = r->dbuf_c;
    linear_backward("attn_out_dgrad", "attn_out_wgrad", datty, param(g, G, P_ATTW, l), param(g, G, P_ATTB, l), dy, a->atty,
                    param(g, P, P_ATTW, l), ones, N, A, C);
    if (s->cp > 1) {
        size_t ws = sx_flash_attention_backward_workspace_bytes(s->B, s->T, s->T, s->H, s->KV, s->D);
        OP("attention_bwd", cp_attention_backward_peer(&g->cps, r->dqkv, datty, a->atty, a->lse, a->qkv, r->flash_ws, ws));
        cp_return_dkv(&g->cps);
        OP("attention_bwd", cp_attention_backward_own(&g->cps, r->dqkv, datty, a->atty, a->lse, a->qkv, r->flash_ws, ws));
        OP("cp_dkv_wait", cp_wait_dkv(&g->cps));
        OP("cp_dkv_add", cp_add_dkv(&g->cps, r->dqkv));
    } else if (s->flash) {
        size_t ws = sx_flash_attention_backward_workspace_bytes(s->B, s->T, s->T, s->H, s->KV, s->D);
        size_t hd = (size_t)s->H * s->D, kd = (size_t)(s->H + s->KV) * s->D;
        OP_REPLAYED("attention_bwd", CK(sx_flash_attention_backward(r->dqkv, r->dqkv + hd, r->dqkv + kd, datty, a->atty, a->lse, a->qkv,
                                                            a->qkv + hd, a->qkv + kd, s->B, s->T, s->H, s->KV, s->D, s->qkv,
                                                            s->qkv, 1.0f / sqrtf((float)s->D), r->flash_ws, ws, gpu_ctx.stream)));
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
void stage_forward(gpt *g, const pipe_action *act)
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
void stage_backward(gpt *g, const pipe_action *act)
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
        if (s->moe && last_mb) {
            /* the layer's router and experts, beside the layers before it (their buckets, Megatron's); step ops, as the
             * buckets' reductions are (bucket_ready) */
            pass_t pass = current_pass;
            current_pass = PASS_STEP;
            if (moe_grads_ready(&g->moe, l, gpu_ctx.comm_stream)) g->comm_used = 1;
            current_pass = pass;
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
