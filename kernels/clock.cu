/* The SM clock as the kernels see it.  Under the power cap the clock follows
 * the recent power draw over milliseconds, so the same kernel runs at
 * different speeds alone (calibrate) and among GEMMs (a training step); this
 * probe, launched right after a kernel, reads the clock that kernel left.
 * One thread counts SM cycles (clock64) against the global nanosecond timer;
 * the timer's granularity (up to 1 us on some parts) is why the window is
 * tens of microseconds, not a few. */
#include "common.cuh"

__global__ void sm_clock_probe_kernel(float *mhz, long long cycles) {
    unsigned long long ns0, ns1;
    asm volatile("mov.u64 %0, %%globaltimer;" : "=l"(ns0));
    const long long c0 = clock64();
    long long c = c0;
    while (c - c0 < cycles) c = clock64();
    asm volatile("mov.u64 %0, %%globaltimer;" : "=l"(ns1));
    *mhz = ns1 > ns0 ? (float)((double)(c - c0) / (double)(ns1 - ns0) * 1e3) : 0.0f;
}

/* The maximum clock per device, asked once: cudaDevAttrClockRate took about half a millisecond
 * per query on an H100 (CUDA 13.0), which left the GPU idle before every probe of a profiling
 * step and made that step 23-128% longer (docs/validation/archive/2026-11-23-h100-clock). */
#define SX_PROBE_DEVICES 64
static int g_probe_khz[SX_PROBE_DEVICES];

extern "C" cudaError_t sx_sm_clock_probe(float *mhz, int window_us, cudaStream_t stream) {
    SX_REQUIRE(mhz != NULL && window_us > 0 && window_us <= 100000);
    int dev = 0, khz = 0;
    SX_CHECK(cudaGetDevice(&dev));
    if (dev >= 0 && dev < SX_PROBE_DEVICES && g_probe_khz[dev] > 0) {
        khz = g_probe_khz[dev];
    } else {
        SX_CHECK(cudaDeviceGetAttribute(&khz, cudaDevAttrClockRate, dev));
        if (dev >= 0 && dev < SX_PROBE_DEVICES) g_probe_khz[dev] = khz;
    }
    /* cycles for window_us at the maximum clock: longer at a lower one */
    const long long cycles = (long long)khz * window_us / 1000;
    sm_clock_probe_kernel<<<1, 1, 0, stream>>>(mhz, cycles > 0 ? cycles : 1);
    SX_LAUNCHED();
}
