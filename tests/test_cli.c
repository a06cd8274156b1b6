/* The command line as a user meets it: commands, formats, SPEC.md's worked
 * examples through `explain`, and bad input (one line on stderr, non-zero
 * exit, nothing on stdout, no output file). */
#include "test_util.h"

#include <cjson/cJSON.h>
#include <math.h>
#include <unistd.h>

#include "hwdb.h"
#include <sys/stat.h>

#define ISSUE_EXAMPLE "llama2-70b --gpu h100-sxm --gpus 1024 --tp 8 --pp 4 --mbs 1 --gbs 1024 --seq 4096 " \
                      "--tokens 2T --recompute selective --sp --zero 1"

static void expect_ok(run_result *r)
{
    if (r->status != 0) {
        print_error("exit %d, stderr: %s\n", r->status, r->err);
        fail();
    }
    assert_true(strlen(r->out) > 0);
}

static void expect_bad_input(const char *args, const char *message)
{
    run_result r = run_sextant("%s", args);
    if (r.status == 0 || r.status == -1 || r.out[0] != '\0' || count_lines(r.err) != 1 || !strstr(r.err, message)) {
        print_error("sextant %s\n  exit %d, stdout %zu bytes, stderr: %s  (wanted one line containing '%s')\n", args,
                    r.status, strlen(r.out), r.err, message);
        run_free(&r);
        fail();
    }
    run_free(&r);
}

static void models_lists_the_zoo(void **state)
{
    (void)state;
    run_result r = run_sextant("models");
    expect_ok(&r);
    const char *names[] = {"gpt2 ", "bert-large", "gpt-1.3b", "megatron-1t", "llama3.1-405b", "mixtral-8x7b"};
    for (size_t i = 0; i < sizeof names / sizeof names[0]; i++) assert_non_null(strstr(r.out, names[i]));
    run_free(&r);
    r = run_sextant("models --format csv");
    expect_ok(&r);
    assert_non_null(strstr(r.out, "name,family,layers"));
    run_free(&r);
}

static void hw_shows_sources(void **state)
{
    (void)state;
    run_result r = run_sextant("hw h100-sxm");
    expect_ok(&r);
    assert_non_null(strstr(r.out, "source"));
    assert_non_null(strstr(r.out, "989.4"));
    run_free(&r);
    r = run_sextant("hw");
    expect_ok(&r);
    assert_non_null(strstr(r.out, "b200"));
    assert_non_null(strstr(r.out, "rtx4090"));
    run_free(&r);
}

static void default_estimate_runs(void **state)
{
    (void)state;
    run_result r = run_sextant("estimate");
    expect_ok(&r);
    assert_non_null(strstr(r.out, "Memory per GPU"));
    assert_non_null(strstr(r.out, "MFU"));
    run_free(&r);
}

static double json_number(const cJSON *root, const char *a, const char *b)
{
    const cJSON *node = cJSON_GetObjectItemCaseSensitive(root, a);
    if (b) node = cJSON_GetObjectItemCaseSensitive(node, b);
    if (!cJSON_IsNumber(node)) {
        print_error("JSON key %s%s%s is missing or not a number\n", a, b ? "." : "", b ? b : "");
        fail();
    }
    return node->valuedouble;
}

static void json_has_every_documented_key(void **state)
{
    (void)state;
    run_result r = run_sextant("estimate " ISSUE_EXAMPLE " --format json");
    expect_ok(&r);
    cJSON *root = cJSON_Parse(r.out);
    assert_non_null(root);
    assert_string_equal(cJSON_GetObjectItemCaseSensitive(cJSON_GetObjectItemCaseSensitive(root, "model"), "name")->valuestring,
                        "llama2-70b");
    assert_true(json_number(root, "model", "params") > 6e10);
    const char *layout_keys[] = {"gpus", "tp", "pp", "dp", "mbs", "gbs", "seq", "zero", "vpp"};
    for (size_t i = 0; i < sizeof layout_keys / sizeof layout_keys[0]; i++) json_number(root, "layout", layout_keys[i]);
    assert_true(cJSON_IsString(cJSON_GetObjectItemCaseSensitive(cJSON_GetObjectItemCaseSensitive(root, "layout"), "recompute")));
    assert_true(cJSON_IsBool(cJSON_GetObjectItemCaseSensitive(cJSON_GetObjectItemCaseSensitive(root, "layout"), "sp")));
    const char *memory_keys[] = {"weights", "gradients", "optimizer", "activations", "other", "total", "capacity"};
    double sum = 0;
    for (size_t i = 0; i < sizeof memory_keys / sizeof memory_keys[0]; i++) {
        double v = json_number(root, "memory", memory_keys[i]);
        if (i < 5) sum += v;
    }
    sum += json_number(root, "memory", "logits");
    assert_close(sum, json_number(root, "memory", "total"), 1e-9);
    assert_true(cJSON_IsBool(cJSON_GetObjectItemCaseSensitive(cJSON_GetObjectItemCaseSensitive(root, "memory"), "fits")));
    const char *time_keys[] = {"step_s", "compute_s", "tp_comm_s", "pp_comm_s", "dp_comm_s", "bubble_s"};
    for (size_t i = 0; i < sizeof time_keys / sizeof time_keys[0]; i++) json_number(root, "time", time_keys[i]);
    const char *flops_keys[] = {"model_per_step", "hardware_per_step", "six_nd_per_step"};
    for (size_t i = 0; i < sizeof flops_keys / sizeof flops_keys[0]; i++) json_number(root, "flops", flops_keys[i]);
    const char *top[] = {"mfu", "hfu", "tokens_per_s", "time_to_train_s", "gpu_hours", "cost_usd", "tp_ratio_limit"};
    for (size_t i = 0; i < sizeof top / sizeof top[0]; i++) json_number(root, top[i], NULL);
    assert_true(cJSON_IsArray(cJSON_GetObjectItemCaseSensitive(root, "warnings")));
    assert_close(json_number(root, "layout", "dp"), 32, 0);
    cJSON_Delete(root);
    run_free(&r);
}

static void csv_carries_the_same_content(void **state)
{
    (void)state;
    run_result r = run_sextant("estimate " ISSUE_EXAMPLE " --format csv");
    expect_ok(&r);
    assert_int_equal(count_lines(r.out), 2);
    assert_non_null(strstr(r.out, "memory.total"));
    assert_non_null(strstr(r.out, "time.step_s"));
    assert_non_null(strstr(r.out, "warnings"));
    run_free(&r);
}

/* The layout of the interleaved m = p run on 2 x H200 (docs/validation/
 * h200x2-m-eq-pp-2026-11-23): all forwards first, so the last stage holds
 * both micro-batches' activations and both heads' logits; --no-dropout is
 * the model as sextant-gpu trains it (no masks saved). */
