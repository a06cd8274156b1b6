/* The estimate: memory sharding, step-time bookkeeping, FLOP conventions,
 * cost, and every warning a reviewer would raise. */
#include "test_util.h"

#include "planner.h"

static hwdb db;
static model_zoo zoo;

static int setup(void **state)
{
    (void)state;
    char err[512];
    if (hwdb_load(SEXTANT_ROOT "/hwdb", &db, err, sizeof err) != 0 ||
        model_zoo_load(SEXTANT_ROOT "/models/zoo.csv", &zoo, err, sizeof err) != 0) {
        fprintf(stderr, "%s\n", err);
        return -1;
    }
    return 0;
}

static int teardown(void **state)
{
    (void)state;
    hwdb_free(&db);
    model_zoo_free(&zoo);
    return 0;
}

static layout_t layout(int64_t gpus, int64_t tp, int64_t pp, int64_t mbs, int64_t gbs, int64_t seq)
{
    layout_t l;
    memset(&l, 0, sizeof l);
    l.gpus = gpus;
    l.tp = tp;
    l.pp = pp;
    l.dp = gpus / (tp * pp);
    l.vpp = 1;
    l.mbs = mbs;
    l.gbs = gbs;
    l.seq = seq;
    l.gpus_per_node = 8;
    l.recompute = RECOMPUTE_SELECTIVE;
    l.precision = PREC_BF16;
    return l;
}

static estimate_t *run_on(const char *model, const hw_gpu *g, layout_t l)
{
    static estimate_t e;
    const model_t *m = model_zoo_find(&zoo, model);
    assert_non_null(m);
    const hw_node *n = hwdb_find_node(&db, g->node);
    l.gpus_per_node = n->gpus_per_node;
    job_t job = {2e12, g->cloud_usd_per_gpu_hour};
    char err[512];
    if (estimate_layout(m, g, n, &l, &job, &e, err, sizeof err) != 0) {
        print_error("%s\n", err);
        fail();
    }
    return &e;
}

/* a model that is not (or not as) in the zoo, into `e` */
static const estimate_t *run_model(const model_t *m, const hw_gpu *g, layout_t l, estimate_t *e)
{
    const hw_node *n = hwdb_find_node(&db, g->node);
    l.gpus_per_node = n->gpus_per_node;
    job_t job = {2e12, g->cloud_usd_per_gpu_hour};
    char err[512];
    if (estimate_layout(m, g, n, &l, &job, e, err, sizeof err) != 0) {
        print_error("%s\n", err);
        fail();
    }
    return e;
}

static estimate_t *run(const char *model, const char *gpu, layout_t l)
{
    const hw_gpu *g = hwdb_find_gpu(&db, gpu);
    assert_non_null(g);
    return run_on(model, g, l);
}

static int has_warning(const estimate_t *e, const char *text)
{
    for (int i = 0; i < e->nwarnings; i++)
        if (strstr(e->warnings[i], text)) return 1;
    return 0;
}

