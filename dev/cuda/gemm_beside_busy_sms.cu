/* A cuBLASLt GEMM that starts while another kernel holds some of the SMs: the question behind
 * ZeRO-3's layer GEMMs running up to 2x slower beside the per-layer all-gathers than the GEMMs
 * of calibrate --comm, which loop beside a looping collective (docs/model.md, "Overlap is not
 * free").  A NCCL collective is a kernel of one block per channel, each on an SM of its own for
 * as long as the collective lasts.  Hopper's cuBLAS GEMMs are persistent: a grid of about one CTA
 * per SM, each taking a fixed share of the tiles.  If k SMs are held when the GEMM starts, k of
 * its CTAs wait for them, and their tiles start only when the other kernel ends.
 *
 * Versions:
 *   1  the GEMM alone (the reference time)
 *   2  the GEMM alone, told to plan for SMs - k SMs (CUBLASLT_MATMUL_DESC_SM_COUNT_TARGET, what
 *      Transformer Engine sets as its "SM margin" beside its own communication)
 *   3  the GEMM started while k SMs are held for longer than it runs
 *   4  the same, told to plan for SMs - k
 *   5  the GEMM started while k SMs are held for half its alone time
 * The SMs are held by `hold_sms`: k blocks that each ask for an SM's whole shared memory (so one
 * per SM, and no GEMM CTA beside it) and spin on the global timer.
 *
 * Check: each version's output against a float64 CPU reference on a small shape (relative L2
 * error, 1e-2 as for every bf16 output in tests/gpu/test_kernels.cu).
 * Benchmark: the median of ITERS runs of each version per shape and k, one CSV line each:
 *   shape,m,n,k,held_sms,version,us
 *
 * build/dev/gemm_beside_busy_sms [held_sms,...]   (default 0,8,16,24,32) */
#include <cublasLt.h>
#include <string.h>
#include "dev_util.h"

static const int ITERS = 31;

static __device__ __forceinline__ unsigned long long global_ns(void) {
    unsigned long long t;
    asm volatile("mov.u64 %0, %globaltimer;" : "=l"(t));
    return t;
}

/* one block per SM (the whole shared memory asked for), spinning for ns; block 0 says it runs */
__global__ void hold_sms(unsigned long long ns, volatile int *running) {
    extern __shared__ char smem[];
    const unsigned long long t0 = global_ns();
    if (threadIdx.x == 0) {
        smem[0] = 1;
        if (blockIdx.x == 0) {
            *running = 1;
            __threadfence_system();
        }
    }
    while (global_ns() - t0 < ns) {
    }
}

/* the GEMM's stream waits here until the held SMs are held */
__global__ void wait_running(volatile int *running) {
    while (*running == 0) {
    }
}

typedef struct {
    cublasLtHandle_t lt;
    void *workspace;
    size_t workspace_bytes;
} lt_ctx;

/* y[M, N] = x[M, K] W[N, K]^T in row-major terms (a linear layer), bf16 in and out, fp32 sums;
 * sm_target 0: cuBLASLt's own choice of the SMs it plans for */
