/* Costs the op list of a layout: memory, step time, FLOPs, throughput,
 * time-to-train, cost and the warnings a reviewer would raise.
 * docs/model.md derives each step. */
#include "planner.h"

#include <math.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdio.h>
#include <string.h>

/* Megatron's default gradient bucket: 40M elements (docs/model.md, "Overlap"). */
#define DP_BUCKET_ELEMENTS 40e6
#define BUBBLE_WARN_FRACTION 0.10

static void warn(estimate_t *e, const char *fmt, ...)
{
    if (e->nwarnings >= WARNINGS_MAX) return;
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(e->warnings[e->nwarnings++], sizeof e->warnings[0], fmt, ap);
    va_end(ap);
}

static double activation_element_bytes(precision_t p)
{
    return (p == PREC_FP32 || p == PREC_TF32) ? 4.0 : 2.0;
}

int layout_check(const model_t *m, const layout_t *l, char *err, size_t errlen)
{
    if (l->tp < 1 || l->pp < 1 || l->dp < 1 || l->mbs < 1 || l->gbs < 1 || l->seq < 1 || l->vpp < 1 ||
        l->gpus < 1 || l->gpus_per_node < 1) {
        snprintf(err, errlen, "layout: every degree and size must be at least 1");
        return -1;
    }
    if (l->tp * l->pp * l->dp != l->gpus) {
        snprintf(err, errlen, "--gpus %lld is not --tp %lld x --pp %lld x --dp %lld", (long long)l->gpus,
                 (long long)l->tp, (long long)l->pp, (long long)l->dp);
        return -1;
    }
    if (l->pp > m->layers) {
        snprintf(err, errlen, "--pp %lld: %s has only %lld layers", (long long)l->pp, m->name,
                 (long long)m->layers);
        return -1;
    }
    if (layers_on_stage(m->layers, l->pp, l->pp - 1) < 1) {
        snprintf(err, errlen, "--pp %lld: %lld layers leave the last stage empty", (long long)l->pp,
                 (long long)m->layers);
        return -1;
    }
    if (l->tp > m->heads) {
        snprintf(err, errlen, "--tp %lld: %s has only %lld attention heads to split", (long long)l->tp,
                 m->name, (long long)m->heads);
        return -1;
    }
    if (l->vpp > 1 && l->pp < 2) {
        snprintf(err, errlen, "--vpp %lld: interleaving needs --pp of 2 or more", (long long)l->vpp);
        return -1;
    }
    if (l->vpp > 1 && m->layers < l->pp * l->vpp) {
        snprintf(err, errlen, "--vpp %lld: %lld layers cannot fill %lld pipeline chunks", (long long)l->vpp,
                 (long long)m->layers, (long long)(l->pp * l->vpp));
        return -1;
    }
    if (l->zero < 0 || l->zero > 3) {
        snprintf(err, errlen, "--zero %d: expected 0, 1, 2 or 3", l->zero);
        return -1;
    }
    if (l->gbs < l->mbs * l->dp) {
        snprintf(err, errlen, "--gbs %lld is smaller than --mbs %lld x dp %lld", (long long)l->gbs,
                 (long long)l->mbs, (long long)l->dp);
        return -1;
    }
    return 0;
}

/* Bandwidth per direction and latency of the link a group's traffic crosses.
 * Placement: TP innermost, then DP, then PP (Megatron's rank order). */
static void group_link(const hw_gpu *gpu, const hw_node *node, const layout_t *l, group_t group,
                       double *bw, double *latency, int *crosses)
{
    int64_t span = group == GROUP_TP ? l->tp : group == GROUP_DP ? l->tp * l->dp : l->tp * l->dp * l->pp;
    *crosses = span > l->gpus_per_node;
    if (*crosses) {
        /* NCCL spreads a ring that crosses nodes over all of a node's NICs,
         * shared by the groups that cross at once: a TP group leaving the
         * node has them all, each of the t DP groups of a node a t-th, and
         * every pipeline stage pair its own GPU's share */
        double nic_per_gpu = hw_node_inter_bytes_per_s_per_gpu(node);
        double sharing = group == GROUP_TP ? 1.0 : group == GROUP_DP ? (double)l->tp : (double)l->gpus_per_node;
        if (sharing > (double)l->gpus_per_node) sharing = (double)l->gpus_per_node;
        double nic = nic_per_gpu * (double)node->gpus_per_node / sharing;
        *bw = gpu->measured_inter_bytes_per_s > 0 ? gpu->measured_inter_bytes_per_s : nic;
        /* a ring that leaves the node is no faster than the node's own link */
        double intra = gpu->measured_intra_bytes_per_s > 0 ? gpu->measured_intra_bytes_per_s
                                                           : node->intra_bytes_per_s_per_dir;
        if (intra < *bw) *bw = intra;
        *latency = node->inter_latency_s;
    } else {
        *bw = gpu->measured_intra_bytes_per_s > 0 ? gpu->measured_intra_bytes_per_s
                                                  : node->intra_bytes_per_s_per_dir;
        *latency = node->intra_latency_s;
    }
}

