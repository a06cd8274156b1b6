/* Bandwidth benchmark of the memory-bound kernels at GPT-2 124M sizes
 * (B*T = 32*1024 tokens, C = 768, 4C = 3072, 12 heads, V = 50304, 124.5M parameters), the
 * norm backward also at C = 1024 (N = 32768) and C = 2048, 4096 (N = 8192), the embedding
 * backward also at a LLaMA-style size (N = 4*2048, C = 2048, V = 128256).
 *
 * Each timed run is preceded by a read of a 256 MiB buffer that evicts the inputs from L2,
 * and is bracketed by CUDA events; the figure is the median of ITERS runs after WARMUP runs.
 * "bytes" counts each input read once and each output written once (the fewest bytes the
 * operation must move; workspaces not counted).  The baseline is a device-to-device
 * cudaMemcpy of bytes/2 (so it too moves read + write = bytes), timed the same way in the
 * same run; %copy = kernel GB/s / copy GB/s.
 * Then the fused attention against the unfused path (TFLOP/s; links cuBLAS for the baseline).
 * RoPE rows use GPT-2 and LLaMA (1B, 8B) head shapes, not the GPT-2 sizes above.
 *   bench_kernels [--iters N] [--attention] [--rope] [--sweep] [--norm]
 *     --attention, --rope: that table only; --sweep: the norm and embedding backward rows,
 *     each also with every setting of its tuning knobs (kernels_internal.h); --norm: the norm
 *     rows only (with --sweep: the norm backward sweep only)
 *   bench_kernels --profile rms N C acc impl k depth rows bps
 *     runs one norm backward setting 3 times, untimed (for ncu)
 */
#include <string.h>
#include <algorithm>
#include <functional>
#include <utility>
#include <vector>
#include "kernels.h"
#include "kernels_internal.h"
#include "gpu_util.h"
#include <cublas_v2.h>
#include <cuda_fp16.h>

static int ITERS = 100;
static const int WARMUP = 5;

/* ----------------------------------------------------------- device init */

__device__ __forceinline__ uint32_t hash32(uint64_t x) {
    x ^= x >> 33; x *= 0xff51afd7ed558ccdull; x ^= x >> 33; x *= 0xc4ceb9fe1a85ec53ull; x ^= x >> 33;
    return (uint32_t)x;
}
__device__ __forceinline__ float unif(uint64_t i, uint64_t seed) { /* [-1, 1) */
    return (float)(hash32(i * 0x9e3779b97f4a7c15ull + seed) >> 8) * (2.0f / 16777216.0f) - 1.0f;
}
__global__ void init_bf16(uint16_t *p, size_t n, float scale, float offset, uint64_t seed) {
    for (size_t i = (size_t)blockIdx.x * blockDim.x + threadIdx.x; i < n; i += (size_t)gridDim.x * blockDim.x) {
        float f = offset + scale * unif(i, seed);
        uint32_t u = __float_as_uint(f);
        u += 0x7fffu + ((u >> 16) & 1u);
        p[i] = (uint16_t)(u >> 16);
    }
}
__global__ void init_f16(__half *p, size_t n, float scale, float offset, uint64_t seed) {
    for (size_t i = (size_t)blockIdx.x * blockDim.x + threadIdx.x; i < n; i += (size_t)gridDim.x * blockDim.x)
        p[i] = __float2half_rn(offset + scale * unif(i, seed));
}
__global__ void init_f32(float *p, size_t n, float scale, float offset, bool absval, uint64_t seed) {
    for (size_t i = (size_t)blockIdx.x * blockDim.x + threadIdx.x; i < n; i += (size_t)gridDim.x * blockDim.x) {
        float f = scale * unif(i, seed);
        p[i] = offset + (absval ? fabsf(f) : f);
    }
}
/* skewed ids in [0, V): V * u^3 (many repeats of small ids, like text) */
__global__ void init_ids(int32_t *p, size_t n, int V, uint64_t seed) {
    for (size_t i = (size_t)blockIdx.x * blockDim.x + threadIdx.x; i < n; i += (size_t)gridDim.x * blockDim.x) {
        float u = 0.5f * (unif(i, seed) + 1.0f);
        int id = (int)(V * u * u * u);
        p[i] = id < V ? id : V - 1;
    }
}
__global__ void flush_kernel(const int4 *p, size_t n, int *sink) {
    int acc = 0;
    for (size_t i = (size_t)blockIdx.x * blockDim.x + threadIdx.x; i < n; i += (size_t)gridDim.x * blockDim.x) {
        int4 v = __ldcg(p + i);
        acc ^= v.x ^ v.y ^ v.z ^ v.w;
    }
    if (acc == 0x12345678) *sink = acc;
}

static uint64_t g_seed = 1234;
static void *bf16_buf(size_t n, float scale, float offset = 0.0f) {
    void *p = dmalloc(n * 2);
    init_bf16<<<1024, 256>>>((uint16_t *)p, n, scale, offset, g_seed++);
    CK(cudaGetLastError());
    return p;
}
static void *f16_buf(size_t n, float scale, float offset = 0.0f) {
    void *p = dmalloc(n * 2);
    init_f16<<<1024, 256>>>((__half *)p, n, scale, offset, g_seed++);
    CK(cudaGetLastError());
    return p;
}
static float *f32_buf(size_t n, float scale, float offset = 0.0f, bool absval = false) {
    float *p = (float *)dmalloc(n * 4);
    init_f32<<<1024, 256>>>(p, n, scale, offset, absval, g_seed++);
    CK(cudaGetLastError());
    return p;
}
static int32_t *ids_buf(size_t n, int V) {
    int32_t *p = (int32_t *)dmalloc(n * 4);
    init_ids<<<1024, 256>>>(p, n, V, g_seed++);
    CK(cudaGetLastError());
    return p;
}

/* ----------------------------------------------------------- timing */

static int4 *g_flush;
static size_t g_flush_n;
static int *g_sink;
static cudaEvent_t e0, e1;

struct Stat { double med, lo, hi; };

static Stat time_it(const std::function<void()> &fn) {
    for (int i = 0; i < WARMUP; i++) fn();
    CK(cudaDeviceSynchronize());
    std::vector<float> t(ITERS);
    for (int i = 0; i < ITERS; i++) {
        flush_kernel<<<1024, 512>>>(g_flush, g_flush_n, g_sink);
        CK(cudaEventRecord(e0));
        fn();
        CK(cudaEventRecord(e1));
        CK(cudaEventSynchronize(e1));
        CK(cudaEventElapsedTime(&t[i], e0, e1));
    }
    CK(cudaGetLastError());
    std::sort(t.begin(), t.end());
    Stat s = {t[ITERS / 2] * 1e3, t[ITERS / 10] * 1e3, t[ITERS - 1 - ITERS / 10] * 1e3}; /* us: median, p10, p90 */
    return s;
}

static Stat time_copy(size_t bytes) {
    void *a = dmalloc(bytes), *b = dmalloc(bytes);
    CK(cudaMemset(a, 0x3c, bytes));
    Stat s = time_it([&] { CK(cudaMemcpyAsync(b, a, bytes, cudaMemcpyDeviceToDevice, 0)); });
    CK(cudaFree(a));
    CK(cudaFree(b));
    return s;
}

static double g_sum_ratio = 0.0;
static int g_n_ratio = 0;

