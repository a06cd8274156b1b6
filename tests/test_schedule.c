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
#include <math.h>

#include "test_util.h"

#include "schedule.h"
#include "planner.h"

#define MAX_PP 8
#define MAX_M 24
#define MAX_V 4
#define MAX_ACTIONS (6 * MAX_M * MAX_V + 2 * MAX_PP + 1)

typedef struct {
    pipe_action a[MAX_ACTIONS];
    pipe_buffers need;
    int n, at;
    int slot_owner[MAX_V * MAX_M];  /* chunk * MAX_M + micro-batch living in a slot, -1 when free */
    int head_owner[MAX_M];          /* interleaved: the micro-batch whose head activations a buffer holds */
    int input_owner[MAX_V * MAX_M]; /* interleaved: chunk * MAX_M + micro-batch whose input a buffer holds, -1 */
    int buf_owner[MAX_V * MAX_M];   /* chunk * MAX_M + micro-batch whose gradient a buffer holds, -1 when free */
    int in_place;                   /* 1F1B: a gradient received straight into the backward's buffer, not yet used */
    int forward_done[MAX_V][MAX_M], backward_done[MAX_V][MAX_M], input_ready[MAX_V][MAX_M];
    int grad_ready[MAX_V][MAX_M], grad_buf[MAX_V][MAX_M], slot_of[MAX_V][MAX_M];
    int act_sent[MAX_V][MAX_M];     /* the message of a chunk's output of micro-batch i to the next stage has gone */
    int grad_sent[MAX_V][MAX_M];    /* the message of its input gradient to the previous stage has gone */
} stage_state;

/* Does stage t's group at its head hold the counterpart of one transfer? */
static int head_has(const stage_state *st, int t, int kind, int mb, int chunk)
{
    if (st[t].at >= st[t].n) return 0;
    const pipe_action *a = &st[t].a[st[t].at];
    if (a->kind != PIPE_EXCHANGE) return 0;
    switch (kind) {
    case 0: return a->act_recv_mb == mb && a->act_recv_chunk == chunk;     /* my act send: the next stage receives it */
    case 1: return a->act_send_mb == mb && a->act_send_chunk == chunk;     /* my act receive: the previous stage sends it */
    case 2: return a->grad_recv_mb == mb && a->grad_recv_chunk == chunk;   /* my grad send: the previous stage receives it */
    default: return a->grad_send_mb == mb && a->grad_send_chunk == chunk;  /* my grad receive: the next stage sends it */
    }
}

/* Plays every stage's list against the others'; returns the most activation
 * slots any stage used, in units of a whole stage's layers (slots / vpp).
 * Every stage's slots, and the last stage's heads, are what the planner's
 * memory model counts (pipeline_inflight_microbatches, _heads). */
