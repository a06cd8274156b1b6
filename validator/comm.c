/* calibrate --comm (comm.h): all-reduce, reduce-scatter, all-gather and
 * ring send/recv in bf16 over a range of sizes, timed the way nccl-tests
 * times them (iterations enqueued back to back between two CUDA events),
 * checked element by element, and fitted with GSL into the per-hop latency
 * alpha and the per-direction bandwidth BW of the planner's ring formulas
 * (planner/formulas.c, docs/model.md "Communication"). */
#include "comm.h"

#include <cuda_runtime_api.h>
#include <errno.h>
#include <gsl/gsl_fit.h>
#include <math.h>
#include <nccl.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>
#include <time.h>

#include "launch.h"
#include "outfile.h"
#include "overlap.h"
#include "planner.h"
#include "power.h"
#include "reference.h"

enum { COLL_AR = 0, COLL_RS, COLL_AG, COLL_SR, NCOLL };
static const char *const coll_names[NCOLL] = {"all_reduce", "reduce_scatter", "all_gather", "sendrecv"};
static const char *const coll_ops[NCOLL] = {"sum", "sum", "none", "none"};

/* NCCL's device memory, each part measured where it is taken (bytes; docs/model.md, "Other memory").  NCCL connects
 * an algorithm's buffers on its first use (NCCL_RUNTIME_CONNECT), so a communicator costs what it runs. */
typedef struct {
    double process;            /* the world's communicator: its creation (NCCL's per-process state) and first small
                                  all-reduce, as a framework's barrier or loss reduction makes it */
    double split;              /* a fresh communicator split from it, before any use */
    double collective;         /* that one's first all-gather, reduce-scatter and all-reduce */
    double p2p_first;          /* the process's first send/recv with one peer (NCCL's one-time part with it) */
    double p2p;                /* one more communicator's send/recv buffers for one peer (after its collectives) */
    double first_comm, comm;   /* the totals before 2026-11-26 (nccl_first_memory_gib, nccl_memory_gib), printed for the
                                  record: the world's once every collective ran, and split + collective + send/recv */
} nccl_memory;

#define MAX_SIZES 48
#define STAGE_BYTES ((size_t)64 << 20)
#define FIT_MAX_BYTES ((size_t)256 << 20)   /* the largest size the alpha-beta fit uses */   /* host staging for filling and checking */

typedef struct {
    int gpus;
    const char *gpu_name;   /* hwdb row; NULL: recognised from the device name */
    const char *out_path;
    size_t min_bytes, max_bytes;
    int warmup, iters, repeats;
    double timeout_s;
    overlap_options overlap;   /* the GEMM beside each collective (validator/overlap.c) */
} comm_options;

typedef struct {
    comm_options o;
    const hwdb *db;
} comm_job;

/* ---- flags ------------------------------------------------------------------ */

static int parse_int(const char *flag, const char *text, int min, int max, int *out)
{
    char *end;
    errno = 0;
    long v = strtol(text, &end, 10);
    if (errno || end == text || *end || v < min || v > max) {
        fprintf(stderr, "sextant-gpu: calibrate --comm: %s '%s' is not a whole number from %d to %d\n", flag, text, min, max);
        return -1;
    }
    *out = (int)v;
    return 0;
}

/* A byte count with an optional binary suffix: 1048576, 1M, 4G, 512K. */
static int parse_bytes(const char *flag, const char *text, size_t *out)
{
    char *end;
    errno = 0;
    unsigned long long v = strtoull(text, &end, 10);
    unsigned shift = 0;
    if (*end == 'K' || *end == 'k') shift = 10;
    else if (*end == 'M' || *end == 'm') shift = 20;
    else if (*end == 'G' || *end == 'g') shift = 30;
    if (shift) end++;
    if (*end == 'B' || *end == 'b') end++;
    if (errno || end == text || *end || text[0] == '-' || v == 0 || v > (64ull << 30) >> shift) {
        fprintf(stderr, "sextant-gpu: calibrate --comm: %s '%s' is not a size from 1K to 64G (e.g. 1M, 4G)\n", flag, text);
        return -1;
    }
    *out = (size_t)(v << shift);
    return 0;
}

/* --overlap-shapes MxNxK,... and --overlap-bytes SIZE,...: comma lists of at most `max` */
static int parse_overlap_list(const char *flag, const char *text, overlap_options *o)
{
    int shapes = !strcmp(flag, "--overlap-shapes"), max = shapes ? OVERLAP_MAX_SHAPES : OVERLAP_MAX_SIZES, n = 0;
    char item[64];
    for (const char *p = text;; n++) {
        size_t len = strcspn(p, ",");
        if (n == max || len == 0 || len >= sizeof item) {
            fprintf(stderr, "sextant-gpu: calibrate --comm: %s '%s' is not a comma list of 1 to %d %s\n", flag, text, max,
                    shapes ? "shapes MxNxK (e.g. 8192x8192x8192,4096x4096x4096)" : "sizes (e.g. 64M,256M)");
            return -1;
        }
        memcpy(item, p, len);
        item[len] = '\0';
        if (shapes && overlap_parse_shape(item, &o->shape[n]) != 0) {
            fprintf(stderr, "sextant-gpu: calibrate --comm: %s: '%s' is not MxNxK with sizes from 1 to 131072\n", flag, item);
            return -1;
        }
        if (!shapes && parse_bytes(flag, item, &o->bytes[n]) != 0) return -1;
        if (!p[len]) break;
        p += len + 1;
    }
    if (shapes) o->nshapes = n + 1;
    else o->nsizes = n + 1;
    return 0;
}

