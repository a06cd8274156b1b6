/* A MoE layer's routing and token exchange (validator/moe_plan.c), checked from first
 * principles rather than against stored numbers:
 *  - top-k: the picks are the k largest logits, in decreasing order, ties to the lower
 *    index, and the gates are the softmax of the picked logits;
 *  - the permutation is a bijection, sorted by expert and stable, and the combine with
 *    gates 1 after the dispatch gives k times each token back;
 *  - an exchange over ep simulated ranks (chunks copied as the plan says, each expert
 *    an affine map of its own) gives every token the same output as one rank holding
 *    all the experts, and the imbalance is the busiest rank's rows over the mean;
 *  - the router's backward and the experts' gate-weighted SwiGLU's against central finite
 *    differences of a loss through route, dispatch, experts, the weighted SwiGLU and the
 *    combine, the auxiliary loss included. */
#include "test_util.h"

#include <math.h>
#include <stdlib.h>
#include <string.h>

#include "moe_plan.h"

static uint64_t seed = 12345;
static double uniform(void)
{
    seed = seed * 6364136223846793005ULL + 1442695040888963407ULL;
    return (double)(seed >> 11) / 9007199254740992.0;
}

static void random_logits(double *z, int n)
{
    for (int i = 0; i < n; i++) z[i] = 4.0 * uniform() - 2.0;
}

static void topk_picks_largest(void **state)
{
    (void)state;
    enum { N = 64, E = 8, K = 3 };
    double z[N * E], gate[N * K];
    int idx[N * K];
    random_logits(z, N * E);
    z[5 * E + 2] = z[5 * E + 6] = 9.0;   /* a tie: the lower index first */
    assert_int_equal(moe_ref_route(z, N, E, K, idx, gate), 0);
    assert_int_equal(idx[5 * K], 2);
    assert_int_equal(idx[5 * K + 1], 6);
    for (int n = 0; n < N; n++) {
        const double *row = z + n * E;
        double sum = 0.0;
        for (int j = 0; j < K; j++) {
            int e = idx[n * K + j];
            /* exactly j logits lie above the j-th pick */
            int above = 0;
            for (int f = 0; f < E; f++) above += row[f] > row[e] || (row[f] == row[e] && f < e);
            assert_int_equal(above, j);
            sum += gate[n * K + j];
            if (j > 0) {
                double ratio = gate[n * K + j] / gate[n * K];
                assert_close(ratio, exp(row[e] - row[idx[n * K]]), 1e-12);
            }
        }
        assert_close(sum, 1.0, 1e-12);
    }
    assert_int_equal(moe_ref_route(z, N, E, E + 1, idx, gate), -1);
    assert_int_equal(moe_ref_route(z, N, MOE_EXPERTS_MAX + 1, 2, idx, gate), -1);
}

static void permutation_is_stable_bijection(void **state)
{
    (void)state;
    enum { N = 50, E = 8, K = 2, C = 3 };
    double z[N * E], gate[N * K], x[N * C], xs[N * K * C], out[N * C];
    int idx[N * K], counts[E], pos[N * K], row_slot[N * K];
    random_logits(z, N * E);
    for (int i = 0; i < N * C; i++) x[i] = uniform();
    assert_int_equal(moe_ref_route(z, N, E, K, idx, gate), 0);
    assert_int_equal(moe_ref_permute(idx, N, K, E, counts, pos, row_slot), 0);
    int total = 0;
    for (int e = 0; e < E; e++) total += counts[e];
    assert_int_equal(total, N * K);
    for (int s = 0; s < N * K; s++) assert_int_equal(row_slot[pos[s]], s);
    for (int r = 1; r < N * K; r++) {
        int a = row_slot[r - 1], b = row_slot[r];
        assert_true(idx[a] < idx[b] || (idx[a] == idx[b] && a < b));
    }
    moe_ref_dispatch(x, N, C, K, row_slot, xs);
    moe_ref_combine(xs, N, C, K, pos, NULL, out);
    for (int i = 0; i < N * C; i++) assert_close(out[i], K * x[i], 1e-12);
    int bad[2] = {0, E};
    assert_int_equal(moe_ref_permute(bad, 1, 2, E, counts, pos, row_slot), -1);
}

