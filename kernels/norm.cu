/* LayerNorm and RMSNorm, forward and backward, bf16, fp16 and fp32 storage.
 *
 * Forward: one warp per row.  Fast path: the row is held in registers as 16-byte packs
 * (CH chunks of 32 lanes x 16 bytes), read once from DRAM, two-pass mean/variance from the
 * registers, written once.  Generic path (any C, any alignment): scalar loops that re-read
 * the row (L1/L2 hits).
 *
 * Backward, fast path (16-byte aligned, C % 8 == 0 in bf16 / C % 4 == 0 in fp32, C <= 8192 in
 * bf16 / 4096 in fp32): a persistent grid of G blocks (as many as fit on the GPU); a group of
 * W warps owns one row at a time and each thread owns fixed columns of every row, so it keeps
 * its dweight/dbias partial sums in registers for the whole kernel.  At the end each block sums
 * its row groups in order and writes its [2][C] partial to the workspace, and a second kernel
 * (launched with PDL) sums the G partials per channel in fixed order and adds them into
 * dweight/dbias.  No atomics: bitwise reproducible for a given grid (G depends on the GPU's SM
 * count and the kernel's occupancy).  Version 2 (version 1, rows strided over the grid with one
 * block-wide barrier per row, is in dev/cuda/norm_backward.cu with its measurements): each block
 * owns a contiguous range of rows; a row group's warps meet at a named barrier of their own once
 * per row (never the whole block); the next row is loaded into registers (norm_bwd_regs) or
 * whole stages of rows are copied into a shared-memory ring by bulk copies (norm_bwd_bulk,
 * sm_90), as norm_auto chooses (the knobs of kernels_internal.h force one, for the tests).
 * Generic path: dx by a warp per row, the partials by a column kernel, then the same sum. */
#include "common.cuh"
#include "kernels_internal.h"

#define NORM_THREADS 256

/* ------------------------------------------------------------------ forward */

template <typename T, int CH, bool RMS>
__global__ void __launch_bounds__(NORM_THREADS)
norm_forward_vec(T *__restrict__ out, float *__restrict__ mean, float *__restrict__ rstd,
                 const T *__restrict__ x, const T *__restrict__ w, const T *__restrict__ b,
                 int N, int C, float eps) {
    constexpr int P = Pack<T>::N;
    const int lane = threadIdx.x % SX_WARP;
    const int row = blockIdx.x * (blockDim.x / SX_WARP) + threadIdx.x / SX_WARP;
    if (row >= N) return;
    const T *xr = x + (size_t)row * C;
    Pack<T> xv[CH];
#pragma unroll
    for (int c = 0; c < CH; c++) {
        const int col = (c * SX_WARP + lane) * P;
        if (col < C) xv[c] = ld_pack_cs(xr + col);
    }
    float m = 0.0f;
    if (!RMS) {
        float s = 0.0f;
#pragma unroll
        for (int c = 0; c < CH; c++)
            if ((c * SX_WARP + lane) * P < C)
#pragma unroll
                for (int k = 0; k < P; k++) s += xv[c].get(k);
        m = warp_sum(s) / C;
    }
    float q = 0.0f;
#pragma unroll
    for (int c = 0; c < CH; c++)
        if ((c * SX_WARP + lane) * P < C)
#pragma unroll
            for (int k = 0; k < P; k++) {
                const float d = xv[c].get(k) - m;
                q += d * d;
            }
    const float r = rsqrtf(warp_sum(q) / C + eps);
    T *orow = out + (size_t)row * C;
#pragma unroll
    for (int c = 0; c < CH; c++) {
        const int col = (c * SX_WARP + lane) * P;
        if (col < C) {
            const Pack<T> wv = ld_pack(w + col);
            Pack<T> bv, o;
            if (!RMS && b) bv = ld_pack(b + col);
#pragma unroll
            for (int k = 0; k < P; k++) {
                float y = (xv[c].get(k) - m) * r * wv.get(k);
                if (!RMS && b) y += bv.get(k);
                o.set(k, y);
            }
            st_pack_cs(orow + col, o);
        }
    }
    if (lane == 0) {
        if (!RMS && mean) mean[row] = m;
        if (rstd) rstd[row] = r;
    }
}

template <typename T, bool RMS>
__global__ void __launch_bounds__(NORM_THREADS)
norm_forward_generic(T *__restrict__ out, float *__restrict__ mean, float *__restrict__ rstd,
                     const T *__restrict__ x, const T *__restrict__ w, const T *__restrict__ b,
                     int N, int C, float eps) {
    const int lane = threadIdx.x % SX_WARP;
    const int row = blockIdx.x * (blockDim.x / SX_WARP) + threadIdx.x / SX_WARP;
    if (row >= N) return;
    const T *xr = x + (size_t)row * C;
    float m = 0.0f;
    if (!RMS) {
        float s = 0.0f;
        for (int i = lane; i < C; i += SX_WARP) s += to_f<T>(xr[i]);
        m = warp_sum(s) / C;
    }
    float q = 0.0f;
    for (int i = lane; i < C; i += SX_WARP) {
        const float d = to_f<T>(xr[i]) - m;
        q += d * d;
    }
    const float r = rsqrtf(warp_sum(q) / C + eps);
    T *orow = out + (size_t)row * C;
    for (int i = lane; i < C; i += SX_WARP) {
        float y = (to_f<T>(xr[i]) - m) * r * to_f<T>(w[i]);
        if (!RMS && b) y += to_f<T>(b[i]);
        orow[i] = from_f<T>(y);
    }
    if (lane == 0) {
        if (!RMS && mean) mean[row] = m;
        if (rstd) rstd[row] = r;
    }
}

template <typename T, bool RMS>
static cudaError_t norm_forward(T *out, float *mean, float *rstd, const T *x, const T *w, const T *b,
                                int N, int C, float eps, cudaStream_t stream) {
    SX_REQUIRE(N >= 0 && C >= 0);
    if (N == 0) return cudaSuccess;
    SX_REQUIRE(C > 0 && out && x && w);
    constexpr int P = Pack<T>::N;
    const unsigned grid = sx_blocks(N, NORM_THREADS / SX_WARP);
    const int chunks = (C + SX_WARP * P - 1) / (SX_WARP * P);
    const bool vec = C % P == 0 && sx_aligned16(out) && sx_aligned16(x) && sx_aligned16(w) &&
                     (RMS || !b || sx_aligned16(b));
#define NORM_FWD(CH) norm_forward_vec<T, CH, RMS><<<grid, NORM_THREADS, 0, stream>>>(out, mean, rstd, x, w, b, N, C, eps)
    if (vec && chunks <= 1) NORM_FWD(1);
    else if (vec && chunks <= 2) NORM_FWD(2);
    else if (vec && chunks <= 3) NORM_FWD(3);
    else if (vec && chunks <= 4) NORM_FWD(4);
    else if (vec && chunks <= 6) NORM_FWD(6);
    else if (vec && chunks <= 8) NORM_FWD(8);
    /* wider rows kept in registers too (LLaMA's 3072-8192): the generic path's scalar loads ran at half
     * the bandwidth from 4096 on (docs/validation/2026-11-26-h100-ops-wide); 32 packs are 128 of the
     * 255 registers a thread may hold at 256 threads */
    else if (vec && chunks <= 12) NORM_FWD(12);
    else if (vec && chunks <= 16) NORM_FWD(16);
    else if (vec && chunks <= 24) NORM_FWD(24);
    else if (vec && chunks <= 32) NORM_FWD(32);
    else norm_forward_generic<T, RMS><<<grid, NORM_THREADS, 0, stream>>>(out, mean, rstd, x, w, b, N, C, eps);
#undef NORM_FWD
    SX_LAUNCHED();
}

/* ----------------------------------------------------------------- backward */

#include "norm_partial.cuh"

