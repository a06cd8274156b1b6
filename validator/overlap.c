/* calibrate --comm's overlap measurement on the GPUs (overlap.h).
 *
 * Every rank runs the same sequence.  For each GEMM shape x collective kind x
 * size, two measurements, each a series of timed windows in pairs, alone then
 * beside, so that a drift of the clock (power, heat) falls on both halves:
 *   A. the victim is the GEMM, on the compute stream (cuBLAS), timed with two
 *      CUDA events around `count` calls; beside it, the collective loops on the
 *      communication stream;
 *   B. the victim is the collective, on the communication stream; beside it,
 *      the GEMM loops on the compute stream.
 * The other stream (the aggressor) runs first: a lead-in of LEAD_OPS calls,
 * after which the victim's stream may start (cudaStreamWaitEvent), then
 * enough calls to cover the victim's window `margin` times over.  An event
 * after its last call tells whether it still ran when the window closed; a
 * window it did not cover is counted, and a measurement with any such window
 * (on any rank) is repeated with twice the margin.  The victim's window also
 * starts after one untimed call of its own: a collective's first call absorbs
 * the ranks' skew.  Times are per call, medians of the repeats; the ranks'
 * medians are then gathered (NCCL), so every rank holds the same results and
 * takes the same decisions: the collectives must match call for call.  Why
 * compute slows: NCCL's kernels take SMs from the GEMM and its copies share
 * HBM bandwidth (docs/model.md, "Overlap is not free").  The step's other
 * compute (overlap.h: the experts' GEMMs on their streams, the fused
 * attention, a memory-bound add) is measured the same way, as victims in the
 * GEMM's place: how much each slows depends on how much of the SMs and HBM it
 * uses. */
#include "overlap.h"

#include <cublas_v2.h>
#include <cuda_runtime_api.h>
#include <math.h>
#include <nccl.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include "kernels.h"
#include "launch.h"
#include "planner.h"

#define WINDOW_S 10e-3          /* a victim's timed window: long beside launch gaps, short beside the queue */
#define MIN_VICTIM_OPS 8
#define MAX_VICTIM_OPS 1000
#define LEAD_OPS 2              /* aggressor calls before the window may open */
#define ATTEMPTS 3              /* margins 2, 4, 8 */
#define FILL_BYTES ((size_t)16 << 20)
#define BLAS_WORKSPACE_BYTES ((size_t)32 << 20)

typedef struct {
    launch_ctx *ctx;
    const overlap_options *o;
    cudaStream_t compute, comm;
    cublasHandle_t blas;
    void *a, *b, *c, *workspace, *send, *recv;
    double *stat;                 /* device: one rank's figures, then every rank's */
    cudaEvent_t lead, start, stop, end;
    /* the classes' victims (o->classes): the experts' streams, handles and operands, attention's tensors,
     * the add's vectors */
    cudaStream_t lane[OVERLAP_EXPERT_STREAMS];
    cublasHandle_t lane_blas[OVERLAP_EXPERT_STREAMS];
    cudaEvent_t fork, join[OVERLAP_EXPERT_STREAMS];
    void *experts, *attention, *membound, *attention_workspace;
    size_t attention_workspace_bytes;
} rig;

/* One call of either stream: a GEMM shape, a class's victim, or a collective kind at a size. */
typedef struct {
    int gemm;                     /* 1: a compute victim, shape or (victim >= 0) a class; 0: kind and bytes */
    const overlap_shape *shape;
    int kind;
    size_t bytes;
    int victim;                   /* VICTIM_EXPERTS..VICTIM_MEMBOUND, or -1: the GEMM shape */
} op;

/* A failed call ends the overlap measurement, not the process: one line, then -1 to the caller
 * (gpu_check.h says why not CK). */
#define CK_OR_RETURN(call, what)                                                                         \
    do {                                                                                                 \
        cudaError_t e_ = (call);                                                                         \
        if (e_ != cudaSuccess) {                                                                         \
            fprintf(stderr, "sextant-gpu: rank %d: overlap: %s: %s\n", r->ctx->rank, what, cudaGetErrorString(e_)); \
            return -1;                                                                                   \
        }                                                                                                \
    } while (0)

/* ---- the rig ------------------------------------------------------------------ */

