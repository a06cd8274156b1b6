/* Rotary position embedding (RoPE), in place on the query and key heads of one fused qkv
 * GEMM output, "rotate half" convention (GPT-NeoX, Hugging Face LLaMA): element i of a
 * head is paired with element i + D/2 and the pair is rotated by t * inv_freq[i],
 * inv_freq[i] = theta^(-2i/D), t = n mod T the token's position in its sequence.
 *
 * Angles.  t * inv_freq reaches T - 1 radians (i = 0); in fp32 that product alone is off
 * by up to half an ulp of the angle (2^-11 rad at t = 8191), and sin/cos inherit it.  So
 * the angle is carried in turns, in double: f[i] = inv_freq[i] / (2 pi) (computed once per
 * block into shared memory, exp2/log2 in double), u = t * f[i], r = u - rint(u) in
 * [-1/2, 1/2] (exact), and sin/cos come from sincospif(2r) in fp32, which reduces its
 * argument exactly.  The angle error is then ~2^-24 * pi rad from rounding 2r to fp32 (plus
 * 2^-53 * t / (2 pi) turns from u, 2.4e-7 rad at t = 2^31), and sin/cos are within ~1e-7
 * of float64: measured max abs error 1.15e-7 for every position below 8192 and theta 1e4,
 * 5e5 (test_kernels through sx_rope_angles_f32, H200, 2026-11-23), where t * inv_freq
 * formed in fp32 would be off by up to 4.8e-4.  The pair is rotated in fp32 and rounded
 * once to bf16.
 *
 * Vector path (D/2 % 8 == 0, row stride % 8 == 0, 16-byte aligned): one thread owns 8
 * consecutive pairs (two 16-byte packs: elements c*8.. of the first half, the same of the
 * second) of the same chunk of ROPE_HPT heads of one token, computes their 8 sin/cos once
 * and applies them to all its heads; its heads are hg, hg + HG, ... (HG = head groups) so
 * that neighbouring threads read neighbouring heads.  Scalar path otherwise: one thread
 * per pair and head. */
#include "common.cuh"
#include "kernels_internal.h"

#define ROPE_THREADS 256
#define ROPE_HPT 4         /* heads per thread on the vector path */
#define ROPE_MAX_HALF 4096 /* D <= 8192: the per-block table of D/2 doubles fits in 32 KB */

/* f[i] = theta^(-2i/D) / (2 pi), in double: the rotation of pair i per position, in turns */
__device__ __forceinline__ void rope_fill_table(double *f, int half, int D, double log2_theta) {
    for (int i = threadIdx.x; i < half; i += blockDim.x)
        f[i] = exp2(-(2.0 * (double)i / (double)D) * log2_theta) * 0.15915494309189533577;
    __syncthreads();
}

/* sin and cos of 2 pi * t * f, reduced in double (see the top of the file) */
__device__ __forceinline__ void rope_sincos(int t, double f, float *s, float *c) {
    const double u = (double)t * f;
    const double r = u - rint(u);
    sincospif((float)(2.0 * r), s, c);
}

/* The position of row t of a sequence: one chunk at pos0 (chunk = T, pos0 = 0: t itself), or
 * two, context parallelism's (sx_rope_forward_chunks) */
struct rope_pos {
    int chunk, pos0, pos1;
    __device__ __forceinline__ int at(int t) const { return t < chunk ? pos0 + t : pos1 + t - chunk; }
};

/* BWD: rotation by -angle (the transpose), for the gradient */
template <bool BWD>
__device__ __forceinline__ void rope_rotate(float x1, float x2, float s, float c, float *y1, float *y2) {
    if (BWD) s = -s;
    *y1 = x1 * c - x2 * s;
    *y2 = x2 * c + x1 * s;
}

