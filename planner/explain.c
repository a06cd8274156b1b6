/* `sextant explain`: the estimate as a derivation a student can follow, each
 * formula in words and symbols, its inputs and its value, and where the
 * exact op-list count departs from the textbook formula.  Every number is
 * computed by the same functions as the estimate. */
#include "planner.h"

#include <math.h>
#include <string.h>

#define GIB 1073741824.0

/* NCCL's communicators of the heaviest stage, one by one (docs/model.md, "Other memory"). */
static void explain_nccl(FILE *out, const model_t *m, const layout_t *l, const hw_gpu *gpu, int64_t stage)
{
    nccl_group groups[NCCL_GROUPS_MAX];
    int tied = m->tied_embeddings && l->pp > 1 && (stage == 0 || stage == l->pp - 1);
    int n = nccl_groups(l, tied, model_is_moe(m), groups);
    if (l->gpus <= 1) return;
    nccl_memory_figures f = gpu_nccl_figures(gpu);
    int parts = nccl_memory_by_parts(&f);
    fprintf(out, "  NCCL (%s): the world's communicator %.2f GiB%s", parts ? "by part, calibrate --comm" : "one total per communicator",
            nccl_world_bytes(&f, groups, n) / GIB, parts ? " (created, one small all-reduce; with the first send/recv's once)" : "");
    double total = nccl_world_bytes(&f, groups, n);
    for (int i = 0; i < n; i++) {
        double b = nccl_group_bytes(&f, &groups[i]);
        total += b;
        char runs[64];
        snprintf(runs, sizeof runs, "%s%s%s", groups[i].collective ? "collectives" : "",
                 groups[i].collective && groups[i].peers ? ", " : "", groups[i].peers ? "send/recv" : "");
        if (groups[i].peers > 1) snprintf(runs + strlen(runs), sizeof runs - strlen(runs), " with %d peers", groups[i].peers);
        fprintf(out, ";\n    %s (%s) %.2f GiB", groups[i].name, runs, b / GIB);
    }
    fprintf(out, "; in all %.2f GiB\n", total / GIB);
}

static void heading(FILE *out, int number, const char *title)
{
    fprintf(out, "\n%d. %s\n", number, title);
    for (size_t i = 0; i < strlen(title) + 3 + (number >= 10); i++) fputc('-', out);
    fputc('\n', out);
}


static double saved_per_microbatch(const stage_ops *s)
{
    double sum = 0.0;
    for (int i = 0; i < s->nops; i++)
        if (s->ops[i].pass == PASS_FWD) sum += s->ops[i].saved_bytes * (double)s->ops[i].count;
    return sum;
}

static int stage_only_op(const char *name)
{
    static const char *const names[] = {"embedding", "final_norm", "lm_head", "cross_entropy"};
    for (size_t i = 0; i < sizeof names / sizeof names[0]; i++)
        if (!strcmp(name, names[i])) return 1;
    return 0;
}

/* Saved bytes of one transformer layer: the stage's forward ops less the
 * embedding and the head, per layer. */
static double layer_saved_bytes(const stage_ops *s)
{
    double sum = 0.0;
    for (int i = 0; i < s->nops; i++)
        if (s->ops[i].pass == PASS_FWD && !stage_only_op(s->ops[i].name))
            sum += s->ops[i].saved_bytes * (double)s->ops[i].count;
    return s->layers > 0 ? sum / (double)s->layers : 0.0;
}

static double comm_time(const stage_ops *s, group_t group, pass_t pass_or_step, double *bytes, int *count)
{
    double t = 0.0;
    *bytes = 0.0;
    *count = 0;
    for (int i = 0; i < s->nops; i++) {
        const op_t *op = &s->ops[i];
        if (op->kind != OP_COMM || op->group != group) continue;
        if (pass_or_step == PASS_STEP && op->pass != PASS_STEP) continue;
        if (pass_or_step != PASS_STEP && op->pass == PASS_STEP) continue;
        t += op->time_s * (double)op->count;
        *bytes = op->comm_bytes;
        *count += (int)op->count;
    }
    return t;
}

/* The op of the slowest stage named `name` and pass, or NULL. */
/* The MoE layers whose all-to-alls a stage runs: its own and, on the last stage, the multi-token prediction
 * modules' (a layer of the last layer's kind each). */
static int64_t stage_moe_layers(const model_t *m, const stage_ops *s)
{
    int64_t moe = s->moe_layers;
    if (s->last && m->mtp_layers > 0 && model_mtp_layer_is_moe(m)) moe += m->mtp_layers;
    return moe;
}

static const op_t *find_op(const stage_ops *s, const char *name, pass_t pass)
{
    for (int i = 0; i < s->nops; i++)
        if (s->ops[i].pass == pass && !strcmp(s->ops[i].name, name)) return &s->ops[i];
    return NULL;
}

/* The data-parallel traffic as the ZeRO stage runs it (docs/model.md, "Overlap", "ZeRO-3 and FSDP", "The
 * network at scale"): what moves, how often, in how many collectives, and what is left exposed. */
static void explain_data_parallel(FILE *out, const estimate_t *e, const stage_ops *slow)
{
    const layout_t *l = &e->layout;
    const model_t *m = e->model;
    const hw_gpu *g = e->gpu;
    fprintf(out, "DP over %lld GPUs (d_p x c), ZeRO %d:\n", (long long)(l->dp * layout_cp(l)), l->zero);
    for (int i = 0; i < slow->nops; i++) {
        const op_t *op = &slow->ops[i];
        if (op->kind != OP_COMM || op->group != GROUP_DP) continue;
        int64_t pieces = op->pieces > 1 ? op->pieces : 1;
        const char *when = op->pass == PASS_STEP ? "once per step" : op->pass == PASS_FWD ? "every micro-batch's forward"
                                                                                          : "every micro-batch's backward";
        const char *kind = coll_name(op->coll);
        fprintf(out, "  %-24s %s %s of %.4g MB %s, as %lld collective(s) of %.4g MB (a %s each): %.4g s%s\n", op->name,
                strchr("aeiou", kind[0]) ? "an" : "a", kind, op->comm_bytes / 1e6, when, (long long)pieces, op->comm_bytes / 1e6 / (double)pieces,
                op->pass == PASS_STEP ? "bucket" : "layer", op->time_s * (double)op->count,
                op->crosses_node ? ", across nodes" : ", inside the node");
    }
    if (l->zero >= 3)
        fprintf(out, "  The gathers and reduce-scatters of each micro-batch overlap its forward and backward, except the first\n"
                     "  layer's gather and the last layer's reduce-scatter; beside compute both run slower (measured factors).\n");
    else if (l->zero == 2 && l->grad_sync != GRAD_SYNC_AFTER)
        fprintf(out, "  The gradients of each micro-batch overlap its backward, except the last layer's reduce-scatter; the\n"
                     "  parameter gather overlaps the next forward except its last bucket; beside compute both run slower\n"
                     "  (measured factors).\n");
    else if (l->grad_sync == GRAD_SYNC_AFTER)
        fprintf(out, "  Both run after the pipeline has drained, exposed (--grad-sync after, DeepSpeed's engine).\n");
    else
        fprintf(out, "  The gradients overlap the last micro-batch's backward (the parameter gather the next forward) except the\n"
                     "  last 40M-element bucket; beside compute both run slower (measured factors).\n");
    if (l->zero >= 2)
        fprintf(out, "  Each layer's collectives run beside that layer's ops in the order they run, from its start, each op\n"
                     "  slowing as its kind does beside them.\n");
    if (model_is_moe(m) && g->overlap_compute_slowdown_experts > 0.0)
        fprintf(out, "  Expert GEMMs launched one an expert whose tiles do not fill the %.0f SMs slow %+.1f%% beside a collective\n"
                     "  (calibrate --comm's experts), not a GEMM's %+.1f%%: the SMs the collective holds are SMs they leave idle.\n",
                g->sm_count, 100.0 * g->overlap_compute_slowdown_experts, 100.0 * g->overlap_compute_slowdown_allgather);
    if ((l->zero >= 3 || (l->zero == 2 && l->grad_sync != GRAD_SYNC_AFTER)) && l->zero_waits == ZERO_WAITS_STEP)
        fprintf(out, "  Those first gathers and last reduce-scatters wait only at the step's first forward and last backward:\n"
                     "  the neighbouring micro-batch hides the others (--zero-waits step, sextant's trainer).\n");
    if (l->grad_accum == GRAD_ACCUM_FP32_COPY)
        fprintf(out, "  DeepSpeed's BF16 optimizer reduces its fp32 gradient copy whole (an all-reduce of 4 B per parameter)%s.\n",
                l->zero == 1 ? " and gathers the updated 16-bit weights" : "");
    fprintf(out, "  Exposed per step, slowdown of the compute beside them included: %.4g s.\n", e->dp_comm_s);
}

