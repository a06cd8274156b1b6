/* ZeRO-2 and ZeRO-3's bookkeeping (validator/zero_plan.c), as the training step uses it:
 *  - every rank's slice of a bucket: disjoint, together the whole bucket, 16-byte
 *    aligned, one after another in the shard arrays;
 *  - the order of gathers, for one stage and for every stage of 1F1B and interleaved
 *    pipelines: the step's requests (forward: embedding, layers, final norm, head;
 *    backward: head, final norm, layers in reverse) are each served by the sequence in
 *    turn, a request for the bucket held gathers nothing, a request out of turn is
 *    refused, and a use's gather goes out ahead (the prefetch, one or two uses) only into a
 *    buffer no use between holds;
 *  - the buffers: two layer-sized, one for a larger bucket, against the planner's count
 *    (zero_unit_buffer_bytes). */
#include "test_util.h"

#include "planner.h"
#include "schedule.h"
#include "zero_plan.h"

#define MAX_ACTIONS 4096
#define MAX_USES 65536

/* Buckets as validator/train.c lays them out: sizes padded to 8 dp, one after another. */
static int make_buckets(const size_t *raw, int n, int dp, zero_bucket *out)
{
    size_t unit = 8 * (size_t)dp, at = 0, shard = 0;
    for (int i = 0; i < n; i++) {
        size_t padded = (raw[i] + unit - 1) / unit * unit;
        out[i] = (zero_bucket){at, padded, shard, i > 0 && i < n - 1};
        at += padded;
        shard += padded / (size_t)dp;
    }
    return n;
}

static void slices_cover_buckets(void **state)
{
    (void)state;
    const size_t raw[] = {38597376 + 786432, 7087872, 7087872, 1536, 3, 8 * 7 + 1};
    int n = (int)(sizeof raw / sizeof raw[0]);
    for (int dp = 1; dp <= 16; dp++) {
        zero_bucket b[8];
        make_buckets(raw, n, dp, b);
        size_t shard_total = 0;
        for (int k = 0; k < n; k++) {
            size_t slice = zero_slice_elems(&b[k], dp), covered = 0;
            assert_true(slice * (size_t)dp == b[k].size);
            assert_int_equal(slice % 8, 0);   /* bf16: 16-byte aligned slices */
            for (int r = 0; r < dp; r++) {
                size_t at = zero_slice_at(&b[k], dp, r);
                assert_true(at >= b[k].offset && at + slice <= b[k].offset + b[k].size);
                if (r > 0) assert_true(at == zero_slice_at(&b[k], dp, r - 1) + slice);   /* disjoint, in rank order */
                covered += slice;
            }
            assert_true(covered == b[k].size);
            assert_true(b[k].shard_offset == shard_total);
            shard_total += slice;
        }
        size_t whole = b[n - 1].offset + b[n - 1].size;
        assert_true(shard_total * (size_t)dp == whole);
        /* the layers (1..n-2) set the small buffers, the embedding the big one */
        size_t small, big;
        zero_buffer_elems(b, n, &small, &big);
        assert_true(small == b[1].size);
        assert_true(big == b[0].size);
        b[0].size = small;   /* no bucket above a layer: no big buffer */
        zero_buffer_elems(b, n, &small, &big);
        assert_true(big == 0);
    }
}

/* One stage's step asks the sequence for buckets in the training step's order; returns the
 * requests served by a new use (gathers). */
static int replay_requests(const zero_stage *st, const pipe_action *a, int na, const zero_use *seq, int nseq)
{
    int cursor = -1, gathers = 0;
#define ASK(bucket, bwd)                                                     \
    do {                                                                     \
        if ((bucket) < 0) break;                                             \
        int i_ = zero_next_use(seq, nseq, &cursor, (bucket));                \
        assert_true(i_ >= -1);                                               \
        if (i_ >= 0) {                                                       \
            assert_int_equal(seq[i_].backward, (bwd));                       \
            gathers++;                                                       \
        }                                                                    \
    } while (0)
    for (int i = 0; i < na; i++) {
        if (a[i].kind == PIPE_EXCHANGE) continue;
        int c = a[i].chunk, lo = c * st->Lc, hi = (c + 1) * st->Lc;
        int emb = st->first && c == 0, head = st->last && c == st->vpp - 1;
        if (a[i].kind == PIPE_FORWARD) {
            if (emb) ASK(st->embed, 0);
            for (int l = lo; l < hi; l++) ASK(st->layer0 + l, 0);
            if (head) { ASK(st->final, 0); ASK(st->head, 0); }
        } else {
            if (head) { ASK(st->head, 1); ASK(st->final, 1); }
            for (int l = hi - 1; l >= lo; l--) {
                ASK(st->layer0 + l, 1);
                ASK(st->layer0 + l, 1);   /* a recomputed layer asks again: held, no gather */
            }
        }
    }
#undef ASK
    assert_int_equal(cursor, nseq - 1);   /* the whole sequence was used */
    return gathers;
}

