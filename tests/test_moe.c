/* Mixture of experts with expert parallelism, and multi-head latent attention: the all-to-all's
 * formulas, what EP does to an estimate (expert memory, the dispatch ops, active versus total
 * FLOPs), MLA's KV memory, the layouts refused, the search and the emitters. */
#include "test_shipped.h"

/* gpus = tp x pp x dp, EP inside dp, 8 GPUs per node, bf16 */
static layout_t moe_layout(int64_t tp, int64_t pp, int64_t dp, int64_t ep, int64_t gbs, int64_t seq)
{
    layout_t l;
    memset(&l, 0, sizeof l);
    l.tp = tp; l.pp = pp; l.dp = dp; l.ep = ep; l.gpus = tp * pp * dp;
    l.vpp = 1; l.mbs = 1; l.gbs = gbs; l.seq = seq; l.gpus_per_node = 8;
    l.sp = tp > 1;
    l.recompute = RECOMPUTE_SELECTIVE;
    l.precision = PREC_BF16;
    return l;
}

static int estimate_model(const model_t *m, layout_t l, estimate_t *e, char *err, size_t errlen)
{
    const hw_gpu *g = hwdb_find_gpu(&db, "h100-sxm");
    const hw_node *n = hwdb_find_node(&db, g->node);
    job_t job = {1e12, 2.0};
    return estimate_layout(m, g, n, &l, &job, e, err, errlen);
}

