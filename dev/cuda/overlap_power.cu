/* What a GPU draws while a GEMM and an NCCL collective run side by side, against each alone: the question
 * behind the power model's clock for steps whose collectives overlap their compute (docs/model.md, "Clock under
 * the power cap"; docs/validation/2026-11-26-h100x2-zero-order: ZeRO-2/3 steps spend 30-70 J a step more than
 * the model's energies add up to, and settle at a lower clock than it says).  The model's energy of such a
 * stretch is additive: each GEMM's switching energy, each collective's (P_coll - P_static) x its time alone,
 * the static power over the wall time.  If the pair draws more than that, contention itself costs energy.
 *
 * One process drives both GPUs (ncclCommInitAll); NVML reads GPU 0's energy counter over each phase
 * (validator/power.c).  The GEMMs run in bursts with a pause after each (DUTY of the time busy), so that alone
 * the GPU stays under its power cap and its clock at the top: energy per operation is then the top clock's
 * and the sums compare.  Phases, each about PHASE_S seconds, every GPU the same loop:
 *   idle; gemm (bursts on the compute stream); coll (a collective looped on a second stream); both (the two
 *   together, the GEMM's bursts and pauses as alone, the collective looped throughout).
 * Per GEMM shape (default: LLaMA-3.2 3B's qkv and mlp_up at 2048 tokens) and collective (all-gather and
 * reduce-scatter of 256 MiB).  Output, one CSV line per phase:
 *   phase,gemm,collective,watts,sm_mhz,seconds,gemms,collectives
 * and per shape x collective the additive prediction of the pair's power against the measured one:
 *   # pair GEMM COLL: predicted W (idle + gemm's - idle rescaled to the pair's GEMM count + coll's - idle
 *     rescaled to its count), measured W, excess J per second of overlap
 *
 * build/dev/overlap_power [seconds per phase]   (default 3) */
#include <cublas_v2.h>
#include <nccl.h>
#include <string.h>
#include <unistd.h>
#include <algorithm>
#include <vector>
#include "gpu_util.h"
extern "C" {
#include "power.h"
}

static const size_t COLL_BYTES = 256u << 20;
static const double BURST_S = 2e-3, DUTY = 0.5;

struct gemm_shape { int m, n, k; const char *name; };
static const gemm_shape SHAPES[] = {{2048, 5120, 3072, "2048x5120x3072"}, {2048, 16384, 3072, "2048x16384x3072"}};

typedef struct {
    int n;
    std::vector<ncclComm_t> comm;
    std::vector<cudaStream_t> compute, side;
    std::vector<void *> a, b, c, send, recv;
    std::vector<cublasHandle_t> blas;
} node;

/* n bf16 values drawn from N(0, sd), on the current GPU: random operands switch as a step's do (constant ones
 * draw less: docs/model.md, "Clock under the power cap") */
static void *random_bf16(size_t n, double sd) {
    std::vector<uint16_t> h(n);
    for (uint16_t &x : h) {
        float f = (float)(sd * rng_normal());
        uint32_t bits;
        memcpy(&bits, &f, 4);
        x = (uint16_t)(bits >> 16);
    }
    void *d = dmalloc(n * 2);
    CK(cudaMemcpy(d, h.data(), n * 2, cudaMemcpyHostToDevice));
    return d;
}

static void gemm(node *nd, const gemm_shape *s) {
    const float one = 1.0f, zero = 0.0f;
    for (int g = 0; g < nd->n; g++) {
        CK(cudaSetDevice(g));
        /* C[n, m] = W[n, k] X[k, m]: a linear layer's output, column-major */
        CB(cublasGemmEx(nd->blas[g], CUBLAS_OP_T, CUBLAS_OP_N, s->n, s->m, s->k, &one, nd->a[g], CUDA_R_16BF, s->k,
                        nd->b[g], CUDA_R_16BF, s->k, &zero, nd->c[g], CUDA_R_16BF, s->n, CUBLAS_COMPUTE_32F,
                        CUBLAS_GEMM_DEFAULT));
    }
}

