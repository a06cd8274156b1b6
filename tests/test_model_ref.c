/* The float64 model reference (validator/model_ref.c), the oracle for the GPU
 * trainer's gradients, checked on tiny models of both families:
 *  - every gradient against finite differences of the loss, on a sample of
 *    elements of every tensor;
 *  - that the check has teeth: one analytic gradient nudged by 10x the
 *    tolerance fails it, in every tensor;
 *  - the forward against an independent composition of kernels/reference.c's
 *    ops (finite differences cannot see a consistent error in the forward,
 *    such as the wrong key/value head, the wrong gate half or scale);
 *  - causality, the grouped-query and SwiGLU layouts, ln V at a zero head,
 *    the padded vocabulary, overwriting, and bad input;
 *  - rotary positions (LLaMA-like, theta 1e4 and 5e5): the same gradient
 *    check, the forward against ref_rope_forward composed in, and that the
 *    rotation is really applied (it changes the loss).
 *
 * Finite differences: Richardson-extrapolated central differences,
 *   f' = (8 (f(x+h) - f(x-h)) - (f(x+2h) - f(x-2h))) / (12 h) + O(h^4),
 * with h = 2^-12 (about 2.4e-4).  Why not one central difference with
 * h ~ 1e-5: its rounding error is about eps |loss| / h = 2.2e-16 x 5 / 1e-5
 * ~ 1e-10 absolute (measured on these models: up to 1.5e-10), and these
 * models have gradient elements near 1e-5, which could then not be held to
 * 1e-6 relative.  The extrapolated form allows a larger h: rounding
 * ~18 eps |loss| / (12 h) ~ 7e-12, truncation h^4 |f^(5)| / 30 ~ 1e-16 |f^(5)|;
 * measured here: at most 8e-12 absolute, 5e-9 relative where |g| > 1e-4.
 *
 * Tolerance: an element passes when
 *   |fd - analytic| <= 1e-6 max(|fd|, |analytic|) + 1e-10.
 * 1e-6 relative is ~200x the worst measured; 1e-10 absolute is ~12x the
 * finite differences' measured noise floor and only decides for elements
 * below 1e-4 (the key bias's gradient is exactly 0: softmax ignores a
 * score shift common to a row; unused embedding rows' are 0 as well).
 * A real bug (a dropped term, a wrong index, a transpose, a missing
 * 1/sqrt(D)) moves most elements by O(1) relative, 1e6 times the tolerance;
 * a_wrong_gradient_is_detected shows that 1e-5 relative on one element of
 * any tensor already fails, and each of 18 deliberate small bugs tried in
 * model_ref.c (backward terms, head mapping, gate order, scale, eps, causal
 * mask, padded columns) failed at least one test here. */
#include "test_util.h"

#include "model_ref.h"
#include "reference.h"

#define FD_H 0x1p-12
#define REL_TOL 1e-6
#define ABS_TOL 1e-10
#define MAX_TOKENS 16
#define MAX_SAMPLES 64

static const char *const tensor_names[REF_COUNT] = {"WTE", "WPE", "LN1W", "LN1B", "QKVW", "QKVB", "ATTW", "ATTB", "LN2W",
                                                    "LN2B", "FCW", "FCB", "PROJW", "PROJB", "LNFW", "LNFB", "HEAD"};

/* GPT-2-like: LayerNorm, GELU, biases, learned positions, tied head, H = KV */
static ref_config gpt2_config(void)
{
    ref_config c = {.L = 2, .C = 16, .H = 4, .KV = 4, .D = 4, .F = 32, .V = 50, .Vp = 128, .maxT = 8, .B = 2, .T = 5,
                    .rms = 0, .swiglu = 0, .bias = 1, .learned_pos = 1, .tied = 1};
    return c;
}

/* LLaMA-like: RMSNorm, SwiGLU, no biases, no positions, untied head, KV = 2 < H = 4 */
static ref_config llama_config(void)
{
    ref_config c = {.L = 2, .C = 16, .H = 4, .KV = 2, .D = 4, .F = 24, .V = 50, .Vp = 128, .maxT = 8, .B = 2, .T = 5,
                    .rms = 1, .swiglu = 1, .bias = 0, .learned_pos = 0, .tied = 0};
    return c;
}

/* LLaMA-like with rotary positions of base theta */
static ref_config llama_rope_config(double theta)
{
    ref_config c = llama_config();
    c.rope = 1;
    c.rope_theta = theta;
    return c;
}

