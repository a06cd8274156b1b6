/* Token + position embedding, forward and deterministic backward. */
#include <cub/block/block_radix_sort.cuh>
#include <cub/block/block_scan.cuh>
#include <cub/device/device_radix_sort.cuh>
#include "embedding_internal.cuh"

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


struct EmbWs {
    unsigned *keys_in, *keys_out;
    int *vals_in, *vals_out;
    float *part; /* [windows][2][C] */
    void *cub_tmp;
    size_t cub_bytes, total;
};


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
    wpe_sum_unit<VEC>(dwpe, gt, dout, B, T, C, idx, false, 0);
}

/* dwpe (when wanted), then dwte from tokens sorted by key (keys, pos: N of them) in windows of
 * EMB_WIN summed by warps and an ordered merge; part: [ceil(N / EMB_WIN)][2][C] fp32 */
cudaError_t emb_windows_launch(void *dwte, void *dwpe, sx_dtype gt, const bf16 *dout, const unsigned *keys,
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
