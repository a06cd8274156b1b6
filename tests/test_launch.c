/* The launcher's process handling (validator/launch.c) and calibrate
 * --comm's refusals, exercised on the CPU: no GPU is needed, the children
 * here never touch CUDA. */
#include "test_util.h"

#include <dlfcn.h>

#include <signal.h>
#include <time.h>

#include "launch.h"

#ifndef SEXTANT_GPU_BIN
#define SEXTANT_GPU_BIN SEXTANT_ROOT "/build/sextant-gpu"
#endif

static double wall(void)
{
    struct timespec t;
    clock_gettime(CLOCK_MONOTONIC, &t);
    return (double)t.tv_sec + 1e-9 * (double)t.tv_nsec;
}

/* Runs launch_fork with stderr captured; returns its value. */
static int fork_captured(int n, double deadline, int (*child)(int, void *), void *arg, char **err)
{
    char path[] = "/tmp/sextant-launch-err-XXXXXX";
    int fd = mkstemp(path);
    assert_true(fd >= 0);
    fflush(stderr);
    int saved = dup(2);
    dup2(fd, 2);
    int rc = launch_fork(n, deadline, child, arg);
    fflush(stderr);
    dup2(saved, 2);
    close(saved);
    close(fd);
    *err = slurp(path);
    unlink(path);
    return rc;
}

static int child_ok(int rank, void *arg)
{
    (void)arg;
    return rank >= 0 ? 0 : 1;
}

/* rank `*arg` fails at once, the others would run for a minute */
static int child_one_fails(int rank, void *arg)
{
    if (rank == *(int *)arg) return 3;
    sleep(60);
    return 0;
}

static int child_one_killed(int rank, void *arg)
{
    if (rank == *(int *)arg) raise(SIGKILL);
    sleep(60);
    return 0;
}

static int child_hangs(int rank, void *arg)
{
    (void)rank;
    (void)arg;
    sleep(60);
    return 0;
}

/* arms a 1 s watchdog and then sits in a call that never returns */
static int child_stuck(int rank, void *arg)
{
    (void)arg;
    launch_watchdog(rank, 1, "a stuck call");
    sleep(60);
    return 0;
}

/* disarmed in time: nothing happens */
static int child_disarms(int rank, void *arg)
{
    (void)arg;
    launch_watchdog(rank, 1, "a short call");
    launch_watchdog(rank, 0, NULL);
    sleep(2);
    return 0;
}

static void every_rank_succeeds(void **state)
{
    (void)state;
    char *err;
    assert_int_equal(fork_captured(4, 30, child_ok, NULL, &err), 0);
    assert_string_equal(err, "");
    free(err);
}

static void a_failing_rank_stops_the_others(void **state)
{
    (void)state;
    int bad = 1;
    char *err;
    double t0 = wall();
    assert_int_equal(fork_captured(3, 120, child_one_fails, &bad, &err), 1);
    assert_true(wall() - t0 < 15.0);
    assert_non_null(strstr(err, "rank 1"));
    assert_non_null(strstr(err, "status 3"));
    assert_int_equal(count_lines(err), 1);
    free(err);
}

static void a_killed_rank_is_named_with_its_signal(void **state)
{
    (void)state;
    int bad = 2;
    char *err;
    double t0 = wall();
    assert_int_equal(fork_captured(3, 120, child_one_killed, &bad, &err), 1);
    assert_true(wall() - t0 < 15.0);
    assert_non_null(strstr(err, "rank 2"));
    assert_non_null(strstr(err, "signal 9"));
    assert_int_equal(count_lines(err), 1);
    free(err);
}

static void the_deadline_kills_hung_ranks(void **state)
{
    (void)state;
    char *err;
    double t0 = wall();
    assert_int_equal(fork_captured(2, 1.0, child_hangs, NULL, &err), 1);
    assert_true(wall() - t0 < 15.0);
    assert_non_null(strstr(err, "deadline"));
    free(err);
}

static void the_watchdog_ends_a_stuck_host(void **state)
{
    (void)state;
    char *err;
    double t0 = wall();
    assert_int_equal(fork_captured(2, 0, child_stuck, NULL, &err), 1);
    assert_true(wall() - t0 < 15.0);
    assert_non_null(strstr(err, "a stuck call did not finish in 1 s"));
    assert_non_null(strstr(err, "status 4"));
    free(err);
    assert_int_equal(fork_captured(1, 0, child_disarms, NULL, &err), 0);
    assert_string_equal(err, "");
    free(err);
}

static void visible_gpus_answers(void **state)
{
    (void)state;
    char why[256] = "";
    int n = launch_visible_gpus(why, sizeof why);
    assert_true(n >= -1);
    assert_true(why[0] != '\0');
}