static void interleaved_all_forwards_first(void **state)
{
    (void)state;
    const char *args = "estimate gpt2-medium --gpu h200 --gpus 2 --pp 2 --vpp 2 --mbs 8 --gbs 16 --seq 1024 "
                       "--attention unfused --recompute none --format json";
    run_result plain = run_sextant("%s", args), bare = run_sextant("%s --no-dropout", args);
    expect_ok(&plain);
    expect_ok(&bare);
    cJSON *with = cJSON_Parse(plain.out), *without = cJSON_Parse(bare.out);
    assert_non_null(with);
    assert_non_null(without);
    assert_close(json_number(without, "memory", "inflight_microbatches"), 2, 0);
    /* two micro-batches of 8 x 1024 tokens, 50304 padded vocabulary, 2 bytes */
    assert_close(json_number(without, "memory", "logits"), 2.0 * 8 * 1024 * 50304 * 2, 1e-12);
    /* dropout saves one byte per element after attention's softmax and after both residual branches */
    assert_true(json_number(with, "memory", "activations") > json_number(without, "memory", "activations"));
    assert_close(json_number(with, "memory", "weights"), json_number(without, "memory", "weights"), 0);
    cJSON_Delete(with);
    cJSON_Delete(without);
    run_free(&plain);
    run_free(&bare);
}

static void ops_listing(void **state)
{
    (void)state;
    run_result r = run_sextant("estimate " ISSUE_EXAMPLE " --ops");
    expect_ok(&r);
    assert_non_null(strstr(r.out, "qkv_wgrad"));
    assert_non_null(strstr(r.out, "tp_reduce_scatter_mlp"));
    assert_non_null(strstr(r.out, "pp_send_activations"));
    run_free(&r);
}

static void explain_walks_through_the_estimate(void **state)
{
    (void)state;
    run_result r = run_sextant("explain " ISSUE_EXAMPLE);
    expect_ok(&r);
    const char *sections[] = {"1. The model", "2. Compute", "3. Memory", "4. Communication", "5. The TP",
                              "6. Step time", "7. Throughput", "Korthikanti", "Narayanan", "t_max", "GQA"};
    for (size_t i = 0; i < sizeof sections / sizeof sections[0]; i++)
        if (!strstr(r.out, sections[i])) {
            print_error("explain lacks '%s'\n", sections[i]);
            fail();
        }
    run_free(&r);
}

/* SPEC.md's worked examples, each through `sextant explain --spec`: every
 * figure the spec prints must appear, rounded as the spec rounds it. */
static void expect_spec_figures(const char *const *figures, size_t n)
{
    run_result r = run_sextant("explain --spec");
    expect_ok(&r);
    for (size_t i = 0; i < n; i++)
        if (!strstr(r.out, figures[i])) {
            print_error("explain --spec lacks '%s'\n%s\n", figures[i], r.out);
            fail();
        }
    run_free(&r);
}

static void spec_example_compute(void **state)
{
    (void)state;
    const char *figures[] = {"6 x 175e9 x 300e9 = 3.15e+23 FLOP", "8 x 4096 x 6 x 1e9 = 1.97e+14 FLOP", "0.60 s on a GPU"};
    expect_spec_figures(figures, sizeof figures / sizeof figures[0]);
}

static void spec_example_memory(void **state)
{
    (void)state;
    const char *figures[] = {"weights 70e9 x 2 B = 140 GB", "gradients 140 GB", "Adam 70e9 x 12 B = 840 GB",
                             "4096 x 8 x 8192 x 80 x 34 = 730 GB", "total 1850 GB", "24 GPUs of 80 GB", "78 GPUs of 24 GB"};
    expect_spec_figures(figures, sizeof figures / sizeof figures[0]);
}

static void spec_example_pcie(void **state)
{
    (void)state;
    const char *figures[] = {"1B-parameter group: 4 GB", "takes 0.125 s", "needs two: 0.250 s"};
    expect_spec_figures(figures, sizeof figures / sizeof figures[0]);
}

static void spec_example_tp_ratio(void **state)
{
    (void)state;
    const char *figures[] = {"FLOPS/BW = 10312", "t_max = 6h/(B FLOPS/BW) = 2.4", "FLOPS/BW = 2198", "t_max = 11.2",
                             "ratio 3 d = 384", "= 859 GB/s per direction", "1.7 TB/s both ways"};
    expect_spec_figures(figures, sizeof figures / sizeof figures[0]);
}

static void explain_llama2_70b_both_ways(void **state)
{
    (void)state;
    /* SPEC 2's closing line: the textbook count and the real architecture side by side */
    run_result r = run_sextant("explain llama2-70b --gpus 8 --tp 8 --mbs 8 --seq 4096 --recompute selective");
    expect_ok(&r);
    assert_non_null(strstr(r.out, "Textbook GPT count"));
    assert_non_null(strstr(r.out, "Exact count from the architecture"));
    assert_non_null(strstr(r.out, "GQA shrinks them"));
    assert_non_null(strstr(r.out, "Korthikanti"));
    run_free(&r);
}

/* The power model through the CLI: with the overlay the JSON names the step's
 * clock and power, the text says why, and each clock-bound op carries its
 * seconds and energy; without it the clock is the top one and no op has them. */