/* expert e's stand-in: y = (e + 1) x + e */
static void expert_apply(double *rows, int n, int C, int e)
{
    for (int i = 0; i < n * C; i++) rows[i] = (e + 1) * rows[i] + e;
}

/* every rank's combine of ys (its sorted rows' outputs) against the k experts applied to its own tokens */
static void combine_matches_experts(int ranks, int N, int C, int K, const double *ys, const int *pos, const double *gate,
                                    const int *idx, const double *x)
{
    double *out = malloc(sizeof(double) * N * C);
    assert_non_null(out);
    for (int q = 0; q < ranks; q++) {
        moe_ref_combine(ys + q * N * K * C, N, C, K, pos + q * N * K, gate + q * N * K, out);
        for (int n = 0; n < N; n++)
            for (int c = 0; c < C; c++) {
                double want = 0.0;
                for (int j = 0; j < K; j++) {
                    int e = idx[q * N * K + n * K + j];
                    want += gate[q * N * K + n * K + j] * ((e + 1) * x[(q * N + n) * C + c] + e);
                }
                assert_close(out[n * C + c], want, 1e-12);
            }
    }
    free(out);
}

/* ep ranks of N tokens each: dispatch, experts, combine through the exchange plan, against
 * one rank applying every expert to its own tokens. */
static void exchange_matches_one_rank(int ep, int E, int K)
{
    enum { N = 40, C = 4 };
    double *z = malloc(sizeof(double) * ep * N * E), *gate = malloc(sizeof(double) * ep * N * K);
    double *x = malloc(sizeof(double) * ep * N * C), *xs = malloc(sizeof(double) * ep * N * K * C);
    double *ys = malloc(sizeof(double) * ep * N * K * C);
    int *idx = malloc(sizeof(int) * ep * N * K), *counts = malloc(sizeof(int) * ep * E);
    int *pos = malloc(sizeof(int) * ep * N * K), *row_slot = malloc(sizeof(int) * ep * N * K);
    moe_exchange *plan = malloc(sizeof(moe_exchange) * ep);
    assert_non_null(plan);
    random_logits(z, ep * N * E);
    for (int i = 0; i < ep * N * C; i++) x[i] = uniform();
    for (int q = 0; q < ep; q++) {
        assert_int_equal(moe_ref_route(z + q * N * E, N, E, K, idx + q * N * K, gate + q * N * K), 0);
        assert_int_equal(moe_ref_permute(idx + q * N * K, N, K, E, counts + q * E, pos + q * N * K, row_slot + q * N * K), 0);
        moe_ref_dispatch(x + q * N * C, N, C, K, row_slot + q * N * K, xs + q * N * K * C);
    }
    for (int q = 0; q < ep; q++) assert_int_equal(moe_exchange_plan(counts, ep, E, q, &plan[q]), 0);
    const int local = E / ep;
    /* the rows each rank receives, expert-major; the experts; the way back */
    double most = 0.0;
    double *received = malloc(sizeof(double) * ep * ep * N * K * C);
    for (int q = 0; q < ep; q++) {
        double *buf = received + (size_t)q * ep * N * K * C;
        for (int p = 0; p < ep; p++)
            for (int e = 0; e < local; e++) {
                int c = p * local + e, back = q * local + e;
                assert_int_equal(plan[q].recv_rows[c], plan[p].send_rows[back]);
                memcpy(buf + (size_t)plan[q].recv_offset[c] * C, xs + ((size_t)p * N * K + plan[p].send_offset[back]) * C,
                       sizeof(double) * plan[q].recv_rows[c] * C);
            }
        for (int e = 0; e < local; e++)
            expert_apply(buf + (size_t)plan[q].expert_offset[e] * C, plan[q].expert_rows[e], C, q * local + e);
        most = plan[q].rows_in > most ? plan[q].rows_in : most;
    }
    for (int q = 0; q < ep; q++) {
        const double *buf = received + (size_t)q * ep * N * K * C;
        for (int p = 0; p < ep; p++)
            for (int e = 0; e < local; e++) {
                int c = p * local + e, back = q * local + e;
                memcpy(ys + ((size_t)p * N * K + plan[p].send_offset[back]) * C, buf + (size_t)plan[q].recv_offset[c] * C,
                       sizeof(double) * plan[q].recv_rows[c] * C);
            }
    }
    for (int q = 0; q < ep; q++) assert_close(plan[q].imbalance, most / (N * K), 1e-12);
    combine_matches_experts(ep, N, C, K, ys, pos, gate, idx, x);
    free(received); free(z); free(gate); free(x); free(xs); free(ys);
    free(idx); free(counts); free(pos); free(row_slot); free(plan);
}

