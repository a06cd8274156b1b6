/* The training step (validator/train.c, step.h): the step's communication: tensor-parallel
 * collectives, pipeline transfers, the data-parallel reduction bucket by bucket, ZeRO-2/3's hooks, the
 * host's waits, the communicators' warm-up and the sum over every rank. */
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "step.h"

void tp_allreduce(gpt *g, const char *name, bf16 *buf, size_t count)
{
    if (g->s.tp == 1) return;
    OP(name, NC(ncclAllReduce(buf, buf, count, ncclBfloat16, ncclSum, g->tp_comm, gpu_ctx.stream)));
}

void tp_allgather(gpt *g, const char *name, bf16 *full, const bf16 *local, size_t local_count)
{
    OP(name, NC(ncclAllGather(local, full, local_count, ncclBfloat16, g->tp_comm, gpu_ctx.stream)));
}

void tp_reduce_scatter(gpt *g, const char *name, bf16 *local, const bf16 *full, size_t local_count)
{
    OP(name, NC(ncclReduceScatter(full, local, local_count, ncclBfloat16, ncclSum, g->tp_comm, gpu_ctx.stream)));
}

void pp_exchange(gpt *g, const pipe_transfer *t, int next, int prev, size_t count, cudaStream_t on)
{
    profile_mark_on("pp_sendrecv", 0, on);
    NC(ncclGroupStart());
    if (t->act_send) NC(ncclSend(t->act_send, count, ncclBfloat16, next, g->pp_comm, on));
    if (t->act_recv) NC(ncclRecv(t->act_recv, count, ncclBfloat16, prev, g->pp_comm, on));
    if (t->grad_send) NC(ncclSend(t->grad_send, count, ncclBfloat16, prev, g->pp_comm, on));
    if (t->grad_recv) NC(ncclRecv(t->grad_recv, count, ncclBfloat16, next, g->pp_comm, on));
    NC(ncclGroupEnd());
    profile_mark_on("pp_sendrecv", 1, on);
}

/* Sequence parallelism: each rank's norm gradients cover its tokens only. */
void tp_allreduce_norm_grads(gpt *g, int layer, int final)
{
    if (!spg(&g->s)) return;
    bf16 *G = g->grads;
    int list[4] = {final ? P_LNFW : P_LN1W, final ? P_LNFB : P_LN1B, final ? -1 : P_LN2W, final ? -1 : P_LN2B};
    pass_t saved = current_pass;
    current_pass = PASS_STEP;   /* once per step, as the op list has it */
    profile_mark("tp_allreduce_norm_grads", 0);
    NC(ncclGroupStart());
    for (int i = 0; i < 4; i++) {
        if (list[i] < 0) continue;
        bf16 *t = param(g, G, list[i], layer);
        if (t) NC(ncclAllReduce(t, t, g->pl.size[list[i]], ncclBfloat16, ncclSum, g->tp_comm, gpu_ctx.stream));
    }
    NC(ncclGroupEnd());
    profile_mark("tp_allreduce_norm_grads", 1);
    current_pass = saved;
}

/* A bucket's gradients are complete (last micro-batch of the step): reduce
 * them on the second stream while the backward goes on. */
