/* Context parallelism: the KV exchange's formulas and ops, what CP does to
 * an estimate (memory, FLOPs, time, the groups' links), the layouts it
 * refuses, the search and the emitters. */
#include "test_shipped.h"

/* gpus = tp x cp x pp x dp, 8 GPUs per node, flash attention, bf16 */
static layout_t cp_layout(int64_t tp, int64_t cp, int64_t pp, int64_t dp, int64_t gbs, int64_t seq, cp_comm_t comm)
{
    layout_t l;
    memset(&l, 0, sizeof l);
    l.tp = tp; l.cp = cp; l.pp = pp; l.dp = dp; l.gpus = tp * cp * pp * dp;
    l.vpp = 1; l.mbs = 1; l.gbs = gbs; l.seq = seq; l.gpus_per_node = 8;
    l.cp_comm = comm;
    l.recompute = RECOMPUTE_SELECTIVE;
    l.precision = PREC_BF16;
    return l;
}

static void estimate(const char *model, layout_t l, estimate_t *e)
{
    const model_t *m = model_zoo_find(&zoo, model);
    const hw_gpu *g = hwdb_find_gpu(&db, "h100-sxm");
    const hw_node *n = hwdb_find_node(&db, g->node);
    assert_non_null(m);
    job_t job = {1e12, 2.0};
    char err[512];
    if (estimate_layout(m, g, n, &l, &job, e, err, sizeof err) != 0) {
        print_error("%s\n", err);
        fail();
    }
}

static const op_t *find(const stage_ops *s, const char *name, pass_t pass)
{
    for (int i = 0; i < s->nops; i++)
        if (s->ops[i].pass == pass && !strcmp(s->ops[i].name, name)) return &s->ops[i];
    return NULL;
}

static void kv_block_and_ring_exposure_formulas(void **state)
{
    (void)state;
    /* Llama 3 405B at 128k over CP 16 with TP 8: one KV head per rank, d 128, 8192 tokens,
     * K and V in bf16: 2 x 1 x 128 x 8192 x 2 B = 4 MiB */
    assert_close(cp_kv_block_bytes(1, 128, 131072, 16, 1, 2), 4194304.0, 1e-15);
    /* two sequences per micro-batch, twice the block */
    assert_close(cp_kv_block_bytes(1, 128, 131072, 16, 2, 2), 8388608.0, 1e-15);
    /* at equal stream priority a step's transfer waits for the attention beside it: all exposed,
     * however long that attention */
    assert_close(cp_ring_exposed_s(3e-3, 8e-3, 4, 1), 3e-3, 1e-12);
    assert_close(cp_ring_exposed_s(1e-3, 80e-3, 4, 1), 1e-3, 1e-12);
    /* beside it (a higher-priority stream), a step hides behind 1/cp of the attention: 8 ms over
     * CP 4 hides 2 ms */
    assert_close(cp_ring_exposed_s(3e-3, 8e-3, 4, 0), 1e-3, 1e-12);
    assert_true(cp_ring_exposed_s(1e-3, 8e-3, 4, 0) == 0.0);
    /* the planner's ring: its forward serialised, its backward hidden by each step's block (docs/model.md,
     * "Context parallelism") */
    assert_int_equal(CP_RING_SERIALISED_FWD, 1);
    assert_int_equal(CP_RING_SERIALISED_BWD, 0);
}

