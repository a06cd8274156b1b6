/* calibrate's power model (calibrate_power.h; docs/model.md, "Clock under the power cap"):
 * workloads of known work held for seconds each under NVML, and the fit of static power,
 * switching energies and the clock exponent to them. */
#include <cuda_runtime_api.h>
#include <gsl/gsl_multifit.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "bench.h"
#include "calibrate_power.h"
#include "gpu_check.h"
#include "gpu_timing.h"
#include "kernels.h"
#include "power.h"

/* One workload held for a second: its work per call and what NVML saw. */
typedef struct {
    char what[48];
    double duty;                                 /* the workload's share of the time; idle spin between */
    double gemm_flops, attention_flops, bytes;   /* per call */
    double gemm_rate, attention_rate, byte_rate; /* per second over the window */
    double watts, mhz, celsius, seconds;
    double speed;                                /* the rate of the work against its rate on a cool GPU (the top
                                                    clock): the clock fraction the power model sees */
    int energy_updates;
    int is_static;                               /* the spinning thread: static power, not work */
} power_sample;


static double static_at(const power_model *pm, double celsius)
{
    return pm->cold_w + (celsius > 0 ? pm->w_per_c * (celsius - pm->cold_c) : 0.0);
}

/* a call of the workload, then the idle spin that sets its duty: one thread
 * of one SM counting cycles (the clock probe), the rest of the GPU idle */
typedef struct {
    launch_fn fn;
    const void *ctx;
    int gap_us;
} duty_ctx;
static float *gap_slot;

static void run_duty(const void *ctx)
{
    const duty_ctx *d = ctx;
    if (d->fn) d->fn(d->ctx);
    if (d->gap_us > 0) CUDA_CHECK(sx_sm_clock_probe(gap_slot, d->gap_us, bench.stream));
}

/* Seconds of wall time since t0 (CLOCK_MONOTONIC). */
static double wall_since_s(const struct timespec *t0)
{
    struct timespec t;
    clock_gettime(CLOCK_MONOTONIC, &t);
    return (double)(t.tv_sec - t0->tv_sec) + 1e-9 * (double)(t.tv_nsec - t0->tv_nsec);
}

/* Keeps the GPU busy with chunks of calls for `seconds` of wall time, two
 * chunks in flight, and returns the calls made; *elapsed the wall time until
 * the last finished. */
static long run_for(const duty_ctx *d, int per_chunk, double seconds, double *elapsed)
{
    cudaEvent_t done[2];
    CUDA_CHECK(cudaEventCreateWithFlags(&done[0], cudaEventDisableTiming));
    CUDA_CHECK(cudaEventCreateWithFlags(&done[1], cudaEventDisableTiming));
    struct timespec t0;
    clock_gettime(CLOCK_MONOTONIC, &t0);
    long calls = 0;
    for (int chunk = 0;; chunk++) {
        for (int i = 0; i < per_chunk; i++) run_duty(d);
        calls += per_chunk;
        CUDA_CHECK(cudaEventRecord(done[chunk & 1], bench.stream));
        if (chunk > 0) CUDA_CHECK(cudaEventSynchronize(done[(chunk - 1) & 1]));
        if (wall_since_s(&t0) >= seconds) break;
    }
    CUDA_CHECK(cudaStreamSynchronize(bench.stream));
    *elapsed = wall_since_s(&t0);
    CUDA_CHECK(cudaEventDestroy(done[0]));
    CUDA_CHECK(cudaEventDestroy(done[1]));
    return calls;
}

/* One call's time on a cool GPU, at the top clock: after 300 ms idle, the mean over a
 * burst of about 2 ms (far shorter than the power cap takes to answer: hundreds of ms
 * on an H100, nvidia-smi at 200 ms), the faster of two bursts. */
