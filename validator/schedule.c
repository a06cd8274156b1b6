/* The 1F1B pipeline schedules as lists of actions (schedule.h). */
#include <stdlib.h>
#include <string.h>

#include "schedule.h"

int pipeline_slots(int pp, int stage, int microbatches)
{
    int slots = pp - stage;
    return slots < microbatches ? slots : microbatches;
}

/* 1F1B: 4 actions per micro-batch in the steady state, 3 in warm-up and
 * cool-down (at most pp - 1 each), one receive.  Interleaved: each of the
 * 2 m vpp computations, and at most one group per step in which this stage
 * or a neighbour computed something that crosses to it (2 m vpp from each
 * neighbour at most, counted once per step). */
int pipeline_max_actions(int pp, int microbatches, int vpp)
{
    if (vpp <= 1) return 4 * microbatches + 2 * pp + 1;
    return 6 * microbatches * vpp + 1;
}

typedef struct {
    pipe_action *out;
    int n, max;
} action_list;

static void add(action_list *l, pipe_action a)
{
    if (l->n < l->max) l->out[l->n] = a;
    l->n++;
}

static pipe_action none(pipe_kind kind)
{
    pipe_action a = {.kind = kind, .microbatch = -1, .chunk = 0, .slot = -1, .input = -1, .head = -1, .grad_buf = -1,
                     .act_send_mb = -1, .act_send_chunk = 0, .act_send_slot = -1,
                     .act_recv_mb = -1, .act_recv_chunk = 0, .act_recv_slot = -1,
                     .grad_send_mb = -1, .grad_send_chunk = 0,
                     .grad_recv_mb = -1, .grad_recv_chunk = 0, .grad_recv_buf = -1};
    return a;
}

static pipe_action compute(pipe_kind kind, int mb, int slot)
{
    pipe_action a = none(kind);
    a.microbatch = mb;
    a.slot = a.input = slot;
    return a;
}

/* One group of transfers; -1 leaves a part out.  Nothing is added when the group is empty. */
static void exchange(action_list *l, int act_send_mb, int act_send_slot, int act_recv_mb, int act_recv_slot,
                     int grad_send_mb, int grad_recv_mb)
{
    if (act_send_mb < 0 && act_recv_mb < 0 && grad_send_mb < 0 && grad_recv_mb < 0) return;
    pipe_action a = none(PIPE_EXCHANGE);
    a.act_send_mb = act_send_mb;
    a.act_send_slot = act_send_slot;
    a.act_recv_mb = act_recv_mb;
    a.act_recv_slot = act_recv_slot;
    a.grad_send_mb = grad_send_mb;
    a.grad_recv_mb = grad_recv_mb;
    add(l, a);
}

int pipeline_1f1b(int pp, int stage, int microbatches, pipe_action *out, int max)
{
    if (pp < 1 || stage < 0 || stage >= pp || microbatches < 1 || max < 0) return -1;
    action_list l = {out, 0, max};
    int m = microbatches, first = stage == 0, last = stage == pp - 1;
    int ns = pipeline_slots(pp, stage, m);
    int warm = pp - stage - 1;
    if (warm > m) warm = m;
    int rest = m - warm, fwd = 0, bwd = 0;
    /* warm-up: forwards only, each input received and each output sent on its own */
    for (int i = 0; i < warm; i++, fwd++) {
        if (!first) exchange(&l, -1, -1, fwd, fwd % ns, -1, -1);
        add(&l, compute(PIPE_FORWARD, fwd, fwd % ns));
        if (!last) exchange(&l, fwd, fwd % ns, -1, -1, -1, -1);
    }
    if (rest > 0 && !first) exchange(&l, -1, -1, fwd, fwd % ns, -1, -1);
    /* steady state: a forward, its output sent as the oldest micro-batch's gradient arrives, that backward,
     * its gradient sent as the next input arrives */
    for (int i = 0; i < rest; i++) {
        add(&l, compute(PIPE_FORWARD, fwd, fwd % ns));
        if (!last) exchange(&l, fwd, fwd % ns, -1, -1, -1, bwd);
        fwd++;
        add(&l, compute(PIPE_BACKWARD, bwd, bwd % ns));
        if (!first) {
            if (i == rest - 1) exchange(&l, -1, -1, -1, -1, bwd, -1);
            else exchange(&l, -1, -1, fwd, fwd % ns, bwd, -1);
        }
        bwd++;
    }
    /* cool-down: the remaining backwards */
    for (int i = 0; i < warm; i++, bwd++) {
        if (!last) exchange(&l, -1, -1, -1, -1, -1, bwd);
        add(&l, compute(PIPE_BACKWARD, bwd, bwd % ns));
        if (!first) exchange(&l, -1, -1, -1, -1, bwd, -1);
    }
    return l.n <= max ? l.n : -1;
}

