/* The hardware database: gpus.csv and nodes.csv, plus calibration overlays. */
#include "hwdb.h"

#include <ctype.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>
#include <strings.h>

#define GIB 1073741824.0
#define TERA 1e12
#define GIGA 1e9
#define MICRO 1e-6

static const char *const precision_names[PREC_COUNT] = {"fp32", "tf32", "fp16", "bf16", "fp8"};

const char *precision_name(precision_t p)
{
    return (p >= 0 && p < PREC_COUNT) ? precision_names[p] : "?";
}

int precision_parse(const char *text, precision_t *out)
{
    for (int p = 0; p < PREC_COUNT; p++)
        if (strcasecmp(text, precision_names[p]) == 0) { *out = (precision_t)p; return 0; }
    return -1;
}

/* One numeric gpus.csv column: its CSV name, where it lands, its unit scale
 * and its plausible range (a row outside it is a typo, not a GPU). */
typedef struct {
    const char *column;
    size_t offset;
    double scale;
    double min, max;
} gpu_numeric_column;

#define GPU_FIELD(f) offsetof(hw_gpu, f)
static const gpu_numeric_column gpu_numeric_columns[] = {
    {"memory_gib", GPU_FIELD(memory_bytes), GIB, 1, 4096},
    {"hbm_gbs", GPU_FIELD(hbm_bytes_per_s), GIGA, 1, 1e5},
    {"fp32_tflops", GPU_FIELD(peak_flops[PREC_FP32]), TERA, 0.1, 1e5},
    {"tf32_tflops", GPU_FIELD(peak_flops[PREC_TF32]), TERA, 0, 1e5},
    {"fp16_tflops", GPU_FIELD(peak_flops[PREC_FP16]), TERA, 0.1, 1e5},
    {"bf16_tflops", GPU_FIELD(peak_flops[PREC_BF16]), TERA, 0, 1e5},
    {"fp8_tflops", GPU_FIELD(peak_flops[PREC_FP8]), TERA, 0, 1e5},
    {"nvlink_gbs_per_dir", GPU_FIELD(nvlink_bytes_per_s_per_dir), GIGA, 0, 1e5},
    {"tdp_w", GPU_FIELD(tdp_w), 1, 1, 1e5},
    {"list_price_usd", GPU_FIELD(list_price_usd), 1, 0, 1e7},
    {"cloud_usd_per_gpu_hour", GPU_FIELD(cloud_usd_per_gpu_hour), 1, 0, 1e4},
    {"gemm_efficiency", GPU_FIELD(gemm_efficiency), 1, 0.01, 1},
    {"membound_efficiency", GPU_FIELD(membound_efficiency), 1, 0.01, 1},
};
/* Only an overlay may set these: they have no gpus.csv column. */
static const gpu_numeric_column gpu_overlay_only_columns[] = {
    {"launch_overhead_us", GPU_FIELD(launch_overhead_s), MICRO, 0, 1e5},
    {"gemm_issue_us", GPU_FIELD(gemm_issue_s), MICRO, 0, 1e4},
    {"optimizer_membound_efficiency", GPU_FIELD(optimizer_membound_efficiency), 1, 0.01, 1},
    {"gemm_half_gflop", GPU_FIELD(gemm_half_flops), 1e9, 0, 1e9},
    {"gemm_tile_tflops", GPU_FIELD(gemm_tile_flops), TERA, 1, 1e5},
    {"gemm_tile_us", GPU_FIELD(gemm_tile_s), MICRO, 0, 1e3},
    {"gemm_fixed_us", GPU_FIELD(gemm_fixed_s), MICRO, 0, 1e3},
    {"sm_count", GPU_FIELD(sm_count), 1, 1, 1e4},
    {"gemm_bias_grad_factor", GPU_FIELD(gemm_bias_grad_factor), 1, 0.25, 4},
    /* multiples of a traffic's time at HBM speed: over four is a broken measurement */
    {"gemm_accumulate_read_factor", GPU_FIELD(gemm_accumulate_read_factor), 1, 0, 4},
    {"gemm_accumulate_write_factor", GPU_FIELD(gemm_accumulate_write_factor), 1, 0, 4},
    {"fp8_backward_gemm_relative_efficiency", GPU_FIELD(fp8_backward_gemm_relative_efficiency), 1, 0.05, 2},
    {"context_memory_gib", GPU_FIELD(context_bytes), GIB, 0, 64},
    {"nccl_memory_gib", GPU_FIELD(nccl_comm_bytes), GIB, 0, 64},
    {"nccl_first_memory_gib", GPU_FIELD(nccl_first_comm_bytes), GIB, 0, 64},
    {"nccl_p2p_memory_gib", GPU_FIELD(nccl_p2p_comm_bytes), GIB, 0, 64},
    {"nccl_process_memory_gib", GPU_FIELD(nccl_process_bytes), GIB, 0, 64},
    {"nccl_split_memory_gib", GPU_FIELD(nccl_split_bytes), GIB, 0, 64},
    {"nccl_collective_memory_gib", GPU_FIELD(nccl_collective_bytes), GIB, 0, 64},
    {"nccl_p2p_buffers_memory_gib", GPU_FIELD(nccl_p2p_buffers_bytes), GIB, 0, 64},
    {"nccl_p2p_first_memory_gib", GPU_FIELD(nccl_p2p_first_bytes), GIB, 0, 64},
    {"nccl_busbw_intra_gbs", GPU_FIELD(measured_intra_bytes_per_s), GIGA, 0, 1e5},
    {"nccl_busbw_inter_gbs", GPU_FIELD(measured_inter_bytes_per_s), GIGA, 0, 1e5},
    {"flash_fwd_efficiency", GPU_FIELD(flash_fwd_efficiency), 1, 0, 1},
    {"flash_bwd_efficiency", GPU_FIELD(flash_bwd_efficiency), 1, 0, 1},
    {"attention_fwd_efficiency", GPU_FIELD(attention_fwd_efficiency), 1, 0, 1},
    {"attention_bwd_efficiency", GPU_FIELD(attention_bwd_efficiency), 1, 0, 1},
    {"flash1_relative_speed", GPU_FIELD(flash1_relative_speed), 1, 0.05, 1},
    {"flash1_triton_relative_speed", GPU_FIELD(flash1_triton_relative_speed), 1, 0.05, 1},
    {"fp8_gemm_relative_efficiency", GPU_FIELD(fp8_gemm_relative_efficiency), 1, 0.05, 2},
    {"membound_overhead_us", GPU_FIELD(membound_overhead_s), MICRO, 0, 1e3},
    {"power_cap_w", GPU_FIELD(power_cap_w), 1, 1, 1e5},
    {"clock_max_mhz", GPU_FIELD(clock_max_hz), 1e6, 100, 1e4},
    {"power_static_w", GPU_FIELD(power_static_w), 1, 1, 1e5}, /* 0 would switch the power model off unseen */
    {"energy_gemm_pj_per_flop", GPU_FIELD(energy_gemm_j_per_flop), 1e-12, 0, 1e3},
    {"energy_attention_pj_per_flop", GPU_FIELD(energy_attention_j_per_flop), 1e-12, 0, 1e3},
    {"energy_pj_per_byte", GPU_FIELD(energy_j_per_byte), 1e-12, 0, 1e4},
    {"clock_energy_exponent", GPU_FIELD(clock_energy_exponent), 1, 0, 8},
    /* a step's GEMMs at the top clock from as fast as calibrate timed them alone to twice as slow; an exponent
     * of 0 (time independent of the clock) to 2 */
    {"clock_time_factor", GPU_FIELD(clock_time_factor), 1, 0.5, 2},
    {"clock_time_exponent", GPU_FIELD(clock_time_exponent), 1, 0.01, 2},
    {"collective_power_w", GPU_FIELD(collective_power_w), 1, 0, 1e5},
    {"power_static_spread_w", GPU_FIELD(power_static_spread_w), 1, 0, 1e3},
    /* fractions: a GEMM more than twice as slow beside a collective, or a collective more than
     * eleven times as slow beside a GEMM, is a broken measurement, not a GPU */
    {"overlap_compute_slowdown_allgather", GPU_FIELD(overlap_compute_slowdown_allgather), 1, 0, 1},
    {"overlap_compute_slowdown_reducescatter", GPU_FIELD(overlap_compute_slowdown_reducescatter), 1, 0, 1},
    {"overlap_compute_slowdown_allreduce", GPU_FIELD(overlap_compute_slowdown_allreduce), 1, 0, 1},
    {"overlap_comm_slowdown", GPU_FIELD(overlap_comm_slowdown), 1, 0, 10},
    {"overlap_compute_slowdown_experts", GPU_FIELD(overlap_compute_slowdown_experts), 1, 0, 1},
};
/* Overlay keys that land on the GPU's node (nodes.csv columns, same names
 * and units): calibrate --comm measures the intra-node link as the planner's
 * ring formulas see it, and those formulas read the node. */
