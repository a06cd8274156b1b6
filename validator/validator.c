/* sextant-gpu: the validator's first half, on one GPU.
 *
 *   sextant-gpu calibrate [--gpu NAME] [--out FILE] [--gemm-models A,B,...] [--warm | --no-step-fit]
 *       microbenchmarks (device copy, bf16 GEMMs over transformer shapes,
 *       a memory-bound kernel, launch overhead, our fused attention forward
 *       and backward) and the GPU's power model (NVML), fitted with GSL into
 *       the hwdb overlay that estimate/plan read with --calibration; then the
 *       step fit: six GPT-2 training runs refine the power model.
 *   sextant-gpu calibrate --issue | --optimizer [--gpu NAME] [--out FILE]
 *       one figure alone, as a one-row overlay: the host's issue of an expert
 *       GEMM (calibrate_issue.c), the optimizer step's bandwidth
 *       (calibrate_optimizer.c).
 *   sextant-gpu calibrate --comm [--gpus N] [--gpu NAME] [--out FILE] ...
 *       NCCL collectives over the GPUs of one node, one process per GPU
 *       (validator/comm.c, validator/launch.c), fitted into the node's
 *       intra-node latency and bandwidth; then a GEMM beside each collective
 *       (validator/overlap.c): the slowdowns of overlapping them.
 *   sextant-gpu ops MODEL [--gpu NAME] [--mbs N] [--seq N] [--calibration FILE] [--csv FILE]
 *       executes the planner's own op list of one micro-batch, op by op
 *       (cuBLAS for GEMMs and attention's batched GEMMs, our kernels for the
 *       memory-bound ops), and prints predicted against measured, per op.
 *
 *   sextant-gpu train MODEL [--tp N --pp N --dp N --sp --zero 1 --recompute full ...]
 *       a real training step (validator/train.c), on one GPU or one process
 *       per GPU, measured against the planner.  See docs/validation/README.md.
 *
 * This file parses the command line and dispatches: calibrate is validator/calibrate.c
 * (its power model calibrate_power.c, its step fit calibrate_step_fit.c), ops is ops.c,
 * train --plan's slice is slice.c; calibrate's and ops' op timing is bench.c. */
#include <cuda_runtime_api.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "bench.h"
#include "comm.h"
#include "commands.h"
#include "fp8.h"
#include "gpu_check.h"
#include "launch.h"
#include "moe.h"
#include "outfile.h"
#include "plan_file.h"
#include "planner.h"
#include "train.h"

/* ---- train: one GPU, or one process per GPU ------------------------------ */

typedef struct {
    const model_t *m;
    const hw_gpu *gpu;
    const hw_node *node;
    const char *shipped_overlay;   /* the GPU's shipped overlay where it prices the run by default, else NULL */
    train_options o;
} train_job;

static int train_body(launch_ctx *ctx, void *arg)
{
    train_job *job = arg;
    char device[256];
    device_line(device, sizeof device);
    if (!ctx || ctx->rank == 0) {
        printf("# on %s\n", device);
        if (job->shipped_overlay)
            printf("# priced with %s, the shipped overlay of %s (--calibration FILE or none to change it)\n",
                   job->shipped_overlay, job->gpu->name);
        warn_if_other_gpu(job->gpu);
    }
    return train_run(job->m, job->gpu, job->node, &job->o, ctx);
}

/* A whole number flag from min to max; -1 after one stderr line naming it. */
static int int_flag(int argc, char **argv, const char *flag, int fallback, int min, int max, int *out)
{
    const char *text = arg_value(argc, argv, flag, NULL);
    if (!text) { *out = fallback; return 0; }
    char *end;
    long v = strtol(text, &end, 10);
    if (end == text || *end || v < min || v > max) {
        fprintf(stderr, "sextant-gpu: train: %s '%s' is not a whole number from %d to %d\n", flag, text, min, max);
        return -1;
    }
    *out = (int)v;
    return 0;
}

/* A real number in (min, max]; -1 after one stderr line naming it. */
static int real_flag(int argc, char **argv, const char *flag, double fallback, double min, double max, double *out)
{
    const char *text = arg_value(argc, argv, flag, NULL);
    if (!text) { *out = fallback; return 0; }
    char *end;
    double v = strtod(text, &end);
    if (end == text || *end || !(v > min) || !(v <= max)) {
        fprintf(stderr, "sextant-gpu: train: %s '%s' is not a number above %g and at most %g\n", flag, text, min, max);
        return -1;
    }
    *out = v;
    return 0;
}