/* Each use's buffer fits its bucket; a gather issued ahead (at the take of use i - 1 or i - 2)
 * never lands in a buffer a use from that take to its own holds, and goes as far ahead as that
 * allows (two uses); no gather into a buffer goes out before the take of the use after the
 * buffer's last holder (so the compute stream has issued every read of it); layers alternate
 * between the small two.  Returns the uses whose gather could not go out ahead. */
static int check_buffers(const zero_stage *st, const zero_use *seq, int n)
{
    int late = 0;
    for (int i = 0; i < n; i++) {
        const zero_bucket *b = &st->buckets[seq[i].bucket];
        assert_true(seq[i].buffer == 0 || seq[i].buffer == 1 || seq[i].buffer == ZERO_BIG);
        assert_int_equal(seq[i].buffer == ZERO_BIG, b->size > st->small);
        if (i == 0) { assert_int_equal(seq[i].issue_at, 0); continue; }
        assert_int_not_equal(seq[i].bucket, seq[i - 1].bucket);
        assert_true(seq[i].issue_at >= i - 2 && seq[i].issue_at <= i);
        for (int k = seq[i].issue_at; k < i; k++) assert_int_not_equal(seq[i].buffer, seq[k].buffer);
        int free1 = seq[i - 1].buffer != seq[i].buffer, free2 = free1 && i >= 2 && seq[i - 2].buffer != seq[i].buffer;
        assert_int_equal(seq[i].issue_at, free2 ? i - 2 : free1 ? i - 1 : i);
        if (seq[i].issue_at == i) late++;
        for (int k = i - 1; k >= 0; k--)
            if (seq[k].buffer == seq[i].buffer) { assert_true(seq[i].issue_at > k); break; }
        if (b->layer && st->buckets[seq[i - 1].bucket].layer) assert_int_not_equal(seq[i].buffer, seq[i - 1].buffer);
    }
    return late;
}

/* Buckets of one stage: [embedding], L layers, [final]; sizes in elements. */
static void stage_buckets(zero_bucket *b, int first, int L, int last, size_t embed, size_t layer, size_t final)
{
    int k = 0;
    size_t at = 0;
    if (first) { b[k] = (zero_bucket){at, embed, 0, 0}; at += embed; k++; }
    for (int l = 0; l < L; l++, k++) { b[k] = (zero_bucket){at, layer, 0, 1}; at += layer; }
    if (last) b[k] = (zero_bucket){at, final, 0, 0};
}

static pipe_action actions[MAX_ACTIONS];
static zero_use seq[MAX_USES];
static zero_bucket buckets[64];

/* One stage, no pipeline: the counts per micro-batch, tied and untied. */
static void one_stage_sequence(void **state)
{
    (void)state;
    for (int tied = 0; tied <= 1; tied++)
        for (int L = 1; L <= 12; L += 11)
            for (int m = 1; m <= 4; m++) {
                pipe_buffers need;
                int na = pipeline_schedule(1, 0, m, 1, actions, MAX_ACTIONS, &need);
                assert_true(na > 0);
                /* buckets: embedding 0 (GPT-2's size), layers 1..L, final L + 1 (with an untied head) */
                stage_buckets(buckets, 1, L, 1, 39383040, 7087872, tied ? 1536 : 39383040);
                size_t small, big;
                zero_buffer_elems(buckets, L + 2, &small, &big);
                zero_stage st = {buckets, small, 0, L + 1, tied ? 0 : L + 1, 1, L, 1, 1, 1};
                int n = zero_gather_sequence(&st, actions, na, seq, MAX_USES);
                /* every gather but the step's first is a prefetch */
                assert_int_equal(check_buffers(&st, seq, n), 0);
                /* tied: forward E, layers, F, E; backward (E held) F, layers reversed.
                 * untied: forward E, layers, F; backward (F held) layers reversed */
                int per_mb = tied ? 2 * L + 4 : 2 * L + 2;
                assert_int_equal(n, m * per_mb);
                assert_int_equal(replay_requests(&st, actions, na, seq, n), n);
                /* a request out of turn is refused */
                int cursor = -1;
                assert_int_equal(zero_next_use(seq, n, &cursor, 1), -2);
                assert_int_equal(zero_next_use(seq, n, &cursor, 0), 0);
                assert_int_equal(zero_next_use(seq, n, &cursor, 0), -1);
                assert_int_equal(cursor, 0);
                /* too small an output is refused */
                assert_int_equal(zero_gather_sequence(&st, actions, na, seq, n - 1), -1);
            }
}

