/* calibrate's power model (validator/calibrate_power.c; docs/model.md, "Clock under the power
 * cap"): what calibrate writes into the overlay's power keys. */
#ifndef SEXTANT_CALIBRATE_POWER_H
#define SEXTANT_CALIBRATE_POWER_H

#include <stddef.h>

typedef struct {
    int ok;
    double cap_w, top_mhz;
    /* static power: cold_w at cold_c (the GPU idle but for one thread), rising by w_per_c
     * per degree as leakage does; static_w at capped_c, the temperature the GPU holds at its cap */
    double cold_w, cold_c, w_per_c, capped_c, static_w;
    double e_gemm, e_attention, e_byte; /* J per FLOP, per byte at the top clock */
    double exponent, rms_w;
} power_model;

/* Measures and fits the model on bench's scratch buffers (copy_bytes: the device copy's size);
 * pm->ok = 0 with the reason on stdout when NVML or the fit fails. */
void calibrate_power(size_t copy_bytes, power_model *pm);

#endif
