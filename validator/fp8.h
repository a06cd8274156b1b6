/* FP8 GEMMs for the training step (validator/fp8.c): cuBLASLt on E4M3 weights and activations
 * and E5M2 gradients, each cast from bf16 with its own per-tensor scale from the tensor's amax
 * (kernels/fp8.cu), bf16 output with fp32 accumulation.  Master weights, attention, norms, the
 * loss and the vocabulary projection stay in bf16 and fp32 (train.c). */
#ifndef SEXTANT_FP8_H
#define SEXTANT_FP8_H

#include <stddef.h>

#pragma GCC diagnostic push
#pragma GCC diagnostic ignored "-Wstrict-prototypes"
#include <cublasLt.h>
#pragma GCC diagnostic pop
#include <cuda_runtime_api.h>

#include "kernels.h"

/* 0 when the current device has FP8 tensor cores for cuBLASLt (compute capability 8.9 or
 * later); else -1 and one sentence in why. */
int fp8_supported(char *why, size_t len);

/* Binds the GEMMs to a cuBLASLt handle and its workspace (both the caller's). */
void fp8_init(cublasLtHandle_t lt, void *workspace, size_t workspace_bytes);
/* Releases the plans, the FP8 operand buffers and the scale slots. */
void fp8_free(void);
/* Device bytes the FP8 operand buffers and the weight cache hold now (the buffers grow to the
 * largest GEMM's; the cache holds 2 bytes per weight). */
size_t fp8_buffer_bytes(void);
/* Training's weights stay at their addresses between steps (not ZeRO-3's gather buffers): 1 casts
 * each weight once per step into both layouts and keeps them, as Transformer Engine does; 0 (the
 * default) casts it for every GEMM. */
void fp8_weight_cache(int on);
/* A new step: the weights changed, every cached cast is stale. */
void fp8_step_begin(void);

/* y[N, out] = x[N, in] W^T (=), bias added in the epilogue when cuBLASLt has one: returns 1
 * when it was, 0 when the caller adds it (or there is none). */
int fp8_linear_forward(sx_bf16 *y, const sx_bf16 *x, const sx_bf16 *w, const sx_bf16 *bias, int N, int in, int out,
                       cudaStream_t stream);
/* dx[N, in] = dy[N, out] W (=) */
void fp8_linear_dgrad(sx_bf16 *dx, const sx_bf16 *dy, const sx_bf16 *w, int N, int in, int out, cudaStream_t stream);
/* dW[out, in] += dy^T x (the bias gradient is the caller's) */
void fp8_linear_wgrad(sx_bf16 *dw, const sx_bf16 *dy, const sx_bf16 *x, int N, int in, int out, cudaStream_t stream);

/* calibrate: one GEMM D[M, N] = X[M, K] W[N, K]^T with bf16 output, timed back to back on the
 * random bf16 in `buffers` (two of buffer_bytes): in FP8 (E4M3 operands cast beforehand, not
 * timed) with fast accumulation, as Transformer Engine runs the forward, in *fp8_s; in FP8 without
 * it, as TE runs the backward's two GEMMs, in *fp8_exact_s; in bf16 through the same cuBLASLt
 * path in *bf16_s; seconds per call, each the median of 5 batches.  0, or -1 when the operands do
 * not fit or cuBLASLt has no algorithm. */
int fp8_time_gemm(int M, int N, int K, void *const buffers[2], size_t buffer_bytes, cudaStream_t stream, double *fp8_s,
                  double *fp8_exact_s, double *bf16_s);

/* check-fp8: the three GEMMs of a linear layer in FP8 against float64 on the host, for shapes
 * with and without bias; prints one line each; 0 when all are within their tolerance. */
int fp8_check(void);

#endif