/* Runs `env ENV sextant ARGS`, the dispatcher that hands calibrate to sextant-gpu. */
static run_result run_env(const char *env, const char *args)
{
    char prefix[1024];
    snprintf(prefix, sizeof prefix, "env -u OMPI_COMM_WORLD_SIZE -u SLURM_STEP_ID %s", env);
    return run_sextant_with(prefix, args);
}

/* Each refusal: non-zero, one stderr line holding `needle`, nothing on stdout. */
static void expect_refusal(const char *env, const char *args, const char *needle)
{
    run_result r = run_env(env, args);
    if (r.status == 0 || count_lines(r.err) != 1 || !strstr(r.err, needle) || r.out[0]) {
        print_error("sextant %s: status %d, stdout '%s', stderr '%s' (wanted one line with '%s')\n", args, r.status, r.out,
                    r.err, needle);
        run_free(&r);
        fail();
    }
    run_free(&r);
}

static void comm_flag_errors(void **state)
{
    (void)state;
    if (access(SEXTANT_GPU_BIN, X_OK) != 0) skip();
    char why[256];
    /* this machine may have GPUs; a thousand it has not */
    expect_refusal("", "calibrate --comm --gpus 1000", launch_visible_gpus(why, sizeof why) > 0 ? "--gpus 1000 but" : "no GPU is visible");
    expect_refusal("", "calibrate --comm --gpus 0", "--gpus '0'");
    expect_refusal("", "calibrate --comm --gpus two", "--gpus 'two'");
    expect_refusal("", "calibrate --comm --gpus 1", "--gpus 1 has nothing");
    expect_refusal("", "calibrate --comm --gpus", "--gpus needs a value");
    expect_refusal("", "calibrate --comm --max-bytes 4X", "--max-bytes '4X'");
    expect_refusal("", "calibrate --comm --max-bytes 1G --min-bytes 2G", "above --max-bytes");
    expect_refusal("", "calibrate --comm --min-bytes 512", "at least 1K");
    expect_refusal("", "calibrate --comm --warp 9", "unknown flag '--warp'");
    expect_refusal("", "calibrate --comm --gpu h900 --gpus 2", "unknown GPU 'h900'");
    /* the overlap measurement's flags */
    expect_refusal("", "calibrate --comm --overlap-shapes 8192x8192", "'8192x8192' is not MxNxK");
    expect_refusal("", "calibrate --comm --overlap-shapes 8192x8192x0", "'8192x8192x0' is not MxNxK");
    expect_refusal("", "calibrate --comm --overlap-shapes 1x1x1,2x2x2,3x3x3,4x4x4,5x5x5", "comma list of 1 to 4 shapes");
    expect_refusal("", "calibrate --comm --overlap-shapes 8192x8192x8192,", "comma list of 1 to 4 shapes");
    expect_refusal("", "calibrate --comm --overlap-bytes 64M,4X", "--overlap-bytes '4X'");
    expect_refusal("", "calibrate --comm --overlap-bytes ,64M", "comma list of 1 to 4 sizes");
    expect_refusal("", "calibrate --comm --overlap-repeats 0", "--overlap-repeats '0'");
    expect_refusal("", "calibrate --comm --overlap-csv", "--overlap-csv needs a value");
    expect_refusal("", "calibrate --comm --no-overlap --overlap-bytes 64M", "--no-overlap leaves nothing for --overlap-bytes");
    /* well-formed ones pass the flags and stop at the GPUs */
    const char *gpus_refused = launch_visible_gpus(why, sizeof why) > 0 ? "--gpus 1000 but" : "no GPU is visible";
    expect_refusal("", "calibrate --comm --overlap-shapes 8192x8192x8192,4096x4096x4096,8192x4096x1024,1x1x131072 "
                       "--overlap-bytes 64M,256M,1G,512K --overlap-repeats 11 --overlap-csv /tmp/x.csv --gpus 1000", gpus_refused);
    expect_refusal("", "calibrate --comm --no-overlap --gpus 1000", gpus_refused);
}

