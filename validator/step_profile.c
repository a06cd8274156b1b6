/* The training step (validator/train.c, step.h): the profiling step's events around every op, the SM
 * clock probes after them, and the diagnostics that replay ops on the step's own operands
 * (SEXTANT_REPLAY, SEXTANT_REPLAY_COPIES). */
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "step.h"

int profiling;
int profile_count;
pass_t current_pass;       /* forward, backward, recompute or step: which row of the op list an op is */
cudaEvent_t *profile_events;
int profile_events_made;

profile_tag *profile_tags;

/* SEXTANT_CLOCK_PROBE=all or a list of op names (attention,mlp_up,...): the SM clock right
 * after those ops of the profiling step and at the end of every timed step, by
 * sx_sm_clock_probe (CLOCK_PROBE_US each; the profiling step's time includes them, the timed
 * steps' do not).  A diagnostic: at what clock a kernel runs inside a step, against calibrate's
 * clock for it alone. */
/* CLOCK_PROBE_US: gpu_timing.h */
const char *clock_probe_ops;
float *clock_probe_mhz; /* device: PROFILE_MAX slots for the ops, then one per step */
static int clock_probe_wanted(const char *name)
{
    if (!clock_probe_ops) return 0;
    if (!strcmp(clock_probe_ops, "all")) return 1;
    size_t n = strlen(name);
    for (const char *p = clock_probe_ops; (p = strstr(p, name)) != NULL; p += n)
        if ((p == clock_probe_ops || p[-1] == ',') && (p[n] == ',' || p[n] == '\0')) return 1;
    return 0;
}

void profile_mark_on(const char *name, int end, cudaStream_t on)
{
    if (!profiling || profile_count >= PROFILE_MAX) return;
    if (!end) {
        profile_tags[profile_count].name = name;
        profile_tags[profile_count].pass = current_pass;
        while (profile_events_made < 2 * profile_count + 2) CK(cudaEventCreate(&profile_events[profile_events_made++]));
    }
    CK(cudaEventRecord(profile_events[2 * profile_count + end], on));
    if (end && clock_probe_wanted(name)) CK(sx_sm_clock_probe(clock_probe_mhz + profile_count, CLOCK_PROBE_US, on));
    if (end) profile_count++;
}

/* an environment variable holding an integer in [lo, hi]; `unset` when absent or empty; exits
 * with one line naming it otherwise */
int env_int_in(const char *name, int lo, int hi, int unset)
{
    const char *text = getenv(name);
    if (!text || !*text) return unset;
    char *end;
    long v = strtol(text, &end, 10);
    if (*end || v < lo || v > hi) {
        fprintf(stderr, "sextant-gpu train: %s=%s: expected an integer from %d to %d\n", name, text, lo, hi);
        exit(2);
    }
    return (int)v;
}

/* SEXTANT_REPLAY=R, a diagnostic: after the profiling step, one more step in which every
 * GEMM of a linear layer and every attention runs R more times back to back on the step's
 * own operands, timed apart (forward, dgrad and the attention rewrite their own outputs,
 * which they do not read; wgrad writes a spare dW).  Set beside the profiling step's time
 * for the same op and calibrate's, it tells what the operands' values cost (calibrate
 * times random data) from what the step around the op costs (the clock it holds, the
 * caches). */
int replay_runs;
int replaying;
int replay_count;
cudaEvent_t *replay_events;
int replay_events_made;
profile_tag *replay_tags;
void *replay_dw, *replay_dbias;
size_t replay_dw_bytes, replay_dbias_bytes;
static int replay_dw_refused;

void replay_mark(const char *name, int end)
{
    if (!end) {
        replay_tags[replay_count].name = name;
        replay_tags[replay_count].pass = current_pass;
        while (replay_events_made < 2 * replay_count + 2) CK(cudaEventCreate(&replay_events[replay_events_made++]));
    }
    CK(cudaEventRecord(replay_events[2 * replay_count + end], gpu_ctx.stream));
    if (end) replay_count++;
}

/* a spare buffer of at least `bytes` for the replayed wgrad; 0 where the device has no room */
int replay_reserve(void **buf, size_t *have, size_t bytes)
{
    if (*have >= bytes) return 1;
    if (*buf) CK(cudaFree(*buf));
    *buf = NULL;
    *have = 0;
    if (cudaMalloc(buf, bytes) != cudaSuccess) {
        (void)cudaGetLastError(); /* out of memory is not sticky: clear it */
        *buf = NULL;
        if (!replay_dw_refused)
            fprintf(stderr, "sextant-gpu train: SEXTANT_REPLAY: no room for a spare dW of %.1f MiB; those wgrads "
                            "are not replayed\n", bytes / 1048576.0);
        replay_dw_refused = 1;
        return 0;
    }
    CK(cudaMemset(*buf, 0, bytes)); /* dW accumulates: start from numbers */
    *have = bytes;
    return 1;
}
/* SEXTANT_REPLAY_COPIES=1, with SEXTANT_REPLAY: the fused attention of the replay step runs its R
 * times once more on copies of its operands in an allocation of their own, outside the step's one
 * allocation.  On an H100 the step's LLaMA attention backward took 17.5% longer than calibrate's,
 * with L2, the operands' values and the clock ruled out as far as measured
 * (docs/validation/archive/2026-11-25-h100-heated-attention): if the copies run at calibrate's speed, the
 * placement of the step's buffers is the cause; if at the step's, the step around them. */
