/* The 1F1B pipeline schedule as a list of actions (schedule.h). */
#include "schedule.h"

int pipeline_slots(int pp, int stage, int microbatches)
{
    int slots = pp - stage;
    return slots < microbatches ? slots : microbatches;
}

int pipeline_max_actions(int pp, int microbatches) { return 4 * microbatches + 2 * pp + 1; }

typedef struct {
    pipe_action *out;
    int n, max;
} action_list;

static void add(action_list *l, pipe_action a)
{
    if (l->n < l->max) l->out[l->n] = a;
    l->n++;
}

static pipe_action compute(pipe_kind kind, int mb, int slot)
{
    pipe_action a = {kind, mb, slot, -1, -1, -1, -1, -1, -1};
    return a;
}

/* One group of transfers; -1 leaves a part out.  Nothing is added when the group is empty. */
static void exchange(action_list *l, int act_send_mb, int act_send_slot, int act_recv_mb, int act_recv_slot,
                     int grad_send_mb, int grad_recv_mb)
{
    if (act_send_mb < 0 && act_recv_mb < 0 && grad_send_mb < 0 && grad_recv_mb < 0) return;
    pipe_action a = {PIPE_EXCHANGE, -1, -1, act_send_mb, act_send_slot, act_recv_mb, act_recv_slot, grad_send_mb,
                     grad_recv_mb};
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
