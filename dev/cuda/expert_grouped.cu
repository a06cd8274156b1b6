/* One MoE layer's expert GEMMs, as the validator runs them and as one grouped launch: is cuBLAS's grouped GEMM
 * (cublasGemmGroupedBatchedEx, one group per expert) what the planner's EXPERT_GEMM_GROUPED prices, one
 * launch whose tiles share the waves?  The held-out MoE steps (docs/validation/2026-11-27-h200x2-heldout-moe)
 * missed on the experts' GEMMs both ways: Mixtral's 8 large ones 8-14% slower than priced, OLMoE's 64 small
 * ones up to 28% faster, where the validator's four streams share the waves that the planner prices one launch
 * at a time.
 *
 * Versions (E experts, rows drawn from a gamma of coefficient of variation cv summing to E x rows_mean, the same
 * draw for every version; bf16 operands, fp32 sums):
 *   1  cublasGemmEx per expert on one stream, in turn
 *   2  cublasGemmEx per expert on 4 streams, expert e on stream e % 4 (validator/moe.c with SEXTANT_MOE_GEMM=ex)
 *   3  cublasGemmGroupedBatchedEx: one call, one group of one GEMM per expert
 * Passes: fwd C[out, rows] = W^T X (A transposed), dgrad dX[in, rows] = W dY, wgrad dW[in, out] += X dY^T (K =
 * rows), the operands and transposes of moe.c's gemm_forward, gemm_dgrad and gemm_wgrad.
 *
 * Check (dev_check): versions 2 and 3 against version 1 over every expert's output, relative L2 below 1e-2;
 * version 1's first expert, its first output column, against a float64 sum on the host.  Benchmark:
 * dev_time_us (median of 100, L2 evicted before each) per layer; one CSV line per version:
 *   model,pass,experts,rows_mean,cv,m,n,k,version,gpu_us,host_us,t0,t1
 * host_us: the host's time to issue the layer's calls (version 3 sets up its pointer arrays on the GPU beforehand,
 * as a step would once per layer); t0, t1: the wall clock (UTC, seconds) around the timing, to find the SM clock
 * nvidia-smi sampled meanwhile (the GPU holds its clock under the power cap, which a Mixtral layer reaches).
 *
 * Measured: docs/validation/2026-11-27-h100h200-gemm-sustained.
 *
 * build/dev/expert_grouped [model]   model: olmoe, mixtral, test (default: all three) */
#include "dev_util.h"
#include <cublas_v2.h>
#include <random>
#include <string.h>
#include <time.h>

static const int STREAMS = 4;

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
    return {0, 1, in, out, rows, in, out, in, 1.0f};   /* wgrad, accumulated */
}

typedef struct {
    int E;
    std::vector<gemm_shape> g;
    std::vector<void *> A, B, C;
    void *pool;
    void **dA, **dB, **dC;   /* version 3's pointer arrays, on the GPU */
    std::vector<cublasOperation_t> ta, tb;
    std::vector<int> m, n, k, lda, ldb, ldc, one;
    std::vector<float> alpha, beta;
} layer;

static void gemm_ex(cublasHandle_t h, cudaStream_t s, const gemm_shape &g, const void *A, const void *B, void *C) {
    const float one = 1.0f;
    CB(cublasSetStream(h, s));
    CB(cublasGemmEx(h, g.ta ? CUBLAS_OP_T : CUBLAS_OP_N, g.tb ? CUBLAS_OP_T : CUBLAS_OP_N, g.m, g.n, g.k, &one, A,
                    CUDA_R_16BF, g.lda, B, CUDA_R_16BF, g.ldb, &g.beta, C, CUDA_R_16BF, g.ldc, CUBLAS_COMPUTE_32F,
                    CUBLAS_GEMM_DEFAULT));
}

