/* A MoE layer's router kernels and the exchange's chunk copy, in llm.c's dev/cuda manner: the float64 reference
 * (validator/moe_plan.c), the versions, a check of each and a benchmark of each.
 *
 *   version 1: what kernels/moe.cu ran until 2026-11-28.  The top-k and the router's backward one thread a
 *     token (its row of E fp32 logits read k times, neighbouring threads E floats apart, N / 256 blocks); the
 *     chunk copy one grid over the chunks laid end to end, each thread searching them in turn for its pack.
 *     In the step (OLMoE's top-8 of 64, 2 x H200) the top-k took 100 us a call and the expert TP gather's sort
 *     of 128 chunks 2.9 times its price as a copy (docs/validation/2026-11-28-moe-router-kernels).
 *   version 2: production's (sx_moe_topk, sx_moe_router_backward, sx_moe_copy_chunks through libkernels.a): a
 *     warp a token, lane l holding experts l, l + 32, ...; a block row a chunk, its blocks striding.
 *
 *   moe_router [version]   (0 or none: both)
 * Checks at several shapes first (the picks exact, the gates 1e-5, the backward 1e-2 relative L2, the copy
 * exact), then the benchmark: the median of 100 calls after an L2 flush (dev_util.h), against a copy of the
 * bytes each must move, at OLMoE-1B-7B's routing (64 experts, top 8: a TP 2 rank's 2048 tokens and one GPU's
 * 4096; the expert TP gather's sort, 2 ranks x 64 experts of 256 rows of 2048) and Mixtral 8x7B's (8 experts,
 * top 2, 4096 tokens; its gather's 2 x 8 chunks of 512 rows of 4096).  Build: make dev (dev/cuda/Makefile). */
#include <string.h>
#include "common.cuh"
#include "kernels.h"
#include "dev_util.h"
extern "C" {
#include "moe_plan.h"
}

#define MOE_THREADS 256

/* ------------------------------------------------------------------ version 1 */

__global__ void topk_v1(int32_t *__restrict__ idx, float *__restrict__ gate, const float *__restrict__ logits, int N,
                        int E, int k) {
    const int n = blockIdx.x * blockDim.x + threadIdx.x;
    if (n >= N) return;
    const float *z = logits + (size_t)n * E;
    int pick[SX_MOE_TOPK_MAX];
    for (int j = 0; j < k; j++) {
        int best = -1;
        float bv = 0.0f;
        for (int e = 0; e < E; e++) {
            bool taken = false;
            for (int i = 0; i < j; i++) taken |= pick[i] == e;
            const float v = z[e];
            if (!taken && (best < 0 || v > bv)) { best = e; bv = v; }
        }
        pick[j] = best;
    }
    const float top = z[pick[0]];
    float sum = 0.0f;
    for (int j = 0; j < k; j++) sum += expf(z[pick[j]] - top);
    for (int j = 0; j < k; j++) {
        idx[(size_t)n * k + j] = pick[j];
        gate[(size_t)n * k + j] = expf(z[pick[j]] - top) / sum;
    }
}

__global__ void router_backward_v1(bf16 *__restrict__ dlogits, const float *__restrict__ logits,
                                   const int32_t *__restrict__ idx, const float *__restrict__ gate,
                                   const float *__restrict__ dgate, const int32_t *__restrict__ counts, float aux_scale,
                                   int N, int E, int k) {
    const int n = blockIdx.x * blockDim.x + threadIdx.x;
    if (n >= N) return;
    const float *z = logits + (size_t)n * E;
    const int32_t *pick = idx + (size_t)n * k;
    const float *g = gate + (size_t)n * k, *dg = dgate + (size_t)n * k;
    float dot = 0.0f;
    for (int j = 0; j < k; j++) dot += g[j] * dg[j];
    float top = z[0], sum = 0.0f, pg = 0.0f;
    const float share = aux_scale / ((float)N * (float)k);
    if (aux_scale != 0.0f) {
        for (int e = 1; e < E; e++) top = fmaxf(top, z[e]);
        for (int e = 0; e < E; e++) sum += expf(z[e] - top);
        for (int e = 0; e < E; e++) pg += expf(z[e] - top) / sum * share * (float)counts[e];
    }
    for (int e = 0; e < E; e++) {
        float d = 0.0f;
        for (int j = 0; j < k; j++)
            if (pick[j] == e) d += g[j] * (dg[j] - dot);
        if (aux_scale != 0.0f) {
            const float p = expf(z[e] - top) / sum;
            d += p * (share * (float)counts[e] - pg);
        }
        dlogits[(size_t)n * E + e] = __float2bfloat16_rn(d);
    }
}

