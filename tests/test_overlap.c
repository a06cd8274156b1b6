/* calibrate --comm's overlap measurement on the CPU (validator/overlap_report.c):
 * the shape flag, the summary of the cells, the CSV, and overlay rows that the
 * hwdb loads into the planner's fields. */
#include "test_util.h"

#include "hwdb.h"
#include "overlap.h"

static void shapes_parse(void **state)
{
    (void)state;
    overlap_shape s;
    assert_int_equal(overlap_parse_shape("8192x4096x1024", &s), 0);
    assert_true(s.m == 8192 && s.n == 4096 && s.k == 1024);
    assert_int_equal(overlap_parse_shape("1x1x131072", &s), 0);
    assert_true(s.k == 131072);
    const char *bad[] = {"", "8192", "8192x8192", "8192x8192x8192x1", "0x8192x8192", "8192x-1x8192", "axbxc",
                         "8192x8192x8192 ", "8192X8192X8192", "8192x8192x131073", "x8192x8192", "8192xx8192"};
    for (size_t i = 0; i < sizeof bad / sizeof bad[0]; i++)
        if (overlap_parse_shape(bad[i], &s) == 0) {
            print_error("'%s' parsed as a shape\n", bad[i]);
            fail();
        }
    /* the defaults are shapes the flag itself would take, and sizes of whole MiB */
    overlap_options o;
    overlap_default_options(&o);
    assert_true(o.enabled && o.nshapes >= 2 && o.nshapes <= OVERLAP_MAX_SHAPES && o.repeats >= 3);
    assert_true(o.nsizes >= 1 && o.nsizes <= OVERLAP_MAX_SIZES);
    for (int g = 0; g < o.nshapes; g++) {
        char text[64];
        snprintf(text, sizeof text, "%lldx%lldx%lld", o.shape[g].m, o.shape[g].n, o.shape[g].k);
        assert_int_equal(overlap_parse_shape(text, &s), 0);
    }
    for (int b = 0; b < o.nsizes; b++) assert_true(o.bytes[b] >= (1u << 20) && o.bytes[b] % (1u << 20) == 0);
}

/* Results whose cells have GEMM slowdown gemm[k][cell] and collective slowdown
 * coll[k][cell] (cells: shape-major over 2 shapes x 2 sizes), from made-up
 * alone times. */
static void make_results(overlap_results *r, const double gemm[OVERLAP_KINDS][4], const double coll[OVERLAP_KINDS][4])
{
    memset(r, 0, sizeof *r);
    r->ranks = 2;
    overlap_default_options(&r->o);
    r->o.nshapes = 2;
    r->o.nsizes = 2;
    r->o.classes = 0;
    for (int g = 0; g < 2; g++)
        for (int k = 0; k < OVERLAP_KINDS; k++)
            for (int b = 0; b < 2; b++) {
                overlap_cell *c = &r->cell[g][k][b];
                int i = 2 * g + b;
                double ga = 1e-3 * (1 + g), ca = 2e-4 * (1 + b);
                *c = (overlap_cell){1, 1, ga, ga * (1 + gemm[k][i]), ca, ca * (1 + coll[k][i]),
                                    gemm[k][i] - 0.01, gemm[k][i] + 0.01, coll[k][i] - 0.02, coll[k][i] + 0.02};
            }
}

