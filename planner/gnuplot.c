/* gnuplot as a pipe with no shell and no paths in the script.
 *
 * The plot's path was once pasted into `set output '...'`, and a file name
 * holding a quote ran gnuplot's system().  Now gnuplot is started with
 * posix_spawnp (no shell), reads the script from an unlinked temporary file
 * on its standard input and writes the image to its standard output, which
 * is the output file's temporary (outfile.c).  The only user strings left in
 * a script are titles, written by gnuplot_quote. */
#include "gnuplot.h"
#include "outfile.h"

#include <errno.h>
#include <spawn.h>
#include <string.h>
#include <sys/wait.h>
#include <unistd.h>

extern char **environ;

void gnuplot_quote(FILE *f, const char *text)
{
    fputc('\'', f);
    for (const unsigned char *p = (const unsigned char *)text; *p; p++) {
        if (*p == '\'') fputs("''", f);
        else fputc(*p < 0x20 || *p == 0x7f ? '?' : *p, f);
    }
    fputc('\'', f);
}

/* gnuplot's own complaint: the line naming the script line ("line N: ..."), else its last non-empty line */
static void error_line(FILE *errf, const char *path, char *err, size_t errlen)
{
    char line[512], last[512] = "", located[512] = "";
    rewind(errf);
    while (fgets(line, sizeof line, errf)) {
        line[strcspn(line, "\r\n")] = '\0';
        const char *p = line + strspn(line, " \t");
        if (!*p) continue;
        snprintf(last, sizeof last, "%s", p);
        if (strstr(p, "line ") == p && strchr(p, ':')) snprintf(located, sizeof located, "%s", p);
    }
    const char *said = located[0] ? located : last;
    if (said[0]) snprintf(err, errlen, "%s: gnuplot: %s", path, said);
    else snprintf(err, errlen, "%s: gnuplot failed and said nothing", path);
}

/* runs gnuplot with stdin, stdout and stderr on the given descriptors; its wait status, or -1 with errno */
static int run_gnuplot(int in, int out, int errfd)
{
    posix_spawn_file_actions_t fa;
    if (posix_spawn_file_actions_init(&fa) != 0) return -1;
    posix_spawn_file_actions_adddup2(&fa, in, STDIN_FILENO);
    posix_spawn_file_actions_adddup2(&fa, out, STDOUT_FILENO);
    posix_spawn_file_actions_adddup2(&fa, errfd, STDERR_FILENO);
    char *argv[] = {"gnuplot", NULL};
    pid_t pid;
    int rc = posix_spawnp(&pid, "gnuplot", &fa, NULL, argv, environ);
    posix_spawn_file_actions_destroy(&fa);
    if (rc != 0) {
        errno = rc;
        return -1;
    }
    int status;
    while (waitpid(pid, &status, 0) < 0)
        if (errno != EINTR) return -1;
    return status;
}

int gnuplot_render(const char *script, const char *path, char *err, size_t errlen)
{
    outfile o;
    if (outfile_open(&o, path, err, errlen) != 0) return 1;
    FILE *in = tmpfile(), *errf = tmpfile();
    int rc = 1;
    if (!in || !errf || fputs(script, in) == EOF || fflush(in) != 0 || fflush(o.f) != 0) {
        snprintf(err, errlen, "%s: cannot write gnuplot's script: %s", path, strerror(errno));
        goto done;
    }
    rewind(in);
    int status = run_gnuplot(fileno(in), fileno(o.f), fileno(errf));
    if (status < 0 && errno == ENOENT) {
        snprintf(err, errlen, "gnuplot is not installed (Debian: apt-get install gnuplot-nox)");
        rc = 2;
    } else if (status < 0) {
        snprintf(err, errlen, "%s: cannot start gnuplot: %s", path, strerror(errno));
    } else if (!WIFEXITED(status) || WEXITSTATUS(status) != 0) {
        error_line(errf, path, err, errlen);
    } else if (lseek(fileno(o.f), 0, SEEK_END) <= 0) {
        snprintf(err, errlen, "%s: gnuplot wrote nothing", path);
    } else {
        rc = outfile_commit(&o, err, errlen) == 0 ? 0 : 1;
    }
done:
    if (rc != 0) outfile_abort(&o);
    if (in) fclose(in);
    if (errf) fclose(errf);
    return rc;
}
