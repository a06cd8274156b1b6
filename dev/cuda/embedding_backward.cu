/* The embedding backward (dwte, and dwpe where there are learned positions), in llm.c's dev/cuda
 * manner: the CPU reference (kernels/reference.c), the paths the project has had, a check of each
 * against the reference and a benchmark of each against a device-to-device copy.  The version
 * numbers are the path numbers of sx_embedding_backward_tune, which reports cite:
 *
 *   version 1: the sorted path (CUB radix sort, windows of 32 summed by warps, ordered merge);
 *     production's fallback where the tiled path does not apply (library, path 1).
 *   version 2: the tiled path (per-tile sort in shared memory, one warp per work item);
 *     what sx_embedding_backward runs for N <= 131072 and V <= 262142 (library, automatic).
 *   version 4: the atomic experiment: every token's row of dout added into dwte[id] and dwpe[t]
 *     with Hopper's vector reductions in L2, in no fixed order.  Not deterministic, and a bf16
 *     dwte is rounded after every addition.  Never production; kept here to show what the
 *     ordered paths cost against it.
 *   version 5: the same for dwte, dwpe by an ordered kernel (each position sums b in order).
 *   version 6: the grouped path (prepare + apply; the training step runs prepare beside the
 *     forward pass and apply in the backward: sx_embedding_backward_prepare / _apply).
 * Versions 1, 2 and 6 are bitwise reproducible and are called through libkernels.a.
 *
 *   embedding_backward [version [B T C V]] [--bf16] [--no-wpe]
 *     version: 1, 2, 4, 5 or 6 (0 or none: every version); B T C V: the benchmark's size
 *     (default GPT-2 124M's 32 x 1024 tokens, C = 768, ids in [0, 50257), 50304 rows of dwte);
 *     --bf16: bf16 gradients (default fp32); --no-wpe: no position embedding.
 * The check runs at several sizes first; the exit status is 1 if any check failed.
 * Build: make dev (dev/cuda/Makefile). */
#include <string.h>
#include "common.cuh"
#include "kernels.h"
#include "kernels_internal.h"
#include "dev_util.h"

/* ------------------------------------------------------------------ versions 4 and 5 */

/* Each thread handles U units of 8 channels: loads first, then the adds. */
__device__ __forceinline__ void red_add_f32x4(float *p, float a, float b, float c, float d) {
#if __CUDA_ARCH__ >= 900
    asm volatile("red.global.add.v4.f32 [%0], {%1, %2, %3, %4};" ::"l"(p), "f"(a), "f"(b), "f"(c), "f"(d) : "memory");
#else
    atomicAdd(p, a); atomicAdd(p + 1, b); atomicAdd(p + 2, c); atomicAdd(p + 3, d);
#endif
}
__device__ __forceinline__ void red_add_bf16x8(bf16 *p, const float *v) {
    __nv_bfloat162 h[4];
#pragma unroll
    for (int k = 0; k < 4; k++) h[k] = __floats2bfloat162_rn(v[2 * k], v[2 * k + 1]);
#if __CUDA_ARCH__ >= 900
    const unsigned *u = reinterpret_cast<const unsigned *>(h);
    asm volatile("red.global.add.noftz.v4.bf16x2 [%0], {%1, %2, %3, %4};" ::"l"(p), "r"(u[0]), "r"(u[1]), "r"(u[2]),
                 "r"(u[3]) : "memory");
#else
#pragma unroll
    for (int k = 0; k < 4; k++) atomicAdd(reinterpret_cast<__nv_bfloat162 *>(p) + k, h[k]);
#endif
}
__device__ __forceinline__ void red_add_row8(void *base, sx_dtype gt, size_t at, const float *v) {
    if (gt == SX_F32) {
        float *p = (float *)base + at;
        red_add_f32x4(p, v[0], v[1], v[2], v[3]);
        red_add_f32x4(p + 4, v[4], v[5], v[6], v[7]);
    } else {
        red_add_bf16x8((bf16 *)base + at, v);
    }
}

