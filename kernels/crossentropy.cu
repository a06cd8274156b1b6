/* Fused softmax cross-entropy over a (padded) vocabulary: loss per token (fp32) and, in the
 * same pass, dlogits (bf16).
 * Fast path (ce_fused_smem_kernel, crossentropy.cuh): rows staged in shared memory, two 512-thread
 * blocks per SM with one row buffer each.
 * Rows too long for two rows of shared memory per SM (LLaMA 3's 128k vocabulary), sm_90:
 * ce_fused_cluster_kernel, one thread-block cluster per row, each block holding a slice.
 * Fallback (ce_fused_kernel: no clusters (before sm_90), rows too long even for eight slices, Vp % 8 != 0,
 * unaligned): a persistent grid of one 1024-thread block per SM, each block taking rows in turn; pass 1
 * reads the row (online max / sum of exp2, 16-byte loads) and keeps as much of it as fits
 * in shared memory (227 KB of LLaMA 3's 256 KB rows on an H100), block reductions give max
 * and sum, pass 2 takes the kept part from shared memory and re-reads only the rest, then
 * writes dlogits with streaming stores.  Re-reading whole rows went to DRAM a second time:
 * 60% of copy bandwidth at V = 128256 on an H100 with one block per row or one per SM
 * (docs/validation/archive/2026-11-23-h100-clock-scaled): the rows in flight, 34-135 MB, were more
 * than L2 keeps. */
#include "crossentropy.cuh"
#include "kernels_internal.h"

/* The layouts that were measured and not chosen (one 1024-thread block with two row buffers,
 * one block per row with nothing staged, clusters of 8, clusters of 256-thread blocks) are run
 * by dev/cuda/crossentropy.cu. */

/* the path forced by sx_cross_entropy_tune (kernels_internal.h), for the tests: 0 = automatic,
 * 4 = the staged fallback, 5 = a cluster per row, also where a row fits */
static int g_ce_force = 0;
extern "C" void sx_cross_entropy_tune(int layout) { g_ce_force = layout == 4 || layout == 5 ? layout : 0; }

extern "C" cudaError_t sx_cross_entropy_fused(float *loss, sx_bf16 *dlogits, const sx_bf16 *logits,
                                              const int32_t *targets, int N, int V, int Vp, float dloss,
                                              cudaStream_t stream) {
    SX_REQUIRE(N >= 0 && V > 0 && Vp >= V);
    if (N == 0) return cudaSuccess;
    SX_REQUIRE(loss && logits && targets);
    const bool vec = Vp % 8 == 0 && sx_aligned16(logits) && (!dlogits || sx_aligned16(dlogits));
    const size_t row_bytes = (size_t)Vp * sizeof(bf16);
    int dev = 0, smem_max = 0, smem_sm = 0;
    SX_CHECK(cudaGetDevice(&dev));
    SX_CHECK(cudaDeviceGetAttribute(&smem_max, cudaDevAttrMaxSharedMemoryPerBlockOptin, dev));
    SX_CHECK(cudaDeviceGetAttribute(&smem_sm, cudaDevAttrMaxSharedMemoryPerMultiprocessor, dev));
    /* both layouts need two rows of shared memory per SM (plus the reductions' 1 KB per block) */
    const bool fits = 2 * row_bytes + 1024 <= (size_t)smem_max && 2 * (row_bytes + 1024) <= (size_t)smem_sm;
    /* two 512-thread blocks per SM with one row buffer each (ahead of one 1024-thread block with
     * two buffers on the H100 and the H200: dev/cuda/crossentropy.cu) */
    if (vec && fits && !g_ce_force)
        return ce_launch_smem<512, 1>(loss, (bf16 *)dlogits, (const bf16 *)logits, targets, N, V, Vp, dloss, stream);
    /* a cluster per row where a row does not fit (H100, V = 128256: 84.9% of copy against 75.3%
     * for the staged fallback, docs/validation/2026-11-24-h100-step/ce-cluster): the smallest
     * cluster leaving two blocks per SM */
    if (vec && (g_ce_force == 5 || (!fits && !g_ce_force))) {
        const int cl = ce_cluster_size(Vp, smem_max, smem_sm);
        if (cl)
            return ce_launch_cluster<512>(loss, (bf16 *)dlogits, (const bf16 *)logits, targets, N, V, Vp, dloss, cl, stream);
    }
    /* the staged fallback: one persistent block per SM (one per row where there are fewer rows) */
    const int sms = sx_num_sms(), grid = N < sms ? N : sms;
    int staged_packs = 0;
    if (vec) {
        /* what one block may take beside the reductions' static 256 bytes */
        const int room = (smem_max - 1024) / 16, np = Vp / 8;
        staged_packs = room < np ? room : np;
        if (staged_packs < 0) staged_packs = 0;
        SX_CHECK(cudaFuncSetAttribute(ce_fused_kernel<true>, cudaFuncAttributeMaxDynamicSharedMemorySize,
                                      staged_packs * 16));
    }
    if (vec)
        ce_fused_kernel<true><<<grid, CE_THREADS, (size_t)staged_packs * 16, stream>>>(
            loss, (bf16 *)dlogits, (const bf16 *)logits, targets, N, V, Vp, dloss, staged_packs);
    else
        ce_fused_kernel<false><<<grid, CE_THREADS, 0, stream>>>(loss, (bf16 *)dlogits, (const bf16 *)logits, targets,
                                                                 N, V, Vp, dloss, 0);
    SX_LAUNCHED();
}
