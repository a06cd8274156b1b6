/* The training step (validator/train.c, step.h): the layout flags checked against the model before
 * anything starts (train.h). */
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>

#include "step.h"

int train_check(const model_t *m, const train_options *o)
{
    int gpt2 = !strcasecmp(m->family, "gpt2") || !strcasecmp(m->family, "gpt");
    int llama = !strcasecmp(m->family, "llama") || !strcasecmp(m->family, "mistral") || !strcasecmp(m->family, "mixtral");
    int moe = m->experts > 1, ep = o->ep > 1 ? o->ep : 1;
    const char *bad = NULL;
    char why[256];
    if ((!gpt2 && !llama) || (moe && !llama)) {
        snprintf(why, sizeof why, "%s is a %s model; the training step covers the GPT-2 and LLaMA families (MoE: LLaMA-style)",
                 m->name, m->family);
        bad = why;
    } else if (moe && (m->dense_layers > 0 || m->moe_layer_freq > 1 || m->shared_experts > 0 || m->kv_lora_rank > 0 ||
                       (m->moe_ffn > 0 && m->moe_ffn != m->ffn) || m->capacity_factor > 0 || m->moe_groups > 0)) {
        snprintf(why, sizeof why, "%s: the training step's MoE has every layer a mixture of experts of width ffn, no shared "
                 "experts, MLA, capacity factor or group-limited routing", m->name);
        bad = why;
    } else if (moe && (m->experts > MOE_EXPERTS_MAX || m->top_k < 1 || m->top_k > SX_MOE_TOPK_MAX || m->top_k > m->experts ||
                       m->hidden % 8)) {
        snprintf(why, sizeof why, "%s: %lld experts, top-%lld, hidden %lld: the training step takes up to %d experts, top-k up "
                 "to %d, hidden a multiple of 8", m->name, (long long)m->experts, (long long)m->top_k, (long long)m->hidden,
                 MOE_EXPERTS_MAX, SX_MOE_TOPK_MAX);
        bad = why;
    } else if (moe && (o->tp > 1 || o->pp > 1 || o->recompute != RECOMPUTE_NONE || o->zero > 1)) {
        snprintf(why, sizeof why, "%s is a mixture of experts: the training step runs it with --tp 1 --pp 1, no recomputation "
                 "and --zero 0 or 1 (expert parallelism inside --dp)", m->name);
        bad = why;
    } else if (ep > 1 && !moe) {
        snprintf(why, sizeof why, "--ep %d: %s has no experts to split", ep, m->name);
        bad = why;
    } else if (o->ep < 0 || ep > MOE_EP_MAX || o->dp % ep || (moe && m->experts % ep)) {
        snprintf(why, sizeof why, "--ep %d: it must divide --dp %d and %s's %lld experts (at most %d)", o->ep, o->dp, m->name,
                 (long long)m->experts, MOE_EP_MAX);
        bad = why;
    } else if (m->position == POS_LEARNED && o->seq > m->max_positions) {
        snprintf(why, sizeof why, "--seq %d exceeds %s's %lld positions", o->seq, m->name, (long long)m->max_positions);
        bad = why;
    } else if (m->heads % m->kv_heads || m->heads * m->head_dim > m->hidden) {
        snprintf(why, sizeof why, "%s: heads %lld, kv heads %lld, head size %lld do not fit the step's buffers", m->name,
                 (long long)m->heads, (long long)m->kv_heads, (long long)m->head_dim);
        bad = why;
    } else if (o->mbs < 1 || o->seq < 1 || o->tp < 1 || o->pp < 1 || o->dp < 1) {
        bad = "--mbs, --seq, --tp, --pp and --dp must be positive";
    } else if (m->heads % o->tp || m->kv_heads % o->tp || m->ffn % o->tp) {
        snprintf(why, sizeof why, "--tp %d must divide %s's heads (%lld), KV heads (%lld) and FFN width (%lld)", o->tp, m->name,
                 (long long)m->heads, (long long)m->kv_heads, (long long)m->ffn);
        bad = why;
    } else if (o->pp > m->layers) {
        snprintf(why, sizeof why, "--pp %d exceeds %s's %lld layers", o->pp, m->name, (long long)m->layers);
        bad = why;
    } else if (o->gbs % (o->mbs * o->dp)) {
        snprintf(why, sizeof why, "--gbs %d is not a multiple of --mbs x --dp = %d", o->gbs, o->mbs * o->dp);
        bad = why;
    } else if (o->vpp > 1 && o->pp < 2) {
        snprintf(why, sizeof why, "--vpp %d: interleaving needs --pp of 2 or more", o->vpp);
        bad = why;
    } else if (o->vpp > PIPE_MAX_CHUNKS) {
        snprintf(why, sizeof why, "--vpp %d: at most %d chunks per stage", o->vpp, PIPE_MAX_CHUNKS);
        bad = why;
    } else if (o->vpp > 1 && m->layers % ((int64_t)o->pp * o->vpp)) {
        snprintf(why, sizeof why, "--vpp %d: %s's %lld layers do not split into --pp %d x --vpp %d equal chunks", o->vpp, m->name,
                 (long long)m->layers, o->pp, o->vpp);
        bad = why;
    } else if (o->vpp > 1 && (o->gbs / (o->mbs * o->dp)) % o->pp) {
        snprintf(why, sizeof why, "--vpp %d: interleaving needs micro-batches per step (gbs / (mbs x dp) = %d) to be a multiple "
                 "of --pp %d", o->vpp, o->gbs / (o->mbs * o->dp), o->pp);
        bad = why;
    } else if (o->gbs / (o->mbs * o->dp) > 4096) {
        bad = "--gbs: more than 4096 micro-batches per step";
    } else if (o->sp && o->tp > 1 && (o->mbs * o->seq) % o->tp) {
        snprintf(why, sizeof why, "--sp: mbs x seq = %d tokens do not split over --tp %d", o->mbs * o->seq, o->tp);
        bad = why;
    } else if (o->zero < 0 || o->zero > 3) {
        bad = "--zero: expected 0, 1 (the distributed optimizer), 2 (and sharded gradients) or 3 (and sharded parameters)";
    } else if (o->zero >= 2 && o->dp > 1 && o->pp > 1 && m->tied_embeddings) {
        /* the two stages' copies of a tied table would add sharded gradients of differently cut buckets */
        snprintf(why, sizeof why, "--zero %d with --pp %d and --dp %d: %s's tied embedding is summed across stages whole; "
                 "ZeRO-2/3 run with --pp 1 or an untied model", o->zero, o->pp, o->dp, m->name);
        bad = why;
    } else if (o->recompute != RECOMPUTE_NONE && o->recompute != RECOMPUTE_FULL) {
        bad = "--recompute: the training step has none and full";
    } else if (o->flash && m->head_dim != 64 && m->head_dim != 128) {
        snprintf(why, sizeof why, "--attention flash: head size %lld; the fused kernel has 64 and 128", (long long)m->head_dim);
        bad = why;
    } else if (o->cp > 2) {
        snprintf(why, sizeof why, "--cp %d: the training step's ring has one peer (--cp 2); longer rings are not built", o->cp);
        bad = why;
    } else if (o->cp == 2 && !o->flash) {
        bad = "--cp 2 needs --attention flash: the ring's blocks are the fused kernel's, merged by their log-sum-exp";
    } else if (o->cp == 2 && o->seq % (2 * o->cp)) {
        snprintf(why, sizeof why, "--cp %d: --seq %d is not divisible by 2 x cp = %d (causal load balancing gives each rank two "
                 "of 2 x cp chunks)", o->cp, o->seq, 2 * o->cp);
        bad = why;
    } else if (o->cp == 2 && (o->tp > 1 || o->pp > 1)) {
        bad = "--cp 2 with --tp or --pp: the training step runs context parallelism beside data parallelism only";
    } else if (o->cp == 2 && o->zero >= 1 && o->dp > 1) {
        bad = "--cp 2 with --zero and --dp 2 or more: the ZeRO shards would be cut over DP alone, the gradients summed over DP x CP";
    } else if (o->cp == 2 && model_is_moe(m)) {
        bad = "--cp 2 with a model with experts: the training step runs the ring on dense models only";
    } else if (o->cp == 2 && o->check_gradients) {
        bad = "check-gradients runs one GPU";
    } else if (o->steps < o->warmup + 3) {
        snprintf(why, sizeof why, "--steps must be at least %d", o->warmup + 3);
        bad = why;
    }
    if (bad) {
        fprintf(stderr, "sextant-gpu train: %s\n", bad);
        return -1;
    }
    return 0;
}