/* note: NULL for a memory-bound kernel counted in the mean, else a remark (not counted) */
static void row(const char *name, const char *size, double bytes, const std::function<void()> &fn,
                const char *note = NULL) {
    Stat k = time_it(fn);
    Stat c = time_copy((size_t)(bytes / 2));
    const double gbs = bytes / (k.med * 1e-6) / 1e9, cgbs = bytes / (c.med * 1e-6) / 1e9;
    const double spread = (k.hi - k.lo) / k.med * 100.0;
    printf("%-26s %-22s %10.1f %10.1f %6.1f%% %9.0f %10.1f %9.0f %6.1f%%%s%s\n", name, size, bytes / 1e6, k.med,
           spread, gbs, c.med, cgbs, 100.0 * gbs / cgbs, note ? "  " : "", note ? note : "");
    fflush(stdout);
    if (!note) {
        g_sum_ratio += gbs / cgbs;
        g_n_ratio++;
    }
}

/* ----------------------------------------------------------- rotary embedding */

/* RoPE in place on the q and k heads of a fused qkv buffer [B*T, (H+2KV)*D]: bytes = the
 * q and k columns read once and written once, 2 * B*T*(H+KV)*D * 2.  The data rotates a
 * little further on every run (a rotation: the values stay bounded). */
static void rope_rows(void) {
    static const struct { int B, T, H, KV, D; float theta; } shapes[] = {
        {32, 1024, 12, 12, 64, 10000.0f},  /* GPT-2 124M head shape */
        {4, 8192, 32, 8, 64, 500000.0f},   /* LLaMA 3.2 1B */
        {4, 8192, 32, 8, 128, 500000.0f},  /* LLaMA 3 8B */
    };
    char sz[96];
    for (const auto &r : shapes) {
        const int N = r.B * r.T, ld = (r.H + 2 * r.KV) * r.D;
        void *qkv = bf16_buf((size_t)N * ld, 1.0f);
        const double bytes = 2.0 * N * (double)(r.H + r.KV) * r.D * 2.0;
        snprintf(sz, sizeof sz, "N=%d H=%d KV=%d D=%d", N, r.H, r.KV, r.D);
        row("rope_fwd", sz, bytes, [&] {
            CK(sx_rope_forward((sx_bf16 *)qkv, r.B, r.T, r.H, r.KV, r.D, ld, r.theta, 0));
        });
        row("rope_bwd", sz, bytes, [&] {
            CK(sx_rope_backward((sx_bf16 *)qkv, r.B, r.T, r.H, r.KV, r.D, ld, r.theta, 0));
        });
        CK(cudaFree(qkv));
    }
}

/* ----------------------------------------------------------- norm and embedding backward */

/* LayerNorm / RMSNorm backward, bf16 (or fp32 with f32) storage, fp32 parameter grads.  bytes:
 * dy and x read, dx written (and read when accumulating), mean/rstd read, weight read,
 * dweight (dbias) read and written in fp32.  sweep: the same with every setting of the tuning
 * knobs (kernels_internal.h), each row with the launch it made; the copy is timed once per
 * size for the sweep rows. */
struct NormV { int impl, k, depth, rows, bps; };
static void norm_note(char *note, size_t n, const NormV &v) {
    int c[8];
    sx_norm_backward_last_config(c);
    snprintf(note, n, "(sweep impl=%d k=%d d=%d r=%d bps=%d | k=%d d=%d W=%d NG=%d G=%d /SM=%d smem=%d)", v.impl, v.k,
             v.depth, v.rows, v.bps, c[1], c[2], c[3], c[4], c[5], c[6], c[7]);
}
static void row_copy(const char *name, const char *size, double bytes, const std::function<void()> &fn,
                     const char *note, const Stat &c) {
    Stat k = time_it(fn);
    const double gbs = bytes / (k.med * 1e-6) / 1e9, cgbs = bytes / (c.med * 1e-6) / 1e9;
    const double spread = (k.hi - k.lo) / k.med * 100.0;
    printf("%-26s %-22s %10.1f %10.1f %6.1f%% %9.0f %10.1f %9.0f %6.1f%%  %s\n", name, size, bytes / 1e6, k.med, spread,
           gbs, c.med, cgbs, 100.0 * gbs / cgbs, note);
    fflush(stdout);
}
static void bench_norm_bwd(bool rms, int N, int C, bool acc, bool sweep, bool f32 = false, int profile = 0,
                           const NormV *pv = NULL) {
    const size_t NC = (size_t)N * C, es = f32 ? 4 : 2;
    void *x = f32 ? (void *)f32_buf(NC, 2.0f, 0.3f) : bf16_buf(NC, 2.0f, 0.3f);
    void *w = f32 ? (void *)f32_buf(C, 0.2f, 1.0f) : bf16_buf(C, 0.2f, 1.0f);
    void *dy = f32 ? (void *)f32_buf(NC, 1.0f) : bf16_buf(NC, 1.0f);
    void *dx = f32 ? (void *)f32_buf(NC, 1.0f) : bf16_buf(NC, 1.0f);
    float *mean = f32_buf(N, 0.5f), *rstd = f32_buf(N, 0.2f, 0.5f, true);
    float *dw = f32_buf(C, 0.01f), *db = f32_buf(C, 0.01f);
    const size_t wsb = sx_norm_backward_workspace_bytes(C);
    void *ws = dmalloc(wsb);
    char sz[64], nm[64];
    snprintf(sz, sizeof sz, "N=%d C=%d", N, C);
    const double bytes = NC * es * (acc ? 4.0 : 3.0) + N * (rms ? 4.0 : 8.0) + C * (double)es + C * (rms ? 8.0 : 16.0);
    auto fn = [&] {
        if (rms && !f32)
            CK(sx_rmsnorm_backward((sx_bf16 *)dx, dw, SX_F32, (const sx_bf16 *)dy, (const sx_bf16 *)x,
                                   (const sx_bf16 *)w, rstd, acc, ws, wsb, N, C, 0));
        else if (!f32)
            CK(sx_layernorm_backward((sx_bf16 *)dx, dw, db, SX_F32, (const sx_bf16 *)dy, (const sx_bf16 *)x,
                                     (const sx_bf16 *)w, mean, rstd, acc, ws, wsb, N, C, 0));
        else if (rms)
            CK(sx_rmsnorm_backward_f32((float *)dx, dw, (const float *)dy, (const float *)x, (const float *)w, rstd, acc,
                                       ws, wsb, N, C, 0));
        else
            CK(sx_layernorm_backward_f32((float *)dx, dw, db, (const float *)dy, (const float *)x, (const float *)w,
                                         mean, rstd, acc, ws, wsb, N, C, 0));
    };
    snprintf(nm, sizeof nm, "%s_bwd%s%s", rms ? "rmsnorm" : "layernorm", f32 ? "_f32" : "", acc ? "(dx+=)" : "");
    if (profile) { /* for a profiler: the chosen variant a few times, nothing timed */
        if (pv) {
            sx_norm_backward_variant(pv->impl, pv->k, pv->depth, pv->rows);
            sx_norm_backward_tune(pv->bps, -1);
        }
        for (int i = 0; i < profile; i++) fn();
        CK(cudaDeviceSynchronize());
        char note[160];
        norm_note(note, sizeof note, pv ? *pv : NormV{0, 0, 0, 0, 0});
        printf("# profiled %s %s %s\n", nm, sz, note);
    } else {
        row(nm, sz, bytes, fn);
        if (sweep) {
            static const NormV vs[] = {
                /* (version 1 against version 2: dev/cuda/norm_backward.cu) */
                {2, 1, 1, 0, 0}, {2, 1, 2, 0, 0}, {2, 1, 3, 0, 0}, {2, 2, 1, 0, 0}, {2, 2, 2, 0, 0}, /* registers */
                {3, 1, 3, 0, 0}, {3, 1, 4, 0, 0}, {3, 1, 6, 0, 0}, {3, 1, 8, 0, 0}, {3, 1, 16, 0, 0}, /* bulk */
                {3, 2, 3, 0, 0}, {3, 2, 4, 0, 0}, {3, 2, 6, 0, 0}, {3, 2, 8, 0, 0}, {3, 2, 16, 0, 0},
                {3, 3, 3, 0, 0}, {3, 3, 4, 0, 0}, {3, 3, 6, 0, 0}, {3, 3, 8, 0, 0}, {3, 3, 16, 0, 0},
                {3, 4, 3, 0, 0}, {3, 4, 4, 0, 0}, {3, 4, 6, 0, 0}, {3, 4, 8, 0, 0}, {3, 4, 16, 0, 0},
                {3, 1, 16, -2, 2}, {3, 2, 16, -2, 2}, {3, 3, 16, -2, 2}, {3, 4, 16, -2, 2}, /* 2 blocks/SM, half */
                {3, 1, 16, -2, 1}, {3, 2, 16, -2, 1}, {3, 3, 8, 4, 1}, {3, 3, 8, 8, 1}};
            const Stat c = time_copy((size_t)(bytes / 2));
            const int P = f32 ? 4 : 8;
            for (const NormV &v0 : vs) {
                NormV v = v0;
                if (v.rows == -2) { /* half of the automatic rows per stage */
                    int k = v.k;
                    while (C / P > 15 * 32 * k) k++;
                    const int W = (C / P + 32 * k - 1) / (32 * k);
                    v.rows = (15 / W + 1) / 2;
                    if (v.rows < 1) v.rows = 1;
                }
                sx_norm_backward_variant(v.impl, v.k, v.depth, v.rows);
                sx_norm_backward_tune(v.bps, -1);
                char note[200];
                fn(); /* records the launch */
                norm_note(note, sizeof note, v);
                row_copy(nm, sz, bytes, fn, note, c);
            }
            sx_norm_backward_variant(0, 0, 0, 0);
            sx_norm_backward_tune(0, -1);
        }
    }
    void *bufs[] = {x, w, dy, dx, mean, rstd, dw, db, ws};
    for (void *p : bufs) CK(cudaFree(p));
}

