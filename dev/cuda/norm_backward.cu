/* The norm backward (LayerNorm, RMSNorm), in llm.c's dev/cuda manner: the CPU reference, the
 * versions the project has had, a check of each against the reference and a benchmark of each
 * against a device-to-device copy.
 *
 *   version 1: rows strided over a persistent grid, one block-wide barrier per row; the next
 *     row prefetched into registers (norm_backward_rows) or K packs per thread copied into a
 *     per-thread cp.async ring of S stages (norm_backward_staged).  Automatic: C <= 768 one
 *     pack per thread and no ring, else two packs and 4 stages.  Replaced by version 2.
 *   version 2: what kernels/norm.cu runs (sx_layernorm_backward, sx_rmsnorm_backward): each
 *     block owns a contiguous range of rows, a row group meets at a named barrier of its own;
 *     registers, or bulk copies into a shared-memory ring for RMSNorm at C >= 4096.
 * Both end with the same per-block partials and ordered reduction (kernels/norm_partial.cuh),
 * so both are bitwise reproducible for a given grid.
 *
 *   norm_backward [version [N C]] [--rms] [--f32] [--acc] [--k K] [--stages S] [--bps B]
 *     version: 1 or 2 (0 or none: every version); N C: the benchmark's size (default GPT-2 124M's
 *     32768 x 768); --k, --stages, --bps: version 1's packs per thread, ring stages (0 = no
 *     ring) and cap on blocks per SM (default automatic); --acc: dx += (else dx =).
 * The check runs at several sizes first; the exit status is 1 if any check failed.
 * Build: make dev (dev/cuda/Makefile). */
#include <string.h>
#include "common.cuh"
#include "norm_partial.cuh"
#include "kernels.h"
#include "dev_util.h"

/* ------------------------------------------------------------------ version 1 */

/* Version 1, registers (norm_backward_rows).  A "row group" of W warps (TPR = 32 W threads) owns one row at a time; thread
 * t of the group owns the K 16-byte packs at columns (k TPR + t) P, k < K, of every row it
 * sees, so its dweight/dbias partial sums for those columns stay in registers for the whole
 * kernel.  A block holds NG groups (NG W 32 threads); the grid is persistent (as many blocks
 * as fit), block b's groups take rows (it G + b) NG + g.  Per row: x, dy (and dx when
 * accumulating) are read once with 16-byte loads, the next row's loads are issued before
 * the current row is reduced (one row in flight while one is computed), the two row sums
 * are reduced in the warp with shuffles and, for W > 1, across the group's warps through
 * shared memory in warp order (one barrier per row, double-buffered), and dx is written
 * once.  At the end the block sums its NG groups' registers in group order and writes its
 * [2][C] partial; norm_param_reduce sums the G partials in block order.  Deterministic. */
