/* One MoE layer's expert GEMMs, as the validator runs them and as one grouped launch: is cuBLAS's grouped GEMM
 * (cublasGemmGroupedBatchedEx, one group per expert) what the planner's EXPERT_GEMM_GROUPED prices, one
 * launch whose tiles share the waves?  And what do the validator's four streams take on the GPU alone, the host's
 * issue left out: the planner prices each expert's launch in turn, and the held-out MoE steps measured OLMoE's 64
 * small experts' weight gradients 15-23% under that price (docs/validation/2026-11-27-moe-weighted-swiglu).
 *
 * Versions (E experts, rows drawn from a gamma of coefficient of variation cv summing to E x rows_mean, the same
 * draw for every version; bf16 operands, fp32 sums):
 *   1  cublasGemmEx per expert on one stream, in turn
 *   2  cublasGemmEx per expert on 4 streams, expert e on stream e % 4 (validator/moe.c with SEXTANT_MOE_GEMM=ex)
 *   3  cublasGemmGroupedBatchedEx: one call, one group of one GEMM per expert
 *   4  as validator/moe.c issues them (cuBLASLt with one algorithm per 16-row bucket, asked at the bucket's top),
 *      on one stream, captured in a CUDA graph: the GPU's time alone.  Until 2026-11-28 moe.c, and these versions,
 *      kept an algorithm per 128-row bucket asked at its middle and took cublasGemmEx from 64 GFLOP up: the data
 *      of docs/validation up to 2026-11-28-expert-tile-waste were measured so (--bucket-rows 128 does it again)
 *   5  the same on 2 streams, in a graph
 *   6  the same on 4 streams, in a graph: the step's GEMMs without the host's issue
 *   7  the same on 4 streams issued directly, as the step issues them
 *   8  cuBLASLt on 4 streams issued directly, the heuristic asked at each expert's exact shape: whether version 7's
 *      time is its bucket's algorithm or cuBLASLt's
 * Passes: fwd C[out, rows] = W^T X (A transposed), dgrad dX[in, rows] = W dY, wgrad dW[in, out] += X dY^T (K =
 * rows), the operands and transposes of moe.c's gemm_forward, gemm_dgrad and gemm_wgrad; wgrad0 the weight
 * gradient written (beta 0), to part the read of the gradient from the rest.
 *
 * Check (dev_check): every version against version 1 over every expert's output, relative L2 below 1e-2;
 * version 1's first expert, its first output column, against a float64 sum on the host.  Benchmark:
 * dev_time_us (median of 100, L2 evicted before each) per layer; one CSV line per version:
 *   model,pass,experts,rows_mean,cv,m,n,k,version,gpu_us,host_us,t0,t1,rows
 * host_us: the host's time to issue the layer's calls (version 3 sets up its pointer arrays on the GPU beforehand,
 * as a step would once per layer; versions 4-6 launch their graph); t0, t1: the wall clock (UTC, seconds) around
 * the timing, to find the SM clock nvidia-smi sampled meanwhile (the GPU holds its clock under the power cap,
 * which a Mixtral layer reaches); rows: each expert's rows, ';' between.
 *
 * Measured: docs/validation/2026-11-27-h100h200-gemm-sustained (versions 1-3),
 * docs/validation/2026-11-27-expert-rows-load (versions 4-7).
 *
 * build/dev/expert_grouped [model [--even] [--cv C] [--rows R] [--passes P,...] [--bucket-rows 16|128] [version ...]]   model: olmoe,
 * mixtral, test or all (default: all three); --even: every expert the mean rows (cv 0); --cv: the rows' coefficient
 * of variation, not the model's; --rows: R rows an expert on average, not the model's; --passes: those of fwd,
 * dgrad, wgrad, wgrad0 to run (default: all four); --bucket-rows 128: versions 4-7 as moe.c issued them until
 * 2026-11-28 (default 16, as it issues them now); versions: those to time (default: every one; version 1 runs as
 * the check's reference either way).  On stderr, one line per expert and pass: the algorithm (cuBLASLt's id, tile
 * and stages ids of cublasLt.h's enums, split-K count, reduction scheme, cluster shape id) of its bucket (version 7)
 * and of its exact shape (version 8). */
#include "dev_util.h"
#include <cublasLt.h>
#include <cublas_v2.h>
#include <algorithm>
#include <map>
#include <random>
#include <string.h>
#include <time.h>

