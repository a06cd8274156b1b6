/* The command line: sextant models | hw | estimate | explain.
 * Everything is parsed and checked before anything is printed, and the
 * report is built in memory, so bad input never leaves partial output. */
#include "planner.h"
#include "gnuplot.h"
#include "outfile.h"

#include <ctype.h>
#include <stdarg.h>
#include <errno.h>
#include <limits.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>
#include <time.h>
#include <unistd.h>

#ifndef SEXTANT_DATADIR
#define SEXTANT_DATADIR "/usr/local/share/sextant"
#endif

#define ERR_MAX 1024
#define DEFAULT_GPU "h100-sxm"
#define DEFAULT_MODEL "llama2-70b"
/* LLaMA-2's global batch, 4M tokens, is the default when --gbs is absent */
#define DEFAULT_BATCH_TOKENS 4194304.0

typedef struct {
    const char *command;
    const char *model_name;
    const char *gpu_name, *node_name;
    const char *hwdb_dir, *models_file, *model_config, *calibration, *out_path;
    int64_t gpus;
    /* the layout flags (planner/layout_flags.c) over a zeroed layout: a count of 0 was not given, and
     * make_layout and cmd_plan fill the defaults that depend on the model and the GPU from lay.given */
    layout_flags lay;
    double tokens, price;
    double moe_imbalance, capacity_factor;   /* 0: the model's (the default imbalance, no capacity limit) */
    int no_dropout, with_ops, spec_examples;
    format_t format;
    /* plan */
    const char *gpus_text, *emit, *plot;
    /* fit-power, published */
    const char *runs, *bands_out, *explain_case;
    double days, budget;
    int have_objective, top, strict, allow_tp_across_nodes;
    objective_t objective;
    uint64_t command_flags_seen;   /* bit i: command_flags[i] was given */
} options;

/* Flags that only some commands use; every other flag is common to estimate, explain and plan.
 * estimate, explain and plan refuse a flag of this table meant for another command by name. */
enum { FOR_ESTIMATE = 1, FOR_EXPLAIN = 2, FOR_PLAN = 4, FOR_FIT_POWER = 8, FOR_PUBLISHED = 16 };
static const struct {
    const char *flag;
    unsigned commands;
} command_flags[] = {
    /* one layout: plan searches these */
    {"--tp", FOR_ESTIMATE | FOR_EXPLAIN}, {"--pp", FOR_ESTIMATE | FOR_EXPLAIN}, {"--dp", FOR_ESTIMATE | FOR_EXPLAIN},
    {"--vpp", FOR_ESTIMATE | FOR_EXPLAIN}, {"--mbs", FOR_ESTIMATE | FOR_EXPLAIN},
    {"--recompute", FOR_ESTIMATE | FOR_EXPLAIN}, {"--recompute-layers", FOR_ESTIMATE | FOR_EXPLAIN},
    {"--recompute-modules", FOR_ESTIMATE | FOR_EXPLAIN},
    {"--first-stage-layers", FOR_ESTIMATE | FOR_EXPLAIN}, {"--last-stage-layers", FOR_ESTIMATE | FOR_EXPLAIN},
    {"--loss", FOR_ESTIMATE | FOR_EXPLAIN | FOR_PLAN}, {"--tp-overlap", FOR_ESTIMATE | FOR_EXPLAIN | FOR_PLAN},
    {"--grad-sync", FOR_ESTIMATE | FOR_EXPLAIN | FOR_PLAN}, {"--grad-accum", FOR_ESTIMATE | FOR_EXPLAIN | FOR_PLAN},
    {"--expert-gemm", FOR_ESTIMATE | FOR_EXPLAIN | FOR_PLAN}, {"--expert-rows", FOR_ESTIMATE | FOR_EXPLAIN | FOR_PLAN},
    {"--zero-waits", FOR_ESTIMATE | FOR_EXPLAIN | FOR_PLAN},
    {"--sp", FOR_ESTIMATE | FOR_EXPLAIN},
    {"--zero", FOR_ESTIMATE | FOR_EXPLAIN}, {"--gpus-per-node", FOR_ESTIMATE | FOR_EXPLAIN},
    {"--ops", FOR_ESTIMATE}, {"--format", FOR_ESTIMATE | FOR_PLAN}, {"--spec", FOR_EXPLAIN},
    /* the search */
    {"--top", FOR_PLAN}, {"--days", FOR_PLAN}, {"--budget", FOR_PLAN}, {"--objective", FOR_PLAN},
    {"--strict", FOR_PLAN}, {"--allow-tp-across-nodes", FOR_PLAN}, {"--emit", FOR_PLAN}, {"--plot", FOR_PLAN},
    {"--runs", FOR_FIT_POWER | FOR_PUBLISHED}, {"--bands-out", FOR_PUBLISHED}, {"--explain", FOR_PUBLISHED},
};
#define COMMAND_FLAGS (sizeof command_flags / sizeof command_flags[0])
_Static_assert(COMMAND_FLAGS <= 64, "command_flags_seen holds a bit per command flag");

