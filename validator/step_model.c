/* The training step (validator/train.c, step.h): the model on this rank: where each parameter lies,
 * its initial value (a function of its place in the whole model, so every layout starts from the same
 * weights), the synthetic batches. */
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <pthread.h>
#include <stdatomic.h>
#include <time.h>
#include <unistd.h>

#include "step.h"

/* A tensor of one layer (or the whole tensor), NULL when this rank lacks it. */
size_t param_offset(const gpt *g, int which, int layer)
{
    if (is_layer_param(which)) return g->pl.layer_base + (size_t)layer * g->pl.layer_stride + g->pl.offset[which];
    return g->pl.offset[which];
}

/* ZeRO-2/3: a gradient lives in the buffer of the bucket the backward writes now, and with
 * ZeRO-3 a parameter in the gathered buffer of the bucket held now; anything else is a bug. */
static bf16 *zero_tensor(const gpt *g, int grads, int which, int layer)
{
    size_t at = param_offset(g, which, layer);
    bf16 *p = grads ? zero_grad_at(&g->zs, at) : zero_param_at(&g->zs, at);
    if (!p) {
        fprintf(stderr, "sextant-gpu train: rank %d: internal: ZeRO-%d: the %s of tensor %d, layer %d, outside the bucket "
                "held\n", my_rank, g->zero, grads ? "gradient" : "parameter", which, layer);
        exit(1);
    }
    return p;
}

bf16 *param(const gpt *g, bf16 *base, int which, int layer)
{
    if (g->pl.size[which] == 0) return NULL;
    if (g->zero && base == g->grads) return zero_tensor(g, 1, which, layer);
    if (g->zero == 3 && base == g->params) return zero_tensor(g, 0, which, layer);
    return base + param_offset(g, which, layer);
}

int bucket_index(const gpt *g, int kind)
{
    for (int i = 0; i < g->pl.nbuckets; i++)
        if (g->pl.buckets[i].kind == kind) return i;
    return -1;
}

void *device_alloc(gpt *g, size_t bytes)
{
    void *p;
    cudaError_t err = cudaMalloc(&p, bytes ? bytes : 256);
    if (err == cudaErrorMemoryAllocation) {
        size_t free_bytes, total;
        cudaGetLastError();
        CK(cudaMemGetInfo(&free_bytes, &total));
        fprintf(stderr, "sextant-gpu train: rank %d: out of memory allocating %.3f GiB after %.3f GiB: predicted peak %.3f GiB, "
                "device %.3f GiB free of %.3f GiB\n", my_rank, bytes / 1073741824.0, g->accounted_bytes / 1073741824.0,
                g->predicted_bytes / 1073741824.0, free_bytes / 1073741824.0, total / 1073741824.0);
        exit(3);
    }
    CK(err);
    g->accounted_bytes += bytes;
    return p;
}

static uint64_t splitmix64(uint64_t x)
{
    x += 0x9e3779b97f4a7c15ULL;
    x = (x ^ (x >> 30)) * 0xbf58476d1ce4e5b9ULL;
    x = (x ^ (x >> 27)) * 0x94d049bb133111ebULL;
    return x ^ (x >> 31);
}

/* The initial value of element `index` of tensor `which` in layer `layer` of
 * the whole model: a function of where it sits in the unsplit model only, so
 * every layout starts from the same weights as one GPU does.  Uniform with
 * GPT-2's standard deviation (0.02, residual projections 0.02 / sqrt(2L)). */
float initial_value(int which, int layer, uint64_t index, float stddev)
{
    uint64_t h = splitmix64(((uint64_t)which << 56) ^ ((uint64_t)layer << 44) ^ index ^ 0x5eed5eedULL);
    double u = (double)(h >> 11) * (1.0 / 9007199254740992.0);
    return (float)(stddev * 1.7320508075688772 * (2.0 * u - 1.0));
}

/* step.h */
int model_layer_of(const shapes *s, int l)
{
    if (s->vpp == 1) return s->layer0 + l;
    return (l / s->Lc * s->pp + s->pp_rank) * s->Lc + l % s->Lc;
}

/* Fills this rank's part of one tensor: the tensor-parallel split maps its
 * rows (QKV, MLP up, the tables) or columns (attention out, MLP down) back to
 * the whole model's. */
static int is_norm_weight(int which) { return which == P_LN1W || which == P_LN2W || which == P_LNFW; }
static int is_bias(int which)
{
    return which == P_LN1B || which == P_LN2B || which == P_LNFB || which == P_QKVB || which == P_ATTB ||
           which == P_FCB || which == P_PROJB;
}

