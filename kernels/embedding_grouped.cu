/* Token embedding, the grouped backward path (kernels.h: sx_embedding_backward_prepare, _apply; the
 * dispatch, the forward and the other two paths are kernels/embedding.cu's). */
#include <cub/block/block_radix_sort.cuh>
#include <cub/block/block_scan.cuh>
#include <cub/device/device_radix_sort.cuh>
#include "embedding_internal.cuh"

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
size_t emb3_scratch_bytes(int N, int C) {
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
