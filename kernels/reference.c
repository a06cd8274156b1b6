/* CPU references of the kernels, float64.  See reference.h. */
#include <math.h>
#include <stdlib.h>
#include "reference.h"

void ref_embedding_forward(double *out, const int32_t *ids, const double *wte, const double *wpe,
                           int B, int T, int C, int V) {
    for (int b = 0; b < B; b++)
        for (int t = 0; t < T; t++) {
            const int n = b * T + t, id = ids[n];
            for (int c = 0; c < C; c++)
                out[(size_t)n * C + c] = (id < 0 || id >= V)
                                             ? NAN
                                             : wte[(size_t)id * C + c] + (wpe ? wpe[(size_t)t * C + c] : 0.0);
        }
}

void ref_embedding_backward(double *dwte, double *dwpe, const double *dout, const int32_t *ids,
                            int B, int T, int C, int V) {
    for (int b = 0; b < B; b++)
        for (int t = 0; t < T; t++) {
            const int n = b * T + t, id = ids[n];
            const double *d = dout + (size_t)n * C;
            if (id >= 0 && id < V)
                for (int c = 0; c < C; c++) dwte[(size_t)id * C + c] += d[c];
            if (dwpe)
                for (int c = 0; c < C; c++) dwpe[(size_t)t * C + c] += d[c];
        }
}

void ref_layernorm_forward(double *out, double *mean, double *rstd, const double *x, const double *w,
                           const double *b, int N, int C, double eps) {
    for (int n = 0; n < N; n++) {
        const double *xr = x + (size_t)n * C;
        double m = 0.0, v = 0.0;
        for (int c = 0; c < C; c++) m += xr[c];
        m /= C;
        for (int c = 0; c < C; c++) v += (xr[c] - m) * (xr[c] - m);
        v /= C;
        const double r = 1.0 / sqrt(v + eps);
        for (int c = 0; c < C; c++) out[(size_t)n * C + c] = (xr[c] - m) * r * w[c] + (b ? b[c] : 0.0);
        if (mean) mean[n] = m;
        if (rstd) rstd[n] = r;
    }
}

void ref_layernorm_backward(double *dx, double *dw, double *db, const double *dy, const double *x,
                            const double *w, const double *mean, const double *rstd, int N, int C,
                            int dx_accumulate) {
    for (int n = 0; n < N; n++) {
        const double *xr = x + (size_t)n * C, *g = dy + (size_t)n * C;
        const double m = mean[n], r = rstd[n];
        double s1 = 0.0, s2 = 0.0;
        for (int c = 0; c < C; c++) {
            const double xh = (xr[c] - m) * r;
            s1 += g[c] * w[c];
            s2 += g[c] * w[c] * xh;
        }
        s1 /= C;
        s2 /= C;
        for (int c = 0; c < C; c++) {
            const double xh = (xr[c] - m) * r;
            const double v = r * (g[c] * w[c] - s1 - xh * s2);
            dx[(size_t)n * C + c] = dx_accumulate ? dx[(size_t)n * C + c] + v : v;
            dw[c] += g[c] * xh;
            if (db) db[c] += g[c];
        }
    }
}

void ref_rmsnorm_forward(double *out, double *rstd, const double *x, const double *w, int N, int C,
                         double eps) {
    for (int n = 0; n < N; n++) {
        const double *xr = x + (size_t)n * C;
        double q = 0.0;
        for (int c = 0; c < C; c++) q += xr[c] * xr[c];
        const double r = 1.0 / sqrt(q / C + eps);
        for (int c = 0; c < C; c++) out[(size_t)n * C + c] = xr[c] * r * w[c];
        if (rstd) rstd[n] = r;
    }
}

void ref_rmsnorm_backward(double *dx, double *dw, const double *dy, const double *x, const double *w,
                          const double *rstd, int N, int C, int dx_accumulate) {
    for (int n = 0; n < N; n++) {
        const double *xr = x + (size_t)n * C, *g = dy + (size_t)n * C;
        const double r = rstd[n];
        double s2 = 0.0;
        for (int c = 0; c < C; c++) s2 += g[c] * w[c] * xr[c] * r;
        s2 /= C;
        for (int c = 0; c < C; c++) {
            const double xh = xr[c] * r;
            const double v = r * (g[c] * w[c] - xh * s2);
            dx[(size_t)n * C + c] = dx_accumulate ? dx[(size_t)n * C + c] + v : v;
            dw[c] += g[c] * xh;
        }
    }
}

#define GELU_K 0.7978845608028654 /* sqrt(2/pi) */

void ref_gelu_forward(double *out, const double *x, size_t n) {
    for (size_t i = 0; i < n; i++) {
        const double u = GELU_K * (x[i] + 0.044715 * x[i] * x[i] * x[i]);
        out[i] = 0.5 * x[i] * (1.0 + tanh(u));
    }
}

