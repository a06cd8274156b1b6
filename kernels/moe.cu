/* A mixture-of-experts layer's routing kernels (kernels.h, "mixture of experts"): the
 * top-k of the router's fp32 logits, the stable sort of the slots by expert, the
 * dispatch's row gather, the gates to the sorted rows and back, the experts' gate-weighted
 * SwiGLU and its backward, the combine.  Their float64 reference is
 * validator/moe_plan.c; tests/gpu/test_moe_kernels.cu checks one against the other.
 * The expert GEMMs are cuBLAS's (validator/moe.c). */
#include "common.cuh"

#define MOE_THREADS 256

/* One warp per token, lane l holding the logits of experts l, l + 32, ... (E <= SX_MOE_ROUTE_EXPERTS_MAX):
 * k rounds of a warp-wide arg-max over the experts not yet taken, ties to the lower index.  The rows are
 * read once, coalesced.  Until 2026-11-28 one thread took a token and read its row k times, neighbours E
 * floats apart, on N / 256 blocks: OLMoE's top-8 of 64 over 2048 tokens took 103 us on an H200, 11.5 us now
 * (dev/cuda/moe_router.cu, version 1 against 2; docs/validation/2026-11-28-moe-router-kernels). */
#define MOE_LANE_EXPERTS (SX_MOE_ROUTE_EXPERTS_MAX / SX_WARP)

/* (value, expert) of a against b: a real candidate beats none (expert E), then the larger value, then the lower
 * expert */
__device__ __forceinline__ bool moe_pick_better(float av, int ae, float bv, int be, int E) {
    return ae < E && (be >= E || av > bv || (av == bv && ae < be));
}

__global__ void moe_topk_kernel(int32_t *__restrict__ idx, float *__restrict__ gate, const float *__restrict__ logits,
                                int N, int E, int k) {
    const int lane = threadIdx.x % SX_WARP;
    const int n = (int)(((size_t)blockIdx.x * blockDim.x + threadIdx.x) / SX_WARP);
    if (n >= N) return;   /* the warp's lanes share n: a warp returns whole, before its shuffles */
    const float *z = logits + (size_t)n * E;
    float v[MOE_LANE_EXPERTS];
    unsigned taken = 0;
#pragma unroll
    for (int i = 0; i < MOE_LANE_EXPERTS; i++) v[i] = lane + SX_WARP * i < E ? z[lane + SX_WARP * i] : 0.0f;
    int pick_e = E;
    float pick_v = 0.0f;
    for (int j = 0; j < k; j++) {
        float bv = 0.0f;
        int be = E;
#pragma unroll
        for (int i = 0; i < MOE_LANE_EXPERTS; i++) {
            const int e = lane + SX_WARP * i;
            if (e < E && !(taken >> i & 1u) && moe_pick_better(v[i], e, bv, be, E)) { bv = v[i]; be = e; }
        }
#pragma unroll
        for (int o = 16; o > 0; o >>= 1) {
            const float ov = __shfl_xor_sync(0xffffffffu, bv, o);
            const int oe = __shfl_xor_sync(0xffffffffu, be, o);
            if (moe_pick_better(ov, oe, bv, be, E)) { bv = ov; be = oe; }
        }
        if (be % SX_WARP == lane) taken |= 1u << (be / SX_WARP);
        if (lane == j) { pick_e = be; pick_v = bv; }
    }
    /* the softmax over the k picks, lane j holding pick j; the largest is pick 0 */
    const float top = __shfl_sync(0xffffffffu, pick_v, 0);
    const float p = lane < k ? expf(pick_v - top) : 0.0f;
    const float sum = warp_sum(p);
    if (lane < k) {
        idx[(size_t)n * k + lane] = pick_e;
        gate[(size_t)n * k + lane] = p / sum;
    }
}

extern "C" cudaError_t sx_moe_topk(int32_t *idx, float *gate, const float *logits, int N, int E, int k,
                                   cudaStream_t stream) {
    SX_REQUIRE(N >= 0 && E >= 1 && E <= SX_MOE_ROUTE_EXPERTS_MAX && k >= 1 && k <= E && k <= SX_MOE_TOPK_MAX);
    if (N == 0) return cudaSuccess;
    SX_REQUIRE(idx && gate && logits);
    moe_topk_kernel<<<sx_blocks((size_t)N * SX_WARP, MOE_THREADS), MOE_THREADS, 0, stream>>>(idx, gate, logits, N, E,
                                                                                               k);
    SX_LAUNCHED();
}

