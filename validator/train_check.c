/* The training step (validator/train.c, step.h): the layout flags checked against the model before
 * anything starts (train.h). */
#include <limits.h>
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
    int moe = m->experts > 1, ep = o->l.ep > 1 ? o->l.ep : 1;
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
                       m->hidden % 8 || model_expert_ffn(m) % (8 * (o->l.tp > 1 ? o->l.tp : 1)))) {
        snprintf(why, sizeof why, "%s: %lld experts, top-%lld, hidden %lld, expert FFN %lld: the training step takes up to %d "
                 "experts, top-k up to %d, hidden and the expert FFN width on a rank multiples of 8", m->name,
                 (long long)m->experts, (long long)m->top_k, (long long)m->hidden, (long long)model_expert_ffn(m),
                 MOE_EXPERTS_MAX, SX_MOE_TOPK_MAX);
        bad = why;
    } else if (moe && o->l.tp > 1 && (o->l.tp != 2 || !o->l.sp || o->l.ep > 1 || (o->l.etp > 0 && o->l.etp != o->l.tp) ||
                                      model_expert_ffn(m) % o->l.tp)) {
        snprintf(why, sizeof why, "%s is a mixture of experts: with --tp the training step runs --tp 2 --sp, each expert split "
                 "over the TP group (expert TP = TP, --ep 1), its FFN width divisible by 2", m->name);
        bad = why;
    } else if (m->mtp_layers > 0) {
        snprintf(why, sizeof why, "%s has %lld multi-token prediction module(s), which the training step does not run "
                 "(the planner costs them)", m->name, (long long)m->mtp_layers);
        bad = why;
    } else if (ep > 1 && !moe) {
        snprintf(why, sizeof why, "--ep %d: %s has no experts to split", ep, m->name);
        bad = why;
    } else if (o->l.ep < 0 || ep > MOE_EP_MAX || (o->l.dp * layout_cp(&o->l)) % ep || (moe && m->experts % ep)) {
        snprintf(why, sizeof why, "--ep %lld: it must divide --dp x --cp %lld and %s's %lld experts (at most %d)",
                 (long long)o->l.ep, (long long)(o->l.dp * layout_cp(&o->l)), m->name,
                 (long long)m->experts, MOE_EP_MAX);
        bad = why;
    } else if (m->position == POS_LEARNED && o->l.seq > m->max_positions) {
        snprintf(why, sizeof why, "--seq %lld exceeds %s's %lld positions", (long long)o->l.seq, m->name,
                 (long long)m->max_positions);
        bad = why;
    } else if (m->heads % m->kv_heads || m->heads * m->head_dim > m->hidden) {
        snprintf(why, sizeof why, "%s: heads %lld, kv heads %lld, head size %lld do not fit the step's buffers", m->name,
                 (long long)m->heads, (long long)m->kv_heads, (long long)m->head_dim);
        bad = why;
    } else if (o->l.mbs < 1 || o->l.seq < 1 || o->l.tp < 1 || o->l.pp < 1 || o->l.dp < 1) {
        bad = "--mbs, --seq, --tp, --pp and --dp must be positive";
    } else if ((double)o->l.tp * (double)o->l.pp * (double)o->l.dp * (double)layout_cp(&o->l) > 65536.0 ||
               (double)o->l.gbs * (double)o->l.seq > (double)INT_MAX) {
        /* the step counts ranks and tokens in int */
        bad = "--tp x --pp x --dp x --cp: more than 65536 GPUs, or --gbs x --seq: more than 2^31 tokens per step";
    } else if (m->heads % o->l.tp || m->kv_heads % o->l.tp || m->ffn % o->l.tp) {
        snprintf(why, sizeof why, "--tp %lld must divide %s's heads (%lld), KV heads (%lld) and FFN width (%lld)",
                 (long long)o->l.tp, m->name,
                 (long long)m->heads, (long long)m->kv_heads, (long long)m->ffn);
        bad = why;
    } else if (o->l.pp > m->layers) {
        snprintf(why, sizeof why, "--pp %lld exceeds %s's %lld layers", (long long)o->l.pp, m->name, (long long)m->layers);
        bad = why;
    } else if (o->l.gbs % (o->l.mbs * o->l.dp)) {
        snprintf(why, sizeof why, "--gbs %lld is not a multiple of --mbs x --dp = %lld", (long long)o->l.gbs,
                 (long long)(o->l.mbs * o->l.dp));
        bad = why;
    } else if (o->l.pp <= m->layers && pipeline_split_check(m, &o->l, why, sizeof why) != 0) {
        bad = why;
    } else if (o->l.vpp > 1 && !pipeline_split_is_even(m, &o->l)) {
        bad = "--first-stage-layers, --last-stage-layers with --vpp: the training step interleaves equal stages only";
    } else if (o->l.vpp > 1 && o->l.pp < 2) {
        snprintf(why, sizeof why, "--vpp %lld: interleaving needs --pp of 2 or more", (long long)o->l.vpp);
        bad = why;
    } else if (o->l.vpp > PIPE_MAX_CHUNKS) {
        snprintf(why, sizeof why, "--vpp %lld: at most %d chunks per stage", (long long)o->l.vpp, PIPE_MAX_CHUNKS);
        bad = why;
    } else if (o->l.vpp > 1 && m->layers % ((int64_t)o->l.pp * o->l.vpp)) {
        snprintf(why, sizeof why, "--vpp %lld: %s's %lld layers do not split into --pp %lld x --vpp %lld equal chunks",
                 (long long)o->l.vpp, m->name,
                 (long long)m->layers, (long long)o->l.pp, (long long)o->l.vpp);
        bad = why;
    } else if (o->l.vpp > 1 && (o->l.gbs / (o->l.mbs * o->l.dp)) % o->l.pp) {
        snprintf(why, sizeof why, "--vpp %lld: interleaving needs micro-batches per step (gbs / (mbs x dp) = %lld) to be a multiple "
                 "of --pp %lld", (long long)o->l.vpp, (long long)(o->l.gbs / (o->l.mbs * o->l.dp)), (long long)o->l.pp);
        bad = why;
    } else if (o->l.gbs / (o->l.mbs * o->l.dp) > 4096) {
        bad = "--gbs: more than 4096 micro-batches per step";
    } else if (o->l.sp && o->l.tp > 1 && (o->l.mbs * o->l.seq) % o->l.tp) {
        snprintf(why, sizeof why, "--sp: mbs x seq = %lld tokens do not split over --tp %lld",
                 (long long)(o->l.mbs * o->l.seq), (long long)o->l.tp);
        bad = why;
    } else if (o->l.zero < 0 || o->l.zero > 3) {
        bad = "--zero: expected 0, 1 (the distributed optimizer), 2 (and sharded gradients) or 3 (and sharded parameters)";
    } else if (o->l.zero >= 2 && o->l.dp > 1 && o->l.pp > 1 && m->tied_embeddings) {
        /* the two stages' copies of a tied table would add sharded gradients of differently cut buckets */
        snprintf(why, sizeof why, "--zero %d with --pp %lld and --dp %lld: %s's tied embedding is summed across stages whole; "
                 "ZeRO-2/3 run with --pp 1 or an untied model", o->l.zero, (long long)o->l.pp, (long long)o->l.dp, m->name);
        bad = why;
    } else if (o->l.recompute != RECOMPUTE_NONE && o->l.recompute != RECOMPUTE_FULL) {
        bad = "--recompute: the training step has none and full";
    } else if (train_fused_attention(o) && m->head_dim != 64 && m->head_dim != 128) {
        snprintf(why, sizeof why, "--attention flash: head size %lld; the fused kernel has 64 and 128", (long long)m->head_dim);
        bad = why;
    } else if (moe && o->l.precision == PREC_FP8) {
        /* the planner prices an fp8 run's expert GEMMs in FP8; the step's (validator/moe.c) are bf16 */
        snprintf(why, sizeof why, "--precision fp8: %s is a mixture of experts, whose expert GEMMs the training step runs in "
                 "bf16 only; fp8 covers the dense models", m->name);
        bad = why;
    } else if (o->l.cp > 2) {
        snprintf(why, sizeof why, "--cp %lld: the training step's ring has one peer (--cp 2); longer rings are not built",
                 (long long)o->l.cp);
        bad = why;
    } else if (o->l.cp == 2 && !train_fused_attention(o)) {
        bad = "--cp 2 needs --attention flash: the ring's blocks are the fused kernel's, merged by their log-sum-exp";
    } else if (o->l.cp == 2 && o->l.seq % (2 * o->l.cp)) {
        snprintf(why, sizeof why, "--cp %lld: --seq %lld is not divisible by 2 x cp = %lld (causal load balancing gives each rank two "
                 "of 2 x cp chunks)", (long long)o->l.cp, (long long)o->l.seq, (long long)(2 * o->l.cp));
        bad = why;
    } else if (o->l.cp == 2 && (o->l.tp > 1 || o->l.pp > 1)) {
        bad = "--cp 2 with --tp or --pp: the training step runs context parallelism beside data parallelism only";
    } else if (o->l.cp == 2 && o->l.zero >= 1 && o->l.dp > 1) {
        bad = "--cp 2 with --zero and --dp 2 or more: the ZeRO shards would be cut over DP alone, the gradients summed over DP x CP";

    } else if (o->l.cp == 2 && o->check_gradients) {
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