void ref_gelu_backward(double *dx, const double *x, const double *dy, size_t n) {
    for (size_t i = 0; i < n; i++) {
        const double a = x[i];
        const double u = GELU_K * (a + 0.044715 * a * a * a);
        const double th = tanh(u);
        const double du = GELU_K * (1.0 + 3.0 * 0.044715 * a * a);
        dx[i] = dy[i] * (0.5 * (1.0 + th) + 0.5 * a * (1.0 - th * th) * du);
    }
}

static double sigmoid(double z) { return 1.0 / (1.0 + exp(-z)); }

void ref_swiglu_forward(double *out, const double *gate, const double *up, int N, int H, int ld) {
    for (int n = 0; n < N; n++)
        for (int h = 0; h < H; h++) {
            const double z = gate[(size_t)n * ld + h];
            out[(size_t)n * H + h] = z * sigmoid(z) * up[(size_t)n * ld + h];
        }
}

void ref_swiglu_backward(double *dgate, double *dup, const double *dout, const double *gate,
                         const double *up, int N, int H, int ld) {
    for (int n = 0; n < N; n++)
        for (int h = 0; h < H; h++) {
            const size_t i = (size_t)n * ld + h;
            const double z = gate[i], s = sigmoid(z), d = dout[(size_t)n * H + h];
            dgate[i] = d * up[i] * (s + z * s * (1.0 - s));
            dup[i] = d * z * s;
        }
}

void ref_residual_add(double *out, const double *a, const double *b, size_t n) {
    for (size_t i = 0; i < n; i++) out[i] = a[i] + b[i];
}

static void ref_rope(double *qkv, int B, int T, int H, int KV, int D, size_t ld, double theta, double sign) {
    const int half = D / 2;
    for (int n = 0; n < B * T; n++) {
        const int t = n % T;
        for (int h = 0; h < H + KV; h++) {
            double *x = qkv + (size_t)n * ld + (size_t)h * D;
            for (int i = 0; i < half; i++) {
                const double a = (double)t * pow(theta, -2.0 * i / D);
                const double c = cos(a), s = sign * sin(a), x1 = x[i], x2 = x[i + half];
                x[i] = x1 * c - x2 * s;
                x[i + half] = x2 * c + x1 * s;
            }
        }
    }
}

void ref_rope_forward(double *qkv, int B, int T, int H, int KV, int D, size_t ld, double theta) {
    ref_rope(qkv, B, T, H, KV, D, ld, theta, 1.0);
}

void ref_rope_backward(double *dqkv, int B, int T, int H, int KV, int D, size_t ld, double theta) {
    ref_rope(dqkv, B, T, H, KV, D, ld, theta, -1.0);
}

void ref_softmax_causal_forward(double *out, const double *s, int BH, int T, double scale) {
    for (int h = 0; h < BH; h++)
        for (int t = 0; t < T; t++) {
            const double *x = s + ((size_t)h * T + t) * T;
            double *o = out + ((size_t)h * T + t) * T;
            double mx = -INFINITY, sum = 0.0;
            for (int j = 0; j <= t; j++) mx = fmax(mx, scale * x[j]);
            for (int j = 0; j <= t; j++) sum += exp(scale * x[j] - mx);
            for (int j = 0; j < T; j++) o[j] = j <= t ? exp(scale * x[j] - mx) / sum : 0.0;
        }
}

void ref_softmax_causal_backward(double *ds, const double *p, const double *dp, int BH, int T,
                                 double scale) {
    for (int h = 0; h < BH; h++)
        for (int t = 0; t < T; t++) {
            const size_t r = ((size_t)h * T + t) * T;
            double dot = 0.0;
            for (int j = 0; j <= t; j++) dot += p[r + j] * dp[r + j];
            for (int j = 0; j < T; j++) ds[r + j] = j <= t ? scale * p[r + j] * (dp[r + j] - dot) : 0.0;
        }
}

/* row i of head h: p[j] = softmax_j(scale q_i.k_j), j <= i; returns the log-sum-exp */
static double ref_attn_row(double *p, const double *qi, const double *kh, int i, int D, size_t ldkv, double scale) {
    double mx = -INFINITY, sum = 0.0;
    for (int j = 0; j <= i; j++) {
        double s = 0.0;
        for (int d = 0; d < D; d++) s += qi[d] * kh[(size_t)j * ldkv + d];
        p[j] = scale * s;
        mx = fmax(mx, p[j]);
    }
    for (int j = 0; j <= i; j++) sum += exp(p[j] - mx);
    for (int j = 0; j <= i; j++) p[j] = exp(p[j] - mx) / sum;
    return mx + log(sum);
}

