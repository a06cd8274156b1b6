/* GPU tests of kernels/ against the float64 CPU references of kernels/reference.c.
 *
 * For every kernel: fresh random inputs (seed printed; --seed S repeats a run), sizes that
 * are not powers of two, outputs poisoned with 0xFF bytes (NaN in bf16 and fp32) before the
 * launch, then every element is checked to be written and the relative error
 * ||gpu - ref||_2 / ||ref||_2 compared with a tolerance per output precision:
 *   bf16 outputs 1e-2 (bf16 rounding alone is ~2^-9 per element)
 *   fp16 outputs 2e-3 (half rounding ~2^-12)
 *   fp32 outputs 1e-5
 * Inputs are rounded to their storage type on the host first, so the reference sees exactly
 * the values the GPU sees.  Exit 1 if any check fails, 2 on a CUDA error.
 * RoPE has its own, tighter, derived tolerance (see test_rope).
 *   test_kernels [--quick] [--attention | --no-attention] [--rope] [--norm] [--embedding] [--elementwise] [--seed S]
 *     --quick: small sizes (for compute-sanitizer); --attention: the fused attention tests only;
 *     --no-attention: all but those; --rope: the RoPE tests only; --norm: the norm tests only;
 *     --elementwise: GELU, SwiGLU and the residual add only
 */
#include <string.h>
#include <time.h>
#include <vector>
#include "kernels.h"
#include "kernels_internal.h"
#include "reference.h"
#include "kernel_check.h"

int g_fail = 0, g_checks = 0;
bool g_quick = false;

/* the fused attention's checks, in test_kernels_attention.cu */
void test_attention_all(uint64_t seed);

/* ----------------------------------------------------------- embedding */

/* ids: 0 = skewed (V u^3: many repeats of small ids, like real text; the most frequent id
 * has ~2.7% of the tokens, so several segments of 32 tokens are merged), 1 = one id for
 * every token but every 97th, which is out of range (-1, V or 2V+5: skipped), so one id has
 * ~N segments, 2 = uniform.  path: 0 = automatic (the tiled path), 1 = the sorted path,
 * 2 = the tiled path, 6 = the grouped path (kernels_internal.h; the atomic experiment is checked
 * by dev/cuda/embedding_backward.cu).  W, CC, wpe_first: the grouped apply's
 * knobs (0, 0, -1 = automatic; any set selects path 6), Wn: its nominal distance between cuts
 * (0 = automatic).  The grouped path is also run as prepare + apply into poisoned buffers (bitwise
 * the one call), then applied a second time on the same grouping. */
static void test_embedding(int B, int T, int C, int V, bool use_wpe, sx_dtype gt, int ids_mode = 0, int path = 0,
                           int W = 0, int CC = 0, int wpe_first = -1, int Wn = 0) {
    const int N = B * T;
    char sz[120], knobs[48] = "";
    if (W || CC || wpe_first >= 0 || Wn)
        snprintf(knobs, sizeof knobs, " W=%d Wn=%d CC=%d wpe%s", W, Wn, CC, wpe_first == 0 ? "-last" : "-first");
    snprintf(sz, sizeof sz, "B*T=%dx%d C=%d V=%d%s%s%s", B, T, C, V,
             ids_mode == 1 ? " one-id" : ids_mode == 2 ? " uniform" : "",
             path == 1 ? " sorted" : path == 2 ? " tiled"
             : path == 6 || W || CC || wpe_first >= 0 || Wn ? " grouped" : "",
             knobs);
    if (W || CC || wpe_first >= 0 || Wn) path = 6;
    sx_embedding_apply_tune(W, Wn, CC, wpe_first, W == 12 ? 6 : 0); /* W = 12: the 6-block build */
    std::vector<int32_t> ids(N);
    for (int n = 0; n < N; n++) {
        if (ids_mode == 1)
            ids[n] = n % 97 != 13 ? V / 3 : (n % 3 == 0 ? -1 : n % 3 == 1 ? V : 2 * V + 5);
        else if (ids_mode == 2)
            ids[n] = (int32_t)(rng_u64() % (uint64_t)V);
        else
            ids[n] = (int32_t)(V * pow(rng_unif(), 3.0));
    }
    sx_embedding_backward_tune(path, 0, -1, -1, -1);
    vec wte = randn((size_t)V * C, 0, 0.5), wpe = randn((size_t)T * C, 0, 0.5);
    void *d_ids = up_i32(ids), *d_wte = up_bf16(wte), *d_wpe = use_wpe ? up_bf16(wpe) : NULL;
    void *d_out = dmalloc((size_t)N * C * 2);
    poison(d_out, (size_t)N * C * 2);
    CK(sx_embedding_forward((sx_bf16 *)d_out, (const int32_t *)d_ids, (const sx_bf16 *)d_wte,
                            (const sx_bf16 *)d_wpe, B, T, C, V, 0));
    vec ref((size_t)N * C);
    ref_embedding_forward(ref.data(), ids.data(), wte.data(), use_wpe ? wpe.data() : NULL, B, T, C, V);
    check(use_wpe ? "embedding_fwd.out" : "embedding_fwd(no wpe).out", sz, "bf16", down_bf16(d_out, ref.size()),
          ref, TOL_BF16);

    /* backward: accumulate into random initial grads */
    vec dout = randn((size_t)N * C, 0, 1.0);
    vec dwte = randn((size_t)V * C, 0, 0.01), dwpe = randn((size_t)T * C, 0, 0.01);
    void *d_dout = up_bf16(dout), *d_dwte = up(dwte, gt), *d_dwpe = use_wpe ? up(dwpe, gt) : NULL;
    const size_t wsb = sx_embedding_backward_workspace_bytes(N, C, V);
    void *ws = dmalloc(wsb);
    const size_t gsz = gt == SX_F32 ? 4 : 2;
    void *d_dwte0 = dmalloc((size_t)V * C * gsz);
    CK(cudaMemcpy(d_dwte0, d_dwte, (size_t)V * C * gsz, cudaMemcpyDeviceToDevice));
    CK(sx_embedding_backward(d_dwte, d_dwpe, gt, (const sx_bf16 *)d_dout, (const int32_t *)d_ids, ws, wsb, B, T, C,
                             V, 0));
    ref_embedding_backward(dwte.data(), use_wpe ? dwpe.data() : NULL, dout.data(), ids.data(), B, T, C, V);
    char nm[64];
    snprintf(nm, sizeof nm, "embedding_bwd.dwte(%s)", pname(gt));
    vec got_dwte = down(d_dwte, dwte.size(), gt);
    check(nm, sz, pname(gt), got_dwte, dwte, tol_of(gt));
    if (use_wpe) {
        snprintf(nm, sizeof nm, "embedding_bwd.dwpe(%s)", pname(gt));
        check(nm, sz, pname(gt), down(d_dwpe, dwpe.size(), gt), dwpe, tol_of(gt));
    }
    /* determinism: same inputs again, bitwise the same dwte */
    {
        std::vector<uint8_t> first = raw(d_dwte, (size_t)V * C * gsz);
        CK(cudaMemcpy(d_dwte, d_dwte0, (size_t)V * C * gsz, cudaMemcpyDeviceToDevice));
        CK(sx_embedding_backward(d_dwte, NULL, gt, (const sx_bf16 *)d_dout, (const int32_t *)d_ids, ws, wsb, B, T, C,
                                 V, 0));
        check_true("embedding_bwd.deterministic", sz, raw(d_dwte, first.size()) == first, "bitwise equal twice");
        if (path == 6) { /* prepare + apply: dwte and dwpe bitwise the one call's, then once more on the grouping */
            const size_t gb = sx_embedding_grouping_bytes(N, C, V), sb = sx_embedding_apply_workspace_bytes(N, C);
            void *grouping = dmalloc(gb), *scratch = dmalloc(sb);
            poison(grouping, gb);
            poison(scratch, sb);
            void *d_dwte1 = dmalloc((size_t)V * C * gsz);
            CK(cudaMemcpy(d_dwte1, d_dwte0, (size_t)V * C * gsz, cudaMemcpyDeviceToDevice));
            /* the one call again, with dwpe, from the same initial values as the split calls */
            vec dwpe_init = randn((size_t)T * C, 0, 0.01);
            void *d_dwpe_a = use_wpe ? up(dwpe_init, gt) : NULL, *d_dwpe_b = use_wpe ? up(dwpe_init, gt) : NULL;
            CK(cudaMemcpy(d_dwte, d_dwte0, (size_t)V * C * gsz, cudaMemcpyDeviceToDevice));
            CK(sx_embedding_backward(d_dwte, d_dwpe_a, gt, (const sx_bf16 *)d_dout, (const int32_t *)d_ids, ws, wsb, B,
                                     T, C, V, 0));
            CK(sx_embedding_backward_prepare(grouping, gb, (const int32_t *)d_ids, N, C, V, 0));
            CK(sx_embedding_backward_apply(d_dwte1, d_dwpe_b, gt, (const sx_bf16 *)d_dout, grouping, gb, scratch, sb, B,
                                           T, C, V, 0));
            check_true("embedding_bwd.split", sz,
                       raw(d_dwte1, first.size()) == first && raw(d_dwte, first.size()) == first &&
                           (!use_wpe || raw(d_dwpe_a, (size_t)T * C * gsz) == raw(d_dwpe_b, (size_t)T * C * gsz)),
                       "prepare + apply bitwise the one call");
            /* the grouping again (its counters must be back at zero): dwte += the sums a second time */
            CK(sx_embedding_backward_apply(d_dwte1, NULL, gt, (const sx_bf16 *)d_dout, grouping, gb, scratch, sb, B, T,
                                           C, V, 0));
            ref_embedding_backward(dwte.data(), NULL, dout.data(), ids.data(), B, T, C, V);
            snprintf(nm, sizeof nm, "embedding_bwd.reuse.dwte(%s)", pname(gt));
            check(nm, sz, pname(gt), down(d_dwte1, dwte.size(), gt), dwte, tol_of(gt));
            CK(cudaFree(grouping)); CK(cudaFree(scratch)); CK(cudaFree(d_dwte1));
            if (use_wpe) { CK(cudaFree(d_dwpe_a)); CK(cudaFree(d_dwpe_b)); }
        }
    }
    sx_embedding_backward_tune(0, 0, -1, -1, -1);
    sx_embedding_apply_tune(0, 0, 0, -1, 0);
    CK(cudaFree(d_ids)); CK(cudaFree(d_wte)); CK(cudaFree(d_out)); CK(cudaFree(d_dout)); CK(cudaFree(d_dwte));
    CK(cudaFree(d_dwte0)); CK(cudaFree(ws));
    if (d_wpe) { CK(cudaFree(d_wpe)); CK(cudaFree(d_dwpe)); }
}

