/* Costs the op list of a layout: memory, step time, FLOPs, throughput,
 * time-to-train, cost and the warnings a reviewer would raise.
 * docs/model.md derives each step. */
#include "planner.h"

#include <math.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>

/* Megatron's default gradient bucket: 40M elements (docs/model.md, "Overlap"). */
#define DP_BUCKET_ELEMENTS 40e6
#define BUBBLE_WARN_FRACTION 0.10
/* no clock below 30% of the top: the lowest an H100 showed under the cap was 66% (docs/validation) */
#define CLOCK_FRACTION_MIN 0.3

static void warn(estimate_t *e, const char *fmt, ...)
{
    if (e->nwarnings >= WARNINGS_MAX) return;
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(e->warnings[e->nwarnings++], sizeof e->warnings[0], fmt, ap);
    va_end(ap);
}

/* What context parallelism needs of the layout (docs/model.md, "Context parallelism"). */
int layout_check_cp(const model_t *m, const layout_t *l, char *err, size_t errlen)
{
    if (l->cp < 0) {
        snprintf(err, errlen, "--cp %lld: expected 1 or more", (long long)l->cp);
        return -1;
    }
    if (l->cp_comm != CP_COMM_RING && l->cp_comm != CP_COMM_ALLGATHER) {
        snprintf(err, errlen, "--cp-comm: expected ring or allgather");
        return -1;
    }
    if (l->cp <= 1) return 0;
    /* a causal model's sequence is cut into 2 cp chunks, rank i holding chunks i and 2cp-1-i */
    int64_t chunks = strcasecmp(m->family, "bert") != 0 ? 2 * l->cp : l->cp;
    if (l->seq % chunks != 0) {
        snprintf(err, errlen, "--cp %lld: the sequence %lld is not divisible by %s%lld (%s)", (long long)l->cp,
                 (long long)l->seq, chunks == l->cp ? "" : "2 x cp = ", (long long)chunks,
                 chunks == l->cp ? "each rank holds seq/cp tokens"
                                 : "causal load balancing gives each rank two of 2 x cp chunks");
        return -1;
    }
    if (!attention_is_fused(l->attention)) {
        snprintf(err, errlen, "--cp %lld: context parallelism needs a fused attention, --attention flash, flash1 or flash1-triton (its "
                 "blocks are fused attention kernels with a log-sum-exp)", (long long)l->cp);
        return -1;
    }
    return 0;
}

/* What expert parallelism needs (docs/model.md, "Mixture of experts"): Megatron carves the expert groups,
 * ETP x EP, out of the dense layers' TP x CP x DP ranks (expert-data-parallel = tp x cp x dp / (etp x ep));
 * with ETP = TP (its default) that is EP dividing dp x cp, the GPUs outside TP and PP.  Each rank holds
 * experts/ep whole experts, each split over etp ranks along its FFN width. */
static int layout_check_etp(const model_t *m, const layout_t *l, char *err, size_t errlen)
{
    int64_t etp = layout_etp(l), width = model_expert_ffn(m);
    if (l->etp < 0) {
        if (errlen) snprintf(err, errlen, "--etp %lld: expected 1 or more", (long long)l->etp);
        return -1;
    }
    if (etp == l->tp) return 0;
    if (!model_is_moe(m)) {
        if (errlen) snprintf(err, errlen, "--etp %lld: %s has no experts to split", (long long)etp, m->name);
        return -1;
    }
    if (width % etp != 0) {
        if (errlen) snprintf(err, errlen, "--etp %lld: %s's expert FFN width %lld is not divisible by it", (long long)etp,
                             m->name, (long long)width);
        return -1;
    }
    int64_t ranks = l->tp * dp_group_size(l);
    if (ranks % (etp * layout_ep(l)) != 0) {
        if (errlen) snprintf(err, errlen, "--etp %lld: etp x ep = %lld must divide tp x cp x dp = %lld (Megatron carves the expert "
                             "groups out of the dense layers' ranks)", (long long)etp, (long long)(etp * layout_ep(l)),
                             (long long)ranks);
        return -1;
    }
    return 0;
}

int layout_check_ep(const model_t *m, const layout_t *l, char *err, size_t errlen)
{
    if (l->ep < 0) {
        if (errlen) snprintf(err, errlen, "--ep %lld: expected 1 or more", (long long)l->ep);
        return -1;
    }
    /* Megatron-LM's arguments check: its MoE layers take sequence-parallel input under TP */
    if (model_is_moe(m) && l->tp > 1 && !l->sp) {
        if (errlen) snprintf(err, errlen, "--sp: %s is a mixture of experts, and Megatron requires sequence parallelism with MoE and "
                 "TP %lld", m->name, (long long)l->tp);
        return -1;
    }
    if (l->ep > 1 && !model_is_moe(m)) {
        if (errlen) snprintf(err, errlen, "--ep %lld: %s has no experts to split", (long long)l->ep, m->name);
        return -1;
    }
    if (layout_check_etp(m, l, err, errlen) != 0) return -1;
    if (l->ep <= 1) return 0;
    if (m->experts % l->ep != 0) {
        if (errlen) snprintf(err, errlen, "--ep %lld: %s's %lld experts are not divisible by it", (long long)l->ep, m->name,
                 (long long)m->experts);
        return -1;
    }
    if (layout_etp(l) == l->tp && dp_group_size(l) % l->ep != 0) {
        if (errlen) snprintf(err, errlen, "--ep %lld: it must divide dp x cp = %lld, the GPUs outside TP and PP (Megatron places the "
                 "expert-parallel group inside the data-parallel one)", (long long)l->ep, (long long)dp_group_size(l));
        return -1;
    }
    return 0;
}

int layout_check(const model_t *m, const layout_t *l, char *err, size_t errlen)
{
    if (l->recompute_layers < 0 || (l->recompute_layers > 0 && l->recompute != RECOMPUTE_FULL)) {
        snprintf(err, errlen, "--recompute-layers %lld: needs --recompute full and a count of 1 or more",
                 (long long)l->recompute_layers);
        return -1;
    }
    if (l->recompute_modules && (l->recompute != RECOMPUTE_SELECTIVE || l->recompute_modules & ~RECOMPUTE_MODULES_ALL)) {
        snprintf(err, errlen, "--recompute-modules %s: needs --recompute selective",
                 recompute_modules_name(l->recompute_modules));
        return -1;
    }
    if (l->tp < 1 || l->pp < 1 || l->dp < 1 || l->mbs < 1 || l->gbs < 1 || l->seq < 1 || l->vpp < 1 ||
        l->gpus < 1 || l->gpus_per_node < 1) {
        snprintf(err, errlen, "layout: every degree and size must be at least 1");
        return -1;
    }
    if (layout_check_cp(m, l, err, errlen) != 0) return -1;
    if (layout_check_ep(m, l, err, errlen) != 0) return -1;
    if (l->tp * layout_cp(l) * l->pp * l->dp != l->gpus) {
        if (l->cp > 1)
            snprintf(err, errlen, "--gpus %lld is not --tp %lld x --cp %lld x --pp %lld x --dp %lld", (long long)l->gpus,
                     (long long)l->tp, (long long)l->cp, (long long)l->pp, (long long)l->dp);
        else
            snprintf(err, errlen, "--gpus %lld is not --tp %lld x --pp %lld x --dp %lld", (long long)l->gpus,
                     (long long)l->tp, (long long)l->pp, (long long)l->dp);
        return -1;
    }
    if (l->pp > m->layers) {
        snprintf(err, errlen, "--pp %lld: %s has only %lld layers", (long long)l->pp, m->name,
                 (long long)m->layers);
        return -1;
    }
    if (pipeline_split_check(m, l, err, errlen) != 0) return -1;
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
    if (l->grad_accum == GRAD_ACCUM_FP32_COPY && (l->zero > 1 || l->precision == PREC_FP32 || l->precision == PREC_TF32)) {
        snprintf(err, errlen, "--grad-accum fp32-copy: DeepSpeed's BF16 optimizer runs 16-bit training with ZeRO 0 or 1, "
                 "not --zero %d in %s", l->zero, precision_name(l->precision));
        return -1;
    }
    if (l->gbs < l->mbs * l->dp) {
        snprintf(err, errlen, "--gbs %lld is smaller than --mbs %lld x dp %lld", (long long)l->gbs,
                 (long long)l->mbs, (long long)l->dp);
        return -1;
    }
    /* Megatron's interleaved schedule runs micro-batches in groups of p (docs/model.md, "Pipeline") */
    int64_t microbatches = l->gbs / (l->mbs * l->dp);
    if (l->vpp > 1 && microbatches % l->pp != 0) {
        snprintf(err, errlen, "--vpp %lld: interleaved 1F1B needs the micro-batches per step, --gbs %lld / (--mbs %lld x dp %lld) "
                 "= %lld, to be a multiple of --pp %lld, as Megatron-LM requires", (long long)l->vpp, (long long)l->gbs,
                 (long long)l->mbs, (long long)l->dp, (long long)microbatches, (long long)l->pp);
        return -1;
    }
    return 0;
}

/* A stage's cost in three parts, grouped by what each depends on, so that
 * the search can reuse a part across the layouts that share its inputs
 * (estimate_layout_cached below):
 *   body: the layers, embedding and head held by the stage and their TP
 *     collectives (TP, SP, micro-batch, sequence, recomputation, PP);
 *   pipeline: the send/recv between stages (PP, VPP, micro-batch, the link);
 *   data parallel: the gradient reduction, ZeRO's gathers and the optimizer
 *     step (DP, ZeRO stage, the stage's parameters). */
enum { PART_BODY = 1, PART_PIPELINE = 2, PART_DATA_PARALLEL = 4, PART_ALL = 7 };

/* Of overlapped collectives' cost, what the compute beside them lost and their own seconds (alone) that ran
 * beside it (overlapped_comm_parts): the power model settles the clock without either (docs/model.md, "Clock
 * under the power cap", overlapped collectives). */
typedef struct {
    double slowdown_s, beside_s;
} overlap_tally;

/* What runs beside an overlapped collective decides how much it slows (calibrate --comm measures each; docs/model.md,
 * "Overlap is not free"): a GEMM that fills the SMs, and every other op alike, or the experts' GEMMs whose launches
 * leave SMs idle. */
enum { COMPUTE_GEMM = 0, COMPUTE_EXPERTS, COMPUTE_CLASSES };
#define LAYER_SEGMENTS 8   /* OLMoE's layer is 5 runs a pass; a summary is copied per layout in the search */

/* One layer of a pass as ZeRO's per-layer collectives see it from the layer's start: runs of ops of one class in the
 * order they run, seconds at the top clock (the stage's layers averaged: an op of count c adds c / layers of its
 * time); the stage's other ops (embedding, head) last, as their share of a layer. */
typedef struct {
    float t[LAYER_SEGMENTS];
    unsigned char cls[LAYER_SEGMENTS];
    unsigned char n;
} overlap_layer;

