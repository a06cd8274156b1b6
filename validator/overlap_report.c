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
const char *const overlap_class_names[OVERLAP_CLASSES] = {"experts", "attention", "attention_bwd", "membound"};
/* Only the experts' figure is a planner key: the steps' attention slowed 0.02-0.44 beside ZeRO-3's collectives where
 * the victim reads about 0.07, and a collective beside a class's victim starves at the small sizes where the steps'
 * per-layer ones, one long kernel each, do not (docs/validation/2026-11-28-overlap-classes); the rest are comment rows */
const char *const overlap_class_keys[OVERLAP_CLASSES] = {"overlap_compute_slowdown_experts", NULL, NULL, NULL};
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
                           {(size_t)4 << 20, (size_t)16 << 20, (size_t)64 << 20, (size_t)256 << 20}, 1, {{0}}, 9, NULL};
    /* the step's other compute at OLMoE's sizes (docs/validation/2026-11-28-moe-host-issue): a layer's expert
     * up-projection at 4096 tokens of top-8 over 64 experts (512 rows each, gate and up of 1024), its attention,
     * and an add of 64 Mi elements (about 90 us, the length of the GEMMs above) */
    o->victim[VICTIM_EXPERTS] = (overlap_victim){64, 512, 2048, 2048};
    o->victim[VICTIM_ATTENTION] = o->victim[VICTIM_ATTENTION_BWD] = (overlap_victim){1, 4096, 16, 128};
    o->victim[VICTIM_MEMBOUND] = (overlap_victim){1, (long long)64 << 20, 0, 0};
}

/* "name WxXxYxZ" of a class's victim, for the table, the CSV and the overlay's source */
static void victim_text(int v, const overlap_victim *x, char *out, size_t size)
{
    if (v == VICTIM_EXPERTS) snprintf(out, size, "%lldx(%lldx%lldx%lld)", x->count, x->m, x->n, x->k);
    else if (v == VICTIM_ATTENTION) snprintf(out, size, "attn %lldx%lldx%lld", x->m, x->n, x->k);
    else if (v == VICTIM_ATTENTION_BWD) snprintf(out, size, "attn bwd %lldx%lldx%lld", x->m, x->n, x->k);
    else snprintf(out, size, "add %lld", x->m);
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
    for (int v = 0; r->o.classes && v < OVERLAP_CLASSES; v++) {
        double compute[OVERLAP_KINDS * OVERLAP_MAX_SIZES], beside[OVERLAP_KINDS * OVERLAP_MAX_SIZES];
        int n = 0, nb = 0;
        for (int k = 0; k < OVERLAP_KINDS; k++)
            for (int b = 0; b < r->o.nsizes; b++) {
                const overlap_cell *c = &r->class_cell[v][k][b];
                if (c->measured) compute[n++] = overlap_gemm_slowdown(c);
                if (c->coll_measured) beside[nb++] = overlap_coll_slowdown(c);
            }
        s->class_cells[v] = n;
        s->class_comm_cells[v] = nb;
        s->have_class[v] = n > 0;
        s->have_class_comm[v] = nb > 0;
        if (n) s->class_compute[v] = median(compute, n);
        if (nb) s->class_comm[v] = median(beside, nb);
    }
}

/* One cell's row of the table, after its victim's and collective's columns. */
static void print_cell(FILE *out, const char *victim, int k, size_t bytes, const overlap_cell *c)
{
    fprintf(out, "%20s %15s %10.0f", victim, overlap_kind_names[k], (double)bytes / 1048576.0);
    if (!c->measured && !c->coll_measured) {
        fprintf(out, "   not measured: the other stream never covered the timed window\n");
        return;
    }
    if (c->measured)
        fprintf(out, " %10.1f %10.1f %+7.1f%% [%+5.1f,%+5.1f]", c->gemm_alone_s * 1e6, c->gemm_beside_s * 1e6,
                100.0 * overlap_gemm_slowdown(c), 100.0 * c->gemm_slowdown_min, 100.0 * c->gemm_slowdown_max);
    else fprintf(out, " %10s %10s %22s", "-", "-", "not covered");
    if (c->coll_measured)
        fprintf(out, " %10.1f %10.1f %+7.1f%% [%+5.1f,%+5.1f]\n", c->coll_alone_s * 1e6, c->coll_beside_s * 1e6,
                100.0 * overlap_coll_slowdown(c), 100.0 * c->coll_slowdown_min, 100.0 * c->coll_slowdown_max);
    else fprintf(out, " %10s %10s %22s\n", "-", "-", "not covered");
}

