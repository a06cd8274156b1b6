/* The training step's checks of CUDA, cuBLAS(Lt) and NCCL calls (validator/train.c and the
 * files of its parts, validator/fp8.c): a failure prints one stderr line with the rank, the
 * file:line and the call, and exits 1.  The caller includes the library headers it uses. */
#ifndef SEXTANT_TRAIN_CHECK_H
#define SEXTANT_TRAIN_CHECK_H

#include <stdio.h>
#include <stdlib.h>

extern int my_rank;   /* for error lines: this process's rank (train.c) */

#define CK(call)                                                                                                 \
    do {                                                                                                         \
        cudaError_t e_ = (call);                                                                                 \
        if (e_ != cudaSuccess) {                                                                                 \
            fprintf(stderr, "sextant-gpu train: rank %d: %s:%d: %s: %s\n", my_rank, __FILE__, __LINE__, #call,    \
                    cudaGetErrorString(e_));                                                                     \
            exit(1);                                                                                             \
        }                                                                                                        \
    } while (0)
#define CB(call)                                                                                                 \
    do {                                                                                                         \
        cublasStatus_t s_ = (call);                                                                              \
        if (s_ != CUBLAS_STATUS_SUCCESS) {                                                                       \
            fprintf(stderr, "sextant-gpu train: rank %d: %s:%d: %s: cuBLAS(Lt) status %d\n", my_rank, __FILE__, __LINE__, \
                    #call, (int)s_);                                                                             \
            exit(1);                                                                                             \
        }                                                                                                        \
    } while (0)
#define NC(call)                                                                                                 \
    do {                                                                                                         \
        ncclResult_t r_ = (call);                                                                                \
        if (r_ != ncclSuccess) {                                                                                 \
            fprintf(stderr, "sextant-gpu train: rank %d: %s:%d: %s: %s\n", my_rank, __FILE__, __LINE__, #call,    \
                    ncclGetErrorString(r_));                                                                     \
            exit(1);                                                                                             \
        }                                                                                                        \
    } while (0)

#endif
