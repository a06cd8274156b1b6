/* The clock under the power cap (docs/model.md) and fit-power's library side:
 * without the power model, or under a cap no step reaches, the step is the top
 * clock's to the bit; over the cap the clock-bound work slows until the step
 * draws the cap, the same on every entry point and with exposed data-parallel
 * communication; fit-power reads a pipeline run and writes an overlay that
 * replaces only the two rows it fitted. */
#include "test_estimate_util.h"

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
    assert_close(x, power_capped_clock_fraction(124.5, 700.0, energy, top.step_s - clock_bound, 0.0, clock_bound, 2.0, 1.0, 1.0, 0.3), 1e-12);
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

/* A measured clock_time_factor K and clock_time_exponent b (docs/model.md, "GEMM time against the clock"): the
 * GEMMs' clock-bound seconds G take K x^-b of their top-clock time, the other clock-bound seconds A (the fused
 * attention) 1 / x.  Under a cap no step reaches, x = 1 and the step is longer than the top clock's by exactly
 * (K - 1) G (one GPU: nothing else moves), each GEMM by its own and nothing else.  Over the cap, x is the root of
 * the generalized P(x) = cap and the step is longer by G (K x^-b - 1) + A (1 / x - 1); K = b = 1 in the overlay is
 * the plain model to the bit.  G and A are summed here again from the costed ops. */
static void power_cap_with_measured_clock_time(void **state)
{
    (void)state;
    hw_gpu plain = *hwdb_find_gpu(&db, "h100-sxm");
    plain.attention_fwd_efficiency = plain.attention_bwd_efficiency = plain.gemm_half_flops = 0.0;
    plain.launch_overhead_s = plain.membound_overhead_s = 0.0;
    layout_t l = layout(1, 1, 1, 8, 16, 1024);
    l.attention = ATTENTION_SEXTANT;
    static estimate_t top, ref, uncapped, capped_kb;
    estimate_into("gpt2", &plain, l, &top);

    hw_gpu ones = plain;
    power_model(&ones, 700.0);
    estimate_into("gpt2", &ones, l, &ref);
    ones.clock_time_factor = ones.clock_time_exponent = 1.0;
    estimate_into("gpt2", &ones, l, &capped_kb);
    assert_true(capped_kb.step_s == ref.step_s && capped_kb.clock_fraction == ref.clock_fraction);

    hw_gpu roomy = plain;
    power_model(&roomy, 1e6);
    roomy.clock_time_factor = 1.07;
    roomy.clock_time_exponent = 0.35;
    estimate_into("gpt2", &roomy, l, &uncapped);
    assert_true(uncapped.clock_fraction == 1.0);
    double gemm = 0.0, other = 0.0;
    for (int i = 0; i < uncapped.first_stage.nops; i++) {
        const op_t *op = &uncapped.first_stage.ops[i];
        double per_step = (double)op->count * (op->pass == PASS_STEP ? 1.0 : (double)uncapped.microbatches);
        if (op->kind == OP_GEMM) gemm += op->clock_bound_s * per_step;
        else other += op->clock_bound_s * per_step;
        double stretch = op->kind == OP_GEMM ? 0.07 : 0.0;
        assert_close(op->time_s, top.first_stage.ops[i].time_s + stretch * op->clock_bound_s, 1e-12);
    }
    assert_true(gemm > 0.0 && other > 0.0);   /* GEMMs and the fused attention: the case this test is for */
    assert_close(uncapped.clock_bound_top_s, gemm + other, 1e-12);
    assert_close(uncapped.clock_bound_s, 1.07 * gemm + other, 1e-12);
    assert_close(uncapped.step_s - top.step_s, 0.07 * gemm, 1e-9);

    hw_gpu capped = roomy;
    capped.power_cap_w = 700.0;
    estimate_into("gpt2", &capped, l, &capped_kb);
    double x = capped_kb.clock_fraction;
    assert_true(x > 0.3 && x < 1.0);
    assert_close(capped_kb.step_power_w, 700.0, 1e-6);
    double energy = (capped_kb.top_clock_power_w - 124.5) * top.step_s;
    assert_close(x, power_capped_clock_fraction(124.5, 700.0, energy, top.step_s - gemm - other, gemm, other, 2.0, 1.07,
                                                0.35, 0.3), 1e-12);
    assert_close(capped_kb.step_s - top.step_s, gemm * (1.07 * pow(x, -0.35) - 1.0) + other * (1.0 / x - 1.0), 1e-9);
    /* the weaker stretch needs a lower clock to meet the cap, yet the step is faster than at 1 / x */
    assert_true(x < ref.clock_fraction && capped_kb.step_s < ref.step_s);
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
    assert_close(x, power_capped_clock_fraction(124.5, 700.0, energy, slow.step_s - clock_bound / x, 0.0, clock_bound, 2.0, 1.0, 1.0, 0.3),
                 1e-9);
    assert_true(x > power_capped_clock_fraction(124.5, 700.0, energy, top.step_s - clock_bound, 0.0, clock_bound, 2.0, 1.0, 1.0, 0.3));
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
    assert_close(x, power_capped_clock_fraction(124.5, 700.0, dynamic_j, e.step_s - e.clock_bound_top_s / x, 0.0, e.clock_bound_top_s, 2.0, 1.0, 1.0, 0.3), 1e-9);
    assert_true(e.step_s < top.step_s + e.clock_bound_top_s * (1.0 / x - 1.0));
}

