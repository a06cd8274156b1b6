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
 * op by op from a separate profiling step.
 *
 * This file sets a run up, runs its stages (train_run) and frees it; the step
 * itself is in the files step.h declares: step_layout.c (buffers), step_model.c
 * (parameters, initial values, batches), step_pass.c (forward and backward),
 * step_comm.c (collectives and waits), step_schedule.c (one step, optimizer),
 * linear.c (linear layers, unfused attention), step_profile.c (profiling and
 * replay), step_report.c (rows, CSV, JSON, plot); train_check.c checks the
 * flags, gradient_check.c the gradients. */
#include <math.h>
#include <nccl.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>
#include <unistd.h>

#include "step.h"

int my_rank;   /* for error lines (gpu_check.h) */

void *host_alloc(size_t bytes)
{
    void *p = malloc(bytes ? bytes : 1);
    if (!p) { fprintf(stderr, "sextant-gpu train: rank %d: out of host memory (%zu bytes)\n", my_rank, bytes); exit(1); }
    return p;
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

/* What train_run's stages hand each other: the run, the planner's view of it, what the timed,
 * profiling and replay steps measured and the report made of them. */
typedef struct {
    const train_options *o;
    const model_t *m;              /* as run: no dropout */
    const hw_gpu *gpu;
    const hw_node *node;
    launch_ctx *ctx;
    int nranks, rank, cp, N;
    layout_t l;                    /* the planner's view of the run */
    estimate_t e, e_uncal;         /* its estimate, and on hwdb defaults when have_uncal */
    int have_uncal;
    size_t total_mem;
    size_t state_bytes, act_bytes;
    int nptrs, watchdog_s, sharded;
    void *blas_workspace;
    /* the timed steps */
    size_t global_tokens;
    int32_t *global_in, *global_tg;
    float *host_loss;
    double *step_s, *step_losses;
    double *issue_s;               /* the host's time to issue each timed step (one_step's return) */
    double issue_median;
    int ahead_us;                  /* SEXTANT_HOST_AHEAD_US: the GPU held this long before each step */
    unsigned long long data_state;
    cudaEvent_t t0, t1;
    double first_loss, last_loss;
    int timed;
    double measured_w, measured_mhz, measured_c;
    /* the profiling and replay steps */
    float profiled_ms;
    measured_op ms_ops[MEASURED_MAX];
    int nms;
    double clock_sum[MEASURED_MAX];
    int clock_n[MEASURED_MAX];
    double step_clock_median;
    measured_op replayed[MEASURED_MAX];
    int nreplayed;
    /* the report */
    double median, spread, device_used, pp_transfer, bubble, dp_exposed, slowest, peak;
    int peak_rank;
    report_row *rows, *rows_uncal;
    int nrows, nrows_uncal;
    double *all;                   /* 8 figures per rank */
    double tokens_per_s, flops_per_s, mfu;
    loss_trend trend;
    report_info info;
    int write_failed;
} train_run_state;

/* The shapes this rank holds (Megatron's rank order: TP innermost, then CP, DP, PP). */
static void rank_shapes(gpt *g, const model_t *m, const train_options *o, int rank, int cp)
{
    shapes *s = &g->s;
    s->tp = o->l.tp; s->pp = o->l.pp; s->dp = o->l.dp;
    /* Megatron's rank order: TP innermost, then CP, DP, PP */
    s->cp = cp;
    s->tp_rank = rank % o->l.tp;
    s->cp_rank = (rank / o->l.tp) % cp;
    s->dp_rank = (rank / (o->l.tp * cp)) % o->l.dp;
    s->pp_rank = rank / (o->l.tp * cp * o->l.dp);
    s->sp = o->l.sp && o->l.tp > 1;
    s->Lmodel = (int)m->layers;
    s->L = (int)layers_on_stage(m, &o->l, s->pp_rank);
    s->layer0 = (int)first_layer_on_stage(m, &o->l, s->pp_rank);
    s->vpp = o->l.vpp > 1 ? o->l.vpp : 1;
    s->Lc = s->L / s->vpp;   /* train_check: the layers split evenly into pp vpp chunks */
    s->first = s->pp_rank == 0;
    s->last = s->pp_rank == o->l.pp - 1;
    s->C = (int)m->hidden; s->Hm = (int)m->heads; s->KVm = (int)m->kv_heads; s->Fm = (int)m->ffn; s->D = (int)m->head_dim;
    s->H = s->Hm / o->l.tp; s->KV = s->KVm / o->l.tp; s->F = s->Fm / o->l.tp;
    s->V = (int)m->vocab;
    s->Vp = (int)padded_vocab(m, o->l.tp);
    s->Vl = s->Vp / o->l.tp;
    s->vocab0 = s->tp_rank * s->Vl;
    s->maxT = (int)m->max_positions; s->B = o->l.mbs; s->T = o->l.seq / cp;
    s->N = s->B * s->T;
    s->Nl = s->sp ? s->N / o->l.tp : s->N;
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
    s->head_copy = s->tied && o->l.pp > 1 && s->last;
    s->flash = train_fused_attention(o);
    s->recompute = o->l.recompute == RECOMPUTE_FULL;
    s->grads_sharded = o->l.zero >= 2 && o->l.dp > 1;
    g->zero = s->grads_sharded ? o->l.zero : 0;
    s->moe = m->experts > 1;
    s->E = (int)m->experts; s->topk = (int)m->top_k; s->ep = o->l.ep > 1 ? o->l.ep : 1;
    g->tied_sync = s->tied && o->l.pp > 1 && (s->first || s->last);
    g->microbatches = o->l.gbs / (o->l.mbs * o->l.dp);
}

/* This stage's pipeline schedule, its pools and its parameter layout; 0, or 2 after one stderr line. */
static int plan_schedule(gpt *g, const train_options *o, int rank)
{
    const shapes *s = &g->s;
    int max_actions = pipeline_max_actions(o->l.pp, g->microbatches, s->vpp);
    g->schedule = host_alloc((size_t)max_actions * sizeof *g->schedule);
    g->nschedule = pipeline_schedule(o->l.pp, s->pp_rank, g->microbatches, s->vpp, g->schedule, max_actions, &g->pools);
    if (g->nschedule < 0) { fprintf(stderr, "sextant-gpu train: rank %d: internal: the pipeline schedule does not fit\n", rank); exit(1); }
    g->nslots = g->pools.slots;
    int pool_max = (int)(sizeof g->slots / sizeof g->slots[0]);
    if (g->nslots > pool_max || g->pools.inputs > pool_max || g->pools.heads > pool_max || g->pools.grad_buffers > pool_max) {
        fprintf(stderr, "sextant-gpu train: --pp %lld --vpp %d: more than %d micro-batches in flight\n", (long long)o->l.pp,
            s->vpp, pool_max);
        free(g->schedule); return 2;
    }
    if (s->L + 3 > BUCKETS_MAX) { fprintf(stderr, "sextant-gpu train: more than %d layers on a stage\n", BUCKETS_MAX - 3); free(g->schedule); return 2; }
    param_shapes(s, &g->pl);
    return 0;
}

/* The planner's view of the same run (calibrated and, with --calibration, not), before anything is
 * allocated, and the refusal of what will not fit; 0, or 2 or 3 after one stderr line. */
static int predict_run(train_run_state *r, gpt *g)
{
    const train_options *o = r->o;
    const model_t *m = r->m;
    const hw_gpu *gpu = r->gpu;
    const int nranks = r->nranks;
    const int rank = r->rank;
    const int cp = r->cp;
    const hw_node *node = r->node;
    const shapes *s = &g->s;
    if (train_fp8_gemms(o)) {
        char why[256];
        if (fp8_supported(why, sizeof why) != 0) {
            fprintf(stderr, "sextant-gpu train: --precision fp8: %s\n", why);
            free(g->schedule); return 2;
        }
    }
    train_fp8 = train_fp8_gemms(o);
    /* the planner's view of the same run, before anything is allocated */
    r->l.gpus = nranks; r->l.tp = o->l.tp; r->l.pp = o->l.pp; r->l.dp = o->l.dp; r->l.vpp = s->vpp;
    r->l.first_stage_layers = o->l.first_stage_layers; r->l.last_stage_layers = o->l.last_stage_layers;
    r->l.mbs = o->l.mbs; r->l.gbs = o->l.gbs; r->l.seq = o->l.seq;
    r->l.gpus_per_node = node->gpus_per_node > nranks ? node->gpus_per_node : nranks;
    r->l.recompute = o->l.recompute; r->l.attention = train_fused_attention(o) ? ATTENTION_SEXTANT : ATTENTION_UNFUSED;
    r->l.precision = train_fp8_gemms(o) ? PREC_FP8 : PREC_BF16;
    r->l.sp = s->sp; r->l.zero = o->l.zero; r->l.ep = s->ep;
    r->l.cp = cp; r->l.cp_comm = CP_COMM_RING;
    r->l.zero_waits = ZERO_WAITS_STEP;   /* a micro-batch's last reduce-scatter goes out behind the next one's forward */
    r->l.expert_rows = moe_route_balanced() ? EXPERT_ROWS_EVEN : EXPERT_ROWS_ROUTED;
    job_t job = {1e9, 1.0};
    char err[256];
    if (estimate_layout(m, gpu, node, &r->l, &job, &r->e, err, sizeof err) != 0) {
        fprintf(stderr, "sextant-gpu train: %s\n", err);
        free(g->schedule); return 2;
    }
    g->predicted_bytes = r->e.memory.total;
    r->have_uncal = o->calibrated && o->uncal_gpu && o->uncal_node;
    if (r->have_uncal && estimate_layout(m, o->uncal_gpu, o->uncal_node, &r->l, &job, &r->e_uncal, err, sizeof err) != 0) {
        fprintf(stderr, "sextant-gpu train: %s\n", err);
        free(g->schedule); return 2;
    }
    size_t free_before;
    CK(cudaMemGetInfo(&free_before, &r->total_mem));
    /* refuse what will not fit rather than fail half-way through allocating */
    double context = gpu->context_bytes > 0 ? gpu->context_bytes : 0.0;
    if (r->e.memory.total - context > (double)free_before) {
        fprintf(stderr, "sextant-gpu train: rank %d: %s at micro-batch %lld, seq %lld does not fit: predicted %.2f GiB, %.2f GiB free "
                "of %.2f GiB on the device\n", rank, m->name, (long long)o->l.mbs, (long long)o->l.seq,
                r->e.memory.total / 1073741824.0,
                free_before / 1073741824.0, r->total_mem / 1073741824.0);
        free(g->schedule); return 3;
    }
    return 0;
}

/* Streams and libraries of this process (gpu_context.h); returns cuBLAS's workspace. */
static void *open_gpu_context(gpt *g, int nranks)
{
    /* streams and libraries of this process */
    CK(cudaStreamCreateWithFlags(&gpu_ctx.stream, cudaStreamNonBlocking));
    /* SEXTANT_COMM_STREAM_PRIORITY=1: the data-parallel and ZeRO collectives' stream at the device's highest
     * priority, so that their NCCL kernels get SMs before the compute kernels beside them (ZeRO-3's took 1.6-2.0
     * times their alone-price beside LLaMA's GEMMs at the default).  Measured both ways, it changes neither the
     * collectives nor the step (docs/validation/2026-11-27-h200x2-zero-overhead, "priority"): off, kept to ask again */
    CK(stream_create_switched(&gpu_ctx.comm_stream, "SEXTANT_COMM_STREAM_PRIORITY"));
    CK(cudaStreamCreateWithFlags(&gpu_ctx.pp_stream, cudaStreamNonBlocking));
    CK(cudaStreamCreateWithFlags(&gpu_ctx.prep_stream, cudaStreamNonBlocking));
    CB(cublasCreate(&gpu_ctx.blas));
    CB(cublasSetStream(gpu_ctx.blas, gpu_ctx.stream));
    void *blas_workspace = device_alloc(g, CUBLAS_WORKSPACE_BYTES);
    CB(cublasSetWorkspace(gpu_ctx.blas, blas_workspace, CUBLAS_WORKSPACE_BYTES));
    CB(cublasLtCreate(&gpu_ctx.lt));
    gpu_ctx.lt_workspace = device_alloc(g, LT_WORKSPACE_BYTES);
    if (train_fp8) {
        fp8_init(gpu_ctx.lt, gpu_ctx.lt_workspace, LT_WORKSPACE_BYTES);
        /* each weight cast once per step, except ZeRO-3's, gathered into shared buffers layer by layer */
        fp8_weight_cache(g->zero != 3);
    }
    CK(cudaMalloc((void **)&world_scratch, 8 * sizeof(double) * (size_t)nranks));
    return blas_workspace;
}

/* The groups: tp fastest, then dp, then pp (Megatron's order); CP and EP when they are there. */
static void split_communicators(gpt *g, const train_options *o, launch_ctx *ctx, int cp)
{
    const shapes *s = &g->s;
    /* the groups: tp fastest, then dp, then pp (Megatron's order) */
    if (ctx) {
        ncclConfig_t cfg = NCCL_CONFIG_INITIALIZER;
        cfg.blocking = 1;
        /* no splitShare: communicators sharing resources must not run at once,
         * and the data-parallel reduction runs beside the tensor-parallel ones */
        cfg.splitShare = 0;
        /* with CP the gradient group (dp_comm) is DP x CP, the ring's group the CP ranks */
        int dpcp = s->dp_rank * cp + s->cp_rank;
        int tied_color = g->tied_sync ? dpcp * o->l.tp + s->tp_rank : NCCL_SPLIT_NOCOLOR;
        int cp_color = cp > 1 ? (s->pp_rank * o->l.dp + s->dp_rank) * o->l.tp + s->tp_rank : NCCL_SPLIT_NOCOLOR;
        /* EP: ep consecutive DP x CP ranks (Megatron carves it from DP x CP); the experts' DP: the ranks of one EP
         * place.  No group is opened with one rank: nothing runs on it, and a framework's communicator is made on its
         * first collective (PyTorch's ProcessGroupNCCL), while a one-rank split took 390 MiB on 2 x H200
         * (docs/validation/2026-11-26-h200x2-moe-prewarm); the planner counts groups of more than one GPU */
        int ep_groups = s->moe ? o->l.dp * cp / s->ep : 1;
        int ep_opened = s->moe && s->ep > 1, edp_opened = s->moe && ep_groups > 1;
        const int nocolor = NCCL_SPLIT_NOCOLOR;
        struct { int color, key; ncclComm_t *comm; } split[7] = {
            {o->l.tp > 1 ? (s->pp_rank * o->l.dp + s->dp_rank) * cp + s->cp_rank : nocolor, s->tp_rank, &g->tp_comm},
            {o->l.dp * cp > 1 ? s->pp_rank * o->l.tp + s->tp_rank : nocolor, dpcp, &g->dp_comm},
            {o->l.pp > 1 ? dpcp * o->l.tp + s->tp_rank : nocolor, s->pp_rank, &g->pp_comm},
            {tied_color, s->pp_rank, &g->tied_comm},
            {cp_color, s->cp_rank, &g->cp_comm},
            {ep_opened ? (s->pp_rank * ep_groups + dpcp / s->ep) * o->l.tp + s->tp_rank : NCCL_SPLIT_NOCOLOR,
             dpcp % s->ep, &g->ep_comm},
            {edp_opened ? (s->pp_rank * s->ep + dpcp % s->ep) * o->l.tp + s->tp_rank : NCCL_SPLIT_NOCOLOR,
             dpcp / s->ep, &g->edp_comm},
        };
        for (int i = 0; i < 7; i++) {
            size_t before = device_free_bytes();
            NC(ncclCommSplit(ctx->comm, split[i].color, split[i].key, split[i].comm, &cfg));
            size_t after = device_free_bytes();
            g->split_bytes[i] = before > after ? before - after : 0;
        }
    }
}

/* Parameters, gradients, optimizer state, activations, scratch: each one allocation; the events;
 * the initial weights. */
static void allocate_step(train_run_state *r, gpt *g)
{
    const train_options *o = r->o;
    const int rank = r->rank;
    const int cp = r->cp;
    const int N = r->N;
    const shapes *s = &g->s;
    /* parameters, gradients, optimizer state, activations, scratch: each one allocation */
    const param_layout *pl = &g->pl;
    r->sharded = o->l.zero >= 1 && o->l.dp > 1;
    size_t state = r->sharded ? pl->shard_count : pl->count;
    if (!r->sharded) g->pl.shard_count = g->pl.count;
    /* ZeRO-3 keeps its slice of the parameters, ZeRO-2 and 3 of the gradients */
    g->params = device_alloc(g, (g->zero == 3 ? pl->shard_count : pl->count) * sizeof(bf16));
    g->grads = device_alloc(g, (g->zero ? pl->shard_count : pl->count) * sizeof(bf16));
    g->master = device_alloc(g, state * sizeof(float));
    g->m = device_alloc(g, state * sizeof(float));
    g->v = device_alloc(g, state * sizeof(float));
    r->state_bytes = g->accounted_bytes;
    if (g->zero) zero_setup(g);
    if (cp > 1) cp_setup(g);
    /* the slots, and with interleaving the schedule's pools of inputs, heads and received gradients */
    size_t slot_bytes = layout_slot(&g->slots[0], NULL, s);
    size_t tensor_bytes = ((size_t)s->Nl * s->C * sizeof(bf16) + 255) & ~(size_t)255;
    size_t head_bytes = layout_head(&g->heads[0], NULL, s);
    r->act_bytes = slot_bytes * (size_t)g->nslots + tensor_bytes * (size_t)(g->pools.inputs + g->pools.grad_buffers) +
                       head_bytes * (size_t)g->pools.heads;
    g->slot_block = device_alloc(g, r->act_bytes);
    char *cursor = g->slot_block;
    for (int i = 0; i < g->nslots; i++, cursor += slot_bytes) layout_slot(&g->slots[i], cursor, s);
    for (int i = 0; i < g->pools.inputs; i++, cursor += tensor_bytes) g->inputs[i] = (bf16 *)cursor;
    for (int i = 0; i < g->pools.grad_buffers; i++, cursor += tensor_bytes) g->grad_bufs[i] = (bf16 *)cursor;
    for (int i = 0; i < g->pools.heads; i++, cursor += head_bytes) layout_head(&g->heads[i], cursor, s);
    if (s->vpp > 1) {
        g->action_done = host_alloc((size_t)g->nschedule * sizeof *g->action_done);
        for (int i = 0; i < g->nschedule; i++) CK(cudaEventCreateWithFlags(&g->action_done[i], cudaEventDisableTiming));
        g->waits = host_alloc((size_t)g->nschedule * sizeof *g->waits);
        g->last_group = pipeline_async_waits(g->schedule, g->nschedule, g->pools.grad_buffers, g->waits);
        if (g->last_group < -1) { fprintf(stderr, "sextant-gpu train: rank %d: internal: the schedule's waits\n", rank); exit(1); }
    }
    if (s->recompute) {
        size_t bytes = layout_layer(&g->recomp, NULL, s);
        g->recomp_block = device_alloc(g, bytes);
        layout_layer(&g->recomp, g->recomp_block, s);
        r->act_bytes += bytes;
    }
    g->scr_block = device_alloc(g, layout_scratch(&g->scr, NULL, s, g->microbatches));
    layout_scratch(&g->scr, g->scr_block, s, g->microbatches);
    g->norm_ws_bytes = sx_norm_backward_workspace_bytes(s->C);
    g->norm_ws = device_alloc(g, g->norm_ws_bytes);
    /* The embedding backward as prepare (ids only, on prep_stream, beside the forward pass) and apply in the
     * backward.  On one H100 it gave the same losses as the one call, with embedding_bwd 59.9 instead of
     * 79.7 us (docs/validation/archive/2026-11-23-h100-embedding); on 2 x H200 all 18 parallel layouts matched one
     * GPU with it (docs/validation/2026-11-23-h200x2-emb-split).  SEXTANT_TRAIN_EMB_SPLIT=0: the one call. */
    const char *split = getenv("SEXTANT_TRAIN_EMB_SPLIT");
    const int emb_split = s->first && !(split && atoi(split) == 0);
    const int Vb = s->tp > 1 ? s->Vl : s->Vp;
    g->emb_ws_bytes = !s->first ? 0 : emb_split ? sx_embedding_apply_workspace_bytes(N, s->C)
                                                : sx_embedding_backward_workspace_bytes(N, s->C, Vb);
    g->emb_ws = s->first ? device_alloc(g, g->emb_ws_bytes) : NULL;
    g->emb_grouping_bytes = emb_split ? (sx_embedding_grouping_bytes(N, s->C, Vb) + 255) & ~(size_t)255 : 0;
    g->emb_grouping = emb_split ? device_alloc(g, g->emb_grouping_bytes * (size_t)g->nslots) : NULL;
    for (int i = 0; emb_split && i < g->nslots; i++) {
        CK(cudaEventCreateWithFlags(&g->emb_fwd_at[i], cudaEventDisableTiming));
        CK(cudaEventCreateWithFlags(&g->emb_prepared[i], cudaEventDisableTiming));
    }
    CK(cudaMallocHost((void **)&g->host_ids, 4 * (size_t)g->microbatches * N * sizeof(int32_t)));
    r->nptrs = s->flash ? 0 : s->recompute ? 1 : g->nslots * s->L;
    g->ptrs = calloc((size_t)(r->nptrs ? r->nptrs : 1), sizeof *g->ptrs);
    if (!g->ptrs) { fprintf(stderr, "sextant-gpu train: out of host memory\n"); exit(1); }
    for (int i = 0; i < r->nptrs; i++) {
        layer_acts a = s->recompute ? g->recomp : layer_at(g, i / s->L, i % s->L);
        attention_pointers(&g->ptrs[i], a.qkv, a.att, a.atty, g->scr.dqkv, g->scr.datt, g->scr.dbuf_c, s);
    }
    if (g->scr.ones) {
        uint16_t *ones = host_alloc((size_t)N * sizeof *ones);
        for (int i = 0; i < N; i++) ones[i] = sx_ref_f2bf(1.0f);
        CK(cudaMemcpy(g->scr.ones, ones, (size_t)N * sizeof *ones, cudaMemcpyHostToDevice));
        free(ones);
    }
    for (int b = 0; b < pl->nbuckets; b++) {
        CK(cudaEventCreateWithFlags(&g->grad_ready[b], cudaEventDisableTiming));
        CK(cudaEventCreateWithFlags(&g->params_ready[b], cudaEventDisableTiming));
    }
    CK(cudaEventCreateWithFlags(&g->reduce_done, cudaEventDisableTiming));
    CK(cudaEventCreateWithFlags(&g->optimizer_done, cudaEventDisableTiming));
    CK(cudaEventCreateWithFlags(&g->synced, cudaEventDisableTiming));
    g->lr = o->lr > 0.0 ? o->lr : TRAIN_LR_DEFAULT;
    g->lr_warmup = o->lr_warmup;
    gpt_init(g);
}

/* The profiling step's events and the diagnostics the environment asks for (SEXTANT_CE_LAYOUT,
 * SEXTANT_REPLAY, SEXTANT_CLOCK_PROBE; docs/guide.md, "Environment switches"). */
static void diagnostics_begin(const train_options *o)
{
    profile_events = host_alloc(2 * (size_t)PROFILE_MAX * sizeof *profile_events);
    profile_tags = host_alloc((size_t)PROFILE_MAX * sizeof *profile_tags);
    profile_events_made = 0;
    /* the cross-entropy's path (kernels.h), to time the fallbacks in the step: 4 the staged
     * fallback, 5 the cluster per row (the other layouts measured are in dev/cuda/crossentropy.cu) */
    int ce_layout = env_int_in("SEXTANT_CE_LAYOUT", 4, 5, -1);
    if (ce_layout >= 0) sx_cross_entropy_tune(ce_layout);
    replay_runs = env_int_in("SEXTANT_REPLAY", 1, 1000, 0);
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
}

/* Rank 0's lines naming the run before its first step. */
static void print_run_header(const train_run_state *r, const gpt *g)
{
    const train_options *o = r->o;
    const model_t *m = r->m;
    launch_ctx *ctx = r->ctx;
    const int nranks = r->nranks;
    const int cp = r->cp;
    const shapes *s = &g->s;
    char chunks[64] = "";
    if (s->vpp > 1) snprintf(chunks, sizeof chunks, ", interleaved %d x %d layers", s->vpp, s->Lc);
    if (cp > 1) snprintf(chunks, sizeof chunks, ", cp %d: ring attention, %d tokens per rank", cp, s->T);
    printf("# sextant-gpu train %s: %d GPU%s (tp %lld, pp %lld%s, dp %lld%s%s%s), mbs %lld, gbs %lld (%d micro-batch%s per rank), seq %lld\n",
           m->name, nranks, nranks > 1 ? "s" : "", (long long)o->l.tp, (long long)o->l.pp, chunks, (long long)o->l.dp,
           s->sp ? ", sequence parallel" : "", r->sharded ? (g->zero == 3 ? ", ZeRO-3" : g->zero == 2 ? ", ZeRO-2" : ", ZeRO-1") : "",
           s->recompute ? ", full recomputation" : "", (long long)o->l.mbs, (long long)o->l.gbs, g->microbatches,
           g->microbatches == 1 ? "" : "es", (long long)o->l.seq);
    printf("# vocab %d padded to %d, %s, %s, %s, %s\n", s->V, s->Vp, s->rms ? "RMSNorm" : "LayerNorm",
           s->swiglu ? "SwiGLU" : "GELU", s->KVm < s->Hm ? "grouped-query attention" : "multi-head attention",
           s->learned_pos ? "learned positions" : s->rope ? "rotary positions" : "no positions");
    /* both names: the planner costs the step's fused kernel as --attention sextant (docs/guide.md, "Attention kernels") */
    printf("# attention: %s\n", s->flash ? "flash (the step's own fused kernel, kernels/attention.cu; the planner's sextant)"
                                         : "unfused (cuBLAS batched GEMMs + causal softmax; validate's default, estimate's is flash)");
    if (train_fp8_gemms(o))
        printf("# GEMMs: FP8 for the layers' linears (E4M3 weights and activations, E5M2 gradients, per-tensor scales "
               "from each tensor's amax; validator/fp8.c), lm_head in bf16\n");
    if (s->moe)
        printf("# mixture of experts: %d experts, top-%d, expert parallelism %d (%d experts a rank; experts' gradients "
               "over %lld rank%s), Switch's auxiliary loss x %g in the gradients (not in the loss printed)\n", s->E, s->topk,
               s->ep, s->E / s->ep, (long long)(o->l.dp * s->cp / s->ep), o->l.dp * s->cp / s->ep == 1 ? "" : "s",
               MOE_AUX_COEFF);
    if (ctx) printf("# ranks started by %s\n", ctx->mode);
}

/* The run's steps, timed from the warm-up on, with NVML's power over them; the losses to --losses.
 * 0, or -1 after one stderr line when a loss is not finite. */
static int run_timed_steps(train_run_state *r, gpt *g)
{
    const train_options *o = r->o;
    const int rank = r->rank;
    const int N = r->N;
    r->global_tokens = (size_t)o->l.gbs * o->l.seq;
    r->global_in = host_alloc(r->global_tokens * sizeof *r->global_in);
    r->global_tg = host_alloc(r->global_tokens * sizeof *r->global_tg);
    r->host_loss = host_alloc((size_t)g->microbatches * N * sizeof *r->host_loss);
    r->step_s = host_alloc((size_t)o->steps * sizeof *r->step_s);
    r->issue_s = host_alloc((size_t)o->steps * sizeof *r->issue_s);
    r->step_losses = host_alloc((size_t)o->steps * sizeof *r->step_losses); /* every rank's, for the trend */
    r->data_state = 42;
    CK(cudaEventCreate(&r->t0));
    CK(cudaEventCreate(&r->t1));
    r->first_loss = 0; r->last_loss = 0;
    r->timed = 0;
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
    if (rank == 0) print_run_header(r, g);
    /* SEXTANT_HOST_AHEAD_US=N, a diagnostic: a spin of N us on the step's stream before each step's
     * first event, so that the host issues the step while the GPU is busy and the GPU then runs it
     * without waiting for a launch (up to the launch queue's depth, and the host's own waits: a MoE
     * layer's counts).  The step measured so, beside the plain one, is what the host's issue costs. */
    r->ahead_us = env_int_in("SEXTANT_HOST_AHEAD_US", 1, 100000, 0);
    float *ahead_scratch = NULL;
    if (r->ahead_us) CK(cudaMalloc((void **)&ahead_scratch, sizeof *ahead_scratch));
    /* fault injection for the tests: SEXTANT_TRAIN_FAIL=RANK:STEP makes that rank die at that step */
    int fail_rank = -1, fail_step = -1;
    const char *fail = getenv("SEXTANT_TRAIN_FAIL");
    if (fail && sscanf(fail, "%d:%d", &fail_rank, &fail_step) != 2) fail_rank = -1;
    /* the GPU's power and clock over the timed steps (NVML; nothing when it is not there).
     * SEXTANT_POWER_POLL_MS=P, a diagnostic: the sampler polls every P ms instead of
     * POWER_POLL_MS_STEP; 0, no sampler (no power or clock in the report): what the polling
     * itself costs the step. */
    const int poll_ms = env_int_in("SEXTANT_POWER_POLL_MS", 0, 1000, POWER_POLL_MS_STEP);
    char nvml_why[256];
    int have_nvml = poll_ms > 0 && power_open(nvml_why, sizeof nvml_why) == 0;
    power_window *timed_window = NULL;
    r->measured_w = 0.0; r->measured_mhz = 0.0; r->measured_c = 0.0;
    for (int step = 1; step <= o->steps; step++) {
        if (have_nvml && step == o->warmup + 1) timed_window = power_window_begin(poll_ms);
        if (rank == fail_rank && step == fail_step) {
            fprintf(stderr, "sextant-gpu train: rank %d: SEXTANT_TRAIN_FAIL: dying at step %d\n", rank, step);
            _exit(9);
        }
        if (r->watchdog_s > 0) launch_watchdog(rank, r->watchdog_s, "a training step");
        load_batch(g, o, &r->data_state, r->global_in, r->global_tg);
        if (ahead_scratch) CK(sx_sm_clock_probe(ahead_scratch, r->ahead_us, gpu_ctx.stream));
        CK(cudaEventRecord(r->t0, gpu_ctx.stream));
        double issue_start = launch_clock_s();
        one_step(g, step);
        double issued = launch_clock_s() - issue_start;
        CK(cudaEventRecord(r->t1, gpu_ctx.stream));
        if (clock_probe_ops) CK(sx_sm_clock_probe(clock_probe_mhz + PROFILE_MAX + step - 1, CLOCK_PROBE_US, gpu_ctx.stream));
        /* the compute stream only: ZeRO-1's all-gather may run on into the next step's forward */
        host_wait(g, r->t1, "a training step");
        CK(cudaGetLastError());
        float ms;
        CK(cudaEventElapsedTime(&ms, r->t0, r->t1));
        double loss = step_loss(g, o, r->host_loss);
        if (r->watchdog_s > 0) launch_watchdog(rank, 0, NULL);
        if (!isfinite(loss)) {
            fprintf(stderr, "sextant-gpu train: rank %d: step %d: loss is %f\n", rank, step, loss);
            return -1;
        }
        if (step == 1) r->first_loss = loss;
        r->last_loss = loss;
        r->step_losses[step - 1] = loss;
        if (step > o->warmup) {
            r->issue_s[r->timed] = issued;
            r->step_s[r->timed++] = ms * 1e-3;
        }
        if (loss_file) fprintf(loss_file, "%d %.6f\n", step, loss);
        if (rank == 0 && (o->quiet_steps || step == 1 || step % 10 == 0 || step == o->steps))
            printf("step %4d  loss %.6f  %.2f ms\n", step, loss, ms);
    }
    if (timed_window) {
        double window_s;
        int updates;
        if (power_window_end(timed_window, &r->measured_w, &r->measured_mhz, &r->measured_c, &window_s, &updates) != 0)
            r->measured_w = r->measured_mhz = r->measured_c = 0.0;
    }
    if (have_nvml) power_close();
    if (ahead_scratch) CK(cudaFree(ahead_scratch));
    if (loss_file && outfile_commit(&losses_out, losses_err, sizeof losses_err) != 0) {
        fprintf(stderr, "sextant-gpu train: --losses: %s\n", losses_err);
        exit(2);
    }
    return 0;
}

/* SEXTANT_TIMELINE=PREFIX, a diagnostic: every event pair of the profiling step, one row per op
 * call, to PREFIX.rankR.csv: when it began and ended on its stream, in ms from the step's first
 * event, and whether that stream was the step's or a side stream (communication, experts); and
 * when the host began and finished issuing it, in ms from its issue of that first event (the
 * GPU's queue is empty there, after the last step's wait, so the two clocks start within a
 * launch of each other).  What the per-op sums cannot say: which calls ran beside which, and
 * which ones the GPU began only as the host issued them. */
static void write_timeline(const train_run_state *r, int rank)
{
    const char *prefix = getenv("SEXTANT_TIMELINE");
    if (!prefix || !*prefix) return;
    char path[4096], err[512];
    if (snprintf(path, sizeof path, "%s.rank%d.csv", prefix, rank) >= (int)sizeof path) {
        fprintf(stderr, "sextant-gpu train: SEXTANT_TIMELINE=%s: path too long\n", prefix);
        exit(2);
    }
    outfile out = {0};
    if (outfile_open(&out, path, err, sizeof err) != 0) {
        fprintf(stderr, "sextant-gpu train: SEXTANT_TIMELINE: %s\n", err);
        exit(2);
    }
    fprintf(out.f, "call,op,pass,side,start_ms,end_ms,host_begin_ms,host_end_ms\n");
    for (int i = 0; i < profile_count; i++) {
        float a, b;
        CK(cudaEventElapsedTime(&a, r->t0, profile_events[2 * i]));
        CK(cudaEventElapsedTime(&b, r->t0, profile_events[2 * i + 1]));
        fprintf(out.f, "%d,%s,%s,%d,%.4f,%.4f,%.4f,%.4f\n", i, profile_tags[i].name, pass_name(profile_tags[i].pass),
                profile_tags[i].side, a, b, 1e3 * (profile_tags[i].host_begin_s - profile_host_t0_s),
                1e3 * (profile_tags[i].host_end_s - profile_host_t0_s));
    }
    if (outfile_commit(&out, err, sizeof err) != 0) {
        fprintf(stderr, "sextant-gpu train: SEXTANT_TIMELINE: %s\n", err);
        exit(2);
    }
}

/* The profiling step: one more step with events around every op, summed per op and pass. */
static void run_profiling_step(train_run_state *r, gpt *g)
{
    const train_options *o = r->o;
    const int rank = r->rank;
    /* the profiling step: one more step with events around every op */
    if (r->watchdog_s > 0) launch_watchdog(rank, r->watchdog_s, "the profiling step");
    load_batch(g, o, &r->data_state, r->global_in, r->global_tg);
    profiling = 1;
    profile_count = 0;
    CK(cudaEventRecord(r->t0, gpu_ctx.stream));
    profile_host_t0_s = launch_clock_s();
    one_step(g, o->steps + 1);
    CK(cudaEventRecord(r->t1, gpu_ctx.stream));
    sync_all(g, "the profiling step");
    profiling = 0;
    (void)step_loss(g, o, r->host_loss);
    if (r->watchdog_s > 0) launch_watchdog(rank, 0, NULL);
    CK(cudaEventElapsedTime(&r->profiled_ms, r->t0, r->t1));
    r->nms = 0;
    for (int i = 0; i < profile_count; i++) {
        float ms;
        CK(cudaEventElapsedTime(&ms, profile_events[2 * i], profile_events[2 * i + 1]));
        int k = 0;
        while (k < r->nms && (r->ms_ops[k].pass != profile_tags[i].pass || strcmp(r->ms_ops[k].name, profile_tags[i].name))) k++;
        if (k == r->nms) {
            if (r->nms == MEASURED_MAX) continue;
            r->ms_ops[r->nms++] = (measured_op){profile_tags[i].name, profile_tags[i].pass, 0.0, 0, 1e30};
        }
        r->ms_ops[k].seconds += ms * 1e-3;
        r->ms_ops[k].calls++;
        if (ms * 1e-3 < r->ms_ops[k].fastest) r->ms_ops[k].fastest = ms * 1e-3;
    }
    write_timeline(r, rank);
}

/* SEXTANT_CLOCK_PROBE: the clock after each profiled op, and the timed steps' median. */
static void read_clock_probes(train_run_state *r)
{
    const train_options *o = r->o;
    r->step_clock_median = 0.0;
    if (clock_probe_ops) {
        float *mhz = host_alloc((PROFILE_MAX + (size_t)o->steps) * sizeof *mhz);
        CK(cudaMemcpy(mhz, clock_probe_mhz, (PROFILE_MAX + (size_t)o->steps) * sizeof *mhz, cudaMemcpyDeviceToHost));
        for (int i = 0; i < profile_count; i++) {
            if (mhz[i] <= 0.0f) continue;
            for (int k = 0; k < r->nms; k++)
                if (r->ms_ops[k].pass == profile_tags[i].pass && !strcmp(r->ms_ops[k].name, profile_tags[i].name)) {
                    r->clock_sum[k] += mhz[i];
                    r->clock_n[k]++;
                    break;
                }
        }
        double *timed_mhz = host_alloc((size_t)o->steps * sizeof *timed_mhz);
        int nt = 0;
        for (int st = o->warmup; st < o->steps; st++)
            if (mhz[PROFILE_MAX + st] > 0.0f) timed_mhz[nt++] = mhz[PROFILE_MAX + st];
        sort_ascending(timed_mhz, (size_t)nt);
        if (nt) r->step_clock_median = timed_mhz[nt / 2];
        free(timed_mhz);
        free(mhz);
        CK(cudaFree(clock_probe_mhz));
        clock_probe_mhz = NULL;
    }
}

/* SEXTANT_REPLAY: one more step, every linear layer's GEMMs and the attention replayed. */
static void run_replay_step(train_run_state *r, gpt *g)
{
    const train_options *o = r->o;
    const int rank = r->rank;
    /* SEXTANT_REPLAY: one more step, every linear layer's GEMMs and the attention replayed */
    r->nreplayed = 0;
    if (replay_runs > 0) {
        if (r->watchdog_s > 0) launch_watchdog(rank, r->watchdog_s, "the replay step");
        load_batch(g, o, &r->data_state, r->global_in, r->global_tg);
        replaying = 1;
        replay_count = 0;
        one_step(g, o->steps + 2);
        sync_all(g, "the replay step");
        replaying = 0;
        (void)step_loss(g, o, r->host_loss);
        if (r->watchdog_s > 0) launch_watchdog(rank, 0, NULL);
        for (int i = 0; i < replay_count; i++) {
            float ms;
            CK(cudaEventElapsedTime(&ms, replay_events[2 * i], replay_events[2 * i + 1]));
            int k = 0;
            while (k < r->nreplayed && (r->replayed[k].pass != replay_tags[i].pass || strcmp(r->replayed[k].name, replay_tags[i].name)))
                k++;
            if (k == r->nreplayed) {
                if (r->nreplayed == MEASURED_MAX) continue;
                r->replayed[r->nreplayed++] = (measured_op){replay_tags[i].name, replay_tags[i].pass, 0.0, 0, 1e30};
            }
            r->replayed[k].seconds += ms * 1e-3 / replay_runs; /* per run, summed over the op's calls like the step's */
            r->replayed[k].calls++;
        }
        replay_free(); /* before the device's memory is read */
    }
}

/* The step's median and memory, the rows of the report, and every rank's figures to every rank. */
static void measure_run(train_run_state *r, gpt *g)
{
    const train_options *o = r->o;
    const model_t *m = r->m;
    const hw_gpu *gpu = r->gpu;
    launch_ctx *ctx = r->ctx;
    const int nranks = r->nranks;
    const int rank = r->rank;
    const shapes *s = &g->s;
    size_t free_after;
    CK(cudaMemGetInfo(&free_after, &r->total_mem));
    sort_ascending(r->step_s, (size_t)r->timed);
    r->median = r->step_s[r->timed / 2];
    sort_ascending(r->issue_s, (size_t)r->timed);
    r->issue_median = r->issue_s[r->timed / 2];
    r->spread = (r->step_s[r->timed - 1] - r->step_s[0]) / r->median;
    r->device_used = (double)(r->total_mem - free_after);

    /* Pipeline: a send/recv that finds its peer ready costs the transfer
     * alone; the fastest of the step stands for that cost, and the rest of
     * the time spent in send/recv is waiting for the other stage: the bubble. */
    int p2p_calls = 0, bwd_calls = 0;
    double p2p_fastest = 0.0, bwd_fastest = 0.0;
    double p2p_total = measured_of(r->ms_ops, r->nms, "pp_sendrecv", PASS_FWD, &p2p_calls, &p2p_fastest);
    double p2p_bwd = measured_of(r->ms_ops, r->nms, "pp_sendrecv", PASS_BWD, &bwd_calls, &bwd_fastest);
    if (bwd_calls && (!p2p_calls || bwd_fastest < p2p_fastest)) p2p_fastest = bwd_fastest;
    p2p_total += p2p_bwd;
    p2p_calls += bwd_calls;
    measured_step ms_step = {r->ms_ops, r->nms, p2p_calls ? p2p_fastest : 0.0, p2p_total,
                             measured_of(r->ms_ops, r->nms, "dp_exposed", PASS_STEP, NULL, NULL) +
                                 measured_of(r->ms_ops, r->nms, "dp_allgather_wait", PASS_STEP, NULL, NULL) +
                                 zero_exposed(r->ms_ops, r->nms),
                             r->median, r->device_used, s->vpp > 1 ? measured_of(r->ms_ops, r->nms, "pp_wait", PASS_STEP, NULL, NULL) : -1.0};
    const stage_ops *ops = stage_list(&r->e, s);
    r->rows = calloc((size_t)ops->nops + MEASURED_MAX + 8, sizeof *r->rows);
    r->rows_uncal = calloc((size_t)ops->nops + MEASURED_MAX + 8, sizeof *r->rows_uncal);
    if (!r->rows || !r->rows_uncal) { fprintf(stderr, "sextant-gpu train: out of host memory\n"); exit(1); }
    r->pp_transfer = 0.0; r->bubble = 0.0;
    r->nrows = op_rows(&r->e, g, &ms_step, r->rows, &r->pp_transfer, &r->bubble);
    r->nrows_uncal = r->have_uncal ? op_rows(&r->e_uncal, g, &ms_step, r->rows_uncal, NULL, NULL) : 0;
    r->dp_exposed = ms_step.dp_exposed;

    /* every rank's figures to every rank */
    double mine[8] = {r->median, r->spread, r->device_used, (double)g->accounted_bytes, r->bubble, r->dp_exposed, r->pp_transfer,
                      r->profiled_ms * 1e-3};
    r->all = host_alloc(8 * sizeof(double) * (size_t)nranks);
    if (ctx) {
        CK(cudaMemcpyAsync(world_scratch + 8 * (size_t)rank, mine, sizeof mine, cudaMemcpyHostToDevice, gpu_ctx.stream));
        NC(ncclAllGather(world_scratch + 8 * (size_t)rank, world_scratch, 8, ncclFloat64, ctx->comm, gpu_ctx.stream));
        CK(cudaMemcpyAsync(r->all, world_scratch, sizeof mine * (size_t)nranks, cudaMemcpyDeviceToHost, gpu_ctx.stream));
        sync_all(g, "the report's all-gather");
    } else {
        memcpy(r->all, mine, sizeof mine);
    }
    r->slowest = 0; r->peak = 0;
    r->peak_rank = 0;
    for (int rk = 0; rk < nranks; rk++) {
        if (r->all[8 * rk] > r->slowest) r->slowest = r->all[8 * rk];
        if (r->all[8 * rk + 2] > r->peak) { r->peak = r->all[8 * rk + 2]; r->peak_rank = rk; }
    }
    r->tokens_per_s = (double)r->global_tokens / r->slowest;
    r->flops_per_s = r->e.model_flops_per_step / r->slowest;
    r->mfu = r->flops_per_s / ((double)nranks * gpu->peak_flops[PREC_BF16]);
    /* whether the run learns: the losses' trend against their own noise (loss_trend.c) */
    loss_trend_judge(r->step_losses, o->steps, &r->trend);
    /* what the report files say beside the rows */
    r->info = (report_info){m, gpu, o, rank, s->pp_rank, nranks, r->timed, r->spread, r->tokens_per_s, r->flops_per_s, r->mfu,
                            r->first_loss, r->last_loss, r->measured_w, r->measured_mhz, r->measured_c, r->e.step_power_w,
                            r->e.step_clock_hz / 1e6};
}

/* Rank 0's summary: loss, step time, throughput, memory, power, against the planner. */
/* The planner again with the router's imbalance as this run measured it, which no prediction made before the run
 * can know: the step at the calls' mean, the memory at the worst call's (the peak is the busiest rank's at its
 * heaviest micro-batch).  What is left against the measurement is the cost model's own error. */
static void report_moe_as_routed(const train_run_state *r, const gpt *g)
{
    model_t m = *r->m;
    job_t job = {1e9, 1.0};
    char err[256];
    static estimate_t at_mean, at_worst;
    double mean = g->moe.imbalance_sum / g->moe.imbalance_calls, worst = g->moe.imbalance_max;
    m.moe_imbalance = mean > 1.0 ? mean : 1.0;
    int ok = estimate_layout(&m, r->gpu, r->node, &r->l, &job, &at_mean, err, sizeof err) == 0;
    m.moe_imbalance = worst > 1.0 ? worst : 1.0;
    ok = ok && estimate_layout(&m, r->gpu, r->node, &r->l, &job, &at_worst, err, sizeof err) == 0;
    if (!ok) {
        printf("MoE priced as routed: %s\n", err);
        return;
    }
    printf("MoE priced as routed: at the measured mean imbalance %.3f the step %.2f ms (%+.1f%%); at the worst call's "
           "%.3f the memory %.3f GiB (%+.1f%%)\n", mean, at_mean.step_s * 1e3,
           100.0 * (at_mean.step_s / r->slowest - 1.0), worst, at_worst.memory.total / 1073741824.0,
           100.0 * (at_worst.memory.total / r->peak - 1.0));
}

/* The planner again with this host's issue of an expert GEMM as the forward measured it (rank 0's seconds issuing
 * its forward's expert GEMMs over their count), where the prediction took the overlay's gemm_issue_us: a host
 * slower or faster than the calibrated one moves a step whose forward's experts the host issues (OLMoE at TP 2 + SP
 * on 2 x H200: 11.2 us a launch, -3.7% at the overlay's 7.89 and +0.1% at it;
 * docs/validation/2026-11-28-cpu-bind).  What is left is the cost model's own error. */
static void report_moe_at_host_issue(const train_run_state *r, const gpt *g)
{
    hw_gpu gpu = *r->gpu;
    gpu.gemm_issue_s = g->moe.fwd_gemm_host_s / (double)g->moe.fwd_gemm_calls;
    job_t job = {1e9, 1.0};
    char err[256];
    static estimate_t at_host;
    if (estimate_layout(r->m, &gpu, r->node, &r->l, &job, &at_host, err, sizeof err) != 0) {
        printf("MoE priced at this host's issue: %s\n", err);
        return;
    }
    printf("MoE priced at this host's issue: at %.2f us an expert GEMM (the forward's, rank 0; the price took %.2f) the "
           "step %.2f ms (%+.1f%%)\n", 1e6 * gpu.gemm_issue_s, 1e6 * r->gpu->gemm_issue_s, at_host.step_s * 1e3,
           100.0 * (at_host.step_s / r->slowest - 1.0));
}

static void print_summary(const train_run_state *r, const gpt *g)
{
    const train_options *o = r->o;
    const model_t *m = r->m;
    const int nranks = r->nranks;
    const int cp = r->cp;
    const shapes *s = &g->s;
    char trend_line[256];
    loss_trend_describe(&r->trend, trend_line, sizeof trend_line);
    printf("\nloss %.4f -> %.4f over %d steps (ln V = %.4f)\n%s\n", r->first_loss, r->last_loss, o->steps, log((double)s->V),
           trend_line);
    printf("step time: median %.2f ms over %d timed steps (spread %.1f%%; slowest rank's median), predicted %.2f ms (%+.1f%%)\n",
           r->slowest * 1e3, r->timed, 100.0 * r->spread, r->e.step_s * 1e3, 100.0 * (r->e.step_s / r->slowest - 1.0));
    /* a step the host issues in about its own time is the host's: the GPU waited for launches */
    printf("host: rank 0 issued a step in %.2f ms (median; its step %.2f ms)%s\n", r->issue_median * 1e3, r->median * 1e3,
           r->ahead_us ? ", the GPU held back before each (SEXTANT_HOST_AHEAD_US)" : "");
    printf("tokens/s %.0f (%.0f per GPU), %.1f model TFLOP/s per GPU, MFU %.1f%% (planner's model FLOPs %.4g per step)\n",
           r->tokens_per_s, r->tokens_per_s / nranks, r->flops_per_s / nranks / 1e12, 100.0 * r->mfu, r->e.model_flops_per_step);
    printf("memory: peak device use %.3f GiB on rank %d; predicted %.3f GiB for the heaviest stage (%+.1f%%): "
           "weights+grads+Adam %.3f, activations %.3f, logits %.3f, other %.3f\n",
           r->peak / 1073741824.0, r->peak_rank, r->e.memory.total / 1073741824.0, 100.0 * (r->e.memory.total / r->peak - 1.0),
           (r->e.memory.weights + r->e.memory.gradients + r->e.memory.optimizer) / 1073741824.0, r->e.memory.activations / 1073741824.0,
           r->e.memory.logits / 1073741824.0, r->e.memory.other / 1073741824.0);
    printf("predicted step: compute %.2f ms, tp %.2f, pp %.2f, bubble %.2f, dp exposed %.2f, optimizer %.2f\n",
           r->e.compute_s * 1e3, r->e.tp_comm_s * 1e3, r->e.pp_comm_s * 1e3, r->e.bubble_s * 1e3, r->e.dp_comm_s * 1e3,
           r->e.optimizer_s * 1e3);
    if (r->measured_w > 0)
        printf("power: %.0f W and %.0f MHz SM clock at %.0f C over the timed steps (NVML: energy counter, clock every "
               "50 ms%s)\n", r->measured_w, r->measured_mhz, r->measured_c, nranks > 1 ? "; rank 0's GPU" : "");
    if (r->e.step_clock_hz > 0)
        printf("power model: predicted %.0f W at %.0f MHz (%.0f W at the top clock%s)%s\n", r->e.step_power_w,
               r->e.step_clock_hz / 1e6, r->e.top_clock_power_w, r->e.clock_fraction < 1.0 ? ", over the cap" : "",
               r->measured_mhz > 0 ? "" : "; not measured here");
    if (s->moe && g->moe.imbalance_calls)
        printf("MoE load imbalance: measured %.3f mean, %.3f worst (the busiest EP rank's routed tokens over the mean, over "
               "%ld layer calls of rank 0, every step); the planner assumes %.3f (--moe-imbalance %.3f%s)\n",
               g->moe.imbalance_sum / g->moe.imbalance_calls, g->moe.imbalance_max, g->moe.imbalance_calls, moe_rank_load(m, &r->l),
               model_moe_imbalance(m), s->ep == 1                        ? "; with ep 1 no rank waits for another: load 1"
                                       : !strcmp(moe_route_name(), "random") ? ", the random route's own draw"
                                                                              : "");
    if (s->moe && s->ep > 1 && g->moe.imbalance_calls) report_moe_as_routed(r, g);
    if (s->moe && g->moe.imbalance_calls)
        printf("MoE rows over rank 0's %d experts (route: %s): %.0f an expert on average; the busiest expert %.3f x the mean, "
               "coefficient of variation %.3f, %.1f%% of the experts given no rows (their GEMMs not launched) (means over the "
               "calls)\n",
               s->E / s->ep, moe_route_name(), g->moe.expert_rows_sum / g->moe.imbalance_calls,
               g->moe.expert_busiest_sum / g->moe.imbalance_calls, g->moe.expert_cv_sum / g->moe.imbalance_calls,
               100.0 * g->moe.expert_empty_sum / g->moe.imbalance_calls);
    if (s->moe)
        printf("MoE buffers: the routed rows' stream-ordered pools peaked at %.3f GiB reserved (kept for the backward %.3f, "
               "in use %.3f; scratch %.3f, in use %.3f), on rank 0, beside our %.3f GiB; the EP groups' first use took %.3f GiB; "
               "expert GEMMs: %s, %ld cuBLASLt heuristic queries "
               "(%ld before the first step, in %.2f s), %ld calls of %.0f GFLOP or more (%s) and %ld where "
               "cuBLASLt refused, %.1f us of host time to issue each (the forward's %.1f), on %d stream%s\n",
               (moe_pool_high_bytes(&g->moe, MOE_POOL_KEPT) + moe_pool_high_bytes(&g->moe, MOE_POOL_SCRATCH)) / 1073741824.0,
               moe_pool_high_bytes(&g->moe, MOE_POOL_KEPT) / 1073741824.0,
               moe_pool_used_high_bytes(&g->moe, MOE_POOL_KEPT) / 1073741824.0,
               moe_pool_high_bytes(&g->moe, MOE_POOL_SCRATCH) / 1073741824.0,
               moe_pool_used_high_bytes(&g->moe, MOE_POOL_SCRATCH) / 1073741824.0,
               g->accounted_bytes / 1073741824.0, g->moe.connect_bytes / 1073741824.0,
               g->moe.gemm_ex ? "cublasGemmEx (SEXTANT_MOE_GEMM=ex)" : "cuBLASLt", g->moe.heuristics, g->moe.prewarmed,
               g->moe.prewarm_s,
               g->moe.exact_calls, MOE_EXACT_GEMM_FLOPS / 1e9,
               g->moe.large_ex ? "through cublasGemmEx, SEXTANT_MOE_LARGE=ex" : "16-row buckets", g->moe.fallbacks,
               g->moe.gemm_calls ? 1e6 * g->moe.gemm_host_s / (double)g->moe.gemm_calls : 0.0,
               g->moe.fwd_gemm_calls ? 1e6 * g->moe.fwd_gemm_host_s / (double)g->moe.fwd_gemm_calls : 0.0, g->moe.lanes,
               g->moe.lanes == 1 ? "" : "s");
    if (s->moe && g->moe.fwd_gemm_calls > 0) report_moe_at_host_issue(r, g);
    if (r->have_uncal)
        printf("uncalibrated (hwdb defaults): step %.2f ms (%+.1f%%), memory %.3f GiB (%+.1f%%)\n", r->e_uncal.step_s * 1e3,
               100.0 * (r->e_uncal.step_s / r->slowest - 1.0), r->e_uncal.memory.total / 1073741824.0,
               100.0 * (r->e_uncal.memory.total / r->peak - 1.0));
    if (nranks > 1) {
        printf("%-5s %-6s %-6s %12s %10s %12s %12s %12s %12s\n", "rank", "stage", "tp/dp", "median ms", "spread",
               "device GiB", "ours GiB", "bubble ms", "dp exp. ms");
        for (int rk = 0; rk < nranks; rk++)
            printf("%-5d %-6lld %lld/%-4lld %12.2f %9.1f%% %12.3f %12.3f %12.2f %12.2f\n", rk,
                   (long long)(rk / (o->l.tp * cp * o->l.dp)), (long long)(rk % o->l.tp),
                   (long long)((rk / (o->l.tp * cp)) % o->l.dp), r->all[8 * rk] * 1e3, 100.0 * r->all[8 * rk + 1],
                   r->all[8 * rk + 2] / 1073741824.0, r->all[8 * rk + 3] / 1073741824.0, r->all[8 * rk + 4] * 1e3, r->all[8 * rk + 5] * 1e3);
    }
    if (s->vpp > 1)
        printf("our allocations: model state %.3f GiB, activations %.3f GiB (%d chunk slot%s of %d layers in flight, %d "
               "inputs, %d heads, %d gradient buffers), scratch %.3f GiB (rank 0)\n", r->state_bytes / 1073741824.0,
               r->act_bytes / 1073741824.0, g->nslots, g->nslots == 1 ? "" : "s", s->Lc, g->pools.inputs, g->pools.heads,
               g->pools.grad_buffers, g->scr.bytes / 1073741824.0);
    else
        printf("our allocations: model state %.3f GiB, activations %.3f GiB (%d micro-batch%s in flight), scratch %.3f GiB "
               "(rank 0)\n", r->state_bytes / 1073741824.0, r->act_bytes / 1073741824.0, g->nslots, g->nslots == 1 ? "" : "es",
               g->scr.bytes / 1073741824.0);
    if (g->zero) {
        /* a MoE layer's experts have buffers of their own (moe.c, over the expert-data-parallel group); the planner
         * counts one unit of the whole layer */
        size_t small = g->zs.small + (s->moe && g->moe.sh.experts_zero ? g->moe.ez.small : 0);
        printf("ZeRO-%d beside the shards: %.3f GiB, %s gradient buffers of %.2f M elements (a layer%s) x 2 + %.2f M "
               "(the embedding or head, when larger); the planner counts %.3f GiB (zero_unit_buffer_bytes)\n", g->zero,
               (g->zero_bytes + (s->moe ? g->moe.zero_bytes : 0)) / 1073741824.0,
               g->zero == 3 ? "gathered parameter and" : "", small / 1e6,
               s->moe && g->moe.sh.experts_zero ? ", its experts' apart" : "", g->zs.big / 1e6,
               zero_unit_buffer_bytes(g->zero, (double)small, (double)g->zs.big, 2.0, 2.0) / 1073741824.0);
    }
    if (g->ctx) {
        /* NCCL's device memory by communicator: what the planner's other_memory_allowance counts per group */
        static const char *const names[7] = {"tp", "dp", "pp", "tied", "cp", "ep", "expert dp"};
        /* a group's first use: comm_warmup's, the EP groups' in moe_init */
        size_t use[7];
        for (int i = 0; i < 7; i++) use[i] = i == 5 ? g->moe.connect_ep_bytes : i == 6 ? g->moe.connect_edp_bytes : g->use_bytes[i];
        char parts[320] = "";
        size_t at = 0, split = 0, used = 0;
        for (int i = 0; i < 7; i++) {
            split += g->split_bytes[i];
            used += use[i];
            if ((g->split_bytes[i] || use[i]) && at < sizeof parts)
                at += (size_t)snprintf(parts + at, sizeof parts - at, "%s%s %.0f + %.0f", at ? ", " : "", names[i],
                                       g->split_bytes[i] / 1048576.0, use[i] / 1048576.0);
        }
        printf("NCCL (rank 0): the world's communicator %.0f MiB at its creation + %.0f at its first use; the groups' "
               "splits %.3f GiB + their first use %.3f GiB (%s MiB)\n", g->ctx->comm_init_bytes / 1048576.0,
               g->world_use_bytes / 1048576.0, split / 1073741824.0, used / 1073741824.0, at ? parts : "none");
    }
}

/* One table per stage, from its first rank, stage after stage: each op against the planner. */
static void print_stage_tables(train_run_state *r, gpt *g)
{
    const train_options *o = r->o;
    const int rank = r->rank;
    const shapes *s = &g->s;
    /* one table per stage, from its first rank, stage after stage */
    for (int stage = 0; stage < o->l.pp; stage++) {
        if (s->pp_rank == stage && s->tp_rank == 0 && s->dp_rank == 0 && s->cp_rank == 0) {
            printf("\nstage %d (rank %d), profiling step: %.2f ms with %d event pairs (%+.1f%% on the timed median: what the "
                   "events cost)\n", stage, rank, r->profiled_ms, profile_count, 100.0 * (r->profiled_ms * 1e-3 / r->median - 1.0));
            printf("%-28s %-5s %12s %12s %8s\n", "op", "pass", "predicted ms", "measured ms", "error");
            for (int i = 0; i < r->nrows; i++) {
                const report_row *row = &r->rows[i];
                if (row->predicted_s < 0)
                    printf("%-28s %-5s %12s %12.4f   (not in the op list)\n", row->op, row->pass, "", row->measured_s * 1e3);
                else
                    printf("%-28s %-5s %12.4f %12.4f %+7.1f%%%s\n", row->op, row->pass, row->predicted_s * 1e3, row->measured_s * 1e3,
                           row->measured_s > 0 ? 100.0 * (row->predicted_s / row->measured_s - 1.0) : 0.0,
                           row->measured_s > 0 ? "" : "   (not executed)");
            }
            if (clock_probe_ops) {
                printf("\nSM clock (SEXTANT_CLOCK_PROBE=%s): at the end of the timed steps median %.0f MHz; right after "
                       "each op of the profiling step:\n%-28s %-5s %6s %10s\n", clock_probe_ops, r->step_clock_median, "op",
                       "pass", "probes", "mean MHz");
                for (int k = 0; k < r->nms; k++)
                    if (r->clock_n[k])
                        printf("%-28s %-5s %6d %10.0f\n", r->ms_ops[k].name, pass_name(r->ms_ops[k].pass), r->clock_n[k],
                               r->clock_sum[k] / r->clock_n[k]);
            }
            if (r->nreplayed) {
                printf("\nReplayed (SEXTANT_REPLAY=%d): each GEMM and attention ran %d more times back to back on the step's own "
                       "operands, in a step of its own; ms per step as in the table above\n%-28s %-5s %12s %12s %12s %10s "
                       "%10s\n", replay_runs, replay_runs, "op", "pass", "predicted ms", "in step ms", "replayed ms",
                       "pred/repl", "step/repl");
                for (int k = 0; k < r->nreplayed; k++) {
                    const report_row *row = NULL;
                    for (int i = 0; i < r->nrows && !row; i++)
                        if (!strcmp(r->rows[i].op, r->replayed[k].name) && !strcmp(r->rows[i].pass, pass_name(r->replayed[k].pass)))
                            row = &r->rows[i];
                    double pred = row && row->predicted_s >= 0 ? row->predicted_s : 0.0;
                    double in_step = row ? row->measured_s : 0.0, rep = r->replayed[k].seconds;
                    printf("%-28s %-5s %12.4f %12.4f %12.4f %+9.1f%% %+9.1f%%\n", r->replayed[k].name,
                           pass_name(r->replayed[k].pass), pred * 1e3, in_step * 1e3, rep * 1e3,
                           pred > 0 && rep > 0 ? 100.0 * (pred / rep - 1.0) : 0.0,
                           in_step > 0 && rep > 0 ? 100.0 * (in_step / rep - 1.0) : 0.0);
                }
            }
            fflush(stdout);
        }
        barrier(g);
    }
}

/* --csv: every rank's rows, rank after rank, into one file renamed when complete. */
static void write_csv_ranks(train_run_state *r, gpt *g)
{
    const train_options *o = r->o;
    const int nranks = r->nranks;
    const int rank = r->rank;
    /* the CSV: every rank's rows, rank after rank, into one file renamed when complete */
    r->write_failed = 0;
    if (o->csv) {
        /* the temporary file is named by rank 0's pid, which every rank learns from the sum */
        long tag = (long)world_sum(g, rank == 0 ? (double)getpid() : 0.0);
        outfile out = {0};
        char csv_err[PATH_MAX + 256];
        for (int rk = 0; rk < nranks; rk++) {
            if (rk == rank) {
                if (outfile_open_shared(&out, o->csv, tag, rk == 0, csv_err, sizeof csv_err) != 0) {
                    fprintf(stderr, "sextant-gpu train: rank %d: --csv: %s\n", rank, csv_err);
                    r->write_failed = 1;
                } else {
                    if (rk == 0) fputs(csv_header, out.f);
                    csv_rows(out.f, &r->info, r->rows, r->nrows, o->calibrated);
                    if (r->nrows_uncal) csv_rows(out.f, &r->info, r->rows_uncal, r->nrows_uncal, 0);
                    /* rank 0 keeps its file open to commit or remove it once every rank has written */
                    if (rk == 0) r->write_failed |= fflush(out.f) != 0;
                    else r->write_failed |= outfile_close(&out) != 0;
                }
            }
            barrier(g);
        }
        r->write_failed = world_sum(g, r->write_failed) > 0;
        if (rank == 0 && out.f) {
            if (r->write_failed) outfile_abort(&out);
            else if (outfile_commit(&out, csv_err, sizeof csv_err) != 0) {
                fprintf(stderr, "sextant-gpu train: --csv: %s\n", csv_err);
                r->write_failed = 1;
            }
        }
        if (rank == 0 && r->write_failed) fprintf(stderr, "sextant-gpu train: --csv %s: write failed, nothing written\n", o->csv);
    }
}

int train_run(const model_t *model, const hw_gpu *gpu, const hw_node *node, const train_options *o, launch_ctx *ctx)
{
    if (train_check(model, o) != 0) return 2;
    int nranks = ctx ? ctx->nranks : 1, rank = ctx ? ctx->rank : 0;
    my_rank = rank;
    const int cp = o->l.cp > 1 ? o->l.cp : 1;
    if (nranks != o->l.tp * o->l.pp * o->l.dp * cp) {
        fprintf(stderr, "sextant-gpu train: --tp %lld x --pp %lld x --dp %lld x --cp %d = %lld GPUs, but %d rank%s started\n",
                (long long)o->l.tp, (long long)o->l.pp, (long long)o->l.dp, cp, (long long)(o->l.tp * o->l.pp * o->l.dp * cp), nranks,
                nranks == 1 ? " was" : "s were");
        return 2;
    }
    /* what runs: no dropout (as llm.c), and the planner is told so */
    model_t run = *model;
    run.dropout = 0;
    const model_t *m = &run;
    static gpt g;
    memset(&g, 0, sizeof g);
    g.ctx = ctx;
    static train_run_state state;
    memset(&state, 0, sizeof state);
    train_run_state *r = &state;
    r->o = o; r->m = m; r->gpu = gpu; r->node = node; r->ctx = ctx;
    r->nranks = nranks; r->rank = rank; r->cp = cp;
    rank_shapes(&g, m, o, rank, cp);
    int rc = plan_schedule(&g, o, rank);
    if (rc != 0) return rc;
    r->N = g.s.N;
    const shapes *s = &g.s;
    const int N = r->N;
    if ((rc = predict_run(r, &g)) != 0) return rc;
    r->blas_workspace = open_gpu_context(&g, nranks);
    if (ctx) split_communicators(&g, o, ctx, cp);
    allocate_step(r, &g);
    /* the host's own bound: each wait on the GPU has --timeout, a host stuck inside NCCL has this */
    r->watchdog_s = ctx ? (int)(2.0 * ctx->timeout_s) + 1 : 0;
    if (r->watchdog_s > 0) launch_watchdog(rank, r->watchdog_s, "the communicators' first use");
    if (s->moe) {
        /* with TP (and SP, which train_check requires) the layer sees the rank's sequence share, and each rank holds
         * a 1/tp slice of every expert's width (Megatron's expert TP = TP) */
        /* with CP the gradients' group is DP x CP (dp_comm) and EP is carved from it; N is the rank's sequence share */
        const int dpcp = s->dp_rank * cp + s->cp_rank;
        int *layers = malloc((size_t)(s->L > 0 ? s->L : 1) * sizeof *layers);
        if (!layers) { fprintf(stderr, "sextant-gpu train: out of host memory\n"); exit(1); }
        for (int l = 0; l < s->L; l++) layers[l] = model_layer_of(s, l);
        moe_config mc = {.E = s->E, .k = s->topk, .C = s->C, .F = s->F, .N = s->tp > 1 ? s->Nl : N, .L = s->L,
                         .Lmodel = s->Lmodel, .layer0 = s->layer0, .ep = s->ep, .ep_rank = dpcp % s->ep,
                         .dp = o->l.dp * cp, .tp = s->tp, .tp_rank = s->tp_rank, .Fm = s->Fm, .cp = cp, .my_rank = rank,
                         .dloss = 1.0 / ((double)N * g.microbatches * o->l.dp * cp), .blas = gpu_ctx.blas,
                         .stream = gpu_ctx.stream, .ep_comm = g.ep_comm, .dp_comm = g.dp_comm, .edp_comm = g.edp_comm,
                         .tp_comm = g.tp_comm, .cp_comm = g.cp_comm,
                         .hooks = {profile_mark, profile_mark_on, initial_value, sx_ref_f2bf, P_COUNT},
                         /* ZeRO shards where the dense layers' does: a data-parallel group of more than one rank */
                         .dp_rank = dpcp, .zero = o->l.dp > 1 ? o->l.zero : 0, .model_layer = layers,
                         .schedule = g.schedule, .nschedule = g.nschedule, .Lc = s->Lc, .vpp = s->vpp,
                         .zero_mark = zero_mark, .comm = gpu_ctx.comm_stream};
        moe_init(&g.moe, &mc);
        g.moe.c.model_layer = NULL;
        free(layers);
        g.accounted_bytes += g.moe.bytes;
        r->state_bytes += g.moe.bytes;
    }
    comm_warmup(&g);
    if (r->watchdog_s > 0) launch_watchdog(rank, 0, NULL);
    if (o->check_gradients) {
        rc = check_gradients(&g, o, m);
        gpt_free(&g, r->nptrs, r->blas_workspace);
        return rc;
    }
    diagnostics_begin(o);
    if (run_timed_steps(r, &g) != 0) return 1;
    run_profiling_step(r, &g);
    read_clock_probes(r);
    run_replay_step(r, &g);
    measure_run(r, &g);
    if (rank == 0) print_summary(r, &g);
    print_stage_tables(r, &g);
    write_csv_ranks(r, &g);
    if (rank == 0) {
        report_row *step = &r->rows[r->nrows - 1];
        step->measured_s = r->slowest;
        step->measured_bytes = r->peak;
        if (o->json) r->write_failed |= write_json(o->json, &r->info, r->rows, r->nrows, r->all, nranks);
        if (o->plot) r->write_failed |= write_plot(o->plot, &r->info, r->rows, r->nrows);
        if (bias_fallbacks) printf("note: %d bias GEMMs ran outside the epilogue (cuBLASLt offered no algorithm)\n", bias_fallbacks);
    }
    free(r->rows);
    free(r->rows_uncal);
    free(r->all);
    int ok = !loss_trend_fails(&r->trend);

    /* free what this rank allocated */
    for (int i = 0; i < profile_events_made; i++) CK(cudaEventDestroy(profile_events[i]));
    free(profile_events);
    free(profile_tags);
    free(r->global_in); free(r->global_tg); free(r->host_loss); free(r->step_s); free(r->issue_s); free(r->step_losses);
    CK(cudaEventDestroy(r->t0));
    CK(cudaEventDestroy(r->t1));
    gpt_free(&g, r->nptrs, r->blas_workspace);
    if (r->write_failed) return 2;
    return ok ? 0 : 1;
}
