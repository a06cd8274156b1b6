/* The 1F1B schedule (validator/schedule.c) that the training step runs, for
 * every pipeline depth 1-8 and 1-24 micro-batches, all stages' lists played
 * against each other:
 *  - no deadlock, under a rule stricter than NCCL's: a group of transfers
 *    completes only when, for every send and receive in it, the matching
 *    receive or send is in the neighbour's group being waited on;
 *  - transfers match: micro-batch i's output goes to the next stage's input
 *    of micro-batch i, its gradient back to micro-batch i, in order;
 *  - data flows: a forward runs after its input arrived (or, on the first
 *    stage, from the tokens), a backward after its forward and its output
 *    gradient (or, on the last stage, the loss);
 *  - no activation slot is written (a forward, a received input) while a
 *    micro-batch whose backward has not run still lives in it, and each
 *    backward reads the slot its forward filled;
 *  - every stage runs each micro-batch's forward and backward exactly once,
 *    with at most min(pp - stage, m) slots. */
#include "test_util.h"

#include "schedule.h"

#define MAX_PP 8
#define MAX_M 24
#define MAX_ACTIONS (4 * MAX_M + 2 * MAX_PP + 1)

typedef struct {
    pipe_action a[MAX_ACTIONS];
    int n, at;
    int slot_owner[MAX_M];          /* the micro-batch living in a slot, -1 when free */
    int forward_done[MAX_M], backward_done[MAX_M], input_ready[MAX_M], grad_ready[MAX_M], slot_of[MAX_M];
    int act_sent[MAX_M];            /* the message of micro-batch i's output to the next stage has gone */
    int grad_sent[MAX_M];           /* the message of its input gradient to the previous stage has gone */
} stage_state;

/* Does stage t's group at its head hold the counterpart of one transfer? */
static int head_has(const stage_state *st, int t, int npp, int kind, int mb)
{
    if (t < 0 || t >= npp || st[t].at >= st[t].n) return 0;
    const pipe_action *a = &st[t].a[st[t].at];
    if (a->kind != PIPE_EXCHANGE) return 0;
    switch (kind) {
    case 0: return a->act_recv_mb == mb;     /* my act send: the next stage receives it */
    case 1: return a->act_send_mb == mb;     /* my act receive: the previous stage sends it */
    case 2: return a->grad_recv_mb == mb;    /* my grad send: the previous stage receives it */
    default: return a->grad_send_mb == mb;   /* my grad receive: the next stage sends it */
    }
}

