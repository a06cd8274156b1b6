/* What the embedding backward's paths share (kernels/embedding.cu: forward, the sorted and the tiled
 * backward; kernels/embedding_grouped.cu: the grouped backward): the sort keys, a row's vectorised add, the
 * position embedding's gradient streamed by spare blocks, and the sorted path's window kernels that the
 * grouped apply falls back on.  Device code lives here whole (inline or templates): the two units share
 * no device symbol, so no relocatable device code is needed. */
#ifndef SEXTANT_EMBEDDING_INTERNAL_CUH
#define SEXTANT_EMBEDDING_INTERNAL_CUH

#include "common.cuh"
#include "kernels_internal.h"

static inline int sx_key_bits(int V) { /* bits needed for keys in [0, V] */
    int b = 1;
    while (b < 31 && (1u << b) <= (unsigned)V) b++;
    return b;
}

static inline size_t align256(size_t x) { return (x + 255) & ~(size_t)255; }

/* the sort's keys and values: the id (V when out of range, sorted last) and the token's position */
static __global__ void emb_keys_kernel(unsigned *keys, int *vals, const int32_t *ids, int N, int V) {
    const int n = blockIdx.x * blockDim.x + threadIdx.x;
    if (n >= N) return;
    const int id = ids[n];
    keys[n] = (id >= 0 && id < V) ? (unsigned)id : (unsigned)V;
    vals[n] = n;
}

/* add P fp32 values into a gradient row segment (fp32 or bf16), vectorized when P == 8 */
template <int P>
__device__ __forceinline__ void add_row(void *g, sx_dtype gt, size_t base, const float (&acc)[P]) {
    if constexpr (P == 8) {
        if (gt == SX_F32) {
            float4 *q = (float4 *)((float *)g + base);
            float4 a = q[0], b = q[1];
            a.x += acc[0]; a.y += acc[1]; a.z += acc[2]; a.w += acc[3];
            b.x += acc[4]; b.y += acc[5]; b.z += acc[6]; b.w += acc[7];
            q[0] = a; q[1] = b;
        } else {
            bf16 *q = (bf16 *)g + base;
            Pack<bf16> o = ld_pack_plain(q);
#pragma unroll
            for (int k = 0; k < 8; k++) o.set(k, o.get(k) + acc[k]);
            st_pack(q, o);
        }
    } else {
#pragma unroll
        for (int k = 0; k < P; k++) grad_add(g, gt, base + k, acc[k]);
    }
}

/* dwpe[idx .. idx+P) += sum over b in order of dout[b, idx ..]: the position embedding's gradient,
 * one unit of P channels (hint: read dout with the given L2 policy) */
template <bool VEC>
__device__ __forceinline__ void wpe_sum_unit(void *dwpe, sx_dtype gt, const bf16 *__restrict__ dout, int B, int T,
                                             int C, size_t idx, bool hint, uint64_t pol) {
    constexpr int P = VEC ? 8 : 1;
    float acc[P];
#pragma unroll
    for (int k = 0; k < P; k++) acc[k] = 0.0f;
#pragma unroll 8
    for (int b = 0; b < B; b++) {
        const bf16 *row = dout + (size_t)b * T * C + idx;
        if constexpr (VEC) {
            Pack<bf16> d;
            d.bits = hint ? sx_ld_nc_hint(row, pol) : __ldg(reinterpret_cast<const int4 *>(row));
#pragma unroll
            for (int k = 0; k < P; k++) acc[k] += d.get(k);
        } else {
            acc[0] += __bfloat162float(row[0]);
        }
    }
    add_row<P>(dwpe, gt, idx, acc);
}

/* dwpe, or an L2 prefetch of dout, by the blocks of K1 beyond the tiles */
template <bool VEC>
__device__ void emb_stream_part(int sb, int nsb, void *dwpe, sx_dtype gt, const bf16 *__restrict__ dout, int B,
                                int T, int C, int l2, int pf_bytes_k) {
    if (dwpe) {
        constexpr int P = VEC ? 8 : 1;
        const uint64_t pol = sx_policy_evict_last();
        const bool hint = VEC && (l2 & 1);
        for (size_t idx = ((size_t)sb * blockDim.x + threadIdx.x) * P; idx < (size_t)T * C;
             idx += (size_t)nsb * blockDim.x * P)
            wpe_sum_unit<VEC>(dwpe, gt, dout, B, T, C, idx, hint, pol);
    } else if (VEC && pf_bytes_k > 0) {
        const uint64_t pol = sx_policy_evict_last();
        const size_t total = (size_t)B * T * C * 2, cap = (size_t)pf_bytes_k << 10;
        const size_t bytes = (total < cap ? total : cap) & ~(size_t)15;
        const size_t chunk = 16384;
        for (size_t o = ((size_t)sb * blockDim.x + threadIdx.x) * chunk; o < bytes;
             o += (size_t)nsb * blockDim.x * chunk) {
            const size_t n = bytes - o < chunk ? bytes - o : chunk;
            sx_prefetch_l2((const char *)dout + o, (unsigned)n, pol);
        }
    }
}

/* dwpe (when wanted), then dwte from tokens sorted by key in windows of 32 (embedding.cu) */
cudaError_t emb_windows_launch(void *dwte, void *dwpe, sx_dtype gt, const bf16 *dout, const unsigned *keys,
                               const int *pos, float *part, int B, int T, int C, int V, cudaStream_t stream);
/* the grouped apply's scratch: a window's partial sums (embedding_grouped.cu) */
size_t emb3_scratch_bytes(int N, int C);

#endif