static double play(int pp, int m, int vpp)
{
    static stage_state st[MAX_PP];
    int V = pp * vpp;
    for (int s = 0; s < pp; s++) {
        stage_state *me = &st[s];
        memset(me, 0, sizeof *me);
        int max = pipeline_max_actions(pp, m, vpp);
        assert_true(max <= MAX_ACTIONS);
        me->n = pipeline_schedule(pp, s, m, vpp, me->a, max, &me->need);
        assert_true(me->n > 0);
        for (int c = 0; c < MAX_V; c++)
            for (int i = 0; i < MAX_M; i++) me->slot_of[c][i] = me->grad_buf[c][i] = -1;
        for (int i = 0; i < MAX_V * MAX_M; i++) me->buf_owner[i] = me->input_owner[i] = me->slot_owner[i] = -1;
        for (int i = 0; i < MAX_M; i++) me->head_owner[i] = -1;
        me->in_place = -1;
        if (vpp == 1) {
            int slots = pipeline_slots(pp, s, m);
            assert_true(slots >= 1 && slots <= pp - s && slots <= m);
            assert_int_equal(me->need.slots, slots);
        }
        for (int i = 0; i < me->n; i++) {
            const pipe_action *a = &me->a[i];
            if (a->kind != PIPE_EXCHANGE) {
                assert_true(a->chunk >= 0 && a->chunk < vpp);
                assert_true(a->slot >= 0 && a->slot < me->need.slots);
                int v = a->chunk * pp + s;
                if (vpp > 1 && v == V - 1) assert_true(a->head >= 0 && a->head < me->need.heads);
                else assert_int_equal(a->head, -1);
                assert_true(a->grad_buf < me->need.grad_buffers);
                if (vpp == 1) assert_int_equal(a->input, a->slot);
                else assert_true(a->input >= 0 && a->input < me->need.inputs);
            }
            if (a->act_recv_mb >= 0)
                assert_true(a->act_recv_slot >= 0 &&
                            a->act_recv_slot < (vpp == 1 ? me->need.slots : me->need.inputs));
            if (a->act_send_mb >= 0) assert_true(a->act_send_slot >= 0 && a->act_send_slot < me->need.slots);
            if (a->grad_recv_mb >= 0) assert_true(a->grad_recv_buf < me->need.grad_buffers);
        }
    }
    for (;;) {
        int progress = 0, left = 0;
        for (int s = 0; s < pp; s++) {
            stage_state *me = &st[s];
            if (me->at >= me->n) continue;
            left++;
            int next = (s + 1) % pp, prev = (s + pp - 1) % pp;
            const pipe_action *a = &me->a[me->at];
            if (a->kind == PIPE_FORWARD) {
                int mb = a->microbatch, c = a->chunk, v = c * pp + s;
                assert_false(me->forward_done[c][mb]);
                if (v > 0 && !me->input_ready[c][mb]) continue;   /* waits: its input has not arrived */
                if (vpp == 1 && v > 0) {
                    assert_int_equal(me->slot_owner[a->slot], c * MAX_M + mb);   /* received into the slot */
                } else {
                    assert_int_equal(me->slot_owner[a->slot], -1);   /* never over a live micro-batch */
                    me->slot_owner[a->slot] = c * MAX_M + mb;
                }
                if (a->head >= 0) {
                    assert_int_equal(me->head_owner[a->head], -1);
                    me->head_owner[a->head] = mb;
                }
                if (vpp > 1) {
                    if (v > 0) assert_int_equal(me->input_owner[a->input], c * MAX_M + mb);
                    else {
                        assert_int_equal(me->input_owner[a->input], -1);
                        me->input_owner[a->input] = c * MAX_M + mb;
                    }
                }
                me->forward_done[c][mb] = 1;
                me->slot_of[c][mb] = a->slot;
            } else if (a->kind == PIPE_BACKWARD) {
                int mb = a->microbatch, c = a->chunk, v = c * pp + s;
                assert_true(me->forward_done[c][mb]);
                assert_false(me->backward_done[c][mb]);
                if (v < V - 1) {
                    if (!me->grad_ready[c][mb]) continue;
                    assert_int_equal(a->grad_buf, me->grad_buf[c][mb]);   /* reads the buffer its gradient arrived in */
                    if (a->grad_buf >= 0) {
                        assert_int_equal(me->buf_owner[a->grad_buf], c * MAX_M + mb);
                        me->buf_owner[a->grad_buf] = -1;
                    } else {
                        assert_int_equal(me->in_place, c * MAX_M + mb);   /* nothing came in over it */
                        me->in_place = -1;
                    }
                }
                assert_int_equal(a->slot, me->slot_of[c][mb]);
                assert_int_equal(me->slot_owner[a->slot], c * MAX_M + mb);
                me->backward_done[c][mb] = 1;
                me->slot_owner[a->slot] = -1;
                if (a->head >= 0) {
                    assert_int_equal(me->head_owner[a->head], mb);
                    me->head_owner[a->head] = -1;
                }
                if (vpp > 1) {
                    assert_int_equal(me->input_owner[a->input], c * MAX_M + mb);   /* its input is still there */
                    me->input_owner[a->input] = -1;
                }
            } else {
                /* every part of the group needs its counterpart at the neighbour's head (a message
                 * already gone was matched when the other side's group completed) */
                int v_send = a->act_send_chunk * pp + s, v_gsend = a->grad_send_chunk * pp + s;
                int v_recv = a->act_recv_chunk * pp + s, v_grecv = a->grad_recv_chunk * pp + s;
                int ok = 1;
                if (a->act_send_mb >= 0) {
                    assert_true(v_send < V - 1);
                    ok &= me->act_sent[a->act_send_chunk][a->act_send_mb] ||
                          head_has(st, next, 0, a->act_send_mb, (v_send + 1) / pp);
                }
                if (a->act_recv_mb >= 0) {
                    assert_true(v_recv > 0);
                    ok &= st[prev].act_sent[(v_recv - 1) / pp][a->act_recv_mb] ||
                          head_has(st, prev, 1, a->act_recv_mb, (v_recv - 1) / pp);
                }
                if (a->grad_send_mb >= 0) {
                    assert_true(v_gsend > 0);
                    ok &= me->grad_sent[a->grad_send_chunk][a->grad_send_mb] ||
                          head_has(st, prev, 2, a->grad_send_mb, (v_gsend - 1) / pp);
                }
                if (a->grad_recv_mb >= 0) {
                    assert_true(v_grecv < V - 1);
                    ok &= st[next].grad_sent[(v_grecv + 1) / pp][a->grad_recv_mb] ||
                          head_has(st, next, 3, a->grad_recv_mb, (v_grecv + 1) / pp);
                }
                if (!ok) continue;
                if (a->act_send_mb >= 0) me->act_sent[a->act_send_chunk][a->act_send_mb] = 1;
                if (a->act_recv_mb >= 0) st[prev].act_sent[(v_recv - 1) / pp][a->act_recv_mb] = 1;
                if (a->grad_send_mb >= 0) me->grad_sent[a->grad_send_chunk][a->grad_send_mb] = 1;
                if (a->grad_recv_mb >= 0) st[next].grad_sent[(v_grecv + 1) / pp][a->grad_recv_mb] = 1;
                /* the sender's data must exist */
                if (a->act_send_mb >= 0) {
                    assert_true(me->forward_done[a->act_send_chunk][a->act_send_mb]);
                    assert_int_equal(me->slot_owner[a->act_send_slot], a->act_send_chunk * MAX_M + a->act_send_mb);
                }
                if (a->grad_send_mb >= 0) assert_true(me->backward_done[a->grad_send_chunk][a->grad_send_mb]);
                if (a->act_recv_mb >= 0) {
                    int c = a->act_recv_chunk;
                    if (vpp == 1) {
                        assert_int_equal(me->slot_owner[a->act_recv_slot], -1);
                        me->slot_owner[a->act_recv_slot] = c * MAX_M + a->act_recv_mb;
                    } else {
                        assert_int_equal(me->input_owner[a->act_recv_slot], -1);
                        me->input_owner[a->act_recv_slot] = c * MAX_M + a->act_recv_mb;
                    }
                    me->input_ready[c][a->act_recv_mb] = 1;
                }
                if (a->grad_recv_mb >= 0) {
                    int c = a->grad_recv_chunk, key = c * MAX_M + a->grad_recv_mb;
                    if (a->grad_recv_buf >= 0) {
                        assert_int_equal(me->buf_owner[a->grad_recv_buf], -1);   /* never over a gradient not yet used */
                        me->buf_owner[a->grad_recv_buf] = key;
                    } else {
                        assert_int_equal(me->in_place, -1);
                        me->in_place = key;
                    }
                    me->grad_ready[c][a->grad_recv_mb] = 1;
                    me->grad_buf[c][a->grad_recv_mb] = a->grad_recv_buf;
                }
            }
            me->at++;
            progress = 1;
        }
        if (!left) break;
        if (!progress) {
            print_error("deadlock: pp %d, m %d, vpp %d\n", pp, m, vpp);
            for (int s = 0; s < pp; s++)
                if (st[s].at < st[s].n) print_error("  stage %d waits at action %d of %d (kind %d)\n", s, st[s].at, st[s].n,
                                                    (int)st[s].a[st[s].at].kind);
            fail();
        }
    }
    double most = 0;
    for (int s = 0; s < pp; s++) {
        if ((double)st[s].need.slots / vpp > most) most = (double)st[s].need.slots / vpp;
        double planned = pipeline_inflight_microbatches(pp, m, vpp, s) * vpp;
        if (fabs(planned - st[s].need.slots) > 1e-9) {
            print_error("pp %d m %d vpp %d stage %d: the schedule holds %d chunks, the planner counts %.2f\n", pp, m, vpp, s,
                        st[s].need.slots, planned);
            fail();
        }
        if (vpp > 1 && s == pp - 1) assert_int_equal(st[s].need.heads, (int)pipeline_inflight_heads(pp, m, vpp));
        for (int c = 0; c < vpp; c++)
            for (int mb = 0; mb < m; mb++) {
                assert_true(st[s].forward_done[c][mb]);
                assert_true(st[s].backward_done[c][mb]);
            }
    }
    return most;
}