static void exchange_two_and_four_ranks(void **state)
{
    (void)state;
    exchange_matches_one_rank(1, 8, 2);
    exchange_matches_one_rank(2, 8, 2);
    exchange_matches_one_rank(4, 8, 2);
    exchange_matches_one_rank(2, 4, 4);   /* every token to every expert */
    moe_exchange x;
    int counts[16] = {0};
    assert_int_equal(moe_exchange_plan(counts, 3, 8, 0, &x), -1);   /* 3 does not divide 8 */
    assert_int_equal(moe_exchange_plan(counts, 2, 8, 2, &x), -1);
    assert_int_equal(moe_exchange_plan(counts, 2, 8, 1, &x), 0);
    assert_close(x.imbalance, 1.0, 0);                                  /* nothing routed */
}

/* tp ranks of N tokens each, every expert split over the tp ranks by its width (slice r of expert e gives
 * ((e + 1) x + e) / tp, the slices summing to the expert): each rank's rows gathered to every rank through the
 * gather plan, every slice run there, the partial sums sent back and added, against one rank applying every
 * expert to its own tokens. */
static void gather_matches_one_rank(int tp, int E, int K)
{
    enum { N = 30, C = 3 };
    double *z = malloc(sizeof(double) * tp * N * E), *gate = malloc(sizeof(double) * tp * N * K);
    double *x = malloc(sizeof(double) * tp * N * C), *xs = malloc(sizeof(double) * tp * N * K * C);
    double *ys = calloc((size_t)tp * N * K * C, sizeof(double));
    double *rows = malloc(sizeof(double) * tp * N * K * C);
    int *idx = malloc(sizeof(int) * tp * N * K), *counts = malloc(sizeof(int) * tp * E);
    int *pos = malloc(sizeof(int) * tp * N * K), *row_slot = malloc(sizeof(int) * tp * N * K);
    moe_exchange *plan = malloc(sizeof(moe_exchange) * tp);
    assert_non_null(plan);
    random_logits(z, tp * N * E);
    for (int i = 0; i < tp * N * C; i++) x[i] = uniform();
    for (int q = 0; q < tp; q++) {
        assert_int_equal(moe_ref_route(z + q * N * E, N, E, K, idx + q * N * K, gate + q * N * K), 0);
        assert_int_equal(moe_ref_permute(idx + q * N * K, N, K, E, counts + q * E, pos + q * N * K, row_slot + q * N * K), 0);
        moe_ref_dispatch(x + q * N * C, N, C, K, row_slot + q * N * K, xs + q * N * K * C);
    }
    for (int q = 0; q < tp; q++) assert_int_equal(moe_gather_plan(counts, tp, E, q, &plan[q]), 0);
    for (int q = 0; q < tp; q++) {
        assert_int_equal(plan[q].rows_in, tp * N * K);
        assert_close(plan[q].imbalance, 1.0, 0);
        /* every rank's rows, expert-major; this rank's slice of every expert */
        for (int p = 0; p < tp; p++)
            for (int e = 0; e < E; e++) {
                int c = p * E + e;
                assert_int_equal(plan[q].recv_rows[c], plan[p].send_rows[q * E + e]);
                memcpy(rows + (size_t)plan[q].recv_offset[c] * C, xs + ((size_t)p * N * K + plan[p].send_offset[q * E + e]) * C,
                       sizeof(double) * plan[q].recv_rows[c] * C);
            }
        for (int e = 0; e < E; e++) {
            double *r = rows + (size_t)plan[q].expert_offset[e] * C;
            expert_apply(r, plan[q].expert_rows[e], C, e);
            for (int i = 0; i < plan[q].expert_rows[e] * C; i++) r[i] /= tp;
        }
        /* the way back: each rank's rows get rank q's partial sums added */
        for (int p = 0; p < tp; p++)
            for (int e = 0; e < E; e++) {
                int c = p * E + e;
                double *dst = ys + ((size_t)p * N * K + plan[p].send_offset[q * E + e]) * C;
                const double *src = rows + (size_t)plan[q].recv_offset[c] * C;
                for (int i = 0; i < plan[q].recv_rows[c] * C; i++) dst[i] += src[i];
            }
    }
    combine_matches_experts(tp, N, C, K, ys, pos, gate, idx, x);
    free(z); free(gate); free(x); free(xs); free(ys); free(rows);
    free(idx); free(counts); free(pos); free(row_slot); free(plan);
}

