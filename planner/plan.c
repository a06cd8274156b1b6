/* sextant plan: every layout the request allows, costed by the same
 * functions as `sextant estimate`, rejected with a reason or ranked.  The
 * parts of a layout's cost that it shares with layouts already costed come
 * from estimate_layout_cached's cache, and a layout that does not fit is
 * rejected on its memory alone, before its step time is costed. */
#include "planner.h"

#include <math.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

static const int64_t micro_batches[] = {1, 2, 4, 8, 16};
/* with flash attention, selective recomputation costs and saves exactly what none does: the
 * search tries it (the last) with the unfused kernel only */
static const recompute_t recomputes[] = {RECOMPUTE_NONE, RECOMPUTE_FULL, RECOMPUTE_SELECTIVE};

const char *reject_reason_name(reject_reason_t r)
{
    static const char *const names[] = {"does not fit in memory", "heads, KV heads or batch indivisible",
                                        "TP group would leave the node", "above the TP ratio limit (--strict)",
                                        "slower than --days", "dearer than --budget",
                                        "context parallelism the sequence cannot take",
                                        "interleaved with micro-batches not a multiple of PP",
                                        "the --emit framework cannot run it",
                                        "expert parallelism the experts or dp x cp cannot take, or MoE with TP and no SP",
                                        "an internal error of the estimate (a bug)"};
    return names[r];
}

precision_t plan_precision(const plan_request *req, const hw_gpu *g)
{
    if (req->precision != PREC_COUNT) return req->precision;
    return g->peak_flops[PREC_BF16] > 0 ? PREC_BF16 : PREC_FP16;
}

static double now_s(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (double)ts.tv_sec + 1e-9 * (double)ts.tv_nsec;
}

static double objective_value(const plan_request *req, const plan_candidate *c)
{
    switch (req->objective) {
    case OBJECTIVE_COST: return c->cost_usd;
    case OBJECTIVE_GPUS: return (double)c->layout.gpus;
    case OBJECTIVE_TIME: break;
    }
    return c->time_to_train_s;
}

/* Orders by the objective; near ties (within 1e-6) go to the faster, then
 * the cheaper, then the one with more memory to spare. */
static int better(const plan_request *req, const plan_candidate *a, const plan_candidate *b)
{
    double va = objective_value(req, a), vb = objective_value(req, b);
    if (fabs(va - vb) > 1e-6 * fabs(vb)) return va < vb;
    if (fabs(a->time_to_train_s - b->time_to_train_s) > 1e-6 * b->time_to_train_s)
        return a->time_to_train_s < b->time_to_train_s;
    if (fabs(a->cost_usd - b->cost_usd) > 1e-6 * b->cost_usd) return a->cost_usd < b->cost_usd;
    return a->memory_total < b->memory_total;
}

const char *framework_refusal(const char *framework, const layout_t *l)
{
    if (!strcmp(framework, "megatron")) {
        if (l->zero > 1) return "Megatron-LM shards the optimizer (ZeRO-1, its distributed optimizer) and no further";
        return NULL;
    }
    /* the DeepSpeed and torchtitan emitters write no expert TP: their experts split as the TP */
    if (strcmp(framework, "megatron") && l->etp > 0 && l->etp != l->tp)
        return "its emitter writes no expert tensor parallelism (--etp): Megatron-LM's --expert-tensor-parallel-size";
    if (!strcmp(framework, "deepspeed")) {
        if (l->pp > 1 && l->zero > 1) return "DeepSpeed's pipeline engine runs with ZeRO 0 or 1 only";
        if (l->vpp > 1) return "DeepSpeed's pipeline has no interleaved (virtual-stage) schedule";
        return NULL;
    }
    if (!strcmp(framework, "torchtitan")) {
        if (l->zero == 1) return "torchtitan shards with FSDP (ZeRO-2/3-like) or not at all: it has no ZeRO-1";
        if (l->tp > 1 && !l->sp) return "torchtitan's TP always shards the sequence between its blocks (SP)";
        return NULL;
    }
    return "not one of megatron|deepspeed|torchtitan";
}