void bucket_ready(gpt *g, int kind)
{
    int b = bucket_index(g, kind);
    if (b < 0) return;
    int tied = g->tied_sync && (kind == B_EMBED || kind == B_HEAD);
    int reduce_ranks = g->s.dp * g->s.cp;   /* gradients are summed over DP x CP */
    if (reduce_ranks == 1 && !tied) return;
    const bucket *k = &g->pl.buckets[b];
    pass_t saved = current_pass;
    current_pass = PASS_STEP;
    CK(cudaEventRecord(g->grad_ready[b], gpu_ctx.stream));
    CK(cudaStreamWaitEvent(gpu_ctx.comm_stream, g->grad_ready[b], 0));
    g->comm_used = 1;
    if (tied) {
        int t = kind == B_EMBED ? P_WTE : P_HEAD;
        bf16 *grad = param(g, g->grads, t, 0);
        profile_mark_on("pp_allreduce_tied_embedding", 0, gpu_ctx.comm_stream);
        NC(ncclAllReduce(grad, grad, g->pl.size[t], ncclBfloat16, ncclSum, g->tied_comm, gpu_ctx.comm_stream));
        profile_mark_on("pp_allreduce_tied_embedding", 1, gpu_ctx.comm_stream);
    }
    if (reduce_ranks > 1) {
        bf16 *grad = g->grads + k->offset;
        size_t slice = k->size / (size_t)g->s.dp;
        if (g->s.dp > 1 && g->pl.shard_count != g->pl.count) {
            profile_mark_on("dp_reduce_scatter_grads", 0, gpu_ctx.comm_stream);
            NC(ncclReduceScatter(grad, grad + (size_t)g->s.dp_rank * slice, slice, ncclBfloat16, ncclSum, g->dp_comm,
                                 gpu_ctx.comm_stream));
            profile_mark_on("dp_reduce_scatter_grads", 1, gpu_ctx.comm_stream);
        } else {
            profile_mark_on("dp_allreduce_grads", 0, gpu_ctx.comm_stream);
            NC(ncclAllReduce(grad, grad, k->size, ncclBfloat16, ncclSum, g->dp_comm, gpu_ctx.comm_stream));
            profile_mark_on("dp_allreduce_grads", 1, gpu_ctx.comm_stream);
        }
    }
    current_pass = saved;
}

/* The compute stream waits for an event of another stream, timed as a step op. */
void step_wait(const char *name, cudaEvent_t event)
{
    pass_t saved = current_pass;
    current_pass = PASS_STEP;
    profile_mark(name, 0);
    CK(cudaStreamWaitEvent(gpu_ctx.stream, event, 0));
    profile_mark(name, 1);
    current_pass = saved;
}

/* ZeRO-1: before a bucket's parameters are read, the all-gather that
 * brought them after the last step's optimizer must be complete. */
void wait_params(gpt *g, int kind)
{
    if (g->zero == 3) { zero3_params(g, kind); return; }
    if (g->s.dp == 1 || g->pl.shard_count == g->pl.count) return;
    int b = bucket_index(g, kind);
    if (b < 0) return;
    step_wait("dp_allgather_wait", g->params_ready[b]);
}

/* ---- ZeRO-2/3: what the step asks of validator/zero.c ---------------------------- */

/* zero.c's profiling: a mark of `pass` on stream `on` */
void zero_mark(const char *name, int end, cudaStream_t on, pass_t pass)
{
    pass_t saved = current_pass;
    current_pass = pass;
    profile_mark_on(name, end, on);
    current_pass = saved;
}

/* ZeRO-3: the step is about to read bucket `kind`'s parameters (in a backward or its
 * recomputation when the pass is not the forward) */
void zero3_params(gpt *g, int kind)
{
    if (g->zero == 3) zero_take_params(&g->zs, bucket_index(g, kind), current_pass != PASS_FWD);
}

/* ZeRO-2/3: the backward is about to write bucket `kind`'s gradients */
void zero_grads_take(gpt *g, int kind)
{
    if (g->zero) zero_grads_begin(&g->zs, bucket_index(g, kind));
}

/* ZeRO-2/3: this micro-batch's gradients of the bucket are complete (layer >= 0: a layer's,
 * final: the final norm's, whose sequence-parallel norm gradients are summed over TP first,
 * every micro-batch here since the buffer holds one micro-batch's) */
void zero_grads_give(gpt *g, int layer, int final)
{
    if (!g->zero) return;
    if (layer >= 0 || final) tp_allreduce_norm_grads(g, layer < 0 ? 0 : layer, final);
    zero_grads_end(&g->zs);
    g->comm_used = 1;
}

