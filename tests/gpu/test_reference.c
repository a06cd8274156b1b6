/* CPU-only check of kernels/reference.c: every backward reference against central finite
 * differences of its forward reference (float64), and AdamW against its closed form at
 * step 1.  The GPU kernels are tested against these references, so the references
 * themselves must be right.  Runs without a GPU. */
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include "reference.h"

static int failures = 0;
static uint64_t rng_state = 0x9e3779b97f4a7c15ull;

static double urand(void) { /* uniform in [-1, 1) */
    rng_state ^= rng_state << 13;
    rng_state ^= rng_state >> 7;
    rng_state ^= rng_state << 17;
    return (double)(rng_state >> 11) / 9007199254740992.0 * 2.0 - 1.0;
}
static double *rnd(size_t n, double scale) {
    double *a = malloc(n * sizeof *a);
    for (size_t i = 0; i < n; i++) a[i] = urand() * scale;
    return a;
}
static double *zeros(size_t n) { return calloc(n, sizeof(double)); }

/* loss closure: L(ctx) = sum(out * R) of some forward */
typedef double (*loss_fn)(void *ctx);

/* compare analytic gradient g[n] with central differences of f w.r.t. x[n] */
static void fd_check(const char *name, loss_fn f, void *ctx, double *x, const double *g, size_t n) {
    double num = 0.0, den = 0.0, maxabs = 0.0;
    for (size_t i = 0; i < n; i++) {
        const double x0 = x[i], h = 1e-5 * fmax(1.0, fabs(x0));
        x[i] = x0 + h;
        const double fp = f(ctx);
        x[i] = x0 - h;
        const double fm = f(ctx);
        x[i] = x0;
        const double fd = (fp - fm) / (2.0 * h);
        num += (fd - g[i]) * (fd - g[i]);
        den += fd * fd;
        if (fabs(fd - g[i]) > maxabs) maxabs = fabs(fd - g[i]);
    }
    const double rel = den > 0 ? sqrt(num / den) : sqrt(num);
    const int ok = rel < 1e-6 && isfinite(rel);
    printf("%-32s n=%-6zu rel_err=%.2e max_abs=%.2e  %s\n", name, n, rel, maxabs, ok ? "PASS" : "FAIL");
    if (!ok) failures++;
}

static double dot(const double *a, const double *b, size_t n) {
    double s = 0.0;
    for (size_t i = 0; i < n; i++) s += a[i] * b[i];
    return s;
}

/* ------------------------------------------------------------ layernorm */
struct norm_ctx { int N, C, rms; double *x, *w, *b, *R, *out; };
static double norm_loss(void *p) {
    struct norm_ctx *c = p;
    if (c->rms) ref_rmsnorm_forward(c->out, NULL, c->x, c->w, c->N, c->C, 1e-5);
    else ref_layernorm_forward(c->out, NULL, NULL, c->x, c->w, c->b, c->N, c->C, 1e-5);
    return dot(c->out, c->R, (size_t)c->N * c->C);
}
static void check_norm(int rms) {
    const int N = 3, C = 7;
    const size_t nc = (size_t)N * C;
    struct norm_ctx c = {N, C, rms, rnd(nc, 2.0), rnd(C, 1.0), rnd(C, 1.0), rnd(nc, 1.0), zeros(nc)};
    double *mean = zeros(N), *rstd = zeros(N), *dx = zeros(nc), *dw = zeros(C), *db = zeros(C);
    if (rms) {
        ref_rmsnorm_forward(c.out, rstd, c.x, c.w, N, C, 1e-5);
        ref_rmsnorm_backward(dx, dw, c.R, c.x, c.w, rstd, N, C, 0);
    } else {
        ref_layernorm_forward(c.out, mean, rstd, c.x, c.w, c.b, N, C, 1e-5);
        ref_layernorm_backward(dx, dw, db, c.R, c.x, c.w, mean, rstd, N, C, 0);
    }
    fd_check(rms ? "rmsnorm_backward dx" : "layernorm_backward dx", norm_loss, &c, c.x, dx, nc);
    fd_check(rms ? "rmsnorm_backward dweight" : "layernorm_backward dweight", norm_loss, &c, c.w, dw, C);
    if (!rms) fd_check("layernorm_backward dbias", norm_loss, &c, c.b, db, C);
    /* dx_accumulate adds onto what is there */
    double *d0 = rnd(nc, 1.0), *acc = malloc(nc * sizeof *acc);
    memcpy(acc, d0, nc * sizeof *acc);
    if (rms) ref_rmsnorm_backward(acc, dw, c.R, c.x, c.w, rstd, N, C, 1);
    else ref_layernorm_backward(acc, dw, db, c.R, c.x, c.w, mean, rstd, N, C, 1);
    double err = 0.0;
    for (size_t i = 0; i < nc; i++) err = fmax(err, fabs(acc[i] - d0[i] - dx[i]));
    printf("%-32s max_abs=%.2e  %s\n", rms ? "rmsnorm_backward accumulate" : "layernorm_backward accumulate", err,
           err < 1e-12 ? "PASS" : "FAIL");
    if (err >= 1e-12) failures++;
    free(c.x); free(c.w); free(c.b); free(c.R); free(c.out); free(mean); free(rstd);
    free(dx); free(dw); free(db); free(d0); free(acc);
}

