/* The plan as people and scripts read it, and as framework launch flags. */
#include "planner.h"

#include <cjson/cJSON.h>
#include <math.h>
#include <string.h>

#define GIB 1073741824.0

static const char *objective_name(objective_t o)
{
    return o == OBJECTIVE_COST ? "cost" : o == OBJECTIVE_GPUS ? "GPUs" : "time-to-train";
}

static double objective_of(const plan_request *req, const plan_candidate *c)
{
    if (req->objective == OBJECTIVE_COST) return c->cost_usd;
    if (req->objective == OBJECTIVE_GPUS) return (double)c->layout.gpus;
    return c->time_to_train_s;
}

/* The term that most limits the winner: what a reviewer would say it is bound by. */
static void winner_reason(FILE *out, const plan_request *req, const plan_result *res)
{
    const plan_candidate *w = &res->top[0];
    const layout_t *l = &w->layout;
    double overhead[] = {w->tp_comm_s, w->pp_comm_s, w->dp_comm_s, w->bubble_s, w->cp_comm_s};
    const char *names[] = {"TP communication", "PP communication", "exposed DP communication", "the pipeline bubble",
                           "exposed CP communication"};
    int worst = 0;
    for (int i = 1; i < 5; i++)
        if (overhead[i] > overhead[worst]) worst = i;
    double memory_share = w->memory_total / w->memory_capacity;
    fprintf(out, "\nWhy it wins: on %s it trains in %.1f days at %.1f%% MFU, ranked by %s. ", req->gpu[w->gpu_type]->name,
            w->time_to_train_s / 86400.0, 100.0 * w->mfu, objective_name(req->objective));
    if (overhead[worst] < 0.01 * w->step_s)
        fprintf(out, "Compute is %.0f%% of its %.3g s step: communication and the bubble cost under 1%%. ",
                100.0 * w->compute_s / w->step_s, w->step_s);
    else
        fprintf(out, "Compute is %.0f%% of its %.3g s step; the largest overhead is %s (%.1f%%). ",
                100.0 * w->compute_s / w->step_s, w->step_s, names[worst], 100.0 * overhead[worst] / w->step_s);
    if (memory_share > 0.85)
        fprintf(out, "Memory binds: it uses %.0f%% of the GPU, so the layouts that shard less (lower TP/PP, lower ZeRO, "
                     "less recomputation) do not fit. ", 100.0 * memory_share);
    else
        fprintf(out, "It uses %.0f of %.0f GiB, so memory does not bind. ", w->memory_total / GIB, w->memory_capacity / GIB);
    if (w->step_clock_hz > 0) {
        const hw_gpu *g = req->gpu[w->gpu_type];
        double cap = g->power_cap_w > 0 ? g->power_cap_w : g->tdp_w;
        if (w->clock_fraction < 1.0)
            fprintf(out, "Under the %.0f W power cap it runs at %.0f MHz (%.0f%% of the top clock): at the top clock it "
                         "would draw %.0f W. ", cap, w->step_clock_hz / 1e6, 100.0 * w->clock_fraction, w->top_clock_power_w);
        else
            fprintf(out, "It stays under the %.0f W power cap at the top clock (%.0f W). ", cap, w->top_clock_power_w);
    }
    if (l->tp > 1)
        fprintf(out, "TP %lld keeps within the node's fast link. ", (long long)l->tp);
    if (layout_etp(l) != l->tp)
        fprintf(out, "Its experts split over ETP %lld, not TP %lld: %s. ", (long long)layout_etp(l), (long long)l->tp,
                layout_etp(l) == 1 ? "each GPU runs whole experts on the tokens it receives, without gathering them over TP"
                                   : "the routed tokens are gathered over the expert TP group");
    if (layout_cp(l) > 1)
        fprintf(out, "CP %lld gives each GPU %lld of the %lld tokens of a sequence. ", (long long)l->cp,
                (long long)(l->seq / l->cp), (long long)l->seq);
    if (l->pp > 1)
        fprintf(out, "PP %lld with %lld micro-batch(es) per step leaves a bubble of %.1f%%. ", (long long)l->pp,
                (long long)(l->gbs / (l->mbs * l->dp)), 100.0 * w->bubble_s / w->step_s);
    if (res->tie_broken) {
        const plan_candidate *b = &res->objective_best;
        char why[96];
        plan_comm_order(l, &b->layout, why, sizeof why);
        fprintf(out, "It ties with the best by %s (TP %lld, PP %lld, DP %lld, ZeRO %d, SP %s, %.2f%% ahead): within %.1f%% "
                     "the plan takes fewer and cheaper communication patterns (ZeRO stage, then PP, VPP, TP, SP), here %s. ",
                objective_name(req->objective), (long long)b->layout.tp, (long long)b->layout.pp, (long long)b->layout.dp,
                b->layout.zero, b->layout.sp ? "on" : "off", 100.0 * (1.0 - objective_of(req, b) / objective_of(req, w)),
                100.0 * PLAN_TIE_FRACTION, why);
    }
    if (res->ntop > 1) {
        const plan_candidate *r = &res->top[1];
        char cp_text[48] = "";
        if (layout_cp(&r->layout) > 1) snprintf(cp_text, sizeof cp_text, ", CP %lld", (long long)r->layout.cp);
        if (layout_ep(&r->layout) > 1)
            snprintf(cp_text + strlen(cp_text), sizeof cp_text - strlen(cp_text), ", EP %lld", (long long)r->layout.ep);
        if (layout_etp(&r->layout) != r->layout.tp)
            snprintf(cp_text + strlen(cp_text), sizeof cp_text - strlen(cp_text), ", ETP %lld", (long long)layout_etp(&r->layout));
        double behind = objective_of(req, r) / objective_of(req, w) - 1.0;
        fprintf(out, "The runner-up (TP %lld%s, PP %lld, DP %lld, mbs %lld, recompute %s, ZeRO %d, SP %s) is ",
                (long long)r->layout.tp, cp_text, (long long)r->layout.pp, (long long)r->layout.dp, (long long)r->layout.mbs,
                recompute_name(r->layout.recompute), r->layout.zero, r->layout.sp ? "on" : "off");
        if (behind >= 0) fprintf(out, "%.1f%% behind.", 100.0 * behind);
        else fprintf(out, "%.2f%% ahead, tied, and ranks below it on communication.", -100.0 * behind);
    }
    double low, high;
    if (uncertainty_band(req->bands, &w->layout, w->time_to_train_s, &low, &high)) {
        parallelism_family_t f = parallelism_family(&w->layout);
        fprintf(out, " Its band, sextant's error on %d published runs of its family (%s) widened to the spread between "
                     "sources (made without a source group, such bands held at least 80%% of the left-out rows), reads %.1f to %.1f days.",
                req->bands->rows[f], parallelism_family_name(f), low / 86400.0, high / 86400.0);
    }
    fputc('\n', out);
}

