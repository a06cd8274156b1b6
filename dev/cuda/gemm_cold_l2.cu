/* A dense GEMM's time as calibrate takes it and as a training step meets it: the question behind the overlays'
 * clock_time_factor (docs/model.md, "GEMM time against the clock"), a step's forward GEMMs taking about 1.05-1.11
 * times calibrate's top-clock time where the clock is at the top.  Calibrate runs each shape back to back on the
 * same operands, which stay in the 50 MB L2 between calls; in a step other kernels run between a layer's GEMMs
 * and its weights and activations come from HBM.  Is that the factor?
 *
 * Versions (cuBLASLt, bf16 with fp32 sums, C[m, n] = A^T[m, k] B[k, n] as the forward's linear: A the weight,
 * B the activations, n the tokens; the heuristic's algorithm for the shape, asked once):
 *   1  calibrate's way: calls back to back on the same operands, the mean per call
 *   2  each call after a read of 256 MiB that evicts the L2 (dev_evict_l2), the GEMMs alone timed
 *   3  calls back to back, each on the next of `sets` copies of the operands (more than 200 MB in all: every
 *      call's operands cold in L2, no other kernel between them)
 *   4  as the step's linear forward without a bias runs it (validator/linear.c: cublasGemmEx, W transposed,
 *      CUBLAS_GEMM_DEFAULT), on the copies in turn, operands uniform in [-1, 1) as calibrate fills them
 *   5  as 4, operands at a step's scales (W normal 0.02, x normal 1: versions 1-3's values)
 * The clock must not tell them apart: each pass runs the three in turn, each a burst of at most 12 ms (calibrate's
 * burst sweep found 15 ms bursts at the top clock), the GPU idle 40 ms between bursts; the medians over PASSES.
 *
 * Check (dev_check): versions 2, 3 and 5's output against version 1's on the same values (the copies hold the
 * same data), relative L2 below 1e-2.  Benchmark: one CSV line per shape,
 *   shape,m,n,k,calls,warm_us,flushed_us,rotated_us,gemmex_uniform_us,gemmex_normal_us,warm_tflops
 *
 * build/dev/gemm_cold_l2 [shape]   (default every shape below) */
#include <unistd.h>
#include "lt_rig.h"

static const int CALLS_MAX = 16, PASSES = 9;
static const double BURST_S = 12e-3, IDLE_US = 40000;

/* the forward linears of the recorded runs' models (out features m, tokens n, in features k) */
static const dev_gemm_shape SHAPES[] = {
    {"gpt2_qkv_8k", 2304, 8192, 768},
    {"llama1b_qkv_4k", 3072, 4096, 2048},
    {"llama1b_mlp_up_4k", 16384, 4096, 2048},
    {"llama1b_mlp_down_4k", 2048, 4096, 8192},
    {"llama1b_lm_head_4k", 128256, 4096, 2048},
    {"llama8b_mlp_up_4k", 28672, 4096, 4096},
};

static void run(lt_rig *g, const cublasLtMatmulAlgo_t *algo, const void *A, const void *B, void *C, cudaStream_t st) {
    const float one = 1.0f, zero = 0.0f;
    CB(cublasLtMatmul(g->lt, g->desc, &one, A, g->a, B, g->b, &zero, C, g->c, C, g->c, algo, g->ws, g->ws_bytes, st));
}

/* y[n, m] = x[n, k] W^T as linear_forward_gemm without a bias: column-major C[m, n] = W^T[m, k] x[k, n] */
static void run_gemmex(cublasHandle_t blas, const void *W, const void *X, void *C, int m, int n, int k) {
    const float one = 1.0f, zero = 0.0f;
    CB(cublasGemmEx(blas, CUBLAS_OP_T, CUBLAS_OP_N, m, n, k, &one, W, CUDA_R_16BF, k, X, CUDA_R_16BF, k, &zero, C,
                    CUDA_R_16BF, m, CUBLAS_COMPUTE_32F, CUBLAS_GEMM_DEFAULT));
}

