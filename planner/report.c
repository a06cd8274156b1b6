/* The estimate as a table for people, and as CSV or JSON for scripts: the
 * machine formats come from one list of fields so they cannot disagree. */
#include "planner.h"

#include <cjson/cJSON.h>
#include <math.h>
#include <string.h>
#include <strings.h>

#define GIB 1073741824.0

/* The command line's and the reports' names of each layout choice, in the order of its enum: one table
 * each, read both ways (a value out of range reads as the enum's fallback). */
static const char *const recompute_names[] = {"none", "selective", "full"};
static const char *const attention_names[] = {"flash", "unfused", "flash1", "sextant", "flash1-triton"};
static const char *const tp_overlap_names[] = {"none", "backward"};
static const char *const grad_sync_names[] = {"overlap", "after"};
static const char *const grad_accum_names[] = {"in-place", "fp32-copy"};
static const char *const expert_gemm_names[] = {"streams", "grouped"};
static const char *const expert_rows_names[] = {"routed", "even"};
static const char *const zero_waits_names[] = {"microbatch", "step"};
static const char *const cp_comm_names[] = {"ring", "allgather"};
static const char *const loss_names[] = {"fused", "fp32", "fused-outplace"};
#define COUNT_OF(names) ((int)(sizeof names / sizeof names[0]))

static const char *name_of(const char *const *names, int count, int value, int fallback)
{
    return names[value >= 0 && value < count ? value : fallback];
}

/* the value whose name `name` is, ignoring case: 0, or -1 for anything else (or NULL) */
static int value_of(const char *const *names, int count, const char *name, int *value)
{
    for (int i = 0; name && i < count; i++)
        if (!strcasecmp(name, names[i])) {
            *value = i;
            return 0;
        }
    return -1;
}

/* Each layout choice's name and its parse, from its table (recompute_name/_parse, attention_name/_parse,
 * loss_kernel_name/_parse, tp_overlap_name/_parse, grad_sync_name/_parse, grad_accum_name/_parse, expert_gemm_name/_parse,
 * expert_rows_name/_parse, zero_waits_name/_parse, cp_comm_name/_parse; planner.h). */
#define NAMED_ENUM(stem, type, names, fallback)                                                            \
    const char *stem##_name(type value) { return name_of(names, COUNT_OF(names), (int)value, (fallback)); } \
    int stem##_parse(const char *name, type *out)                                                           \
    {                                                                                                        \
        int v;                                                                                               \
        if (value_of(names, COUNT_OF(names), name, &v) != 0) return -1;                                      \
        *out = (type)v;                                                                                      \
        return 0;                                                                                            \
    }
NAMED_ENUM(recompute, recompute_t, recompute_names, RECOMPUTE_FULL)
NAMED_ENUM(attention, attention_impl_t, attention_names, ATTENTION_UNFUSED)
NAMED_ENUM(loss_kernel, loss_kernel_t, loss_names, LOSS_FUSED)
NAMED_ENUM(tp_overlap, tp_overlap_t, tp_overlap_names, 0)
NAMED_ENUM(grad_sync, grad_sync_t, grad_sync_names, 0)
NAMED_ENUM(grad_accum, grad_accum_t, grad_accum_names, 0)
NAMED_ENUM(expert_gemm, expert_gemm_t, expert_gemm_names, 0)
NAMED_ENUM(expert_rows, expert_rows_t, expert_rows_names, 0)
NAMED_ENUM(zero_waits, zero_waits_t, zero_waits_names, 0)
NAMED_ENUM(cp_comm, cp_comm_t, cp_comm_names, 0)
#undef NAMED_ENUM

int attention_is_fused(attention_impl_t a)
{
    return a == ATTENTION_FLASH || a == ATTENTION_FLASH1 || a == ATTENTION_FLASH1_TRITON || a == ATTENTION_SEXTANT;
}

static const char *const recompute_module_names[] = {"layernorm", "mla_up_proj", "moe_act"};

