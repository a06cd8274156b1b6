/* One process per GPU and an NCCL communicator across them (launch.h). */
#include "launch.h"

#include <dlfcn.h>
#include <errno.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/prctl.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

#include "power.h"

double launch_clock_s(void)
{
    struct timespec t;
    clock_gettime(CLOCK_MONOTONIC, &t);
    return (double)t.tv_sec + 1e-9 * (double)t.tv_nsec;
}

static void nap_us(long us)
{
    struct timespec t = {us / 1000000, (us % 1000000) * 1000};
    nanosleep(&t, NULL);
}

/* An environment variable as a non-negative int; -1 when absent or not a number. */
static int env_int(const char *name)
{
    const char *s = getenv(name);
    if (!s || !*s) return -1;
    char *end;
    errno = 0;
    long v = strtol(s, &end, 10);
    if (errno || *end || v < 0 || v > 1 << 20) return -1;
    return (int)v;
}

/* ---- waiting on NCCL and CUDA without hanging ---------------------------- */

static void abort_comm(launch_ctx *ctx)
{
    if (!ctx->comm) return;
    ncclCommAbort(ctx->comm);
    ctx->comm = NULL;
}

int launch_nccl_done(launch_ctx *ctx, ncclResult_t r, const char *what)
{
    /* A non-blocking communicator may hand back ncclInProgress from any call;
     * the call is complete once the communicator's state leaves it. */
    double start = launch_clock_s();
    while (r == ncclInProgress) {
        if (launch_clock_s() - start > ctx->timeout_s) {
            fprintf(stderr, "sextant-gpu: rank %d: %s did not complete in %.0f s; aborting the communicator\n", ctx->rank,
                    what, ctx->timeout_s);
            abort_comm(ctx);
            return -1;
        }
        /* spin for the first millisecond: an enqueue finishes in microseconds,
         * and a sleep here would put the host behind the GPU on every call
         * (measured: a 185 us floor per collective with a 100 us nap) */
        if (launch_clock_s() - start > 1e-3) nap_us(100);
        ncclResult_t st = ncclCommGetAsyncError(ctx->comm, &r);
        if (st != ncclSuccess) r = st;
    }
    if (r != ncclSuccess) {
        fprintf(stderr, "sextant-gpu: rank %d: %s: %s (%s)\n", ctx->rank, what, ncclGetErrorString(r),
                ncclGetLastError(ctx->comm));
        abort_comm(ctx);
        return -1;
    }
    return 0;
}

static char watchdog_line[256];
static size_t watchdog_length;

static void watchdog_fires(int sig)
{
    (void)sig;
    /* only async-signal-safe calls: the line was written when the watchdog was armed */
    ssize_t unused = write(2, watchdog_line, watchdog_length);
    (void)unused;
    _exit(4);
}

void launch_watchdog(int rank, int seconds, const char *what)
{
    if (seconds <= 0) {
        alarm(0);
        return;
    }
    int n = snprintf(watchdog_line, sizeof watchdog_line,
                     "sextant-gpu: rank %d: %s did not finish in %d s (the host is stuck in a CUDA or NCCL call); exiting\n",
                     rank, what ? what : "a step", seconds);
    watchdog_length = n < 0 ? 0 : (size_t)n < sizeof watchdog_line ? (size_t)n : sizeof watchdog_line - 1;
    struct sigaction sa;
    memset(&sa, 0, sizeof sa);
    sa.sa_handler = watchdog_fires;
    sigemptyset(&sa.sa_mask);
    sigaction(SIGALRM, &sa, NULL);
    alarm((unsigned)seconds);
}