/* ------------------------------------------------------------ gelu, swiglu */
struct ew_ctx { int N, H, ld; double *x, *up, *R, *out; };
static double gelu_loss(void *p) {
    struct ew_ctx *c = p;
    ref_gelu_forward(c->out, c->x, (size_t)c->N);
    return dot(c->out, c->R, (size_t)c->N);
}
static double swiglu_loss(void *p) {
    struct ew_ctx *c = p;
    ref_swiglu_forward(c->out, c->x, c->up, c->N, c->H, c->ld);
    return dot(c->out, c->R, (size_t)c->N * c->H);
}
static void check_gelu(void) {
    const int n = 41;
    struct ew_ctx c = {n, 0, 0, rnd(n, 4.0), NULL, rnd(n, 1.0), zeros(n)};
    double *dx = zeros(n);
    ref_gelu_backward(dx, c.x, c.R, n);
    fd_check("gelu_backward", gelu_loss, &c, c.x, dx, n);
    free(c.x); free(c.R); free(c.out); free(dx);
}
static void check_swiglu(void) {
    const int N = 3, H = 5, ld = 2 * H; /* fused [N, 2H] layout: gate | up */
    double *buf = rnd((size_t)N * ld, 3.0);
    struct ew_ctx c = {N, H, ld, buf, buf + H, rnd((size_t)N * H, 1.0), zeros((size_t)N * H)};
    double *dbuf = zeros((size_t)N * ld);
    ref_swiglu_backward(dbuf, dbuf + H, c.R, c.x, c.up, N, H, ld);
    fd_check("swiglu_backward (fused layout)", swiglu_loss, &c, buf, dbuf, (size_t)N * ld);
    free(buf); free(c.R); free(c.out); free(dbuf);
}

/* ------------------------------------------------------------ rope */
/* fused qkv layout [B*T, (H+2KV)*D]; loss = sum(rope(qkv) * R): the backward of R must be
 * d loss / d qkv (the V columns pass through: gradient R there) */
struct rope_ctx { int B, T, H, KV, D; double *qkv, *R, *out; };
static double rope_loss(void *p) {
    struct rope_ctx *c = p;
    const size_t n = (size_t)c->B * c->T * (c->H + 2 * c->KV) * c->D;
    memcpy(c->out, c->qkv, n * sizeof *c->out);
    ref_rope_forward(c->out, c->B, c->T, c->H, c->KV, c->D, (size_t)(c->H + 2 * c->KV) * c->D, 10000.0);
    return dot(c->out, c->R, n);
}
static void check_rope(void) {
    const int B = 2, T = 5, H = 4, KV = 2, D = 6;
    const size_t ld = (size_t)(H + 2 * KV) * D, n = (size_t)B * T * ld;
    struct rope_ctx c = {B, T, H, KV, D, rnd(n, 2.0), rnd(n, 1.0), zeros(n)};
    double *g = malloc(n * sizeof *g);
    memcpy(g, c.R, n * sizeof *g);
    ref_rope_backward(g, B, T, H, KV, D, ld, 10000.0);
    fd_check("rope_backward (fused layout)", rope_loss, &c, c.qkv, g, n);
    free(c.qkv); free(c.R); free(c.out); free(g);
}

/* ------------------------------------------------------------ softmax */
struct sm_ctx { int BH, T; double scale; double *s, *R, *out; };
static double sm_loss(void *p) {
    struct sm_ctx *c = p;
    ref_softmax_causal_forward(c->out, c->s, c->BH, c->T, c->scale);
    return dot(c->out, c->R, (size_t)c->BH * c->T * c->T);
}
static void check_softmax(void) {
    const int BH = 2, T = 6;
    const size_t n = (size_t)BH * T * T;
    struct sm_ctx c = {BH, T, 0.7, rnd(n, 3.0), rnd(n, 1.0), zeros(n)};
    double *ds = zeros(n);
    ref_softmax_causal_forward(c.out, c.s, BH, T, c.scale);
    double *p = malloc(n * sizeof *p);
    memcpy(p, c.out, n * sizeof *p);
    ref_softmax_causal_backward(ds, p, c.R, BH, T, c.scale);
    fd_check("softmax_causal_backward", sm_loss, &c, c.s, ds, n);
    free(c.s); free(c.R); free(c.out); free(ds); free(p);
}