static void issue_example_is_plausible(void **state)
{
    (void)state;
    layout_t l = layout(1024, 8, 4, 1, 1024, 4096);
    l.sp = 1;
    l.zero = 1;
    estimate_t *e = run("llama2-70b", "h100-sxm", l);
    assert_true(e->fits);
    assert_int_equal(e->microbatches, 32);
    /* published LLaMA-2-70B-scale runs on H100 land between 35% and 60% MFU */
    assert_true(e->mfu > 0.30 && e->mfu < 0.70);
    assert_true(e->hfu >= e->mfu);
    /* the parts add up, and the throughput follows from the step */
    assert_close(e->step_s, e->compute_s + e->tp_comm_s + e->pp_comm_s + e->dp_comm_s + e->bubble_s + e->optimizer_s, 1e-12);
    assert_close(e->tokens_per_s, 1024.0 * 4096 / e->step_s, 1e-12);
    assert_close(e->time_to_train_s, 2e12 / (1024.0 * 4096) * e->step_s, 1e-12);
    assert_close(e->cost_usd, e->gpu_hours * e->job.price_usd_per_gpu_hour, 1e-12);
    assert_close(e->gpu_hours, 1024 * e->time_to_train_s / 3600, 1e-12);
    /* 1F1B bubble: the slowest stage runs m micro-batches, each other stage adds one (the
     * middle two hold the first's layers); at most (p-1) of the slowest's, at least (p-1) of the fastest's */
    double first = e->stage_microbatch_s[0], last = e->stage_microbatch_s[1];
    assert_close(e->bubble_s, 3 * first + last - e->microbatch_s, 1e-12);
    assert_true(e->bubble_s <= 3 * e->microbatch_s * (1 + 1e-12));
    assert_true(e->bubble_s >= 3 * (first < last ? first : last) * (1 - 1e-12));
    /* ZeRO-1 shards the 12 optimizer bytes of each parameter over DP = 32 */
    assert_close(e->memory.optimizer, e->memory.params * 12 / 32, 1e-12);
    assert_close(e->memory.weights, e->memory.params * 2, 1e-12);
    assert_close(e->memory.gradients, e->memory.params * 2, 1e-12);
    assert_close(e->tp_ratio_limit, 6.0 * 8192 / (2 * 989.4e12 / 450e9), 0.01);
    assert_int_equal(e->nwarnings, 0);
}

static void zero_stages_shard_in_order(void **state)
{
    (void)state;
    double total[4], weights[4], grads[4], opt[4];
    for (int z = 0; z < 4; z++) {
        layout_t l = layout(64, 8, 1, 1, 64, 4096);
        l.zero = z;
        estimate_t *e = run("llama2-13b", "h100-sxm", l);
        total[z] = e->memory.total;
        weights[z] = e->memory.weights;
        grads[z] = e->memory.gradients;
        opt[z] = e->memory.optimizer;
    }
    assert_close(opt[1], opt[0] / 8, 1e-12);
    assert_close(grads[2], grads[1] / 8, 1e-12);
    assert_close(weights[3], weights[2] / 8, 1e-12);
    assert_true(total[0] > total[1] && total[1] > total[2] && total[2] > total[3]);
}

static void fp32_gradients_cost_two_more_bytes(void **state)
{
    (void)state;
    layout_t l = layout(8, 8, 1, 1, 8, 2048);
    estimate_t *e = run("llama2-7b", "a100-sxm4-80gb", l);
    double p = e->memory.params, sixteen = e->memory.weights + e->memory.gradients + e->memory.optimizer;
    l.fp32_grads = 1;
    e = run("llama2-7b", "a100-sxm4-80gb", l);
    assert_close(sixteen, 16 * p, 1e-12);
    assert_close(e->memory.weights + e->memory.gradients + e->memory.optimizer, 18 * p, 1e-12);
}

static void recomputation_trades_memory_for_flops(void **state)
{
    (void)state;
    layout_t l = layout(8, 8, 1, 1, 64, 4096);
    l.attention = ATTENTION_UNFUSED;
    l.recompute = RECOMPUTE_NONE;
    estimate_t *e = run("gpt3-175b", "h100-sxm", l);
    double act_none = e->memory.activations, step_none = e->compute_s, hw_none = e->hardware_flops_per_step;
    assert_close(hw_none, e->model_flops_per_step, 1e-12);
    l.recompute = RECOMPUTE_SELECTIVE;
    e = run("gpt3-175b", "h100-sxm", l);
    double act_sel = e->memory.activations;
    l.recompute = RECOMPUTE_FULL;
    e = run("gpt3-175b", "h100-sxm", l);
    assert_true(act_none > act_sel);
    assert_true(act_sel > e->memory.activations);
    assert_true(e->compute_s > step_none);
    assert_true(e->hardware_flops_per_step > e->model_flops_per_step * 1.25);
    assert_true(e->hfu > e->mfu);
}

