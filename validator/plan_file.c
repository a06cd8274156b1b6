/* validate --plan's input, read strictly (validator/plan_file.h). */
#include "plan_file.h"

#include <cjson/cJSON.h>
#include <stdio.h>
#include <string.h>

static const cJSON *json_get(const cJSON *o, const char *key)
{
    return cJSON_IsObject(o) ? cJSON_GetObjectItemCaseSensitive(o, key) : NULL;
}

/* Reads what `sextant plan --format json` (its first layout) or `sextant
 * estimate --format json` printed; -1 after one stderr line naming the field. */
int read_plan(const char *path, plan_file *p)
{
    FILE *f = fopen(path, "rb");
    if (!f) { fprintf(stderr, "sextant-gpu: --plan %s: cannot open\n", path); return -1; }
    static char text[1 << 20];
    size_t n = fread(text, 1, sizeof text - 1, f);
    int longer = fgetc(f) != EOF;
    fclose(f);
    text[n] = '\0';
    if (longer || memchr(text, '\0', n)) {
        fprintf(stderr, "sextant-gpu: --plan %s: %s\n", path, longer ? "larger than 1 MiB: not a plan" : "a NUL byte: not JSON text");
        return -1;
    }
    /* strict: the object and nothing after it */
    const char *end = NULL;
    cJSON *root = cJSON_ParseWithOpts(text, &end, 1);
    if (!root) {
        const char *at = end ? end : cJSON_GetErrorPtr();
        fprintf(stderr, "sextant-gpu: --plan %s: not one JSON value (near byte %ld)\n", path, at ? (long)(at - text) : 0L);
        return -1;
    }
    int rc = -1;
    const char *twice = NULL;
    int duplicate = json_duplicate_key(root, &twice);
    if (duplicate) {
        if (duplicate > 0) fprintf(stderr, "sextant-gpu: --plan %s: key \"%s\" given twice in one object\n", path, twice);
        else fprintf(stderr, "sextant-gpu: --plan %s: out of memory checking keys\n", path);
        goto done;
    }
    const cJSON *model = json_get(json_get(root, "model"), "name"), *layout = json_get(root, "layout"), *gpu = NULL;
    const cJSON *top = json_get(root, "top");
    if (cJSON_IsArray(top)) {          /* sextant plan: the best layout */
        const cJSON *best = cJSON_GetArrayItem(top, 0);
        layout = json_get(best, "layout");
        gpu = json_get(best, "gpu");
    } else {
        gpu = json_get(json_get(root, "gpu"), "name");
    }
    const char *missing = !cJSON_IsString(model) ? "model.name" : !cJSON_IsString(gpu) ? "gpu" : !cJSON_IsObject(layout) ? "layout" : NULL;
    if (missing) { fprintf(stderr, "sextant-gpu: --plan %s: no %s (a `sextant plan` or `sextant estimate` JSON?)\n", path, missing); goto done; }
    snprintf(p->model, sizeof p->model, "%s", model->valuestring);
    snprintf(p->gpu, sizeof p->gpu, "%s", gpu->valuestring);
    /* the overlay it was priced with: estimate's {file}, or plan's [{gpu, file}] entry for its GPU */
    p->calibration[0] = '\0';
    const cJSON *cal = json_get(root, "calibration"), *file = NULL;
    if (cJSON_IsArray(cal)) {
        const cJSON *entry;
        cJSON_ArrayForEach(entry, cal) {
            const cJSON *g = json_get(entry, "gpu");
            if (cJSON_IsString(g) && !strcmp(g->valuestring, p->gpu)) file = json_get(entry, "file");
        }
    } else {
        file = json_get(cal, "file");
    }
    if (file && (!cJSON_IsString(file) || strlen(file->valuestring) >= sizeof p->calibration)) {
        fprintf(stderr, "sextant-gpu: --plan %s: calibration.file is not a path\n", path);
        goto done;
    }
    if (file) snprintf(p->calibration, sizeof p->calibration, "%s", file->valuestring);
    layout_t *l = &p->layout;
    memset(l, 0, sizeof *l);
    static const char *const ints[] = {"gpus", "tp", "pp", "dp", "vpp", "mbs", "gbs", "seq", "zero", "gpus_per_node"};
    int64_t *fields[] = {&l->gpus, &l->tp, &l->pp, &l->dp, &l->vpp, &l->mbs, &l->gbs, &l->seq, NULL, &l->gpus_per_node};
    for (size_t i = 0; i < sizeof ints / sizeof ints[0]; i++) {
        const cJSON *v = json_get(layout, ints[i]);
        if (!v && fields[i] == &l->gpus_per_node) continue;   /* sextant plan leaves it out: the node's */
        /* ZeRO is a stage, 0 to 3; the rest are counts (found by fuzz/fuzz_plan.c: a zero of 124895 passed) */
        const int is_zero_stage = fields[i] == NULL;
        if (!cJSON_IsNumber(v) || v->valuedouble < (is_zero_stage ? 0 : 1) || v->valuedouble > (is_zero_stage ? 3 : 1e9) ||
            v->valuedouble != (double)(int64_t)v->valuedouble) {
            fprintf(stderr, "sextant-gpu: --plan %s: layout.%s is missing or out of range\n", path, ints[i]);
            goto done;
        }
        if (fields[i]) *fields[i] = (int64_t)v->valuedouble;
        else l->zero = (int)v->valuedouble;
    }
    /* context parallelism: the training step runs the ring (validator/cp.c); validate slices the degree */
    const cJSON *cpv = json_get(layout, "cp"), *cpc = json_get(layout, "cp_comm");
    if (cpv && (!cJSON_IsNumber(cpv) || cpv->valuedouble < 1 || cpv->valuedouble > 1e9 ||
                cpv->valuedouble != (double)(int64_t)cpv->valuedouble)) {
        fprintf(stderr, "sextant-gpu: --plan %s: layout.cp is out of range\n", path);
        goto done;
    }
    l->cp = cpv ? (int64_t)cpv->valuedouble : 1;
    if (cpc && (!cJSON_IsString(cpc) || cp_comm_parse(cpc->valuestring, &l->cp_comm) != 0)) {
        fprintf(stderr, "sextant-gpu: --plan %s: layout.cp_comm is not ring or allgather\n", path);
        goto done;
    }
    if (l->cp > 1 && l->cp_comm != CP_COMM_RING) {
        fprintf(stderr, "sextant-gpu: --plan %s: layout.cp_comm allgather: the training step runs CP as a ring\n", path);
        goto done;
    }
    /* expert tensor parallelism: a whole degree, absent for the default (TP's) */
    const cJSON *etp = json_get(layout, "etp");
    if (etp && (!cJSON_IsNumber(etp) || etp->valuedouble < 1 || etp->valuedouble > 1e9 ||
                etp->valuedouble != (double)(int64_t)etp->valuedouble)) {
        fprintf(stderr, "sextant-gpu: --plan %s: layout.etp is not a whole number of 1 or more\n", path);
        goto done;
    }
    l->etp = etp ? (int64_t)etp->valuedouble : 0;
    /* expert parallelism (MoE models): a whole degree, 1 when absent */
    const cJSON *ep = json_get(layout, "ep");
    l->ep = 1;
    if (ep) {
        if (!cJSON_IsNumber(ep) || ep->valuedouble < 1 || ep->valuedouble > 1e9 || ep->valuedouble != (double)(int64_t)ep->valuedouble) {
            fprintf(stderr, "sextant-gpu: --plan %s: layout.ep is not a whole number of 1 or more\n", path);
            goto done;
        }
        l->ep = (int64_t)ep->valuedouble;
    }
    /* the pipeline's split as the plan costed it (estimate writes it, with one stage all L: not a split): whole
     * counts, 0 when absent */
    const char *split_keys[] = {"first_stage_layers", "last_stage_layers"};
    int64_t *split[] = {&l->first_stage_layers, &l->last_stage_layers};
    for (int i = 0; i < 2; i++) {
        const cJSON *v = json_get(layout, split_keys[i]);
        *split[i] = 0;
        if (!v) continue;
        if (!cJSON_IsNumber(v) || v->valuedouble < 1 || v->valuedouble > 1e6 || v->valuedouble != (double)(int64_t)v->valuedouble) {
            fprintf(stderr, "sextant-gpu: --plan %s: layout.%s is not a whole number of 1 or more\n", path, split_keys[i]);
            goto done;
        }
        if (l->pp > 1) *split[i] = (int64_t)v->valuedouble;
    }
    /* the training step runs no partial recomputation: refused, not dropped */
    const cJSON *partial = json_get(layout, "recompute_layers");
    if (partial && (!cJSON_IsNumber(partial) || partial->valuedouble != 0.0)) {
        fprintf(stderr, "sextant-gpu: --plan %s: layout.recompute_layers: the training step runs full recomputation on "
                "every layer or none\n", path);
        goto done;
    }
    const cJSON *loss = json_get(layout, "loss");
    if (loss && (!cJSON_IsString(loss) || strcmp(loss->valuestring, "fused"))) {
        fprintf(stderr, "sextant-gpu: --plan %s: layout.loss: the training step's loss is fused\n", path);
        goto done;
    }
    const cJSON *metrics = json_get(layout, "logit_metrics");
    if (metrics && (!cJSON_IsNumber(metrics) || metrics->valuedouble != 0.0)) {
        fprintf(stderr, "sextant-gpu: --plan %s: layout.logit_metrics: the training step computes no metrics on the logits\n",
                path);
        goto done;
    }
    const cJSON *accum = json_get(layout, "grad_accum");
    if (accum && (!cJSON_IsString(accum) || strcmp(accum->valuestring, "in-place"))) {
        fprintf(stderr, "sextant-gpu: --plan %s: layout.grad_accum: the training step accumulates gradients in place\n", path);
        goto done;
    }
    const cJSON *experts = json_get(layout, "expert_gemm");
    if (experts && (!cJSON_IsString(experts) || strcmp(experts->valuestring, "streams"))) {
        fprintf(stderr, "sextant-gpu: --plan %s: layout.expert_gemm: the training step runs one GEMM per expert (streams)\n",
                path);
        goto done;
    }
    /* experts padded to a capacity: the step runs the router's rows (SEXTANT_MOE_ROUTE=balanced deals them evenly, a
     * diagnostic the model does not learn its routing under) */
    const cJSON *rows = json_get(layout, "expert_rows");
    if (rows && (!cJSON_IsString(rows) || strcmp(rows->valuestring, "routed"))) {
        fprintf(stderr, "sextant-gpu: --plan %s: layout.expert_rows: the training step runs the router's rows (routed)\n", path);
        goto done;
    }
    const cJSON *rc_ = json_get(layout, "recompute"), *att = json_get(layout, "attention"), *sp = json_get(layout, "sp");
    const cJSON *prec = json_get(layout, "precision");
    if (!cJSON_IsString(rc_) || (att && !cJSON_IsString(att)) || !cJSON_IsBool(sp) || !cJSON_IsString(prec)) {
        fprintf(stderr, "sextant-gpu: --plan %s: layout.recompute, .attention, .sp or .precision is missing\n", path);
        goto done;
    }
    /* sextant plan searches with the fused kernel and does not print it */
    l->attention = ATTENTION_FLASH;
    if (recompute_parse(rc_->valuestring, &l->recompute) != 0 || (att && attention_parse(att->valuestring, &l->attention) != 0)) {
        fprintf(stderr, "sextant-gpu: --plan %s: layout.recompute '%s' or .attention '%s' is not none|selective|full or flash|unfused\n",
                path, rc_->valuestring, att ? att->valuestring : "flash");
        goto done;
    }
    l->sp = cJSON_IsTrue(sp);
    /* FP8 plans run the step's FP8 GEMMs (validator/fp8.c, train --precision fp8) */
    if (strcmp(prec->valuestring, "bf16") && strcmp(prec->valuestring, "fp8")) {
        fprintf(stderr, "sextant-gpu: --plan %s: layout.precision %s: the training step runs bf16 or fp8\n", path,
                prec->valuestring);
        goto done;
    }
    l->precision = strcmp(prec->valuestring, "fp8") ? PREC_BF16 : PREC_FP8;
    rc = 0;
done:
    cJSON_Delete(root);
    return rc;
}

