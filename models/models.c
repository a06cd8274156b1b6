/* The model zoo and parameter counting.  Formulas: docs/model.md, "Parameters". */
#include "models.h"
#include "hwdb.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>

/* Sizes beyond these are typos; they also keep every product of two sizes
 * far inside the exact range of a double (2^53). */
#define MAX_DIM 1000000
#define MAX_LAYERS 100000
#define MAX_MTP_LAYERS 16   /* DeepSeek-V3 uses 1; its report tried up to 2 */
#define MAX_VOCAB 100000000

double model_norm_params(const model_t *m)
{
    return m->norm == NORM_LAYERNORM ? 2.0 * (double)m->hidden : (double)m->hidden;
}

double model_embedding_params(const model_t *m)
{
    double h = (double)m->hidden;
    double p = (double)m->vocab * h;
    if (m->position == POS_LEARNED) p += (double)m->max_positions * h;
    if (strcasecmp(m->family, "bert") == 0) p += 2.0 * h + 2.0 * h; /* token types, embedding LayerNorm */
    if (strcasecmp(m->family, "bloom") == 0) p += 2.0 * h;           /* embedding LayerNorm */
    return p;
}

int model_is_moe(const model_t *m) { return m->experts > 1; }

int model_is_mla(const model_t *m) { return m->kv_lora_rank > 0; }

int model_layer_is_moe(const model_t *m, int64_t layer)
{
    /* Hugging Face's DeepSeek rule: n_routed_experts and layer >= first_k_dense_replace and
     * layer % moe_layer_freq == 0 */
    if (!model_is_moe(m) || layer < m->dense_layers) return 0;
    return m->moe_layer_freq <= 1 || layer % m->moe_layer_freq == 0;
}

int64_t model_moe_layers(const model_t *m)
{
    if (!model_is_moe(m)) return 0;
    int64_t n = 0;
    for (int64_t i = 0; i < m->layers; i++) n += model_layer_is_moe(m, i);
    return n;
}

int64_t model_expert_ffn(const model_t *m) { return m->moe_ffn > 0 ? m->moe_ffn : m->ffn; }

double model_moe_imbalance(const model_t *m) { return m->moe_imbalance > 0.0 ? m->moe_imbalance : MOE_IMBALANCE_DEFAULT; }

double model_attention_replicated_params(const model_t *m)
{
    if (!model_is_mla(m)) return 0.0;
    double h = (double)m->hidden, q = (double)m->q_lora_rank, kv = (double)m->kv_lora_rank;
    double rope = (double)m->qk_rope_head_dim;
    /* the down projections and the norms of their latents (Megatron keeps them whole on every TP rank) */
    return (q > 0 ? h * q + q : 0.0) + h * (kv + rope) + kv;
}

double model_attention_params_per_layer(const model_t *m)
{
    double h = (double)m->hidden;
    if (model_is_mla(m)) {
        /* DeepSeek-V2 section 2.1: queries through a rank-q_lora latent (or directly), keys and values
         * up from the rank-kv_lora latent, a shared rotary key of qk_rope per token */
        double heads = (double)m->heads, qk = (double)(m->qk_nope_head_dim + m->qk_rope_head_dim);
        double q = (double)m->q_lora_rank, kv = (double)m->kv_lora_rank;
        double q_up = (q > 0 ? q : h) * heads * qk;
        double kv_up = kv * heads * (double)(m->qk_nope_head_dim + m->v_head_dim);
        double out = heads * (double)m->v_head_dim * h;
        return model_attention_replicated_params(m) + q_up + kv_up + out;
    }
    double q = (double)(m->heads * m->head_dim), kv = (double)(m->kv_heads * m->head_dim);
    return h * q + 2.0 * h * kv + q * h + (m->bias ? q + 2.0 * kv + h : 0.0);
}

static double ffn_params(const model_t *m, double f)
{
    double h = (double)m->hidden;
    if (m->ffn_kind == FFN_SWIGLU) return 3.0 * h * f + (m->bias ? 2.0 * f + h : 0.0);
    return 2.0 * h * f + (m->bias ? f + h : 0.0);
}

double model_ffn_params_per_expert(const model_t *m) { return ffn_params(m, (double)model_expert_ffn(m)); }

double model_dense_ffn_params(const model_t *m) { return ffn_params(m, (double)m->ffn); }

double model_router_params(const model_t *m) { return model_is_moe(m) ? (double)m->hidden * (double)m->experts : 0.0; }

double model_mlp_params_per_layer(const model_t *m, int64_t experts_counted)
{
    if (!model_is_moe(m)) return model_dense_ffn_params(m);
    return (double)(experts_counted + m->shared_experts) * model_ffn_params_per_expert(m) + model_router_params(m);
}