static int parse_options(int argc, char **argv, comm_options *o)
{
    *o = (comm_options){0, NULL, NULL, (size_t)1 << 20, (size_t)4 << 30, 5, 20, 5, 300.0, {0}};
    overlap_default_options(&o->overlap);
    int no_overlap = 0;
    const char *overlap_flag = NULL;
    for (int i = 2; i < argc; i++) {
        const char *f = argv[i];
        if (!strcmp(f, "--comm")) continue;
        if (!strcmp(f, "--no-overlap")) {
            no_overlap = 1;
            continue;
        }
        static const char *const valued[] = {"--gpus", "--gpu", "--out", "--min-bytes", "--max-bytes",
                                             "--warmup", "--iters", "--repeats", "--timeout", "--overlap-shapes",
                                             "--overlap-bytes", "--overlap-repeats", "--overlap-csv"};
        int known = 0;
        for (size_t k = 0; k < sizeof valued / sizeof valued[0]; k++) known |= !strcmp(f, valued[k]);
        if (!known) {
            fprintf(stderr, "sextant-gpu: calibrate --comm: unknown flag '%s' (--gpus N, --gpu NAME, --out FILE, "
                            "--min-bytes SIZE, --max-bytes SIZE, --warmup N, --iters N, --repeats N, --timeout S, "
                            "--overlap-shapes MxNxK,..., --overlap-bytes SIZE,..., --overlap-repeats N, --overlap-csv FILE, "
                            "--no-overlap)\n", f);
            return -1;
        }
        if (i + 1 >= argc) {
            fprintf(stderr, "sextant-gpu: calibrate --comm: %s needs a value\n", f);
            return -1;
        }
        const char *v = argv[++i];
        int timeout = 0, rc = 0;
        if (!strcmp(f, "--gpus")) rc = parse_int(f, v, 1, 1024, &o->gpus);
        else if (!strcmp(f, "--gpu")) o->gpu_name = v;
        else if (!strcmp(f, "--out")) o->out_path = v;
        else if (!strcmp(f, "--min-bytes")) rc = parse_bytes(f, v, &o->min_bytes);
        else if (!strcmp(f, "--max-bytes")) rc = parse_bytes(f, v, &o->max_bytes);
        else if (!strcmp(f, "--warmup")) rc = parse_int(f, v, 0, 1000, &o->warmup);
        else if (!strcmp(f, "--iters")) rc = parse_int(f, v, 1, 100000, &o->iters);
        else if (!strcmp(f, "--repeats")) rc = parse_int(f, v, 1, 1000, &o->repeats);
        else if (!strncmp(f, "--overlap-", 10)) {
            overlap_flag = f;
            if (!strcmp(f, "--overlap-repeats")) rc = parse_int(f, v, 1, 101, &o->overlap.repeats);
            else if (!strcmp(f, "--overlap-csv")) o->overlap.csv_path = v;
            else rc = parse_overlap_list(f, v, &o->overlap);
        } else {
            rc = parse_int(f, v, 1, 86400, &timeout);
            o->timeout_s = timeout;
        }
        if (rc) return -1;
    }
    if (no_overlap && overlap_flag) {
        fprintf(stderr, "sextant-gpu: calibrate --comm: --no-overlap leaves nothing for %s to set\n", overlap_flag);
        return -1;
    }
    o->overlap.enabled = !no_overlap;
    if (o->min_bytes < 1024) {
        fprintf(stderr, "sextant-gpu: calibrate --comm: --min-bytes must be at least 1K\n");
        return -1;
    }
    if (o->min_bytes > o->max_bytes) {
        fprintf(stderr, "sextant-gpu: calibrate --comm: --min-bytes %zu is above --max-bytes %zu\n", o->min_bytes, o->max_bytes);
        return -1;
    }
    return 0;
}

/* ---- the data: small integers, so that every bf16 sum is exact ----------- */

/* Rank r's element i: an integer in 1..K, scrambled over i so that a chunk
 * delivered to the wrong place is caught; K keeps the sum over n ranks at or
 * below 256, every integer of which bf16 holds exactly. */
static int value_levels(int n)
{
    int k = 256 / n;
    return k > 8 ? 8 : k < 1 ? 1 : k;
}

static unsigned element_value(int rank, uint64_t i, int levels)
{
    uint32_t mix = (uint32_t)((i * 0x9E3779B97F4A7C15ull) >> 40);
    return 1u + (mix + 3u * (unsigned)rank) % (unsigned)levels;
}

/* small integers are exact in bf16, so the rounding of the one host converter changes nothing */
static uint16_t bf16_of_int(unsigned v) { return sx_ref_f2bf((float)v); }

/* The value element i of the result must hold on `rank`. */
static unsigned expected_value(int coll, int rank, int n, uint64_t count, uint64_t i, int levels)
{
    unsigned sum = 0;
    switch (coll) {
    case COLL_AR:
        for (int r = 0; r < n; r++) sum += element_value(r, i, levels);
        return sum;
    case COLL_RS:
        for (int r = 0; r < n; r++) sum += element_value(r, (uint64_t)rank * count + i, levels);
        return sum;
    case COLL_AG: return element_value((int)(i / count), i % count, levels);
    default: return element_value((rank + n - 1) % n, i, levels);
    }
}

/* ---- one rank ---------------------------------------------------------------- */

/* A failed call ends this rank's measurement, not the process: it names what failed and goes to
 * the rank's clean-up, so the launcher collects every rank's status (gpu_check.h says why not CK). */
#define CK_OR_FAIL(call, what)                                                                           \
    do {                                                                                                 \
        cudaError_t e_ = (call);                                                                         \
        if (e_ != cudaSuccess) {                                                                         \
            fprintf(stderr, "sextant-gpu: rank %d: %s: %s\n", ctx->rank, what, cudaGetErrorString(e_)); \
            goto fail;                                                                                   \
        }                                                                                                \
    } while (0)

typedef struct {
    size_t bytes;       /* the size column: the whole, unsharded buffer */
    size_t count;       /* NCCL's count argument */
    size_t send_elems, recv_elems;
} coll_size;

static coll_size size_for(int coll, size_t nominal, int n)
{
    size_t elems = nominal / 2;
    coll_size s = {0, 0, 0, 0};
    if (coll == COLL_RS || coll == COLL_AG) {
        s.count = elems / (size_t)n;
        s.bytes = s.count * (size_t)n * 2;
        s.send_elems = coll == COLL_RS ? s.count * (size_t)n : s.count;
        s.recv_elems = coll == COLL_RS ? s.count : s.count * (size_t)n;
    } else {
        s.count = elems;
        s.bytes = elems * 2;
        s.send_elems = s.recv_elems = elems;
    }
    return s;
}

static ncclResult_t enqueue(int coll, const void *send, void *recv, size_t count, launch_ctx *ctx, cudaStream_t stream)
{
    int n = ctx->nranks;
    switch (coll) {
    case COLL_AR: return ncclAllReduce(send, recv, count, ncclBfloat16, ncclSum, ctx->comm, stream);
    case COLL_RS: return ncclReduceScatter(send, recv, count, ncclBfloat16, ncclSum, ctx->comm, stream);
    case COLL_AG: return ncclAllGather(send, recv, count, ncclBfloat16, ctx->comm, stream);
    default: {
        /* the pipeline's pattern: every rank sends to the next and receives from the previous */
        ncclResult_t r = ncclGroupStart();
        if (r == ncclSuccess) r = ncclSend(send, count, ncclBfloat16, (ctx->rank + 1) % n, ctx->comm, stream);
        if (r == ncclSuccess) r = ncclRecv(recv, count, ncclBfloat16, (ctx->rank + n - 1) % n, ctx->comm, stream);
        ncclResult_t end = ncclGroupEnd();
        return r != ncclSuccess ? r : end;
    }
    }
}

/* The planner's ring model of collective c over n ranks (docs/model.md, "Communication"), through its own
 * functions: time = hops x alpha + bytes_factor x bytes / BW.  The fit below reads BW and alpha off it, and
 * bytes_factor is also nccl-tests' bus-bandwidth factor. */
static double ring_time_s(int c, double n, double bytes, double bw, double latency)
{
    switch (c) {
    case COLL_AR: return ring_allreduce_s(n, bytes, bw, latency);
    case COLL_RS: return ring_reduce_scatter_s(n, bytes, bw, latency);
    case COLL_AG: return ring_allgather_s(n, bytes, bw, latency);
    default: return sendrecv_s(bytes, bw, latency);
    }
}