void ref_attention_forward(double *out, double *lse, const double *q, const double *k, const double *v, int B,
                           int T, int H, int KV, int D, size_t ldq, size_t ldkv, double scale) {
    double *p = malloc((size_t)(T > 0 ? T : 1) * sizeof *p);
    for (int b = 0; b < B; b++)
        for (int h = 0; h < H; h++) {
            const int kh = h / (H / KV);
            const double *kb = k + (size_t)b * T * ldkv + (size_t)kh * D, *vb = v + (size_t)b * T * ldkv + (size_t)kh * D;
            for (int i = 0; i < T; i++) {
                const double l = ref_attn_row(p, q + ((size_t)b * T + i) * ldq + (size_t)h * D, kb, i, D, ldkv, scale);
                if (lse) lse[((size_t)b * H + h) * T + i] = l;
                double *o = out + (((size_t)b * T + i) * H + h) * D;
                for (int d = 0; d < D; d++) {
                    double acc = 0.0;
                    for (int j = 0; j <= i; j++) acc += p[j] * vb[(size_t)j * ldkv + d];
                    o[d] = acc;
                }
            }
        }
    free(p);
}

void ref_attention_backward(double *dq, double *dk, double *dv, const double *dout, const double *q,
                            const double *k, const double *v, int B, int T, int H, int KV, int D, size_t ldq,
                            size_t ldkv, double scale) {
    double *p = malloc((size_t)(T > 0 ? T : 1) * sizeof *p), *dp = malloc((size_t)(T > 0 ? T : 1) * sizeof *dp);
    for (int b = 0; b < B; b++)
        for (int kh = 0; kh < KV; kh++)
            for (int t = 0; t < T; t++)
                for (int d = 0; d < D; d++) {
                    dk[((size_t)b * T + t) * ldkv + (size_t)kh * D + d] = 0.0;
                    dv[((size_t)b * T + t) * ldkv + (size_t)kh * D + d] = 0.0;
                }
    for (int b = 0; b < B; b++)
        for (int h = 0; h < H; h++) {
            const size_t koff = (size_t)b * T * ldkv + (size_t)(h / (H / KV)) * D;
            const double *kb = k + koff, *vb = v + koff;
            double *dkb = dk + koff, *dvb = dv + koff;
            for (int i = 0; i < T; i++) {
                const double *qi = q + ((size_t)b * T + i) * ldq + (size_t)h * D;
                const double *doi = dout + (((size_t)b * T + i) * H + h) * D;
                double *dqi = dq + ((size_t)b * T + i) * ldq + (size_t)h * D;
                ref_attn_row(p, qi, kb, i, D, ldkv, scale);
                double dsum = 0.0; /* sum_j p_j dp_j = dO_i . O_i */
                for (int j = 0; j <= i; j++) {
                    double s = 0.0;
                    for (int d = 0; d < D; d++) s += doi[d] * vb[(size_t)j * ldkv + d];
                    dp[j] = s;
                    dsum += p[j] * s;
                }
                for (int d = 0; d < D; d++) dqi[d] = 0.0;
                for (int j = 0; j <= i; j++) {
                    const double ds = scale * p[j] * (dp[j] - dsum);
                    for (int d = 0; d < D; d++) {
                        dqi[d] += ds * kb[(size_t)j * ldkv + d];
                        dkb[(size_t)j * ldkv + d] += ds * qi[d];
                        dvb[(size_t)j * ldkv + d] += p[j] * doi[d];
                    }
                }
            }
        }
    free(p);
    free(dp);
}

void ref_cross_entropy(double *loss, double *dlogits, const double *logits, const int32_t *targets,
                       int N, int V, int Vp, double dloss) {
    for (int n = 0; n < N; n++) {
        const double *x = logits + (size_t)n * Vp;
        const int tg = targets[n];
        double mx = -INFINITY, sum = 0.0;
        for (int v = 0; v < V; v++) mx = fmax(mx, x[v]);
        for (int v = 0; v < V; v++) sum += exp(x[v] - mx);
        const double lse = mx + log(sum);
        loss[n] = tg < 0 ? 0.0 : (tg < V ? lse - x[tg] : NAN);
        if (!dlogits) continue;
        double *d = dlogits + (size_t)n * Vp;
        for (int v = 0; v < Vp; v++)
            d[v] = (tg < 0 || v >= V) ? 0.0 : dloss * (exp(x[v] - lse) - (v == tg ? 1.0 : 0.0));
    }
}

void ref_adamw(double *p, double *m, double *v, const double *g, size_t n, double lr, double beta1,
               double beta2, double eps, double weight_decay, int step, double grad_scale) {
    const double bc1 = 1.0 - pow(beta1, step), bc2 = 1.0 - pow(beta2, step);
    for (size_t i = 0; i < n; i++) {
        const double gi = g[i] * grad_scale;
        m[i] = beta1 * m[i] + (1.0 - beta1) * gi;
        v[i] = beta2 * v[i] + (1.0 - beta2) * gi * gi;
        const double mh = m[i] / bc1, vh = v[i] / bc2;
        p[i] -= lr * (mh / (sqrt(vh) + eps) + weight_decay * p[i]);
    }
}
