/* AdamW over a flat parameter buffer: fp32 master weights, m, v; bf16 or fp32 gradients;
 * writes the bf16 weight copy.  One thread per 8 parameters (2 x float4 for each fp32
 * array, one 16-byte pack of bf16 grads / weights); the n % 8 tail by the first threads. */
#include <math.h>
#include "common.cuh"

#define ADAM_THREADS 256

struct AdamArgs {
    float lr, b1, b2, eps, wd, inv_bc1, inv_bc2, gscale;
    const float *gscale_dev;
};

__device__ __forceinline__ float adam_one(float &p, float &m, float &v, float g, const AdamArgs &a) {
    m = a.b1 * m + (1.0f - a.b1) * g;
    v = a.b2 * v + (1.0f - a.b2) * g * g;
    const float mh = m * a.inv_bc1, vh = v * a.inv_bc2;
    p = p - a.lr * (mh / (sqrtf(vh) + a.eps) + a.wd * p);
    return p;
}

template <typename G> __device__ __forceinline__ void load_g8(float (&g)[8], const G *p);
template <> __device__ __forceinline__ void load_g8<bf16>(float (&g)[8], const bf16 *p) {
    const Pack<bf16> q = ld_pack_cs(p);
#pragma unroll
    for (int k = 0; k < 8; k++) g[k] = q.get(k);
}
template <> __device__ __forceinline__ void load_g8<float>(float (&g)[8], const float *p) {
    const float4 a = __ldcs((const float4 *)p), b = __ldcs((const float4 *)p + 1);
    g[0] = a.x; g[1] = a.y; g[2] = a.z; g[3] = a.w; g[4] = b.x; g[5] = b.y; g[6] = b.z; g[7] = b.w;
}

__device__ __forceinline__ void ld8(float (&r)[8], const float *p) {
    const float4 a = __ldcs((const float4 *)p), b = __ldcs((const float4 *)p + 1);
    r[0] = a.x; r[1] = a.y; r[2] = a.z; r[3] = a.w; r[4] = b.x; r[5] = b.y; r[6] = b.z; r[7] = b.w;
}
__device__ __forceinline__ void st8(float *p, const float (&r)[8]) {
    __stcs((float4 *)p, make_float4(r[0], r[1], r[2], r[3]));
    __stcs((float4 *)p + 1, make_float4(r[4], r[5], r[6], r[7]));
}

template <typename G, bool VEC>
__global__ void __launch_bounds__(ADAM_THREADS)
adamw_kernel(float *__restrict__ p, float *__restrict__ m, float *__restrict__ v, bf16 *__restrict__ pw,
             const G *__restrict__ grad, size_t n, AdamArgs a) {
    const size_t i = (size_t)blockIdx.x * blockDim.x + threadIdx.x;
    const float gs = a.gscale * (a.gscale_dev ? *a.gscale_dev : 1.0f);
    if constexpr (VEC) {
        const size_t np = n / 8;
        if (i < np) {
            const size_t o = i * 8;
            float g[8], pp[8], mm[8], vv[8];
            load_g8<G>(g, grad + o);
            ld8(pp, p + o);
            ld8(mm, m + o);
            ld8(vv, v + o);
            Pack<bf16> w;
#pragma unroll
            for (int k = 0; k < 8; k++) w.set(k, adam_one(pp[k], mm[k], vv[k], g[k] * gs, a));
            st8(p + o, pp);
            st8(m + o, mm);
            st8(v + o, vv);
            if (pw) st_pack_cs(pw + o, w);
        }
        if (i < n % 8) {
            const size_t j = np * 8 + i;
            float pp = p[j], mm = m[j], vv = v[j];
            const float w = adam_one(pp, mm, vv, to_f<G>(grad[j]) * gs, a);
            p[j] = pp; m[j] = mm; v[j] = vv;
            if (pw) pw[j] = __float2bfloat16_rn(w);
        }
    } else {
        if (i < n) {
            float pp = p[i], mm = m[i], vv = v[i];
            const float w = adam_one(pp, mm, vv, to_f<G>(grad[i]) * gs, a);
            p[i] = pp; m[i] = mm; v[i] = vv;
            if (pw) pw[i] = __float2bfloat16_rn(w);
        }
    }
}

template <typename G>
static cudaError_t adamw(float *p, float *m, float *v, sx_bf16 *pw, const G *g, size_t n,
                         const sx_adamw_params *hp, cudaStream_t stream) {
    if (n == 0) return cudaSuccess;
    SX_REQUIRE(p && m && v && g && hp && hp->step >= 1);
    AdamArgs a;
    a.lr = hp->lr;
    a.b1 = hp->beta1;
    a.b2 = hp->beta2;
    a.eps = hp->eps;
    a.wd = hp->weight_decay;
    a.inv_bc1 = (float)(1.0 / (1.0 - pow((double)hp->beta1, hp->step)));
    a.inv_bc2 = (float)(1.0 / (1.0 - pow((double)hp->beta2, hp->step)));
    a.gscale = hp->grad_scale;
    a.gscale_dev = hp->grad_scale_dev;
    if (sx_aligned16(p) && sx_aligned16(m) && sx_aligned16(v) && sx_aligned16(g) && (!pw || sx_aligned16(pw)))
        adamw_kernel<G, true><<<sx_blocks(n / 8 > 8 ? n / 8 : 8, ADAM_THREADS), ADAM_THREADS, 0, stream>>>(
            p, m, v, (bf16 *)pw, g, n, a);
    else
        adamw_kernel<G, false><<<sx_blocks(n, ADAM_THREADS), ADAM_THREADS, 0, stream>>>(p, m, v, (bf16 *)pw, g, n, a);
    SX_LAUNCHED();
}

extern "C" cudaError_t sx_adamw(float *param, float *m, float *v, sx_bf16 *param_bf16, const sx_bf16 *grad,
                                size_t n, const sx_adamw_params *hp, cudaStream_t stream) {
    return adamw<bf16>(param, m, v, param_bf16, (const bf16 *)grad, n, hp, stream);
}
extern "C" cudaError_t sx_adamw_f32grad(float *param, float *m, float *v, sx_bf16 *param_bf16, const float *grad,
                                        size_t n, const sx_adamw_params *hp, cudaStream_t stream) {
    return adamw<float>(param, m, v, param_bf16, grad, n, hp, stream);
}
