/* The optimizer step's bandwidth (validator/calibrate_optimizer.c): AdamW streams four arrays in and writes four
 * back (the fp32 master, m and v, the 16-bit gradient in, the 16-bit weights out), which the GPU serves at a
 * different fraction of its HBM than the one-in, one-out device copy every other memory-bound op is priced at
 * (docs/model.md, "The optimizer's bandwidth"). */
#ifndef SEXTANT_CALIBRATE_OPTIMIZER_H
#define SEXTANT_CALIBRATE_OPTIMIZER_H

#define OPTIMIZER_SIZES 4

typedef struct {
    int n;                                /* sizes timed (those whose buffers fit) */
    double params[OPTIMIZER_SIZES];       /* parameters of each */
    double adamw_s[OPTIMIZER_SIZES];      /* sx_adamw over them (bf16 gradients and weights), median */
    double copy_s[OPTIMIZER_SIZES];       /* a device copy of the master weights (4 bytes a parameter each way) */
} optimizer_timing;

/* AdamW's bytes per parameter as the step runs it: fp32 master, m, v read and written (24), the bf16 gradient
 * read (2), the bf16 weight written (2); the planner's optimizer op moves the same (planner/oplist.c). */
#define OPTIMIZER_BYTES_PER_PARAM 28.0

/* Times sx_adamw on the bench stream at 64M, 256M, 1G and 2G parameters, as many as fit in free memory with a
 * quarter of it left, each with a device copy of its master weights; buffers of their own, freed after.  Exits
 * after one stderr line on a CUDA error (gpu_check.h). */
void calibrate_optimizer(optimizer_timing *out);

/* The AdamW's achieved bandwidth at the largest size timed over `hbm_bytes_per_s`: the overlay's
 * optimizer_membound_efficiency; 0 when nothing was timed. */
double optimizer_efficiency(const optimizer_timing *t, double hbm_bytes_per_s);

#endif