static const char *usage_text =
    "usage: sextant COMMAND [MODEL] [flags]\n"
    "\n"
    "commands:\n"
    "  models                 the model zoo, one line each, with parameter counts\n"
    "  hw [NAME]              the hardware database, or one GPU or node with its sources\n"
    "  estimate [MODEL]       memory, step time, MFU, time-to-train and cost of one layout\n"
    "  explain [MODEL]        the same, as a step-by-step derivation\n"
    "  explain --spec         docs/SPEC.md's worked examples through the same formulas\n"
    "  plan [MODEL]           search every layout: how many GPUs, which layout, how long, how much\n"
    "  published [--runs FILE] [--format json]   published runs (default models/published_runs.csv, with the plan\n"
    "                         column) against their estimates, per source group; data/published/runs.csv holds more\n"
    "  published [--runs FILE] --explain CASE   one published case: how its row was read, published against\n"
    "                         predicted in each of its metrics, and explain's derivation of the estimate\n"
    "  calibrate [--gpu NAME] [--out FILE] [--gemm-models A,B] [--warm | --no-step-fit] [--step-runs DIR]   GPU\n"
    "                         microbenchmarks, the models' GEMM and attention shapes, the GPU's power (NVML) so the\n"
    "                         planner sets each step's clock under the power cap, refined on six GPT-2 training runs\n"
    "                         -> hwdb overlay (needs a GPU; about 4 minutes); --warm: shapes timed warm, no power model\n"
    "  fit-power --calibration OVERLAY --runs A.csv,B.csv,... --out FILE   the power model's clock exponent and fused\n"
    "                         attention energy fitted to steps validate measured (its --csv files) -> a new overlay\n"
    "  fit-gemm --calibration OVERLAY --out FILE   the GEMM time over M, N, K (tiles and waves) fitted to the\n"
    "                         overlay's gemm_us rows, with its leave-one-model-out error -> a new overlay\n"
    "  calibrate --comm [--gpus N] [--out FILE] [--max-bytes SIZE]   NCCL collectives on one node's GPUs -> intra-node\n"
    "                         latency and bandwidth in the overlay (needs 2+ GPUs)\n"
    "  validate MODEL [--gpu NAME --mbs N --gbs N --seq N --steps N --calibration FILE --csv FILE --json FILE --plot FILE.svg]\n"
    "                 [--tp N --pp N --dp N --ep N --sp --zero 0|1|2|3 --recompute none|full --attention unfused|flash|sextant --gpus N]\n"
    "                                     train for real, one process per GPU (or under mpirun / srun), predicted\n"
    "                                     against measured, op and collective by op (needs GPUs)\n"
    "  validate --plan FILE [--gpus N]    a plan's JSON (plan/estimate --format json) on the GPUs here, as a slice\n"
    "  validate MODEL --ops [...]         the op list timed op by op, without training\n"
    "\n"
    "model and hardware:\n"
    "  MODEL                  a zoo name (default " DEFAULT_MODEL "), case-insensitive\n"
    "  --model-config FILE    a Hugging Face config.json instead of a zoo name\n"
    "  --gpu NAME             GPU type (default " DEFAULT_GPU ")\n"
    "  --node NAME            node type (default: the GPU's node in hwdb/nodes.csv)\n"
    "  --hwdb DIR             another hardware database (gpus.csv, nodes.csv)\n"
    "  --models FILE          another model zoo CSV\n"
    "  --calibration FILE|none   a measured overlay (gpu,key,value,source) over hwdb; default for estimate, explain,\n"
    "                         plan and validate: hwdb/measured/<gpu>.csv where it exists; none: the hwdb defaults\n"
    "layout:\n"
    "  --gpus N               GPUs in all (default tp x pp x dp)\n"
    "  --gpus-per-node K      GPUs per node (default from the node type)\n"
    "  --tp N --pp N --dp N   tensor, pipeline and data parallel degrees (dp derived)\n"
    "  --vpp N                virtual pipeline chunks per GPU (interleaved 1F1B; micro-batches in multiples of --pp)\n"
    "  --first-stage-layers N --last-stage-layers N   layers on the pipeline's first and last stage, the rest\n"
    "                         evenly over the others (Megatron's --decoder-first/last-pipeline-num-layers); default:\n"
    "                         L/pp each, or when pp does not divide L the embedding and head counted as layers\n"
    "  --cp N                 context parallel degree: each GPU holds seq/N tokens (GPUs = tp x cp x pp x dp);\n"
    "                         plan searches 1-16 when --seq is 8192 or more, else takes 1 (or N)\n"
    "  --cp-comm ring|allgather   how CP exchanges K and V: Megatron's ring (default) or Llama 3's all-gather\n"
    "  --ep N                 expert parallel degree (MoE models): each GPU holds experts/N experts; N divides\n"
    "                         the experts and dp x cp (inside the data-parallel ranks); plan searches powers of two\n"
    "  --etp N                expert tensor parallel degree (Megatron's --expert-tensor-parallel-size): each\n"
    "                         routed expert split over N GPUs (default: --tp); N x ep divides tp x cp x dp and N\n"
    "                         the expert FFN width; plan searches 1 and TP\n"
    "  --ep-overlap           hide EP all-to-alls behind the next micro-batch's compute (Megatron's\n"
    "                         --overlap-moe-expert-parallel-comm, DeepSeek's DualPipe); default exposed\n"
    "  --moe-imbalance X      the busiest EP rank's routed tokens over the mean (default 1.25)\n"
    "  --capacity-factor C    experts take at most C x their mean tokens and drop the rest (default: no limit)\n"
    "  --mbs N                micro-batch size in sequences (default 1)\n"
    "  --gbs N                global batch in sequences (default: about 4M tokens)\n"
    "  --seq N                sequence length (default: the model's)\n"
    "  --recompute none|selective|full   activation recomputation (default selective)\n"
    "  --recompute-layers N   with --recompute full: only N layers of each stage recompute (Megatron's\n"
    "                         --recompute-num-layers, block method); the others keep their activations\n"
    "  --recompute-modules L  with --recompute selective: also recompute these, a comma-separated list of\n"
    "                         layernorm, mla_up_proj, moe_act (Megatron's --recompute-modules)\n"
    "  --loss fused|fp32|fused-outplace   the loss kernel: one fused pass with the gradient in place (default,\n"
    "                         as sextant's trainer runs it), the frameworks' fp32 cross-entropy on materialised\n"
    "                         logits (PyTorch, Megatron unfused), or a fused kernel writing a new gradient\n"
    "                         buffer (flash-attn's cross-entropy, llm-foundry's default)\n"
    "  --logit-metrics N      N training metrics computed on each micro-batch's logits after its backward, each an\n"
    "                         fp32 cross-entropy pass (Composer's default train metrics: 2; default 0, at most 16)\n"
    "  --grad-sync overlap|after   DP gradient reduction and parameter gather beside the last backward and the\n"
    "                         first forward (default: Megatron, sextant's trainer), or after the pipeline drains\n"
    "                         (DeepSpeed's engine)\n"
    "  --grad-accum in-place|fp32-copy   micro-batch gradients added in place by the weight-gradient GEMMs\n"
    "                         (default: Megatron, sextant's trainer), or DeepSpeed's BF16 optimizer: added into an\n"
    "                         fp32 copy after each backward, the copy all-reduced (ZeRO 0 or 1)\n"
    "  --expert-gemm streams|grouped   a MoE layer's expert GEMMs: one cuBLAS GEMM per expert over a few streams\n"
    "                         (default: Transformer Engine's grouped linear in Megatron and NeMo, sextant's trainer),\n"
    "                         or one grouped kernel for all (DeepSeek's DeepGEMM, CUTLASS, torch._grouped_mm)\n"
    "  --expert-rows routed|even   how a MoE layer's rows fall on its experts: as a router deals them, each expert\n"
    "                         rounding its own up to whole tiles (default), or every expert the same (padded to a\n"
    "                         capacity)\n"
    "  --zero-waits microbatch|step   ZeRO-2/3: each micro-batch's first gather and last reduce-scatter waited for\n"
    "                         (default: FSDP, DeepSpeed), or only the step's first and last, the neighbouring\n"
    "                         micro-batch hiding the others (sextant's trainer; validate prices its runs so)\n"
    "  --tp-overlap none|backward   TP communication: all exposed (default, as sextant's trainer runs it), or\n"
    "                         Megatron's: the backward's TP gather and gradient reduction beside its GEMMs\n"
    "  --attention flash|unfused|flash1|flash1-triton|sextant   attention kernel (default flash where the GPU has it:\n"
    "                         sm80 and newer): flash the frameworks' FlashAttention-2/3 or cuDNN; flash1 FlashAttention-1\n"
    "                         and flash1-triton its Triton port, as frameworks ran them before mid-2023; sextant\n"
    "                         sextant-gpu's own kernel\n"
    "  --sp                   sequence parallelism\n"
    "  --zero 0|1|2|3         optimizer sharding (1 = Megatron's distributed optimizer)\n"
    "  --fp32-grads           accumulate gradients in fp32 (18 instead of 16 bytes/param)\n"
    "  --no-dropout           the model without dropout (no masks saved), as sextant-gpu trains it\n"
    "  --precision fp32|tf32|fp16|bf16|fp8 (default bf16 where the GPU has it)\n"
    "job:\n"
    "  --tokens N             training tokens, with K/M/B/T suffixes (default 20 x params)\n"
    "  --price USD            price of one GPU-hour (default: hwdb's cloud price)\n"
    "plan:\n"
    "  --gpu NAME|all|A,B     GPU types to compare\n"
    "  --gpus N|A-B           a GPU count, or every power of two from A to B (default 8-16384 with --days/--budget)\n"
    "  --days D --budget USD  a deadline and a budget: search GPU counts for the plans that meet them\n"
    "  --objective time|cost|gpus   rank by time-to-train (default), cost, or fewest GPUs\n"
    "  --top K                how many plans to print (default 5)\n"
    "  --strict               reject layouts above the TP ratio limit\n"
    "  --allow-tp-across-nodes   let a TP group leave the node\n"
    "  --emit megatron|deepspeed|torchtitan   the best layout that framework can run, as launch flags or config\n"
    "  --plot FILE.svg        draw the time-cost frontier with gnuplot\n"
    "output:\n"
    "  --format table|csv|json   (default table)\n"
    "  --ops                  also list every op of the first and last stage\n"
    "  --out FILE             write the report to FILE (atomically) instead of stdout\n"
    "  --help, --version\n";

static int fail(const char *fmt, ...) __attribute__((format(printf, 1, 2)));
static int fail(const char *fmt, ...)
{
    va_list ap;
    va_start(ap, fmt);
    fputs("sextant: ", stderr);
    vfprintf(stderr, fmt, ap);
    fputc('\n', stderr);
    va_end(ap);
    return 2;
}

static int parse_count(const char *flag, const char *text, int64_t max, int64_t *out)
{
    char err[ERR_MAX];
    return count_parse(flag, text, max, out, err, sizeof err) ? fail("%s", err) : 0;
}

/* models, hw and published take few flags: any other is refused by name, not ignored (the layout flags of
 * estimate and plan are refused the same way by refuse_other_commands_flags). */
static int foreign_flag(const char *command, const char *flag)
{
    static const struct { const char *command; const char *flags[8]; } own[] = {
        {"models", {"--models", "--format", "--out"}},
        {"hw", {"--hwdb", "--calibration", "--out"}},   /* hw prints one format */
        {"published", {"--runs", "--format", "--bands-out", "--explain", "--hwdb", "--models", "--calibration", "--out"}},
        {"fit-gemm", {"--calibration", "--out", "--gpu", "--hwdb", "--models"}},
    };
    if (!command || flag[0] != '-' || !strcmp(flag, "--help") || !strcmp(flag, "-h") || !strcmp(flag, "--version"))
        return 0;
    for (size_t c = 0; c < sizeof own / sizeof own[0]; c++) {
        if (strcmp(command, own[c].command)) continue;
        for (size_t f = 0; f < 8 && own[c].flags[f]; f++)
            if (!strcmp(flag, own[c].flags[f])) return 0;
        return 1;
    }
    return 0;
}

