/* A whole-file CSV reader on top of libcsv that remembers which line each
 * row came from, so every loader can name file:line:field in its errors. */
#include "hwdb.h"

#include <csv.h>
#include <errno.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>

typedef struct {
    char **fields;
    int nfields, cap;
    int row_ended;
    int failed;       /* allocation failure inside a callback */
} row_builder;

static void field_cb(void *s, size_t len, void *data)
{
    row_builder *rb = data;
    if (rb->failed) return;
    if (rb->nfields == rb->cap) {
        int cap = rb->cap ? 2 * rb->cap : 16;
        char **grown = realloc(rb->fields, (size_t)cap * sizeof *grown);
        if (!grown) { rb->failed = 1; return; }
        rb->fields = grown;
        rb->cap = cap;
    }
    char *copy = malloc(len + 1);
    if (!copy) { rb->failed = 1; return; }
    if (len) memcpy(copy, s, len);
    copy[len] = '\0';
    rb->fields[rb->nfields++] = copy;
}

static void row_cb(int c, void *data)
{
    (void)c;
    row_builder *rb = data;
    rb->row_ended = 1;
}

static void free_fields(char **fields, int n)
{
    for (int i = 0; i < n; i++) free(fields[i]);
    free(fields);
}

void csv_table_free(csv_table *t)
{
    if (!t) return;
    if (t->header) free_fields(t->header, t->ncols);
    for (int r = 0; r < t->nrows; r++) free_fields(t->cells[r], t->ncols);
    free(t->cells);
    free(t->line);
    memset(t, 0, sizeof *t);
}

/* Takes ownership of the builder's fields as one finished row. */
static int table_take_row(csv_table *t, row_builder *rb, int line, int *row_cap,
                          char *err, size_t errlen)
{
    int is_blank = rb->nfields == 0 || (rb->nfields == 1 && rb->fields[0][0] == '\0');
    int is_comment = rb->nfields > 0 && rb->fields[0][0] == '#';
    if (is_blank || is_comment) {
        free_fields(rb->fields, rb->nfields);
        goto reset;
    }
    if (!t->header) {
        t->header = rb->fields;
        t->ncols = rb->nfields;
        goto reset;
    }
    if (rb->nfields != t->ncols) {
        snprintf(err, errlen, "%s:%d: expected %d fields as in the header, found %d%s", t->path,
                 line, t->ncols, rb->nfields, rb->nfields < t->ncols ? " (truncated row?)" : "");
        free_fields(rb->fields, rb->nfields);
        rb->fields = NULL; rb->nfields = rb->cap = 0;
        return -1;
    }
    if (t->nrows == *row_cap) {
        int cap = *row_cap ? 2 * *row_cap : 32;
        char ***cells = realloc(t->cells, (size_t)cap * sizeof *cells);
        int *lines = realloc(t->line, (size_t)cap * sizeof *lines);
        if (cells) t->cells = cells;
        if (lines) t->line = lines;
        if (!cells || !lines) {
            snprintf(err, errlen, "%s: out of memory", t->path);
            free_fields(rb->fields, rb->nfields);
            rb->fields = NULL; rb->nfields = rb->cap = 0;
            return -1;
        }
        *row_cap = cap;
    }
    t->cells[t->nrows] = rb->fields;
    t->line[t->nrows] = line;
    t->nrows++;
reset:
    rb->fields = NULL;
    rb->nfields = rb->cap = 0;
    rb->row_ended = 0;
    return 0;
}

