/* The float64 model reference (see model_ref.h): one forward and one backward
 * function per op, each the textbook formula in plain loops, and the model
 * as their composition.  Slow and simple on purpose: it is run on models of a
 * few thousand parameters, and it has to be obviously right.
 *
 * Conventions: activations are row-major [N][width] with token n = b T + t;
 * a backward function's doc says whether it overwrites (=) or accumulates
 * (+=) each output.  Parameter gradients always accumulate, into tensors the
 * entry point zeroes first: the tied head and the embedding both land in WTE,
 * and every layer's block is reached once. */
#include "model_ref.h"

#include <math.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#define NORM_EPS 1e-5             /* LayerNorm and RMSNorm, as train.c's kernels */
#define GELU_K 0.7978845608028654 /* sqrt(2/pi), GELU's tanh approximation */
#define GELU_A 0.044715

/* ---- shapes -------------------------------------------------------------- */

typedef struct {
    size_t L, C, H, KV, D, F, V, Vp, maxT, B, T;
    size_t N;   /* tokens, B T */
    size_t A;   /* attention output width, H D */
    size_t W;   /* fused QKV width, (H + 2 KV) D */
    size_t up;  /* the FFN's first projection width: 2F for SwiGLU (gate | up), else F */
    int rms, swiglu, bias, learned_pos, tied, rope;
    double rope_theta;
    size_t sizes[REF_COUNT];
} dims;

/* a b, clearing *ok on overflow (the product is then meaningless) */
static size_t mul(size_t a, size_t b, int *ok)
{
    if (a != 0 && b > SIZE_MAX / a) *ok = 0;
    return a * b;
}

static size_t add(size_t a, size_t b, int *ok)
{
    if (b > SIZE_MAX - a) *ok = 0;
    return a + b;
}

/* 0 and d filled for a usable config, -1 otherwise. */
static int dims_of(const ref_config *c, dims *d)
{
    if (!c) return -1;
    if (c->L < 1 || c->C < 1 || c->H < 1 || c->KV < 1 || c->D < 1 || c->F < 1 || c->V < 1 || c->Vp < c->V || c->B < 1 ||
        c->T < 1 || c->H % c->KV != 0 || (c->learned_pos && c->maxT < c->T))
        return -1;
    if (c->rope && (c->D % 2 != 0 || !(c->rope_theta > 0.0) || !isfinite(c->rope_theta))) return -1;
    memset(d, 0, sizeof *d);
    d->L = (size_t)c->L; d->C = (size_t)c->C; d->H = (size_t)c->H; d->KV = (size_t)c->KV; d->D = (size_t)c->D;
    d->F = (size_t)c->F; d->V = (size_t)c->V; d->Vp = (size_t)c->Vp; d->B = (size_t)c->B; d->T = (size_t)c->T;
    d->maxT = c->learned_pos ? (size_t)c->maxT : 0;
    d->rms = c->rms != 0; d->swiglu = c->swiglu != 0; d->bias = c->bias != 0;
    d->learned_pos = c->learned_pos != 0; d->tied = c->tied != 0;
    d->rope = c->rope != 0; d->rope_theta = d->rope ? c->rope_theta : 0.0;
    int ok = 1;
    d->N = mul(d->B, d->T, &ok);
    d->A = mul(d->H, d->D, &ok);
    d->W = mul(add(d->H, mul(2, d->KV, &ok), &ok), d->D, &ok);
    d->up = d->swiglu ? mul(2, d->F, &ok) : d->F;
    size_t L = d->L, C = d->C, ln_bias = d->rms ? 0 : 1, bias = d->bias ? 1 : 0;
    size_t *s = d->sizes;
    s[REF_WTE] = mul(d->Vp, C, &ok);
    s[REF_WPE] = mul(d->maxT, C, &ok);
    s[REF_LN1W] = s[REF_LN2W] = mul(L, C, &ok);
    s[REF_LN1B] = s[REF_LN2B] = ln_bias * s[REF_LN1W];
    s[REF_QKVW] = mul(mul(L, d->W, &ok), C, &ok);
    s[REF_QKVB] = bias * mul(L, d->W, &ok);
    s[REF_ATTW] = mul(mul(L, C, &ok), d->A, &ok);
    s[REF_ATTB] = bias * mul(L, C, &ok);
    s[REF_FCW] = mul(mul(L, d->up, &ok), C, &ok);
    s[REF_FCB] = bias * mul(L, d->up, &ok);
    s[REF_PROJW] = mul(mul(L, C, &ok), d->F, &ok);
    s[REF_PROJB] = bias * mul(L, C, &ok);
    s[REF_LNFW] = C;
    s[REF_LNFB] = ln_bias * C;
    s[REF_HEAD] = d->tied ? 0 : s[REF_WTE];
    /* every tensor's byte count must fit too */
    for (int i = 0; i < REF_COUNT; i++) mul(s[i], sizeof(double), &ok);
    return ok ? 0 : -1;
}

