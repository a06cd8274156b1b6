/* A mixture-of-experts layer's routing and token exchange, the bookkeeping and its
 * float64 reference (validator/moe_plan.c): plain C, no CUDA.  validator/moe.c runs
 * the plan on the GPU (kernels/moe.cu); tests/test_moe_route.c checks both halves
 * here, and tests/gpu/test_moe_kernels.cu checks the kernels against the reference.
 *
 * Routing (Mixtral's): each of N tokens goes to the k experts of largest router logit
 * (ties to the lower index), in decreasing order of logit, with gates the softmax of
 * those k logits.  Slot s = n k + j is token n's j-th choice.
 *
 * Permutation: the N k slots sorted by expert, stably (token order within an expert):
 * pos[s] is slot s's row in the sorted buffer, row_slot[r] the slot of row r, counts[e]
 * the rows of expert e.  The dispatch copies token row_slot[r] / k into row r; the
 * combine sums out[n] = sum_j gate[n k + j] ys[pos[n k + j]], and is its own inverse's
 * transpose (the dispatch's backward is a combine with gates 1).
 *
 * Exchange over an expert-parallel group of ep ranks: rank q holds experts
 * [q E/ep, (q+1) E/ep).  Every rank knows every rank's counts (an all-gather of E
 * integers), so each side of every transfer computes the same chunk sizes: the chunk
 * (p, e) is what rank p routes to local expert e of the receiver.  The receiver lays
 * the chunks out expert by expert (expert-major, source rank inside), so that each
 * local expert's rows are contiguous for its GEMMs, and the combine sends each chunk
 * back to where it came from. */
#ifndef SEXTANT_MOE_PLAN_H
#define SEXTANT_MOE_PLAN_H

#include <stddef.h>

#define MOE_EP_MAX 8   /* ranks of the EP group, or of the expert TP group */
#define MOE_EXPERTS_MAX 64
#define MOE_TOPK_MAX 8
/* Switch Transformer's auxiliary load-balancing coefficient (Fedus et al. 2022, section 2.2) */
#define MOE_AUX_COEFF 0.01

/* ---- the float64 reference ---- */

/* idx[N k], gate[N k] from logits[N E]; -1 on bad sizes. */
int moe_ref_route(const double *logits, int N, int E, int k, int *idx, double *gate);

/* SEXTANT_MOE_ROUTE=random's choice (validator/moe.c): idx[N k], each token's k experts drawn uniformly without
 * replacement from [0, E), a function of (seed, N, E, k) alone, so that every rank and a recomputation draw the
 * same; each expert's rows are then Binomial(N, k/E).  -1 on bad sizes. */
int moe_random_route(unsigned long long seed, int N, int E, int k, int *idx);

/* The busiest EP rank's rows over the mean under SEXTANT_MOE_ROUTE=random, averaged over layers 0..layers-1 (seeds
 * 0..layers-1, as moe.c draws them): every EP rank draws a layer's route from the same seed, so each receives ep
 * times the rows its E/ep experts (in a row) hold in that one draw of N tokens.  Known before the run, as the
 * balanced route's even rows are: what `train` prices such a run's imbalance at.  1 with ep 1; -1 on bad sizes or
 * no memory. */
double moe_random_route_load(int layers, int N, int E, int k, int ep);

/* counts[E], pos[N k], row_slot[N k] from idx[N k]; -1 on an expert outside [0, E). */
int moe_ref_permute(const int *idx, int N, int k, int E, int *counts, int *pos, int *row_slot);

/* xs[r, :] = x[row_slot[r] / k, :] for the N k rows. */
void moe_ref_dispatch(const double *x, int N, int C, int k, const int *row_slot, double *xs);

/* out[n, :] = sum_j gate[n k + j] ys[pos[n k + j], :] (gate NULL: 1). */
void moe_ref_combine(const double *ys, int N, int C, int k, const int *pos, const double *gate, double *out);

/* The experts' gate-weighted SwiGLU on R rows of h[R, 2F] (gate half, then up half): out[r, f] =
 * w[r] silu(h[r, f]) h[r, F + f] (w NULL: 1).  Megatron-Core weighs each routed row by its gate here, in
 * the activation, rather than in the combine: the combine then keeps no copy of the experts' outputs. */
void moe_ref_swiglu(const double *h, const double *w, int R, int F, double *out);

/* Its backward: dh[R, 2F] from dout[R, F], and dw[r] = dout[r, :] . silu(h[r, :F]) h[r, F:]. */
void moe_ref_swiglu_backward(const double *dout, const double *h, const double *w, int R, int F, double *dh,
                             double *dw);

/* The router's backward: dlogits[N E] from the gates' gradient through the top-k
 * softmax, plus Switch's auxiliary loss  L_aux = aux_scale sum_e f_e sum_n p[n, e]
 * (p the softmax over all E logits, f_e = counts[e] / (N k) the share of slots routed
 * to e, held constant), whose gradient is aux_scale f_e through the full softmax.
 * aux_scale 0: no auxiliary loss. */
void moe_ref_router_backward(const double *logits, const int *idx, const double *gate, const double *dgate,
                             const int *counts, double aux_scale, int N, int E, int k, double *dlogits);

