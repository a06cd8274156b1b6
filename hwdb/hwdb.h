/* hwdb: the hardware database (GPUs and nodes), read from CSV with libcsv.
 *
 * Every quantity is held in SI units (bytes, bytes/s, FLOP/s, seconds, watts,
 * US dollars); the CSV columns carry the units in their names and are
 * converted once, here, when read.  Every row carries its source.
 */
#ifndef SEXTANT_HWDB_H
#define SEXTANT_HWDB_H

#include <stddef.h>
#include <stdint.h>

#define HWDB_NAME_MAX 64
#define HWDB_SOURCE_MAX 512
#define HWDB_ERR_MAX 512

/* ---- a small CSV table, shared by hwdb and models ---------------------- */

typedef struct {
    char path[512];
    int ncols;
    char **header;      /* ncols names */
    int nrows;
    char ***cells;      /* nrows x ncols strings */
    int *line;          /* the file line each row started on */
} csv_table;

/* No CSV field (and no line) sextant reads is longer: a longer one is refused
 * with file:line, in time linear in the bytes read before it. */
#define CSV_FIELD_MAX (1 << 20)

/* Reads a whole CSV file whose first row is a header.  Rows whose first field
 * starts with '#' and blank rows are skipped.  Returns 0, or -1 with a
 * "file:line: reason" message in err (a directory is named as one). */
int csv_table_read(const char *path, csv_table *table, char *err, size_t errlen);
void csv_table_free(csv_table *table);
/* Column index of name, or -1. */
int csv_table_column(const csv_table *table, const char *name);
/* The cell, or NULL when the column does not exist. */
const char *csv_table_cell(const csv_table *table, int row, const char *column);

/* Field parsers used by every loader: they reject empty, non-numeric,
 * non-finite, out-of-range or trailing-garbage text and say which
 * file:line:field was wrong. */
int csv_get_double(const csv_table *t, int row, const char *column, double min, double max,
                   double *out, char *err, size_t errlen);
int csv_get_int64(const csv_table *t, int row, const char *column, int64_t min, int64_t max,
                  int64_t *out, char *err, size_t errlen);
int csv_get_string(const csv_table *t, int row, const char *column, int allow_empty,
                   char *out, size_t outlen, char *err, size_t errlen);

/* ---- GPUs and nodes ---------------------------------------------------- */

typedef enum { PREC_FP32 = 0, PREC_TF32, PREC_FP16, PREC_BF16, PREC_FP8, PREC_COUNT } precision_t;

/* One shape timed by calibrate as the training step runs it: a GEMM (bf16,
 * fp32 accumulation) C[m, n] = A[m, k] B[k, n], or our fused attention with
 * m = batch x heads, n = sequence, k = head size, kv = batch x KV heads;
 * `seconds` per call. */
#define HWDB_GEMM_TIMES_MAX 320
#define HWDB_ATTENTION_TIMES_MAX 96
typedef struct {
    int64_t m, n, k;
    int64_t kv;       /* attention: batch x KV heads (its GQA grouping); 0 for a GEMM */
    double seconds;
} hw_gemm_time;

