/* CPU references of every kernel in kernels.h: plain C11, float64 throughout.
 * Same arguments and semantics as the kernels ("=" overwrites, "+=" accumulates), with
 * double arrays in place of bf16/fp32 ones.  Slow and simple on purpose: each is the
 * textbook formula, loop by loop.  tests/gpu/test_reference.c checks every backward
 * against central finite differences of its forward. */
#ifndef SEXTANT_KERNELS_REFERENCE_H
#define SEXTANT_KERNELS_REFERENCE_H

#include <stddef.h>
#include <stdint.h>
#include <string.h>

#ifdef __cplusplus
extern "C" {
#endif

/* bfloat16 <-> float on the host, round to nearest even (NaN stays NaN) */
static inline uint16_t sx_ref_f2bf(float f) {
    uint32_t u;
    memcpy(&u, &f, 4);
    if ((u & 0x7fffffffu) > 0x7f800000u) return (uint16_t)((u >> 16) | 0x40u);
    u += 0x7fffu + ((u >> 16) & 1u);
    return (uint16_t)(u >> 16);
}
static inline float sx_ref_bf2f(uint16_t b) {
    uint32_t u = (uint32_t)b << 16;
    float f;
    memcpy(&f, &u, 4);
    return f;
}

/* IEEE binary16 (half) <-> float on the host, round to nearest even: subnormals kept, values
 * from 65520 up become infinity, NaN stays NaN */
static inline uint16_t sx_ref_f2h(float f) {
    uint32_t u;
    memcpy(&u, &f, 4);
    const uint16_t sign = (uint16_t)((u >> 16) & 0x8000u);
    const uint32_t a = u & 0x7fffffffu;
    if (a > 0x7f800000u) return sign | 0x7e00u;
    if (a >= 0x477ff000u) return sign | 0x7c00u;
    if (a >= 0x38800000u) { /* normal: rebias the exponent by 127 - 15, round the 13 dropped bits */
        uint32_t r = a - 0x38000000u;
        r += 0xfffu + ((r >> 13) & 1u);
        return sign | (uint16_t)(r >> 13);
    }
    /* subnormal half (or zero): the value in units of 2^-24 */
    const uint32_t e = a >> 23, mant = (a & 0x7fffffu) | 0x800000u;
    const uint32_t shift = 126u - e; /* >= 14 */
    if (shift >= 32u) return sign;
    uint32_t q = mant >> shift;
    const uint32_t rem = mant & ((1u << shift) - 1u), half = 1u << (shift - 1u);
    if (rem > half || (rem == half && (q & 1u))) q++;
    return sign | (uint16_t)q;
}
static inline float sx_ref_h2f(uint16_t h) {
    const uint32_t sign = (uint32_t)(h & 0x8000u) << 16, e = (h >> 10) & 0x1fu, m = h & 0x3ffu;
    uint32_t u;
    if (e == 0x1fu) u = sign | 0x7f800000u | (m << 13);
    else if (e) u = sign | ((e + 112u) << 23) | (m << 13);
    else {
        float v = (float)m * 5.9604644775390625e-08f; /* m 2^-24, exact */
        memcpy(&u, &v, 4);
        u |= sign;
    }
    float f;
    memcpy(&f, &u, 4);
    return f;
}

void ref_embedding_forward(double *out, const int32_t *ids, const double *wte, const double *wpe,
                           int B, int T, int C, int V);
void ref_embedding_backward(double *dwte, double *dwpe, const double *dout, const int32_t *ids,
                            int B, int T, int C, int V);

void ref_layernorm_forward(double *out, double *mean, double *rstd, const double *x, const double *w,
                           const double *b, int N, int C, double eps);
void ref_layernorm_backward(double *dx, double *dw, double *db, const double *dy, const double *x,
                            const double *w, const double *mean, const double *rstd, int N, int C,
                            int dx_accumulate);
void ref_rmsnorm_forward(double *out, double *rstd, const double *x, const double *w, int N, int C,
                         double eps);
void ref_rmsnorm_backward(double *dx, double *dw, const double *dy, const double *x, const double *w,
                          const double *rstd, int N, int C, int dx_accumulate);

void ref_gelu_forward(double *out, const double *x, size_t n);
void ref_gelu_backward(double *dx, const double *x, const double *dy, size_t n);
void ref_swiglu_forward(double *out, const double *gate, const double *up, int N, int H, int ld);
void ref_swiglu_backward(double *dgate, double *dup, const double *dout, const double *gate,
                         const double *up, int N, int H, int ld);
void ref_residual_add(double *out, const double *a, const double *b, size_t n);

/* RoPE (sx_rope_forward/backward), in place on the q and k heads of qkv [B*T rows, row
 * stride ld]: rotate half, pair (i, i + D/2) of every one of the H + KV heads at the row's
 * start rotated by t * theta^(-2i/D), t = row mod T, the angle and its cos/sin in float64;
 * backward = the rotation by -angle.  Columns from (H+KV)*D on are not touched. */
void ref_rope_forward(double *qkv, int B, int T, int H, int KV, int D, size_t ld, double theta);
void ref_rope_backward(double *dqkv, int B, int T, int H, int KV, int D, size_t ld, double theta);

void ref_softmax_causal_forward(double *out, const double *s, int BH, int T, double scale);
void ref_softmax_causal_backward(double *ds, const double *p, const double *dp, int BH, int T,
                                 double scale);

/* Causal attention (sx_flash_attention_*): q [B,T,H,D] row stride ldq, k and v [B,T,KV,D]
 * row stride ldkv, out [B,T,H,D] contiguous, lse [B,H,T] (may be NULL); kv head h/(H/KV). */
void ref_attention_forward(double *out, double *lse, const double *q, const double *k, const double *v, int B,
                           int T, int H, int KV, int D, size_t ldq, size_t ldkv, double scale);
/* dq (layout of q), dk and dv (layout of k) (=, only the head slices are written); P and
 * dO.O recomputed from q, k, v, dout in float64. */
void ref_attention_backward(double *dq, double *dk, double *dv, const double *dout, const double *q,
                            const double *k, const double *v, int B, int T, int H, int KV, int D, size_t ldq,
                            size_t ldkv, double scale);

/* loss[N]; dlogits [N, Vp] may be NULL */
void ref_cross_entropy(double *loss, double *dlogits, const double *logits, const int32_t *targets,
                       int N, int V, int Vp, double dloss);

void ref_adamw(double *p, double *m, double *v, const double *g, size_t n, double lr, double beta1,
               double beta2, double eps, double weight_decay, int step, double grad_scale);

#ifdef __cplusplus
}
#endif

#endif
