/* Host helpers of the dev/cuda programs: data to and from the GPU, the check against the CPU
 * reference (kernels/reference.c, float64) and the timing against a device-to-device copy.
 * The check's measure is test_kernels': the relative L2 error of the whole output; the timing is
 * bench_kernels': the median of ITERS runs, each after a read of 256 MiB that evicts the inputs
 * from L2, against a copy that moves the same bytes (read + write) timed the same way. */
#ifndef SEXTANT_DEV_UTIL_H
#define SEXTANT_DEV_UTIL_H

#include <algorithm>
#include <functional>
#include <vector>
#include "gpu_util.h"
#include "reference.h"

typedef std::vector<double> vec;

static inline vec dev_randn(size_t n, double mean, double sd) {
    vec v(n);
    for (double &x : v) x = mean + sd * rng_normal();
    return v;
}

/* to the GPU as bf16 (es = 2) or fp32 (es = 4); h is rounded to what the GPU holds, so that the
 * reference sees the same inputs */
static inline void *dev_up(vec &h, int es) {
    void *d = dmalloc(h.size() * es);
    if (es == 2) {
        std::vector<uint16_t> b(h.size());
        for (size_t i = 0; i < h.size(); i++) {
            b[i] = sx_ref_f2bf((float)h[i]);
            h[i] = sx_ref_bf2f(b[i]);
        }
        CK(cudaMemcpy(d, b.data(), b.size() * 2, cudaMemcpyHostToDevice));
    } else {
        std::vector<float> b(h.begin(), h.end());
        for (size_t i = 0; i < h.size(); i++) h[i] = b[i];
        CK(cudaMemcpy(d, b.data(), b.size() * 4, cudaMemcpyHostToDevice));
    }
    return d;
}
static inline vec dev_down(const void *d, size_t n, int es) {
    vec h(n);
    if (es == 2) {
        std::vector<uint16_t> b(n);
        CK(cudaMemcpy(b.data(), d, n * 2, cudaMemcpyDeviceToHost));
        for (size_t i = 0; i < n; i++) h[i] = sx_ref_bf2f(b[i]);
    } else {
        std::vector<float> b(n);
        CK(cudaMemcpy(b.data(), d, n * 4, cudaMemcpyDeviceToHost));
        for (size_t i = 0; i < n; i++) h[i] = b[i];
    }
    return h;
}
static inline std::vector<uint8_t> dev_raw(const void *d, size_t bytes) {
    std::vector<uint8_t> b(bytes);
    CK(cudaMemcpy(b.data(), d, bytes, cudaMemcpyDeviceToHost));
    return b;
}

static int g_dev_failed = 0;

/* relative L2 error of got against ref; prints one line, counts a failure */
static inline bool dev_check(const char *what, const vec &got, const vec &ref, double tol) {
    double num = 0.0, den = 0.0;
    size_t bad = 0;
    for (size_t i = 0; i < ref.size() && i < got.size(); i++) {
        if (!isfinite(got[i])) {
            bad++;
            continue;
        }
        num += (got[i] - ref[i]) * (got[i] - ref[i]);
        den += ref[i] * ref[i];
    }
    const double rel = den > 0 ? sqrt(num / den) : sqrt(num);
    const bool ok = bad == 0 && got.size() == ref.size() && rel <= tol;
    printf("  %-28s rel_err %.3e (tol %.0e) %s\n", what, rel, tol, ok ? "PASS" : "FAIL");
    if (!ok) g_dev_failed++;
    return ok;
}
static inline void dev_check_true(const char *what, bool ok) {
    printf("  %-28s %s\n", what, ok ? "PASS" : "FAIL");
    if (!ok) g_dev_failed++;
}

/* ------------------------------------------------------------------ timing */

static const int DEV_ITERS = 100, DEV_WARMUP = 5;