static void power_model_in_json_and_text(void **state)
{
    (void)state;
    const char *layout = "estimate llama3.2-1b --gpu h100-sxm --mbs 4 --gbs 4 --seq 2048 --attention flash";
    run_result r = run_sextant("%s --calibration %s/tests/data/power-overlay.csv --format json --ops", layout, SEXTANT_ROOT);
    expect_ok(&r);
    cJSON *root = cJSON_Parse(r.out);
    assert_non_null(root);
    double x = json_number(root, "time", "clock_fraction");
    assert_true(x > 0.3 && x < 1.0);
    assert_close(json_number(root, "time", "sm_clock_mhz"), x * 1980.0, 1e-9);
    assert_close(json_number(root, "time", "power_w"), 700.0, 1e-6);
    assert_true(json_number(root, "time", "top_clock_power_w") > 700.0);
    assert_true(json_number(root, "time", "clock_bound_top_s") > 0.0);
    const cJSON *stage = cJSON_GetArrayItem(cJSON_GetObjectItemCaseSensitive(root, "stages"), 0), *op;
    int gemms = 0, membound = 0;
    cJSON_ArrayForEach(op, cJSON_GetObjectItemCaseSensitive(stage, "ops")) {
        const char *kind = cJSON_GetObjectItemCaseSensitive(op, "kind")->valuestring;
        const cJSON *cb = cJSON_GetObjectItemCaseSensitive(op, "clock_bound_s");
        if (!strcmp(kind, "gemm") && cJSON_GetObjectItemCaseSensitive(op, "flops")->valuedouble >= 1e9) {
            assert_non_null(cb);
            assert_true(cb->valuedouble > 0.0 && cb->valuedouble <= cJSON_GetObjectItemCaseSensitive(op, "time_s")->valuedouble);
            assert_true(cJSON_GetObjectItemCaseSensitive(op, "energy_j")->valuedouble > 0.0);
            gemms++;
        }
        if (!strcmp(kind, "membound") && cJSON_GetObjectItemCaseSensitive(op, "bytes")->valuedouble > 0.0) {
            assert_true(cb == NULL || cb->valuedouble == 0.0);
            membound++;
        }
    }
    assert_true(gemms >= 6 && membound >= 6);
    cJSON_Delete(root);
    run_free(&r);

    r = run_sextant("%s --calibration %s/tests/data/power-overlay.csv", layout, SEXTANT_ROOT);
    expect_ok(&r);
    assert_non_null(strstr(r.out, "power cap: at the top clock the step would draw"));
    run_free(&r);

    /* plan says at what clock its winner runs, and only with the power model */
    r = run_sextant("plan llama3.2-1b --gpu h100-sxm --gpus 8 --tokens 20B --calibration %s/tests/data/power-overlay.csv",
                    SEXTANT_ROOT);
    expect_ok(&r);
    assert_non_null(strstr(r.out, "Under the 700 W power cap it runs at "));
    run_free(&r);
    r = run_sextant("plan llama3.2-1b --gpu h100-sxm --gpus 8 --tokens 20B");
    expect_ok(&r);
    assert_null(strstr(r.out, "power cap"));
    run_free(&r);

    r = run_sextant("%s --format json --ops", layout);
    expect_ok(&r);
    root = cJSON_Parse(r.out);
    assert_non_null(root);
    assert_true(json_number(root, "time", "clock_fraction") == 1.0);
    assert_true(json_number(root, "time", "power_w") == 0.0);
    assert_null(strstr(r.out, "energy_j"));
    cJSON_Delete(root);
    run_free(&r);
}

/* The step-level fit, out of sample: fitted on GPT-2 124M's six runs of one
 * H100 call (unfused and fused attention, micro-batch 8/16/32), the other
 * twelve runs of that call (GPT-2 350M and the LLaMA-style 1.24B) must come
 * within 5% of their measured steps.  The overlay calibrate wrote misses the
 * fused LLaMA at micro-batch 4 by 7.7%, so this test can fail. */
#define POWER_RUNS SEXTANT_ROOT "/docs/validation/h100-power-2026-11-25/run-power-model-temperature"

static double measured_step_s(const char *path)
{
    csv_table t;
    char err[512];
    if (csv_table_read(path, &t, err, sizeof err) != 0) {
        print_error("%s\n", err);
        fail();
    }
    double measured = 0.0;
    for (int r = 0; r < t.nrows; r++)
        if (!strcmp(csv_table_cell(&t, r, "op"), "step") && !strcmp(csv_table_cell(&t, r, "calibrated"), "1"))
            measured = strtod(csv_table_cell(&t, r, "measured_s"), NULL);
    csv_table_free(&t);
    assert_true(measured > 0.0);
    return measured;
}

/* The planner's step against the step measured in runs/{train,flash}_MODEL_mbsB.csv, with `overlay`. */
static double step_error_in(const char *runs, const char *overlay, const char *model, int mbs, int seq, int fused)
{
    char path[1024];
    snprintf(path, sizeof path, "%s/%s_%s_mbs%d.csv", runs, fused ? "flash" : "train", model, mbs);
    run_result r = run_sextant("estimate %s --gpu h100-sxm --mbs %d --gbs %d --seq %d --attention %s --recompute none "
                               "--no-dropout --calibration %s --format json", model, mbs, mbs, seq, fused ? "flash" : "unfused",
                               overlay);
    expect_ok(&r);
    cJSON *root = cJSON_Parse(r.out);
    assert_non_null(root);
    double predicted = json_number(root, "time", "step_s");
    cJSON_Delete(root);
    run_free(&r);
    return predicted / measured_step_s(path) - 1.0;
}

static double step_error(const char *overlay, const char *model, int mbs, int seq, int fused)
{
    return step_error_in(POWER_RUNS, overlay, model, mbs, seq, fused);
}

/* The issue's fidelity target on recorded H100 steps: the overlay `calibrate` wrote (power model and
 * step fit) and the shipped hwdb/measured/h100-sxm.csv each put all 18 runs of their call within 5%
 * (docs/validation/h100-fitted-2026-11-25).  A planner change that moves these predictions by a few
 * percent fails here: the fused LLaMA at micro-batch 4 sits at -3.8% and -3.4%. */
#define FITTED_RUNS SEXTANT_ROOT "/docs/validation/h100-fitted-2026-11-25"

static void calibrated_overlays_predict_all_18_runs(void **state)
{
    (void)state;
    const char *calls[][2] = {{FITTED_RUNS "/run-calibrate", FITTED_RUNS "/run-calibrate/h100-sxm.csv"},
                              {FITTED_RUNS "/run", SEXTANT_ROOT "/hwdb/measured/h100-sxm.csv"}};
    const char *models[] = {"gpt2", "gpt2-medium", "llama3.2-1b"};
    const int mbs[3][3] = {{8, 16, 32}, {4, 8, 16}, {1, 2, 4}}, seq[] = {1024, 1024, 2048};
    for (int c = 0; c < 2; c++) {
        double worst = 0.0;
        for (int m = 0; m < 3; m++)
            for (int b = 0; b < 3; b++)
                for (int fused = 0; fused < 2; fused++) {
                    double e = step_error_in(calls[c][0], calls[c][1], models[m], mbs[m][b], seq[m], fused);
                    if (fabs(e) >= 0.05)
                        print_error("%s: %s mbs %d %s: %+.1f%%\n", calls[c][0], models[m], mbs[m][b],
                                    fused ? "fused" : "unfused", 100 * e);
                    worst = fmax(worst, fabs(e));
                }
        assert_true(worst < 0.05);
    }
}