template <typename T, bool RMS, int K, bool ACC>
__global__ void __launch_bounds__(512, K == 1 ? 2 : 1)
norm_backward_rows(T *dx, float *__restrict__ part, const T *__restrict__ dy, const T *__restrict__ x,
                   const T *__restrict__ w, const float *__restrict__ mean, const float *__restrict__ rstd,
                   int N, int C, int W) {
    constexpr bool accumulate = ACC;
    extern __shared__ float4 norm_smem[];
    constexpr int P = Pack<T>::N;
    sx_griddep_launch(); /* the reduce kernel may be scheduled now; it waits for this grid */
    const int TPR = W * SX_WARP;
    const int NG = blockDim.x / TPR;
    const int warp = threadIdx.x / SX_WARP, lane = threadIdx.x % SX_WARP;
    const int g = warp / W, wi = warp % W, t = threadIdx.x % TPR;
    float2 *red = reinterpret_cast<float2 *>(norm_smem);            /* [2][NG][W] row sums */
    float *gbuf = reinterpret_cast<float *>(red + 2 * NG * W);      /* [NG][NA][C] when NG > 1 */

    int col[K];
    bool ok[K];
    Pack<T> wv[K];
#pragma unroll
    for (int k = 0; k < K; k++) {
        col[k] = (k * TPR + t) * P;
        ok[k] = col[k] < C;
        wv[k].bits = ok[k] ? ld_pack(w + col[k]).bits : make_int4(0, 0, 0, 0);
    }
    float aw[K][P], ab[K][P];
#pragma unroll
    for (int k = 0; k < K; k++)
#pragma unroll
        for (int e = 0; e < P; e++) aw[k][e] = ab[k][e] = 0.0f;

    Pack<T> cx[K], cg[K], cd[K], nx[K], ng[K], nd[K];
#pragma unroll
    for (int k = 0; k < K; k++) cx[k].bits = cg[k].bits = cd[k].bits = nx[k].bits = ng[k].bits = nd[k].bits = make_int4(0, 0, 0, 0);
    float cm = 0.0f, cr = 0.0f, nm = 0.0f, nr = 0.0f;
    const int step = gridDim.x * NG;
    int base = blockIdx.x * NG;
    int row = base + g;
    bool have = row < N;
    if (have) {
#pragma unroll
        for (int k = 0; k < K; k++)
            if (ok[k]) {
                cx[k] = ld_pack_cs(x + (size_t)row * C + col[k]);
                cg[k] = ld_pack_cs(dy + (size_t)row * C + col[k]);
                if (accumulate) cd[k] = ld_pack_plain(dx + (size_t)row * C + col[k]);
            }
        cm = RMS ? 0.0f : __ldg(mean + row);
        cr = __ldg(rstd + row);
    }
    for (int it = 0; base < N; base += step, it ^= 1) {
        const int nrow = base + step + g;
        const bool nhave = nrow < N;
        if (nhave) { /* next row's loads in flight while this one is reduced */
#pragma unroll
            for (int k = 0; k < K; k++)
                if (ok[k]) {
                    nx[k] = ld_pack_cs(x + (size_t)nrow * C + col[k]);
                    ng[k] = ld_pack_cs(dy + (size_t)nrow * C + col[k]);
                    if (accumulate) nd[k] = ld_pack_plain(dx + (size_t)nrow * C + col[k]);
                }
            nm = RMS ? 0.0f : __ldg(mean + nrow);
            nr = __ldg(rstd + nrow);
        }
        float s1 = 0.0f, s2 = 0.0f;
        if (have) {
#pragma unroll
            for (int k = 0; k < K; k++)
                if (ok[k])
#pragma unroll
                    for (int e = 0; e < P; e++) {
                        const float xh = (cx[k].get(e) - cm) * cr;
                        const float d = cg[k].get(e);
                        const float gg = d * wv[k].get(e);
                        s1 += gg;
                        s2 += gg * xh;
                        aw[k][e] += d * xh;
                        if (!RMS) ab[k][e] += d;
                    }
        }
        s1 = warp_sum(s1);
        s2 = warp_sum(s2);
        if (W > 1) {
            float2 *rb = red + (it * NG + g) * W;
            if (lane == 0) rb[wi] = make_float2(s1, s2);
            __syncthreads();
            s1 = 0.0f;
            s2 = 0.0f;
            for (int i = 0; i < W; i++) {
                const float2 q = rb[i];
                s1 += q.x;
                s2 += q.y;
            }
        }
        if (have) {
            const float m1 = RMS ? 0.0f : s1 / C, m2 = s2 / C;
            T *dxr = dx + (size_t)row * C;
#pragma unroll
            for (int k = 0; k < K; k++)
                if (ok[k]) {
                    Pack<T> o;
#pragma unroll
                    for (int e = 0; e < P; e++) {
                        const float xh = (cx[k].get(e) - cm) * cr;
                        const float gg = cg[k].get(e) * wv[k].get(e);
                        float v = cr * (gg - m1 - xh * m2);
                        if (accumulate) v += cd[k].get(e);
                        o.set(e, v);
                    }
                    st_pack_cs(dxr + col[k], o);
                }
        }
#pragma unroll
        for (int k = 0; k < K; k++) {
            cx[k] = nx[k];
            cg[k] = ng[k];
            cd[k] = nd[k];
        }
        cm = nm;
        cr = nr;
        row = nrow;
        have = nhave;
    }
    norm_block_partial<T, RMS, K>(part, gbuf, aw, ab, col, ok, true, g, NG, C);
}