typedef struct {
    ref_config c;
    double *p[REF_COUNT], *g[REF_COUNT];
    int32_t inputs[MAX_TOKENS], targets[MAX_TOKENS];
} model;

/* splitmix64: a fixed, portable stream */
static uint64_t next_u64(uint64_t *s)
{
    uint64_t z = (*s += 0x9e3779b97f4a7c15ULL);
    z = (z ^ (z >> 30)) * 0xbf58476d1ce4e5b9ULL;
    z = (z ^ (z >> 27)) * 0x94d049bb133111ebULL;
    return z ^ (z >> 31);
}

static double uniform01(uint64_t *s) { return ((double)(next_u64(s) >> 11) + 0.5) / 9007199254740992.0; }

static double gaussian(uint64_t *s)
{
    double u1 = uniform01(s), u2 = uniform01(s);
    return sqrt(-2.0 * log(u1)) * cos(6.283185307179586 * u2);
}

static int is_norm_weight(int i) { return i == REF_LN1W || i == REF_LN2W || i == REF_LNFW; }
static int is_bias(int i)
{
    return i == REF_LN1B || i == REF_LN2B || i == REF_LNFB || i == REF_QKVB || i == REF_ATTB || i == REF_FCB ||
           i == REF_PROJB;
}

/* Parameters large enough that every op works off its linear regime (scores
 * of order 1, so attention is far from uniform; GELU and SiLU inputs of order
 * 1): linear weights N(0, 1/fan_in), embeddings and head N(0, 0.3^2), norm
 * weights 1 + N(0, 0.1^2), biases N(0, 0.1^2).  The padded vocabulary rows
 * are random too, so that ignoring them is tested, not assumed. */
static void model_init(model *m, ref_config c, uint64_t seed)
{
    static const int32_t inputs[MAX_TOKENS] = {7, 0, 7, 49, 13, 21, 7, 3, 49, 30, 11, 2, 5, 8, 1, 4};
    static const int32_t targets[MAX_TOKENS] = {0, 7, 49, 13, 2, 7, 3, 49, 30, 11, 2, 5, 8, 1, 4, 9};
    memset(m, 0, sizeof *m);
    m->c = c;
    assert_true(c.B * c.T <= MAX_TOKENS);
    for (int n = 0; n < c.B * c.T; n++) {
        m->inputs[n] = inputs[n] % c.V;
        m->targets[n] = targets[n] % c.V;
    }
    for (int i = 0; i < REF_COUNT; i++) {
        size_t size = ref_tensor_size(&c, i);
        if (size == 0) continue;
        m->p[i] = calloc(size, sizeof(double));
        m->g[i] = calloc(size, sizeof(double));
        assert_non_null(m->p[i]);
        assert_non_null(m->g[i]);
        double fan_in = i == REF_ATTW ? (double)c.H * c.D : i == REF_PROJW ? (double)c.F : (double)c.C;
        double scale = (i == REF_WTE || i == REF_WPE || i == REF_HEAD) ? 0.3 : 1.0 / sqrt(fan_in);
        for (size_t k = 0; k < size; k++)
            m->p[i][k] = is_norm_weight(i) ? 1.0 + 0.1 * gaussian(&seed) : is_bias(i) ? 0.1 * gaussian(&seed)
                                                                                    : scale * gaussian(&seed);
    }
}

static void model_free(model *m)
{
    for (int i = 0; i < REF_COUNT; i++) {
        free(m->p[i]);
        free(m->g[i]);
    }
}

static double loss_only(const model *m)
{
    return ref_model_loss_grads(&m->c, m->p, NULL, m->inputs, m->targets);
}

static double loss_and_grads(model *m)
{
    return ref_model_loss_grads(&m->c, m->p, m->g, m->inputs, m->targets);
}

/* dloss/dp[which][i], Richardson-extrapolated central differences (the
 * header comment says why) */
static double fd_derivative(const model *m, int which, size_t i)
{
    static const double steps[4] = {-2.0, -1.0, 1.0, 2.0};
    double *x = &m->p[which][i], saved = *x, f[4];
    for (int k = 0; k < 4; k++) {
        *x = saved + steps[k] * FD_H;
        f[k] = loss_only(m);
    }
    *x = saved;
    return (8.0 * (f[2] - f[1]) - (f[3] - f[0])) / (12.0 * FD_H);
}

static int gradient_ok(double fd, double analytic)
{
    return fabs(fd - analytic) <= REL_TOL * fmax(fabs(fd), fabs(analytic)) + ABS_TOL;
}