static void gather_two_and_four_ranks(void **state)
{
    (void)state;
    gather_matches_one_rank(1, 8, 2);
    gather_matches_one_rank(2, 8, 2);
    gather_matches_one_rank(4, 6, 3);
    moe_exchange x;
    int counts[16] = {0};
    assert_int_equal(moe_gather_plan(counts, 2, 8, 2, &x), -1);   /* no rank 2 of 2 */
    assert_int_equal(moe_gather_plan(counts, MOE_EP_MAX + 1, 1, 0, &x), -1);
}

/* L = sum_n w[n] . combine(swiglu_g(expert(dispatch(x))))[n] + aux, as a function of the logits (the top-k set
 * held where the finite difference does not cross a tie): each routed row through its expert's affine map, then
 * the SwiGLU weighted by the row's gate (Megatron-Core's weighted activation), then the combine unweighted. */
enum { FN = 6, FE = 5, FK = 2, FF = 2, FC = 2 * FF };
static double fd_x[FN * FC], fd_w[FN * FF];
static const double fd_aux = 0.7;

/* the sorted rows' gates and their expert rows h[FN FK, 2 FF] */
static void expert_rows(const double *z, int *idx, double *gate, int *counts, int *pos, int *row_slot, double *row_gate,
                        double *h)
{
    moe_ref_route(z, FN, FE, FK, idx, gate);
    moe_ref_permute(idx, FN, FK, FE, counts, pos, row_slot);
    moe_ref_dispatch(fd_x, FN, FC, FK, row_slot, h);
    for (int r = 0; r < FN * FK; r++) {
        expert_apply(h + r * FC, 1, FC, idx[row_slot[r]]);
        row_gate[r] = gate[row_slot[r]];
    }
}