/* The end of GPT-2's backward: layer 0's LayerNorm backward (dx +=, into the residual gradient)
 * and the embedding backward's apply, which reads that gradient.  Before: the plain norm
 * backward, then the apply with dwpe (dout read twice).  Now: sx_layernorm_backward_pos sums
 * dwpe from registers, then the apply without dwpe.  Each pair's bytes are the norm backward's
 * (dx read and written, x, dy, mean, rstd, w; dweight, dbias fp32 read and written) plus the
 * apply's (dout once, each touched dwte row read and written, dwpe read and written), the same
 * for both pairs; also the new norm backward alone, its bytes with dwpe's. */
static void bench_first_layer(int B, int T, int C, int Vids, int V, sx_dtype gt) {
    const int N = B * T;
    const size_t NC = (size_t)N * C, gs = gt == SX_F32 ? 4 : 2;
    void *x = bf16_buf(NC, 2.0f, 0.3f), *w = bf16_buf(C, 0.2f, 1.0f), *dy = bf16_buf(NC, 1.0f), *dx = bf16_buf(NC, 1.0f);
    float *mean = f32_buf(N, 0.5f), *rstd = f32_buf(N, 0.2f, 0.5f, true);
    float *dw = f32_buf(C, 0.01f), *db = f32_buf(C, 0.01f);
    const size_t wsb = sx_norm_backward_workspace_bytes(C);
    void *ws = dmalloc(wsb);
    int32_t *ids = ids_buf(N, Vids);
    void *dwte = gt == SX_F32 ? (void *)f32_buf((size_t)V * C, 0.01f) : bf16_buf((size_t)V * C, 0.01f);
    void *dwpe = gt == SX_F32 ? (void *)f32_buf((size_t)T * C, 0.01f) : bf16_buf((size_t)T * C, 0.01f);
    std::vector<int32_t> h(N);
    CK(cudaMemcpy(h.data(), ids, N * 4, cudaMemcpyDeviceToHost));
    std::sort(h.begin(), h.end());
    const size_t uniq = std::unique(h.begin(), h.end()) - h.begin();
    const size_t gb = sx_embedding_grouping_bytes(N, C, V), sb = sx_embedding_apply_workspace_bytes(N, C);
    void *grouping = dmalloc(gb), *scratch = dmalloc(sb);
    CK(sx_embedding_backward_prepare(grouping, gb, ids, N, C, V, 0));
    const double norm_bytes = NC * 2.0 * 4.0 + N * 8.0 + C * 2.0 + C * 16.0;
    const double dwpe_bytes = (double)T * C * gs * 2;
    const double apply_bytes = NC * 2.0 + (double)uniq * C * gs * 2 + dwpe_bytes;
    char sz[96], note[96];
    snprintf(sz, sizeof sz, "B=%d T=%d C=%d", B, T, C);
    auto norm_plain = [&] {
        CK(sx_layernorm_backward((sx_bf16 *)dx, dw, db, SX_F32, (const sx_bf16 *)dy, (const sx_bf16 *)x,
                                 (const sx_bf16 *)w, mean, rstd, 1, ws, wsb, N, C, 0));
    };
    auto norm_pos = [&] {
        CK(sx_layernorm_backward_pos((sx_bf16 *)dx, dw, db, dwpe, gt, (const sx_bf16 *)dy, (const sx_bf16 *)x,
                                     (const sx_bf16 *)w, mean, rstd, 1, ws, wsb, B, T, C, 0));
    };
    auto apply = [&](void *pos) {
        CK(sx_embedding_backward_apply(dwte, pos, gt, (const sx_bf16 *)dx, grouping, gb, scratch, sb, B, T, C, V, 0));
    };
    int cfg[6];
    /* the automatic setting, then every (rows ahead, packs per thread) */
    const int knobs[8][2] = {{0, 0}, {1, 1}, {2, 1}, {1, 2}, {2, 2}, {1, 3}, {2, 3}, {1, 4}};
    for (int v = 0; v < 8; v++) {
        sx_layernorm_backward_pos_tune(knobs[v][0], knobs[v][1]);
        norm_pos();
        sx_layernorm_backward_pos_last_config(cfg);
        snprintf(note, sizeof note, "(%sdwpe %s; k=%d W=%d NG=%d G=%d /SM=%d D=%d)", v ? "knobs, " : "",
                 gt == SX_F32 ? "fp32" : "bf16", cfg[0], cfg[1], cfg[2], cfg[3], cfg[4], cfg[5]);
        row("layernorm_bwd_pos(dx+=)", sz, norm_bytes + dwpe_bytes, norm_pos, note);
    }
    sx_layernorm_backward_pos_tune(0, 0);
    row("layernorm_bwd(dx+=)", sz, norm_bytes, norm_plain, "(the plain norm backward, for comparison)");
    snprintf(note, sizeof note, "(before: norm bwd, then apply with dwpe, %s)", gt == SX_F32 ? "fp32" : "bf16");
    row("layer0_norm+emb_bwd", sz, norm_bytes + apply_bytes, [&] { norm_plain(); apply(dwpe); }, note);
    snprintf(note, sizeof note, "(now: norm bwd with dwpe, then apply, %s)", gt == SX_F32 ? "fp32" : "bf16");
    row("layer0_norm+emb_bwd", sz, norm_bytes + apply_bytes, [&] { norm_pos(); apply(NULL); }, note);
    void *bufs[] = {x, w, dy, dx, mean, rstd, dw, db, ws, ids, dwte, dwpe, grouping, scratch};
    for (void *p : bufs) CK(cudaFree(p));
}

