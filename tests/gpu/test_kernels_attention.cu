/* test_kernels' fused attention and context parallelism checks (tests/gpu/kernel_check.h, the same
 * binary): the fused kernel forward and backward against the float64 reference, MHA, GQA and MQA, head
 * sizes 64 and 128, fused qkv and separate tensors, sequences on and off the 64-row tiles; the CP ring's
 * blocks merged by their log-sum-exp; and the kernel's refusals. */
#include <string.h>
#include "kernel_check.h"
#include "kernels_internal.h"
extern "C" {
#include "cp_ring.h"
}

/* ----------------------------------------------------------- fused attention */

/* fused: q, k, v are slices of one [B*T, (H+2KV)*D] buffer (and dq, dk, dv of one dqkv
 * buffer); else three tensors [B,T,H,D], [B,T,KV,D], [B,T,KV,D].  Forward, backward,
 * and the backward once more (bitwise equal). */
static void test_attention(int B, int T, int H, int KV, int D, bool fused) {
    char sz[64];
    snprintf(sz, sizeof sz, "B%d T%d H%d KV%d D%d%s", B, T, H, KV, D, fused ? " qkv" : "");
    const double scale = 1.0 / sqrt((double)D);
    const size_t nq = (size_t)B * T * H * D, nkv = (size_t)B * T * KV * D;
    const int ldq = fused ? (H + 2 * KV) * D : H * D, ldkv = fused ? ldq : KV * D;
    /* host: qkv holds q | k | v as laid out on the device (one buffer or three back to back) */
    const size_t nall = fused ? (size_t)B * T * ldq : nq + 2 * nkv;
    const size_t ko = fused ? (size_t)H * D : nq, vo = fused ? (size_t)(H + KV) * D : nq + nkv;
    vec qkv = randn(nall, 0, 1.0), dout = randn(nq, 0, 1.0);
    void *d_qkv = up_bf16(qkv), *d_do = up_bf16(dout);
    const sx_bf16 *dq_ = (const sx_bf16 *)d_qkv, *dk_ = dq_ + ko, *dv_ = dq_ + vo;
    void *d_out = dmalloc(nq * 2), *d_lse = dmalloc((size_t)B * H * T * 4), *d_g = dmalloc(nall * 2);
    const size_t wsb = sx_flash_attention_backward_workspace_bytes(B, T, T, H, KV, D);
    void *ws = dmalloc(wsb);
    poison(d_out, nq * 2);
    poison(d_lse, (size_t)B * H * T * 4);
    poison(d_g, nall * 2);
    CK(sx_flash_attention_forward((sx_bf16 *)d_out, (float *)d_lse, dq_, dk_, dv_, B, T, H, KV, D, ldq, ldkv,
                                  (float)scale, 0));
    vec out(nq), lse((size_t)B * H * T);
    ref_attention_forward(out.data(), lse.data(), qkv.data(), qkv.data() + ko, qkv.data() + vo, B, T, H, KV, D, ldq,
                          ldkv, scale);
    check("flash_attn_fwd.out", sz, "bf16", down_bf16(d_out, nq), out, TOL_BF16);
    check("flash_attn_fwd.lse", sz, "fp32", down_f32(d_lse, lse.size()), lse, TOL_F32);

    sx_bf16 *gq = (sx_bf16 *)d_g, *gk = gq + ko, *gv = gq + vo;
    CK(sx_flash_attention_backward(gq, gk, gv, (const sx_bf16 *)d_do, (const sx_bf16 *)d_out, (const float *)d_lse, dq_,
                                   dk_, dv_, B, T, H, KV, D, ldq, ldkv, (float)scale, ws, wsb, 0));
    vec g(nall, 0.0);
    ref_attention_backward(g.data(), g.data() + ko, g.data() + vo, dout.data(), qkv.data(), qkv.data() + ko,
                           qkv.data() + vo, B, T, H, KV, D, ldq, ldkv, scale);
    vec got = down_bf16(d_g, nall);
    /* split the q / k / v parts (their rows interleave in the fused layout) */
    auto part = [&](const vec &a, size_t off, int width, int ld) {
        vec r;
        r.reserve((size_t)B * T * width);
        for (size_t t = 0; t < (size_t)B * T; t++)
            for (int c = 0; c < width; c++) r.push_back(a[off + t * ld + c]);
        return r;
    };
    check("flash_attn_bwd.dq", sz, "bf16", part(got, 0, H * D, ldq), part(g, 0, H * D, ldq), TOL_BF16);
    check("flash_attn_bwd.dk", sz, "bf16", part(got, ko, KV * D, ldkv), part(g, ko, KV * D, ldkv), TOL_BF16);
    check("flash_attn_bwd.dv", sz, "bf16", part(got, vo, KV * D, ldkv), part(g, vo, KV * D, ldkv), TOL_BF16);
    std::vector<uint8_t> first = raw(d_g, nall * 2);
    poison(d_g, nall * 2);
    CK(sx_flash_attention_backward(gq, gk, gv, (const sx_bf16 *)d_do, (const sx_bf16 *)d_out, (const float *)d_lse, dq_,
                                   dk_, dv_, B, T, H, KV, D, ldq, ldkv, (float)scale, ws, wsb, 0));
    check_true("flash_attn_bwd.deterministic", sz, raw(d_g, nall * 2) == first, "bitwise equal twice");
    CK(cudaFree(d_qkv)); CK(cudaFree(d_do)); CK(cudaFree(d_out)); CK(cudaFree(d_lse)); CK(cudaFree(d_g));
    CK(cudaFree(ws));
}