void overlap_print(FILE *out, const overlap_results *r, const overlap_summary *s)
{
    fprintf(out, "\n# overlap: a bf16 GEMM (or the step's other compute) on one stream beside an NCCL collective looped on\n"
                 "# another, %d ranks; each time is per call, the slowest rank's median of %d windows;\n"
                 "# slowdown = beside / alone - 1, [lowest, highest rank]\n",
            r->ranks, r->o.repeats);
    fprintf(out, "#%19s %15s %10s %10s %10s %22s %10s %10s %22s\n", "gemm (MxNxK)", "collective", "size", "gemm",
            "beside", "gemm slowdown", "coll", "beside", "collective slowdown");
    fprintf(out, "#%19s %15s %10s %10s %10s %22s %10s %10s %22s\n", "", "", "(MiB)", "(us)", "(us)", "", "(us)", "(us)",
            "");
    for (int g = 0; g < r->o.nshapes; g++)
        for (int k = 0; k < OVERLAP_KINDS; k++)
            for (int b = 0; b < r->o.nsizes; b++) {
                const overlap_shape *sh = &r->o.shape[g];
                char shape[64];
                snprintf(shape, sizeof shape, "%lldx%lldx%lld", sh->m, sh->n, sh->k);
                print_cell(out, shape, k, r->o.bytes[b], &r->cell[g][k][b]);
            }
    for (int v = 0; r->o.classes && v < OVERLAP_CLASSES; v++)
        for (int k = 0; k < OVERLAP_KINDS; k++)
            for (int b = 0; b < r->o.nsizes; b++) {
                char victim[64];
                victim_text(v, &r->o.victim[v], victim, sizeof victim);
                print_cell(out, victim, k, r->o.bytes[b], &r->class_cell[v][k][b]);
            }
    fprintf(out, "# median over the shapes and sizes:");
    for (int k = 0; k < OVERLAP_KINDS; k++)
        if (s->have_compute[k]) fprintf(out, " GEMM beside %s %+.1f%%;", overlap_kind_names[k], 100.0 * s->compute[k]);
        else fprintf(out, " GEMM beside %s not measured;", overlap_kind_names[k]);
    if (s->have_comm) fprintf(out, " the collective beside a GEMM %+.1f%%\n", 100.0 * s->comm);
    else fprintf(out, " the collective beside a GEMM not measured\n");
    for (int v = 0; r->o.classes && v < OVERLAP_CLASSES; v++)
    {
        fprintf(out, "# median over every kind and size: %s", overlap_class_names[v]);
        if (s->have_class[v])
            fprintf(out, " %+.1f%% beside a collective (%d cells)", 100.0 * s->class_compute[v], s->class_cells[v]);
        else fprintf(out, " beside a collective not measured");
        if (s->have_class_comm[v])
            fprintf(out, ", the collective %+.1f%% beside them (%d cells)\n", 100.0 * s->class_comm[v], s->class_comm_cells[v]);
        else fprintf(out, ", the collective beside them not measured\n");
    }
}