/* the mean microseconds of a call over `calls` calls back to back through cublasGemmEx, call i on set i % sets */
static float gemmex_burst_us(cublasHandle_t blas, void *const *A, void *const *B, int sets, void *C, int m, int n,
                             int k, int calls, cudaEvent_t *e) {
    usleep((useconds_t)IDLE_US);
    CK(cudaEventRecord(e[0], 0));
    for (int i = 0; i < calls; i++) run_gemmex(blas, A[i % sets], B[i % sets], C, m, n, k);
    CK(cudaEventRecord(e[1], 0));
    CK(cudaEventSynchronize(e[1]));
    float ms = 0.0f;
    CK(cudaEventElapsedTime(&ms, e[0], e[1]));
    return 1e3f * ms / calls;
}

/* the mean microseconds of a call over `calls` calls, call i on operand set i % sets; with flush, each call after an
 * L2 eviction and only the GEMMs timed */
static float burst_us(lt_rig *g, const cublasLtMatmulAlgo_t *algo, void *const *A, void *const *B, int sets, void *C,
                      int calls, int flush, cudaEvent_t *e) {
    usleep((useconds_t)IDLE_US);
    for (int i = 0; i < calls; i++) {
        if (flush) dev_evict_l2();
        if (flush || i == 0) CK(cudaEventRecord(e[2 * i], 0));
        run(g, algo, A[i % sets], B[i % sets], C, 0);
        if (flush || i == calls - 1) CK(cudaEventRecord(e[2 * i + 1], 0));
    }
    CK(cudaGetLastError());
    CK(cudaDeviceSynchronize());
    float total = 0.0f, ms = 0.0f;
    if (flush)
        for (int i = 0; i < calls; i++) {
            CK(cudaEventElapsedTime(&ms, e[2 * i], e[2 * i + 1]));
            total += ms;
        }
    else
        CK(cudaEventElapsedTime(&total, e[0], e[2 * calls - 1]));
    return 1e3f * total / calls;
}