int recompute_modules_parse(const char *list, unsigned *out)
{
    if (!list || !*list) return -1;
    unsigned modules = 0;
    const char *p = list;
    while (*p) {
        size_t len = strcspn(p, ",");
        int found = -1;
        for (int i = 0; i < 3; i++)
            if (strlen(recompute_module_names[i]) == len && !strncasecmp(p, recompute_module_names[i], len)) found = i;
        if (found < 0) return -1;
        modules |= 1u << found;
        p += len;
        if (*p == ',') {
            p++;
            if (!*p) return -1;
        }
    }
    *out = modules;
    return 0;
}

const char *recompute_modules_name(unsigned modules)
{
    static const char *const lists[8] = {"", "layernorm", "mla_up_proj", "layernorm,mla_up_proj", "moe_act",
                                         "layernorm,moe_act", "mla_up_proj,moe_act", "layernorm,mla_up_proj,moe_act"};
    return lists[modules & RECOMPUTE_MODULES_ALL];
}

const char *op_kind_name(op_kind_t k)
{
    static const char *const names[] = {"gemm", "attention", "membound", "comm"};
    return names[k];
}
const char *pass_name(pass_t p)
{
    static const char *const names[] = {"fwd", "bwd", "recompute", "step"};
    return names[p];
}
const char *group_name(group_t g)
{
    static const char *const names[] = {"tp", "pp", "dp", "cp", "ep", "edp", "etp"};
    return names[g];
}
const char *coll_name(coll_t c)
{
    static const char *const names[] = {"all-reduce", "reduce-scatter", "all-gather", "send/recv", "all-to-all"};
    return names[c];
}

typedef enum { FIELD_NUMBER, FIELD_INTEGER, FIELD_STRING, FIELD_BOOL } field_type;
typedef struct {
    const char *key;
    field_type type;
    double number;
    const char *string;
} field;

#define FIELDS_MAX 128

const char *calibration_origin(const hw_gpu *g)
{
    if (!g->overlay_path[0]) return "hwdb defaults";
    return g->overlay_by_default ? "hwdb/measured" : "--calibration";
}

int calibration_line(const hw_gpu *g, char *out, size_t outlen)
{
    if (g->overlay_path[0] && g->overlay_by_default)
        snprintf(out, outlen, "calibration: %s (measured overlay; --calibration none for the hwdb defaults)", g->overlay_path);
    else if (g->overlay_path[0])
        snprintf(out, outlen, "calibration: %s (--calibration)", g->overlay_path);
    else if (g->overlay_declined)
        snprintf(out, outlen, "calibration: none (the hwdb defaults; --calibration none declined hwdb/measured/%s.csv)",
                 g->name);
    else
        return 0;
    return 1;
}

