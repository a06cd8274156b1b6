/* Fused causal attention (FlashAttention-2 style) on tensor cores, forward and backward.
 *
 * Layout: q, k, v, dq, dk, dv are [B, T, heads, D] bf16 with a row stride per token
 * (q_row_stride for q/dq, kv_row_stride for k/v/dk/dv), so they may be slices of one fused
 * qkv GEMM output [B*T, (H + 2 KV) D]; out and dout are [B, T, H, D] contiguous (row
 * stride H*D); lse and the backward's D_i = rowsum(dO * O) are fp32 [B, H, T].
 *
 * Tensor cores through mma.sync.m16n8k16 (bf16 in, fp32 accumulate), operands moved
 * global -> shared with cp.async (16 bytes, zero-filled past T) and shared -> registers
 * with ldmatrix (.trans for the operands stored [k][n]).  Shared rows are padded by 16
 * bytes (D + 8 elements) so that ldmatrix's 8 rows fall in 8 different bank groups.
 * Every block has 4 warps; each warp owns 16 rows of the block's output tile.
 *
 * forward   grid (T/64 query blocks, B*H); per block 64 queries, loop over key blocks
 *           0..qb of 64 keys (double-buffered), online softmax in the exp2 domain, P kept
 *           in registers and fed straight back to the tensor cores as the A operand.
 * backward  three launches, no atomics (bitwise reproducible):
 *           1. D_i = rowsum(dO * O) (fp32, into the workspace)
 *           2. dK, dV: grid (T/64 key blocks, B*KV); per block 64 keys, loop over the
 *              query heads of its kv head (GQA sum in registers) and the query blocks at or
 *              after the key block: S^T = K Q^T, P^T = exp(S^T - lse), dV += P^T dO,
 *              dP^T = V dO^T, dS^T = P^T (dP^T - D), dK += dS^T Q.
 *           3. dQ: grid (T/64 query blocks, B*H); per block 64 queries, loop over key blocks:
 *              S, P, dP, dS recomputed, dQ += dS K.
 *           This recomputes S and dP once more than FlashAttention-2 (7 matrix products
 *           instead of 5) in exchange for no fp32 atomics on dQ.
 * blocks    the same kernels run one block of context parallelism's ring attention
 *           (sx_flash_attention_block_*, validator/cp.c): Tq queries against Tk keys that all
 *           precede them (no mask but keys past Tk), tensors with batch strides of their own
 *           so that the queries or keys may be a chunk of a rank's sequence, and dQ added to
 *           what the rank's own block wrote.  The backward of a block needs only the final
 *           (merged) output and log-sum-exp: P = exp(S - lse) is then the whole softmax's. */
#include "common.cuh"

#define FA_THREADS 128
#define FA_LOG2E 1.4426950408889634f
#define FA_LN2 0.6931471805599453f

