/* Context parallelism's ring attention in float64 (validator/cp_ring.c), as validator/cp.c
 * runs it on the GPU: each rank's tokens are chunks r and 2cp-1-r of every sequence, ring
 * step s brings rank (r - s) mod cp's K and V and computes the block cp_ring_block names,
 * the partial results are merged with cp_merge_row, and the backward runs every block from
 * the merged output and log-sum-exp, dK and dV going back to the rank that owns the keys.
 * All of it against whole-sequence causal attention (kernels/reference.c) at the tokens'
 * global positions, for cp = 1, 2, 3 and 4, GQA and MHA, with and without a batch.
 * Also: the blocks of every rank together cover the causal triangle exactly once, and the
 * merge is order-free and exact against one softmax over the union of keys. */
#include "test_util.h"

#include "cp_ring.h"
#include "reference.h"

static double rnd(uint64_t *s)
{
    *s = *s * 6364136223846793005ULL + 1442695040888963407ULL;
    return (double)(*s >> 11) / 9007199254740992.0 * 2.0 - 1.0;
}

typedef struct { int B, T, H, KV, D, cp; } shape;

/* rows of local token t of rank r: its global row in [B, T] */
static size_t global_row(const shape *s, int r, int b, int t)
{
    int chunk = s->T / (2 * s->cp);
    return (size_t)b * s->T + (size_t)cp_position(s->cp, r, chunk, t);
}

/* One block's forward in float64: queries q0.. of rank r against keys k0.. of rank src, all
 * taken from the whole-sequence tensors through the ranks' positions; partial out [nq, D]
 * and lse per query, merged into (o, lse) of the rank. */
static void block_forward(const shape *s, int r, const cp_block *blk, const double *q, const double *k,
                          const double *v, double *o, double *lse, double scale)
{
    int Tl = s->T / s->cp, G = s->H / s->KV, D = s->D;
    double *sc = malloc((size_t)blk->nk * sizeof *sc), *part = malloc((size_t)D * sizeof *part);
    for (int b = 0; b < s->B; b++)
        for (int h = 0; h < s->H; h++)
            for (int i = blk->q0; i < blk->q0 + blk->nq; i++) {
                const double *qi = q + global_row(s, r, b, i) * s->H * D + (size_t)h * D;
                double m = -INFINITY;
                for (int j = 0; j < blk->nk; j++) {
                    int kj = blk->k0 + j;
                    sc[j] = -INFINITY;
                    if (blk->causal && kj > i) continue;
                    const double *kr = k + global_row(s, blk->src, b, kj) * s->KV * D + (size_t)(h / G) * D;
                    double dot = 0;
                    for (int d = 0; d < D; d++) dot += qi[d] * kr[d];
                    sc[j] = dot * scale;
                    if (sc[j] > m) m = sc[j];
                }
                double sum = 0;
                memset(part, 0, (size_t)D * sizeof *part);
                for (int j = 0; j < blk->nk; j++) {
                    if (sc[j] == -INFINITY) continue;
                    double p = exp(sc[j] - m);
                    sum += p;
                    const double *vr = v + global_row(s, blk->src, b, blk->k0 + j) * s->KV * D + (size_t)(h / G) * D;
                    for (int d = 0; d < D; d++) part[d] += p * vr[d];
                }
                for (int d = 0; d < D; d++) part[d] /= sum;
                size_t at = ((size_t)b * Tl + i) * s->H + h;
                cp_merge_row(o + at * D, lse + at, part, m + log(sum), D);
            }
    free(sc);
    free(part);
}

/* One block's backward from rank r's merged out and lse: dq of r's rows += , dk and dv of
 * src's rows += (what the ring sends back), all in whole-sequence layout. */
static void block_backward(const shape *s, int r, const cp_block *blk, const double *q, const double *k,
                           const double *v, const double *o, const double *lse, const double *dout, double *dq,
                           double *dk, double *dv, double scale)
{
    int Tl = s->T / s->cp, G = s->H / s->KV, D = s->D;
    for (int b = 0; b < s->B; b++)
        for (int h = 0; h < s->H; h++)
            for (int i = blk->q0; i < blk->q0 + blk->nq; i++) {
                size_t gi = global_row(s, r, b, i), at = ((size_t)b * Tl + i) * s->H + h;
                const double *qi = q + gi * s->H * D + (size_t)h * D, *doi = dout + gi * s->H * D + (size_t)h * D;
                double Di = 0;
                for (int d = 0; d < D; d++) Di += doi[d] * o[at * D + d];
                for (int j = 0; j < blk->nk; j++) {
                    int kj = blk->k0 + j;
                    if (blk->causal && kj > i) continue;
                    size_t gj = global_row(s, blk->src, b, kj);
                    const double *kr = k + gj * s->KV * D + (size_t)(h / G) * D;
                    const double *vr = v + gj * s->KV * D + (size_t)(h / G) * D;
                    double dot = 0, dp = 0;
                    for (int d = 0; d < D; d++) { dot += qi[d] * kr[d]; dp += doi[d] * vr[d]; }
                    double p = exp(dot * scale - lse[at]), ds = p * (dp - Di);
                    for (int d = 0; d < D; d++) {
                        dq[gi * s->H * D + (size_t)h * D + d] += scale * ds * kr[d];
                        dk[gj * s->KV * D + (size_t)(h / G) * D + d] += scale * ds * qi[d];
                        dv[gj * s->KV * D + (size_t)(h / G) * D + d] += p * doi[d];
                    }
                }
            }
}

