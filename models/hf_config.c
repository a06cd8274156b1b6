/* Import of a Hugging Face config.json into a model_t, with cJSON. */
#include "models.h"

#include <cjson/cJSON.h>
#include <errno.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>
#include <sys/stat.h>

/* A config's max_position_embeddings is the longest context the model
 * supports, often far longer than it was trained on; the default training
 * sequence is capped here and --seq overrides it. */
#define HF_DEFAULT_SEQ_CAP 8192
/* the largest integer a config's field may hold */
#define HF_INT_MAX 1e12

typedef enum { HF_LLAMA, HF_MIXTRAL, HF_GPT2, HF_NEOX, HF_BERT, HF_DEEPSEEK, HF_QWEN } hf_family;

static int compare_names(const void *a, const void *b)
{
    return strcmp(*(const char *const *)a, *(const char *const *)b);
}

/* Sorted per object, not pairwise: a hostile 1 MB file may hold 10^5 keys in one object. */
int json_duplicate_key(const cJSON *json, const char **key)
{
    if (!json) return 0;
    size_t n = 0;
    for (const cJSON *c = json->child; c; c = c->next, n++) {
        int inner = json_duplicate_key(c, key);   /* depth is bounded by cJSON's nesting limit */
        if (inner) return inner;
    }
    if (!cJSON_IsObject(json) || n < 2) return 0;
    const char **names = malloc(n * sizeof *names);
    if (!names) return -1;
    size_t named = 0;
    for (const cJSON *c = json->child; c; c = c->next)
        if (c->string) names[named++] = c->string;
    qsort(names, named, sizeof *names, compare_names);
    int found = 0;
    for (size_t i = 1; i < named && !found; i++)
        if (strcmp(names[i - 1], names[i]) == 0) { *key = names[i]; found = 1; }
    free(names);
    return found;
}

static char *read_whole_file(const char *path, char *err, size_t errlen)
{
    FILE *f = fopen(path, "rb");
    if (!f) {
        snprintf(err, errlen, "%s: cannot open: %s", path, strerror(errno));
        return NULL;
    }
    struct stat st;
    if (fstat(fileno(f), &st) == 0 && S_ISDIR(st.st_mode)) {
        fclose(f);
        snprintf(err, errlen, "%s: is a directory, expected a config.json file", path);
        return NULL;
    }
    size_t cap = 1 << 16, len = 0;
    char *buf = malloc(cap);
    while (buf) {
        size_t got = fread(buf + len, 1, cap - len - 1, f);
        len += got;
        if (len < cap - 1) break;
        if (cap > (64u << 20)) { free(buf); buf = NULL; snprintf(err, errlen, "%s: larger than 64 MiB", path); fclose(f); return NULL; }
        char *grown = realloc(buf, cap * 2);
        if (!grown) { free(buf); buf = NULL; break; }
        buf = grown;
        cap *= 2;
    }
    int read_failed = ferror(f);
    fclose(f);
    if (!buf) { snprintf(err, errlen, "%s: out of memory", path); return NULL; }
    if (read_failed) { free(buf); snprintf(err, errlen, "%s: read error", path); return NULL; }
    buf[len] = '\0';
    if (memchr(buf, '\0', len)) {
        free(buf);
        snprintf(err, errlen, "%s: a NUL byte inside: not a JSON text", path);
        return NULL;
    }
    return buf;
}

/* Reads an integer field; `fallback` < 0 means the field is required. */
static int get_int(const cJSON *root, const char *path, const char *key, int64_t fallback,
                   int64_t *out, char *err, size_t errlen)
{
    const cJSON *item = cJSON_GetObjectItemCaseSensitive(root, key);
    if (!item || cJSON_IsNull(item)) {
        if (fallback < 0) {
            snprintf(err, errlen, "%s:%s: missing", path, key);
            return -1;
        }
        *out = fallback;
        return 0;
    }
    double v = cJSON_IsNumber(item) ? item->valuedouble : NAN;
    if (!isfinite(v) || v != floor(v) || v < 0) {
        snprintf(err, errlen, "%s:%s: expected a non-negative integer", path, key);
        return -1;
    }
    /* no model dimension comes near: a larger value is a typo or a hostile file, and 2^63 would not fit */
    if (v > HF_INT_MAX) {
        snprintf(err, errlen, "%s:%s: %.6g is too large (the limit is %.0e)", path, key, v, HF_INT_MAX);
        return -1;
    }
    *out = (int64_t)v;
    return 0;
}

/* A JSON boolean, or `fallback` when the key is absent or null; "yes", 1 and the like are refused by name. */
static int get_bool(const cJSON *root, const char *path, const char *key, int fallback, int *out, char *err,
                    size_t errlen)
{
    const cJSON *item = cJSON_GetObjectItemCaseSensitive(root, key);
    if (!item || cJSON_IsNull(item)) *out = fallback;
    else if (cJSON_IsBool(item)) *out = cJSON_IsTrue(item);
    else {
        snprintf(err, errlen, "%s:%s: expected true or false (a JSON boolean)", path, key);
        return -1;
    }
    return 0;
}