typedef struct {
    size_t idx[MAX_SAMPLES];
    int n;
} samples;

/* 1 when i is new to the sample */
static int pick(samples *s, size_t i, size_t size)
{
    if (i >= size || s->n == MAX_SAMPLES) return 0;
    for (int k = 0; k < s->n; k++)
        if (s->idx[k] == i) return 0;
    s->idx[s->n++] = i;
    return 1;
}

/* The elements of tensor `which` to check: its first and last, each layer's
 * first and last, the interesting rows (a used token's whole embedding row,
 * the last real vocabulary row, a padded row, a used and an unused position,
 * each of Q, K and V, both SwiGLU halves), and 8 more at random. */
static void sample_tensor(const model *m, int which, samples *s, uint64_t *rng)
{
    const ref_config *c = &m->c;
    size_t size = ref_tensor_size(c, which), C = (size_t)c->C, L = (size_t)c->L;
    size_t W = (size_t)(c->H + 2 * c->KV) * c->D, up = c->swiglu ? 2 * (size_t)c->F : (size_t)c->F;
    s->n = 0;
    if (size == 0) return;
    pick(s, 0, size);
    pick(s, size - 1, size);
    if (which >= REF_LN1W && which <= REF_PROJB)
        for (size_t l = 0; l < L; l++) {
            pick(s, l * (size / L), size);
            pick(s, (l + 1) * (size / L) - 1, size);
        }
    if (which == REF_WTE) {
        for (size_t k = 0; k < C; k++) pick(s, (size_t)m->inputs[0] * C + k, size);
        pick(s, (size_t)(c->V - 1) * C, size);
        pick(s, (size_t)c->V * C + 1, size);
    }
    if (which == REF_HEAD) {
        for (size_t k = 0; k < 4; k++) pick(s, (size_t)m->targets[1] * C + k, size);
        pick(s, (size_t)c->V * C + 2, size);
    }
    if (which == REF_WPE) {
        for (size_t k = 0; k < 4; k++) pick(s, (size_t)(c->T - 1) * C + k, size);
        pick(s, (size_t)c->T * C, size);
    }
    if (which == REF_QKVW || which == REF_QKVB) {
        size_t rows[3] = {(size_t)c->H * c->D - 1, (size_t)(c->H + c->KV) * c->D - 1, (size_t)(c->H + c->KV) * c->D};
        for (size_t l = 0; l < L; l++)
            for (int r = 0; r < 3; r++)
                pick(s, which == REF_QKVB ? l * W + rows[r] : (l * W + rows[r]) * C + rows[r] % C, size);
    }
    if ((which == REF_FCW || which == REF_FCB) && c->swiglu) {
        size_t rows[2] = {(size_t)c->F - 1, (size_t)c->F};
        for (size_t l = 0; l < L; l++)
            for (int r = 0; r < 2; r++)
                pick(s, which == REF_FCB ? l * up + rows[r] : (l * up + rows[r]) * C + 3, size);
    }
    for (int added = 0, tries = 0; added < 8 && tries < 1000; tries++)
        added += pick(s, (size_t)(next_u64(rng) % size), size);
}

/* Every sampled element of every tensor against finite differences. */
static void check_family(ref_config c, const char *family)
{
    model m;
    model_init(&m, c, 2024);
    double loss = loss_and_grads(&m);
    assert_true(isfinite(loss));
    uint64_t rng = 99;
    double worst_rel = 0.0, worst_abs = 0.0;
    int checked = 0, failed = 0;
    for (int i = 0; i < REF_COUNT; i++) {
        samples s;
        sample_tensor(&m, i, &s, &rng);
        if (ref_tensor_size(&c, i) > 0) assert_true(s.n >= 8);
        for (int k = 0; k < s.n; k++) {
            double fd = fd_derivative(&m, i, s.idx[k]), an = m.g[i][s.idx[k]], err = fabs(fd - an);
            double scale = fmax(fabs(fd), fabs(an));
            checked++;
            if (err > worst_abs) worst_abs = err;
            if (scale > 1e-4 && err / scale > worst_rel) worst_rel = err / scale;
            if (!gradient_ok(fd, an)) {
                print_error("%s %s[%zu]: analytic %.12e, finite differences %.12e\n", family, tensor_names[i], s.idx[k], an,
                            fd);
                failed++;
            }
        }
    }
    print_message("%s: loss %.6f, %d elements checked, worst relative error %.2e (|g| > 1e-4), worst absolute %.2e\n",
                  family, loss, checked, worst_rel, worst_abs);
    model_free(&m);
    assert_int_equal(failed, 0);
}