static void gpt3_flops_match_narayanan(void **state)
{
    (void)state;
    layout_t l = layout(1536, 8, 16, 1, 1536, 2048);
    estimate_t *e = run("gpt3-175b", "a100-sxm4-80gb", l);
    const model_t *m = e->model;
    /* GPT-3 has learned positions (no FLOPs) and a tied head: exactly eq. (3) */
    assert_close(e->model_flops_per_step,
                 narayanan_model_flops(1536, 2048, (double)m->layers, (double)m->hidden, (double)m->vocab), 1e-9);
    assert_close(e->six_nd_per_step, 6 * e->params_active * 1536 * 2048, 1e-12);
}

static void does_not_fit_is_reported_not_refused(void **state)
{
    (void)state;
    layout_t l = layout(8, 1, 1, 1, 8, 4096);
    estimate_t *e = run("llama2-70b", "h100-sxm", l);
    assert_false(e->fits);
    assert_true(has_warning(e, "does not fit"));
}

static void tp_across_node_and_ratio_limit(void **state)
{
    (void)state;
    layout_t l = layout(32, 16, 1, 1, 32, 4096);
    estimate_t *e = run("llama2-70b", "h100-sxm", l);
    assert_true(has_warning(e, "leaves the node"));
    assert_true(has_warning(e, "ratio limit"));
    /* SPEC 4 with hwdb's 165 TFLOP/s (fp32 accumulate) for the RTX 4090: t_max = 6 x 4096 / (2 x 165.2e12 / 32e9) = 2.4 */
    l = layout(8, 4, 1, 1, 16, 2048);
    e = run("llama2-7b", "rtx4090", l);
    assert_close(e->tp_ratio_limit, 2.38, 0.01);
    assert_true(has_warning(e, "ratio limit"));
    l = layout(8, 1, 1, 1, 16, 2048);
    e = run("llama2-7b", "h100-sxm", l);
    assert_false(has_warning(e, "ratio limit"));
}

static void bubble_and_divisibility_warnings(void **state)
{
    (void)state;
    layout_t l = layout(8, 1, 8, 1, 4, 4096);
    estimate_t *e = run("llama2-7b", "h100-sxm", l);
    assert_true(has_warning(e, "bubble"));
    /* of the pipeline's own time (the step also holds the optimizer), 1F1B idles (p-1)/(m+p-1)
     * with equal stages; here the last stage's head makes it the slowest, and the fill and drain
     * are the first stage's (the six middle stages hold its layers) */
    double pipeline = e->compute_s + e->tp_comm_s + e->pp_comm_s + e->bubble_s;
    double first = e->stage_microbatch_s[0], last = e->stage_microbatch_s[1];
    assert_true(last > first);
    assert_close(e->bubble_s, 7 * first, 1e-9);
    assert_true(e->bubble_s / pipeline <= pipeline_bubble_fraction(8, 4, 1) + 1e-12);
    l.vpp = 2;
    e = run("llama2-7b", "h100-sxm", l);
    /* interleaving divides the fill and drain by the chunks per GPU */
    assert_close(e->bubble_s, 7 * e->stage_microbatch_s[0] / 2, 1e-9);
    l = layout(16, 1, 1, 1, 20, 4096);
    e = run("llama2-7b", "h100-sxm", l);
    assert_true(has_warning(e, "not divisible by mbs x dp"));
    assert_int_equal(e->layout.gbs, 16);
    l = layout(24, 3, 1, 1, 24, 4096);
    e = run("llama2-7b", "h100-sxm", l);
    assert_true(has_warning(e, "heads are not divisible"));
    l = layout(24, 1, 3, 1, 24, 4096);
    e = run("llama2-7b", "h100-sxm", l);
    assert_true(has_warning(e, "not divisible by PP"));
}