static double loss_of(const double *z, const int *fixed_counts)
{
    int idx[FN * FK], counts[FE], pos[FN * FK], row_slot[FN * FK];
    double gate[FN * FK], row_gate[FN * FK], h[FN * FK * FC], act[FN * FK * FF], out[FN * FF];
    expert_rows(z, idx, gate, counts, pos, row_slot, row_gate, h);
    moe_ref_swiglu(h, row_gate, FN * FK, FF, act);
    moe_ref_combine(act, FN, FF, FK, pos, NULL, out);
    double L = 0.0;
    for (int i = 0; i < FN * FF; i++) L += fd_w[i] * out[i];
    /* Switch's auxiliary loss with f held at the unperturbed counts */
    for (int n = 0; n < FN; n++) {
        const double *row = z + n * FE;
        double top = row[0], sum = 0.0;
        for (int e = 1; e < FE; e++) top = row[e] > top ? row[e] : top;
        for (int e = 0; e < FE; e++) sum += exp(row[e] - top);
        for (int e = 0; e < FE; e++) L += fd_aux * fixed_counts[e] / (double)(FN * FK) * exp(row[e] - top) / sum;
    }
    return L;
}

/* The gates' gradient reaches the router through the weighted SwiGLU's backward (the combine's backward is the
 * dispatch's gather of the output's gradient), and matches central differences of the loss in the logits. */
static void router_backward_finite_differences(void **state)
{
    (void)state;
    double z[FN * FE], gate[FN * FK], row_gate[FN * FK], h[FN * FK * FC], drows[FN * FK * FF], dh[FN * FK * FC];
    double drow_gate[FN * FK], dgate[FN * FK], dz[FN * FE];
    int idx[FN * FK], counts[FE], pos[FN * FK], row_slot[FN * FK];
    random_logits(z, FN * FE);
    for (int i = 0; i < FN * FC; i++) fd_x[i] = uniform();
    for (int i = 0; i < FN * FF; i++) fd_w[i] = uniform() - 0.5;
    expert_rows(z, idx, gate, counts, pos, row_slot, row_gate, h);
    moe_ref_dispatch(fd_w, FN, FF, FK, row_slot, drows);
    moe_ref_swiglu_backward(drows, h, row_gate, FN * FK, FF, dh, drow_gate);
    for (int r = 0; r < FN * FK; r++) dgate[row_slot[r]] = drow_gate[r];
    moe_ref_router_backward(z, idx, gate, dgate, counts, fd_aux, FN, FE, FK, dz);
    const double step = 1e-6;
    for (int i = 0; i < FN * FE; i++) {
        double keep = z[i];
        z[i] = keep + step;
        double up = loss_of(z, counts);
        z[i] = keep - step;
        double down = loss_of(z, counts);
        z[i] = keep;
        assert_close(dz[i], (up - down) / (2 * step), 1e-6);
    }
}

/* The weighted SwiGLU's input gradient against central differences of sum dout . swiglu_w(h), and its weight
 * gradient against the unweighted activation's dot product with dout. */
static void weighted_swiglu_finite_differences(void **state)
{
    (void)state;
    enum { R = 5, F = 3 };
    double h[R * 2 * F], w[R], dout[R * F], out[R * F], dh[R * 2 * F], dw[R], plain[R * F];
    for (int i = 0; i < R * 2 * F; i++) h[i] = 4.0 * uniform() - 2.0;
    for (int r = 0; r < R; r++) w[r] = uniform();
    for (int i = 0; i < R * F; i++) dout[i] = uniform() - 0.5;
    moe_ref_swiglu_backward(dout, h, w, R, F, dh, dw);
    const double step = 1e-6;
    for (int i = 0; i < R * 2 * F; i++) {
        double keep = h[i], L[2];
        for (int side = 0; side < 2; side++) {
            h[i] = keep + (side ? -step : step);
            moe_ref_swiglu(h, w, R, F, out);
            L[side] = 0.0;
            for (int j = 0; j < R * F; j++) L[side] += dout[j] * out[j];
        }
        h[i] = keep;
        assert_close(dh[i], (L[0] - L[1]) / (2 * step), 1e-5);
    }
    moe_ref_swiglu(h, NULL, R, F, plain);
    for (int r = 0; r < R; r++) {
        double dot = 0.0;
        for (int f = 0; f < F; f++) dot += dout[r * F + f] * plain[r * F + f];
        assert_close(dw[r], dot, 1e-12);
        for (int f = 0; f < F; f++) {
            moe_ref_swiglu(h, w, R, F, out);
            assert_close(out[r * F + f], w[r] * plain[r * F + f], 1e-12);
        }
    }
}

