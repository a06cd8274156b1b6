/* The fused cross-entropy's kernels and their launches, shared by kernels/crossentropy.cu (the
 * paths production runs: see there) and dev/cuda/crossentropy.cu (every layout that was measured,
 * with its check and benchmark).  The templates take the layouts' parameters (threads per block,
 * row buffers per block); the launches are static, so each program has its own. */
#ifndef SEXTANT_KERNELS_CROSSENTROPY_CUH
#define SEXTANT_KERNELS_CROSSENTROPY_CUH

#include "common.cuh"
#include <cooperative_groups.h>

#define CE_THREADS 1024
#define LOG2E 1.4426950408889634f
#define LN2 0.6931471805599453f

template <bool VEC>
__global__ void __launch_bounds__(CE_THREADS)
ce_fused_kernel(float *__restrict__ loss, bf16 *dlogits, const bf16 *logits, const int32_t *__restrict__ targets,
                int N, int V, int Vp, float dloss, int staged_packs) {
  extern __shared__ int4 ce_stage[]; /* the row's first staged_packs 16-byte packs (VEC only) */
  for (size_t row = blockIdx.x; row < (size_t)N; row += gridDim.x) {
    const bf16 *x = logits + row * Vp;
    const int tg = targets[row];
    const bool valid = tg >= 0 && tg < V;
    /* read before any thread may overwrite the row (dlogits may alias logits) */
    const float xt = valid ? __bfloat162float(x[tg]) : 0.0f;

    float mx = -INFINITY, sm = 0.0f;
    if constexpr (VEC) {
        const int np = (V + 7) / 8;
#pragma unroll 4
        for (int i = threadIdx.x; i < np; i += blockDim.x) {
            const int c = i * 8;
            const Pack<bf16> p = ld_pack_plain(x + c); /* in bounds: c + 8 <= Vp */
            if (i < staged_packs) ce_stage[i] = p.bits; /* pass 2 reads it back: same thread, same i */
            float z[8], lm = -INFINITY;
#pragma unroll
            for (int k = 0; k < 8; k++) {
                z[k] = c + k < V ? p.get(k) * LOG2E : -INFINITY;
                lm = fmaxf(lm, z[k]);
            }
            const float nm = fmaxf(mx, lm);
            float s = sm * exp2f(mx - nm);
#pragma unroll
            for (int k = 0; k < 8; k++) s += exp2f(z[k] - nm);
            sm = s;
            mx = nm;
        }
    } else {
        for (int c = threadIdx.x; c < V; c += blockDim.x) {
            const float z = __bfloat162float(x[c]) * LOG2E;
            const float nm = fmaxf(mx, z);
            sm = sm * exp2f(mx - nm) + exp2f(z - nm);
            mx = nm;
        }
    }
    const float M = block_max(mx);
    const float S = block_sum(mx == -INFINITY ? 0.0f : sm * exp2f(mx - M));
    if (threadIdx.x == 0)
        loss[row] = tg < 0 ? 0.0f : (valid ? (M + log2f(S)) * LN2 - xt : __int_as_float(0x7fffffff));
    if (!dlogits) continue;
    __syncthreads(); /* every read of the row in pass 1 is done before pass 2 overwrites it */
    const float inv = 1.0f / S;
    const float g = tg < 0 ? 0.0f : dloss;
    bf16 *d = dlogits + row * Vp;
    if constexpr (VEC) {
        const int np = Vp / 8;
#pragma unroll 4
        for (int i = threadIdx.x; i < np; i += blockDim.x) {
            const int c = i * 8;
            Pack<bf16> r;
            if (c < V) {
                Pack<bf16> p;
                if (i < staged_packs) p.bits = ce_stage[i];
                else p = ld_pack_plain(x + c);
#pragma unroll
                for (int k = 0; k < 8; k++) {
                    const float pr = exp2f(p.get(k) * LOG2E - M) * inv;
                    r.set(k, c + k < V ? g * (pr - (c + k == tg ? 1.0f : 0.0f)) : 0.0f);
                }
            } else {
                r.bits = make_int4(0, 0, 0, 0);
            }
            st_pack_cs(d + c, r);
        }
    } else {
        for (int c = threadIdx.x; c < Vp; c += blockDim.x) {
            float v = 0.0f;
            if (c < V) v = g * (exp2f(__bfloat162float(x[c]) * LOG2E - M) * inv - (c == tg ? 1.0f : 0.0f));
            d[c] = __float2bfloat16_rn(v);
        }
    }
  }
}

