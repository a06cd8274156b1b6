/* Token + position embedding, forward and deterministic backward. */
#include <cub/block/block_radix_sort.cuh>
#include <cub/block/block_scan.cuh>
#include <cub/device/device_radix_sort.cuh>
#include "common.cuh"
#include "kernels_internal.h"

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

static size_t emb_sorted_ws_bytes(int N, int C, int V) {
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

template <bool VEC>
__global__ void wpe_backward_kernel(void *dwpe, sx_dtype gt, const bf16 *__restrict__ dout,
                                    int B, int T, int C) {
    constexpr int P = VEC ? 8 : 1;
    const size_t idx = ((size_t)blockIdx.x * blockDim.x + threadIdx.x) * P;
    if (idx >= (size_t)T * C) return;
    wpe_sum_unit<VEC>(dwpe, gt, dout, B, T, C, idx, false, 0);
}

/* dwpe (when wanted), then dwte from tokens sorted by key (keys, pos: N of them) in windows of
 * EMB_WIN summed by warps and an ordered merge; part: [ceil(N / EMB_WIN)][2][C] fp32 */
static cudaError_t emb_windows_launch(void *dwte, void *dwpe, sx_dtype gt, const bf16 *dout, const unsigned *keys,
                                      const int *pos, float *part, int B, int T, int C, int V, cudaStream_t stream) {
    const int N = B * T, threads = 256;
    const bool vec = C % 8 == 0 && sx_aligned16(dout) && sx_aligned16(dwte) && (!dwpe || sx_aligned16(dwpe));
    if (dwpe) {
        if (vec)
            wpe_backward_kernel<true><<<sx_blocks((size_t)T * C / 8, threads), threads, 0, stream>>>(dwpe, gt, dout, B,
                                                                                                    T, C);
        else
            wpe_backward_kernel<false><<<sx_blocks((size_t)T * C, threads), threads, 0, stream>>>(dwpe, gt, dout, B, T,
                                                                                                 C);
        SX_CHECK(cudaGetLastError());
    }
    const size_t windows = ((size_t)N + EMB_WIN - 1) / EMB_WIN;
    const int P = vec ? 8 : 1, nch = (C + SX_WARP * P - 1) / (SX_WARP * P);
    const unsigned grid = sx_blocks(windows * nch * SX_WARP, threads);
    if (vec) {
        wte_window_kernel<true><<<grid, threads, 0, stream>>>(dwte, gt, part, dout, keys, pos, N, C, V);
        SX_CHECK(cudaGetLastError());
        wte_merge_kernel<true><<<grid, threads, 0, stream>>>(dwte, gt, part, keys, N, C, V);
    } else {
        wte_window_kernel<false><<<grid, threads, 0, stream>>>(dwte, gt, part, dout, keys, pos, N, C, V);
        SX_CHECK(cudaGetLastError());
        wte_merge_kernel<false><<<grid, threads, 0, stream>>>(dwte, gt, part, keys, N, C, V);
    }
    SX_LAUNCHED();
}

/* the sorted path (any N, V): CUB radix sort, windows of 32 sorted rows, ordered merge */
static cudaError_t emb_backward_sorted(void *dwte, void *dwpe, sx_dtype grad_type, const sx_bf16 *dout,
                                       const int32_t *ids, void *workspace, size_t workspace_bytes, int B, int T,
                                       int C, int V, cudaStream_t stream) {
    const int N = B * T, threads = 256;
    EmbWs w;
    SX_CHECK(emb_ws_layout(&w, workspace, N, C, V));
    SX_REQUIRE(workspace_bytes >= w.total);
    emb_keys_kernel<<<sx_blocks(N, threads), threads, 0, stream>>>(w.keys_in, w.vals_in, ids, N, V);
    SX_CHECK(cudaGetLastError());
    size_t cub_bytes = w.cub_bytes;
    SX_CHECK(cub::DeviceRadixSort::SortPairs(w.cub_tmp, cub_bytes, w.keys_in, w.keys_out, w.vals_in,
                                             w.vals_out, N, 0, sx_key_bits(V), stream));
    return emb_windows_launch(dwte, dwpe, grad_type, (const bf16 *)dout, w.keys_out, w.vals_out, w.part, B, T, C, V,
                              stream);
}

/* ------------------------------------------------------ backward, tiled path
 * For N <= 32 * 4096 tokens and V <= 2^18 - 2.  Two launches, no sort over the whole batch:
 *
 *  K1 (emb_tile_kernel), one block per tile of L = 256..4096 consecutive tokens (G <= 32
 *     tiles): the block sorts its tile's (id, position) keys in shared memory (CUB
 *     BlockRadixSort, stable: equal ids keep position order) and writes, per tile: the sorted
 *     token positions, one record per run of equal ids (start, length, first work item, id),
 *     a bitmap of the ids present with a prefix count per 32-bit word (so the run of id v in
 *     tile j is found with two loads), and the tile's work items: a run of len tokens gives
 *     ceil(len / 32) items.  Every word of these tables is written each call (no zeroing of
 *     the workspace, no global atomics).  Blocks beyond the G tile blocks stream over dout
 *     meanwhile: they compute dwpe (when wanted; every b summed in order), or else prefetch
 *     dout into L2 (cp.async.bulk.prefetch), so that K1's latency overlaps useful reads.
 *  K2 (emb_item_kernel), one warp per work item, launched with PDL: the warp looks its id up
 *     in every tile (lane j <-> tile j: bitmap word, prefix, run record), so it knows the
 *     id's n tokens in canonical order (tile order, then position order = ascending
 *     position) and which of the id's ceil(n / 32) segments of 32 tokens it sums (surplus
 *     items exit).  An id with n <= 32 is one segment: its warp sums the rows in order and
 *     adds the sum into dwte (each touched dwte row is read and written once, by one warp).
 *     A frequent id is spread over several warps: each writes its segment's fp32 sum to the
 *     workspace, and the last of them to finish (an integer counter zeroed by K1) adds the
 *     segment sums in segment order and then into dwte.
 * Every sum has a fixed order, so the result is bitwise reproducible run to run; the only
 * atomics are on integers (the counter, and a slot allocator whose order does not matter). */

#define EMB_S 32     /* tokens per segment (one per lane) */
#define EMB_BT 256   /* K1 threads */
#define EMB_MAXG 32  /* tiles: one lane each in K2 */
#define EMB_MAXL 4096
#define EMB_MAXV ((1 << 18) - 2)

struct Emb2 {
    int *pos;           /* [G][L] sorted token positions */
    int4 *run;          /* [G][L] (start, len, first item, id) */
    int4 *items;        /* [G][IL] (segment in run, run start, run length, id) */
    int *counter;       /* [G][IL] arrivals at an id's first item */
    int *pslot;         /* [G][IL] partial slot of a worker item */
    int *nitems;        /* [G] items per tile, then the slot allocator at [EMB_MAXG] */
    unsigned *bits;     /* [G][Wp] ids present */
    unsigned short *pre;/* [G][Wp] runs before each word */
    float *partial;     /* [slots][C] */
    int G, L, IL, Wp, lbits, kbits;
};

static int g_emb_path = 0, g_emb_kp = 0, g_emb_l2 = -1, g_emb_pf = -1, g_emb_pdl = -1;
extern "C" void sx_embedding_backward_tune(int path, int kp, int l2, int prefetch_mb, int pdl) {
    g_emb_path = path;
    g_emb_kp = kp;
    g_emb_l2 = l2;
    g_emb_pf = prefetch_mb;
    g_emb_pdl = pdl;
}

static int emb2_tile(int N, int *G) { /* tile length L (0 if the tiled path does not apply) */
    int L = 256;
    while (L * EMB_MAXG < N && L < EMB_MAXL) L *= 2;
    *G = (N + L - 1) / L;
    return *G <= EMB_MAXG ? L : 0;
}
static int emb2_applies(int N, int V) {
    int G;
    return N > 0 && V <= EMB_MAXV && emb2_tile(N, &G) > 0;
}

static size_t emb2_layout(Emb2 *e, void *base, int N, int C, int V) {
    int G;
    const int L = emb2_tile(N, &G);
    const int IL = L + L / EMB_S, W = (V + 31) / 32, Wp = (W + 7) & ~7;
    int lbits = 0, kbits = 0;
    while ((1 << lbits) < L) lbits++;
    while (kbits < 31 && (1u << kbits) <= (unsigned)(V + 1)) kbits++; /* keys 0 .. V+1 */
    const size_t slots = (size_t)N / 16 + 2;
    const uintptr_t p = (uintptr_t)base;
    size_t off = 0;
    e->pos = (int *)(p + off); off += align256((size_t)G * L * 4);
    e->run = (int4 *)(p + off); off += align256((size_t)G * L * 16);
    e->items = (int4 *)(p + off); off += align256((size_t)G * IL * 16);
    e->counter = (int *)(p + off); off += align256((size_t)G * IL * 4);
    e->pslot = (int *)(p + off); off += align256((size_t)G * IL * 4);
    e->nitems = (int *)(p + off); off += align256((EMB_MAXG + 1) * 4);
    e->bits = (unsigned *)(p + off); off += align256((size_t)G * Wp * 4);
    e->pre = (unsigned short *)(p + off); off += align256((size_t)G * Wp * 2);
    e->partial = (float *)(p + off); off += align256(slots * C * 4);
    e->G = G;
    e->L = L;
    e->IL = IL;
    e->Wp = Wp;
    e->lbits = lbits;
    e->kbits = kbits;
    return off;
}

static size_t emb3_scratch_bytes(int N, int C);

extern "C" size_t sx_embedding_backward_workspace_bytes(int N, int C, int V) {
    if (N <= 0 || C <= 0 || V <= 0) return 0;
    size_t a = emb_sorted_ws_bytes(N, C, V);
    if (a == 0) return 0;
    if (emb2_applies(N, V)) {
        Emb2 e;
        const size_t b = emb2_layout(&e, nullptr, N, C, V);
        if (b > a) a = b;
    }
    const size_t gb = align256(sx_embedding_grouping_bytes(N, C, V)) + emb3_scratch_bytes(N, C);
    return gb > a ? gb : a;
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

template <int IPT, bool VEC>
__global__ void __launch_bounds__(EMB_BT)
emb_tile_kernel(Emb2 e, const int32_t *__restrict__ ids, int N, int V, void *dwpe, sx_dtype gt,
                const bf16 *__restrict__ dout, int B, int T, int C, int l2, int pf_bytes_k) {
    constexpr int L = EMB_BT * IPT;
    using Sort = cub::BlockRadixSort<unsigned, EMB_BT, IPT>;
    using Scan = cub::BlockScan<int, EMB_BT>;
    __shared__ union {
        typename Sort::TempStorage sort;
        struct {
            unsigned key[L];
            int start[L + 1];
        } s;
    } u;
    __shared__ typename Scan::TempStorage scan;
    __shared__ int s_nv;
    extern __shared__ unsigned s_bits[];
    sx_griddep_launch(); /* K2 may be scheduled now; it waits for this grid to finish */
    if ((int)blockIdx.x >= e.G) {
        emb_stream_part<VEC>(blockIdx.x - e.G, gridDim.x - e.G, dwpe, gt, dout, B, T, C, l2, pf_bytes_k);
        return;
    }
    const int tid = threadIdx.x, t = blockIdx.x, base = t * L;
    const int W = (V + 31) / 32;
    for (int i = tid; i < W; i += EMB_BT) s_bits[i] = 0u;
    if (tid == 0) s_nv = 0;
    const unsigned lmask = (1u << e.lbits) - 1u;
    unsigned key[IPT];
#pragma unroll
    for (int i = 0; i < IPT; i++) {
        const int local = tid * IPT + i, n = base + local;
        unsigned k = (unsigned)V + 1u; /* past the end of the batch */
        if (n < N) {
            const int id = __ldg(ids + n);
            k = (id >= 0 && id < V) ? (unsigned)id : (unsigned)V; /* V: a bad id, skipped */
        }
        key[i] = (k << e.lbits) | (unsigned)local;
    }
    Sort(u.sort).Sort(key, e.lbits, e.lbits + e.kbits);
    __syncthreads();
#pragma unroll
    for (int i = 0; i < IPT; i++) u.s.key[tid * IPT + i] = key[i];
    __syncthreads();
    /* runs of equal valid ids */
    int heads = 0;
#pragma unroll
    for (int i = 0; i < IPT; i++) {
        const int p = tid * IPT + i;
        const unsigned id = key[i] >> e.lbits;
        const unsigned prev = p ? (u.s.key[p - 1] >> e.lbits) : 0xffffffffu;
        if (id < (unsigned)V && id != prev) heads++;
        if (id < (unsigned)V && (p == L - 1 || (u.s.key[p + 1] >> e.lbits) >= (unsigned)V)) s_nv = p + 1;
    }
    int rb, R;
    Scan(scan).ExclusiveSum(heads, rb, R);
#pragma unroll
    for (int i = 0; i < IPT; i++) {
        const int p = tid * IPT + i;
        const unsigned id = key[i] >> e.lbits;
        const unsigned prev = p ? (u.s.key[p - 1] >> e.lbits) : 0xffffffffu;
        if (id < (unsigned)V && id != prev) {
            u.s.start[rb++] = p;
            atomicOr(&s_bits[id >> 5], 1u << (id & 31));
        }
    }
    __syncthreads();
    const int nv = s_nv;
    if (tid == 0) u.s.start[R] = nv;
#pragma unroll
    for (int i = 0; i < IPT; i++) {
        const int p = tid * IPT + i;
        if (p < nv) e.pos[(size_t)t * L + p] = base + (int)(key[i] & lmask);
    }
    __syncthreads();
    /* work items: ceil(len / 32) per run, numbered in run order */
    int nl[IPT], mine = 0;
#pragma unroll
    for (int i = 0; i < IPT; i++) {
        const int r = tid * IPT + i;
        nl[i] = r < R ? (u.s.start[r + 1] - u.s.start[r] + EMB_S - 1) / EMB_S : 0;
        mine += nl[i];
    }
    int ib, I;
    Scan(scan).ExclusiveSum(mine, ib, I);
#pragma unroll
    for (int i = 0; i < IPT; i++) {
        const int r = tid * IPT + i;
        if (r < R) {
            const int st = u.s.start[r], len = u.s.start[r + 1] - st;
            const unsigned id = u.s.key[st] >> e.lbits;
            e.run[(size_t)t * L + r] = make_int4(st, len, ib, (int)id);
            for (int q = 0; q < nl[i]; q++) {
                e.items[(size_t)t * e.IL + ib + q] = make_int4(q, st, len, (int)id);
                e.counter[(size_t)t * e.IL + ib + q] = 0;
            }
            ib += nl[i];
        }
    }
    if (tid == 0) {
        e.nitems[t] = I;
        if (t == 0) e.nitems[EMB_MAXG] = 0; /* partial-slot allocator */
    }
    /* bitmap of the ids present, and the number of runs before each word: each thread counts
     * an odd-length chunk of words (no bank conflicts), the block scans, the prefixes go to
     * shared memory and both arrays are written coalesced */
    unsigned *s_pre = s_bits + W;
    const int wpt = ((W + EMB_BT - 1) / EMB_BT) | 1, w0 = tid * wpt;
    int cnt = 0;
    for (int w = w0; w < w0 + wpt && w < W; w++) cnt += __popc(s_bits[w]);
    __syncthreads(); /* scan storage reuse */
    int pb, tot;
    Scan(scan).ExclusiveSum(cnt, pb, tot);
    for (int w = w0; w < w0 + wpt && w < W; w++) {
        s_pre[w] = (unsigned)pb;
        pb += __popc(s_bits[w]);
    }
    __syncthreads();
    for (int w = tid; w < W; w += EMB_BT) {
        e.bits[(size_t)t * e.Wp + w] = s_bits[w];
        e.pre[(size_t)t * e.Wp + w] = (unsigned short)s_pre[w];
    }
}

/* one warp per work item (see above) */
template <bool VEC, int KP, int U>
__global__ void __launch_bounds__(256, KP * U <= 4 ? 4 : 2)
emb_item_kernel(Emb2 e, void *dwte, sx_dtype gt, const bf16 *__restrict__ dout, int C, int l2) {
    constexpr int P = VEC ? 8 : 1;
    constexpr int CW = SX_WARP * KP * P; /* channels per pass */
    sx_griddep_wait();
    const int lane = threadIdx.x % SX_WARP;
    const int gw = blockIdx.x * (blockDim.x / SX_WARP) + threadIdx.x / SX_WARP;
    const int t = gw / e.IL, q = gw % e.IL;
    if (t >= e.G) return;
    const int ni = __ldg(e.nitems + t);
    const int4 it4 = __ldg(e.items + (size_t)t * e.IL + q); /* loaded with ni: a slot past ni holds garbage */
    if (q >= ni) return;
    const int kl = it4.x, v = it4.w;
    /* the id's run in every tile (lane j <-> tile j) */
    int sj = 0, lj = 0, fj = 0;
    if (lane < e.G) {
        if (lane == t) {
            sj = it4.y; lj = it4.z; fj = q - kl;
        } else {
            const size_t wo = (size_t)lane * e.Wp + (v >> 5);
            const unsigned word = __ldg(e.bits + wo);
            const int pr = __ldg(e.pre + wo);
            if ((word >> (v & 31)) & 1u) {
                const int rj = pr + __popc(word & ((1u << (v & 31)) - 1u));
                const int4 o = __ldg(e.run + (size_t)lane * e.L + rj);
                sj = o.x; lj = o.y; fj = o.z;
            }
        }
    }
    const int nl = (lj + EMB_S - 1) / EMB_S;
    int il = lj, in = nl; /* inclusive scans over the tiles */
#pragma unroll
    for (int o = 1; o < SX_WARP; o <<= 1) {
        const int a = __shfl_up_sync(0xffffffffu, il, o), b = __shfl_up_sync(0xffffffffu, in, o);
        if (lane >= o) { il += a; in += b; }
    }
    const int n_v = __shfl_sync(0xffffffffu, il, SX_WARP - 1);
    const int xl = il - lj, xn = in - nl; /* tokens / items of this id in earlier tiles */
    const int nseg = (n_v + EMB_S - 1) / EMB_S;
    const int rank = __shfl_sync(0xffffffffu, xn, t) + kl;
    if (rank >= nseg) return; /* a surplus item: the id's segments are taken by earlier items */
    const unsigned present = __ballot_sync(0xffffffffu, lj > 0);
    const int c0 = rank * EMB_S, cnt = min(EMB_S, n_v - c0);
    /* position of canonical token c0 + lane */
    int pidx = -1;
    {
        const int c = c0 + lane;
        for (unsigned m = present; m; m &= m - 1) {
            const int jj = __ffs(m) - 1;
            const int x = __shfl_sync(0xffffffffu, xl, jj), l = __shfl_sync(0xffffffffu, lj, jj),
                      st = __shfl_sync(0xffffffffu, sj, jj);
            if (lane < cnt && c >= x && c < x + l) pidx = jj * e.L + st + (c - x);
        }
    }
    const int mypos = pidx >= 0 ? __ldg(e.pos + pidx) : 0;
    const bool direct = nseg == 1;
    const uint64_t pol = sx_policy_evict_first();
    const bool hd = VEC && (l2 & 2), hw = VEC && (l2 & 4);
    int slot = 0;
    if (!direct) {
        if (lane == 0) slot = atomicAdd(e.nitems + EMB_MAXG, 1);
        slot = __shfl_sync(0xffffffffu, slot, 0);
    }
    for (int cb = 0; cb < C; cb += CW) {
        float acc[KP][P];
        float gw_[KP][P];
#pragma unroll
        for (int k = 0; k < KP; k++)
#pragma unroll
            for (int x = 0; x < P; x++) acc[k][x] = gw_[k][x] = 0.0f;
        int col[KP];
#pragma unroll
        for (int k = 0; k < KP; k++) col[k] = cb + (k * SX_WARP + lane) * P;
        if (direct) { /* the dwte row segment, loaded before the dout rows */
#pragma unroll
            for (int k = 0; k < KP; k++)
                if (col[k] < C) {
                    const size_t gi = (size_t)v * C + col[k];
                    if constexpr (VEC) {
                        if (gt == SX_F32) {
                            const float *g = (const float *)dwte + gi;
                            int4 a = hw ? sx_ld_hint(g, pol) : *reinterpret_cast<const int4 *>(g);
                            int4 b = hw ? sx_ld_hint(g + 4, pol) : *reinterpret_cast<const int4 *>(g + 4);
                            gw_[k][0] = __int_as_float(a.x); gw_[k][1] = __int_as_float(a.y);
                            gw_[k][2] = __int_as_float(a.z); gw_[k][3] = __int_as_float(a.w);
                            gw_[k][4] = __int_as_float(b.x); gw_[k][5] = __int_as_float(b.y);
                            gw_[k][6] = __int_as_float(b.z); gw_[k][7] = __int_as_float(b.w);
                        } else {
                            Pack<bf16> o;
                            o.bits = hw ? sx_ld_hint((const bf16 *)dwte + gi, pol)
                                        : *reinterpret_cast<const int4 *>((const bf16 *)dwte + gi);
#pragma unroll
                            for (int x = 0; x < 8; x++) gw_[k][x] = o.get(x);
                        }
                    } else {
                        gw_[k][0] = gt == SX_F32 ? ((const float *)dwte)[gi] : __bfloat162float(((const bf16 *)dwte)[gi]);
                    }
                }
        }
        for (int b0 = 0; b0 < cnt; b0 += U) {
            Pack<bf16> rows[U][KP];
            float rs[U][KP];
#pragma unroll
            for (int u = 0; u < U; u++) {
                const int p = __shfl_sync(0xffffffffu, mypos, (b0 + u) & (SX_WARP - 1));
                if (b0 + u < cnt)
#pragma unroll
                    for (int k = 0; k < KP; k++)
                        if (col[k] < C) {
                            const bf16 *src = dout + (size_t)p * C + col[k];
                            if constexpr (VEC) rows[u][k].bits = hd ? sx_ld_nc_hint(src, pol) : __ldg(reinterpret_cast<const int4 *>(src));
                            else rs[u][k] = __bfloat162float(src[0]);
                        }
            }
#pragma unroll
            for (int u = 0; u < U; u++)
                if (b0 + u < cnt)
#pragma unroll
                    for (int k = 0; k < KP; k++)
                        if (col[k] < C) {
                            if constexpr (VEC) {
#pragma unroll
                                for (int x = 0; x < P; x++) acc[k][x] += rows[u][k].get(x);
                            } else {
                                acc[k][0] += rs[u][k];
                            }
                        }
        }
#pragma unroll
        for (int k = 0; k < KP; k++)
            if (col[k] < C) {
                if (direct) {
                    const size_t gi = (size_t)v * C + col[k];
                    if constexpr (VEC) {
                        if (gt == SX_F32) {
                            float *g = (float *)dwte + gi;
                            int4 a, b;
                            a.x = __float_as_int(gw_[k][0] + acc[k][0]); a.y = __float_as_int(gw_[k][1] + acc[k][1]);
                            a.z = __float_as_int(gw_[k][2] + acc[k][2]); a.w = __float_as_int(gw_[k][3] + acc[k][3]);
                            b.x = __float_as_int(gw_[k][4] + acc[k][4]); b.y = __float_as_int(gw_[k][5] + acc[k][5]);
                            b.z = __float_as_int(gw_[k][6] + acc[k][6]); b.w = __float_as_int(gw_[k][7] + acc[k][7]);
                            if (hw) { sx_st_hint(g, a, pol); sx_st_hint(g + 4, b, pol); }
                            else { *reinterpret_cast<int4 *>(g) = a; *reinterpret_cast<int4 *>(g + 4) = b; }
                        } else {
                            Pack<bf16> o;
#pragma unroll
                            for (int x = 0; x < 8; x++) o.set(x, gw_[k][x] + acc[k][x]);
                            bf16 *g = (bf16 *)dwte + gi;
                            if (hw) sx_st_hint(g, o.bits, pol);
                            else *reinterpret_cast<int4 *>(g) = o.bits;
                        }
                    } else {
                        if (gt == SX_F32) ((float *)dwte)[gi] = gw_[k][0] + acc[k][0];
                        else ((bf16 *)dwte)[gi] = __float2bfloat16_rn(gw_[k][0] + acc[k][0]);
                    }
                } else {
                    float *dst = e.partial + (size_t)slot * C + col[k];
#pragma unroll
                    for (int x = 0; x < P; x += 4) {
                        if constexpr (VEC)
                            *reinterpret_cast<float4 *>(dst + x) = make_float4(acc[k][x], acc[k][x + 1], acc[k][x + 2], acc[k][x + 3]);
                        else
                            dst[0] = acc[k][0];
                    }
                }
            }
    }
    if (direct) return;
    /* segment sums: publish, and the last of the id's segments adds them in order */
    if (lane == 0) e.pslot[(size_t)t * e.IL + q] = slot;
    __threadfence();
    __syncwarp();
    const int j0 = __ffs(present) - 1;
    const int f0 = __shfl_sync(0xffffffffu, fj, j0);
    int old = 0;
    if (lane == 0) old = atomicAdd(e.counter + (size_t)j0 * e.IL + f0, 1);
    old = __shfl_sync(0xffffffffu, old, 0);
    if (old != nseg - 1) return;
    __threadfence();
    for (int cb = 0; cb < C; cb += CW) {
        float acc[KP][P];
#pragma unroll
        for (int k = 0; k < KP; k++)
#pragma unroll
            for (int x = 0; x < P; x++) acc[k][x] = 0.0f;
        for (int kb = 0; kb < nseg; kb += SX_WARP) {
            /* the worker item of segment kb + lane: tile jj with xn <= k < xn + nl */
            int sidx = 0;
            {
                const int k = kb + lane;
                for (unsigned m = present; m; m &= m - 1) {
                    const int jj = __ffs(m) - 1;
                    const int x = __shfl_sync(0xffffffffu, xn, jj), l = __shfl_sync(0xffffffffu, nl, jj),
                              f = __shfl_sync(0xffffffffu, fj, jj);
                    if (k < nseg && k >= x && k < x + l) sidx = jj * e.IL + f + (k - x);
                }
            }
            const int myslot = (kb + lane < nseg) ? __ldcg(e.pslot + sidx) : 0;
            const int ns = min(SX_WARP, nseg - kb);
            for (int s0 = 0; s0 < ns; s0++) {
                const int sl = __shfl_sync(0xffffffffu, myslot, s0);
#pragma unroll
                for (int k = 0; k < KP; k++) {
                    const int c = cb + (k * SX_WARP + lane) * P;
                    if (c < C) {
                        const float *src = e.partial + (size_t)sl * C + c;
#pragma unroll
                        for (int x = 0; x < P; x += 4) {
                            if constexpr (VEC) {
                                const float4 f = __ldcg(reinterpret_cast<const float4 *>(src + x));
                                acc[k][x] += f.x; acc[k][x + 1] += f.y; acc[k][x + 2] += f.z; acc[k][x + 3] += f.w;
                            } else {
                                acc[k][0] += __ldcg(src);
                            }
                        }
                    }
                }
            }
        }
#pragma unroll
        for (int k = 0; k < KP; k++) {
            const int c = cb + (k * SX_WARP + lane) * P;
            if (c < C) add_row<P>(dwte, gt, (size_t)v * C + c, acc[k]);
        }
    }
}

template <int IPT>
static cudaError_t emb2_launch_tiles(const Emb2 &e, bool vec, const int32_t *ids, int N, int V, void *dwpe,
                                     sx_dtype gt, const bf16 *dout, int B, int T, int C, int l2, int pf_k,
                                     int extra, cudaStream_t stream) {
    const size_t smem = (size_t)((V + 31) / 32) * 8; /* bitmap and prefix words */
    auto k = vec ? emb_tile_kernel<IPT, true> : emb_tile_kernel<IPT, false>;
    SX_CHECK(cudaFuncSetAttribute(k, cudaFuncAttributeMaxDynamicSharedMemorySize, (int)smem));
    k<<<e.G + extra, EMB_BT, smem, stream>>>(e, ids, N, V, dwpe, gt, dout, B, T, C, l2, pf_k);
    return cudaGetLastError();
}

static cudaError_t emb_backward_tiled(void *dwte, void *dwpe, sx_dtype gt, const bf16 *dout, const int32_t *ids,
                                      void *workspace, size_t workspace_bytes, int B, int T, int C, int V,
                                      cudaStream_t stream) {
    const int N = B * T;
    Emb2 e;
    SX_REQUIRE(workspace_bytes >= emb2_layout(&e, workspace, N, C, V));
    const bool vec = C % 8 == 0 && sx_aligned16(dout) && sx_aligned16(dwte) && (!dwpe || sx_aligned16(dwpe));
    const int l2 = g_emb_l2 >= 0 ? g_emb_l2 : 7;
    const bool pdl = g_emb_pdl != 0;
    /* K1's extra blocks: dwpe (one thread per 8 channels of a position), or the prefetch */
    int extra = 0, pf_k = 0;
    if (dwpe) {
        extra = (int)sx_blocks((size_t)T * C / (vec ? 8 : 1), EMB_BT);
        const int cap = sx_num_sms() * 4;
        if (extra > cap) extra = cap;
        if (extra < 1) extra = 1;
    } else if (vec && sx_cc_major() >= 9) {
        /* prefetch of dout into L2 (knob only): on an H200 it made the LLaMA-style size (34 MB
         * of dout, 60 MB of L2) 3-5% slower and the GPT-2 size (50 MB) 4-7% slower */
        pf_k = g_emb_pf > 0 ? g_emb_pf * 1024 : 0;
        if (pf_k > 0) extra = e.G;
    }
    cudaError_t err;
    switch (e.L) {
    case 256: err = emb2_launch_tiles<1>(e, vec, ids, N, V, dwpe, gt, dout, B, T, C, l2, pf_k, extra, stream); break;
    case 512: err = emb2_launch_tiles<2>(e, vec, ids, N, V, dwpe, gt, dout, B, T, C, l2, pf_k, extra, stream); break;
    case 1024: err = emb2_launch_tiles<4>(e, vec, ids, N, V, dwpe, gt, dout, B, T, C, l2, pf_k, extra, stream); break;
    case 2048: err = emb2_launch_tiles<8>(e, vec, ids, N, V, dwpe, gt, dout, B, T, C, l2, pf_k, extra, stream); break;
    default: err = emb2_launch_tiles<16>(e, vec, ids, N, V, dwpe, gt, dout, B, T, C, l2, pf_k, extra, stream); break;
    }
    SX_CHECK(err);
    if (g_emb_path == 3) SX_LAUNCHED(); /* benchmark only: the tile kernel alone (dwte untouched) */
    const unsigned grid = sx_blocks((size_t)e.G * e.IL, 8);
    int kp = g_emb_kp; /* 1: 1 pack per lane, 4 rows per batch; 2: 2 packs, 4 rows; 3: 1 pack, 8 rows */
    if (kp <= 0) kp = 2;
    if (vec) {
        if (kp == 2) SX_CHECK(sx_launch(pdl, emb_item_kernel<true, 2, 4>, dim3(grid), dim3(256), 0, stream, e, dwte, gt, dout, C, l2));
        else if (kp == 3) SX_CHECK(sx_launch(pdl, emb_item_kernel<true, 1, 8>, dim3(grid), dim3(256), 0, stream, e, dwte, gt, dout, C, l2));
        else SX_CHECK(sx_launch(pdl, emb_item_kernel<true, 1, 4>, dim3(grid), dim3(256), 0, stream, e, dwte, gt, dout, C, l2));
    } else {
        SX_CHECK(sx_launch(pdl, emb_item_kernel<false, 4, 8>, dim3(grid), dim3(256), 0, stream, e, dwte, gt, dout, C, l2));
    }
    SX_LAUNCHED();
}

/* ----------------------------------------------------- backward, grouped path
 * Two parts, so that the one that reads only the ids can run before dout exists (in training,
 * beside the forward pass: the ids are known when the step starts):
 *
 *  prepare (ids only): keys = id (V for an id out of range), a stable CUB radix sort of
 *     (key, position) pairs, so the tokens of one id are consecutive and in position order.
 *     The sorted tokens are then cut into windows of at most W: nominally every Wn tokens,
 *     but a cut that falls inside a run of equal ids no longer than W - Wn + 1 tokens moves
 *     back to the run's start, so only long runs are ever split between windows.  For each
 *     window it writes its keys and positions (padded to W), the keys just before and after
 *     it, and where a long run that crosses its edges begins and ends (binary searches); it
 *     also zeroes the arrival counters of those runs.
 *  apply: one block per (window, chunk of up to CC channels).  Warp 0 reads the window's
 *     record (one round of loads), cuts it into runs of equal ids, and issues one bulk copy
 *     (cp.async.bulk, completing on one mbarrier) per dout row chunk and per dwte row chunk
 *     of the runs that lie inside the window, all at once: no register holds data in flight,
 *     so a block has its W rows in flight however short its runs are.  Then the block sums
 *     each run's rows in token order from shared memory, adds the dwte row and stores it.  A
 *     long run that crosses an edge of the window stores its partial sum (fp32) instead; the
 *     last of the windows the run spans to arrive (an integer counter) adds the partials in
 *     window order into dwte.
 * Every dwte row is written by one block, and every sum has a fixed order, so the result is
 * bitwise reproducible.  Needs sm_90, C % 8 == 0 and 16-byte aligned pointers; otherwise
 * apply runs the sorted path's window kernels on the same grouping. */

#define EMB3_MAXW 32
#define EMB3_THREADS 256

static int g_emb3_w = 0, g_emb3_wn = 0, g_emb3_cc = 0, g_emb3_wpe = -1, g_emb3_minb = 0;
extern "C" void sx_embedding_apply_tune(int window_rows, int nominal_rows, int chunk_channels, int wpe_blocks_first,
                                        int min_blocks) {
    g_emb3_minb = min_blocks;
    g_emb3_w = window_rows;
    g_emb3_wn = nominal_rows;
    g_emb3_cc = chunk_channels;
    g_emb3_wpe = wpe_blocks_first;
}

struct Emb3Window {      /* what apply reads of one window besides its keys and positions */
    int head_wa, head_wb; /* first and last window of the run crossing the window's start (-1: none) */
    int tail_wb, n;       /* last window of the run crossing its end (-1: none); tokens in the window */
    unsigned before, after; /* the keys just before and after the window (~0u: none) */
    int pad[2];
};

struct EmbGroup {
    unsigned *keys_in, *keys; /* keys: sorted */
    int *pos_in, *pos;        /* pos: token positions in sorted order */
    unsigned *wkey;           /* [windows][W] the window's keys, ~0u past its end */
    int *wpos;                /* [windows][W] its token positions */
    Emb3Window *win;          /* [windows] */
    int *counter;             /* [windows][chunks] */
    void *cub_tmp;
    size_t cub_bytes;
    int N, W, Wn, windows, CC, chunks;
};

/* W: 16 rows, or 12 from C = 2048 up (H100, 2026-11-25, five sweeps of 300 runs: at C = 2048, N = 8192
 * 2.0% (bf16) and 1.5% (fp32) faster than 16, min and max apart; at C = 768, 16 is the fastest;
 * docs/validation/2026-11-25-h100-embedding-sweep) */
static void emb3_window_rows(int C, int *W, int *Wn) {
    int w = g_emb3_w > 0 ? g_emb3_w : C >= 2048 ? 12 : 16;
    if (w > EMB3_MAXW) w = EMB3_MAXW;
    int wn = g_emb3_wn > 0 ? g_emb3_wn : (3 * w + 3) / 4;
    if (wn > w) wn = w;
    if (2 * wn < w + 1) wn = (w + 2) / 2; /* a cut moves back by less than Wn: windows are never empty */
    *W = w;
    *Wn = wn;
}
static int emb3_chunk(int C) { /* channels per block: a multiple of 8 */
    int cc = g_emb3_cc > 0 ? g_emb3_cc : 1024;
    cc = (cc + 7) & ~7;
    return C <= cc ? C : cc;
}

static size_t emb3_layout(EmbGroup *g, void *base, int N, int C, int V) {
    size_t cub_bytes = 0;
    if (cub::DeviceRadixSort::SortPairs(nullptr, cub_bytes, (const unsigned *)nullptr, (unsigned *)nullptr,
                                        (const int *)nullptr, (int *)nullptr, N, 0, sx_key_bits(V)) != cudaSuccess)
        return 0;
    g->N = N;
    emb3_window_rows(C, &g->W, &g->Wn);
    g->windows = (N + g->Wn - 1) / g->Wn;
    g->CC = emb3_chunk(C);
    g->chunks = (C + g->CC - 1) / g->CC;
    const uintptr_t p = (uintptr_t)base;
    const size_t arr = align256((size_t)N * 4), warr = align256((size_t)g->windows * g->W * 4);
    size_t off = 0;
    g->keys_in = (unsigned *)(p + off); off += arr;
    g->keys = (unsigned *)(p + off); off += arr;
    g->pos_in = (int *)(p + off); off += arr;
    g->pos = (int *)(p + off); off += arr;
    g->wkey = (unsigned *)(p + off); off += warr;
    g->wpos = (int *)(p + off); off += warr;
    g->win = (Emb3Window *)(p + off); off += align256((size_t)g->windows * sizeof(Emb3Window));
    g->counter = (int *)(p + off); off += align256((size_t)g->windows * g->chunks * 4);
    g->cub_tmp = (void *)(p + off); off += align256(cub_bytes);
    g->cub_bytes = cub_bytes;
    return off;
}

/* the apply's scratch: two fp32 partial rows per window (the sorted path's windows of 32
 * need fewer) */
static size_t emb3_scratch_bytes(int N, int C) {
    int W, Wn;
    emb3_window_rows(C, &W, &Wn);
    const size_t windows = ((size_t)N + Wn - 1) / Wn;
    return align256(windows * 2 * (size_t)C * sizeof(float));
}

extern "C" size_t sx_embedding_grouping_bytes(int N, int C, int V) {
    if (N <= 0 || C <= 0 || V <= 0) return 0;
    EmbGroup g;
    return emb3_layout(&g, nullptr, N, C, V);
}
extern "C" size_t sx_embedding_apply_workspace_bytes(int N, int C) {
    if (N <= 0 || C <= 0) return 0;
    return emb3_scratch_bytes(N, C);
}

__device__ __forceinline__ int emb3_lower_bound(const unsigned *k, int lo, int hi, unsigned key) {
    while (lo < hi) {
        const int m = (lo + hi) >> 1;
        if (k[m] < key) lo = m + 1; else hi = m;
    }
    return lo;
}

/* where the cut nominally at b goes: back to the start of the run containing b when that run
 * has at most W - Wn + 1 tokens (bad ids, which are skipped, are never moved for) */
__device__ int emb3_cut(const EmbGroup &g, int b, unsigned V) {
    if (b <= 0) return 0;
    if (b >= g.N) return g.N;
    const unsigned k = g.keys[b];
    if (g.keys[b - 1] != k || k >= V) return b;
    const int lmax = g.W - g.Wn + 1;
    const int a = emb3_lower_bound(g.keys, max(0, b - lmax), b, k);
    if (b - a >= lmax) return b;
    const int e = emb3_lower_bound(g.keys, b, min(g.N, a + lmax + 1), k + 1);
    return e - a <= lmax ? a : b;
}
__device__ int emb3_window_of(const EmbGroup &g, int x, unsigned V) { /* cuts only move back: w0 or w0 + 1 */
    const int w0 = x / g.Wn;
    return x >= emb3_cut(g, (w0 + 1) * g.Wn, V) ? w0 + 1 : w0;
}

__global__ void emb3_windows_kernel(EmbGroup g, int V) {
    const int nc = g.windows * g.chunks;
    for (int i = blockIdx.x * blockDim.x + threadIdx.x; i < nc; i += gridDim.x * blockDim.x) g.counter[i] = 0;
    const int w = blockIdx.x * blockDim.x + threadIdx.x;
    if (w >= g.windows) return;
    const int s = emb3_cut(g, w * g.Wn, V), e = emb3_cut(g, (w + 1) * g.Wn, V);
    const unsigned ks = g.keys[s], kl = g.keys[e - 1];
    Emb3Window r;
    r.head_wa = r.head_wb = r.tail_wb = -1;
    r.n = e - s;
    r.before = s > 0 ? g.keys[s - 1] : 0xffffffffu;
    r.after = e < g.N ? g.keys[e] : 0xffffffffu;
    r.pad[0] = r.pad[1] = 0;
    const bool head = s > 0 && ks < (unsigned)V && r.before == ks;
    if (head) {
        r.head_wa = emb3_window_of(g, emb3_lower_bound(g.keys, 0, s, ks), V);
        r.head_wb = emb3_window_of(g, emb3_lower_bound(g.keys, s, g.N, ks + 1) - 1, V);
    }
    if (e < g.N && kl < (unsigned)V && r.after == kl && !(head && kl == ks))
        r.tail_wb = emb3_window_of(g, emb3_lower_bound(g.keys, e, g.N, kl + 1) - 1, V);
    g.win[w] = r;
    for (int i = 0; i < g.W; i++) {
        g.wkey[(size_t)w * g.W + i] = i < r.n ? g.keys[s + i] : 0xffffffffu;
        g.wpos[(size_t)w * g.W + i] = i < r.n ? g.pos[s + i] : 0;
    }
}

static cudaError_t emb3_prepare(const EmbGroup &g, const int32_t *ids, int N, int V, cudaStream_t stream) {
    const int threads = 256;
    emb_keys_kernel<<<sx_blocks(N, threads), threads, 0, stream>>>(g.keys_in, g.pos_in, ids, N, V);
    SX_CHECK(cudaGetLastError());
    size_t cub_bytes = g.cub_bytes;
    SX_CHECK(cub::DeviceRadixSort::SortPairs(g.cub_tmp, cub_bytes, g.keys_in, g.keys, g.pos_in, g.pos, N, 0,
                                             sx_key_bits(V), stream));
    const size_t work = (size_t)g.windows * g.chunks > (size_t)g.windows ? (size_t)g.windows * g.chunks : g.windows;
    emb3_windows_kernel<<<sx_blocks(work, threads), threads, 0, stream>>>(g, V);
    SX_LAUNCHED();
}

enum { RUN_INNER = 0, RUN_HEAD = 1, RUN_TAIL = 2, RUN_SKIP = 3 };

/* fp32 partial row chunks of windows wa..wb (slot 1 of wa, slot 0 of the others), added in
 * window order into dwte; groups of threads take contiguous ranges of windows, and their
 * sums are added in group order, so the order is fixed by (wa, wb, chunk width). */
template <bool F32G>
__device__ void emb3_merge(void *dwte, const float *partial, float *s_sum, unsigned key, int wa, int wb, int C, int c0,
                           int np) {
    const int tid = threadIdx.x;
    const int span = wb - wa + 1;
    int ng = EMB3_THREADS / np;
    if (ng > span) ng = span;
    const int gi = tid / np, p = tid % np;
    if (gi < ng) {
        const int per = (span + ng - 1) / ng, w0 = wa + gi * per, w1 = min(w0 + per, wb + 1);
        float acc[8] = {0, 0, 0, 0, 0, 0, 0, 0};
        for (int ww = w0; ww < w1; ww++) {
            const float *src = partial + ((size_t)ww * 2 + (ww == wa ? 1 : 0)) * C + c0 + p * 8;
            const float4 a = __ldcg(reinterpret_cast<const float4 *>(src)), b = __ldcg(reinterpret_cast<const float4 *>(src + 4));
            acc[0] += a.x; acc[1] += a.y; acc[2] += a.z; acc[3] += a.w;
            acc[4] += b.x; acc[5] += b.y; acc[6] += b.z; acc[7] += b.w;
        }
#pragma unroll
        for (int k = 0; k < 8; k++) s_sum[(gi * np + p) * 8 + k] = acc[k];
    }
    __syncthreads();
    for (int q = tid; q < np; q += EMB3_THREADS) {
        float acc[8] = {0, 0, 0, 0, 0, 0, 0, 0};
        for (int j = 0; j < ng; j++)
#pragma unroll
            for (int k = 0; k < 8; k++) acc[k] += s_sum[(j * np + q) * 8 + k];
        add_row<8>(dwte, F32G ? SX_F32 : SX_BF16, (size_t)key * C + c0 + q * 8, acc);
    }
    __syncthreads();
}

template <bool F32G, int MINB>
__global__ void __launch_bounds__(EMB3_THREADS, MINB)
emb3_apply_kernel(EmbGroup g, void *dwte, float *partial, const bf16 *__restrict__ dout, int C, int V, void *dwpe,
                  int B, int T, int wpe_first, int nwpe) {
    constexpr int GS = F32G ? 4 : 2;
    extern __shared__ __align__(128) unsigned char smem[];
    __shared__ uint64_t mbar;
    __shared__ int s_start[EMB3_MAXW + 1], s_kind[EMB3_MAXW], s_R, s_merge[2];
    __shared__ unsigned s_key[EMB3_MAXW + 2];
    __shared__ int4 s_win;
    const int ngather = g.windows * g.chunks;
    int bid = blockIdx.x;
    if (nwpe > 0) { /* dwpe blocks, before or after the gather blocks */
        const int wb = wpe_first ? bid : bid - ngather;
        if (wb >= 0 && wb < nwpe) {
            emb_stream_part<true>(wb, nwpe, dwpe, F32G ? SX_F32 : SX_BF16, dout, B, T, C, 1, 0);
            return;
        }
        if (wpe_first) bid -= nwpe;
    }
    const int w = bid / g.chunks, ch = bid % g.chunks;
    const int c0 = ch * g.CC, cw = min(g.CC, C - c0), np = cw / 8;
    bf16 *s_rows = reinterpret_cast<bf16 *>(smem);                                   /* [W][cw] */
    unsigned char *s_g = smem + (size_t)g.W * cw * 2;                                /* [W][cw] of dwte */
    const int tid = threadIdx.x, lane = tid % SX_WARP;
    if (tid < SX_WARP) {
        const unsigned key = lane < g.W ? g.wkey[(size_t)w * g.W + lane] : 0xffffffffu;
        const int pos = lane < g.W ? g.wpos[(size_t)w * g.W + lane] : 0;
        const Emb3Window wi = g.win[w];
        const int n = wi.n;
        const unsigned prev_key = __shfl_up_sync(0xffffffffu, key, 1);
        if (lane == 0) {
            s_key[0] = wi.before;
            s_key[n + 1] = wi.after;
            s_win = make_int4(wi.head_wa, wi.head_wb, wi.tail_wb, n);
        }
        if (lane < n) s_key[lane + 1] = key;
        const unsigned heads = __ballot_sync(0xffffffffu, lane < n && (lane == 0 || key != prev_key));
        const int R = __popc(heads);
        __syncwarp();
        int kind = RUN_SKIP, r = -1;
        if ((heads >> lane) & 1u) {
            r = __popc(heads & ((1u << lane) - 1u));
            const unsigned rest = heads & ~((2u << lane) - 1u); /* heads after this lane */
            const int end = rest ? __ffs(rest) - 1 : n;
            const bool from_prev = lane == 0 && wi.before == key;
            const bool to_next = end == n && wi.after == key;
            kind = key >= (unsigned)V ? RUN_SKIP : from_prev ? RUN_HEAD : to_next ? RUN_TAIL : RUN_INNER;
            s_start[r] = lane;
            s_kind[r] = kind;
        }
        if (lane == 0) { s_start[R] = n; s_R = R; }
        const unsigned inner = __ballot_sync(0xffffffffu, kind == RUN_INNER);
        if (lane == 0) {
            mb_init(&mbar, 1);
            mb_fence_init();
        }
        __syncwarp();
        if (lane == 0) mb_expect(&mbar, (unsigned)(n * cw * 2 + __popc(inner) * cw * GS));
        __syncwarp();
        if (lane < n) bulk_load(s_rows + (size_t)lane * cw, dout + (size_t)pos * C + c0, (unsigned)cw * 2, &mbar);
        if (kind == RUN_INNER)
            bulk_load(s_g + (size_t)r * cw * GS, (const unsigned char *)dwte + ((size_t)key * C + c0) * GS,
                      (unsigned)cw * GS, &mbar);
    }
    __syncthreads();
    mb_wait(&mbar, 0);
    const int R = s_R, n = s_win.w;
    bool crossing = false;
    for (int u = tid; u < R * np; u += EMB3_THREADS) {
        const int r = u / np, p = u % np, kind = s_kind[r];
        if (kind == RUN_SKIP) continue;
        float acc[8] = {0, 0, 0, 0, 0, 0, 0, 0};
        for (int i = s_start[r]; i < s_start[r + 1]; i++) {
            const Pack<bf16> d = *reinterpret_cast<const Pack<bf16> *>(s_rows + (size_t)i * cw + p * 8);
#pragma unroll
            for (int k = 0; k < 8; k++) acc[k] += d.get(k);
        }
        if (kind == RUN_INNER) {
            const size_t gi = (size_t)s_key[s_start[r] + 1] * C + c0 + p * 8;
            if constexpr (F32G) {
                const float4 *q = reinterpret_cast<const float4 *>(s_g + ((size_t)r * cw + p * 8) * 4);
                float4 a = q[0], b = q[1];
                a.x += acc[0]; a.y += acc[1]; a.z += acc[2]; a.w += acc[3];
                b.x += acc[4]; b.y += acc[5]; b.z += acc[6]; b.w += acc[7];
                float4 *o = reinterpret_cast<float4 *>((float *)dwte + gi);
                o[0] = a; o[1] = b;
            } else {
                Pack<bf16> o = *reinterpret_cast<const Pack<bf16> *>(s_g + ((size_t)r * cw + p * 8) * 2);
#pragma unroll
                for (int k = 0; k < 8; k++) o.set(k, o.get(k) + acc[k]);
                st_pack((bf16 *)dwte + gi, o);
            }
        } else {
            float *dst = partial + ((size_t)w * 2 + (kind == RUN_HEAD ? 0 : 1)) * C + c0 + p * 8;
            reinterpret_cast<float4 *>(dst)[0] = make_float4(acc[0], acc[1], acc[2], acc[3]);
            reinterpret_cast<float4 *>(dst)[1] = make_float4(acc[4], acc[5], acc[6], acc[7]);
            crossing = true;
        }
    }
    /* runs crossing the window's edges: the last window to arrive adds the partials */
    const bool has_head = R > 0 && s_kind[0] == RUN_HEAD, has_tail = R > 0 && s_kind[R - 1] == RUN_TAIL;
    if (!has_head && !has_tail) return;
    if (crossing) __threadfence();
    __syncthreads();
    if (tid == 0) {
        const int4 wi = s_win;
        s_merge[0] = s_merge[1] = 0;
        if (has_head) {
            const int old = atomicAdd(g.counter + (size_t)wi.x * g.chunks + ch, 1);
            s_merge[0] = old == wi.y - wi.x;
        }
        if (has_tail) {
            const int old = atomicAdd(g.counter + (size_t)w * g.chunks + ch, 1);
            s_merge[1] = old == wi.z - w;
        }
    }
    __syncthreads();
    float *s_sum = reinterpret_cast<float *>(smem); /* the rows are summed: reuse */
    for (int k = 0; k < 2; k++) {
        if (!s_merge[k]) continue;
        __threadfence();
        const int wa = k == 0 ? s_win.x : w, wb = k == 0 ? s_win.y : s_win.z;
        const unsigned key = k == 0 ? s_key[1] : s_key[n];
        emb3_merge<F32G>(dwte, partial, s_sum, key, wa, wb, C, c0, np);
        if (tid == 0) g.counter[(size_t)wa * g.chunks + ch] = 0; /* ready for the next apply */
    }
}

static cudaError_t emb3_apply(const EmbGroup &g, void *dwte, void *dwpe, sx_dtype gt, const bf16 *dout,
                              float *partial, int B, int T, int C, int V, cudaStream_t stream) {
    const int GS = gt == SX_F32 ? 4 : 2;
    const size_t stage = (size_t)g.W * g.CC * (2 + GS);
    const size_t merge_bytes = (size_t)EMB3_THREADS * 8 * 4; /* s_sum: at most 256 groups x packs of 8 fp32 */
    int nwpe = 0;
    if (dwpe) {
        nwpe = (int)sx_blocks((size_t)T * C / 8, EMB3_THREADS);
        const int cap = sx_num_sms() * 2;
        if (nwpe > cap) nwpe = cap;
    }
    const int wpe_first = g_emb3_wpe >= 0 ? g_emb3_wpe : 1;
    const int ngather = g.windows * g.chunks;
    size_t smem = stage;
    if (smem < merge_bytes) smem = merge_bytes;
    /* minb 6: at most 40 registers, so 6 blocks fit an SM where shared memory allows; else 4 */
    auto k = g_emb3_minb == 6 ? (gt == SX_F32 ? emb3_apply_kernel<true, 6> : emb3_apply_kernel<false, 6>)
                              : (gt == SX_F32 ? emb3_apply_kernel<true, 4> : emb3_apply_kernel<false, 4>);
    SX_CHECK(cudaFuncSetAttribute(k, cudaFuncAttributeMaxDynamicSharedMemorySize, (int)smem));
    k<<<(unsigned)ngather + nwpe, EMB3_THREADS, smem, stream>>>(g, dwte, partial, dout, C, V, dwpe, B, T, wpe_first, nwpe);
    SX_LAUNCHED();
}

extern "C" cudaError_t sx_embedding_backward_prepare(void *grouping, size_t grouping_bytes, const int32_t *ids, int N,
                                                     int C, int V, cudaStream_t stream) {
    SX_REQUIRE(N >= 0 && C >= 0 && V > 0);
    if (N == 0 || C == 0) return cudaSuccess;
    SX_REQUIRE(grouping && ids);
    EmbGroup g;
    const size_t need = emb3_layout(&g, grouping, N, C, V);
    SX_REQUIRE(need > 0 && grouping_bytes >= need);
    return emb3_prepare(g, ids, N, V, stream);
}

extern "C" cudaError_t sx_embedding_backward_apply(void *dwte, void *dwpe, sx_dtype grad_type, const sx_bf16 *dout,
                                                   void *grouping, size_t grouping_bytes, void *workspace,
                                                   size_t workspace_bytes, int B, int T, int C, int V,
                                                   cudaStream_t stream) {
    SX_REQUIRE(B >= 0 && T >= 0 && C >= 0 && V > 0);
    SX_REQUIRE(grad_type == SX_F32 || grad_type == SX_BF16);
    const int N = B * T;
    if (N == 0 || C == 0) return cudaSuccess;
    SX_REQUIRE(dwte && dout && grouping && workspace);
    EmbGroup g;
    const size_t need = emb3_layout(&g, grouping, N, C, V);
    SX_REQUIRE(need > 0 && grouping_bytes >= need && workspace_bytes >= emb3_scratch_bytes(N, C));
    const bool bulk = sx_cc_major() >= 9 && C % 8 == 0 && sx_aligned16(dout) && sx_aligned16(dwte) &&
                      (!dwpe || sx_aligned16(dwpe));
    if (bulk)
        return emb3_apply(g, dwte, dwpe, grad_type, (const bf16 *)dout, (float *)workspace, B, T, C, V, stream);
    /* elsewhere, the sorted path's windows of 32 on the grouping's sorted tokens */
    return emb_windows_launch(dwte, dwpe, grad_type, (const bf16 *)dout, g.keys, g.pos, (float *)workspace, B, T, C, V,
                              stream);
}

extern "C" cudaError_t sx_embedding_backward(void *dwte, void *dwpe, sx_dtype grad_type, const sx_bf16 *dout,
                                             const int32_t *ids, void *workspace, size_t workspace_bytes, int B,
                                             int T, int C, int V, cudaStream_t stream) {
    SX_REQUIRE(B >= 0 && T >= 0 && C >= 0 && V > 0);
    SX_REQUIRE(grad_type == SX_F32 || grad_type == SX_BF16);
    const int N = B * T;
    if (N == 0 || C == 0) return cudaSuccess;
    SX_REQUIRE(dout && ids && dwte && workspace);
    if (g_emb_path == 6) { /* the grouped path: grouping, then the apply's scratch, both in the workspace */
        const size_t gb = align256(sx_embedding_grouping_bytes(N, C, V));
        SX_REQUIRE(gb > 0 && workspace_bytes >= gb + emb3_scratch_bytes(N, C));
        SX_CHECK(sx_embedding_backward_prepare(workspace, gb, ids, N, C, V, stream));
        return sx_embedding_backward_apply(dwte, dwpe, grad_type, dout, workspace, gb, (char *)workspace + gb,
                                           workspace_bytes - gb, B, T, C, V, stream);
    }
    if (g_emb_path != 1 && emb2_applies(N, V))
        return emb_backward_tiled(dwte, dwpe, grad_type, (const bf16 *)dout, ids, workspace, workspace_bytes, B, T,
                                  C, V, stream);
    return emb_backward_sorted(dwte, dwpe, grad_type, dout, ids, workspace, workspace_bytes, B, T, C, V, stream);
}
