/* The training step's GPU context (gpu_context.h). */
#include "gpu_context.h"

#include <stdlib.h>

gpu_context gpu_ctx;

cudaError_t stream_create_switched(cudaStream_t *stream, const char *switch_name)
{
    const char *on = getenv(switch_name);
    int least = 0, greatest = 0;
    if (on && atoi(on) == 1) {
        cudaError_t err = cudaDeviceGetStreamPriorityRange(&least, &greatest);
        if (err != cudaSuccess) return err;
    }
    return cudaStreamCreateWithPriority(stream, cudaStreamNonBlocking, greatest);
}