/* A collective draws collective_power_w while it runs: its seconds add (collective_power_w - static) x seconds
 * to the step's energy, in the part that costs it: TP's per micro-batch (body), the pipeline's send/recvs per
 * micro-batch, the gradient's once per step (docs/model.md, "Clock under the power cap").  Under a cap no step
 * reaches the times are the same to the bit; the top-clock power grows by exactly that energy over the step,
 * summed here again from the slowest stage's costed collectives.  Below the static power, or 0, it adds nothing. */
/* The slowest GPU (docs/model.md, "Clock under the power cap"): with a chip-to-chip spread of the static power a
 * capped step is settled for the leakiest of its GPUs, power_static_w + spread x E_n; one GPU, or a step under
 * the cap even for that chip, does not move, and the clock falls as the job grows. */
static void the_leakiest_gpu_sets_a_capped_step(void **state)
{
    (void)state;
    hw_gpu g = *hwdb_find_gpu(&db, "h100-sxm");
    power_model(&g, 500.0);
    static estimate_t even, spread, one_even, one_spread, many_even, many, uncapped;
    layout_t l = layout(64, 1, 1, 2, 128, 1024);   /* DP 64: every GPU the same work */
    g.power_static_spread_w = 0.0;
    estimate_into("gpt2-medium", &g, l, &even);
    g.power_static_spread_w = 27.0;
    estimate_into("gpt2-medium", &g, l, &spread);
    assert_true(even.clock_fraction < 1.0);
    assert_true(spread.clock_fraction < even.clock_fraction && spread.step_s > even.step_s);
    /* it is the capped solve with the leakiest chip's static power: that chip draws the cap */
    assert_close(spread.step_power_w, 500.0, 1e-6);
    /* one GPU has nothing to wait for */
    layout_t one = layout(1, 1, 1, 2, 2, 1024);
    g.power_static_spread_w = 0.0;
    estimate_into("gpt2-medium", &g, one, &one_even);
    g.power_static_spread_w = 27.0;
    estimate_into("gpt2-medium", &g, one, &one_spread);
    assert_true(one_spread.step_s == one_even.step_s && one_spread.clock_fraction == one_even.clock_fraction);
    /* more GPUs, a leakier slowest chip: the clock falls further below the even one's */
    layout_t big = layout(1024, 1, 1, 2, 16384, 1024);   /* 8 micro-batches: the DP traffic hides, the cap binds */
    g.power_static_spread_w = 0.0;
    estimate_into("gpt2-medium", &g, big, &many_even);
    g.power_static_spread_w = 27.0;
    estimate_into("gpt2-medium", &g, big, &many);
    assert_true(many.clock_fraction / many_even.clock_fraction < spread.clock_fraction / even.clock_fraction);
    /* far under the cap, the spread changes nothing */
    power_model(&g, 2000.0);
    estimate_into("gpt2-medium", &g, big, &uncapped);
    assert_true(uncapped.clock_fraction == 1.0);
}

