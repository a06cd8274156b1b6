/* Device helpers shared by the kernels: 16-byte packs, conversions, warp/block
 * reductions, launch checking.  Internal to kernels/ (not part of the C API). */
#ifndef SEXTANT_KERNELS_COMMON_CUH
#define SEXTANT_KERNELS_COMMON_CUH

#include <cuda_runtime.h>
#include <cuda_bf16.h>
#include <cuda_fp16.h>
#include <stdint.h>
#include <stddef.h>
#include "kernels.h"

typedef __nv_bfloat16 bf16;
typedef __half f16;

#define SX_WARP 32

/* Return on a bad argument (no launch) and check a launch. */
#define SX_REQUIRE(cond) do { if (!(cond)) return cudaErrorInvalidValue; } while (0)
#define SX_CHECK(call) do { cudaError_t e_ = (call); if (e_ != cudaSuccess) return e_; } while (0)
#define SX_LAUNCHED() return cudaGetLastError()

static inline unsigned sx_blocks(size_t work, unsigned per_block) {
    return (unsigned)((work + per_block - 1) / per_block);
}
static inline int sx_aligned16(const void *p) { return ((uintptr_t)p & 15u) == 0; }

/* number of SMs of the current device (0 on error) */
static inline int sx_num_sms(void) {
    int dev = 0, n = 0;
    if (cudaGetDevice(&dev) != cudaSuccess) return 0;
    if (cudaDeviceGetAttribute(&n, cudaDevAttrMultiProcessorCount, dev) != cudaSuccess) return 0;
    return n;
}

/* ---------------------------------------------------------- conversions */

template <typename T> __device__ __forceinline__ float to_f(T x);
template <> __device__ __forceinline__ float to_f<float>(float x) { return x; }
template <> __device__ __forceinline__ float to_f<bf16>(bf16 x) { return __bfloat162float(x); }
template <> __device__ __forceinline__ float to_f<f16>(f16 x) { return __half2float(x); }

template <typename T> __device__ __forceinline__ T from_f(float x);
template <> __device__ __forceinline__ float from_f<float>(float x) { return x; }
template <> __device__ __forceinline__ bf16 from_f<bf16>(float x) { return __float2bfloat16_rn(x); }
template <> __device__ __forceinline__ f16 from_f<f16>(float x) { return __float2half_rn(x); }

/* ---------------------------------------------------------- 16-byte packs
 * Pack<T> holds 16 bytes = N elements of T and is moved with one 128-bit load or store
 * (LDG.128 / STG.128).  Elements are unpacked to fp32 with a constant index only, so
 * they stay in registers. */
template <typename T> struct Pack {
    static constexpr int N = 16 / sizeof(T);
    int4 bits;
    __device__ __forceinline__ float get(int k) const { return to_f<T>(reinterpret_cast<const T *>(&bits)[k]); }
    __device__ __forceinline__ void set(int k, float f) { reinterpret_cast<T *>(&bits)[k] = from_f<T>(f); }
};

template <typename T> __device__ __forceinline__ Pack<T> ld_pack(const T *p) {      /* cached, read-only path */
    Pack<T> r; r.bits = __ldg(reinterpret_cast<const int4 *>(p)); return r;
}
template <typename T> __device__ __forceinline__ Pack<T> ld_pack_plain(const T *p) { /* may alias an output */
    Pack<T> r; r.bits = *reinterpret_cast<const int4 *>(p); return r;
}
template <typename T> __device__ __forceinline__ Pack<T> ld_pack_cs(const T *p) {   /* streaming: read once */
    Pack<T> r; r.bits = __ldcs(reinterpret_cast<const int4 *>(p)); return r;
}
template <typename T> __device__ __forceinline__ void st_pack(T *p, const Pack<T> &v) {
    *reinterpret_cast<int4 *>(p) = v.bits;
}
template <typename T> __device__ __forceinline__ void st_pack_cs(T *p, const Pack<T> &v) {
    __stcs(reinterpret_cast<int4 *>(p), v.bits);
}

__device__ __forceinline__ float sigmoid_f(float z) { return 1.0f / (1.0f + __expf(-z)); }

/* ---------------------------------------------------------- reductions */

__device__ __forceinline__ float warp_sum(float v) {
#pragma unroll
    for (int o = 16; o > 0; o >>= 1) v += __shfl_xor_sync(0xffffffffu, v, o);
    return v;
}
__device__ __forceinline__ float warp_max(float v) {
#pragma unroll
    for (int o = 16; o > 0; o >>= 1) v = fmaxf(v, __shfl_xor_sync(0xffffffffu, v, o));
    return v;
}

