/* Context parallelism's kernels beside the fused attention (validator/cp.c runs them):
 *
 *   sx_attention_merge  the online-softmax merge of a block's partial output into the running
 *                       one.  Each partial result is normalised by its own sum, so with its
 *                       log-sum-exp it carries everything the merge needs: out = sum_j p_j v_j
 *                       with p_j = exp(s_j - lse) over the block's keys, and for two blocks
 *                       the whole softmax's weights are exp(lse_i - L), L = log(exp(lse_1) +
 *                       exp(lse_2)) (Milakov and Gimelshein 2018, "Online normalizer
 *                       calculation for softmax"; FlashAttention-2, Dao 2023, section 3.1).
 *                       validator/cp_ring.c has the float64 reference.
 *   sx_add_rows         dst += src over a strided block: the dK, dV that a peer computed
 *                       for this rank's keys, added to the rank's own (16-byte packs where the
 *                       blocks allow, else one element a thread).
 *   sx_copy_rows        dst = src over a strided block, the same way: the rank's K and V packed
 *                       side by side into the ring's send buffer.
 *
 * The merge is memory-bound (read out, part and both lse, write out and lse): one warp per
 * (b, t, h) row, each lane two adjacent elements at a time. */
#include "common.cuh"

__global__ void __launch_bounds__(256)
attention_merge_kernel(bf16 *__restrict__ out, float *__restrict__ lse, const bf16 *__restrict__ part,
                       const float *__restrict__ part_lse, int B, int T, int H, int D, long long out_bs,
                       long long lse_stride) {
    const int lane = threadIdx.x % 32;
    const long long row = (long long)blockIdx.x * 8 + threadIdx.x / 32; /* (b*T + t)*H + h */
    if (row >= (long long)B * T * H) return;
    const int h = (int)(row % H);
    const long long bt = row / H, b = bt / T, t = bt % T;
    float *l1p = lse + (b * H + h) * lse_stride + t;
    const float l1 = *l1p, l2 = part_lse[(b * H + h) * T + t];
    const float m = fmaxf(l1, l2);
    /* both -inf cannot happen (every query row sees a key in the causal block) */
    const float e1 = expf(l1 - m), e2 = expf(l2 - m), sum = e1 + e2;
    const float w1 = e1 / sum, w2 = e2 / sum;
    bf16 *o = out + b * out_bs + (t * H + h) * (long long)D;
    const bf16 *p = part + row * D;
    for (int i = lane * 2; i < D; i += 64) {
        const float2 x = __bfloat1622float2(*reinterpret_cast<const __nv_bfloat162 *>(o + i));
        const float2 y = __bfloat1622float2(*reinterpret_cast<const __nv_bfloat162 *>(p + i));
        *reinterpret_cast<__nv_bfloat162 *>(o + i) = __floats2bfloat162_rn(w1 * x.x + w2 * y.x, w1 * x.y + w2 * y.y);
    }
    __syncwarp();
    if (lane == 0) *l1p = m + logf(sum);
}

/* 16-byte packs where both blocks allow them (aligned, every row a whole number of packs): one div per eight
 * elements, and the loads and stores the width HBM moves best.  ADD: dst += src, the sum and its rounding
 * the scalar kernel's, element for element; else dst = src. */
template <bool ADD>
__global__ void __launch_bounds__(256)
rows_vec_kernel(bf16 *__restrict__ dst, long long dst_ld, const bf16 *__restrict__ src, long long src_ld, int rows,
                int cols) {
    const int per_row = cols / Pack<bf16>::N;
    const size_t n = (size_t)rows * per_row;
    for (size_t i = (size_t)blockIdx.x * blockDim.x + threadIdx.x; i < n; i += (size_t)gridDim.x * blockDim.x) {
        const size_t r = i / per_row, c = (i % per_row) * Pack<bf16>::N;
        bf16 *d = dst + r * dst_ld + c;
        const Pack<bf16> b = ld_pack_cs(src + r * src_ld + c);
        if (!ADD) { st_pack(d, b); continue; }
        Pack<bf16> a = ld_pack_plain(d);
#pragma unroll
        for (int k = 0; k < Pack<bf16>::N; k++) a.set(k, a.get(k) + b.get(k));
        st_pack(d, a);
    }
}

