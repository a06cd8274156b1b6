/* Kernels for a vocabulary split across a tensor-parallel group (Megatron's
 * vocab-parallel embedding and cross-entropy): each rank holds rows
 * [start, start + rows) of the (padded) table and works on ids shifted by
 * -start, so an id that another rank owns is simply out of [0, rows).
 *
 * The cross-entropy is three kernels around three all-reduces of N floats,
 * which the caller runs (NCCL) between them:
 *   partial:  per row, local max m_r, sum of exp(x - m_r), and the target's
 *             logit when this rank owns it (else 0)                    -> all-reduce MAX of the max copy
 *   rescale:  sum_r *= exp(m_r - M)                                     -> all-reduce SUM of sums and of target logits
 *   finish:   loss = log S + M - x_t; dlogits = dloss (exp(x - M) / S - [v == t])
 * One block per row: the shard of a row is at most a few thousand columns,
 * read twice (the second time from L2: the rows in flight are a few MB). */
#include "common.cuh"

#define TP_CE_THREADS 256

__global__ void embedding_forward_shard_kernel(bf16 *__restrict__ out, const int32_t *__restrict__ ids,
                                               const bf16 *__restrict__ wte, const bf16 *__restrict__ wpe,
                                               int N, int T, int C, int rows) {
    const size_t idx = ((size_t)blockIdx.x * blockDim.x + threadIdx.x) * 8;
    if (idx >= (size_t)N * C) return;
    const int n = (int)(idx / C), c = (int)(idx % C), t = n % T;
    const int id = __ldg(ids + n);
    const bool mine = id >= 0 && id < rows;
    Pack<bf16> a, o, p;
    a.bits = make_int4(0, 0, 0, 0);
    if (mine) a = ld_pack(wte + (size_t)id * C + c);
    if (wpe) p = ld_pack(wpe + (size_t)t * C + c);
#pragma unroll
    for (int k = 0; k < 8; k++) o.set(k, a.get(k) + (wpe ? p.get(k) : 0.0f));
    st_pack_cs(out + idx, o);
}

extern "C" cudaError_t sx_embedding_forward_shard(sx_bf16 *out, const int32_t *ids, const sx_bf16 *wte,
                                                  const sx_bf16 *wpe, int B, int T, int C, int rows,
                                                  cudaStream_t stream) {
    SX_REQUIRE(B >= 0 && T >= 0 && C >= 0 && rows >= 0);
    const int N = B * T;
    if (N == 0 || C == 0) return cudaSuccess;
    SX_REQUIRE(out && ids && (wte || rows == 0));
    SX_REQUIRE(C % 8 == 0 && sx_aligned16(out) && (!wte || sx_aligned16(wte)) && (!wpe || sx_aligned16(wpe)));
    const int threads = 256;
    embedding_forward_shard_kernel<<<sx_blocks((size_t)N * C / 8, threads), threads, 0, stream>>>(
        (bf16 *)out, ids, (const bf16 *)wte, (const bf16 *)wpe, N, T, C, rows);
    SX_LAUNCHED();
}

template <bool VEC>
__global__ void __launch_bounds__(TP_CE_THREADS)
ce_shard_partial_kernel(float *__restrict__ stats, const bf16 *__restrict__ logits, const int32_t *__restrict__ targets,
                        int N, int cols, int ld) {
    const size_t row = blockIdx.x;
    const bf16 *x = logits + row * ld;
    float mx = -INFINITY, sm = 0.0f;
    if constexpr (VEC) {
        /* 16-byte loads; the row's padded tail (cols..ld) is masked, not read past ld */
        for (int c = threadIdx.x * 8; c < cols; c += blockDim.x * 8) {
            const Pack<bf16> p = ld_pack_plain(x + c);
            float z[8], lm = -INFINITY;
#pragma unroll
            for (int k = 0; k < 8; k++) {
                z[k] = c + k < cols ? p.get(k) : -INFINITY;
                lm = fmaxf(lm, z[k]);
            }
            const float nm = fmaxf(mx, lm);
            float t = sm * __expf(mx - nm);
#pragma unroll
            for (int k = 0; k < 8; k++) t += __expf(z[k] - nm);
            sm = t;
            mx = nm;
        }
    } else {
        for (int c = threadIdx.x; c < cols; c += blockDim.x) {
            const float z = __bfloat162float(x[c]);
            const float nm = fmaxf(mx, z);
            sm = sm * __expf(mx - nm) + __expf(z - nm);
            mx = nm;
        }
    }
    const float M = block_max(mx);
    const float S = block_sum(mx == -INFINITY ? 0.0f : sm * __expf(mx - M));
    if (threadIdx.x == 0) {
        const int tg = targets[row];
        /* stats: [0, N) local max, [N, 2N) its copy for the all-reduce MAX, [2N, 3N) sum, [3N, 4N) target logit */
        stats[row] = M;
        stats[N + row] = M;
        stats[2 * (size_t)N + row] = S;
        stats[3 * (size_t)N + row] = tg >= 0 && tg < cols ? __bfloat162float(x[tg]) : 0.0f;
    }
}