static void run(int version, cublasHandle_t h, layer *L, cudaStream_t *lanes, cudaEvent_t fork, cudaEvent_t *joined) {
    if (version == 1) {
        for (int e = 0; e < L->E; e++) gemm_ex(h, 0, L->g[e], L->A[e], L->B[e], L->C[e]);
    } else if (version == 2) {
        CK(cudaEventRecord(fork, 0));
        for (int i = 0; i < STREAMS; i++) CK(cudaStreamWaitEvent(lanes[i], fork, 0));
        for (int e = 0; e < L->E; e++) gemm_ex(h, lanes[e % STREAMS], L->g[e], L->A[e], L->B[e], L->C[e]);
        for (int i = 0; i < STREAMS; i++) {
            CK(cudaEventRecord(joined[i], lanes[i]));
            CK(cudaStreamWaitEvent(0, joined[i], 0));
        }
        CB(cublasSetStream(h, 0));
    } else {
        CB(cublasSetStream(h, 0));
        CB(cublasGemmGroupedBatchedEx(h, L->ta.data(), L->tb.data(), L->m.data(), L->n.data(), L->k.data(),
                                      L->alpha.data(), (const void *const *)L->dA, CUDA_R_16BF, L->lda.data(),
                                      (const void *const *)L->dB, CUDA_R_16BF, L->ldb.data(), L->beta.data(), L->dC,
                                      CUDA_R_16BF, L->ldc.data(), L->E, L->one.data(), CUBLAS_COMPUTE_32F));
    }
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

/* rows per expert: a gamma draw of coefficient of variation cv, scaled to sum E x mean, at least 1 each */
static std::vector<int> draw_rows(int E, int mean, double cv) {
    std::mt19937 rng(7);
    std::gamma_distribution<double> gamma(1.0 / (cv * cv), 1.0);
    std::vector<double> x(E);
    double sum = 0.0;
    for (double &v : x) sum += v = gamma(rng);
    std::vector<int> rows(E);
    for (int e = 0; e < E; e++) rows[e] = std::max(1, (int)(x[e] / sum * E * mean + 0.5));
    return rows;
}

static void one_pass(const moe_shape *s, const char *pass, int in, int out, cublasHandle_t h, cudaStream_t *lanes,
                     cudaEvent_t fork, cudaEvent_t *joined) {
    layer L;
    L.E = s->experts;
    std::vector<int> rows = draw_rows(s->experts, s->rows_mean, s->cv);
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
    }
    L.dA = (void **)dmalloc(L.E * sizeof(void *));
    L.dB = (void **)dmalloc(L.E * sizeof(void *));
    L.dC = (void **)dmalloc(L.E * sizeof(void *));
    CK(cudaMemcpy(L.dA, L.A.data(), L.E * sizeof(void *), cudaMemcpyHostToDevice));
    CK(cudaMemcpy(L.dB, L.B.data(), L.E * sizeof(void *), cudaMemcpyHostToDevice));
    CK(cudaMemcpy(L.dC, L.C.data(), L.E * sizeof(void *), cudaMemcpyHostToDevice));

    /* check: one run of each version from the same C (wgrad accumulates into it) */
    vec want;
    for (int v = 1; v <= 3; v++) {
        CK(cudaMemcpy(L.pool, backup, total * 2, cudaMemcpyDeviceToDevice));
        run(v, h, &L, lanes, fork, joined);
        CK(cudaDeviceSynchronize());
        vec got;
        for (int e = 0; e < L.E; e++) {
            vec c = dev_down(L.C[e], (size_t)L.g[e].m * L.g[e].n, 2);
            got.insert(got.end(), c.begin(), c.end());
        }
        char what[96];
        if (v == 1) {
            /* expert 0's first column of C against float64: C[:, 0] = op(A) op(B)[:, 0] (+ C before) */
            const gemm_shape &g = L.g[0];
            const size_t na = (size_t)g.m * g.k, nb = (size_t)g.k * g.n;
            vec a = dev_down((uint16_t *)backup + at_a[0], na, 2), b = dev_down((uint16_t *)backup + at_b[0], nb, 2),
                c = dev_down((uint16_t *)backup + at_c[0], g.m, 2);
            vec r(g.m), c0(got.begin(), got.begin() + g.m);
            for (int i = 0; i < g.m; i++) {
                double sum = g.beta ? c[i] : 0.0;
                for (int p = 0; p < g.k; p++)
                    sum += (g.ta ? a[(size_t)i * g.lda + p] : a[(size_t)p * g.lda + i]) * (g.tb ? b[(size_t)p * g.ldb] : b[p]);
                r[i] = sum;
            }
            snprintf(what, sizeof what, "%s %s expert 0 column 0 vs float64", s->name, pass);
            dev_check(what, c0, r, 1e-2);
            want = got;
        } else {
            snprintf(what, sizeof what, "%s %s version %d vs 1", s->name, pass, v);
            dev_check(what, got, want, 1e-2);
        }
    }
    CK(cudaFree(backup));

    const gemm_shape &g0 = L.g[0];
    for (int v = 1; v <= 3; v++) {
        const double wall0 = wall_s();
        double us = dev_time_us([&] { run(v, h, &L, lanes, fork, joined); });
        CK(cudaDeviceSynchronize());
        double t0 = host_now_s();
        for (int i = 0; i < 20; i++) run(v, h, &L, lanes, fork, joined);
        double host_us = (host_now_s() - t0) / 20 * 1e6;
        CK(cudaDeviceSynchronize());
        printf("%s,%s_%s,%d,%d,%.2f,%d,%d,%d,%d,%.1f,%.1f,%.3f,%.3f\n", s->name, in == s->hidden ? "up" : "down", pass,
               L.E, s->rows_mean, s->cv, g0.m, !strcmp(pass, "wgrad") ? g0.n : s->rows_mean,
               !strcmp(pass, "wgrad") ? s->rows_mean : g0.k, v, us, host_us, wall0, wall_s());
        fflush(stdout);
    }
    CK(cudaFree(L.pool));
    CK(cudaFree(L.dA));
    CK(cudaFree(L.dB));
    CK(cudaFree(L.dC));
}