static uint16_t bf16_of(float f)
{
    uint32_t u;
    memcpy(&u, &f, sizeof u);
    return (uint16_t)((u + 0x7fffu + ((u >> 16) & 1u)) >> 16);
}

/* Uniform values in [-1, 1), not zeros: under the power cap a GEMM's clock
 * follows the switching its operands cause (bench.c, scratch buffers). */
static int fill_random(rig *r, void *dst, size_t bytes, uint16_t *host, unsigned seed)
{
    for (size_t i = 0; i < FILL_BYTES / 2; i++) {
        seed = seed * 1664525u + 1013904223u;
        host[i] = bf16_of((float)(seed >> 8) / 8388608.0f - 1.0f);
    }
    for (size_t off = 0; off < bytes; off += FILL_BYTES) {
        size_t len = bytes - off < FILL_BYTES ? bytes - off : FILL_BYTES;
        CK_OR_RETURN(cudaMemcpy((char *)dst + off, host, len, cudaMemcpyHostToDevice), "cudaMemcpy(operands)");
    }
    return 0;
}

static int enqueue_class(rig *r, int victim);

/* The classes' victims: their streams, handles and operands, uniform values as the GEMMs' (attention's
 * softmax stays finite on them: |q . k| <= 128 at 128 dimensions, scaled by 1/sqrt(128)). */
static int classes_open(rig *r, uint16_t *host, unsigned seed)
{
    const overlap_victim *e = &r->o->victim[VICTIM_EXPERTS], *at = &r->o->victim[VICTIM_ATTENTION];
    const overlap_victim *m = &r->o->victim[VICTIM_MEMBOUND];
    size_t experts = 2 * (size_t)e->count * (size_t)(e->m * e->k + e->k * e->n + e->m * e->n);
    size_t tensor = 2 * (size_t)(at->m * at->n * at->k), lse = 4 * (size_t)(at->m * at->n);
    CK_OR_RETURN(cudaEventCreateWithFlags(&r->fork, cudaEventDisableTiming), "cudaEventCreateWithFlags");
    for (int i = 0; i < OVERLAP_EXPERT_STREAMS; i++) {
        CK_OR_RETURN(cudaStreamCreateWithFlags(&r->lane[i], cudaStreamNonBlocking), "cudaStreamCreateWithFlags");
        CK_OR_RETURN(cudaEventCreateWithFlags(&r->join[i], cudaEventDisableTiming), "cudaEventCreateWithFlags");
        if (cublasCreate(&r->lane_blas[i]) != CUBLAS_STATUS_SUCCESS ||
            cublasSetStream(r->lane_blas[i], r->lane[i]) != CUBLAS_STATUS_SUCCESS) {
            fprintf(stderr, "sextant-gpu: rank %d: overlap: cuBLAS could not be set up for the experts' streams\n",
                    r->ctx->rank);
            return -1;
        }
    }
    r->attention_workspace_bytes = sx_flash_attention_backward_workspace_bytes(1, (int)at->m, (int)at->m, (int)at->n,
                                                                                (int)at->n, (int)at->k);
    CK_OR_RETURN(cudaMalloc(&r->experts, experts), "cudaMalloc(experts)");
    CK_OR_RETURN(cudaMalloc(&r->attention, 8 * tensor + lse), "cudaMalloc(attention)");
    CK_OR_RETURN(cudaMalloc(&r->attention_workspace, r->attention_workspace_bytes + 256), "cudaMalloc(attention workspace)");
    CK_OR_RETURN(cudaMalloc(&r->membound, 3 * 2 * (size_t)m->m), "cudaMalloc(add)");
    if (fill_random(r, r->experts, experts, host, seed) || fill_random(r, r->attention, 8 * tensor, host, seed + 1) ||
        fill_random(r, r->membound, 3 * 2 * (size_t)m->m, host, seed + 2))
        return -1;
    /* the backward's victim reads a forward's out and lse */
    return enqueue_class(r, VICTIM_ATTENTION);
}

