/* validator/zero.c's streams and events, on the CPU: the CUDA and NCCL calls it makes
 * are replaced by ones that log what each stream does (which memory it reads and
 * writes) and what each event stands for, and the test drives zero.c the way
 * validator/train.c does, step after step (ZeRO-2 and ZeRO-3, tied and untied heads,
 * one to four micro-batches, every stage of a 1F1B pipeline).  Then every two accesses
 * to the same memory from the two streams, one of them a write, must be ordered by the
 * streams' order and the event waits (vector clocks): a gather may not overwrite a
 * buffer the compute still reads, the compute may not read a buffer before its gather
 * is over, a gradient buffer may not be cleared before its reduce-scatter has read it,
 * the shards not be updated under a collective.  And ZeRO-3's reduce-scatters, held back
 * behind the next take's gathers, go out after those gathers and all of them by the
 * optimizer.  Needs CUDA's and NCCL's headers, not their libraries. */
#include "test_util.h"

#include "zero.h"

/* ---- the mock device: two streams, events, accesses ---- */

struct CUstream_st { int id; };
struct CUevent_st { int vc[2]; int used; };

static struct CUstream_st streams[2] = {{0}, {1}};
#define COMPUTE (&streams[0])
#define COMM (&streams[1])

typedef struct { uintptr_t lo, hi; int write; } access_t;
typedef struct {
    int stream, index;         /* index: 1-based position on its stream */
    int vc[2];                 /* what of each stream had happened before it began */
    access_t acc[3];
    int nacc;
    const char *what;
} sim_op;

#define MAX_OPS 200000
static sim_op ops[MAX_OPS];
static int nops;
static int clock_of[2][2];     /* each stream's vector clock after its last op */
static int events_alive;

static void add_op(cudaStream_t s, const char *what, const access_t *acc, int nacc)
{
    assert_true(nops < MAX_OPS);
    int id = s->id;
    clock_of[id][id]++;
    sim_op *o = &ops[nops++];
    o->stream = id;
    o->index = clock_of[id][id];
    memcpy(o->vc, clock_of[id], sizeof o->vc);
    memcpy(o->acc, acc, (size_t)nacc * sizeof *acc);
    o->nacc = nacc;
    o->what = what;
}

static access_t rd(const void *p, size_t bytes) { return (access_t){(uintptr_t)p, (uintptr_t)p + bytes, 0}; }
static access_t wr(const void *p, size_t bytes) { return (access_t){(uintptr_t)p, (uintptr_t)p + bytes, 1}; }

cudaError_t cudaEventCreateWithFlags(cudaEvent_t *event, unsigned int flags)
{
    (void)flags;
    *event = calloc(1, sizeof **event);
    events_alive++;
    return cudaSuccess;
}
cudaError_t cudaEventDestroy(cudaEvent_t event)
{
    free(event);
    events_alive--;
    return cudaSuccess;
}
cudaError_t cudaEventRecord(cudaEvent_t event, cudaStream_t stream)
{
    memcpy(event->vc, clock_of[stream->id], sizeof event->vc);
    event->used = 1;
    return cudaSuccess;
}
cudaError_t cudaStreamWaitEvent(cudaStream_t stream, cudaEvent_t event, unsigned int flags)
{
    (void)flags;
    for (int k = 0; k < 2; k++)
        if (event->vc[k] > clock_of[stream->id][k]) clock_of[stream->id][k] = event->vc[k];
    return cudaSuccess;
}
const char *cudaGetErrorString(cudaError_t error) { (void)error; return "mock"; }
cudaError_t cudaMemsetAsync(void *ptr, int value, size_t bytes, cudaStream_t stream)
{
    (void)value;
    access_t a = wr(ptr, bytes);
    add_op(stream, "memset", &a, 1);
    return cudaSuccess;
}
static int sim_dp = 2;
/* ZeRO-3 queues the reduce-scatters held back behind the gathers a take issues: within one take, no gather
 * after a reduce-scatter */
