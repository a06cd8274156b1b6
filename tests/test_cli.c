/* The command line as a user meets it: commands, formats, docs/SPEC.md's worked
 * examples through `explain`, and bad input (one line on stderr, non-zero
 * exit, nothing on stdout, no output file).  `sextant published` is tested in
 * test_cli_published.c, the calibration overlays in test_cli_calibration.c. */
#include "test_util.h"

#include <cjson/cJSON.h>
#include <math.h>
#include <unistd.h>

#include "gnuplot.h"
#include "hwdb.h"
#include "planner.h"
#include "outfile.h"
#include <dirent.h>
#include <sys/stat.h>

#define ISSUE_EXAMPLE "llama2-70b --gpu h100-sxm --gpus 1024 --tp 8 --pp 4 --mbs 1 --gbs 1024 --seq 4096 " \
                      "--tokens 2T --recompute selective --sp --zero 1"

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
    assert_null(strstr(r.out, "measured over"));   /* the hwdb alone: no collectives measured */
    assert_null(strstr(r.out, "accumulating gradient"));   /* no tile model on the defaults: no read term */
    /* the overlap slowdowns, hwdb/priors.csv's until an overlay measures them */
    assert_non_null(strstr(r.out, "beside a collective    a GEMM +39.0% (all-gather), +36.1% (reduce-scatter), "
                                  "+49.9% (all-reduce); the collective beside a GEMM +54.5%"));
    run_free(&r);
    /* with the shipped overlay, the collectives calibrate --comm measured, per number of ranks */
    r = run_sextant("hw h200 --calibration " SEXTANT_ROOT "/hwdb/measured/h200.csv");
    expect_ok(&r);
    assert_non_null(strstr(r.out, "measured over 2 ranks: all-reduce 284 GB/s 8.1 us (11 times"));
    assert_non_null(strstr(r.out, "measured over 4 ranks: all-reduce 328 GB/s"));
    assert_non_null(strstr(r.out, "a GEMM +39.0% (all-gather), +36.1% (reduce-scatter), +49.9% (all-reduce)"));
    assert_non_null(strstr(r.out, "accumulating gradient  a weight gradient adding into its gradient: its read x 0.642, "
                                  "an fp32 gradient's extra store x 1.800"));
    run_free(&r);
    /* explain says what a weight gradient pays for adding into its gradient, at the gradient's width */
    static const struct { const char *flags, *says; } widths[] = {
        {"", "A weight gradient adds into the 16-bit gradient (beta = 1)"},
        {" --fp32-grads", "A weight gradient adds into the fp32 gradient (beta = 1)"},
    };
    for (size_t i = 0; i < sizeof widths / sizeof widths[0]; i++) {
        r = run_sextant("explain llama3.2-1b --gpu h200%s --calibration " SEXTANT_ROOT "/hwdb/measured/h200.csv",
                        widths[i].flags);
        expect_ok(&r);
        assert_non_null(strstr(r.out, widths[i].says));
        run_free(&r);
    }
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
    const char *time_keys[] = {"step_s", "compute_s", "tp_comm_s", "pp_comm_s", "dp_comm_s", "bubble_s",
                               "overlap_slowdown_s", "overlap_beside_s"};
    for (size_t i = 0; i < sizeof time_keys / sizeof time_keys[0]; i++) json_number(root, "time", time_keys[i]);
    const char *flops_keys[] = {"model_per_step", "hardware_per_step", "six_nd_per_step"};
    for (size_t i = 0; i < sizeof flops_keys / sizeof flops_keys[0]; i++) json_number(root, "flops", flops_keys[i]);
    const char *top[] = {"mfu", "hfu", "tokens_per_s", "time_to_train_s", "gpu_hours", "cost_usd", "tp_ratio_limit"};
    for (size_t i = 0; i < sizeof top / sizeof top[0]; i++) json_number(root, top[i], NULL);
    assert_true(cJSON_IsArray(cJSON_GetObjectItemCaseSensitive(root, "warnings")));
    assert_close(json_number(root, "layout", "dp"), 32, 0);
    /* the pipeline's split as costed: 80 layers over 4 stages */
    const char *split_keys[] = {"first_stage_layers", "middle_stage_layers", "last_stage_layers"};
    for (size_t i = 0; i < 3; i++) assert_close(json_number(root, "layout", split_keys[i]), 20, 0);
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
 * 2026-11-23-h200x2-m-eq-pp): all forwards first, so the last stage holds
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