namespace {

/* --------------------------------------------------------------- PTX wrappers */

__device__ __forceinline__ uint32_t smem_u32(const void *p) { return (uint32_t)__cvta_generic_to_shared(p); }

/* 16-byte async copy global -> shared; src_bytes 0 fills the 16 bytes with zeros */
__device__ __forceinline__ void cp_async16(void *smem, const void *gmem, bool valid) {
    const int n = valid ? 16 : 0;
    asm volatile("cp.async.cg.shared.global [%0], [%1], 16, %2;\n" ::"r"(smem_u32(smem)), "l"(gmem), "r"(n));
}
__device__ __forceinline__ void cp_async_commit() { asm volatile("cp.async.commit_group;\n" ::); }
template <int N> __device__ __forceinline__ void cp_async_wait() { asm volatile("cp.async.wait_group %0;\n" ::"n"(N)); }

__device__ __forceinline__ void ldsm_x4(uint32_t r[4], const void *p) {
    asm volatile("ldmatrix.sync.aligned.m8n8.x4.shared.b16 {%0,%1,%2,%3}, [%4];\n"
                 : "=r"(r[0]), "=r"(r[1]), "=r"(r[2]), "=r"(r[3])
                 : "r"(smem_u32(p)));
}
__device__ __forceinline__ void ldsm_x4_t(uint32_t r[4], const void *p) {
    asm volatile("ldmatrix.sync.aligned.m8n8.x4.trans.shared.b16 {%0,%1,%2,%3}, [%4];\n"
                 : "=r"(r[0]), "=r"(r[1]), "=r"(r[2]), "=r"(r[3])
                 : "r"(smem_u32(p)));
}

/* c[16x8] += a[16x16] * b[16x8], bf16 operands, fp32 accumulators */
__device__ __forceinline__ void mma16816(float c[4], const uint32_t a[4], uint32_t b0, uint32_t b1) {
    asm volatile("mma.sync.aligned.m16n8k16.row.col.f32.bf16.bf16.f32 {%0,%1,%2,%3}, {%4,%5,%6,%7}, {%8,%9}, "
                 "{%0,%1,%2,%3};\n"
                 : "+f"(c[0]), "+f"(c[1]), "+f"(c[2]), "+f"(c[3])
                 : "r"(a[0]), "r"(a[1]), "r"(a[2]), "r"(a[3]), "r"(b0), "r"(b1));
}

__device__ __forceinline__ uint32_t pack_bf16(float lo, float hi) {
    __nv_bfloat162 h = __floats2bfloat162_rn(lo, hi);
    return *reinterpret_cast<uint32_t *>(&h);
}

/* Fragment addresses (lane l) in a shared tile with row stride SD elements.
 * A operand, 16x16 block at (r0, c0) of a row-major [m][k] tile. */
template <int SD> __device__ __forceinline__ const bf16 *a_addr(const bf16 *s, int r0, int c0, int l) {
    return s + (r0 + (l & 7) + ((l >> 3) & 1) * 8) * SD + c0 + (l >> 4) * 8;
}
/* B operand of two n-tiles (n0..n0+15) x k16 at k0, from a tile stored [n][k] (ldmatrix) */
template <int SD> __device__ __forceinline__ const bf16 *bn_addr(const bf16 *s, int n0, int k0, int l) {
    return s + (n0 + (l & 7) + (l >> 4) * 8) * SD + k0 + ((l >> 3) & 1) * 8;
}
/* the same from a tile stored [k][n] (ldmatrix.trans) */
template <int SD> __device__ __forceinline__ const bf16 *bk_addr(const bf16 *s, int k0, int n0, int l) {
    return s + (k0 + (l & 7) + ((l >> 3) & 1) * 8) * SD + n0 + (l >> 4) * 8;
}

/* acc[16 x 8*NT] += A[16 x 16*KS] (from shared, rows r0..) * B, B stored [n][k] in shared */
template <int SD, int KS, int NT>
__device__ __forceinline__ void warp_mm_nk(float (&acc)[NT][4], const bf16 *sA, int r0, const bf16 *sB, int lane) {
#pragma unroll
    for (int ks = 0; ks < KS; ks++) {
        uint32_t a[4];
        ldsm_x4(a, a_addr<SD>(sA, r0, ks * 16, lane));
#pragma unroll
        for (int np = 0; np < NT / 2; np++) {
            uint32_t b[4];
            ldsm_x4(b, bn_addr<SD>(sB, np * 16, ks * 16, lane));
            mma16816(acc[2 * np], a, b[0], b[1]);
            mma16816(acc[2 * np + 1], a, b[2], b[3]);
        }
    }
}

/* acc[16 x 8*NT] += P[16 x 16*KS] (registers, accumulator layout of KS*2 n-tiles) * B,
 * B stored [k][n] in shared (rows k = 0..16*KS-1) */
template <int SD, int KS, int NT>
__device__ __forceinline__ void warp_mm_pk(float (&acc)[NT][4], const float (&p)[2 * KS][4], const bf16 *sB, int lane) {
#pragma unroll
    for (int ks = 0; ks < KS; ks++) {
        uint32_t a[4];
        a[0] = pack_bf16(p[2 * ks][0], p[2 * ks][1]);
        a[1] = pack_bf16(p[2 * ks][2], p[2 * ks][3]);
        a[2] = pack_bf16(p[2 * ks + 1][0], p[2 * ks + 1][1]);
        a[3] = pack_bf16(p[2 * ks + 1][2], p[2 * ks + 1][3]);
#pragma unroll
        for (int np = 0; np < NT / 2; np++) {
            uint32_t b[4];
            ldsm_x4_t(b, bk_addr<SD>(sB, ks * 16, np * 16, lane));
            mma16816(acc[2 * np], a, b[0], b[1]);
            mma16816(acc[2 * np + 1], a, b[2], b[3]);
        }
    }
}

/* ROWS x D tile of rows r0.. (row stride ld elements) into shared (row stride D + 8);
 * rows at or past T are zero-filled */
template <int ROWS, int D>
__device__ __forceinline__ void load_tile(bf16 *s, const bf16 *g, size_t ld, int r0, int T) {
    constexpr int CPR = D / 8;
#pragma unroll
    for (int c = threadIdx.x; c < ROWS * CPR; c += FA_THREADS) {
        const int r = c / CPR, k = c % CPR, t = r0 + r;
        const bool ok = t < T;
        cp_async16(s + r * (D + 8) + k * 8, g + (size_t)(ok ? t : 0) * ld + k * 8, ok);
    }
}

/* The shape of one attention launch: the causal square of one sequence (the training step on
 * one rank) or a block of ring attention (context parallelism, validator/cp.c): Tq queries
 * against Tk keys, every query seeing every key (causal 0), each tensor with its own row and
 * batch strides so that the queries or keys may be a slice of the rank's sequence. */
struct fa_args {
    int Tq, Tk, H, KV, group;
    int causal;                  /* 1: Tq == Tk, query t sees keys 0..t */
    int acc_dq;                  /* backward: dq += instead of = */
    long long ldq, ldkv;         /* row strides (elements) of q/dq and k/v/dk/dv */
    long long q_bs, kv_bs, o_bs; /* batch strides; o: out and dout, row stride H*D */
    long long lse_bs;            /* between (b, h) rows of lse; the Di workspace uses Tq */
    float scale, sl2;            /* scale and scale * log2(e) */
    int splits;                  /* backward: blocks a kv head's query heads are split over (dkdv_splits) */
    float *part;                 /* ... and their fp32 partial dK, dV when splits > 1 (workspace) */
};

/* ================================================================ forward */

/* CAUSAL is the launch's a.causal as a constant: the training step's causal square then compiles without the
 * ring blocks' tail masks (a runtime flag there cost the forward 9% on an H100, 2026-11-26) */
template <int D, bool CAUSAL>
__global__ void __launch_bounds__(FA_THREADS)
flash_fwd_kernel(bf16 *__restrict__ out, float *__restrict__ lse, const bf16 *__restrict__ q,
                 const bf16 *__restrict__ k, const bf16 *__restrict__ v, const fa_args a) {
    constexpr int BM = 64, BN = 64, SD = D + 8, NTD = D / 8;
    extern __shared__ __align__(16) unsigned char fa_smem[];
    bf16 *sQ = reinterpret_cast<bf16 *>(fa_smem);
    bf16 *sK = sQ + BM * SD;     /* 2 buffers */
    bf16 *sV = sK + 2 * BN * SD; /* 2 buffers */

    const int qb = gridDim.x - 1 - blockIdx.x; /* the longest rows first */
    const int bh = blockIdx.y, b = bh / a.H, h = bh % a.H, kvh = h / a.group;
    const int warp = threadIdx.x / 32, lane = threadIdx.x % 32, g = lane >> 2, t4 = lane & 3;
    const bf16 *qg = q + (size_t)b * a.q_bs + (size_t)h * D;
    const bf16 *kg = k + (size_t)b * a.kv_bs + (size_t)kvh * D;
    const bf16 *vg = v + (size_t)b * a.kv_bs + (size_t)kvh * D;

    load_tile<BM, D>(sQ, qg, a.ldq, qb * BM, a.Tq);
    load_tile<BN, D>(sK, kg, a.ldkv, 0, a.Tk);
    load_tile<BN, D>(sV, vg, a.ldkv, 0, a.Tk);
    cp_async_commit();

    const int row0 = qb * BM + warp * 16 + g, row1 = row0 + 8;
    float o[NTD][4];
#pragma unroll
    for (int i = 0; i < NTD; i++) o[i][0] = o[i][1] = o[i][2] = o[i][3] = 0.0f;
    float m0 = -INFINITY, m1 = -INFINITY, l0 = 0.0f, l1 = 0.0f;
    uint32_t qf[D / 16][4];

    const int nkb = CAUSAL ? qb + 1 : (a.Tk + BN - 1) / BN;
    for (int kb = 0; kb < nkb; kb++) {
        const int buf = kb & 1;
        if (kb + 1 < nkb) {
            load_tile<BN, D>(sK + (buf ^ 1) * BN * SD, kg, a.ldkv, (kb + 1) * BN, a.Tk);
            load_tile<BN, D>(sV + (buf ^ 1) * BN * SD, vg, a.ldkv, (kb + 1) * BN, a.Tk);
        }
        cp_async_commit();
        cp_async_wait<1>();
        __syncthreads();
        if (kb == 0) {
#pragma unroll
            for (int ks = 0; ks < D / 16; ks++) ldsm_x4(qf[ks], a_addr<SD>(sQ, warp * 16, ks * 16, lane));
        }
        const bf16 *cK = sK + buf * BN * SD, *cV = sV + buf * BN * SD;

        float s[BN / 8][4];
#pragma unroll
        for (int i = 0; i < BN / 8; i++) s[i][0] = s[i][1] = s[i][2] = s[i][3] = 0.0f;
#pragma unroll
        for (int ks = 0; ks < D / 16; ks++) {
#pragma unroll
            for (int np = 0; np < BN / 16; np++) {
                uint32_t bb[4];
                ldsm_x4(bb, bn_addr<SD>(cK, np * 16, ks * 16, lane));
                mma16816(s[2 * np], qf[ks], bb[0], bb[1]);
                mma16816(s[2 * np + 1], qf[ks], bb[2], bb[3]);
            }
        }
        /* scale to the log2 domain; causal mask on the diagonal block, keys past Tk masked in
         * the last block of a non-causal launch (their tiles are zero-filled, not -inf) */
        const bool diag = CAUSAL && kb == qb, tail = !CAUSAL && (kb + 1) * BN > a.Tk;
        float mx0 = -INFINITY, mx1 = -INFINITY;
#pragma unroll
        for (int nt = 0; nt < BN / 8; nt++) {
#pragma unroll
            for (int e = 0; e < 4; e++) {
                const int col = kb * BN + nt * 8 + 2 * t4 + (e & 1), row = e < 2 ? row0 : row1;
                float x = s[nt][e] * a.sl2;
                if ((diag && col > row) || (tail && col >= a.Tk)) x = -INFINITY;
                s[nt][e] = x;
            }
            mx0 = fmaxf(mx0, fmaxf(s[nt][0], s[nt][1]));
            mx1 = fmaxf(mx1, fmaxf(s[nt][2], s[nt][3]));
        }
        mx0 = fmaxf(mx0, __shfl_xor_sync(0xffffffffu, mx0, 1));
        mx0 = fmaxf(mx0, __shfl_xor_sync(0xffffffffu, mx0, 2));
        mx1 = fmaxf(mx1, __shfl_xor_sync(0xffffffffu, mx1, 1));
        mx1 = fmaxf(mx1, __shfl_xor_sync(0xffffffffu, mx1, 2));
        const float n0 = fmaxf(m0, mx0), n1 = fmaxf(m1, mx1);
        const float b0 = n0 == -INFINITY ? 0.0f : n0, b1 = n1 == -INFINITY ? 0.0f : n1;
        const float al0 = exp2f(m0 - b0), al1 = exp2f(m1 - b1);
        m0 = n0;
        m1 = n1;
        float r0 = 0.0f, r1 = 0.0f;
#pragma unroll
        for (int nt = 0; nt < BN / 8; nt++) {
            s[nt][0] = exp2f(s[nt][0] - b0);
            s[nt][1] = exp2f(s[nt][1] - b0);
            s[nt][2] = exp2f(s[nt][2] - b1);
            s[nt][3] = exp2f(s[nt][3] - b1);
            r0 += s[nt][0] + s[nt][1];
            r1 += s[nt][2] + s[nt][3];
        }
        l0 = l0 * al0 + r0;
        l1 = l1 * al1 + r1;
#pragma unroll
        for (int i = 0; i < NTD; i++) {
            o[i][0] *= al0;
            o[i][1] *= al0;
            o[i][2] *= al1;
            o[i][3] *= al1;
        }
        warp_mm_pk<SD, BN / 16, NTD>(o, s, cV, lane);
        __syncthreads(); /* this buffer is refilled by the next iteration's prefetch */
    }
    l0 += __shfl_xor_sync(0xffffffffu, l0, 1);
    l0 += __shfl_xor_sync(0xffffffffu, l0, 2);
    l1 += __shfl_xor_sync(0xffffffffu, l1, 1);
    l1 += __shfl_xor_sync(0xffffffffu, l1, 2);
    const float i0 = 1.0f / l0, i1 = 1.0f / l1;
    const size_t ldo = (size_t)a.H * D;
    bf16 *og = out + (size_t)b * a.o_bs + (size_t)h * D;
#pragma unroll
    for (int nt = 0; nt < NTD; nt++) {
        const int c = nt * 8 + 2 * t4;
        if (row0 < a.Tq) *reinterpret_cast<uint32_t *>(og + row0 * ldo + c) = pack_bf16(o[nt][0] * i0, o[nt][1] * i0);
        if (row1 < a.Tq) *reinterpret_cast<uint32_t *>(og + row1 * ldo + c) = pack_bf16(o[nt][2] * i1, o[nt][3] * i1);
    }
    if (t4 == 0) {
        float *lg = lse + (size_t)bh * a.lse_bs;
        if (row0 < a.Tq) lg[row0] = (m0 + log2f(l0)) * FA_LN2;
        if (row1 < a.Tq) lg[row1] = (m1 + log2f(l1)) * FA_LN2;
    }
}

/* ================================================================ backward */

/* Di[bh, t] = sum_d dO[b,t,h,d] * O[b,t,h,d] (Di rows Tq apart); one warp per (b, t, h) */
template <int D>
__global__ void __launch_bounds__(256)
flash_bwd_dot_kernel(float *__restrict__ Di, const bf16 *__restrict__ dout, const bf16 *__restrict__ out, int B,
                     int Tq, int H, long long o_bs) {
    const int lane = threadIdx.x % 32;
    const long long row = (long long)blockIdx.x * 8 + threadIdx.x / 32; /* (b*Tq + t)*H + h */
    if (row >= (long long)B * Tq * H) return;
    const int h = (int)(row % H);
    const long long bt = row / H, b = bt / Tq, t = bt % Tq;
    const size_t at = (size_t)b * o_bs + ((size_t)t * H + h) * D;
    const bf16 *x = dout + at, *c = out + at;
    float acc = 0.0f;
#pragma unroll
    for (int i = lane * 2; i < D; i += 64) {
        const float2 u = __bfloat1622float2(*reinterpret_cast<const __nv_bfloat162 *>(x + i));
        const float2 w = __bfloat1622float2(*reinterpret_cast<const __nv_bfloat162 *>(c + i));
        acc += u.x * w.x + u.y * w.y;
    }
    acc = warp_sum(acc);
    if (lane == 0) Di[(b * H + h) * Tq + t] = acc;
}

/* dK, dV for 64 keys of one kv head, summed over the query heads of its group */
template <int D, int BQ, bool CAUSAL>
__global__ void __launch_bounds__(FA_THREADS)
flash_bwd_dkdv_kernel(bf16 *__restrict__ dk, bf16 *__restrict__ dv, const bf16 *__restrict__ dout,
                      const float *__restrict__ lse, const float *__restrict__ Di, const bf16 *__restrict__ q,
                      const bf16 *__restrict__ k, const bf16 *__restrict__ v, const fa_args a) {
    constexpr int BK = 64, SD = D + 8, NTD = D / 8, NTQ = BQ / 8;
    extern __shared__ __align__(16) unsigned char fa_smem[];
    bf16 *sK = reinterpret_cast<bf16 *>(fa_smem);
    bf16 *sV = sK + BK * SD;
    bf16 *sQ = sV + BK * SD;       /* 2 buffers */
    bf16 *sO = sQ + 2 * BQ * SD;   /* dO, 2 buffers */
    float *sL = reinterpret_cast<float *>(sO + 2 * BQ * SD); /* lse * log2(e), 2 buffers */
    float *sD = sL + 2 * BQ;                                  /* Di, 2 buffers */

    const int kb = blockIdx.x; /* the most work first */
    /* blockIdx.y: (b, kv head, split); a split takes `heads` of the group's query heads, from h_first */
    const int split = blockIdx.y % a.splits, bkv = blockIdx.y / a.splits, b = bkv / a.KV, kvh = bkv % a.KV;
    const int heads = a.group / a.splits, h_first = kvh * a.group + split * heads, H = a.H;
    const int warp = threadIdx.x / 32, lane = threadIdx.x % 32, g = lane >> 2, t4 = lane & 3;
    const size_t ldo = (size_t)H * D;
    const bf16 *kg = k + (size_t)b * a.kv_bs + (size_t)kvh * D;
    const bf16 *vg = v + (size_t)b * a.kv_bs + (size_t)kvh * D;

    const int nqb = (a.Tq + BQ - 1) / BQ, q0 = CAUSAL ? kb * BK / BQ : 0, nq = nqb - q0, niter = heads * nq;
    auto prefetch = [&](int it, int buf) {
        const int h = h_first + it / nq, qb = q0 + it % nq;
        load_tile<BQ, D>(sQ + buf * BQ * SD, q + (size_t)b * a.q_bs + (size_t)h * D, a.ldq, qb * BQ, a.Tq);
        load_tile<BQ, D>(sO + buf * BQ * SD, dout + (size_t)b * a.o_bs + (size_t)h * D, ldo, qb * BQ, a.Tq);
        for (int i = threadIdx.x; i < BQ; i += FA_THREADS) {
            const int t = qb * BQ + i;
            const size_t bh = (size_t)b * H + h;
            sL[buf * BQ + i] = t < a.Tq ? lse[bh * a.lse_bs + t] * FA_LOG2E : INFINITY; /* rows past Tq: P = 0 */
            sD[buf * BQ + i] = t < a.Tq ? Di[bh * a.Tq + t] : 0.0f;
        }
    };
    load_tile<BK, D>(sK, kg, a.ldkv, kb * BK, a.Tk);
    load_tile<BK, D>(sV, vg, a.ldkv, kb * BK, a.Tk);
    prefetch(0, 0);
    cp_async_commit();

    float dK[NTD][4], dV[NTD][4];
#pragma unroll
    for (int i = 0; i < NTD; i++)
#pragma unroll
        for (int e = 0; e < 4; e++) dK[i][e] = dV[i][e] = 0.0f;
    const int key0 = kb * BK + warp * 16 + g, key1 = key0 + 8;

    for (int it = 0; it < niter; it++) {
        const int buf = it & 1, qb = q0 + it % nq;
        if (it + 1 < niter) prefetch(it + 1, buf ^ 1);
        cp_async_commit();
        cp_async_wait<1>();
        __syncthreads();
        const bf16 *cQ = sQ + buf * BQ * SD, *cO = sO + buf * BQ * SD;
        const float *cL = sL + buf * BQ, *cD = sD + buf * BQ;

        /* P^T = exp2(sl2 * K Q^T - lse2), zero where query < key (causal) */
        float p[NTQ][4];
#pragma unroll
        for (int i = 0; i < NTQ; i++) p[i][0] = p[i][1] = p[i][2] = p[i][3] = 0.0f;
        warp_mm_nk<SD, D / 16, NTQ>(p, sK, warp * 16, cQ, lane);
        const bool diag = CAUSAL && qb * BQ < kb * BK + BK; /* some query of this block precedes some key */
#pragma unroll
        for (int nt = 0; nt < NTQ; nt++)
#pragma unroll
            for (int e = 0; e < 4; e++) {
                const int ci = nt * 8 + 2 * t4 + (e & 1), qi = qb * BQ + ci, key = e < 2 ? key0 : key1;
                float x = exp2f(p[nt][e] * a.sl2 - cL[ci]);
                if (diag && qi < key) x = 0.0f;
                p[nt][e] = x;
            }
        /* dV += P^T dO */
        warp_mm_pk<SD, BQ / 16, NTD>(dV, p, cO, lane);
        /* dP^T = V dO^T; dS^T = P^T (dP^T - Di) */
        float dp[NTQ][4];
#pragma unroll
        for (int i = 0; i < NTQ; i++) dp[i][0] = dp[i][1] = dp[i][2] = dp[i][3] = 0.0f;
        warp_mm_nk<SD, D / 16, NTQ>(dp, sV, warp * 16, cO, lane);
#pragma unroll
        for (int nt = 0; nt < NTQ; nt++)
#pragma unroll
            for (int e = 0; e < 4; e++) dp[nt][e] = p[nt][e] * (dp[nt][e] - cD[nt * 8 + 2 * t4 + (e & 1)]);
        /* dK += dS^T Q (scale applied at the end) */
        warp_mm_pk<SD, BQ / 16, NTD>(dK, dp, cQ, lane);
        __syncthreads();
    }
    if (a.splits > 1) {
        /* this split's sums, unscaled, in fp32: [split][b][key][kv head][D] for dK, then the same for dV;
         * flash_bwd_dkdv_sum adds the splits in order */
        const size_t plane = (size_t)gridDim.y / a.splits * a.Tk * D, base = (size_t)split * plane;
        float *pk = a.part + base, *pv = a.part + (size_t)a.splits * plane + base;
#pragma unroll
        for (int nt = 0; nt < NTD; nt++) {
            const int c = nt * 8 + 2 * t4;
            const size_t r0 = ((size_t)b * a.Tk + key0) * a.KV + kvh, r1 = ((size_t)b * a.Tk + key1) * a.KV + kvh;
            if (key0 < a.Tk) {
                *reinterpret_cast<float2 *>(pk + r0 * D + c) = make_float2(dK[nt][0], dK[nt][1]);
                *reinterpret_cast<float2 *>(pv + r0 * D + c) = make_float2(dV[nt][0], dV[nt][1]);
            }
            if (key1 < a.Tk) {
                *reinterpret_cast<float2 *>(pk + r1 * D + c) = make_float2(dK[nt][2], dK[nt][3]);
                *reinterpret_cast<float2 *>(pv + r1 * D + c) = make_float2(dV[nt][2], dV[nt][3]);
            }
        }
        return;
    }
    bf16 *dkg = dk + (size_t)b * a.kv_bs + (size_t)kvh * D;
    bf16 *dvg = dv + (size_t)b * a.kv_bs + (size_t)kvh * D;
    const float scale = a.scale;
#pragma unroll
    for (int nt = 0; nt < NTD; nt++) {
        const int c = nt * 8 + 2 * t4;
        if (key0 < a.Tk) {
            *reinterpret_cast<uint32_t *>(dkg + key0 * a.ldkv + c) = pack_bf16(dK[nt][0] * scale, dK[nt][1] * scale);
            *reinterpret_cast<uint32_t *>(dvg + key0 * a.ldkv + c) = pack_bf16(dV[nt][0], dV[nt][1]);
        }
        if (key1 < a.Tk) {
            *reinterpret_cast<uint32_t *>(dkg + key1 * a.ldkv + c) = pack_bf16(dK[nt][2] * scale, dK[nt][3] * scale);
            *reinterpret_cast<uint32_t *>(dvg + key1 * a.ldkv + c) = pack_bf16(dV[nt][2], dV[nt][3]);
        }
    }
}

/* dK, dV where the query heads were split over blocks: the splits' fp32 partials added in order (the
 * same sum every run), dK scaled, both stored in bf16; two elements a thread */
__global__ void flash_bwd_dkdv_sum(bf16 *__restrict__ dk, bf16 *__restrict__ dv, int B, int D, const fa_args a) {
    const float *__restrict__ part = a.part;
    const size_t plane = (size_t)B * a.Tk * a.KV * D;
    const size_t i = ((size_t)blockIdx.x * blockDim.x + threadIdx.x) * 2;
    if (i >= plane) return;
    float k0 = 0.0f, k1 = 0.0f, v0 = 0.0f, v1 = 0.0f;
    for (int sp = 0; sp < a.splits; sp++) {
        const float2 pk = *reinterpret_cast<const float2 *>(part + (size_t)sp * plane + i);
        const float2 pv = *reinterpret_cast<const float2 *>(part + (size_t)(a.splits + sp) * plane + i);
        k0 += pk.x; k1 += pk.y; v0 += pv.x; v1 += pv.y;
    }
    const size_t c = i % D, row = i / D, kvh = row % a.KV, bt = row / a.KV, t = bt % a.Tk, b = bt / a.Tk;
    const size_t at = b * a.kv_bs + t * a.ldkv + kvh * D + c;
    *reinterpret_cast<uint32_t *>(dk + at) = pack_bf16(k0 * a.scale, k1 * a.scale);
    *reinterpret_cast<uint32_t *>(dv + at) = pack_bf16(v0, v1);
}

/* dq = x, or dq += x with acc (the ring's second block): two bf16 at p */
__device__ __forceinline__ void store_dq(bf16 *p, float x0, float x1, int acc) {
    if (acc) {
        const float2 old = __bfloat1622float2(*reinterpret_cast<const __nv_bfloat162 *>(p));
        x0 += old.x;
        x1 += old.y;
    }
    *reinterpret_cast<uint32_t *>(p) = pack_bf16(x0, x1);
}

/* dQ for 64 queries of one head: loop over the key blocks 0..qb (causal) or all of them */
template <int D, bool CAUSAL>
__global__ void __launch_bounds__(FA_THREADS)
flash_bwd_dq_kernel(bf16 *__restrict__ dq, const bf16 *__restrict__ dout, const float *__restrict__ lse,
                    const float *__restrict__ Di, const bf16 *__restrict__ q, const bf16 *__restrict__ k,
                    const bf16 *__restrict__ v, const fa_args a) {
    constexpr int BM = 64, BN = 64, SD = D + 8, NTD = D / 8;
    extern __shared__ __align__(16) unsigned char fa_smem[];
    bf16 *sQ = reinterpret_cast<bf16 *>(fa_smem);
    bf16 *sO = sQ + BM * SD;
    bf16 *sK = sO + BM * SD;     /* 2 buffers */
    bf16 *sV = sK + 2 * BN * SD; /* 2 buffers */

    const int qb = gridDim.x - 1 - blockIdx.x;
    const int bh = blockIdx.y, b = bh / a.H, h = bh % a.H, kvh = h / a.group;
    const int warp = threadIdx.x / 32, lane = threadIdx.x % 32, g = lane >> 2, t4 = lane & 3;
    const size_t ldo = (size_t)a.H * D;
    const bf16 *kg = k + (size_t)b * a.kv_bs + (size_t)kvh * D;
    const bf16 *vg = v + (size_t)b * a.kv_bs + (size_t)kvh * D;

    load_tile<BM, D>(sQ, q + (size_t)b * a.q_bs + (size_t)h * D, a.ldq, qb * BM, a.Tq);
    load_tile<BM, D>(sO, dout + (size_t)b * a.o_bs + (size_t)h * D, ldo, qb * BM, a.Tq);
    load_tile<BN, D>(sK, kg, a.ldkv, 0, a.Tk);
    load_tile<BN, D>(sV, vg, a.ldkv, 0, a.Tk);
    cp_async_commit();

    const int row0 = qb * BM + warp * 16 + g, row1 = row0 + 8;
    const size_t r = (size_t)bh * a.lse_bs, rd = (size_t)bh * a.Tq;
    const float L0 = row0 < a.Tq ? lse[r + row0] * FA_LOG2E : INFINITY;
    const float L1 = row1 < a.Tq ? lse[r + row1] * FA_LOG2E : INFINITY;
    const float D0 = row0 < a.Tq ? Di[rd + row0] : 0.0f, D1 = row1 < a.Tq ? Di[rd + row1] : 0.0f;
    float dQ[NTD][4];
#pragma unroll
    for (int i = 0; i < NTD; i++) dQ[i][0] = dQ[i][1] = dQ[i][2] = dQ[i][3] = 0.0f;

    const int nkb = CAUSAL ? qb + 1 : (a.Tk + BN - 1) / BN;
    for (int kb = 0; kb < nkb; kb++) {
        const int buf = kb & 1;
        if (kb + 1 < nkb) {
            load_tile<BN, D>(sK + (buf ^ 1) * BN * SD, kg, a.ldkv, (kb + 1) * BN, a.Tk);
            load_tile<BN, D>(sV + (buf ^ 1) * BN * SD, vg, a.ldkv, (kb + 1) * BN, a.Tk);
        }
        cp_async_commit();
        cp_async_wait<1>();
        __syncthreads();
        const bf16 *cK = sK + buf * BN * SD, *cV = sV + buf * BN * SD;
        float p[BN / 8][4], dp[BN / 8][4];
#pragma unroll
        for (int i = 0; i < BN / 8; i++)
#pragma unroll
            for (int e = 0; e < 4; e++) p[i][e] = dp[i][e] = 0.0f;
        warp_mm_nk<SD, D / 16, BN / 8>(p, sQ, warp * 16, cK, lane);
        warp_mm_nk<SD, D / 16, BN / 8>(dp, sO, warp * 16, cV, lane);
        const bool diag = CAUSAL && kb == qb, tail = !CAUSAL && (kb + 1) * BN > a.Tk;
#pragma unroll
        for (int nt = 0; nt < BN / 8; nt++)
#pragma unroll
            for (int e = 0; e < 4; e++) {
                const int col = kb * BN + nt * 8 + 2 * t4 + (e & 1), row = e < 2 ? row0 : row1;
                float x = exp2f(p[nt][e] * a.sl2 - (e < 2 ? L0 : L1));
                if ((diag && col > row) || (tail && col >= a.Tk)) x = 0.0f;
                dp[nt][e] = x * (dp[nt][e] - (e < 2 ? D0 : D1));
            }
        warp_mm_pk<SD, BN / 16, NTD>(dQ, dp, cK, lane);
        __syncthreads();
    }
    bf16 *dqg = dq + (size_t)b * a.q_bs + (size_t)h * D;
    const float scale = a.scale;
#pragma unroll
    for (int nt = 0; nt < NTD; nt++) {
        const int c = nt * 8 + 2 * t4;
        if (row0 < a.Tq) store_dq(dqg + row0 * a.ldq + c, dQ[nt][0] * scale, dQ[nt][1] * scale, a.acc_dq);
        if (row1 < a.Tq) store_dq(dqg + row1 * a.ldq + c, dQ[nt][2] * scale, dQ[nt][3] * scale, a.acc_dq);
    }
}

/* ================================================================ host side */

template <int D> constexpr int bwd_bq() { return 64; }

template <int D> size_t fwd_smem() { return (size_t)(64 + 4 * 64) * (D + 8) * 2; }
template <int D> size_t dq_smem() { return (size_t)(2 * 64 + 4 * 64) * (D + 8) * 2; }
template <int D> size_t dkdv_smem() {
    constexpr int BQ = bwd_bq<D>();
    return (size_t)(2 * 64 + 4 * BQ) * (D + 8) * 2 + 4 * BQ * sizeof(float);
}

/* ptrs: the bf16 tensors (16-byte aligned); f32: the fp32 ones (4-byte aligned) */
bool args_ok(const void *const *ptrs, int n, const void *const *f32, int nf, const sx_attention_block *s) {
    for (int i = 0; i < n; i++)
        if (!ptrs[i] || !sx_aligned16(ptrs[i])) return false;
    for (int i = 0; i < nf; i++)
        if (!f32[i] || ((uintptr_t)f32[i] & 3u)) return false;
    const int B = s->B, H = s->H, KV = s->KV, D = s->D;
    if (B < 0 || s->Tq < 0 || s->Tk < 0 || H < 0 || (KV <= 0 && H > 0)) return false;
    if (s->causal && s->Tq != s->Tk) return false;
    if (H > 0 && (KV > H || H % KV != 0)) return false;
    if (D != 64 && D != 128) return false;
    const long long ldq = s->q_row_stride, ldkv = s->kv_row_stride;
    if (ldq < (long long)H * D || ldkv < (long long)KV * D || ldq % 8 || ldkv % 8) return false;
    /* batch strides keep every sequence's rows 16-byte aligned and apart */
    if (s->q_batch_stride % 8 || s->kv_batch_stride % 8 || s->o_batch_stride % 8) return false;
    if (B > 1 && (s->q_batch_stride < (long long)s->Tq * ldq || s->kv_batch_stride < (long long)s->Tk * ldkv ||
                  s->o_batch_stride < (long long)s->Tq * H * D))
        return false;
    if (s->lse_stride < s->Tq) return false;
    if ((long long)B * H > 65535 || (long long)B * KV > 65535) return false; /* grid.y */
    return true;
}

fa_args make_args(const sx_attention_block *s, int acc_dq) {
    fa_args a;
    a.Tq = s->Tq; a.Tk = s->Tk; a.H = s->H; a.KV = s->KV; a.group = s->H / s->KV;
    a.causal = s->causal ? 1 : 0; a.acc_dq = acc_dq ? 1 : 0;
    a.ldq = s->q_row_stride; a.ldkv = s->kv_row_stride;
    a.q_bs = s->q_batch_stride; a.kv_bs = s->kv_batch_stride; a.o_bs = s->o_batch_stride;
    a.lse_bs = s->lse_stride;
    a.scale = s->scale; a.sl2 = s->scale * FA_LOG2E;
    a.splits = 1; a.part = NULL;
    return a;
}

template <int D>
cudaError_t fwd_launch(sx_bf16 *out, float *lse, const sx_bf16 *q, const sx_bf16 *k, const sx_bf16 *v, int B,
                       const fa_args &a, cudaStream_t stream) {
    const size_t sm = fwd_smem<D>();
    const dim3 grid((a.Tq + 63) / 64, B * a.H);
    if (a.causal) {
        SX_CHECK(cudaFuncSetAttribute(flash_fwd_kernel<D, true>, cudaFuncAttributeMaxDynamicSharedMemorySize, (int)sm));
        flash_fwd_kernel<D, true><<<grid, FA_THREADS, sm, stream>>>((bf16 *)out, lse, (const bf16 *)q, (const bf16 *)k,
                                                                   (const bf16 *)v, a);
    } else {
        SX_CHECK(cudaFuncSetAttribute(flash_fwd_kernel<D, false>, cudaFuncAttributeMaxDynamicSharedMemorySize, (int)sm));
        flash_fwd_kernel<D, false><<<grid, FA_THREADS, sm, stream>>>((bf16 *)out, lse, (const bf16 *)q, (const bf16 *)k,
                                                                    (const bf16 *)v, a);
    }
    SX_LAUNCHED();
}

/* dK, dV, then dQ, with the causal flag a constant (flash_fwd_kernel says why) */
template <int D, int BQ, bool CAUSAL>
cudaError_t bwd_kernels(sx_bf16 *dq, sx_bf16 *dk, sx_bf16 *dv, const sx_bf16 *dout, const float *lse, const sx_bf16 *q,
                        const sx_bf16 *k, const sx_bf16 *v, int B, const fa_args &a, float *Di, cudaStream_t stream) {
    const size_t sm1 = dkdv_smem<D>(), sm2 = dq_smem<D>();
    SX_CHECK(cudaFuncSetAttribute(flash_bwd_dkdv_kernel<D, BQ, CAUSAL>, cudaFuncAttributeMaxDynamicSharedMemorySize,
                                  (int)sm1));
    SX_CHECK(cudaFuncSetAttribute(flash_bwd_dq_kernel<D, CAUSAL>, cudaFuncAttributeMaxDynamicSharedMemorySize, (int)sm2));
    flash_bwd_dkdv_kernel<D, BQ, CAUSAL><<<dim3((a.Tk + 63) / 64, B * a.KV * a.splits), FA_THREADS, sm1, stream>>>(
        (bf16 *)dk, (bf16 *)dv, (const bf16 *)dout, lse, Di, (const bf16 *)q, (const bf16 *)k, (const bf16 *)v, a);
    SX_CHECK(cudaGetLastError());
    if (a.splits > 1) {
        const size_t pairs = (size_t)B * a.Tk * a.KV * D / 2;
        flash_bwd_dkdv_sum<<<(unsigned)((pairs + 255) / 256), 256, 0, stream>>>((bf16 *)dk, (bf16 *)dv, B, D, a);
        SX_CHECK(cudaGetLastError());
    }
    flash_bwd_dq_kernel<D, CAUSAL><<<dim3((a.Tq + 63) / 64, B * a.H), FA_THREADS, sm2, stream>>>(
        (bf16 *)dq, (const bf16 *)dout, lse, Di, (const bf16 *)q, (const bf16 *)k, (const bf16 *)v, a);
    SX_LAUNCHED();
}

template <int D>
cudaError_t bwd_launch(sx_bf16 *dq, sx_bf16 *dk, sx_bf16 *dv, const sx_bf16 *dout, const sx_bf16 *out,
                       const float *lse, const sx_bf16 *q, const sx_bf16 *k, const sx_bf16 *v, int B, const fa_args &a,
                       float *Di, cudaStream_t stream) {
    constexpr int BQ = bwd_bq<D>();
    const long long rows = (long long)B * a.Tq * a.H;
    flash_bwd_dot_kernel<D><<<(unsigned)((rows + 7) / 8), 256, 0, stream>>>(Di, (const bf16 *)dout,
                                                                           (const bf16 *)out, B, a.Tq, a.H, a.o_bs);
    SX_CHECK(cudaGetLastError());
    if (a.causal) return bwd_kernels<D, BQ, true>(dq, dk, dv, dout, lse, q, k, v, B, a, Di, stream);
    return bwd_kernels<D, BQ, false>(dq, dk, dv, dout, lse, q, k, v, B, a, Di, stream);
}

/* The dK, dV kernel runs a block per 64 keys of each (sequence, kv head), looping over the query heads of the
 * kv head's group.  Few kv heads (GQA at 8 query heads a kv head, or a TP rank's one kv head) leave that grid
 * under the SMs while each block loops over many heads: the Qwen2.5-3B shape at TP 2 ran 64 blocks on 132 SMs
 * and took 2.5 times the planner's price (docs/validation/2026-11-26-h200x2-heldout-qwen).  So a group is split
 * over `splits` blocks until the grid holds DKDV_BLOCKS (two waves of an H100's 132 SMs, a constant so that the
 * sum is the same on every GPU), each split's sums kept in fp32 and added in order after: the smallest divisor
 * of the group that reaches it, else the whole group.  The planner counts the workspace this takes with the same rule
 * and constant (attention_dkdv_splits, ATTENTION_DKDV_BLOCKS in planner/; test_formulas reads the line below). */
constexpr int DKDV_BLOCKS = 264;
int dkdv_splits(int B, int Tk, int KV, int group) {
    const long long blocks = (long long)((Tk + 63) / 64) * B * KV;
    if (blocks <= 0 || blocks >= DKDV_BLOCKS) return 1;
    for (int d = 2; d < group; d++)
        if (group % d == 0 && blocks * d >= DKDV_BLOCKS) return d;
    return group > 1 ? group : 1;
}

/* the rowsum Di part of the workspace, rounded so that the partials after it stay aligned */
size_t di_bytes(int B, int Tq, int H) {
    return ((size_t)B * H * Tq * sizeof(float) + 255) / 256 * 256;
}

/* one sequence's causal square, as sx_flash_attention_forward/backward take it */
sx_attention_block causal_block(int B, int T, int H, int KV, int D, int q_row_stride, int kv_row_stride, float scale) {
    sx_attention_block s;
    s.B = B; s.Tq = s.Tk = T; s.H = H; s.KV = KV; s.D = D; s.causal = 1;
    s.q_row_stride = q_row_stride; s.kv_row_stride = kv_row_stride;
    s.q_batch_stride = (long long)T * q_row_stride; s.kv_batch_stride = (long long)T * kv_row_stride;
    s.o_batch_stride = (long long)T * H * D; s.lse_stride = T;
    s.scale = scale;
    return s;
}

} /* namespace */