static int in_take, scattered_in_take;
static long scatters_in_takes;
ncclResult_t ncclAllGather(const void *send, void *recv, size_t count, ncclDataType_t type, ncclComm_t comm, cudaStream_t stream)
{
    (void)type; (void)comm;
    if (in_take) assert_false(scattered_in_take);
    size_t b = count * sizeof(sx_bf16);
    /* in place (send inside recv) the rank's slice is read before the rest is written */
    access_t a[2] = {rd(send, b), wr(recv, b * (size_t)sim_dp)};
    add_op(stream, "all-gather", a, 2);
    return ncclSuccess;
}
static long reduce_scatters;   /* issued so far */
ncclResult_t ncclReduceScatter(const void *send, void *recv, size_t count, ncclDataType_t type, ncclRedOp_t op, ncclComm_t comm,
                               cudaStream_t stream)
{
    (void)type; (void)op; (void)comm;
    size_t b = count * sizeof(sx_bf16);
    access_t a[2] = {rd(send, b * (size_t)sim_dp), wr(recv, b)};
    add_op(stream, "reduce-scatter", a, 2);
    reduce_scatters++;
    scattered_in_take |= in_take;
    scatters_in_takes += in_take;
    return ncclSuccess;
}
const char *ncclGetErrorString(ncclResult_t result) { (void)result; return "mock"; }
cudaError_t sx_residual_add(sx_bf16 *out, sx_bf16 *copy, const sx_bf16 *a, const sx_bf16 *b, size_t n, cudaStream_t stream)
{
    (void)copy;
    access_t acc[3] = {rd(a, n * sizeof *a), rd(b, n * sizeof *b), wr(out, n * sizeof *out)};
    add_op(stream, "shard add", acc, 3);
    return cudaSuccess;
}

/* X happened before Y: Y's clock has seen X's place on its stream */
static int before(const sim_op *x, const sim_op *y) { return y->vc[x->stream] >= x->index; }

/* every conflicting pair across the streams is ordered; returns the pairs checked */
static long check_races(void)
{
    long pairs = 0;
    for (int i = 0; i < nops; i++)
        for (int j = i + 1; j < nops; j++) {
            const sim_op *x = &ops[i], *y = &ops[j];
            if (x->stream == y->stream) continue;
            for (int a = 0; a < x->nacc; a++)
                for (int b = 0; b < y->nacc; b++) {
                    const access_t *p = &x->acc[a], *q = &y->acc[b];
                    if (!(p->write || q->write) || p->hi <= q->lo || q->hi <= p->lo) continue;
                    pairs++;
                    if (!before(x, y) && !before(y, x)) {
                        print_error("race: op %d (%s, stream %d #%d) and op %d (%s, stream %d #%d)\n", i, x->what, x->stream,
                                    x->index, j, y->what, y->stream, y->index);
                        fail();
                    }
                }
        }
    return pairs;
}

/* ---- the training step's calls, as validator/train.c makes them ---- */

static void no_mark(const char *name, int end, cudaStream_t on, pass_t pass) { (void)name; (void)end; (void)on; (void)pass; }

typedef struct {
    zero_state z;
    zero_stage st;
    zero_bucket b[32];
    int nb, stage;
    sx_bf16 *whole_params;         /* ZeRO-2: the parameters, whole */
    size_t whole_elems;
    cudaEvent_t reduce_done, optimizer_done;
    long ended;                    /* buckets whose gradients the backward completed (zero_grads_end) */
} sim;

/* zero_grads_end, counted: every bucket completed is reduce-scattered by the step's end */
static void grads_end(sim *s)
{
    if (s->z.grad_bucket >= 0) s->ended++;
    zero_grads_end(&s->z);
}

/* the compute reads a bucket's parameters (and, backward, writes its gradient) */
static void compute_bucket(sim *s, int k, int backward, int writes_grads)
{
    const zero_bucket *b = &s->b[k];
    access_t a[2];
    int n = 0;
    sx_bf16 *p = s->stage == 3 ? zero_param_at(&s->z, b->offset) : s->whole_params + b->offset;
    assert_non_null(p);
    a[n++] = rd(p, b->size * sizeof *p);
    if (writes_grads) {
        sx_bf16 *g = zero_grad_at(&s->z, b->offset);
        assert_non_null(g);
        assert_ptr_equal(zero_grad_at(&s->z, b->offset + b->size - 1), g + b->size - 1);
        a[n++] = wr(g, b->size * sizeof *g);
    }
    add_op(COMPUTE, backward ? "backward" : "forward", a, n);
}

static void take(sim *s, int k, int backward)
{
    if (s->stage != 3) return;
    in_take = 1;
    scattered_in_take = 0;
    zero_take_params(&s->z, k, backward);
    in_take = 0;
}

static void stage_forward(sim *s, const pipe_action *a)
{
    const zero_stage *st = &s->st;
    int c = a->chunk;
    if (st->first && c == 0) { take(s, st->embed, 0); compute_bucket(s, st->embed, 0, 0); }
    for (int l = c * st->Lc; l < (c + 1) * st->Lc; l++) { take(s, st->layer0 + l, 0); compute_bucket(s, st->layer0 + l, 0, 0); }
    if (st->last && c == st->vpp - 1) {
        take(s, st->final, 0); compute_bucket(s, st->final, 0, 0);
        take(s, st->head, 0); compute_bucket(s, st->head, 0, 0);
    }
}