/* Every stage of 1F1B and interleaved pipelines: every request served in turn. */
static void pipeline_sequences(void **state)
{
    (void)state;
    for (int pp = 2; pp <= 4; pp++)
        for (int vpp = 1; vpp <= 2; vpp++)
            for (int m = pp; m <= 3 * pp; m += pp) {
                int Lc = 2;
                for (int stage = 0; stage < pp; stage++) {
                    pipe_buffers need;
                    int na = pipeline_schedule(pp, stage, m, vpp, actions, MAX_ACTIONS, &need);
                    assert_true(na > 0);
                    int first = stage == 0, last = stage == pp - 1, L = Lc * vpp;
                    /* buckets: [embedding], layers, [final] */
                    int layer0 = first ? 1 : 0, final = last ? layer0 + L : -1;
                    stage_buckets(buckets, first, L, last, 5000, 800, 5008);
                    zero_stage st = {buckets, 800, first ? 0 : -1, final, final, layer0, Lc, vpp, first, last};
                    int n = zero_gather_sequence(&st, actions, na, seq, MAX_USES);
                    assert_true(n > 0);
                    assert_int_equal(check_buffers(&st, seq, n), 0);
                    assert_int_equal(replay_requests(&st, actions, na, seq, n), n);
                    /* a layer's backward right after its forward (a stage's last layer, or a middle stage's
                     * first after its backward) keeps it: between m and 2 m gathers of each */
                    for (int l = 0; l < L; l++) {
                        int uses = 0;
                        for (int i = 0; i < n; i++) uses += seq[i].bucket == layer0 + l;
                        assert_true(uses >= m && uses <= 2 * m);
                    }
                }
            }
}

/* Two big buckets in a row (a final norm and a tied table both above a layer's size)
 * share the big buffer: the second's gather waits until it is taken. */
static void big_after_big_waits(void **state)
{
    (void)state;
    pipe_buffers need;
    int na = pipeline_schedule(1, 0, 2, 1, actions, MAX_ACTIONS, &need);
    stage_buckets(buckets, 1, 2, 1, 5000, 800, 4000);
    zero_stage st = {buckets, 800, 0, 3, 0, 1, 2, 1, 1, 1};
    int n = zero_gather_sequence(&st, actions, na, seq, MAX_USES);
    /* forward E L0 L1 F E, backward (E held) F L1 L0: F then E, E then F, per micro-batch */
    assert_int_equal(check_buffers(&st, seq, n), 2 * 2);
    assert_int_equal(replay_requests(&st, actions, na, seq, n), n);
}

/* ZeRO-2/3 beside their shards: two layer buffers (the reduce-scatter or gather of one
 * bucket beside the compute of the next) and, for a bucket larger than a layer (the
 * embedding, an untied head), one of its size; gathered parameters and gradients for
 * ZeRO-3, gradients for ZeRO-2, nothing for ZeRO-0/1 or one rank.  The planner's
 * zero_unit_buffer_bytes counts the same. */
static void buffers_against_planner(void **state)
{
    (void)state;
    const double layer = 7087872.0, embed = 39383040.0;   /* GPT-2 124M's */
    for (int dp = 2; dp <= 8; dp *= 2) {
        /* the planner counts what the step holds */
        assert_close((double)zero_buffer_bytes(3, (size_t)layer, 0, dp, 2), zero_unit_buffer_bytes(3, layer, 0.0, 2.0, 2.0), 1e-12);
        assert_close((double)zero_buffer_bytes(3, (size_t)layer, (size_t)embed, dp, 2),
                     zero_unit_buffer_bytes(3, layer, embed, 2.0, 2.0), 1e-12);
        assert_close((double)zero_buffer_bytes(2, (size_t)layer, (size_t)embed, dp, 2),
                     zero_unit_buffer_bytes(2, layer, embed, 2.0, 2.0), 1e-12);
        assert_true(zero_buffer_bytes(1, (size_t)layer, 0, dp, 2) == 0);
        assert_true(zero_buffer_bytes(3, (size_t)layer, 0, 1, 2) == 0);
    }
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(slices_cover_buckets),
        cmocka_unit_test(one_stage_sequence),
        cmocka_unit_test(pipeline_sequences),
        cmocka_unit_test(big_after_big_waits),
        cmocka_unit_test(buffers_against_planner),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
