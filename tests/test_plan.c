/* sextant plan: the search against brute force and hand-written
 * expectations, deadlines and budgets, and the emitters field by field. */
#include "test_shipped.h"

#include <cjson/cJSON.h>

static plan_request *request(const char *model, const char *gpu, int64_t gpus, int64_t gbs)
{
    static plan_request req;
    memset(&req, 0, sizeof req);
    req.model = model_zoo_find(&zoo, model);
    req.gpu[0] = hwdb_find_gpu(&db, gpu);
    req.node[0] = hwdb_find_node(&db, req.gpu[0]->node);
    req.ngpu_types = 1;
    req.gpu_counts[0] = gpus;
    req.ncounts = 1;
    req.seq = req.model->seq;
    req.gbs = gbs;
    req.tokens = 1e11;
    req.objective = OBJECTIVE_TIME;
    req.top = 5;
    req.max_zero = 3;
    req.precision = PREC_COUNT;
    return &req;
}

static plan_result *search(const plan_request *req)
{
    static plan_result res;
    char err[256];
    assert_int_equal(plan_search(req, &res, 0, err, sizeof err), 0);
    return &res;
}

/* Every layout of 8 GPUs for GPT-2, costed one by one: the search must find the same best. */
static void winner_matches_brute_force(void **state)
{
    (void)state;
    plan_request *req = request("gpt2", "a100-sxm4-80gb", 8, 64);
    plan_result *res = search(req);
    assert_true(res->ntop >= 1);
    const model_t *m = req->model;
    const hw_gpu *g = req->gpu[0];
    const hw_node *n = req->node[0];
    job_t job = {req->tokens, g->cloud_usd_per_gpu_hour};
    static estimate_t e;
    char err[256];
    double best = 1e300;
    int64_t feasible = 0;
    static layout_t all[20000];
    static double all_time[20000];
    for (int64_t tp = 1; tp <= 8; tp *= 2)
        for (int64_t pp = 1; pp <= 8; pp++) {
            if (8 % (tp * pp)) continue;
            for (int64_t vpp = 1; vpp <= 8; vpp *= 2)
                for (int64_t mbs = 1; mbs <= 16; mbs *= 2)
                    for (int r = 0; r < 3; r += 2)
                        for (int zero = 0; zero <= 3; zero++)
                            for (int sp = 0; sp <= (tp > 1); sp++) {
                                layout_t l = {0};
                                l.gpus = 8; l.tp = tp; l.pp = pp; l.dp = 8 / (tp * pp); l.vpp = vpp; l.mbs = mbs;
                                l.gbs = 64; l.seq = m->seq; l.gpus_per_node = n->gpus_per_node;
                                l.recompute = (recompute_t)r; l.zero = zero; l.sp = sp; l.precision = PREC_BF16;
                                if (vpp > 1 && (pp < 2 || m->layers % (pp * vpp))) continue;
                                if (m->heads % tp || 64 % (mbs * l.dp)) continue;
                                if (estimate_layout(m, g, n, &l, &job, &e, err, sizeof err) != 0 || !e.fits) continue;
                                assert_true(feasible < (int64_t)(sizeof all / sizeof all[0]));
                                all[feasible] = l;
                                all_time[feasible++] = e.time_to_train_s;
                                if (e.time_to_train_s < best) best = e.time_to_train_s;
                            }
        }
    assert_int_equal(res->feasible, feasible);
    assert_close(res->objective_best.time_to_train_s, best, 1e-12);
    /* the tie-break: among the layouts within PLAN_TIE_FRACTION of the best, the fewest and cheapest
     * communication patterns */
    const layout_t *preferred = NULL;
    double window = best * (1.0 + PLAN_TIE_FRACTION);
    for (int64_t i = 0; i < feasible; i++)
        if (all_time[i] <= window && (!preferred || plan_comm_order(&all[i], preferred, NULL, 0) < 0)) preferred = &all[i];
    assert_true(res->top[0].time_to_train_s <= window);
    assert_int_equal(plan_comm_order(&res->top[0].layout, preferred, NULL, 0), 0);
    for (int i = 1; i < res->ntop; i++) {
        int tied = res->top[i].time_to_train_s <= window, before_tied = res->top[i - 1].time_to_train_s <= window;
        assert_true(before_tied || !tied);
        if (tied) assert_true(plan_comm_order(&res->top[i - 1].layout, &res->top[i].layout, NULL, 0) <= 0);
        else if (!before_tied) assert_true(res->top[i].time_to_train_s >= res->top[i - 1].time_to_train_s);
    }
}