typedef struct {
    char name[HWDB_NAME_MAX];
    char full_name[128];
    char arch[32];
    double memory_bytes;              /* capacity, memory_gib * 2^30 */
    double hbm_bytes_per_s;
    double peak_flops[PREC_COUNT];    /* dense; 0 when the precision is not supported */
    double nvlink_bytes_per_s_per_dir;
    int pcie_gen, pcie_lanes;
    double tdp_w;
    double list_price_usd;
    double cloud_usd_per_gpu_hour;
    double gemm_efficiency;           /* achievable fraction of peak_flops for large GEMMs */
    double membound_efficiency;       /* achievable fraction of hbm for memory-bound ops */
    double optimizer_membound_efficiency;   /* the optimizer step's (AdamW: four arrays in, four out); 0 until
                                               calibrate measures it, then the memory-bound figure stands for it */
    double launch_overhead_s;         /* per-kernel fixed cost; 0 until calibrated */
    double gemm_issue_s;              /* the host's time to issue one expert GEMM as a grouped linear does (cuBLASLt,
                                         layouts reshaped, streams in turn); 0 until calibrate measures it */
    double gemm_half_flops;           /* GEMM size at which efficiency is half its plateau; 0: flat */
    /* The GEMM time over M, N, K (docs/model.md, "GEMM time over M, N, K"), fitted by sextant fit-gemm to
     * calibrate's gemm_us rows; all 0 until fitted (then GEMMs without a measured time use it, not the curve) */
    double gemm_tile_flops;           /* the 16-bit MMA rate of all SMs running full tiles */
    double gemm_tile_s;               /* fixed time of one tile (pipeline fill, epilogue), paid once per wave */
    double gemm_fixed_s;              /* fixed time of one GEMM (launch, ramp-up, tail) */
    double sm_count;                  /* streaming multiprocessors, as CUDA reports them */
    double gemm_accumulate_read_factor;  /* a weight gradient added into its gradient (beta = 1): the time it adds,
                                            as a multiple of its gradient's read at HBM speed; 0: none */
    double gemm_accumulate_write_factor; /* and of the store bytes a wider gradient (fp32) adds over a 16-bit output */
    double gemm_bias_grad_factor;     /* a weight gradient with the bias gradient fused into its epilogue takes this
                                         many times the model's time; 0: not fitted (1) */
    double context_bytes;             /* CUDA context + library workspaces, measured; 0: the default */
    double nccl_comm_bytes;           /* device memory one NCCL communicator holds, measured; 0: the default */
    double nccl_first_comm_bytes;     /* the same for a process's first (NCCL's per-process state with it); 0: as above */
    double nccl_p2p_comm_bytes;       /* the same for one that runs send/recv only (a pipeline's); 0: as nccl_comm_bytes */
    /* the parts calibrate --comm measures since 2026-11-26 (docs/model.md, "Other memory"); 0: the totals above */
    double nccl_process_bytes;        /* the world communicator: its creation and first small all-reduce */
    double nccl_split_bytes;          /* one more communicator at its split, before any use */
    double nccl_collective_bytes;     /* its buffers once collectives ran on it */
    double nccl_p2p_buffers_bytes;    /* a communicator's send/recv buffers */
    double nccl_p2p_first_bytes;      /* the process's first send/recv's (NCCL's one-time part with them) */
    double measured_intra_bytes_per_s;/* collective bus bandwidth inside a node; 0 until calibrated */
    double measured_inter_bytes_per_s;/* the same across nodes, per GPU; 0 until calibrated */
    double flash_fwd_efficiency;      /* the frameworks' fused attention (FlashAttention-2/3, cuDNN) forward:
                                         fraction of the 16-bit peak on the FLOPs the planner executes
                                         (hwdb/priors.csv); 0: a GEMM's */
    double flash_bwd_efficiency;      /* the same for its backward */
    double attention_fwd_efficiency;  /* sextant-gpu's own fused attention kernel forward, as calibrate measured
                                         it (--attention sextant); 0 until calibrated */
    double attention_bwd_efficiency;  /* the same for its backward; 0 until calibrated */
    double flash1_relative_speed;     /* the first-generation fused attention (FlashAttention-1's CUDA kernels)
                                         over the frameworks' (flash_*), same work (hwdb/priors.csv); 0: taken as 1 */
    double flash1_triton_relative_speed; /* the same for FlashAttention-1's Triton port (MPT's); 0: taken as 1 */
    double fp8_gemm_relative_efficiency; /* an FP8 GEMM's achieved fraction of the FP8 peak over a 16-bit GEMM's
                                            of the 16-bit peak (hwdb/priors.csv); 0: taken as 1 */
    double fp8_backward_gemm_relative_efficiency; /* the same for the backward's FP8 GEMMs (data and weight
                                            gradients), which Transformer Engine runs without cuBLASLt's fast
                                            accumulation; calibrate measures it; 0: the forward's */
    double membound_overhead_s;       /* fixed GPU time of one memory-bound kernel (ramp-up and tail) beside
                                         its bytes / bandwidth; 0 until calibrated */
    /* The step's clock under the power cap (docs/model.md, "Clock under the power cap"): at clock
     * fraction x a step draws static_w + (e_gemm F_gemm + e_attention F_attention + e_byte bytes) x^exponent
     * per second; all 0 until calibrate measures them (then the model is on). */
    double power_cap_w;               /* the enforced power limit; 0: tdp_w */
    double clock_max_hz;              /* the top SM clock, which calibrate's shape times are taken at */
    double power_static_w;            /* drawn while busy, whatever the work */
    double energy_gemm_j_per_flop;    /* switching energy of a GEMM's FLOP at the top clock */
    double energy_attention_j_per_flop; /* the same for our fused attention's */
    double energy_j_per_byte;         /* the same for a byte of device-memory traffic */
    double clock_energy_exponent;     /* how energy per operation falls with the clock */
    /* how a step's GEMMs follow the clock: at clock fraction x their clock-bound seconds take
     * clock_time_factor x^-clock_time_exponent times calibrate's top-clock time (docs/model.md, "Clock under
     * the power cap", GEMM time against the clock; the other clock-bound kernels take 1 / x); 0 for either:
     * 1, the plain 1 / x (gpu_clock_time_factor, gpu_clock_time_exponent) */
    double clock_time_factor;
    double clock_time_exponent;
    double collective_power_w;        /* what the GPU draws while NCCL collectives run and nothing else: a
                                         collective's seconds add (this - power_static_w) x seconds to the step's
                                         energy; 0: they draw the static power only */
    double power_static_spread_w;     /* chip-to-chip standard deviation of that static power: under the cap the
                                         chip that leaks most runs slowest, and a synchronous step waits for it
                                         (docs/model.md, "Clock under the power cap"); 0: every chip the same */
    /* Overlap is not free (docs/model.md): how much slower a bf16 GEMM runs while an NCCL collective of that
     * kind runs beside it on another stream, t_beside / t_alone - 1 (0.12: 12% slower), and how much slower
     * the collective runs beside the GEMM; measured by calibrate --comm; 0, the default, means not measured
     * (the planner then uses its prior). */
    double overlap_compute_slowdown_allgather;
    double overlap_compute_slowdown_reducescatter;
    double overlap_compute_slowdown_allreduce;
    double overlap_comm_slowdown;
    /* The same for the experts' GEMMs launched one an expert on their streams, whose launches leave SMs idle, beside
     * any collective (calibrate --comm's experts victim, validator/overlap.h; the median over the kinds); 0: not
     * measured, they then count as GEMMs (the kind's figure above). */
    double overlap_compute_slowdown_experts;
    int gemm_times;                   /* measured GEMM shapes (overlay keys gemm_us:MxNxK); 0 until calibrated */
    hw_gemm_time gemm_time[HWDB_GEMM_TIMES_MAX];
    int attention_times[2];           /* sextant-gpu's fused attention measured, forward [0] and backward [1] (overlay keys
                                         flash_fwd_us:BHxSxD, flash_bwd_us:BHxSxD); 0 until calibrated */
    hw_gemm_time attention_time[2][HWDB_ATTENTION_TIMES_MAX];
    int unfused_attention_times[2];   /* measured unfused attention (cuBLAS batched GEMMs and our softmax),
                                         forward [0] and backward [1] (overlay keys unfused_fwd_us:BHxSxDxBKV,
                                         unfused_bwd_us:BHxSxDxBKV); 0 until calibrated */
    hw_gemm_time unfused_attention_time[2][HWDB_ATTENTION_TIMES_MAX];
    char node[HWDB_NAME_MAX];
    char source[HWDB_SOURCE_MAX];
    char calibration[HWDB_SOURCE_MAX];/* where the overlay came from, "" when none */
    char overlay_path[HWDB_SOURCE_MAX];/* the overlay file last applied to this GPU as the user would name it,
                                         "" when none */
    int overlay_by_default;           /* 1: the CLI took overlay_path from hwdb/measured/ by the GPU's name */
    int overlay_declined;             /* 1: hwdb/measured/ has one, and --calibration none declined it */
} hw_gpu;

