/* Whether a training run learns: the order of its losses, not one noisy step.
 *
 * The rule (Mann-Kendall's trend test, one-sided, with its exact null distribution).  Count
 * the pairs of steps i < j whose later loss lies below the earlier one: the falls.  If the
 * run did not learn, its losses would be noise about a level, every order of them alike, and
 * the falls would be the inversions of a random permutation, whose distribution is known
 * exactly (the Mahonian numbers: the count of permutations of n with k inversions).  The run
 * learns when so many pairs fall that random order gives as many at most once in a hundred
 * (LOSS_TREND_ALPHA), and its last loss is not above its first: a run that ends worse than the
 * weights it started from has diverged, whatever the order before.  Ties count as neither a
 * fall nor a rise, which can only lower the falls: conservative.
 *
 * Why not a line.  The rule before this one fitted loss = a + b step by least squares and asked
 * b to lie below zero by t times its standard error, the noise taken from the residuals: a
 * Student t test, exact only for Gaussian noise.  A training run's losses are not: one batch in a
 * few gives a spike.  GPT-2 large on 2 x H200, 2026-11-26, steps 1-12: 11.10 10.86 10.75 10.66 10.52
 * 10.49 11.36 10.51 10.34 10.21 10.47 10.12 (docs/validation/2026-11-26-h200x2-cpep): step 7 alone
 * lies above the start, and its squared residual makes most of the "noise" (0.28 a step), so the
 * line's -0.064 per step fell short of the -0.065 it then needed and validate failed a run that
 * learns (TP 2 there and on 2 x H100, 2026-11-26-h100x2-unseen; one GPU passed by 0.001-0.002).  Counting
 * falls weighs a spike as one rank out of place, whatever its height: p = 2.5e-4 and 4.9e-4 for
 * those two runs.  The price: on a straight fall in Gaussian noise it keeps 3/pi = 95.5% of the
 * line's power (its asymptotic relative efficiency); with one spike in twelve steps it keeps more
 * (tests/test_loss_trend.c draws both).  All 56 per-step loss files under
 * docs/validation and tests/data before this change learn under it with p below 3e-6. */
#include "loss_trend.h"

#include <math.h>
#include <stdio.h>
#include <stdlib.h>

/* P(inversions >= falls) for a random permutation of n, from the Mahonian distribution built one
 * length at a time: a permutation of m is one of m - 1 with the new last value placed among the
 * m ranks, adding 0 .. m - 1 inversions alike, so p_m(k) = (1/m) sum_{j<m} p_{m-1}(k - j), a
 * sliding window over p_{m-1}.  Returns -1 when the tables cannot be had. */
static double exact_upper_tail(int n, long falls)
{
    long size = (long)n * (n - 1) / 2 + 1;
    double *p = malloc((size_t)size * sizeof *p), *q = malloc((size_t)size * sizeof *q);
    if (!p || !q) {
        free(p);
        free(q);
        return -1.0;
    }
    p[0] = 1.0;
    long top = 0; /* the largest inversion count of length m - 1 */
    for (int m = 2; m <= n; m++) {
        long new_top = top + m - 1;
        double window = 0.0;
        for (long k = 0; k <= new_top; k++) {
            if (k <= top) window += p[k];
            if (k - m >= 0) window -= p[k - m];
            q[k] = window / m;
        }
        double *t = p;
        p = q;
        q = t;
        top = new_top;
    }
    double tail = 0.0;
    for (long k = top; k >= falls && k >= 0; k--) tail += p[k];
    free(p);
    free(q);
    return tail < 1.0 ? tail : 1.0;
}

double loss_trend_falls_p_value(int n, long falls)
{
    if (n < 2 || falls <= 0) return 1.0;
    long pairs = (long)n * (n - 1) / 2;
    if (falls > pairs) return 0.0;
    if (n <= LOSS_TREND_EXACT_MAX) {
        double exact = exact_upper_tail(n, falls);
        if (exact >= 0.0) return exact;
    }
    /* inversions of a random permutation: mean pairs / 2, variance n (n - 1) (2n + 5) / 72 */
    double sd = sqrt((double)n * (n - 1) * (2.0 * n + 5.0) / 72.0);
    double z = (falls - 0.5 - pairs / 2.0) / sd;
    return 0.5 * erfc(z / sqrt(2.0));
}

static double least_squares_slope(const double *losses, int n)
{
    double mean_x = (n + 1) / 2.0, mean_y = 0.0, sxx = 0.0, sxy = 0.0;
    for (int i = 0; i < n; i++) mean_y += losses[i];
    mean_y /= n;
    for (int i = 0; i < n; i++) {
        double dx = (i + 1) - mean_x;
        sxx += dx * dx;
        sxy += dx * (losses[i] - mean_y);
    }
    return sxx > 0.0 ? sxy / sxx : 0.0;
}

loss_verdict loss_trend_judge(const double *losses, int n, loss_trend *out)
{
    *out = (loss_trend){.verdict = LOSS_TOO_FEW, .steps = n, .p_value = 1.0};
    if (n > 0) {
        out->first = losses[0];
        out->last = losses[n - 1];
    }
    for (int i = 0; i < n; i++)
        if (!isfinite(losses[i])) return out->verdict = LOSS_NOT_FINITE;
    if (n < LOSS_TREND_MIN_STEPS) return out->verdict;

    for (int i = 0; i < n; i++)
        for (int j = i + 1; j < n; j++) {
            out->falls += losses[j] < losses[i];
            out->rises += losses[j] > losses[i];
        }
    out->pairs = (long)n * (n - 1) / 2;
    out->slope = least_squares_slope(losses, n);
    out->p_value = loss_trend_falls_p_value(n, out->falls);
    if (out->last > out->first)
        out->verdict = LOSS_DIVERGED;
    else if (out->p_value < LOSS_TREND_ALPHA)
        out->verdict = LOSS_LEARNS;
    else
        out->verdict = LOSS_FLAT;
    return out->verdict;
}

int loss_trend_fails(const loss_trend *t)
{
    return t->verdict != LOSS_LEARNS && t->verdict != LOSS_TOO_FEW;
}

void loss_trend_describe(const loss_trend *t, char *buf, size_t size)
{
    switch (t->verdict) {
    case LOSS_TOO_FEW:
        snprintf(buf, size, "loss trend: not judged (%d step%s; the check needs %d)", t->steps, t->steps == 1 ? "" : "s",
                 LOSS_TREND_MIN_STEPS);
        break;
    case LOSS_NOT_FINITE:
        snprintf(buf, size, "loss trend: LOSS NOT FINITE");
        break;
    default:
        snprintf(buf, size, "loss trend: %+.4f per step; %ld of %ld step pairs fall, %ld rise (random order: p %.2g, needs < %.2g)%s",
                 t->slope, t->falls, t->pairs, t->rises, t->p_value, LOSS_TREND_ALPHA,
                 t->verdict == LOSS_LEARNS ? ""
                 : t->verdict == LOSS_DIVERGED ? "   LOSS DIVERGED (last step above the first)"
                                               : "   LOSS DID NOT FALL");
    }
}