/* Achievable fraction of peak for a matrix op of `flops`: the hwdb's flat
 * default, or, once calibrated, a curve that saturates with size
 * (docs/model.md, "Step time"): small GEMMs leave SMs idle. */
static double gemm_efficiency(const hw_gpu *gpu, double flops)
{
    if (gpu->gemm_half_flops <= 0.0) return gpu->gemm_efficiency;
    return gpu->gemm_efficiency * flops / (flops + gpu->gemm_half_flops);
}

/* The CPU issues one kernel per launch_overhead_s at best; while it runs
 * ahead of the GPU that cost hides, so it bounds an op from below rather
 * than adding to it (docs/model.md, "Step time"). */
static double with_launch(const hw_gpu *gpu, double seconds)
{
    return seconds > gpu->launch_overhead_s ? seconds : gpu->launch_overhead_s;
}

static double op_cost(op_t *op, const hw_gpu *gpu, const hw_node *node, const layout_t *l)
{
    double membw = gpu->hbm_bytes_per_s * gpu->membound_efficiency;
    precision_t matrix = l->precision;
    switch (op->kind) {
    case OP_GEMM:
        return with_launch(gpu, roofline_s(op->flops, gpu->peak_flops[matrix] * gemm_efficiency(gpu, op->flops), op->bytes, membw));
    case OP_ATTENTION:
        /* attention kernels stay in 16-bit when the GEMMs run in fp8 */
        if (matrix == PREC_FP8) matrix = gpu->peak_flops[PREC_BF16] > 0 ? PREC_BF16 : PREC_FP16;
        if (l->attention == ATTENTION_UNFUSED) {
            /* its kernels in turn, each bound by its own roofline; bytes outside
             * the split (dropout's mask) are one more pass over memory */
            double kflops[UNFUSED_ATTENTION_KERNELS_MAX], kbytes[UNFUSED_ATTENTION_KERNELS_MAX];
            double heads = (double)op->batch, s = (double)op->m, d = (double)op->k;
            int kernels = unfused_attention_kernels(s, d, activation_element_bytes(l->precision), 0.0,
                                                    op->pass == PASS_BWD, kflops, kbytes);
            double seconds = 0.0, split_bytes = 0.0;
            for (int i = 0; i < kernels; i++) {
                double rate = gpu->peak_flops[matrix] * gemm_efficiency(gpu, heads * kflops[i]);
                seconds += roofline_s(heads * kflops[i], rate, heads * kbytes[i], membw);
                split_bytes += heads * kbytes[i];
            }
            if (op->bytes > split_bytes) seconds += (op->bytes - split_bytes) / membw;
            return with_launch(gpu, seconds);
        }
        return with_launch(gpu, roofline_s(op->flops, gpu->peak_flops[matrix] * gemm_efficiency(gpu, op->flops), op->bytes, membw));
    case OP_MEMBOUND:
        if (op->bytes <= 0.0) return 0.0;   /* a bookkeeping entry, no kernel */
        return with_launch(gpu, op->bytes / membw);
    case OP_COMM: {
        double bw, latency;
        group_link(gpu, node, l, op->group, &bw, &latency, &op->crosses_node);
        double n = (double)op->group_size;
        switch (op->coll) {
        case COLL_ALLREDUCE: return ring_allreduce_s(n, op->comm_bytes, bw, latency);
        case COLL_REDUCE_SCATTER: return ring_reduce_scatter_s(n, op->comm_bytes, bw, latency);
        case COLL_ALLGATHER: return ring_allgather_s(n, op->comm_bytes, bw, latency);
        case COLL_SENDRECV: return sendrecv_s(op->comm_bytes, bw, latency);
        }
    }
    }
    return 0.0;
}