static double cool_call_s(launch_fn fn, const void *ctx, double call_s)
{
    int calls = call_s > 0 ? (int)(2e-3 / call_s) : 1;
    calls = calls < 3 ? 3 : calls > 200 ? 200 : calls;
    cudaEvent_t start, stop;
    CUDA_CHECK(cudaEventCreate(&start));
    CUDA_CHECK(cudaEventCreate(&stop));
    double best = 0.0;
    for (int burst = 0; burst < 2; burst++) {
        idle_ms(300);
        CUDA_CHECK(cudaEventRecord(start, bench.stream));
        for (int i = 0; i < calls; i++) fn(ctx);
        CUDA_CHECK(cudaEventRecord(stop, bench.stream));
        CUDA_CHECK(cudaEventSynchronize(stop));
        float ms;
        CUDA_CHECK(cudaEventElapsedTime(&ms, start, stop));
        double per_call = ms * 1e-3 / calls;
        if (best == 0.0 || per_call < best) best = per_call;
    }
    CUDA_CHECK(cudaEventDestroy(start));
    CUDA_CHECK(cudaEventDestroy(stop));
    return best;
}

/* A workload at `duty` (call_s: one call's time, timed before): POWER_SETTLE_S
 * for the power cap and NVML's power reading to settle, then POWER_MEASURE_S
 * measured.  NVML's reading trails the work by about a second (nvidia-smi's
 * power.draw ramps over 1 s after a step in load, H100, driver 580), so both
 * are long against that.  -1 when NVML fails. */
#define POWER_SETTLE_S 1.5
#define POWER_MEASURE_S 2.0
/* a sample drawing less than this share of the cap runs at the top clock */
#define POWER_UNCAPPED 0.95
#define POWER_EXPONENT_DEFAULT 2.0
/* seconds of the square GEMM before the hot static sample; degrees apart below which the two static
 * samples give no slope */
#define POWER_HEAT_S 5.0
#define POWER_STATIC_MIN_DC 3.0
static int power_sample_run_for(launch_fn fn, const void *ctx, double call_s, double duty, double settle_s,
                                double measure_s, power_sample *ps)
{
    duty_ctx d = {fn, ctx, 0};
    if (duty < 1.0) {
        double gap_us = call_s * (1.0 - duty) / duty * 1e6;
        d.gap_us = gap_us < 1 ? 1 : gap_us > 100000 ? 100000 : (int)gap_us;
    }
    double period = call_s + d.gap_us * 1e-6;
    int per_chunk = period > 0.02 ? 1 : (int)(0.02 / period);
    /* below full duty the work runs at the top clock; at full duty, its rate against a cool burst's */
    double cool_s = duty < 1.0 || (ps->gemm_flops <= 0 && ps->attention_flops <= 0) ? 0.0 : cool_call_s(fn, ctx, call_s);
    double elapsed;
    run_for(&d, per_chunk, settle_s, &elapsed);
    power_window *w = power_window_begin(POWER_POLL_MS_ALONE);
    long calls = run_for(&d, per_chunk, measure_s, &elapsed);
    if (power_window_end(w, &ps->watts, &ps->mhz, &ps->celsius, &ps->seconds, &ps->energy_updates) != 0) return -1;
    ps->duty = duty;
    ps->gemm_rate = (double)calls * ps->gemm_flops / elapsed;
    ps->attention_rate = (double)calls * ps->attention_flops / elapsed;
    ps->byte_rate = (double)calls * ps->bytes / elapsed;
    ps->speed = cool_s > 0 ? fmin(1.0, cool_s * (double)calls / elapsed) : 1.0;
    return 0;
}

static int power_sample_run(launch_fn fn, const void *ctx, double call_s, double duty, power_sample *ps)
{
    return power_sample_run_for(fn, ctx, call_s, duty, POWER_SETTLE_S, POWER_MEASURE_S, ps);
}

/* a GEMM, then `ln_calls` LayerNorms: a step's alternation of tensor-core and memory-bound kernels */
typedef struct {
    gemm_shape gemm;
    membound_ctx ln;
    int ln_calls;
} mix_ctx;

static void run_mix(const void *ctx)
{
    const mix_ctx *x = ctx;
    run_gemm(&x->gemm);
    for (int i = 0; i < x->ln_calls; i++) run_membound(&x->ln);
}

static void run_spin(const void *ctx)
{
    (void)ctx;
    CUDA_CHECK(sx_sm_clock_probe(gap_slot, 1000, bench.stream));
}