int replay_copies;
static void *replay_copy;
static size_t replay_copy_have;
static int replay_copy_refused;

/* the copies' layout in replay_copy: qkv, out, dout, dqkv, lse, workspace (part: their sizes) */
static void replay_copy_layout(const shapes *s, size_t at[7], size_t part[6])
{
    const size_t n_qkv = (size_t)s->B * s->T * s->qkv, n_out = (size_t)s->B * s->T * s->H * s->D;
    part[0] = part[3] = n_qkv * sizeof(bf16);
    part[1] = part[2] = n_out * sizeof(bf16);
    part[4] = (size_t)s->B * s->H * s->T * sizeof(float);
    part[5] = sx_flash_attention_backward_workspace_bytes(s->B, s->T, s->H);
    at[0] = 0;
    for (int i = 0; i < 6; i++) at[i + 1] = at[i] + (part[i] + 255) / 256 * 256;
}

static void run_attention_on_copies(const shapes *s, int backward)
{
    size_t at[7], part[6];
    replay_copy_layout(s, at, part);
    char *base = replay_copy;
    bf16 *cq = (bf16 *)(base + at[0]), *cout = (bf16 *)(base + at[1]), *cdout = (bf16 *)(base + at[2]);
    bf16 *cdq = (bf16 *)(base + at[3]);
    float *clse = (float *)(base + at[4]);
    const size_t hd = (size_t)s->H * s->D, kd = (size_t)(s->H + s->KV) * s->D;
    const float scale = 1.0f / sqrtf((float)s->D);
    CK(backward ? sx_flash_attention_backward(cdq, cdq + hd, cdq + kd, cdout, cout, clse, cq, cq + hd, cq + kd, s->B, s->T, s->H,
                                              s->KV, s->D, s->qkv, s->qkv, scale, base + at[5], part[5], gpu_ctx.stream)
                : sx_flash_attention_forward(cout, clse, cq, cq + hd, cq + kd, s->B, s->T, s->H, s->KV, s->D, s->qkv, s->qkv,
                                             scale, gpu_ctx.stream));
}

typedef struct { const shapes *s; int backward; } copies_run;
static void run_copies(const void *ctx, int r)
{
    (void)r;
    const copies_run *c = ctx;
    run_attention_on_copies(c->s, c->backward);
}

/* After the replay step, with the last layer's copies (the backward's operands of layer 0): each
 * pass back to back alone as calibrate times it (time_batches), after a second of idle;
 * milliseconds per call and the clock the batches left */
void replay_copies_alone(const shapes *s, double ms_per_call[2], double mhz[2])
{
    ms_per_call[0] = ms_per_call[1] = mhz[0] = mhz[1] = 0.0;
    if (!replay_copy) return;
    for (int pass = 0; pass < 2; pass++) {
        CK(cudaStreamSynchronize(gpu_ctx.stream));
        sleep(1);
        const copies_run c = {s, pass};
        ms_per_call[pass] = 1e3 * time_batches(run_copies, &c, 20, &mhz[pass]);
    }
}

void replay_attention_on_copies(const shapes *s, int backward, const bf16 *qkv, const bf16 *out, const float *lse,
                                const bf16 *dout)
{
    size_t at[7], part[6];
    replay_copy_layout(s, at, part);
    const size_t lse_bytes = part[4];
    if (replay_copy_have < at[6]) {
        if (replay_copy) CK(cudaFree(replay_copy));
        replay_copy = NULL;
        replay_copy_have = 0;
        if (replay_copy_refused) return;
        if (cudaMalloc(&replay_copy, at[6]) != cudaSuccess) {
            (void)cudaGetLastError();
            replay_copy = NULL;
            replay_copy_refused = 1;
            fprintf(stderr, "sextant-gpu train: SEXTANT_REPLAY_COPIES: no room for %.1f MiB of copies; not replayed\n",
                    at[6] / 1048576.0);
            return;
        }
        replay_copy_have = at[6];
    }
    char *base = replay_copy;
    CK(cudaMemcpyAsync(base + at[0], qkv, part[0], cudaMemcpyDeviceToDevice, gpu_ctx.stream));
    CK(cudaMemcpyAsync(base + at[1], out, part[1], cudaMemcpyDeviceToDevice, gpu_ctx.stream));
    CK(cudaMemcpyAsync(base + at[4], lse, lse_bytes, cudaMemcpyDeviceToDevice, gpu_ctx.stream));
    if (backward) CK(cudaMemcpyAsync(base + at[2], dout, part[2], cudaMemcpyDeviceToDevice, gpu_ctx.stream));
    replay_mark(backward ? "attention_bwd_on_copies" : "attention_on_copies", 0);
    for (int r = 0; r < replay_runs; r++) run_attention_on_copies(s, backward);
    replay_mark(backward ? "attention_bwd_on_copies" : "attention_on_copies", 1);
}

void replay_free(void)
{
    if (replay_dw) CK(cudaFree(replay_dw));
    if (replay_dbias) CK(cudaFree(replay_dbias));
    if (replay_copy) CK(cudaFree(replay_copy));
    replay_dw = replay_dbias = NULL;
    replay_copy = NULL;
    replay_dw_bytes = replay_dbias_bytes = replay_copy_have = 0;
}