/* explain lists NCCL's communicators one by one, each priced by what runs on it, and their sum is the estimate's: a MoE
 * model on DP 4 x EP 2 with the H200's overlay (calibrate --comm's parts) opens DP's, EP's and the experts' DP group. */
static void explain_prices_each_communicator(void **state)
{
    (void)state;
    run_result r = run_sextant("explain moe-test --gpu h200 --gpus 4 --dp 4 --ep 2 --mbs 4 --gbs 16 --seq 1024");
    assert_int_equal(r.status, 0);
    const char *lines[] = {"NCCL (by part, calibrate --comm): the world's communicator", "DP (collectives)",
                           "EP (collectives, send/recv)", "experts' DP (collectives)", "in all"};
    for (size_t i = 0; i < sizeof lines / sizeof lines[0]; i++)
        if (!strstr(r.out, lines[i])) {
            print_error("explain lacks '%s'\n", lines[i]);
            fail();
        }
    assert_null(strstr(r.out, "    TP ("));   /* TP 1: no communicator */
    assert_null(strstr(r.out, "    PP ("));
    /* and the experts' launches against the host's issue after the routing sync, the lead the up projection leaves
     * the down projection (its 256 rows an expert: the host sets the down projection's time) */
    const char *issue = strstr(r.out, "After the routing sync the host issues them one by one (");
    assert_non_null(issue);
    assert_non_null(strstr(issue, "into the down projection's issue"));
    run_free(&r);
    /* without the parts (the hwdb defaults): one total per communicator */
    r = run_sextant("explain moe-test --gpu h200 --gpus 4 --dp 4 --ep 2 --mbs 4 --gbs 16 --seq 1024 --calibration none");
    assert_int_equal(r.status, 0);
    assert_non_null(strstr(r.out, "NCCL (one total per communicator)"));
    run_free(&r);
}

/* explain says what each ZeRO stage overlaps: ZeRO-2 reduce-scatters every micro-batch's gradients over its backward
 * (dp_reduce_scatter_grads "every micro-batch's backward"), not the last micro-batch's only as ZeRO-0/1 do. */
static void explain_says_what_each_zero_stage_overlaps(void **state)
{
    (void)state;
    static const struct {
        int zero;
        const char *says;
    } stages[] = {{1, "The gradients overlap the last micro-batch's backward"},
                  {2, "The gradients of each micro-batch overlap its backward, except the last layer's reduce-scatter"},
                  {3, "The gathers and reduce-scatters of each micro-batch overlap its forward and backward"}};
    for (size_t i = 0; i < sizeof stages / sizeof stages[0]; i++) {
        char args[160];
        snprintf(args, sizeof args, "explain llama3.2-1b --gpu h200 --gpus 2 --dp 2 --zero %d --mbs 2 --gbs 16 --seq 2048",
                 stages[i].zero);
        run_result r = run_sextant(args);
        assert_int_equal(r.status, 0);
        if (!strstr(r.out, stages[i].says)) {
            print_error("explain --zero %d lacks '%s'\n", stages[i].zero, stages[i].says);
            fail();
        }
        for (size_t j = 0; j < sizeof stages / sizeof stages[0]; j++)
            if (j != i && strstr(r.out, stages[j].says)) {
                print_error("explain --zero %d says ZeRO-%d's '%s'\n", stages[i].zero, stages[j].zero, stages[j].says);
                fail();
            }
        /* the overlapped collectives' part of the step, out of the power (docs/model.md, "Clock under the power cap") */
        assert_non_null(strstr(r.out, "is compute slowed beside overlapped collectives"));
        assert_null(strstr(r.out, "wait only at the step's first forward"));
        run_free(&r);
    }
    /* sextant's trainer's waits (--zero-waits step), said where they apply */
    run_result r = run_sextant("explain llama3.2-1b --gpu h200 --gpus 2 --dp 2 --zero 3 --mbs 2 --gbs 16 --seq 2048 "
                               "--zero-waits step");
    assert_int_equal(r.status, 0);
    assert_non_null(strstr(r.out, "wait only at the step's first forward and last backward"));
    run_free(&r);
}

