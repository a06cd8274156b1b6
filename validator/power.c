/* NVML through dlopen: the handful of calls sextant needs, declared from
 * NVML's documented C ABI (nvmlReturn_t is an int, a device handle a
 * pointer, 0 is NVML_SUCCESS, NVML_CLOCK_SM is 1, NVML_TEMPERATURE_GPU 0). */
#include <dlfcn.h>
#include <pthread.h>
#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>
#include <time.h>

#include <cuda_runtime.h>

#include "power.h"

typedef void *nvml_device;
enum { NVML_OK = 0, NVML_CLOCK_SM = 1, NVML_TEMPERATURE_GPU = 0 };

static void *nvml_lib;
static nvml_device device;
static int (*nvml_shutdown)(void);
static int (*nvml_energy)(nvml_device, unsigned long long *mj);
static int (*nvml_limit)(nvml_device, unsigned int *mw);
static int (*nvml_max_clock)(nvml_device, int type, unsigned int *mhz);
static int (*nvml_clock)(nvml_device, int type, unsigned int *mhz);
static int (*nvml_temperature)(nvml_device, int sensor, unsigned int *celsius);
static int (*nvml_set_cpu_affinity)(nvml_device);

int power_open(char *why, size_t why_len)
{
    if (nvml_lib) return 0;
    void *lib = dlopen("libnvidia-ml.so.1", RTLD_NOW | RTLD_LOCAL);
    if (!lib) {
        snprintf(why, why_len, "libnvidia-ml.so.1 not found (%s)", dlerror());
        return -1;
    }
    int (*init)(void) = (int (*)(void))dlsym(lib, "nvmlInit_v2");
    int (*by_bus)(const char *, nvml_device *) = (int (*)(const char *, nvml_device *))dlsym(lib, "nvmlDeviceGetHandleByPciBusId_v2");
    nvml_shutdown = (int (*)(void))dlsym(lib, "nvmlShutdown");
    nvml_energy = (int (*)(nvml_device, unsigned long long *))dlsym(lib, "nvmlDeviceGetTotalEnergyConsumption");
    nvml_limit = (int (*)(nvml_device, unsigned int *))dlsym(lib, "nvmlDeviceGetEnforcedPowerLimit");
    nvml_max_clock = (int (*)(nvml_device, int, unsigned int *))dlsym(lib, "nvmlDeviceGetMaxClockInfo");
    nvml_clock = (int (*)(nvml_device, int, unsigned int *))dlsym(lib, "nvmlDeviceGetClockInfo");
    nvml_temperature = (int (*)(nvml_device, int, unsigned int *))dlsym(lib, "nvmlDeviceGetTemperature");
    nvml_set_cpu_affinity = (int (*)(nvml_device))dlsym(lib, "nvmlDeviceSetCpuAffinity");   /* optional */
    if (!init || !by_bus || !nvml_shutdown || !nvml_energy || !nvml_limit || !nvml_max_clock || !nvml_clock ||
        !nvml_temperature) {
        snprintf(why, why_len, "libnvidia-ml.so.1 lacks a function sextant needs");
        dlclose(lib);
        return -1;
    }
    int rc = init();
    if (rc != NVML_OK) {
        snprintf(why, why_len, "nvmlInit_v2 returned %d", rc);
        dlclose(lib);
        return -1;
    }
    int cuda_device = 0;
    char bus[64];
    if (cudaGetDevice(&cuda_device) != cudaSuccess || cudaDeviceGetPCIBusId(bus, (int)sizeof bus, cuda_device) != cudaSuccess) {
        snprintf(why, why_len, "the CUDA device's PCI bus id is not available");
        nvml_shutdown();
        dlclose(lib);
        return -1;
    }
    rc = by_bus(bus, &device);
    if (rc != NVML_OK) {
        snprintf(why, why_len, "nvmlDeviceGetHandleByPciBusId_v2(%s) returned %d", bus, rc);
        nvml_shutdown();
        dlclose(lib);
        return -1;
    }
    nvml_lib = lib;
    return 0;
}

void power_close(void)
{
    if (!nvml_lib) return;
    nvml_shutdown();
    dlclose(nvml_lib);
    nvml_lib = NULL;
}

double power_energy_j(void)
{
    unsigned long long mj;
    return nvml_lib && nvml_energy(device, &mj) == NVML_OK ? (double)mj * 1e-3 : -1.0;
}