#define EMB_ATOMIC_U 4
template <bool FUSED_WPE>
__global__ void __launch_bounds__(256) emb_atomic_kernel(void *dwte, void *dwpe, sx_dtype gt, const bf16 *__restrict__ dout,
                                                         const int32_t *__restrict__ ids, int N, int T, int C, int V) {
    const int C8 = C / 8;
    const size_t units = (size_t)N * C8;
    const size_t first = ((size_t)blockIdx.x * blockDim.x + threadIdx.x);
    const size_t stride = (size_t)gridDim.x * blockDim.x;
    Pack<bf16> d[EMB_ATOMIC_U];
    int id[EMB_ATOMIC_U];
#pragma unroll
    for (int k = 0; k < EMB_ATOMIC_U; k++) {
        const size_t u = first + k * stride;
        if (u < units) {
            d[k] = ld_pack_cs(dout + u * 8);
            id[k] = __ldg(ids + u / C8);
        }
    }
#pragma unroll
    for (int k = 0; k < EMB_ATOMIC_U; k++) {
        const size_t u = first + k * stride;
        if (u >= units) break;
        const size_t n = u / C8, c = (u % C8) * 8;
        float v[8];
#pragma unroll
        for (int j = 0; j < 8; j++) v[j] = d[k].get(j);
        if (id[k] >= 0 && id[k] < V) red_add_row8(dwte, gt, (size_t)id[k] * C + c, v);
        if (FUSED_WPE && dwpe) red_add_row8(dwpe, gt, (n % T) * C + c, v);
    }
}


/* version 5's dwpe: one thread per (t, 8 channels) sums dout over b in order, in fp32, and adds
 * the sum into dwpe once */
__global__ void wpe_ordered_kernel(void *dwpe, sx_dtype gt, const bf16 *__restrict__ dout, int B, int T, int C) {
    const size_t idx = ((size_t)blockIdx.x * blockDim.x + threadIdx.x) * 8;
    if (idx >= (size_t)T * C) return;
    float acc[8] = {0, 0, 0, 0, 0, 0, 0, 0};
    for (int b = 0; b < B; b++) {
        const Pack<bf16> d = ld_pack(dout + (size_t)b * T * C + idx);
#pragma unroll
        for (int k = 0; k < 8; k++) acc[k] += d.get(k);
    }
#pragma unroll
    for (int k = 0; k < 8; k++) grad_add(dwpe, gt, idx + k, acc[k]);
}

static cudaError_t emb_backward_atomic(void *dwte, void *dwpe, sx_dtype grad_type, const bf16 *dout, const int32_t *ids,
                                       int B, int T, int C, int V, bool fused_wpe, cudaStream_t stream) {
    const int N = B * T;
    SX_REQUIRE(C % 8 == 0 && sx_aligned16(dout) && sx_aligned16(dwte) && (!dwpe || sx_aligned16(dwpe)));
    const int threads = 256;
    if (dwpe && !fused_wpe) {
        wpe_ordered_kernel<<<sx_blocks((size_t)T * C / 8, threads), threads, 0, stream>>>(dwpe, grad_type, dout, B, T, C);
        SX_CHECK(cudaGetLastError());
    }
    const size_t units = (size_t)N * (C / 8);
    const unsigned grid = sx_blocks((units + EMB_ATOMIC_U - 1) / EMB_ATOMIC_U, threads);
    if (fused_wpe)
        emb_atomic_kernel<true><<<grid, threads, 0, stream>>>(dwte, dwpe, grad_type, dout, ids, N, T, C, V);
    else
        emb_atomic_kernel<false><<<grid, threads, 0, stream>>>(dwte, NULL, grad_type, dout, ids, N, T, C, V);
    SX_LAUNCHED();
}

/* ------------------------------------------------------------------ the versions */

static bool known_version(int v) { return v == 1 || v == 2 || v == 4 || v == 5 || v == 6; }

