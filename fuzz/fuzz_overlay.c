/* Fuzz target: CSV table reading and the hardware database.  The bytes are read
 * as a CSV table (every cell through the field parsers), as a calibration
 * overlay over the shipped hwdb/ (then one small estimate on each GPU it
 * touched), and as gpus.csv and nodes.csv of a database beside the shipped one. */
#include "fuzz_util.h"

#include <sys/stat.h>

static hwdb base;            /* hwdb/ as shipped, loaded once; each input works on a copy */
static model_zoo zoo;
static char dir[64];         /* a database directory whose gpus.csv or nodes.csv is the input */

static void copy_file(const char *from, const char *to)
{
    FILE *in = fopen(from, "rb"), *out = fopen(to, "wb");
    if (!in || !out) abort();
    char buf[8192];
    size_t n;
    while ((n = fread(buf, 1, sizeof buf, in)) > 0)
        if (fwrite(buf, 1, n, out) != n) abort();
    fclose(in);
    if (fclose(out) != 0) abort();
}

static void remove_dir(void)
{
    char path[128];
    const char *names[] = {"gpus.csv", "nodes.csv"};
    for (int i = 0; i < 2; i++) {
        snprintf(path, sizeof path, "%s/%s", dir, names[i]);
        unlink(path);
    }
    rmdir(dir);
}

static void setup(void)
{
    char err[1024];
    if (hwdb_load(SEXTANT_ROOT "/hwdb", &base, err, sizeof err) != 0) { fprintf(stderr, "%s\n", err); abort(); }
    if (model_zoo_load(SEXTANT_ROOT "/models/zoo.csv", &zoo, err, sizeof err) != 0) { fprintf(stderr, "%s\n", err); abort(); }
    snprintf(dir, sizeof dir, "/tmp/sextant-fuzz-hwdb-XXXXXX");
    if (!mkdtemp(dir)) abort();
    atexit(remove_dir);
}

/* Every cell through the parsers every loader uses. */
static void parse_cells(const char *path)
{
    csv_table t;
    char err[1024], text[256];
    if (csv_table_read(path, &t, err, sizeof err) != 0) return;
    for (int r = 0; r < t.nrows; r++)
        for (int c = 0; c < t.ncols; c++) {
            double d;
            int64_t i;
            csv_get_double(&t, r, t.header[c], -1e300, 1e300, &d, err, sizeof err);
            csv_get_int64(&t, r, t.header[c], INT64_MIN, INT64_MAX, &i, err, sizeof err);
            csv_get_string(&t, r, t.header[c], 0, text, sizeof text, err, sizeof err);
        }
    csv_table_column(&t, "gpu");
    if (t.nrows > 0) csv_table_cell(&t, t.nrows - 1, "key");
    csv_table_free(&t);
}

static void apply_overlay(const char *path)
{
    hwdb db = base;
    db.gpus = malloc(sizeof *db.gpus * (size_t)base.ngpus);
    db.nodes = malloc(sizeof *db.nodes * (size_t)base.nnodes);
    if (!db.gpus || !db.nodes) abort();
    memcpy(db.gpus, base.gpus, sizeof *db.gpus * (size_t)base.ngpus);
    memcpy(db.nodes, base.nodes, sizeof *db.nodes * (size_t)base.nnodes);
    char err[1024], names[1024];
    hwdb_overlay_gpus(path, names, sizeof names, err, sizeof err);
    if (hwdb_apply_overlay(&db, path, err, sizeof err) == 0) {
        const model_t *gpt2 = model_zoo_find(&zoo, "gpt2");
        for (int i = 0; i < db.ngpus; i++)
            if (memcmp(&db.gpus[i], &base.gpus[i], sizeof db.gpus[i]) != 0)
                fuzz_estimate_small(gpt2, &db.gpus[i], hwdb_find_node(&db, db.gpus[i].node));
    }
    hwdb_free(&db);
}

/* The input as one file of a database whose other file is the shipped one. */
static void load_as(const char *path, const char *name, const char *other)
{
    char to[128], from[128];
    snprintf(to, sizeof to, "%s/%s", dir, name);
    if (rename(path, to) != 0) abort();
    snprintf(to, sizeof to, "%s/%s", dir, other);
    snprintf(from, sizeof from, "%s/hwdb/%s", SEXTANT_ROOT, other);
    copy_file(from, to);
    hwdb db;
    char err[1024];
    if (hwdb_load_datasheets(dir, &db, err, sizeof err) == 0) {
        const model_t *gpt2 = model_zoo_find(&zoo, "gpt2");
        for (int i = 0; i < db.ngpus && i < 4; i++)
            fuzz_estimate_small(gpt2, &db.gpus[i], hwdb_find_node(&db, db.gpus[i].node));
        hwdb_free(&db);
    }
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
    if (!base.gpus) setup();
    const char *path = fuzz_file(data, size, ".csv");
    parse_cells(path);
    apply_overlay(path);
    load_as(path, "gpus.csv", "nodes.csv");
    path = fuzz_file(data, size, ".csv");
    load_as(path, "nodes.csv", "gpus.csv");
    return 0;
}
