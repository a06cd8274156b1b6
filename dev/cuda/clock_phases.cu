/* Does the SM clock follow each phase of a step, or the step's average, and how does a GEMM's time follow it?  The
 * planner sets one clock per step from its average power (docs/model.md, "Clock under the power cap") and stretches
 * the GEMMs by 1.053 x^-0.375, a regression of the steps' forward GEMMs against the step's mean NVML clock.  If the
 * cap's controller lowered the clock within a GEMM phase and raised it in a memory-bound one, the GEMMs of a mixed
 * step would run below the step's mean clock, and an exponent under 1 is what that would look like from the mean.
 *
 * Patterns (each about `seconds_per_pattern`): bf16 GEMMs of 8192^3 (cublasGemmEx) for G ms, then device-to-device
 * copies of 1 GiB for G ms, repeated, G in {2, 10, 50, 250}; the GEMMs alone; the copies alone.  Each further shape
 * MxNxK given runs two: alternating every 2 ms (under the cap: the top clock) and alone (as capped as it gets), so
 * that its time at two clocks gives its exponent.  Every shape then runs as calibrate times it (cool_5ms: 5 ms
 * batches, each after 50 ms idle, the median batch).  A thread reads the SM clock through NVML (validator/power.c)
 * every millisecond; each sample goes to the phase the GPU ran then (events between the phases, placed on the host's
 * clock by a synchronized start), samples within 0.5 ms of a boundary and the first period left out.  One CSV line
 * per pattern and phase:
 *   shape,pattern,gemm_ms,copy_ms,phase,samples,mean_mhz,min_mhz,max_mhz,gemm_us,tflops
 * gemm_us: the mean time of one GEMM in that pattern (its GEMM phases' events over their GEMMs).
 * Check (dev_check): the 8192^3 GEMM's first column against a float64 sum on the host.
 * Measured: docs/validation/2026-11-27-h100h200-gemm-sustained.
 *
 * --tn: A transposed (C = A^T B), the layout of the training step's linear forward and of calibrate's GEMMs; without
 * it both operands as stored.  --workspace-mib N: the cuBLAS handle's workspace set to N MiB, as the step sets 32
 * (the recorded runs kept cuBLAS's default, and ran 8192^3 7-11% slower than calibrate's timing of it).
 * --poll-ms P: the NVML clock read every P ms (default 1); 0, no sampler at all (the clock columns then read 0):
 * whether the reading itself slows the GPU, as calibrate's GEMM timing has no sampler beside it (it does not:
 * docs/validation/2026-11-27-h100-calibrate-operands).  --data normal|uniform|calibrate: the operands' values,
 * normal (sd 0.02, the default) or uniform in [-1, 1) over each whole operand, or as calibrate's scratch holds them
 * (validator/bench.c): one 16 MiB block of uniform values repeated through every buffer, A and B alike.
 * --data nan: every operand NaN, what calibrate's GEMMs read before scratch_refresh (validator/bench.h).
 * --cool-first: every shape timed as calibrate times it (its batch size too) before any other work, with the card's
 * temperature before and after (cool_first rows).  --stream: the handle, events and copies on a non-blocking stream of
 * their own (calibrate's and the step's way) instead of the legacy default stream.  --big-alloc: each operand at the
 * start of a 4 GiB allocation, as calibrate's scratch buffers hold them.
 *
 * build/dev/clock_phases [--tn] [--cool-first] [--stream] [--big-alloc] [--workspace-mib N] [--poll-ms P] [--data D]
 *                        [seconds_per_pattern [MxNxK...]]   (default 3; each operand at most 2^28 elements) */
#include "dev_util.h"
#include <cublas_v2.h>
#include <pthread.h>
#include <string.h>
#include <time.h>
extern "C" {
#include "power.h"
}

static const int N = 8192;                           /* the check's shape, and the first */
static const size_t OPERAND_MAX = (size_t)1 << 28;   /* elements of each of A, B, C */
static const size_t COPY_BYTES = 1u << 30;

/* the samples go into arrays sized once: the main thread reads the first `count` while the thread writes on */
enum { SAMPLES_MAX = 1 << 20 };
typedef struct {
    volatile int stop;
    long poll_ms;
    double *t, *mhz;
    volatile size_t count;
} sampler;

