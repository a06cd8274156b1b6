/* The causal softmax forward (unfused attention's P = softmax(scale S), zeros above the diagonal),
 * in llm.c's dev/cuda manner: the CPU reference (kernels/reference.c), both versions, a check of
 * each against the reference and a benchmark of each against a device-to-device copy.
 *
 *   version 1: the live part of the row held in registers (CH chunks of 32 lanes x 8 bf16), read
 *     once, the exponentials kept in registers, the row written once.  T % 8 == 0, T <= 2048.
 *   version 2: what kernels/softmax.cu runs (sx_softmax_causal_forward): pass 1 reads the live
 *     part (online max and sum), pass 2 re-reads it from L1/L2 and writes the row.
 * Version 1 keeps fewer bytes in flight: ahead on an H100, behind on an H200 (README.md).
 *
 *   softmax_forward [version [BH T]]
 *     version: 1 or 2 (0 or none: both); BH T: the benchmark's rows and length (default GPT-2
 *     124M's 32 x 12 heads, T = 1024).
 * The check runs at several sizes first; the exit status is 1 if any check failed.
 * Build: make dev (dev/cuda/Makefile). */
#include <string.h>
#include "common.cuh"
#include "kernels.h"
#include "dev_util.h"

#define SM_THREADS 256
#define LOG2E 1.4426950408889634f

/* Version 1, for T <= 256*CH: the live part of the row is read once into registers (CH
 * chunks of 32 lanes x 8 bf16), the exponentials are kept in registers too, and the whole
 * row is written once: one DRAM read of the triangle, one write of the row, no re-read. */
template <int CH>
__global__ void __launch_bounds__(SM_THREADS, CH <= 4 ? 4 : 2)
softmax_causal_fwd_reg(bf16 *__restrict__ out, const bf16 *__restrict__ in, int rows, int T, float sl2) {
    const int lane = threadIdx.x % SX_WARP;
    const int row = blockIdx.x * (blockDim.x / SX_WARP) + threadIdx.x / SX_WARP;
    if (row >= rows) return;
    const int L = row % T + 1;
    const bf16 *x = in + (size_t)row * T;
    bf16 *o = out + (size_t)row * T;
    Pack<bf16> xv[CH];
#pragma unroll
    for (int c = 0; c < CH; c++) {
        const int col = (c * SX_WARP + lane) * 8;
        if (col < L) xv[c] = ld_pack_cs(x + col);
    }
    float mx = -INFINITY;
#pragma unroll
    for (int c = 0; c < CH; c++) {
        const int col = (c * SX_WARP + lane) * 8;
#pragma unroll
        for (int k = 0; k < 8; k++)
            if (col + k < L) mx = fmaxf(mx, xv[c].get(k) * sl2);
    }
    const float M = warp_max(mx);
    float e[CH][8], s = 0.0f;
#pragma unroll
    for (int c = 0; c < CH; c++) {
        const int col = (c * SX_WARP + lane) * 8;
#pragma unroll
        for (int k = 0; k < 8; k++) {
            e[c][k] = col + k < L ? exp2f(xv[c].get(k) * sl2 - M) : 0.0f;
            s += e[c][k];
        }
    }
    const float inv = 1.0f / warp_sum(s);
#pragma unroll
    for (int c = 0; c < CH; c++) {
        const int col = (c * SX_WARP + lane) * 8;
        if (col < T) {
            Pack<bf16> r;
#pragma unroll
            for (int k = 0; k < 8; k++) r.set(k, e[c][k] * inv);
            st_pack_cs(o + col, r);
        }
    }
}

static bool applies(int v, int T) { return v == 2 || (T % 8 == 0 && T <= 2048); }