size_t ref_tensor_size(const ref_config *c, int which)
{
    dims d;
    if (which < 0 || which >= REF_COUNT || dims_of(c, &d) != 0) return 0;
    return d.sizes[which];
}

static int is_layer_tensor(int which) { return which >= REF_LN1W && which <= REF_PROJB; }

/* Layer l's block of tensor `which` in t (params or grads); NULL when absent. */
static double *block(const dims *d, double *const t[REF_COUNT], int which, size_t l)
{
    if (d->sizes[which] == 0) return NULL;
    return is_layer_tensor(which) ? t[which] + l * (d->sizes[which] / d->L) : t[which];
}

/* ---- embedding ------------------------------------------------------------ */

/* out[n] = wte[token n] (+ wpe[t]) */
static void embedding_forward(double *out, const int32_t *tokens, const double *wte, const double *wpe, const dims *d)
{
    for (size_t b = 0; b < d->B; b++)
        for (size_t t = 0; t < d->T; t++) {
            size_t n = b * d->T + t, row = (size_t)tokens[n];
            for (size_t c = 0; c < d->C; c++)
                out[n * d->C + c] = wte[row * d->C + c] + (wpe ? wpe[t * d->C + c] : 0.0);
        }
}

/* dwte[token n] += dout[n]; dwpe[t] += dout[n] (when wpe exists): a row used
 * by several tokens sums their gradients */
static void embedding_backward(double *dwte, double *dwpe, const double *dout, const int32_t *tokens, const dims *d)
{
    for (size_t b = 0; b < d->B; b++)
        for (size_t t = 0; t < d->T; t++) {
            size_t n = b * d->T + t, row = (size_t)tokens[n];
            for (size_t c = 0; c < d->C; c++) {
                dwte[row * d->C + c] += dout[n * d->C + c];
                if (dwpe) dwpe[t * d->C + c] += dout[n * d->C + c];
            }
        }
}

/* ---- norms ---------------------------------------------------------------- */

/* out = (x - mean) rstd w + b per row, rstd = 1/sqrt(biased variance + eps) */
static void layernorm_forward(double *out, double *mean, double *rstd, const double *x, const double *w, const double *b,
                              size_t N, size_t C)
{
    for (size_t n = 0; n < N; n++) {
        const double *xr = x + n * C;
        double m = 0.0, var = 0.0;
        for (size_t c = 0; c < C; c++) m += xr[c];
        m /= (double)C;
        for (size_t c = 0; c < C; c++) var += (xr[c] - m) * (xr[c] - m);
        var /= (double)C;
        double r = 1.0 / sqrt(var + NORM_EPS);
        for (size_t c = 0; c < C; c++) out[n * C + c] = (xr[c] - m) * r * w[c] + (b ? b[c] : 0.0);
        mean[n] = m;
        rstd[n] = r;
    }
}

/* dx += the input gradient, dw += dy xhat, db += dy.  With g = dy w and xhat
 * = (x - mean) rstd, the mean and the variance each remove one component:
 * dx = rstd (g - mean(g) - xhat mean(g xhat)). */
