/* Whether a training run learns, judged from the trend of its per-step losses
 * (validator/loss_trend.c): plain C with GSL's Student t quantile, no CUDA. */
#ifndef SEXTANT_LOSS_TREND_H
#define SEXTANT_LOSS_TREND_H

#include <stddef.h>

/* Fewer steps leave too few residuals (n - 2) to estimate the noise from the run itself. */
#define LOSS_TREND_MIN_STEPS 4
/* One-sided false-alarm rate of the slope test: a flat run with independent noise is taken
 * for a learning one once in a hundred. */
#define LOSS_TREND_ALPHA 0.01

typedef enum {
    LOSS_LEARNS,    /* the least-squares slope lies below zero by more than its tolerance */
    LOSS_FLAT,      /* the slope is not below zero by more than the tolerance: flat or rising */
    LOSS_DIVERGED,  /* the last step ends above the first, whatever the trend */
    LOSS_TOO_FEW,   /* fewer than LOSS_TREND_MIN_STEPS steps: not judged */
    LOSS_NOT_FINITE /* a loss is NaN or infinite */
} loss_verdict;

typedef struct {
    loss_verdict verdict;
    int steps;
    double slope;      /* least-squares loss per step (negative: falling) */
    double noise;      /* the residuals' standard deviation about the line: the per-step noise */
    double slope_se;   /* the slope's standard error, noise / sqrt(sum (x - mean x)^2) */
    double t_quantile; /* Student t at 1 - LOSS_TREND_ALPHA with steps - 2 degrees of freedom */
    double tolerance;  /* t_quantile * slope_se: how far below zero the slope must lie */
    double first, last;
} loss_trend;

/* Judges losses[0..n-1] (step 1 to step n); fills *out and returns its verdict. */
loss_verdict loss_trend_judge(const double *losses, int n, loss_trend *out);

/* 1 when the verdict should fail the run: flat, rising, diverged or not finite (too few steps
 * is reported, not failed: a timing run of 3 steps says nothing about learning). */
int loss_trend_fails(const loss_trend *t);

/* The report's one line about the trend, without a newline, into buf. */
void loss_trend_describe(const loss_trend *t, char *buf, size_t size);

#endif
