/* calibrate's expert-GEMM issue (calibrate_issue.h).  A MoE layer's forward issues each local expert's GEMM after
 * the host has read the routing counts, with nothing queued on the GPU: where the host takes longer to issue a
 * GEMM than the GPU to run it, the GPU waits.  The calls are those of validator/moe.c's expert GEMMs (and of
 * Transformer Engine's grouped linear, less its Python and its descriptors made anew): cuBLASLt with the layouts
 * reshaped, an algorithm per bucket of rows asked before the timing, four streams in turn.  The buckets here are
 * 128 rows wide, moe.c's 16 since 2026-11-28 (docs/validation/2026-11-28-expert-algos): a width that changes which
 * kernel runs, not the host's work per call (a lookup, the reshapes, one cublasLtMatmul), which is what is timed.  The shape is a
 * fine-grained expert's up projection (512 rows of 1024 into 1408): small enough that the GPU never holds the
 * host back, whose issue does not depend on it (docs/validation/archive/2026-11-26-h200x2-moe-grouped: about
 * the same at every shape). */
#include "calibrate_issue.h"

#pragma GCC diagnostic push
#pragma GCC diagnostic ignored "-Wstrict-prototypes"
#include <cublasLt.h>
#pragma GCC diagnostic pop
#include <cuda_runtime_api.h>
#include <stdint.h>
#include <stdlib.h>

#include "gpu_check.h"
#include "launch.h"

#define ISSUE_STREAMS 4
#define ISSUE_CALLS 256
#define ISSUE_BATCHES 5
#define ISSUE_BUCKET 128
#define ISSUE_WORKSPACE_BYTES (32u << 20)
#define ISSUE_MOST 640   /* the most rows a call has */

static int ascending(const void *a, const void *b)
{
    double x = *(const double *)a, y = *(const double *)b;
    return (x > y) - (x < y);
}

static void reshape(cublasLtMatrixLayout_t layout, uint64_t rows, uint64_t cols, int64_t ld)
{
    CUBLAS_CHECK(cublasLtMatrixLayoutSetAttribute(layout, CUBLASLT_MATRIX_LAYOUT_ROWS, &rows, sizeof rows));
    CUBLAS_CHECK(cublasLtMatrixLayoutSetAttribute(layout, CUBLASLT_MATRIX_LAYOUT_COLS, &cols, sizeof cols));
    CUBLAS_CHECK(cublasLtMatrixLayoutSetAttribute(layout, CUBLASLT_MATRIX_LAYOUT_LD, &ld, sizeof ld));
}

