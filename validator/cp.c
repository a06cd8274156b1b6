/* Context parallelism in the training step: ring attention for CP = 2 (cp.h). */
#include "cp.h"

#include <stdlib.h>
#include <string.h>

#include "gpu_check.h"
#include "gpu_context.h"


static size_t kv_elems(int B, int Tl, int KV, int D) { return (size_t)B * Tl * 2 * KV * D; }

static size_t round256(size_t bytes) { return (bytes + 255) & ~(size_t)255; }

size_t cp_buffer_bytes(int B, int Tl, int H, int KV, int D, int C, int learned)
{
    size_t kv = round256(kv_elems(B, Tl, KV, D) * sizeof(sx_bf16));
    size_t part = round256((size_t)B * Tl * H * D * sizeof(sx_bf16)) + round256((size_t)B * H * Tl * sizeof(float));
    size_t pos = learned ? 2 * round256((size_t)Tl * C * sizeof(sx_bf16)) : 0;
    return 4 * kv + part + pos;
}

void cp_init(cp_state *c, void *(*alloc)(void *ctx, size_t bytes), void *alloc_ctx, int learned)
{
    c->peer = (c->rank + 1) % c->cp;   /* CP = 2: the ring's one neighbour, both ways */
    c->chunk = c->Tl / 2;
    size_t kv = kv_elems(c->B, c->Tl, c->KV, c->D) * sizeof(sx_bf16);
    c->kv_send = alloc(alloc_ctx, kv);
    c->kv_recv = alloc(alloc_ctx, kv);
    c->dkv_send = alloc(alloc_ctx, kv);
    c->dkv_recv = alloc(alloc_ctx, kv);
    c->part = alloc(alloc_ctx, (size_t)c->B * c->Tl * c->H * c->D * sizeof(sx_bf16));
    c->part_lse = alloc(alloc_ctx, (size_t)c->B * c->H * c->Tl * sizeof(float));
    c->pos = learned ? alloc(alloc_ctx, (size_t)c->Tl * c->C * sizeof(sx_bf16)) : NULL;
    c->dpos = learned ? alloc(alloc_ctx, (size_t)c->Tl * c->C * sizeof(sx_bf16)) : NULL;
    /* SEXTANT_CP_STREAM_PRIORITY=1: the ring's stream at the device's highest priority, so that
     * the exchange's NCCL kernel gets SMs before the compute kernels it runs beside (on 2 x H200
     * the exchanges took 3.4-37 times their transfer time at the default priority,
     * docs/validation/2026-11-26-h200x2-cp).  Measured both ways, it changes neither the exchanges
     * nor the step (docs/validation/2026-11-26-h200x2-cp-priority): off, kept to ask again */
    CK(stream_create_switched(&c->stream, "SEXTANT_CP_STREAM_PRIORITY"));
    /* SEXTANT_CP_SERIAL=1, a diagnostic: every exchange on the compute stream, beside nothing, so that the
     * step times the exchange alone where it runs (and pays it exposed) */
    const char *serial = getenv("SEXTANT_CP_SERIAL");
    c->serial = serial && atoi(serial) == 1;
    cudaEvent_t *evs[] = {&c->packed, &c->arrived, &c->dkv_ready, &c->dkv_arrived};
    for (size_t i = 0; i < sizeof evs / sizeof evs[0]; i++) CK(cudaEventCreateWithFlags(evs[i], cudaEventDisableTiming));
}

void cp_free(cp_state *c)
{
    CK(cudaEventDestroy(c->packed));
    CK(cudaEventDestroy(c->arrived));
    CK(cudaEventDestroy(c->dkv_ready));
    CK(cudaEventDestroy(c->dkv_arrived));
    CK(cudaStreamDestroy(c->stream));
}

/* send `from` to the peer and receive its `to`, on the CP stream once `ready` (compute) is
 * reached; `done` recorded after both */
static void exchange(cp_state *c, const char *name, const sx_bf16 *from, sx_bf16 *to, cudaEvent_t ready,
                     cudaEvent_t done)
{
    size_t n = kv_elems(c->B, c->Tl, c->KV, c->D);
    cudaStream_t on = c->serial ? c->compute : c->stream;
    CK(cudaEventRecord(ready, c->compute));
    CK(cudaStreamWaitEvent(on, ready, 0));
    c->mark(name, 0, on);
    NC(ncclGroupStart());
    NC(ncclSend(from, n, ncclBfloat16, c->peer, c->comm, on));
    NC(ncclRecv(to, n, ncclBfloat16, c->peer, c->comm, on));
    NC(ncclGroupEnd());
    c->mark(name, 1, on);
    CK(cudaEventRecord(done, on));
}