typedef enum { LINK_NVLINK = 0, LINK_PCIE } link_kind_t;

/* calibrate --comm's fits inside a node over one number of ranks: NCCL reaches other bandwidths and latencies
 * over 2 GPUs than over 4 of the same node (docs/model.md, "Communication"; measured on H200s,
 * docs/validation/2026-11-26-h200x4-calibrated).  Overlay keys KEY:N, e.g. intra_gbs_per_dir_all_gather:4; a
 * figure is 0 until calibrated. */
#define HWDB_INTRA_FITS_MAX 8
/* calibrate --comm's measured times themselves, per collective and message size (intra_us_<collective>:N:BYTES):
 * NCCL's bandwidth climbs with the message, which no line a + b S follows from 1 MiB to 256 MiB (on 2 x H100 the
 * all-gather's fit is 9% short at 12 MiB, docs/validation/2026-11-26-h100x2-unseen) */
#define HWDB_INTRA_SIZES_MAX 24
typedef struct {
    int64_t ranks;
    double ar_bytes_per_s, ar_latency_s;   /* all-reduce (intra_gbs_per_dir:N, intra_latency_us:N) */
    double rs_bytes_per_s, rs_latency_s;
    double ag_bytes_per_s, ag_latency_s;
    double sr_bytes_per_s, sr_latency_s;
    /* [collective: 0 all-reduce, 1 reduce-scatter, 2 all-gather, 3 send/recv]: sizes ascending, bytes as
     * nccl-tests counts them (the whole buffer; the gathered or reduced tensor; what one rank sends) */
    int sizes[4];
    double size_bytes[4][HWDB_INTRA_SIZES_MAX], size_s[4][HWDB_INTRA_SIZES_MAX];
} hw_intra_fit;