int launch_event_wait(launch_ctx *ctx, cudaEvent_t ev, const char *what)
{
    /* cudaEventSynchronize would block forever on a collective whose peer
     * died; polling lets us watch NCCL's own error state and a clock. */
    double start = launch_clock_s();
    for (;;) {
        cudaError_t e = cudaEventQuery(ev);
        if (e == cudaSuccess) return 0;
        if (e != cudaErrorNotReady) {
            fprintf(stderr, "sextant-gpu: rank %d: %s: cudaEventQuery: %s\n", ctx->rank, what, cudaGetErrorString(e));
            abort_comm(ctx);
            return -1;
        }
        ncclResult_t async = ncclSuccess;
        if (ctx->comm && ncclCommGetAsyncError(ctx->comm, &async) == ncclSuccess && async != ncclSuccess &&
            async != ncclInProgress) {
            fprintf(stderr, "sextant-gpu: rank %d: %s: NCCL reports %s (%s)\n", ctx->rank, what, ncclGetErrorString(async),
                    ncclGetLastError(ctx->comm));
            abort_comm(ctx);
            return -1;
        }
        if (launch_clock_s() - start > ctx->timeout_s) {
            fprintf(stderr, "sextant-gpu: rank %d: %s did not finish in %.0f s (a peer gone?); aborting the communicator\n",
                    ctx->rank, what, ctx->timeout_s);
            abort_comm(ctx);
            return -1;
        }
        nap_us(50);
    }
}

/* ---- one rank: device, communicator, body --------------------------------- */

typedef struct {
    ncclUniqueId id;
    int nranks;
    double timeout_s;
    int (*body)(launch_ctx *, void *);
    void *arg;
    const char *mode;
} rank_job;

/* SEXTANT_CPU_BIND=gpu: the rank's threads on the CPUs nearest its GPU (NVML's affinity, its NUMA node), before its
 * first stream or communicator; none (the default): where the OS puts them.  A MoE step's host issues a launch per
 * expert, and two ranks' hosts on one machine issued at 7.2 and 10.0 us a launch
 * (docs/validation/2026-11-28-moe-host-issue). */
static int bind_cpus(const launch_ctx *ctx)
{
    const char *bind = getenv("SEXTANT_CPU_BIND");
    if (!bind || !*bind || !strcmp(bind, "none")) return 0;
    if (strcmp(bind, "gpu")) {
        fprintf(stderr, "sextant-gpu: SEXTANT_CPU_BIND=%s: expected gpu or none\n", bind);
        return 1;
    }
    char why[256];
    if (power_bind_cpus(why, sizeof why) != 0) {
        fprintf(stderr, "sextant-gpu: rank %d: SEXTANT_CPU_BIND=gpu: %s\n", ctx->rank, why);
        return 1;
    }
    return 0;
}