typedef struct {
    double compute_fwd, compute_bwd;      /* per micro-batch, recomputation counted in bwd */
    double tp;                            /* exposed per micro-batch */
    overlap_tally tp_overlap;             /* of tp, the GEMM-overlapped collectives' parts, per micro-batch */
    double cp;                            /* context parallelism's, exposed per micro-batch */
    double ep;                            /* expert parallelism's all-to-alls, exposed per micro-batch */
    double ep_hidden;                     /* ... and those overlapped with the next micro-batch, before overlap */
    double saved_bytes;                   /* per micro-batch */
    double clock_bound_fwd, clock_bound_bwd; /* of compute_fwd and _bwd, the seconds that follow the clock */
    double gemm_clock_bound_fwd, gemm_clock_bound_bwd; /* ... of them, the GEMMs' (the clock time's; the rest 1/x) */
    double energy_j;                      /* switching energy per micro-batch at the top clock */
    double compute_top[2];                /* compute_fwd, compute_bwd at the top clock (the stretch leaves these) */
    overlap_layer layer[2];               /* a layer of the forward [0] and of the backward [1] (recomputation first),
                                             for ZeRO's per-layer collectives */
    double class_s[2][COMPUTE_CLASSES];   /* each pass's seconds by class at the top clock, for the collectives
                                             beside a whole pass (the gradients' buckets, EP's all-to-alls) */
} body_cost;

typedef struct {
    double pp;                            /* exposed per micro-batch */
    double energy_j;                      /* the send/recvs' energy above the static power, per micro-batch */
} pipeline_cost;

typedef struct {
    double zero3_fwd, zero3_bwd;          /* DP traffic of every micro-batch (ZeRO-2/3), before overlap */
    double zero3_fwd_experts;             /* of zero3_fwd, the experts' gathers */
    double zero3_bwd_gather, zero3_bwd_gather_experts; /* of zero3_bwd, ZeRO-3's gathers, and the experts' of them */
    double zero_bwd_compute;              /* ZeRO-2/3's kernels of every micro-batch's backward (the shard add) */
    double dp_bwd, dp_fwd;                /* per step, before overlap */
    double step_exposed;                  /* per step, never overlapped (the tied embedding's all-reduce) */
    double dp_bucket_fraction;
    double optimizer;
    double optimizer_clock_bound, optimizer_energy_j;
    double comm_energy_microbatch_j;      /* the DP collectives' energy above the static power: ZeRO-2/3's of
                                             every micro-batch, and */
    double comm_energy_step_j;            /* those of the step */
} data_parallel_cost;

typedef struct {
    body_cost body;
    pipeline_cost pipeline;
    data_parallel_cost dp;
} stage_cost;

static int op_part(const op_t *op)
{
    if (op->pass == PASS_STEP) return PART_DATA_PARALLEL;   /* once per step, whatever the group */
    if (op->kind == OP_COMM && op->group == GROUP_PP) return PART_PIPELINE;
    /* the DP collectives, and the kernels that exist because of them (ZeRO-2/3's shard accumulation) */
    if ((op->group == GROUP_DP || op->group == GROUP_EDP) && op->kind != OP_GEMM && op->kind != OP_ATTENTION)
        return PART_DATA_PARALLEL;
    return PART_BODY;
}

/* How much a compute class slows beside a collective of kind coll: the experts' figure where calibrate measured it,
 * else a GEMM's (the kind's). */
static double class_compute_slowdown(const hw_gpu *gpu, coll_t coll, int cls)
{
    if (cls == COMPUTE_EXPERTS && gpu->overlap_compute_slowdown_experts > 0.0) return gpu->overlap_compute_slowdown_experts;
    return coll == COLL_ALLGATHER        ? gpu->overlap_compute_slowdown_allgather
           : coll == COLL_REDUCE_SCATTER ? gpu->overlap_compute_slowdown_reducescatter
                                         : gpu->overlap_compute_slowdown_allreduce;
}

/* Whether the experts' GEMMs slow apart from the rest in this pass: the GPU has their figure and the pass has them
 * (class_s, its seconds by class); else every op slows as a GEMM, one window. */
static int experts_apart(const hw_gpu *gpu, const double *class_s)
{
    return gpu->overlap_compute_slowdown_experts > 0.0 && class_s[COMPUTE_EXPERTS] > 0.0;
}

static void tally_add(overlap_tally *tally, double times, overlap_cost o)
{
    if (!tally) return;
    tally->slowdown_s += times * o.slowdown_s;
    tally->beside_s += times * o.beside_s;
}

/* Communication that hides behind a compute window of one GEMM, except its last bucket; its parts, `times` over,
 * added to *tally (NULL: not wanted, without a power model). */
static double exposed(const hw_gpu *gpu, coll_t coll, double comm, double window, double last_bucket_fraction,
                      double times, overlap_tally *tally)
{
    overlap_cost o = overlapped_comm_parts(comm, window, last_bucket_fraction, class_compute_slowdown(gpu, coll, COMPUTE_GEMM),
                                           gpu->overlap_comm_slowdown);
    tally_add(tally, times, o);
    return o.cost_s;
}

/* The same beside a whole pass, `window` seconds whose classes are class_s (top-clock seconds, in proportion): each
 * class slows in proportion to its share of the window. */
static double exposed_pass(const hw_gpu *gpu, coll_t coll, double comm, double window, const double *class_s,
                           double last_bucket_fraction, double times, overlap_tally *tally)
{
    if (!experts_apart(gpu, class_s)) return exposed(gpu, coll, comm, window, last_bucket_fraction, times, tally);
    double all = 0.0, sc = 0.0;
    for (int k = 0; k < COMPUTE_CLASSES; k++) {
        all += class_s[k];
        sc += class_s[k] * class_compute_slowdown(gpu, coll, k);
    }
    overlap_cost o = overlapped_comm_parts(comm, window, last_bucket_fraction, sc / all, gpu->overlap_comm_slowdown);
    tally_add(tally, times, o);
    return o.cost_s;
}

/* ZeRO's collectives of one layer beside that layer's ops from its start (overlapped_comm_walk), for `layers`
 * layers whose compute the clock stretched by `stretch` over the top clock's; `window` is those layers' compute (the
 * pass's, stretched).  Where every op slows alike (no expert GEMMs that take their own figure) the walk is the rule
 * for one window, and that is what runs: the search's dense layouts pay nothing for it. */
static double exposed_layers(const hw_gpu *gpu, coll_t coll, double comm, double window, const overlap_layer *layer,
                             const double *class_s, double layers, double stretch, double tail_fraction, double times,
                             overlap_tally *tally)
{
    if (!experts_apart(gpu, class_s)) return exposed(gpu, coll, comm, window, tail_fraction, times, tally);
    overlap_segment seg[LAYER_SEGMENTS];
    for (int i = 0; i < layer->n; i++)
        seg[i] = (overlap_segment){(double)layer->t[i] * stretch, class_compute_slowdown(gpu, coll, layer->cls[i]),
                                   gpu->overlap_comm_slowdown};
    overlap_cost o = overlapped_comm_walk(comm / layers, tail_fraction, seg, layer->n);
    o.cost_s *= layers;
    o.slowdown_s *= layers;
    o.beside_s *= layers;
    tally_add(tally, times, o);
    return o.cost_s;
}

/* An op's class beside a collective: the experts' GEMMs launched one an expert whose launch's tiles do not fill the
 * SMs take the experts' figure (calibrate's victim: 64 tiles a launch on 132 SMs), the SMs a collective holds being
 * SMs those launches leave idle; a launch that fills them loses them as a dense GEMM does (the planner's test of a
 * launch filling the GPU, routed_rows in op_cost.c).  Every other op counts as a GEMM: calibrate's attention and
 * memory-bound victims read 0.07 and 0.12 where the steps' attention slowed 0.02-0.44 beside ZeRO-3's collectives
 * (docs/validation/2026-11-28-overlap-classes). */
static int compute_class(const op_t *op, const hw_gpu *gpu)
{
    if (op->kind != OP_GEMM || op->batch <= 1 || !op->separate_launches) return COMPUTE_GEMM;
    double tiles = ceil((double)op->m / GEMM_TILE_M) * ceil((double)op->n / GEMM_TILE_N);
    return tiles < gpu->sm_count ? COMPUTE_EXPERTS : COMPUTE_GEMM;
}

/* One op's time in a pass's order, for the layer's segments (cost_stage). */
typedef struct {
    double t;
    unsigned char cls, layer;   /* layer: one of the layers' ops (else the embedding's, the head's) */
} timed_op;

/* The segments of one layer from its ops in the order they run (layer_segments): runs of one class merged; past
 * LAYER_SEGMENTS - COMPUTE_CLASSES runs the rest summed by class, so that the segments always hold every second. */
static void layer_segments(overlap_layer *out, const timed_op *ops, int n, double layers)
{
    double rest[COMPUTE_CLASSES] = {0};
    int full = 0;
    out->n = 0;
    for (int others = 0; others < 2; others++)   /* the layers' ops, then the others */
        for (int i = 0; i < n; i++) {
            if (ops[i].layer == others || ops[i].t <= 0.0) continue;
            double t = ops[i].t / layers;
            if (!full && out->n > 0 && out->cls[out->n - 1] == ops[i].cls) out->t[out->n - 1] += (float)t;
            else if (!full && out->n < LAYER_SEGMENTS - COMPUTE_CLASSES) {
                out->t[out->n] = (float)t;
                out->cls[out->n++] = ops[i].cls;
            } else {
                full = 1;
                rest[ops[i].cls] += t;
            }
        }
    for (int k = 0; k < COMPUTE_CLASSES; k++)
        if (rest[k] > 0.0) {
            out->t[out->n] = (float)rest[k];
            out->cls[out->n++] = (unsigned char)k;
        }
}

/* Costs the ops of the parts asked for, in list order; the other parts stay
 * zero.  Each field sums the ops of one part only, so a part costed alone
 * gives the same sums, to the bit, as the whole list costed at once. */