/* Version 1, staged (norm_backward_staged): the same with the rows staged through shared memory: every thread copies its own 16-byte
 * packs of the next S - 1 rows (x, dy, and dx when accumulating; its mean and rstd) into a
 * ring of S stages with cp.async, so S - 1 rows per thread are in flight while one is
 * reduced, and the data in flight holds no registers.  A thread reads back only what it
 * copied itself (cp.async.wait_group), so the ring needs no barrier; the per-row barrier for
 * W > 1 is the same as above.  After the loop the ring's memory holds the group partials. */
__device__ __forceinline__ unsigned nb_smem_u32(const void *p) { return (unsigned)__cvta_generic_to_shared(p); }
__device__ __forceinline__ void nb_cp16(unsigned s, const void *g) {
    asm volatile("cp.async.cg.shared.global [%0], [%1], 16;\n" ::"r"(s), "l"(g) : "memory");
}
__device__ __forceinline__ void nb_cp4(unsigned s, const void *g) {
    asm volatile("cp.async.ca.shared.global [%0], [%1], 4;\n" ::"r"(s), "l"(g) : "memory");
}
__device__ __forceinline__ void nb_commit() { asm volatile("cp.async.commit_group;\n" ::: "memory"); }
__device__ __forceinline__ void nb_wait(int n) { /* at most n groups still pending (n <= 7) */
    switch (n) {
    case 0: asm volatile("cp.async.wait_group 0;\n" ::: "memory"); break;
    case 1: asm volatile("cp.async.wait_group 1;\n" ::: "memory"); break;
    case 2: asm volatile("cp.async.wait_group 2;\n" ::: "memory"); break;
    case 3: asm volatile("cp.async.wait_group 3;\n" ::: "memory"); break;
    case 4: asm volatile("cp.async.wait_group 4;\n" ::: "memory"); break;
    case 5: asm volatile("cp.async.wait_group 5;\n" ::: "memory"); break;
    case 6: asm volatile("cp.async.wait_group 6;\n" ::: "memory"); break;
    default: asm volatile("cp.async.wait_group 7;\n" ::: "memory"); break;
    }
}

