/* calibrate --comm's overlap measurement: how much slower a bf16 GEMM runs
 * while an NCCL collective runs beside it on another stream, and how much
 * slower the collective runs beside the GEMM (docs/model.md, "Overlap is not
 * free").  overlap.c measures on the GPUs (every rank); overlap_report.c,
 * plain C, summarises, prints and writes the CSV and the overlay rows. */
#ifndef SEXTANT_OVERLAP_H
#define SEXTANT_OVERLAP_H

#include <stddef.h>
#include <stdio.h>

#define OVERLAP_MAX_SHAPES 4
#define OVERLAP_MAX_SIZES 4
/* Below this a slowdown is not resolved (the medians of repeated runs move
 * by about this much); the overlay gets this instead of 0, which means "not
 * measured". */
#define OVERLAP_RESOLUTION 0.001

enum { OVERLAP_AG = 0, OVERLAP_RS, OVERLAP_AR, OVERLAP_KINDS };

/* The step's other kinds of compute, each measured beside the same collectives as the GEMMs (a step's
 * compute beside ZeRO-3's collectives is not one GEMM looped; docs/model.md, "Overlap is not free"):
 *   VICTIM_EXPERTS    count GEMMs of m x n x k, one per expert, dealt over OVERLAP_EXPERT_STREAMS streams as
 *                      the trainer's expert GEMMs are (each expert its own weights);
 *   VICTIM_ATTENTION  the step's fused attention's forward: m tokens, n heads of dimension k, causal, one
 *                      sequence;
 *   VICTIM_ATTENTION_BWD  its backward, the same shape;
 *   VICTIM_MEMBOUND   a residual add over m bf16 elements (two read, one written): the norms, adds and
 *                      copies between the GEMMs. */
enum { VICTIM_EXPERTS = 0, VICTIM_ATTENTION, VICTIM_ATTENTION_BWD, VICTIM_MEMBOUND, OVERLAP_CLASSES };
#define OVERLAP_EXPERT_STREAMS 4

typedef struct {
    long long count, m, n, k;   /* see VICTIM_EXPERTS..VICTIM_MEMBOUND above; unused dimensions 0 */
} overlap_victim;

typedef struct {
    long long m, n, k;   /* C[m, n] = A[m, k] B[k, n], bf16 with fp32 accumulation */
} overlap_shape;

typedef struct {
    int enabled;
    int nshapes;
    overlap_shape shape[OVERLAP_MAX_SHAPES];
    int nsizes;
    size_t bytes[OVERLAP_MAX_SIZES];   /* the collective's whole, unsharded buffer, as calibrate --comm's size */
    int classes;                       /* 1: the step's other compute (victim[]) measured as well */
    overlap_victim victim[OVERLAP_CLASSES];
    int repeats;                       /* timed pairs (alone, beside) per measurement; the median is kept */
    const char *csv_path;              /* NULL: no CSV */
} overlap_options;

/* The defaults: a training step's GEMMs, 4096x3072x768, 2048x8192x2048, 2048x2048x8192 and
 * 8192x4096x1024 (a thin K, more bytes per FLOP); 4, 16, 64 and 256 MiB; 9 repeats; the other compute
 * at OLMoE's sizes (64 experts of 512 x 2048 x 2048; 4096 tokens of 16 heads of 128) and a 64 Mi-element add. */
void overlap_default_options(overlap_options *o);

/* One GEMM shape beside one collective of one size.  Times are per call,
 * the slowest rank's median; the slowdowns t_beside / t_alone - 1 are
 * computed per rank and their range over the ranks is kept. */
typedef struct {
    int measured;          /* 0: the other stream never covered the timed window; nothing else is set */
    int coll_measured;     /* the collective's half (coll_*): with a GEMM, measured as the cell is; beside a class
                              apart, as a collective starved of SMs may outlast any window its victim covers */
    double gemm_alone_s, gemm_beside_s;
    double coll_alone_s, coll_beside_s;
    double gemm_slowdown_min, gemm_slowdown_max;
    double coll_slowdown_min, coll_slowdown_max;
} overlap_cell;

typedef struct {
    int ranks;
    overlap_options o;
    overlap_cell cell[OVERLAP_MAX_SHAPES][OVERLAP_KINDS][OVERLAP_MAX_SIZES];
    overlap_cell class_cell[OVERLAP_CLASSES][OVERLAP_KINDS][OVERLAP_MAX_SIZES];   /* o.classes: the same, the
                                                                                     victim[] beside (gemm_*: it) */
} overlap_results;

/* The overlay's four figures: the median over the measured cells (shapes x
 * sizes) of each kind's GEMM slowdown, and over every cell of the
 * collective's; have_*: at least one cell was measured. */
typedef struct {
    int have_compute[OVERLAP_KINDS];
    double compute[OVERLAP_KINDS];
    int have_comm;
    double comm;
    int cells[OVERLAP_KINDS];
    /* each class of the step's other compute: the medians over every kind and size of its slowdown and of
     * the collective's beside it */
    int have_class[OVERLAP_CLASSES], have_class_comm[OVERLAP_CLASSES];
    double class_compute[OVERLAP_CLASSES], class_comm[OVERLAP_CLASSES];
    int class_cells[OVERLAP_CLASSES], class_comm_cells[OVERLAP_CLASSES];
} overlap_summary;

extern const char *const overlap_kind_names[OVERLAP_KINDS];   /* all_gather, reduce_scatter, all_reduce */
extern const char *const overlap_kind_keys[OVERLAP_KINDS];    /* the overlay key of each kind's GEMM slowdown */
extern const char *const overlap_class_names[OVERLAP_CLASSES];         /* experts, attention, attention_bwd, membound */
extern const char *const overlap_class_keys[OVERLAP_CLASSES];  /* a class's overlay key, or NULL: a comment row */

/* The device memory the measurement allocates on each rank, at most; of it, the classes' victims'. */
size_t overlap_device_bytes(const overlap_options *o);
size_t overlap_class_bytes(const overlap_options *o);

/* "MxNxK", each from 1 to 131072; 0, or -1 when it does not parse. */
int overlap_parse_shape(const char *text, overlap_shape *out);

/* The slowdown of one cell computed from its times (t_beside / t_alone - 1,
 * the slowest rank's medians). */
double overlap_gemm_slowdown(const overlap_cell *c);
double overlap_coll_slowdown(const overlap_cell *c);

void overlap_summarise(const overlap_results *r, overlap_summary *s);
/* The table and the summary, to out. */
void overlap_print(FILE *out, const overlap_results *r, const overlap_summary *s);
/* One row per cell; 0, or -1 after one stderr line naming the path. */
int overlap_write_csv(const char *path, const overlap_results *r);
/* The overlay rows of the four keys and of the classes' (each measured one; a value beyond the key's range,
 * or a class without a key, is kept as a comment row instead), for GPU `gpu`, with
 * `source` naming the run.  Returns how many keys were written. */
int overlap_write_overlay_rows(FILE *f, const char *gpu, const char *source, const overlap_results *r,
                               const overlap_summary *s);

struct launch_ctx;
/* Every rank: measures each shape x kind x size cell of o on this rank's
 * GPU and the ranks' communicator; the results (the same on every rank)
 * into r.  0, or -1 after one stderr line naming the rank (the communicator
 * may then be aborted). */
int overlap_measure(struct launch_ctx *ctx, const overlap_options *o, overlap_results *r);

#endif
