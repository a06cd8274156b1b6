/* One row of a published-runs CSV (data/published/README.md's format) read
 * into what the estimate needs: the model's shape, the layout, the GPU, the
 * metric and the peak its MFU divides by.  The free-text columns (GPU,
 * precision, recomputation, ZeRO/FSDP, framework) are read by the rules of
 * docs/model.md, "Published runs"; a row that cannot be estimated says why in
 * skip_class (the reason's kind, counted) and skip_detail (this row's). */
#include "planner.h"

#include <ctype.h>
#include <errno.h>
#include <math.h>
#include <stdarg.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>

static const char *const metric_names[METRIC_COUNT] = {
    "mfu", "tflops_per_gpu_hw", "tflops_per_gpu_model", "tokens_per_s_per_gpu", "s_per_iter", "samples_per_s",
    "gpu_hours",
};

const char *published_metric_name(published_metric_t m) { return m < METRIC_COUNT ? metric_names[m] : "?"; }

static void skip(published_row *row, const char *class, const char *fmt, ...) __attribute__((format(printf, 3, 4)));
static void skip(published_row *row, const char *class, const char *fmt, ...)
{
    if (row->skip_class[0]) return;   /* the first reason found is the row's */
    snprintf(row->skip_class, sizeof row->skip_class, "%s", class);
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(row->skip_detail, sizeof row->skip_detail, fmt, ap);
    va_end(ap);
}

/* Case-insensitive substring test. */
static int has(const char *text, const char *word) { return text && strcasestr(text, word) != NULL; }

/* An optional integer cell: empty gives `fallback`; text that is not a plain
 * integer in [min, max] marks the row not estimable (the shared data holds
 * cells such as "MLA" or "15360 (after ramp from 3072)").  Returns 1 when the
 * cell was empty, 0 when read, -1 when the row was marked. */
static int optional_int(const csv_table *t, int r, const char *column, int64_t fallback, int64_t min, int64_t max,
                        int64_t *out, published_row *row)
{
    const char *text = csv_table_cell(t, r, column);
    *out = fallback;
    if (!text || !*text) return 1;
    char *end;
    errno = 0;
    long long v = strtoll(text, &end, 10);
    /* a number with its note in parentheses ("15360 (after ramp from 3072)") reads as the number */
    if (end != text && end[0] == ' ' && end[1] == '(') end += strlen(end);
    if (end == text || *end || errno == ERANGE || v < min || v > max) {
        skip(row, "a field is not a plain number", "%s is '%.40s'", column, text);
        return -1;
    }
    *out = (int64_t)v;
    return 0;
}

/* 1 when the cell is empty or one whole number (perhaps with a note in parentheses after it). */
static int plain_integer(const char *text)
{
    if (!text || !*text) return 1;
    char *end;
    errno = 0;
    (void)strtoll(text, &end, 10);
    return end != text && errno != ERANGE && (!*end || (end[0] == ' ' && end[1] == '('));
}

/* "8B", "1.7B", "125m", "1T", "671B/37B act" (total first) or a plain count; 0 when absent or unreadable. */
static double parse_params(const char *text)
{
    if (!text || !*text) return 0.0;
    char *end;
    double v = strtod(text, &end);
    if (end == text || !(v > 0.0)) return 0.0;
    switch (toupper((unsigned char)*end)) {
    case 'K': return v * 1e3;
    case 'M': return v * 1e6;
    case 'B': return v * 1e9;
    case 'T': return v * 1e12;
    default: return *end ? 0.0 : v;
    }
}

/* The hwdb row a published GPU description names: the first rule that
 * matches, most specific first.  NULL when none does. */
static const char *gpu_row_name(const char *text)
{
    static const struct { const char *word, *also, *name; } rules[] = {
        {"h100", "pcie", "h100-pcie"},  {"h100", NULL, "h100-sxm"},       {"h800", NULL, "h800"},
        {"h200", NULL, "h200"},         {"b200", NULL, "b200"},           {"a100", "40gb", "a100-sxm4-40gb"},
        {"a100", NULL, "a100-sxm4-80gb"}, {"a800", NULL, "a100-sxm4-80gb"}, /* A800: an A100 with slower NVLink */
        {"v100", "16gb", "v100-sxm2-16gb"}, {"v100", NULL, "v100-sxm2-32gb"},
        {"l40s", NULL, "l40s"},         {"a6000", NULL, "a6000"},         {"4090", NULL, "rtx4090"},
        {"3090", NULL, "rtx3090ti"},
    };
    for (size_t i = 0; i < sizeof rules / sizeof rules[0]; i++)
        if (has(text, rules[i].word) && (!rules[i].also || has(text, rules[i].also))) return rules[i].name;
    return NULL;
}