template <typename T, bool RMS, int K, bool ACC>
__global__ void __launch_bounds__(512, K == 1 ? 2 : 1)
norm_backward_staged(T *dx, float *__restrict__ part, const T *__restrict__ dy, const T *__restrict__ x,
                     const T *__restrict__ w, const float *__restrict__ mean, const float *__restrict__ rstd,
                     int N, int C, int W, int S) {
    extern __shared__ float4 norm_smem[];
    constexpr int P = Pack<T>::N;
    constexpr int NB = ACC ? 3 : 2; /* streams per pack: x, dy (, dx) */
    sx_griddep_launch();
    const int TPR = W * SX_WARP, nt = blockDim.x, tid = threadIdx.x;
    const int NG = nt / TPR;
    const int warp = tid / SX_WARP, lane = tid % SX_WARP;
    const int g = warp / W, wi = warp % W, t = tid % TPR;
    float2 *red = reinterpret_cast<float2 *>(norm_smem);             /* [2][NG][W] */
    int4 *ring = reinterpret_cast<int4 *>(red + 2 * NG * W);         /* [S][K][NB][nt] */
    float *sring = reinterpret_cast<float *>(ring + (size_t)S * K * NB * nt); /* [S][2][nt] */
    float *gbuf = reinterpret_cast<float *>(ring);                   /* [NG][NA][C] after the loop */

    int col[K];
    bool ok[K];
    Pack<T> wv[K];
#pragma unroll
    for (int k = 0; k < K; k++) {
        col[k] = (k * TPR + t) * P;
        ok[k] = col[k] < C;
        wv[k].bits = ok[k] ? ld_pack(w + col[k]).bits : make_int4(0, 0, 0, 0);
    }
    float aw[K][P], ab[K][P];
#pragma unroll
    for (int k = 0; k < K; k++)
#pragma unroll
        for (int e = 0; e < P; e++) aw[k][e] = ab[k][e] = 0.0f;

    const int nbr = (N + NG - 1) / NG; /* row blocks */
    const int nit = (int)blockIdx.x < nbr ? (nbr - 1 - (int)blockIdx.x) / (int)gridDim.x + 1 : 0;
    auto issue = [&](int i, int stage) {
        const int row = ((int)blockIdx.x + i * (int)gridDim.x) * NG + g;
        if (row < N) {
#pragma unroll
            for (int k = 0; k < K; k++)
                if (ok[k]) {
                    const size_t o = (size_t)row * C + col[k];
                    int4 *r = ring + ((size_t)(stage * K + k) * NB) * nt + tid;
                    nb_cp16(nb_smem_u32(r), x + o);
                    nb_cp16(nb_smem_u32(r + nt), dy + o);
                    if (ACC) nb_cp16(nb_smem_u32(r + 2 * nt), dx + o);
                }
            if (!RMS) nb_cp4(nb_smem_u32(sring + (stage * 2) * nt + tid), mean + row);
            nb_cp4(nb_smem_u32(sring + (stage * 2 + 1) * nt + tid), rstd + row);
        }
        nb_commit();
    };
    for (int i = 0; i < S - 1; i++) issue(i, i);
    for (int it = 0; it < nit; it++) {
        issue(it + S - 1, (it + S - 1) % S); /* refills the stage read in the previous iteration */
        nb_wait(S - 1);                      /* this thread's copies of row it have landed */
        const int stage = it % S;
        const int row = ((int)blockIdx.x + it * (int)gridDim.x) * NG + g;
        const bool have = row < N;
        Pack<T> cx[K], cg[K];
        float cm = 0.0f, cr = 0.0f, s1 = 0.0f, s2 = 0.0f;
        if (have) {
            cm = RMS ? 0.0f : sring[(stage * 2) * nt + tid];
            cr = sring[(stage * 2 + 1) * nt + tid];
#pragma unroll
            for (int k = 0; k < K; k++) {
                const int4 *r = ring + ((size_t)(stage * K + k) * NB) * nt + tid;
                cx[k].bits = cg[k].bits = make_int4(0, 0, 0, 0);
                if (ok[k]) {
                    cx[k].bits = r[0];
                    cg[k].bits = r[nt];
                }
                if (ok[k])
#pragma unroll
                    for (int e = 0; e < P; e++) {
                        const float xh = (cx[k].get(e) - cm) * cr;
                        const float d = cg[k].get(e);
                        const float gg = d * wv[k].get(e);
                        s1 += gg;
                        s2 += gg * xh;
                        aw[k][e] += d * xh;
                        if (!RMS) ab[k][e] += d;
                    }
            }
        }
        s1 = warp_sum(s1);
        s2 = warp_sum(s2);
        if (W > 1) {
            float2 *rb = red + ((it & 1) * NG + g) * W;
            if (lane == 0) rb[wi] = make_float2(s1, s2);
            __syncthreads();
            s1 = 0.0f;
            s2 = 0.0f;
            for (int i = 0; i < W; i++) {
                const float2 q = rb[i];
                s1 += q.x;
                s2 += q.y;
            }
        }
        if (have) {
            const float m1 = RMS ? 0.0f : s1 / C, m2 = s2 / C;
            T *dxr = dx + (size_t)row * C;
#pragma unroll
            for (int k = 0; k < K; k++)
                if (ok[k]) {
                    Pack<T> o, cd;
                    if (ACC) cd.bits = ring[((size_t)(stage * K + k) * NB + 2) * nt + tid];
#pragma unroll
                    for (int e = 0; e < P; e++) {
                        const float xh = (cx[k].get(e) - cm) * cr;
                        const float gg = cg[k].get(e) * wv[k].get(e);
                        float v = cr * (gg - m1 - xh * m2);
                        if (ACC) v += cd.get(e);
                        o.set(e, v);
                    }
                    st_pack_cs(dxr + col[k], o);
                }
        }
    }
    nb_wait(0);
    __syncthreads(); /* the ring is free: it holds the group partials now */
    norm_block_partial<T, RMS, K>(part, gbuf, aw, ab, col, ok, true, g, NG, C);
}

