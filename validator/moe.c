/* A mixture-of-experts layer with expert parallelism in the training step (moe.h).
 *
 * Forward of one layer, one micro-batch (op names as the planner's op list has them,
 * planner/oplist.c moe_mlp_block):
 *   router          logits[N, E] = xn Wr^T in fp32 (cuBLAS, bf16 operands)
 *   router_topk     the k largest, softmax gates over them (kernels/moe.cu)
 *   moe_permute     the slots sorted by expert; the tokens gathered in that order
 *   ep_counts       every EP rank's counts per expert (an all-gather of E integers), to the
 *                   host: the sizes of every transfer and GEMM below (the host waits here,
 *                   as Megatron's all-to-all dispatcher does)
 *   ep_alltoall_dispatch   one ncclSend/ncclRecv pair per peer of the rows for its experts, and
 *                   one of their gates (16 bytes a row), as Megatron's dispatcher sends the probs
 *   moe_sort_chunks the rows received (and the rank's own) from rank-major to the expert-major
 *                   layout (moe_plan.h) in one chunk copy, as Megatron's sort_chunks_by_idxs
 *   expert_up, expert_swiglu, expert_down   a loop of cuBLAS GEMMs, one per local expert
 *                   at its own row count (cuBLAS's grouped call, one launch for the loop,
 *                   made the steps longer, even OLMoE's host-bound ones: docs/model.md,
 *                   "Why streams is the default");
 *                   the SwiGLU weighs each row by its gate, as Megatron-Core's experts apply
 *                   the permuted probs in their activation (activation_func_with_probs)
 *   moe_sort_chunks, ep_alltoall_combine   the chunks gathered rank-major, sent back to the
 *                   ranks they came from
 *   moe_unpermute   out[n] = sum_j ys[pos], the rows weighed already: nothing of the experts'
 *                   outputs is kept for the backward (the gate's gradient is the SwiGLU's)
 * Backward: the same ops in reverse under their _bwd, _dgrad and _wgrad names (the gates'
 * gradients back with the rows' to the ranks that routed them); the router's backward adds
 * Switch's auxiliary load-balancing loss (moe_plan.h).
 *
 * With ep = 1 (one GPU, or DP without EP) nothing is exchanged: the sorted rows are the
 * experts' input. */
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "gpu_check.h"
#include "launch.h"
#include "moe.h"

/* the rank in the line from the state, as in zero.c (gpu_check.h) */
#define MCK(st, call) RANK_CK((st)->c.my_rank, call)
#define MCB(st, call) RANK_CB((st)->c.my_rank, call)
#define MNC(st, call) RANK_NC((st)->c.my_rank, call)

typedef sx_bf16 bf16;
static const float one = 1.0f, zero = 0.0f;

static void lt_init(moe_state *st);       /* the experts' GEMMs' cuBLASLt state, below */
static void lt_prewarm(moe_state *st);
static void lt_free_all(moe_state *st);

/* ---- one layer's saved block ---- */

typedef struct {
    float *logits, *gate;
    int32_t *idx, *pos, *row_slot, *counts;   /* counts: groups x E, this rank's row filled first */
    int32_t *gcounts;                         /* E: the TP group's counts summed (the auxiliary loss's, with TP) */
} saved_ptrs;

static size_t take(char **p, size_t bytes)
{
    size_t aligned = (bytes + 255) & ~(size_t)255;
    *p += aligned;
    return aligned;
}

static size_t layout_saved(saved_ptrs *s, char *base, int N, int E, int k, int groups)
{
    char *p = base;
    size_t total = 0, S = (size_t)N * k;
#define TAKE(field, type, count) do { s->field = base ? (type *)p : NULL; total += take(&p, (count) * sizeof(type)); } while (0)
    TAKE(logits, float, (size_t)N * E);
    TAKE(gate, float, S);
    TAKE(idx, int32_t, S);
    TAKE(pos, int32_t, S);
    TAKE(row_slot, int32_t, S);
    TAKE(counts, int32_t, (size_t)groups * E);
    TAKE(gcounts, int32_t, (size_t)E);
#undef TAKE
    return total;
}

size_t moe_saved_bytes(int N, int E, int k, int groups)
{
    saved_ptrs s;
    return layout_saved(&s, NULL, N, E, k, groups);
}

static saved_ptrs saved_at(const moe_state *st, void *block)
{
    saved_ptrs s;
    layout_saved(&s, block, st->c.N, st->c.E, st->c.k, st->groups);
    return s;
}

/* ---- parameters: [router of each layer][experts of each layer] (moe_plan.h's moe_shards: what ZeRO keeps) ---- */

static size_t expert_elems(const moe_state *st) { return (size_t)st->up * st->c.C + (size_t)st->c.C * st->c.F; }
static bf16 *router_w(const moe_state *st, bf16 *base, int l) { return base + (size_t)l * st->c.E * st->c.C; }

/* Layer l's experts as a forward or backward reads them: ZeRO-3's gathered buffer, else the whole parameters. */
static bf16 *experts_params(const moe_state *st, int l)
{
    if (!(st->sh.experts_zero && st->sh.stage == 3)) return st->params + st->sh.router_count + (size_t)l * st->sh.expert_stride;
    bf16 *p = zero_param_at(&st->ez, (size_t)l * st->sh.expert_stride);
    if (!p) {
        fprintf(stderr, "sextant-gpu train: rank %d: internal: MoE layer %d's experts read while not gathered\n", st->c.my_rank, l);
        exit(1);
    }
    return p;
}

/* Layer l's experts' gradients as the backward writes them: ZeRO-2/3's gradient buffer, else the whole gradients. */
static bf16 *experts_grads(const moe_state *st, int l)
{
    if (!st->sh.experts_zero) return st->grads + st->sh.router_count + (size_t)l * st->sh.expert_stride;
    bf16 *p = zero_grad_at(&st->ez, (size_t)l * st->sh.expert_stride);
    if (!p) {
        fprintf(stderr, "sextant-gpu train: rank %d: internal: MoE layer %d's gradients written with no buffer\n", st->c.my_rank, l);
        exit(1);
    }
    return p;
}

/* local expert e's up (rows [0, F) the gate, [F, 2F) the up projection) and down weights in its layer's block */
static bf16 *up_w(const moe_state *st, bf16 *layer, int e) { return layer + (size_t)e * expert_elems(st); }
static bf16 *down_w(const moe_state *st, bf16 *layer, int e) { return up_w(st, layer, e) + (size_t)st->up * st->c.C; }

/* Fills the initial weights on the host as functions of their place in the whole model
 * (layer, global expert, element of the whole expert), so that every ep and tp gives the same model.
 * An expert's up weights are 2 Fm rows of C (gate rows, then up rows), its down weights C rows of Fm;
 * TP rank r holds gate and up rows [r F, (r + 1) F) and the down columns [r F, (r + 1) F). */
static void fill_weights(moe_state *st, float *host)
{
    const moe_config *c = &st->c;
    const int which = c->hooks.init_which;
    const size_t C = (size_t)c->C, F = (size_t)c->F, Fm = (size_t)c->Fm, up = (size_t)st->up;
    const size_t first = (size_t)c->tp_rank * F;   /* this rank's first row (gate, up) or column (down) */
    for (int l = 0; l < c->L; l++) {
        int glayer = c->model_layer ? c->model_layer[l] : c->layer0 + l;
        float *r = host + (size_t)l * c->E * C;
        for (size_t i = 0; i < (size_t)c->E * C; i++) r[i] = c->hooks.init(which, glayer, i, 0.02f);
        for (int e = 0; e < st->El; e++) {
            size_t ge = (size_t)c->ep_rank * st->El + e;
            float *u = host + st->sh.router_count + (size_t)l * st->sh.expert_stride + (size_t)e * expert_elems(st);
            float *d = u + up * C;
            for (size_t row = 0; row < up; row++) {
                size_t grow = row < F ? first + row : Fm + first + (row - F);
                for (size_t i = 0; i < C; i++) u[row * C + i] = c->hooks.init(which + 1, glayer, (ge * 2 * Fm + grow) * C + i, 0.02f);
            }
            /* residual projections scaled as train.c scales attn_out and mlp_down */
            float scaled = 0.02f / sqrtf(2.0f * (float)c->Lmodel);
            for (size_t row = 0; row < C; row++)
                for (size_t i = 0; i < F; i++)
                    d[row * F + i] = c->hooks.init(which + 2, glayer, ge * C * Fm + row * Fm + first + i, scaled);
        }
    }
}

/* The ZeRO-1/2 gathers' events, and the experts' ZeRO-2/3 (sh.experts_zero): zero.c's state over the
 * expert-data-parallel group, a bucket a layer, its order of gathers the step's schedule's. */