static void layernorm_backward(double *dx, double *dw, double *db, const double *dy, const double *x, const double *w,
                               const double *mean, const double *rstd, size_t N, size_t C)
{
    for (size_t n = 0; n < N; n++) {
        const double *xr = x + n * C, *dyr = dy + n * C;
        double mg = 0.0, mgx = 0.0;
        for (size_t c = 0; c < C; c++) {
            double xhat = (xr[c] - mean[n]) * rstd[n], g = dyr[c] * w[c];
            mg += g;
            mgx += g * xhat;
            dw[c] += dyr[c] * xhat;
            if (db) db[c] += dyr[c];
        }
        mg /= (double)C;
        mgx /= (double)C;
        for (size_t c = 0; c < C; c++) {
            double xhat = (xr[c] - mean[n]) * rstd[n], g = dyr[c] * w[c];
            dx[n * C + c] += rstd[n] * (g - mg - xhat * mgx);
        }
    }
}

/* out = x rstd w per row, rstd = 1/sqrt(mean(x^2) + eps): no centring, no bias */
static void rmsnorm_forward(double *out, double *rstd, const double *x, const double *w, size_t N, size_t C)
{
    for (size_t n = 0; n < N; n++) {
        const double *xr = x + n * C;
        double ms = 0.0;
        for (size_t c = 0; c < C; c++) ms += xr[c] * xr[c];
        ms /= (double)C;
        double r = 1.0 / sqrt(ms + NORM_EPS);
        for (size_t c = 0; c < C; c++) out[n * C + c] = xr[c] * r * w[c];
        rstd[n] = r;
    }
}

/* dx += the input gradient, dw += dy xhat: with g = dy w and xhat = x rstd,
 * d rstd / dx_j = -rstd^3 x_j / C gives dx = rstd (g - xhat mean(g xhat)). */
static void rmsnorm_backward(double *dx, double *dw, const double *dy, const double *x, const double *w,
                             const double *rstd, size_t N, size_t C)
{
    for (size_t n = 0; n < N; n++) {
        const double *xr = x + n * C, *dyr = dy + n * C;
        double mgx = 0.0;
        for (size_t c = 0; c < C; c++) {
            double xhat = xr[c] * rstd[n];
            mgx += dyr[c] * w[c] * xhat;
            dw[c] += dyr[c] * xhat;
        }
        mgx /= (double)C;
        for (size_t c = 0; c < C; c++)
            dx[n * C + c] += rstd[n] * (dyr[c] * w[c] - xr[c] * rstd[n] * mgx);
    }
}

/* The family's norm: mean is unused (may be anything) with RMSNorm. */
static void norm_forward(const dims *d, double *out, double *mean, double *rstd, const double *x, const double *w,
                         const double *b)
{
    if (d->rms) rmsnorm_forward(out, rstd, x, w, d->N, d->C);
    else layernorm_forward(out, mean, rstd, x, w, b, d->N, d->C);
}

static void norm_backward(const dims *d, double *dx, double *dw, double *db, const double *dy, const double *x,
                          const double *w, const double *mean, const double *rstd)
{
    if (d->rms) rmsnorm_backward(dx, dw, dy, x, w, rstd, d->N, d->C);
    else layernorm_backward(dx, dw, db, dy, x, w, mean, rstd, d->N, d->C);
}

/* ---- linear layers: W[out][in], y = x W^T + b ------------------------------ */

static void linear_forward(double *y, const double *x, const double *w, const double *b, size_t N, size_t in, size_t out)
{
    for (size_t n = 0; n < N; n++)
        for (size_t o = 0; o < out; o++) {
            double acc = b ? b[o] : 0.0;
            for (size_t i = 0; i < in; i++) acc += x[n * in + i] * w[o * in + i];
            y[n * out + o] = acc;
        }
}

/* dx = dy W (=); dw += dy^T x; db += the column sums of dy (when b exists) */
static void linear_backward(double *dx, double *dw, double *db, const double *dy, const double *x, const double *w,
                            size_t N, size_t in, size_t out)
{
    for (size_t n = 0; n < N; n++) {
        for (size_t i = 0; i < in; i++) dx[n * in + i] = 0.0;
        for (size_t o = 0; o < out; o++) {
            double g = dy[n * out + o];
            for (size_t i = 0; i < in; i++) {
                dx[n * in + i] += g * w[o * in + i];
                dw[o * in + i] += g * x[n * in + i];
            }
            if (db) db[o] += g;
        }
    }
}