static void run_version(int v, void *dwte, void *dwpe, sx_dtype gt, const void *dout, const int32_t *ids, void *ws,
                        size_t wsb, int B, int T, int C, int V) {
    if (v == 4 || v == 5) {
        CK(emb_backward_atomic(dwte, dwpe, gt, (const bf16 *)dout, ids, B, T, C, V, v == 4, 0));
        return;
    }
    sx_embedding_backward_tune(v, 0, -1, -1, -1);
    CK(sx_embedding_backward(dwte, dwpe, gt, (const sx_bf16 *)dout, ids, ws, wsb, B, T, C, V, 0));
    sx_embedding_backward_tune(0, 0, -1, -1, -1);
}

/* ids: 0 = skewed (V u^3: many repeats of small ids, like text), 1 = uniform */
static std::vector<int32_t> make_ids(int N, int V, int mode) {
    std::vector<int32_t> ids(N);
    for (int n = 0; n < N; n++)
        ids[n] = mode == 1 ? (int32_t)(rng_u64() % (uint64_t)V) : (int32_t)(V * pow(rng_unif(), 3.0));
    return ids;
}

/* version v against the reference at one size; the ordered versions also run twice for bitwise
 * equality.  dwte and dwpe start from random values (the backward adds into them). */
static void check_version(int v, int B, int T, int C, int V, bool wpe, sx_dtype gt, int ids_mode) {
    const int N = B * T, es = gt == SX_F32 ? 4 : 2;
    std::vector<int32_t> ids = make_ids(N, V, ids_mode);
    vec dout = dev_randn((size_t)N * C, 0, 1.0), dwte = dev_randn((size_t)V * C, 0, 0.01),
        dwpe = dev_randn((size_t)T * C, 0, 0.01);
    void *d_dout = dev_up(dout, 2), *d_dwte = dev_up(dwte, es), *d_dwpe = wpe ? dev_up(dwpe, es) : NULL;
    void *d_dwte0 = dmalloc((size_t)V * C * es), *d_ids = dmalloc((size_t)N * 4);
    CK(cudaMemcpy(d_dwte0, d_dwte, (size_t)V * C * es, cudaMemcpyDeviceToDevice));
    CK(cudaMemcpy(d_ids, ids.data(), (size_t)N * 4, cudaMemcpyHostToDevice));
    const size_t wsb = sx_embedding_backward_workspace_bytes(N, C, V);
    void *ws = dmalloc(wsb);
    printf("version %d B*T=%dx%d C=%d V=%d %s%s ids %s\n", v, B, T, C, V, es == 4 ? "fp32" : "bf16",
           wpe ? " wpe" : "", ids_mode ? "uniform" : "skewed");
    run_version(v, d_dwte, d_dwpe, gt, d_dout, (const int32_t *)d_ids, ws, wsb, B, T, C, V);
    ref_embedding_backward(dwte.data(), wpe ? dwpe.data() : NULL, dout.data(), ids.data(), B, T, C, V);
    const double tol = es == 4 ? 1e-5 : 1e-2;
    dev_check("dwte", dev_down(d_dwte, dwte.size(), es), dwte, tol);
    if (wpe) dev_check("dwpe", dev_down(d_dwpe, dwpe.size(), es), dwpe, tol);
    if (v != 4 && v != 5) {
        const std::vector<uint8_t> first = dev_raw(d_dwte, (size_t)V * C * es);
        CK(cudaMemcpy(d_dwte, d_dwte0, (size_t)V * C * es, cudaMemcpyDeviceToDevice));
        run_version(v, d_dwte, NULL, gt, d_dout, (const int32_t *)d_ids, ws, wsb, B, T, C, V);
        dev_check_true("bitwise equal twice", dev_raw(d_dwte, first.size()) == first);
    }
    void *p[] = {d_dout, d_dwte, d_dwpe, d_dwte0, d_ids, ws};
    for (void *q : p)
        if (q) CK(cudaFree(q));
}