static void test_embedding_bad_id(void) {
    const int B = 1, T = 3, C = 16, V = 10;
    std::vector<int32_t> ids = {2, 10, -1};
    vec wte = randn((size_t)V * C, 0, 1);
    void *d_ids = up_i32(ids), *d_wte = up_bf16(wte), *d_out = dmalloc((size_t)B * T * C * 2);
    CK(sx_embedding_forward((sx_bf16 *)d_out, (const int32_t *)d_ids, (const sx_bf16 *)d_wte, NULL, B, T, C, V, 0));
    vec got = down_bf16(d_out, (size_t)B * T * C);
    bool ok = true;
    for (int c = 0; c < C; c++) ok = ok && !isnan(got[c]) && isnan(got[C + c]) && isnan(got[2 * C + c]);
    check_true("embedding_fwd.bad_ids", "ids={2,10,-1} V=10", ok, "NaN rows for ids out of range");
    CK(cudaFree(d_ids)); CK(cudaFree(d_wte)); CK(cudaFree(d_out));
}

/* ----------------------------------------------------------- norms */

/* knob_*: the backward's tuning knobs (kernels_internal.h), 0/-1 = automatic */
struct NormVariant { int impl, k, depth, rows; }; /* sx_norm_backward_variant; {0,0,0,0} = automatic */
static const NormVariant NV_AUTO = {0, 0, 0, 0};

static void test_norm(bool rms, sx_dtype t, int N, int C, bool with_bias, bool dx_acc, sx_dtype gt, int knob_bps = 0,
                      int knob_pdl = -1, NormVariant nv = NV_AUTO) {
    char sz[96], nm[96], vs[40] = "";
    if (nv.impl == 2) snprintf(vs, sizeof vs, " regs k=%d D=%d%s", nv.k, nv.depth, nv.rows ? " r" : "");
    else if (nv.impl == 3) snprintf(vs, sizeof vs, " bulk k=%d S=%d r=%d", nv.k, nv.depth, nv.rows);
    snprintf(sz, sizeof sz, "N=%d C=%d%s%s%s", N, C, vs, knob_bps ? " bps" : "", knob_pdl == 0 ? " no-pdl" : "");
    sx_norm_backward_tune(knob_bps, knob_pdl);
    sx_norm_backward_variant(nv.impl, nv.k, nv.depth, nv.rows);
    const char *kn = rms ? "rmsnorm" : "layernorm";
    const size_t nc = (size_t)N * C, es = t == SX_F32 ? 4 : 2;
    const double eps = 1e-5;
    vec x = randn(nc, 0.3, 2.0), w = randn(C, 1.0, 0.2), b = randn(C, 0.0, 0.2);
    void *d_x = up(x, t), *d_w = up(w, t), *d_b = with_bias ? up(b, t) : NULL;
    void *d_out = dmalloc(nc * es), *d_mean = dmalloc(N * 4), *d_rstd = dmalloc(N * 4);
    poison(d_out, nc * es);
    poison(d_mean, N * 4);
    poison(d_rstd, N * 4);
    if (!rms && t == SX_BF16)
        CK(sx_layernorm_forward((sx_bf16 *)d_out, (float *)d_mean, (float *)d_rstd, (const sx_bf16 *)d_x,
                                (const sx_bf16 *)d_w, (const sx_bf16 *)d_b, N, C, (float)eps, 0));
    else if (!rms && t == SX_F16)
        CK(sx_layernorm_forward_f16((sx_f16 *)d_out, (float *)d_mean, (float *)d_rstd, (const sx_f16 *)d_x,
                                    (const sx_f16 *)d_w, (const sx_f16 *)d_b, N, C, (float)eps, 0));
    else if (rms && t == SX_F16)
        CK(sx_rmsnorm_forward_f16((sx_f16 *)d_out, (float *)d_rstd, (const sx_f16 *)d_x, (const sx_f16 *)d_w, N, C,
                                  (float)eps, 0));
    else if (!rms)
        CK(sx_layernorm_forward_f32((float *)d_out, (float *)d_mean, (float *)d_rstd, (const float *)d_x,
                                    (const float *)d_w, (const float *)d_b, N, C, (float)eps, 0));
    else if (t == SX_BF16)
        CK(sx_rmsnorm_forward((sx_bf16 *)d_out, (float *)d_rstd, (const sx_bf16 *)d_x, (const sx_bf16 *)d_w, N, C,
                              (float)eps, 0));
    else
        CK(sx_rmsnorm_forward_f32((float *)d_out, (float *)d_rstd, (const float *)d_x, (const float *)d_w, N, C,
                                  (float)eps, 0));
    vec out(nc), mean(N), rstd(N);
    if (rms) ref_rmsnorm_forward(out.data(), rstd.data(), x.data(), w.data(), N, C, eps);
    else ref_layernorm_forward(out.data(), mean.data(), rstd.data(), x.data(), w.data(), with_bias ? b.data() : NULL,
                               N, C, eps);
    snprintf(nm, sizeof nm, "%s_fwd.out%s", kn, with_bias || rms ? "" : "(no bias)");
    check(nm, sz, pname(t), down(d_out, nc, t), out, tol_of(t));
    if (!rms) {
        snprintf(nm, sizeof nm, "%s_fwd.mean", kn);
        check(nm, sz, "fp32", down_f32(d_mean, N), mean, TOL_F32);
    }
    snprintf(nm, sizeof nm, "%s_fwd.rstd", kn);
    check(nm, sz, "fp32", down_f32(d_rstd, N), rstd, TOL_F32);

    /* backward from the GPU's own saved statistics (the reference gets the same fp32 values) */
    vec gmean = rms ? vec(N, 0.0) : down_f32(d_mean, N), grstd = down_f32(d_rstd, N);
    vec dy = randn(nc, 0, 1.0), dx = randn(nc, 0, 1.0);
    vec dw = randn(C, 0, 0.1), db = randn(C, 0, 0.1);
    void *d_dy = up(dy, t), *d_dx = dx_acc ? up(dx, t) : dmalloc(nc * es);
    if (!dx_acc) poison(d_dx, nc * es);
    void *d_dw = up(dw, gt), *d_db = up(db, gt);
    const size_t wsb = sx_norm_backward_workspace_bytes(C);
    void *ws = dmalloc(wsb);
    const size_t gs = gt == SX_F32 ? 4 : 2;
    void *d_dw0 = dmalloc(C * gs), *d_db0 = dmalloc(C * gs), *d_dx0 = dmalloc(nc * es);
    CK(cudaMemcpy(d_dw0, d_dw, C * gs, cudaMemcpyDeviceToDevice));
    CK(cudaMemcpy(d_db0, d_db, C * gs, cudaMemcpyDeviceToDevice));
    CK(cudaMemcpy(d_dx0, d_dx, nc * es, cudaMemcpyDeviceToDevice));
    auto run_bwd = [&]() {
        if (t == SX_F16 && !rms)
            CK(sx_layernorm_backward_f16((sx_f16 *)d_dx, (float *)d_dw, (float *)d_db, (const sx_f16 *)d_dy,
                                         (const sx_f16 *)d_x, (const sx_f16 *)d_w, (const float *)d_mean,
                                         (const float *)d_rstd, dx_acc, ws, wsb, N, C, 0));
        else if (t == SX_F16)
            CK(sx_rmsnorm_backward_f16((sx_f16 *)d_dx, (float *)d_dw, (const sx_f16 *)d_dy, (const sx_f16 *)d_x,
                                       (const sx_f16 *)d_w, (const float *)d_rstd, dx_acc, ws, wsb, N, C, 0));
        else if (!rms && t == SX_BF16)
            CK(sx_layernorm_backward((sx_bf16 *)d_dx, d_dw, d_db, gt, (const sx_bf16 *)d_dy, (const sx_bf16 *)d_x,
                                     (const sx_bf16 *)d_w, (const float *)d_mean, (const float *)d_rstd, dx_acc, ws,
                                     wsb, N, C, 0));
        else if (!rms)
            CK(sx_layernorm_backward_f32((float *)d_dx, (float *)d_dw, (float *)d_db, (const float *)d_dy,
                                         (const float *)d_x, (const float *)d_w, (const float *)d_mean,
                                         (const float *)d_rstd, dx_acc, ws, wsb, N, C, 0));
        else if (t == SX_BF16)
            CK(sx_rmsnorm_backward((sx_bf16 *)d_dx, d_dw, gt, (const sx_bf16 *)d_dy, (const sx_bf16 *)d_x,
                                   (const sx_bf16 *)d_w, (const float *)d_rstd, dx_acc, ws, wsb, N, C, 0));
        else
            CK(sx_rmsnorm_backward_f32((float *)d_dx, (float *)d_dw, (const float *)d_dy, (const float *)d_x,
                                       (const float *)d_w, (const float *)d_rstd, dx_acc, ws, wsb, N, C, 0));
    };
    run_bwd();
    if (rms) ref_rmsnorm_backward(dx.data(), dw.data(), dy.data(), x.data(), w.data(), grstd.data(), N, C, dx_acc);
    else ref_layernorm_backward(dx.data(), dw.data(), db.data(), dy.data(), x.data(), w.data(), gmean.data(),
                                grstd.data(), N, C, dx_acc);
    snprintf(nm, sizeof nm, "%s_bwd.dx%s", kn, dx_acc ? "(+=)" : "");
    check(nm, sz, pname(t), down(d_dx, nc, t), dx, tol_of(t));
    snprintf(nm, sizeof nm, "%s_bwd.dweight(%s)", kn, pname(gt));
    check(nm, sz, pname(gt), down(d_dw, C, gt), dw, tol_of(gt));
    if (!rms) {
        snprintf(nm, sizeof nm, "%s_bwd.dbias(%s)", kn, pname(gt));
        check(nm, sz, pname(gt), down(d_db, C, gt), db, tol_of(gt));
    }
    /* determinism */
    std::vector<uint8_t> a1 = raw(d_dw, C * gs), a2 = raw(d_dx, nc * es);
    CK(cudaMemcpy(d_dw, d_dw0, C * gs, cudaMemcpyDeviceToDevice));
    CK(cudaMemcpy(d_db, d_db0, C * gs, cudaMemcpyDeviceToDevice));
    CK(cudaMemcpy(d_dx, d_dx0, nc * es, cudaMemcpyDeviceToDevice));
    run_bwd();
    snprintf(nm, sizeof nm, "%s_bwd.deterministic", kn);
    check_true(nm, sz, raw(d_dw, C * gs) == a1 && raw(d_dx, nc * es) == a2, "bitwise equal twice");
    sx_norm_backward_tune(0, -1);
    sx_norm_backward_variant(0, 0, 0, 0);
    void *bufs[] = {d_x, d_w, d_b, d_out, d_mean, d_rstd, d_dy, d_dx, d_dw, d_db, ws, d_dw0, d_db0, d_dx0};
    for (void *p : bufs)
        if (p) CK(cudaFree(p));
}

