/* calibrate --comm: NCCL collectives on the GPUs of one node, fitted into
 * the alpha-beta terms of the planner's ring formulas (validator/comm.c). */
#ifndef SEXTANT_COMM_H
#define SEXTANT_COMM_H

#include "hwdb.h"

/* sextant-gpu calibrate --comm [flags]: parses the flags, starts one process
 * per GPU (validator/launch.c), measures, prints the table and the fit, and
 * writes the overlay.  Must be called before this process makes any CUDA
 * call (the ranks are forked).  Returns the exit status. */
int comm_calibrate(int argc, char **argv, const hwdb *db);

#endif