static void indivisible_heads_are_rejected(void **state)
{
    (void)state;
    /* GPT-2 has 12 heads: TP 8 divides neither them nor anything else */
    plan_request *req = request("gpt2", "h100-sxm", 8, 64);
    plan_result *res = search(req);
    assert_true(res->rejected[REJECT_INDIVISIBLE] > 0);
    for (int i = 0; i < res->ntop; i++) assert_true(res->top[i].layout.tp != 8);
    /* one GPU: one layout family, TP = PP = DP = 1 */
    req = request("gpt2", "h100-sxm", 1, 16);
    res = search(req);
    assert_true(res->ntop >= 1);
    assert_int_equal(res->top[0].layout.tp, 1);
    assert_int_equal(res->top[0].layout.pp, 1);
    assert_int_equal(res->top[0].layout.dp, 1);
}

static void seventy_b_needs_sharding_on_eight_gpus(void **state)
{
    (void)state;
    /* 70B x 16 B/param = 1.1 TB of model state: 8 x 80 GB only hold it sharded 8 ways */
    plan_request *req = request("llama2-70b", "h100-sxm", 8, 64);
    plan_result *res = search(req);
    assert_true(res->rejected[REJECT_MEMORY] > 0);
    for (int i = 0; i < res->ntop; i++) {
        const layout_t *l = &res->top[i].layout;
        int sharded_ways = (int)(l->tp * l->pp) * (l->zero >= 1 ? (int)l->dp : 1);
        assert_true(sharded_ways >= 8);
        assert_true(res->top[i].memory_total <= res->top[i].memory_capacity);
    }
    /* and TP never leaves the 8-GPU node unless allowed */
    req = request("llama2-70b", "h100-sxm", 64, 512);
    res = search(req);
    assert_true(res->rejected[REJECT_TP_ACROSS_NODES] > 0);
    for (int i = 0; i < res->ntop; i++) assert_true(res->top[i].layout.tp <= 8);
}

static void deadline_and_budget(void **state)
{
    (void)state;
    plan_request *req = request("llama2-13b", "h100-sxm", 8, 0);
    req->ncounts = 0;
    for (int64_t n = 8; n <= 1024; n *= 2) req->gpu_counts[req->ncounts++] = n;
    req->gbs_min = 256;
    req->gbs_max = 1024;
    req->tokens = 1e12;
    req->max_days = 20;
    req->objective = OBJECTIVE_COST;
    plan_result *res = search(req);
    assert_true(res->ntop >= 1);
    assert_true(res->rejected[REJECT_DEADLINE] > 0);
    for (int i = 0; i < res->ntop; i++) {
        assert_true(res->top[i].time_to_train_s <= 20 * 86400.0);
        /* by cost, except where the tie-break reorders the layouts tied with the cheapest */
        if (i && res->top[i - 1].cost_usd > res->objective_best.cost_usd * (1.0 + PLAN_TIE_FRACTION))
            assert_true(res->top[i].cost_usd >= res->top[i - 1].cost_usd);
        assert_true(res->top[i].cost_usd >= res->objective_best.cost_usd * (1 - 1e-12));
    }
    /* the frontier is a Pareto set: no point both faster and cheaper than another (with near-perfect
     * DP scaling one GPU count can dominate all others, so one point is a valid frontier) */
    assert_true(res->nfrontier >= 1);
    for (int i = 0; i < res->nfrontier; i++)
        for (int j = 0; j < res->nfrontier; j++)
            if (i != j)
                assert_false(res->frontier[j].time_to_train_s < res->frontier[i].time_to_train_s &&
                             res->frontier[j].cost_usd < res->frontier[i].cost_usd);
    double budget = res->top[0].cost_usd * 1.2;
    req->max_days = 0;
    req->max_budget = budget;
    req->objective = OBJECTIVE_TIME;
    res = search(req);
    assert_true(res->rejected[REJECT_BUDGET] > 0);
    for (int i = 0; i < res->ntop; i++) assert_true(res->top[i].cost_usd <= budget);
}

