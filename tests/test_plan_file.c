/* validate --plan's reader (validator/plan_file.c) on the CPU: a plan's or an estimate's JSON is read, and
 * what is not one JSON object, or asks for parallelism the training step does not run, is refused. */
#include "test_util.h"

#include "plan_file.h"

static int read_text(const char *text, plan_file *p)
{
    char path[] = "/tmp/sextant-plan-file-XXXXXX";
    write_temp(path, text);
    int rc = read_plan(path, p);
    unlink(path);
    return rc;
}

static void reads_plan_and_estimate_json(void **state)
{
    (void)state;
    plan_file p;
    run_result r = run_sextant("plan llama3.2-3b --gpu h100-sxm --gpus 64 --format json --calibration none");
    assert_int_equal(r.status, 0);
    assert_int_equal(read_text(r.out, &p), 0);
    assert_string_equal(p.model, "llama3.2-3b");
    assert_string_equal(p.gpu, "h100-sxm");
    assert_int_equal(p.layout.gpus, 64);
    run_free(&r);
    r = run_sextant("estimate gpt2 --gpus 2 --zero 1 --format json --calibration none");
    assert_int_equal(r.status, 0);
    assert_int_equal(read_text(r.out, &p), 0);
    assert_int_equal(p.layout.dp, 2);
    assert_int_equal(p.layout.zero, 1);
    /* one object and nothing after it */
    size_t n = strlen(r.out);
    char *more = malloc(n + 8);
    snprintf(more, n + 8, "%s{}", r.out);
    assert_int_equal(read_text(more, &p), -1);
    free(more);
    run_free(&r);
}

/* a plan with context parallelism (the ring) is read with its degree */
static void reads_context_parallel_plan(void **state)
{
    (void)state;
    plan_file p;
    run_result r = run_sextant("estimate llama3.2-1b --gpus 2 --cp 2 --seq 2048 --format json --calibration none");
    assert_int_equal(r.status, 0);
    assert_int_equal(read_text(r.out, &p), 0);
    assert_int_equal(p.layout.cp, 2);
    assert_int_equal(p.layout.cp_comm, CP_COMM_RING);
    assert_int_equal(p.layout.dp, 1);
    run_free(&r);
}

/* expert parallelism (issue 24, item 6): an EP 2 plan is read with its degree; a fractional one refused */
static void reads_expert_parallel_plan(void **state)
{
    (void)state;
    plan_file p;
    run_result r = run_sextant("estimate moe-test --gpus 2 --dp 2 --ep 2 --format json --calibration none");
    assert_int_equal(r.status, 0);
    assert_int_equal(read_text(r.out, &p), 0);
    assert_int_equal(p.layout.ep, 2);
    assert_int_equal(p.layout.dp, 2);
    char *ep = strstr(r.out, "\"ep\":");
    assert_non_null(ep);
    char *bad = malloc(strlen(r.out) + 16);
    snprintf(bad, strlen(r.out) + 16, "%.*s\"ep\":\t0.5%s", (int)(ep - r.out), r.out, strchr(ep, ','));
    assert_int_equal(read_text(bad, &p), -1);
    free(bad);
    run_free(&r);
    r = run_sextant("estimate gpt2 --gpus 2 --format json --calibration none");
    assert_int_equal(read_text(r.out, &p), 0);
    assert_int_equal(p.layout.ep, 1);
    run_free(&r);
}

/* the overlay a plan was priced with (validate --plan prices its slice with it) and its expert TP degree */
static void reads_calibration_and_expert_tp(void **state)
{
    (void)state;
    plan_file p;
    run_result r = run_sextant("estimate moe-test --gpu h200 --gpus 2 --tp 2 --sp --format json");
    assert_int_equal(r.status, 0);
    assert_int_equal(read_text(r.out, &p), 0);
    assert_string_equal(p.calibration, "hwdb/measured/h200.csv");
    assert_int_equal(p.layout.etp, 0);   /* the default: expert TP = TP */
    /* a file that is not a path is refused */
    char *at = strstr(r.out, "\"hwdb/measured/h200.csv\"");
    assert_non_null(at);
    memcpy(at, "3", 1);
    memset(at + 1, ' ', strlen("\"hwdb/measured/h200.csv\"") - 1);
    assert_int_equal(read_text(r.out, &p), -1);
    run_free(&r);
    r = run_sextant("estimate moe-test --gpu h200 --gpus 4 --tp 2 --sp --dp 2 --ep 2 --etp 1 --format json --calibration none");
    assert_int_equal(r.status, 0);
    assert_int_equal(read_text(r.out, &p), 0);
    assert_string_equal(p.calibration, "");
    assert_int_equal(p.layout.etp, 1);
    run_free(&r);
    r = run_sextant("plan moe-test --gpu h200 --gpus 16 --format json");
    assert_int_equal(r.status, 0);
    assert_int_equal(read_text(r.out, &p), 0);
    assert_string_equal(p.gpu, "h200");
    assert_string_equal(p.calibration, "hwdb/measured/h200.csv");
    run_free(&r);
}