static void collectives_draw_their_power(void **state)
{
    (void)state;
    hw_gpu g = *hwdb_find_gpu(&db, "h100-sxm");
    power_model(&g, 1e6);
    layout_t l = layout(8, 2, 2, 4, 32, 1024);   /* TP 2, PP 2, DP 2: every part has collectives */
    l.sp = 1;
    l.zero = 1;
    static estimate_t none, drawn, below;
    g.collective_power_w = 0.0;
    estimate_into("gpt2", &g, l, &none);
    g.collective_power_w = 124.5 + 100.0;
    estimate_into("gpt2", &g, l, &drawn);
    assert_true(drawn.clock_fraction == 1.0 && none.clock_fraction == 1.0);
    assert_true(drawn.step_s == none.step_s && drawn.tp_comm_s == none.tp_comm_s && drawn.pp_comm_s == none.pp_comm_s);
    const stage_ops *s = drawn.slowest_stage == drawn.first_stage.stage ? &drawn.first_stage : &drawn.last_stage;
    double seconds = 0.0;
    int kinds[3] = {0, 0, 0};  /* TP, PP, DP collectives seen */
    for (int i = 0; i < s->nops; i++) {
        const op_t *op = &s->ops[i];
        if (op->kind != OP_COMM) {
            continue;
        }
        assert_false(op->host_sync);
        double per = op->time_s * (double)op->count;
        seconds += op->pass == PASS_STEP ? per : per * (double)drawn.microbatches;
        assert_close(op->energy_j, 100.0 * op->time_s, 1e-12);
        kinds[op->group == GROUP_TP ? 0 : op->group == GROUP_PP ? 1 : 2]++;
    }
    assert_true(kinds[0] > 0 && kinds[1] > 0 && kinds[2] > 0);
    /* what ran beside compute draws as the compute does: its seconds and the compute's loss beside it are out of the
     * power (docs/model.md, "Clock under the power cap", overlapped collectives) */
    assert_true(drawn.overlap_beside_s > 0.0 && drawn.overlap_beside_s < seconds && drawn.overlap_slowdown_s >= 0.0);
    assert_true(drawn.overlap_slowdown_s == none.overlap_slowdown_s && drawn.overlap_beside_s == none.overlap_beside_s);
    assert_close((drawn.top_clock_power_w - none.top_clock_power_w) * (drawn.step_s - drawn.overlap_slowdown_s),
                 100.0 * (seconds - drawn.overlap_beside_s), 1e-9);
    /* no draw below the static power */
    g.collective_power_w = 100.0;
    estimate_into("gpt2", &g, l, &below);
    assert_true(below.top_clock_power_w == none.top_clock_power_w);
    assert_true(collective_energy_j(2.0, 300.0, 100.0) == 400.0 && collective_energy_j(2.0, 0.0, 100.0) == 0.0);

    /* under a cap below that step's top-clock power the collectives' draw lowers the clock further */
    static estimate_t capped_none, capped_drawn;
    double cap = 0.9 * none.top_clock_power_w;
    g.power_cap_w = cap;
    g.collective_power_w = 0.0;
    estimate_into("gpt2", &g, l, &capped_none);
    g.collective_power_w = 279.0;
    estimate_into("gpt2", &g, l, &capped_drawn);
    assert_true(capped_none.clock_fraction < 1.0);
    assert_true(capped_drawn.clock_fraction < capped_none.clock_fraction);
    assert_true(capped_drawn.step_s > capped_none.step_s);
    assert_close(capped_drawn.step_power_w, cap, 1e-6);
}

/* Overlapped collectives and the compute they slow draw together what the compute draws alone (docs/model.md, "Clock
 * under the power cap", overlapped collectives; measured: the clock of ZeRO-1, 2 and 3 of one model within 3%,
 * docs/validation/2026-11-27-h200x2-zero-overhead): slowing the compute beside them lengthens the step and leaves
 * its clock where it was; and sextant's step, whose ZeRO waits are the step's ends', pays 1/m of FSDP's. */