static void gpt2_gradients_match_finite_differences(void **state)
{
    (void)state;
    check_family(gpt2_config(), "gpt2");
}

static void llama_gradients_match_finite_differences(void **state)
{
    (void)state;
    check_family(llama_config(), "llama");
}

static void llama_rope_gradients_match_finite_differences(void **state)
{
    (void)state;
    check_family(llama_rope_config(10000.0), "llama rope 1e4");
    check_family(llama_rope_config(500000.0), "llama rope 5e5");
}

/* The comparison can fail: in every tensor, the sampled element with the
 * largest gradient passes, and fails once its analytic value is off by
 * 1e-5 relative (10x the tolerance). */
static void a_wrong_gradient_is_detected(void **state)
{
    (void)state;
    ref_config configs[3] = {gpt2_config(), llama_config(), llama_rope_config(10000.0)};
    for (int f = 0; f < 3; f++) {
        model m;
        model_init(&m, configs[f], 7);
        loss_and_grads(&m);
        uint64_t rng = 5;
        for (int i = 0; i < REF_COUNT; i++) {
            samples s;
            sample_tensor(&m, i, &s, &rng);
            if (s.n == 0) continue;
            size_t best = s.idx[0];
            for (int k = 1; k < s.n; k++)
                if (fabs(m.g[i][s.idx[k]]) > fabs(m.g[i][best])) best = s.idx[k];
            double fd = fd_derivative(&m, i, best), an = m.g[i][best];
            assert_true(fabs(an) > 1e-3);
            assert_true(gradient_ok(fd, an));
            assert_false(gradient_ok(fd, an * (1.0 + 1e-5)));
            assert_false(gradient_ok(fd, an * (1.0 - 1e-5)));
        }
        model_free(&m);
    }
}

/* ---- the forward, independently: kernels/reference.c's ops composed ----- */

/* y[N][out] = x[N][in] W^T + b */
static void matmul(double *y, const double *x, const double *w, const double *b, int N, int in, int out)
{
    for (int n = 0; n < N; n++)
        for (int o = 0; o < out; o++) {
            double acc = b ? b[o] : 0.0;
            for (int i = 0; i < in; i++) acc += x[(size_t)n * in + i] * w[(size_t)o * in + i];
            y[(size_t)n * out + o] = acc;
        }
}

static const double *layer_block(const model *m, int which, int l)
{
    size_t size = ref_tensor_size(&m->c, which);
    return size ? m->p[which] + (size_t)l * (size / (size_t)m->c.L) : NULL;
}

static void norm(const model *m, double *out, const double *x, const double *w, const double *b, double *mean, double *rstd)
{
    int N = m->c.B * m->c.T;
    if (m->c.rms) ref_rmsnorm_forward(out, rstd, x, w, N, m->c.C, 1e-5);
    else ref_layernorm_forward(out, mean, rstd, x, w, b, N, m->c.C, 1e-5);
}

