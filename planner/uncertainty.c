/* How far to trust a prediction: the spread of sextant's errors on published
 * runs of the same parallelism family (docs/model.md, "Uncertainty bands"),
 * kept in hwdb/uncertainty.csv by `make published`. */
#include "planner.h"

#include <math.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>
#include <unistd.h>

static const char *const family_names[FAMILY_COUNT] = {"zero3-fsdp", "context-parallel", "pipeline", "tp-dp"};

parallelism_family_t parallelism_family(const layout_t *l)
{
    if (l->zero >= 2) return FAMILY_SHARDED;
    if (layout_cp(l) > 1) return FAMILY_CONTEXT;
    if (l->pp > 1) return FAMILY_PIPELINE;
    return FAMILY_TP_DP;
}

const char *parallelism_family_name(parallelism_family_t f) { return f < FAMILY_COUNT ? family_names[f] : "?"; }

static int compare_double(const void *a, const void *b)
{
    double x = *(const double *)a, y = *(const double *)b;
    return (x > y) - (x < y);
}

void sort_ascending(double *v, size_t n) { qsort(v, n, sizeof *v, compare_double); }

void uncertainty_from_errors(uncertainty_bands *b, parallelism_family_t f, double *errors, int n)
{
    b->rows[f] = n;
    b->err_low[f] = b->err_high[f] = 0.0;
    if (n < 1) return;
    sort_ascending(errors, (size_t)n);
    /* trim at most a tenth from each end, so that the band holds at least 80% of the rows whatever ties
     * or the count (interpolated percentiles could leave a row or two short of it) */
    int below = (int)floor(0.1 * (double)n), above = n - (int)ceil(0.9 * (double)n);
    b->err_low[f] = errors[below];
    b->err_high[f] = errors[n - 1 - above];
}

/* trim to 1 - trim of all families' errors, trimmed as above; published.c chooses the trim by leave-one-source-out
 * coverage (docs/model.md, "Uncertainty bands") */
void uncertainty_widen_to_pooled(uncertainty_bands *b, double *errors, int n, double trim)
{
    b->pooled_trim = trim;
    if (n < 1) return;
    sort_ascending(errors, (size_t)n);
    int below = (int)floor(trim * (double)n), above = n - (int)ceil((1.0 - trim) * (double)n);
    double low = errors[below], high = errors[n - 1 - above];
    for (int f = 0; f < FAMILY_COUNT; f++) {
        if (b->rows[f] < 1) continue;
        if (low < b->err_low[f]) b->err_low[f] = low;
        if (high > b->err_high[f]) b->err_high[f] = high;
    }
}

int uncertainty_write(const char *path, const uncertainty_bands *b, const char *source, char *err, size_t errlen)
{
    char tmp[1100];
    snprintf(tmp, sizeof tmp, "%s.tmp.%ld", path, (long)getpid());
    FILE *f = fopen(tmp, "w");
    if (!f) {
        snprintf(err, errlen, "%s: cannot write", tmp);
        return -1;
    }
    fprintf(f, "# sextant's signed errors (predicted over published throughput minus one) on published runs, per\n"
               "# parallelism family: its 10th to 90th percentile widened to all families' %.1fth to %.1fth\n"
               "# (docs/model.md, Uncertainty bands). `make published` writes this file.\n"
               "family,rows,err_low,err_high,source\n", 100.0 * b->pooled_trim, 100.0 * (1.0 - b->pooled_trim));
    for (int i = 0; i < FAMILY_COUNT; i++)
        fprintf(f, "%s,%d,%.4f,%.4f,\"%s\"\n", family_names[i], b->rows[i], b->err_low[i], b->err_high[i], source);
    if (fclose(f) != 0 || rename(tmp, path) != 0) {
        unlink(tmp);
        snprintf(err, errlen, "%s: cannot write", path);
        return -1;
    }
    return 0;
}

int uncertainty_read(const char *path, uncertainty_bands *b, char *err, size_t errlen)
{
    memset(b, 0, sizeof *b);
    csv_table t;
    if (csv_table_read(path, &t, err, errlen) != 0) return -1;
    int status = 0;
    for (int r = 0; r < t.nrows && !status; r++) {
        char name[48];
        int64_t rows;
        double low, high;
        status = csv_get_string(&t, r, "family", 0, name, sizeof name, err, errlen) ||
                 csv_get_int64(&t, r, "rows", 0, 1000000, &rows, err, errlen) ||
                 csv_get_double(&t, r, "err_low", -0.99, 10, &low, err, errlen) ||
                 csv_get_double(&t, r, "err_high", -0.99, 10, &high, err, errlen);
        if (status) break;
        int f = 0;
        while (f < FAMILY_COUNT && strcasecmp(name, family_names[f])) f++;
        if (f == FAMILY_COUNT || low > high) {
            snprintf(err, errlen, "%s:%d:%s: %s", path, t.line[r], f == FAMILY_COUNT ? "family" : "err_low",
                     f == FAMILY_COUNT ? "unknown family" : "above err_high");
            status = -1;
            break;
        }
        b->rows[f] = (int)rows;
        b->err_low[f] = low;
        b->err_high[f] = high;
    }
    csv_table_free(&t);
    return status ? -1 : 0;
}

int uncertainty_band(const uncertainty_bands *b, const layout_t *l, double seconds, double *low, double *high)
{
    parallelism_family_t f = parallelism_family(l);
    if (!b || b->rows[f] < 1) return 0;
    /* a throughput too high by e means the real time is the predicted one times (1 + e) */
    *low = seconds * (1.0 + b->err_low[f]);
    *high = seconds * (1.0 + b->err_high[f]);
    return 1;
}