static void impossible_layouts_are_refused(void **state)
{
    (void)state;
    const model_t *m = model_zoo_find(&zoo, "llama2-7b");
    const hw_gpu *g = hwdb_find_gpu(&db, "h100-sxm");
    const hw_node *n = hwdb_find_node(&db, g->node);
    job_t job = {1e12, 2};
    char err[512];
    static estimate_t e;
    layout_t l = layout(8, 4, 4, 1, 8, 4096);
    l.dp = 1;
    assert_int_equal(estimate_layout(m, g, n, &l, &job, &e, err, sizeof err), -1);
    assert_non_null(strstr(err, "--gpus"));
    l = layout(64, 1, 64, 1, 64, 4096);
    assert_int_equal(estimate_layout(m, g, n, &l, &job, &e, err, sizeof err), -1);
    assert_non_null(strstr(err, "--pp"));
    l = layout(64, 64, 1, 1, 64, 4096);
    assert_int_equal(estimate_layout(m, g, n, &l, &job, &e, err, sizeof err), -1);
    assert_non_null(strstr(err, "--tp"));
    l = layout(8, 1, 1, 1, 8, 4096);
    l.precision = PREC_FP8;
    assert_int_equal(estimate_layout(m, hwdb_find_gpu(&db, "a100-sxm4-80gb"), n, &l, &job, &e, err, sizeof err), -1);
    assert_non_null(strstr(err, "--precision"));
}

static void pipeline_stages_split_memory(void **state)
{
    (void)state;
    layout_t l = layout(64, 8, 1, 1, 64, 4096);
    estimate_t *e = run("llama2-70b", "h100-sxm", l);
    double params_pp1 = e->memory.params;
    l = layout(64, 8, 4, 1, 64, 4096);
    e = run("llama2-70b", "h100-sxm", l);
    /* a quarter of the layers plus one embedding table, on stage 0 */
    assert_true(e->memory.params < params_pp1 / 3.5 && e->memory.params > params_pp1 / 4.5);
    assert_true(e->pp_comm_s > 0);
    assert_close(e->memory.inflight_microbatches, 4, 0);
}

static void moe_counts_active_parameters(void **state)
{
    (void)state;
    layout_t l = layout(8, 8, 1, 1, 8, 4096);
    estimate_t *e = run("mixtral-8x7b", "h100-sxm", l);
    assert_true(e->params_active < e->params_total / 3);
    assert_close(e->six_nd_per_step, 6 * e->params_active * 8 * 4096, 1e-12);
    assert_true(has_warning(e, "mixture of experts"));
}

/* The costed op of a name and pass on the first stage, or a test failure. */
static const op_t *costed_op(const estimate_t *e, const char *name, pass_t pass)
{
    for (int i = 0; i < e->first_stage.nops; i++)
        if (!strcmp(e->first_stage.ops[i].name, name) && e->first_stage.ops[i].pass == pass) return &e->first_stage.ops[i];
    print_error("no op %s (%s)\n", name, pass_name(pass));
    fail();
    return NULL;
}


/* calibrate's attention_fwd/bwd_efficiency replace the GEMM efficiency for the
 * fused attention only: forward and its recomputation at the forward's fraction,
 * the backward at its own; unfused attention and GEMMs keep theirs. */