/* One step on this rank: the schedule of validator/schedule.c, 1F1B or
 * interleaved (with one stage, forward and backward of each micro-batch in
 * turn); the data-parallel wait and the optimizer follow in optimizer_step. */
/* The host waits for an event; with several ranks it watches NCCL's error
 * state and gives up after the launch timeout instead of hanging on a peer
 * that died. */
void host_wait(gpt *g, cudaEvent_t ev, const char *what)
{
    if (g->ctx) {
        if (launch_event_wait(g->ctx, ev, what) != 0) exit(1);
    } else {
        CK(cudaEventSynchronize(ev));
    }
}

/* The host waits for everything enqueued so far on one stream. */
void sync_stream(gpt *g, cudaStream_t on, const char *what)
{
    cudaEvent_t ev;
    CK(cudaEventCreateWithFlags(&ev, cudaEventDisableTiming));
    CK(cudaEventRecord(ev, on));
    host_wait(g, ev, what);
    CK(cudaEventDestroy(ev));
}

/* Waits for everything enqueued so far on the compute and data-parallel
 * streams (the interleaved step joins its transfer stream into the compute
 * stream before it ends). */
void sync_all(gpt *g, const char *what)
{
    sync_stream(g, gpu_ctx.stream, what);
    sync_stream(g, gpu_ctx.comm_stream, what);
}

/* Waits for the compute stream alone (the second stream may run on). */
void sync_compute(gpt *g, const char *what)
{
    CK(cudaEventRecord(g->synced, gpu_ctx.stream));
    host_wait(g, g->synced, what);
}

double *world_scratch;   /* device: 8 doubles per rank */

size_t device_free_bytes(void)
{
    size_t free_bytes, total;
    CK(cudaMemGetInfo(&free_bytes, &total));
    return free_bytes;
}

/* The device memory taken since `before` (device_free_bytes then): a group's first use. */
static size_t taken_since(size_t before)
{
    size_t now = device_free_bytes();
    return before > now ? before - now : 0;
}

/* Every communicator once before the first step, with the operations and
 * sizes the step uses, communicator after communicator in the same order on
 * every rank and each finished before the next.  NCCL connects a
 * communicator's peers on its first use of them (NCCL_RUNTIME_CONNECT), in
 * the calling thread, which waits there for its peers to connect too; inside
 * a step, one rank's host could then wait in a collective's connection while
 * its peer's host waits in a pipeline transfer's, each for the other.  This
 * was the interleaved hang with m = pp: without the warm-up it still hangs,
 * with it it runs (docs/validation/2026-11-23-h200x2-m-eq-pp).  The buffers
 * touched are the gradients, zero until the first step, and scratch. */
