/* Where hwdb/ and models/ are, for sextant and sextant-gpu alike. */
#include "planner.h"

#include <limits.h>
#include <stdio.h>
#include <string.h>
#include <unistd.h>

static int file_readable(const char *path) { return access(path, R_OK) == 0; }

/* Beside the binary's parent (the build tree), under share/sextant beside it (installed with
 * `make install PREFIX=...`), in the working directory (a checkout), else where it was installed to
 * (SEXTANT_DATADIR, fixed at build time). */
void find_data_root(char *out, size_t outlen)
{
    char exe[PATH_MAX - 64];
    ssize_t n = readlink("/proc/self/exe", exe, sizeof exe - 1);
    if (n > 0) {
        exe[n] = '\0';
        char *slash = strrchr(exe, '/');
        if (slash) *slash = '\0';
        const char *suffixes[] = {"/..", "/../share/sextant"};
        for (int i = 0; i < 2; i++) {
            char probe[PATH_MAX + 64];
            snprintf(probe, sizeof probe, "%s%s/hwdb/gpus.csv", exe, suffixes[i]);
            if (file_readable(probe)) { snprintf(out, outlen, "%s%s", exe, suffixes[i]); return; }
        }
    }
    if (file_readable("hwdb/gpus.csv")) { snprintf(out, outlen, "."); return; }
    snprintf(out, outlen, "%s", SEXTANT_DATADIR);
}
