/* LayerNorm and RMSNorm, forward and backward, bf16 and fp32 storage.
 *
 * Forward: one warp per row.  Fast path: the row is held in registers as 16-byte packs
 * (CH chunks of 32 lanes x 16 bytes), read once from DRAM, two-pass mean/variance from the
 * registers, written once.  Generic path (any C, any alignment): scalar loops that re-read
 * the row (L1/L2 hits).
 *
 * Backward: fast path (C <= 1024) fuses dx with the parameter-gradient partials: a
 * persistent grid of G blocks (as many as fit on the GPU), one warp per row at a time; each
 * warp accumulates fp32 partials of dweight/dbias for the rows it visits in its own slice
 * of shared memory; at the end the block sums its warps' slices in warp order and writes
 * its [2][C] partial to the workspace, and a second kernel sums the G partials per channel
 * in fixed order and adds them into dweight/dbias.  No atomics: bitwise reproducible for a
 * given grid (G depends on the GPU's SM count).
 * Generic path: dx by a warp per row, the partials by a column kernel, then the same sum. */
#include "common.cuh"

#define NORM_MAX_G 1024
#define NORM_THREADS 256

/* ------------------------------------------------------------------ forward */

template <typename T, int CH, bool RMS>
__global__ void __launch_bounds__(NORM_THREADS)
norm_forward_vec(T *__restrict__ out, float *__restrict__ mean, float *__restrict__ rstd,
                 const T *__restrict__ x, const T *__restrict__ w, const T *__restrict__ b,
                 int N, int C, float eps) {
    constexpr int P = Pack<T>::N;
    const int lane = threadIdx.x % SX_WARP;
    const int row = blockIdx.x * (blockDim.x / SX_WARP) + threadIdx.x / SX_WARP;
    if (row >= N) return;
    const T *xr = x + (size_t)row * C;
    Pack<T> xv[CH];
#pragma unroll
    for (int c = 0; c < CH; c++) {
        const int col = (c * SX_WARP + lane) * P;
        if (col < C) xv[c] = ld_pack_cs(xr + col);
    }
    float m = 0.0f;
    if (!RMS) {
        float s = 0.0f;
#pragma unroll
        for (int c = 0; c < CH; c++)
            if ((c * SX_WARP + lane) * P < C)
#pragma unroll
                for (int k = 0; k < P; k++) s += xv[c].get(k);
        m = warp_sum(s) / C;
    }
    float q = 0.0f;
#pragma unroll
    for (int c = 0; c < CH; c++)
        if ((c * SX_WARP + lane) * P < C)
#pragma unroll
            for (int k = 0; k < P; k++) {
                const float d = xv[c].get(k) - m;
                q += d * d;
            }
    const float r = rsqrtf(warp_sum(q) / C + eps);
    T *orow = out + (size_t)row * C;
#pragma unroll
    for (int c = 0; c < CH; c++) {
        const int col = (c * SX_WARP + lane) * P;
        if (col < C) {
            const Pack<T> wv = ld_pack(w + col);
            Pack<T> bv, o;
            if (!RMS && b) bv = ld_pack(b + col);
#pragma unroll
            for (int k = 0; k < P; k++) {
                float y = (xv[c].get(k) - m) * r * wv.get(k);
                if (!RMS && b) y += bv.get(k);
                o.set(k, y);
            }
            st_pack_cs(orow + col, o);
        }
    }
    if (lane == 0) {
        if (!RMS && mean) mean[row] = m;
        if (rstd) rstd[row] = r;
    }
}