typedef struct {
    double compute_fwd, compute_bwd;      /* per micro-batch, recomputation counted in bwd */
    double tp, pp;                        /* exposed per micro-batch */
    double zero3_fwd, zero3_bwd;          /* DP traffic of every micro-batch (ZeRO-2/3), before overlap */
    double dp_bwd, dp_fwd;                /* per step, before overlap */
    double dp_bucket_fraction;
    double optimizer;
    double saved_bytes;                   /* per micro-batch */
    double params;
} stage_cost;

static void cost_stage(stage_ops *s, const hw_gpu *gpu, const hw_node *node, const layout_t *l,
                       stage_cost *c)
{
    memset(c, 0, sizeof *c);
    double grad_bytes = 0.0;
    for (int i = 0; i < s->nops; i++) {
        op_t *op = &s->ops[i];
        op->time_s = op_cost(op, gpu, node, l);
        double t = op->time_s * (double)op->count;
        if (op->pass == PASS_FWD) c->saved_bytes += op->saved_bytes * (double)op->count;
        if (op->kind != OP_COMM) {
            if (op->pass == PASS_FWD) c->compute_fwd += t;
            else if (op->pass == PASS_BWD || op->pass == PASS_RECOMPUTE) c->compute_bwd += t;
            else c->optimizer += t;
            continue;
        }
        if (op->group == GROUP_TP) c->tp += t;
        else if (op->group == GROUP_PP) c->pp += t;
        else if (op->pass == PASS_FWD) c->zero3_fwd += t;
        else if (op->pass == PASS_BWD) c->zero3_bwd += t;
        else {
            if (op->overlap == OVERLAP_FWD) c->dp_fwd += t;
            else c->dp_bwd += t;
            if (op->coll != COLL_ALLGATHER) grad_bytes = op->comm_bytes;
        }
    }
    if (grad_bytes > 0.0) {
        double element = l->fp32_grads ? 4.0 : activation_element_bytes(l->precision);
        double fraction = DP_BUCKET_ELEMENTS * element / grad_bytes;
        c->dp_bucket_fraction = fraction < 1.0 ? fraction : 1.0;
    }
}

/* Communication that hides behind a compute window, except its last bucket. */
static double exposed(double comm, double window, double last_bucket_fraction)
{
    double rest = comm - window;
    double tail = comm * last_bucket_fraction;
    if (rest < tail) rest = tail;
    return rest > 0.0 ? rest : 0.0;
}

/* Whole-model FLOPs of one sequence, from the op list of an unsplit model. */
static void model_flops_per_sequence(const model_t *m, const layout_t *l, double *model,
                                     double *hardware, double *attention, double *logits)
{
    /* A search asks this for thousands of layouts that share the model,
     * sequence and recomputation: remember the last answer. */
    static struct {
        model_t model;
        int64_t seq;
        recompute_t recompute;
        attention_impl_t attention;
        precision_t precision;
        double model_flops, hardware, attention_flops, logits;
        int valid;
    } last;
    if (last.valid && last.seq == l->seq && last.recompute == l->recompute && last.attention == l->attention &&
        last.precision == l->precision && memcmp(&last.model, m, sizeof *m) == 0) {
        *model = last.model_flops;
        *hardware = last.hardware;
        *attention = last.attention_flops;
        *logits = last.logits;
        return;
    }
    layout_t whole = *l;
    whole.tp = whole.pp = whole.dp = whole.vpp = whole.mbs = 1;
    whole.gpus = 1;
    whole.sp = 0;
    whole.zero = 0;
    stage_ops s;
    build_stage_ops(m, &whole, 0, &s);
    *model = *hardware = *attention = *logits = 0.0;
    for (int i = 0; i < s.nops; i++) {
        const op_t *op = &s.ops[i];
        if (op->pass == PASS_STEP) continue;
        double c = (double)op->count;
        *model += op->model_flops * c;
        *hardware += op->hardware_flops * c;
        if (op->kind == OP_ATTENTION) *attention += op->model_flops * c;
        if (strncmp(op->name, "lm_head", 7) == 0) *logits += op->model_flops * c;
    }
    last.model = *m;
    last.seq = l->seq;
    last.recompute = l->recompute;
    last.attention = l->attention;
    last.precision = l->precision;
    last.model_flops = *model;
    last.hardware = *hardware;
    last.attention_flops = *attention;
    last.logits = *logits;
    last.valid = 1;
}