static void strict_rejects_above_ratio_limit(void **state)
{
    (void)state;
    /* an RTX 4090 box: t_max = 2.4 for h = 4096, so TP 4 and 8 go under --strict */
    plan_request *req = request("llama2-7b", "rtx4090", 8, 64);
    req->strict = 1;
    plan_result *res = search(req);
    assert_true(res->rejected[REJECT_TP_RATIO] > 0);
    for (int i = 0; i < res->ntop; i++) assert_true(res->top[i].layout.tp <= 2);
}

/* estimate_layout_cached (the search's fast path) against estimate_layout,
 * field by field: every number of the estimate within 1e-9 relative (in
 * practice they are equal to the bit: the same functions sum the same ops in
 * the same order). */
static void assert_same_estimate(const estimate_t *fast, const estimate_t *full)
{
#define SAME(field) assert_close(fast->field, full->field, 1e-9)
    SAME(step_s); SAME(compute_s); SAME(tp_comm_s); SAME(pp_comm_s); SAME(dp_comm_s); SAME(bubble_s);
    SAME(optimizer_s); SAME(microbatch_s); SAME(slowest_stage); SAME(microbatches); SAME(layout.gbs);
    SAME(memory.weights); SAME(memory.gradients); SAME(memory.optimizer); SAME(memory.activations);
    SAME(memory.logits); SAME(memory.other); SAME(memory.total); SAME(memory.capacity); SAME(memory.params);
    SAME(memory.inflight_microbatches); SAME(memory.stage); SAME(fits);
    SAME(model_flops_per_step); SAME(hardware_flops_per_step); SAME(six_nd_per_step);
    SAME(attention_flops_per_step); SAME(logits_flops_per_step); SAME(params_total); SAME(params_active);
    SAME(model_flops_full_attention_per_step); SAME(hardware_flops_full_attention_per_step);
    SAME(mfu); SAME(hfu); SAME(tokens_per_s); SAME(tokens_per_s_per_gpu); SAME(tflops_per_gpu);
    SAME(steps); SAME(time_to_train_s); SAME(gpu_hours); SAME(cost_usd);
    SAME(tp_ratio); SAME(tp_ratio_limit); SAME(tp_link_bytes_per_s); SAME(bubble_fraction);
#undef SAME
}