template <typename T, bool RMS>
__global__ void __launch_bounds__(NORM_THREADS)
norm_forward_generic(T *__restrict__ out, float *__restrict__ mean, float *__restrict__ rstd,
                     const T *__restrict__ x, const T *__restrict__ w, const T *__restrict__ b,
                     int N, int C, float eps) {
    const int lane = threadIdx.x % SX_WARP;
    const int row = blockIdx.x * (blockDim.x / SX_WARP) + threadIdx.x / SX_WARP;
    if (row >= N) return;
    const T *xr = x + (size_t)row * C;
    float m = 0.0f;
    if (!RMS) {
        float s = 0.0f;
        for (int i = lane; i < C; i += SX_WARP) s += to_f<T>(xr[i]);
        m = warp_sum(s) / C;
    }
    float q = 0.0f;
    for (int i = lane; i < C; i += SX_WARP) {
        const float d = to_f<T>(xr[i]) - m;
        q += d * d;
    }
    const float r = rsqrtf(warp_sum(q) / C + eps);
    T *orow = out + (size_t)row * C;
    for (int i = lane; i < C; i += SX_WARP) {
        float y = (to_f<T>(xr[i]) - m) * r * to_f<T>(w[i]);
        if (!RMS && b) y += to_f<T>(b[i]);
        orow[i] = from_f<T>(y);
    }
    if (lane == 0) {
        if (!RMS && mean) mean[row] = m;
        if (rstd) rstd[row] = r;
    }
}

template <typename T, bool RMS>
static cudaError_t norm_forward(T *out, float *mean, float *rstd, const T *x, const T *w, const T *b,
                                int N, int C, float eps, cudaStream_t stream) {
    SX_REQUIRE(N >= 0 && C >= 0);
    if (N == 0) return cudaSuccess;
    SX_REQUIRE(C > 0 && out && x && w);
    constexpr int P = Pack<T>::N;
    const unsigned grid = sx_blocks(N, NORM_THREADS / SX_WARP);
    const int chunks = (C + SX_WARP * P - 1) / (SX_WARP * P);
    const bool vec = C % P == 0 && sx_aligned16(out) && sx_aligned16(x) && sx_aligned16(w) &&
                     (RMS || !b || sx_aligned16(b));
#define NORM_FWD(CH) norm_forward_vec<T, CH, RMS><<<grid, NORM_THREADS, 0, stream>>>(out, mean, rstd, x, w, b, N, C, eps)
    if (vec && chunks <= 1) NORM_FWD(1);
    else if (vec && chunks <= 2) NORM_FWD(2);
    else if (vec && chunks <= 3) NORM_FWD(3);
    else if (vec && chunks <= 4) NORM_FWD(4);
    else if (vec && chunks <= 6) NORM_FWD(6);
    else if (vec && chunks <= 8) NORM_FWD(8);
    else norm_forward_generic<T, RMS><<<grid, NORM_THREADS, 0, stream>>>(out, mean, rstd, x, w, b, N, C, eps);
#undef NORM_FWD
    SX_LAUNCHED();
}

/* ----------------------------------------------------------------- backward */

/* Sum G partials [G][2][C] per channel in a fixed order: block = 32 channels x 32 slices. */
__global__ void __launch_bounds__(1024)
norm_param_reduce(void *dw, void *db, sx_dtype gt, const float *__restrict__ part, int G, int C) {
    __shared__ float sw[32][33], sb[32][33];
    const int tx = threadIdx.x % 32, ty = threadIdx.x / 32;
    const int c = blockIdx.x * 32 + tx;
    float a = 0.0f, bb = 0.0f;
    if (c < C)
#pragma unroll 8
        for (int g = ty; g < G; g += 32) {
            a += part[(size_t)g * 2 * C + c];
            if (db) bb += part[(size_t)g * 2 * C + C + c];
        }
    sw[ty][tx] = a;
    sb[ty][tx] = bb;
    __syncthreads();
    if (ty == 0 && c < C) {
        float sa = 0.0f, sbb = 0.0f;
        for (int j = 0; j < 32; j++) { sa += sw[j][tx]; sbb += sb[j][tx]; }
        grad_add(dw, gt, c, sa);
        if (db) grad_add(db, gt, c, sbb);
    }
}

