/* make bench: how many layouts per second one core estimates, against the
 * cost of only building their op lists (the reference, measured in the same
 * run), over a sweep of TP x PP x DP x micro-batch x recompute layouts; then
 * issue 3's search, timed with its cache against the same search costing
 * every layout from scratch (the reference, measured in the same run); then
 * the CSV reader on a field just under CSV_FIELD_MAX, which must take time
 * linear in its length (issue 26: libcsv's 128-byte growth made it quadratic). */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

#include "planner.h"

static double now_s(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (double)ts.tv_sec + 1e-9 * (double)ts.tv_nsec;
}

/* Same counts, same ranked layouts with the same numbers. */
static int same_result(const plan_result *a, const plan_result *b)
{
    if (a->evaluated != b->evaluated || a->feasible != b->feasible || a->ntop != b->ntop) return 0;
    if (memcmp(a->rejected, b->rejected, sizeof a->rejected) != 0) return 0;
    for (int i = 0; i < a->ntop; i++)
        if (memcmp(&a->top[i].layout, &b->top[i].layout, sizeof a->top[i].layout) != 0 ||
            a->top[i].step_s != b->top[i].step_s || a->top[i].memory_total != b->top[i].memory_total)
            return 0;
    return 1;
}

/* Seconds csv_table_read takes on one quoted field of `bytes` bytes (median of 5), or -1. */
static double csv_field_seconds(size_t bytes)
{
    char path[] = "/tmp/sextant-bench-csv-XXXXXX", err[512];
    int fd = mkstemp(path);
    FILE *f = fd >= 0 ? fdopen(fd, "w") : NULL;
    if (!f) return -1;
    fputs("gpu,key,value,source\nh100-sxm,gemm_efficiency,0.6,\"", f);
    for (size_t i = 0; i < bytes; i++) fputc('a', f);
    fputs("\"\n", f);
    fclose(f);
    double wall[5];
    for (int run = 0; run < 5; run++) {
        csv_table t;
        double t0 = now_s();
        int rc = csv_table_read(path, &t, err, sizeof err);
        wall[run] = now_s() - t0;
        if (rc != 0) { unlink(path); return -1; }
        csv_table_free(&t);
    }
    unlink(path);
    sort_ascending(wall, 5);
    return wall[2];
}

