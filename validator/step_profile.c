/* The training step (validator/train.c, step.h): the profiling step's events around every op, the SM
 * clock probes after them, and the diagnostics that replay ops on the step's own operands
 * (SEXTANT_REPLAY). */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "step.h"

int profiling;
int profile_count;
pass_t current_pass;       /* forward, backward, recompute or step: which row of the op list an op is */
cudaEvent_t *profile_events;
int profile_events_made;

profile_tag *profile_tags;
double profile_host_t0_s;

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
        profile_tags[profile_count].side = on != gpu_ctx.stream;
        while (profile_events_made < 2 * profile_count + 2) CK(cudaEventCreate(&profile_events[profile_events_made++]));
    }
    CK(cudaEventRecord(profile_events[2 * profile_count + end], on));
    if (end && clock_probe_wanted(name)) CK(sx_sm_clock_probe(clock_probe_mhz + profile_count, CLOCK_PROBE_US, on));
    /* after the begin event's record and before the end's: the host's own time on the call's launches */
    if (!end) profile_tags[profile_count].host_begin_s = launch_clock_s();
    else profile_tags[profile_count].host_end_s = launch_clock_s();
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
void replay_free(void)
{
    if (replay_dw) CK(cudaFree(replay_dw));
    if (replay_dbias) CK(cudaFree(replay_dbias));
    replay_dw = replay_dbias = NULL;
    replay_dw_bytes = replay_dbias_bytes = 0;
}
