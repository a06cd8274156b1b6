/* train --plan FILE (commands.h): the slice of a plan larger than the machine that the GPUs
 * here can run, and which of the plan's terms it measures. */
#include <stdio.h>

#include "commands.h"

/* Picks the slice of plan p that `available` GPUs can run: the same TP group,
 * micro-batch, sequence, recomputation, attention and GPU type; as many
 * pipeline stages as fit, each with the plan's layers per stage; data
 * parallelism reduced to what is left, with the plan's micro-batches per
 * step (so each stage sees the same schedule); ZeRO shards follow the smaller
 * DP.  Prints which terms of the plan the slice measures.  Fills the model
 * and the options; -1 after one stderr line. */
int slice_plan(const plan_file *p, const model_t *full_model, const hw_gpu *gpu, const hw_node *node, int available,
                      model_t *slice_model, train_options *o)
{
    layout_t plan_layout = p->layout;
    const layout_t *l = &plan_layout;
    if (plan_layout.gpus_per_node == 0) plan_layout.gpus_per_node = node->gpus_per_node;
    if (l->recompute == RECOMPUTE_SELECTIVE && l->attention == ATTENTION_UNFUSED) {
        fprintf(stderr, "sextant-gpu: --plan: selective recomputation of unfused attention is not in the training step\n");
        return -1;
    }
    /* the TP and CP groups are kept whole: a CP rank's sequence share is the plan's */
    const int64_t cp = layout_cp(l);
    if (l->tp * cp > available) {
        fprintf(stderr, "sextant-gpu: --plan: its TP x CP group needs %lld GPUs, %d here; nothing started\n",
                (long long)(l->tp * cp), available);
        return -1;
    }
    int64_t per_stage = layers_on_stage(full_model, l, l->pp > 2 ? 1 : 0);   /* a middle stage's */
    int64_t pp = available / (l->tp * cp) < l->pp ? available / (l->tp * cp) : l->pp;
    int64_t dp = available / (l->tp * cp * pp) < l->dp ? available / (l->tp * cp * pp) : l->dp;
    int64_t m = l->gbs / (l->mbs * l->dp);
    *slice_model = *full_model;
    if (pp < l->pp) slice_model->layers = per_stage * pp;
    layout_t *run = &o->l;   /* what the step reads of it (train.h) */
    run->tp = l->tp; run->pp = pp; run->dp = dp;
    /* the plan's own split where the slice keeps its stages, else the slice's even one */
    run->first_stage_layers = pp == l->pp ? l->first_stage_layers : 0;
    run->last_stage_layers = pp == l->pp ? l->last_stage_layers : 0;
    run->vpp = pp > 1 ? l->vpp : 1;   /* chunks of the plan's size: layers per stage / vpp */
    run->mbs = l->mbs; run->seq = l->seq; run->gbs = l->mbs * dp * m;
    run->sp = l->sp; run->zero = l->zero; run->cp = cp;
    run->precision = l->precision;   /* bf16 or fp8 (plan_file.c refuses the rest) */
    run->ep = l->ep > 1 ? l->ep : 1;
    run->etp = l->etp;   /* the training step runs expert TP = TP only (train_check) */
    if ((dp * cp) % run->ep) {
        fprintf(stderr, "sextant-gpu: --plan: its EP group of %lld needs %lld data- or context-parallel ranks, the slice has "
                "%lld; nothing started\n", (long long)run->ep, (long long)run->ep, (long long)(dp * cp));
        return -1;
    }
    if (run->ep > 1) printf("# --plan: expert parallelism %lld: each rank holds %lld of %s's %lld experts\n", (long long)run->ep,
                            (long long)(full_model->experts / run->ep), p->model, (long long)full_model->experts);
    /* with flash attention selective recomputation recomputes nothing (docs/model.md, "Activations") */
    run->recompute = l->recompute == RECOMPUTE_FULL ? RECOMPUTE_FULL : RECOMPUTE_NONE;
    /* a plan costed with any fused kernel (flash, flash1, flash1-triton) runs on ours, the one fused kernel here */
    run->attention = attention_is_fused(l->attention) ? ATTENTION_SEXTANT : ATTENTION_UNFUSED;
    job_t job = {1e9, 1.0};
    static estimate_t full, slice;
    char err[256];
    if (estimate_layout(full_model, gpu, node, l, &job, &full, err, sizeof err) != 0) {
        fprintf(stderr, "sextant-gpu: --plan: %s\n", err);
        return -1;
    }
    layout_t sl = *l;
    sl.pp = pp; sl.dp = dp; sl.gpus = l->tp * cp * pp * dp; sl.gbs = run->gbs; sl.vpp = run->vpp;
    sl.first_stage_layers = run->first_stage_layers;
    sl.last_stage_layers = run->last_stage_layers;
    if (estimate_layout(slice_model, gpu, node, &sl, &job, &slice, err, sizeof err) != 0) {
        fprintf(stderr, "sextant-gpu: --plan: the slice: %s\n", err);
        return -1;
    }
    /* which of the plan's terms the slice runs as the plan would */
    int same_tp_link = full.tp_link_bytes_per_s == slice.tp_link_bytes_per_s;
    int stages_same = pp == l->pp;
    int dp_same = dp == l->dp && l->tp * cp * l->pp * l->dp <= l->gpus_per_node;
    int optimizer_same = dp == l->dp || l->zero == 0;
    /* the CP group is the plan's; its link is the slice's own when the plan's group is in one node */
    int cp_same = full.cp_comm_s == slice.cp_comm_s;
    double backed = full.compute_s + (same_tp_link ? full.tp_comm_s : 0) + (cp_same ? full.cp_comm_s : 0) + (stages_same ? full.pp_comm_s + full.bubble_s : 0) +
                    (dp_same ? full.dp_comm_s : 0) + (optimizer_same ? full.optimizer_s : 0);
    printf("# --plan: %s on %lld x %s: tp %lld, cp %lld, pp %lld, dp %lld, mbs %lld, gbs %lld, seq %lld, %s, ZeRO %d%s, %s\n",
           p->model, (long long)l->gpus, p->gpu, (long long)l->tp, (long long)cp, (long long)l->pp, (long long)l->dp,
           (long long)l->mbs, (long long)l->gbs, (long long)l->seq, recompute_name(l->recompute), l->zero, l->sp ? ", SP" : "",
           precision_name(l->precision));
    char chunks[96] = "";
    if (run->vpp > 1) snprintf(chunks, sizeof chunks, ", interleaved: %lld chunks of %lld layers per stage", (long long)run->vpp,
                               (long long)(per_stage / run->vpp));
    else if (l->vpp > 1) snprintf(chunks, sizeof chunks, "; one stage cannot interleave, the plan's vpp %lld is not run",
                                  (long long)l->vpp);
    printf("# slice on %d GPU%s: tp %lld, cp %lld, pp %lld (%lld layers per stage, %lld layers in all%s%s), dp %lld, gbs %lld (%lld "
           "micro-batches per step as in the plan)\n", (int)(l->tp * cp * pp * dp), l->tp * cp * pp * dp > 1 ? "s" : "",
           (long long)run->tp, (long long)cp, (long long)pp, (long long)per_stage, (long long)slice_model->layers,
           pp < l->pp && pp == 1 ? "; its one stage also holds the head, which the plan's first stage does not" : "", chunks,
           (long long)dp, (long long)run->gbs, (long long)m);
    printf("# the plan's predicted step %.3f s: compute %.3f (measured on the slice: same layers per stage, micro-batch, "
           "sequence, recomputation), TP %.3f (%s), CP %.3f (%s), PP %.3f + bubble %.3f (%s), DP %.3f (%s), optimizer %.3f (%s)\n",
           full.step_s, full.compute_s, full.tp_comm_s, same_tp_link ? "measured: the same group on the same link" : "predicted only",
           full.cp_comm_s, cp_same ? "measured: the same ring" : "predicted only: the slice's ring is on another link",
           full.pp_comm_s, full.bubble_s, stages_same ? "measured" : "predicted only: the slice has fewer stages",
           full.dp_comm_s, dp_same ? "measured" : "predicted only: the slice has a smaller or node-local DP group",
           full.optimizer_s, optimizer_same ? "measured" : "predicted only: the slice's ZeRO shards are larger");
    printf("# share of the plan's predicted step backed by measurement on the slice: %.1f%%\n", 100.0 * backed / full.step_s);
    printf("# the plan's peak memory per GPU %.2f GiB; the slice's %.2f GiB (its own prediction; measured below)\n",
           full.memory.total / 1073741824.0, slice.memory.total / 1073741824.0);
    return 0;
}