static void refuses_what_the_step_does_not_run(void **state)
{
    (void)state;
    plan_file p;
    const char *asks[] = {"--cp 2 --cp-comm allgather --seq 2048", "--loss fp32", "--recompute full --recompute-layers 6"};
    for (size_t i = 0; i < sizeof asks / sizeof asks[0]; i++) {
        run_result r = run_sextant("estimate llama3.2-1b --gpus 2 %s --format json --calibration none", asks[i]);
        assert_int_equal(r.status, 0);
        assert_int_equal(read_text(r.out, &p), -1);
        run_free(&r);
    }
    /* the experts' GEMMs as one grouped kernel: the step launches one per expert */
    run_result g = run_sextant("estimate moe-test --gpus 2 --dp 2 --ep 2 --expert-gemm grouped --format json --calibration none");
    assert_int_equal(g.status, 0);
    assert_int_equal(read_text(g.out, &p), -1);
    run_free(&g);
    g = run_sextant("estimate moe-test --gpus 2 --dp 2 --ep 2 --expert-gemm streams --format json --calibration none");
    assert_int_equal(g.status, 0);
    assert_int_equal(read_text(g.out, &p), 0);
    run_free(&g);
    /* FP8 plans run the step's FP8 GEMMs; any other precision is refused */
    g = run_sextant("estimate llama3.2-1b --gpu h100-sxm --gpus 2 --dp 2 --precision fp8 --format json --calibration none");
    assert_int_equal(g.status, 0);
    assert_int_equal(read_text(g.out, &p), 0);
    assert_int_equal(p.layout.precision, PREC_FP8);
    run_free(&g);
    g = run_sextant("estimate llama3.2-1b --gpu h100-sxm --gpus 2 --dp 2 --precision fp16 --format json --calibration none");
    assert_int_equal(g.status, 0);
    assert_int_equal(read_text(g.out, &p), -1);
    run_free(&g);
    /* experts padded to a capacity: the step runs the router's rows */
    g = run_sextant("estimate moe-test --gpus 2 --dp 2 --ep 2 --expert-rows even --format json --calibration none");
    assert_int_equal(g.status, 0);
    assert_int_equal(read_text(g.out, &p), -1);
    run_free(&g);
    assert_int_equal(read_text("not json", &p), -1);
    /* fuzz_plan's crash: a ZeRO stage of 124895 was read as a layout; and a fractional degree */
    run_result r = run_sextant("estimate gpt2 --gpus 2 --zero 1 --format json --calibration none");
    assert_int_equal(r.status, 0);
    char *zero = strstr(r.out, "\"zero\":");
    assert_non_null(zero);
    char *bad = malloc(strlen(r.out) + 16);
    snprintf(bad, strlen(r.out) + 16, "%.*s\"zero\":\t124895%s", (int)(zero - r.out), r.out, strchr(zero, ','));
    assert_int_equal(read_text(bad, &p), -1);
    char *dp = strstr(r.out, "\"dp\":");
    snprintf(bad, strlen(r.out) + 16, "%.*s\"dp\":\t1.5%s", (int)(dp - r.out), r.out, strchr(dp, ','));
    assert_int_equal(read_text(bad, &p), -1);
    /* a key given twice: cJSON would read the first; refused */
    snprintf(bad, strlen(r.out) + 16, "%.*s\"dp\":\t2,\"dp\":1%s", (int)(dp - r.out), r.out, strchr(dp, ','));
    assert_int_equal(read_text(bad, &p), -1);
    free(bad);
    run_free(&r);
    assert_int_equal(read_text("[1, 2]", &p), -1);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(reads_plan_and_estimate_json),
        cmocka_unit_test(reads_context_parallel_plan),
        cmocka_unit_test(reads_expert_parallel_plan),
        cmocka_unit_test(reads_calibration_and_expert_tp),
        cmocka_unit_test(refuses_what_the_step_does_not_run),
    };
    return cmocka_run_group_tests_name("plan_file", tests, NULL, NULL);
}
