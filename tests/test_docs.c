/* Every sextant command the docs show is run, and what the docs print under
 * it must appear in its output, line by line in order (stdout and stderr
 * together): the docs cannot go stale.  A block may be an excerpt: lines the
 * docs leave out are skipped, and a line "..." marks a cut.  The search's
 * timing ("searched N layouts in X s (Y layouts/s)") is compared without X
 * and Y.
 *
 * A command with a trailing shell comment ("# ...") is an illustration that
 * needs files the test does not make, and is not run.
 *
 *   test_docs                check README.md, docs/guide.md, docs/tutorial.md
 *   test_docs --update       rewrite each stale example from the real output,
 *                            keeping its shape: an excerpt keeps as many lines
 *                            before and after its "..." as it had */
#include "test_util.h"

#include <string.h>

static const char *const doc_files[] = {"README.md", "docs/guide.md", "docs/tutorial.md"};

typedef struct {
    char **line;
    int n, cap;
} lines;

static void push_line(lines *l, const char *text, size_t len)
{
    if (l->n == l->cap) {
        l->cap = l->cap ? 2 * l->cap : 256;
        l->line = realloc(l->line, (size_t)l->cap * sizeof *l->line);
        assert_non_null(l->line);
    }
    l->line[l->n] = strndup(text, len);
    assert_non_null(l->line[l->n]);
    l->n++;
}

static lines split_lines(const char *text)
{
    lines l = {0};
    while (*text) {
        const char *end = strchr(text, '\n');
        size_t len = end ? (size_t)(end - text) : strlen(text);
        push_line(&l, text, len);
        text += len + (end ? 1 : 0);
    }
    return l;
}

static void free_lines(lines *l)
{
    for (int i = 0; i < l->n; i++) free(l->line[i]);
    free(l->line);
    memset(l, 0, sizeof *l);
}

/* A line as compared: trailing blanks dropped, the search's seconds and rate masked. */
static void normalized(const char *line, char *out, size_t outlen)
{
    snprintf(out, outlen, "%s", line);
    size_t n = strlen(out);
    while (n && (out[n - 1] == ' ' || out[n - 1] == '\r')) out[--n] = '\0';
    char *in = strncmp(out, "searched ", 9) == 0 ? strstr(out, " layouts in ") : NULL;
    char *close = in ? strchr(in, ')') : NULL;
    if (in && close) memmove(in + 12, close, strlen(close) + 1);
}

static int is_cut(const char *line) { return !strcmp(line, "...") || !strcmp(line, "…"); }

/* Whether every expected line (cuts skipped) appears in the output, in order. */
static int appears_in_order(lines *expected, int from, int to, lines *output, char *first_missing, size_t len)
{
    char want[4096], got[4096];
    int j = 0;
    for (int i = from; i < to; i++) {
        if (is_cut(expected->line[i])) continue;
        normalized(expected->line[i], want, sizeof want);
        int found = 0;
        while (j < output->n && !found) {
            normalized(output->line[j++], got, sizeof got);
            found = !strcmp(want, got);
        }
        if (!found) {
            snprintf(first_missing, len, "%s", want);
            return 0;
        }
    }
    return 1;
}

/* The command of a "$ sextant ..." or "$ build/sextant ..." line and its continuation lines ending in '\'. */
static int command_at(lines *doc, int i, char *cmd, size_t len, int *next)
{
    const char *t = doc->line[i];
    const char *rest = !strncmp(t, "$ sextant ", 10) ? t + 10 : !strncmp(t, "$ build/sextant ", 16) ? t + 16 : NULL;
    if (!rest) return 0;
    snprintf(cmd, len, "%s", rest);
    while (strlen(cmd) && cmd[strlen(cmd) - 1] == '\\' && i + 1 < doc->n) {
        cmd[strlen(cmd) - 1] = ' ';
        i++;
        const char *more = doc->line[i];
        while (*more == ' ') more++;
        snprintf(cmd + strlen(cmd), len - strlen(cmd), "%s", more);
    }
    *next = i + 1;
    return 1;
}

/* The expected lines of a command end at the block's end or at the next "$ " line. */
static int expected_end(lines *doc, int from)
{
    int i = from;
    while (i < doc->n && strncmp(doc->line[i], "```", 3) != 0 && strncmp(doc->line[i], "$ ", 2) != 0) i++;
    return i;
}

