/* sextant plan: the search against brute force and hand-written
 * expectations, deadlines and budgets, and the emitters field by field. */
#include "test_util.h"

#include <cjson/cJSON.h>

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
                                feasible++;
                                if (e.time_to_train_s < best) best = e.time_to_train_s;
                            }
        }
    assert_int_equal(res->feasible, feasible);
    assert_close(res->top[0].time_to_train_s, best, 1e-12);
    for (int i = 1; i < res->ntop; i++) assert_true(res->top[i].time_to_train_s >= res->top[i - 1].time_to_train_s);
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
        if (i) assert_true(res->top[i].cost_usd >= res->top[i - 1].cost_usd);
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

static char *emitted(plan_request *req, const plan_candidate *c, const char *framework)
{
    char *text = NULL, err[256];
    size_t len = 0;
    FILE *f = open_memstream(&text, &len);
    assert_int_equal(emit_plan(f, req, c, framework, err, sizeof err), 0);
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

    char *tt = emitted(req, &c, "torchtitan");
    const char *toml[] = {"[parallelism]", "tensor_parallel_degree = 8\n", "pipeline_parallel_degree = 4\n",
                          "data_parallel_shard_degree = 2\n", "pipeline_parallel_schedule = \"Interleaved1F1B\"",
                          "local_batch_size = 2\n", "global_batch_size = 512\n", "seq_len = 4096\n",
                          "[activation_checkpoint]\nmode = \"selective\""};
    for (size_t i = 0; i < sizeof toml / sizeof toml[0]; i++)
        if (!strstr(tt, toml[i])) {
            print_error("torchtitan config lacks '%s':\n%s\n", toml[i], tt);
            fail();
        }
    free(tt);

    char err[256];
    c.layout.zero = 3;
    FILE *sink = fopen("/dev/null", "w");
    assert_int_equal(emit_plan(sink, req, &c, "megatron", err, sizeof err), -1);
    assert_non_null(strstr(err, "ZeRO-3"));
    assert_int_equal(emit_plan(sink, req, &c, "jax", err, sizeof err), -1);
    fclose(sink);
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
    };
    return cmocka_run_group_tests_name("plan", tests, setup, teardown);
}