template <bool ADD>
__global__ void __launch_bounds__(256)
rows_kernel(bf16 *__restrict__ dst, long long dst_ld, const bf16 *__restrict__ src, long long src_ld, int rows,
            int cols) {
    const size_t n = (size_t)rows * cols;
    for (size_t i = (size_t)blockIdx.x * blockDim.x + threadIdx.x; i < n; i += (size_t)gridDim.x * blockDim.x) {
        const size_t r = i / cols, c = i % cols;
        bf16 *d = dst + r * dst_ld + c;
        const bf16 s = src[r * src_ld + c];
        *d = ADD ? __float2bfloat16_rn(__bfloat162float(*d) + __bfloat162float(s)) : s;
    }
}

extern "C" cudaError_t sx_attention_merge(sx_bf16 *out, float *lse, const sx_bf16 *part, const float *part_lse, int B,
                                          int T, int H, int D, long long out_batch_stride, long long lse_stride,
                                          cudaStream_t stream) {
    SX_REQUIRE(B >= 0 && T >= 0 && H >= 0 && D > 0 && D % 2 == 0 && D <= 256);
    if (B == 0 || T == 0 || H == 0) return cudaSuccess;
    SX_REQUIRE(out && lse && part && part_lse && ((uintptr_t)out & 3u) == 0 && ((uintptr_t)part & 3u) == 0);
    SX_REQUIRE(lse_stride >= T && out_batch_stride % 2 == 0 && (B == 1 || out_batch_stride >= (long long)T * H * D));
    const long long rows = (long long)B * T * H;
    attention_merge_kernel<<<(unsigned)((rows + 7) / 8), 256, 0, stream>>>((bf16 *)out, lse, (const bf16 *)part,
                                                                          part_lse, B, T, H, D, out_batch_stride,
                                                                          lse_stride);
    SX_LAUNCHED();
}

/* dst (+)= src over rows x cols of two strided blocks: packs where the blocks allow, a grid of at most 8 blocks
 * an SM (a grid-stride loop) */
template <bool ADD>
static cudaError_t rows_launch(sx_bf16 *dst, long long dst_ld, const sx_bf16 *src, long long src_ld, int rows, int cols,
                               cudaStream_t stream) {
    SX_REQUIRE(rows >= 0 && cols >= 0);
    if (rows == 0 || cols == 0) return cudaSuccess;
    SX_REQUIRE(dst && src && dst_ld >= cols && src_ld >= cols);
    const int P = Pack<bf16>::N;
    const bool packs = ((uintptr_t)dst % 16) == 0 && ((uintptr_t)src % 16) == 0 && cols % P == 0 && dst_ld % P == 0 &&
                       src_ld % P == 0;
    const size_t n = (size_t)rows * cols / (packs ? P : 1);
    const int sms = sx_num_sms();
    const size_t cap = (size_t)(sms > 0 ? sms : 132) * 8;
    const size_t blocks = sx_blocks(n, 256) < cap ? sx_blocks(n, 256) : cap;
    if (packs)
        rows_vec_kernel<ADD><<<(unsigned)blocks, 256, 0, stream>>>((bf16 *)dst, dst_ld, (const bf16 *)src, src_ld, rows,
                                                                   cols);
    else
        rows_kernel<ADD><<<(unsigned)blocks, 256, 0, stream>>>((bf16 *)dst, dst_ld, (const bf16 *)src, src_ld, rows, cols);
    SX_LAUNCHED();
}

extern "C" cudaError_t sx_add_rows(sx_bf16 *dst, long long dst_ld, const sx_bf16 *src, long long src_ld, int rows,
                                   int cols, cudaStream_t stream) {
    return rows_launch<true>(dst, dst_ld, src, src_ld, rows, cols, stream);
}

extern "C" cudaError_t sx_copy_rows(sx_bf16 *dst, long long dst_ld, const sx_bf16 *src, long long src_ld, int rows,
                                    int cols, cudaStream_t stream) {
    return rows_launch<false>(dst, dst_ld, src, src_ld, rows, cols, stream);
}