template <typename T, int CH, bool RMS, int MINB>
__global__ void __launch_bounds__(NORM_THREADS, MINB)
norm_backward_vec(T *dx, float *__restrict__ part, const T *__restrict__ dy, const T *__restrict__ x,
                  const T *__restrict__ w, const float *__restrict__ mean, const float *__restrict__ rstd,
                  int N, int C, int accumulate) {
    /* per-warp fp32 accumulators of dweight (and dbias) in shared memory: [warps][NA][C] */
    extern __shared__ float4 norm_smem[];
    constexpr int P = Pack<T>::N;
    constexpr int NA = RMS ? 1 : 2;
    constexpr int Q = P / 4; /* float4 per pack */
    const int lane = threadIdx.x % SX_WARP, warp = threadIdx.x / SX_WARP;
    const int nwarps = blockDim.x / SX_WARP;
    float *acc = reinterpret_cast<float *>(norm_smem) + (size_t)warp * NA * C;
    for (int i = lane; i < NA * C; i += SX_WARP) acc[i] = 0.0f;
    __syncwarp();

    for (int row = blockIdx.x * nwarps + warp; row < N; row += gridDim.x * nwarps) {
        const T *xr = x + (size_t)row * C, *gr = dy + (size_t)row * C;
        Pack<T> xv[CH], gv[CH];
#pragma unroll
        for (int c = 0; c < CH; c++) {
            const int col = (c * SX_WARP + lane) * P;
            if (col < C) {
                xv[c] = ld_pack_cs(xr + col);
                gv[c] = ld_pack_cs(gr + col);
            }
        }
        const float m = RMS ? 0.0f : __ldg(mean + row);
        const float r = __ldg(rstd + row);
        float s1 = 0.0f, s2 = 0.0f;
#pragma unroll
        for (int c = 0; c < CH; c++) {
            const int col = (c * SX_WARP + lane) * P;
            if (col < C) {
                const Pack<T> wv = ld_pack(w + col);
                float4 aw[Q], ab[Q];
#pragma unroll
                for (int q = 0; q < Q; q++) {
                    aw[q] = *reinterpret_cast<float4 *>(acc + col + 4 * q);
                    if (!RMS) ab[q] = *reinterpret_cast<float4 *>(acc + C + col + 4 * q);
                }
                float *fw = reinterpret_cast<float *>(aw), *fb = reinterpret_cast<float *>(ab);
#pragma unroll
                for (int k = 0; k < P; k++) {
                    const float xh = (xv[c].get(k) - m) * r;
                    const float d = gv[c].get(k);
                    const float g = d * wv.get(k);
                    s1 += g;
                    s2 += g * xh;
                    fw[k] += d * xh;
                    if (!RMS) fb[k] += d;
                }
#pragma unroll
                for (int q = 0; q < Q; q++) {
                    *reinterpret_cast<float4 *>(acc + col + 4 * q) = aw[q];
                    if (!RMS) *reinterpret_cast<float4 *>(acc + C + col + 4 * q) = ab[q];
                }
            }
        }
        s1 = RMS ? 0.0f : warp_sum(s1) / C;
        s2 = warp_sum(s2) / C;
        T *dxr = dx + (size_t)row * C;
#pragma unroll
        for (int c = 0; c < CH; c++) {
            const int col = (c * SX_WARP + lane) * P;
            if (col < C) {
                const Pack<T> wv = ld_pack(w + col);
                Pack<T> o;
                if (accumulate) o = ld_pack_plain(dxr + col);
#pragma unroll
                for (int k = 0; k < P; k++) {
                    const float xh = (xv[c].get(k) - m) * r;
                    const float g = gv[c].get(k) * wv.get(k);
                    float v = r * (g - s1 - xh * s2);
                    if (accumulate) v += o.get(k);
                    o.set(k, v);
                }
                st_pack_cs(dxr + col, o);
            }
        }
    }
    __syncthreads();
    /* sum the warps' accumulators in warp order; the block's partial goes to the workspace */
    const float *all = reinterpret_cast<const float *>(norm_smem);
    float *pb = part + (size_t)blockIdx.x * 2 * C;
    for (int i = threadIdx.x; i < NA * C; i += blockDim.x) {
        float sum = 0.0f;
        for (int wi = 0; wi < nwarps; wi++) sum += all[(size_t)wi * NA * C + i];
        pb[i] = sum;
    }
}