static void stage_backward(sim *s, const pipe_action *a)
{
    const zero_stage *st = &s->st;
    int c = a->chunk;
    if (st->last && c == st->vpp - 1) {
        take(s, st->head, 1);
        zero_grads_begin(&s->z, st->head);
        compute_bucket(s, st->head, 1, 1);
        if (st->head != st->final) {
            grads_end(s);
            take(s, st->final, 1);
            zero_grads_begin(&s->z, st->final);
        }
        compute_bucket(s, st->final, 1, 1);
        grads_end(s);
    }
    for (int l = (c + 1) * st->Lc - 1; l >= c * st->Lc; l--) {
        int k = st->layer0 + l;
        take(s, k, 1);
        zero_grads_begin(&s->z, k);
        compute_bucket(s, k, 1, 0);   /* a recomputed forward */
        compute_bucket(s, k, 1, 1);
        grads_end(s);
    }
    if (st->first && c == 0) {
        zero_grads_begin(&s->z, st->embed);
        sx_bf16 *g = zero_grad_at(&s->z, s->b[st->embed].offset);
        access_t w = wr(g, s->b[st->embed].size * sizeof *g);
        add_op(COMPUTE, "embedding backward", &w, 1);
        grads_end(s);
    }
}

static void one_step(sim *s, const pipe_action *actions, int na, size_t shard_elems)
{
    cudaMemsetAsync(s->z.grad_shard, 0, shard_elems * sizeof(sx_bf16), COMPUTE);   /* zero_grads */
    zero_step_begin(&s->z, s->optimizer_done);
    for (int i = 0; i < na; i++) {
        if (actions[i].kind == PIPE_FORWARD) stage_forward(s, &actions[i]);
        else if (actions[i].kind == PIPE_BACKWARD) stage_backward(s, &actions[i]);
    }
    /* optimizer_step: ZeRO-3's held-back reduce-scatters, the exposed reduction, AdamW on the shards */
    zero_grads_flush(&s->z);
    assert_int_equal(s->z.npending, 0);
    assert_int_equal(reduce_scatters, s->ended);   /* every bucket completed, reduced once, by now */
    cudaEventRecord(s->reduce_done, COMM);
    cudaStreamWaitEvent(COMPUTE, s->reduce_done, 0);
    /* ZeRO-3 updates its parameter shard, ZeRO-2 its slices of the whole parameters */
    access_t a[2] = {rd(s->z.grad_shard, shard_elems * sizeof(sx_bf16)),
                     s->stage == 3 ? wr(s->z.param_shard, shard_elems * sizeof(sx_bf16))
                                   : wr(s->whole_params, s->whole_elems * sizeof(sx_bf16))};
    add_op(COMPUTE, "optimizer", a, 2);
    cudaEventRecord(s->optimizer_done, COMPUTE);
    if (s->stage == 2) {
        /* ZeRO-2's all-gather of the parameters, awaited before each bucket's forward (train.c's
         * params_ready): the next step's reads are ordered by the compute waiting for it here */
        cudaStreamWaitEvent(COMM, s->optimizer_done, 0);
        for (int k = 0; k < s->nb; k++) {
            size_t slice = zero_slice_elems(&s->b[k], sim_dp);
            ncclAllGather(s->whole_params + zero_slice_at(&s->b[k], sim_dp, 0), s->whole_params + s->b[k].offset, slice,
                          ncclBfloat16, NULL, COMM);
        }
        cudaEvent_t ready;
        cudaEventCreateWithFlags(&ready, 0);
        cudaEventRecord(ready, COMM);
        cudaStreamWaitEvent(COMPUTE, ready, 0);
        cudaEventDestroy(ready);
    }
}