__global__ void dev_flush_kernel(const int4 *p, size_t n, int *sink) {
    int acc = 0;
    for (size_t i = (size_t)blockIdx.x * blockDim.x + threadIdx.x; i < n; i += (size_t)gridDim.x * blockDim.x) {
        const int4 v = __ldcg(p + i);
        acc ^= v.x ^ v.y ^ v.z ^ v.w;
    }
    if (acc == 0x12345678) *sink = acc;
}

/* a read of 256 MiB on the default stream, which evicts whatever the L2 held */
static inline void dev_evict_l2(void) {
    static int4 *flush = NULL;
    static int *sink = NULL;
    const size_t flush_n = (256u << 20) / sizeof(int4);
    if (!flush) {
        flush = (int4 *)dmalloc(flush_n * sizeof(int4));
        sink = (int *)dmalloc(sizeof(int));
        CK(cudaMemset(flush, 1, flush_n * sizeof(int4)));
    }
    dev_flush_kernel<<<1024, 512>>>(flush, flush_n, sink);
}

/* median time of fn in microseconds, L2 evicted before every run */
static inline double dev_time_us(const std::function<void()> &fn) {
    static cudaEvent_t e0, e1;
    static int events = 0;
    if (!events) {
        CK(cudaEventCreate(&e0));
        CK(cudaEventCreate(&e1));
        events = 1;
    }
    for (int i = 0; i < DEV_WARMUP; i++) fn();
    CK(cudaDeviceSynchronize());
    std::vector<float> t(DEV_ITERS);
    for (int i = 0; i < DEV_ITERS; i++) {
        dev_evict_l2();
        CK(cudaEventRecord(e0));
        fn();
        CK(cudaEventRecord(e1));
        CK(cudaEventSynchronize(e1));
        CK(cudaEventElapsedTime(&t[i], e0, e1));
    }
    CK(cudaGetLastError());
    std::sort(t.begin(), t.end());
    return t[DEV_ITERS / 2] * 1e3;
}

/* a device-to-device copy of bytes / 2 (bytes moved: read + write) */
static inline double dev_copy_us(double bytes) {
    const size_t n = (size_t)(bytes / 2);
    void *a = dmalloc(n), *b = dmalloc(n);
    CK(cudaMemset(a, 0x3c, n));
    const double us = dev_time_us([&] { CK(cudaMemcpyAsync(b, a, n, cudaMemcpyDeviceToDevice, 0)); });
    CK(cudaFree(a));
    CK(cudaFree(b));
    return us;
}

/* A GEMM shape of the programs that time cuBLAS's (C[m, n] over k), by name. */
typedef struct {
    const char *name;
    int m, n, k;
} dev_gemm_shape;

/* The median of timings (copied: the caller's order stays). */
static inline float dev_median(std::vector<float> v) {
    std::sort(v.begin(), v.end());
    return v[v.size() / 2];
}

/* The shape a program was asked for by name (argv[1]): its index among the n shapes, -1 for every shape (no
 * argument), -2 after one line on stderr for a name that is none of them. */
static inline int dev_shape_arg(int argc, char **argv, const char *program, const dev_gemm_shape *shapes, int n) {
    if (argc < 2) return -1;
    for (int i = 0; i < n; i++)
        if (!strcmp(argv[1], shapes[i].name)) return i;
    fprintf(stderr, "%s: unknown shape '%s' (", program, argv[1]);
    for (int i = 0; i < n; i++) fprintf(stderr, "%s%s", i ? ", " : "", shapes[i].name);
    fprintf(stderr, ")\n");
    return -2;
}

/* one benchmark line: bytes = the fewest bytes the operation must move */
static inline void dev_report(int version, const char *what, double bytes, double us, double copy_us) {
    const double gbs = bytes / (us * 1e-6) / 1e9, cgbs = bytes / (copy_us * 1e-6) / 1e9;
    printf("version %d %-40s %9.1f us %7.0f GB/s  copy %7.0f GB/s  %5.1f%% of copy\n", version, what, us, gbs, cgbs,
           100.0 * gbs / cgbs);
    fflush(stdout);
}

#endif