static void overlapped_collectives_leave_the_clock(void **state)
{
    (void)state;
    hw_gpu g = *hwdb_find_gpu(&db, "h100-sxm");
    power_model(&g, 1e6);
    g.collective_power_w = 279.0;
    layout_t l = layout(2, 1, 1, 2, 64, 1024);   /* DP 2, 16 micro-batches */
    l.zero = 3;
    l.zero_waits = ZERO_WAITS_STEP;
    static estimate_t top, free_overlap, slowed;
    estimate_into("gpt2-medium", &g, l, &top);
    g.power_cap_w = 0.85 * top.top_clock_power_w;
    g.overlap_compute_slowdown_allgather = g.overlap_compute_slowdown_reducescatter = 0.0;
    g.overlap_compute_slowdown_allreduce = g.overlap_comm_slowdown = 0.0;
    estimate_into("gpt2-medium", &g, l, &free_overlap);
    g.overlap_compute_slowdown_allgather = 0.39;
    g.overlap_compute_slowdown_reducescatter = 0.36;
    g.overlap_compute_slowdown_allreduce = 0.50;
    g.overlap_comm_slowdown = 0.545;
    estimate_into("gpt2-medium", &g, l, &slowed);
    assert_true(free_overlap.clock_fraction < 1.0);
    assert_true(free_overlap.overlap_slowdown_s == 0.0 && slowed.overlap_slowdown_s > 0.01 * slowed.step_s);
    assert_true(slowed.step_s > free_overlap.step_s);
    assert_close(slowed.clock_fraction, free_overlap.clock_fraction, 1e-9);
    assert_close(slowed.step_power_w, g.power_cap_w, 1e-6);

    /* FSDP's waits: each micro-batch's first gather and last reduce-scatter; sextant's: the step's */
    static estimate_t fsdp;
    l.zero_waits = ZERO_WAITS_MICROBATCH;
    estimate_into("gpt2-medium", &g, l, &fsdp);
    assert_true(fsdp.dp_comm_s > slowed.dp_comm_s);
    l.gbs = 4;   /* one micro-batch: the two are one */
    static estimate_t one_fsdp, one_step;
    estimate_into("gpt2-medium", &g, l, &one_fsdp);
    l.zero_waits = ZERO_WAITS_STEP;
    estimate_into("gpt2-medium", &g, l, &one_step);
    assert_true(one_fsdp.step_s == one_step.step_s);
}

/* fit-power's reader: a two-stage pipeline's CSV gives its layout and the
 * slower stage's measured step; a run of another GPU is refused at its line. */
/* An FP8 GEMM FLOP draws the 16-bit energy times peak_16 / peak_fp8 (the tensor cores run FP8 at twice the rate
 * within the same power); the output layer, kept 16-bit, its own; the backward's FP8 GEMMs run at the rate
 * calibrate measured without fast accumulation, the forward's unchanged (docs/model.md, "FP8 GEMMs"). */
static void fp8_energy_and_backward_rate(void **state)
{
    (void)state;
    hw_gpu g = *hwdb_find_gpu(&db, "h100-sxm");
    power_model(&g, 1e6);
    layout_t l = layout(1, 1, 1, 4, 4, 2048);
    l.precision = PREC_FP8;
    static estimate_t e, slow;
    estimate_into("llama3.2-1b", &g, l, &e);
    const op_t *qkv = costed_op(&e, "qkv", PASS_FWD), *head = costed_op(&e, "lm_head", PASS_FWD);
    double ratio = g.peak_flops[PREC_BF16] / g.peak_flops[PREC_FP8];
    assert_true(ratio > 0.4 && ratio < 0.6);
    assert_close(qkv->energy_j, g.energy_gemm_j_per_flop * ratio * qkv->flops + g.energy_j_per_byte * qkv->bytes, 1e-12);
    assert_close(head->energy_j, g.energy_gemm_j_per_flop * head->flops + g.energy_j_per_byte * head->bytes, 1e-12);
    assert_close(gemm_energy_j_per_flop(1.0, 2.0, 4.0, 0), 1.0, 1e-15);
    g.fp8_gemm_relative_efficiency = 0.9;
    estimate_into("llama3.2-1b", &g, l, &e);
    g.fp8_backward_gemm_relative_efficiency = 0.6;
    estimate_into("llama3.2-1b", &g, l, &slow);
    assert_close(costed_op(&slow, "mlp_up", PASS_FWD)->time_s, costed_op(&e, "mlp_up", PASS_FWD)->time_s, 1e-15);
    assert_true(costed_op(&slow, "mlp_up_dgrad", PASS_BWD)->time_s > 1.2 * costed_op(&e, "mlp_up_dgrad", PASS_BWD)->time_s);
    assert_true(costed_op(&slow, "mlp_up_wgrad", PASS_BWD)->time_s > 1.2 * costed_op(&e, "mlp_up_wgrad", PASS_BWD)->time_s);
    /* the output layer stays 16-bit: no FP8 rate at all */
    assert_close(costed_op(&slow, "lm_head_dgrad", PASS_BWD)->time_s, costed_op(&e, "lm_head_dgrad", PASS_BWD)->time_s, 1e-15);
}

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

