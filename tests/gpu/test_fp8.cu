/* GPU tests of kernels/fp8.cu against a host reference, in test_kernels' manner: fresh
 * random inputs (seed printed; --seed S repeats a run), sizes that are not multiples of the
 * 32 x 32 tile, outputs poisoned with 0xFF before the launch.  Exact checks:
 *   - amax is the largest |x| of the bf16 values (a max has one answer in any order);
 *   - every FP8 byte, plain and transposed, is the host's round-to-nearest-even of
 *     x * (max / amax) with saturation, for E4M3 and E5M2: the host decodes all 256 codes and
 *     picks the nearest, so the reference shares no code with the kernel;
 *   - 1 / scale is amax / max; an all-zero tensor gets scale 1; bad arguments are refused.
 * Exit 1 if any check fails, 2 on a CUDA error.   test_fp8 [--seed S] */
#include <string.h>
#include <time.h>
#include <vector>
#include "kernels.h"
#include "reference.h"
#include "gpu_util.h"

static int g_fail = 0, g_checks = 0;

static void report(const char *name, const char *size, bool ok, const char *what) {
    printf("%-28s %-22s %s (%s)\n", name, size, ok ? "PASS" : "FAIL", what);
    g_checks++;
    if (!ok) g_fail++;
}

/* the value of an FP8 code; NaN for E4M3's 0x7f/0xff and E5M2's infinities and NaNs */
static double decode(uint8_t q, sx_fp8_format f) {
    const int mbits = f == SX_E4M3 ? 3 : 2, bias = f == SX_E4M3 ? 7 : 15;
    const int e = (q & 0x7f) >> mbits, m = q & ((1 << mbits) - 1);
    const double sign = q & 0x80 ? -1.0 : 1.0;
    if (f == SX_E4M3 && e == 15 && m == 7) return NAN;
    if (f == SX_E5M2 && e == 31) return NAN;
    if (e == 0) return sign * ldexp((double)m, 1 - bias - mbits);
    return sign * ldexp((double)((1 << mbits) + m), e - bias - mbits);
}

/* nearest finite code to v, ties to the even mantissa, beyond the range the largest */
static uint8_t encode(float v, sx_fp8_format f) {
    int best = -1;
    double best_d = INFINITY;
    for (int q = 0; q < 256; q++) {
        const double d = decode((uint8_t)q, f);
        if (isnan(d) || (q == 0x80)) continue; /* -0 only for negative zero inputs, handled below */
        const double dist = fabs(d - (double)v);
        if (dist < best_d || (dist == best_d && (q & 1) == 0 && (best & 1) == 1)) {
            best_d = dist;
            best = q;
        }
    }
    if (best == 0 && signbit(v)) best = 0x80; /* a negative value that rounds to zero keeps its sign */
    return (uint8_t)best;
}

