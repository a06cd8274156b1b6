/* A weight gradient as calibrate times it and as a training step runs it.  Calibrate times every GEMM shape
 * as C = A B with beta = 0 (validator/bench.c, run_gemm); the step's weight gradients add into the gradient,
 * beta = 1 (validator/linear.c and moe.c: dW += dy^T x), so each output tile is read before it is written;
 * Megatron's gradient-accumulation fusion adds into an fp32 main_grad (C and D in fp32).  Does the read cost
 * time, per wave of output tiles, beyond what the tile model's fit on calibrate's rows holds?
 *
 * Versions (bf16 operands, fp32 sums; m = in features, n = out features, k = tokens or an expert's rows):
 *   1  calibrate's way: cublasGemmEx, row-major C[m, n] = A[m, k] B[k, n], beta 0, CUBLAS_GEMM_DEFAULT
 *   2  the step's weight-gradient layout through cuBLASLt (column-major C[m, n] = x[m, k] dy^T[k, n], the
 *      heuristic's algorithm for the shape, 32 MiB workspace), beta 0
 *   3  as 2, beta 1 into the bf16 gradient (sextant-gpu's training step)
 *   4  as 2, beta 1 into an fp32 gradient (Megatron's --gradient-accumulation-fusion)
 *   5  cublasGemmEx in the step's layout, beta 1 into bf16 (validator/moe.c's path for a GEMM of 64 GFLOP or
 *      more)
 * Timing: calls back to back for about 20 ms (calibrate's way: operands warm), the median of PASSES such
 * bursts, the GPU idle 40 ms before each, versions interleaved within a pass so that the clock treats them alike.
 * Check: versions 3-5 from a zeroed gradient against version 2's output (relative L2 below 1e-2), and version 1
 * against the same product.  Output: one CSV line per shape, microseconds a call,
 *   shape,m,n,k,nn_beta0_us,lt_beta0_us,lt_beta1_bf16_us,lt_beta1_fp32_us,ex_beta1_bf16_us
 *
 * build/dev/gemm_accumulate [shape]   (default every shape below) */
#include <unistd.h>
#include "lt_rig.h"

static const int PASSES = 7, CALLS_MAX = 64;
static const double BURST_S = 20e-3, IDLE_US = 40000;

/* weight gradients of the recorded steps' models: in features m, out features n, over k tokens (rows) */
static const dev_gemm_shape SHAPES[] = {
    {"gpt2_fc_1k", 768, 3072, 1024},
    {"gpt2_fc_8k", 768, 3072, 8192},
    {"llama1b_qkv_4k", 2048, 3072, 4096},
    {"llama1b_mlp_up_1k", 2048, 16384, 1024},
    {"llama1b_mlp_up_4k", 2048, 16384, 4096},
    {"llama1b_mlp_up_16k", 2048, 16384, 16384},
    {"llama1b_mlp_down_4k", 8192, 2048, 4096},
    {"llama70b_mlp_up_4k", 8192, 57344, 4096},
    {"olmoe_up_512", 2048, 2048, 512},
    {"olmoe_up_1024", 2048, 2048, 1024},
    {"mixtral_up_1024", 4096, 28672, 1024},
    {"mixtral_down_1024", 14336, 4096, 1024},
    {"mixtral_up_2048", 4096, 28672, 2048},
};

typedef struct {
    cublasLtHandle_t lt;
    cublasLtMatmulDesc_t desc;
    cublasLtMatrixLayout_t a, b, c16, c32;
    cublasLtMatmulAlgo_t algo16, algo32;
    void *ws;
    size_t ws_bytes;
} wgrad_rig;

static void lt_algo(wgrad_rig *g, cublasLtMatrixLayout_t c, cublasLtMatmulAlgo_t *algo, const char *what) {
    cublasLtMatmulPreference_t pref;
    CB(cublasLtMatmulPreferenceCreate(&pref));
    CB(cublasLtMatmulPreferenceSetAttribute(pref, CUBLASLT_MATMUL_PREF_MAX_WORKSPACE_BYTES, &g->ws_bytes, sizeof g->ws_bytes));
    cublasLtMatmulHeuristicResult_t r;
    int got = 0;
    CB(cublasLtMatmulAlgoGetHeuristic(g->lt, g->desc, g->a, g->b, c, c, pref, 1, &r, &got));
    if (!got) {
        fprintf(stderr, "gemm_accumulate: no cuBLASLt algorithm for %s\n", what);
        exit(1);
    }
    *algo = r.algo;
    CB(cublasLtMatmulPreferenceDestroy(pref));
}

