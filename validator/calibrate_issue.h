/* The host's cost of issuing one expert GEMM (validator/calibrate_issue.c): what a MoE layer's forward pays per
 * local expert once the routing counts have reached the host and the GPU's queue is empty (docs/model.md,
 * "Mixture of experts", the host's issue after the routing sync). */
#ifndef SEXTANT_CALIBRATE_ISSUE_H
#define SEXTANT_CALIBRATE_ISSUE_H

/* Seconds of host time per cuBLASLt GEMM issued as a grouped linear issues an expert's: the three matrix
 * layouts reshaped to the call's rows, the algorithm kept for the rows' bucket, the streams taken in turn;
 * the median of five batches of 256 calls, each batch issued without a wait.  Exits after one stderr line on
 * a CUDA or cuBLAS error (gpu_check.h). */
double calibrate_gemm_issue_s(void);

#endif