/* ---------------------------------------------------------- norm backward, version 2
 * Two kernels with the same row math (nb2_row) and the same work split: block b of G owns the
 * contiguous rows [b N / G, (b+1) N / G) (at most one row more than another block), its NG
 * row groups of W warps take them NG at a time (group g: rows lo + i NG + g), each thread owns
 * the K packs at columns (k TPR + t) P of every row and keeps its dweight/dbias partials in
 * registers.  A group's W warps exchange the two row sums through shared memory behind a
 * named barrier of the group alone (bar.sync 1 + g, TPR), so groups never wait for each other.
 *   norm_bwd_regs: the next D rows of each thread are loaded into registers (D - 1 rows
 *     ahead of the one being reduced), so every thread keeps 2 D (3 D with dx +=) 16-byte
 *     loads per pack in flight.
 *   norm_bwd_bulk: one producer warp copies whole stages of NG consecutive rows (x, dy and,
 *     with dx +=, dx: one bulk copy each, cp.async.bulk, completing on an mbarrier) into a
 *     ring of S stages in shared memory; the groups read their row from shared memory,
 *     release the stage on a second mbarrier and compute.  S - 1 stages are in flight and no
 *     register holds data in flight. */

__device__ __forceinline__ void nb2_bar(int id, int nthreads) { /* named barrier of one row group */
    asm volatile("bar.sync %0, %1;" ::"r"(id), "r"(nthreads) : "memory");
}

/* hides the value of a pack from the compiler, so that what was computed from it before is
 * computed again after (fewer registers live across the row reduction) */
template <typename T> __device__ __forceinline__ void nb2_opaque(Pack<T> &p) {
    asm volatile("" : "+r"(p.bits.x), "+r"(p.bits.y), "+r"(p.bits.z), "+r"(p.bits.w));
}

/* One row of a group: pass 1 over the thread's packs (row sums, dweight/dbias partials), the
 * sums over the warp and the group, pass 2 (dx).  `have` is uniform over the group.  RC: pass
 * 2 converts x and dy again instead of keeping pass 1's fp32 values in registers. */
template <typename T, bool RMS, int K, bool ACC, bool RC, bool POS = false>
__device__ __forceinline__ void nb2_row(T *dxr, bool have, Pack<T> (&cx)[K], Pack<T> (&cg)[K],
                                        const Pack<T> (&cd)[K], const float (&wf)[K][Pack<T>::N],
                                        const Pack<T> (&wv)[K], const int (&col)[K], const bool (&ok)[K], float cm,
                                        float cr, float invC,
                                        float (&aw)[K][Pack<T>::N], float (&ab)[K][Pack<T>::N], float2 *rb, int W,
                                        int lane, int wi, int barid, int TPR,
                                        float (*ap)[Pack<T>::N] = nullptr) { /* POS: += the stored dx */
    constexpr int P = Pack<T>::N;
    constexpr bool WP = K >= 3; /* weights kept packed (converted at each use): fewer registers */
    auto wgt = [&](int k, int e) { return WP ? wv[k].get(e) : wf[k][e]; };
    const float nmr = RMS ? 0.0f : -cm * cr;
    float s1 = 0.0f, s2 = 0.0f;
    if (have) {
#pragma unroll
        for (int k = 0; k < K; k++)
            if (ok[k])
#pragma unroll
                for (int e = 0; e < P; e++) {
                    const float d = cg[k].get(e);
                    const float xh = RMS ? cx[k].get(e) * cr : fmaf(cx[k].get(e), cr, nmr);
                    const float gg = d * wgt(k, e);
                    if (!RMS) s1 += gg;
                    s2 = fmaf(gg, xh, s2);
                    aw[k][e] = fmaf(d, xh, aw[k][e]);
                    if (!RMS) ab[k][e] += d;
                }
    }
    if (RC)
#pragma unroll
        for (int k = 0; k < K; k++) {
            nb2_opaque(cx[k]);
            nb2_opaque(cg[k]);
        }
    /* the two sums reduced together: interleaved shuffles */
#pragma unroll
    for (int o = 16; o > 0; o >>= 1) {
        if (!RMS) s1 += __shfl_xor_sync(0xffffffffu, s1, o);
        s2 += __shfl_xor_sync(0xffffffffu, s2, o);
    }
    if (W > 1) {
        if (lane == 0) rb[wi] = make_float2(s1, s2);
        nb2_bar(barid, TPR);
        s1 = 0.0f;
        s2 = 0.0f;
        for (int i = 0; i < W; i++) {
            const float2 q = rb[i];
            s1 += q.x;
            s2 += q.y;
        }
    }
    if (have) {
        /* dx = cr (gg - m1 - xh m2) = cr gg + (-cr m2) xh + (-cr m1) */
        const float a = -cr * (s2 * invC), c = RMS ? 0.0f : -cr * (s1 * invC);
#pragma unroll
        for (int k = 0; k < K; k++)
            if (ok[k]) {
                Pack<T> o;
#pragma unroll
                for (int e = 0; e < P; e++) {
                    const float xh = RMS ? cx[k].get(e) * cr : fmaf(cx[k].get(e), cr, nmr);
                    const float gg = cg[k].get(e) * wgt(k, e);
                    float v = fmaf(cr, gg, fmaf(a, xh, c));
                    if (ACC) v += cd[k].get(e);
                    o.set(e, v);
                }
                st_pack_cs(dxr + col[k], o);
                if (POS)
#pragma unroll
                    for (int e = 0; e < P; e++) ap[k][e] += o.get(e);
            }
    }
}

template <typename T, int K>
__device__ __forceinline__ void nb2_setup(const T *__restrict__ w, int t, int TPR, int C, int (&col)[K], bool (&ok)[K],
                                          float (&wf)[K][Pack<T>::N], Pack<T> (&wv)[K]) {
    constexpr int P = Pack<T>::N;
#pragma unroll
    for (int k = 0; k < K; k++) {
        col[k] = (k * TPR + t) * P;
        ok[k] = col[k] < C;
        wv[k].bits = ok[k] ? ld_pack(w + col[k]).bits : make_int4(0, 0, 0, 0);
#pragma unroll
        for (int e = 0; e < P; e++) wf[k][e] = wv[k].get(e);
    }
}

/* The next D rows of a thread's columns, in registers: x, dy and, when accumulating, dx, as
 * 16-byte packs; the row's mean (LayerNorm) and rstd.  Indexed by constants only (unrolled
 * loops), so it stays in registers. */
template <typename T, int K, int D> struct Nb2Ring {
    Pack<T> x[D][K], g[D][K], d[D][K];
    float m[D], r[D];
    __device__ __forceinline__ void clear() {
#pragma unroll
        for (int j = 0; j < D; j++) {
            m[j] = r[j] = 0.0f;
#pragma unroll
            for (int k = 0; k < K; k++) x[j][k].bits = g[j][k].bits = d[j][k].bits = make_int4(0, 0, 0, 0);
        }
    }
    /* slot j's row, copied out so that the slot can take the next one */
    __device__ __forceinline__ void take(int j, Pack<T> (&cx)[K], Pack<T> (&cg)[K], Pack<T> (&cd)[K], float &cm,
                                         float &cr) const {
#pragma unroll
        for (int k = 0; k < K; k++) {
            cx[k] = x[j][k];
            cg[k] = g[j][k];
            cd[k] = d[j][k];
        }
        cm = m[j];
        cr = r[j];
    }
    /* slot j <- row: x and dy streamed (read once), dx plain (it is also written) */
    template <bool RMS, bool ACC>
    __device__ __forceinline__ void load(int j, const T *__restrict__ xs, const T *__restrict__ dys, const T *dxs,
                                         const float *__restrict__ mean, const float *__restrict__ rstd, int row,
                                         int C, const int (&col)[K], const bool (&ok)[K]) {
#pragma unroll
        for (int k = 0; k < K; k++)
            if (ok[k]) {
                const size_t o = (size_t)row * C + col[k];
                x[j][k] = ld_pack_cs(xs + o);
                g[j][k] = ld_pack_cs(dys + o);
                if (ACC) d[j][k] = ld_pack_plain(dxs + o);
            }
        if (!RMS) m[j] = __ldg(mean + row);
        r[j] = __ldg(rstd + row);
    }
};