/* fit-power's clock time regression (docs/model.md, "GEMM time against the clock"): five copies of a recorded one-GPU
 * run whose forward GEMMs are made to take K (top / clock)^b of the planner's top-clock time at NVML clocks from
 * 1980 down to 1600 MHz; the regression recovers K and b (to rounding: the data lie on the line), and the overlay
 * gets the two rows.  The top-clock seconds are summed here again from the costed ops, by name, as the CSV names
 * them.  Clocks all below 97% of the top leave them unfitted, with why. */
static void power_fit_regresses_the_clock_time(void **state)
{
    (void)state;
    hw_gpu g = *hwdb_find_gpu(&db, "h200");
    power_model(&g, 700.0);
    const hw_node *node = hwdb_find_node(&db, g.node);
    char err[512];
    static power_fit_run runs[5];
    const char *path = SEXTANT_ROOT "/tests/data/2026-11-26-h200-calibrated/one-gpu/flash_gpt2_mbs8.csv";
    assert_int_equal(power_fit_read_run(path, &zoo, &g, node, &runs[0], err, sizeof err), 0);
    assert_true(runs[0].nforward >= 5);
    static estimate_t e;
    job_t job = {1e9, g.cloud_usd_per_gpu_hour};
    assert_int_equal(estimate_layout(&runs[0].model, &g, node, &runs[0].layout, &job, &e, err, sizeof err), 0);
    double top_of[POWER_FIT_OPS_MAX] = {0};
    int gemms = 0;
    for (int j = 0; j < runs[0].nforward; j++) {
        for (int i = 0; i < e.first_stage.nops; i++) {
            const op_t *op = &e.first_stage.ops[i];
            if (op->kind == OP_GEMM && op->pass == PASS_FWD && op->clock_bound_s > 0.0 && !strcmp(op->name, runs[0].forward_op[j]))
                top_of[j] += op->clock_bound_s * (double)op->count * (double)e.microbatches;
        }
        gemms += top_of[j] > 0.0;
    }
    assert_true(gemms >= 4);   /* qkv, attn_out, mlp_up, mlp_down, lm_head */
    const double mhz[5] = {1980, 1900, 1800, 1700, 1600}, k = 1.07, b = 0.4;
    /* each step as the overlay prices it without the clock time (1 / x): "before" is exact, so only a grid
     * that starts from the regressed clock time's cost can improve on where it starts */
    runs[0].measured_s = e.step_s;
    for (int r = 0; r < 5; r++) {
        if (r) runs[r] = runs[0];
        runs[r].measured_clock_hz = mhz[r] * 1e6;
        for (int j = 0; j < runs[r].nforward; j++)
            if (top_of[j] > 0.0) runs[r].forward_measured_s[j] = top_of[j] * k * pow(1980.0 / mhz[r], b);
    }
    g.clock_max_hz = 1980e6;
    static power_fit_result fit;
    assert_int_equal(power_fit_steps(&g, node, runs, 5, &fit, err, sizeof err), 0);
    assert_int_equal(fit.time_runs, 5);
    assert_close(fit.time_factor, k, 1e-9);
    assert_close(fit.time_exponent, b, 1e-9);
    assert_true(fit.time_residual_sd < 1e-9);
    /* the grid searched under the regressed clock time: no worse than the overlay's two terms under it */
    hw_gpu start = g;
    start.clock_time_factor = k;
    start.clock_time_exponent = b;
    double start_cost = 0.0;
    for (int r = 0; r < 5; r++) {
        assert_int_equal(estimate_layout(&runs[r].model, &start, node, &runs[r].layout, &job, &e, err, sizeof err), 0);
        start_cost += (e.step_s / runs[r].measured_s - 1.0) * (e.step_s / runs[r].measured_s - 1.0);
    }
    assert_true(fit.before_cost < 1e-20 && start_cost > 1e-6);
    assert_true(fit.after_cost < 0.5 * start_cost);
    char *text = NULL;
    size_t len = 0;
    char overlay[] = "/tmp/sextant-clocktime-XXXXXX";
    int fd = mkstemp(overlay);
    assert_true(fd >= 0);
    assert_true(write(fd, "gpu,key,value,source\n", 21) == 21);
    close(fd);
    assert_int_equal(power_fit_overlay_text(overlay, &g, "test", runs, 5, &fit, &text, &len, err, sizeof err), 0);
    assert_non_null(strstr(text, "h200,clock_time_factor,1.0700,"));
    assert_non_null(strstr(text, "h200,clock_time_exponent,0.4000,"));
    free(text);
    unlink(overlay);
    /* every clock below 97% of the top: the factor at the top would be an extrapolation */
    for (int r = 0; r < 5; r++) runs[r].measured_clock_hz = (mhz[r] - 100.0) * 1e6;
    assert_int_equal(power_fit_steps(&g, node, runs, 5, &fit, err, sizeof err), 0);
    assert_int_equal(fit.time_runs, 0);
    assert_non_null(strstr(fit.time_why, "within 3% of the top clock"));
}