static double ring_bytes_factor(int c, double n) { return ring_time_s(c, n, 1.0, 1.0, 0.0); }
static double ring_hops(int c, double n) { return ring_time_s(c, n, 0.0, 1.0, 1.0); }

/* Which hwdb GPU a CUDA device name is, by the markings NVIDIA puts in it. */
static const char *recognise_gpu(const char *device)
{
    static const char *const marks[][2] = {
        {"H200", "h200"}, {"H100 PCIe", "h100-pcie"}, {"H100", "h100-sxm"}, {"H800", "h800"}, {"B200", "b200"},
        {"A100-SXM4-80GB", "a100-sxm4-80gb"}, {"A100 80GB", "a100-sxm4-80gb"}, {"A100", "a100-sxm4-40gb"},
        {"L40S", "l40s"}, {"RTX 4090", "rtx4090"}, {"RTX 3090 Ti", "rtx3090ti"}, {"RTX A6000", "a6000"},
        {"V100-SXM2-32GB", "v100-sxm2-32gb"}, {"V100", "v100-sxm2-16gb"},
    };
    for (size_t i = 0; i < sizeof marks / sizeof marks[0]; i++)
        if (strcasestr(device, marks[i][0])) return marks[i][1];
    return NULL;
}

typedef struct {
    int nsizes;
    double seconds[NCOLL][MAX_SIZES];
    size_t bytes[NCOLL][MAX_SIZES];
    int64_t wrong[NCOLL];
} comm_results;

/* Fits time = a + b * bytes for one collective and turns (a, b) into the
 * ring formula's terms: time = k alpha + f bytes / BW, so alpha = a / k
 * and BW = f / b.  Returns 0 when the fit is usable. */
static int fit_collective(int coll, int n, const comm_results *res, double ab[2], double *alpha, double *bw)
{
    double x[MAX_SIZES], y[MAX_SIZES], w[MAX_SIZES];
    int used = 0;
    /* The fit covers the sizes a training step sends (a layer's activations,
     * a gradient bucket: 1 MiB to 256 MiB): NCCL's bandwidth keeps climbing
     * up to GBs, and a line drawn through 4 GB too passes 15-30% under the
     * time of the mid sizes (measured on 2 x H200, docs/validation). */
    int in_range = 0;
    for (int s = 0; s < res->nsizes; s++) in_range += res->bytes[coll][s] != 0 && res->bytes[coll][s] <= FIT_MAX_BYTES;
    for (int s = 0; s < res->nsizes; s++) {
        if (res->bytes[coll][s] == 0 || !(res->seconds[coll][s] > 0)) continue;
        if (in_range >= 3 && res->bytes[coll][s] > FIT_MAX_BYTES) continue;
        x[used] = (double)res->bytes[coll][s];
        y[used] = res->seconds[coll][s];
        /* weights 1/t^2: relative errors count alike at 1 MB and at 4 GB, or
         * the largest sizes alone would set the intercept */
        w[used] = 1.0 / (y[used] * y[used]);
        used++;
    }
    const char *name = coll_names[coll];
    if (used < 3) {
        printf("%-15s fewer than 3 sizes measured: no fit\n", name);
        return -1;
    }
    double a, b, c00, c01, c11, chisq;
    gsl_fit_wlinear(x, 1, w, 1, y, 1, (size_t)used, &a, &b, &c00, &c01, &c11, &chisq);
    ab[0] = a;
    ab[1] = b;
    double nn = (double)n;
    double f = ring_bytes_factor(coll, nn), k = ring_hops(coll, nn);
    /* chisq with weights 1/t^2 is the sum of squared relative residuals */
    printf("%-15s time = %.2f us + bytes / %.2f GB/s   (intercept +-%.2f us, slope +-%.2f%%, rms residual %.2f%%)\n",
           name, a * 1e6, 1e-9 / b, sqrt(c00) * 1e6, 100.0 * sqrt(c11) / fabs(b), 100.0 * sqrt(chisq / used));
    if (!(b > 0)) {
        printf("%-15s the slope is not positive: no bandwidth\n", "");
        return -1;
    }
    *bw = f / b;
    *alpha = a / k;
    printf("%-15s ring terms: alpha = %.3f us per hop (k = %g hops), BW = %.2f GB/s per direction (f = %.3g)\n", "",
           *alpha * 1e6, k, *bw * 1e-9, f);
    if (*alpha < 0) {
        printf("%-15s negative intercept (latency below what these sizes resolve): alpha taken as 0\n", "");
        *alpha = 0;
    }
    return 0;
}

/* Residuals of every fit, size by size: measured / fitted - 1. */
static void print_residuals(const comm_results *res, double ab[NCOLL][2], const int ok[NCOLL])
{
    printf("\n# residuals: measured / fitted - 1\n#%14s", "size (B)");
    for (int c = 0; c < NCOLL; c++) printf(" %15s", coll_names[c]);
    printf("\n");
    for (int s = 0; s < res->nsizes; s++) {
        printf("%15zu", res->bytes[COLL_AR][s] ? res->bytes[COLL_AR][s] : res->bytes[COLL_SR][s]);
        for (int c = 0; c < NCOLL; c++) {
            double fit = ab[c][0] + ab[c][1] * (double)res->bytes[c][s];
            if (ok[c] && res->bytes[c][s] && fit > 0) printf(" %+14.2f%%", 100.0 * (res->seconds[c][s] / fit - 1.0));
            else printf(" %15s", "-");
        }
        printf("\n");
    }
}