/* rows [lo, hi) of block b of G: the split of N rows into G nearly equal contiguous parts */
__device__ __forceinline__ void nb2_range(int N, int &lo, int &hi) {
    lo = (int)((long long)blockIdx.x * N / gridDim.x);
    hi = (int)((long long)(blockIdx.x + 1) * N / gridDim.x);
}

template <typename T, bool RMS, int K, int D, bool ACC>
__global__ void __launch_bounds__(512, 1)
norm_bwd_regs(T *dx, float *__restrict__ part, const T *__restrict__ dy, const T *__restrict__ x,
              const T *__restrict__ w, const float *__restrict__ mean, const float *__restrict__ rstd, int N, int C,
              int W) {
    extern __shared__ float4 norm_smem[];
    constexpr int P = Pack<T>::N;
    sx_griddep_launch();
    const int TPR = W * SX_WARP, NG = blockDim.x / TPR;
    const int warp = threadIdx.x / SX_WARP, lane = threadIdx.x % SX_WARP;
    const int g = warp / W, wi = warp % W, t = threadIdx.x % TPR;
    float2 *red = reinterpret_cast<float2 *>(norm_smem);        /* [2][NG][W] */
    float *gbuf = reinterpret_cast<float *>(red + 2 * NG * W); /* [NG][NA][C] when NG > 1 */
    const float invC = 1.0f / C;
    int lo, hi;
    nb2_range(N, lo, hi);
    const int nit = (hi - lo + NG - 1) / NG;

    int col[K];
    bool ok[K];
    float wf[K][P], aw[K][P], ab[K][P];
    Pack<T> wv[K];
    nb2_setup<T, K>(w, t, TPR, C, col, ok, wf, wv);
#pragma unroll
    for (int k = 0; k < K; k++)
#pragma unroll
        for (int e = 0; e < P; e++) aw[k][e] = ab[k][e] = 0.0f;

    Nb2Ring<T, K, D> ring;
    ring.clear();
#pragma unroll
    for (int j = 0; j < D; j++) {
        const int r = lo + j * NG + g;
        if (r < hi) ring.template load<RMS, ACC>(j, x, dy, dx, mean, rstd, r, C, col, ok);
    }
    for (int i0 = 0; i0 < nit; i0 += D) {
#pragma unroll
        for (int j = 0; j < D; j++) {
            const int i = i0 + j;
            if (i < nit) { /* uniform over the block */
                const int row = lo + i * NG + g;
                Pack<T> cx[K], cg[K], cd[K];
                float cm, cr;
                ring.take(j, cx, cg, cd, cm, cr);
                const int nrow = row + D * NG;
                if (nrow < hi) ring.template load<RMS, ACC>(j, x, dy, dx, mean, rstd, nrow, C, col, ok); /* D rows ahead */
                nb2_row<T, RMS, K, ACC, true>(dx + (size_t)row * C, row < hi, cx, cg, cd, wf, wv, col, ok, cm, cr, invC, aw, ab,
                                        red + ((i & 1) * NG + g) * W, W, lane, wi, 1 + g, TPR);
            }
        }
    }
    norm_block_partial<T, RMS, K>(part, gbuf, aw, ab, col, ok, true, g, NG, C);
}

/* Shared memory of norm_bwd_bulk: [S] full + [S] empty mbarriers, [2][NG][W] row sums, then
 * the ring [S][NB][NG][C] of T (NB = 2, 3 with dx +=); after the loop the ring holds the
 * groups' partials [NG][NA][C] fp32. */
#define NB2_HDR 512
template <typename T, bool RMS, int K, bool ACC>
__global__ void __launch_bounds__(512, 1)
norm_bwd_bulk(T *dx, float *__restrict__ part, const T *__restrict__ dy, const T *__restrict__ x,
              const T *__restrict__ w, const float *__restrict__ mean, const float *__restrict__ rstd, int N, int C,
              int W, int NG, int S) {
    extern __shared__ float4 norm_smem[];
    constexpr int P = Pack<T>::N;
    constexpr int NB = ACC ? 3 : 2;
    sx_griddep_launch();
    const int TPR = W * SX_WARP, ncons = NG * TPR;
    const int warp = threadIdx.x / SX_WARP, lane = threadIdx.x % SX_WARP;
    char *sm = reinterpret_cast<char *>(norm_smem);
    uint64_t *full = reinterpret_cast<uint64_t *>(sm), *empty = full + S;
    float2 *red = reinterpret_cast<float2 *>(sm + 256);
    T *ring = reinterpret_cast<T *>(sm + NB2_HDR);
    const size_t plane = (size_t)NG * C; /* elements of one stream in one stage */
    int lo, hi;
    nb2_range(N, lo, hi);
    const int nit = (hi - lo + NG - 1) / NG;
    if (threadIdx.x == 0) {
        for (int s = 0; s < S; s++) {
            mb_init(full + s, 1);
            mb_init(empty + s, NG * W);
        }
        mb_fence_init();
    }
    __syncthreads();

    const bool producer = (int)threadIdx.x >= ncons;
    const int g = warp / W, wi = warp % W, t = threadIdx.x % TPR;
    int col[K];
    bool ok[K];
    float wf[K][P], aw[K][P], ab[K][P];
    Pack<T> wv[K];
    nb2_setup<T, K>(w, t, TPR, C, col, ok, wf, wv);
#pragma unroll
    for (int k = 0; k < K; k++)
#pragma unroll
        for (int e = 0; e < P; e++) aw[k][e] = ab[k][e] = 0.0f;
    if (producer) {
#if SX_BULK
        if (lane == 0)
            for (int i = 0; i < nit; i++) {
                const int s = i % S;
                if (i >= S) mb_wait(empty + s, ((i / S) - 1) & 1);
                const int r0 = lo + i * NG;
                const int nr = hi - r0 < NG ? hi - r0 : NG;
                const unsigned bytes = (unsigned)((size_t)nr * C * sizeof(T));
                const size_t o = (size_t)r0 * C;
                T *st = ring + (size_t)s * NB * plane;
                mb_expect(full + s, NB * bytes);
                bulk_load(st, x + o, bytes, full + s);
                bulk_load(st + plane, dy + o, bytes, full + s);
                if (ACC) bulk_load(st + 2 * plane, dx + o, bytes, full + s);
            }
#endif
        __syncwarp();
    } else {
        const float invC = 1.0f / C;
        float nm = 0.0f, nr = 0.0f;
        if (lo + g < hi) {
            if (!RMS) nm = __ldg(mean + lo + g);
            nr = __ldg(rstd + lo + g);
        }
        for (int i = 0; i < nit; i++) {
            const int s = i % S;
            const int row = lo + i * NG + g;
            const bool have = row < hi;
            const float cm = nm, cr = nr;
            if (row + NG < hi) { /* the next row's statistics, one row ahead */
                if (!RMS) nm = __ldg(mean + row + NG);
                nr = __ldg(rstd + row + NG);
            }
            Pack<T> cx[K], cg[K], cd[K];
            mb_wait(full + s, (i / S) & 1);
            const T *st = ring + (size_t)s * NB * plane + (size_t)g * C;
#pragma unroll
            for (int k = 0; k < K; k++) {
                cx[k].bits = cg[k].bits = cd[k].bits = make_int4(0, 0, 0, 0);
                if (have && ok[k]) {
                    cx[k].bits = *reinterpret_cast<const int4 *>(st + col[k]);
                    cg[k].bits = *reinterpret_cast<const int4 *>(st + plane + col[k]);
                    if (ACC) cd[k].bits = *reinterpret_cast<const int4 *>(st + 2 * plane + col[k]);
                }
            }
            __syncwarp();
            if (lane == 0) mb_arrive(empty + s); /* this warp is done with the stage */
            nb2_row<T, RMS, K, ACC, (K >= 3)>(dx + (size_t)row * C, have, cx, cg, cd, wf, wv, col, ok, cm, cr, invC, aw, ab,
                                    red + ((i & 1) * NG + g) * W, W, lane, wi, 1 + g, TPR);
        }
    }
    __syncthreads(); /* every stage consumed: the ring is free */
    norm_block_partial<T, RMS, K>(part, reinterpret_cast<float *>(ring), aw, ab, col, ok, !producer, g, NG, C);
}

