/* `sextant published` as a user meets it: the built-in published runs against
 * their estimates, the shared runs file (data/published/runs.csv) row by row
 * in JSON and the uncertainty bands it gives, the free-text columns' rules and
 * the reasons a row is not estimated, and docs/validation/published.md and
 * hwdb/uncertainty.csv as `make published` writes them today. */
#include "test_util.h"

#include <cjson/cJSON.h>

#include "planner.h"

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
    /* the pooled trim is the largest whose leave-one-source-out coverage reaches 80%: the table's "all" row
     * says so, and the trim it names is one of the rule's steps */
    run_result t = run_sextant("published --runs %s/data/published/runs.csv", SEXTANT_ROOT);
    expect_ok(&t);
    const char *all = strstr(t.out, "| all | ");
    assert_non_null(all);
    int rows_left_out = 0, inside_left_out = 0;
    assert_int_equal(sscanf(all, "| all | %d | %d (", &rows_left_out, &inside_left_out), 2);
    assert_true(inside_left_out >= 0.8 * rows_left_out);
    const char *trim = strstr(t.out, "(the trim, ");
    assert_non_null(trim);
    double trim_pct = 0.0;
    assert_int_equal(sscanf(trim, "(the trim, %lf%%", &trim_pct), 1);
    assert_true(trim_pct >= 0.5 && trim_pct <= 5.0 && fabs(trim_pct * 2.0 - floor(trim_pct * 2.0 + 0.5)) < 1e-9);
    run_free(&t);
    run_result r = run_sextant("published --runs %s/data/published/runs.csv --format json", SEXTANT_ROOT);
    expect_ok(&r);
    cJSON *root = cJSON_Parse(r.out);
    assert_non_null(root);
    assert_int_equal(cJSON_GetObjectItem(root, "rows_total")->valueint, 357);
    int estimated = cJSON_GetObjectItem(root, "rows_estimated")->valueint;
    assert_true(estimated >= 250);
    double sum_abs = 0, sum_signed = 0;
    int counted = 0, skipped = 0, unfit = 0;
    const cJSON *row;
    cJSON_ArrayForEach(row, cJSON_GetObjectItem(root, "rows")) {
        if (!cJSON_IsTrue(cJSON_GetObjectItem(row, "estimated"))) { skipped++; continue; }
        double published = cJSON_GetObjectItem(row, "published")->valuedouble;
        double predicted = cJSON_GetObjectItem(row, "predicted")->valuedouble;
        double err = cJSON_GetObjectItem(row, "signed_err")->valuedouble;
        const char *metric = cJSON_GetObjectItem(row, "metric")->valuestring;
        int time_metric = !strcmp(metric, "s_per_iter") || !strcmp(metric, "gpu_hours");
        /* the ratio, not the error: an error near 0 (MPT-760M at 8k tokens: -2e-6) has no relative precision */
        assert_close(1.0 + err, time_metric ? published / predicted : predicted / published, 1e-6);
        sum_abs += fabs(err);
        sum_signed += err;
        counted++;
        unfit += cJSON_IsFalse(cJSON_GetObjectItem(row, "fits"));
        /* a GPU with a measured overlay (the H100's) is priced under its power cap, as estimate prices it; the
         * others on the hwdb defaults, which carry no power model: the top clock, reported as 0 */
        double mhz = cJSON_GetObjectItem(row, "sm_clock_mhz")->valuedouble;
        if (!strcmp(cJSON_GetObjectItem(row, "gpu")->valuestring, "h100-sxm")) assert_true(mhz > 500.0 && mhz <= 1980.0);
        else assert_true(mhz == 0.0);
    }
    assert_int_equal(counted, estimated);
    /* NVIDIA's DGX Cloud Nemotron rows publish a step and an MFU of one run: read in the source's FLOP convention
     * (K and V per query head), both say the same */
    const cJSON *a_row, *b_row;
    int pairs = 0;
    cJSON_ArrayForEach(a_row, cJSON_GetObjectItem(root, "rows")) {
        const char *c = cJSON_GetObjectItem(a_row, "case")->valuestring;
        if (!strstr(c, "dgxc") || !strstr(c, "nemotron") || strcmp(cJSON_GetObjectItem(a_row, "metric")->valuestring, "mfu"))
            continue;
        cJSON_ArrayForEach(b_row, cJSON_GetObjectItem(root, "rows"))
            if (!strcmp(cJSON_GetObjectItem(b_row, "case")->valuestring, c) &&
                !strcmp(cJSON_GetObjectItem(b_row, "metric")->valuestring, "s_per_iter")) {
                assert_true(fabs(cJSON_GetObjectItem(a_row, "signed_err")->valuedouble -
                                 cJSON_GetObjectItem(b_row, "signed_err")->valuedouble) < 3e-3);
                assert_non_null(strstr(cJSON_GetObjectItem(a_row, "convention")->valuestring, "K and V per query head"));
                pairs++;
            }
    }
    assert_int_equal(pairs, 26);
    /* every published run ran: the rows said not to fit are counted, and few (2026-11-26: 8 of 341) */
    assert_int_equal(cJSON_GetObjectItem(root, "rows_not_fitting")->valueint, unfit);
    assert_true(unfit <= 12);
    assert_int_equal(counted + skipped, 357);
    assert_close(cJSON_GetObjectItem(root, "mean_abs_err")->valuedouble, sum_abs / counted, 1e-4);
    assert_close(cJSON_GetObjectItem(root, "mean_signed_err")->valuedouble, sum_signed / counted, 1e-3);
    int reasons = 0;
    const cJSON *reason;
    cJSON_ArrayForEach(reason, cJSON_GetObjectItem(root, "not_estimable")) reasons += reason->valueint;
    assert_int_equal(reasons, skipped);
    /* hwdb/uncertainty.csv's bands hold at least 80% of each family's rows (10th to 90th percentile, widened) */
    uncertainty_bands bands;
    char err[512];
    assert_int_equal(uncertainty_read(SEXTANT_ROOT "/hwdb/uncertainty.csv", &bands, err, sizeof err), 0);
    int inside[FAMILY_COUNT] = {0}, rows[FAMILY_COUNT] = {0};
    cJSON_ArrayForEach(row, cJSON_GetObjectItem(root, "rows")) {
        if (!cJSON_IsTrue(cJSON_GetObjectItem(row, "estimated"))) continue;
        int f = 0;
        while (f < FAMILY_COUNT && strcmp(parallelism_family_name((parallelism_family_t)f),
                                          cJSON_GetObjectItem(row, "family")->valuestring)) f++;
        assert_true(f < FAMILY_COUNT);
        double err_row = cJSON_GetObjectItem(row, "signed_err")->valuedouble;
        rows[f]++;
        inside[f] += err_row >= bands.err_low[f] - 1e-4 && err_row <= bands.err_high[f] + 1e-4;
    }
    for (int f = 0; f < FAMILY_COUNT; f++) {
        assert_int_equal(rows[f], bands.rows[f]);
        assert_true(inside[f] >= 0.8 * rows[f] - 1);
    }
    cJSON_Delete(root);
    run_free(&r);
}

