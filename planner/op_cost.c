/* The cost of one op of the op list (planner.h, "op_cost"): a GEMM from calibrate's table, the tile
 * model or the efficiency curve; attention by kernel generation; a memory-bound kernel at the achievable
 * bandwidth; a collective over the link its group crosses; each with what the power model needs of it.
 * docs/model.md derives each rule ("Step time", "GEMM time over M, N, K", "Attention kernel generations",
 * "Communication", "The network at scale", "Clock under the power cap"). */
#include "planner.h"

#include <math.h>
#include <stddef.h>
#include <string.h>

/* Bandwidth per direction and latency of the link a group's traffic crosses.
 * Placement: TP innermost, then CP, then DP, then PP (Megatron's rank order);
 * the gradient's group (GROUP_DP) is DP x CP, ranks tp apart. */
/* The consecutive GPUs one group of this kind spans (TP innermost, then CP, DP, PP). */
static int64_t group_span(const layout_t *l, group_t group)
{
    int64_t cp = layout_cp(l);
    return group == GROUP_TP   ? l->tp
           : group == GROUP_CP ? l->tp * cp
           : group == GROUP_ETP ? layout_etp(l)
           : group == GROUP_EP ? layout_etp(l) * layout_ep(l)
           : group == GROUP_DP || group == GROUP_EDP ? l->tp * cp * l->dp
                               : l->tp * cp * l->dp * l->pp;
}