static void fast_path_matches_estimate(void **state)
{
    (void)state;
    /* a calibrated GPU too: the GEMM efficiency curve, launch floor and measured links */
    hw_gpu calibrated = *hwdb_find_gpu(&db, "h100-sxm");
    calibrated.gemm_half_flops = 9.8e9;
    calibrated.launch_overhead_s = 4e-6;
    calibrated.measured_intra_bytes_per_s = 360e9;
    calibrated.measured_inter_bytes_per_s = 40e9;
    calibrated.membound_overhead_s = 2.5e-6;
    /* a GEMM table on two of llama3-8b's lines (4096 hidden, 14336 MLP) */
    calibrated.gemm_times = 0;
    const hw_gemm_time rows[] = {{4096, 14336, 4096, 0, 1.1e-3}, {8192, 14336, 4096, 0, 2.1e-3}, {4096, 4096, 2048, 0, 0.1e-3},
                                 {4096, 4096, 8192, 0, 0.35e-3}};
    for (size_t i = 0; i < sizeof rows / sizeof rows[0]; i++) calibrated.gemm_time[calibrated.gemm_times++] = rows[i];
    const struct { const char *model, *gpu; } pairs[] = {
        {"llama2-70b", "h100-sxm"}, {"megatron-1t", "b200"}, {"mixtral-8x7b", "a100-sxm4-80gb"},
        {"bert-large", "rtx4090"}, {"gpt2", "v100-sxm2-16gb"}, {"llama3-8b", NULL},
    };
    const int64_t counts[] = {8, 48, 1024};
    const precision_t precisions[] = {PREC_BF16, PREC_FP8, PREC_FP16, PREC_FP32};
    static estimate_t fast, full, pruned;
    estimate_cache *cache = estimate_cache_new(), *memory_first = estimate_cache_new();
    assert_non_null(cache);
    assert_non_null(memory_first);
    char err[256], err_full[256];
    int compared = 0, unfit = 0, errors = 0, multi_stage = 0;
    for (int round = 0; round < 2; round++) {   /* the same layouts again: now every part is cached */
        uint64_t pick = 88172645463325252u;   /* xorshift: a fixed sample of a large space */
        for (size_t pi = 0; pi < sizeof pairs / sizeof pairs[0]; pi++) {
            const model_t *m = model_zoo_find(&zoo, pairs[pi].model);
            const hw_gpu *g = pairs[pi].gpu ? hwdb_find_gpu(&db, pairs[pi].gpu) : &calibrated;
            const hw_node *n = hwdb_find_node(&db, g->node);
            assert_non_null(m);
            assert_non_null(g);
            job_t job = {1e12, 2.5};
            for (int sample = 0; sample < 400; sample++) {
                pick ^= pick << 13; pick ^= pick >> 7; pick ^= pick << 17;
                uint64_t r = pick;
                layout_t l = {0};
                l.gpus = counts[r % 3]; r /= 3;
                l.tp = (int64_t)1 << (r % 5); r /= 5;
                const int64_t pps[] = {1, 2, 3, 4, 8};
                l.pp = pps[r % 5]; r /= 5;
                if (l.gpus % (l.tp * l.pp)) l.pp = 1;
                if (l.gpus % l.tp) l.tp = 1;
                l.dp = l.gpus / (l.tp * l.pp);
                l.vpp = l.pp > 1 && r % 2 ? 2 : 1; r /= 2;
                l.mbs = (int64_t)1 << (r % 3); r /= 3;
                /* interleaving needs micro-batches in multiples of PP (else refused) */
                l.gbs = l.mbs * l.dp * (int64_t)(1 + r % 16) * (l.vpp > 1 ? l.pp : 1); r /= 16;
                if (r % 7 == 0) l.gbs += 1;   /* not a multiple of mbs x dp: estimated with fewer */
                r /= 7;
                l.seq = r % 2 ? m->seq : 1024; r /= 2;
                l.gpus_per_node = r % 4 ? n->gpus_per_node : 4; r /= 4;
                l.recompute = (recompute_t)(r % 3); r /= 3;
                l.attention = r % 3 ? ATTENTION_FLASH : ATTENTION_UNFUSED; r /= 3;
                l.sp = (int)(r % 2); r /= 2;
                l.zero = (int)(r % 4); r /= 4;
                l.fp32_grads = (int)(r % 2); r /= 2;
                l.precision = precisions[r % 4];
                if (g->peak_flops[l.precision] <= 0) l.precision = PREC_FP16;
                /* DeepSpeed's BF16 optimizer where it runs (ZeRO 0/1, 16 bit): its pass is part of the stage's body */
                if (l.zero <= 1 && (l.precision == PREC_BF16 || l.precision == PREC_FP16) && (pick >> 40) % 2)
                    l.grad_accum = GRAD_ACCUM_FP32_COPY;
                /* the head's loss kinds and metrics on the logits, which share the body's cache key word */
                l.loss = (loss_kernel_t)((pick >> 44) % 3);
                l.logit_metrics = (int64_t)((pick >> 46) % 3);
                /* a mixture of experts: SP under TP (Megatron's rule), and EP 1 to 8 where the experts and DP take it */
                if (model_is_moe(m)) {
                    if (l.tp > 1) l.sp = 1;
                    l.ep = (int64_t)1 << ((pick >> 58) % 4);
                    if (m->experts % l.ep || l.dp % l.ep) l.ep = 1;
                }
                int rc_full = estimate_layout(m, g, n, &l, &job, &full, err_full, sizeof err_full);
                int rc_fast = estimate_layout_cached(cache, m, g, n, &l, &job, 0, &fast, err, sizeof err);
                int rc_pruned = estimate_layout_cached(memory_first, m, g, n, &l, &job, 1, &pruned, err, sizeof err);
                assert_int_equal(rc_fast, rc_full);
                assert_int_equal(rc_pruned, rc_full);
                if (rc_full != 0) {
                    errors++;
                    continue;
                }
                assert_same_estimate(&fast, &full);
                assert_int_equal(pruned.fits, full.fits);
                assert_close(pruned.memory.total, full.memory.total, 1e-9);
                if (full.fits) assert_same_estimate(&pruned, &full);
                else {
                    unfit++;
                    assert_true(pruned.step_s == 0.0);   /* not costed */
                }
                if (l.pp > 1) multi_stage++;
                compared++;
            }
        }
    }
    estimate_cache_free(cache);
    estimate_cache_free(memory_first);
    /* the sample covers fitting and unfit layouts, one and several stages, and bad ones */
    assert_true(compared > 4000);
    assert_true(unfit > 100 && unfit < compared - 100);
    assert_true(multi_stage > 500);
    assert_true(errors > 0);
}