/* The free-text columns read by their rules, the reasons a row is not estimated, and a malformed row refused. */
static void published_row_rules(void **state)
{
    (void)state;
    const char *header = "case,source,model,layers,hidden,heads,kv_heads,ffn,vocab,seq,params,gpu,gpus,gpus_per_node,tp,"
                         "pp,vpp,cp,ep,dp,mbs,gbs,precision,recompute,zero_or_fsdp,framework,metric,value,notes\n";
    char path[] = "/tmp/sextant-published-XXXXXX", text[8192];
    snprintf(text, sizeof text, "%s"
             "a,\"x/y README\",Llama 3 8B,32,4096,32,8,14336,128256,8192,8B,H100-SXM-80GB,16,8,1,1,,1,,16,2,64,fp8 (TE),,"
             "distributed optimizer,NeMo,mfu,0.4,FP8 MFU is vs FP8 peak\n"
             "b,\"x/y README\",GPT3-175B,,,,,,,2048,,H100 SXM,128,8,4,8,12,1,,4,1,256,bf16,,,NeMo,tokens_per_s_per_gpu,800,\n"
             "c,\"Some et al. 2025 (arXiv 1)\",M,32,4096,32,MLA,14336,128256,8192,,H100,16,8,1,1,,1,,16,1,64,bf16,,,,mfu,0.4,\n"
             "d,\"Some et al. 2025 (arXiv 1)\",M,32,4096,32,8,14336,128256,8192,,TPU v5p,16,8,1,1,,1,,16,1,64,bf16,,,,mfu,0.4,\n"
             "e,\"Some et al. 2025 (arXiv 1)\",M,32,4096,32,8,14336,128256,8192,,A100,16,8,1,1,,2,,8,1,64,bf16,,,,mfu,0.4,\n"
             "f,\"Some et al. 2021\",GPT,24,2048,16,,,51200,2048,1.3B,A100,16,8,2,1,,1,,8,1,64,fp16,full,none,Megatron-LM (2021),tflops_per_gpu_hw,100,\n"
             "g,s,M,32,4096,32,8,14336,128256,8192,,NVIDIA A800 80GB,16,8,1,1,,1,,16,1,64,bf16,activation checkpointing,ZeRO stage 3,DeepSpeed,mfu,0.4,\n"
             "h,s,M,32,4096,32,8,14336,128256,8192,,H100,16,8,1,1,,1,,16,1,64,bf16,no,zero2,DeepSpeed,mfu,0.4,\n"
             "i,s,M,32,4096,32,8,14336,128256,8192,,H100,16,8,1,1,,1,,16,1,64,bf16,selective op,HYBRID_SHARD,torchtitan,mfu,0.4,\n"
             "j,s,M,32,4096,32,8,14336,128256,8192,,A100-80GB,64,8,1,1,,1,,64,1,64,bf16,none,none,DeepSpeed,mfu,0.4,\n"
             "k,s,M,32,4096,32,8,14336,128256,8192,,A100-80GB (4x OmniPath per node),64,8,1,1,,1,,64,1,64,bf16,none,none,DeepSpeed,mfu,0.4,\n"
             "l,\"mosaicml/llm-foundry README\",M,32,4096,32,8,14336,128256,8192,,A100-80GB,64,8,1,1,,1,,64,1,64,bf16,none,none,Composer/llm-foundry,mfu,0.4,\n"
             "m,\"DeepSeek-V3 report\",DeepSeek-V3 (671B total / 37B active MoE),61,7168,128,MLA,\"dense 18432; expert 2048 x 257\",129280,4096,"
             "671B/37B act,H800,2048,8,1,16,,1,64,128,,15360 (after ramp from 3072),FP8 mixed,partial (RMSNorm/MLA up-proj recomputed),"
             "ZeRO-1,HAI-LLM (DualPipe),gpu_hours,180000,180K H800 GPU-hours per trillion tokens\n"
             "n,\"DeepSeek-V3 report\",DeepSeek-V3,61,7168,128,MLA,,129280,4096,,H800,2048,8,1,16,,1,64,128,,15360,fp8,,ZeRO-1,HAI-LLM,"
             "gpu_hours,2664000,the 14.8T pre-training\n"
             "o,s,Nemotron-340B,,,,,,,4096,,H100,128,8,8,8,,1,,2,1,32,fp8,,,NeMo,mfu,0.3,\n"
             "p,s,Llama-70B,,,,,,,4096,,H100,128,8,8,8,,1,,2,1,32,bf16,,,NeMo,mfu,0.3,\n"
             "q,\"DeepSeek-V3 report\",DeepSeek-V3 (671B total / 37B active MoE),61,7168,128,MLA,\"dense 18432; expert 2048 x 257\",129280,4096,"
             "671B/37B act,H800,2048,8,1,16,,1,64,128,,15360 (after ramp from 3072),FP8 mixed,partial (RMSNorm/MLA up-proj recomputed),"
             "ZeRO-1,HAI-LLM (DualPipe),gpu_hours,2664000,pre-training on 14.8T tokens = 2664K H800 GPU-hours\n"
             "r,\"mosaicml/llm-foundry README\",M,32,4096,32,8,14336,128256,8192,,H100-80GB,8,8,1,1,,1,,8,1,8,amp_fp8/DEFAULT,none,"
             "FSDP FULL_SHARD,Composer/llm-foundry,mfu,0.3,\n",
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
    /* ... and NeMo's default optimizer, the distributed one, where the row leaves the column empty */
    assert_int_equal(cJSON_GetObjectItem(cJSON_GetObjectItem(b, "layout"), "zero")->valueint, 1);
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
    /* g, h, i: the free text's other spellings */
    const struct { int row; const char *gpu, *recompute; int zero; } spelled[] = {
        {6, "a100-sxm4-80gb", "full", 3}, {7, "h100-sxm", "none", 2}, {8, "h100-sxm", "full", 3}};
    for (int i = 0; i < 3; i++) {
        const cJSON *x = cJSON_GetArrayItem(rows, spelled[i].row), *lx = cJSON_GetObjectItem(x, "layout");
        assert_string_equal(cJSON_GetObjectItem(x, "gpu")->valuestring, spelled[i].gpu);
        assert_string_equal(cJSON_GetObjectItem(lx, "recompute")->valuestring, spelled[i].recompute);
        assert_int_equal(cJSON_GetObjectItem(lx, "zero")->valueint, spelled[i].zero);
    }
    /* i: torchtitan's "selective op" recomputes about half the forward GEMMs: half the layers recompute */
    assert_int_equal(cJSON_GetObjectItem(cJSON_GetObjectItem(cJSON_GetArrayItem(rows, 8), "layout"), "recompute_layers")->valueint, 16);
    /* k: the network its text names (4 Omni-Path NICs of 100 Gb/s, a quarter of the DGX A100's) slows its
     * gradient all-reduce against j's, the same row on the GPU's usual node */
    assert_true(cJSON_GetObjectItem(cJSON_GetArrayItem(rows, 10), "step_s")->valuedouble >
                cJSON_GetObjectItem(cJSON_GetArrayItem(rows, 9), "step_s")->valuedouble * 1.01);
    /* l: j's row measured with MosaicML's 2023 stack: the first-generation fused attention (its Triton port, MPT's),
     * slower than j's */
    const cJSON *rl = cJSON_GetArrayItem(rows, 11);
    assert_string_equal(cJSON_GetObjectItem(cJSON_GetObjectItem(rl, "layout"), "attention")->valuestring, "flash1-triton");
    assert_true(cJSON_GetObjectItem(rl, "step_s")->valuedouble > cJSON_GetObjectItem(cJSON_GetArrayItem(rows, 9), "step_s")->valuedouble * 1.01);
    /* framework runs compute their loss in fp32 with no metrics on the logits; llm-foundry's MPT takes flash-attn's
     * fused cross-entropy, and Composer computes its two train metrics on the logits */
    assert_string_equal(cJSON_GetObjectItem(le, "loss")->valuestring, "fp32");
    assert_int_equal(cJSON_GetObjectItem(le, "logit_metrics")->valueint, 0);
    assert_string_equal(cJSON_GetObjectItem(cJSON_GetObjectItem(rl, "layout"), "loss")->valuestring, "fused-outplace");
    assert_int_equal(cJSON_GetObjectItem(cJSON_GetObjectItem(rl, "layout"), "logit_metrics")->valueint, 2);
    /* m: latent attention and experts from the zoo (the cells say MLA and describe the mixture), the batch
     * read before its note, GPU-hours per trillion tokens as a throughput, DeepSeek's recomputed modules and
     * DualPipe's overlapped all-to-alls; n: a whole campaign's GPU-hours, not one layout's step */
    const cJSON *rm = cJSON_GetArrayItem(rows, 12), *lm = cJSON_GetObjectItem(rm, "layout");
    assert_true(cJSON_IsTrue(cJSON_GetObjectItem(rm, "estimated")));
    assert_int_equal(cJSON_GetObjectItem(lm, "gbs")->valueint, 15360);
    assert_string_equal(cJSON_GetObjectItem(lm, "precision")->valuestring, "fp8");
    double tokens = 1e12 / (cJSON_GetObjectItem(rm, "predicted")->valuedouble * 3600.0) * 2048.0;
    assert_close(tokens * cJSON_GetObjectItem(rm, "step_s")->valuedouble, 15360.0 * 4096.0, 1e-4);
    assert_string_equal(cJSON_GetObjectItem(cJSON_GetArrayItem(rows, 13), "reason")->valuestring, "GPU-hours of a whole campaign");
    /* o: a family and a size name one zoo model (nemotron-4-340b); p: llama 70B could be two (Llama 2 or 3) */
    assert_true(cJSON_IsTrue(cJSON_GetObjectItem(cJSON_GetArrayItem(rows, 14), "estimated")));
    assert_string_equal(cJSON_GetObjectItem(cJSON_GetArrayItem(rows, 15), "reason")->valuestring, "architecture not published");
    /* q: m's layout over a pre-training of 14.8T tokens: 14.8 times m's GPU-hours per trillion */
    const cJSON *rq = cJSON_GetArrayItem(rows, 16);
    assert_true(cJSON_IsTrue(cJSON_GetObjectItem(rq, "estimated")));
    assert_close(cJSON_GetObjectItem(rq, "predicted")->valuedouble, 14.8 * cJSON_GetObjectItem(rm, "predicted")->valuedouble, 1e-6);
    /* r: Composer's MFU takes the peak of the run's precision, FP8's for amp_fp8 */
    assert_string_equal(cJSON_GetObjectItem(cJSON_GetArrayItem(rows, 17), "convention")->valuestring,
                        "model FLOPs (full s x s) / FP8 peak");
    assert_int_equal(cJSON_GetObjectItem(root, "rows_estimated")->valueint, 14);
    cJSON_Delete(root);
    run_free(&r);
    unlink(path);
    /* a metric the format does not know or a value that is no number: that row is not estimated, says why */
    char bad[] = "/tmp/sextant-published-bad-XXXXXX";
    snprintf(text, sizeof text, "%sa,s,M,32,4096,32,8,14336,128256,8192,,H100,16,8,1,1,,1,,16,1,64,bf16,,,,speed,1,\n"
             "b,s,M,32,4096,32,8,14336,128256,8192,,H100,16,8,1,1,,1,,16,1,64,bf16,,,,mfu,n/a,\n", header);
    write_temp(bad, text);
    r = run_sextant("published --runs %s", bad);
    expect_ok(&r);
    assert_non_null(strstr(r.out, "'speed' is not one of mfu"));
    assert_non_null(strstr(r.out, "| value not a positive number | 1 |"));
    run_free(&r);
    unlink(bad);
    /* a file without the format's columns is refused, naming the column */
    char wrong[] = "/tmp/sextant-published-wrong-XXXXXX";
    write_temp(wrong, "run,model,gpu\na,b,c\n");
    r = run_sextant("published --runs %s", wrong);
    assert_int_not_equal(r.status, 0);
    assert_non_null(strstr(r.err, "no column 'case'"));
    run_free(&r);
    unlink(wrong);
}

/* docs/validation/published.md is what `make published` writes today. */
/* --explain CASE: one case's reading, each metric published against predicted (the same figures as the
 * table's row), then explain's derivation; a case not in the file, or JSON, is one clear line. */
static void published_explain_one_case(void **state)
{
    (void)state;
    run_result r = run_sextant("published --runs %s/data/published/runs.csv --explain bloom176b_384gpu", SEXTANT_ROOT);
    expect_ok(&r);
    assert_non_null(strstr(r.out, "Published run bloom176b_384gpu"));
    assert_non_null(strstr(r.out, "4 NICs of 100 Gb/s (the network the row names)"));
    assert_non_null(strstr(r.out, "accumulated fp32-copy"));
    /* every metric of the case, each with the table's error */
    const char *metrics[] = {"tflops_per_gpu_hw: published 149.8", "s_per_iter: published 104.7",
                             "samples_per_s: published 19.56"};
    for (size_t i = 0; i < sizeof metrics / sizeof metrics[0]; i++) assert_non_null(strstr(r.out, metrics[i]));
    const char *pct = strstr(r.out, "s_per_iter: published 104.7, predicted ");
    assert_non_null(pct);
    run_result table = run_sextant("published --runs %s/data/published/runs.csv", SEXTANT_ROOT);
    expect_ok(&table);
    char needle[64];
    double predicted = atof(pct + strlen("s_per_iter: published 104.7, predicted "));
    snprintf(needle, sizeof needle, "| s_per_iter 104.7 | %.4g |", predicted);
    assert_non_null(strstr(table.out, needle));
    assert_non_null(strstr(r.out, "How sextant estimates BLOOM-176B on 384 x a100-sxm4-80gb"));
    assert_non_null(strstr(r.out, "7. Throughput, time and cost"));
    run_free(&table);
    run_free(&r);
    /* a case not estimated says why, and has no derivation */
    r = run_sextant("published --runs %s/data/published/runs.csv --explain opt175b_992gpu", SEXTANT_ROOT);
    expect_ok(&r);
    assert_non_null(strstr(r.out, "not estimated (layout not published: no micro-batch"));
    assert_null(strstr(r.out, "How sextant estimates"));
    run_free(&r);
    expect_bad_input("published --explain no_such_case", "--explain: no case 'no_such_case'");
    expect_bad_input("published --explain bloom-176b-384gpu --format json", "published --explain");
    expect_bad_input("published --explain", "--explain");
}

/* With the H100's measured overlay the H100 rows carry the power model's clock, between a fraction of the top
 * clock and the top clock itself; the other GPUs' rows none (docs/model.md, "Clock under the power cap"). */
static void published_rows_report_their_clock(void **state)
{
    (void)state;
    run_result r = run_sextant("published --runs %s/data/published/runs.csv --calibration %s/hwdb/measured/h100-sxm.csv "
                               "--format json", SEXTANT_ROOT, SEXTANT_ROOT);
    expect_ok(&r);
    cJSON *root = cJSON_Parse(r.out);
    assert_non_null(root);
    int h100 = 0, capped = 0;
    const cJSON *row;
    cJSON_ArrayForEach(row, cJSON_GetObjectItem(root, "rows")) {
        if (!cJSON_IsTrue(cJSON_GetObjectItem(row, "estimated"))) continue;
        double mhz = cJSON_GetObjectItem(row, "sm_clock_mhz")->valuedouble;
        if (strcmp(cJSON_GetObjectItem(row, "gpu")->valuestring, "h100-sxm")) {
            assert_true(mhz == 0.0);
            continue;
        }
        h100++;
        assert_true(mhz > 0.3 * 1980.0 && mhz <= 1980.0 + 1e-9);
        capped += mhz < 1980.0;
    }
    assert_true(h100 >= 150 && capped > h100 / 2);
    double measured_err = cJSON_GetObjectItem(root, "mean_abs_err")->valuedouble;
    cJSON_Delete(root);
    run_free(&r);
    /* without --calibration each GPU takes its measured overlay, as estimate does: the same figures; --calibration
     * none: every row on the hwdb defaults, at the top clock */
    for (int defaults = 0; defaults < 2; defaults++) {
        r = run_sextant("published --runs %s/data/published/runs.csv%s --format json", SEXTANT_ROOT,
                        defaults ? " --calibration none" : "");
        expect_ok(&r);
        root = cJSON_Parse(r.out);
        assert_non_null(root);
        double err = cJSON_GetObjectItem(root, "mean_abs_err")->valuedouble;
        if (!defaults) assert_close(err, measured_err, 1e-12);
        else assert_true(fabs(err - measured_err) > 1e-3);
        cJSON_ArrayForEach(row, cJSON_GetObjectItem(root, "rows"))
            if (defaults && cJSON_IsTrue(cJSON_GetObjectItem(row, "estimated")))
                assert_true(cJSON_GetObjectItem(row, "sm_clock_mhz")->valuedouble == 0.0);
        cJSON_Delete(root);
        run_free(&r);
    }
}

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
    /* and hwdb/uncertainty.csv is what it writes from the same rows */
    snprintf(cmd, sizeof cmd, "cd %s && %s published --runs data/published/runs.csv --bands-out %s", SEXTANT_ROOT,
             SEXTANT_BIN, out_path);
    assert_int_equal(system(cmd), 0);
    fresh = slurp(out_path);
    committed = slurp(SEXTANT_ROOT "/hwdb/uncertainty.csv");
    if (strcmp(fresh, committed) != 0) print_error("hwdb/uncertainty.csv is stale: run `make published` and commit it\n");
    assert_string_equal(fresh, committed);
    free(fresh);
    free(committed);
    unlink(out_path);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(published_runs_regression),
        cmocka_unit_test(published_shared_runs_json),
        cmocka_unit_test(published_row_rules),
        cmocka_unit_test(published_explain_one_case),
        cmocka_unit_test(published_rows_report_their_clock),
        cmocka_unit_test(published_md_is_current),
    };
    return cmocka_run_group_tests_name("cli_published", tests, NULL, NULL);
}
