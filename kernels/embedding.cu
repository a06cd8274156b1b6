/* Token + position embedding, forward and deterministic backward. */
#include <cub/device/device_radix_sort.cuh>
#include "common.cuh"

/* ------------------------------------------------------------------ forward
 * One thread per 8 channels of one token (VEC) or per channel (scalar). */
template <bool VEC>
__global__ void embedding_forward_kernel(bf16 *__restrict__ out, const int32_t *__restrict__ ids,
                                         const bf16 *__restrict__ wte, const bf16 *__restrict__ wpe,
                                         int N, int T, int C, int V) {
    constexpr int P = VEC ? 8 : 1;
    const size_t idx = ((size_t)blockIdx.x * blockDim.x + threadIdx.x) * P;
    if (idx >= (size_t)N * C) return;
    const int n = (int)(idx / C), c = (int)(idx % C), t = n % T;
    const int id = __ldg(ids + n);
    const bool ok = id >= 0 && id < V;
    const bf16 *te = wte + (size_t)(ok ? id : 0) * C + c;
    if constexpr (VEC) {
        Pack<bf16> a = ld_pack(te), o;
        Pack<bf16> p;
        if (wpe) p = ld_pack(wpe + (size_t)t * C + c);
#pragma unroll
        for (int k = 0; k < 8; k++) {
            float f = a.get(k) + (wpe ? p.get(k) : 0.0f);
            o.set(k, ok ? f : __int_as_float(0x7fffffff));
        }
        st_pack_cs(out + idx, o);
    } else {
        float f = __bfloat162float(te[0]) + (wpe ? __bfloat162float(wpe[(size_t)t * C + c]) : 0.0f);
        out[idx] = __float2bfloat16_rn(ok ? f : __int_as_float(0x7fffffff));
    }
}

extern "C" cudaError_t sx_embedding_forward(sx_bf16 *out, const int32_t *ids, const sx_bf16 *wte,
                                            const sx_bf16 *wpe, int B, int T, int C, int V,
                                            cudaStream_t stream) {
    SX_REQUIRE(B >= 0 && T >= 0 && C >= 0 && V > 0);
    const int N = B * T;
    if (N == 0 || C == 0) return cudaSuccess;
    SX_REQUIRE(out && ids && wte);
    const bool vec = C % 8 == 0 && sx_aligned16(out) && sx_aligned16(wte) && (!wpe || sx_aligned16(wpe));
    const int threads = 256;
    if (vec)
        embedding_forward_kernel<true><<<sx_blocks((size_t)N * C / 8, threads), threads, 0, stream>>>(
            (bf16 *)out, ids, (const bf16 *)wte, (const bf16 *)wpe, N, T, C, V);
    else
        embedding_forward_kernel<false><<<sx_blocks((size_t)N * C, threads), threads, 0, stream>>>(
            (bf16 *)out, ids, (const bf16 *)wte, (const bf16 *)wpe, N, T, C, V);
    SX_LAUNCHED();
}

/* ----------------------------------------------------------------- backward
 * wte: keys[n] = ids[n] (V for an id out of range), vals[n] = n; a stable radix sort
 * groups equal ids with their token positions in ascending order.  Then one warp per
 * run of equal keys sums the dout rows in that order (fp32) and adds once into dwte.
 * wpe: one thread per (t, 8 channels) sums over b in order. */

static int sx_key_bits(int V) { /* bits needed for keys in [0, V] */
    int b = 1;
    while (b < 31 && (1u << b) <= (unsigned)V) b++;
    return b;
}

struct EmbWs {
    unsigned *keys_in, *keys_out;
    int *vals_in, *vals_out;
    void *cub_tmp;
    size_t cub_bytes, total;
};

static size_t align256(size_t x) { return (x + 255) & ~(size_t)255; }

static cudaError_t emb_ws_layout(EmbWs *w, void *base, int N, int V) {
    size_t cub_bytes = 0;
    SX_CHECK(cub::DeviceRadixSort::SortPairs(nullptr, cub_bytes, (const unsigned *)nullptr, (unsigned *)nullptr,
                                             (const int *)nullptr, (int *)nullptr, N, 0, sx_key_bits(V)));
    const uintptr_t p = (uintptr_t)base;
    size_t off = 0;
    const size_t arr = align256((size_t)N * 4);
    w->keys_in = (unsigned *)(p + off); off += arr;
    w->keys_out = (unsigned *)(p + off); off += arr;
    w->vals_in = (int *)(p + off); off += arr;
    w->vals_out = (int *)(p + off); off += arr;
    w->cub_tmp = (void *)(p + off); off += align256(cub_bytes);
    w->cub_bytes = cub_bytes;
    w->total = off;
    return cudaSuccess;
}

extern "C" size_t sx_embedding_backward_workspace_bytes(int N, int V) {
    if (N <= 0 || V <= 0) return 0;
    EmbWs w;
    if (emb_ws_layout(&w, nullptr, N, V) != cudaSuccess) return 0;
    return w.total;
}

__global__ void emb_keys_kernel(unsigned *keys, int *vals, const int32_t *ids, int N, int V) {
    const int n = blockIdx.x * blockDim.x + threadIdx.x;
    if (n >= N) return;
    const int id = ids[n];
    keys[n] = (id >= 0 && id < V) ? (unsigned)id : (unsigned)V;
    vals[n] = n;
}

/* One warp per sorted position; only the first position of each run works.  Each lane
 * owns 8 channels per 256-channel chunk (VEC) or 1 per 32 (scalar). */