/* The stable sort of the slots by expert, in tiles of MOE_PERMUTE_TILE slots (E <= SX_MOE_ROUTE_EXPERTS_MAX and
 * at least E tiles' worth of slots: row_slot holds the tiles' counts meanwhile, as scratch):
 *   1. each tile's count per expert (shared-memory atomics), into row_slot[tile E + e];
 *   2. one block: counts[e], and each tile's first row per expert, in place of its count;
 *   3. each tile numbers its slots in slot order: 256 at a time, a slot's rank among the same expert's in its warp
 *      (__match_any_sync), the warps before it and the rounds before (shared counts) -> pos;
 *   4. row_slot[pos[s]] = s, once pos is whole.
 * Until 2026-11-28 a block an expert scanned every slot twice: E blocks (under half an H200's SMs at 64 experts),
 * 79 us a call at OLMoE's 4096 tokens of top-8, 20 us now (dev/cuda/moe_permute.cu, version 1 against 2, one
 * H200); the step's moe_permute, this and the row gather, 4.03 -> 2.41 ms a step where the planner prices 2.19
 * (docs/validation/2026-11-28-moe-permute).  That kernel stays for the shapes the tiles cannot take. */
#define MOE_PERMUTE_TILE 1024

__global__ void __launch_bounds__(MOE_THREADS)
moe_permute_count_kernel(int32_t *__restrict__ tile_counts, const int32_t *__restrict__ idx, int slots, int E) {
    __shared__ int hist[SX_MOE_ROUTE_EXPERTS_MAX];
    for (int e = threadIdx.x; e < E; e += blockDim.x) hist[e] = 0;
    __syncthreads();
    const int first = blockIdx.x * MOE_PERMUTE_TILE;
    for (int s = first + threadIdx.x; s < first + MOE_PERMUTE_TILE && s < slots; s += blockDim.x) atomicAdd(&hist[idx[s]], 1);
    __syncthreads();
    for (int e = threadIdx.x; e < E; e += blockDim.x) tile_counts[(size_t)blockIdx.x * E + e] = hist[e];
}

/* one block of SX_MOE_ROUTE_EXPERTS_MAX threads, thread e for expert e */
__global__ void moe_permute_offsets_kernel(int32_t *__restrict__ counts, int32_t *__restrict__ tiles, int ntiles, int E) {
    __shared__ int total[SX_MOE_ROUTE_EXPERTS_MAX];
    const int e = threadIdx.x;
    int sum = 0;
    if (e < E)
        for (int t = 0; t < ntiles; t++) {
            const int c = tiles[(size_t)t * E + e];
            tiles[(size_t)t * E + e] = sum;   /* the expert's rows in the tiles before */
            sum += c;
        }
    total[e] = e < E ? sum : 0;
    __syncthreads();
    if (e >= E) return;
    counts[e] = sum;
    int start = 0;
    for (int f = 0; f < e; f++) start += total[f];
    for (int t = 0; t < ntiles; t++) tiles[(size_t)t * E + e] += start;
}