/* The tables show a CP column only when the search took context parallelism in. */
static int searched_cp(const plan_request *req)
{
    return req->cp > 1 || (req->cp == 0 && req->seq >= PLAN_CP_MIN_SEQ);
}

/* The tables show an ETP column only when a layout listed has an expert TP other than its TP. */
static int lists_expert_tp(const plan_result *res)
{
    for (int i = 0; i < res->ntop; i++)
        if (layout_etp(&res->top[i].layout) != res->top[i].layout.tp) return 1;
    for (int i = 0; i < res->nfrontier; i++)
        if (layout_etp(&res->frontier[i].layout) != res->frontier[i].layout.tp) return 1;
    return 0;
}

static void print_candidate_row(FILE *out, const plan_request *req, int etp_column, int rank, const plan_candidate *c)
{
    const layout_t *l = &c->layout;
    fprintf(out, "%4d  %-14s %6lld %3lld ", rank, req->gpu[c->gpu_type]->name, (long long)l->gpus, (long long)l->tp);
    if (searched_cp(req)) fprintf(out, "%3lld ", (long long)layout_cp(l));
    if (model_is_moe(req->model)) fprintf(out, "%3lld ", (long long)layout_ep(l));
    if (etp_column) fprintf(out, "%3lld ", (long long)layout_etp(l));
    fprintf(out, "%3lld %5lld %3lld %4lld %6lld  %-9s %4d %3s %7.1f %9.3f %6.1f%% %9.2f %12.4g", (long long)l->pp, (long long)l->dp,
            (long long)l->vpp, (long long)l->mbs, (long long)l->gbs, recompute_name(l->recompute), l->zero,
            l->sp ? "on" : "off", c->memory_total / GIB, c->step_s, 100.0 * c->mfu, c->time_to_train_s / 86400.0,
            c->cost_usd);
    double low, high;
    if (uncertainty_band(req->bands, l, c->time_to_train_s, &low, &high))
        fprintf(out, "  %7.1f-%.1f", low / 86400.0, high / 86400.0);
    fputc('\n', out);
}

static void print_header(FILE *out, const plan_request *req, int etp_column)
{
    fprintf(out, "%4s  %-14s %6s %3s ", "rank", "gpu", "GPUs", "TP");
    if (searched_cp(req)) fprintf(out, "%3s ", "CP");
    if (model_is_moe(req->model)) fprintf(out, "%3s ", "EP");
    if (etp_column) fprintf(out, "%3s ", "ETP");
    fprintf(out, "%3s %5s %3s %4s %6s  %-9s %4s %3s %7s %9s %7s %9s %12s", "PP", "DP", "VPP", "mbs", "gbs", "recompute", "ZeRO", "SP", "mem GiB", "step s", "MFU", "days", "cost $");
    if (req->bands) fprintf(out, "  days (80%% band)");
    fputc('\n', out);
}