static void *sample_loop(void *arg) {
    sampler *s = (sampler *)arg;
    while (!s->stop && s->count < SAMPLES_MAX) {
        double m = power_sm_mhz(), t = host_now_s();
        s->t[s->count] = t;
        s->mhz[s->count] = m;
        __sync_synchronize();   /* the sample before the count that shows it */
        s->count = s->count + 1;
        struct timespec d = {s->poll_ms / 1000, (s->poll_ms % 1000) * 1000000L};
        nanosleep(&d, NULL);
    }
    return NULL;
}

typedef struct {
    double start, end;   /* host monotonic seconds */
    int gemm;            /* 1: GEMM phase, 0: copies */
} phase;

typedef struct {
    cublasHandle_t blas;
    void *A, *B, *C, *src, *dst;
    int m, n, k;         /* the shape the patterns run */
    int tn;              /* A transposed, as the training step's linear forward (C = W^T X, column-major) */
    cudaStream_t stream; /* 0, the legacy default stream; --stream: a non-blocking one, as calibrate's and the step's */
} rig;

static void gemm(const rig *g) {
    const float one = 1.0f, zero = 0.0f;
    CB(cublasGemmEx(g->blas, g->tn ? CUBLAS_OP_T : CUBLAS_OP_N, CUBLAS_OP_N, g->m, g->n, g->k, &one, g->A, CUDA_R_16BF,
                    g->tn ? g->k : g->m, g->B, CUDA_R_16BF, g->k, &zero, g->C, CUDA_R_16BF, g->m, CUBLAS_COMPUTE_32F,
                    CUBLAS_GEMM_DEFAULT));
}

static void copy(const rig *g) { CK(cudaMemcpyAsync(g->dst, g->src, COPY_BYTES, cudaMemcpyDeviceToDevice, g->stream)); }

/* ms per call of fn, warm: 20 calls, then 10 timed */
static float warm_ms(const rig *g, void (*fn)(const rig *)) {
    cudaEvent_t e0, e1;
    CK(cudaEventCreate(&e0));
    CK(cudaEventCreate(&e1));
    for (int i = 0; i < 20; i++) fn(g);
    CK(cudaEventRecord(e0, g->stream));
    for (int i = 0; i < 10; i++) fn(g);
    CK(cudaEventRecord(e1, g->stream));
    CK(cudaEventSynchronize(e1));
    float ms = 0;
    CK(cudaEventElapsedTime(&ms, e0, e1));
    CK(cudaEventDestroy(e0));
    CK(cudaEventDestroy(e1));
    return ms / 10;
}

/* One pattern: gcalls GEMMs then ccalls copies, `periods` times, after 200 ms idle; its phases on the host's
 * clock (events between them, tied to the host by a synchronized start), and the ms of every GEMM phase. */
static std::vector<phase> run_pattern(const rig *g, int gcalls, int ccalls, int periods, double *gemm_total_ms) {
    std::vector<cudaEvent_t> ev(2 * periods + 1);
    for (cudaEvent_t &e : ev) CK(cudaEventCreate(&e));
    struct timespec gap = {0, 200000000};
    nanosleep(&gap, NULL);
    CK(cudaDeviceSynchronize());
    const double host0 = host_now_s();
    CK(cudaEventRecord(ev[0], g->stream));
    for (int p = 0; p < periods; p++) {
        for (int i = 0; i < gcalls; i++) gemm(g);
        CK(cudaEventRecord(ev[2 * p + 1], g->stream));
        for (int i = 0; i < ccalls; i++) copy(g);
        CK(cudaEventRecord(ev[2 * p + 2], g->stream));
    }
    CK(cudaDeviceSynchronize());
    std::vector<phase> ph;
    *gemm_total_ms = 0.0;
    for (int p = 0; p < periods; p++) {
        float a = 0, b = 0, c = 0;
        if (p > 0) CK(cudaEventElapsedTime(&a, ev[0], ev[2 * p]));
        CK(cudaEventElapsedTime(&b, ev[0], ev[2 * p + 1]));
        CK(cudaEventElapsedTime(&c, ev[0], ev[2 * p + 2]));
        if (gcalls) ph.push_back({host0 + a * 1e-3, host0 + b * 1e-3, 1});
        if (ccalls) ph.push_back({host0 + b * 1e-3, host0 + c * 1e-3, 0});
        *gemm_total_ms += b - a;
    }
    for (cudaEvent_t &e : ev) CK(cudaEventDestroy(e));
    return ph;
}