#define NODE_FIELD(f) offsetof(hw_node, f)
static const gpu_numeric_column node_overlay_columns[] = {
    {"intra_gbs_per_dir", NODE_FIELD(intra_bytes_per_s_per_dir), GIGA, 0.1, 1e5},
    {"intra_latency_us", NODE_FIELD(intra_latency_s), MICRO, 0, 1e4},
    {"intra_gbs_per_dir_reduce_scatter", NODE_FIELD(intra_rs_bytes_per_s), GIGA, 0.1, 1e5},
    {"intra_latency_us_reduce_scatter", NODE_FIELD(intra_rs_latency_s), MICRO, 0, 1e4},
    {"intra_gbs_per_dir_all_gather", NODE_FIELD(intra_ag_bytes_per_s), GIGA, 0.1, 1e5},
    {"intra_latency_us_all_gather", NODE_FIELD(intra_ag_latency_s), MICRO, 0, 1e4},
    {"intra_gbs_per_dir_sendrecv", NODE_FIELD(intra_sr_bytes_per_s), GIGA, 0.1, 1e5},
    {"intra_latency_us_sendrecv", NODE_FIELD(intra_sr_latency_s), MICRO, 0, 1e4},
    {"inter_bus_efficiency", NODE_FIELD(inter_bus_efficiency), 1, 0.05, 1},
    {"inter_half_mib", NODE_FIELD(inter_half_bytes), 1048576.0, 0, 1e6},
};
#define COUNT(a) ((int)(sizeof(a) / sizeof((a)[0])))