static void fit_power_predicts_other_models(void **state)
{
    (void)state;
    char fitted[] = "/tmp/sextant-fit-XXXXXX";
    int fd = mkstemp(fitted);
    assert_true(fd >= 0);
    close(fd);
    run_result r = run_sextant("fit-power --calibration " POWER_RUNS "/h100-sxm.csv --out %s --runs "
                               POWER_RUNS "/train_gpt2_mbs8.csv," POWER_RUNS "/train_gpt2_mbs16.csv," POWER_RUNS
                               "/train_gpt2_mbs32.csv," POWER_RUNS "/flash_gpt2_mbs8.csv," POWER_RUNS "/flash_gpt2_mbs16.csv,"
                               POWER_RUNS "/flash_gpt2_mbs32.csv", fitted);
    expect_ok(&r);
    assert_non_null(strstr(r.out, "overlay written to"));
    assert_non_null(strstr(r.out, "rms step error"));
    run_free(&r);

    /* the fitted overlay loads, and only the two fitted rows changed */
    hwdb db;
    char err[512];
    assert_int_equal(hwdb_load(SEXTANT_ROOT "/hwdb", &db, err, sizeof err), 0);
    assert_int_equal(hwdb_apply_overlay(&db, fitted, err, sizeof err), 0);
    const hw_gpu *g = hwdb_find_gpu(&db, "h100-sxm");
    assert_true(g->clock_energy_exponent >= 0.0 && g->clock_energy_exponent <= 4.0);
    assert_true(fabs(g->energy_attention_j_per_flop - 2.631e-12) > 0.1e-12);
    assert_true(fabs(g->power_static_w - 135.5) < 0.1 && fabs(g->energy_gemm_j_per_flop - 0.901e-12) < 1e-15);
    hwdb_free(&db);

    const char *models[] = {"gpt2-medium", "llama3.2-1b"};
    const int mbs[2][3] = {{4, 8, 16}, {1, 2, 4}}, seq[] = {1024, 2048};
    double worst_before = 0.0, worst_after = 0.0;
    for (int m = 0; m < 2; m++)
        for (int b = 0; b < 3; b++)
            for (int fused = 0; fused < 2; fused++) {
                double after = step_error(fitted, models[m], mbs[m][b], seq[m], fused);
                double before = step_error(POWER_RUNS "/h100-sxm.csv", models[m], mbs[m][b], seq[m], fused);
                if (fabs(after) > 0.05) print_error("%s mbs %d %s: %+.1f%%\n", models[m], mbs[m][b], fused ? "fused" : "unfused",
                                                    100 * after);
                worst_after = fmax(worst_after, fabs(after));
                worst_before = fmax(worst_before, fabs(before));
            }
    assert_true(worst_before > 0.05);
    assert_true(worst_after < 0.05);
    unlink(fitted);
}

static void fit_power_bad_input(void **state)
{
    (void)state;
    expect_bad_input("fit-power --runs a.csv,b.csv --out /tmp/x.csv", "--calibration OVERLAY");
    expect_bad_input("fit-power --calibration " POWER_RUNS "/h100-sxm.csv --out /tmp/x.csv", "--runs");
    expect_bad_input("fit-power --calibration " POWER_RUNS "/h100-sxm.csv --runs a.csv,b.csv", "--out FILE");
    expect_bad_input("fit-power --calibration " POWER_RUNS "/h100-sxm.csv --out /tmp/sextant-x.csv --runs /nonexistent.csv,"
                     POWER_RUNS "/train_gpt2_mbs8.csv", "/nonexistent.csv");
    expect_bad_input("fit-power --calibration " POWER_RUNS "/h100-sxm.csv --out /tmp/sextant-x.csv --runs "
                     POWER_RUNS "/train_gpt2_mbs8.csv", "the fit needs 2 to");
    expect_bad_input("fit-power --calibration " POWER_RUNS "/h100-sxm.csv --out /tmp/sextant-x.csv --gpu h200 --runs "
                     POWER_RUNS "/train_gpt2_mbs8.csv," POWER_RUNS "/train_gpt2_mbs16.csv", "but the fit is for h200");
    expect_bad_input("fit-power --calibration " SEXTANT_ROOT "/docs/validation/h100-power-2026-11-25/run-default/h100-sxm.csv "
                     "--out /tmp/sextant-x.csv --runs " POWER_RUNS "/train_gpt2_mbs8.csv," POWER_RUNS "/train_gpt2_mbs16.csv",
                     "has no power model");
    expect_bad_input("fit-power --calibration " POWER_RUNS "/h100-sxm.csv --out /tmp/sextant-x.csv --runs "
                     POWER_RUNS "/calibrate.log," POWER_RUNS "/train_gpt2_mbs16.csv", "calibrate.log");
    assert_int_equal(access("/tmp/sextant-x.csv", F_OK), -1);
}

static void model_config_imports(void **state)
{
    (void)state;
    const char *files[] = {"llama2-7b", "llama3-8b", "mistral-7b", "mixtral-8x7b", "gpt2", "gpt-neox-20b", "bert-base"};
    for (size_t i = 0; i < sizeof files / sizeof files[0]; i++) {
        run_result r = run_sextant("estimate --model-config %s/tests/data/hf/%s.json --gpu a100-sxm4-80gb --gpus 8 --tp 8 "
                                   "--sp --format json", SEXTANT_ROOT, files[i]);
        expect_ok(&r);
        assert_non_null(strstr(r.out, files[i]));
        run_free(&r);
    }
}

static void out_file_is_written_whole(void **state)
{
    (void)state;
    char path[] = "/tmp/sextant-out-XXXXXX";
    int fd = mkstemp(path);
    close(fd);
    unlink(path);
    run_result r = run_sextant("estimate llama2-7b --gpus 8 --format json --out %s", path);
    assert_int_equal(r.status, 0);
    assert_string_equal(r.out, "");
    char *text = slurp(path);
    cJSON *root = cJSON_Parse(text);
    assert_non_null(root);
    cJSON_Delete(root);
    free(text);
    unlink(path);
    run_free(&r);
    /* bad input leaves no file behind */
    r = run_sextant("estimate llama2-7b --gpus 7 --tp 2 --out %s", path);
    assert_int_not_equal(r.status, 0);
    struct stat st;
    assert_int_equal(stat(path, &st), -1);
    run_free(&r);
}