static int write_overlay(const comm_job *job, const char *gpu, const char *device, int n, const comm_results *res,
                         const double alpha[NCOLL], const double bw[NCOLL], const int ok[NCOLL], const nccl_memory *nm,
                         double collective_w, const overlap_results *ov,
                         const overlap_summary *ovs)
{
    const char *path = job->o.out_path;
    outfile out;
    char err[PATH_MAX + 256];
    if (outfile_open(&out, path, err, sizeof err) != 0) {
        fprintf(stderr, "sextant-gpu: --out: %s\n", err);
        return 2;
    }
    FILE *f = out.f;
    time_t now = time(NULL);
    char date[32];
    strftime(date, sizeof date, "%Y-%m-%d", gmtime(&now));
    int version = 0;
    ncclGetVersion(&version);
    char source[512];
    snprintf(source, sizeof source, "sextant-gpu calibrate --comm %s on %d x %s, NCCL %d.%d.%d, all_reduce fit over %zu..%zu MiB",
             date, n, device, version / 10000, (version / 100) % 100, version % 100, job->o.min_bytes >> 20,
             job->o.max_bytes >> 20);
    fprintf(f, "gpu,key,value,source\n");
    /* every fit for the record; the loader skips rows whose first field starts with # */
    for (int c = 0; c < NCOLL; c++)
        if (ok[c])
            fprintf(f, "\"# %s: alpha %.3f us per hop, BW %.2f GB/s per direction, %d sizes\",,,\n", coll_names[c],
                    alpha[c] * 1e6, bw[c] / 1e9, res->nsizes);
    /* the planner has one alpha and one BW per node link; all-reduce, the
     * collective of TP and DP, sets them */
    fprintf(f, "%s,intra_gbs_per_dir,%.3f,\"%s\"\n", gpu, bw[COLL_AR] / 1e9, source);
    fprintf(f, "%s,intra_latency_us,%.4f,\"%s\"\n", gpu, alpha[COLL_AR] * 1e6, source);
    /* each collective's own fit: NCCL's algorithms reach different bandwidths at the sizes training uses */
    static const char *const suffix[NCOLL] = {NULL, "reduce_scatter", "all_gather", "sendrecv"};
    for (int c = 1; c < NCOLL; c++)
        if (ok[c]) {
            fprintf(f, "%s,intra_gbs_per_dir_%s,%.3f,\"%s\"\n", gpu, suffix[c], bw[c] / 1e9, source);
            fprintf(f, "%s,intra_latency_us_%s,%.4f,\"%s\"\n", gpu, suffix[c], alpha[c] * 1e6, source);
        }
    /* the same again over this number of ranks (KEY:N): NCCL is faster over more GPUs of a node, and the planner
     * prices each group with the fit over the number of ranks nearest its own; another calibrate --comm over
     * other GPUs adds its own KEY:N rows to the overlay (docs/model.md, "Communication") */
    fprintf(f, "%s,intra_gbs_per_dir:%d,%.3f,\"%s\"\n", gpu, n, bw[COLL_AR] / 1e9, source);
    fprintf(f, "%s,intra_latency_us:%d,%.4f,\"%s\"\n", gpu, n, alpha[COLL_AR] * 1e6, source);
    for (int c = 1; c < NCOLL; c++)
        if (ok[c]) {
            fprintf(f, "%s,intra_gbs_per_dir_%s:%d,%.3f,\"%s\"\n", gpu, suffix[c], n, bw[c] / 1e9, source);
            fprintf(f, "%s,intra_latency_us_%s:%d,%.4f,\"%s\"\n", gpu, suffix[c], n, alpha[c] * 1e6, source);
        }
    /* and the measured times themselves (intra_us_<collective>:N:BYTES): NCCL's bandwidth climbs with the message
     * in a way no line follows, and a group of N ranks takes these between two measured sizes */
    for (int c = 0; c < NCOLL; c++)
        for (int s = 0; s < res->nsizes; s++)
            if (res->bytes[c][s] && res->seconds[c][s] > 0)
                fprintf(f, "%s,intra_us_%s:%d:%zu,%.3f,\"%s\"\n", gpu, coll_names[c], n, res->bytes[c][s],
                        res->seconds[c][s] * 1e6, source);
    /* the planner's communicator figures (nccl_memory_bytes): the parts; the totals earlier overlays had (which it
     * uses where the parts are missing) for the record only */
    fprintf(f, "\"# the totals: one more communicator once every collective and send/recv ran %.4f GiB, the process's "
               "first once every collective ran %.4f GiB (not used beside the parts)\",,,\n", nm->comm / 1073741824.0,
            nm->first_comm / 1073741824.0);
    const struct { const char *key; double bytes; const char *what; } mem[] = {
        {"nccl_process_memory_gib", nm->process, "the world communicator's creation (NCCL's per-process state) and its first "
                                                 "small all-reduce"},
        {"nccl_split_memory_gib", nm->split, "one more communicator split from it, before any use"},
        {"nccl_collective_memory_gib", nm->collective, "that communicator's first all-gather, reduce-scatter and all-reduce "
                                                       "(the buffers NCCL connects for them)"},
        {"nccl_p2p_buffers_memory_gib", nm->p2p, "then its first send/recv (both ways, as a pipeline), per peer"},
        {"nccl_p2p_first_memory_gib", nm->p2p_first, "the process's first send/recv with one peer, on a communicator "
                                                     "running nothing else (NCCL's one-time part with it)"},
    };
    for (size_t k = 0; k < sizeof mem / sizeof mem[0]; k++)
        if (mem[k].bytes > 0)
            fprintf(f, "%s,%s,%.4f,\"%s; %d ranks: %s\"\n", gpu, mem[k].key, mem[k].bytes / 1073741824.0, source, n,
                    mem[k].what);
    if (collective_w > 0)
        fprintf(f, "%s,collective_power_w,%.1f,\"%s; the GPU's NVML power while each collective of up to 256 MiB looped alone, "
                   "the median over the four of the ranks' mean\"\n", gpu, collective_w, source);
    int overlap_keys = 0;
    if (ov) {
        char ov_source[256];
        snprintf(ov_source, sizeof ov_source, "sextant-gpu calibrate --comm %s on %d x %.120s, NCCL %d.%d.%d", date, n, device,
                 version / 10000, (version / 100) % 100, version % 100);
        overlap_keys = overlap_write_overlay_rows(f, gpu, ov_source, ov, ovs);
    }
    if (outfile_commit(&out, err, sizeof err) != 0) {
        fprintf(stderr, "sextant-gpu: --out: %s\n", err);
        return 2;
    }
    printf("overlay written to %s (intra_gbs_per_dir, intra_latency_us of %s's node; NCCL's memory by part%s%s)\n", path, gpu,
           collective_w > 0 ? "; collective_power_w" : "", overlap_keys ? "; the overlap_* slowdowns" : "");
    return 0;
}

/* The device memory free now, after the stream's work; -1 after one stderr line. */
static int free_bytes_now(launch_ctx *ctx, cudaStream_t stream, size_t *free_bytes)
{
    size_t total = 0;
    cudaError_t e = cudaStreamSynchronize(stream);
    if (e == cudaSuccess) e = cudaMemGetInfo(free_bytes, &total);
    if (e != cudaSuccess) {
        fprintf(stderr, "sextant-gpu: rank %d: probing NCCL's memory: %s\n", ctx->rank, cudaGetErrorString(e));
        return -1;
    }
    return 0;
}

/* The collectives [first, last] on communicator `on` (ctx->comm swapped for them), waited for; -1 after one line. */
static int run_on(launch_ctx *ctx, ncclComm_t on, int first, int last, void *send, void *recv, size_t count,
                  cudaStream_t stream, cudaEvent_t done)
{
    ncclComm_t world = ctx->comm;
    ctx->comm = on;
    int failed = 0;
    for (int c = first; c <= last && !failed; c++)
        failed = launch_nccl_done(ctx, enqueue(c, send, recv, count, ctx, stream), "a collective on a probe communicator");
    if (!failed) {
        cudaError_t e = cudaEventRecord(done, stream);
        failed = e != cudaSuccess || launch_event_wait(ctx, done, "a probe communicator's collectives");
    }
    ctx->comm = world;
    return failed ? -1 : 0;
}

