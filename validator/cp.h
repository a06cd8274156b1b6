/* Context parallelism in the training step (validator/cp.c): ring attention over the fused
 * attention kernels, for CP = 2 (the ring of cp_ring.h with one step beyond the rank's own).
 *
 * Forward of one layer: the rank's K and V are packed from the qkv output and exchanged with
 * the peer (NCCL send/recv on the CP stream) while the compute stream runs the rank's own
 * causal block; then the peer's block (cp_ring_block) into a partial output, merged into the
 * layer's output and log-sum-exp (sx_attention_merge).
 * Backward: K and V are exchanged again (nothing of the peer is kept) beside the MLP's
 * backward; the peer's block's backward adds its dQ to the rank's and writes the peer's dK,
 * dV, which go back round the ring beside the own block's backward and are added to the
 * owner's.
 * Every exchange is profiled on the CP stream as the planner's op list names it:
 * cp_ring_kv (forward and recomputation) and cp_ring_kv_dkv_bwd (the backward's two). */
#ifndef SEXTANT_CP_H
#define SEXTANT_CP_H

#include <cuda_runtime_api.h>
#include <nccl.h>

#include "cp_ring.h"
#include "kernels.h"

/* The training step's profiler: the start (end 0) or end of op `name` on stream `on`. */
typedef void (*cp_mark_fn)(const char *name, int end, cudaStream_t on);

typedef struct {
    int cp, rank, peer, my_rank;     /* the CP group, this rank's place in it, the rank for error lines */
    int B, Tl, chunk, H, KV, D, ld;  /* micro-batch, local tokens per sequence, heads, qkv row width */
    float scale;
    cudaStream_t compute, stream;    /* the step's compute stream; the exchanges' own */
    int serial;                      /* SEXTANT_CP_SERIAL: the exchanges on the compute stream */
    ncclComm_t comm;
    cp_mark_fn mark;
    sx_bf16 *kv_send, *kv_recv;      /* [B Tl, 2 KV D]: K then V of every token */
    sx_bf16 *dkv_send, *dkv_recv;
    sx_bf16 *part;                   /* the peer's block's output [B, Tl, H, D] */
    float *part_lse;                 /* [B, H, Tl] */
    sx_bf16 *pos, *dpos;             /* learned positions: the rank's rows of the table and of its gradient */
    int C;                           /* model width (position table rows) */
    cudaEvent_t packed, arrived, dkv_ready, dkv_arrived;
} cp_state;

/* Device bytes cp_init allocates for these shapes (learned: a position table). */
size_t cp_buffer_bytes(int B, int Tl, int H, int KV, int D, int C, int learned);

/* Fills the state (the caller sets cp, rank, my_rank, the shapes, compute, comm and mark)
 * and its buffers from `alloc` (which exits on failure). */
void cp_init(cp_state *c, void *(*alloc)(void *ctx, size_t bytes), void *alloc_ctx, int learned);
void cp_free(cp_state *c);

/* One send/recv of each buffer size, finished (the communicator's first use). */
void cp_warmup(cp_state *c);

/* The rank's K and V packed from qkv [B Tl, ld] and exchanged with the peer's on the CP
 * stream, profiled as `name` (cp_ring_kv in a forward, cp_ring_kv_dkv_bwd in a backward):
 * before the attention's forward, and at the start of the layer's backward so that the
 * exchange runs beside the MLP's backward.  The profiler does not nest: outside any op. */
void cp_exchange_kv(cp_state *c, const sx_bf16 *qkv, const char *name);

/* The layer's attention: out [B, Tl, H, D] and lse [B, H, Tl] from qkv: the own causal block,
 * then (once the exchange is through) the peer's block, merged. */
void cp_attention_forward(cp_state *c, sx_bf16 *out, float *lse, const sx_bf16 *qkv);

/* The backward into dqkv [B Tl, ld] from dout and the saved out, lse and qkv, in four calls
 * so that the dK, dV going back run beside the own block's backward:
 *   cp_attention_backward_peer  dQ cleared, the peer's block: dQ +=, the peer's dK, dV
 *   cp_return_dkv               those sent back, the peer's for this rank's keys received
 *                               (CP stream, profiled as cp_ring_kv_dkv_bwd; outside any op)
 *   cp_attention_backward_own   the own causal block: dQ +=, dK, dV =
 *   cp_wait_dkv, cp_add_dkv     wait for the peer's dK, dV (profiled as cp_dkv_wait), then add them
 *                               (cp_dkv_add, the planner's op of that name).
 * workspace: sx_flash_attention_backward_workspace_bytes(B, Tl, Tl, H, KV, D). */
void cp_attention_backward_peer(cp_state *c, sx_bf16 *dqkv, const sx_bf16 *dout, const sx_bf16 *out, const float *lse,
                                const sx_bf16 *qkv, void *workspace, size_t workspace_bytes);
void cp_return_dkv(cp_state *c);
void cp_attention_backward_own(cp_state *c, sx_bf16 *dqkv, const sx_bf16 *dout, const sx_bf16 *out, const float *lse,
                               const sx_bf16 *qkv, void *workspace, size_t workspace_bytes);
void cp_wait_dkv(cp_state *c);
void cp_add_dkv(cp_state *c, sx_bf16 *dqkv);

/* RoPE at the rank's global positions (backward: 1 for the gradient's inverse rotation). */
void cp_rope(cp_state *c, sx_bf16 *qkv, float theta, int backward);

/* Learned positions: the rank's rows of the table wpe (the embedding forward reads them). */
const sx_bf16 *cp_positions(cp_state *c, const sx_bf16 *wpe);
/* The embedding backward writes the rank's position gradient here (cleared) ... */
sx_bf16 *cp_position_grads_begin(cp_state *c);
/* ... and this adds it to the table's gradient dwpe at the rank's rows. */
void cp_position_grads_end(cp_state *c, sx_bf16 *dwpe);

#endif
