/* The training step (validator/train.c, step.h): the shapes one rank holds and where its tensors lie:
 * the parameters' buckets, the activations saved for the backward, the step's scratch. */
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "step.h"

static size_t align8(size_t n) { return (n + 7) & ~(size_t)7; }

void param_shapes(const shapes *s, param_layout *p)
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
        z.moe = moe_saved_bytes(s->tp > 1 ? s->Nl : s->N, s->E, s->topk, s->tp > 1 ? s->tp : s->ep);
    }
    return z;
}

static size_t carve(char **cursor, size_t bytes)
{
    size_t aligned = (bytes + 255) & ~(size_t)255;
    *cursor += aligned;
    return aligned;
}

/* Lays out (base == NULL: only sizes) one layer's block. */
size_t layout_layer(layer_acts *a, char *base, const shapes *s)
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
size_t layout_head(slot_acts *a, char *base, const shapes *s)
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
size_t layout_slot(slot_acts *a, char *base, const shapes *s)
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

size_t layout_scratch(scratch_buffers *g, char *base, const shapes *s, int microbatches)
{
    size_t N = (size_t)s->N, C = (size_t)s->C, Nl = (size_t)s->Nl, m = (size_t)microbatches;
    char *p = base;
    size_t total = 0;
#define TAKE(field, type, count) do { g->field = (count) != 0 && base ? (void *)p : NULL; total += carve(&p, (count) * sizeof(type)); } while (0)
    TAKE(dresidual, bf16, Nl * C);
    TAKE(dbuf_c, bf16, N * C);
    TAKE(dqkv, bf16, N * s->qkv);
    TAKE(datt, bf16, s->flash ? 0 : (size_t)s->B * s->H * s->T * s->T);
    TAKE(flash_ws, char, s->flash ? sx_flash_attention_backward_workspace_bytes(s->B, s->T, s->T, s->H, s->KV, s->D) : 0);
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