int plan_comm_order(const layout_t *a, const layout_t *b, char *why, size_t whylen)
{
    struct { int64_t a, b; const char *what; } keys[] = {
        {a->zero, b->zero, "ZeRO"}, {a->pp, b->pp, "PP"}, {a->vpp, b->vpp, "VPP"}, {a->tp, b->tp, "TP"}, {a->sp, b->sp, "SP"},
    };
    for (size_t i = 0; i < sizeof keys / sizeof keys[0]; i++) {
        if (keys[i].a == keys[i].b) continue;
        if (why && i == 4) snprintf(why, whylen, "SP %s against %s", a->sp ? "on" : "off", b->sp ? "on" : "off");
        else if (why) snprintf(why, whylen, "%s %lld against %lld", keys[i].what, (long long)keys[i].a, (long long)keys[i].b);
        return keys[i].a < keys[i].b ? -1 : 1;
    }
    if (why && whylen) why[0] = '\0';
    return 0;
}

/* The candidates within PLAN_TIE_FRACTION of the running best objective, the best of each
 * communication class (GPU type and count, ZeRO, PP, VPP, TP, SP): whatever is tied with the
 * final best was within the window, which only narrows, when it was seen. */
typedef struct {
    plan_candidate *c;
    int n, cap;
} tie_set;

static int same_class(const plan_candidate *a, const plan_candidate *b)
{
    return a->gpu_type == b->gpu_type && a->layout.gpus == b->layout.gpus &&
           plan_comm_order(&a->layout, &b->layout, NULL, 0) == 0;
}

static int tie_set_offer(const plan_request *req, tie_set *t, const plan_candidate *c, double best)
{
    double window = best * (1.0 + PLAN_TIE_FRACTION);
    if (objective_value(req, c) > window) return 0;
    int kept = 0;
    for (int i = 0; i < t->n; i++)  /* the window narrowed: drop what left it */
        if (objective_value(req, &t->c[i]) <= window) t->c[kept++] = t->c[i];
    t->n = kept;
    for (int i = 0; i < t->n; i++)
        if (same_class(&t->c[i], c)) {
            if (better(req, c, &t->c[i])) t->c[i] = *c;
            return 0;
        }
    if (t->n == t->cap) {
        int cap = t->cap ? 2 * t->cap : 64;
        plan_candidate *grown = realloc(t->c, (size_t)cap * sizeof *grown);
        if (!grown) return -1;
        t->c = grown;
        t->cap = cap;
    }
    t->c[t->n++] = *c;
    return 0;
}

/* Tied with the best: within PLAN_TIE_FRACTION of it by the objective, on the same GPU type and
 * count, so that the tie-break never trades GPUs or days for simpler communication. */
static int tied_with(const plan_request *req, const plan_candidate *c, const plan_candidate *best, double window)
{
    return objective_value(req, c) <= window && c->gpu_type == best->gpu_type && c->layout.gpus == best->layout.gpus;
}

/* The plan's order: the candidates tied with the best first, by plan_comm_order and then the
 * objective; the rest by the objective. */
static int ranks_before(const plan_request *req, const plan_candidate *a, const plan_candidate *b,
                        const plan_candidate *best, double window)
{
    int a_tied = tied_with(req, a, best, window), b_tied = tied_with(req, b, best, window);
    if (a_tied != b_tied) return a_tied;
    int order = a_tied ? plan_comm_order(&a->layout, &b->layout, NULL, 0) : 0;
    return order ? order < 0 : better(req, a, b);
}

static int same_candidate(const plan_candidate *a, const plan_candidate *b)
{
    const layout_t *x = &a->layout, *y = &b->layout;
    return a->gpu_type == b->gpu_type && x->gpus == y->gpus && x->tp == y->tp && x->pp == y->pp && x->vpp == y->vpp &&
           x->mbs == y->mbs && x->gbs == y->gbs && x->recompute == y->recompute && x->zero == y->zero && x->sp == y->sp;
}