template <bool VEC>
__global__ void wte_backward_kernel(void *dwte, sx_dtype gt, const bf16 *__restrict__ dout,
                                    const unsigned *__restrict__ keys, const int *__restrict__ pos,
                                    int N, int C, int V) {
    const int i = (int)(((size_t)blockIdx.x * blockDim.x + threadIdx.x) / SX_WARP);
    const int lane = threadIdx.x % SX_WARP;
    if (i >= N) return;
    const unsigned key = keys[i];
    if (key >= (unsigned)V || (i > 0 && keys[i - 1] == key)) return;
    int end = i + 1;
    while (end < N && keys[end] == key) end++;
    constexpr int P = VEC ? 8 : 1;
    for (int c0 = lane * P; c0 < C; c0 += SX_WARP * P) {
        float acc[P];
#pragma unroll
        for (int k = 0; k < P; k++) acc[k] = 0.0f;
        for (int j = i; j < end; j++) {
            const bf16 *row = dout + (size_t)pos[j] * C + c0;
            if constexpr (VEC) {
                Pack<bf16> d = ld_pack(row);
#pragma unroll
                for (int k = 0; k < P; k++) acc[k] += d.get(k);
            } else {
                acc[0] += __bfloat162float(row[0]);
            }
        }
        const size_t base = (size_t)key * C + c0;
        if constexpr (VEC) {
            if (gt == SX_F32) {
                float4 *g = (float4 *)((float *)dwte + base);
                float4 a = g[0], b = g[1];
                a.x += acc[0]; a.y += acc[1]; a.z += acc[2]; a.w += acc[3];
                b.x += acc[4]; b.y += acc[5]; b.z += acc[6]; b.w += acc[7];
                g[0] = a; g[1] = b;
            } else {
                bf16 *g = (bf16 *)dwte + base;
                Pack<bf16> o = ld_pack_plain(g);
#pragma unroll
                for (int k = 0; k < P; k++) o.set(k, o.get(k) + acc[k]);
                st_pack(g, o);
            }
        } else {
            grad_add(dwte, gt, base, acc[0]);
        }
    }
}

template <bool VEC>
__global__ void wpe_backward_kernel(void *dwpe, sx_dtype gt, const bf16 *__restrict__ dout,
                                    int B, int T, int C) {
    constexpr int P = VEC ? 8 : 1;
    const size_t idx = ((size_t)blockIdx.x * blockDim.x + threadIdx.x) * P;
    if (idx >= (size_t)T * C) return;
    float acc[P];
#pragma unroll
    for (int k = 0; k < P; k++) acc[k] = 0.0f;
    for (int b = 0; b < B; b++) {
        const bf16 *row = dout + (size_t)b * T * C + idx;
        if constexpr (VEC) {
            Pack<bf16> d = ld_pack(row);
#pragma unroll
            for (int k = 0; k < P; k++) acc[k] += d.get(k);
        } else {
            acc[0] += __bfloat162float(row[0]);
        }
    }
#pragma unroll
    for (int k = 0; k < P; k++) grad_add(dwpe, gt, idx + k, acc[k]);
}

extern "C" cudaError_t sx_embedding_backward(void *dwte, void *dwpe, sx_dtype grad_type,
                                             const sx_bf16 *dout, const int32_t *ids,
                                             void *workspace, size_t workspace_bytes,
                                             int B, int T, int C, int V, cudaStream_t stream) {
    SX_REQUIRE(B >= 0 && T >= 0 && C >= 0 && V > 0);
    SX_REQUIRE(grad_type == SX_F32 || grad_type == SX_BF16);
    const int N = B * T;
    if (N == 0 || C == 0) return cudaSuccess;
    SX_REQUIRE(dout && ids && dwte);
    const size_t gsz = grad_type == SX_F32 ? 4 : 2;
    const int threads = 256;
    if (dwpe) {
        const bool vec = C % 8 == 0 && sx_aligned16(dout) && sx_aligned16(dwpe);
        if (vec)
            wpe_backward_kernel<true><<<sx_blocks((size_t)T * C / 8, threads), threads, 0, stream>>>(
                dwpe, grad_type, (const bf16 *)dout, B, T, C);
        else
            wpe_backward_kernel<false><<<sx_blocks((size_t)T * C, threads), threads, 0, stream>>>(
                dwpe, grad_type, (const bf16 *)dout, B, T, C);
        SX_CHECK(cudaGetLastError());
    }
    SX_REQUIRE(workspace);
    EmbWs w;
    SX_CHECK(emb_ws_layout(&w, workspace, N, V));
    SX_REQUIRE(workspace_bytes >= w.total);
    emb_keys_kernel<<<sx_blocks(N, threads), threads, 0, stream>>>(w.keys_in, w.vals_in, ids, N, V);
    SX_CHECK(cudaGetLastError());
    size_t cub_bytes = w.cub_bytes;
    SX_CHECK(cub::DeviceRadixSort::SortPairs(w.cub_tmp, cub_bytes, w.keys_in, w.keys_out, w.vals_in,
                                             w.vals_out, N, 0, sx_key_bits(V), stream));
    const bool vec = C % 8 == 0 && sx_aligned16(dout) && sx_aligned16(dwte) && (C * gsz) % 16 == 0;
    if (vec)
        wte_backward_kernel<true><<<sx_blocks((size_t)N * SX_WARP, threads), threads, 0, stream>>>(
            dwte, grad_type, (const bf16 *)dout, w.keys_out, w.vals_out, N, C, V);
    else
        wte_backward_kernel<false><<<sx_blocks((size_t)N * SX_WARP, threads), threads, 0, stream>>>(
            dwte, grad_type, (const bf16 *)dout, w.keys_out, w.vals_out, N, C, V);
    SX_LAUNCHED();
}