static void summary_is_the_median_of_measured_cells(void **state)
{
    (void)state;
    const double gemm[OVERLAP_KINDS][4] = {{0.10, 0.30, 0.20, 0.90}, {0.05, 0.07, 0.02, 0.04}, {0.15, 0.11, 0.13, 0.12}};
    const double coll[OVERLAP_KINDS][4] = {{0.5, 0.6, 0.7, 0.8}, {0.1, 0.2, 0.3, 0.4}, {1.0, 1.1, 1.2, 1.3}};
    overlap_results r;
    make_results(&r, gemm, coll);
    /* one all-gather cell not measured: its 0.90 must not count */
    r.cell[1][OVERLAP_AG][1].measured = 0;
    overlap_summary s;
    overlap_summarise(&r, &s);
    assert_int_equal(s.cells[OVERLAP_AG], 3);
    assert_int_equal(s.cells[OVERLAP_RS], 4);
    assert_true(s.have_compute[OVERLAP_AG] && s.have_compute[OVERLAP_RS] && s.have_compute[OVERLAP_AR] && s.have_comm);
    assert_close(s.compute[OVERLAP_AG], 0.20, 1e-12);            /* 0.10 0.20 0.30 */
    assert_close(s.compute[OVERLAP_RS], 0.5 * (0.04 + 0.05), 1e-12); /* 0.02 0.04 0.05 0.07 */
    assert_close(s.compute[OVERLAP_AR], 0.5 * (0.12 + 0.13), 1e-12);
    /* the collective's over the 11 measured cells of every kind: 0.1 .. 0.4, 0.5 0.6 0.7, 1.0 .. 1.3 */
    assert_close(s.comm, 0.6, 1e-12);
    assert_close(overlap_gemm_slowdown(&r.cell[0][OVERLAP_AR][1]), 0.11, 1e-12);

    /* a kind with nothing measured has no figure */
    for (int g = 0; g < 2; g++)
        for (int b = 0; b < 2; b++) r.cell[g][OVERLAP_RS][b].measured = 0;
    overlap_summarise(&r, &s);
    assert_false(s.have_compute[OVERLAP_RS]);
    assert_int_equal(s.cells[OVERLAP_RS], 0);

    /* the table names every cell and the medians */
    char path[] = "/tmp/sextant-overlap-XXXXXX";
    write_temp(path, "");
    FILE *f = fopen(path, "w");
    overlap_print(f, &r, &s);
    fclose(f);
    char *text = slurp(path);
    assert_non_null(strstr(text, "not measured"));
    assert_non_null(strstr(text, "4096x3072x768"));
    assert_non_null(strstr(text, "GEMM beside all_gather +20.0%"));
    free(text);
    unlink(path);
}

static void csv_has_a_row_per_cell(void **state)
{
    (void)state;
    const double gemm[OVERLAP_KINDS][4] = {{0.1, 0.2, 0.3, 0.4}, {0.1, 0.2, 0.3, 0.4}, {0.1, 0.2, 0.3, 0.4}};
    const double coll[OVERLAP_KINDS][4] = {{0.5, 0.6, 0.7, 0.8}, {0.5, 0.6, 0.7, 0.8}, {0.5, 0.6, 0.7, 0.8}};
    overlap_results r;
    make_results(&r, gemm, coll);
    r.cell[0][OVERLAP_RS][0].measured = 0;
    char path[] = "/tmp/sextant-overlap-XXXXXX";
    write_temp(path, "");
    assert_int_equal(overlap_write_csv(path, &r), 0);
    csv_table t;
    char err[512];
    assert_int_equal(csv_table_read(path, &t, err, sizeof err), 0);
    assert_int_equal(t.nrows, 2 * OVERLAP_KINDS * 2);
    assert_int_equal(t.ncols, 21);
    int unmeasured = 0;
    for (int row = 0; row < t.nrows; row++) {
        if (!strcmp(csv_table_cell(&t, row, "measured"), "0")) {
            unmeasured++;
            assert_string_equal(csv_table_cell(&t, row, "collective"), "reduce_scatter");
            assert_string_equal(csv_table_cell(&t, row, "gemm_slowdown"), "");
            continue;
        }
        double us, slow;
        assert_int_equal(csv_get_double(&t, row, "gemm_alone_us", 0, 1e9, &us, err, sizeof err), 0);
        assert_int_equal(csv_get_double(&t, row, "gemm_slowdown", -1, 10, &slow, err, sizeof err), 0);
        assert_true(us == 1000.0 || us == 2000.0);
        assert_true(slow > 0.05 && slow < 0.45);
    }
    assert_int_equal(unmeasured, 1);
    /* the first row: shape 0, all-gather, the first size */
    assert_string_equal(csv_table_cell(&t, 0, "victim"), "gemm");
    assert_string_equal(csv_table_cell(&t, 0, "m"), "4096");
    assert_string_equal(csv_table_cell(&t, 0, "collective"), "all_gather");
    assert_string_equal(csv_table_cell(&t, 0, "bytes"), "4194304");
    assert_string_equal(csv_table_cell(&t, 0, "gemm_slowdown"), "0.10000");
    csv_table_free(&t);
    unlink(path);
    assert_int_equal(overlap_write_csv("/nonexistent-dir/overlap.csv", &r), -1);
}