typedef struct {
    char name[HWDB_NAME_MAX];
    char gpu[HWDB_NAME_MAX];
    int64_t gpus_per_node;
    link_kind_t intra_link;
    double intra_bytes_per_s_per_dir;  /* per GPU */
    double intra_latency_s;
    /* calibrate --comm's own fit for reduce-scatter, all-gather and send/recv
     * inside the node (all-reduce's is the two above); 0 until calibrated */
    double intra_rs_bytes_per_s, intra_rs_latency_s;
    double intra_ag_bytes_per_s, intra_ag_latency_s;
    double intra_sr_bytes_per_s, intra_sr_latency_s;
    hw_intra_fit intra_fits[HWDB_INTRA_FITS_MAX];   /* the same over given numbers of ranks, in overlay order */
    int intra_fit_count;
    int64_t nics_per_node;
    double nic_bits_per_s;
    double inter_latency_s;
    /* what NCCL reaches of the NICs across nodes (docs/model.md, "The network at scale"): the fraction of
     * line rate for large messages, and the message size at which it reaches half of that; 0: 1 and none */
    double inter_bus_efficiency, inter_half_bytes;
    char source[HWDB_SOURCE_MAX];
} hw_node;

typedef struct {
    hw_gpu *gpus;
    int ngpus;
    hw_node *nodes;
    int nnodes;
    char dir[512];
} hwdb;

