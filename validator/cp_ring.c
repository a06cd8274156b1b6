/* Context parallelism's bookkeeping and float64 merge (validator/cp_ring.h). */
#include "cp_ring.h"

#include <math.h>
#include <string.h>

int cp_ring_block(int cp, int rank, int step, int chunk, cp_block *b)
{
    if (cp < 1 || rank < 0 || rank >= cp || step < 0 || step >= cp || chunk < 1 || !b) return -1;
    int src = (rank - step + cp) % cp;
    b->src = src;
    b->causal = step == 0;
    if (step == 0) {
        b->q0 = 0; b->nq = 2 * chunk; b->k0 = 0; b->nk = 2 * chunk;
    } else if (src < rank) {
        b->q0 = 0; b->nq = 2 * chunk; b->k0 = 0; b->nk = chunk;
    } else {
        b->q0 = chunk; b->nq = chunk; b->k0 = 0; b->nk = 2 * chunk;
    }
    return 0;
}

int cp_position(int cp, int rank, int chunk, int t)
{
    return t < chunk ? rank * chunk + t : (2 * cp - 1 - rank) * chunk + (t - chunk);
}

void cp_local_tokens(int32_t *dst, const int32_t *src, int B, int seq, int cp, int rank)
{
    int chunk = seq / (2 * cp), local = 2 * chunk;
    for (int b = 0; b < B; b++) {
        const int32_t *s = src + (size_t)b * seq;
        int32_t *d = dst + (size_t)b * local;
        memcpy(d, s + (size_t)rank * chunk, (size_t)chunk * sizeof *d);
        memcpy(d + chunk, s + (size_t)(2 * cp - 1 - rank) * chunk, (size_t)chunk * sizeof *d);
    }
}

void cp_merge_row(double *o, double *lse, const double *o2, double lse2, int d)
{
    if (lse2 == -INFINITY) return;
    if (*lse == -INFINITY) {
        memcpy(o, o2, (size_t)d * sizeof *o);
        *lse = lse2;
        return;
    }
    double m = *lse > lse2 ? *lse : lse2;
    double e1 = exp(*lse - m), e2 = exp(lse2 - m), sum = e1 + e2;
    for (int i = 0; i < d; i++) o[i] = (e1 * o[i] + e2 * o2[i]) / sum;
    *lse = m + log(sum);
}