static int rig_open(rig *r)
{
    size_t ab = 0, bb = 0, cb = 0, coll = 0;
    for (int g = 0; g < r->o->nshapes; g++) {
        const overlap_shape *s = &r->o->shape[g];
        size_t a = (size_t)(s->m * s->k) * 2, b = (size_t)(s->k * s->n) * 2, c = (size_t)(s->m * s->n) * 2;
        ab = a > ab ? a : ab;
        bb = b > bb ? b : bb;
        cb = c > cb ? c : cb;
    }
    for (int i = 0; i < r->o->nsizes; i++) coll = r->o->bytes[i] > coll ? r->o->bytes[i] : coll;
    CK_OR_RETURN(cudaStreamCreateWithFlags(&r->compute, cudaStreamNonBlocking), "cudaStreamCreateWithFlags");
    CK_OR_RETURN(cudaStreamCreateWithFlags(&r->comm, cudaStreamNonBlocking), "cudaStreamCreateWithFlags");
    cudaEvent_t *ev[4] = {&r->lead, &r->start, &r->stop, &r->end};
    for (int i = 0; i < 4; i++) CK_OR_RETURN(cudaEventCreate(ev[i]), "cudaEventCreate");
    CK_OR_RETURN(cudaMalloc(&r->a, ab), "cudaMalloc(A)");
    CK_OR_RETURN(cudaMalloc(&r->b, bb), "cudaMalloc(B)");
    CK_OR_RETURN(cudaMalloc(&r->c, cb), "cudaMalloc(C)");
    CK_OR_RETURN(cudaMalloc(&r->workspace, BLAS_WORKSPACE_BYTES), "cudaMalloc(cuBLAS workspace)");
    CK_OR_RETURN(cudaMalloc(&r->send, coll), "cudaMalloc(send buffer)");
    CK_OR_RETURN(cudaMalloc(&r->recv, coll), "cudaMalloc(receive buffer)");
    CK_OR_RETURN(cudaMalloc((void **)&r->stat, (size_t)(r->ctx->nranks + 1) * 8 * sizeof(double)), "cudaMalloc(statistics)");
    if (cublasCreate(&r->blas) != CUBLAS_STATUS_SUCCESS || cublasSetStream(r->blas, r->compute) != CUBLAS_STATUS_SUCCESS ||
        cublasSetWorkspace(r->blas, r->workspace, BLAS_WORKSPACE_BYTES) != CUBLAS_STATUS_SUCCESS) {
        fprintf(stderr, "sextant-gpu: rank %d: overlap: cuBLAS could not be set up\n", r->ctx->rank);
        return -1;
    }
    uint16_t *host = malloc(FILL_BYTES);
    if (!host) {
        fprintf(stderr, "sextant-gpu: rank %d: overlap: out of host memory\n", r->ctx->rank);
        return -1;
    }
    unsigned seed = 977u + 31u * (unsigned)r->ctx->rank;
    int rc = fill_random(r, r->a, ab, host, seed) || fill_random(r, r->b, bb, host, seed + 1) ||
             fill_random(r, r->send, coll, host, seed + 2);
    if (!rc && r->o->classes) rc = classes_open(r, host, seed + 3);
    free(host);
    return rc ? -1 : 0;
}

static void rig_close(rig *r)
{
    if (r->ctx->comm) {
        if (r->compute) cudaStreamSynchronize(r->compute);
        if (r->comm) cudaStreamSynchronize(r->comm);
    }
    if (r->blas) cublasDestroy(r->blas);
    for (int i = 0; i < OVERLAP_EXPERT_STREAMS; i++) {
        if (r->lane[i]) cudaStreamSynchronize(r->lane[i]);
        if (r->lane_blas[i]) cublasDestroy(r->lane_blas[i]);
        if (r->join[i]) cudaEventDestroy(r->join[i]);
        if (r->lane[i]) cudaStreamDestroy(r->lane[i]);
    }
    if (r->fork) cudaEventDestroy(r->fork);
    void *bufs[11] = {r->a, r->b, r->c, r->workspace, r->send, r->recv, r->stat,
                      r->experts, r->attention, r->attention_workspace, r->membound};
    for (int i = 0; i < 11; i++)
        if (bufs[i]) cudaFree(bufs[i]);
    cudaEvent_t ev[4] = {r->lead, r->start, r->stop, r->end};
    for (int i = 0; i < 4; i++)
        if (ev[i]) cudaEventDestroy(ev[i]);
    if (r->compute) cudaStreamDestroy(r->compute);
    if (r->comm) cudaStreamDestroy(r->comm);
}

/* ---- calls and windows -------------------------------------------------------- */

static cudaStream_t stream_of(const rig *r, const op *p)
{
    return p->gemm ? r->compute : r->comm;
}