static void ring_ops_carry_the_kv_blocks(void **state)
{
    (void)state;
    const model_t *m = model_zoo_find(&zoo, "llama3-8b"); /* 32 layers, 8 KV heads of 128 */
    layout_t l = cp_layout(2, 4, 1, 2, 16, 32768, CP_COMM_RING);
    static stage_ops s;
    assert_int_equal(build_stage_ops(m, &l, 0, &s), 0);
    const op_t *fwd = find(&s, "cp_ring_kv", PASS_FWD), *bwd = find(&s, "cp_ring_kv_dkv_bwd", PASS_BWD);
    assert_non_null(fwd);
    assert_non_null(bwd);
    /* 4 KV heads per TP rank, 8192 tokens: 2 x 4 x 128 x 8192 x 2 B = 16 MiB per step */
    assert_close(fwd->comm_bytes, 16777216.0, 1e-15);
    assert_close(bwd->comm_bytes, 2.0 * fwd->comm_bytes, 1e-15);
    assert_int_equal(fwd->count, 32 * 3);           /* cp - 1 steps per layer */
    assert_int_equal(fwd->group, GROUP_CP);
    assert_int_equal(fwd->group_size, 4);
    assert_int_equal(fwd->coll, COLL_SENDRECV);
    assert_int_equal(fwd->overlap, OVERLAP_ATTENTION);
    /* each backward step adds the dK, dV that arrived to its own: two blocks read, one written */
    const op_t *add = find(&s, "cp_dkv_add", PASS_BWD);
    assert_non_null(add);
    assert_int_equal(add->kind, OP_MEMBOUND);
    assert_int_equal(add->count, fwd->count);
    assert_close(add->bytes, 3.0 * 16777216.0, 1e-15);
    /* each attention call packs its K, V into the send buffer first, forward and backward: one block read, one
     * written, once a layer (not a step); selective recomputation repeats no pack, full does */
    for (int i = 0; i < 2; i++) {
        const op_t *pack = find(&s, "cp_kv_pack", i ? PASS_BWD : PASS_FWD);
        assert_non_null(pack);
        assert_int_equal(pack->kind, OP_MEMBOUND);
        assert_int_equal(pack->count, 32);
        assert_close(pack->bytes, 2.0 * 16777216.0, 1e-15);
    }
    assert_null(find(&s, "cp_kv_pack", PASS_RECOMPUTE));
    l.recompute = RECOMPUTE_FULL;
    assert_int_equal(build_stage_ops(m, &l, 0, &s), 0);
    assert_non_null(find(&s, "cp_kv_pack", PASS_RECOMPUTE));
    l.recompute = RECOMPUTE_SELECTIVE;   /* cp_layout's */
    assert_int_equal(build_stage_ops(m, &l, 0, &s), 0);
    assert_null(find(&s, "cp_allgather_kv", PASS_FWD));
    /* the GEMMs run on the rank's 8192 tokens; attention takes them against all 32768 keys */
    assert_int_equal(find(&s, "qkv", PASS_FWD)->m, 8192);
    const op_t *att = find(&s, "attention", PASS_FWD);
    assert_int_equal(att->m, 8192);
    assert_int_equal(att->n, 32768);
    /* the gradient's group is DP x CP */
    const op_t *grads = find(&s, "dp_allreduce_grads", PASS_STEP);
    assert_non_null(grads);
    assert_int_equal(grads->group_size, 8);
    assert_int_equal(grads->group, GROUP_DP);

    /* Llama 3's all-gather: the whole K and V (cp blocks), gathered twice, dK and dV reduce-scattered */
    l.cp_comm = CP_COMM_ALLGATHER;
    assert_int_equal(build_stage_ops(m, &l, 0, &s), 0);
    const op_t *ag = find(&s, "cp_allgather_kv", PASS_FWD);
    assert_non_null(ag);
    assert_close(ag->comm_bytes, 4.0 * 16777216.0, 1e-15);
    assert_int_equal(ag->count, 32);
    assert_int_equal(ag->overlap, EXPOSED);
    assert_non_null(find(&s, "cp_allgather_kv_bwd", PASS_BWD));
    assert_non_null(find(&s, "cp_reduce_scatter_dkv", PASS_BWD));
    assert_null(find(&s, "cp_ring_kv", PASS_FWD));
    assert_null(find(&s, "cp_dkv_add", PASS_BWD));   /* the reduce-scatter sums them */
    assert_null(find(&s, "cp_kv_pack", PASS_FWD));   /* the all-gather takes K and V as they lie */

    /* without CP: no CP op, and the zeroed layout's cp 0 is 1 */
    l.cp = 0; l.dp = 8;
    assert_int_equal(build_stage_ops(m, &l, 0, &s), 0);
    for (int i = 0; i < s.nops; i++) assert_true(s.ops[i].group != GROUP_CP || s.ops[i].kind != OP_COMM);
    assert_int_equal(find(&s, "attention", PASS_FWD)->m, 32768);
}