/* The first layer's LayerNorm backward with the position gradient (sx_layernorm_backward_pos):
 * dx, dweight, dbias against the float64 reference; dpos against the reference's position sum of
 * its dx (ref_embedding_backward's dwpe part) at bf16's tolerance (dx is stored in bf16), and, tighter, against the
 * float64 sum over b of the dx the GPU stored (what the kernel sums; fp32 dpos 1e-5); and the
 * call is bitwise repeatable.  (dx is not bitwise that of sx_layernorm_backward: the row sums
 * are added in another order.)  depth: rows ahead (sx_layernorm_backward_pos_tune; 0 = auto). */
static void test_layernorm_pos(int B, int T, int C, bool dx_acc, sx_dtype gt, int depth = 0, int k = 0) {
    char sz[112];
    sx_layernorm_backward_pos_tune(depth, k);
    const size_t N = (size_t)B * T, nc = N * C, gs = gt == SX_F32 ? 4 : 2;
    snprintf(sz, sizeof sz, "B=%d T=%d C=%d", B, T, C);
    vec x = randn(nc, 0.3, 2.0), w = randn(C, 1.0, 0.2), b = randn(C, 0.0, 0.2);
    void *d_x = up_bf16(x), *d_w = up_bf16(w), *d_b = up_bf16(b);
    void *d_out = dmalloc(nc * 2), *d_mean = dmalloc(N * 4), *d_rstd = dmalloc(N * 4);
    CK(sx_layernorm_forward((sx_bf16 *)d_out, (float *)d_mean, (float *)d_rstd, (const sx_bf16 *)d_x,
                            (const sx_bf16 *)d_w, (const sx_bf16 *)d_b, (int)N, C, 1e-5f, 0));
    vec gmean = down_f32(d_mean, N), grstd = down_f32(d_rstd, N);
    vec dy = randn(nc, 0, 1.0), dx = randn(nc, 0, 1.0), dw = randn(C, 0, 0.1), db = randn(C, 0, 0.1);
    vec dpos = randn((size_t)T * C, 0, 0.1);
    void *d_dy = up_bf16(dy), *d_dx = dx_acc ? up_bf16(dx) : dmalloc(nc * 2);
    if (!dx_acc) poison(d_dx, nc * 2);
    void *d_dw = up(dw, gt), *d_db = up(db, gt), *d_dpos = up(dpos, gt);
    const size_t wsb = sx_norm_backward_workspace_bytes(C);
    void *ws = dmalloc(wsb);
    /* the inputs kept, for the repeat and for the plain backward */
    void *d_dx0 = dmalloc(nc * 2), *d_dw0 = dmalloc(C * gs), *d_db0 = dmalloc(C * gs), *d_dpos0 = dmalloc((size_t)T * C * gs);
    CK(cudaMemcpy(d_dx0, d_dx, nc * 2, cudaMemcpyDeviceToDevice));
    CK(cudaMemcpy(d_dw0, d_dw, C * gs, cudaMemcpyDeviceToDevice));
    CK(cudaMemcpy(d_db0, d_db, C * gs, cudaMemcpyDeviceToDevice));
    CK(cudaMemcpy(d_dpos0, d_dpos, (size_t)T * C * gs, cudaMemcpyDeviceToDevice));
    auto restore = [&] {
        CK(cudaMemcpy(d_dx, d_dx0, nc * 2, cudaMemcpyDeviceToDevice));
        CK(cudaMemcpy(d_dw, d_dw0, C * gs, cudaMemcpyDeviceToDevice));
        CK(cudaMemcpy(d_db, d_db0, C * gs, cudaMemcpyDeviceToDevice));
        CK(cudaMemcpy(d_dpos, d_dpos0, (size_t)T * C * gs, cudaMemcpyDeviceToDevice));
    };
    auto run = [&] {
        CK(sx_layernorm_backward_pos((sx_bf16 *)d_dx, d_dw, d_db, d_dpos, gt, (const sx_bf16 *)d_dy,
                                     (const sx_bf16 *)d_x, (const sx_bf16 *)d_w, (const float *)d_mean,
                                     (const float *)d_rstd, dx_acc, ws, wsb, B, T, C, 0));
    };
    run();
    int cfg[6];
    sx_layernorm_backward_pos_last_config(cfg);
    if (cfg[0]) snprintf(sz + strlen(sz), sizeof sz - strlen(sz), " k=%d W=%d NG=%d G=%d D=%d", cfg[0], cfg[1], cfg[2], cfg[3],
                         cfg[5]);
    else snprintf(sz + strlen(sz), sizeof sz - strlen(sz), " generic");
    ref_layernorm_backward(dx.data(), dw.data(), db.data(), dy.data(), x.data(), w.data(), gmean.data(), grstd.data(),
                           (int)N, C, dx_acc);
    vec got_dx = down_bf16(d_dx, nc);
    check(dx_acc ? "layernorm_bwd_pos.dx(+=)" : "layernorm_bwd_pos.dx", sz, "bf16", got_dx, dx, TOL_BF16);
    check("layernorm_bwd_pos.dweight", sz, pname(gt), down(d_dw, C, gt), dw, tol_of(gt));
    check("layernorm_bwd_pos.dbias", sz, pname(gt), down(d_db, C, gt), db, tol_of(gt));
    /* dpos: the reference's own dx summed over b */
    vec ref_pos = dpos, stored_pos = dpos;
    std::vector<int32_t> ids(N, 0);
    vec scratch_wte(C, 0.0);
    ref_embedding_backward(scratch_wte.data(), ref_pos.data(), dx.data(), ids.data(), B, T, C, 1);
    ref_embedding_backward(scratch_wte.data(), stored_pos.data(), got_dx.data(), ids.data(), B, T, C, 1);
    vec got_pos = down(d_dpos, (size_t)T * C, gt);
    check("layernorm_bwd_pos.dpos", sz, "bf16", got_pos, ref_pos, TOL_BF16); /* dx is bf16 */
    check("layernorm_bwd_pos.dpos(stored dx)", sz, pname(gt), got_pos, stored_pos, tol_of(gt));
    /* repeatable, and the same dx and dweight as the plain backward */
    std::vector<uint8_t> r_dx = raw(d_dx, nc * 2), r_dw = raw(d_dw, C * gs), r_pos = raw(d_dpos, (size_t)T * C * gs);
    restore();
    run();
    check_true("layernorm_bwd_pos.deterministic", sz,
               raw(d_dx, nc * 2) == r_dx && raw(d_dw, C * gs) == r_dw && raw(d_dpos, (size_t)T * C * gs) == r_pos,
               "bitwise equal twice");
    sx_layernorm_backward_pos_tune(0, 0);
    void *bufs[] = {d_x, d_w, d_b, d_out, d_mean, d_rstd, d_dy, d_dx, d_dw, d_db, d_dpos, ws, d_dx0, d_dw0, d_db0, d_dpos0};
    for (void *p : bufs) CK(cudaFree(p));
}

/* ----------------------------------------------------------- elementwise */

static void test_gelu(size_t n, int offset, sx_dtype t = SX_BF16) {
    char sz[64];
    snprintf(sz, sizeof sz, "n=%zu%s", n, offset ? " unaligned" : "");
    const bool h = t == SX_F16;
    const char *pn = pname(t);
    const double tol = tol_of(t);
    vec x = randn(n + offset, 0, 2.0), dy = randn(n + offset, 0, 1.0);
    void *d_x = up(x, t), *d_dy = up(dy, t), *d_out = dmalloc((n + offset) * 2), *d_dx = dmalloc((n + offset) * 2);
    poison(d_out, (n + offset) * 2);
    poison(d_dx, (n + offset) * 2);
    const uint16_t *px = (const uint16_t *)d_x + offset, *pdy = (const uint16_t *)d_dy + offset;
    auto fwd = [&](void *o) {
        if (h) CK(sx_gelu_forward_f16((sx_f16 *)o + offset, px, n, 0));
        else CK(sx_gelu_forward((sx_bf16 *)o + offset, px, n, 0));
    };
    auto bwd = [&](void *o) {
        if (h) CK(sx_gelu_backward_f16((sx_f16 *)o + offset, px, pdy, n, 0));
        else CK(sx_gelu_backward((sx_bf16 *)o + offset, px, pdy, n, 0));
    };
    fwd(d_out);
    bwd(d_dx);
    vec ref(n), rdx(n);
    ref_gelu_forward(ref.data(), x.data() + offset, n);
    ref_gelu_backward(rdx.data(), x.data() + offset, dy.data() + offset, n);
    vec got = down(d_out, n + offset, t), gdx = down(d_dx, n + offset, t);
    check(h ? "gelu_fwd_f16.out" : "gelu_fwd.out", sz, pn, vec(got.begin() + offset, got.end()), ref, tol);
    check(h ? "gelu_bwd_f16.dx" : "gelu_bwd.dx", sz, pn, vec(gdx.begin() + offset, gdx.end()), rdx, tol);
    /* in place: dx aliases dy */
    bwd(d_dy);
    vec gip = down(d_dy, n + offset, t);
    check(h ? "gelu_bwd_f16.dx(in place)" : "gelu_bwd.dx(in place)", sz, pn, vec(gip.begin() + offset, gip.end()), rdx,
          tol);
    CK(cudaFree(d_x)); CK(cudaFree(d_dy)); CK(cudaFree(d_out)); CK(cudaFree(d_dx));
}