/* One call of a class's victim on the compute stream (overlap.h): the experts' GEMMs forked over their
 * streams and joined back, as the trainer deals them; attention's forward then backward; the add. */
static int enqueue_class(rig *r, int victim)
{
    const overlap_victim *x = &r->o->victim[victim];
    cudaError_t err = cudaSuccess;
    if (victim == VICTIM_EXPERTS) {
        const float alpha = 1.0f, beta = 0.0f;
        size_t a_elems = (size_t)(x->m * x->k), b_elems = (size_t)(x->k * x->n), c_elems = (size_t)(x->m * x->n);
        CK_OR_RETURN(cudaEventRecord(r->fork, r->compute), "cudaEventRecord");
        for (int l = 0; l < OVERLAP_EXPERT_STREAMS; l++)
            CK_OR_RETURN(cudaStreamWaitEvent(r->lane[l], r->fork, 0), "cudaStreamWaitEvent");
        for (long long e = 0; e < x->count; e++) {
            uint16_t *base = (uint16_t *)r->experts + (size_t)e * (a_elems + b_elems + c_elems);
            cublasStatus_t st =
                cublasGemmEx(r->lane_blas[e % OVERLAP_EXPERT_STREAMS], CUBLAS_OP_N, CUBLAS_OP_N, (int)x->n, (int)x->m,
                             (int)x->k, &alpha, base + a_elems, CUDA_R_16BF, (int)x->n, base, CUDA_R_16BF, (int)x->k,
                             &beta, base + a_elems + b_elems, CUDA_R_16BF, (int)x->n, CUBLAS_COMPUTE_32F,
                             CUBLAS_GEMM_DEFAULT);
            if (st != CUBLAS_STATUS_SUCCESS) {
                fprintf(stderr, "sextant-gpu: rank %d: overlap: cublasGemmEx (expert %lld): status %d\n", r->ctx->rank, e,
                        (int)st);
                return -1;
            }
        }
        for (int l = 0; l < OVERLAP_EXPERT_STREAMS; l++) {
            CK_OR_RETURN(cudaEventRecord(r->join[l], r->lane[l]), "cudaEventRecord");
            CK_OR_RETURN(cudaStreamWaitEvent(r->compute, r->join[l], 0), "cudaStreamWaitEvent");
        }
        return 0;
    }
    if (victim == VICTIM_ATTENTION || victim == VICTIM_ATTENTION_BWD) {
        /* the backward reads the forward's out and lse: classes_open ran one forward */
        int T = (int)x->m, H = (int)x->n, D = (int)x->k;
        size_t tensor = (size_t)T * (size_t)H * (size_t)D;
        sx_bf16 *q = (sx_bf16 *)r->attention, *k = q + tensor, *v = k + tensor, *out = v + tensor, *dout = out + tensor;
        sx_bf16 *dq = dout + tensor, *dk = dq + tensor, *dv = dk + tensor;
        float *lse = (float *)(dv + tensor), scale = 1.0f / sqrtf((float)D);
        if (victim == VICTIM_ATTENTION)
            err = sx_flash_attention_forward(out, lse, q, k, v, 1, T, H, H, D, H * D, H * D, scale, r->compute);
        else
            err = sx_flash_attention_backward(dq, dk, dv, dout, out, lse, q, k, v, 1, T, H, H, D, H * D, H * D, scale,
                                              r->attention_workspace, r->attention_workspace_bytes, r->compute);
        CK_OR_RETURN(err, "the fused attention");
        return 0;
    }
    sx_bf16 *a = (sx_bf16 *)r->membound, *b = a + x->m, *out = b + x->m;
    CK_OR_RETURN(sx_residual_add(out, NULL, a, b, (size_t)x->m, r->compute), "sx_residual_add");
    return 0;
}

/* `count` calls of p on its stream.  A GEMM is row-major C[m,n] = A[m,k] B[k,n]
 * in bf16 with fp32 accumulation, as column-major C^T = B^T A^T; a
 * collective's bytes are the whole buffer, as calibrate --comm's size. */