/* Context parallelism's KV exchange, step by step (docs/model.md, "Context parallelism"). */
static void cp_explain(FILE *out, const estimate_t *e, const stage_ops *slow)
{
    const layout_t *l = &e->layout;
    const model_t *m = e->model;
    if (layout_cp(l) <= 1) {
        fprintf(out, "CP: c = 1, no context-parallel traffic.\n");
        return;
    }
    double c = (double)l->cp, B = element_bytes(l->precision);
    double kv = local_kv_heads(m, l->tp);
    double block = cp_kv_block_bytes(kv, (double)m->head_dim, (double)l->seq, c, (double)l->mbs, B);
    int crosses = l->tp * l->cp > l->gpus_per_node;
    fprintf(out, "CP: the group is c = %lld GPUs, t = %lld apart (TP innermost, then CP, then DP, then PP): it spans %lld GPUs, %s.\n",
            (long long)l->cp, (long long)l->tp, (long long)(l->tp * l->cp),
            crosses ? "across nodes" : "inside the node");
    fprintf(out, "  A rank's K and V: 2 x KV heads %g x d %lld x s/c %g x b %g x %g B = %.4g MB.\n", kv, (long long)m->head_dim,
            (double)l->seq / c, (double)l->mbs, B, block / 1e6);
    const op_t *att = find_op(slow, "attention", PASS_FWD), *att_bwd = find_op(slow, "attention_bwd", PASS_BWD);
    if (l->cp_comm == CP_COMM_RING) {
        const op_t *ring = find_op(slow, "cp_ring_kv", PASS_FWD), *ring_bwd = find_op(slow, "cp_ring_kv_dkv_bwd", PASS_BWD);
        if (!ring || !ring_bwd || !att || !att_bwd) return;
        fprintf(out, "  Ring (Megatron): c - 1 = %lld send/recv steps per layer, each %.4g ms forward (K, V) and %.4g ms backward\n"
                     "  (K, V and dK, dV, twice the bytes). Each is posted beside the attention of a block (%.4g ms forward,\n"
                     "  %.4g ms backward, 1/c of the layer's). Forward: at the same stream priority its NCCL kernel waits for\n"
                     "  that kernel's SMs, and the next block waits for the data: exposed in full, %.4g ms per layer. Backward:\n"
                     "  each step's transfer runs beside its block and is waited for after it: %.4g ms per layer exposed.\n",
                (long long)(l->cp - 1), ring->time_s * 1e3, ring_bwd->time_s * 1e3, att->time_s / c * 1e3,
                att_bwd->time_s / c * 1e3,
                (c - 1.0) * cp_ring_exposed_s(ring->time_s, att->time_s, c, CP_RING_SERIALISED_FWD) * 1e3,
                (c - 1.0) * cp_ring_exposed_s(ring_bwd->time_s, att_bwd->time_s, c, CP_RING_SERIALISED_BWD) * 1e3);
    } else {
        const op_t *ag = find_op(slow, "cp_allgather_kv", PASS_FWD);
        if (!ag) return;
        fprintf(out, "  All-gather (Llama 3): each layer gathers the whole K and V, c x %.4g MB, before its attention (%.4g ms,\n"
                     "  exposed), gathers them again in the backward and reduce-scatters dK, dV: 3 collectives per layer.\n",
                block / 1e6, ag->time_s * 1e3);
    }
    fprintf(out, "  Exposed CP communication: %.4g s per step.\n", e->cp_comm_s);
}

/* Expert parallelism with an expert TP t_e other than t (docs/model.md, "Mixture of experts", "Expert tensor
 * parallelism"): the groups Megatron carves, the dispatcher's gather over t_e, the experts' shapes. */
static void explain_expert_tp(FILE *out, const estimate_t *e, const stage_ops *slow)
{
    const layout_t *l = &e->layout;
    const model_t *m = e->model;
    double B = element_bytes(l->precision);
    double t = (double)l->tp, te = (double)layout_etp(l), ep = (double)layout_ep(l), T = rank_tokens(l);
    double k = (double)m->top_k, E = (double)m->experts;
    fprintf(out, "EP: e = %lld with expert TP t_e = %lld: Megatron carves t_e x e = %lld GPUs out of t d_p c = %lld (its expert\n"
                 "  rank order, t_e innermost, then e, then the expert-data-parallel ranks): each GPU holds E / e = %g experts,\n"
                 "  each a 1/t_e slice, whose gradients are reduced over t d_p c / (t_e e) = %lld GPUs. The EP group is e GPUs\n"
                 "  t_e apart, spanning %lld GPUs, %s.\n",
            (long long)layout_ep(l), (long long)layout_etp(l), (long long)(layout_etp(l) * layout_ep(l)),
            (long long)(l->tp * dp_group_size(l)), E / ep, (long long)expert_dp_group_size(l), (long long)(layout_etp(l) * layout_ep(l)),
            layout_etp(l) * layout_ep(l) > l->gpus_per_node ? "across nodes" : "inside the node");
    fprintf(out, "  Each GPU routes its s b / t%s = %g tokens (the sequence-parallel input) to top-%lld experts: dispatch\n"
                 "  S = %.4g MB per layer, whatever t_e.\n",
            layout_cp(l) > 1 ? " / c" : "", T / t, (long long)m->top_k, moe_alltoall_bytes(T / t, k, (double)m->hidden, B) / 1e6);
    const op_t *a2a = find_op(slow, "ep_alltoall_dispatch", PASS_FWD);
    if (a2a)
        fprintf(out, "  All-to-all: %.4g ms each (%s), %lld MoE layers on stage %lld: EP %.4g s per step.\n", a2a->time_s * 1e3,
                a2a->crosses_node ? "across nodes" : "NVLink", (long long)stage_moe_layers(m, slow), (long long)slow->stage,
                e->ep_comm_s);
    const op_t *gather = find_op(slow, "moe_tp_allgather", PASS_FWD);
    if (gather)
        fprintf(out, "  The t_e group gathers what its experts received (MoEAlltoAllTokenDispatcher: all-gather over the expert\n"
                     "  TP group after the all-to-all, reduce-scatter before the combine): %.4g MB, %.4g ms each, in the TP seconds.\n",
                gather->comm_bytes / 1e6, gather->time_s * 1e3);
    else
        fprintf(out, "  t_e = 1: nothing is gathered; each GPU's experts run, whole, on the tokens it received (no TP collective\n"
                     "  at the experts' entry or exit).\n");
    fprintf(out, "  Experts: a GPU's E/e experts get T k t_e e / (t E) = %.4g tokens each (balanced), at width f_e / t_e = %g;\n"
                 "  the GEMM FLOPs per GPU are t_e-independent, their shape (and so efficiency) is not; the busiest GPU takes\n"
                 "  %.2f x the mean.\n",
            T * k * te * ep / (t * E), (double)model_expert_ffn(m) / te, moe_rank_load(m, l));
}