/* The network a row's GPU or source text describes, over the GPU's node: "4x OmniPath per node" (NICs per
 * node; Omni-Path at 100 Gb/s), "400Gbps/GPU" (a NIC of that rate per GPU), "1600 Gbps node-node" (that
 * rate per node, over the node's NICs), "N Gbps" alone (per NIC).  Returns 1 when it changed the node. */
static int network_from_text(const char *text, hw_node *node)
{
    int changed = 0;
    for (const char *c = text; c && *c; c++) {
        if (!isdigit((unsigned char)*c) || (c > text && (isalnum((unsigned char)c[-1]) || c[-1] == '.'))) continue;
        char *end;
        double v = strtod(c, &end);
        const char *after = end;
        while (*after == ' ') after++;
        if ((*after == 'x' || *after == 'X') && v >= 1 && v <= 64) {
            const char *fabric = after + 1;
            while (*fabric == ' ') fabric++;
            static const char *const fabrics[] = {"omnipath", "omni-path", "infiniband", "ib ", "roce", "efa", "nic"};
            for (size_t f = 0; f < sizeof fabrics / sizeof fabrics[0]; f++)
                if (!strncasecmp(fabric, fabrics[f], strlen(fabrics[f]))) {
                    node->nics_per_node = (int64_t)v;
                    if (f < 2) node->nic_bits_per_s = 100e9;   /* Omni-Path 100 */
                    changed = 1;
                }
        } else if (!strncasecmp(after, "gbps", 4) && v > 0) {
            const char *scope = after + 4;
            while (*scope == ' ' || *scope == '/') scope++;
            if (!strncasecmp(scope, "gpu", 3) || !strncasecmp(scope, "per gpu", 7)) {
                node->nics_per_node = node->gpus_per_node;
                node->nic_bits_per_s = v * 1e9;
            } else if (!strncasecmp(scope, "node", 4) || !strncasecmp(scope, "per node", 8)) {
                node->nic_bits_per_s = v * 1e9 / (double)(node->nics_per_node > 0 ? node->nics_per_node : 1);
            } else {
                node->nic_bits_per_s = v * 1e9;
            }
            changed = 1;
        }
        c = end > c ? end - 1 : c;
    }
    return changed;
}

/* Runs from frameworks of 2021-2022 (Megatron-LM of SC'21, Megatron-DeepSpeed, metaseq) had neither a
 * flash-style attention kernel nor, before Korthikanti et al., sequence parallelism, and trained with
 * dropout; later frameworks (Megatron-Core, NeMo, torchtitan, Composer, Meta's) have all three defaults
 * the other way (docs/model.md, "Published runs"). */
static int framework_before_2023(const char *framework, const char *source)
{
    static const char *const older[] = {"(2021)", "Megatron-DeepSpeed", "metaseq", "SC'21", "Narayanan",
                                        "Korthikanti", "OPT paper", "Smith et al", "bigscience"};
    for (size_t i = 0; i < sizeof older / sizeof older[0]; i++)
        if (has(framework, older[i]) || has(source, older[i])) return 1;
    return 0;
}

/* Tables measured before FlashAttention-2 (July 2023) ran the first fused kernels (docs/model.md, "Attention kernel
 * generations"): MosaicML's llm-foundry benchmarks the Triton port (MPT's attn_impl: triton, the yamls' and
 * submit_benchmarks.py's default at the A100 table's commit, 1ef7b4d, and at the H100 table's, b2a43a147), Meta's
 * LLaMA-1 xformers' CUDA kernels.
 * ATTENTION_FLASH where neither. */
static attention_impl_t first_generation_attention(const char *framework, const char *source)
{
    static const char *const triton[] = {"llm-foundry", "Composer"};
    for (size_t i = 0; i < sizeof triton / sizeof triton[0]; i++)
        if (has(framework, triton[i]) || has(source, triton[i])) return ATTENTION_FLASH1_TRITON;
    return has(framework, "xformers") || has(source, "xformers") ? ATTENTION_FLASH1 : ATTENTION_FLASH;
}

static int read_metric(const char *text, published_metric_t *out)
{
    for (int i = 0; i < METRIC_COUNT; i++)
        if (!strcasecmp(text, metric_names[i])) { *out = (published_metric_t)i; return 0; }
    return -1;
}

/* The source's group: its repository (owner/name) or, for a paper, the text before its first '(' or ','. */
static void source_group(const char *source, char *out, size_t outlen)
{
    size_t n = strcspn(source, " ");
    if (memchr(source, '/', n) && n < outlen) {
        memcpy(out, source, n);
        out[n] = '\0';
        return;
    }
    n = strcspn(source, "(,;");
    const char *arxiv = strstr(source, " arXiv");
    if (arxiv && (size_t)(arxiv - source) < n) n = (size_t)(arxiv - source);
    while (n > 0 && source[n - 1] == ' ') n--;
    if (n >= outlen) n = outlen - 1;
    memcpy(out, source, n);
    out[n] = '\0';
}