/* Version 1's automatic settings, from the sweep of docs/validation/archive/2026-11-23-h200-kernels (H200, bf16,
 * % of copy bandwidth).  C <= 768: 1 pack per thread, next row prefetched into registers (no
 * ring): at C = 768 LN 65.2%, RMS 79.5%, against 55.1% / 71.1% with the ring.  C > 768: 2
 * packs per thread and the 4-stage ring: at C = 1024 LN 70.7%, RMS 83.6% (1 pack without a
 * ring: 65.8% / 78.9%); at C = 4096 LN 63.3%, RMS 74.2% (56.0% / 68.1%). */
static int norm_auto_k(int C) { return C <= 768 ? 1 : 2; }
static int norm_auto_stages(int C) { return C <= 768 ? 0 : 4; /* 4 stages: 3 rows in flight per thread */ }

template <typename T, bool RMS, int K, bool ACC>
static cudaError_t launch_bwd_rows(T *dx, float *part, const T *dy, const T *x, const T *w, const float *mean,
                                   const float *rstd, int N, int C, int stages, int bps, int *G,
                                   cudaStream_t stream) {
    constexpr int P = Pack<T>::N;
    constexpr int NA = RMS ? 1 : 2;
    const int packs = (C + P - 1) / P;
    const int W = (packs + K * SX_WARP - 1) / (K * SX_WARP); /* warps per row */
    if (W > 16) return cudaErrorInvalidValue;
    int NG = 512 / (W * SX_WARP); /* rows in flight per block */
    if (NG < 1) NG = 1;
    const size_t gbytes = (size_t)NA * C * sizeof(float);
    while (NG > 1 && (size_t)NG * gbytes > 64 * 1024) NG--;
    const int threads = NG * W * SX_WARP;
    int S = stages >= 0 ? (stages > 8 ? 8 : stages) : norm_auto_stages(C);
    int dev = 0, smem_max = 0;
    SX_CHECK(cudaGetDevice(&dev));
    SX_CHECK(cudaDeviceGetAttribute(&smem_max, cudaDevAttrMaxSharedMemoryPerBlockOptin, dev));
    const size_t red = 2 * (size_t)NG * W * sizeof(float2);
    auto ring_bytes = [&](int st) {
        const size_t ring = (size_t)st * threads * (K * (ACC ? 3 : 2) * 16 + 8);
        return red + (ring > (size_t)NG * gbytes ? ring : (size_t)NG * gbytes);
    };
    while (S > 2 && ring_bytes(S) > (size_t)smem_max) S--; /* the ring must fit in one block's shared memory */
    const bool staged = S >= 2 && ring_bytes(S) <= (size_t)smem_max;
    const size_t smem = staged ? ring_bytes(S) : red + (NG > 1 ? (size_t)NG * gbytes : 0);
    auto kern = staged ? norm_backward_staged<T, RMS, K, ACC> : nullptr;
    const void *kf = staged ? (const void *)norm_backward_staged<T, RMS, K, ACC> : (const void *)norm_backward_rows<T, RMS, K, ACC>;
    SX_CHECK(cudaFuncSetAttribute(kf, cudaFuncAttributeMaxDynamicSharedMemorySize, (int)smem));
    int per_sm = 0;
    SX_CHECK(cudaOccupancyMaxActiveBlocksPerMultiprocessor(&per_sm, kf, threads, smem));
    if (per_sm < 1) per_sm = 1;
    if (bps > 0 && bps < per_sm) per_sm = bps;
    int g = sx_num_sms() * per_sm;
    const int need = (N + NG - 1) / NG;
    if (g > need) g = need;
    if (g > NORM_MAX_G) g = NORM_MAX_G;
    if (g < 1) g = 1;
    *G = g;
    if (staged)
        kern<<<g, threads, smem, stream>>>(dx, part, dy, x, w, mean, rstd, N, C, W, S);
    else
        norm_backward_rows<T, RMS, K, ACC><<<g, threads, smem, stream>>>(dx, part, dy, x, w, mean, rstd, N, C, W);
    return cudaGetLastError();
}