/* Embedding backward.  bytes = the fewest the operation must move: ids read, dout read once,
 * each touched row of dwte read and written, and dwpe (T rows) read and written when the
 * position embedding is there.  With dwpe the kernels read dout twice (once grouped by id,
 * once by position), so that row's ceiling is below copy speed (see kernels/README.md). */
static void bench_embedding_bwd(int B, int T, int C, int Vids, int V, bool with_wpe, sx_dtype gt, bool sweep,
                                const char *remark = NULL) {
    const int N = B * T;
    const size_t NC = (size_t)N * C, gs = gt == SX_F32 ? 4 : 2;
    int32_t *ids = ids_buf(N, Vids);
    void *dout = bf16_buf(NC, 0.5f);
    void *dwte = gt == SX_F32 ? (void *)f32_buf((size_t)V * C, 0.01f) : bf16_buf((size_t)V * C, 0.01f);
    void *dwpe = !with_wpe ? NULL : gt == SX_F32 ? (void *)f32_buf((size_t)T * C, 0.01f) : bf16_buf((size_t)T * C, 0.01f);
    std::vector<int32_t> h(N);
    CK(cudaMemcpy(h.data(), ids, N * 4, cudaMemcpyDeviceToHost));
    std::sort(h.begin(), h.end());
    const size_t uniq = std::unique(h.begin(), h.end()) - h.begin();
    const size_t wsb = sx_embedding_backward_workspace_bytes(N, C, V);
    void *ws = dmalloc(wsb);
    char sz[96], nm[64];
    snprintf(sz, sizeof sz, "N=%d C=%d V=%d uniq=%zu", N, C, V, uniq);
    snprintf(nm, sizeof nm, "embedding_bwd(%s%s)", gt == SX_F32 ? "fp32" : "bf16", with_wpe ? ",wpe" : "");
    const double bytes = N * 4.0 + NC * 2.0 + (double)uniq * C * gs * 2 + (with_wpe ? (double)T * C * gs * 2 : 0.0);
    auto fn = [&] { CK(sx_embedding_backward(dwte, dwpe, gt, (const sx_bf16 *)dout, ids, ws, wsb, B, T, C, V, 0)); };
    row(nm, sz, bytes, fn, remark);
    if (!remark) {
        /* the two parts of the grouped path: in training, prepare runs beside the forward pass
         * (it reads only the ids), so the backward pass has apply alone */
        auto split_rows = [&](const char *note_apply) {
            const size_t gb = sx_embedding_grouping_bytes(N, C, V), sb = sx_embedding_apply_workspace_bytes(N, C);
            void *grouping = dmalloc(gb), *scratch = dmalloc(sb);
            auto prep = [&] { CK(sx_embedding_backward_prepare(grouping, gb, ids, N, C, V, 0)); };
            if (!note_apply) row("embedding_bwd_prepare", sz, N * 4.0, prep, "(ids only: the time is the figure)");
            else prep();
            row(nm, sz, bytes - N * 4.0, [&] {
                CK(sx_embedding_backward_apply(dwte, dwpe, gt, (const sx_bf16 *)dout, grouping, gb, scratch, sb, B, T,
                                               C, V, 0));
            }, note_apply ? note_apply : "(apply alone: the backward pass's kernel)");
            CK(cudaFree(grouping));
            CK(cudaFree(scratch));
        };
        split_rows(NULL);
        if (sweep) {
            struct { int w, wn, cc, first, minb; } vs[] = {
                {16, 16, 0, -1, 0}, {16, 14, 0, -1, 0}, {12, 9, 0, -1, 0}, {24, 18, 0, -1, 0}, {16, 12, 512, -1, 0},
                {16, 12, 0, -1, 6}, {16, 12, 512, -1, 6}, {12, 9, 512, -1, 6}, {12, 9, 0, -1, 6}, {8, 6, 0, -1, 6},
                {16, 12, 0, 0, 0}};
            for (auto &v : vs) {
                if (v.first == 0 && !with_wpe) continue;
                char note[80];
                snprintf(note, sizeof note, "(apply alone, sweep W=%d Wn=%d CC=%d%s%s)", v.w, v.wn, v.cc,
                         v.minb == 6 ? " minb=6" : "", v.first == 0 ? " dwpe last" : "");
                sx_embedding_apply_tune(v.w, v.wn, v.cc, v.first, v.minb);
                split_rows(note);
            }
            sx_embedding_apply_tune(0, 0, 0, -1, 0);
        }
        sx_embedding_backward_tune(6, 0, -1, -1, -1);
        row(nm, sz, bytes, fn, "(grouped, one call: prepare + apply)");
        sx_embedding_backward_tune(0, 0, -1, -1, -1);
    }
    if (sweep) {
        sx_embedding_backward_tune(2, 0, -1, -1, -1);
        /* pf: -1 = the default: none since commit 7b7941b; in the 2026-11-23 H200 run (commit
         * edc6ce4) it prefetched dout into L2 when dout took at most 60% of the L2 */
        struct { int kp, l2, pf, pdl; } vs[] = {
            {1, 7, -1, 1}, {3, 7, -1, 1}, {2, 0, -1, 1}, {2, 6, -1, 1}, {2, 7, 0, 1}, {2, 7, 32, 1}, {2, 7, 64, 1},
            {2, 7, -1, 0}};
        for (auto &v : vs) {
            if (with_wpe && v.pf > 0) continue;
            if (!with_wpe && v.l2 == 6) continue;
            char note[64];
            snprintf(note, sizeof note, "(tiled, sweep kp=%d l2=%d pf=%d%s %s)", v.kp, v.l2, v.pf, v.pf > 0 ? "MB" : "",
                     v.pdl ? "pdl" : "no-pdl");
            sx_embedding_backward_tune(2, v.kp, v.l2, v.pf, v.pdl);
            row(nm, sz, bytes, fn, note);
        }
        sx_embedding_backward_tune(3, 0, -1, 0, -1);
        row(nm, sz, bytes, fn, "(sweep: tile kernel alone, no prefetch)");
        sx_embedding_backward_tune(0, 0, -1, -1, -1);
    }
    void *bufs[] = {ids, dout, dwte, dwpe, ws};
    for (void *p : bufs)
        if (p) CK(cudaFree(p));
}

/* ----------------------------------------------------------- fused attention */

static const void **dev_ptrs(const std::vector<const void *> &h) {
    void *d = dmalloc(h.size() * sizeof(void *));
    CK(cudaMemcpy(d, h.data(), h.size() * sizeof(void *), cudaMemcpyHostToDevice));
    return (const void **)d;
}

/* Flash forward/backward against the unfused path (cuBLAS batched GEMMs + the causal
 * softmax of softmax.cu, as validator/train.c runs it) on one fused qkv buffer
 * [B*T, (H+2KV)*D].  Causal FLOPs: forward 4*B*H*T*T*D/2 (QK^T and PV over the live
 * triangle), backward 2.5x that.  The unfused GEMMs compute the full T x T square. */