/* Writes the rows after a header to a temporary overlay and applies it to a fresh hwdb. */
static int apply_rows(hwdb *hw, const overlap_results *r, const overlap_summary *s, int *written)
{
    char path[] = "/tmp/sextant-overlay-XXXXXX", err[512];
    write_temp(path, "");
    FILE *f = fopen(path, "w");
    fprintf(f, "gpu,key,value,source\n");
    *written = overlap_write_overlay_rows(f, "h100-sxm",
                                          "sextant-gpu calibrate --comm 2026-11-26 on 2 x NVIDIA H100 80GB HBM3, NCCL 2.28.3",
                                          r, s);
    fclose(f);
    int rc = hwdb_apply_overlay(hw, path, err, sizeof err);
    if (rc) print_error("%s\n", err);
    unlink(path);
    return rc;
}

static void overlay_rows_load_into_the_hwdb(void **state)
{
    (void)state;
    const double gemm[OVERLAP_KINDS][4] = {{0.10, 0.14, 0.12, 0.13}, {0.08, 0.09, 0.07, 0.10}, {0.15, 0.11, 0.13, 0.12}};
    const double coll[OVERLAP_KINDS][4] = {{0.5, 0.6, 0.7, 0.8}, {0.1, 0.2, 0.3, 0.4}, {1.0, 1.1, 1.2, 1.3}};
    overlap_results r;
    make_results(&r, gemm, coll);
    /* the longest shapes the flag takes: the source must still fit the hwdb's */
    r.o.nshapes = OVERLAP_MAX_SHAPES;
    r.o.nsizes = OVERLAP_MAX_SIZES;
    for (int g = 0; g < OVERLAP_MAX_SHAPES; g++) r.o.shape[g] = (overlap_shape){131072, 131072, 131072};
    for (int b = 0; b < OVERLAP_MAX_SIZES; b++) r.o.bytes[b] = (size_t)65536 << 20;
    overlap_summary s;
    overlap_summarise(&r, &s);
    hwdb hw;
    char err[512];
    assert_int_equal(hwdb_load(SEXTANT_ROOT "/hwdb", &hw, err, sizeof err), 0);
    int written;
    assert_int_equal(apply_rows(&hw, &r, &s, &written), 0);
    assert_int_equal(written, 4);
    const hw_gpu *g = hwdb_find_gpu(&hw, "h100-sxm");
    /* four decimals in the file */
    assert_true(fabs(g->overlap_compute_slowdown_allgather - s.compute[OVERLAP_AG]) < 1e-4);
    assert_true(fabs(g->overlap_compute_slowdown_reducescatter - s.compute[OVERLAP_RS]) < 1e-4);
    assert_true(fabs(g->overlap_compute_slowdown_allreduce - s.compute[OVERLAP_AR]) < 1e-4);
    assert_true(fabs(g->overlap_comm_slowdown - s.comm) < 1e-4);
    assert_true(g->overlap_compute_slowdown_allgather > 0.1);
    assert_non_null(strstr(g->calibration, "calibrate --comm"));
    hwdb_free(&hw);

    /* no measurable slowdown is written as the resolution, never as 0 ("not
     * measured"); one beyond a key's range is left out, as a comment */
    s.compute[OVERLAP_AG] = -0.004;
    s.compute[OVERLAP_RS] = 1.6;
    s.have_compute[OVERLAP_AR] = 0;
    s.comm = 12.0;
    assert_int_equal(hwdb_load(SEXTANT_ROOT "/hwdb", &hw, err, sizeof err), 0);
    assert_int_equal(apply_rows(&hw, &r, &s, &written), 0);
    assert_int_equal(written, 1);
    g = hwdb_find_gpu(&hw, "h100-sxm");
    assert_close(g->overlap_compute_slowdown_allgather, OVERLAP_RESOLUTION, 1e-12);
    /* the keys the overlay did not write keep hwdb/priors.csv's values */
    assert_true(g->overlap_compute_slowdown_reducescatter == 0.361);
    assert_true(g->overlap_compute_slowdown_allreduce == 0.499);
    assert_true(g->overlap_comm_slowdown == 0.545);
    hwdb_free(&hw);
}

/* The step's other compute beside the collectives: each half of a class's cell counts on its own (a collective
 * starved beside attention may outlast every window while the attention's own half was measured), the medians go
 * over every kind and size, and the rows load into the hwdb's fields. */