/* ZeRO's shards of the MoE parameters (moe_plan.h): over every rank of a data-parallel group of dp with ep, each
 * element of the routers lies in exactly one rank's router slice, each element of a layer's experts in exactly one
 * slice of each expert-data-parallel group (the ranks of one EP place); the kept counts are the stage's; and
 * moe_shard_take hands each rank its own elements of the whole layout. */
static void shards_cover_the_layout_once(int stage, int dp, int ep, int L, size_t router_layer, size_t expert_layer)
{
    moe_shards s0;
    assert_int_equal(moe_shard_plan(L, router_layer, expert_layer, stage, dp, 0, ep, &s0), 0);
    size_t whole = s0.router_count + (size_t)L * s0.expert_stride;
    assert_true(s0.router_count >= (size_t)L * router_layer && s0.expert_stride >= expert_layer);
    int *router_hits = calloc(s0.router_count, sizeof *router_hits);
    int *expert_hits = calloc((size_t)ep * s0.expert_stride, sizeof *expert_hits);
    float *all = malloc(whole * sizeof *all), *part = malloc(whole * sizeof *part);
    assert_non_null(router_hits);
    assert_non_null(expert_hits);
    assert_non_null(all);
    assert_non_null(part);
    for (size_t i = 0; i < whole; i++) all[i] = (float)i;
    for (int r = 0; r < dp; r++) {
        moe_shards s;
        assert_int_equal(moe_shard_plan(L, router_layer, expert_layer, stage, dp, r, ep, &s), 0);
        assert_int_equal(s.router_count, s0.router_count);
        assert_int_equal(s.expert_stride, s0.expert_stride);
        assert_int_equal(s.edp, dp / ep);
        assert_int_equal(s.edp_rank, r / ep);
        for (size_t i = 0; i < s.router_slice; i++) router_hits[s.router_at + i]++;
        for (size_t i = 0; i < s.expert_slice; i++) expert_hits[(size_t)(r % ep) * s.expert_stride + s.expert_at + i]++;
        /* the state: the router slice, then each layer's experts' slice, as moe_step's AdamW walks them */
        moe_shard_take(&s, L, all, part, 0);
        assert_int_equal(s.state_count, s.router_slice + (size_t)L * s.expert_slice);
        for (size_t i = 0; i < s.router_slice; i++) assert_true(part[i] == (float)(s.router_at + i));
        for (int l = 0; l < L; l++)
            for (size_t i = 0; i < s.expert_slice; i++)
                assert_true(part[s.router_slice + (size_t)l * s.expert_slice + i] ==
                            (float)(s.router_count + (size_t)l * s.expert_stride + s.expert_at + i));
        /* the 16-bit parameters: whole, but for ZeRO-3's experts, sliced */
        moe_shard_take(&s, L, all, part, 1);
        for (size_t i = 0; i < s.router_count; i++) assert_true(part[i] == (float)i);
        int sliced = s.experts_zero && s.stage == 3;
        size_t per = sliced ? s.expert_slice : s.expert_stride;
        assert_int_equal(s.param_count, s.router_count + (size_t)L * per);
        for (int l = 0; l < L; l++)
            for (size_t i = 0; i < per; i++)
                assert_true(part[s.router_count + (size_t)l * per + i] ==
                            (float)(s.router_count + (size_t)l * s.expert_stride + (sliced ? s.expert_at : 0) + i));
        assert_int_equal(s.grad_count, s.router_count + (size_t)L * (s.experts_zero ? s.expert_slice : s.expert_stride));
        /* what is sharded at which stage */
        assert_int_equal(s.stage, dp > 1 ? stage : 0);
        assert_int_equal(s.router_sharded, dp > 1 && stage >= 1);
        assert_int_equal(s.experts_sharded, dp > 1 && stage >= 1 && dp / ep > 1);
        assert_int_equal(s.experts_zero, dp > 1 && stage >= 2 && dp / ep > 1);
        if (s.router_sharded) assert_int_equal(s.router_slice * (size_t)dp, s.router_count);
        if (s.experts_sharded) assert_int_equal(s.expert_slice * (size_t)s.edp, s.expert_stride);
        if (s.router_sharded) assert_int_equal(s.router_slice % 8, 0);
        if (s.experts_sharded) assert_int_equal(s.expert_slice % 8, 0);
    }
    for (size_t i = 0; i < s0.router_count; i++) assert_int_equal(router_hits[i], s0.router_sharded ? 1 : dp);
    for (size_t i = 0; i < (size_t)ep * s0.expert_stride; i++) assert_int_equal(expert_hits[i], s0.experts_sharded ? 1 : dp / ep);
    free(router_hits);
    free(expert_hits);
    free(all);
    free(part);
}