static void cost_stage(stage_ops *s, const hw_gpu *gpu, const hw_node *node, const layout_t *l, int parts,
                       stage_cost *c)
{
    memset(c, 0, sizeof *c);
    double grad_bytes = 0.0;
    double attention_s[PASS_STEP + 1] = {0}; /* each pass's attention op, beside the CP ring's steps */
    /* the host's lead into the next op's issue, along the forward and its recomputation (host_issue_lead_s): the
     * routing sync empties the GPU's queue, and each op after it lets the host get ahead by what it took over its
     * own issue (a launch where it is not an expert GEMM) */
    double lead[PASS_STEP + 1] = {0};
    /* the body's compute in list order, by pass, for the layers' segments */
    timed_op order[PASS_STEP][OPS_MAX];
    int ordered[PASS_STEP] = {0};
    for (int i = 0; i < s->nops; i++) {
        op_t *op = &s->ops[i];
        int part = op_part(op);
        if (!(part & parts)) continue;
        const int issued_pass = op->pass == PASS_FWD || op->pass == PASS_RECOMPUTE;
        const double issue = op_host_issue_s(op, gpu);
        op->host_lead_s = issued_pass && issue > 0.0 ? lead[op->pass] : 0.0;
        op->time_s = op_cost(op, gpu, node, l);
        if (issued_pass)
            lead[op->pass] = op->host_sync ? 0.0
                                           : host_issue_lead_s(lead[op->pass], op->time_s,
                                                               issue > 0.0 ? issue : gpu->launch_overhead_s);
        double t = op->time_s * (double)op->count;
        if (op->kind == OP_ATTENTION) attention_s[op->pass] = op->time_s;
        if (op->kind == OP_COMM && op->energy_j > 0.0) {
            /* a collective's energy, whether exposed or beside compute, in the part that costs it */
            double energy = op->energy_j * (double)op->count;
            if (part == PART_BODY) c->body.energy_j += energy;
            else if (part == PART_PIPELINE) c->pipeline.energy_j += energy;
            else if (op->pass == PASS_STEP) c->dp.comm_energy_step_j += energy;
            else c->dp.comm_energy_microbatch_j += energy;
        }
        if (op->kind == OP_COMM && op->group == GROUP_CP) {
            c->body.cp += op->overlap == OVERLAP_ATTENTION
                              ? (double)op->count * cp_ring_exposed_s(op->time_s, attention_s[op->pass], (double)layout_cp(l),
                                                                          op->pass == PASS_BWD ? CP_RING_SERIALISED_BWD
                                                                                               : CP_RING_SERIALISED_FWD)
                              : t;
            continue;
        }
        if (op->kind == OP_COMM && op->group == GROUP_EP) {
            if (op->overlap == OVERLAP_MICROBATCH) c->body.ep_hidden += t;
            else c->body.ep += t;
            continue;
        }
        /* collectives keep nothing for backward: the saved activations are the body's */
        if (part == PART_BODY && op->pass == PASS_FWD) c->body.saved_bytes += op->saved_bytes * (double)op->count;
        if (op->kind != OP_COMM && part == PART_DATA_PARALLEL && op->pass != PASS_STEP) {
            c->dp.zero_bwd_compute += t;   /* kept with its part, so that parts costed apart add up */
            continue;
        }
        if (op->kind != OP_COMM) {
            double clock_bound = op->clock_bound_s * (double)op->count, energy = op->energy_j * (double)op->count;
            double gemm = op->kind == OP_GEMM ? clock_bound : 0.0;
            if (op->pass != PASS_STEP) {
                int cls = compute_class(op, gpu);
                order[op->pass][ordered[op->pass]++] =
                    (timed_op){t, (unsigned char)cls, (unsigned char)(s->layers <= 1 || op->count > 1)};
                c->body.class_s[op->pass == PASS_FWD ? 0 : 1][cls] += t;
            }
            if (op->pass == PASS_FWD) {
                c->body.compute_fwd += t;
                c->body.clock_bound_fwd += clock_bound;
                c->body.gemm_clock_bound_fwd += gemm;
                c->body.energy_j += energy;
            } else if (op->pass == PASS_BWD || op->pass == PASS_RECOMPUTE) {
                c->body.compute_bwd += t;
                c->body.clock_bound_bwd += clock_bound;
                c->body.gemm_clock_bound_bwd += gemm;
                c->body.energy_j += energy;
            } else {
                c->dp.optimizer += t;
                c->dp.optimizer_clock_bound += clock_bound;
                c->dp.optimizer_energy_j += energy;
            }
            continue;
        }
        if (part == PART_PIPELINE) c->pipeline.pp += t;
        else if (part == PART_BODY && op->overlap == OVERLAP_GEMM && op->window_op) continue; /* below */
        else if (part == PART_BODY) c->body.tp += t;
        else if (op->pass == PASS_FWD) {
            c->dp.zero3_fwd += t;
            if (op->group == GROUP_EDP) c->dp.zero3_fwd_experts += t;
        } else if (op->pass == PASS_BWD) {
            c->dp.zero3_bwd += t;
            if (op->coll == COLL_ALLGATHER) {
                c->dp.zero3_bwd_gather += t;
                if (op->group == GROUP_EDP) c->dp.zero3_bwd_gather_experts += t;
            }
        }
        else if (op->overlap == EXPOSED) c->dp.step_exposed += t;
        else {
            if (op->overlap == OVERLAP_FWD) c->dp.dp_fwd += t;
            else c->dp.dp_bwd += t;
            /* the dense and the experts' gradients share the buckets */
            if (op->coll != COLL_ALLGATHER) grad_bytes += op->comm_bytes;
        }
    }
    if (parts & PART_BODY) {
        /* a layer's backward: its recomputation (in forward order), then its backward ops, last first */
        double layers = s->layers > 0 ? (double)s->layers : 1.0;
        timed_op bwd[OPS_MAX];   /* the recomputation's and the backward's ops are of one list */
        int n = 0;
        for (int i = 0; i < ordered[PASS_RECOMPUTE]; i++) bwd[n++] = order[PASS_RECOMPUTE][i];
        for (int i = ordered[PASS_BWD] - 1; i >= 0; i--) bwd[n++] = order[PASS_BWD][i];
        layer_segments(&c->body.layer[0], order[PASS_FWD], ordered[PASS_FWD], layers);
        layer_segments(&c->body.layer[1], bwd, n, layers);
        c->body.compute_top[0] = c->body.compute_fwd;
        c->body.compute_top[1] = c->body.compute_bwd;
    }
    /* a TP collective beside a backward GEMM costs what it adds to that GEMM's time, now costed */
    for (int i = 0; (parts & PART_BODY) && i < s->nops; i++) {
        const op_t *op = &s->ops[i];
        if (op->kind != OP_COMM || op->overlap != OVERLAP_GEMM || !op->window_op || op_part(op) != PART_BODY) continue;
        c->body.tp += (double)op->count * exposed(gpu, op->coll, op->time_s, s->ops[op->window_op - 1].time_s, 0.0,
                                                  (double)op->count, &c->body.tp_overlap);
    }
    if (grad_bytes > 0.0) {
        double element = gradient_bytes(l);
        double fraction = DP_BUCKET_ELEMENTS * element / grad_bytes;
        c->dp.dp_bucket_fraction = fraction < 1.0 ? fraction : 1.0;
    }
}

/* A pipeline stage as the memory and the step time see it: what it holds and what it costs. */
typedef struct {
    int64_t stage, layers, moe_layers;
    int last;
    double params;          /* held by one GPU of the stage, before ZeRO sharding */
    double expert_params;   /* of them, the routed experts' (sharded over dp x cp / ep) */
    double fp8_weights;     /* of them, the FP8 GEMMs' weights (fp8 runs) */
    double refill_bytes;    /* full recomputation: one layer's activations, live again in its backward */
    stage_cost cost;
} stage_summary;


typedef struct {
    double model, hardware, attention, logits;   /* FLOP of one sequence through the whole model */
    double model_full_attention, hardware_full_attention; /* the same, causal attention over the full s x s */
} sequence_flops;

/* Whole-model FLOPs of one sequence, from the op list of an unsplit model. */
static void count_sequence_flops(const model_t *m, const layout_t *l, sequence_flops *f)
{
    layout_t whole = *l;
    whole.tp = whole.pp = whole.dp = whole.vpp = whole.mbs = whole.cp = whole.ep = 1;
    whole.gpus = 1;
    whole.sp = 0;
    whole.zero = 0;
    /* partial recomputation is per stage: the whole model recomputes that many layers on each of them */
    if (l->recompute_layers > 0) {
        int64_t all = l->recompute_layers * l->pp;
        whole.recompute_layers = all < m->layers ? all : 0;
    }
    stage_ops s;
    build_stage_ops(m, &whole, 0, &s);
    f->model = f->hardware = f->attention = f->logits = 0.0;
    double attention_hardware = 0.0;
    for (int i = 0; i < s.nops; i++) {
        const op_t *op = &s.ops[i];
        if (op->pass == PASS_STEP) continue;
        double c = (double)op->count;
        f->model += op->model_flops * c;
        f->hardware += op->hardware_flops * c;
        if (op->kind == OP_ATTENTION) {
            f->attention += op->model_flops * c;
            attention_hardware += op->hardware_flops * c;
        }
        if (strncmp(op->name, "lm_head", 7) == 0) f->logits += op->model_flops * c;
    }
    /* a causal model's attention counts the half below the diagonal: the masked half again */
    double masked = model_is_causal(m) ? 1.0 : 0.0;
    f->model_full_attention = f->model + masked * f->attention;
    f->hardware_full_attention = f->hardware + masked * attention_hardware;
}

static void model_flops_per_sequence(const model_t *m, const layout_t *l, sequence_flops *f)
{
    /* Estimates in a row often share the model, sequence and recomputation:
     * remember the last answer. */
    static struct {
        model_t model;
        int64_t seq, recompute_layers, pp;
        unsigned recompute_modules;
        recompute_t recompute;
        attention_impl_t attention;
        precision_t precision;
        sequence_flops flops;
        int valid;
    } last;
    if (last.valid && last.seq == l->seq && last.recompute == l->recompute && last.attention == l->attention &&
        last.recompute_layers == l->recompute_layers && (l->recompute_layers == 0 || last.pp == l->pp) &&
        last.precision == l->precision && last.recompute_modules == l->recompute_modules &&
        memcmp(&last.model, m, sizeof *m) == 0) {
        *f = last.flops;
        return;
    }
    count_sequence_flops(m, l, f);
    last.model = *m;
    last.seq = l->seq;
    last.recompute = l->recompute;
    last.recompute_layers = l->recompute_layers;
    last.recompute_modules = l->recompute_modules;
    last.pp = l->pp;
    last.attention = l->attention;
    last.precision = l->precision;
    last.flops = *f;
    last.valid = 1;
}

/* Full recomputation keeps only each layer's input; the backward of a layer
 * recomputes its forward, so one layer's full set of activations is live again. */
static double recomputed_layer_bytes(const model_t *m, const layout_t *l, int64_t stage, int64_t layers)
{
    layout_t kept = *l;
    kept.recompute = RECOMPUTE_NONE;
    stage_ops again;
    build_stage_ops(m, &kept, stage, &again);
    double saved = 0.0;
    for (int i = 0; i < again.nops; i++)
        if (again.ops[i].pass == PASS_FWD && strcmp(again.ops[i].name, "embedding") != 0 &&
            strcmp(again.ops[i].name, "final_norm") != 0 && strcmp(again.ops[i].name, "lm_head") != 0)
            saved += again.ops[i].saved_bytes * (double)again.ops[i].count;
    return saved / (double)layers;
}