/* Fast path: a persistent grid, one block of 1024 threads per SM, two shared-memory row
 * buffers.  While the block computes row r from one buffer (max / sum, then dlogits), the
 * next row r + grid is already on its way into the other buffer (cp.async, 16 bytes per
 * thread, issued before the compute), so DRAM reads overlap compute and the writes, and
 * each logit is read from DRAM exactly once.  Needs 2 * Vp * 2 bytes of shared memory
 * (201 KB at Vp = 50304). */
__device__ __forceinline__ void cp_async16(void *smem, const void *gmem) {
    const unsigned s = (unsigned)__cvta_generic_to_shared(smem);
    asm volatile("cp.async.cg.shared.global [%0], [%1], 16;\n" ::"r"(s), "l"(gmem) : "memory");
}
__device__ __forceinline__ void cp_async_commit() { asm volatile("cp.async.commit_group;\n" ::: "memory"); }
template <int NLEFT> __device__ __forceinline__ void cp_async_wait() {
    asm volatile("cp.async.wait_group %0;\n" ::"n"(NLEFT) : "memory");
}

/* Two layouts of the shared-memory path (both read each logit from DRAM once):
 *  BUFS 2: one 1024-thread block per SM with two row buffers; the next row is copied in while
 *    this one is reduced and its dlogits written.
 *  BUFS 1: two 512-thread blocks per SM with one row buffer each; a block loads its row, then
 *    reduces it and writes dlogits, while the other block is in another phase, so the SM's
 *    loads, exponentials and stores overlap across the two blocks instead of inside one. */
/* exp2 of x <= 0 in one MUFU op: ex2.approx flushing subnormal results to 0 (exp2f adds a
 * fix-up for them that a softmax does not need: such terms are below fp32's sum resolution) */
__device__ __forceinline__ float ce_exp2(float x) {
    float y;
    asm("ex2.approx.ftz.f32 %0, %1;" : "=f"(y) : "f"(x));
    return y;
}

/* the online max and sum of exp2 (log2 units) over one pack of 8 logits at column c; the
 * last pack may straddle V; mx = -inf before the first pack (exp2(-inf) = 0) */
__device__ __forceinline__ void ce_pack_online(const Pack<bf16> &p, int c, int V, float &mx, float &sm) {
    float z[8];
    if (c + 8 <= V) {
#pragma unroll
        for (int k = 0; k < 8; k++) z[k] = p.get(k) * LOG2E;
    } else {
#pragma unroll
        for (int k = 0; k < 8; k++) z[k] = c + k < V ? p.get(k) * LOG2E : -INFINITY;
    }
    float lm = z[0];
#pragma unroll
    for (int k = 1; k < 8; k++) lm = fmaxf(lm, z[k]);
    const float nm = fmaxf(mx, lm);
    float s = sm * ce_exp2(mx - nm);
#pragma unroll
    for (int k = 0; k < 8; k++) s += ce_exp2(z[k] - nm);
    sm = s;
    mx = nm;
}

/* dlogits of one pack at column c: g (p - onehot), g p for every column, then the target's
 * g (p - 1) again from its own probability, so the cancellation happens in fp32; zeros past V.
 * M: the row's max (log2 units), inv = 1 / S, gi = g inv. */
