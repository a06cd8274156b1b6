/* The calibration overlays through the command line: the power model's clock,
 * power and per-op energy in estimate's JSON and text and in plan, fit-power's
 * overlay against the recorded H100 runs it was not fitted on (and its bad
 * input), the calibrated overlays' steps against all 18 recorded runs, and the
 * measured overlay each GPU takes by default (hwdb/measured/GPU.csv) or from
 * --calibration. */
#include "test_util.h"

#include <cjson/cJSON.h>

#include "hwdb.h"
#include "planner.h"

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
    r = run_sextant("plan llama3.2-1b --gpu h100-sxm --gpus 8 --tokens 20B --calibration none");
    expect_ok(&r);
    assert_null(strstr(r.out, "power cap"));
    run_free(&r);

    r = run_sextant("%s --format json --ops --calibration none", layout);
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
/* docs/validation/2026-11-25-h100-power, run-power-model-temperature/ (moved here for the tests) */
#define POWER_RUNS SEXTANT_ROOT "/tests/data/2026-11-25-h100-power-temperature"

/* What a recorded run's CSV measured for `op` (its calibrated rows; rank 0's where the CSV has ranks). */
static double measured_op_s(const char *path, const char *op)
{
    csv_table t;
    char err[512];
    if (csv_table_read(path, &t, err, sizeof err) != 0) {
        print_error("%s\n", err);
        fail();
    }
    double measured = 0.0;
    for (int r = 0; r < t.nrows; r++) {
        const char *rank = csv_table_cell(&t, r, "rank");
        if (!strcmp(csv_table_cell(&t, r, "op"), op) && !strcmp(csv_table_cell(&t, r, "calibrated"), "1") &&
            (!rank || !strcmp(rank, "0")))
            measured = strtod(csv_table_cell(&t, r, "measured_s"), NULL);
    }
    csv_table_free(&t);
    assert_true(measured > 0.0);
    return measured;
}

static double measured_step_s(const char *path) { return measured_op_s(path, "step"); }

/* The planner's step against the step measured in runs/{train,flash}_MODEL_mbsB.csv, with `overlay`. */
static double json_step_s(const char *args)
{
    run_result r = run_sextant("%s --format json", args);
    expect_ok(&r);
    cJSON *root = cJSON_Parse(r.out);
    assert_non_null(root);
    double step = json_number(root, "time", "step_s");
    cJSON_Delete(root);
    run_free(&r);
    return step;
}

static double step_error_in(const char *runs, const char *overlay, const char *model, int mbs, int seq, int fused)
{
    char path[1024], args[2048];
    snprintf(path, sizeof path, "%s/%s_%s_mbs%d.csv", runs, fused ? "flash" : "train", model, mbs);
    snprintf(args, sizeof args, "estimate %s --gpu h100-sxm --mbs %d --gbs %d --seq %d --attention %s --recompute none "
             "--no-dropout --calibration %s", model, mbs, mbs, seq, fused ? "sextant" : "unfused", overlay);
    return json_step_s(args) / measured_step_s(path) - 1.0;
}

static double step_error(const char *overlay, const char *model, int mbs, int seq, int fused)
{
    return step_error_in(POWER_RUNS, overlay, model, mbs, seq, fused);
}

/* The issue's fidelity target on recorded H100 steps: the overlay `calibrate` wrote (power model and
 * step fit) and the shipped hwdb/measured/h100-sxm.csv each put all 18 runs of their call within 5%
 * (docs/validation/2026-11-25-h100-fitted; its run-calibrate/ and run/ are tests/data/2026-11-25-h100-fitted-*).
 * A planner change that moves these predictions by a few
 * percent fails here: the fused LLaMA at micro-batch 4 sits at -3.8% and -3.4%. */
#define FITTED_RUNS SEXTANT_ROOT "/tests/data/2026-11-25-h100-fitted"