/* Re-ranks the top list with the tie-break: the tied classes' bests join it, then all are ordered. */
static int break_ties(const plan_request *req, plan_result *res, const tie_set *t)
{
    if (res->ntop == 0) return 0;
    res->objective_best = res->top[0];
    double window = objective_value(req, &res->top[0]) * (1.0 + PLAN_TIE_FRACTION);
    int n = 0;
    plan_candidate *all = malloc((size_t)(res->ntop + t->n) * sizeof *all);
    if (!all) return -1;
    for (int i = 0; i < res->ntop + t->n; i++) {
        const plan_candidate *c = i < res->ntop ? &res->top[i] : &t->c[i - res->ntop];
        int dup = 0;
        for (int j = 0; j < n && !dup; j++) dup = same_candidate(&all[j], c);
        if (dup) continue;
        int at = n++;
        while (at > 0 && ranks_before(req, c, &all[at - 1], &res->objective_best, window)) {
            all[at] = all[at - 1];
            at--;
        }
        all[at] = *c;
    }
    res->ntop = n < req->top ? n : req->top;
    memcpy(res->top, all, (size_t)res->ntop * sizeof *all);
    free(all);
    res->tie_broken = !same_candidate(&res->top[0], &res->objective_best);
    return 0;
}

/* Keeps the `top` best candidates, sorted, by insertion. */
static void keep_top(const plan_request *req, plan_result *res, const plan_candidate *c)
{
    int at = res->ntop;
    while (at > 0 && better(req, c, &res->top[at - 1])) at--;
    if (at >= req->top) return;
    int last = res->ntop < req->top ? res->ntop : req->top - 1;
    memmove(&res->top[at + 1], &res->top[at], (size_t)(last - at) * sizeof res->top[0]);
    res->top[at] = *c;
    if (res->ntop < req->top) res->ntop++;
}

static int divides_heads(const model_t *m, int64_t tp)
{
    if (m->heads % tp != 0) return 0;
    return m->kv_heads % tp == 0 || tp % m->kv_heads == 0;
}

/* The context parallel degrees to search: the one asked for, else 1, 2, 4, ... 16 from
 * PLAN_CP_MIN_SEQ tokens on (below it a rank's attention is too short for CP to pay, and each degree
 * multiplies the search); degrees the sequence cannot take are kept, to be rejected with their reason. */
static int cp_degrees(const plan_request *req, int64_t cp[8])
{
    if (req->cp > 0) { cp[0] = req->cp; return 1; }
    int n = 0;
    for (int64_t c = 1; c <= (req->seq >= PLAN_CP_MIN_SEQ ? PLAN_CP_MAX : 1); c *= 2) cp[n++] = c;
    return n;
}

/* The expert parallel degrees to search, largest first: the one asked for, else each power of two
 * dividing a MoE model's experts and 1 (a dense model: 1).  Those that do not divide dp x cp are
 * rejected with their reason in the search. */
static int ep_degrees(const plan_request *req, const model_t *m, int64_t ep[32])
{
    if (req->ep > 0) { ep[0] = req->ep; return 1; }
    int64_t up[32];
    int n = 0;
    up[n++] = 1;
    if (model_is_moe(m))
        for (int64_t e = 2; e <= m->experts && n < 32; e *= 2)
            if (m->experts % e == 0) up[n++] = e;
    for (int i = 0; i < n; i++) ep[i] = up[n - 1 - i];
    return n;
}

/* The expert TP degrees to search at TP tp: the one asked for, else TP (Megatron's default) and, for a MoE
 * model with TP > 1, 1 (whole experts, no gather of the routed tokens over TP).  ETP 1 is searched where
 * Megatron-Core, whose knob it is, runs it: ZeRO 0 or 1 (its distributed optimizer), and with EP (the search
 * skips EP 1 for it).  An ETP between 1 and TP is left out, to keep the search's time (make bench). */