static int load_gpus(const char *dir, hwdb *db, char *err, size_t errlen)
{
    char path[1024];
    snprintf(path, sizeof path, "%s/gpus.csv", dir);
    csv_table t;
    if (csv_table_read(path, &t, err, errlen) != 0) return -1;
    int status = 0;
    db->gpus = calloc((size_t)(t.nrows ? t.nrows : 1), sizeof *db->gpus);
    if (!db->gpus) { snprintf(err, errlen, "%s: out of memory", path); csv_table_free(&t); return -1; }
    for (int r = 0; r < t.nrows && status == 0; r++) {
        hw_gpu *g = &db->gpus[r];
        int64_t pcie_gen = 0, pcie_lanes = 0;
        status |= csv_get_string(&t, r, "name", 0, g->name, sizeof g->name, err, errlen);
        if (!status) status |= csv_get_string(&t, r, "full_name", 1, g->full_name, sizeof g->full_name, err, errlen);
        if (!status) status |= csv_get_string(&t, r, "arch", 1, g->arch, sizeof g->arch, err, errlen);
        for (int c = 0; c < COUNT(gpu_numeric_columns) && !status; c++) {
            const gpu_numeric_column *col = &gpu_numeric_columns[c];
            double v;
            status |= csv_get_double(&t, r, col->column, col->min, col->max, &v, err, errlen);
            if (!status) *(double *)((char *)g + col->offset) = v * col->scale;
        }
        if (!status) status |= csv_get_int64(&t, r, "pcie_gen", 1, 10, &pcie_gen, err, errlen);
        if (!status) status |= csv_get_int64(&t, r, "pcie_lanes", 1, 64, &pcie_lanes, err, errlen);
        if (!status) status |= csv_get_string(&t, r, "node", 0, g->node, sizeof g->node, err, errlen);
        if (!status) status |= csv_get_string(&t, r, "source", 0, g->source, sizeof g->source, err, errlen);
        g->pcie_gen = (int)pcie_gen;
        g->pcie_lanes = (int)pcie_lanes;
        for (int q = 0; q < r && !status; q++)
            if (strcasecmp(db->gpus[q].name, g->name) == 0) {
                snprintf(err, errlen, "%s:%d:name: '%s' appears twice", path, t.line[r], g->name);
                status = -1;
            }
        if (!status) db->ngpus++;
    }
    csv_table_free(&t);
    return status ? -1 : 0;
}

static int load_nodes(const char *dir, hwdb *db, char *err, size_t errlen)
{
    char path[1024];
    snprintf(path, sizeof path, "%s/nodes.csv", dir);
    csv_table t;
    if (csv_table_read(path, &t, err, errlen) != 0) return -1;
    int status = 0;
    db->nodes = calloc((size_t)(t.nrows ? t.nrows : 1), sizeof *db->nodes);
    if (!db->nodes) { snprintf(err, errlen, "%s: out of memory", path); csv_table_free(&t); return -1; }
    for (int r = 0; r < t.nrows && status == 0; r++) {
        hw_node *n = &db->nodes[r];
        char link[32];
        double intra_gbs, intra_us, nic_gbits, inter_us;
        status |= csv_get_string(&t, r, "name", 0, n->name, sizeof n->name, err, errlen);
        if (!status) status |= csv_get_string(&t, r, "gpu", 0, n->gpu, sizeof n->gpu, err, errlen);
        if (!status) status |= csv_get_int64(&t, r, "gpus_per_node", 1, 1024, &n->gpus_per_node, err, errlen);
        if (!status) status |= csv_get_string(&t, r, "intra_link", 0, link, sizeof link, err, errlen);
        if (!status) {
            if (strcasecmp(link, "nvlink") == 0) n->intra_link = LINK_NVLINK;
            else if (strcasecmp(link, "pcie") == 0) n->intra_link = LINK_PCIE;
            else {
                snprintf(err, errlen, "%s:%d:intra_link: '%s' is neither nvlink nor pcie", path, t.line[r], link);
                status = -1;
            }
        }
        if (!status) status |= csv_get_double(&t, r, "intra_gbs_per_dir", 0.1, 1e5, &intra_gbs, err, errlen);
        if (!status) status |= csv_get_double(&t, r, "intra_latency_us", 0, 1e4, &intra_us, err, errlen);
        if (!status) status |= csv_get_int64(&t, r, "nics_per_node", 1, 1024, &n->nics_per_node, err, errlen);
        if (!status) status |= csv_get_double(&t, r, "nic_gbits", 0.1, 1e5, &nic_gbits, err, errlen);
        if (!status) status |= csv_get_double(&t, r, "inter_latency_us", 0, 1e4, &inter_us, err, errlen);
        if (!status) status |= csv_get_string(&t, r, "source", 0, n->source, sizeof n->source, err, errlen);
        if (status) break;
        n->intra_bytes_per_s_per_dir = intra_gbs * GIGA;
        n->intra_latency_s = intra_us * MICRO;
        n->nic_bits_per_s = nic_gbits * GIGA;
        n->inter_latency_s = inter_us * MICRO;
        db->nnodes++;
    }
    csv_table_free(&t);
    return status ? -1 : 0;
}