static int has_flag(int argc, char **argv, const char *flag)
{
    for (int i = 2; i < argc; i++)
        if (!strcmp(argv[i], flag)) return 1;
    return 0;
}

void train_layout_defaults(layout_t *l)
{
    memset(l, 0, sizeof *l);
    l->tp = l->pp = l->dp = l->vpp = l->cp = l->ep = 1;
    l->mbs = 8;
    l->seq = 1024;
    l->recompute = RECOMPUTE_NONE;
    l->attention = ATTENTION_UNFUSED;
    l->precision = PREC_BF16;
}

/* The layout flags through the planner's parser (layout_flags), then what the step runs of them:
 * --recompute none|full, --attention unfused or fused (the step's own kernel), --precision bf16|fp8.
 * 0, or 2 after one stderr line naming the flag. */
static int train_layout_flags(int argc, char **argv, int first_flag, train_options *o)
{
    layout_flags lf;
    train_layout_defaults(&o->l);
    layout_flags_init(&lf, &o->l);
    for (int i = first_flag; i < argc; i++) {
        char err[512];
        int taken = argv[i][0] == '-' ? layout_flag_parse(argv[i], i + 1 < argc ? argv[i + 1] : NULL, &lf, err, sizeof err) : 0;
        if (taken < 0) { fprintf(stderr, "sextant-gpu: train: %s\n", err); return 2; }
        if (taken == 2 || (taken == 0 && argv[i][0] == '-' && strcmp(argv[i], "--every-step"))) i++;   /* past the value */
    }
    const layout_t *l = &lf.l;
    if (l->recompute != RECOMPUTE_NONE && l->recompute != RECOMPUTE_FULL) {
        fprintf(stderr, "sextant-gpu: train: --recompute '%s' is not one of none|full\n", recompute_name(l->recompute));
        return 2;
    }
    if (l->attention == ATTENTION_FLASH1 || l->attention == ATTENTION_FLASH1_TRITON) {
        fprintf(stderr, "sextant-gpu: train: --attention '%s' is not one of unfused|flash|sextant (flash and sextant: the "
                        "step's own fused kernel)\n", attention_name(l->attention));
        return 2;
    }
    if (l->precision != PREC_BF16 && l->precision != PREC_FP8) {
        fprintf(stderr, "sextant-gpu: train: --precision '%s' is not one of bf16|fp8\n", precision_name(l->precision));
        return 2;
    }
    o->l = lf.l;
    /* the step runs one fused kernel, its own: the planner costs it as sextant (docs/guide.md, "Attention kernels") */
    if (attention_is_fused(o->l.attention)) o->l.attention = ATTENTION_SEXTANT;
    if (!(lf.given & LAYOUT_FLAG_GBS)) o->l.gbs = o->l.mbs * o->l.dp;
    return 0;
}

/* train forks its ranks when it needs several GPUs, so it runs before this
 * process makes any CUDA call. */
