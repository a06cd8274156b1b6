/* kernels/moe.cu against the float64 reference of validator/moe_plan.c, in
 * test_kernels.cu's manner: random inputs, each kernel's output against the
 * reference's, PASS or FAIL per check with its error; exit 1 on any failure, 0
 * after a clean skip without a GPU.
 *
 * Logits are drawn on a grid of 1/64 with no two equal in a row, so fp32 and
 * float64 pick the same experts; bf16 outputs are judged by ||gpu - ref|| / ||ref||
 * against 1e-2 (bf16 keeps 8 bits: 0.4% a value). */
#include <string.h>

#include "gpu_util.h"
#include "kernels.h"
extern "C" {
#include "moe_plan.h"
}

static int failures = 0, checks = 0;

static void verdict(const char *what, double err, double tol)
{
    checks++;
    int ok = err <= tol;
    if (!ok) failures++;
    printf("%-44s %-4s err %.3e (tol %.1e)\n", what, ok ? "PASS" : "FAIL", err, tol);
}

static uint16_t to_bf16(double f)
{
    float x = (float)f;
    uint32_t u;
    memcpy(&u, &x, 4);
    u += 0x7fffu + ((u >> 16) & 1u);
    return (uint16_t)(u >> 16);
}
static double from_bf16(uint16_t h)
{
    uint32_t u = (uint32_t)h << 16;
    float x;
    memcpy(&x, &u, 4);
    return x;
}

static double rel_err(const double *got, const double *want, size_t n)
{
    double num = 0.0, den = 0.0;
    for (size_t i = 0; i < n; i++) {
        if (!isfinite(got[i])) return INFINITY;
        num += (got[i] - want[i]) * (got[i] - want[i]);
        den += want[i] * want[i];
    }
    return den > 0 ? sqrt(num / den) : sqrt(num);
}

/* distinct logits in each row: a shuffled grid, so the top-k has no near ties */
static void grid_logits(double *z, int N, int E)
{
    for (int n = 0; n < N; n++) {
        for (int e = 0; e < E; e++) z[(size_t)n * E + e] = (e - E / 2) / 64.0 * 8.0 + rng_unif() * 0.05;
        for (int e = E - 1; e > 0; e--) {
            int f = (int)(rng_u64() % (uint64_t)(e + 1));
            double t = z[(size_t)n * E + e];
            z[(size_t)n * E + e] = z[(size_t)n * E + f];
            z[(size_t)n * E + f] = t;
        }
    }
}

