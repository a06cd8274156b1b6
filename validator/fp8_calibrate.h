/* calibrate's FP8 GEMMs (validator/fp8_calibrate.c). */
#ifndef SEXTANT_FP8_CALIBRATE_H
#define SEXTANT_FP8_CALIBRATE_H

#include <stddef.h>

#include "hwdb.h"

/* Times FP8 and bf16 GEMMs at the n shapes (m x k)(k x n) on the random bf16 of `buffers` (two
 * of buffer_bytes; shapes that do not fit are left out), prints a table, and puts the
 * planner's fp8_gemm_relative_efficiency in *relative (fast accumulation, TE's forward) and
 * fp8_backward_gemm_relative_efficiency in *relative_backward (without it, TE's backward).  The buffers are calibrate's
 * scratch: scratch_refresh (bench.h) puts their random values back before each shape.  0, or -1 after one line saying
 * why (no FP8 on this GPU, no large shape). */
int fp8_calibrate(const hw_gpu *g, const hw_gemm_time *shapes, int n, void *const buffers[2], size_t buffer_bytes,
                  double *relative, double *relative_backward);

#endif
