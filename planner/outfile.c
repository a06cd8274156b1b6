/* Files written whole or not at all, and only where a regular file may go.
 *
 * rename(2) replaces whatever directory entry the target names: run as root,
 * `--out /dev/full` once turned the device node into a regular file, and a
 * FIFO, a socket or a symbolic link went the same way.  So the target is
 * looked at first (lstat, which does not follow a link) and only a new path
 * or a regular file is replaced.  A symbolic link is refused rather than
 * followed: writing through it would put the file wherever the link points
 * (a link planted in /tmp could aim at any file of the user's), and replacing
 * the link itself would silently unlink it from the file it named. */
#include "outfile.h"

#include <errno.h>
#include <fcntl.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>
#include <sys/stat.h>
#include <unistd.h>

static const char *kind_of(mode_t mode)
{
    if (S_ISDIR(mode)) return "a directory";
    if (S_ISCHR(mode)) return "a character device";
    if (S_ISBLK(mode)) return "a block device";
    if (S_ISFIFO(mode)) return "a FIFO";
    if (S_ISSOCK(mode)) return "a socket";
    if (S_ISLNK(mode)) return "a symbolic link";
    return "not a regular file";
}

/* 0 when `path` is absent (*st zeroed) or a regular file (*st filled) */
static int check_target(const char *path, struct stat *st, char *err, size_t errlen)
{
    if (!path || !*path) {
        snprintf(err, errlen, "an empty path");
        return -1;
    }
    if (lstat(path, st) != 0) {
        if (errno == ENOENT) {
            memset(st, 0, sizeof *st);
            return 0;
        }
        snprintf(err, errlen, "%s: %s", path, strerror(errno));
        return -1;
    }
    if (S_ISREG(st->st_mode)) return 0;
    if (S_ISLNK(st->st_mode)) {
        char to[PATH_MAX];
        ssize_t n = readlink(path, to, sizeof to - 1);
        to[n > 0 ? n : 0] = '\0';
        snprintf(err, errlen, "%s is a symbolic link (to %s); sextant does not write through links: give the file itself",
                 path, n > 0 ? to : "?");
        return -1;
    }
    snprintf(err, errlen, "%s is %s; sextant writes only a regular file or a new path", path, kind_of(st->st_mode));
    return -1;
}

int outfile_check_target(const char *path, char *err, size_t errlen)
{
    struct stat st;
    return check_target(path, &st, err, errlen);
}

/* the temporary file's name: ".NAME.XXXXXX" in the target's directory, so the rename never crosses file systems */
static int temp_name(const char *path, char *tmp, size_t size)
{
    const char *slash = strrchr(path, '/');
    size_t dirlen = slash ? (size_t)(slash - path) + 1 : 0;
    int n = snprintf(tmp, size, "%.*s.%s.XXXXXX", (int)dirlen, path, slash ? slash + 1 : path);
    return n < 0 || (size_t)n >= size ? -1 : 0;
}

/* the mode a replaced file had, else what a new file gets (mkstemp makes 0600) */
static mode_t target_mode(const struct stat *st)
{
    if (S_ISREG(st->st_mode)) return st->st_mode & 07777;
    mode_t mask = umask(0);
    umask(mask);
    return 0666 & ~mask;
}

/* checks the target and fills o->path and o->tmp ("NAME.XXXXXX" or "NAME.TAG.tmp" after the dot) */
static int prepare(outfile *o, const char *path, const char *suffix, struct stat *st, char *err, size_t errlen)
{
    memset(o, 0, sizeof *o);
    if (check_target(path, st, err, errlen) != 0) return -1;
    char name[PATH_MAX];
    if (strlen(path) >= sizeof o->path || temp_name(path, name, sizeof name) != 0 ||
        snprintf(o->tmp, sizeof o->tmp, "%.*s%s", (int)(strlen(name) - 6), name, suffix) >= (int)sizeof o->tmp) {
        snprintf(err, errlen, "%.64s...: path too long", path);
        return -1;
    }
    strcpy(o->path, path);
    return 0;
}

int outfile_open(outfile *o, const char *path, char *err, size_t errlen)
{
    struct stat st;
    if (prepare(o, path, "XXXXXX", &st, err, errlen) != 0) return -1;
    int fd = mkstemp(o->tmp);
    if (fd >= 0 && (fchmod(fd, target_mode(&st)) != 0 || !(o->f = fdopen(fd, "wb")))) {
        int saved = errno;
        close(fd);
        unlink(o->tmp);
        errno = saved;
    }
    if (!o->f) {
        snprintf(err, errlen, "%s: cannot create a file beside it: %s", o->path, strerror(errno));
        o->tmp[0] = '\0';
        return -1;
    }
    return 0;
}