/* one burst's time from its event pair, kept when it ran inside the power window */
static void read_burst(cudaEvent_t pair[2], long cycle, long measured_from, double *burst_s, int *nburst)
{
    CUDA_CHECK(cudaEventSynchronize(pair[1]));
    float ms;
    CUDA_CHECK(cudaEventElapsedTime(&ms, pair[0], pair[1]));
    if (measured_from >= 0 && cycle >= measured_from && *nburst < 100000) burst_s[(*nburst)++] = ms * 1e-3;
}

/* The power limiter's window: the square GEMM in bursts at half duty, the
 * period from 2 to 512 ms.  The bursts alone would draw over the cap; their
 * average does not.  Bursts shorter than the window the limiter averages
 * over run at the top clock (speed 1), longer ones are held down: the period
 * where the speed falls bounds that window.  A diagnostic for
 * docs/validation/2026-11-25-h100-power; it feeds no overlay key. */
static void power_window_sweep(gemm_shape *gs, double call_cool_s, double call_s)
{
    printf("\npower limiter's window: GEMM %lldx%lldx%lld in bursts at 50%% duty (one thread spinning between)\n"
           "%10s %9s %7s %8s %7s %12s\n", (long long)gs->m, (long long)gs->n, (long long)gs->k, "period ms", "burst ms", "W",
           "NVML MHz", "C", "burst speed");
    static const double periods_ms[] = {2, 8, 32, 128, 512};
    enum { RING = 64 };
    scratch_refresh();
    cudaEvent_t ev[RING][2];
    for (int i = 0; i < RING; i++)
        for (int j = 0; j < 2; j++) CUDA_CHECK(cudaEventCreate(&ev[i][j]));
    for (size_t p = 0; p < sizeof periods_ms / sizeof periods_ms[0]; p++) {
        int burst = (int)(periods_ms[p] * 0.5e-3 / call_s + 0.5);
        if (burst < 1) burst = 1;
        double gap_s = burst * call_s;
        double *burst_s = malloc(sizeof(double) * 100000);
        if (!burst_s) { fprintf(stderr, "sextant-gpu: out of host memory\n"); exit(1); }
        int nburst = 0;
        power_window *w = NULL;
        long measured_from = -1, cycles = 0; /* the first burst inside the power window */
        struct timespec t0;
        clock_gettime(CLOCK_MONOTONIC, &t0);
        for (;; cycles++) {
            int slot = (int)(cycles % RING);
            if (cycles >= RING) /* the pair from RING bursts ago: done long since, or wait for it */
                read_burst(ev[slot], cycles - RING, measured_from, burst_s, &nburst);
            CUDA_CHECK(cudaEventRecord(ev[slot][0], bench.stream));
            for (int i = 0; i < burst; i++) run_gemm(gs);
            CUDA_CHECK(cudaEventRecord(ev[slot][1], bench.stream));
            for (double left = gap_s; left > 0; left -= 0.1)
                CUDA_CHECK(sx_sm_clock_probe(gap_slot, left > 0.1 ? 100000 : (int)(left * 1e6) + 1, bench.stream));
            double elapsed = wall_since_s(&t0);
            if (!w && elapsed >= POWER_SETTLE_S) {
                w = power_window_begin(POWER_POLL_MS_ALONE);
                measured_from = cycles + 1;
            }
            if (elapsed >= POWER_SETTLE_S + POWER_MEASURE_S + periods_ms[p] * 1e-3) break;
        }
        CUDA_CHECK(cudaStreamSynchronize(bench.stream));
        for (long c = cycles + 1 > RING ? cycles + 1 - RING : 0; c <= cycles; c++)
            read_burst(ev[c % RING], c, measured_from, burst_s, &nburst);
        double watts = 0, mhz = 0, celsius = 0, seconds = 0;
        int updates = 0;
        if (power_window_end(w, &watts, &mhz, &celsius, &seconds, &updates) != 0) watts = 0;
        sort_ascending(burst_s, (size_t)nburst);
        double median = nburst ? burst_s[nburst / 2] : 0.0;
        printf("%10.0f %9.2f %7.1f %8.0f %7.1f %12.3f\n", periods_ms[p], burst * call_s * 1e3, watts, mhz, celsius,
               median > 0 ? call_cool_s * burst / median : 0.0);
        free(burst_s);
    }
    for (int i = 0; i < RING; i++)
        for (int j = 0; j < 2; j++) CUDA_CHECK(cudaEventDestroy(ev[i][j]));
}