static double kernel_reference_loss(const model *m)
{
    const ref_config *c = &m->c;
    int N = c->B * c->T, C = c->C, A = c->H * c->D, W = (c->H + 2 * c->KV) * c->D, up = c->swiglu ? 2 * c->F : c->F;
    double *x = calloc((size_t)N * C, sizeof *x), *h = calloc((size_t)N * C, sizeof *h);
    double *branch = calloc((size_t)N * C, sizeof *branch), *qkv = calloc((size_t)N * W, sizeof *qkv);
    double *atty = calloc((size_t)N * A, sizeof *atty), *fch = calloc((size_t)N * up, sizeof *fch);
    double *act = calloc((size_t)N * c->F, sizeof *act), *logits = calloc((size_t)N * c->Vp, sizeof *logits);
    double *losses = calloc((size_t)N, sizeof *losses), *mean = calloc((size_t)N, sizeof *mean);
    double *rstd = calloc((size_t)N, sizeof *rstd);
    assert_true(x && h && branch && qkv && atty && fch && act && logits && losses && mean && rstd);
    ref_embedding_forward(x, m->inputs, m->p[REF_WTE], c->learned_pos ? m->p[REF_WPE] : NULL, c->B, c->T, C, c->V);
    for (int l = 0; l < c->L; l++) {
        norm(m, h, x, layer_block(m, REF_LN1W, l), layer_block(m, REF_LN1B, l), mean, rstd);
        matmul(qkv, h, layer_block(m, REF_QKVW, l), layer_block(m, REF_QKVB, l), N, C, W);
        if (c->rope) ref_rope_forward(qkv, c->B, c->T, c->H, c->KV, c->D, (size_t)W, c->rope_theta);
        ref_attention_forward(atty, NULL, qkv, qkv + A, qkv + (size_t)(c->H + c->KV) * c->D, c->B, c->T, c->H, c->KV, c->D,
                              (size_t)W, (size_t)W, 1.0 / sqrt((double)c->D));
        matmul(branch, atty, layer_block(m, REF_ATTW, l), layer_block(m, REF_ATTB, l), N, A, C);
        ref_residual_add(x, x, branch, (size_t)N * C);
        norm(m, h, x, layer_block(m, REF_LN2W, l), layer_block(m, REF_LN2B, l), mean, rstd);
        matmul(fch, h, layer_block(m, REF_FCW, l), layer_block(m, REF_FCB, l), N, C, up);
        if (c->swiglu) ref_swiglu_forward(act, fch, fch + c->F, N, c->F, up);
        else ref_gelu_forward(act, fch, (size_t)N * c->F);
        matmul(branch, act, layer_block(m, REF_PROJW, l), layer_block(m, REF_PROJB, l), N, c->F, C);
        ref_residual_add(x, x, branch, (size_t)N * C);
    }
    norm(m, h, x, m->p[REF_LNFW], m->p[REF_LNFB], mean, rstd);
    matmul(logits, h, c->tied ? m->p[REF_WTE] : m->p[REF_HEAD], NULL, N, C, c->Vp);
    ref_cross_entropy(losses, NULL, logits, m->targets, N, c->V, c->Vp, 1.0);
    double total = 0.0;
    for (int n = 0; n < N; n++) total += losses[n];
    double *all[] = {x, h, branch, qkv, atty, fch, act, logits, losses, mean, rstd};
    for (size_t i = 0; i < sizeof all / sizeof all[0]; i++) free(all[i]);
    return total / N;
}

static void forward_matches_kernel_references(void **state)
{
    (void)state;
    ref_config configs[4] = {gpt2_config(), llama_config(), llama_rope_config(10000.0), llama_rope_config(500000.0)};
    for (int f = 0; f < 4; f++) {
        model m;
        model_init(&m, configs[f], 11);
        /* same textbook formulas, different loop orders: agreement to a few
         * hundred ulps of the loss */
        assert_close(loss_only(&m), kernel_reference_loss(&m), 1e-12);
        model_free(&m);
    }
}

/* ---- semantics finite differences cannot see ------------------------------ */

/* Causal: with one sequence, 5 x loss(T=5) - 4 x loss(first 4 tokens) is the
 * last token's loss alone, -log p(target) over the first V logits, so its
 * exp(-.) summed over every target is 1.  Attention to a later token, or the
 * padded columns taking part in the softmax, would move the sum off 1. */
static void attention_is_causal(void **state)
{
    (void)state;
    ref_config configs[2] = {gpt2_config(), llama_config()};
    for (int f = 0; f < 2; f++) {
        ref_config c5 = configs[f];
        c5.B = 1;
        ref_config c4 = c5;
        c4.T = 4;
        model m;
        model_init(&m, c5, 3);
        double s4 = 4.0 * ref_model_loss_grads(&c4, m.p, NULL, m.inputs, m.targets), sum = 0.0;
        for (int v = 0; v < c5.V; v++) {
            m.targets[4] = v;
            sum += exp(-(5.0 * loss_only(&m) - s4));
        }
        assert_close(sum, 1.0, 1e-12);
        model_free(&m);
    }
}

/* Query head h reads key/value head h / (H/KV), the QKV rows are
 * [Q | K | V], and SwiGLU's gate is the first F rows of the up-projection. */
