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
 * dwte, deterministic and without atomics:
 *  1. keys[n] = ids[n] (V for an id out of range), vals[n] = n; a stable radix sort (CUB)
 *     groups equal ids, their token positions ascending.
 *  2. The sorted positions are cut into windows of EMB_WIN; one warp per (window, chunk of
 *     256 channels) walks the window's rows in order, summing each run of equal keys in fp32 (EMB_UNROLL row loads in
 *     flight).  A run that lies inside the window is added into dwte at once; a run that
 *     crosses the window's start or end leaves its partial sum in the workspace
 *     (slot 0: the run came from the previous window; slot 1: it goes on into the next).
 *  3. One warp per (run that crosses windows, chunk) adds its partials in window order and adds the
 *     total into dwte.
 * Every row of dwte is written by exactly one warp, and every sum has a fixed order, so the
 * result is bitwise reproducible; a frequent token (say 4% of a batch) is spread over many
 * windows instead of one long serial loop.
 * dwpe: one thread per (t, 8 channels) sums over b in order. */

#define EMB_WIN 32
#define EMB_UNROLL 8

static int sx_key_bits(int V) { /* bits needed for keys in [0, V] */
    int b = 1;
    while (b < 31 && (1u << b) <= (unsigned)V) b++;
    return b;
}

struct EmbWs {
    unsigned *keys_in, *keys_out;
    int *vals_in, *vals_out;
    float *part; /* [windows][2][C] */
    void *cub_tmp;
    size_t cub_bytes, total;
};

static size_t align256(size_t x) { return (x + 255) & ~(size_t)255; }

static cudaError_t emb_ws_layout(EmbWs *w, void *base, int N, int C, int V) {
    size_t cub_bytes = 0;
    SX_CHECK(cub::DeviceRadixSort::SortPairs(nullptr, cub_bytes, (const unsigned *)nullptr, (unsigned *)nullptr,
                                             (const int *)nullptr, (int *)nullptr, N, 0, sx_key_bits(V)));
    const uintptr_t p = (uintptr_t)base;
    const size_t arr = align256((size_t)N * 4);
    const size_t windows = ((size_t)N + EMB_WIN - 1) / EMB_WIN;
    size_t off = 0;
    w->keys_in = (unsigned *)(p + off); off += arr;
    w->keys_out = (unsigned *)(p + off); off += arr;
    w->vals_in = (int *)(p + off); off += arr;
    w->vals_out = (int *)(p + off); off += arr;
    w->part = (float *)(p + off); off += align256(windows * 2 * (size_t)C * sizeof(float));
    w->cub_tmp = (void *)(p + off); off += align256(cub_bytes);
    w->cub_bytes = cub_bytes;
    w->total = off;
    return cudaSuccess;
}

extern "C" size_t sx_embedding_backward_workspace_bytes(int N, int C, int V) {
    if (N <= 0 || C <= 0 || V <= 0) return 0;
    EmbWs w;
    if (emb_ws_layout(&w, nullptr, N, C, V) != cudaSuccess) return 0;
    return w.total;
}

