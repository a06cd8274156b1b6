/* A MoE layer's stable sort of the routed slots by expert (sx_moe_permute: counts, each slot's row, each row's
 * slot), in llm.c's dev/cuda manner: the float64 reference (validator/moe_plan.c, moe_ref_permute), the versions,
 * a check of each and a benchmark of each.
 *
 *   version 1: what kernels/moe.cu ran until 2026-11-28 (and still runs for shapes the tiles cannot take): a block
 *     an expert, each scanning every slot twice, once to count and once to number: E blocks, 64 of an H200's 132
 *     SMs at OLMoE's 64 experts.  In the step (OLMoE at 4096 tokens, top-8, one H200) moe_permute, this and the
 *     row gather, took 126 us a call where the planner prices the gather at memory speed, 68 us
 *     (docs/validation/2026-11-28-moe-host-issue).
 *   version 2: production's (sx_moe_permute through libkernels.a): tiles of 1024 slots; each tile's counts, one
 *     block's offsets, each tile numbering its slots (a warp's equal experts by __match_any_sync), a scatter.
 *
 *   moe_permute [version]   (0 or none: both)
 * Checks first (every output exact, the order stable; the reference takes up to 64 experts, as the validator),
 * then the benchmark: the median of 100 calls after an L2
 * flush (dev_util.h), against a copy of the bytes each must move (idx read, pos and row_slot written), at
 * OLMoE-1B-7B's routing (64 experts, top 8: one GPU's 4096 tokens, a TP 2 rank's 2048), Mixtral 8x7B's (8
 * experts, top 2, 4096 tokens) and 16384 tokens of top-8 over 64.  Build: make dev (dev/cuda/Makefile). */
#include <string.h>
#include "common.cuh"
#include "kernels.h"
#include "dev_util.h"
extern "C" {
#include "moe_plan.h"
}

#define MOE_THREADS 256

/* ------------------------------------------------------------------ version 1 */