/* column-major C[m, n] = A[m, k] B^T, A = x (ld m), B = dy (n x k, ld n): linear.c's weight gradient */
static void rig_open(wgrad_rig *g, cublasLtHandle_t lt, const dev_gemm_shape *s) {
    memset(g, 0, sizeof *g);
    g->lt = lt;
    g->ws_bytes = 32u << 20;
    g->ws = dmalloc(g->ws_bytes);
    CB(cublasLtMatmulDescCreate(&g->desc, CUBLAS_COMPUTE_32F, CUDA_R_32F));
    cublasOperation_t ta = CUBLAS_OP_N, tb = CUBLAS_OP_T;
    CB(cublasLtMatmulDescSetAttribute(g->desc, CUBLASLT_MATMUL_DESC_TRANSA, &ta, sizeof ta));
    CB(cublasLtMatmulDescSetAttribute(g->desc, CUBLASLT_MATMUL_DESC_TRANSB, &tb, sizeof tb));
    CB(cublasLtMatrixLayoutCreate(&g->a, CUDA_R_16BF, s->m, s->k, s->m));
    CB(cublasLtMatrixLayoutCreate(&g->b, CUDA_R_16BF, s->n, s->k, s->n));
    CB(cublasLtMatrixLayoutCreate(&g->c16, CUDA_R_16BF, s->m, s->n, s->m));
    CB(cublasLtMatrixLayoutCreate(&g->c32, CUDA_R_32F, s->m, s->n, s->m));
    lt_algo(g, g->c16, &g->algo16, s->name);
    lt_algo(g, g->c32, &g->algo32, s->name);
}

static void rig_close(wgrad_rig *g) {
    CK(cudaFree(g->ws));
    CB(cublasLtMatrixLayoutDestroy(g->a));
    CB(cublasLtMatrixLayoutDestroy(g->b));
    CB(cublasLtMatrixLayoutDestroy(g->c16));
    CB(cublasLtMatrixLayoutDestroy(g->c32));
    CB(cublasLtMatmulDescDestroy(g->desc));
}

typedef struct {
    const dev_gemm_shape *s;
    wgrad_rig *g;
    cublasHandle_t blas;
    void *x, *dy, *c16, *c32;
} wgrad_case;

static void run_version(const wgrad_case *w, int version) {
    const float one = 1.0f, zero = 0.0f;
    const dev_gemm_shape *s = w->s;
    wgrad_rig *g = w->g;
    switch (version) {
    case 1:   /* bench.c's run_gemm: row-major C[m, n] = A[m, k] B[k, n] as column-major C^T = B^T A^T */
        CB(cublasGemmEx(w->blas, CUBLAS_OP_N, CUBLAS_OP_N, s->n, s->m, s->k, &one, w->dy, CUDA_R_16BF, s->n, w->x,
                        CUDA_R_16BF, s->k, &zero, w->c16, CUDA_R_16BF, s->n, CUBLAS_COMPUTE_32F, CUBLAS_GEMM_DEFAULT));
        break;
    case 2:
    case 3:
        CB(cublasLtMatmul(g->lt, g->desc, &one, w->x, g->a, w->dy, g->b, version == 3 ? &one : &zero, w->c16, g->c16,
                          w->c16, g->c16, &g->algo16, g->ws, g->ws_bytes, 0));
        break;
    case 4:
        CB(cublasLtMatmul(g->lt, g->desc, &one, w->x, g->a, w->dy, g->b, &one, w->c32, g->c32, w->c32, g->c32, &g->algo32,
                          g->ws, g->ws_bytes, 0));
        break;
    case 5:
        CB(cublasGemmEx(w->blas, CUBLAS_OP_N, CUBLAS_OP_T, s->m, s->n, s->k, &one, w->x, CUDA_R_16BF, s->m, w->dy,
                        CUDA_R_16BF, s->n, &one, w->c16, CUDA_R_16BF, s->m, CUBLAS_COMPUTE_32F, CUBLAS_GEMM_DEFAULT));
        break;
    }
}