int main(void)
{
    char err[512];
    hwdb db;
    model_zoo zoo;
    if (hwdb_load(SEXTANT_ROOT "/hwdb", &db, err, sizeof err) || model_zoo_load(SEXTANT_ROOT "/models/zoo.csv", &zoo, err, sizeof err)) {
        fprintf(stderr, "bench: %s\n", err);
        return 1;
    }
    const model_t *m = model_zoo_find(&zoo, "llama2-70b");
    const hw_gpu *g = hwdb_find_gpu(&db, "h100-sxm");
    const hw_node *n = hwdb_find_node(&db, g->node);
    static estimate_t e;
    static stage_ops ops;
    estimate_cache *cache = estimate_cache_new();
    if (!cache) {
        fprintf(stderr, "bench: out of memory\n");
        return 1;
    }
    job_t job = {2e12, 2.0};
    long layouts = 0, valid = 0;
    double checksum = 0;
    double best_estimate = 1e30, best_build = 1e30, best_cached = 1e30;
    for (int rep = 0; rep < 5; rep++) {
        for (int pass = 0; pass < 3; pass++) {
            double t0 = now_s();
            long count = 0;
            for (int64_t tp = 1; tp <= 8; tp *= 2)
                for (int64_t pp = 1; pp <= 16; pp *= 2)
                    for (int64_t mbs = 1; mbs <= 8; mbs *= 2)
                        for (int r = 0; r < 3; r++)
                            for (int zero = 0; zero < 4; zero++) {
                                layout_t l = {0};
                                l.tp = tp; l.pp = pp; l.dp = 1024 / (tp * pp); l.gpus = 1024; l.vpp = 1;
                                l.mbs = mbs; l.gbs = 1024 * 4 > mbs * l.dp ? 4096 : mbs * l.dp;
                                l.seq = 4096; l.gpus_per_node = 8; l.recompute = (recompute_t)r; l.zero = zero;
                                l.sp = tp > 1; l.precision = PREC_BF16;
                                count++;
                                if (pass == 0) {
                                    if (estimate_layout(m, g, n, &l, &job, &e, err, sizeof err) == 0) {
                                        valid++;
                                        checksum += e.step_s;
                                    }
                                } else if (pass == 1) {
                                    build_stage_ops(m, &l, 0, &ops);
                                    checksum += ops.nops;
                                } else if (estimate_layout_cached(cache, m, g, n, &l, &job, 0, &e, err, sizeof err) == 0) {
                                    checksum += e.step_s;
                                }
                            }
            double dt = now_s() - t0;
            if (pass == 0 && dt < best_estimate) best_estimate = dt;
            if (pass == 1 && dt < best_build) best_build = dt;
            if (pass == 2 && dt < best_cached) best_cached = dt;
            layouts = count;
        }
    }
    printf("bench: %ld layouts of llama2-70b on 1024 x h100-sxm (%ld estimable per sweep), best of 5 sweeps\n", layouts,
           valid / 5);
    printf("  estimate_layout      %10.0f layouts/s  (%.2f us each)\n", layouts / best_estimate, 1e6 * best_estimate / layouts);
    printf("  build_stage_ops only %10.0f lists/s    (reference)\n", layouts / best_build);
    printf("  ratio                %10.2f estimates per op-list build time\n", best_build / best_estimate);
    printf("  estimate_layout_cached %8.0f layouts/s  (the search's path, its parts cached by the first sweep:\n"
           "                                            %.1fx estimate_layout, %.1fx an op-list build)\n",
           layouts / best_cached, best_estimate / best_cached, best_build / best_cached);
    estimate_cache_free(cache);
    printf("  (checksum %.6g)\n", checksum);

    /* issue 3's target: megatron-1t, every GPU type, every power of two from 8 to 16384 */
    static plan_request req;
    static plan_result res;
    req.model = model_zoo_find(&zoo, "megatron-1t");
    for (int i = 0; i < db.ngpus && i < PLAN_GPU_TYPES_MAX; i++) {
        req.gpu[req.ngpu_types] = &db.gpus[i];
        req.node[req.ngpu_types++] = hwdb_find_node(&db, db.gpus[i].node);
    }
    for (int64_t count = 8; count <= 16384; count *= 2) req.gpu_counts[req.ncounts++] = count;
    req.seq = req.model->seq;
    req.gbs_min = 512;
    req.gbs_max = 2048;
    req.tokens = 20 * model_params_total(req.model);
    req.top = 5;
    req.max_zero = 3;
    req.precision = PREC_COUNT;
    /* the reference: the same search costing every layout from scratch, as before its cache (once: ~5 s) */
    static plan_result reference;
    req.uncached = 1;
    double t0 = now_s();
    if (plan_search(&req, &reference, 0, err, sizeof err) != 0) {
        fprintf(stderr, "bench: %s\n", err);
        return 1;
    }
    double reference_wall = now_s() - t0;
    req.uncached = 0;
    enum { RUNS = 5 };
    double wall[RUNS];
    int identical = 1;
    for (int run = 0; run < RUNS; run++) {
        t0 = now_s();
        if (plan_search(&req, &res, 0, err, sizeof err) != 0) {
            fprintf(stderr, "bench: %s\n", err);
            return 1;
        }
        wall[run] = now_s() - t0;
        identical = identical && same_result(&res, &reference);
    }
    sort_ascending(wall, RUNS);
    double median = wall[RUNS / 2];
    printf("bench: sextant plan megatron-1t --gpu all --gpus 8-16384 (%d GPU types x %d counts), median of %d runs\n",
           req.ngpu_types, req.ncounts, RUNS);
    printf("  layouts evaluated    %10lld (%lld feasible, %lld rejected on memory before their time was costed)\n",
           (long long)res.evaluated, (long long)res.feasible, (long long)res.rejected[REJECT_MEMORY]);
    printf("  wall time            %10.3f s   (min %.3f, max %.3f; target < 1 s: %s)\n", median, wall[0],
           wall[RUNS - 1], median < 1.0 ? "met" : "missed");
    printf("  layouts/s            %10.0f     (target 1e7: %.2fx of it; Calculon ~110/s/core: %.0fx)\n",
           (double)res.evaluated / median, (double)res.evaluated / median / 1e7, (double)res.evaluated / median / 110.0);
    printf("  reference            %10.3f s   (every layout costed from scratch: %.0f layouts/s)\n", reference_wall,
           (double)reference.evaluated / reference_wall);
    printf("  ratio                %10.1fx    faster than the reference; results %s\n", reference_wall / median,
           identical ? "identical" : "DIFFER");
    double quarter = csv_field_seconds(CSV_FIELD_MAX / 4), whole = csv_field_seconds(CSV_FIELD_MAX - 64);
    printf("bench: csv_table_read, one quoted field: %.0f KiB %.4f s, %.0f KiB %.4f s (%.1fx for 4x the bytes; linear: ~4x)\n",
           CSV_FIELD_MAX / 4 / 1024.0, quarter, (CSV_FIELD_MAX - 64) / 1024.0, whole, quarter > 0 ? whole / quarter : 0.0);

    /* issue 23's target: a mixture of experts searched the same way, EP included (DeepSeek-V3 and Mixtral) */
    static const char *const moe_models[] = {"deepseek-v3", "mixtral-8x7b"};
    for (size_t mi = 0; mi < sizeof moe_models / sizeof moe_models[0]; mi++) {
        req.model = model_zoo_find(&zoo, moe_models[mi]);
        req.seq = req.model->seq;
        req.gbs_min = 256;
        req.gbs_max = 1024;
        req.tokens = 20 * model_params_active(req.model);
        for (int run = 0; run < RUNS; run++) {
            t0 = now_s();
            if (plan_search(&req, &res, 0, err, sizeof err) != 0) {
                fprintf(stderr, "bench: %s\n", err);
                return 1;
            }
            wall[run] = now_s() - t0;
        }
        sort_ascending(wall, RUNS);
        printf("bench: sextant plan %s --gpu all --gpus 8-16384, EP and ETP searched, median of %d runs\n", moe_models[mi], RUNS);
        printf("  layouts evaluated    %10lld (%lld feasible); wall time %.3f s (min %.3f, max %.3f; target < 1 s: %s)\n",
               (long long)res.evaluated, (long long)res.feasible, wall[RUNS / 2], wall[0], wall[RUNS - 1],
               wall[RUNS / 2] < 1.0 ? "met" : "missed");
    }
    model_zoo_free(&zoo);
    hwdb_free(&db);
    return identical ? 0 : 1;   /* a fast path that changes the results is a bug, not a speed-up */
}