static void check_shape(int N, int E, int k, int C)
{
    char name[96];
    size_t S = (size_t)N * k;
    double *z = (double *)malloc(sizeof(double) * N * E), *gate = (double *)malloc(sizeof(double) * S);
    int *idx = (int *)malloc(sizeof(int) * S), *counts = (int *)malloc(sizeof(int) * E);
    int *pos = (int *)malloc(sizeof(int) * S), *row_slot = (int *)malloc(sizeof(int) * S);
    double *x = (double *)malloc(sizeof(double) * N * C), *xs = (double *)malloc(sizeof(double) * S * C);
    double *ys = (double *)malloc(sizeof(double) * S * C), *out = (double *)malloc(sizeof(double) * N * C);
    double *dgate = (double *)malloc(sizeof(double) * S), *dz = (double *)malloc(sizeof(double) * N * E);
    double *got = (double *)malloc(sizeof(double) * (S * C > (size_t)N * E ? S * C : (size_t)N * E));
    grid_logits(z, N, E);
    /* bf16 inputs, so the reference sees the values the GPU reads */
    uint16_t *hx = (uint16_t *)malloc(2 * N * C), *hys = (uint16_t *)malloc(2 * S * C);
    for (size_t i = 0; i < (size_t)N * C; i++) { hx[i] = to_bf16(rng_normal()); x[i] = from_bf16(hx[i]); }
    for (size_t i = 0; i < S * C; i++) { hys[i] = to_bf16(rng_normal()); ys[i] = from_bf16(hys[i]); }
    float *hz = (float *)malloc(sizeof(float) * N * E), *hdg = (float *)malloc(sizeof(float) * S);
    for (size_t i = 0; i < (size_t)N * E; i++) hz[i] = (float)z[i];
    /* the gates' gradient, as the weighted SwiGLU's backward hands it over: any values */
    for (size_t i = 0; i < S; i++) { hdg[i] = (float)rng_normal(); dgate[i] = hdg[i]; }
    moe_ref_route(z, N, E, k, idx, gate);
    moe_ref_permute(idx, N, k, E, counts, pos, row_slot);
    moe_ref_dispatch(x, N, C, k, row_slot, xs);
    moe_ref_combine(ys, N, C, k, pos, gate, out);
    const double aux = 0.37;
    moe_ref_router_backward(z, idx, gate, dgate, counts, aux, N, E, k, dz);

    float *d_z = (float *)dmalloc(sizeof(float) * N * E), *d_gate = (float *)dmalloc(sizeof(float) * S);
    float *d_dgate = (float *)dmalloc(sizeof(float) * S);
    int32_t *d_idx = (int32_t *)dmalloc(4 * S), *d_counts = (int32_t *)dmalloc(4 * E), *d_pos = (int32_t *)dmalloc(4 * S);
    int32_t *d_rows = (int32_t *)dmalloc(4 * S);
    sx_bf16 *d_x = (sx_bf16 *)dmalloc(2 * N * C), *d_xs = (sx_bf16 *)dmalloc(2 * S * C), *d_ys = (sx_bf16 *)dmalloc(2 * S * C);
    sx_bf16 *d_out = (sx_bf16 *)dmalloc(2 * N * C), *d_dz = (sx_bf16 *)dmalloc(2 * N * E);
    float *d_rows_gate = (float *)dmalloc(sizeof(float) * SX_MOE_GATE_ROW * S), *d_back = (float *)dmalloc(sizeof(float) * S);
    CK(cudaMemcpy(d_z, hz, sizeof(float) * N * E, cudaMemcpyHostToDevice));
    CK(cudaMemcpy(d_x, hx, 2 * N * C, cudaMemcpyHostToDevice));
    CK(cudaMemcpy(d_ys, hys, 2 * S * C, cudaMemcpyHostToDevice));
    CK(cudaMemcpy(d_dgate, hdg, sizeof(float) * S, cudaMemcpyHostToDevice));

    CK(sx_moe_topk(d_idx, d_gate, d_z, N, E, k, 0));
    CK(sx_moe_permute(d_counts, d_pos, d_rows, d_idx, N, k, E, 0));
    CK(sx_moe_gather(d_xs, d_x, d_rows, N, k, C, 0));
    CK(sx_moe_combine(d_out, d_ys, d_pos, d_gate, N, k, C, 0));
    CK(sx_moe_row_gates(d_rows_gate, d_gate, d_rows, (int)S, 0));
    CK(sx_moe_slot_gates(d_back, d_rows_gate, d_rows, (int)S, 0));
    CK(sx_moe_router_backward(d_dz, d_z, d_idx, d_gate, d_dgate, d_counts, (float)aux, N, E, k, 0));
    CK(cudaDeviceSynchronize());

    int *gi = (int *)malloc(4 * S), *gc = (int *)malloc(4 * E), *gp = (int *)malloc(4 * S), *gr = (int *)malloc(4 * S);
    float *gf = (float *)malloc(sizeof(float) * S);
    uint16_t *gh = (uint16_t *)malloc(2 * (S * C > (size_t)N * E ? S * C : (size_t)N * E));
    CK(cudaMemcpy(gi, d_idx, 4 * S, cudaMemcpyDeviceToHost));
    CK(cudaMemcpy(gc, d_counts, 4 * E, cudaMemcpyDeviceToHost));
    CK(cudaMemcpy(gp, d_pos, 4 * S, cudaMemcpyDeviceToHost));
    CK(cudaMemcpy(gr, d_rows, 4 * S, cudaMemcpyDeviceToHost));
    int diff = 0;
    for (size_t s = 0; s < S; s++) diff += gi[s] != idx[s] || gp[s] != pos[s] || gr[s] != row_slot[s];
    for (int e = 0; e < E; e++) diff += gc[e] != counts[e];
    snprintf(name, sizeof name, "topk+permute N %d E %d k %d: mismatches", N, E, k);
    verdict(name, diff, 0);
    CK(cudaMemcpy(gf, d_gate, sizeof(float) * S, cudaMemcpyDeviceToHost));
    for (size_t s = 0; s < S; s++) got[s] = gf[s];
    snprintf(name, sizeof name, "gates N %d E %d k %d", N, E, k);
    verdict(name, rel_err(got, gate, S), 1e-5);
    CK(cudaMemcpy(gh, d_xs, 2 * S * C, cudaMemcpyDeviceToHost));
    for (size_t i = 0; i < S * C; i++) got[i] = from_bf16(gh[i]);
    snprintf(name, sizeof name, "gather N %d k %d C %d (exact)", N, k, C);
    verdict(name, rel_err(got, xs, S * C), 0);
    CK(cudaMemcpy(gh, d_out, 2 * N * C, cudaMemcpyDeviceToHost));
    for (size_t i = 0; i < (size_t)N * C; i++) got[i] = from_bf16(gh[i]);
    snprintf(name, sizeof name, "combine N %d k %d C %d", N, k, C);
    verdict(name, rel_err(got, out, (size_t)N * C), 1e-2);
    /* the gates to the sorted rows and back: copies, so exact, each row's padding 0 */
    float *grow = (float *)malloc(sizeof(float) * SX_MOE_GATE_ROW * S);
    CK(cudaMemcpy(grow, d_rows_gate, sizeof(float) * SX_MOE_GATE_ROW * S, cudaMemcpyDeviceToHost));
    CK(cudaMemcpy(gf, d_gate, sizeof(float) * S, cudaMemcpyDeviceToHost));
    diff = 0;
    for (size_t r = 0; r < S; r++) {
        diff += grow[r * SX_MOE_GATE_ROW] != gf[gr[r]];
        for (int q = 1; q < SX_MOE_GATE_ROW; q++) diff += grow[r * SX_MOE_GATE_ROW + q] != 0.0f;
    }
    float *gback = (float *)malloc(sizeof(float) * S);
    CK(cudaMemcpy(gback, d_back, sizeof(float) * S, cudaMemcpyDeviceToHost));
    for (size_t s2 = 0; s2 < S; s2++) diff += gback[s2] != gf[s2];
    snprintf(name, sizeof name, "row gates and back N %d k %d: mismatches", N, k);
    verdict(name, diff, 0);
    free(grow);
    free(gback);
    CK(cudaMemcpy(gh, d_dz, 2 * N * E, cudaMemcpyDeviceToHost));
    for (size_t i = 0; i < (size_t)N * E; i++) got[i] = from_bf16(gh[i]);
    snprintf(name, sizeof name, "router backward (aux) N %d E %d k %d", N, E, k);
    verdict(name, rel_err(got, dz, (size_t)N * E), 1e-2);

    cudaFree(d_z); cudaFree(d_gate); cudaFree(d_dgate); cudaFree(d_idx); cudaFree(d_counts); cudaFree(d_pos);
    cudaFree(d_rows); cudaFree(d_x); cudaFree(d_xs); cudaFree(d_ys); cudaFree(d_out); cudaFree(d_dz);
    cudaFree(d_rows_gate); cudaFree(d_back);
    free(z); free(gate); free(idx); free(counts); free(pos); free(row_slot); free(x); free(xs); free(ys); free(out);
    free(dgate); free(dz); free(got); free(hx); free(hys); free(hz); free(hdg);
    free(gi); free(gc); free(gp); free(gr); free(gf); free(gh);
}

