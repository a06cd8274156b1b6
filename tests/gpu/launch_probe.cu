/* Where the "launch overhead" of `sextant-gpu calibrate` comes from: back-to-back launches of
 * an empty kernel, timed three ways in one process.
 *   stream: N launches on a stream, events around them (calibrate's method): per-kernel time
 *           on the GPU when the CPU keeps ahead, else the CPU's issue rate;
 *   cpu:    the wall time of the N launch calls alone (the CPU's cost per launch);
 *   graph:  the same N kernels captured in a CUDA graph and replayed (no CPU in the loop):
 *           the GPU's own time per back-to-back kernel.
 * Median of 7 batches of each.  launch_probe [N] */
#include <stdio.h>
#include <stdlib.h>
#include <time.h>
#include <algorithm>
#include <cuda_runtime.h>

#define CK(call) do { cudaError_t e_ = (call); if (e_ != cudaSuccess) { \
    fprintf(stderr, "%s:%d: %s: %s\n", __FILE__, __LINE__, #call, cudaGetErrorString(e_)); exit(2); } } while (0)

__global__ void empty_kernel(int *p) { if (p && threadIdx.x == 1024) *p = 0; }

static double now_s(void) {
    struct timespec t;
    clock_gettime(CLOCK_MONOTONIC, &t);
    return t.tv_sec + 1e-9 * t.tv_nsec;
}

int main(int argc, char **argv) {
    const int N = argc > 1 ? atoi(argv[1]) : 2000;
    enum { BATCHES = 7 };
    if (N < 1) { fprintf(stderr, "launch_probe: N must be positive\n"); return 2; }
    cudaStream_t s;
    CK(cudaStreamCreateWithFlags(&s, cudaStreamNonBlocking));
    cudaEvent_t a, b;
    CK(cudaEventCreate(&a));
    CK(cudaEventCreate(&b));
    double stream_us[BATCHES], cpu_us[BATCHES], graph_us[BATCHES];
    for (int w = 0; w < 3; w++) empty_kernel<<<1, 32, 0, s>>>(NULL);
    CK(cudaStreamSynchronize(s));
    for (int r = 0; r < BATCHES; r++) {
        CK(cudaEventRecord(a, s));
        const double t0 = now_s();
        for (int i = 0; i < N; i++) empty_kernel<<<1, 32, 0, s>>>(NULL);
        const double t1 = now_s();
        CK(cudaEventRecord(b, s));
        CK(cudaEventSynchronize(b));
        float ms;
        CK(cudaEventElapsedTime(&ms, a, b));
        stream_us[r] = 1e3 * ms / N;
        cpu_us[r] = 1e6 * (t1 - t0) / N;
    }
    cudaGraph_t g;
    cudaGraphExec_t ge;
    CK(cudaStreamBeginCapture(s, cudaStreamCaptureModeGlobal));
    for (int i = 0; i < N; i++) empty_kernel<<<1, 32, 0, s>>>(NULL);
    CK(cudaStreamEndCapture(s, &g));
    CK(cudaGraphInstantiate(&ge, g, 0));
    CK(cudaGraphLaunch(ge, s));
    CK(cudaStreamSynchronize(s));
    for (int r = 0; r < BATCHES; r++) {
        CK(cudaEventRecord(a, s));
        CK(cudaGraphLaunch(ge, s));
        CK(cudaEventRecord(b, s));
        CK(cudaEventSynchronize(b));
        float ms;
        CK(cudaEventElapsedTime(&ms, a, b));
        graph_us[r] = 1e3 * ms / N;
    }
    std::sort(stream_us, stream_us + BATCHES);
    std::sort(cpu_us, cpu_us + BATCHES);
    std::sort(graph_us, graph_us + BATCHES);
    printf("launch_probe N=%d, median (min-max) of %d batches, us per kernel:\n", N, BATCHES);
    printf("  stream (calibrate's figure) %6.2f (%.2f-%.2f)\n", stream_us[BATCHES / 2], stream_us[0], stream_us[BATCHES - 1]);
    printf("  cpu    (launch calls alone) %6.2f (%.2f-%.2f)\n", cpu_us[BATCHES / 2], cpu_us[0], cpu_us[BATCHES - 1]);
    printf("  graph  (GPU alone)          %6.2f (%.2f-%.2f)\n", graph_us[BATCHES / 2], graph_us[0], graph_us[BATCHES - 1]);
    CK(cudaGraphExecDestroy(ge));
    CK(cudaGraphDestroy(g));
    CK(cudaEventDestroy(a));
    CK(cudaEventDestroy(b));
    CK(cudaStreamDestroy(s));
    return 0;
}
