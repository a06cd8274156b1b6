/* Timing on the GPU shared by the training step and calibrate (gpu_timing.h). */
#include <stdlib.h>
#include <time.h>

#include "gpu_check.h"
#include "gpu_context.h"
#include "gpu_timing.h"
#include "kernels.h"

/* sm_clock_after's device float, allocated on first use and released by sm_clock_free: a
 * cudaMalloc / cudaFree per probe would synchronise the device behind every timed batch */
static float *clock_slot;

double sm_clock_after(cudaStream_t on)
{
    float mhz = 0.0f;
    if (!clock_slot && cudaMalloc((void **)&clock_slot, sizeof mhz) != cudaSuccess) {
        clock_slot = NULL;
        return 0.0;
    }
    if (sx_sm_clock_probe(clock_slot, CLOCK_PROBE_US, on) == cudaSuccess)
        CK(cudaMemcpyAsync(&mhz, clock_slot, sizeof mhz, cudaMemcpyDeviceToHost, on));
    CK(cudaStreamSynchronize(on));
    return mhz;
}

void sm_clock_free(void)
{
    if (clock_slot) CK(cudaFree(clock_slot));
    clock_slot = NULL;
}

float median_batch_ms(float *ms, double *mhz, int n, double *median_mhz)
{
    for (int i = 1; i < n; i++) /* insertion sort of a handful, the clocks beside their times */
        for (int j = i; j > 0 && ms[j] < ms[j - 1]; j--) {
            float t = ms[j]; ms[j] = ms[j - 1]; ms[j - 1] = t;
            double c = mhz[j]; mhz[j] = mhz[j - 1]; mhz[j - 1] = c;
        }
    if (median_mhz) *median_mhz = mhz[n / 2];
    return ms[n / 2];
}

static int cool_batches;
void train_time_cool(int on) { cool_batches = on; }
int train_time_is_cool(void) { return cool_batches; }

void idle_ms(int ms)
{
    const struct timespec t = {ms / 1000, (long)(ms % 1000) * 1000000L};
    nanosleep(&t, NULL);
}

/* Seconds per call of run(ctx, r) issued `reps` times back to back (the CPU
 * ahead of the GPU, as in a step), the median over five such batches.  Warm
 * (train_time_cool(0)): after at least 100 ms of warm-up, long enough for the
 * power cap to pull the clock down to where the work's own power holds it (an
 * H100 at 700 W runs sustained GEMMs at 1600-1800 MHz, short bursts at 1980).
 * Cool: one untimed batch (cuBLASLt picks its algorithm), then each batch after
 * CALIBRATE_COOL_IDLE_MS of idle, at the top clock. */
double time_batches(void (*run)(const void *ctx, int r), const void *ctx, int reps, double *clock_mhz)
{
    enum { BATCHES = 5 };
    const float warm_ms = cool_batches ? 0.0f : 100.0f;
    cudaEvent_t start, stop;
    CK(cudaEventCreate(&start));
    CK(cudaEventCreate(&stop));
    float ms[BATCHES], warmed = 0.0f;
    double mhz[BATCHES];
    for (int b = -1; b < BATCHES; b++) { /* the first warm-up also picks the cuBLASLt algorithm */
        if (b >= 0 && cool_batches) {
            CK(cudaStreamSynchronize(gpu_ctx.stream));
            idle_ms(CALIBRATE_COOL_IDLE_MS);
        }
        CK(cudaEventRecord(start, gpu_ctx.stream));
        for (int r = 0; r < reps; r++) run(ctx, r);
        CK(cudaEventRecord(stop, gpu_ctx.stream));
        /* the clock this batch left: the probe queues right behind it */
        if (b >= 0) mhz[b] = sm_clock_after(gpu_ctx.stream);
        CK(cudaEventSynchronize(stop));
        if (b < 0) {
            float t;
            CK(cudaEventElapsedTime(&t, start, stop));
            warmed += t;
            if (warmed < warm_ms) b--; /* warm again */
        } else {
            CK(cudaEventElapsedTime(&ms[b], start, stop));
        }
    }
    CK(cudaEventDestroy(start));
    CK(cudaEventDestroy(stop));
    return median_batch_ms(ms, mhz, BATCHES, clock_mhz) * 1e-3 / reps;
}

static int compare_float(const void *a, const void *b)
{
    float x = *(const float *)a, y = *(const float *)b;
    return (x > y) - (x < y);
}

void sort_floats(float *v, size_t n) { qsort(v, n, sizeof *v, compare_float); }