static void cp_halves_activations_keeps_flops(void **state)
{
    (void)state;
    static estimate_t one, two;
    /* 64 GPUs, the same global batch: DP 8 without CP, DP 4 x CP 2 with it */
    estimate("llama3-8b", cp_layout(8, 1, 1, 8, 64, 32768, CP_COMM_RING), &one);
    estimate("llama3-8b", cp_layout(8, 2, 1, 4, 64, 32768, CP_COMM_RING), &two);
    assert_close(two.memory.activations, one.memory.activations / 2.0, 0.02);
    assert_true(two.memory.activations < one.memory.activations);
    assert_close(two.memory.logits, one.memory.logits / 2.0, 1e-12);
    /* CP moves no FLOP, and twice the micro-batches each do half the work: the step's compute stays */
    assert_close(two.model_flops_per_step, one.model_flops_per_step, 1e-12);
    assert_close(two.hardware_flops_per_step, one.hardware_flops_per_step, 1e-12);
    assert_int_equal(two.microbatches, 2 * one.microbatches);
    assert_close(two.compute_s, one.compute_s, 0.05);
    assert_close(two.step_s, one.step_s, 0.10);
    /* each rank's attention is half the whole sequence's, forward and backward */
    const op_t *a1 = find(&one.first_stage, "attention", PASS_FWD), *a2 = find(&two.first_stage, "attention", PASS_FWD);
    assert_close(a2->flops, a1->flops / 2.0, 1e-12);
    assert_close(a2->model_flops, a1->model_flops / 2.0, 1e-12);
    /* the step adds up, with the CP term in it */
    assert_close(two.step_s, two.compute_s + two.tp_comm_s + two.cp_comm_s + two.pp_comm_s + two.dp_comm_s +
                                 two.bubble_s + two.optimizer_s, 1e-12);
    /* ZeRO-1 shards the optimizer over DP x CP = 8 both ways */
    layout_t z1 = cp_layout(8, 1, 1, 8, 64, 32768, CP_COMM_RING), z2 = cp_layout(8, 2, 1, 4, 64, 32768, CP_COMM_RING);
    z1.zero = z2.zero = 1;
    estimate("llama3-8b", z1, &one);
    estimate("llama3-8b", z2, &two);
    assert_close(two.memory.optimizer, one.memory.optimizer, 1e-12);
}

/* The exposed CP seconds are the ring's steps, each whole (serialised after the attention beside it),
 * summed over the op list; never less than the old rule's excess over 1/cp of the attention. */
