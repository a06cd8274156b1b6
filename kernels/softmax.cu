/* Causal softmax for unfused attention, over scores [BH, T, T], forward and backward.
 * One warp per row t (length T, of which the first t+1 entries are live).
 * Forward: pass 1 reads the live part (online max/sum in the exp2 domain), pass 2 re-reads it
 * (L1/L2 hits) and writes the row, zeros above the diagonal.  Backward, fast path (T % 8 == 0,
 * T <= 2048): the live part is held in registers, read once, and the row written once; other T:
 * two passes as the forward (the dot product p.dp, then the row). */
#include "common.cuh"
#include "kernels_internal.h"

#define SM_THREADS 256
#define LOG2E 1.4426950408889634f

template <bool VEC>
__global__ void __launch_bounds__(SM_THREADS)
softmax_causal_fwd_kernel(bf16 *__restrict__ out, const bf16 *__restrict__ in, int rows, int T, float sl2) {
    const int lane = threadIdx.x % SX_WARP;
    const int row = blockIdx.x * (blockDim.x / SX_WARP) + threadIdx.x / SX_WARP;
    if (row >= rows) return;
    const int L = row % T + 1;
    const bf16 *x = in + (size_t)row * T;
    bf16 *o = out + (size_t)row * T;
    float mx = -INFINITY, sm = 0.0f;
    if constexpr (VEC) {
        for (int c = lane * 8; c < L; c += SX_WARP * 8) {
            const Pack<bf16> p = ld_pack(x + c);
            float z[8], lm = -INFINITY;
#pragma unroll
            for (int k = 0; k < 8; k++) {
                z[k] = c + k < L ? p.get(k) * sl2 : -INFINITY;
                lm = fmaxf(lm, z[k]);
            }
            const float nm = fmaxf(mx, lm);
            float s = sm * exp2f(mx - nm);
#pragma unroll
            for (int k = 0; k < 8; k++) s += exp2f(z[k] - nm);
            sm = s;
            mx = nm;
        }
    } else {
        for (int c = lane; c < L; c += SX_WARP) {
            const float z = __bfloat162float(x[c]) * sl2;
            const float nm = fmaxf(mx, z);
            sm = sm * exp2f(mx - nm) + exp2f(z - nm);
            mx = nm;
        }
    }
    const float M = warp_max(mx);
    const float S = warp_sum(mx == -INFINITY ? 0.0f : sm * exp2f(mx - M));
    const float inv = 1.0f / S;
    if constexpr (VEC) {
        for (int c = lane * 8; c < T; c += SX_WARP * 8) {
            Pack<bf16> r;
            if (c < L) {
                const Pack<bf16> p = ld_pack(x + c);
#pragma unroll
                for (int k = 0; k < 8; k++) r.set(k, c + k < L ? exp2f(p.get(k) * sl2 - M) * inv : 0.0f);
            } else {
                r.bits = make_int4(0, 0, 0, 0);
            }
            st_pack_cs(o + c, r);
        }
    } else {
        for (int c = lane; c < T; c += SX_WARP)
            o[c] = __float2bfloat16_rn(c < L ? exp2f(__bfloat162float(x[c]) * sl2 - M) * inv : 0.0f);
    }
}