/* One stage of pp with m micro-batches for `steps` steps; buckets: [embedding], L layers, [final]. */
static void run_stage(int zero, int pp, int stage, int m, int tied, int steps)
{
    static pipe_action actions[4096];
    static sim s;
    memset(&s, 0, sizeof s);
    nops = 0;
    reduce_scatters = scatters_in_takes = 0;
    memset(clock_of, 0, sizeof clock_of);
    pipe_buffers need;
    int na = pipeline_schedule(pp, stage, m, 1, actions, 4096, &need);
    assert_true(na > 0);
    int first = stage == 0, last = stage == pp - 1, L = 3;
    size_t unit = 8 * (size_t)sim_dp, at = 0, shard = 0;
    size_t embed = 40 * unit, layer = 8 * unit, final = tied ? unit : 41 * unit;
    if (first) { s.b[s.nb++] = (zero_bucket){at, embed, shard, 0}; at += embed; shard += embed / sim_dp; }
    for (int l = 0; l < L; l++) { s.b[s.nb++] = (zero_bucket){at, layer, shard, 1}; at += layer; shard += layer / sim_dp; }
    if (last) { s.b[s.nb++] = (zero_bucket){at, final, shard, 0}; at += final; shard += final / sim_dp; }
    s.stage = zero;
    zero_state *z = &s.z;
    z->stage = zero; z->dp = sim_dp; z->rank = 1; z->my_rank = 1;
    z->compute = COMPUTE; z->comm = COMM; z->dp_comm = NULL; z->mark = no_mark;
    z->buckets = s.b; z->nbuckets = s.nb;
    zero_buffer_elems(s.b, s.nb, &z->small, &z->big);
    /* host memory stands for the device's: only the addresses matter */
    z->param_shard = calloc(shard, sizeof(sx_bf16));
    z->grad_shard = calloc(shard, sizeof(sx_bf16));
    s.whole_params = calloc(at, sizeof(sx_bf16));
    s.whole_elems = at;
    for (int i = 0; i < 3; i++) {
        size_t elems = i == ZERO_BIG ? z->big : z->small;
        z->gathered[i] = zero == 3 && elems ? calloc(elems, sizeof(sx_bf16)) : NULL;
        z->work[i] = elems ? calloc(elems, sizeof(sx_bf16)) : NULL;
    }
    int layer0 = first ? 1 : 0, fin = last ? layer0 + L : -1;
    s.st = (zero_stage){s.b, z->small, first ? 0 : -1, fin, last ? (tied && first ? 0 : fin) : -1, layer0, L, 1, first, last};
    assert_int_equal(zero_init(z, &s.st, actions, na), 0);
    cudaEventCreateWithFlags(&s.reduce_done, 0);
    cudaEventCreateWithFlags(&s.optimizer_done, 0);
    for (int step = 0; step < steps; step++) one_step(&s, actions, na, shard);
    long pairs = check_races();
    assert_true(pairs > 0);   /* the streams did share memory: the check had something to check */
    /* ZeRO-3 with more than one layer's backward in a step: most reduce-scatters go out behind a take's gathers */
    if (zero == 3) assert_true(scatters_in_takes * 2 > reduce_scatters);
    else assert_int_equal(scatters_in_takes, 0);
    zero_free(z);
    cudaEventDestroy(s.reduce_done);
    cudaEventDestroy(s.optimizer_done);
    free(z->param_shard); free(z->grad_shard); free(s.whole_params);
    for (int i = 0; i < 3; i++) { free(z->gathered[i]); free(z->work[i]); }
}

static void one_gpu_stage(void **state)
{
    (void)state;
    for (int zero = 2; zero <= 3; zero++)
        for (int tied = 0; tied <= 1; tied++)
            for (int m = 1; m <= 4; m++) run_stage(zero, 1, 0, m, tied, 3);
    assert_int_equal(events_alive, 0);
}

static void pipeline_stages(void **state)
{
    (void)state;
    for (int zero = 2; zero <= 3; zero++)
        for (int pp = 2; pp <= 3; pp++)
            for (int stage = 0; stage < pp; stage++) run_stage(zero, pp, stage, 2 * pp, 0, 2);
    assert_int_equal(events_alive, 0);
}

/* The check can fail: a gather that does not wait for the compute to be done with its
 * buffer (zero.c's `released` event left out) is a race. */
static void a_missing_wait_is_a_race(void **state)
{
    (void)state;
    static sx_bf16 buffer[64];
    nops = 0;
    memset(clock_of, 0, sizeof clock_of);
    access_t r = rd(buffer, sizeof buffer);
    add_op(COMPUTE, "forward", &r, 1);
    ncclAllGather(buffer, buffer, 32, ncclBfloat16, NULL, COMM);   /* no wait: races the read */
    int race = 0;
    for (int i = 0; i < nops; i++)
        for (int j = i + 1; j < nops; j++)
            if (ops[i].stream != ops[j].stream && !before(&ops[i], &ops[j]) && !before(&ops[j], &ops[i])) race = 1;
    assert_true(race);
    /* and with the wait there is none */
    nops = 0;
    memset(clock_of, 0, sizeof clock_of);
    cudaEvent_t e;
    cudaEventCreateWithFlags(&e, 0);
    add_op(COMPUTE, "forward", &r, 1);
    cudaEventRecord(e, COMPUTE);
    cudaStreamWaitEvent(COMM, e, 0);
    ncclAllGather(buffer, buffer, 32, ncclBfloat16, NULL, COMM);
    assert_true(check_races() > 0);
    cudaEventDestroy(e);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(a_missing_wait_is_a_race),
        cmocka_unit_test(one_gpu_stage),
        cmocka_unit_test(pipeline_stages),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
