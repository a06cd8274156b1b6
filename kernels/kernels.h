/* sextant kernels: the validator's own CUDA C kernels behind a small C API.
 *
 * Plain C declarations, usable from C11 and from .cu files (C linkage).
 *
 * Conventions
 *   - Storage is bfloat16 unless a name ends in _f32 (fp32) or _f16 (IEEE half: the norms,
 *     GELU, SwiGLU and the residual add).  A bf16 tensor is passed as sx_bf16 * (the raw 16 bits of a bfloat16;
 *     __nv_bfloat16 in device code), a half one as sx_f16 * (__half).
 *   - Arithmetic and every reduction are in fp32.  Saved statistics (mean, rstd),
 *     losses and optimizer state are fp32.
 *   - Row-major tensors; "N" is the number of rows (B*T tokens), "C" the row length.
 *   - Every function takes a cudaStream_t, launches asynchronously, checks the launch
 *     with cudaGetLastError() and returns its cudaError_t.  Invalid arguments (negative
 *     sizes, a NULL tensor that is required, a too-small workspace) return
 *     cudaErrorInvalidValue and launch nothing.  Sizes of 0 are a no-op.
 *   - Any size and any alignment is accepted.  The fast paths use 16-byte vector
 *     accesses and need the row length to be a multiple of 8 (bf16) or 4 (fp32) and
 *     16-byte aligned pointers (cudaMalloc gives 256); otherwise a scalar path runs.
 *   - "+=" below means the kernel accumulates into the output (gradient accumulation
 *     over micro-batches); "=" means it overwrites.
 *   - Determinism: every kernel here is bitwise reproducible run to run on the same
 *     GPU (no floating-point atomics).  Norm backward reduces parameter gradients in a
 *     fixed order over a grid sized from the device's SM count, so results may differ
 *     in the last bits between GPU models.
 */
#ifndef SEXTANT_KERNELS_H
#define SEXTANT_KERNELS_H

#include <stddef.h>
#include <stdint.h>
#include <cuda_runtime_api.h>

