/* The estimate: memory sharding, step-time bookkeeping, FLOP conventions,
 * cost, and every warning a reviewer would raise. */
#include "test_shipped.h"

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

static const op_t *costed_op(const estimate_t *e, const char *name, pass_t pass);

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
    /* ZeRO-2/3 hold, beside their shards, two layers' buffers and one of the embedding (the largest unit
     * on this one stage, bigger than a layer at TP 8): gradients for ZeRO-2, parameters and gradients for 3 */
    const model_t *m = model_zoo_find(&zoo, "llama2-13b");
    layout_t l = layout(64, 8, 1, 1, 64, 4096);
    double layer, big;
    zero_unit_params(m, &l, 1, 1, &layer, &big);
    assert_close(layer, model_layer_params(m) / 8.0, 1e-12);
    assert_close(big, (double)padded_vocab(m, 8) * 5120.0 / 8.0, 1e-12);   /* the table, though smaller than a layer */
    double gpt2_layer, gpt2_big;
    zero_unit_params(model_zoo_find(&zoo, "gpt2"), &l, 1, 0, &gpt2_layer, &gpt2_big);
    assert_close(gpt2_big, (double)padded_vocab(model_zoo_find(&zoo, "gpt2"), 8) * 768.0 / 8.0, 1e-12);
    assert_close(weights[2] - weights[1], zero_unit_buffer_bytes(2, layer, big, 2.0, 2.0), 1e-9);
    assert_close(weights[3], weights[1] / 8 + zero_unit_buffer_bytes(3, layer, big, 2.0, 2.0), 1e-9);
    assert_close(zero_unit_buffer_bytes(3, 1e6, 0.0, 2.0, 4.0), 12e6, 1e-12);
    assert_close(zero_unit_buffer_bytes(2, 1e6, 3e6, 2.0, 4.0), 20e6, 1e-12);
    assert_close(zero_unit_buffer_bytes(1, 1e6, 3e6, 2.0, 4.0), 0.0, 0);
    assert_true(total[0] > total[1] && total[1] > total[2] && total[2] > total[3]);
    /* ZeRO-2/3 add each micro-batch's slice into the gradient shard: read both, write the shard */
    l.zero = 3;
    estimate_t *e = run("llama2-13b", "h100-sxm", l);
    const op_t *add = costed_op(e, "dp_grad_shard_add", PASS_BWD);
    assert_close(add->bytes, 3.0 * e->memory.params / 8.0 * 2.0, 1e-12);
    assert_true(add->time_s > 0.0);
}

/* ZeRO-3's first gather and last reduce-scatter wait: with one layer per stage nothing hides them, and the
 * exposed DP time is at least one layer's share of a micro-batch's ZeRO-3 traffic. */
/* Megatron's --recompute-num-layers (block method): recomputing k of a stage's layers costs and saves in
 * proportion, between none and all; it needs full recomputation. */
static void partial_recomputation_is_in_proportion(void **state)
{
    (void)state;
    static estimate_t none, half, all;
    layout_t l = layout(64, 8, 2, 1, 256, 4096);
    l.sp = 1;
    l.recompute = RECOMPUTE_NONE;
    none = *run("llama2-70b", "h100-sxm", l);
    l.recompute = RECOMPUTE_FULL;
    all = *run("llama2-70b", "h100-sxm", l);
    l.recompute_layers = 20;   /* of 40 per stage */
    half = *run("llama2-70b", "h100-sxm", l);
    double extra_all = all.hardware_flops_per_step - none.hardware_flops_per_step;
    assert_close(half.hardware_flops_per_step - none.hardware_flops_per_step, extra_all / 2.0, 1e-9);
    assert_close(half.model_flops_per_step, none.model_flops_per_step, 1e-12);
    assert_true(half.step_s > none.step_s && half.step_s < all.step_s);
    assert_true(half.memory.activations > all.memory.activations && half.memory.activations < none.memory.activations);
    /* as many as the stage holds is all of them */
    l.recompute_layers = 40;
    assert_close(run("llama2-70b", "h100-sxm", l)->step_s, all.step_s, 1e-12);
    /* only with full recomputation */
    l.recompute = RECOMPUTE_SELECTIVE;
    l.recompute_layers = 20;
    char err[256];
    assert_int_equal(layout_check(model_zoo_find(&zoo, "llama2-70b"), &l, err, sizeof err), -1);
    assert_non_null(strstr(err, "--recompute-layers"));
}

/* The frameworks' fp32 loss moves 36 bytes a logit where the fused one moves 4 (16-bit), and holds the cast
 * logits and the log-softmax (8 bytes a logit) for the micro-batch at hand. */
static void fp32_loss_costs_its_passes(void **state)
{
    (void)state;
    static estimate_t fused, fp32;
    layout_t l = layout(8, 1, 1, 8, 64, 1024);
    fused = *run("gpt2", "h100-sxm", l);
    l.loss = LOSS_FP32;
    fp32 = *run("gpt2", "h100-sxm", l);
    const op_t *fwd = costed_op(&fp32, "cross_entropy", PASS_FWD), *bwd = costed_op(&fp32, "cross_entropy_bwd", PASS_BWD);
    double logits = 8.0 * 1024.0 * (double)padded_vocab(model_zoo_find(&zoo, "gpt2"), 1);
    assert_close(fwd->bytes, 14.0 * logits, 1e-12);
    assert_close(bwd->bytes, 22.0 * logits, 1e-12);
    assert_close(costed_op(&fused, "cross_entropy", PASS_FWD)->bytes, 4.0 * logits, 1e-12);
    assert_close(fp32.memory.logits - fused.memory.logits, 8.0 * logits, 1e-12);
    assert_true(fp32.step_s > fused.step_s);
    assert_close(fp32.model_flops_per_step, fused.model_flops_per_step, 1e-12);
}

