/* The training step's GPU context (gpu_context.h). */
#include "gpu_context.h"

gpu_context gpu_ctx;