/* The SM clock NVML measured comes from validate's log beside the CSV (A.csv -> A.log, its "power:" line);
 * no log, or a log without that line, leaves it 0; the report then adds the clock columns only where there is
 * one. */
static void power_fit_reads_the_logged_clock(void **state)
{
    (void)state;
    const hw_gpu *h200 = hwdb_find_gpu(&db, "h200");
    const hw_node *node = hwdb_find_node(&db, h200->node);
    char dir[] = "/tmp/sextant-fitclock-XXXXXX", csv[128], log[128], cmd[512], err[512];
    assert_non_null(mkdtemp(dir));
    snprintf(csv, sizeof csv, "%s/run.csv", dir);
    snprintf(log, sizeof log, "%s/run.log", dir);
    snprintf(cmd, sizeof cmd, "cp '%s' '%s'", SEXTANT_ROOT "/tests/data/2026-11-23-h200x2-train-pp2.csv", csv);
    assert_int_equal(system(cmd), 0);
    static power_fit_run run;
    assert_int_equal(power_fit_read_run(csv, &zoo, h200, node, &run, err, sizeof err), 0);
    assert_true(run.measured_clock_hz == 0.0); /* no log */
    FILE *f = fopen(log, "w");
    assert_non_null(f);
    fputs("# a header\nstep time: median 244.62 ms\npower model: predicted 700 W at 1709 MHz\n", f);
    fclose(f);
    assert_int_equal(power_fit_read_run(csv, &zoo, h200, node, &run, err, sizeof err), 0);
    assert_true(run.measured_clock_hz == 0.0); /* a log without the measured line */
    f = fopen(log, "a");
    assert_non_null(f);
    fputs("power: 694 W and 1583 MHz SM clock at 59 C over the timed steps (NVML)\n", f);
    fclose(f);
    assert_int_equal(power_fit_read_run(csv, &zoo, h200, node, &run, err, sizeof err), 0);
    assert_close(run.measured_clock_hz, 1583e6, 1e-3);
    /* the report's clock columns and summary, from what the fit settled */
    static power_fit_run runs[2];
    runs[0] = run;
    runs[1] = run;
    runs[1].measured_clock_hz = 0.0;
    assert_close(run.measured_bytes, 20215365632.0, 0);   /* the larger of the two stages' step rows */
    runs[1].measured_bytes = 0.0;
    static power_fit_result fit;
    fit.before_s[0] = fit.after_s[0] = fit.before_s[1] = fit.after_s[1] = run.measured_s;
    fit.before_clock_hz[0] = 1662.15e6; /* +5.0% */
    fit.after_clock_hz[0] = 1503.85e6;  /* -5.0% */
    fit.before_bytes[0] = 1.02 * run.measured_bytes;
    char *text = NULL;
    size_t len = 0;
    FILE *out = open_memstream(&text, &len);
    assert_non_null(out);
    power_fit_report(out, h200, runs, 2, &fit, NULL, 0);
    fclose(out);
    assert_non_null(strstr(text, "MHz before  after"));
    assert_non_null(strstr(text, "  1583   1662   1504   18.827  19.204   +2.0%\n"));
    assert_non_null(strstr(text, "       -      -      -\n"));   /* the second run: no clock, no memory */
    assert_non_null(strstr(text, "peak memory per GPU, 1 runs: mean |error| 2.0%, signed +2.0%, worst +2.0%\n"));
    assert_non_null(strstr(text, "SM clock, 1 runs with NVML's in their log: before mean |error| 5.0%, signed +5.0%, "
                                 "worst +5.0%; after 5.0%, -5.0%, -5.0%"));
    free(text);
    snprintf(cmd, sizeof cmd, "rm -r '%s'", dir);
    assert_int_equal(system(cmd), 0);
}