static void ring_exposure_adds_up_from_the_ops(void **state)
{
    (void)state;
    static estimate_t e;
    /* TP 8 x CP 4: the CP group spans 4 nodes, its ring runs over the NICs */
    estimate("llama3-8b", cp_layout(8, 4, 1, 1, 4, 16384, CP_COMM_RING), &e);
    const stage_ops *s = &e.first_stage;
    double exposed = 0.0, excess = 0.0;
    for (int i = 0; i < s->nops; i++) {
        const op_t *op = &s->ops[i];
        if (op->kind != OP_COMM || op->group != GROUP_CP) continue;
        assert_true(op->crosses_node);
        const op_t *att = find(s, op->pass == PASS_BWD ? "attention_bwd" : "attention", op->pass);
        double hidden = att->time_s / 4.0;
        /* the forward's steps in full, the backward's beyond their block */
        double excess_op = op->time_s > hidden ? op->time_s - hidden : 0.0;
        exposed += (double)op->count * (op->pass == PASS_BWD ? excess_op : op->time_s);
        excess += (double)op->count * excess_op;
    }
    assert_true(exposed > 0.0);
    assert_close(e.cp_comm_s, exposed * (double)e.microbatches, 1e-9);
    assert_true(e.cp_comm_s >= excess * (double)e.microbatches);

    /* TP 4 x CP 2 stays in the node; its gradient group (DP 2 x CP 2, 16 GPUs wide) leaves it */
    estimate("llama3-8b", cp_layout(4, 2, 1, 2, 8, 16384, CP_COMM_RING), &e);
    assert_false(find(&e.first_stage, "cp_ring_kv", PASS_FWD)->crosses_node);
    assert_true(find(&e.first_stage, "dp_allreduce_grads", PASS_STEP)->crosses_node);

    /* the all-gather is exposed whole */
    estimate("llama3-8b", cp_layout(8, 4, 1, 1, 4, 16384, CP_COMM_ALLGATHER), &e);
    double all = 0.0;
    for (int i = 0; i < e.first_stage.nops; i++)
        if (e.first_stage.ops[i].group == GROUP_CP && e.first_stage.ops[i].kind == OP_COMM)
            all += e.first_stage.ops[i].time_s * (double)e.first_stage.ops[i].count;
    assert_true(all > 0.0);
    assert_close(e.cp_comm_s, all * (double)e.microbatches, 1e-9);
}

/* The search's cached estimate must give the uncached one's numbers for CP layouts too. */
static void cached_estimate_matches_with_cp(void **state)
{
    (void)state;
    const model_t *m = model_zoo_find(&zoo, "llama3-8b");
    const hw_gpu *g = hwdb_find_gpu(&db, "h100-sxm");
    const hw_node *n = hwdb_find_node(&db, g->node);
    job_t job = {1e12, 2.0};
    char err[256];
    static estimate_t fast, cached;
    estimate_cache *cache = estimate_cache_new();
    assert_non_null(cache);
    /* the same TP, PP, DP and micro-batch with CP 1, 2 and 4 and both exchanges: no key may collide */
    for (int comm = 0; comm <= 1; comm++)
        for (int64_t cp = 1; cp <= 4; cp *= 2) {
            layout_t l = cp_layout(2, cp, 2, 2, 16, 16384, (cp_comm_t)comm);
            l.gpus_per_node = n->gpus_per_node;
            assert_int_equal(estimate_layout_fast(m, g, n, &l, &job, &fast, err, sizeof err), 0);
            assert_int_equal(estimate_layout_cached(cache, m, g, n, &l, &job, 0, &cached, err, sizeof err), 0);
            assert_true(fast.step_s == cached.step_s);
            assert_true(fast.cp_comm_s == cached.cp_comm_s);
            assert_true(fast.dp_comm_s == cached.dp_comm_s);
            assert_true(fast.memory.total == cached.memory.total);
        }
    estimate_cache_free(cache);
}

/* The ring runs the rank's attention as cp kernels over blocks of s/cp (cp_ring_attention_length): with the
 * fused kernel timed at s/cp and at s, a CP 2 rank's attention takes two kernels at s/2, not half the kernel at s;
 * the all-gathered variant keeps the one kernel at s.  Without calibrate's times, the frameworks' kernels take the
 * efficiency of the local length. */
