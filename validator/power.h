/* The GPU's power and clock as NVML reports them, for calibrate's power model
 * and for the step's measured power (docs/model.md, "Clock under the power
 * cap").  NVML comes with the driver, not the toolkit: it is loaded with
 * dlopen, and every function here reports "not available" when it is not. */
#ifndef SEXTANT_POWER_H
#define SEXTANT_POWER_H

#include <stddef.h>

/* Opens NVML on the GPU of the current CUDA device.  0, or -1 (NVML or the
 * device not found: the reason in `why`). */
int power_open(char *why, size_t why_len);
void power_close(void);

/* Binds the calling thread (and the threads it starts after) to the CPUs nearest the current CUDA device, as NVML
 * gives them (nvmlDeviceSetCpuAffinity: the GPU's NUMA node); opens NVML if it is not.  0, or -1 with the reason. */
int power_bind_cpus(char *why, size_t why_len);

/* Energy since the driver loaded, joules; -1 when not available. */
double power_energy_j(void);
/* The enforced power limit, watts; 0 when not available. */
double power_limit_w(void);
/* The SM clock's maximum and present values, MHz; 0 when not available. */
double power_max_sm_mhz(void);
double power_sm_mhz(void);
/* The GPU's temperature, degrees Celsius; 0 when not available. */
double power_temperature_c(void);

/* A window of measurement: a thread polls the energy counter every poll_ms, the SM
 * clock every fifth poll and the temperature every fiftieth, while the caller keeps
 * the GPU busy (POWER_POLL_MS_ALONE where the host only issues work; a training step's
 * host that waits on its GPU takes POWER_POLL_MS_STEP, below);
 * power_window_end gives the average power over the window (energy counter
 * difference / wall time), the mean SM clock and temperature (0 when NVML
 * gives none), the window's seconds and how many distinct energy readings the
 * samples saw (the counter's resolution in time).  -1 when not available. */
typedef struct power_window power_window;
/* Each NVML call holds up the process's own CUDA calls: polled every millisecond, the
 * sampler stretched a step whose host waits on its GPU inside every MoE layer (Mixtral
 * cut to 2 layers at PP 2 on 2 x H200: 358-421 ms a step, 229-236 without it or polled
 * every 10 ms; docs/validation/2026-11-27-h200x2-heldout-moe). */
#define POWER_POLL_MS_ALONE 1
#define POWER_POLL_MS_STEP 10
power_window *power_window_begin(int poll_ms);
int power_window_end(power_window *w, double *watts, double *mhz, double *celsius, double *seconds, int *energy_updates);

#endif