/* Costs the parts asked for of a built stage and records what its memory needs. */
static void summarize_stage(const model_t *m, const hw_gpu *gpu, const hw_node *node, const layout_t *l,
                            stage_ops *s, int parts, stage_summary *out)
{
    out->stage = s->stage;
    out->layers = s->layers;
    out->moe_layers = s->moe_layers;
    out->last = s->last;
    out->params = s->params;
    out->expert_params = s->expert_params;
    out->fp8_weights = s->fp8_weights;
    cost_stage(s, gpu, node, l, parts, &out->cost);
    out->refill_bytes = (parts & PART_BODY) && l->recompute == RECOMPUTE_FULL && s->layers > 0
                            ? recomputed_layer_bytes(m, l, s->stage, s->layers)
                            : 0.0;
}

static void memory_of_stage(const model_t *m, const layout_t *l, const stage_summary *s,
                            const hw_gpu *gpu, memory_breakdown *mem)
{
    /* every field is written below; no memset, which the search would pay
     * twice per layout (GCC makes it a slow `rep stos`) */
    mem->logits = 0.0;
    mem->capacity = 0.0;
    mem->routed_grads = 0.0;
    double dp = (double)dp_group_size(l);   /* ZeRO shards over DP x CP */
    double edp = (double)expert_dp_group_size(l);   /* and the routed experts over dp x cp / ep */
    double dense = s->params - s->expert_params, experts = s->expert_params;
    int fp32 = l->precision == PREC_FP32 || l->precision == PREC_TF32;
    double weight_bytes = fp32 ? 4.0 : 2.0;
    double grad_bytes = gradient_bytes(l);
    double optimizer_bytes = fp32 ? 8.0 : 12.0;     /* mixed precision adds the fp32 master copy */
    mem->stage = s->stage;
    mem->params = s->params;
    mem->weights = (dense / (l->zero >= 3 ? dp : 1.0) + experts / (l->zero >= 3 ? edp : 1.0)) * weight_bytes;
    if (l->zero >= 2 && dp > 1.0 && s->layers > 0) {
        double layer, big;
        zero_unit_params(m, l, s->stage == 0, s->last, &layer, &big);
        mem->weights += zero_unit_buffer_bytes(l->zero, layer, big, weight_bytes, grad_bytes);
    }
    /* Transformer Engine's FP8 copy and transpose of each FP8 GEMM's weight, held over the step (ZeRO-3:
     * of the two layers gathered at a time) (docs/model.md, "FP8 GEMMs") */
    if (s->fp8_weights > 0.0) {
        double held = l->zero >= 3 && s->layers > 2 ? 2.0 / (double)s->layers : 1.0;
        mem->weights += fp8_weight_copy_bytes(s->fp8_weights * held);
    }
    mem->gradients = (dense / (l->zero >= 2 ? dp : 1.0) + experts / (l->zero >= 2 ? edp : 1.0)) * gradient_memory_bytes(l);
    mem->optimizer = (dense / (l->zero >= 1 ? dp : 1.0) + experts / (l->zero >= 1 ? edp : 1.0)) * optimizer_bytes;
    int64_t m_micro = l->gbs / (l->mbs * l->dp);
    mem->inflight_microbatches = pipeline_inflight_microbatches((double)l->pp, (double)m_micro,
                                                                (double)l->vpp, (double)s->stage);
    mem->activations = s->cost.body.saved_bytes * mem->inflight_microbatches;
    if (l->recompute == RECOMPUTE_FULL && s->layers > 0) mem->activations += s->refill_bytes;
    if (s->last) {
        /* the padded logits of a micro-batch; a fused cross-entropy writes
         * their gradient in place (llm.c, Megatron's fused loss) */
        double B = element_bytes(l->precision);
        double logits = rank_tokens(l) * (double)padded_vocab(m, l->tp) / (double)l->tp;
        mem->logits = logits * B * pipeline_inflight_heads((double)l->pp, (double)m_micro, (double)l->vpp);
        mem->logits += logits * loss_held_bytes_per_logit(l->loss, B);
    }
    double workspace = 0.0;
    if (s->layers > 0) {
        double t = (double)l->tp, tokens = rank_tokens(l), B = element_bytes(l->precision);
        double load = moe_rank_load(m, l);   /* 1 for a dense model */
        double kv = local_kv_heads(m, l->tp);
        double qkv_width = ((double)m->heads / t + 2.0 * kv) * (double)m->head_dim;
        /* a MoE layer's rank runs top_k routed tokens per token (its busiest share) and the shared experts */
        double ffn_tokens_width = (double)m->ffn;
        if (model_is_moe(m)) {
            double moe = (double)model_expert_ffn(m) *
                         ((double)m->top_k * load +
                          (double)m->shared_experts);
            if (moe > ffn_tokens_width || m->dense_layers == 0) ffn_tokens_width = moe;
        }
        double up_width = (m->ffn_kind == FFN_SWIGLU ? 3.0 : 1.0) * ffn_tokens_width / t;
        double scores = l->attention == ATTENTION_UNFUSED
                            ? (double)l->mbs * (double)m->heads / t * (double)l->seq * (double)l->seq : 0.0;
        workspace = backward_workspace_bytes(tokens, (double)m->hidden, qkv_width, up_width, scores, B) +
                    cp_kv_transient_bytes(m, l);
        /* ... and, on a stage with MoE layers, the routed rows' gradients in and out of the experts */
        if (s->moe_layers > 0) {
            double rows = tokens * (double)m->top_k * load * (double)layout_etp(l) / t;
            mem->routed_grads = moe_routed_grad_bytes(rows, (double)m->hidden, B, layout_ep(l) > 1 || layout_etp(l) > 1);
            workspace += mem->routed_grads;
        }
        /* sextant-gpu's own kernel: its backward's workspace over a rank's shard (the micro-batch, the CP share of
         * the sequence, the TP share of the heads), one buffer every layer reuses (docs/model.md, "Other memory") */
        if (l->attention == ATTENTION_SEXTANT) {
            int64_t tq = l->seq / layout_cp(l);
            workspace += sextant_attention_workspace_bytes(l->mbs, tq, tq, m->heads / l->tp, (int64_t)kv, m->head_dim);
        }
    }
    mem->workspace = workspace;
    int tied_group = m->tied_embeddings && l->pp > 1 && (s->stage == 0 || s->last);
    nccl_memory_figures nccl = gpu_nccl_figures(gpu);
    mem->other = other_memory_allowance(l, gpu->context_bytes, &nccl, tied_group, model_is_moe(m), workspace);
    mem->total = mem->weights + mem->gradients + mem->optimizer + mem->activations + mem->logits + mem->other;
}

nccl_memory_figures gpu_nccl_figures(const hw_gpu *gpu)
{
    return (nccl_memory_figures){gpu->nccl_comm_bytes, gpu->nccl_first_comm_bytes, gpu->nccl_p2p_comm_bytes,
                                 gpu->nccl_process_bytes, gpu->nccl_split_bytes, gpu->nccl_collective_bytes,
                                 gpu->nccl_p2p_buffers_bytes, gpu->nccl_p2p_first_bytes};
}

int gpu_has_fused_attention(const hw_gpu *gpu)
{
    /* FlashAttention's kernels need sm80's asynchronous copies and larger shared memory; the
     * architectures before Ampere are named, so that a newer one in a user's hwdb keeps it */
    static const char *const before_sm80[] = {"volta", "turing", "pascal", "maxwell", "kepler"};
    for (size_t i = 0; i < sizeof before_sm80 / sizeof before_sm80[0]; i++)
        if (!strcasecmp(gpu->arch, before_sm80[i])) return 0;
    return 1;
}

attention_impl_t default_attention(const hw_gpu *gpu)
{
    return gpu_has_fused_attention(gpu) ? ATTENTION_FLASH : ATTENTION_UNFUSED;
}

/* What every estimate starts from: the references, the checks, the micro-batches. */
static int begin_estimate(const model_t *m, const hw_gpu *gpu, const hw_node *node, const layout_t *l,
                          const job_t *job, double params_total, double params_active, estimate_t *e, char *err,
                          size_t errlen)
{
    /* the warnings' text and the op lists are written before they are read:
     * clear the numbers only (the search comes here millions of times) */
    memset(e, 0, offsetof(estimate_t, warnings));
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
    if (attention_is_fused(l->attention) && !gpu_has_fused_attention(gpu)) {
        snprintf(err, errlen, "--attention %s: %s is %s, and FlashAttention needs sm80 or newer (ampere, ada, "
                 "hopper, blackwell): use --attention unfused", attention_name(l->attention), gpu->name, gpu->arch);
        return -1;
    }
    if ((unsigned)l->attention >= ATTENTION_COUNT) {
        snprintf(err, errlen, "--attention: expected flash, unfused, flash1, flash1-triton or sextant");
        return -1;
    }
    e->microbatches = l->gbs / (l->mbs * l->dp);
    e->layout.gbs = e->microbatches * l->mbs * l->dp;
    e->params_total = params_total;
    e->params_active = params_active;
    return 0;
}

/* Whether the middle stage was costed on its own: where the first stands for the middle ones
 * (pipeline_middle_is_distinct) its summary holds only the first's stage number, the rest not filled in. */
static int middle_costed(const stage_summary s[STAGE_KINDS])
{
    return s[STAGE_MIDDLE].stage != s[STAGE_FIRST].stage;
}

/* The heaviest stage's memory, and whether it fits. */
static void settle_memory(const model_t *m, const hw_gpu *gpu, const layout_t *l, const stage_summary s[STAGE_KINDS],
                          estimate_t *e)
{
    memory_breakdown mem[STAGE_KINDS];
    memory_of_stage(m, l, &s[STAGE_FIRST], gpu, &mem[STAGE_FIRST]);
    /* with one stage, the first is the last; where the first stands for the middle ones, the same numbers again */
    mem[STAGE_MIDDLE] = mem[STAGE_FIRST];
    if (middle_costed(s)) memory_of_stage(m, l, &s[STAGE_MIDDLE], gpu, &mem[STAGE_MIDDLE]);
    mem[STAGE_LAST] = mem[STAGE_FIRST];
    if (l->pp > 1) memory_of_stage(m, l, &s[STAGE_LAST], gpu, &mem[STAGE_LAST]);
    int heavy = STAGE_FIRST;
    for (int i = STAGE_MIDDLE; i < STAGE_KINDS; i++)
        if (mem[i].total > mem[heavy].total) heavy = i;
    e->memory = mem[heavy];
    e->memory.capacity = gpu->memory_bytes;
    e->fits = e->memory.total <= e->memory.capacity;
}