/* ---- residual add: its backward hands the same gradient to both inputs,
 * which the composition does by letting one buffer carry the stream's
 * gradient and accumulating each branch's input gradient into it ----------- */

static void residual_forward(double *out, const double *a, const double *b, size_t n)
{
    for (size_t i = 0; i < n; i++) out[i] = a[i] + b[i];
}

/* ---- rotary position embedding ------------------------------------------------ */

/* In place on the first H + KV heads of each row of qkv [N][W] (queries, then
 * keys; the values are left alone): for token n at position t = n mod T and
 * i < D/2, the pair (x[i], x[i + D/2]) of every such head is rotated by the
 * angle sign t theta^(-2i/D).  sign = 1 is the forward; sign = -1, the
 * inverse rotation, is its backward (a rotation's Jacobian is the rotation,
 * whose transpose is the rotation by the negative angle), applied to dqkv. */
static void rope_rotate(double *qkv, const dims *d, double sign)
{
    size_t half = d->D / 2, heads = d->H + d->KV;
    double log_theta = log(d->rope_theta);
    for (size_t n = 0; n < d->N; n++) {
        double t = (double)(n % d->T);
        for (size_t i = 0; i < half; i++) {
            double freq = exp(-(double)(2 * i) / (double)d->D * log_theta), angle = t * freq;
            double cs = cos(angle), sn = sign * sin(angle);
            for (size_t h = 0; h < heads; h++) {
                double *x = qkv + n * d->W + h * d->D, x1 = x[i], x2 = x[i + half];
                x[i] = x1 * cs - x2 * sn;
                x[i + half] = x2 * cs + x1 * sn;
            }
        }
    }
}

/* ---- attention -------------------------------------------------------------- */

/* Causal attention from the fused projection qkv [N][W] into out [N][H D]:
 * for query head h and its key/value head h / (H / KV),
 * P[t][u] = softmax_u<=t(q_t . k_u / sqrt(D)), out_t = sum_u P[t][u] v_u.
 * prob [B][H][T][T] keeps P for backward, 0 above the diagonal. */
static void attention_forward(double *out, double *prob, const double *qkv, const dims *d)
{
    size_t T = d->T, D = d->D, W = d->W, group = d->H / d->KV;
    double scale = 1.0 / sqrt((double)D);
    for (size_t b = 0; b < d->B; b++)
        for (size_t h = 0; h < d->H; h++) {
            size_t kv = h / group, q_col = h * D, k_col = (d->H + kv) * D, v_col = (d->H + d->KV + kv) * D;
            for (size_t t = 0; t < T; t++) {
                double *p = prob + ((b * d->H + h) * T + t) * T;
                const double *q = qkv + (b * T + t) * W + q_col;
                double max = -INFINITY, sum = 0.0;
                for (size_t u = 0; u <= t; u++) {
                    const double *k = qkv + (b * T + u) * W + k_col;
                    double s = 0.0;
                    for (size_t i = 0; i < D; i++) s += q[i] * k[i];
                    p[u] = s * scale;
                    if (p[u] > max) max = p[u];
                }
                for (size_t u = 0; u <= t; u++) {
                    p[u] = exp(p[u] - max);
                    sum += p[u];
                }
                for (size_t u = 0; u <= t; u++) p[u] /= sum;
                for (size_t u = t + 1; u < T; u++) p[u] = 0.0;
                double *o = out + (b * T + t) * d->A + h * D;
                for (size_t i = 0; i < D; i++) {
                    double acc = 0.0;
                    for (size_t u = 0; u <= t; u++) acc += p[u] * qkv[(b * T + u) * W + v_col + i];
                    o[i] = acc;
                }
            }
        }
}