int hwdb_load_datasheets(const char *dir, hwdb *db, char *err, size_t errlen)
{
    memset(db, 0, sizeof *db);
    snprintf(db->dir, sizeof db->dir, "%s", dir);
    if (load_gpus(dir, db, err, errlen) != 0 || load_nodes(dir, db, err, errlen) != 0) {
        hwdb_free(db);
        return -1;
    }
    for (int i = 0; i < db->ngpus; i++) {
        const hw_node *node = hwdb_find_node(db, db->gpus[i].node);
        if (!node) {
            snprintf(err, errlen, "%s/gpus.csv: GPU '%s' names node '%s', which %s/nodes.csv lacks",
                     dir, db->gpus[i].name, db->gpus[i].node, dir);
            hwdb_free(db);
            return -1;
        }
    }
    return 0;
}

int hwdb_load(const char *dir, hwdb *db, char *err, size_t errlen)
{
    if (hwdb_load_datasheets(dir, db, err, errlen) != 0) return -1;
    char priors[1100];
    snprintf(priors, sizeof priors, "%s/priors.csv", dir);
    if (access(priors, F_OK) == 0 && hwdb_apply_overlay(db, priors, err, errlen) != 0) {
        hwdb_free(db);
        return -1;
    }
    /* the priors are part of the database, not a calibration of the GPU at hand */
    for (int i = 0; i < db->ngpus; i++) db->gpus[i].calibration[0] = db->gpus[i].overlay_path[0] = '\0';
    return 0;
}

void hwdb_free(hwdb *db)
{
    if (!db) return;
    free(db->gpus);
    free(db->nodes);
    memset(db, 0, sizeof *db);
}

const hw_gpu *hwdb_find_gpu(const hwdb *db, const char *name)
{
    for (int i = 0; i < db->ngpus; i++)
        if (strcasecmp(db->gpus[i].name, name) == 0) return &db->gpus[i];
    return NULL;
}

/* Whether word occurs in text as a whole word (bounded by non-alphanumerics), ignoring case. */
static int has_word(const char *text, const char *word)
{
    size_t n = strlen(word);
    if (n == 0) return 0;
    for (const char *p = text; *p; p++) {
        if (strncasecmp(p, word, n) != 0) continue;
        int starts = p == text || !isalnum((unsigned char)p[-1]), ends = !isalnum((unsigned char)p[n]);
        if (starts && ends) return 1;
    }
    return 0;
}

int hwdb_gpu_matches_device(const hw_gpu *g, const char *device_name, double device_bytes, char *why, size_t whylen)
{
    /* the model: the first word of the name with a digit in it ("NVIDIA A100-SXM4-80GB": A100) */
    char model[32] = "";
    for (const char *p = device_name; *p && !model[0];) {
        while (*p && !isalnum((unsigned char)*p)) p++;
        size_t n = 0;
        int digit = 0;
        while (p[n] && isalnum((unsigned char)p[n])) digit |= isdigit((unsigned char)p[n++]) != 0;
        if (digit && n < sizeof model) {
            memcpy(model, p, n);
            model[n] = '\0';
        }
        p += n;
    }
    if (model[0] && !has_word(g->full_name, model)) {
        snprintf(why, whylen, "%s is not a %s", g->full_name, model);
        return 0;
    }
    if (device_bytes > 0 && g->memory_bytes > 0 &&
        (device_bytes < 0.85 * g->memory_bytes || device_bytes > 1.05 * g->memory_bytes)) {
        snprintf(why, whylen, "%s has %.0f GiB, this GPU %.1f GiB", g->name, g->memory_bytes / GIB,
                 device_bytes / GIB);
        return 0;
    }
    if (has_word(device_name, "PCIe") != has_word(g->full_name, "PCIe")) {
        snprintf(why, whylen, "one of %s and this GPU is a PCIe card, the other not", g->name);
        return 0;
    }
    return 1;
}

const hw_node *hwdb_find_node(const hwdb *db, const char *name)
{
    for (int i = 0; i < db->nnodes; i++)
        if (strcasecmp(db->nodes[i].name, name) == 0) return &db->nodes[i];
    return NULL;
}

double hw_node_inter_bytes_per_s_per_gpu(const hw_node *node)
{
    return (double)node->nics_per_node * node->nic_bits_per_s / 8.0 / (double)node->gpus_per_node;
}