__global__ void copy_chunks_v1(const sx_moe_chunks chunks, int C) {
    const size_t i = ((size_t)blockIdx.x * blockDim.x + threadIdx.x) * 8;
    size_t first = 0;
    for (int c = 0; c < chunks.n; c++) {
        const size_t n = (size_t)chunks.rows[c] * C;
        if (i < first + n) {
            const size_t at = i - first;
            st_pack((bf16 *)chunks.dst[c] + at, ld_pack((const bf16 *)chunks.src[c] + at));
            return;
        }
        first += n;
    }
}

/* ------------------------------------------------------------------ the versions' launches */

static void topk(int version, int32_t *idx, float *gate, const float *z, int N, int E, int k) {
    if (version == 1) topk_v1<<<sx_blocks((size_t)N, MOE_THREADS), MOE_THREADS>>>(idx, gate, z, N, E, k);
    else CK(sx_moe_topk(idx, gate, z, N, E, k, 0));
}

static void router_backward(int version, sx_bf16 *dz, const float *z, const int32_t *idx, const float *gate,
                            const float *dgate, const int32_t *counts, float aux, int N, int E, int k) {
    if (version == 1)
        router_backward_v1<<<sx_blocks((size_t)N, MOE_THREADS), MOE_THREADS>>>((bf16 *)dz, z, idx, gate, dgate, counts,
                                                                                aux, N, E, k);
    else CK(sx_moe_router_backward(dz, z, idx, gate, dgate, counts, aux, N, E, k, 0));
}

/* the chunks of n_chunks x rows rows of C values, from src end to end into dst in reverse chunk order, in
 * launches of SX_MOE_CHUNKS_MAX as moe.c's copy_chunks makes them */
static void copy_chunks(int version, sx_bf16 *dst, const sx_bf16 *src, int n_chunks, const int *rows, int C) {
    size_t total = 0;
    for (int c = 0; c < n_chunks; c++) total += (size_t)rows[c];
    size_t at_src = 0, at_dst = total;
    for (int first = 0; first < n_chunks; first += SX_MOE_CHUNKS_MAX) {
        sx_moe_chunks l;
        l.n = n_chunks - first < SX_MOE_CHUNKS_MAX ? n_chunks - first : SX_MOE_CHUNKS_MAX;
        size_t packs = 0;
        for (int i = 0; i < l.n; i++) {
            const int r = rows[first + i];
            at_dst -= (size_t)r;
            l.rows[i] = r;
            l.src[i] = src + at_src * C;
            l.dst[i] = dst + at_dst * C;
            at_src += (size_t)r;
            packs += (size_t)r * C / 8;
        }
        if (version == 1) {
            if (packs) copy_chunks_v1<<<sx_blocks(packs, MOE_THREADS), MOE_THREADS>>>(l, C);
        } else CK(sx_moe_copy_chunks(&l, C, 0));
    }
}

/* ------------------------------------------------------------------ check */

static void logits_of(vec &z, int N, int E) {
    for (int n = 0; n < N; n++)
        for (int e = 0; e < E; e++) z[(size_t)n * E + e] = rng_normal() + 0.02 * ((e * 7919 + n) % E);
}