/* generic dx: warp per row, scalar, re-reads the row */
template <typename T, bool RMS>
__global__ void __launch_bounds__(NORM_THREADS)
norm_backward_dx_generic(T *dx, const T *__restrict__ dy, const T *__restrict__ x, const T *__restrict__ w,
                         const float *__restrict__ mean, const float *__restrict__ rstd,
                         int N, int C, int accumulate) {
    const int lane = threadIdx.x % SX_WARP;
    const int row = blockIdx.x * (blockDim.x / SX_WARP) + threadIdx.x / SX_WARP;
    if (row >= N) return;
    const T *xr = x + (size_t)row * C, *gr = dy + (size_t)row * C;
    const float m = RMS ? 0.0f : mean[row], r = rstd[row];
    float s1 = 0.0f, s2 = 0.0f;
    for (int i = lane; i < C; i += SX_WARP) {
        const float g = to_f<T>(gr[i]) * to_f<T>(w[i]);
        s1 += g;
        s2 += g * (to_f<T>(xr[i]) - m) * r;
    }
    s1 = RMS ? 0.0f : warp_sum(s1) / C;
    s2 = warp_sum(s2) / C;
    T *dxr = dx + (size_t)row * C;
    for (int i = lane; i < C; i += SX_WARP) {
        const float g = to_f<T>(gr[i]) * to_f<T>(w[i]);
        const float xh = (to_f<T>(xr[i]) - m) * r;
        float v = r * (g - s1 - xh * s2);
        if (accumulate) v += to_f<T>(dxr[i]);
        dxr[i] = from_f<T>(v);
    }
}

/* generic partials: block (32 channels x 8 row lanes), grid (channel blocks, G) */
template <typename T, bool RMS>
__global__ void __launch_bounds__(256)
norm_backward_param_generic(float *__restrict__ part, const T *__restrict__ dy, const T *__restrict__ x,
                            const float *__restrict__ mean, const float *__restrict__ rstd, int N, int C) {
    __shared__ float sw[8][33], sb[8][33];
    const int tx = threadIdx.x % 32, ty = threadIdx.x / 32;
    const int c = blockIdx.x * 32 + tx;
    float a = 0.0f, bb = 0.0f;
    if (c < C)
        for (int row = blockIdx.y * 8 + ty; row < N; row += gridDim.y * 8) {
            const float d = to_f<T>(dy[(size_t)row * C + c]);
            const float xh = (to_f<T>(x[(size_t)row * C + c]) - (RMS ? 0.0f : mean[row])) * rstd[row];
            a += d * xh;
            bb += d;
        }
    sw[ty][tx] = a;
    sb[ty][tx] = bb;
    __syncthreads();
    if (ty == 0 && c < C) {
        float sa = 0.0f, sbb = 0.0f;
        for (int j = 0; j < 8; j++) { sa += sw[j][tx]; sbb += sb[j][tx]; }
        part[(size_t)blockIdx.y * 2 * C + c] = sa;
        part[(size_t)blockIdx.y * 2 * C + C + c] = sbb;
    }
}

/* tuning knobs (kernels_internal.h); 0 = automatic */
static int g_norm_bps = 0, g_norm_pdl = -1;
extern "C" void sx_norm_backward_tune(int blocks_per_sm, int pdl) {
    g_norm_bps = blocks_per_sm;
    g_norm_pdl = pdl;
}

/* the launch parameters of the last fast-path call (kernels_internal.h) */
static int g_last[8];
extern "C" void sx_norm_backward_last_config(int cfg[8]) {
    for (int i = 0; i < 8; i++) cfg[i] = g_last[i];
}
static void nb2_record(int impl, int k, int depth, int W, int NG, int G, int per_sm, int smem) {
    const int v[8] = {impl, k, depth, W, NG, G, per_sm, smem};
    for (int i = 0; i < 8; i++) g_last[i] = v[i];
}



/* ---------------------------------------------------------- launching version 2 */

/* knobs of version 2 (kernels_internal.h); 0 = automatic */
static int g_norm_impl = 0, g_norm_k2 = 0, g_norm_depth = 0, g_norm_rows = 0;
extern "C" void sx_norm_backward_variant(int impl, int k, int depth, int rows) {
    g_norm_impl = impl;
    g_norm_k2 = k;
    g_norm_depth = depth;
    g_norm_rows = rows;
}

static int nb2_grid(int per_sm, int N, int NG) {
    if (g_norm_bps > 0 && g_norm_bps < per_sm) per_sm = g_norm_bps;
    long long g = (long long)sx_num_sms() * per_sm;
    const long long need = (N + NG - 1) / NG;
    if (g > need) g = need;
    if (g > NORM_MAX_G) g = NORM_MAX_G;
    return g < 1 ? 1 : (int)g;
}

/* registers: NG row groups per block, NG chosen (unless set) for the most resident warps */
template <typename T, bool RMS, int K, int D, bool ACC>
static cudaError_t launch_regs(T *dx, float *part, const T *dy, const T *x, const T *w, const float *mean,
                               const float *rstd, int N, int C, int *G, cudaStream_t stream) {
    constexpr int P = Pack<T>::N;
    constexpr int NA = RMS ? 1 : 2;
    const int packs = (C + P - 1) / P;
    const int W = (packs + K * SX_WARP - 1) / (K * SX_WARP);
    if (W > 16) return cudaErrorInvalidValue;
    const size_t gbytes = (size_t)NA * C * sizeof(float);
    int ngmax = 512 / (W * SX_WARP);
    while (ngmax > 1 && (size_t)ngmax * gbytes > 96 * 1024) ngmax--;
    const void *kf = (const void *)norm_bwd_regs<T, RMS, K, D, ACC>;
    auto smem_of = [&](int ng) { return 2 * (size_t)ng * W * sizeof(float2) + (ng > 1 ? (size_t)ng * gbytes : 0); };
    SX_CHECK(cudaFuncSetAttribute(kf, cudaFuncAttributeMaxDynamicSharedMemorySize, (int)smem_of(ngmax)));
    int NG = 1, best = -1, per_sm = 0;
    for (int ng = ngmax; ng >= 1; ng--) {
        if (g_norm_rows > 0 && ng != (g_norm_rows < ngmax ? g_norm_rows : ngmax)) continue;
        int b = 0;
        SX_CHECK(cudaOccupancyMaxActiveBlocksPerMultiprocessor(&b, kf, ng * W * SX_WARP, smem_of(ng)));
        if (g_norm_bps > 0 && g_norm_bps < b) b = g_norm_bps;
        if (b * ng > best) { best = b * ng; NG = ng; per_sm = b; }
    }
    if (per_sm < 1) per_sm = 1;
    *G = nb2_grid(per_sm, N, NG);
    nb2_record(2, K, D, W, NG, *G, per_sm, (int)smem_of(NG));
    norm_bwd_regs<T, RMS, K, D, ACC><<<*G, NG * W * SX_WARP, smem_of(NG), stream>>>(dx, part, dy, x, w, mean, rstd,
                                                                                  N, C, W);
    return cudaGetLastError();
}

