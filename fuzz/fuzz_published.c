/* Fuzz target: published runs (data/published/runs.csv's format).  Each row is
 * read over the shipped hwdb and zoo and, when estimable, estimated and compared
 * as `sextant published` does; the work per input is capped at 16 estimates, and
 * a table of at most 16 rows also goes through the whole report. */
#include "fuzz_util.h"

#define ROWS_ESTIMATED_MAX 16

static hwdb db;
static model_zoo zoo;

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
    char err[1024];
    if (!db.gpus) {
        if (hwdb_load(SEXTANT_ROOT "/hwdb", &db, err, sizeof err) != 0) abort();
        if (model_zoo_load(SEXTANT_ROOT "/models/zoo.csv", &zoo, err, sizeof err) != 0) abort();
    }
    const char *path = fuzz_file(data, size, ".csv");
    csv_table t;
    if (csv_table_read(path, &t, err, sizeof err) != 0) return 0;
    static published_row row;
    static estimate_t e;
    int estimated = 0;
    for (int r = 0; r < t.nrows && estimated < ROWS_ESTIMATED_MAX; r++) {
        if (published_row_read(&t, r, &db, &zoo, &row, err, sizeof err) != 0) break;
        published_metric_name(row.metric);
        published_convention(&row);
        if (row.skip_class[0] || !row.gpu || !row.node) continue;
        estimated++;
        job_t job = {1e12, row.gpu->cloud_usd_per_gpu_hour};
        if (estimate_layout(&row.model, row.gpu, row.node, &row.layout, &job, &e, err, sizeof err) == 0)
            published_signed_error(&row, published_predicted(&row, &e));
    }
    int small = t.nrows <= ROWS_ESTIMATED_MAX;
    csv_table_free(&t);
    if (small) {
        char *text = NULL;
        size_t len = 0;
        FILE *out = open_memstream(&text, &len);
        if (!out) abort();
        report_published(out, &db, &zoo, path, FORMAT_TABLE, 0, err, sizeof err);
        fclose(out);
        free(text);
    }
    return 0;
}