/* The new expected lines: the whole output when the old ones were (about) all of it, else its shape. */
static void reshaped(lines *expected, int from, int to, lines *output, lines *out)
{
    int n = to - from, cut = -1;
    for (int i = from; i < to; i++)
        if (is_cut(expected->line[i])) cut = i - from;
    if (cut < 0 && (n >= output->n - 3 || n == 0)) {
        for (int i = 0; i < output->n; i++) push_line(out, output->line[i], strlen(output->line[i]));
        return;
    }
    int head = cut < 0 ? n : cut, tail = cut < 0 ? 0 : n - cut - 1;
    if (head + tail >= output->n) { head = output->n; tail = 0; }
    for (int i = 0; i < head; i++) push_line(out, output->line[i], strlen(output->line[i]));
    if (cut >= 0) push_line(out, "...", 3);
    for (int i = output->n - tail; i < output->n; i++) push_line(out, output->line[i], strlen(output->line[i]));
}

/* Checks (or rewrites) one file; returns the stale examples' count. */
static int check_file(const char *name, int update)
{
    char path[1024];
    snprintf(path, sizeof path, "%s/%s", SEXTANT_ROOT, name);
    char *text = slurp(path);
    lines doc = split_lines(text), fresh = {0};
    free(text);
    int stale = 0, in_block = 0;
    for (int i = 0; i < doc.n;) {
        char cmd[4096];
        int next;
        if (!strncmp(doc.line[i], "```", 3)) in_block = !in_block;
        if (!in_block || !command_at(&doc, i, cmd, sizeof cmd, &next)) {
            push_line(&fresh, doc.line[i], strlen(doc.line[i]));
            i++;
            continue;
        }
        for (int k = i; k < next; k++) push_line(&fresh, doc.line[k], strlen(doc.line[k]));
        int end = expected_end(&doc, next);
        if (strstr(cmd, " # ")) {
            for (int k = next; k < end; k++) push_line(&fresh, doc.line[k], strlen(doc.line[k]));
            i = end;
            continue;
        }
        /* in a subshell, so that a pipe in the example reads sextant, not the runner's </dev/null */
        char wrapped[4200];
        snprintf(wrapped, sizeof wrapped, "%s )", cmd);
        run_result r = run_sextant_with("cd " SEXTANT_ROOT " && (", wrapped);
        size_t both_len = strlen(r.out) + strlen(r.err) + 1;
        char *both = malloc(both_len);
        assert_non_null(both);
        snprintf(both, both_len, "%s%s", r.out, r.err);
        lines output = split_lines(both);
        free(both);
        char missing[4096] = "";
        if (!appears_in_order(&doc, next, end, &output, missing, sizeof missing)) {
            stale++;
            print_message("%s:%d: `sextant %s` no longer prints: %s\n", name, i + 1, cmd, missing);
            if (update) reshaped(&doc, next, end, &output, &fresh);
        }
        if (!update || !missing[0])
            for (int k = next; k < end; k++) push_line(&fresh, doc.line[k], strlen(doc.line[k]));
        free_lines(&output);
        run_free(&r);
        i = end;
    }
    if (update && stale) {
        char tmp[1100];
        snprintf(tmp, sizeof tmp, "%s.tmp", path);
        FILE *f = fopen(tmp, "w");
        assert_non_null(f);
        for (int i = 0; i < fresh.n; i++) fprintf(f, "%s\n", fresh.line[i]);
        assert_int_equal(fclose(f), 0);
        assert_int_equal(rename(tmp, path), 0);
        print_message("%s: %d example(s) rewritten\n", name, stale);
    }
    free_lines(&doc);
    free_lines(&fresh);
    return stale;
}

static int update_mode;

static void docs_print_what_the_commands_print(void **state)
{
    (void)state;
    int stale = 0;
    for (size_t f = 0; f < sizeof doc_files / sizeof doc_files[0]; f++) stale += check_file(doc_files[f], update_mode);
    if (stale && !update_mode) print_error("%d stale example(s): build/tests/test_docs --update rewrites them\n", stale);
    assert_int_equal(update_mode ? 0 : stale, 0);
}

int main(int argc, char **argv)
{
    update_mode = argc > 1 && !strcmp(argv[1], "--update");
    const struct CMUnitTest tests[] = {cmocka_unit_test(docs_print_what_the_commands_print)};
    return cmocka_run_group_tests_name("docs", tests, NULL, NULL);
}