/* The intra-node keys that calibrate --comm also writes per number of ranks (KEY:N), and where in a fit each lands. */
static const struct {
    const char *key;
    size_t offset;
    double scale, min, max;
} intra_fit_keys[] = {
    {"intra_gbs_per_dir", offsetof(hw_intra_fit, ar_bytes_per_s), GIGA, 0.1, 1e5},
    {"intra_latency_us", offsetof(hw_intra_fit, ar_latency_s), MICRO, 0, 1e4},
    {"intra_gbs_per_dir_reduce_scatter", offsetof(hw_intra_fit, rs_bytes_per_s), GIGA, 0.1, 1e5},
    {"intra_latency_us_reduce_scatter", offsetof(hw_intra_fit, rs_latency_s), MICRO, 0, 1e4},
    {"intra_gbs_per_dir_all_gather", offsetof(hw_intra_fit, ag_bytes_per_s), GIGA, 0.1, 1e5},
    {"intra_latency_us_all_gather", offsetof(hw_intra_fit, ag_latency_s), MICRO, 0, 1e4},
    {"intra_gbs_per_dir_sendrecv", offsetof(hw_intra_fit, sr_bytes_per_s), GIGA, 0.1, 1e5},
    {"intra_latency_us_sendrecv", offsetof(hw_intra_fit, sr_latency_s), MICRO, 0, 1e4},
};

/* The node's fit over `ranks`, added (zeroed) when it has none; NULL with err when the node holds
 * HWDB_INTRA_FITS_MAX numbers of ranks already. */
static hw_intra_fit *intra_fit_of(hw_node *node, long long ranks, const csv_table *t, int r, char *err, size_t errlen)
{
    int i = 0;
    while (i < node->intra_fit_count && node->intra_fits[i].ranks != ranks) i++;
    if (i == HWDB_INTRA_FITS_MAX) {
        snprintf(err, errlen, "%s:%d:key: more than %d numbers of ranks for node '%s'", t->path, t->line[r], HWDB_INTRA_FITS_MAX,
                 node->name);
        return NULL;
    }
    if (i == node->intra_fit_count) {
        memset(&node->intra_fits[i], 0, sizeof node->intra_fits[i]);
        node->intra_fits[i].ranks = ranks;
        node->intra_fit_count++;
    }
    return &node->intra_fits[i];
}

/* An overlay row intra_us_<collective>:N:BYTES, one measured time in microseconds, into the node's fit over N
 * ranks, kept in order of size (a size given again replaces its time): 1 when the key is one, 0 when not, -1 with
 * the line in err. */
static int overlay_intra_time(const csv_table *t, int r, const char *key, hw_node *node, char *err, size_t errlen)
{
    static const char *const names[4] = {"all_reduce", "reduce_scatter", "all_gather", "sendrecv"};
    static const char prefix[] = "intra_us_";
    if (strncmp(key, prefix, sizeof prefix - 1) != 0) return 0;
    const char *name = key + sizeof prefix - 1, *colon = strchr(name, ':');
    int c = 0;
    while (c < 4 && (!colon || strlen(names[c]) != (size_t)(colon - name) || strncmp(names[c], name, (size_t)(colon - name)) != 0))
        c++;
    long long ranks = 0, bytes = 0;
    int used = 0;
    if (c == 4 || sscanf(colon + 1, "%lld:%lld%n", &ranks, &bytes, &used) != 2 || colon[1 + used] != '\0' || ranks < 2 ||
        ranks > 1024 || bytes < 1) {
        snprintf(err, errlen, "%s:%d:key: '%s': not intra_us_COLLECTIVE:RANKS:BYTES (all_reduce, reduce_scatter, all_gather "
                 "or sendrecv; 2 to 1024 ranks; bytes a whole number of 1 or more)", t->path, t->line[r], key);
        return -1;
    }
    double us;
    if (csv_get_double(t, r, "value", 0.01, 1e8, &us, err, errlen) != 0) return -1;
    hw_intra_fit *f = intra_fit_of(node, ranks, t, r, err, errlen);
    if (!f) return -1;
    int n = f->sizes[c], at = 0;
    while (at < n && f->size_bytes[c][at] < (double)bytes) at++;
    if (at < n && f->size_bytes[c][at] == (double)bytes) {
        f->size_s[c][at] = us * MICRO;
        return 1;
    }
    if (n == HWDB_INTRA_SIZES_MAX) {
        snprintf(err, errlen, "%s:%d:key: more than %d sizes of %s over %lld ranks", t->path, t->line[r], HWDB_INTRA_SIZES_MAX,
                 names[c], ranks);
        return -1;
    }
    memmove(&f->size_bytes[c][at + 1], &f->size_bytes[c][at], (size_t)(n - at) * sizeof f->size_bytes[c][0]);
    memmove(&f->size_s[c][at + 1], &f->size_s[c][at], (size_t)(n - at) * sizeof f->size_s[c][0]);
    f->size_bytes[c][at] = (double)bytes;
    f->size_s[c][at] = us * MICRO;
    f->sizes[c] = n + 1;
    return 1;
}

double hw_intra_fit_time_s(const hw_intra_fit *fit, int collective, double bytes)
{
    if (!fit || collective < 0 || collective > 3) return 0.0;
    int n = fit->sizes[collective];
    const double *x = fit->size_bytes[collective], *y = fit->size_s[collective];
    if (n < 2 || bytes < x[0]) return 0.0;
    /* beyond the largest: that message's bandwidth, which NCCL keeps or passes as the message grows (the fit, a
     * line through every size, reads the small messages' lower bandwidth into the large ones: 229 GB/s on 2 x
     * H200's all-gather where 1 GiB measured 266; docs/model.md, "Communication") */
    if (bytes > x[n - 1]) return y[n - 1] * bytes / x[n - 1];
    int i = 1;
    while (i < n - 1 && x[i] < bytes) i++;
    return y[i - 1] + (y[i] - y[i - 1]) * (bytes - x[i - 1]) / (x[i] - x[i - 1]);
}