static const int STREAMS = 4, VERSIONS = 8;
/* validator/moe.h's MOE_ALGO_BUCKET: the rows of one cuBLASLt algorithm; --bucket-rows 128 sets the old way (the
 * 128-row bucket asked at its middle, cublasGemmEx from EXACT_GEMM_FLOPS up) */
static int algo_bucket = 16;
static const int OLD_BUCKET = 128;
static const double EXACT_GEMM_FLOPS = 64e9;
static const size_t LT_WORKSPACE_BYTES = 32u << 20;
static const int CHECKED = 6;   /* experts whose outputs the check compares, */
static const size_t CHECKED_ELEMENTS = (size_t)1 << 22;   /* each over its first 4M elements (column-major: whole
                                                             columns, every row of the first ones) */

typedef struct {
    const char *name;
    int experts, hidden, up, ffn, rows_mean;   /* up: the fused gate and up projection's width, 2 x ffn */
    double cv;
} moe_shape;

/* the layer's shapes at one GPU, as the held-out runs and the test model ran them (rows: tokens x top_k / E) */
static const moe_shape SHAPES[] = {
    {"olmoe", 64, 2048, 2048, 1024, 512, 0.5},     /* OLMoE-1B-7B: 64 experts, top 8, seq 4096 */
    {"mixtral", 8, 4096, 28672, 14336, 1024, 0.72}, /* Mixtral 8x7B: 8 experts, top 2, seq 4096 */
    {"test", 8, 1024, 5632, 2816, 1024, 0.3},      /* the MoE test model (models/zoo.csv moe-test) */
};

typedef struct {
    int ta, tb, m, n, k, lda, ldb, ldc;
    float beta;
} gemm_shape;

/* one expert's GEMM of `rows` rows for a projection in -> out, in moe.c's operand order */
static gemm_shape pass_shape(const char *pass, int in, int out, int rows) {
    if (!strcmp(pass, "fwd")) return {1, 0, out, rows, in, in, in, out, 0.0f};
    if (!strcmp(pass, "dgrad")) return {0, 0, in, rows, out, in, out, in, 0.0f};
    if (!strcmp(pass, "wgrad0")) return {0, 1, in, out, rows, in, out, in, 0.0f};   /* written */
    return {0, 1, in, out, rows, in, out, in, 1.0f};   /* wgrad, accumulated */
}

/* What versions 4-7 issue an expert's GEMM with: moe.c's cuBLASLt path (one algorithm per bucket of rows), or
 * cublasGemmEx where the GEMM is large enough that moe.c takes the exact shape's algorithm. */
typedef struct {
    cublasLtHandle_t lt;
    cublasLtMatmulDesc_t desc[2][2];   /* [transa][transb] */
    cublasLtMatmulPreference_t pref;
    void *workspace[STREAMS];          /* one per stream, as moe.c's lt_workspace */
    std::map<std::vector<int>, cublasLtMatmulAlgo_t> algos;   /* by bucket; absent: the heuristic found none */
    std::map<std::vector<int>, cublasLtMatmulAlgo_t> exact;   /* version 8's: by the exact shape */
} lt_issue;

typedef struct {
    int E;
    std::vector<gemm_shape> g;
    std::vector<void *> A, B, C;
    void *pool;
    void **dA, **dB, **dC;   /* version 3's pointer arrays, on the GPU */
    std::vector<cublasOperation_t> ta, tb;
    std::vector<int> m, n, k, lda, ldb, ldc, one;
    std::vector<float> alpha, beta;
    /* versions 4-7: each expert's layouts (A, B, C) and algorithm (NULL: cublasGemmEx) */
    std::vector<cublasLtMatrixLayout_t> la, lb, lc;
    std::vector<const cublasLtMatmulAlgo_t *> algo;
    std::vector<const cublasLtMatmulAlgo_t *> algo_exact;   /* version 8's */
} layer;

static void gemm_ex(cublasHandle_t h, cudaStream_t s, const gemm_shape &g, const void *A, const void *B, void *C) {
    const float one = 1.0f;
    CB(cublasSetStream(h, s));
    CB(cublasGemmEx(h, g.ta ? CUBLAS_OP_T : CUBLAS_OP_N, g.tb ? CUBLAS_OP_T : CUBLAS_OP_N, g.m, g.n, g.k, &one, A,
                    CUDA_R_16BF, g.lda, B, CUDA_R_16BF, g.ldb, &g.beta, C, CUDA_R_16BF, g.ldc, CUBLAS_COMPUTE_32F,
                    CUBLAS_GEMM_DEFAULT));
}

