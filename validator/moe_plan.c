/* A mixture-of-experts layer's routing, its float64 reference and the exchange plan
 * (validator/moe_plan.h).  Plain C. */
#include "moe_plan.h"

#include <math.h>
#include <stdlib.h>
#include <string.h>

int moe_ref_route(const double *logits, int N, int E, int k, int *idx, double *gate)
{
    if (N < 0 || E < 1 || E > MOE_EXPERTS_MAX || k < 1 || k > E || k > MOE_TOPK_MAX) return -1;
    for (int n = 0; n < N; n++) {
        const double *z = logits + (size_t)n * E;
        int *pick = idx + (size_t)n * k;
        for (int j = 0; j < k; j++) {
            int best = -1;
            for (int e = 0; e < E; e++) {
                int taken = 0;
                for (int i = 0; i < j; i++) taken |= pick[i] == e;
                if (!taken && (best < 0 || z[e] > z[best])) best = e;
            }
            pick[j] = best;
        }
        /* the picks are in decreasing order: the first is the largest */
        double sum = 0.0;
        for (int j = 0; j < k; j++) sum += exp(z[pick[j]] - z[pick[0]]);
        for (int j = 0; j < k; j++) gate[(size_t)n * k + j] = exp(z[pick[j]] - z[pick[0]]) / sum;
    }
    return 0;
}

int moe_random_route(unsigned long long seed, int N, int E, int k, int *idx)
{
    if (N < 0 || E < 1 || E > MOE_EXPERTS_MAX || k < 1 || k > E) return -1;
    unsigned long long x = 0x9e3779b97f4a7c15ull * (seed + 1);   /* xorshift64's state: never 0 */
    int order[MOE_EXPERTS_MAX];
    for (int n = 0; n < N; n++) {
        for (int e = 0; e < E; e++) order[e] = e;
        for (int j = 0; j < k; j++) {   /* the first k steps of a Fisher-Yates shuffle */
            x ^= x << 13, x ^= x >> 7, x ^= x << 17;
            const int pick = j + (int)(x % (unsigned long long)(E - j)), e = order[pick];
            order[pick] = order[j], order[j] = e;
            idx[(size_t)n * k + j] = e;
        }
    }
    return 0;
}

double moe_random_route_load(int layers, int N, int E, int k, int ep)
{
    if (layers < 1 || N < 1 || ep < 1 || ep > MOE_EP_MAX || E % ep) return -1.0;
    if (ep == 1) return 1.0;
    int *idx = malloc((size_t)N * k * sizeof *idx);
    if (!idx) return -1.0;
    const int local = E / ep;
    double sum = 0.0;
    for (int l = 0; l < layers; l++) {
        if (moe_random_route((unsigned long long)l, N, E, k, idx) != 0) { free(idx); return -1.0; }
        long rows[MOE_EP_MAX] = {0};
        for (size_t s = 0; s < (size_t)N * k; s++) rows[idx[s] / local]++;
        long most = 0;
        for (int q = 0; q < ep; q++) most = rows[q] > most ? rows[q] : most;
        sum += (double)most / ((double)N * k / ep);
    }
    free(idx);
    return sum / layers;
}

int moe_ref_permute(const int *idx, int N, int k, int E, int *counts, int *pos, int *row_slot)
{
    size_t slots = (size_t)N * k;
    memset(counts, 0, (size_t)E * sizeof *counts);
    for (size_t s = 0; s < slots; s++) {
        if (idx[s] < 0 || idx[s] >= E) return -1;
        counts[idx[s]]++;
    }
    int start[MOE_EXPERTS_MAX];
    int at = 0;
    for (int e = 0; e < E; e++) { start[e] = at; at += counts[e]; }
    for (size_t s = 0; s < slots; s++) {
        int r = start[idx[s]]++;
        pos[s] = r;
        row_slot[r] = (int)s;
    }
    return 0;
}

void moe_ref_dispatch(const double *x, int N, int C, int k, const int *row_slot, double *xs)
{
    for (size_t r = 0; r < (size_t)N * k; r++)
        memcpy(xs + r * C, x + (size_t)(row_slot[r] / k) * C, (size_t)C * sizeof *xs);
}

void moe_ref_combine(const double *ys, int N, int C, int k, const int *pos, const double *gate, double *out)
{
    for (int n = 0; n < N; n++)
        for (int c = 0; c < C; c++) {
            double sum = 0.0;
            for (int j = 0; j < k; j++) {
                size_t s = (size_t)n * k + j;
                sum += (gate ? gate[s] : 1.0) * ys[(size_t)pos[s] * C + c];
            }
            out[(size_t)n * C + c] = sum;
        }
}

