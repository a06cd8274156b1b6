/* Context parallelism's bookkeeping (validator/cp_ring.c), plain C, no CUDA: which tokens a
 * rank holds, which block of the attention each ring step computes, and the float64
 * reference of the online-softmax merge.  validator/cp.c runs it on the GPU,
 * tests/test_cp_ring.c checks it against whole causal attention.
 *
 * Causal load balancing (Megatron-LM's context parallelism, as planner/oplist.c assumes):
 * each sequence of seq tokens is cut into 2 cp chunks of C = seq / (2 cp); rank r holds
 * chunks r and 2cp-1-r, in that order, as its Tl = 2C rows, so every rank has the same
 * causal work.  Ring step s (0 .. cp-1) brings the K and V of rank src = (r - s) mod cp:
 *   s = 0          the rank's own: causal over its rows (they are in increasing position);
 *   src < r        all Tl queries against src's first chunk (wholly before both of r's);
 *   src > r        r's second chunk against all of src's K, V (both wholly before it; r's
 *                  first chunk precedes both and sees none). */
#ifndef SEXTANT_CP_RING_H
#define SEXTANT_CP_RING_H

#include <stddef.h>
#include <stdint.h>

typedef struct {
    int src;          /* the rank whose K, V the step uses */
    int q0, nq;       /* local query rows [q0, q0 + nq) */
    int k0, nk;       /* rows [k0, k0 + nk) of src's K, V */
    int causal;       /* 1 only for the rank's own block */
} cp_block;

/* Ring step `step` of rank `rank` of cp, chunk C tokens; 0, or -1 on bad arguments. */
int cp_ring_block(int cp, int rank, int step, int chunk, cp_block *b);

/* The position in its sequence of local row t (0 <= t < 2 chunk) of rank `rank`. */
int cp_position(int cp, int rank, int chunk, int t);

/* The rank's rows of B sequences of seq tokens each: dst [B, seq / cp] from src [B, seq]. */
void cp_local_tokens(int32_t *dst, const int32_t *src, int B, int seq, int cp, int rank);

/* The online-softmax merge in float64, one row of width d: (o, lse) holds a partial result
 * normalised over its keys, (o2, lse2) another over other keys; afterwards (o, lse) is the
 * result over both.  lse -inf: no keys yet. */
void cp_merge_row(double *o, double *lse, const double *o2, double lse2, int d);

#endif