__global__ void __launch_bounds__(MOE_THREADS)
moe_permute_rank_kernel(int32_t *__restrict__ pos, const int32_t *__restrict__ tiles, const int32_t *__restrict__ idx,
                        int slots, int E) {
    __shared__ int next[SX_MOE_ROUTE_EXPERTS_MAX];                 /* the tile's next row per expert */
    __shared__ int warp_counts[MOE_THREADS / SX_WARP][SX_MOE_ROUTE_EXPERTS_MAX];
    const int lane = threadIdx.x % SX_WARP, warp = threadIdx.x / SX_WARP;
    for (int e = threadIdx.x; e < E; e += blockDim.x) next[e] = tiles[(size_t)blockIdx.x * E + e];
    const int first = blockIdx.x * MOE_PERMUTE_TILE;
    for (int round = 0; round < MOE_PERMUTE_TILE; round += MOE_THREADS) {
        for (int i = threadIdx.x; i < (MOE_THREADS / SX_WARP) * SX_MOE_ROUTE_EXPERTS_MAX; i += blockDim.x)
            (&warp_counts[0][0])[i] = 0;
        __syncthreads();
        const int s = first + round + threadIdx.x;
        const int e = s < slots ? idx[s] : -1;   /* the whole warp reaches the match, past the end too */
        const unsigned peers = __match_any_sync(0xffffffffu, e);
        if (e >= 0 && lane == __ffs(peers) - 1) warp_counts[warp][e] = __popc(peers);
        __syncthreads();
        if (e >= 0) {
            int before = 0;
            for (int w = 0; w < warp; w++) before += warp_counts[w][e];
            pos[s] = next[e] + before + __popc(peers & ((1u << lane) - 1u));
        }
        __syncthreads();
        for (int f = threadIdx.x; f < E; f += blockDim.x) {
            int round_count = 0;
            for (int w = 0; w < MOE_THREADS / SX_WARP; w++) round_count += warp_counts[w][f];
            next[f] += round_count;
        }
        __syncthreads();
    }
}

__global__ void moe_permute_scatter_kernel(int32_t *__restrict__ row_slot, const int32_t *__restrict__ pos, int slots) {
    const int s = blockIdx.x * blockDim.x + threadIdx.x;
    if (s < slots) row_slot[pos[s]] = s;
}

/* The first way, kept for what the tiles cannot take (more experts than the shared counts hold, or fewer slots
 * than the tiles' counts): one block per expert.  Pass 0 counts its slots; pass 1 (after every count is written)
 * numbers them in slot order from the expert's start, a block-wide prefix over tiles. */
template <int PASS>
__global__ void __launch_bounds__(MOE_THREADS)
moe_permute_kernel(int32_t *__restrict__ counts, int32_t *__restrict__ pos, int32_t *__restrict__ row_slot,
                   const int32_t *__restrict__ idx, int slots, int E) {
    const int e = blockIdx.x;
    __shared__ int warp_counts[MOE_THREADS / SX_WARP];
    __shared__ int base;
    const int lane = threadIdx.x % SX_WARP, warp = threadIdx.x / SX_WARP;
    if (threadIdx.x == 0) {
        int start = 0;
        if (PASS == 1)
            for (int f = 0; f < e; f++) start += counts[f];
        base = start;
    }
    __syncthreads();
    int total = 0;
    for (int t0 = 0; t0 < slots; t0 += MOE_THREADS) {
        const int s = t0 + threadIdx.x;
        const bool mine = s < slots && idx[s] == e;
        const unsigned ballot = __ballot_sync(0xffffffffu, mine);
        if (lane == 0) warp_counts[warp] = __popc(ballot);
        __syncthreads();
        int before = 0, tile = 0;
        for (int w = 0; w < MOE_THREADS / SX_WARP; w++) {
            if (w < warp) before += warp_counts[w];
            tile += warp_counts[w];
        }
        if (PASS == 1 && mine) {
            const int r = base + total + before + __popc(ballot & ((1u << lane) - 1u));
            pos[s] = r;
            row_slot[r] = s;
        }
        total += tile;
        __syncthreads();
    }
    if (PASS == 0 && threadIdx.x == 0) counts[e] = total;
}