/* ---- interleaved ------------------------------------------------------------- */

typedef struct {
    pipe_kind kind;
    int chunk, mb;
} work;

/* Megatron's order: virtual micro-batch k of the forwards is chunk (k mod pp vpp) / pp
 * of micro-batch (k / (pp vpp)) pp + k mod pp; the backwards run the chunks in reverse. */
static work virtual_work(pipe_kind kind, int k, int pp, int vpp)
{
    int group = k / (pp * vpp), in = k % (pp * vpp);
    int chunk = in / pp;
    work w = {kind, kind == PIPE_FORWARD ? chunk : vpp - 1 - chunk, group * pp + in % pp};
    return w;
}

static void stage_order(int pp, int stage, int m, int vpp, work *order)
{
    int total = m * vpp, n = 0;
    int warm = m == pp ? total : 2 * (pp - stage - 1) + (vpp - 1) * pp;
    if (warm > total) warm = total;
    for (int k = 0; k < warm; k++) order[n++] = virtual_work(PIPE_FORWARD, k, pp, vpp);
    for (int i = 0; i < total - warm; i++) {
        order[n++] = virtual_work(PIPE_FORWARD, warm + i, pp, vpp);
        order[n++] = virtual_work(PIPE_BACKWARD, i, pp, vpp);
    }
    for (int k = total - warm; k < total; k++) order[n++] = virtual_work(PIPE_BACKWARD, k, pp, vpp);
}

/* lowest free index of a pool of in-use flags; grows *size */
static int take(int *used, int cap, int *size)
{
    for (int i = 0; i < cap; i++)
        if (!used[i]) {
            used[i] = 1;
            if (i + 1 > *size) *size = i + 1;
            return i;
        }
    return -1;
}