/* A finite JSON number, or `fallback` when the key is absent or null. */
static int get_number(const cJSON *root, const char *path, const char *key, double fallback, double *out, char *err,
                      size_t errlen)
{
    const cJSON *item = cJSON_GetObjectItemCaseSensitive(root, key);
    if (!item || cJSON_IsNull(item)) *out = fallback;
    else if (cJSON_IsNumber(item) && isfinite(item->valuedouble)) *out = item->valuedouble;
    else {
        snprintf(err, errlen, "%s:%s: expected a number", path, key);
        return -1;
    }
    return 0;
}

/* tie_word_embeddings (when the family reads it: tie_default >= 0) and the dropout probability under `dropout_key` */
static int read_tie_and_dropout(const cJSON *root, const char *path, int tie_default, const char *dropout_key,
                                double dropout_default, model_t *m, char *err, size_t errlen)
{
    int tied = 1;
    double dropout;
    if (tie_default >= 0 && get_bool(root, path, "tie_word_embeddings", tie_default, &tied, err, errlen)) return -1;
    if (get_number(root, path, dropout_key, dropout_default, &dropout, err, errlen)) return -1;
    m->tied_embeddings = tied;
    m->dropout = dropout > 0;
    return 0;
}

static int detect_family(const cJSON *root, const char *path, hf_family *family, char *err,
                         size_t errlen)
{
    const cJSON *type = cJSON_GetObjectItemCaseSensitive(root, "model_type");
    const char *name = cJSON_IsString(type) ? type->valuestring : NULL;
    const cJSON *archs = cJSON_GetObjectItemCaseSensitive(root, "architectures");
    const cJSON *arch0 = cJSON_IsArray(archs) ? cJSON_GetArrayItem(archs, 0) : NULL;
    const char *arch = cJSON_IsString(arch0) ? arch0->valuestring : "";
    if (!name) name = arch;
    static const struct { const char *prefix; hf_family family; } known[] = {
        {"llama", HF_LLAMA},   {"mistral", HF_LLAMA}, {"mixtral", HF_MIXTRAL},
        {"gpt2", HF_GPT2},     {"gpt_neox", HF_NEOX}, {"gptneox", HF_NEOX},
        {"bert", HF_BERT},     {"deepseek", HF_DEEPSEEK}, {"qwen", HF_QWEN},
    };
    for (size_t i = 0; i < sizeof known / sizeof known[0]; i++)
        if (strncasecmp(name, known[i].prefix, strlen(known[i].prefix)) == 0) {
            *family = known[i].family;
            return 0;
        }
    snprintf(err, errlen, "%s:model_type: '%s' is not a supported family (llama, mistral, mixtral, deepseek, qwen, gpt2, gpt_neox, bert)",
             path, name);
    return -1;
}

static void name_from_path(const char *path, char *out, size_t outlen)
{
    const char *base = strrchr(path, '/');
    base = base ? base + 1 : path;
    snprintf(out, outlen, "%s", base);
    char *dot = strrchr(out, '.');
    if (dot && strcasecmp(dot, ".json") == 0) *dot = '\0';
    /* a file literally named config.json says nothing: name it by its folder */
    if (strcasecmp(out, "config") == 0 && base != path) {
        int dirlen = (int)(base - 1 - path);
        const char *dir = path;
        for (int i = dirlen - 1; i >= 0; i--)
            if (path[i] == '/') { dir = path + i + 1; break; }
        snprintf(out, outlen, "%.*s", (int)(path + dirlen - dir), dir);
    }
}

/* The mixture-of-experts and latent-attention fields of Mixtral, Qwen-MoE and DeepSeek configs, each
 * 0 (or 1 experts) when absent (docs/model.md, "Mixture of experts", "Multi-head latent attention"). */