static int run_rank(launch_ctx *ctx, const rank_job *job)
{
    cudaError_t ce = cudaSetDevice(ctx->device);
    if (ce != cudaSuccess) {
        fprintf(stderr, "sextant-gpu: rank %d: cudaSetDevice(%d): %s\n", ctx->rank, ctx->device, cudaGetErrorString(ce));
        return 1;
    }
    if (bind_cpus(ctx) != 0) return 1;
    /* Blocking: a non-blocking communicator hands ncclInProgress back from
     * calls and the host's polling then sits between every enqueue (measured
     * on 2 x H200: 2.5x NCCL's own time at 1 MiB).  Hangs are still bounded:
     * every wait on the GPU polls NCCL's error state with a timeout and aborts
     * the communicator (launch_event_wait), and in fork mode the parent kills
     * every rank at the deadline. */
    ncclConfig_t config = NCCL_CONFIG_INITIALIZER;
    config.blocking = 1;
    size_t free_bytes = 0, total_bytes = 0;
    if (cudaFree(0) == cudaSuccess && cudaMemGetInfo(&free_bytes, &total_bytes) == cudaSuccess)
        ctx->used_before_comm = total_bytes - free_bytes;
    ncclResult_t r = ncclCommInitRankConfig(&ctx->comm, job->nranks, job->id, ctx->rank, &config);
    if (r != ncclSuccess && r != ncclInProgress) {
        fprintf(stderr, "sextant-gpu: rank %d: ncclCommInitRankConfig: %s (%s)\n", ctx->rank, ncclGetErrorString(r),
                ncclGetLastError(ctx->comm));
        if (ctx->comm) ncclCommAbort(ctx->comm);
        return 1;
    }
    if (launch_nccl_done(ctx, r, "ncclCommInitRankConfig") != 0) return 1;
    if (ctx->used_before_comm > 0 && cudaMemGetInfo(&free_bytes, &total_bytes) == cudaSuccess &&
        total_bytes - free_bytes > ctx->used_before_comm)
        ctx->comm_init_bytes = total_bytes - free_bytes - ctx->used_before_comm;
    int rc = job->body(ctx, job->arg);
    if (!ctx->comm) return rc ? rc : 1;   /* the body aborted it */
    if (rc != 0) {
        abort_comm(ctx);
        return rc;
    }
    if (launch_nccl_done(ctx, ncclCommFinalize(ctx->comm), "ncclCommFinalize") != 0) return 1;
    r = ncclCommDestroy(ctx->comm);
    ctx->comm = NULL;
    if (r != ncclSuccess) {
        fprintf(stderr, "sextant-gpu: rank %d: ncclCommDestroy: %s\n", ctx->rank, ncclGetErrorString(r));
        return 1;
    }
    return 0;
}

/* ---- fork mode ------------------------------------------------------------ */

static int fork_child(int rank, void *arg)
{
    const rank_job *job = arg;
    launch_ctx ctx = {rank, job->nranks, rank, job->nranks, rank, NULL, job->timeout_s, job->mode, 0, 0};
    return run_rank(&ctx, job);
}

static void kill_all(const pid_t *pids, const int *alive, int n, int sig)
{
    for (int r = 0; r < n; r++)
        if (alive[r]) kill(pids[r], sig);
}

int launch_fork(int n, double deadline_s, int (*child)(int rank, void *arg), void *arg)
{
    pid_t *pids = calloc((size_t)n, sizeof *pids);
    int *alive = calloc((size_t)n, sizeof *alive);
    if (!pids || !alive) {
        fprintf(stderr, "sextant-gpu: out of memory starting %d ranks\n", n);
        free(pids);
        free(alive);
        return 1;
    }
    pid_t parent = getpid();
    /* buffered output would otherwise be written once by every child */
    fflush(stdout);
    fflush(stderr);
    int started = 0, failed = 0;
    for (int r = 0; r < n; r++) {
        pid_t pid = fork();
        if (pid < 0) {
            fprintf(stderr, "sextant-gpu: fork for rank %d: %s; stopping the ranks already started\n", r, strerror(errno));
            failed = 1;
            break;
        }
        if (pid == 0) {
            /* a child must not outlive a parent that was killed */
            prctl(PR_SET_PDEATHSIG, SIGKILL);
            if (getppid() != parent) _exit(1);
            free(pids);
            free(alive);
            int rc = child(r, arg);
            fflush(stdout);
            fflush(stderr);
            _exit(rc > 0 && rc < 256 ? rc : rc == 0 ? 0 : 1);
        }
        pids[r] = pid;
        alive[r] = 1;
        started++;
    }
    if (failed) kill_all(pids, alive, n, SIGKILL);

    double start = launch_clock_s(), killed_at = failed ? start : 0.0;
    int running = started;
    while (running > 0) {
        int status;
        pid_t pid = waitpid(-1, &status, WNOHANG);
        if (pid < 0 && errno != EINTR) break;  /* ECHILD: nobody left */
        if (pid > 0) {
            int r = 0;
            while (r < n && !(alive[r] && pids[r] == pid)) r++;
            if (r == n) continue;  /* not one of ours */
            alive[r] = 0;
            running--;
            int ok = WIFEXITED(status) && WEXITSTATUS(status) == 0;
            if (!ok && !failed) {
                /* the first failure is the cause; later ones are our own kills or its echoes */
                if (WIFSIGNALED(status))
                    fprintf(stderr, "sextant-gpu: rank %d (pid %d) was killed by signal %d (%s); stopping the other ranks\n",
                            r, (int)pid, WTERMSIG(status), strsignal(WTERMSIG(status)));
                else
                    fprintf(stderr, "sextant-gpu: rank %d (pid %d) exited with status %d; stopping the other ranks\n", r,
                            (int)pid, WEXITSTATUS(status));
                failed = 1;
                killed_at = launch_clock_s();
                kill_all(pids, alive, n, SIGTERM);
            }
            continue;
        }
        double t = launch_clock_s();
        if (!failed && deadline_s > 0 && t - start > deadline_s) {
            fprintf(stderr, "sextant-gpu: %d rank(s) still running after the %.0f s deadline; killing them\n", running,
                    deadline_s);
            failed = 1;
            killed_at = t;
            kill_all(pids, alive, n, SIGTERM);
        }
        /* a rank stuck in the driver may ignore SIGTERM for a while */
        if (failed && t - killed_at > 5.0) kill_all(pids, alive, n, SIGKILL);
        nap_us(20000);
    }
    free(pids);
    free(alive);
    return failed ? 1 : 0;
}

