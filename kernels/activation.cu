/* Elementwise kernels: GELU (tanh), SwiGLU, residual add.
 * Vector path: one thread per 16-byte pack (8 T) of every operand; the n % 8 tail is
 * done by the first threads of the same launch.  Scalar path for unaligned pointers. */
#include "common.cuh"

#define EW_THREADS 256

/* gelu_tanh(x) = 0.5 x (1 + tanh(u)) = x * sigmoid(2u),  u = sqrt(2/pi) (x + 0.044715 x^3) */
__device__ __forceinline__ float gelu_f(float x) {
    const float u = 0.7978845608028654f * (x + 0.044715f * x * x * x);
    return x / (1.0f + __expf(-2.0f * u));
}
__device__ __forceinline__ float gelu_grad_f(float x) {
    const float u = 0.7978845608028654f * (x + 0.044715f * x * x * x);
    const float du = 0.7978845608028654f * (1.0f + 3.0f * 0.044715f * x * x);
    const float s = 1.0f / (1.0f + __expf(-2.0f * u));
    return s + x * s * (1.0f - s) * 2.0f * du;
}

/* ------------------------------------------------------------------- GELU */

template <typename T, bool VEC>
__global__ void gelu_forward_kernel(T *__restrict__ out, const T *__restrict__ x, size_t n) {
    const size_t i = (size_t)blockIdx.x * blockDim.x + threadIdx.x;
    if constexpr (VEC) {
        const size_t np = n / 8;
        if (i < np) {
            const Pack<T> a = ld_pack_cs(x + i * 8);
            Pack<T> o;
#pragma unroll
            for (int k = 0; k < 8; k++) o.set(k, gelu_f(a.get(k)));
            st_pack_cs(out + i * 8, o);
        }
        if (i < n % 8) out[np * 8 + i] = from_f<T>(gelu_f(to_f<T>(x[np * 8 + i])));
    } else {
        if (i < n) out[i] = from_f<T>(gelu_f(to_f<T>(x[i])));
    }
}

template <typename T, bool VEC>
__global__ void gelu_backward_kernel(T *dx, const T *__restrict__ x, const T *dy, size_t n) {
    const size_t i = (size_t)blockIdx.x * blockDim.x + threadIdx.x;
    if constexpr (VEC) {
        const size_t np = n / 8;
        if (i < np) {
            const Pack<T> a = ld_pack_cs(x + i * 8);
            const Pack<T> g = ld_pack_plain(dy + i * 8); /* dx may alias dy */
            Pack<T> o;
#pragma unroll
            for (int k = 0; k < 8; k++) o.set(k, g.get(k) * gelu_grad_f(a.get(k)));
            st_pack_cs(dx + i * 8, o);
        }
        if (i < n % 8) {
            const size_t j = np * 8 + i;
            dx[j] = from_f<T>(to_f<T>(dy[j]) * gelu_grad_f(to_f<T>(x[j])));
        }
    } else {
        if (i < n) dx[i] = from_f<T>(to_f<T>(dy[i]) * gelu_grad_f(to_f<T>(x[i])));
    }
}

template <typename T>
static cudaError_t gelu_forward(T *out, const T *x, size_t n, cudaStream_t stream) {
    if (n == 0) return cudaSuccess;
    SX_REQUIRE(out && x);
    if (sx_aligned16(out) && sx_aligned16(x))
        gelu_forward_kernel<T, true><<<sx_blocks(n / 8 > 8 ? n / 8 : 8, EW_THREADS), EW_THREADS, 0, stream>>>(
            out, x, n);
    else
        gelu_forward_kernel<T, false><<<sx_blocks(n, EW_THREADS), EW_THREADS, 0, stream>>>(out, x, n);
    SX_LAUNCHED();
}

template <typename T>
static cudaError_t gelu_backward(T *dx, const T *x, const T *dy, size_t n, cudaStream_t stream) {
    if (n == 0) return cudaSuccess;
    SX_REQUIRE(dx && x && dy);
    if (sx_aligned16(dx) && sx_aligned16(x) && sx_aligned16(dy))
        gelu_backward_kernel<T, true><<<sx_blocks(n / 8 > 8 ? n / 8 : 8, EW_THREADS), EW_THREADS, 0, stream>>>(
            dx, x, dy, n);
    else
        gelu_backward_kernel<T, false><<<sx_blocks(n, EW_THREADS), EW_THREADS, 0, stream>>>(
            dx, x, dy, n);
    SX_LAUNCHED();
}

/* ----------------------------------------------------------------- SwiGLU */