/* The experts' gate-weighted SwiGLU and its backward on R rows of h[R, 2F], against the float64 reference from
 * the same bf16 inputs. */
static void check_swiglu(int R, int F)
{
    char name[96];
    size_t nh = (size_t)R * 2 * F, no = (size_t)R * F;
    double *h = (double *)malloc(sizeof(double) * nh), *w = (double *)malloc(sizeof(double) * R);
    double *dout = (double *)malloc(sizeof(double) * no), *out = (double *)malloc(sizeof(double) * no);
    double *dh = (double *)malloc(sizeof(double) * nh), *dw = (double *)malloc(sizeof(double) * R);
    double *got = (double *)malloc(sizeof(double) * nh);
    uint16_t *hh = (uint16_t *)malloc(2 * nh), *hd = (uint16_t *)malloc(2 * no), *gh = (uint16_t *)malloc(2 * nh);
    float *hw = (float *)calloc((size_t)R * SX_MOE_GATE_ROW, sizeof(float)), *gw = (float *)malloc(sizeof(float) * R * SX_MOE_GATE_ROW);
    for (size_t i = 0; i < nh; i++) { hh[i] = to_bf16(rng_normal() * 2.0); h[i] = from_bf16(hh[i]); }
    for (size_t i = 0; i < no; i++) { hd[i] = to_bf16(rng_normal()); dout[i] = from_bf16(hd[i]); }
    for (int r = 0; r < R; r++) { hw[(size_t)r * SX_MOE_GATE_ROW] = (float)rng_unif(); w[r] = hw[(size_t)r * SX_MOE_GATE_ROW]; }
    moe_ref_swiglu(h, w, R, F, out);
    moe_ref_swiglu_backward(dout, h, w, R, F, dh, dw);
    sx_bf16 *d_h = (sx_bf16 *)dmalloc(2 * nh), *d_out = (sx_bf16 *)dmalloc(2 * no), *d_dout = (sx_bf16 *)dmalloc(2 * no);
    sx_bf16 *d_dh = (sx_bf16 *)dmalloc(2 * nh);
    float *d_w = (float *)dmalloc(sizeof(float) * R * SX_MOE_GATE_ROW), *d_dw = (float *)dmalloc(sizeof(float) * R * SX_MOE_GATE_ROW);
    CK(cudaMemcpy(d_h, hh, 2 * nh, cudaMemcpyHostToDevice));
    CK(cudaMemcpy(d_dout, hd, 2 * no, cudaMemcpyHostToDevice));
    CK(cudaMemcpy(d_w, hw, sizeof(float) * R * SX_MOE_GATE_ROW, cudaMemcpyHostToDevice));
    CK(cudaMemset(d_dw, 0xff, sizeof(float) * R * SX_MOE_GATE_ROW));   /* every float written: no NaN left */
    CK(sx_moe_swiglu_forward(d_out, d_h, d_w, R, F, 0));
    CK(sx_moe_swiglu_backward(d_dh, d_dw, d_dout, d_h, d_w, R, F, 0));
    CK(cudaDeviceSynchronize());
    CK(cudaMemcpy(gh, d_out, 2 * no, cudaMemcpyDeviceToHost));
    for (size_t i = 0; i < no; i++) got[i] = from_bf16(gh[i]);
    snprintf(name, sizeof name, "weighted swiglu R %d F %d", R, F);
    verdict(name, rel_err(got, out, no), 1e-2);
    CK(cudaMemcpy(gh, d_dh, 2 * nh, cudaMemcpyDeviceToHost));
    for (size_t i = 0; i < nh; i++) got[i] = from_bf16(gh[i]);
    snprintf(name, sizeof name, "weighted swiglu backward dh R %d F %d", R, F);
    verdict(name, rel_err(got, dh, nh), 1e-2);
    CK(cudaMemcpy(gw, d_dw, sizeof(float) * R * SX_MOE_GATE_ROW, cudaMemcpyDeviceToHost));
    int padding = 0;
    for (int r = 0; r < R; r++) {
        got[r] = gw[(size_t)r * SX_MOE_GATE_ROW];
        for (int q = 1; q < SX_MOE_GATE_ROW; q++) padding += gw[(size_t)r * SX_MOE_GATE_ROW + q] != 0.0f;
    }
    snprintf(name, sizeof name, "weighted swiglu backward dweight R %d F %d", R, F);
    verdict(name, padding ? INFINITY : rel_err(got, dw, (size_t)R), 1e-4);
    cudaFree(d_h); cudaFree(d_out); cudaFree(d_dout); cudaFree(d_dh); cudaFree(d_w); cudaFree(d_dw);
    free(h); free(w); free(dout); free(out); free(dh); free(dw); free(got); free(hh); free(hd); free(gh); free(hw); free(gw);
}

