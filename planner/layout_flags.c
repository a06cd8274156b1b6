/* The layout flags (--tp, --mbs, --attention, ...) read into a layout_t: the one parser that sextant's
 * estimate, explain and plan (planner/cli.c) and sextant-gpu's train and ops (validator/) share, so a
 * flag means the same and is refused with the same line everywhere.  Each program keeps its own
 * defaults (the template given to layout_flags_init) and its own list of the flags it takes. */
#include "planner.h"

#include <ctype.h>
#include <errno.h>
#include <math.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

static const struct {
    const char *flag;
    unsigned bit;
    int takes_value;
} layout_flag_table[] = {
    {"--tp", LAYOUT_FLAG_TP, 1}, {"--pp", LAYOUT_FLAG_PP, 1}, {"--dp", LAYOUT_FLAG_DP, 1}, {"--vpp", LAYOUT_FLAG_VPP, 1},
    {"--cp", LAYOUT_FLAG_CP, 1}, {"--ep", LAYOUT_FLAG_EP, 1}, {"--etp", LAYOUT_FLAG_ETP, 1}, {"--mbs", LAYOUT_FLAG_MBS, 1}, {"--gbs", LAYOUT_FLAG_GBS, 1},
    {"--seq", LAYOUT_FLAG_SEQ, 1}, {"--gpus-per-node", LAYOUT_FLAG_GPUS_PER_NODE, 1}, {"--sp", LAYOUT_FLAG_SP, 0},
    {"--zero", LAYOUT_FLAG_ZERO, 1}, {"--recompute", LAYOUT_FLAG_RECOMPUTE, 1},
    {"--recompute-layers", LAYOUT_FLAG_RECOMPUTE_LAYERS, 1}, {"--recompute-modules", LAYOUT_FLAG_RECOMPUTE_MODULES, 1},
    {"--attention", LAYOUT_FLAG_ATTENTION, 1}, {"--precision", LAYOUT_FLAG_PRECISION, 1}, {"--loss", LAYOUT_FLAG_LOSS, 1},
    {"--tp-overlap", LAYOUT_FLAG_TP_OVERLAP, 1}, {"--grad-sync", LAYOUT_FLAG_GRAD_SYNC, 1},
    {"--grad-accum", LAYOUT_FLAG_GRAD_ACCUM, 1}, {"--expert-gemm", LAYOUT_FLAG_EXPERT_GEMM, 1},
    {"--expert-rows", LAYOUT_FLAG_EXPERT_ROWS, 1},
    {"--zero-waits", LAYOUT_FLAG_ZERO_WAITS, 1},
    {"--logit-metrics", LAYOUT_FLAG_LOGIT_METRICS, 1},
    {"--cp-comm", LAYOUT_FLAG_CP_COMM, 1}, {"--ep-overlap", LAYOUT_FLAG_EP_OVERLAP, 0},
    {"--fp32-grads", LAYOUT_FLAG_FP32_GRADS, 0},
    {"--first-stage-layers", LAYOUT_FLAG_FIRST_STAGE_LAYERS, 1}, {"--last-stage-layers", LAYOUT_FLAG_LAST_STAGE_LAYERS, 1},
};
#define LAYOUT_FLAGS (sizeof layout_flag_table / sizeof layout_flag_table[0])

/* Whether text starts with a plain decimal number, digits with an optional fraction and exponent
 * (2, 0.5, 1e12): no sign, space, hexadecimal, inf or nan, which strtod would take.  *len: its length. */
static int plain_decimal(const char *text, size_t *len)
{
    const char *p = text;
    int digits = 0;
    while (isdigit((unsigned char)*p)) { p++; digits++; }
    if (*p == '.') {
        p++;
        while (isdigit((unsigned char)*p)) { p++; digits++; }
    }
    if (!digits) return 0;
    if (*p == 'e' || *p == 'E') {
        const char *q = p + 1;
        if (*q == '+' || *q == '-') q++;
        if (!isdigit((unsigned char)*q)) return 0;
        while (isdigit((unsigned char)*q)) q++;
        p = q;
    }
    *len = (size_t)(p - text);
    return 1;
}