static void published_runs_regression(void **state)
{
    (void)state;
    run_result r = run_sextant("published");
    expect_ok(&r);
    const char *runs[] = {"megatron-sc21-1.7b", "megatron-sc21-1t", "opt-175b-992gpu", "bloom-176b-384gpu",
                          "llama-65b-2048gpu", "llama3-405b-8k-8192gpu", "rows estimated: mean absolute error",
                          "plan: sextant's best"};
    for (size_t i = 0; i < sizeof runs / sizeof runs[0]; i++) assert_non_null(strstr(r.out, runs[i]));
    run_free(&r);
    /* SC'21's 1T row: 163 TFLOP/s per GPU with recomputation; the estimate must land within 25% */
    r = run_sextant("published --format json");
    expect_ok(&r);
    cJSON *root = cJSON_Parse(r.out);
    assert_non_null(root);
    const cJSON *row = NULL;
    cJSON_ArrayForEach(row, cJSON_GetObjectItem(root, "rows"))
        if (!strcmp(cJSON_GetObjectItem(row, "case")->valuestring, "megatron-sc21-1t")) break;
    assert_non_null(row);
    assert_string_equal(cJSON_GetObjectItem(row, "convention")->valuestring, "hardware FLOPs (full s x s, recomputation counted)");
    assert_close(cJSON_GetObjectItem(row, "predicted")->valuedouble, 163.0, 0.25);
    cJSON_Delete(root);
    run_free(&r);
}

/* The shared file as it is: every row read, the summary the per-row records add up to, errors signed as
 * throughput (time metrics inverted), the reasons counted. */
static void published_shared_runs_json(void **state)
{
    (void)state;
    run_result r = run_sextant("published --runs %s/data/published/runs.csv --format json", SEXTANT_ROOT);
    expect_ok(&r);
    cJSON *root = cJSON_Parse(r.out);
    assert_non_null(root);
    assert_int_equal(cJSON_GetObjectItem(root, "rows_total")->valueint, 357);
    int estimated = cJSON_GetObjectItem(root, "rows_estimated")->valueint;
    assert_true(estimated >= 250);
    double sum_abs = 0, sum_signed = 0;
    int counted = 0, skipped = 0;
    const cJSON *row;
    cJSON_ArrayForEach(row, cJSON_GetObjectItem(root, "rows")) {
        if (!cJSON_IsTrue(cJSON_GetObjectItem(row, "estimated"))) { skipped++; continue; }
        double published = cJSON_GetObjectItem(row, "published")->valuedouble;
        double predicted = cJSON_GetObjectItem(row, "predicted")->valuedouble;
        double err = cJSON_GetObjectItem(row, "signed_err")->valuedouble;
        int time_metric = !strcmp(cJSON_GetObjectItem(row, "metric")->valuestring, "s_per_iter");
        assert_close(err, time_metric ? published / predicted - 1.0 : predicted / published - 1.0, 1e-4);
        sum_abs += fabs(err);
        sum_signed += err;
        counted++;
    }
    assert_int_equal(counted, estimated);
    assert_int_equal(counted + skipped, 357);
    assert_close(cJSON_GetObjectItem(root, "mean_abs_err")->valuedouble, sum_abs / counted, 1e-4);
    assert_close(cJSON_GetObjectItem(root, "mean_signed_err")->valuedouble, sum_signed / counted, 1e-3);
    int reasons = 0;
    const cJSON *reason;
    cJSON_ArrayForEach(reason, cJSON_GetObjectItem(root, "not_estimable")) reasons += reason->valueint;
    assert_int_equal(reasons, skipped);
    cJSON_Delete(root);
    run_free(&r);
}

/* The free-text columns read by their rules, the reasons a row is not estimated, and a malformed row refused. */
static void published_row_rules(void **state)
{
    (void)state;
    const char *header = "case,source,model,layers,hidden,heads,kv_heads,ffn,vocab,seq,params,gpu,gpus,gpus_per_node,tp,"
                         "pp,vpp,cp,ep,dp,mbs,gbs,precision,recompute,zero_or_fsdp,framework,metric,value,notes\n";
    char path[] = "/tmp/sextant-published-XXXXXX", text[4096];
    snprintf(text, sizeof text, "%s"
             "a,\"x/y README\",Llama 3 8B,32,4096,32,8,14336,128256,8192,8B,H100-SXM-80GB,16,8,1,1,,1,,16,2,64,fp8 (TE),,"
             "distributed optimizer,NeMo,mfu,0.4,FP8 MFU is vs FP8 peak\n"
             "b,\"x/y README\",GPT3-175B,,,,,,,2048,,H100 SXM,128,8,4,8,12,1,,4,1,256,bf16,,,NeMo,tokens_per_s_per_gpu,800,\n"
             "c,\"Some et al. 2025 (arXiv 1)\",M,32,4096,32,MLA,14336,128256,8192,,H100,16,8,1,1,,1,,16,1,64,bf16,,,,mfu,0.4,\n"
             "d,\"Some et al. 2025 (arXiv 1)\",M,32,4096,32,8,14336,128256,8192,,TPU v5p,16,8,1,1,,1,,16,1,64,bf16,,,,mfu,0.4,\n"
             "e,\"Some et al. 2025 (arXiv 1)\",M,32,4096,32,8,14336,128256,8192,,A100,16,8,1,1,,2,,8,1,64,bf16,,,,mfu,0.4,\n"
             "f,\"Some et al. 2021\",GPT,24,2048,16,,,51200,2048,1.3B,A100,16,8,2,1,,1,,8,1,64,fp16,full,none,Megatron-LM (2021),tflops_per_gpu_hw,100,\n",
             header);
    write_temp(path, text);
    run_result r = run_sextant("published --runs %s --format json", path);
    expect_ok(&r);
    cJSON *root = cJSON_Parse(r.out);
    assert_non_null(root);
    const cJSON *rows = cJSON_GetObjectItem(root, "rows");
    const cJSON *a = cJSON_GetArrayItem(rows, 0), *b = cJSON_GetArrayItem(rows, 1);
    assert_true(cJSON_IsTrue(cJSON_GetObjectItem(a, "estimated")));
    assert_string_equal(cJSON_GetObjectItem(a, "convention")->valuestring, "model FLOPs (full s x s) / FP8 peak");
    const cJSON *la = cJSON_GetObjectItem(a, "layout");
    assert_string_equal(cJSON_GetObjectItem(la, "precision")->valuestring, "fp8");
    assert_int_equal(cJSON_GetObjectItem(la, "zero")->valueint, 1);
    assert_string_equal(cJSON_GetObjectItem(la, "attention")->valuestring, "flash");
    /* b: the shape from the zoo's gpt3-175b, TP 4 with sequence parallelism in a 2024 framework */
    assert_true(cJSON_IsTrue(cJSON_GetObjectItem(b, "estimated")));
    assert_int_equal(cJSON_GetObjectItem(cJSON_GetObjectItem(b, "layout"), "sp")->valueint, 1);
    assert_int_equal(cJSON_GetObjectItem(cJSON_GetObjectItem(b, "layout"), "vpp")->valueint, 12);
    const char *reasons[] = {"a field is not a plain number", "GPU not in the hardware database"};
    for (int i = 0; i < 2; i++)
        assert_string_equal(cJSON_GetObjectItem(cJSON_GetArrayItem(rows, 2 + i), "reason")->valuestring, reasons[i]);
    /* e: context parallelism 2 over DP 8, a ring (Megatron's default) */
    const cJSON *le = cJSON_GetObjectItem(cJSON_GetArrayItem(rows, 4), "layout");
    assert_int_equal(cJSON_GetObjectItem(le, "cp")->valueint, 2);
    /* f: a 2021 framework: unfused attention, no SP, full recomputation, fp16, hardware FLOPs */
    const cJSON *lf = cJSON_GetObjectItem(cJSON_GetArrayItem(rows, 5), "layout");
    assert_string_equal(cJSON_GetObjectItem(lf, "attention")->valuestring, "unfused");
    assert_int_equal(cJSON_GetObjectItem(lf, "sp")->valueint, 0);
    assert_string_equal(cJSON_GetObjectItem(lf, "recompute")->valuestring, "full");
    assert_string_equal(cJSON_GetObjectItem(lf, "precision")->valuestring, "fp16");
    assert_int_equal(cJSON_GetObjectItem(root, "rows_estimated")->valueint, 4);
    cJSON_Delete(root);
    run_free(&r);
    unlink(path);
    /* a metric the format does not know: refused with file:line:field */
    char bad[] = "/tmp/sextant-published-bad-XXXXXX";
    snprintf(text, sizeof text, "%sa,s,M,32,4096,32,8,14336,128256,8192,,H100,16,8,1,1,,1,,16,1,64,bf16,,,,speed,1,\n", header);
    write_temp(bad, text);
    r = run_sextant("published --runs %s", bad);
    assert_int_not_equal(r.status, 0);
    assert_non_null(strstr(r.err, ":2:metric: 'speed'"));
    run_free(&r);
    unlink(bad);
}