static int enqueue(rig *r, const op *p, int count)
{
    const float alpha = 1.0f, beta = 0.0f;
    size_t n = (size_t)r->ctx->nranks, elems = p->bytes / 2;
    for (int i = 0; i < count; i++) {
        if (p->gemm && p->victim >= 0) {
            if (enqueue_class(r, p->victim)) return -1;
            continue;
        }
        if (p->gemm) {
            const overlap_shape *s = p->shape;
            cublasStatus_t st = cublasGemmEx(r->blas, CUBLAS_OP_N, CUBLAS_OP_N, (int)s->n, (int)s->m, (int)s->k, &alpha,
                                             r->b, CUDA_R_16BF, (int)s->n, r->a, CUDA_R_16BF, (int)s->k, &beta, r->c,
                                             CUDA_R_16BF, (int)s->n, CUBLAS_COMPUTE_32F, CUBLAS_GEMM_DEFAULT);
            if (st != CUBLAS_STATUS_SUCCESS) {
                fprintf(stderr, "sextant-gpu: rank %d: overlap: cublasGemmEx %lldx%lldx%lld: status %d\n", r->ctx->rank,
                        s->m, s->n, s->k, (int)st);
                return -1;
            }
            continue;
        }
        ncclResult_t res;
        if (p->kind == OVERLAP_AG) res = ncclAllGather(r->send, r->recv, elems / n, ncclBfloat16, r->ctx->comm, r->comm);
        else if (p->kind == OVERLAP_RS)
            res = ncclReduceScatter(r->send, r->recv, elems / n, ncclBfloat16, ncclSum, r->ctx->comm, r->comm);
        else res = ncclAllReduce(r->send, r->recv, elems, ncclBfloat16, ncclSum, r->ctx->comm, r->comm);
        if (launch_nccl_done(r->ctx, res, overlap_kind_names[p->kind])) return -1;
    }
    return 0;
}

/* One window: `count` calls of the victim between two events, after the
 * aggressor's lead-in when there is one (aggressor_count > 0).  *seconds per
 * call; *covered: whether the aggressor's last call ended after the window. */
static int window(rig *r, const op *victim, int count, const op *aggressor, int aggressor_count, double *seconds,
                  int *covered)
{
    cudaStream_t vs = stream_of(r, victim);
    *covered = 1;
    if (aggressor_count > 0) {
        cudaStream_t as = stream_of(r, aggressor);
        if (enqueue(r, aggressor, LEAD_OPS)) return -1;
        CK_OR_RETURN(cudaEventRecord(r->lead, as), "cudaEventRecord");
        /* every aggressor call is queued before the victim's: the window
         * cannot open on an idle aggressor stream */
        if (enqueue(r, aggressor, aggressor_count)) return -1;
        CK_OR_RETURN(cudaEventRecord(r->end, as), "cudaEventRecord");
        CK_OR_RETURN(cudaStreamWaitEvent(vs, r->lead, 0), "cudaStreamWaitEvent");
    }
    if (enqueue(r, victim, 1)) return -1;
    CK_OR_RETURN(cudaEventRecord(r->start, vs), "cudaEventRecord");
    if (enqueue(r, victim, count)) return -1;
    CK_OR_RETURN(cudaEventRecord(r->stop, vs), "cudaEventRecord");
    if (launch_event_wait(r->ctx, r->stop, "an overlap window")) return -1;
    float ms = 0, stop_ms = 0, end_ms = 0;
    CK_OR_RETURN(cudaEventElapsedTime(&ms, r->start, r->stop), "cudaEventElapsedTime");
    if (aggressor_count > 0) {
        if (launch_event_wait(r->ctx, r->end, "an overlap window's other stream")) return -1;
        /* from the lead-in's end, which both follow: never a negative span */
        CK_OR_RETURN(cudaEventElapsedTime(&stop_ms, r->lead, r->stop), "cudaEventElapsedTime");
        CK_OR_RETURN(cudaEventElapsedTime(&end_ms, r->lead, r->end), "cudaEventElapsedTime");
        *covered = end_ms >= stop_ms;
    }
    *seconds = ms * 1e-3 / count;
    return 0;
}