double power_limit_w(void)
{
    unsigned int mw;
    return nvml_lib && nvml_limit(device, &mw) == NVML_OK ? (double)mw * 1e-3 : 0.0;
}

double power_max_sm_mhz(void)
{
    unsigned int mhz;
    return nvml_lib && nvml_max_clock(device, NVML_CLOCK_SM, &mhz) == NVML_OK ? (double)mhz : 0.0;
}

double power_sm_mhz(void)
{
    unsigned int mhz;
    return nvml_lib && nvml_clock(device, NVML_CLOCK_SM, &mhz) == NVML_OK ? (double)mhz : 0.0;
}

int power_bind_cpus(char *why, size_t why_len)
{
    if (power_open(why, why_len) != 0) return -1;
    if (!nvml_set_cpu_affinity) {
        snprintf(why, why_len, "libnvidia-ml.so.1 has no nvmlDeviceSetCpuAffinity");
        return -1;
    }
    int rc = nvml_set_cpu_affinity(device);
    if (rc != NVML_OK) {
        snprintf(why, why_len, "nvmlDeviceSetCpuAffinity returned %d", rc);
        return -1;
    }
    return 0;
}

double power_temperature_c(void)
{
    unsigned int celsius;
    return nvml_lib && nvml_temperature(device, NVML_TEMPERATURE_GPU, &celsius) == NVML_OK ? (double)celsius : 0.0;
}

static double now_s(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (double)ts.tv_sec + 1e-9 * (double)ts.tv_nsec;
}

/* The energy counter moves in steps (about every 100 ms on an H100 with
 * driver 580), so the difference of two readings taken at arbitrary times is
 * off by up to a step: over a second, 10%.  The thread polls it every poll_ms
 * and keeps the first and the last moment it moved; the power is the energy
 * between those two moves over the time between them (each end timed to a
 * poll: at 1 ms, 0.1% of calibrate's 2 s windows; at 10 ms, 0.4% of a 5 s run).
 * The clock is read every fifth poll, the temperature every fiftieth. */
struct power_window {
    pthread_t thread;
    long poll_ms;
    atomic_int stop;
    double mhz_sum, celsius_sum;
    int samples, celsius_samples, energy_updates;
    double last_j, first_move_s, first_move_j, last_move_s, last_move_j;
};

static void *sample_clock(void *arg)
{
    power_window *w = arg;
    const struct timespec period = {w->poll_ms / 1000, (w->poll_ms % 1000) * 1000000L};
    for (int tick = 0; !atomic_load(&w->stop); tick++) {
        double j = power_energy_j(), t = now_s();
        if (j >= 0 && j != w->last_j) {
            if (w->energy_updates++ == 0) {
                w->first_move_s = t;
                w->first_move_j = j;
            }
            w->last_move_s = t;
            w->last_move_j = j;
            w->last_j = j;
        }
        double mhz = tick % 5 == 0 ? power_sm_mhz() : 0.0;
        if (mhz > 0) {
            w->mhz_sum += mhz;
            w->samples++;
        }
        double celsius = tick % 50 == 0 ? power_temperature_c() : 0.0;
        if (celsius > 0) {
            w->celsius_sum += celsius;
            w->celsius_samples++;
        }
        nanosleep(&period, NULL);
    }
    return NULL;
}

power_window *power_window_begin(int poll_ms)
{
    if (!nvml_lib || poll_ms < 1) return NULL;
    power_window *w = calloc(1, sizeof *w);
    if (!w) return NULL;
    w->poll_ms = poll_ms;
    w->last_j = power_energy_j();
    if (w->last_j < 0 || pthread_create(&w->thread, NULL, sample_clock, w) != 0) {
        free(w);
        return NULL;
    }
    return w;
}

int power_window_end(power_window *w, double *watts, double *mhz, double *celsius, double *seconds, int *energy_updates)
{
    if (!w) return -1;
    atomic_store(&w->stop, 1);
    pthread_join(w->thread, NULL);
    /* at least two moves, 100 ms apart */
    int ok = w->energy_updates >= 3 && w->last_move_s - w->first_move_s > 0.1 && w->samples > 0;
    if (ok) {
        *seconds = w->last_move_s - w->first_move_s;
        *watts = (w->last_move_j - w->first_move_j) / *seconds;
        *mhz = w->mhz_sum / w->samples;
        *celsius = w->celsius_samples ? w->celsius_sum / w->celsius_samples : 0.0;
        *energy_updates = w->energy_updates;
    }
    free(w);
    return ok ? 0 : -1;
}