/* dqkv (=) from dout [N][H D].  Per row: dP = dout . v, the softmax's
 * dS = P (dP - sum_u P dP), then dq += dS k / sqrt(D), dk += dS q / sqrt(D),
 * dv += P dout; a key/value head sums over the H / KV query heads it
 * serves.  dp: T doubles of scratch. */
static void attention_backward(double *dqkv, const double *dout, const double *prob, const double *qkv, double *dp,
                               const dims *d)
{
    size_t T = d->T, D = d->D, W = d->W, group = d->H / d->KV;
    double scale = 1.0 / sqrt((double)D);
    for (size_t i = 0; i < d->N * W; i++) dqkv[i] = 0.0;
    for (size_t b = 0; b < d->B; b++)
        for (size_t h = 0; h < d->H; h++) {
            size_t kv = h / group, q_col = h * D, k_col = (d->H + kv) * D, v_col = (d->H + d->KV + kv) * D;
            for (size_t t = 0; t < T; t++) {
                const double *p = prob + ((b * d->H + h) * T + t) * T;
                const double *go = dout + (b * T + t) * d->A + h * D;
                double pdp = 0.0;
                for (size_t u = 0; u <= t; u++) {
                    const double *v = qkv + (b * T + u) * W + v_col;
                    double *dv = dqkv + (b * T + u) * W + v_col;
                    dp[u] = 0.0;
                    for (size_t i = 0; i < D; i++) {
                        dp[u] += go[i] * v[i];
                        dv[i] += p[u] * go[i];
                    }
                    pdp += p[u] * dp[u];
                }
                const double *q = qkv + (b * T + t) * W + q_col;
                double *dq = dqkv + (b * T + t) * W + q_col;
                for (size_t u = 0; u <= t; u++) {
                    double ds = p[u] * (dp[u] - pdp) * scale;
                    const double *k = qkv + (b * T + u) * W + k_col;
                    double *dk = dqkv + (b * T + u) * W + k_col;
                    for (size_t i = 0; i < D; i++) {
                        dq[i] += ds * k[i];
                        dk[i] += ds * q[i];
                    }
                }
            }
        }
}

/* ---- activations -------------------------------------------------------------- */

/* gelu(x) = 0.5 x (1 + tanh(sqrt(2/pi) (x + 0.044715 x^3))) */
static void gelu_forward(double *out, const double *x, size_t n)
{
    for (size_t i = 0; i < n; i++) {
        double u = GELU_K * (x[i] + GELU_A * x[i] * x[i] * x[i]);
        out[i] = 0.5 * x[i] * (1.0 + tanh(u));
    }
}

/* dx = dy gelu'(x) (=) */
static void gelu_backward(double *dx, const double *x, const double *dy, size_t n)
{
    for (size_t i = 0; i < n; i++) {
        double u = GELU_K * (x[i] + GELU_A * x[i] * x[i] * x[i]), th = tanh(u);
        double du = GELU_K * (1.0 + 3.0 * GELU_A * x[i] * x[i]);
        dx[i] = dy[i] * (0.5 * (1.0 + th) + 0.5 * x[i] * (1.0 - th * th) * du);
    }
}

static double sigmoid(double z) { return 1.0 / (1.0 + exp(-z)); }

/* out [N][F] = silu(gate) up, from fch [N][2F] = [gate | up] */
static void swiglu_forward(double *out, const double *fch, size_t N, size_t F)
{
    for (size_t n = 0; n < N; n++)
        for (size_t f = 0; f < F; f++) {
            double g = fch[n * 2 * F + f], u = fch[n * 2 * F + F + f];
            out[n * F + f] = g * sigmoid(g) * u;
        }
}

/* dfch [N][2F] (=): dgate = dy up silu'(gate), silu' = s (1 + g (1 - s));
 * dup = dy silu(gate) */
static void swiglu_backward(double *dfch, const double *dy, const double *fch, size_t N, size_t F)
{
    for (size_t n = 0; n < N; n++)
        for (size_t f = 0; f < F; f++) {
            double g = fch[n * 2 * F + f], u = fch[n * 2 * F + F + f], s = sigmoid(g), gy = dy[n * F + f];
            dfch[n * 2 * F + f] = gy * u * s * (1.0 + g * (1.0 - s));
            dfch[n * 2 * F + F + f] = gy * g * s;
        }
}