static void lt_layouts(const gemm_shape &g, cublasLtMatrixLayout_t *a, cublasLtMatrixLayout_t *b,
                       cublasLtMatrixLayout_t *c) {
    CB(cublasLtMatrixLayoutCreate(a, CUDA_R_16BF, g.ta ? g.k : g.m, g.ta ? g.m : g.k, g.lda));
    CB(cublasLtMatrixLayoutCreate(b, CUDA_R_16BF, g.tb ? g.n : g.k, g.tb ? g.k : g.n, g.ldb));
    CB(cublasLtMatrixLayoutCreate(c, CUDA_R_16BF, g.m, g.n, g.ldc));
}

/* cuBLASLt's first heuristic choice for g, false where none is usable with the workspace */
static int heuristic(lt_issue *q, const gemm_shape &g, cublasLtMatmulAlgo_t *algo) {
    cublasLtMatrixLayout_t a, b, c;
    lt_layouts(g, &a, &b, &c);
    cublasLtMatmulHeuristicResult_t result;
    int got = 0;
    cublasStatus_t st = cublasLtMatmulAlgoGetHeuristic(q->lt, q->desc[g.ta][g.tb], a, b, c, c, q->pref, 1, &result, &got);
    CB(cublasLtMatrixLayoutDestroy(a));
    CB(cublasLtMatrixLayoutDestroy(b));
    CB(cublasLtMatrixLayoutDestroy(c));
    if (st != CUBLAS_STATUS_SUCCESS || got == 0 || result.workspaceSize > LT_WORKSPACE_BYTES) return 0;
    *algo = result.algo;
    return 1;
}

/* moe.c's algo_for: the algorithm of the 16-row bucket of g (each size d in bucket ceil(d / 16)), the heuristic
 * asked once at the bucket's top row count (lt_prewarm's), which is the GEMM's n, or its k for a weight gradient;
 * with --bucket-rows 128 the old way: floor(d / 128), asked at the bucket's middle, and NULL (cublasGemmEx) from
 * EXACT_GEMM_FLOPS up.  NULL where no algorithm is usable. */
static const cublasLtMatmulAlgo_t *bucket_algo(lt_issue *q, const gemm_shape &g) {
    const int old = algo_bucket == OLD_BUCKET, b = algo_bucket;
    if (old && 2.0 * g.m * g.n * (double)g.k >= EXACT_GEMM_FLOPS) return NULL;
    auto index = [&](int d) { return old ? d / b : (d + b - 1) / b; };
    const std::vector<int> key = {g.ta, g.tb, index(g.m), index(g.n), index(g.k), g.lda, g.ldb, g.ldc};
    auto at = q->algos.find(key);
    if (at != q->algos.end()) return &at->second;
    gemm_shape asked = g;
    int &rows = g.tb ? asked.k : asked.n;
    rows = old ? rows / b * b + b / 2 : index(rows) * b;
    cublasLtMatmulAlgo_t algo;
    if (!heuristic(q, asked, &algo)) return NULL;
    return &(q->algos[key] = algo);
}

/* version 8's: the heuristic's choice at g itself, whatever its size; NULL where none is usable */
static const cublasLtMatmulAlgo_t *exact_algo(lt_issue *q, const gemm_shape &g) {
    const std::vector<int> key = {g.ta, g.tb, g.m, g.n, g.k, g.lda, g.ldb, g.ldc};
    auto at = q->exact.find(key);
    if (at != q->exact.end()) return &at->second;
    cublasLtMatmulAlgo_t algo;
    if (!heuristic(q, g, &algo)) return NULL;
    return &(q->exact[key] = algo);
}