/* A name's letters and digits, lower case: "GPT-3 175B", "GPT3-175B" and the zoo's "gpt3-175b" agree. */
static void name_key(const char *name, char *out, size_t outlen)
{
    size_t j = 0;
    for (size_t i = 0; name[i] && name[i] != '(' && j + 1 < outlen; i++)
        if (isalnum((unsigned char)name[i])) out[j++] = (char)tolower((unsigned char)name[i]);
    out[j] = '\0';
}

/* The zoo model whose name_key is `key` (a mixture of experts only, when asked); NULL when none. */
static const model_t *zoo_model_keyed(const model_zoo *zoo, const char *key, int moe_only)
{
    char zoo_key[64];
    for (int i = 0; zoo && key[0] && i < zoo->count; i++) {
        name_key(zoo->models[i].name, zoo_key, sizeof zoo_key);
        if (!strcmp(key, zoo_key) && (!moe_only || model_is_moe(&zoo->models[i]))) return &zoo->models[i];
    }
    return NULL;
}

/* The size a name ends with, lower case, before any parenthesis ("Nemotron-340B" -> "340b",
 * "nemotron-4-340b" -> "340b", "GPT-1T" -> "1t"); "" when its last word is not a size. */
static void name_size(const char *name, char *out, size_t outlen)
{
    size_t n = strcspn(name, "(");
    while (n > 0 && name[n - 1] == ' ') n--;
    size_t start = n;
    while (start > 0 && name[start - 1] != '-' && name[start - 1] != ' ' && name[start - 1] != '_') start--;
    out[0] = '\0';
    if (n - start < 2 || n - start >= outlen || (tolower((unsigned char)name[n - 1]) != 'b' && tolower((unsigned char)name[n - 1]) != 't'))
        return;
    for (size_t i = start; i + 1 < n; i++)
        if (!isdigit((unsigned char)name[i]) && name[i] != '.') return;
    for (size_t i = start; i < n; i++) out[i - start] = (char)tolower((unsigned char)name[i]);
    out[n - start] = '\0';
}

/* A dense zoo model of the named family with the same size ("Nemotron-340B" is nemotron-4-340b): papers
 * and tables drop the version between family and size; NULL unless exactly one zoo model matches. */
static const model_t *zoo_model_sized(const model_zoo *zoo, const char *name, const char *key)
{
    char size[16], zoo_size[16];
    name_size(name, size, sizeof size);
    const model_t *match = NULL;
    for (int i = 0; size[0] && zoo && i < zoo->count; i++) {
        const model_t *z = &zoo->models[i];
        name_size(z->name, zoo_size, sizeof zoo_size);
        if (strcmp(size, zoo_size) || strncmp(key, z->family, strlen(z->family)) || model_is_moe(z)) continue;
        if (match) return NULL;
        match = z;
    }
    return match;
}

/* The zoo model a published name spells, to borrow the fields a row leaves empty; NULL when none. */
static const model_t *zoo_model_named(const model_zoo *zoo, const char *name)
{
    char key[64];
    name_key(name, key, sizeof key);
    const model_t *found = zoo_model_keyed(zoo, key, 0);
    if (!found) found = zoo_model_sized(zoo, name, key);
    if (found) return found;
    /* a MoE model named with its size after it ("Grok-1 314B"): the name without the size, when the zoo
     * has that mixture of experts (a dense model's size is part of its zoo name) */
    char shorter[64];
    snprintf(shorter, sizeof shorter, "%s", name);
    char *paren = strchr(shorter, '(');
    if (paren) *paren = '\0';
    size_t n = strlen(shorter);
    while (n > 0 && shorter[n - 1] == ' ') shorter[--n] = '\0';
    char *last = strrchr(shorter, ' ');
    if (!last || n < 2 || tolower((unsigned char)shorter[n - 1]) != 'b') return NULL;
    for (char *c = last + 1; c < shorter + n - 1; c++)
        if (!isdigit((unsigned char)*c) && *c != '.') return NULL;
    *last = '\0';
    name_key(shorter, key, sizeof key);
    return zoo_model_keyed(zoo, key, 1);
}

/* The FFN's kind: the one whose parameter count comes nearer the published one; without a count,
 * gated for the LLaMA-style families (docs/model.md, "Published runs"). */
static ffn_kind_t ffn_kind_of(model_t *m, double params_published)
{
    if (params_published > 0.0) {
        model_t gated = *m, plain = *m;
        gated.ffn_kind = FFN_SWIGLU;
        plain.ffn_kind = FFN_GELU;
        double eg = fabs(model_params_total(&gated) - params_published);
        double ep = fabs(model_params_total(&plain) - params_published);
        return eg < ep ? FFN_SWIGLU : FFN_GELU;
    }
    static const char *const gated_families[] = {"llama", "mistral", "mixtral", "qwen", "gemma", "deepseek", "grok"};
    for (size_t i = 0; i < sizeof gated_families / sizeof gated_families[0]; i++)
        if (has(m->name, gated_families[i])) return FFN_SWIGLU;
    return FFN_GELU;
}