/* The exchange's chunk copy: `n` chunks of random sizes (some empty) out of one buffer into another in
 * a shuffled order, against the same copy on the host; a copy, so bitwise. */
static void check_chunks(int n, int C, int max_rows)
{
    char name[96];
    int rows[SX_MOE_CHUNKS_MAX], order[SX_MOE_CHUNKS_MAX];
    size_t src_at[SX_MOE_CHUNKS_MAX], dst_at[SX_MOE_CHUNKS_MAX], total = 0;
    for (int c = 0; c < n; c++) {
        rows[c] = (c % 5 == 3) ? 0 : (int)(rng_u64() % (uint64_t)(max_rows + 1));
        src_at[c] = total;
        total += (size_t)rows[c];
        order[c] = c;
    }
    for (int c = n - 1; c > 0; c--) {
        int f = (int)(rng_u64() % (uint64_t)(c + 1)), t = order[c];
        order[c] = order[f];
        order[f] = t;
    }
    size_t at = 0;
    for (int i = 0; i < n; i++) {
        dst_at[order[i]] = at;
        at += (size_t)rows[order[i]];
    }
    const size_t count = (total ? total : 1) * (size_t)C;
    uint16_t *h_src = (uint16_t *)malloc(2 * count), *want = (uint16_t *)malloc(2 * count), *got = (uint16_t *)malloc(2 * count);
    for (size_t i = 0; i < count; i++) h_src[i] = to_bf16(rng_unif() * 2.0 - 1.0);
    memset(want, 0, 2 * count);
    for (int c = 0; c < n; c++)
        memcpy(want + dst_at[c] * C, h_src + src_at[c] * C, 2 * (size_t)rows[c] * C);
    sx_bf16 *d_src, *d_dst;
    CK(cudaMalloc(&d_src, 2 * count));
    CK(cudaMalloc(&d_dst, 2 * count));
    CK(cudaMemcpy(d_src, h_src, 2 * count, cudaMemcpyHostToDevice));
    CK(cudaMemset(d_dst, 0, 2 * count));
    sx_moe_chunks chunks;
    chunks.n = n;
    for (int c = 0; c < n; c++) {
        chunks.rows[c] = rows[c];
        chunks.src[c] = d_src + src_at[c] * C;
        chunks.dst[c] = d_dst + dst_at[c] * C;
    }
    CK(sx_moe_copy_chunks(&chunks, C, 0));
    CK(cudaDeviceSynchronize());
    CK(cudaMemcpy(got, d_dst, 2 * count, cudaMemcpyDeviceToHost));
    size_t wrong = 0;
    for (size_t i = 0; i < count; i++) wrong += got[i] != want[i];
    snprintf(name, sizeof name, "copy chunks n %d C %d (%zu rows)", n, C, total);
    verdict(name, (double)wrong, 0.0);
    cudaFree(d_src); cudaFree(d_dst);
    free(h_src); free(want); free(got);
}