/* ZeRO-3's gathers a held unit saves, in seconds of a micro-batch's forward and backward gathers (docs/model.md,
 * "ZeRO-3 and FSDP"): the backward never gathers the embedding (its gradient needs no weight); a backward that
 * follows a forward starts with the unit that forward ended with (on the last stage the head, else a layer; the
 * experts' last layer), and a forward that follows a backward with the layer that backward ended with (not on the
 * first stage, whose forward starts with the embedding; always for the experts, which have none).  Interleaved
 * chunks seldom use one unit twice in a row: nothing held there.  Latency aside, a unit's gather takes its share
 * of the state's time. */
static void zero3_held_s(const model_t *m, const layout_t *l, const stage_summary *s, double layer, double table,
                         double microbatches, double *fwd_s, double *bwd_s)
{
    *fwd_s = *bwd_s = 0.0;
    const data_parallel_cost *d = &s->cost.dp;
    if (l->zero < 3 || s->params <= 0.0 || s->layers <= 0) return;
    const int first = s->stage == 0;
    double experts = s->expert_params, dense = s->params - experts;
    double expert_layer = s->moe_layers > 0 ? experts / (double)s->moe_layers : 0.0;
    /* zero_unit_params's layer (`layer`, `table` its other unit) holds the rank's experts where ZeRO shards them */
    double dense_layer = layer - (expert_dp_group_size(l) > 1 ? expert_layer : 0.0);
    double dense_fwd = d->zero3_fwd - d->zero3_fwd_experts, dense_bwd = d->zero3_bwd_gather - d->zero3_bwd_gather_experts;
    double embedding = first ? table : 0.0;   /* the first stage's unit that is not a layer */
    if (dense > 0.0) *bwd_s += dense_bwd * embedding / dense;
    if (l->vpp > 1) return;
    double bwd_after_fwd, fwd_after_bwd;
    zero3_turns(microbatches, (double)(l->pp - 1 - s->stage), &bwd_after_fwd, &fwd_after_bwd);
    double last_unit = s->last ? (first && m->tied_embeddings ? 0.0 : table) : dense_layer;
    if (dense > 0.0) {
        *bwd_s += bwd_after_fwd / microbatches * dense_bwd * last_unit / dense;
        if (!first) *fwd_s += fwd_after_bwd / microbatches * dense_fwd * dense_layer / dense;
    }
    if (experts > 0.0 && s->moe_layers > 0) {
        *bwd_s += bwd_after_fwd / microbatches * d->zero3_bwd_gather_experts / (double)s->moe_layers;
        *fwd_s += fwd_after_bwd / microbatches * d->zero3_fwd_experts / (double)s->moe_layers;
    }
    if (*fwd_s > d->zero3_fwd) *fwd_s = d->zero3_fwd;
    if (*bwd_s > d->zero3_bwd_gather) *bwd_s = d->zero3_bwd_gather;
}

/* Step time, FLOPs, throughput, time-to-train and cost from the first and
 * last stages' costs, at the clock they were costed at. */
static void settle_time_at(const model_t *m, const hw_gpu *gpu, const hw_node *node, const layout_t *l,
                           const job_t *job, const stage_summary s[STAGE_KINDS], const sequence_flops *f, estimate_t *e,
                           overlap_tally *overlapped)
{
    const double B = element_bytes(l->precision);
    double stage_mb_s[STAGE_KINDS], stage_dp_s[STAGE_KINDS], ep_s[STAGE_KINDS];
    overlap_tally stage_overlap[STAGE_KINDS];   /* per step */
    for (int i = 0; i < STAGE_KINDS; i++) {
        /* a middle stage the first stands for, or with one stage the last: the same numbers */
        if ((i == STAGE_MIDDLE && !middle_costed(s)) || (i == STAGE_LAST && l->pp == 1)) {
            stage_mb_s[i] = stage_mb_s[STAGE_FIRST];
            stage_dp_s[i] = stage_dp_s[STAGE_FIRST];
            ep_s[i] = ep_s[STAGE_FIRST];
            stage_overlap[i] = stage_overlap[STAGE_FIRST];
            continue;
        }
        overlap_tally overlap = {0.0, 0.0}, *tally = overlapped ? &overlap : NULL;
        const double mbs = (double)e->microbatches;
        const stage_cost *c = &s[i].cost;
        /* ZeRO-3/FSDP gathers and reduces one wrapped unit at a time, prefetching the next: the
         * first unit's gather waits with nothing to hide behind, and so does the last one's
         * reduce-scatter; on the first and last stages that unit is the embedding or the head, the
         * largest (docs/model.md, "ZeRO-3 and FSDP"; measured: 2026-11-25-h100x2-zero).  FSDP waits so in
         * every micro-batch; sextant's step only at the step's two ends, the neighbouring micro-batch
         * hiding the others: 1/m of them (measured: 2026-11-27-h200x2-zero-overhead) */
        double layer, big;
        zero_unit_params(m, l, s[i].stage == 0, s[i].last, &layer, &big);
        double unit = s[i].params > 0.0 ? (big > layer ? big : layer) / s[i].params : 1.0;
        if (unit > 1.0) unit = 1.0;
        if (l->zero_waits == ZERO_WAITS_STEP) unit /= mbs;
        /* the backward's ZeRO-3 traffic is a gather and a reduce-scatter of the same size: the
         * reduce-scatter's slowdown stands for both (they differ by 2 points, docs/validation) */
        double held_fwd, held_bwd;
        zero3_held_s(m, l, &s[i], layer, big, (double)e->microbatches, &held_fwd, &held_bwd);
        /* each layer's collectives beside that layer's ops from its start; the clock stretched them alike */
        double layers = s[i].layers > 0 ? (double)s[i].layers : 1.0;
        double stretch_fwd = c->body.compute_top[0] > 0.0 ? c->body.compute_fwd / c->body.compute_top[0] : 1.0;
        double stretch_bwd = c->body.compute_top[1] > 0.0 ? c->body.compute_bwd / c->body.compute_top[1] : 1.0;
        double z3 = exposed_layers(gpu, COLL_ALLGATHER, c->dp.zero3_fwd - held_fwd, c->body.compute_fwd, &c->body.layer[0],
                                   c->body.class_s[0], layers, stretch_fwd, unit, mbs, tally) +
                    exposed_layers(gpu, COLL_REDUCE_SCATTER, c->dp.zero3_bwd - held_bwd, c->body.compute_bwd,
                                   &c->body.layer[1], c->body.class_s[1], layers, stretch_bwd, unit, mbs, tally);
        /* the combined 1F1B hides a micro-batch's all-to-alls behind the compute of the one beside it, but
         * for the step's first forward and last backward, which run alone: 1/m of them exposed */
        double both[COMPUTE_CLASSES];
        for (int k = 0; k < COMPUTE_CLASSES; k++) both[k] = c->body.class_s[0][k] + c->body.class_s[1][k];
        ep_s[i] = c->body.ep + exposed_pass(gpu, COLL_ALLTOALL, c->body.ep_hidden, c->body.compute_fwd + c->body.compute_bwd,
                                            both, 1.0 / (double)e->microbatches, mbs, tally);
        stage_mb_s[i] = c->body.compute_fwd + c->body.compute_bwd + c->dp.zero_bwd_compute + c->body.tp + c->body.cp +
                        ep_s[i] + c->pipeline.pp + z3;
        /* after the flush (DeepSpeed's engine) nothing runs beside them: no window */
        double after = l->grad_sync == GRAD_SYNC_AFTER ? 0.0 : 1.0;
        stage_dp_s[i] = exposed_pass(gpu, l->zero == 0 ? COLL_ALLREDUCE : COLL_REDUCE_SCATTER, c->dp.dp_bwd,
                                     after * c->body.compute_bwd, c->body.class_s[1], c->dp.dp_bucket_fraction, 1.0, tally) +
                        exposed_pass(gpu, COLL_ALLGATHER, c->dp.dp_fwd, after * c->body.compute_fwd, c->body.class_s[0],
                                     c->dp.dp_bucket_fraction, 1.0, tally) +
                        z3 * (double)e->microbatches + c->dp.step_exposed;
        if (tally) {
            overlap.slowdown_s += mbs * c->body.tp_overlap.slowdown_s;
            overlap.beside_s += mbs * c->body.tp_overlap.beside_s;
        }
        stage_overlap[i] = overlap;
    }
    /* a middle stage the first stands for has the first's numbers: ties go to the first */
    int slow = STAGE_FIRST;
    for (int i = STAGE_MIDDLE; i < STAGE_KINDS; i++)
        if (stage_mb_s[i] > stage_mb_s[slow]) slow = i;
    const stage_cost *c = &s[slow].cost;
    double mbs_count = (double)e->microbatches;
    if (overlapped) *overlapped = stage_overlap[slow];
    e->slowest_stage = s[slow].stage;
    e->microbatch_s = stage_mb_s[slow];
    for (int i = 0; i < STAGE_KINDS; i++) e->stage_microbatch_s[i] = stage_mb_s[i];
    e->compute_s = mbs_count * (c->body.compute_fwd + c->body.compute_bwd + c->dp.zero_bwd_compute);
    e->tp_comm_s = mbs_count * c->body.tp;
    e->cp_comm_s = mbs_count * c->body.cp;
    e->ep_comm_s = mbs_count * ep_s[slow];
    e->pp_comm_s = mbs_count * c->pipeline.pp;
    /* 1F1B's critical path: the slowest stage runs all m micro-batches, and
     * each other stage adds one micro-batch's forward and backward on the way
     * in and out (the fill and the drain).  With equal stages this is
     * Narayanan et al.'s (p - 1) t; when the last stage carries a heavy head
     * it is the other stages' t, not the slowest one's (docs/model.md,
     * "Pipeline"; measured on 2 x H200, docs/validation/2026-11-23-h200x2-train).
     * The p - 2 middle stages are alike: stage 1 stands for them. */
    double others = stage_mb_s[STAGE_FIRST] + stage_mb_s[STAGE_LAST] - stage_mb_s[slow] +
                    (double)(l->pp > 2 ? l->pp - 2 : 0) * stage_mb_s[STAGE_MIDDLE];
    e->bubble_s = l->pp > 1 ? others / (double)l->vpp : 0.0;
    e->dp_comm_s = 0.0;
    e->optimizer_s = 0.0;
    for (int i = 0; i < STAGE_KINDS; i++) {
        if (stage_dp_s[i] > e->dp_comm_s) e->dp_comm_s = stage_dp_s[i];
        if (i == STAGE_MIDDLE && !middle_costed(s)) continue;   /* not filled in */
        if (s[i].cost.dp.optimizer > e->optimizer_s) e->optimizer_s = s[i].cost.dp.optimizer;
    }
    e->step_s = e->compute_s + e->tp_comm_s + e->cp_comm_s + e->ep_comm_s + e->pp_comm_s + e->bubble_s + e->dp_comm_s + e->optimizer_s;
    e->bubble_fraction = e->bubble_s / e->step_s;

    double sequences = (double)e->layout.gbs;
    e->model_flops_per_step = f->model * sequences;
    e->hardware_flops_per_step = f->hardware * sequences;
    e->attention_flops_per_step = f->attention * sequences;
    e->logits_flops_per_step = f->logits * sequences;
    e->model_flops_full_attention_per_step = f->model_full_attention * sequences;
    e->hardware_flops_full_attention_per_step = f->hardware_full_attention * sequences;
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
}