int main(int argc, char **argv) {
    int version = 0, B = 32, T = 1024, C = 768, V = 50257, npos = 0;
    bool wpe = true;
    sx_dtype gt = SX_F32;
    for (int i = 1; i < argc; i++) {
        if (!strcmp(argv[i], "--bf16")) gt = SX_BF16;
        else if (!strcmp(argv[i], "--no-wpe")) wpe = false;
        else if (argv[i][0] != '-' && npos < 5) { /* version, B, T, C, V in that order */
            const int x = atoi(argv[i]);
            if (npos == 0) version = x;
            else if (npos == 1) B = x;
            else if (npos == 2) T = x;
            else if (npos == 3) C = x;
            else V = x;
            npos++;
        } else {
            fprintf(stderr, "usage: %s [version [B T C V]] [--bf16] [--no-wpe]\n", argv[0]);
            return 2;
        }
    }
    if ((version && !known_version(version)) || B < 1 || T < 1 || C < 8 || C % 8 || V < 1) {
        fprintf(stderr, "%s: version must be 1, 2, 4, 5 or 6 (or none: all); B, T, V positive, C a multiple of 8\n",
                argv[0]);
        return 2;
    }
    /* the check: GPT-2's width, fp32 with skewed ids and bf16 with uniform ones (a bf16 dwte
     * rounded per addition is within tolerance only where ids repeat little) */
    for (int v = 1; v <= 6; v++) {
        if (!known_version(v) || (version && v != version)) continue;
        check_version(v, 31, 97, 768, 50257, true, SX_F32, 0);
        check_version(v, 4, 1000, 72, 1009, true, SX_BF16, 1);
        check_version(v, 31, 97, 768, 50257, false, SX_F32, 0);
    }
    /* the benchmark: ids skewed over [0, V), dwte of V rounded up to a multiple of 64 rows */
    const int N = B * T, Vp = (V + 63) / 64 * 64, es = gt == SX_F32 ? 4 : 2;
    std::vector<int32_t> ids = make_ids(N, V, 0);
    int32_t *d_ids = (int32_t *)dmalloc((size_t)N * 4);
    CK(cudaMemcpy(d_ids, ids.data(), (size_t)N * 4, cudaMemcpyHostToDevice));
    std::sort(ids.begin(), ids.end());
    const size_t uniq = std::unique(ids.begin(), ids.end()) - ids.begin();
    void *dout = dmalloc((size_t)N * C * 2), *dwte = dmalloc((size_t)Vp * C * es);
    void *dwpe = wpe ? dmalloc((size_t)T * C * es) : NULL;
    CK(cudaMemset(dout, 0x3c, (size_t)N * C * 2));
    CK(cudaMemset(dwte, 0, (size_t)Vp * C * es));
    if (dwpe) CK(cudaMemset(dwpe, 0, (size_t)T * C * es));
    const size_t wsb = sx_embedding_backward_workspace_bytes(N, C, Vp);
    void *ws = dmalloc(wsb);
    /* ids read, dout read once, each touched dwte row read and written, dwpe read and written */
    const double bytes = N * 4.0 + (double)N * C * 2 + (double)uniq * C * es * 2 + (wpe ? (double)T * C * es * 2 : 0.0);
    const double copy_us = dev_copy_us(bytes);
    char what[96];
    snprintf(what, sizeof what, "embedding_bwd(%s%s) N=%d C=%d V=%d", es == 4 ? "fp32" : "bf16", wpe ? ",wpe" : "", N,
             C, V);
    for (int v = 1; v <= 6; v++) {
        if (!known_version(v) || (version && v != version)) continue;
        const double us = dev_time_us([&] { run_version(v, dwte, dwpe, gt, dout, d_ids, ws, wsb, B, T, C, Vp); });
        dev_report(v, what, bytes, us, copy_us);
    }
    void *p[] = {d_ids, dout, dwte, dwpe, ws};
    for (void *q : p)
        if (q) CK(cudaFree(q));
    printf("%s\n", g_dev_failed ? "FAILED" : "all checks passed");
    return g_dev_failed ? 1 : 0;
}