extern "C" cudaError_t sx_moe_permute(int32_t *counts, int32_t *pos, int32_t *row_slot, const int32_t *idx, int N,
                                      int k, int E, cudaStream_t stream) {
    SX_REQUIRE(N >= 0 && k >= 1 && E >= 1);
    SX_REQUIRE(counts && (N == 0 || (pos && row_slot && idx)));
    const int slots = N * k;
    const int ntiles = (slots + MOE_PERMUTE_TILE - 1) / MOE_PERMUTE_TILE;
    if (slots > 0 && E <= SX_MOE_ROUTE_EXPERTS_MAX && (long)ntiles * E <= slots) {
        moe_permute_count_kernel<<<ntiles, MOE_THREADS, 0, stream>>>(row_slot, idx, slots, E);
        SX_CHECK(cudaGetLastError());
        moe_permute_offsets_kernel<<<1, SX_MOE_ROUTE_EXPERTS_MAX, 0, stream>>>(counts, row_slot, ntiles, E);
        SX_CHECK(cudaGetLastError());
        moe_permute_rank_kernel<<<ntiles, MOE_THREADS, 0, stream>>>(pos, row_slot, idx, slots, E);
        SX_CHECK(cudaGetLastError());
        moe_permute_scatter_kernel<<<sx_blocks((size_t)slots, MOE_THREADS), MOE_THREADS, 0, stream>>>(row_slot, pos, slots);
        SX_LAUNCHED();
    }
    moe_permute_kernel<0><<<E, MOE_THREADS, 0, stream>>>(counts, pos, row_slot, idx, slots, E);
    SX_CHECK(cudaGetLastError());
    if (slots == 0) return cudaSuccess;
    moe_permute_kernel<1><<<E, MOE_THREADS, 0, stream>>>(counts, pos, row_slot, idx, slots, E);
    SX_LAUNCHED();
}

/* 8 bf16 per thread (C % 8 == 0) */
__global__ void moe_gather_kernel(bf16 *__restrict__ xs, const bf16 *__restrict__ x, const int32_t *__restrict__ row_slot,
                                  int rows, int k, int C) {
    const size_t i = ((size_t)blockIdx.x * blockDim.x + threadIdx.x) * 8;
    if (i >= (size_t)rows * C) return;
    const size_t r = i / C, c = i % C;
    const int n = row_slot[r] / k;
    st_pack(xs + i, ld_pack(x + (size_t)n * C + c));
}

extern "C" cudaError_t sx_moe_gather(sx_bf16 *xs, const sx_bf16 *x, const int32_t *row_slot, int N, int k, int C,
                                     cudaStream_t stream) {
    SX_REQUIRE(N >= 0 && k >= 1 && C >= 0);
    const size_t n = (size_t)N * k * C;
    if (n == 0) return cudaSuccess;
    SX_REQUIRE(xs && x && row_slot && C % 8 == 0 && sx_aligned16(xs) && sx_aligned16(x));
    moe_gather_kernel<<<sx_blocks(n / 8, MOE_THREADS), MOE_THREADS, 0, stream>>>((bf16 *)xs, (const bf16 *)x, row_slot,
                                                                                N * k, k, C);
    SX_LAUNCHED();
}

/* Block row y copies chunk y, its blocks striding over the chunk's packs of 8 values.  Until 2026-11-28 the
 * chunks were laid end to end over one grid and each thread searched them in turn for its pack: up to 64
 * comparisons a 16-byte pack, which made the expert TP gather's sort of OLMoE's 128 chunks a call 2.9 times
 * its price as a copy (dev/cuda/moe_router.cu, version 1). */
#define MOE_CHUNK_BLOCKS_MAX 1024

__global__ void moe_copy_chunks_kernel(const sx_moe_chunks chunks, int C) {
    const int c = blockIdx.y;
    const size_t packs = (size_t)chunks.rows[c] * C / 8;
    const int4 *src = (const int4 *)chunks.src[c];
    int4 *dst = (int4 *)chunks.dst[c];
    for (size_t i = (size_t)blockIdx.x * blockDim.x + threadIdx.x; i < packs; i += (size_t)gridDim.x * blockDim.x)
        dst[i] = src[i];
}

extern "C" cudaError_t sx_moe_copy_chunks(const sx_moe_chunks *chunks, int C, cudaStream_t stream) {
    SX_REQUIRE(chunks && chunks->n >= 0 && chunks->n <= SX_MOE_CHUNKS_MAX && C >= 0 && C % 8 == 0);
    size_t most = 0;
    for (int c = 0; c < chunks->n; c++) {
        SX_REQUIRE(chunks->rows[c] >= 0);
        if (!chunks->rows[c]) continue;
        SX_REQUIRE(chunks->src[c] && chunks->dst[c] && sx_aligned16(chunks->src[c]) && sx_aligned16(chunks->dst[c]));
        if ((size_t)chunks->rows[c] * C > most) most = (size_t)chunks->rows[c] * C;
    }
    if (most == 0) return cudaSuccess;
    unsigned x = sx_blocks(most / 8, MOE_THREADS);
    if (x > MOE_CHUNK_BLOCKS_MAX) x = MOE_CHUNK_BLOCKS_MAX;
    moe_copy_chunks_kernel<<<dim3(x, (unsigned)chunks->n), MOE_THREADS, 0, stream>>>(*chunks, C);
    SX_LAUNCHED();
}