/* The search with its cache against the same search costing every layout from scratch. */
static void search_matches_uncached_search(void **state)
{
    (void)state;
    static plan_result uncached;
    const char *gpus[] = {"h100-sxm", "a100-sxm4-40gb", "rtx4090"};
    for (int objective = 0; objective < 2; objective++) {
        plan_request *req = request("llama2-13b", "h100-sxm", 8, 0);
        for (int i = 0; i < 3; i++) {
            req->gpu[i] = hwdb_find_gpu(&db, gpus[i]);
            req->node[i] = hwdb_find_node(&db, req->gpu[i]->node);
        }
        req->ngpu_types = 3;
        req->ncounts = 0;
        for (int64_t n = 8; n <= 512; n *= 2) req->gpu_counts[req->ncounts++] = n;
        req->gbs_min = 256;
        req->gbs_max = 1024;
        req->top = 20;
        req->strict = objective;
        req->objective = objective ? OBJECTIVE_COST : OBJECTIVE_TIME;
        req->max_days = objective ? 60 : 0;
        req->uncached = 1;
        char err[256];
        assert_int_equal(plan_search(req, &uncached, 0, err, sizeof err), 0);
        req->uncached = 0;
        plan_result *res = search(req);
        assert_int_equal(res->evaluated, uncached.evaluated);
        assert_int_equal(res->feasible, uncached.feasible);
        for (int r = 0; r < REJECT_COUNT; r++) assert_int_equal(res->rejected[r], uncached.rejected[r]);
        assert_int_equal(res->ntop, uncached.ntop);
        assert_int_equal(res->nfrontier, uncached.nfrontier);
        for (int i = 0; i < res->ntop; i++) {
            assert_memory_equal(&res->top[i].layout, &uncached.top[i].layout, sizeof(layout_t));
            assert_int_equal(res->top[i].gpu_type, uncached.top[i].gpu_type);
            assert_close(res->top[i].step_s, uncached.top[i].step_s, 1e-9);
            assert_close(res->top[i].cost_usd, uncached.top[i].cost_usd, 1e-9);
            assert_close(res->top[i].memory_total, uncached.top[i].memory_total, 1e-9);
        }
        for (int i = 0; i < res->nfrontier; i++)
            assert_close(res->frontier[i].time_to_train_s, uncached.frontier[i].time_to_train_s, 1e-9);
    }
}

static char *emitted(plan_request *req, const plan_candidate *c, const char *framework)
{
    char *text = NULL, err[256];
    size_t len = 0;
    FILE *f = open_memstream(&text, &len);
    assert_int_equal(emit_plan(f, req, c, NULL, framework, err, sizeof err), 0);
    fclose(f);
    return text;
}