/* An overlay row KEY:N of intra_fit_keys into the node's fit over N ranks: 1 when the key is one, 0 when not,
 * -1 with the line in err. */
static int overlay_intra_fit(const csv_table *t, int r, const char *key, hw_node *node, char *err, size_t errlen)
{
    const char *colon = strchr(key, ':');
    if (!colon) return 0;
    int k = 0;
    while (k < COUNT(intra_fit_keys) && (strlen(intra_fit_keys[k].key) != (size_t)(colon - key) ||
                                        strncmp(intra_fit_keys[k].key, key, (size_t)(colon - key)) != 0))
        k++;
    if (k == COUNT(intra_fit_keys)) return 0;
    long long ranks = 0;
    int used = 0;
    if (sscanf(colon + 1, "%lld%n", &ranks, &used) != 1 || colon[1 + used] != '\0' || ranks < 2 || ranks > 1024) {
        snprintf(err, errlen, "%s:%d:key: '%s': the ranks after ':' are not a whole number from 2 to 1024", t->path, t->line[r],
                 key);
        return -1;
    }
    double value;
    if (csv_get_double(t, r, "value", intra_fit_keys[k].min, intra_fit_keys[k].max, &value, err, errlen) != 0) return -1;
    hw_intra_fit *f = intra_fit_of(node, ranks, t, r, err, errlen);
    if (!f) return -1;
    *(double *)((char *)f + intra_fit_keys[k].offset) = value * intra_fit_keys[k].scale;
    return 1;
}

const hw_intra_fit *hw_node_intra_fit(const hw_node *node, double ranks, int collective)
{
    const hw_intra_fit *best = NULL;
    double best_distance = 0.0;
    for (int i = 0; i < node->intra_fit_count; i++) {
        const hw_intra_fit *f = &node->intra_fits[i];
        double bw = collective == 0 ? f->ar_bytes_per_s : collective == 1 ? f->rs_bytes_per_s
                    : collective == 2 ? f->ag_bytes_per_s : f->sr_bytes_per_s;
        if (bw <= 0.0 && f->sizes[collective] < 2) continue;   /* neither a fit nor measured times of it */
        /* the ratio, at least 1, orders the fits as |ln(N/n)| does, without a log per costed collective */
        double distance = (double)f->ranks > ranks ? (double)f->ranks / ranks : ranks / (double)f->ranks;
        if (!best || distance < best_distance * (1.0 - 1e-12) ||
            (fabs(distance - best_distance) <= 1e-12 * best_distance && f->ranks < best->ranks)) {
            best = f;
            best_distance = distance;
        }
    }
    /* NCCL's bandwidth over NVSwitch rises with the ranks (an H200's all-gather: 229 GB/s over 2, 281 over 4;
     * published 8-GPU all-reduces 367 Ring, 480 NVLS against 283 over 2 on an H100 here): a fit stands for
     * groups at most HW_INTRA_FIT_MAX_RATIO times or 1/that its size, beyond which the node's own figures do
     * (docs/model.md, "Communication") */
    if (best && best_distance > HW_INTRA_FIT_MAX_RATIO * (1.0 + 1e-9)) return NULL;
    return best;
}

/* The column an overlay key names, and whether it is the GPU's node's. */
static const gpu_numeric_column *overlay_column(const char *key, int *on_node)
{
    *on_node = 0;
    for (int c = 0; c < COUNT(gpu_numeric_columns); c++)
        if (strcmp(gpu_numeric_columns[c].column, key) == 0) return &gpu_numeric_columns[c];
    for (int c = 0; c < COUNT(gpu_overlay_only_columns); c++)
        if (strcmp(gpu_overlay_only_columns[c].column, key) == 0) return &gpu_overlay_only_columns[c];
    for (int c = 0; c < COUNT(node_overlay_columns); c++)
        if (strcmp(node_overlay_columns[c].column, key) == 0) {
            *on_node = 1;
            return &node_overlay_columns[c];
        }
    return NULL;
}

/* A measured shape: key PREFIX + sizes (gemm_us: MxNxK; flash_fwd_us,
 * flash_bwd_us, unfused_fwd_us and unfused_bwd_us: (batch x heads)x(sequence)x
 * (head size)x(batch x KV heads)),
 * value microseconds, into `table` of at most `max` rows.  A shape given twice
 * keeps the later value (an overlay file cannot: refuse_duplicate_keys). */