int csv_table_read(const char *path, csv_table *t, char *err, size_t errlen)
{
    memset(t, 0, sizeof *t);
    snprintf(t->path, sizeof t->path, "%s", path);
    FILE *f = fopen(path, "rb");
    if (!f) {
        snprintf(err, errlen, "%s: cannot open: %s", path, strerror(errno));
        return -1;
    }
    struct stat st;
    if (fstat(fileno(f), &st) == 0 && S_ISDIR(st.st_mode)) {
        fclose(f);
        snprintf(err, errlen, "%s: is a directory, expected a CSV file", path);
        return -1;
    }
    struct csv_parser parser;
    if (csv_init(&parser, CSV_STRICT | CSV_STRICT_FINI | CSV_APPEND_NULL) != 0) {
        fclose(f);
        snprintf(err, errlen, "%s: cannot initialise the CSV parser", path);
        return -1;
    }
    /* libcsv grows a field by blk_size bytes at a time (128 by default): a long field then costs time
     * quadratic in its length, 13 s for 2 MB under ASan.  Larger steps and the CSV_FIELD_MAX limit keep
     * the copying linear: at most 2 * CSV_FIELD_MAX / CSV_BLOCK reallocations of one field. */
    enum { CSV_BLOCK = 64 * 1024 };
    csv_set_blk_size(&parser, CSV_BLOCK);
    row_builder rb = {0};
    int row_cap = 0, line = 0, row_start_line = 1, status = 0;
    char *buf = NULL;
    size_t bufcap = 0;
    ssize_t got;
    /* Feeding libcsv one line at a time lets us know the line a row began on. */
    while ((got = getline(&buf, &bufcap, f)) > 0) {
        line++;
        if (rb.nfields == 0 && !rb.row_ended) row_start_line = line;
        if ((size_t)got > CSV_FIELD_MAX) {
            snprintf(err, errlen, "%s:%d: a line longer than %d bytes (the limit of a field or line)", path, line,
                     CSV_FIELD_MAX);
            status = -1;
            break;
        }
        if (csv_parse(&parser, buf, (size_t)got, field_cb, row_cb, &rb) != (size_t)got) {
            snprintf(err, errlen, "%s:%d: malformed CSV: %s", path, line,
                     csv_strerror(csv_error(&parser)));
            status = -1;
            break;
        }
        if (rb.failed) {
            snprintf(err, errlen, "%s:%d: out of memory", path, line);
            status = -1;
            break;
        }
        /* a quoted field over many short lines: the field is refused once past the limit */
        if (parser.entry_pos > CSV_FIELD_MAX) {
            snprintf(err, errlen, "%s:%d: a field longer than %d bytes (the limit of a field or line)", path,
                     row_start_line, CSV_FIELD_MAX);
            status = -1;
            break;
        }
        if (rb.row_ended && table_take_row(t, &rb, row_start_line, &row_cap, err, errlen) != 0) {
            status = -1;
            break;
        }
    }
    if (status == 0) {
        if (csv_fini(&parser, field_cb, row_cb, &rb) != 0) {
            snprintf(err, errlen, "%s:%d: malformed CSV at end of file: %s", path, row_start_line,
                     csv_strerror(csv_error(&parser)));
            status = -1;
        } else if (rb.failed) {
            snprintf(err, errlen, "%s: out of memory", path);
            status = -1;
        } else if (rb.row_ended || rb.nfields) {
            status = table_take_row(t, &rb, row_start_line, &row_cap, err, errlen);
        }
    }
    if (status == 0 && !t->header) {
        snprintf(err, errlen, "%s:1: empty file, expected a header row", path);
        status = -1;
    }
    free_fields(rb.fields, rb.nfields);
    free(buf);
    csv_free(&parser);
    fclose(f);
    if (status != 0) csv_table_free(t);
    return status;
}

int csv_table_column(const csv_table *t, const char *name)
{
    for (int c = 0; c < t->ncols; c++)
        if (strcmp(t->header[c], name) == 0) return c;
    return -1;
}

const char *csv_table_cell(const csv_table *t, int row, const char *column)
{
    int c = csv_table_column(t, column);
    return c < 0 ? NULL : t->cells[row][c];
}

static const char *cell_or_error(const csv_table *t, int row, const char *column, char *err,
                                 size_t errlen)
{
    const char *text = csv_table_cell(t, row, column);
    if (!text) snprintf(err, errlen, "%s:%d:%s: missing column '%s' in the header", t->path,
                        t->line[row], column, column);
    return text;
}

int csv_get_double(const csv_table *t, int row, const char *column, double min, double max,
                   double *out, char *err, size_t errlen)
{
    const char *text = cell_or_error(t, row, column, err, errlen);
    if (!text) return -1;
    if (!*text) {
        snprintf(err, errlen, "%s:%d:%s: empty, expected a number", t->path, t->line[row], column);
        return -1;
    }
    char *end;
    errno = 0;
    double v = strtod(text, &end);
    if (end == text || *end != '\0' || errno == ERANGE || !isfinite(v)) {
        snprintf(err, errlen, "%s:%d:%s: '%s' is not a finite number", t->path, t->line[row],
                 column, text);
        return -1;
    }
    if (v < min || v > max) {
        snprintf(err, errlen, "%s:%d:%s: %s is outside [%g, %g]", t->path, t->line[row], column,
                 text, min, max);
        return -1;
    }
    *out = v;
    return 0;
}

int csv_get_int64(const csv_table *t, int row, const char *column, int64_t min, int64_t max,
                  int64_t *out, char *err, size_t errlen)
{
    const char *text = cell_or_error(t, row, column, err, errlen);
    if (!text) return -1;
    char *end;
    errno = 0;
    long long v = strtoll(text, &end, 10);
    if (!*text || end == text || *end != '\0' || errno == ERANGE) {
        snprintf(err, errlen, "%s:%d:%s: '%s' is not an integer", t->path, t->line[row], column,
                 text);
        return -1;
    }
    if (v < min || v > max) {
        snprintf(err, errlen, "%s:%d:%s: %lld is outside [%lld, %lld]", t->path, t->line[row],
                 column, v, (long long)min, (long long)max);
        return -1;
    }
    *out = (int64_t)v;
    return 0;
}

int csv_get_string(const csv_table *t, int row, const char *column, int allow_empty, char *out,
                   size_t outlen, char *err, size_t errlen)
{
    const char *text = cell_or_error(t, row, column, err, errlen);
    if (!text) return -1;
    if (!allow_empty && !*text) {
        snprintf(err, errlen, "%s:%d:%s: empty", t->path, t->line[row], column);
        return -1;
    }
    if (strlen(text) >= outlen) {
        snprintf(err, errlen, "%s:%d:%s: longer than %zu characters", t->path, t->line[row],
                 column, outlen - 1);
        return -1;
    }
    memcpy(out, text, strlen(text) + 1);
    return 0;
}