__device__ __forceinline__ int4 ce_pack_grad(const Pack<bf16> &p, int c, int V, int tg, bool valid, float M, float g,
                                             float inv, float gi) {
    float e[8];
    if (c + 8 <= V) {
#pragma unroll
        for (int k = 0; k < 8; k++) e[k] = ce_exp2(fmaf(p.get(k), LOG2E, -M)) * gi;
    } else {
#pragma unroll
        for (int k = 0; k < 8; k++) e[k] = c + k < V ? ce_exp2(fmaf(p.get(k), LOG2E, -M)) * gi : 0.0f;
    }
    if (valid && tg >= c && tg < c + 8) { /* static indices: e[] stays in registers */
#pragma unroll
        for (int k = 0; k < 8; k++)
            if (c + k == tg) e[k] = g * (ce_exp2(fmaf(p.get(k), LOG2E, -M)) * inv - 1.0f);
    }
    int4 out;
    unsigned *w = reinterpret_cast<unsigned *>(&out);
#pragma unroll
    for (int k = 0; k < 4; k++) {
        const __nv_bfloat162 h = __floats2bfloat162_rn(e[2 * k], e[2 * k + 1]);
        w[k] = *reinterpret_cast<const unsigned *>(&h);
    }
    return out;
}

template <int THREADS, int BUFS>
__global__ void __launch_bounds__(THREADS, 2 / BUFS)
ce_fused_smem_kernel(float *__restrict__ loss, bf16 *dlogits, const bf16 *logits, const int32_t *__restrict__ targets,
                     int N, int V, int Vp, float dloss) {
    extern __shared__ int4 ce_smem[];
    const int np = Vp / 8; /* 16-byte packs per row */
    int4 *buf[2] = {ce_smem, ce_smem + (BUFS == 2 ? np : 0)};
    int row = blockIdx.x;
    if (row >= N) return;
    if (BUFS == 2) {
        const int4 *src = reinterpret_cast<const int4 *>(logits + (size_t)row * Vp);
        for (int i = threadIdx.x; i < np; i += THREADS) cp_async16(buf[0] + i, src + i);
        cp_async_commit();
    }
    const int nv = (V + 7) / 8;
    for (int it = 0; row < N; it++, row += gridDim.x) {
        const int4 *cur = buf[BUFS == 2 ? (it & 1) : 0];
        if (BUFS == 1) {
            const int4 *src = reinterpret_cast<const int4 *>(logits + (size_t)row * Vp);
            for (int i = threadIdx.x; i < np; i += THREADS) cp_async16(buf[0] + i, src + i);
            cp_async_commit();
            cp_async_wait<0>();
        } else {
            const int nrow = row + gridDim.x;
            if (nrow < N) {
                const int4 *src = reinterpret_cast<const int4 *>(logits + (size_t)nrow * Vp);
                int4 *dst = buf[(it + 1) & 1];
                for (int i = threadIdx.x; i < np; i += THREADS) cp_async16(dst + i, src + i);
                cp_async_commit();
                cp_async_wait<1>();
            } else {
                cp_async_wait<0>();
            }
        }
        __syncthreads(); /* the current row is in shared memory for every thread */
        const int tg = targets[row];
        const bool valid = tg >= 0 && tg < V;
        /* online max and sum of exp2 over the row; the last pack may straddle V */
        float mx = -INFINITY, sm = 0.0f;
        for (int i = threadIdx.x; i < nv; i += THREADS) {
            Pack<bf16> p;
            p.bits = cur[i];
            ce_pack_online(p, i * 8, V, mx, sm);
        }
        const float M = block_max(mx);
        const float S = block_sum(mx == -INFINITY ? 0.0f : sm * ce_exp2(mx - M));
        if (threadIdx.x == 0) {
            const float xt = valid ? __bfloat162float(reinterpret_cast<const bf16 *>(cur)[tg]) : 0.0f;
            loss[row] = tg < 0 ? 0.0f : (valid ? (M + log2f(S)) * LN2 - xt : __int_as_float(0x7fffffff));
        }
        if (dlogits) {
            const float inv = 1.0f / S;
            const float g = tg < 0 ? 0.0f : dloss, gi = g * inv;
            bf16 *d = dlogits + (size_t)row * Vp;
            for (int i = threadIdx.x; i < np; i += THREADS) {
                Pack<bf16> p;
                p.bits = cur[i];
                __stcs(reinterpret_cast<int4 *>(d + i * 8), ce_pack_grad(p, i * 8, V, tg, valid, M, g, inv, gi));
            }
        }
        __syncthreads(); /* every thread is done with this buffer before it is refilled */
    }
}