/* docs/SPEC.md's worked examples, each through `sextant explain --spec`: every
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
    /* docs/SPEC.md section 2's closing line: the textbook count and the real architecture side by side */
    run_result r = run_sextant("explain llama2-70b --gpus 8 --tp 8 --mbs 8 --seq 4096 --recompute selective");
    expect_ok(&r);
    assert_non_null(strstr(r.out, "Textbook GPT count"));
    assert_non_null(strstr(r.out, "Exact count from the architecture"));
    assert_non_null(strstr(r.out, "GQA shrinks them"));
    assert_non_null(strstr(r.out, "Korthikanti"));
    run_free(&r);
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

/* entries in `dir` other than . and .. */
static int count_entries(const char *dir)
{
    DIR *d = opendir(dir);
    assert_non_null(d);
    int n = 0;
    for (struct dirent *e; (e = readdir(d));)
        if (strcmp(e->d_name, ".") && strcmp(e->d_name, "..")) n++;
    closedir(d);
    return n;
}

static void remove_tree(const char *dir)
{
    char cmd[512];
    snprintf(cmd, sizeof cmd, "rm -rf '%s'", dir);
    assert_int_equal(system(cmd), 0);
}

/* --out and --plot replace only a regular file or a new path; a FIFO, a
 * directory and a symbolic link are refused by name and left as they were
 * (issue 26: `--out /dev/full` once replaced the device node). */
static void out_refuses_what_is_not_a_regular_file(void **state)
{
    (void)state;
    char dir[] = "/tmp/sextant-targets-XXXXXX";
    assert_non_null(mkdtemp(dir));
    char fifo[256], link[256], target[256], cmd[1024];
    snprintf(fifo, sizeof fifo, "%s/fifo", dir);
    snprintf(link, sizeof link, "%s/link", dir);
    snprintf(target, sizeof target, "%s/target", dir);
    assert_int_equal(mkfifo(fifo, 0600), 0);
    FILE *f = fopen(target, "w");
    fputs("keep\n", f);
    fclose(f);
    assert_int_equal(symlink(target, link), 0);
    const char *flags[] = {"estimate llama2-7b --gpus 8 --out", "plan llama2-7b --gpus 8 --out",
                           "plan llama2-7b --gpus 8 --plot", "fit-power --calibration x.csv --runs a.csv,b.csv --out"};
    for (size_t i = 0; i < sizeof flags / sizeof flags[0]; i++) {
        snprintf(cmd, sizeof cmd, "%s %s", flags[i], fifo);
        expect_bad_input(cmd, "is a FIFO");
        snprintf(cmd, sizeof cmd, "%s %s", flags[i], link);
        expect_bad_input(cmd, "is a symbolic link");
        snprintf(cmd, sizeof cmd, "%s %s", flags[i], dir);
        expect_bad_input(cmd, "is a directory");
    }
    struct stat st;
    assert_int_equal(lstat(fifo, &st), 0);
    assert_true(S_ISFIFO(st.st_mode));
    assert_int_equal(lstat(link, &st), 0);
    assert_true(S_ISLNK(st.st_mode));
    char *text = slurp(target);
    assert_string_equal(text, "keep\n");
    free(text);
    /* a regular file is replaced whole and keeps its permissions; no temporary file stays */
    assert_int_equal(chmod(target, 0640), 0);
    run_result r = run_sextant("estimate llama2-7b --gpus 8 --out %s", target);
    assert_int_equal(r.status, 0);
    run_free(&r);
    assert_int_equal(stat(target, &st), 0);
    assert_int_equal(st.st_mode & 0777, 0640);
    text = slurp(target);
    assert_non_null(strstr(text, "sextant estimate"));
    free(text);
    assert_int_equal(count_entries(dir), 3);
    /* the library's writer refuses the same, and a failed commit leaves nothing */
    char err[1024];
    outfile o;
    assert_int_equal(outfile_open(&o, fifo, err, sizeof err), -1);
    assert_non_null(strstr(err, "FIFO"));
    assert_int_equal(outfile_open(&o, target, err, sizeof err), 0);
    fputs("partial", o.f);
    outfile_abort(&o);
    assert_int_equal(count_entries(dir), 3);
    assert_int_equal(outfile_open(&o, target, err, sizeof err), 0);
    assert_int_equal(unlink(target), 0);
    assert_int_equal(mkfifo(target, 0600), 0); /* the target changed while the file was written */
    assert_int_equal(outfile_commit(&o, err, sizeof err), -1);
    assert_non_null(strstr(err, "is a FIFO"));
    assert_int_equal(lstat(target, &st), 0);
    assert_true(S_ISFIFO(st.st_mode));
    assert_int_equal(count_entries(dir), 3);
    remove_tree(dir);
}