template <typename T, bool VEC>
__global__ void swiglu_forward_kernel(T *__restrict__ out, const T *__restrict__ gate,
                                      const T *__restrict__ up, int N, int H, int ld) {
    constexpr int P = VEC ? 8 : 1;
    const size_t i = ((size_t)blockIdx.x * blockDim.x + threadIdx.x) * P;
    if (i >= (size_t)N * H) return;
    const size_t n = i / H, h = i % H, src = n * ld + h;
    if constexpr (VEC) {
        const Pack<T> g = ld_pack_cs(gate + src), u = ld_pack_cs(up + src);
        Pack<T> o;
#pragma unroll
        for (int k = 0; k < 8; k++) {
            const float z = g.get(k);
            o.set(k, z * sigmoid_f(z) * u.get(k));
        }
        st_pack_cs(out + i, o);
    } else {
        const float z = to_f<T>(gate[src]);
        out[i] = from_f<T>(z * sigmoid_f(z) * to_f<T>(up[src]));
    }
}

template <typename T, bool VEC>
__global__ void swiglu_backward_kernel(T *__restrict__ dgate, T *__restrict__ dup,
                                       const T *__restrict__ dout, const T *__restrict__ gate,
                                       const T *__restrict__ up, int N, int H, int ld) {
    constexpr int P = VEC ? 8 : 1;
    const size_t i = ((size_t)blockIdx.x * blockDim.x + threadIdx.x) * P;
    if (i >= (size_t)N * H) return;
    const size_t n = i / H, h = i % H, src = n * ld + h;
    if constexpr (VEC) {
        const Pack<T> g = ld_pack_cs(gate + src), u = ld_pack_cs(up + src), d = ld_pack_cs(dout + i);
        Pack<T> og, ou;
#pragma unroll
        for (int k = 0; k < 8; k++) {
            const float z = g.get(k), s = sigmoid_f(z), dd = d.get(k);
            og.set(k, dd * u.get(k) * s * (1.0f + z * (1.0f - s)));
            ou.set(k, dd * z * s);
        }
        st_pack_cs(dgate + src, og);
        st_pack_cs(dup + src, ou);
    } else {
        const float z = to_f<T>(gate[src]), s = sigmoid_f(z), dd = to_f<T>(dout[i]);
        const float u = to_f<T>(up[src]);
        dgate[src] = from_f<T>(dd * u * s * (1.0f + z * (1.0f - s)));
        dup[src] = from_f<T>(dd * z * s);
    }
}

template <typename T>
static cudaError_t swiglu_forward(T *out, const T *gate, const T *up, int N, int H, int ld, cudaStream_t stream) {
    SX_REQUIRE(N >= 0 && H >= 0 && ld >= H);
    if (N == 0 || H == 0) return cudaSuccess;
    SX_REQUIRE(out && gate && up);
    const size_t n = (size_t)N * H;
    if (H % 8 == 0 && ld % 8 == 0 && sx_aligned16(out) && sx_aligned16(gate) && sx_aligned16(up))
        swiglu_forward_kernel<T, true><<<sx_blocks(n / 8, EW_THREADS), EW_THREADS, 0, stream>>>(
            out, gate, up, N, H, ld);
    else
        swiglu_forward_kernel<T, false><<<sx_blocks(n, EW_THREADS), EW_THREADS, 0, stream>>>(
            out, gate, up, N, H, ld);
    SX_LAUNCHED();
}

template <typename T>
static cudaError_t swiglu_backward(T *dgate, T *dup, const T *dout, const T *gate, const T *up, int N, int H,
                                   int ld, cudaStream_t stream) {
    SX_REQUIRE(N >= 0 && H >= 0 && ld >= H);
    if (N == 0 || H == 0) return cudaSuccess;
    SX_REQUIRE(dgate && dup && dout && gate && up);
    const size_t n = (size_t)N * H;
    if (H % 8 == 0 && ld % 8 == 0 && sx_aligned16(dgate) && sx_aligned16(dup) && sx_aligned16(dout) &&
        sx_aligned16(gate) && sx_aligned16(up))
        swiglu_backward_kernel<T, true><<<sx_blocks(n / 8, EW_THREADS), EW_THREADS, 0, stream>>>(
            dgate, dup, dout, gate, up, N, H, ld);
    else
        swiglu_backward_kernel<T, false><<<sx_blocks(n, EW_THREADS), EW_THREADS, 0, stream>>>(
            dgate, dup, dout, gate, up, N, H, ld);
    SX_LAUNCHED();
}

/* --------------------------------------------------------------- residual */