static cJSON *candidate_json(const plan_request *req, const plan_candidate *c)
{
    const layout_t *l = &c->layout;
    cJSON *o = cJSON_CreateObject();
    cJSON_AddStringToObject(o, "gpu", req->gpu[c->gpu_type]->name);
    cJSON *lj = cJSON_AddObjectToObject(o, "layout");
    cJSON_AddNumberToObject(lj, "gpus", (double)l->gpus);
    cJSON_AddNumberToObject(lj, "tp", (double)l->tp);
    cJSON_AddNumberToObject(lj, "pp", (double)l->pp);
    cJSON_AddNumberToObject(lj, "dp", (double)l->dp);
    cJSON_AddNumberToObject(lj, "cp", (double)layout_cp(l));
    cJSON_AddStringToObject(lj, "cp_comm", cp_comm_name(l->cp_comm));
    cJSON_AddNumberToObject(lj, "ep", (double)layout_ep(l));
    if (layout_etp(l) != l->tp) cJSON_AddNumberToObject(lj, "etp", (double)layout_etp(l));   /* else Megatron's default */
    cJSON_AddNumberToObject(lj, "vpp", (double)l->vpp);
    cJSON_AddNumberToObject(lj, "mbs", (double)l->mbs);
    cJSON_AddNumberToObject(lj, "gbs", (double)l->gbs);
    cJSON_AddNumberToObject(lj, "seq", (double)l->seq);
    cJSON_AddStringToObject(lj, "recompute", recompute_name(l->recompute));
    cJSON_AddStringToObject(lj, "attention", attention_name(l->attention));
    cJSON_AddStringToObject(lj, "tp_overlap", tp_overlap_name(l->tp_overlap));
    cJSON_AddStringToObject(lj, "grad_sync", grad_sync_name(l->grad_sync));
    cJSON_AddStringToObject(lj, "grad_accum", grad_accum_name(l->grad_accum));
    cJSON_AddStringToObject(lj, "expert_gemm", expert_gemm_name(l->expert_gemm));
    cJSON_AddStringToObject(lj, "expert_rows", expert_rows_name(l->expert_rows));
    cJSON_AddStringToObject(lj, "zero_waits", zero_waits_name(l->zero_waits));
    cJSON_AddStringToObject(lj, "loss", loss_kernel_name(l->loss));
    cJSON_AddNumberToObject(lj, "logit_metrics", (double)l->logit_metrics);
    cJSON_AddNumberToObject(lj, "zero", l->zero);
    cJSON_AddBoolToObject(lj, "sp", l->sp);
    cJSON_AddStringToObject(lj, "precision", precision_name(l->precision));
    cJSON_AddNumberToObject(o, "memory_total", c->memory_total);
    cJSON_AddNumberToObject(o, "memory_capacity", c->memory_capacity);
    cJSON_AddNumberToObject(o, "step_s", c->step_s);
    cJSON_AddNumberToObject(o, "mfu", c->mfu);
    cJSON_AddNumberToObject(o, "tokens_per_s", c->tokens_per_s);
    cJSON_AddNumberToObject(o, "time_to_train_s", c->time_to_train_s);
    cJSON_AddNumberToObject(o, "cost_usd", c->cost_usd);
    double low, high;
    if (uncertainty_band(req->bands, l, c->step_s, &low, &high)) {
        /* the step's 80% band from the published runs of the layout's parallelism family */
        cJSON *band = cJSON_AddObjectToObject(o, "band");
        parallelism_family_t f = parallelism_family(l);
        cJSON_AddStringToObject(band, "family", parallelism_family_name(f));
        cJSON_AddNumberToObject(band, "published_rows", req->bands->rows[f]);
        cJSON_AddNumberToObject(band, "step_s_low", low);
        cJSON_AddNumberToObject(band, "step_s_high", high);
        cJSON_AddNumberToObject(band, "time_to_train_s_low", c->time_to_train_s * low / c->step_s);
        cJSON_AddNumberToObject(band, "time_to_train_s_high", c->time_to_train_s * high / c->step_s);
    }
    cJSON *t = cJSON_AddObjectToObject(o, "time");
    cJSON_AddNumberToObject(t, "compute_s", c->compute_s);
    cJSON_AddNumberToObject(t, "tp_comm_s", c->tp_comm_s);
    cJSON_AddNumberToObject(t, "cp_comm_s", c->cp_comm_s);
    cJSON_AddNumberToObject(t, "pp_comm_s", c->pp_comm_s);
    cJSON_AddNumberToObject(t, "dp_comm_s", c->dp_comm_s);
    cJSON_AddNumberToObject(t, "bubble_s", c->bubble_s);
    return o;
}

/* One "calibration:" line per overlay the compared GPUs rest on, each once. */
static void print_calibration_lines(FILE *out, const plan_request *req)
{
    char lines[PLAN_GPU_TYPES_MAX][HWDB_SOURCE_MAX + 128];
    int n = 0;
    for (int t = 0; t < req->ngpu_types; t++) {
        if (!calibration_line(req->gpu[t], lines[n], sizeof lines[n])) continue;
        int seen = 0;
        for (int i = 0; i < n && !seen; i++) seen = !strcmp(lines[i], lines[n]);
        if (!seen) fprintf(out, "%s\n", lines[n++]);
    }
}