static void emitters_field_by_field(void **state)
{
    (void)state;
    plan_request *req = request("llama2-70b", "h100-sxm", 64, 512);
    plan_candidate c = {0};
    c.gpu_type = 0;
    c.layout = (layout_t){.gpus = 64, .tp = 8, .pp = 4, .dp = 2, .vpp = 2, .mbs = 2, .gbs = 512, .seq = 4096,
                          .gpus_per_node = 8, .recompute = RECOMPUTE_SELECTIVE, .sp = 1, .zero = 1, .precision = PREC_BF16};
    char *meg = emitted(req, &c, "megatron");
    const char *flags[] = {"--nnodes 8 --nproc-per-node 8", "--num-layers 80 ", "--hidden-size 8192 ",
                           "--num-attention-heads 64 ", "--ffn-hidden-size 28672", "--group-query-attention --num-query-groups 8",
                           "--swiglu", "--normalization RMSNorm", "--position-embedding-type rope",
                           "--untie-embeddings-and-output-weights", "--tensor-model-parallel-size 8 ",
                           "--pipeline-model-parallel-size 4 ", "--num-layers-per-virtual-pipeline-stage 10 ",
                           "--sequence-parallel", "--use-distributed-optimizer", "--recompute-granularity selective",
                           "--micro-batch-size 2 ", "--global-batch-size 512 ", "--seq-length 4096 ", "--bf16"};
    for (size_t i = 0; i < sizeof flags / sizeof flags[0]; i++)
        if (!strstr(meg, flags[i])) {
            print_error("megatron flags lack '%s':\n%s\n", flags[i], meg);
            fail();
        }
    free(meg);

    c.layout.vpp = 1;  /* DeepSpeed's pipeline has no interleaving */
    char *ds = emitted(req, &c, "deepspeed");
    cJSON *root = cJSON_Parse(ds);
    assert_non_null(root);
    assert_int_equal(cJSON_GetObjectItem(root, "train_batch_size")->valueint, 512);
    assert_int_equal(cJSON_GetObjectItem(root, "train_micro_batch_size_per_gpu")->valueint, 2);
    assert_int_equal(cJSON_GetObjectItem(root, "gradient_accumulation_steps")->valueint, 512 / (2 * 2));
    assert_int_equal(cJSON_GetObjectItem(cJSON_GetObjectItem(root, "zero_optimization"), "stage")->valueint, 1);
    assert_true(cJSON_IsTrue(cJSON_GetObjectItem(cJSON_GetObjectItem(root, "bf16"), "enabled")));
    assert_int_equal(cJSON_GetObjectItem(cJSON_GetObjectItem(root, "pipeline"), "stages")->valueint, 4);
    cJSON_Delete(root);
    free(ds);

    c.layout.vpp = 2;
    c.layout.zero = 3;  /* torchtitan's FSDP */
    char *tt = emitted(req, &c, "torchtitan");
    const char *toml[] = {"[parallelism]", "tensor_parallel_degree = 8\n", "pipeline_parallel_degree = 4\n",
                          "data_parallel_replicate_degree = 1\n", "data_parallel_shard_degree = 2\n",
                          "fsdp_reshard_after_forward = \"always\"", "pipeline_parallel_schedule = \"Interleaved1F1B\"",
                          "local_batch_size = 2\n", "global_batch_size = 512\n", "seq_len = 4096\n",
                          "[activation_checkpoint]\nmode = \"selective\""};
    for (size_t i = 0; i < sizeof toml / sizeof toml[0]; i++)
        if (!strstr(tt, toml[i])) {
            print_error("torchtitan config lacks '%s':\n%s\n", toml[i], tt);
            fail();
        }
    free(tt);

    /* what a framework cannot run is refused, naming why */
    char err[256];
    FILE *sink = fopen("/dev/null", "w");
    assert_int_equal(emit_plan(sink, req, &c, NULL, "megatron", err, sizeof err), -1);
    assert_non_null(strstr(err, "ZeRO-3"));
    assert_int_equal(emit_plan(sink, req, &c, NULL, "deepspeed", err, sizeof err), -1);
    assert_non_null(strstr(err, "ZeRO 0 or 1"));
    c.layout.zero = 1;
    assert_int_equal(emit_plan(sink, req, &c, NULL, "torchtitan", err, sizeof err), -1);
    assert_non_null(strstr(err, "no ZeRO-1"));
    c.layout.zero = 0;
    c.layout.sp = 0;
    assert_int_equal(emit_plan(sink, req, &c, NULL, "torchtitan", err, sizeof err), -1);
    assert_non_null(strstr(err, "(SP)"));
    assert_int_equal(emit_plan(sink, req, &c, NULL, "jax", err, sizeof err), -1);
    fclose(sink);
}