template <bool BWD>
__global__ void __launch_bounds__(ROPE_THREADS)
rope_vec_kernel(bf16 *qkv, int N, int T, int NH, int D, int stride, int P, int HG, double log2_theta, rope_pos ps) {
    extern __shared__ double table[];
    const int half = D / 2;
    rope_fill_table(table, half, D, log2_theta);
    const size_t work = (size_t)N * P * HG;
    for (size_t x = (size_t)blockIdx.x * blockDim.x + threadIdx.x; x < work; x += (size_t)gridDim.x * blockDim.x) {
        const int c = (int)(x % P);
        const int hg = (int)((x / P) % HG);
        const int n = (int)(x / ((size_t)P * HG));
        bf16 *row = qkv + (size_t)n * stride + c * 8;
        /* the loads first, so that they are in flight while the angles are computed */
        Pack<bf16> a[ROPE_HPT], b[ROPE_HPT];
#pragma unroll
        for (int j = 0; j < ROPE_HPT; j++) {
            const int h = hg + j * HG;
            if (h < NH) {
                a[j] = ld_pack_cs(row + (size_t)h * D);
                b[j] = ld_pack_cs(row + (size_t)h * D + half);
            }
        }
        float sn[8], cs[8];
#pragma unroll
        for (int k = 0; k < 8; k++) rope_sincos(ps.at(n % T), table[c * 8 + k], &sn[k], &cs[k]);
#pragma unroll
        for (int j = 0; j < ROPE_HPT; j++) {
            const int h = hg + j * HG;
            if (h < NH) {
                Pack<bf16> oa, ob;
#pragma unroll
                for (int k = 0; k < 8; k++) {
                    float y1, y2;
                    rope_rotate<BWD>(a[j].get(k), b[j].get(k), sn[k], cs[k], &y1, &y2);
                    oa.set(k, y1);
                    ob.set(k, y2);
                }
                st_pack_cs(row + (size_t)h * D, oa);
                st_pack_cs(row + (size_t)h * D + half, ob);
            }
        }
    }
}

template <bool BWD>
__global__ void __launch_bounds__(ROPE_THREADS)
rope_scalar_kernel(bf16 *qkv, int N, int T, int NH, int D, int stride, double log2_theta, rope_pos ps) {
    extern __shared__ double table[];
    const int half = D / 2;
    rope_fill_table(table, half, D, log2_theta);
    const size_t work = (size_t)N * NH * half;
    for (size_t x = (size_t)blockIdx.x * blockDim.x + threadIdx.x; x < work; x += (size_t)gridDim.x * blockDim.x) {
        const int i = (int)(x % half);
        const size_t nh = x / half;
        const int h = (int)(nh % NH), n = (int)(nh / NH);
        float s, c, y1, y2;
        rope_sincos(ps.at(n % T), table[i], &s, &c);
        bf16 *p = qkv + (size_t)n * stride + (size_t)h * D + i;
        rope_rotate<BWD>(__bfloat162float(p[0]), __bfloat162float(p[half]), s, c, &y1, &y2);
        p[0] = __float2bfloat16_rn(y1);
        p[half] = __float2bfloat16_rn(y2);
    }
}

/* A grid of as many blocks as can be resident at once (at most the work needs): each block
 * fills its table of D/2 doubles once and then strides over the work. */
template <typename K>
static unsigned rope_grid(K kernel, size_t smem, size_t work) {
    const unsigned need = sx_blocks(work, ROPE_THREADS);
    int per_sm = 0;
    if (cudaOccupancyMaxActiveBlocksPerMultiprocessor(&per_sm, kernel, ROPE_THREADS, smem) != cudaSuccess || per_sm < 1)
        per_sm = 1;
    const int sms = sx_num_sms();
    const unsigned cap = (unsigned)(sms > 0 ? sms : 132) * (unsigned)per_sm;
    return need < cap ? need : cap;
}

