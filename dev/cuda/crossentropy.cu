/* The fused softmax cross-entropy (loss per token and dlogits in one pass), in llm.c's dev/cuda
 * manner: the CPU reference (kernels/reference.c), every layout that was measured, a check of each
 * against the reference and a benchmark of each against a device-to-device copy.  The kernels and
 * their launches are kernels/crossentropy.cuh's, the ones production uses; the version numbers
 * are the layout numbers that the reports and SEXTANT_CE_LAYOUT used:
 *
 *   version 1: one 1024-thread block per SM with two row buffers in shared memory (the next row
 *     copied in while this one is reduced).  Rows that fit two per SM only.
 *   version 2: two 512-thread blocks per SM with one row buffer each: one block loads while the
 *     other reduces or stores.  Production's choice where two rows fit in an SM.
 *   version 3: the first fallback: one block per row, nothing staged (the row read twice).
 *   version 4: the staged fallback: one persistent block per SM, as much of the row as fits kept
 *     in shared memory.  Production's choice before sm_90 where a row does not fit.
 *   version 5: a cluster of 2, 4 or 8 blocks of 512 threads per row (the smallest leaving two
 *     blocks per SM), each holding a slice.  Production's choice on sm_90 where a row does not fit.
 *   version 6: the same with clusters of 8.   version 7: clusters of blocks of 256 threads.
 * Versions 4 and 5 run through the library (sx_cross_entropy_tune, kernels_internal.h).
 *
 *   crossentropy [version [N V Vp]]
 *     version: 1 to 7 (0 or none: every version); N V Vp: the benchmark's rows, vocabulary and
 *     padded row length (default GPT-2 124M's 32768 x 50257, padded to 50304).
 * The check runs at several sizes first; the exit status is 1 if any check failed.
 * Build: make dev (dev/cuda/Makefile). */
#include <string.h>
#include "crossentropy.cuh"
#include "kernels.h"
#include "kernels_internal.h"
#include "dev_util.h"

/* the shared-memory limits that decide which layouts apply */
struct CeLimits { int smem_max, smem_sm; bool fits; };
static CeLimits ce_limits(int Vp) {
    CeLimits l;
    int dev = 0;
    CK(cudaGetDevice(&dev));
    CK(cudaDeviceGetAttribute(&l.smem_max, cudaDevAttrMaxSharedMemoryPerBlockOptin, dev));
    CK(cudaDeviceGetAttribute(&l.smem_sm, cudaDevAttrMaxSharedMemoryPerMultiprocessor, dev));
    const size_t row_bytes = (size_t)Vp * sizeof(bf16); /* as in sx_cross_entropy_fused */
    l.fits = 2 * row_bytes + 1024 <= (size_t)l.smem_max && 2 * (row_bytes + 1024) <= (size_t)l.smem_sm;
    return l;
}

/* the cluster size of version v (5 to 7); 0 where it cannot run */
static int cluster_of(int v, int Vp, const CeLimits &l) {
    if (v == 6) return sx_cc_major() >= 9 && (Vp / 8 + 7) / 8 * 16 + 1024 <= l.smem_max ? 8 : 0;
    return ce_cluster_size(Vp, l.smem_max, l.smem_sm);
}

/* whether version v can run at this row length (Vp % 8 == 0 and aligned buffers assumed) */
static bool applies(int v, int Vp) {
    const CeLimits l = ce_limits(Vp);
    if (v == 1 || v == 2) return l.fits;
    if (v >= 5) return cluster_of(v, Vp, l) > 0;
    return true;
}

static void run_version(int v, float *loss, bf16 *dl, const bf16 *logits, const int32_t *tg, int N, int V, int Vp,
                        float dloss) {
    const CeLimits l = ce_limits(Vp);
    switch (v) {
    case 1: CK((ce_launch_smem<1024, 2>(loss, dl, logits, tg, N, V, Vp, dloss, 0))); break;
    case 2: CK((ce_launch_smem<512, 1>(loss, dl, logits, tg, N, V, Vp, dloss, 0))); break;
    case 3: /* one block per row, nothing staged */
        ce_fused_kernel<true><<<N, CE_THREADS, 0, 0>>>(loss, dl, logits, tg, N, V, Vp, dloss, 0);
        CK(cudaGetLastError());
        break;
    case 4:
    case 5:
        sx_cross_entropy_tune(v);
        CK(sx_cross_entropy_fused(loss, (sx_bf16 *)dl, (const sx_bf16 *)logits, tg, N, V, Vp, dloss, 0));
        sx_cross_entropy_tune(0);
        break;
    case 6: CK(ce_launch_cluster<512>(loss, dl, logits, tg, N, V, Vp, dloss, cluster_of(6, Vp, l), 0)); break;
    default: CK(ce_launch_cluster<256>(loss, dl, logits, tg, N, V, Vp, dloss, cluster_of(7, Vp, l), 0)); break;
    }
}

/* version v against the reference: random logits, every 5th row's target 25 above the rest (a
 * confident prediction, where p - 1 cancels), every 97th target -1 (ignored), padding columns
 * holding NaN bits that must be ignored; then dlogits written over the logits (in place) */