static void every_depth_and_batch(void **state)
{
    (void)state;
    for (int pp = 1; pp <= MAX_PP; pp++)
        for (int m = 1; m <= MAX_M; m++) play(pp, m, 1);
}

/* Interleaved: every pp 2-8, vpp 2-4 and m a multiple of pp up to 24.  The
 * activations held stay within what Megatron's warm-up keeps (the planner's
 * pipeline_inflight_microbatches: p + (p - 1) / v whole-stage micro-batches on
 * the first stage, m when m = p); inputs received early hold an input buffer
 * each, not a slot. */
static void interleaved_every_depth_and_batch(void **state)
{
    (void)state;
    for (int pp = 2; pp <= MAX_PP; pp++)
        for (int vpp = 2; vpp <= MAX_V; vpp++)
            for (int m = pp; m <= MAX_M; m += pp) {
                double most = play(pp, m, vpp);
                double megatron = m == pp ? m : pp + (pp - 1.0) / vpp;
                if (most > megatron + 1.0) print_error("pp %d vpp %d m %d: %.2f stages of activations\n", pp, vpp, m, most);
                assert_true(most <= megatron + 1e-9);
            }
}

/* ---- the interleaved list run with its transfers on a stream of their own ----
 * Every stage's list is played on two streams (computation, transfers) with
 * pipeline_async_waits' waits and random durations; a group of transfers ends
 * when it and every neighbour's group holding a counterpart have started, plus
 * its own duration (NCCL's send/recv).  Every buffer's accesses, in list order,
 * must not overlap in time when one of them writes: a slot (written by its
 * forward, read by the send of its output and by its backward), an input
 * buffer (written by a receive or the embedding, read by the forward and the
 * backward), and the gradient buffers followed by identity through the
 * backward's swap (written by a receive or a backward, read by a send). */

