/* The training-step validator (validator/train.c): one GPU, or one process
 * per GPU with tensor, sequence, pipeline and data parallelism over NCCL. */
#ifndef SEXTANT_TRAIN_H
#define SEXTANT_TRAIN_H

#include "launch.h"
#include "planner.h"

/* steps of linear learning-rate warm-up unless --lr-warmup says otherwise */
#define TRAIN_LR_WARMUP_DEFAULT 10
/* AdamW's peak learning rate unless --lr says otherwise: at 3e-4 GPT-2 124M and 350M stayed
 * on the unigram plateau (loss 8.9) for 100 steps and the LLaMA-style 1.24B diverged back to
 * it; at 1e-4 all three learned the data's rule (2.1, 3.4, 2.7 after 100 steps; H100,
 * docs/validation/2026-11-24-h100-step/lr-default) */
#define TRAIN_LR_DEFAULT 1e-4

typedef struct {
    /* The run's layout as the shared flag parser reads it (planner.h, layout_flags): the step reads
     * tp, pp, dp, cp (0 or 1 none, 2 ring attention over two ranks, validator/cp.c), ep (inside dp,
     * MoE models; 0 is 1), vpp (chunks per stage, interleaved 1F1B when > 1; 0 is 1), mbs, gbs, seq,
     * sp, zero (0..3), recompute (none or full), attention (unfused, or any fused kernel: the step's
     * own, train_fused_attention) and precision (bf16, or fp8: the linear layers' GEMMs in FP8, fp8.h,
     * lm_head in bf16).  Its other fields are not run and not read. */
    layout_t l;
    int steps, warmup;
    double lr;         /* AdamW's peak learning rate (--lr; 0 is taken as TRAIN_LR_DEFAULT) */
    int lr_warmup;     /* steps of linear warm-up to lr (--lr-warmup) */
    int calibrated;
    int quiet_steps;   /* print the loss of every step (equivalence tests) instead of every tenth */
    int check_gradients; /* one forward and backward, every gradient against the float64 reference (model_ref.h) */
    const char *csv;   /* NULL, or where the rows go (docs/validation's columns) */
    const char *json;  /* NULL, or the same as JSON */
    const char *plot;  /* NULL, or an SVG of predicted against measured per op (gnuplot) */
    const char *losses;/* NULL, or a file that gets one line "step loss" per step (rank 0) */
    const char *device;/* one line naming the GPU and driver, for the reports */
    const hw_gpu *uncal_gpu;   /* with --calibration: the same GPU on hwdb defaults, so that */
    const hw_node *uncal_node; /* the report gives the uncalibrated prediction beside it */
} train_options;

/* sextant-gpu train's defaults: mbs 8, seq 1024, gbs mbs x dp (set after the flags), one GPU,
 * unfused attention, no recomputation, bf16 (docs/guide.md, "Attention kernels"). */
void train_layout_defaults(layout_t *l);
/* 1 when the step runs its fused attention kernel (any fused --attention: flash, sextant, flash1) */
static inline int train_fused_attention(const train_options *o) { return attention_is_fused(o->l.attention); }
/* 1 when the linear layers' GEMMs run in FP8 (--precision fp8) */
static inline int train_fp8_gemms(const train_options *o) { return o->l.precision == PREC_FP8; }

/* Trains a GPT-2- or LLaMA-family model for o->steps steps on synthetic
 * tokens and prints measured against predicted.  ctx is NULL on one GPU,
 * else this rank's place and its communicator over tp * pp * dp ranks
 * (launch.h).  0 when the losses' trend says the run learns (loss_trend.h), 1 when not. */
int train_run(const model_t *m, const hw_gpu *gpu, const hw_node *node, const train_options *o, launch_ctx *ctx);

/* (validator/linear.c) Times the three GEMMs of one linear layer y[N, out] = x[N, in] W^T (+ bias) exactly as the
 * training step issues them (forward with the bias in cuBLASLt's epilogue, dgrad, wgrad adding
 * into dW with the bias gradient in the epilogue), each back to back: seconds per call in
 * seconds[0..2], and the SM clock each ran at in clock_mhz[0..2] (may be NULL).  buffers: four device buffers of buffer_bytes each, filled with random bf16 by
 * the caller (the values set the GEMMs' power draw, and so their clocks).  0, or -1 after one
 * stderr line. */
int train_time_linear(int N, int in, int out, int with_bias, void *const buffers[4], size_t buffer_bytes, double seconds[3],
                      double clock_mhz[3]);
/* (validator/linear.c) calibrate: the unfused causal attention's forward [0] and backward [1] as the step runs them
 * (cuBLAS batched GEMMs and our softmax), B sequences of T tokens, H query and KV key/value
 * heads of size D, on the random data of `buffers` (four of `buffer_bytes`); seconds per call
 * and the SM clock after the median batch (clock_mhz may be NULL).  -1 when it does not fit. */
int train_time_unfused_attention(int B, int T, int H, int KV, int D, void *const buffers[4], size_t buffer_bytes,
                                 double seconds[2], double clock_mhz[2]);

/* (validator/train_check.c) Checks the layout flags against the model before anything starts: 0, or
 * -1 after one stderr line naming the flag. */
int train_check(const model_t *m, const train_options *o);

#endif