int pipeline_interleaved(int pp, int stage, int m, int vpp, pipe_action *out, int max, pipe_buffers *need)
{
    if (pp < 2 || vpp < 2 || vpp > PIPE_MAX_CHUNKS || m < 1 || m % pp || stage < 0 || stage >= pp || max < 0) return -1;
    int total = m * vpp, per_stage = 2 * total, V = pp * vpp, rc = -1;
    work *order = malloc(sizeof *order * (size_t)pp * per_stage);
    int *when = malloc(sizeof *when * (size_t)pp * per_stage);            /* step of each stage's i-th computation */
    int *fwd_at = malloc(sizeof *fwd_at * (size_t)V * m);                 /* step of virtual stage v's forward of mb */
    int *bwd_at = malloc(sizeof *bwd_at * (size_t)V * m);
    int *done = calloc((size_t)pp, sizeof *done);
    int steps = pp * per_stage + 1;
    int *at_step = malloc(sizeof *at_step * (size_t)pp * steps);          /* stage x step -> computation, -1 */
    int *slot_of = malloc(sizeof *slot_of * (size_t)V * m), *buf_of = malloc(sizeof *buf_of * (size_t)V * m);
    int *input_of = malloc(sizeof *input_of * (size_t)V * m);
    int *slot_used = calloc((size_t)vpp * m, sizeof *slot_used), *buf_used = calloc((size_t)total, sizeof *buf_used);
    int *input_used = calloc((size_t)total, sizeof *input_used), *head_used = calloc((size_t)m, sizeof *head_used);
    int *head_of = malloc(sizeof *head_of * (size_t)m);
    if (!order || !when || !fwd_at || !bwd_at || !done || !at_step || !slot_of || !buf_of || !input_of || !slot_used ||
        !buf_used || !input_used || !head_used || !head_of)
        goto out;
    for (int s = 0; s < pp; s++) stage_order(pp, s, m, vpp, order + (size_t)s * per_stage);
    for (int i = 0; i < V * m; i++) fwd_at[i] = bwd_at[i] = slot_of[i] = buf_of[i] = input_of[i] = -1;
    for (int i = 0; i < pp * steps; i++) at_step[i] = -1;
    /* every stage at once, each computation one step after the later of its predecessor on
     * the stage and the neighbour's computation it takes its input from */
    for (int progress = 1; progress;) {
        progress = 0;
        for (int s = 0; s < pp; s++)
            while (done[s] < per_stage) {
                const work *w = &order[(size_t)s * per_stage + done[s]];
                int v = w->chunk * pp + s, dep = -1;
                if (w->kind == PIPE_FORWARD && v > 0) {
                    dep = fwd_at[(v - 1) * m + w->mb];
                    if (dep < 0) break;
                } else if (w->kind == PIPE_BACKWARD && v < V - 1) {
                    dep = bwd_at[(v + 1) * m + w->mb];
                    if (dep < 0) break;
                }
                int prev = done[s] > 0 ? when[(size_t)s * per_stage + done[s] - 1] : -1;
                int t = (prev > dep ? prev : dep) + 1;
                if (t >= steps) goto out;
                when[(size_t)s * per_stage + done[s]] = t;
                at_step[(size_t)s * steps + t] = done[s];
                (w->kind == PIPE_FORWARD ? fwd_at : bwd_at)[v * m + w->mb] = t;
                done[s]++;
                progress = 1;
            }
    }
    for (int s = 0; s < pp; s++)
        if (done[s] < per_stage) goto out;   /* the order cannot run: not for any pp, m, vpp allowed */

    action_list l = {out, 0, max};
    pipe_buffers got;
    memset(&got, 0, sizeof got);
    int next = (stage + 1) % pp, prev = (stage + pp - 1) % pp;
    for (int t = 0; t < steps; t++) {
        pipe_action x = none(PIPE_EXCHANGE);
        int any = 0, i = at_step[(size_t)stage * steps + t];
        if (i >= 0) {
            const work *w = &order[(size_t)stage * per_stage + i];
            int v = w->chunk * pp + stage, key = v * m + w->mb;
            pipe_action a = compute(w->kind, w->mb, -1);
            a.chunk = w->chunk;
            if (w->kind == PIPE_FORWARD) {
                /* the first virtual stage's input is the embedding's output */
                if (v == 0) input_of[key] = take(input_used, total, &got.inputs);
                slot_of[key] = take(slot_used, total, &got.slots);
                if (v == V - 1) head_of[w->mb] = take(head_used, m, &got.heads);
                a.slot = slot_of[key];
                a.input = input_of[key];
                a.head = v == V - 1 ? head_of[w->mb] : -1;
                if (v < V - 1) { x.act_send_mb = w->mb; x.act_send_chunk = w->chunk; x.act_send_slot = a.slot; any = 1; }
            } else {
                a.slot = slot_of[key];
                a.input = input_of[key];
                a.grad_buf = buf_of[key];
                a.head = v == V - 1 ? head_of[w->mb] : -1;
                if (a.slot < 0 || a.input < 0) goto out;
                slot_used[a.slot] = 0;                                 /* free once the backward has run */
                input_used[a.input] = 0;
                if (a.head >= 0) head_used[a.head] = 0;
                if (a.grad_buf >= 0) buf_used[a.grad_buf] = 0;
                if (v > 0) { x.grad_send_mb = w->mb; x.grad_send_chunk = w->chunk; any = 1; }
            }
            if (a.slot < 0 || a.input < 0) goto out;
            add(&l, a);
        }
        /* what the neighbours computed in this step and send here */
        int j = at_step[(size_t)prev * steps + t];
        if (j >= 0) {
            const work *w = &order[(size_t)prev * per_stage + j];
            int v = w->chunk * pp + prev;
            if (w->kind == PIPE_FORWARD && v < V - 1) {
                int c = (v + 1) / pp, key = (v + 1) * m + w->mb;
                input_of[key] = take(input_used, total, &got.inputs);
                x.act_recv_mb = w->mb; x.act_recv_chunk = c; x.act_recv_slot = input_of[key];
                any = 1;
            }
        }
        j = at_step[(size_t)next * steps + t];
        if (j >= 0) {
            const work *w = &order[(size_t)next * per_stage + j];
            int v = w->chunk * pp + next;
            if (w->kind == PIPE_BACKWARD && v > 0) {
                int key = (v - 1) * m + w->mb;
                buf_of[key] = take(buf_used, total, &got.grad_buffers);
                x.grad_recv_mb = w->mb; x.grad_recv_chunk = (v - 1) / pp; x.grad_recv_buf = buf_of[key];
                any = 1;
            }
        }
        if (any) add(&l, x);
    }
    if (need) *need = got;
    rc = l.n <= max ? l.n : -1;
out:
    free(order); free(when); free(fwd_at); free(bwd_at); free(done); free(at_step);
    free(slot_of); free(buf_of); free(input_of); free(slot_used); free(buf_used); free(input_used); free(head_used);
    free(head_of);
    return rc;
}

