/* Files sextant writes (--out, --plot, --csv, ...): whole or not at all, and
 * only where a regular file may go (planner/outfile.c).  The GPU validator
 * uses the same functions. */
#ifndef SEXTANT_OUTFILE_H
#define SEXTANT_OUTFILE_H

#include <limits.h>
#include <stddef.h>
#include <stdio.h>
#include <sys/types.h>

/* A write in progress: a temporary file beside the target, renamed over it
 * by outfile_commit.  The target must be a new path or a regular file; a
 * directory, a device node, a FIFO, a socket and a symbolic link are refused
 * by name (a link: sextant does not guess whether the link or the file it
 * names was meant to be replaced, so it asks for the file itself). */
typedef struct {
    FILE *f;               /* write here between outfile_open and outfile_commit */
    char path[PATH_MAX];   /* the target */
    char tmp[PATH_MAX];    /* the temporary file, in the target's directory */
} outfile;

/* Opens the temporary file; -1 with `err` ("PATH is a directory", ...) and
 * nothing created when the target may not be written. */
int outfile_open(outfile *o, const char *path, char *err, size_t errlen);
/* Flushes, syncs and renames the temporary file over the target; -1 with
 * `err` when any step fails, the temporary file then removed. */
int outfile_commit(outfile *o, char *err, size_t errlen);
/* Closes and removes the temporary file; the target is untouched. */
void outfile_abort(outfile *o);
/* One file written by several processes in turn (the validator's ranks):
 * the temporary file is named by `tag` (a number every process knows, such
 * as rank 0's pid) instead of at random.  The first process passes create=1
 * (the file must not exist yet: O_EXCL, never through a link) and later
 * commits; the others pass create=0 to append, and outfile_close. */
int outfile_open_shared(outfile *o, const char *path, long tag, int create, char *err, size_t errlen);
/* Closes the temporary file and leaves it for another process to commit. */
int outfile_close(outfile *o);
/* `len` bytes of `data` to `path` through outfile_open/commit. */
int outfile_write(const char *path, const void *data, size_t len, char *err, size_t errlen);

/* The calibration overlay at `path` (CSV gpu,key,value,source) as text in *text (malloc'd, *len bytes), with
 * gpu's rows of keys[0..nkeys) (each given as "key,") replaced by rows[j] where the first old one stood, or
 * appended when there was none; gpu's rows of keys[nkeys..nall) dropped (keys a fit no longer writes); every
 * other line as it was.  The fit commands' way to write their rows into an overlay without losing the rest.
 * 0, or -1 with why in `err` and *text NULL. */
int overlay_replace_rows(const char *path, const char *gpu, const char *const keys[], const char *const rows[], int nkeys,
                         int nall, char **text, size_t *len, char *err, size_t errlen);

/* Checks that `path` may be replaced by a regular file (new, or a regular
 * file now); -1 with `err` otherwise.  outfile_open calls it. */
int outfile_check_target(const char *path, char *err, size_t errlen);

#endif