extern "C" {

size_t sx_flash_attention_backward_workspace_bytes(int B, int Tq, int Tk, int H, int KV, int D) {
    if (B < 0 || Tq < 0 || Tk < 0 || H < 0 || KV <= 0 || D < 0 || H % KV) return 0;
    const int splits = dkdv_splits(B, Tk, KV, H / KV);
    return di_bytes(B, Tq, H) + (splits > 1 ? 2 * (size_t)splits * B * Tk * KV * D * sizeof(float) : 0);
}

cudaError_t sx_flash_attention_block_forward(sx_bf16 *out, float *lse, const sx_bf16 *q, const sx_bf16 *k,
                                             const sx_bf16 *v, const sx_attention_block *s, cudaStream_t stream) {
    const void *ptrs[] = {out, q, k, v}, *f32[] = {lse};
    SX_REQUIRE(s && args_ok(ptrs, 4, f32, 1, s));
    if (s->B == 0 || s->Tq == 0 || s->H == 0) return cudaSuccess;
    SX_REQUIRE(s->Tk > 0); /* a query with no key has no softmax */
    const fa_args a = make_args(s, 0);
    if (s->D == 64) return fwd_launch<64>(out, lse, q, k, v, s->B, a, stream);
    return fwd_launch<128>(out, lse, q, k, v, s->B, a, stream);
}

cudaError_t sx_flash_attention_block_backward(sx_bf16 *dq, sx_bf16 *dk, sx_bf16 *dv, const sx_bf16 *dout,
                                              const sx_bf16 *out, const float *lse, const sx_bf16 *q,
                                              const sx_bf16 *k, const sx_bf16 *v, const sx_attention_block *s,
                                              int accumulate_dq, void *workspace, size_t workspace_bytes,
                                              cudaStream_t stream) {
    const void *ptrs[] = {dq, dk, dv, dout, out, q, k, v}, *f32[] = {lse, workspace};
    SX_REQUIRE(s && args_ok(ptrs, 8, f32, 2, s));
    SX_REQUIRE(workspace_bytes >= sx_flash_attention_backward_workspace_bytes(s->B, s->Tq, s->Tk, s->H, s->KV, s->D));
    if (s->B == 0 || s->Tq == 0 || s->H == 0 || s->Tk == 0) return cudaSuccess;
    fa_args a = make_args(s, accumulate_dq);
    a.splits = dkdv_splits(s->B, s->Tk, s->KV, a.group);
    a.part = a.splits > 1 ? (float *)((char *)workspace + di_bytes(s->B, s->Tq, s->H)) : NULL;
    if (s->D == 64) return bwd_launch<64>(dq, dk, dv, dout, out, lse, q, k, v, s->B, a, (float *)workspace, stream);
    return bwd_launch<128>(dq, dk, dv, dout, out, lse, q, k, v, s->B, a, (float *)workspace, stream);
}

cudaError_t sx_flash_attention_forward(sx_bf16 *out, float *lse, const sx_bf16 *q, const sx_bf16 *k,
                                       const sx_bf16 *v, int B, int T, int H, int KV, int D, int q_row_stride,
                                       int kv_row_stride, float scale, cudaStream_t stream) {
    const sx_attention_block s = causal_block(B, T, H, KV, D, q_row_stride, kv_row_stride, scale);
    return sx_flash_attention_block_forward(out, lse, q, k, v, &s, stream);
}

cudaError_t sx_flash_attention_backward(sx_bf16 *dq, sx_bf16 *dk, sx_bf16 *dv, const sx_bf16 *dout,
                                        const sx_bf16 *out, const float *lse, const sx_bf16 *q, const sx_bf16 *k,
                                        const sx_bf16 *v, int B, int T, int H, int KV, int D, int q_row_stride,
                                        int kv_row_stride, float scale, void *workspace, size_t workspace_bytes,
                                        cudaStream_t stream) {
    const sx_attention_block s = causal_block(B, T, H, KV, D, q_row_stride, kv_row_stride, scale);
    return sx_flash_attention_block_backward(dq, dk, dv, dout, out, lse, q, k, v, &s, 0, workspace, workspace_bytes,
                                             stream);
}

} /* extern "C" */