static void shards_init(moe_state *st)
{
    const moe_config *c = &st->c;
    const moe_shards *sh = &st->sh;
    const size_t L = (size_t)(c->L > 0 ? c->L : 1);
    MCK(st, cudaEventCreateWithFlags(&st->updated, cudaEventDisableTiming));
    MCK(st, cudaEventCreateWithFlags(&st->router_ready, cudaEventDisableTiming));
    st->experts_ready = calloc(L, sizeof *st->experts_ready);
    st->gather_pending = calloc(L, 1);
    st->ebuckets = calloc(L, sizeof *st->ebuckets);
    if (!st->experts_ready || !st->gather_pending || !st->ebuckets) {
        fprintf(stderr, "sextant-gpu train: rank %d: out of host memory\n", c->my_rank);
        exit(1);
    }
    for (int l = 0; l < c->L; l++) MCK(st, cudaEventCreateWithFlags(&st->experts_ready[l], cudaEventDisableTiming));
    if (!sh->experts_zero) return;
    for (int l = 0; l < c->L; l++)
        st->ebuckets[l] = (zero_bucket){(size_t)l * sh->expert_stride, sh->expert_stride, (size_t)l * sh->expert_slice, 1};
    zero_state *z = &st->ez;
    z->stage = sh->stage; z->dp = sh->edp; z->rank = sh->edp_rank; z->my_rank = c->my_rank;
    z->compute = c->stream; z->comm = c->comm; z->dp_comm = c->edp_comm; z->mark = c->zero_mark;
    z->names = &zero_edp_names;
    z->buckets = st->ebuckets; z->nbuckets = c->L;
    z->param_shard = st->params + sh->router_count;
    z->grad_shard = st->grads + sh->router_count;
    zero_buffer_elems(st->ebuckets, c->L, &z->small, &z->big);
    for (int i = 0; i < 3; i++) {
        size_t bytes = (i == ZERO_BIG ? z->big : z->small) * sizeof(bf16);
        void *p = NULL;
        if (bytes && z->stage == 3) { MCK(st, cudaMalloc(&p, bytes)); st->zero_bytes += bytes; }
        z->gathered[i] = p;
        p = NULL;
        if (bytes) { MCK(st, cudaMalloc(&p, bytes)); st->zero_bytes += bytes; }
        z->work[i] = p;
    }
    st->bytes += st->zero_bytes;
    /* no embedding or head among the experts' buckets: layers only */
    zero_stage order = {st->ebuckets, z->small, -1, -1, -1, 0, c->Lc, c->vpp, 0, 0};
    if (zero_init(z, &order, c->schedule, c->nschedule) != 0) exit(1);
}

/* The validator's environment switches for the experts (docs/guide.md, the environment): which cuBLAS path, how many
 * of the streams, and the router's choice or rows dealt evenly. */
const char *moe_route_name(void)
{
    const char *route = getenv("SEXTANT_MOE_ROUTE");
    return route && *route ? route : "router";
}

int moe_route_balanced(void) { return !strcmp(moe_route_name(), "balanced"); }

/* SEXTANT_MOE_ROUTE=random: each token's k experts drawn uniformly without replacement (moe_random_route), a draw
 * of its own for each of this rank's layers, fixed over the run (a full recomputation meets its forward's choice),
 * seeded by the layer alone (TP ranks route the same tokens and must agree): each expert's rows Binomial(N, k/E),
 * none empty but by chance, as a router trained to balance its load deals them in expectation.  Megatron-Core's
 * moe_router_force_load_balancing (random logits before the top-k) serves the same end in NVIDIA's MoE benchmarks;
 * like `balanced` the router's gates are kept. */
static int32_t *random_routes(const moe_config *c)
{
    const size_t per_layer = (size_t)c->N * c->k;
    int32_t *dealt = malloc((size_t)c->L * per_layer * sizeof *dealt);
    if (!dealt) { fprintf(stderr, "sextant-gpu train: rank %d: out of host memory\n", c->my_rank); exit(1); }
    for (int l = 0; l < c->L; l++)
        if (moe_random_route((unsigned long long)(c->layer0 + l), c->N, c->E, c->k, dealt + (size_t)l * per_layer) != 0) {
            fprintf(stderr, "sextant-gpu train: rank %d: SEXTANT_MOE_ROUTE=random: %d experts, top %d: not drawable\n",
                    c->my_rank, c->E, c->k);
            exit(2);
        }
    return dealt;
}

static void read_switches(moe_state *st, const moe_config *c)
{
    const char *gemm = getenv("SEXTANT_MOE_GEMM");
    if (gemm && *gemm && strcmp(gemm, "ex") && strcmp(gemm, "lt")) {
        fprintf(stderr, "sextant-gpu train: SEXTANT_MOE_GEMM=%s: expected lt (cuBLASLt, the default) or ex (cublasGemmEx)\n", gemm);
        exit(2);
    }
    st->gemm_ex = gemm && !strcmp(gemm, "ex");
    const char *large = getenv("SEXTANT_MOE_LARGE");
    if (large && *large && strcmp(large, "ex") && strcmp(large, "lt")) {
        fprintf(stderr, "sextant-gpu train: SEXTANT_MOE_LARGE=%s: expected lt (cuBLASLt, the default) or ex (cublasGemmEx)\n",
                large);
        exit(2);
    }
    st->large_ex = large && !strcmp(large, "ex");
    /* how many of the MOE_STREAMS the experts take turns on: fewer to time the experts' GEMMs without their
     * neighbours beside them (docs/guide.md, the environment) */
    const char *lanes = getenv("SEXTANT_MOE_STREAMS");
    st->lanes = MOE_STREAMS;
    if (lanes && *lanes) {
        char *end = NULL;
        long v = strtol(lanes, &end, 10);
        if (*end || v < 1 || v > MOE_STREAMS) {
            fprintf(stderr, "sextant-gpu train: SEXTANT_MOE_STREAMS=%s: expected 1 to %d\n", lanes, MOE_STREAMS);
            exit(2);
        }
        st->lanes = (int)v;
    }
    /* diagnostics (docs/guide.md, the environment): `random`, each token's experts drawn at random (random_routes);
     * `balanced`, every token's k experts dealt in turn ((t k + j) mod E), so that each expert gets the same rows,
     * to time the experts' GEMMs at the planner's mean row count */
    const char *route = moe_route_name();
    if (strcmp(route, "balanced") && strcmp(route, "router") && strcmp(route, "random")) {
        fprintf(stderr, "sextant-gpu train: SEXTANT_MOE_ROUTE=%s: expected router (the default), random or balanced\n",
                route);
        exit(2);
    }
    if (!strcmp(route, "random")) {
        const size_t bytes = (size_t)c->L * c->N * c->k * sizeof(int32_t);
        int32_t *dealt = random_routes(c);
        MCK(st, cudaMalloc((void **)&st->random_idx, bytes));
        st->bytes += bytes;
        MCK(st, cudaMemcpy(st->random_idx, dealt, bytes, cudaMemcpyHostToDevice));
        free(dealt);
    }
    if (moe_route_balanced()) {
        const size_t slots = (size_t)c->N * c->k;
        int32_t *dealt = malloc(slots * sizeof *dealt);
        if (!dealt) { fprintf(stderr, "sextant-gpu train: rank %d: out of host memory\n", c->my_rank); exit(1); }
        for (size_t s = 0; s < slots; s++) dealt[s] = (int32_t)(s % (size_t)c->E);
        MCK(st, cudaMalloc((void **)&st->balanced_idx, slots * sizeof *dealt));
        st->bytes += slots * sizeof *dealt;
        MCK(st, cudaMemcpy(st->balanced_idx, dealt, slots * sizeof *dealt, cudaMemcpyHostToDevice));
        free(dealt);
    }
}