static void calibrated_flash_attention_efficiency(void **state)
{
    (void)state;
    hw_gpu g = *hwdb_find_gpu(&db, "h100-sxm");
    const double peak = g.peak_flops[PREC_BF16];
    layout_t l = layout(8, 1, 1, 4, 32, 2048);
    l.attention = ATTENTION_FLASH;
    l.recompute = RECOMPUTE_FULL;

    /* uncalibrated: a GEMM's roofline, as before */
    estimate_t *e = run_on("llama3.2-1b", &g, l);
    const op_t *fwd = costed_op(e, "attention", PASS_FWD);
    assert_close(fwd->time_s, roofline_s(fwd->flops, peak * g.gemm_efficiency, fwd->bytes, g.hbm_bytes_per_s * g.membound_efficiency), 1e-12);
    double step_default = e->step_s, qkv_default = costed_op(e, "qkv", PASS_FWD)->time_s;

    g.attention_fwd_efficiency = 0.2;
    g.attention_bwd_efficiency = 0.15;
    e = run_on("llama3.2-1b", &g, l);
    fwd = costed_op(e, "attention", PASS_FWD);
    const op_t *re = costed_op(e, "attention", PASS_RECOMPUTE), *bwd = costed_op(e, "attention_bwd", PASS_BWD);
    /* compute-bound at these fractions: the bytes term is far below */
    assert_true(fwd->bytes / (g.hbm_bytes_per_s * g.membound_efficiency) < fwd->time_s / 10);
    assert_close(fwd->time_s, fwd->flops / (peak * 0.2), 1e-12);
    assert_close(re->time_s, fwd->time_s, 1e-12);
    assert_close(bwd->time_s, bwd->flops / (peak * 0.15), 1e-12);
    assert_close(bwd->flops, 2.5 * fwd->flops, 1e-12);
    assert_close(costed_op(e, "qkv", PASS_FWD)->time_s, qkv_default, 1e-15);
    assert_true(e->step_s > step_default);

    /* unfused attention ignores the keys */
    l.attention = ATTENTION_UNFUSED;
    hw_gpu plain = *hwdb_find_gpu(&db, "h100-sxm");
    double unfused_default = costed_op(run_on("llama3.2-1b", &plain, l), "attention_bwd", PASS_BWD)->time_s;
    assert_close(costed_op(run_on("llama3.2-1b", &g, l), "attention_bwd", PASS_BWD)->time_s, unfused_default, 1e-15);
}

/* calibrate's GEMM table: a GEMM op takes the measured time of its shape, or
 * the line through shapes that differ only in the token count (m for forward
 * and dgrad, k for wgrad); other shapes, batched GEMMs and fp8 keep the curve.
 * membound_overhead_us adds to every memory-bound op.  The fused attention's
 * table works the same way over batch x heads. */