__global__ void emb_keys_kernel(unsigned *keys, int *vals, const int32_t *ids, int N, int V) {
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

template <bool VEC>
__global__ void wte_window_kernel(void *dwte, sx_dtype gt, float *__restrict__ part, const bf16 *__restrict__ dout,
                                  const unsigned *__restrict__ keys, const int *__restrict__ pos, int N, int C, int V) {
    constexpr int P = VEC ? 8 : 1;
    const int nch = (C + SX_WARP * P - 1) / (SX_WARP * P); /* channel chunks of 32 lanes x P */
    const size_t gw = ((size_t)blockIdx.x * blockDim.x + threadIdx.x) / SX_WARP;
    const int w = (int)(gw / nch);
    const int lane = threadIdx.x % SX_WARP;
    const int s = w * EMB_WIN;
    if (s >= N) return;
    const int e = min(s + EMB_WIN, N);
    const bool prev_same = s > 0 && keys[s - 1] == keys[s];
    const int c0 = ((int)(gw % nch) * SX_WARP + lane) * P;
    if (c0 < C) {
        float acc[P];
#pragma unroll
        for (int k = 0; k < P; k++) acc[k] = 0.0f;
        int a = s; /* start of the current sub-run */
        for (int j0 = s; j0 < e; j0 += EMB_UNROLL) {
            float r[EMB_UNROLL][P];
#pragma unroll
            for (int u = 0; u < EMB_UNROLL; u++) {
                if (j0 + u < e) {
                    const bf16 *row = dout + (size_t)pos[j0 + u] * C + c0;
                    if constexpr (VEC) {
                        const Pack<bf16> d = ld_pack(row);
#pragma unroll
                        for (int k = 0; k < P; k++) r[u][k] = d.get(k);
                    } else {
                        r[u][0] = __bfloat162float(row[0]);
                    }
                }
            }
#pragma unroll
            for (int u = 0; u < EMB_UNROLL; u++) {
                const int j = j0 + u;
                if (j < e) {
#pragma unroll
                    for (int k = 0; k < P; k++) acc[k] += r[u][k];
                    const unsigned key = keys[j];
                    const bool next_same = j + 1 < N && keys[j + 1] == key;
                    if (!next_same || j + 1 == e) { /* sub-run [a, j] ends here */
                        if (key < (unsigned)V) {
                            const bool from_prev = a == s && prev_same;
                            if (!from_prev && !next_same) {
                                add_row<P>(dwte, gt, (size_t)key * C + c0, acc);
                            } else {
                                float *slot = part + ((size_t)w * 2 + (from_prev ? 0 : 1)) * C + c0;
#pragma unroll
                                for (int k = 0; k < P; k++) slot[k] = acc[k];
                            }
                        }
#pragma unroll
                        for (int k = 0; k < P; k++) acc[k] = 0.0f;
                        a = j + 1;
                    }
                }
            }
        }
    }
}

/* one warp per window whose last run starts in it and goes on into the next window */
template <bool VEC>
__global__ void wte_merge_kernel(void *dwte, sx_dtype gt, const float *__restrict__ part,
                                 const unsigned *__restrict__ keys, int N, int C, int V) {
    constexpr int P = VEC ? 8 : 1;
    const int nch = (C + SX_WARP * P - 1) / (SX_WARP * P);
    const size_t gw = ((size_t)blockIdx.x * blockDim.x + threadIdx.x) / SX_WARP;
    const int w = (int)(gw / nch);
    const int lane = threadIdx.x % SX_WARP;
    const int s = w * EMB_WIN;
    if (s >= N) return;
    const int e = min(s + EMB_WIN, N);
    const unsigned key = keys[e - 1];
    if (key >= (unsigned)V || e >= N || keys[e] != key) return; /* last run ends in this window */
    if (s > 0 && keys[s - 1] == key && keys[s] == key) return;  /* whole window continues an earlier run */
    int last = w + 1; /* windows w+1 .. last hold slot-0 partials of this run */
    while ((last + 1) * EMB_WIN < N && keys[(last + 1) * EMB_WIN] == key) last++;
    const int c0 = ((int)(gw % nch) * SX_WARP + lane) * P;
    if (c0 < C) {
        float acc[P];
#pragma unroll
        for (int k = 0; k < P; k++) acc[k] = part[((size_t)w * 2 + 1) * C + c0 + k];
        for (int ww = w + 1; ww <= last; ww++)
#pragma unroll
            for (int k = 0; k < P; k++) acc[k] += part[((size_t)ww * 2 + 0) * C + c0 + k];
        add_row<P>(dwte, gt, (size_t)key * C + c0, acc);
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
#pragma unroll 8
    for (int b = 0; b < B; b++) {
        const bf16 *row = dout + (size_t)b * T * C + idx;
        if constexpr (VEC) {
            const Pack<bf16> d = ld_pack(row);
#pragma unroll
            for (int k = 0; k < P; k++) acc[k] += d.get(k);
        } else {
            acc[0] += __bfloat162float(row[0]);
        }
    }
    add_row<P>(dwpe, gt, idx, acc);
}

extern "C" cudaError_t sx_embedding_backward(void *dwte, void *dwpe, sx_dtype grad_type,
                                             const sx_bf16 *dout, const int32_t *ids,
                                             void *workspace, size_t workspace_bytes,
                                             int B, int T, int C, int V, cudaStream_t stream) {
    SX_REQUIRE(B >= 0 && T >= 0 && C >= 0 && V > 0);
    SX_REQUIRE(grad_type == SX_F32 || grad_type == SX_BF16);
    const int N = B * T;
    if (N == 0 || C == 0) return cudaSuccess;
    SX_REQUIRE(dout && ids && dwte && workspace);
    EmbWs w;
    SX_CHECK(emb_ws_layout(&w, workspace, N, C, V));
    SX_REQUIRE(workspace_bytes >= w.total);
    const int threads = 256;
    const bool vec = C % 8 == 0 && sx_aligned16(dout) && sx_aligned16(dwte) && (!dwpe || sx_aligned16(dwpe));
    if (dwpe) {
        if (vec)
            wpe_backward_kernel<true><<<sx_blocks((size_t)T * C / 8, threads), threads, 0, stream>>>(
                dwpe, grad_type, (const bf16 *)dout, B, T, C);
        else
            wpe_backward_kernel<false><<<sx_blocks((size_t)T * C, threads), threads, 0, stream>>>(
                dwpe, grad_type, (const bf16 *)dout, B, T, C);
        SX_CHECK(cudaGetLastError());
    }
    emb_keys_kernel<<<sx_blocks(N, threads), threads, 0, stream>>>(w.keys_in, w.vals_in, ids, N, V);
    SX_CHECK(cudaGetLastError());
    size_t cub_bytes = w.cub_bytes;
    SX_CHECK(cub::DeviceRadixSort::SortPairs(w.cub_tmp, cub_bytes, w.keys_in, w.keys_out, w.vals_in,
                                             w.vals_out, N, 0, sx_key_bits(V), stream));
    const size_t windows = ((size_t)N + EMB_WIN - 1) / EMB_WIN;
    const int P = vec ? 8 : 1, nch = (C + SX_WARP * P - 1) / (SX_WARP * P);
    const unsigned grid = sx_blocks(windows * nch * SX_WARP, threads);
    if (vec) {
        wte_window_kernel<true><<<grid, threads, 0, stream>>>(dwte, grad_type, w.part, (const bf16 *)dout,
                                                              w.keys_out, w.vals_out, N, C, V);
        SX_CHECK(cudaGetLastError());
        wte_merge_kernel<true><<<grid, threads, 0, stream>>>(dwte, grad_type, w.part, w.keys_out, N, C, V);
    } else {
        wte_window_kernel<false><<<grid, threads, 0, stream>>>(dwte, grad_type, w.part, (const bf16 *)dout,
                                                               w.keys_out, w.vals_out, N, C, V);
        SX_CHECK(cudaGetLastError());
        wte_merge_kernel<false><<<grid, threads, 0, stream>>>(dwte, grad_type, w.part, w.keys_out, N, C, V);
    }
    SX_LAUNCHED();
}