static int parse_args(int argc, char **argv, options *o)
{
    memset(o, 0, sizeof *o);
    layout_flags_init(&o->lay, NULL);
    int i = 1;
    if (i < argc && argv[i][0] != '-') o->command = argv[i++];
    for (; i < argc; i++) {
        const char *a = argv[i];
        const char *v = i + 1 < argc ? argv[i + 1] : NULL;
#define TAKE() (v ? (i++, v) : NULL)
        int rc = 0;
        for (size_t f = 0; f < COMMAND_FLAGS; f++)
            if (!strcmp(a, command_flags[f].flag)) o->command_flags_seen |= UINT64_C(1) << f;
        if (foreign_flag(o->command, a)) return fail("%s is not a flag of %s (sextant --help lists each command's)", a, o->command);
        if (a[0] != '-' && o->command && (!strcmp(o->command, "models") || !strcmp(o->command, "published")))
            return fail("unexpected argument '%s': %s takes no model", a, o->command);
        char err[ERR_MAX];
        int taken = a[0] == '-' ? layout_flag_parse(a, v, &o->lay, err, sizeof err) : 0;
        if (taken < 0) return fail("%s", err);
        if (taken) {
            i += taken - 1;   /* 2: the flag took its value */
            continue;
        }
        if (a[0] != '-') {
            if (o->model_name) return fail("unexpected argument '%s' (the model is already '%s')", a, o->model_name);
            o->model_name = a;
        } else if (!strcmp(a, "--help") || !strcmp(a, "-h")) {
            o->command = "help";
        } else if (!strcmp(a, "--version")) {
            o->command = "version";
        } else if (!strcmp(a, "--gpu")) { if (!(o->gpu_name = TAKE())) return fail("--gpu: missing value"); }
        else if (!strcmp(a, "--node")) { if (!(o->node_name = TAKE())) return fail("--node: missing value"); }
        else if (!strcmp(a, "--hwdb")) { if (!(o->hwdb_dir = TAKE())) return fail("--hwdb: missing value"); }
        else if (!strcmp(a, "--models")) { if (!(o->models_file = TAKE())) return fail("--models: missing value"); }
        else if (!strcmp(a, "--model-config")) { if (!(o->model_config = TAKE())) return fail("--model-config: missing value"); }
        else if (!strcmp(a, "--calibration")) { if (!(o->calibration = TAKE())) return fail("--calibration: missing value"); }
        else if (!strcmp(a, "--out")) { if (!(o->out_path = TAKE())) return fail("--out: missing value"); }
        else if (!strcmp(a, "--gpus")) {
            const char *t = TAKE();
            if (t && strchr(t, '-') && isdigit((unsigned char)t[0])) o->gpus_text = t;
            else rc = parse_count(a, t, 10000000, &o->gpus);
        }
        else if (!strcmp(a, "--emit")) { if (!(o->emit = TAKE())) return fail("--emit: missing value"); }
        else if (!strcmp(a, "--plot")) { if (!(o->plot = TAKE())) return fail("--plot: missing value"); }
        else if (!strcmp(a, "--bands-out")) { if (!(o->bands_out = TAKE())) return fail("--bands-out: missing value"); }
        else if (!strcmp(a, "--runs")) { if (!(o->runs = TAKE())) return fail("--runs: missing value"); }
        else if (!strcmp(a, "--explain")) { if (!(o->explain_case = TAKE())) return fail("--explain: missing value"); }
        else if (!strcmp(a, "--days") || !strcmp(a, "--budget")) {
            const char *t = TAKE();
            double value;
            if (!t || quantity_parse(t, &value) != 0 || value > 1e15) return fail("%s: '%s' is not a positive number", a,
                t ? t : "");
            if (!strcmp(a, "--days")) o->days = value; else o->budget = value;
        } else if (!strcmp(a, "--objective")) {
            const char *t = TAKE();
            if (t && !strcmp(t, "time")) o->objective = OBJECTIVE_TIME;
            else if (t && !strcmp(t, "cost")) o->objective = OBJECTIVE_COST;
            else if (t && !strcmp(t, "gpus")) o->objective = OBJECTIVE_GPUS;
            else return fail("--objective: '%s' is not one of time|cost|gpus", t ? t : "");
            o->have_objective = 1;
        } else if (!strcmp(a, "--top")) {
            int64_t k;
            rc = parse_count(a, TAKE(), PLAN_TOP_MAX, &k);
            o->top = (int)k;
        }
        else if (!strcmp(a, "--strict")) o->strict = 1;
        else if (!strcmp(a, "--allow-tp-across-nodes")) o->allow_tp_across_nodes = 1;
        else if (!strcmp(a, "--moe-imbalance") || !strcmp(a, "--capacity-factor")) {
            const char *t = TAKE();
            char *end;
            errno = 0;
            double value = t ? strtod(t, &end) : NAN;
            int imbalance = !strcmp(a, "--moe-imbalance");
            if (!t || end == t || *end || errno || !isfinite(value) || value > 100.0 || (imbalance ? value < 1.0 : value <= 0.0))
                return fail("%s: '%s' is not a number in %s", a, t ? t : "", imbalance ? "[1, 100]" : "(0, 100]");
            if (imbalance) o->moe_imbalance = value; else o->capacity_factor = value;
        }
        else if (!strcmp(a, "--tokens")) {
            const char *t = TAKE();
            if (!t || quantity_parse(t, &o->tokens) != 0 || o->tokens > 1e18)
                return fail("--tokens: '%s' is not a token count such as 2T or 300B (at most 1e18)", t ? t : "");
        } else if (!strcmp(a, "--price")) {
            const char *t = TAKE();
            char *end;
            errno = 0;
            o->price = t ? strtod(t, &end) : NAN;
            if (!t || end == t || *end || errno || !isfinite(o->price) || o->price <= 0 || o->price > 1e6)
                return fail("--price: '%s' is not a price in USD per GPU-hour", t ? t : "");
        } else if (!strcmp(a, "--format")) {
            const char *t = TAKE();
            if (t && !strcmp(t, "table")) o->format = FORMAT_TABLE;
            else if (t && !strcmp(t, "csv")) o->format = FORMAT_CSV;
            else if (t && !strcmp(t, "json")) o->format = FORMAT_JSON;
            else return fail("--format: '%s' is not one of table|csv|json", t ? t : "");
        } else if (!strcmp(a, "--no-dropout")) o->no_dropout = 1;
        else if (!strcmp(a, "--ops")) o->with_ops = 1;
        else if (!strcmp(a, "--spec")) o->spec_examples = 1;
        else return fail("unknown flag '%s' (sextant --help lists them)", a);
        if (rc) return rc;
#undef TAKE
    }
    return 0;
}

/* estimate, explain and plan: a flag meant for another command is refused by name, not ignored. */
static int refuse_other_commands_flags(const options *o)
{
    static const struct { unsigned bit; const char *name; } commands[] = {
        {FOR_ESTIMATE, "estimate"}, {FOR_EXPLAIN, "explain"}, {FOR_PLAN, "plan"}, {FOR_FIT_POWER, "fit-power"},
        {FOR_PUBLISHED, "published"}};
    unsigned me = 0;
    for (size_t c = 0; c < sizeof commands / sizeof commands[0]; c++)
        if (!strcmp(o->command, commands[c].name)) me = commands[c].bit;
    if (me != FOR_ESTIMATE && me != FOR_EXPLAIN && me != FOR_PLAN) return 0;
    for (size_t f = 0; f < COMMAND_FLAGS; f++) {
        if (!(o->command_flags_seen & (UINT64_C(1) << f)) || (command_flags[f].commands & me)) continue;
        char owners[64] = "";
        for (size_t c = 0; c < sizeof commands / sizeof commands[0]; c++)
            if (command_flags[f].commands & commands[c].bit)
                snprintf(owners + strlen(owners), sizeof owners - strlen(owners), "%s%s", owners[0] ? " and " : "",
                         commands[c].name);
        return fail("%s is a flag of %s, not of %s%s", command_flags[f].flag, owners, o->command,
                    me == FOR_PLAN && (command_flags[f].commands & FOR_ESTIMATE) ? " (plan searches the layout)" : "");
    }
    return 0;
}

static int load_zoo(const options *o, const char *root, model_zoo *zoo)
{
    char path[PATH_MAX + 32], err[ERR_MAX];
    if (o->models_file) snprintf(path, sizeof path, "%s", o->models_file);
    else snprintf(path, sizeof path, "%s/models/zoo.csv", root);
    if (model_zoo_load(path, zoo, err, sizeof err) != 0) return fail("%s", err);
    return 0;
}

/* Whether --gpu (default DEFAULT_GPU, "all", or a comma-separated list) names the GPU `name`. */
static int gpu_requested(const options *o, const char *name)
{
    const char *list = o->gpu_name ? o->gpu_name : DEFAULT_GPU;
    if (!strcasecmp(list, "all")) return 1;
    size_t n = strlen(name);
    for (const char *p = list;; p++) {
        size_t len = strcspn(p, ",");
        if (len == n && !strncasecmp(p, name, n)) return 1;
        p += len;
        if (!*p) return 0;
    }
}

/* Each GPU that --gpu names and that --calibration FILE does not takes its measured overlay,
 * DIR/measured/<gpu>.csv beside the hwdb it was loaded from, unless --calibration none. */
static int apply_measured_overlays(const options *o, const char *dir, hwdb *db)
{
    char path[PATH_MAX + 160], err[ERR_MAX];
    int declined = o->calibration && !strcmp(o->calibration, "none");
    for (int i = 0; i < db->ngpus; i++) {
        hw_gpu *g = &db->gpus[i];
        if (g->overlay_path[0] || !gpu_requested(o, g->name)) continue;
        if (!hwdb_measured_overlay_path(dir, g->name, path, sizeof path)) continue;
        if (declined) { g->overlay_declined = 1; continue; }
        if (hwdb_apply_overlay(db, path, err, sizeof err) != 0) return fail("%s", err);
        /* named as the user finds it (beside the hwdb they chose, or the shipped hwdb/), not as
         * the data-root search spelt it, in the reports and gpu.calibration alike */
        if (!o->hwdb_dir) {
            snprintf(g->overlay_path, sizeof g->overlay_path, "hwdb/measured/%s.csv", g->name);
            size_t plen = strlen(path);
            if (!strncmp(g->calibration, path, plen)) {
                char rest[sizeof g->calibration];
                snprintf(rest, sizeof rest, "%s", g->calibration + plen);
                snprintf(g->calibration, sizeof g->calibration, "%.90s%.400s", g->overlay_path, rest);
            }
        }
        g->overlay_by_default = 1;
    }
    return 0;
}

/* The hardware database, with --calibration FILE over it; with measured_by_default (estimate,
 * explain, plan), also each named GPU's measured overlay when there is one. */
static int load_hwdb(const options *o, const char *root, hwdb *db, int measured_by_default)
{
    char dir[PATH_MAX + 32], err[ERR_MAX];
    if (o->hwdb_dir) snprintf(dir, sizeof dir, "%s", o->hwdb_dir);
    else snprintf(dir, sizeof dir, "%s/hwdb", root);
    if (hwdb_load(dir, db, err, sizeof err) != 0) return fail("%s", err);
    int rc = 0;
    if (o->calibration && strcmp(o->calibration, "none") && hwdb_apply_overlay(db, o->calibration, err, sizeof err) != 0)
        rc = fail("%s", err);
    if (!rc && measured_by_default) rc = apply_measured_overlays(o, dir, db);
    if (rc) hwdb_free(db);
    return rc;
}

