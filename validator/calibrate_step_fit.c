/* calibrate's step fit (commands.h): the power model's two loosest terms fitted to real
 * training steps, run as child processes of this program. */
#include <errno.h>
#include <fcntl.h>
#include <spawn.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <unistd.h>

#include "commands.h"

/* The reference runs: a small model at three micro-batches, unfused and fused attention.  GPT-2 124M
 * because it fits every GPU we list and runs in seconds; fitted on its six runs, the H100's overlay
 * predicted GPT-2 350M and the LLaMA-style 1.24B within 5% (docs/validation/2026-11-25-h100-power). */
#define STEP_FIT_MODEL "gpt2"
#define STEP_FIT_STEPS 30
static const int step_fit_mbs[] = {8, 16, 32};

/* Runs this program with args (args[0] is replaced by its path), stdout and stderr into log_path;
 * its exit status, or -1 after one stderr line. */
static int run_self(char **args, const char *log_path)
{
    static char self[4096];
    ssize_t n = readlink("/proc/self/exe", self, sizeof self - 1);
    if (n <= 0) { fprintf(stderr, "sextant-gpu: calibrate: /proc/self/exe: %s\n", strerror(errno)); return -1; }
    self[n] = '\0';
    args[0] = self;
    posix_spawn_file_actions_t actions;
    if (posix_spawn_file_actions_init(&actions) != 0) { fprintf(stderr, "sextant-gpu: calibrate: posix_spawn: out of memory\n"); return -1; }
    posix_spawn_file_actions_addopen(&actions, STDOUT_FILENO, log_path, O_WRONLY | O_CREAT | O_TRUNC, 0644);
    posix_spawn_file_actions_adddup2(&actions, STDOUT_FILENO, STDERR_FILENO);
    pid_t pid;
    extern char **environ;
    int err = posix_spawn(&pid, self, &actions, NULL, args, environ);
    posix_spawn_file_actions_destroy(&actions);
    if (err != 0) { fprintf(stderr, "sextant-gpu: calibrate: cannot start %s: %s\n", self, strerror(err)); return -1; }
    int status;
    while (waitpid(pid, &status, 0) < 0)
        if (errno != EINTR) { fprintf(stderr, "sextant-gpu: calibrate: waitpid: %s\n", strerror(errno)); return -1; }
    return WIFEXITED(status) ? WEXITSTATUS(status) : 128 + (WIFSIGNALED(status) ? WTERMSIG(status) : 0);
}

/* The last line of a file that says something, for a failed run's one line. */
static void last_line(const char *path, char *out, size_t len)
{
    out[0] = '\0';
    FILE *f = fopen(path, "r");
    if (!f) return;
    char line[1024];
    while (fgets(line, sizeof line, f)) {
        line[strcspn(line, "\n")] = '\0';
        if (line[0]) snprintf(out, len, "%s", line);
    }
    fclose(f);
}

/* After calibrate wrote --out with a power model: train the reference model (one process per run, as
 * `sextant-gpu train` on that overlay), fit the clock exponent and the fused attention's energy to the
 * measured steps (planner/fit_power.c) and write the overlay again with them.  The runs' CSVs and logs
 * go to --step-runs DIR when given, else to a temporary folder removed afterwards.  On failure the
 * overlay stays as calibrate wrote it and the exit status is 1. */
