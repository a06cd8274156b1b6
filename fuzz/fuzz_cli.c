/* Fuzz target: the command line.  The bytes are split at newlines into the
 * arguments after "sextant"; planner/cli.c is compiled into this target (its
 * main renamed) so that its own parser and checks run in-process: parse_args,
 * the per-command flag refusal, --out/--plot's target checks, plan's --gpus
 * range, and for estimate, explain, models and hw the whole command on the
 * shipped data.  Not run: calibrate and validate (they exec sextant-gpu), plan,
 * published and fit-power (a search or a file written per input), and any
 * input naming a file to read (--hwdb, --models, --model-config,
 * --calibration FILE, --runs): the other targets fuzz those files' contents. */
#include "fuzz_util.h"

#define main sextant_cli_main
int sextant_cli_main(int argc, char **argv);
#include "../planner/cli.c"
#undef main

#define ARGS_MAX 32

static int reads_files(const options *o)
{
    return o->hwdb_dir || o->models_file || o->model_config || o->runs ||
           (o->calibration && strcmp(o->calibration, "none"));
}

static void run_command(const options *o)
{
    char *text = NULL;
    size_t len = 0;
    FILE *out = open_memstream(&text, &len);
    if (!out) abort();
    const char *root = SEXTANT_ROOT;
    if (!strcmp(o->command, "estimate") || !strcmp(o->command, "explain")) {
        if (o->spec_examples) report_spec_examples(out);
        else cmd_estimate(o, root, out);
    } else if (!strcmp(o->command, "models")) {
        model_zoo zoo;
        if (!load_zoo(o, root, &zoo)) print_models(out, &zoo, o->format);
        model_zoo_free(&zoo);
    } else if (!strcmp(o->command, "hw")) {
        hwdb db;
        if (!load_hwdb(o, root, &db, 0)) {
            cmd_hw(o, &db, out);
            hwdb_free(&db);
        }
    }
    fclose(out);
    free(text);
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
    char *copy = malloc(size + 1);
    if (!copy) abort();
    memcpy(copy, data, size);
    copy[size] = '\0';
    char *argv[ARGS_MAX + 1];
    int argc = 0;
    argv[argc++] = "sextant";
    for (char *save = NULL, *a = strtok_r(copy, "\n", &save); a && argc < ARGS_MAX; a = strtok_r(NULL, "\n", &save))
        argv[argc++] = a;
    argv[argc] = NULL;
    options o;
    if (argc > 1 && (!strcmp(argv[1], "calibrate") || !strcmp(argv[1], "validate"))) goto done;
    if (parse_args(argc, argv, &o) != 0 || !o.command) goto done;
    if (!strcmp(o.command, "help") || !strcmp(o.command, "version")) goto done;
    if (refuse_other_commands_flags(&o) || refuse_unwritable_targets(&o)) goto done;
    if (o.gpus_text) {
        static plan_request req;
        parse_gpu_range(o.gpus_text, &req);
    }
    if (!reads_files(&o)) run_command(&o);
done:
    free(copy);
    return 0;
}