/* The architecture: the row's own fields, each empty one from the zoo model of the same name when there
 * is one.  Marks the row when a field the estimate needs is missing. */
static void read_model(const csv_table *t, int r, const model_zoo *zoo, published_row *row)
{
    model_t *m = &row->model;
    const char *text = csv_table_cell(t, r, "model");
    snprintf(m->name, sizeof m->name, "%s", text ? text : "");
    const model_t *known = zoo_model_named(zoo, m->name);
    int64_t layers, hidden, heads, kv, ffn, vocab, seq;
    optional_int(t, r, "layers", known ? known->layers : 0, 1, 100000, &layers, row);
    optional_int(t, r, "hidden", known ? known->hidden : 0, 1, 1000000, &hidden, row);
    optional_int(t, r, "heads", known ? known->heads : 0, 1, 100000, &heads, row);
    /* latent attention's KV ("MLA") and a mixture's FFN ("dense 18432 (first 3 layers); expert 2048 x ...") are
     * no single number: the zoo model of the same name carries them whole */
    int zoo_carries = known && (model_is_mla(known) || model_is_moe(known));
    if (zoo_carries && !plain_integer(csv_table_cell(t, r, "kv_heads"))) kv = known->kv_heads;
    else optional_int(t, r, "kv_heads", known ? known->kv_heads : heads, 1, 100000, &kv, row);
    if (zoo_carries && !plain_integer(csv_table_cell(t, r, "ffn"))) ffn = known->ffn;
    else optional_int(t, r, "ffn", known ? known->ffn : 4 * hidden, 1, 16000000, &ffn, row);
    optional_int(t, r, "vocab", known ? known->vocab : 0, 1, 100000000, &vocab, row);
    optional_int(t, r, "seq", 0, 1, 100000000, &seq, row);
    if (!layers) skip(row, "architecture not published", "no layers");
    else if (!hidden || !heads) skip(row, "architecture not published", "no hidden size or heads");
    else if (!vocab) skip(row, "architecture not published", "no vocabulary");
    else if (!seq) skip(row, "architecture not published", "no sequence length");
    if (row->skip_class[0]) return;
    snprintf(m->family, sizeof m->family, "%s", known ? known->family : "published");
    m->layers = layers;
    m->hidden = hidden;
    m->heads = heads;
    m->kv_heads = kv;
    m->head_dim = known && known->hidden == hidden && known->heads == heads ? known->head_dim : hidden / heads;
    m->ffn = ffn;
    m->vocab = vocab;
    m->seq = m->max_positions = seq;
    m->experts = m->top_k = 1;
    double published = parse_params(csv_table_cell(t, r, "params"));
    m->params_published = m->active_params_published = published;
    if (known) {
        m->ffn_kind = known->ffn_kind;
        m->position = known->position == POS_LEARNED ? POS_ROPE : known->position; /* no table to outgrow */
        m->tied_embeddings = known->tied_embeddings;
        m->norm = known->norm;
        m->bias = known->bias;
        m->dropout = known->dropout;
        /* a mixture of experts and latent attention come from the zoo whole */
        m->experts = known->experts;
        m->top_k = known->top_k;
        m->moe_ffn = known->moe_ffn;
        m->shared_experts = known->shared_experts;
        m->dense_layers = known->dense_layers;
        m->moe_layer_freq = known->moe_layer_freq;
        m->q_lora_rank = known->q_lora_rank;
        m->kv_lora_rank = known->kv_lora_rank;
        m->qk_nope_head_dim = known->qk_nope_head_dim;
        m->qk_rope_head_dim = known->qk_rope_head_dim;
        m->v_head_dim = known->v_head_dim;
        m->moe_groups = known->moe_groups;
        m->moe_group_limit = known->moe_group_limit;
        m->mtp_layers = known->mtp_layers;
        if (model_is_moe(known) && published > 0.0) m->active_params_published = known->active_params_published;
    } else {
        m->ffn_kind = ffn_kind_of(m, published);
        /* the LLaMA recipe with a gated FFN, the GPT recipe without */
        int gated = m->ffn_kind == FFN_SWIGLU;
        m->position = POS_ROPE;
        m->tied_embeddings = !gated;
        m->norm = gated ? NORM_RMSNORM : NORM_LAYERNORM;
        m->bias = !gated;
    }
    if (m->heads % m->kv_heads) skip(row, "architecture not published", "kv_heads %lld do not divide heads %lld",
                                     (long long)m->kv_heads, (long long)m->heads);
}

/* Meta's own framework for Llama 3 (the Herd paper's runs). */
/* MosaicML's stack: llm-foundry's MPT trained by Composer (the one names the other in every row here) */
static int composer_framework(const char *framework)
{
    return has(framework, "composer") || has(framework, "llm-foundry");
}

