/* The GPU time of an expert GEMM whose row count changes from call to call: the question behind the MoE
 * steps' expert GEMMs, which run 17-40% longer in the step than the GEMM model gives their rows
 * (docs/validation/2026-11-26-h100x2-ep-messages), while lt_issue_cost measured the same shape 20% slower
 * at changing rows than at a fixed count (archive/2026-11-26-h200x2-host-ahead).  Is it the rows that are
 * not a multiple of the tile, or the algorithm moe.c picks for a bucket of 128 rows from the first shape
 * it meets there?
 *
 * Versions (rows drawn uniformly within +-spread of the mean at every call; cuBLASLt, bf16, fp32 sums):
 *   1  the mean rows every call, the heuristic's algorithm for that shape
 *   2  changing rows, one algorithm per bucket of 128 from the first shape met there (validator/moe.c)
 *   3  changing rows, one algorithm per bucket from the heuristic at the bucket's top (its rows rounded
 *      up to 128), run at the exact rows
 *   4  changing rows, the heuristic's algorithm for every exact shape (asked before the timing: the best
 *      the heuristic offers, whatever it costs the host)
 *   5  changing rows rounded up to 128 (the padded rows computed too), the heuristic's algorithm for
 *      that shape (one per bucket)
 *   6  as 1, each call with the next of 8 experts' weights (92 MB for the up projection: cold in L2, as
 *      in the step, where other ops run between an expert's calls)
 *   7  as 2, with the 8 experts' weights in turn
 * Shapes: the MoE test model's expert GEMMs, forward: up C[5632, rows] = W[1024, 5632]^T X[1024, rows] and
 * down C[1024, rows] = W[2816, 1024]^T X[2816, rows] (column-major, A transposed, as moe.c's forward); with
 * "dgrad" as the third argument their data gradients' sizes instead, up_dgrad C[1024, rows] over K = 5632 (64
 * tiles at 1024 rows: under half the SMs, where the planner's tile model splits K) and down_dgrad C[2816, rows]
 * over K = 1024 (A still transposed: the sizes, tiles and K of moe.c's gemm_dgrad, not its operand order).
 *
 * Check (dev_check): every version's GEMM of the first draw's rows against version 4's, relative L2 below 1e-2 on the
 * real columns.  Benchmark: per version, the GPU's microseconds per GEMM over CALLS GEMMs queued behind a
 * spin (so the host's issue is off the GPU's path), the same draws for every version; one CSV line each:
 *   shape,spread,version,rows_mean,gpu_us,refused
 * and the host's time per heuristic query (refused: calls whose bucket algorithm cuBLASLt would not run, done
 * with the exact shape's instead).
 *
 * build/dev/expert_rows [rows_mean [spread [dgrad]]]   (defaults 1024 and 0.15; both shapes, both spreads 0.15
 * and 0.5 when no spread is given) */
#include <map>
#include "lt_rig.h"

static const int CALLS = 400;
static const int BUCKET = 128;

__global__ void spin_kernel(long long cycles) {
    const long long c0 = clock64();
    while (clock64() - c0 < cycles) {
    }
}

struct rig {
    lt_rig lt;
    int m, k;
};

static void shape(rig *g, int n) { lt_rig_shape(&g->lt, g->m, n, g->k); }

static double heuristic_s = 0.0;
static long heuristic_calls = 0;

static cublasLtMatmulAlgo_t heuristic(rig *g, int n) {
    double t0 = host_now_s();
    shape(g, n);
    cublasLtMatmulHeuristicResult_t r;
    int got = 0;
    CB(cublasLtMatmulAlgoGetHeuristic(g->lt.lt, g->lt.desc, g->lt.a, g->lt.b, g->lt.c, g->lt.c, g->lt.pref, 1, &r,
                                      &got));
    if (!got) { fprintf(stderr, "no cuBLASLt algorithm for %dx%dx%d\n", g->m, n, g->k); exit(1); }
    heuristic_s += host_now_s() - t0;
    heuristic_calls++;
    return r.algo;
}

/* 0 when cuBLASLt ran it with algo, 1 when it refused (nothing launched) */
static int run(rig *g, int n, const cublasLtMatmulAlgo_t *algo, const void *A, const void *B, void *C,
               cudaStream_t st) {
    const float one = 1.0f, zero = 0.0f;
    shape(g, n);
    return cublasLtMatmul(g->lt.lt, g->lt.desc, &one, A, g->lt.a, B, g->lt.b, &zero, C, g->lt.c, C, g->lt.c, algo,
                          g->lt.ws, g->lt.ws_bytes, st) != CUBLAS_STATUS_SUCCESS;
}