/* ---- the exchange plan ---- */

typedef struct {
    int ep, rank, E, local;               /* local = E / ep experts on each rank */
    int rows_in;                          /* rows this rank's experts receive */
    int expert_rows[MOE_EXPERTS_MAX];     /* [local] rows of each local expert */
    int expert_offset[MOE_EXPERTS_MAX];   /* [local] its first row in the expert-major buffer */
    /* chunk (p, e), index p local + e: */
    int send_rows[MOE_EP_MAX * MOE_EXPERTS_MAX];   /* this rank's rows for rank p's local expert e */
    int send_offset[MOE_EP_MAX * MOE_EXPERTS_MAX]; /* where they lie in this rank's expert-sorted buffer */
    int recv_rows[MOE_EP_MAX * MOE_EXPERTS_MAX];   /* rank p's rows for this rank's local expert e */
    int recv_offset[MOE_EP_MAX * MOE_EXPERTS_MAX]; /* where they land in the expert-major buffer */
    double imbalance;                     /* the busiest rank's rows over the mean (1 when none) */
} moe_exchange;

/* counts: ep rows of E, row p rank p's counts.  0, or -1 when ep or E is out of range or
 * ep does not divide E. */
int moe_exchange_plan(const int *counts, int ep, int E, int rank, moe_exchange *x);

/* The gather over an expert tensor-parallel group of tp ranks (Megatron's ETP = TP, EP 1): every rank
 * holds a 1/tp slice of every expert's FFN width and runs every expert on the rows of the whole group, so
 * each rank receives every rank's rows, laid out expert by expert (source rank inside), and sends all of its
 * own to every peer; the way back, each rank gets every peer's partial sums of its own rows and adds them.
 * In the plan's terms: local = E, chunk (p, e) is rank p's rows of expert e.  counts: tp rows of E.
 * 0, or -1 when tp or E is out of range. */
int moe_gather_plan(const int *counts, int tp, int E, int rank, moe_exchange *x);

/* ---- ZeRO's shards of the MoE layers' parameters ----
 *
 * moe.c keeps [every layer's router][every layer's experts].  With ZeRO (--zero 1 to 3 and a data-parallel group of
 * dp > 1 ranks) the routers are sharded over the data-parallel group and each layer's experts over the
 * expert-data-parallel group, the dp / ep ranks that hold the same experts (rank dp_rank / ep of it), as
 * Megatron-Core's distributed optimizer keeps the experts in a buffer of their own over that group:
 *   ZeRO-1: the fp32 master weights and Adam moments (the state);
 *   ZeRO-2: and the experts' gradients (reduce-scattered every micro-batch, validator/zero.c);
 *   ZeRO-3: and the experts' parameters (gathered layer by layer before each forward and backward, zero.c).
 * The routers stay at ZeRO-1 whatever the stage (whole 16-bit weights and gradients, E x C a layer: a few hundred
 * KiB, reduce-scattered and gathered once a step).  A sharded block is padded to a multiple of 8 x its group's ranks,
 * so that every slice is whole 16-byte packs; the padding is zero and stays zero (its gradient is zero). */
typedef struct {
    int stage;                    /* the ZeRO stage the MoE layers run: 0 when dp is 1 */
    int edp, edp_rank;            /* the expert-data-parallel group: dp / ep ranks, this rank's place */
    int router_sharded;           /* the routers' state over dp */
    int experts_sharded;          /* the experts' state over edp */
    int experts_zero;             /* the experts' gradients (and at ZeRO-3 parameters) through zero.c: stage >= 2, edp > 1 */
    size_t router_count;          /* every layer's routers, padded when sharded */
    size_t router_slice, router_at;   /* this rank's slice of them: elements, first element (all of them unsharded) */
    size_t expert_stride;         /* one layer's experts, padded when sharded */
    size_t expert_slice, expert_at;   /* this rank's slice of a layer's experts: elements, first element in the layer */
    size_t state_count;           /* fp32 master weights, and each Adam moment: router_slice + L expert_slice */
    size_t param_count;           /* 16-bit parameters: the routers, then every layer's experts (ZeRO-3: slices) */
    size_t grad_count;            /* 16-bit gradients: the routers, then every layer's experts (ZeRO-2/3: slices) */
} moe_shards;

/* L layers, router_layer and expert_layer elements a layer (one layer's router, its rank's experts), the layout's ZeRO
 * stage, the data-parallel group (dp ranks, this rank dp_rank) and ep.  0, or -1 when ep does not divide dp or a
 * figure is out of range. */
int moe_shard_plan(int L, size_t router_layer, size_t expert_layer, int stage, int dp, int dp_rank, int ep,
                   moe_shards *out);

/* This rank's part of a whole [routers][experts] array (router_count + L expert_stride elements): params 0, the
 * state's (the slices of what is sharded); params 1, the 16-bit parameters' (the routers whole, the experts' slices
 * at ZeRO-3).  out holds state_count or param_count elements. */
void moe_shard_take(const moe_shards *s, int L, const float *whole, float *out, int params);

#endif