#define SETTLE_PASSES_MAX 8
/* How the clock-bound seconds of a step at clock fraction x stretch against their top-clock (calibrate's) time:
 * the GEMMs' by the measured clock time, K x^-b; the rest (fused attention, the unfused attention's compute
 * kernels) by 1 / x, since nothing measured says otherwise (docs/model.md, "GEMM time against the clock"). */
typedef struct {
    double gemm, other;
} clock_stretch;

static clock_stretch stretch_at(const hw_gpu *gpu, double x)
{
    clock_stretch st = {clock_bound_stretch(x, gpu_clock_time_factor(gpu), gpu_clock_time_exponent(gpu)), 1.0 / x};
    return st;
}

/* The summaries with every stage's clock-bound seconds stretched by st (a middle stage the first stands for keeps
 * only its number: estimate_layout_cached's search pays for every byte copied). */
static void stretch_stages(const stage_summary s[STAGE_KINDS], clock_stretch st, stage_summary slowed[STAGE_KINDS])
{
    slowed[STAGE_FIRST] = s[STAGE_FIRST];
    slowed[STAGE_LAST] = s[STAGE_LAST];
    const int middle = middle_costed(s);
    if (middle) slowed[STAGE_MIDDLE] = s[STAGE_MIDDLE];
    else slowed[STAGE_MIDDLE].stage = s[STAGE_MIDDLE].stage;
    for (int i = 0; i < STAGE_KINDS; i++) {
        if (i == STAGE_MIDDLE && !middle) continue;
        stage_cost *sc = &slowed[i].cost;
        sc->body.compute_fwd += sc->body.gemm_clock_bound_fwd * (st.gemm - 1.0) +
                                (sc->body.clock_bound_fwd - sc->body.gemm_clock_bound_fwd) * (st.other - 1.0);
        sc->body.compute_bwd += sc->body.gemm_clock_bound_bwd * (st.gemm - 1.0) +
                                (sc->body.clock_bound_bwd - sc->body.gemm_clock_bound_bwd) * (st.other - 1.0);
        sc->dp.optimizer += sc->dp.optimizer_clock_bound * (st.other - 1.0);
    }
}

/* The step at the clock the power cap leaves it (docs/model.md, "Clock under
 * the power cap"): costed at calibrate's top-clock times first; at clock
 * fraction x the GEMMs' clock-bound seconds take K x^-b of those (1 / x
 * unless the overlay measured how a step's GEMMs follow the clock), the
 * other clock-bound seconds 1 / x; x is the top clock unless the slowest
 * stage's GPU would draw more than the cap there.  The step is settled again
 * with them stretched.  Returns the stretches, 1 without the GPU's power
 * model, or at the top clock without a measured clock time. */
static clock_stretch settle_time(const model_t *m, const hw_gpu *gpu, const hw_node *node, const layout_t *l,
                                 const job_t *job, const stage_summary s[STAGE_KINDS], const sequence_flops *f,
                                 estimate_t *e)
{
    overlap_tally overlapped = {0.0, 0.0};
    const int powered = power_model_on(gpu);
    settle_time_at(m, gpu, node, l, job, s, f, e, powered ? &overlapped : NULL);
    e->clock_fraction = 1.0;
    clock_stretch none = {1.0, 1.0};
    if (!powered) return none;
    /* the slowest stage's summary (a middle one the first stands for is the first's) */
    int slow = STAGE_FIRST;
    if (s[STAGE_LAST].stage == e->slowest_stage && l->pp > 1) slow = STAGE_LAST;
    else if (s[STAGE_MIDDLE].stage == e->slowest_stage && middle_costed(s)) slow = STAGE_MIDDLE;
    const stage_cost *c = &s[slow].cost;
    double microbatches = (double)e->microbatches;
    double clock_bound = microbatches * (c->body.clock_bound_fwd + c->body.clock_bound_bwd) + c->dp.optimizer_clock_bound;
    double gemm = microbatches * (c->body.gemm_clock_bound_fwd + c->body.gemm_clock_bound_bwd), rest = clock_bound - gemm;
    double energy = microbatches * (c->body.energy_j + c->pipeline.energy_j + c->dp.comm_energy_microbatch_j) +
                    c->dp.optimizer_energy_j + c->dp.comm_energy_step_j;
    double cap = gpu->power_cap_w > 0.0 ? gpu->power_cap_w : gpu->tdp_w;
    /* a synchronous step waits for its slowest GPU: under the cap, the one of its GPUs that leaks most, the
     * expected largest of l->gpus static powers (docs/model.md, "Clock under the power cap", the slowest GPU) */
    const double leakiest_static_w = gpu->power_static_w + gpu->power_static_spread_w * expected_max_sigmas((double)l->gpus);
    /* overlapped collectives and the compute they slow draw together what the compute draws alone: neither
     * their seconds nor their energy move the clock (docs/model.md, "Clock under the power cap") */
    energy -= collective_energy_j(overlapped.beside_s, gpu->collective_power_w, gpu->power_static_w);
    if (energy < 0.0) energy = 0.0;
    double powered_top_s = e->step_s - overlapped.slowdown_s;
    double top_power = powered_top_s > 0.0 ? leakiest_static_w + energy / powered_top_s : 0.0;
    double other = e->step_s - clock_bound - overlapped.slowdown_s;
    const double k = gpu_clock_time_factor(gpu), b = gpu_clock_time_exponent(gpu);
    double x = power_capped_clock_fraction(leakiest_static_w, cap, energy, other, gemm, rest, gpu->clock_energy_exponent,
                                           k, b, CLOCK_FRACTION_MIN);
    clock_stretch st = stretch_at(gpu, x);
    /* The seconds that do not follow the clock are not fixed on more than one GPU: the bubble is
     * the other stages' compute, slowing with them, and slower compute hides more of the gradient
     * reduction.  So settle the step at x, take what is left of it beside the stretched clock-bound
     * seconds as those seconds, and solve again: a fixed point, a few passes to 1e-9. */
    for (int pass = 0; st.gemm != 1.0 || st.other != 1.0; pass++) {
        stage_summary slowed[STAGE_KINDS];
        stretch_stages(s, st, slowed);
        settle_time_at(m, gpu, node, l, job, slowed, f, e, &overlapped);
        double settled_other = e->step_s - gemm * st.gemm - rest * st.other - overlapped.slowdown_s;
        if (pass == SETTLE_PASSES_MAX - 1 || fabs(settled_other - other) <= 1e-9 * e->step_s) break;
        other = settled_other > 0.0 ? settled_other : 0.0;
        x = power_capped_clock_fraction(leakiest_static_w, cap, energy, other, gemm, rest, gpu->clock_energy_exponent, k,
                                        b, CLOCK_FRACTION_MIN);
        st = stretch_at(gpu, x);
        /* back under the cap at the top clock, where calibrate's times hold */
        if (st.gemm == 1.0 && st.other == 1.0) settle_time_at(m, gpu, node, l, job, s, f, e, &overlapped);
    }
    e->clock_fraction = x;
    e->step_clock_hz = x * gpu->clock_max_hz;
    e->top_clock_power_w = top_power;
    e->step_static_w = leakiest_static_w;
    double powered_s = e->step_s - overlapped.slowdown_s;
    e->step_power_w = powered_s > 0.0 ? leakiest_static_w + energy * pow(x, gpu->clock_energy_exponent) / powered_s : 0.0;
    e->clock_bound_top_s = clock_bound;
    e->clock_bound_s = gemm * st.gemm + rest * st.other;
    e->overlap_slowdown_s = overlapped.slowdown_s;
    e->overlap_beside_s = overlapped.beside_s;
    return st;
}

static int estimate_core(const model_t *m, const hw_gpu *gpu, const hw_node *node, const layout_t *l,
                         const job_t *job, estimate_t *e, char *err, size_t errlen)
{
    if (begin_estimate(m, gpu, node, l, job, model_params_total(m), model_params_active(m), e, err, errlen) != 0)
        return -1;
    /* the three stages that differ: the first (embedding, most in flight), a middle one (standing for
     * stages 1 .. p-2, which may hold more layers than the first) and the last (head, logits) */
    const int middle = pipeline_middle_is_distinct(m, l);
    if (build_stage_ops(m, l, 0, &e->first_stage) != 0 ||
        (middle && build_stage_ops(m, l, 1, &e->middle_stage) != 0) ||
        (l->pp > 1 && build_stage_ops(m, l, l->pp - 1, &e->last_stage) != 0)) {
        snprintf(err, errlen, "internal: op list longer than %d ops", OPS_MAX);
        return ESTIMATE_INTERNAL;
    }
    stage_ops *ops[STAGE_KINDS] = {&e->first_stage, &e->middle_stage, &e->last_stage};
    stage_summary s[STAGE_KINDS];
    for (int i = 0; i < STAGE_KINDS; i++)
        if (i == STAGE_FIRST || (i == STAGE_MIDDLE && middle) || (i == STAGE_LAST && l->pp > 1))
            summarize_stage(m, gpu, node, l, ops[i], PART_ALL, &s[i]);
    if (!middle) e->middle_stage = e->first_stage, s[STAGE_MIDDLE] = s[STAGE_FIRST];
    if (l->pp == 1) e->last_stage = e->first_stage, s[STAGE_LAST] = s[STAGE_FIRST];
    settle_memory(m, gpu, l, s, e);
    sequence_flops f;
    model_flops_per_sequence(m, l, &f);
    clock_stretch stretch = settle_time(m, gpu, node, l, job, s, &f, e);
    /* each op at the step's clock, as the validator compares them */
    if (stretch.gemm != 1.0 || stretch.other != 1.0)
        for (int st = 0; st < STAGE_KINDS; st++)
            for (int i = 0; i < ops[st]->nops; i++) {
                op_t *op = &ops[st]->ops[i];
                op->time_s += op->clock_bound_s * ((op->kind == OP_GEMM ? stretch.gemm : stretch.other) - 1.0);
            }
    return 0;
}

const stage_ops *estimate_stage_ops(const estimate_t *e, int64_t stage)
{
    if (stage == 0) return &e->first_stage;
    return stage >= e->layout.pp - 1 ? &e->last_stage : &e->middle_stage;
}

int estimate_layout_fast(const model_t *m, const hw_gpu *gpu, const hw_node *node, const layout_t *l,
                         const job_t *job, estimate_t *e, char *err, size_t errlen)
{
    return estimate_core(m, gpu, node, l, job, e, err, errlen);
}

