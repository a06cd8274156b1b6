/* The host's time to issue one cuBLASLt GEMM whose row count changes from call to call: the question
 * behind the MoE step's expert GEMMs (validator/moe.c), which the host issues in 24-120 us each after
 * the routing counts arrive, with the GPU waiting (docs/validation/archive/2026-11-26-h200x2-moe-grouped).
 * An expert's rows differ at every call; cuBLASLt may redo per-shape work for each new shape even with
 * the algorithm given.  If a shape seen before is cheap to issue, rounding the rows up to a bucket
 * (computing a few rows more) would take the host out of the expert GEMMs.
 *
 * Versions (the same algorithm, from one heuristic query per 128-row bucket, as moe.c keeps them):
 *   1  the same rows every call
 *   2  rows drawn at random within +-15% of the mean at every call (an expert's load)
 *   3  those rows rounded up to the next multiple of 128 (a bucket: the shape repeats)
 *   4  as 2, the layouts made anew for every call (cublasLtMatrixLayoutCreate/Destroy)
 * Shape: C[m, rows] = op(A)[m, k] B[k, rows], column-major, A transposed (moe.c's forward):
 * m = 5632 (the MoE test model's SwiGLU up), k = 1024, rows about 1024.
 *
 * Check: version 3's first `rows` columns against version 2's on the same inputs (relative L2 error,
 * 1e-2 as for every bf16 output): the padded columns change nothing of the real ones.
 * Benchmark: per version, the host's microseconds per call (CALLS issued back to back, no sync
 * between) and the GPU's (events around the same calls), one CSV line each:
 *   version,rows_mean,host_us,gpu_us
 *
 * build/dev/lt_issue_cost [rows_mean]   (default 1024) */
#include "lt_rig.h"

static const int CALLS = 400;
static const int BUCKET = 128;
static const int M = 5632, K = 1024;

/* moe.c's way: one algorithm per bucket of rows, asked at the first shape met there */
struct bucket_algos {
    cublasLtMatmulAlgo_t algo[64];
    int have[64];
};

/* one GEMM of n columns (rows of the token matrix); fresh: layouts made anew for this call */
static void issue(lt_rig *g, bucket_algos *ba, int n, const void *A, const void *B, void *C, int fresh,
                  cudaStream_t st) {
    const float one = 1.0f, zero = 0.0f;
    cublasLtMatrixLayout_t a = g->a, b = g->b, c = g->c;
    if (fresh) {
        CB(cublasLtMatrixLayoutCreate(&a, CUDA_R_16BF, K, M, K));
        CB(cublasLtMatrixLayoutCreate(&b, CUDA_R_16BF, K, n, K));
        CB(cublasLtMatrixLayoutCreate(&c, CUDA_R_16BF, M, n, M));
    } else {
        lt_rig_shape(g, M, n, K);
    }
    int bucket = n / BUCKET;
    if (!ba->have[bucket]) {
        cublasLtMatmulHeuristicResult_t r;
        int got = 0;
        CB(cublasLtMatmulAlgoGetHeuristic(g->lt, g->desc, a, b, c, c, g->pref, 1, &r, &got));
        if (!got) { fprintf(stderr, "no cuBLASLt algorithm for %dx%dx%d\n", M, n, K); exit(1); }
        ba->algo[bucket] = r.algo;
        ba->have[bucket] = 1;
    }
    CB(cublasLtMatmul(g->lt, g->desc, &one, A, a, B, b, &zero, C, c, C, c, &ba->algo[bucket], g->ws, g->ws_bytes, st));
    if (fresh) {
        CB(cublasLtMatrixLayoutDestroy(a));
        CB(cublasLtMatrixLayoutDestroy(b));
        CB(cublasLtMatrixLayoutDestroy(c));
    }
}

int main(int argc, char **argv) {
    int mean = argc > 1 ? atoi(argv[1]) : 1024;
    if (mean < 256 || mean > 8192) { fprintf(stderr, "rows_mean: 256 to 8192\n"); return 2; }
    int most = (int)(mean * 1.15) / BUCKET * BUCKET + BUCKET;
    cublasLtHandle_t lt;
    CB(cublasLtCreate(&lt));
    lt_rig g;
    lt_rig_open(&g, lt, M, mean, K);
    bucket_algos ba;
    memset(&ba, 0, sizeof ba);
    vec ha = dev_randn((size_t)M * K, 0, 0.02), hb = dev_randn((size_t)K * most, 0, 1);
    void *A = dev_up(ha, 2), *B = dev_up(hb, 2);
    void *C2 = dmalloc((size_t)M * most * 2), *C3 = dmalloc((size_t)M * most * 2);
    cudaStream_t st;
    CK(cudaStreamCreate(&st));
    cudaEvent_t e0, e1;
    CK(cudaEventCreate(&e0));
    CK(cudaEventCreate(&e1));

    /* fresh draws for every pass of every version: a row count seen before may be cheaper to issue, and
     * an expert's next count is seldom one it had */
    std::vector<int> rows(CALLS);
    srand(7);
    auto draw = [&]() { for (int &r : rows) r = (int)(mean * (0.85 + 0.3 * (rand() / (double)RAND_MAX))); };
    draw();

    /* the check: one shape, exact and rounded up, the real columns compared */
    int n = rows[0], padded = (n + BUCKET - 1) / BUCKET * BUCKET;
    issue(&g, &ba, n, A, B, C2, 0, st);
    issue(&g, &ba, padded, A, B, C3, 0, st);
    CK(cudaStreamSynchronize(st));
    char what[64];
    snprintf(what, sizeof what, "%d rows rounded up to %d", n, padded);   /* the real columns against the exact GEMM */
    dev_check(what, dev_down(C3, (size_t)M * n, 2), dev_down(C2, (size_t)M * n, 2), 1e-2);

    printf("version,rows_mean,host_us,gpu_us\n");
    for (int v = 1; v <= 4; v++) {
        for (int pass = 0; pass < 2; pass++) {   /* the first pass warms the buckets' algorithms and cuBLASLt */
            draw();
            CK(cudaStreamSynchronize(st));
            CK(cudaEventRecord(e0, st));
            double t0 = host_now_s();
            for (int i = 0; i < CALLS; i++) {
                int r = v == 1 ? mean : v == 3 ? (rows[i] + BUCKET - 1) / BUCKET * BUCKET : rows[i];
                issue(&g, &ba, r, A, B, C2, v == 4, st);
            }
            double host = host_now_s() - t0;
            CK(cudaEventRecord(e1, st));
            CK(cudaEventSynchronize(e1));
            float ms = 0;
            CK(cudaEventElapsedTime(&ms, e0, e1));
            if (pass == 1) printf("%d,%d,%.2f,%.2f\n", v, mean, 1e6 * host / CALLS, 1e3 * ms / CALLS);
        }
    }
    return g_dev_failed ? 1 : 0;
}