static int estimate_fields(const estimate_t *e, field *f)
{
    const layout_t *l = &e->layout;
    int n = 0;
#define NUM(k, v) f[n++] = (field){k, FIELD_NUMBER, (double)(v), NULL}
#define INT(k, v) f[n++] = (field){k, FIELD_INTEGER, (double)(v), NULL}
#define STR(k, v) f[n++] = (field){k, FIELD_STRING, 0.0, v}
#define BOOL(k, v) f[n++] = (field){k, FIELD_BOOL, (v) ? 1.0 : 0.0, NULL}
    STR("model.name", e->model->name);
    NUM("model.params", e->params_total);
    NUM("model.active_params", e->params_active);
    STR("gpu.name", e->gpu->name);
    STR("gpu.node", e->node->name);
    NUM("gpu.peak_flops", e->gpu->peak_flops[l->precision]);
    STR("gpu.calibration", e->gpu->calibration);
    STR("calibration.file", e->gpu->overlay_path);
    STR("calibration.origin", calibration_origin(e->gpu));
    INT("layout.gpus", l->gpus);
    INT("layout.tp", l->tp);
    INT("layout.pp", l->pp);
    INT("layout.dp", l->dp);
    INT("layout.cp", layout_cp(l));
    STR("layout.cp_comm", cp_comm_name(l->cp_comm));
    INT("layout.ep", layout_ep(l));
    if (layout_etp(l) != l->tp) INT("layout.etp", layout_etp(l));   /* Megatron's default, TP, goes unsaid */
    INT("layout.mbs", l->mbs);
    INT("layout.gbs", l->gbs);
    INT("layout.seq", l->seq);
    STR("layout.recompute", recompute_name(l->recompute));
    NUM("layout.recompute_layers", (double)l->recompute_layers);
    STR("layout.recompute_modules", recompute_modules_name(l->recompute_modules));
    STR("layout.loss", loss_kernel_name(l->loss));
    INT("layout.logit_metrics", l->logit_metrics);
    STR("layout.tp_overlap", tp_overlap_name(l->tp_overlap));
    STR("layout.grad_sync", grad_sync_name(l->grad_sync));
    STR("layout.grad_accum", grad_accum_name(l->grad_accum));
    STR("layout.expert_gemm", expert_gemm_name(l->expert_gemm));
    STR("layout.expert_rows", expert_rows_name(l->expert_rows));
    STR("layout.zero_waits", zero_waits_name(l->zero_waits));
    INT("layout.zero", l->zero);
    BOOL("layout.sp", l->sp);
    INT("layout.vpp", l->vpp);
    /* the split as costed, every key always (one CSV header): with one stage all L, with two the middle is the first */
    int64_t split_first, split_middle, split_last;
    pipeline_split(e->model, l, &split_first, &split_middle, &split_last);
    INT("layout.first_stage_layers", split_first);
    INT("layout.middle_stage_layers", split_middle);
    INT("layout.last_stage_layers", split_last);
    STR("layout.precision", precision_name(l->precision));
    STR("layout.attention", attention_name(l->attention));
    INT("layout.gpus_per_node", l->gpus_per_node);
    INT("layout.microbatches", e->microbatches);
    NUM("memory.weights", e->memory.weights);
    NUM("memory.gradients", e->memory.gradients);
    NUM("memory.optimizer", e->memory.optimizer);
    NUM("memory.activations", e->memory.activations);
    NUM("memory.logits", e->memory.logits);
    NUM("memory.other", e->memory.other);
    NUM("memory.total", e->memory.total);
    NUM("memory.capacity", e->memory.capacity);
    BOOL("memory.fits", e->fits);
    INT("memory.stage", e->memory.stage);
    NUM("memory.inflight_microbatches", e->memory.inflight_microbatches);
    NUM("time.step_s", e->step_s);
    NUM("time.compute_s", e->compute_s);
    NUM("time.tp_comm_s", e->tp_comm_s);
    NUM("time.pp_comm_s", e->pp_comm_s);
    NUM("time.dp_comm_s", e->dp_comm_s);
    NUM("time.cp_comm_s", e->cp_comm_s);
    NUM("time.ep_comm_s", e->ep_comm_s);
    NUM("time.bubble_s", e->bubble_s);
    NUM("time.optimizer_s", e->optimizer_s);
    NUM("time.bubble_fraction", e->bubble_fraction);
    INT("time.slowest_stage", e->slowest_stage);
    NUM("time.clock_fraction", e->clock_fraction);
    NUM("time.sm_clock_mhz", e->step_clock_hz / 1e6);
    NUM("time.power_w", e->step_power_w);
    NUM("time.top_clock_power_w", e->top_clock_power_w);
    NUM("time.clock_bound_top_s", e->clock_bound_top_s);
    NUM("time.clock_bound_s", e->clock_bound_s);
    NUM("time.overlap_slowdown_s", e->overlap_slowdown_s);
    NUM("time.overlap_beside_s", e->overlap_beside_s);
    NUM("flops.model_per_step", e->model_flops_per_step);
    NUM("flops.hardware_per_step", e->hardware_flops_per_step);
    NUM("flops.six_nd_per_step", e->six_nd_per_step);
    NUM("flops.attention_per_step", e->attention_flops_per_step);
    NUM("flops.logits_per_step", e->logits_flops_per_step);
    NUM("flops.model_full_attention_per_step", e->model_flops_full_attention_per_step);
    NUM("flops.hardware_full_attention_per_step", e->hardware_flops_full_attention_per_step);
    NUM("mfu", e->mfu);
    NUM("hfu", e->hfu);
    /* against the 16-bit peak whatever the precision: FP8 runs are quoted both ways */
    if (e->gpu->peak_flops[PREC_BF16] > 0.0) NUM("mfu_bf16_peak", e->tflops_per_gpu / e->gpu->peak_flops[PREC_BF16]);
    NUM("tokens_per_s", e->tokens_per_s);
    NUM("tokens_per_s_per_gpu", e->tokens_per_s_per_gpu);
    NUM("tflops_per_gpu", e->tflops_per_gpu / 1e12);
    NUM("tokens", e->job.tokens);
    NUM("steps", e->steps);
    NUM("time_to_train_s", e->time_to_train_s);
    NUM("gpu_hours", e->gpu_hours);
    NUM("price_usd_per_gpu_hour", e->job.price_usd_per_gpu_hour);
    NUM("cost_usd", e->cost_usd);
    NUM("tp_ratio", e->tp_ratio);
    NUM("tp_ratio_limit", e->tp_ratio_limit);
#undef NUM
#undef INT
#undef STR
#undef BOOL
    return n;
}