/* calibrate's timing (validator/gpu_timing.c, time_batches with cool batches): BATCHES batches of `reps` GEMMs, each
 * after CALIBRATE_COOL_IDLE_MS (50 ms) of idle; the median batch's ms per GEMM, and each batch as a GEMM phase */
static std::vector<phase> run_cool(const rig *g, int reps, double *median_ms) {
    enum { BATCHES = 5 };
    cudaEvent_t e0, e1;
    CK(cudaEventCreate(&e0));
    CK(cudaEventCreate(&e1));
    std::vector<phase> ph;
    std::vector<float> ms(BATCHES);
    for (int b = 0; b < BATCHES; b++) {
        CK(cudaDeviceSynchronize());
        struct timespec idle = {0, 50000000};
        nanosleep(&idle, NULL);
        const double host0 = host_now_s();
        CK(cudaEventRecord(e0, g->stream));
        for (int r = 0; r < reps; r++) gemm(g);
        CK(cudaEventRecord(e1, g->stream));
        CK(cudaEventSynchronize(e1));
        CK(cudaEventElapsedTime(&ms[b], e0, e1));
        ph.push_back({host0, host0 + ms[b] * 1e-3, 1});
    }
    CK(cudaEventDestroy(e0));
    CK(cudaEventDestroy(e1));
    std::sort(ms.begin(), ms.end());
    *median_ms = ms[BATCHES / 2] / reps;
    return ph;
}

/* The clock samples inside the phases of one kind, 0.5 ms in from their ends, the first period left out (the clock
 * settling): their count, mean, lowest and highest. */
static int phase_clock(const sampler *smp, const std::vector<phase> &ph, int kind, int skip, double *mean, double *lo,
                       double *hi) {
    const size_t count = smp->count;
    double sum = 0;
    int n = 0;
    size_t j = 0;
    *lo = 1e9, *hi = 0;
    for (size_t q = (size_t)skip; q < ph.size(); q++) {
        if (ph[q].gemm != kind) continue;
        while (j < count && smp->t[j] < ph[q].start + 5e-4) j++;
        for (size_t k = j; k < count && smp->t[k] <= ph[q].end - 5e-4; k++) {
            if (smp->mhz[k] <= 0) continue;
            sum += smp->mhz[k];
            *lo = std::min(*lo, smp->mhz[k]);
            *hi = std::max(*hi, smp->mhz[k]);
            n++;
        }
    }
    *mean = n ? sum / n : 0.0;
    if (!n) *lo = 0.0;
    return n;
}

/* the command line: flags, then seconds a pattern and further shapes */
typedef struct {
    int tn, cool_first, own_stream, big_alloc;
    int workspace_mib;   /* -1: cuBLAS's default workspace */
    int poll_ms;
    const char *data;
    double seconds;
    std::vector<int> shapes;   /* M, N, K of each shape, 8192^3 first */
} options;

static const char USAGE[] = "clock_phases [--tn] [--cool-first] [--stream] [--big-alloc] [--workspace-mib N] "
                            "[--poll-ms P] [--data D] [seconds_per_pattern 0.5..30 [MxNxK...]]\n";

/* an integer flag's value in [lo, hi], or -1 after one line on stderr */
static int flag_int(const char *flag, const char *text, int lo, int hi) {
    const int v = atoi(text);
    if (v < lo || v > hi) {
        fprintf(stderr, "clock_phases: %s %s: expected %d..%d\n", flag, text, lo, hi);
        return -1;
    }
    return v;
}

