/* The validator's per-op plot (validator/plot.c), without a GPU: gnuplot
 * draws an SVG with one labelled point per op that has both times, the file
 * appears only when complete, and a failure leaves nothing behind.  Skips
 * (cmocka's skip) where gnuplot is not installed; CI installs gnuplot-nox. */
#include "test_util.h"

#include <sys/stat.h>

#include "plot.h"

static int have_gnuplot(void) { return system("command -v gnuplot >/dev/null 2>&1") == 0; }

static void plot_has_every_op(void **state)
{
    (void)state;
    if (!have_gnuplot()) skip();
    char dir[] = "/tmp/sextant-plot-XXXXXX";
    assert_non_null(mkdtemp(dir));
    char path[256];
    snprintf(path, sizeof path, "%s/ops.svg", dir);
    const char *ops[] = {"qkv", "attention_bwd", "mlp_up", "zero_grads", "step"};
    double predicted[] = {2e-3, 9e-3, 4e-3, -1.0, 0.3};   /* zero_grads: not in the op list */
    double measured[] = {2.2e-3, 7e-3, 4.1e-3, 1e-4, 0.31};
    assert_int_equal(plot_predicted_measured(path, "gpt2 test", ops, predicted, measured, 5), 0);
    char *svg = slurp(path);
    assert_non_null(svg);
    assert_non_null(strstr(svg, "<svg"));
    assert_non_null(strstr(svg, "attention_bwd"));
    assert_non_null(strstr(svg, "mlp_up"));
    assert_non_null(strstr(svg, "gpt2 test"));
    assert_null(strstr(svg, "zero_grads"));          /* no prediction: no point */
    free(svg);
    remove(path);
    assert_int_equal(rmdir(dir), 0); /* nothing but the plot was left in the folder */
}

static void plot_failures_leave_nothing(void **state)
{
    (void)state;
    if (!have_gnuplot()) skip();
    const char *ops[] = {"qkv"};
    double predicted[] = {2e-3}, measured[] = {0.0};
    char dir[] = "/tmp/sextant-plot-XXXXXX";
    assert_non_null(mkdtemp(dir));
    char path[256];
    snprintf(path, sizeof path, "%s/none.svg", dir);
    /* no op with both times */
    assert_int_equal(plot_predicted_measured(path, "t", ops, predicted, measured, 1), 1);
    struct stat st;
    assert_int_not_equal(stat(path, &st), 0);
    /* a folder that does not exist */
    measured[0] = 1e-3;
    assert_int_equal(plot_predicted_measured("/nonexistent-sextant/x.svg", "t", ops, predicted, measured, 1), 1);
    /* a FIFO is not replaced */
    snprintf(path, sizeof path, "%s/fifo.svg", dir);
    assert_int_equal(mkfifo(path, 0600), 0);
    assert_int_equal(plot_predicted_measured(path, "t", ops, predicted, measured, 1), 1);
    assert_int_equal(stat(path, &st), 0);
    assert_true(S_ISFIFO(st.st_mode));
    remove(path);
    /* a quote in the path or title is only a character: the plot is written and nothing runs */
    snprintf(path, sizeof path, "%s/it's\";system(\"touch PWNED\").svg", dir);
    assert_int_equal(plot_predicted_measured(path, "t'\nsystem(\"touch PWNED\")", ops, predicted, measured, 1), 0);
    assert_int_equal(stat(path, &st), 0);
    remove(path);
    assert_int_equal(rmdir(dir), 0); /* nothing else there: no PWNED, no temporary file */
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(plot_has_every_op),
        cmocka_unit_test(plot_failures_leave_nothing),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