/* "id tile splitk reduction stages cluster" of an algorithm (cublasLt.h's enum values), or "cublasGemmEx" */
static void describe_algo(const cublasLtMatmulAlgo_t *algo, char *out, size_t size) {
    if (!algo) {
        snprintf(out, size, "cublasGemmEx");
        return;
    }
    int32_t id = 0, splitk = 0;
    uint32_t tile = 0, reduction = 0, stages = 0;
    uint16_t cluster = 0;
    size_t n;
    CB(cublasLtMatmulAlgoConfigGetAttribute(algo, CUBLASLT_ALGO_CONFIG_ID, &id, sizeof id, &n));
    CB(cublasLtMatmulAlgoConfigGetAttribute(algo, CUBLASLT_ALGO_CONFIG_TILE_ID, &tile, sizeof tile, &n));
    CB(cublasLtMatmulAlgoConfigGetAttribute(algo, CUBLASLT_ALGO_CONFIG_SPLITK_NUM, &splitk, sizeof splitk, &n));
    CB(cublasLtMatmulAlgoConfigGetAttribute(algo, CUBLASLT_ALGO_CONFIG_REDUCTION_SCHEME, &reduction, sizeof reduction, &n));
    CB(cublasLtMatmulAlgoConfigGetAttribute(algo, CUBLASLT_ALGO_CONFIG_STAGES_ID, &stages, sizeof stages, &n));
    CB(cublasLtMatmulAlgoConfigGetAttribute(algo, CUBLASLT_ALGO_CONFIG_CLUSTER_SHAPE_ID, &cluster, sizeof cluster, &n));
    snprintf(out, size, "algo %d tile %u splitk %d reduction %u stages %u cluster %u", id, tile, splitk, reduction,
             stages, (unsigned)cluster);
}

/* versions 4-8: expert e on stream lanes[e % streams], forked from and joined to `main`, with algorithms `algo`
 * (L->algo or L->algo_exact) */
static void run_lt(lt_issue *q, cublasHandle_t h, layer *L, const std::vector<const cublasLtMatmulAlgo_t *> &algo,
                   int streams, cudaStream_t main, cudaStream_t *lanes, cudaEvent_t fork, cudaEvent_t *joined) {
    const float one = 1.0f;
    CK(cudaEventRecord(fork, main));
    for (int i = 0; i < streams; i++) CK(cudaStreamWaitEvent(lanes[i], fork, 0));
    for (int e = 0; e < L->E; e++) {
        const gemm_shape &g = L->g[e];
        const int lane = e % streams;
        if (!algo[e]) {
            gemm_ex(h, lanes[lane], g, L->A[e], L->B[e], L->C[e]);
            continue;
        }
        CB(cublasLtMatmul(q->lt, q->desc[g.ta][g.tb], &one, L->A[e], L->la[e], L->B[e], L->lb[e], &g.beta, L->C[e],
                          L->lc[e], L->C[e], L->lc[e], algo[e], q->workspace[lane], LT_WORKSPACE_BYTES, lanes[lane]));
    }
    for (int i = 0; i < streams; i++) {
        CK(cudaEventRecord(joined[i], lanes[i]));
        CK(cudaStreamWaitEvent(main, joined[i], 0));
    }
}

/* what the versions run on: cuBLAS's handle, the lanes, and versions 4-6's graphs (made per pass) */
typedef struct {
    cublasHandle_t h;
    void *blas_workspace;
    lt_issue q;
    cudaStream_t capture, lanes[STREAMS];
    cudaEvent_t fork, joined[STREAMS];
    cudaGraphExec_t graph[VERSIONS + 1];
} rig;

static void run(int version, rig *r, layer *L) {
    cublasHandle_t h = r->h;
    if (version == 1) {
        for (int e = 0; e < L->E; e++) gemm_ex(h, 0, L->g[e], L->A[e], L->B[e], L->C[e]);
    } else if (version == 2) {
        CK(cudaEventRecord(r->fork, 0));
        for (int i = 0; i < STREAMS; i++) CK(cudaStreamWaitEvent(r->lanes[i], r->fork, 0));
        for (int e = 0; e < L->E; e++) gemm_ex(h, r->lanes[e % STREAMS], L->g[e], L->A[e], L->B[e], L->C[e]);
        for (int i = 0; i < STREAMS; i++) {
            CK(cudaEventRecord(r->joined[i], r->lanes[i]));
            CK(cudaStreamWaitEvent(0, r->joined[i], 0));
        }
    } else if (version == 3) {
        CB(cublasSetStream(h, 0));
        CB(cublasGemmGroupedBatchedEx(h, L->ta.data(), L->tb.data(), L->m.data(), L->n.data(), L->k.data(),
                                      L->alpha.data(), (const void *const *)L->dA, CUDA_R_16BF, L->lda.data(),
                                      (const void *const *)L->dB, CUDA_R_16BF, L->ldb.data(), L->beta.data(), L->dC,
                                      CUDA_R_16BF, L->ldc.data(), L->E, L->one.data(), CUBLAS_COMPUTE_32F));
    } else if (version == 7) {
        run_lt(&r->q, h, L, L->algo, STREAMS, 0, r->lanes, r->fork, r->joined);
    } else if (version == 8) {
        run_lt(&r->q, h, L, L->algo_exact, STREAMS, 0, r->lanes, r->fork, r->joined);
    } else {
        CK(cudaGraphLaunch(r->graph[version], 0));
    }
    CB(cublasSetStream(h, 0));
}