/* ---- loss ---------------------------------------------------------------------- */

/* logits [N][Vp] become the softmax over the first V columns (the padded
 * columns become 0: they are not part of the distribution); returns the
 * mean over tokens of log-sum-exp - logit[target], in nats. */
static double cross_entropy_forward(double *logits, const int32_t *targets, const dims *d)
{
    double total = 0.0;
    for (size_t n = 0; n < d->N; n++) {
        double *x = logits + n * d->Vp, max = -INFINITY, sum = 0.0;
        for (size_t v = 0; v < d->V; v++)
            if (x[v] > max) max = x[v];
        for (size_t v = 0; v < d->V; v++) sum += exp(x[v] - max);
        double lse = max + log(sum);
        total += lse - x[targets[n]];
        for (size_t v = 0; v < d->V; v++) x[v] = exp(x[v] - lse);
        for (size_t v = d->V; v < d->Vp; v++) x[v] = 0.0;
    }
    return total / (double)d->N;
}

/* prob (from the forward) becomes dloss/dlogits = (softmax - onehot) / N in
 * place, 1/N from the mean; the padded columns stay 0 */
static void cross_entropy_backward(double *prob, const int32_t *targets, const dims *d)
{
    for (size_t n = 0; n < d->N; n++) {
        double *p = prob + n * d->Vp;
        p[targets[n]] -= 1.0;
        for (size_t v = 0; v < d->V; v++) p[v] /= (double)d->N;
    }
}

/* ---- the model ------------------------------------------------------------------ */

/* Everything forward keeps for backward, and backward's scratch, in one block. */
typedef struct {
    double *resid;       /* [L+1][N][C]: the stream entering each layer, then the last */
    double *ln1, *ln2;   /* [L][N][C] */
    double *ln1_mean, *ln1_rstd, *ln2_mean, *ln2_rstd; /* [L][N] */
    double *qkv;         /* [L][N][W]: after RoPE, as attention reads it */
    double *prob;        /* [L][B][H][T][T] */
    double *atty;        /* [L][N][A] */
    double *mid;         /* [L][N][C]: the stream after attention's residual add */
    double *fch;         /* [L][N][up]: before the activation */
    double *act;         /* [L][N][F] */
    double *lnf, *lnf_mean, *lnf_rstd; /* [N][C], [N], [N] */
    double *logits;      /* [N][Vp]: logits, then probabilities, then their gradient */
    double *branch;      /* [N][C]: a branch's output before its residual add */
    /* backward scratch */
    double *dres;        /* [N][C]: dloss/d(stream), accumulated through every branch */
    double *dnorm;       /* [N][C]: dloss/d(a norm's output) */
    double *datty;       /* [N][A] */
    double *dqkv;        /* [N][W] */
    double *dfch;        /* [N][up] */
    double *dact;        /* [N][F] */
    double *dp;          /* [T] */
    double *base;
} workspace;

/* 0, or -1 when the sizes overflow or malloc fails. */
static int workspace_alloc(workspace *w, const dims *d)
{
    size_t L = d->L, N = d->N, C = d->C;
    int ok = 1;
    size_t NC = mul(N, C, &ok), LNC = mul(L, NC, &ok), LN = mul(L, N, &ok);
    size_t BHTT = mul(mul(mul(d->B, d->H, &ok), d->T, &ok), d->T, &ok);
    struct { double **field; size_t count; } parts[] = {
        {&w->resid, add(LNC, NC, &ok)}, {&w->ln1, LNC}, {&w->ln2, LNC}, {&w->ln1_mean, LN}, {&w->ln1_rstd, LN},
        {&w->ln2_mean, LN}, {&w->ln2_rstd, LN}, {&w->qkv, mul(LN, d->W, &ok)}, {&w->prob, mul(L, BHTT, &ok)},
        {&w->atty, mul(LN, d->A, &ok)}, {&w->mid, LNC}, {&w->fch, mul(LN, d->up, &ok)}, {&w->act, mul(LN, d->F, &ok)},
        {&w->lnf, NC}, {&w->lnf_mean, N}, {&w->lnf_rstd, N}, {&w->logits, mul(N, d->Vp, &ok)}, {&w->branch, NC},
        {&w->dres, NC}, {&w->dnorm, NC}, {&w->datty, mul(N, d->A, &ok)}, {&w->dqkv, mul(N, d->W, &ok)},
        {&w->dfch, mul(N, d->up, &ok)}, {&w->dact, mul(N, d->F, &ok)}, {&w->dp, d->T},
    };
    size_t nparts = sizeof parts / sizeof parts[0], total = 0;
    for (size_t i = 0; i < nparts; i++) total = add(total, parts[i].count, &ok);
    mul(total, sizeof(double), &ok);
    if (!ok) return -1;
    w->base = malloc(total * sizeof(double));
    if (!w->base) return -1;
    size_t at = 0;
    for (size_t i = 0; i < nparts; i++) {
        *parts[i].field = w->base + at;
        at += parts[i].count;
    }
    return 0;
}