/* ----------------------------------------------------------- context parallelism's ring */

/* Ring attention for CP = 2 on one GPU, both ranks in turn, as validator/cp.c runs it: each
 * rank's rows are chunks r and 3-r of every sequence (cp_ring.h), its K and V packed side by
 * side; the own causal block, then the peer's block (sx_flash_attention_block_*) merged with
 * sx_attention_merge; the backward from the merged out and lse, the peer's dK, dV added to
 * the owner's with sx_add_rows.  Against whole-sequence causal attention in float64 at the
 * rows' global positions.  Also RoPE at the chunks' positions: bitwise the whole sequence's. */
static void test_cp_attention(int B, int T, int H, int KV, int D) {
    char sz[64];
    snprintf(sz, sizeof sz, "B%d T%d H%d KV%d D%d cp2", B, T, H, KV, D);
    const int cp = 2, chunk = T / (2 * cp), Tl = T / cp, ld = (H + 2 * KV) * D, kvw = 2 * KV * D;
    const double scale = 1.0 / sqrt((double)D);
    vec qkv = randn((size_t)B * T * ld, 0, 1.0), dout = randn((size_t)B * T * H * D, 0, 1.0);
    round_bf16(qkv);
    round_bf16(dout);
    vec out((size_t)B * T * H * D), lse((size_t)B * H * T), g((size_t)B * T * ld, 0.0);
    ref_attention_forward(out.data(), lse.data(), qkv.data(), qkv.data() + H * D, qkv.data() + (H + KV) * D, B, T, H,
                          KV, D, ld, ld, scale);
    ref_attention_backward(g.data(), g.data() + H * D, g.data() + (H + KV) * D, dout.data(), qkv.data(),
                           qkv.data() + H * D, qkv.data() + (H + KV) * D, B, T, H, KV, D, ld, ld, scale);
    /* each rank's rows of a [B, T, width] tensor */
    auto local = [&](const vec &a, int width, int r) {
        vec l((size_t)B * Tl * width);
        for (int b = 0; b < B; b++)
            for (int t = 0; t < Tl; t++)
                memcpy(&l[((size_t)b * Tl + t) * width], &a[((size_t)b * T + cp_position(cp, r, chunk, t)) * width],
                       (size_t)width * sizeof(double));
        return l;
    };
    void *d_qkv[2], *d_do[2], *d_out[2], *d_lse[2], *d_g[2], *d_kv[2], *d_dkv[2], *d_part, *d_plse, *ws;
    const size_t wsb = sx_flash_attention_backward_workspace_bytes(B, Tl, Tl, H, KV, D);
    vec lq[2], ldo[2];
    for (int r = 0; r < 2; r++) {
        lq[r] = local(qkv, ld, r);
        ldo[r] = local(dout, H * D, r);
        d_qkv[r] = up_bf16(lq[r]);
        d_do[r] = up_bf16(ldo[r]);
        d_out[r] = dmalloc((size_t)B * Tl * H * D * 2);
        d_lse[r] = dmalloc((size_t)B * H * Tl * 4);
        d_g[r] = dmalloc((size_t)B * Tl * ld * 2);
        d_kv[r] = dmalloc((size_t)B * Tl * kvw * 2);
        d_dkv[r] = dmalloc((size_t)B * Tl * kvw * 2);
        poison(d_out[r], (size_t)B * Tl * H * D * 2);
        poison(d_lse[r], (size_t)B * H * Tl * 4);
        poison(d_g[r], (size_t)B * Tl * ld * 2);
        CK(cudaMemcpy2D(d_kv[r], (size_t)kvw * 2, (const sx_bf16 *)d_qkv[r] + H * D, (size_t)ld * 2, (size_t)kvw * 2,
                        (size_t)B * Tl, cudaMemcpyDeviceToDevice));
    }
    d_part = dmalloc((size_t)B * Tl * H * D * 2);
    d_plse = dmalloc((size_t)B * H * Tl * 4);
    ws = dmalloc(wsb);
    sx_attention_block own;
    own.B = B; own.Tq = own.Tk = Tl; own.H = H; own.KV = KV; own.D = D; own.causal = 1;
    own.q_row_stride = own.kv_row_stride = ld;
    own.q_batch_stride = own.kv_batch_stride = (long long)Tl * ld;
    own.o_batch_stride = (long long)Tl * H * D;
    own.lse_stride = Tl;
    own.scale = (float)scale;
    cp_block blk[2];
    sx_attention_block peer[2];
    for (int r = 0; r < 2; r++) {
        if (cp_ring_block(cp, r, 1, chunk, &blk[r]) != 0) { check_true("cp_ring_block", sz, false, "-1"); return; }
        peer[r] = own;
        peer[r].Tq = blk[r].nq; peer[r].Tk = blk[r].nk; peer[r].causal = 0;
        peer[r].kv_row_stride = kvw; peer[r].kv_batch_stride = (long long)Tl * kvw;
    }
    for (int r = 0; r < 2; r++) {
        const sx_bf16 *q = (const sx_bf16 *)d_qkv[r];
        CK(sx_flash_attention_block_forward((sx_bf16 *)d_out[r], (float *)d_lse[r], q, q + H * D, q + (H + KV) * D, &own, 0));
        const cp_block &b = blk[r];
        sx_attention_block p = peer[r];
        p.o_batch_stride = (long long)b.nq * H * D;
        p.lse_stride = b.nq;
        const sx_bf16 *pk = (const sx_bf16 *)d_kv[b.src] + (size_t)b.k0 * kvw;
        CK(sx_flash_attention_block_forward((sx_bf16 *)d_part, (float *)d_plse, q + (size_t)b.q0 * ld, pk, pk + KV * D,
                                            &p, 0));
        CK(sx_attention_merge((sx_bf16 *)d_out[r] + (size_t)b.q0 * H * D, (float *)d_lse[r] + b.q0, (const sx_bf16 *)d_part,
                              (const float *)d_plse, B, b.nq, H, D, own.o_batch_stride, own.lse_stride, 0));
    }
    vec got_o, got_l, ref_o, ref_l;
    for (int r = 0; r < 2; r++) {
        vec o = down_bf16(d_out[r], (size_t)B * Tl * H * D), l = down_f32(d_lse[r], (size_t)B * H * Tl);
        vec ro = local(out, H * D, r);
        got_o.insert(got_o.end(), o.begin(), o.end());
        ref_o.insert(ref_o.end(), ro.begin(), ro.end());
        for (int b = 0; b < B; b++)
            for (int h = 0; h < H; h++)
                for (int t = 0; t < Tl; t++) {
                    got_l.push_back(l[((size_t)b * H + h) * Tl + t]);
                    ref_l.push_back(lse[((size_t)b * H + h) * T + cp_position(cp, r, chunk, t)]);
                }
    }
    check("cp_ring_attn_fwd.out", sz, "bf16", got_o, ref_o, TOL_BF16);
    /* the lse of the merge: fp32 math on fp32 partials */
    check("cp_ring_attn_fwd.lse", sz, "fp32", got_l, ref_l, TOL_F32);

    /* as cp.c orders it: dQ cleared, the peer's block (dQ +=, the peer's dK, dV), the own block
     * (dQ +=, dK, dV =), then the peer's dK, dV for the rank's keys added */
    for (int r = 0; r < 2; r++) {
        sx_bf16 *gq = (sx_bf16 *)d_g[r];
        const sx_bf16 *q = (const sx_bf16 *)d_qkv[r], *o = (const sx_bf16 *)d_out[r], *dO = (const sx_bf16 *)d_do[r];
        const float *l = (const float *)d_lse[r];
        CK(cudaMemset2D(gq, (size_t)ld * 2, 0, (size_t)H * D * 2, (size_t)B * Tl));
        const cp_block &b = blk[r];
        CK(cudaMemset(d_dkv[b.src], 0, (size_t)B * Tl * kvw * 2));
        const size_t q0 = (size_t)b.q0, k0 = (size_t)b.k0 * kvw;
        const sx_bf16 *pk = (const sx_bf16 *)d_kv[b.src] + k0;
        sx_bf16 *dk = (sx_bf16 *)d_dkv[b.src] + k0;
        CK(sx_flash_attention_block_backward(gq + q0 * ld, dk, dk + KV * D, dO + q0 * H * D, o + q0 * H * D, l + q0,
                                             q + q0 * ld, pk, pk + KV * D, &peer[r], 1, ws, wsb, 0));
        CK(sx_flash_attention_block_backward(gq, gq + H * D, gq + (H + KV) * D, dO, o, l, q, q + H * D, q + (H + KV) * D,
                                             &own, 1, ws, wsb, 0));
    }
    vec got_g, ref_g;
    for (int r = 0; r < 2; r++) {
        CK(sx_add_rows((sx_bf16 *)d_g[r] + H * D, ld, (const sx_bf16 *)d_dkv[r], kvw, B * Tl, kvw, 0));
        vec gr = down_bf16(d_g[r], (size_t)B * Tl * ld), rr = local(g, ld, r);
        got_g.insert(got_g.end(), gr.begin(), gr.end());
        ref_g.insert(ref_g.end(), rr.begin(), rr.end());
    }
    check("cp_ring_attn_bwd.dqkv", sz, "bf16", got_g, ref_g, TOL_BF16);

    /* RoPE at the chunks' positions: the same bits as the whole sequence's rotation */
    void *d_whole = up_bf16(qkv);
    CK(sx_rope_forward((sx_bf16 *)d_whole, B, T, H, KV, D, ld, 10000.0f, 0));
    vec whole = down_bf16(d_whole, (size_t)B * T * ld);
    bool same = true;
    for (int r = 0; r < 2; r++) {
        CK(sx_rope_forward_chunks((sx_bf16 *)d_qkv[r], B, Tl, H, KV, D, ld, 10000.0f, chunk,
                                  cp_position(cp, r, chunk, 0), cp_position(cp, r, chunk, chunk), 0));
        vec mine = down_bf16(d_qkv[r], (size_t)B * Tl * ld), want = local(whole, ld, r);
        same = same && memcmp(mine.data(), want.data(), mine.size() * sizeof(double)) == 0;
    }
    check_true("rope_fwd_chunks", sz, same, "bitwise the whole sequence's rows");
    for (int r = 0; r < 2; r++) {
        CK(cudaFree(d_qkv[r])); CK(cudaFree(d_do[r])); CK(cudaFree(d_out[r])); CK(cudaFree(d_lse[r]));
        CK(cudaFree(d_g[r])); CK(cudaFree(d_kv[r])); CK(cudaFree(d_dkv[r]));
    }
    CK(cudaFree(d_part)); CK(cudaFree(d_plse)); CK(cudaFree(ws)); CK(cudaFree(d_whole));
}