/* ------------------------------------------------------------ attention */
/* fused qkv layout [B*T, (H+2KV)*D] with GQA (H=4, KV=2); loss = sum(out * R) */
struct att_ctx { int B, T, H, KV, D; double scale; double *qkv, *R, *out; };
static double att_loss(void *p) {
    struct att_ctx *c = p;
    const size_t ld = (size_t)(c->H + 2 * c->KV) * c->D;
    ref_attention_forward(c->out, NULL, c->qkv, c->qkv + (size_t)c->H * c->D, c->qkv + (size_t)(c->H + c->KV) * c->D,
                          c->B, c->T, c->H, c->KV, c->D, ld, ld, c->scale);
    return dot(c->out, c->R, (size_t)c->B * c->T * c->H * c->D);
}
static void check_attention(int H, int KV) {
    const int B = 2, T = 5, D = 3;
    const size_t ld = (size_t)(H + 2 * KV) * D, nqkv = (size_t)B * T * ld, no = (size_t)B * T * H * D;
    struct att_ctx c = {B, T, H, KV, D, 0.6, rnd(nqkv, 1.5), rnd(no, 1.0), zeros(no)};
    double *g = zeros(nqkv), *lse = zeros((size_t)B * H * T);
    ref_attention_forward(c.out, lse, c.qkv, c.qkv + (size_t)H * D, c.qkv + (size_t)(H + KV) * D, B, T, H, KV, D, ld,
                          ld, c.scale);
    ref_attention_backward(g, g + (size_t)H * D, g + (size_t)(H + KV) * D, c.R, c.qkv, c.qkv + (size_t)H * D,
                           c.qkv + (size_t)(H + KV) * D, B, T, H, KV, D, ld, ld, c.scale);
    fd_check(KV < H ? "attention_backward dqkv (GQA)" : "attention_backward dqkv (MHA)", att_loss, &c, c.qkv, g, nqkv);
    /* lse against its definition at one row: b=1, h=H-1, t=T-1 */
    const int b = 1, h = H - 1, t = T - 1, kh = h / (H / KV);
    double s = 0.0;
    for (int j = 0; j <= t; j++) {
        double x = 0.0;
        for (int d = 0; d < D; d++)
            x += c.qkv[((size_t)b * T + t) * ld + (size_t)h * D + d] * c.qkv[((size_t)b * T + j) * ld + (size_t)(H + kh) * D + d];
        s += exp(c.scale * x);
    }
    const double e = fabs(log(s) - lse[((size_t)b * H + h) * T + t]);
    printf("%-32s abs_err=%.2e  %s\n", "attention_forward lse", e, e < 1e-12 ? "PASS" : "FAIL");
    if (e >= 1e-12) failures++;
    free(c.qkv); free(c.R); free(c.out); free(g); free(lse);
}

/* ------------------------------------------------------------ cross-entropy */
struct ce_ctx { int N, V, Vp; double dloss; double *x, *loss; const int32_t *tg; };
static double ce_loss(void *p) {
    struct ce_ctx *c = p;
    ref_cross_entropy(c->loss, NULL, c->x, c->tg, c->N, c->V, c->Vp, c->dloss);
    double s = 0.0;
    for (int i = 0; i < c->N; i++) s += c->dloss * c->loss[i];
    return s;
}
static void check_ce(void) {
    const int N = 4, V = 7, Vp = 9;
    const int32_t tg[4] = {3, 0, -1, 6}; /* -1: ignored */
    struct ce_ctx c = {N, V, Vp, 0.25, rnd((size_t)N * Vp, 3.0), zeros(N), tg};
    double *d = zeros((size_t)N * Vp);
    ref_cross_entropy(c.loss, d, c.x, tg, N, V, Vp, c.dloss);
    fd_check("cross_entropy dlogits", ce_loss, &c, c.x, d, (size_t)N * Vp);
    free(c.x); free(c.loss); free(d);
}

/* ------------------------------------------------------------ embedding */
struct emb_ctx { int B, T, C, V; double *wte, *wpe, *R, *out; const int32_t *ids; };
static double emb_loss(void *p) {
    struct emb_ctx *c = p;
    ref_embedding_forward(c->out, c->ids, c->wte, c->wpe, c->B, c->T, c->C, c->V);
    return dot(c->out, c->R, (size_t)c->B * c->T * c->C);
}
static void check_embedding(void) {
    const int B = 2, T = 3, C = 4, V = 5;
    const int32_t ids[6] = {1, 4, 1, 0, 1, 3};
    struct emb_ctx c = {B, T, C, V, rnd((size_t)V * C, 1.0), rnd((size_t)T * C, 1.0),
                        rnd((size_t)B * T * C, 1.0), zeros((size_t)B * T * C), ids};
    double *dwte = zeros((size_t)V * C), *dwpe = zeros((size_t)T * C);
    ref_embedding_backward(dwte, dwpe, c.R, ids, B, T, C, V);
    fd_check("embedding_backward dwte", emb_loss, &c, c.wte, dwte, (size_t)V * C);
    fd_check("embedding_backward dwpe", emb_loss, &c, c.wpe, dwpe, (size_t)T * C);
    free(c.wte); free(c.wpe); free(c.R); free(c.out); free(dwte); free(dwpe);
}