/* bulk copies: NG rows per stage (at most 15 consumer warps), S stages (default 3, at most 16,
 * fewer where they do not fit in the shared memory of the blocks_per_sm (default 1) blocks of
 * an SM) */
template <typename T, bool RMS, int K, bool ACC>
static cudaError_t launch_bulk(T *dx, float *part, const T *dy, const T *x, const T *w, const float *mean,
                               const float *rstd, int N, int C, int *G, cudaStream_t stream) {
    constexpr int P = Pack<T>::N;
    constexpr int NA = RMS ? 1 : 2;
    constexpr int NB = ACC ? 3 : 2;
    const int packs = (C + P - 1) / P;
    const int W = (packs + K * SX_WARP - 1) / (K * SX_WARP);
    if (W > 16) return cudaErrorInvalidValue;
    if (W > 15) return cudaErrorInvalidValue;
    int NG = g_norm_rows > 0 ? g_norm_rows : 15 / W;
    if (NG * W > 15) NG = 15 / W; /* with the producer at most 16 warps: 128 registers per thread */
    if (W > 1 && NG > 15) NG = 15; /* named barriers 1..15 */
    if (NG < 1) NG = 1;
    int dev = 0, smem_blk = 0, smem_sm = 0;
    SX_CHECK(cudaGetDevice(&dev));
    SX_CHECK(cudaDeviceGetAttribute(&smem_blk, cudaDevAttrMaxSharedMemoryPerBlockOptin, dev));
    SX_CHECK(cudaDeviceGetAttribute(&smem_sm, cudaDevAttrMaxSharedMemoryPerMultiprocessor, dev));
    const int want = g_norm_bps > 0 ? g_norm_bps : 1;
    size_t budget = (size_t)smem_sm / want - 1024;
    if (budget > (size_t)smem_blk) budget = smem_blk;
    auto bytes = [&](int ng, int s) {
        const size_t ring = (size_t)s * NB * ng * C * sizeof(T), gb = (size_t)ng * NA * C * sizeof(float);
        return (size_t)NB2_HDR + (ring > gb ? ring : gb);
    };
    int S = g_norm_depth > 0 ? g_norm_depth : 3; /* deeper measured slower (see norm_auto) */
    if (S > 16) S = 16;
    if (S < 2) S = 2;
    while (S > 2 && bytes(NG, S) > budget) S--;
    while (NG > 1 && bytes(NG, S) > budget) NG--;
    if (bytes(NG, S) > (size_t)smem_blk) return cudaErrorInvalidValue;
    const void *kf = (const void *)norm_bwd_bulk<T, RMS, K, ACC>;
    SX_CHECK(cudaFuncSetAttribute(kf, cudaFuncAttributeMaxDynamicSharedMemorySize, (int)bytes(NG, S)));
    int per_sm = 0;
    for (;;) {
        SX_CHECK(cudaOccupancyMaxActiveBlocksPerMultiprocessor(&per_sm, kf, NG * W * SX_WARP + SX_WARP, bytes(NG, S)));
        if (per_sm >= 1 || NG == 1) break;
        NG--;
    }
    if (per_sm < 1) return cudaErrorInvalidConfiguration;
    *G = nb2_grid(per_sm, N, NG);
    nb2_record(3, K, S, W, NG, *G, per_sm, (int)bytes(NG, S));
    norm_bwd_bulk<T, RMS, K, ACC><<<*G, NG * W * SX_WARP + SX_WARP, bytes(NG, S), stream>>>(dx, part, dy, x, w, mean,
                                                                                         rstd, N, C, W, NG, S);
    return cudaGetLastError();
}

/* Automatic choice of the fast path, from the two sweeps of docs/validation/archive/2026-11-23-h200-norm-bwd-v2
 * (H200, % of copy bandwidth, mean of the two runs; version 1's defaults in brackets):
 * registers, 2 packs per thread, 1 row ahead everywhere (LayerNorm bf16: C = 768 81.8% [65.3],
 * 1024 88.2% [71.8], 2048 85.8% [63.9], 4096 77.0% [63.7]; RMSNorm C = 1024 90.5%, 2048 90.5%;
 * dx +=: LN 768 91.0%, RMS 2048 93.6%; LN fp32 768 89.8%), except RMSNorm bf16 at C <= 768: 1
 * pack per thread (89.7% against 86.8%), and RMSNorm at C >= 4096 while 2 packs per thread fit
 * in 15 warps: bulk copies, 2 packs, a 3-stage ring (81.3% against 80.2%).  Deeper rings measured
 * slower (LN C = 4096: 3 stages 76.5%, 8 stages 69.2%). */
struct NormAuto { int impl, k, depth; };
static NormAuto norm_auto(bool rms, int C, int P) {
    const int packs = (C + P - 1) / P;
    if (rms && C >= 4096 && packs <= 15 * SX_WARP * 2) return {3, 2, 3};
    if (rms && P == 8 && C <= 768) return {2, 1, 1};
    return {2, 2, 1};
}

template <typename T, bool RMS>
static cudaError_t launch_fast(int impl, T *dx, float *part, const T *dy, const T *x, const T *w, const float *mean,
                               const float *rstd, int acc, int N, int C, int *G, cudaStream_t stream) {
    constexpr int P = Pack<T>::N;
    const int packs = (C + P - 1) / P;
    const NormAuto au = norm_auto(RMS, C, P);
    int k = g_norm_k2 ? g_norm_k2 : impl == au.impl ? au.k : 2;
    if (impl == 2) {
        if (k != 1 || packs > 16 * SX_WARP) k = 2;
        int d = g_norm_depth > 0 ? (g_norm_depth > 3 ? 3 : g_norm_depth) : impl == au.impl ? au.depth : 1;
#define NB_REGS(KK, DD) (acc ? launch_regs<T, RMS, KK, DD, true>(dx, part, dy, x, w, mean, rstd, N, C, G, stream) \
                             : launch_regs<T, RMS, KK, DD, false>(dx, part, dy, x, w, mean, rstd, N, C, G, stream))
        if (k == 1) return d == 1 ? NB_REGS(1, 1) : d == 2 ? NB_REGS(1, 2) : NB_REGS(1, 3);
        return d == 1 ? NB_REGS(2, 1) : NB_REGS(2, 2); /* 2 packs, 3 rows ahead: spills */
#undef NB_REGS
    }
    if (k < 1 || k > 4) k = 2;
    while (packs > 15 * SX_WARP * k) k++; /* at most 15 warps per row */
#define NB_BULK(KK) (acc ? launch_bulk<T, RMS, KK, true>(dx, part, dy, x, w, mean, rstd, N, C, G, stream) \
                         : launch_bulk<T, RMS, KK, false>(dx, part, dy, x, w, mean, rstd, N, C, G, stream))
    switch (k) {
    case 1: return NB_BULK(1);
    case 2: return NB_BULK(2);
    case 3: return NB_BULK(3);
    default: return NB_BULK(4);
    }
#undef NB_BULK
}