static void ring_attention_runs_cp_kernels_at_the_local_length(void **state)
{
    (void)state;
    assert_close(cp_ring_attention_length(8192, 4), 2048, 0);
    assert_close(cp_ring_attention_length(8192, 1), 8192, 0);
    static hw_gpu timed;
    timed = *hwdb_find_gpu(&db, "h100-sxm");
    const hw_node *n = hwdb_find_node(&db, timed.node);
    /* llama3.2-1b, mbs 1: 32 heads of 64, 8 KV heads; forward times at 2048 and 4096 tokens */
    for (int bwd = 0; bwd < 2; bwd++) {
        timed.attention_times[bwd] = 2;
        timed.attention_time[bwd][0] = (hw_gemm_time){32, 2048, 64, 8, bwd ? 300e-6 : 120e-6};
        timed.attention_time[bwd][1] = (hw_gemm_time){32, 4096, 64, 8, bwd ? 950e-6 : 380e-6};
    }
    static estimate_t ring, gathered;
    const model_t *m = model_zoo_find(&zoo, "llama3.2-1b");
    job_t job = {1e12, 2.0};
    char err[512];
    layout_t l = cp_layout(1, 2, 1, 1, 8, 4096, CP_COMM_RING);
    l.attention = ATTENTION_SEXTANT;
    assert_int_equal(estimate_layout(m, &timed, n, &l, &job, &ring, err, sizeof err), 0);
    l.cp_comm = CP_COMM_ALLGATHER;
    assert_int_equal(estimate_layout(m, &timed, n, &l, &job, &gathered, err, sizeof err), 0);
    for (int bwd = 0; bwd < 2; bwd++) {
        const op_t *r = find(&ring.first_stage, bwd ? "attention_bwd" : "attention", bwd ? PASS_BWD : PASS_FWD);
        const op_t *g = find(&gathered.first_stage, bwd ? "attention_bwd" : "attention", bwd ? PASS_BWD : PASS_FWD);
        assert_non_null(r);
        assert_non_null(g);
        double at_half = timed.attention_time[bwd][0].seconds, at_whole = timed.attention_time[bwd][1].seconds;
        /* the time before the power model's clock: the op records it (clock_bound_s is all of it) */
        double ratio = r->time_s / g->time_s;
        assert_close(ratio, 2.0 * at_half / (0.5 * at_whole), 1e-9);
    }
    /* the frameworks' flash kernels: the efficiency of the local length */
    layout_t f = cp_layout(1, 2, 1, 1, 8, 4096, CP_COMM_RING);
    f.attention = ATTENTION_FLASH;
    static estimate_t framework, whole;
    assert_int_equal(estimate_layout(m, hwdb_find_gpu(&db, "h100-sxm"), n, &f, &job, &framework, err, sizeof err), 0);
    f.cp_comm = CP_COMM_ALLGATHER;
    assert_int_equal(estimate_layout(m, hwdb_find_gpu(&db, "h100-sxm"), n, &f, &job, &whole, err, sizeof err), 0);
    const op_t *a = find(&framework.first_stage, "attention", PASS_FWD), *b = find(&whole.first_stage, "attention", PASS_FWD);
    assert_close(a->time_s / b->time_s, flash_sequence_factor(4096) / flash_sequence_factor(2048), 1e-9);
}

static void bad_cp_layouts_are_refused(void **state)
{
    (void)state;
    const model_t *m = model_zoo_find(&zoo, "llama3-8b");
    char err[256] = "";
    /* 3 divides 12288 but 2 x 3 chunks do not divide 4096 */
    layout_t l = cp_layout(1, 3, 1, 1, 8, 4096, CP_COMM_RING);
    assert_int_equal(layout_check(m, &l, err, sizeof err), -1);
    assert_non_null(strstr(err, "--cp 3"));
    assert_non_null(strstr(err, "2 x cp"));
    /* 12288 = 2 x 3 x 2048: fine */
    l.seq = 12288;
    assert_int_equal(layout_check(m, &l, err, sizeof err), 0);
    /* a non-causal model needs only cp | seq */
    const model_t *bert = model_zoo_find(&zoo, "bert-base");
    l = cp_layout(1, 3, 1, 1, 8, 513, CP_COMM_RING);
    assert_int_equal(layout_check(bert, &l, err, sizeof err), 0);
    l.seq = 512;
    assert_int_equal(layout_check(bert, &l, err, sizeof err), -1);
    /* the GPUs must be tp x cp x pp x dp */
    l = cp_layout(2, 2, 1, 2, 8, 4096, CP_COMM_RING);
    l.gpus = 4;
    assert_int_equal(layout_check(m, &l, err, sizeof err), -1);
    assert_non_null(strstr(err, "--cp 2"));
    /* negative, unfused attention, an unknown exchange */
    l = cp_layout(1, 2, 1, 1, 8, 4096, CP_COMM_RING);
    l.cp = -2;
    l.gpus = 1;
    assert_int_equal(layout_check(m, &l, err, sizeof err), -1);
    assert_non_null(strstr(err, "--cp -2"));
    l = cp_layout(1, 2, 1, 1, 8, 4096, CP_COMM_RING);
    l.attention = ATTENTION_UNFUSED;
    assert_int_equal(layout_check(m, &l, err, sizeof err), -1);
    assert_non_null(strstr(err, "--attention flash"));
    l = cp_layout(1, 2, 1, 1, 8, 4096, (cp_comm_t)7);
    assert_int_equal(layout_check(m, &l, err, sizeof err), -1);
    assert_non_null(strstr(err, "--cp-comm"));
}

