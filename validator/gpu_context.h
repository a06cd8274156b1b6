/* A process's GPU context: the streams its work runs on and its cuBLAS and cuBLASLt handles with
 * their workspaces.  `gpu_ctx` is the training step's (validator/train.c and its parts) and, between
 * train_time_linear's begin and end, calibrate's (validator/linear.c); calibrate's and ops' own
 * op timing has another (validator/bench.h).  The NCCL communicators belong to the step's layout
 * (validator/step.h), not here. */
#ifndef SEXTANT_GPU_CONTEXT_H
#define SEXTANT_GPU_CONTEXT_H

/* cublasLt.h declares one function without a prototype */
#pragma GCC diagnostic push
#pragma GCC diagnostic ignored "-Wstrict-prototypes"
#include <cublasLt.h>
#pragma GCC diagnostic pop
#include <cublas_v2.h>
#include <cuda_runtime_api.h>

#define LT_WORKSPACE_BYTES (32u << 20)
#define CUBLAS_WORKSPACE_BYTES (32u << 20)

typedef struct {
    cudaStream_t stream;       /* compute, tensor- and pipeline-parallel communication */
    cudaStream_t comm_stream;  /* the data-parallel reduction, beside the backward */
    cudaStream_t pp_stream;    /* interleaved 1F1B: the pipeline's transfers, beside the compute */
    cudaStream_t prep_stream;  /* the embedding backward's grouping of the ids, beside the forward */
    cublasHandle_t blas;       /* on `stream` */
    cublasLtHandle_t lt;
    void *lt_workspace;        /* LT_WORKSPACE_BYTES */
    void *blas_workspace;      /* bench's cuBLAS workspace (BENCH_WORKSPACE_BYTES); the step keeps its own */
} gpu_context;

extern gpu_context gpu_ctx;

/* A non-blocking stream, at the device's highest priority where the environment variable `switch_name` is 1 (an
 * experiment's switch: SEXTANT_CP_STREAM_PRIORITY, SEXTANT_COMM_STREAM_PRIORITY), else at the default. */
cudaError_t stream_create_switched(cudaStream_t *stream, const char *switch_name);

#endif