static int fill_moe_mla(const cJSON *root, const char *path, model_t *m, char *err, size_t errlen)
{
    int64_t local = 0, routed = 0, qwen = 0, shared_width = 0, sparse_step = 0;
    if (get_int(root, path, "num_local_experts", 0, &local, err, errlen) ||
        get_int(root, path, "n_routed_experts", 0, &routed, err, errlen) ||
        get_int(root, path, "num_experts", 0, &qwen, err, errlen) ||
        get_int(root, path, "num_experts_per_tok", 1, &m->top_k, err, errlen) ||
        get_int(root, path, "moe_intermediate_size", 0, &m->moe_ffn, err, errlen) ||
        get_int(root, path, "n_shared_experts", 0, &m->shared_experts, err, errlen) ||
        get_int(root, path, "shared_expert_intermediate_size", 0, &shared_width, err, errlen) ||
        get_int(root, path, "first_k_dense_replace", 0, &m->dense_layers, err, errlen) ||
        get_int(root, path, "moe_layer_freq", 0, &m->moe_layer_freq, err, errlen) ||
        get_int(root, path, "decoder_sparse_step", 0, &sparse_step, err, errlen) ||
        get_int(root, path, "q_lora_rank", 0, &m->q_lora_rank, err, errlen) ||
        get_int(root, path, "kv_lora_rank", 0, &m->kv_lora_rank, err, errlen) ||
        get_int(root, path, "qk_nope_head_dim", 0, &m->qk_nope_head_dim, err, errlen) ||
        get_int(root, path, "qk_rope_head_dim", 0, &m->qk_rope_head_dim, err, errlen) ||
        get_int(root, path, "v_head_dim", 0, &m->v_head_dim, err, errlen) ||
        get_int(root, path, "n_group", 0, &m->moe_groups, err, errlen) ||
        get_int(root, path, "topk_group", 0, &m->moe_group_limit, err, errlen) ||
        get_int(root, path, "num_nextn_predict_layers", 0, &m->mtp_layers, err, errlen))
        return -1;
    /* one group of all the experts limits nothing */
    if (m->moe_groups <= 1) m->moe_groups = m->moe_group_limit = 0;
    m->experts = local ? local : routed ? routed : qwen ? qwen : 1;
    if (m->experts == 1) m->top_k = 1;
    if (!m->moe_layer_freq) m->moe_layer_freq = sparse_step;
    /* Qwen's one shared expert has its own width: counted as that many experts of moe_ffn */
    if (shared_width > 0) {
        if (m->moe_ffn <= 0 || shared_width % m->moe_ffn != 0) {
            snprintf(err, errlen, "%s:shared_expert_intermediate_size: %lld is not a multiple of moe_intermediate_size",
                     path, (long long)shared_width);
            return -1;
        }
        m->shared_experts = shared_width / m->moe_ffn;
    }
    /* latent attention's head size, for what reads it: the query-key width */
    if (m->kv_lora_rank > 0) m->head_dim = m->qk_nope_head_dim + m->qk_rope_head_dim;
    return 0;
}

static int fill_model(const cJSON *root, const char *path, hf_family family, model_t *m, char *err,
                      size_t errlen)
{
    int64_t positions = 0;
    switch (family) {
    case HF_LLAMA:
    case HF_MIXTRAL:
    case HF_DEEPSEEK:
    case HF_QWEN:
        snprintf(m->family, sizeof m->family, "%s",
                 family == HF_MIXTRAL ? "mixtral" : family == HF_DEEPSEEK ? "deepseek" : family == HF_QWEN ? "qwen" : "llama");
        if (get_int(root, path, "num_hidden_layers", -1, &m->layers, err, errlen) ||
            get_int(root, path, "hidden_size", -1, &m->hidden, err, errlen) ||
            get_int(root, path, "num_attention_heads", -1, &m->heads, err, errlen) ||
            get_int(root, path, "num_key_value_heads", m->heads, &m->kv_heads, err, errlen) ||
            get_int(root, path, "intermediate_size", -1, &m->ffn, err, errlen) ||
            get_int(root, path, "vocab_size", -1, &m->vocab, err, errlen) ||
            get_int(root, path, "max_position_embeddings", 4096, &positions, err, errlen))
            return -1;
        if (m->heads == 0) { snprintf(err, errlen, "%s:num_attention_heads: must be positive", path); return -1; }
        if (get_int(root, path, "head_dim", m->hidden / m->heads, &m->head_dim, err, errlen)) return -1;
        m->ffn_kind = FFN_SWIGLU;
        m->norm = NORM_RMSNORM;
        m->position = POS_ROPE;
        int bias;
        if (read_tie_and_dropout(root, path, 0, "attention_dropout", 0.0, m, err, errlen) ||
            get_bool(root, path, "attention_bias", 0, &bias, err, errlen))
            return -1;
        m->bias = bias;
        if (fill_moe_mla(root, path, m, err, errlen)) return -1;
        if (family == HF_MIXTRAL && m->experts == 1) {
            snprintf(err, errlen, "%s:num_local_experts: missing", path);
            return -1;
        }
        break;
    case HF_GPT2: {
        int64_t inner;
        snprintf(m->family, sizeof m->family, "gpt2");
        if (get_int(root, path, "n_layer", -1, &m->layers, err, errlen) ||
            get_int(root, path, "n_embd", -1, &m->hidden, err, errlen) ||
            get_int(root, path, "n_head", -1, &m->heads, err, errlen) ||
            get_int(root, path, "vocab_size", -1, &m->vocab, err, errlen) ||
            get_int(root, path, "n_positions", 1024, &positions, err, errlen) ||
            get_int(root, path, "n_inner", 0, &inner, err, errlen))
            return -1;
        if (m->heads == 0) { snprintf(err, errlen, "%s:n_head: must be positive", path); return -1; }
        m->kv_heads = m->heads;
        m->head_dim = m->hidden / m->heads;
        m->ffn = inner ? inner : 4 * m->hidden;
        m->ffn_kind = FFN_GELU;
        m->norm = NORM_LAYERNORM;
        m->position = POS_LEARNED;
        m->max_positions = positions;
        if (read_tie_and_dropout(root, path, 1, "resid_pdrop", 0.1, m, err, errlen)) return -1;
        m->bias = 1;
        m->experts = m->top_k = 1;
        break;
    }
    case HF_NEOX:
    case HF_BERT:
        snprintf(m->family, sizeof m->family, family == HF_NEOX ? "neox" : "bert");
        if (get_int(root, path, "num_hidden_layers", -1, &m->layers, err, errlen) ||
            get_int(root, path, "hidden_size", -1, &m->hidden, err, errlen) ||
            get_int(root, path, "num_attention_heads", -1, &m->heads, err, errlen) ||
            get_int(root, path, "intermediate_size", -1, &m->ffn, err, errlen) ||
            get_int(root, path, "vocab_size", -1, &m->vocab, err, errlen) ||
            get_int(root, path, "max_position_embeddings", 2048, &positions, err, errlen))
            return -1;
        if (m->heads == 0) { snprintf(err, errlen, "%s:num_attention_heads: must be positive", path); return -1; }
        m->kv_heads = m->heads;
        m->head_dim = m->hidden / m->heads;
        m->ffn_kind = FFN_GELU;
        m->norm = NORM_LAYERNORM;
        m->bias = 1;
        m->experts = m->top_k = 1;
        if (family == HF_NEOX) {
            m->position = POS_ROPE;
            if (read_tie_and_dropout(root, path, 0, "hidden_dropout", 0.0, m, err, errlen)) return -1;
        } else {
            m->position = POS_LEARNED;
            m->max_positions = positions;
            if (read_tie_and_dropout(root, path, -1, "hidden_dropout_prob", 0.1, m, err, errlen)) return -1;
        }
        break;
    }
    m->seq = positions < HF_DEFAULT_SEQ_CAP ? positions : HF_DEFAULT_SEQ_CAP;
    if (m->seq < 1) m->seq = 2048;
    return 0;
}

