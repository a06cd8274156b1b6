/* Timing on the GPU shared by the training step and calibrate: the SM clock after a batch, the
 * median of batches, cool or warm batches, idling. */
#ifndef SEXTANT_GPU_TIMING_H
#define SEXTANT_GPU_TIMING_H

#include <cuda_runtime_api.h>

/* the clock probe's length: at 50 us an H100's probe read up to 5% above its top clock (the
 * global timer's granularity), docs/validation/archive/2026-11-23-h100-clock */
#define CLOCK_PROBE_US 100

/* The SM clock in MHz right after the work queued so far on `on` (sx_sm_clock_probe over
 * 100 us); waits for the stream.  0 after a failed probe.  calibrate logs it beside every
 * timing: under the power cap the same kernel runs at different clocks alone and in a step. */
double sm_clock_after(cudaStream_t on);
/* Releases sm_clock_after's device memory (it allocates again if called later). */
void sm_clock_free(void);

/* How train_time_linear and train_time_unfused_attention time a batch: cool (1, calibrate's
 * default with a power model) after CALIBRATE_COOL_IDLE_MS of idle, so the GPU runs it at the
 * top clock and the power model sets the step's clock (docs/model.md, "Clock under the power
 * cap"); or warm (0) after 100 ms of the same work, at the clock its own power settles at. */
#define CALIBRATE_COOL_IDLE_MS 50
void train_time_cool(int on);
int train_time_is_cool(void);
/* The host waits `ms` milliseconds (the GPU idles if nothing is queued). */
void idle_ms(int ms);

/* The median of n batch times (ms, sorted in place, the clocks mhz[] kept beside them) and,
 * in *median_mhz when not NULL, the clock measured after that batch. */
float median_batch_ms(float *ms, double *mhz, int n, double *median_mhz);

/* Sorts n floats ascending (event times; the planner's sort_ascending is for doubles). */
void sort_floats(float *v, size_t n);

/* Seconds per call of run(ctx, r) issued `reps` times back to back on gpu_ctx.stream (the CPU
 * ahead of the GPU, as in a step), the median over five such batches; *clock_mhz (may be
 * NULL) the clock after the median batch.  Warm or cool as train_time_cool says. */
double time_batches(void (*run)(const void *ctx, int r), const void *ctx, int reps, double *clock_mhz);

#endif