int launch_visible_gpus(char *why, size_t whylen)
{
    struct {
        int count;
        char why[200];
    } answer = {-1, "the probe process did not answer"};
    int fds[2];
    if (pipe(fds) != 0) {
        snprintf(why, whylen, "pipe: %s", strerror(errno));
        return -1;
    }
    fflush(stdout);
    fflush(stderr);
    pid_t pid = fork();
    if (pid < 0) {
        snprintf(why, whylen, "fork: %s", strerror(errno));
        close(fds[0]);
        close(fds[1]);
        return -1;
    }
    if (pid == 0) {
        close(fds[0]);
        int count = 0;
        cudaError_t e = cudaGetDeviceCount(&count);
        answer.count = e == cudaSuccess ? count : 0;
        snprintf(answer.why, sizeof answer.why, "cudaGetDeviceCount: %s", cudaGetErrorString(e));
        ssize_t w = write(fds[1], &answer, sizeof answer);
        _exit(w == (ssize_t)sizeof answer ? 0 : 1);
    }
    close(fds[1]);
    ssize_t got = 0;
    while (got < (ssize_t)sizeof answer) {
        ssize_t k = read(fds[0], (char *)&answer + got, sizeof answer - (size_t)got);
        if (k < 0 && errno == EINTR) continue;
        if (k <= 0) break;
        got += k;
    }
    close(fds[0]);
    int status;
    while (waitpid(pid, &status, 0) < 0 && errno == EINTR) {}
    if (got != (ssize_t)sizeof answer) {
        snprintf(why, whylen, "the CUDA probe process died before answering");
        return -1;
    }
    snprintf(why, whylen, "%s", answer.why);
    return answer.count;
}

/* ---- launcher mode: the id travels by MPI, loaded at run time ------------ */

/* Open MPI's handles are pointers to global objects, so MPI_COMM_WORLD is the
 * address of ompi_mpi_comm_world and MPI_BYTE that of ompi_mpi_byte. */
typedef struct {
    void *lib;
    int (*init)(int *, char ***);
    int (*initialized)(int *);
    int (*finalize)(void);
    int (*bcast)(void *, int, void *, int, void *);
    void *comm_world, *byte;
} mpi_api;