/* The switching energies at the top clock, by least squares (GSL) over the
 * work samples below the cap (at the top clock): P - static(T) = e_gemm
 * F_gemm/s + e_attention F_attention/s + e_byte bytes/s, static(T) at the
 * sample's temperature.  The residual's rms in pm->rms_w.  -1 when fewer
 * samples than unknowns. */
static int power_fit_energies(const power_sample *ps, int n, power_model *pm)
{
    int rows = 0;
    for (int i = 0; i < n; i++) rows += ps[i].watts < POWER_UNCAPPED * pm->cap_w && !ps[i].is_static;
    if (rows < 3) return -1;
    gsl_matrix *X = gsl_matrix_alloc((size_t)rows, 3);
    gsl_vector *y = gsl_vector_alloc((size_t)rows), *coef = gsl_vector_alloc(3);
    gsl_matrix *cov = gsl_matrix_alloc(3, 3);
    gsl_multifit_linear_workspace *ws = gsl_multifit_linear_alloc((size_t)rows, 3);
    if (!X || !y || !coef || !cov || !ws) { fprintf(stderr, "sextant-gpu: out of host memory\n"); exit(1); }
    for (int i = 0, r = 0; i < n; i++) {
        if (ps[i].watts >= POWER_UNCAPPED * pm->cap_w || ps[i].is_static) continue;
        gsl_matrix_set(X, (size_t)r, 0, ps[i].gemm_rate * 1e-12);      /* TFLOP/s and TB/s: coefficients near 1 */
        gsl_matrix_set(X, (size_t)r, 1, ps[i].attention_rate * 1e-12);
        gsl_matrix_set(X, (size_t)r, 2, ps[i].byte_rate * 1e-12);
        gsl_vector_set(y, (size_t)r, ps[i].watts - static_at(pm, ps[i].celsius));
        r++;
    }
    double chisq = 0.0;
    gsl_multifit_linear(X, y, coef, cov, &chisq, ws);
    pm->e_gemm = gsl_vector_get(coef, 0) * 1e-12;
    pm->e_attention = gsl_vector_get(coef, 1) * 1e-12;
    pm->e_byte = gsl_vector_get(coef, 2) * 1e-12;
    pm->rms_w = sqrt(chisq / rows);
    gsl_multifit_linear_free(ws);
    gsl_matrix_free(cov);
    gsl_vector_free(coef);
    gsl_vector_free(y);
    gsl_matrix_free(X);
    return 0;
}

static double sample_dynamic_w(const power_sample *p, const power_model *pm)
{
    return pm->e_gemm * p->gemm_rate + pm->e_attention * p->attention_rate + pm->e_byte * p->byte_rate;
}

/* One sample of a workload whose work per call is given (F and bytes). */
static int power_sample_of(power_sample *ps, const char *what, launch_fn fn, const void *ctx, double gemm_flops,
                           double attention_flops, double bytes, double duty)
{
    scratch_refresh(); /* fresh operands: AdamW's sample leaves its fp32 state in three of the buffers */
    snprintf(ps->what, sizeof ps->what, "%s", what);
    ps->gemm_flops = gemm_flops;
    ps->attention_flops = attention_flops;
    ps->bytes = bytes;
    return power_sample_run(fn, ctx, time_median(fn, ctx, NULL), duty, ps);
}

