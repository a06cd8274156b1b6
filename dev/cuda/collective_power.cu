/* What a GPU draws while NCCL collectives run, against idle, a GEMM and a copy: the question
 * behind the power model charging a collective's seconds only the static power (docs/model.md,
 * "Clock under the power cap").  A collective is kernels that copy and reduce through HBM and
 * drive NVLink; if they draw well above the static power, an exposed collective leaves the
 * compute less of the cap than the model gives it.
 *
 * One process drives every GPU of the node (ncclCommInitAll); NVML reads GPU 0's energy counter
 * over each phase of about PHASE_S seconds (validator/power.c: the counter's difference over the
 * wall time), with the mean SM clock and temperature.  Every GPU runs the same loop.
 *
 * Phases: idle (nothing queued); GEMM (bf16 8192^3, cuBLAS, fp32 sums) on each GPU; copy (a 256 MiB
 * device-to-device copy on each GPU); then each collective at each size on all GPUs: all-gather
 * and reduce-scatter (the size is the whole buffer), all-reduce, and a send/recv exchange with
 * the next GPU (each sends and receives the size).
 *
 * Check: before timing, each collective's result against the values every rank put in (one
 * element pattern per rank), exactly.  Output: one CSV line per phase,
 *   phase,bytes,watts,sm_mhz,celsius,seconds,calls,gb_per_s
 * gb_per_s: the collective's bus bandwidth as nccl-tests defines it (its bytes x its factor / time).
 *
 * build/dev/collective_power [seconds per phase]   (default 4) */
#include <cublas_v2.h>
#include <nccl.h>
#include <string.h>
#include <unistd.h>
#include <vector>
#include "gpu_util.h"
extern "C" {
#include "power.h"
}

static const size_t MAX_BYTES = 256u << 20;

typedef struct {
    int n;
    std::vector<ncclComm_t> comm;
    std::vector<cudaStream_t> stream;
    std::vector<void *> send, recv;
    std::vector<cublasHandle_t> blas;
} node;

enum kind { IDLE, GEMM, COPY, ALLGATHER, REDUCESCATTER, ALLREDUCE, SENDRECV };
static const char *kind_name[] = {"idle", "gemm_8192", "copy", "allgather", "reducescatter", "allreduce", "sendrecv"};

/* one call of `k` on every GPU; `bytes` the collective's whole buffer (bf16 elements) */
static void issue(node *nd, kind k, size_t bytes) {
    const size_t count = bytes / 2, slice = count / (size_t)nd->n;
    if (k == GEMM) {
        const float one = 1.0f, zero = 0.0f;
        for (int g = 0; g < nd->n; g++) {
            CK(cudaSetDevice(g));
            CB(cublasGemmEx(nd->blas[g], CUBLAS_OP_N, CUBLAS_OP_N, 8192, 8192, 8192, &one, nd->send[g], CUDA_R_16BF, 8192,
                            nd->send[g], CUDA_R_16BF, 8192, &zero, nd->recv[g], CUDA_R_16BF, 8192, CUBLAS_COMPUTE_32F,
                            CUBLAS_GEMM_DEFAULT));
        }
        return;
    }
    if (k == COPY) {
        for (int g = 0; g < nd->n; g++) {
            CK(cudaSetDevice(g));
            CK(cudaMemcpyAsync(nd->recv[g], nd->send[g], bytes, cudaMemcpyDeviceToDevice, nd->stream[g]));
        }
        return;
    }
    NC(ncclGroupStart());
    for (int g = 0; g < nd->n; g++) {
        if (k == ALLGATHER) NC(ncclAllGather(nd->send[g], nd->recv[g], slice, ncclBfloat16, nd->comm[g], nd->stream[g]));
        if (k == REDUCESCATTER)
            NC(ncclReduceScatter(nd->send[g], nd->recv[g], slice, ncclBfloat16, ncclSum, nd->comm[g], nd->stream[g]));
        if (k == ALLREDUCE) NC(ncclAllReduce(nd->send[g], nd->recv[g], count, ncclBfloat16, ncclSum, nd->comm[g], nd->stream[g]));
        if (k == SENDRECV) {
            NC(ncclSend(nd->send[g], count, ncclBfloat16, (g + 1) % nd->n, nd->comm[g], nd->stream[g]));
            NC(ncclRecv(nd->recv[g], count, ncclBfloat16, (g + nd->n - 1) % nd->n, nd->comm[g], nd->stream[g]));
        }
    }
    NC(ncclGroupEnd());
}

static void sync_all(node *nd) {
    for (int g = 0; g < nd->n; g++) {
        CK(cudaSetDevice(g));
        CK(cudaDeviceSynchronize());
    }
}

/* nccl-tests' bus bandwidth factor of each collective over n ranks */
static double bus_factor(kind k, int n) {
    if (k == ALLREDUCE) return 2.0 * (n - 1) / n;
    if (k == ALLGATHER || k == REDUCESCATTER) return (double)(n - 1) / n;
    return 1.0;
}