static int main_train(int argc, char **argv)
{
    static const char *const known[] = {"--gpu", "--mbs", "--gbs", "--seq", "--steps", "--tp", "--pp", "--vpp", "--dp",
                                        "--gpus", "--zero", "--recompute", "--attention", "--calibration", "--csv", "--json", "--plot",
                                        "--losses", "--timeout", "--warmup", "--sp", "--every-step", "--plan",
                                        "--lr", "--lr-warmup", "--cp", "--precision", "--ep", "--moe-imbalance",
                                        "--first-stage-layers", "--last-stage-layers"};
    const char *plan_path = arg_value(argc, argv, "--plan", NULL);
    int first_flag = plan_path && argc > 2 && argv[2][0] == '-' ? 2 : 3;
    if (!plan_path && (argc < 3 || argv[2][0] == '-')) { fprintf(stderr, "sextant-gpu: train needs a MODEL or --plan FILE\n"); return 2; }
    for (int i = first_flag; i < argc; i++) {
        if (argv[i][0] != '-') continue;
        int ok = 0;
        for (size_t k = 0; k < sizeof known / sizeof known[0] && !ok; k++) ok = !strcmp(argv[i], known[k]);
        if (!ok) { fprintf(stderr, "sextant-gpu: train: unknown flag %s\n", argv[i]); return 2; }
        if (strcmp(argv[i], "--sp") && strcmp(argv[i], "--every-step")) {
            if (i + 1 >= argc) { fprintf(stderr, "sextant-gpu: train: %s needs a value\n", argv[i]); return 2; }
            i++;
        }
    }
    static train_job job;
    train_options *o = &job.o;
    if (train_layout_flags(argc, argv, first_flag, o) != 0) return 2;
    static hwdb db, defaults;
    static model_zoo zoo;
    static plan_file plan;
    if (plan_path && read_plan(plan_path, &plan) != 0) return 2;
    /* a plan's slice is priced as the plan was: with its overlay, unless --calibration says otherwise (none: the hwdb
     * defaults); an overlay not found here is said and left out */
    const char *calibration = arg_value(argc, argv, "--calibration", NULL);
    static char beside_root[4400];
    if (!calibration && plan_path && plan.calibration[0]) {
        char root[4096];
        find_data_root(root, sizeof root);
        snprintf(beside_root, sizeof beside_root, "%s/%s", root, plan.calibration);
        const char *found = access(plan.calibration, R_OK) == 0 ? plan.calibration
                            : plan.calibration[0] != '/' && access(beside_root, R_OK) == 0 ? beside_root : NULL;
        if (found) {
            calibration = found;
            printf("# --plan: priced with the plan's calibration %s (--calibration FILE or none to change it)\n", calibration);
        } else {
            printf("# --plan: the plan's calibration %s is not here: the hwdb defaults price the slice\n", plan.calibration);
        }
    }
    const int declined = calibration && !strcmp(calibration, "none");
    if (declined) calibration = NULL;
    if (load_data(&db, &defaults, &zoo, calibration) != 0) return 2;
    const char *model_name = plan_path ? plan.model : argv[2];
    const model_t *zoo_model = model_zoo_find(&zoo, model_name);
    if (!zoo_model) { fprintf(stderr, "sextant-gpu: unknown model '%s'\n", model_name); return 2; }
    job.m = zoo_model;
    const char *gpu_name = validate_gpu_name(argc, argv, &defaults, plan_path ? plan.gpu : NULL);
    /* a plan's slice keeps the plan's pricing (above); a run of its own takes the GPU's shipped overlay */
    static char shipped[4200];
    if (!calibration && !declined && !plan_path) {
        int applied = apply_shipped_overlay(&db, gpu_name, shipped, sizeof shipped);
        if (applied < 0) return 2;
        if (applied) calibration = job.shipped_overlay = shipped;
    }
    job.gpu = hwdb_find_gpu(&db, gpu_name);
    if (!job.gpu) { fprintf(stderr, "sextant-gpu: train: --gpu: unknown GPU\n"); return 2; }
    job.node = hwdb_find_node(&db, job.gpu->node);
    /* the same GPU on hwdb defaults: the report puts the uncalibrated prediction beside the calibrated one */
    job.o.uncal_gpu = hwdb_find_gpu(&defaults, job.gpu->name);
    job.o.uncal_node = job.o.uncal_gpu ? hwdb_find_node(&defaults, job.o.uncal_gpu->node) : NULL;
    int gpus = 0, timeout = 120;
    if (int_flag(argc, argv, "--steps", 50, 1, 1 << 24, &o->steps) || int_flag(argc, argv, "--warmup", 5, 0, 1 << 20, &o->warmup) ||
        int_flag(argc, argv, "--gpus", 0, 1, 1 << 16, &gpus) || int_flag(argc, argv, "--timeout", 120, 1, 86400, &timeout) ||
        real_flag(argc, argv, "--lr", TRAIN_LR_DEFAULT, 0.0, 1.0, &o->lr) ||
        int_flag(argc, argv, "--lr-warmup", TRAIN_LR_WARMUP_DEFAULT, 0, 1 << 20, &o->lr_warmup))
        return 2;
    o->quiet_steps = has_flag(argc, argv, "--every-step");
    o->calibrated = calibration != NULL;
    o->csv = arg_value(argc, argv, "--csv", NULL);
    o->json = arg_value(argc, argv, "--json", NULL);
    o->plot = arg_value(argc, argv, "--plot", NULL);
    o->losses = arg_value(argc, argv, "--losses", NULL);
    static model_t executed;
    executed = *zoo_model;
    executed.dropout = 0;   /* the training step runs without dropout */
    /* the planner's assumption of the busiest EP rank's load, printed beside the measured one */
    double imbalance = 0.0;
    if (real_flag(argc, argv, "--moe-imbalance", 0.0, 0.0, 1e6, &imbalance)) return 2;
    if (imbalance > 0.0 && imbalance < 1.0) {
        fprintf(stderr, "sextant-gpu: train: --moe-imbalance %g: the busiest rank's load over the mean is at least 1\n", imbalance);
        return 2;
    }
    if (imbalance > 0.0) executed.moe_imbalance = imbalance;
    job.m = &executed;
    if (plan_path) {
        /* the GPUs here: --gpus, the launcher's, or every visible one */
        int available = gpus ? gpus : launch_launcher_ranks(NULL);
        if (!available) {
            char why[256];
            available = launch_visible_gpus(why, sizeof why);
            if (available == 0) { printf("sextant-gpu: no GPU found, skipping\n"); return 0; }
            if (available < 0) { fprintf(stderr, "sextant-gpu: cannot count the GPUs: %s\n", why); return 2; }
        }
        static model_t sliced;
        if (slice_plan(&plan, &executed, job.gpu, job.node, available, &sliced, o) != 0) return 2;
        job.m = &sliced;
        gpus = (int)(o->l.tp * o->l.pp * o->l.dp * o->l.cp);
    }
    if (train_check(job.m, o) != 0) return 2;
    /* SEXTANT_MOE_ROUTE=random deals a route known before the run (every rank draws a layer's from the same seed):
     * its busiest EP rank is priced as drawn, not at --moe-imbalance's default, as the balanced route's even rows are
     * (docs/guide.md, the environment).  A plan's slice keeps the plan's imbalance. */
    static model_t drawn;
    if (imbalance == 0.0 && !plan_path && !strcmp(moe_route_name(), "random") && job.m->experts > 1 && o->l.ep > 1) {
        drawn = *job.m;
        const int64_t tokens = o->l.mbs * o->l.seq / o->l.cp / (o->l.tp > 1 ? o->l.tp : 1);
        const double load = moe_random_route_load((int)drawn.layers, (int)tokens, (int)drawn.experts, (int)drawn.top_k,
                                                  (int)o->l.ep);
        if (load < 1.0) {
            fprintf(stderr, "sextant-gpu: train: SEXTANT_MOE_ROUTE=random: no route of %lld experts, top %lld over EP %lld\n",
                    (long long)drawn.experts, (long long)drawn.top_k, (long long)o->l.ep);
            return 2;
        }
        drawn.moe_imbalance = load;
        job.m = &drawn;
    }
    int ranks = (int)(o->l.tp * o->l.pp * o->l.dp * o->l.cp);
    if (gpus && gpus != ranks) {
        fprintf(stderr, "sextant-gpu: train: --gpus %d but --tp %lld x --pp %lld x --dp %lld x --cp %lld = %d\n", gpus,
                (long long)o->l.tp, (long long)o->l.pp, (long long)o->l.dp, (long long)o->l.cp, ranks);
        return 2;
    }
    int launched = launch_launcher_ranks(NULL) > 0;
    if (ranks > 1 || launched) {
        if (!launched) {
            char why[256];
            int visible = launch_visible_gpus(why, sizeof why);
            if (visible == 0) { printf("sextant-gpu: no GPU found, skipping\n"); return 0; }
            if (visible > 0 && visible < ranks) {
                fprintf(stderr, "sextant-gpu: train: the layout needs %d GPUs (tp %lld x pp %lld x dp %lld x cp %lld), %d visible; "
                        "nothing started\n", ranks, (long long)o->l.tp, (long long)o->l.pp, (long long)o->l.dp, (long long)o->l.cp,
                        visible);
                return 2;
            }
        }
        launch_options lo = {ranks, (double)timeout, 0.0};
        return launch_run(&lo, train_body, &job);
    }
    int devices = 0;
    if (cudaGetDeviceCount(&devices) != cudaSuccess || devices == 0) {
        printf("sextant-gpu: no GPU found, skipping\n");
        return 0;
    }
    return train_body(NULL, &job);
}