int quantity_parse(const char *text, double *out)
{
    size_t len;
    if (!text || !plain_decimal(text, &len)) return -1;
    char *end;
    errno = 0;
    double v = strtod(text, &end);
    if (end != text + len || errno == ERANGE) return -1;
    double scale = 1.0;
    if (*end) {
        switch (toupper((unsigned char)*end)) {
        case 'K': scale = 1e3; break;
        case 'M': scale = 1e6; break;
        case 'B': case 'G': scale = 1e9; break;
        case 'T': scale = 1e12; break;
        default: return -1;
        }
        if (end[1] != '\0') return -1;
    }
    v *= scale;
    if (!isfinite(v) || v <= 0.0) return -1;
    *out = v;
    return 0;
}

static int say(char *err, size_t errlen, const char *fmt, ...) __attribute__((format(printf, 3, 4)));
static int say(char *err, size_t errlen, const char *fmt, ...)
{
    va_list ap;
    va_start(ap, fmt);
    if (err && errlen) vsnprintf(err, errlen, fmt, ap);
    va_end(ap);
    return -1;
}

int count_parse(const char *flag, const char *text, int64_t max, int64_t *out, char *err, size_t errlen)
{
    double v;
    if (!text) return say(err, errlen, "%s: missing value", flag);
    if (quantity_parse(text, &v) != 0 || v != floor(v)) return say(err, errlen, "%s: '%s' is not a positive integer", flag, text);
    if (v > (double)max) return say(err, errlen, "%s: %s is larger than %lld", flag, text, (long long)max);
    *out = (int64_t)v;
    return 0;
}

void layout_flags_init(layout_flags *f, const layout_t *defaults)
{
    memset(f, 0, sizeof *f);
    if (defaults) f->l = *defaults;
}

const char *layout_flag_name(size_t i) { return i < LAYOUT_FLAGS ? layout_flag_table[i].flag : NULL; }

unsigned layout_flag_bit(const char *flag)
{
    for (size_t i = 0; i < LAYOUT_FLAGS; i++)
        if (!strcmp(flag, layout_flag_table[i].flag)) return layout_flag_table[i].bit;
    return 0;
}

