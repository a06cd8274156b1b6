/* sextant-gpu's commands beside train (validator/validator.c dispatches them) and what they
 * share.  Each returns the process's exit status: 0, or 2 after one stderr line. */
#ifndef SEXTANT_COMMANDS_H
#define SEXTANT_COMMANDS_H

#include <stddef.h>

#include "hwdb.h"
#include "models.h"
#include "plan_file.h"
#include "planner.h"
#include "train.h"

/* calibrate (validator/calibrate.c): the microbenchmarks and fits into the overlay --out;
 * *fit_steps 1 when the step fit (calibrate_step_fit) should follow, in a fresh context */
int cmd_calibrate(int argc, char **argv, const hwdb *db, const model_zoo *zoo, int *fit_steps);
/* calibrate's step fit (validator/calibrate_step_fit.c): 0, or 1 with the overlay left as
 * calibrate wrote it */
int calibrate_step_fit(int argc, char **argv, const model_zoo *zoo);
/* ops MODEL (validator/ops.c) */
int cmd_ops(int argc, char **argv, const hwdb *db, const model_zoo *zoo);
/* ops' layout from its flags (train's defaults, --mbs and --seq; validator/ops.c): 0, or -1 after one
 * stderr line naming the flag; main checks it before looking for a GPU */
int ops_layout(int argc, char **argv, layout_t *l);
/* train --plan (validator/slice.c): the slice of plan p that `available` GPUs run; -1 after
 * one stderr line */
int slice_plan(const plan_file *p, const model_t *full_model, const hw_gpu *gpu, const hw_node *node, int available,
               model_t *slice_model, train_options *o);

/* ---- shared (validator/command_util.c) ---- */

/* the value after `flag` in argv, or fallback */
const char *arg_value(int argc, char **argv, const char *flag, const char *fallback);
/* the hwdb (with the overlay `calibration` when not NULL; `plain` without it) and the model
 * zoo (when not NULL); -1 after one stderr line */
int load_data(hwdb *db, hwdb *plain, model_zoo *zoo, const char *calibration);
/* validate's GPU row: --gpu, else the plan's (plan_gpu, NULL without a plan), else the first hwdb row that
 * looks like the GPU at hand, else h100-sxm */
const char *validate_gpu_name(int argc, char **argv, const hwdb *db, const char *plan_gpu);
/* validate without --calibration, as estimate, explain and plan: the GPU's shipped overlay
 * <data root>/hwdb/measured/<gpu>.csv applied over db, its full path written into path; 1 when applied, 0 where
 * there is none, -1 when it does not load (one stderr line) */
int apply_shipped_overlay(hwdb *db, const char *gpu_name, char *path, size_t len);
/* one stderr line when --gpu names a row that does not look like the GPU at hand */
void warn_if_other_gpu(const hw_gpu *g);
/* the GPU, its SMs and memory, the CUDA driver and runtime, in one line */
void device_line(char *out, size_t len);

#endif