/* Finds or makes the object that holds the last component of a dotted key. */
static cJSON *json_parent(cJSON *root, const char *key, const char **leaf)
{
    cJSON *node = root;
    const char *start = key, *dot;
    char part[64];
    while ((dot = strchr(start, '.'))) {
        snprintf(part, sizeof part, "%.*s", (int)(dot - start), start);
        cJSON *child = cJSON_GetObjectItemCaseSensitive(node, part);
        if (!child) child = cJSON_AddObjectToObject(node, part);
        node = child;
        start = dot + 1;
    }
    *leaf = start;
    return node;
}

static cJSON *op_json(const op_t *op)
{
    cJSON *o = cJSON_CreateObject();
    cJSON_AddStringToObject(o, "name", op->name);
    cJSON_AddStringToObject(o, "kind", op_kind_name(op->kind));
    cJSON_AddStringToObject(o, "pass", pass_name(op->pass));
    cJSON_AddNumberToObject(o, "count", (double)op->count);
    if (op->kind == OP_COMM) {
        cJSON_AddStringToObject(o, "collective", coll_name(op->coll));
        cJSON_AddStringToObject(o, "group", group_name(op->group));
        cJSON_AddNumberToObject(o, "group_size", (double)op->group_size);
        cJSON_AddNumberToObject(o, "comm_bytes", op->comm_bytes);
        cJSON_AddBoolToObject(o, "crosses_node", op->crosses_node);
    } else {
        cJSON_AddNumberToObject(o, "m", (double)op->m);
        cJSON_AddNumberToObject(o, "n", (double)op->n);
        cJSON_AddNumberToObject(o, "k", (double)op->k);
        cJSON_AddNumberToObject(o, "batch", (double)op->batch);
        cJSON_AddNumberToObject(o, "flops", op->flops);
        cJSON_AddNumberToObject(o, "bytes", op->bytes);
        cJSON_AddNumberToObject(o, "saved_bytes", op->saved_bytes);
    }
    cJSON_AddNumberToObject(o, "time_s", op->time_s);
    if (op->clock_bound_s > 0.0 || op->energy_j > 0.0) { /* the power model's, when it is on */
        cJSON_AddNumberToObject(o, "clock_bound_s", op->clock_bound_s);
        cJSON_AddNumberToObject(o, "energy_j", op->energy_j);
    }
    return o;
}