/* sx_add_rows: dst += src over strided blocks, against the CPU's bf16(float(a) + float(b)), bitwise; sx_copy_rows
 * (copy): dst = src, bitwise: the packed path (aligned, rows of whole packs) and the one-element path (a width or a
 * stride that is not) */
static void test_rows(int rows, int cols, int dst_ld, int src_ld, int offset, bool copy) {
    vec dst = randn((size_t)rows * dst_ld + offset, 0, 1), src = randn((size_t)rows * src_ld + offset, 0, 1);
    void *d_dst = up_bf16(dst), *d_src = up_bf16(src);   /* both now hold the bf16 values the GPU sees */
    if (copy) CK(sx_copy_rows((sx_bf16 *)d_dst + offset, dst_ld, (const sx_bf16 *)d_src + offset, src_ld, rows, cols, 0));
    else CK(sx_add_rows((sx_bf16 *)d_dst + offset, dst_ld, (const sx_bf16 *)d_src + offset, src_ld, rows, cols, 0));
    CK(cudaDeviceSynchronize());
    vec got = down_bf16(d_dst, dst.size()), want = dst;
    for (int r = 0; r < rows; r++)
        for (int c = 0; c < cols; c++) {
            size_t i = (size_t)offset + (size_t)r * dst_ld + c;
            double s = src[(size_t)offset + (size_t)r * src_ld + c];
            want[i] = copy ? s : sx_ref_bf2f(sx_ref_f2bf((float)dst[i] + (float)s));
        }
    char sz[96];
    snprintf(sz, sizeof sz, "rows %d cols %d ld %d/%d offset %d", rows, cols, dst_ld, src_ld, offset);
    check_true(copy ? "copy_rows" : "add_rows", sz, memcmp(got.data(), want.data(), got.size() * sizeof(double)) == 0,
               copy ? "bitwise the source, the rest of dst untouched" : "bitwise the CPU's sums, the rest of dst untouched");
    CK(cudaFree(d_dst)); CK(cudaFree(d_src));
}