void group_link(const hw_gpu *gpu, const hw_node *node, const layout_t *l, group_t group, double *bw,
                double *latency, int *crosses)
{
    int64_t span = group_span(l, group);
    *crosses = span > l->gpus_per_node;
    if (*crosses) {
        /* NCCL spreads a ring that crosses nodes over all of a node's NICs,
         * shared by the groups that cross at once: a TP group leaving the
         * node has them all, each of the t DP (or CP) groups of a node a
         * t-th, and every pipeline stage pair its own GPU's share */
        double nic_per_gpu = hw_node_inter_bytes_per_s_per_gpu(node);
        /* an all-to-all's every GPU sends to the other nodes at once: its own NIC share; the experts'
         * gradient rings, one per expert-TP and EP rank; an expert-TP group leaving the node, like TP's, has
         * them all */
        double sharing = group == GROUP_TP || group == GROUP_ETP   ? 1.0
                         : group == GROUP_PP || group == GROUP_EP ? (double)l->gpus_per_node
                         : group == GROUP_EDP                     ? (double)(layout_etp(l) * layout_ep(l))
                                                                  : (double)l->tp;
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
static double gemm_efficiency(const hw_gpu *gpu, double flops, precision_t p)
{
    if (gpu->gemm_half_flops <= 0.0) return gpu->gemm_efficiency;
    /* the half point is a fixed time at the plateau rate (docs/model.md, "Priors"): a faster precision
     * needs proportionally more FLOPs to reach it */
    double sixteen = gpu->peak_flops[PREC_BF16] > 0.0 ? gpu->peak_flops[PREC_BF16] : gpu->peak_flops[PREC_FP16];
    double half = gpu->gemm_half_flops * (sixteen > 0.0 && gpu->peak_flops[p] > 0.0 ? gpu->peak_flops[p] / sixteen : 1.0);
    return gpu->gemm_efficiency * flops / (flops + half);
}

/* The rate of an uncalibrated GEMM of `flops` FLOPs in precision p: the peak times the GEMM curve, and for
 * FP8 the smaller share of its peak FP8 GEMMs reach (docs/model.md, "Step time", "FP8 GEMMs"). */
double gemm_flop_per_s(const hw_gpu *gpu, double flops, precision_t p)
{
    double rate = gpu->peak_flops[p] * gemm_efficiency(gpu, flops, p);
    if (p == PREC_FP8 && gpu->fp8_gemm_relative_efficiency > 0.0) rate *= gpu->fp8_gemm_relative_efficiency;
    return rate;
}

/* Time of a shape calibrate timed on this GPU (`table`: GEMMs m x n x k, or
 * the fused attention's batch x heads, sequence, head size, whose KV heads
 * per query head must be the op's), or on the line
 * through timed shapes that differ from it in one size only: the first (the
 * tokens of forward and dgrad GEMMs, the attention's batch) or, when
 * `third_varies`, the third (the tokens of a wgrad GEMM).  Piecewise linear
 * between the two nearest, proportional beyond the largest, linear (at least
 * proportional) below the smallest (docs/model.md, "Step time").  0 when no
 * such line exists.  third_varies < 0: the exact shape or 0, no line. */
double measured_shape_s(const hw_gemm_time *table, int count, double m, double n, double k, double kv,
                        int third_varies)
{
    if (third_varies < 0) {   /* the exact shape only */
        for (int i = 0; i < count; i++)
            if ((double)table[i].m == m && (double)table[i].n == n && (double)table[i].k == k && table[i].kv == 0)
                return table[i].seconds;
        return 0.0;
    }
    for (int vary = 0; vary <= third_varies; vary++) { /* 0: m varies, 1: k varies */
        double x = vary ? k : m;
        double lo_x = 0, lo_t = 0, hi_x = 0, hi_t = 0;      /* the nearest below and above x */
        double min_x = 0, min_t = 0, min2_x = 0, min2_t = 0; /* the two smallest */
        double max_x = 0, max_t = 0;
        int points = 0;
        for (int i = 0; i < count; i++) {
            const hw_gemm_time *g = &table[i];
            if ((double)g->n != n || (double)(vary ? g->m : g->k) != (vary ? m : k)) continue;
            /* the attention's KV heads per query head (its GQA grouping) must match */
            if (g->kv > 0 && (double)g->kv * m != kv * (double)g->m) continue;
            double gx = (double)(vary ? g->k : g->m);
            if (gx == x) return g->seconds;
            points++;
            if (gx < x && gx > lo_x) { lo_x = gx; lo_t = g->seconds; }
            if (gx > x && (hi_x == 0 || gx < hi_x)) { hi_x = gx; hi_t = g->seconds; }
            if (min_x == 0 || gx < min_x) { min2_x = min_x; min2_t = min_t; min_x = gx; min_t = g->seconds; }
            else if (min2_x == 0 || gx < min2_x) { min2_x = gx; min2_t = g->seconds; }
            if (gx > max_x) { max_x = gx; max_t = g->seconds; }
        }
        if (points < 2) continue;
        if (lo_x > 0 && hi_x > 0) return lo_t + (hi_t - lo_t) * (x - lo_x) / (hi_x - lo_x);
        if (x > max_x) return max_t * x / max_x;
        double linear = min_t + (min2_t - min_t) * (x - min_x) / (min2_x - min_x);
        double proportional = min_t * x / min_x;
        return linear > proportional ? linear : proportional;
    }
    return 0.0;
}

/* An attention kernel's FLOP rate at a head configuration calibrate did not time, from the shapes it timed with
 * the same head size (docs/model.md, "Attention kernel generations"): at each timed sequence, on the occupancy
 * curve through that sequence's two shapes whose batch x heads bracket the op's (or, beyond them, the two
 * nearest: a tensor-parallel shard has fewer heads than any shape timed), occupancy_rate; between two timed
 * sequences, linear; beyond them (`extrapolate`: our fused kernel's table) the nearest one's rate carried by the
 * frameworks' sequence curve, flash_sequence_factor, else 0.  0 when no shape of that head size was timed. */
static double attention_table_rate(const hw_gemm_time *table, int count, double batch_heads, double seq,
                                   double head_dim, int bwd, int extrapolate)
{
    /* the timed sequences of this head size, each once */
    double seqs[HWDB_ATTENTION_TIMES_MAX];
    int nseq = 0;
    for (int i = 0; i < count && i < HWDB_ATTENTION_TIMES_MAX; i++) {
        const hw_gemm_time *g = &table[i];
        if ((double)g->k != head_dim || g->seconds <= 0.0) continue;
        int j = 0;
        while (j < nseq && seqs[j] != (double)g->n) j++;
        if (j == nseq) seqs[nseq++] = (double)g->n;
    }
    double lo_s = 0, lo_r = 0, hi_s = 0, hi_r = 0;   /* the nearest timed sequences below and above seq, their rates */
    double min_s = 0, min_r = 0, max_s = 0, max_r = 0;
    for (int j = 0; j < nseq; j++) {
        /* this sequence's shapes, ascending in batch x heads */
        double b[HWDB_ATTENTION_TIMES_MAX], r[HWDB_ATTENTION_TIMES_MAX];
        int n = 0;
        for (int i = 0; i < count && i < HWDB_ATTENTION_TIMES_MAX; i++) {
            const hw_gemm_time *g = &table[i];
            if ((double)g->k != head_dim || g->seconds <= 0.0 || (double)g->n != seqs[j]) continue;
            int at = n++;
            for (; at > 0 && b[at - 1] > (double)g->m; at--) b[at] = b[at - 1], r[at] = r[at - 1];
            b[at] = (double)g->m;
            r[at] = flash_attention_flops(1.0, b[at], seqs[j], head_dim, 1, bwd) / g->seconds;
        }
        /* the two that bracket the op's batch x heads, or the two nearest where it lies beyond them */
        int hi = 0;
        while (hi < n && b[hi] < batch_heads) hi++;
        int lo = hi == 0 ? 0 : hi == n ? n - 2 : hi - 1;
        double rate = hi < n && b[hi] == batch_heads ? r[hi]
                      : n == 1 ? r[0] : occupancy_rate(batch_heads, b[lo], r[lo], b[lo + 1], r[lo + 1]);
        double s = seqs[j];
        if (s == seq) return rate;
        if (s < seq && s > lo_s) { lo_s = s; lo_r = rate; }
        if (s > seq && (hi_s == 0 || s < hi_s)) { hi_s = s; hi_r = rate; }
        if (min_s == 0 || s < min_s) { min_s = s; min_r = rate; }
        if (s > max_s) { max_s = s; max_r = rate; }
    }
    if (lo_s > 0 && hi_s > 0) return lo_r + (hi_r - lo_r) * (seq - lo_s) / (hi_s - lo_s);
    if (!extrapolate) return 0.0;
    if (max_s > 0 && seq > max_s) return max_r * flash_sequence_factor(seq) / flash_sequence_factor(max_s);
    if (min_s > 0) return min_r * flash_sequence_factor(seq) / flash_sequence_factor(min_s);
    return 0.0;
}

/* The CPU issues one kernel per launch_overhead_s at best; while it runs
 * ahead of the GPU that cost hides, so it bounds an op from below rather
 * than adding to it (docs/model.md, "Step time"). */
static double with_launch(const hw_gpu *gpu, double seconds)
{
    return seconds > gpu->launch_overhead_s ? seconds : gpu->launch_overhead_s;
}

/* A memory-bound kernel: its bytes at the achievable bandwidth, plus the
 * fixed time every kernel spends filling and draining the GPU (calibrated;
 * 0 on hwdb defaults) (docs/model.md, "Step time"). */
static double membound_at_s(const hw_gpu *gpu, double bytes, double efficiency)
{
    return bytes / (gpu->hbm_bytes_per_s * efficiency) + gpu->membound_overhead_s;
}

static double membound_s(const hw_gpu *gpu, double bytes) { return membound_at_s(gpu, bytes, gpu->membound_efficiency); }

/* The optimizer step's AdamW: its bytes at the bandwidth calibrate measured for it (four arrays streamed in and four
 * out reach less of the HBM than a copy's one and one: 0.820 against 0.872 on an H200), else as any memory-bound op
 * (docs/model.md, "The optimizer's bandwidth"). */
static double optimizer_s(const hw_gpu *gpu, double bytes)
{
    return membound_at_s(gpu, bytes, gpu->optimizer_membound_efficiency > 0.0 ? gpu->optimizer_membound_efficiency
                                                                               : gpu->membound_efficiency);
}

/* An FP8 GEMM's rate over the forward's: Transformer Engine runs the backward's data and weight gradients
 * without cuBLASLt's fast accumulation (its _2X_ACC_DGRAD, _2X_ACC_WGRAD), which calibrate times apart
 * (docs/model.md, "FP8 GEMMs"); 1 for the forward, or when calibrate has not. */
static double fp8_pass_factor(const hw_gpu *gpu, const op_t *op)
{
    if (op->pass != PASS_BWD || gpu->fp8_backward_gemm_relative_efficiency <= 0.0) return 1.0;
    double forward = gpu->fp8_gemm_relative_efficiency > 0.0 ? gpu->fp8_gemm_relative_efficiency : 1.0;
    return gpu->fp8_backward_gemm_relative_efficiency / forward;
}

/* A GEMM's time from its tiles and waves (docs/model.md, "GEMM time over M, N, K"), once sextant fit-gemm
 * has fitted the model to this GPU, times the fused bias gradient's factor where the op has one; 0 when it
 * has not been fitted.  The rate was fitted on 16-bit GEMMs: another precision scales it by its peak (and
 * FP8 by its relative efficiency), and FP8 adds its operands' casts. */
/* the kernels a GEMM op is launched as: one per expert where the experts' GEMMs are separate launches */
static double gemm_launches(const op_t *op)
{
    return op->separate_launches && op->batch > 1 ? (double)op->batch : 1.0;
}

/* the busiest EP rank's rows over the balanced expert's shape (op_t.rows_load) */
static double gemm_rows_load(const op_t *op)
{
    return op->batch > 1 && op->rows_load > 0.0 ? op->rows_load : 1.0;
}

/* An expert GEMM's routed rows (docs/model.md, "Mixture of experts", a router's rows), where its launch's expected
 * tiles fill the GPU (below a wave the other streams' launches take the SMs the extra tiles would): the forward's
 * and the data gradient's row tiles over the balanced shape's (*tiles_factor), the weight gradient's K (*k); 1 and
 * the op's K for even rows and every other GEMM. */
static void routed_rows(const op_t *op, const hw_gpu *gpu, double *tiles_factor, double *k)
{
    *tiles_factor = 1.0;
    *k = (double)op->k;
    if (op->batch <= 1 || !op->routed_rows) return;
    const double per_launch = op->separate_launches ? 1.0 : (double)op->batch;
    const double tiles = per_launch * ceil((double)op->m / GEMM_TILE_M) * ceil((double)op->n / GEMM_TILE_N);
    if (op->weight_gradient) {
        if (tiles >= gpu->sm_count) *k = routed_row_tiles((double)op->k, GEMM_K_STEP) * GEMM_K_STEP;
        return;
    }
    const double f = routed_row_tiles((double)op->m, GEMM_TILE_M) / ceil((double)op->m / GEMM_TILE_M);
    if (tiles * f >= gpu->sm_count) *tiles_factor = f;
}

/* The host's issue that bounds an op: the forward's (and its recomputation's) expert GEMMs launched one an expert,
 * their issue after the routing sync (docs/model.md, "Mixture of experts"); 0 for every other op. */
double op_host_issue_s(const op_t *op, const hw_gpu *gpu)
{
    const double launches = op->kind == OP_GEMM ? gemm_launches(op) : 1.0;
    if (launches <= 1.0 || (op->pass != PASS_FWD && op->pass != PASS_RECOMPUTE)) return 0.0;
    return expert_gemm_issue_s(launches, gpu->gemm_issue_s, gpu->launch_overhead_s);
}

static double gemm_model_s(const hw_gpu *gpu, const op_t *op, precision_t p, double membw, double *memory_s)
{
    *memory_s = 0.0;
    double sixteen = gpu->peak_flops[PREC_BF16] > 0.0 ? gpu->peak_flops[PREC_BF16] : gpu->peak_flops[PREC_FP16];
    if (gpu->gemm_tile_flops <= 0.0 || gpu->sm_count <= 0.0 || sixteen <= 0.0 || gpu->peak_flops[p] <= 0.0) return 0.0;
    double rate = gpu->gemm_tile_flops * gpu->peak_flops[p] / sixteen;
    double cast_s = 0.0;
    if (p == PREC_FP8) {
        if (gpu->fp8_gemm_relative_efficiency > 0.0) rate *= gpu->fp8_gemm_relative_efficiency;
        rate *= fp8_pass_factor(gpu, op);
        double cast = fp8_cast_bytes((double)op->m, (double)op->k, op->pass == PASS_BWD, op->weight_gradient,
                                     op->norm_fed);
        if (op->batch > 1) cast *= (double)op->batch * gemm_rows_load(op);
        if (cast > 0.0) cast_s = membound_s(gpu, cast);
    }
    /* one launch per expert: each GEMM fills the GPU in waves of its own tiles, pays its own fixed cost, and
     * splits K by its own tile count; the busiest rank's extra rows lengthen the waves, not the launches
     * (docs/model.md, "Mixture of experts", the experts' GEMMs) */
    double launches = gemm_launches(op), tiles_factor, k;
    routed_rows(op, gpu, &tiles_factor, &k);
    double one = gemm_tile_wave_s((double)op->batch / launches, (double)op->m, (double)op->n, k, gpu->sm_count, rate,
                                  gpu->gemm_tile_s, gpu->gemm_fixed_s, op->bytes / launches / gemm_rows_load(op), membw);
    double t = launches * (gpu->gemm_fixed_s + gemm_rows_load(op) * tiles_factor * (one - gpu->gemm_fixed_s));
    /* a weight gradient added into the gradient: its read, beyond the tile model, whose fit took it out of
     * calibrate's rows (docs/model.md, "GEMM time over M, N, K") */
    double accumulate = gemm_accumulate_s((double)op->batch * (double)op->m * (double)op->n, op->accumulate_bytes,
                                          element_bytes(p), membw, gpu->gemm_accumulate_read_factor,
                                          gpu->gemm_accumulate_write_factor);
    t += accumulate;
    if (op->bias_gradient && gpu->gemm_bias_grad_factor > 0.0) t *= gpu->gemm_bias_grad_factor;
    /* the casts and the gradient's read move bytes through HBM: they do not follow the SM clock */
    *memory_s = cast_s + accumulate;
    return t + cast_s;
}

/* The GPU's power model (docs/model.md, "Clock under the power cap"): on
 * once calibrate has measured it. */
int power_model_on(const hw_gpu *gpu)
{
    return gpu->clock_max_hz > 0.0 && gpu->power_static_w > 0.0;
}

double gpu_clock_time_factor(const hw_gpu *gpu) { return gpu->clock_time_factor > 0.0 ? gpu->clock_time_factor : 1.0; }
double gpu_clock_time_exponent(const hw_gpu *gpu) { return gpu->clock_time_exponent > 0.0 ? gpu->clock_time_exponent : 1.0; }

/* GEMMs of 1 GFLOP or more follow the SM clock; smaller ones wait on memory
 * and launches (docs/model.md, "Clock under the power cap"). */
#define CLOCK_BOUND_GEMM_FLOPS 1e9

/* Records what the power model needs of a costed op: the seconds of it that
 * follow the clock (none when the launch bound sets its time) and its
 * switching energy at the top clock.  Returns the op's time. */
static double with_power(op_t *op, const hw_gpu *gpu, double seconds, double clock_bound, double j_per_flop)
{
    double t = with_launch(gpu, seconds);
    if (!power_model_on(gpu)) return t;
    op->clock_bound_s = t > seconds ? 0.0 : clock_bound * seconds;
    op->energy_j = j_per_flop * op->flops + gpu->energy_j_per_byte * op->bytes;
    return t;
}

/* One collective op's seconds per instance over its group's link (docs/model.md, "Communication"), without
 * the host's wait some of them force (op_cost). */
static double collective_s(op_t *op, const hw_gpu *gpu, const hw_node *node, const layout_t *l)
{
    double bw, latency;
    group_link(gpu, node, l, op->group, &bw, &latency, &op->crosses_node);
    double n = (double)op->group_size;
    /* inside the node, calibrate --comm's fit of this very collective when there is one: over the number of
     * ranks nearest the group's where it measured several (NCCL is faster over 4 GPUs of a node than over 2,
     * docs/model.md, "Communication") */
    double pieces = op->pieces > 1 ? (double)op->pieces : 1.0, bytes = op->comm_bytes / pieces;
    if (!op->crosses_node) {
        double cbw = 0.0, clat = 0.0;
        /* an all-to-all inside the node is n - 1 send/recv pairs of S/n bytes, as NCCL posts it: priced
         * with the send/recv's measurements (docs/model.md, "Mixture of experts") */
        const int pairs = op->coll == COLL_ALLTOALL;
        int which = op->coll == COLL_REDUCE_SCATTER ? 1 : op->coll == COLL_ALLGATHER ? 2
                    : op->coll == COLL_SENDRECV || pairs ? 3 : 0;
        const hw_intra_fit *fit = hw_node_intra_fit(node, pairs ? 2.0 : n, which);
        /* a group of exactly the ranks calibrate measured, at a size it measured around: the measured time,
         * NCCL's climb in bandwidth with the message included (docs/model.md, "Communication"); a pair is a
         * pair over any number of ranks */
        double measured = fit && ((double)fit->ranks == n || pairs)
                              ? hw_intra_fit_time_s(fit, which, pairs ? bytes / n : bytes) : 0.0;
        if (measured > 0.0) return pieces * (pairs ? alltoall_pairs_s(n, measured) : measured);
        if (fit) {
            const double fit_bw[4] = {fit->ar_bytes_per_s, fit->rs_bytes_per_s, fit->ag_bytes_per_s, fit->sr_bytes_per_s};
            const double fit_lat[4] = {fit->ar_latency_s, fit->rs_latency_s, fit->ag_latency_s, fit->sr_latency_s};
            cbw = fit_bw[which];
            clat = fit_lat[which];
        } else if (op->coll == COLL_REDUCE_SCATTER) { cbw = node->intra_rs_bytes_per_s; clat = node->intra_rs_latency_s; }
        else if (op->coll == COLL_ALLGATHER) { cbw = node->intra_ag_bytes_per_s; clat = node->intra_ag_latency_s; }
        else if (op->coll == COLL_SENDRECV || pairs) { cbw = node->intra_sr_bytes_per_s; clat = node->intra_sr_latency_s; }
        if (cbw > 0.0) { bw = cbw; latency = clat; }
    }
    /* an op may stand for several collectives (ZeRO-3's one per layer, the gradients' one per
     * bucket): each pays its latency, and across nodes each reaches the bandwidth of its size */
    if (op->crosses_node) bw = network_bus_bytes_per_s(bw, bytes, node->inter_bus_efficiency, node->inter_half_bytes);
    /* a ring across nodes crosses the network only between nodes: the node's own hops keep their latency
     * (NCCL's tuning model; docs/model.md, "The network at scale") */
    if (op->crosses_node && (op->coll == COLL_ALLREDUCE || op->coll == COLL_REDUCE_SCATTER || op->coll == COLL_ALLGATHER)) {
        double span = (double)group_span(l, op->group), nodes = span / (double)l->gpus_per_node;
        latency = ring_step_latency_s(n, nodes, node->intra_latency_s, latency);
    }
    switch (op->coll) {
    case COLL_ALLREDUCE: return pieces * ring_allreduce_s(n, bytes, bw, latency);
    case COLL_REDUCE_SCATTER: return pieces * ring_reduce_scatter_s(n, bytes, bw, latency);
    case COLL_ALLGATHER: return pieces * ring_allgather_s(n, bytes, bw, latency);
    case COLL_SENDRECV: return pieces * sendrecv_s(bytes, bw, latency);
    case COLL_ALLTOALL:
        if (op->crosses_node) {
            /* the EP ranks of one node talk over its own link, the rest through the NICs */
            double local = (double)l->gpus_per_node / (double)l->tp;
            double ibw = gpu->measured_intra_bytes_per_s > 0 ? gpu->measured_intra_bytes_per_s
                                                             : node->intra_bytes_per_s_per_dir;
            return pieces * alltoall_two_level_s(n, local, bytes, ibw, node->intra_latency_s, bw, latency,
                                                 op->internode_share > 0.0 ? op->internode_share : 1.0);
        }
        return pieces * alltoall_s(n, bytes, bw, latency);
    }
    return 0.0;
}

double op_cost(op_t *op, const hw_gpu *gpu, const hw_node *node, const layout_t *l)
{
    double membw = gpu->hbm_bytes_per_s * gpu->membound_efficiency;
    precision_t matrix = l->precision;
    /* with_power sets them for kernels, OP_COMM a collective's energy; bookkeeping entries keep none */
    op->clock_bound_s = 0.0;
    op->energy_j = 0.0;
    switch (op->kind) {
    case OP_GEMM: {
        double clock_bound = op->flops >= CLOCK_BOUND_GEMM_FLOPS ? 1.0 : 0.0;
        /* the GEMMs an fp8 run keeps in 16 bit: the output layer, the router (docs/model.md, "FP8 GEMMs") */
        if (matrix == PREC_FP8 && op->sixteen_bit) matrix = gpu->peak_flops[PREC_BF16] > 0 ? PREC_BF16 : PREC_FP16;
        const double e_flop = gemm_energy_j_per_flop(gpu->energy_gemm_j_per_flop, gpu->peak_flops[PREC_BF16],
                                                     gpu->peak_flops[matrix], matrix == PREC_FP8);
        /* calibrate times bf16 GEMMs; other precisions take the tile model, or the curve before it is fitted.
         * Once it is fitted, only a shape calibrate timed itself keeps its time: the lines through timed shapes
         * made held-out models' GEMMs worse, not better (docs/model.md, "GEMM time over M, N, K") */
        double measured = matrix == PREC_BF16 || matrix == PREC_FP16
                              ? measured_shape_s(gpu->gemm_time, gpu->gemm_times, (double)op->m, (double)op->n, (double)op->k, 0.0,
                                                 gpu->gemm_tile_flops > 0.0 ? -1 : 1)
                              : 0.0;
        if (measured > 0.0 && op->batch <= 1) return with_power(op, gpu, measured, clock_bound, e_flop);
        /* the forward's expert GEMMs after the routing sync: no faster than the host issues them, less what it had
         * issued while the GPU ran the ops before (op->host_lead_s), whichever model prices the GPU's time (where
         * the host sets it, the clock does not) */
        double issued = op_host_issue_s(op, gpu) - op->host_lead_s;
        const double launches = gemm_launches(op);
        double memory_s;
        double tiled = gemm_model_s(gpu, op, matrix, membw, &memory_s);
        if (tiled > 0.0 && issued > tiled) return with_power(op, gpu, issued, 0.0, e_flop);
        if (tiled > 0.0) {
            double fixed = gpu->gemm_fixed_s * launches;
            if (op->bytes / membw >= tiled - fixed) clock_bound = 0.0;
            return with_power(op, gpu, tiled, clock_bound * (tiled - memory_s) / tiled, e_flop);
        }
        /* a grouped GEMM (batch experts) runs at the efficiency of one expert's shape */
        double rate = gemm_flop_per_s(gpu, op->batch > 1 ? op->flops / (double)op->batch : op->flops, matrix);
        double cast_s = 0.0;
        if (matrix == PREC_FP8) {
            rate *= fp8_pass_factor(gpu, op);
            /* the 16-bit activations are quantized first, one memory-bound pass each (docs/model.md,
             * "FP8 GEMMs") */
            /* the activations' casts; the weights' are the step's fp8_weight_cast */
            double cast = fp8_cast_bytes((double)op->m, (double)op->k, op->pass == PASS_BWD, op->weight_gradient,
                                         op->norm_fed);
            if (op->batch > 1) cast *= (double)op->batch;   /* a grouped GEMM casts each expert's operands */
            if (cast > 0.0) cast_s = membound_s(gpu, cast);
        }
        if (op->flops / rate < op->bytes / membw) clock_bound = 0.0;
        double seconds = roofline_s(op->flops, rate, op->bytes, membw);
        if (issued > seconds + cast_s) return with_power(op, gpu, issued, 0.0, e_flop);
        return with_power(op, gpu, seconds + cast_s, seconds > 0.0 ? clock_bound * seconds / (seconds + cast_s) : 0.0,
                          e_flop);
    }
    case OP_ATTENTION:
        /* attention kernels stay in 16-bit when the GEMMs run in fp8 */
        if (matrix == PREC_FP8) matrix = gpu->peak_flops[PREC_BF16] > 0 ? PREC_BF16 : PREC_FP16;
        if (l->attention == ATTENTION_UNFUSED) {
            /* the time calibrate measured for the kernels of this shape (or its line over
             * the batch), else its kernels in turn, each bound by its own roofline; bytes
             * outside the split (dropout's mask) are one more pass over memory.  The
             * compute-bound kernels' share of the roofline time follows the clock. */
            double kflops[UNFUSED_ATTENTION_KERNELS_MAX], kbytes[UNFUSED_ATTENTION_KERNELS_MAX];
            double heads = (double)op->batch, s = (double)op->m, d = (double)op->k;
            int bwd = op->pass == PASS_BWD;
            int kernels = unfused_attention_kernels(s, d, element_bytes(l->precision), 0.0, bwd, kflops, kbytes);
            double seconds = 0.0, split_bytes = 0.0, compute_s = 0.0;
            for (int i = 0; i < kernels; i++) {
                double rate = gpu->peak_flops[matrix] * gemm_efficiency(gpu, heads * kflops[i], matrix);
                double t = roofline_s(heads * kflops[i], rate, heads * kbytes[i], membw);
                if (heads * kflops[i] / rate >= heads * kbytes[i] / membw) compute_s += t;
                seconds += t;
                split_bytes += heads * kbytes[i];
            }
            double clock_bound = seconds > 0.0 ? compute_s / seconds : 0.0;
            /* calibrate timed the 16-bit kernels */
            double timed = matrix == PREC_BF16 || matrix == PREC_FP16
                               ? measured_shape_s(gpu->unfused_attention_time[bwd], gpu->unfused_attention_times[bwd],
                                                  (double)op->batch, (double)op->m, (double)op->k, (double)op->kv_batch, 0)
                               : 0.0;
            if (timed <= 0.0 && (matrix == PREC_BF16 || matrix == PREC_FP16)) {
                /* a head configuration calibrate did not time (another count of heads, another GQA
                 * grouping, which barely moves these kernels: 2% on an H200 at head size 64) at a sequence
                 * it timed around: the FLOP rate of the timed one of the same head size nearest in batch x
                 * heads, as for the fused kernel (docs/model.md, "Attention kernel generations") */
                double rate = attention_table_rate(gpu->unfused_attention_time[bwd], gpu->unfused_attention_times[bwd],
                                                   heads, s, d, bwd, 0);
                if (rate > 0.0) timed = flash_attention_flops(1.0, heads, s, d, 1, bwd) / rate;
            }
            if (timed > 0.0) seconds = timed;
            double clock_bound_s = clock_bound * seconds;
            if (op->bytes > split_bytes) seconds += (op->bytes - split_bytes) / membw;
            return with_power(op, gpu, seconds, seconds > 0.0 ? clock_bound_s / seconds : 0.0,
                              gpu->energy_gemm_j_per_flop);
        }
        {
            /* fused (docs/model.md, "Attention kernel generations"): sextant-gpu's own kernel takes the time
             * calibrate measured for this shape (or its line over the batch), else the fraction of peak it
             * measured, forward (and its recomputation) or backward; the frameworks' kernels (flash) take
             * hwdb/priors.csv's fractions, and their first generation (flash1, flash1-triton) the same slower,
             * each by its own relative speed; else a GEMM's.  All of it follows the clock. */
            int bwd = op->pass == PASS_BWD;
            double speed = first_generation_speed(gpu, l->attention);
            /* calibrate timed the kernel in 16 bit: an fp32 or tf32 run takes the efficiency below */
            /* a context-parallel ring runs the rank's attention as cp kernels, one a ring step, each over blocks of
             * the local length (docs/model.md, "Context parallelism": cp_ring_attention_length); gathered K, V run
             * one kernel of the rank's queries (m) against the whole sequence (n) */
            const double cp = (double)layout_cp(l);
            const int ring = cp > 1.0 && l->cp_comm == CP_COMM_RING;
            const double length = ring ? cp_ring_attention_length((double)op->n, cp) : (double)op->n;
            if (l->attention == ATTENTION_SEXTANT && (matrix == PREC_BF16 || matrix == PREC_FP16)) {
                /* calibrate's kernel at that length: cp calls of it, or the rank's m of its n queries */
                double calls = ring ? cp : (double)op->m / (double)op->n;
                double timed = calls * measured_shape_s(gpu->attention_time[bwd], gpu->attention_times[bwd],
                                                        (double)op->batch, length, (double)op->k, (double)op->kv_batch, 0);
                if (timed > 0.0) return with_power(op, gpu, timed, 1.0, gpu->energy_attention_j_per_flop);
                double rate = attention_table_rate(gpu->attention_time[bwd], gpu->attention_times[bwd], (double)op->batch,
                                                   length, (double)op->k, bwd, 1);
                if (rate > 0.0) return with_power(op, gpu, op->flops / rate, 1.0, gpu->energy_attention_j_per_flop);
            }
            double own = bwd ? gpu->attention_bwd_efficiency : gpu->attention_fwd_efficiency;
            double frameworks = bwd ? gpu->flash_bwd_efficiency : gpu->flash_fwd_efficiency;
            double measured = l->attention == ATTENTION_SEXTANT && own > 0.0 ? own : frameworks;
            /* the frameworks' kernels' efficiency rises with the sequence, from the prior's at 2048 tokens */
            if (!(l->attention == ATTENTION_SEXTANT && own > 0.0)) measured *= flash_sequence_factor(length);
            double efficiency = speed * (measured > 0.0 ? measured : gemm_efficiency(gpu, op->flops, matrix));
            return with_power(op, gpu, roofline_s(op->flops, gpu->peak_flops[matrix] * efficiency, op->bytes, membw), 1.0,
                              gpu->energy_attention_j_per_flop);
        }
    case OP_MEMBOUND:
        if (op->bytes <= 0.0) return 0.0;   /* a bookkeeping entry, no kernel */
        /* the MoE counts' copy to the host at EP 1: the host's wait follows it, as after the EP all-gather */
        return with_power(op, gpu, op->optimizer ? optimizer_s(gpu, op->bytes) : membound_s(gpu, op->bytes), 0.0, 0.0) +
               (op->host_sync ? host_sync_s(gpu->launch_overhead_s) : 0.0);
    case OP_COMM: {
        /* the power model charges a collective what the GPU draws above the static power while it runs
         * (docs/model.md, "Clock under the power cap"); the host's wait draws the static power only */
        double t = collective_s(op, gpu, node, l);
        if (power_model_on(gpu)) op->energy_j = collective_energy_j(t, gpu->collective_power_w, gpu->power_static_w);
        return t + (op->host_sync ? host_sync_s(gpu->launch_overhead_s) : 0.0);
    }
    }
    return 0.0;
}

double first_generation_speed(const hw_gpu *gpu, attention_impl_t a)
{
    double r = a == ATTENTION_FLASH1          ? gpu->flash1_relative_speed
               : a == ATTENTION_FLASH1_TRITON ? gpu->flash1_triton_relative_speed
                                              : 0.0;
    return r > 0.0 ? r : 1.0;
}