int pipeline_schedule(int pp, int stage, int microbatches, int vpp, pipe_action *out, int max, pipe_buffers *need)
{
    if (vpp > 1) return pipeline_interleaved(pp, stage, microbatches, vpp, out, max, need);
    if (need) {
        memset(need, 0, sizeof *need);
        if (pp >= 1 && stage >= 0 && stage < pp && microbatches >= 1) need->slots = pipeline_slots(pp, stage, microbatches);
    }
    return pipeline_1f1b(pp, stage, microbatches, out, max);
}

/* ---- running a list with the transfers beside the computation ---------------- */

#define PIPE_POOL 256

int pipeline_async_waits(const pipe_action *actions, int n, int grad_buffers, pipe_wait *waits)
{
    if (n < 0 || grad_buffers < 0 || grad_buffers >= PIPE_POOL) return -2;
    /* the exchange (index) that last received into or sent from each buffer, -1: none pending */
    int slot_sent[PIPE_POOL], input_in[PIPE_POOL], buf_in[PIPE_POOL], phys_sent[PIPE_POOL + 1];
    int buf_phys[PIPE_POOL], dres_phys = 0;
    for (int k = 0; k < PIPE_POOL; k++) {
        slot_sent[k] = input_in[k] = buf_in[k] = phys_sent[k] = -1;
        buf_phys[k] = k + 1;
    }
    phys_sent[PIPE_POOL] = -1;
    int last_compute = -1, last_group = -1;
    for (int i = 0; i < n; i++) {
        const pipe_action *a = &actions[i];
        pipe_wait *w = &waits[i];
        w->compute = w->groups[0] = w->groups[1] = w->groups[2] = -1;
        if (a->kind == PIPE_EXCHANGE) {
            if ((a->act_send_mb >= 0 && (a->act_send_slot < 0 || a->act_send_slot >= PIPE_POOL)) ||
                (a->act_recv_mb >= 0 && (a->act_recv_slot < 0 || a->act_recv_slot >= PIPE_POOL)) ||
                (a->grad_recv_mb >= 0 && (a->grad_recv_buf < 0 || a->grad_recv_buf >= grad_buffers)))
                return -2;
            w->compute = last_compute;
            if (a->act_send_mb >= 0) slot_sent[a->act_send_slot] = i;
            if (a->grad_send_mb >= 0) phys_sent[dres_phys] = i;
            if (a->act_recv_mb >= 0) input_in[a->act_recv_slot] = i;
            if (a->grad_recv_mb >= 0) buf_in[a->grad_recv_buf] = i;
            last_group = i;
            continue;
        }
        if (a->slot < 0 || a->slot >= PIPE_POOL || a->input < 0 || a->input >= PIPE_POOL || a->grad_buf >= grad_buffers)
            return -2;
        int k = 0;
        if (a->kind == PIPE_FORWARD) {
            if (input_in[a->input] >= 0) { w->groups[k++] = input_in[a->input]; input_in[a->input] = -1; }
            /* (implied for these lists: the slot is free again only after its backward, whose gradient came
             * back after the output had arrived; kept so that the rule holds without that argument) */
            if (slot_sent[a->slot] >= 0) { w->groups[k++] = slot_sent[a->slot]; slot_sent[a->slot] = -1; }
        } else if (a->grad_buf >= 0) {
            if (buf_in[a->grad_buf] >= 0) { w->groups[k++] = buf_in[a->grad_buf]; buf_in[a->grad_buf] = -1; }
            int t = dres_phys;   /* the backward takes the buffer its gradient arrived in */
            dres_phys = buf_phys[a->grad_buf];
            buf_phys[a->grad_buf] = t;
        } else if (phys_sent[dres_phys] >= 0) {
            w->groups[k++] = phys_sent[dres_phys];   /* the head's backward writes the buffer afresh */
            phys_sent[dres_phys] = -1;
        }
        last_compute = i;
    }
    return last_group;
}
