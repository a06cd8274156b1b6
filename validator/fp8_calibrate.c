/* calibrate's FP8 GEMMs: every GEMM shape calibrate timed in bf16, timed again in FP8 and in
 * bf16 side by side on the same cuBLASLt path (fp8_time_gemm), and from the large ones the
 * planner's fp8_gemm_relative_efficiency: the FP8 GEMM's fraction of the FP8 peak over the
 * bf16 GEMM's fraction of the bf16 peak (hwdb.h; docs/model.md, "FP8 GEMMs"). */
#include "fp8_calibrate.h"

#include <stdio.h>

#include "bench.h"
#include "fp8.h"
#include "gpu_check.h"

/* Shapes below this many FLOPs wait on launches and memory more than on the tensor cores: they
 * say little about the plateau the planner's factor scales (the same 10 GFLOP as calibrate's
 * sustained clock). */
#define FP8_PLATEAU_FLOPS 1e10

int fp8_calibrate(const hw_gpu *g, const hw_gemm_time *shapes, int nshapes, void *const buffers[2], size_t buffer_bytes,
                  double *relative, double *relative_backward)
{
    *relative = *relative_backward = 0.0;
    char why[256];
    if (fp8_supported(why, sizeof why) != 0) {
        printf("\nFP8 GEMMs: not timed: %s\n", why);
        return -1;
    }
    if (g->peak_flops[PREC_FP8] <= 0 || g->peak_flops[PREC_BF16] <= 0) {
        printf("\nFP8 GEMMs: not timed: hwdb row %s has no FP8 or bf16 peak\n", g->name);
        return -1;
    }
    cublasLtHandle_t lt;
    void *ws;
    cudaStream_t stream;
    const size_t ws_bytes = 32u << 20;
    CB(cublasLtCreate(&lt));
    CK(cudaMalloc(&ws, ws_bytes));
    CK(cudaStreamCreate(&stream));
    fp8_init(lt, ws, ws_bytes);
    printf("\nFP8 GEMMs D[M, N] = X[M, K] W[N, K]^T (E4M3 operands cast beforehand with per-tensor scales, bf16 output, "
           "fp32 fast accumulation as TE's forward, and without it as TE's backward) against bf16 on the same cuBLASLt path, "
           "back to back\n");
    printf("%7s %7s %7s %11s %13s %11s %8s %8s %8s\n", "M", "N", "K", "fp8 us", "fp8 exact us", "bf16 us", "fp8", "bf16",
           "speed-up");
    double sum_fp8 = 0.0, sum_exact = 0.0, sum_bf16 = 0.0;
    int timed = 0, plateau = 0;
    for (int i = 0; i < nshapes; i++) {
        const hw_gemm_time *s = &shapes[i];
        double t8, t8x, t16, F = 2.0 * (double)s->m * (double)s->n * (double)s->k;
        scratch_refresh();   /* the last shape's output lies where this one reads (bench.h) */
        if (fp8_time_gemm((int)s->m, (int)s->n, (int)s->k, buffers, buffer_bytes, stream, &t8, &t8x, &t16) != 0) continue;
        timed++;
        printf("%7lld %7lld %7lld %11.1f %13.1f %11.1f %7.1f%% %7.1f%% %8.2f\n", (long long)s->m, (long long)s->n,
               (long long)s->k, t8 * 1e6, t8x * 1e6, t16 * 1e6, 100.0 * F / t8 / g->peak_flops[PREC_FP8],
               100.0 * F / t16 / g->peak_flops[PREC_BF16], t16 / t8);
        if (F < FP8_PLATEAU_FLOPS) continue;
        sum_fp8 += t8;
        sum_exact += t8x;
        sum_bf16 += t16;
        plateau++;
    }
    fp8_free();
    CK(cudaStreamDestroy(stream));
    CK(cudaFree(ws));
    CB(cublasLtDestroy(lt));
    if (!plateau) {
        printf("FP8 GEMMs: %d shapes timed, none of %.0f GFLOP or more: no relative efficiency\n", timed,
               FP8_PLATEAU_FLOPS / 1e9);
        return -1;
    }
    /* summed times: the ratio a step made of these GEMMs would see */
    *relative = sum_bf16 / sum_fp8 * g->peak_flops[PREC_BF16] / g->peak_flops[PREC_FP8];
    *relative_backward = sum_bf16 / sum_exact * g->peak_flops[PREC_BF16] / g->peak_flops[PREC_FP8];
    printf("FP8 GEMMs: %d shapes timed; over the %d of %.0f GFLOP or more FP8 takes %.3f of bf16's time: "
           "fp8_gemm_relative_efficiency %.3f (FP8's share of its peak over bf16's share of its own)\n", timed, plateau,
           FP8_PLATEAU_FLOPS / 1e9, sum_fp8 / sum_bf16, *relative);
    printf("FP8 GEMMs without fast accumulation take %.3f of bf16's time: fp8_backward_gemm_relative_efficiency %.3f\n",
           sum_exact / sum_bf16, *relative_backward);
    return 0;
}