/* check-gradients: the real step on two tiny models (GPT-2's and LLaMA's
 * architectures, two layers) against the float64 reference. */
static int main_check(int argc, char **argv)
{
    (void)argc; (void)argv;
    int devices = 0;
    if (cudaGetDeviceCount(&devices) != cudaSuccess || devices == 0) {
        printf("sextant-gpu: no GPU found, skipping\n");
        return 0;
    }
    static hwdb db;
    static model_zoo zoo;
    if (load_data(&db, NULL, &zoo, NULL) != 0) return 2;
    const hw_gpu *gpu = hwdb_find_gpu(&db, "h100-sxm");
    const hw_node *node = hwdb_find_node(&db, gpu->node);
    char device[256];
    device_line(device, sizeof device);
    printf("# on %s\n", device);
    /* the families' architectures at a size the float64 reference runs in a second:
     * GPT-2 (LayerNorm, GELU, biases, learned positions, tied head) and LLaMA 3.2
     * (RMSNorm, SwiGLU, GQA 4/2, RoPE, tied head), and an untied LLaMA 2 */
    static const struct { const char *base, *name; int kv, ffn, tied; } tiny[] = {
        {"gpt2", "tiny-gpt2", 4, 256, 1}, {"llama3.2-1b", "tiny-llama3", 2, 96, 1}, {"llama2-7b", "tiny-llama2", 4, 96, 0}};
    int rc = 0;
    for (size_t i = 0; i < sizeof tiny / sizeof tiny[0]; i++) {
        const model_t *base = model_zoo_find(&zoo, tiny[i].base);
        if (!base) { fprintf(stderr, "sextant-gpu: check-gradients: %s is not in the zoo\n", tiny[i].base); return 2; }
        static model_t m;
        m = *base;
        snprintf(m.name, sizeof m.name, "%s", tiny[i].name);
        m.layers = 2; m.hidden = 64; m.heads = 4; m.kv_heads = tiny[i].kv; m.head_dim = 16; m.ffn = tiny[i].ffn;
        m.vocab = 100; m.max_positions = 64; m.seq = 16; m.tied_embeddings = tiny[i].tied; m.dropout = 0;
        train_options o = {0};
        train_layout_defaults(&o.l);   /* unfused attention, bf16, one GPU */
        o.l.mbs = 2; o.l.gbs = 2; o.l.seq = 16; o.steps = 8; o.warmup = 5;
        o.check_gradients = 1;
        int r = train_run(&m, gpu, node, &o, NULL);
        if (r != 0) rc = 1;
        printf("\n");
    }
    model_zoo_free(&zoo);
    hwdb_free(&db);
    return rc;
}