template <typename T, bool RMS>
static cudaError_t norm_backward(T *dx, void *dw, void *db, sx_dtype gt, const T *dy, const T *x, const T *w,
                                 const float *mean, const float *rstd, int acc, void *ws, size_t ws_bytes,
                                 int N, int C, cudaStream_t stream) {
    SX_REQUIRE(N >= 0 && C >= 0);
    SX_REQUIRE(gt == SX_F32 || gt == SX_BF16);
    if (N == 0 || C == 0) return cudaSuccess;
    SX_REQUIRE(dx && dw && dy && x && w && rstd && (RMS || mean) && ws);
    SX_REQUIRE(ws_bytes >= sx_norm_backward_workspace_bytes(C));
    float *part = (float *)ws;
    constexpr int P = Pack<T>::N;
    const int packs = (C + P - 1) / P;
    const bool vec = C % P == 0 && sx_aligned16(dx) && sx_aligned16(dy) && sx_aligned16(x) && sx_aligned16(w) &&
                     packs <= 2 * 16 * SX_WARP;
    int G = 0;
    cudaError_t e = cudaSuccess;
    if (vec) {
        int impl = g_norm_impl == 2 || g_norm_impl == 3 ? g_norm_impl : norm_auto(RMS, C, P).impl;
        if (impl == 3 && sx_cc_major() < 9) impl = 2; /* bulk copies and mbarrier waits: sm_90 */
        e = launch_fast<T, RMS>(impl, dx, part, dy, x, w, mean, rstd, acc, N, C, &G, stream);
    } else {
        norm_backward_dx_generic<T, RMS><<<sx_blocks(N, NORM_THREADS / SX_WARP), NORM_THREADS, 0, stream>>>(
            dx, dy, x, w, mean, rstd, N, C, acc);
        SX_CHECK(cudaGetLastError());
        G = (int)sx_blocks(N, 8);
        if (G > 256) G = 256;
        dim3 grid(sx_blocks(C, 32), G);
        norm_backward_param_generic<T, RMS><<<grid, 256, 0, stream>>>(part, dy, x, mean, rstd, N, C);
        e = cudaGetLastError();
    }
    SX_CHECK(e);
    const bool pdl = vec && g_norm_pdl != 0;
    SX_CHECK(sx_launch(pdl, norm_param_reduce, dim3(sx_blocks(C, 32)), dim3(1024), 0, stream, dw,
                       RMS ? nullptr : db, gt, (const float *)part, G, C));
    SX_LAUNCHED();
}

/* ------------------------------------------ LayerNorm backward with the position gradient
 *
 * For the first layer of a model with learned positions: dx is the gradient of the embedding's
 * output, so the position table's gradient dpos[t] = sum over b of dx[b, t] can be summed here,
 * from registers, instead of by a second pass of the embedding backward over dx.
 *
 * Version 2's row math (nb2_row) with another work split: row group i of the grid (W warps,
 * the columns split as there) owns positions t = i, i + NG G, ... and takes all B rows of each,
 * b = 0 .. B - 1, D rows ahead in registers across positions.  Each thread adds its columns of
 * every dx row it stores (as stored, bf16) into its own fp32 columns of the group's row of shared
 * memory (registers are short); after a position's B rows it adds them into dpos[t], whose row
 * it loaded when the position began.  No group waits for
 * another; dweight/dbias partials as in every norm backward (norm_block_partial,
 * norm_param_reduce).  Deterministic: each dpos[t] is summed over b in order. */
template <int K, int D, bool ACC>
__global__ void __launch_bounds__(256, 1)
ln_backward_pos(bf16 *dx, float *__restrict__ part, void *dpos, sx_dtype gt, const bf16 *__restrict__ dy,
                const bf16 *__restrict__ x, const bf16 *__restrict__ w, const float *__restrict__ mean,
                const float *__restrict__ rstd, int B, int T, int C, int W) {
    extern __shared__ float4 norm_smem[];
    constexpr int P = Pack<bf16>::N;
    sx_griddep_launch();
    const int TPR = W * SX_WARP, NG = blockDim.x / TPR;
    const int warp = threadIdx.x / SX_WARP, lane = threadIdx.x % SX_WARP;
    const int g = warp / W, wi = warp % W, tid = threadIdx.x % TPR;
    float2 *red = reinterpret_cast<float2 *>(norm_smem);        /* [2][NG][W] */
    float *gbuf = reinterpret_cast<float *>(red + 2 * NG * W); /* [NG][2][C] when NG > 1 */
    float *apos = gbuf + (NG > 1 ? (size_t)NG * 2 * C : 0) + (size_t)g * C; /* the group's position sums */
    const float invC = 1.0f / C;
    const int GT = gridDim.x * NG, gid = blockIdx.x * NG + g;
    const int npos = gid < T ? (T - 1 - gid) / GT + 1 : 0;
    const int nit = npos * B; /* the group's rows: position-major, b in order */
    auto row_at = [&](int i) { return (i % B) * T + gid + (i / B) * GT; };

    int col[K];
    bool ok[K];
    float wf[K][P], aw[K][P], ab[K][P], ap[K][P];
    Pack<bf16> wv[K];
    nb2_setup<bf16, K>(w, tid, TPR, C, col, ok, wf, wv);
#pragma unroll
    for (int k = 0; k < K; k++) {
#pragma unroll
        for (int e = 0; e < P; e++) aw[k][e] = ab[k][e] = 0.0f;
        if (ok[k]) { /* a thread's own columns: no other thread touches them */
            reinterpret_cast<float4 *>(apos + col[k])[0] = make_float4(0.0f, 0.0f, 0.0f, 0.0f);
            reinterpret_cast<float4 *>(apos + col[k])[1] = make_float4(0.0f, 0.0f, 0.0f, 0.0f);
        }
    }
    int4 pr[K][2]; /* the raw dpos row of the current position: fp32 two 16-byte packs, bf16 one */

    Nb2Ring<bf16, K, D> ring;
    ring.clear();
#pragma unroll
    for (int j = 0; j < D; j++)
        if (j < nit) ring.template load<false, ACC>(j, x, dy, dx, mean, rstd, row_at(j), C, col, ok);
    for (int i0 = 0; i0 < nit; i0 += D) {
#pragma unroll
        for (int j = 0; j < D; j++) {
            const int i = i0 + j;
            if (i < nit) { /* uniform over the group */
                const int row = row_at(i);
                const size_t prow = (size_t)(gid + (i / B) * GT) * C;
                if (i % B == 0) /* the position begins: its dpos row, used when it ends */
#pragma unroll
                    for (int k = 0; k < K; k++)
                        if (ok[k]) {
                            if (gt == SX_F32) {
                                const int4 *q = reinterpret_cast<const int4 *>((const float *)dpos + prow + col[k]);
                                pr[k][0] = q[0];
                                pr[k][1] = q[1];
                            } else {
                                pr[k][0] = *reinterpret_cast<const int4 *>((const bf16 *)dpos + prow + col[k]);
                            }
                        }
                Pack<bf16> cx[K], cg[K], cd[K];
                float cm, cr;
                ring.take(j, cx, cg, cd, cm, cr);
                if (i + D < nit)
                    ring.template load<false, ACC>(j, x, dy, dx, mean, rstd, row_at(i + D), C, col, ok); /* D rows ahead */
                /* the running sums live in shared memory (registers are short): this row's
                 * contribution in registers, then added to them */
#pragma unroll
                for (int k = 0; k < K; k++)
#pragma unroll
                    for (int e = 0; e < P; e++) ap[k][e] = 0.0f;
                nb2_row<bf16, false, K, ACC, true, true>(dx + (size_t)row * C, true, cx, cg, cd, wf, wv, col, ok, cm, cr,
                                                         invC, aw, ab, red + ((i & 1) * NG + g) * W, W, lane, wi,
                                                         1 + g, TPR, ap);
#pragma unroll
                for (int k = 0; k < K; k++)
                    if (ok[k]) {
                        float4 *q = reinterpret_cast<float4 *>(apos + col[k]);
                        const float4 a0 = q[0], a1 = q[1];
                        ap[k][0] += a0.x; ap[k][1] += a0.y; ap[k][2] += a0.z; ap[k][3] += a0.w;
                        ap[k][4] += a1.x; ap[k][5] += a1.y; ap[k][6] += a1.z; ap[k][7] += a1.w;
                        const bool last = i % B == B - 1; /* then ap goes to dpos, and the sums restart */
                        q[0] = last ? make_float4(0.0f, 0.0f, 0.0f, 0.0f) : make_float4(ap[k][0], ap[k][1], ap[k][2], ap[k][3]);
                        q[1] = last ? make_float4(0.0f, 0.0f, 0.0f, 0.0f) : make_float4(ap[k][4], ap[k][5], ap[k][6], ap[k][7]);
                    }
                if (i % B == B - 1) /* the position's last row: dpos[t] += the sum, in b order */
#pragma unroll
                    for (int k = 0; k < K; k++) {
                        if (ok[k]) {
                            if (gt == SX_F32) {
                                float4 *q = reinterpret_cast<float4 *>((float *)dpos + prow + col[k]);
                                const float4 a0 = *reinterpret_cast<const float4 *>(&pr[k][0]);
                                const float4 a1 = *reinterpret_cast<const float4 *>(&pr[k][1]);
                                q[0] = make_float4(a0.x + ap[k][0], a0.y + ap[k][1], a0.z + ap[k][2], a0.w + ap[k][3]);
                                q[1] = make_float4(a1.x + ap[k][4], a1.y + ap[k][5], a1.z + ap[k][6], a1.w + ap[k][7]);
                            } else {
                                Pack<bf16> v;
                                v.bits = pr[k][0];
#pragma unroll
                                for (int e = 0; e < P; e++) v.set(e, v.get(e) + ap[k][e]);
                                st_pack((bf16 *)dpos + prow + col[k], v);
                            }
                        }
                    }
            }
        }
    }
    norm_block_partial<bf16, false, K>(part, gbuf, aw, ab, col, ok, true, g, NG, C);
}