static void check_router(int version, int N, int E, int k) {
    char what[96];
    const size_t S = (size_t)N * k;
    vec z((size_t)N * E), dgate(S);
    for (double &g : dgate) g = rng_normal();
    logits_of(z, N, E);
    float *d_z = (float *)dev_up(z, 4), *d_dg = (float *)dev_up(dgate, 4);
    std::vector<int> idx(S), counts(E), pos(S), row_slot(S);
    vec gate(S), dz((size_t)N * E);
    moe_ref_route(z.data(), N, E, k, idx.data(), gate.data());
    moe_ref_permute(idx.data(), N, k, E, counts.data(), pos.data(), row_slot.data());
    const double aux = 0.37;
    moe_ref_router_backward(z.data(), idx.data(), gate.data(), dgate.data(), counts.data(), aux, N, E, k, dz.data());
    int32_t *d_idx = (int32_t *)dmalloc(4 * S), *d_counts = (int32_t *)dmalloc(4 * (size_t)E);
    float *d_gate = (float *)dmalloc(4 * S);
    sx_bf16 *d_dz = (sx_bf16 *)dmalloc(2 * (size_t)N * E);
    CK(cudaMemcpy(d_counts, counts.data(), 4 * (size_t)E, cudaMemcpyHostToDevice));
    topk(version, d_idx, d_gate, d_z, N, E, k);
    CK(cudaDeviceSynchronize());
    std::vector<int32_t> got_idx(S);
    CK(cudaMemcpy(got_idx.data(), d_idx, 4 * S, cudaMemcpyDeviceToHost));
    bool same = true;
    for (size_t s = 0; s < S; s++) same &= got_idx[s] == idx[s];
    snprintf(what, sizeof what, "topk N %d E %d k %d picks", N, E, k);
    dev_check_true(what, same);
    snprintf(what, sizeof what, "gates N %d E %d k %d", N, E, k);
    dev_check(what, dev_down(d_gate, S, 4), gate, 1e-5);
    /* the backward from the reference's picks and gates, so that it is checked alone */
    vec gate_ref = gate;
    float *d_gate_ref = (float *)dev_up(gate_ref, 4);
    CK(cudaMemcpy(d_idx, idx.data(), 4 * S, cudaMemcpyHostToDevice));
    router_backward(version, d_dz, d_z, d_idx, d_gate_ref, d_dg, d_counts, (float)aux, N, E, k);
    CK(cudaDeviceSynchronize());
    snprintf(what, sizeof what, "router backward N %d E %d k %d", N, E, k);
    dev_check(what, dev_down(d_dz, (size_t)N * E, 2), dz, 1e-2);
    CK(cudaFree(d_z)); CK(cudaFree(d_dg)); CK(cudaFree(d_idx)); CK(cudaFree(d_counts)); CK(cudaFree(d_gate));
    CK(cudaFree(d_dz)); CK(cudaFree(d_gate_ref));
}

static void check_chunks(int version, int n_chunks, int C, int max_rows) {
    std::vector<int> rows(n_chunks);
    size_t total = 0;
    for (int c = 0; c < n_chunks; c++) {
        rows[c] = c % 7 == 5 ? 0 : (int)(rng_u64() % (uint64_t)(max_rows + 1));
        total += (size_t)rows[c];
    }
    vec src((total ? total : 1) * (size_t)C);
    for (double &x : src) x = rng_normal();
    sx_bf16 *d_src = (sx_bf16 *)dev_up(src, 2), *d_dst = (sx_bf16 *)dmalloc(2 * src.size());
    CK(cudaMemset(d_dst, 0, 2 * src.size()));
    copy_chunks(version, d_dst, d_src, n_chunks, rows.data(), C);
    CK(cudaDeviceSynchronize());
    vec want(src.size(), 0.0);
    size_t at_src = 0, at_dst = total;
    for (int c = 0; c < n_chunks; c++) {
        at_dst -= (size_t)rows[c];
        for (size_t i = 0; i < (size_t)rows[c] * C; i++) want[at_dst * C + i] = src[at_src * C + i];
        at_src += (size_t)rows[c];
    }
    char what[96];
    snprintf(what, sizeof what, "copy %d chunks C %d (exact)", n_chunks, C);
    dev_check(what, dev_down(d_dst, src.size(), 2), want, 0.0);
    CK(cudaFree(d_src)); CK(cudaFree(d_dst));
}

/* ------------------------------------------------------------------ benchmark */