int main(int argc, char **argv) {
    const char *only = argc > 1 ? argv[1] : NULL;
    int known = !only;
    for (const moe_shape &s : SHAPES) known |= only && !strcmp(only, s.name);
    if (!known) {
        fprintf(stderr, "expert_grouped [olmoe|mixtral|test]\n");
        return 2;
    }
    cublasHandle_t h;
    CB(cublasCreate(&h));
    cudaStream_t lanes[STREAMS];
    cudaEvent_t fork, joined[STREAMS];
    for (int i = 0; i < STREAMS; i++) {
        CK(cudaStreamCreateWithFlags(&lanes[i], cudaStreamNonBlocking));
        CK(cudaEventCreateWithFlags(&joined[i], cudaEventDisableTiming));
    }
    CK(cudaEventCreateWithFlags(&fork, cudaEventDisableTiming));
    printf("model,pass,experts,rows_mean,cv,m,n,k,version,gpu_us,host_us,t0,t1\n");
    const char *passes[3] = {"fwd", "dgrad", "wgrad"};
    for (const moe_shape &s : SHAPES) {
        if (only && strcmp(only, s.name)) continue;
        for (int p = 0; p < 3; p++) {
            one_pass(&s, passes[p], s.hidden, s.up, h, lanes, fork, joined);   /* up: hidden -> 2 x ffn */
            one_pass(&s, passes[p], s.ffn, s.hidden, h, lanes, fork, joined);  /* down: ffn -> hidden */
        }
    }
    for (int i = 0; i < STREAMS; i++) {
        CK(cudaStreamDestroy(lanes[i]));
        CK(cudaEventDestroy(joined[i]));
    }
    CK(cudaEventDestroy(fork));
    CB(cublasDestroy(h));
    return g_dev_failed;
}