static void calibrated_shape_tables_and_membound_overhead(void **state)
{
    (void)state;
    hw_gpu g = *hwdb_find_gpu(&db, "h100-sxm");
    layout_t l = layout(1, 1, 1, 8, 8, 1024); /* gpt2: 8192 tokens, C 768, qkv out 2304 */
    l.recompute = RECOMPUTE_NONE;
    estimate_t *e = run_on("gpt2", &g, l);
    const double qkv_curve = costed_op(e, "qkv", PASS_FWD)->time_s, dgrad_curve = costed_op(e, "qkv_dgrad", PASS_BWD)->time_s;
    const double out_curve = costed_op(e, "attn_out", PASS_FWD)->time_s, norm_default = costed_op(e, "attn_norm", PASS_FWD)->time_s;
    const op_t *norm = costed_op(e, "attn_norm", PASS_FWD);
    assert_close(norm_default, norm->bytes / (g.hbm_bytes_per_s * g.membound_efficiency), 1e-12);

    g.gemm_times = 0;
    const hw_gemm_time table[] = {
        {8192, 2304, 768, 0, 150e-6},                                                  /* qkv, exact */
        {4096, 768, 2304, 0, 60e-6}, {16384, 768, 2304, 0, 200e-6},                       /* qkv dgrad around 8192 */
        {768, 2304, 2048, 0, 30e-6}, {768, 2304, 4096, 0, 50e-6},                         /* qkv wgrad below 8192 */
        {2048, 768, 768, 0, 9e-6}, {1024, 768, 768, 0, 6e-6},                             /* attn_out above: proportional */
        {16384, 3072, 768, 0, 1e-3}, {32768, 3072, 768, 0, 1.2e-3},                       /* mlp_up far above: proportional */
    };
    for (size_t i = 0; i < sizeof table / sizeof table[0]; i++) g.gemm_time[g.gemm_times++] = table[i];
    g.membound_overhead_s = 3e-6;
    e = run_on("gpt2", &g, l);
    assert_close(costed_op(e, "qkv", PASS_FWD)->time_s, 150e-6, 1e-12);
    assert_close(costed_op(e, "qkv_dgrad", PASS_BWD)->time_s, 60e-6 + 140e-6 * (8192 - 4096) / (16384 - 4096.0), 1e-12);
    assert_close(costed_op(e, "qkv_wgrad", PASS_BWD)->time_s, 50e-6 * 8192 / 4096.0, 1e-12);
    assert_close(costed_op(e, "attn_out", PASS_FWD)->time_s, 9e-6 * 8192 / 2048.0, 1e-12);
    assert_true(costed_op(e, "attn_out", PASS_FWD)->time_s != out_curve);
    /* mlp_up at 8192 tokens is below both points: the line, at least proportional */
    double line = 1e-3 + 0.2e-3 * (8192 - 16384) / 16384.0, prop = 1e-3 * 8192 / 16384.0;
    assert_close(costed_op(e, "mlp_up", PASS_FWD)->time_s, line > prop ? line : prop, 1e-12);
    /* no line through attn_out's dgrad (one point only) and none for the LM head: the curve */
    const op_t *head = costed_op(e, "lm_head", PASS_FWD);
    assert_close(head->time_s, roofline_s(head->flops, g.peak_flops[PREC_BF16] * g.gemm_efficiency, head->bytes,
                                          g.hbm_bytes_per_s * g.membound_efficiency), 1e-12);
    norm = costed_op(e, "attn_norm", PASS_FWD);
    assert_close(norm->time_s, norm_default + 3e-6, 1e-12);

    /* fp8 GEMMs are not what calibrate timed */
    l.precision = PREC_FP8;
    hw_gpu plain = *hwdb_find_gpu(&db, "h100-sxm");
    plain.membound_overhead_s = 3e-6;
    double fp8_plain = costed_op(run_on("gpt2", &plain, l), "qkv", PASS_FWD)->time_s;
    assert_close(costed_op(run_on("gpt2", &g, l), "qkv", PASS_FWD)->time_s, fp8_plain, 1e-15);
    (void)qkv_curve;
    (void)dgrad_curve;

    /* the fused attention's table: its shape, or its line over batch x heads; the
     * recomputation takes the forward's; a shape off the table keeps the efficiency */
    hw_gpu a = *hwdb_find_gpu(&db, "h100-sxm");
    a.attention_fwd_efficiency = 0.15;
    a.attention_bwd_efficiency = 0.12;
    l = layout(1, 1, 1, 8, 8, 1024);
    l.attention = ATTENTION_FLASH;
    l.recompute = RECOMPUTE_FULL;
    a.attention_times[0] = a.attention_times[1] = 0;
    a.attention_time[0][a.attention_times[0]++] = (hw_gemm_time){96, 1024, 64, 96, 400e-6};  /* gpt2: 8 x 12 heads */
    a.attention_time[1][a.attention_times[1]++] = (hw_gemm_time){48, 1024, 64, 48, 500e-6};
    a.attention_time[1][a.attention_times[1]++] = (hw_gemm_time){192, 1024, 64, 192, 1700e-6};
    /* a grouped-query model of the same batch x heads: not gpt2's line */
    a.attention_time[1][a.attention_times[1]++] = (hw_gemm_time){96, 1024, 64, 24, 9e-3};
    e = run_on("gpt2", &a, l);
    assert_close(costed_op(e, "attention", PASS_FWD)->time_s, 400e-6, 1e-12);
    assert_close(costed_op(e, "attention", PASS_RECOMPUTE)->time_s, 400e-6, 1e-12);
    assert_close(costed_op(e, "attention_bwd", PASS_BWD)->time_s, 500e-6 + 1200e-6 * (96 - 48) / 144.0, 1e-12);
    l.seq = 512; /* off the table: the efficiency */
    e = run_on("gpt2", &a, l);
    const op_t *att = costed_op(e, "attention", PASS_FWD);
    assert_close(att->time_s, roofline_s(att->flops, a.peak_flops[PREC_BF16] * 0.15, att->bytes,
                                         a.hbm_bytes_per_s * a.membound_efficiency), 1e-12);

    /* the unfused attention's own table: the fused one's does not apply to it, its shape
     * (or line) does; dropout's mask is one more pass over memory on top */
    l = layout(1, 1, 1, 8, 8, 1024);
    l.attention = ATTENTION_UNFUSED;
    hw_gpu u = a;
    const model_t *gpt2 = model_zoo_find(&zoo, "gpt2");
    assert_non_null(gpt2);
    model_t no_dropout = *gpt2;
    no_dropout.dropout = 0;
    static estimate_t e1, e2;
    double curve_fwd = costed_op(run_model(&no_dropout, &u, l, &e1), "attention", PASS_FWD)->time_s;
    assert_true(fabs(curve_fwd - 400e-6) > 1e-6); /* not the fused table's */
    u.unfused_attention_times[0] = u.unfused_attention_times[1] = 0;
    u.unfused_attention_time[0][u.unfused_attention_times[0]++] = (hw_gemm_time){96, 1024, 64, 96, 900e-6};
    u.unfused_attention_time[1][u.unfused_attention_times[1]++] = (hw_gemm_time){48, 1024, 64, 48, 1000e-6};
    u.unfused_attention_time[1][u.unfused_attention_times[1]++] = (hw_gemm_time){192, 1024, 64, 192, 3400e-6};
    run_model(&no_dropout, &u, l, &e1);
    assert_close(costed_op(&e1, "attention", PASS_FWD)->time_s, 900e-6, 1e-12);
    assert_close(costed_op(&e1, "attention_bwd", PASS_BWD)->time_s, 1000e-6 + 2400e-6 * (96 - 48) / 144.0, 1e-12);
    assert_true(gpt2->dropout > 0);
    run_model(gpt2, &u, l, &e2);
    const op_t *masked = costed_op(&e2, "attention", PASS_FWD);
    assert_true(masked->time_s > 900e-6 + 1e-9);
    l.seq = 512; /* off the table: the kernels' rooflines, as without it */
    hw_gpu plain_u = u;
    plain_u.unfused_attention_times[0] = plain_u.unfused_attention_times[1] = 0;
    assert_close(costed_op(run_model(&no_dropout, &u, l, &e1), "attention", PASS_FWD)->time_s,
                 costed_op(run_model(&no_dropout, &plain_u, l, &e2), "attention", PASS_FWD)->time_s, 1e-15);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(issue_example_is_plausible),
        cmocka_unit_test(zero_stages_shard_in_order),
        cmocka_unit_test(fp32_gradients_cost_two_more_bytes),
        cmocka_unit_test(recomputation_trades_memory_for_flops),
        cmocka_unit_test(gpt3_flops_match_narayanan),
        cmocka_unit_test(does_not_fit_is_reported_not_refused),
        cmocka_unit_test(tp_across_node_and_ratio_limit),
        cmocka_unit_test(bubble_and_divisibility_warnings),
        cmocka_unit_test(impossible_layouts_are_refused),
        cmocka_unit_test(pipeline_stages_split_memory),
        cmocka_unit_test(moe_counts_active_parameters),
        cmocka_unit_test(calibrated_flash_attention_efficiency),
        cmocka_unit_test(calibrated_shape_tables_and_membound_overhead),
    };
    return cmocka_run_group_tests_name("estimate", tests, setup, teardown);
}