static void bench_router(int version, const char *name, int N, int E, int k) {
    const size_t S = (size_t)N * k;
    vec z((size_t)N * E), dgate(S);
    logits_of(z, N, E);
    for (double &g : dgate) g = rng_normal();
    float *d_z = (float *)dev_up(z, 4), *d_dg = (float *)dev_up(dgate, 4), *d_gate = (float *)dmalloc(4 * S);
    int32_t *d_idx = (int32_t *)dmalloc(4 * S), *d_counts = (int32_t *)dmalloc(4 * (size_t)E);
    std::vector<int32_t> counts(E, (int32_t)(S / E));
    CK(cudaMemcpy(d_counts, counts.data(), 4 * (size_t)E, cudaMemcpyHostToDevice));
    sx_bf16 *d_dz = (sx_bf16 *)dmalloc(2 * (size_t)N * E);
    char what[96];
    const double topk_bytes = 4.0 * N * E + 8.0 * S, bwd_bytes = 4.0 * N * E + 16.0 * S + 2.0 * N * E;
    snprintf(what, sizeof what, "%s topk N %d E %d k %d", name, N, E, k);
    dev_report(version, what, topk_bytes, dev_time_us([&] { topk(version, d_idx, d_gate, d_z, N, E, k); }),
               dev_copy_us(topk_bytes));
    snprintf(what, sizeof what, "%s router bwd N %d E %d k %d", name, N, E, k);
    dev_report(version, what, bwd_bytes,
               dev_time_us([&] { router_backward(version, d_dz, d_z, d_idx, d_gate, d_dg, d_counts, 0.01f, N, E, k); }),
               dev_copy_us(bwd_bytes));
    CK(cudaFree(d_z)); CK(cudaFree(d_dg)); CK(cudaFree(d_gate)); CK(cudaFree(d_idx)); CK(cudaFree(d_counts));
    CK(cudaFree(d_dz));
}

static void bench_chunks(int version, const char *name, int n_chunks, int rows_each, int C) {
    std::vector<int> rows(n_chunks);
    size_t total = 0;
    for (int c = 0; c < n_chunks; c++) total += (size_t)(rows[c] = rows_each + (int)(rng_u64() % 33) - 16);
    sx_bf16 *d_src = (sx_bf16 *)dmalloc(2 * total * C), *d_dst = (sx_bf16 *)dmalloc(2 * total * C);
    CK(cudaMemset(d_src, 0x3c, 2 * total * C));
    const double bytes = 4.0 * total * C;
    char what[96];
    snprintf(what, sizeof what, "%s %d chunks of ~%d x %d", name, n_chunks, rows_each, C);
    dev_report(version, what, bytes, dev_time_us([&] { copy_chunks(version, d_dst, d_src, n_chunks, rows.data(), C); }),
               dev_copy_us(bytes));
    CK(cudaFree(d_src)); CK(cudaFree(d_dst));
}

int main(int argc, char **argv) {
    const int only = argc > 1 ? atoi(argv[1]) : 0;
    if (only < 0 || only > 2) {
        fprintf(stderr, "moe_router: version %s: expected 1 or 2 (0: both)\n", argv[1]);
        return 2;
    }
    g_rng = 20261128;
    for (int v = 1; v <= 2; v++) {
        if (only && v != only) continue;
        printf("version %d: checks\n", v);
        check_router(v, 1, 8, 2);
        check_router(v, 333, 8, 2);
        check_router(v, 2048, 64, 8);
        check_router(v, 301, 33, 3);
        check_router(v, 97, 64, 6);
        check_chunks(v, 1, 8, 5);
        check_chunks(v, 16, 1024, 300);
        check_chunks(v, 2 * SX_MOE_CHUNKS_MAX, 136, 40);
    }
    for (int v = 1; v <= 2; v++) {
        if (only && v != only) continue;
        bench_router(v, "olmoe tp2", 2048, 64, 8);
        bench_router(v, "olmoe", 4096, 64, 8);
        bench_router(v, "mixtral", 4096, 8, 2);
        bench_chunks(v, "olmoe tp2 sort", 2 * 64, 256, 2048);
        bench_chunks(v, "mixtral tp2 sort", 2 * 8, 512, 4096);
    }
    printf("moe_router: %s\n", g_dev_failed ? "FAILED" : "all checks passed");
    return g_dev_failed ? 1 : 0;
}
