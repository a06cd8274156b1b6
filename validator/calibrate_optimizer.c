/* calibrate's optimizer bandwidth (calibrate_optimizer.h).  The step's AdamW (kernels/adamw.cu, sx_adamw) runs once a
 * step over the whole local shard: hundreds of millions to billions of parameters, 28 bytes each, tens of GB that no
 * cache holds.  It is timed here at such sizes, beside a device copy over the same master weights, so that the
 * overlay can say what fraction of the HBM the optimizer reaches, apart from the copy's. */
#include "calibrate_optimizer.h"

#include <cuda_runtime_api.h>
#include <stdio.h>

#include "bench.h"
#include "gpu_check.h"
#include "kernels.h"

typedef struct {
    float *master, *m, *v;
    sx_bf16 *grad, *weight;
    size_t n;
} adamw_ctx;

static const sx_adamw_params hyper = {3e-4f, 0.9f, 0.95f, 1e-8f, 0.1f, 10, 1.0f, NULL};

static void run_adamw(const void *ctx)
{
    const adamw_ctx *a = ctx;
    CUDA_CHECK(sx_adamw(a->master, a->m, a->v, a->weight, a->grad, a->n, &hyper, bench.stream));
}

static void run_master_copy(const void *ctx)
{
    const adamw_ctx *a = ctx;
    CUDA_CHECK(cudaMemcpyAsync(a->m, a->master, a->n * sizeof(float), cudaMemcpyDeviceToDevice, bench.stream));
}

void calibrate_optimizer(optimizer_timing *out)
{
    static const double sizes[OPTIMIZER_SIZES] = {64e6, 256e6, 1024e6, 2048e6};
    const double footprint = 3.0 * sizeof(float) + 2.0 * sizeof(sx_bf16);   /* bytes held a parameter */
    size_t free_bytes, total_bytes;
    CUDA_CHECK(cudaMemGetInfo(&free_bytes, &total_bytes));
    out->n = 0;
    for (int i = 0; i < OPTIMIZER_SIZES; i++) {
        if (sizes[i] * footprint > 0.75 * (double)free_bytes) break;
        adamw_ctx a = {.n = (size_t)sizes[i]};
        CUDA_CHECK(cudaMalloc((void **)&a.master, a.n * sizeof(float)));
        CUDA_CHECK(cudaMalloc((void **)&a.m, a.n * sizeof(float)));
        CUDA_CHECK(cudaMalloc((void **)&a.v, a.n * sizeof(float)));
        CUDA_CHECK(cudaMalloc((void **)&a.grad, a.n * sizeof(sx_bf16)));
        CUDA_CHECK(cudaMalloc((void **)&a.weight, a.n * sizeof(sx_bf16)));
        /* finite values of a trained model's size (0x3c bytes: 0.0115 as fp32 and as bf16); the kernel's time does
         * not depend on them, its power draw might */
        CUDA_CHECK(cudaMemsetAsync(a.master, 0x3c, a.n * sizeof(float), bench.stream));
        CUDA_CHECK(cudaMemsetAsync(a.m, 0, a.n * sizeof(float), bench.stream));
        CUDA_CHECK(cudaMemsetAsync(a.v, 0x3c, a.n * sizeof(float), bench.stream));
        CUDA_CHECK(cudaMemsetAsync(a.grad, 0x3c, a.n * sizeof(sx_bf16), bench.stream));
        out->adamw_s[out->n] = time_median(run_adamw, &a, NULL);
        out->copy_s[out->n] = time_median(run_master_copy, &a, NULL);
        out->params[out->n++] = sizes[i];
        CUDA_CHECK(cudaFree(a.master));
        CUDA_CHECK(cudaFree(a.m));
        CUDA_CHECK(cudaFree(a.v));
        CUDA_CHECK(cudaFree(a.grad));
        CUDA_CHECK(cudaFree(a.weight));
    }
}

double optimizer_efficiency(const optimizer_timing *t, double hbm_bytes_per_s)
{
    if (t->n == 0 || hbm_bytes_per_s <= 0.0) return 0.0;
    const int last = t->n - 1;
    return OPTIMIZER_BYTES_PER_PARAM * t->params[last] / t->adamw_s[last] / hbm_bytes_per_s;
}