/* 0, or 2 after one line on stderr */
static int parse_options(int argc, char **argv, options *o) {
    *o = options{0, 0, 0, 0, -1, 1, "normal", 3.0, {N, N, N}};
    for (; argc > 1 && argv[1][0] == '-' && argv[1][1] == '-'; argc--, argv++) {
        const char *f = argv[1];
        const int valued =
            argc > 2 && (!strcmp(f, "--workspace-mib") || !strcmp(f, "--poll-ms") || !strcmp(f, "--data"));
        if (!strcmp(f, "--tn")) o->tn = 1;
        else if (!strcmp(f, "--cool-first")) o->cool_first = 1;
        else if (!strcmp(f, "--stream")) o->own_stream = 1;
        else if (!strcmp(f, "--big-alloc")) o->big_alloc = 1;
        else if (valued && !strcmp(f, "--workspace-mib")) {
            if ((o->workspace_mib = flag_int(f, argv[2], 0, 1024)) < 0) return 2;
        } else if (valued && !strcmp(f, "--poll-ms")) {
            if ((o->poll_ms = flag_int(f, argv[2], 0, 1000)) < 0) return 2;
        } else if (valued) {
            o->data = argv[2];
            if (strcmp(o->data, "normal") && strcmp(o->data, "uniform") && strcmp(o->data, "calibrate") &&
                strcmp(o->data, "nan")) {
                fprintf(stderr, "clock_phases: --data %s: expected normal, uniform, calibrate or nan\n", o->data);
                return 2;
            }
        } else {
            fprintf(stderr, "clock_phases: unknown flag '%s'\n", f);
            return 2;
        }
        if (valued) argc--, argv++;
    }
    if (argc > 1) o->seconds = atof(argv[1]);
    for (int i = 2; i < argc; i++) {
        int m = 0, n = 0, k = 0;
        if (sscanf(argv[i], "%dx%dx%d", &m, &n, &k) != 3 || m < 1 || n < 1 || k < 1 || (size_t)m * k > OPERAND_MAX ||
            (size_t)k * n > OPERAND_MAX || (size_t)m * n > OPERAND_MAX) {
            fprintf(stderr, "clock_phases: shape '%s': expected MxNxK, each operand at most 2^28 elements\n", argv[i]);
            return 2;
        }
        o->shapes.insert(o->shapes.end(), {m, n, k});
    }
    if (!(o->seconds >= 0.5 && o->seconds <= 30.0)) {
        fputs(USAGE, stderr);
        return 2;
    }
    return 0;
}

/* the operands' values on the host, `most` of each (--data) */
static void fill_operands(const char *data, size_t most, vec &ha, vec &hb) {
    if (!strcmp(data, "normal")) {
        ha = dev_randn(most, 0, 0.02), hb = dev_randn(most, 0, 0.02);
    } else if (!strcmp(data, "uniform")) {
        ha.resize(most), hb.resize(most);
        for (double &x : ha) x = 2.0 * (rand() / (RAND_MAX + 1.0)) - 1.0;
        for (double &x : hb) x = 2.0 * (rand() / (RAND_MAX + 1.0)) - 1.0;
    } else if (!strcmp(data, "nan")) {
        /* what calibrate's GEMMs read before scratch_refresh: operands the earlier shapes' outputs had turned to NaN */
        ha.assign(most, std::nan("")), hb = ha;
    } else {
        /* validator/bench.c's scratch_init: its LCG, 8 Mi values, repeated; the same block in A and B */
        const size_t block = (size_t)8 << 20;
        ha.resize(most);
        unsigned seed = 12345;
        for (size_t i = 0; i < most; i++) {
            if (i < block) {
                seed = seed * 1664525u + 1013904223u;
                ha[i] = 2.0 * (((float)(seed >> 8) + 0.5f) / 16777216.0f) - 1.0;
            } else {
                ha[i] = ha[i - block];
            }
        }
        hb = ha;
    }
}

/* A, B and C on the device (--big-alloc: each at the start of a 4 GiB allocation, as calibrate's scratch buffers,
 * validator/bench.c), the copies' 1 GiB source and destination */
static void place_operands(rig *g, vec &ha, vec &hb, size_t most, int big_alloc) {
    g->A = dev_up(ha, 2), g->B = dev_up(hb, 2), g->C = dmalloc(most * 2);
    if (big_alloc) {
        void *op[3] = {g->A, g->B, g->C};
        for (void *&o : op) {
            void *big = dmalloc((size_t)4 << 30);
            CK(cudaMemcpy(big, o, most * 2, cudaMemcpyDeviceToDevice));
            CK(cudaFree(o));
            o = big;
        }
        g->A = op[0], g->B = op[1], g->C = op[2];
    }
    g->src = dmalloc(COPY_BYTES), g->dst = dmalloc(COPY_BYTES);
    CK(cudaMemset(g->src, 1, COPY_BYTES));
}