/* The power model (docs/model.md, "Clock under the power cap"): workloads of
 * known work held for seconds each, on the scratch buffers' random operands
 * (the operands' values move a GEMM's power by a quarter: measured on the buffers
 * the GEMM tables had left, 2026-11-25) -- a spinning thread, the device copy, our
 * memory-bound kernels, GEMMs at full and partial duty, GEMMs between
 * LayerNorms, our fused attention -- with NVML's energy counter.  Then:
 *   static: the spinning thread's power, cold (first) and hot (after 5 s of
 *     GEMMs), as a line in the temperature (leakage), taken at the capped
 *     samples' temperature;
 *   e_gemm, e_attention, e_byte: least squares over the samples that stay
 *     below the cap (they run at the top clock);
 *   exponent: from the samples the cap holds down, each gives
 *     ln((P - static) / dynamic at the top clock) / ln(speed); the median.
 * pm->ok = 0 with the reason on stdout when NVML or the fit fails: the
 * overlay then leaves the power model out. */
void calibrate_power(size_t copy_bytes, power_model *pm)
{
    memset(pm, 0, sizeof *pm);
    char why[256];
    printf("\npower (per workload: %.1f s to settle, then %.1f s measured; power from NVML's energy counter between its "
           "first and last step in that time; speed: the work's rate against 2 ms bursts on a cool GPU; NVML's mean SM "
           "clock for reference)\n", POWER_SETTLE_S, POWER_MEASURE_S);
    if (power_open(why, sizeof why) != 0) {
        printf("  not measured: %s; the overlay leaves the power model out\n", why);
        return;
    }
    pm->cap_w = power_limit_w();
    pm->top_mhz = power_max_sm_mhz();
    if (pm->cap_w <= 0 || pm->top_mhz <= 0) {
        printf("  not measured: NVML gives no power limit or maximum SM clock\n");
        return;
    }
    CUDA_CHECK(cudaMalloc((void **)&gap_slot, sizeof(float)));
    enum { SAMPLES_MAX = 24 };
    power_sample ps[SAMPLES_MAX];
    int n = 0, failed = 0;
    memset(ps, 0, sizeof ps);
    char what[48];

    failed |= power_sample_run(run_spin, NULL, 1e-3, 1.0, &ps[n]);
    ps[n].is_static = 1;
    snprintf(ps[n++].what, sizeof ps[0].what, "one thread spinning");
    snprintf(what, sizeof what, "device copy %zu MiB", copy_bytes >> 20);
    failed |= power_sample_of(&ps[n++], what, run_copy, &copy_bytes, 0, 0, 2.0 * (double)copy_bytes, 1.0);
    const double ln_bytes = 2.0 * 32768 * 768 * 2 + 2.0 * 768 * 2;
    membound_ctx ln = {"attn_norm", NULL, 32768, 768, 3072, 50304, 1024, 32, 12, 0, 0};
    failed |= power_sample_of(&ps[n++], "layernorm fwd 32768 x 768", run_membound, &ln, 0, 0, ln_bytes, 1.0);
    membound_ctx adamw = {"optimizer", NULL, 0, 0, 0, 0, 0, 0, 0, 500000000, 0};
    /* reads grad, p, m, v; writes p, m, v and the bf16 weights */
    failed |= power_sample_of(&ps[n++], "AdamW over 500M parameters", run_membound, &adamw, 0, 0, 500e6 * (2.0 + 12 + 12 + 2),
                              1.0);

    /* m, n, k, duty %: a square GEMM at full and partial duty, the LLaMA-style 1.24B's largest at 8192 tokens */
    static const int64_t gemms[][4] = {{8192, 8192, 8192, 100}, {8192, 8192, 8192, 60}, {8192, 8192, 8192, 30},
                                       {8192, 16384, 2048, 100}, {8192, 2048, 8192, 100}, {8192, 128256, 2048, 100}};
    for (size_t i = 0; i < sizeof gemms / sizeof gemms[0]; i++) {
        int64_t m = gemms[i][0], nn = gemms[i][1], k = gemms[i][2];
        gemm_shape gs = {m, nn, k, 1, (long long)(m * k), (long long)(k * nn), (long long)(m * nn)};
        scratch_need(2.0 * (double)(m * nn > m * k ? (m * nn > k * nn ? m * nn : k * nn) : (m * k > k * nn ? m * k : k * nn)), "a GEMM");
        snprintf(what, sizeof what, "GEMM %lldx%lldx%lld, %lld%% of the time", (long long)m, (long long)nn, (long long)k,
                 (long long)gemms[i][3]);
        failed |= power_sample_of(&ps[n++], what, run_gemm, &gs, 2.0 * (double)m * (double)nn * (double)k, 0,
                                  2.0 * ((double)m * k + (double)k * nn + (double)m * nn), gemms[i][3] / 100.0);
    }
    /* GEMMs between memory-bound kernels, as in a step */
    static const int64_t mixes[][4] = {{8192, 2048, 8192, 3}, {8192, 3072, 768, 1}}; /* m, n, k, LayerNorms per GEMM */
    for (size_t i = 0; i < sizeof mixes / sizeof mixes[0]; i++) {
        int64_t m = mixes[i][0], nn = mixes[i][1], k = mixes[i][2];
        mix_ctx mx = {{m, nn, k, 1, (long long)(m * k), (long long)(k * nn), (long long)(m * nn)}, ln, (int)mixes[i][3]};
        snprintf(what, sizeof what, "GEMM %lldx%lldx%lld + %d layernorm", (long long)m, (long long)nn, (long long)k,
                 mx.ln_calls);
        failed |= power_sample_of(&ps[n++], what, run_mix, &mx, 2.0 * (double)m * (double)nn * (double)k, 0,
                                  mx.ln_calls * ln_bytes + 2.0 * ((double)m * k + (double)k * nn + (double)m * nn), 1.0);
    }
    /* the fused attention of the LLaMA-style 1.24B at micro-batch 4, forward also at partial duty (alone it
     * comes near the cap) */
    flash_ctx f = {.B = 4, .T = 2048, .H = 32, .KV = 8, .D = 64};
    flash_prepare(&f);
    static const int passes[][2] = {{0, 100}, {0, 60}, {1, 100}}; /* backward, duty % */
    for (int i = 0; i < 3; i++) {
        f.backward = passes[i][0];
        flash_error = cudaSuccess;
        double qkv = 2.0 * f.B * (double)f.T * (f.H + 2 * f.KV) * f.D, out = 2.0 * f.B * (double)f.T * f.H * f.D;
        snprintf(what, sizeof what, "attention %s B4 T2048 H32/8 D64, %d%%", f.backward ? "bwd" : "fwd", passes[i][1]);
        failed |= power_sample_of(&ps[n++], what, run_flash, &f, 0, flash_attention_flops(f.B, f.H, f.T, f.D, 1, f.backward),
                                  f.backward ? 2.0 * qkv + 2.0 * out : qkv + out, passes[i][1] / 100.0);
        if (flash_error != cudaSuccess) failed = 1;
    }
    gemm_shape square = {8192, 8192, 8192, 1, 8192LL * 8192, 8192LL * 8192, 8192LL * 8192};
    double square_s = time_median(run_gemm, &square, NULL);
    power_window_sweep(&square, cool_call_s(run_gemm, &square, square_s), square_s);
    /* static power hot: the spinning thread again, right after POWER_HEAT_S of the square GEMM has
     * heated the chip to where it holds at its cap; measured briefly, before it cools */
    {
        duty_ctx hd = {run_gemm, &square, 0};
        double heated_s;
        run_for(&hd, 1, POWER_HEAT_S, &heated_s);
        failed |= power_sample_run_for(run_spin, NULL, 1e-3, 1.0, 0.3, 1.0, &ps[n]);
        ps[n].is_static = 1;
        snprintf(ps[n++].what, sizeof ps[0].what, "one thread spinning, hot");
    }
    flash_release(&f);
    CUDA_CHECK(cudaFree(gap_slot));
    gap_slot = NULL;
    if (failed) {
        printf("  not measured: an NVML reading or a kernel failed; the overlay leaves the power model out\n");
        return;
    }

    /* static power as leakage: linear in the temperature between the cold and the hot spin */
    const power_sample *cold = &ps[0], *hot = &ps[n - 1];
    pm->cold_w = cold->watts;
    pm->cold_c = cold->celsius;
    pm->w_per_c = hot->celsius - cold->celsius >= POWER_STATIC_MIN_DC && hot->watts > cold->watts
                      ? (hot->watts - cold->watts) / (hot->celsius - cold->celsius)
                      : 0.0;
    double capped_c = 0.0;
    int capped_samples = 0;
    for (int i = 0; i < n; i++)
        if (!ps[i].is_static && ps[i].watts >= POWER_UNCAPPED * pm->cap_w && ps[i].celsius > 0) {
            capped_c += ps[i].celsius;
            capped_samples++;
        }
    pm->capped_c = capped_samples ? capped_c / capped_samples : hot->celsius;
    pm->static_w = static_at(pm, pm->capped_c);
    if (power_fit_energies(ps, n, pm) != 0) {
        printf("  fewer than three workloads stayed below the cap; the overlay leaves the power model out\n");
        return;
    }
    double exponents[SAMPLES_MAX];
    int capped = 0;
    for (int i = 0; i < n; i++) {
        double dynamic = sample_dynamic_w(&ps[i], pm), held = ps[i].watts - static_at(pm, ps[i].celsius);
        if (!ps[i].is_static && ps[i].watts >= POWER_UNCAPPED * pm->cap_w && ps[i].speed < 0.99 && dynamic > held &&
            held > 0)
            exponents[capped++] = log(held / dynamic) / log(ps[i].speed);
    }
    sort_ascending(exponents, (size_t)capped);
    pm->exponent = capped ? exponents[capped / 2] : POWER_EXPONENT_DEFAULT;

    printf("%-40s %5s %9s %9s %7s %6s %8s %5s %7s %8s %4s\n", "workload", "duty", "GEMM TF/s", "attn TF/s", "GB/s", "speed",
           "NVML MHz", "C", "W", "model W", "cap");
    for (int i = 0; i < n; i++) {
        double model = static_at(pm, ps[i].celsius) + sample_dynamic_w(&ps[i], pm) * pow(ps[i].speed, pm->exponent);
        printf("%-40s %5.2f %9.1f %9.1f %7.0f %6.3f %8.0f %5.1f %7.1f %8.1f %4s\n", ps[i].what, ps[i].duty,
               ps[i].gemm_rate / 1e12, ps[i].attention_rate / 1e12, ps[i].byte_rate / 1e9, ps[i].speed, ps[i].mhz,
               ps[i].celsius, ps[i].watts, model, ps[i].watts >= POWER_UNCAPPED * pm->cap_w ? "yes" : "");
    }
    printf("static: %.1f W at %.1f C, %.1f W at %.1f C after %.0f s of GEMMs: %+.2f W per C%s; at the %.1f C the capped "
           "samples held: %.1f W\n", cold->watts, cold->celsius, hot->watts, hot->celsius, POWER_HEAT_S, pm->w_per_c,
           pm->w_per_c > 0 ? "" : " (taken as 0: less than a few degrees apart, or not rising)", pm->capped_c, pm->static_w);
    printf("model: P = %.1f W + (%.3f pJ/GEMM FLOP + %.3f pJ/attention FLOP + %.1f pJ/byte) x^%.2f per second of work; "
           "energies fit on the %s samples below %.0f%% of the %.0f W cap (rms %.1f W); exponent: median of %d capped "
           "samples (%.2f-%.2f)%s\n", pm->static_w, pm->e_gemm * 1e12, pm->e_attention * 1e12, pm->e_byte * 1e12,
           pm->exponent, "workload", 100 * POWER_UNCAPPED, pm->cap_w, pm->rms_w, capped,
           capped ? exponents[0] : 0.0, capped ? exponents[capped - 1] : 0.0,
           capped ? "" : " -- none, so 2 (energy per operation as the voltage squared, the voltage as the clock)");
    pm->ok = pm->static_w > 0 && pm->e_gemm > 0 && pm->e_attention > 0 && pm->e_byte >= 0 && pm->static_w < pm->cap_w &&
             pm->exponent >= 0 && pm->exponent <= 8;
    if (!pm->ok) printf("  the fit is implausible (a term not positive or static power above the cap); the overlay leaves it out\n");
}