static void grouped_query_and_swiglu_layouts(void **state)
{
    (void)state;
    model m;
    ref_config c = llama_config();
    model_init(&m, c, 17);
    size_t C = (size_t)c.C, A = (size_t)c.H * c.D, W = (size_t)(c.H + 2 * c.KV) * c.D, D = (size_t)c.D;
    size_t group = (size_t)(c.H / c.KV), up = 2 * (size_t)c.F;
    /* the heads of key/value head 0 (0 .. H/KV - 1) see no output projection */
    for (int l = 0; l < c.L; l++)
        for (size_t o = 0; o < C; o++)
            for (size_t k = 0; k < group * D; k++) m.p[REF_ATTW][(size_t)l * C * A + o * A + k] = 0.0;
    double base = loss_only(&m);
    /* key/value head kv's key and value rows in every layer, shifted by 0.5 */
    for (size_t kv = 0; kv < 2; kv++) {
        model shifted;
        model_init(&shifted, c, 17);
        for (int i = 0; i < REF_COUNT; i++)
            if (m.p[i]) memcpy(shifted.p[i], m.p[i], ref_tensor_size(&c, i) * sizeof(double));
        for (int l = 0; l < c.L; l++)
            for (size_t r = 0; r < D; r++)
                for (size_t k = 0; k < C; k++) {
                    size_t key_row = (size_t)(c.H + kv) * D + r, value_row = (size_t)(c.H + c.KV + kv) * D + r;
                    shifted.p[REF_QKVW][((size_t)l * W + key_row) * C + k] += 0.5;
                    shifted.p[REF_QKVW][((size_t)l * W + value_row) * C + k] += 0.5;
                }
        double loss = loss_only(&shifted);
        if (kv == 0) assert_true(loss == base); /* only the silenced heads read it */
        else assert_true(fabs(loss - base) > 1e-6);
        model_free(&shifted);
    }
    /* silu(gate) up is linear in up: doubling the up rows is doubling the
     * down projection (exactly: x2 is exact); doubling the gate rows is not */
    double scaled[3];
    for (int which = 0; which < 3; which++) {
        model s;
        model_init(&s, c, 17);
        for (int l = 0; l < c.L; l++) {
            if (which < 2)
                for (size_t k = 0; k < (size_t)c.F * C; k++)
                    s.p[REF_FCW][(size_t)l * up * C + (which == 0 ? (size_t)c.F * C : 0) + k] *= 2.0;
            else
                for (size_t k = 0; k < C * (size_t)c.F; k++) s.p[REF_PROJW][(size_t)l * C * c.F + k] *= 2.0;
        }
        scaled[which] = loss_only(&s);
        model_free(&s);
    }
    assert_true(scaled[0] == scaled[2]);
    assert_true(fabs(scaled[1] - scaled[2]) > 1e-6);
    model_free(&m);
}

/* RoPE is applied: with the same parameters it changes the loss, and the
 * base matters.  (Which positions, and that only q and k turn, is checked
 * against ref_rope_forward in forward_matches_kernel_references.  Nothing
 * here can tell t = n mod T from t = n: a score q_t . k_u depends on t - u
 * only, so shifting a whole sequence's positions changes neither the loss
 * nor a gradient beyond rounding.) */
static void rope_is_applied(void **state)
{
    (void)state;
    model m;
    model_init(&m, llama_config(), 41);
    double plain = loss_only(&m);
    m.c = llama_rope_config(10000.0);
    double rope4 = loss_only(&m);
    m.c = llama_rope_config(500000.0);
    double rope5 = loss_only(&m);
    assert_true(isfinite(plain) && isfinite(rope4) && isfinite(rope5));
    assert_true(fabs(rope4 - plain) > 1e-6);
    assert_true(fabs(rope5 - plain) > 1e-6);
    assert_true(fabs(rope5 - rope4) > 1e-6);
    model_free(&m);
}

/* A zero head makes every logit 0: the loss is ln V, whatever the rest. */
static void zero_head_gives_ln_v(void **state)
{
    (void)state;
    ref_config configs[2] = {gpt2_config(), llama_config()};
    for (int f = 0; f < 2; f++) {
        model m;
        model_init(&m, configs[f], 23);
        int head = m.c.tied ? REF_WTE : REF_HEAD;
        memset(m.p[head], 0, ref_tensor_size(&m.c, head) * sizeof(double));
        assert_close(loss_and_grads(&m), log((double)m.c.V), 1e-15);
        model_free(&m);
    }
}

/* The padded rows of WTE and HEAD: their gradients are exactly 0, and their
 * values do not reach the loss. */
