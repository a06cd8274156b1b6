/* Internal entry points of kernels/, for tests/gpu (test_kernels, bench_kernels) only: not part of the API
 * in kernels.h and not to be used by the validator. */
#ifndef SEXTANT_KERNELS_INTERNAL_H
#define SEXTANT_KERNELS_INTERNAL_H

#include "kernels.h"

#ifdef __cplusplus
extern "C" {
#endif

/* The causal softmax backward with an explicit path: 1 = registers (T % 8 == 0, T <= 2048; else
 * as 2), 2 = two-pass loop that re-reads the row; sx_softmax_causal_backward picks 1.  (The
 * forward has one path; its register version is in dev/cuda/softmax_forward.cu.) */
cudaError_t sx_softmax_causal_backward_path(int path, sx_bf16 *dscores, const sx_bf16 *p, const sx_bf16 *dp,
                                            int BH, int T, float scale, cudaStream_t stream);

/* The fp32 cos and sin that sx_rope_forward/backward apply: [T, D/2] each, element (t, i) for
 * angle t * theta^(-2i/D).  For test_kernels' check of the angle reduction. */
cudaError_t sx_rope_angles_f32(float *cos_out, float *sin_out, int T, int D, float theta,
                               cudaStream_t stream);
/* Knobs of the norm backward fast path, for the tests and the benchmark's sweeps (0 or -1 =
 * automatic, the default; the setting is global and stays until changed):
 *   blocks_per_sm: cap on the persistent grid's blocks per SM; pdl: 0 = launch the final
 *   reduction without programmatic dependent launch. */
void sx_norm_backward_tune(int blocks_per_sm, int pdl);
/* Which fast path of the norm backward runs, and its knobs (0 = automatic):
 *   impl: 2 = registers (norm_bwd_regs), 3 = bulk copies into a shared-memory ring
 *     (norm_bwd_bulk, sm_90; below sm_90 the register kernel runs instead); other values:
 *     automatic (version 1 is in dev/cuda/norm_backward.cu);
 *   k: 16-byte packs per thread (registers: 1 or 2; bulk: 1 to 4; raised where a row would
 *     need more than 16 warps, 15 for bulk);
 *   depth: registers: rows loaded per thread ahead of use (1 to 3; 2 at most with k = 2);
 *     bulk: stages of the ring (2 to 16, made shallower where they do not fit; default 3);
 *   rows: registers: row groups per block (default: the count giving the most resident
 *     warps); bulk: rows per stage (= row groups per block; default: 15 warps' worth).
 * Automatic (norm_auto in norm.cu): registers, k = 2, one row ahead; RMSNorm bf16 at C <= 768
 * k = 1; RMSNorm at C >= 4096 (while k = 2 fits in 15 warps) bulk, k = 2, 3 stages.
 * For the bulk path blocks_per_sm also sizes the ring so that that many blocks fit on an SM. */
void sx_norm_backward_variant(int impl, int k, int depth, int rows);
/* The launch parameters of the last fast-path norm backward call, for the benchmark's log:
 * impl, k, depth, warps per row, rows per block (row groups),
 * blocks, blocks per SM, dynamic shared memory bytes. */
void sx_norm_backward_last_config(int cfg[8]);
/* the launch of the last sx_layernorm_backward_pos: packs per thread, warps per row, row groups per
 * block, blocks, blocks per SM, rows ahead (all 0: the generic path) */
void sx_layernorm_backward_pos_last_config(int cfg[6]);
/* sx_layernorm_backward_pos's fast path: rows loaded ahead (1 or 2) and the most packs per thread
 * (1 to 3); 0 = automatic (3 packs at most; 2 rows ahead with up to 2 packs, else 1) */
void sx_layernorm_backward_pos_tune(int depth, int k);

/* Tuning knobs of the embedding backward (0 or -1 = automatic):
 *   path: 0 = automatic (tiled where it applies, else sorted), 1 = the sorted path (CUB radix
 *     sort + windows of 32 summed by warps, any N and V), 6 = the grouped path (prepare +
 *     apply in one call), 2 = the tiled path
 *     where it applies (N <= 131072, V <= 262142), 3 = its first kernel only (timing; dwte
 *     is not computed); other values: automatic (the atomic experiment, once paths 4 and 5, is
 *     in dev/cuda/embedding_backward.cu);
 *   kp: 16-byte packs per lane per pass in the item kernel (1 or 2);
 *   l2: bit 0 = dwpe's reads of dout keep the lines in L2 (evict_last), bit 1 = the item
 *     kernel's reads of dout mark them evict_first, bit 2 = so do its dwte reads and writes;
 *   prefetch_mb: without dwpe, the tile kernel's extra blocks prefetch this many MB of dout
 *     into L2 (0 or -1 = none, the default);
 *   pdl: 0 = launch the item kernel without programmatic dependent launch. */
void sx_embedding_backward_tune(int path, int kp, int l2, int prefetch_mb, int pdl);

/* The grouped path (0 or -1 = automatic): window_rows = W, the most sorted tokens a block
 * sums (<= 32; 16, or 12 where C >= 2048); nominal_rows = Wn, the nominal distance between
 * cuts (W/2 < Wn <= W; 3W/4), so runs of up to W - Wn + 1 tokens are never split (Wn = W: cuts never move);
 * chunk_channels = channels per block (a multiple of 8; 1024); wpe_blocks_first = 1: the
 * blocks that sum dwpe come first in the grid (their reads of dout keep it in L2 for the
 * gather), 0: last; min_blocks = 6: the apply kernel compiled for 6 blocks per SM (at most 40
 * registers), otherwise for 4 (at most 64).  prepare and apply must run with the
 * same settings, and the buffers be sized with them. */
void sx_embedding_apply_tune(int window_rows, int nominal_rows, int chunk_channels, int wpe_blocks_first,
                             int min_blocks);


#ifdef __cplusplus
}
#endif

#endif