/* versions 4-6: the layer's launches on 1, 2 or 4 streams, captured once */
static int graph_streams(int version) { return version == 4 ? 1 : version == 5 ? 2 : STREAMS; }

static void capture(rig *r, layer *L, int version) {
    cudaGraph_t g;
    CK(cudaStreamBeginCapture(r->capture, cudaStreamCaptureModeThreadLocal));
    run_lt(&r->q, r->h, L, L->algo, graph_streams(version), r->capture, r->lanes, r->fork, r->joined);
    CK(cudaStreamEndCapture(r->capture, &g));
    CK(cudaGraphInstantiate(&r->graph[version], g, 0));
    CK(cudaGraphDestroy(g));
    CB(cublasSetStream(r->h, 0));
}

static double wall_s(void) {
    struct timespec t;
    clock_gettime(CLOCK_REALTIME, &t);
    return t.tv_sec + 1e-9 * t.tv_nsec;
}

/* a uniform draw in [-0.1, 0.1) from an integer hash of the index: the same operands on every run */
__global__ void fill_kernel(uint16_t *p, size_t n) {
    for (size_t i = blockIdx.x * (size_t)blockDim.x + threadIdx.x; i < n; i += (size_t)gridDim.x * blockDim.x) {
        unsigned x = (unsigned)(i * 2654435761u) ^ (unsigned)(i >> 32);
        x ^= x >> 16, x *= 0x7feb352du, x ^= x >> 15, x *= 0x846ca68bu, x ^= x >> 16;
        __nv_bfloat16 v = __float2bfloat16(0.2f * (x * (1.0f / 4294967296.0f)) - 0.1f);
        p[i] = *(uint16_t *)&v;
    }
}

/* rows per expert: a gamma draw of coefficient of variation cv, scaled to sum E x mean, at least 1 each; cv 0:
 * every expert the mean */
static std::vector<int> draw_rows(int E, int mean, double cv) {
    if (cv <= 0.0) return std::vector<int>(E, mean);
    std::mt19937 rng(7);
    std::gamma_distribution<double> gamma(1.0 / (cv * cv), 1.0);
    std::vector<double> x(E);
    double sum = 0.0;
    for (double &v : x) sum += v = gamma(rng);
    std::vector<int> rows(E);
    for (int e = 0; e < E; e++) rows[e] = std::max(1, (int)(x[e] / sum * E * mean + 0.5));
    return rows;
}