/* out[n, c..c+8) = sum_j gate ys[pos, c..c+8), fp32 sums */
__global__ void moe_combine_kernel(bf16 *__restrict__ out, const bf16 *__restrict__ ys, const int32_t *__restrict__ pos,
                                   const float *__restrict__ gate, int N, int k, int C) {
    const size_t i = ((size_t)blockIdx.x * blockDim.x + threadIdx.x) * 8;
    if (i >= (size_t)N * C) return;
    const size_t n = i / C, c = i % C;
    float acc[8] = {0, 0, 0, 0, 0, 0, 0, 0};
    for (int j = 0; j < k; j++) {
        const size_t s = n * k + j;
        const float g = gate ? gate[s] : 1.0f;
        const Pack<bf16> y = ld_pack_plain(ys + (size_t)pos[s] * C + c);
#pragma unroll
        for (int q = 0; q < 8; q++) acc[q] += g * y.get(q);
    }
    Pack<bf16> o;
#pragma unroll
    for (int q = 0; q < 8; q++) o.set(q, acc[q]);
    st_pack(out + i, o);
}

extern "C" cudaError_t sx_moe_combine(sx_bf16 *out, const sx_bf16 *ys, const int32_t *pos, const float *gate, int N,
                                      int k, int C, cudaStream_t stream) {
    SX_REQUIRE(N >= 0 && k >= 1 && C >= 0);
    const size_t n = (size_t)N * C;
    if (n == 0) return cudaSuccess;
    SX_REQUIRE(out && ys && pos && C % 8 == 0 && sx_aligned16(out) && sx_aligned16(ys));
    moe_combine_kernel<<<sx_blocks(n / 8, MOE_THREADS), MOE_THREADS, 0, stream>>>((bf16 *)out, (const bf16 *)ys, pos,
                                                                                 gate, N, k, C);
    SX_LAUNCHED();
}

/* one thread per row: a slot's gate to its sorted row, the row padded to SX_MOE_GATE_ROW floats */
__global__ void moe_row_gates_kernel(float4 *__restrict__ rows, const float *__restrict__ gate,
                                     const int32_t *__restrict__ row_slot, int S) {
    const int r = blockIdx.x * blockDim.x + threadIdx.x;
    if (r < S) rows[r] = make_float4(gate[row_slot[r]], 0.0f, 0.0f, 0.0f);
}

extern "C" cudaError_t sx_moe_row_gates(float *rows, const float *gate, const int32_t *row_slot, int S,
                                        cudaStream_t stream) {
    SX_REQUIRE(S >= 0);
    if (S == 0) return cudaSuccess;
    SX_REQUIRE(rows && gate && row_slot && sx_aligned16(rows));
    moe_row_gates_kernel<<<sx_blocks((size_t)S, MOE_THREADS), MOE_THREADS, 0, stream>>>((float4 *)rows, gate, row_slot, S);
    SX_LAUNCHED();
}

/* one thread per row: the row's gate gradient back to its slot */
__global__ void moe_slot_gates_kernel(float *__restrict__ dgate, const float *__restrict__ rows,
                                      const int32_t *__restrict__ row_slot, int S) {
    const int r = blockIdx.x * blockDim.x + threadIdx.x;
    if (r < S) dgate[row_slot[r]] = rows[(size_t)r * SX_MOE_GATE_ROW];
}

extern "C" cudaError_t sx_moe_slot_gates(float *dgate, const float *rows, const int32_t *row_slot, int S,
                                         cudaStream_t stream) {
    SX_REQUIRE(S >= 0);
    if (S == 0) return cudaSuccess;
    SX_REQUIRE(dgate && rows && row_slot);
    moe_slot_gates_kernel<<<sx_blocks((size_t)S, MOE_THREADS), MOE_THREADS, 0, stream>>>(dgate, rows, row_slot, S);
    SX_LAUNCHED();
}

