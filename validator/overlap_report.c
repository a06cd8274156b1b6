/* calibrate --comm's overlap measurement, the CPU side (overlap.h): the
 * defaults, the shape flag, the summary the overlay carries, the table, the
 * CSV and the overlay rows.  Plain C: tests/test_overlap.c runs it without a
 * GPU. */
#include "overlap.h"
#include "outfile.h"
#include "planner.h"

#include <errno.h>
#include <stdlib.h>
#include <string.h>

const char *const overlap_kind_names[OVERLAP_KINDS] = {"all_gather", "reduce_scatter", "all_reduce"};
const char *const overlap_kind_keys[OVERLAP_KINDS] = {"overlap_compute_slowdown_allgather",
                                                      "overlap_compute_slowdown_reducescatter",
                                                      "overlap_compute_slowdown_allreduce"};
#define COMM_KEY "overlap_comm_slowdown"
/* the hwdb's ranges of the keys (hwdb/hwdb.c) */
#define COMPUTE_MAX 1.0
#define COMM_MAX 10.0

void overlap_default_options(overlap_options *o)
{
    /* GEMMs of the sizes a training step runs, 30-100 us a call: GPT-2's MLP up at 4096 tokens,
     * LLaMA 3.2 1B's MLP up and its input gradient at 2048, and a thin K (more HBM bytes per FLOP,
     * so more exposed to the collective's memory traffic); and collectives of the sizes a step
     * posts: a TP or CP exchange (4, 16 MiB), a layer's gathered weights or a gradient bucket
     * (64, 256 MiB).  A 8192^3 GEMM (1.4 ms a call) slowed 7-13% where these slow 14-100%,
     * and a small collective beside it never covered the timed window: it waits for the GEMM's
     * SMs (docs/validation/2026-11-26-h200x2-overlap-sizes) */
    *o = (overlap_options){1, 4, {{4096, 3072, 768}, {2048, 8192, 2048}, {2048, 2048, 8192}, {8192, 4096, 1024}}, 4,
                           {(size_t)4 << 20, (size_t)16 << 20, (size_t)64 << 20, (size_t)256 << 20}, 9, NULL};
}

int overlap_parse_shape(const char *text, overlap_shape *out)
{
    long long d[3];
    const char *p = text;
    for (int i = 0; i < 3; i++) {
        char *end;
        if (*p < '0' || *p > '9') return -1;
        errno = 0;
        d[i] = strtoll(p, &end, 10);
        if (errno || d[i] < 1 || d[i] > 131072) return -1;
        if (i < 2 && *end != 'x') return -1;
        p = i < 2 ? end + 1 : end;
    }
    if (*p) return -1;
    *out = (overlap_shape){d[0], d[1], d[2]};
    return 0;
}

double overlap_gemm_slowdown(const overlap_cell *c)
{
    return c->gemm_beside_s / c->gemm_alone_s - 1.0;
}

double overlap_coll_slowdown(const overlap_cell *c)
{
    return c->coll_beside_s / c->coll_alone_s - 1.0;
}

static double median(double *v, int n)
{
    sort_ascending(v, (size_t)n);
    return n % 2 ? v[n / 2] : 0.5 * (v[n / 2 - 1] + v[n / 2]);
}

void overlap_summarise(const overlap_results *r, overlap_summary *s)
{
    memset(s, 0, sizeof *s);
    double comm[OVERLAP_KINDS * OVERLAP_MAX_SHAPES * OVERLAP_MAX_SIZES];
    int ncomm = 0;
    for (int k = 0; k < OVERLAP_KINDS; k++) {
        double v[OVERLAP_MAX_SHAPES * OVERLAP_MAX_SIZES];
        int n = 0;
        for (int g = 0; g < r->o.nshapes; g++)
            for (int b = 0; b < r->o.nsizes; b++) {
                const overlap_cell *c = &r->cell[g][k][b];
                if (!c->measured) continue;
                v[n++] = overlap_gemm_slowdown(c);
                comm[ncomm++] = overlap_coll_slowdown(c);
            }
        s->cells[k] = n;
        s->have_compute[k] = n > 0;
        if (n) s->compute[k] = median(v, n);
    }
    s->have_comm = ncomm > 0;
    if (ncomm) s->comm = median(comm, ncomm);
}