/* One file written by several processes in turn (validate's ranks): the
 * first creates the tagged temporary file (never through a link), the others
 * append, the first commits. */
static void shared_out_file_is_written_by_turns(void **state)
{
    (void)state;
    char dir[] = "/tmp/sextant-shared-XXXXXX", path[256], err[1024];
    assert_non_null(mkdtemp(dir));
    snprintf(path, sizeof path, "%s/rows.csv", dir);
    outfile first, later;
    assert_int_equal(outfile_open_shared(&later, path, 77, 0, err, sizeof err), -1); /* nothing to append to yet */
    assert_int_equal(outfile_open_shared(&first, path, 77, 1, err, sizeof err), 0);
    fputs("header\nrank 0\n", first.f);
    assert_int_equal(fflush(first.f), 0);
    assert_int_equal(outfile_open_shared(&later, path, 77, 0, err, sizeof err), 0);
    fputs("rank 1\n", later.f);
    assert_int_equal(outfile_close(&later), 0);
    assert_int_equal(outfile_commit(&first, err, sizeof err), 0);
    char *text = slurp(path);
    assert_string_equal(text, "header\nrank 0\nrank 1\n");
    free(text);
    assert_int_equal(count_entries(dir), 1);
    /* a link planted where the temporary file will be is not followed */
    char planted[300], victim[300];
    snprintf(planted, sizeof planted, "%s/.rows.csv.78.tmp", dir);
    snprintf(victim, sizeof victim, "%s/victim", dir);
    FILE *f = fopen(victim, "w");
    fputs("mine\n", f);
    fclose(f);
    assert_int_equal(symlink(victim, planted), 0);
    assert_int_equal(outfile_open_shared(&first, path, 78, 1, err, sizeof err), -1);
    assert_int_equal(outfile_open_shared(&later, path, 78, 0, err, sizeof err), -1);
    text = slurp(victim);
    assert_string_equal(text, "mine\n");
    free(text);
    remove_tree(dir);
}

/* A plot path with quotes and gnuplot code in it is a file name and nothing
 * else: the SVG is written under that name and no command runs. */
static void plot_path_is_never_gnuplot_code(void **state)
{
    (void)state;
    if (system("command -v gnuplot >/dev/null 2>&1") != 0) skip();
    char dir[] = "/tmp/sextant-plot-name-XXXXXX";
    assert_non_null(mkdtemp(dir));
    /* shell-quoted below: '\'' is a single quote inside single quotes */
    const char *shell_name = "'x'\\''\";system(\"touch PWNED\");`touch PWNED2`@a.svg'";
    const char *name = "x'\";system(\"touch PWNED\");`touch PWNED2`@a.svg";
    char prefix[512];
    snprintf(prefix, sizeof prefix, "cd %s &&", dir);
    run_result r = run_sextant_with(prefix, "plan llama2-13b --gpu h100-sxm,a100-sxm4-80gb --gpus 64-256 --tokens 1T "
                                            "--plot ''\\''a'\\''.svg' >/dev/null; true");
    run_free(&r);
    char cmd[1024];
    snprintf(cmd, sizeof cmd, "plan llama2-13b --gpu h100-sxm --gpus 64-256 --tokens 1T --plot %s", shell_name);
    r = run_sextant_with(prefix, cmd);
    assert_int_equal(r.status, 0);
    run_free(&r);
    char path[512];
    snprintf(path, sizeof path, "%s/%s", dir, name);
    char *svg = slurp(path);
    assert_non_null(strstr(svg, "<svg"));
    free(svg);
    snprintf(path, sizeof path, "%s/PWNED", dir);
    struct stat st;
    assert_int_equal(stat(path, &st), -1);
    snprintf(path, sizeof path, "%s/PWNED2", dir);
    assert_int_equal(stat(path, &st), -1);
    assert_int_equal(count_entries(dir), 2); /* the crafted name and 'a'.svg, nothing else */
    remove_tree(dir);
}