static void phase(node *nd, kind k, size_t bytes, double seconds) {
    /* warm up half a second so the clock settles, then measure */
    double t0 = host_now_s();
    while (k != IDLE && host_now_s() - t0 < 0.5) {
        for (int i = 0; i < 4; i++) issue(nd, k, bytes);
        sync_all(nd);
    }
    CK(cudaSetDevice(0));
    power_window *w = power_window_begin(POWER_POLL_MS_ALONE);
    long calls = 0;
    t0 = host_now_s();
    double busy = 0.0;
    while (host_now_s() - t0 < seconds) {
        if (k == IDLE) {
            usleep(50000);
            continue;
        }
        double b0 = host_now_s();
        for (int i = 0; i < 8; i++, calls++) issue(nd, k, bytes);
        sync_all(nd);
        busy += host_now_s() - b0;
    }
    double watts = 0, mhz = 0, celsius = 0, secs = 0;
    int updates = 0;
    if (!w || power_window_end(w, &watts, &mhz, &celsius, &secs, &updates) != 0) {
        fprintf(stderr, "collective_power: NVML gave no power for phase %s\n", kind_name[k]);
        exit(2);
    }
    double gbs = k >= ALLGATHER && busy > 0 ? (double)bytes * bus_factor(k, nd->n) * calls / busy / 1e9 : 0.0;
    printf("%s,%zu,%.1f,%.0f,%.0f,%.2f,%ld,%.1f\n", kind_name[k], k == IDLE || k == GEMM ? (size_t)0 : bytes, watts, mhz,
           celsius, secs, calls, gbs);
    fflush(stdout);
}

/* each collective once, against what every rank put in: rank g's buffer holds g + 1 everywhere */
static int check(node *nd) {
    const size_t count = (4u << 20) / 2, slice = count / (size_t)nd->n;
    int bad = 0;
    for (int k = ALLGATHER; k <= SENDRECV; k++) {
        for (int g = 0; g < nd->n; g++) {
            std::vector<uint16_t> v(count);
            float f = (float)(g + 1);
            uint32_t bits;
            memcpy(&bits, &f, 4);
            for (auto &x : v) x = (uint16_t)(bits >> 16);
            CK(cudaSetDevice(g));
            CK(cudaMemcpy(nd->send[g], v.data(), count * 2, cudaMemcpyHostToDevice));
        }
        issue(nd, (kind)k, count * 2);
        sync_all(nd);
        for (int g = 0; g < nd->n; g++) {
            size_t n = k == REDUCESCATTER ? slice : count;
            std::vector<uint16_t> v(n);
            CK(cudaSetDevice(g));
            CK(cudaMemcpy(v.data(), nd->recv[g], n * 2, cudaMemcpyDeviceToHost));
            for (size_t i = 0; i < n; i++) {
                uint32_t bits = (uint32_t)v[i] << 16;
                float got;
                memcpy(&got, &bits, 4);
                float want = k == ALLGATHER ? (float)(i / slice + 1)
                             : k == SENDRECV ? (float)((g + nd->n - 1) % nd->n + 1)
                                             : (float)(nd->n * (nd->n + 1) / 2);
                if (got != want) {
                    if (bad++ < 5) fprintf(stderr, "check %s rank %d element %zu: %g, want %g\n", kind_name[k], g, i, got, want);
                    break;
                }
            }
        }
        printf("  check %-14s %s\n", kind_name[k], bad ? "FAIL" : "PASS");
    }
    return bad;
}

int main(int argc, char **argv) {
    double seconds = argc > 1 ? atof(argv[1]) : 4.0;
    node nd;
    CK(cudaGetDeviceCount(&nd.n));
    if (nd.n < 2) {
        printf("collective_power: %d GPU(s); needs 2 or more, nothing measured\n", nd.n);
        return 0;
    }
    std::vector<int> devs(nd.n);
    for (int g = 0; g < nd.n; g++) devs[g] = g;
    nd.comm.resize(nd.n);
    nd.stream.resize(nd.n);
    nd.send.resize(nd.n);
    nd.recv.resize(nd.n);
    nd.blas.resize(nd.n);
    NC(ncclCommInitAll(nd.comm.data(), nd.n, devs.data()));
    for (int g = 0; g < nd.n; g++) {
        CK(cudaSetDevice(g));
        CK(cudaStreamCreateWithFlags(&nd.stream[g], cudaStreamNonBlocking));
        nd.send[g] = dmalloc(MAX_BYTES);
        nd.recv[g] = dmalloc(MAX_BYTES);
        CK(cudaMemset(nd.send[g], 0x3c, MAX_BYTES));
        CB(cublasCreate(&nd.blas[g]));
        CB(cublasSetStream(nd.blas[g], nd.stream[g]));
    }
    CK(cudaSetDevice(0));
    char why[256];
    if (power_open(why, sizeof why) != 0) {
        fprintf(stderr, "collective_power: NVML: %s\n", why);
        return 2;
    }
    cudaDeviceProp prop;
    CK(cudaGetDeviceProperties(&prop, 0));
    int version = 0;
    NC(ncclGetVersion(&version));
    printf("%d x %s, NCCL %d, power limit %.0f W, top SM clock %.0f MHz\n", nd.n, prop.name, version, power_limit_w(),
           power_max_sm_mhz());
    int bad = check(&nd);
    CK(cudaMemset(nd.send[0], 0x3c, MAX_BYTES));
    printf("phase,bytes,watts,sm_mhz,celsius,seconds,calls,gb_per_s\n");
    phase(&nd, IDLE, 0, seconds);
    phase(&nd, GEMM, 0, seconds);
    phase(&nd, COPY, MAX_BYTES, seconds);
    const size_t sizes[] = {4u << 20, 64u << 20, 256u << 20};
    for (int k = ALLGATHER; k <= SENDRECV; k++)
        for (size_t s : sizes) phase(&nd, (kind)k, s, seconds);
    phase(&nd, IDLE, 0, seconds);
    power_close();
    for (int g = 0; g < nd.n; g++) ncclCommDestroy(nd.comm[g]);
    return bad ? 1 : 0;
}
