/* What every fuzz target shares: the fuzzer's bytes written to one temporary
 * file per process (the loaders take paths), the repository's root, and one
 * small estimate of what a loader produced. */
#ifndef SEXTANT_FUZZ_UTIL_H
#define SEXTANT_FUZZ_UTIL_H

#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "planner.h"

#ifndef SEXTANT_ROOT
#define SEXTANT_ROOT "."
#endif

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

/* The bytes as the file the path names; the path is made once and rewritten
 * for every input, so a run leaves one file behind at most (removed at exit). */
static char fuzz_path[64];

static inline void fuzz_remove_file(void) { if (fuzz_path[0]) unlink(fuzz_path); }

static inline const char *fuzz_file(const uint8_t *data, size_t size, const char *suffix)
{
    if (!fuzz_path[0]) {
        snprintf(fuzz_path, sizeof fuzz_path, "/tmp/sextant-fuzz-XXXXXX%s", suffix);
        int fd = mkstemps(fuzz_path, (int)strlen(suffix));
        if (fd < 0) abort();
        close(fd);
        atexit(fuzz_remove_file);
    }
    FILE *f = fopen(fuzz_path, "wb");
    if (!f) abort();
    if (size && fwrite(data, 1, size, f) != size) abort();
    if (fclose(f) != 0) abort();
    return fuzz_path;
}

/* One small layout of model m on gpu (1 GPU, micro-batch 1, 8 sequences of at most 1024 tokens), estimated
 * when the layout checks pass: what a loaded row or overlay feeds into.  The result is not judged here;
 * the sanitizers judge how it was computed. */
static inline void fuzz_estimate_small(const model_t *m, const hw_gpu *gpu, const hw_node *node)
{
    if (!m || !gpu || !node) return;
    layout_t l;
    memset(&l, 0, sizeof l);
    l.gpus = l.tp = l.pp = l.dp = l.vpp = l.cp = l.mbs = 1;
    l.gbs = 8;
    l.seq = m->seq > 0 && m->seq < 1024 ? m->seq : 1024;
    l.gpus_per_node = node->gpus_per_node;
    l.recompute = RECOMPUTE_SELECTIVE;
    l.attention = default_attention(gpu);
    l.precision = gpu->peak_flops[PREC_BF16] > 0 ? PREC_BF16 : PREC_FP16;
    if (gpu->peak_flops[l.precision] <= 0) return;
    char err[1024];
    if (layout_check(m, &l, err, sizeof err) != 0) return;
    job_t job = {1e12, gpu->cloud_usd_per_gpu_hour};
    static estimate_t e;  /* large: kept off the stack */
    estimate_layout(m, gpu, node, &l, &job, &e, err, sizeof err);
}

#endif