/* calibrate --comm forks its ranks, so it must run before this process
 * makes its first CUDA call; it needs only the hwdb. */
static int main_comm(int argc, char **argv)
{
    hwdb db;
    if (load_data(&db, NULL, NULL, NULL) != 0) return 2;
    int rc = comm_calibrate(argc, argv, &db);
    hwdb_free(&db);
    return rc;
}

/* Every file flag's target is looked at before any GPU work (outfile.c): a directory, device, FIFO, socket or
 * link is refused in one line now, not after a long run. */
static int refuse_unwritable_targets(int argc, char **argv)
{
    static const char *const file_flags[] = {"--out", "--csv", "--json", "--plot", "--losses", "--overlap-csv"};
    char err[PATH_MAX + 256];
    for (int i = 2; i + 1 < argc; i++)
        for (size_t f = 0; f < sizeof file_flags / sizeof file_flags[0]; f++)
            if (!strcmp(argv[i], file_flags[f]) && outfile_check_target(argv[i + 1], err, sizeof err) != 0) {
                fprintf(stderr, "sextant-gpu: %s: %s\n", file_flags[f], err);
                return 2;
            }
    return 0;
}

int main(int argc, char **argv)
{
    setvbuf(stdout, NULL, _IOLBF, 0);
    if (argc < 2 || (strcmp(argv[1], "calibrate") && strcmp(argv[1], "ops") && strcmp(argv[1], "train") &&
                     strcmp(argv[1], "check-gradients") && strcmp(argv[1], "check-fp8"))) {
        fprintf(stderr, "usage: sextant-gpu calibrate [--gpu NAME] [--out FILE] [--gemm-models A,B,...] [--clock-scaling]\n"
                        "                            [--data uniform|normal] [--warm | --no-step-fit] [--step-runs DIR]\n"
                        "       sextant-gpu calibrate --issue [--gpu NAME] [--out FILE]   (the host's issue of an expert GEMM)\n"
                        "       sextant-gpu calibrate --optimizer [--gpu NAME] [--out FILE]   (the optimizer step's bandwidth)\n"
                        "       sextant-gpu calibrate --comm [--gpus N] [--gpu NAME] [--out FILE] [--min-bytes SIZE] [--max-bytes SIZE]\n"
                        "                                    [--warmup N] [--iters N] [--repeats N] [--timeout S]\n"
                        "                                    [--overlap-shapes MxNxK,...] [--overlap-bytes SIZE,...]\n"
                        "                                    [--overlap-repeats N] [--overlap-csv FILE] [--no-overlap]\n"
                        "       sextant-gpu ops MODEL [--gpu NAME] [--mbs N] [--seq N] [--calibration FILE] [--csv FILE]\n"
                        "       sextant-gpu train MODEL [--gpu NAME] [--mbs N] [--gbs N] [--seq N] [--steps N] [--warmup N]\n"
                        "                             [--tp N] [--pp N] [--vpp N] [--dp N] [--cp 2] [--sp] [--zero 0|1|2|3] [--recompute none|full]\n"
                        "                             [--gpus N] [--timeout S] [--attention unfused|flash|sextant] [--calibration FILE]\n"
                        "                             [--csv FILE] [--json FILE] [--plot FILE.svg] [--losses FILE] [--every-step]\n"
                        "                             [--lr RATE] [--lr-warmup STEPS] [--precision bf16|fp8]\n"
                        "                             [--ep N] [--moe-imbalance X] [--first-stage-layers N] [--last-stage-layers N]\n"
                        "         (several GPUs: one process each, forked here, or started by mpirun / srun)\n"
                        "       sextant-gpu check-gradients   (the step's gradients on tiny models against float64)\n"
                        "       sextant-gpu check-fp8         (the FP8 GEMMs of a linear layer against float64)\n");
        return 2;
    }
    if (refuse_unwritable_targets(argc, argv)) return 2;
    if (!strcmp(argv[1], "calibrate"))
        for (int i = 2; i < argc; i++)
            if (!strcmp(argv[i], "--comm")) return main_comm(argc, argv);
    if (!strcmp(argv[1], "train")) return main_train(argc, argv);
    layout_t ops_flags;
    if (!strcmp(argv[1], "ops") && ops_layout(argc, argv, &ops_flags) != 0) return 2;   /* before any GPU is needed */
    if (!strcmp(argv[1], "check-gradients")) return main_check(argc, argv);
    if (!strcmp(argv[1], "check-fp8")) {
        int n = 0;
        if (cudaGetDeviceCount(&n) != cudaSuccess || n == 0) { printf("sextant-gpu: no GPU found, skipping\n"); return 0; }
        return fp8_check();
    }
    int devices = 0;
    if (cudaGetDeviceCount(&devices) != cudaSuccess || devices == 0) {
        printf("sextant-gpu: no GPU found, skipping\n");
        return 0;
    }
    hwdb db;
    model_zoo zoo;
    const char *calibration = arg_value(argc, argv, "--calibration", NULL);
    const int declined = calibration && !strcmp(calibration, "none");
    if (load_data(&db, NULL, &zoo, declined ? NULL : calibration) != 0) return 2;
    /* validate --ops, as validate: the GPU's shipped overlay unless --calibration says otherwise (calibrate
     * measures its own) */
    char shipped[4200];
    if (!strcmp(argv[1], "ops") && !calibration &&
        apply_shipped_overlay(&db, validate_gpu_name(argc, argv, &db, NULL), shipped, sizeof shipped) < 0)
        return 2;
    bench_open();
    int rc, fit_steps = 0;
    if (!strcmp(argv[1], "calibrate")) rc = cmd_calibrate(argc, argv, &db, &zoo, &fit_steps);
    else rc = cmd_ops(argc, argv, &db, &zoo);
    bench_close();
    if (rc == 0 && fit_steps) {
        /* the training runs get the GPU to themselves: without this context, its memory and its power */
        CUDA_CHECK(cudaDeviceReset());
        rc = calibrate_step_fit(argc, argv, &zoo);
    }
    model_zoo_free(&zoo);
    hwdb_free(&db);
    return rc;
}