/* Every rank's `k` figures, gathered into all[rank * k + i] on every rank. */
static int gather(rig *r, const double *mine, int k, double *all)
{
    int n = r->ctx->nranks;
    CK_OR_RETURN(cudaMemcpy(r->stat, mine, (size_t)k * sizeof(double), cudaMemcpyHostToDevice), "cudaMemcpy(statistics)");
    if (launch_nccl_done(r->ctx, ncclAllGather(r->stat, r->stat + 8, (size_t)k, ncclFloat64, r->ctx->comm, r->comm),
                         "ncclAllGather(overlap statistics)"))
        return -1;
    CK_OR_RETURN(cudaEventRecord(r->stop, r->comm), "cudaEventRecord");
    if (launch_event_wait(r->ctx, r->stop, "the overlap statistics")) return -1;
    CK_OR_RETURN(cudaMemcpy(all, r->stat + 8, (size_t)(n * k) * sizeof(double), cudaMemcpyDeviceToHost), "cudaMemcpy(statistics)");
    return 0;
}

/* ---- measurements -------------------------------------------------------------- */

static int victim_count(double seconds)
{
    double c = ceil(WINDOW_S / seconds);
    return c < MIN_VICTIM_OPS ? MIN_VICTIM_OPS : c > MAX_VICTIM_OPS ? MAX_VICTIM_OPS : (int)c;
}

/* The victim alone then beside the aggressor, `repeats` pairs after one
 * untimed pair; medians per call into alone_beside[2], the windows the
 * aggressor did not cover into *uncovered. */
static int pairs(rig *r, const op *victim, double victim_s, const op *aggressor, double aggressor_s, double margin,
                 double alone_beside[2], int *uncovered)
{
    int count = victim_count(victim_s), reps = r->o->repeats;
    int aggressor_count = (int)ceil(margin * count * victim_s / aggressor_s) + 1;
    double *t = malloc(2 * (size_t)reps * sizeof *t);
    if (!t) {
        fprintf(stderr, "sextant-gpu: rank %d: overlap: out of host memory\n", r->ctx->rank);
        return -1;
    }
    *uncovered = 0;
    int rc = 0;
    for (int i = -1; i < reps && !rc; i++) {
        double alone, beside;
        int covered, ignored;
        rc = window(r, victim, count, NULL, 0, &alone, &ignored) ||
             window(r, victim, count, aggressor, aggressor_count, &beside, &covered);
        if (rc || i < 0) continue;
        t[i] = alone;
        t[reps + i] = beside;
        *uncovered += !covered;
    }
    if (!rc) {
        sort_ascending(t, (size_t)reps);
        sort_ascending(t + reps, (size_t)reps);
        alone_beside[0] = t[reps / 2];
        alone_beside[1] = t[reps + reps / 2];
    }
    free(t);
    return rc ? -1 : 0;
}

/* Measurement A and B of one cell, each retried with a wider margin while a
 * window went uncovered on any rank; the ranks' figures gathered into c.
 * `apart`: A and B stand alone (a class's cell), else the cell is measured
 * only with both. */
static int measure_cell(rig *r, const op *gemm, double gemm_s, const op *coll, double coll_s, int apart, overlap_cell *c)
{
    int n = r->ctx->nranks;
    double mine[4] = {0, 0, 0, 0}, all[4 * 64];
    int ok[2] = {1, 1};
    for (int which = 0; which < 2 && (ok[0] || apart); which++) {
        const op *victim = which ? coll : gemm, *aggressor = which ? gemm : coll;
        double vs = which ? coll_s : gemm_s, as = which ? gemm_s : coll_s, margin = 2.0;
        int attempt = 0;
        for (;; attempt++, margin *= 2) {
            int uncovered;
            if (pairs(r, victim, vs, aggressor, as, margin, &mine[2 * which], &uncovered)) return -1;
            double u = uncovered, us[64];
            if (gather(r, &u, 1, us)) return -1;
            double total = 0;
            for (int i = 0; i < n; i++) total += us[i];
            if (total == 0) break;
            if (attempt + 1 == ATTEMPTS) {
                ok[which] = 0;
                break;
            }
        }
    }
    if (!apart) ok[0] = ok[1] = ok[0] && ok[1];
    if (gather(r, mine, 4, all)) return -1;
    memset(c, 0, sizeof *c);
    c->measured = ok[0];
    c->coll_measured = ok[1];
    c->gemm_slowdown_min = c->coll_slowdown_min = INFINITY;
    c->gemm_slowdown_max = c->coll_slowdown_max = -INFINITY;
    for (int i = 0; i < n; i++) {
        const double *t = &all[4 * i];
        if (ok[0]) {
            c->gemm_alone_s = fmax(c->gemm_alone_s, t[0]);
            c->gemm_beside_s = fmax(c->gemm_beside_s, t[1]);
            c->gemm_slowdown_min = fmin(c->gemm_slowdown_min, t[1] / t[0] - 1.0);
            c->gemm_slowdown_max = fmax(c->gemm_slowdown_max, t[1] / t[0] - 1.0);
        }
        if (ok[1]) {
            c->coll_alone_s = fmax(c->coll_alone_s, t[2]);
            c->coll_beside_s = fmax(c->coll_beside_s, t[3]);
            c->coll_slowdown_min = fmin(c->coll_slowdown_min, t[3] / t[2] - 1.0);
            c->coll_slowdown_max = fmax(c->coll_slowdown_max, t[3] / t[2] - 1.0);
        }
    }
    return 0;
}