double model_layer_params(const model_t *m)
{
    return model_attention_params_per_layer(m) + model_mlp_params_per_layer(m, m->experts) +
           2.0 * model_norm_params(m);
}

double model_dense_layer_params(const model_t *m)
{
    return model_attention_params_per_layer(m) + model_dense_ffn_params(m) + 2.0 * model_norm_params(m);
}

double model_final_params(const model_t *m)
{
    if (strcasecmp(m->family, "bert") == 0) /* post-LN: no final norm, a pooler instead */
        return (double)m->hidden * (double)m->hidden + (double)m->hidden;
    return model_norm_params(m);
}

double model_head_params(const model_t *m)
{
    return m->tied_embeddings ? 0.0 : (double)m->vocab * (double)m->hidden;
}

/* The layers' parameters with experts_counted routed experts in each MoE layer. */
static double layers_params(const model_t *m, int64_t experts_counted)
{
    double moe = (double)model_moe_layers(m), dense = (double)m->layers - moe;
    double moe_layer = model_attention_params_per_layer(m) + model_mlp_params_per_layer(m, experts_counted) +
                       2.0 * model_norm_params(m);
    return moe * moe_layer + dense * model_dense_layer_params(m);
}

int model_mtp_layer_is_moe(const model_t *m) { return model_layer_is_moe(m, m->layers - 1); }

double model_mtp_params(const model_t *m)
{
    double h = (double)m->hidden;
    double layer = model_mtp_layer_is_moe(m) ? model_layer_params(m) : model_dense_layer_params(m);
    return layer + 2.0 * h * h + 3.0 * model_norm_params(m);
}

double model_params_total(const model_t *m)
{
    return model_embedding_params(m) + layers_params(m, m->experts) + model_final_params(m) + model_head_params(m);
}

double model_params_active(const model_t *m)
{
    return model_embedding_params(m) + layers_params(m, m->top_k) + model_final_params(m) + model_head_params(m);
}

int model_validate(const model_t *m, const char *where, char *err, size_t errlen)
{
    struct { const char *field; int64_t value, min, max; } checks[] = {
        {"layers", m->layers, 1, MAX_LAYERS},   {"hidden", m->hidden, 1, MAX_DIM},
        {"heads", m->heads, 1, MAX_DIM},        {"kv_heads", m->kv_heads, 1, MAX_DIM},
        {"head_dim", m->head_dim, 1, MAX_DIM},  {"ffn", m->ffn, 1, 16 * (int64_t)MAX_DIM},
        {"vocab", m->vocab, 1, MAX_VOCAB},      {"seq", m->seq, 1, 100000000},
        {"max_positions", m->max_positions, 0, 100000000},
        {"experts", m->experts, 1, 100000},     {"top_k", m->top_k, 1, 100000},
        {"moe_ffn", m->moe_ffn, 0, 16 * (int64_t)MAX_DIM}, {"shared_experts", m->shared_experts, 0, 100000},
        {"dense_layers", m->dense_layers, 0, MAX_LAYERS}, {"moe_layer_freq", m->moe_layer_freq, 0, MAX_LAYERS},
        {"q_lora_rank", m->q_lora_rank, 0, MAX_DIM},  {"kv_lora_rank", m->kv_lora_rank, 0, MAX_DIM},
        {"qk_nope_head_dim", m->qk_nope_head_dim, 0, MAX_DIM}, {"qk_rope_head_dim", m->qk_rope_head_dim, 0, MAX_DIM},
        {"v_head_dim", m->v_head_dim, 0, MAX_DIM},
        {"moe_groups", m->moe_groups, 0, 100000}, {"moe_group_limit", m->moe_group_limit, 0, 100000},
        {"mtp_layers", m->mtp_layers, 0, MAX_MTP_LAYERS},
    };
    for (size_t i = 0; i < sizeof checks / sizeof checks[0]; i++)
        if (checks[i].value < checks[i].min || checks[i].value > checks[i].max) {
            snprintf(err, errlen, "%s:%s: %lld is outside [%lld, %lld]", where, checks[i].field,
                     (long long)checks[i].value, (long long)checks[i].min, (long long)checks[i].max);
            return -1;
        }
    if (m->heads % m->kv_heads != 0) {
        snprintf(err, errlen, "%s:kv_heads: %lld does not divide heads (%lld)", where,
                 (long long)m->kv_heads, (long long)m->heads);
        return -1;
    }
    if (m->top_k > m->experts) {
        snprintf(err, errlen, "%s:top_k: %lld is more than experts (%lld)", where,
                 (long long)m->top_k, (long long)m->experts);
        return -1;
    }
    if (m->moe_group_limit > m->moe_groups || (m->moe_groups > 0 && (!model_is_moe(m) || m->experts % m->moe_groups))) {
        snprintf(err, errlen, "%s:moe_groups: %lld groups (limit %lld) must divide the %lld experts, the limit at most them",
                 where, (long long)m->moe_groups, (long long)m->moe_group_limit, (long long)m->experts);
        return -1;
    }
    if (model_is_moe(m) && m->dense_layers >= m->layers) {
        snprintf(err, errlen, "%s:dense_layers: %lld leaves no layer for the %lld experts", where,
                 (long long)m->dense_layers, (long long)m->experts);
        return -1;
    }
    if (m->moe_imbalance != 0.0 && !(m->moe_imbalance >= 1.0 && m->moe_imbalance <= 100.0)) {
        snprintf(err, errlen, "%s:moe_imbalance: %g is outside [1, 100] (the busiest rank's tokens over the mean)", where,
                 m->moe_imbalance);
        return -1;
    }
    if (m->capacity_factor != 0.0 && !(m->capacity_factor > 0.0 && m->capacity_factor <= 100.0)) {
        snprintf(err, errlen, "%s:capacity_factor: %g is outside (0, 100]", where, m->capacity_factor);
        return -1;
    }
    if (model_is_mla(m) && (m->qk_nope_head_dim < 1 || m->qk_rope_head_dim < 1 || m->v_head_dim < 1)) {
        snprintf(err, errlen, "%s:kv_lora_rank: latent attention needs qk_nope_head_dim, qk_rope_head_dim and v_head_dim",
                 where);
        return -1;
    }
    if (!model_is_mla(m) && m->q_lora_rank > 0) {
        snprintf(err, errlen, "%s:q_lora_rank: set without kv_lora_rank (latent attention needs both)", where);
        return -1;
    }
    if (m->position == POS_LEARNED && m->max_positions < 1) {
        snprintf(err, errlen, "%s:max_positions: learned positions need a table size", where);
        return -1;
    }
    return 0;
}