template <int PASS>
__global__ void permute_v1(int32_t *__restrict__ counts, int32_t *__restrict__ pos, int32_t *__restrict__ row_slot,
                           const int32_t *__restrict__ idx, int slots) {
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

static void permute(int version, int32_t *counts, int32_t *pos, int32_t *row_slot, const int32_t *idx, int N, int k,
                    int E) {
    if (version == 2) {
        CK(sx_moe_permute(counts, pos, row_slot, idx, N, k, E, 0));
        return;
    }
    permute_v1<0><<<E, MOE_THREADS>>>(counts, pos, row_slot, idx, N * k);
    CK(cudaGetLastError());
    permute_v1<1><<<E, MOE_THREADS>>>(counts, pos, row_slot, idx, N * k);
    CK(cudaGetLastError());
}

/* ------------------------------------------------------------------ checks */

/* each token's k experts: drawn at random (moe_random_route), or, with `skew`, most tokens to the first few
 * experts and some experts none (an untrained router's kind of load) */
static std::vector<int> routes(int N, int E, int k, bool skew) {
    std::vector<int> idx((size_t)N * k);
    moe_random_route(rng_u64(), N, E, k, idx.data());
    if (skew)
        for (size_t s = 0; s < idx.size(); s++)
            if (rng_u64() % 4 != 0) idx[s] = idx[s] % (E > 3 ? 3 : E);
    return idx;
}

static void check(int version, int N, int E, int k, bool skew) {
    const size_t S = (size_t)N * k;
    std::vector<int> idx = routes(N, E, k, skew), counts(E), pos(S), row_slot(S);
    moe_ref_permute(idx.data(), N, k, E, counts.data(), pos.data(), row_slot.data());
    int32_t *d_idx = (int32_t *)dmalloc(4 * (S ? S : 1)), *d_counts = (int32_t *)dmalloc(4 * (size_t)E);
    int32_t *d_pos = (int32_t *)dmalloc(4 * (S ? S : 1)), *d_rows = (int32_t *)dmalloc(4 * (S ? S : 1));
    if (S) CK(cudaMemcpy(d_idx, idx.data(), 4 * S, cudaMemcpyHostToDevice));
    CK(cudaMemset(d_counts, 0xff, 4 * (size_t)E));
    permute(version, d_counts, d_pos, d_rows, d_idx, N, k, E);
    CK(cudaDeviceSynchronize());
    std::vector<int32_t> gc(E), gp(S), gr(S);
    CK(cudaMemcpy(gc.data(), d_counts, 4 * (size_t)E, cudaMemcpyDeviceToHost));
    if (S) CK(cudaMemcpy(gp.data(), d_pos, 4 * S, cudaMemcpyDeviceToHost));
    if (S) CK(cudaMemcpy(gr.data(), d_rows, 4 * S, cudaMemcpyDeviceToHost));
    bool same = true;
    for (int e = 0; e < E; e++) same &= gc[e] == counts[e];
    for (size_t s = 0; s < S; s++) same &= gp[s] == pos[s] && gr[s] == row_slot[s];
    char what[96];
    snprintf(what, sizeof what, "permute N %d E %d k %d%s (exact, stable)", N, E, k, skew ? " skewed" : "");
    dev_check_true(what, same);
    CK(cudaFree(d_idx)); CK(cudaFree(d_counts)); CK(cudaFree(d_pos)); CK(cudaFree(d_rows));
}

/* ------------------------------------------------------------------ benchmark */

static void bench(int version, const char *name, int N, int E, int k) {
    const size_t S = (size_t)N * k;
    std::vector<int> idx = routes(N, E, k, false);
    int32_t *d_idx = (int32_t *)dmalloc(4 * S), *d_counts = (int32_t *)dmalloc(4 * (size_t)E);
    int32_t *d_pos = (int32_t *)dmalloc(4 * S), *d_rows = (int32_t *)dmalloc(4 * S);
    CK(cudaMemcpy(d_idx, idx.data(), 4 * S, cudaMemcpyHostToDevice));
    const double bytes = 12.0 * S;
    char what[96];
    snprintf(what, sizeof what, "%s permute N %d E %d k %d", name, N, E, k);
    dev_report(version, what, bytes, dev_time_us([&] { permute(version, d_counts, d_pos, d_rows, d_idx, N, k, E); }),
               dev_copy_us(bytes));
    CK(cudaFree(d_idx)); CK(cudaFree(d_counts)); CK(cudaFree(d_pos)); CK(cudaFree(d_rows));
}

int main(int argc, char **argv) {
    const int only = argc > 1 ? atoi(argv[1]) : 0;
    if (only < 0 || only > 2) {
        fprintf(stderr, "moe_permute: version %s: expected 1 or 2 (0: both)\n", argv[1]);
        return 2;
    }
    g_rng = 20261128;
    setvbuf(stdout, NULL, _IOLBF, 0);   /* a line at a time: what ran before a crash is kept */
    for (int v = 1; v <= 2; v++) {
        if (only && v != only) continue;
        printf("version %d: checks\n", v);
        check(v, 0, 8, 2, false);
        check(v, 1, 8, 2, false);
        check(v, 3, 64, 8, false);            /* fewer slots than the tiles' counts: the first way */
        check(v, 333, 8, 2, false);
        check(v, 1000, 8, 2, true);
        check(v, 2048, 64, 8, false);
        check(v, 4096, 64, 8, true);
        check(v, 4097, 64, 8, false);        /* a tile part-full */
        check(v, 5000, 33, 3, true);
    }
    for (int v = 1; v <= 2; v++) {
        if (only && v != only) continue;
        bench(v, "olmoe tp2", 2048, 64, 8);
        bench(v, "olmoe", 4096, 64, 8);
        bench(v, "mixtral", 4096, 8, 2);
        bench(v, "long", 16384, 64, 8);
    }
    printf("moe_permute: %s\n", g_dev_failed ? "FAILED" : "all checks passed");
    return g_dev_failed ? 1 : 0;
}