/* The pipeline's transfers both ways on communicator `on`, as 1F1B runs them (activations to the next stage, gradients
 * to the previous; over 2 H200s the same 384 MiB as the one way), waited for; -1 after one line. */
static int sendrecv_both_ways(launch_ctx *ctx, ncclComm_t on, void *send, void *recv, size_t count, cudaStream_t stream,
                              cudaEvent_t done)
{
    int n = ctx->nranks, next = (ctx->rank + 1) % n, prev = (ctx->rank + n - 1) % n;
    if (run_on(ctx, on, COLL_SR, COLL_SR, send, recv, count, stream, done)) return -1;
    ncclResult_t r = ncclGroupStart();
    if (r == ncclSuccess) r = ncclSend(send, count, ncclBfloat16, prev, on, stream);
    if (r == ncclSuccess) r = ncclRecv(recv, count, ncclBfloat16, next, on, stream);
    ncclResult_t end = ncclGroupEnd();
    if (launch_nccl_done(ctx, r != ncclSuccess ? r : end, "send/recv on a probe communicator")) return -1;
    cudaError_t e = cudaEventRecord(done, stream);
    return e != cudaSuccess || launch_event_wait(ctx, done, "a probe communicator's send/recv") ? -1 : 0;
}

static double taken(size_t before, size_t after) { return before > after ? (double)(before - after) : 0.0; }

/* Two fresh communicators over the same ranks, both kept until every figure is read (a communicator destroyed
 * leaves memory NCCL reuses for the next: a send/recv-only probe made after one was destroyed read 0.29 GiB where a
 * training run's pipeline group takes about 0.6, docs/validation/2026-11-23-h200x2-train), before the sweep runs
 * anything on the world's: the first split, then send/recv alone; the second split, its collectives, then its
 * send/recv.  0, or -1 after one line. */
static int probe_comm_parts(launch_ctx *ctx, void *send, void *recv, size_t count, cudaStream_t stream, cudaEvent_t done,
                            nccl_memory *nm)
{
    ncclConfig_t cfg = NCCL_CONFIG_INITIALIZER;
    cfg.blocking = 1;
    ncclComm_t a = NULL, b = NULL;
    size_t f[6];
    int rc = -1;
    /* the send/recv-only one first: the process's first send/recv takes some memory once (62 MiB more on 2 x H200:
     * the trainer's pipeline group 446 MiB where a probe after the sweep's send/recv read 384), and a training
     * process's first send/recv is its pipeline's, ring's or dispatch's */
    if (free_bytes_now(ctx, stream, &f[0])) return -1;
    if (launch_nccl_done(ctx, ncclCommSplit(ctx->comm, 0, ctx->rank, &b, &cfg), "ncclCommSplit(probe)")) return -1;
    if (free_bytes_now(ctx, stream, &f[1])) goto out;
    if (sendrecv_both_ways(ctx, b, send, recv, count, stream, done) || free_bytes_now(ctx, stream, &f[2])) goto out;
    if (launch_nccl_done(ctx, ncclCommSplit(ctx->comm, 0, ctx->rank, &a, &cfg), "ncclCommSplit(probe)")) goto out;
    if (free_bytes_now(ctx, stream, &f[3])) goto out;
    if (run_on(ctx, a, COLL_RS, COLL_AG, send, recv, count, stream, done) || run_on(ctx, a, COLL_AR, COLL_AR, send, recv, count, stream, done))
        goto out;
    if (free_bytes_now(ctx, stream, &f[4])) goto out;
    if (sendrecv_both_ways(ctx, a, send, recv, count, stream, done) || free_bytes_now(ctx, stream, &f[5])) goto out;
    /* the two splits: NCCL's base of a communicator, the mean of the two */
    nm->split = 0.5 * (taken(f[0], f[1]) + taken(f[2], f[3]));
    /* both ways with the next and the previous rank: one peer over 2 ranks, two over more (NCCL's send/recv buffers
     * are per peer: 384 MiB over 2 H200s, 768 over 4); the one-time part is the first probe's excess */
    double peers = ctx->nranks > 2 ? 2.0 : 1.0, first = taken(f[1], f[2]), more = taken(f[4], f[5]);
    nm->p2p = more / peers;
    nm->p2p_first = first - more + nm->p2p;
    nm->collective = taken(f[3], f[4]);
    nm->comm = taken(f[3], f[5]);
    rc = 0;
out:
    if (a) ncclCommDestroy(a);
    if (b) ncclCommDestroy(b);
    return rc;
}

/* One collective at one size on every rank: warm-up, the timed repeats between two events (the
 * median), every element of this rank's result checked, and the slowest rank's median with the
 * ranks' wrong elements summed over NCCL into res (row printed by rank 0).  0, or -1 after one line
 * (the caller aborts the communicator). */