/* --cool-first: every shape as calibrate times it before any other work on the card (its batch size from
 * calibrate's rule, 5 ms at 500 TFLOP/s, validator/linear.c), with the card's temperature before and after */
static void time_cool_first(rig *g, const std::vector<int> &shapes, const sampler *smp) {
    for (size_t si = 0; si < shapes.size(); si += 3) {
        g->m = shapes[si], g->n = shapes[si + 1], g->k = shapes[si + 2];
        const double flops = 2.0 * g->m * (double)g->n * g->k;
        const int reps = std::min(1000, (int)(5e-3 / (flops / 500e12)) + 1);
        gemm(g);   /* calibrate's untimed batch: the algorithm picked, the code loaded */
        const double c0 = power_temperature_c();
        double cool_ms, mean, lo, hi;
        std::vector<phase> ph = run_cool(g, reps, &cool_ms);
        const int n = phase_clock(smp, ph, 1, 0, &mean, &lo, &hi);
        printf("%dx%dx%d,cool_first,%d,50,gemm,%d,%.0f,%.0f,%.0f,%.1f,%.1f\n", g->m, g->n, g->k, reps, n, mean, lo, hi,
               1e3 * cool_ms, flops / (cool_ms * 1e-3) / 1e12);
        printf("# %dx%dx%d cool_first: %.0f C before, %.0f C after\n", g->m, g->n, g->k, c0, power_temperature_c());
        fflush(stdout);
    }
}

/* One shape's patterns (the first shape all six, a further one alternating every 2 ms and alone), then as calibrate
 * times it (cool_5ms: 5 ms batches, each after 50 ms idle); a CSV line per pattern and phase. */
static void time_shape(rig *g, int first, double seconds, const sampler *smp) {
    static const double lengths[6][2] = {{2, 2}, {10, 10}, {50, 50}, {250, 250}, {1000, 0}, {0, 1000}};
    static const char *const names[6] = {"alternate_2ms", "alternate_10ms", "alternate_50ms", "alternate_250ms",
                                         "gemm_only", "copy_only"};
    const float gemm_ms = warm_ms(g, gemm), copy_ms = warm_ms(g, copy);
    printf("# %dx%dx%d: one GEMM %.3f ms, one copy %.3f ms (warm, before the patterns)\n", g->m, g->n, g->k, gemm_ms,
           copy_ms);
    for (int pi = 0; pi < 6; pi++) {
        if (!first && pi != 0 && pi != 4) continue;
        const int gcalls = lengths[pi][0] > 0 ? std::max(1, (int)(lengths[pi][0] / gemm_ms + 0.5)) : 0;
        const int ccalls = lengths[pi][1] > 0 ? std::max(1, (int)(lengths[pi][1] / copy_ms + 0.5)) : 0;
        const double period = gcalls * gemm_ms + ccalls * copy_ms;
        const int periods = std::max(1, (int)(seconds * 1e3 / period + 0.5));
        double gemm_total_ms;
        std::vector<phase> ph = run_pattern(g, gcalls, ccalls, periods, &gemm_total_ms);
        const int skip = ph.size() > 2 ? (gcalls && ccalls ? 2 : 1) : 0;
        for (int kind = 1; kind >= 0; kind--) {
            if (kind ? !gcalls : !ccalls) continue;
            double mean, lo, hi;
            const int n = phase_clock(smp, ph, kind, skip, &mean, &lo, &hi);
            const double gus = kind ? 1e3 * gemm_total_ms / ((double)gcalls * periods) : 0.0;
            printf("%dx%dx%d,%s,%g,%g,%s,%d,%.0f,%.0f,%.0f,%.1f,%.1f\n", g->m, g->n, g->k, names[pi], lengths[pi][0],
                   lengths[pi][1], kind ? "gemm" : "copy", n, mean, lo, hi, gus,
                   kind ? 2.0 * g->m * (double)g->n * g->k / (gus * 1e-6) / 1e12 : 0.0);
            fflush(stdout);
        }
    }
    double cool_ms, mean, lo, hi;
    std::vector<phase> ph = run_cool(g, std::max(1, (int)(5.0 / gemm_ms + 0.5)), &cool_ms);
    const int n = phase_clock(smp, ph, 1, 0, &mean, &lo, &hi);
    printf("%dx%dx%d,cool_5ms,5,50,gemm,%d,%.0f,%.0f,%.0f,%.1f,%.1f\n", g->m, g->n, g->k, n, mean, lo, hi,
           1e3 * cool_ms, 2.0 * g->m * (double)g->n * g->k / (cool_ms * 1e-3) / 1e12);
    fflush(stdout);
}