struct V1Knobs { int k, stages, bps; }; /* 0 / -1 = automatic */

template <typename T, bool RMS>
static cudaError_t norm_backward_v1(T *dx, void *dw, void *db, const T *dy, const T *x, const T *w, const float *mean,
                                    const float *rstd, int acc, void *ws, int N, int C, V1Knobs kn,
                                    cudaStream_t stream) {
    constexpr int P = Pack<T>::N;
    const int packs = (C + P - 1) / P;
    SX_REQUIRE(C % P == 0 && packs <= 2 * 16 * SX_WARP && sx_aligned16(dx) && sx_aligned16(dy) && sx_aligned16(x) &&
               sx_aligned16(w));
    float *part = (float *)ws;
    int k = kn.k ? kn.k : norm_auto_k(C), G = 0;
    if (k != 1 || packs > 16 * SX_WARP) k = 2; /* at most 16 warps (512 threads) per row */
#define NB_ROWS(KK, AA) launch_bwd_rows<T, RMS, KK, AA>(dx, part, dy, x, w, mean, rstd, N, C, kn.stages, kn.bps, &G, stream)
    if (k == 1) SX_CHECK(acc ? NB_ROWS(1, true) : NB_ROWS(1, false));
    else SX_CHECK(acc ? NB_ROWS(2, true) : NB_ROWS(2, false));
#undef NB_ROWS
    SX_CHECK(sx_launch(true, norm_param_reduce, dim3(sx_blocks(C, 32)), dim3(1024), 0, stream, dw, RMS ? nullptr : db,
                       SX_F32, (const float *)part, G, C));
    SX_LAUNCHED();
}

/* ------------------------------------------------------------------ the versions */

/* version v of the backward; bf16 (es = 2) or fp32 (es = 4) storage, fp32 parameter gradients */
static void run_version(int v, bool rms, int es, void *dx, float *dw, float *db, const void *dy, const void *x,
                        const void *w, const float *mean, const float *rstd, int acc, void *ws, size_t wsb, int N,
                        int C, V1Knobs kn) {
    typedef const sx_bf16 *cb;
    typedef const float *cf;
    if (v == 1 && es == 2) {
        if (rms) CK((norm_backward_v1<bf16, true>((bf16 *)dx, dw, db, (const bf16 *)dy, (const bf16 *)x, (const bf16 *)w,
                                                  mean, rstd, acc, ws, N, C, kn, 0)));
        else CK((norm_backward_v1<bf16, false>((bf16 *)dx, dw, db, (const bf16 *)dy, (const bf16 *)x, (const bf16 *)w,
                                               mean, rstd, acc, ws, N, C, kn, 0)));
    } else if (v == 1) {
        if (rms) CK((norm_backward_v1<float, true>((float *)dx, dw, db, (cf)dy, (cf)x, (cf)w, mean, rstd, acc, ws, N, C,
                                                   kn, 0)));
        else CK((norm_backward_v1<float, false>((float *)dx, dw, db, (cf)dy, (cf)x, (cf)w, mean, rstd, acc, ws, N, C,
                                                kn, 0)));
    } else if (es == 2) {
        if (rms) CK(sx_rmsnorm_backward((sx_bf16 *)dx, dw, SX_F32, (cb)dy, (cb)x, (cb)w, rstd, acc, ws, wsb, N, C, 0));
        else CK(sx_layernorm_backward((sx_bf16 *)dx, dw, db, SX_F32, (cb)dy, (cb)x, (cb)w, mean, rstd, acc, ws, wsb, N,
                                      C, 0));
    } else {
        if (rms) CK(sx_rmsnorm_backward_f32((float *)dx, dw, (cf)dy, (cf)x, (cf)w, rstd, acc, ws, wsb, N, C, 0));
        else CK(sx_layernorm_backward_f32((float *)dx, dw, db, (cf)dy, (cf)x, (cf)w, mean, rstd, acc, ws, wsb, N, C, 0));
    }
}