static int time_collective_size(launch_ctx *ctx, const comm_options *o, int c, int s, coll_size sz, void *send, void *recv,
                                double *stat, uint16_t *stage, double *rep, cudaStream_t stream, cudaEvent_t start,
                                cudaEvent_t stop, comm_results *res)
{
    int n = ctx->nranks, root = ctx->rank == 0, levels = value_levels(n);
    size_t stage_elems = STAGE_BYTES / 2;
    /* a NaN pattern, so a stale result from the previous size cannot pass */
    CK_OR_FAIL(cudaMemsetAsync(recv, 0xff, sz.recv_elems * 2, stream), "cudaMemsetAsync");
    char what[96];
    snprintf(what, sizeof what, "%s of %zu bytes", coll_names[c], sz.bytes);
    for (int i = 0; i < o->warmup; i++)
        if (launch_nccl_done(ctx, enqueue(c, send, recv, sz.count, ctx, stream), what)) goto fail;
    CK_OR_FAIL(cudaEventRecord(stop, stream), "cudaEventRecord");
    if (launch_event_wait(ctx, stop, what)) goto fail;
    for (int r = 0; r < o->repeats; r++) {
        /* nothing but NCCL's own launches between the two events */
        CK_OR_FAIL(cudaEventRecord(start, stream), "cudaEventRecord");
        for (int i = 0; i < o->iters; i++)
            if (launch_nccl_done(ctx, enqueue(c, send, recv, sz.count, ctx, stream), what)) goto fail;
        CK_OR_FAIL(cudaEventRecord(stop, stream), "cudaEventRecord");
        if (launch_event_wait(ctx, stop, what)) goto fail;
        float ms = 0;
        CK_OR_FAIL(cudaEventElapsedTime(&ms, start, stop), "cudaEventElapsedTime");
        rep[r] = ms * 1e-3 / o->iters;
    }
    sort_ascending(rep, (size_t)o->repeats);
    double t = rep[o->repeats / 2];
    /* check this rank's result, element by element */
    int64_t wrong = 0;
    for (size_t off = 0; off < sz.recv_elems; off += stage_elems) {
        size_t len = sz.recv_elems - off < stage_elems ? sz.recv_elems - off : stage_elems;
        CK_OR_FAIL(cudaMemcpy(stage, (uint16_t *)recv + off, len * 2, cudaMemcpyDeviceToHost), "cudaMemcpy(result)");
        for (size_t i = 0; i < len; i++)
            wrong += stage[i] != bf16_of_int(expected_value(c, ctx->rank, n, sz.count, off + i, levels));
    }
    /* the slowest rank's median is the collective's time; wrong elements add up */
    double host_stat[2] = {t, (double)wrong};
    CK_OR_FAIL(cudaMemcpy(stat, host_stat, sizeof host_stat, cudaMemcpyHostToDevice), "cudaMemcpy(statistics)");
    if (launch_nccl_done(ctx, ncclAllReduce(stat, stat, 1, ncclFloat64, ncclMax, ctx->comm, stream), "ncclAllReduce(time)") ||
        launch_nccl_done(ctx, ncclAllReduce(stat + 1, stat + 1, 1, ncclFloat64, ncclSum, ctx->comm, stream), "ncclAllReduce(#wrong)"))
        goto fail;
    CK_OR_FAIL(cudaEventRecord(stop, stream), "cudaEventRecord");
    if (launch_event_wait(ctx, stop, "the statistics all-reduce")) goto fail;
    CK_OR_FAIL(cudaMemcpy(host_stat, stat, sizeof host_stat, cudaMemcpyDeviceToHost), "cudaMemcpy(statistics)");
    res->seconds[c][s] = host_stat[0];
    res->bytes[c][s] = sz.bytes;
    res->wrong[c] += (int64_t)host_stat[1];
    if (root) {
        double algbw = (double)sz.bytes / host_stat[0] / 1e9, nn = (double)n;
        double factor = ring_bytes_factor(c, nn);
        printf("%15zu %12zu %9s %6s %10.2f %8.2f %8.2f %8.0f\n", sz.bytes, sz.count, "bfloat16", coll_ops[c],
               host_stat[0] * 1e6, algbw, algbw * factor, host_stat[1]);
    }
    return 0;
fail:   /* CK_OR_FAIL's target: the caller aborts the communicator */
    return -1;
}

/* NCCL's device memory once used (see comm_body): the process's first communicator once every collective ran, printed
 * with the parts measured before the sweep (probe_comm_parts).  0, or -1 after one line. */
static int measure_nccl_memory(launch_ctx *ctx, const comm_options *o, const double *stat, cudaStream_t stream,
                               nccl_memory *nm)
{
    int n = ctx->nranks, root = ctx->rank == 0;
    size_t free0 = 0, total = 0;
    CK_OR_FAIL(cudaStreamSynchronize(stream), "cudaStreamSynchronize");
    CK_OR_FAIL(cudaMemGetInfo(&free0, &total), "cudaMemGetInfo");
    double ours = 2.0 * (double)o->max_bytes + 2.0 * sizeof *stat;
    if (ctx->used_before_comm > 0)
        nm->first_comm = (double)(total - free0) - (double)ctx->used_before_comm - ours;
    if (nm->first_comm < 0) nm->first_comm = 0;
    if (root) printf("\n# NCCL's device memory over the %d ranks (MiB): the world's communicator %.0f at its creation and "
                     "first small all-reduce; a split %.0f; the process's first send/recv %.0f (one peer); one more "
                     "communicator's collectives %.0f, then its send/recv %.0f a peer; the world's once every collective "
                     "ran %.0f\n", n,
                     nm->process / 1048576.0, nm->split / 1048576.0, nm->p2p_first / 1048576.0, nm->collective / 1048576.0,
                     nm->p2p / 1048576.0, nm->first_comm / 1048576.0);
    return 0;
fail:   /* CK_OR_FAIL's target */
    return -1;
}

/* What the GPU draws while collectives run and nothing else, for the power model's collective_power_w
 * (docs/model.md, "Collectives draw power"): each collective at the largest swept size up to 256 MiB (64 MiB
 * at least), looped for about COLL_POWER_S seconds on every rank while NVML reads that rank's power
 * (validator/power.c); the ranks' mean per collective, and its median over the four.  The iterations come
 * from the sweep's times, the slowest rank's, so every rank runs the same count.  *watts stays 0 (nothing
 * written) without NVML on every rank or without a size of 64 MiB; 0, or -1 after one line. */
#define COLL_POWER_S 2.0
#define COLL_POWER_MIN_BYTES ((size_t)64 << 20)
static int measure_collective_power(launch_ctx *ctx, const comm_options *o, void *send, void *recv, double *stat,
                                    cudaStream_t stream, cudaEvent_t stop, const comm_results *res, double *watts)
{
    int n = ctx->nranks, root = ctx->rank == 0;
    *watts = 0.0;
    int s = -1;
    size_t nominal = 0, b = o->min_bytes;
    for (int i = 0; i < res->nsizes; i++, b *= 2)
        if (b <= FIT_MAX_BYTES) {
            s = i;
            nominal = b;
        }
    if (nominal < COLL_POWER_MIN_BYTES) {
        if (root) printf("\n# collectives' power: not measured (no swept size of 64 to 256 MiB)\n");
        return 0;
    }
    char why[256];
    int nvml = power_open(why, sizeof why) == 0;
    double per_kind[NCOLL] = {0};
    int kinds = 0;
    for (int c = 0; c < NCOLL; c++) {
        coll_size sz = size_for(c, nominal, n);
        double t = res->seconds[c][s];
        if (sz.count == 0 || !(t > 0.0)) continue;
        int iters = (int)ceil(COLL_POWER_S / t);
        if (iters < 8) iters = 8;
        if (iters > 100000) iters = 100000;
        char what[96];
        snprintf(what, sizeof what, "%s of %zu bytes (its power)", coll_names[c], sz.bytes);
        for (int i = 0; i < iters / 8; i++)
            if (launch_nccl_done(ctx, enqueue(c, send, recv, sz.count, ctx, stream), what)) goto fail;
        CK_OR_FAIL(cudaEventRecord(stop, stream), "cudaEventRecord");
        if (launch_event_wait(ctx, stop, what)) goto fail;
        power_window *w = nvml ? power_window_begin(POWER_POLL_MS_ALONE) : NULL;
        for (int i = 0; i < iters; i++)
            if (launch_nccl_done(ctx, enqueue(c, send, recv, sz.count, ctx, stream), what)) goto fail;
        CK_OR_FAIL(cudaEventRecord(stop, stream), "cudaEventRecord");
        if (launch_event_wait(ctx, stop, what)) goto fail;
        double rank_w = 0.0, mhz = 0.0, celsius = 0.0, seconds = 0.0;
        int updates = 0;
        int got = w && power_window_end(w, &rank_w, &mhz, &celsius, &seconds, &updates) == 0;
        /* every rank's power and whether it had one: the mean over the ranks that did, if all did */
        double host_stat[2] = {got ? rank_w : 0.0, got ? 1.0 : 0.0};
        CK_OR_FAIL(cudaMemcpy(stat, host_stat, sizeof host_stat, cudaMemcpyHostToDevice), "cudaMemcpy(power)");
        if (launch_nccl_done(ctx, ncclAllReduce(stat, stat, 2, ncclFloat64, ncclSum, ctx->comm, stream), "ncclAllReduce(power)"))
            goto fail;
        CK_OR_FAIL(cudaEventRecord(stop, stream), "cudaEventRecord");
        if (launch_event_wait(ctx, stop, "the power all-reduce")) goto fail;
        CK_OR_FAIL(cudaMemcpy(host_stat, stat, sizeof host_stat, cudaMemcpyDeviceToHost), "cudaMemcpy(power)");
        if (host_stat[1] == (double)n) {
            per_kind[kinds++] = host_stat[0] / (double)n;
            if (root) printf("# collectives' power: %s of %zu MiB, %d calls: %.1f W (mean of the %d ranks; rank 0 at %.0f MHz)\n",
                             coll_names[c], sz.bytes >> 20, iters, host_stat[0] / (double)n, n, mhz);
        }
    }
    if (nvml) power_close();
    if (kinds) {
        sort_ascending(per_kind, (size_t)kinds);
        *watts = kinds % 2 ? per_kind[kinds / 2] : 0.5 * (per_kind[kinds / 2 - 1] + per_kind[kinds / 2]);
        if (root) printf("# collectives' power: median %.1f W -> collective_power_w\n", *watts);
    } else if (root) {
        printf("# collectives' power: not measured (%s)\n", nvml ? "NVML gave no power on some rank" : why);
    }
    return 0;
fail:   /* CK_OR_FAIL's target */
    if (nvml) power_close();
    return -1;
}