int model_from_hf_config(const char *path, model_t *m, char *err, size_t errlen)
{
    memset(m, 0, sizeof *m);
    char *text = read_whole_file(path, err, errlen);
    if (!text) return -1;
    /* strict: one JSON object and nothing after it but white space (cJSON_Parse ignores trailing bytes) */
    const char *end = NULL;
    cJSON *root = cJSON_ParseWithOpts(text, &end, 0);
    if (root && cJSON_IsObject(root) && end && end[strspn(end, " \t\r\n")] != '\0') {
        const char *trailing = end + strspn(end, " \t\r\n");
        int line = 1;
        for (const char *p = text; p < trailing; p++) line += *p == '\n';
        char shown[17];
        size_t n = 0;
        for (; n < 16 && trailing[n]; n++) shown[n] = (unsigned char)trailing[n] < 0x20 ? '?' : trailing[n];
        shown[n] = '\0';
        snprintf(err, errlen, "%s:%d: bytes after the JSON object ('%s'); a config is one object", path, line, shown);
        cJSON_Delete(root);
        free(text);
        return -1;
    }
    if (!root || !cJSON_IsObject(root)) {
        const char *where = cJSON_GetErrorPtr();
        long offset = (where && where >= text) ? (long)(where - text) : 0;
        int line = 1;
        for (long i = 0; i < offset && text[i]; i++) line += text[i] == '\n';
        snprintf(err, errlen, "%s:%d: not a JSON object (malformed or truncated)", path, line);
        cJSON_Delete(root);
        free(text);
        return -1;
    }
    const char *twice = NULL;
    int duplicate = json_duplicate_key(root, &twice);
    if (duplicate) {
        if (duplicate > 0) snprintf(err, errlen, "%s:%s: the key is given twice in one object (which one is meant?)", path, twice);
        else snprintf(err, errlen, "%s: out of memory checking keys", path);
        cJSON_Delete(root);
        free(text);
        return -1;
    }
    hf_family family;
    int status = detect_family(root, path, &family, err, errlen);
    if (!status) status = fill_model(root, path, family, m, err, errlen);
    cJSON_Delete(root);
    free(text);
    if (status) return -1;
    name_from_path(path, m->name, sizeof m->name);
    snprintf(m->source, sizeof m->source, "Hugging Face config %s", path);
    return model_validate(m, path, err, errlen);
}