static void report_json(FILE *out, const estimate_t *e, int with_ops)
{
    field f[FIELDS_MAX];
    int n = estimate_fields(e, f);
    cJSON *root = cJSON_CreateObject();
    for (int i = 0; i < n; i++) {
        const char *leaf;
        cJSON *parent = json_parent(root, f[i].key, &leaf);
        switch (f[i].type) {
        case FIELD_NUMBER:
        case FIELD_INTEGER: cJSON_AddNumberToObject(parent, leaf, f[i].number); break;
        case FIELD_STRING: cJSON_AddStringToObject(parent, leaf, f[i].string); break;
        case FIELD_BOOL: cJSON_AddBoolToObject(parent, leaf, f[i].number != 0.0); break;
        }
    }
    cJSON *warnings = cJSON_AddArrayToObject(root, "warnings");
    for (int i = 0; i < e->nwarnings; i++) cJSON_AddItemToArray(warnings, cJSON_CreateString(e->warnings[i]));
    if (with_ops) {
        cJSON *stages = cJSON_AddArrayToObject(root, "stages");
        const stage_ops *costed[STAGE_KINDS] = {&e->first_stage, &e->middle_stage, &e->last_stage};
        for (int s = 0; s < STAGE_KINDS; s++) {
            /* the middle stage with three stages or more, the last with two or more */
            if ((s == STAGE_MIDDLE && e->layout.pp <= 2) || (s == STAGE_LAST && e->layout.pp == 1)) continue;
            const stage_ops *so = costed[s];
            cJSON *stage = cJSON_CreateObject();
            cJSON_AddNumberToObject(stage, "stage", (double)so->stage);
            cJSON_AddNumberToObject(stage, "layers", (double)so->layers);
            cJSON *ops = cJSON_AddArrayToObject(stage, "ops");
            for (int i = 0; i < so->nops; i++) cJSON_AddItemToArray(ops, op_json(&so->ops[i]));
            cJSON_AddItemToArray(stages, stage);
        }
    }
    char *text = cJSON_Print(root);
    if (text) fprintf(out, "%s\n", text);
    cJSON_free(text);
    cJSON_Delete(root);
}

static void csv_quoted(FILE *out, const char *s)
{
    fputc('"', out);
    for (; *s; s++) {
        if (*s == '"') fputc('"', out);
        fputc(*s, out);
    }
    fputc('"', out);
}

static void report_csv(FILE *out, const estimate_t *e)
{
    field f[FIELDS_MAX];
    int n = estimate_fields(e, f);
    for (int i = 0; i < n; i++) fprintf(out, "%s,", f[i].key);
    fprintf(out, "warnings\n");
    for (int i = 0; i < n; i++) {
        switch (f[i].type) {
        case FIELD_NUMBER: fprintf(out, "%.10g,", f[i].number); break;
        case FIELD_INTEGER: fprintf(out, "%.0f,", f[i].number); break;
        case FIELD_STRING: csv_quoted(out, f[i].string); fputc(',', out); break;
        case FIELD_BOOL: fprintf(out, "%s,", f[i].number != 0.0 ? "true" : "false"); break;
        }
    }
    char joined[WARNINGS_MAX * 260] = "";
    for (int i = 0; i < e->nwarnings; i++)
        snprintf(joined + strlen(joined), sizeof joined - strlen(joined), "%s%s", i ? "; " : "", e->warnings[i]);
    csv_quoted(out, joined);
    fputc('\n', out);
}

static void print_duration(FILE *out, double seconds)
{
    if (seconds >= 86400.0 * 2) fprintf(out, "%.1f days", seconds / 86400.0);
    else if (seconds >= 7200.0) fprintf(out, "%.1f hours", seconds / 3600.0);
    else if (seconds >= 120.0) fprintf(out, "%.1f minutes", seconds / 60.0);
    else fprintf(out, "%.3g s", seconds);
}