static int unknown_model(const model_zoo *zoo, const char *name)
{
    const char *names[256];
    int n = zoo->count < 256 ? zoo->count : 256;
    for (int i = 0; i < n; i++) names[i] = zoo->models[i].name;
    char close[512];
    closest_names(name, names, n, 3, close, sizeof close);
    return fail("unknown model '%s'; closest: %s (sextant models lists all)", name, close);
}

static int unknown_gpu(const hwdb *db, const char *name)
{
    const char *names[256];
    int n = db->ngpus < 256 ? db->ngpus : 256;
    for (int i = 0; i < n; i++) names[i] = db->gpus[i].name;
    char close[512];
    closest_names(name, names, n, 3, close, sizeof close);
    return fail("unknown GPU '%s'; closest: %s (sextant hw lists all)", name, close);
}

/* text to stdout, or to `path` whole (outfile_write: a temporary file renamed over a regular file or a new path) */
static int emit(const char *path, const char *text, size_t len)
{
    if (!path) {
        if (fwrite(text, 1, len, stdout) != len || fflush(stdout) != 0) return fail("stdout: write failed");
        return 0;
    }
    char err[ERR_MAX + PATH_MAX];
    if (outfile_write(path, text, len, err, sizeof err) != 0) return fail("--out: %s", err);
    return 0;
}

static void print_models(FILE *out, const model_zoo *zoo, format_t format)
{
    if (format == FORMAT_CSV)
        fprintf(out, "name,family,layers,hidden,heads,kv_heads,ffn,ffn_kind,vocab,seq,params,params_published,error_pct,active_params,"
                     "experts,top_k,moe_ffn,shared_experts,moe_layers,q_lora_rank,kv_lora_rank\n");
    else if (format == FORMAT_TABLE)
        fprintf(out, "%-14s %-8s %6s %6s %5s %4s %6s %-6s %7s %6s %12s %12s %7s %12s\n", "name", "family", "layers",
                "hidden", "heads", "kv", "ffn", "kind", "vocab", "seq", "params", "published", "error", "active");
    else
        fprintf(out, "[\n");
    for (int i = 0; i < zoo->count; i++) {
        const model_t *m = &zoo->models[i];
        double n = model_params_total(m), err = 100.0 * (n - m->params_published) / m->params_published;
        const char *kind = m->ffn_kind == FFN_SWIGLU ? "swiglu" : "gelu";
        if (format == FORMAT_CSV)
            fprintf(out, "%s,%s,%lld,%lld,%lld,%lld,%lld,%s,%lld,%lld,%.0f,%.0f,%.3f,%.0f,%lld,%lld,%lld,%lld,%lld,%lld,%lld\n",
                    m->name, m->family, (long long)m->layers, (long long)m->hidden, (long long)m->heads,
                    (long long)m->kv_heads, (long long)m->ffn, kind, (long long)m->vocab, (long long)m->seq, n,
                    m->params_published, err, model_params_active(m), (long long)m->experts, (long long)m->top_k,
                    (long long)model_expert_ffn(m), (long long)m->shared_experts, (long long)model_moe_layers(m),
                    (long long)m->q_lora_rank, (long long)m->kv_lora_rank);
        else if (format == FORMAT_TABLE)
            fprintf(out, "%-14s %-8s %6lld %6lld %5lld %4lld %6lld %-6s %7lld %6lld %11.3fB %11.3fB %+6.2f%% %11.3fB\n",
                    m->name, m->family, (long long)m->layers, (long long)m->hidden, (long long)m->heads,
                    (long long)m->kv_heads, (long long)m->ffn, kind, (long long)m->vocab, (long long)m->seq, n / 1e9,
                    m->params_published / 1e9, err, model_params_active(m) / 1e9);
        else
            fprintf(out, "  {\"name\": \"%s\", \"family\": \"%s\", \"layers\": %lld, \"hidden\": %lld, \"heads\": %lld, "
                         "\"kv_heads\": %lld, \"ffn\": %lld, \"ffn_kind\": \"%s\", \"vocab\": %lld, \"seq\": %lld, "
                         "\"params\": %.0f, \"params_published\": %.0f, \"active_params\": %.0f, \"experts\": %lld, "
                         "\"top_k\": %lld, \"moe_ffn\": %lld, \"shared_experts\": %lld, \"moe_layers\": %lld, "
                         "\"q_lora_rank\": %lld, \"kv_lora_rank\": %lld}%s\n",
                    m->name, m->family, (long long)m->layers, (long long)m->hidden, (long long)m->heads,
                    (long long)m->kv_heads, (long long)m->ffn, kind, (long long)m->vocab, (long long)m->seq, n,
                    m->params_published, model_params_active(m), (long long)m->experts, (long long)m->top_k,
                    (long long)model_expert_ffn(m), (long long)m->shared_experts, (long long)model_moe_layers(m),
                    (long long)m->q_lora_rank, (long long)m->kv_lora_rank, i + 1 < zoo->count ? "," : "");
    }
    if (format == FORMAT_JSON) fprintf(out, "]\n");
}

static void print_gpu(FILE *out, const hw_gpu *g, const hw_node *node)
{
    fprintf(out, "%s: %s (%s)\n", g->name, g->full_name, g->arch);
    fprintf(out, "  memory                 %.1f GiB, %.0f GB/s\n", g->memory_bytes / 1073741824.0, g->hbm_bytes_per_s / 1e9);
    fprintf(out, "  dense peak TFLOP/s     fp32 %.1f, tf32 %.1f, fp16 %.1f, bf16 %.1f, fp8 %.1f (0 = not supported)\n",
            g->peak_flops[PREC_FP32] / 1e12, g->peak_flops[PREC_TF32] / 1e12, g->peak_flops[PREC_FP16] / 1e12,
            g->peak_flops[PREC_BF16] / 1e12, g->peak_flops[PREC_FP8] / 1e12);
    fprintf(out, "  NVLink                 %.0f GB/s per direction\n", g->nvlink_bytes_per_s_per_dir / 1e9);
    fprintf(out, "  PCIe                   gen %d x%d\n", g->pcie_gen, g->pcie_lanes);
    fprintf(out, "  TDP                    %.0f W\n", g->tdp_w);
    fprintf(out, "  price                  $%.0f list, $%.2f per GPU-hour in the cloud\n", g->list_price_usd,
            g->cloud_usd_per_gpu_hour);
    fprintf(out, "  achievable fraction    GEMM %.2f, memory-bound %.2f (%s)\n", g->gemm_efficiency,
            g->membound_efficiency, g->calibration[0] ? g->calibration : "hwdb defaults, not calibrated");
    if (g->optimizer_membound_efficiency > 0)
        fprintf(out, "  optimizer step         %.3f of the HBM (AdamW, calibrated; other memory-bound ops at the copy's)\n",
                g->optimizer_membound_efficiency);
    if (g->flash_fwd_efficiency > 0 || g->flash_bwd_efficiency > 0)
        fprintf(out, "  fused attention        forward %.3f, backward %.3f of the 16-bit peak (frameworks' kernels, prior)\n",
                g->flash_fwd_efficiency, g->flash_bwd_efficiency);
    if (g->flash1_relative_speed > 0 || g->flash1_triton_relative_speed > 0)
        fprintf(out, "  first generation       FlashAttention-1 %.3g, its Triton port %.3g of the frameworks' speed (prior)\n",
                first_generation_speed(g, ATTENTION_FLASH1), first_generation_speed(g, ATTENTION_FLASH1_TRITON));
    if (g->attention_fwd_efficiency > 0 || g->attention_bwd_efficiency > 0)
        fprintf(out, "  sextant's attention    forward %.3f, backward %.3f of the 16-bit peak (its own kernel, calibrated)\n",
                g->attention_fwd_efficiency, g->attention_bwd_efficiency);
    if (g->gemm_times || g->attention_times[0] || g->attention_times[1] || g->unfused_attention_times[0] ||
        g->unfused_attention_times[1] || g->membound_overhead_s > 0)
        fprintf(out, "  measured shapes        %d GEMMs, %d + %d fused and %d + %d unfused attention (forward + "
                     "backward); memory-bound kernels +%.2f us each (calibrated)\n", g->gemm_times, g->attention_times[0],
                g->attention_times[1], g->unfused_attention_times[0], g->unfused_attention_times[1],
                g->membound_overhead_s * 1e6);
    if (g->gemm_tile_flops > 0 && g->sm_count > 0)
        fprintf(out, "  GEMM model             %.1f TFLOP/s over full 128 x 128 tiles on %.0f SMs, %.3f us per tile and "
                     "wave, %.2f us per GEMM, fused bias gradient x %.3f (sextant fit-gemm)\n",
                g->gemm_tile_flops / 1e12, g->sm_count, g->gemm_tile_s * 1e6, g->gemm_fixed_s * 1e6,
                g->gemm_bias_grad_factor > 0 ? g->gemm_bias_grad_factor : 1.0);
    /* the tile model's term: on the defaults' curve a weight gradient pays none */
    if (g->gemm_tile_flops > 0 && g->sm_count > 0 &&
        (g->gemm_accumulate_read_factor > 0 || g->gemm_accumulate_write_factor > 0))
        fprintf(out, "  accumulating gradient  a weight gradient adding into its gradient: its read x %.3f, an fp32 "
                     "gradient's extra store x %.3f, at HBM speed, beside the GEMM model\n",
                g->gemm_accumulate_read_factor, g->gemm_accumulate_write_factor);
    /* "Overlap is not free": what the estimate charges compute and collectives that run side by side */
    if (g->overlap_comm_slowdown > 0 || g->overlap_compute_slowdown_allgather > 0 ||
        g->overlap_compute_slowdown_reducescatter > 0 || g->overlap_compute_slowdown_allreduce > 0)
        fprintf(out, "  beside a collective    a GEMM %+.1f%% (all-gather), %+.1f%% (reduce-scatter), %+.1f%% (all-reduce); "
                     "the collective beside a GEMM %+.1f%% (calibrate --comm's medians, or hwdb/priors.csv's)\n",
                100.0 * g->overlap_compute_slowdown_allgather, 100.0 * g->overlap_compute_slowdown_reducescatter,
                100.0 * g->overlap_compute_slowdown_allreduce, 100.0 * g->overlap_comm_slowdown);
    if (g->overlap_compute_slowdown_experts > 0)
        fprintf(out, "  experts beside one     %+.1f%%: expert GEMMs launched one an expert of fewer tiles than SMs (calibrate "
                     "--comm's experts)\n", 100.0 * g->overlap_compute_slowdown_experts);
    fprintf(out, "  source                 %s\n", g->source);
    if (node)
        fprintf(out, "  node %s: %lld GPUs, %s %.0f GB/s per direction per GPU, %lld x %.0f Gb/s NICs (%.1f GB/s per GPU)\n"
                     "    source: %s\n",
                node->name, (long long)node->gpus_per_node, node->intra_link == LINK_NVLINK ? "NVLink" : "PCIe",
                node->intra_bytes_per_s_per_dir / 1e9, (long long)node->nics_per_node, node->nic_bits_per_s / 1e9,
                hw_node_inter_bytes_per_s_per_gpu(node) / 1e9, node->source);
    /* calibrate --comm's fits and measured times, per number of ranks: what a group of that size inside the node
     * is priced with (docs/model.md, "Communication") */
    static const char *const coll[4] = {"all-reduce", "reduce-scatter", "all-gather", "send/recv"};
    for (int i = 0; node && i < node->intra_fit_count; i++) {
        const hw_intra_fit *f = &node->intra_fits[i];
        const double bw[4] = {f->ar_bytes_per_s, f->rs_bytes_per_s, f->ag_bytes_per_s, f->sr_bytes_per_s};
        const double lat[4] = {f->ar_latency_s, f->rs_latency_s, f->ag_latency_s, f->sr_latency_s};
        fprintf(out, "    measured over %lld ranks:", (long long)f->ranks);
        for (int c = 0; c < 4; c++) {
            if (bw[c] <= 0.0 && f->sizes[c] < 2) continue;
            fprintf(out, " %s", coll[c]);
            if (bw[c] > 0.0) fprintf(out, " %.0f GB/s %.1f us", bw[c] / 1e9, lat[c] * 1e6);
            if (f->sizes[c] >= 2)
                fprintf(out, " (%d times, %.0f KiB-%.0f MiB)", f->sizes[c], f->size_bytes[c][0] / 1024.0,
                        f->size_bytes[c][f->sizes[c] - 1] / 1048576.0);
            fprintf(out, c < 3 ? ";" : "");
        }
        fprintf(out, "\n");
    }
}