static void test_cast(int rows, int cols, sx_fp8_format f, double sigma) {
    const size_t n = (size_t)rows * cols;
    std::vector<uint16_t> x(n);
    float amax = 0.0f;
    for (size_t i = 0; i < n; i++) {
        x[i] = sx_ref_f2bf((float)(sigma * rng_normal()));
        amax = fmaxf(amax, fabsf(sx_ref_bf2f(x[i])));
    }
    void *dx = dmalloc(n * 2), *dq = dmalloc(n), *dqt = dmalloc(n), *dslots = dmalloc(8);
    CK(cudaMemcpy(dx, x.data(), n * 2, cudaMemcpyHostToDevice));
    CK(cudaMemset(dq, 0xff, n));
    CK(cudaMemset(dqt, 0xff, n));
    CK(cudaMemset(dslots, 0xff, 8));
    float *d_amax = (float *)dslots, *d_sinv = (float *)dslots + 1;
    CK(sx_fp8_amax(d_amax, (const sx_bf16 *)dx, n, 0));
    CK(sx_fp8_cast((sx_fp8 *)dq, (sx_fp8 *)dqt, d_sinv, (const sx_bf16 *)dx, d_amax, rows, cols, f, 0));
    CK(cudaDeviceSynchronize());
    float got[2];
    std::vector<uint8_t> q(n), qt(n);
    CK(cudaMemcpy(got, dslots, 8, cudaMemcpyDeviceToHost));
    CK(cudaMemcpy(q.data(), dq, n, cudaMemcpyDeviceToHost));
    CK(cudaMemcpy(qt.data(), dqt, n, cudaMemcpyDeviceToHost));
    const float fmt_max = f == SX_E4M3 ? SX_E4M3_MAX : SX_E5M2_MAX, scale = amax > 0.0f ? fmt_max / amax : 1.0f;
    char size[64];
    snprintf(size, sizeof size, "%dx%d %s", rows, cols, f == SX_E4M3 ? "e4m3" : "e5m2");
    report("fp8_amax", size, got[0] == amax, "exact");
    report("fp8_cast.scale_inv", size, got[1] == 1.0f / scale, "1 / (max / amax)");
    size_t wrong = 0, wrong_t = 0;
    for (int r = 0; r < rows; r++)
        for (int c = 0; c < cols; c++) {
            const uint8_t want = encode(sx_ref_bf2f(x[(size_t)r * cols + c]) * scale, f);
            wrong += q[(size_t)r * cols + c] != want;
            wrong_t += qt[(size_t)c * rows + r] != want;
        }
    char what[96];
    snprintf(what, sizeof what, "%zu of %zu bytes differ from the host's rounding", wrong, n);
    report("fp8_cast.out", size, wrong == 0, what);
    snprintf(what, sizeof what, "%zu of %zu bytes differ, transposed", wrong_t, n);
    report("fp8_cast.out_t", size, wrong_t == 0, what);
    CK(cudaFree(dx)); CK(cudaFree(dq)); CK(cudaFree(dqt)); CK(cudaFree(dslots));
}

static void test_zero_and_errors(void) {
    void *dx = dmalloc(64 * 2), *dq = dmalloc(64), *dslots = dmalloc(8);
    CK(cudaMemset(dx, 0, 64 * 2));
    float *d_amax = (float *)dslots, *d_sinv = (float *)dslots + 1;
    CK(sx_fp8_amax(d_amax, (const sx_bf16 *)dx, 64, 0));
    CK(sx_fp8_cast((sx_fp8 *)dq, NULL, d_sinv, (const sx_bf16 *)dx, d_amax, 8, 8, SX_E4M3, 0));
    CK(cudaDeviceSynchronize());
    float got[2];
    CK(cudaMemcpy(got, dslots, 8, cudaMemcpyDeviceToHost));
    report("fp8_cast.zero_tensor", "8x8", got[0] == 0.0f && got[1] == 1.0f, "amax 0, scale 1");
    bool refused = sx_fp8_cast(NULL, NULL, d_sinv, (const sx_bf16 *)dx, d_amax, 8, 8, SX_E4M3, 0) == cudaErrorInvalidValue &&
                   sx_fp8_cast((sx_fp8 *)dq, NULL, d_sinv, (const sx_bf16 *)dx, d_amax, -1, 8, SX_E4M3, 0) ==
                       cudaErrorInvalidValue &&
                   sx_fp8_amax(NULL, (const sx_bf16 *)dx, 64, 0) == cudaErrorInvalidValue;
    report("fp8.bad_arguments", "-", refused, "no output, negative size, no amax");
    CK(cudaFree(dx)); CK(cudaFree(dq)); CK(cudaFree(dslots));
}

int main(int argc, char **argv) {
    uint64_t seed = (uint64_t)time(NULL);
    for (int i = 1; i < argc; i++) {
        if (!strcmp(argv[i], "--seed") && i + 1 < argc) seed = strtoull(argv[++i], NULL, 10);
        else { fprintf(stderr, "usage: %s [--seed S]\n", argv[0]); return 2; }
    }
    g_rng = seed;
    printf("# test_fp8: seed %llu\n", (unsigned long long)seed);
    test_cast(97, 131, SX_E4M3, 1.0);
    test_cast(97, 131, SX_E5M2, 1e-3);
    test_cast(512, 768, SX_E4M3, 0.02);
    test_cast(33, 2049, SX_E5M2, 3.0);
    test_zero_and_errors();
    printf("# test_fp8: %d checks, %d failed\n", g_checks, g_fail);
    return g_fail ? 1 : 0;
}