/* The mean loss; w keeps what backward needs. */
static double model_forward(const dims *d, double *const P[REF_COUNT], workspace *w, const int32_t *inputs,
                            const int32_t *targets)
{
    size_t N = d->N, C = d->C, NC = N * C;
    embedding_forward(w->resid, inputs, P[REF_WTE], block(d, P, REF_WPE, 0), d);
    for (size_t l = 0; l < d->L; l++) {
        double *x = w->resid + l * NC, *next = x + NC, *ln1 = w->ln1 + l * NC, *ln2 = w->ln2 + l * NC;
        double *qkv = w->qkv + l * N * d->W, *atty = w->atty + l * N * d->A, *mid = w->mid + l * NC;
        double *prob = w->prob + l * d->B * d->H * d->T * d->T, *fch = w->fch + l * N * d->up, *act = w->act + l * N * d->F;
        norm_forward(d, ln1, w->ln1_mean + l * N, w->ln1_rstd + l * N, x, block(d, P, REF_LN1W, l), block(d, P, REF_LN1B, l));
        linear_forward(qkv, ln1, block(d, P, REF_QKVW, l), block(d, P, REF_QKVB, l), N, C, d->W);
        if (d->rope) rope_rotate(qkv, d, 1.0);
        attention_forward(atty, prob, qkv, d);
        linear_forward(w->branch, atty, block(d, P, REF_ATTW, l), block(d, P, REF_ATTB, l), N, d->A, C);
        residual_forward(mid, x, w->branch, NC);
        norm_forward(d, ln2, w->ln2_mean + l * N, w->ln2_rstd + l * N, mid, block(d, P, REF_LN2W, l), block(d, P, REF_LN2B, l));
        linear_forward(fch, ln2, block(d, P, REF_FCW, l), block(d, P, REF_FCB, l), N, C, d->up);
        if (d->swiglu) swiglu_forward(act, fch, N, d->F);
        else gelu_forward(act, fch, N * d->F);
        linear_forward(w->branch, act, block(d, P, REF_PROJW, l), block(d, P, REF_PROJB, l), N, d->F, C);
        residual_forward(next, mid, w->branch, NC);
    }
    norm_forward(d, w->lnf, w->lnf_mean, w->lnf_rstd, w->resid + d->L * NC, P[REF_LNFW], block(d, P, REF_LNFB, 0));
    const double *head = d->tied ? P[REF_WTE] : P[REF_HEAD];
    linear_forward(w->logits, w->lnf, head, NULL, N, C, d->Vp);
    return cross_entropy_forward(w->logits, targets, d);
}