static void zero_shards_of_routers_and_experts(void **state)
{
    (void)state;
    for (int stage = 0; stage <= 3; stage++) {
        shards_cover_the_layout_once(stage, 1, 1, 2, 24, 40);
        shards_cover_the_layout_once(stage, 2, 1, 3, 13, 37);   /* odd sizes: padded */
        shards_cover_the_layout_once(stage, 2, 2, 2, 16, 48);   /* EP 2 over DP 2: the experts whole */
        shards_cover_the_layout_once(stage, 4, 2, 2, 13, 37);
        shards_cover_the_layout_once(stage, 8, 2, 1, 64, 96);
    }
    moe_shards s;
    assert_int_equal(moe_shard_plan(2, 16, 48, 1, 6, 0, 4, &s), -1);   /* ep must divide dp */
    assert_int_equal(moe_shard_plan(2, 16, 48, 4, 2, 0, 1, &s), -1);   /* no ZeRO-4 */
    assert_int_equal(moe_shard_plan(2, 16, 48, 1, 2, 2, 1, &s), -1);   /* rank outside the group */
}

/* SEXTANT_MOE_ROUTE=random (moe_random_route): k different experts a token, each in range; the same draw for the
 * same seed and another for another seed; every expert's rows Binomial(N, k/E): within six standard deviations of
 * N k / E, their coefficient of variation near the binomial's sqrt((1 - k/E) / (N k / E)), none empty (OLMoE's
 * 64 experts of top 8 at 4096 tokens: 0.041; Mixtral's 8 of top 2 at 1024: 0.054). */
static void random_route_deals_binomial_rows(void **state)
{
    (void)state;
    const int shapes[2][3] = {{4096, 64, 8}, {1024, 8, 2}};
    for (int c = 0; c < 2; c++) {
        const int N = shapes[c][0], E = shapes[c][1], k = shapes[c][2];
        int *idx = malloc((size_t)N * k * sizeof *idx), *again = malloc((size_t)N * k * sizeof *again);
        assert_non_null(idx);
        assert_non_null(again);
        assert_int_equal(moe_random_route(3, N, E, k, idx), 0);
        int counts[MOE_EXPERTS_MAX] = {0};
        for (int n = 0; n < N; n++)
            for (int j = 0; j < k; j++) {
                const int e = idx[(size_t)n * k + j];
                assert_true(e >= 0 && e < E);
                for (int i = 0; i < j; i++) assert_int_not_equal(idx[(size_t)n * k + i], e);
                counts[e]++;
            }
        const double mean = (double)N * k / E, sd = sqrt(mean * (1.0 - (double)k / E));
        double var = 0.0;
        for (int e = 0; e < E; e++) {
            assert_true(counts[e] > 0 && fabs(counts[e] - mean) < 6.0 * sd);
            var += (counts[e] - mean) * (counts[e] - mean) / E;
        }
        const double cv = sqrt(var) / mean, expected = sd / mean;
        if (cv < 0.5 * expected || cv > 1.5 * expected) print_error("cv %.4f, binomial %.4f\n", cv, expected);
        assert_true(cv > 0.5 * expected && cv < 1.5 * expected);
        assert_int_equal(moe_random_route(3, N, E, k, again), 0);
        assert_memory_equal(idx, again, (size_t)N * k * sizeof *idx);
        assert_int_equal(moe_random_route(4, N, E, k, again), 0);
        assert_memory_not_equal(idx, again, (size_t)N * k * sizeof *idx);
        free(idx);
        free(again);
    }
    int one[4];
    assert_int_equal(moe_random_route(0, 1, 2, 3, one), -1);                      /* k > E */
    assert_int_equal(moe_random_route(0, 1, MOE_EXPERTS_MAX + 1, 2, one), -1);   /* too many experts */
}