static void test_cp_all(void) {
    for (int copy = 0; copy <= 1; copy++) {
        test_rows(300, 256, copy ? 256 : 640, copy ? 640 : 256, 0, copy);   /* packs: K, V columns of a qkv row */
        test_rows(300, 100, 104, 100, 0, copy);   /* a width of 100: one element a thread */
        test_rows(77, 256, 640, 256, 1, copy);    /* not 16-byte aligned: one element a thread */
    }
    test_cp_attention(2, 256, 4, 2, 64);                 /* GQA, chunks of 64 rows */
    test_cp_attention(1, g_quick ? 200 : 392, 2, 2, 128); /* MHA, chunks of 50 / 98: partial tiles */
    test_cp_attention(3, 128, 4, 1, 64);                 /* MQA, chunks of 32: a block smaller than a tile */
}

static void test_attention_errors(void) {
    void *p = dmalloc(1 << 16);
    sx_bf16 *b = (sx_bf16 *)p;
    float *f = (float *)p;
    const size_t wsb = sx_flash_attention_backward_workspace_bytes(1, 16, 16, 4, 2, 64);
    cudaError_t e[6] = {
        sx_flash_attention_forward(b, f, b, b, b, 1, 16, 4, 2, 96, 384, 384, 0.1f, 0),  /* D = 96 */
        sx_flash_attention_forward(b, f, b, b, b, 1, 16, 4, 3, 64, 640, 640, 0.1f, 0),  /* H % KV */
        sx_flash_attention_forward(b, f, b, b, b, 1, 16, 4, 2, 64, 516, 516, 0.1f, 0),  /* stride % 8 */
        sx_flash_attention_forward(b, f, b + 1, b, b, 1, 16, 4, 2, 64, 512, 512, 0.1f, 0), /* unaligned */
        sx_flash_attention_forward(NULL, f, b, b, b, 1, 16, 4, 2, 64, 512, 512, 0.1f, 0),
        sx_flash_attention_backward(b, b, b, b, b, f, b, b, b, 1, 16, 4, 2, 64, 512, 512, 0.1f, p, wsb - 1, 0)};
    bool ok = true;
    for (cudaError_t x : e) ok = ok && x == cudaErrorInvalidValue;
    check_true("flash_attn.invalid_args", "-", ok, "cudaErrorInvalidValue, no launch");
    CK(cudaGetLastError());
    CK(cudaFree(p));
}

void test_attention_all(uint64_t seed)
{
    g_rng = seed ^ 0xa77e47105ull; /* this unit's own stream, repeatable by --seed */
    test_attention_errors();
    test_attention(2, g_quick ? 67 : 97, 4, 4, 64, true);
    test_attention(3, g_quick ? 67 : 97, 6, 2, 128, false);
    test_attention(2, g_quick ? 200 : 1000, 4, 1, 64, true);
    test_attention(1, g_quick ? 200 : 1000, 2, 2, 128, false);
    test_attention(2, 128, 8, 2, 128, true);
    /* eight query heads on one kv head over few key blocks: the dK, dV kernel splits the group over 8 blocks and
     * adds their fp32 partials (dkdv_splits) */
    test_attention(1, g_quick ? 130 : 256, 8, 1, 128, true);
    test_attention(2, 1, 2, 2, 64, false);
    test_cp_all();
}