static int llama3_framework(const char *framework, const char *source)
{
    return has(framework, "meta") || has(source, "llama 3 herd");
}

static void read_layout(const csv_table *t, int r, published_row *row)
{
    layout_t *l = &row->layout;
    int64_t gpus, per_node, tp, pp, vpp, cp, ep, dp, mbs, gbs;
    optional_int(t, r, "gpus", 0, 1, 100000000, &gpus, row);
    optional_int(t, r, "gpus_per_node", row->node ? row->node->gpus_per_node : 8, 1, 1024, &per_node, row);
    optional_int(t, r, "tp", 0, 1, 100000, &tp, row);
    optional_int(t, r, "pp", 0, 1, 100000, &pp, row);
    int vpp_empty = optional_int(t, r, "vpp", 1, 1, 1000, &vpp, row) == 1;
    optional_int(t, r, "cp", 1, 1, 100000, &cp, row);
    optional_int(t, r, "ep", 1, 1, 100000, &ep, row);
    optional_int(t, r, "dp", 0, 1, 100000000, &dp, row);
    row->mbs_given = optional_int(t, r, "mbs", 1, 1, 1000000, &mbs, row) != 1;
    optional_int(t, r, "gbs", 0, 1, 1000000000, &gbs, row);
    row->cp = cp;
    row->ep = ep;
    if (row->skip_class[0]) return;
    if (!gpus || !tp || !pp) { skip(row, "layout not published", "no GPU count, TP or PP"); return; }
    if (!gbs) { skip(row, "layout not published", "no global batch"); return; }
    if (!dp) dp = gpus / (tp * pp * cp);
    /* a mixture of experts is estimable when its architecture is a zoo model's */
    if (!model_is_moe(&row->model) && (ep > 1 || has(row->model.name, "moe") || has(row->model.name, "expert"))) {
        skip(row, "mixture of experts", "no zoo model with this expert architecture (ep %lld)", (long long)ep);
        return;
    }
    l->gpus = gpus;
    l->gpus_per_node = per_node;
    l->tp = tp;
    l->cp = cp;
    l->ep = ep;
    l->pp = pp;
    l->dp = dp;
    /* Llama 3's balanced interleaved schedule: one transformer layer per model chunk, the first chunk of the
     * first stage holding only the embedding and the last of the last only the output layer (the paper, section
     * 3.3.2); so its unpublished virtual depth is the layers per stage, here the most chunks of whole layers
     * every stage can fill, since sextant holds no chunk of the embedding alone (docs/model.md, "Published runs") */
    if (vpp_empty && pp > 1 && row->model.layers >= 2 * pp && llama3_framework(csv_table_cell(t, r, "framework"), row->source))
        vpp = row->model.layers / pp;
    l->vpp = vpp;
    l->mbs = mbs;
    l->gbs = gbs;
    l->seq = row->model.seq;
}

/* Recomputation from its free text: none when empty or denied, selective for any partial form (selective
 * op or layer, partial), full for full recomputation or plain activation checkpointing. */
static recompute_t recompute_of(const char *text)
{
    static const char *const denied[] = {"none", "no", "off", "false", "0", "disabled"};
    if (!text || !*text) return RECOMPUTE_NONE;
    for (size_t i = 0; i < sizeof denied / sizeof denied[0]; i++)
        if (!strncasecmp(text, denied[i], strlen(denied[i])) &&
            !isalnum((unsigned char)text[strlen(denied[i])]))
            return RECOMPUTE_NONE;
    if (has(text, "selective") || has(text, "partial")) return RECOMPUTE_SELECTIVE;
    if (has(text, "full") || has(text, "checkpoint") || has(text, "yes") || has(text, "true")) return RECOMPUTE_FULL;
    return RECOMPUTE_SELECTIVE;
}

/* The ZeRO stage its free text names: "ZeRO-2", "zero2", "ZeRO stage 3" (the first digit within a few
 * characters of "zero"); FSDP's sharding strategies by name; Megatron's distributed optimizer is ZeRO-1. */
static int zero_stage_of(const char *text)
{
    if (!text) return 0;
    const char *z = strcasestr(text, "zero");
    if (z)
        for (const char *c = z + 4; *c && c < z + 12; c++)
            if (*c >= '0' && *c <= '3') return *c - '0';
    if (has(text, "not resharded") || has(text, "shard_grad_op") || has(text, "grad_op")) return 2;
    if (has(text, "full shard") || has(text, "full_shard") || has(text, "hybrid") || has(text, "fsdp")) return 3;
    if (has(text, "distributed optimizer") || has(text, "distributed-optimizer")) return 1;
    return 0;
}

