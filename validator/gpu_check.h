/* The validator's one check of CUDA, cuBLAS(Lt) and NCCL calls: a failure prints one stderr line
 * with the file:line and the call's text, then exits 1.  A process that is a rank of a step names
 * its rank ("sextant-gpu train: rank R: ..."); calibrate and ops, one process without ranks, do not
 * ("sextant-gpu: ...").  The caller includes the library headers it uses.
 *
 *   CK, CB, NC          the training step's: the rank is my_rank (set by train_run)
 *   RANK_CK, _CB, _NC   code that carries its rank in its own state (zero.c, moe.c), so that it
 *                       builds without train.c (tests/test_zero_streams.c)
 *   CUDA_CHECK, CUBLAS_CHECK   calibrate and ops (no rank)
 *
 * Not here, on purpose: comm.c's CK_OR_FAIL and overlap.c's CK_OR_RETURN.  calibrate --comm's
 * ranks do not exit on a failed call: they say what failed and return, so that the launcher
 * collects every rank's status and the run ends with one verdict (launch.c). */
#ifndef SEXTANT_GPU_CHECK_H
#define SEXTANT_GPU_CHECK_H

#include <stdio.h>
#include <stdlib.h>

extern int my_rank;   /* this process's rank in the step, for error lines (train.c) */

#define GPU_NO_RANK (-1)

/* one line, then exit(1); rank GPU_NO_RANK leaves the rank out */
__attribute__((noreturn, unused)) static void gpu_check_failed(int rank, const char *file, int line, const char *call,
                                                                const char *why)
{
    if (rank == GPU_NO_RANK) fprintf(stderr, "sextant-gpu: %s:%d: %s: %s\n", file, line, call, why);
    else fprintf(stderr, "sextant-gpu train: rank %d: %s:%d: %s: %s\n", rank, file, line, call, why);
    exit(1);
}

#define RANK_CK(rank, call)                                                                                      \
    do {                                                                                                         \
        cudaError_t e_ = (call);                                                                                 \
        if (e_ != cudaSuccess) gpu_check_failed((rank), __FILE__, __LINE__, #call, cudaGetErrorString(e_));     \
    } while (0)
#define RANK_CB(rank, call)                                                                                      \
    do {                                                                                                         \
        cublasStatus_t s_ = (call);                                                                              \
        if (s_ != CUBLAS_STATUS_SUCCESS) {                                                                       \
            char why_[40];                                                                                       \
            snprintf(why_, sizeof why_, "cuBLAS(Lt) status %d", (int)s_);                                        \
            gpu_check_failed((rank), __FILE__, __LINE__, #call, why_);                                           \
        }                                                                                                        \
    } while (0)
#define RANK_NC(rank, call)                                                                                      \
    do {                                                                                                         \
        ncclResult_t r_ = (call);                                                                                \
        if (r_ != ncclSuccess) gpu_check_failed((rank), __FILE__, __LINE__, #call, ncclGetErrorString(r_));     \
    } while (0)

#define CK(call) RANK_CK(my_rank, call)
#define CB(call) RANK_CB(my_rank, call)
#define NC(call) RANK_NC(my_rank, call)

#define CUDA_CHECK(call) RANK_CK(GPU_NO_RANK, call)
#define CUBLAS_CHECK(call) RANK_CB(GPU_NO_RANK, call)

#endif