/* the inputs of one size: x, w, dy (and dx when accumulating) random; mean and rstd from the
 * CPU forward (so that the reference and the GPU see the same statistics) */
struct NormCase {
    int N, C, es;
    bool rms, acc;
    vec x, w, dy, dx0, mean, rstd;
    void *d_x, *d_w, *d_dy, *d_dx, *d_dx0, *ws;
    float *d_mean, *d_rstd, *d_dw, *d_db;
    size_t wsb;
};

static void case_make(NormCase &c, bool rms, int es, bool acc, int N, int C) {
    c.N = N; c.C = C; c.es = es; c.rms = rms; c.acc = acc;
    const size_t nc = (size_t)N * C;
    c.x = dev_randn(nc, 0.3, 2.0); c.w = dev_randn(C, 1.0, 0.2); c.dy = dev_randn(nc, 0.0, 1.0);
    c.dx0 = acc ? dev_randn(nc, 0.0, 1.0) : vec(nc, 0.0);
    c.d_x = dev_up(c.x, es); c.d_w = dev_up(c.w, es); c.d_dy = dev_up(c.dy, es); c.d_dx0 = dev_up(c.dx0, es);
    c.d_dx = dmalloc(nc * es);
    vec out(nc), b(C, 0.0);
    c.mean.assign(N, 0.0); c.rstd.assign(N, 0.0);
    if (rms) ref_rmsnorm_forward(out.data(), c.rstd.data(), c.x.data(), c.w.data(), N, C, 1e-5);
    else ref_layernorm_forward(out.data(), c.mean.data(), c.rstd.data(), c.x.data(), c.w.data(), b.data(), N, C, 1e-5);
    c.d_mean = (float *)dev_up(c.mean, 4); c.d_rstd = (float *)dev_up(c.rstd, 4);
    c.d_dw = (float *)dmalloc(C * 4); c.d_db = (float *)dmalloc(C * 4);
    c.wsb = sx_norm_backward_workspace_bytes(C);
    c.ws = dmalloc(c.wsb);
}
static void case_free(NormCase &c) {
    void *p[] = {c.d_x, c.d_w, c.d_dy, c.d_dx, c.d_dx0, c.ws, c.d_mean, c.d_rstd, c.d_dw, c.d_db};
    for (void *q : p) CK(cudaFree(q));
}
static void case_reset(NormCase &c) { /* dx = dx0, dweight = dbias = 0 */
    CK(cudaMemcpy(c.d_dx, c.d_dx0, (size_t)c.N * c.C * c.es, cudaMemcpyDeviceToDevice));
    CK(cudaMemset(c.d_dw, 0, c.C * 4));
    CK(cudaMemset(c.d_db, 0, c.C * 4));
}
static void case_run(NormCase &c, int v, V1Knobs kn) {
    run_version(v, c.rms, c.es, c.d_dx, c.d_dw, c.d_db, c.d_dy, c.d_x, c.d_w, c.d_mean, c.d_rstd, c.acc, c.ws, c.wsb,
                c.N, c.C, kn);
}

