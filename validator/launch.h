/* launch: one process per GPU and an NCCL communicator across them
 * (validator/launch.c).  Used by calibrate --comm; written to be reused by
 * multi-GPU training.
 *
 * Three ways to get the processes:
 *   - mpirun (OMPI_COMM_WORLD_SIZE > 1) or srun (SLURM_STEP_ID set and
 *     SLURM_NTASKS > 1): the launcher started them; rank 0 makes the
 *     ncclUniqueId and MPI broadcasts it, with libmpi loaded at run time
 *     (dlopen), so the binary never links MPI;
 *   - otherwise, --gpus N: this process makes the ncclUniqueId before any
 *     CUDA call, forks N children and waits for them; when one fails or
 *     dies the others are killed and the rank and cause are named. */
#ifndef SEXTANT_LAUNCH_H
#define SEXTANT_LAUNCH_H

#include <cuda_runtime_api.h>
#include <nccl.h>

typedef struct launch_ctx {   /* the tag lets overlap.h name it without CUDA's headers */
    int rank, nranks;
    int local_rank, local_size;  /* on this node */
    int device;                  /* the CUDA device this rank set */
    ncclComm_t comm;
    double timeout_s;            /* how long any one wait may take before the communicator is aborted */
    const char *mode;            /* "fork", "mpirun" or "srun" */
    size_t used_before_comm;     /* device bytes in use (CUDA context) before the communicator was made */
    size_t comm_init_bytes;      /* device bytes the communicator's creation took (NCCL's per-process state with it) */
} launch_ctx;

typedef struct {
    int gpus;            /* --gpus; 0: a launcher's size, or every visible GPU */
    double timeout_s;    /* per wait (communicator creation, one synchronisation) */
    double deadline_s;   /* fork mode: the whole run, after which the parent kills every rank */
} launch_options;

/* Starts the ranks, creates the communicator and calls body(ctx, arg) on
 * every rank.  In fork mode it returns in the parent only (0 when every rank
 * returned 0); under a launcher it returns on every rank with body's value.
 * Every failure is reported on stderr as one line naming the rank. */
int launch_run(const launch_options *o, int (*body)(launch_ctx *ctx, void *arg), void *arg);

/* The ranks mpirun (OMPI_COMM_WORLD_SIZE) or an srun step (SLURM_STEP_ID,
 * SLURM_STEP_NUM_TASKS or SLURM_NTASKS) started, when more than one; else 0.
 * *launcher (may be NULL) gets "mpirun" or "srun". */
int launch_launcher_ranks(const char **launcher);

/* Forks n children that each run child(rank, arg) and exit with its value;
 * waits for all of them.  When one exits non-zero or is killed, or when
 * deadline_s (> 0) passes, the others are killed (SIGTERM, then SIGKILL)
 * and the rank and cause are written to stderr.  Returns 0 when every
 * child returned 0, else 1.  The parent itself must not have initialised
 * CUDA. */
int launch_fork(int n, double deadline_s, int (*child)(int rank, void *arg), void *arg);

/* Visible CUDA devices, counted in a short-lived child so that this
 * process stays free of CUDA state and may still fork; -1 with the reason
 * in why when none can be counted. */
int launch_visible_gpus(char *why, size_t whylen);

/* The host's monotonic clock, seconds (CLOCK_MONOTONIC). */
double launch_clock_s(void);

/* Completes an NCCL call on a non-blocking communicator: when r is
 * ncclInProgress, polls until it finishes or ctx->timeout_s passes (then the
 * communicator is aborted).  Returns 0, or -1 after one stderr line naming
 * `what` and the rank. */
int launch_nccl_done(launch_ctx *ctx, ncclResult_t r, const char *what);

/* Waits for an event recorded on a stream that carries NCCL work, watching
 * the communicator for asynchronous errors; aborts it after ctx->timeout_s.
 * Returns 0, or -1 after one stderr line. */
int launch_event_wait(launch_ctx *ctx, cudaEvent_t ev, const char *what);

/* A host-side bound: launch_watchdog(rank, seconds, what) arms it (seconds
 * > 0), launch_watchdog(rank, 0, NULL) disarms it.  When it fires, this
 * process writes one line naming the rank and `what`, and exits with status
 * 4, so the launcher stops the others.  For a host thread stuck inside a
 * library call (an NCCL connection that waits for a peer's host), which no
 * polling loop of ours can see.  One per process (SIGALRM). */
void launch_watchdog(int rank, int seconds, const char *what);

#endif
