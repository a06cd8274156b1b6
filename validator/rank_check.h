/* The training step's check of a CUDA or NCCL call for code outside validator/train.c that
 * knows its rank: one line naming the rank, file, line and call, then exit(1).  The same
 * lines as train.c's CK and NC and zero.c's ZCK and ZNC. */
#ifndef SEXTANT_RANK_CHECK_H
#define SEXTANT_RANK_CHECK_H

#include <stdio.h>
#include <stdlib.h>

#define RANK_CK(rank, call)                                                                                      \
    do {                                                                                                         \
        cudaError_t e_ = (call);                                                                                 \
        if (e_ != cudaSuccess) {                                                                                 \
            fprintf(stderr, "sextant-gpu train: rank %d: %s:%d: %s: %s\n", (rank), __FILE__, __LINE__, #call,    \
                    cudaGetErrorString(e_));                                                                     \
            exit(1);                                                                                             \
        }                                                                                                        \
    } while (0)
#define RANK_NC(rank, call)                                                                                      \
    do {                                                                                                         \
        ncclResult_t r_ = (call);                                                                                \
        if (r_ != ncclSuccess) {                                                                                 \
            fprintf(stderr, "sextant-gpu train: rank %d: %s:%d: %s: %s\n", (rank), __FILE__, __LINE__, #call,    \
                    ncclGetErrorString(r_));                                                                     \
            exit(1);                                                                                             \
        }                                                                                                        \
    } while (0)

#endif