/* The value of one flag that takes one (bit says which) into f->l; -1 after the line in err. */
static int parse_value(unsigned bit, const char *flag, const char *t, layout_t *l, char *err, size_t errlen)
{
    const char *shown = t ? t : "";
    switch (bit) {
    case LAYOUT_FLAG_TP: return count_parse(flag, t, 100000, &l->tp, err, errlen);
    case LAYOUT_FLAG_PP: return count_parse(flag, t, 100000, &l->pp, err, errlen);
    case LAYOUT_FLAG_DP: return count_parse(flag, t, 10000000, &l->dp, err, errlen);
    case LAYOUT_FLAG_VPP: return count_parse(flag, t, 1000, &l->vpp, err, errlen);
    case LAYOUT_FLAG_CP: return count_parse(flag, t, 100000, &l->cp, err, errlen);
    case LAYOUT_FLAG_EP: return count_parse(flag, t, 100000, &l->ep, err, errlen);
    case LAYOUT_FLAG_ETP: return count_parse(flag, t, 100000, &l->etp, err, errlen);
    case LAYOUT_FLAG_MBS: return count_parse(flag, t, 1000000, &l->mbs, err, errlen);
    case LAYOUT_FLAG_GBS: return count_parse(flag, t, 1000000000, &l->gbs, err, errlen);
    case LAYOUT_FLAG_SEQ: return count_parse(flag, t, 100000000, &l->seq, err, errlen);
    case LAYOUT_FLAG_GPUS_PER_NODE: return count_parse(flag, t, 1024, &l->gpus_per_node, err, errlen);
    case LAYOUT_FLAG_RECOMPUTE_LAYERS: return count_parse(flag, t, 100000, &l->recompute_layers, err, errlen);
    case LAYOUT_FLAG_FIRST_STAGE_LAYERS: return count_parse(flag, t, 100000, &l->first_stage_layers, err, errlen);
    case LAYOUT_FLAG_LAST_STAGE_LAYERS: return count_parse(flag, t, 100000, &l->last_stage_layers, err, errlen);
    case LAYOUT_FLAG_LOGIT_METRICS:
        if (t && !strcmp(t, "0")) {
            l->logit_metrics = 0;
            return 0;
        }
        return count_parse(flag, t, 16, &l->logit_metrics, err, errlen);
    case LAYOUT_FLAG_ZERO:
        if (!t || strlen(t) != 1 || t[0] < '0' || t[0] > '3') return say(err, errlen, "--zero: '%s' is not one of 0|1|2|3", shown);
        l->zero = t[0] - '0';
        return 0;
    case LAYOUT_FLAG_RECOMPUTE:
        if (recompute_parse(t, &l->recompute) != 0)
            return say(err, errlen, "--recompute: '%s' is not one of none|selective|full", shown);
        return 0;
    case LAYOUT_FLAG_RECOMPUTE_MODULES:
        if (recompute_modules_parse(t, &l->recompute_modules) != 0)
            return say(err, errlen, "--recompute-modules: '%s' is not a comma-separated list of layernorm, mla_up_proj, moe_act",
                       shown);
        return 0;
    case LAYOUT_FLAG_ATTENTION:
        if (attention_parse(t, &l->attention) != 0)
            return say(err, errlen, "--attention: '%s' is not one of flash|unfused|flash1|flash1-triton|sextant", shown);
        return 0;
    case LAYOUT_FLAG_PRECISION:
        if (!t || precision_parse(t, &l->precision) != 0)
            return say(err, errlen, "--precision: '%s' is not one of fp32|tf32|fp16|bf16|fp8", shown);
        return 0;
    case LAYOUT_FLAG_LOSS:
        if (loss_kernel_parse(t, &l->loss) != 0)
            return say(err, errlen, "--loss: '%s' is not one of fused|fp32|fused-outplace", shown);
        return 0;
    case LAYOUT_FLAG_TP_OVERLAP:
        if (tp_overlap_parse(t, &l->tp_overlap) != 0) return say(err, errlen, "--tp-overlap: '%s' is not one of none|backward", shown);
        return 0;
    case LAYOUT_FLAG_GRAD_SYNC:
        if (grad_sync_parse(t, &l->grad_sync) != 0) return say(err, errlen, "--grad-sync: '%s' is not one of overlap|after", shown);
        return 0;
    case LAYOUT_FLAG_GRAD_ACCUM:
        if (grad_accum_parse(t, &l->grad_accum) != 0)
            return say(err, errlen, "--grad-accum: '%s' is not one of in-place|fp32-copy", shown);
        return 0;
    case LAYOUT_FLAG_EXPERT_GEMM:
        if (expert_gemm_parse(t, &l->expert_gemm) != 0)
            return say(err, errlen, "--expert-gemm: '%s' is not one of streams|grouped", shown);
        return 0;
    case LAYOUT_FLAG_EXPERT_ROWS:
        if (expert_rows_parse(t, &l->expert_rows) != 0)
            return say(err, errlen, "--expert-rows: '%s' is not one of routed|even", shown);
        return 0;
    case LAYOUT_FLAG_ZERO_WAITS:
        if (zero_waits_parse(t, &l->zero_waits) != 0)
            return say(err, errlen, "--zero-waits: '%s' is not one of microbatch|step", shown);
        return 0;
    case LAYOUT_FLAG_CP_COMM:
        if (cp_comm_parse(t, &l->cp_comm) != 0) return say(err, errlen, "--cp-comm: '%s' is not one of ring|allgather", shown);
        return 0;
    }
    return say(err, errlen, "%s: internal: no parser", flag);
}

int layout_flag_parse(const char *flag, const char *value, layout_flags *f, char *err, size_t errlen)
{
    for (size_t i = 0; i < LAYOUT_FLAGS; i++) {
        if (strcmp(flag, layout_flag_table[i].flag)) continue;
        unsigned bit = layout_flag_table[i].bit;
        if (!layout_flag_table[i].takes_value) {
            if (bit == LAYOUT_FLAG_SP) f->l.sp = 1;
            else if (bit == LAYOUT_FLAG_EP_OVERLAP) f->l.ep_overlap = 1;
            else f->l.fp32_grads = 1;
            f->given |= bit;
            return 1;
        }
        if (parse_value(bit, flag, value, &f->l, err, errlen) != 0) return -1;
        f->given |= bit;
        return 2;
    }
    return 0;
}