__global__ void ce_shard_rescale_kernel(float *stats, int N) {
    const int n = blockIdx.x * blockDim.x + threadIdx.x;
    if (n >= N) return;
    const float local = stats[n], global = stats[N + n];
    stats[2 * (size_t)N + n] = local == -INFINITY ? 0.0f : stats[2 * (size_t)N + n] * __expf(local - global);
}

template <bool VEC>
__global__ void __launch_bounds__(TP_CE_THREADS)
ce_shard_finish_kernel(float *__restrict__ loss, bf16 *dlogits, const bf16 *logits, const int32_t *__restrict__ targets,
                       const float *__restrict__ stats, int N, int cols, int ld, float dloss) {
    const size_t row = blockIdx.x;
    const float M = stats[N + row], S = stats[2 * (size_t)N + row];
    const int tg = targets[row];
    if (threadIdx.x == 0 && loss) loss[row] = logf(S) + M - stats[3 * (size_t)N + row];
    if (!dlogits) return;
    const float inv = 1.0f / S;
    const bf16 *x = logits + row * ld;
    bf16 *d = dlogits + row * ld;
    if constexpr (VEC) {
        for (int c = threadIdx.x * 8; c < ld; c += blockDim.x * 8) {
            Pack<bf16> r;
            if (c < cols) {
                const Pack<bf16> p = ld_pack_plain(x + c);
#pragma unroll
                for (int k = 0; k < 8; k++)
                    r.set(k, c + k < cols ? dloss * (__expf(p.get(k) - M) * inv - (c + k == tg ? 1.0f : 0.0f)) : 0.0f);
            } else {
                r.bits = make_int4(0, 0, 0, 0);
            }
            st_pack_cs(d + c, r);
        }
    } else {
        for (int c = threadIdx.x; c < ld; c += blockDim.x) {
            const float g = c < cols ? dloss * (__expf(__bfloat162float(x[c]) - M) * inv - (c == tg ? 1.0f : 0.0f)) : 0.0f;
            d[c] = __float2bfloat16_rn(g);
        }
    }
}

extern "C" cudaError_t sx_cross_entropy_shard_partial(float *stats, const sx_bf16 *logits, const int32_t *targets, int N,
                                                      int cols, int ld, cudaStream_t stream) {
    SX_REQUIRE(N >= 0 && cols >= 0 && ld >= cols);
    if (N == 0) return cudaSuccess;
    SX_REQUIRE(stats && targets && (logits || ld == 0));
    const bool vec = ld % 8 == 0 && sx_aligned16(logits);
    if (vec) ce_shard_partial_kernel<true><<<N, TP_CE_THREADS, 0, stream>>>(stats, (const bf16 *)logits, targets, N, cols, ld);
    else ce_shard_partial_kernel<false><<<N, TP_CE_THREADS, 0, stream>>>(stats, (const bf16 *)logits, targets, N, cols, ld);
    SX_LAUNCHED();
}

extern "C" cudaError_t sx_cross_entropy_shard_rescale(float *stats, int N, cudaStream_t stream) {
    SX_REQUIRE(N >= 0);
    if (N == 0) return cudaSuccess;
    SX_REQUIRE(stats);
    ce_shard_rescale_kernel<<<sx_blocks((size_t)N, 256), 256, 0, stream>>>(stats, N);
    SX_LAUNCHED();
}

extern "C" cudaError_t sx_cross_entropy_shard_finish(float *loss, sx_bf16 *dlogits, const sx_bf16 *logits,
                                                     const int32_t *targets, const float *stats, int N, int cols,
                                                     int ld, float dloss, cudaStream_t stream) {
    SX_REQUIRE(N >= 0 && cols >= 0 && ld >= cols);
    if (N == 0) return cudaSuccess;
    SX_REQUIRE(stats && targets && (logits || ld == 0));
    const bool vec = ld % 8 == 0 && sx_aligned16(logits) && (!dlogits || sx_aligned16(dlogits));
    if (vec)
        ce_shard_finish_kernel<true><<<N, TP_CE_THREADS, 0, stream>>>(loss, (bf16 *)dlogits, (const bf16 *)logits, targets,
                                                                      stats, N, cols, ld, dloss);
    else
        ce_shard_finish_kernel<false><<<N, TP_CE_THREADS, 0, stream>>>(loss, (bf16 *)dlogits, (const bf16 *)logits, targets,
                                                                       stats, N, cols, ld, dloss);
    SX_LAUNCHED();
}