static int cmd_hw(const options *o, const hwdb *db, FILE *out)
{
    if (o->model_name) {
        const hw_gpu *g = hwdb_find_gpu(db, o->model_name);
        if (g) { print_gpu(out, g, hwdb_find_node(db, g->node)); return 0; }
        const hw_node *n = hwdb_find_node(db, o->model_name);
        if (!n) return unknown_gpu(db, o->model_name);
        const hw_gpu *ng = hwdb_find_gpu(db, n->gpu);
        if (ng) print_gpu(out, ng, n);
        else fprintf(out, "node %s (GPU %s)\n  source: %s\n", n->name, n->gpu, n->source);
        return 0;
    }
    fprintf(out, "%-16s %8s %8s %10s %10s %10s %8s %9s  %s\n", "gpu", "mem GiB", "HBM GB/s", "bf16 TF/s", "fp8 TF/s",
            "NVLink/dir", "$/hour", "list $", "node");
    for (int i = 0; i < db->ngpus; i++) {
        const hw_gpu *g = &db->gpus[i];
        fprintf(out, "%-16s %8.0f %8.0f %10.1f %10.1f %10.0f %8.2f %9.0f  %s\n", g->name, g->memory_bytes / 1073741824.0,
                g->hbm_bytes_per_s / 1e9, g->peak_flops[PREC_BF16] / 1e12, g->peak_flops[PREC_FP8] / 1e12,
                g->nvlink_bytes_per_s_per_dir / 1e9, g->cloud_usd_per_gpu_hour, g->list_price_usd, g->node);
    }
    fprintf(out, "\n%-20s %-16s %5s %-6s %10s %14s\n", "node", "gpu", "GPUs", "link", "GB/s/dir", "NICs");
    for (int i = 0; i < db->nnodes; i++) {
        const hw_node *n = &db->nodes[i];
        fprintf(out, "%-20s %-16s %5lld %-6s %10.0f %6lld x %4.0f Gb/s\n", n->name, n->gpu, (long long)n->gpus_per_node,
                n->intra_link == LINK_NVLINK ? "nvlink" : "pcie", n->intra_bytes_per_s_per_dir / 1e9,
                (long long)n->nics_per_node, n->nic_bits_per_s / 1e9);
    }
    return 0;
}

/* Fills the layout from the flags and the defaults, checking what only the
 * command line can get wrong. */
static int make_layout(const options *o, const model_t *m, const hw_gpu *g, const hw_node *node, layout_t *l, job_t *job)
{
    const layout_t *f = &o->lay.l;   /* the flags as given, 0 where a count was not */
    const unsigned given = o->lay.given;
    *l = *f;
    l->gpus = 0;
    if (o->gpus_text)
        return fail("--gpus %s: a range is for plan; estimate takes one GPU count", o->gpus_text);
    l->tp = f->tp ? f->tp : 1;
    l->pp = f->pp ? f->pp : 1;
    l->vpp = f->vpp ? f->vpp : 1;
    l->cp = f->cp ? f->cp : 1;
    l->ep = f->ep ? f->ep : 1;
    l->mbs = f->mbs ? f->mbs : 1;
    l->seq = f->seq ? f->seq : m->seq;
    l->attention = given & LAYOUT_FLAG_ATTENTION ? f->attention : default_attention(g);
    l->recompute = given & LAYOUT_FLAG_RECOMPUTE ? f->recompute : RECOMPUTE_SELECTIVE;
    l->gpus_per_node = f->gpus_per_node ? f->gpus_per_node : node->gpus_per_node;
    if (!(given & LAYOUT_FLAG_PRECISION)) l->precision = g->peak_flops[PREC_BF16] > 0 ? PREC_BF16 : PREC_FP16;
    if (g->peak_flops[l->precision] <= 0)
        return fail("--precision %s: %s has no %s tensor rate", precision_name(l->precision), g->name,
                    precision_name(l->precision));
    /* context parallel ranks split the sequence, not the model, but take GPUs like TP and PP */
    if (l->tp * l->pp > INT64_MAX / l->cp) return fail("--tp x --cp x --pp: more than 10 million GPUs");
    int64_t model_parallel = l->tp * l->pp * l->cp;
    char cp_text[48] = "";
    if (l->cp > 1) snprintf(cp_text, sizeof cp_text, " x --cp %lld", (long long)l->cp);
    if (o->gpus) {
        l->gpus = o->gpus;
        if (l->gpus % model_parallel != 0)
            return fail("--gpus %lld is not divisible by --tp %lld%s x --pp %lld", (long long)l->gpus, (long long)l->tp,
                        cp_text, (long long)l->pp);
        l->dp = l->gpus / model_parallel;
        if (f->dp && f->dp != l->dp)
            return fail("--dp %lld: --gpus %lld / (--tp %lld%s x --pp %lld) is %lld", (long long)f->dp, (long long)l->gpus,
                        (long long)l->tp, cp_text, (long long)l->pp, (long long)l->dp);
    } else {
        l->dp = f->dp ? f->dp : 1;
        if (model_parallel > INT64_MAX / l->dp || model_parallel * l->dp > 10000000)
            return fail("--tp x --cp x --pp x --dp: more than 10 million GPUs");
        l->gpus = model_parallel * l->dp;
    }
    if (l->seq > 10000000 || (double)l->mbs * (double)l->seq > 1e10)
        return fail("--mbs %lld x --seq %lld: more than 1e10 tokens per micro-batch", (long long)l->mbs, (long long)l->seq);
    if (f->gbs) l->gbs = f->gbs;
    else {
        int64_t unit = l->mbs * l->dp;
        int64_t wanted = (int64_t)ceil(DEFAULT_BATCH_TOKENS / (double)l->seq);
        l->gbs = ((wanted + unit - 1) / unit) * unit;
    }
    if ((double)l->gbs * (double)l->seq > 1e13)
        return fail("--gbs %lld x --seq %lld: more than 1e13 tokens per step", (long long)l->gbs, (long long)l->seq);
    job->tokens = o->tokens > 0 ? o->tokens : chinchilla_tokens(model_params_active(m));
    if (job->tokens < (double)l->gbs * (double)l->seq)
        return fail("--tokens %.4g is less than one step's %.4g tokens (--gbs %lld x --seq %lld)%s", job->tokens,
                    (double)l->gbs * (double)l->seq, (long long)l->gbs, (long long)l->seq,
                    o->tokens > 0 ? "" : "; the default is 20 tokens per parameter");
    job->price_usd_per_gpu_hour = o->price > 0 ? o->price : g->cloud_usd_per_gpu_hour;
    return 0;
}