/* Rank 0, after every rank measured: the fits, the overlap summary and CSV, and the overlay when the
 * results were right.  0, 1 (nothing written: wrong elements or an unusable fit) or 2 (the CSV failed). */
static int report_and_write(const comm_job *job, const char *gpu, const char *device, int n, const comm_results *res,
                            const overlap_results *ov, const nccl_memory *nm,
                            double collective_w)
{
    const comm_options *o = &job->o;
    int rc = 0;
    int64_t wrong = 0;
    for (int c = 0; c < NCOLL; c++) wrong += res->wrong[c];
    printf("\n# fit: time = a + bytes * b per collective over 1 MiB..256 MiB (GSL weighted least squares, weights 1/time^2),\n"
           "# read as the planner's ring formula k alpha + f bytes / BW (f, k: docs/model.md \"Communication\")\n");
    double alpha[NCOLL] = {0}, bw[NCOLL] = {0}, ab[NCOLL][2] = {{0}};
    int ok[NCOLL];
    for (int c = 0; c < NCOLL; c++) ok[c] = fit_collective(c, n, res, ab[c], &alpha[c], &bw[c]) == 0;
    print_residuals(res, ab, ok);
    overlap_summary ovs;
    int csv_rc = 0;
    if (ov) {
        overlap_summarise(ov, &ovs);
        overlap_print(stdout, ov, &ovs);
        if (o->overlap.csv_path && overlap_write_csv(o->overlap.csv_path, ov) != 0) csv_rc = 2;
    }
    if (wrong) {
        fprintf(stderr, "sextant-gpu: %lld wrong elements in the results; not writing an overlay\n", (long long)wrong);
        rc = 1;
    } else if (!ok[COLL_AR]) {
        fprintf(stderr, "sextant-gpu: the all_reduce fit is unusable; not writing an overlay\n");
        rc = 1;
    } else if (o->out_path) {
        rc = write_overlay(job, hwdb_find_gpu(job->db, gpu)->name, device, n, res, alpha, bw, ok, nm, collective_w, ov,
                           ov ? &ovs : NULL);
    }
    rc = rc ? rc : csv_rc;
    return rc;
}