static void padded_vocabulary_is_ignored(void **state)
{
    (void)state;
    ref_config configs[2] = {gpt2_config(), llama_config()};
    for (int f = 0; f < 2; f++) {
        model m;
        model_init(&m, configs[f], 29);
        double loss = loss_and_grads(&m);
        size_t first = (size_t)m.c.V * m.c.C, end = (size_t)m.c.Vp * m.c.C;
        int tables[2] = {REF_WTE, REF_HEAD};
        for (int t = 0; t < 2; t++) {
            if (!m.g[tables[t]]) continue;
            for (size_t k = first; k < end; k++) assert_true(m.g[tables[t]][k] == 0.0);
            for (size_t k = first; k < end; k++) m.p[tables[t]][k] *= 1e3;
        }
        assert_true(loss_only(&m) == loss);
        model_free(&m);
    }
}

/* grads are written whatever they held; the loss does not depend on asking
 * for them. */
static void gradients_are_overwritten(void **state)
{
    (void)state;
    ref_config configs[2] = {gpt2_config(), llama_config()};
    for (int f = 0; f < 2; f++) {
        model m;
        model_init(&m, configs[f], 31);
        double loss = loss_and_grads(&m);
        double *first[REF_COUNT] = {0};
        for (int i = 0; i < REF_COUNT; i++) {
            size_t size = ref_tensor_size(&m.c, i);
            if (!size) continue;
            first[i] = malloc(size * sizeof(double));
            assert_non_null(first[i]);
            memcpy(first[i], m.g[i], size * sizeof(double));
            for (size_t k = 0; k < size; k++) m.g[i][k] = NAN;
        }
        assert_true(loss_and_grads(&m) == loss);
        assert_true(loss_only(&m) == loss);
        for (int i = 0; i < REF_COUNT; i++) {
            if (first[i]) assert_memory_equal(first[i], m.g[i], ref_tensor_size(&m.c, i) * sizeof(double));
            free(first[i]);
        }
        model_free(&m);
    }
}

static void tensor_sizes(void **state)
{
    (void)state;
    ref_config g = gpt2_config(), l = llama_config();
    /* GPT-2-like: everything but the head; up = F */
    assert_int_equal(ref_tensor_size(&g, REF_WTE), 128 * 16);
    assert_int_equal(ref_tensor_size(&g, REF_WPE), 8 * 16);
    assert_int_equal(ref_tensor_size(&g, REF_LN1B), 2 * 16);
    assert_int_equal(ref_tensor_size(&g, REF_QKVW), 2 * 48 * 16);
    assert_int_equal(ref_tensor_size(&g, REF_QKVB), 2 * 48);
    assert_int_equal(ref_tensor_size(&g, REF_FCW), 2 * 32 * 16);
    assert_int_equal(ref_tensor_size(&g, REF_PROJW), 2 * 16 * 32);
    assert_int_equal(ref_tensor_size(&g, REF_LNFB), 16);
    assert_int_equal(ref_tensor_size(&g, REF_HEAD), 0);
    /* LLaMA-like: no positions, no biases of any kind, (H + 2 KV) D = 32, up = 2F, a head */
    assert_int_equal(ref_tensor_size(&l, REF_WPE), 0);
    int absent[] = {REF_LN1B, REF_QKVB, REF_ATTB, REF_LN2B, REF_FCB, REF_PROJB, REF_LNFB};
    for (size_t i = 0; i < sizeof absent / sizeof absent[0]; i++) assert_int_equal(ref_tensor_size(&l, absent[i]), 0);
    assert_int_equal(ref_tensor_size(&l, REF_QKVW), 2 * 32 * 16);
    assert_int_equal(ref_tensor_size(&l, REF_ATTW), 2 * 16 * 16);
    assert_int_equal(ref_tensor_size(&l, REF_FCW), 2 * 48 * 16);
    assert_int_equal(ref_tensor_size(&l, REF_PROJW), 2 * 16 * 24);
    assert_int_equal(ref_tensor_size(&l, REF_HEAD), 128 * 16);
    assert_int_equal(ref_tensor_size(&l, -1), 0);
    assert_int_equal(ref_tensor_size(&l, REF_COUNT), 0);
    assert_int_equal(ref_tensor_size(NULL, REF_WTE), 0);
}