static void memory_of_stage(const model_t *m, const layout_t *l, const stage_ops *s,
                            const stage_cost *c, double gpu_context_bytes, memory_breakdown *mem)
{
    memset(mem, 0, sizeof *mem);
    double dp = (double)l->dp;
    int fp32 = l->precision == PREC_FP32 || l->precision == PREC_TF32;
    double weight_bytes = fp32 ? 4.0 : 2.0;
    double grad_bytes = l->fp32_grads ? 4.0 : weight_bytes;
    double optimizer_bytes = fp32 ? 8.0 : 12.0;     /* mixed precision adds the fp32 master copy */
    mem->stage = s->stage;
    mem->params = c->params;
    mem->weights = c->params * weight_bytes / (l->zero >= 3 ? dp : 1.0);
    mem->gradients = c->params * grad_bytes / (l->zero >= 2 ? dp : 1.0);
    mem->optimizer = c->params * optimizer_bytes / (l->zero >= 1 ? dp : 1.0);
    int64_t m_micro = l->gbs / (l->mbs * l->dp);
    mem->inflight_microbatches = pipeline_inflight_microbatches((double)l->pp, (double)m_micro,
                                                                (double)l->vpp, (double)s->stage);
    mem->activations = c->saved_bytes * mem->inflight_microbatches;
    if (l->recompute == RECOMPUTE_FULL && s->layers > 0) {
        /* backward of a layer recomputes its forward: one layer's full set is live again */
        layout_t kept = *l;
        kept.recompute = RECOMPUTE_NONE;
        stage_ops again;
        build_stage_ops(m, &kept, s->stage, &again);
        double saved = 0.0;
        for (int i = 0; i < again.nops; i++)
            if (again.ops[i].pass == PASS_FWD && strcmp(again.ops[i].name, "embedding") != 0 &&
                strcmp(again.ops[i].name, "final_norm") != 0 && strcmp(again.ops[i].name, "lm_head") != 0)
                saved += again.ops[i].saved_bytes * (double)again.ops[i].count;
        mem->activations += saved / (double)s->layers;
    }
    if (s->last) {
        /* the padded logits of one micro-batch; a fused cross-entropy writes
         * their gradient in place (llm.c, Megatron's fused loss) */
        double B = activation_element_bytes(l->precision);
        mem->logits = (double)(l->seq * l->mbs) * (double)padded_vocab(m, l->tp) / (double)l->tp * B;
    }
    double workspace = 0.0;
    if (s->layers > 0) {
        double t = (double)l->tp, tokens = (double)(l->seq * l->mbs);
        double kv = m->kv_heads >= l->tp ? (double)m->kv_heads / t : 1.0;
        double qkv_width = ((double)m->heads / t + 2.0 * kv) * (double)m->head_dim;
        double up_width = (m->ffn_kind == FFN_SWIGLU ? 3.0 : 1.0) * (double)m->ffn / t * (double)m->top_k;
        double scores = l->attention == ATTENTION_UNFUSED
                            ? (double)l->mbs * (double)m->heads / t * (double)l->seq * (double)l->seq : 0.0;
        workspace = backward_workspace_bytes(tokens, (double)m->hidden, qkv_width, up_width, scores,
                                             activation_element_bytes(l->precision));
    }
    mem->workspace = workspace;
    mem->other = other_memory_allowance(l, gpu_context_bytes, workspace);
    mem->total = mem->weights + mem->gradients + mem->optimizer + mem->activations + mem->logits + mem->other;
}

