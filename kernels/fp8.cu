/* Per-tensor FP8 scaling for the training step's GEMMs: the amax of a bf16 tensor, and
 * its cast to E4M3 or E5M2 with the scale taken from that amax, plain and transposed
 * (cuBLASLt's FP8 GEMMs take A transposed and B not: both operands K-major, so the
 * backward needs the transposed copies; docs/model.md, "FP8 GEMMs"). */
#include <math.h>
#include <cuda_fp8.h>
#include "common.cuh"

#define AMAX_THREADS 256
#define TILE 32   /* the cast's square tile; blocks of TILE x TILE_ROWS threads */
#define TILE_ROWS 8

/* Non-negative floats order like their bit patterns, so an unsigned atomicMax on the bits
 * is the float max: one word, no floating-point atomics, the same result in any order. */
__global__ void __launch_bounds__(AMAX_THREADS) fp8_amax_kernel(unsigned *amax_bits, const bf16 *__restrict__ x, size_t n) {
    float m = 0.0f;
    for (size_t i = (size_t)blockIdx.x * blockDim.x + threadIdx.x; i < n; i += (size_t)gridDim.x * blockDim.x)
        m = fmaxf(m, fabsf(__bfloat162float(x[i])));
    m = block_max(m);
    if (threadIdx.x == 0) atomicMax(amax_bits, __float_as_uint(m));
}

cudaError_t sx_fp8_amax(float *amax, const sx_bf16 *x, size_t n, cudaStream_t stream) {
    SX_REQUIRE(amax && (x || n == 0));
    SX_CHECK(cudaMemsetAsync(amax, 0, sizeof *amax, stream));
    if (n == 0) return cudaSuccess;
    const int sms = sx_num_sms();
    unsigned blocks = sx_blocks(n, AMAX_THREADS * 8);
    if (sms > 0 && blocks > (unsigned)(4 * sms)) blocks = (unsigned)(4 * sms);
    fp8_amax_kernel<<<blocks, AMAX_THREADS, 0, stream>>>((unsigned *)amax, (const bf16 *)x, n);
    SX_LAUNCHED();
}

__device__ __forceinline__ float fp8_scale(const float *amax, float fmt_max) {
    const float a = *amax;
    return a > 0.0f && isfinite(a) ? fmt_max / a : 1.0f;
}

__global__ void fp8_cast_kernel(uint8_t *out, uint8_t *out_t, float *scale_inv, const bf16 *__restrict__ x,
                                const float *amax, int rows, int cols, int e5m2) {
    __shared__ uint8_t tile[TILE][TILE + 4];
    const float fmt_max = e5m2 ? SX_E5M2_MAX : SX_E4M3_MAX, s = fp8_scale(amax, fmt_max);
    const __nv_fp8_interpretation_t kind = e5m2 ? __NV_E5M2 : __NV_E4M3;
    if (blockIdx.x == 0 && blockIdx.y == 0 && threadIdx.x == 0 && threadIdx.y == 0) *scale_inv = 1.0f / s;
    const int c0 = blockIdx.x * TILE, r0 = blockIdx.y * TILE;
    for (int dr = threadIdx.y; dr < TILE; dr += TILE_ROWS) {
        const int r = r0 + dr, c = c0 + threadIdx.x;
        if (r < rows && c < cols) {
            const uint8_t q = __nv_cvt_float_to_fp8(__bfloat162float(x[(size_t)r * cols + c]) * s, __NV_SATFINITE, kind);
            if (out) out[(size_t)r * cols + c] = q;
            tile[dr][threadIdx.x] = q;
        }
    }
    if (!out_t) return;
    __syncthreads();
    for (int dc = threadIdx.y; dc < TILE; dc += TILE_ROWS) {
        const int c = c0 + dc, r = r0 + threadIdx.x;
        if (r < rows && c < cols) out_t[(size_t)c * rows + r] = tile[threadIdx.x][dc];
    }
}

cudaError_t sx_fp8_cast(sx_fp8 *out, sx_fp8 *out_t, float *scale_inv, const sx_bf16 *x, const float *amax, int rows,
                        int cols, sx_fp8_format fmt, cudaStream_t stream) {
    SX_REQUIRE(rows >= 0 && cols >= 0 && scale_inv && amax && (out || out_t) && (fmt == SX_E4M3 || fmt == SX_E5M2));
    if (rows == 0 || cols == 0) return cudaSuccess;
    SX_REQUIRE(x);
    const dim3 grid((unsigned)((cols + TILE - 1) / TILE), (unsigned)((rows + TILE - 1) / TILE)), block(TILE, TILE_ROWS);
    SX_REQUIRE(grid.y <= 65535u);
    fp8_cast_kernel<<<grid, block, 0, stream>>>(out, out_t, scale_inv, (const bf16 *)x, amax, rows, cols, fmt == SX_E5M2);
    SX_LAUNCHED();
}