/* --no-dropout, --moe-imbalance, --capacity-factor: a copy of the model so trained in *copy, else the model itself */
static const model_t *model_as_asked(const options *o, const model_t *m, model_t *copy)
{
    if (!o->no_dropout && o->moe_imbalance <= 0.0 && o->capacity_factor <= 0.0) return m;
    *copy = *m;
    if (o->no_dropout) copy->dropout = 0;
    if (o->moe_imbalance > 0.0) copy->moe_imbalance = o->moe_imbalance;
    if (o->capacity_factor > 0.0) copy->capacity_factor = o->capacity_factor;
    return copy;
}

/* A note (stderr, not an error) naming the GPUs whose --calibration rows this run does not use: rows for another
 * GPU are applied to that GPU's figures, which is harmless but easy to mistake for calibrating the one in use. */
static void note_overlay_other_gpus(const options *o, const hw_gpu *const *used, int nused)
{
    if (!o->calibration) return;
    char names[2048], err[ERR_MAX], others[2048] = "", in_use[512] = "";
    if (hwdb_overlay_gpus(o->calibration, names, sizeof names, err, sizeof err) <= 0) return;
    int nothers = 0;
    for (char *save, *tok = strtok_r(names, ",", &save); tok; tok = strtok_r(NULL, ",", &save)) {
        tok += strspn(tok, " ");
        int is_used = 0;
        for (int i = 0; i < nused && !is_used; i++) is_used = !strcasecmp(tok, used[i]->name);
        if (is_used) continue;
        size_t n = strlen(others);
        snprintf(others + n, sizeof others - n, "%s%s", nothers++ ? ", " : "", tok);
    }
    if (!nothers) return;
    for (int i = 0; i < nused; i++) {
        size_t n = strlen(in_use);
        snprintf(in_use + n, sizeof in_use - n, "%s%s", i ? "," : "", used[i]->name);
    }
    fprintf(stderr, "sextant: note: --calibration %s also has rows for %s, which this run does not use (--gpu %s)\n",
            o->calibration, others, in_use);
}

static int cmd_estimate(const options *o, const char *root, FILE *out)
{
    hwdb db;
    model_zoo zoo = {0};
    model_t imported;
    const model_t *m = NULL;
    char err[ERR_MAX];
    int rc = load_hwdb(o, root, &db, 1);
    if (rc) return rc;
    if (o->model_config) {
        if (o->model_name) { rc = fail("give a model name or --model-config, not both"); goto done; }
        if (model_from_hf_config(o->model_config, &imported, err, sizeof err) != 0) { rc = fail("%s", err); goto done; }
        m = &imported;
    } else {
        if ((rc = load_zoo(o, root, &zoo))) goto done;
        const char *name = o->model_name ? o->model_name : DEFAULT_MODEL;
        m = model_zoo_find(&zoo, name);
        if (!m) { rc = unknown_model(&zoo, name); goto done; }
    }
    model_t without_dropout;
    m = model_as_asked(o, m, &without_dropout);
    const char *gpu_name = o->gpu_name ? o->gpu_name : DEFAULT_GPU;
    if (strchr(gpu_name, ',') || !strcasecmp(gpu_name, "all")) {
        rc = fail("--gpu %s: %s takes one GPU type; plan compares several", gpu_name, o->command);
        goto done;
    }
    const hw_gpu *g = hwdb_find_gpu(&db, gpu_name);
    if (!g) { rc = unknown_gpu(&db, gpu_name); goto done; }
    const hw_node *node = hwdb_find_node(&db, o->node_name ? o->node_name : g->node);
    if (!node) { rc = fail("--node: unknown node '%s' (sextant hw lists them)", o->node_name); goto done; }
    layout_t l;
    job_t job;
    if ((rc = make_layout(o, m, g, node, &l, &job))) goto done;
    estimate_t *e = malloc(sizeof *e);
    if (!e) { rc = fail("out of memory"); goto done; }
    if (estimate_layout(m, g, node, &l, &job, e, err, sizeof err) != 0) {
        free(e);
        rc = fail("%s", err);
        goto done;
    }
    if (!strcmp(o->command, "explain")) report_explain(out, e);
    else report_estimate(out, e, o->format, o->with_ops);
    free(e);
    note_overlay_other_gpus(o, &g, 1);
done:
    model_zoo_free(&zoo);
    hwdb_free(&db);
    return rc;
}

/* The hwdb, the zoo and --gpu's row (the default GPU's when absent), as the fit commands need them; on failure
 * nothing is left loaded. */
static int load_fit_inputs(const options *o, const char *root, hwdb *db, model_zoo *zoo, const hw_gpu **g)
{
    int rc = load_hwdb(o, root, db, 0);
    if (rc) return rc;
    if ((rc = load_zoo(o, root, zoo)) == 0) {
        const char *gpu_name = o->gpu_name ? o->gpu_name : DEFAULT_GPU;
        if ((*g = hwdb_find_gpu(db, gpu_name))) return 0;
        rc = unknown_gpu(db, gpu_name);
    }
    model_zoo_free(zoo);
    hwdb_free(db);
    return rc;
}

/* fit-power: the power model's exponent and attention energy fitted to validate's measured steps. */
static int cmd_fit_power(const options *o, const char *root, FILE *out)
{
    if (!o->calibration || !strcmp(o->calibration, "none"))
        return fail("fit-power: --calibration OVERLAY (from sextant calibrate, with its power model) is required");
    if (!o->runs) return fail("fit-power: --runs A.csv,B.csv,... (validate --csv files) is required");
    if (!o->out_path) return fail("fit-power: --out FILE (the fitted overlay) is required");
    hwdb db;
    model_zoo zoo = {0};
    const hw_gpu *g;
    char err[ERR_MAX];
    power_fit_run *runs = NULL;
    power_fit_result *fit = NULL;
    int rc = load_fit_inputs(o, root, &db, &zoo, &g);
    if (rc) return rc;
    const hw_node *node = hwdb_find_node(&db, g->node);
    runs = calloc(POWER_FIT_RUNS_MAX, sizeof *runs);
    fit = calloc(1, sizeof *fit);
    if (!runs || !fit) { rc = fail("out of memory"); goto done; }
    int nruns = 0;
    char list[8192];
    if (strlen(o->runs) >= sizeof list) { rc = fail("--runs: longer than %zu characters", sizeof list - 1); goto done; }
    strcpy(list, o->runs);
    for (char *save = NULL, *path = strtok_r(list, ",", &save); path; path = strtok_r(NULL, ",", &save)) {
        if (nruns == POWER_FIT_RUNS_MAX) { rc = fail("--runs: more than %d files", POWER_FIT_RUNS_MAX); goto done; }
        if (power_fit_read_run(path, &zoo, g, node, &runs[nruns], err, sizeof err) != 0) { rc = fail("%s", err); goto done; }
        nruns++;
    }
    if (power_fit_steps(g, node, runs, nruns, fit, err, sizeof err) != 0) { rc = fail("%s", err); goto done; }
    static double held_out_s[POWER_FIT_RUNS_MAX];
    int models;
    if (power_fit_leave_one_model_out(g, node, runs, nruns, held_out_s, &models, err, sizeof err) != 0) {
        rc = fail("%s", err);
        goto done;
    }
    fprintf(out, "sextant fit-power: %d validate runs on %s, overlay %s\n", nruns, g->name, o->calibration);
    power_fit_report(out, g, runs, nruns, fit, models ? held_out_s : NULL, models);
    if (power_fit_write_overlay(o->calibration, o->out_path, g, "sextant fit-power", runs, nruns, fit, err, sizeof err) != 0) {
        rc = fail("%s", err);
        goto done;
    }
    fprintf(out, "overlay written to %s\n", o->out_path);
done:
    free(runs);
    free(fit);
    model_zoo_free(&zoo);
    hwdb_free(&db);
    return rc;
}

/* fit-gemm: the GEMM time model's three parameters fitted to the overlay's gemm_us rows, judged by leaving
 * each model's shapes out in turn, and checked against the published H100 GEMM rows. */
static int cmd_fit_gemm(const options *o, const char *root, FILE *out)
{
    if (!o->calibration || !strcmp(o->calibration, "none"))
        return fail("fit-gemm: --calibration OVERLAY (from sextant calibrate, with its gemm_us rows) is required");
    if (!o->out_path) return fail("fit-gemm: --out FILE (the fitted overlay) is required");
    hwdb db;
    model_zoo zoo = {0};
    const hw_gpu *g;
    char err[ERR_MAX];
    int rc = load_fit_inputs(o, root, &db, &zoo, &g);
    if (rc) return rc;
    char published[PATH_MAX + 64];
    snprintf(published, sizeof published, "%s/data/published/gemm.csv", root);
    FILE *probe = fopen(published, "r");
    if (probe) fclose(probe);
    fprintf(out, "sextant fit-gemm: ");
    if (gemm_fit_overlay(o->calibration, o->out_path, g, &zoo, probe ? published : NULL, out, err, sizeof err) != 0) {
        rc = fail("fit-gemm: %s", err);
        goto done;
    }
    fprintf(out, "overlay written to %s\n", o->out_path);
done:
    model_zoo_free(&zoo);
    hwdb_free(&db);
    return rc;
}