/* The rows of one tensor as fill_tensor counts them (norm weights and biases, constants: one row). */
static size_t tensor_rows(const gpt *g, int which)
{
    size_t n = g->pl.size[which];
    if (n == 0) return 0;
    if (is_norm_weight(which) || is_bias(which)) return 1;
    return which == P_ATTW || which == P_PROJW ? (size_t)g->s.C : n / (size_t)g->s.C;
}

static void fill_tensor(const gpt *g, int which, int layer, float *dst, size_t row_lo, size_t row_hi)
{
    const shapes *s = &g->s;
    size_t n = g->pl.size[which];
    if (n == 0) return;
    int glayer = is_layer_param(which) ? model_layer_of(s, layer) : 0;
    if (is_norm_weight(which) || is_bias(which)) {
        for (size_t i = 0; i < n; i++) dst[i] = is_norm_weight(which) ? 1.0f : 0.0f;
        return;
    }
    float stddev = (which == P_ATTW || which == P_PROJW) ? 0.02f / sqrtf(2.0f * (float)s->Lmodel) : 0.02f;
    size_t C = (size_t)s->C, D = (size_t)s->D, r = (size_t)s->tp_rank;
    size_t cols = C, gcols = C;
    if (which == P_ATTW) { cols = (size_t)s->H * D; gcols = (size_t)s->Hm * D; }
    if (which == P_PROJW) { cols = (size_t)s->F; gcols = (size_t)s->Fm; }
    int hashed = which == P_HEAD && s->tied ? P_WTE : which;   /* a tied head's copy equals the table */
    for (size_t i = row_lo; i < row_hi; i++) {
        size_t grow = i, gcol0 = 0;
        if (which == P_QKVW) {
            size_t q = (size_t)s->H * D, k = (size_t)s->KV * D;
            if (i < q) grow = r * q + i;
            else if (i < q + k) grow = (size_t)s->Hm * D + r * k + (i - q);
            else grow = (size_t)(s->Hm + s->KVm) * D + r * k + (i - q - k);
        } else if (which == P_FCW) {
            size_t f = (size_t)s->F;
            grow = s->swiglu && i >= f ? (size_t)s->Fm + r * f + (i - f) : r * f + i;
        } else if (which == P_WTE || which == P_HEAD) {
            grow = (size_t)s->vocab0 + i;
        } else if (which == P_ATTW || which == P_PROJW) {
            gcol0 = r * cols;
        }
        int padded_row = (which == P_WTE || which == P_HEAD) && grow >= (size_t)s->V;
        for (size_t j = 0; j < cols; j++)
            dst[i * cols + j] = padded_row ? 0.0f : initial_value(hashed, glayer, grow * gcols + gcol0 + j, stddev);
    }
}

/* gpt_init's host work, split over threads: every (tensor, layer) in pieces of rows, each
 * piece filled in fp32 and rounded to bf16 by the thread that took it.  The values are a
 * function of their place in the model only, so the threads change nothing but the time
 * (a single thread took about 10 s for the LLaMA-style 1.24B on a lent H100 host). */
typedef struct { int which, layer; size_t row_lo, row_hi; } init_piece;
typedef struct {
    const gpt *g;
    float *host;
    uint16_t *half;
    const init_piece *pieces;
    int npieces;
    atomic_int next;
} init_work;

static void *init_worker(void *arg)
{
    init_work *w = arg;
    for (int k; (k = atomic_fetch_add(&w->next, 1)) < w->npieces;) {
        const init_piece *p = &w->pieces[k];
        const size_t off = param_offset(w->g, p->which, p->layer);
        const size_t cols = w->g->pl.size[p->which] / tensor_rows(w->g, p->which); /* pieces have rows */
        fill_tensor(w->g, p->which, p->layer, w->host + off, p->row_lo, p->row_hi);
        size_t lo = off + p->row_lo * cols, hi = off + p->row_hi * cols;
        for (size_t i = lo; i < hi; i++) w->half[i] = sx_ref_f2bf(w->host[i]);
    }
    return NULL;
}