static double silu(double z) { return z / (1.0 + exp(-z)); }

void moe_ref_swiglu(const double *h, const double *w, int R, int F, double *out)
{
    for (int r = 0; r < R; r++)
        for (int f = 0; f < F; f++) {
            const double *row = h + (size_t)r * 2 * F;
            out[(size_t)r * F + f] = (w ? w[r] : 1.0) * silu(row[f]) * row[F + f];
        }
}

void moe_ref_swiglu_backward(const double *dout, const double *h, const double *w, int R, int F, double *dh,
                             double *dw)
{
    for (int r = 0; r < R; r++) {
        const double *row = h + (size_t)r * 2 * F, *d = dout + (size_t)r * F;
        const double weight = w ? w[r] : 1.0;
        double dot = 0.0;
        for (int f = 0; f < F; f++) {
            double z = row[f], u = row[F + f], s = 1.0 / (1.0 + exp(-z));
            dot += d[f] * z * s * u;
            /* d silu(z) / dz = s (1 + z (1 - s)) */
            dh[(size_t)r * 2 * F + f] = weight * d[f] * u * s * (1.0 + z * (1.0 - s));
            dh[(size_t)r * 2 * F + F + f] = weight * d[f] * z * s;
        }
        dw[r] = dot;
    }
}

void moe_ref_router_backward(const double *logits, const int *idx, const double *gate, const double *dgate,
                             const int *counts, double aux_scale, int N, int E, int k, double *dlogits)
{
    for (int n = 0; n < N; n++) {
        const double *z = logits + (size_t)n * E;
        double *dz = dlogits + (size_t)n * E;
        for (int e = 0; e < E; e++) dz[e] = 0.0;
        /* the gates are a softmax over the k picks: dz_i = g_i (dg_i - sum_j g_j dg_j) */
        double dot = 0.0;
        for (int j = 0; j < k; j++) dot += gate[(size_t)n * k + j] * dgate[(size_t)n * k + j];
        for (int j = 0; j < k; j++) {
            size_t s = (size_t)n * k + j;
            dz[idx[s]] += gate[s] * (dgate[s] - dot);
        }
        if (aux_scale == 0.0) continue;
        double top = z[0];
        for (int e = 1; e < E; e++) top = z[e] > top ? z[e] : top;
        double sum = 0.0;
        for (int e = 0; e < E; e++) sum += exp(z[e] - top);
        double pg = 0.0;
        for (int e = 0; e < E; e++) pg += exp(z[e] - top) / sum * aux_scale * counts[e] / ((double)N * k);
        for (int e = 0; e < E; e++) {
            double p = exp(z[e] - top) / sum;
            dz[e] += p * (aux_scale * counts[e] / ((double)N * k) - pg);
        }
    }
}

int moe_exchange_plan(const int *counts, int ep, int E, int rank, moe_exchange *x)
{
    if (ep < 1 || ep > MOE_EP_MAX || E < 1 || E > MOE_EXPERTS_MAX || E % ep || rank < 0 || rank >= ep) return -1;
    memset(x, 0, sizeof *x);
    x->ep = ep; x->rank = rank; x->E = E; x->local = E / ep;
    const int local = x->local;
    /* where each expert's rows start in this rank's expert-sorted buffer */
    int sorted_at[MOE_EXPERTS_MAX], at = 0;
    for (int e = 0; e < E; e++) { sorted_at[e] = at; at += counts[(size_t)rank * E + e]; }
    for (int p = 0; p < ep; p++)
        for (int e = 0; e < local; e++) {
            x->send_rows[p * local + e] = counts[(size_t)rank * E + p * local + e];
            x->send_offset[p * local + e] = sorted_at[p * local + e];
        }
    /* expert-major on arrival: local expert e's rows from rank 0, 1, ... */
    at = 0;
    for (int e = 0; e < local; e++) {
        x->expert_offset[e] = at;
        for (int p = 0; p < ep; p++) {
            int rows = counts[(size_t)p * E + rank * local + e];
            x->recv_rows[p * local + e] = rows;
            x->recv_offset[p * local + e] = at;
            at += rows;
        }
        x->expert_rows[e] = at - x->expert_offset[e];
    }
    x->rows_in = at;
    /* the busiest rank against the mean */
    double most = 0.0, all = 0.0;
    for (int q = 0; q < ep; q++) {
        double rows = 0.0;
        for (int p = 0; p < ep; p++)
            for (int e = 0; e < local; e++) rows += counts[(size_t)p * E + q * local + e];
        most = rows > most ? rows : most;
        all += rows;
    }
    x->imbalance = all > 0.0 ? most / (all / ep) : 1.0;
    return 0;
}