static void one_pass(const moe_shape *s, int rows_mean, double cv, const char *pass, int in, int out, rig *r, const int *run_version) {
    layer L;
    L.E = s->experts;
    std::vector<int> rows = draw_rows(s->experts, rows_mean, cv);
    size_t total = 0;
    std::vector<size_t> at_a, at_b, at_c;
    for (int e = 0; e < L.E; e++) {
        gemm_shape g = pass_shape(pass, in, out, rows[e]);
        L.g.push_back(g);
        size_t a = (size_t)(g.ta ? g.k : g.m) * (g.ta ? g.m : g.k), b = (size_t)g.k * g.n, c = (size_t)g.m * g.n;
        at_a.push_back(total), total += a;
        at_b.push_back(total), total += b;
        at_c.push_back(total), total += c;
    }
    /* the operands filled on the GPU (Mixtral's up projection is 2 GB of weights), kept in `backup` so every
     * version starts from the same C */
    L.pool = dmalloc(total * 2);
    void *backup = dmalloc(total * 2);
    fill_kernel<<<1024, 256>>>((uint16_t *)L.pool, total);
    CK(cudaGetLastError());
    CK(cudaMemcpy(backup, L.pool, total * 2, cudaMemcpyDeviceToDevice));
    for (int e = 0; e < L.E; e++) {
        L.A.push_back((uint16_t *)L.pool + at_a[e]);
        L.B.push_back((uint16_t *)L.pool + at_b[e]);
        L.C.push_back((uint16_t *)L.pool + at_c[e]);
        const gemm_shape &g = L.g[e];
        L.ta.push_back(g.ta ? CUBLAS_OP_T : CUBLAS_OP_N);
        L.tb.push_back(g.tb ? CUBLAS_OP_T : CUBLAS_OP_N);
        L.m.push_back(g.m), L.n.push_back(g.n), L.k.push_back(g.k);
        L.lda.push_back(g.lda), L.ldb.push_back(g.ldb), L.ldc.push_back(g.ldc), L.one.push_back(1);
        L.alpha.push_back(1.0f), L.beta.push_back(g.beta);
        cublasLtMatrixLayout_t a, b, c;
        lt_layouts(g, &a, &b, &c);
        L.la.push_back(a), L.lb.push_back(b), L.lc.push_back(c);
        L.algo.push_back(bucket_algo(&r->q, g));
        L.algo_exact.push_back(exact_algo(&r->q, g));
        char bucket_said[160], exact_said[160];
        describe_algo(L.algo.back(), bucket_said, sizeof bucket_said);
        describe_algo(L.algo_exact.back(), exact_said, sizeof exact_said);
        fprintf(stderr, "%s %s_%s expert %d: %dx%dx%d: bucket %s; exact %s\n", s->name, in == s->hidden ? "up" : "down",
                pass, e, g.m, g.n, g.k, bucket_said, exact_said);
    }
    L.dA = (void **)dmalloc(L.E * sizeof(void *));
    L.dB = (void **)dmalloc(L.E * sizeof(void *));
    L.dC = (void **)dmalloc(L.E * sizeof(void *));
    CK(cudaMemcpy(L.dA, L.A.data(), L.E * sizeof(void *), cudaMemcpyHostToDevice));
    CK(cudaMemcpy(L.dB, L.B.data(), L.E * sizeof(void *), cudaMemcpyHostToDevice));
    CK(cudaMemcpy(L.dC, L.C.data(), L.E * sizeof(void *), cudaMemcpyHostToDevice));
    for (int v = 4; v <= 6; v++)
        if (run_version[v]) capture(r, &L, v);

    /* check: one run of each version from the same C (wgrad accumulates into it); version 1 always, as the
     * reference; the first CHECKED experts' outputs, their first CHECKED_ELEMENTS each (a wrong operand or stream
     * shows in any expert; all 64 of OLMoE's weight gradients at 2048 rows are 2 GB of doubles on the host, one of
     * Mixtral's 1 GB) */
    vec want;
    for (int v = 1; v <= VERSIONS; v++) {
        if (v > 1 && !run_version[v]) continue;
        CK(cudaMemcpy(L.pool, backup, total * 2, cudaMemcpyDeviceToDevice));
        run(v, r, &L);
        CK(cudaDeviceSynchronize());
        vec got;
        for (int e = 0; e < L.E && e < CHECKED; e++) {
            vec c = dev_down(L.C[e], std::min((size_t)L.g[e].m * L.g[e].n, CHECKED_ELEMENTS), 2);
            got.insert(got.end(), c.begin(), c.end());
        }
        char what[96];
        if (v == 1) {
            /* expert 0's first column of C against float64: C[:, 0] = op(A) op(B)[:, 0] (+ C before) */
            const gemm_shape &g = L.g[0];
            const size_t na = (size_t)g.m * g.k, nb = (size_t)g.k * g.n;
            vec a = dev_down((uint16_t *)backup + at_a[0], na, 2), b = dev_down((uint16_t *)backup + at_b[0], nb, 2),
                c = dev_down((uint16_t *)backup + at_c[0], g.m, 2);
            vec ref(g.m), c0(got.begin(), got.begin() + g.m);
            for (int i = 0; i < g.m; i++) {
                double sum = g.beta ? c[i] : 0.0;
                for (int p = 0; p < g.k; p++)
                    sum += (g.ta ? a[(size_t)i * g.lda + p] : a[(size_t)p * g.lda + i]) * (g.tb ? b[(size_t)p * g.ldb] : b[p]);
                ref[i] = sum;
            }
            snprintf(what, sizeof what, "%s %s expert 0 column 0 vs float64", s->name, pass);
            dev_check(what, c0, ref, 1e-2);
            want = got;
        } else {
            snprintf(what, sizeof what, "%s %s version %d vs 1", s->name, pass, v);
            dev_check(what, got, want, 1e-2);
        }
    }
    CK(cudaFree(backup));

    const gemm_shape &g0 = L.g[0];
    const int wgrad = !strncmp(pass, "wgrad", 5);
    for (int v = 1; v <= VERSIONS; v++) {
        if (!run_version[v]) continue;
        const double wall0 = wall_s();
        double us = dev_time_us([&] { run(v, r, &L); });
        CK(cudaDeviceSynchronize());
        double t0 = host_now_s();
        for (int i = 0; i < 20; i++) run(v, r, &L);
        double host_us = (host_now_s() - t0) / 20 * 1e6;
        CK(cudaDeviceSynchronize());
        printf("%s,%s_%s,%d,%d,%.2f,%d,%d,%d,%d,%.1f,%.1f,%.3f,%.3f,", s->name, in == s->hidden ? "up" : "down", pass,
               L.E, rows_mean, cv, g0.m, wgrad ? g0.n : rows_mean, wgrad ? rows_mean : g0.k, v, us, host_us, wall0,
               wall_s());
        for (int e = 0; e < L.E; e++) printf("%s%d", e ? ";" : "", rows[e]);
        printf("\n");
        fflush(stdout);
    }
    for (int v = 4; v <= 6; v++)
        if (run_version[v]) CK(cudaGraphExecDestroy(r->graph[v]));
    for (int e = 0; e < L.E; e++) {
        CB(cublasLtMatrixLayoutDestroy(L.la[e]));
        CB(cublasLtMatrixLayoutDestroy(L.lb[e]));
        CB(cublasLtMatrixLayoutDestroy(L.lc[e]));
    }
    CK(cudaFree(L.pool));
    CK(cudaFree(L.dA));
    CK(cudaFree(L.dB));
    CK(cudaFree(L.dC));
}