/* generic dx: warp per row, scalar, re-reads the row */
template <typename T, bool RMS>
__global__ void __launch_bounds__(NORM_THREADS)
norm_backward_dx_generic(T *dx, const T *__restrict__ dy, const T *__restrict__ x, const T *__restrict__ w,
                         const float *__restrict__ mean, const float *__restrict__ rstd,
                         int N, int C, int accumulate) {
    const int lane = threadIdx.x % SX_WARP;
    const int row = blockIdx.x * (blockDim.x / SX_WARP) + threadIdx.x / SX_WARP;
    if (row >= N) return;
    const T *xr = x + (size_t)row * C, *gr = dy + (size_t)row * C;
    const float m = RMS ? 0.0f : mean[row], r = rstd[row];
    float s1 = 0.0f, s2 = 0.0f;
    for (int i = lane; i < C; i += SX_WARP) {
        const float g = to_f<T>(gr[i]) * to_f<T>(w[i]);
        s1 += g;
        s2 += g * (to_f<T>(xr[i]) - m) * r;
    }
    s1 = RMS ? 0.0f : warp_sum(s1) / C;
    s2 = warp_sum(s2) / C;
    T *dxr = dx + (size_t)row * C;
    for (int i = lane; i < C; i += SX_WARP) {
        const float g = to_f<T>(gr[i]) * to_f<T>(w[i]);
        const float xh = (to_f<T>(xr[i]) - m) * r;
        float v = r * (g - s1 - xh * s2);
        if (accumulate) v += to_f<T>(dxr[i]);
        dxr[i] = from_f<T>(v);
    }
}

/* generic partials: block (32 channels x 8 row lanes), grid (channel blocks, G) */
template <typename T, bool RMS>
__global__ void __launch_bounds__(256)
norm_backward_param_generic(float *__restrict__ part, const T *__restrict__ dy, const T *__restrict__ x,
                            const float *__restrict__ mean, const float *__restrict__ rstd, int N, int C) {
    __shared__ float sw[8][33], sb[8][33];
    const int tx = threadIdx.x % 32, ty = threadIdx.x / 32;
    const int c = blockIdx.x * 32 + tx;
    float a = 0.0f, bb = 0.0f;
    if (c < C)
        for (int row = blockIdx.y * 8 + ty; row < N; row += gridDim.y * 8) {
            const float d = to_f<T>(dy[(size_t)row * C + c]);
            const float xh = (to_f<T>(x[(size_t)row * C + c]) - (RMS ? 0.0f : mean[row])) * rstd[row];
            a += d * xh;
            bb += d;
        }
    sw[ty][tx] = a;
    sb[ty][tx] = bb;
    __syncthreads();
    if (ty == 0 && c < C) {
        float sa = 0.0f, sbb = 0.0f;
        for (int j = 0; j < 8; j++) { sa += sw[j][tx]; sbb += sb[j][tx]; }
        part[(size_t)blockIdx.y * 2 * C + c] = sa;
        part[(size_t)blockIdx.y * 2 * C + C + c] = sbb;
    }
}

template <typename T, int CH, bool RMS, int MINB>
static cudaError_t launch_bwd_vec(T *dx, float *part, const T *dy, const T *x, const T *w, const float *mean,
                                  const float *rstd, int N, int C, int acc, int *G, cudaStream_t stream) {
    const size_t smem = (size_t)(NORM_THREADS / SX_WARP) * (RMS ? 1 : 2) * C * sizeof(float);
    SX_CHECK(cudaFuncSetAttribute(norm_backward_vec<T, CH, RMS, MINB>, cudaFuncAttributeMaxDynamicSharedMemorySize,
                                  (int)smem));
    int per_sm = 0;
    SX_CHECK(cudaOccupancyMaxActiveBlocksPerMultiprocessor(&per_sm, norm_backward_vec<T, CH, RMS, MINB>,
                                                           NORM_THREADS, smem));
    int g = sx_num_sms() * (per_sm > 0 ? per_sm : 1);
    const int need = (int)sx_blocks(N, NORM_THREADS / SX_WARP);
    if (g > need) g = need;
    if (g > NORM_MAX_G) g = NORM_MAX_G;
    if (g < 1) g = 1;
    *G = g;
    norm_backward_vec<T, CH, RMS, MINB><<<g, NORM_THREADS, smem, stream>>>(dx, part, dy, x, w, mean, rstd, N, C, acc);
    return cudaGetLastError();
}