/* dscores may alias dp: every element of dp is read before, and only by, the lane that writes it */
template <bool VEC>
__global__ void __launch_bounds__(SM_THREADS)
softmax_causal_bwd_kernel(bf16 *ds, const bf16 *__restrict__ p, const bf16 *dp, int rows, int T, float scale) {
    const int lane = threadIdx.x % SX_WARP;
    const int row = blockIdx.x * (blockDim.x / SX_WARP) + threadIdx.x / SX_WARP;
    if (row >= rows) return;
    const int L = row % T + 1;
    const bf16 *pr = p + (size_t)row * T, *dr = dp + (size_t)row * T;
    bf16 *o = ds + (size_t)row * T;
    float dot = 0.0f;
    if constexpr (VEC) {
        for (int c = lane * 8; c < L; c += SX_WARP * 8) {
            const Pack<bf16> a = ld_pack(pr + c), b = ld_pack_plain(dr + c);
#pragma unroll
            for (int k = 0; k < 8; k++)
                if (c + k < L) dot += a.get(k) * b.get(k);
        }
    } else {
        for (int c = lane; c < L; c += SX_WARP) dot += __bfloat162float(pr[c]) * __bfloat162float(dr[c]);
    }
    dot = warp_sum(dot);
    if constexpr (VEC) {
        for (int c = lane * 8; c < T; c += SX_WARP * 8) {
            Pack<bf16> r;
            if (c < L) {
                const Pack<bf16> a = ld_pack(pr + c), b = ld_pack_plain(dr + c);
#pragma unroll
                for (int k = 0; k < 8; k++) r.set(k, c + k < L ? scale * a.get(k) * (b.get(k) - dot) : 0.0f);
            } else {
                r.bits = make_int4(0, 0, 0, 0);
            }
            st_pack_cs(o + c, r);
        }
    } else {
        for (int c = lane; c < T; c += SX_WARP) {
            const float v = c < L ? scale * __bfloat162float(pr[c]) * (__bfloat162float(dr[c]) - dot) : 0.0f;
            o[c] = __float2bfloat16_rn(v);
        }
    }
}

template <int CH>
__global__ void __launch_bounds__(SM_THREADS, CH <= 4 ? 3 : 2)
softmax_causal_bwd_reg(bf16 *ds, const bf16 *__restrict__ p, const bf16 *dp, int rows, int T, float scale) {
    const int lane = threadIdx.x % SX_WARP;
    const int row = blockIdx.x * (blockDim.x / SX_WARP) + threadIdx.x / SX_WARP;
    if (row >= rows) return;
    const int L = row % T + 1;
    const bf16 *pr = p + (size_t)row * T, *dr = dp + (size_t)row * T;
    bf16 *o = ds + (size_t)row * T;
    Pack<bf16> pv[CH], gv[CH];
#pragma unroll
    for (int c = 0; c < CH; c++) {
        const int col = (c * SX_WARP + lane) * 8;
        if (col < L) {
            pv[c] = ld_pack_cs(pr + col);
            gv[c] = ld_pack_plain(dr + col); /* may alias ds */
        }
    }
    float dot = 0.0f;
#pragma unroll
    for (int c = 0; c < CH; c++) {
        const int col = (c * SX_WARP + lane) * 8;
#pragma unroll
        for (int k = 0; k < 8; k++)
            if (col + k < L) dot += pv[c].get(k) * gv[c].get(k);
    }
    dot = warp_sum(dot);
#pragma unroll
    for (int c = 0; c < CH; c++) {
        const int col = (c * SX_WARP + lane) * 8;
        if (col < T) {
            Pack<bf16> r;
            if (col < L) {
#pragma unroll
                for (int k = 0; k < 8; k++) r.set(k, col + k < L ? scale * pv[c].get(k) * (gv[c].get(k) - dot) : 0.0f);
            } else {
                r.bits = make_int4(0, 0, 0, 0);
            }
            st_pack_cs(o + col, r);
        }
    }
}

/* Path choice, from tests/gpu/bench_kernels (kernels/README.md).  Forward at BH=384 T=1024: the
 * row held in registers reached 90.8% of copy on an H100 but 70.2% on an H200, the two-pass loop
 * 88.1% and 84.6%: the register path keeps too few bytes in flight for the H200's bandwidth, so
 * the forward runs the two-pass loop (the register version is in dev/cuda/softmax_forward.cu).
 * Backward: registers 95.5% and 92.0%, two-pass 75.5% and 80.8%: SX_SOFTMAX_REG = the register
 * path when T % 8 == 0 and T <= 2048 (else the two-pass loop), the default; SX_SOFTMAX_LOOP =
 * always the two-pass loop (sx_softmax_causal_backward_path, kernels_internal.h, for the tests). */