static void estimate(const char *model, layout_t l, estimate_t *e)
{
    const model_t *m = model_zoo_find(&zoo, model);
    assert_non_null(m);
    char err[512];
    if (estimate_model(m, l, e, err, sizeof err) != 0) {
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

static void alltoall_formulas(void **state)
{
    (void)state;
    /* 4096 tokens to top-8 experts of h 7168 in bf16: 4096 x 8 x 7168 x 2 B */
    assert_close(moe_alltoall_bytes(4096, 8, 7168, 2), 469762048.0, 1e-15);
    /* 8 ranks, 800 MB each at 100 GB/s, 10 us per peer: 7/8 x 8 ms + 7 x 10 us */
    assert_close(alltoall_s(8, 800e6, 100e9, 10e-6), 7e-3 + 70e-6, 1e-12);
    assert_true(alltoall_s(1, 800e6, 100e9, 10e-6) == 0.0);
    /* all in one node: the one-level formula */
    assert_close(alltoall_two_level_s(8, 8, 800e6, 100e9, 10e-6, 25e9, 20e-6, 1), alltoall_s(8, 800e6, 100e9, 10e-6), 1e-15);
    /* 16 ranks, 8 per node: the 8 remote peers' 8/16 of S through 25 GB/s set the time */
    assert_close(alltoall_two_level_s(16, 8, 800e6, 400e9, 1e-6, 25e9, 20e-6, 1), 0.5 * 800e6 / 25e9 + 8 * 20e-6, 1e-12);
    /* a node-limited dispatcher sending half those bytes: half the transfer, the same latencies */
    assert_close(alltoall_two_level_s(16, 8, 800e6, 400e9, 1e-6, 25e9, 20e-6, 0.5), 0.25 * 800e6 / 25e9 + 8 * 20e-6, 1e-12);
    /* DeepSeek-V3 over 8 nodes: top-8 experts within 4 of 8 groups (one a node) reach at most 4 nodes, 3.5 of
     * them remote on average, against 8 x 7/8 = 7 copies in a plain exchange */
    assert_close(moe_remote_node_copies(8, 8, 8, 4), 3.5, 1e-12);
    assert_close(moe_remote_node_copies(8, 8, 0, 0), 7.0, 1e-12);
    assert_true(moe_remote_node_copies(8, 1, 8, 4) == 0.0);
    /* nccl-tests' bus bandwidth of an all-to-all: algbw x (n-1)/n */
    assert_close(bus_bandwidth(COLL_ALLTOALL, 8, 800e6, 1e-2), 80e9 * 7.0 / 8.0, 1e-12);
    /* load: the imbalance, capped by a capacity factor; tokens dropped beyond it */
    assert_close(moe_load_factor(1.25, 0, 0), 1.25, 0);
    assert_close(moe_load_factor(1.25, 1.0, 0), 1.0, 0);
    assert_close(moe_load_factor(1.1, 1.5, 1), 1.5, 0);
    assert_close(moe_dropped_fraction(1.25, 1.0), 0.2, 1e-12);
    assert_true(moe_dropped_fraction(1.25, 2.0) == 0.0);
}

/* The rows between the all-to-all's rank-major order and the experts' (Megatron's sort_chunks_by_idxs,
 * validator/moe.c's chunk copy): every received row read and written once, twice a pass; with one expert a
 * rank only the own share; none without EP.  Inside a node the all-to-all is n - 1 send/recv pairs of S/n,
 * priced with the pair's calibrated time where calibrate --comm measured it. */
/* The two passes around the exchange (docs/model.md, "Permute and unpermute"): the permute copies each of a rank's
 * routed tokens into its k experts' order (2 T k h B) and its backward sums the k row gradients ((k + 1) T h B);
 * the unpermute sums each token's k expert rows, weighed by their gates in the experts' activation ((k + 1) T h B),
 * and its backward hands each row its token's output gradient ((k + 1) T h B), keeping nothing. */
static void permute_and_unpermute_move_the_routed_rows(void **state)
{
    (void)state;
    static estimate_t e;
    for (int64_t tp = 1; tp <= 2; tp *= 2) {
        layout_t l = moe_layout(tp, 1, 2, 2, 16, 1024);
        estimate("mixtral-8x7b", l, &e);
        const model_t *m = model_zoo_find(&zoo, "mixtral-8x7b");
        const double k = (double)m->top_k, h = (double)m->hidden, Tr = 1024.0 / (double)tp, B = 2.0;
        const op_t *p = find(&e.first_stage, "moe_permute", PASS_FWD), *pb = find(&e.first_stage, "moe_permute_bwd", PASS_BWD);
        const op_t *u = find(&e.first_stage, "moe_unpermute", PASS_FWD);
        const op_t *ub = find(&e.first_stage, "moe_unpermute_bwd", PASS_BWD);
        assert_true(p && pb && u && ub);
        assert_close(p->bytes, 2.0 * Tr * k * h * B, 1e-12);
        assert_close(pb->bytes, (k + 1.0) * Tr * h * B, 1e-12);
        assert_close(u->bytes, (k + 1.0) * Tr * h * B, 1e-12);
        assert_close(ub->bytes, (k + 1.0) * Tr * h * B, 1e-12);
        assert_true(u->saved_bytes == 0.0 && p->saved_bytes == 0.0);
        assert_int_equal(u->count, p->count);
        /* after the combine in the op list, as the dispatcher runs it */
        int combine = -1, unpermute = -1;
        for (int i = 0; i < e.first_stage.nops; i++) {
            if (!strcmp(e.first_stage.ops[i].name, "ep_alltoall_combine") && e.first_stage.ops[i].pass == PASS_FWD) combine = i;
            if (!strcmp(e.first_stage.ops[i].name, "moe_unpermute")) unpermute = i;
        }
        assert_true(combine >= 0 && unpermute > combine);
        assert_true(u->time_s > 0.0);
        assert_close(ub->time_s, u->time_s, 1e-12);   /* the same bytes either way */
    }
}

static void ep_sorts_chunks_and_prices_alltoall_as_pairs(void **state)
{
    (void)state;
    /* 1000 rows of 4096 in bf16, read and written: 16.384 MB; one expert a rank of 8: an eighth */
    assert_close(moe_sort_chunks_bytes(1000, 4096, 2, 4, 8), 2.0 * 1000 * 4096 * 2, 1e-15);
    assert_close(moe_sort_chunks_bytes(1000, 4096, 2, 1, 8), 2.0 * 1000 * 4096 * 2 / 8.0, 1e-15);
    assert_close(alltoall_pairs_s(8, 1e-4), 7e-4, 1e-15);
    assert_true(alltoall_pairs_s(1, 1e-4) == 0.0);
    static estimate_t e1, e2, e8;
    layout_t l = moe_layout(1, 1, 2, 2, 16, 1024);
    estimate("moe-test", l, &e2);
    l.ep = 1;
    estimate("moe-test", l, &e1);
    estimate("mixtral-8x7b", moe_layout(1, 1, 8, 8, 64, 4096), &e8);
    const model_t *m = model_zoo_find(&zoo, "moe-test");
    const op_t *sort = find(&e2.first_stage, "moe_sort_chunks", PASS_FWD);
    assert_non_null(sort);
    assert_non_null(find(&e2.first_stage, "moe_sort_chunks_bwd", PASS_BWD));
    assert_null(find(&e1.first_stage, "moe_sort_chunks", PASS_FWD));
    /* two a pass a layer: after the dispatch, before the combine; the busiest rank's T k rows of 4 experts */
    assert_int_equal(sort->count, 2 * m->layers);
    double rows = 1024.0 * m->top_k * moe_rank_load(m, &e2.layout);
    assert_close(sort->bytes, moe_sort_chunks_bytes(rows, (double)m->hidden, 2, 4, 2), 1e-12);
    /* Mixtral over EP 8: one expert a rank, the own eighth only */
    const model_t *mx = model_zoo_find(&zoo, "mixtral-8x7b");
    const op_t *sort8 = find(&e8.first_stage, "moe_sort_chunks", PASS_FWD);
    assert_non_null(sort8);
    assert_close(sort8->bytes, 2.0 * 4096.0 * mx->top_k * moe_rank_load(mx, &e8.layout) / 8.0 * (double)mx->hidden * 2.0,
                 1e-12);
    /* inside the node without calibrate's fits: the link's bandwidth, one latency a peer (as before) */
    const hw_gpu *g = hwdb_find_gpu(&db, "h100-sxm");
    const hw_node *n = hwdb_find_node(&db, g->node);
    op_t a2a = *find(&e8.first_stage, "ep_alltoall_dispatch", PASS_FWD);
    double bw, latency;
    int crosses;
    group_link(g, n, &e8.layout, GROUP_EP, &bw, &latency, &crosses);
    assert_false(crosses);
    /* two all-to-alls, the rows' and their gates' (op_t.pieces), each of half the bytes and a latency a peer */
    assert_int_equal(a2a.pieces, 2);
    assert_close(op_cost(&a2a, g, n, &e8.layout), 2.0 * alltoall_s(8, a2a.comm_bytes / 2.0, bw, latency), 1e-12);
    /* with a send/recv measured over 2 ranks at 1 MB and 1 GB: seven pairs of S/8 each, at the pair's measured time */
    static hw_node fitted;
    fitted = *n;
    fitted.intra_fit_count = 1;
    hw_intra_fit *f = &fitted.intra_fits[0];
    memset(f, 0, sizeof *f);
    f->ranks = 2;
    f->sr_bytes_per_s = 250e9;
    f->sr_latency_s = 16e-6;
    f->sizes[3] = 2;
    f->size_bytes[3][0] = 1e6; f->size_s[3][0] = 20e-6;
    f->size_bytes[3][1] = 1e9; f->size_s[3][1] = 20e-6 + 1e9 / 250e9;
    double piece = a2a.comm_bytes / 2.0 / 8.0, pair = 20e-6 + (piece - 1e6) * (1e9 / 250e9) / (1e9 - 1e6);
    assert_close(op_cost(&a2a, g, &fitted, &e8.layout), 2.0 * alltoall_pairs_s(8, pair), 1e-12);
}

static void ep_shards_expert_memory_and_adds_alltoall(void **state)
{
    (void)state;
    static estimate_t e1, e8;
    estimate("mixtral-8x7b", moe_layout(2, 1, 32, 1, 256, 4096), &e1);
    estimate("mixtral-8x7b", moe_layout(2, 1, 32, 8, 256, 4096), &e8);
    /* each rank holds 1/8 of the experts: the expert parameters shrink 8 times, the rest stays */
    assert_close(e8.first_stage.expert_params, e1.first_stage.expert_params / 8.0, 1e-12);
    assert_close(e8.first_stage.params - e8.first_stage.expert_params, e1.first_stage.params - e1.first_stage.expert_params, 1e-12);
    assert_true(e8.memory.weights < e1.memory.weights / 3.0);
    assert_true(e8.memory.total < e1.memory.total);
    /* the dispatch and combine: S = tokens / t x k x h x B, in the EP group; the dispatch's rows go with their
     * gates (fp32), a message apart */
    const op_t *a2a = find(&e8.first_stage, "ep_alltoall_dispatch", PASS_FWD);
    assert_non_null(a2a);
    assert_int_equal(a2a->coll, COLL_ALLTOALL);
    assert_int_equal(a2a->group, GROUP_EP);
    assert_int_equal(a2a->group_size, 8);
    assert_close(a2a->comm_bytes, 4096.0 / 2.0 * 2.0 * (4096.0 * 2.0 + 4.0), 1e-15);
    assert_int_equal(a2a->pieces, 2);
    const op_t *combine = find(&e8.first_stage, "ep_alltoall_combine", PASS_FWD);
    assert_non_null(combine);
    assert_close(combine->comm_bytes, 4096.0 / 2.0 * 2.0 * 4096.0 * 2.0, 1e-15);
    assert_true(combine->pieces <= 1);   /* one collective (0: unset) */
    assert_non_null(find(&e8.first_stage, "ep_alltoall_combine_bwd", PASS_BWD));
    assert_null(find(&e1.first_stage, "ep_alltoall_dispatch", PASS_FWD));
    assert_true(e8.ep_comm_s > 0.0 && e1.ep_comm_s == 0.0);
    /* the experts' gradients go over dp / ep = 4 ranks */
    const op_t *edp = find(&e8.first_stage, "edp_allreduce_grads", PASS_STEP);
    assert_non_null(edp);
    assert_int_equal(edp->group_size, 4);
    /* the grouped GEMM: 8 / 8 = 1 expert a rank, all T k tokens (the busiest rank's 1.25 x them); with EP 1,
     * 8 experts of T k / 8 each and no rank to wait for */
    const op_t *up8 = find(&e8.first_stage, "expert_up", PASS_FWD), *up1 = find(&e1.first_stage, "expert_up", PASS_FWD);
    assert_int_equal(up8->batch, 1);
    assert_int_equal(up1->batch, 8);
    assert_close(moe_rank_load(model_zoo_find(&zoo, "mixtral-8x7b"), &e1.layout), 1.0, 0);
    assert_close(moe_rank_load(model_zoo_find(&zoo, "mixtral-8x7b"), &e8.layout), MOE_IMBALANCE_DEFAULT, 0);
    assert_int_equal((int64_t)((double)up1->m * 8 * MOE_IMBALANCE_DEFAULT), up8->m);
    assert_close(up8->model_flops, up1->model_flops, 1e-12);   /* the same T k tokens through one or eight experts */
    /* model FLOPs are the same whatever the layout; the time is the step's sum */
    assert_close(e8.model_flops_per_step, e1.model_flops_per_step, 1e-12);
    assert_close(e8.step_s, e8.compute_s + e8.tp_comm_s + e8.cp_comm_s + e8.ep_comm_s + e8.pp_comm_s + e8.bubble_s +
                                e8.dp_comm_s + e8.optimizer_s, 1e-12);
}

static void active_versus_total_flops(void **state)
{
    (void)state;
    static estimate_t e;
    estimate("deepseek-v3", moe_layout(1, 16, 64, 64, 1024, 4096), &e);
    /* 6ND counts the active parameters; the op list's model FLOPs are near it, far below the total's */
    assert_close(e.six_nd_per_step, 6.0 * e.params_active * 1024.0 * 4096.0, 1e-12);
    assert_true(e.model_flops_per_step < 0.2 * 6.0 * e.params_total * 1024.0 * 4096.0);
    assert_true(e.model_flops_per_step > e.six_nd_per_step && e.model_flops_per_step < 1.3 * e.six_nd_per_step);
    assert_true(e.mfu > 0.0 && e.mfu <= 1.0);
    /* imbalance costs time, not model FLOPs */
    model_t skewed = *model_zoo_find(&zoo, "deepseek-v3");
    skewed.moe_imbalance = 2.0;
    static estimate_t s;
    char err[256];
    assert_int_equal(estimate_model(&skewed, moe_layout(1, 16, 64, 64, 1024, 4096), &s, err, sizeof err), 0);
    assert_close(s.model_flops_per_step, e.model_flops_per_step, 1e-12);
    assert_true(s.compute_s > e.compute_s);
    /* a capacity factor of 1 caps the busiest rank at the mean: faster than the default 1.25, and warned */
    skewed.moe_imbalance = 0;
    skewed.capacity_factor = 1.0;
    assert_int_equal(estimate_model(&skewed, moe_layout(1, 16, 64, 64, 1024, 4096), &s, err, sizeof err), 0);
    assert_true(s.compute_s < e.compute_s);
    int warned = 0;
    for (int i = 0; i < s.nwarnings; i++) warned |= strstr(s.warnings[i], "drops up to 20%") != NULL;
    assert_true(warned);
}

static void overlap_and_node_limit_shrink_the_alltoall(void **state)
{
    (void)state;
    static estimate_t limited, plain, hidden;
    char err[256];
    layout_t l = moe_layout(1, 16, 128, 64, 1024, 4096);
    estimate("deepseek-v3", l, &limited);
    /* the same model routed without its group limit: the plain exchange's inter-node bytes, twice DeepSeek's */
    model_t unlimited = *model_zoo_find(&zoo, "deepseek-v3");
    unlimited.moe_groups = unlimited.moe_group_limit = 0;
    assert_int_equal(estimate_model(&unlimited, l, &plain, err, sizeof err), 0);
    /* a middle stage's: DeepSeek's first stage holds its three dense layers */
    const op_t *a2a = find(&limited.middle_stage, "ep_alltoall_dispatch", PASS_FWD);
    /* layers 0-3 on the first stage, three of them dense; four MoE layers on each middle stage, the 61st alone */
    assert_int_equal(limited.first_stage.moe_layers, 1);
    assert_int_equal(limited.middle_stage.moe_layers, 4);
    assert_int_equal(limited.last_stage.moe_layers, 1);
    assert_non_null(a2a);
    assert_true(a2a->crosses_node);
    assert_close(a2a->internode_share, 0.5, 1e-12);
    assert_true(limited.ep_comm_s < plain.ep_comm_s);
    assert_close(limited.model_flops_per_step, plain.model_flops_per_step, 1e-12);
    /* --ep-overlap hides most of it behind the micro-batch beside it, never below zero */
    l.ep_overlap = 1;
    estimate("deepseek-v3", l, &hidden);
    a2a = find(&hidden.middle_stage, "ep_alltoall_dispatch", PASS_FWD);
    assert_int_equal(a2a->overlap, OVERLAP_MICROBATCH);
    assert_true(hidden.ep_comm_s > 0.0 && hidden.ep_comm_s < limited.ep_comm_s);
    assert_true(hidden.step_s < limited.step_s);
    assert_close(hidden.step_s, hidden.compute_s + hidden.tp_comm_s + hidden.cp_comm_s + hidden.ep_comm_s +
                                    hidden.pp_comm_s + hidden.bubble_s + hidden.dp_comm_s + hidden.optimizer_s, 1e-12);
}

static void mla_keeps_less_kv(void **state)
{
    (void)state;
    const model_t *ds = model_zoo_find(&zoo, "deepseek-v3");
    assert_true(model_is_mla(ds));
    /* DeepSeek-V3: 512 + 64 values per token per layer, against 2 x 128 heads x 192 for multi-head attention */
    model_t mha = *ds;
    mha.kv_lora_rank = mha.q_lora_rank = 0;
    assert_close(kv_cache_bytes_per_token(ds, 2.0), 576.0 * 2.0, 0);
    assert_close(kv_cache_bytes_per_token(&mha, 2.0), 2.0 * 128.0 * 192.0 * 2.0, 0);
    assert_true(kv_cache_bytes_per_token(ds, 2.0) < kv_cache_bytes_per_token(&mha, 2.0) / 40.0);
    /* its projections: 187.1M parameters per layer (DeepSeek-V3's configuration) */
    assert_close(model_attention_params_per_layer(ds), 187107328.0, 0);
    static estimate_t e;
    estimate("deepseek-v3", moe_layout(1, 16, 64, 64, 1024, 4096), &e);
    const op_t *down = find(&e.first_stage, "kv_down", PASS_FWD), *up = find(&e.first_stage, "kv_up", PASS_FWD);
    assert_non_null(down);
    assert_non_null(up);
    assert_int_equal(down->n, 512 + 64);
    assert_int_equal(up->k, 512);
    assert_null(find(&e.first_stage, "qkv", PASS_FWD));
}

static double forward_saved(const stage_ops *s, const char *name)
{
    const op_t *op = find(s, name, PASS_FWD);
    assert_non_null(op);
    return op->saved_bytes;
}

/* Megatron's --recompute-modules as DeepSeek-V3 runs them (its section 3.2.3: the norms and MLA's
 * up-projections recomputed, the experts' activation recomputed from its cached input): what each drops
 * from the saved activations and what it runs again (docs/model.md, "Recomputed modules"). */
static void recompute_modules_trade_memory_for_passes(void **state)
{
    (void)state;
    static estimate_t plain, modules;
    layout_t l = moe_layout(1, 16, 64, 64, 1024, 4096);
    estimate("deepseek-v3", l, &plain);
    l.recompute_modules = RECOMPUTE_MODULES_ALL;
    estimate("deepseek-v3", l, &modules);
    const stage_ops *p = &plain.middle_stage, *r = &modules.middle_stage;   /* MoE layers: a middle stage's */
    /* the norms' outputs: their consumers keep nothing; the norms run again */
    const char *norm_fed[] = {"q_down", "router", "shared_up"};
    for (size_t i = 0; i < sizeof norm_fed / sizeof *norm_fed; i++) {
        assert_true(forward_saved(p, norm_fed[i]) > 0.0);
        assert_true(forward_saved(r, norm_fed[i]) == 0.0);
    }
    assert_non_null(find(r, "attn_norm", PASS_RECOMPUTE));
    assert_non_null(find(r, "mlp_norm", PASS_RECOMPUTE));
    assert_null(find(p, "attn_norm", PASS_RECOMPUTE));
    /* MLA's up-projections: the attention keeps only its log-sum-exp; q_up, kv_up and the rotary run again */
    double lse = 4.0 * (double)l.mbs * 128.0 * 4096.0;
    assert_close(forward_saved(r, "attention"), lse, 1e-12);
    assert_true(forward_saved(p, "attention") > 100.0 * lse);
    const char *again[] = {"q_up", "kv_up", "rope"};
    for (size_t i = 0; i < sizeof again / sizeof *again; i++) {
        const op_t *re = find(r, again[i], PASS_RECOMPUTE), *fwd = find(r, again[i], PASS_FWD);
        assert_non_null(re);
        assert_close(re->flops, fwd->flops, 1e-15);
        assert_true(re->model_flops == 0.0);
        assert_null(find(p, again[i], PASS_RECOMPUTE));
    }
    /* the experts' activation: the down-projection keeps nothing, the activation runs again */
    assert_true(forward_saved(p, "expert_down") > 0.0);
    assert_true(forward_saved(r, "expert_down") == 0.0);
    assert_non_null(find(r, "expert_swiglu", PASS_RECOMPUTE));
    /* what the passes cost: the recomputed GEMMs' FLOPs are the hardware FLOPs added, the model's stay */
    assert_close(modules.model_flops_per_step, plain.model_flops_per_step, 1e-12);
    assert_true(modules.hardware_flops_per_step > plain.hardware_flops_per_step);
    double extra = 0.0;
    for (int i = 0; i < r->nops; i++)
        if (r->ops[i].pass == PASS_RECOMPUTE) extra += r->ops[i].hardware_flops * (double)r->ops[i].count;
    double q_up = find(r, "q_up", PASS_FWD)->flops, kv_up = find(r, "kv_up", PASS_FWD)->flops;
    assert_close(extra, (q_up + kv_up) * (double)find(r, "q_up", PASS_FWD)->count, 1e-12);
    /* less memory, more time */
    assert_true(modules.memory.activations < 0.6 * plain.memory.activations);
    assert_true(forward_saved(p, "moe_unpermute") == 0.0);   /* the k rows the gates' gradient reads: not counted */
    assert_true(modules.compute_s > plain.compute_s);
    /* only beside selective recomputation */
    l.recompute = RECOMPUTE_FULL;
    char err[512];
    assert_int_equal(estimate_model(model_zoo_find(&zoo, "deepseek-v3"), l, &modules, err, sizeof err), -1);
    assert_non_null(strstr(err, "--recompute-modules"));
    unsigned bits = 0;
    assert_int_equal(recompute_modules_parse("layernorm,moe_act", &bits), 0);
    assert_int_equal(bits, RECOMPUTE_MODULE_LAYERNORM | RECOMPUTE_MODULE_MOE_ACT);
    assert_string_equal(recompute_modules_name(bits), "layernorm,moe_act");
    assert_int_equal(recompute_modules_parse("layernorm,", &bits), -1);
    assert_int_equal(recompute_modules_parse("core_attn", &bits), -1);
}

static void bad_ep_layouts_are_refused(void **state)
{
    (void)state;
    static estimate_t e;
    char err[512];
    const model_t *mix = model_zoo_find(&zoo, "mixtral-8x7b");
    /* 8 experts do not split 16 ways; EP 3 divides neither; EP 16 over dp 8 leaves DP */
    assert_int_equal(estimate_model(mix, moe_layout(1, 1, 16, 16, 64, 4096), &e, err, sizeof err), -1);
    assert_non_null(strstr(err, "--ep 16"));
    assert_int_equal(estimate_model(mix, moe_layout(1, 1, 6, 3, 60, 4096), &e, err, sizeof err), -1);
    assert_non_null(strstr(err, "--ep 3"));
    assert_int_equal(estimate_model(model_zoo_find(&zoo, "deepseek-v3"), moe_layout(1, 16, 8, 16, 64, 4096), &e, err,
                                    sizeof err), -1);
    assert_non_null(strstr(err, "dp x cp"));
    /* TP without SP: Megatron refuses MoE so */
    layout_t nosp = moe_layout(2, 1, 8, 1, 64, 4096);
    nosp.sp = 0;
    assert_int_equal(estimate_model(mix, nosp, &e, err, sizeof err), -1);
    assert_non_null(strstr(err, "--sp"));
    /* a dense model has no experts */
    assert_int_equal(estimate_model(model_zoo_find(&zoo, "llama3-8b"), moe_layout(1, 1, 8, 2, 64, 4096), &e, err, sizeof err),
                     -1);
    assert_non_null(strstr(err, "no experts"));
}

/* What the validator's EP runs showed beside the all-to-alls' transfer (docs/validation/2026-11-26-h200x2-ep):
 * the dispatcher's counts all-gather with the host's wait, and the EP group's communicator. */
static void ep_counts_routed_rows_and_communicators(void **state)
{
    (void)state;
    static estimate_t e1, e8;
    const model_t *m = model_zoo_find(&zoo, "mixtral-8x7b");
    estimate("mixtral-8x7b", moe_layout(2, 1, 32, 1, 256, 4096), &e1);
    estimate("mixtral-8x7b", moe_layout(2, 1, 32, 8, 256, 4096), &e8);
    /* one all-gather of E 32-bit counts from each EP rank per MoE layer and micro-batch, before the dispatch */
    assert_close(moe_counts_bytes(8, 8), 256.0, 0);
    const op_t *counts = find(&e8.first_stage, "ep_counts", PASS_FWD);
    const op_t *a2a = find(&e8.first_stage, "ep_alltoall_dispatch", PASS_FWD);
    assert_non_null(counts);
    assert_int_equal(counts->coll, COLL_ALLGATHER);
    assert_int_equal(counts->group, GROUP_EP);
    assert_int_equal(counts->group_size, 8);
    assert_close(counts->comm_bytes, moe_counts_bytes(8, (double)m->experts), 0);
    assert_int_equal(counts->count, a2a->count);
    assert_true(counts < a2a);   /* before the dispatch in the list */
    assert_int_equal(counts->host_sync, 1);
    assert_null(find(&e8.first_stage, "ep_counts", PASS_BWD));   /* the backward knows the sizes */
    /* EP 1 with TP 2 gathers the routed rows over the expert TP group (TP's): the same counts to the host, over that
     * group, and the same chunk copy into expert-major order (Megatron's gather of uneven splits and
     * sort_chunks_by_idxs; validator/moe.c's gather_rows) */
    const op_t *tp_counts = find(&e1.first_stage, "ep_counts", PASS_FWD);
    assert_non_null(tp_counts);
    assert_int_equal(tp_counts->group, GROUP_ETP);
    assert_int_equal(tp_counts->group_size, 2);
    assert_int_equal(tp_counts->host_sync, 1);
    assert_close(tp_counts->comm_bytes, moe_counts_bytes(2, (double)m->experts), 0);
    assert_non_null(find(&e1.first_stage, "moe_sort_chunks", PASS_FWD));
    layout_t one_rank = moe_layout(1, 1, 32, 1, 256, 4096);
    static estimate_t e0;
    estimate("mixtral-8x7b", one_rank, &e0);
    /* no group: no collective and no sort, but the counts still go to the host for the grouped GEMM's split sizes
     * (Transformer Engine's, the trainer's): their copy and the same wait */
    const op_t *copy = find(&e0.first_stage, "ep_counts", PASS_FWD);
    assert_non_null(copy);
    assert_int_equal(copy->kind, OP_MEMBOUND);
    assert_int_equal(copy->host_sync, 1);
    assert_close(copy->bytes, 4.0 * (double)m->experts, 0);
    assert_true(copy->time_s >= host_sync_s(hwdb_find_gpu(&db, "h100-sxm")->launch_overhead_s));
    assert_null(find(&e0.first_stage, "ep_counts", PASS_BWD));
    assert_null(find(&e0.first_stage, "moe_sort_chunks", PASS_FWD));
    /* its time holds the host's wait: two kernel issues beyond the all-gather itself */
    const hw_gpu *g = hwdb_find_gpu(&db, "h100-sxm");
    assert_true(g->launch_overhead_s > 0.0);
    assert_close(host_sync_s(g->launch_overhead_s), 2.0 * g->launch_overhead_s, 1e-15);
    assert_true(counts->time_s > host_sync_s(g->launch_overhead_s));
    /* ... and it is exposed with the all-to-alls: the EP seconds are the EP ops' sum */
    double ep = 0.0;
    for (int i = 0; i < e8.first_stage.nops; i++) {
        const op_t *op = &e8.first_stage.ops[i];
        if (op->kind == OP_COMM && op->group == GROUP_EP) ep += op->time_s * (double)op->count;
    }
    assert_close(e8.ep_comm_s, ep * (double)e8.microbatches, 1e-9);
    /* the routed rows kept for the backward are the busiest rank's, load x the mean's, at any EP above 1 (the
     * memory that runs out is that rank's); EP 1 waits for no rank: load 1 */
    const op_t *up8 = find(&e8.first_stage, "expert_up", PASS_FWD), *up1 = find(&e1.first_stage, "expert_up", PASS_FWD);
    assert_true(moe_rank_load(m, &e8.layout) > 1.0);
    assert_close(up8->saved_bytes, up1->saved_bytes * moe_rank_load(m, &e8.layout), 1e-12);
    /* the EP group opens a communicator: on a GPU whose other terms are equal, EP 8 of DP 32 holds the
     * world's, TP's, DP's, EP's and the experts' gradient group's; EP 1 the same but EP's */
    const hw_node *n = hwdb_find_node(&db, g->node);
    static estimate_t a, b;
    layout_t la = moe_layout(2, 1, 32, 8, 256, 4096), lb = la;
    lb.ep = 1;
    job_t job = {1e12, 2.0};
    char err[256];
    assert_int_equal(estimate_layout(m, g, n, &la, &job, &a, err, sizeof err), 0);
    assert_int_equal(estimate_layout(m, g, n, &lb, &job, &b, err, sizeof err), 0);
    double per_comm = g->nccl_comm_bytes > 0.0 ? g->nccl_comm_bytes : 0.25 * 1073741824.0;
    assert_close(a.memory.other - a.memory.workspace, b.memory.other - b.memory.workspace + per_comm, 1e-9);
}

/* The MoE backward's routed rows' gradients in the workspace (moe_routed_grad_bytes): Mixtral 8x7B at 4096 tokens a
 * micro-batch, top 2, h 4096.  One GPU: one buffer of 8192 rows, 64 MiB.  EP 8 moves the rows: two buffers of the
 * busiest rank's 8192 x 1.25 rows.  TP 2 with expert TP 2 gathers every row of the sequence on each rank: two of 8192.
 * explain says it. */
static void moe_backward_holds_the_routed_gradients(void **state)
{
    (void)state;
    static estimate_t one, ep8, tp2;
    estimate("mixtral-8x7b", moe_layout(1, 1, 1, 1, 8, 4096), &one);
    estimate("mixtral-8x7b", moe_layout(1, 1, 8, 8, 64, 4096), &ep8);
    estimate("mixtral-8x7b", moe_layout(2, 1, 1, 1, 8, 4096), &tp2);
    const double row = 4096.0 * 2.0;   /* h x bf16 */
    assert_close(one.memory.routed_grads, 8192.0 * row, 1e-12);
    assert_close(ep8.memory.routed_grads, 2.0 * 8192.0 * MOE_IMBALANCE_DEFAULT * row, 1e-12);
    assert_close(tp2.memory.routed_grads, 2.0 * 8192.0 * row, 1e-12);
    assert_true(one.memory.workspace > one.memory.routed_grads);
    /* a dense model holds none */
    static estimate_t dense;
    estimate("llama2-7b", moe_layout(1, 1, 1, 1, 8, 4096), &dense);
    assert_close(dense.memory.routed_grads, 0.0, 0);
    run_result r = run_sextant("explain mixtral-8x7b --gpus 8 --dp 8 --ep 8 --seq 4096 --mbs 1 --gbs 64");
    assert_int_equal(r.status, 0);
    assert_non_null(strstr(r.out, "the MoE backward's routed rows' gradients"));
    run_free(&r);
}

static void ep_keeps_the_planner_properties(void **state)
{
    (void)state;
    static estimate_t e;
    /* the same layout family on more GPUs: memory per GPU never grows; time and memory positive (from
     * DP 16 on: at DP 8 = EP 8 the experts' gradient group is one GPU and opens no communicator) */
    double last = 1e30;
    for (int64_t dp = 16; dp <= 64; dp *= 2) {
        estimate("qwen3-235b-a22b", moe_layout(4, 8, dp, 8, 512, 4096), &e);
        assert_true(e.memory.total > 0 && e.step_s > 0 && e.ep_comm_s > 0);
        assert_true(e.mfu > 0 && e.mfu <= 1.0);
        assert_true(e.memory.total <= last);
        last = e.memory.total;
    }
    /* more EP never more memory per GPU above EP 1, whatever the ZeRO stage (plan prunes on it) */
    static const char *const models[] = {"mixtral-8x7b", "deepseek-v3", "qwen3-235b-a22b"};
    for (size_t mi = 0; mi < sizeof models / sizeof models[0]; mi++)
        for (int zero = 0; zero <= 3; zero++) {
            last = 1e30;
            for (int64_t ep = 2; ep <= 8; ep *= 2) {
                layout_t l = moe_layout(2, 4, 16, ep, 256, 4096);
                l.zero = zero;
                estimate(models[mi], l, &e);
                assert_true(e.memory.total <= last * (1.0 + 1e-12));
                last = e.memory.total;
            }
        }
}

static void plan_finds_ep_layouts(void **state)
{
    (void)state;
    static plan_request req;
    static plan_result res;
    memset(&req, 0, sizeof req);
    /* DeepSeek-V3 on 256 GPUs: 671B parameters need their experts sharded */
    req.model = model_zoo_find(&zoo, "deepseek-v3");
    req.gpu[0] = hwdb_find_gpu(&db, "h100-sxm");
    req.node[0] = hwdb_find_node(&db, req.gpu[0]->node);
    req.ngpu_types = 1;
    req.gpu_counts[0] = 256;
    req.ncounts = 1;
    req.seq = 4096;
    req.gbs_min = 512;
    req.gbs_max = 1024;
    req.tokens = 1e12;
    req.objective = OBJECTIVE_TIME;
    req.top = 5;
    req.max_zero = 1;
    req.precision = PREC_COUNT;
    char err[256];
    assert_int_equal(plan_search(&req, &res, 0, err, sizeof err), 0);
    assert_true(res.ntop >= 1);
    int with_ep = 0;
    for (int i = 0; i < res.ntop; i++) {
        const layout_t *l = &res.top[i].layout;
        with_ep |= layout_ep(l) > 1;
        assert_int_equal(256 % layout_ep(l), 0);
        /* Megatron's expert groups: etp x ep out of tp x cp x dp (ep inside dp x cp when etp is tp) */
        assert_int_equal(l->tp * dp_group_size(l) % (layout_etp(l) * layout_ep(l)), 0);
        if (layout_etp(l) == l->tp) assert_int_equal(dp_group_size(l) % layout_ep(l), 0);
    }
    assert_true(with_ep);
    /* EP that dp x cp cannot take is rejected for that reason */
    assert_true(res.rejected[REJECT_EP] > 0);
    /* and no layout fails on the estimate's own account: DeepSeek-V3's op lists, the longest of the zoo, fit
     * OPS_MAX whatever the search tries (full recomputation, TP, SP, ETP, the MTP module, the chunk sort) */
    assert_int_equal(res.rejected[REJECT_INTERNAL], 0);
    req.max_zero = 3;
    req.gpu_counts[0] = 2048;
    assert_int_equal(plan_search(&req, &res, 0, err, sizeof err), 0);
    assert_int_equal(res.rejected[REJECT_INTERNAL], 0);
}

/* Expert tensor parallelism (docs/model.md, "Expert tensor parallelism"): the routed experts split over ETP instead
 * of TP, the routed tokens gathered over ETP only, the experts' memory over ETP x EP and their optimizer over
 * tp x cp x dp / (etp x ep), as Megatron-Core forms the groups. */
static void etp_splits_the_experts_not_the_attention(void **state)
{
    (void)state;
    static estimate_t e[3];
    const int64_t etps[3] = {1, 2, 4};
    const model_t *m = model_zoo_find(&zoo, "mixtral-8x7b");
    for (int i = 0; i < 3; i++) {
        layout_t l = moe_layout(4, 1, 16, 4, 256, 4096);
        l.zero = 1;
        l.etp = etps[i];
        estimate("mixtral-8x7b", l, &e[i]);
        assert_int_equal(expert_dp_group_size(&l), 4 * 16 / (etps[i] * 4));
    }
    const double T = 4096.0, k = 2.0, t = 4.0, h = (double)m->hidden, B = 2.0;
    for (int i = 0; i < 3; i++) {
        const stage_ops *s = &e[i].first_stage;
        const op_t *up = find(s, "expert_up", PASS_FWD), *gather = find(s, "moe_tp_allgather", PASS_FWD);
        assert_non_null(up);
        /* the expert GEMM's width is split over ETP, its rows gathered over ETP; its FLOPs stay */
        assert_int_equal(up->n, 2 * model_expert_ffn(m) / etps[i]);
        assert_close(up->model_flops, e[0].first_stage.ops[up - s->ops].model_flops, 1e-12);
        assert_close(s->expert_params * (double)etps[i], e[0].first_stage.expert_params, 1e-12);
        if (etps[i] == 1) {
            assert_null(gather);   /* whole experts: nothing to gather */
        } else {
            assert_non_null(gather);
            assert_int_equal(gather->group, GROUP_ETP);
            assert_int_equal(gather->group_size, etps[i]);
            assert_close(gather->comm_bytes, T * k * (double)etps[i] / t * (h * B + 4.0), 1e-12);   /* rows, gates */
        }
        /* the dispatch is the same whatever ETP: each GPU routes its s b / t tokens */
        const op_t *a2a = find(s, "ep_alltoall_dispatch", PASS_FWD);
        assert_non_null(a2a);
        assert_close(a2a->comm_bytes, moe_alltoall_bytes(T / t, k, h, B) + moe_alltoall_bytes(T / t, k, 1.0, 4.0), 1e-12);
        /* the attention keeps TP 4 */
        const op_t *qkv = find(s, "qkv", PASS_FWD);
        assert_non_null(qkv);
        assert_close(qkv->flops, e[2].first_stage.ops[qkv - s->ops].flops, 1e-12);
    }
    /* ZeRO 1: the experts' optimizer state is sharded over their data-parallel group, tp x cp x dp / (etp x ep), so
     * a GPU holds the same share whatever ETP; weights and gradients shrink with it */
    for (int i = 1; i < 3; i++) {
        assert_close(e[i].memory.optimizer, e[0].memory.optimizer, 1e-9);
        assert_true(e[i].memory.weights < e[i - 1].memory.weights && e[i].memory.gradients < e[i - 1].memory.gradients);
    }
    /* time shares: ETP 1 drops the routed tokens' TP gathers (TP seconds), and its EP group (4 GPUs, not 16) stays
     * in the node, where the ETP 4 one crosses */
    assert_true(e[0].tp_comm_s < e[1].tp_comm_s && e[1].tp_comm_s < e[2].tp_comm_s);
    assert_true(e[0].ep_comm_s < e[2].ep_comm_s);
    assert_false(find(&e[0].first_stage, "ep_alltoall_dispatch", PASS_FWD)->crosses_node);
    assert_true(find(&e[2].first_stage, "ep_alltoall_dispatch", PASS_FWD)->crosses_node);
}

/* ETP = TP is Megatron's default, and what every estimate was before ETP: the same figures, to the bit. */
static void etp_equal_to_tp_changes_nothing(void **state)
{
    (void)state;
    static estimate_t a, b;
    static const char *const models[] = {"mixtral-8x7b", "deepseek-v3", "qwen3-235b-a22b", "grok-1"};
    for (size_t mi = 0; mi < sizeof models / sizeof models[0]; mi++) {
        layout_t l = moe_layout(4, 8, 16, 8, 512, 4096);
        estimate(models[mi], l, &a);
        l.etp = 4;
        estimate(models[mi], l, &b);
        assert_true(a.step_s == b.step_s && a.memory.total == b.memory.total && a.mfu == b.mfu);
    }
}

/* The activations ETP adds: the gathered routed input each expert up-projection keeps, T k etp / t x h x B a MoE
 * layer (the activation's and down-projection's inputs are etp-independent); the model state never grows. */
static void etp_memory_moves_from_state_to_activations(void **state)
{
    (void)state;
    static estimate_t e1, e4;
    for (int zero = 0; zero <= 3; zero++) {
        layout_t l = moe_layout(4, 1, 16, 4, 256, 4096);
        l.zero = zero;
        l.etp = 1;
        estimate("mixtral-8x7b", l, &e1);
        l.etp = 4;
        estimate("mixtral-8x7b", l, &e4);
        double state1 = e1.memory.weights + e1.memory.gradients + e1.memory.optimizer;
        double state4 = e4.memory.weights + e4.memory.gradients + e4.memory.optimizer;
        assert_true(state4 <= state1 * (1.0 + 1e-12));
        /* the busiest rank's rows (load x the mean's) */
        double load = moe_rank_load(model_zoo_find(&zoo, "mixtral-8x7b"), &l);
        double gathered = (double)e1.first_stage.moe_layers * 4096.0 * 2.0 / 4.0 * 4096.0 * 2.0 * (4.0 - 1.0) * load;
        assert_close(e4.memory.activations - e1.memory.activations, gathered * e1.memory.inflight_microbatches, 1e-9);
    }
    /* and more EP never more memory at ETP 1 either (the plan prunes on it) */
    static const char *const models[] = {"mixtral-8x7b", "deepseek-v3", "qwen3-235b-a22b"};
    static estimate_t e;
    for (size_t mi = 0; mi < sizeof models / sizeof models[0]; mi++)
        for (int zero = 0; zero <= 1; zero++) {
            double last = 1e30;
            for (int64_t ep = 2; ep <= 8; ep *= 2) {
                layout_t l = moe_layout(2, 4, 16, ep, 256, 4096);
                l.zero = zero;
                l.etp = 1;
                estimate(models[mi], l, &e);
                assert_true(e.memory.total <= last * (1.0 + 1e-12));
                last = e.memory.total;
            }
        }
}

/* Megatron's checks: ETP x EP inside TP x CP x DP, ETP dividing the expert FFN; with ETP < TP, EP may pass dp x cp */
static void etp_refusals_and_its_wider_ep(void **state)
{
    (void)state;
    expect_bad_input("estimate mixtral-8x7b --gpus 64 --tp 2 --sp --ep 8 --etp 3", "--etp 3");
    expect_bad_input("estimate mixtral-8x7b --gpus 64 --tp 2 --sp --ep 8 --etp 16", "--etp 16");
    expect_bad_input("estimate llama2-7b --gpus 8 --tp 2 --sp --etp 1", "--etp 1");
    expect_bad_input("plan llama2-7b --gpus 8 --etp 2", "--etp 2");
    expect_bad_input("estimate mixtral-8x7b --gpus 64 --tp 2 --sp --etp -1", "--etp");
    /* DeepSeek-V3 on 256 GPUs with TP 4, PP 16: dp x cp = 4 cannot take EP 16, TP x CP x DP = 16 can with ETP 1 */
    expect_bad_input("estimate deepseek-v3 --gpus 256 --tp 4 --sp --pp 16 --ep 16", "--ep 16");
    run_result r = run_sextant("estimate deepseek-v3 --gpus 256 --tp 4 --sp --pp 16 --ep 16 --etp 1 --format json");
    assert_int_equal(r.status, 0);
    assert_non_null(strstr(r.out, "\"etp\":\t1,"));
    run_free(&r);
    r = run_sextant("explain deepseek-v3 --gpus 256 --tp 4 --sp --pp 16 --ep 16 --etp 1");
    assert_int_equal(r.status, 0);
    assert_non_null(strstr(r.out, "expert TP t_e = 1"));
    assert_non_null(strstr(r.out, "t_e = 1: nothing is gathered"));
    run_free(&r);
    /* ETP = TP says nothing new */
    r = run_sextant("estimate mixtral-8x7b --gpus 64 --tp 2 --sp --ep 8 --etp 2 --format json");
    assert_int_equal(r.status, 0);
    assert_null(strstr(r.out, "\"etp\""));
    run_free(&r);
}

/* plan searches ETP 1 beside TP and emits it; the DeepSpeed and torchtitan emitters refuse it */
static void plan_searches_and_emits_etp(void **state)
{
    (void)state;
    run_result r = run_sextant("plan deepseek-v3 --gpus 256 --gpu h100-sxm --etp 1 --emit megatron");
    assert_int_equal(r.status, 0);
    assert_non_null(strstr(r.out, "--expert-tensor-parallel-size 1"));
    run_free(&r);
    r = run_sextant("plan deepseek-v3 --gpus 256 --gpu h100-sxm --etp 1 --format csv");
    assert_int_equal(r.status, 0);
    assert_non_null(strstr(r.out, ",ep,etp\n"));
    run_free(&r);
    static plan_request req;
    static plan_result with, without;
    memset(&req, 0, sizeof req);
    req.model = model_zoo_find(&zoo, "deepseek-v3");
    req.gpu[0] = hwdb_find_gpu(&db, "h800");
    req.node[0] = hwdb_find_node(&db, req.gpu[0]->node);
    req.ngpu_types = 1;
    req.gpu_counts[0] = 2048;
    req.ncounts = 1;
    req.seq = 4096;
    req.gbs_min = req.gbs_max = 1024;
    req.tokens = 1e12;
    req.top = 5;
    req.max_zero = 1;
    req.precision = PREC_COUNT;
    req.attention = ATTENTION_COUNT;
    char err[256];
    assert_int_equal(plan_search(&req, &with, 0, err, sizeof err), 0);
    req.etp = 0;
    /* the same search held to ETP = TP: what the plan was before ETP */
    static plan_request tp_only;
    tp_only = req;
    tp_only.framework = "torchtitan";   /* refuses ETP other than TP */
    tp_only.max_zero = 3;
    assert_int_equal(plan_search(&tp_only, &without, 0, err, sizeof err), 0);
    for (int i = 0; i < without.ntop; i++) assert_int_equal(layout_etp(&without.top[i].layout), without.top[i].layout.tp);
    assert_true(with.evaluated > 0 && with.ntop >= 1);
    int other = 0;
    for (int i = 0; i < with.ntop; i++) other |= layout_etp(&with.top[i].layout) != with.top[i].layout.tp;
    /* ETP 1 wins here: whole experts, no gathers of the routed tokens over TP, a compact EP group */
    assert_true(other);
}

static void cli_takes_ep_and_emits_it(void **state)
{
    (void)state;
    run_result r = run_sextant("estimate mixtral-8x7b --gpus 64 --tp 2 --sp --ep 8");
    assert_int_equal(r.status, 0);
    assert_non_null(strstr(r.out, "EP 8"));
    assert_non_null(strstr(r.out, "EP all-to-all (exposed)"));
    run_free(&r);
    r = run_sextant("explain deepseek-v3 --gpus 1024 --pp 16 --ep 64 --gbs 1024");
    assert_int_equal(r.status, 0);
    assert_non_null(strstr(r.out, "6 N_total"));
    assert_non_null(strstr(r.out, "multi-head latent"));
    assert_non_null(strstr(r.out, "d_p c / e = 1"));
    run_free(&r);
    /* refusals: one line naming the flag */
    expect_bad_input("estimate mixtral-8x7b --gpus 64 --ep 16", "--ep 16");
    expect_bad_input("estimate mixtral-8x7b --moe-imbalance 0.5", "--moe-imbalance");
    expect_bad_input("estimate mixtral-8x7b --capacity-factor x", "--capacity-factor");
    expect_bad_input("estimate deepseek-v3 --recompute-modules layernorm,attention", "--recompute-modules");
    expect_bad_input("estimate deepseek-v3 --recompute full --recompute-modules moe_act", "--recompute-modules");
    /* the emitters */
    r = run_sextant("plan mixtral-8x7b --gpus 64 --ep 8 --emit megatron");
    assert_int_equal(r.status, 0);
    assert_non_null(strstr(r.out, "--expert-model-parallel-size 8"));
    assert_non_null(strstr(r.out, "--num-experts 8 --moe-router-topk 2"));
    run_free(&r);
    r = run_sextant("plan deepseek-v3 --gpus 1024 --ep 64 --ep-overlap --emit megatron");
    assert_int_equal(r.status, 0);
    assert_non_null(strstr(r.out, "--expert-model-parallel-size 64"));
    assert_non_null(strstr(r.out, "--overlap-moe-expert-parallel-comm"));
    assert_non_null(strstr(r.out, "--moe-router-num-groups 8 --moe-router-group-topk 4"));
    assert_non_null(strstr(r.out, "--moe-layer-freq \"[0,0,0,1,"));
    assert_non_null(strstr(r.out, "--multi-latent-attention --kv-lora-rank 512"));
    assert_non_null(strstr(r.out, "--mtp-num-layers 1"));
    /* 61 layers over the winner's stages as sextant costed them (PP 8 and PP 16 within 0.4% of each other): even
     * middle stages, the last one lighter (it holds the head and the prediction module) */
    const char *pp_at = strstr(r.out, "--pipeline-model-parallel-size ");
    const char *split_at = strstr(r.out, "--decoder-first-pipeline-num-layers ");
    assert_non_null(pp_at);
    assert_non_null(split_at);
    int pp = 0, first = 0, last = 0;
    assert_int_equal(sscanf(pp_at, "--pipeline-model-parallel-size %d", &pp), 1);
    assert_int_equal(sscanf(split_at, "--decoder-first-pipeline-num-layers %d --decoder-last-pipeline-num-layers %d", &first,
                            &last), 2);
    assert_true(pp >= 3 && first >= 1 && last >= 1 && last < first);
    assert_int_equal((61 - first - last) % (pp - 2), 0);
    assert_true((61 - first - last) / (pp - 2) >= last);
    run_free(&r);
    r = run_sextant("plan mixtral-8x7b --gpus 64 --ep 8 --emit megatron");
    assert_int_equal(r.status, 0);
    assert_null(strstr(r.out, "--mtp-num-layers"));
    /* the experts' GEMMs as priced: Transformer Engine's grouped linear by default, the CUTLASS launch when asked */
    assert_non_null(strstr(r.out, "  --moe-grouped-gemm \\\n"));
    run_free(&r);
    r = run_sextant("plan mixtral-8x7b --gpus 64 --ep 8 --emit megatron --expert-gemm grouped");
    assert_int_equal(r.status, 0);
    assert_non_null(strstr(r.out, "--moe-grouped-gemm --moe-use-legacy-grouped-gemm"));
    assert_null(strstr(r.out, "--moe-pad-expert-input-to-capacity"));
    run_free(&r);
    /* experts padded to a capacity (--expert-rows even): Megatron pads under a capacity factor, and only then */
    r = run_sextant("plan mixtral-8x7b --gpus 64 --ep 8 --emit megatron --expert-rows even --capacity-factor 1.25");
    assert_int_equal(r.status, 0);
    assert_non_null(strstr(r.out, "  --moe-expert-capacity-factor 1.25 \\\n  --moe-pad-expert-input-to-capacity \\\n"));
    run_free(&r);
    r = run_sextant("plan mixtral-8x7b --gpus 64 --ep 8 --emit megatron --expert-rows even");
    assert_int_equal(r.status, 0);
    assert_null(strstr(r.out, "--moe-pad-expert-input-to-capacity"));
    assert_non_null(strstr(r.out, "# the experts' rows priced even (--expert-rows even)"));
    run_free(&r);
    r = run_sextant("plan deepseek-v3 --gpus 1024 --ep 64 --emit torchtitan");
    assert_int_equal(r.status, 0);
    assert_non_null(strstr(r.out, "# the plan costs 1 multi-token prediction module(s), which this config does not set up"));
    run_free(&r);
    r = run_sextant("plan mixtral-8x7b --gpus 64 --ep 8 --emit torchtitan");
    assert_int_equal(r.status, 0);
    assert_non_null(strstr(r.out, "expert_parallel_degree = 8"));
    /* torchtitan's MoE is one grouped GEMM (torch._grouped_mm): its winner priced so unless --expert-gemm says */
    assert_non_null(strstr(r.out, "# the experts' GEMMs priced as one grouped kernel"));
    run_free(&r);
    r = run_sextant("plan mixtral-8x7b --gpus 64 --ep 8 --emit torchtitan --expert-gemm streams");
    assert_int_equal(r.status, 0);
    assert_non_null(strstr(r.out, "# the experts' GEMMs priced as one launch an expert"));
    run_free(&r);
    expect_bad_input("plan mixtral-8x7b --gpus 64 --ep 8 --emit deepspeed", "--ep 8");
}

/* The step of `args` (sextant estimate ... --format json) and its layout.expert_rows. */
static double step_with_rows(const char *args, char *rows, size_t rows_len)
{
    run_result r = run_sextant("estimate %s --format json", args);
    expect_ok(&r);
    cJSON *root = cJSON_Parse(r.out);
    assert_non_null(root);
    const cJSON *kind = cJSON_GetObjectItemCaseSensitive(cJSON_GetObjectItemCaseSensitive(root, "layout"), "expert_rows");
    assert_true(cJSON_IsString(kind));
    snprintf(rows, rows_len, "%s", kind->valuestring);
    double step = json_number(root, "time", "step_s");
    cJSON_Delete(root);
    run_free(&r);
    return step;
}

/* --expert-rows (docs/model.md, "Mixture of experts", a router's rows): routed by default, each expert's GEMM priced
 * at its expected row tiles where the H100's tile model prices it (4 experts a rank at EP 2: a longer step than even
 * rows); without a tile model (the hwdb defaults' curve) both the same; one expert a rank (EP 8) has no spread to
 * price; a plan carries the choice into its layouts; explain says which; anything else is refused naming the flag. */
static void expert_rows_flag_prices_routed_tiles(void **state)
{
    (void)state;
    const char *ep2 = "mixtral-8x7b --gpu h100-sxm --gpus 8 --ep 2 --tp 4 --sp";
    char rows[16], args[256];
    double routed = step_with_rows(ep2, rows, sizeof rows);
    assert_string_equal(rows, "routed");
    snprintf(args, sizeof args, "%s --expert-rows even", ep2);
    double even = step_with_rows(args, rows, sizeof rows);
    assert_string_equal(rows, "even");
    assert_true(routed > even * 1.002);
    snprintf(args, sizeof args, "%s --calibration none", ep2);
    routed = step_with_rows(args, rows, sizeof rows);
    snprintf(args, sizeof args, "%s --calibration none --expert-rows even", ep2);
    assert_true(step_with_rows(args, rows, sizeof rows) == routed);
    routed = step_with_rows("mixtral-8x7b --gpu h100-sxm --gpus 8 --ep 8", rows, sizeof rows);
    assert_true(step_with_rows("mixtral-8x7b --gpu h100-sxm --gpus 8 --ep 8 --expert-rows even", rows, sizeof rows) == routed);
    run_result r = run_sextant("plan mixtral-8x7b --gpu h100-sxm --gpus 64 --top 2 --expert-rows even --format json");
    expect_ok(&r);
    assert_non_null(strstr(r.out, "\"expert_rows\":\t\"even\""));
    assert_null(strstr(r.out, "\"expert_rows\":\t\"routed\""));
    run_free(&r);
    /* explain says which the step priced */
    r = run_sextant("explain %s", ep2);
    expect_ok(&r);
    assert_non_null(strstr(r.out, "(--expert-rows routed)"));
    run_free(&r);
    r = run_sextant("explain %s --expert-rows even", ep2);
    expect_ok(&r);
    assert_non_null(strstr(r.out, "(--expert-rows even)"));
    run_free(&r);
    expect_bad_input("estimate mixtral-8x7b --gpus 8 --ep 2 --expert-rows padded", "--expert-rows");
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(alltoall_formulas),
        cmocka_unit_test(ep_shards_expert_memory_and_adds_alltoall),
        cmocka_unit_test(active_versus_total_flops),
        cmocka_unit_test(overlap_and_node_limit_shrink_the_alltoall),
        cmocka_unit_test(mla_keeps_less_kv),
        cmocka_unit_test(recompute_modules_trade_memory_for_passes),
        cmocka_unit_test(bad_ep_layouts_are_refused),
        cmocka_unit_test(ep_counts_routed_rows_and_communicators),
        cmocka_unit_test(moe_backward_holds_the_routed_gradients),
        cmocka_unit_test(ep_keeps_the_planner_properties),
        cmocka_unit_test(plan_finds_ep_layouts),
        cmocka_unit_test(cli_takes_ep_and_emits_it),
        cmocka_unit_test(etp_splits_the_experts_not_the_attention),
        cmocka_unit_test(etp_equal_to_tp_changes_nothing),
        cmocka_unit_test(ep_sorts_chunks_and_prices_alltoall_as_pairs),
        cmocka_unit_test(permute_and_unpermute_move_the_routed_rows),
        cmocka_unit_test(etp_memory_moves_from_state_to_activations),
        cmocka_unit_test(etp_refusals_and_its_wider_ep),
        cmocka_unit_test(plan_searches_and_emits_etp),
        cmocka_unit_test(expert_rows_flag_prices_routed_tiles),
    };
    return cmocka_run_group_tests(tests, setup_shipped, teardown_shipped);
}