static int etp_degrees(const plan_request *req, const model_t *m, int64_t tp, int zero, int64_t etp[2])
{
    if (req->etp > 0) { etp[0] = req->etp; return 1; }
    etp[0] = tp;
    if (!model_is_moe(m) || tp == 1 || zero > 1) return 1;
    etp[1] = 1;
    return 2;
}

static void progress(int show, double started, int64_t done, int64_t total)
{
    if (!show || now_s() - started < 1.0) return;
    int width = 40, filled = (int)(width * (double)done / (double)(total ? total : 1));
    fprintf(stderr, "\r  searching [%.*s%*s] %3.0f%%", filled, "########################################", width - filled, "",
            100.0 * (double)done / (double)(total ? total : 1));
    if (done == total) fputc('\n', stderr);
}

/* Pareto filter in place: keep a point unless another is both faster and cheaper. */
static void pareto(plan_result *res)
{
    int kept = 0;
    for (int i = 0; i < res->nfrontier; i++) {
        const plan_candidate *a = &res->frontier[i];
        int dominated = 0;
        for (int j = 0; j < res->nfrontier && !dominated; j++) {
            const plan_candidate *b = &res->frontier[j];
            if (j == i) continue;
            int no_worse = b->time_to_train_s <= a->time_to_train_s && b->cost_usd <= a->cost_usd;
            int better = b->time_to_train_s < a->time_to_train_s || b->cost_usd < a->cost_usd;
            dominated = no_worse && better;
        }
        if (!dominated) res->frontier[kept++] = *a;
    }
    res->nfrontier = kept;
    /* sorted by GPU count then time, for reading and plotting */
    for (int i = 1; i < res->nfrontier; i++)
        for (int j = i; j > 0 && (res->frontier[j].layout.gpus < res->frontier[j - 1].layout.gpus ||
                                  (res->frontier[j].layout.gpus == res->frontier[j - 1].layout.gpus &&
                                   res->frontier[j].time_to_train_s < res->frontier[j - 1].time_to_train_s));
             j--) {
            plan_candidate t = res->frontier[j];
            res->frontier[j] = res->frontier[j - 1];
            res->frontier[j - 1] = t;
        }
}

/* 160 lines: the search's nested loops over every layout dimension kept in one place, so that each loop
 * stands next to the cache part (estimate_layout_cached) its variables key and the pruning it allows. */