enum { SX_SOFTMAX_REG = 1, SX_SOFTMAX_LOOP = 2 };
#define SOFTMAX_BWD_DEFAULT SX_SOFTMAX_REG

extern "C" cudaError_t sx_softmax_causal_forward(sx_bf16 *out, const sx_bf16 *scores, int BH, int T, float scale,
                                                 cudaStream_t stream) {
    SX_REQUIRE(BH >= 0 && T >= 0);
    const size_t rows = (size_t)BH * T;
    if (rows == 0) return cudaSuccess;
    SX_REQUIRE(out && scores && rows < (1u << 31));
    const unsigned grid = sx_blocks(rows, SM_THREADS / SX_WARP);
    const bool vec = T % 8 == 0 && sx_aligned16(out) && sx_aligned16(scores);
    const float sl2 = scale * LOG2E;
    bf16 *o = (bf16 *)out;
    const bf16 *in = (const bf16 *)scores;
    if (vec) softmax_causal_fwd_kernel<true><<<grid, SM_THREADS, 0, stream>>>(o, in, (int)rows, T, sl2);
    else softmax_causal_fwd_kernel<false><<<grid, SM_THREADS, 0, stream>>>(o, in, (int)rows, T, sl2);
    SX_LAUNCHED();
}

extern "C" cudaError_t sx_softmax_causal_backward_path(int path, sx_bf16 *dscores, const sx_bf16 *p,
                                                       const sx_bf16 *dp, int BH, int T, float scale,
                                                       cudaStream_t stream) {
    SX_REQUIRE(BH >= 0 && T >= 0 && (path == SX_SOFTMAX_REG || path == SX_SOFTMAX_LOOP));
    const size_t rows = (size_t)BH * T;
    if (rows == 0) return cudaSuccess;
    SX_REQUIRE(dscores && p && dp && rows < (1u << 31));
    const unsigned grid = sx_blocks(rows, SM_THREADS / SX_WARP);
    const bool vec = T % 8 == 0 && sx_aligned16(dscores) && sx_aligned16(p) && sx_aligned16(dp);
    const bool reg = vec && path == SX_SOFTMAX_REG;
    const int ch = (T + 255) / 256;
    bf16 *o = (bf16 *)dscores;
    const bf16 *pp = (const bf16 *)p, *gg = (const bf16 *)dp;
    if (reg && ch <= 1) softmax_causal_bwd_reg<1><<<grid, SM_THREADS, 0, stream>>>(o, pp, gg, (int)rows, T, scale);
    else if (reg && ch <= 2) softmax_causal_bwd_reg<2><<<grid, SM_THREADS, 0, stream>>>(o, pp, gg, (int)rows, T, scale);
    else if (reg && ch <= 4) softmax_causal_bwd_reg<4><<<grid, SM_THREADS, 0, stream>>>(o, pp, gg, (int)rows, T, scale);
    else if (reg && ch <= 8) softmax_causal_bwd_reg<8><<<grid, SM_THREADS, 0, stream>>>(o, pp, gg, (int)rows, T, scale);
    else if (vec) softmax_causal_bwd_kernel<true><<<grid, SM_THREADS, 0, stream>>>(o, pp, gg, (int)rows, T, scale);
    else softmax_causal_bwd_kernel<false><<<grid, SM_THREADS, 0, stream>>>(o, pp, gg, (int)rows, T, scale);
    SX_LAUNCHED();
}

extern "C" cudaError_t sx_softmax_causal_backward(sx_bf16 *dscores, const sx_bf16 *p, const sx_bf16 *dp, int BH,
                                                  int T, float scale, cudaStream_t stream) {
    return sx_softmax_causal_backward_path(SOFTMAX_BWD_DEFAULT, dscores, p, dp, BH, T, scale, stream);
}