void overlap_print(FILE *out, const overlap_results *r, const overlap_summary *s)
{
    fprintf(out, "\n# overlap: a bf16 GEMM on one stream beside an NCCL collective looped on another, %d ranks;\n"
                 "# each time is per call, the slowest rank's median of %d windows; slowdown = beside / alone - 1,\n"
                 "# [lowest, highest rank]\n",
            r->ranks, r->o.repeats);
    fprintf(out, "#%19s %15s %10s %10s %10s %22s %10s %10s %22s\n", "gemm (MxNxK)", "collective", "size", "gemm",
            "beside", "gemm slowdown", "coll", "beside", "collective slowdown");
    fprintf(out, "#%19s %15s %10s %10s %10s %22s %10s %10s %22s\n", "", "", "(MiB)", "(us)", "(us)", "", "(us)", "(us)",
            "");
    for (int g = 0; g < r->o.nshapes; g++)
        for (int k = 0; k < OVERLAP_KINDS; k++)
            for (int b = 0; b < r->o.nsizes; b++) {
                const overlap_shape *sh = &r->o.shape[g];
                const overlap_cell *c = &r->cell[g][k][b];
                char shape[64];
                snprintf(shape, sizeof shape, "%lldx%lldx%lld", sh->m, sh->n, sh->k);
                fprintf(out, "%20s %15s %10.0f", shape, overlap_kind_names[k], (double)r->o.bytes[b] / 1048576.0);
                if (!c->measured) {
                    fprintf(out, "   not measured: the other stream never covered the timed window\n");
                    continue;
                }
                fprintf(out, " %10.1f %10.1f %+7.1f%% [%+5.1f,%+5.1f] %10.1f %10.1f %+7.1f%% [%+5.1f,%+5.1f]\n",
                        c->gemm_alone_s * 1e6, c->gemm_beside_s * 1e6, 100.0 * overlap_gemm_slowdown(c),
                        100.0 * c->gemm_slowdown_min, 100.0 * c->gemm_slowdown_max, c->coll_alone_s * 1e6,
                        c->coll_beside_s * 1e6, 100.0 * overlap_coll_slowdown(c), 100.0 * c->coll_slowdown_min,
                        100.0 * c->coll_slowdown_max);
            }
    fprintf(out, "# median over the shapes and sizes:");
    for (int k = 0; k < OVERLAP_KINDS; k++)
        if (s->have_compute[k]) fprintf(out, " GEMM beside %s %+.1f%%;", overlap_kind_names[k], 100.0 * s->compute[k]);
        else fprintf(out, " GEMM beside %s not measured;", overlap_kind_names[k]);
    if (s->have_comm) fprintf(out, " the collective beside a GEMM %+.1f%%\n", 100.0 * s->comm);
    else fprintf(out, " the collective beside a GEMM not measured\n");
}

int overlap_write_csv(const char *path, const overlap_results *r)
{
    outfile out;
    char err[PATH_MAX + 256];
    if (outfile_open(&out, path, err, sizeof err) != 0) {
        fprintf(stderr, "sextant-gpu: --overlap-csv: %s\n", err);
        return -1;
    }
    FILE *f = out.f;
    fprintf(f, "m,n,k,collective,bytes,ranks,repeats,measured,gemm_alone_us,gemm_beside_us,gemm_slowdown,"
               "gemm_slowdown_min_rank,gemm_slowdown_max_rank,coll_alone_us,coll_beside_us,coll_slowdown,"
               "coll_slowdown_min_rank,coll_slowdown_max_rank\n");
    for (int g = 0; g < r->o.nshapes; g++)
        for (int k = 0; k < OVERLAP_KINDS; k++)
            for (int b = 0; b < r->o.nsizes; b++) {
                const overlap_shape *sh = &r->o.shape[g];
                const overlap_cell *c = &r->cell[g][k][b];
                fprintf(f, "%lld,%lld,%lld,%s,%zu,%d,%d,%d", sh->m, sh->n, sh->k, overlap_kind_names[k], r->o.bytes[b],
                        r->ranks, r->o.repeats, c->measured);
                if (!c->measured) {
                    fprintf(f, ",,,,,,,,,,\n");
                    continue;
                }
                fprintf(f, ",%.3f,%.3f,%.5f,%.5f,%.5f,%.3f,%.3f,%.5f,%.5f,%.5f\n", c->gemm_alone_s * 1e6,
                        c->gemm_beside_s * 1e6, overlap_gemm_slowdown(c), c->gemm_slowdown_min, c->gemm_slowdown_max,
                        c->coll_alone_s * 1e6, c->coll_beside_s * 1e6, overlap_coll_slowdown(c), c->coll_slowdown_min,
                        c->coll_slowdown_max);
            }
    if (outfile_commit(&out, err, sizeof err) != 0) {
        fprintf(stderr, "sextant-gpu: --overlap-csv: %s\n", err);
        return -1;
    }
    return 0;
}

