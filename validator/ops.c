/* sextant-gpu ops (commands.h): the planner's op list of one micro-batch executed op by op
 * and timed, predicted against measured. */
#include <cuda_runtime_api.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "bench.h"
#include "commands.h"
#include "gpu_check.h"
#include "kernels.h"
#include "outfile.h"

/* the most parameters ops times the optimizer step on (scaled linearly beyond): 512M, 2 GiB a buffer */
#define OPS_OPTIMIZER_PARAMS_MAX 536870912.0

/* The embedding and loss kernels read token ids (bench.h's token_ids): n valid rows, ids < vocab.  They
 * were once written into a scratch buffer while token_ids stayed NULL, and those ops went untimed. */
static void fill_token_ids(int64_t n, int64_t vocab)
{
    int32_t *ids = malloc((size_t)n * sizeof *ids);
    if (!ids) { fprintf(stderr, "sextant-gpu: ops: out of memory for %lld token ids\n", (long long)n); exit(2); }
    for (int64_t i = 0; i < n; i++) ids[i] = (int32_t)((i * 7919) % vocab);
    CUDA_CHECK(cudaMalloc((void **)&token_ids, (size_t)n * sizeof *ids));
    CUDA_CHECK(cudaMemcpy(token_ids, ids, (size_t)n * sizeof *ids, cudaMemcpyHostToDevice));
    free(ids);
}

typedef struct {
    int64_t batch, s, d;
    int backward;
} attention_ctx;

/* Unfused causal attention: scores = Q K^T, causal softmax, out = P V; the
 * backward is four batched GEMMs around the softmax backward.  The backward op
 * is timed alone, as the planner costs it: it reads what a forward left, and
 * its time does not depend on the values. */
static void run_attention(const void *ctx)
{
    const attention_ctx *a = ctx;
    gemm_shape scores = {a->s, a->s, a->d, a->batch, (long long)(a->s * a->d), (long long)(a->d * a->s), (long long)(a->s * a->s)};
    gemm_shape values = {a->s, a->d, a->s, a->batch, (long long)(a->s * a->s), (long long)(a->s * a->d), (long long)(a->s * a->d)};
    float scale = 1.0f / sqrtf((float)a->d);
    if (!a->backward) {
        run_gemm(&scores);
        CUDA_CHECK(sx_softmax_causal_forward(scratch[3], scratch[2], (int)a->batch, (int)a->s, scale, bench.stream));
        run_gemm(&values);
        return;
    }
    run_gemm(&scores);  /* dP = dO V^T */
    run_gemm(&values);  /* dV = P^T dO */
    CUDA_CHECK(sx_softmax_causal_backward(scratch[3], scratch[3], scratch[2], (int)a->batch, (int)a->s, scale, bench.stream));
    run_gemm(&values);  /* dQ = dS K */
    run_gemm(&values);  /* dK = dS^T Q */
}

/* One micro-batch on one GPU: train's defaults (mbs 8, seq 1024) with --mbs and --seq read by the planner's
 * flag parser (layout_flags), unfused attention (ops times attention as cuBLAS GEMMs and our softmax). */
int ops_layout(int argc, char **argv, layout_t *l)
{
    static const char *const known[] = {"--gpu", "--calibration", "--csv"};
    layout_flags lf;
    train_layout_defaults(l);
    layout_flags_init(&lf, l);
    for (int i = 3; i < argc; i++) {
        char err[512];
        unsigned bit = layout_flag_bit(argv[i]);
        if (bit && bit != LAYOUT_FLAG_MBS && bit != LAYOUT_FLAG_SEQ) {
            fprintf(stderr, "sextant-gpu: ops: %s: ops times one micro-batch on one GPU; it takes --mbs and --seq\n", argv[i]);
            return -1;
        }
        if (bit) {
            if (layout_flag_parse(argv[i], i + 1 < argc ? argv[i + 1] : NULL, &lf, err, sizeof err) < 0) {
                fprintf(stderr, "sextant-gpu: ops: %s\n", err);
                return -1;
            }
            i++;
            continue;
        }
        int ok = 0;
        for (size_t k = 0; k < sizeof known / sizeof known[0] && !ok; k++) ok = !strcmp(argv[i], known[k]);
        if (!ok) { fprintf(stderr, "sextant-gpu: ops: unknown flag %s\n", argv[i]); return -1; }
        i++;
    }
    *l = lf.l;
    l->gpus = 1;
    l->gbs = l->mbs;
    return 0;
}