template <typename T, bool RMS>
static cudaError_t norm_backward(T *dx, void *dw, void *db, sx_dtype gt, const T *dy, const T *x, const T *w,
                                 const float *mean, const float *rstd, int acc, void *ws, size_t ws_bytes,
                                 int N, int C, cudaStream_t stream) {
    SX_REQUIRE(N >= 0 && C >= 0);
    SX_REQUIRE(gt == SX_F32 || gt == SX_BF16);
    if (N == 0 || C == 0) return cudaSuccess;
    SX_REQUIRE(dx && dw && dy && x && w && rstd && (RMS || mean) && ws);
    SX_REQUIRE(ws_bytes >= sx_norm_backward_workspace_bytes(C));
    float *part = (float *)ws;
    constexpr int P = Pack<T>::N;
    constexpr bool BF = sizeof(T) == 2;
    const int chunks = (C + SX_WARP * P - 1) / (SX_WARP * P);
    const bool vec = C % P == 0 && sx_aligned16(dx) && sx_aligned16(dy) && sx_aligned16(x) && sx_aligned16(w);
    int G = 0;
    cudaError_t e = cudaSuccess;
    /* fast path for C <= 1024 (bf16: 4 chunks of 256, fp32: 8 chunks of 128); 64 KB of shared memory at most */
    if (vec && chunks <= 1) e = launch_bwd_vec<T, 1, RMS, 4>(dx, part, dy, x, w, mean, rstd, N, C, acc, &G, stream);
    else if (vec && chunks <= 2) e = launch_bwd_vec<T, 2, RMS, 4>(dx, part, dy, x, w, mean, rstd, N, C, acc, &G, stream);
    else if (vec && chunks <= 3) e = launch_bwd_vec<T, 3, RMS, 4>(dx, part, dy, x, w, mean, rstd, N, C, acc, &G, stream);
    else if (vec && chunks <= 4) e = launch_bwd_vec<T, 4, RMS, BF ? 3 : 2>(dx, part, dy, x, w, mean, rstd, N, C, acc, &G, stream);
    else if (!BF && vec && chunks <= 8) {
        if constexpr (!BF) {
            if (chunks <= 6) e = launch_bwd_vec<T, 6, RMS, 1>(dx, part, dy, x, w, mean, rstd, N, C, acc, &G, stream);
            else e = launch_bwd_vec<T, 8, RMS, 1>(dx, part, dy, x, w, mean, rstd, N, C, acc, &G, stream);
        }
    } else {
        norm_backward_dx_generic<T, RMS><<<sx_blocks(N, NORM_THREADS / SX_WARP), NORM_THREADS, 0, stream>>>(
            dx, dy, x, w, mean, rstd, N, C, acc);
        SX_CHECK(cudaGetLastError());
        G = (int)sx_blocks(N, 8);
        if (G > 256) G = 256;
        dim3 grid(sx_blocks(C, 32), G);
        norm_backward_param_generic<T, RMS><<<grid, 256, 0, stream>>>(part, dy, x, mean, rstd, N, C);
        e = cudaGetLastError();
    }
    SX_CHECK(e);
    norm_param_reduce<<<sx_blocks(C, 32), 1024, 0, stream>>>(dw, RMS ? nullptr : db, gt, part, G, C);
    SX_LAUNCHED();
}

/* ---------------------------------------------------------------- C API */

extern "C" size_t sx_norm_backward_workspace_bytes(int C) {
    return C > 0 ? (size_t)NORM_MAX_G * 2 * (size_t)C * sizeof(float) : 0;
}