/* Expert parallelism's token traffic and the experts' shapes, step by step (docs/model.md, "Mixture of experts"). */
/* The forward's expert GEMMs after the routing sync, against the host's issue of them (op_host_issue_s) and the
 * lead the host carries from the up projection into the down projection's (host_issue_lead_s). */
static void explain_host_issue(FILE *out, const estimate_t *e, const stage_ops *slow)
{
    const op_t *up = find_op(slow, "expert_up", PASS_FWD), *down = find_op(slow, "expert_down", PASS_FWD);
    if (!up || !down) return;
    const double issue = op_host_issue_s(up, e->gpu), down_issue = op_host_issue_s(down, e->gpu);
    if (issue <= 0.0 || down_issue <= 0.0) return;
    fprintf(out, "  After the routing sync the host issues them one by one (%.3g us a launch, %.4g us a projection): the\n"
                 "  forward's up projection takes %.4g us, %s; the host is then %.4g us into the down projection's issue\n"
                 "  (the lead priced at the top clock), whose floor is %.4g us against its %.4g us.\n",
            1e6 * issue / (double)up->batch, 1e6 * issue, 1e6 * up->time_s,
            up->time_s > issue * (1.0 + 1e-9) ? "the GPU's time" : "the host's", 1e6 * down->host_lead_s,
            1e6 * (down_issue > down->host_lead_s ? down_issue - down->host_lead_s : 0.0), 1e6 * down->time_s);
}

static void ep_explain(FILE *out, const estimate_t *e, const stage_ops *slow)
{
    const layout_t *l = &e->layout;
    const model_t *m = e->model;
    if (!model_is_moe(m)) return;
    double B = element_bytes(l->precision);
    double t = (double)l->tp, ep = (double)layout_ep(l), T = rank_tokens(l), k = (double)m->top_k, E = (double)m->experts;
    double load = moe_rank_load(m, l);
    if (layout_etp(l) != l->tp) {
        explain_expert_tp(out, e, slow);
        return;
    }
    fprintf(out, "EP: e = %lld, inside DP x CP (Megatron): each GPU holds E / e = %g of the %lld routed experts, and their\n"
                 "  gradients are reduced over the expert-data-parallel group, d_p c / e = %lld GPUs. The group is e GPUs t = %lld\n"
                 "  apart, spanning %lld GPUs, %s.\n",
            (long long)layout_ep(l), E / ep, (long long)m->experts, (long long)expert_dp_group_size(l), (long long)l->tp,
            (long long)(l->tp * layout_ep(l)), l->tp * layout_ep(l) > l->gpus_per_node ? "across nodes" : "inside the node");
    fprintf(out, "  Each TP rank routes s b / t%s = %g tokens to top-%lld experts: dispatch S = tokens x k x h x B = %g x %g x %lld x %g\n"
                 "  = %.4g MB per layer, of which (e-1)/e leaves the GPU; the combine sends it back, and the backward repeats both.\n",
            layout_cp(l) > 1 ? " / c" : "", T / t, (long long)m->top_k, T / t, k, (long long)m->hidden, B,
            moe_alltoall_bytes(T / t, k, (double)m->hidden, B) / 1e6);
    const op_t *a2a = find_op(slow, "ep_alltoall_dispatch", PASS_FWD);
    if (a2a && a2a->crosses_node && a2a->internode_share > 0.0 && a2a->internode_share < 1.0)
        fprintf(out, "  Group-limited routing (top-%lld within %lld of %lld groups, one a node): DeepSeek's dispatcher sends a token once\n"
                     "  to each node it reaches, %.3g remote copies against a plain exchange's %.3g: %.3g of its inter-node bytes.\n",
                (long long)m->top_k, (long long)m->moe_group_limit, (long long)m->moe_groups,
                moe_remote_node_copies(k, ep * t / (double)l->gpus_per_node, (double)m->moe_groups, (double)m->moe_group_limit),
                moe_remote_node_copies(k, ep * t / (double)l->gpus_per_node, 0.0, 0.0), a2a->internode_share);
    if (a2a)
        fprintf(out, "  All-to-all: (n-1)/n S / BW + (n-1) alpha = %.4g ms each (%s), %d per MoE layer, %lld MoE layers on stage %lld:\n"
                     "  %.4g s per step %s.\n",
                a2a->time_s * 1e3, a2a->crosses_node ? "the node's own link for its GPUs, the NICs for the others" : "NVLink",
                l->recompute == RECOMPUTE_FULL ? 6 : 4, (long long)stage_moe_layers(m, slow), (long long)slow->stage, e->ep_comm_s,
                l->ep_overlap ? "exposed after hiding behind the compute of the micro-batch beside it (--ep-overlap: Megatron's\n"
                                "  combined 1F1B; the step's first forward and last backward run alone), slowed as \"Overlap is not free\""
                              : "exposed (--ep-overlap would hide them behind the next micro-batch's compute)");
    else
        fprintf(out, "  e = 1: no token traffic between GPUs; each GPU runs all %lld experts' 1/t slices.\n", (long long)m->experts);
    const op_t *counts = find_op(slow, "ep_counts", PASS_FWD);
    if (counts)
        fprintf(out, "  Before each dispatch the ranks all-gather their counts per expert (e x E x 4 B = %g B) and the host waits for\n"
                     "  them, the all-to-all's sizes: %.4g us each with the host's wait (2 kernel issues), 1 per MoE layer, in the EP seconds.\n",
                counts->comm_bytes, counts->time_s * 1e6);
    fprintf(out, "  Experts: a GPU's E/e experts get T k e / E = %.4g tokens each (balanced) after the TP gather; grouped GEMMs of\n"
                 "  that shape run at its efficiency",
            T * k * ep / E);
    if (layout_ep(l) > 1)
        fprintf(out, ", and the busiest GPU takes %.2f x the mean (imbalance %.2f%s), which the\n"
                     "  step waits for: with several experts a GPU its extra rows lengthen the waves of that shape (they fall\n"
                     "  unevenly on the experts), not a wave more each; model FLOPs count the mean.\n",
                load, model_moe_imbalance(m),
                m->capacity_factor > 0 ? ", capped by the capacity factor" : ", Switch Transformer's 1.25 unless --moe-imbalance");
    else
        fprintf(out, "; without EP each GPU runs every expert on its own tokens, and no GPU waits for a busier one.\n");
    if (l->expert_gemm == EXPERT_GEMM_STREAMS) {
        fprintf(out, "  Each expert's GEMM is a launch of its own (--expert-gemm streams, Transformer Engine's grouped linear): its\n"
                     "  own waves of tiles, split-K and fixed cost, %lld of them per GEMM of the layer.\n",
                (long long)(E / (double)layout_ep(l)));
        explain_host_issue(out, e, slow);
    } else
        fprintf(out, "  The experts' GEMMs are one grouped kernel (--expert-gemm grouped): the tiles of every expert share the waves.\n");
    if (l->expert_rows == EXPERT_ROWS_ROUTED)
        fprintf(out, "  Each expert rounds the rows the router gave it up to whole tiles (--expert-rows routed): where a GEMM fills\n"
                     "  the GPU, its tiles' time is priced at rows/128 + 1/2 row tiles (a weight gradient at rows + 32 of K), the\n"
                     "  expected count when an expert's rows spread over more than a tile, not the balanced shape's.\n");
    else
        fprintf(out, "  Every expert gets the same rows (--expert-rows even): the balanced shape's tiles.\n");
    if (moe_dropped_fraction(model_moe_imbalance(m), m->capacity_factor) > 0)
        fprintf(out, "  Capacity factor %.2f: the busiest expert drops up to %.0f%% of its tokens.\n", m->capacity_factor,
                100.0 * moe_dropped_fraction(model_moe_imbalance(m), m->capacity_factor));
}

/* Long by design (over 300 lines): one derivation read top to bottom, section after section, each short
 * and using the figures the sections before it printed; the sections that stand alone (CP, EP, DP) are
 * functions of their own above. */