/* any size or alignment: dpos[t] += sum over b in order of dx[b, t], one thread per (t, c) */
__global__ void position_grad_generic(void *dpos, sx_dtype gt, const bf16 *__restrict__ dx, int B, int T, int C) {
    const size_t i = (size_t)blockIdx.x * blockDim.x + threadIdx.x;
    if (i >= (size_t)T * C) return;
    float sum = 0.0f;
    for (int b = 0; b < B; b++) sum += __bfloat162float(dx[(size_t)b * T * C + i]);
    grad_add(dpos, gt, i, sum);
}

/* the launch of the last sx_layernorm_backward_pos (kernels_internal.h) */
static int g_pos_last[6];
extern "C" void sx_layernorm_backward_pos_last_config(int cfg[6]) {
    for (int i = 0; i < 6; i++) cfg[i] = g_pos_last[i];
}

/* rows ahead and packs per thread (sx_layernorm_backward_pos_tune; 0 = automatic) */
static int g_pos_depth = 0, g_pos_k = 0;
extern "C" void sx_layernorm_backward_pos_tune(int depth, int k) {
    g_pos_depth = depth;
    g_pos_k = k;
}

template <int K, int D, bool ACC>
static cudaError_t launch_pos(bf16 *dx, float *part, void *dpos, sx_dtype gt, const bf16 *dy, const bf16 *x,
                              const bf16 *w, const float *mean, const float *rstd, int B, int T, int C, int *G,
                              cudaStream_t stream) {
    constexpr int P = Pack<bf16>::N;
    const int packs = (C + P - 1) / P;
    const int W = (packs + K * SX_WARP - 1) / (K * SX_WARP);
    /* small blocks; a row of several warps gets a block of its own, so that no group waits at the
     * block barrier of norm_block_partial while another still meets at its named barrier (racecheck
     * reported hazards in that case on 2 of 3 runs, 2026-11-25; we found no race by reading) */
    const int NG = W > 1 ? 1 : 4;
    const int threads = NG * W * SX_WARP;
    /* row sums, the partials' buffer (NG > 1), the groups' position sums */
    const size_t smem = 2 * (size_t)NG * W * sizeof(float2) + (NG > 1 ? (size_t)NG * 2 * C * sizeof(float) : 0) +
                        (size_t)NG * C * sizeof(float);
    const void *kf = (const void *)ln_backward_pos<K, D, ACC>;
    SX_CHECK(cudaFuncSetAttribute(kf, cudaFuncAttributeMaxDynamicSharedMemorySize, (int)smem));
    int per_sm = 0;
    SX_CHECK(cudaOccupancyMaxActiveBlocksPerMultiprocessor(&per_sm, kf, threads, smem));
    if (per_sm < 1) per_sm = 1;
    /* one position per group while they all fit at once; else as many groups as fit */
    int g = (T + NG - 1) / NG;
    if (g > sx_num_sms() * per_sm) g = sx_num_sms() * per_sm;
    if (g > NORM_MAX_G) g = NORM_MAX_G;
    if (g < 1) g = 1;
    *G = g;
    const int cfg[6] = {K, W, NG, g, per_sm, D};
    for (int i = 0; i < 6; i++) g_pos_last[i] = cfg[i];
    ln_backward_pos<K, D, ACC><<<g, threads, smem, stream>>>(dx, part, dpos, gt, dy, x, w, mean, rstd, B, T, C, W);
    return cudaGetLastError();
}

extern "C" cudaError_t sx_layernorm_backward_pos(sx_bf16 *dx_, void *dweight, void *dbias, void *dpos,
                                                 sx_dtype grad_type, const sx_bf16 *dy_, const sx_bf16 *x_,
                                                 const sx_bf16 *weight_, const float *mean, const float *rstd,
                                                 int dx_accumulate, void *workspace, size_t workspace_bytes, int B,
                                                 int T, int C, cudaStream_t stream) {
    SX_REQUIRE(B >= 0 && T >= 0 && C >= 0);
    SX_REQUIRE(grad_type == SX_F32 || grad_type == SX_BF16);
    SX_REQUIRE((size_t)B * T <= (size_t)INT32_MAX);
    if (B == 0 || T == 0 || C == 0) return cudaSuccess;
    SX_REQUIRE(dx_ && dweight && dpos && dy_ && x_ && weight_ && mean && rstd && workspace);
    SX_REQUIRE(workspace_bytes >= sx_norm_backward_workspace_bytes(C));
    bf16 *dx = (bf16 *)dx_;
    const bf16 *dy = (const bf16 *)dy_, *x = (const bf16 *)x_, *w = (const bf16 *)weight_;
    constexpr int P = Pack<bf16>::N;
    const int packs = (C + P - 1) / P;
    const bool vec = C % P == 0 && sx_aligned16(dx) && sx_aligned16(dy) && sx_aligned16(x) && sx_aligned16(w) &&
                     sx_aligned16(dpos) && packs <= 3 * 8 * SX_WARP; /* at most 3 packs per thread, 8 warps per row */
    if (!vec) { /* the plain backward, then a pass over dx */
        SX_CHECK(sx_layernorm_backward(dx_, dweight, dbias, grad_type, dy_, x_, weight_, mean, rstd, dx_accumulate,
                                       workspace, workspace_bytes, B * T, C, stream));
        for (int i = 0; i < 6; i++) g_pos_last[i] = 0;
        position_grad_generic<<<sx_blocks((size_t)T * C, NORM_THREADS), NORM_THREADS, 0, stream>>>(dpos, grad_type, dx,
                                                                                                 B, T, C);
        SX_LAUNCHED();
    }
    /* packs per thread: one warp per row up to 4 packs per thread (C <= 1024), else the fewest
     * warps per row that keep it at 3 or below (4 spill a little, and two warps per row measured
     * slower), then spread evenly; rows ahead: 2 with up to 2 packs per thread, else 1 (2 spill).
     * From the H100 sweep of bench_kernels (docs/validation/2026-11-25-h100-position-grad):
     * C = 768 B = 32: 3 packs, 1 row ahead 93.9% of copy (2 packs, 2 warps 77.0%); C = 1024
     * B = 16: 4 packs 86.3% (2 packs, 2 warps 83.1-85.5%). */
    const int kmax = g_pos_k >= 1 && g_pos_k <= 4 ? g_pos_k : packs <= 4 * SX_WARP ? 4 : 3;
    const int W = (packs + kmax * SX_WARP - 1) / (kmax * SX_WARP);
    const int K = (packs + W * SX_WARP - 1) / (W * SX_WARP);
    float *part = (float *)workspace;
    int G = 0;
    cudaError_t e;
    const int depth = g_pos_depth == 1 || g_pos_depth == 2 ? g_pos_depth : K <= 2 ? 2 : 1;
#define POSD(KK, DD) (dx_accumulate ? launch_pos<KK, DD, true>(dx, part, dpos, grad_type, dy, x, w, mean, rstd, B, T, C, &G, stream) \
                                    : launch_pos<KK, DD, false>(dx, part, dpos, grad_type, dy, x, w, mean, rstd, B, T, C, &G, stream))