int main(int argc, char **argv) {
    options o;
    if (parse_options(argc, argv, &o) != 0) return 2;
    char why[256];
    if (power_open(why, sizeof why) != 0) {
        fprintf(stderr, "clock_phases: NVML: %s\n", why);
        return 1;
    }
    rig g;
    g.tn = o.tn;
    g.stream = 0;
    CB(cublasCreate(&g.blas));
    if (o.own_stream) {
        CK(cudaStreamCreateWithFlags(&g.stream, cudaStreamNonBlocking));
        CB(cublasSetStream(g.blas, g.stream));
    }
    void *workspace = NULL;
    if (o.workspace_mib >= 0) {
        /* the step's and calibrate's handle carry 32 MiB (validator/gpu_context.h, CUBLAS_WORKSPACE_BYTES) */
        if (o.workspace_mib > 0) workspace = dmalloc((size_t)o.workspace_mib << 20);
        CB(cublasSetWorkspace(g.blas, workspace, (size_t)o.workspace_mib << 20));
    }
    const std::vector<int> &shapes = o.shapes;
    size_t most = (size_t)N * N;
    for (size_t i = 0; i < shapes.size(); i += 3)
        most = std::max({most, (size_t)shapes[i] * shapes[i + 2], (size_t)shapes[i + 2] * shapes[i + 1],
                         (size_t)shapes[i] * shapes[i + 1]});
    vec ha, hb;
    fill_operands(o.data, most, ha, hb);
    place_operands(&g, ha, hb, most, o.big_alloc);

    /* check: C[:, 0] of the first shape against float64 */
    g.m = g.n = g.k = N;
    gemm(&g);
    CK(cudaDeviceSynchronize());
    vec c0 = dev_down(g.C, N, 2), r(N);
    for (int i = 0; i < N; i++) {
        double sum = 0.0;
        for (int p = 0; p < N; p++) sum += (g.tn ? ha[(size_t)i * N + p] : ha[(size_t)p * N + i]) * hb[p];
        r[i] = sum;
    }
    if (strcmp(o.data, "nan")) dev_check("GEMM 8192^3 column 0 vs float64", c0, r, 1e-2);

    sampler smp;
    smp.stop = 0;
    smp.poll_ms = o.poll_ms;
    smp.count = 0;
    smp.t = (double *)malloc(SAMPLES_MAX * sizeof(double));
    smp.mhz = (double *)malloc(SAMPLES_MAX * sizeof(double));
    if (!smp.t || !smp.mhz) {
        fprintf(stderr, "clock_phases: out of host memory\n");
        return 1;
    }
    pthread_t thread;
    if (o.poll_ms > 0 && pthread_create(&thread, NULL, sample_loop, &smp) != 0) {
        fprintf(stderr, "clock_phases: pthread_create failed\n");
        return 1;
    }
    printf("# operands: %s\n", o.data);
    printf("shape,pattern,gemm_ms,copy_ms,phase,samples,mean_mhz,min_mhz,max_mhz,gemm_us,tflops\n");
    if (o.cool_first) time_cool_first(&g, shapes, &smp);
    for (size_t si = 0; si < shapes.size(); si += 3) {
        g.m = shapes[si], g.n = shapes[si + 1], g.k = shapes[si + 2];
        time_shape(&g, si == 0, o.seconds, &smp);
    }
    smp.stop = 1;
    if (o.poll_ms > 0) pthread_join(thread, NULL);
    printf("# %zu clock samples in %.1f s\n", (size_t)smp.count, smp.count ? smp.t[smp.count - 1] - smp.t[0] : 0.0);
    free(smp.t);
    free(smp.mhz);
    CK(cudaFree(g.A));
    CK(cudaFree(g.B));
    CK(cudaFree(g.C));
    CK(cudaFree(g.src));
    CK(cudaFree(g.dst));
    CB(cublasDestroy(g.blas));
    if (g.stream) CK(cudaStreamDestroy(g.stream));
    if (workspace) CK(cudaFree(workspace));
    power_close();
    return g_dev_failed;
}