static int comm_body(launch_ctx *ctx, void *arg)
{
    const comm_job *job = arg;
    const comm_options *o = &job->o;
    int n = ctx->nranks, root = ctx->rank == 0, levels = value_levels(n);
    cudaStream_t stream = NULL;
    cudaEvent_t start = NULL, stop = NULL;
    void *send = NULL, *recv = NULL;
    double *stat = NULL;
    uint16_t *stage = NULL;
    comm_results *res = NULL;
    overlap_results *ov = NULL;
    double *rep = NULL;
    int rc = 1;

    if (n < 2) {
        fprintf(stderr, "sextant-gpu: calibrate --comm needs at least 2 ranks, got %d\n", n);
        goto fail;
    }
    struct cudaDeviceProp prop;
    CK_OR_FAIL(cudaGetDeviceProperties(&prop, ctx->device), "cudaGetDeviceProperties");
    const char *gpu = o->gpu_name ? o->gpu_name : recognise_gpu(prop.name);
    if (!gpu) {
        fprintf(stderr, "sextant-gpu: rank %d: cannot tell which hwdb GPU '%s' is; pass --gpu NAME\n", ctx->rank, prop.name);
        goto fail;
    }
    if (!hwdb_find_gpu(job->db, gpu)) {
        fprintf(stderr, "sextant-gpu: rank %d: '%s' (%s) is not in the hwdb\n", ctx->rank, gpu, prop.name);
        goto fail;
    }
    if (ctx->local_size >= 0 && ctx->local_size != n) {
        fprintf(stderr, "sextant-gpu: rank %d: calibrate --comm measures one node, but %d of the %d ranks are on this one\n",
                ctx->rank, ctx->local_size, n);
        goto fail;
    }
    size_t free_b = 0, total_b = 0;
    CK_OR_FAIL(cudaMemGetInfo(&free_b, &total_b), "cudaMemGetInfo");
    /* NCCL's own buffers and the CUDA context need room beside ours */
    double overlap_b = o->overlap.enabled ? (double)overlap_device_bytes(&o->overlap) : 0.0;
    if (2.0 * (double)o->max_bytes + overlap_b + (1u << 30) > (double)free_b) {
        fprintf(stderr, "sextant-gpu: rank %d: --max-bytes %zu needs %.1f GiB of buffers (the overlap measurement %.1f GiB more) "
                        "and %.1f GiB is free; lower --max-bytes\n",
                ctx->rank, o->max_bytes, 2.0 * (double)o->max_bytes / 1073741824.0, overlap_b / 1073741824.0,
                (double)free_b / 1073741824.0);
        goto fail;
    }
    CK_OR_FAIL(cudaStreamCreateWithFlags(&stream, cudaStreamNonBlocking), "cudaStreamCreateWithFlags");
    CK_OR_FAIL(cudaEventCreate(&start), "cudaEventCreate");
    CK_OR_FAIL(cudaEventCreate(&stop), "cudaEventCreate");
    CK_OR_FAIL(cudaMalloc(&send, o->max_bytes), "cudaMalloc(send buffer)");
    CK_OR_FAIL(cudaMalloc(&recv, o->max_bytes), "cudaMalloc(receive buffer)");
    CK_OR_FAIL(cudaMalloc((void **)&stat, 2 * sizeof *stat), "cudaMalloc(statistics)");
    stage = malloc(STAGE_BYTES);
    res = calloc(1, sizeof *res);
    if (!stage || !res) {
        fprintf(stderr, "sextant-gpu: rank %d: out of host memory\n", ctx->rank);
        goto fail;
    }
    /* the send buffer holds this rank's values once and for all: out of
     * place, no collective writes it */
    size_t max_elems = o->max_bytes / 2, stage_elems = STAGE_BYTES / 2;
    for (size_t off = 0; off < max_elems; off += stage_elems) {
        size_t len = max_elems - off < stage_elems ? max_elems - off : stage_elems;
        for (size_t i = 0; i < len; i++) stage[i] = bf16_of_int(element_value(ctx->rank, off + i, levels));
        CK_OR_FAIL(cudaMemcpy((uint16_t *)send + off, stage, len * 2, cudaMemcpyHostToDevice), "cudaMemcpy(fill send buffer)");
    }

    /* the world communicator as a framework has it before training: made, and one small all-reduce run on it (a
     * barrier, the loss); before the sweep connects everything else on it */
    nccl_memory nm = {0};
    {
        size_t before = 0, after = 0;
        if (free_bytes_now(ctx, stream, &before)) goto fail;
        CK_OR_FAIL(cudaMemsetAsync(stat, 0, 2 * sizeof *stat, stream), "cudaMemsetAsync");
        if (launch_nccl_done(ctx, ncclAllReduce(stat, stat, 1, ncclFloat64, ncclSum, ctx->comm, stream), "ncclAllReduce(first)"))
            goto fail;
        if (free_bytes_now(ctx, stream, &after)) goto fail;
        nm.process = (double)ctx->comm_init_bytes + taken(before, after);
        size_t count = (o->max_bytes < ((size_t)64 << 20) ? o->max_bytes : ((size_t)64 << 20)) / 2 / (size_t)n;
        if (probe_comm_parts(ctx, send, recv, count, stream, stop, &nm)) goto fail;
    }
    int nsizes = 0;
    for (size_t b = o->min_bytes; b <= o->max_bytes && nsizes < MAX_SIZES; b *= 2) nsizes++;
    res->nsizes = nsizes;
    int version = 0;
    ncclGetVersion(&version);
    if (root) {
        const char *nvls = getenv("NCCL_NVLS_ENABLE");
        printf("# sextant-gpu calibrate --comm: %d ranks (%s), %s, NCCL %d.%d.%d, NCCL_NVLS_ENABLE=%s\n", n, ctx->mode,
               prop.name, version / 10000, (version / 100) % 100, version % 100, nvls ? nvls : "(unset)");
        printf("# hwdb row %s; bf16, out of place; %d warm-up iterations, then %d repeats of %d iterations between two "
               "events, median repeat\n", gpu, o->warmup, o->repeats, o->iters);
    }
    rep = malloc((size_t)o->repeats * sizeof *rep);
    if (!rep) {
        fprintf(stderr, "sextant-gpu: rank %d: out of host memory\n", ctx->rank);
        goto fail;
    }
    for (int c = 0; c < NCOLL; c++) {
        if (root) {
            printf("\n# %s\n", coll_names[c]);
            printf("#%14s %12s %9s %6s %10s %8s %8s %8s\n", "size", "count", "type", "redop", "time", "algbw", "busbw",
                   "#wrong");
            printf("#%14s %12s %9s %6s %10s %8s %8s %8s\n", "(B)", "(elements)", "", "", "(us)", "(GB/s)", "(GB/s)", "");
        }
        size_t nominal = o->min_bytes;
        for (int s = 0; s < nsizes; s++, nominal *= 2) {
            coll_size sz = size_for(c, nominal, n);
            if (sz.count == 0) continue;
            if (time_collective_size(ctx, o, c, s, sz, send, recv, stat, stage, rep, stream, start, stop, res)) goto fail;
        }
    }
    /* The device memory of NCCL's communicators, for the planner's
     * nccl_first_memory_gib and nccl_memory_gib: the process's first
     * (everything in use now, less the context before it was made and our own
     * buffers), then a fresh one on which every collective and send/recv ran.
     * A third, running send/recv only, is printed for the record: it measured
     * 0.29 GiB where a training run's pipeline communicator takes about 0.6
     * (a communicator destroyed before it leaves memory NCCL reuses), so the
     * planner does not use it (docs/validation/2026-11-23-h200x2-train). */
    if (measure_nccl_memory(ctx, o, stat, stream, &nm)) goto fail;
    double collective_w = 0.0;
    if (measure_collective_power(ctx, o, send, recv, stat, stream, stop, res, &collective_w)) goto fail;
    /* after the memory probes: its buffers and cuBLAS must not count as NCCL's */
    if (o->overlap.enabled) {
        ov = calloc(1, sizeof *ov);
        if (!ov) {
            fprintf(stderr, "sextant-gpu: rank %d: out of host memory\n", ctx->rank);
            goto fail;
        }
        if (overlap_measure(ctx, &o->overlap, ov) != 0) goto fail;
    }
    rc = root ? report_and_write(job, gpu, prop.name, n, res, ov, &nm, collective_w) : 0;
    goto done;

fail:
    rc = rc ? rc : 1;
    /* a peer may be gone with our collectives in flight: abort before
     * freeing, or cudaFree would wait on kernels that never finish */
    if (ctx->comm) {
        ncclCommAbort(ctx->comm);
        ctx->comm = NULL;
    }
done:
    if (rc == 0 && stream) cudaStreamSynchronize(stream);
    if (start) cudaEventDestroy(start);
    if (stop) cudaEventDestroy(stop);
    if (stat) cudaFree(stat);
    if (send) cudaFree(send);
    if (recv) cudaFree(recv);
    if (stream) cudaStreamDestroy(stream);
    free(stage);
    free(res);
    free(ov);
    free(rep);
    return rc;
}

int comm_calibrate(int argc, char **argv, const hwdb *db)
{
    comm_job job;
    if (parse_options(argc, argv, &job.o) != 0) return 2;
    job.db = db;
    if (job.o.gpu_name && !hwdb_find_gpu(db, job.o.gpu_name)) {
        fprintf(stderr, "sextant-gpu: calibrate --comm: --gpu: unknown GPU '%s' (sextant hw lists them)\n", job.o.gpu_name);
        return 2;
    }
    if (job.o.gpus == 1) {
        fprintf(stderr, "sextant-gpu: calibrate --comm: --gpus 1 has nothing to communicate with; give 2 or more\n");
        return 2;
    }
    launch_options lo = {job.o.gpus, job.o.timeout_s, 10.0 * job.o.timeout_s};
    return launch_run(&lo, comm_body, &job);
}