static void bench_attention(cublasHandle_t blas, int B, int T, int H, int KV, int D, int iters) {
    const int group = H / KV, ldq = (H + 2 * KV) * D, ldo = H * D, BH = B * H;
    const size_t nqkv = (size_t)B * T * ldq, no = (size_t)B * T * H * D, nss = (size_t)BH * T * T;
    const float scale = 1.0f / sqrtf((float)D);
    uint16_t *qkv = (uint16_t *)bf16_buf(nqkv, 1.0f), *dout = (uint16_t *)bf16_buf(no, 1.0f);
    uint16_t *out = (uint16_t *)dmalloc(no * 2), *dqkv = (uint16_t *)dmalloc(nqkv * 2);
    float *lse = (float *)dmalloc((size_t)BH * T * 4);
    const size_t wsb = sx_flash_attention_backward_workspace_bytes(B, T, T, H, KV, D);
    void *ws = dmalloc(wsb);
    uint16_t *S = (uint16_t *)dmalloc(nss * 2), *P = (uint16_t *)dmalloc(nss * 2);
    const sx_bf16 *q = qkv, *k = qkv + (size_t)H * D, *v = qkv + (size_t)(H + KV) * D;
    sx_bf16 *dq = dqkv, *dk = dqkv + (size_t)H * D, *dv = dqkv + (size_t)(H + KV) * D;

    /* pointer arrays: per (b, h) for the products over all heads; per group member gi,
     * over (b, kv head), for dK and dV (summed over gi with beta = 1) */
    std::vector<const void *> hq, hk, hv, hs, hp, ho, hdo, hdq;
    for (int b = 0; b < B; b++)
        for (int h = 0; h < H; h++) {
            const size_t row = (size_t)b * T * ldq, kh = h / group;
            hq.push_back(q + row + (size_t)h * D);
            hk.push_back(k + row + kh * D);
            hv.push_back(v + row + kh * D);
            hs.push_back(S + ((size_t)b * H + h) * T * T);
            hp.push_back(P + ((size_t)b * H + h) * T * T);
            ho.push_back(out + (size_t)b * T * ldo + (size_t)h * D);
            hdo.push_back(dout + (size_t)b * T * ldo + (size_t)h * D);
            hdq.push_back(dq + row + (size_t)h * D);
        }
    const void **Q = dev_ptrs(hq), **K = dev_ptrs(hk), **V = dev_ptrs(hv), **Sp = dev_ptrs(hs), **Pp = dev_ptrs(hp),
               **O = dev_ptrs(ho), **DO = dev_ptrs(hdo), **DQ = dev_ptrs(hdq);
    std::vector<const void **> gQ, gS, gP, gDO, gDK, gDV;
    for (int gi = 0; gi < group; gi++) {
        std::vector<const void *> a, c, e, f, dkk, dvv;
        for (int b = 0; b < B; b++)
            for (int kh = 0; kh < KV; kh++) {
                const int h = kh * group + gi;
                const size_t row = (size_t)b * T * ldq;
                a.push_back(q + row + (size_t)h * D);
                c.push_back(S + ((size_t)b * H + h) * T * T);
                e.push_back(P + ((size_t)b * H + h) * T * T);
                f.push_back(dout + (size_t)b * T * ldo + (size_t)h * D);
                dkk.push_back(dk + row + (size_t)kh * D);
                dvv.push_back(dv + row + (size_t)kh * D);
            }
        gQ.push_back(dev_ptrs(a)); gS.push_back(dev_ptrs(c)); gP.push_back(dev_ptrs(e)); gDO.push_back(dev_ptrs(f));
        gDK.push_back(dev_ptrs(dkk)); gDV.push_back(dev_ptrs(dvv));
    }
    const float one = 1.0f, zero = 0.0f;
    auto gemm = [&](cublasOperation_t ta, cublasOperation_t tb, int m, int n, int kk, const void **A, int lda,
                    const void **Bm, int ldb, const float *beta, const void **C, int ldc, int count) {
        CB(cublasGemmBatchedEx(blas, ta, tb, m, n, kk, &one, (const void *const *)A, CUDA_R_16BF, lda,
                               (const void *const *)Bm, CUDA_R_16BF, ldb, beta, (void *const *)C, CUDA_R_16BF, ldc,
                               count, CUBLAS_COMPUTE_32F, CUBLAS_GEMM_DEFAULT));
    };
    auto unfused_fwd = [&] {
        gemm(CUBLAS_OP_T, CUBLAS_OP_N, T, T, D, K, ldq, Q, ldq, &zero, Sp, T, BH); /* S = Q K^T */
        CK(sx_softmax_causal_forward(P, S, BH, T, scale, 0));
        gemm(CUBLAS_OP_N, CUBLAS_OP_N, D, T, T, V, ldq, Pp, T, &zero, O, ldo, BH); /* O = P V */
    };
    auto unfused_bwd = [&] {
        gemm(CUBLAS_OP_T, CUBLAS_OP_N, T, T, D, V, ldq, DO, ldo, &zero, Sp, T, BH); /* dP = dO V^T */
        for (int gi = 0; gi < group; gi++)                                           /* dV = sum P^T dO */
            gemm(CUBLAS_OP_N, CUBLAS_OP_T, D, T, T, gDO[gi], ldo, gP[gi], T, gi ? &one : &zero, gDV[gi], ldq, B * KV);
        CK(sx_softmax_causal_backward(S, P, S, BH, T, scale, 0));
        gemm(CUBLAS_OP_N, CUBLAS_OP_N, D, T, T, K, ldq, Sp, T, &zero, DQ, ldq, BH); /* dQ = dS K */
        for (int gi = 0; gi < group; gi++)                                          /* dK = sum dS^T Q */
            gemm(CUBLAS_OP_N, CUBLAS_OP_T, D, T, T, gQ[gi], ldq, gS[gi], T, gi ? &one : &zero, gDK[gi], ldq, B * KV);
    };
    auto flash_fwd = [&] { CK(sx_flash_attention_forward(out, lse, q, k, v, B, T, H, KV, D, ldq, ldq, scale, 0)); };
    auto flash_bwd = [&] {
        CK(sx_flash_attention_backward(dq, dk, dv, dout, out, lse, q, k, v, B, T, H, KV, D, ldq, ldq, scale, ws, wsb, 0));
    };
    const int saved = ITERS;
    ITERS = iters;
    flash_fwd(); /* out, lse for the backward */
    const Stat ff = time_it(flash_fwd), fb = time_it(flash_bwd), uf = time_it(unfused_fwd), ub = time_it(unfused_bwd);
    ITERS = saved;
    const double fl = 4.0 * B * H * (double)T * T * D / 2.0;
    char sz[96];
    snprintf(sz, sizeof sz, "B=%d T=%d H=%d KV=%d D=%d", B, T, H, KV, D);
    const Stat *fs[2] = {&ff, &fb}, *us[2] = {&uf, &ub};
    for (int i = 0; i < 2; i++) {
        const double f = i ? 2.5 * fl : fl;
        printf("%-16s %-28s %10.1f %6.1f%% %8.1f %12.1f %8.1f %7.2fx\n", i ? "flash_attn_bwd" : "flash_attn_fwd", sz,
               fs[i]->med, (fs[i]->hi - fs[i]->lo) / fs[i]->med * 100.0, f / (fs[i]->med * 1e-6) / 1e12, us[i]->med,
               f / (us[i]->med * 1e-6) / 1e12, us[i]->med / fs[i]->med);
    }
    fflush(stdout);
    void *bufs[] = {qkv, dout, out, dqkv, lse, ws, S, P, Q, K, V, Sp, Pp, O, DO, DQ};
    for (void *b : bufs) CK(cudaFree(b));
    for (int gi = 0; gi < group; gi++) {
        CK(cudaFree(gQ[gi])); CK(cudaFree(gS[gi])); CK(cudaFree(gP[gi])); CK(cudaFree(gDO[gi]));
        CK(cudaFree(gDK[gi])); CK(cudaFree(gDV[gi]));
    }
}