static void calibrated_overlays_predict_all_18_runs(void **state)
{
    (void)state;
    const char *calls[][2] = {{FITTED_RUNS "-calibrate", FITTED_RUNS "-calibrate/h100-sxm.csv"},
                              {FITTED_RUNS "-shipped", SEXTANT_ROOT "/hwdb/measured/h100-sxm.csv"}};
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

/* The shipped H200 overlay (one calibrate call on a lent 2 x H200, its power terms refitted on one-GPU steps) re-predicts
 * the runs recorded on H200s (docs/validation/2026-11-26-h200x2-calibrated, -h200x4-calibrated; their CSVs are
 * tests/data/2026-11-26-h200-calibrated): the 18 one-GPU steps of GPT-2 124M and 350M and LLaMA-3.2-1B (in its fit;
 * LLaMA's fused micro-batch 1 from its re-run after the dK, dV split) within 3.5% (1.2% mean, worst -3.0%, that
 * re-run), the ten two-GPU layouts (ZeRO 1-3, TP 2 with SP, PP 2; not in it; measured again on 2026-11-27) within 5%
 * (1.3% mean, worst +2.9%), the
 * twelve four-GPU ones within 4% (2.1% mean, worst +3.3%), each read off fit-power's "before" summary, the overlay as
 * given.  Before the GEMMs' measured clock time (docs/model.md, "GEMM time against the clock") the two- and
 * four-GPU layouts read 2.7% and 3.5% mean, worst -6.2% and -5.0%.  TP 4 read +15.0% with the collectives measured
 * over two ranks only: it holds because the overlay carries the four-rank fits (KEY:4) too. */
#define H200_RUNS SEXTANT_ROOT "/tests/data/2026-11-26-h200-calibrated"

/* fit-power over `names` (CSV files under runs_dir) with the shipped overlay of `gpu`; models: a zoo file for
 * models the shipped zoo lacks, or NULL.  Its output, to be freed. */
static run_result fit_power_runs(const char *gpu, const char *runs_dir, const char *const *names, size_t n,
                                 const char *models)
{
    char runs[8192] = "", out[] = "/tmp/sextant-h200-XXXXXX";
    for (size_t i = 0; i < n; i++)
        snprintf(runs + strlen(runs), sizeof runs - strlen(runs), "%s%s/%s.csv", i ? "," : "", runs_dir, names[i]);
    int fd = mkstemp(out);
    assert_true(fd >= 0);
    close(fd);
    run_result r = run_sextant("fit-power --gpu %s --calibration %s/hwdb/measured/%s.csv%s%s --out %s --runs %s", gpu,
                               SEXTANT_ROOT, gpu, models ? " --models " : "", models ? models : "", out, runs);
    expect_ok(&r);
    unlink(out);
    return r;
}

/* One of fit-power's summary lines, `what` followed by "mean |error| M%, signed S%, worst W%": mean and |worst|
 * as fractions. */
static void summary_errors(const char *out, const char *what, double *mean_abs, double *worst_abs)
{
    const char *line = strstr(out, what);
    assert_non_null(line);
    line = strstr(line, "mean |error| ");
    assert_non_null(line);
    double mean = 0.0, signed_err = 0.0, worst = 0.0;
    assert_int_equal(sscanf(line, "mean |error| %lf%%, signed %lf%%, worst %lf%%", &mean, &signed_err, &worst), 3);
    *mean_abs = mean / 100.0;
    *worst_abs = fabs(worst) / 100.0;
}

/* fit-power over `names` with the shipped overlay of `gpu` (fit_power_runs): the overlay's mean and worst |error|
 * as given ("before"), and, when held is not NULL, the same with each model predicted by the power fit on the
 * others ("held out"). */
static double worst_before_held(const char *gpu, const char *runs_dir, const char *const *names, size_t n,
                                const char *models, double *mean_abs, double held[2])
{
    run_result r = fit_power_runs(gpu, runs_dir, names, n, models);
    double worst = 0.0;
    summary_errors(r.out, "before (the overlay as given): ", mean_abs, &worst);
    if (held) summary_errors(r.out, "held out (each of the ", &held[0], &held[1]);
    run_free(&r);
    return worst;
}

static double worst_before(const char *runs_dir, const char *const *names, size_t n, double *mean_abs)
{
    return worst_before_held("h200", runs_dir, names, n, NULL, mean_abs, NULL);
}

static void h200_overlay_predicts_its_recorded_runs(void **state)
{
    (void)state;
    const char *one[] = {"train_gpt2_mbs8", "train_gpt2_mbs16", "train_gpt2_mbs32", "train_gpt2-medium_mbs4",
                         "train_gpt2-medium_mbs8", "train_gpt2-medium_mbs16", "train_llama3.2-1b_mbs1", "train_llama3.2-1b_mbs2",
                         "train_llama3.2-1b_mbs4", "flash_gpt2_mbs8", "flash_gpt2_mbs16", "flash_gpt2_mbs32",
                         "flash_gpt2-medium_mbs4", "flash_gpt2-medium_mbs8", "flash_gpt2-medium_mbs16",
                         /* re-run after the attention kernel's dK, dV split made it faster (b663dd9) */
                         "../../2026-11-27-attention-retime/h200/flash_llama3.2-1b_mbs1", "flash_llama3.2-1b_mbs2",
                         "flash_llama3.2-1b_mbs4"};
    /* the same ten layouts measured again on 2026-11-27 with the training step as it is (these ran before db9aab5
     * queued ZeRO-3's reduce-scatters behind the next take's gathers): docs/validation/2026-11-27-h200x2-zero-overhead */
    const char *two[] = {"t_gpt2_dp2z1", "t_gpt2_dp2z2", "t_gpt2_dp2z3", "t_llama_dp2z1", "t_llama_dp2z2", "t_llama_dp2z3",
                         "t_llama_tp2sp", "t_llama_pp2", "t_gpt2m_tp2", "t_gpt2m_pp2"};
    double mean = 0.0;
    double worst = worst_before(H200_RUNS "/one-gpu", one, sizeof one / sizeof one[0], &mean);
    assert_true(worst < 0.035 && mean < 0.015);
    worst = worst_before(SEXTANT_ROOT "/tests/data/2026-11-27-h200x2-zero-overhead/rerun", two, sizeof two / sizeof two[0],
                         &mean);
    assert_true(worst < 0.05 && mean < 0.02);
    const char *four[] = {"t4_llama_tp2pp2", "t4_llama_tp2spdp2", "t4_llama_pp2dp2z1", "t4_llama_tp4sp", "t4_llama_pp4",
                          "t4_llama_dp4z1", "t4_llama_dp4z3", "t4_llama_pp4vpp2", "t4_gpt2m_tp2pp2", "t4_gpt2m_pp2dp2",
                          "t4_gpt2m_dp4z2", "t4_gpt2m_pp4_uneven"};
    worst = worst_before(H200_RUNS "/four-gpu", four, sizeof four / sizeof four[0], &mean);
    assert_true(worst < 0.04 && mean < 0.025);
}

/* Seven models no H200 calibration had timed (heads of size 128, GQA, 2 to 28 layers; the zoo rows cut in depth are
 * docs/validation/2026-11-26-h100-attention-heldout/zoo_heldout.csv), fourteen one-GPU steps: the shipped overlay
 * prices them, and the power fit predicts each model's steps from the other models' within the issue's bounds
 * (3% mean, 5% worst; docs/validation/2026-11-26-h200-heldout). */
static void h200_overlay_predicts_models_it_never_timed(void **state)
{
    (void)state;
    const char *steps[] = {"gpt3-20b-2l_mbs2_seq2048_sextant", "gpt3-20b-2l_mbs4_seq2048_unfused",
                           "llama2-13b-4l_mbs2_seq2048_unfused", "llama2-13b-4l_mbs4_seq4096_sextant",
                           "llama2-7b-4l_mbs2_seq4096_sextant", "llama2-7b-4l_mbs4_seq2048_unfused",
                           "llama3-70b-1l_mbs2_seq4096_sextant", "llama3-8b-4l_mbs2_seq8192_sextant",
                           "llama3-8b-4l_mbs4_seq2048_unfused", "llama3-8b-4l_mbs4_seq4096_sextant",
                           "llama3.2-3b_mbs1_seq2048_unfused", "llama3.2-3b_mbs2_seq4096_sextant",
                           "mistral-7b-4l_mbs1_seq8192_sextant", "gpt2_mbs16_seq1024_unfused"};
    const char *zoo = SEXTANT_ROOT "/docs/validation/2026-11-26-h100-attention-heldout/zoo_heldout.csv";
    double mean = 0.0, held[2] = {0.0, 0.0};
    double worst = worst_before_held("h200", SEXTANT_ROOT "/tests/data/2026-11-26-h200-heldout", steps,
                                     sizeof steps / sizeof steps[0], zoo, &mean, held);
    if (worst >= 0.05 || mean >= 0.02) print_error("as shipped: mean %.2f%%, worst %.2f%%\n", 100 * mean, 100 * worst);
    assert_true(worst < 0.05 && mean < 0.02);
    assert_true(held[1] < 0.05 && held[0] < 0.03);
    /* wider than any H200 fit or table: GPT-3 175B and LLaMA-2 70B cut to one layer (widths 12288 and 8192), measured
     * on the day the table was re-timed (docs/validation/2026-11-27-h200-calibrate-operands: 2.5%, worst -3.5%) */
    const char *wide[] = {"gpt3-175b-1l_mbs1_seq2048_sextant", "gpt3-175b-1l_mbs2_seq2048_sextant",
                          "gpt3-175b-1l_mbs2_seq2048_unfused", "llama2-70b-1l_mbs2_seq4096_sextant",
                          "llama2-70b-1l_mbs4_seq2048_unfused"};
    worst = worst_before_held("h200", SEXTANT_ROOT "/docs/validation/2026-11-27-h200-calibrate-operands/wide", wide,
                              sizeof wide / sizeof wide[0],
                              SEXTANT_ROOT "/docs/validation/2026-11-27-h100-heldout-wide/zoo_heldout.csv", &mean, NULL);
    assert_true(worst < 0.05 && mean < 0.03);
}

/* ZeRO-3 over two mixture-of-experts shapes no calibration had seen (Mixtral 8x7B cut to 2 layers, OLMoE-1B-7B to
 * 4; docs/validation/2026-11-27-h200x2-heldout-moe), priced with the shipped H200 overlay: the experts' state has no
 * embedding between its layers, so the step gathers a layer's experts again only where it did not just use them,
 * and the backward never gathers the embedding (zero3_held_s).  Counted as gathered on every use, Mixtral's
 * ZeRO-3 step read +11.1% and OLMoE's +17.0%; now -1.1% and +11.8% (the rest is OLMoE's reduce-scatters, priced
 * exposed where they hid, as its ZeRO-2 step's +7.2%). */
static void zero3_prices_the_units_it_holds(void **state)
{
    (void)state;
    const char *zoo = SEXTANT_ROOT "/docs/validation/2026-11-27-h200x2-heldout-moe/zoo_heldout.csv";
    const char *mixtral[] = {"run1/mixtral-2l/dp2z3", "run2/mixtral-2l/dp2z3rc"};
    double mean = 0.0;
    double worst = worst_before_held("h200", SEXTANT_ROOT "/tests/data/2026-11-27-h200x2-heldout-moe", mixtral,
                                     sizeof mixtral / sizeof mixtral[0], zoo, &mean, NULL);
    if (worst >= 0.04) print_error("Mixtral ZeRO-3: mean %.2f%%, worst %.2f%%\n", 100 * mean, 100 * worst);
    assert_true(worst < 0.04);
    const char *olmoe[] = {"run1/olmoe-4l/dp2z3", "run1/olmoe-4l/dp2z3rc"};
    worst = worst_before_held("h200", SEXTANT_ROOT "/tests/data/2026-11-27-h200x2-heldout-moe", olmoe,
                              sizeof olmoe / sizeof olmoe[0], zoo, &mean, NULL);
    if (worst >= 0.125) print_error("OLMoE ZeRO-3: mean %.2f%%, worst %.2f%%\n", 100 * mean, 100 * worst);
    assert_true(worst < 0.125);
}

/* The MoE held-out shapes (OLMoE-1B-7B cut to 4 layers, Mixtral 8x7B to 2) on 2 x H200 after the validator's experts
 * weighed their rows by the gates in the SwiGLU, as Megatron-Core's do, and its combine stopped keeping the experts'
 * outputs for the gates' gradient (docs/validation/2026-11-27-moe-weighted-swiglu): the planner never counted those
 * rows, and the peak memory of the layouts without EP or expert TP (one GPU, ZeRO-1/2/3, recomputation, PP 2, CP 2)
 * reads 0.8% mean, worst -1.8% (2.2%, -3.7% on the runs that kept them: 128 MiB a layer of OLMoE); with EP and
 * expert TP, 1.8% mean over the fifteen, worst -3.9% (OLMoE's TP 2 + SP).  The step times, the carried host issue
 * (host_issue_lead_s), the busiest EP rank's balanced expert shape and the routed rows' tiles included: 3.1% mean,
 * worst +10.7% (OLMoE's CP 2); 3.3%, +10.4% before the routed rows; 3.9% before that shape. */
static void moe_memory_keeps_no_expert_outputs(void **state)
{
    (void)state;
    const char *zoo = SEXTANT_ROOT "/docs/validation/2026-11-27-h200x2-heldout-moe/zoo_heldout.csv";
    const char *dir = SEXTANT_ROOT "/tests/data/2026-11-27-moe-weighted-swiglu";
    const char *plain[] = {"olmoe-4l/1gpu", "olmoe-4l/dp2z1", "olmoe-4l/dp2z2", "olmoe-4l/dp2z3", "olmoe-4l/dp2z3rc",
                           "olmoe-4l/pp2", "olmoe-4l/cp2", "mixtral-2l/1gpu"};
    const char *all[] = {"olmoe-4l/1gpu", "olmoe-4l/dp2z1", "olmoe-4l/dp2z2", "olmoe-4l/dp2z3", "olmoe-4l/dp2z3rc",
                         "olmoe-4l/pp2", "olmoe-4l/cp2", "olmoe-4l/ep2", "olmoe-4l/ep2z3", "olmoe-4l/cp2ep2",
                         "olmoe-4l/tp2sp", "mixtral-2l/1gpu", "mixtral-2l/ep2", "mixtral-2l/ep2z3", "mixtral-2l/cp2ep2"};
    double mean = 0.0, worst = 0.0;
    run_result r = fit_power_runs("h200", dir, plain, sizeof plain / sizeof plain[0], zoo);
    summary_errors(r.out, "peak memory per GPU, ", &mean, &worst);
    run_free(&r);
    if (mean >= 0.012 || worst >= 0.025) print_error("memory without EP: mean %.2f%%, worst %.2f%%\n", 100 * mean, 100 * worst);
    assert_true(mean < 0.012 && worst < 0.025);
    r = fit_power_runs("h200", dir, all, sizeof all / sizeof all[0], zoo);
    summary_errors(r.out, "peak memory per GPU, ", &mean, &worst);
    assert_true(mean < 0.02 && worst < 0.045);
    summary_errors(r.out, "before (the overlay as given): ", &mean, &worst);
    run_free(&r);
    if (mean >= 0.045 || worst >= 0.11) print_error("step: mean %.2f%%, worst %.2f%%\n", 100 * mean, 100 * worst);
    assert_true(mean < 0.045 && worst < 0.11);
}

/* The EP layouts of the MoE held-out models on 2 x H200 (OLMoE and Mixtral at EP 2, with ZeRO-3, with CP 2), priced
 * with the busiest rank's expert GEMMs on the balanced expert's shape, the load lengthening their waves
 * (busiest_rank_lengthens_the_waves_not_the_launches; docs/validation/2026-11-27-expert-rows-load) and the routed
 * rows' tiles (docs/validation/2026-11-28-moe-rank-waits): 1.3% mean, worst -2.7% (1.9%, -3.7% before the routed
 * rows).  With rows x 1.25 in every launch OLMoE's up projection took a second wave: 3.4%, worst +6.7%. */
static void ep_steps_price_the_balanced_expert_shape(void **state)
{
    (void)state;
    const char *zoo = SEXTANT_ROOT "/docs/validation/2026-11-27-h200x2-heldout-moe/zoo_heldout.csv";
    const char *dir = SEXTANT_ROOT "/tests/data/2026-11-27-moe-weighted-swiglu";
    const char *ep[] = {"olmoe-4l/ep2", "olmoe-4l/ep2z3", "olmoe-4l/cp2ep2", "mixtral-2l/ep2", "mixtral-2l/ep2z3",
                        "mixtral-2l/cp2ep2"};
    double mean = 0.0, worst = worst_before_held("h200", dir, ep, sizeof ep / sizeof ep[0], zoo, &mean, NULL);
    if (mean >= 0.03 || worst >= 0.05) print_error("EP steps: mean %.2f%%, worst %.2f%%\n", 100 * mean, 100 * worst);
    assert_true(mean < 0.03 && worst < 0.05);
}

/* The MoE held-out set's 22 layouts (docs/validation/2026-11-27-h200x2-heldout-moe): one GPU and ten two-GPU layouts
 * of OLMoE-1B-7B cut to 4 layers and of Mixtral 8x7B cut to 2, as scripts/run_heldout_2gpu.sh's LAYOUTS=moe names them. */
static const char *const moe_heldout[] = {
    "olmoe-4l/1gpu", "olmoe-4l/dp2z1", "olmoe-4l/dp2z2", "olmoe-4l/dp2z3", "olmoe-4l/dp2z3rc", "olmoe-4l/ep2",
    "olmoe-4l/ep2z3", "olmoe-4l/pp2", "olmoe-4l/cp2", "olmoe-4l/cp2ep2", "olmoe-4l/tp2sp", "mixtral-2l/1gpu",
    "mixtral-2l/dp2z1", "mixtral-2l/dp2z2", "mixtral-2l/dp2z3", "mixtral-2l/dp2z3rc", "mixtral-2l/ep2",
    "mixtral-2l/ep2z3", "mixtral-2l/pp2", "mixtral-2l/cp2", "mixtral-2l/cp2ep2", "mixtral-2l/tp2sp"};
#define MOE_HELDOUT_N (sizeof moe_heldout / sizeof moe_heldout[0])

/* The validator's expert GEMMs on their 16-row bucket's algorithm, asked at the bucket's top (validator/moe.h,
 * MOE_ALGO_BUCKET; docs/validation/2026-11-28-expert-algos).  One H200: Mixtral cut to 2 layers at 256 rows an
 * expert read -12.8% when the validator kept an algorithm per 128-row bucket (its expert GEMMs 1.2-1.7x cuBLAS's
 * choice for the exact shape) and -4.6% after; the four held-out runs of 2026-11-28-routed-rows-heldout 7.8% mean
 * -> 5.1%.  The MoE held-out set measured again on another 2 x H200 (22 runs): 3.2% mean, worst -6.5% (the Mixtral
 * layouts at 1024 rows an expert, where the algorithms barely changed, moved with the machine's clock, +-3%); 3.5%,
 * worst -7.9% since collectives beyond calibrate's largest message keep its bandwidth (hw_intra_fit_time_s): Mixtral's
 * ZeRO-3, whose untrained router's rows cost it more than a balanced route's (2026-11-28-moe-timed-steps), -4.7% ->
 * -7.9%, where the same layout with the random route reads +6.1% -> +2.6% (2026-11-28-moe-host-issue). */
static void expert_algos_runs_price_within(void **state)
{
    (void)state;
    const char *zoo = SEXTANT_ROOT "/docs/validation/2026-11-27-h200x2-heldout-moe/zoo_heldout.csv";
    /* fit-power takes two runs or more: 768 rows an expert beside, -1.2% before and +1.2% after */
    const char *s1k[] = {"mixtral_s1k", "mixtral_s3k"};
    double mean = 0.0;
    double before = worst_before_held("h200", SEXTANT_ROOT "/docs/validation/2026-11-28-routed-rows-heldout/runs", s1k, 2,
                                      zoo, &mean, NULL);
    double after = worst_before_held("h200", SEXTANT_ROOT "/docs/validation/2026-11-28-expert-algos/after/heldout", s1k, 2,
                                     zoo, &mean, NULL);
    if (before <= 0.10 || after >= 0.06) print_error("Mixtral at 256 rows: before %.2f%%, after %.2f%%\n", 100 * before, 100 * after);
    assert_true(before > 0.10 && after < 0.06);
    const char *four[] = {"mixtral_s1k", "mixtral_s3k", "mixtral_mbs2", "olmoe_s1k"};
    double worst = worst_before_held("h200", SEXTANT_ROOT "/docs/validation/2026-11-28-expert-algos/after/heldout", four, 4,
                                     zoo, &mean, NULL);
    if (mean >= 0.06 || worst >= 0.13) print_error("one-GPU held out: mean %.2f%%, worst %.2f%%\n", 100 * mean, 100 * worst);
    assert_true(mean < 0.06 && worst < 0.13);
    worst = worst_before_held("h200", SEXTANT_ROOT "/tests/data/2026-11-28-expert-algos", moe_heldout, MOE_HELDOUT_N,
                              zoo, &mean, NULL);
    if (mean >= 0.04 || worst >= 0.085) print_error("MoE set: mean %.2f%%, worst %.2f%%\n", 100 * mean, 100 * worst);
    assert_true(mean < 0.04 && worst < 0.085);
}

/* The same held-out layouts with each token's experts drawn at random (SEXTANT_MOE_ROUTE=random: a router balanced as
 * a trained one is in expectation, as Megatron-Core's moe_router_force_load_balancing benchmarks; every expert
 * Binomial(N, k/E) rows) against the model's own untrained router, which left 21-27% of OLMoE's experts empty
 * (docs/validation/2026-11-28-moe-random-route): over OLMoE's one GPU, ZeRO-2, ZeRO-3 with and without
 * recomputation, CP 2 and EP 2 and Mixtral's one GPU and CP 2, 4.4% mean (+1.2%), worst +6.5% with the router;
 * 3.0% (-1.3%), worst -5.2% (OLMoE on one GPU) at random.  Since the experts' slowdown beside the collectives is
 * their own (overlap_compute_slowdown_experts) the router's read 2.7%, worst 5.8%: the random route keeps the lower
 * worst, not the lower mean (its OLMoE ZeRO-2/3 steps had been priced over, which the router's rows offset). */
static void random_route_runs_price_within(void **state)
{
    (void)state;
    const char *zoo = SEXTANT_ROOT "/docs/validation/2026-11-27-h200x2-heldout-moe/zoo_heldout.csv";
    const char *runs[] = {"olmoe-4l/1gpu", "olmoe-4l/dp2z2", "olmoe-4l/dp2z3", "olmoe-4l/dp2z3rc",
                          "olmoe-4l/cp2",  "olmoe-4l/ep2",   "mixtral-2l/1gpu", "mixtral-2l/cp2"};
    const size_t n = sizeof runs / sizeof runs[0];
    double routed = 0.0, random = 0.0;
    double worst_routed = worst_before_held("h200", SEXTANT_ROOT "/tests/data/2026-11-28-expert-algos", runs, n, zoo,
                                            &routed, NULL);
    double worst_random = worst_before_held("h200", SEXTANT_ROOT "/tests/data/2026-11-28-moe-random-route", runs, n, zoo,
                                            &random, NULL);
    if (random >= 0.035 || worst_random >= 0.06 || worst_random >= worst_routed)
        print_error("router %.2f%% (worst %.2f%%), random %.2f%% (worst %.2f%%)\n", 100 * routed, 100 * worst_routed,
                    100 * random, 100 * worst_random);
    assert_true(random < 0.035 && worst_random < 0.06 && worst_random < worst_routed);
}

/* The H200 runs' peak memory priced by fit-power (its "peak memory per GPU, N runs" line) within mean_max and
 * worst_max of the measured, as fractions. */
static void assert_peak_memory_within(const char *dir, const char *const *names, size_t n, const char *zoo,
                                      double mean_max, double worst_max)
{
    run_result r = fit_power_runs("h200", dir, names, n, zoo);
    char what[64];
    snprintf(what, sizeof what, "peak memory per GPU, %zu runs: ", n);
    double mean_memory = 0.0, worst_memory = 0.0;
    summary_errors(r.out, what, &mean_memory, &worst_memory);
    run_free(&r);
    if (mean_memory >= mean_max || worst_memory >= worst_max)
        print_error("memory %.2f%% (worst %.2f%%)\n", 100 * mean_memory, 100 * worst_memory);
    assert_true(mean_memory < mean_max && worst_memory < worst_max);
}

/* The whole MoE held-out set (OLMoE 4 layers, Mixtral 2 layers: one GPU and ten two-GPU layouts each) with
 * SEXTANT_MOE_ROUTE=random, every expert its binomial share of the rows, as the planner prices a router trained to
 * balance them: fifteen steps on one 2 x H200 machine (docs/validation/2026-11-28-moe-timed-steps), the other seven
 * from docs/validation/2026-11-28-moe-random-route, priced with the shipped overlay.  The expert-parallel layouts
 * read +10% at Mixtral: the planner's busiest EP rank carries the default imbalance (1.25) where the random draw's
 * carries 1.004-1.03; the rest stay within 10%.  Their peak memory within 3% (-2.6% worst). */
static void random_route_full_set_prices_within(void **state)
{
    (void)state;
    const char *zoo = SEXTANT_ROOT "/docs/validation/2026-11-27-h200x2-heldout-moe/zoo_heldout.csv";
#define RR "../2026-11-28-moe-random-route/"
    const char *rest[] = {"mixtral-2l/cp2", "mixtral-2l/dp2z1", "mixtral-2l/dp2z2", "mixtral-2l/dp2z3", "mixtral-2l/dp2z3rc",
                          "mixtral-2l/pp2", "mixtral-2l/tp2sp", "olmoe-4l/dp2z1", "olmoe-4l/pp2", "olmoe-4l/tp2sp",
                          RR "olmoe-4l/1gpu", RR "olmoe-4l/dp2z2", RR "olmoe-4l/dp2z3", RR "olmoe-4l/dp2z3rc",
                          RR "olmoe-4l/cp2", RR "mixtral-2l/1gpu"};
    const char *ep[] = {"mixtral-2l/ep2", "mixtral-2l/ep2z3", "mixtral-2l/cp2ep2", "olmoe-4l/ep2z3", "olmoe-4l/cp2ep2",
                        RR "olmoe-4l/ep2"};
#undef RR
    const char *dir = SEXTANT_ROOT "/tests/data/2026-11-28-moe-random-all";
    double mean_rest = 0.0, mean_ep = 0.0;
    double worst_rest = worst_before_held("h200", dir, rest, sizeof rest / sizeof rest[0], zoo, &mean_rest, NULL);
    double worst_ep = worst_before_held("h200", dir, ep, sizeof ep / sizeof ep[0], zoo, &mean_ep, NULL);
    /* measured: 3.9% (worst -9.7%) and 5.6% (worst +10.3%) */
    if (mean_rest >= 0.045 || worst_rest >= 0.105 || mean_ep >= 0.065 || worst_ep >= 0.115)
        print_error("non-EP %.2f%% (worst %.2f%%), EP %.2f%% (worst %.2f%%)\n", 100 * mean_rest, 100 * worst_rest,
                    100 * mean_ep, 100 * worst_ep);
    assert_true(mean_rest < 0.045 && worst_rest < 0.105 && mean_ep < 0.065 && worst_ep < 0.115);
    /* peak memory, all 22: within 2.6% since the backward's routed rows' gradients are priced (moe_routed_grad_bytes;
     * -3.9% before, OLMoE at TP 2 + SP, whose expert TP gather holds two copies of the rows' gradient) */
    const char *all[sizeof rest / sizeof rest[0] + sizeof ep / sizeof ep[0]];
    size_t n = 0;
    for (size_t i = 0; i < sizeof rest / sizeof rest[0]; i++) all[n++] = rest[i];
    for (size_t i = 0; i < sizeof ep / sizeof ep[0]; i++) all[n++] = ep[i];
    assert_peak_memory_within(dir, all, n, zoo, 0.01, 0.03);
}

/* The whole MoE held-out set at random again, on one 2 x H200 machine with the validator of 2026-11-28 (its router
 * kernels rewritten, a random route's EP imbalance priced as drawn) and a host that issues at the overlay's speed
 * (calibrate --issue 6.7 and 9.5 us around the calls; docs/validation/2026-11-28-moe-host-issue): 22 steps within 2%
 * mean, 17 of 20 two-GPU layouts within 5%, the worst OLMoE's ZeRO-3 (+6.6%).  With the experts' own slowdown beside
 * the collectives (overlap_compute_slowdown_experts, docs/validation/2026-11-28-overlap-classes) OLMoE's ZeRO-2, ZeRO-3
 * and ZeRO-3 with recomputation read +2.1%, +6.6%, +4.7% -> -1.1%, +1.6%, -0.1%, and all 20 within 5% (1.4%, worst
 * -3.3%, OLMoE's ZeRO-1).  Mixtral's ZeRO-2/3 gather 2.8 GB of
 * experts a layer, beyond calibrate's largest message (1 GiB): priced at the fit's bandwidth they read +2.9%, +6.1%,
 * +5.8% (with recomputation), at that message's bandwidth +1.0%, +2.6%, +2.9% (hw_intra_fit_time_s). */
static void random_route_one_machine_prices_within(void **state)
{
    (void)state;
    const char *zoo = SEXTANT_ROOT "/docs/validation/2026-11-27-h200x2-heldout-moe/zoo_heldout.csv";
    const char *dir = SEXTANT_ROOT "/tests/data/2026-11-28-moe-host-issue";
    double mean = 0.0;
    double worst = worst_before_held("h200", dir, moe_heldout, MOE_HELDOUT_N, zoo, &mean, NULL);
    const char *zero[] = {"mixtral-2l/dp2z2", "mixtral-2l/dp2z3", "mixtral-2l/dp2z3rc"};
    double zero_mean = 0.0;
    double zero_worst = worst_before_held("h200", dir, zero, 3, zoo, &zero_mean, NULL);
    const char *olmoe_zero[] = {"olmoe-4l/dp2z2", "olmoe-4l/dp2z3", "olmoe-4l/dp2z3rc"};
    double olmoe_worst = worst_before_held("h200", dir, olmoe_zero, 3, zoo, &zero_mean, NULL);
    if (mean >= 0.02 || worst >= 0.05 || zero_worst >= 0.035 || olmoe_worst >= 0.025)
        print_error("22 runs %.2f%% (worst %.2f%%); Mixtral's ZeRO-2/3 worst %.2f%%, OLMoE's %.2f%%\n", 100 * mean,
                    100 * worst, 100 * zero_worst, 100 * olmoe_worst);
    assert_true(mean < 0.02 && worst < 0.05 && zero_worst < 0.035 && olmoe_worst < 0.025);
    assert_peak_memory_within(dir, moe_heldout, MOE_HELDOUT_N, zoo, 0.01, 0.03);
}

/* ZeRO-1 and ZeRO-3 of two MoE and two dense shapes measured on another 2 x H200 (the timelines of
 * docs/validation/2026-11-28-overlap-classes, before the experts' slowdown was priced): all eight within 5%, and
 * OLMoE's ZeRO-3, +2.8% with a GEMM's slowdown for its experts, -2.0% with theirs. */
static void fresh_zero_pairs_price_within(void **state)
{
    (void)state;
    const char *dir = SEXTANT_ROOT "/tests/data/2026-11-28-overlap-classes";
    const char *moe_zoo = SEXTANT_ROOT "/docs/validation/2026-11-27-h200x2-heldout-moe/zoo_heldout.csv";
    const char *moe[] = {"olmoe-4l/dp2z1", "olmoe-4l/dp2z3", "mixtral-2l/dp2z1", "mixtral-2l/dp2z3"};
    const char *dense[] = {"olmo-1b-8l/dp2z1", "olmo-1b-8l/dp2z3", "yi-6b-6l/dp2z1", "yi-6b-6l/dp2z3"};
    const char *olmoe_z3[] = {"olmoe-4l/dp2z3", "olmoe-4l/dp2z3"};   /* fit-power takes two runs or more */
    double mean = 0.0, dense_mean = 0.0, z3_mean = 0.0;
    double worst = worst_before_held("h200", dir, moe, 4, moe_zoo, &mean, NULL);
    double dense_worst = worst_before_held("h200", dir, dense, 4,
                                           SEXTANT_ROOT "/docs/validation/2026-11-27-h100x2-heldout-new/zoo_heldout.csv",
                                           &dense_mean, NULL);
    double z3 = worst_before_held("h200", dir, olmoe_z3, 2, moe_zoo, &z3_mean, NULL);
    if (worst >= 0.05 || dense_worst >= 0.05 || mean >= 0.03 || dense_mean >= 0.03 || z3 >= 0.025)
        print_error("MoE %.2f%% (worst %.2f%%), dense %.2f%% (worst %.2f%%), OLMoE ZeRO-3 %.2f%%\n", 100 * mean,
                    100 * worst, 100 * dense_mean, 100 * dense_worst, 100 * z3);
    assert_true(worst < 0.05 && dense_worst < 0.05 && mean < 0.03 && dense_mean < 0.03 && z3 < 0.025);
}

/* The MoE held-out set at random measured after the experts' slowdown was priced, on another 2 x H200, each step
 * predicted before it ran (docs/validation/2026-11-28-overlap-classes, section 4): 2.5% mean (-1.6%), worst -5.7%
 * (OLMoE's ZeRO-1, -4.9% with the old price); the four ZeRO-3 layouts within 1.5% (2% since the optimizer takes
 * AdamW's bandwidth: the set 2.3% -> 2.1%, worst -5.7% -> -5.4%, ZeRO-3's worst 1.50%), where the old price read
 * OLMoE's +5.4% and +3.6% with recomputation. */
static void overlap_classes_after_prices_within(void **state)
{
    (void)state;
    const char *zoo = SEXTANT_ROOT "/docs/validation/2026-11-27-h200x2-heldout-moe/zoo_heldout.csv";
    const char *dir = SEXTANT_ROOT "/tests/data/2026-11-28-overlap-classes/after";
    const char *zero3[] = {"olmoe-4l/dp2z3", "olmoe-4l/dp2z3rc", "mixtral-2l/dp2z3", "mixtral-2l/dp2z3rc"};
    double mean = 0.0, zero3_mean = 0.0;
    double worst = worst_before_held("h200", dir, moe_heldout, MOE_HELDOUT_N, zoo, &mean, NULL);
    double zero3_worst = worst_before_held("h200", dir, zero3, 4, zoo, &zero3_mean, NULL);
    if (mean >= 0.03 || worst >= 0.06 || zero3_worst >= 0.02)
        print_error("22 runs %.2f%% (worst %.2f%%); ZeRO-3 worst %.2f%%\n", 100 * mean, 100 * worst, 100 * zero3_worst);
    assert_true(mean < 0.03 && worst < 0.06 && zero3_worst < 0.02);
    assert_peak_memory_within(dir, moe_heldout, MOE_HELDOUT_N, zoo, 0.01, 0.03);
}

/* The MoE held-out set again with the routed rows in two stream-ordered pools (validator/moe.c: the rows a forward
 * keeps for its backward, and a call's scratch), on one 2 x H200 (docs/validation/2026-11-28-moe-pools): peak
 * memory per GPU within the issue's 2% (OLMoE's TP 2 + SP -1.9%, -2.7% with one pool, whose scratch left holes
 * between the kept rows).  The pools move no time: the step as on the machines before, but OLMoE's CP 2 (+7.4%, its
 * host issuing 6.91 us an expert GEMM; +5.0% at that issue). */
static void routed_pools_price_memory_within(void **state)
{
    (void)state;
    const char *zoo = SEXTANT_ROOT "/docs/validation/2026-11-27-h200x2-heldout-moe/zoo_heldout.csv";
    const char *dir = SEXTANT_ROOT "/tests/data/2026-11-28-moe-pools";
    assert_peak_memory_within(dir, moe_heldout, MOE_HELDOUT_N, zoo, 0.01, 0.02);
    double mean = 0.0, worst = worst_before_held("h200", dir, moe_heldout, MOE_HELDOUT_N, zoo, &mean, NULL);
    if (mean >= 0.03 || worst >= 0.08) print_error("22 runs %.2f%% (worst %.2f%%)\n", 100 * mean, 100 * worst);
    assert_true(mean < 0.03 && worst < 0.08);
}

/* CP 2 as the validator runs it since 2026-11-27 (the K, V pack a kernel, each ring step beside a block), priced with
 * the ring's backward hidden by each step's block (docs/model.md, "Context parallelism"; every run waits 0.04-0.35 ms
 * a step for its dK, dV): the dense held-out models on 2 x H200 and 2 x H100 (Yi-6B and OLMo-1B cut in depth), OLMo-1B
 * on another 2 x H200 (docs/validation/2026-11-28-moe-pools, call 5), OLMoE's and Mixtral's CP 2 and CP 2 x EP 2 at
 * random.  With the backward serialised as the forward is: 3.4% mean, worst +7.4% (OLMoE); now 1.8%, worst -4.9%. */
static void cp_ring_backward_hidden_prices_cp2(void **state)
{
    (void)state;
    const char *dense_zoo = SEXTANT_ROOT "/docs/validation/2026-11-27-h100x2-heldout-new/zoo_heldout.csv";
    const char *moe_zoo = SEXTANT_ROOT "/docs/validation/2026-11-27-h200x2-heldout-moe/zoo_heldout.csv";
    /* OLMo-1B of call 5 beside the dense H200 pair: its zoo row is the dense one, which the MoE zoo does not hold */
    const char *h200[] = {"2026-11-27-h200x2-heldout-new/yi/cp2", "2026-11-27-h200x2-heldout-new/olmo/cp2",
                          "../../tests/data/2026-11-28-moe-pools/cp2-timelines/olmo-1b-8l/cp2"};
    const char *h100[] = {"2026-11-27-h100x2-heldout-new/yi/cp2", "2026-11-27-h100x2-heldout-new/olmo/cp2"};
    const char *moe[] = {"olmoe-4l/cp2", "olmoe-4l/cp2ep2", "mixtral-2l/cp2", "mixtral-2l/cp2ep2"};
    double mean[3] = {0.0, 0.0, 0.0}, worst[3];
    worst[0] = worst_before_held("h200", SEXTANT_ROOT "/docs/validation", h200, 3, dense_zoo, &mean[0], NULL);
    worst[1] = worst_before_held("h100-sxm", SEXTANT_ROOT "/docs/validation", h100, 2, dense_zoo, &mean[1], NULL);
    worst[2] = worst_before_held("h200", SEXTANT_ROOT "/tests/data/2026-11-28-moe-pools", moe, 4, moe_zoo, &mean[2], NULL);
    double all = (3.0 * mean[0] + 2.0 * mean[1] + 4.0 * mean[2]) / 9.0, most = 0.0;
    for (int i = 0; i < 3; i++) most = fmax(most, fabs(worst[i]));
    if (all >= 0.025 || most >= 0.055) print_error("9 CP 2 runs %.2f%% (worst %.2f%%)\n", 100 * all, 100 * most);
    assert_true(all < 0.025 && most < 0.055);
    /* then, priced by this rule before it ran, CP 2 of a model none of those nine had (Qwen2.5-3B cut to 12 layers, GQA
     * with 2 KV heads) and its ZeRO-1 on a fresh 2 x H200 (call 6): -0.1% and -0.4% (+0.4% with the backward
     * serialised) */
    const char *qwen[] = {"cp2", "dp2z1"};
    double mean_qwen = 0.0;
    double worst_qwen = worst_before_held("h200", SEXTANT_ROOT "/tests/data/2026-11-28-moe-pools/cp2-heldout-qwen", qwen, 2,
                                          SEXTANT_ROOT "/docs/validation/2026-11-26-h200x2-heldout-qwen/zoo_heldout.csv",
                                          &mean_qwen, NULL);
    assert_true(fabs(worst_qwen) < 0.015);
}

/* The step priced at the host's own issue of an expert GEMM, as validate's "MoE priced at this host's issue" line
 * prices it: OLMoE's one GPU, PP 2 and TP 2 + SP at random on a 2 x H200 whose forward issued its expert GEMMs at
 * 10.8-11.7 us a launch (docs/validation/2026-11-28-cpu-bind) read -3.5..-5.1% at the overlay's 7.89 us and within
 * 1.3% at the issue each run's log gives (its "MoE buffers" line, "the forward's X"). */
static void host_issue_prices_olmoe_steps(void **state)
{
    (void)state;
    const char *zoo = SEXTANT_ROOT "/docs/validation/2026-11-27-h200x2-heldout-moe/zoo_heldout.csv";
    const char *dir = SEXTANT_ROOT "/tests/data/2026-11-28-cpu-bind/host-line/olmoe-4l";
    const char *names[] = {"1gpu", "pp2", "tp2sp"};
    char *shipped = slurp(SEXTANT_ROOT "/hwdb/measured/h200.csv");
    assert_non_null(shipped);
    const char *row = strstr(shipped, "\nh200,gemm_issue_us,");
    assert_non_null(row);
    const char *row_end = strchr(row + 1, '\n');
    assert_non_null(row_end);
    for (size_t i = 0; i < sizeof names / sizeof names[0]; i++) {
        char path[1024];
        snprintf(path, sizeof path, "%s/%s.log", dir, names[i]);
        char *log = slurp(path);
        assert_non_null(log);
        const char *at = strstr(log, "(the forward's ");
        double issue_us = 0.0;
        assert_non_null(at);
        assert_int_equal(sscanf(at, "(the forward's %lf)", &issue_us), 1);
        free(log);
        assert_true(issue_us > 10.0 && issue_us < 12.0);
        const char *twice[] = {names[i], names[i]};   /* fit-power takes two runs or more */
        double mean = 0.0;
        worst_before_held("h200", dir, twice, 2, zoo, &mean, NULL);
        char overlay[] = "/tmp/sextant-issue-XXXXXX";
        int fd = mkstemp(overlay);
        assert_true(fd >= 0);
        FILE *f = fdopen(fd, "w");
        assert_non_null(f);
        fprintf(f, "%.*s\nh200,gemm_issue_us,%.2f,\"the run's log\"%s", (int)(row - shipped), shipped, issue_us, row_end);
        fclose(f);
        char fitted[] = "/tmp/sextant-issue-fit-XXXXXX";
        int fd2 = mkstemp(fitted);
        assert_true(fd2 >= 0);
        close(fd2);
        run_result r = run_sextant("fit-power --gpu h200 --calibration %s --models %s --out %s --runs %s/%s.csv,%s/%s.csv",
                                   overlay, zoo, fitted, dir, names[i], dir, names[i]);
        unlink(overlay);
        unlink(fitted);
        expect_ok(&r);
        double at_host = 0.0, worst = 0.0;
        summary_errors(r.out, "before (the overlay as given): ", &at_host, &worst);
        run_free(&r);
        if (mean < 0.03 || mean > 0.06 || at_host > 0.015)
            print_error("%s: %.2f%% at the overlay's issue, %.2f%% at %.2f us\n", names[i], 100 * mean, 100 * at_host, issue_us);
        assert_true(mean > 0.03 && mean < 0.06 && at_host < 0.015);
    }
    free(shipped);
}

/* Ten steps of two models no calibration timed (LLaMA 3.2 3B, GPT-2 large) on the first 2 x H100 lent here: one GPU,
 * TP 2 with and without SP, PP 2, DP 2 with ZeRO-1 and ZeRO-3, priced with the shipped overlay, whose collectives
 * and their measured times per message size came from calibrate --comm on that machine (not from these steps;
 * docs/validation/2026-11-26-h100x2-unseen): 2.2% mean, worst -6.0% (TP 2 + SP).  Before them the overlay had the
 * datasheet's NVLink: 5.0% mean, worst -15.2%. */
static void h100_overlay_prices_two_gpus_of_unseen_models(void **state)
{
    (void)state;
    const char *steps[] = {"t_llama3b_1gpu", "t_llama3b_tp2sp", "t_llama3b_tp2", "t_llama3b_pp2", "t_llama3b_dp2z1",
                           "t_gpt2l_1gpu", "t_gpt2l_tp2", "t_gpt2l_pp2", "t_gpt2l_dp2z1", "t_gpt2l_dp2z3"};
    double mean = 0.0;
    double worst = worst_before_held("h100-sxm", SEXTANT_ROOT "/tests/data/2026-11-26-h100x2-unseen", steps,
                                     sizeof steps / sizeof steps[0], NULL, &mean, NULL);
    if (worst >= 0.07 || mean >= 0.025) print_error("as shipped: mean %.2f%%, worst %.2f%%\n", 100 * mean, 100 * worst);
    assert_true(worst < 0.07 && mean < 0.025);
    /* the same ten on a third 2 x H100 machine with the final binaries, after the overlay was made: 2.5%, -6.6% */
    worst = worst_before_held("h100-sxm", SEXTANT_ROOT "/tests/data/2026-11-26-h100x2-unseen/rerun", steps,
                              sizeof steps / sizeof steps[0], NULL, &mean, NULL);
    if (worst >= 0.075 || mean >= 0.03) print_error("rerun: mean %.2f%%, worst %.2f%%\n", 100 * mean, 100 * worst);
    assert_true(worst < 0.075 && mean < 0.03);
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
    /* one model's runs: nothing to leave out */
    assert_non_null(strstr(r.out, "held out: not computed"));
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

/* Leaving each model out in turn: over runs of three models fit-power prints a held-out column and its summary,
 * and a held-out run's prediction is the step the fit on the other two models' runs predicts for it. */
static void fit_power_leaves_one_model_out(void **state)
{
    (void)state;
    char fitted[] = "/tmp/sextant-fit-lomo-XXXXXX", others[] = "/tmp/sextant-fit-others-XXXXXX";
    int fd = mkstemp(fitted);
    assert_true(fd >= 0);
    close(fd);
    fd = mkstemp(others);
    assert_true(fd >= 0);
    close(fd);
    run_result r = run_sextant("fit-power --calibration " POWER_RUNS "/h100-sxm.csv --out %s --runs "
                               POWER_RUNS "/train_gpt2_mbs8.csv," POWER_RUNS "/flash_gpt2_mbs8.csv," POWER_RUNS
                               "/train_gpt2-medium_mbs8.csv," POWER_RUNS "/flash_gpt2-medium_mbs8.csv," POWER_RUNS
                               "/train_llama3.2-1b_mbs2.csv," POWER_RUNS "/flash_llama3.2-1b_mbs2.csv", fitted);
    expect_ok(&r);
    assert_non_null(strstr(r.out, "held out (each of the 3 models predicted by the fit on the others): mean |error|"));
    const char *line = strstr(r.out, "flash_llama3.2-1b_mbs2.csv");
    assert_non_null(line);
    double measured, before, before_err, after, after_err, held_out;
    assert_int_equal(sscanf(line + strlen("flash_llama3.2-1b_mbs2.csv"), " %lfms %lfms %lf%% %lfms %lf%% %lfms", &measured,
                            &before, &before_err, &after, &after_err, &held_out), 6);
    run_free(&r);
    r = run_sextant("fit-power --calibration " POWER_RUNS "/h100-sxm.csv --out %s --runs " POWER_RUNS "/train_gpt2_mbs8.csv,"
                    POWER_RUNS "/flash_gpt2_mbs8.csv," POWER_RUNS "/train_gpt2-medium_mbs8.csv," POWER_RUNS
                    "/flash_gpt2-medium_mbs8.csv", others);
    expect_ok(&r);
    run_free(&r);
    double error = step_error(others, "llama3.2-1b", 2, 2048, 1);
    assert_close((1.0 + error) * measured, held_out, 2e-4);
    unlink(fitted);
    unlink(others);
}

/* Mixtral 8x7B cut to 2 layers on one and two H200s once its expert GEMMs took cuBLAS's algorithm for their exact
 * shape (MOE_EXACT_GEMM_FLOPS in validator/moe.c; docs/validation/2026-11-27-h200-moe-experts): the seven layouts
 * 4.3% mean, worst -8.1%, against 6.4% and -11.1% measured with the bucket's algorithm. */
static void mixtral_layouts_with_exact_expert_gemms(void **state)
{
    (void)state;
    const char *runs[] = {"1gpu", "dp2z1", "dp2z2", "dp2z3", "ep2", "ep2z3", "tp2sp"};
    double mean = 0.0;
    double worst = worst_before_held("h200", SEXTANT_ROOT "/docs/validation/2026-11-27-h200-moe-experts/after", runs,
                                     sizeof runs / sizeof runs[0],
                                     SEXTANT_ROOT "/docs/validation/2026-11-27-h200x2-heldout-moe/zoo_heldout.csv", &mean,
                                     NULL);
    assert_true(worst < 0.09 && mean < 0.05);
}

/* NVML's clock and the model's for two runs of one model (fit-power's "MHz" columns, the overlay as given): run a
 * and run b under runs_dir, priced with the shipped H200 overlay. */
static void clocks_of(const char *runs_dir, const char *a, const char *b, const char *models, double nvml[2], double model[2])
{
    char out[] = "/tmp/sextant-clock-XXXXXX";
    int fd = mkstemp(out);
    assert_true(fd >= 0);
    close(fd);
    run_result r = run_sextant("fit-power --gpu h200 --calibration %s/hwdb/measured/h200.csv%s%s --out %s --runs %s/%s.csv,%s/%s.csv",
                               SEXTANT_ROOT, models ? " --models " : "", models ? models : "", out, runs_dir, a, runs_dir, b);
    expect_ok(&r);
    const char *names[2] = {a, b};
    for (int i = 0; i < 2; i++) {
        char key[96];
        snprintf(key, sizeof key, "\n%s.csv ", names[i]);
        const char *line = strstr(r.out, key);
        assert_non_null(line);
        double measured, before, error, after, after_error;
        /* run  measured  before  error  after  error  MHz: NVML, model as given (one model: no held-out columns) */
        assert_int_equal(sscanf(line + strlen(key), "%lfms %lfms %lf%% %lfms %lf%% %lf %lf", &measured, &before, &error,
                                &after, &after_error, &nvml[i], &model[i]), 7);
    }
    run_free(&r);
    unlink(out);
}

/* ZeRO-2/3 priced as sextant's step runs them (docs/validation/2026-11-27-h200x2-zero-overhead): the clock does not
 * rise with the overlapped collectives (NVML: ZeRO-3 within 1.3% of ZeRO-1's clock on three models; the model's rose
 * 12-15% before overlapped collectives were taken as drawing what the compute draws, 4-5% now), and OLMoE's ZeRO-2/3,
 * whose per-micro-batch waits the planner charged as FSDP's: +9.7% worst before, +4.8% after.  Since the weight
 * gradients' read of the gradient they add into is priced (docs/validation/2026-11-27-gemm-accumulate), +6.2%: its
 * 64 small expert GEMMs a layer, which four streams pack, were priced over before it (their weight gradients +8% and
 * +17% on one GPU, docs/model.md, "Mixture of experts"), and the read adds to every run of the model alike (its
 * ZeRO-2/3 overhead over ZeRO-1 did not move). */
static void zero_overlap_leaves_the_clock(void **state)
{
    (void)state;
    static const struct {
        const char *dir, *z1, *z3, *models;
    } series[] = {
        {SEXTANT_ROOT "/tests/data/2026-11-27-h200x2-zero-overhead/rerun", "t_llama_dp2z1", "t_llama_dp2z3", NULL},
        {SEXTANT_ROOT "/docs/validation/2026-11-27-h200x2-heldout-new/yi", "dp2z1", "dp2z3",
         SEXTANT_ROOT "/docs/validation/2026-11-27-h100x2-heldout-new/zoo_heldout.csv"},
        {SEXTANT_ROOT "/docs/validation/2026-11-26-h200x2-heldout-qwen/after", "dp2z1", "dp2z3",
         SEXTANT_ROOT "/docs/validation/2026-11-26-h200x2-heldout-qwen/zoo_heldout.csv"},
    };
    for (size_t i = 0; i < sizeof series / sizeof series[0]; i++) {
        double nvml[2], model[2];
        clocks_of(series[i].dir, series[i].z1, series[i].z3, series[i].models, nvml, model);
        double rise = model[1] / model[0] - nvml[1] / nvml[0];
        if (fabs(rise) >= 0.07) print_error("%s: the model's clock rose %.3f more than NVML's\n", series[i].dir, rise);
        assert_true(fabs(rise) < 0.07);
    }
    const char *olmoe[] = {"dp2z2", "dp2z3", "dp2z3rc"};
    double mean = 0.0;
    double worst = worst_before_held("h200", SEXTANT_ROOT "/tests/data/2026-11-27-h200x2-heldout-moe/run1/olmoe-4l", olmoe, 3,
                                     SEXTANT_ROOT "/docs/validation/2026-11-27-h200x2-heldout-moe/zoo_heldout.csv", &mean, NULL);
    assert_true(worst < 0.065 && mean < 0.05);
}

/* Four dense one-GPU steps of 1024 tokens a micro-batch on shapes 4096 wide, measured after the weight gradients' read
 * of their gradient was priced and in no fit (docs/validation/2026-11-27-gemm-accumulate, heldout/): within 1.5% on
 * average (1.15%, worst +1.7%, since the optimizer takes AdamW's bandwidth: its op -7.7..-9.1% -> -1.7..-3.2% and the
 * steps -0.0..-0.8% -> +0.2..+1.7%, the GEMMs' clock priced under NVML's; 0.45% before, and 1.55%, worst -2.1%, before
 * that read was priced). */
static void accumulating_weight_gradients_price_held_out_steps(void **state)
{
    (void)state;
    const char *runs[] = {"llama3-8b-4l_mbs1_seq1024_sextant", "llama3-8b-4l_mbs4_seq1024_sextant",
                          "mistral-7b-4l_mbs1_seq1024_sextant", "yi-6b-6l_mbs1_seq1024_sextant"};
    double mean = 0.0;
    double worst = worst_before_held("h200", SEXTANT_ROOT "/tests/data/2026-11-27-gemm-accumulate", runs, 4,
                                     SEXTANT_ROOT "/docs/validation/2026-11-27-gemm-accumulate/zoo_heldout.csv", &mean, NULL);
    assert_true(mean < 0.015 && worst < 0.02);
}

/* The optimizer step at AdamW's own bandwidth (calibrate --optimizer: 0.819 of the H200's HBM where the device copy
 * reaches 0.872; docs/validation/2026-11-28-optimizer-bandwidth): three recorded one-GPU H200 steps' AdamW, priced by
 * estimate --ops with the shipped overlay, each within 4% (at the copy's bandwidth -7.7%, -8.0%, -7.7%). */
static void optimizer_priced_at_adamw_bandwidth(void **state)
{
    (void)state;
    static const struct {
        const char *csv, *args;
    } runs[] = {
        {"/tests/data/2026-11-28-moe-pools/olmoe-4l/1gpu.csv",
         "olmoe-4l --models " SEXTANT_ROOT "/docs/validation/2026-11-27-h200x2-heldout-moe/zoo_heldout.csv --seq 4096 --mbs 1 --gbs 8"},
        {"/tests/data/2026-11-28-moe-pools/mixtral-2l/1gpu.csv",
         "mixtral-2l --models " SEXTANT_ROOT "/docs/validation/2026-11-27-h200x2-heldout-moe/zoo_heldout.csv --seq 4096 --mbs 1 --gbs 8"},
        {"/tests/data/2026-11-27-gemm-accumulate/llama3-8b-4l_mbs1_seq1024_sextant.csv",
         "llama3-8b-4l --models " SEXTANT_ROOT "/docs/validation/2026-11-27-gemm-accumulate/zoo_heldout.csv --seq 1024 --mbs 1 --gbs 1"},
    };
    for (size_t i = 0; i < sizeof runs / sizeof runs[0]; i++) {
        char path[1024];
        snprintf(path, sizeof path, "%s%s", SEXTANT_ROOT, runs[i].csv);
        const double measured = measured_op_s(path, "optimizer");
        run_result r = run_sextant("estimate %s --gpu h200 --gpus 1 --attention sextant --ops", runs[i].args);
        expect_ok(&r);
        /* the op list's row ("  optimizer   membound  step ..."), not the memory table's "optimizer state" */
        const char *line = r.out, *end = NULL;
        while ((line = strstr(line, "\n  optimizer ")) != NULL) {
            end = strchr(line + 1, '\n');
            assert_non_null(end);
            const char *kind = strstr(line, " membound ");
            if (kind && kind < end) break;
            line = end;
        }
        assert_non_null(line);
        const char *last = end;
        while (last > line && last[-1] != ' ') last--;   /* the line's last field: ms in all */
        const double predicted = strtod(last, NULL) * 1e-3, error = predicted / measured - 1.0;
        if (fabs(error) >= 0.04) print_error("%s: optimizer %.3f ms predicted, %.3f measured\n", runs[i].csv, predicted * 1e3, measured * 1e3);
        assert_true(fabs(error) < 0.04);
        run_free(&r);
    }
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
    expect_bad_input("fit-power --calibration " SEXTANT_ROOT "/tests/data/2026-11-25-h100-power-default/h100-sxm.csv "
                     "--out /tmp/sextant-x.csv --runs " POWER_RUNS "/train_gpt2_mbs8.csv," POWER_RUNS "/train_gpt2_mbs16.csv",
                     "has no power model");
    expect_bad_input("fit-power --calibration " POWER_RUNS "/h100-sxm.csv --out /tmp/sextant-x.csv --runs "
                     POWER_RUNS "/calibrate.log," POWER_RUNS "/train_gpt2_mbs16.csv", "calibrate.log");
    assert_int_equal(access("/tmp/sextant-x.csv", F_OK), -1);
}

static const char *json_string(const cJSON *root, const char *a, const char *b)
{
    const cJSON *node = cJSON_GetObjectItemCaseSensitive(cJSON_GetObjectItemCaseSensitive(root, a), b);
    if (!cJSON_IsString(node)) {
        print_error("JSON key %s.%s is missing or not a string\n", a, b);
        fail();
    }
    return node->valuestring;
}

/* hwdb/measured/h100-sxm.csv is taken by default: the step differs from the hwdb defaults'
 * (--calibration none, which the library gives from gpus.csv alone), equals naming the file
 * with --calibration, and one line says so in estimate, explain and plan. */
static void measured_overlay_is_the_default(void **state)
{
    (void)state;
    const char *layout = "estimate llama3.2-1b --gpu h100-sxm --gpus 8 --mbs 4 --gbs 64 --seq 2048";
    char args[512];
    double by_default = json_step_s(layout);
    snprintf(args, sizeof args, "%s --calibration none", layout);
    double none = json_step_s(args);
    snprintf(args, sizeof args, "%s --calibration %s/hwdb/measured/h100-sxm.csv", layout, SEXTANT_ROOT);
    double named = json_step_s(args);
    assert_close(by_default, named, 1e-12);
    assert_true(fabs(by_default / none - 1.0) > 1e-3);

    /* none is the library's estimate on the hwdb alone */
    hwdb db;
    model_zoo zoo;
    char err[512];
    assert_int_equal(hwdb_load(SEXTANT_ROOT "/hwdb", &db, err, sizeof err), 0);
    assert_int_equal(model_zoo_load(SEXTANT_ROOT "/models/zoo.csv", &zoo, err, sizeof err), 0);
    const hw_gpu *g = hwdb_find_gpu(&db, "h100-sxm");
    const hw_node *node = hwdb_find_node(&db, g->node);
    layout_t l = {.gpus = 8, .tp = 1, .pp = 1, .dp = 8, .vpp = 1, .mbs = 4, .gbs = 64, .seq = 2048,
                  .gpus_per_node = node->gpus_per_node, .recompute = RECOMPUTE_SELECTIVE, .precision = PREC_BF16};
    job_t job = {1e9, 1.0};
    estimate_t *e = malloc(sizeof *e);
    assert_int_equal(estimate_layout(model_zoo_find(&zoo, "llama3.2-1b"), g, node, &l, &job, e, err, sizeof err), 0);
    assert_close(none, e->step_s, 1e-9);
    free(e);
    model_zoo_free(&zoo);
    hwdb_free(&db);

    const char *line = "calibration: hwdb/measured/h100-sxm.csv (measured overlay; --calibration none for the hwdb defaults)\n";
    const char *commands[] = {"estimate llama3.2-1b --gpus 8", "explain llama3.2-1b --gpus 8",
                              "plan llama3.2-1b --gpus 8 --tokens 20B"};
    for (size_t i = 0; i < sizeof commands / sizeof commands[0]; i++) {
        run_result r = run_sextant("%s", commands[i]);
        expect_ok(&r);
        const char *at = strstr(r.out, line);
        if (!at || count_lines(r.out) - count_lines(at) > 4) {
            print_error("sextant %s: no '%s' among its first lines\n", commands[i], line);
            fail();
        }
        run_free(&r);
        r = run_sextant("%s --calibration none", commands[i]);
        expect_ok(&r);
        assert_null(strstr(r.out, "measured overlay"));
        assert_non_null(strstr(r.out, "calibration: none (the hwdb defaults"));
        run_free(&r);
    }
    /* a GPU without a measured file says nothing */
    run_result r = run_sextant("estimate llama3.2-1b --gpu a100-sxm4-80gb --gpus 8");
    expect_ok(&r);
    assert_null(strstr(r.out, "calibration:"));
    run_free(&r);

    r = run_sextant("estimate llama3.2-1b --gpus 8 --format json");
    expect_ok(&r);
    cJSON *root = cJSON_Parse(r.out);
    assert_string_equal(json_string(root, "calibration", "file"), "hwdb/measured/h100-sxm.csv");
    assert_string_equal(json_string(root, "calibration", "origin"), "hwdb/measured");
    cJSON_Delete(root);
    run_free(&r);
    r = run_sextant("estimate llama3.2-1b --gpus 8 --format csv --calibration none");
    expect_ok(&r);
    assert_non_null(strstr(r.out, "calibration.file,calibration.origin"));
    assert_non_null(strstr(r.out, "\"\",\"hwdb defaults\""));
    run_free(&r);
}

/* In a plan over several GPU types each GPU with a measured file uses its own (found beside
 * --hwdb DIR), --calibration FILE takes over the GPUs it names only, and a bad measured file
 * is refused by file:line:field. */
static void each_gpu_takes_its_own_measured_overlay(void **state)
{
    (void)state;
    char dir[] = "/tmp/sextant-measured-XXXXXX";
    assert_non_null(mkdtemp(dir));
    char cmd[2048], args[1024];
    snprintf(cmd, sizeof cmd, "cp -r %s/hwdb %s/hw && printf 'gpu,key,value,source\\na100-sxm4-80gb,gemm_efficiency,0.5,test\\n'"
             " > %s/hw/measured/a100-sxm4-80gb.csv && printf 'gpu,key,value,source\\nh100-sxm,gemm_efficiency,0.6,test\\n'"
             " > %s/h100.csv", SEXTANT_ROOT, dir, dir, dir);
    assert_int_equal(system(cmd), 0);
    const char *plan = "plan llama3.2-1b --gpu h100-sxm,a100-sxm4-80gb --gpus 8 --tokens 20B --format json";
    for (int flag = 0; flag < 2; flag++) {
        char extra[600] = "";
        if (flag) snprintf(extra, sizeof extra, " --calibration %s/h100.csv", dir);
        run_result r = run_sextant("%s --hwdb %s/hw%s", plan, dir, extra);
        expect_ok(&r);
        cJSON *root = cJSON_Parse(r.out);
        const cJSON *list = cJSON_GetObjectItemCaseSensitive(root, "calibration");
        assert_int_equal(cJSON_GetArraySize(list), 2);
        for (int i = 0; i < 2; i++) {
            const cJSON *c = cJSON_GetArrayItem(list, i);
            const char *gpu = cJSON_GetObjectItemCaseSensitive(c, "gpu")->valuestring;
            const char *file = cJSON_GetObjectItemCaseSensitive(c, "file")->valuestring;
            const char *origin = cJSON_GetObjectItemCaseSensitive(c, "origin")->valuestring;
            char want[600];
            if (flag && !strcmp(gpu, "h100-sxm")) snprintf(want, sizeof want, "%s/h100.csv", dir);
            else snprintf(want, sizeof want, "%s/hw/measured/%s.csv", dir, gpu);
            assert_string_equal(file, want);
            assert_string_equal(origin, flag && !strcmp(gpu, "h100-sxm") ? "--calibration" : "hwdb/measured");
        }
        cJSON_Delete(root);
        run_free(&r);
    }
    /* the a100's own file is what changed its step */
    snprintf(args, sizeof args, "estimate llama3.2-1b --gpu a100-sxm4-80gb --gpus 8 --hwdb %s/hw", dir);
    double measured = json_step_s(args);
    snprintf(args, sizeof args, "estimate llama3.2-1b --gpu a100-sxm4-80gb --gpus 8 --hwdb %s/hw --calibration none", dir);
    assert_true(measured > 1.1 * json_step_s(args));
    snprintf(cmd, sizeof cmd, "printf 'gpu,key,value,source\\na100-sxm4-80gb,gemm_efficiency,fast,test\\n'"
             " > %s/hw/measured/a100-sxm4-80gb.csv", dir);
    assert_int_equal(system(cmd), 0);
    char where[600];
    snprintf(where, sizeof where, "%s/hw/measured/a100-sxm4-80gb.csv:2:value", dir);
    run_result r = run_sextant("%s", args);  /* --calibration none: never read */
    expect_ok(&r);
    run_free(&r);
    snprintf(args, sizeof args, "estimate llama3.2-1b --gpu a100-sxm4-80gb --gpus 8 --hwdb %s/hw", dir);
    expect_bad_input(args, where);
    snprintf(cmd, sizeof cmd, "rm -rf %s", dir);
    assert_int_equal(system(cmd), 0);
}

/* scripts/retime_overlay.sh, run on the H100's re-timed calibrate output, gives the shipped H100 overlay value for
 * value (docs/validation/2026-11-27-h100-calibrate-operands): the script the H200 will go through next is the one
 * that made the H100's, and the shipped file is what it makes. */
static void retime_overlay_remakes_the_h100_and_serves_the_h200(void **state)
{
    (void)state;
    char dir[] = "/tmp/sextant-retime-XXXXXX";
    assert_non_null(mkdtemp(dir));
    char cmd[4096];
    snprintf(cmd, sizeof cmd,
             "cd %s && SEXTANT=%s bash scripts/retime_overlay.sh h100-sxm "
             "docs/validation/2026-11-27-h100-calibrate-operands/fixed/calibrate.csv %s/out.csv > %s/log 2>&1 && "
             "grep -v '^#' %s/out.csv | cut -d, -f1-3 > %s/made && grep -v '^#' hwdb/measured/h100-sxm.csv | cut -d, -f1-3 > "
             "%s/shipped && cmp -s %s/made %s/shipped && test $(grep -c gemm_us: %s/made) -eq 198",
             SEXTANT_ROOT, SEXTANT_BIN, dir, dir, dir, dir, dir, dir, dir, dir);
    int rc = system(cmd);
    if (rc != 0) {
        snprintf(cmd, sizeof cmd, "cat %s/log; diff %s/made %s/shipped | head -20", dir, dir, dir);
        (void)system(cmd);
    }
    assert_int_equal(rc, 0);
    /* the H200's way (next): its steps all ran capped and cannot regress the clock time, so TIME_FROM gives the
     * H100's; fed its own overlay as the calibrate output, the table stays and the clock time is the H100's */
    snprintf(cmd, sizeof cmd,
             "cd %s && SEXTANT=%s TIME_FROM=hwdb/measured/h100-sxm.csv bash scripts/retime_overlay.sh h200 "
             "hwdb/measured/h200.csv %s/h200.csv > %s/log 2>&1 && test $(grep -c '^h200,gemm_us:' %s/h200.csv) -eq 198 && "
             "grep '^h100-sxm,clock_time_factor,' hwdb/measured/h100-sxm.csv | cut -d, -f3 > %s/k100 && "
             "grep '^h200,clock_time_factor,' %s/h200.csv | cut -d, -f3 > %s/k200 && cmp -s %s/k100 %s/k200",
             SEXTANT_ROOT, SEXTANT_BIN, dir, dir, dir, dir, dir, dir, dir, dir);
    rc = system(cmd);
    if (rc != 0) {
        snprintf(cmd, sizeof cmd, "cat %s/log %s/k100 %s/k200", dir, dir, dir);
        (void)system(cmd);
    }
    assert_int_equal(rc, 0);
    snprintf(cmd, sizeof cmd, "rm -rf %s", dir);
    assert_int_equal(system(cmd), 0);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(power_model_in_json_and_text),
        cmocka_unit_test(fit_power_predicts_other_models),
        cmocka_unit_test(fit_power_leaves_one_model_out),
        cmocka_unit_test(calibrated_overlays_predict_all_18_runs),
        cmocka_unit_test(h200_overlay_predicts_its_recorded_runs),
        cmocka_unit_test(h200_overlay_predicts_models_it_never_timed),
        cmocka_unit_test(h100_overlay_prices_two_gpus_of_unseen_models),
        cmocka_unit_test(zero3_prices_the_units_it_holds),
        cmocka_unit_test(mixtral_layouts_with_exact_expert_gemms),
        cmocka_unit_test(zero_overlap_leaves_the_clock),
        cmocka_unit_test(accumulating_weight_gradients_price_held_out_steps),
        cmocka_unit_test(moe_memory_keeps_no_expert_outputs),
        cmocka_unit_test(ep_steps_price_the_balanced_expert_shape),
        cmocka_unit_test(expert_algos_runs_price_within),
        cmocka_unit_test(random_route_runs_price_within),
        cmocka_unit_test(random_route_full_set_prices_within),
        cmocka_unit_test(random_route_one_machine_prices_within),
        cmocka_unit_test(fresh_zero_pairs_price_within),
        cmocka_unit_test(overlap_classes_after_prices_within),
        cmocka_unit_test(routed_pools_price_memory_within),
        cmocka_unit_test(cp_ring_backward_hidden_prices_cp2),
        cmocka_unit_test(host_issue_prices_olmoe_steps),
        cmocka_unit_test(optimizer_priced_at_adamw_bandwidth),
        cmocka_unit_test(fit_power_bad_input),
        cmocka_unit_test(measured_overlay_is_the_default),
        cmocka_unit_test(each_gpu_takes_its_own_measured_overlay),
        cmocka_unit_test(retime_overlay_remakes_the_h100_and_serves_the_h200),
    };
    return cmocka_run_group_tests_name("cli_calibration", tests, NULL, NULL);
}
