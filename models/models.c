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

double model_attention_params_per_layer(const model_t *m)
{
    double h = (double)m->hidden, q = (double)(m->heads * m->head_dim),
           kv = (double)(m->kv_heads * m->head_dim);
    return h * q + 2.0 * h * kv + q * h + (m->bias ? q + 2.0 * kv + h : 0.0);
}

double model_ffn_params_per_expert(const model_t *m)
{
    double h = (double)m->hidden, f = (double)m->ffn;
    if (m->ffn_kind == FFN_SWIGLU) return 3.0 * h * f + (m->bias ? 2.0 * f + h : 0.0);
    return 2.0 * h * f + (m->bias ? f + h : 0.0);
}

double model_mlp_params_per_layer(const model_t *m, int64_t experts_counted)
{
    double router = m->experts > 1 ? (double)m->hidden * (double)m->experts : 0.0;
    return (double)experts_counted * model_ffn_params_per_expert(m) + router;
}

double model_layer_params(const model_t *m)
{
    return model_attention_params_per_layer(m) + model_mlp_params_per_layer(m, m->experts) +
           2.0 * model_norm_params(m);
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

double model_params_total(const model_t *m)
{
    return model_embedding_params(m) + (double)m->layers * model_layer_params(m) +
           model_final_params(m) + model_head_params(m);
}

double model_params_active(const model_t *m)
{
    double layer = model_attention_params_per_layer(m) + model_mlp_params_per_layer(m, m->top_k) +
                   2.0 * model_norm_params(m);
    return model_embedding_params(m) + (double)m->layers * layer + model_final_params(m) +
           model_head_params(m);
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
        csv_get_string(t, r, "source", 0, m->source, sizeof m->source, err, errlen))
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