#define ASYNC_MAX (6 * MAX_M * MAX_V + 1)

typedef struct {
    double last_write_end, reads_end;   /* reads_end: the latest end of a read since the last write */
} buffer_use;

static void use(buffer_use *b, int write, double start, double end, const char *what, int stage, int action)
{
    double must = write ? (b->last_write_end > b->reads_end ? b->last_write_end : b->reads_end) : b->last_write_end;
    if (start + 1e-9 < must) {
        print_error("stage %d action %d: %s %s at %.3f before %.3f\n", stage, action, write ? "writes" : "reads", what, start,
                    must);
        fail();
    }
    if (write) {
        b->last_write_end = end;
        b->reads_end = 0;
    } else if (end > b->reads_end) {
        b->reads_end = end;
    }
}

static double uniform(unsigned long long *state, double lo, double hi)
{
    *state = *state * 6364136223846793005ULL + 1442695040888963407ULL;
    return lo + (hi - lo) * (double)(*state >> 11) / 9007199254740992.0;
}

static void play_async(int pp, int m, int vpp, unsigned long long seed)
{
    static pipe_action a[MAX_PP][ASYNC_MAX];
    static pipe_wait w[MAX_PP][ASYNC_MAX];
    static double start[MAX_PP][ASYNC_MAX], end[MAX_PP][ASYNC_MAX], dur[MAX_PP][ASYNC_MAX];
    static int peer[MAX_PP][ASYNC_MAX][4];   /* the neighbours' groups holding a counterpart, -1 */
    int n[MAX_PP], last[MAX_PP];
    pipe_buffers need[MAX_PP];
    for (int s = 0; s < pp; s++) {
        n[s] = pipeline_schedule(pp, s, m, vpp, a[s], ASYNC_MAX, &need[s]);
        assert_true(n[s] > 0);
        last[s] = pipeline_async_waits(a[s], n[s], need[s].grad_buffers, w[s]);
        assert_true(last[s] >= -1);
        for (int i = 0; i < n[s]; i++) {
            start[s][i] = end[s][i] = -1;
            pipe_kind k = a[s][i].kind;
            dur[s][i] = k == PIPE_FORWARD ? uniform(&seed, 1, 3) : k == PIPE_BACKWARD ? uniform(&seed, 2, 6)
                                                                                       : uniform(&seed, 0.05, 1);
        }
    }
    /* each transfer's counterpart group on the neighbour */
    for (int s = 0; s < pp; s++) {
        int next = (s + 1) % pp, prev = (s + pp - 1) % pp;
        for (int i = 0; i < n[s]; i++) {
            const pipe_action *x = &a[s][i];
            for (int k = 0; k < 4; k++) peer[s][i][k] = -1;
            if (x->kind != PIPE_EXCHANGE) continue;
            for (int j = 0; j < n[next]; j++) {
                const pipe_action *y = &a[next][j];
                if (y->kind != PIPE_EXCHANGE) continue;
                if (x->act_send_mb >= 0 && y->act_recv_mb == x->act_send_mb && y->act_recv_chunk == (x->act_send_chunk * pp + s + 1) / pp)
                    peer[s][i][0] = j;
                if (x->grad_recv_mb >= 0 && y->grad_send_mb == x->grad_recv_mb && y->grad_send_chunk == (x->grad_recv_chunk * pp + s + 1) / pp)
                    peer[s][i][3] = j;
            }
            for (int j = 0; j < n[prev]; j++) {
                const pipe_action *y = &a[prev][j];
                if (y->kind != PIPE_EXCHANGE) continue;
                if (x->act_recv_mb >= 0 && y->act_send_mb == x->act_recv_mb && y->act_send_chunk * pp + prev + 1 == x->act_recv_chunk * pp + s)
                    peer[s][i][1] = j;
                if (x->grad_send_mb >= 0 && y->grad_recv_mb == x->grad_send_mb && y->grad_recv_chunk * pp + prev + 1 == x->grad_send_chunk * pp + s)
                    peer[s][i][2] = j;
            }
            if (x->act_send_mb >= 0) assert_true(peer[s][i][0] >= 0);
            if (x->act_recv_mb >= 0) assert_true(peer[s][i][1] >= 0);
            if (x->grad_send_mb >= 0) assert_true(peer[s][i][2] >= 0);
            if (x->grad_recv_mb >= 0) assert_true(peer[s][i][3] >= 0);
        }
    }
    /* times, by relaxation: an action starts when its stream and its waits allow; a group ends when
     * every group it pairs with has started */
    for (int progress = 1; progress;) {
        progress = 0;
        for (int s = 0; s < pp; s++) {
            int next = (s + 1) % pp, prev = (s + pp - 1) % pp;
            for (int i = 0; i < n[s]; i++) {
                if (end[s][i] >= 0) continue;
                const pipe_action *x = &a[s][i];
                int on_pp = x->kind == PIPE_EXCHANGE;
                double t = 0;
                int known = 1;
                for (int j = i - 1; j >= 0; j--)   /* the stream's previous action */
                    if ((a[s][j].kind == PIPE_EXCHANGE) == on_pp) {
                        if (end[s][j] < 0) known = 0;
                        else t = end[s][j];
                        break;
                    }
                if (on_pp && w[s][i].compute >= 0) {
                    if (end[s][w[s][i].compute] < 0) known = 0;
                    else if (end[s][w[s][i].compute] > t) t = end[s][w[s][i].compute];
                }
                for (int k = 0; !on_pp && k < 3; k++) {
                    int gi = w[s][i].groups[k];
                    if (gi < 0) continue;
                    if (end[s][gi] < 0) known = 0;
                    else if (end[s][gi] > t) t = end[s][gi];
                }
                if (!known) continue;
                if (start[s][i] < 0) { start[s][i] = t; progress = 1; }
                if (!on_pp) { end[s][i] = t + dur[s][i]; progress = 1; continue; }
                double meet = start[s][i];
                for (int k = 0; k < 4; k++) {
                    int j = peer[s][i][k];
                    if (j < 0) continue;
                    int ps = k == 0 || k == 3 ? next : prev;
                    if (start[ps][j] < 0) { known = 0; break; }
                    if (start[ps][j] > meet) meet = start[ps][j];
                }
                if (!known) continue;
                end[s][i] = meet + dur[s][i];
                progress = 1;
            }
        }
    }
    for (int s = 0; s < pp; s++)
        for (int i = 0; i < n[s]; i++)
            if (end[s][i] < 0) {
                print_error("deadlock: pp %d m %d vpp %d: stage %d action %d never ends\n", pp, m, vpp, s, i);
                fail();
            }
    /* the hazards, stage by stage in list order */
    for (int s = 0; s < pp; s++) {
        static buffer_use slot[MAX_V * MAX_M], input[MAX_V * MAX_M], phys[MAX_V * MAX_M + 1];
        memset(slot, 0, sizeof slot);
        memset(input, 0, sizeof input);
        memset(phys, 0, sizeof phys);
        int buf_phys[MAX_V * MAX_M], dres = 0;
        for (int b = 0; b < MAX_V * MAX_M; b++) buf_phys[b] = b + 1;
        for (int i = 0; i < n[s]; i++) {
            const pipe_action *x = &a[s][i];
            double t0 = start[s][i], t1 = end[s][i];
            if (x->kind == PIPE_FORWARD) {
                int v = x->chunk * pp + s;
                use(&input[x->input], v == 0, t0, t1, "its input", s, i);   /* the first virtual stage embeds */
                use(&slot[x->slot], 1, t0, t1, "its slot", s, i);
            } else if (x->kind == PIPE_BACKWARD) {
                use(&slot[x->slot], 0, t0, t1, "its slot", s, i);
                use(&input[x->input], 0, t0, t1, "its input", s, i);
                if (x->grad_buf >= 0) {
                    int t = dres;
                    dres = buf_phys[x->grad_buf];
                    buf_phys[x->grad_buf] = t;
                }
                use(&phys[dres], 1, t0, t1, "its gradient buffer", s, i);
            } else {
                if (x->act_send_mb >= 0) use(&slot[x->act_send_slot], 0, t0, t1, "the slot it sends", s, i);
                if (x->act_recv_mb >= 0) use(&input[x->act_recv_slot], 1, t0, t1, "the input it receives", s, i);
                if (x->grad_send_mb >= 0) use(&phys[dres], 0, t0, t1, "the gradient it sends", s, i);
                if (x->grad_recv_mb >= 0) use(&phys[buf_phys[x->grad_recv_buf]], 1, t0, t1, "the gradient it receives", s, i);
            }
        }
        /* the step's end waits for the last group */
        if (last[s] >= 0) assert_int_equal(a[s][last[s]].kind, PIPE_EXCHANGE);
    }
}

static void interleaved_on_two_streams(void **state)
{
    (void)state;
    unsigned long long seed = 12345;
    for (int pp = 2; pp <= 6; pp++)
        for (int vpp = 2; vpp <= MAX_V; vpp++)
            for (int m = pp; m <= MAX_M; m += pp)
                for (int trial = 0; trial < 4; trial++) play_async(pp, m, vpp, seed++);
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
    pipe_action b[64];
    assert_int_equal(pipeline_interleaved(2, 0, 3, 2, b, 64, NULL), -1);   /* m not a multiple of pp */
    assert_int_equal(pipeline_interleaved(1, 0, 4, 2, b, 64, NULL), -1);   /* interleaving needs two stages */
    assert_int_equal(pipeline_interleaved(2, 0, 4, 2, b, 4, NULL), -1);    /* the list does not fit */
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(every_depth_and_batch),
        cmocka_unit_test(interleaved_every_depth_and_batch),
        cmocka_unit_test(interleaved_on_two_streams),
        cmocka_unit_test(refuses_bad_arguments),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