int calibrate_step_fit(int argc, char **argv, const model_zoo *zoo)
{
    const char *out_path = arg_value(argc, argv, "--out", NULL);
    const char *gpu_name = arg_value(argc, argv, "--gpu", "h100-sxm");
    const char *keep = arg_value(argc, argv, "--step-runs", NULL);
    const model_t *m = model_zoo_find(zoo, STEP_FIT_MODEL);
    if (!m) { fprintf(stderr, "sextant-gpu: calibrate: step fit: the model zoo has no %s\n", STEP_FIT_MODEL); return 2; }
    char dir[4096];
    if (keep) {
        snprintf(dir, sizeof dir, "%s", keep);
        if (mkdir(dir, 0755) != 0 && errno != EEXIST) {
            fprintf(stderr, "sextant-gpu: calibrate: --step-runs %s: %s\n", dir, strerror(errno));
            return 2;
        }
    } else {
        const char *tmpdir = getenv("TMPDIR");
        snprintf(dir, sizeof dir, "%s/sextant-steps-XXXXXX", tmpdir && *tmpdir ? tmpdir : "/tmp");
        if (!mkdtemp(dir)) { fprintf(stderr, "sextant-gpu: calibrate: mkdtemp %s: %s\n", dir, strerror(errno)); return 2; }
    }
    printf("\nstep fit: %s trained for %d steps at micro-batch", m->name, STEP_FIT_STEPS);
    for (size_t i = 0; i < sizeof step_fit_mbs / sizeof step_fit_mbs[0]; i++) printf(" %d", step_fit_mbs[i]);
    printf(", unfused and fused attention, on the overlay just written (runs in %s)\n", dir);

    static power_fit_run runs[2 * sizeof step_fit_mbs / sizeof step_fit_mbs[0]];
    static char csv_paths[sizeof runs / sizeof runs[0]][4200], log_paths[sizeof runs / sizeof runs[0]][4200];
    int succeeded[sizeof runs / sizeof runs[0]] = {0};
    int nruns = 0, nfiles = 0, rc = 1;
    hwdb db;
    int db_loaded = 0;
    char err[1024];
    for (int flash = 0; flash < 2; flash++) {
        for (size_t i = 0; i < sizeof step_fit_mbs / sizeof step_fit_mbs[0]; i++) {
            char mbs[16], seq[16], steps[16];
            snprintf(mbs, sizeof mbs, "%d", step_fit_mbs[i]);
            snprintf(seq, sizeof seq, "%lld", (long long)m->seq);
            snprintf(steps, sizeof steps, "%d", STEP_FIT_STEPS);
            char *csv = csv_paths[nfiles], *log = log_paths[nfiles];
            snprintf(csv, sizeof csv_paths[0], "%s/%s_%s_mbs%d.csv", dir, flash ? "flash" : "train", m->name, step_fit_mbs[i]);
            snprintf(log, sizeof log_paths[0], "%s/%s_%s_mbs%d.log", dir, flash ? "flash" : "train", m->name, step_fit_mbs[i]);
            nfiles++;
            char *args[] = {NULL, "train", (char *)m->name, "--gpu", (char *)gpu_name, "--mbs", mbs, "--seq", seq,
                            "--steps", steps, "--attention", flash ? "flash" : "unfused", "--calibration",
                            (char *)out_path, "--csv", csv, NULL};
            int status = run_self(args, log);
            if (status != 0) {
                char why[1024];
                last_line(log, why, sizeof why);
                printf("  %-32s failed (exit %d), left out: %s\n", strrchr(csv, '/') + 1, status, why);
                continue;
            }
            succeeded[nfiles - 1] = 1;
            printf("  %-32s done\n", strrchr(csv, '/') + 1);
        }
    }
    if (load_data(&db, NULL, NULL, out_path) != 0) goto done;
    db_loaded = 1;
    const hw_gpu *g = hwdb_find_gpu(&db, gpu_name);
    const hw_node *node = g ? hwdb_find_node(&db, g->node) : NULL;
    if (!g || !node) { fprintf(stderr, "sextant-gpu: calibrate: step fit: %s or its node is not in the hwdb\n", gpu_name); goto done; }
    for (int i = 0; i < nfiles; i++) {
        if (!succeeded[i]) continue;
        if (power_fit_read_run(csv_paths[i], zoo, g, node, &runs[nruns], err, sizeof err) != 0) {
            fprintf(stderr, "sextant-gpu: calibrate: step fit: %s\n", err);
            goto done;
        }
        nruns++;
    }
    static power_fit_result fit;
    if (power_fit_steps(g, node, runs, nruns, &fit, err, sizeof err) != 0) {
        fprintf(stderr, "sextant-gpu: calibrate: step fit: %s; %s keeps calibrate's own power model\n", err, out_path);
        goto done;
    }
    power_fit_report(stdout, g, runs, nruns, &fit, NULL, 0);
    if (power_fit_write_overlay(out_path, out_path, g, "sextant-gpu calibrate step fit", runs, nruns, &fit, err,
                                sizeof err) != 0) {
        fprintf(stderr, "sextant-gpu: calibrate: step fit: --out %s\n", err);
        goto done;
    }
    printf("overlay written to %s with the step fit\n", out_path);
    rc = 0;
done:
    if (rc) fprintf(stderr, "sextant-gpu: calibrate: the step fit failed; %s holds calibrate's own power model\n", out_path);
    if (!keep) {
        for (int i = 0; i < nfiles; i++) {
            unlink(csv_paths[i]);
            unlink(log_paths[i]);
        }
        rmdir(dir);
    }
    if (db_loaded) hwdb_free(&db);
    return rc;
}