static void test_swiglu(int N, int H, bool fused, sx_dtype t = SX_BF16) {
    const bool hf = t == SX_F16;
    const int ld = fused ? 2 * H : H;
    char sz[64];
    snprintf(sz, sizeof sz, "N=%d H=%d ld=%d", N, H, ld);
    const size_t nin = (size_t)N * ld, nout = (size_t)N * H;
    vec gbuf = randn(nin, 0, 2.0), ubuf = randn(nin, 0, 1.0), dout = randn(nout, 0, 1.0);
    if (fused) /* one [N, 2H] buffer: gate | up; ubuf unused */
        for (int n = 0; n < N; n++)
            for (int h = 0; h < H; h++) gbuf[(size_t)n * ld + H + h] = ubuf[(size_t)n * ld + h];
    void *d_g = up(gbuf, t), *d_u = fused ? NULL : up(ubuf, t), *d_do = up(dout, t);
    const sx_bf16 *pg = (const sx_bf16 *)d_g, *pu = fused ? pg + H : (const sx_bf16 *)d_u;
    const double *hg = gbuf.data(), *hu = fused ? gbuf.data() + H : ubuf.data();
    void *d_out = dmalloc(nout * 2), *d_dg = dmalloc(nin * 2), *d_du = fused ? NULL : dmalloc(nin * 2);
    poison(d_out, nout * 2);
    poison(d_dg, nin * 2);
    if (d_du) poison(d_du, nin * 2);
    sx_bf16 *pdg = (sx_bf16 *)d_dg, *pdu = fused ? pdg + H : (sx_bf16 *)d_du;
    if (hf) {
        CK(sx_swiglu_forward_f16((sx_f16 *)d_out, pg, pu, N, H, ld, 0));
        CK(sx_swiglu_backward_f16(pdg, pdu, (const sx_f16 *)d_do, pg, pu, N, H, ld, 0));
    } else {
        CK(sx_swiglu_forward((sx_bf16 *)d_out, pg, pu, N, H, ld, 0));
        CK(sx_swiglu_backward(pdg, pdu, (const sx_bf16 *)d_do, pg, pu, N, H, ld, 0));
    }
    vec ref(nout), rdg(nin, 0.0), rdu(nin, 0.0);
    ref_swiglu_forward(ref.data(), hg, hu, N, H, ld);
    if (fused) ref_swiglu_backward(rdg.data(), rdg.data() + H, dout.data(), hg, hu, N, H, ld);
    else ref_swiglu_backward(rdg.data(), rdu.data(), dout.data(), hg, hu, N, H, ld);
    check(hf ? "swiglu_fwd_f16.out" : "swiglu_fwd.out", sz, pname(t), down(d_out, nout, t), ref, tol_of(t));
    check(fused ? (hf ? "swiglu_bwd_f16.d[gate|up]" : "swiglu_bwd.d[gate|up]") : (hf ? "swiglu_bwd_f16.dgate" : "swiglu_bwd.dgate"),
          sz, pname(t), down(d_dg, nin, t), rdg, tol_of(t));
    if (!fused) check(hf ? "swiglu_bwd_f16.dup" : "swiglu_bwd.dup", sz, pname(t), down(d_du, nin, t), rdu, tol_of(t));
    void *bufs[] = {d_g, d_u, d_do, d_out, d_dg, d_du};
    for (void *p : bufs)
        if (p) CK(cudaFree(p));
}

static void test_residual(size_t n, int offset, sx_dtype t = SX_BF16) {
    char sz[64];
    snprintf(sz, sizeof sz, "n=%zu%s", n, offset ? " unaligned" : "");
    const bool h = t == SX_F16;
    vec a = randn(n + offset, 0, 1.0), b = randn(n + offset, 0, 1.0);
    void *d_a = up(a, t), *d_b = up(b, t), *d_o = dmalloc((n + offset) * 2), *d_c = dmalloc((n + offset) * 2);
    poison(d_o, (n + offset) * 2);
    poison(d_c, (n + offset) * 2);
    auto add = [&](void *o, void *c) {
        uint16_t *po = (uint16_t *)o + offset, *pc = c ? (uint16_t *)c + offset : NULL;
        const uint16_t *pa = (const uint16_t *)d_a + offset, *pb = (const uint16_t *)d_b + offset;
        if (h) CK(sx_residual_add_f16(po, pc, pa, pb, n, 0));
        else CK(sx_residual_add(po, pc, pa, pb, n, 0));
    };
    add(d_o, d_c);
    vec ref(n);
    ref_residual_add(ref.data(), a.data() + offset, b.data() + offset, n);
    vec go = down(d_o, n + offset, t), gc = down(d_c, n + offset, t);
    check(h ? "residual_add_f16.out" : "residual_add.out", sz, pname(t), vec(go.begin() + offset, go.end()), ref,
          tol_of(t));
    check(h ? "residual_add_f16.copy" : "residual_add.copy", sz, pname(t), vec(gc.begin() + offset, gc.end()), ref,
          tol_of(t));
    /* in place: out = a */
    add(d_a, NULL);
    vec gi = down(d_a, n + offset, t);
    check(h ? "residual_add_f16.out(in place)" : "residual_add.out(in place)", sz, pname(t),
          vec(gi.begin() + offset, gi.end()), ref, tol_of(t));
    CK(cudaFree(d_a)); CK(cudaFree(d_b)); CK(cudaFree(d_o)); CK(cudaFree(d_c));
}

/* ----------------------------------------------------------- rope */

/* RoPE tolerance.  The kernel's angles are within ~3e-7 of float64 (test_rope_angles) and
 * its rotation is fp32, so the only large error is the one rounding of each output to bf16:
 * |RN(v) - v| <= 2^-8 |v| (8 significant bits).  A rotation preserves the 2-norm, so the
 * normwise error of one pass is at most 2^-8 (+ ~1e-6 of fp32 arithmetic), and of a
 * forward + backward round trip at most 2 * 2^-8 + 2^-16.  Per element:
 * |gpu - ref| <= 2^-8 |ref| + 1e-6 * |pair|, |pair| = sqrt(ref_i^2 + ref_{i+D/2}^2). */
#define ROPE_U 0.00390625 /* 2^-8 */
#define TOL_ROPE (ROPE_U + 1e-5)
#define TOL_ROPE_ROUNDTRIP (2.0 * ROPE_U + ROPE_U * ROPE_U + 1e-5)

/* the q|k columns (first NH*D of every row) of a [N, ld] buffer */
static vec rope_qk(const vec &a, int N, int NHD, int ld) {
    vec r;
    r.reserve((size_t)N * NHD);
    for (int n = 0; n < N; n++)
        for (int c = 0; c < NHD; c++) r.push_back(a[(size_t)n * ld + c]);
    return r;
}

/* max over elements of |got - ref| / (2^-8 |ref| + 1e-6 |pair|): <= 1 passes */
static void rope_elementwise(const char *name, const char *sz, const vec &got, const vec &ref, int D) {
    double worst = 0.0;
    size_t bad = 0;
    const int half = D / 2;
    for (size_t j = 0; j < ref.size(); j++) {
        const size_t i = j % D, base = j - i, a = base + (i % half), b = a + half;
        const double pair = sqrt(ref[a] * ref[a] + ref[b] * ref[b]);
        const double r = fabs(got[j] - ref[j]) / (ROPE_U * fabs(ref[j]) + 1e-6 * pair + 1e-30);
        if (!(r <= 1.0)) bad++;
        if (r > worst || r != r) worst = r;
    }
    char what[96];
    snprintf(what, sizeof what, "max |err| / (2^-8|ref| + 1e-6|pair|) = %.3f, %zu over", worst, bad);
    check_true(name, sz, bad == 0, what);
}

/* forward on random q, k with the V columns poisoned (must stay bitwise untouched), the
 * backward on the forward's output (against the reference backward of the same values),
 * which must also give back the input (round trip) */
static void test_rope(int B, int T, int H, int KV, int D, float theta) {
    char sz[64];
    snprintf(sz, sizeof sz, "B%d T%d H%d KV%d D%d %s", B, T, H, KV, D, theta > 1e5f ? "5e5" : "1e4");
    const int N = B * T, NH = H + KV, ld = (H + 2 * KV) * D, NHD = NH * D;
    const size_t n = (size_t)N * ld;
    vec x = randn(n, 0, 1.0);
    round_bf16(x);
    std::vector<uint16_t> bits(n);
    for (size_t i = 0; i < n; i++) bits[i] = (i % ld) < (size_t)NHD ? sx_ref_f2bf((float)x[i]) : 0xffff; /* V: NaN */
    void *d = dmalloc(n * 2);
    CK(cudaMemcpy(d, bits.data(), n * 2, cudaMemcpyHostToDevice));
    auto v_untouched = [&]() {
        std::vector<uint16_t> got(n);
        CK(cudaMemcpy(got.data(), d, n * 2, cudaMemcpyDeviceToHost));
        for (size_t i = 0; i < n; i++)
            if ((i % ld) >= (size_t)NHD && got[i] != 0xffff) return false;
        return true;
    };
    CK(sx_rope_forward((sx_bf16 *)d, B, T, H, KV, D, ld, theta, 0));
    vec ref = x;
    ref_rope_forward(ref.data(), B, T, H, KV, D, ld, theta);
    vec got = down_bf16(d, n);
    const vec gq = rope_qk(got, N, NHD, ld), rq = rope_qk(ref, N, NHD, ld);
    check("rope_fwd.qk", sz, "bf16", gq, rq, TOL_ROPE);
    rope_elementwise("rope_fwd.qk(elementwise)", sz, gq, rq, D);
    check_true("rope_fwd.v_untouched", sz, v_untouched(), "poisoned V bitwise unchanged");

    /* backward of the forward's bf16 output: against the reference backward, and the input */
    vec rb = got;
    for (size_t i = 0; i < n; i++)
        if ((i % ld) >= (size_t)NHD) rb[i] = 0.0;
    ref_rope_backward(rb.data(), B, T, H, KV, D, ld, theta);
    CK(sx_rope_backward((sx_bf16 *)d, B, T, H, KV, D, ld, theta, 0));
    vec back = down_bf16(d, n);
    const vec bq = rope_qk(back, N, NHD, ld), rbq = rope_qk(rb, N, NHD, ld);
    check("rope_bwd.dqk", sz, "bf16", bq, rbq, TOL_ROPE);
    rope_elementwise("rope_bwd.dqk(elementwise)", sz, bq, rbq, D);
    check("rope_fwd+bwd.roundtrip", sz, "bf16", bq, rope_qk(x, N, NHD, ld), TOL_ROPE_ROUNDTRIP);
    check_true("rope_bwd.v_untouched", sz, v_untouched(), "poisoned V bitwise unchanged");
    CK(cudaFree(d));
}

/* The fp32 cos/sin the kernels apply against float64, for every position up to T - 1; the
 * remark gives, for comparison, the error of angles formed as a fp32 product t * inv_freq
 * (host powf, then an exact cos/sin of that float). */
static void test_rope_angles(int T, int D, float theta) {
    char sz[64], nm[64], what[128];
    snprintf(sz, sizeof sz, "T%d D%d theta %.0f", T, D, (double)theta);
    const int half = D / 2;
    const size_t n = (size_t)T * half;
    void *dc = dmalloc(n * 4), *ds = dmalloc(n * 4);
    poison(dc, n * 4);
    poison(ds, n * 4);
    CK(sx_rope_angles_f32((float *)dc, (float *)ds, T, D, theta, 0));
    vec gc = down_f32(dc, n), gs = down_f32(ds, n);
    double worst = 0.0, naive = 0.0;
    size_t bad = 0;
    for (int t = 0; t < T; t++)
        for (int i = 0; i < half; i++) {
            const size_t j = (size_t)t * half + i;
            const double a = (double)t * pow((double)theta, -2.0 * i / D);
            const double e = fmax(fabs(gc[j] - cos(a)), fabs(gs[j] - sin(a)));
            if (!(e <= 1e-6)) bad++;
            if (e > worst || e != e) worst = e;
            const float a32 = (float)t * powf(theta, -2.0f * (float)i / (float)D);
            naive = fmax(naive, fmax(fabs(cos((double)a32) - cos(a)), fabs(sin((double)a32) - sin(a))));
        }
    snprintf(nm, sizeof nm, "rope.angles(cos,sin)");
    snprintf(what, sizeof what, "max abs err %.2e (tol 1e-6); fp32 t*inv_freq would give %.2e", worst, naive);
    check_true(nm, sz, bad == 0, what);
    CK(cudaFree(dc));
    CK(cudaFree(ds));
}