static cJSON *calibration_json(const plan_request *req)
{
    cJSON *list = cJSON_CreateArray();
    for (int t = 0; t < req->ngpu_types; t++) {
        cJSON *o = cJSON_CreateObject();
        cJSON_AddStringToObject(o, "gpu", req->gpu[t]->name);
        cJSON_AddStringToObject(o, "file", req->gpu[t]->overlay_path);
        cJSON_AddStringToObject(o, "origin", calibration_origin(req->gpu[t]));
        cJSON_AddItemToArray(list, o);
    }
    return list;
}

void report_plan(FILE *out, const plan_request *req, const plan_result *res, format_t format)
{
    if (format == FORMAT_JSON) {
        cJSON *root = cJSON_CreateObject();
        cJSON *mj = cJSON_AddObjectToObject(root, "model");
        cJSON_AddStringToObject(mj, "name", req->model->name);
        cJSON_AddNumberToObject(mj, "params", model_params_total(req->model));
        cJSON_AddStringToObject(root, "objective", objective_name(req->objective));
        cJSON_AddNumberToObject(root, "tokens", req->tokens);
        cJSON_AddItemToObject(root, "calibration", calibration_json(req));
        cJSON *sj = cJSON_AddObjectToObject(root, "search");
        cJSON_AddNumberToObject(sj, "layouts_evaluated", (double)res->evaluated);
        cJSON_AddNumberToObject(sj, "feasible", (double)res->feasible);
        cJSON_AddNumberToObject(sj, "seconds", res->seconds);
        cJSON *rj = cJSON_AddObjectToObject(sj, "rejected");
        for (int r = 0; r < REJECT_COUNT; r++)
            cJSON_AddNumberToObject(rj, reject_reason_name((reject_reason_t)r), (double)res->rejected[r]);
        cJSON *top = cJSON_AddArrayToObject(root, "top");
        for (int i = 0; i < res->ntop; i++) cJSON_AddItemToArray(top, candidate_json(req, &res->top[i]));
        cJSON *tie = cJSON_AddObjectToObject(root, "tie_break");
        cJSON_AddNumberToObject(tie, "fraction", PLAN_TIE_FRACTION);
        cJSON_AddBoolToObject(tie, "changed_winner", res->tie_broken);
        if (res->tie_broken) {
            char why[96];
            plan_comm_order(&res->top[0].layout, &res->objective_best.layout, why, sizeof why);
            cJSON_AddStringToObject(tie, "reason", why);
            cJSON_AddItemToObject(tie, "objective_best", candidate_json(req, &res->objective_best));
        }
        cJSON *front = cJSON_AddArrayToObject(root, "frontier");
        for (int i = 0; i < res->nfrontier; i++) cJSON_AddItemToArray(front, candidate_json(req, &res->frontier[i]));
        char *text = cJSON_Print(root);
        if (text) fprintf(out, "%s\n", text);
        cJSON_free(text);
        cJSON_Delete(root);
        return;
    }
    if (format == FORMAT_CSV) {
        /* a mixture of experts adds its EP and expert TP degrees, last, so that a dense plan's columns stay */
        int moe = model_is_moe(req->model);
        fprintf(out, "kind,rank,gpu,gpus,tp,pp,dp,vpp,mbs,gbs,seq,recompute,zero,sp,memory_total,step_s,mfu,time_to_train_s,"
                     "cost_usd,cp,calibration%s\n", moe ? ",ep,etp" : "");
        for (int k = 0; k < 2; k++) {
            const plan_candidate *list = k == 0 ? res->top : res->frontier;
            int n = k == 0 ? res->ntop : res->nfrontier;
            for (int i = 0; i < n; i++) {
                const plan_candidate *c = &list[i];
                const layout_t *l = &c->layout;
                fprintf(out, "%s,%d,%s,%lld,%lld,%lld,%lld,%lld,%lld,%lld,%lld,%s,%d,%d,%.6g,%.6g,%.6g,%.6g,%.6g,%lld,%s",
                        k == 0 ? "top" : "frontier", i + 1, req->gpu[c->gpu_type]->name, (long long)l->gpus,
                        (long long)l->tp, (long long)l->pp, (long long)l->dp, (long long)l->vpp, (long long)l->mbs,
                        (long long)l->gbs, (long long)l->seq, recompute_name(l->recompute), l->zero, l->sp,
                        c->memory_total, c->step_s, c->mfu, c->time_to_train_s, c->cost_usd, (long long)layout_cp(l),
                        req->gpu[c->gpu_type]->overlay_path);
                if (moe) fprintf(out, ",%lld,%lld", (long long)layout_ep(l), (long long)layout_etp(l));
                fputc('\n', out);
            }
        }
        return;
    }
    fprintf(out, "sextant plan: %s (%.2fB parameters), %.4g tokens, seq %lld, ranked by %s\n", req->model->name,
            model_params_total(req->model) / 1e9, req->tokens, (long long)req->seq, objective_name(req->objective));
    print_calibration_lines(out, req);
    if (req->max_days > 0) fprintf(out, "deadline: %.4g days\n", req->max_days);
    if (req->max_budget > 0) fprintf(out, "budget: $%.4g\n", req->max_budget);
    for (int i = 0; i < req->ngpu_types; i++)
        if (req->attention == ATTENTION_UNFUSED || (req->attention == ATTENTION_COUNT && !gpu_has_fused_attention(req->gpu[i])))
            fprintf(out, "attention: unfused on %s%s\n", req->gpu[i]->name,
                    req->attention == ATTENTION_UNFUSED ? " (--attention unfused)" : " (FlashAttention needs sm80 or newer)");
    fprintf(out, "searched %lld layouts in %.3f s (%.3g layouts/s); %lld feasible\n\n", (long long)res->evaluated,
            res->seconds, (double)res->evaluated / (res->seconds > 0 ? res->seconds : 1e-9), (long long)res->feasible);
    if (res->ntop == 0) {
        fprintf(out, "No layout meets the request.\n");
        const plan_candidate *cheapest = NULL;
        for (int i = 0; i < res->nfrontier; i++)
            if (!cheapest || res->frontier[i].cost_usd < cheapest->cost_usd) cheapest = &res->frontier[i];
        if (cheapest)
            fprintf(out, "The cheapest layout that fits costs $%.4g and takes %.1f days (%lld x %s).\n", cheapest->cost_usd,
                    cheapest->time_to_train_s / 86400.0, (long long)cheapest->layout.gpus, req->gpu[cheapest->gpu_type]->name);
    } else {
        print_header(out, req, lists_expert_tp(res));
        for (int i = 0; i < res->ntop; i++) print_candidate_row(out, req, lists_expert_tp(res), i + 1, &res->top[i]);
        winner_reason(out, req, res);
    }
    fprintf(out, "\nRejected:\n");
    for (int r = 0; r < REJECT_COUNT; r++)
        if (res->rejected[r]) fprintf(out, "  %10lld  %s\n", (long long)res->rejected[r], reject_reason_name((reject_reason_t)r));
    /* a GPU without a tensor rate for the precision has no layout searched: say so rather than count nothing */
    for (int i = 0; i < req->ngpu_types; i++) {
        precision_t prec = plan_precision(req, req->gpu[i]);
        if (req->gpu[i]->peak_flops[prec] <= 0)
            fprintf(out, "  every layout on %s: it has no %s tensor rate (%s)\n", req->gpu[i]->name, precision_name(prec),
                    req->gpu[i]->peak_flops[PREC_FP16] > 0 ? "--precision fp16 runs there" : "choose another --precision");
    }
    if (req->ncounts > 1 || req->ngpu_types > 1) {
        fprintf(out, "\nTime-cost frontier (fastest layout per GPU type and count, Pareto set):\n");
        print_header(out, req, lists_expert_tp(res));
        for (int i = 0; i < res->nfrontier; i++) print_candidate_row(out, req, lists_expert_tp(res), i + 1, &res->frontier[i]);
    }
}