/* docs/validation/published.md is what `make published` writes today. */
static void published_md_is_current(void **state)
{
    (void)state;
    char build[512], cmd[2048], out_path[] = "/tmp/sextant-published-md-XXXXXX";
    snprintf(build, sizeof build, "%s", SEXTANT_BIN);
    *strrchr(build, '/') = '\0';
    int fd = mkstemp(out_path);
    assert_true(fd >= 0);
    close(fd);
    snprintf(cmd, sizeof cmd, "cd %s && sh docs/validation/published.sh %s > %s", SEXTANT_ROOT, build, out_path);
    assert_int_equal(system(cmd), 0);
    char *fresh = slurp(out_path), *committed = slurp(SEXTANT_ROOT "/docs/validation/published.md");
    if (strcmp(fresh, committed) != 0)
        print_error("docs/validation/published.md is stale: run `make published` and commit it\n");
    assert_string_equal(fresh, committed);
    free(fresh);
    free(committed);
    unlink(out_path);
}

static void plan_command_line(void **state)
{
    (void)state;
    run_result r = run_sextant("plan llama2-70b --gpu h100-sxm --gpus 1024 --tokens 2T --format json");
    expect_ok(&r);
    cJSON *root = cJSON_Parse(r.out);
    assert_non_null(root);
    const cJSON *search = cJSON_GetObjectItem(root, "search");
    assert_true(cJSON_GetObjectItem(search, "layouts_evaluated")->valuedouble > 1000);
    assert_true(cJSON_IsNumber(cJSON_GetObjectItem(search, "seconds")));
    const cJSON *top = cJSON_GetObjectItem(root, "top");
    assert_int_equal(cJSON_GetArraySize(top), 5);
    const cJSON *first = cJSON_GetArrayItem(top, 0);
    assert_true(cJSON_GetObjectItem(first, "memory_total")->valuedouble <= cJSON_GetObjectItem(first, "memory_capacity")->valuedouble);
    cJSON_Delete(root);
    run_free(&r);
    r = run_sextant("plan llama2-70b --gpu h100-sxm --gpus 1024 --tokens 2T");
    expect_ok(&r);
    assert_non_null(strstr(r.out, "Why it wins"));
    assert_non_null(strstr(r.out, "Rejected"));
    run_free(&r);
    r = run_sextant("plan llama2-70b --gpu h100-sxm --gpus 1024 --emit megatron");
    expect_ok(&r);
    assert_non_null(strstr(r.out, "--tensor-model-parallel-size"));
    run_free(&r);
    r = run_sextant("plan llama2-13b --gpu h100-sxm,a100-sxm4-80gb --gpus 64-256 --tokens 1T --format csv");
    expect_ok(&r);
    assert_non_null(strstr(r.out, "frontier,"));
    assert_non_null(strstr(r.out, "top,1,"));
    run_free(&r);
    /* --plot draws with gnuplot where it is installed, and says how to get it where not */
    char svg[] = "/tmp/sextant-plot-XXXXXX";
    int fd = mkstemp(svg);
    close(fd);
    unlink(svg);
    r = run_sextant("plan llama2-13b --gpu h100-sxm --gpus 64-256 --tokens 1T --plot %s", svg);
    assert_int_equal(r.status, 0);
    struct stat st;
    if (system("command -v gnuplot >/dev/null 2>&1") == 0) assert_int_equal(stat(svg, &st), 0);
    else assert_non_null(strstr(r.err, "apt-get install gnuplot"));
    unlink(svg);
    run_free(&r);
    expect_bad_input("plan llama2-70b --gpu h100-sxm", "--gpus N");
    expect_bad_input("plan llama2-70b --gpus 8-4", "--gpus");
    expect_bad_input("plan llama2-70b --gpus 3-3", "no power of two");
    expect_bad_input("plan llama2-70b --gpus 64 --emit jax", "--emit");
    expect_bad_input("plan llama2-70b --gpus 64 --objective speed", "--objective");
    expect_bad_input("plan llama2-70b --days -3", "--days");
    expect_bad_input("plan llama2-70b --gpus 64 --gpu h100-sxm,h900", "closest:");
    expect_bad_input("plan llama2-70b --gpus 64 --top 0", "--top");
    expect_bad_input("plan llama2-70b --gpu h100-sxm --gpus 8 --emit megatron", "no layout meets");
}

static void version_and_help(void **state)
{
    (void)state;
    run_result r = run_sextant("--version");
    expect_ok(&r);
    assert_non_null(strstr(r.out, "sextant "));
    run_free(&r);
    r = run_sextant("--help");
    expect_ok(&r);
    assert_non_null(strstr(r.out, "--recompute"));
    run_free(&r);
}

/* validate and calibrate need a GPU: without one (CI) they say so in one
 * line and exit 0, whether or not the GPU half was built. */