/* validate's layout flags are checked before anything starts, GPUs or not. */
static void train_flag_errors(void **state)
{
    (void)state;
    if (access(SEXTANT_GPU_BIN, X_OK) != 0) skip();
    expect_refusal("", "validate gpt2 --bogus 1", "unknown flag --bogus");
    expect_refusal("", "validate gpt2 --tp 5", "--tp 5 must divide");
    expect_refusal("", "validate gpt2 --tp 2 --gpus 3", "--gpus 3 but --tp 2");
    expect_refusal("", "validate gpt2 --mbs 4 --dp 2 --gbs 12", "--gbs 12 is not a multiple");
    expect_refusal("", "validate gpt2 --zero 4 --dp 2", "--zero: '4' is not one of 0|1|2|3");
    expect_refusal("", "validate gpt2 --recompute selective", "--recompute 'selective'");
    expect_refusal("", "validate gpt2 --pp 13", "--pp 13 exceeds");
    expect_refusal("", "validate gpt2 --vpp 2", "interleaving needs --pp of 2 or more");
    expect_refusal("", "validate gpt2 --pp 2 --vpp 4", "12 layers do not split into --pp 2 x --vpp 4");
    expect_refusal("", "validate gpt2 --pp 2 --vpp 2 --mbs 2 --gbs 6", "multiple of --pp 2");
    expect_refusal("", "validate gpt2 --pp 2 --vpp 32", "at most 16 chunks");
    expect_refusal("", "validate gpt2 --pp 2 --first-stage-layers 13", "12 layers do not split over PP 2");
    expect_refusal("", "validate gpt2 --pp 2 --vpp 2 --first-stage-layers 4 --mbs 1 --gbs 4", "interleaves equal stages only");
    expect_refusal("", "validate gpt2 --tp two", "--tp: 'two' is not a positive integer");
    expect_refusal("", "validate gpt2 --mbs 0", "--mbs: '0' is not a positive integer");
    expect_refusal("", "validate gpt2 --attention flash1", "--attention 'flash1' is not one of unfused|flash|sextant");
    expect_refusal("", "validate gpt2 --attention flash1-triton", "--attention 'flash1-triton' is not one of unfused|flash|sextant");
    expect_refusal("", "validate gpt2 --attention fused", "--attention: 'fused' is not one of flash|unfused|flash1|flash1-triton|sextant");
    expect_refusal("", "validate gpt2 --precision fp16", "--precision 'fp16' is not one of bf16|fp8");
    expect_refusal("", "validate gpt2 --gpus-per-node 8", "unknown flag --gpus-per-node");
    /* ops reads --mbs and --seq through the same parser and refuses the layout it does not run */
    expect_refusal("", "validate gpt2 --ops --mbs x", "ops: --mbs: 'x' is not a positive integer");
    expect_refusal("", "validate gpt2 --ops --tp 2", "ops: --tp: ops times one micro-batch on one GPU");
    expect_refusal("", "validate gpt2 --ops --steps 3", "ops: unknown flag --steps");
    expect_refusal("", "validate gpt2 --lr 0", "--lr '0' is not a number above 0");
    expect_refusal("", "validate gpt2 --lr 3e-4x", "--lr '3e-4x'");
    expect_refusal("", "validate gpt2 --lr 2", "at most 1");
    expect_refusal("", "validate gpt2 --lr-warmup -1", "--lr-warmup '-1'");
    expect_refusal("", "validate nosuch --tp 2", "unknown model 'nosuch'");
    expect_refusal("", "validate", "needs a MODEL or --plan FILE");
}

/* The plan `estimate_args` prices (estimate's JSON, written to `plan`), run by validate --plan on `gpus` GPUs. */
static run_result plan_slice(const char *plan, const char *estimate_args, int gpus)
{
    char cmd[1024], args[512];
    snprintf(cmd, sizeof cmd, "%s estimate %s --format json > %s", SEXTANT_BIN, estimate_args, plan);
    assert_int_equal(system(cmd), 0);
    snprintf(args, sizeof args, "validate --plan %s --gpus %d", plan, gpus);
    return run_env("", args);
}

/* validate --plan: bad files are refused with the field; a good plan's slice
 * is printed (what of the plan it measures) before any GPU is needed. */