void moe_init(moe_state *st, const moe_config *c)
{
    memset(st, 0, sizeof *st);
    st->c = *c;
    st->El = c->E / c->ep;
    st->up = 2 * c->F;
    st->groups = c->tp > 1 ? c->tp : c->ep;
    /* Switch's coefficient on a per-micro-batch mean, summed over the step's micro-batches as the loss is */
    st->aux_scale = (float)(MOE_AUX_COEFF * c->E * c->dloss);
    if (moe_shard_plan(c->L, (size_t)c->E * c->C, (size_t)st->El * expert_elems(st), c->zero, c->dp, c->dp_rank, c->ep,
                       &st->sh) != 0) {
        fprintf(stderr, "sextant-gpu train: rank %d: internal: MoE shards (dp %d, ep %d)\n", c->my_rank, c->dp, c->ep);
        exit(1);
    }
    st->edp = st->sh.edp;
    const moe_shards *sh = &st->sh;
    size_t count = sh->router_count + (size_t)c->L * sh->expert_stride;   /* the whole layout */
    void *p;
#define ALLOC(field, size) do { MCK(st, cudaMalloc(&p, (size))); st->field = p; st->bytes += (size); } while (0)
    ALLOC(params, sh->param_count * sizeof(bf16));
    ALLOC(grads, sh->grad_count * sizeof(bf16));
    ALLOC(master, sh->state_count * sizeof(float));
    ALLOC(m, sh->state_count * sizeof(float));
    ALLOC(v, sh->state_count * sizeof(float));
    ALLOC(xs, (size_t)c->N * c->k * c->C * sizeof(bf16));
    ALLOC(dlogits, (size_t)c->N * c->E * sizeof(bf16));
    ALLOC(dgate, (size_t)c->N * c->k * sizeof(float));
#undef ALLOC
    MCK(st, cudaMallocHost((void **)&st->host_counts, (size_t)st->groups * c->E * sizeof(int32_t)));
    MCK(st, cudaEventCreateWithFlags(&st->counted, cudaEventDisableTiming));
    /* the data-dependent buffers come from two stream-ordered pools, their memory kept, not returned to the driver
     * between layers: the rows a forward keeps for its backward, and a call's scratch.  One pool for both left the
     * scratch's holes between the kept rows (OLMoE's TP 2 + SP: 1.531 GiB reserved for 1.253 in use at once; apart,
     * 0.185 beyond use, 0.155 of it the scratch's own; docs/validation/2026-11-28-moe-pools) */
    int device;
    uint64_t keep = UINT64_MAX;
    MCK(st, cudaGetDevice(&device));
    for (int i = 0; i < MOE_POOLS; i++) {
        struct cudaMemPoolProps props;
        memset(&props, 0, sizeof props);
        props.allocType = cudaMemAllocationTypePinned;
        props.location.type = cudaMemLocationTypeDevice;
        props.location.id = device;
        MCK(st, cudaMemPoolCreate(&st->pools[i], &props));
        MCK(st, cudaMemPoolSetAttribute(st->pools[i], cudaMemPoolAttrReleaseThreshold, &keep));
    }
    lt_init(st);
    st->grads_written = calloc((size_t)c->L, sizeof *st->grads_written);
    st->reduced = calloc((size_t)c->L, 1);
    if (!st->grads_written || !st->reduced) {
        fprintf(stderr, "sextant-gpu train: rank %d: out of host memory\n", c->my_rank);
        exit(1);
    }
    for (int l = 0; l < c->L; l++) MCK(st, cudaEventCreateWithFlags(&st->grads_written[l], cudaEventDisableTiming));
    read_switches(st, c);

    /* the whole layout on the host (its padding zero), then this rank's parts of it */
    float *host = calloc(count, sizeof *host), *part = malloc(count * sizeof *part);
    uint16_t *half = malloc(count * sizeof *half);
    if (!host || !part || !half) {
        fprintf(stderr, "sextant-gpu train: rank %d: out of host memory (MoE weights)\n", c->my_rank);
        exit(1);
    }
    fill_weights(st, host);
    moe_shard_take(sh, c->L, host, part, 0);
    MCK(st, cudaMemcpy(st->master, part, sh->state_count * sizeof(float), cudaMemcpyHostToDevice));
    moe_shard_take(sh, c->L, host, part, 1);
    for (size_t i = 0; i < sh->param_count; i++) half[i] = c->hooks.to_bf16(part[i]);
    MCK(st, cudaMemcpy(st->params, half, sh->param_count * sizeof(bf16), cudaMemcpyHostToDevice));
    MCK(st, cudaMemset(st->m, 0, sh->state_count * sizeof(float)));
    MCK(st, cudaMemset(st->v, 0, sh->state_count * sizeof(float)));
    MCK(st, cudaMemset(st->grads, 0, sh->grad_count * sizeof(bf16)));
    free(host);
    free(part);
    free(half);
    shards_init(st);
    /* the groups' first use, each finished before the step (train.c's comm_warmup says why):
     * the all-gather of counts and a send/recv with every peer */
    size_t free_before, free_after, total;
    MCK(st, cudaMemGetInfo(&free_before, &total));
    if (c->ep > 1) {
        /* the counts' all-gather, and each peer's share of a micro-batch's routed rows (N k / ep rows of C) both ways,
         * messages of the dispatch's size (1-element ones connected the same 920 MiB on 2 x H200: NCCL's one-time
         * collective part, the collectives' and one peer's send/recv buffers, docs/validation/2026-11-26-h200x4-nccl-memory) */
        int32_t *probe;
        bf16 *rows;
        size_t share = (size_t)c->N * c->k / c->ep * c->C;
        MCK(st, cudaMalloc((void **)&probe, (size_t)c->ep * sizeof(int32_t) * 2));
        MCK(st, cudaMalloc((void **)&rows, (size_t)c->ep * share * sizeof(bf16)));
        MNC(st, ncclAllGather(probe + c->ep_rank, probe, 1, ncclInt32, c->ep_comm, c->stream));
        MNC(st, ncclGroupStart());
        for (int q = 0; q < c->ep; q++) {
            if (q == c->ep_rank) continue;
            MNC(st, ncclSend(st->xs, share, ncclBfloat16, q, c->ep_comm, c->stream));
            MNC(st, ncclRecv(rows + (size_t)q * share, share, ncclBfloat16, q, c->ep_comm, c->stream));
        }
        MNC(st, ncclGroupEnd());
        MCK(st, cudaStreamSynchronize(c->stream));
        MCK(st, cudaFree(probe));
        MCK(st, cudaFree(rows));
    }
    size_t free_ep = 0;
    MCK(st, cudaMemGetInfo(&free_ep, &total));
    st->connect_ep_bytes = free_before > free_ep ? free_before - free_ep : 0;
    if (sh->experts_zero) {
        zero_warmup(&st->ez);
        MCK(st, cudaStreamSynchronize(c->stream));
    } else if (sh->experts_sharded) {   /* ZeRO-1: the step's reduce-scatter and gather, on layer 0's zero gradients */
        bf16 *layer = st->grads + sh->router_count;
        MNC(st, ncclReduceScatter(layer, layer + sh->expert_at, sh->expert_slice, ncclBfloat16, ncclSum, c->edp_comm, c->stream));
        MNC(st, ncclAllGather(layer + sh->expert_at, layer, sh->expert_slice, ncclBfloat16, c->edp_comm, c->stream));
        MCK(st, cudaStreamSynchronize(c->stream));
    } else if (st->edp > 1) {
        MNC(st, ncclAllReduce(st->grads + sh->router_count, st->grads + sh->router_count, 8, ncclBfloat16, ncclSum,
                              c->edp_comm, c->stream));
        MCK(st, cudaStreamSynchronize(c->stream));
    }

    MCK(st, cudaMemGetInfo(&free_after, &total));
    st->connect_bytes = free_before > free_after ? free_before - free_after : 0;
    st->connect_edp_bytes = free_ep > free_after ? free_ep - free_after : 0;
    if (!st->gemm_ex) lt_prewarm(st);
}

/* ---- the pieces of a forward and a backward ---- */

static void mark(const moe_state *st, const char *name, int end) { st->c.hooks.mark(name, end); }

/* this rank's row of a call's counts: its place in the EP group, or in the TP group with expert TP */
static int group_rank(const moe_state *st) { return st->c.tp > 1 ? st->c.tp_rank : st->c.ep_rank; }

static moe_call *call_for(moe_state *st, const void *key, int create)
{
    moe_call *empty = NULL;
    for (int i = 0; i < MOE_CALLS_MAX; i++) {
        if (st->calls[i].key == key) return &st->calls[i];
        if (!empty && !st->calls[i].key) empty = &st->calls[i];
    }
    if (!create || !empty) {
        fprintf(stderr, "sextant-gpu train: rank %d: internal: MoE layer state %s\n", st->c.my_rank,
                create ? "table full" : "missing for a backward");
        exit(1);
    }
    empty->key = key;
    return empty;
}

static bf16 *pool_rows(moe_state *st, int pool, int rows, int width);
static void pool_free(moe_state *st, void *p);

/* a call's rows back to the pool, its slot free */
static void call_free(moe_state *st, moe_call *call)
{
    pool_free(st, call->xe);
    pool_free(st, call->h);
    pool_free(st, call->act);
    pool_free(st, call->gates);
    call->key = NULL;
}

/* pool: MOE_POOL_KEPT (rows a forward keeps for its backward) or MOE_POOL_SCRATCH (freed by the call that took them) */
static bf16 *pool_rows(moe_state *st, int pool, int rows, int width)
{
    void *p;
    size_t n = (size_t)(rows > 0 ? rows : 1) * (size_t)width;
    MCK(st, cudaMallocFromPoolAsync(&p, n * sizeof(bf16), st->pools[pool], st->c.stream));
    return p;
}

static void pool_free(moe_state *st, void *p) { MCK(st, cudaFreeAsync(p, st->c.stream)); }

/* A row's gate as the exchange moves it: SX_MOE_GATE_ROW floats, 8 bf16's bytes (kernels.h) */
#define MOE_GATE_WIDTH ((int)(SX_MOE_GATE_ROW * sizeof(float) / sizeof(bf16)))
static float *pool_gates(moe_state *st, int pool, int rows) { return (float *)pool_rows(st, pool, rows, MOE_GATE_WIDTH); }

/* The row chunks one exchange copies: a (rank, expert) pair each, at most every expert of the group's every rank
 * (the expert TP gather: MOE_EP_MAX ranks of MOE_EXPERTS_MAX experts each); sx_moe_copy_chunks takes
 * SX_MOE_CHUNKS_MAX a launch, so copy_chunks launches it once per that many. */
typedef struct {
    int n;
    int rows[MOE_EP_MAX * MOE_EXPERTS_MAX];
    const bf16 *src[MOE_EP_MAX * MOE_EXPERTS_MAX];
    bf16 *dst[MOE_EP_MAX * MOE_EXPERTS_MAX];
} chunk_list;

static void chunk_add(chunk_list *l, const bf16 *src, bf16 *dst, int rows)
{
    l->rows[l->n] = rows;
    l->src[l->n] = src;
    l->dst[l->n] = dst;
    l->n++;
}

static void copy_chunks(moe_state *st, const chunk_list *l, int C)
{
    for (int at = 0; at < l->n; at += SX_MOE_CHUNKS_MAX) {
        sx_moe_chunks launch;
        launch.n = l->n - at < SX_MOE_CHUNKS_MAX ? l->n - at : SX_MOE_CHUNKS_MAX;
        for (int i = 0; i < launch.n; i++) {
            launch.rows[i] = l->rows[at + i];
            launch.src[i] = l->src[at + i];
            launch.dst[i] = l->dst[at + i];
        }
        MCK(st, sx_moe_copy_chunks(&launch, C, st->c.stream));
    }
}

/* Moves the chunks between this rank's sorted rows and the experts' (expert-major) rows of
 * the EP group: back = 0 from sorted to major (the dispatch, and the combine's gradient),
 * 1 the way back.  Both sides know every chunk's size.  One message goes to each peer, as
 * Megatron's all-to-all dispatcher sends it: a rank's rows for one peer's experts are
 * contiguous in its sorted buffer, and the receiver's are staged rank-major, then moved to
 * (or, back, gathered from) the expert-major rows in one chunk copy with its own chunks (with
 * one expert a rank, rank-major is expert-major: only the own chunk is copied).  A
 * send/recv pair per (peer, expert) chunk, the first way, paid NCCL's point-to-point latency
 * once a chunk: 124-148 us an exchange of the MoE test model on 2 x H100, 77-82 us this way
 * (docs/validation/2026-11-26-h100x2-ep-messages).  Rows of `width` bf16: C for the tokens, MOE_GATE_WIDTH for
 * their gates. */