void cp_warmup(cp_state *c)
{
    exchange(c, "cp_warmup", c->kv_send, c->kv_recv, c->packed, c->arrived);
    CK(cudaStreamWaitEvent(c->compute, c->arrived, 0));
}

/* K and V of every local token, side by side, from the qkv rows: a kernel of 16-byte packs at the memory's
 * rate, as Transformer Engine's torch.cat of k and v (a strided cudaMemcpy2DAsync took twice as long,
 * docs/validation/2026-11-26-h100x2-cp-pack); the planner's cp_kv_pack */
static void pack_kv(cp_state *c, const sx_bf16 *qkv)
{
    int width = 2 * c->KV * c->D;
    c->mark("cp_kv_pack", 0, c->compute);
    CK(sx_copy_rows(c->kv_send, width, qkv + (size_t)c->H * c->D, c->ld, c->B * c->Tl, width, c->compute));
    c->mark("cp_kv_pack", 1, c->compute);
}

/* the rank's own causal square */
static sx_attention_block own_block(const cp_state *c)
{
    sx_attention_block s;
    s.B = c->B; s.Tq = s.Tk = c->Tl; s.H = c->H; s.KV = c->KV; s.D = c->D; s.causal = 1;
    s.q_row_stride = s.kv_row_stride = c->ld;
    s.q_batch_stride = s.kv_batch_stride = (long long)c->Tl * c->ld;
    s.o_batch_stride = (long long)c->Tl * c->H * c->D;
    s.lse_stride = c->Tl;
    s.scale = c->scale;
    return s;
}

/* the peer's block: queries b->q0.. of qkv against rows b->k0.. of the received K, V */
static sx_attention_block peer_block(const cp_state *c, const cp_block *b)
{
    sx_attention_block s = own_block(c);
    s.Tq = b->nq; s.Tk = b->nk; s.causal = 0;
    s.kv_row_stride = 2 * c->KV * c->D;
    s.kv_batch_stride = (long long)c->Tl * s.kv_row_stride;
    return s;
}

static cp_block ring_step(const cp_state *c)
{
    cp_block b;
    if (cp_ring_block(c->cp, c->rank, 1, c->chunk, &b) != 0) {
        fprintf(stderr, "sextant-gpu train: rank %d: internal: CP ring step of rank %d of %d\n", c->my_rank, c->rank, c->cp);
        exit(1);
    }
    return b;
}

void cp_exchange_kv(cp_state *c, const sx_bf16 *qkv, const char *name)
{
    pack_kv(c, qkv);
    exchange(c, name, c->kv_send, c->kv_recv, c->packed, c->arrived);
}

void cp_attention_forward(cp_state *c, sx_bf16 *out, float *lse, const sx_bf16 *qkv)
{
    const sx_attention_block own = own_block(c);
    const sx_bf16 *q = qkv, *k = qkv + (size_t)c->H * c->D, *v = k + (size_t)c->KV * c->D;
    CK(sx_flash_attention_block_forward(out, lse, q, k, v, &own, c->compute));
    CK(cudaStreamWaitEvent(c->compute, c->arrived, 0));
    const cp_block b = ring_step(c);
    sx_attention_block peer = peer_block(c, &b);
    /* the partial result over the peer's keys, [B, nq, H, D] and [B, H, nq] */
    peer.o_batch_stride = (long long)b.nq * c->H * c->D;
    peer.lse_stride = b.nq;
    const sx_bf16 *pk = c->kv_recv + (size_t)b.k0 * peer.kv_row_stride, *pv = pk + (size_t)c->KV * c->D;
    CK(sx_flash_attention_block_forward(c->part, c->part_lse, q + (size_t)b.q0 * c->ld, pk, pv, &peer, c->compute));
    CK(sx_attention_merge(out + (size_t)b.q0 * c->H * c->D, lse + b.q0, c->part, c->part_lse, c->B, b.nq, c->H, c->D,
                          own.o_batch_stride, own.lse_stride, c->compute));
}