void report_explain(FILE *out, const estimate_t *e)
{
    const model_t *m = e->model;
    const layout_t *l = &e->layout;
    const hw_gpu *g = e->gpu;
    const double L = (double)m->layers, h = (double)m->hidden, a = (double)m->heads, V = (double)m->vocab;
    const double s = (double)l->seq, b = (double)l->mbs, t = (double)l->tp, p = (double)l->pp;
    const double Bglobal = (double)l->gbs, dp = (double)l->dp;
    const char *shards = layout_cp(l) > 1 ? "d_p c" : "d_p";   /* ZeRO shards over DP x CP */
    const double B = element_bytes(l->precision);
    const double peak = g->peak_flops[l->precision];

    fprintf(out, "How sextant estimates %s on %lld x %s\n", m->name, (long long)l->gpus, g->name);
    fprintf(out, "Layout: TP t = %lld, PP p = %lld, DP d_p = %lld, micro-batch b = %lld, global batch B = %lld, "
                 "sequence s = %lld, recompute %s%s%s, SP %s, ZeRO %d, %s\n",
            (long long)l->tp, (long long)l->pp, (long long)l->dp, (long long)l->mbs, (long long)l->gbs,
            (long long)l->seq, recompute_name(l->recompute), l->recompute_modules ? " + " : "",
            recompute_modules_name(l->recompute_modules), l->sp ? "on" : "off", l->zero, precision_name(l->precision));
    char calibration[HWDB_SOURCE_MAX + 128];
    if (calibration_line(g, calibration, sizeof calibration)) fprintf(out, "%s\n", calibration);
    if (layout_cp(l) > 1)
        fprintf(out, "Context parallel c = %lld (%s): each GPU holds s / c = %lld tokens of every sequence; GPUs = t x c x p x d_p.\n",
                (long long)l->cp, cp_comm_name(l->cp_comm), (long long)(l->seq / l->cp));
    if (model_is_moe(m) && layout_etp(l) == l->tp)
        fprintf(out, "Expert parallel e = %lld: each GPU holds %lld of the %lld routed experts (e inside d_p c).\n",
                (long long)layout_ep(l), (long long)(m->experts / layout_ep(l)), (long long)m->experts);
    else if (model_is_moe(m))
        fprintf(out, "Expert parallel e = %lld, expert TP t_e = %lld (not t): each GPU holds a 1/t_e slice of %lld of the %lld routed\n"
                     "  experts (t_e x e inside t d_p c, Megatron's expert groups).\n",
                (long long)layout_ep(l), (long long)layout_etp(l), (long long)(m->experts / layout_ep(l)), (long long)m->experts);
    fprintf(out, "Every formula is derived, with its source, in docs/model.md.\n");

    heading(out, 1, "The model and its parameters");
    fprintf(out, "L = %lld layers, h = %lld hidden, a = %lld heads of d = %lld, %lld KV heads, FFN f = %lld (%s, %d matrices),\n"
                 "V = %lld vocabulary, %s embeddings, %s, %s positions%s.\n",
            (long long)m->layers, (long long)m->hidden, (long long)m->heads, (long long)m->head_dim,
            (long long)m->kv_heads, (long long)m->ffn, m->ffn_kind == FFN_SWIGLU ? "SwiGLU" : "GELU",
            m->ffn_kind == FFN_SWIGLU ? 3 : 2, (long long)m->vocab, m->tied_embeddings ? "tied" : "untied",
            m->norm == NORM_RMSNORM ? "RMSNorm" : "LayerNorm",
            m->position == POS_LEARNED ? "learned" : m->position == POS_ROPE ? "rotary" : "ALiBi",
            m->experts > 1 ? ", mixture of experts" : "");
    double textbook_params = 12.0 * L * h * h * (1.0 + 13.0 / (12.0 * h) + (V + s) / (12.0 * L * h));
    fprintf(out, "Textbook GPT count (Narayanan et al. 2021, eq. 2):\n"
                 "  P = 12 L h^2 (1 + 13/(12h) + (V + s)/(12 L h)) = 12 x %g x %g^2 x (...) = %.4g\n",
            L, h, textbook_params);
    fprintf(out, "Exact count from the architecture:\n");
    fprintf(out, "  embeddings                 %.4g\n", model_embedding_params(m));
    if (model_is_moe(m)) {
        double moe = (double)model_moe_layers(m), dense = L - moe;
        fprintf(out, "  MoE layer: attention %.4g + %lld routed + %lld shared experts of %.4g (FFN %lld) + router %.4g + norms %.4g\n"
                     "    = %.4g, x %g MoE layers = %.4g\n",
                model_attention_params_per_layer(m), (long long)m->experts, (long long)m->shared_experts,
                model_ffn_params_per_expert(m), (long long)model_expert_ffn(m), model_router_params(m),
                2.0 * model_norm_params(m), model_layer_params(m), moe, moe * model_layer_params(m));
        if (dense > 0)
            fprintf(out, "  dense layer: attention %.4g + FFN %.4g + norms %.4g = %.4g, x %g dense layers = %.4g\n",
                    model_attention_params_per_layer(m), model_dense_ffn_params(m), 2.0 * model_norm_params(m),
                    model_dense_layer_params(m), dense, dense * model_dense_layer_params(m));
    } else {
        fprintf(out, "  per layer: attention %.4g + MLP %.4g + norms %.4g = %.4g, x L = %.4g\n",
                model_attention_params_per_layer(m), model_mlp_params_per_layer(m, m->experts),
                2.0 * model_norm_params(m), model_layer_params(m), L * model_layer_params(m));
    }
    if (model_is_mla(m))
        fprintf(out, "  attention is multi-head latent (DeepSeek-V2): q through rank %lld, K and V up from a rank-%lld latent,\n"
                     "    heads of %lld + %lld (rotary) for scores and %lld for values; the KV cache keeps %lld values per token\n"
                     "    where 2 x heads x d would be %lld.\n",
                (long long)m->q_lora_rank, (long long)m->kv_lora_rank, (long long)m->qk_nope_head_dim,
                (long long)m->qk_rope_head_dim, (long long)m->v_head_dim, (long long)(m->kv_lora_rank + m->qk_rope_head_dim),
                (long long)(2 * m->heads * (m->qk_nope_head_dim + m->qk_rope_head_dim)));
    fprintf(out, "  final norm (or pooler)     %.4g\n", model_final_params(m));
    fprintf(out, "  LM head                    %.4g%s\n", model_head_params(m),
            m->tied_embeddings ? " (tied to the embedding)" : "");
    fprintf(out, "  N = %.6g", e->params_total);
    if (m->params_published > 0)
        fprintf(out, "; published %.6g (%+.2f%%)", m->params_published,
                100.0 * (e->params_total - m->params_published) / m->params_published);
    fprintf(out, "\n");
    if (m->experts > 1) {
        fprintf(out, "  active per token (top-%lld of %lld experts%s): %.6g", (long long)m->top_k, (long long)m->experts,
                m->shared_experts > 0 ? ", and the shared" : "", e->params_active);
        if (m->active_params_published > 0)
            fprintf(out, "; published %.6g (%+.2f%%)", m->active_params_published,
                    100.0 * (e->params_active - m->active_params_published) / m->active_params_published);
        fprintf(out, "\n");
    }
    if (m->mtp_layers > 0)
        fprintf(out, "  multi-token prediction: %lld module(s) of %.4g parameters each (a %s layer, the 2h x h projection and "
                     "three norms; the embedding and output layer shared), not in N; on the last stage, each with one more "
                     "pass of the output layer and its own loss\n",
                (long long)m->mtp_layers, model_mtp_params(m), model_mtp_layer_is_moe(m) ? "MoE" : "dense");
    fprintf(out, "The textbook count is %+.1f%% off because it assumes ", 100.0 * (textbook_params / e->params_total - 1.0));
    fprintf(out, "%s, %s, %s and learned positions of s rows.\n",
            m->kv_heads == m->heads ? "4h^2 attention weights (true here)" : "full K and V projections (GQA shrinks them)",
            m->ffn_kind == FFN_GELU && m->ffn == 4 * m->hidden ? "an FFN of 2 x h x 4h (true here)"
                                                               : "an FFN of 2 x h x 4h (this model's differs)",
            m->tied_embeddings ? "a tied LM head (true here)" : "a tied LM head (this one is untied: +V h)");

    heading(out, 2, "Compute per step");
    double tokens_per_step = Bglobal * s;
    double narayanan = narayanan_model_flops(Bglobal, s, L, h, V);
    fprintf(out, "Tokens per step B s = %g x %g = %g.\n", Bglobal, s, tokens_per_step);
    fprintf(out, "Textbook: 6 N (B s) = 6 x %.4g x %g = %.4g FLOP (forward 2N, backward 4N per token%s).\n",
            e->params_active, tokens_per_step, e->six_nd_per_step, m->experts > 1 ? ", N = active parameters" : "");
    if (model_is_moe(m))
        fprintf(out, "  With all %.4g parameters, 6 N_total (B s) = %.4g FLOP: %.1f x what a token computes, since each meets\n"
                     "  only its top-%lld experts; MFU, 6ND and the op list count the active parameters.\n",
                e->params_total, six_n_d_flops(e->params_total, tokens_per_step), e->params_total / e->params_active,
                (long long)m->top_k);
    fprintf(out, "Narayanan et al. (SC'21): 72 B s L h^2 (1 + s/(6h) + V/(12 L h)) = %.4g FLOP.\n", narayanan);
    fprintf(out, "Exact, summed over the op list of the whole model: %.4g model FLOP per step (%.3f x 6ND),\n"
                 "  of which attention scores and values %.4g, logits %.4g.\n",
            e->model_flops_per_step, e->model_flops_per_step / e->six_nd_per_step, e->attention_flops_per_step,
            e->logits_flops_per_step);
    if (model_is_causal(m))
        fprintf(out, "  Convention: a causal model's attention is counted below the diagonal only, what a flash-style\n"
                     "  kernel executes, so MFU never exceeds 1; over the full s x s, as Megatron and the 72 formula\n"
                     "  count it: %.4g model FLOP per step.\n", e->model_flops_full_attention_per_step);
    else
        fprintf(out, "  Convention: attention is bidirectional, counted over the full s x s, as the 72 formula does.\n");
    if (layout_cp(l) > 1)
        fprintf(out, "  Context parallelism moves no FLOP: each of the c = %lld ranks runs 1/c of every GEMM (its s/c tokens)\n"
                     "  and 1/c of the attention (its s/c queries against all s keys; Megatron pairs chunks i and 2c-1-i so\n"
                     "  that the causal work is even).\n", (long long)l->cp);
    fprintf(out, "Hardware FLOPs (with recomputation, %s): %.4g per step.\n", recompute_name(l->recompute),
            e->hardware_flops_per_step);
    if (l->recompute_modules)
        fprintf(out, "  Recomputed modules (%s): their outputs are dropped after the forward and run again in the\n"
                     "  backward, the GEMMs among them counted in the hardware FLOPs (docs/model.md, \"Recomputed modules\").\n",
                recompute_modules_name(l->recompute_modules));
    if (l->recompute == RECOMPUTE_FULL)
        fprintf(out, "  Narayanan et al. with full recomputation: 96 B s L h^2 (1 + s/(6h) + V/(16 L h)) = %.4g.\n",
                narayanan_full_recompute_flops(Bglobal, s, L, h, V));
    fprintf(out, "Whole run: 6 N D = 6 x %.4g x %.4g = %.4g FLOP.\n", e->params_active, e->job.tokens,
            six_n_d_flops(e->params_active, e->job.tokens));

    heading(out, 3, "Memory per GPU");
    const memory_breakdown *mem = &e->memory;
    double grad_b = gradient_memory_bytes(l);
    fprintf(out, "The heaviest GPU is on stage %lld: it holds %.4g parameters (its %lld layers split %g ways by TP%s%s).\n",
            (long long)mem->stage, mem->params, (long long)layers_on_stage(m, l, mem->stage), t,
            mem->stage == 0 ? ", plus the embedding" : "", mem->stage == l->pp - 1 ? ", plus the head" : "");
    if (mem->params > 0 && model_is_moe(m)) {
        const stage_ops *st = estimate_stage_ops(e, mem->stage);   /* the heaviest stage's list */
        fprintf(out, "  Of them %.4g are its routed experts (%lld MoE layers x %lld experts x %.4g / (t e)), whose optimizer state\n"
                     "  ZeRO shards over d_p c / e = %lld GPUs; the rest over %s.\n",
                st->expert_params, (long long)st->moe_layers, (long long)m->experts, model_ffn_params_per_expert(m),
                (long long)expert_dp_group_size(l), shards);
    }
    fprintf(out, "Mixed-precision Adam: weights 2 + gradients %g + optimizer 12 (fp32 master, m, v) = %g bytes per parameter.\n",
            grad_b, adam_bytes_per_param(grad_b));
    if (l->grad_accum == GRAD_ACCUM_FP32_COPY)
        fprintf(out, "  (gradients: the backward's 16-bit ones and DeepSpeed's fp32 copy they are added into, 2 + 4 B)\n");
    const stage_ops *held = estimate_stage_ops(e, mem->stage);
    if (held->expert_params > 0.0 && l->zero >= 1) {
        /* the experts shard over d_p c / e, the rest over d_p c */
        double dense = mem->params - held->expert_params, experts = held->expert_params;
        double dp_all = (double)dp_group_size(l), edp = (double)expert_dp_group_size(l);
        fprintf(out, "  weights    (%.4g%s + %.4g%s) x 2 B = %.2f GiB\n", dense, l->zero >= 3 ? " / d_p c" : "", experts,
                l->zero >= 3 ? " / (d_p c / e)" : "", mem->weights / GIB);
        fprintf(out, "  gradients  (%.4g%s + %.4g%s) x %g B = %.2f GiB\n", dense, l->zero >= 2 ? " / d_p c" : "", experts,
                l->zero >= 2 ? " / (d_p c / e)" : "", grad_b, mem->gradients / GIB);
        fprintf(out, "  optimizer  (%.4g / %g + %.4g / %g) x 12 B (ZeRO-1: the rest over d_p c, the experts over d_p c / e) = %.2f GiB\n",
                dense, dp_all, experts, edp, mem->optimizer / GIB);
    } else {
        fprintf(out, "  weights    %.4g x 2 B%s%s%s = %.2f GiB\n", mem->params, l->zero >= 3 ? " / " : "",
                l->zero >= 3 ? shards : "", l->zero >= 3 ? " (ZeRO-3)" : "", mem->weights / GIB);
        fprintf(out, "  gradients  %.4g x %g B%s%s%s = %.2f GiB\n", mem->params, grad_b, l->zero >= 2 ? " / " : "",
                l->zero >= 2 ? shards : "", l->zero >= 2 ? " (ZeRO-2)" : "", mem->gradients / GIB);
        fprintf(out, "  optimizer  %.4g x 12 B%s%s%s = %.2f GiB\n", mem->params, l->zero >= 1 ? " / " : "",
                l->zero >= 1 ? shards : "", l->zero >= 1 ? " (ZeRO-1)" : "", mem->optimizer / GIB);
    }
    /* with context parallelism a rank's activations are those of its s / c tokens */
    double korthikanti = korthikanti_activation_bytes_per_layer(s / (double)layout_cp(l), b, h, a, t, l->sp, l->recompute);
    if (layout_cp(l) > 1)
        fprintf(out, "With context parallelism every activation below is that of the GPU's s / c = %g tokens.\n",
                s / (double)layout_cp(l));
    const stage_ops *heavy = estimate_stage_ops(e, mem->stage);
    double exact_layer = layer_saved_bytes(heavy);
    fprintf(out, "Activations per layer per micro-batch, textbook (Korthikanti et al. 2022, Table 2, 16-bit):\n");
    if (l->recompute == RECOMPUTE_FULL)
        fprintf(out, "  full recomputation keeps the layer input: 2 s b h%s = %.4g bytes\n", l->sp ? " / t" : "", korthikanti);
    else if (l->sp)
        fprintf(out, "  s b h / t (34%s) = %.4g bytes\n", l->recompute == RECOMPUTE_NONE ? " + 5 a s / h" : "", korthikanti);
    else if (l->tp > 1)
        fprintf(out, "  s b h (10 + 24/t%s) = %.4g bytes\n", l->recompute == RECOMPUTE_NONE ? " + 5 a s/(h t)" : "", korthikanti);
    else
        fprintf(out, "  s b h (34%s) = %.4g bytes\n", l->recompute == RECOMPUTE_NONE ? " + 5 a s / h" : "", korthikanti);
    fprintf(out, "  exact, from the op list: %.4g bytes (%+.1f%%)", exact_layer,
            korthikanti > 0 ? 100.0 * (exact_layer / korthikanti - 1.0) : 0.0);
    fprintf(out, ": the op list counts this model's own Q/K/V widths (GQA), FFN width and kind, dropout masks only when\n"
                 "  the model uses dropout, and for %s attention %s.\n",
            attention_is_fused(l->attention) ? "flash-style" : "unfused",
            attention_is_fused(l->attention) ? "no s x s scores at all but a 4-byte log-sum-exp per row"
                                            : "the s x s scores, softmax and dropout as in the paper");
    if (l->vpp > 1)
        fprintf(out, "In flight: interleaved 1F1B makes stage i run 2 (p - i - 1) + (v - 1) p chunk forwards before its first\n"
                     "  backward and hold one more, each 1/v of the stage (all m when m = p): %.2f micro-batches here,\n",
                mem->inflight_microbatches);
    else
        fprintf(out, "In flight: 1F1B makes stage i hold min(m, p - i) micro-batches: %.2f here,\n", mem->inflight_microbatches);
    fprintf(out, "  so activations = %.4g bytes per micro-batch on this stage x %.2f = %.2f GiB\n",
            saved_per_microbatch(heavy), mem->inflight_microbatches, mem->activations / GIB);
    if (mem->logits > 0)
        fprintf(out, "Logits and loss on the last stage (%s loss): s b V / t x (%g B logits + %g B %s) = %.2f GiB\n",
                loss_kernel_name(l->loss), B, loss_held_bytes_per_logit(l->loss, B),
                l->loss == LOSS_FP32 ? "fp32 cast and log-softmax" : l->loss == LOSS_FUSED_OUTPLACE ? "gradient" : "held",
                mem->logits / GIB);
    fprintf(out, "Other: the CUDA context and library workspaces (1 GiB unless calibrated), NCCL's communicators (the world's\n"
                 "  and one per group of more than one GPU, each priced by what runs on it where calibrate --comm measured\n"
                 "  the parts), the backward's workspace = %.2f GiB\n",
            mem->other / GIB);
    if (mem->routed_grads > 0.0)
        fprintf(out, "  Of the workspace, the MoE backward's routed rows' gradients: the experts' output rows' and, where the\n"
                     "  rows move (EP or expert TP), their input rows', tokens x top_k x load x t_e/t rows of h each = %.2f GiB\n",
                mem->routed_grads / GIB);
    explain_nccl(out, m, l, e->gpu, mem->stage);
    fprintf(out, "Total %.2f GiB of %.2f GiB: %s.\n", mem->total / GIB, mem->capacity / GIB,
            e->fits ? "fits" : "does not fit");
    double whole_state = e->params_total * adam_bytes_per_param(gradient_memory_bytes(l));
    double whole_act = korthikanti_activation_bytes_per_layer(s, b, h, a, 1.0, 0, l->recompute) * L;
    fprintf(out, "For memory alone, unsplit: %.4g x %g B = %.0f GB of model state plus %.0f GB of activations (s b h L x\n"
                 "  Korthikanti's factor) = %.0f GB, so at least %.0f GPUs of %.0f GiB.\n",
            e->params_total, adam_bytes_per_param(gradient_memory_bytes(l)), whole_state / 1e9, whole_act / 1e9,
            (whole_state + whole_act) / 1e9, ceil((whole_state + whole_act) / g->memory_bytes), g->memory_bytes / GIB);

    heading(out, 4, "Communication");
    double bytes;
    int count;
    const stage_ops *slow = estimate_stage_ops(e, e->slowest_stage);
    fprintf(out, "Ring collectives over n GPUs, S bytes, BW per direction, latency alpha:\n"
                 "  all-reduce 2(n-1)/n S/BW + 2(n-1) alpha; reduce-scatter and all-gather (n-1)/n S/BW + (n-1) alpha.\n");
    double tp_time = comm_time(slow, GROUP_TP, PASS_FWD, &bytes, &count);
    if (l->tp > 1)
        fprintf(out, "TP: each layer %s, each of s b h B%s = %.4g MB;\n"
                     "  %d TP collectives per micro-batch on stage %lld take %.4g ms, %.4g s per step over %lld micro-batches.\n",
                l->sp ? "all-gathers twice and reduce-scatters twice in the forward, and the same in the backward (the volume\n"
                        "  of the 2 + 2 all-reduces they replace)"
                      : "all-reduces twice in the forward (after attention and after the MLP) and twice in the backward",
                layout_cp(l) > 1 ? " / c" : "", rank_tokens(l) * h * B / 1e6, count,
                (long long)slow->stage, tp_time * 1e3, e->tp_comm_s, (long long)e->microbatches);
    if (l->tp > 1 && l->tp_overlap == TP_OVERLAP_BACKWARD)
        fprintf(out, "  --tp-overlap backward (Megatron's default): in the backward %s;\n"
                     "  each costs only what it adds to that GEMM's time (docs/model.md, \"Overlap\"), and the step's TP\n"
                     "  figure counts it so.\n",
                l->sp ? "each column-parallel\n  input is gathered again beside the input-gradient "
                        "GEMM and its gradient reduce-scattered beside the\n  weight-gradient GEMM"
                      : "each column-parallel\n  input's gradient is all-reduced beside the weight-gradient GEMM");
    if (l->tp <= 1)
        fprintf(out, "TP: t = 1, no tensor-parallel traffic.\n");
    cp_explain(out, e, slow);
    ep_explain(out, e, slow);
    double pp_time = comm_time(slow, GROUP_PP, PASS_FWD, &bytes, &count);
    if (l->pp > 1)
        fprintf(out, "PP: each boundary sends s b h B / t%s = %.4g MB forward and the same gradient backward per micro-batch:\n"
                     "  %.4g ms per micro-batch, %.4g s per step.\n",
                layout_cp(l) > 1 ? " / c" : "", bytes / 1e6, pp_time * 1e3, e->pp_comm_s);
    else
        fprintf(out, "PP: p = 1, no pipeline traffic.\n");
    if (l->dp > 1 || layout_cp(l) > 1) explain_data_parallel(out, e, slow);
    else
        fprintf(out, "DP: d_p = 1, no gradient traffic.\n");

    heading(out, 5, "The TP compute/bandwidth ratio limit");
    fprintf(out, "Per token a TP rank does 2 x 3 x h x h/t FLOP and exchanges about h values of B bytes:\n");
    fprintf(out, "  ratio = 6 (h/t) / B = 6 x (%g/%g) / %g = %.0f FLOP per byte.\n", h, t, B, e->tp_ratio);
    fprintf(out, "Hidden communication needs ratio >= FLOPS/BW = %.4g / %.4g = %.0f, so\n", peak,
            e->tp_link_bytes_per_s, peak / e->tp_link_bytes_per_s);
    fprintf(out, "  t_max = 6 h / (B FLOPS/BW) = 6 x %g / (%g x %.0f) = %.1f; TP %lld is %s it.\n", h, B,
            peak / e->tp_link_bytes_per_s, e->tp_ratio_limit, (long long)l->tp,
            (double)l->tp <= e->tp_ratio_limit ? "within" : "ABOVE");

    heading(out, 6, "Step time");
    fprintf(out, "Each op costs max(FLOPs / (peak x %.2f), bytes / (HBM %.0f GB/s x %.2f)); collectives as above.\n",
            g->gemm_efficiency, g->hbm_bytes_per_s / 1e9, g->membound_efficiency);
    if (l->attention == ATTENTION_SEXTANT && (g->attention_fwd_efficiency > 0 || g->attention_bwd_efficiency > 0))
        fprintf(out, "sextant-gpu's fused attention uses the fractions calibrate measured on it instead of %.2f: "
                     "forward %.3f, backward %.3f.\n",
                g->gemm_efficiency, g->attention_fwd_efficiency, g->attention_bwd_efficiency);
    else if (attention_is_fused(l->attention) && (g->flash_fwd_efficiency > 0 || g->flash_bwd_efficiency > 0))
        fprintf(out, "The frameworks' fused attention (FlashAttention-2/3, cuDNN) runs at the prior fractions instead of %.2f: "
                     "forward %.3f, backward %.3f.\n",
                g->gemm_efficiency, g->flash_fwd_efficiency, g->flash_bwd_efficiency);
    if (first_generation_speed(g, l->attention) != 1.0)
        fprintf(out, "The first-generation fused attention (%s) runs the same work at %.3g of that speed.\n",
                l->attention == ATTENTION_FLASH1 ? "flash1: FlashAttention-1" : "flash1-triton: its Triton port",
                first_generation_speed(g, l->attention));
    if (g->gemm_times || g->attention_times[0] || g->attention_times[1] || g->unfused_attention_times[0] ||
        g->unfused_attention_times[1])
        fprintf(out, "Calibrated: %d GEMM shapes, %d + %d fused and %d + %d unfused attention shapes were timed on "
                     "this GPU; an op of a timed shape (or on the line through timed shapes that differ only in the "
                     "token count%s) takes that time instead, the others the formula above.\n",
                g->gemm_times, g->attention_times[0], g->attention_times[1], g->unfused_attention_times[0],
                g->unfused_attention_times[1], g->gemm_tile_flops > 0 ? "; for GEMMs the exact shape only" : "");
    if (g->gemm_tile_flops > 0 && g->sm_count > 0)
        fprintf(out, "GEMMs of other shapes take their tiles and waves: %.2f us + ceil(tiles / %.0f SMs) x (%.3f us + "
                     "2 x 128 x 128 x K per tile at %.0f TFLOP/s over the SMs), 128 x 128 tiles, K split when the tiles "
                     "leave SMs idle; x %.3f with a fused bias gradient (docs/model.md, \"GEMM time over M, N, K\").\n",
                g->gemm_fixed_s * 1e6, g->sm_count, g->gemm_tile_s * 1e6, g->gemm_tile_flops / 1e12,
                g->gemm_bias_grad_factor > 0 ? g->gemm_bias_grad_factor : 1.0);
    if (g->gemm_tile_flops > 0 && g->gemm_accumulate_read_factor > 0 && l->grad_accum == GRAD_ACCUM_IN_PLACE)
        fprintf(out, "A weight gradient adds into the %s gradient (beta = 1): it also reads its m x n outputs, %.3f x their "
                     "time at HBM speed%s (docs/model.md, \"GEMM time over M, N, K\").\n",
                accumulated_gradient_bytes(l) > 2.0 ? "fp32" : "16-bit", g->gemm_accumulate_read_factor,
                accumulated_gradient_bytes(l) > 2.0 ? ", and stores 2 bytes more an element than a 16-bit output, x the "
                                                      "write factor"
                                                    : "");
    if (g->membound_overhead_s > 0)
        fprintf(out, "Each memory-bound op also pays the %.2f us a kernel spends filling and draining the GPU "
                     "(calibrated).\n", g->membound_overhead_s * 1e6);
    fprintf(out, "One micro-batch, forward and backward, on the slowest stage (%lld): %.4g ms.\n",
            (long long)e->slowest_stage, e->microbatch_s * 1e3);
    fprintf(out, "Micro-batches per step m = B / (b d_p) = %g / (%g x %g) = %lld.\n", Bglobal, b, dp,
            (long long)e->microbatches);
    if (l->pp > 1) {
        int64_t first, middle, last;
        pipeline_split(m, l, &first, &middle, &last);
        const double *t_mb = e->stage_microbatch_s;
        if (l->pp > 2)
            fprintf(out, "Stages hold %lld (first), %lld (each of the %lld middle) and %lld (last) layers; a micro-batch takes "
                         "%.4g, %.4g and %.4g ms on them (docs/model.md, \"Uneven pipeline stages\").\n",
                    (long long)first, (long long)middle, (long long)(l->pp - 2), (long long)last, t_mb[STAGE_FIRST] * 1e3,
                    t_mb[STAGE_MIDDLE] * 1e3, t_mb[STAGE_LAST] * 1e3);
        else
            fprintf(out, "Stages hold %lld (first) and %lld (last) layers; a micro-batch takes %.4g and %.4g ms on them.\n",
                    (long long)first, (long long)last, t_mb[STAGE_FIRST] * 1e3, t_mb[STAGE_LAST] * 1e3);
        fprintf(out, "1F1B: the slowest stage runs all m micro-batches; each other stage adds one on the way in and out%s:\n"
                     "  bubble = (sum of the stages' micro-batch - the slowest's)%s = %.4g s, %.1f%% of the step "
                     "(equal stages: (p-1)/(m+p-1) = %.1f%% of the pipeline's slots).\n",
                l->vpp > 1 ? ", a 1/v chunk of it when interleaved" : "", l->vpp > 1 ? " / v" : "", e->bubble_s,
                100.0 * e->bubble_fraction, 100.0 * (p - 1.0) / ((double)e->microbatches + p - 1.0));
    }
    if (e->step_clock_hz > 0) {
        double cap = g->power_cap_w > 0 ? g->power_cap_w : g->tdp_w;
        char collectives[96] = "";
        if (g->collective_power_w > g->power_static_w)
            snprintf(collectives, sizeof collectives, ", %.0f W above P_static while a collective runs",
                     g->collective_power_w - g->power_static_w);
        fprintf(out, "Power cap (calibrated): at clock fraction x a step draws P = P_static + E x^%.2f / t, with "
                     "P_static %.0f W and E the switching energy of its work at the top clock (%.3g pJ per GEMM FLOP, "
                     "%.3g per attention FLOP, %.3g per byte%s); at the top clock (%.0f MHz) this step would draw %.0f W",
                g->clock_energy_exponent, g->power_static_w, g->energy_gemm_j_per_flop * 1e12,
                g->energy_attention_j_per_flop * 1e12, g->energy_j_per_byte * 1e12, collectives, g->clock_max_hz / 1e6,
                e->top_clock_power_w);
        double leak = e->step_static_w - g->power_static_w;   /* the leakiest chip's, as the estimate settled it */
        if (e->clock_fraction < 1.0 && leak > 0.0)
            fprintf(out, " for the leakiest of its %lld GPUs (chips spread %.0f W in static power, the largest of %lld "
                         "%.2f sigmas above the mean: P_static + %.0f W), over the %.0f W cap, so it lowers its clock to "
                         "where P = cap and the step waits for it: %.0f MHz. The %.4g s of work that follows the clock "
                         "(tensor-core GEMMs, fused attention) take %.4g s.\n",
                    (long long)l->gpus, g->power_static_spread_w, (long long)l->gpus, leak / g->power_static_spread_w,
                    leak, cap, e->step_clock_hz / 1e6, e->clock_bound_top_s, e->clock_bound_s);
        else if (e->clock_fraction < 1.0)
            fprintf(out, ", over the %.0f W cap, so the GPU lowers its clock to where P = cap: %.0f MHz. The %.4g s of "
                         "work that follows the clock (tensor-core GEMMs, fused attention) take %.4g s.\n",
                    cap, e->step_clock_hz / 1e6, e->clock_bound_top_s, e->clock_bound_s);
        else if (e->clock_bound_s != e->clock_bound_top_s)
            fprintf(out, ", under the %.0f W cap: the clock stays at the top, where the %.4g s of work that follows the "
                         "clock take %.4g s in a step (its GEMMs %.3g times calibrate's time alone).\n",
                    cap, e->clock_bound_top_s, e->clock_bound_s, gpu_clock_time_factor(g));
        else
            fprintf(out, ", under the %.0f W cap: the clock stays at the top.\n", cap);
        if (e->overlap_slowdown_s > 0.0)
            fprintf(out, "Of the step, %.4g s is compute slowed beside overlapped collectives (%.4g s of them, alone): "
                         "together they draw what the compute draws, so t and E above leave both out.\n",
                    e->overlap_slowdown_s, e->overlap_beside_s);
    }
    if (model_is_moe(m))
        fprintf(out, "Step = compute %.4g + TP %.4g + CP exposed %.4g + EP all-to-all %.4g + PP %.4g + DP exposed %.4g + bubble "
                     "%.4g + optimizer %.4g = %.4g s.\n", e->compute_s, e->tp_comm_s, e->cp_comm_s, e->ep_comm_s, e->pp_comm_s,
                e->dp_comm_s, e->bubble_s, e->optimizer_s, e->step_s);
    else if (layout_cp(l) > 1)
        fprintf(out, "Step = compute %.4g + TP %.4g + CP exposed %.4g + PP %.4g + DP exposed %.4g + bubble %.4g + optimizer %.4g "
                     "= %.4g s.\n", e->compute_s, e->tp_comm_s, e->cp_comm_s, e->pp_comm_s, e->dp_comm_s, e->bubble_s,
                e->optimizer_s, e->step_s);
    else
        fprintf(out, "Step = compute %.4g + TP %.4g + PP %.4g + DP exposed %.4g + bubble %.4g + optimizer %.4g = %.4g s.\n",
                e->compute_s, e->tp_comm_s, e->pp_comm_s, e->dp_comm_s, e->bubble_s, e->optimizer_s, e->step_s);

    heading(out, 7, "Throughput, time and cost");
    fprintf(out, "tokens/s = B s / step = %g / %.4g = %.4g (%.4g per GPU).\n", tokens_per_step, e->step_s,
            e->tokens_per_s, e->tokens_per_s_per_gpu);
    fprintf(out, "MFU = model FLOP per step / (step x GPUs x peak) = %.4g / (%.4g x %lld x %.4g) = %.1f%%; HFU %.1f%%.\n",
            e->model_flops_per_step, e->step_s, (long long)l->gpus, peak, 100.0 * e->mfu, 100.0 * e->hfu);
    fprintf(out, "Steps = D / (B s) = %.4g / %g = %.4g; time = steps x step = %.4g s = %.2f days.\n", e->job.tokens,
            tokens_per_step, e->steps, e->time_to_train_s, e->time_to_train_s / 86400.0);
    fprintf(out, "GPU-hours = %lld x %.4g h = %.4g; cost = GPU-hours x $%.2f = $%.4g.\n", (long long)l->gpus,
            e->time_to_train_s / 3600.0, e->gpu_hours, e->job.price_usd_per_gpu_hour, e->cost_usd);

    heading(out, 8, "Warnings");
    if (!e->nwarnings) fprintf(out, "None.\n");
    for (int i = 0; i < e->nwarnings; i++) fprintf(out, "- %s\n", e->warnings[i]);
}