/* A run's expert parallelism: the CSV's ep column where it has one (validate's CSVs from 2026-11-26 on), else
 * the log's "# mixture of experts: ... expert parallelism N" header, else 1; an EP 2 run re-priced as EP 1
 * would miss its all-to-alls. */
static void power_fit_reads_the_expert_parallelism(void **state)
{
    (void)state;
    const hw_gpu *h100 = hwdb_find_gpu(&db, "h100-sxm");
    const hw_node *node = hwdb_find_node(&db, h100->node);
    char dir[] = "/tmp/sextant-fitep-XXXXXX", csv[128], log[128], cmd[768], err[512];
    assert_non_null(mkdtemp(dir));
    snprintf(csv, sizeof csv, "%s/run.csv", dir);
    snprintf(log, sizeof log, "%s/run.log", dir);
    const char *recorded = SEXTANT_ROOT "/docs/validation/2026-11-26-h100x2-ep-messages/raw/t1_new_ep2.csv";
    snprintf(cmd, sizeof cmd, "cp '%s' '%s'", recorded, csv);
    assert_int_equal(system(cmd), 0);
    static power_fit_run run;
    assert_int_equal(power_fit_read_run(csv, &zoo, h100, node, &run, err, sizeof err), 0);
    assert_int_equal(run.layout.ep, 1); /* no log, no column */
    FILE *f = fopen(log, "w");
    assert_non_null(f);
    fputs("# sextant-gpu train moe-test: 2 GPUs (tp 1, pp 1, dp 2)\n# mixture of experts: 8 experts, top-2, expert "
          "parallelism 2 (4 experts a rank)\nstep time: median 22.40 ms\n",
          f);
    fclose(f);
    assert_int_equal(power_fit_read_run(csv, &zoo, h100, node, &run, err, sizeof err), 0);
    assert_int_equal(run.layout.ep, 2);
    assert_int_equal(run.layout.dp, 2);
    /* the column wins over the log */
    snprintf(cmd, sizeof cmd, "awk 'NR == 1 { print $0 \",ep\"; next } { print $0 \",1\" }' '%s' > '%s'", recorded, csv);
    assert_int_equal(system(cmd), 0);
    assert_int_equal(power_fit_read_run(csv, &zoo, h100, node, &run, err, sizeof err), 0);
    assert_int_equal(run.layout.ep, 1);
    snprintf(cmd, sizeof cmd, "rm -r '%s'", dir);
    assert_int_equal(system(cmd), 0);
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

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(power_model_off_or_under_the_cap_keeps_the_top_clock),
        cmocka_unit_test(power_cap_slows_the_clock_bound_work),
        cmocka_unit_test(power_cap_with_measured_clock_time),
        cmocka_unit_test(power_cap_which_gemms_follow_the_clock),
        cmocka_unit_test(power_cap_same_on_every_entry_point),
        cmocka_unit_test(power_cap_settles_with_exposed_data_parallel),
        cmocka_unit_test(fp8_energy_and_backward_rate),
        cmocka_unit_test(collectives_draw_their_power),
        cmocka_unit_test(overlapped_collectives_leave_the_clock),
        cmocka_unit_test(the_leakiest_gpu_sets_a_capped_step),
        cmocka_unit_test(power_fit_reads_a_pipeline_run),
        cmocka_unit_test(power_fit_reads_the_logged_clock),
        cmocka_unit_test(power_fit_regresses_the_clock_time),
        cmocka_unit_test(power_fit_reads_the_expert_parallelism),
        cmocka_unit_test(power_fit_overlay_replaces_two_rows),
    };
    return cmocka_run_group_tests_name("estimate_power", tests, setup_datasheets, teardown_shipped);
}