static void test_rope_errors(void) {
    void *p = dmalloc(1 << 16);
    sx_bf16 *b = (sx_bf16 *)p;
    cudaError_t e[6] = {
        sx_rope_forward(b, 1, 16, 4, 2, 63, 6 * 63, 1e4f, 0),        /* D odd */
        sx_rope_forward(b, 1, 16, 4, 2, 64, 5 * 64, 1e4f, 0),        /* row stride < (H+KV)*D */
        sx_rope_forward(b, 1, 16, 4, 2, 64, 8 * 64, 0.0f, 0),        /* theta */
        sx_rope_forward(NULL, 1, 16, 4, 2, 64, 8 * 64, 1e4f, 0),     /* NULL */
        sx_rope_backward(b, -1, 16, 4, 2, 64, 8 * 64, 1e4f, 0),      /* negative size */
        sx_rope_backward(b, 1, 16, 4, 2, 8194, 8 * 8194, 1e4f, 0)}; /* D > 8192 */
    bool ok = true;
    for (cudaError_t x : e) ok = ok && x == cudaErrorInvalidValue;
    ok = ok && sx_rope_forward(NULL, 0, 16, 4, 2, 64, 8 * 64, 1e4f, 0) == cudaSuccess; /* empty: no-op */
    check_true("rope.invalid_args", "-", ok, "cudaErrorInvalidValue, no launch; B=0 a no-op");
    CK(cudaGetLastError());
    CK(cudaFree(p));
}

static void test_rope_all(void) {
    test_rope_errors();
    test_rope_angles(8192, 128, 10000.0f);
    test_rope_angles(8192, 128, 500000.0f);
    test_rope_angles(g_quick ? 1000 : 8192, 64, 10000.0f);
    test_rope(3, g_quick ? 100 : 1000, 8, 2, 64, 10000.0f);          /* GQA, B*T = 3000 */
    test_rope(1, g_quick ? 1000 : 8192, 4, 1, 128, 500000.0f);       /* positions up to 8191 */
    test_rope(5, 77, 3, 3, 128, 10000.0f);                           /* MHA, 6 heads: a partial group of 4 */
    test_rope(2, g_quick ? 33 : 97, 4, 2, 72, 10000.0f);             /* D/2 = 36: scalar path */
}

/* ----------------------------------------------------------- softmax */

/* path 0: the API; 1, 2: an explicit path of the backward (kernels_internal.h); the forward has
 * one path (its register version is checked by dev/cuda/softmax_forward.cu) */
static cudaError_t smf(int, sx_bf16 *o, const sx_bf16 *s, int BH, int T, float sc) {
    return sx_softmax_causal_forward(o, s, BH, T, sc, 0);
}
static cudaError_t smb(int path, sx_bf16 *o, const sx_bf16 *p, const sx_bf16 *dp, int BH, int T, float sc) {
    return path ? sx_softmax_causal_backward_path(path, o, p, dp, BH, T, sc, 0)
                : sx_softmax_causal_backward(o, p, dp, BH, T, sc, 0);
}

static void test_softmax(int BH, int T, int path = 0) {
    char sz[64];
    snprintf(sz, sizeof sz, "BH=%d T=%d%s", BH, T, path == 1 ? " path 1" : path == 2 ? " path 2" : "");
    const size_t n = (size_t)BH * T * T;
    const double scale = 0.125;
    vec s = randn(n, 0, 8.0), dp = randn(n, 0, 1.0);
    void *d_s = up_bf16(s), *d_dp = up_bf16(dp), *d_p = dmalloc(n * 2), *d_ds = dmalloc(n * 2);
    poison(d_p, n * 2);
    poison(d_ds, n * 2);
    CK(smf(path, (sx_bf16 *)d_p, (const sx_bf16 *)d_s, BH, T, (float)scale));
    vec ref(n);
    ref_softmax_causal_forward(ref.data(), s.data(), BH, T, scale);
    vec gp = down_bf16(d_p, n);
    check("softmax_causal_fwd.out", sz, "bf16", gp, ref, TOL_BF16);
    /* backward from the GPU's bf16 probabilities */
    CK(smb(path, (sx_bf16 *)d_ds, (const sx_bf16 *)d_p, (const sx_bf16 *)d_dp, BH, T, (float)scale));
    vec rds(n);
    ref_softmax_causal_backward(rds.data(), gp.data(), dp.data(), BH, T, scale);
    check("softmax_causal_bwd.dscores", sz, "bf16", down_bf16(d_ds, n), rds, TOL_BF16);
    CK(smb(path, (sx_bf16 *)d_dp, (const sx_bf16 *)d_p, (const sx_bf16 *)d_dp, BH, T, (float)scale));
    check("softmax_causal_bwd(in place)", sz, "bf16", down_bf16(d_dp, n), rds, TOL_BF16);
    CK(cudaFree(d_s)); CK(cudaFree(d_dp)); CK(cudaFree(d_p)); CK(cudaFree(d_ds));
}

/* ----------------------------------------------------------- cross-entropy */

/* Every 5th row's target logit is 25 above the rest: a confident prediction, where the
 * target's gradient p - 1 is small and cancels. */
static void test_ce(int N, int V, int Vp, bool in_place, int layout = 0) {
    char sz[80];
    snprintf(sz, sizeof sz, "N=%d V=%d Vp=%d%s", N, V, Vp, layout == 4 ? " persistent" : layout == 5 ? " cluster" : "");
    sx_cross_entropy_tune(layout);
    const size_t n = (size_t)N * Vp;
    vec x = randn(n, 0, 2.0);
    /* padding columns hold garbage (NaN bits) that must be ignored */
    std::vector<int32_t> tg(N);
    for (int i = 0; i < N; i++) tg[i] = (i % 97 == 5) ? -1 : (int32_t)(rng_u64() % (uint64_t)V);
    for (int i = 0; i < N; i += 5)
        if (tg[i] >= 0) x[(size_t)i * Vp + tg[i]] = 25.0;
    void *d_x = up_bf16(x), *d_t = up_i32(tg);
    for (int i = 0; i < N; i++)
        if (Vp > V) CK(cudaMemset((sx_bf16 *)d_x + (size_t)i * Vp + V, 0xff, (size_t)(Vp - V) * 2));
    void *d_loss = dmalloc(N * 4), *d_d = in_place ? d_x : dmalloc(n * 2);
    poison(d_loss, N * 4);
    if (!in_place) poison(d_d, n * 2);
    const double dloss = 1.0 / N;
    CK(sx_cross_entropy_fused((float *)d_loss, (sx_bf16 *)d_d, (const sx_bf16 *)d_x, (const int32_t *)d_t, N, V, Vp,
                              (float)dloss, 0));
    vec loss(N), dl(n);
    ref_cross_entropy(loss.data(), dl.data(), x.data(), tg.data(), N, V, Vp, dloss);
    check(in_place ? "cross_entropy.loss(in place)" : "cross_entropy.loss", sz, "fp32", down_f32(d_loss, N), loss,
          TOL_F32);
    check(in_place ? "cross_entropy.dlogits(in place)" : "cross_entropy.dlogits", sz, "bf16", down_bf16(d_d, n), dl,
          TOL_BF16);
    if (!in_place) {
        /* loss only (dlogits NULL) */
        poison(d_loss, N * 4);
        CK(sx_cross_entropy_fused((float *)d_loss, NULL, (const sx_bf16 *)d_x, (const int32_t *)d_t, N, V, Vp,
                                  (float)dloss, 0));
        check("cross_entropy.loss(no grad)", sz, "fp32", down_f32(d_loss, N), loss, TOL_F32);
        CK(cudaFree(d_d));
    }
    CK(cudaFree(d_x)); CK(cudaFree(d_t)); CK(cudaFree(d_loss));
    sx_cross_entropy_tune(0);
}

/* ----------------------------------------------------------- adamw */

static void test_adamw(size_t n, sx_dtype gt, int offset, bool dev_scale) {
    char sz[64], nm[64];
    snprintf(sz, sizeof sz, "n=%zu%s", n, offset ? " unaligned" : "");
    const size_t m_ = n + offset;
    vec p = randn(m_, 0, 1.0), m = randn(m_, 0, 0.01), v = randn(m_, 0, 1e-4), g = randn(m_, 0, 0.1);
    for (auto &e : v) e = fabs(e);
    void *d_p = up_f32(p), *d_m = up_f32(m), *d_v = up_f32(v), *d_g = up(g, gt), *d_w = dmalloc(m_ * 2);
    poison(d_w, m_ * 2);
    float hscale = 0.5f, dscale = 0.8f;
    void *d_sc = dmalloc(4);
    CK(cudaMemcpy(d_sc, &dscale, 4, cudaMemcpyHostToDevice));
    sx_adamw_params hp = {3e-3f, 0.9f, 0.95f, 1e-8f, 0.1f, 7, hscale, dev_scale ? (const float *)d_sc : NULL};
    const size_t gs = gt == SX_F32 ? 4 : 2;
    if (gt == SX_BF16)
        CK(sx_adamw((float *)d_p + offset, (float *)d_m + offset, (float *)d_v + offset, (sx_bf16 *)d_w + offset,
                    (const sx_bf16 *)((char *)d_g + offset * gs), n, &hp, 0));
    else
        CK(sx_adamw_f32grad((float *)d_p + offset, (float *)d_m + offset, (float *)d_v + offset,
                            (sx_bf16 *)d_w + offset, (const float *)((char *)d_g + offset * gs), n, &hp, 0));
    ref_adamw(p.data() + offset, m.data() + offset, v.data() + offset, g.data() + offset, n, hp.lr, hp.beta1, hp.beta2,
              hp.eps, hp.weight_decay, hp.step, (double)hscale * (dev_scale ? dscale : 1.0));
    auto tail = [&](const vec &a) { return vec(a.begin() + offset, a.end()); };
    snprintf(nm, sizeof nm, "adamw(%s grads).param", pname(gt));
    check(nm, sz, "fp32", tail(down_f32(d_p, m_)), tail(p), TOL_F32);
    snprintf(nm, sizeof nm, "adamw(%s grads).m", pname(gt));
    check(nm, sz, "fp32", tail(down_f32(d_m, m_)), tail(m), TOL_F32);
    snprintf(nm, sizeof nm, "adamw(%s grads).v", pname(gt));
    check(nm, sz, "fp32", tail(down_f32(d_v, m_)), tail(v), TOL_F32);
    snprintf(nm, sizeof nm, "adamw(%s grads).param_bf16", pname(gt));
    check(nm, sz, "bf16", tail(down_bf16(d_w, m_)), tail(p), TOL_BF16);
    CK(cudaFree(d_p)); CK(cudaFree(d_m)); CK(cudaFree(d_v)); CK(cudaFree(d_g)); CK(cudaFree(d_w)); CK(cudaFree(d_sc));
}