/* version v against the reference at one size, and run twice for bitwise equality */
static void check_version(int v, bool rms, int es, bool acc, int N, int C, V1Knobs kn) {
    NormCase c;
    case_make(c, rms, es, acc, N, C);
    const size_t nc = (size_t)N * C;
    vec dx = c.dx0, dw(C, 0.0), db(C, 0.0);
    if (rms) ref_rmsnorm_backward(dx.data(), dw.data(), c.dy.data(), c.x.data(), c.w.data(), c.rstd.data(), N, C, acc);
    else ref_layernorm_backward(dx.data(), dw.data(), db.data(), c.dy.data(), c.x.data(), c.w.data(), c.mean.data(),
                                c.rstd.data(), N, C, acc);
    printf("version %d %s %s N=%d C=%d%s k=%d stages=%d bps=%d\n", v, rms ? "rmsnorm" : "layernorm",
           es == 2 ? "bf16" : "fp32", N, C, acc ? " dx+=" : "", kn.k, kn.stages, kn.bps);
    case_reset(c);
    case_run(c, v, kn);
    const double tol = es == 2 ? 1e-2 : 1e-5;
    dev_check("dx", dev_down(c.d_dx, nc, es), dx, tol);
    dev_check("dweight", dev_down(c.d_dw, C, 4), dw, tol);
    if (!rms) dev_check("dbias", dev_down(c.d_db, C, 4), db, tol);
    const std::vector<uint8_t> a = dev_raw(c.d_dx, nc * es), b = dev_raw(c.d_dw, C * 4);
    case_reset(c);
    case_run(c, v, kn);
    dev_check_true("bitwise equal twice", dev_raw(c.d_dx, nc * es) == a && dev_raw(c.d_dw, C * 4) == b);
    case_free(c);
}

int main(int argc, char **argv) {
    int version = 0, N = 32768, C = 768, es = 2, npos = 0;
    bool rms = false, acc = false;
    V1Knobs kn = {0, -1, 0};
    for (int i = 1; i < argc; i++) {
        if (!strcmp(argv[i], "--rms")) rms = true;
        else if (!strcmp(argv[i], "--f32")) es = 4;
        else if (!strcmp(argv[i], "--acc")) acc = true;
        else if (!strcmp(argv[i], "--k") && i + 1 < argc) kn.k = atoi(argv[++i]);
        else if (!strcmp(argv[i], "--stages") && i + 1 < argc) kn.stages = atoi(argv[++i]);
        else if (!strcmp(argv[i], "--bps") && i + 1 < argc) kn.bps = atoi(argv[++i]);
        else if (argv[i][0] != '-' && npos < 3) { /* version, N, C in that order */
            const int v = atoi(argv[i]);
            if (npos == 0) version = v;
            else if (npos == 1) N = v;
            else C = v;
            npos++;
        }
        else {
            fprintf(stderr, "usage: %s [version [N C]] [--rms] [--f32] [--acc] [--k K] [--stages S] [--bps B]\n", argv[0]);
            return 2;
        }
    }
    if (version < 0 || version > 2 || N < 1 || C < 1) {
        fprintf(stderr, "%s: version must be 1 or 2 (or none: both), N and C positive\n", argv[0]);
        return 2;
    }
    const int first = version ? version : 1, last = version ? version : 2;
    /* the check: the sizes test_kernels used for version 1 (one and two packs per thread,
     * every ring depth, several warps per row), both norms, bf16 and fp32 */
    static const struct { int es, N, C; bool acc; } sizes[] = {
        {2, 1000, 768, false}, {2, 1000, 768, true}, {2, 333, 1000, true}, {2, 333, 2048, true},
        {2, 333, 4096, false}, {4, 1000, 1000, true}};
    for (int v = first; v <= last; v++)
        for (int r = 0; r <= 1; r++)
            for (const auto &s : sizes) check_version(v, r, s.es, s.acc, s.N, s.C, kn);
    /* the benchmark */
    NormCase c;
    case_make(c, rms, es, acc, N, C);
    const double bytes = (double)N * C * es * (acc ? 4.0 : 3.0) + N * (rms ? 4.0 : 8.0) + C * (double)es +
                         C * (rms ? 8.0 : 16.0);
    const double copy_us = dev_copy_us(bytes);
    char what[96];
    snprintf(what, sizeof what, "%s_bwd%s N=%d C=%d%s", rms ? "rmsnorm" : "layernorm", es == 4 ? "_f32" : "", N, C,
             acc ? " dx+=" : "");
    for (int v = first; v <= last; v++) {
        const double us = dev_time_us([&] { case_run(c, v, kn); });
        dev_report(v, what, bytes, us, copy_us);
    }
    case_free(c);
    printf("%s\n", g_dev_failed ? "FAILED" : "all checks passed");
    return g_dev_failed ? 1 : 0;
}