static const char *recompute_megatron(recompute_t r)
{
    return r == RECOMPUTE_FULL ? "--recompute-granularity full --recompute-method uniform --recompute-num-layers 1"
                               : r == RECOMPUTE_SELECTIVE ? "--recompute-granularity selective" : "";
}

/* "not the overall winner: ..." when c is not `overall`, else "" (also without `overall`). */
static void not_winner_line(const plan_request *req, const plan_candidate *c, const plan_candidate *overall,
                            const char *framework, char *line, size_t len)
{
    line[0] = '\0';
    if (!overall) return;
    const layout_t *w = &overall->layout, *l = &c->layout;
    if (overall->gpu_type == c->gpu_type && w->gpus == l->gpus && w->tp == l->tp && w->pp == l->pp && w->vpp == l->vpp &&
        w->mbs == l->mbs && w->gbs == l->gbs && w->recompute == l->recompute && w->zero == l->zero && w->sp == l->sp)
        return;
    const char *why = framework_refusal(framework, w);
    double behind = objective_of(req, c) / objective_of(req, overall) - 1.0;
    char tie[160];
    snprintf(tie, sizeof tie, "among the layouts %s can run, the tie-break ranks another first", framework);
    snprintf(line, len, "not the overall winner: %s (the winner: %lld x %s, TP %lld, PP %lld, VPP %lld, DP %lld, ZeRO %d, "
             "SP %s, mbs %lld, recompute %s); this layout is %.2f%% %s in %s%s",
             why ? why : tie,
             (long long)w->gpus, req->gpu[overall->gpu_type]->name, (long long)w->tp, (long long)w->pp,
             (long long)w->vpp, (long long)w->dp, w->zero, w->sp ? "on" : "off", (long long)w->mbs,
             recompute_name(w->recompute), 100.0 * fabs(behind), behind >= 0 ? "behind" : "ahead",
             objective_name(req->objective), behind >= 0 ? "" : ", tied: the winner takes it on fewer communication patterns");
}