static void check_version(int v, int N, int V, int Vp) {
    if (!applies(v, Vp)) {
        printf("version %d N=%d V=%d Vp=%d: does not apply (shared memory or clusters)\n", v, N, V, Vp);
        return;
    }
    printf("version %d N=%d V=%d Vp=%d\n", v, N, V, Vp);
    const size_t n = (size_t)N * Vp;
    vec x = dev_randn(n, 0, 2.0);
    std::vector<int32_t> tg(N);
    for (int i = 0; i < N; i++) tg[i] = i % 97 == 5 ? -1 : (int32_t)(rng_u64() % (uint64_t)V);
    for (int i = 0; i < N; i += 5)
        if (tg[i] >= 0) x[(size_t)i * Vp + tg[i]] = 25.0;
    void *d_x = dev_up(x, 2), *d_t = dmalloc((size_t)N * 4), *d_loss = dmalloc((size_t)N * 4), *d_d = dmalloc(n * 2);
    CK(cudaMemcpy(d_t, tg.data(), (size_t)N * 4, cudaMemcpyHostToDevice));
    if (Vp > V)
        for (int i = 0; i < N; i++) CK(cudaMemset((bf16 *)d_x + (size_t)i * Vp + V, 0xff, (size_t)(Vp - V) * 2));
    CK(cudaMemset(d_d, 0xff, n * 2));
    const double dloss = 1.0 / N;
    vec loss(N), dl(n);
    ref_cross_entropy(loss.data(), dl.data(), x.data(), tg.data(), N, V, Vp, dloss);
    run_version(v, (float *)d_loss, (bf16 *)d_d, (const bf16 *)d_x, (const int32_t *)d_t, N, V, Vp, (float)dloss);
    dev_check("loss", dev_down(d_loss, N, 4), loss, 1e-5);
    dev_check("dlogits", dev_down(d_d, n, 2), dl, 1e-2);
    run_version(v, (float *)d_loss, (bf16 *)d_x, (const bf16 *)d_x, (const int32_t *)d_t, N, V, Vp, (float)dloss);
    dev_check("dlogits (in place)", dev_down(d_x, n, 2), dl, 1e-2);
    void *p[] = {d_x, d_t, d_loss, d_d};
    for (void *q : p) CK(cudaFree(q));
}

int main(int argc, char **argv) {
    int version = 0, N = 32768, V = 50257, Vp = 50304, npos = 0;
    for (int i = 1; i < argc; i++) {
        if (argv[i][0] != '-' && npos < 4) { /* version, N, V, Vp in that order */
            const int x = atoi(argv[i]);
            if (npos == 0) version = x;
            else if (npos == 1) N = x;
            else if (npos == 2) V = x;
            else Vp = x;
            npos++;
        } else {
            fprintf(stderr, "usage: %s [version [N V Vp]]\n", argv[0]);
            return 2;
        }
    }
    if (version < 0 || version > 7 || N < 1 || V < 1 || Vp < V || Vp % 8) {
        fprintf(stderr, "%s: version must be 1 to 7 (or none: all); N, V positive, Vp >= V a multiple of 8\n", argv[0]);
        return 2;
    }
    const int first = version ? version : 1, last = version ? version : 7;
    /* the check: a GPT-2 row, a row too long for two per SM, LLaMA 3's 128k row, a short row */
    static const int sizes[][3] = {{67, 50257, 50304}, {67, 59999, 60000}, {67, 130001, 130008}, {67, 1001, 1008}};
    for (int v = first; v <= last; v++)
        for (const auto &s : sizes) check_version(v, s[0], s[1], s[2]);
    /* the benchmark: logits read once, dlogits written once, targets read, loss written */
    const size_t n = (size_t)N * Vp;
    void *logits = dmalloc(n * 2), *dl = dmalloc(n * 2), *loss = dmalloc((size_t)N * 4), *tg = dmalloc((size_t)N * 4);
    CK(cudaMemset(logits, 0x3c, n * 2));
    CK(cudaMemset(tg, 0, (size_t)N * 4));
    const double bytes = n * 4.0 + N * 8.0, copy_us = dev_copy_us(bytes);
    char what[96];
    snprintf(what, sizeof what, "cross_entropy_fused N=%d V=%d Vp=%d", N, V, Vp);
    for (int v = first; v <= last; v++) {
        if (!applies(v, Vp)) {
            printf("version %d %-40s does not apply\n", v, what);
            continue;
        }
        const double us = dev_time_us([&] {
            run_version(v, (float *)loss, (bf16 *)dl, (const bf16 *)logits, (const int32_t *)tg, N, V, Vp, 1.0f / N);
        });
        dev_report(v, what, bytes, us, copy_us);
    }
    void *p[] = {logits, dl, loss, tg};
    for (void *q : p) CK(cudaFree(q));
    printf("%s\n", g_dev_failed ? "FAILED" : "all checks passed");
    return g_dev_failed ? 1 : 0;
}