/* The planner's properties with CP: nothing negative, MFU at most 1, and more CP ranks (more GPUs,
 * the rest of the layout the same) never more memory per GPU. */
static void cp_keeps_the_planner_properties(void **state)
{
    (void)state;
    static estimate_t e;
    for (int comm = 0; comm <= 1; comm++)
        for (int zero = 0; zero <= 3; zero++) {
            double last_memory = 1e300;
            for (int64_t cp = 1; cp <= 16; cp *= 2) {
                layout_t l = cp_layout(2, cp, 2, 2, 16, 65536, (cp_comm_t)comm);
                l.zero = zero;
                estimate("llama3-8b", l, &e);
                assert_true(e.memory.total > 0.0 && e.memory.activations >= 0.0 && e.memory.other >= 0.0);
                assert_true(e.step_s > 0.0 && e.compute_s > 0.0 && e.cp_comm_s >= 0.0 && e.tp_comm_s >= 0.0 &&
                            e.pp_comm_s >= 0.0 && e.dp_comm_s >= 0.0 && e.bubble_s >= 0.0);
                assert_true(e.mfu > 0.0 && e.mfu <= 1.0 && e.hfu <= 1.0);
                assert_true(e.memory.total <= last_memory);
                last_memory = e.memory.total;
            }
        }
}

static plan_request *request(const char *model, int64_t gpus, int64_t seq)
{
    static plan_request req;
    memset(&req, 0, sizeof req);
    req.model = model_zoo_find(&zoo, model);
    req.gpu[0] = hwdb_find_gpu(&db, "h100-sxm");
    req.node[0] = hwdb_find_node(&db, req.gpu[0]->node);
    req.ngpu_types = 1;
    req.gpu_counts[0] = gpus;
    req.ncounts = 1;
    req.seq = seq;
    req.gbs_min = 32;
    req.gbs_max = 128;
    req.tokens = 1e12;
    req.objective = OBJECTIVE_TIME;
    req.top = 5;
    req.max_zero = 3;
    req.precision = PREC_COUNT;
    return &req;
}