template <typename T, bool VEC>
__global__ void residual_kernel(T *out, T *copy, const T *a, const T *b, size_t n) {
    const size_t i = (size_t)blockIdx.x * blockDim.x + threadIdx.x;
    if constexpr (VEC) {
        const size_t np = n / 8;
        if (i < np) {
            const Pack<T> x = ld_pack_plain(a + i * 8), y = ld_pack_plain(b + i * 8);
            Pack<T> o;
#pragma unroll
            for (int k = 0; k < 8; k++) o.set(k, x.get(k) + y.get(k));
            st_pack(out + i * 8, o);
            if (copy) st_pack_cs(copy + i * 8, o);
        }
        if (i < n % 8) {
            const size_t j = np * 8 + i;
            const T v = from_f<T>(to_f<T>(a[j]) + to_f<T>(b[j]));
            out[j] = v;
            if (copy) copy[j] = v;
        }
    } else {
        if (i < n) {
            const T v = from_f<T>(to_f<T>(a[i]) + to_f<T>(b[i]));
            out[i] = v;
            if (copy) copy[i] = v;
        }
    }
}

template <typename T>
static cudaError_t residual_add(T *out, T *copy, const T *a, const T *b, size_t n, cudaStream_t stream) {
    if (n == 0) return cudaSuccess;
    SX_REQUIRE(out && a && b);
    if (sx_aligned16(out) && sx_aligned16(a) && sx_aligned16(b) && (!copy || sx_aligned16(copy)))
        residual_kernel<T, true><<<sx_blocks(n / 8 > 8 ? n / 8 : 8, EW_THREADS), EW_THREADS, 0, stream>>>(
            out, copy, a, b, n);
    else
        residual_kernel<T, false><<<sx_blocks(n, EW_THREADS), EW_THREADS, 0, stream>>>(
            out, copy, a, b, n);
    SX_LAUNCHED();
}

/* ---------------------------------------------------------------- C API */

extern "C" cudaError_t sx_gelu_forward(sx_bf16 *out, const sx_bf16 *x, size_t n, cudaStream_t stream) {
    return gelu_forward<bf16>((bf16 *)out, (const bf16 *)x, n, stream);
}

extern "C" cudaError_t sx_gelu_forward_f16(sx_f16 *out, const sx_f16 *x, size_t n, cudaStream_t stream) {
    return gelu_forward<f16>((f16 *)out, (const f16 *)x, n, stream);
}

extern "C" cudaError_t sx_gelu_backward(sx_bf16 *dx, const sx_bf16 *x, const sx_bf16 *dy, size_t n,
                                        cudaStream_t stream) {
    return gelu_backward<bf16>((bf16 *)dx, (const bf16 *)x, (const bf16 *)dy, n, stream);
}

extern "C" cudaError_t sx_gelu_backward_f16(sx_f16 *dx, const sx_f16 *x, const sx_f16 *dy, size_t n,
                                            cudaStream_t stream) {
    return gelu_backward<f16>((f16 *)dx, (const f16 *)x, (const f16 *)dy, n, stream);
}

extern "C" cudaError_t sx_swiglu_forward(sx_bf16 *out, const sx_bf16 *gate, const sx_bf16 *up, int N, int H,
                                         int ld, cudaStream_t stream) {
    return swiglu_forward<bf16>((bf16 *)out, (const bf16 *)gate, (const bf16 *)up, N, H, ld, stream);
}

extern "C" cudaError_t sx_swiglu_forward_f16(sx_f16 *out, const sx_f16 *gate, const sx_f16 *up, int N, int H,
                                             int ld, cudaStream_t stream) {
    return swiglu_forward<f16>((f16 *)out, (const f16 *)gate, (const f16 *)up, N, H, ld, stream);
}

extern "C" cudaError_t sx_swiglu_backward(sx_bf16 *dgate, sx_bf16 *dup, const sx_bf16 *dout, const sx_bf16 *gate,
                                          const sx_bf16 *up, int N, int H, int ld, cudaStream_t stream) {
    return swiglu_backward<bf16>((bf16 *)dgate, (bf16 *)dup, (const bf16 *)dout, (const bf16 *)gate,
                                 (const bf16 *)up, N, H, ld, stream);
}

extern "C" cudaError_t sx_swiglu_backward_f16(sx_f16 *dgate, sx_f16 *dup, const sx_f16 *dout, const sx_f16 *gate,
                                              const sx_f16 *up, int N, int H, int ld, cudaStream_t stream) {
    return swiglu_backward<f16>((f16 *)dgate, (f16 *)dup, (const f16 *)dout, (const f16 *)gate, (const f16 *)up,
                                N, H, ld, stream);
}

extern "C" cudaError_t sx_residual_add(sx_bf16 *out, sx_bf16 *copy, const sx_bf16 *a, const sx_bf16 *b, size_t n,
                                       cudaStream_t stream) {
    return residual_add<bf16>((bf16 *)out, (bf16 *)copy, (const bf16 *)a, (const bf16 *)b, n, stream);
}

extern "C" cudaError_t sx_residual_add_f16(sx_f16 *out, sx_f16 *copy, const sx_f16 *a, const sx_f16 *b, size_t n,
                                           cudaStream_t stream) {
    return residual_add<f16>((f16 *)out, (f16 *)copy, (const f16 *)a, (const f16 *)b, n, stream);
}