static void zero3_first_and_last_layer_exposed(void **state)
{
    (void)state;
    layout_t l = layout(64, 1, 1, 1, 64, 4096);
    l.zero = 3;
    estimate_t *e = run("llama2-13b", "h100-sxm", l);
    double traffic = 0.0;
    for (int i = 0; i < e->first_stage.nops; i++) {
        const op_t *op = &e->first_stage.ops[i];
        if (op->kind == OP_COMM && op->group == GROUP_DP && op->pass != PASS_STEP) traffic += op->time_s * (double)op->count;
    }
    assert_true(traffic > 0.0);
    double layer, big;
    zero_unit_params(model_zoo_find(&zoo, "llama2-13b"), &l, 1, 1, &layer, &big);
    assert_true(e->dp_comm_s >= traffic * (big > layer ? big : layer) / e->memory.params * (double)e->microbatches * 0.999);
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
    /* GPT-3 has learned positions (no FLOPs) and a tied head: exactly eq. (3) when causal attention
     * is counted over the full s x s, as Megatron counts it; MFU's count is its half below the diagonal */
    double narayanan = narayanan_model_flops(1536, 2048, (double)m->layers, (double)m->hidden, (double)m->vocab);
    assert_close(e->model_flops_full_attention_per_step, narayanan, 1e-9);
    assert_close(e->model_flops_per_step, narayanan - 6.0 * 1536 * 2048.0 * 2048 * (double)m->layers * (double)m->hidden, 1e-9);
    assert_close(e->model_flops_full_attention_per_step - e->model_flops_per_step, e->attention_flops_per_step, 1e-9);
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
    /* docs/SPEC.md section 4 with hwdb's 165 TFLOP/s (fp32 accumulate) for the RTX 4090: t_max = 6 x 4096 / (2 x 165.2e12 / 32e9) = 2.4 */
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
    l.gbs = 8;   /* interleaving runs micro-batches in groups of p */
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

/* A sequence beyond the model's trained positions is warned about, by the kind of its positions. */
static void sequence_beyond_trained_positions_warns(void **state)
{
    (void)state;
    /* GPT-2's learned table has 1024 rows */
    estimate_t *e = run("gpt2", "h100-sxm", layout(1, 1, 1, 1, 8, 1024));
    assert_false(has_warning(e, "positions"));
    e = run("gpt2", "h100-sxm", layout(1, 1, 1, 1, 8, 1025));
    assert_true(has_warning(e, "--seq 1025 is beyond gpt2's 1024 learned positions"));
    /* LLaMA-2 was trained on 4096 tokens, rotary; BLOOM on 2048, ALiBi */
    e = run("llama2-7b", "h100-sxm", layout(8, 8, 1, 1, 8, 4096));
    assert_false(has_warning(e, "positions"));
    e = run("llama2-7b", "h100-sxm", layout(8, 8, 1, 1, 8, 262144));
    assert_true(has_warning(e, "--seq 262144 is beyond the 4096 positions llama2-7b was trained on: RoPE"));
    e = run("bloom-176b", "h100-sxm", layout(64, 8, 8, 1, 64, 4096));
    assert_true(has_warning(e, "ALiBi"));
    /* a model whose table is larger than its training sequence: the table's size is the limit */
    model_t wide = *model_zoo_find(&zoo, "gpt2");
    wide.max_positions = 2048;
    static estimate_t own;
    assert_false(has_warning(run_model(&wide, hwdb_find_gpu(&db, "h100-sxm"), layout(1, 1, 1, 1, 8, 2048), &own), "positions"));
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
    /* interleaved 1F1B with micro-batches that are not a multiple of the pipeline depth, one
     * micro-batch included (where the bubble was once a 10% guess): refused, as Megatron-LM does */
    for (int64_t gbs = 1; gbs <= 12; gbs++) {
        l = layout(8, 1, 4, 1, gbs * 2, 4096);
        l.vpp = 2;
        int rc = estimate_layout(m, g, n, &l, &job, &e, err, sizeof err);
        if (gbs % 4 == 0) {
            assert_int_equal(rc, 0);
            continue;
        }
        assert_int_equal(rc, -1);
        assert_non_null(strstr(err, "--vpp 2"));
        assert_non_null(strstr(err, "multiple of --pp 4"));
    }
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
    layout_t l = layout(16, 8, 1, 1, 8, 4096);
    l.sp = 1;   /* Megatron's MoE layers need it under TP */
    estimate_t *e = run("mixtral-8x7b", "h100-sxm", l);
    assert_true(e->params_active < e->params_total / 3);
    assert_close(e->six_nd_per_step, 6 * e->params_active * 8 * 4096, 1e-12);
    /* without EP on 2 data-parallel ranks, the warning points at --ep */
    assert_true(has_warning(e, "--ep up to 2"));
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
    /* the mechanism, without hwdb/priors.csv's attention and kernel-overhead priors */
    g.attention_fwd_efficiency = g.attention_bwd_efficiency = 0.0;
    g.flash_fwd_efficiency = g.flash_bwd_efficiency = 0.0;
    g.launch_overhead_s = g.membound_overhead_s = 0.0;
    g.gemm_half_flops = 0.0;
    const double peak = g.peak_flops[PREC_BF16];
    layout_t l = layout(8, 1, 1, 4, 32, 2048);
    l.attention = ATTENTION_SEXTANT;   /* sextant-gpu's kernel, what calibrate measures */
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

    /* the frameworks' kernel (flash) ignores what calibrate measured on ours: its own prior, else a GEMM's */
    l.attention = ATTENTION_FLASH;
    assert_close(costed_op(run_on("llama3.2-1b", &g, l), "attention", PASS_FWD)->time_s,
                 roofline_s(fwd->flops, peak * g.gemm_efficiency, fwd->bytes, g.hbm_bytes_per_s * g.membound_efficiency), 1e-12);
    g.flash_fwd_efficiency = 0.5;
    assert_close(costed_op(run_on("llama3.2-1b", &g, l), "attention", PASS_FWD)->time_s, fwd->flops / (peak * 0.5), 1e-12);
    /* ours without a measurement: the frameworks' prior */
    l.attention = ATTENTION_SEXTANT;
    g.attention_fwd_efficiency = 0.0;
    assert_close(costed_op(run_on("llama3.2-1b", &g, l), "attention", PASS_FWD)->time_s, fwd->flops / (peak * 0.5), 1e-12);

    /* unfused attention ignores the keys */
    l.attention = ATTENTION_UNFUSED;
    hw_gpu plain = *hwdb_find_gpu(&db, "h100-sxm");
    plain.launch_overhead_s = plain.membound_overhead_s = 0.0;
    plain.gemm_half_flops = 0.0;
    double unfused_default = costed_op(run_on("llama3.2-1b", &plain, l), "attention_bwd", PASS_BWD)->time_s;
    assert_close(costed_op(run_on("llama3.2-1b", &g, l), "attention_bwd", PASS_BWD)->time_s, unfused_default, 1e-15);
}

/* flash1, the first generation of fused kernels: the op list and memory of flash, every fused attention
 * op (forward, recomputation, backward) slower by the GPU's flash1_relative_speed, nothing else changed;
 * the shipped priors give 0.5 on the A100 and 0.35 on the H100 (docs/model.md, "Attention kernel generations"). */
static void flash1_is_flash_at_its_relative_speed(void **state)
{
    (void)state;
    const char *gpus[] = {"a100-sxm4-80gb", "h100-sxm"};
    const double priors[] = {0.50, 0.35};
    for (int i = 0; i < 2; i++) {
        hw_gpu g = *hwdb_find_gpu(&db, gpus[i]);
        g.flash1_relative_speed = priors[i];
        layout_t l = layout(8, 1, 1, 2, 64, 8192);
        l.recompute = RECOMPUTE_FULL;
        l.attention = ATTENTION_FLASH;
        static estimate_t flash;
        flash = *run_on("llama3-8b", &g, l);
        l.attention = ATTENTION_FLASH1;
        const estimate_t *first = run_on("llama3-8b", &g, l);
        assert_int_equal(first->first_stage.nops, flash.first_stage.nops);
        assert_close(first->memory.total, flash.memory.total, 1e-12);
        double extra = 0.0;
        for (int k = 0; k < first->first_stage.nops; k++) {
            const op_t *a = &flash.first_stage.ops[k], *b = &first->first_stage.ops[k];
            assert_string_equal(a->name, b->name);
            if (a->kind == OP_ATTENTION) {
                assert_close(b->time_s, a->time_s / priors[i], 1e-9);
                extra += (b->time_s - a->time_s) * (double)b->count;
            } else {
                assert_close(b->time_s, a->time_s, 1e-12);
            }
        }
        assert_true(extra > 0.0);
        assert_true(first->step_s > flash.step_s);
    }
    /* sm80 or newer, like flash */
    layout_t l = layout(8, 1, 1, 1, 8, 1024);
    l.attention = ATTENTION_FLASH1;
    l.precision = PREC_FP16;
    const model_t *m = model_zoo_find(&zoo, "gpt2");
    const hw_gpu *v100 = hwdb_find_gpu(&db, "v100-sxm2-16gb");
    const hw_node *n = hwdb_find_node(&db, v100->node);
    static estimate_t e;
    job_t job = {1e9, 1.0};
    char err[512];
    assert_int_equal(estimate_layout(m, v100, n, &l, &job, &e, err, sizeof err), -1);
    assert_non_null(strstr(err, "--attention flash1"));
}

/* --tp-overlap backward (Megatron's default): the backward's re-gather of a column-parallel input runs
 * beside that layer's input-gradient GEMM and the input gradient's reduce-scatter (all-reduce without SP)
 * beside its weight-gradient GEMM; each costs what overlapped_comm_cost_s says it adds to that GEMM, with
 * the GPU's overlap slowdowns; every other collective and every compute op is unchanged. */
static void tp_backward_overlap_hides_behind_its_gemms(void **state)
{
    (void)state;
    for (int sp = 0; sp <= 1; sp++) {
        layout_t l = layout(64, 8, 1, 1, 64, 4096);
        l.sp = sp;
        static estimate_t none;
        none = *run("llama2-70b", "h100-sxm", l);
        l.tp_overlap = TP_OVERLAP_BACKWARD;
        const estimate_t *e = run("llama2-70b", "h100-sxm", l);
        const hw_gpu *g = hwdb_find_gpu(&db, "h100-sxm");
        assert_close(e->compute_s, none.compute_s, 1e-12);
        assert_close(e->dp_comm_s, none.dp_comm_s, 1e-12);
        double tp_none = 0.0, tp_overlap = 0.0;
        int beside = 0;
        for (int i = 0; i < e->first_stage.nops; i++) {
            const op_t *op = &e->first_stage.ops[i];
            if (op->kind != OP_COMM || op->group != GROUP_TP) continue;
            double t = op->time_s * (double)op->count;
            tp_none += t;
            if (op->overlap != OVERLAP_GEMM) {
                tp_overlap += t;
                continue;
            }
            beside++;
            assert_int_equal(op->pass, PASS_BWD);
            assert_true(op->window_op > 0);
            const op_t *w = &e->first_stage.ops[op->window_op - 1];
            assert_int_equal(w->kind, OP_GEMM);
            assert_int_equal(w->pass, PASS_BWD);
            /* a gather beside the input gradient, a reduction beside the weight gradient */
            assert_int_equal(w->weight_gradient, op->coll != COLL_ALLGATHER);
            double sc = op->coll == COLL_ALLGATHER ? g->overlap_compute_slowdown_allgather
                        : op->coll == COLL_REDUCE_SCATTER ? g->overlap_compute_slowdown_reducescatter
                                                          : g->overlap_compute_slowdown_allreduce;
            tp_overlap += (double)op->count * overlapped_comm_cost_s(op->time_s, w->time_s, 0.0, sc, g->overlap_comm_slowdown);
        }
        /* per layer (one op each, counted per layer): the attention and the MLP entries, a gather and a
         * reduce-scatter each with SP, an all-reduce each without */
        assert_true(beside >= (sp ? 4 : 2));
        /* what the step saves is what the collectives beside their GEMMs no longer cost */
        assert_close((tp_none - tp_overlap) * (double)e->microbatches, none.tp_comm_s - e->tp_comm_s, 1e-9);
        assert_true(e->tp_comm_s < none.tp_comm_s);
        assert_true(e->step_s < none.step_s);
    }
}

/* --grad-sync after (DeepSpeed's engine): the step's gradient reduction and parameter gather run after
 * the pipeline drains, with nothing beside them: each costs its whole collective time, more than
 * beside the last backward; the rest of the step is unchanged. */
static void grad_sync_after_the_flush_is_exposed(void **state)
{
    (void)state;
    /* one stage, so that its op list is the slowest stage's */
    layout_t l = layout(64, 8, 1, 1, 256, 2048);
    l.zero = 1;
    static estimate_t overlap;
    overlap = *run("llama2-13b", "a100-sxm4-80gb", l);
    l.grad_sync = GRAD_SYNC_AFTER;
    const estimate_t *after = run("llama2-13b", "a100-sxm4-80gb", l);
    double raw = 0.0;
    for (int i = 0; i < after->first_stage.nops; i++) {
        const op_t *op = &after->first_stage.ops[i];
        if (op->kind == OP_COMM && op->group == GROUP_DP && op->pass == PASS_STEP) raw += op->time_s * (double)op->count;
    }
    assert_true(raw > 0.0);
    assert_true(after->dp_comm_s > overlap.dp_comm_s);
    assert_close(after->dp_comm_s, raw, 1e-9);
    assert_close(after->compute_s, overlap.compute_s, 1e-12);
    assert_close(after->step_s - after->dp_comm_s, overlap.step_s - overlap.dp_comm_s, 1e-9);
}

/* --grad-accum fp32-copy (DeepSpeed's BF16 optimizer): each micro-batch's backward ends with one memory
 * pass of 18 B per local parameter (bf16); the step all-reduces 4-byte gradients and, with ZeRO 1, gathers
 * the 2-byte weights; the gradients hold 6 B per parameter; ZeRO 2 and 3 are refused. */
static void grad_accum_fp32_copy_costs_a_pass_and_fp32_traffic(void **state)
{
    (void)state;
    layout_t l = layout(64, 8, 1, 1, 256, 2048);   /* one stage: its op list is the slowest stage's */
    l.zero = 1;
    static estimate_t in_place;
    in_place = *run("llama2-13b", "a100-sxm4-80gb", l);
    l.grad_accum = GRAD_ACCUM_FP32_COPY;
    const estimate_t *copy = run("llama2-13b", "a100-sxm4-80gb", l);
    const stage_ops *s = &copy->first_stage;
    const op_t *add = NULL, *allreduce = NULL, *gather = NULL;
    for (int i = 0; i < s->nops; i++) {
        if (!strcmp(s->ops[i].name, "grad_accumulate_fp32")) add = &s->ops[i];
        if (!strcmp(s->ops[i].name, "dp_allreduce_grads")) allreduce = &s->ops[i];
        if (!strcmp(s->ops[i].name, "dp_allgather_params")) gather = &s->ops[i];
        assert_true(strcmp(s->ops[i].name, "dp_reduce_scatter_grads") != 0);
    }
    assert_non_null(add);
    assert_non_null(allreduce);
    assert_non_null(gather);
    assert_int_equal(add->pass, PASS_BWD);
    assert_close(add->bytes, 18.0 * s->params, 1e-12);
    assert_close(allreduce->comm_bytes, 4.0 * s->params, 1e-12);
    assert_close(gather->comm_bytes, 2.0 * s->params, 1e-12);
    /* the pass is paid once per micro-batch, inside the step's compute */
    assert_close(copy->compute_s - in_place.compute_s, add->time_s * (double)copy->microbatches, 1e-6);
    assert_close(copy->memory.gradients, 6.0 * s->params, 1e-6);
    assert_close(in_place.memory.gradients, 2.0 * s->params, 1e-6);
    assert_true(copy->step_s > in_place.step_s);
    /* DeepSpeed's ZeRO-2/3 optimizers keep no fp32 copy: refused, not ignored */
    const hw_gpu *g = hwdb_find_gpu(&db, "a100-sxm4-80gb");
    static estimate_t e;
    char err[512];
    job_t job = {2e12, 2};
    l.zero = 2;
    l.gpus_per_node = 8;
    assert_int_equal(estimate_layout(model_zoo_find(&zoo, "llama2-13b"), g, hwdb_find_node(&db, g->node), &l, &job, &e,
                                     err, sizeof err), -1);
    assert_non_null(strstr(err, "--grad-accum fp32-copy"));
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
    g.attention_fwd_efficiency = g.attention_bwd_efficiency = 0.0;   /* without hwdb/priors.csv */
    g.launch_overhead_s = g.membound_overhead_s = 0.0;
    g.gemm_half_flops = 0.0;
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
    l.attention = ATTENTION_SEXTANT;
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

/* ---- the clock under the power cap (docs/model.md) ----------------------
 * calibrate's figures for an H100 SXM: 124.5 W static, 0.955 pJ per GEMM FLOP,
 * 2.886 pJ per fused-attention FLOP, 149 pJ per byte, energy per operation
 * falling as x^2, a 1980 MHz top clock. */
static void power_model(hw_gpu *g, double cap_w)
{
    g->power_cap_w = cap_w;
    g->clock_max_hz = 1980e6;
    g->power_static_w = 124.5;
    g->energy_gemm_j_per_flop = 0.955e-12;
    g->energy_attention_j_per_flop = 2.886e-12;
    g->energy_j_per_byte = 149e-12;
    g->clock_energy_exponent = 2.0;
}

static void estimate_into(const char *model, const hw_gpu *g, layout_t l, estimate_t *e)
{
    const model_t *m = model_zoo_find(&zoo, model);
    assert_non_null(m);
    run_model(m, g, l, e);
}

/* Without the power model every power figure is 0 and the clock the top one;
 * with it but a cap no step reaches (1 MW), the clock stays at the top and
 * every time is the same, to the bit, as without it.  A static power of 0
 * leaves the model off whatever the rest says. */
static void power_model_off_or_under_the_cap_keeps_the_top_clock(void **state)
{
    (void)state;
    hw_gpu plain = *hwdb_find_gpu(&db, "h100-sxm");
    assert_true(plain.clock_max_hz == 0.0 && plain.power_static_w == 0.0);
    layout_t l = layout(1, 1, 1, 8, 8, 1024);
    static estimate_t off, high;
    estimate_into("gpt2", &plain, l, &off);
    assert_true(off.clock_fraction == 1.0);
    assert_true(off.step_power_w == 0.0 && off.step_clock_hz == 0.0 && off.top_clock_power_w == 0.0);
    assert_true(off.clock_bound_top_s == 0.0);
    for (int i = 0; i < off.first_stage.nops; i++)
        assert_true(off.first_stage.ops[i].clock_bound_s == 0.0 && off.first_stage.ops[i].energy_j == 0.0);

    hw_gpu capped = plain;
    power_model(&capped, 1e6);
    estimate_into("gpt2", &capped, l, &high);
    assert_true(high.clock_fraction == 1.0);
    assert_true(high.step_s == off.step_s);
    assert_true(high.compute_s == off.compute_s && high.optimizer_s == off.optimizer_s);
    assert_true(high.tokens_per_s == off.tokens_per_s && high.mfu == off.mfu);
    assert_true(high.step_clock_hz == 1980e6);
    assert_true(high.step_power_w == high.top_clock_power_w);
    assert_true(high.top_clock_power_w > 124.5 && high.top_clock_power_w < 1e6);
    assert_true(high.clock_bound_top_s > 0.0 && high.clock_bound_top_s < high.step_s);
    assert_int_equal(high.first_stage.nops, off.first_stage.nops);
    for (int i = 0; i < off.first_stage.nops; i++) assert_true(high.first_stage.ops[i].time_s == off.first_stage.ops[i].time_s);

    /* the model needs a static power: without it a 1 W cap changes nothing */
    hw_gpu no_static = capped;
    no_static.power_cap_w = 1.0;
    no_static.power_static_w = 0.0;
    estimate_into("gpt2", &no_static, l, &high);
    assert_true(high.clock_fraction == 1.0 && high.step_s == off.step_s && high.step_power_w == 0.0);
}

/* GPT-2 124M on one H100, two micro-batches of 8 x 1024 tokens: at the top
 * clock the step would draw about 930 W, over the 700 W cap.  The energy and clock-bound seconds are summed
 * again here from the costed ops (body ops once per micro-batch, the optimizer's
 * once per step); the clock x settles where the step draws the cap; the step
 * grows by exactly the clock-bound seconds' stretch, clock_bound_top_s (1/x - 1),
 * since one GPU has no bubble or exposed communication whose share could change;
 * every op grows by its own clock-bound seconds' stretch and memory-bound ops not
 * at all.  Tolerances: 1e-12 where both sides sum the same numbers in another
 * order; the cap to 1e-6 relative (the bisection leaves 5e-13 in x). */
static void power_cap_slows_the_clock_bound_work(void **state)
{
    (void)state;
    hw_gpu plain = *hwdb_find_gpu(&db, "h100-sxm");
    /* the mechanism on the datasheet's rates, without hwdb/priors.csv's slower kernels */
    plain.attention_fwd_efficiency = plain.attention_bwd_efficiency = plain.gemm_half_flops = 0.0;
    plain.launch_overhead_s = plain.membound_overhead_s = 0.0;
    hw_gpu capped = plain;
    power_model(&capped, 700.0);
    layout_t l = layout(1, 1, 1, 8, 16, 1024);
    static estimate_t top, at_cap;
    estimate_into("gpt2", &plain, l, &top);
    estimate_into("gpt2", &capped, l, &at_cap);
    const double microbatches = (double)at_cap.microbatches;
    assert_true(microbatches == 2.0);

    double energy = 0.0, clock_bound = 0.0;
    int clock_bound_ops = 0;
    for (int i = 0; i < at_cap.first_stage.nops; i++) {
        const op_t *op = &at_cap.first_stage.ops[i], *op_top = &top.first_stage.ops[i];
        assert_string_equal(op->name, op_top->name);
        double per_step = (double)op->count * (op->pass == PASS_STEP ? 1.0 : microbatches);
        energy += op->energy_j * per_step;
        clock_bound += op->clock_bound_s * per_step;
        switch (op->kind) {
        case OP_GEMM:
            assert_close(op->energy_j, 0.955e-12 * op->flops + 149e-12 * op->bytes, 1e-12);
            /* all of its time at the top clock follows the clock, or none */
            assert_true(op->clock_bound_s == 0.0 || op->clock_bound_s == op_top->time_s);
            break;
        case OP_ATTENTION: /* fused: all of it follows the clock */
            assert_close(op->energy_j, 2.886e-12 * op->flops + 149e-12 * op->bytes, 1e-12);
            assert_true(op->clock_bound_s == op_top->time_s);
            break;
        case OP_MEMBOUND:
            assert_close(op->energy_j, 149e-12 * op->bytes, 1e-12);
            assert_true(op->clock_bound_s == 0.0);
            break;
        case OP_COMM:
            assert_true(op->energy_j == 0.0 && op->clock_bound_s == 0.0);
            break;
        }
        clock_bound_ops += op->clock_bound_s > 0.0;
        /* each op at the step's clock */
        double x = at_cap.clock_fraction;
        if (op->clock_bound_s == 0.0) assert_true(op->time_s == op_top->time_s);
        else assert_close(op->time_s, op_top->time_s + op->clock_bound_s * (1.0 / x - 1.0), 1e-12);
    }
    assert_true(clock_bound_ops > 0);
    /* the large GEMMs follow the clock */
    assert_true(costed_op(&at_cap, "qkv", PASS_FWD)->clock_bound_s == costed_op(&top, "qkv", PASS_FWD)->time_s);
    assert_true(costed_op(&at_cap, "mlp_up", PASS_FWD)->clock_bound_s > 0.0);

    /* the step at the top clock: over the cap (so this test is not vacuous) */
    assert_close(at_cap.clock_bound_top_s, clock_bound, 1e-12);
    assert_close(at_cap.top_clock_power_w, 124.5 + energy / top.step_s, 1e-12);
    assert_true(at_cap.top_clock_power_w > 800.0);

    /* the clock where the step draws the cap */
    double x = at_cap.clock_fraction;
    assert_true(x > 0.3 && x < 1.0);
    assert_close(x, power_capped_clock_fraction(124.5, 700.0, energy, top.step_s - clock_bound, clock_bound, 2.0, 0.3), 1e-12);
    assert_close(at_cap.step_clock_hz, x * 1980e6, 1e-15);
    assert_close(at_cap.step_power_w, 700.0, 1e-6);
    assert_close(124.5 + energy * x * x / at_cap.step_s, 700.0, 1e-6);

    /* the step: longer by the clock-bound seconds' stretch, the rest unchanged */
    assert_true(at_cap.step_s > top.step_s);
    assert_close(at_cap.step_s - top.step_s, at_cap.clock_bound_top_s * (1.0 / x - 1.0), 1e-9);
    assert_close(at_cap.compute_s - top.compute_s, at_cap.clock_bound_top_s * (1.0 / x - 1.0), 1e-9);
    assert_true(at_cap.optimizer_s == top.optimizer_s && at_cap.dp_comm_s == top.dp_comm_s);
    assert_true(at_cap.tp_comm_s == top.tp_comm_s && at_cap.bubble_s == top.bubble_s);
    assert_close(at_cap.tokens_per_s, 16.0 * 1024.0 / at_cap.step_s, 1e-12);
    assert_close(at_cap.mfu, top.mfu * top.step_s / at_cap.step_s, 1e-12);
    assert_close(at_cap.time_to_train_s, at_cap.steps * at_cap.step_s, 1e-12);

    /* no power_cap_w: the TDP is the cap (700 W for the H100 SXM) */
    hw_gpu tdp = capped;
    tdp.power_cap_w = 0.0;
    assert_true(tdp.tdp_w == 700.0);
    static estimate_t at_tdp;
    estimate_into("gpt2", &tdp, l, &at_tdp);
    assert_true(at_tdp.clock_fraction == x && at_tdp.step_s == at_cap.step_s);

    /* a cap just over the static power: the clock's floor, 30% of the top, and the
     * step draws more than the cap there */
    hw_gpu starved = capped;
    starved.power_cap_w = 130.0;
    estimate_into("gpt2", &starved, l, &at_tdp);
    assert_true(at_tdp.clock_fraction == 0.3);
    assert_true(at_tdp.step_power_w > 130.0);
    assert_close(at_tdp.step_s - top.step_s, at_tdp.clock_bound_top_s * (1.0 / 0.3 - 1.0), 1e-9);

    /* bigger micro-batches run the tensor cores harder: the clock falls (or holds) */
    double previous = 1.0, first = 0.0;
    for (int64_t mbs = 1; mbs <= 16; mbs *= 2) {
        estimate_into("gpt2", &capped, layout(1, 1, 1, mbs, mbs, 1024), &at_tdp);
        assert_true(at_tdp.top_clock_power_w > 700.0);
        assert_true(at_tdp.clock_fraction <= previous);
        previous = at_tdp.clock_fraction;
        if (mbs == 1) first = previous;
    }
    assert_true(previous < first);
}

/* Which GEMMs follow the clock: those of 1 GFLOP or more that the roofline
 * puts on the tensor cores.  GPT-2 with a 64-token micro-batch: the LM head
 * (5 GFLOP) reads its 77 MB weight slower than it multiplies, so it waits on
 * memory, not the clock; the layers' GEMMs are under 1 GFLOP.  A time calibrate
 * measured follows the clock by its FLOPs alone: the LM head's then does, the
 * QKV projection's (0.23 GFLOP) still does not. */
static void power_cap_which_gemms_follow_the_clock(void **state)
{
    (void)state;
    hw_gpu capped = *hwdb_find_gpu(&db, "h100-sxm");
    power_model(&capped, 700.0);
    const double membw = capped.hbm_bytes_per_s * capped.membound_efficiency;
    layout_t l = layout(1, 1, 1, 1, 1, 64);
    static estimate_t e;
    estimate_into("gpt2", &capped, l, &e);
    assert_true(e.clock_fraction == 1.0); /* so time_s is the top clock's */
    const op_t *head = costed_op(&e, "lm_head", PASS_FWD), *qkv = costed_op(&e, "qkv", PASS_FWD);
    assert_true(head->flops >= 1e9 && qkv->flops < 1e9);
    assert_close(head->time_s, head->bytes / membw, 1e-12);
    assert_true(head->clock_bound_s == 0.0 && qkv->clock_bound_s == 0.0);
    for (int i = 0; i < e.first_stage.nops; i++) {
        const op_t *op = &e.first_stage.ops[i];
        if (op->kind != OP_GEMM) continue;
        int memory_bound = op->time_s == op->bytes / membw;
        if (op->flops < 1e9 || memory_bound) assert_true(op->clock_bound_s == 0.0);
        else assert_true(op->clock_bound_s == op->time_s);
        assert_close(op->energy_j, 0.955e-12 * op->flops + 149e-12 * op->bytes, 1e-12);
    }

    hw_gpu timed = capped;
    timed.gemm_times = 0;
    timed.gemm_time[timed.gemm_times++] = (hw_gemm_time){head->m, head->n, head->k, 0, 50e-6};
    timed.gemm_time[timed.gemm_times++] = (hw_gemm_time){qkv->m, qkv->n, qkv->k, 0, 20e-6};
    static estimate_t t;
    estimate_into("gpt2", &timed, l, &t);
    assert_true(costed_op(&t, "lm_head", PASS_FWD)->clock_bound_s == 50e-6);
    assert_true(costed_op(&t, "qkv", PASS_FWD)->clock_bound_s == 0.0);
    assert_close(costed_op(&t, "qkv", PASS_FWD)->time_s, 20e-6, 1e-12);
}

/* Several GPUs: the search's cached path, the fast path and estimate_layout
 * give the same numbers, to the bit, with the power model on; in a pipeline
 * each stage's ops stretch by their own clock-bound seconds. */
static void power_cap_same_on_every_entry_point(void **state)
{
    (void)state;
    hw_gpu capped = *hwdb_find_gpu(&db, "h100-sxm");
    power_model(&capped, 700.0);
    const hw_node *n = hwdb_find_node(&db, capped.node);
    struct {
        const char *model;
        layout_t l;
    } cases[] = {
        {"gpt2", layout(1, 1, 1, 8, 8, 1024)},        {"gpt2", layout(16, 1, 1, 8, 512, 1024)},
        {"llama2-7b", layout(8, 1, 8, 1, 32, 4096)},   {"llama2-7b", layout(64, 1, 1, 1, 64, 4096)},
        {"llama2-7b", layout(64, 1, 1, 1, 128, 4096)}, {"llama2-13b", layout(64, 8, 1, 4, 256, 4096)},
        {"llama2-70b", layout(64, 8, 4, 1, 64, 4096)}, {"gpt2", layout(16, 1, 1, 8, 256, 1024)},
    };
    const int ncases = (int)(sizeof cases / sizeof cases[0]);
    estimate_cache *cache = estimate_cache_new();
    assert_non_null(cache);
    static estimate_t slow, fast, cached;
    char err[512];
    int below_top = 0;
    /* twice over, the second time with every part already in the cache */
    for (int pass = 0; pass < 2; pass++)
        for (int c = 0; c < ncases; c++) {
            const model_t *m = model_zoo_find(&zoo, cases[c].model);
            assert_non_null(m);
            layout_t l = cases[c].l;
            l.gpus_per_node = n->gpus_per_node;
            job_t job = {2e12, capped.cloud_usd_per_gpu_hour};
            assert_int_equal(estimate_layout(m, &capped, n, &l, &job, &slow, err, sizeof err), 0);
            assert_int_equal(estimate_layout_fast(m, &capped, n, &l, &job, &fast, err, sizeof err), 0);
            assert_int_equal(estimate_layout_cached(cache, m, &capped, n, &l, &job, 0, &cached, err, sizeof err), 0);
            const estimate_t *other[2] = {&fast, &cached};
            for (int k = 0; k < 2; k++) {
                const estimate_t *o = other[k];
                if (o->step_s != slow.step_s) print_error("%s case %d: step %.17g vs %.17g\n", k ? "cached" : "fast", c, o->step_s, slow.step_s);
                assert_true(o->step_s == slow.step_s);
                assert_true(o->clock_fraction == slow.clock_fraction);
                assert_true(o->step_clock_hz == slow.step_clock_hz);
                assert_true(o->top_clock_power_w == slow.top_clock_power_w);
                assert_true(o->step_power_w == slow.step_power_w);
                assert_true(o->clock_bound_top_s == slow.clock_bound_top_s);
                assert_true(o->compute_s == slow.compute_s && o->bubble_s == slow.bubble_s);
                assert_true(o->dp_comm_s == slow.dp_comm_s && o->mfu == slow.mfu);
            }
            for (int st = 0; st < 2; st++) {
                const stage_ops *a = st ? &slow.last_stage : &slow.first_stage, *b = st ? &fast.last_stage : &fast.first_stage;
                assert_int_equal(a->nops, b->nops);
                for (int i = 0; i < a->nops; i++) assert_true(a->ops[i].time_s == b->ops[i].time_s);
            }
            below_top += slow.clock_fraction < 1.0;
        }
    estimate_cache_free(cache);
    assert_true(below_top >= 2 * 5);

    /* a pipeline of 8: both stages' ops at the step's clock */
    hw_gpu plain = *hwdb_find_gpu(&db, "h100-sxm");
    static estimate_t top;
    estimate_into("llama2-7b", &plain, cases[2].l, &top);
    estimate_into("llama2-7b", &capped, cases[2].l, &slow);
    double x = slow.clock_fraction;
    assert_true(x > 0.3 && x < 1.0);
    assert_true(slow.step_s > top.step_s);
    assert_true(slow.step_power_w <= 700.0 * (1.0 + 1e-9));
    /* the power is the slowest stage's GPU's: here the last, with the LM head */
    assert_int_equal(top.slowest_stage, 7);
    assert_int_equal(slow.slowest_stage, 7);
    double energy = 0.0, clock_bound = 0.0;
    for (int i = 0; i < slow.last_stage.nops; i++) {
        const op_t *op = &slow.last_stage.ops[i];
        double per_step = (double)op->count * (op->pass == PASS_STEP ? 1.0 : (double)slow.microbatches);
        energy += op->energy_j * per_step;
        clock_bound += op->clock_bound_s * per_step;
    }
    assert_close(slow.clock_bound_top_s, clock_bound, 1e-12);
    assert_close(slow.top_clock_power_w, 124.5 + energy / top.step_s, 1e-12);
    /* the bubble slows with the other stages: the settled step, not the top-clock one, meets the cap (the
     * one-shot solve on the top-clock step put the clock too low), and x is the fixed point of the solve on
     * what the settled step leaves beside CB / x */
    assert_close(slow.step_power_w, 700.0, 1e-6);
    assert_close(x, power_capped_clock_fraction(124.5, 700.0, energy, slow.step_s - clock_bound / x, clock_bound, 2.0, 0.3),
                 1e-9);
    assert_true(x > power_capped_clock_fraction(124.5, 700.0, energy, top.step_s - clock_bound, clock_bound, 2.0, 0.3));
    for (int st = 0; st < 2; st++) {
        const stage_ops *a = st ? &slow.last_stage : &slow.first_stage, *t = st ? &top.last_stage : &top.first_stage;
        assert_int_equal(a->nops, t->nops);
        int stretched = 0;
        for (int i = 0; i < a->nops; i++) {
            if (a->ops[i].clock_bound_s == 0.0) assert_true(a->ops[i].time_s == t->ops[i].time_s);
            else assert_close(a->ops[i].time_s, t->ops[i].time_s + a->ops[i].clock_bound_s * (1.0 / x - 1.0), 1e-12);
            stretched += a->ops[i].clock_bound_s > 0.0;
        }
        assert_true(stretched > 0);
    }
}

/* Data parallel over a slow NIC: slower compute hides more of the gradient
 * reduction, so the step at x is shorter than the top-clock step stretched by
 * CB (1/x - 1).  The settled step must still draw the cap (the one-shot solve
 * left it at 703.9 W here), and x must be the fixed point. */
static void power_cap_settles_with_exposed_data_parallel(void **state)
{
    (void)state;
    hw_gpu capped = *hwdb_find_gpu(&db, "h100-sxm");
    capped.power_cap_w = 700.0;
    capped.clock_max_hz = 1980e6;
    capped.power_static_w = 124.5;
    capped.energy_gemm_j_per_flop = 0.955e-12;
    capped.energy_attention_j_per_flop = 2.886e-12;
    capped.energy_j_per_byte = 149e-12;
    capped.clock_energy_exponent = 2.0;
    hw_node slow_nic = *hwdb_find_node(&db, capped.node);
    slow_nic.nic_bits_per_s = 25e9;
    layout_t l = layout(16, 1, 1, 8, 16 * 8 * 4, 1024);
    l.gpus_per_node = slow_nic.gpus_per_node;
    job_t job = {2e12, capped.cloud_usd_per_gpu_hour};
    char err[512];
    static estimate_t e;
    const model_t *m = model_zoo_find(&zoo, "gpt2");
    assert_non_null(m);
    assert_int_equal(estimate_layout(m, &capped, &slow_nic, &l, &job, &e, err, sizeof err), 0);
    double x = e.clock_fraction;
    assert_true(x > 0.3 && x < 1.0);
    assert_true(e.dp_comm_s > 0.0);   /* some of the reduction stays exposed: the case this test is for */
    assert_close(e.step_power_w, 700.0, 1e-6);
    /* P(x) = static + E x^2 / step: E from the top-clock power and step */
    static estimate_t top;
    hw_gpu plain = *hwdb_find_gpu(&db, "h100-sxm");
    assert_int_equal(estimate_layout(m, &plain, &slow_nic, &l, &job, &top, err, sizeof err), 0);
    double dynamic_j = (e.top_clock_power_w - 124.5) * top.step_s;
    assert_close(x, power_capped_clock_fraction(124.5, 700.0, dynamic_j, e.step_s - e.clock_bound_top_s / x,
                                                e.clock_bound_top_s, 2.0, 0.3), 1e-9);
    assert_true(e.step_s < top.step_s + e.clock_bound_top_s * (1.0 / x - 1.0));
}

/* fit-power's reader: a two-stage pipeline's CSV gives its layout and the
 * slower stage's measured step; a run of another GPU is refused at its line. */
static void power_fit_reads_a_pipeline_run(void **state)
{
    (void)state;
    const hw_gpu *h200 = hwdb_find_gpu(&db, "h200");
    assert_non_null(h200);
    const hw_node *node = hwdb_find_node(&db, h200->node);
    static power_fit_run run;
    char err[512];
    const char *path = SEXTANT_ROOT "/tests/data/2026-11-23-h200x2-train-pp2.csv";
    if (power_fit_read_run(path, &zoo, h200, node, &run, err, sizeof err) != 0) {
        print_error("%s\n", err);
        fail();
    }
    assert_string_equal(run.model.name, "gpt2-medium");
    assert_true(run.model.dropout == 0);
    assert_true(run.layout.gpus == 2 && run.layout.pp == 2 && run.layout.tp == 1 && run.layout.dp == 1);
    assert_true(run.layout.mbs == 8 && run.layout.gbs == 64 && run.layout.seq == 1024);
    assert_true(run.layout.recompute == RECOMPUTE_NONE && run.layout.attention == ATTENTION_UNFUSED);
    assert_close(run.measured_s, 2.446229e-01, 1e-12); /* stage 0's 0.2446229 s, not stage 1's 0.2445891 */

    const hw_gpu *h100 = hwdb_find_gpu(&db, "h100-sxm");
    assert_int_equal(power_fit_read_run(path, &zoo, h100, node, &run, err, sizeof err), -1);
    assert_non_null(strstr(err, "2026-11-23-h200x2-train-pp2.csv:"));
    assert_non_null(strstr(err, ":gpu: 'h200', but the fit is for h100-sxm"));
    /* without the power model the fit refuses, naming the way to get one */
    static power_fit_run two[2];
    static power_fit_result fit;
    assert_int_equal(power_fit_read_run(path, &zoo, h200, node, &two[0], err, sizeof err), 0);
    two[1] = two[0];
    assert_int_equal(power_fit_steps(h200, node, two, 2, &fit, err, sizeof err), -1);
    assert_non_null(strstr(err, "has no power model in the overlay"));
}

/* The fitted overlay: the two fitted rows replace the old ones (or are appended), every other
 * line kept byte for byte, the source naming who fitted it and the runs; a missing overlay is
 * refused by name. */
static void power_fit_overlay_replaces_two_rows(void **state)
{
    (void)state;
    const hw_gpu *h100 = hwdb_find_gpu(&db, "h100-sxm");
    assert_non_null(h100);
    char dir[] = "/tmp/sextant-overlay-XXXXXX", path[128], err[512];
    assert_non_null(mkdtemp(dir));
    snprintf(path, sizeof path, "%s/overlay.csv", dir);
    FILE *f = fopen(path, "w");
    assert_non_null(f);
    fputs("gpu,key,value,source\n# a comment\nh100-sxm,clock_energy_exponent,2.04,calibrate\nh200,clock_energy_exponent,"
          "1.5,other gpu\nh100-sxm,gemm_efficiency,0.86,calibrate",
          f);
    fclose(f);
    static power_fit_run runs[2];
    snprintf(runs[0].path, sizeof runs[0].path, "/x/train_gpt2_mbs8.csv");
    snprintf(runs[1].path, sizeof runs[1].path, "flash_gpt2_mbs8.csv");
    power_fit_result fit = {.exponent = 1.3875, .energy_attention_j_per_flop = 4.5e-12};
    char *text = NULL;
    size_t len = 0;
    assert_int_equal(power_fit_overlay_text(path, h100, "test fit", runs, 2, &fit, &text, &len, err, sizeof err), 0);
    assert_int_equal(strlen(text), len);
    assert_non_null(strstr(text, "gpu,key,value,source\n# a comment\nh100-sxm,clock_energy_exponent,1.3875,\"test fit "));
    assert_non_null(strstr(text, " on 2 validate runs: train_gpt2_mbs8.csv flash_gpt2_mbs8.csv\"\n"));
    assert_non_null(strstr(text, "\nh200,clock_energy_exponent,1.5,other gpu\nh100-sxm,gemm_efficiency,0.86,calibrate\n"));
    assert_non_null(strstr(text, "\nh100-sxm,energy_attention_pj_per_flop,4.50000,\"test fit ")); /* appended */
    assert_null(strstr(text, "2.04"));
    free(text);
    unlink(path);
    assert_int_equal(power_fit_overlay_text(path, h100, "test fit", runs, 2, &fit, &text, &len, err, sizeof err), -1);
    assert_null(text);
    assert_non_null(strstr(err, "overlay.csv: cannot read"));
    rmdir(dir);
}

/* The layout names every reader shares (CLI flags, validate CSVs, plan JSON): each name parses back
 * to its value, ignoring case; anything else is refused. */
static void layout_names_parse_back(void **state)
{
    (void)state;
    for (recompute_t r = RECOMPUTE_NONE; r <= RECOMPUTE_FULL; r++) {
        recompute_t back = (recompute_t)-1;
        assert_int_equal(recompute_parse(recompute_name(r), &back), 0);
        assert_int_equal(back, r);
    }
    for (attention_impl_t a = ATTENTION_FLASH; a < ATTENTION_COUNT; a++) {
        attention_impl_t back = (attention_impl_t)-1;
        assert_int_equal(attention_parse(attention_name(a), &back), 0);
        assert_int_equal(back, a);
    }
    recompute_t r = RECOMPUTE_NONE;
    attention_impl_t a = ATTENTION_FLASH;
    assert_int_equal(recompute_parse("FULL", &r), 0);
    assert_int_equal(r, RECOMPUTE_FULL);
    assert_int_equal(attention_parse("Unfused", &a), 0);
    assert_int_equal(a, ATTENTION_UNFUSED);
    assert_int_equal(recompute_parse("some", &r), -1);
    assert_int_equal(recompute_parse(NULL, &r), -1);
    assert_int_equal(attention_parse("flash2", &a), -1);
    assert_int_equal(r, RECOMPUTE_FULL); /* a refusal leaves the value */
    assert_int_equal(a, ATTENTION_UNFUSED);
}

/* A small seeded generator (xorshift64*), so that a failure reproduces. */
static uint64_t prng_next(uint64_t *state)
{
    *state ^= *state >> 12;
    *state ^= *state << 25;
    *state ^= *state >> 27;
    return *state * 0x2545f4914f6cdd1dULL;
}

static int64_t prng_below(uint64_t *state, int64_t n) { return (int64_t)(prng_next(state) % (uint64_t)n); }

/* A random layout of m on g that layout_check accepts in its degrees (the estimate may still refuse
 * it, as it refuses a user's: that is counted, not failed). */
static layout_t random_layout(uint64_t *rng, const model_t *m, const hw_gpu *g, const hw_node *n)
{
    layout_t l;
    memset(&l, 0, sizeof l);
    l.tp = (int64_t)1 << prng_below(rng, 5);
    while (l.tp > m->heads) l.tp /= 2;
    /* half the draws on one pipeline stage and one data-parallel rank: compute-bound layouts,
     * where a count above what executes would show */
    int64_t max_pp = m->layers < 16 ? m->layers : 16;
    l.pp = prng_below(rng, 2) ? 1 : 1 + prng_below(rng, max_pp);
    l.vpp = 1;
    if (l.pp > 1 && prng_below(rng, 3) == 0) {
        l.vpp = (int64_t)2 << prng_below(rng, 2);
        while (l.vpp > 1 && m->layers < l.pp * l.vpp) l.vpp /= 2;
    }
    l.dp = prng_below(rng, 2) ? 1 : 1 + prng_below(rng, 64);
    /* a third of the draws with context parallelism, ring or all-gather */
    l.cp = prng_below(rng, 3) == 0 ? (int64_t)2 << prng_below(rng, 3) : 1;
    l.cp_comm = (cp_comm_t)prng_below(rng, 2);
    /* a mixture of experts: an EP degree that divides its experts and dp x cp, half the time */
    l.ep = 1;
    if (model_is_moe(m) && prng_below(rng, 2))
        for (int64_t ep = (int64_t)1 << prng_below(rng, 7); ep > 1 && l.ep == 1; ep /= 2)
            if (m->experts % ep == 0 && (l.dp * l.cp) % ep == 0) l.ep = ep;
    l.ep_overlap = (int)prng_below(rng, 2);
    l.gpus = l.tp * l.cp * l.pp * l.dp;
    l.mbs = (int64_t)1 << prng_below(rng, 4);
    int64_t microbatches = l.vpp > 1 ? l.pp * (1 + prng_below(rng, 4)) : 1 + prng_below(rng, 32);
    l.gbs = microbatches * l.mbs * l.dp;
    l.seq = (int64_t)128 << prng_below(rng, 13);     /* 128 to 524288 */
    l.gpus_per_node = n->gpus_per_node;
    l.recompute = (recompute_t)prng_below(rng, 3);
    l.attention = (attention_impl_t)prng_below(rng, ATTENTION_COUNT);
    l.tp_overlap = (tp_overlap_t)prng_below(rng, 2);
    l.grad_sync = (grad_sync_t)prng_below(rng, 2);
    l.sp = l.tp > 1 && prng_below(rng, 2);
    l.zero = (int)prng_below(rng, 4);
    if (l.zero <= 1) l.grad_accum = (grad_accum_t)prng_below(rng, 2);
    l.fp32_grads = (int)prng_below(rng, 2);
    do l.precision = (precision_t)prng_below(rng, PREC_COUNT);
    while (g->peak_flops[l.precision] <= 0.0);
    return l;
}

/* MFU and HFU are fractions of what the GPU can execute: never above 1, and MFU never above HFU; no
 * memory or time is negative; over random models, GPUs (hwdb defaults, and the shipped H100 overlay's
 * measured shapes and power model) and layouts, context and expert parallelism, every attention kernel,
 * TP overlap and gradient sync included. */
static void utilization_never_exceeds_peak(void **state)
{
    (void)state;
    hwdb measured;
    char err[512];
    if (hwdb_load(SEXTANT_ROOT "/hwdb", &measured, err, sizeof err) != 0 ||
        hwdb_apply_overlay(&measured, SEXTANT_ROOT "/hwdb/measured/h100-sxm.csv", err, sizeof err) != 0) {
        print_error("%s\n", err);
        fail();
    }
    const hw_gpu *calibrated = hwdb_find_gpu(&measured, "h100-sxm");
    assert_non_null(calibrated);
    uint64_t rng = 0x5eed2026u;
    static estimate_t e;
    int draws = 2000, estimated = 0, with_cp = 0, with_ep = 0;
    for (int i = 0; i < draws; i++) {
        const model_t *m = &zoo.models[prng_below(&rng, zoo.count)];
        const hw_gpu *g = prng_below(&rng, 4) == 0 ? calibrated : &db.gpus[prng_below(&rng, db.ngpus)];
        const hw_node *n = hwdb_find_node(g == calibrated ? &measured : &db, g->node);
        assert_non_null(n);
        layout_t l = random_layout(&rng, m, g, n);
        job_t job = {1e12, 2.0};
        if (estimate_layout(m, g, n, &l, &job, &e, err, sizeof err) != 0) continue;
        estimated++;
        with_cp += l.cp > 1;
        with_ep += l.ep > 1;
        const double parts[] = {e.memory.weights, e.memory.gradients, e.memory.optimizer, e.memory.activations,
                                e.memory.logits, e.memory.other, e.compute_s, e.tp_comm_s, e.cp_comm_s, e.ep_comm_s,
                                e.pp_comm_s, e.dp_comm_s, e.bubble_s, e.optimizer_s, e.step_s};
        for (size_t k = 0; k < sizeof parts / sizeof parts[0]; k++)
            if (!(parts[k] >= 0.0)) {
                print_error("draw %d: %s, cp %lld ep %lld: part %zu of memory and time is %g\n", i, m->name,
                            (long long)l.cp, (long long)l.ep, k, parts[k]);
                fail();
            }
        if (!(e.mfu <= 1.0 && e.hfu <= 1.0 && e.mfu <= e.hfu * (1.0 + 1e-12))) {
            print_error("draw %d: %s on %lld x %s, tp %lld pp %lld vpp %lld dp %lld mbs %lld gbs %lld seq %lld, "
                        "recompute %s, %s, sp %d, zero %d, %s: MFU %.4f HFU %.4f\n", i, m->name, (long long)l.gpus,
                        g->name, (long long)l.tp, (long long)l.pp, (long long)l.vpp, (long long)l.dp, (long long)l.mbs,
                        (long long)l.gbs, (long long)l.seq, recompute_name(l.recompute), attention_name(l.attention),
                        l.sp, l.zero, precision_name(l.precision), e.mfu, e.hfu);
            fail();
        }
    }
    hwdb_free(&measured);
    /* the draws must mostly be estimable, or the property says little */
    assert_true(estimated >= draws / 2);
    print_message("%d of %d draws estimated, %d with CP, %d with EP\n", estimated, draws, with_cp, with_ep);
    assert_true(with_cp >= draws / 20 && with_ep >= draws / 100);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(issue_example_is_plausible),
        cmocka_unit_test(zero_stages_shard_in_order),
        cmocka_unit_test(zero3_first_and_last_layer_exposed),
        cmocka_unit_test(partial_recomputation_is_in_proportion),
        cmocka_unit_test(fp32_loss_costs_its_passes),
        cmocka_unit_test(fp32_gradients_cost_two_more_bytes),
        cmocka_unit_test(recomputation_trades_memory_for_flops),
        cmocka_unit_test(gpt3_flops_match_narayanan),
        cmocka_unit_test(does_not_fit_is_reported_not_refused),
        cmocka_unit_test(tp_across_node_and_ratio_limit),
        cmocka_unit_test(bubble_and_divisibility_warnings),
        cmocka_unit_test(impossible_layouts_are_refused),
        cmocka_unit_test(sequence_beyond_trained_positions_warns),
        cmocka_unit_test(pipeline_stages_split_memory),
        cmocka_unit_test(moe_counts_active_parameters),
        cmocka_unit_test(calibrated_flash_attention_efficiency),
        cmocka_unit_test(flash1_is_flash_at_its_relative_speed),
        cmocka_unit_test(tp_backward_overlap_hides_behind_its_gemms),
        cmocka_unit_test(grad_sync_after_the_flush_is_exposed),
        cmocka_unit_test(grad_accum_fp32_copy_costs_a_pass_and_fp32_traffic),
        cmocka_unit_test(calibrated_shape_tables_and_membound_overhead),
        cmocka_unit_test(power_model_off_or_under_the_cap_keeps_the_top_clock),
        cmocka_unit_test(power_cap_slows_the_clock_bound_work),
        cmocka_unit_test(power_cap_which_gemms_follow_the_clock),
        cmocka_unit_test(power_cap_same_on_every_entry_point),
        cmocka_unit_test(power_cap_settles_with_exposed_data_parallel),
        cmocka_unit_test(power_fit_reads_a_pipeline_run),
        cmocka_unit_test(power_fit_overlay_replaces_two_rows),
        cmocka_unit_test(layout_names_parse_back),
        cmocka_unit_test(utilization_never_exceeds_peak),
    };
    return cmocka_run_group_tests_name("estimate", tests, setup_datasheets, teardown_shipped);
}