/* Loads dir/gpus.csv and dir/nodes.csv and checks that every GPU's node exists. */
int hwdb_load(const char *dir, hwdb *db, char *err, size_t errlen);
/* The same without DIR/priors.csv: the datasheets' rows alone (the tests of each mechanism start there). */
int hwdb_load_datasheets(const char *dir, hwdb *db, char *err, size_t errlen);
void hwdb_free(hwdb *db);
/* Case-insensitive lookups; NULL when absent. */
const hw_gpu *hwdb_find_gpu(const hwdb *db, const char *name);
const hw_node *hwdb_find_node(const hwdb *db, const char *name);
/* Whether the GPU CUDA names device_name, with device_bytes of memory, plausibly is row g: g's
 * full name holds the device's model (H100, A100, 4090, ...), the memory is within 85-105% of g's
 * (CUDA reports a little less than the datasheet), and both or neither are PCIe cards.  1, or 0
 * with the first difference in why. */
int hwdb_gpu_matches_device(const hw_gpu *g, const char *device_name, double device_bytes, char *why, size_t whylen);
/* Applies a calibration overlay (CSV gpu,key,value,source) to the loaded
 * database: each row replaces one numeric column of one GPU (or sets one of
 * the overlay-only keys: launch_overhead_us, gemm_half_gflop,
 * context_memory_gib, nccl_busbw_intra_gbs, nccl_busbw_inter_gbs,
 * flash_fwd_efficiency, flash_bwd_efficiency, attention_fwd_efficiency,
 * attention_bwd_efficiency, the overlap_* slowdowns
 * of calibrate --comm, ...), or, for the
 * keys intra_gbs_per_dir and intra_latency_us (nodes.csv columns, written by
 * calibrate --comm), of that GPU's node.  A (gpu, key) given twice is
 * refused, naming both lines. */
int hwdb_apply_overlay(hwdb *db, const char *path, char *err, size_t errlen);
/* The measured overlay shipped for `gpu` beside the hwdb in `hwdb_dir`: DIR/measured/<gpu>.csv written into
 * `path`; 1 when it is there to read, 0 when not (estimate, explain, plan and validate take it by default). */
int hwdb_measured_overlay_path(const char *hwdb_dir, const char *gpu, char *path, size_t len);
/* The GPUs an overlay's rows name, each once in file order, ", "-separated
 * into `names`; their count, or -1 with err when the file cannot be read. */
int hwdb_overlay_gpus(const char *path, char *names, size_t len, char *err, size_t errlen);
/* hwdb_load applies DIR/priors.csv, when present, as an overlay before any other: per-GPU priors for what
 * the datasheet does not give (attention kernels' efficiency, kernels' fixed costs, FP8 GEMMs' efficiency),
 * each row with its source (docs/model.md, "Priors").  A measured overlay applied later replaces them. */
/* Inter-node bandwidth available to one GPU, per direction: the node's NICs
 * shared by its GPUs. */
double hw_node_inter_bytes_per_s_per_gpu(const hw_node *node);
/* The fit over the number of ranks nearest to `ranks` (by their ratio; ties to the fewer) that has a figure or
 * measured times for the collective (0 all-reduce, 1 reduce-scatter, 2 all-gather, 3 send/recv); NULL when none has, or when the
 * nearest was measured over more than HW_INTRA_FIT_MAX_RATIO times, or less than 1/that, the ranks asked for. */
#define HW_INTRA_FIT_MAX_RATIO 1.5
/* The measured time of `collective` (as above) over the fit's ranks for a message of `bytes`: linear between the
 * two measured sizes around it, proportional to the largest beyond it; 0 below the smallest or with fewer than
 * two. */
double hw_intra_fit_time_s(const hw_intra_fit *fit, int collective, double bytes);
const hw_intra_fit *hw_node_intra_fit(const hw_node *node, double ranks, int collective);

const char *precision_name(precision_t p);
int precision_parse(const char *text, precision_t *out);

/* Edit distance (case-insensitive), used to suggest the closest known names. */
int name_distance(const char *a, const char *b);
/* Writes up to `max` names closest to `wanted` as "a, b, c" into out. */
void closest_names(const char *wanted, const char *const *names, int count, int max,
                   char *out, size_t outlen);

#endif