/* Every gradient into G, zeroed here, from what model_forward kept in w. */
static void model_backward(const dims *d, double *const P[REF_COUNT], double *const G[REF_COUNT], workspace *w,
                           const int32_t *inputs, const int32_t *targets)
{
    size_t N = d->N, C = d->C, NC = N * C;
    for (int i = 0; i < REF_COUNT; i++)
        for (size_t k = 0; k < d->sizes[i]; k++) G[i][k] = 0.0;
    cross_entropy_backward(w->logits, targets, d);
    int head = d->tied ? REF_WTE : REF_HEAD;
    linear_backward(w->dnorm, G[head], NULL, w->logits, w->lnf, P[head], N, C, d->Vp);
    for (size_t i = 0; i < NC; i++) w->dres[i] = 0.0;
    norm_backward(d, w->dres, G[REF_LNFW], block(d, G, REF_LNFB, 0), w->dnorm, w->resid + d->L * NC, P[REF_LNFW],
                  w->lnf_mean, w->lnf_rstd);
    for (size_t l = d->L; l-- > 0;) {
        double *x = w->resid + l * NC, *ln1 = w->ln1 + l * NC, *ln2 = w->ln2 + l * NC;
        double *qkv = w->qkv + l * N * d->W, *atty = w->atty + l * N * d->A, *mid = w->mid + l * NC;
        double *prob = w->prob + l * d->B * d->H * d->T * d->T, *fch = w->fch + l * N * d->up, *act = w->act + l * N * d->F;
        /* dres holds dloss/d(next); through the residual add it is also
         * dloss/d(mid)'s share from the skip path, and the MLP adds its own */
        linear_backward(w->dact, block(d, G, REF_PROJW, l), block(d, G, REF_PROJB, l), w->dres, act,
                        block(d, P, REF_PROJW, l), N, d->F, C);
        if (d->swiglu) swiglu_backward(w->dfch, w->dact, fch, N, d->F);
        else gelu_backward(w->dfch, fch, w->dact, N * d->F);
        linear_backward(w->dnorm, block(d, G, REF_FCW, l), block(d, G, REF_FCB, l), w->dfch, ln2, block(d, P, REF_FCW, l), N,
                        C, d->up);
        norm_backward(d, w->dres, block(d, G, REF_LN2W, l), block(d, G, REF_LN2B, l), w->dnorm, mid,
                      block(d, P, REF_LN2W, l), w->ln2_mean + l * N, w->ln2_rstd + l * N);
        /* dres now holds dloss/d(mid): the same for x through the skip path,
         * and attention adds its own */
        linear_backward(w->datty, block(d, G, REF_ATTW, l), block(d, G, REF_ATTB, l), w->dres, atty,
                        block(d, P, REF_ATTW, l), N, d->A, C);
        attention_backward(w->dqkv, w->datty, prob, qkv, w->dp, d);
        /* dloss/d(the rotated q and k) back to the projection's output */
        if (d->rope) rope_rotate(w->dqkv, d, -1.0);
        linear_backward(w->dnorm, block(d, G, REF_QKVW, l), block(d, G, REF_QKVB, l), w->dqkv, ln1,
                        block(d, P, REF_QKVW, l), N, C, d->W);
        norm_backward(d, w->dres, block(d, G, REF_LN1W, l), block(d, G, REF_LN1B, l), w->dnorm, x,
                      block(d, P, REF_LN1W, l), w->ln1_mean + l * N, w->ln1_rstd + l * N);
    }
    embedding_backward(G[REF_WTE], block(d, G, REF_WPE, 0), w->dres, inputs, d);
}

double ref_model_loss_grads(const ref_config *c, double *const params[REF_COUNT], double *const grads[REF_COUNT],
                            const int32_t *inputs, const int32_t *targets)
{
    dims d;
    if (dims_of(c, &d) != 0 || !params || !inputs || !targets) return NAN;
    for (int i = 0; i < REF_COUNT; i++)
        if (d.sizes[i] > 0 && (!params[i] || (grads && !grads[i]))) return NAN;
    for (size_t n = 0; n < d.N; n++)
        if (inputs[n] < 0 || (size_t)inputs[n] >= d.V || targets[n] < 0 || (size_t)targets[n] >= d.V) return NAN;
    workspace w;
    if (workspace_alloc(&w, &d) != 0) return NAN;
    double loss = model_forward(&d, params, &w, inputs, targets);
    if (grads) model_backward(&d, params, grads, &w, inputs, targets);
    free(w.base);
    return loss;
}