static void linear(lt_ctx *c, int M, int N, int K, const void *x, const void *w, void *y, int sm_target,
                   cudaStream_t stream) {
    cublasLtMatmulDesc_t desc;
    cublasLtMatrixLayout_t a, b, d;
    cublasOperation_t opa = CUBLAS_OP_T, opb = CUBLAS_OP_N;
    CB(cublasLtMatmulDescCreate(&desc, CUBLAS_COMPUTE_32F, CUDA_R_32F));
    CB(cublasLtMatmulDescSetAttribute(desc, CUBLASLT_MATMUL_DESC_TRANSA, &opa, sizeof opa));
    CB(cublasLtMatmulDescSetAttribute(desc, CUBLASLT_MATMUL_DESC_TRANSB, &opb, sizeof opb));
    if (sm_target > 0)
        CB(cublasLtMatmulDescSetAttribute(desc, CUBLASLT_MATMUL_DESC_SM_COUNT_TARGET, &sm_target, sizeof sm_target));
    /* column-major: y^T[N, M] = W[K, N]^T x^T[K, M] */
    CB(cublasLtMatrixLayoutCreate(&a, CUDA_R_16BF, K, N, K));
    CB(cublasLtMatrixLayoutCreate(&b, CUDA_R_16BF, K, M, K));
    CB(cublasLtMatrixLayoutCreate(&d, CUDA_R_16BF, N, M, N));
    cublasLtMatmulPreference_t pref;
    CB(cublasLtMatmulPreferenceCreate(&pref));
    CB(cublasLtMatmulPreferenceSetAttribute(pref, CUBLASLT_MATMUL_PREF_MAX_WORKSPACE_BYTES, &c->workspace_bytes,
                                            sizeof c->workspace_bytes));
    cublasLtMatmulHeuristicResult_t result;
    int found = 0;
    CB(cublasLtMatmulAlgoGetHeuristic(c->lt, desc, a, b, d, d, pref, 1, &result, &found));
    if (!found) {
        fprintf(stderr, "gemm_beside_busy_sms: no cuBLASLt algorithm for %d x %d x %d\n", M, N, K);
        exit(2);
    }
    const float one = 1.0f, zero = 0.0f;
    CB(cublasLtMatmul(c->lt, desc, &one, w, a, x, b, &zero, y, d, y, d, &result.algo, c->workspace,
                      c->workspace_bytes, stream));
    CB(cublasLtMatmulPreferenceDestroy(pref));
    CB(cublasLtMatrixLayoutDestroy(a));
    CB(cublasLtMatrixLayoutDestroy(b));
    CB(cublasLtMatrixLayoutDestroy(d));
    CB(cublasLtMatmulDescDestroy(desc));
}

typedef struct {
    lt_ctx *c;
    cudaStream_t gemm_stream, hold_stream;
    cudaEvent_t cleared, t0, t1;
    int *running;
    int sms, smem_per_sm;
} bench;

/* one run of `version` with `held` SMs; returns the GEMM's time in us (from the held SMs running) */
static float run_once(bench *B, int version, int held, double alone_us, int M, int N, int K, const void *x,
                      const void *w, void *y) {
    const int sm_target = (version == 2 || version == 4) && held > 0 ? B->sms - held : 0;
    const int holding = version >= 3 && held > 0;
    if (holding) {
        const double hold_us = version == 5 ? 0.5 * alone_us : 4.0 * alone_us + 50.0;
        CK(cudaMemsetAsync(B->running, 0, sizeof(int), B->hold_stream));
        CK(cudaEventRecord(B->cleared, B->hold_stream));
        CK(cudaStreamWaitEvent(B->gemm_stream, B->cleared, 0));
        hold_sms<<<held, 128, B->smem_per_sm, B->hold_stream>>>((unsigned long long)(hold_us * 1e3), B->running);
        CK(cudaGetLastError());
        wait_running<<<1, 1, 0, B->gemm_stream>>>(B->running);
        CK(cudaGetLastError());
    }
    CK(cudaEventRecord(B->t0, B->gemm_stream));
    linear(B->c, M, N, K, x, w, y, sm_target, B->gemm_stream);
    CK(cudaEventRecord(B->t1, B->gemm_stream));
    CK(cudaDeviceSynchronize());
    float ms = 0.0f;
    CK(cudaEventElapsedTime(&ms, B->t0, B->t1));
    return ms * 1e3f;
}

static float median_us(bench *B, int version, int held, double alone_us, int M, int N, int K, const void *x,
                       const void *w, void *y) {
    std::vector<float> t(ITERS);
    for (int i = 0; i < 3; i++) run_once(B, version, held, alone_us, M, N, K, x, w, y);
    for (int i = 0; i < ITERS; i++) t[i] = run_once(B, version, held, alone_us, M, N, K, x, w, y);
    std::sort(t.begin(), t.end());
    return t[ITERS / 2];
}

