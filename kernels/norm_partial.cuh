/* The last stage of every norm backward kernel (kernels/norm.cu, and the earlier versions kept in
 * dev/cuda/norm_backward.cu): each block of a persistent grid of G blocks writes its [2][C]
 * dweight/dbias partial to the workspace (norm_block_partial), and norm_param_reduce sums the G
 * partials per channel in fixed order.  Static: each program that includes it has its own copy. */
#ifndef SEXTANT_KERNELS_NORM_PARTIAL_CUH
#define SEXTANT_KERNELS_NORM_PARTIAL_CUH

#include "common.cuh"

#define NORM_MAX_G 1024 /* the most blocks of a persistent grid: the workspace holds NORM_MAX_G partials */

/* Sum G partials [G][2][C] per channel in a fixed order: block = 32 channels x 32 slices. */
static __global__ void __launch_bounds__(1024)
norm_param_reduce(void *dw, void *db, sx_dtype gt, const float *__restrict__ part, int G, int C) {
    __shared__ float sw[32][33], sb[32][33];
    sx_griddep_wait(); /* launched with PDL: the partials are complete after this */
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

/* The block's dweight/dbias partial: its NG row groups' registers summed in group order into
 * part[blockIdx.x] (gbuf: NG x NA x C floats of shared memory, used when NG > 1).  Every norm
 * backward kernel ends with it. */
template <typename T, bool RMS, int K>
__device__ __forceinline__ void norm_block_partial(float *__restrict__ part, float *gbuf, const float (&aw)[K][Pack<T>::N],
                                            const float (&ab)[K][Pack<T>::N], const int (&col)[K],
                                            const bool (&ok)[K], bool member, int g, int NG, int C) {
    constexpr int P = Pack<T>::N;
    constexpr int NA = RMS ? 1 : 2;
    float *pb = part + (size_t)blockIdx.x * 2 * C;
    float *dst = NG == 1 ? pb : gbuf + (size_t)g * NA * C;
    if (member)
#pragma unroll
        for (int k = 0; k < K; k++)
            if (ok[k])
#pragma unroll
                for (int e = 0; e < P; e += 4) {
                    *reinterpret_cast<float4 *>(dst + col[k] + e) = make_float4(aw[k][e], aw[k][e + 1], aw[k][e + 2], aw[k][e + 3]);
                    if (!RMS)
                        *reinterpret_cast<float4 *>(dst + C + col[k] + e) =
                            make_float4(ab[k][e], ab[k][e + 1], ab[k][e + 2], ab[k][e + 3]);
                }
    if (NG > 1) {
        __syncthreads();
        for (int i = threadIdx.x; i < NA * C; i += blockDim.x) {
            float sum = 0.0f;
            for (int gi = 0; gi < NG; gi++) sum += gbuf[(size_t)gi * NA * C + i];
            pb[i] = sum;
        }
    }
}
#endif