static void exchange(moe_state *st, const moe_exchange *x, bf16 *sorted, bf16 *major, int width, int back,
                     ncclComm_t comm, const char *transfer, const char *copy)
{
    const size_t C = (size_t)width;
    const int local = x->local;
    int stage_at[MOE_EP_MAX], staged = 0, sent[MOE_EP_MAX];
    for (int p = 0; p < x->ep; p++) {
        stage_at[p] = staged;
        sent[p] = 0;
        for (int e = 0; e < local; e++) {
            int c = p * local + e;
            if (e > 0 && x->send_offset[c] != x->send_offset[c - 1] + x->send_rows[c - 1]) {
                fprintf(stderr, "sextant-gpu train: rank %d: internal: MoE rows for rank %d not contiguous\n", st->c.my_rank, p);
                exit(1);
            }
            sent[p] += x->send_rows[c];
            if (p != x->rank && local > 1) staged += x->recv_rows[c];
        }
    }
    bf16 *stage = staged ? pool_rows(st, MOE_POOL_SCRATCH, staged, (int)C) : NULL;
    chunk_list chunks;
    chunks.n = 0;
    for (int p = 0; p < x->ep; p++) {
        int within = 0;
        for (int e = 0; e < local; e++) {
            int c = p * local + e;
            if (!x->recv_rows[c] || (p != x->rank && local == 1)) continue;   /* one expert: rank-major is expert-major */
            bf16 *near = p == x->rank ? sorted + (size_t)x->send_offset[c] * C : stage + (size_t)(stage_at[p] + within) * C;
            bf16 *far = major + (size_t)x->recv_offset[c] * C;
            chunk_add(&chunks, back ? far : near, back ? near : far, x->recv_rows[c]);
            within += x->recv_rows[c];
        }
    }
    if (back) {
        mark(st, copy, 0);
        copy_chunks(st, &chunks, (int)C);
        mark(st, copy, 1);
    }
    mark(st, transfer, 0);
    MNC(st, ncclGroupStart());
    for (int p = 0; p < x->ep; p++) {
        if (p == x->rank) continue;
        bf16 *mine = sorted + (size_t)x->send_offset[p * local] * C;
        bf16 *theirs = local == 1 ? major + (size_t)x->recv_offset[p] * C : stage + (size_t)stage_at[p] * C;
        int staged_p = local == 1 ? x->recv_rows[p] : (p + 1 < x->ep ? stage_at[p + 1] : staged) - stage_at[p];
        size_t out = (size_t)(back ? staged_p : sent[p]) * C, in = (size_t)(back ? sent[p] : staged_p) * C;
        if (out) MNC(st, ncclSend(back ? theirs : mine, out, ncclBfloat16, p, comm, st->c.stream));
        if (in) MNC(st, ncclRecv(back ? mine : theirs, in, ncclBfloat16, p, comm, st->c.stream));
    }
    MNC(st, ncclGroupEnd());
    mark(st, transfer, 1);
    if (!back) {
        mark(st, copy, 0);
        copy_chunks(st, &chunks, (int)C);
        mark(st, copy, 1);
    }
    if (stage) pool_free(st, stage);
}

/* The expert TP group's gather (moe_gather_plan) and its way back, as Megatron runs them over the expert TP
 * group: collectives, not send/recv (its gather_from_sequence_parallel_region and reduce_scatter_to_sequence_
 * parallel_region).  Every rank routes the same number of rows (its sequence share's tokens times k), so the
 * gather is one all-gather of each rank's sorted rows, rank-major, then the chunk copy to expert-major; the way
 * back, each rank's partial sums of every rank's rows go rank-major (each rank's in its sorted order) and one
 * reduce-scatter leaves each rank the sum over the group of its own rows.  A communicator that ran send/recv as
 * well holds NCCL's point-to-point buffers beside its collectives' (the EP group: 898 MiB at its first use on
 * 2 x H200 against 463 for an all-reduce group, docs/validation/2026-11-26-h200x2-moe-prewarm). */
static void gather_chunks(const moe_exchange *x, bf16 *ranked, bf16 *major, int own, size_t C, int to_major,
                          chunk_list *chunks)
{
    const int E = x->local;
    chunks->n = 0;
    for (int p = 0; p < x->ep; p++) {
        int within = 0;   /* expert e's rows start here in rank p's sorted rows */
        for (int e = 0; e < E; e++) {
            int c = p * E + e;
            if (x->recv_rows[c]) {
                bf16 *in_ranked = ranked + ((size_t)p * own + within) * C, *in_major = major + (size_t)x->recv_offset[c] * C;
                chunk_add(chunks, to_major ? in_ranked : in_major, to_major ? in_major : in_ranked, x->recv_rows[c]);
            }
            within += x->recv_rows[c];
        }
    }
}

static void gather_rows(moe_state *st, const moe_exchange *x, const bf16 *sorted, bf16 *major, int width,
                        ncclComm_t comm, const char *transfer, const char *copy)
{
    const size_t C = (size_t)width;
    const int own = st->c.N * st->c.k;   /* every rank's rows: its tokens times k; x->rows_in is the group's */
    bf16 *ranked = pool_rows(st, MOE_POOL_SCRATCH, own * x->ep, (int)C);
    mark(st, transfer, 0);
    MNC(st, ncclAllGather(sorted, ranked, (size_t)own * C, ncclBfloat16, comm, st->c.stream));
    mark(st, transfer, 1);
    chunk_list chunks;
    gather_chunks(x, ranked, major, own, C, 1, &chunks);
    mark(st, copy, 0);
    copy_chunks(st, &chunks, (int)C);
    mark(st, copy, 1);
    pool_free(st, ranked);
}

/* type: what the rows hold, summed as such (bf16 partial sums of the tokens, fp32 ones of the gates) */
static void reduce_back(moe_state *st, const moe_exchange *x, const bf16 *major, bf16 *sorted, int width,
                        ncclDataType_t type, ncclComm_t comm, const char *transfer, const char *copy)
{
    const size_t C = (size_t)width;
    const int own = st->c.N * st->c.k;
    bf16 *ranked = pool_rows(st, MOE_POOL_SCRATCH, own * x->ep, (int)C);
    chunk_list chunks;
    gather_chunks(x, ranked, (bf16 *)major, own, C, 0, &chunks);
    mark(st, copy, 0);
    copy_chunks(st, &chunks, (int)C);
    mark(st, copy, 1);
    mark(st, transfer, 0);
    const size_t per_row = C * sizeof(bf16) / (type == ncclFloat ? sizeof(float) : sizeof(bf16));
    MNC(st, ncclReduceScatter(ranked, sorted, (size_t)own * per_row, type, ncclSum, comm, st->c.stream));
    mark(st, transfer, 1);
    pool_free(st, ranked);
}

/* ---- the experts' GEMMs: cuBLASLt, one algorithm per shape bucket ----
 * An expert's row count changes every call.  Through cublasGemmEx every new shape ran
 * cuBLAS's heuristic on the host, 0.14 to 0.18 ms a GEMM on 2 x H200, and the GPU waited for
 * it: the experts' GEMMs measured 2.5x to 4x the planner's time, the kernels themselves a
 * fraction of it (docs/validation/2026-11-26-h200x2-ep, first run).  Here the heuristic runs
 * before the first step, once per transposes, leading dimensions and bucket of MOE_ALGO_BUCKET
 * rows (moe.h says why 16, asked at the bucket's top), and its algorithm serves every shape of
 * the bucket that cublasLtMatmul takes; a shape it refuses runs through cublasGemmEx, counted in
 * `fallbacks`. */
#define MOE_LT_WORKSPACE_BYTES (32u << 20)

static void lt_init(moe_state *st)
{
    MCB(st, cublasLtCreate(&st->lt));
    for (int i = 0; i < MOE_STREAMS; i++) {
        MCK(st, cudaMalloc(&st->lt_workspace[i], MOE_LT_WORKSPACE_BYTES));
        st->bytes += MOE_LT_WORKSPACE_BYTES;
        MCK(st, cudaStreamCreateWithFlags(&st->gemm_streams[i], cudaStreamNonBlocking));
        MCK(st, cudaEventCreateWithFlags(&st->gemm_joined[i], cudaEventDisableTiming));
    }
    MCK(st, cudaEventCreateWithFlags(&st->gemm_fork, cudaEventDisableTiming));
    for (int ta = 0; ta < 2; ta++)
        for (int tb = 0; tb < 2; tb++) {
            cublasOperation_t opa = ta ? CUBLAS_OP_T : CUBLAS_OP_N, opb = tb ? CUBLAS_OP_T : CUBLAS_OP_N;
            MCB(st, cublasLtMatmulDescCreate(&st->lt_desc[ta][tb], CUBLAS_COMPUTE_32F, CUDA_R_32F));
            MCB(st, cublasLtMatmulDescSetAttribute(st->lt_desc[ta][tb], CUBLASLT_MATMUL_DESC_TRANSA, &opa, sizeof opa));
            MCB(st, cublasLtMatmulDescSetAttribute(st->lt_desc[ta][tb], CUBLASLT_MATMUL_DESC_TRANSB, &opb, sizeof opb));
        }
    for (int i = 0; i < 3; i++) MCB(st, cublasLtMatrixLayoutCreate(&st->lt_layout[i], CUDA_R_16BF, 1, 1, 1));
    size_t ws = MOE_LT_WORKSPACE_BYTES;
    MCB(st, cublasLtMatmulPreferenceCreate(&st->lt_pref));
    MCB(st, cublasLtMatmulPreferenceSetAttribute(st->lt_pref, CUBLASLT_MATMUL_PREF_MAX_WORKSPACE_BYTES, &ws, sizeof ws));
    st->algos = calloc(MOE_ALGO_SLOTS, sizeof *st->algos);
    if (!st->algos) { fprintf(stderr, "sextant-gpu train: rank %d: out of host memory\n", st->c.my_rank); exit(1); }
}

static void lt_free_all(moe_state *st)
{
    for (int ta = 0; ta < 2; ta++)
        for (int tb = 0; tb < 2; tb++) MCB(st, cublasLtMatmulDescDestroy(st->lt_desc[ta][tb]));
    MCB(st, cublasLtMatmulPreferenceDestroy(st->lt_pref));
    for (int i = 0; i < 3; i++) MCB(st, cublasLtMatrixLayoutDestroy(st->lt_layout[i]));
    MCB(st, cublasLtDestroy(st->lt));
    for (int i = 0; i < MOE_STREAMS; i++) {
        MCK(st, cudaFree(st->lt_workspace[i]));
        MCK(st, cudaStreamDestroy(st->gemm_streams[i]));
        MCK(st, cudaEventDestroy(st->gemm_joined[i]));
    }
    MCK(st, cudaEventDestroy(st->gemm_fork));
    free(st->algos);
}