static void rig_open(rig *r) {
    CB(cublasCreate(&r->h));
    r->blas_workspace = dmalloc(LT_WORKSPACE_BYTES);   /* the step's handle has one (CUBLAS_WORKSPACE_BYTES) */
    CB(cublasSetWorkspace(r->h, r->blas_workspace, LT_WORKSPACE_BYTES));
    lt_issue *q = &r->q;
    CB(cublasLtCreate(&q->lt));
    for (int ta = 0; ta < 2; ta++)
        for (int tb = 0; tb < 2; tb++) {
            cublasOperation_t opa = ta ? CUBLAS_OP_T : CUBLAS_OP_N, opb = tb ? CUBLAS_OP_T : CUBLAS_OP_N;
            CB(cublasLtMatmulDescCreate(&q->desc[ta][tb], CUBLAS_COMPUTE_32F, CUDA_R_32F));
            CB(cublasLtMatmulDescSetAttribute(q->desc[ta][tb], CUBLASLT_MATMUL_DESC_TRANSA, &opa, sizeof opa));
            CB(cublasLtMatmulDescSetAttribute(q->desc[ta][tb], CUBLASLT_MATMUL_DESC_TRANSB, &opb, sizeof opb));
        }
    size_t ws = LT_WORKSPACE_BYTES;
    CB(cublasLtMatmulPreferenceCreate(&q->pref));
    CB(cublasLtMatmulPreferenceSetAttribute(q->pref, CUBLASLT_MATMUL_PREF_MAX_WORKSPACE_BYTES, &ws, sizeof ws));
    CK(cudaStreamCreateWithFlags(&r->capture, cudaStreamNonBlocking));
    for (int i = 0; i < STREAMS; i++) {
        q->workspace[i] = dmalloc(LT_WORKSPACE_BYTES);
        CK(cudaStreamCreateWithFlags(&r->lanes[i], cudaStreamNonBlocking));
        CK(cudaEventCreateWithFlags(&r->joined[i], cudaEventDisableTiming));
    }
    CK(cudaEventCreateWithFlags(&r->fork, cudaEventDisableTiming));
}