int main(void)
{
    int devices = 0;
    if (cudaGetDeviceCount(&devices) != cudaSuccess || devices == 0) {
        printf("test_moe_kernels: no GPU found, skipping\n");
        return 0;
    }
    g_rng = 20261126;
    check_shape(1, 8, 2, 8);
    check_shape(333, 8, 2, 64);
    check_shape(4096, 8, 2, 1024);
    check_shape(1000, 64, 6, 256);
    check_shape(517, 4, 4, 136);   /* every token to every expert */
    check_shape(2048, 64, 8, 64);  /* OLMoE's top-8 of 64, a TP rank's tokens */
    check_shape(301, 33, 3, 8);    /* experts past one warp's lanes */
    check_shape(97, 64, 6, 8);     /* the kernels' most experts, six picks */
    check_shape(5, 1, 1, 8);       /* one expert */
    check_shape(4097, 64, 8, 8);   /* the permutation's 33 tiles, the last one slot */
    check_swiglu(1, 8);
    check_swiglu(300, 1024);       /* OLMoE's expert width */
    check_swiglu(77, 7168);        /* Mixtral's over expert TP 2 */
    check_swiglu(5, 2056);         /* a width no multiple of the block's 2048 */
    check_chunks(1, 8, 5);
    check_chunks(8, 1024, 700);     /* the MoE test model's EP 2: 2 ranks x 4 experts */
    check_chunks(SX_MOE_CHUNKS_MAX, 136, 40);
    check_chunks(3, 4096, 4000);    /* chunks past the launch's 1024 blocks: the blocks stride */
    /* bad arguments launch nothing */
    checks++;
    if (sx_moe_topk(NULL, NULL, NULL, 4, 8, 9, 0) != cudaErrorInvalidValue) { failures++; printf("topk k > E accepted: FAIL\n"); }
    checks++;
    if (sx_moe_topk(NULL, NULL, NULL, 4, SX_MOE_ROUTE_EXPERTS_MAX + 1, 2, 0) != cudaErrorInvalidValue) {
        failures++;
        printf("topk E > SX_MOE_ROUTE_EXPERTS_MAX accepted: FAIL\n");
    }
    checks++;
    sx_moe_chunks odd = {1, {4}, {NULL}, {NULL}};
    if (sx_moe_copy_chunks(&odd, 12, 0) != cudaErrorInvalidValue) { failures++; printf("copy chunks C %% 8 != 0 accepted: FAIL\n"); }
    checks++;
    if (sx_moe_swiglu_forward(NULL, NULL, NULL, 4, 12, 0) != cudaErrorInvalidValue) { failures++; printf("swiglu F %% 8 != 0 accepted: FAIL\n"); }
    printf("test_moe_kernels: %d checks, %d failed\n", checks, failures);
    return failures ? 1 : 0;
}