/* 151 lines: three frameworks' launch lines, each a short run of fprintf in its own branch. */
int emit_plan(FILE *out, const plan_request *req, const plan_candidate *c, const plan_candidate *overall,
              const char *framework, char *err, size_t errlen)
{
    const model_t *m = req->model;
    const layout_t *l = &c->layout;
    const hw_gpu *g = req->gpu[c->gpu_type];
    const char *refusal = framework_refusal(framework, l);
    if (refusal) {
        if (!strcmp(refusal, "not one of megatron|deepspeed|torchtitan"))
            snprintf(err, errlen, "--emit: '%s' is not one of megatron|deepspeed|torchtitan", framework);
        else
            snprintf(err, errlen, "--emit %s: the plan (TP %lld, PP %lld, VPP %lld, ZeRO-%d, SP %s) cannot run there: %s",
                     framework, (long long)l->tp, (long long)l->pp, (long long)l->vpp, l->zero, l->sp ? "on" : "off",
                     refusal);
        return -1;
    }
    char behind[768];
    not_winner_line(req, c, overall, framework, behind, sizeof behind);
    int64_t nodes = (l->gpus + req->node[c->gpu_type]->gpus_per_node - 1) / req->node[c->gpu_type]->gpus_per_node;
    int64_t per_node = l->gpus < req->node[c->gpu_type]->gpus_per_node ? l->gpus : req->node[c->gpu_type]->gpus_per_node;
    double steps = ceil(req->tokens / ((double)l->gbs * (double)l->seq));
    if (!strcmp(framework, "megatron")) {
        fprintf(out, "# sextant plan for %s on %lld x %s (%lld nodes): Megatron-LM pretrain_gpt.py arguments\n", m->name,
                (long long)l->gpus, g->name, (long long)nodes);
        if (behind[0]) fprintf(out, "# %s\n", behind);
        /* experts padded to a capacity (--expert-rows even): Megatron pads only under a capacity factor */
        if (model_is_moe(m) && l->expert_rows == EXPERT_ROWS_EVEN && !(m->capacity_factor > 0))
            fprintf(out, "# the experts' rows priced even (--expert-rows even): Megatron pads them to a capacity only with "
                         "--moe-expert-capacity-factor (sextant's --capacity-factor)\n");
        fprintf(out, "torchrun --nnodes %lld --nproc-per-node %lld pretrain_gpt.py \\\n", (long long)nodes, (long long)per_node);
        fprintf(out, "  --num-layers %lld --hidden-size %lld --num-attention-heads %lld --ffn-hidden-size %lld \\\n",
                (long long)m->layers, (long long)m->hidden, (long long)m->heads, (long long)m->ffn);
        if (m->kv_heads != m->heads) fprintf(out, "  --group-query-attention --num-query-groups %lld \\\n", (long long)m->kv_heads);
        if (m->ffn_kind == FFN_SWIGLU) fprintf(out, "  --swiglu \\\n");
        if (m->norm == NORM_RMSNORM) fprintf(out, "  --normalization RMSNorm \\\n");
        if (m->position == POS_ROPE) fprintf(out, "  --position-embedding-type rope \\\n");
        if (!m->tied_embeddings) fprintf(out, "  --untie-embeddings-and-output-weights \\\n");
        if (!m->bias) fprintf(out, "  --disable-bias-linear \\\n");
        if (!m->dropout) fprintf(out, "  --attention-dropout 0.0 --hidden-dropout 0.0 \\\n");
        fprintf(out, "  --seq-length %lld --max-position-embeddings %lld \\\n", (long long)l->seq, (long long)l->seq);
        fprintf(out, "  --tensor-model-parallel-size %lld --pipeline-model-parallel-size %lld \\\n", (long long)l->tp, (long long)l->pp);
        /* the split sextant costed, where it is not L/p each; chunks then counted per rank, not in layers */
        int64_t first, middle, last;
        pipeline_split(m, l, &first, &middle, &last);
        int uneven = l->pp > 1 && (first != middle || middle != last);
        if (l->vpp > 1 && uneven)
            fprintf(out, "  --num-virtual-stages-per-pipeline-rank %lld \\\n", (long long)l->vpp);
        else if (l->vpp > 1)
            fprintf(out, "  --num-layers-per-virtual-pipeline-stage %lld \\\n", (long long)(m->layers / (l->pp * l->vpp)));
        if (uneven)
            fprintf(out, "  --decoder-first-pipeline-num-layers %lld --decoder-last-pipeline-num-layers %lld \\\n",
                    (long long)first, (long long)last);
        /* Megatron's --cp-comm-type: p2p is the ring, allgather Llama 3's */
        if (layout_cp(l) > 1)
            fprintf(out, "  --context-parallel-size %lld --cp-comm-type %s \\\n", (long long)l->cp,
                    l->cp_comm == CP_COMM_ALLGATHER ? "allgather" : "p2p");
        /* Megatron-Core MoE: the experts, their top-k, the all-to-all dispatcher, EP inside DP x CP */
        if (model_is_moe(m)) {
            /* group-limited routing is costed with the node-deduplicating dispatcher: Megatron's flex one over DeepEP */
            fprintf(out, "  --num-experts %lld --moe-router-topk %lld --moe-ffn-hidden-size %lld --moe-token-dispatcher-type %s \\\n",
                    (long long)m->experts, (long long)m->top_k, (long long)model_expert_ffn(m),
                    m->moe_group_limit > 0 ? "flex --moe-enable-deepep" : "alltoall");
            fprintf(out, "  --expert-model-parallel-size %lld --expert-tensor-parallel-size %lld \\\n", (long long)layout_ep(l),
                    (long long)layout_etp(l));
            if (m->shared_experts > 0)
                fprintf(out, "  --moe-shared-expert-intermediate-size %lld \\\n", (long long)(m->shared_experts * model_expert_ffn(m)));
            if (m->capacity_factor > 0) fprintf(out, "  --moe-expert-capacity-factor %g \\\n", m->capacity_factor);
            if (m->capacity_factor > 0 && l->expert_rows == EXPERT_ROWS_EVEN)
                fprintf(out, "  --moe-pad-expert-input-to-capacity \\\n");
            /* the experts' GEMMs as priced: Transformer Engine's grouped linear (a GEMM an expert over four streams),
             * or the grouped_gemm package's one CUTLASS launch (docs/model.md, "Mixture of experts") */
            fprintf(out, "  --moe-grouped-gemm%s \\\n", l->expert_gemm == EXPERT_GEMM_GROUPED ? " --moe-use-legacy-grouped-gemm" : "");
            if (l->ep_overlap) fprintf(out, "  --overlap-moe-expert-parallel-comm --delay-wgrad-compute \\\n");
            if (m->moe_group_limit > 0)
                fprintf(out, "  --moe-router-num-groups %lld --moe-router-group-topk %lld \\\n", (long long)m->moe_groups,
                        (long long)m->moe_group_limit);
            /* Megatron's pattern: 0 for a dense layer, 1 for a MoE one */
            if (model_moe_layers(m) < m->layers) {
                fprintf(out, "  --moe-layer-freq \"[");
                for (int64_t i = 0; i < m->layers; i++) fprintf(out, "%s%d", i ? "," : "", model_layer_is_moe(m, i));
                fprintf(out, "]\" \\\n");
            }
        }
        if (model_is_mla(m)) {
            fprintf(out, "  --multi-latent-attention --kv-lora-rank %lld --qk-head-dim %lld --qk-pos-emb-head-dim %lld --v-head-dim %lld",
                    (long long)m->kv_lora_rank, (long long)m->qk_nope_head_dim, (long long)m->qk_rope_head_dim,
                    (long long)m->v_head_dim);
            if (m->q_lora_rank > 0) fprintf(out, " --q-lora-rank %lld", (long long)m->q_lora_rank);
            fprintf(out, " \\\n");
        }
        /* Megatron-Core's multi-token prediction, on the last stage as sextant costs it */
        if (m->mtp_layers > 0) fprintf(out, "  --mtp-num-layers %lld \\\n", (long long)m->mtp_layers);
        if (l->sp) fprintf(out, "  --sequence-parallel \\\n");
        if (l->zero == 1) fprintf(out, "  --use-distributed-optimizer \\\n");
        if (l->recompute != RECOMPUTE_NONE) fprintf(out, "  %s \\\n", recompute_megatron(l->recompute));
        fprintf(out, "  --micro-batch-size %lld --global-batch-size %lld --train-iters %.0f \\\n", (long long)l->mbs,
                (long long)l->gbs, steps);
        fprintf(out, "  --%s%s%s\n", l->precision == PREC_FP16 ? "fp16" : "bf16",
                attention_is_fused(l->attention) ? " --use-flash-attn" : "",
                l->fp32_grads ? "" : " --no-gradient-accumulation-fusion");
        return 0;
    }
    if (!strcmp(framework, "deepspeed")) {
        if (layout_ep(l) > 1) {
            snprintf(err, errlen, "--emit deepspeed: the plan uses expert parallelism (ep %lld), which this emitter does not "
                     "write (DeepSpeed-MoE sets it in the model code)", (long long)l->ep);
            return -1;
        }
        if (layout_cp(l) > 1) {
            snprintf(err, errlen, "--emit deepspeed: the plan uses context parallelism (cp %lld), which DeepSpeed does not "
                     "have (its Ulysses sequence parallelism is another scheme)", (long long)l->cp);
            return -1;
        }
        cJSON *root = cJSON_CreateObject();
        cJSON_AddNumberToObject(root, "train_batch_size", (double)l->gbs);
        cJSON_AddNumberToObject(root, "train_micro_batch_size_per_gpu", (double)l->mbs);
        cJSON_AddNumberToObject(root, "gradient_accumulation_steps", (double)(l->gbs / (l->mbs * l->dp)));
        cJSON *zero = cJSON_AddObjectToObject(root, "zero_optimization");
        cJSON_AddNumberToObject(zero, "stage", l->zero);
        cJSON_AddBoolToObject(zero, "overlap_comm", 1);
        cJSON_AddBoolToObject(zero, "contiguous_gradients", 1);
        cJSON *prec = cJSON_AddObjectToObject(root, l->precision == PREC_FP16 ? "fp16" : "bf16");
        cJSON_AddBoolToObject(prec, "enabled", l->precision == PREC_FP16 || l->precision == PREC_BF16 || l->precision == PREC_FP8);
        if (l->recompute != RECOMPUTE_NONE) {
            cJSON *ac = cJSON_AddObjectToObject(root, "activation_checkpointing");
            cJSON_AddBoolToObject(ac, "partition_activations", l->sp);
            cJSON_AddBoolToObject(ac, "contiguous_memory_optimization", 1);
            cJSON_AddNumberToObject(ac, "number_checkpoints", (double)m->layers);
        }
        if (l->pp > 1) {
            cJSON *pipe = cJSON_AddObjectToObject(root, "pipeline");
            cJSON_AddNumberToObject(pipe, "stages", (double)l->pp);
            cJSON_AddStringToObject(pipe, "partition", "uniform");
        }
        cJSON *sx = cJSON_AddObjectToObject(root, "sextant");
        cJSON_AddNumberToObject(sx, "tensor_parallel", (double)l->tp);
        cJSON_AddNumberToObject(sx, "pipeline_parallel", (double)l->pp);
        cJSON_AddNumberToObject(sx, "data_parallel", (double)l->dp);
        cJSON_AddStringToObject(sx, "note", "DeepSpeed takes TP from the model code (Megatron-DeepSpeed --tensor-model-parallel-size)");
        int64_t first, middle, last;
        pipeline_split(m, l, &first, &middle, &last);
        if (l->pp > 1 && (first != middle || middle != last)) {
            char split[200];
            snprintf(split, sizeof split, "the plan costs stages of %lld (first), %lld (each middle), %lld (last) layers: "
                     "Megatron-DeepSpeed's --pp-partition-method 'type:transformer|embedding'", (long long)first,
                     (long long)middle, (long long)last);
            cJSON_AddStringToObject(sx, "stage_layers_note", split);
        }
        if (behind[0]) cJSON_AddStringToObject(sx, "not_overall_winner", behind + strlen("not the overall winner: "));
        if (m->mtp_layers > 0)
            cJSON_AddStringToObject(sx, "mtp_note", "the plan costs the model's multi-token prediction modules, which this "
                                                    "config does not set up");
        char *text = cJSON_Print(root);
        if (text) fprintf(out, "%s\n", text);
        cJSON_free(text);
        cJSON_Delete(root);
        return 0;
    }
    if (!strcmp(framework, "torchtitan")) {
        fprintf(out, "# sextant plan for %s on %lld x %s: torchtitan job config (TOML)\n", m->name, (long long)l->gpus, g->name);
        if (behind[0]) fprintf(out, "# %s\n", behind);
        if (m->mtp_layers > 0)
            fprintf(out, "# the plan costs %lld multi-token prediction module(s), which this config does not set up\n",
                    (long long)m->mtp_layers);
        if (model_is_moe(m))
            fprintf(out, "# the experts' GEMMs priced as %s\n",
                    l->expert_gemm == EXPERT_GEMM_GROUPED ? "one grouped kernel, as torchtitan's MoE runs them (torch._grouped_mm)"
                                                          : "one launch an expert (--expert-gemm streams), not torchtitan's "
                                                            "grouped kernel");
        fprintf(out, "[training]\nlocal_batch_size = %lld\nglobal_batch_size = %lld\nseq_len = %lld\nsteps = %.0f\n"
                     "mixed_precision_param = \"%s\"\n\n",
                (long long)l->mbs, (long long)l->gbs, (long long)l->seq, steps,
                l->precision == PREC_FP16 ? "float16" : "bfloat16");
        /* FSDP is ZeRO-3 when it reshards after forward, ZeRO-2-like when it keeps the gathered weights */
        fprintf(out, "[parallelism]\ndata_parallel_replicate_degree = %lld\ndata_parallel_shard_degree = %lld\n",
                (long long)(l->zero >= 2 ? 1 : l->dp), (long long)(l->zero >= 2 ? l->dp : 1));
        if (l->zero >= 2) fprintf(out, "fsdp_reshard_after_forward = \"%s\"\n", l->zero == 3 ? "always" : "never");
        fprintf(out, "tensor_parallel_degree = %lld\npipeline_parallel_degree = %lld\n", (long long)l->tp, (long long)l->pp);
        /* PyTorch's context parallelism: "alltoall" passes the KV shards round the group step by step (the ring),
         * "allgather" gathers them whole */
        if (layout_cp(l) > 1)
            fprintf(out, "context_parallel_degree = %lld\ncontext_parallel_rotate_method = \"%s\"\n", (long long)l->cp,
                    l->cp_comm == CP_COMM_ALLGATHER ? "allgather" : "alltoall");
        /* torchtitan's expert parallelism, taken from the data-parallel shard ranks as Megatron's from DP */
        if (layout_ep(l) > 1) fprintf(out, "expert_parallel_degree = %lld\n", (long long)l->ep);
        if (l->pp > 1)
            fprintf(out, "pipeline_parallel_schedule = \"%s\"\n", l->vpp > 1 ? "Interleaved1F1B" : "1F1B");
        fprintf(out, "\n[activation_checkpoint]\nmode = \"%s\"\n", l->recompute == RECOMPUTE_FULL ? "full"
                                                                   : l->recompute == RECOMPUTE_SELECTIVE ? "selective" : "none");
        return 0;
    }
    snprintf(err, errlen, "--emit: '%s' is not one of megatron|deepspeed|torchtitan", framework);
    return -1;
}