static void report_ops_table(FILE *out, const stage_ops *s)
{
    fprintf(out, "\nOp list of stage %lld (%lld layers), one micro-batch; time per instance and in all\n",
            (long long)s->stage, (long long)s->layers);
    fprintf(out, "  %-28s %-9s %-9s %6s %10s %10s %10s %12s %11s %11s\n", "op", "kind", "pass", "count", "m", "n",
            "k", "GFLOP", "us each", "ms in all");
    for (int i = 0; i < s->nops; i++) {
        const op_t *op = &s->ops[i];
        if (op->kind == OP_MEMBOUND && op->bytes <= 0.0) continue;
        if (op->kind == OP_COMM)
            fprintf(out, "  %-28s %-9s %-9s %6lld %10s %10s %10s %12s %11.2f %11.3f   %s %s of %.1f MB over %lld%s\n",
                    op->name, "comm", pass_name(op->pass), (long long)op->count, "", "", "", "", op->time_s * 1e6,
                    op->time_s * (double)op->count * 1e3, group_name(op->group), coll_name(op->coll),
                    op->comm_bytes / 1e6, (long long)op->group_size, op->crosses_node ? ", across nodes" : "");
        else
            fprintf(out, "  %-28s %-9s %-9s %6lld %10lld %10lld %10lld %12.2f %11.2f %11.3f\n", op->name,
                    op_kind_name(op->kind), pass_name(op->pass), (long long)op->count, (long long)op->m,
                    (long long)op->n, (long long)op->k, op->flops / 1e9, op->time_s * 1e6,
                    op->time_s * (double)op->count * 1e3);
    }
}