/* One of the reused layouts reshaped to rows x cols, leading dimension ld. */
static void lt_shape(moe_state *st, cublasLtMatrixLayout_t layout, int rows, int cols, int ld)
{
    uint64_t r = (uint64_t)rows, c = (uint64_t)cols;
    int64_t l = ld;
    MCB(st, cublasLtMatrixLayoutSetAttribute(layout, CUBLASLT_MATRIX_LAYOUT_ROWS, &r, sizeof r));
    MCB(st, cublasLtMatrixLayoutSetAttribute(layout, CUBLASLT_MATRIX_LAYOUT_COLS, &c, sizeof c));
    MCB(st, cublasLtMatrixLayoutSetAttribute(layout, CUBLASLT_MATRIX_LAYOUT_LD, &l, sizeof l));
}

/* One GEMM through cublasGemmEx on `stream` (the step's cuBLAS handle, its stream put back after).  A handle of
 * its own for each stream was tried: the same times, and 0.25 GiB more memory on Mixtral's step (cuBLAS's own
 * allocations per handle; docs/validation/2026-11-27-h200-moe-experts, after-lane-handles/). */
static void gemm_ex(moe_state *st, cudaStream_t stream, int ta, int tb, int m, int n, int k, const bf16 *A, int lda,
                    const bf16 *B, int ldb, int accumulate, bf16 *C, int ldc)
{
    if (stream != st->c.stream) MCB(st, cublasSetStream(st->c.blas, stream));
    MCB(st, cublasGemmEx(st->c.blas, ta ? CUBLAS_OP_T : CUBLAS_OP_N, tb ? CUBLAS_OP_T : CUBLAS_OP_N, m, n, k, &one, A,
                         CUDA_R_16BF, lda, B, CUDA_R_16BF, ldb, accumulate ? &one : &zero, C, CUDA_R_16BF, ldc,
                         CUBLAS_COMPUTE_32F, CUBLAS_GEMM_DEFAULT));
    if (stream != st->c.stream) MCB(st, cublasSetStream(st->c.blas, st->c.stream));
}

/* The experts' GEMMs of one loop: every lane waits for the step's stream, and the step's stream for every
 * lane after (MOE_STREAMS). */
static void experts_fork(moe_state *st)
{
    MCK(st, cudaEventRecord(st->gemm_fork, st->c.stream));
    for (int i = 0; i < MOE_STREAMS; i++) MCK(st, cudaStreamWaitEvent(st->gemm_streams[i], st->gemm_fork, 0));
}
static void experts_join(moe_state *st)
{
    for (int i = 0; i < MOE_STREAMS; i++) {
        MCK(st, cudaEventRecord(st->gemm_joined[i], st->gemm_streams[i]));
        MCK(st, cudaStreamWaitEvent(st->c.stream, st->gemm_joined[i], 0));
    }
}

/* An expert GEMM of MOE_EXACT_GEMM_FLOPS or more: through cublasGemmEx under SEXTANT_MOE_LARGE=ex. */
static int gemm_is_large(int m, int n, int k) { return 2.0 * m * n * (double)k >= MOE_EXACT_GEMM_FLOPS; }

/* The algorithm of the bucket of C[m, n] (+)= op(A) op(B): each size d in bucket ceil(d / MOE_ALGO_BUCKET), the
 * heuristic asked on the bucket's first shape (lt_prewarm's: its top); the reused layouts are left shaped to this
 * one.  An open-addressed table, not a list: a step of 32 experts looks it up thousands of times, and the host's
 * time per GEMM is what the forward waits for.  NULL when the table is full (cublasGemmEx then runs the GEMM). */
static moe_algo *algo_for(moe_state *st, int ta, int tb, int m, int n, int k, int lda, int ldb, int ldc)
{
    cublasLtMatrixLayout_t a = st->lt_layout[0], b = st->lt_layout[1], c = st->lt_layout[2];
    lt_shape(st, a, ta ? k : m, ta ? m : k, lda);
    lt_shape(st, b, tb ? n : k, tb ? k : n, ldb);
    lt_shape(st, c, m, n, ldc);
    const int mb = (m + MOE_ALGO_BUCKET - 1) / MOE_ALGO_BUCKET, nb = (n + MOE_ALGO_BUCKET - 1) / MOE_ALGO_BUCKET,
              kb = (k + MOE_ALGO_BUCKET - 1) / MOE_ALGO_BUCKET;
    uint64_t h = 1469598103934665603ull;   /* FNV-1a over the key's fields */
    const int key[8] = {ta, tb, mb, nb, kb, lda, ldb, ldc};
    for (int i = 0; i < 8; i++) h = (h ^ (uint64_t)(uint32_t)key[i]) * 1099511628211ull;
    for (unsigned slot = (unsigned)(h & (MOE_ALGO_SLOTS - 1));; slot = (slot + 1) & (MOE_ALGO_SLOTS - 1)) {
        moe_algo *q = &st->algos[slot];
        if (q->used && q->ta == ta && q->tb == tb && q->mb == mb && q->nb == nb && q->kb == kb && q->lda == lda &&
            q->ldb == ldb && q->ldc == ldc)
            return q;
        if (q->used) continue;
        if (st->nalgos >= MOE_ALGOS_MAX) return NULL;
        st->nalgos++;
        *q = (moe_algo){1, ta, tb, mb, nb, kb, lda, ldb, ldc, 0, {{0}}};
        cublasLtMatmulHeuristicResult_t result;
        int got = 0;
        st->heuristics++;
        if (cublasLtMatmulAlgoGetHeuristic(st->lt, st->lt_desc[ta][tb], a, b, c, c, st->lt_pref, 1, &result, &got) ==
                CUBLAS_STATUS_SUCCESS && got > 0 && result.workspaceSize <= MOE_LT_WORKSPACE_BYTES) {
            q->algo = result.algo;
            q->usable = 1;
        }
        return q;
    }
}

/* The six expert GEMMs of a layer at `rows` rows, as gemm_forward, gemm_dgrad and gemm_wgrad make them, each asked
 * for its bucket's algorithm (lt_prewarm); those SEXTANT_MOE_LARGE=ex sends through cublasGemmEx are not. */
static void prewarm_at(moe_state *st, int rows)
{
    const int C = st->c.C, F = st->c.F, up = st->up;
    const int shapes[6][8] = {
        {1, 0, up, rows, C, C, C, up},   /* up: forward */
        {1, 0, C, rows, F, F, F, C},     /* down: forward */
        {0, 0, F, rows, C, F, C, F},     /* down: data gradient */
        {0, 1, F, C, rows, F, C, F},     /* down: weight gradient */
        {0, 0, C, rows, up, C, up, C},   /* up: data gradient */
        {0, 1, C, up, rows, C, up, C},   /* up: weight gradient */
    };
    for (int i = 0; i < 6; i++) {
        const int *g = shapes[i];
        if (!(st->large_ex && gemm_is_large(g[2], g[3], g[4])))
            algo_for(st, g[0], g[1], g[2], g[3], g[4], g[5], g[6], g[7]);
    }
}

/* Every bucket's algorithm asked before the first step, for the six expert GEMMs (forward, data and weight
 * gradients of the up and down projections) at every row count an expert can get: up to the EP group's tokens,
 * as top-k picks k different experts.  Asked on first sight instead, a bucket costs its heuristic (0.2-0.4 ms of
 * host time, the GPU idle behind it in the forward) in whichever timed step first routes that many rows to an
 * expert: moe-fine's EP 2 step fell from 55 to 27 ms over 30 steps as the buckets filled
 * (docs/validation/2026-11-26-moe-launches), a warm-up a run of thousands of steps does not see.  Each bucket is
 * asked at its top row count, whose algorithm's tiles cover every row count of the bucket (moe.h); a shape
 * cuBLASLt then refuses runs through cublasGemmEx, as before.  Mixtral 8x7B at EP 2 (up to 8192 rows an expert):
 * 3072 queries, under MOE_ALGOS_MAX; past it the rest go through cublasGemmEx. */
static void lt_prewarm(moe_state *st)
{
    const moe_config *c = &st->c;
    long most = (long)c->N * st->groups;   /* the group's tokens: the EP group's, or the TP group's gathered */
    long before = st->heuristics;
    double t0 = launch_clock_s();
    for (long top = MOE_ALGO_BUCKET; top < most + MOE_ALGO_BUCKET && st->nalgos < MOE_ALGOS_MAX - 6;
         top += MOE_ALGO_BUCKET)
        prewarm_at(st, (int)top);
    st->prewarmed = st->heuristics - before;
    st->prewarm_s = launch_clock_s() - t0;
}

/* column-major C[m, n] (+)= op(A) op(B), bf16 with fp32 sums, as cublasGemmEx takes it.
 * The forward's GEMMs follow the host's wait for the routing counts, with nothing queued before them:
 * what the host spends issuing each is GPU time lost wherever it exceeds the GEMM's own (at 2048
 * tokens of Mixtral 8x7B the forward's expert GEMMs took twice the planner's time while the same
 * shapes in the backward, queued behind other work, did not).  So the layouts are reshaped, not
 * made anew, and the bucket's algorithm goes straight to cublasLtMatmul, which refuses a shape it
 * does not take (then cublasGemmEx runs it, counted in `fallbacks`), instead of a check first. */