static void attention_table(void) {
    cublasHandle_t blas;
    CB(cublasCreate(&blas));
    printf("#\n# fused causal attention vs unfused (cuBLAS batched GEMMs + softmax_causal), fused qkv layout;\n"
           "# TFLOP/s of causal FLOPs (fwd 4*B*H*T*T*D/2, bwd 2.5x), median of 20 runs, L2 flushed before each;\n"
           "# speedup = unfused time / flash time\n");
    printf("# %-14s %-28s %10s %7s %8s %12s %8s %8s\n", "kernel", "shape", "flash(us)", "p10-90", "TFLOP/s",
           "unfused(us)", "TFLOP/s", "speedup");
    bench_attention(blas, 32, 1024, 12, 12, 64, 20); /* GPT-2 124M */
    bench_attention(blas, 4, 2048, 32, 8, 64, 20);   /* LLaMA 3.2 1B (GQA 32/8) */
    bench_attention(blas, 8, 2048, 16, 16, 128, 20); /* D = 128 */
    CB(cublasDestroy(blas));
}

int main(int argc, char **argv) {
    bool only_attention = false, only_rope = false, sweep = false, only_norm = false, only_embedding = false;
    int profile = 0;
    NormV pv = {0, 0, 0, 0, 0};
    int prms = 0, pN = 0, pC = 0, pacc = 0;
    for (int i = 1; i < argc; i++) {
        if (!strcmp(argv[i], "--iters") && i + 1 < argc) ITERS = atoi(argv[++i]);
        else if (!strcmp(argv[i], "--attention")) only_attention = true;
        else if (!strcmp(argv[i], "--rope")) only_rope = true;
        else if (!strcmp(argv[i], "--sweep")) sweep = true;
        else if (!strcmp(argv[i], "--norm")) only_norm = true;
        else if (!strcmp(argv[i], "--embedding")) only_embedding = true;
        else if (!strcmp(argv[i], "--profile") && i + 9 < argc) {
            prms = atoi(argv[++i]); pN = atoi(argv[++i]); pC = atoi(argv[++i]); pacc = atoi(argv[++i]);
            pv.impl = atoi(argv[++i]); pv.k = atoi(argv[++i]); pv.depth = atoi(argv[++i]); pv.rows = atoi(argv[++i]);
            pv.bps = atoi(argv[++i]);
            profile = 3;
        } else {
            fprintf(stderr, "usage: %s [--iters N] [--attention] [--rope] [--sweep] [--norm]\n"
                            "       %s --embedding [--sweep]\n       %s --profile rms N C acc impl k depth rows bps\n", argv[0], argv[0], argv[0]);
            return 2;
        }
    }
    if (ITERS < 10) ITERS = 10;
    if (profile) {
        bench_norm_bwd(prms, pN, pC, pacc, false, false, profile, &pv);
        return 0;
    }
    int dev = 0, drv = 0, rt = 0;
    cudaDeviceProp prop;
    CK(cudaGetDevice(&dev));
    CK(cudaGetDeviceProperties(&prop, dev));
    CK(cudaDriverGetVersion(&drv));
    CK(cudaRuntimeGetVersion(&rt));
    CK(cudaEventCreate(&e0));
    CK(cudaEventCreate(&e1));
    g_flush_n = (256u << 20) / 16;
    g_flush = (int4 *)dmalloc(g_flush_n * 16);
    CK(cudaMemset(g_flush, 1, g_flush_n * 16));
    g_sink = (int *)dmalloc(4);

    const int B = 32, T = 1024, C = 768, NH = 12, V = 50257, Vp = 50304;
    const int N = B * T, C4 = 4 * C, BH = B * NH;
    const size_t NC = (size_t)N * C, NC4 = (size_t)N * C4;
    const size_t NPARAM = 124475904; /* GPT-2 124M with the vocab padded to 50304 */

    printf("# bench_kernels: %s, sm_%d%d, %d SMs, L2 %d MiB, CUDA driver %d.%d runtime %d.%d\n", prop.name, prop.major,
           prop.minor, prop.multiProcessorCount, prop.l2CacheSize >> 20, drv / 1000, drv % 1000 / 10, rt / 1000,
           rt % 1000 / 10);
    printf("# GPT-2 124M sizes: B*T=%d C=%d 4C=%d heads=%d V=%d Vp=%d params=%zu; %d timed runs after %d warm-up, "
           "L2 flushed before each\n", N, C, C4, NH, V, Vp, NPARAM, ITERS, WARMUP);
    {
        Stat c = time_copy((size_t)1 << 30);
        printf("# reference: cudaMemcpy D2D of 1 GiB: %.1f us, %.0f GB/s (read + write)\n", c.med,
               2.0 * (1u << 30) / (c.med * 1e-6) / 1e9);
    }
    if (only_attention) {
        attention_table();
        CK(cudaDeviceSynchronize());
        return 0;
    }
    printf("#\n# %-24s %-22s %10s %10s %7s %9s %10s %9s %7s\n", "kernel", "size", "bytes(MB)", "time(us)", "p10-90",
           "GB/s", "copy(us)", "copyGB/s", "%copy");
    if (only_rope) {
        rope_rows();
        printf("#\n# mean %%copy over the %d rope rows: %.1f%%\n", g_n_ratio, 100.0 * g_sum_ratio / g_n_ratio);
        CK(cudaDeviceSynchronize());
        return 0;
    }
    char sz[64];

    /* ---------------------------------------------------------- embedding */
    if (!only_norm) {
        int32_t *ids = ids_buf(N, V);
        void *wte = bf16_buf((size_t)Vp * C, 0.5f), *wpe = bf16_buf((size_t)T * C, 0.5f), *out = dmalloc(NC * 2);
        snprintf(sz, sizeof sz, "N=%d C=%d", N, C);
        row("embedding_fwd", sz, N * 4.0 + NC * 2.0 + (double)T * C * 2 + NC * 2.0, [&] {
            CK(sx_embedding_forward((sx_bf16 *)out, ids, (const sx_bf16 *)wte, (const sx_bf16 *)wpe, B, T, C, V, 0));
        });
        CK(cudaFree(ids)); CK(cudaFree(wte)); CK(cudaFree(wpe)); CK(cudaFree(out));
        /* backward: GPT-2 (ids in [0, 50257), vocabulary padded to 50304, with and without the
         * position embedding) and a LLaMA-style batch (4 x 2048 tokens, C = 2048, V = 128256) */
        bench_embedding_bwd(B, T, C, V, Vp, true, SX_F32, sweep);
        bench_embedding_bwd(B, T, C, V, Vp, false, SX_F32, sweep);
        bench_embedding_bwd(B, T, C, V, Vp, true, SX_BF16, sweep);
        bench_embedding_bwd(B, T, C, V, Vp, false, SX_BF16, sweep);
        bench_embedding_bwd(4, 2048, 2048, 128256, 128256, false, SX_F32, sweep);
        bench_embedding_bwd(4, 2048, 2048, 128256, 128256, false, SX_BF16, sweep);
        /* (the atomic experiment: dev/cuda/embedding_backward.cu) */
        /* GPT-2 124M (mbs 32) and 350M (mbs 16): layer 0's norm backward and the embedding's */
        bench_first_layer(B, T, C, V, Vp, SX_F32);
        bench_first_layer(B, T, C, V, Vp, SX_BF16);
        bench_first_layer(16, 1024, 1024, V, Vp, SX_BF16);
        sx_embedding_backward_tune(1, 0, -1, -1, -1); /* before: the sorted path */
        bench_embedding_bwd(B, T, C, V, Vp, true, SX_F32, false, "(sorted path, for comparison)");
        bench_embedding_bwd(4, 2048, 2048, 128256, 128256, false, SX_F32, false, "(sorted path, for comparison)");
        sx_embedding_backward_tune(0, 0, -1, -1, -1);
    }
    if (only_embedding) {
        CK(cudaDeviceSynchronize());
        return 0;
    }

    /* ---------------------------------------------------------- norms */
    {
        /* forward at GPT-2 size, backward at C = 768, 1024 (N = 32768) and 2048, 4096 (N = 8192) */
        void *x = bf16_buf(NC, 2.0f, 0.3f), *w = bf16_buf(C, 0.2f, 1.0f), *b = bf16_buf(C, 0.2f), *out = dmalloc(NC * 2);
        float *mean = (float *)dmalloc(N * 4), *rstd = (float *)dmalloc(N * 4);
        snprintf(sz, sizeof sz, "N=%d C=%d", N, C);
        row("layernorm_fwd", sz, NC * 4.0 + C * 4.0 + N * 8.0, [&] {
            CK(sx_layernorm_forward((sx_bf16 *)out, mean, rstd, (const sx_bf16 *)x, (const sx_bf16 *)w,
                                    (const sx_bf16 *)b, N, C, 1e-5f, 0));
        });
        row("rmsnorm_fwd", sz, NC * 4.0 + C * 2.0 + N * 4.0, [&] {
            CK(sx_rmsnorm_forward((sx_bf16 *)out, rstd, (const sx_bf16 *)x, (const sx_bf16 *)w, N, C, 1e-5f, 0));
        });
        CK(cudaFree(x)); CK(cudaFree(w)); CK(cudaFree(b)); CK(cudaFree(out)); CK(cudaFree(mean)); CK(cudaFree(rstd));
        const int cs[4] = {768, 1024, 2048, 4096}, ns[4] = {N, N, 8192, 8192};
        for (int i = 0; i < 4; i++) {
            bench_norm_bwd(false, ns[i], cs[i], false, sweep);
            bench_norm_bwd(true, ns[i], cs[i], false, sweep);
        }
        bench_norm_bwd(true, 8192, 2048, true, sweep); /* as in training: dx += (residual stream) */
        bench_norm_bwd(false, N, C, true, sweep);        /* LayerNorm with dx += */
        /* fp32 storage */
        float *xf = f32_buf(NC, 2.0f, 0.3f), *wf = f32_buf(C, 0.2f, 1.0f), *bf = f32_buf(C, 0.2f);
        float *of = (float *)dmalloc(NC * 4);
        mean = (float *)dmalloc(N * 4);
        rstd = (float *)dmalloc(N * 4);
        row("layernorm_fwd_f32", sz, NC * 8.0 + C * 8.0 + N * 8.0, [&] {
            CK(sx_layernorm_forward_f32(of, mean, rstd, xf, wf, bf, N, C, 1e-5f, 0));
        });
        CK(cudaFree(xf)); CK(cudaFree(wf)); CK(cudaFree(bf)); CK(cudaFree(of)); CK(cudaFree(mean)); CK(cudaFree(rstd));
        bench_norm_bwd(false, N, C, false, sweep, true);
        /* fp16 storage, GPT-2 size: the same kernels as bf16 */
        {
            void *xh = f16_buf(NC, 2.0f, 0.3f), *wh = f16_buf(C, 0.2f, 1.0f), *bh = f16_buf(C, 0.2f);
            void *oh = dmalloc(NC * 2), *dyh = f16_buf(NC, 1.0f), *dxh = dmalloc(NC * 2);
            float *mh = (float *)dmalloc(N * 4), *rh = (float *)dmalloc(N * 4);
            float *dwh = f32_buf(C, 0.01f), *dbh = f32_buf(C, 0.01f);
            const size_t wsb = sx_norm_backward_workspace_bytes(C);
            void *ws = dmalloc(wsb);
            row("layernorm_fwd_f16", sz, NC * 4.0 + C * 4.0 + N * 8.0, [&] {
                CK(sx_layernorm_forward_f16((sx_f16 *)oh, mh, rh, (const sx_f16 *)xh, (const sx_f16 *)wh,
                                            (const sx_f16 *)bh, N, C, 1e-5f, 0));
            });
            row("layernorm_bwd_f16", sz, NC * 6.0 + N * 8.0 + C * 2.0 + C * 16.0, [&] {
                CK(sx_layernorm_backward_f16((sx_f16 *)dxh, dwh, dbh, (const sx_f16 *)dyh, (const sx_f16 *)xh,
                                             (const sx_f16 *)wh, mh, rh, 0, ws, wsb, N, C, 0));
            });
            void *bufs[] = {xh, wh, bh, oh, dyh, dxh, mh, rh, dwh, dbh, ws};
            for (void *p : bufs) CK(cudaFree(p));
        }
    }

    if (sweep || only_norm) { /* the sweep covers the norm and embedding backward only */
        CK(cudaDeviceSynchronize());
        return 0;
    }

    /* ---------------------------------------------------------- elementwise */
    {
        void *x = bf16_buf(NC4, 2.0f), *dy = bf16_buf(NC4, 1.0f), *out = dmalloc(NC4 * 2);
        snprintf(sz, sizeof sz, "n=%dx%d", N, C4);
        row("gelu_fwd", sz, NC4 * 4.0, [&] { CK(sx_gelu_forward((sx_bf16 *)out, (const sx_bf16 *)x, NC4, 0)); });
        row("gelu_bwd", sz, NC4 * 6.0, [&] {
            CK(sx_gelu_backward((sx_bf16 *)out, (const sx_bf16 *)x, (const sx_bf16 *)dy, NC4, 0));
        });
        void *up = bf16_buf(NC4, 1.0f), *dg = dmalloc(NC4 * 2), *du = dmalloc(NC4 * 2);
        snprintf(sz, sizeof sz, "N=%d H=%d", N, C4);
        row("swiglu_fwd", sz, NC4 * 6.0, [&] {
            CK(sx_swiglu_forward((sx_bf16 *)out, (const sx_bf16 *)x, (const sx_bf16 *)up, N, C4, C4, 0));
        });
        row("swiglu_bwd", sz, NC4 * 10.0, [&] {
            CK(sx_swiglu_backward((sx_bf16 *)dg, (sx_bf16 *)du, (const sx_bf16 *)dy, (const sx_bf16 *)x,
                                  (const sx_bf16 *)up, N, C4, C4, 0));
        });
        snprintf(sz, sizeof sz, "n=%dx%d", N, C);
        row("residual_add", sz, NC * 6.0, [&] {
            CK(sx_residual_add((sx_bf16 *)out, NULL, (const sx_bf16 *)x, (const sx_bf16 *)dy, NC, 0));
        });
        row("residual_add+copy", sz, NC * 8.0, [&] {
            CK(sx_residual_add((sx_bf16 *)out, (sx_bf16 *)dg, (const sx_bf16 *)x, (const sx_bf16 *)dy, NC, 0));
        });
        CK(cudaFree(x)); CK(cudaFree(dy)); CK(cudaFree(out)); CK(cudaFree(up)); CK(cudaFree(dg)); CK(cudaFree(du));
        /* fp16 storage: the same kernels */
        void *xh = f16_buf(NC4, 2.0f), *dyh = f16_buf(NC4, 1.0f), *uh = f16_buf(NC4, 1.0f), *oh = dmalloc(NC4 * 2);
        void *gh = dmalloc(NC4 * 2), *vh = dmalloc(NC4 * 2);
        snprintf(sz, sizeof sz, "n=%dx%d", N, C4);
        row("gelu_fwd_f16", sz, NC4 * 4.0, [&] { CK(sx_gelu_forward_f16((sx_f16 *)oh, (const sx_f16 *)xh, NC4, 0)); });
        row("gelu_bwd_f16", sz, NC4 * 6.0, [&] {
            CK(sx_gelu_backward_f16((sx_f16 *)oh, (const sx_f16 *)xh, (const sx_f16 *)dyh, NC4, 0));
        });
        snprintf(sz, sizeof sz, "N=%d H=%d", N, C4);
        row("swiglu_fwd_f16", sz, NC4 * 6.0, [&] {
            CK(sx_swiglu_forward_f16((sx_f16 *)oh, (const sx_f16 *)xh, (const sx_f16 *)uh, N, C4, C4, 0));
        });
        row("swiglu_bwd_f16", sz, NC4 * 10.0, [&] {
            CK(sx_swiglu_backward_f16((sx_f16 *)gh, (sx_f16 *)vh, (const sx_f16 *)dyh, (const sx_f16 *)xh,
                                      (const sx_f16 *)uh, N, C4, C4, 0));
        });
        snprintf(sz, sizeof sz, "n=%dx%d", N, C);
        row("residual_add_f16", sz, NC * 6.0, [&] {
            CK(sx_residual_add_f16((sx_f16 *)oh, NULL, (const sx_f16 *)xh, (const sx_f16 *)dyh, NC, 0));
        });
        void *hb[] = {xh, dyh, uh, oh, gh, vh};
        for (void *q : hb) CK(cudaFree(q));
    }

    /* ---------------------------------------------------------- rotary embedding (LLaMA shapes) */
    rope_rows();

    /* ---------------------------------------------------------- attention softmax */
    {
        const size_t n = (size_t)BH * T * T;
        const double tri = (double)BH * T * (T + 1) / 2.0; /* live (causal) elements */
        void *s = bf16_buf(n, 8.0f), *p = dmalloc(n * 2), *dp = bf16_buf(n, 1.0f), *ds = dmalloc(n * 2);
        snprintf(sz, sizeof sz, "BH=%d T=%d", BH, T);
        row("softmax_causal_fwd", sz, tri * 2.0 + n * 2.0, [&] {
            CK(sx_softmax_causal_forward((sx_bf16 *)p, (const sx_bf16 *)s, BH, T, 0.125f, 0));
        });
        /* (the forward with the row in registers: dev/cuda/softmax_forward.cu) */
        row("softmax_causal_bwd", sz, tri * 4.0 + n * 2.0, [&] {
            CK(sx_softmax_causal_backward((sx_bf16 *)ds, (const sx_bf16 *)p, (const sx_bf16 *)dp, BH, T, 0.125f, 0));
        });
        row("softmax_bwd[registers]", sz, tri * 4.0 + n * 2.0, [&] {
            CK(sx_softmax_causal_backward_path(1, (sx_bf16 *)ds, (const sx_bf16 *)p, (const sx_bf16 *)dp, BH, T,
                                               0.125f, 0));
        }, "(path 1)");
        row("softmax_bwd[two-pass]", sz, tri * 4.0 + n * 2.0, [&] {
            CK(sx_softmax_causal_backward_path(2, (sx_bf16 *)ds, (const sx_bf16 *)p, (const sx_bf16 *)dp, BH, T,
                                               0.125f, 0));
        }, "(path 2)");
        CK(cudaFree(s)); CK(cudaFree(p)); CK(cudaFree(dp)); CK(cudaFree(ds));
    }

    /* ---------------------------------------------------------- cross-entropy */
    /* one row per layout: {layout, remark}; layout 0 is the default */
    auto bench_ce = [&](int Nc, int Vc, int Vpc, const std::vector<std::pair<int, const char *>> &layouts) {
        const size_t n = (size_t)Nc * Vpc;
        void *logits = bf16_buf(n, 4.0f), *dl = dmalloc(n * 2);
        int32_t *tg = ids_buf(Nc, Vc);
        float *loss = (float *)dmalloc(Nc * 4);
        snprintf(sz, sizeof sz, "N=%d V=%d Vp=%d", Nc, Vc, Vpc);
        for (const auto &l : layouts) {
            sx_cross_entropy_tune(l.first);
            row("cross_entropy_fused", sz, n * 4.0 + Nc * 8.0, [&] {
                CK(sx_cross_entropy_fused(loss, (sx_bf16 *)dl, (const sx_bf16 *)logits, tg, Nc, Vc, Vpc, 1.0f / Nc, 0));
            }, l.second);
        }
        sx_cross_entropy_tune(0);
        CK(cudaFree(logits)); CK(cudaFree(dl)); CK(cudaFree(tg)); CK(cudaFree(loss));
    };
    bench_ce(N, V, Vp, {{0, NULL}});
    /* LLaMA 3's vocabulary at micro-batch 4 x 2048: rows too long for shared memory (256 KB) */
    bench_ce(8192, 128256, 128256, {{0, "(default: a cluster of 4 blocks per row, a slice each)"},
                                    {4, "(fallback: 1 block per SM, 227 KB of the row staged)"}});
    /* GPT-2's rows fit two per SM; the cluster path beside the default for comparison (the
     * layouts that were not chosen: dev/cuda/crossentropy.cu) */
    bench_ce(N, V, Vp, {{5, "(a cluster of 2 blocks per row)"}});

    /* ---------------------------------------------------------- adamw */
    {
        float *p = f32_buf(NPARAM, 0.05f), *m = f32_buf(NPARAM, 1e-3f), *v = f32_buf(NPARAM, 1e-5f, 0.0f, true);
        void *g = bf16_buf(NPARAM, 0.01f), *w = dmalloc(NPARAM * 2);
        sx_adamw_params hp = {6e-4f, 0.9f, 0.95f, 1e-8f, 0.1f, 10, 1.0f, NULL};
        snprintf(sz, sizeof sz, "n=%zu", NPARAM);
        row("adamw(bf16 grads)", sz, NPARAM * 28.0, [&] {
            CK(sx_adamw(p, m, v, (sx_bf16 *)w, (const sx_bf16 *)g, NPARAM, &hp, 0));
        });
        CK(cudaFree(g));
        float *gf = f32_buf(NPARAM, 0.01f);
        row("adamw(fp32 grads)", sz, NPARAM * 30.0, [&] {
            CK(sx_adamw_f32grad(p, m, v, (sx_bf16 *)w, gf, NPARAM, &hp, 0));
        });
        CK(cudaFree(p)); CK(cudaFree(m)); CK(cudaFree(v)); CK(cudaFree(gf)); CK(cudaFree(w));
    }
    attention_table();
    printf("#\n# mean %%copy over the %d API rows without a remark: %.1f%%\n", g_n_ratio, 100.0 * g_sum_ratio / g_n_ratio);
    CK(cudaDeviceSynchronize());
    return 0;
}