static double max_abs_diff(const double *a, const double *b, size_t n)
{
    double w = 0;
    for (size_t i = 0; i < n; i++)
        if (fabs(a[i] - b[i]) > w || isnan(a[i] - b[i])) w = isnan(a[i] - b[i]) ? INFINITY : fabs(a[i] - b[i]);
    return w;
}

static void ring_equals_whole(const shape *s)
{
    int T = s->T, H = s->H, KV = s->KV, D = s->D, Tl = T / s->cp;
    size_t nq = (size_t)s->B * T * H * D, nkv = (size_t)s->B * T * KV * D;
    double scale = 1.0 / sqrt((double)D);
    uint64_t seed = 1234 + (uint64_t)s->cp;
    double *q = malloc(nq * sizeof *q), *k = malloc(nkv * sizeof *k), *v = malloc(nkv * sizeof *v);
    double *dout = malloc(nq * sizeof *dout);
    for (size_t i = 0; i < nq; i++) { q[i] = rnd(&seed); dout[i] = rnd(&seed); }
    for (size_t i = 0; i < nkv; i++) { k[i] = rnd(&seed); v[i] = rnd(&seed); }
    double *out = malloc(nq * sizeof *out), *lse = malloc((size_t)s->B * H * T * sizeof *lse);
    ref_attention_forward(out, lse, q, k, v, s->B, T, H, KV, D, (size_t)H * D, (size_t)KV * D, scale);
    double *dq = calloc(nq, sizeof *dq), *dk = calloc(nkv, sizeof *dk), *dv = calloc(nkv, sizeof *dv);
    ref_attention_backward(dq, dk, dv, dout, q, k, v, s->B, T, H, KV, D, (size_t)H * D, (size_t)KV * D, scale);

    /* the ring: every rank's forward, then every rank's backward */
    int chunk = T / (2 * s->cp);
    size_t local = (size_t)s->B * Tl * H;
    double *ro = malloc((size_t)s->cp * local * D * sizeof *ro), *rl = malloc((size_t)s->cp * local * sizeof *rl);
    for (size_t i = 0; i < (size_t)s->cp * local; i++) rl[i] = -INFINITY;
    for (int r = 0; r < s->cp; r++)
        for (int step = 0; step < s->cp; step++) {
            cp_block blk;
            assert_int_equal(cp_ring_block(s->cp, r, step, chunk, &blk), 0);
            block_forward(s, r, &blk, q, k, v, ro + (size_t)r * local * D, rl + (size_t)r * local, scale);
        }
    double worst_o = 0, worst_l = 0;
    for (int r = 0; r < s->cp; r++)
        for (int b = 0; b < s->B; b++)
            for (int t = 0; t < Tl; t++)
                for (int h = 0; h < H; h++) {
                    size_t g = global_row(s, r, b, t), at = (size_t)r * local + ((size_t)b * Tl + t) * H + h;
                    double d = max_abs_diff(ro + at * D, out + (g * H + h) * D, (size_t)D);
                    if (d > worst_o) worst_o = d;
                    double dl = fabs(rl[at] - lse[((size_t)b * H + h) * T + g % T]);
                    if (dl > worst_l) worst_l = dl;
                }
    double *gq = calloc(nq, sizeof *gq), *gk = calloc(nkv, sizeof *gk), *gv = calloc(nkv, sizeof *gv);
    for (int r = 0; r < s->cp; r++)
        for (int step = 0; step < s->cp; step++) {
            cp_block blk;
            assert_int_equal(cp_ring_block(s->cp, r, step, chunk, &blk), 0);
            block_backward(s, r, &blk, q, k, v, ro + (size_t)r * local * D, rl + (size_t)r * local, dout, gq, gk, gv,
                           scale);
        }
    double worst_g = fmax(max_abs_diff(gq, dq, nq), fmax(max_abs_diff(gk, dk, nkv), max_abs_diff(gv, dv, nkv)));
    if (worst_o > 1e-12 || worst_l > 1e-12 || worst_g > 1e-12) {
        print_error("cp %d B %d T %d H %d KV %d: |out - whole| %.3g, |lse - whole| %.3g, |grads - whole| %.3g\n", s->cp,
                    s->B, T, H, KV, worst_o, worst_l, worst_g);
        fail();
    }
    free(q); free(k); free(v); free(dout); free(out); free(lse); free(dq); free(dk); free(dv);
    free(ro); free(rl); free(gq); free(gk); free(gv);
}

