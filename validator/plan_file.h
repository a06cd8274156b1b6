/* validate --plan's input: the first layout of `sextant plan --format json`, or the layout of
 * `sextant estimate --format json`, read strictly (plain C and cJSON: fuzzed by fuzz/fuzz_plan.c). */
#ifndef SEXTANT_PLAN_FILE_H
#define SEXTANT_PLAN_FILE_H

#include "planner.h"

typedef struct {
    char model[64], gpu[64];
    char calibration[256];   /* the overlay the plan was priced with ("" for the hwdb defaults) */
    layout_t layout;
} plan_file;

/* 0, or -1 after one stderr line naming the file and the field. */
int read_plan(const char *path, plan_file *p);

#endif