/* The random route's busiest EP rank, known before the run (moe_random_route_load): the held-out runs measured it
 * on the GPUs from the counts they exchanged (tests/data/2026-11-28-moe-random-all, "MoE load imbalance": Mixtral
 * cut to 2 layers at EP 2, 4096 tokens a rank 1.010, with CP 2 (2048) 1.030; OLMoE's 4 layers 1.004 and 1.007), and
 * over many layers it is the expected largest of two ranks' shares: 1 + sqrt(2/pi) sigma, sigma the relative sd of
 * one rank's rows, a sum of N hypergeometric draws (k picks of E, E/2 of them the rank's). */
static void random_route_load_is_the_draws_busiest_rank(void **state)
{
    (void)state;
    assert_true(fabs(moe_random_route_load(2, 4096, 8, 2, 2) - 1.010) < 6e-4);
    assert_true(fabs(moe_random_route_load(2, 2048, 8, 2, 2) - 1.030) < 6e-4);
    assert_true(fabs(moe_random_route_load(4, 4096, 64, 8, 2) - 1.004) < 6e-4);
    assert_true(fabs(moe_random_route_load(4, 2048, 64, 8, 2) - 1.007) < 6e-4);
    const int layers = 400, N = 4096, E = 8, k = 2;
    const double var = (double)N * k * 0.5 * 0.5 * (E - k) / (E - 1), sigma = sqrt(var) / (N * k / 2.0);
    const double expected = 1.0 + sqrt(2.0 / M_PI) * sigma, se = sigma * sqrt(1.0 - 2.0 / M_PI) / sqrt(layers);
    const double load = moe_random_route_load(layers, N, E, k, 2);
    if (fabs(load - expected) > 4.0 * se) print_error("load %.5f, expected %.5f (se %.5f)\n", load, expected, se);
    assert_true(fabs(load - expected) < 4.0 * se);
    assert_true(moe_random_route_load(3, 4096, 8, 2, 1) == 1.0);   /* one rank waits for none */
    assert_true(moe_random_route_load(3, 4096, 8, 2, 3) < 0.0);    /* 8 experts over 3 ranks */
    assert_true(moe_random_route_load(0, 4096, 8, 2, 2) < 0.0);
    assert_true(moe_random_route_load(2, 4096, 8, 9, 2) < 0.0);    /* top 9 of 8 */
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(topk_picks_largest),
        cmocka_unit_test(random_route_deals_binomial_rows),
        cmocka_unit_test(random_route_load_is_the_draws_busiest_rank),
        cmocka_unit_test(permutation_is_stable_bijection),
        cmocka_unit_test(exchange_two_and_four_ranks),
        cmocka_unit_test(router_backward_finite_differences),
        cmocka_unit_test(weighted_swiglu_finite_differences),
        /* last: its draws from the shared generator would move the finite differences' inputs */
        cmocka_unit_test(gather_two_and_four_ranks),
        cmocka_unit_test(zero_shards_of_routers_and_experts),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