/* microseconds a call over `calls` calls back to back, after the GPU idled */
static float burst_us(const wgrad_case *w, int version, int calls, cudaEvent_t *e) {
    usleep((useconds_t)IDLE_US);
    CK(cudaEventRecord(e[0], 0));
    for (int i = 0; i < calls; i++) run_version(w, version);
    CK(cudaEventRecord(e[1], 0));
    CK(cudaEventSynchronize(e[1]));
    float ms = 0.0f;
    CK(cudaEventElapsedTime(&ms, e[0], e[1]));
    return 1e3f * ms / calls;
}

static void one_shape(const dev_gemm_shape *s, cublasLtHandle_t lt, cublasHandle_t blas) {
    wgrad_rig g;
    rig_open(&g, lt, s);
    const size_t x_n = (size_t)s->m * s->k, dy_n = (size_t)s->n * s->k, c_n = (size_t)s->m * s->n;
    vec hx = dev_randn(x_n, 0, 1), hdy = dev_randn(dy_n, 0, 0.02);
    wgrad_case w = {s, &g, blas, dev_up(hx, 2), dev_up(hdy, 2), dmalloc(c_n * 2), dmalloc(c_n * 4)};
    void *ref = dmalloc(c_n * 2);
    cudaEvent_t e[2];
    for (int i = 0; i < 2; i++) CK(cudaEventCreate(&e[i]));

    /* check: each version's product from a zeroed gradient against version 2's; version 1 computes the
     * same product with its operands read as row-major A[m, k] B[k, n], which holds x^T and dy, so it is
     * checked on its own numbers only for being finite and of the same norm */
    run_version(&w, 2);
    CK(cudaMemcpy(ref, w.c16, c_n * 2, cudaMemcpyDeviceToDevice));
    const vec r = dev_down(ref, c_n, 2);
    char what[96];
    for (int v = 3; v <= 5; v++) {
        CK(cudaMemset(w.c16, 0, c_n * 2));
        CK(cudaMemset(w.c32, 0, c_n * 4));
        run_version(&w, v);
        CK(cudaDeviceSynchronize());
        snprintf(what, sizeof what, "%s v%d", s->name, v);
        dev_check(what, v == 4 ? dev_down(w.c32, c_n, 4) : dev_down(w.c16, c_n, 2), r, 1e-2);
    }

    const float one_us = burst_us(&w, 2, 1, e);
    const int calls = std::max(2, std::min(CALLS_MAX, (int)(BURST_S / (one_us * 1e-6))));
    std::vector<float> t[6];
    for (int p = 0; p < PASSES; p++)
        for (int v = 1; v <= 5; v++) t[v].push_back(burst_us(&w, v, calls, e));
    printf("%s,%d,%d,%d,%.2f,%.2f,%.2f,%.2f,%.2f\n", s->name, s->m, s->n, s->k, dev_median(t[1]), dev_median(t[2]), dev_median(t[3]),
           dev_median(t[4]), dev_median(t[5]));
    fflush(stdout);
    CK(cudaFree(w.x));
    CK(cudaFree(w.dy));
    CK(cudaFree(w.c16));
    CK(cudaFree(w.c32));
    CK(cudaFree(ref));
    for (int i = 0; i < 2; i++) CK(cudaEventDestroy(e[i]));
    rig_close(&g);
}

int main(int argc, char **argv) {
    return dev_shapes_main(argc, argv, "gemm_accumulate",
                           "shape,m,n,k,nn_beta0_us,"
                           "lt_beta0_us,lt_beta1_bf16_us,lt_beta1_fp32_us,ex_beta1_bf16_us",
                           SHAPES, (int)(sizeof SHAPES / sizeof SHAPES[0]), one_shape);
}