static void report_table(FILE *out, const estimate_t *e, int with_ops)
{
    const layout_t *l = &e->layout;
    const memory_breakdown *m = &e->memory;
    fprintf(out, "sextant estimate: %s (%.2fB parameters", e->model->name, e->params_total / 1e9);
    if (e->model->experts > 1) fprintf(out, ", %.2fB active", e->params_active / 1e9);
    fprintf(out, ") on %lld x %s (node %s, %lld GPUs per node)\n", (long long)l->gpus, e->gpu->name, e->node->name,
            (long long)l->gpus_per_node);
    if (layout_cp(l) > 1)
        fprintf(out, "layout: TP %lld x CP %lld (%s) x PP %lld x DP %lld", (long long)l->tp, (long long)l->cp,
                cp_comm_name(l->cp_comm), (long long)l->pp, (long long)l->dp);
    else
        fprintf(out, "layout: TP %lld x PP %lld x DP %lld", (long long)l->tp, (long long)l->pp, (long long)l->dp);
    if (l->vpp > 1) fprintf(out, " (VPP %lld)", (long long)l->vpp);
    int64_t first, middle, last;
    pipeline_split(e->model, l, &first, &middle, &last);
    if (l->pp > 1 && (first != middle || middle != last))
        fprintf(out, " (stages of %lld, %lld, %lld layers)", (long long)first, (long long)middle, (long long)last);
    if (model_is_moe(e->model)) fprintf(out, ", EP %lld", (long long)layout_ep(l));
    if (layout_etp(l) != l->tp) fprintf(out, ", ETP %lld", (long long)layout_etp(l));
    fprintf(out, ", micro-batch %lld, global batch %lld (%lld micro-batches per step), seq %lld\n", (long long)l->mbs,
            (long long)l->gbs, (long long)e->microbatches, (long long)l->seq);
    char partial[256] = "";
    if (l->recompute == RECOMPUTE_FULL && l->recompute_layers > 0)
        snprintf(partial, sizeof partial, " (%lld layers per stage)", (long long)l->recompute_layers);
    if (l->recompute_modules)
        snprintf(partial + strlen(partial), sizeof partial - strlen(partial), " + %s",
                 recompute_modules_name(l->recompute_modules));
    if (l->loss != LOSS_FUSED)
        snprintf(partial + strlen(partial), sizeof partial - strlen(partial), ", %s loss", loss_kernel_name(l->loss));
    if (l->logit_metrics > 0)
        snprintf(partial + strlen(partial), sizeof partial - strlen(partial), ", %lld metrics on the logits",
                 (long long)l->logit_metrics);
    if (l->tp > 1 && l->tp_overlap == TP_OVERLAP_BACKWARD)
        snprintf(partial + strlen(partial), sizeof partial - strlen(partial), ", TP overlap backward");
    if (l->grad_sync == GRAD_SYNC_AFTER)
        snprintf(partial + strlen(partial), sizeof partial - strlen(partial), ", gradients synced after the flush");
    if (l->grad_accum == GRAD_ACCUM_FP32_COPY)
        snprintf(partial + strlen(partial), sizeof partial - strlen(partial), ", gradients added into an fp32 copy");
    if (model_is_moe(e->model) && l->expert_gemm == EXPERT_GEMM_GROUPED)
        snprintf(partial + strlen(partial), sizeof partial - strlen(partial), ", experts in one grouped GEMM");
    if (l->zero >= 2 && l->zero_waits == ZERO_WAITS_STEP)
        snprintf(partial + strlen(partial), sizeof partial - strlen(partial), ", ZeRO waits at the step's ends");
    fprintf(out, "        %s, recompute %s%s, %s attention, sequence parallel %s, ZeRO %d, %s gradients\n",
            precision_name(l->precision), recompute_name(l->recompute), partial,
            attention_name(l->attention), l->sp ? "on" : "off", l->zero,
            l->fp32_grads ? "fp32" : "16-bit");
    char calibration[HWDB_SOURCE_MAX + 128];
    if (calibration_line(e->gpu, calibration, sizeof calibration)) fprintf(out, "%s\n", calibration);

    fprintf(out, "\nMemory per GPU, stage %lld (the heaviest)       GiB\n", (long long)m->stage);
    fprintf(out, "  weights                              %9.2f   (%.3gB parameters on this GPU)\n", m->weights / GIB,
            m->params / 1e9);
    fprintf(out, "  gradients                            %9.2f\n", m->gradients / GIB);
    fprintf(out, "  optimizer state                      %9.2f\n", m->optimizer / GIB);
    fprintf(out, "  activations                          %9.2f   (%.2f micro-batches in flight)\n",
            m->activations / GIB, m->inflight_microbatches);
    if (m->logits > 0) fprintf(out, "  logits and loss                      %9.2f\n", m->logits / GIB);
    fprintf(out, "  other (context, workspaces, NCCL)    %9.2f\n", m->other / GIB);
    fprintf(out, "  total                                %9.2f   of %.1f: %s (%+.1f GiB)\n", m->total / GIB,
            m->capacity / GIB, e->fits ? "fits" : "DOES NOT FIT", (m->capacity - m->total) / GIB);

    fprintf(out, "\nTime per step (slowest stage %lld)           seconds   share\n", (long long)e->slowest_stage);
    struct { const char *label; double s; } rows[] = {
        {"compute", e->compute_s},           {"TP communication", e->tp_comm_s},
        {"PP communication", e->pp_comm_s},  {"DP communication (exposed)", e->dp_comm_s},
        {"pipeline bubble", e->bubble_s},    {"optimizer step", e->optimizer_s},
    };
    for (size_t i = 0; i < sizeof rows / sizeof rows[0]; i++) {
        fprintf(out, "  %-34s %9.4f  %5.1f%%\n", rows[i].label, rows[i].s, 100.0 * rows[i].s / e->step_s);
        if (i == 1 && layout_cp(l) > 1)
            fprintf(out, "  %-34s %9.4f  %5.1f%%\n", "CP communication (exposed)", e->cp_comm_s,
                    100.0 * e->cp_comm_s / e->step_s);
        if (i == 1 && model_is_moe(e->model))
            fprintf(out, "  %-34s %9.4f  %5.1f%%\n", "EP all-to-all (exposed)", e->ep_comm_s,
                    100.0 * e->ep_comm_s / e->step_s);
    }
    fprintf(out, "  %-34s %9.4f\n", "step", e->step_s);
    if (e->step_clock_hz > 0) {
        double cap = e->gpu->power_cap_w > 0 ? e->gpu->power_cap_w : e->gpu->tdp_w;
        if (e->clock_fraction < 1.0)
            fprintf(out, "  power cap: at the top clock the step would draw %.0f W, over the %.0f W cap; it runs at %.0f MHz "
                         "(%.0f%%), its %.4f s of clock-bound work taking %.4f s\n", e->top_clock_power_w, cap,
                    e->step_clock_hz / 1e6, 100.0 * e->clock_fraction, e->clock_bound_top_s, e->clock_bound_s);
        else if (e->clock_bound_s != e->clock_bound_top_s)
            fprintf(out, "  power cap: the step draws %.0f W at the top clock (%.0f MHz), under the %.0f W cap; its %.4f s "
                         "of clock-bound work taking %.4f s\n",
                    e->step_power_w, e->step_clock_hz / 1e6, cap, e->clock_bound_top_s, e->clock_bound_s);
        else
            fprintf(out, "  power cap: the step draws %.0f W at the top clock (%.0f MHz), under the %.0f W cap\n",
                    e->step_power_w, e->step_clock_hz / 1e6, cap);
    }

    fprintf(out, "\nThroughput\n");
    fprintf(out, "  tokens/s                  %.4g in all, %.4g per GPU\n", e->tokens_per_s, e->tokens_per_s_per_gpu);
    fprintf(out, "  model TFLOP/s per GPU     %.1f of %.1f %s peak: MFU %.1f%%, HFU %.1f%%\n", e->tflops_per_gpu / 1e12,
            e->gpu->peak_flops[l->precision] / 1e12, precision_name(l->precision), 100.0 * e->mfu, 100.0 * e->hfu);
    /* FP8 runs are quoted against either peak (NVIDIA's tables the FP8 one, Llama 3's and most papers the 16-bit) */
    if (l->precision == PREC_FP8 && e->gpu->peak_flops[PREC_BF16] > 0.0)
        fprintf(out, "                            against the %.1f bf16 peak: MFU %.1f%%, HFU %.1f%%\n",
                e->gpu->peak_flops[PREC_BF16] / 1e12, 100.0 * e->tflops_per_gpu / e->gpu->peak_flops[PREC_BF16],
                100.0 * e->hfu * e->gpu->peak_flops[PREC_FP8] / e->gpu->peak_flops[PREC_BF16]);
    fprintf(out, "  FLOP per step             model %.4g, hardware %.4g, 6ND %.4g (model/6ND = %.3f)\n",
            e->model_flops_per_step, e->hardware_flops_per_step, e->six_nd_per_step,
            e->model_flops_per_step / e->six_nd_per_step);

    fprintf(out, "\nTraining run\n");
    fprintf(out, "  tokens                    %.4g (%.0f steps)\n", e->job.tokens, ceil(e->steps));
    fprintf(out, "  time to train             ");
    print_duration(out, e->time_to_train_s);
    fprintf(out, "\n  GPU-hours                 %.4g\n", e->gpu_hours);
    fprintf(out, "  cost                      $%.4g at $%.2f per GPU-hour\n", e->cost_usd, e->job.price_usd_per_gpu_hour);

    fprintf(out, "\nTP ratio: %.0f FLOP per byte exchanged at TP %lld; limit t_max = %.1f over %.0f GB/s per direction\n",
            e->tp_ratio, (long long)l->tp, e->tp_ratio_limit, e->tp_link_bytes_per_s / 1e9);

    if (e->nwarnings) {
        fprintf(out, "\nWarnings\n");
        for (int i = 0; i < e->nwarnings; i++) fprintf(out, "  - %s\n", e->warnings[i]);
    } else {
        fprintf(out, "\nNo warnings.\n");
    }
    if (with_ops) {
        report_ops_table(out, &e->first_stage);
        if (l->pp > 2) report_ops_table(out, &e->middle_stage);
        if (l->pp > 1) report_ops_table(out, &e->last_stage);
    }
}

void report_estimate(FILE *out, const estimate_t *e, format_t format, int with_ops)
{
    switch (format) {
    case FORMAT_TABLE: report_table(out, e, with_ops); break;
    case FORMAT_CSV: report_csv(out, e); break;
    case FORMAT_JSON: report_json(out, e, with_ops); break;
    }
}