/* Precision, recomputation, ZeRO stage, attention kernel and sequence parallelism from the free text. */
static void read_practice(const csv_table *t, int r, published_row *row)
{
    const char *precision = csv_table_cell(t, r, "precision"), *recompute = csv_table_cell(t, r, "recompute");
    const char *zero = csv_table_cell(t, r, "zero_or_fsdp"), *framework = csv_table_cell(t, r, "framework");
    const char *notes = csv_table_cell(t, r, "notes");
    layout_t *l = &row->layout;
    int older = framework_before_2023(framework, row->source);
    if (has(precision, "fp8")) l->precision = PREC_FP8;
    else if (has(precision, "bf16")) l->precision = PREC_BF16;
    else if (has(precision, "fp16")) l->precision = PREC_FP16;
    else l->precision = PREC_BF16;
    if (row->gpu && row->gpu->peak_flops[l->precision] <= 0.0) l->precision = PREC_FP16;
    /* An FP8 run's MFU divides by the 16-bit peak unless the source says the FP8 peak (NVIDIA's DGX Cloud tables
     * do) or its framework's MFU takes the peak of the run's precision: Composer's SpeedMonitor looks the peak up
     * by precision ('amp_fp8': the FP8 peak), so llm-foundry's FP8 tables are against it */
    int fp8_peak = has(notes, "fp8 peak") || composer_framework(framework);
    row->mfu_peak = l->precision == PREC_FP8 && !fp8_peak ? PREC_BF16 : l->precision;
    /* NVIDIA's DGX Cloud tables (NeMo 2.0's FLOPs callback) count a Nemotron-4's K and V projections for every
     * query head: their MFU and step columns agree on it to 0.1% (docs/model.md, "Published runs") */
    row->kv_counted_per_head = has(row->source, "dgxc-benchmarking") && has(row->model.name, "nemotron");
    l->recompute = recompute_of(recompute);
    /* torchtitan's "selective layer" checkpointing wraps every second layer whole (its default
     * selective_ac_option 2); its "selective op" policy saves every matmul and attention output except
     * every second matmul, so it recomputes about half the forward GEMMs: both read as full
     * recomputation on half the layers of each stage (docs/model.md, "Activations") */
    if ((has(recompute, "selective layer") || has(recompute, "selective op")) && l->pp > 0) {
        int64_t per_stage = (row->model.layers + l->pp - 1) / l->pp;
        l->recompute = RECOMPUTE_FULL;
        l->recompute_layers = (per_stage + 1) / 2 < per_stage ? (per_stage + 1) / 2 : 0;
    }
    /* partial recomputation that names its modules (DeepSeek-V3: "RMSNorm/MLA up-proj recomputed") is
     * Megatron's selective recomputation with those --recompute-modules */
    if (l->recompute == RECOMPUTE_SELECTIVE) {
        if (has(recompute, "rmsnorm") || has(recompute, "layernorm")) l->recompute_modules |= RECOMPUTE_MODULE_LAYERNORM;
        if (has(recompute, "up-proj") || has(recompute, "up_proj")) l->recompute_modules |= RECOMPUTE_MODULE_MLA_UP_PROJ;
        if (has(recompute, "moe_act") || has(recompute, "swiglu")) l->recompute_modules |= RECOMPUTE_MODULE_MOE_ACT;
    }
    l->zero = zero_stage_of(zero);
    /* NeMo's pretraining configs run Megatron's distributed optimizer by default (this file's NeMo 24.09 and
     * 24.11 rows say so; its 24.07 rows leave the column empty) */
    if (has(framework, "nemo") && (!zero || !*zero)) l->zero = 1;
    /* under full sharding every weight is gathered again for each micro-batch's forward and backward, so
     * the micro-batch sets how much of the step is communication: without it there is no one layout to
     * estimate (OPT-175B's -71% at an assumed micro-batch of 1, LLaMA-65B's -76%) */
    if (l->zero >= 3 && !row->mbs_given && !row->skip_class[0])
        skip(row, "layout not published", "no micro-batch, which under ZeRO-3 / FSDP full sharding sets how often every "
             "weight is gathered");
    l->attention = older ? ATTENTION_UNFUSED : first_generation_attention(framework, row->source);
    /* every framework here computes its loss on fp32 logits unless the row says it is fused (PyTorch's
     * cross_entropy on .float() logits, Megatron's vocab-parallel cross-entropy without its fusion), but
     * llm-foundry's MPT, whose loss_fn defaults to flash-attn's fused cross-entropy (docs/model.md, "The loss") */
    l->loss = has(notes, "fused loss") || has(notes, "fused cross") ? LOSS_FUSED
              : composer_framework(framework)                       ? LOSS_FUSED_OUTPLACE
                                                                    : LOSS_FP32;
    /* Composer updates MPT's train metrics (LanguageCrossEntropy, LanguagePerplexity) on every micro-batch's
     * logits after its backward, each with its own torch cross-entropy */
    l->logit_metrics = composer_framework(framework) ? 2 : 0;
    /* Meta's Llama 3 gathered K and V over the CP group; Megatron, NeMo and torchtitan pass them round a ring */
    l->cp_comm = llama3_framework(framework, row->source) ? CP_COMM_ALLGATHER : CP_COMM_RING;
    /* DeepSeek's DualPipe hides the EP all-to-alls behind the other micro-batch's compute (--ep-overlap) */
    l->ep_overlap = has(framework, "dualpipe");
    /* the experts' GEMMs: one grouped kernel in DeepSeek's HAI-LLM (its grouped GEMMs, published as DeepGEMM)
     * and torchtitan (torch._grouped_mm); one cuBLAS GEMM per expert elsewhere (Transformer Engine's grouped
     * linear in Megatron-Core and NeMo; docs/model.md, "Mixture of experts") */
    l->expert_gemm = has(framework, "hai-llm") || has(framework, "torchtitan") ? EXPERT_GEMM_GROUPED : EXPERT_GEMM_STREAMS;
    l->sp = l->tp > 1 && (!older || has(recompute, "sequence parallel"));
    /* Megatron-Core and NeMo launch the backward's TP gather and gradient reduction beside the GEMMs
     * (docs/model.md, "Overlap"); the 2021-2022 frameworks are read as exposed */
    /* DeepSpeed's engine reduces gradients after the last backward (its pipeline schedule's ReduceTiedGrads,
     * ReduceGrads; ZeRO-1/2's overlap_comm is off by default) */
    l->grad_sync = has(framework, "deepspeed") ? GRAD_SYNC_AFTER : GRAD_SYNC_OVERLAP;
    /* DeepSpeed trains bf16 at ZeRO stage 0 with its BF16 optimizer ("its own zero stage 1 equivalent", as
     * BLOOM's launcher says): an fp32 gradient copy added into after every micro-batch (docs/model.md,
     * "Gradient accumulation").  Taken where the row names that optimizer or stage 0; its ZeRO-1/2/3 and
     * fp16 optimizers keep no such copy */
    int bf16_optimizer = has(zero, "bf16 optimizer") || has(notes, "bf16 optimizer") ||
                         (has(framework, "deepspeed") && l->precision == PREC_BF16 && l->zero == 0 && zero && *zero);
    l->grad_accum = bf16_optimizer && l->precision == PREC_BF16 && l->zero <= 1 ? GRAD_ACCUM_FP32_COPY
                                                                                : GRAD_ACCUM_IN_PLACE;
    l->tp_overlap = !older && (has(framework, "megatron") || has(framework, "nemo")) ? TP_OVERLAP_BACKWARD
                                                                                    : TP_OVERLAP_NONE;
    /* dropout: the frameworks of 2021-2022 trained with it; later ones as the model's own recipe does, where
     * the zoo knows the model (GPT-3 in NeMo's launcher and the DGX Cloud benchmark's config: hidden and
     * attention dropout 0.1; LLaMA, Nemotron, Mixtral: none) */
    row->model.dropout = older || row->model.dropout;
    row->older_framework = older;
}