static void plan_searches_cp_for_long_sequences(void **state)
{
    (void)state;
    static plan_result res;
    char err[256];
    /* 32k tokens and at most 128 sequences a step on 1024 GPUs: DP alone cannot fill them, CP can */
    plan_request *req = request("llama3-70b", 1024, 32768);
    assert_int_equal(plan_search(req, &res, 0, err, sizeof err), 0);
    assert_true(res.ntop >= 1);
    assert_true(layout_cp(&res.top[0].layout) > 1);
    assert_int_equal(res.top[0].layout.gpus, res.top[0].layout.tp * res.top[0].layout.cp * res.top[0].layout.pp *
                                                 res.top[0].layout.dp);
    int64_t with_cp = res.evaluated;
    /* below PLAN_CP_MIN_SEQ the search leaves CP out */
    req = request("llama3-70b", 1024, 4096);
    assert_int_equal(plan_search(req, &res, 0, err, sizeof err), 0);
    for (int i = 0; i < res.ntop; i++) assert_int_equal(layout_cp(&res.top[i].layout), 1);
    assert_true(res.evaluated < with_cp);
    assert_int_equal(res.rejected[REJECT_CP], 0);
    /* a degree the sequence cannot take is rejected for that reason */
    req = request("llama3-70b", 768, 32768);
    req->cp = 3;
    assert_int_equal(plan_search(req, &res, 0, err, sizeof err), 0);
    assert_int_equal(res.ntop, 0);
    assert_true(res.rejected[REJECT_CP] > 0);
}

static void cli_takes_cp_and_emits_it(void **state)
{
    (void)state;
    run_result r = run_sextant("estimate llama3-8b --gpus 16 --tp 8 --cp 2 --seq 16384 --gbs 8");
    assert_int_equal(r.status, 0);
    assert_non_null(strstr(r.out, "TP 8 x CP 2 (ring) x PP 1 x DP 1"));
    assert_non_null(strstr(r.out, "CP communication (exposed)"));
    run_free(&r);
    r = run_sextant("estimate llama3-8b --gpus 16 --tp 8 --cp 2 --seq 16384 --gbs 8 --cp-comm allgather --ops");
    assert_int_equal(r.status, 0);
    assert_non_null(strstr(r.out, "cp_allgather_kv"));
    run_free(&r);
    r = run_sextant("explain llama3-8b --gpus 16 --tp 8 --cp 2 --seq 16384 --gbs 8");
    assert_int_equal(r.status, 0);
    assert_non_null(strstr(r.out, "Ring (Megatron)"));
    assert_non_null(strstr(r.out, "DP over 2 GPUs (d_p x c)"));
    run_free(&r);
    /* refusals: one line naming the flag */
    expect_bad_input("estimate llama3-8b --tp 1 --cp 3 --seq 4096", "--cp 3");
    expect_bad_input("estimate llama3-8b --cp-comm ulysses", "--cp-comm");
    expect_bad_input("estimate llama3-8b --gpus 12 --tp 8 --cp 2", "--cp 2");
    /* the emitters */
    r = run_sextant("plan llama3-8b --gpus 64 --cp 4 --seq 32768 --emit megatron");
    assert_int_equal(r.status, 0);
    assert_non_null(strstr(r.out, "--context-parallel-size 4 --cp-comm-type p2p"));
    run_free(&r);
    r = run_sextant("plan llama3-8b --gpus 64 --cp 4 --seq 32768 --cp-comm allgather --emit torchtitan");
    assert_int_equal(r.status, 0);
    assert_non_null(strstr(r.out, "context_parallel_degree = 4"));
    assert_non_null(strstr(r.out, "context_parallel_rotate_method = \"allgather\""));
    run_free(&r);
    expect_bad_input("plan llama3-8b --gpus 64 --cp 4 --seq 32768 --emit deepspeed", "--cp 4");
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(kv_block_and_ring_exposure_formulas),
        cmocka_unit_test(ring_ops_carry_the_kv_blocks),
        cmocka_unit_test(cp_halves_activations_keeps_flops),
        cmocka_unit_test(ring_exposure_adds_up_from_the_ops),
        cmocka_unit_test(cached_estimate_matches_with_cp),
        cmocka_unit_test(ring_attention_runs_cp_kernels_at_the_local_length),
        cmocka_unit_test(bad_cp_layouts_are_refused),
        cmocka_unit_test(cp_keeps_the_planner_properties),
        cmocka_unit_test(plan_searches_cp_for_long_sequences),
        cmocka_unit_test(cli_takes_cp_and_emits_it),
    };
    return cmocka_run_group_tests_name("cp", tests, setup_shipped, teardown_shipped);
}