static int mpi_load(mpi_api *m, char *why, size_t whylen)
{
    static const char *const names[] = {"libmpi.so.40", "libmpi.so"};
    memset(m, 0, sizeof *m);
    why[0] = '\0';
    for (size_t i = 0; i < sizeof names / sizeof names[0] && !m->lib; i++) {
        /* RTLD_GLOBAL: Open MPI's own plugins resolve symbols against libmpi */
        m->lib = dlopen(names[i], RTLD_NOW | RTLD_GLOBAL);
        if (!m->lib) {
            size_t len = strlen(why);
            snprintf(why + len, whylen - len, "%s%s", len ? "; " : "", dlerror());
        }
    }
    if (!m->lib) return -1;
    /* dlsym returns void *; POSIX guarantees the conversion to a function pointer works */
    *(void **)&m->init = dlsym(m->lib, "MPI_Init");
    *(void **)&m->initialized = dlsym(m->lib, "MPI_Initialized");
    *(void **)&m->finalize = dlsym(m->lib, "MPI_Finalize");
    *(void **)&m->bcast = dlsym(m->lib, "MPI_Bcast");
    m->comm_world = dlsym(m->lib, "ompi_mpi_comm_world");
    m->byte = dlsym(m->lib, "ompi_mpi_byte");
    if (!m->init || !m->initialized || !m->finalize || !m->bcast || !m->comm_world || !m->byte) {
        snprintf(why, whylen, "the loaded libmpi lacks MPI_Init, MPI_Bcast, ompi_mpi_comm_world or ompi_mpi_byte "
                              "(not Open MPI?)");
        dlclose(m->lib);
        m->lib = NULL;
        return -1;
    }
    return 0;
}

static int launcher_run(const launch_options *o, const char *mode, int rank, int size, int local_rank, int local_size,
                        int (*body)(launch_ctx *, void *), void *arg)
{
    if (o->gpus > 0 && o->gpus != size) {
        fprintf(stderr, "sextant-gpu: rank %d: --gpus %d but %s started %d ranks\n", rank, o->gpus, mode, size);
        return 2;
    }
    mpi_api mpi;
    char why[1024];
    if (mpi_load(&mpi, why, sizeof why) != 0) {
        fprintf(stderr, "sextant-gpu: rank %d: started by %s with %d ranks, but libmpi could not be loaded (%s): "
                        "put Open MPI's lib directory on LD_LIBRARY_PATH, or run one process with --gpus N\n",
                rank, mode, size, why);
        return 2;
    }
    int already = 0, rc = 1;
    mpi.initialized(&already);
    if (!already && mpi.init(NULL, NULL) != 0) {
        fprintf(stderr, "sextant-gpu: rank %d: MPI_Init failed under %s\n", rank, mode);
        dlclose(mpi.lib);
        return 1;
    }
    rank_job job = {{{0}}, size, o->timeout_s, body, arg, mode};
    ncclResult_t r = ncclSuccess;
    if (rank == 0) r = ncclGetUniqueId(&job.id);
    if (r != ncclSuccess) {
        /* the others would wait in MPI_Bcast: the launcher stops them when we exit non-zero */
        fprintf(stderr, "sextant-gpu: rank 0: ncclGetUniqueId: %s\n", ncclGetErrorString(r));
        goto done;
    }
    if (mpi.bcast(&job.id, (int)sizeof job.id, mpi.byte, 0, mpi.comm_world) != 0) {
        fprintf(stderr, "sextant-gpu: rank %d: MPI_Bcast of the NCCL id failed\n", rank);
        goto done;
    }
    int visible = 0;
    cudaError_t e = cudaGetDeviceCount(&visible);
    if (e != cudaSuccess || visible < 1) {
        fprintf(stderr, "sextant-gpu: rank %d: no GPU visible (cudaGetDeviceCount: %s)\n", rank, cudaGetErrorString(e));
        goto done;
    }
    if (local_size > visible) {
        fprintf(stderr, "sextant-gpu: rank %d: %d ranks on this node but only %d GPUs visible\n", rank, local_size, visible);
        goto done;
    }
    launch_ctx ctx = {rank, size, local_rank, local_size, local_rank % visible, NULL, o->timeout_s, mode, 0, 0};
    rc = run_rank(&ctx, &job);
done:
    if (!already) mpi.finalize();
    /* libmpi stays loaded: unloading Open MPI after MPI_Finalize is not supported */
    return rc;
}

