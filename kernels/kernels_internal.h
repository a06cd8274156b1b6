/* Internal entry points of kernels/, for tests/gpu (test_kernels, bench_kernels) only: not part of the API
 * in kernels.h and not to be used by the validator. */
#ifndef SEXTANT_KERNELS_INTERNAL_H
#define SEXTANT_KERNELS_INTERNAL_H

#include "kernels.h"

#ifdef __cplusplus
extern "C" {
#endif

/* Causal softmax with an explicit path: 1 = registers (T % 8 == 0, T <= 2048; else as 2),
 * 2 = two-pass loop that re-reads the row.  sx_softmax_causal_forward/backward pick one. */
cudaError_t sx_softmax_causal_forward_path(int path, sx_bf16 *out, const sx_bf16 *scores, int BH, int T,
                                           float scale, cudaStream_t stream);
cudaError_t sx_softmax_causal_backward_path(int path, sx_bf16 *dscores, const sx_bf16 *p, const sx_bf16 *dp,
                                            int BH, int T, float scale, cudaStream_t stream);

/* The fp32 cos and sin that sx_rope_forward/backward apply: [T, D/2] each, element (t, i) for
 * angle t * theta^(-2i/D).  For test_kernels' check of the angle reduction. */
cudaError_t sx_rope_angles_f32(float *cos_out, float *sin_out, int T, int D, float theta,
                               cudaStream_t stream);

#ifdef __cplusplus
}
#endif

#endif
