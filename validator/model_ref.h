/* The float64 CPU reference of the whole model that sextant-gpu train runs
 * (validator/train.c): loss and every parameter gradient of one step, for the
 * GPT-2 family and the dense LLaMA family.
 *
 * Why it exists: it is the oracle against which the GPU trainer's gradients
 * of a tiny model are checked (`sextant-gpu train --check-gradients`, to be
 * wired separately).  The trainer runs bf16 with fp32 accumulation, cuBLAS,
 * cuBLASLt epilogues and our kernels, so a wrong index or transpose there
 * is hard to see in a falling loss; here every op is a plain loop in double
 * precision, and tests/test_model_ref.c checks these gradients against
 * central finite differences of the loss, so the oracle is itself checked.
 *
 * The model, exactly as train.c builds it:
 *   x = WTE[token] (+ WPE[position] with learned positions)
 *   per layer: x += ATTW attention(rope(QKVW norm1(x) + QKVB)) + ATTB
 *              x += PROJW act(FCW norm2(x) + FCB) + PROJB
 *   logits = HEAD normf(x)   (HEAD is WTE when tied; no bias)
 *   loss   = mean over the B*T tokens of cross-entropy over the first V logits
 * - norms: LayerNorm (weight and bias, biased variance) or RMSNorm (weight
 *   only), eps 1e-5;
 * - act: GELU, tanh approximation, or SwiGLU silu(gate) * up, gate = the first
 *   F columns of the up-projection's 2F outputs, up = the next F;
 * - attention: causal, softmax scale 1/sqrt(D); the fused projection's output
 *   columns are [H*D queries | KV*D keys | KV*D values]; query head h reads
 *   key/value head h / (H/KV);
 * - rope (only when `rope`; the identity otherwise): rotary position
 *   embedding as sx_rope_forward (kernels/rope.cu), in place on the fused
 *   projection's output after its bias and before attention, on the H query
 *   heads and the KV key heads (columns [0, (H+KV)D)), not on the values:
 *   "rotate half", element i of a head is paired with element i + D/2 and
 *   the pair (x1, x2) becomes (x1 cos a - x2 sin a, x2 cos a + x1 sin a),
 *   a = t theta^(-2i/D), i < D/2, t the token's position in its sequence;
 *   its backward rotates dq and dk by -a;
 * - the vocabulary V is padded to Vp: the padded rows of WTE and HEAD exist,
 *   the logits over columns >= V are ignored (so their gradients are 0);
 * - weights in PyTorch convention W[out, in], y = x W^T + b;
 * - linear biases only when `bias`; norm biases only with LayerNorm.
 * The loss is in nats. */
#ifndef SEXTANT_MODEL_REF_H
#define SEXTANT_MODEL_REF_H

#include <stddef.h>
#include <stdint.h>

/* L layers, C channels, H query heads of size D, KV key/value heads, F the
 * FFN width (of one half for SwiGLU), V the vocabulary padded to Vp, maxT the
 * position table's rows, B sequences of T tokens.  Flags (0 or not 0): rms
 * (RMSNorm, else LayerNorm), swiglu (else GELU), bias (linear biases),
 * learned_pos (WPE), tied (the head is WTE), rope (rotary positions with
 * base rope_theta; rope_theta is ignored without rope).  rope and
 * rope_theta come last so that initialisers that omit them mean no RoPE. */
typedef struct {
    int L, C, H, KV, D, F, V, Vp, maxT, B, T;
    int rms, swiglu, bias, learned_pos, tied;
    int rope;
    double rope_theta;
} ref_config;

enum { REF_WTE, REF_WPE, REF_LN1W, REF_LN1B, REF_QKVW, REF_QKVB, REF_ATTW, REF_ATTB, REF_LN2W, REF_LN2B, REF_FCW, REF_FCB,
       REF_PROJW, REF_PROJB, REF_LNFW, REF_LNFB, REF_HEAD, REF_COUNT };

/* Element count of tensor `which` (all layers together for per-layer
 * tensors); 0 when the family lacks it, and 0 for a bad config or `which`. */
size_t ref_tensor_size(const ref_config *c, int which);

/* Mean loss over the B*T tokens; grads (same shapes as params; grads == NULL
 * for the loss only) are overwritten.  params[i] and grads[i] point to
 * ref_tensor_size(c, i) doubles (NULL where the size is 0).  Per-layer
 * tensors hold layer 0's block first, then layer 1's, ...  Shapes:
 *   WTE [Vp][C], WPE [maxT][C], LN1W/LN1B/LN2W/LN2B [L][C],
 *   QKVW [L][(H+2KV)D][C], QKVB [L][(H+2KV)D], ATTW [L][C][H*D], ATTB [L][C],
 *   FCW [L][up][C] with up = 2F for SwiGLU (gate rows first) else F, FCB [L][up],
 *   PROJW [L][C][F], PROJB [L][C], LNFW/LNFB [C], HEAD [Vp][C] (untied only).
 * inputs and targets hold B*T tokens, sequence b's token t at b*T + t.
 * Returns NaN, and leaves grads untouched, on bad input: a dimension below 1,
 * H % KV != 0, Vp < V, T > maxT with learned positions, rope with D odd or
 * rope_theta not a finite number > 0, sizes that overflow,
 * a token outside [0, V), a NULL pointer where a tensor has elements, or no
 * memory for the activations. */
double ref_model_loss_grads(const ref_config *c, double *const params[REF_COUNT], double *const grads[REF_COUNT],
                            const int32_t *inputs, const int32_t *targets);

#endif