/* One cell's CSV row: the victim's columns, then the cell's. */
static void csv_cell(FILE *f, const char *victim, long long count, long long m, long long n, long long k, int kind,
                     size_t bytes, const overlap_results *r, const overlap_cell *c)
{
    fprintf(f, "%s,%lld,%lld,%lld,%lld,%s,%zu,%d,%d,%d,%d", victim, count, m, n, k, overlap_kind_names[kind], bytes,
            r->ranks, r->o.repeats, c->measured, c->coll_measured);
    if (c->measured)
        fprintf(f, ",%.3f,%.3f,%.5f,%.5f,%.5f", c->gemm_alone_s * 1e6, c->gemm_beside_s * 1e6, overlap_gemm_slowdown(c),
                c->gemm_slowdown_min, c->gemm_slowdown_max);
    else fprintf(f, ",,,,,");
    if (c->coll_measured)
        fprintf(f, ",%.3f,%.3f,%.5f,%.5f,%.5f\n", c->coll_alone_s * 1e6, c->coll_beside_s * 1e6, overlap_coll_slowdown(c),
                c->coll_slowdown_min, c->coll_slowdown_max);
    else fprintf(f, ",,,,,\n");
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
    /* victim: gemm (m x n x k), or a class of the step's other compute with its dimensions (overlap.h); the
     * gemm_* columns are the victim's */
    fprintf(f, "victim,count,m,n,k,collective,bytes,ranks,repeats,measured,coll_measured,gemm_alone_us,gemm_beside_us,"
               "gemm_slowdown,gemm_slowdown_min_rank,gemm_slowdown_max_rank,coll_alone_us,coll_beside_us,coll_slowdown,"
               "coll_slowdown_min_rank,coll_slowdown_max_rank\n");
    for (int g = 0; g < r->o.nshapes; g++)
        for (int k = 0; k < OVERLAP_KINDS; k++)
            for (int b = 0; b < r->o.nsizes; b++) {
                const overlap_shape *sh = &r->o.shape[g];
                csv_cell(f, "gemm", 1, sh->m, sh->n, sh->k, k, r->o.bytes[b], r, &r->cell[g][k][b]);
            }
    for (int v = 0; r->o.classes && v < OVERLAP_CLASSES; v++)
        for (int k = 0; k < OVERLAP_KINDS; k++)
            for (int b = 0; b < r->o.nsizes; b++) {
                const overlap_victim *x = &r->o.victim[v];
                csv_cell(f, overlap_class_names[v], x->count, x->m, x->n, x->k, k, r->o.bytes[b], r, &r->class_cell[v][k][b]);
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
    for (int v = 0; r->o.classes && v < OVERLAP_CLASSES; v++) {
        char victim[64], what[512];
        victim_text(v, &r->o.victim[v], victim, sizeof victim);
        if (s->have_class[v] && overlap_class_keys[v]) {
            snprintf(what, sizeof what, "%s (%s) slower beside a concurrent collective, median of %d cells over every "
                                        "kind and size (%s)", overlap_class_names[v], victim, s->class_cells[v], sizes);
            written += overlay_row(f, gpu, overlap_class_keys[v], s->class_compute[v], COMPUTE_MAX, source, what);
        } else if (s->have_class[v])
            fprintf(f, "\"# %s (%s) slower beside a concurrent collective: %.4f, median of %d cells (not a planner key)\",,,\n",
                    overlap_class_names[v], victim, s->class_compute[v], s->class_cells[v]);
        if (s->have_class_comm[v])
            fprintf(f, "\"# NCCL collective slower beside %s (%s): %.4f, median of %d cells (not a planner key)\",,,\n",
                    overlap_class_names[v], victim, s->class_comm[v], s->class_comm_cells[v]);
    }
    return written;
}

size_t overlap_class_bytes(const overlap_options *o)
{
    const overlap_victim *e = &o->victim[VICTIM_EXPERTS], *a = &o->victim[VICTIM_ATTENTION];
    const overlap_victim *m = &o->victim[VICTIM_MEMBOUND];
    /* every expert its own A, B and C; attention's q, k, v, out, dout, dq, dk, dv and its fp32 lse (the backward's
     * workspace, one fp32 row a query as lse); the add's three vectors */
    size_t experts = 2 * (size_t)e->count * (size_t)(e->m * e->k + e->k * e->n + e->m * e->n);
    size_t tokens = (size_t)(a->m * a->n * a->k), attention = 8 * 2 * tokens + 2 * 4 * (size_t)(a->m * a->n);
    return experts + attention + 3 * 2 * (size_t)m->m;
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
     * buffers, cuBLAS's workspace; and the classes' own buffers */
    return 3 * gemm + 2 * coll + ((size_t)32 << 20) + (o->classes ? overlap_class_bytes(o) : 0);
}