int published_row_read(const csv_table *t, int r, const hwdb *db, const model_zoo *zoo, published_row *row,
                       char *err, size_t errlen)
{
    memset(row, 0, sizeof *row);
    row->line = t->line[r];
    char metric[32];
    /* a missing column is the wrong format: refused; a cell the row cannot be read by only marks the row */
    static const char *const columns[] = {"case", "source", "model", "gpu", "metric", "value"};
    for (size_t c = 0; c < sizeof columns / sizeof columns[0]; c++)
        if (csv_table_column(t, columns[c]) < 0) {
            snprintf(err, errlen, "%s: no column '%s' (data/published/README.md lists the format)", t->path, columns[c]);
            return -1;
        }
    if (csv_get_string(t, r, "case", 1, row->case_name, sizeof row->case_name, err, errlen) ||
        csv_get_string(t, r, "source", 1, row->source, sizeof row->source, err, errlen) ||
        csv_get_string(t, r, "gpu", 1, row->gpu_text, sizeof row->gpu_text, err, errlen) ||
        csv_get_string(t, r, "metric", 1, metric, sizeof metric, err, errlen))
        return -1;
    char why[256];
    if (read_metric(metric, &row->metric) != 0)
        skip(row, "metric not known", "'%.40s' is not one of mfu, tflops_per_gpu_hw, tflops_per_gpu_model, "
             "tokens_per_s_per_gpu, s_per_iter, samples_per_s, gpu_hours", metric);
    else if (csv_get_double(t, r, "value", 1e-12, 1e15, &row->value, why, sizeof why) != 0)
        skip(row, "value not a positive number", "%.200s", why);
    source_group(row->source, row->group, sizeof row->group);
    const char *gpu_name = gpu_row_name(row->gpu_text);
    row->gpu = gpu_name ? hwdb_find_gpu(db, gpu_name) : NULL;
    row->node = row->gpu ? hwdb_find_node(db, row->gpu->node) : NULL;
    if (row->node) {
        /* a network the row describes replaces the GPU's usual node for this row */
        row->own_node = *row->node;
        int named = network_from_text(row->gpu_text, &row->own_node);
        named |= network_from_text(row->source, &row->own_node);
        if (named) row->node = &row->own_node;
    }
    read_model(t, r, zoo, row);
    read_layout(t, r, row);
    read_practice(t, r, row);
    if (!row->gpu || !row->node) skip(row, "GPU not in the hardware database", "'%.60s'", row->gpu_text);
    /* GPU-hours over a token count of one phase run with the row's layout are a throughput: per trillion
     * tokens (DeepSeek's 180K H800 GPU-hours) or a pre-training of N tokens ("pre-training on 14.8T tokens");
     * a campaign of several phases (context extension, post-training) is not */
    const char *notes = csv_table_cell(t, r, "notes");
    if (row->metric == METRIC_GPU_HOURS) {
        if (has(row->case_name, "per_1T") || has(notes, "GPU-hours per trillion tokens")) row->hours_tokens = 1e12;
        const char *on = notes ? strcasestr(notes, "pre-training on ") : NULL;
        if (!row->hours_tokens && on && !has(notes, "post-training") && !has(notes, "context extension")) {
            char count[32];
            snprintf(count, sizeof count, "%s", on + strlen("pre-training on "));
            count[strcspn(count, " ")] = '\0';
            row->hours_tokens = parse_params(count);
        }
        if (!(row->hours_tokens > 0.0))
            skip(row, "GPU-hours of a whole campaign", "the row's token count and phases are not one layout's step");
    }
    return 0;
}