static void rig_close(rig *r) {
    lt_issue *q = &r->q;
    for (int i = 0; i < STREAMS; i++) {
        CK(cudaFree(q->workspace[i]));
        CK(cudaStreamDestroy(r->lanes[i]));
        CK(cudaEventDestroy(r->joined[i]));
    }
    CK(cudaStreamDestroy(r->capture));
    CK(cudaEventDestroy(r->fork));
    for (int ta = 0; ta < 2; ta++)
        for (int tb = 0; tb < 2; tb++) CB(cublasLtMatmulDescDestroy(q->desc[ta][tb]));
    CB(cublasLtMatmulPreferenceDestroy(q->pref));
    CB(cublasLtDestroy(q->lt));
    CB(cublasDestroy(r->h));
    CK(cudaFree(r->blas_workspace));
}

/* whether `name` is one of the comma-separated `list` */
static int pass_listed(const char *list, const char *name) {
    const size_t n = strlen(name);
    for (const char *at = list; at; at = strchr(at, ',') ? strchr(at, ',') + 1 : NULL)
        if (!strncmp(at, name, n) && (at[n] == ',' || at[n] == '\0')) return 1;
    return 0;
}

int main(int argc, char **argv) {
    const char *only = argc > 1 && strcmp(argv[1], "all") ? argv[1] : NULL;
    int known = !only, even = 0, rows_mean = 0, run_version[VERSIONS + 1] = {0}, chosen = 0;
    double cv_asked = -1.0;
    const char *passes_asked = "fwd,dgrad,wgrad,wgrad0";
    for (const moe_shape &s : SHAPES) known |= only && !strcmp(only, s.name);
    for (int i = 2; i < argc && known; i++) {
        char *end;
        long v = strtol(argv[i], &end, 10);
        if (!strcmp(argv[i], "--even")) even = 1;
        else if (!strcmp(argv[i], "--rows") && i + 1 < argc && (rows_mean = atoi(argv[i + 1])) > 0) i++;
        else if (!strcmp(argv[i], "--cv") && i + 1 < argc && (cv_asked = atof(argv[i + 1])) >= 0.0) i++;
        else if (!strcmp(argv[i], "--passes") && i + 1 < argc) passes_asked = argv[++i];
        else if (!strcmp(argv[i], "--bucket-rows") && i + 1 < argc &&
                 ((algo_bucket = atoi(argv[i + 1])) == OLD_BUCKET || algo_bucket == 16))
            i++;
        else if (!*end && v >= 1 && v <= VERSIONS) run_version[v] = chosen = 1;
        else known = 0;
    }
    const char *passes[4] = {"fwd", "dgrad", "wgrad", "wgrad0"};
    int passes_named = 0;   /* every name in --passes must be a pass: a misspelled one would time nothing */
    for (const char *p : passes) passes_named += pass_listed(passes_asked, p);
    if (passes_named != 1 + (int)std::count(passes_asked, passes_asked + strlen(passes_asked), ',')) known = 0;
    if (!known) {
        fprintf(stderr, "expert_grouped [olmoe|mixtral|test|all [--even] [--cv C] [--rows R] [--passes P,...] "
                        "[--bucket-rows 16|128] [version 1-%d ...]]\n",
                VERSIONS);
        return 2;
    }
    for (int v = 1; v <= VERSIONS; v++) run_version[v] |= !chosen;
    rig r;
    rig_open(&r);
    printf("model,pass,experts,rows_mean,cv,m,n,k,version,gpu_us,host_us,t0,t1,rows\n");
    for (const moe_shape &s : SHAPES) {
        if (only && strcmp(only, s.name)) continue;
        const double cv = even ? 0.0 : cv_asked >= 0.0 ? cv_asked : s.cv;
        for (int p = 0; p < 4; p++) {
            if (!pass_listed(passes_asked, passes[p])) continue;
            const int rows = rows_mean > 0 ? rows_mean : s.rows_mean;
            one_pass(&s, rows, cv, passes[p], s.hidden, s.up, &r, run_version);   /* up: hidden -> 2 x ffn */
            one_pass(&s, rows, cv, passes[p], s.ffn, s.hidden, &r, run_version);  /* down: ffn -> hidden */
        }
    }
    rig_close(&r);
    return g_dev_failed;
}