static int side_idle(node *nd) {
    for (int g = 0; g < nd->n; g++) {
        CK(cudaSetDevice(g));
        cudaError_t e = cudaStreamQuery(nd->side[g]);
        if (e == cudaErrorNotReady) return 0;
        CK(e);
    }
    return 1;
}

/* once the side stream has run dry: FEED more collectives on it, about 5 ms of them alone; their count */
static const int FEED = 8;
static long feed(node *nd, int reduce) {
    if (!side_idle(nd)) return 0;
    const size_t slice = COLL_BYTES / 2 / (size_t)nd->n;
    for (int i = 0; i < FEED; i++) {
        NC(ncclGroupStart());
        for (int g = 0; g < nd->n; g++) {
            if (reduce)
                NC(ncclReduceScatter(nd->send[g], nd->recv[g], slice, ncclBfloat16, ncclSum, nd->comm[g], nd->side[g]));
            else
                NC(ncclAllGather(nd->send[g], nd->recv[g], slice, ncclBfloat16, nd->comm[g], nd->side[g]));
        }
        NC(ncclGroupEnd());
    }
    return FEED;
}

static void sync_streams(node *nd, std::vector<cudaStream_t> &st) {
    for (int g = 0; g < nd->n; g++) {
        CK(cudaSetDevice(g));
        CK(cudaStreamSynchronize(st[g]));
    }
}

struct result { double watts, mhz, seconds; long gemms, colls; };

/* per_burst > 0: GEMM bursts of per_burst calls, each followed by a pause of (1 - DUTY) / DUTY its length;
 * coll: the side stream kept fed with collectives (all-gathers, or reduce-scatters).  GPU 0's NVML window over
 * `seconds` after half a second of warm-up; counts over the window. */
static result phase(node *nd, const gemm_shape *s, int per_burst, int coll, int reduce, double seconds) {
    result r = {0, 0, 0, 0, 0};
    power_window *w = NULL;
    double t0 = host_now_s(), t_end = 1e300;
    while (host_now_s() < t_end) {
        if (!w && host_now_s() - t0 >= 0.5) {
            CK(cudaSetDevice(0));
            w = power_window_begin(POWER_POLL_MS_ALONE);
            r.gemms = r.colls = 0;
            t_end = host_now_s() + seconds;
        }
        if (coll) r.colls += feed(nd, reduce);
        if (per_burst > 0) {
            double b0 = host_now_s();
            for (int i = 0; i < per_burst; i++) gemm(nd, s);
            r.gemms += per_burst;
            sync_streams(nd, nd->compute);
            double until = host_now_s() + (host_now_s() - b0) * (1.0 - DUTY) / DUTY;
            while (host_now_s() < until) {
                if (coll) r.colls += feed(nd, reduce);
                usleep(50);
            }
        } else {
            usleep(coll ? 50 : 20000);
        }
    }
    sync_streams(nd, nd->side);
    double celsius = 0;
    int updates = 0;
    if (!w || power_window_end(w, &r.watts, &r.mhz, &celsius, &r.seconds, &updates) != 0) {
        fprintf(stderr, "overlap_power: NVML gave no power\n");
        exit(2);
    }
    return r;
}