static void plan_slices(void **state)
{
    (void)state;
    if (access(SEXTANT_GPU_BIN, X_OK) != 0) skip();
    expect_refusal("", "validate --plan /nonexistent-sextant.json", "--plan /nonexistent-sextant.json: cannot open");
    char bad[] = "/tmp/sextant-plan-XXXXXX";
    int fd = mkstemp(bad);
    assert_true(fd >= 0);
    assert_true(write(fd, "{\"model\": {\"name\": \"gpt2\"}}", 27) == 27);
    close(fd);
    char args[512];
    snprintf(args, sizeof args, "validate --plan %s --gpus 2", bad);
    expect_refusal("", args, "no gpu");
    char plan[] = "/tmp/sextant-plan-XXXXXX";
    fd = mkstemp(plan);
    assert_true(fd >= 0);
    close(fd);
    /* 64 GPUs' plan on 32: the slice is printed, then either no GPU (skip, 0) or too few (2) */
    run_result r = plan_slice(plan, "llama3.2-1b --gpu h200 --gpus 64 --tp 1 --pp 4 --mbs 2 --gbs 128 --seq 2048 --zero 1", 32);
    assert_non_null(strstr(r.out, "# slice on 32 GPUs: tp 1, cp 1, pp 4 (4 layers per stage, 16 layers in all), dp 8"));
    assert_non_null(strstr(r.out, "share of the plan's predicted step backed by measurement on the slice"));
    assert_non_null(strstr(r.out, "DP"));
    run_free(&r);
    /* an interleaved plan keeps its chunks on the slice's stages */
    r = plan_slice(plan, "llama3.2-1b --gpu h200 --gpus 64 --tp 1 --pp 4 --vpp 2 --mbs 2 --gbs 128 --seq 2048", 8);
    assert_non_null(strstr(r.out, "# slice on 8 GPUs: tp 1, cp 1, pp 4 (4 layers per stage, 16 layers in all, interleaved: 2 chunks "
                                  "of 2 layers per stage), dp 2"));
    run_free(&r);
    /* ZeRO-3 (the planner's usual winner) runs: its slice keeps two data-parallel ranks */
    r = plan_slice(plan, "llama3.2-1b --gpu h200 --gpus 64 --tp 1 --pp 1 --mbs 2 --gbs 128 --seq 2048 --zero 3", 2);
    assert_non_null(strstr(r.out, "ZeRO 3"));
    assert_non_null(strstr(r.out, "# slice on 2 GPUs: tp 1, cp 1, pp 1 (16 layers per stage, 16 layers in all), dp 2"));
    assert_null(strstr(r.err, "not in the training step"));
    run_free(&r);
    /* an FP8 plan runs the step's FP8 GEMMs (its slice says so); a mixture of experts' does not: its experts run bf16 */
    r = plan_slice(plan, "llama3.2-1b --gpu h100-sxm --gpus 64 --tp 1 --pp 1 --mbs 2 --gbs 128 --seq 2048 --precision fp8", 2);
    assert_non_null(strstr(r.out, "seq 2048, selective, ZeRO 0, fp8\n"));
    assert_null(strstr(r.err, "layout.precision"));
    run_free(&r);
    expect_refusal("", "validate moe-test --precision fp8 --dp 2 --gpus 2", "expert GEMMs the training step runs in bf16");
    /* but not a tied table over pipeline stages with sharded gradients, before anything starts */
    expect_refusal("", "validate gpt2 --pp 2 --dp 2 --zero 3 --gpus 4", "--zero 3 with --pp 2 and --dp 2");
    unlink(bad);
    unlink(plan);
}

/* Under srun or mpirun with no libmpi to load, one line says so. */
static void launcher_without_mpi(void **state)
{
    (void)state;
    if (access(SEXTANT_GPU_BIN, X_OK) != 0) skip();
    const char *libpath = "LD_LIBRARY_PATH=/nonexistent";
    char env[512];
    /* checked before any MPI is loaded */
    expect_refusal("OMPI_COMM_WORLD_SIZE=2 OMPI_COMM_WORLD_RANK=0 OMPI_COMM_WORLD_LOCAL_RANK=0", "calibrate --comm --gpus 3",
                   "--gpus 3 but mpirun started 2 ranks");
    snprintf(env, sizeof env, "%s SLURM_STEP_ID=0 SLURM_PROCID=1 SLURM_NTASKS=2 SLURM_LOCALID=1", libpath);
    /* with libmpi installed the ranks would start: this case is for machines without it */
    void *mpi = dlopen("libmpi.so.40", RTLD_LAZY);
    if (!mpi) mpi = dlopen("libmpi.so", RTLD_LAZY);
    int have_mpi = mpi != NULL;
    if (mpi) dlclose(mpi);
    if (have_mpi) skip();
    expect_refusal(env, "calibrate --comm", "started by srun with 2 ranks, but libmpi could not be loaded");
    snprintf(env, sizeof env, "%s OMPI_COMM_WORLD_SIZE=2 OMPI_COMM_WORLD_RANK=0 OMPI_COMM_WORLD_LOCAL_RANK=0", libpath);
    expect_refusal(env, "calibrate --comm", "started by mpirun with 2 ranks, but libmpi could not be loaded");
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(every_rank_succeeds),
        cmocka_unit_test(a_failing_rank_stops_the_others),
        cmocka_unit_test(a_killed_rank_is_named_with_its_signal),
        cmocka_unit_test(the_deadline_kills_hung_ranks),
        cmocka_unit_test(the_watchdog_ends_a_stuck_host),
        cmocka_unit_test(visible_gpus_answers),
        cmocka_unit_test(comm_flag_errors),
        cmocka_unit_test(train_flag_errors),
        cmocka_unit_test(plan_slices),
        cmocka_unit_test(launcher_without_mpi),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
