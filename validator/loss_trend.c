/* Whether a training run learns: the trend of its losses, not one noisy step.
 *
 * The rule.  Fit loss = a + b * step by least squares over every step (the first
 * included: it is the loss of the initial weights, the run's starting point).  The
 * residuals about that line give the run's own per-step noise s = sqrt(SSR / (n - 2)),
 * and the slope's standard error is s / sqrt(sum (step - mean step)^2).  The run learns
 * when b < -t * se, t the one-sided Student t quantile at 1 - LOSS_TREND_ALPHA (1%) with
 * n - 2 degrees of freedom: a flat run whose losses scatter independently about a
 * constant passes by chance once in a hundred.  A run whose last loss lies above its
 * first has diverged (it ends worse than the weights it started from), whatever the fit.
 *
 * Why.  The old check asked the last step to lie 1.0 below the first.  A healthy
 * 12-step run at the default learning rate falls about 0.05 a step with step-to-step
 * noise near 0.1 (GPT-2 124M, 2 x H100, 2026-11-25: 10.97 -> 10.47 at step 11, 10.68 at
 * step 12), so one step decided the verdict and a fixed 1.0 was out of its reach.  The
 * slope uses all n steps, and its tolerance scales with the noise measured in the same
 * run, so it needs no constant tuned to a model or a learning rate.  The residuals also
 * hold the curve's bend (the learning-rate warm-up, the plateau), which only enlarges s:
 * the test errs towards calling a run flat, never towards passing a flat one. */
#include "loss_trend.h"

#include <gsl/gsl_cdf.h>
#include <math.h>
#include <stdio.h>

loss_verdict loss_trend_judge(const double *losses, int n, loss_trend *out)
{
    *out = (loss_trend){.verdict = LOSS_TOO_FEW, .steps = n};
    if (n > 0) {
        out->first = losses[0];
        out->last = losses[n - 1];
    }
    for (int i = 0; i < n; i++)
        if (!isfinite(losses[i])) return out->verdict = LOSS_NOT_FINITE;
    if (n < LOSS_TREND_MIN_STEPS) return out->verdict;

    double mean_x = (n + 1) / 2.0, mean_y = 0.0;
    for (int i = 0; i < n; i++) mean_y += losses[i];
    mean_y /= n;
    double sxx = 0.0, sxy = 0.0;
    for (int i = 0; i < n; i++) {
        double dx = (i + 1) - mean_x;
        sxx += dx * dx;
        sxy += dx * (losses[i] - mean_y);
    }
    double slope = sxy / sxx, ssr = 0.0;
    for (int i = 0; i < n; i++) {
        double r = losses[i] - (mean_y + slope * ((i + 1) - mean_x));
        ssr += r * r;
    }
    out->slope = slope;
    out->noise = sqrt(ssr / (n - 2));
    out->slope_se = out->noise / sqrt(sxx);
    out->t_quantile = gsl_cdf_tdist_Pinv(1.0 - LOSS_TREND_ALPHA, n - 2);
    out->tolerance = out->t_quantile * out->slope_se;
    if (out->last > out->first)
        out->verdict = LOSS_DIVERGED;
    else if (slope < -out->tolerance)
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
        snprintf(buf, size, "loss trend: %+.4f per step (noise %.4f, needs < %+.4f: t %.2f x se %.4f)%s", t->slope,
                 t->noise, -t->tolerance, t->t_quantile, t->slope_se,
                 t->verdict == LOSS_LEARNS ? ""
                 : t->verdict == LOSS_DIVERGED ? "   LOSS DIVERGED (last step above the first)"
                                               : "   LOSS DID NOT FALL");
    }
}