/* ---- the search's fast path ---------------------------------------------
 * A search costs millions of layouts that differ in one or two degrees at a
 * time.  Each part of a stage's cost (body, pipeline, data parallel, see
 * cost_stage) is costed once, by the same functions as above, for the first
 * layout that needs it, and reused by every later layout whose inputs to
 * that part are the same: the body across DP, VPP, ZeRO, global batch and
 * GPU count; the pipeline across DP, recomputation, SP, ZeRO and global
 * batch; the data-parallel part across micro-batch, VPP, recomputation, SP
 * and global batch.  Memory needs only the body, so a layout that does not
 * fit can stop there.  Per-layout work is then a few dozen operations. */

typedef enum { CACHED_BODY = 1, CACHED_PIPELINE, CACHED_DATA_PARALLEL, CACHED_SEQUENCE_FLOPS } cached_part;

/* A part's key: its inputs, one per 64-bit word, the words it does not
 * depend on zero.  Every word is written, so keys compare and hash whole. */
enum {
    KEY_PART, KEY_MODEL, KEY_GPU, KEY_NODE, KEY_GPUS, KEY_TP, KEY_PP, KEY_DP, KEY_VPP, KEY_MBS, KEY_SEQ,
    KEY_GPUS_PER_NODE, KEY_RECOMPUTE, KEY_ATTENTION, KEY_SP, KEY_ZERO, KEY_FP32_GRADS, KEY_PRECISION,
    KEY_LINK_BYTES_PER_S, KEY_LINK_LATENCY_S, KEY_CP, KEY_CP_COMM, KEY_EP, KEY_EP_OVERLAP, KEY_RECOMPUTE_LAYERS,
    KEY_LOSS, KEY_RECOMPUTE_MODULES, KEY_ETP, KEY_GRAD_ACCUM, KEY_SPLIT, KEY_WORDS
};

typedef struct {
    uint64_t word[KEY_WORDS];
} part_key;

#define ON(word) (UINT32_C(1) << (word))
/* What each part's ops and their costs depend on (cost_stage, oplist.c).
 * The body: the layers, embedding and head that PP puts on a stage, split by
 * TP (whose link depends on whether it leaves the node) and shaped by the
 * micro-batch, sequence, recomputation, attention kernel and SP.  The
 * pipeline: its send/recv's size and count, and the link between stages
 * whatever DP makes of that link.  The data-parallel part: the stage's
 * parameters, DP degree, ZeRO stage and gradient width (and SP, whose norm
 * gradients are summed over the TP group once per step).  The FLOPs of one
 * sequence: the unsplit model, whatever the GPU. */
static const uint32_t part_inputs[] = {
    [CACHED_BODY] = ON(KEY_GPU) | ON(KEY_NODE) | ON(KEY_TP) | ON(KEY_PP) | ON(KEY_MBS) | ON(KEY_SEQ) |
                    ON(KEY_GPUS_PER_NODE) | ON(KEY_RECOMPUTE) | ON(KEY_ATTENTION) | ON(KEY_SP) | ON(KEY_PRECISION) |
                    ON(KEY_CP) | ON(KEY_CP_COMM) | ON(KEY_EP) | ON(KEY_EP_OVERLAP) | ON(KEY_RECOMPUTE_LAYERS) | ON(KEY_LOSS) |
                    ON(KEY_RECOMPUTE_MODULES) | ON(KEY_ETP) | ON(KEY_GRAD_ACCUM) | ON(KEY_SPLIT),
    [CACHED_PIPELINE] = ON(KEY_GPU) | ON(KEY_NODE) | ON(KEY_TP) | ON(KEY_PP) | ON(KEY_VPP) | ON(KEY_MBS) |
                        ON(KEY_SEQ) | ON(KEY_PRECISION) | ON(KEY_LINK_BYTES_PER_S) | ON(KEY_LINK_LATENCY_S) | ON(KEY_CP) |
                        ON(KEY_SPLIT),
    [CACHED_DATA_PARALLEL] = ON(KEY_GPU) | ON(KEY_NODE) | ON(KEY_GPUS) | ON(KEY_TP) | ON(KEY_PP) | ON(KEY_DP) |
                             ON(KEY_GPUS_PER_NODE) | ON(KEY_ZERO) | ON(KEY_FP32_GRADS) | ON(KEY_PRECISION) | ON(KEY_SP) |
                             ON(KEY_CP) | ON(KEY_EP) | ON(KEY_ETP) | ON(KEY_GRAD_ACCUM) | ON(KEY_SPLIT),
    [CACHED_SEQUENCE_FLOPS] = ON(KEY_SEQ) | ON(KEY_RECOMPUTE) | ON(KEY_ATTENTION) | ON(KEY_PRECISION) |
                              ON(KEY_RECOMPUTE_LAYERS) | ON(KEY_PP) | ON(KEY_RECOMPUTE_MODULES),
};
#undef ON

static uint64_t double_bits(double x)
{
    uint64_t bits;
    memcpy(&bits, &x, sizeof bits);
    return bits;
}

static void part_key_of(cached_part part, const model_t *m, const hw_gpu *gpu, const hw_node *node,
                        const layout_t *l, part_key *k)
{
    double link_bytes_per_s = 0.0, link_latency_s = 0.0;
    if (part == CACHED_PIPELINE) {
        int crosses;
        group_link(gpu, node, l, GROUP_PP, &link_bytes_per_s, &link_latency_s, &crosses);
    }
    const uint64_t input[KEY_WORDS] = {
        [KEY_PART] = (uint64_t)part, [KEY_MODEL] = (uint64_t)(uintptr_t)m,
        [KEY_GPU] = (uint64_t)(uintptr_t)gpu, [KEY_NODE] = (uint64_t)(uintptr_t)node,
        [KEY_GPUS] = (uint64_t)l->gpus, [KEY_TP] = (uint64_t)l->tp, [KEY_PP] = (uint64_t)l->pp,
        [KEY_DP] = (uint64_t)l->dp, [KEY_VPP] = (uint64_t)l->vpp, [KEY_MBS] = (uint64_t)l->mbs,
        [KEY_SEQ] = (uint64_t)l->seq, [KEY_GPUS_PER_NODE] = (uint64_t)l->gpus_per_node,
        [KEY_RECOMPUTE] = (uint64_t)l->recompute, [KEY_ATTENTION] = (uint64_t)l->attention,
        [KEY_SP] = (uint64_t)l->sp, [KEY_ZERO] = (uint64_t)l->zero, [KEY_FP32_GRADS] = (uint64_t)l->fp32_grads,
        [KEY_PRECISION] = (uint64_t)l->precision, [KEY_LINK_BYTES_PER_S] = double_bits(link_bytes_per_s),
        [KEY_LINK_LATENCY_S] = double_bits(link_latency_s), [KEY_CP] = (uint64_t)layout_cp(l),
        [KEY_CP_COMM] = (uint64_t)l->cp_comm, [KEY_EP] = (uint64_t)layout_ep(l),
        /* and the experts' launches and rows */
        [KEY_EP_OVERLAP] = (uint64_t)l->ep_overlap | (uint64_t)l->expert_gemm << 8 | (uint64_t)l->expert_rows << 16,
        [KEY_RECOMPUTE_LAYERS] = (uint64_t)l->recompute_layers,
        [KEY_LOSS] = (uint64_t)l->loss | (uint64_t)l->logit_metrics << 8,   /* the head's ops: loss and metrics */
        [KEY_RECOMPUTE_MODULES] = (uint64_t)l->recompute_modules,
        [KEY_ETP] = (uint64_t)layout_etp(l),
        [KEY_GRAD_ACCUM] = (uint64_t)l->grad_accum,   /* DeepSpeed's pass is in the body, its fp32 traffic in DP */
        /* the stages' layers, and where dense and MoE layers mix, the chunks interleaving deals them in
         * (moe_layers_on_stage: only when the chunks are equal) */
        [KEY_SPLIT] = (uint64_t)l->first_stage_layers | (uint64_t)l->last_stage_layers << 24 |
                      ((m->dense_layers > 0 || m->moe_layer_freq > 1) && l->vpp > 1 && m->layers % (l->pp * l->vpp) == 0
                           ? (uint64_t)l->vpp << 48 : 0),
    };
    uint32_t keep = part_inputs[part] | (UINT32_C(1) << KEY_PART) | (UINT32_C(1) << KEY_MODEL);
    for (int i = 0; i < KEY_WORDS; i++) k->word[i] = (keep >> i) & 1u ? input[i] : 0;
}

typedef struct {
    part_key key;
    int status;                 /* 0, or -1 when an op list would not fit in OPS_MAX ops */
    stage_summary stages[STAGE_KINDS]; /* the first, a middle and the last stage (repeated as estimate_core does) */
    sequence_flops flops;
} part_entry;

/* One slot of the hash index: a key's hash and where its entry is (0: free). */
typedef struct {
    uint64_t hash;
    size_t entry;               /* index into entries, plus one */
} part_slot;

struct estimate_cache {
    part_slot *slots;           /* open addressing, a power of two, at most half full */
    size_t nslots;
    part_entry *entries;        /* in the order they were costed */
    size_t nentries, max_entries;
    stage_ops scratch;          /* where op lists are built, one at a time */
    size_t last[CACHED_SEQUENCE_FLOPS + 1]; /* per part, the entry the last lookup found, plus one (0: none): the
                                               search's inner loops (EP, expert TP) ask for the same pipeline and
                                               FLOPs parts layout after layout */
    const model_t *model;       /* the model params_total and params_active belong to */
    double params_total, params_active;
};

estimate_cache *estimate_cache_new(void)
{
    estimate_cache *c = calloc(1, sizeof *c);
    if (!c) return NULL;
    c->nslots = 4096;
    c->max_entries = c->nslots / 2;
    c->slots = calloc(c->nslots, sizeof *c->slots);
    c->entries = malloc(c->max_entries * sizeof *c->entries);
    if (!c->slots || !c->entries) {
        estimate_cache_free(c);
        return NULL;
    }
    return c;
}

void estimate_cache_free(estimate_cache *c)
{
    if (!c) return;
    free(c->slots);
    free(c->entries);
    free(c);
}

/* Keys are mostly small integers in a few words: multiply each word by its
 * own odd constant (independent products, so they pipeline), then mix. */
static uint64_t part_key_hash(const part_key *k)
{
    uint64_t h = 0;
    for (size_t i = 0; i < KEY_WORDS; i++) h += k->word[i] * (0x9e3779b97f4a7c15u + 2u * i * 0xbf58476d1ce4e5b9u);
    h ^= h >> 31;
    h *= 0xff51afd7ed558ccdu;
    h ^= h >> 33;
    return h;
}

static int same_key(const part_key *a, const part_key *b)
{
    for (int i = 0; i < KEY_WORDS; i++)
        if (a->word[i] != b->word[i]) return 0;
    return 1;
}