static void play(int pp, int m)
{
    static stage_state st[MAX_PP];
    for (int s = 0; s < pp; s++) {
        memset(&st[s], 0, sizeof st[s]);
        st[s].n = pipeline_1f1b(pp, s, m, st[s].a, pipeline_max_actions(pp, m));
        assert_true(st[s].n > 0);
        assert_true(pipeline_max_actions(pp, m) <= MAX_ACTIONS);
        for (int i = 0; i < MAX_M; i++) st[s].slot_owner[i] = -1;
        for (int i = 0; i < MAX_M; i++) st[s].slot_of[i] = -1;
        int slots = pipeline_slots(pp, s, m);
        assert_true(slots >= 1 && slots <= pp - s && slots <= m);
        for (int i = 0; i < st[s].n; i++) {
            const pipe_action *a = &st[s].a[i];
            if (a->kind != PIPE_EXCHANGE) assert_true(a->slot >= 0 && a->slot < slots);
            if (a->act_recv_mb >= 0) assert_true(a->act_recv_slot >= 0 && a->act_recv_slot < slots);
            if (a->act_send_mb >= 0) assert_true(a->act_send_slot >= 0 && a->act_send_slot < slots);
        }
    }
    for (;;) {
        int progress = 0, left = 0;
        for (int s = 0; s < pp; s++) {
            stage_state *me = &st[s];
            if (me->at >= me->n) continue;
            left++;
            const pipe_action *a = &me->a[me->at];
            if (a->kind == PIPE_FORWARD) {
                int mb = a->microbatch;
                assert_false(me->forward_done[mb]);
                if (s > 0) {
                    if (!me->input_ready[mb]) continue;   /* waits: its input has not arrived */
                    assert_int_equal(me->slot_owner[a->slot], mb);
                } else {
                    assert_int_equal(me->slot_owner[a->slot], -1);   /* never over a live micro-batch */
                    me->slot_owner[a->slot] = mb;
                }
                me->forward_done[mb] = 1;
                me->slot_of[mb] = a->slot;
            } else if (a->kind == PIPE_BACKWARD) {
                int mb = a->microbatch;
                assert_true(me->forward_done[mb]);
                assert_false(me->backward_done[mb]);
                if (s < pp - 1 && !me->grad_ready[mb]) continue;
                assert_int_equal(a->slot, me->slot_of[mb]);
                assert_int_equal(me->slot_owner[a->slot], mb);
                me->backward_done[mb] = 1;
                me->slot_owner[a->slot] = -1;
            } else {
                /* every part of the group needs its counterpart at the neighbour's head */
                /* (a message already gone was matched when the other side's group completed) */
                int ok = 1;
                if (a->act_send_mb >= 0) ok &= me->act_sent[a->act_send_mb] || head_has(st, s + 1, pp, 0, a->act_send_mb);
                if (a->act_recv_mb >= 0) ok &= st[s - 1].act_sent[a->act_recv_mb] || head_has(st, s - 1, pp, 1, a->act_recv_mb);
                if (a->grad_send_mb >= 0) ok &= me->grad_sent[a->grad_send_mb] || head_has(st, s - 1, pp, 2, a->grad_send_mb);
                if (a->grad_recv_mb >= 0) ok &= st[s + 1].grad_sent[a->grad_recv_mb] || head_has(st, s + 1, pp, 3, a->grad_recv_mb);
                if (!ok) continue;
                if (a->act_send_mb >= 0) me->act_sent[a->act_send_mb] = 1;
                if (a->act_recv_mb >= 0) st[s - 1].act_sent[a->act_recv_mb] = 1;
                if (a->grad_send_mb >= 0) me->grad_sent[a->grad_send_mb] = 1;
                if (a->grad_recv_mb >= 0) st[s + 1].grad_sent[a->grad_recv_mb] = 1;
                /* the sender's data must exist */
                if (a->act_send_mb >= 0) {
                    assert_true(me->forward_done[a->act_send_mb]);
                    assert_int_equal(me->slot_owner[a->act_send_slot], a->act_send_mb);
                }
                if (a->grad_send_mb >= 0) assert_true(me->backward_done[a->grad_send_mb]);
                if (a->act_recv_mb >= 0) {
                    assert_int_equal(me->slot_owner[a->act_recv_slot], -1);
                    me->slot_owner[a->act_recv_slot] = a->act_recv_mb;
                    me->input_ready[a->act_recv_mb] = 1;
                }
                if (a->grad_recv_mb >= 0) me->grad_ready[a->grad_recv_mb] = 1;
            }
            me->at++;
            progress = 1;
        }
        if (!left) break;
        if (!progress) {
            print_error("deadlock: pp %d, m %d\n", pp, m);
            for (int s = 0; s < pp; s++)
                if (st[s].at < st[s].n) print_error("  stage %d waits at action %d of %d (kind %d)\n", s, st[s].at, st[s].n,
                                                    (int)st[s].a[st[s].at].kind);
            fail();
        }
    }
    for (int s = 0; s < pp; s++)
        for (int mb = 0; mb < m; mb++) {
            assert_true(st[s].forward_done[mb]);
            assert_true(st[s].backward_done[mb]);
        }
}

static void every_depth_and_batch(void **state)
{
    (void)state;
    for (int pp = 1; pp <= MAX_PP; pp++)
        for (int m = 1; m <= MAX_M; m++) play(pp, m);
}

static void refuses_bad_arguments(void **state)
{
    (void)state;
    pipe_action a[4];
    assert_int_equal(pipeline_1f1b(0, 0, 4, a, 4), -1);
    assert_int_equal(pipeline_1f1b(2, 2, 4, a, 4), -1);
    assert_int_equal(pipeline_1f1b(2, 0, 0, a, 4), -1);
    assert_int_equal(pipeline_1f1b(2, 0, 8, a, 4), -1);   /* the list does not fit */
    assert_int_equal(pipeline_slots(4, 0, 2), 2);
    assert_int_equal(pipeline_slots(4, 1, 8), 3);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(every_depth_and_batch),
        cmocka_unit_test(refuses_bad_arguments),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