/* Powers of two from A to B, for --gpus A-B. */
static int parse_gpu_range(const char *text, plan_request *req)
{
    char *end;
    errno = 0;
    long long a = strtoll(text, &end, 10);
    if (end == text || *end != '-') return fail("--gpus: '%s' is neither a count nor a range A-B", text);
    const char *second = end + 1;
    long long b = strtoll(second, &end, 10);
    if (end == second || *end || errno || a < 1 || b < a || b > 10000000)
        return fail("--gpus: '%s' is not a range A-B with 1 <= A <= B <= 10000000", text);
    req->ncounts = 0;
    for (long long n = 1; n <= b && req->ncounts < PLAN_COUNTS_MAX; n *= 2)
        if (n >= a) req->gpu_counts[req->ncounts++] = n;
    if (req->ncounts == 0) return fail("--gpus: no power of two lies in %s", text);
    return 0;
}

static int64_t power_of_two_at_least(double x)
{
    int64_t p = 1;
    while ((double)p < x) p *= 2;
    return p;
}

/* the frontier as an SVG: data inline (a gnuplot datablock), names quoted by gnuplot's rules, the path never in the script */
static int plot_frontier(const options *o, const plan_request *req, const plan_result *res)
{
    char *script = NULL;
    size_t len = 0;
    FILE *g = open_memstream(&script, &len);
    if (!g) return fail("out of memory");
    for (int t = 0; t < req->ngpu_types; t++) {
        fprintf(g, "$frontier%d << EOD\n", t);
        for (int i = 0; i < res->nfrontier; i++)
            if (res->frontier[i].gpu_type == t)
                fprintf(g, "%g %g %lld\n", res->frontier[i].time_to_train_s / 86400.0, res->frontier[i].cost_usd,
                        (long long)res->frontier[i].layout.gpus);
        fprintf(g, "EOD\n");
    }
    fprintf(g, "set terminal svg size 900,600 noenhanced\nset logscale xy\nset xlabel 'days to train'\n"
               "set ylabel 'cost (USD)'\nset title ");
    char title[512];
    snprintf(title, sizeof title, "sextant: time-cost frontier for %s", req->model->name);
    gnuplot_quote(g, title);
    fprintf(g, "\nset key outside\nplot ");
    for (int t = 0; t < req->ngpu_types; t++) {
        fprintf(g, "%s$frontier%d using 1:2 with linespoints title ", t ? ", " : "", t);
        gnuplot_quote(g, req->gpu[t]->name);
    }
    fprintf(g, "\n");
    if (fclose(g) != 0) { free(script); return fail("out of memory"); }
    char err[ERR_MAX + PATH_MAX];
    int rc = gnuplot_render(script, o->plot, err, sizeof err);
    free(script);
    if (rc == 2) {
        fprintf(stderr, "sextant: --plot: %s; no plot written (the frontier is also in --format csv)\n", err);
        return 0;
    }
    return rc ? fail("--plot: %s", err) : 0;
}

/* --emit: the same search again, limited to the layouts the framework can run; its winner,
 * against the overall winner in `overall`. */
static int emit_for_framework(const options *o, const plan_request *req, const plan_result *overall, FILE *out)
{
    char err[ERR_MAX];
    plan_request *limited = malloc(sizeof *limited);
    plan_result *res = malloc(sizeof *res);
    int rc = 0;
    if (!limited || !res) rc = fail("out of memory");
    if (!rc) {
        *limited = *req;
        limited->framework = o->emit;
        /* torchtitan runs a MoE layer's experts as one grouped GEMM (torch._grouped_mm): priced so unless asked */
        if (!strcmp(o->emit, "torchtitan") && !(o->lay.given & LAYOUT_FLAG_EXPERT_GEMM)) limited->expert_gemm = EXPERT_GEMM_GROUPED;
        if (plan_search(limited, res, isatty(2), err, sizeof err) != 0) rc = fail("%s", err);
        else if (res->ntop == 0)
            rc = fail("--emit %s: no layout meets the request among those %s can run", o->emit, o->emit);
        else if (emit_plan(out, req, &res->top[0], overall->ntop ? &overall->top[0] : NULL, o->emit, err, sizeof err) != 0)
            rc = fail("%s", err);
    }
    free(limited);
    free(res);
    return rc;
}

static int cmd_plan(const options *o, const char *root, FILE *out)
{
    hwdb db;
    model_zoo zoo = {0};
    model_t imported;
    char err[ERR_MAX];
    plan_request *req = calloc(1, sizeof *req);
    plan_result *res = calloc(1, sizeof *res);
    int rc = (!req || !res) ? fail("out of memory") : load_hwdb(o, root, &db, 1);
    if (rc) { free(req); free(res); return rc; }
    if (o->model_config) {
        if (o->model_name) { rc = fail("give a model name or --model-config, not both"); goto done; }
        if (model_from_hf_config(o->model_config, &imported, err, sizeof err) != 0) { rc = fail("%s", err); goto done; }
        req->model = &imported;
    } else {
        if ((rc = load_zoo(o, root, &zoo))) goto done;
        const char *name = o->model_name ? o->model_name : DEFAULT_MODEL;
        req->model = model_zoo_find(&zoo, name);
        if (!req->model) { rc = unknown_model(&zoo, name); goto done; }
    }
    model_t without_dropout;
    req->model = model_as_asked(o, req->model, &without_dropout);
    const char *gpu_list = o->gpu_name ? o->gpu_name : DEFAULT_GPU;
    if (!strcasecmp(gpu_list, "all")) {
        for (int i = 0; i < db.ngpus && i < PLAN_GPU_TYPES_MAX; i++) req->gpu[req->ngpu_types++] = &db.gpus[i];
    } else {
        char names[1024];
        snprintf(names, sizeof names, "%s", gpu_list);
        for (char *save, *tok = strtok_r(names, ",", &save); tok; tok = strtok_r(NULL, ",", &save)) {
            const hw_gpu *g = hwdb_find_gpu(&db, tok);
            if (!g) { rc = unknown_gpu(&db, tok); goto done; }
            for (int i = 0; i < req->ngpu_types; i++)
                if (req->gpu[i] == g) { rc = fail("--gpu %s: %s is listed twice", gpu_list, g->name); goto done; }
            if (req->ngpu_types < PLAN_GPU_TYPES_MAX) req->gpu[req->ngpu_types++] = g;
        }
    }
    /* the published runs' error bands, when the database has them (`make published` writes them) */
    static uncertainty_bands bands;
    char bands_path[sizeof db.dir + 32];
    snprintf(bands_path, sizeof bands_path, "%s/uncertainty.csv", db.dir);
    if (access(bands_path, R_OK) == 0) {
        if (uncertainty_read(bands_path, &bands, err, sizeof err) != 0) { rc = fail("%s", err); goto done; }
        req->bands = &bands;
    }
    req->attention = o->lay.given & LAYOUT_FLAG_ATTENTION ? o->lay.l.attention : ATTENTION_COUNT;
    req->loss = o->lay.l.loss;
    req->logit_metrics = o->lay.l.logit_metrics;
    req->tp_overlap = o->lay.l.tp_overlap;
    req->grad_sync = o->lay.l.grad_sync;
    req->grad_accum = o->lay.l.grad_accum;
    req->expert_gemm = o->lay.l.expert_gemm;
    req->expert_rows = o->lay.l.expert_rows;
    req->zero_waits = o->lay.l.zero_waits;
    for (int i = 0; i < req->ngpu_types; i++) {
        req->node[i] = hwdb_find_node(&db, o->node_name ? o->node_name : req->gpu[i]->node);
        if (!req->node[i]) { rc = fail("--node: unknown node '%s'", o->node_name); goto done; }
        if (attention_is_fused(req->attention) && !gpu_has_fused_attention(req->gpu[i])) {
            rc = fail("--attention %s: %s is %s, and FlashAttention needs sm80 or newer (ampere, ada, hopper, "
                      "blackwell); leave --attention out for each GPU's own default", attention_name(req->attention), req->gpu[i]->name, req->gpu[i]->arch);
            goto done;
        }
    }
    if (o->gpus_text) {
        if ((rc = parse_gpu_range(o->gpus_text, req))) goto done;
    } else if (o->gpus) {
        req->gpu_counts[0] = o->gpus;
        req->ncounts = 1;
    } else if (o->days > 0 || o->budget > 0) {
        parse_gpu_range("8-16384", req);
    } else {
        rc = fail("plan: give --gpus N (or A-B), or --days/--budget to search GPU counts");
        goto done;
    }
    req->seq = o->lay.l.seq ? o->lay.l.seq : req->model->seq;
    if (o->lay.l.gbs) req->gbs = o->lay.l.gbs;
    req->gbs_min = power_of_two_at_least(DEFAULT_BATCH_TOKENS / 4.0 / (double)req->seq);
    req->gbs_max = power_of_two_at_least(DEFAULT_BATCH_TOKENS / (double)req->seq);
    req->tokens = o->tokens > 0 ? o->tokens : chinchilla_tokens(model_params_active(req->model));
    double smallest_step = (double)(req->gbs ? req->gbs : req->gbs_min) * (double)req->seq;
    if (req->tokens < smallest_step) {
        rc = fail("--tokens %.4g is less than one step's %.4g tokens (global batch %lld x --seq %lld)%s", req->tokens,
                  smallest_step, (long long)(req->gbs ? req->gbs : req->gbs_min), (long long)req->seq,
                  o->tokens > 0 ? "" : "; the default is 20 tokens per parameter");
        goto done;
    }
    req->price = o->price;
    req->max_days = o->days;
    req->max_budget = o->budget;
    req->objective = o->have_objective ? o->objective : o->days > 0 ? OBJECTIVE_COST : OBJECTIVE_TIME;
    req->top = o->top ? o->top : 5;
    req->strict = o->strict;
    req->allow_tp_across_nodes = o->allow_tp_across_nodes;
    req->max_zero = 3;
    req->precision = o->lay.given & LAYOUT_FLAG_PRECISION ? o->lay.l.precision : PREC_COUNT;
    req->fp32_grads = o->lay.l.fp32_grads;
    req->cp = o->lay.l.cp;
    req->cp_comm = o->lay.l.cp_comm;
    req->ep = o->lay.l.ep;
    req->ep_overlap = o->lay.l.ep_overlap;
    req->etp = o->lay.l.etp;
    if (o->lay.l.etp && !model_is_moe(req->model)) {
        rc = fail("--etp %lld: %s has no experts to split", (long long)o->lay.l.etp, req->model->name);
        goto done;
    }
    /* DeepSpeed has no context parallelism to emit */
    if (o->emit && !strcmp(o->emit, "deepspeed")) {
        if (o->lay.l.cp > 1) {
            rc = fail("--cp %lld: --emit deepspeed has no context parallelism", (long long)o->lay.l.cp);
            goto done;
        }
        req->cp = 1;
        if (o->lay.l.ep > 1) {
            rc = fail("--ep %lld: --emit deepspeed does not write expert parallelism", (long long)o->lay.l.ep);
            goto done;
        }
        req->ep = 1;
    }
    if (o->emit && strcmp(o->emit, "megatron") && strcmp(o->emit, "deepspeed") && strcmp(o->emit, "torchtitan")) {
        rc = fail("--emit: '%s' is not one of megatron|deepspeed|torchtitan", o->emit);
        goto done;
    }
    if (plan_search(req, res, isatty(2), err, sizeof err) != 0) { rc = fail("%s", err); goto done; }
    if (o->emit) {
        if ((rc = emit_for_framework(o, req, res, out))) goto done;
    } else {
        report_plan(out, req, res, o->format);
    }
    if (o->plot) rc = plot_frontier(o, req, res);
    if (!rc) note_overlay_other_gpus(o, req->gpu, req->ngpu_types);
done:
    model_zoo_free(&zoo);
    hwdb_free(&db);
    free(req);
    free(res);
    return rc;
}

