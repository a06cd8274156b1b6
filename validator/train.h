/* The training-step validator (validator/train.c). */
#ifndef SEXTANT_TRAIN_H
#define SEXTANT_TRAIN_H

#include <cublas_v2.h>
#include <cuda_runtime_api.h>

#include "planner.h"

typedef struct {
    int mbs, seq, steps, warmup;
    int calibrated;
    int flash;         /* --attention flash: the fused kernel instead of cuBLAS + softmax */
    const char *csv;   /* NULL, or where the rows go (docs/validation's columns) */
    const char *json;  /* NULL, or the same as JSON */
    const char *plot;  /* NULL, or an SVG of predicted against measured per op (gnuplot) */
} train_options;

/* Trains a GPT-2- or LLaMA-family model for o->steps steps on synthetic tokens and
 * prints measured against predicted; 0 when the loss fell. */
int train_gpt(const model_t *m, const hw_gpu *gpu, const hw_node *node, const train_options *o, cublasHandle_t blas,
              cudaStream_t stream);

#endif