/* every version against the float64 reference at a small shape, 20 SMs held where it holds any */
static void check(bench *B) {
    const int M = 384, N = 256, K = 512;
    vec x = dev_randn((size_t)M * K, 0.0, 1.0), w = dev_randn((size_t)N * K, 0.0, 0.05);
    void *dx = dev_up(x, 2), *dw = dev_up(w, 2), *dy = dmalloc((size_t)M * N * 2);
    vec ref((size_t)M * N);
    for (int i = 0; i < M; i++)
        for (int j = 0; j < N; j++) {
            double s = 0.0;
            for (int k = 0; k < K; k++) s += x[(size_t)i * K + k] * w[(size_t)j * K + k];
            ref[(size_t)i * N + j] = s;
        }
    printf("check %d x %d x %d against float64:\n", M, N, K);
    for (int v = 1; v <= 5; v++) {
        CK(cudaMemset(dy, 0, (size_t)M * N * 2));
        run_once(B, v, 20, 100.0, M, N, K, dx, dw, dy);
        char what[64];
        snprintf(what, sizeof what, "version %d", v);
        dev_check(what, dev_down(dy, (size_t)M * N, 2), ref, 1e-2);
    }
    CK(cudaFree(dx));
    CK(cudaFree(dw));
    CK(cudaFree(dy));
}

int main(int argc, char **argv) {
    std::vector<int> helds = {0, 8, 16, 24, 32};
    if (argc > 1) {
        helds.clear();
        for (char *p = strtok(argv[1], ","); p; p = strtok(NULL, ",")) helds.push_back(atoi(p));
    }
    bench B;
    lt_ctx c;
    CB(cublasLtCreate(&c.lt));
    c.workspace_bytes = 32u << 20;
    c.workspace = dmalloc(c.workspace_bytes);
    B.c = &c;
    int dev = 0;
    CK(cudaGetDevice(&dev));
    CK(cudaDeviceGetAttribute(&B.sms, cudaDevAttrMultiProcessorCount, dev));
    CK(cudaDeviceGetAttribute(&B.smem_per_sm, cudaDevAttrMaxSharedMemoryPerBlockOptin, dev));
    CK(cudaFuncSetAttribute(hold_sms, cudaFuncAttributeMaxDynamicSharedMemorySize, B.smem_per_sm));
    CK(cudaStreamCreateWithFlags(&B.gemm_stream, cudaStreamNonBlocking));
    CK(cudaStreamCreateWithFlags(&B.hold_stream, cudaStreamNonBlocking));
    CK(cudaEventCreate(&B.cleared));
    CK(cudaEventCreate(&B.t0));
    CK(cudaEventCreate(&B.t1));
    B.running = (int *)dmalloc(sizeof(int));
    cudaDeviceProp prop;
    CK(cudaGetDeviceProperties(&prop, dev));
    printf("device %s, %d SMs, %d B shared memory per block (opt-in)\n", prop.name, B.sms, B.smem_per_sm);

    check(&B);

    /* the layer GEMMs of the ZeRO-3 runs (gpt2 and llama3.2-1b at 8192 tokens a micro-batch) and two
     * large squares */
    static const struct { const char *name; int m, n, k; } shapes[] = {
        {"gpt2_qkv", 8192, 2304, 768},        {"gpt2_proj", 8192, 768, 768},
        {"gpt2_fc", 8192, 3072, 768},         {"gpt2_fcproj", 8192, 768, 3072},
        {"llama1b_qkv", 8192, 3072, 2048},    {"llama1b_o", 8192, 2048, 2048},
        {"llama1b_gateup", 8192, 16384, 2048}, {"llama1b_down", 8192, 2048, 8192},
        {"square4096", 4096, 4096, 4096},     {"square8192", 8192, 8192, 8192},
    };
    printf("shape,m,n,k,held_sms,version,us\n");
    for (const auto &s : shapes) {
        vec x = dev_randn((size_t)s.m * s.k, 0.0, 1.0), w = dev_randn((size_t)s.n * s.k, 0.0, 0.02);
        void *dx = dev_up(x, 2), *dw = dev_up(w, 2), *dy = dmalloc((size_t)s.m * s.n * 2);
        const float alone = median_us(&B, 1, 0, 0.0, s.m, s.n, s.k, dx, dw, dy);
        printf("%s,%d,%d,%d,0,1,%.2f\n", s.name, s.m, s.n, s.k, alone);
        for (int held : helds) {
            if (held <= 0) continue;
            for (int v = 2; v <= 5; v++)
                printf("%s,%d,%d,%d,%d,%d,%.2f\n", s.name, s.m, s.n, s.k, held, v,
                       median_us(&B, v, held, alone, s.m, s.n, s.k, dx, dw, dy));
            fflush(stdout);
        }
        CK(cudaFree(dx));
        CK(cudaFree(dw));
        CK(cudaFree(dy));
    }
    return g_dev_failed ? 1 : 0;
}