/* gnuplot's own error line comes back, and a failed plot leaves no file */
static void gnuplot_failure_says_why(void **state)
{
    (void)state;
    char dir[] = "/tmp/sextant-plot-fail-XXXXXX", path[256], err[1024];
    assert_non_null(mkdtemp(dir));
    snprintf(path, sizeof path, "%s/p.svg", dir);
    int rc = gnuplot_render("set terminal svg\nplot no_such_variable\n", path, err, sizeof err);
    if (system("command -v gnuplot >/dev/null 2>&1") == 0) {
        assert_int_equal(rc, 1);
        assert_non_null(strstr(err, "undefined variable"));
    } else {
        assert_int_equal(rc, 2);
    }
    assert_int_equal(count_entries(dir), 0);
    /* without gnuplot on PATH: 2, said so, nothing left */
    char *saved = strdup(getenv("PATH") ? getenv("PATH") : "");
    setenv("PATH", dir, 1);
    rc = gnuplot_render("set terminal svg\nplot x\n", path, err, sizeof err);
    setenv("PATH", saved, 1);
    free(saved);
    assert_int_equal(rc, 2);
    assert_non_null(strstr(err, "not installed"));
    assert_int_equal(count_entries(dir), 0);
    remove_tree(dir);
}

/* Issue 26's unclear cases: each now says what is wrong, and an overlay's
 * rows for other GPUs are noted in one stderr line. */
static void hostile_input_is_named(void **state)
{
    (void)state;
    /* bf16 on V100 (no bf16 tensor rate): why nothing was searched */
    run_result r = run_sextant("plan llama2-7b --gpu v100-sxm2-32gb --gpus 8 --precision bf16");
    assert_int_equal(r.status, 0);
    assert_non_null(strstr(r.out, "every layout on v100-sxm2-32gb: it has no bf16 tensor rate"));
    run_free(&r);
    /* a directory given as a file is a directory, not an empty file */
    expect_bad_input("estimate llama2-7b --gpus 8 --calibration /tmp", "/tmp: is a directory");
    expect_bad_input("estimate --model-config /tmp --gpus 8", "/tmp: is a directory");
    /* an overlay's rows for GPUs other than --gpu: one note, the estimate still made */
    char overlay[] = "/tmp/sextant-overlay-XXXXXX";
    write_temp(overlay, "gpu,key,value,source\nh100-sxm,gemm_efficiency,0.6,x\nh200,gemm_efficiency,0.6,x\n"
                        "a100-sxm4-80gb,hbm_gbs,2000,x\nH200,hbm_gbs,4000,x\n");
    r = run_sextant("estimate llama2-7b --gpus 8 --gpu h100-sxm --calibration %s", overlay);
    assert_int_equal(r.status, 0);
    assert_int_equal(count_lines(r.err), 1);
    assert_non_null(strstr(r.err, "note: --calibration"));
    assert_non_null(strstr(r.err, "rows for h200, a100-sxm4-80gb, which this run does not use (--gpu h100-sxm)"));
    run_free(&r);
    r = run_sextant("plan llama2-7b --gpus 8 --gpu h100-sxm,h200,a100-sxm4-80gb --calibration %s", overlay);
    assert_int_equal(r.status, 0);
    assert_string_equal(r.err, ""); /* every GPU it names is in use */
    run_free(&r);
    unlink(overlay);
    /* a key given twice: refused with both lines */
    char dup[] = "/tmp/sextant-overlay-XXXXXX";
    write_temp(dup, "gpu,key,value,source\nh100-sxm,gemm_efficiency,0.6,x\nh100-sxm,gemm_efficiency,0.9,x\n");
    char args[256];
    snprintf(args, sizeof args, "estimate llama2-7b --gpus 8 --calibration %s", dup);
    expect_bad_input(args, ":3:key: 'gemm_efficiency' of h100-sxm given again (first at line 2)");
    unlink(dup);
}