/* a bad argument returns cudaErrorInvalidValue and launches nothing */
static void test_errors(void) {
    cudaError_t e1 = sx_layernorm_forward(NULL, NULL, NULL, NULL, NULL, NULL, 5, 8, 1e-5f, 0);
    cudaError_t e2 = sx_cross_entropy_fused(NULL, NULL, NULL, NULL, 4, 10, 8, 1.0f, 0);
    cudaError_t e3 = sx_norm_backward_workspace_bytes(768) > 0 ? cudaSuccess : cudaErrorUnknown;
    check_true("api.invalid_args", "-", e1 == cudaErrorInvalidValue && e2 == cudaErrorInvalidValue && e3 == cudaSuccess,
               "cudaErrorInvalidValue, no launch");
    CK(cudaGetLastError());
}

/* LayerNorm and RMSNorm, forward and backward.  Backward fast paths: version 2's two kernels
 * (registers, bulk copies), each with its knobs; the automatic choice runs first (version 1 is
 * checked by dev/cuda/norm_backward.cu). */
static void test_norms(int N) {
    /* norm backward, automatic path: version 2, registers, 2 packs per thread (RMSNorm bf16 at
     * C <= 768: 1 pack; RMSNorm at C >= 4096: bulk copies, 3 stages); a group of W = C / (256 k)
     * warps per row (bf16; fp32: C / (128 k)) */
    /* fp16 storage (parameter gradients fp32): the automatic path, dx +=, two warps per row, the
     * bulk path (RMSNorm C = 4096), the scalar path */
    for (int rms = 0; rms <= 1; rms++) {
        test_norm(rms, SX_F16, N, 768, true, false, SX_F32);
        test_norm(rms, SX_F16, N, 1000, true, true, SX_F32);
        test_norm(rms, SX_F16, N / 3, 2048, true, true, SX_F32);
        test_norm(rms, SX_F16, g_quick ? 67 : 1003, 4096, true, false, SX_F32);
        test_norm(rms, SX_F16, N, 77, true, true, SX_F32);
    }
    for (int rms = 0; rms <= 1; rms++) {
        test_norm(rms, SX_BF16, N, 768, true, false, SX_F32);
        test_norm(rms, SX_BF16, N, 768, true, true, SX_BF16); /* dx += */
        test_norm(rms, SX_BF16, N, 1000, false, true, SX_BF16);
        test_norm(rms, SX_BF16, N, 200, true, false, SX_BF16); /* one warp per row, 16 rows per block */
        test_norm(rms, SX_BF16, N, 77, true, false, SX_F32);   /* scalar path */
        test_norm(rms, SX_BF16, N / 3, 3000, true, true, SX_F32); /* 12 warps per row, some lanes idle */
        test_norm(rms, SX_BF16, N / 3, 1024, true, false, SX_F32);
        test_norm(rms, SX_BF16, N / 3, 2048, true, true, SX_BF16); /* 8 warps per row, dx += */
        test_norm(rms, SX_BF16, g_quick ? 67 : 1003, 4096, true, false, SX_F32); /* 16 warps: one row per block */
        test_norm(rms, SX_BF16, 5, 4096, true, false, SX_F32);   /* fewer rows than blocks */
        test_norm(rms, SX_BF16, g_quick ? 33 : 257, 5000, true, true, SX_F32); /* 2 packs per thread, 10 warps */
        test_norm(rms, SX_BF16, g_quick ? 33 : 257, 8192, true, false, SX_BF16); /* 2 packs, 16 warps */
        test_norm(rms, SX_BF16, g_quick ? 33 : 257, 8200, true, false, SX_F32);  /* beyond: generic path */
        /* no PDL for the final reduction, one block per SM (version 1 and its knobs are checked in
         * dev/cuda/norm_backward.cu) */
        test_norm(rms, SX_BF16, N / 3, 2048, true, true, SX_F32, 1, 0);
        test_norm(rms, SX_F32, N, 768, true, false, SX_F32);
        test_norm(rms, SX_F32, N, 1000, true, true, SX_F32);
        test_norm(rms, SX_F32, N / 3, 2048, true, false, SX_F32);
        test_norm(rms, SX_F32, g_quick ? 33 : 257, 4096, true, true, SX_F32); /* 2 packs per thread */
        test_norm(rms, SX_F32, N, 77, true, false, SX_F32);

        /* version 2, registers: k packs per thread, D rows loaded ahead, r = 1 row group per block */
        for (int d = 1; d <= 3; d++) {
            const NormVariant vr = {2, 1, d, 0};
            test_norm(rms, SX_BF16, N, 768, true, d == 2, SX_F32, 0, -1, vr);
        }
        const NormVariant r12 = {2, 1, 2, 0}, r13 = {2, 1, 3, 0}, r21 = {2, 2, 1, 0}, r22 = {2, 2, 2, 0};
        const NormVariant r13a = {2, 1, 3, 1};
        test_norm(rms, SX_BF16, N, 1000, false, true, SX_BF16, 0, -1, r22);
        test_norm(rms, SX_BF16, N / 3, 2048, true, true, SX_F32, 0, -1, r13);   /* 8 warps per row */
        test_norm(rms, SX_BF16, N / 3, 3000, true, false, SX_F32, 0, -1, r13a); /* 12 warps, some lanes idle */
        test_norm(rms, SX_BF16, g_quick ? 33 : 257, 8192, true, false, SX_F32, 0, -1, r21); /* 16 warps */
        test_norm(rms, SX_BF16, 5, 4096, true, true, SX_F32, 0, -1, r12);
        test_norm(rms, SX_F32, N, 1000, true, true, SX_F32, 0, -1, r12);
        test_norm(rms, SX_F32, g_quick ? 33 : 257, 4096, true, false, SX_F32, 0, -1, r22);
        test_norm(rms, SX_BF16, g_quick ? 301 : 32768, 768, true, false, SX_F32, 0, -1, r13); /* many rows per block */

        /* version 2, bulk copies: k packs per thread, S stages, r rows per stage (0: automatic) */
        for (int k = 1; k <= 4; k++) {
            const NormVariant vb = {3, k, k == 1 ? 2 : 16, 0};
            test_norm(rms, SX_BF16, N, 768, true, k == 3, SX_F32, 0, -1, vb);
        }
        const NormVariant b23 = {3, 2, 3, 0}, b1_4_1 = {3, 1, 4, 1}, b3_2_15 = {3, 3, 2, 15}, b2_8_2 = {3, 2, 8, 2};
        const NormVariant b4_16 = {3, 4, 16, 0}, b1_5_0 = {3, 1, 5, 0};
        test_norm(rms, SX_BF16, N, 1000, false, true, SX_BF16, 0, -1, b23);
        test_norm(rms, SX_BF16, N, 768, true, false, SX_BF16, 0, -1, b1_4_1);   /* 1 row per stage */
        test_norm(rms, SX_BF16, N, 768, true, true, SX_F32, 0, -1, b3_2_15);    /* 15 rows per stage, S = 2 */
        test_norm(rms, SX_BF16, N / 3, 1024, true, false, SX_F32, 2, -1, b2_8_2); /* 2 blocks per SM */
        test_norm(rms, SX_BF16, N / 3, 2048, true, true, SX_BF16, 0, -1, b1_5_0); /* 8 warps per row */
        test_norm(rms, SX_BF16, N / 3, 3000, true, true, SX_F32, 0, -1, b1_5_0);  /* 12 warps, lanes idle */
        test_norm(rms, SX_BF16, g_quick ? 67 : 1003, 4096, true, false, SX_F32, 0, -1, b4_16);
        test_norm(rms, SX_BF16, 5, 4096, true, false, SX_F32, 0, -1, b23);     /* fewer rows than blocks */
        test_norm(rms, SX_BF16, g_quick ? 33 : 257, 5000, true, true, SX_F32, 0, -1, b23); /* 10 warps */
        test_norm(rms, SX_BF16, g_quick ? 33 : 257, 8192, true, true, SX_BF16, 0, -1, b1_5_0); /* k raised to 3 */
        test_norm(rms, SX_F32, N, 768, true, false, SX_F32, 0, -1, b1_5_0);
        test_norm(rms, SX_F32, N, 1000, true, true, SX_F32, 0, -1, b23);
        test_norm(rms, SX_F32, g_quick ? 33 : 257, 4096, true, true, SX_F32, 0, -1, b4_16);
        test_norm(rms, SX_BF16, g_quick ? 301 : 32768, 768, true, true, SX_F32, 0, -1, b1_5_0); /* ring wraps */
    }
    /* the first layer's LayerNorm backward with the position gradient: GPT-2 sizes (3 and 4
     * packs per thread), 2 warps per row (C = 1280, 1600), B not a multiple of the rows per
     * block, B = 1, T not a multiple of the grid, and the generic path (C % 8 != 0) */
    test_layernorm_pos(g_quick ? 3 : 8, g_quick ? 67 : 1024, 768, true, SX_BF16);
    test_layernorm_pos(g_quick ? 3 : 8, g_quick ? 67 : 1024, 768, false, SX_F32);
    test_layernorm_pos(g_quick ? 2 : 5, g_quick ? 33 : 301, 1024, true, SX_F32);
    test_layernorm_pos(g_quick ? 2 : 13, g_quick ? 33 : 97, 1280, true, SX_BF16);
    test_layernorm_pos(g_quick ? 2 : 3, g_quick ? 33 : 1001, 1600, false, SX_F32);
    test_layernorm_pos(1, g_quick ? 33 : 300, 768, true, SX_F32);
    test_layernorm_pos(g_quick ? 2 : 9, g_quick ? 33 : 130, 4096, true, SX_BF16); /* 4 warps per row, 1 group */
    test_layernorm_pos(g_quick ? 2 : 4, 37, 77, true, SX_F32); /* generic */
    test_layernorm_pos(g_quick ? 2 : 3, g_quick ? 33 : 1001, 768, true, SX_BF16, 2); /* 2 rows ahead, 3 packs */
    test_layernorm_pos(g_quick ? 3 : 8, g_quick ? 67 : 1024, 768, true, SX_F32, 1, 2); /* 2 packs: 2 warps, lanes idle */
    test_layernorm_pos(g_quick ? 2 : 5, g_quick ? 33 : 301, 1024, false, SX_BF16, 1, 1); /* 1 pack, 4 warps */
    test_layernorm_pos(g_quick ? 2 : 5, g_quick ? 33 : 301, 1024, true, SX_F32, 1, 4);   /* 4 packs, 1 warp */
    test_layernorm_pos(g_quick ? 2 : 5, g_quick ? 33 : 301, 1024, true, SX_BF16, 2, 2);  /* 2 packs, 2 warps, 2 ahead */
    test_layernorm_pos(g_quick ? 2 : 7, g_quick ? 3000 : 5000, 768, true, SX_F32); /* more positions than groups */
    test_layernorm_pos(g_quick ? 2 : 9, g_quick ? 33 : 130, 6000, true, SX_BF16); /* 8 warps per row, lanes idle */

}