/* A first time per call of each op, alone, after a warm-up (cuBLAS picks its
 * kernel, NCCL connects the size's algorithm): the slowest rank's, so that
 * every rank sizes its windows alike. */
static double slowest(const rig *r, const double *all)
{
    double t = 0;
    for (int i = 0; i < r->ctx->nranks; i++) t = fmax(t, all[i]);
    return t;
}

static int size_op(rig *r, const op *p, double *seconds)
{
    double t = 0, best = INFINITY, all[64];
    int covered;
    if (enqueue(r, p, 3)) return -1;
    for (int i = 0; i < 3; i++) {
        if (window(r, p, 4, NULL, 0, &t, &covered)) return -1;
        best = fmin(best, t);
    }
    /* the window's length from the ranks' slowest: every rank must make as many calls */
    if (gather(r, &best, 1, all)) return -1;
    if (window(r, p, victim_count(slowest(r, all)), NULL, 0, &t, &covered) || gather(r, &t, 1, all)) return -1;
    *seconds = slowest(r, all);
    return 0;
}

int overlap_measure(struct launch_ctx *ctx, const overlap_options *o, overlap_results *res)
{
    rig r = {0};
    r.ctx = ctx;
    r.o = o;
    memset(res, 0, sizeof *res);
    res->ranks = ctx->nranks;
    res->o = *o;
    if (ctx->nranks > 64) {
        fprintf(stderr, "sextant-gpu: rank %d: overlap: at most 64 ranks\n", ctx->rank);
        return -1;
    }
    int rc = rig_open(&r);
    op gemm[OVERLAP_MAX_SHAPES], coll[OVERLAP_KINDS][OVERLAP_MAX_SIZES];
    double gemm_s[OVERLAP_MAX_SHAPES], coll_s[OVERLAP_KINDS][OVERLAP_MAX_SIZES];
    for (int g = 0; g < o->nshapes && !rc; g++) {
        gemm[g] = (op){1, &o->shape[g], 0, 0, -1};
        rc = size_op(&r, &gemm[g], &gemm_s[g]);
    }
    for (int k = 0; k < OVERLAP_KINDS; k++)
        for (int b = 0; b < o->nsizes && !rc; b++) {
            coll[k][b] = (op){0, NULL, k, o->bytes[b], -1};
            rc = size_op(&r, &coll[k][b], &coll_s[k][b]);
        }
    for (int g = 0; g < o->nshapes && !rc; g++)
        for (int k = 0; k < OVERLAP_KINDS && !rc; k++)
            for (int b = 0; b < o->nsizes && !rc; b++)
                rc = measure_cell(&r, &gemm[g], gemm_s[g], &coll[k][b], coll_s[k][b], 0, &res->cell[g][k][b]);
    for (int v = 0; o->classes && v < OVERLAP_CLASSES && !rc; v++) {
        op victim = {1, NULL, 0, 0, v};
        double victim_s;
        rc = size_op(&r, &victim, &victim_s);
        for (int k = 0; k < OVERLAP_KINDS && !rc; k++)
            for (int b = 0; b < o->nsizes && !rc; b++)
                rc = measure_cell(&r, &victim, victim_s, &coll[k][b], coll_s[k][b], 1, &res->class_cell[v][k][b]);
    }
    /* a peer may be gone with our collectives in flight: abort before
     * freeing, or cudaFree would wait on kernels that never finish */
    if (rc && ctx->comm) {
        ncclCommAbort(ctx->comm);
        ctx->comm = NULL;
    }
    rig_close(&r);
    return rc ? -1 : 0;
}