/* Doubles the index and the room for entries. */
static int cache_grow(estimate_cache *c)
{
    size_t nslots = c->nslots * 2;
    part_slot *slots = calloc(nslots, sizeof *slots);
    part_entry *entries = realloc(c->entries, nslots / 2 * sizeof *entries);
    if (!slots || !entries) {
        free(slots);
        if (entries) c->entries = entries;
        return -1;
    }
    for (size_t i = 0; i < c->nslots; i++) {
        if (!c->slots[i].entry) continue;
        size_t at = c->slots[i].hash & (nslots - 1);
        while (slots[at].entry) at = (at + 1) & (nslots - 1);
        slots[at] = c->slots[i];
    }
    free(c->slots);
    c->slots = slots;
    c->nslots = nslots;
    c->entries = entries;
    c->max_entries = nslots / 2;
    return 0;
}

/* Costs one part of the first, a middle and the last stage of layout l. */
static int fill_part(estimate_cache *c, cached_part part, const model_t *m, const hw_gpu *gpu,
                     const hw_node *node, const layout_t *l, part_entry *entry)
{
    if (part == CACHED_SEQUENCE_FLOPS) {
        count_sequence_flops(m, l, &entry->flops);
        return 0;
    }
    int parts = part == CACHED_BODY ? PART_BODY : part == CACHED_PIPELINE ? PART_PIPELINE : PART_DATA_PARALLEL;
    const int64_t stage[STAGE_KINDS] = {0, 1, l->pp - 1};
    const int middle = pipeline_middle_is_distinct(m, l);
    for (int i = 0; i < STAGE_KINDS; i++) {
        /* the first stands for the middle ones unless they differ (pipeline_middle_is_distinct), and with one
         * stage for the last too */
        if ((i == STAGE_MIDDLE && !middle) || (i == STAGE_LAST && l->pp == 1)) {
            entry->stages[i] = entry->stages[STAGE_FIRST];
            continue;
        }
        if (build_stage_ops(m, l, stage[i], &c->scratch) != 0) return -1;
        summarize_stage(m, gpu, node, l, &c->scratch, parts, &entry->stages[i]);
    }
    return 0;
}

/* The part's entry, costed on first use.  The pointer lives until the next lookup. */
static const part_entry *lookup_part(estimate_cache *c, cached_part part, const model_t *m, const hw_gpu *gpu,
                                     const hw_node *node, const layout_t *l, char *err, size_t errlen)
{
    part_key k;
    part_key_of(part, m, gpu, node, l, &k);
    if (c->nentries == c->max_entries && cache_grow(c) != 0) {
        snprintf(err, errlen, "out of memory");
        return NULL;
    }
    if (c->last[part]) {
        part_entry *prev = &c->entries[c->last[part] - 1];
        if (same_key(&prev->key, &k) && prev->status == 0) return prev;
    }
    uint64_t hash = part_key_hash(&k);
    size_t mask = c->nslots - 1;
    size_t at = hash & mask;
    part_entry *e = NULL;
    for (; c->slots[at].entry; at = (at + 1) & mask) {
        e = &c->entries[c->slots[at].entry - 1];
        if (c->slots[at].hash == hash && same_key(&e->key, &k)) break;
    }
    if (!c->slots[at].entry) {
        e = &c->entries[c->nentries++];
        c->slots[at].hash = hash;
        c->slots[at].entry = c->nentries;
        e->key = k;
        e->status = fill_part(c, part, m, gpu, node, l, e);
    }
    c->last[part] = (size_t)(e - c->entries) + 1;
    if (e->status != 0) {
        /* an op list past OPS_MAX (planner.h), as in estimate_core */
        snprintf(err, errlen, "internal: op list longer than %d ops", OPS_MAX);
        return NULL;
    }
    return e;
}

int estimate_layout_cached(estimate_cache *cache, const model_t *m, const hw_gpu *gpu, const hw_node *node,
                           const layout_t *l, const job_t *job, int skip_time_if_unfit, estimate_t *e, char *err,
                           size_t errlen)
{
    if (cache->model != m) {
        cache->model = m;
        cache->params_total = model_params_total(m);
        cache->params_active = model_params_active(m);
    }
    if (begin_estimate(m, gpu, node, l, job, cache->params_total, cache->params_active, e, err, errlen) != 0)
        return -1;
    const part_entry *body = lookup_part(cache, CACHED_BODY, m, gpu, node, l, err, errlen);
    if (!body) return ESTIMATE_INTERNAL;
    settle_memory(m, gpu, l, body->stages, e);
    if (!e->fits && skip_time_if_unfit) return 0;

    /* a middle stage the first stands for carries only its stage number: the search pays for every byte copied */
    stage_summary s[STAGE_KINDS];
    s[STAGE_FIRST] = body->stages[STAGE_FIRST];
    s[STAGE_LAST] = body->stages[STAGE_LAST];
    const int middle = middle_costed(body->stages);
    if (middle) s[STAGE_MIDDLE] = body->stages[STAGE_MIDDLE];
    else s[STAGE_MIDDLE].stage = body->stages[STAGE_MIDDLE].stage;
    const part_entry *pipeline = lookup_part(cache, CACHED_PIPELINE, m, gpu, node, l, err, errlen);
    if (!pipeline) return ESTIMATE_INTERNAL;
    for (int i = 0; i < STAGE_KINDS; i++)
        if (i != STAGE_MIDDLE || middle) s[i].cost.pipeline = pipeline->stages[i].cost.pipeline;
    const part_entry *data_parallel = lookup_part(cache, CACHED_DATA_PARALLEL, m, gpu, node, l, err, errlen);
    if (!data_parallel) return ESTIMATE_INTERNAL;
    for (int i = 0; i < STAGE_KINDS; i++)
        if (i != STAGE_MIDDLE || middle) s[i].cost.dp = data_parallel->stages[i].cost.dp;
    const part_entry *flops = lookup_part(cache, CACHED_SEQUENCE_FLOPS, m, gpu, node, l, err, errlen);
    if (!flops) return ESTIMATE_INTERNAL;
    sequence_flops f = flops->flops;
    settle_time(m, gpu, node, l, job, s, &f, e);
    return 0;
}

/* A sequence longer than the model was trained on (docs/model.md, "Warnings"): a learned table has no
 * rows past its size; rotary and ALiBi positions run at any length, but were trained to their own. */
static void warn_positions(estimate_t *e, const model_t *m, const layout_t *l)
{
    int64_t trained = m->max_positions > 0 ? m->max_positions : m->seq;
    if (l->seq <= trained) return;
    if (m->position == POS_LEARNED)
        warn(e, "--seq %lld is beyond %s's %lld learned positions: its position table has no rows past %lld "
                "(costed with the table as it is; the model cannot run this sequence without a larger one)",
             (long long)l->seq, m->name, (long long)trained, (long long)trained);
    else
        warn(e, "--seq %lld is beyond the %lld positions %s was trained on: %s runs at any length, but quality past "
                "it needs long-context training%s",
             (long long)l->seq, (long long)trained, m->name, m->position == POS_ROPE ? "RoPE" : "ALiBi",
             m->position == POS_ROPE ? " or RoPE scaling" : "");
}

int estimate_layout(const model_t *m, const hw_gpu *gpu, const hw_node *node, const layout_t *l,
                    const job_t *job, estimate_t *e, char *err, size_t errlen)
{
    int rc = estimate_core(m, gpu, node, l, job, e, err, errlen);
    if (rc != 0) return rc;
    int64_t used_gbs = e->layout.gbs;
    int tp_crosses = l->tp > 1 && l->tp > l->gpus_per_node;

    /* what a reviewer would say */
    const double gib = 1073741824.0;
    if (!e->fits)
        warn(e, "does not fit: stage %lld needs %.1f GiB per GPU, %s has %.1f GiB (%.1f GiB short)",
             (long long)e->memory.stage, e->memory.total / gib, gpu->name, gpu->memory_bytes / gib,
             (e->memory.total - gpu->memory_bytes) / gib);
    warn_positions(e, m, l);
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
    int64_t first, middle, last;
    pipeline_split(m, l, &first, &middle, &last);
    if (l->pp > 1 && !l->first_stage_layers && !l->last_stage_layers && m->layers % l->pp != 0)
        warn(e, "%lld layers are not divisible by PP %lld: stages hold %lld (first), %lld (each middle), %lld (last) layers, "
                "the embedding and the head counted as a layer each (--first-stage-layers, --last-stage-layers set them)",
             (long long)m->layers, (long long)l->pp, (long long)first, (long long)middle, (long long)last);
    if (l->vpp > 1 && (first % l->vpp || last % l->vpp || (l->pp > 2 && middle % l->vpp)))
        warn(e, "stages of %lld, %lld and %lld layers do not split into VPP %lld equal chunks: costed as if they did",
             (long long)first, (long long)middle, (long long)last, (long long)l->vpp);
    /* the multi-token prediction modules sit on the last stage (docs/model.md, "Multi-token prediction") */
    if (m->mtp_layers > 0 && l->pp > 1 && e->slowest_stage == l->pp - 1 && e->stage_microbatch_s[STAGE_FIRST] > 0.0)
        warn(e, "the last stage, which holds the %lld multi-token prediction module(s), sets the step: %.4g ms a micro-batch "
                "against %.4g on %s (%s)",
             (long long)m->mtp_layers, 1e3 * e->stage_microbatch_s[STAGE_LAST],
             1e3 * e->stage_microbatch_s[l->pp > 2 ? STAGE_MIDDLE : STAGE_FIRST], l->pp > 2 ? "a middle stage" : "the first",
             last > 1 ? "--last-stage-layers below its layers would even them"
                      : "it holds one layer beside them: only more stages or a module spread over them would even them");
    if (l->sp && l->tp == 1)
        warn(e, "--sp has no effect with TP 1");
    if (model_is_moe(m) && layout_ep(l) == 1 && dp_group_size(l) > 1 && layout_etp(l) == l->tp)
        warn(e, "%s is a mixture of experts run without expert parallelism: each rank holds a 1/t slice of all %lld experts "
                "(--ep up to %lld would shard them)", m->name, (long long)m->experts, (long long)dp_group_size(l));
    else if (model_is_moe(m) && layout_ep(l) == 1 && l->tp * dp_group_size(l) / layout_etp(l) > 1)
        warn(e, "%s is a mixture of experts run without expert parallelism: each rank holds a 1/%lld slice (--etp) of all %lld "
                "experts (--ep up to %lld would shard them)", m->name, (long long)layout_etp(l), (long long)m->experts,
             (long long)(l->tp * dp_group_size(l) / layout_etp(l)));
    if (model_is_moe(m) && moe_dropped_fraction(model_moe_imbalance(m), m->capacity_factor) > 0.0)
        warn(e, "capacity factor %.2f is below the load imbalance %.2f: the busiest expert drops up to %.0f%% of its tokens",
             m->capacity_factor, model_moe_imbalance(m), 100.0 * moe_dropped_fraction(model_moe_imbalance(m), m->capacity_factor));
    return 0;
}