/* ------------------------------------------------------------ adamw */
static void check_adamw(void) {
    /* at step 1 with eps = 0: m/(1-b1) = g, v/(1-b2) = g^2, so p1 = p0 - lr (sign(g) + wd p0) */
    const size_t n = 17;
    double *p = rnd(n, 1.0), *g = rnd(n, 1.0), *m = zeros(n), *v = zeros(n), *p0 = malloc(n * sizeof *p0);
    memcpy(p0, p, n * sizeof *p0);
    const double lr = 1e-2, wd = 0.1;
    ref_adamw(p, m, v, g, n, lr, 0.9, 0.95, 0.0, wd, 1, 1.0);
    double err = 0.0;
    for (size_t i = 0; i < n; i++) {
        const double want = p0[i] - lr * ((g[i] > 0 ? 1.0 : -1.0) + wd * p0[i]);
        err = fmax(err, fabs(p[i] - want));
        err = fmax(err, fabs(m[i] - 0.1 * g[i]));
        err = fmax(err, fabs(v[i] - 0.05 * g[i] * g[i]));
    }
    printf("%-32s max_abs=%.2e  %s\n", "adamw step-1 closed form", err, err < 1e-12 ? "PASS" : "FAIL");
    if (err >= 1e-12) failures++;
    free(p); free(g); free(m); free(v); free(p0);
}

/* the host half conversions: every binary16 value survives h2f then f2h; ties go to even, at
 * the normal/subnormal boundary, in the subnormals and at the overflow threshold */
static void check_half(void) {
    int bad = 0;
    for (uint32_t h = 0; h < 65536; h++) {
        const uint16_t b = (uint16_t)h;
        if ((b & 0x7c00u) == 0x7c00u && (b & 0x3ffu)) { /* NaN: stays NaN */
            const float f = sx_ref_h2f(b);
            if (f == f || !((sx_ref_f2h(f) & 0x7c00u) == 0x7c00u && (sx_ref_f2h(f) & 0x3ffu))) bad++;
            continue;
        }
        if (sx_ref_f2h(sx_ref_h2f(b)) != b) bad++;
    }
    const struct { float f; uint16_t h; } cases[] = {
        {1.0f, 0x3c00u}, {-2.0f, 0xc000u}, {65504.0f, 0x7bffu}, {65519.99f, 0x7bffu}, {65520.0f, 0x7c00u},
        {1.0f + 0.00048828125f, 0x3c00u},          /* 1 + 2^-11: a tie, to even */
        {1.0f + 3 * 0.00048828125f, 0x3c02u},      /* 1 + 3 2^-11: a tie, to even (up) */
        {6.103515625e-05f, 0x0400u},              /* 2^-14: the smallest normal */
        {6.0975551605224609e-05f, 0x03ffu},       /* the largest subnormal */
        {5.9604644775390625e-08f, 0x0001u},       /* 2^-24 */
        {2.98023223876953125e-08f, 0x0000u},      /* 2^-25: a tie, to even (zero) */
        {8.94069671630859375e-08f, 0x0002u},      /* 1.5 2^-24: a tie, to even (2) */
        {1e-9f, 0x0000u}, {-0.0f, 0x8000u}, {1e30f, 0x7c00u}, {0.333251953125f, 0x3555u},
    };
    for (size_t i = 0; i < sizeof cases / sizeof cases[0]; i++)
        if (sx_ref_f2h(cases[i].f) != cases[i].h) {
            printf("  f2h(%.10g) = 0x%04x, want 0x%04x\n", cases[i].f, sx_ref_f2h(cases[i].f), cases[i].h);
            bad++;
        }
    printf("%-28s %s (65536 round trips, %zu rounding cases)\n", "half conversion", bad ? "FAIL" : "PASS",
           sizeof cases / sizeof cases[0]);
    if (bad) failures++;
}

int main(void) {
    printf("# references vs central finite differences (float64), tolerance rel_err < 1e-6\n");
    check_half();
    check_embedding();
    check_norm(0);
    check_norm(1);
    check_gelu();
    check_swiglu();
    check_rope();
    check_softmax();
    check_attention(4, 2);
    check_attention(3, 3);
    check_ce();
    check_adamw();
    if (failures) {
        printf("test_reference: %d FAILED\n", failures);
        return 1;
    }
    printf("test_reference: all passed\n");
    return 0;
}