static int overlay_shape_time(const csv_table *t, int r, const char *gpu, const char *key, size_t prefix_len, int sizes,
                              hw_gemm_time *table, int *count, int max, char *err, size_t errlen)
{
    const char *dims = key + prefix_len;
    long long d[4] = {0, 0, 0, 0};
    int used = 0, got = sizes == 3 ? sscanf(dims, "%lldx%lldx%lld%n", &d[0], &d[1], &d[2], &used)
                                   : sscanf(dims, "%lldx%lldx%lldx%lld%n", &d[0], &d[1], &d[2], &d[3], &used);
    int ok = got == sizes && dims[used] == '\0';
    for (int i = 0; i < sizes; i++) ok = ok && d[i] >= 1 && d[i] <= 1000000000LL;
    if (!ok) {
        snprintf(err, errlen, "%s:%d:key: '%s' is not %.*s%s with positive sizes", t->path, t->line[r], key,
                 (int)prefix_len, key, sizes == 3 ? "MxNxK" : "BHxSxDxBKV");
        return -1;
    }
    double us;
    if (csv_get_double(t, r, "value", 1e-3, 1e9, &us, err, errlen) != 0) return -1;
    int i = 0;
    while (i < *count && !(table[i].m == d[0] && table[i].n == d[1] && table[i].k == d[2] && table[i].kv == d[3])) i++;
    if (i == max) {
        snprintf(err, errlen, "%s:%d:key: more than %d shapes of %.*s for GPU '%s'", t->path, t->line[r], max,
                 (int)prefix_len - 1, key, gpu);
        return -1;
    }
    table[i] = (hw_gemm_time){d[0], d[1], d[2], d[3], us * 1e-6};
    if (i == *count) (*count)++;
    return 0;
}

/* a row's (gpu, key) for finding a key given twice: sorted, equal pairs sit side by side */
typedef struct {
    const char *gpu, *key;
    int line;
} overlay_row_key;

static int compare_row_keys(const void *pa, const void *pb)
{
    const overlay_row_key *a = pa, *b = pb;
    int c = strcasecmp(a->gpu, b->gpu);
    if (!c) c = strcmp(a->key, b->key);
    return c ? c : (a->line > b->line) - (a->line < b->line);
}

/* An overlay gives each (gpu, key) once: a second row would silently win over the first, so it is refused
 * naming both lines.  Sorting keeps this O(n log n) in the rows. */
static int refuse_duplicate_keys(const csv_table *t, const char *path, char *err, size_t errlen)
{
    int gc = csv_table_column(t, "gpu"), kc = csv_table_column(t, "key");
    if (gc < 0 || kc < 0 || t->nrows < 2) return 0; /* a missing column is named by the row checks */
    overlay_row_key *rows = malloc((size_t)t->nrows * sizeof *rows);
    if (!rows) {
        snprintf(err, errlen, "%s: out of memory", path);
        return -1;
    }
    for (int r = 0; r < t->nrows; r++) rows[r] = (overlay_row_key){t->cells[r][gc], t->cells[r][kc], t->line[r]};
    qsort(rows, (size_t)t->nrows, sizeof *rows, compare_row_keys);
    int status = 0;
    for (int r = 1; r < t->nrows && !status; r++)
        if (!strcasecmp(rows[r].gpu, rows[r - 1].gpu) && !strcmp(rows[r].key, rows[r - 1].key)) {
            snprintf(err, errlen, "%s:%d:key: '%s' of %s given again (first at line %d); an overlay gives each key once",
                     path, rows[r].line, rows[r].key, rows[r].gpu, rows[r - 1].line);
            status = -1;
        }
    free(rows);
    return status;
}

int hwdb_measured_overlay_path(const char *hwdb_dir, const char *gpu, char *path, size_t len)
{
    int n = snprintf(path, len, "%s/measured/%s.csv", hwdb_dir, gpu);
    return n > 0 && (size_t)n < len && access(path, R_OK) == 0;
}

int hwdb_overlay_gpus(const char *path, char *names, size_t len, char *err, size_t errlen)
{
    csv_table t;
    if (csv_table_read(path, &t, err, errlen) != 0) return -1;
    int gc = csv_table_column(&t, "gpu"), count = 0;
    const char *distinct[256];
    names[0] = '\0';
    for (int r = 0; gc >= 0 && r < t.nrows; r++) {
        const char *name = t.cells[r][gc];
        int seen = 0;
        for (int q = 0; q < count && !seen; q++) seen = !strcasecmp(distinct[q], name);
        if (seen || count == 256) continue;
        distinct[count] = name;
        size_t used = strlen(names);
        snprintf(names + used, len - used, "%s%s", count++ ? ", " : "", name);
    }
    csv_table_free(&t);
    return count;
}