static void expert_gemm(moe_state *st, int lane, int ta, int tb, int m, int n, int k, const bf16 *A, int lda, const bf16 *B,
                        int ldb, int accumulate, bf16 *C, int ldc)
{
    /* lane: the expert's stream (experts_fork), or -1 for the step's own */
    cudaStream_t stream = lane < 0 ? st->c.stream : st->gemm_streams[lane];
    void *workspace = st->lt_workspace[lane < 0 ? 0 : lane];
    double t0 = launch_clock_s();
    st->gemm_calls++;
    /* a large GEMM (MOE_EXACT_GEMM_FLOPS) takes cublasGemmEx's algorithm for its exact shape with
     * SEXTANT_MOE_LARGE=ex */
    const int exact = gemm_is_large(m, n, k);
    st->exact_calls += exact && !st->gemm_ex;
    if (st->gemm_ex || (exact && st->large_ex)) {
        gemm_ex(st, stream, ta, tb, m, n, k, A, lda, B, ldb, accumulate, C, ldc);
        st->gemm_host_s += launch_clock_s() - t0;
        return;
    }
    cublasLtMatrixLayout_t a = st->lt_layout[0], b = st->lt_layout[1], c = st->lt_layout[2];
    moe_algo *found = algo_for(st, ta, tb, m, n, k, lda, ldb, ldc);
    int done = found && found->usable &&
               cublasLtMatmul(st->lt, st->lt_desc[ta][tb], &one, A, a, B, b, accumulate ? &one : &zero, C, c, C, c,
                              &found->algo, workspace, MOE_LT_WORKSPACE_BYTES, stream) == CUBLAS_STATUS_SUCCESS;
    if (!done) {
        st->fallbacks++;
        gemm_ex(st, stream, ta, tb, m, n, k, A, lda, B, ldb, accumulate, C, ldc);
    }
    st->gemm_host_s += launch_clock_s() - t0;
}

/* y[rows, out] = x[rows, in] W^T (W[out, in]), as train.c's linear layers */
static void gemm_forward(moe_state *st, int lane, bf16 *y, const bf16 *x, const bf16 *w, int rows, int in, int out)
{
    expert_gemm(st, lane, 1, 0, out, rows, in, w, in, x, in, 0, y, out);
}
/* dx[rows, in] (+)= dy[rows, out] W */
static void gemm_dgrad(moe_state *st, int lane, bf16 *dx, const bf16 *dy, const bf16 *w, int rows, int in, int out,
                       int accumulate)
{
    expert_gemm(st, lane, 0, 0, in, rows, out, w, in, dy, out, accumulate, dx, in);
}
/* dW[out, in] += dy^T x */
static void gemm_wgrad(moe_state *st, int lane, bf16 *dw, const bf16 *dy, const bf16 *x, int rows, int in, int out)
{
    expert_gemm(st, lane, 0, 1, in, out, rows, x, in, dy, out, 1, dw, in);
}

/* router logits[N, E] (fp32) = xn Wr^T */
static void router_forward(moe_state *st, float *logits, const bf16 *xn, int l)
{
    const moe_config *c = &st->c;
    MCB(st, cublasGemmEx(c->blas, CUBLAS_OP_T, CUBLAS_OP_N, c->E, c->N, c->C, &one, router_w(st, st->params, l),
                         CUDA_R_16BF, c->C, xn, CUDA_R_16BF, c->C, &zero, logits, CUDA_R_32F, c->E, CUBLAS_COMPUTE_32F,
                         CUBLAS_GEMM_DEFAULT));
}

/* Every EP rank's counts to every rank and to the host; the plan of this call's transfers. */
static void exchange_counts(moe_state *st, const saved_ptrs *sv, moe_call *call)
{
    const moe_config *c = &st->c;
    const int me = group_rank(st);
    mark(st, "ep_counts", 0);
    if (c->ep > 1)
        MNC(st, ncclAllGather(sv->counts + (size_t)me * c->E, sv->counts, c->E, ncclInt32, c->ep_comm, c->stream));
    if (c->tp > 1) {
        /* every TP rank's counts for the gather's sizes, and their sum for the auxiliary loss (Megatron sums the
         * tokens per expert over the sequence-parallel group) */
        MNC(st, ncclGroupStart());
        MNC(st, ncclAllGather(sv->counts + (size_t)me * c->E, sv->counts, c->E, ncclInt32, c->tp_comm, c->stream));
        MNC(st, ncclAllReduce(sv->counts + (size_t)me * c->E, sv->gcounts, c->E, ncclInt32, ncclSum, c->tp_comm, c->stream));
        MNC(st, ncclGroupEnd());
    }
    if (c->cp > 1)   /* the same sum over the CP ranks' sequence shares */
        MNC(st, ncclAllReduce(sv->counts + (size_t)me * c->E, sv->gcounts, c->E, ncclInt32, ncclSum, c->cp_comm, c->stream));
    MCK(st, cudaMemcpyAsync(st->host_counts, sv->counts, (size_t)st->groups * c->E * sizeof(int32_t), cudaMemcpyDeviceToHost,
                            c->stream));
    mark(st, "ep_counts", 1);
    MCK(st, cudaEventRecord(st->counted, c->stream));
    MCK(st, cudaEventSynchronize(st->counted));
    int bad = c->tp > 1 ? moe_gather_plan(st->host_counts, c->tp, c->E, c->tp_rank, &call->x)
                        : moe_exchange_plan(st->host_counts, c->ep, c->E, c->ep_rank, &call->x);
    if (bad) {
        fprintf(stderr, "sextant-gpu train: rank %d: internal: MoE exchange plan (ep %d, tp %d, %d experts)\n", c->my_rank,
                c->ep, c->tp, c->E);
        exit(1);
    }
    double sum = 0.0, squares = 0.0, most = 0.0;
    int empty = 0;
    for (int e = 0; e < call->x.local; e++) {
        double r = (double)call->x.expert_rows[e];
        sum += r;
        squares += r * r;
        if (r > most) most = r;
        empty += r == 0.0;
    }
    st->expert_empty_sum += (double)empty / call->x.local;
    double mean = sum / call->x.local, var = squares / call->x.local - mean * mean;
    st->expert_rows_sum += mean;
    st->expert_busiest_sum += mean > 0.0 ? most / mean : 1.0;
    st->expert_cv_sum += mean > 0.0 && var > 0.0 ? sqrt(var) / mean : 0.0;
    st->imbalance_sum += call->x.imbalance;
    if (call->x.imbalance > st->imbalance_max) st->imbalance_max = call->x.imbalance;
    st->imbalance_calls++;
}

void moe_forward(moe_state *st, void *saved, const bf16 *xn, bf16 *out, int l, int keep)
{
    const moe_config *c = &st->c;
    saved_ptrs sv = saved_at(st, saved);
    moe_call *call = call_for(st, saved, 1);
    const int N = c->N, k = c->k, C = c->C, F = c->F, gathered = c->tp > 1, exchanged = c->ep > 1 || gathered;
    mark(st, "router", 0);
    router_forward(st, sv.logits, xn, l);
    mark(st, "router", 1);
    mark(st, "router_topk", 0);
    MCK(st, sx_moe_topk(sv.idx, sv.gate, sv.logits, N, c->E, k, c->stream));
    if (st->balanced_idx)   /* SEXTANT_MOE_ROUTE=balanced: the router's gates kept, its choice replaced */
        MCK(st, cudaMemcpyAsync(sv.idx, st->balanced_idx, (size_t)N * k * sizeof(int32_t), cudaMemcpyDeviceToDevice, c->stream));
    if (st->random_idx)     /* SEXTANT_MOE_ROUTE=random: the same, each layer its own draw */
        MCK(st, cudaMemcpyAsync(sv.idx, st->random_idx + (size_t)(l % c->L) * N * k, (size_t)N * k * sizeof(int32_t),
                                cudaMemcpyDeviceToDevice, c->stream));
    mark(st, "router_topk", 1);
    /* one rank: the sorted rows are the experts' input, kept for the backward */
    call->xe = exchanged ? NULL : pool_rows(st, MOE_POOL_KEPT, N * k, C);
    /* each sorted row's gate, which the experts apply (one rank: the sorted rows are the experts') */
    float *gates = pool_gates(st, exchanged ? MOE_POOL_SCRATCH : MOE_POOL_KEPT, N * k);
    mark(st, "moe_permute", 0);
    MCK(st, sx_moe_permute(sv.counts + (size_t)group_rank(st) * c->E, sv.pos, sv.row_slot, sv.idx, N, k, c->E, c->stream));
    MCK(st, sx_moe_gather(exchanged ? st->xs : call->xe, xn, sv.row_slot, N, k, C, c->stream));
    MCK(st, sx_moe_row_gates(gates, sv.gate, sv.row_slot, N * k, c->stream));
    mark(st, "moe_permute", 1);
    exchange_counts(st, &sv, call);
    const moe_exchange *x = &call->x;
    const int R = x->rows_in;
    call->gates = gates;
    if (exchanged) {
        call->xe = pool_rows(st, MOE_POOL_KEPT, R, C);
        call->gates = pool_gates(st, MOE_POOL_KEPT, R);
        if (gathered) {
            gather_rows(st, x, st->xs, call->xe, C, c->tp_comm, "moe_tp_allgather", "moe_sort_chunks");
            gather_rows(st, x, (bf16 *)gates, (bf16 *)call->gates, MOE_GATE_WIDTH, c->tp_comm, "moe_tp_allgather",
                        "moe_sort_chunks");
        } else {
            exchange(st, x, st->xs, call->xe, C, 0, c->ep_comm, "ep_alltoall_dispatch", "moe_sort_chunks");
            exchange(st, x, (bf16 *)gates, (bf16 *)call->gates, MOE_GATE_WIDTH, 0, c->ep_comm, "ep_alltoall_dispatch",
                     "moe_sort_chunks");
        }
        pool_free(st, gates);
    }
    call->h = pool_rows(st, MOE_POOL_KEPT, R, st->up);
    call->act = pool_rows(st, MOE_POOL_KEPT, R, F);
    bf16 *weights = experts_params(st, l);
    const long calls_before = st->gemm_calls;
    const double host_before = st->gemm_host_s;
    mark(st, "expert_up", 0);
    experts_fork(st);
    for (int e = 0; e < st->El; e++) {
        size_t at = (size_t)x->expert_offset[e];
        if (x->expert_rows[e])
            gemm_forward(st, e % st->lanes, call->h + at * st->up, call->xe + at * C, up_w(st, weights, e),
                         x->expert_rows[e], C, st->up);
    }
    experts_join(st);
    mark(st, "expert_up", 1);
    mark(st, "expert_swiglu", 0);
    MCK(st, sx_moe_swiglu_forward(call->act, call->h, call->gates, R, F, c->stream));
    mark(st, "expert_swiglu", 1);
    /* the experts' outputs: one rank's in its sorted rows (the dispatch's scratch, free once the experts have
     * their input), an EP or TP group's expert-major, then back to the sorted rows there */
    bf16 *ye = exchanged ? pool_rows(st, MOE_POOL_SCRATCH, R, C) : st->xs;
    mark(st, "expert_down", 0);
    experts_fork(st);
    for (int e = 0; e < st->El; e++) {
        size_t at = (size_t)x->expert_offset[e];
        if (x->expert_rows[e])
            gemm_forward(st, e % st->lanes, ye + at * C, call->act + at * F, down_w(st, weights, e),
                         x->expert_rows[e], F, C);
    }
    experts_join(st);
    mark(st, "expert_down", 1);
    st->fwd_gemm_calls += st->gemm_calls - calls_before;
    st->fwd_gemm_host_s += st->gemm_host_s - host_before;
    if (exchanged) {
        if (gathered) reduce_back(st, x, ye, st->xs, C, ncclBfloat16, c->tp_comm, "moe_tp_reduce_scatter", "moe_sort_chunks");
        else exchange(st, x, st->xs, ye, C, 1, c->ep_comm, "ep_alltoall_combine", "moe_sort_chunks");
        pool_free(st, ye);
    }
    mark(st, "moe_unpermute", 0);
    MCK(st, sx_moe_combine(out, st->xs, sv.pos, NULL, N, k, C, c->stream));
    mark(st, "moe_unpermute", 1);
    if (!keep) call_free(st, call);
}