/* An FP8 estimate quotes MFU against the FP8 peak and, beside it, against the bf16 peak. */
static void fp8_mfu_against_both_peaks(void **state)
{
    (void)state;
    run_result r = run_sextant("estimate llama3-8b --gpu h100-sxm --gpus 8 --tp 2 --sp --precision fp8 --format json");
    expect_ok(&r);
    cJSON *root = cJSON_Parse(r.out);
    assert_non_null(root);
    double mfu = cJSON_GetObjectItem(root, "mfu")->valuedouble, bf16 = cJSON_GetObjectItem(root, "mfu_bf16_peak")->valuedouble;
    assert_close(bf16, mfu * 1978.9 / 989.4, 1e-9);
    cJSON_Delete(root);
    run_free(&r);
    r = run_sextant("estimate llama3-8b --gpu h100-sxm --gpus 8 --tp 2 --sp --precision fp8");
    expect_ok(&r);
    assert_non_null(strstr(r.out, "of 1978.9 fp8 peak: MFU"));
    assert_non_null(strstr(r.out, "against the 989.4 bf16 peak: MFU"));
    run_free(&r);
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

/* --emit prints the best layout the framework can run, and one line when that is not the
 * overall winner (which the framework then cannot run), with how far behind it is. */
static void emit_says_when_not_the_winner(void **state)
{
    (void)state;
    const char *frameworks[] = {"megatron", "deepspeed", "torchtitan"};
    const char *requests[] = {"plan llama2-70b --gpu h100-sxm --gpus 1024 --tokens 2T",
                              "plan gpt2 --gpu a100-sxm4-80gb --gpus 8 --tokens 10B"};
    int lines = 0, silent = 0;
    for (size_t q = 0; q < sizeof requests / sizeof requests[0]; q++) {
        run_result r = run_sextant("%s --format json", requests[q]);
        expect_ok(&r);
        cJSON *root = cJSON_Parse(r.out);
        const cJSON *layout = cJSON_GetObjectItem(cJSON_GetArrayItem(cJSON_GetObjectItem(root, "top"), 0), "layout");
        layout_t w = {.tp = (int64_t)cJSON_GetObjectItem(layout, "tp")->valuedouble,
                      .pp = (int64_t)cJSON_GetObjectItem(layout, "pp")->valuedouble,
                      .vpp = (int64_t)cJSON_GetObjectItem(layout, "vpp")->valuedouble,
                      .zero = cJSON_GetObjectItem(layout, "zero")->valueint,
                      .sp = cJSON_IsTrue(cJSON_GetObjectItem(layout, "sp"))};
        cJSON_Delete(root);
        run_free(&r);
        for (size_t f = 0; f < 3; f++) {
            r = run_sextant("%s --emit %s", requests[q], frameworks[f]);
            expect_ok(&r);
            const char *why = framework_refusal(frameworks[f], &w);
            /* a comment line in Megatron's and torchtitan's output, a key of DeepSpeed's JSON */
            const char *line = strstr(r.out, "not the overall winner: ");
            if (!line) line = strstr(r.out, "\"not_overall_winner\"");
            if (why) {
                if (!line || !strstr(line, why) || (!strstr(line, "% behind in") && !strstr(line, "% ahead in"))) {
                    print_error("--emit %s: no line saying why it is not the winner:\n%s\n", frameworks[f], r.out);
                    fail();
                }
                lines++;
            } else {
                assert_null(line);
                silent++;
            }
            run_free(&r);
        }
    }
    assert_true(lines > 0 && silent > 0);
}

/* Where the tie-break changed the winner, the JSON says from which and why, and the table's
 * "Why it wins" says so. */
static void tie_break_is_explained(void **state)
{
    (void)state;
    const char *requests[] = {"plan llama2-70b --gpu h100-sxm --gpus 1024 --tokens 2T",
                              "plan llama3-8b --gpu h100-sxm --gpus 64 --tokens 1T",
                              "plan llama2-70b --gpu h100-sxm --gpus 1024 --tokens 2T --calibration none"};
    int changed = 0;
    for (size_t q = 0; q < sizeof requests / sizeof requests[0]; q++) {
        run_result r = run_sextant("%s --format json", requests[q]);
        expect_ok(&r);
        cJSON *root = cJSON_Parse(r.out);
        const cJSON *tie = cJSON_GetObjectItem(root, "tie_break");
        assert_true(cJSON_IsBool(cJSON_GetObjectItem(tie, "changed_winner")));
        int broken = cJSON_IsTrue(cJSON_GetObjectItem(tie, "changed_winner"));
        char reason[128] = "";
        if (broken) {
            snprintf(reason, sizeof reason, "here %s.", cJSON_GetObjectItem(tie, "reason")->valuestring);
            double best = cJSON_GetObjectItem(cJSON_GetObjectItem(tie, "objective_best"), "time_to_train_s")->valuedouble;
            double won = cJSON_GetObjectItem(cJSON_GetArrayItem(cJSON_GetObjectItem(root, "top"), 0), "time_to_train_s")->valuedouble;
            assert_true(won >= best && won <= best * (1.0 + cJSON_GetObjectItem(tie, "fraction")->valuedouble));
            changed++;
        }
        cJSON_Delete(root);
        run_free(&r);
        r = run_sextant("%s", requests[q]);
        expect_ok(&r);
        const char *why = strstr(r.out, "Why it wins");
        assert_non_null(why);
        if (broken) {
            assert_non_null(strstr(why, "It ties with the best by time-to-train"));
            assert_non_null(strstr(why, reason));
        } else {
            assert_null(strstr(why, "It ties with"));
        }
        run_free(&r);
    }
    assert_true(changed > 0);
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
    /* every layout flag the parser takes is in the help */
    for (size_t i = 0; layout_flag_name(i); i++) {
        char spaced[64];
        snprintf(spaced, sizeof spaced, "%s ", layout_flag_name(i));
        if (!strstr(r.out, spaced)) print_error("--help does not mention %s\n", layout_flag_name(i));
        assert_non_null(strstr(r.out, spaced));
    }
    run_free(&r);
}

/* validate and calibrate need a GPU: without one (CI) they say so in one
 * line and exit 0, whether or not the GPU half was built. */
static void gpu_commands_skip_without_a_gpu(void **state)
{
    (void)state;
    if (system("nvidia-smi -L >/dev/null 2>&1") == 0) skip();
    const char *commands[] = {"validate gpt2 --mbs 4 --steps 10", "validate gpt2 --ops",
                              "calibrate --out /tmp/sextant-never-written.csv"};
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
    expect_bad_input("estimate llama2-70b --gpus 64 --pp 8 --first-stage-layers 3 --last-stage-layers 3", "--first-stage-layers 3");
    expect_bad_input("estimate llama2-70b --gpus 64 --first-stage-layers 3", "needs --pp of 2 or more");
    expect_bad_input("estimate llama2-70b --gpus 64 --pp 8 --last-stage-layers 0", "--last-stage-layers");
    expect_bad_input("plan llama2-70b --gpus 64 --first-stage-layers 8", "plan searches the layout");
    expect_bad_input("estimate llama2-70b --gpu v100-sxm2-32gb --precision bf16", "--precision bf16");
    expect_bad_input("estimate llama2-70b --precision fp4", "--precision");
    expect_bad_input("estimate llama2-70b --recompute some", "--recompute");
    expect_bad_input("estimate llama2-70b --tp-overlap full", "--tp-overlap");
    expect_bad_input("estimate llama2-70b --grad-sync later", "--grad-sync");
    expect_bad_input("estimate llama2-70b --grad-accum fp32", "--grad-accum");
    expect_bad_input("estimate llama2-70b --zero 3 --grad-accum fp32-copy", "--grad-accum fp32-copy");
    expect_bad_input("estimate llama2-70b --attention flash3", "--attention");
    expect_bad_input("estimate llama2-70b --loss fused-inplace", "fused|fp32|fused-outplace");
    expect_bad_input("estimate llama2-70b --logit-metrics 17", "--logit-metrics");
    expect_bad_input("estimate llama2-70b --logit-metrics -1", "--logit-metrics");
    expect_bad_input("estimate llama2-70b --logit-metrics two", "--logit-metrics");
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
    expect_bad_input("estimate llama2-7b --runs a.csv", "--runs is a flag of fit-power and published, not of estimate");
    /* models, hw and published refuse what they do not use, and a model they do not take */
    expect_bad_input("models --tp 4", "--tp is not a flag of models");
    expect_bad_input("hw --top 3", "--top is not a flag of hw");
    expect_bad_input("hw h100-sxm --format json", "--format is not a flag of hw");
    expect_bad_input("published --tp 2", "--tp is not a flag of published");
    expect_bad_input("published gpt2", "published takes no model");
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
/* The layout flags' one parser (planner/layout_flags.c), as estimate, explain, plan and sextant-gpu's
 * train and ops call it: values over the caller's defaults, `given` for what was on the command line,
 * one line naming the flag for a bad value, 0 for a flag that is not a layout flag. */
static void layout_flags_parse_over_defaults(void **state)
{
    (void)state;
    layout_t defaults = {0};
    defaults.mbs = 8;
    defaults.seq = 1024;
    defaults.attention = ATTENTION_UNFUSED;
    layout_flags f;
    layout_flags_init(&f, &defaults);
    char err[256] = "";
    assert_int_equal(layout_flag_parse("--tp", "4", &f, err, sizeof err), 2);
    assert_int_equal(layout_flag_parse("--sp", "--tp", &f, err, sizeof err), 1);   /* a switch takes no value */
    assert_int_equal(layout_flag_parse("--attention", "sextant", &f, err, sizeof err), 2);
    assert_int_equal(layout_flag_parse("--gbs", "2K", &f, err, sizeof err), 2);
    assert_int_equal(layout_flag_parse("--steps", "3", &f, err, sizeof err), 0);   /* not a layout flag */
    assert_int_equal(f.l.tp, 4);
    assert_int_equal(f.l.sp, 1);
    assert_int_equal(f.l.attention, ATTENTION_SEXTANT);
    assert_int_equal(f.l.gbs, 2000);
    assert_int_equal(f.l.mbs, 8);      /* not given: the default stays */
    assert_int_equal(f.l.seq, 1024);
    assert_int_equal(f.given, LAYOUT_FLAG_TP | LAYOUT_FLAG_SP | LAYOUT_FLAG_ATTENTION | LAYOUT_FLAG_GBS);
    assert_int_equal(layout_flag_bit("--mbs"), LAYOUT_FLAG_MBS);
    assert_int_equal(layout_flag_bit("--gpus"), 0);   /* plan's range and sextant-gpu's GPUs here: not a layout flag */
    static const struct { const char *flag, *value, *line; } bad[] = {
        {"--tp", "two", "--tp: 'two' is not a positive integer"},
        {"--tp", NULL, "--tp: missing value"},
        {"--mbs", "0", "--mbs: '0' is not a positive integer"},
        {"--vpp", "2000", "--vpp: 2000 is larger than 1000"},
        {"--zero", "4", "--zero: '4' is not one of 0|1|2|3"},
        {"--recompute", "some", "--recompute: 'some' is not one of none|selective|full"},
        {"--attention", "fused", "--attention: 'fused' is not one of flash|unfused|flash1|flash1-triton|sextant"},
        {"--precision", "int4", "--precision: 'int4' is not one of fp32|tf32|fp16|bf16|fp8"},
    };
    for (size_t i = 0; i < sizeof bad / sizeof bad[0]; i++) {
        layout_flags g;
        layout_flags_init(&g, &defaults);
        err[0] = '\0';
        assert_int_equal(layout_flag_parse(bad[i].flag, bad[i].value, &g, err, sizeof err), -1);
        assert_string_equal(err, bad[i].line);
        assert_int_equal(g.given, 0);
        assert_int_equal(g.l.mbs, 8);
    }
    /* estimate prints the parser's line after its prefix */
    expect_bad_input("estimate gpt2 --tp two", "sextant: --tp: 'two' is not a positive integer");
}

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
        cmocka_unit_test(csv_carries_the_same_content),
        cmocka_unit_test(interleaved_all_forwards_first),
        cmocka_unit_test(ops_listing),
        cmocka_unit_test(explain_walks_through_the_estimate),
        cmocka_unit_test(explain_prices_each_communicator),
        cmocka_unit_test(explain_says_what_each_zero_stage_overlaps),
        cmocka_unit_test(spec_example_compute),
        cmocka_unit_test(spec_example_memory),
        cmocka_unit_test(spec_example_pcie),
        cmocka_unit_test(spec_example_tp_ratio),
        cmocka_unit_test(explain_llama2_70b_both_ways),
        cmocka_unit_test(model_config_imports),
        cmocka_unit_test(out_file_is_written_whole),
        cmocka_unit_test(out_refuses_what_is_not_a_regular_file),
        cmocka_unit_test(shared_out_file_is_written_by_turns),
        cmocka_unit_test(plot_path_is_never_gnuplot_code),
        cmocka_unit_test(gnuplot_failure_says_why),
        cmocka_unit_test(hostile_input_is_named),
        cmocka_unit_test(fp8_mfu_against_both_peaks),
        cmocka_unit_test(plan_command_line),
        cmocka_unit_test(emit_says_when_not_the_winner),
        cmocka_unit_test(tie_break_is_explained),
        cmocka_unit_test(version_and_help),
        cmocka_unit_test(gpu_commands_skip_without_a_gpu),
        cmocka_unit_test(bad_input_is_one_clear_line),
        cmocka_unit_test(bad_csv_names_file_line_field),
        cmocka_unit_test(flags_of_other_commands_are_refused),
        cmocka_unit_test(layout_flags_parse_over_defaults),
        cmocka_unit_test(attention_default_is_one_the_gpu_has),
    };
    return cmocka_run_group_tests_name("cli", tests, NULL, NULL);
}