/* out[r, f..f+8) = w_r silu(h[r, f]) h[r, F + f], one pack a thread (F % 8 == 0) */
__global__ void moe_swiglu_forward_kernel(bf16 *__restrict__ out, const bf16 *__restrict__ h,
                                          const float *__restrict__ weight, int R, int F) {
    const size_t i = ((size_t)blockIdx.x * blockDim.x + threadIdx.x) * 8;
    if (i >= (size_t)R * F) return;
    const size_t r = i / F, f = i % F;
    const bf16 *g = h + r * 2 * F + f;
    const Pack<bf16> gp = ld_pack_cs(g), up = ld_pack_cs(g + F);
    const float w = weight[r * SX_MOE_GATE_ROW];
    Pack<bf16> o;
#pragma unroll
    for (int q = 0; q < 8; q++) {
        const float z = gp.get(q);
        o.set(q, w * z * sigmoid_f(z) * up.get(q));
    }
    st_pack(out + i, o);
}

extern "C" cudaError_t sx_moe_swiglu_forward(sx_bf16 *out, const sx_bf16 *h, const float *weight, int R, int F,
                                             cudaStream_t stream) {
    SX_REQUIRE(R >= 0 && F >= 0);
    if (R == 0 || F == 0) return cudaSuccess;
    SX_REQUIRE(out && h && weight && F % 8 == 0 && sx_aligned16(out) && sx_aligned16(h));
    moe_swiglu_forward_kernel<<<sx_blocks((size_t)R * F / 8, MOE_THREADS), MOE_THREADS, 0, stream>>>(
        (bf16 *)out, (const bf16 *)h, weight, R, F);
    SX_LAUNCHED();
}

/* one warp per row (a row of OLMoE's 1024 is 4 packs a lane; a block per row left half its threads idle): the
 * SwiGLU's backward at w_r dout, and w_r's gradient a warp-wide dot product of dout with the unweighted activation */
#define MOE_ROWS_PER_BLOCK (MOE_THREADS / SX_WARP)
__global__ void __launch_bounds__(MOE_THREADS)
moe_swiglu_backward_kernel(bf16 *__restrict__ dh, float *__restrict__ dweight, const bf16 *__restrict__ dout,
                           const bf16 *__restrict__ h, const float *__restrict__ weight, int R, int F) {
    const size_t r = (size_t)blockIdx.x * MOE_ROWS_PER_BLOCK + threadIdx.x / SX_WARP;
    const int lane = threadIdx.x % SX_WARP;
    if (r >= (size_t)R) return;   /* the whole warp: no shuffle waits on it */
    const bf16 *g = h + r * 2 * F, *d = dout + r * F;
    bf16 *dg = dh + r * 2 * F;
    const float w = weight[r * SX_MOE_GATE_ROW];
    float dot = 0.0f;
    for (int f = lane * 8; f < F; f += SX_WARP * 8) {
        const Pack<bf16> gp = ld_pack_cs(g + f), up = ld_pack_cs(g + F + f), dp = ld_pack_cs(d + f);
        Pack<bf16> og, ou;
#pragma unroll
        for (int q = 0; q < 8; q++) {
            const float z = gp.get(q), s = sigmoid_f(z), u = up.get(q), dd = dp.get(q), wd = w * dd;
            dot += dd * z * s * u;
            og.set(q, wd * u * s * (1.0f + z * (1.0f - s)));
            ou.set(q, wd * z * s);
        }
        st_pack(dg + f, og);
        st_pack(dg + F + f, ou);
    }
    dot = warp_sum(dot);
    if (lane < SX_MOE_GATE_ROW) dweight[r * SX_MOE_GATE_ROW + lane] = lane == 0 ? dot : 0.0f;
}