static int parse_choice(const csv_table *t, int row, const char *column, const char *const *choices,
                        int nchoices, int *out, char *err, size_t errlen)
{
    char text[32];
    if (csv_get_string(t, row, column, 0, text, sizeof text, err, errlen) != 0) return -1;
    for (int i = 0; i < nchoices; i++)
        if (strcasecmp(text, choices[i]) == 0) { *out = i; return 0; }
    char allowed[128] = "";
    for (int i = 0; i < nchoices; i++)
        snprintf(allowed + strlen(allowed), sizeof allowed - strlen(allowed), "%s%s", i ? "|" : "", choices[i]);
    snprintf(err, errlen, "%s:%d:%s: '%s' is not one of %s", t->path, t->line[row], column, text, allowed);
    return -1;
}

/* A column older zoo files lack: absent or empty reads as 0. */
static int optional_int64(const csv_table *t, int r, const char *column, int64_t max, int64_t *out, char *err,
                          size_t errlen)
{
    const char *cell = csv_table_cell(t, r, column);
    *out = 0;
    if (!cell || !*cell) return 0;
    return csv_get_int64(t, r, column, 0, max, out, err, errlen);
}

static int load_row(const csv_table *t, int r, model_t *m, char *err, size_t errlen)
{
    static const char *const ffn_kinds[] = {"gelu", "swiglu"};
    static const char *const norms[] = {"layernorm", "rmsnorm"};
    static const char *const positions[] = {"learned", "rope", "alibi"};
    int ffn_kind, norm, position;
    int64_t tied, bias, dropout;
    memset(m, 0, sizeof *m);
    if (csv_get_string(t, r, "name", 0, m->name, sizeof m->name, err, errlen) ||
        csv_get_string(t, r, "family", 0, m->family, sizeof m->family, err, errlen) ||
        csv_get_int64(t, r, "layers", 1, MAX_LAYERS, &m->layers, err, errlen) ||
        csv_get_int64(t, r, "hidden", 1, MAX_DIM, &m->hidden, err, errlen) ||
        csv_get_int64(t, r, "heads", 1, MAX_DIM, &m->heads, err, errlen) ||
        csv_get_int64(t, r, "kv_heads", 1, MAX_DIM, &m->kv_heads, err, errlen) ||
        csv_get_int64(t, r, "head_dim", 1, MAX_DIM, &m->head_dim, err, errlen) ||
        csv_get_int64(t, r, "ffn", 1, 16 * (int64_t)MAX_DIM, &m->ffn, err, errlen) ||
        parse_choice(t, r, "ffn_kind", ffn_kinds, 2, &ffn_kind, err, errlen) ||
        csv_get_int64(t, r, "vocab", 1, MAX_VOCAB, &m->vocab, err, errlen) ||
        csv_get_int64(t, r, "seq", 1, 100000000, &m->seq, err, errlen) ||
        csv_get_int64(t, r, "max_positions", 0, 100000000, &m->max_positions, err, errlen) ||
        parse_choice(t, r, "position", positions, 3, &position, err, errlen) ||
        csv_get_int64(t, r, "tied_embeddings", 0, 1, &tied, err, errlen) ||
        parse_choice(t, r, "norm", norms, 2, &norm, err, errlen) ||
        csv_get_int64(t, r, "bias", 0, 1, &bias, err, errlen) ||
        csv_get_int64(t, r, "dropout", 0, 1, &dropout, err, errlen) ||
        csv_get_int64(t, r, "experts", 1, 100000, &m->experts, err, errlen) ||
        csv_get_int64(t, r, "top_k", 1, 100000, &m->top_k, err, errlen) ||
        csv_get_double(t, r, "params_published", 1, 1e16, &m->params_published, err, errlen) ||
        csv_get_double(t, r, "active_params_published", 1, 1e16, &m->active_params_published, err, errlen) ||
        csv_get_string(t, r, "source", 0, m->source, sizeof m->source, err, errlen) ||
        optional_int64(t, r, "moe_ffn", 16 * (int64_t)MAX_DIM, &m->moe_ffn, err, errlen) ||
        optional_int64(t, r, "shared_experts", 100000, &m->shared_experts, err, errlen) ||
        optional_int64(t, r, "dense_layers", MAX_LAYERS, &m->dense_layers, err, errlen) ||
        optional_int64(t, r, "moe_layer_freq", MAX_LAYERS, &m->moe_layer_freq, err, errlen) ||
        optional_int64(t, r, "q_lora_rank", MAX_DIM, &m->q_lora_rank, err, errlen) ||
        optional_int64(t, r, "kv_lora_rank", MAX_DIM, &m->kv_lora_rank, err, errlen) ||
        optional_int64(t, r, "qk_nope_head_dim", MAX_DIM, &m->qk_nope_head_dim, err, errlen) ||
        optional_int64(t, r, "qk_rope_head_dim", MAX_DIM, &m->qk_rope_head_dim, err, errlen) ||
        optional_int64(t, r, "v_head_dim", MAX_DIM, &m->v_head_dim, err, errlen) ||
        optional_int64(t, r, "moe_groups", 100000, &m->moe_groups, err, errlen) ||
        optional_int64(t, r, "moe_group_limit", 100000, &m->moe_group_limit, err, errlen) ||
        optional_int64(t, r, "mtp_layers", MAX_MTP_LAYERS, &m->mtp_layers, err, errlen))
        return -1;
    m->ffn_kind = (ffn_kind_t)ffn_kind;
    m->norm = (norm_kind_t)norm;
    m->position = (position_kind_t)position;
    m->tied_embeddings = (int)tied;
    m->bias = (int)bias;
    m->dropout = (int)dropout;
    char where[600];
    snprintf(where, sizeof where, "%s:%d", t->path, t->line[r]);
    return model_validate(m, where, err, errlen);
}