int main(int argc, char **argv) {
    double seconds = argc > 1 ? atof(argv[1]) : 3.0;
    node nd;
    CK(cudaGetDeviceCount(&nd.n));
    if (nd.n < 2) {
        printf("overlap_power: %d GPU(s); needs 2 or more, nothing measured\n", nd.n);
        return 0;
    }
    nd.n = 2;
    int devs[2] = {0, 1};
    nd.comm.resize(2); nd.compute.resize(2); nd.side.resize(2); nd.blas.resize(2);
    nd.a.resize(2); nd.b.resize(2); nd.c.resize(2); nd.send.resize(2); nd.recv.resize(2);
    NC(ncclCommInitAll(nd.comm.data(), 2, devs));
    size_t most_w = 0, most_x = 0, most_y = 0;   /* the largest weight, input and output of the shapes */
    for (const gemm_shape &s : SHAPES) {
        most_w = std::max(most_w, (size_t)s.n * s.k);
        most_x = std::max(most_x, (size_t)s.k * s.m);
        most_y = std::max(most_y, (size_t)s.n * s.m);
    }
    for (int g = 0; g < 2; g++) {
        CK(cudaSetDevice(g));
        CK(cudaStreamCreateWithFlags(&nd.compute[g], cudaStreamNonBlocking));
        CK(cudaStreamCreateWithFlags(&nd.side[g], cudaStreamNonBlocking));
        CB(cublasCreate(&nd.blas[g]));
        CB(cublasSetStream(nd.blas[g], nd.compute[g]));
        nd.a[g] = random_bf16(most_w, 0.02);
        nd.b[g] = random_bf16(most_x, 1.0);
        nd.c[g] = dmalloc(most_y * 2);
        nd.send[g] = random_bf16(COLL_BYTES / 2, 1.0);
        nd.recv[g] = dmalloc(COLL_BYTES);
    }
    CK(cudaSetDevice(0));
    char why[256];
    if (power_open(why, sizeof why) != 0) {
        fprintf(stderr, "overlap_power: NVML: %s\n", why);
        return 2;
    }
    cudaDeviceProp prop;
    CK(cudaGetDeviceProperties(&prop, 0));
    printf("2 x %s, power limit %.0f W, top SM clock %.0f MHz; GEMM bursts of %.0f ms at %.0f%% duty, collectives of "
           "%zu MiB\n", prop.name, power_limit_w(), power_max_sm_mhz(), 1e3 * BURST_S, 100 * DUTY, COLL_BYTES >> 20);
    printf("phase,gemm,collective,watts,sm_mhz,seconds,gemms,collectives\n");
    result idle = phase(&nd, &SHAPES[0], 0, 0, 0, seconds);
    printf("idle,-,-,%.1f,%.0f,%.2f,0,0\n", idle.watts, idle.mhz, idle.seconds);
    for (const gemm_shape &s : SHAPES) {
        /* a burst of about BURST_S: time one GEMM first */
        CK(cudaSetDevice(0));
        for (int i = 0; i < 20; i++) gemm(&nd, &s);
        sync_streams(&nd, nd.compute);
        double t = host_now_s();
        for (int i = 0; i < 50; i++) gemm(&nd, &s);
        sync_streams(&nd, nd.compute);
        int per_burst = std::max(1, (int)(BURST_S / ((host_now_s() - t) / 50)));
        result g = phase(&nd, &s, per_burst, 0, 0, seconds);
        printf("gemm,%s,-,%.1f,%.0f,%.2f,%ld,0\n", s.name, g.watts, g.mhz, g.seconds, g.gemms);
        for (int reduce = 0; reduce <= 1; reduce++) {
            const char *cn = reduce ? "reducescatter_256M" : "allgather_256M";
            result c = phase(&nd, &s, 0, 1, reduce, seconds);
            printf("coll,-,%s,%.1f,%.0f,%.2f,0,%ld\n", cn, c.watts, c.mhz, c.seconds, c.colls);
            result b = phase(&nd, &s, per_burst, 1, reduce, seconds);
            printf("both,%s,%s,%.1f,%.0f,%.2f,%ld,%ld\n", s.name, cn, b.watts, b.mhz, b.seconds, b.gemms, b.colls);
            /* additive: idle, plus each GEMM's energy above idle and each collective's, at the pair's counts */
            double e_gemm = (g.watts - idle.watts) * g.seconds / (double)g.gemms;
            double e_coll = (c.watts - idle.watts) * c.seconds / (double)c.colls;
            double predicted = idle.watts + (e_gemm * (double)b.gemms + e_coll * (double)b.colls) / b.seconds;
            printf("# pair %s %s: predicted %.1f W, measured %.1f W (%+.1f W); GEMMs %ld (alone %ld), collectives %ld "
                   "(alone %ld); clocks %.0f / %.0f / %.0f MHz (gemm, coll, both)\n", s.name, cn, predicted, b.watts,
                   b.watts - predicted, b.gemms, g.gemms, b.colls, c.colls, g.mhz, c.mhz, b.mhz);
            fflush(stdout);
        }
    }
    power_close();
    for (int g = 0; g < 2; g++) ncclCommDestroy(nd.comm[g]);
    return 0;
}