/* the experts' backward on the expert-major rows: dye in, dxe and the gates' gradients dgates out */
static void experts_backward(moe_state *st, moe_call *call, const bf16 *dye, bf16 *dxe, float *dgates, int l)
{
    const moe_config *c = &st->c;
    const moe_exchange *x = &call->x;
    const int R = x->rows_in, C = c->C, F = c->F, up = st->up;
    bf16 *dact = pool_rows(st, MOE_POOL_SCRATCH, R, F), *dh = pool_rows(st, MOE_POOL_SCRATCH, R, up);
    bf16 *weights = experts_params(st, l), *grads = experts_grads(st, l);
    mark(st, "expert_down_dgrad", 0);
    experts_fork(st);
    for (int e = 0; e < st->El; e++) {
        size_t at = (size_t)x->expert_offset[e];
        if (x->expert_rows[e])
            gemm_dgrad(st, e % st->lanes, dact + at * F, dye + at * C, down_w(st, weights, e), x->expert_rows[e], F,
                       C, 0);
    }
    experts_join(st);
    mark(st, "expert_down_dgrad", 1);
    mark(st, "expert_down_wgrad", 0);
    experts_fork(st);
    for (int e = 0; e < st->El; e++) {
        size_t at = (size_t)x->expert_offset[e];
        if (x->expert_rows[e])
            gemm_wgrad(st, e % st->lanes, down_w(st, grads, e), dye + at * C, call->act + at * F,
                       x->expert_rows[e], F, C);
    }
    experts_join(st);
    mark(st, "expert_down_wgrad", 1);
    mark(st, "expert_swiglu_bwd", 0);
    MCK(st, sx_moe_swiglu_backward(dh, dgates, dact, call->h, call->gates, R, F, c->stream));
    mark(st, "expert_swiglu_bwd", 1);
    mark(st, "expert_up_dgrad", 0);
    experts_fork(st);
    for (int e = 0; e < st->El; e++) {
        size_t at = (size_t)x->expert_offset[e];
        if (x->expert_rows[e]) gemm_dgrad(st, e % st->lanes, dxe + at * C, dh + at * up, up_w(st, weights, e), x->expert_rows[e], C, up, 0);
    }
    experts_join(st);
    mark(st, "expert_up_dgrad", 1);
    mark(st, "expert_up_wgrad", 0);
    experts_fork(st);
    for (int e = 0; e < st->El; e++) {
        size_t at = (size_t)x->expert_offset[e];
        if (x->expert_rows[e]) gemm_wgrad(st, e % st->lanes, up_w(st, grads, e), dh + at * up, call->xe + at * C, x->expert_rows[e], C, up);
    }
    experts_join(st);
    mark(st, "expert_up_wgrad", 1);
    pool_free(st, dact);
    pool_free(st, dh);
}

void moe_backward(moe_state *st, void *saved, const bf16 *xn, const bf16 *dout, bf16 *dxn, int l)
{
    const moe_config *c = &st->c;
    saved_ptrs sv = saved_at(st, saved);
    moe_call *call = call_for(st, saved, 0);
    const int N = c->N, k = c->k, C = c->C, gathered = c->tp > 1, exchanged = c->ep > 1 || gathered, R = call->x.rows_in;
    /* the sorted rows' gradient in xs: the combine's backward (each row the gradient of its token's output: the
     * dispatch's gather), then the exchange */
    mark(st, "moe_unpermute_bwd", 0);
    MCK(st, sx_moe_gather(st->xs, dout, sv.row_slot, N, k, C, c->stream));
    mark(st, "moe_unpermute_bwd", 1);
    bf16 *dye = st->xs, *dxe = st->xs;   /* one rank: the sorted rows are the experts' */
    float *dgates = pool_gates(st, MOE_POOL_SCRATCH, R), *sorted_dgates = dgates;
    if (exchanged) {
        dye = pool_rows(st, MOE_POOL_SCRATCH, R, C);
        dxe = pool_rows(st, MOE_POOL_SCRATCH, R, C);
        if (gathered) gather_rows(st, &call->x, st->xs, dye, C, c->tp_comm, "moe_tp_allgather_bwd", "moe_sort_chunks_bwd");
        else exchange(st, &call->x, st->xs, dye, C, 0, c->ep_comm, "ep_alltoall_combine_bwd", "moe_sort_chunks_bwd");
    }
    experts_backward(st, call, dye, dxe, dgates, l);
    if (exchanged) {
        /* the gates' gradients go back with the rows' (with expert TP each rank's is its F shard's part: summed) */
        sorted_dgates = pool_gates(st, MOE_POOL_SCRATCH, N * k);
        if (gathered) {
            reduce_back(st, &call->x, dxe, st->xs, C, ncclBfloat16, c->tp_comm, "moe_tp_reduce_scatter_bwd",
                        "moe_sort_chunks_bwd");
            reduce_back(st, &call->x, (bf16 *)dgates, (bf16 *)sorted_dgates, MOE_GATE_WIDTH, ncclFloat, c->tp_comm,
                        "moe_tp_reduce_scatter_bwd", "moe_sort_chunks_bwd");
        } else {
            exchange(st, &call->x, st->xs, dxe, C, 1, c->ep_comm, "ep_alltoall_dispatch_bwd", "moe_sort_chunks_bwd");
            exchange(st, &call->x, (bf16 *)sorted_dgates, (bf16 *)dgates, MOE_GATE_WIDTH, 1, c->ep_comm,
                     "ep_alltoall_dispatch_bwd", "moe_sort_chunks_bwd");
        }
        pool_free(st, dye);
        pool_free(st, dxe);
        pool_free(st, dgates);
    }
    MCK(st, sx_moe_slot_gates(st->dgate, sorted_dgates, sv.row_slot, N * k, c->stream));
    pool_free(st, sorted_dgates);
    /* the tokens' gradient: the sum of their k rows, then the router's part added */
    mark(st, "moe_permute_bwd", 0);
    MCK(st, sx_moe_combine(dxn, st->xs, sv.pos, NULL, N, k, C, c->stream));
    mark(st, "moe_permute_bwd", 1);
    mark(st, "router_topk_bwd", 0);
    /* with TP or CP the auxiliary loss's shares are the sequence's (the summed counts over the ranks that split it,
     * times the local tokens: Megatron sums tokens per expert over TP x CP) */
    const int split = gathered ? c->tp : c->cp > 1 ? c->cp : 1;
    MCK(st, sx_moe_router_backward(st->dlogits, sv.logits, sv.idx, sv.gate, st->dgate,
                                   split > 1 ? sv.gcounts : sv.counts + (size_t)group_rank(st) * c->E,
                                   st->aux_scale / split, N, c->E, k, c->stream));
    mark(st, "router_topk_bwd", 1);
    mark(st, "router_dgrad", 0);
    gemm_dgrad(st, -1, dxn, st->dlogits, router_w(st, st->params, l), N, C, c->E, 1);
    mark(st, "router_dgrad", 1);
    mark(st, "router_wgrad", 0);
    gemm_wgrad(st, -1, router_w(st, st->grads, l), st->dlogits, xn, N, C, c->E);
    mark(st, "router_wgrad", 1);
    call_free(st, call);
}

void moe_zero_grads(moe_state *st)
{
    mark(st, "zero_grads", 0);
    MCK(st, cudaMemsetAsync(st->grads, 0, st->sh.grad_count * sizeof(bf16), st->c.stream));
    mark(st, "zero_grads", 1);
}

/* Layer l's router gradients summed over `comm` on `stream`, profiled as `name`; 1 (issued). */
static int router_allreduce(moe_state *st, int l, ncclComm_t comm, const char *name, cudaStream_t stream)
{
    bf16 *g = router_w(st, st->grads, l);
    st->c.hooks.mark_on(name, 0, stream);
    MNC(st, ncclAllReduce(g, g, (size_t)st->c.E * st->c.C, ncclBfloat16, ncclSum, comm, stream));
    st->c.hooks.mark_on(name, 1, stream);
    return 1;
}