#ifdef __cplusplus
extern "C" {
#endif

typedef uint16_t sx_bf16; /* raw bfloat16 bits */
typedef uint16_t sx_f16;  /* raw IEEE binary16 (half) bits: the _f16 variants' storage */

/* Gradient types take SX_F32 or SX_BF16; SX_F16 names half storage (the tests' and the
 * benchmark's tables), which no function takes as a gradient type. */
typedef enum sx_dtype { SX_F32 = 0, SX_BF16 = 1, SX_F16 = 2 } sx_dtype;

/* ---------------------------------------------------------------- embedding */

/* out[b,t,:] = wte[ids[b,t],:] + wpe[t,:]      (=)
 * ids: int32 [B*T]; wte: [V,C]; wpe: [T_max >= T, C] or NULL (no position embedding).
 * An id outside [0, V) gives a row of NaN, so a bad id cannot pass silently. */
cudaError_t sx_embedding_forward(sx_bf16 *out, const int32_t *ids, const sx_bf16 *wte,
                                 const sx_bf16 *wpe, int B, int T, int C, int V,
                                 cudaStream_t stream);

/* Workspace (bytes) that sx_embedding_backward needs for N = B*T tokens, C channels, vocab V.
 * Uses the current device; returns 0 on error. */
size_t sx_embedding_backward_workspace_bytes(int N, int C, int V);

/* dwte[v,:] += sum over tokens n with ids[n] == v of dout[n,:]
 * dwpe[t,:] += sum over b of dout[b,t,:]            (dwpe may be NULL)
 * grad_type says whether dwte and dwpe are fp32 or bf16 (bf16: each touched row is
 * read, the fp32 sum added and rounded once).
 * Deterministic, no floating-point atomics: each id's rows are summed in ascending token
 * order in segments of 32 tokens, the segments of one id added in order, and each touched
 * row of dwte is read and written once.  N <= 131072 and V <= 262142: tiles of up to 4096
 * tokens sorted in shared memory, one warp per segment; otherwise the ids are
 * stable-radix-sorted (CUB) and summed in windows of 32 sorted rows.  Ids outside [0, V)
 * are skipped. */
cudaError_t sx_embedding_backward(void *dwte, void *dwpe, sx_dtype grad_type,
                                  const sx_bf16 *dout, const int32_t *ids,
                                  void *workspace, size_t workspace_bytes,
                                  int B, int T, int C, int V, cudaStream_t stream);

/* The embedding backward in two parts (the grouped path; not yet what sextant-gpu train runs,
 * see kernels/README.md).  The grouping of the tokens by id needs only the ids, which a
 * training step knows when it starts, so it can run beside the forward pass and leave the
 * backward pass only the memory-bound part:
 *   prepare: sorts the N ids into `grouping` (sx_embedding_grouping_bytes(N, C, V) bytes);
 *   apply:   the sums above, reading the grouping; `workspace` is its scratch
 *            (sx_embedding_apply_workspace_bytes(N, C) bytes).
 * A grouping serves any number of applies with the same ids (one at a time: apply keeps
 * counters in it), and is independent of dout, dwte and grad_type.  An apply's workspace
 * may be shared by applies on one stream. */
size_t sx_embedding_grouping_bytes(int N, int C, int V);
size_t sx_embedding_apply_workspace_bytes(int N, int C);
cudaError_t sx_embedding_backward_prepare(void *grouping, size_t grouping_bytes, const int32_t *ids,
                                          int N, int C, int V, cudaStream_t stream);
cudaError_t sx_embedding_backward_apply(void *dwte, void *dwpe, sx_dtype grad_type, const sx_bf16 *dout,
                                        void *grouping, size_t grouping_bytes,
                                        void *workspace, size_t workspace_bytes,
                                        int B, int T, int C, int V, cudaStream_t stream);

/* --------------------------------------------------------------------- norms */

/* LayerNorm: out = (x - mean) * rstd * weight + bias      (=)
 * mean, rstd: fp32 [N] (either may be NULL); bias may be NULL.  eps e.g. 1e-5. */
cudaError_t sx_layernorm_forward(sx_bf16 *out, float *mean, float *rstd, const sx_bf16 *x,
                                 const sx_bf16 *weight, const sx_bf16 *bias,
                                 int N, int C, float eps, cudaStream_t stream);
cudaError_t sx_layernorm_forward_f32(float *out, float *mean, float *rstd, const float *x,
                                     const float *weight, const float *bias,
                                     int N, int C, float eps, cudaStream_t stream);

/* Workspace (bytes) for the norm backward functions: 2 * 1024 * C * 4. */
size_t sx_norm_backward_workspace_bytes(int C);

/* LayerNorm backward, from the saved fp32 mean and rstd:
 *   dx  = rstd * (g - mean(g) - xhat * mean(g * xhat)),  g = dy * weight   (= or +=)
 *   dweight += sum over rows of dy * xhat,  dbias += sum over rows of dy   (+=)
 * dx_accumulate != 0 adds into dx (residual stream).  dweight/dbias are fp32 or bf16
 * as grad_type says (the _f32 variant: fp32); dbias may be NULL. */
cudaError_t sx_layernorm_backward(sx_bf16 *dx, void *dweight, void *dbias, sx_dtype grad_type,
                                  const sx_bf16 *dy, const sx_bf16 *x, const sx_bf16 *weight,
                                  const float *mean, const float *rstd, int dx_accumulate,
                                  void *workspace, size_t workspace_bytes,
                                  int N, int C, cudaStream_t stream);
cudaError_t sx_layernorm_backward_f32(float *dx, float *dweight, float *dbias,
                                      const float *dy, const float *x, const float *weight,
                                      const float *mean, const float *rstd, int dx_accumulate,
                                      void *workspace, size_t workspace_bytes,
                                      int N, int C, cudaStream_t stream);

/* fp16 storage (IEEE half: for GPUs without bf16, or half-precision training with a loss
 * scale), the same kernels and semantics as the bf16 functions; statistics and the parameter
 * gradients dweight, dbias in fp32.  No overflow handling beyond IEEE's: a loss scale is the
 * caller's business. */
cudaError_t sx_layernorm_forward_f16(sx_f16 *out, float *mean, float *rstd, const sx_f16 *x,
                                     const sx_f16 *weight, const sx_f16 *bias,
                                     int N, int C, float eps, cudaStream_t stream);
cudaError_t sx_layernorm_backward_f16(sx_f16 *dx, float *dweight, float *dbias,
                                      const sx_f16 *dy, const sx_f16 *x, const sx_f16 *weight,
                                      const float *mean, const float *rstd, int dx_accumulate,
                                      void *workspace, size_t workspace_bytes,
                                      int N, int C, cudaStream_t stream);

/* The first layer's LayerNorm backward in a model with learned positions, where dx is the
 * gradient of the embedding's output: sx_layernorm_backward (rows b-major, N = B T), and also
 *   dpos[t,:] += sum over b of dx[b,t,:]      (+=; dx as stored, after dx_accumulate's +=)
 * which is the position table's gradient, summed from registers while dx is written; the
 * embedding backward then runs with dwpe = NULL and reads dx once instead of twice.  dpos is
 * grad_type like dweight.  Deterministic: a position's B rows are summed in a fixed order.
 * Fast path C % 8 == 0, aligned, C <= 6144; otherwise the plain backward and a pass over dx. */
cudaError_t sx_layernorm_backward_pos(sx_bf16 *dx, void *dweight, void *dbias, void *dpos, sx_dtype grad_type,
                                      const sx_bf16 *dy, const sx_bf16 *x, const sx_bf16 *weight,
                                      const float *mean, const float *rstd, int dx_accumulate,
                                      void *workspace, size_t workspace_bytes,
                                      int B, int T, int C, cudaStream_t stream);

/* RMSNorm: out = x * rstd * weight,  rstd = 1/sqrt(mean(x^2) + eps)   (=); rstd may be NULL */
cudaError_t sx_rmsnorm_forward(sx_bf16 *out, float *rstd, const sx_bf16 *x, const sx_bf16 *weight,
                               int N, int C, float eps, cudaStream_t stream);
cudaError_t sx_rmsnorm_forward_f32(float *out, float *rstd, const float *x, const float *weight,
                                   int N, int C, float eps, cudaStream_t stream);
/* dx = rstd * (g - xhat * mean(g * xhat)), g = dy * weight, xhat = x * rstd  (= or +=)
 * dweight += sum over rows of dy * xhat                                         (+=) */
cudaError_t sx_rmsnorm_backward(sx_bf16 *dx, void *dweight, sx_dtype grad_type,
                                const sx_bf16 *dy, const sx_bf16 *x, const sx_bf16 *weight,
                                const float *rstd, int dx_accumulate,
                                void *workspace, size_t workspace_bytes,
                                int N, int C, cudaStream_t stream);
cudaError_t sx_rmsnorm_backward_f32(float *dx, float *dweight,
                                    const float *dy, const float *x, const float *weight,
                                    const float *rstd, int dx_accumulate,
                                    void *workspace, size_t workspace_bytes,
                                    int N, int C, cudaStream_t stream);
cudaError_t sx_rmsnorm_forward_f16(sx_f16 *out, float *rstd, const sx_f16 *x, const sx_f16 *weight,
                                   int N, int C, float eps, cudaStream_t stream);
cudaError_t sx_rmsnorm_backward_f16(sx_f16 *dx, float *dweight,
                                    const sx_f16 *dy, const sx_f16 *x, const sx_f16 *weight,
                                    const float *rstd, int dx_accumulate,
                                    void *workspace, size_t workspace_bytes,
                                    int N, int C, cudaStream_t stream);

/* --------------------------------------------------------------- activations */

/* GELU, tanh approximation: 0.5 x (1 + tanh(sqrt(2/pi) (x + 0.044715 x^3)))   (=), n elements */
cudaError_t sx_gelu_forward(sx_bf16 *out, const sx_bf16 *x, size_t n, cudaStream_t stream);
/* dx = dy * gelu'(x)   (=); dx may alias dy */
cudaError_t sx_gelu_backward(sx_bf16 *dx, const sx_bf16 *x, const sx_bf16 *dy, size_t n,
                             cudaStream_t stream);

/* SwiGLU: out[n,h] = silu(gate[n,h]) * up[n,h],  silu(z) = z / (1 + exp(-z))   (=)
 * out is [N,H] (row stride H); gate and up have row stride ld (>= H): ld = H for two
 * separate tensors, or gate = base, up = base + H, ld = 2H for one fused [N,2H] GEMM output. */
cudaError_t sx_swiglu_forward(sx_bf16 *out, const sx_bf16 *gate, const sx_bf16 *up,
                              int N, int H, int ld, cudaStream_t stream);
/* dgate = dout * up * silu'(gate),  dup = dout * silu(gate)   (=), both with row stride ld */
cudaError_t sx_swiglu_backward(sx_bf16 *dgate, sx_bf16 *dup, const sx_bf16 *dout,
                               const sx_bf16 *gate, const sx_bf16 *up,
                               int N, int H, int ld, cudaStream_t stream);

/* Residual add: out = a + b (=); if copy != NULL it receives the same values (fused copy,
 * e.g. the residual stream saved for backward).  out may alias a or b. */
cudaError_t sx_residual_add(sx_bf16 *out, sx_bf16 *copy, const sx_bf16 *a, const sx_bf16 *b,
                            size_t n, cudaStream_t stream);

/* fp16 (IEEE half) storage: the same kernels and semantics as the bf16 functions above */
cudaError_t sx_gelu_forward_f16(sx_f16 *out, const sx_f16 *x, size_t n, cudaStream_t stream);
cudaError_t sx_gelu_backward_f16(sx_f16 *dx, const sx_f16 *x, const sx_f16 *dy, size_t n, cudaStream_t stream);
cudaError_t sx_swiglu_forward_f16(sx_f16 *out, const sx_f16 *gate, const sx_f16 *up, int N, int H, int ld,
                                  cudaStream_t stream);
cudaError_t sx_swiglu_backward_f16(sx_f16 *dgate, sx_f16 *dup, const sx_f16 *dout, const sx_f16 *gate,
                                   const sx_f16 *up, int N, int H, int ld, cudaStream_t stream);
cudaError_t sx_residual_add_f16(sx_f16 *out, sx_f16 *copy, const sx_f16 *a, const sx_f16 *b, size_t n,
                                cudaStream_t stream);

/* ------------------------------------------------ rotary position embedding */

/* RoPE, in place, on the query and key heads of a fused qkv GEMM output: row n = b*T + t
 * (position t = n mod T) holds H query heads at column 0, KV key heads at column H*D and,
 * untouched, whatever follows (the KV value heads in [B*T, (H+2KV)*D]); consecutive rows
 * are row_stride elements apart (row_stride >= (H+KV)*D; (H+2KV)*D for the fused buffer).
 * "Rotate half" (GPT-NeoX, Hugging Face LLaMA): in every head, for i < D/2,
 *   x[i]       <- x[i] cos(a) - x[i+D/2] sin(a)
 *   x[i+D/2]   <- x[i+D/2] cos(a) + x[i] sin(a),     a = t * theta^(-2i/D)
 * theta: the base (10000 for LLaMA-2, 500000 for LLaMA-3).  Angles are reduced in double
 * and sin/cos taken in fp32 (max abs error 1.15e-7 measured for positions below 8192; see
 * rope.cu), the rotation is fp32, each element is rounded once to bf16.  D even, D <= 8192,
 * theta > 0.
 * The backward is the same rotation by -a, applied in place to dq, dk in the dqkv buffer
 * of the same layout (same arguments).  Vector path: D % 16 == 0, row_stride % 8 == 0,
 * 16-byte aligned pointer; any other valid size runs a scalar path. */
cudaError_t sx_rope_forward(sx_bf16 *qkv, int B, int T, int H, int KV, int D, int row_stride,
                            float theta, cudaStream_t stream);
cudaError_t sx_rope_backward(sx_bf16 *dqkv, int B, int T, int H, int KV, int D, int row_stride,
                             float theta, cudaStream_t stream);
/* The same with each sequence's T rows in two chunks at their own positions (context
 * parallelism's load balancing): row t < chunk is at position pos0 + t, row t >= chunk at
 * pos1 + t - chunk.  chunk = T, pos0 = 0 is sx_rope_forward. */
cudaError_t sx_rope_forward_chunks(sx_bf16 *qkv, int B, int T, int H, int KV, int D, int row_stride, float theta,
                                   int chunk, int pos0, int pos1, cudaStream_t stream);
cudaError_t sx_rope_backward_chunks(sx_bf16 *dqkv, int B, int T, int H, int KV, int D, int row_stride, float theta,
                                    int chunk, int pos0, int pos1, cudaStream_t stream);

/* ------------------------------------------------- softmax (unfused attention) */

/* Row-wise causal softmax over scores [BH, T, T] (BH = batch * heads):
 *   out[h,t,j] = exp(scale*s[h,t,j] - max) / sum_{j'<=t} exp(...)   for j <= t,   0 for j > t   (=)
 * The upper triangle is written (zeros) so a following P @ V GEMM may read all of it. */
cudaError_t sx_softmax_causal_forward(sx_bf16 *out, const sx_bf16 *scores, int BH, int T,
                                      float scale, cudaStream_t stream);
/* dscores[h,t,j] = scale * p[j] * (dp[j] - sum_{j'<=t} p[j'] dp[j'])  for j <= t, 0 above   (=)
 * p: the forward output; dp: the gradient w.r.t. p.  dscores may alias dp. */
cudaError_t sx_softmax_causal_backward(sx_bf16 *dscores, const sx_bf16 *p, const sx_bf16 *dp,
                                       int BH, int T, float scale, cudaStream_t stream);

/* ------------------------------------------- fused causal attention (flash) */

/* Causal scaled-dot-product attention, FlashAttention-2 style, on tensor cores (mma.sync
 * bf16, fp32 accumulation and fp32 online softmax); the fast path beside the unfused one
 * (cuBLAS batched GEMMs + sx_softmax_causal_*).
 *   out[b,t,h,:] = sum_{j<=t} softmax_j(scale * q[b,t,h,:] . k[b,j,kh,:]) v[b,j,kh,:]   (=)
 *   lse[b,h,t]   = log sum_{j<=t} exp(scale * q[b,t,h,:] . k[b,j,kh,:])            (=, fp32)
 * kh = h / (H/KV) (GQA; KV = H is multi-head attention, KV = 1 multi-query).
 * q: [B, T, H, D] with row stride q_row_stride (elements between tokens t and t+1);
 * k, v: [B, T, KV, D] with row stride kv_row_stride.  For one fused qkv GEMM output
 * [B*T, (H+2KV)*D]: q = qkv, k = qkv + H*D, v = qkv + (H+KV)*D, both strides (H+2KV)*D;
 * for separate tensors H*D and KV*D.  out: [B, T, H, D] contiguous (row stride H*D);
 * lse: fp32 [B, H, T], saved for the backward.
 * D = 64 or 128; strides multiples of 8 and bf16 pointers 16-byte aligned (else
 * cudaErrorInvalidValue); any T >= 0; B*H <= 65535. */
cudaError_t sx_flash_attention_forward(sx_bf16 *out, float *lse, const sx_bf16 *q, const sx_bf16 *k,
                                       const sx_bf16 *v, int B, int T, int H, int KV, int D, int q_row_stride,
                                       int kv_row_stride, float scale, cudaStream_t stream);

/* Workspace (bytes) for sx_flash_attention_backward and sx_flash_attention_block_backward of Tq queries against
 * Tk keys: B*H*Tq fp32 (D_i = rowsum(dO * O)), and where few kv heads leave the dK, dV kernel's grid small
 * (GQA, a TP rank's kv heads) the fp32 partial sums of the query heads split over more blocks,
 * 2 * splits * B*Tk*KV*D.  0 for a bad shape (H not a multiple of KV). */
size_t sx_flash_attention_backward_workspace_bytes(int B, int Tq, int Tk, int H, int KV, int D);

/* Backward of sx_flash_attention_forward (FlashAttention-2: D_i = rowsum(dO*O) first, then
 * P recomputed from q, k and the saved lse):  dq, dk, dv   (=, bf16)
 * dq has q's layout (q_row_stride), dk and dv k's (kv_row_stride), so a fused dqkv buffer
 * works like the fused qkv one; dout and out: [B, T, H, D] contiguous.  With GQA, dk and dv
 * are summed over the H/KV query heads sharing a kv head.  Deterministic, no atomics:
 * dk/dv and dq are computed by two kernels (the second recomputes S and dP), and where the
 * query heads of a kv head are split over blocks their partial sums are added in a fixed
 * order by a third, so the result is bitwise reproducible (and the same on any GPU). */
cudaError_t sx_flash_attention_backward(sx_bf16 *dq, sx_bf16 *dk, sx_bf16 *dv, const sx_bf16 *dout,
                                        const sx_bf16 *out, const float *lse, const sx_bf16 *q, const sx_bf16 *k,
                                        const sx_bf16 *v, int B, int T, int H, int KV, int D, int q_row_stride,
                                        int kv_row_stride, float scale, void *workspace, size_t workspace_bytes,
                                        cudaStream_t stream);

/* One block of attention for context parallelism's ring (validator/cp.c), the causal square
 * above being its one-sequence case: Tq queries against Tk keys, either causal (Tq == Tk, query
 * t sees keys 0..t) or every query seeing every key (causal 0: a block of keys wholly before
 * the queries).  Row strides as above; batch strides (elements between sequence b and b+1,
 * multiples of 8) let q, k or v be a slice of a longer sequence; out and dout have row stride
 * H*D and batch stride o_batch_stride, lse rows (b, h) lse_stride apart (>= Tq).  Each query
 * row needs a key: Tk >= 1 when Tq >= 1. */
typedef struct sx_attention_block {
    int B, Tq, Tk, H, KV, D;
    int causal;
    long long q_row_stride, kv_row_stride;
    long long q_batch_stride, kv_batch_stride, o_batch_stride;
    long long lse_stride;
    float scale;
} sx_attention_block;

cudaError_t sx_flash_attention_block_forward(sx_bf16 *out, float *lse, const sx_bf16 *q, const sx_bf16 *k,
                                             const sx_bf16 *v, const sx_attention_block *shape, cudaStream_t stream);
/* The block's backward from the final out and lse of the query rows (after every block was
 * merged): dq = (or += with accumulate_dq) this block's part, dk and dv = the block's keys'
 * gradients.  Workspace: sx_flash_attention_backward_workspace_bytes(B, Tq, Tk, H, KV, D). */
cudaError_t sx_flash_attention_block_backward(sx_bf16 *dq, sx_bf16 *dk, sx_bf16 *dv, const sx_bf16 *dout,
                                              const sx_bf16 *out, const float *lse, const sx_bf16 *q,
                                              const sx_bf16 *k, const sx_bf16 *v, const sx_attention_block *shape,
                                              int accumulate_dq, void *workspace, size_t workspace_bytes,
                                              cudaStream_t stream);

/* Online-softmax merge of a block's partial result into the running one (cp_attention.cu):
 * for every (b, t, h), with L = log(exp(lse) + exp(part_lse)),
 *   out = exp(lse - L) out + exp(part_lse - L) part,   lse = L          (=, fp32 math)
 * out: [B, T, H, D] row stride H*D, batch stride out_batch_stride; lse: rows (b, h)
 * lse_stride apart; part: [B, T, H, D] contiguous; part_lse: [B, H, T].  D even, <= 256. */
cudaError_t sx_attention_merge(sx_bf16 *out, float *lse, const sx_bf16 *part, const float *part_lse, int B, int T,
                               int H, int D, long long out_batch_stride, long long lse_stride, cudaStream_t stream);

/* dst[r, c] += src[r, c] for r < rows, c < cols (bf16, fp32 sum rounded once); row strides
 * dst_ld, src_ld (elements).  The ring's dK, dV coming home to the rank that owns the keys. */
cudaError_t sx_add_rows(sx_bf16 *dst, long long dst_ld, const sx_bf16 *src, long long src_ld, int rows, int cols,
                        cudaStream_t stream);

/* dst[r, c] = src[r, c] for r < rows, c < cols, the same blocks and paths: the ring packs the rank's K and V,
 * interleaved with Q in the qkv rows, side by side into its send buffer (Transformer Engine's torch.cat of k
 * and v). */
cudaError_t sx_copy_rows(sx_bf16 *dst, long long dst_ld, const sx_bf16 *src, long long src_ld, int rows, int cols,
                         cudaStream_t stream);

/* ---------------------------------------------- fused softmax cross-entropy */

/* logits: [N, Vp] with Vp >= V (padded vocab; columns >= V are ignored).
 *   loss[n]       = logsumexp(logits[n, :V]) - logits[n, target[n]]             (=, fp32)
 *   dlogits[n, v] = dloss * (softmax(logits[n, :V])[v] - (v == target[n]))  v < V (=, bf16)
 *   dlogits[n, v] = 0                                                        V <= v < Vp
 * dloss is the scale of the gradient (e.g. 1/N for a mean loss).  A target < 0 is
 * ignored (loss 0, gradient row 0); a target >= V gives a NaN loss.  dlogits may be NULL
 * (loss only) or alias logits (in-place, as llm.c does). */
cudaError_t sx_cross_entropy_fused(float *loss, sx_bf16 *dlogits, const sx_bf16 *logits,
                                   const int32_t *targets, int N, int V, int Vp, float dloss,
                                   cudaStream_t stream);

/* ------------------------------------- a vocabulary split over tensor parallelism */

/* Megatron's vocabulary-parallel embedding: this rank holds `rows` rows of the table and
 * ids are shifted by minus its first row, so ids it does not own fall outside [0, rows).
 *   out[b,t,:] = (0 <= ids[b,t] < rows ? wte[ids[b,t],:] : 0) + wpe[t,:]      (=)
 * wpe may be NULL (pass it on one rank only, so that the group's sum adds it once).  The
 * group's all-reduce (or reduce-scatter) of out completes the lookup; the backward is
 * sx_embedding_backward with the same shifted ids and V = rows (others' ids are skipped).
 * C % 8 == 0 and 16-byte aligned pointers (else cudaErrorInvalidValue). */
cudaError_t sx_embedding_forward_shard(sx_bf16 *out, const int32_t *ids, const sx_bf16 *wte,
                                       const sx_bf16 *wpe, int B, int T, int C, int rows,
                                       cudaStream_t stream);

/* Vocabulary-parallel softmax cross-entropy: logits [N, ld] hold this rank's shard of the
 * columns, the first `cols` of them real vocabulary (the rest padding, gradient 0); targets
 * are shifted like the embedding's ids.  stats: fp32 [4N] workspace.  The caller runs:
 *   sx_cross_entropy_shard_partial;   all-reduce MAX over the group of stats[N, 2N)
 *   sx_cross_entropy_shard_rescale;   all-reduce SUM of stats[2N, 3N) and of stats[3N, 4N)
 *   sx_cross_entropy_shard_finish:    loss[n] (=, fp32) and dlogits (=, bf16; may alias logits)
 * which is sx_cross_entropy_fused's result, the row's sums taken over the whole group. */
cudaError_t sx_cross_entropy_shard_partial(float *stats, const sx_bf16 *logits, const int32_t *targets, int N,
                                           int cols, int ld, cudaStream_t stream);
cudaError_t sx_cross_entropy_shard_rescale(float *stats, int N, cudaStream_t stream);
cudaError_t sx_cross_entropy_shard_finish(float *loss, sx_bf16 *dlogits, const sx_bf16 *logits,
                                          const int32_t *targets, const float *stats, int N, int cols,
                                          int ld, float dloss, cudaStream_t stream);

/* ------------------------------------------------------- mixture of experts */

/* A MoE layer's routing (kernels/moe.cu; the float64 reference and the layout of the slots,
 * the sorted rows and the exchange are in validator/moe_plan.h).  N tokens, E experts,
 * k picks a token; slot s = n k + j. */
#define SX_MOE_TOPK_MAX 8
/* E of the top-k and the router's backward (validator/moe_plan.h's MOE_EXPERTS_MAX): a warp a token, two
 * experts a lane */
#define SX_MOE_ROUTE_EXPERTS_MAX 64

/* idx[N k] (=): the k largest of each row of logits[N, E] (fp32), largest first, ties to
 * the lower index; gate[N k] (=, fp32): the softmax of those k logits.  E <= SX_MOE_ROUTE_EXPERTS_MAX. */
cudaError_t sx_moe_topk(int32_t *idx, float *gate, const float *logits, int N, int E, int k, cudaStream_t stream);

/* The slots sorted by expert, stably: counts[E] (=) rows per expert, pos[N k] (=) each
 * slot's row, row_slot[N k] (=) each row's slot. */
cudaError_t sx_moe_permute(int32_t *counts, int32_t *pos, int32_t *row_slot, const int32_t *idx, int N, int k, int E,
                           cudaStream_t stream);

/* The dispatch's gather: xs[r, :] = x[row_slot[r] / k, :] (=) for the N k rows; C % 8 == 0. */
cudaError_t sx_moe_gather(sx_bf16 *xs, const sx_bf16 *x, const int32_t *row_slot, int N, int k, int C,
                          cudaStream_t stream);

/* The combine: out[n, :] = sum_j gate[n k + j] ys[pos[n k + j], :] (=), fp32 sums; gate NULL:
 * 1 (the trainer's, whose experts weighed their rows; and the dispatch's backward); C % 8 == 0.
 * The combine's own backward is the dispatch's gather of dout (sx_moe_gather). */
cudaError_t sx_moe_combine(sx_bf16 *out, const sx_bf16 *ys, const int32_t *pos, const float *gate, int N, int k,
                           int C, cudaStream_t stream);

/* The gates ride with the rows they weigh, into the experts (Megatron-Core's permuted probs, applied in the
 * experts' activation): a row's gate is padded to SX_MOE_GATE_ROW floats (16 bytes), so that the exchange moves
 * gate rows as it moves token rows, and its chunk copy takes them as rows of 8 bf16. */
#define SX_MOE_GATE_ROW 4

/* rows[r SX_MOE_GATE_ROW] = gate[row_slot[r]] (=) for the S = N k sorted rows, the rest of each row 0;
 * rows 16-byte aligned. */
cudaError_t sx_moe_row_gates(float *rows, const float *gate, const int32_t *row_slot, int S, cudaStream_t stream);

/* The way back: dgate[row_slot[r]] = rows[r SX_MOE_GATE_ROW] (=) for the S sorted rows. */
cudaError_t sx_moe_slot_gates(float *dgate, const float *rows, const int32_t *row_slot, int S, cudaStream_t stream);

/* The experts' activation weighted by each row's gate: out[r, f] = w_r silu(h[r, f]) h[r, F + f] (=) for R rows
 * of h[R, 2F] (gate half, then up half), w_r = weight[r SX_MOE_GATE_ROW]; F % 8 == 0.  The down projection is
 * linear, so its output is the gate times the unweighted expert's, and the combine sums rows unweighted. */
cudaError_t sx_moe_swiglu_forward(sx_bf16 *out, const sx_bf16 *h, const float *weight, int R, int F,
                                  cudaStream_t stream);

/* Its backward: dh[R, 2F] (=) the SwiGLU's backward at w_r dout[r, :]; dweight[r SX_MOE_GATE_ROW] (=, fp32)
 * = dout[r, :] . silu(h[r, :F]) h[r, F:], the rest of each row 0; F % 8 == 0.  Under expert TP each rank's is its
 * F shard's part of the dot product. */
cudaError_t sx_moe_swiglu_backward(sx_bf16 *dh, float *dweight, const sx_bf16 *dout, const sx_bf16 *h,
                                   const float *weight, int R, int F, cudaStream_t stream);

/* Rows moved in chunks, one launch for them all: chunk i copies rows[i] rows of C values from src[i]
 * to dst[i] (=; the chunks' destinations do not overlap).  The exchange's chunks between the rank-major
 * rows NCCL moves (one message per peer, as Megatron's all-to-all dispatcher sends them) and the
 * expert-major rows the experts' GEMMs take (validator/moe.c); C % 8 == 0, every pointer 16-byte
 * aligned, at most SX_MOE_CHUNKS_MAX chunks. */
#define SX_MOE_CHUNKS_MAX 64
typedef struct sx_moe_chunks {
    int n;
    int rows[SX_MOE_CHUNKS_MAX];
    const sx_bf16 *src[SX_MOE_CHUNKS_MAX];
    sx_bf16 *dst[SX_MOE_CHUNKS_MAX];
} sx_moe_chunks;
cudaError_t sx_moe_copy_chunks(const sx_moe_chunks *chunks, int C, cudaStream_t stream);

/* The router's backward, dlogits[N, E] (=, bf16 for the router's GEMMs): the top-k softmax's
 * plus, when aux_scale != 0, Switch's auxiliary loss aux_scale sum_e f_e sum_n softmax(z_n)_e
 * with f_e = counts[e] / (N k) held constant.  E <= SX_MOE_ROUTE_EXPERTS_MAX. */
cudaError_t sx_moe_router_backward(sx_bf16 *dlogits, const float *logits, const int32_t *idx, const float *gate,
                                   const float *dgate, const int32_t *counts, float aux_scale, int N, int E, int k,
                                   cudaStream_t stream);

/* -------------------------------------------------------------------- AdamW */

typedef struct sx_adamw_params {
    float lr, beta1, beta2, eps, weight_decay;
    int step;                     /* t >= 1, for bias correction 1 - beta^t */
    float grad_scale;             /* grads are multiplied by this (1 for none) */
    const float *grad_scale_dev;  /* NULL, or a device scalar also multiplied in (clipping) */
} sx_adamw_params;

/* AdamW (decoupled weight decay, PyTorch's formula) over n parameters laid out flat:
 *   g = grad * scale;  m = b1 m + (1-b1) g;  v = b2 v + (1-b2) g^2
 *   p = p - lr * ( (m / (1-b1^t)) / (sqrt(v / (1-b2^t)) + eps) + wd * p )
 * param, m, v: fp32 master state (updated in place); param_bf16: the bf16 copy the
 * forward pass reads (written, round-to-nearest-even), may be NULL.  One launch covers
 * any flat range: put all parameters in one buffer and call once per weight-decay group. */
cudaError_t sx_adamw(float *param, float *m, float *v, sx_bf16 *param_bf16, const sx_bf16 *grad,
                     size_t n, const sx_adamw_params *hp, cudaStream_t stream);
cudaError_t sx_adamw_f32grad(float *param, float *m, float *v, sx_bf16 *param_bf16,
                             const float *grad, size_t n, const sx_adamw_params *hp,
                             cudaStream_t stream);

/* ------------------------------------------------------------- SM clock */

/* *mhz (device memory, fp32) = the SM clock in MHz over the next `window_us`
 * microseconds (1 to 100000, counted at the maximum clock): one thread counts
 * SM cycles against the global timer.  Launched right after a kernel it reads
 * the clock that kernel ran at (the power cap moves it over milliseconds);
 * a window of 100 us or more keeps the timer's granularity (an H100 read 5% high at 50 us) small. */
cudaError_t sx_sm_clock_probe(float *mhz, int window_us, cudaStream_t stream);

/* ------------------------------------------------------------- FP8 (kernels/fp8.cu) */

/* Per-tensor scaled FP8 for the GEMMs of validate --precision fp8 (Transformer Engine's
 * recipe with the current tensor's amax): weights and activations in E4M3 (range 448),
 * gradients in E5M2 (57344).  An sx_fp8 is the raw byte of __nv_fp8_e4m3 or __nv_fp8_e5m2. */
typedef uint8_t sx_fp8;
typedef enum sx_fp8_format { SX_E4M3 = 0, SX_E5M2 = 1 } sx_fp8_format;
#define SX_E4M3_MAX 448.0f
#define SX_E5M2_MAX 57344.0f

/* *amax (device, fp32) = max |x[i]| over n bf16 elements (=).  NaN elements are skipped
 * (fmaxf), an infinity gives infinity. */
cudaError_t sx_fp8_amax(float *amax, const sx_bf16 *x, size_t n, cudaStream_t stream);

/* Casts x [rows, cols] (bf16) to FP8 with the per-tensor scale s = max(fmt) / *amax (1 when
 * *amax is 0, NaN or infinite): out[r, c] = sat(x[r, c] * s) rounded to nearest even (=),
 * and out_t[c, r] the same transposed (=), either may be NULL, not both; *scale_inv = 1 / s
 * (=), the factor the GEMM multiplies the FP8 values by.  Saturation: to +-max(fmt). */
cudaError_t sx_fp8_cast(sx_fp8 *out, sx_fp8 *out_t, float *scale_inv, const sx_bf16 *x, const float *amax,
                        int rows, int cols, sx_fp8_format fmt, cudaStream_t stream);

/* The fused cross-entropy's path, forced for the tests and for the step's SEXTANT_CE_LAYOUT switch (the one
 * tuning knob the validator uses): 4 = the staged fallback (one persistent
 * 1024-thread block per SM with as much of the row as fits staged in shared memory; the default
 * before sm_90 where a row does not fit) even where a row fits, 5 = a cluster of 2, 4 or 8 blocks
 * of 512 threads per row, each holding a slice in shared memory (sm_90; the default where a row
 * does not fit), also where a row fits; 0 and any other value = automatic (two 512-thread blocks
 * per SM with one row buffer each where two rows fit in an SM's shared memory).  The layouts that
 * were measured and not chosen (once 1, 3, 6 and 7) are in dev/cuda/crossentropy.cu. */
void sx_cross_entropy_tune(int layout);

#ifdef __cplusplus
}
#endif

#endif /* SEXTANT_KERNELS_H */