static void run_version(int v, bf16 *out, const bf16 *s, int BH, int T, float scale) {
    if (v == 2) {
        CK(sx_softmax_causal_forward((sx_bf16 *)out, (const sx_bf16 *)s, BH, T, scale, 0));
        return;
    }
    const int rows = BH * T, ch = (T + 255) / 256;
    const unsigned grid = sx_blocks((size_t)rows, SM_THREADS / SX_WARP);
    const float sl2 = scale * LOG2E;
    if (ch <= 1) softmax_causal_fwd_reg<1><<<grid, SM_THREADS>>>(out, s, rows, T, sl2);
    else if (ch <= 2) softmax_causal_fwd_reg<2><<<grid, SM_THREADS>>>(out, s, rows, T, sl2);
    else if (ch <= 4) softmax_causal_fwd_reg<4><<<grid, SM_THREADS>>>(out, s, rows, T, sl2);
    else softmax_causal_fwd_reg<8><<<grid, SM_THREADS>>>(out, s, rows, T, sl2);
    CK(cudaGetLastError());
}

static void check_version(int v, int BH, int T) {
    if (!applies(v, T)) {
        printf("version %d BH=%d T=%d: does not apply (T %% 8 != 0 or T > 2048)\n", v, BH, T);
        return;
    }
    printf("version %d BH=%d T=%d\n", v, BH, T);
    const size_t n = (size_t)BH * T * T;
    const double scale = 0.125;
    vec s = dev_randn(n, 0, 8.0), ref(n);
    void *d_s = dev_up(s, 2), *d_p = dmalloc(n * 2);
    CK(cudaMemset(d_p, 0xff, n * 2));
    ref_softmax_causal_forward(ref.data(), s.data(), BH, T, scale);
    run_version(v, (bf16 *)d_p, (const bf16 *)d_s, BH, T, (float)scale);
    dev_check("out", dev_down(d_p, n, 2), ref, 1e-2);
    CK(cudaFree(d_s));
    CK(cudaFree(d_p));
}

int main(int argc, char **argv) {
    int version = 0, BH = 384, T = 1024, npos = 0;
    for (int i = 1; i < argc; i++) {
        if (argv[i][0] != '-' && npos < 3) { /* version, BH, T in that order */
            const int x = atoi(argv[i]);
            if (npos == 0) version = x;
            else if (npos == 1) BH = x;
            else T = x;
            npos++;
        } else {
            fprintf(stderr, "usage: %s [version [BH T]]\n", argv[0]);
            return 2;
        }
    }
    if (version < 0 || version > 2 || BH < 1 || T < 1 || (size_t)BH * T >= (1u << 31)) {
        fprintf(stderr, "%s: version must be 1 or 2 (or none: both); BH, T positive\n", argv[0]);
        return 2;
    }
    const int first = version ? version : 1, last = version ? version : 2;
    /* the check: 4, 1 and 8 register chunks, T > 2048, T % 8 != 0 (the test_kernels sizes) */
    static const int sizes[][2] = {{6, 1000}, {3, 200}, {2, 2000}, {1, 2056}, {5, 77}};
    for (int v = first; v <= last; v++)
        for (const auto &z : sizes) check_version(v, z[0], z[1]);
    /* the benchmark: the live triangle read once, the whole row written */
    const size_t n = (size_t)BH * T * T;
    void *s = dmalloc(n * 2), *p = dmalloc(n * 2);
    CK(cudaMemset(s, 0x3c, n * 2));
    const double tri = (double)BH * T * (T + 1) / 2.0, bytes = tri * 2.0 + n * 2.0, copy_us = dev_copy_us(bytes);
    char what[96];
    snprintf(what, sizeof what, "softmax_causal_fwd BH=%d T=%d", BH, T);
    for (int v = first; v <= last; v++) {
        if (!applies(v, T)) {
            printf("version %d %-40s does not apply\n", v, what);
            continue;
        }
        const double us = dev_time_us([&] { run_version(v, (bf16 *)p, (const bf16 *)s, BH, T, 0.125f); });
        dev_report(v, what, bytes, us, copy_us);
    }
    CK(cudaFree(s));
    CK(cudaFree(p));
    printf("%s\n", g_dev_failed ? "FAILED" : "all checks passed");
    return g_dev_failed ? 1 : 0;
}