#define POS(KK) (depth == 1 ? POSD(KK, 1) : POSD(KK, 2))
    switch (K) {
    case 1: e = POS(1); break;
    case 2: e = POS(2); break;
    case 3: e = POS(3); break;
    default: e = POS(4); break;
    }
#undef POS
#undef POSD
    SX_CHECK(e);
    SX_CHECK(sx_launch(g_norm_pdl != 0, norm_param_reduce, dim3(sx_blocks(C, 32)), dim3(1024), 0, stream, dweight,
                       dbias, grad_type, (const float *)part, G, C));
    SX_LAUNCHED();
}

/* ---------------------------------------------------------------- C API */

extern "C" size_t sx_norm_backward_workspace_bytes(int C) {
    return C > 0 ? (size_t)NORM_MAX_G * 2 * (size_t)C * sizeof(float) : 0;
}

extern "C" cudaError_t sx_layernorm_forward(sx_bf16 *out, float *mean, float *rstd, const sx_bf16 *x,
                                            const sx_bf16 *weight, const sx_bf16 *bias, int N, int C,
                                            float eps, cudaStream_t stream) {
    return norm_forward<bf16, false>((bf16 *)out, mean, rstd, (const bf16 *)x, (const bf16 *)weight,
                                     (const bf16 *)bias, N, C, eps, stream);
}
extern "C" cudaError_t sx_layernorm_forward_f32(float *out, float *mean, float *rstd, const float *x,
                                                const float *weight, const float *bias, int N, int C,
                                                float eps, cudaStream_t stream) {
    return norm_forward<float, false>(out, mean, rstd, x, weight, bias, N, C, eps, stream);
}
extern "C" cudaError_t sx_rmsnorm_forward(sx_bf16 *out, float *rstd, const sx_bf16 *x, const sx_bf16 *weight,
                                          int N, int C, float eps, cudaStream_t stream) {
    return norm_forward<bf16, true>((bf16 *)out, nullptr, rstd, (const bf16 *)x, (const bf16 *)weight, nullptr,
                                    N, C, eps, stream);
}
extern "C" cudaError_t sx_rmsnorm_forward_f32(float *out, float *rstd, const float *x, const float *weight,
                                              int N, int C, float eps, cudaStream_t stream) {
    return norm_forward<float, true>(out, nullptr, rstd, x, weight, nullptr, N, C, eps, stream);
}

extern "C" cudaError_t sx_layernorm_backward(sx_bf16 *dx, void *dweight, void *dbias, sx_dtype grad_type,
                                             const sx_bf16 *dy, const sx_bf16 *x, const sx_bf16 *weight,
                                             const float *mean, const float *rstd, int dx_accumulate,
                                             void *workspace, size_t workspace_bytes, int N, int C,
                                             cudaStream_t stream) {
    return norm_backward<bf16, false>((bf16 *)dx, dweight, dbias, grad_type, (const bf16 *)dy, (const bf16 *)x,
                                      (const bf16 *)weight, mean, rstd, dx_accumulate, workspace,
                                      workspace_bytes, N, C, stream);
}
extern "C" cudaError_t sx_layernorm_backward_f32(float *dx, float *dweight, float *dbias, const float *dy,
                                                 const float *x, const float *weight, const float *mean,
                                                 const float *rstd, int dx_accumulate, void *workspace,
                                                 size_t workspace_bytes, int N, int C, cudaStream_t stream) {
    return norm_backward<float, false>(dx, dweight, dbias, SX_F32, dy, x, weight, mean, rstd, dx_accumulate,
                                       workspace, workspace_bytes, N, C, stream);
}
extern "C" cudaError_t sx_rmsnorm_backward(sx_bf16 *dx, void *dweight, sx_dtype grad_type, const sx_bf16 *dy,
                                           const sx_bf16 *x, const sx_bf16 *weight, const float *rstd,
                                           int dx_accumulate, void *workspace, size_t workspace_bytes,
                                           int N, int C, cudaStream_t stream) {
    return norm_backward<bf16, true>((bf16 *)dx, dweight, nullptr, grad_type, (const bf16 *)dy, (const bf16 *)x,
                                     (const bf16 *)weight, nullptr, rstd, dx_accumulate, workspace,
                                     workspace_bytes, N, C, stream);
}
extern "C" cudaError_t sx_rmsnorm_backward_f32(float *dx, float *dweight, const float *dy, const float *x,
                                               const float *weight, const float *rstd, int dx_accumulate,
                                               void *workspace, size_t workspace_bytes, int N, int C,
                                               cudaStream_t stream) {
    return norm_backward<float, true>(dx, dweight, nullptr, SX_F32, dy, x, weight, nullptr, rstd, dx_accumulate,
                                      workspace, workspace_bytes, N, C, stream);
}

/* fp16 storage: the same templates; parameter gradients in fp32 */
extern "C" cudaError_t sx_layernorm_forward_f16(sx_f16 *out, float *mean, float *rstd, const sx_f16 *x,
                                                const sx_f16 *weight, const sx_f16 *bias, int N, int C,
                                                float eps, cudaStream_t stream) {
    return norm_forward<f16, false>((f16 *)out, mean, rstd, (const f16 *)x, (const f16 *)weight, (const f16 *)bias,
                                    N, C, eps, stream);
}
extern "C" cudaError_t sx_rmsnorm_forward_f16(sx_f16 *out, float *rstd, const sx_f16 *x, const sx_f16 *weight,
                                              int N, int C, float eps, cudaStream_t stream) {
    return norm_forward<f16, true>((f16 *)out, nullptr, rstd, (const f16 *)x, (const f16 *)weight, nullptr, N, C,
                                   eps, stream);
}
extern "C" cudaError_t sx_layernorm_backward_f16(sx_f16 *dx, float *dweight, float *dbias, const sx_f16 *dy,
                                                 const sx_f16 *x, const sx_f16 *weight, const float *mean,
                                                 const float *rstd, int dx_accumulate, void *workspace,
                                                 size_t workspace_bytes, int N, int C, cudaStream_t stream) {
    return norm_backward<f16, false>((f16 *)dx, dweight, dbias, SX_F32, (const f16 *)dy, (const f16 *)x,
                                     (const f16 *)weight, mean, rstd, dx_accumulate, workspace, workspace_bytes, N, C,
                                     stream);
}
extern "C" cudaError_t sx_rmsnorm_backward_f16(sx_f16 *dx, float *dweight, const sx_f16 *dy, const sx_f16 *x,
                                               const sx_f16 *weight, const float *rstd, int dx_accumulate,
                                               void *workspace, size_t workspace_bytes, int N, int C,
                                               cudaStream_t stream) {
    return norm_backward<f16, true>((f16 *)dx, dweight, nullptr, SX_F32, (const f16 *)dy, (const f16 *)x,
                                    (const f16 *)weight, nullptr, rstd, dx_accumulate, workspace, workspace_bytes, N,
                                    C, stream);
}