static void one_shape(const dev_gemm_shape *s, cublasLtHandle_t lt, cublasHandle_t blas) {
    lt_rig g;
    lt_rig_open(&g, lt, s->m, s->n, s->k);
    cublasLtMatmulHeuristicResult_t r;
    int got = 0;
    CB(cublasLtMatmulAlgoGetHeuristic(lt, g.desc, g.a, g.b, g.c, g.c, g.pref, 1, &r, &got));
    if (!got) { fprintf(stderr, "gemm_cold_l2: no cuBLASLt algorithm for %s\n", s->name); exit(1); }

    const size_t a_n = (size_t)s->m * s->k, b_n = (size_t)s->k * s->n, c_n = (size_t)s->m * s->n;
    const double set_bytes = 2.0 * (double)(a_n + b_n);
    const int sets = std::max(2, (int)(200e6 / set_bytes) + 1);
    vec ha = dev_randn(a_n, 0, 0.02), hb = dev_randn(b_n, 0, 1);
    /* calibrate's values: uniform in [-1, 1) */
    vec ua(a_n), ub(b_n);
    for (double &x : ua) x = 2.0 * (rand() / (RAND_MAX + 1.0)) - 1.0;
    for (double &x : ub) x = 2.0 * (rand() / (RAND_MAX + 1.0)) - 1.0;
    std::vector<void *> A(sets), B(sets), UA(sets), UB(sets);
    A[0] = dev_up(ha, 2);
    B[0] = dev_up(hb, 2);
    UA[0] = dev_up(ua, 2);
    UB[0] = dev_up(ub, 2);
    for (int i = 1; i < sets; i++) {
        A[i] = dmalloc(a_n * 2);
        B[i] = dmalloc(b_n * 2);
        UA[i] = dmalloc(a_n * 2);
        UB[i] = dmalloc(b_n * 2);
        CK(cudaMemcpy(A[i], A[0], a_n * 2, cudaMemcpyDeviceToDevice));
        CK(cudaMemcpy(B[i], B[0], b_n * 2, cudaMemcpyDeviceToDevice));
        CK(cudaMemcpy(UA[i], UA[0], a_n * 2, cudaMemcpyDeviceToDevice));
        CK(cudaMemcpy(UB[i], UB[0], b_n * 2, cudaMemcpyDeviceToDevice));
    }
    void *C = dmalloc(c_n * 2), *R = dmalloc(c_n * 2);
    cudaEvent_t e[2 * CALLS_MAX];
    for (int i = 0; i < 2 * CALLS_MAX; i++) CK(cudaEventCreate(&e[i]));

    /* check: every version's arithmetic is the same GEMM on the same values */
    run(&g, &r.algo, A[0], B[0], R, 0);
    run(&g, &r.algo, A[sets - 1], B[sets - 1], C, 0);
    CK(cudaDeviceSynchronize());
    char what[96];
    snprintf(what, sizeof what, "%s, the last copy", s->name);
    const vec ref = dev_down(R, c_n, 2);
    dev_check(what, dev_down(C, c_n, 2), ref, 1e-2);

    /* as many calls as a 12 ms burst holds, from one warm call's time */
    const float one_us = burst_us(&g, &r.algo, A.data(), B.data(), 1, C, 1, 0, e);
    const int calls = std::max(2, std::min(CALLS_MAX, (int)(BURST_S / (one_us * 1e-6))));
    std::vector<float> warm, flushed, rotated, gx_uniform, gx_normal;
    for (int p = 0; p < PASSES; p++) {
        warm.push_back(burst_us(&g, &r.algo, A.data(), B.data(), 1, C, calls, 0, e));
        flushed.push_back(burst_us(&g, &r.algo, A.data(), B.data(), 1, C, calls, 1, e));
        rotated.push_back(burst_us(&g, &r.algo, A.data(), B.data(), sets, C, calls, 0, e));
        gx_uniform.push_back(gemmex_burst_us(blas, UA.data(), UB.data(), sets, C, s->m, s->n, s->k, calls, e));
        gx_normal.push_back(gemmex_burst_us(blas, A.data(), B.data(), sets, C, s->m, s->n, s->k, calls, e));
    }
    snprintf(what, sizeof what, "%s, cublasGemmEx", s->name);
    dev_check(what, dev_down(C, c_n, 2), ref, 1e-2);
    snprintf(what, sizeof what, "%s, the flushed call", s->name);
    CK(cudaMemset(C, 0, c_n * 2));
    burst_us(&g, &r.algo, A.data(), B.data(), 1, C, 1, 1, e);
    dev_check(what, dev_down(C, c_n, 2), ref, 1e-2);

    const double w = dev_median(warm), fl = dev_median(flushed), rot = dev_median(rotated);
    printf("%s,%d,%d,%d,%d,%.2f,%.2f,%.2f,%.2f,%.2f,%.0f\n", s->name, s->m, s->n, s->k, calls, w, fl, rot,
           dev_median(gx_uniform), dev_median(gx_normal), 2.0 * s->m * s->n * s->k / (w * 1e-6) / 1e12);
    for (int i = 0; i < sets; i++) {
        CK(cudaFree(A[i]));
        CK(cudaFree(B[i]));
        CK(cudaFree(UA[i]));
        CK(cudaFree(UB[i]));
    }
    CK(cudaFree(C));
    CK(cudaFree(R));
    for (int i = 0; i < 2 * CALLS_MAX; i++) CK(cudaEventDestroy(e[i]));
    lt_rig_close(&g);
}

int main(int argc, char **argv) {
    return dev_shapes_main(argc, argv, "gemm_cold_l2",
                           "shape,m,n,k,calls,"
                           "warm_us,flushed_us,rotated_us,gemmex_uniform_us,gemmex_normal_us,warm_tflops",
                           SHAPES, (int)(sizeof SHAPES / sizeof SHAPES[0]), one_shape);
}