void comm_warmup(gpt *g)
{
    const shapes *s = &g->s;
    if (!g->ctx || getenv("SEXTANT_TRAIN_NO_COMM_WARMUP")) return;   /* the variable: to show the hang again */
    scratch_buffers *r = &g->scr;
    size_t N = (size_t)s->N, Nl = (size_t)s->Nl, C = (size_t)s->C;
    /* the world's communicator first: the loss and the report's figures go over it (a framework's barrier) */
    size_t at = device_free_bytes();
    world_sum(g, 0.0);
    g->world_use_bytes = taken_since(at);
    if (s->tp > 1) {
        at = device_free_bytes();
        if (spg(s)) {
            NC(ncclAllGather(r->dresidual, r->dbuf_c, Nl * C, ncclBfloat16, g->tp_comm, gpu_ctx.stream));
            NC(ncclReduceScatter(r->dbuf_c, r->dresidual, Nl * C, ncclBfloat16, ncclSum, g->tp_comm, gpu_ctx.stream));
        } else {
            NC(ncclAllReduce(r->dbuf_c, r->dbuf_c, N * C, ncclBfloat16, ncclSum, g->tp_comm, gpu_ctx.stream));
        }
        if (s->last) {
            NC(ncclAllReduce(r->ce_stats + N, r->ce_stats + N, N, ncclFloat32, ncclMax, g->tp_comm, gpu_ctx.stream));
            NC(ncclAllReduce(r->ce_stats + N, r->ce_stats + N, N, ncclFloat32, ncclSum, g->tp_comm, gpu_ctx.stream));
        }
        sync_all(g, "the tensor-parallel group's first use");
        g->use_bytes[0] = taken_since(at);
    }
    at = device_free_bytes();
    if (s->dp > 1 && g->zero) {
        zero_warmup(&g->zs);
        sync_all(g, "the data-parallel group's first use");
    } else if (s->dp * s->cp > 1) {
        int sharded = g->pl.shard_count != g->pl.count;
        for (int b = 0; b < g->pl.nbuckets; b++) {
            const bucket *k = &g->pl.buckets[b];
            bf16 *grad = g->grads + k->offset;
            size_t slice = k->size / (size_t)s->dp;
            if (sharded) {
                NC(ncclReduceScatter(grad, grad + (size_t)s->dp_rank * slice, slice, ncclBfloat16, ncclSum, g->dp_comm, gpu_ctx.stream));
                NC(ncclAllGather(grad + (size_t)s->dp_rank * slice, grad, slice, ncclBfloat16, g->dp_comm, gpu_ctx.stream));
            } else {
                NC(ncclAllReduce(grad, grad, k->size, ncclBfloat16, ncclSum, g->dp_comm, gpu_ctx.stream));
            }
        }
        sync_all(g, "the data-parallel group's first use");
    }
    g->use_bytes[1] = taken_since(at);
    if (s->cp > 1) {
        at = device_free_bytes();
        cp_warmup(&g->cps);
        sync_all(g, "the context-parallel ring's first transfers");
        g->use_bytes[4] = taken_since(at);
    }
    if (g->tied_sync) {
        at = device_free_bytes();
        int t = s->first ? P_WTE : P_HEAD;
        bf16 *grad = param(g, g->grads, t, 0);
        NC(ncclAllReduce(grad, grad, g->pl.size[t], ncclBfloat16, ncclSum, g->tied_comm, gpu_ctx.stream));
        sync_all(g, "the tied embedding's first all-reduce");
        g->use_bytes[3] = taken_since(at);
    }
    if (s->pp > 1) {
        at = device_free_bytes();
        /* both directions with each neighbour the schedule talks to (interleaved: a ring) */
        int ring = s->vpp > 1;
        int next = (s->pp_rank + 1) % s->pp, prev = (s->pp_rank + s->pp - 1) % s->pp;
        int to_next = ring || !s->last, from_prev = ring || !s->first;
        for (int direction = 0; direction < 2; direction++) {
            NC(ncclGroupStart());
            if (direction == 0 ? to_next : from_prev)
                NC(ncclSend(r->dresidual, Nl * C, ncclBfloat16, direction == 0 ? next : prev, g->pp_comm, gpu_ctx.stream));
            if (direction == 0 ? from_prev : to_next)
                NC(ncclRecv(r->dbuf_c, Nl * C, ncclBfloat16, direction == 0 ? prev : next, g->pp_comm, gpu_ctx.stream));
            NC(ncclGroupEnd());
        }
        sync_all(g, "the pipeline's first transfers");
        g->use_bytes[2] = taken_since(at);
    }
}

/* The sum over every rank of x (x itself on one GPU). */
double world_sum(gpt *g, double x)
{
    if (!g->ctx) return x;
    CK(cudaMemcpyAsync(world_scratch, &x, sizeof x, cudaMemcpyHostToDevice, gpu_ctx.stream));
    NC(ncclAllReduce(world_scratch, world_scratch, 1, ncclFloat64, ncclSum, g->ctx->comm, gpu_ctx.stream));
    CK(cudaMemcpyAsync(&x, world_scratch, sizeof x, cudaMemcpyDeviceToHost, gpu_ctx.stream));
    sync_compute(g, "an all-reduce of the loss");
    return x;
}