/* Interleaved layouts whose micro-batches per step are not a multiple of PP are skipped with their
 * own reason, never ranked; those that are stay in the search. */
static void interleaving_needs_microbatches_in_multiples_of_pp(void **state)
{
    (void)state;
    plan_request *req = request("gpt2", "h100-sxm", 8, 16);
    req->top = PLAN_TOP_MAX;
    plan_result *res = search(req);
    assert_true(res->rejected[REJECT_INTERLEAVING] > 0);
    for (int i = 0; i < res->ntop; i++) {
        const layout_t *l = &res->top[i].layout;
        assert_true(l->vpp == 1 || (l->gbs / (l->mbs * l->dp)) % l->pp == 0);
    }
    /* PP 2 x VPP 2 with DP 4 and mbs 2: 2 micro-batches, a multiple of 2, is searched and ranked */
    req->top = 1;
    req->gpu_counts[0] = 8;
    plan_result *all = search(req);
    assert_true(all->feasible > 0);
    static estimate_t e;
    char err[256];
    layout_t l = {.gpus = 8, .tp = 1, .pp = 2, .dp = 4, .vpp = 2, .mbs = 2, .gbs = 16, .seq = 1024,
                  .gpus_per_node = 8, .precision = PREC_BF16};
    job_t job = {1e11, 2.0};
    assert_int_equal(estimate_layout(req->model, req->gpu[0], req->node[0], &l, &job, &e, err, sizeof err), 0);
    l.mbs = 4;   /* one micro-batch per step: refused by the estimate, skipped by the search */
    assert_int_equal(estimate_layout(req->model, req->gpu[0], req->node[0], &l, &job, &e, err, sizeof err), -1);
    assert_non_null(strstr(err, "multiple of --pp 2"));
}

/* Each framework's search keeps only what it can run; Megatron's is the search held to ZeRO 1
 * (max_zero), and the emitted line names the overall winner when it differs. */
static void framework_limits_the_search(void **state)
{
    (void)state;
    static plan_result overall, limited, zero1;
    char err[256];
    const char *frameworks[] = {"megatron", "deepspeed", "torchtitan"};
    plan_request *req = request("llama2-70b", "h100-sxm", 256, 0);
    req->gbs_min = 256;
    req->gbs_max = 1024;
    req->top = 10;
    assert_int_equal(plan_search(req, &overall, 0, err, sizeof err), 0);
    assert_int_equal(overall.rejected[REJECT_FRAMEWORK], 0);
    int differs = 0;
    for (int f = 0; f < 3; f++) {
        req->framework = frameworks[f];
        assert_int_equal(plan_search(req, &limited, 0, err, sizeof err), 0);
        req->framework = NULL;
        assert_true(limited.ntop > 0);
        assert_true(limited.rejected[REJECT_FRAMEWORK] > 0);
        assert_int_equal(limited.evaluated, overall.evaluated);
        for (int i = 0; i < limited.ntop; i++) assert_null(framework_refusal(frameworks[f], &limited.top[i].layout));
        assert_true(limited.objective_best.time_to_train_s >= overall.objective_best.time_to_train_s * (1 - 1e-12));
        if (!strcmp(frameworks[f], "megatron")) {
            req->max_zero = 1;
            assert_int_equal(plan_search(req, &zero1, 0, err, sizeof err), 0);
            req->max_zero = 3;
            assert_memory_equal(&zero1.top[0].layout, &limited.top[0].layout, sizeof(layout_t));
        }
        char *text = NULL;
        size_t len = 0;
        FILE *out = open_memstream(&text, &len);
        assert_int_equal(emit_plan(out, req, &limited.top[0], &overall.top[0], frameworks[f], err, sizeof err), 0);
        fclose(out);
        const char *why = framework_refusal(frameworks[f], &overall.top[0].layout);
        if (why) {
            differs++;
            assert_non_null(strstr(text, "not the overall winner: "));
            assert_non_null(strstr(text, why));
        }
        /* the winner itself, emitted against itself, carries no such line */
        free(text);
        text = NULL;
        out = open_memstream(&text, &len);
        assert_int_equal(emit_plan(out, req, &limited.top[0], &limited.top[0], frameworks[f], err, sizeof err), 0);
        fclose(out);
        assert_null(strstr(text, "not the overall winner"));
        free(text);
    }
    assert_true(differs > 0);
}