static int estimate_core(const model_t *m, const hw_gpu *gpu, const hw_node *node, const layout_t *l,
                         const job_t *job, estimate_t *e, char *err, size_t errlen)
{
    /* the op lists are rebuilt below; clear only what precedes them */
    memset(e, 0, offsetof(estimate_t, first_stage));
    e->model = m;
    e->gpu = gpu;
    e->node = node;
    e->layout = *l;
    e->job = *job;
    if (layout_check(m, l, err, errlen) != 0) return -1;
    if (gpu->peak_flops[l->precision] <= 0.0) {
        snprintf(err, errlen, "--precision %s: %s has no %s tensor rate", precision_name(l->precision),
                 gpu->name, precision_name(l->precision));
        return -1;
    }
    const double B = activation_element_bytes(l->precision);
    e->microbatches = l->gbs / (l->mbs * l->dp);
    int64_t used_gbs = e->microbatches * l->mbs * l->dp;
    e->layout.gbs = used_gbs;
    e->params_total = model_params_total(m);
    e->params_active = model_params_active(m);

    /* the two stages that differ: the first (embedding, most in flight) and the last (head, logits) */
    if (build_stage_ops(m, l, 0, &e->first_stage) != 0 ||
        (l->pp > 1 && build_stage_ops(m, l, l->pp - 1, &e->last_stage) != 0)) {
        snprintf(err, errlen, "internal: op list longer than %d ops", OPS_MAX);
        return -1;
    }
    if (l->pp == 1) e->last_stage = e->first_stage;
    stage_ops *stages[2] = {&e->first_stage, &e->last_stage};
    stage_cost costs[2];
    memory_breakdown mem[2];
    double stage_mb_s[2], stage_dp_s[2];
    for (int i = 0; i < 2; i++) {
        cost_stage(stages[i], gpu, node, l, &costs[i]);
        costs[i].params = stages[i]->params;
        memory_of_stage(m, l, stages[i], &costs[i], gpu->context_bytes, &mem[i]);
        stage_cost *c = &costs[i];
        double z3 = exposed(c->zero3_fwd, c->compute_fwd, 0.0) + exposed(c->zero3_bwd, c->compute_bwd, 0.0);
        stage_mb_s[i] = c->compute_fwd + c->compute_bwd + c->tp + c->pp + z3;
        stage_dp_s[i] = exposed(c->dp_bwd, c->compute_bwd, c->dp_bucket_fraction) +
                        exposed(c->dp_fwd, c->compute_fwd, c->dp_bucket_fraction) +
                        z3 * (double)e->microbatches;
    }
    int slow = stage_mb_s[1] > stage_mb_s[0] ? 1 : 0;
    int heavy = mem[1].total > mem[0].total ? 1 : 0;
    const stage_cost *c = &costs[slow];
    double mbs_count = (double)e->microbatches;
    e->slowest_stage = stages[slow]->stage;
    e->microbatch_s = stage_mb_s[slow];
    e->compute_s = mbs_count * (c->compute_fwd + c->compute_bwd);
    e->tp_comm_s = mbs_count * c->tp;
    e->pp_comm_s = mbs_count * c->pp;
    e->bubble_s = (double)(l->pp - 1) / (double)l->vpp * e->microbatch_s;
    e->dp_comm_s = stage_dp_s[0] > stage_dp_s[1] ? stage_dp_s[0] : stage_dp_s[1];
    e->optimizer_s = costs[0].optimizer > costs[1].optimizer ? costs[0].optimizer : costs[1].optimizer;
    e->step_s = e->compute_s + e->tp_comm_s + e->pp_comm_s + e->bubble_s + e->dp_comm_s + e->optimizer_s;
    e->bubble_fraction = e->bubble_s / e->step_s;

    e->memory = mem[heavy];
    e->memory.capacity = gpu->memory_bytes;
    e->fits = e->memory.total <= e->memory.capacity;

    double model_seq, hardware_seq, attention_seq, logits_seq;
    model_flops_per_sequence(m, l, &model_seq, &hardware_seq, &attention_seq, &logits_seq);
    double sequences = (double)used_gbs;
    e->model_flops_per_step = model_seq * sequences;
    e->hardware_flops_per_step = hardware_seq * sequences;
    e->attention_flops_per_step = attention_seq * sequences;
    e->logits_flops_per_step = logits_seq * sequences;
    e->six_nd_per_step = six_n_d_flops(e->params_active, sequences * (double)l->seq);

    double peak = gpu->peak_flops[l->precision];
    double gpus = (double)l->gpus;
    e->tflops_per_gpu = e->model_flops_per_step / e->step_s / gpus;
    e->mfu = e->tflops_per_gpu / peak;
    e->hfu = e->hardware_flops_per_step / e->step_s / gpus / peak;
    e->tokens_per_s = sequences * (double)l->seq / e->step_s;
    e->tokens_per_s_per_gpu = e->tokens_per_s / gpus;
    e->steps = job->tokens / (sequences * (double)l->seq);
    e->time_to_train_s = e->steps * e->step_s;
    e->gpu_hours = gpus * e->time_to_train_s / 3600.0;
    e->cost_usd = e->gpu_hours * job->price_usd_per_gpu_hour;

    int tp_crosses;
    double tp_latency;
    group_link(gpu, node, l, GROUP_TP, &e->tp_link_bytes_per_s, &tp_latency, &tp_crosses);
    e->tp_ratio = tp_compute_comm_ratio((double)m->hidden, (double)l->tp, B);
    e->tp_ratio_limit = tp_ratio_limit((double)m->hidden, B, peak, e->tp_link_bytes_per_s);
    return 0;
}