/* Layer l's reductions on `stream` (profiled there): the router's gradients over TP and DP, the experts' over their
 * group (with ZeRO-1 reduce-scattered in place; ZeRO-2/3's went out every micro-batch, zero.c).  Sharded routers are
 * reduced in moe_step, every layer's in one call.  1 when it issued any. */
static int reduce_layer(moe_state *st, int l, cudaStream_t stream)
{
    const moe_config *c = &st->c;
    const moe_shards *sh = &st->sh;
    int issued = 0;
    /* the router is every TP rank's, each fed its sequence share (Megatron's sequence-parallel weights) */
    if (c->tp > 1) issued = router_allreduce(st, l, c->tp_comm, "tp_allreduce_router_grads", stream);
    if (c->dp > 1 && !sh->router_sharded) issued = router_allreduce(st, l, c->dp_comm, "dp_allreduce_grads", stream);
    if (st->edp > 1 && !sh->experts_zero) {
        bf16 *experts = st->grads + sh->router_count + (size_t)l * sh->expert_stride;
        if (sh->experts_sharded) {
            c->hooks.mark_on("edp_reduce_scatter_grads", 0, stream);
            MNC(st, ncclReduceScatter(experts, experts + sh->expert_at, sh->expert_slice, ncclBfloat16, ncclSum,
                                      c->edp_comm, stream));
            c->hooks.mark_on("edp_reduce_scatter_grads", 1, stream);
        } else {
            c->hooks.mark_on("edp_allreduce_grads", 0, stream);
            MNC(st, ncclAllReduce(experts, experts, (size_t)st->El * expert_elems(st), ncclBfloat16, ncclSum, c->edp_comm,
                                  stream));
            c->hooks.mark_on("edp_allreduce_grads", 1, stream);
        }
        issued = 1;
    }
    return issued;
}

int moe_grads_ready(moe_state *st, int l, cudaStream_t comm)
{
    const moe_config *c = &st->c;
    const moe_shards *sh = &st->sh;
    if (!(c->tp > 1 || (c->dp > 1 && !sh->router_sharded) || (st->edp > 1 && !sh->experts_zero))) return 0;
    MCK(st, cudaEventRecord(st->grads_written[l], c->stream));
    MCK(st, cudaStreamWaitEvent(comm, st->grads_written[l], 0));
    reduce_layer(st, l, comm);
    st->reduced[l] = 1;
    return 1;
}

/* ZeRO-1/2: every rank's updated slices to every rank on the comm stream, the routers first, then layer by layer in
 * the order the next forward reads them; each layer's first forward waits for its own (moe_params_take). */
static void gather_updated(moe_state *st)
{
    const moe_config *c = &st->c;
    const moe_shards *sh = &st->sh;
    int experts = sh->experts_sharded && !(sh->experts_zero && sh->stage == 3);   /* ZeRO-3's gathers are zero.c's */
    if (!sh->router_sharded && !experts) return;
    MCK(st, cudaEventRecord(st->updated, c->stream));
    MCK(st, cudaStreamWaitEvent(c->comm, st->updated, 0));
    if (sh->router_sharded) {
        c->hooks.mark_on("dp_allgather_params", 0, c->comm);
        MNC(st, ncclAllGather(st->params + sh->router_at, st->params, sh->router_slice, ncclBfloat16, c->dp_comm, c->comm));
        c->hooks.mark_on("dp_allgather_params", 1, c->comm);
        MCK(st, cudaEventRecord(st->router_ready, c->comm));
        st->router_pending = 1;
    }
    for (int l = 0; experts && l < c->L; l++) {
        bf16 *layer = st->params + sh->router_count + (size_t)l * sh->expert_stride;
        c->hooks.mark_on("edp_allgather_params", 0, c->comm);
        MNC(st, ncclAllGather(layer + sh->expert_at, layer, sh->expert_slice, ncclBfloat16, c->edp_comm, c->comm));
        c->hooks.mark_on("edp_allgather_params", 1, c->comm);
        MCK(st, cudaEventRecord(st->experts_ready[l], c->comm));
        st->gather_pending[l] = 1;
    }
}

void moe_step(moe_state *st, const sx_adamw_params *hp)
{
    const moe_config *c = &st->c;
    const moe_shards *sh = &st->sh;
    /* what the backward did not hand over (none when train.c calls moe_grads_ready on the last micro-batch) */
    for (int l = 0; l < c->L; l++) {
        if (!st->reduced[l]) reduce_layer(st, l, c->stream);
        st->reduced[l] = 0;
    }
    if (sh->router_sharded) {
        /* every layer's routers in one reduce-scatter over DP (ZeRO-1 for them at every stage: moe_plan.h) */
        mark(st, "dp_reduce_scatter_grads", 0);
        MNC(st, ncclReduceScatter(st->grads, st->grads + sh->router_at, sh->router_slice, ncclBfloat16, ncclSum,
                                  c->dp_comm, c->stream));
        mark(st, "dp_reduce_scatter_grads", 1);
    }
    mark(st, "optimizer", 0);
    if (!sh->router_sharded && !sh->experts_sharded) {
        MCK(st, sx_adamw(st->master, st->m, st->v, st->params, st->grads, sh->state_count, hp, c->stream));
    } else {
        /* the routers' slice, then each layer's experts' (the state holds them one after another, moe_shard_take) */
        MCK(st, sx_adamw(st->master, st->m, st->v, st->params + sh->router_at, st->grads + sh->router_at,
                         sh->router_slice, hp, c->stream));
        int params_sliced = sh->experts_zero && sh->stage == 3;
        for (int l = 0; l < c->L; l++) {
            size_t at = sh->router_slice + (size_t)l * sh->expert_slice;
            size_t whole_at = (size_t)l * sh->expert_stride + sh->expert_at, slice_at = (size_t)l * sh->expert_slice;
            bf16 *p16 = st->params + sh->router_count + (params_sliced ? slice_at : whole_at);
            bf16 *g16 = st->grads + sh->router_count + (sh->experts_zero ? slice_at : whole_at);
            MCK(st, sx_adamw(st->master + at, st->m + at, st->v + at, p16, g16, sh->expert_slice, hp, c->stream));
        }
    }
    mark(st, "optimizer", 1);
    gather_updated(st);
}

void moe_step_begin(moe_state *st, cudaEvent_t optimizer_done)
{
    if (st->sh.experts_zero) zero_step_begin(&st->ez, optimizer_done);
}

void moe_params_take(moe_state *st, int l, int backward)
{
    const moe_config *c = &st->c;
    if (st->sh.experts_zero && st->sh.stage == 3) zero_take_params(&st->ez, l, backward);
    if (backward || !(st->router_pending || st->gather_pending[l])) return;
    c->zero_mark("dp_allgather_wait", 0, c->stream, PASS_STEP);
    if (st->router_pending) MCK(st, cudaStreamWaitEvent(c->stream, st->router_ready, 0));
    if (st->gather_pending[l]) MCK(st, cudaStreamWaitEvent(c->stream, st->experts_ready[l], 0));
    c->zero_mark("dp_allgather_wait", 1, c->stream, PASS_STEP);
    st->router_pending = 0;
    st->gather_pending[l] = 0;
}

void moe_grads_take(moe_state *st, int l)
{
    if (st->sh.experts_zero) zero_grads_begin(&st->ez, l);
}

int moe_grads_give(moe_state *st)
{
    if (!st->sh.experts_zero) return 0;
    zero_grads_end(&st->ez);
    return 1;
}

void moe_grads_flush(moe_state *st)
{
    if (st->sh.experts_zero) zero_grads_flush(&st->ez);
}

void moe_free(moe_state *st)
{
    for (int i = 0; i < MOE_CALLS_MAX; i++)
        if (st->calls[i].key) call_free(st, &st->calls[i]);
    MCK(st, cudaStreamSynchronize(st->c.stream));
    for (int i = 0; i < MOE_POOLS; i++) MCK(st, cudaMemPoolDestroy(st->pools[i]));
    void *bufs[] = {st->params, st->grads,   st->master, st->m,            st->v,
                    st->xs,     st->dlogits, st->dgate,  st->balanced_idx, st->random_idx};
    for (size_t i = 0; i < sizeof bufs / sizeof bufs[0]; i++) MCK(st, cudaFree(bufs[i]));
    MCK(st, cudaFreeHost(st->host_counts));
    MCK(st, cudaEventDestroy(st->counted));
    lt_free_all(st);
    for (int l = 0; l < st->c.L; l++) {
        MCK(st, cudaEventDestroy(st->grads_written[l]));
        MCK(st, cudaEventDestroy(st->experts_ready[l]));
    }
    MCK(st, cudaEventDestroy(st->updated));
    MCK(st, cudaEventDestroy(st->router_ready));
    if (st->sh.experts_zero) {
        for (int i = 0; i < 3; i++) {
            MCK(st, cudaFree(st->ez.gathered[i]));
            MCK(st, cudaFree(st->ez.work[i]));
        }
        zero_free(&st->ez);
    }
    free(st->grads_written);
    free(st->reduced);
    free(st->experts_ready);
    free(st->gather_pending);
    free(st->ebuckets);
    memset(st, 0, sizeof *st);
}

/* one of a pool's high-water marks (its reserve, or its allocations in use) */
static size_t pool_high(const moe_state *st, int pool, enum cudaMemPoolAttr attribute)
{
    uint64_t high = 0;
    if (st->pools[pool]) MCK(st, cudaMemPoolGetAttribute(st->pools[pool], attribute, &high));
    return (size_t)high;
}

size_t moe_pool_high_bytes(const moe_state *st, int pool) { return pool_high(st, pool, cudaMemPoolAttrReservedMemHigh); }
size_t moe_pool_used_high_bytes(const moe_state *st, int pool) { return pool_high(st, pool, cudaMemPoolAttrUsedMemHigh); }