/* Without --runs, the project's own list (models/published_runs.csv) with the plan column; with --runs,
 * any file of the same format (data/published/runs.csv, a user's), without it. */
static int cmd_published(const options *o, const char *root, FILE *out)
{
    hwdb db;
    model_zoo zoo;
    char path[PATH_MAX + 64], err[ERR_MAX];
    /* every GPU with its measured overlay, as estimate and plan give it, so that the errors (and the plan's bands
     * made from them) are those of the estimates a user gets; --calibration none: the hwdb defaults */
    options every = *o;
    every.gpu_name = "all";
    int rc = load_hwdb(&every, root, &db, 1);
    if (rc) return rc;
    if ((rc = load_zoo(o, root, &zoo))) { hwdb_free(&db); return rc; }
    if (o->format == FORMAT_CSV) rc = fail("published: --format table or json");
    snprintf(path, sizeof path, "%s/models/published_runs.csv", root);
    int with_plan = !o->runs && o->format == FORMAT_TABLE;
    if (!rc && o->bands_out) {
        /* the bands come from the rows themselves, the report is not printed */
        uncertainty_bands bands;
        const char *runs = o->runs ? o->runs : path;
        char source[1024];
        snprintf(source, sizeof source, "sextant published --runs %.800s (%s)", runs,
                 o->calibration ? (strcmp(o->calibration, "none") ? "--calibration" : "hwdb defaults")
                                : "each GPU's measured overlay where hwdb/measured has one");
        if (published_bands(&db, &zoo, runs, &bands, err, sizeof err) != 0 ||
            uncertainty_write(o->bands_out, &bands, source, err, sizeof err) != 0)
            rc = fail("%s", err);
    } else if (!rc && o->explain_case) {
        if (o->format != FORMAT_TABLE) rc = fail("published --explain: a derivation in text, not --format %s", o->format == FORMAT_JSON ? "json" : "csv");
        else if (explain_published(out, &db, &zoo, o->runs ? o->runs : path, o->explain_case, err, sizeof err) != 0)
            rc = fail("%s", err);
    } else if (!rc && report_published(out, &db, &zoo, o->runs ? o->runs : path, o->format, with_plan, err, sizeof err) != 0)
        rc = fail("%s", err);
    model_zoo_free(&zoo);
    hwdb_free(&db);
    return rc;
}

/* calibrate and validate run on a GPU: hand them to sextant-gpu, built
 * beside this binary when nvcc was found, so the planner never links CUDA. */
static int run_gpu_half(int argc, char **argv)
{
    char exe[PATH_MAX - 64], tool[PATH_MAX];
    ssize_t n = readlink("/proc/self/exe", exe, sizeof exe - 1);
    if (n <= 0) return fail("cannot find my own path");
    exe[n] = '\0';
    char *slash = strrchr(exe, '/');
    if (slash) *slash = '\0';
    snprintf(tool, sizeof tool, "%s/sextant-gpu", exe);
    if (access(tool, X_OK) != 0) {
        printf("sextant %s: this build has no GPU validator (nvcc was not found when it was built), skipping\n", argv[1]);
        return 0;
    }
    /* validate trains for real; validate --ops times the op list alone */
    int ops = 0;
    for (int i = 2; i < argc; i++) ops |= !strcmp(argv[i], "--ops");
    char **args = calloc((size_t)argc + 1, sizeof *args);
    if (!args) return fail("out of memory");
    args[0] = tool;
    args[1] = !strcmp(argv[1], "validate") ? (ops ? "ops" : "train") : argv[1];
    int k = 2;
    for (int i = 2; i < argc; i++)
        if (strcmp(argv[i], "--ops")) args[k++] = argv[i];
    args[k] = NULL;
    execv(tool, args);
    free(args);
    return fail("cannot run %s: %s", tool, strerror(errno));
}

/* a directory, device, FIFO, socket or link named by --out or --plot is refused before any work (outfile.c) */
static int refuse_unwritable_targets(const options *o)
{
    char err[ERR_MAX + PATH_MAX];
    if (o->out_path && outfile_check_target(o->out_path, err, sizeof err) != 0) return fail("--out: %s", err);
    if (o->plot && outfile_check_target(o->plot, err, sizeof err) != 0) return fail("--plot: %s", err);
    return 0;
}

int main(int argc, char **argv)
{
    if (argc > 1 && (!strcmp(argv[1], "calibrate") || !strcmp(argv[1], "validate"))) return run_gpu_half(argc, argv);
    options o;
    int rc = parse_args(argc, argv, &o);
    if (rc) return rc;
    if (!o.command || !strcmp(o.command, "help")) {
        fputs(usage_text, o.command ? stdout : stderr);
        return o.command ? 0 : 2;
    }
    if (!strcmp(o.command, "version")) {
        printf("sextant %s\n", SEXTANT_VERSION);
        return 0;
    }
    if ((rc = refuse_other_commands_flags(&o))) return rc;
    if ((rc = refuse_unwritable_targets(&o))) return rc;
    char root[PATH_MAX];
    find_data_root(root, sizeof root);
    char *text = NULL;
    size_t len = 0;
    FILE *out = open_memstream(&text, &len);
    if (!out) return fail("out of memory");
    if (!strcmp(o.command, "models")) {
        model_zoo zoo;
        rc = load_zoo(&o, root, &zoo);
        if (!rc) print_models(out, &zoo, o.format);
        model_zoo_free(&zoo);
    } else if (!strcmp(o.command, "hw")) {
        hwdb db;
        rc = load_hwdb(&o, root, &db, 0);
        if (!rc) {
            rc = cmd_hw(&o, &db, out);
            hwdb_free(&db);
        }
    } else if (!strcmp(o.command, "explain") && o.spec_examples) {
        report_spec_examples(out);
    } else if (!strcmp(o.command, "published")) {
        rc = cmd_published(&o, root, out);
    } else if (!strcmp(o.command, "plan")) {
        rc = cmd_plan(&o, root, out);
    } else if (!strcmp(o.command, "estimate") || !strcmp(o.command, "explain")) {
        rc = cmd_estimate(&o, root, out);
    } else if (!strcmp(o.command, "fit-power")) {
        rc = cmd_fit_power(&o, root, out);
    } else if (!strcmp(o.command, "fit-gemm")) {
        rc = cmd_fit_gemm(&o, root, out);
    } else {
        rc = fail("unknown command '%s' (models, hw, estimate, explain, plan, published, fit-power, fit-gemm; sextant --help)",
                  o.command);
    }
    if (fclose(out) != 0 && !rc) rc = fail("out of memory");
    /* fit-power's and fit-gemm's --out is the overlay, written above: their report goes to stdout */
    if (!rc) rc = emit(strcmp(o.command, "fit-power") && strcmp(o.command, "fit-gemm") ? o.out_path : NULL, text, len);
    free(text);
    return rc;
}