template <bool BWD>
static cudaError_t rope_launch(sx_bf16 *qkv, int B, int T, int H, int KV, int D, int row_stride, float theta,
                               rope_pos ps, cudaStream_t stream) {
    SX_REQUIRE(B >= 0 && T >= 0 && H >= 0 && KV >= 0 && D >= 0);
    SX_REQUIRE(ps.chunk >= 0 && ps.pos0 >= 0 && ps.pos1 >= 0);
    if (B == 0 || T == 0 || H + KV == 0 || D == 0) return cudaSuccess;
    SX_REQUIRE(qkv && D % 2 == 0 && D / 2 <= ROPE_MAX_HALF && theta > 0.0f && isfinite(theta));
    SX_REQUIRE((size_t)B * T <= INT32_MAX && (long long)(H + KV) * D <= row_stride);
    const int N = B * T, NH = H + KV, half = D / 2;
    const double log2_theta = log2((double)theta);
    const size_t smem = (size_t)half * sizeof(double);
    if (half % 8 == 0 && row_stride % 8 == 0 && sx_aligned16(qkv)) {
        const int P = half / 8, HG = (NH + ROPE_HPT - 1) / ROPE_HPT;
        const unsigned grid = rope_grid(rope_vec_kernel<BWD>, smem, (size_t)N * P * HG);
        rope_vec_kernel<BWD><<<grid, ROPE_THREADS, smem, stream>>>((bf16 *)qkv, N, T, NH, D, row_stride, P, HG,
                                                                   log2_theta, ps);
    } else {
        const unsigned grid = rope_grid(rope_scalar_kernel<BWD>, smem, (size_t)N * NH * half);
        rope_scalar_kernel<BWD><<<grid, ROPE_THREADS, smem, stream>>>((bf16 *)qkv, N, T, NH, D, row_stride, log2_theta, ps);
    }
    SX_LAUNCHED();
}

extern "C" cudaError_t sx_rope_forward(sx_bf16 *qkv, int B, int T, int H, int KV, int D, int row_stride, float theta,
                                       cudaStream_t stream) {
    return rope_launch<false>(qkv, B, T, H, KV, D, row_stride, theta, rope_pos{T, 0, 0}, stream);
}

extern "C" cudaError_t sx_rope_backward(sx_bf16 *dqkv, int B, int T, int H, int KV, int D, int row_stride,
                                        float theta, cudaStream_t stream) {
    return rope_launch<true>(dqkv, B, T, H, KV, D, row_stride, theta, rope_pos{T, 0, 0}, stream);
}

extern "C" cudaError_t sx_rope_forward_chunks(sx_bf16 *qkv, int B, int T, int H, int KV, int D, int row_stride,
                                              float theta, int chunk, int pos0, int pos1, cudaStream_t stream) {
    return rope_launch<false>(qkv, B, T, H, KV, D, row_stride, theta, rope_pos{chunk, pos0, pos1}, stream);
}

extern "C" cudaError_t sx_rope_backward_chunks(sx_bf16 *dqkv, int B, int T, int H, int KV, int D, int row_stride,
                                               float theta, int chunk, int pos0, int pos1, cudaStream_t stream) {
    return rope_launch<true>(dqkv, B, T, H, KV, D, row_stride, theta, rope_pos{chunk, pos0, pos1}, stream);
}

/* ------------------------------------------------ the angles, for the tests */

__global__ void rope_angles_kernel(float *cos_out, float *sin_out, int T, int D, double log2_theta) {
    extern __shared__ double table[];
    const int half = D / 2;
    rope_fill_table(table, half, D, log2_theta);
    const size_t x = (size_t)blockIdx.x * blockDim.x + threadIdx.x;
    if (x >= (size_t)T * half) return;
    rope_sincos((int)(x / half), table[x % half], &sin_out[x], &cos_out[x]);
}

extern "C" cudaError_t sx_rope_angles_f32(float *cos_out, float *sin_out, int T, int D, float theta,
                                          cudaStream_t stream) {
    SX_REQUIRE(T >= 0 && D >= 0);
    if (T == 0 || D == 0) return cudaSuccess;
    SX_REQUIRE(cos_out && sin_out && D % 2 == 0 && D / 2 <= ROPE_MAX_HALF && theta > 0.0f && isfinite(theta));
    const size_t n = (size_t)T * (D / 2);
    rope_angles_kernel<<<sx_blocks(n, ROPE_THREADS), ROPE_THREADS, (size_t)(D / 2) * sizeof(double), stream>>>(
        cos_out, sin_out, T, D, log2((double)theta));
    SX_LAUNCHED();
}
