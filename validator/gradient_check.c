/* The training step (validator/train.c, step.h): check-gradients: the real step on a tiny model
 * against the float64 reference (model_ref.c). */
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "step.h"

/* One forward and backward of the real training step (one GPU, one
 * micro-batch), then every parameter's gradient against validator/model_ref.c
 * computed in float64 from the same bf16 weights and tokens.
 * Tolerance: relative L2 error per tensor 5e-2 and loss 1e-2.  Every stored
 * activation and gradient is rounded to bf16 (2^-9 relative each), a value
 * passes through about ten such roundings between the loss and a first-layer
 * gradient, and the errors of a sum of thousands of terms mostly cancel: a
 * correct step lands near 1e-2; a wrong index, a missing term or a wrong
 * scale gives errors of order one. */
int check_gradients(gpt *g, const train_options *o, const model_t *m)
{
    const shapes *s = &g->s;
    const param_layout *pl = &g->pl;
    size_t N = (size_t)s->N, gn = (size_t)o->l.gbs * s->T;
    int32_t *global_in = host_alloc(gn * sizeof *global_in), *global_tg = host_alloc(gn * sizeof *global_tg);
    unsigned long long state = 42;
    load_batch(g, o, &state, global_in, global_tg);
    current_pass = PASS_BWD;
    CK(cudaMemsetAsync(g->grads, 0, pl->count * sizeof(bf16), gpu_ctx.stream));
    if (g->s.vpp > 1) run_schedule_async(g);
    else run_schedule(g);
    CK(cudaStreamSynchronize(gpu_ctx.stream));
    uint16_t *params = host_alloc(pl->count * sizeof *params), *grads = host_alloc(pl->count * sizeof *grads);
    float *losses = host_alloc(N * sizeof *losses);
    CK(cudaMemcpy(params, g->params, pl->count * sizeof *params, cudaMemcpyDeviceToHost));
    CK(cudaMemcpy(grads, g->grads, pl->count * sizeof *grads, cudaMemcpyDeviceToHost));
    CK(cudaMemcpy(losses, g->scr.losses, N * sizeof *losses, cudaMemcpyDeviceToHost));
    double gpu_loss = 0;
    for (size_t i = 0; i < N; i++) gpu_loss += losses[i];
    gpu_loss /= (double)N;

    ref_config c = {0};
    c.L = s->L; c.C = s->C; c.H = s->H; c.KV = s->KV; c.D = s->D; c.F = s->F; c.V = s->V; c.Vp = s->Vp;
    c.maxT = s->maxT; c.B = s->B; c.T = s->T;
    c.rms = s->rms; c.swiglu = s->swiglu; c.bias = s->bias; c.learned_pos = s->learned_pos; c.tied = s->tied;
    c.rope = s->rope; c.rope_theta = s->rope_theta;
    double *ref_params[REF_COUNT] = {0}, *ref_grads[REF_COUNT] = {0}, *gpu_grads[REF_COUNT] = {0};
    int ok = 1;
    for (int w = 0; w < P_COUNT; w++) {
        size_t n = ref_tensor_size(&c, w);
        int layers = is_layer_param(w) ? s->L : 1;
        if (n != (size_t)layers * pl->size[w]) {
            fprintf(stderr, "sextant-gpu check: tensor %d: the reference holds %zu elements, the step %zu\n", w, n,
                    (size_t)layers * pl->size[w]);
            return 2;
        }
        if (n == 0) continue;
        ref_params[w] = host_alloc(n * sizeof(double));
        ref_grads[w] = host_alloc(n * sizeof(double));
        gpu_grads[w] = host_alloc(n * sizeof(double));
        for (int l = 0; l < layers; l++) {
            size_t at = param_offset(g, w, l), per = pl->size[w];
            for (size_t i = 0; i < per; i++) {
                ref_params[w][(size_t)l * per + i] = sx_ref_bf2f(params[at + i]);
                gpu_grads[w][(size_t)l * per + i] = sx_ref_bf2f(grads[at + i]);
            }
        }
    }
    int32_t *inputs = host_alloc(N * sizeof *inputs), *targets = host_alloc(N * sizeof *targets);
    memcpy(inputs, g->host_ids, N * sizeof *inputs);
    memcpy(targets, g->host_ids + (size_t)g->microbatches * N, N * sizeof *targets);
    double ref_loss = ref_model_loss_grads(&c, ref_params, ref_grads, inputs, targets);
    static const char *const names[P_COUNT] = {"wte", "wpe", "ln1.w", "ln1.b", "qkv.w", "qkv.b", "attn_out.w", "attn_out.b",
                                               "ln2.w", "ln2.b", "mlp_up.w", "mlp_up.b", "mlp_down.w", "mlp_down.b",
                                               "lnf.w", "lnf.b", "head"};
    printf("# gradient check: %s as L=%d C=%d H=%d KV=%d D=%d F=%d V=%d (padded %d), B=%d T=%d%s; the real step (bf16) "
           "against validator/model_ref.c (float64, same bf16 weights and tokens)\n", m->name, s->L, s->C, s->H, s->KV, s->D,
           s->F, s->V, s->Vp, s->B, s->T, s->rope ? ", RoPE" : "");
    double loss_err = fabs(gpu_loss - ref_loss) / fabs(ref_loss);
    int loss_ok = isfinite(ref_loss) && loss_err <= 1e-2;
    printf("%-12s %14s %14s %10s %s\n", "loss", "", "", "", "");
    printf("%-12s %14.6f %14.6f %10.2e %s\n", "", gpu_loss, ref_loss, loss_err, loss_ok ? "PASS" : "FAIL");
    ok &= loss_ok;
    printf("%-12s %14s %14s %10s %s\n", "gradient", "|ref| (L2)", "max |err|", "rel. L2", "");
    for (int w = 0; w < P_COUNT; w++) {
        size_t n = ref_tensor_size(&c, w);
        if (n == 0) continue;
        double num = 0, den = 0, worst = 0;
        for (size_t i = 0; i < n; i++) {
            double d = gpu_grads[w][i] - ref_grads[w][i];
            num += d * d;
            den += ref_grads[w][i] * ref_grads[w][i];
            if (fabs(d) > worst || !isfinite(d)) worst = fabs(d);
        }
        double rel = den > 0 ? sqrt(num / den) : sqrt(num);
        int pass = isfinite(rel) && rel <= 5e-2;
        ok &= pass;
        printf("%-12s %14.4e %14.4e %10.2e %s\n", names[w], sqrt(den), worst, rel, pass ? "PASS" : "FAIL");
        free(ref_params[w]); free(ref_grads[w]); free(gpu_grads[w]);
    }
    printf("gradient check %s: %s\n", m->name, ok ? "all tensors within tolerance" : "FAILED");
    free(params); free(grads); free(losses); free(inputs); free(targets); free(global_in); free(global_tg);
    return ok ? 0 : 1;
}