/* Layouts within PLAN_TIE_FRACTION of the best go to the fewer and cheaper communication
 * patterns, whether or not the preferred one was among the top by the objective alone. */
static void ties_go_to_cheaper_communication(void **state)
{
    (void)state;
    layout_t a = {.tp = 2, .pp = 1, .vpp = 1, .zero = 1}, b = a;
    char why[96];
    assert_int_equal(plan_comm_order(&a, &b, why, sizeof why), 0);
    b.zero = 3;
    assert_true(plan_comm_order(&a, &b, why, sizeof why) < 0);
    assert_string_equal(why, "ZeRO 1 against 3");
    b.zero = 1;
    b.sp = 1;
    assert_true(plan_comm_order(&b, &a, why, sizeof why) > 0);
    assert_string_equal(why, "SP on against off");
    b.pp = 2;
    b.zero = 0;
    assert_true(plan_comm_order(&b, &a, NULL, 0) < 0);  /* ZeRO comes before PP in the order */

    static plan_result wide, narrow;
    char err[256];
    const char *models[] = {"llama2-70b", "llama3-8b", "gpt3-175b", "llama3-70b", "llama2-13b", "mistral-7b"};
    int broken = 0;
    for (int i = 0; i < 6; i++) {
        plan_request *req = request(models[i], "h100-sxm", 512, 0);
        req->gbs_min = 256;
        req->gbs_max = 1024;
        req->top = 20;
        assert_int_equal(plan_search(req, &wide, 0, err, sizeof err), 0);
        req->top = 1;
        assert_int_equal(plan_search(req, &narrow, 0, err, sizeof err), 0);
        if (wide.ntop == 0) continue;
        assert_memory_equal(&wide.top[0].layout, &narrow.top[0].layout, sizeof(layout_t));
        const plan_candidate *w = &wide.top[0], *best = &wide.objective_best;
        assert_true(w->time_to_train_s <= best->time_to_train_s * (1.0 + PLAN_TIE_FRACTION));
        for (int k = 0; k < wide.ntop; k++)
            assert_true(wide.top[k].time_to_train_s >= best->time_to_train_s * (1 - 1e-12));
        if (wide.tie_broken) {
            broken++;
            assert_true(plan_comm_order(&w->layout, &best->layout, NULL, 0) < 0);
        } else {
            assert_memory_equal(&w->layout, &best->layout, sizeof(layout_t));
        }
    }
    assert_true(broken > 0);

    /* by cost, perfect data parallelism makes many GPU counts tie: the tie-break stays on the best's
     * GPU type and count, and never trades days for simpler communication */
    plan_request *req = request("llama2-13b", "h800", 128, 1024);
    req->ncounts = 0;
    for (int64_t n = 128; n <= 1024; n *= 2) req->gpu_counts[req->ncounts++] = n;
    req->objective = OBJECTIVE_COST;
    req->tokens = 1e12;
    req->top = 10;
    assert_int_equal(plan_search(req, &wide, 0, err, sizeof err), 0);
    assert_true(wide.ntop > 0);
    assert_int_equal(wide.top[0].layout.gpus, wide.objective_best.layout.gpus);
    assert_int_equal(wide.top[0].gpu_type, wide.objective_best.gpu_type);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(winner_matches_brute_force),
        cmocka_unit_test(indivisible_heads_are_rejected),
        cmocka_unit_test(seventy_b_needs_sharding_on_eight_gpus),
        cmocka_unit_test(deadline_and_budget),
        cmocka_unit_test(strict_rejects_above_ratio_limit),
        cmocka_unit_test(emitters_field_by_field),
        cmocka_unit_test(framework_limits_the_search),
        cmocka_unit_test(ties_go_to_cheaper_communication),
        cmocka_unit_test(fast_path_matches_estimate),
        cmocka_unit_test(search_matches_uncached_search),
        cmocka_unit_test(interleaving_needs_microbatches_in_multiples_of_pp),
    };
    return cmocka_run_group_tests_name("plan", tests, setup_shipped, teardown_shipped);
}