/* Rows too long for two shared-memory rows per SM: a cluster of CL blocks (CL = 2, 4 or 8,
 * on CL SMs) takes one row, block r of the cluster the packs [r S, (r + 1) S) with
 * S = ceil(packs / CL).  Each block copies its slice into shared memory (cp.async), reduces
 * it to a (max, sum of exp2) pair, and reads the cluster's CL pairs through distributed
 * shared memory; every block combines them in the same order, so all get the same M and S.
 * Then each writes dlogits for its own slice from shared memory.  The row is read from DRAM
 * once and nothing is re-read, and with slices of at most half an SM's shared memory two or
 * more blocks share an SM, one loading while another reduces or stores (what the
 * two-blocks-per-SM layout does for rows that fit).  A block only ever reads its own slice
 * before writing it, so dlogits may alias logits. */
template <int THREADS>
__global__ void __launch_bounds__(THREADS)
ce_fused_cluster_kernel(float *__restrict__ loss, bf16 *dlogits, const bf16 *logits, const int32_t *__restrict__ targets,
                        int N, int V, int Vp, float dloss, int slice_packs) {
#if defined(__CUDA_ARCH__) && __CUDA_ARCH__ >= 900
    namespace cg = cooperative_groups;
    cg::cluster_group cluster = cg::this_cluster();
    extern __shared__ int4 ce_slice[];
    __shared__ float2 s_pair;  /* this block's (max, sum of exp2 relative to it), log2 units */
    __shared__ float2 s_total; /* the row's (M, S) */
    const int CL = (int)cluster.num_blocks(), rank = (int)cluster.block_rank();
    const size_t row = blockIdx.x / CL; /* 1-D grid and clusters: cluster i is blocks [i CL, (i + 1) CL) */
    if (row >= (size_t)N) return;       /* never: the grid is N CL blocks */
    const int np = Vp / 8, p0 = rank * slice_packs, p1 = min(np, p0 + slice_packs);
    const int4 *src = reinterpret_cast<const int4 *>(logits + row * Vp);
    for (int i = p0 + threadIdx.x; i < p1; i += THREADS) cp_async16(ce_slice + (i - p0), src + i);
    cp_async_commit();
    const int tg = targets[row];
    const bool valid = tg >= 0 && tg < V;
    cp_async_wait<0>();
    __syncthreads();

    const int nv = min(p1, (V + 7) / 8);
    float mx = -INFINITY, sm = 0.0f;
    for (int i = p0 + threadIdx.x; i < nv; i += THREADS) {
        Pack<bf16> p;
        p.bits = ce_slice[i - p0];
        ce_pack_online(p, i * 8, V, mx, sm);
    }
    const float Mb = block_max(mx);
    const float Sb = block_sum(mx == -INFINITY ? 0.0f : sm * ce_exp2(mx - Mb));
    if (threadIdx.x == 0) s_pair = make_float2(Mb, Sb);
    cluster.sync(); /* every block's pair is written and visible to the cluster */
    if (threadIdx.x < SX_WARP) {
        const int lane = threadIdx.x;
        float2 q = make_float2(-INFINITY, 0.0f);
        if (lane < CL) q = *cluster.map_shared_rank(&s_pair, lane);
        const float M = warp_max(q.x);
        const float S = warp_sum(q.x == -INFINITY ? 0.0f : q.y * ce_exp2(q.x - M));
        if (lane == 0) s_total = make_float2(M, S);
    }
    cluster.barrier_arrive(); /* done with the peers' pairs; each waits for all before it exits */
    __syncthreads();
    const float M = s_total.x, S = s_total.y;
    if (threadIdx.x == 0) {
        const int owner = valid ? (tg / 8) / slice_packs : 0;
        if (rank == owner) {
            const float xt = valid ? __bfloat162float(reinterpret_cast<const bf16 *>(ce_slice)[tg - p0 * 8]) : 0.0f;
            loss[row] = tg < 0 ? 0.0f : (valid ? (M + log2f(S)) * LN2 - xt : __int_as_float(0x7fffffff));
        }
    }
    if (dlogits) {
        const float inv = 1.0f / S;
        const float g = tg < 0 ? 0.0f : dloss, gi = g * inv;
        bf16 *d = dlogits + row * Vp;
        for (int i = p0 + threadIdx.x; i < p1; i += THREADS) {
            Pack<bf16> p;
            p.bits = ce_slice[i - p0];
            __stcs(reinterpret_cast<int4 *>(d + i * 8), ce_pack_grad(p, i * 8, V, tg, valid, M, g, inv, gi));
        }
    }
    cluster.barrier_wait(); /* no block leaves while a peer may still read its pair */
#endif
}