int moe_gather_plan(const int *counts, int tp, int E, int rank, moe_exchange *x)
{
    if (tp < 1 || tp > MOE_EP_MAX || E < 1 || E > MOE_EXPERTS_MAX || rank < 0 || rank >= tp) return -1;
    memset(x, 0, sizeof *x);
    x->ep = tp; x->rank = rank; x->E = E; x->local = E;
    /* this rank's rows are sent whole to every peer: expert e's from where the sort put them */
    int sorted_at[MOE_EXPERTS_MAX], at = 0;
    for (int e = 0; e < E; e++) { sorted_at[e] = at; at += counts[(size_t)rank * E + e]; }
    for (int p = 0; p < tp; p++)
        for (int e = 0; e < E; e++) {
            x->send_rows[p * E + e] = counts[(size_t)rank * E + e];
            x->send_offset[p * E + e] = sorted_at[e];
        }
    at = 0;
    for (int e = 0; e < E; e++) {
        x->expert_offset[e] = at;
        for (int p = 0; p < tp; p++) {
            x->recv_rows[p * E + e] = counts[(size_t)p * E + e];
            x->recv_offset[p * E + e] = at;
            at += counts[(size_t)p * E + e];
        }
        x->expert_rows[e] = at - x->expert_offset[e];
    }
    x->rows_in = at;
    x->imbalance = 1.0;   /* every rank runs every row */
    return 0;
}

static size_t round_up(size_t n, size_t to) { return (n + to - 1) / to * to; }

int moe_shard_plan(int L, size_t router_layer, size_t expert_layer, int stage, int dp, int dp_rank, int ep,
                   moe_shards *out)
{
    if (L < 0 || stage < 0 || stage > 3 || dp < 1 || ep < 1 || dp % ep || dp_rank < 0 || dp_rank >= dp) return -1;
    memset(out, 0, sizeof *out);
    out->stage = dp > 1 ? stage : 0;
    out->edp = dp / ep;
    out->edp_rank = dp_rank / ep;   /* EP holds ep consecutive ranks; the expert-DP group one of each EP group */
    out->router_sharded = out->stage >= 1;
    out->experts_sharded = out->stage >= 1 && out->edp > 1;
    out->experts_zero = out->stage >= 2 && out->edp > 1;
    size_t routers = (size_t)L * router_layer;
    out->router_count = out->router_sharded ? round_up(routers, 8 * (size_t)dp) : routers;
    out->router_slice = out->router_sharded ? out->router_count / (size_t)dp : out->router_count;
    out->router_at = out->router_sharded ? (size_t)dp_rank * out->router_slice : (size_t)0;
    out->expert_stride = out->experts_sharded ? round_up(expert_layer, 8 * (size_t)out->edp) : expert_layer;
    out->expert_slice = out->experts_sharded ? out->expert_stride / (size_t)out->edp : out->expert_stride;
    out->expert_at = out->experts_sharded ? (size_t)out->edp_rank * out->expert_slice : (size_t)0;
    out->state_count = out->router_slice + (size_t)L * out->expert_slice;
    out->param_count = out->router_count + (size_t)L * (out->experts_zero && out->stage == 3 ? out->expert_slice
                                                                                          : out->expert_stride);
    out->grad_count = out->router_count + (size_t)L * (out->experts_zero ? out->expert_slice : out->expert_stride);
    return 0;
}

void moe_shard_take(const moe_shards *s, int L, const float *whole, float *out, int params)
{
    int router_whole = params || !s->router_sharded;
    int experts_whole = params ? !(s->experts_zero && s->stage == 3) : !s->experts_sharded;
    size_t n = router_whole ? s->router_count : s->router_slice;
    memcpy(out, whole + (router_whole ? 0 : s->router_at), n * sizeof *out);
    out += n;
    const float *experts = whole + s->router_count;
    for (int l = 0; l < L; l++) {
        const float *layer = experts + (size_t)l * s->expert_stride;
        n = experts_whole ? s->expert_stride : s->expert_slice;
        memcpy(out, layer + (experts_whole ? 0 : s->expert_at), n * sizeof *out);
        out += n;
    }
}