static void ring_attention_equals_causal(void **state)
{
    (void)state;
    static const shape shapes[] = {
        {1, 8, 2, 2, 4, 1}, {2, 12, 4, 2, 8, 2}, {1, 8, 2, 1, 4, 2}, {2, 18, 4, 4, 8, 3}, {1, 32, 2, 1, 6, 4}};
    for (size_t i = 0; i < sizeof shapes / sizeof shapes[0]; i++) ring_equals_whole(&shapes[i]);
}

/* Every (query, key) pair with key <= query in position is computed by exactly one block of
 * one rank, and no other pair is. */
static void blocks_cover_the_triangle_once(void **state)
{
    (void)state;
    for (int cp = 1; cp <= 8; cp++) {
        int chunk = 3, T = 2 * cp * chunk, Tl = 2 * chunk;
        int *seen = calloc((size_t)T * T, sizeof *seen);
        long work[8] = {0};
        for (int r = 0; r < cp; r++)
            for (int step = 0; step < cp; step++) {
                cp_block b;
                assert_int_equal(cp_ring_block(cp, r, step, chunk, &b), 0);
                assert_true(b.q0 >= 0 && b.q0 + b.nq <= Tl && b.k0 >= 0 && b.k0 + b.nk <= Tl);
                for (int i = b.q0; i < b.q0 + b.nq; i++)
                    for (int j = b.k0; j < b.k0 + b.nk; j++) {
                        if (b.causal && j > i) continue;
                        int pq = cp_position(cp, r, chunk, i), pk = cp_position(cp, b.src, chunk, j);
                        seen[pq * T + pk]++;
                        work[r]++;
                    }
            }
        for (int i = 0; i < T; i++)
            for (int j = 0; j < T; j++)
                if (seen[i * T + j] != (j <= i)) {
                    print_error("cp %d: pair (query %d, key %d) computed %d times\n", cp, i, j, seen[i * T + j]);
                    fail();
                }
        /* causal load balancing: every rank the same number of pairs */
        for (int r = 1; r < cp; r++) assert_int_equal(work[r], work[0]);
        free(seen);
    }
    cp_block b;
    assert_int_equal(cp_ring_block(2, 2, 0, 4, &b), -1);
    assert_int_equal(cp_ring_block(2, 0, 2, 4, &b), -1);
    assert_int_equal(cp_ring_block(0, 0, 0, 4, &b), -1);
}

/* cp_local_tokens puts rank r's two chunks of each sequence side by side */
static void local_tokens(void **state)
{
    (void)state;
    int32_t src[2 * 16], dst[2 * 8];
    for (int i = 0; i < 32; i++) src[i] = i;
    for (int r = 0; r < 2; r++) {
        cp_local_tokens(dst, src, 2, 16, 2, r);
        for (int b = 0; b < 2; b++)
            for (int t = 0; t < 8; t++) assert_int_equal(dst[b * 8 + t], b * 16 + cp_position(2, r, 4, t));
    }
}

/* Merging A then B, or B then A, equals one softmax over both key sets. */
static void merge_is_one_softmax(void **state)
{
    (void)state;
    double s[6] = {0.3, -1.2, 2.5, 0.1, 40.0, -3.0}, vals[6][2] = {{1, 2}, {3, -1}, {0.5, 0.5}, {-2, 4}, {1, 1}, {7, 0}};
    double m = -INFINITY, sum = 0, whole[2] = {0, 0};
    for (int j = 0; j < 6; j++) m = fmax(m, s[j]);
    for (int j = 0; j < 6; j++) {
        sum += exp(s[j] - m);
        whole[0] += exp(s[j] - m) * vals[j][0];
        whole[1] += exp(s[j] - m) * vals[j][1];
    }
    whole[0] /= sum;
    whole[1] /= sum;
    double lse_whole = m + log(sum);
    /* partials over keys {0,1,2} and {3,4,5} */
    double o[2][2] = {{0, 0}, {0, 0}}, l[2];
    for (int part = 0; part < 2; part++) {
        double pm = -INFINITY, ps = 0;
        for (int j = 3 * part; j < 3 * part + 3; j++) pm = fmax(pm, s[j]);
        for (int j = 3 * part; j < 3 * part + 3; j++) {
            ps += exp(s[j] - pm);
            o[part][0] += exp(s[j] - pm) * vals[j][0];
            o[part][1] += exp(s[j] - pm) * vals[j][1];
        }
        o[part][0] /= ps;
        o[part][1] /= ps;
        l[part] = pm + log(ps);
    }
    for (int order = 0; order < 2; order++) {
        double acc[2] = {0, 0}, lse = -INFINITY;
        cp_merge_row(acc, &lse, o[order], l[order], 2);
        cp_merge_row(acc, &lse, o[1 - order], l[1 - order], 2);
        assert_close(acc[0], whole[0], 1e-14);
        assert_close(acc[1], whole[1], 1e-14);
        assert_close(lse, lse_whole, 1e-14);
    }
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(ring_attention_equals_causal),
        cmocka_unit_test(blocks_cover_the_triangle_once),
        cmocka_unit_test(local_tokens),
        cmocka_unit_test(merge_is_one_softmax),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