void report_spec_examples(FILE *out)
{
    fprintf(out, "docs/SPEC.md's worked examples, computed by sextant's formula functions\n");

    heading(out, 1, "Training compute, 6 N D");
    double gpt3 = six_n_d_flops(175e9, 300e9);
    fprintf(out, "GPT-3 175B on 300B tokens: 6 x 175e9 x 300e9 = %.3g FLOP (the GPT-3 paper reports 3.14e23).\n", gpt3);
    double group = six_n_d_flops(1e9, 8.0 * 4096.0);
    fprintf(out, "A 1B-parameter pipeline group, batch 8, s = 4096: 8 x 4096 x 6 x 1e9 = %.3g FLOP,\n", group);
    fprintf(out, "  %.2f s on a GPU delivering 330 TFLOP/s at 100%% utilisation.\n",
            roofline_s(group, 330e12, 0.0, 0.0));

    heading(out, 2, "Memory of LLaMA-2 70B as a textbook GPT");
    double n = 70e9, L = 80, h = 8192, s = 4096, b = 8;
    double weights = n * 2.0, grads = n * 2.0, adam = n * 12.0;
    double act = korthikanti_activation_bytes_per_layer(s, b, h, 64, 1, 0, RECOMPUTE_SELECTIVE) * L;
    double total = weights + grads + adam + act;
    fprintf(out, "weights 70e9 x 2 B = %.0f GB; gradients %.0f GB; Adam 70e9 x 12 B = %.0f GB\n", weights / 1e9,
            grads / 1e9, adam / 1e9);
    fprintf(out, "activations (selective recomputation) s b h L x 34 = 4096 x 8 x 8192 x 80 x 34 = %.0f GB\n", act / 1e9);
    fprintf(out, "total %.0f GB: at least %.0f GPUs of 80 GB or %.0f GPUs of 24 GB for memory alone.\n", total / 1e9,
            ceil(total / 80e9), ceil(total / 24e9));
    fprintf(out, "(With its real architecture, GQA with 8 KV heads and a SwiGLU FFN of 28672: `sextant explain llama2-70b`.)\n");

    heading(out, 3, "Communication over PCIe");
    double grad_bytes = 1e9 * 4.0;
    double one_pass = grad_bytes / 32e9;
    fprintf(out, "fp32 gradients of a 1B-parameter group: %.0f GB; over PCIe Gen4 x16 at 32 GB/s per direction one pass\n"
                 "  takes %.3f s, and an all-reduce needs two: %.3f s as n grows (ring: 2(n-1)/n S/BW, %.3f s for n = 8).\n",
            grad_bytes / 1e9, one_pass, 2.0 * one_pass, ring_allreduce_s(8, grad_bytes, 32e9, 0.0));

    heading(out, 4, "The TP compute/bandwidth ratio limit");
    double rtx = tp_ratio_limit(8192, 2, 330e12, 32e9);
    double h100 = tp_ratio_limit(8192, 2, 989e12, 450e9);
    fprintf(out, "RTX 4090: 330 TFLOP/s (as quoted) over PCIe Gen4 x16 at 32 GB/s: FLOPS/BW = %.0f; h = 8192, B = 2:\n"
                 "  t_max = 6h/(B FLOPS/BW) = %.1f, so TP beyond 2 GPUs leaves compute idle.\n",
            330e12 / 32e9, rtx);
    fprintf(out, "H100 SXM: 989 TFLOP/s bf16 dense over NVLink 450 GB/s per direction: FLOPS/BW = %.0f: t_max = %.1f,\n"
                 "  so TP = 8 inside one node is fine for h = 8192.\n",
            989e12 / 450e9, h100);
    double one_head = tp_compute_comm_ratio(128.0 * 64.0, 64.0, 2.0);
    fprintf(out, "One attention head per GPU (d = 128): ratio 3 d = %.0f FLOP/byte; a 330 TFLOP/s GPU would need\n"
                 "  330e12 / %.0f = %.0f GB/s per direction (%.1f TB/s both ways).\n",
            one_head, one_head, 330e12 / one_head / 1e9, 2.0 * 330e12 / one_head / 1e12);
}