/* Bad input: NaN, and grads left as they were. */
static void bad_input_returns_nan(void **state)
{
    (void)state;
    model m;
    model_init(&m, llama_config(), 37);
    for (int i = 0; i < REF_COUNT; i++)
        for (size_t k = 0; m.g[i] && k < ref_tensor_size(&m.c, i); k++) m.g[i][k] = 42.0;
    ref_config good = m.c;
    ref_config bad[8];
    for (int i = 0; i < 8; i++) bad[i] = good;
    bad[0].KV = 3;                       /* H % KV != 0 */
    bad[1].KV = 0;
    bad[2].L = 0;
    bad[3].Vp = good.V - 1;              /* padding smaller than the vocabulary */
    bad[4].learned_pos = 1;              /* T = 5 > maxT = 4 */
    bad[4].maxT = 4;
    bad[5].T = 0;
    bad[6].L = bad[6].C = bad[6].F = 0x7fffffff; /* sizes overflow */
    bad[7].D = -4;
    for (int i = 0; i < 8; i++) {
        assert_true(isnan(ref_model_loss_grads(&bad[i], m.p, m.g, m.inputs, m.targets)));
        assert_int_equal(ref_tensor_size(&bad[i], REF_WTE), 0);
    }
    assert_true(isnan(ref_model_loss_grads(NULL, m.p, m.g, m.inputs, m.targets)));
    assert_true(isnan(ref_model_loss_grads(&good, NULL, m.g, m.inputs, m.targets)));
    assert_true(isnan(ref_model_loss_grads(&good, m.p, m.g, NULL, m.targets)));
    assert_true(isnan(ref_model_loss_grads(&good, m.p, m.g, m.inputs, NULL)));
    /* RoPE needs an even head size and a finite base > 0 */
    ref_config bad_rope[5];
    for (int i = 0; i < 5; i++) bad_rope[i] = llama_rope_config(10000.0);
    bad_rope[0].D = 3;
    bad_rope[1].rope_theta = 0.0;
    bad_rope[2].rope_theta = -10000.0;
    bad_rope[3].rope_theta = NAN;
    bad_rope[4].rope_theta = INFINITY;
    for (int i = 0; i < 5; i++) {
        assert_true(isnan(ref_model_loss_grads(&bad_rope[i], m.p, m.g, m.inputs, m.targets)));
        assert_int_equal(ref_tensor_size(&bad_rope[i], REF_WTE), 0);
    }
    /* without rope, neither is asked for */
    ref_config no_rope = good;
    no_rope.rope_theta = -1.0;
    assert_true(isfinite(ref_model_loss_grads(&no_rope, m.p, NULL, m.inputs, m.targets)));
    no_rope.D = 3;
    assert_true(ref_tensor_size(&no_rope, REF_QKVW) > 0);
    /* tokens outside [0, V): padded rows are not tokens */
    int32_t saved = m.inputs[3];
    int32_t bad_tokens[3] = {-1, good.V, good.Vp - 1};
    for (int k = 0; k < 3; k++) {
        m.inputs[3] = bad_tokens[k];
        assert_true(isnan(loss_and_grads(&m)));
    }
    m.inputs[3] = saved;
    saved = m.targets[9];
    for (int k = 0; k < 3; k++) {
        m.targets[9] = bad_tokens[k];
        assert_true(isnan(loss_and_grads(&m)));
    }
    m.targets[9] = saved;
    /* a missing tensor, a missing gradient */
    double *p = m.p[REF_QKVW];
    m.p[REF_QKVW] = NULL;
    assert_true(isnan(loss_and_grads(&m)));
    m.p[REF_QKVW] = p;
    double *g = m.g[REF_LN1W];
    m.g[REF_LN1W] = NULL;
    assert_true(isnan(loss_and_grads(&m)));
    m.g[REF_LN1W] = g;
    for (int i = 0; i < REF_COUNT; i++)
        for (size_t k = 0; m.g[i] && k < ref_tensor_size(&m.c, i); k++) assert_true(m.g[i][k] == 42.0);
    /* and the good config still works */
    assert_true(isfinite(loss_and_grads(&m)));
    model_free(&m);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(tensor_sizes),
        cmocka_unit_test(gpt2_gradients_match_finite_differences),
        cmocka_unit_test(llama_gradients_match_finite_differences),
        cmocka_unit_test(llama_rope_gradients_match_finite_differences),
        cmocka_unit_test(a_wrong_gradient_is_detected),
        cmocka_unit_test(forward_matches_kernel_references),
        cmocka_unit_test(attention_is_causal),
        cmocka_unit_test(grouped_query_and_swiglu_layouts),
        cmocka_unit_test(rope_is_applied),
        cmocka_unit_test(zero_head_gives_ln_v),
        cmocka_unit_test(padded_vocabulary_is_ignored),
        cmocka_unit_test(gradients_are_overwritten),
        cmocka_unit_test(bad_input_returns_nan),
    };
    return cmocka_run_group_tests_name("model_ref", tests, NULL, NULL);
}