void gpt_init(gpt *g)
{
    const param_layout *pl = &g->pl;
    struct timespec t0, t1;
    clock_gettime(CLOCK_MONOTONIC, &t0);
    /* zeroed for the padding between tensors; calloc's pages are zeroed as the threads first touch them */
    float *host = calloc(pl->count ? pl->count : 1, sizeof *host);
    uint16_t *half = calloc(pl->count ? pl->count : 1, sizeof *half);
    if (!host || !half) {
        fprintf(stderr, "sextant-gpu train: rank %d: out of host memory (%zu initial weights)\n", my_rank, pl->count);
        exit(1);
    }
    enum { PIECE_ELEMENTS = 1 << 22 };
    int npieces = 0, cap = 64;
    init_piece *pieces = host_alloc((size_t)cap * sizeof *pieces);
    for (int w = 0; w < P_COUNT; w++) {
        int layers = is_layer_param(w) ? g->s.L : 1;
        size_t rows = tensor_rows(g, w);
        if (rows == 0) continue;
        size_t cols = pl->size[w] / rows, step = cols >= PIECE_ELEMENTS ? 1 : PIECE_ELEMENTS / cols;
        for (int l = 0; l < layers; l++)
            for (size_t r0 = 0; r0 < rows; r0 += step) {
                if (npieces == cap) {
                    cap *= 2;
                    init_piece *grown = realloc(pieces, (size_t)cap * sizeof *pieces);
                    if (!grown) { fprintf(stderr, "sextant-gpu train: rank %d: out of host memory\n", my_rank); exit(1); }
                    pieces = grown;
                }
                pieces[npieces++] = (init_piece){w, l, r0, r0 + step < rows ? r0 + step : rows};
            }
    }
    long cpus = sysconf(_SC_NPROCESSORS_ONLN);
    int nthreads = cpus < 1 ? 1 : cpus > 32 ? 32 : (int)cpus;
    init_work work = {.g = g, .host = host, .half = half, .pieces = pieces, .npieces = npieces};
    atomic_init(&work.next, 0);
    pthread_t tid[32];
    int started = 0;
    for (int t = 1; t < nthreads; t++) /* this thread is the first worker */
        if (pthread_create(&tid[started], NULL, init_worker, &work) == 0) started++;
    init_worker(&work);
    for (int t = 0; t < started; t++) pthread_join(tid[t], NULL);
    free(pieces);
    clock_gettime(CLOCK_MONOTONIC, &t1);
    if (my_rank == 0)
        printf("# initial weights: %zu values on the host in %.2f s (%d threads)\n", pl->count,
               (double)(t1.tv_sec - t0.tv_sec) + 1e-9 * (double)(t1.tv_nsec - t0.tv_nsec), started + 1);
    if (g->zero == 3) {
        /* ZeRO-3: this rank's slice of every bucket, the same values one GPU holds whole */
        for (int b = 0; b < pl->nbuckets; b++) {
            const zero_bucket *k = &g->zb[b];
            CK(cudaMemcpy(g->params + k->shard_offset, half + zero_slice_at(k, g->s.dp, g->s.dp_rank),
                          zero_slice_elems(k, g->s.dp) * sizeof(bf16), cudaMemcpyHostToDevice));
        }
    } else {
        CK(cudaMemcpy(g->params, half, pl->count * sizeof(bf16), cudaMemcpyHostToDevice));
    }
    if (g->s.dp > 1 && g->master != NULL && pl->shard_count != pl->count) {
        /* ZeRO-1: this rank's slice of every bucket */
        for (int b = 0; b < pl->nbuckets; b++) {
            const bucket *k = &pl->buckets[b];
            size_t slice = k->size / (size_t)g->s.dp;
            CK(cudaMemcpy(g->master + k->shard_offset, host + k->offset + (size_t)g->s.dp_rank * slice, slice * sizeof(float),
                          cudaMemcpyHostToDevice));
        }
    } else {
        CK(cudaMemcpy(g->master, host, pl->count * sizeof(float), cudaMemcpyHostToDevice));
    }
    size_t state = g->s.dp > 1 && pl->shard_count != pl->count ? pl->shard_count : pl->count;
    CK(cudaMemset(g->m, 0, state * sizeof(float)));
    CK(cudaMemset(g->v, 0, state * sizeof(float)));
    CK(cudaMemset(g->grads, 0, (g->zero ? pl->shard_count : pl->count) * sizeof(bf16)));
    free(half);
    free(host);
}

/* Synthetic tokens: each next token is (7 t + 3) mod 4096, except one in ten
 * drawn at random, so a model that learns the rule reaches a loss well under
 * ln(V) but never zero.  One stream per step for the whole global batch, so
 * every layout sees the same data. */
void make_batch(int32_t *inputs, int32_t *targets, size_t n, int V, unsigned long long *state)
{
    int tok = 0;
    for (size_t i = 0; i <= n; i++) {
        *state = *state * 6364136223846793005ULL + 1442695040888963407ULL;
        int next = ((*state >> 33) % 10 == 0) ? (int)((*state >> 20) % (unsigned long long)V) : (7 * tok + 3) % 4096;
        if (i < n) inputs[i] = tok;
        if (i > 0) targets[i - 1] = tok;
        tok = next % V;
    }
}