/* the embedding: the grouped path (default) with its knobs, the split API, the tiled, sorted
 * paths (knobs), and the scalar fallback (C % 8 != 0) */
static void test_embedding_all(void) {
    const int B = g_quick ? 1 : 31, T = g_quick ? 67 : 97; /* N = B*T = 3007 = 3*1000+7 */
    const int V = g_quick ? 1003 : 50257;
    test_embedding(B, T, 768, V, true, SX_F32);
    test_embedding(B, T, 1000, V, true, SX_BF16);
    test_embedding(B, T, 77, 1009, false, SX_F32);     /* scalar path */
    test_embedding(B, T, 768, V, true, SX_F32, 0, 1);  /* the sorted path, same sizes */
    test_embedding(B, T, 768, V, true, SX_F32, 0, 6);  /* the grouped path */
    test_embedding(B, T, 1000, V, true, SX_BF16, 0, 6);
    test_embedding(B, T, 768, V, true, SX_BF16, 0, 6);
    test_embedding(B, T, 77, 1009, false, SX_F32, 0, 6); /* scalar: the sorted path's windows on the grouping */
    test_embedding(B, T, 768, V, true, SX_BF16, 0, 0, 32, 256, 1); /* windows of 32, 3 chunks */
    test_embedding(B, T, 776, V, true, SX_F32, 0, 0, 8, 512, 0);   /* chunks of 512 and 264, dwpe blocks last */
    test_embedding(B, T, 768, V, true, SX_F32, 0, 0, 16, 0, -1, 16); /* cuts never move */
    test_embedding(B, T, 1000, V, true, SX_BF16, 0, 0, 16, 0, 0, 9);  /* runs of up to 8 kept whole */
    test_embedding(B, T, 768, V, false, SX_BF16, 0, 0, 5, 0, -1, 3);  /* the smallest Wn for W = 5 */
    test_embedding(B, T, 768, V, true, SX_F32, 0, 0, 32, 0, -1, 17);
    test_embedding(B, T, 768, V, true, SX_BF16, 0, 0, 12, 512, -1, 9); /* the 6-block build */
    const int L = g_quick ? 150 : 1000;
    test_embedding(4, L, 64, 1009, true, SX_F32, 1);     /* one id: ~N/16 windows merged */
    test_embedding(4, L, 72, 1009, true, SX_F32, 1, 0, 4, 64, 0); /* ~N/4 windows merged, chunks of 64 and 8 */
    test_embedding(4, L, 72, 1009, true, SX_F32, 1, 0, 4, 64, 0, 4); /* the same, cuts never move */
    test_embedding(4, L, 64, 1009, false, SX_BF16, 2, 0, 8, 0, -1, 5); /* uniform ids, runs of up to 4 kept */
    test_embedding(4, L, 64, 1009, true, SX_F32, 0, 0, 32, 0, -1, 17); /* skewed, runs of up to 16 kept */
    test_embedding(4, L, 64, 1009, true, SX_BF16, 1, 1);
    test_embedding(4, L, 64, 1009, true, SX_F32, 1, 6);
    test_embedding(4, L, 72, 1009, false, SX_BF16, 2);   /* uniform ids, bf16 grads */
    test_embedding(4, L, 33, 1009, true, SX_BF16, 1);    /* scalar path, merges */
    test_embedding(1, 1, 64, 1009, true, SX_F32);        /* one token */
    test_embedding(1, 33, 64, 7, true, SX_BF16);         /* 7 ids, two windows */
    if (!g_quick) {
        test_embedding(4, 2048, 64, 128256, false, SX_F32);   /* LLaMA-size vocabulary */
        test_embedding(4, 2048, 2048, 128256, false, SX_BF16, 0, 6); /* LLaMA size: 2 chunks of 1024 */
        test_embedding(4, 2048, 64, 128256, false, SX_F32, 0, 6);
        test_embedding(32, 1024, 768, 50304, true, SX_BF16, 0, 6); /* GPT-2 training size, grouped */
        test_embedding(32, 1024, 16, 50304, true, SX_F32);
        test_embedding(32, 1024, 16, 50304, false, SX_BF16, 1);
        test_embedding(32, 1024, 16, 50304, true, SX_F32, 0, 6);
        test_embedding(67, 2089, 8, 5003, true, SX_F32);     /* N = 139963 */
        test_embedding(67, 2089, 8, 5003, true, SX_F32, 0, 6);
    }
    test_embedding_bad_id();
}

/* every path of the fused cross-entropy that production runs; N, V, Vp: the GPT-2-like size of the
 * other tests (the layouts that were not chosen are checked by dev/cuda/crossentropy.cu) */
static void test_ce_all(int N, int V, int Vp) {
    test_ce(N, V, Vp, false); /* two 512-thread blocks per SM, one row buffer each */
    test_ce(g_quick ? 17 : 67, V, Vp, true);
    test_ce(g_quick ? 17 : 67, 1001, 1001, false); /* scalar path */
    /* rows too long for two per SM: clusters of 2 blocks per row (the default, and layout 5),
     * the persistent fallback (layout 4) */
    test_ce(g_quick ? 5 : 67, 59999, 60000, false);
    test_ce(g_quick ? 5 : 67, 59999, 60000, true);
    test_ce(g_quick ? 5 : 67, 59999, 60000, false, 5);
    test_ce(g_quick ? 5 : 67, 59999, 60000, false, 4);
    test_ce(g_quick ? 5 : 67, 59999, 60000, true, 4);
    /* LLaMA 3's 128k vocabulary: clusters of 4 (the default); the persistent fallback stages
     * part of each row and re-reads the rest; more rows than SMs, so that blocks take several rows */
    test_ce(140, 130001, 130008, false);
    test_ce(140, 130001, 130008, true);
    test_ce(140, 130001, 130008, false, 4);
    test_ce(140, 130001, 130008, true, 4);
    /* clusters where a row would fit: slices of a GPT-2 row, a row shorter than the block,
     * and padding so wide that whole slices lie past V */
    test_ce(g_quick ? 17 : 300, V, Vp, false, 5);
    test_ce(g_quick ? 17 : 67, V, Vp, true, 5);
    test_ce(g_quick ? 17 : 67, 1001, 1008, true, 5);
    test_ce(g_quick ? 17 : 67, 100, 4096, false, 5);
    test_ce(g_quick ? 17 : 300, V, Vp, false, 4);       /* the persistent fallback where a row would fit */
    test_ce(g_quick ? 17 : 300, 1001, 1001, true, 4);   /* scalar, persistent, in place */
}

/* GELU, SwiGLU, residual add, in bf16 and fp16 */
static void test_elementwise(int N) {
    test_gelu((size_t)N * 4 * 768, 0);
    test_gelu(g_quick ? 10007 : 1000003, 0); /* n % 8 tail */
    test_gelu(1001, 1);                       /* unaligned: scalar path */
    test_swiglu(N, 1000, false);
    test_swiglu(N, 768, true);
    test_swiglu(g_quick ? 13 : 301, 77, false); /* scalar path */
    test_residual((size_t)N * 768 + 5, 0);
    test_residual(1001, 1);
    /* fp16 storage: the same kernels */
    test_gelu(g_quick ? 10007 : 1000003, 0, SX_F16);
    test_gelu(1001, 1, SX_F16);
    test_swiglu(N, 1000, false, SX_F16);
    test_swiglu(N, 768, true, SX_F16);
    test_swiglu(g_quick ? 13 : 301, 77, false, SX_F16);
    test_residual((size_t)N * 768 + 5, 0, SX_F16);
    test_residual(1001, 1, SX_F16);
}

/* every kernel but the fused attention */
static void test_others(void) {
    const int B = g_quick ? 1 : 31, T = g_quick ? 67 : 97; /* N = B*T = 3007 = 3*1000+7 */
    const int N = B * T;
    const int V = g_quick ? 1003 : 50257, Vp = g_quick ? 1008 : 50304;

    test_errors();
    test_embedding_all();

    test_norms(N);

    test_elementwise(N);

    test_softmax(g_quick ? 2 : 6, g_quick ? 200 : 1000); /* backward: registers, 4 chunks */
    test_softmax(g_quick ? 2 : 6, g_quick ? 200 : 1000, 1); /* both backward paths explicitly */
    test_softmax(g_quick ? 2 : 6, g_quick ? 200 : 1000, 2);
    test_softmax(3, 200);                                /* backward: registers, 1 chunk */
    test_softmax(g_quick ? 1 : 2, g_quick ? 520 : 2000); /* backward: registers, 8 chunks (3 in quick) */
    test_softmax(1, g_quick ? 264 : 2056);               /* T > 2048: two-pass loop (quick: registers) */
    test_softmax(g_quick ? 2 : 5, 77);                   /* scalar path */

    test_ce_all(N, V, Vp);

    const size_t na = g_quick ? 100003 : 3007007;
    test_adamw(na, SX_BF16, 0, false);
    test_adamw(na, SX_F32, 0, true);
    test_adamw(1001, SX_BF16, 1, true); /* unaligned: scalar path */

}

/* ------------------------------------------- a vocabulary split over tensor parallelism
 * The group is simulated on one GPU: each shard's kernels run in turn and the
 * all-reduces (max, sums) are done on the host between them; the result must be
 * the unsplit reference's. */
