/* The checking helpers of test_kernels (tests/gpu/test_kernels.cu and test_kernels_attention.cu, one
 * binary): host <-> device copies that round to the storage type first, poison, and the relative-error
 * check against a float64 reference with its per-precision tolerance (test_kernels.cu's header says
 * how).  The counters and --quick are test_kernels.cu's. */
#ifndef SEXTANT_KERNEL_CHECK_H
#define SEXTANT_KERNEL_CHECK_H

#include <math.h>
#include <stdio.h>
#include <vector>
#include "kernels.h"
#include "reference.h"
#include "gpu_util.h"

extern int g_fail, g_checks; /* checks run and failed, over both units */
extern bool g_quick;         /* --quick: small sizes */

typedef std::vector<double> vec;

#define TOL_BF16 1e-2
#define TOL_F16 2e-3 /* half rounding alone is ~2^-12 relative per element, 8 times finer than bf16 */
#define TOL_F32 1e-5


/* ----------------------------------------------------------- host <-> device */

static inline vec randn(size_t n, double mean, double sd) {
    vec v(n);
    for (auto &x : v) x = mean + sd * rng_normal();
    return v;
}
static inline void round_bf16(vec &h) {
    for (auto &x : h) x = sx_ref_bf2f(sx_ref_f2bf((float)x));
}
static inline void round_f32(vec &h) {
    for (auto &x : h) x = (double)(float)x;
}
/* 16-bit storage (bf16 or half): rounds h in place to it, uploads, returns the device copy */
static inline void *up_u16(vec &h, uint16_t (*enc)(float), float (*dec)(uint16_t)) {
    std::vector<uint16_t> b(h.size());
    for (size_t i = 0; i < h.size(); i++) {
        b[i] = enc((float)h[i]);
        h[i] = dec(b[i]);
    }
    void *d = dmalloc(b.size() * 2);
    CK(cudaMemcpy(d, b.data(), b.size() * 2, cudaMemcpyHostToDevice));
    return d;
}
static inline vec down_u16(const void *d, size_t n, float (*dec)(uint16_t)) {
    std::vector<uint16_t> b(n);
    CK(cudaMemcpy(b.data(), d, n * 2, cudaMemcpyDeviceToHost));
    vec h(n);
    for (size_t i = 0; i < n; i++) h[i] = dec(b[i]);
    return h;
}
static inline void *up_bf16(vec &h) { return up_u16(h, sx_ref_f2bf, sx_ref_bf2f); }
static inline void *up_f16(vec &h) { return up_u16(h, sx_ref_f2h, sx_ref_h2f); }
static inline vec down_bf16(const void *d, size_t n) { return down_u16(d, n, sx_ref_bf2f); }
static inline vec down_f16(const void *d, size_t n) { return down_u16(d, n, sx_ref_h2f); }
static inline void *up_f32(vec &h) {
    round_f32(h);
    std::vector<float> b(h.begin(), h.end());
    void *d = dmalloc(b.size() * 4);
    CK(cudaMemcpy(d, b.data(), b.size() * 4, cudaMemcpyHostToDevice));
    return d;
}
static inline void *up_i32(const std::vector<int32_t> &h) {
    void *d = dmalloc(h.size() * 4);
    CK(cudaMemcpy(d, h.data(), h.size() * 4, cudaMemcpyHostToDevice));
    return d;
}
static inline vec down_f32(const void *d, size_t n) {
    std::vector<float> b(n);
    CK(cudaMemcpy(b.data(), d, n * 4, cudaMemcpyDeviceToHost));
    return vec(b.begin(), b.end());
}
static inline vec down(const void *d, size_t n, sx_dtype t) {
    return t == SX_F32 ? down_f32(d, n) : t == SX_F16 ? down_f16(d, n) : down_bf16(d, n);
}
static inline void *up(vec &h, sx_dtype t) { return t == SX_F32 ? up_f32(h) : t == SX_F16 ? up_f16(h) : up_bf16(h); }
static inline void poison(void *d, size_t bytes) { CK(cudaMemset(d, 0xff, bytes)); }
static inline std::vector<uint8_t> raw(const void *d, size_t bytes) {
    std::vector<uint8_t> b(bytes);
    CK(cudaMemcpy(b.data(), d, bytes, cudaMemcpyDeviceToHost));
    return b;
}

/* ----------------------------------------------------------- checking */

static inline void header(void) {
    printf("%-34s %-24s %-5s %10s %10s %8s %7s %s\n", "kernel.output", "size", "prec", "rel_err", "max_abs",
           "tol", "unwrit", "result");
}

/* NaN in ref marks an element that must be NaN in got too (and is left out of the norms) */
static inline void check(const char *name, const char *size, const char *prec, const vec &got, const vec &ref,
                  double tol) {
    double num = 0.0, den = 0.0, maxabs = 0.0;
    size_t bad = 0;
    for (size_t i = 0; i < ref.size(); i++) {
        if (isnan(ref[i])) {
            if (!isnan(got[i])) bad++;
            continue;
        }
        if (!isfinite(got[i])) {
            bad++;
            continue;
        }
        const double d = got[i] - ref[i];
        num += d * d;
        den += ref[i] * ref[i];
        if (fabs(d) > maxabs) maxabs = fabs(d);
    }
    const double rel = den > 0 ? sqrt(num / den) : sqrt(num);
    const bool ok = bad == 0 && rel <= tol && got.size() == ref.size();
    printf("%-34s %-24s %-5s %10.3e %10.3e %8.0e %7zu %s\n", name, size, prec, rel, maxabs, tol, bad,
           ok ? "PASS" : "FAIL");
    fflush(stdout);
    g_checks++;
    if (!ok) g_fail++;
}
static inline void check_true(const char *name, const char *size, bool ok, const char *what) {
    printf("%-34s %-24s %-5s %10s %10s %8s %7s %s (%s)\n", name, size, "-", "-", "-", "-", "-", ok ? "PASS" : "FAIL",
           what);
    g_checks++;
    if (!ok) g_fail++;
}
static inline const char *pname(sx_dtype t) { return t == SX_F32 ? "fp32" : t == SX_F16 ? "fp16" : "bf16"; }
static inline double tol_of(sx_dtype t) { return t == SX_F32 ? TOL_F32 : t == SX_F16 ? TOL_F16 : TOL_BF16; }

#endif