template <int THREADS, int BUFS>
static cudaError_t ce_launch_smem(float *loss, bf16 *dlogits, const bf16 *logits, const int32_t *targets, int N, int V,
                                  int Vp, float dloss, cudaStream_t stream) {
    const size_t smem = (size_t)BUFS * Vp * sizeof(bf16);
    SX_CHECK(cudaFuncSetAttribute(ce_fused_smem_kernel<THREADS, BUFS>, cudaFuncAttributeMaxDynamicSharedMemorySize,
                                  (int)smem));
    const int per_sm = 2 / BUFS, blocks = sx_num_sms() * per_sm;
    const int grid = N < blocks ? N : blocks;
    ce_fused_smem_kernel<THREADS, BUFS><<<grid, THREADS, smem, stream>>>(loss, dlogits, logits, targets, N, V, Vp, dloss);
    SX_LAUNCHED();
}

/* the smallest cluster (2, 4 or 8 blocks) whose slices leave room for two blocks per SM;
 * 0 where none does or clusters are unavailable */
static int ce_cluster_size(int Vp, int smem_max, int smem_sm) {
    if (sx_cc_major() < 9) return 0;
    const int np = Vp / 8;
    for (int cl = 2; cl <= 8; cl *= 2) {
        const size_t slice = (size_t)((np + cl - 1) / cl) * 16;
        if (slice + 1024 <= (size_t)smem_max && 2 * (slice + 2048) <= (size_t)smem_sm) return cl;
    }
    return 0;
}

template <int THREADS>
static cudaError_t ce_launch_cluster(float *loss, bf16 *dlogits, const bf16 *logits, const int32_t *targets, int N,
                                     int V, int Vp, float dloss, int cl, cudaStream_t stream) {
    const int slice = (Vp / 8 + cl - 1) / cl;
    const size_t smem = (size_t)slice * 16;
    SX_REQUIRE((size_t)N * cl <= 0x7fffffffu);
    SX_CHECK(cudaFuncSetAttribute(ce_fused_cluster_kernel<THREADS>, cudaFuncAttributeMaxDynamicSharedMemorySize,
                                  (int)smem));
    cudaLaunchConfig_t cfg = {};
    cfg.gridDim = dim3((unsigned)(N * cl));
    cfg.blockDim = dim3(THREADS);
    cfg.dynamicSmemBytes = smem;
    cfg.stream = stream;
    cudaLaunchAttribute attr[1];
    attr[0].id = cudaLaunchAttributeClusterDimension;
    attr[0].val.clusterDim.x = (unsigned)cl;
    attr[0].val.clusterDim.y = 1;
    attr[0].val.clusterDim.z = 1;
    cfg.attrs = attr;
    cfg.numAttrs = 1;
    SX_CHECK(cudaLaunchKernelEx(&cfg, ce_fused_cluster_kernel<THREADS>, loss, dlogits, logits, targets, N, V, Vp, dloss,
                                slice));
    SX_LAUNCHED();
}

#endif