extern "C" cudaError_t sx_moe_swiglu_backward(sx_bf16 *dh, float *dweight, const sx_bf16 *dout, const sx_bf16 *h,
                                              const float *weight, int R, int F, cudaStream_t stream) {
    SX_REQUIRE(R >= 0 && F >= 0);
    if (R == 0) return cudaSuccess;
    SX_REQUIRE(dh && dweight && dout && h && weight && F % 8 == 0);
    SX_REQUIRE(sx_aligned16(dh) && sx_aligned16(dout) && sx_aligned16(h));
    moe_swiglu_backward_kernel<<<sx_blocks((size_t)R, MOE_ROWS_PER_BLOCK), MOE_THREADS, 0, stream>>>(
        (bf16 *)dh, dweight, (const bf16 *)dout, (const bf16 *)h, weight, R, F);
    SX_LAUNCHED();
}

/* One warp per token, as the top-k: lane l holds experts l, l + 32, ...; the top-k softmax's backward, then the
 * auxiliary loss's through the softmax over all E, its max and sums warp-wide.  Rows read once and dlogits
 * written once, coalesced (until 2026-11-28 one thread a token, four strided passes over its row). */
__global__ void moe_router_backward_kernel(bf16 *__restrict__ dlogits, const float *__restrict__ logits,
                                           const int32_t *__restrict__ idx, const float *__restrict__ gate,
                                           const float *__restrict__ dgate, const int32_t *__restrict__ counts,
                                           float aux_scale, int N, int E, int k) {
    const int lane = threadIdx.x % SX_WARP;
    const int n = (int)(((size_t)blockIdx.x * blockDim.x + threadIdx.x) / SX_WARP);
    if (n >= N) return;
    const float *z = logits + (size_t)n * E;
    const int32_t *pick = idx + (size_t)n * k;
    const float *g = gate + (size_t)n * k, *dg = dgate + (size_t)n * k;
    float dot = 0.0f;
    for (int j = 0; j < k; j++) dot += g[j] * dg[j];
    float v[MOE_LANE_EXPERTS], top = -INFINITY;
#pragma unroll
    for (int i = 0; i < MOE_LANE_EXPERTS; i++) {
        const int e = lane + SX_WARP * i;
        v[i] = e < E ? z[e] : -INFINITY;
        top = fmaxf(top, v[i]);
    }
    const float share = aux_scale / ((float)N * (float)k);
    float sum = 1.0f, pg = 0.0f;
    if (aux_scale != 0.0f) {
        top = warp_max(top);
        float s = 0.0f, q = 0.0f;
#pragma unroll
        for (int i = 0; i < MOE_LANE_EXPERTS; i++) {
            const int e = lane + SX_WARP * i;
            if (e < E) {
                const float x = expf(v[i] - top);
                s += x;
                q += x * share * (float)counts[e];
            }
        }
        sum = warp_sum(s);
        pg = warp_sum(q) / sum;
    }
#pragma unroll
    for (int i = 0; i < MOE_LANE_EXPERTS; i++) {
        const int e = lane + SX_WARP * i;
        if (e >= E) break;
        float d = 0.0f;
        for (int j = 0; j < k; j++)
            if (pick[j] == e) d += g[j] * (dg[j] - dot);
        if (aux_scale != 0.0f) {
            const float p = expf(v[i] - top) / sum;
            d += p * (share * (float)counts[e] - pg);
        }
        dlogits[(size_t)n * E + e] = __float2bfloat16_rn(d);
    }
}

extern "C" cudaError_t sx_moe_router_backward(sx_bf16 *dlogits, const float *logits, const int32_t *idx,
                                              const float *gate, const float *dgate, const int32_t *counts,
                                              float aux_scale, int N, int E, int k, cudaStream_t stream) {
    SX_REQUIRE(N >= 0 && E >= 1 && E <= SX_MOE_ROUTE_EXPERTS_MAX && k >= 1 && k <= E);
    if (N == 0) return cudaSuccess;
    SX_REQUIRE(dlogits && logits && idx && gate && dgate && (counts || aux_scale == 0.0f));
    moe_router_backward_kernel<<<sx_blocks((size_t)N * SX_WARP, MOE_THREADS), MOE_THREADS, 0, stream>>>(
        (bf16 *)dlogits, logits, idx, gate, dgate, counts, aux_scale, N, E, k);
    SX_LAUNCHED();
}