/* One key's row: a measured value at or below the resolution is written as
 * the resolution (0 means "not measured" to the planner), one beyond the
 * key's range as a comment row (the loader would refuse it). */
static int overlay_row(FILE *f, const char *gpu, const char *key, double value, double max, const char *source,
                       const char *what)
{
    if (!(value <= max)) {
        fprintf(f, "\"# %s: measured %.4f, beyond the key's 0..%g: not written\",,,\n", key, value, max);
        return 0;
    }
    if (value < OVERLAP_RESOLUTION) {
        fprintf(f, "%s,%s,%.4f,\"%s; %s: measured %+.4f, at or below the %.3f resolution (0 would mean not measured)\"\n",
                gpu, key, OVERLAP_RESOLUTION, source, what, value, OVERLAP_RESOLUTION);
        return 1;
    }
    fprintf(f, "%s,%s,%.4f,\"%s; %s\"\n", gpu, key, value, source, what);
    return 1;
}

int overlap_write_overlay_rows(FILE *f, const char *gpu, const char *source, const overlap_results *r,
                               const overlap_summary *s)
{
    char shapes[256] = "", sizes[128] = "";
    for (int g = 0; g < r->o.nshapes; g++) {
        size_t len = strlen(shapes);
        snprintf(shapes + len, sizeof shapes - len, "%s%lldx%lldx%lld", g ? " " : "", r->o.shape[g].m,
                 r->o.shape[g].n, r->o.shape[g].k);
    }
    for (int b = 0; b < r->o.nsizes; b++) {
        size_t len = strlen(sizes);
        snprintf(sizes + len, sizeof sizes - len, "%s%zu MiB", b ? " " : "", r->o.bytes[b] >> 20);
    }
    int written = 0;
    for (int k = 0; k < OVERLAP_KINDS; k++) {
        if (!s->have_compute[k]) continue;
        char what[512];
        snprintf(what, sizeof what, "bf16 GEMM slower beside a concurrent %s, median of %d cells (GEMMs %s; %s)",
                 overlap_kind_names[k], s->cells[k], shapes, sizes);
        written += overlay_row(f, gpu, overlap_kind_keys[k], s->compute[k], COMPUTE_MAX, source, what);
    }
    if (s->have_comm) {
        char what[512];
        snprintf(what, sizeof what, "NCCL collective slower beside a bf16 GEMM, median over every kind, GEMM and size "
                                    "(GEMMs %s; %s)", shapes, sizes);
        written += overlay_row(f, gpu, COMM_KEY, s->comm, COMM_MAX, source, what);
    }
    return written;
}

size_t overlap_device_bytes(const overlap_options *o)
{
    size_t gemm = 0, coll = 0;
    for (int g = 0; g < o->nshapes; g++) {
        const overlap_shape *s = &o->shape[g];
        size_t bytes = 2 * (size_t)(s->m * s->k + s->k * s->n + s->m * s->n);
        gemm = bytes > gemm ? bytes : gemm;
    }
    for (int b = 0; b < o->nsizes; b++) coll = o->bytes[b] > coll ? o->bytes[b] : coll;
    /* A, B and C of the largest shape (an upper bound: each is sized for its own largest), two collective
     * buffers, cuBLAS's workspace */
    return 3 * gemm + 2 * coll + ((size_t)32 << 20);
}