int plan_search(const plan_request *req, plan_result *res, int show_progress, char *err, size_t errlen)
{
    memset(res, 0, sizeof *res);
    const model_t *m = req->model;
    double started = now_s();
    estimate_t *e = malloc(sizeof *e);
    estimate_cache *cache = req->uncached ? NULL : estimate_cache_new();
    if (!e || (!req->uncached && !cache)) {
        free(e);
        estimate_cache_free(cache);
        snprintf(err, errlen, "out of memory");
        return -1;
    }
    tie_set ties = {0};
    int out_of_memory = 0;
    int64_t outer_total = (int64_t)req->ngpu_types * req->ncounts, outer_done = 0;
    for (int gi = 0; gi < req->ngpu_types; gi++) {
        const hw_gpu *g = req->gpu[gi];
        const hw_node *node = req->node[gi];
        precision_t prec = plan_precision(req, g);
        /* no tensor rate for it: none of this GPU's layouts is costed (report_plan says so) */
        if (g->peak_flops[prec] <= 0) { outer_done += req->ncounts; continue; }
        attention_impl_t attention = req->attention == ATTENTION_COUNT ? default_attention(g) : req->attention;
        if (attention_is_fused(attention) && !gpu_has_fused_attention(g)) { outer_done += req->ncounts; continue; }
        job_t job = {req->tokens, req->price > 0 ? req->price : g->cloud_usd_per_gpu_hour};
        for (int ci = 0; ci < req->ncounts; ci++, outer_done++) {
            progress(show_progress, started, outer_done, outer_total);
            int64_t gpus = req->gpu_counts[ci];
            plan_candidate best_here;
            int have_best = 0;
            int64_t cps[8], eps[32], etps[2];
            int ncp = cp_degrees(req, cps), nep = ep_degrees(req, m, eps);
            for (int64_t tp = 1; tp <= gpus && tp <= m->heads; tp *= 2) {
                for (int cpi = 0; cpi < ncp; cpi++) {
                    int64_t cp = cps[cpi];
                    if (gpus % (tp * cp)) continue;
                    for (int64_t pp = 1; pp <= m->layers && tp * cp * pp <= gpus; pp++) {
                        if (gpus % (tp * cp * pp)) continue;
                        int64_t dp = gpus / (tp * cp * pp);
                        for (int64_t vpp = 1; vpp <= 8; vpp *= 2) {
                            if (vpp > 1 && (pp < 2 || m->layers % (pp * vpp) != 0)) continue;
                            for (size_t mi = 0; mi < sizeof micro_batches / sizeof micro_batches[0]; mi++) {
                                int64_t mbs = micro_batches[mi];
                                for (int64_t gbs = req->gbs ? req->gbs : req->gbs_min; gbs <= (req->gbs ? req->gbs : req->gbs_max);
                                     gbs *= 2) {
                                    for (size_t ri = 0; ri < (attention_is_fused(attention) ? 2u : 3u); ri++)
                                        for (int zero = 0; zero <= req->max_zero; zero++)
                                            for (int sp = 0; sp <= (tp > 1); sp++)
                                            for (int eti = 0, netp = etp_degrees(req, m, tp, zero, etps); eti < netp; eti++)
                                            /* memory never grows with EP above 1 (the experts' weights shrink,
                                             * their optimizer state is the same over dp x cp / ep, the
                                             * activations do not change: the busiest rank's load is the same at
                                             * every EP above 1): below an EP that does not fit, none
                                             * does but EP 1, which opens no EP group (other_memory_allowance),
                                             * and is costed whatever */
                                            for (int ei = 0, unfit_above = 0; ei < nep; ei++) {
                                                int64_t ep = eps[ei];
                                                /* ETP 1 without EP would hold every expert whole on every GPU: only
                                                 * when asked (--etp 1) */
                                                if (!req->etp && etps[eti] != tp && ep == 1) continue;
                                                layout_t l = {0};
                                                l.gpus = gpus; l.tp = tp; l.pp = pp; l.dp = dp; l.vpp = vpp;
                                                l.mbs = mbs; l.gbs = gbs; l.seq = req->seq;
                                                l.cp = cp; l.cp_comm = req->cp_comm; l.ep = ep; l.ep_overlap = req->ep_overlap;
                                                l.etp = etps[eti] == tp ? 0 : etps[eti];
                                                l.gpus_per_node = node->gpus_per_node;
                                                l.recompute = recomputes[ri]; l.zero = zero; l.sp = sp;
                                                l.precision = prec; l.fp32_grads = req->fp32_grads;
                                                l.attention = attention;
                                                l.loss = req->loss;
                                                l.logit_metrics = req->logit_metrics;
                                                l.tp_overlap = req->tp_overlap;
                                                l.grad_sync = req->grad_sync;
                                                l.grad_accum = req->grad_accum;
                                                l.expert_gemm = req->expert_gemm;
                                                l.expert_rows = req->expert_rows;
                                                l.zero_waits = req->zero_waits;
                                                /* DeepSpeed's BF16 optimizer has no ZeRO-2 or 3 */
                                                if (l.grad_accum == GRAD_ACCUM_FP32_COPY && zero > 1) {
                                                    res->rejected[REJECT_FRAMEWORK]++;
                                                    continue;
                                                }
                                                res->evaluated++;
                                                if (req->framework && framework_refusal(req->framework, &l)) {
                                                    res->rejected[REJECT_FRAMEWORK]++;
                                                    continue;
                                                }
                                                if (!divides_heads(m, tp) || gbs % (mbs * dp) != 0 || gbs < mbs * dp) {
                                                    res->rejected[REJECT_INDIVISIBLE]++;
                                                    continue;
                                                }
                                                /* Megatron interleaves micro-batches in groups of p */
                                                if (vpp > 1 && (gbs / (mbs * dp)) % pp != 0) {
                                                    res->rejected[REJECT_INTERLEAVING]++;
                                                    continue;
                                                }
                                                if (tp > node->gpus_per_node && !req->allow_tp_across_nodes) {
                                                    res->rejected[REJECT_TP_ACROSS_NODES]++;
                                                    continue;
                                                }
                                                char why[256];
                                                if (cp > 1 && layout_check_cp(m, &l, why, sizeof why) != 0) {
                                                    res->rejected[REJECT_CP]++;
                                                    continue;
                                                }
                                                if ((ep > 1 || model_is_moe(m) || l.etp) && layout_check_ep(m, &l, NULL, 0) != 0) {
                                                    res->rejected[REJECT_EP]++;
                                                    continue;
                                                }
                                                if (unfit_above && ep > 1) { res->rejected[REJECT_MEMORY]++; continue; }

                                                /* a layout that does not fit is rejected below whatever its time */
                                                int rc = cache ? estimate_layout_cached(cache, m, g, node, &l, &job, 1, e, why, sizeof why)
                                                               : estimate_layout_fast(m, g, node, &l, &job, e, why, sizeof why);
                                                if (rc != 0) {
                                                    res->rejected[rc == ESTIMATE_INTERNAL ? REJECT_INTERNAL
                                                                                          : REJECT_INDIVISIBLE]++;
                                                    continue;
                                                }
                                                if (!e->fits) {
                                                    unfit_above = 1;
                                                    res->rejected[REJECT_MEMORY]++;
                                                    continue;
                                                }
                                                if (req->strict && (double)tp > e->tp_ratio_limit) {
                                                    res->rejected[REJECT_TP_RATIO]++;
                                                    continue;
                                                }
                                                plan_candidate c = {e->layout, gi, e->step_s, e->time_to_train_s, e->cost_usd,
                                                                    e->mfu, e->memory.total, e->memory.capacity,
                                                                    e->tokens_per_s, e->compute_s, e->tp_comm_s,
                                                                    e->pp_comm_s, e->dp_comm_s, e->bubble_s,
                                                                    e->clock_fraction, e->step_clock_hz,
                                                                    e->top_clock_power_w, e->cp_comm_s};
                                                if (!have_best || c.time_to_train_s < best_here.time_to_train_s) {
                                                    best_here = c;
                                                    have_best = 1;
                                                }
                                                if (req->max_days > 0 && c.time_to_train_s > req->max_days * 86400.0) {
                                                    res->rejected[REJECT_DEADLINE]++;
                                                    continue;
                                                }
                                                if (req->max_budget > 0 && c.cost_usd > req->max_budget) {
                                                    res->rejected[REJECT_BUDGET]++;
                                                    continue;
                                                }
                                                res->feasible++;
                                                keep_top(req, res, &c);
                                                if (tie_set_offer(req, &ties, &c, objective_value(req, &res->top[0])) != 0)
                                                    out_of_memory = 1;
                                            }
                                    if (req->gbs) break;
                                }
                            }
                        }
                    }
                }
            }
            if (have_best) res->frontier[res->nfrontier++] = best_here;
        }
    }
    progress(show_progress, started, outer_total, outer_total);
    free(e);
    estimate_cache_free(cache);
    if (out_of_memory || break_ties(req, res, &ties) != 0) {
        free(ties.c);
        snprintf(err, errlen, "out of memory");
        return -1;
    }
    free(ties.c);
    pareto(res);
    res->seconds = now_s() - started;
    return 0;
}