static void classes_summarise_and_load(void **state)
{
    (void)state;
    const double gemm[OVERLAP_KINDS][4] = {{0.4, 0.4, 0.4, 0.4}, {0.3, 0.3, 0.3, 0.3}, {0.5, 0.5, 0.5, 0.5}};
    const double coll[OVERLAP_KINDS][4] = {{0.5, 0.5, 0.5, 0.5}, {0.5, 0.5, 0.5, 0.5}, {0.5, 0.5, 0.5, 0.5}};
    overlap_results r;
    make_results(&r, gemm, coll);
    r.o.classes = 1;
    for (int v = 0; v < OVERLAP_CLASSES; v++)
        for (int k = 0; k < OVERLAP_KINDS; k++)
            for (int b = 0; b < 2; b++) {
                double x = 0.05 * (v + 1) + 0.01 * (k + b), y = 1.0 + v + 0.1 * k;
                r.class_cell[v][k][b] = (overlap_cell){1, 1, 1e-3, 1e-3 * (1 + x), 1e-4, 1e-4 * (1 + y), x, x, y, y};
            }
    /* attention's collective never covered at the first size: its compute half still counts */
    for (int k = 0; k < OVERLAP_KINDS; k++) r.class_cell[VICTIM_ATTENTION][k][0].coll_measured = 0;
    /* the experts measured at one cell only */
    for (int k = 0; k < OVERLAP_KINDS; k++)
        for (int b = 0; b < 2; b++) {
            overlap_cell *c = &r.class_cell[VICTIM_EXPERTS][k][b];
            c->measured = c->coll_measured = k == 1 && b == 1;
        }
    overlap_summary s;
    overlap_summarise(&r, &s);
    assert_int_equal(s.class_cells[VICTIM_ATTENTION], 6);
    assert_int_equal(s.class_comm_cells[VICTIM_ATTENTION], 3);
    assert_int_equal(s.class_cells[VICTIM_EXPERTS], 1);
    assert_close(s.class_compute[VICTIM_EXPERTS], 0.05 + 0.02, 1e-12);
    /* attention: 0.10 + {0, .01, .01, .02, .02, .03}: the median of six, 0.115; its collective 2.0 2.1 2.2 */
    assert_close(s.class_compute[VICTIM_ATTENTION], 0.115, 1e-12);
    assert_close(s.class_comm[VICTIM_ATTENTION], 2.1, 1e-12);
    assert_close(s.class_compute[VICTIM_MEMBOUND], 0.20 + 0.015, 1e-12);
    /* the GEMMs' keys do not move for the classes */
    assert_close(s.compute[OVERLAP_AG], 0.4, 1e-12);
    assert_close(s.comm, 0.5, 1e-12);
    hwdb hw;
    char err[512];
    assert_int_equal(hwdb_load(SEXTANT_ROOT "/hwdb", &hw, err, sizeof err), 0);
    int written;
    assert_int_equal(apply_rows(&hw, &r, &s, &written), 0);
    /* only the experts' figure is a key; the others are comment rows the loader skips */
    assert_int_equal(written, 4 + 1);
    const hw_gpu *g = hwdb_find_gpu(&hw, "h100-sxm");
    assert_true(fabs(g->overlap_compute_slowdown_experts - 0.07) < 1e-4);
    hwdb_free(&hw);
    /* the table and the CSV carry the classes' rows */
    char path[] = "/tmp/sextant-overlap-XXXXXX";
    write_temp(path, "");
    assert_int_equal(overlap_write_csv(path, &r), 0);
    csv_table t;
    assert_int_equal(csv_table_read(path, &t, err, sizeof err), 0);
    assert_int_equal(t.nrows, 2 * OVERLAP_KINDS * 2 + OVERLAP_CLASSES * OVERLAP_KINDS * 2);
    assert_string_equal(csv_table_cell(&t, 2 * OVERLAP_KINDS * 2, "victim"), "experts");
    assert_string_equal(csv_table_cell(&t, 2 * OVERLAP_KINDS * 2, "measured"), "0");
    csv_table_free(&t);
    FILE *f = fopen(path, "w");
    overlap_print(f, &r, &s);
    fclose(f);
    char *text = slurp(path);
    assert_non_null(strstr(text, "attn bwd 4096x16x128"));
    assert_non_null(strstr(text, "attention +11.5% beside a collective (6 cells), the collective +210.0% beside them (3 cells)"));
    free(text);
    unlink(path);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(shapes_parse),
        cmocka_unit_test(summary_is_the_median_of_measured_cells),
        cmocka_unit_test(csv_has_a_row_per_cell),
        cmocka_unit_test(overlay_rows_load_into_the_hwdb),
        cmocka_unit_test(classes_summarise_and_load),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