int outfile_open_shared(outfile *o, const char *path, long tag, int create, char *err, size_t errlen)
{
    struct stat st;
    char suffix[32];
    snprintf(suffix, sizeof suffix, "%ld.tmp", tag);
    if (prepare(o, path, suffix, &st, err, errlen) != 0) return -1;
    int fd = create ? open(o->tmp, O_WRONLY | O_CREAT | O_EXCL | O_NOFOLLOW | O_CLOEXEC, target_mode(&st))
                    : open(o->tmp, O_WRONLY | O_APPEND | O_NOFOLLOW | O_CLOEXEC);
    if (fd >= 0 && !(o->f = fdopen(fd, create ? "wb" : "ab"))) {
        int saved = errno;
        close(fd);
        if (create) unlink(o->tmp);
        errno = saved;
    }
    if (!o->f) {
        snprintf(err, errlen, "%s: cannot %s a file beside it: %s", o->path, create ? "create" : "open", strerror(errno));
        o->tmp[0] = '\0'; /* not ours to remove: another process's, or another file altogether */
        return -1;
    }
    return 0;
}

int outfile_close(outfile *o)
{
    int bad = fclose(o->f) != 0;
    o->f = NULL;
    o->tmp[0] = '\0';
    return bad ? -1 : 0;
}

void outfile_abort(outfile *o)
{
    if (o->f) fclose(o->f);
    o->f = NULL;
    if (o->tmp[0]) unlink(o->tmp);
    o->tmp[0] = '\0';
}

int outfile_commit(outfile *o, char *err, size_t errlen)
{
    int bad = ferror(o->f) || fflush(o->f) != 0 || fsync(fileno(o->f)) != 0;
    int saved = errno;
    bad |= fclose(o->f) != 0;
    if (!bad) saved = errno;
    o->f = NULL;
    if (bad) {
        snprintf(err, errlen, "%s: write failed: %s", o->path, strerror(saved));
        outfile_abort(o);
        return -1;
    }
    /* looked at again: the target may have changed while the file was written */
    struct stat st;
    if (check_target(o->path, &st, err, errlen) != 0) {
        outfile_abort(o);
        return -1;
    }
    if (rename(o->tmp, o->path) != 0) {
        snprintf(err, errlen, "%s: cannot replace: %s", o->path, strerror(errno));
        outfile_abort(o);
        return -1;
    }
    o->tmp[0] = '\0';
    return 0;
}

int outfile_write(const char *path, const void *data, size_t len, char *err, size_t errlen)
{
    outfile o;
    if (outfile_open(&o, path, err, errlen) != 0) return -1;
    if (len && fwrite(data, 1, len, o.f) != len) {
        snprintf(err, errlen, "%s: write failed: %s", path, strerror(errno));
        outfile_abort(&o);
        return -1;
    }
    return outfile_commit(&o, err, errlen);
}

int overlay_replace_rows(const char *path, const char *gpu, const char *const keys[], const char *const rows[], int nkeys,
                         int nall, char **text, size_t *len, char *err, size_t errlen)
{
    enum { KEYS_MAX = 16 };
    *text = NULL;
    *len = 0;
    if (nall > KEYS_MAX || nkeys > nall) { snprintf(err, errlen, "%s: %d keys to replace, at most %d", path, nall, KEYS_MAX); return -1; }
    FILE *in = fopen(path, "r");
    if (!in) { snprintf(err, errlen, "%s: cannot read: %s", path, strerror(errno)); return -1; }
    FILE *f = open_memstream(text, len);
    if (!f) { fclose(in); snprintf(err, errlen, "out of memory"); return -1; }
    int wrote[KEYS_MAX] = {0};
    char line[8192];
    size_t gpu_len = strlen(gpu);
    while (fgets(line, sizeof line, in)) {
        int replaced = 0;
        if (!strncasecmp(line, gpu, gpu_len) && line[gpu_len] == ',')
            for (int j = 0; j < nall && !replaced; j++)
                if (!strncmp(line + gpu_len + 1, keys[j], strlen(keys[j]))) {
                    if (j < nkeys && !wrote[j]++) fputs(rows[j], f);
                    replaced = 1;
                }
        if (replaced) continue;
        fputs(line, f);
        if (!strchr(line, '\n')) fputc('\n', f);
    }
    int bad = ferror(in);
    fclose(in);
    for (int j = 0; j < nkeys; j++)
        if (!wrote[j]) fputs(rows[j], f);
    bad |= fclose(f) != 0;
    if (bad) {
        free(*text);
        *text = NULL;
        *len = 0;
        snprintf(err, errlen, "%s: read failed", path);
        return -1;
    }
    return 0;
}