int estimate_layout_fast(const model_t *m, const hw_gpu *gpu, const hw_node *node, const layout_t *l,
                         const job_t *job, estimate_t *e, char *err, size_t errlen)
{
    return estimate_core(m, gpu, node, l, job, e, err, errlen);
}

int estimate_layout(const model_t *m, const hw_gpu *gpu, const hw_node *node, const layout_t *l,
                    const job_t *job, estimate_t *e, char *err, size_t errlen)
{
    if (estimate_core(m, gpu, node, l, job, e, err, errlen) != 0) return -1;
    int64_t used_gbs = e->layout.gbs;
    int tp_crosses = l->tp > 1 && l->tp > l->gpus_per_node;

    /* what a reviewer would say */
    const double gib = 1073741824.0;
    if (!e->fits)
        warn(e, "does not fit: stage %lld needs %.1f GiB per GPU, %s has %.1f GiB (%.1f GiB short)",
             (long long)e->memory.stage, e->memory.total / gib, gpu->name, gpu->memory_bytes / gib,
             (e->memory.total - gpu->memory_bytes) / gib);
    if (tp_crosses)
        warn(e, "TP group of %lld leaves the node (%lld GPUs per node): its all-reduces run at the inter-node %.0f GB/s",
             (long long)l->tp, (long long)l->gpus_per_node, e->tp_link_bytes_per_s / 1e9);
    if ((double)l->tp > e->tp_ratio_limit)
        warn(e, "TP %lld is above the ratio limit t_max = %.1f (6h/(B*FLOPS/BW)): TP communication cannot hide behind compute",
             (long long)l->tp, e->tp_ratio_limit);
    if (e->bubble_fraction > BUBBLE_WARN_FRACTION)
        warn(e, "pipeline bubble is %.0f%% of the step (above %.0f%%): raise micro-batches per step (m = %lld) or --vpp",
             100.0 * e->bubble_fraction, 100.0 * BUBBLE_WARN_FRACTION, (long long)e->microbatches);
    if (used_gbs != l->gbs)
        warn(e, "global batch %lld is not divisible by mbs x dp = %lld: estimated with %lld",
             (long long)l->gbs, (long long)(l->mbs * l->dp), (long long)used_gbs);
    if (m->heads % l->tp != 0)
        warn(e, "%lld attention heads are not divisible by TP %lld", (long long)m->heads, (long long)l->tp);
    if (m->kv_heads % l->tp != 0 && l->tp % m->kv_heads != 0)
        warn(e, "%lld KV heads are not divisible by TP %lld", (long long)m->kv_heads, (long long)l->tp);
    else if (m->kv_heads < l->tp)
        warn(e, "TP %lld exceeds the %lld KV heads: each KV head is replicated on %lld ranks",
             (long long)l->tp, (long long)m->kv_heads, (long long)(l->tp / m->kv_heads));
    if (m->layers % (l->pp * l->vpp) != 0)
        warn(e, "%lld layers are not divisible by PP %lld x VPP %lld: stages are uneven (first %lld, last %lld layers)",
             (long long)m->layers, (long long)l->pp, (long long)l->vpp,
             (long long)layers_on_stage(m->layers, l->pp, 0),
             (long long)layers_on_stage(m->layers, l->pp, l->pp - 1));
    if (l->sp && l->tp == 1)
        warn(e, "--sp has no effect with TP 1");
    if (m->experts > 1)
        warn(e, "%s is a mixture of experts: experts are costed without expert parallelism (each TP rank holds a 1/t slice of every expert)",
             m->name);
    return 0;
}
