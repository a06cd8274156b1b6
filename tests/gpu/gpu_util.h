/* Host helpers shared by the GPU tests (test_kernels, test_fp8, test_moe_kernels), bench_kernels.cu and the dev/cuda programs. */
#ifndef SEXTANT_GPU_UTIL_H
#define SEXTANT_GPU_UTIL_H

#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <math.h>
#include <time.h>
#include <cuda_runtime.h>

/* any CUDA error in a test or benchmark is fatal: exit 2 with the call and the message */
#define CK(call)                                                                                 \
    do {                                                                                         \
        cudaError_t e_ = (call);                                                                 \
        if (e_ != cudaSuccess) {                                                                 \
            fprintf(stderr, "%s:%d: %s: %s\n", __FILE__, __LINE__, #call, cudaGetErrorString(e_)); \
            exit(2);                                                                             \
        }                                                                                        \
    } while (0)

/* and an NCCL result, where the file includes nccl.h before this header (dev/cuda's multi-GPU programs) */
#ifdef NCCL_H_
#define NC(call)                                                                                    \
    do {                                                                                            \
        ncclResult_t r_ = (call);                                                                   \
        if (r_ != ncclSuccess) {                                                                    \
            fprintf(stderr, "%s:%d: %s: %s\n", __FILE__, __LINE__, #call, ncclGetErrorString(r_)); \
            exit(2);                                                                                \
        }                                                                                           \
    } while (0)
#endif

/* the same for a cuBLAS or cuBLASLt status (CUBLAS_STATUS_SUCCESS is 0), without needing their headers here */
#define CB(call)                                                                                  \
    do {                                                                                          \
        int s_ = (int)(call);                                                                     \
        if (s_ != 0) {                                                                            \
            fprintf(stderr, "%s:%d: %s: cuBLAS status %d\n", __FILE__, __LINE__, #call, s_);      \
            exit(2);                                                                              \
        }                                                                                         \
    } while (0)

/* splitmix64 */
static uint64_t g_rng = 1;
static inline uint64_t rng_u64(void) {
    uint64_t z = (g_rng += 0x9e3779b97f4a7c15ull);
    z = (z ^ (z >> 30)) * 0xbf58476d1ce4e5b9ull;
    z = (z ^ (z >> 27)) * 0x94d049bb133111ebull;
    return z ^ (z >> 31);
}
static inline double rng_unif(void) { return (double)(rng_u64() >> 11) / 9007199254740992.0; } /* [0,1) */
static inline double rng_normal(void) {
    double u = rng_unif(), v = rng_unif();
    if (u < 1e-300) u = 1e-300;
    return sqrt(-2.0 * log(u)) * cos(6.283185307179586 * v);
}

/* the host's monotonic clock, seconds (the dev programs' host timings) */
static inline double host_now_s(void) {
    struct timespec t;
    clock_gettime(CLOCK_MONOTONIC, &t);
    return (double)t.tv_sec + 1e-9 * (double)t.tv_nsec;
}

static inline void *dmalloc(size_t bytes) {
    void *p = NULL;
    CK(cudaMalloc(&p, bytes ? bytes : 16));
    return p;
}

#endif