extern "C" cudaError_t sx_layernorm_forward(sx_bf16 *out, float *mean, float *rstd, const sx_bf16 *x,
                                            const sx_bf16 *weight, const sx_bf16 *bias, int N, int C,
                                            float eps, cudaStream_t stream) {
    return norm_forward<bf16, false>((bf16 *)out, mean, rstd, (const bf16 *)x, (const bf16 *)weight,
                                     (const bf16 *)bias, N, C, eps, stream);
}
extern "C" cudaError_t sx_layernorm_forward_f32(float *out, float *mean, float *rstd, const float *x,
                                                const float *weight, const float *bias, int N, int C,
                                                float eps, cudaStream_t stream) {
    return norm_forward<float, false>(out, mean, rstd, x, weight, bias, N, C, eps, stream);
}
extern "C" cudaError_t sx_rmsnorm_forward(sx_bf16 *out, float *rstd, const sx_bf16 *x, const sx_bf16 *weight,
                                          int N, int C, float eps, cudaStream_t stream) {
    return norm_forward<bf16, true>((bf16 *)out, nullptr, rstd, (const bf16 *)x, (const bf16 *)weight, nullptr,
                                    N, C, eps, stream);
}
extern "C" cudaError_t sx_rmsnorm_forward_f32(float *out, float *rstd, const float *x, const float *weight,
                                              int N, int C, float eps, cudaStream_t stream) {
    return norm_forward<float, true>(out, nullptr, rstd, x, weight, nullptr, N, C, eps, stream);
}

extern "C" cudaError_t sx_layernorm_backward(sx_bf16 *dx, void *dweight, void *dbias, sx_dtype grad_type,
                                             const sx_bf16 *dy, const sx_bf16 *x, const sx_bf16 *weight,
                                             const float *mean, const float *rstd, int dx_accumulate,
                                             void *workspace, size_t workspace_bytes, int N, int C,
                                             cudaStream_t stream) {
    return norm_backward<bf16, false>((bf16 *)dx, dweight, dbias, grad_type, (const bf16 *)dy, (const bf16 *)x,
                                      (const bf16 *)weight, mean, rstd, dx_accumulate, workspace,
                                      workspace_bytes, N, C, stream);
}
extern "C" cudaError_t sx_layernorm_backward_f32(float *dx, float *dweight, float *dbias, const float *dy,
                                                 const float *x, const float *weight, const float *mean,
                                                 const float *rstd, int dx_accumulate, void *workspace,
                                                 size_t workspace_bytes, int N, int C, cudaStream_t stream) {
    return norm_backward<float, false>(dx, dweight, dbias, SX_F32, dy, x, weight, mean, rstd, dx_accumulate,
                                       workspace, workspace_bytes, N, C, stream);
}
extern "C" cudaError_t sx_rmsnorm_backward(sx_bf16 *dx, void *dweight, sx_dtype grad_type, const sx_bf16 *dy,
                                           const sx_bf16 *x, const sx_bf16 *weight, const float *rstd,
                                           int dx_accumulate, void *workspace, size_t workspace_bytes,
                                           int N, int C, cudaStream_t stream) {
    return norm_backward<bf16, true>((bf16 *)dx, dweight, nullptr, grad_type, (const bf16 *)dy, (const bf16 *)x,
                                     (const bf16 *)weight, nullptr, rstd, dx_accumulate, workspace,
                                     workspace_bytes, N, C, stream);
}
extern "C" cudaError_t sx_rmsnorm_backward_f32(float *dx, float *dweight, const float *dy, const float *x,
                                               const float *weight, const float *rstd, int dx_accumulate,
                                               void *workspace, size_t workspace_bytes, int N, int C,
                                               cudaStream_t stream) {
    return norm_backward<float, true>(dx, dweight, nullptr, SX_F32, dy, x, weight, nullptr, rstd, dx_accumulate,
                                      workspace, workspace_bytes, N, C, stream);
}