int cmd_ops(int argc, char **argv, const hwdb *db, const model_zoo *zoo)
{
    if (argc < 3 || argv[2][0] == '-') { fprintf(stderr, "sextant-gpu: ops needs a MODEL\n"); return 2; }
    const model_t *zoo_model = model_zoo_find(zoo, argv[2]);
    if (!zoo_model) { fprintf(stderr, "sextant-gpu: unknown model '%s'\n", argv[2]); return 2; }
    /* the kernels here run without dropout: estimate the model as executed */
    static model_t executed;
    executed = *zoo_model;
    executed.dropout = 0;
    const model_t *m = &executed;
    const hw_gpu *g = hwdb_find_gpu(db, validate_gpu_name(argc, argv, db, NULL));
    if (!g) { fprintf(stderr, "sextant-gpu: --gpu: unknown GPU\n"); return 2; }
    const hw_node *node = hwdb_find_node(db, g->node);
    const char *csv_path = arg_value(argc, argv, "--csv", NULL);
    /* the overlay main() applied: --calibration FILE, else the GPU's shipped one (none: the hwdb defaults) */
    const char *calibration = arg_value(argc, argv, "--calibration", NULL);
    if (calibration && !strcmp(calibration, "none")) calibration = NULL;
    else if (!calibration && g->overlay_path[0]) calibration = g->overlay_path;
    layout_t l;
    if (ops_layout(argc, argv, &l) != 0) return 2;
    l.gpus_per_node = node->gpus_per_node;
    job_t job = {1e9, 1.0};
    static estimate_t e;
    char err[512];
    if (estimate_layout(m, g, node, &l, &job, &e, err, sizeof err) != 0) { fprintf(stderr, "sextant-gpu: %s\n", err); return 2; }

    const stage_ops *s = &e.first_stage;
    int64_t T = l.mbs * l.seq;
    double biggest = 0;
    for (int i = 0; i < s->nops; i++) {
        const op_t *op = &s->ops[i];
        double sz = 0;
        if (op->kind == OP_GEMM) sz = 2.0 * fmax(fmax((double)op->m * (double)op->k, (double)op->k * (double)op->n), (double)op->m * (double)op->n);
        if (op->kind == OP_ATTENTION) sz = 2.0 * (double)op->batch * (double)op->m * (double)op->n;
        if (sz > biggest) biggest = sz;
    }
    double params = model_params_total(m);
    /* the optimizer step streams its four fp32/bf16 arrays once: memory-bound, its time linear in the
     * parameters, so a model wider than the scratch buffers can hold is timed on a slice and scaled
     * (four buffers of 4 bytes x every parameter ran an 8B model out of memory) */
    double timed_params = params < OPS_OPTIMIZER_PARAMS_MAX ? params : OPS_OPTIMIZER_PARAMS_MAX;
    if (timed_params * 4.0 > biggest) biggest = timed_params * 4.0;
    if ((double)T * (double)(m->ffn_kind == FFN_SWIGLU ? 2 : 1) * (double)m->ffn * 2.0 * 2.0 > biggest)
        biggest = (double)T * (double)m->ffn * 8.0;
    size_t bytes = (size_t)(biggest * 1.05) + (64u << 20);
    scratch_init(bytes);
    fill_token_ids(T, m->vocab);
    /* one workspace for the embedding's and the norms' backward: the norms' grows with the width (32 MiB at
     * 4096, 40 MiB at 5120), and a smaller one was refused as an invalid argument */
    kernel_workspace_bytes = sx_embedding_backward_workspace_bytes((int)T, (int)m->hidden, (int)m->vocab);
    if (kernel_workspace_bytes < sx_norm_backward_workspace_bytes((int)m->hidden))
        kernel_workspace_bytes = sx_norm_backward_workspace_bytes((int)m->hidden);
    if (kernel_workspace_bytes < (32u << 20)) kernel_workspace_bytes = 32u << 20;
    CUDA_CHECK(cudaMalloc(&kernel_workspace, kernel_workspace_bytes));

    char device[256];
    device_line(device, sizeof device);
    printf("# sextant-gpu ops %s on %s: mbs %lld, seq %lld, unfused attention, bf16, %s\n", m->name, device,
           (long long)l.mbs, (long long)l.seq, calibration ? calibration : "hwdb defaults (uncalibrated)");
    printf("%-22s %-9s %6s %12s %12s %12s %8s\n", "op", "pass", "count", "predicted ms", "measured ms", "spread", "error");
    FILE *csv = NULL;
    outfile csv_out;
    char csv_err[PATH_MAX + 256];
    if (csv_path) {
        if (outfile_open(&csv_out, csv_path, csv_err, sizeof csv_err) != 0) {
            fprintf(stderr, "sextant-gpu: --csv: %s\n", csv_err);
            return 2;
        }
        csv = csv_out.f;
        fprintf(csv, "model,gpu,gpus,tp,pp,dp,mbs,gbs,seq,recompute,zero,op,predicted_s,measured_s,predicted_bytes,measured_bytes,calibrated\n");
    }
    double predicted_total = 0, measured_total = 0;
    for (int i = 0; i < s->nops; i++) {
        const op_t *op = &s->ops[i];
        if (op->kind == OP_COMM || (op->kind == OP_MEMBOUND && op->bytes <= 0)) continue;
        double spread = 0, t = 0;
        scratch_refresh(); /* fresh operands: the cross-entropy and the optimizer leave fp32 in the buffers */
        if (op->kind == OP_GEMM) {
            gemm_shape shape = {op->m, op->n, op->k, 1, 0, 0, 0};
            t = time_median(run_gemm, &shape, &spread);
        } else if (op->kind == OP_ATTENTION) {
            attention_ctx a = {op->batch, op->m, op->k, op->pass == PASS_BWD};
            t = time_median(run_attention, &a, &spread);
        } else if (!strcmp(op->name, "cross_entropy_bwd")) {
            t = 0; /* fused into cross_entropy */
        } else {
            /* the optimizer and the gradients' clearing stream every parameter once: timed on a slice */
            int optimizer = !strcmp(op->name, "optimizer") || !strcmp(op->name, "zero_grads");
            membound_ctx c = {op->name, m, T, m->hidden, m->ffn, padded_vocab(m, 1), l.seq, l.mbs, m->heads,
                              (int64_t)(optimizer ? timed_params : params), m->norm == NORM_RMSNORM};
            membound_error = cudaSuccess;
            cudaError_t stale = cudaGetLastError();  /* an earlier call's error must not be charged to this op */
            if (stale != cudaSuccess) fprintf(stderr, "sextant-gpu: before op %s: %s\n", op->name, cudaGetErrorString(stale));
            t = time_median(run_membound, &c, &spread);
            if (optimizer) t *= params / timed_params;
            if (membound_error != cudaSuccess) {
                /* a kernel refused its arguments: report the op, keep going */
                fprintf(stderr, "sextant-gpu: op %s: %s\n", op->name, cudaGetErrorString(membound_error));
                (void)cudaGetLastError();
                t = NAN;
            }
        }
        double count = (double)op->count;
        double predicted = op->time_s * count, measured = t * count;
        if (isfinite(measured)) {
            predicted_total += predicted;
            measured_total += measured;
        }
        char name[64];
        snprintf(name, sizeof name, "%s%s", op->name, op->pass == PASS_RECOMPUTE ? "@recompute" : "");
        printf("%-22s %-9s %6lld %12.4f %12.4f %11.1f%% %+7.1f%%\n", name, pass_name(op->pass), (long long)op->count,
               predicted * 1e3, measured * 1e3, 100.0 * spread, measured > 0 ? 100.0 * (predicted / measured - 1.0) : 0.0);
        if (csv)
            fprintf(csv, "%s,%s,1,1,1,1,%lld,%lld,%lld,none,0,%s,%.6e,%.6e,%.0f,,%d\n", m->name, g->name, (long long)l.mbs,
                    (long long)l.gbs, (long long)l.seq, name, predicted, measured, op->bytes * count, calibration != NULL);
    }
    printf("%-22s %-9s %6s %12.4f %12.4f %12s %+7.1f%%\n", "step (sum of ops)", "", "", predicted_total * 1e3,
           measured_total * 1e3, "", 100.0 * (predicted_total / measured_total - 1.0));
    printf("tokens/s from the summed ops: predicted %.0f, measured %.0f\n", (double)T / predicted_total, (double)T / measured_total);
    if (csv) {
        fprintf(csv, "%s,%s,1,1,1,1,%lld,%lld,%lld,none,0,step,%.6e,%.6e,%.0f,,%d\n", m->name, g->name, (long long)l.mbs,
                (long long)l.gbs, (long long)l.seq, predicted_total, measured_total, e.memory.total, calibration != NULL);
        if (outfile_commit(&csv_out, csv_err, sizeof csv_err) != 0) { fprintf(stderr, "sextant-gpu: --csv: %s\n", csv_err); return 2; }
    }
    CUDA_CHECK(cudaFree(token_ids));
    CUDA_CHECK(cudaFree(kernel_workspace));
    scratch_free();
    return 0;
}