static void test_tp_vocab(int B, int T, int C, int V, int shards, bool use_wpe) {
    char sz[64];
    snprintf(sz, sizeof sz, "N=%d C=%d V=%d tp=%d", B * T, C, V, shards);
    const int N = B * T, unit = 128 * shards, Vp = (V + unit - 1) / unit * unit, Vl = Vp / shards;
    /* embedding: the shards' lookups summed equal the whole table's */
    vec wte = randn((size_t)Vp * C, 0, 1), wpe = randn((size_t)T * C, 0, 1);
    round_bf16(wte); round_bf16(wpe);
    std::vector<int32_t> ids(N);
    for (int i = 0; i < N; i++) ids[i] = (int32_t)(rng_u64() % (uint64_t)V);
    vec ref((size_t)N * C);
    ref_embedding_forward(ref.data(), ids.data(), wte.data(), use_wpe ? wpe.data() : NULL, B, T, C, Vp);
    vec sum((size_t)N * C, 0.0);
    void *d_out = dmalloc((size_t)N * C * 2), *d_wpe = up_bf16(wpe);
    for (int r = 0; r < shards; r++) {
        vec part(wte.begin() + (size_t)r * Vl * C, wte.begin() + (size_t)(r + 1) * Vl * C);
        std::vector<int32_t> shifted(N);
        for (int i = 0; i < N; i++) shifted[i] = ids[i] - r * Vl;
        void *d_part = up_bf16(part), *d_ids = up_i32(shifted);
        poison(d_out, (size_t)N * C * 2);
        CK(sx_embedding_forward_shard((sx_bf16 *)d_out, (const int32_t *)d_ids, (const sx_bf16 *)d_part,
                                      use_wpe && r == 0 ? (const sx_bf16 *)d_wpe : NULL, B, T, C, Vl, 0));
        vec got = down_bf16(d_out, (size_t)N * C);
        for (size_t i = 0; i < got.size(); i++) sum[i] += got[i];
        CK(cudaFree(d_part)); CK(cudaFree(d_ids));
    }
    check("embedding_shard.sum", sz, "bf16", sum, ref, TOL_BF16);
    CK(cudaFree(d_out)); CK(cudaFree(d_wpe));

    /* cross-entropy: three kernels around the host's max and sums */
    vec x = randn((size_t)N * Vp, 0, 2.0);
    round_bf16(x);
    std::vector<int32_t> tg(N);
    for (int i = 0; i < N; i++) tg[i] = (int32_t)(rng_u64() % (uint64_t)V);
    vec loss(N), dl((size_t)N * Vp);
    const double dloss = 1.0 / N;
    ref_cross_entropy(loss.data(), dl.data(), x.data(), tg.data(), N, V, Vp, dloss);
    std::vector<vec> stats(shards);
    std::vector<void *> d_x(shards), d_t(shards), d_s(shards);
    for (int r = 0; r < shards; r++) {
        vec part((size_t)N * Vl);
        std::vector<int32_t> shifted(N);
        for (int i = 0; i < N; i++) {
            for (int c = 0; c < Vl; c++) part[(size_t)i * Vl + c] = x[(size_t)i * Vp + r * Vl + c];
            shifted[i] = tg[i] - r * Vl;
        }
        d_x[r] = up_bf16(part);
        d_t[r] = up_i32(shifted);
        d_s[r] = dmalloc((size_t)4 * N * 4);
        int cols = V - r * Vl < 0 ? 0 : V - r * Vl > Vl ? Vl : V - r * Vl;
        CK(sx_cross_entropy_shard_partial((float *)d_s[r], (const sx_bf16 *)d_x[r], (const int32_t *)d_t[r], N, cols, Vl, 0));
        stats[r] = down_f32(d_s[r], (size_t)4 * N);
    }
    vec gmax(N, -INFINITY);
    for (int r = 0; r < shards; r++)
        for (int i = 0; i < N; i++) gmax[i] = fmax(gmax[i], stats[r][N + i]);
    vec gsum(N, 0.0), gtgt(N, 0.0);
    for (int r = 0; r < shards; r++) {
        vec h = stats[r];
        for (int i = 0; i < N; i++) h[N + i] = gmax[i];
        void *d_h = up_f32(h);
        CK(cudaMemcpy(d_s[r], d_h, (size_t)4 * N * 4, cudaMemcpyDeviceToDevice));
        CK(cudaFree(d_h));
        CK(sx_cross_entropy_shard_rescale((float *)d_s[r], N, 0));
        vec after = down_f32(d_s[r], (size_t)4 * N);
        for (int i = 0; i < N; i++) { gsum[i] += after[2 * N + i]; gtgt[i] += after[3 * N + i]; }
    }
    vec all_d((size_t)N * Vp), got_loss;
    for (int r = 0; r < shards; r++) {
        vec h = down_f32(d_s[r], (size_t)4 * N);
        for (int i = 0; i < N; i++) { h[2 * N + i] = gsum[i]; h[3 * N + i] = gtgt[i]; }
        void *d_h = up_f32(h), *d_loss = dmalloc((size_t)N * 4);
        CK(cudaMemcpy(d_s[r], d_h, (size_t)4 * N * 4, cudaMemcpyDeviceToDevice));
        poison(d_loss, (size_t)N * 4);
        int cols = V - r * Vl < 0 ? 0 : V - r * Vl > Vl ? Vl : V - r * Vl;
        /* in place, as the trainer runs it */
        CK(sx_cross_entropy_shard_finish((float *)d_loss, (sx_bf16 *)d_x[r], (const sx_bf16 *)d_x[r], (const int32_t *)d_t[r],
                                         (const float *)d_s[r], N, cols, Vl, (float)dloss, 0));
        vec d = down_bf16(d_x[r], (size_t)N * Vl);
        for (int i = 0; i < N; i++)
            for (int c = 0; c < Vl; c++) all_d[(size_t)i * Vp + r * Vl + c] = d[(size_t)i * Vl + c];
        if (r == 0) got_loss = down_f32(d_loss, N);
        CK(cudaFree(d_h)); CK(cudaFree(d_loss));
        CK(cudaFree(d_x[r])); CK(cudaFree(d_t[r])); CK(cudaFree(d_s[r]));
    }
    check("cross_entropy_shard.loss", sz, "fp32", got_loss, loss, TOL_F32);
    check("cross_entropy_shard.dlogits", sz, "bf16", all_d, dl, TOL_BF16);
}

/* The clock probe: its reading must agree with the wall time of its own window (cycles counted /
 * elapsed time by events, within 3%), lie under the maximum clock (+3%), and refuse bad
 * arguments.  The probe timed runs second, behind a first one, so that the events bracket the
 * kernel alone and not the host's time to launch it. */
static void test_clock_probe(void) {
    int dev = 0, khz = 0;
    CK(cudaGetDevice(&dev));
    CK(cudaDeviceGetAttribute(&khz, cudaDevAttrClockRate, dev));
    float *d_mhz;
    CK(cudaMalloc(&d_mhz, 2 * sizeof(float)));
    cudaEvent_t a, b;
    CK(cudaEventCreate(&a));
    CK(cudaEventCreate(&b));
    const int window_us[2] = {100, 20000};
    CK(sx_sm_clock_probe(d_mhz, 10000, 0));
    CK(cudaEventRecord(a, 0));
    CK(sx_sm_clock_probe(d_mhz, window_us[1], 0));
    CK(cudaEventRecord(b, 0));
    CK(sx_sm_clock_probe(d_mhz + 1, window_us[0], 0));
    CK(cudaDeviceSynchronize());
    float ms = 0.0f, mhz[2] = {0.0f, 0.0f};
    CK(cudaEventElapsedTime(&ms, a, b));
    CK(cudaMemcpy(mhz, d_mhz, sizeof mhz, cudaMemcpyDeviceToHost));
    const double cycles = (double)khz * window_us[1] / 1000.0, from_events_mhz = cycles / (ms * 1e-3) / 1e6;
    char what[200];
    snprintf(what, sizeof what, "20 ms: probe %.0f MHz, events %.0f MHz; 100 us: %.0f MHz; max %d MHz", mhz[0],
             from_events_mhz, mhz[1], khz / 1000);
    const double top = khz / 1000.0 * 1.03;
    check_true("sm_clock_probe", "20 ms and 100 us", mhz[0] > 100.0f && mhz[0] <= top && mhz[1] > 100.0f &&
               mhz[1] <= top && fabs(mhz[0] / from_events_mhz - 1.0) < 0.03, what);
    check_true("sm_clock_probe(bad args)", "-", sx_sm_clock_probe(NULL, 50, 0) == cudaErrorInvalidValue &&
               sx_sm_clock_probe(d_mhz, 0, 0) == cudaErrorInvalidValue, "NULL output, zero window");
    CK(cudaEventDestroy(a));
    CK(cudaEventDestroy(b));
    CK(cudaFree(d_mhz));
}

int main(int argc, char **argv) {
    uint64_t seed = (uint64_t)time(NULL);
    bool only_attention = false, only_rope = false, no_attention = false, only_norm = false, only_embedding = false,
         only_clock = false, only_ce = false, only_elementwise = false;
    for (int i = 1; i < argc; i++) {
        if (!strcmp(argv[i], "--quick")) g_quick = true;
        else if (!strcmp(argv[i], "--attention")) only_attention = true;
        else if (!strcmp(argv[i], "--no-attention")) no_attention = true;
        else if (!strcmp(argv[i], "--rope")) only_rope = true;
        else if (!strcmp(argv[i], "--norm")) only_norm = true;
        else if (!strcmp(argv[i], "--embedding")) only_embedding = true;
        else if (!strcmp(argv[i], "--clock")) only_clock = true;
        else if (!strcmp(argv[i], "--ce")) only_ce = true;
        else if (!strcmp(argv[i], "--elementwise")) only_elementwise = true;
        else if (!strcmp(argv[i], "--seed") && i + 1 < argc) seed = strtoull(argv[++i], NULL, 10);
        else {
            fprintf(stderr, "usage: %s [--quick] [--attention | --no-attention] [--rope] [--norm] [--embedding] [--clock] [--ce] [--elementwise] [--seed S]\n", argv[0]);
            return 2;
        }
    }
    g_rng = seed;
    int dev = 0;
    cudaDeviceProp prop;
    CK(cudaGetDevice(&dev));
    CK(cudaGetDeviceProperties(&prop, dev));
    printf("# test_kernels: %s (sm_%d%d, %d SMs), seed %llu%s\n", prop.name, prop.major, prop.minor,
           prop.multiProcessorCount, (unsigned long long)seed, g_quick ? ", quick sizes" : "");
    printf("# rel_err = ||gpu-ref||/||ref|| vs float64 CPU reference; unwrit = elements left unwritten or NaN\n");
    header();

    if (only_clock) {
        test_clock_probe();
        goto done;
    }
    if (only_elementwise) {
        test_elementwise(g_quick ? 67 : 3007);
        goto done;
    }
    if (only_ce) {
        test_ce_all(g_quick ? 67 : 3007, g_quick ? 1003 : 50257, g_quick ? 1008 : 50304);
        goto done;
    }
    if (only_embedding) {
        test_embedding_all();
        only_attention = only_rope = only_norm = false;
        no_attention = true;
    }
    if (only_norm) {
        test_norms(g_quick ? 67 : 3007);
        only_attention = only_rope = false;
        no_attention = true;
    }
    if (!only_attention && !only_norm && !only_embedding) test_rope_all();
    if (!only_rope && !no_attention && !only_norm) {
        /* fused attention: MHA and GQA, D 64 and 128, fused qkv and separate tensors, T not a
         * multiple of the 64-row tiles (97, 1000), T a multiple (128), T = 1 */
        test_attention_all(seed);
    }
    if (!only_attention && !only_rope && !only_norm && !only_embedding) {
        test_others();
        test_clock_probe();
        test_tp_vocab(2, 37, 64, 1000, 2, true);       /* GPT-2-like: position table on one rank */
        test_tp_vocab(3, 29, 96, 50257, 4, false);     /* the last shard holds padding only in part */
        test_tp_vocab(1, 5, 8, 100, 2, true);          /* the second shard is all padding */
    }

done:
    CK(cudaDeviceSynchronize());
    printf("# %d checks, %d failed\n", g_checks, g_fail);
    if (g_fail) {
        printf("test_kernels: FAILED\n");
        return 1;
    }
    printf("test_kernels: all passed\n");
    return 0;
}
