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
    int64_t experts, top_k;           /* routed experts (1: a dense model) and how many each token meets */
    /* mixture of experts (docs/model.md, "Mixture of experts"); zero means "as a dense model" */
    int64_t moe_ffn;                  /* one expert's FFN width; 0: ffn */
    int64_t shared_experts;           /* always-on experts of width moe_ffn beside the routed ones (DeepSeek) */
    int64_t dense_layers;             /* the first k layers keep a dense FFN of width ffn (first_k_dense_replace) */
    int64_t moe_layer_freq;           /* of the rest, layer i is MoE when i % freq == 0; 0 or 1: every one */
    int64_t moe_groups, moe_group_limit; /* group-limited routing (DeepSeek's n_group, topk_group): experts in
                                            groups, each token's top_k within group_limit of them; 0: none */
    double moe_imbalance;             /* the busiest rank's expert tokens / the mean; 0: MOE_IMBALANCE_DEFAULT */
    double capacity_factor;           /* tokens an expert takes, x the mean, the rest dropped; 0: no limit */
    /* multi-head latent attention (DeepSeek-V2/V3); kv_lora_rank 0: ordinary attention */
    int64_t q_lora_rank;              /* 0: queries projected directly */
    int64_t kv_lora_rank, qk_nope_head_dim, qk_rope_head_dim, v_head_dim;
    int64_t mtp_layers;               /* multi-token prediction modules (DeepSeek-V3's depth D, num_nextn_predict_layers):
                                         each predicts one token further through one more layer of the last layer's
                                         kind and the shared output layer (docs/model.md, "Multi-token prediction");
                                         0: none.  Not in params_published (DeepSeek's 671B leaves them out). */
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
/* A key given twice in one object anywhere inside `json` (a cJSON tree):
 * 1 with *key set to it, 0 when every key is single, -1 when out of memory.
 * cJSON keeps both and answers lookups with the first, so a duplicate would be
 * read silently; the config and plan readers refuse it. */
struct cJSON;
int json_duplicate_key(const struct cJSON *json, const char **key);
/* Checks the architecture is self-consistent (heads divide, sizes positive
 * and small enough that no count overflows). */
int model_validate(const model_t *m, const char *where, char *err, size_t errlen);

/* The busiest EP rank's routed tokens over the mean when balancing is left as trained
 * (docs/model.md, "Mixture of experts": Switch Transformer's capacity factor 1.25). */
#define MOE_IMBALANCE_DEFAULT 1.25

int model_is_moe(const model_t *m);
int model_is_mla(const model_t *m);
/* Whether layer i (from 0) has routed experts. */
int model_layer_is_moe(const model_t *m, int64_t layer);
int64_t model_moe_layers(const model_t *m);
int64_t model_expert_ffn(const model_t *m);               /* moe_ffn, or ffn when 0 */
double model_moe_imbalance(const model_t *m);             /* moe_imbalance, or the default */

/* Parameter counts (see docs/model.md, "Parameters"). */
double model_norm_params(const model_t *m);
double model_embedding_params(const model_t *m);        /* token (+position, type, emb norm) */
double model_attention_params_per_layer(const model_t *m);
/* Of the attention's, those every TP rank holds whole (MLA's down projections and their norms). */
double model_attention_replicated_params(const model_t *m);
double model_ffn_params_per_expert(const model_t *m);    /* one routed (or shared) expert */
double model_dense_ffn_params(const model_t *m);         /* a dense layer's FFN (width ffn) */
/* A MoE layer's FFN with experts_counted routed experts, the shared experts and the router. */
double model_mlp_params_per_layer(const model_t *m, int64_t experts_counted);
double model_router_params(const model_t *m);
double model_layer_params(const model_t *m);             /* a MoE layer with all experts (a dense model's layer) */
double model_dense_layer_params(const model_t *m);       /* a layer with the dense FFN */
double model_final_params(const model_t *m);             /* final norm, or BERT's pooler */
double model_head_params(const model_t *m);              /* untied LM head, 0 when tied */
/* One multi-token prediction module's own parameters: its layer, the projection of the concatenated hidden
 * state and embedding (2h x h) and its three norms; the embedding and output layer are the model's. */
double model_mtp_params(const model_t *m);
/* Whether a multi-token prediction module's layer is a MoE one: it is of the last layer's kind (Megatron's
 * last_layer_is_moe). */
int model_mtp_layer_is_moe(const model_t *m);
double model_params_total(const model_t *m);
double model_params_active(const model_t *m);            /* top_k experts per token */

#endif