/* Throughput in the row's metric from an estimate, in the source's FLOP convention: every source here
 * (Megatron's and NeMo's formulas, MosaicML's, torchtitan's, PaLM's) counts attention over the full
 * s x s, causal or not, so the estimate's full-attention counts stand for them. */
double published_predicted(const published_row *row, const estimate_t *e)
{
    double gpus = (double)e->layout.gpus;
    double model_flops = e->model_flops_full_attention_per_step, hardware_flops = e->hardware_flops_full_attention_per_step;
    if (row->kv_counted_per_head) {
        const model_t *m = &row->model;
        double extra = model_is_mla(m) ? 0.0
                                       : kv_per_head_extra_flops((double)e->layout.gbs * (double)e->layout.seq, (double)m->layers,
                                                                 (double)m->hidden, (double)m->head_dim, (double)m->heads,
                                                                 (double)m->kv_heads);
        model_flops += extra;
        hardware_flops += extra;
    }
    switch (row->metric) {
    case METRIC_MFU:
        return model_flops / e->step_s / gpus / e->gpu->peak_flops[row->mfu_peak];
    case METRIC_TFLOPS_HW: return hardware_flops / e->step_s / gpus / 1e12;
    case METRIC_TFLOPS_MODEL: return model_flops / e->step_s / gpus / 1e12;
    case METRIC_TOKENS_PER_S_PER_GPU: return e->tokens_per_s_per_gpu;
    case METRIC_S_PER_ITER: return e->step_s;
    case METRIC_SAMPLES_PER_S: return (double)e->layout.gbs / e->step_s;
    case METRIC_GPU_HOURS: return row->hours_tokens > 0.0 ? row->hours_tokens / e->tokens_per_s_per_gpu / 3600.0 : 0.0;
    case METRIC_COUNT: break;
    }
    return 0.0;
}

/* Signed error as throughput: predicted over published minus one, inverted for the time metrics, so a
 * positive error always means sextant is too optimistic. */
double published_signed_error(const published_row *row, double predicted)
{
    if (row->metric == METRIC_S_PER_ITER || row->metric == METRIC_GPU_HOURS) return row->value / predicted - 1.0;
    return predicted / row->value - 1.0;
}

const char *published_convention(const published_row *row)
{
    switch (row->metric) {
    case METRIC_MFU:
        if (row->kv_counted_per_head)
            return row->mfu_peak == PREC_FP8 ? "model FLOPs (full s x s, K and V per query head) / FP8 peak"
                                             : "model FLOPs (full s x s, K and V per query head) / bf16 peak";
        return row->mfu_peak == PREC_FP8 ? "model FLOPs (full s x s) / FP8 peak"
               : row->mfu_peak == PREC_FP16 ? "model FLOPs (full s x s) / fp16 peak" : "model FLOPs (full s x s) / bf16 peak";
    case METRIC_TFLOPS_HW: return "hardware FLOPs (full s x s, recomputation counted)";
    case METRIC_TFLOPS_MODEL: return "model FLOPs (full s x s)";
    case METRIC_TOKENS_PER_S_PER_GPU: return "tokens";
    case METRIC_S_PER_ITER: return "seconds per step";
    case METRIC_SAMPLES_PER_S: return "sequences";
    case METRIC_GPU_HOURS: case METRIC_COUNT: break;
    }
    return "GPU-hours";
}
