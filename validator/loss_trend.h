/* Whether a training run learns, judged from the order of its per-step losses
 * (validator/loss_trend.c): plain C, no CUDA, no library beyond libm. */
#ifndef SEXTANT_LOSS_TREND_H
#define SEXTANT_LOSS_TREND_H

#include <stddef.h>

/* The fewest steps whose order can reach LOSS_TREND_ALPHA: 5 losses in falling order happen by
 * chance once in 5! = 120 runs; 4 (once in 24) never could. */
#define LOSS_TREND_MIN_STEPS 5
/* One-sided false-alarm rate: a run whose losses are exchangeable noise (no trend) is taken for a
 * learning one at most once in a hundred. */
#define LOSS_TREND_ALPHA 0.01
/* Up to this many steps the null distribution is exact (Mahonian numbers, O(n^3 / 6) work); beyond,
 * the normal approximation, within 1e-3 of it at that size. */
#define LOSS_TREND_EXACT_MAX 400

typedef enum {
    LOSS_LEARNS,    /* later losses lie below earlier ones in more pairs than chance gives (p < alpha) */
    LOSS_FLAT,      /* not: flat, rising, or too little order for the steps run */
    LOSS_DIVERGED,  /* the last step ends above the first, whatever the order */
    LOSS_TOO_FEW,   /* fewer than LOSS_TREND_MIN_STEPS steps: not judged */
    LOSS_NOT_FINITE /* a loss is NaN or infinite */
} loss_verdict;

typedef struct {
    loss_verdict verdict;
    int steps;
    double slope;   /* least-squares loss per step (negative: falling), reported, not judged */
    long falls;     /* pairs of steps i < j with loss j below loss i */
    long rises;     /* pairs with loss j above loss i (ties count in neither) */
    long pairs;     /* n (n - 1) / 2 */
    double p_value; /* chance of at least `falls` falling pairs if the losses were in random order */
    double first, last;
} loss_trend;

/* Judges losses[0..n-1] (step 1 to step n); fills *out and returns its verdict. */
loss_verdict loss_trend_judge(const double *losses, int n, loss_trend *out);

/* The chance that n values in random order (all n! orders alike) have at least `falls` falling pairs
 * (inversions): exact up to LOSS_TREND_EXACT_MAX values, else the normal approximation. */
double loss_trend_falls_p_value(int n, long falls);

/* 1 when the verdict should fail the run: flat, rising, diverged or not finite (too few steps
 * is reported, not failed: a timing run of 3 steps says nothing about learning). */
int loss_trend_fails(const loss_trend *t);

/* The report's one line about the trend, without a newline, into buf. */
void loss_trend_describe(const loss_trend *t, char *buf, size_t size);

#endif