double calibrate_gemm_issue_s(void)
{
    /* y[rows, out] = x[rows, in] W^T, column-major C[out, rows] = W[in, out]^T X[in, rows], as moe.c's forward */
    const int in = 1024, out = 1408, most = ISSUE_MOST;
    const int rows[4] = {384, 512, 448, 576};   /* changing as an expert's do: three buckets */
    cublasLtHandle_t lt;
    CUBLAS_CHECK(cublasLtCreate(&lt));
    cudaStream_t streams[ISSUE_STREAMS];
    void *workspace[ISSUE_STREAMS];
    for (int s = 0; s < ISSUE_STREAMS; s++) {
        CUDA_CHECK(cudaStreamCreateWithFlags(&streams[s], cudaStreamNonBlocking));
        CUDA_CHECK(cudaMalloc(&workspace[s], ISSUE_WORKSPACE_BYTES));
    }
    void *w, *x, *y;
    CUDA_CHECK(cudaMalloc(&w, (size_t)in * out * 2));
    CUDA_CHECK(cudaMalloc(&x, (size_t)in * most * 2));
    CUDA_CHECK(cudaMalloc(&y, (size_t)ISSUE_STREAMS * out * most * 2));
    CUDA_CHECK(cudaMemset(w, 0, (size_t)in * out * 2));
    CUDA_CHECK(cudaMemset(x, 0, (size_t)in * most * 2));
    cublasLtMatmulDesc_t desc;
    CUBLAS_CHECK(cublasLtMatmulDescCreate(&desc, CUBLAS_COMPUTE_32F, CUDA_R_32F));
    cublasOperation_t transa = CUBLAS_OP_T, transb = CUBLAS_OP_N;
    CUBLAS_CHECK(cublasLtMatmulDescSetAttribute(desc, CUBLASLT_MATMUL_DESC_TRANSA, &transa, sizeof transa));
    CUBLAS_CHECK(cublasLtMatmulDescSetAttribute(desc, CUBLASLT_MATMUL_DESC_TRANSB, &transb, sizeof transb));
    cublasLtMatrixLayout_t a, b, c;
    CUBLAS_CHECK(cublasLtMatrixLayoutCreate(&a, CUDA_R_16BF, in, out, in));
    CUBLAS_CHECK(cublasLtMatrixLayoutCreate(&b, CUDA_R_16BF, in, most, in));
    CUBLAS_CHECK(cublasLtMatrixLayoutCreate(&c, CUDA_R_16BF, out, most, out));
    cublasLtMatmulPreference_t pref;
    size_t ws = ISSUE_WORKSPACE_BYTES;
    CUBLAS_CHECK(cublasLtMatmulPreferenceCreate(&pref));
    CUBLAS_CHECK(cublasLtMatmulPreferenceSetAttribute(pref, CUBLASLT_MATMUL_PREF_MAX_WORKSPACE_BYTES, &ws, sizeof ws));
    /* the algorithm of each bucket, asked before any timing (moe.c keeps one per bucket the same way) */
    cublasLtMatmulAlgo_t algo[ISSUE_MOST / ISSUE_BUCKET + 1];
    int have[ISSUE_MOST / ISSUE_BUCKET + 1] = {0};
    for (int i = 0; i < 4; i++) {
        int bucket = rows[i] / ISSUE_BUCKET;
        if (have[bucket]) continue;
        reshape(b, (uint64_t)in, (uint64_t)rows[i], in);
        reshape(c, (uint64_t)out, (uint64_t)rows[i], out);
        cublasLtMatmulHeuristicResult_t result;
        int got = 0;
        CUBLAS_CHECK(cublasLtMatmulAlgoGetHeuristic(lt, desc, a, b, c, c, pref, 1, &result, &got));
        if (got < 1) {
            fprintf(stderr, "sextant-gpu: calibrate: cuBLASLt offers no algorithm for %d x %d x %d\n", out, rows[i], in);
            exit(1);
        }
        algo[bucket] = result.algo;
        have[bucket] = 1;
    }
    const float one = 1.0f, zero = 0.0f;
    double per_call[ISSUE_BATCHES + 1];
    for (int batch = 0; batch <= ISSUE_BATCHES; batch++) {   /* batch 0 warms the host's caches, not counted */
        CUDA_CHECK(cudaDeviceSynchronize());
        double t0 = launch_clock_s();
        for (int i = 0; i < ISSUE_CALLS; i++) {
            int r = rows[i % 4], s = i % ISSUE_STREAMS;
            reshape(a, (uint64_t)in, (uint64_t)out, in);
            reshape(b, (uint64_t)in, (uint64_t)r, in);
            reshape(c, (uint64_t)out, (uint64_t)r, out);
            void *ys = (char *)y + (size_t)s * out * most * 2;
            CUBLAS_CHECK(cublasLtMatmul(lt, desc, &one, w, a, x, b, &zero, ys, c, ys, c, &algo[r / ISSUE_BUCKET],
                                        workspace[s], ISSUE_WORKSPACE_BYTES, streams[s]));
        }
        per_call[batch] = (launch_clock_s() - t0) / ISSUE_CALLS;
    }
    CUDA_CHECK(cudaDeviceSynchronize());
    qsort(per_call + 1, ISSUE_BATCHES, sizeof per_call[0], ascending);
    CUBLAS_CHECK(cublasLtMatmulPreferenceDestroy(pref));
    CUBLAS_CHECK(cublasLtMatrixLayoutDestroy(a));
    CUBLAS_CHECK(cublasLtMatrixLayoutDestroy(b));
    CUBLAS_CHECK(cublasLtMatrixLayoutDestroy(c));
    CUBLAS_CHECK(cublasLtMatmulDescDestroy(desc));
    CUDA_CHECK(cudaFree(w));
    CUDA_CHECK(cudaFree(x));
    CUDA_CHECK(cudaFree(y));
    for (int s = 0; s < ISSUE_STREAMS; s++) {
        CUDA_CHECK(cudaFree(workspace[s]));
        CUDA_CHECK(cudaStreamDestroy(streams[s]));
    }
    CUBLAS_CHECK(cublasLtDestroy(lt));
    return per_call[1 + ISSUE_BATCHES / 2];
}