static void gpu_commands_skip_without_a_gpu(void **state)
{
    (void)state;
    if (system("nvidia-smi -L >/dev/null 2>&1") == 0) skip();
    const char *commands[] = {"validate gpt2 --mbs 4 --steps 10", "validate gpt2 --ops", "calibrate --out /dev/null"};
    for (size_t i = 0; i < sizeof commands / sizeof commands[0]; i++) {
        run_result r = run_sextant("%s", commands[i]);
        if (r.status != 0 || count_lines(r.out) + count_lines(r.err) != 1 || !strstr(r.status ? r.err : r.out, "skipping")) {
            print_error("sextant %s: exit %d, stdout: %s, stderr: %s\n", commands[i], r.status, r.out, r.err);
            run_free(&r);
            fail();
        }
        run_free(&r);
    }
}

static void bad_input_is_one_clear_line(void **state)
{
    (void)state;
    expect_bad_input("estimate lama2-70b", "closest: llama2-70b");
    expect_bad_input("estimate llama2-70b --gpu h100-sxn", "closest: h100-sxm");
    expect_bad_input("estimate llama2-70b --tp abc", "--tp");
    expect_bad_input("estimate llama2-70b --gpus 0", "--gpus");
    expect_bad_input("estimate llama2-70b --gpus -8", "--gpus");
    expect_bad_input("estimate llama2-70b --gpus 1024 --tp 3", "not divisible");
    expect_bad_input("estimate llama2-70b --gpus 64 --tp 8 --dp 4", "--dp 4");
    expect_bad_input("estimate llama2-70b --tokens 1e400", "--tokens");
    expect_bad_input("estimate llama2-70b --tokens nan", "--tokens");
    expect_bad_input("estimate llama2-70b --seq 1e12", "--seq");
    expect_bad_input("estimate llama2-70b --mbs 100000 --seq 1000000", "tokens per micro-batch");
    expect_bad_input("estimate llama2-70b --gpus 9999999999", "--gpus");
    expect_bad_input("estimate llama2-70b --gpus 200 --pp 200", "--pp 200");
    expect_bad_input("estimate llama2-70b --gpu v100-sxm2-32gb --precision bf16", "--precision bf16");
    expect_bad_input("estimate llama2-70b --precision fp4", "--precision");
    expect_bad_input("estimate llama2-70b --recompute some", "--recompute");
    expect_bad_input("estimate llama2-70b --zero 4", "--zero");
    expect_bad_input("estimate llama2-70b --format xml", "--format");
    expect_bad_input("estimate llama2-70b --price -1", "--price");
    expect_bad_input("estimate llama2-70b --gpu", "--gpu: missing value");
    expect_bad_input("estimate llama2-70b --frobnicate", "unknown flag");
    expect_bad_input("frobnicate", "unknown command");
    expect_bad_input("estimate --model-config /nonexistent.json", "/nonexistent.json");
    expect_bad_input("estimate llama2-70b --hwdb /nonexistent", "/nonexistent/gpus.csv");
    expect_bad_input("estimate llama2-70b --calibration /nonexistent.csv", "/nonexistent.csv");
    expect_bad_input("hw h900", "closest:");
}

/* Every flag is used by the command or refused by name; numbers are plain decimals with the
 * documented suffixes; a GPU range, a GPU list or a token count below one step is refused by estimate. */
static void flags_of_other_commands_are_refused(void **state)
{
    (void)state;
    const char *plan_only[] = {"--top 3", "--days 30", "--budget 1e6", "--objective cost", "--strict",
                               "--allow-tp-across-nodes", "--emit megatron", "--plot /tmp/sextant-x.svg"};
    char args[256], flag[64];
    for (size_t i = 0; i < sizeof plan_only / sizeof plan_only[0]; i++) {
        snprintf(flag, sizeof flag, "%s", plan_only[i]);
        *strchrnul(flag, ' ') = '\0';
        char want[128];
        snprintf(want, sizeof want, "%s is a flag of plan, not of estimate", flag);
        snprintf(args, sizeof args, "estimate llama2-7b %s", plan_only[i]);
        expect_bad_input(args, want);
        snprintf(want, sizeof want, "%s is a flag of plan, not of explain", flag);
        snprintf(args, sizeof args, "explain llama2-7b %s", plan_only[i]);
        expect_bad_input(args, want);
    }
    const char *layout_only[] = {"--tp 2", "--pp 2", "--dp 2", "--vpp 2", "--mbs 2", "--recompute full", "--sp",
                                 "--zero 1", "--gpus-per-node 4", "--ops"};
    for (size_t i = 0; i < sizeof layout_only / sizeof layout_only[0]; i++) {
        snprintf(flag, sizeof flag, "%s", layout_only[i]);
        *strchrnul(flag, ' ') = '\0';
        char want[128];
        snprintf(want, sizeof want, "%s is a flag of estimate", flag);
        snprintf(args, sizeof args, "plan llama2-7b --gpus 8 %s", layout_only[i]);
        expect_bad_input(args, want);
    }
    expect_bad_input("explain llama2-7b --ops", "--ops is a flag of estimate, not of explain");
    expect_bad_input("explain llama2-7b --format json", "--format is a flag of estimate and plan, not of explain");
    expect_bad_input("estimate llama2-7b --spec", "--spec is a flag of explain, not of estimate");
    expect_bad_input("estimate llama2-7b --runs a.csv", "--runs is a flag of fit-power, not of estimate");
    /* a range of GPU counts and a list of GPU types are plan's */
    expect_bad_input("estimate llama2-7b --gpus 8-16", "--gpus 8-16: a range is for plan");
    expect_bad_input("estimate llama2-7b --gpu h100-sxm,a100-sxm4-80gb", "estimate takes one GPU type");
    expect_bad_input("plan llama2-7b --gpus 8 --gpu h100-sxm,a100-sxm4-80gb,H100-SXM", "h100-sxm is listed twice");
    /* numbers: plain decimals, not hexadecimal, signs, spaces or words strtod would take */
    const char *not_counts[] = {"0x10", "+8", "' 8'", "8.5", "1e", "inf", "0x8-16", "8-0x10"};
    for (size_t i = 0; i < sizeof not_counts / sizeof not_counts[0]; i++) {
        snprintf(args, sizeof args, "estimate llama2-7b --gpus %s", not_counts[i]);
        expect_bad_input(args, "--gpus");
        snprintf(args, sizeof args, "plan llama2-7b --gpus %s", not_counts[i]);
        expect_bad_input(args, "--gpus");
    }
    expect_bad_input("estimate llama2-7b --tokens 0x1p40", "--tokens");
    expect_bad_input("estimate llama2-7b --days 0x10", "--days");
    /* tokens below one step */
    expect_bad_input("estimate llama2-7b --tokens 1e-5", "less than one step's");
    expect_bad_input("estimate llama2-7b --gbs 1024 --tokens 4M", "--gbs 1024 x --seq 4096");
    expect_bad_input("plan llama2-7b --gpus 8 --gbs 1024 --tokens 4M", "less than one step's");
    /* the documented forms still parse */
    run_result r = run_sextant("estimate llama2-7b --gpus 8 --tokens 1.5e9 --gbs 64");
    assert_int_equal(r.status, 0);
    run_free(&r);
    r = run_sextant("estimate llama2-7b --gpus 8 --tokens 2B --gbs 64");
    assert_int_equal(r.status, 0);
    run_free(&r);
}

