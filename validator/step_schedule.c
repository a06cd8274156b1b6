/* The training step (validator/train.c, step.h): one step: the pipeline schedule's actions in order
 * (1F1B, or interleaved with the transfers on their own stream), the optimizer, the batch each step
 * loads and its loss. */
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "step.h"

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

void run_schedule(gpt *g)
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
void run_schedule_async(gpt *g)
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
    if (g->zero) zero_grads_flush(&g->zs);   /* ZeRO-3's last reduce-scatters, held back behind gathers */
    if (s->moe) moe_grads_flush(&g->moe);
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

/* This rank's micro-batches of one step: the global batch is one token
 * stream cut into gbs sequences; micro-batch i of data-parallel rank r holds
 * sequences (i dp + r) mbs onwards, so every layout trains on the same data. */
void load_batch(gpt *g, const train_options *o, unsigned long long *state, int32_t *global_in, int32_t *global_tg)
{
    const shapes *s = &g->s;
    size_t N = (size_t)s->N, gn = (size_t)o->l.gbs * o->l.seq, mN = (size_t)g->microbatches * N;
    make_batch(global_in, global_tg, gn, s->V, state);
    int32_t *in = g->host_ids, *tg = in + mN, *in_shift = tg + mN, *tg_shift = in_shift + mN;
    for (int i = 0; i < g->microbatches; i++) {
        size_t from = ((size_t)i * s->dp + s->dp_rank) * (size_t)s->B * o->l.seq;
        if (s->cp > 1) {   /* the rank's two chunks of each sequence (cp_ring.h) */
            cp_local_tokens(in + (size_t)i * N, global_in + from, s->B, o->l.seq, s->cp, s->cp_rank);
            cp_local_tokens(tg + (size_t)i * N, global_tg + from, s->B, o->l.seq, s->cp, s->cp_rank);
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

void one_step(gpt *g, int step)
{
    current_pass = PASS_STEP;
    if (train_fp8) fp8_step_begin();   /* the last step's optimizer changed the weights: recast them */
    OP("zero_grads", CK(cudaMemsetAsync(g->grads, 0, (g->zero ? g->pl.shard_count : g->pl.count) * sizeof(bf16), gpu_ctx.stream)));
    if (g->s.moe) moe_zero_grads(&g->moe);
    if (g->zero) zero_step_begin(&g->zs, g->optimizer_done);
    if (g->s.moe) moe_step_begin(&g->moe, g->optimizer_done);
    if (g->s.vpp > 1) run_schedule_async(g);
    else run_schedule(g);
    optimizer_step(g, step);
}

/* The mean loss of the step's global batch: the last stage's first tensor-parallel
 * ranks hold it, every rank learns it. */
double step_loss(gpt *g, const train_options *o, float *host_loss)
{
    double sum = 0.0;
    size_t n = (size_t)g->microbatches * g->s.N;
    if (g->s.last && g->s.tp_rank == 0) {
        CK(cudaMemcpyAsync(host_loss, g->scr.losses, n * sizeof *host_loss, cudaMemcpyDeviceToHost, gpu_ctx.stream));
        sync_compute(g, "the loss");
        for (size_t i = 0; i < n; i++) sum += host_loss[i];
    }
    return world_sum(g, sum) / ((double)o->l.gbs * o->l.seq);
}