int launch_launcher_ranks(const char **launcher)
{
    int ompi_size = env_int("OMPI_COMM_WORLD_SIZE");
    int slurm_size = env_int("SLURM_STEP_NUM_TASKS");
    if (slurm_size < 0) slurm_size = env_int("SLURM_NTASKS");
    /* SLURM_STEP_ID: inside an srun step, not merely inside an allocation
     * (a batch script runs as one process even when --ntasks is larger) */
    int in_srun = getenv("SLURM_STEP_ID") != NULL && env_int("SLURM_PROCID") >= 0;
    if (launcher) *launcher = ompi_size > 1 ? "mpirun" : "srun";
    if (ompi_size > 1) return ompi_size;
    if (in_srun && slurm_size > 1) return slurm_size;
    return 0;
}

int launch_run(const launch_options *o, int (*body)(launch_ctx *, void *), void *arg)
{
    const char *launcher;
    int launched = launch_launcher_ranks(&launcher);
    if (launched && !strcmp(launcher, "mpirun")) {
        int ompi_size = launched;
        int rank = env_int("OMPI_COMM_WORLD_RANK"), local = env_int("OMPI_COMM_WORLD_LOCAL_RANK");
        int local_size = env_int("OMPI_COMM_WORLD_LOCAL_SIZE");
        if (rank < 0 || local < 0) {
            fprintf(stderr, "sextant-gpu: OMPI_COMM_WORLD_SIZE is set but OMPI_COMM_WORLD_RANK or _LOCAL_RANK is not\n");
            return 2;
        }
        return launcher_run(o, "mpirun", rank, ompi_size, local, local_size, body, arg);
    }
    if (launched) {
        int slurm_size = launched;
        int rank = env_int("SLURM_PROCID"), local = env_int("SLURM_LOCALID");
        int nodes = env_int("SLURM_STEP_NUM_NODES");
        if (nodes < 0) nodes = env_int("SLURM_NNODES");
        if (local < 0) {
            fprintf(stderr, "sextant-gpu: rank %d: SLURM_PROCID is set but SLURM_LOCALID is not\n", rank);
            return 2;
        }
        return launcher_run(o, "srun", rank, slurm_size, local, nodes == 1 ? slurm_size : -1, body, arg);
    }

    /* fork mode: this process must stay free of CUDA, so the GPUs are counted by a probe child */
    char why[256];
    int visible = launch_visible_gpus(why, sizeof why);
    int n = o->gpus > 0 ? o->gpus : visible;
    if (visible < 0) {
        fprintf(stderr, "sextant-gpu: cannot count the GPUs: %s\n", why);
        return 1;
    }
    if (visible == 0) {
        if (o->gpus > 0) fprintf(stderr, "sextant-gpu: --gpus %d but no GPU is visible (%s)\n", o->gpus, why);
        else fprintf(stderr, "sextant-gpu: no GPU is visible (%s)\n", why);
        return 1;
    }
    if (n > visible || n < 1) {
        fprintf(stderr, "sextant-gpu: --gpus %d but %d GPU%s visible (%s)\n", n, visible, visible == 1 ? " is" : "s are",
                why);
        return 1;
    }
    rank_job job = {{{0}}, n, o->timeout_s, body, arg, "fork"};
    /* before any CUDA call and before fork: the id carries the address of a
     * bootstrap thread that lives in this process and serves every child */
    ncclResult_t r = ncclGetUniqueId(&job.id);
    if (r != ncclSuccess) {
        fprintf(stderr, "sextant-gpu: ncclGetUniqueId: %s\n", ncclGetErrorString(r));
        return 1;
    }
    return launch_fork(n, o->deadline_s, fork_child, &job);
}
