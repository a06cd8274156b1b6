/* Shared by the cmocka suites: running the binary, comparing numbers. */
#ifndef SEXTANT_TEST_UTIL_H
#define SEXTANT_TEST_UTIL_H

#include <math.h>
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/wait.h>
#include <unistd.h>

#include <cmocka.h>

#include <cjson/cJSON.h>

#ifndef SEXTANT_ROOT
#define SEXTANT_ROOT "."
#endif
#ifndef SEXTANT_BIN
#define SEXTANT_BIN SEXTANT_ROOT "/build/sextant"
#endif

/* |got - want| <= rel * |want|, with both numbers in the failure message. */
#define assert_close(got, want, rel)                                                                   \
    do {                                                                                               \
        double got_ = (got), want_ = (want), rel_ = (rel);                                             \
        if (!(fabs(got_ - want_) <= rel_ * fabs(want_))) {                                             \
            print_error("%s = %.10g, expected %.10g within %g relative\n", #got, got_, want_, rel_);  \
            fail();                                                                                    \
        }                                                                                              \
    } while (0)

typedef struct {
    int status;      /* exit code, or -1 when it did not exit normally */
    char *out, *err; /* whole stdout and stderr */
} run_result;

static inline char *slurp(const char *path)
{
    FILE *f = fopen(path, "rb");
    if (!f) return strdup("");
    fseek(f, 0, SEEK_END);
    long n = ftell(f);
    fseek(f, 0, SEEK_SET);
    char *buf = malloc((size_t)n + 1);
    size_t got = fread(buf, 1, (size_t)n, f);
    buf[got] = '\0';
    fclose(f);
    return buf;
}

/* Runs `PREFIX sextant ARGS` through the shell, capturing both streams;
 * PREFIX is "" or a command such as `env -u VAR A=1`. */
static inline run_result run_sextant_with(const char *prefix, const char *args)
{
    char cmd[8192];
    char out_path[] = "/tmp/sextant-test-out-XXXXXX", err_path[] = "/tmp/sextant-test-err-XXXXXX";
    int fo = mkstemp(out_path), fe = mkstemp(err_path);
    if (fo >= 0) close(fo);
    if (fe >= 0) close(fe);
    snprintf(cmd, sizeof cmd, "%s %s %s >%s 2>%s </dev/null", prefix, SEXTANT_BIN, args, out_path, err_path);
    int raw = system(cmd);
    run_result r;
    r.status = WIFEXITED(raw) ? WEXITSTATUS(raw) : -1;
    r.out = slurp(out_path);
    r.err = slurp(err_path);
    unlink(out_path);
    unlink(err_path);
    return r;
}

/* Runs `sextant ARGS` through the shell, capturing both streams. */
static inline run_result run_sextant(const char *fmt, ...)
{
    char args[4096];
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(args, sizeof args, fmt, ap);
    va_end(ap);
    return run_sextant_with("", args);
}

static inline void run_free(run_result *r)
{
    free(r->out);
    free(r->err);
}

static inline int count_lines(const char *s)
{
    int n = 0;
    for (; *s; s++) n += *s == '\n';
    return n;
}

/* sextant ran: exit 0 and something on stdout. */
static inline void expect_ok(run_result *r)
{
    if (r->status != 0) {
        print_error("exit %d, stderr: %s\n", r->status, r->err);
        fail();
    }
    assert_true(strlen(r->out) > 0);
}

/* The number at key a (or a.b) of sextant's JSON, or a test failure. */
static inline double json_number(const cJSON *root, const char *a, const char *b)
{
    const cJSON *node = cJSON_GetObjectItemCaseSensitive(root, a);
    if (b) node = cJSON_GetObjectItemCaseSensitive(node, b);
    if (!cJSON_IsNumber(node)) {
        print_error("JSON key %s%s%s is missing or not a number\n", a, b ? "." : "", b ? b : "");
        fail();
    }
    return node->valuedouble;
}

/* sextant refuses `args` as bad input: a non-zero exit, nothing on stdout, one
 * line on stderr containing `message` (the flag or file:line:field it names). */
static inline void expect_bad_input(const char *args, const char *message)
{
    run_result r = run_sextant("%s", args);
    if (r.status == 0 || r.status == -1 || r.out[0] != '\0' || count_lines(r.err) != 1 || !strstr(r.err, message)) {
        print_error("sextant %s\n  exit %d, stdout %zu bytes, stderr: %s  (wanted one line containing '%s')\n", args,
                    r.status, strlen(r.out), r.err, message);
        run_free(&r);
        fail();
    }
    run_free(&r);
}

/* Writes text to a fresh temporary file; the caller unlinks it. */
static inline void write_temp(char *path_template, const char *text)
{
    int fd = mkstemp(path_template);
    assert_true(fd >= 0);
    FILE *f = fdopen(fd, "w");
    fputs(text, f);
    fclose(f);
}

#endif
