/* validator/loss_trend.c: whether a run learns, from the trend of its losses.
 *  - the measured 12-step runs that the old last-step check failed (2 x H100,
 *    2026-11-25) learn;
 *  - losses falling 0.05 a step under noise of 0.1 a step learn in nearly every draw;
 *  - flat losses under the same noise pass about as often as the test's 1% says, never
 *    much more; rising losses never pass;
 *  - a run ending above its first loss has diverged; NaN fails; too few steps are
 *    reported as not judged and do not fail. */
#include "test_util.h"

#include "loss_trend.h"

/* docs/validation/h100x2-zero-2026-11-25/run-before/eq_gpt2_1gpu.txt and eq_llama3.2-1b_1gpu.txt */
static const double gpt2_run[12] = {10.973682, 10.934552, 10.834189, 10.804847, 10.789128, 10.732655,
                                    10.703500, 10.658951, 10.591540, 10.492986, 10.472055, 10.677390};
static const double llama_run[12] = {12.158895, 12.179342, 12.079059, 12.097864, 12.085378, 12.022740,
                                     11.977098, 11.994388, 11.850904, 11.786665, 11.502942, 11.351553};

/* a reproducible standard normal (xorshift64 + Box-Muller) */
static double normal(unsigned long long *state)
{
    double u[2];
    for (int k = 0; k < 2; k++) {
        *state ^= *state << 13;
        *state ^= *state >> 7;
        *state ^= *state << 17;
        u[k] = ((*state >> 11) + 0.5) / 9007199254740992.0;
    }
    return sqrt(-2.0 * log(u[0])) * cos(6.283185307179586 * u[1]);
}

/* how many of `draws` runs of n steps, loss 11 + slope * step + noise, are judged to learn */
static int learning_draws(int draws, int n, double slope, double noise)
{
    unsigned long long state = 0x9e3779b97f4a7c15ull;
    double losses[64];
    int learned = 0;
    for (int d = 0; d < draws; d++) {
        for (int i = 0; i < n; i++) losses[i] = 11.0 + slope * (i + 1) + noise * normal(&state);
        loss_trend t;
        learned += loss_trend_judge(losses, n, &t) == LOSS_LEARNS;
    }
    return learned;
}

static void measured_runs_learn(void **state)
{
    (void)state;
    loss_trend t;
    assert_int_equal(loss_trend_judge(gpt2_run, 12, &t), LOSS_LEARNS);
    assert_true(t.slope < -t.tolerance && t.tolerance > 0);
    assert_false(loss_trend_fails(&t));
    assert_int_equal(loss_trend_judge(llama_run, 12, &t), LOSS_LEARNS);
    /* the old rule (last step 1.0 below the first) failed both */
    assert_false(gpt2_run[11] < gpt2_run[0] - 1.0);
    assert_false(llama_run[11] < llama_run[0] - 1.0);
}

static void noisy_fall_learns(void **state)
{
    (void)state;
    int learned = learning_draws(1000, 12, -0.05, 0.1);
    if (learned < 980) fail_msg("a fall of 0.05 a step under noise 0.1 learned in %d of 1000 draws", learned);
}

static void flat_and_rising_fail(void **state)
{
    (void)state;
    /* flat: the 1% false-alarm rate, with room for the draws' own scatter (sd ~3 of 1000) */
    int flat = learning_draws(1000, 12, 0.0, 0.1);
    if (flat > 25) fail_msg("flat losses passed in %d of 1000 draws (the test's rate is 1%%)", flat);
    assert_int_equal(learning_draws(1000, 12, +0.05, 0.1), 0);
    double constant[8] = {10, 10, 10, 10, 10, 10, 10, 10};
    loss_trend t;
    assert_int_equal(loss_trend_judge(constant, 8, &t), LOSS_FLAT);
    assert_true(loss_trend_fails(&t));
    char line[256];
    loss_trend_describe(&t, line, sizeof line);
    assert_non_null(strstr(line, "LOSS DID NOT FALL"));
    double steady[6] = {11.0, 10.9, 10.8, 10.7, 10.6, 10.5};
    assert_int_equal(loss_trend_judge(steady, 6, &t), LOSS_LEARNS);
    assert_close(t.slope, -0.1, 1e-9);
    loss_trend_describe(&t, line, sizeof line);
    assert_null(strstr(line, "LOSS"));
}

static void diverged_and_nan_fail(void **state)
{
    (void)state;
    /* falls to the unigram plateau, then spikes above the start (docs/validation/h100-embedding-2026-11-23) */
    double spike[10] = {10.98, 10.2, 9.6, 9.2, 8.9, 8.9, 8.88, 8.87, 8.9, 14.24};
    loss_trend t;
    assert_int_equal(loss_trend_judge(spike, 10, &t), LOSS_DIVERGED);
    assert_true(loss_trend_fails(&t));
    char line[256];
    loss_trend_describe(&t, line, sizeof line);
    assert_non_null(strstr(line, "DIVERGED"));
    double nan_run[5] = {11, 10.9, NAN, 10.7, 10.6};
    assert_int_equal(loss_trend_judge(nan_run, 5, &t), LOSS_NOT_FINITE);
    assert_true(loss_trend_fails(&t));
}

static void too_few_steps_say_so(void **state)
{
    (void)state;
    double three[3] = {11.0, 10.0, 9.0};
    loss_trend t;
    assert_int_equal(loss_trend_judge(three, 3, &t), LOSS_TOO_FEW);
    assert_false(loss_trend_fails(&t));
    char line[256];
    loss_trend_describe(&t, line, sizeof line);
    assert_non_null(strstr(line, "not judged (3 steps; the check needs 4)"));
    assert_int_equal(loss_trend_judge(three, 0, &t), LOSS_TOO_FEW);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(measured_runs_learn),
        cmocka_unit_test(noisy_fall_learns),
        cmocka_unit_test(flat_and_rising_fail),
        cmocka_unit_test(diverged_and_nan_fail),
        cmocka_unit_test(too_few_steps_say_so),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