static void one_shape(const char *name, int m, int k, int mean, double spread, cublasLtHandle_t lt) {
    rig g;
    g.m = m;
    g.k = k;
    lt_rig_open(&g.lt, lt, m, mean, k);
    const int most = ((int)(mean * (1.0 + spread)) / BUCKET + 1) * BUCKET;
    const int EXPERTS = 8;
    vec ha = dev_randn((size_t)m * k * EXPERTS, 0, 0.02), hb = dev_randn((size_t)k * most, 0, 1);
    void *A = dev_up(ha, 2), *B = dev_up(hb, 2), *C = dmalloc((size_t)m * most * 2), *R = dmalloc((size_t)m * most * 2);
    cudaStream_t st;
    CK(cudaStreamCreate(&st));
    cudaEvent_t e0, e1;
    CK(cudaEventCreate(&e0));
    CK(cudaEventCreate(&e1));
    int khz = 0;
    CK(cudaDeviceGetAttribute(&khz, cudaDevAttrClockRate, 0));

    std::vector<int> rows(CALLS);
    srand(11);
    for (int &r : rows) r = (int)(mean * (1.0 - spread + 2.0 * spread * (rand() / (double)RAND_MAX)));
    /* every algorithm asked before any timing */
    cublasLtMatmulAlgo_t fixed = heuristic(&g, mean);
    std::map<int, cublasLtMatmulAlgo_t> exact, first, top;
    for (int r : rows) {
        if (!exact.count(r)) exact[r] = heuristic(&g, r);
        int bucket = r / BUCKET;
        if (!first.count(bucket)) first[bucket] = exact[r];
        if (!top.count(bucket)) top[bucket] = heuristic(&g, (bucket + 1) * BUCKET);
        int up = (r + BUCKET - 1) / BUCKET * BUCKET;
        if (!exact.count(up)) exact[up] = heuristic(&g, up);
    }

    /* check: the first draw's rows through every version's algorithm against the exact shape's */
    int n0 = rows[0];
    if (run(&g, n0, &exact[n0], A, B, R, st)) { fprintf(stderr, "exact algorithm refused\n"); exit(1); }
    const int up0 = (n0 + BUCKET - 1) / BUCKET * BUCKET;
    const cublasLtMatmulAlgo_t *algos[3] = {&first[n0 / BUCKET], &top[n0 / BUCKET], &exact[up0]};
    for (int v = 0; v < 3; v++) {
        if (run(&g, v == 2 ? up0 : n0, algos[v], A, B, C, st)) continue;
        CK(cudaStreamSynchronize(st));
        char what[64];
        snprintf(what, sizeof what, "%s, %d rows, version %d vs 4", name, n0, v + 2);
        dev_check(what, dev_down(C, (size_t)m * n0, 2), dev_down(R, (size_t)m * n0, 2), 1e-2);
    }

    for (int v = 1; v <= 7; v++) {
        int refused = 0;
        float best = 1e30f;
        for (int pass = 0; pass < 3; pass++) {
            CK(cudaStreamSynchronize(st));
            spin_kernel<<<1, 1, 0, st>>>((long long)khz * 20);   /* 20 ms: the host queues every call */
            CK(cudaGetLastError());
            CK(cudaEventRecord(e0, st));
            for (int i = 0; i < CALLS; i++) {
                int r = v == 1 || v == 6 ? mean : v == 5 ? (rows[i] + BUCKET - 1) / BUCKET * BUCKET : rows[i];
                const cublasLtMatmulAlgo_t *algo = v == 1 || v == 6 ? &fixed
                                                   : v == 2 || v == 7 ? &first[r / BUCKET]
                                                   : v == 3           ? &top[r / BUCKET]
                                                                      : &exact[r];
                const void *W = v >= 6 ? (const void *)((const uint16_t *)A + (size_t)(i % EXPERTS) * m * k) : A;
                if (run(&g, r, algo, W, B, C, st)) {
                    refused += pass == 0;
                    if (run(&g, r, &exact[r], W, B, C, st)) { fprintf(stderr, "refused twice\n"); exit(1); }
                }
            }
            CK(cudaEventRecord(e1, st));
            CK(cudaEventSynchronize(e1));
            float ms = 0;
            CK(cudaEventElapsedTime(&ms, e0, e1));
            if (ms < best) best = ms;
        }
        printf("%s,%.2f,%d,%d,%.2f,%d\n", name, spread, v, mean, 1e3 * best / CALLS, refused);
    }
    CK(cudaStreamDestroy(st));
    cudaFree(A); cudaFree(B); cudaFree(C); cudaFree(R);
    lt_rig_close(&g.lt);
}

int main(int argc, char **argv) {
    int mean = argc > 1 ? atoi(argv[1]) : 1024;
    double spread = argc > 2 ? atof(argv[2]) : -1.0;
    int dgrad = argc > 3 && !strcmp(argv[3], "dgrad");
    if (mean < 256 || mean > 8192 || (argc > 2 && (spread < 0.0 || spread > 0.9))) {
        fprintf(stderr, "expert_rows [rows_mean 256..8192 [spread 0..0.9]]\n");
        return 2;
    }
    cublasLtHandle_t lt;
    CB(cublasLtCreate(&lt));
    printf("shape,spread,version,rows_mean,gpu_us,refused\n");
    const double spreads[2] = {0.15, 0.5};
    for (int s = 0; s < (spread < 0.0 ? 2 : 1); s++) {
        double sp = spread < 0.0 ? spreads[s] : spread;
        if (dgrad) {
            one_shape("up_dgrad", 1024, 5632, mean, sp, lt);
            one_shape("down_dgrad", 2816, 1024, mean, sp, lt);
        } else {
            one_shape("up", 5632, 1024, mean, sp, lt);
            one_shape("down", 1024, 2816, mean, sp, lt);
        }
    }
    CB(cublasLtDestroy(lt));
    printf("# the heuristic on the host: %ld queries of a shape not asked before, %.1f us each\n", heuristic_calls,
           heuristic_calls ? 1e6 * heuristic_s / heuristic_calls : 0.0);
    return g_dev_failed;
}
