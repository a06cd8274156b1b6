/* models: the model zoo (models/zoo.csv), parameter counting, and import of
 * Hugging Face config.json files. */
#ifndef SEXTANT_MODELS_H
#define SEXTANT_MODELS_H

#include <stddef.h>
#include <stdint.h>

typedef enum { FFN_GELU = 0, FFN_SWIGLU } ffn_kind_t;
typedef enum { NORM_LAYERNORM = 0, NORM_RMSNORM } norm_kind_t;
typedef enum { POS_LEARNED = 0, POS_ROPE, POS_ALIBI } position_kind_t;

typedef struct {
    char name[64];
    char family[32];
    int64_t layers, hidden, heads, kv_heads, head_dim, ffn;
    ffn_kind_t ffn_kind;
    int64_t vocab, seq, max_positions;
    position_kind_t position;
    int tied_embeddings;
    norm_kind_t norm;
    int bias;
    int dropout;
    int64_t experts, top_k;
    double params_published;          /* 0 when unknown (imported configs) */
    double active_params_published;
    char source[512];
} model_t;

typedef struct {
    model_t *models;
    int count;
} model_zoo;

/* Loads a zoo CSV (models/zoo.csv). */
int model_zoo_load(const char *path, model_zoo *zoo, char *err, size_t errlen);
void model_zoo_free(model_zoo *zoo);
/* Case-insensitive; NULL when absent. */
const model_t *model_zoo_find(const model_zoo *zoo, const char *name);
/* Reads a Hugging Face config.json (LLaMA, Mistral, Mixtral, GPT-2, GPT-NeoX,
 * BERT families). */
int model_from_hf_config(const char *path, model_t *model, char *err, size_t errlen);
/* Checks the architecture is self-consistent (heads divide, sizes positive
 * and small enough that no count overflows). */
int model_validate(const model_t *m, const char *where, char *err, size_t errlen);

/* Parameter counts (see docs/model.md, "Parameters"). */
double model_norm_params(const model_t *m);
double model_embedding_params(const model_t *m);        /* token (+position, type, emb norm) */
double model_attention_params_per_layer(const model_t *m);
double model_ffn_params_per_expert(const model_t *m);
double model_mlp_params_per_layer(const model_t *m, int64_t experts_counted);
double model_layer_params(const model_t *m);             /* all experts */
double model_final_params(const model_t *m);             /* final norm, or BERT's pooler */
double model_head_params(const model_t *m);              /* untied LM head, 0 when tied */
double model_params_total(const model_t *m);
double model_params_active(const model_t *m);            /* top_k experts per token */

#endif