int model_zoo_load(const char *path, model_zoo *zoo, char *err, size_t errlen)
{
    memset(zoo, 0, sizeof *zoo);
    csv_table t;
    if (csv_table_read(path, &t, err, errlen) != 0) return -1;
    zoo->models = calloc((size_t)(t.nrows ? t.nrows : 1), sizeof *zoo->models);
    if (!zoo->models) {
        snprintf(err, errlen, "%s: out of memory", path);
        csv_table_free(&t);
        return -1;
    }
    int status = 0;
    for (int r = 0; r < t.nrows && !status; r++) {
        status = load_row(&t, r, &zoo->models[zoo->count], err, errlen);
        if (!status && model_zoo_find(zoo, zoo->models[zoo->count].name)) {
            snprintf(err, errlen, "%s:%d:name: '%s' appears twice", path, t.line[r], zoo->models[zoo->count].name);
            status = -1;
        }
        if (!status) zoo->count++;
    }
    csv_table_free(&t);
    if (status) model_zoo_free(zoo);
    return status;
}

void model_zoo_free(model_zoo *zoo)
{
    if (!zoo) return;
    free(zoo->models);
    memset(zoo, 0, sizeof *zoo);
}

const model_t *model_zoo_find(const model_zoo *zoo, const char *name)
{
    for (int i = 0; i < zoo->count; i++)
        if (strcasecmp(zoo->models[i].name, name) == 0) return &zoo->models[i];
    return NULL;
}