/* Block-wide sum / max, every thread gets the result.  blockDim.x must be a multiple of
 * 32 and every thread must call it.  The leading barrier makes back-to-back calls safe. */
__device__ __forceinline__ float block_sum(float v) {
    __shared__ float sh[32];
    const int lane = threadIdx.x % SX_WARP, wid = threadIdx.x / SX_WARP, nw = blockDim.x / SX_WARP;
    v = warp_sum(v);
    __syncthreads();
    if (lane == 0) sh[wid] = v;
    __syncthreads();
    v = lane < nw ? sh[lane] : 0.0f;
    return warp_sum(v);
}
__device__ __forceinline__ float block_max(float v) {
    __shared__ float sh[32];
    const int lane = threadIdx.x % SX_WARP, wid = threadIdx.x / SX_WARP, nw = blockDim.x / SX_WARP;
    v = warp_max(v);
    __syncthreads();
    if (lane == 0) sh[wid] = v;
    __syncthreads();
    v = lane < nw ? sh[lane] : -INFINITY;
    return warp_max(v);
}

/* ---------------------------------------------------------- Hopper helpers
 * Programmatic dependent launch (PDL, sm_90): a kernel launched with sx_launch(pdl = true)
 * may be scheduled while the previous kernel of the stream still runs; it must call
 * sx_griddep_wait() before it reads anything that kernel wrote (the wait returns at once
 * when there is no such kernel).  sx_griddep_launch() in the earlier kernel lets the
 * dependent one be scheduled before the earlier one ends.  Both compile to nothing below
 * sm_90. */
__device__ __forceinline__ void sx_griddep_wait(void) {
#if defined(__CUDA_ARCH__) && __CUDA_ARCH__ >= 900
    asm volatile("griddepcontrol.wait;" ::: "memory");
#endif
}
__device__ __forceinline__ void sx_griddep_launch(void) {
#if defined(__CUDA_ARCH__) && __CUDA_ARCH__ >= 900
    asm volatile("griddepcontrol.launch_dependents;" :::);
#endif
}

/* compute capability major of the current device (0 on error) */
static inline int sx_cc_major(void) {
    int dev = 0, v = 0;
    if (cudaGetDevice(&dev) != cudaSuccess) return 0;
    if (cudaDeviceGetAttribute(&v, cudaDevAttrComputeCapabilityMajor, dev) != cudaSuccess) return 0;
    return v;
}

/* launch with or without the PDL attribute (ignored below sm_90) */
template <typename... KArgs, typename... Args>
static cudaError_t sx_launch(bool pdl, void (*kernel)(KArgs...), dim3 grid, dim3 block, size_t smem,
                             cudaStream_t stream, Args... args) {
    cudaLaunchConfig_t cfg = {};
    cfg.gridDim = grid;
    cfg.blockDim = block;
    cfg.dynamicSmemBytes = smem;
    cfg.stream = stream;
    cudaLaunchAttribute attr[1];
    attr[0].id = cudaLaunchAttributeProgrammaticStreamSerialization;
    attr[0].val.programmaticStreamSerializationAllowed = 1;
    cfg.attrs = attr;
    cfg.numAttrs = (pdl && sx_cc_major() >= 9) ? 1 : 0;
    return cudaLaunchKernelEx(&cfg, kernel, static_cast<KArgs>(args)...);
}

/* L2 eviction-priority policies (sm_80+) for 16-byte loads and stores: evict_last keeps a
 * line that will be read again soon; evict_first marks a line read for the last time. */
__device__ __forceinline__ uint64_t sx_policy_evict_last(void) {
    uint64_t p;
    asm volatile("createpolicy.fractional.L2::evict_last.b64 %0, 1.0;" : "=l"(p));
    return p;
}
__device__ __forceinline__ uint64_t sx_policy_evict_first(void) {
    uint64_t p;
    asm volatile("createpolicy.fractional.L2::evict_first.b64 %0, 1.0;" : "=l"(p));
    return p;
}
__device__ __forceinline__ int4 sx_ld_nc_hint(const void *ptr, uint64_t pol) { /* read-only data */
    int4 v;
    asm volatile("ld.global.nc.L2::cache_hint.v4.s32 {%0,%1,%2,%3}, [%4], %5;"
                 : "=r"(v.x), "=r"(v.y), "=r"(v.z), "=r"(v.w) : "l"(ptr), "l"(pol));
    return v;
}
__device__ __forceinline__ int4 sx_ld_hint(const void *ptr, uint64_t pol) { /* coherent: may be written */
    int4 v;
    asm volatile("ld.global.L2::cache_hint.v4.s32 {%0,%1,%2,%3}, [%4], %5;"
                 : "=r"(v.x), "=r"(v.y), "=r"(v.z), "=r"(v.w) : "l"(ptr), "l"(pol) : "memory");
    return v;
}
__device__ __forceinline__ void sx_st_hint(void *ptr, int4 v, uint64_t pol) {
    asm volatile("st.global.L2::cache_hint.v4.s32 [%0], {%1,%2,%3,%4}, %5;"
                 :: "l"(ptr), "r"(v.x), "r"(v.y), "r"(v.z), "r"(v.w), "l"(pol) : "memory");
}
/* asynchronous bulk prefetch of [ptr, ptr+bytes) into L2 (sm_90; bytes a multiple of 16,
 * ptr 16-byte aligned); nothing below sm_90 */