/* FlashAttention needs sm80 or newer: the default elsewhere is the unfused kernel, and asking for
 * flash on such a GPU is refused, in estimate and in plan. */
static void attention_default_is_one_the_gpu_has(void **state)
{
    (void)state;
    run_result r = run_sextant("estimate gpt-1.3b --gpu v100-sxm2-32gb --gpus 4 --format json");
    assert_int_equal(r.status, 0);
    assert_non_null(strstr(r.out, "\"attention\":\t\"unfused\""));
    run_free(&r);
    r = run_sextant("estimate gpt-1.3b --gpu a100-sxm4-80gb --gpus 4 --format json");
    assert_int_equal(r.status, 0);
    assert_non_null(strstr(r.out, "\"attention\":\t\"flash\""));
    run_free(&r);
    expect_bad_input("estimate gpt-1.3b --gpu v100-sxm2-32gb --gpus 4 --attention flash",
                     "--attention flash: v100-sxm2-32gb is volta, and FlashAttention needs sm80");
    expect_bad_input("plan gpt-1.3b --gpu v100-sxm2-32gb --gpus 4 --attention flash",
                     "--attention flash: v100-sxm2-32gb is volta");
    /* plan: the GPU's default, said in one line, and Megatron's flags without --use-flash-attn */
    r = run_sextant("plan gpt-1.3b --gpu v100-sxm2-32gb,h100-sxm --gpus 4");
    assert_int_equal(r.status, 0);
    assert_non_null(strstr(r.out, "attention: unfused on v100-sxm2-32gb (FlashAttention needs sm80 or newer)"));
    assert_null(strstr(r.out, "attention: unfused on h100-sxm"));
    run_free(&r);
    r = run_sextant("plan gpt-1.3b --gpu v100-sxm2-32gb --gpus 4 --emit megatron");
    assert_int_equal(r.status, 0);
    assert_null(strstr(r.out, "--use-flash-attn"));
    run_free(&r);
    r = run_sextant("plan gpt-1.3b --gpu h100-sxm --gpus 4 --emit megatron");
    assert_int_equal(r.status, 0);
    assert_non_null(strstr(r.out, "--use-flash-attn"));
    run_free(&r);
    r = run_sextant("plan gpt-1.3b --gpu h100-sxm --gpus 4 --attention unfused --format json");
    assert_int_equal(r.status, 0);
    assert_null(strstr(r.out, "\"flash\""));
    assert_non_null(strstr(r.out, "\"unfused\""));
    run_free(&r);
}

static void bad_csv_names_file_line_field(void **state)
{
    (void)state;
    char dir[] = "/tmp/sextant-cli-XXXXXX";
    assert_non_null(mkdtemp(dir));
    char cmd[1024];
    /* a truncated zoo: its last row cut in the middle */
    snprintf(cmd, sizeof cmd, "head -c $(( $(wc -c < %s/models/zoo.csv) - 40 )) %s/models/zoo.csv > %s/zoo.csv",
             SEXTANT_ROOT, SEXTANT_ROOT, dir);
    assert_int_equal(system(cmd), 0);
    char args[512], where[512];
    snprintf(args, sizeof args, "estimate llama2-7b --models %s/zoo.csv", dir);
    snprintf(where, sizeof where, "%s/zoo.csv:", dir);
    expect_bad_input(args, where);
    /* a non-numeric bandwidth in a copy of hwdb */
    snprintf(cmd, sizeof cmd, "cp -r %s/hwdb %s/hw && awk 'BEGIN{FS=OFS=\",\"} NR==2{$5=\"fast\"} 1' %s/hwdb/gpus.csv > %s/hw/gpus.csv",
             SEXTANT_ROOT, dir, SEXTANT_ROOT, dir);
    assert_int_equal(system(cmd), 0);
    snprintf(args, sizeof args, "estimate llama2-7b --hwdb %s/hw", dir);
    snprintf(where, sizeof where, "%s/hw/gpus.csv:2:", dir);
    expect_bad_input(args, where);
    snprintf(cmd, sizeof cmd, "rm -rf %s", dir);
    assert_int_equal(system(cmd), 0);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(models_lists_the_zoo),
        cmocka_unit_test(hw_shows_sources),
        cmocka_unit_test(default_estimate_runs),
        cmocka_unit_test(json_has_every_documented_key),
        cmocka_unit_test(power_model_in_json_and_text),
        cmocka_unit_test(fit_power_predicts_other_models),
        cmocka_unit_test(calibrated_overlays_predict_all_18_runs),
        cmocka_unit_test(fit_power_bad_input),
        cmocka_unit_test(csv_carries_the_same_content),
        cmocka_unit_test(interleaved_all_forwards_first),
        cmocka_unit_test(ops_listing),
        cmocka_unit_test(explain_walks_through_the_estimate),
        cmocka_unit_test(spec_example_compute),
        cmocka_unit_test(spec_example_memory),
        cmocka_unit_test(spec_example_pcie),
        cmocka_unit_test(spec_example_tp_ratio),
        cmocka_unit_test(explain_llama2_70b_both_ways),
        cmocka_unit_test(model_config_imports),
        cmocka_unit_test(out_file_is_written_whole),
        cmocka_unit_test(published_runs_regression),
        cmocka_unit_test(published_shared_runs_json),
        cmocka_unit_test(published_row_rules),
        cmocka_unit_test(published_md_is_current),
        cmocka_unit_test(plan_command_line),
        cmocka_unit_test(version_and_help),
        cmocka_unit_test(gpu_commands_skip_without_a_gpu),
        cmocka_unit_test(bad_input_is_one_clear_line),
        cmocka_unit_test(bad_csv_names_file_line_field),
        cmocka_unit_test(flags_of_other_commands_are_refused),
        cmocka_unit_test(attention_default_is_one_the_gpu_has),
    };
    return cmocka_run_group_tests_name("cli", tests, NULL, NULL);
}