int hwdb_apply_overlay(hwdb *db, const char *path, char *err, size_t errlen)
{
    csv_table t;
    if (csv_table_read(path, &t, err, errlen) != 0) return -1;
    int status = refuse_duplicate_keys(&t, path, err, errlen);
    for (int r = 0; r < t.nrows && !status; r++) {
        char gpu_name[HWDB_NAME_MAX], key[64], source[HWDB_SOURCE_MAX];
        double value;
        status |= csv_get_string(&t, r, "gpu", 0, gpu_name, sizeof gpu_name, err, errlen);
        if (!status) status |= csv_get_string(&t, r, "key", 0, key, sizeof key, err, errlen);
        if (!status) status |= csv_get_string(&t, r, "source", 0, source, sizeof source, err, errlen);
        if (status) break;
        hw_gpu *g = (hw_gpu *)hwdb_find_gpu(db, gpu_name);
        if (!g) {
            snprintf(err, errlen, "%s:%d:gpu: unknown GPU '%s'", path, t.line[r], gpu_name);
            status = -1;
            break;
        }
        static const char *shape_keys[5] = {"gemm_us:", "flash_fwd_us:", "flash_bwd_us:", "unfused_fwd_us:",
                                            "unfused_bwd_us:"};
        int shape_key = 0;
        while (shape_key < 5 && strncmp(key, shape_keys[shape_key], strlen(shape_keys[shape_key])) != 0) shape_key++;
        if (shape_key < 5) {
            hw_gemm_time *table = shape_key == 0 ? g->gemm_time
                                  : shape_key <= 2 ? g->attention_time[shape_key - 1]
                                                   : g->unfused_attention_time[shape_key - 3];
            int *count = shape_key == 0 ? &g->gemm_times
                         : shape_key <= 2 ? &g->attention_times[shape_key - 1]
                                          : &g->unfused_attention_times[shape_key - 3];
            int max = shape_key == 0 ? HWDB_GEMM_TIMES_MAX : HWDB_ATTENTION_TIMES_MAX;
            if (overlay_shape_time(&t, r, g->name, key, strlen(shape_keys[shape_key]), shape_key == 0 ? 3 : 4, table, count,
                                   max, err, errlen) != 0) {
                status = -1;
                break;
            }
            /* the table's rows name their shape; the GPU names the file and its first row's source */
            if (!g->calibration[0]) snprintf(g->calibration, sizeof g->calibration, "%.200s (%.250s)", path, source);
            snprintf(g->overlay_path, sizeof g->overlay_path, "%s", path);
            continue;
        }
        hw_node *node = (hw_node *)hwdb_find_node(db, g->node);
        int fit = node ? overlay_intra_fit(&t, r, key, node, err, errlen) : 0, timed = 0;
        if (fit == 0 && node) timed = overlay_intra_time(&t, r, key, node, err, errlen);
        if (fit < 0 || timed < 0) {
            status = -1;
            break;
        }
        if (fit || timed) {
            /* a measured time per size is a table's row, like a shape's: it names the GPU's calibration only first */
            if (fit || !g->calibration[0]) snprintf(g->calibration, sizeof g->calibration, "%.200s (%.250s)", path, source);
            snprintf(g->overlay_path, sizeof g->overlay_path, "%s", path);
            continue;
        }
        int on_node;
        const gpu_numeric_column *col = overlay_column(key, &on_node);
        if (!col) {
            snprintf(err, errlen, "%s:%d:key: '%s' is neither a numeric gpus.csv column nor an overlay key", path,
                     t.line[r], key);
            status = -1;
            break;
        }
        if (csv_get_double(&t, r, "value", col->min, col->max, &value, err, errlen) != 0) {
            status = -1;
            break;
        }
        void *target = g;
        if (on_node) {
            /* hwdb_load checked that every GPU's node exists */
            target = (hw_node *)hwdb_find_node(db, g->node);
            if (!target) {
                snprintf(err, errlen, "%s:%d:gpu: GPU '%s' has no node '%s'", path, t.line[r], g->name, g->node);
                status = -1;
                break;
            }
        }
        *(double *)((char *)target + col->offset) = value * col->scale;
        snprintf(g->calibration, sizeof g->calibration, "%.200s (%.250s)", path, source);
        snprintf(g->overlay_path, sizeof g->overlay_path, "%s", path);
    }
    csv_table_free(&t);
    return status ? -1 : 0;
}

int name_distance(const char *a, const char *b)
{
    size_t la = strlen(a), lb = strlen(b);
    if (la > 128 || lb > 128) return 1 << 20;
    int prev[129], cur[129];
    for (size_t j = 0; j <= lb; j++) prev[j] = (int)j;
    for (size_t i = 1; i <= la; i++) {
        cur[0] = (int)i;
        for (size_t j = 1; j <= lb; j++) {
            int same = tolower((unsigned char)a[i - 1]) == tolower((unsigned char)b[j - 1]);
            int best = prev[j - 1] + !same;
            if (prev[j] + 1 < best) best = prev[j] + 1;
            if (cur[j - 1] + 1 < best) best = cur[j - 1] + 1;
            cur[j] = best;
        }
        memcpy(prev, cur, (lb + 1) * sizeof prev[0]);
    }
    return prev[lb];
}

void closest_names(const char *wanted, const char *const *names, int count, int max, char *out,
                   size_t outlen)
{
    out[0] = '\0';
    int used[256] = {0};
    if (count > 256) count = 256;
    for (int pick = 0; pick < max && pick < count; pick++) {
        int best = -1, best_d = 1 << 30;
        for (int i = 0; i < count; i++) {
            if (used[i]) continue;
            int d = name_distance(wanted, names[i]);
            /* A name that contains the query is close whatever its length. */
            if (strcasestr(names[i], wanted)) d = d / 4;
            if (d < best_d) { best_d = d; best = i; }
        }
        if (best < 0) break;
        used[best] = 1;
        size_t len = strlen(out);
        snprintf(out + len, outlen - len, "%s%s", len ? ", " : "", names[best]);
    }
}