__device__ __forceinline__ void sx_prefetch_l2(const void *ptr, unsigned bytes, uint64_t pol) {
#if defined(__CUDA_ARCH__) && __CUDA_ARCH__ >= 900
    asm volatile("cp.async.bulk.prefetch.L2.global.L2::cache_hint [%0], %1, %2;" :: "l"(ptr), "r"(bytes), "l"(pol)
                 : "memory");
#endif
}

__device__ __forceinline__ unsigned sx_smem_addr(const void *p) { return (unsigned)__cvta_generic_to_shared(p); }
/* mbarriers and bulk copies (sm_90; kernels that use them are launched only there, and below
 * sm_90 these compile to nothing) */
#if defined(__CUDA_ARCH__) && __CUDA_ARCH__ >= 900
#define SX_BULK 1
__device__ __forceinline__ void mb_init(uint64_t *b, unsigned count) {
    asm volatile("mbarrier.init.shared::cta.b64 [%0], %1;" ::"r"(sx_smem_addr(b)), "r"(count) : "memory");
}
__device__ __forceinline__ void mb_fence_init(void) {
    asm volatile("fence.mbarrier_init.release.cluster;" ::: "memory");
}
__device__ __forceinline__ void mb_arrive(uint64_t *b) {
    asm volatile("mbarrier.arrive.shared::cta.b64 _, [%0];" ::"r"(sx_smem_addr(b)) : "memory");
}
__device__ __forceinline__ void mb_wait(uint64_t *b, unsigned parity) { /* until phase `parity` completed */
    const unsigned a = sx_smem_addr(b);
    unsigned done = 0;
    do {
        asm volatile("{\n\t.reg .pred p;\n\tmbarrier.try_wait.parity.shared::cta.b64 p, [%1], %2;\n\t"
                     "selp.u32 %0, 1, 0, p;\n\t}" : "=r"(done) : "r"(a), "r"(parity) : "memory");
    } while (!done);
}
__device__ __forceinline__ void mb_expect(uint64_t *b, unsigned bytes) { /* arrive and expect `bytes` */
    asm volatile("mbarrier.arrive.expect_tx.shared::cta.b64 _, [%0], %1;" ::"r"(sx_smem_addr(b)), "r"(bytes) : "memory");
}
__device__ __forceinline__ void bulk_load(void *dst, const void *src, unsigned bytes, uint64_t *b) {
    asm volatile("cp.async.bulk.shared::cluster.global.mbarrier::complete_tx::bytes [%0], [%1], %2, [%3];"
                 ::"r"(sx_smem_addr(dst)), "l"(src), "r"(bytes), "r"(sx_smem_addr(b)) : "memory");
}
#else
#define SX_BULK 0
__device__ __forceinline__ void mb_init(uint64_t *, unsigned) {}
__device__ __forceinline__ void mb_fence_init(void) {}
__device__ __forceinline__ void mb_arrive(uint64_t *) {}
__device__ __forceinline__ void mb_wait(uint64_t *, unsigned) {}
__device__ __forceinline__ void mb_expect(uint64_t *, unsigned) { __trap(); }
__device__ __forceinline__ void bulk_load(void *, const void *, unsigned, uint64_t *) { __trap(); }
#endif

/* read-modify-write of an accumulated gradient of either dtype */
__device__ __forceinline__ void grad_add(void *g, sx_dtype t, size_t i, float add) {
    if (t == SX_F32) {
        float *p = (float *)g;
        p[i] += add;
    } else {
        bf16 *p = (bf16 *)g;
        p[i] = __float2bfloat16_rn(__bfloat162float(p[i]) + add);
    }
}

#endif