void cp_attention_backward_peer(cp_state *c, sx_bf16 *dqkv, const sx_bf16 *dout, const sx_bf16 *out, const float *lse,
                                const sx_bf16 *qkv, void *workspace, size_t workspace_bytes)
{
    size_t hd = (size_t)c->H * c->D, kd = (size_t)c->KV * c->D;
    /* both blocks add their dQ: it starts at zero */
    CK(cudaMemset2DAsync(dqkv, (size_t)c->ld * sizeof(sx_bf16), 0, hd * sizeof(sx_bf16), (size_t)c->B * c->Tl,
                         c->compute));
    CK(cudaStreamWaitEvent(c->compute, c->arrived, 0));
    const cp_block b = ring_step(c);
    const sx_attention_block peer = peer_block(c, &b);
    /* the peer's keys outside the block get no gradient from here */
    CK(cudaMemsetAsync(c->dkv_send, 0, kv_elems(c->B, c->Tl, c->KV, c->D) * sizeof(sx_bf16), c->compute));
    size_t q0 = (size_t)b.q0, k0 = (size_t)b.k0 * peer.kv_row_stride;
    const sx_bf16 *pk = c->kv_recv + k0, *pv = pk + kd;
    sx_bf16 *dk = c->dkv_send + k0, *dv = dk + kd;
    CK(sx_flash_attention_block_backward(dqkv + q0 * c->ld, dk, dv, dout + q0 * hd, out + q0 * hd, lse + q0,
                                         qkv + q0 * c->ld, pk, pv, &peer, 1, workspace, workspace_bytes, c->compute));
}

void cp_return_dkv(cp_state *c)
{
    exchange(c, "cp_ring_kv_dkv_bwd", c->dkv_send, c->dkv_recv, c->dkv_ready, c->dkv_arrived);
}

void cp_attention_backward_own(cp_state *c, sx_bf16 *dqkv, const sx_bf16 *dout, const sx_bf16 *out, const float *lse,
                               const sx_bf16 *qkv, void *workspace, size_t workspace_bytes)
{
    const sx_attention_block own = own_block(c);
    size_t hd = (size_t)c->H * c->D, kd = (size_t)c->KV * c->D;
    CK(sx_flash_attention_block_backward(dqkv, dqkv + hd, dqkv + hd + kd, dout, out, lse, qkv, qkv + hd, qkv + hd + kd,
                                         &own, 1, workspace, workspace_bytes, c->compute));
}

void cp_wait_dkv(cp_state *c)
{
    CK(cudaStreamWaitEvent(c->compute, c->dkv_arrived, 0));
}

void cp_add_dkv(cp_state *c, sx_bf16 *dqkv)
{
    size_t hd = (size_t)c->H * c->D, kd = (size_t)c->KV * c->D;
    CK(sx_add_rows(dqkv + hd, c->ld, c->dkv_recv, 2 * kd, c->B * c->Tl, (int)(2 * kd), c->compute));
}

void cp_rope(cp_state *c, sx_bf16 *qkv, float theta, int backward)
{
    int pos0 = cp_position(c->cp, c->rank, c->chunk, 0), pos1 = cp_position(c->cp, c->rank, c->chunk, c->chunk);
    if (backward)
        CK(sx_rope_backward_chunks(qkv, c->B, c->Tl, c->H, c->KV, c->D, c->ld, theta, c->chunk, pos0, pos1, c->compute));
    else
        CK(sx_rope_forward_chunks(qkv, c->B, c->Tl, c->H, c->KV, c->D, c->ld, theta, c->chunk, pos0, pos1, c->compute));
}

const sx_bf16 *cp_positions(cp_state *c, const sx_bf16 *wpe)
{
    if (!wpe) return NULL;
    size_t rows = (size_t)c->chunk * c->C * sizeof(sx_bf16);
    for (int half = 0; half < 2; half++) {
        int at = cp_position(c->cp, c->rank, c->chunk, half * c->chunk);
        CK(cudaMemcpyAsync((char *)c->pos + half * rows, wpe + (size_t)at * c->C, rows, cudaMemcpyDeviceToDevice,
                           c->compute));
    }
    return c->pos;
}

sx_bf16 *cp_position_grads_begin(cp_state *c)
{
    CK(cudaMemsetAsync(c->dpos, 0, (size_t)c->Tl * c->C * sizeof(sx_bf16), c->compute));
    return c->dpos;
}

void cp_position_grads_end(cp_state *c, sx_bf16 *dwpe)
{
    size_t n = (size_t)c->chunk * c->C;
    for (int half = 0; half < 2; half++) {
        sx_bf16 *dst = dwpe + (size_t)cp_position(c->cp, c->rank, c->chunk, half * c->chunk) * c->C;
        CK(sx_residual_add(dst, NULL, dst, c->dpos + half * n, n, c->compute));
    }
}
