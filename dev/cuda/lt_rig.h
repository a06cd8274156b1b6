/* The cuBLASLt set-up the expert-GEMM experiments share (lt_issue_cost.cu, expert_rows.cu): the forward of one
 * expert as validator/moe.c issues it, C[m, n] = A^T[m, k] B[k, n], column-major, bf16 with fp32 sums, a 32 MiB
 * workspace, the layouts made once and reshaped for every call. */
#ifndef SEXTANT_DEV_LT_RIG_H
#define SEXTANT_DEV_LT_RIG_H

#include <cublasLt.h>
#include <cublas_v2.h>
#include <string.h>
#include "dev_util.h"

typedef struct {
    cublasLtHandle_t lt;
    cublasLtMatmulDesc_t desc;
    cublasLtMatmulPreference_t pref;
    cublasLtMatrixLayout_t a, b, c;
    void *ws;
    size_t ws_bytes;
} lt_rig;

static inline void lt_set_layout(cublasLtMatrixLayout_t l, int rows, int cols, int ld) {
    uint64_t r = rows, c = cols;
    int64_t d = ld;
    CB(cublasLtMatrixLayoutSetAttribute(l, CUBLASLT_MATRIX_LAYOUT_ROWS, &r, sizeof r));
    CB(cublasLtMatrixLayoutSetAttribute(l, CUBLASLT_MATRIX_LAYOUT_COLS, &c, sizeof c));
    CB(cublasLtMatrixLayoutSetAttribute(l, CUBLASLT_MATRIX_LAYOUT_LD, &d, sizeof d));
}

/* the three layouts shaped for C[m, n] = A^T[m, k] B[k, n] */
static inline void lt_rig_shape(lt_rig *g, int m, int n, int k) {
    lt_set_layout(g->a, k, m, k);
    lt_set_layout(g->b, k, n, k);
    lt_set_layout(g->c, m, n, m);
}

/* on handle lt (the caller's, kept), shaped for m x n x k */
static inline void lt_rig_open(lt_rig *g, cublasLtHandle_t lt, int m, int n, int k) {
    memset(g, 0, sizeof *g);
    g->lt = lt;
    CB(cublasLtMatmulDescCreate(&g->desc, CUBLAS_COMPUTE_32F, CUDA_R_32F));
    cublasOperation_t ta = CUBLAS_OP_T, tb = CUBLAS_OP_N;
    CB(cublasLtMatmulDescSetAttribute(g->desc, CUBLASLT_MATMUL_DESC_TRANSA, &ta, sizeof ta));
    CB(cublasLtMatmulDescSetAttribute(g->desc, CUBLASLT_MATMUL_DESC_TRANSB, &tb, sizeof tb));
    g->ws_bytes = 32u << 20;
    g->ws = dmalloc(g->ws_bytes);
    CB(cublasLtMatmulPreferenceCreate(&g->pref));
    CB(cublasLtMatmulPreferenceSetAttribute(g->pref, CUBLASLT_MATMUL_PREF_MAX_WORKSPACE_BYTES, &g->ws_bytes,
                                           sizeof g->ws_bytes));
    CB(cublasLtMatrixLayoutCreate(&g->a, CUDA_R_16BF, k, m, k));
    CB(cublasLtMatrixLayoutCreate(&g->b, CUDA_R_16BF, k, n, k));
    CB(cublasLtMatrixLayoutCreate(&g->c, CUDA_R_16BF, m, n, m));
}

static inline void lt_rig_close(lt_rig *g) {
    CK(cudaFree(g->ws));
    CB(cublasLtMatmulPreferenceDestroy(g->pref));
    CB(cublasLtMatrixLayoutDestroy(g->a));
    CB(cublasLtMatrixLayoutDestroy(g->b));
    CB(cublasLtMatrixLayoutDestroy(g->c));
    CB(cublasLtMatmulDescDestroy(g->desc));
}

/* The two handles a GEMM experiment times through: cuBLASLt's, and cuBLAS's with its own 32 MiB workspace, as the
 * training step sets its handle up (CUBLAS_WORKSPACE_BYTES). */
typedef struct {
    cublasLtHandle_t lt;
    cublasHandle_t blas;
    void *blas_ws;
} dev_blas;

static inline void dev_blas_open(dev_blas *b) {
    CB(cublasLtCreate(&b->lt));
    CB(cublasCreate(&b->blas));
    b->blas_ws = dmalloc(32u << 20);
    CB(cublasSetWorkspace(b->blas, b->blas_ws, 32u << 20));
}

static inline void dev_blas_close(dev_blas *b) {
    CB(cublasDestroy(b->blas));
    CK(cudaFree(b->blas_ws));
    CB(cublasLtDestroy(b->lt));
}

/* The main of an experiment over GEMM shapes: argv[1] names one (dev_shape_arg), else every one; the CSV header,
 * then one_shape on each through one pair of handles.  The exit status: 2 for an unknown name, 1 after a failed
 * check, else 0. */
static inline int dev_shapes_main(int argc, char **argv, const char *program, const char *header,
                                  const dev_gemm_shape *shapes, int n,
                                  void (*one_shape)(const dev_gemm_shape *, cublasLtHandle_t, cublasHandle_t)) {
    const int only = dev_shape_arg(argc, argv, program, shapes, n);
    if (only == -2) return 2;
    dev_blas h;
    dev_blas_open(&h);
    printf("%s\n", header);
    for (int i = 0; i < n; i++)
        if (only < 0 || only == i) one_shape(&shapes[i], h.lt, h.blas);
    dev_blas_close(&h);
    return g_dev_failed ? 1 : 0;
}

#endif
