/* Every formula against docs/SPEC.md's worked examples and the papers' own
 * equations.  Tolerances: 1e-12 where both sides are the same arithmetic,
 * otherwise the rounding the worked example itself prints. */
#include "test_util.h"

#include "planner.h"

/* A textbook GPT: f = 4h, a d = h, tied embeddings, learned positions,
 * dropout, so the op list must reproduce the papers' closed forms exactly. */
static model_t textbook_gpt(int64_t layers, int64_t hidden, int64_t heads, int64_t vocab, int64_t seq)
{
    model_t m;
    memset(&m, 0, sizeof m);
    snprintf(m.name, sizeof m.name, "textbook");
    snprintf(m.family, sizeof m.family, "gpt");
    m.layers = layers;
    m.hidden = hidden;
    m.heads = m.kv_heads = heads;
    m.head_dim = hidden / heads;
    m.ffn = 4 * hidden;
    m.ffn_kind = FFN_GELU;
    m.vocab = vocab;
    m.seq = seq;
    m.max_positions = seq;
    m.position = POS_LEARNED;
    m.tied_embeddings = 1;
    m.norm = NORM_LAYERNORM;
    m.bias = 1;
    m.dropout = 1;
    m.experts = m.top_k = 1;
    return m;
}

static layout_t one_gpu(int64_t mbs, int64_t seq)
{
    layout_t l;
    memset(&l, 0, sizeof l);
    l.gpus = l.tp = l.pp = l.dp = l.vpp = 1;
    l.mbs = mbs;
    l.gbs = mbs;
    l.seq = seq;
    l.gpus_per_node = 8;
    l.precision = PREC_BF16;
    l.attention = ATTENTION_UNFUSED;
    l.recompute = RECOMPUTE_NONE;
    return l;
}

static void spec_gpt3_six_nd(void **state)
{
    (void)state;
    /* docs/SPEC.md section 1: 6 x 175e9 x 300e9 = 3.15e23 */
    assert_close(six_n_d_flops(175e9, 300e9), 3.15e23, 1e-12);
}

static void spec_pipeline_group_compute(void **state)
{
    (void)state;
    /* docs/SPEC.md section 1: 8 x 4096 x 6 x 1e9 = 1.97e14 FLOP, 0.60 s at 330 TFLOP/s */
    double flops = six_n_d_flops(1e9, 8.0 * 4096.0);
    assert_close(flops, 1.97e14, 0.005);
    assert_close(roofline_s(flops, 330e12, 0, 0), 0.60, 0.01);
}

static void spec_llama2_70b_textbook_memory(void **state)
{
    (void)state;
    /* docs/SPEC.md section 2: 140 + 140 + 840 + 730 = 1850 GB: 24 GPUs of 80 GB, 78 of 24 GB */
    double act = korthikanti_activation_bytes_per_layer(4096, 8, 8192, 64, 1, 0, RECOMPUTE_SELECTIVE) * 80;
    assert_close(act, 4096.0 * 8 * 8192 * 80 * 34, 1e-12);
    assert_close(act, 730e9, 0.001);
    double total = 70e9 * adam_bytes_per_param(2.0) + act;
    assert_close(total, 1850e9, 0.001);
    assert_int_equal((int)ceil(total / 80e9), 24);
    assert_int_equal((int)ceil(total / 24e9), 78);
}

static void spec_adam_bytes(void **state)
{
    (void)state;
    assert_close(adam_bytes_per_param(2.0), 16.0, 0);
    assert_close(adam_bytes_per_param(4.0), 18.0, 0);
    assert_close(adam_bytes_per_param(6.0), 20.0, 0);
    assert_close(fp32_copy_accumulate_bytes_per_param(2.0), 18.0, 0);
}

static void spec_pcie_gradient_pass(void **state)
{
    (void)state;
    /* docs/SPEC.md section 3: 4 GB over 32 GB/s is 0.125 s per pass; all-reduce needs two */
    assert_close(sendrecv_s(4e9, 32e9, 0), 0.125, 1e-12);
    assert_close(ring_allreduce_s(1e6, 4e9, 32e9, 0), 0.25, 1e-5);
    assert_close(ring_allreduce_s(8, 4e9, 32e9, 0), 2.0 * 7 / 8 * 0.125, 1e-12);
}

/* flash attention's efficiency over the sequence (docs/model.md, "Attention kernel generations"): 1 at the
 * priors' 2048 tokens, the benchmark's ratios to its 16k rate (0.69 at 512 tokens, 0.91 at 2k), rising and
 * saturating */
static void flash_efficiency_rises_with_the_sequence(void **state)
{
    (void)state;
    assert_close(flash_sequence_factor(2048.0), 1.0, 1e-12);
    assert_close(flash_sequence_factor(512.0) / flash_sequence_factor(16384.0), 0.69, 0.02);
    assert_close(flash_sequence_factor(2048.0) / flash_sequence_factor(16384.0), 0.91, 0.02);
    for (double s = 256.0; s < 1e6; s *= 2.0) assert_true(flash_sequence_factor(2.0 * s) > flash_sequence_factor(s));
    assert_true(flash_sequence_factor(1e9) < 1.12);
    assert_close(flash_sequence_factor(0.0), 1.0, 0);
}

static void ring_collectives_and_bus_bandwidth(void **state)
{
    (void)state;
    double n = 8, S = 1e9, bw = 100e9, alpha = 5e-6;
    assert_close(ring_allreduce_s(n, S, bw, alpha), 2 * 7.0 / 8 * S / bw + 14 * alpha, 1e-12);
    assert_close(ring_reduce_scatter_s(n, S, bw, alpha), 7.0 / 8 * S / bw + 7 * alpha, 1e-12);
    assert_close(ring_allgather_s(n, S, bw, alpha), 7.0 / 8 * S / bw + 7 * alpha, 1e-12);
    assert_close(ring_allreduce_s(1, S, bw, alpha), 0.0, 0);
    /* with no latency the bus bandwidth of a ring is the link's bandwidth */
    assert_close(bus_bandwidth(COLL_ALLREDUCE, n, S, ring_allreduce_s(n, S, bw, 0)), bw, 1e-12);
    assert_close(bus_bandwidth(COLL_ALLGATHER, n, S, ring_allgather_s(n, S, bw, 0)), bw, 1e-12);
}

/* NCCL's ring latency: inside a node every step is the node's; across k nodes k - 1 of the n - 1 steps are the
 * network's; one rank a node, all of them. */
static void ring_latency_crosses_the_network_between_nodes(void **state)
{
    (void)state;
    assert_close(ring_step_latency_s(8, 1, 3.4e-6, 7e-6), 3.4e-6, 1e-12);
    assert_close(ring_step_latency_s(64, 64, 3.4e-6, 7e-6), 7e-6, 1e-12);
    /* 512 ranks, 2 a node: 255 of the 511 steps cross */
    assert_close(ring_step_latency_s(512, 256, 3.4e-6, 7e-6), (256 * 3.4e-6 + 255 * 7e-6) / 511, 1e-12);
    assert_close(ring_step_latency_s(1, 4, 3.4e-6, 7e-6), 3.4e-6, 1e-12);
}

/* A source that counts every query head's K and V (no grouped-query attention) adds 12 T L h d (a - g) FLOPs a
 * step; a model without GQA adds nothing. */
static void kv_counted_per_head(void **state)
{
    (void)state;
    assert_close(kv_per_head_extra_flops(1e6, 32, 6144, 128, 48, 8), 12.0 * 1e6 * 32 * 6144 * 128 * 40, 1e-12);
    assert_true(kv_per_head_extra_flops(1e6, 32, 6144, 128, 48, 48) == 0.0);
}

static void spec_tp_ratio_limits(void **state)
{
    (void)state;
    /* docs/SPEC.md section 4: RTX 4090 t_max ~ 2.4, H100 ~ 11, one head per GPU 384 FLOP/byte and 859 GB/s */
    assert_close(330e12 / 32e9, 10312.5, 1e-12);
    assert_close(tp_ratio_limit(8192, 2, 330e12, 32e9), 2.4, 0.01);
    assert_close(tp_ratio_limit(8192, 2, 989e12, 450e9), 11.18, 0.001);
    assert_close(tp_compute_comm_ratio(8192, 64, 2), 384, 1e-12);
    assert_close(330e12 / tp_compute_comm_ratio(8192, 64, 2), 859e9, 0.001);
    /* at the limit the ratio equals FLOPS/BW */
    double t = tp_ratio_limit(8192, 2, 989e12, 450e9);
    assert_close(tp_compute_comm_ratio(8192, t, 2), 989e12 / 450e9, 1e-12);
}

static void pipeline_bubble_and_inflight(void **state)
{
    (void)state;
    assert_close(pipeline_bubble_fraction(4, 32, 1), 3.0 / 35.0, 1e-12);
    /* interleaved: (p-1)/(v m) relative to the ideal */
    double f = pipeline_bubble_fraction(4, 32, 2);
    assert_close(f / (1 - f), 3.0 / (2 * 32), 1e-12);
    assert_close(pipeline_inflight_microbatches(4, 32, 1, 0), 4, 0);
    assert_close(pipeline_inflight_microbatches(4, 32, 1, 3), 1, 0);
    assert_close(pipeline_inflight_microbatches(4, 2, 1, 0), 2, 0);
    assert_close(pipeline_inflight_microbatches(4, 32, 2, 0), 4 * (1 + 3.0 / 8), 1e-12);   /* Megatron: p + (p-1)/v */
    assert_close(pipeline_inflight_microbatches(4, 32, 2, 3), (4 + 1) / 2.0, 1e-12);       /* last: (v-1) p + 1 chunks */
    assert_close(pipeline_inflight_microbatches(2, 2, 2, 1), 2, 0);                        /* m = p: all forwards first */
    assert_close(pipeline_inflight_heads(2, 2, 2), 2, 0);
    assert_close(pipeline_inflight_heads(2, 4, 2), 1, 0);
    assert_close(pipeline_inflight_heads(2, 2, 1), 1, 0);
}

static void chinchilla(void **state)
{
    (void)state;
    assert_close(chinchilla_tokens(70e9), 1.4e12, 1e-12);
}

/* Sum over the per-layer forward ops of the saved bytes. */
static double op_list_layer_saved(const model_t *m, const layout_t *l)
{
    stage_ops s;
    assert_int_equal(build_stage_ops(m, l, 0, &s), 0);
    double sum = 0;
    for (int i = 0; i < s.nops; i++)
        if (s.ops[i].pass == PASS_FWD && s.ops[i].count == m->layers) sum += s.ops[i].saved_bytes;
    return sum;
}

static void op_list_reproduces_korthikanti(void **state)
{
    (void)state;
    model_t m = textbook_gpt(4, 4096, 32, 50304, 2048);
    double s = 2048, b = 2, h = 4096, a = 32;
    layout_t l = one_gpu(2, 2048);
    assert_close(op_list_layer_saved(&m, &l), korthikanti_activation_bytes_per_layer(s, b, h, a, 1, 0, RECOMPUTE_NONE), 1e-12);
    assert_close(korthikanti_activation_bytes_per_layer(s, b, h, a, 1, 0, RECOMPUTE_NONE), s * b * h * (34 + 5 * a * s / h), 1e-12);
    l.tp = 8;
    l.gpus = 8;
    assert_close(op_list_layer_saved(&m, &l), korthikanti_activation_bytes_per_layer(s, b, h, a, 8, 0, RECOMPUTE_NONE), 1e-12);
    assert_close(korthikanti_activation_bytes_per_layer(s, b, h, a, 8, 0, RECOMPUTE_NONE),
                 s * b * h * (10 + 24.0 / 8 + 5 * a * s / (h * 8)), 1e-12);
    l.sp = 1;
    assert_close(op_list_layer_saved(&m, &l), korthikanti_activation_bytes_per_layer(s, b, h, a, 8, 1, RECOMPUTE_NONE), 1e-12);
    l.recompute = RECOMPUTE_SELECTIVE;
    assert_close(op_list_layer_saved(&m, &l), korthikanti_activation_bytes_per_layer(s, b, h, a, 8, 1, RECOMPUTE_SELECTIVE), 1e-12);
    assert_close(korthikanti_activation_bytes_per_layer(s, b, h, a, 8, 1, RECOMPUTE_SELECTIVE), s * b * h / 8 * 34, 1e-12);
    l.recompute = RECOMPUTE_FULL;
    assert_close(op_list_layer_saved(&m, &l), 2 * s * b * h / 8, 1e-12);
    assert_close(korthikanti_activation_bytes_per_layer(s, b, h, a, 8, 1, RECOMPUTE_FULL), 2 * s * b * h / 8, 1e-12);
    /* flash attention keeps no s x s term, only a 4-byte log-sum-exp per row and head */
    l.recompute = RECOMPUTE_NONE;
    l.attention = ATTENTION_FLASH;
    l.sp = 0;
    assert_close(op_list_layer_saved(&m, &l),
                 korthikanti_activation_bytes_per_layer(s, b, h, a, 8, 0, RECOMPUTE_SELECTIVE) + 4 * b * (a / 8) * s, 1e-12);
}

static void whole_model_flops(const model_t *m, layout_t l, double *model, double *hardware)
{
    stage_ops s;
    assert_int_equal(build_stage_ops(m, &l, 0, &s), 0);
    *model = *hardware = 0;
    for (int i = 0; i < s.nops; i++) {
        if (s.ops[i].pass == PASS_STEP) continue;
        *model += s.ops[i].model_flops * (double)s.ops[i].count;
        *hardware += s.ops[i].hardware_flops * (double)s.ops[i].count;
    }
}

static void op_list_reproduces_narayanan(void **state)
{
    (void)state;
    /* GPT-3 175B's shape, attention over the full s x s (a bidirectional model, or Megatron's count
     * of a causal one): the exact op count equals eq. (3) of Narayanan et al. */
    model_t m = textbook_gpt(96, 12288, 96, 51200, 2048);
    snprintf(m.family, sizeof m.family, "bert");
    double model, hardware;
    whole_model_flops(&m, one_gpu(1, 2048), &model, &hardware);
    assert_close(model, narayanan_model_flops(1, 2048, 96, 12288, 51200), 1e-12);
    assert_close(hardware, model, 1e-12);
    layout_t full = one_gpu(1, 2048);
    full.recompute = RECOMPUTE_FULL;
    whole_model_flops(&m, full, &model, &hardware);
    assert_close(model, narayanan_model_flops(1, 2048, 96, 12288, 51200), 1e-12);
    assert_close(hardware, narayanan_full_recompute_flops(1, 2048, 96, 12288, 51200), 1e-12);
    /* causal, the count is the half below the diagonal: the attention terms 12 B s^2 L h (forward
     * and backward) and 16 B s^2 L h (with the recomputed forward) halve */
    snprintf(m.family, sizeof m.family, "gpt");
    double s = 2048, h = 12288, L = 96;
    whole_model_flops(&m, one_gpu(1, 2048), &model, &hardware);
    assert_close(model, narayanan_model_flops(1, s, L, h, 51200) - 6 * s * s * L * h, 1e-12);
    whole_model_flops(&m, full, &model, &hardware);
    assert_close(hardware, narayanan_full_recompute_flops(1, s, L, h, 51200) - 8 * s * s * L * h, 1e-12);
    /* 72 B s L h^2 (...) is within 2% of 6ND once the attention term is counted */
    double n = model_params_total(&m);
    assert_close(narayanan_model_flops(1, 2048, 96, 12288, 51200) / six_n_d_flops(n, 2048),
                 1 + 2048.0 / (6 * 12288), 0.02);
}

static void gemm_ops_are_consistent(void **state)
{
    (void)state;
    model_t m = textbook_gpt(2, 1024, 16, 32000, 1024);
    layout_t l = one_gpu(4, 1024);
    stage_ops s;
    assert_int_equal(build_stage_ops(&m, &l, 0, &s), 0);
    int gemms = 0;
    for (int i = 0; i < s.nops; i++) {
        const op_t *op = &s.ops[i];
        if (op->kind != OP_GEMM) continue;
        gemms++;
        assert_close(op->flops, 2.0 * (double)op->m * (double)op->n * (double)op->k, 1e-12);
    }
    /* qkv, attn_out, mlp_up, mlp_down and the LM head, each with dgrad and wgrad */
    assert_int_equal(gemms, 15);
}

/* "Clock under the power cap", the slowest GPU: Blom's expected maximum of n standard normals (0.589, 1.049 and
 * 3.234 for 2, 4 and 1024; exact 0.564, 1.029, 3.25), 0 for one, growing with n. */
static void expected_maximum_of_n_draws(void **state)
{
    (void)state;
    assert_close(expected_max_sigmas(1.0), 0.0, 0);
    assert_close(expected_max_sigmas(2.0), 0.589, 2e-3);
    assert_close(expected_max_sigmas(4.0), 1.049, 2e-3);
    assert_close(expected_max_sigmas(1024.0), 3.234, 2e-3);
    double prev = 0.0;
    for (double n = 2.0; n <= 65536.0; n *= 2.0) {
        double e = expected_max_sigmas(n);
        assert_true(e > prev && e < 4.5);
        prev = e;
    }
}

/* other_memory_allowance with the totals per communicator of overlays before 2026-11-26 */
static double allowance(const layout_t *l, double context, double comm, double first, double p2p, int tied, int moe,
                        double workspace)
{
    nccl_memory_figures f = {.comm = comm, .first = first, .p2p = p2p};
    return other_memory_allowance(l, context, &f, tied, moe, workspace);
}

static void other_memory_allowance_counts_communicators(void **state)
{
    (void)state;
    layout_t l = one_gpu(1, 1024);
    const double gib = 1073741824.0;
    assert_close(allowance(&l, 0, 0, 0, 0, 0, 0, 0), gib, 1e-12);
    assert_close(allowance(&l, 0.6 * gib, 0, 0, 0, 0, 0, 0), 0.6 * gib, 1e-12);
    assert_close(allowance(&l, 0.6 * gib, 0, 0, 0, 0, 0, 1e9), 0.6 * gib + 1e9, 1e-12);
    l.tp = 8;
    l.dp = 4;
    l.gpus = 32;
    /* the world's communicator, TP's and DP's at the default 0.25 GiB each */
    assert_close(allowance(&l, 0, 0, 0, 0, 0, 0, 0), 1.75 * gib, 1e-12);
    /* a measured 0.9 GiB per communicator, and the tied embedding's group */
    l.pp = 2;
    l.gpus = 64;
    assert_close(allowance(&l, 0.6 * gib, 0.9 * gib, 0, 0, 1, 0, 0), 0.6 * gib + 5 * 0.9 * gib, 1e-12);
    /* the first communicator measured apart (NCCL's per-process state with it) */
    assert_close(allowance(&l, 0.6 * gib, 0.9 * gib, 1.3 * gib, 0, 1, 0, 0), 0.6 * gib + 1.3 * gib + 4 * 0.9 * gib,
                 1e-12);
    /* the pipeline's communicator at its own, send/recv-only, measure */
    assert_close(allowance(&l, 0.6 * gib, 0.9 * gib, 1.3 * gib, 0.5 * gib, 1, 0, 0),
                 0.6 * gib + 1.3 * gib + 3 * 0.9 * gib + 0.5 * gib, 1e-12);
    /* a mixture of experts on DP 2 x EP 2 (the validator's EP run): the world, DP's and EP's; the
     * experts' gradient group, DP / EP = 1 GPU, opens nothing */
    l.tp = l.pp = 1;
    l.dp = 2;
    l.ep = 2;
    l.gpus = 2;
    const double ws = moe_gemm_workspace_bytes();   /* the experts' four GEMM streams' workspaces */
    assert_close(ws, 128.0 * 1048576.0, 0);
    assert_close(allowance(&l, 0.6 * gib, 0.9 * gib, 1.3 * gib, 0, 0, 1, 0),
                 0.6 * gib + 1.3 * gib + 2 * 0.9 * gib + ws, 1e-12);
    /* the same layout for a dense model has no EP group */
    assert_close(allowance(&l, 0.6 * gib, 0.9 * gib, 1.3 * gib, 0, 0, 0, 0), 0.6 * gib + 1.3 * gib + 0.9 * gib,
                 1e-12);
    /* DP 8, EP 2: EP's and the experts' gradient group over 4 GPUs, both apart from DP's */
    l.dp = 8;
    l.gpus = 8;
    assert_close(allowance(&l, 0.6 * gib, 0.9 * gib, 1.3 * gib, 0, 0, 1, 0),
                 0.6 * gib + 1.3 * gib + 3 * 0.9 * gib + ws, 1e-12);
    /* DP 2 without EP: the experts' gradient group holds DP's ranks, yet is a communicator of its own */
    l.dp = 2;
    l.ep = 1;
    l.gpus = 2;
    assert_close(allowance(&l, 0.6 * gib, 0.9 * gib, 1.3 * gib, 0, 0, 1, 0),
                 0.6 * gib + 1.3 * gib + 2 * 0.9 * gib + ws, 1e-12);
    /* one GPU: no communicator at all */
    l.tp = l.pp = l.dp = l.gpus = 1;
    assert_close(allowance(&l, 0.6 * gib, 0.9 * gib, 1.3 * gib, 0.5 * gib, 0, 0, 0), 0.6 * gib, 1e-12);
    assert_close(allowance(&l, 0.6 * gib, 0.9 * gib, 1.3 * gib, 0.5 * gib, 0, 1, 0), 0.6 * gib + ws, 1e-12);
}

/* With the parts measured (calibrate --comm since 2026-11-26): the world's communicator, then each group of more
 * than one GPU at its split plus the buffers of what runs on it (docs/model.md, "Other memory"). */
static void nccl_memory_prices_each_group_by_what_it_runs(void **state)
{
    (void)state;
    const double mib = 1048576.0;
    /* 2 x H200's parts (docs/validation/2026-11-26-h200x4-nccl-memory) */
    nccl_memory_figures f = {.comm = 870 * mib, .first = 1310 * mib, .process = 862 * mib, .split = 197 * mib,
                             .collective = 288 * mib, .p2p_buffers = 384 * mib, .p2p_first = 446 * mib};
    layout_t l = one_gpu(1, 1024);
    assert_close(nccl_memory_bytes(&l, &f, 0, 0), 0.0, 0);   /* one GPU: none */
    l.dp = 2;
    l.gpus = 2;
    /* DP 2: the world's and the gradients' (collectives): the trainer's 388 + 474 and 196 + 288 MiB */
    assert_close(nccl_memory_bytes(&l, &f, 0, 0), (862 + 197 + 288) * mib, 1e-9);
    /* PP 2: the pipeline's runs send/recv alone, the process's first (the trainer's 196 + 446) */
    l.dp = 1;
    l.pp = 2;
    assert_close(nccl_memory_bytes(&l, &f, 0, 0), (862 + 197 + 446) * mib, 1e-9);
    /* and a tied table split over the two stages: its pair all-reduces */
    assert_close(nccl_memory_bytes(&l, &f, 1, 0), (862 + 197 + 446 + 197 + 288) * mib, 1e-9);
    /* CP 2: the gradients over DP x CP (collectives) and the ring (send/recv); a mixture of experts sums its routing
     * counts over the ring's group too, and opens the experts' gradient group over CP */
    l.pp = 1;
    l.cp = 2;
    assert_close(nccl_memory_bytes(&l, &f, 0, 0), (862 + 197 + 288 + 197 + 446) * mib, 1e-9);
    assert_close(nccl_memory_bytes(&l, &f, 0, 1), (862 + 197 + 288 + 197 + 288 + 446 + 197 + 288) * mib, 1e-9);
    /* MoE DP 2 x EP 2: DP's, and EP's count all-gather and dispatch (the trainer's 2278 MiB in all) */
    l.cp = 1;
    l.dp = 2;
    l.ep = 2;
    assert_close(nccl_memory_bytes(&l, &f, 0, 1), (862 + 197 + 288 + 197 + 288 + 446) * mib, 1e-9);
    /* the breakdown explain prints: DP's and EP's, in that order, summing to the total */
    nccl_group g[NCCL_GROUPS_MAX];
    assert_int_equal(nccl_groups(&l, 0, 1, g), 2);
    assert_string_equal(g[0].name, "DP");
    assert_string_equal(g[1].name, "EP");
    assert_true(g[1].collective && g[1].peers == 1 && !g[0].peers);
    assert_close(nccl_world_bytes(&f, g, 2) + nccl_group_bytes(&f, &g[0]) + nccl_group_bytes(&f, &g[1]),
                 nccl_memory_bytes(&l, &f, 0, 1), 1e-9);
    /* PP 2 beside it: one more send/recv group at its own buffers, the one-time part counted once */
    l.pp = 2;
    l.gpus = 4;
    assert_close(nccl_memory_bytes(&l, &f, 0, 1), (862 + 197 + 288 + 197 + 288 + 446 + 197 + 384) * mib, 1e-9);
    /* the send/recv buffers are per peer (calibrate --comm over 4 H200s: 768 MiB for two): EP 4 sends to three
     * ranks, a ring of CP 4 and a middle stage of PP 4 to two */
    l.pp = 1;
    l.dp = 4;
    l.ep = 4;
    l.gpus = 4;
    assert_close(nccl_memory_bytes(&l, &f, 0, 1), (862 + 197 + 288 + 197 + 288 + 62 + 3 * 384) * mib, 1e-9);
    l.dp = 1;
    l.ep = 1;
    l.cp = 4;
    assert_close(nccl_memory_bytes(&l, &f, 0, 0), (862 + 197 + 288 + 197 + 62 + 2 * 384) * mib, 1e-9);
    l.cp = 1;
    l.pp = 4;
    assert_close(nccl_memory_bytes(&l, &f, 0, 0), (862 + 197 + 62 + 2 * 384) * mib, 1e-9);
    /* without the parts the totals stand: the first, then one per group (870 MiB), as before */
    l.pp = 1;
    l.dp = 2;
    l.ep = 2;
    l.gpus = 2;
    nccl_memory_figures totals = {.comm = 870 * mib, .first = 1310 * mib};
    assert_close(nccl_memory_bytes(&l, &totals, 0, 1), (1310 + 2 * 870) * mib, 1e-9);
    /* the parts need the world's figure: a split alone does not switch the model */
    nccl_memory_figures half = f;
    half.process = 0.0;
    assert_close(nccl_memory_bytes(&l, &half, 0, 1), (1310 + 2 * 870) * mib, 1e-9);
}

/* GPT-2 124M, micro-batch 32, s = 1024, unfused attention: the validator's
 * backward scratch (residual gradient x2, dQKV, dFFN, dScores) measured
 * 1.172 GiB on the H100 (docs/validation/); by hand:
 * 2 B x (32768 x (2 x 768 + 2304 + 3072) + 32 x 12 x 1024^2) = 1,258,291,200 B. */
static void backward_workspace_gpt2(void **state)
{
    (void)state;
    assert_close(backward_workspace_bytes(32768, 768, 2304, 3072, 32.0 * 12 * 1024 * 1024, 2), 1258291200.0, 1e-15);
    assert_close(backward_workspace_bytes(32768, 768, 2304, 3072, 0, 2) / 1073741824.0, 0.421875, 1e-12);
}

/* OLMoE-1B-7B's routed rows at TP 2 with expert TP 2 (4096 tokens, top 8, load 1: 32768 rows gathered on each rank, h
 * 2048): the experts' output rows' gradient and their input rows' gradient, 128 MiB each (validator/moe.c's dye and
 * dxe); at EP 1 and expert TP 1 one buffer serves both. */
static void moe_routed_grad_olmoe(void **state)
{
    (void)state;
    assert_close(moe_routed_grad_bytes(32768, 2048, 2, 1), 2.0 * 128 * 1048576.0, 1e-15);
    assert_close(moe_routed_grad_bytes(32768, 2048, 2, 0), 128 * 1048576.0, 1e-15);
    assert_close(moe_routed_grad_bytes(0, 2048, 2, 1), 0.0, 0);
}

/* sextant-gpu's attention backward workspace (kernels/attention.cu, dkdv_splits and
 * sx_flash_attention_backward_workspace_bytes), by hand.  The dK, dV grid is ceil(Tk / 64) x B x KV blocks; under
 * 264 a kv head's group of G = H / KV query heads is split over the smallest divisor d of G (1 < d < G) with
 * blocks x d >= 264, else over all G, and the workspace holds dO . O per row (B H Tq x 4 B, rounded up to 256) and,
 * when split, 2 x d x B Tk KV D x 4 B of fp32 partial dK, dV.
 * The Qwen2.5-3B shape at TP 2, micro-batch 2, 2048 tokens (H 8, KV 1, D 128; docs/validation/
 * 2026-11-26-h200x2-heldout-qwen): 32 x 2 x 1 = 64 blocks; 128 at d = 2, 256 at d = 4, both short of 264, and 8 is
 * the group: d = 8, 2 x 8 x 2 x 2048 x 1 x 128 x 4 = 33,554,432 B, + 2 x 8 x 2048 x 4 = 131,072 B of rows. */
static void attention_dkdv_split_as_the_kernel(void **state)
{
    (void)state;
    assert_int_equal(attention_dkdv_splits(2, 2048, 1, 8), 8);
    assert_close(attention_dkdv_split_bytes(2, 2048, 8, 1, 128), 33554432.0, 1e-15);
    assert_close(sextant_attention_workspace_bytes(2, 2048, 2048, 8, 1, 128), 33685504.0, 1e-15);
    /* one GPU (H 16, KV 2): 128 blocks, 256 at d = 2, 512 at d = 4: 2 x 4 x 2 x 2048 x 2 x 128 x 4 B */
    assert_int_equal(attention_dkdv_splits(2, 2048, 2, 8), 4);
    assert_close(attention_dkdv_split_bytes(2, 2048, 16, 2, 128), 33554432.0, 1e-15);
    assert_close(sextant_attention_workspace_bytes(2, 2048, 2048, 16, 2, 128), 33554432.0 + 262144.0, 1e-15);
    /* micro-batch 4: 256 blocks, d = 2; CP 2 (1024 of the 2048 tokens a rank): 64 blocks, the whole group */
    assert_int_equal(attention_dkdv_splits(4, 2048, 2, 8), 2);
    assert_int_equal(attention_dkdv_splits(2, 1024, 2, 8), 8);
    assert_close(attention_dkdv_split_bytes(2, 1024, 16, 2, 128), 2.0 * 8 * 2 * 1024 * 2 * 128 * 4, 1e-15);
    /* the smallest divisor that reaches 264: G 12 at 64 blocks takes 6 (384), not 4 (256) nor 12; a prime group
     * (7) has none below itself and takes all of it; a tail of keys counts as a block (65 keys: 2) */
    assert_int_equal(attention_dkdv_splits(1, 2048, 2, 12), 6);
    assert_int_equal(attention_dkdv_splits(1, 2048, 2, 7), 7);
    assert_int_equal(attention_dkdv_splits(66, 65, 1, 4), 2);   /* 132 blocks x 2 = 264 */
    assert_int_equal(attention_dkdv_splits(1, 64 * 264, 1, 8), 1);   /* exactly 264: full */
    /* no GQA (G 1): nothing to split however small the grid; a large grid: no split; so no partials */
    assert_int_equal(attention_dkdv_splits(1, 128, 2, 1), 1);
    assert_true(attention_dkdv_split_bytes(1, 128, 2, 2, 64) == 0.0);
    assert_true(attention_dkdv_split_bytes(1, 4096, 32, 32, 128) == 0.0);            /* LLaMA 2 7B: 2048 blocks */
    assert_true(attention_dkdv_split_bytes(1, 8192, 32, 8, 128) == 0.0);             /* LLaMA 3 8B: 1024 blocks */
    assert_true(attention_dkdv_split_bytes(4, 1024, 16, 8, 64) == 0.0);              /* the MoE test model: 512 */
    assert_close(sextant_attention_workspace_bytes(4, 1024, 1024, 16, 8, 64), 4.0 * 16 * 1024 * 4, 1e-15);
    /* the rows rounded up to 256 B; shapes the kernel refuses (H not a multiple of KV) have none */
    assert_close(sextant_attention_workspace_bytes(1, 3, 3, 1, 1, 64), 256.0, 1e-15);
    assert_true(sextant_attention_workspace_bytes(1, 2048, 2048, 12, 8, 128) == 0.0);
}

/* The planner's block target is the kernel's: kernels/attention.cu's `constexpr int DKDV_BLOCKS = N;`. */
static void attention_dkdv_blocks_match_the_kernel(void **state)
{
    (void)state;
    FILE *f = fopen(SEXTANT_ROOT "/kernels/attention.cu", "r");
    assert_non_null(f);
    char line[512];
    int found = 0, blocks = 0;
    while (fgets(line, sizeof line, f))
        if (sscanf(line, " constexpr int DKDV_BLOCKS = %d;", &blocks) == 1) found++;
    fclose(f);
    assert_int_equal(found, 1);
    assert_int_equal(blocks, ATTENTION_DKDV_BLOCKS);
}

/* Unfused attention per head, s = 1024, d = 64, bf16: forward touches the
 * 2 MiB score matrix 4 times (GEMM write, softmax read and write, GEMM read)
 * and the 128 KiB Q, K, V, O tiles once each; backward touches it 7 times
 * and the tiles 8 times (dO, V, Q, K read twice, dQ dK dV written). */
static void unfused_attention_kernel_split(void **state)
{
    (void)state;
    double flops[UNFUSED_ATTENTION_KERNELS_MAX], bytes[UNFUSED_ATTENTION_KERNELS_MAX];
    double f = 0, b = 0;
    int n = unfused_attention_kernels(1024, 64, 2, 0, 0, flops, bytes);
    assert_int_equal(n, 3);
    for (int i = 0; i < n; i++) { f += flops[i]; b += bytes[i]; }
    assert_close(b, 4.0 * 131072 + 4.0 * 2097152, 1e-15);
    assert_close(f, 4.0 * 1024 * 1024 * 64 + 5.0 * 1024 * 1024, 1e-15);
    f = b = 0;
    n = unfused_attention_kernels(1024, 64, 2, 1, 1, flops, bytes);
    assert_int_equal(n, 5);
    for (int i = 0; i < n; i++) { f += flops[i]; b += bytes[i]; }
    assert_close(b, 8.0 * 131072 + 7.0 * 2097152 + 1024.0 * 1024, 1e-15);
    assert_close(f, 8.0 * 1024 * 1024 * 64 + 5.0 * 1024 * 1024, 1e-15);
}

/* Rotary models get rope / rope_bwd right after the qkv GEMM: the local q and k
 * columns of all T tokens read and written once per pass (2 T (a_t + k_t) d B
 * bytes), 3 FLOP per element each way, nothing saved, recomputed with full
 * recomputation.  Learned positions get none. */
static int find_op(const stage_ops *s, const char *name, pass_t pass)
{
    for (int i = 0; i < s->nops; i++)
        if (!strcmp(s->ops[i].name, name) && s->ops[i].pass == pass) return i;
    return -1;
}

static void rope_ops_for_rotary_models(void **state)
{
    (void)state;
    model_t m = textbook_gpt(4, 1024, 16, 32000, 2048);
    layout_t l = one_gpu(2, 2048);
    stage_ops s;
    assert_int_equal(build_stage_ops(&m, &l, 0, &s), 0);
    assert_int_equal(find_op(&s, "rope", PASS_FWD), -1);
    double saved_learned = op_list_layer_saved(&m, &l);

    m.position = POS_ROPE;
    m.kv_heads = 4; /* GQA: 16 query heads, 4 KV heads of 64 */
    double saved_gqa_learned;
    {
        model_t learned = m;
        learned.position = POS_LEARNED;
        saved_gqa_learned = op_list_layer_saved(&learned, &l);
    }
    assert_int_equal(build_stage_ops(&m, &l, 0, &s), 0);
    const double T = 2.0 * 2048, qk = T * (16 + 4) * 64;
    int f = find_op(&s, "rope", PASS_FWD), b = find_op(&s, "rope_bwd", PASS_BWD);
    assert_true(f > 0 && b > f);
    /* after the qkv GEMM and its two backward GEMMs */
    assert_string_equal(s.ops[f - 3].name, "qkv");
    assert_string_equal(s.ops[f - 1].name, "qkv_wgrad");
    const op_t *r = &s.ops[f], *rb = &s.ops[b];
    assert_int_equal(r->kind, OP_MEMBOUND);
    assert_int_equal(r->count, 4);
    assert_close(r->bytes, 2.0 * qk * 2.0, 1e-15);
    assert_close(rb->bytes, 2.0 * qk * 2.0, 1e-15);
    assert_close(r->flops, 3.0 * qk, 1e-15);
    assert_close(rb->flops, 3.0 * qk, 1e-15);
    assert_close(r->saved_bytes, 0, 0);
    assert_close(r->model_flops + rb->model_flops + r->hardware_flops, 0, 0);
    assert_int_equal(find_op(&s, "rope", PASS_RECOMPUTE), -1);
    /* it saves nothing: the layer's saved bytes are those without it */
    assert_close(op_list_layer_saved(&m, &l), saved_gqa_learned, 1e-15);
    assert_true(saved_gqa_learned < saved_learned);

    /* TP 4: the local heads (4 query, 1 KV); sequence parallelism leaves T whole */
    l.tp = l.gpus = 4;
    l.sp = 1;
    assert_int_equal(build_stage_ops(&m, &l, 0, &s), 0);
    assert_close(s.ops[find_op(&s, "rope", PASS_FWD)].bytes, 2.0 * T * (4 + 1) * 64 * 2.0, 1e-15);
    /* full recomputation runs it again, saving nothing */
    l.recompute = RECOMPUTE_FULL;
    assert_int_equal(build_stage_ops(&m, &l, 0, &s), 0);
    int re = find_op(&s, "rope", PASS_RECOMPUTE);
    assert_true(re >= 0);
    assert_close(s.ops[re].bytes, s.ops[find_op(&s, "rope", PASS_FWD)].bytes, 0);
    assert_close(s.ops[re].saved_bytes, 0, 0);
}

/* The embedding's backward (docs/model.md, "Memory-bound ops"): the output gradient read once,
 * each token's table row read and written (3 T h B), and with learned positions the position
 * table's s rows read and written (2 s h B), which layer 0's norm backward sums while it writes
 * the gradient; with sequence parallelism the embedding reads the gathered gradient again
 * (T h B more).  Worked example: GPT-2 124M, micro-batch 32, seq 1024, bf16:
 * 3 x 32768 x 768 x 2 + 2 x 1024 x 768 x 2 = 154,140,672 bytes. */
static void embedding_backward_reads_the_gradient_once(void **state)
{
    (void)state;
    model_t m = textbook_gpt(12, 768, 12, 50257, 1024);
    layout_t l = one_gpu(32, 1024);
    stage_ops s;
    assert_int_equal(build_stage_ops(&m, &l, 0, &s), 0);
    int b = find_op(&s, "embedding_bwd", PASS_BWD);
    assert_true(b >= 0);
    assert_close(s.ops[b].bytes, 154140672.0, 1e-15);
    /* sequence parallelism over 2: the second read of the gathered gradient, 32768 x 768 x 2 */
    l.tp = l.gpus = 2;
    l.sp = 1;
    assert_int_equal(build_stage_ops(&m, &l, 0, &s), 0);
    assert_close(s.ops[find_op(&s, "embedding_bwd", PASS_BWD)].bytes, 154140672.0 + 50331648.0, 1e-15);
    /* rotary positions: no position table, 3 T h B */
    m.position = POS_ROPE;
    l = one_gpu(32, 1024);
    assert_int_equal(build_stage_ops(&m, &l, 0, &s), 0);
    assert_close(s.ops[find_op(&s, "embedding_bwd", PASS_BWD)].bytes, 3.0 * 32768 * 768 * 2, 1e-15);
}

/* the fused attention's executed FLOPs: 2 b a s^2 d causal forward, 2.5 x backward */
static void flash_attention_flops_convention(void **state)
{
    (void)state;
    assert_close(flash_attention_flops(4, 32, 2048, 64, 1, 0), 2.0 * 4 * 32 * 2048.0 * 2048 * 64, 1e-15);
    assert_close(flash_attention_flops(4, 32, 2048, 64, 1, 1), 2.5 * 2.0 * 4 * 32 * 2048.0 * 2048 * 64, 1e-15);
    assert_close(flash_attention_flops(4, 32, 2048, 64, 0, 0), 4.0 * 4 * 32 * 2048.0 * 2048 * 64, 1e-15);
}

/* calibrate's clock scaling: a GEMM of 1000 us measured at 1600 MHz takes 1600/1850 of that at a
 * reference of 1850 MHz; the attention timed alone at 1980 MHz takes longer at 1850; an
 * unmeasured clock leaves the time as it is */
static void clock_scaling_of_compute_bound_times(void **state)
{
    (void)state;
    assert_close(seconds_at_clock(1000e-6, 1600, 1850), 1000e-6 * 1600.0 / 1850.0, 1e-15);
    assert_close(seconds_at_clock(500e-6, 1980, 1850), 500e-6 * 1980.0 / 1850.0, 1e-15);
    assert_true(seconds_at_clock(500e-6, 1980, 1850) > 500e-6);
    assert_close(seconds_at_clock(500e-6, 0, 1850), 500e-6, 0);
    assert_close(seconds_at_clock(500e-6, 1980, 0), 500e-6, 0);
    assert_close(seconds_at_clock(500e-6, 1850, 1850), 500e-6, 0);
}

/* "Clock under the power cap": a step's average power at clock fraction x,
 * written out again here so that the tests do not lean on the planner's macro. */
static double capped_step_power(double static_w, double dynamic_j, double other_s, double clock_bound_s,
                                double exponent, double x)
{
    return static_w + dynamic_j * pow(x, exponent) / (other_s + clock_bound_s / x);
}

/* At or below the cap the clock stays at the top: exactly 1, not a bisection's
 * 1 - 1e-12.  P(1) = 100 + 50 / (0.02 + 0.1) = 516.7 W under 700; with 150 J over
 * 0.125 + 0.125 s, P(1) = 100 + 600 = 700 W, exactly the cap (every term is exact
 * in binary), still the top clock; a hair less cap and it drops. */
static void power_cap_below_the_cap_keeps_the_top_clock(void **state)
{
    (void)state;
    assert_true(power_capped_clock_fraction(100, 700, 50, 0.02, 0, 0.1, 2, 1, 1, 0.3) == 1.0);
    assert_true(power_capped_clock_fraction(100, 700, 50, 0.02, 0, 0.1, 0, 1, 1, 0.3) == 1.0);
    assert_true(capped_step_power(100, 150, 0.125, 0.125, 2, 1.0) == 700.0);
    assert_true(power_capped_clock_fraction(100, 700, 150, 0.125, 0, 0.125, 2, 1, 1, 0.3) == 1.0);
    double x = power_capped_clock_fraction(100, 699.999, 150, 0.125, 0, 0.125, 2, 1, 1, 0.3);
    assert_true(x < 1.0 && x > 0.999);
}

/* Exponent 0 (energy per operation independent of the clock) has a closed form:
 * static + D / (o + c / x) = cap  <=>  x = c / (D / (cap - static) - o).
 * 100 W static, 700 W cap, 90 J, 0.02 s other, 0.1 s clock-bound:
 * x = 0.1 / (90 / 600 - 0.02) = 0.1 / 0.13 = 0.769230769...  With nothing outside
 * the clock (o = 0) P is linear in x: x = c (cap - static) / D = 0.1 x 600 / 90 = 2/3.
 * Tolerance: the bisection stops at an interval of 1e-12 and returns its middle,
 * so x is within 5e-13 of the root; 1e-10 relative leaves room and still fails
 * on any other root. */
static void power_cap_exponent_zero_closed_form(void **state)
{
    (void)state;
    double x = power_capped_clock_fraction(100, 700, 90, 0.02, 0, 0.1, 0, 1, 1, 0.3);
    assert_close(x, 0.1 / (90.0 / 600.0 - 0.02), 1e-10);
    assert_close(x, 0.7692307692307692, 1e-10);
    assert_close(power_capped_clock_fraction(100, 700, 90, 0.0, 0, 0.1, 0, 1, 1, 0.3), 2.0 / 3.0, 1e-10);
    /* the same closed form with another x_min in force (above the root's floor) */
    assert_close(power_capped_clock_fraction(100, 700, 90, 0.02, 0, 0.1, 0, 1, 1, 0.5), 0.1 / 0.13, 1e-10);
}

/* Clock-bound seconds that take K x^-b of their top-clock time (docs/model.md, "GEMM time against the clock").
 * K = b = 1 is 1 / x exactly.  With exponent 0 the root has a closed form again: static + D / (o + c K x^-b) =
 * cap  <=>  x = (c K / (D / (cap - static) - o))^(1/b); 100 W, 700 W, 90 J, 0.02 s, 0.1 s, K 1.07, b 0.5:
 * x = (0.107 / 0.13)^2 = 0.677455621...  K above 1 stretches the step at the top clock too, so the same work
 * draws less there: 150 J over 0.125 + 0.125 s is exactly the cap at K = 1, and 1e-3 W less cap lowers the
 * clock, where K = 1.01 keeps the top one (P(1) = 100 + 150 / 0.25125 = 697.0 W).  With exponent 2 and b
 * 0.35, the root meets the cap to the Newton's tolerance and sits lower than 1 / x's (a weaker stretch
 * lowers the power less per MHz given up); with some of the seconds the other kernels' (1 / x) too. */
static double capped_step_power_kb(double static_w, double dynamic_j, double other_s, double clock_bound_s,
                                   double exponent, double k, double b, double x)
{
    return static_w + dynamic_j * pow(x, exponent) / (other_s + clock_bound_s * k * pow(x, -b));
}

static void power_cap_clock_time_factor_and_exponent(void **state)
{
    (void)state;
    assert_true(clock_bound_stretch(0.8, 1, 1) == 1.0 / 0.8);
    assert_close(clock_bound_stretch(0.8, 1.07, 0.35), 1.07 * pow(0.8, -0.35), 1e-15);
    assert_true(clock_bound_stretch(1.0, 1.07, 0.35) == 1.07);
    double x = power_capped_clock_fraction(100, 700, 90, 0.02, 0.1, 0, 0, 1.07, 0.5, 0.3);
    assert_close(x, (0.107 / 0.13) * (0.107 / 0.13), 1e-10);
    assert_close(x, 0.67745562130177515, 1e-10);
    assert_true(power_capped_clock_fraction(100, 699.999, 150, 0.125, 0, 0.125, 2, 1, 1, 0.3) < 1.0);
    assert_true(power_capped_clock_fraction(100, 699.999, 150, 0.125, 0.125, 0, 2, 1.01, 1, 0.3) == 1.0);
    double plain = power_capped_clock_fraction(124.5, 700, 88.9, 0.0215, 0, 0.0978, 2, 1, 1, 0.3);
    double weak = power_capped_clock_fraction(124.5, 700, 88.9, 0.0215, 0.0978, 0, 2, 1, 0.35, 0.3);
    assert_true(fabs(capped_step_power_kb(124.5, 88.9, 0.0215, 0.0978, 2, 1, 0.35, weak) - 700.0) <= 1e-6);
    assert_true(weak < plain);
    double slower = power_capped_clock_fraction(124.5, 700, 88.9, 0.0215, 0.0978, 0, 2, 1.07, 0.35, 0.3);
    assert_true(fabs(capped_step_power_kb(124.5, 88.9, 0.0215, 0.0978, 2, 1.07, 0.35, slower) - 700.0) <= 1e-6);
    assert_true(slower > weak && slower < 1.0);
    /* the GEMMs' seconds and the other kernels' apart: with K = b = 1 the split does not matter; with the
     * measured time only the GEMMs' follow it, the rest 1 / x, and the root meets the cap */
    assert_close(power_capped_clock_fraction(124.5, 700, 88.9, 0.0215, 0.06, 0.0378, 2, 1, 1, 0.3), plain, 1e-12);
    double mixed = power_capped_clock_fraction(124.5, 700, 88.9, 0.0215, 0.06, 0.0378, 2, 1.07, 0.35, 0.3);
    double t_mixed = 0.0215 + 0.06 * 1.07 * pow(mixed, -0.35) + 0.0378 / mixed;
    assert_true(fabs(124.5 + 88.9 * mixed * mixed / t_mixed - 700.0) <= 1e-6);
    assert_true(mixed > 0.3 && mixed < 1.0);
}

/* Exponent 2, an H100 step's worth (124.5 W static, 88.9 J of switching energy at
 * the top clock, 0.0215 s that do not follow the clock, 0.0978 s that do):
 * P(1) = 124.5 + 88.9 / 0.1193 = 869.7 W, over the 700 W cap.  P(x) = 700 is the
 * cubic 88.9 x^3 - 575.5 (0.0215 x + 0.0978) = 0, whose root in [0.3, 1] is
 * x = 0.912635292645827787 (mpmath, 40 digits).  At that x the step draws the cap:
 * dP/dx is about 1.8 kW here, so the bisection's 5e-13 in x is 1e-9 W, and 1e-6 W
 * is a defensible bound.  More work per second (more energy, more static power,
 * a lower cap) settles a lower clock; a higher cap a higher one. */
static void power_cap_exponent_two_meets_the_cap(void **state)
{
    (void)state;
    assert_close(capped_step_power(124.5, 88.9, 0.0215, 0.0978, 2, 1.0), 869.68021793797150, 1e-12);
    double x = power_capped_clock_fraction(124.5, 700, 88.9, 0.0215, 0, 0.0978, 2, 1, 1, 0.3);
    assert_close(x, 0.912635292645827787, 1e-10);
    assert_true(fabs(capped_step_power(124.5, 88.9, 0.0215, 0.0978, 2, x) - 700.0) <= 1e-6);
    assert_true(fabs(88.9 * x * x * x - 575.5 * (0.0215 * x + 0.0978)) <= 1e-8);
    /* monotonic in the work and the cap */
    double heavier = power_capped_clock_fraction(124.5, 700, 100.0, 0.0215, 0, 0.0978, 2, 1, 1, 0.3);
    double heavier_still = power_capped_clock_fraction(124.5, 700, 120.0, 0.0215, 0, 0.0978, 2, 1, 1, 0.3);
    double lighter = power_capped_clock_fraction(124.5, 700, 80.0, 0.0215, 0, 0.0978, 2, 1, 1, 0.3);
    assert_true(heavier < x && heavier_still < heavier && lighter > x && lighter < 1.0);
    assert_true(fabs(capped_step_power(124.5, 120.0, 0.0215, 0.0978, 2, heavier_still) - 700.0) <= 1e-6);
    assert_true(power_capped_clock_fraction(150.0, 700, 88.9, 0.0215, 0, 0.0978, 2, 1, 1, 0.3) < x);
    assert_true(power_capped_clock_fraction(124.5, 650, 88.9, 0.0215, 0, 0.0978, 2, 1, 1, 0.3) < x);
    assert_true(power_capped_clock_fraction(124.5, 750, 88.9, 0.0215, 0, 0.0978, 2, 1, 1, 0.3) > x);
    /* a steeper fall of energy with the clock needs less of a drop: x^3 beats x^2 */
    double cubic = power_capped_clock_fraction(124.5, 700, 88.9, 0.0215, 0, 0.0978, 3, 1, 1, 0.3);
    assert_true(cubic > x && cubic < 1.0);
    assert_true(fabs(capped_step_power(124.5, 88.9, 0.0215, 0.0978, 3, cubic) - 700.0) <= 1e-6);
}

/* The floor: work that would draw the cap even at x_min gets x_min itself
 * (1 MJ of switching energy in a 0.12 s step: P(0.3) is in the megawatts). */
static void power_cap_floor_at_x_min(void **state)
{
    (void)state;
    assert_true(power_capped_clock_fraction(124.5, 700, 1e6, 0.0215, 0, 0.0978, 2, 1, 1, 0.3) == 0.3);
    assert_true(power_capped_clock_fraction(124.5, 700, 1e6, 0.0215, 0, 0.0978, 0, 1, 1, 0.5) == 0.5);
    /* static power alone above the cap: no clock helps */
    assert_true(power_capped_clock_fraction(800, 700, 1.0, 0.0215, 0, 0.0978, 2, 1, 1, 0.3) == 0.3);
}

/* Nothing to slow, nothing that draws, or no cap: the top clock, even where
 * the static power alone is over the cap (800 W under 700), which would
 * otherwise send the bisection to the floor. */
static void power_cap_degenerate_inputs(void **state)
{
    (void)state;
    assert_true(power_capped_clock_fraction(124.5, 700, 88.9, 0.0215, 0, 0.0, 2, 1, 1, 0.3) == 1.0);
    assert_true(power_capped_clock_fraction(124.5, 700, 88.9, 0.0215, 0, -0.1, 2, 1, 1, 0.3) == 1.0);
    assert_true(power_capped_clock_fraction(124.5, 700, 0.0, 0.0215, 0, 0.0978, 2, 1, 1, 0.3) == 1.0);
    assert_true(power_capped_clock_fraction(124.5, 700, -5.0, 0.0215, 0, 0.0978, 2, 1, 1, 0.3) == 1.0);
    assert_true(power_capped_clock_fraction(124.5, 0.0, 88.9, 0.0215, 0, 0.0978, 2, 1, 1, 0.3) == 1.0);
    assert_true(power_capped_clock_fraction(124.5, -700, 88.9, 0.0215, 0, 0.0978, 2, 1, 1, 0.3) == 1.0);
    assert_true(power_capped_clock_fraction(800, 700, 0.0, 0.0215, 0, 0.0978, 2, 1, 1, 0.3) == 1.0);
    assert_true(power_capped_clock_fraction(800, 700, 88.9, 0.0215, 0, 0.0, 2, 1, 1, 0.3) == 1.0);
}

/* Overlap with slowdowns: without them the old max(C - W, tail); with them the window grows by C' sc/(1+sc)
 * while the stretched collective fits, and the two branches meet where it just fits. */
static void overlapped_comm_cost_reduces_to_hiding_and_grows_with_slowdown(void **state)
{
    (void)state;
    assert_close(overlapped_comm_cost_s(3.0, 10.0, 0.1, 0.0, 0.0), 0.3, 1e-12);
    assert_close(overlapped_comm_cost_s(12.0, 10.0, 0.1, 0.0, 0.0), 2.0, 1e-12);
    assert_close(overlapped_comm_cost_s(0.0, 10.0, 0.1, 0.3, 0.5), 0.0, 0);
    /* fits: C' = 2.7 * 1.5 = 4.05 <= 13: 0.3 + 4.05 * 0.3 / 1.3 */
    assert_close(overlapped_comm_cost_s(3.0, 10.0, 0.1, 0.3, 0.5), 0.3 + 4.05 * 0.3 / 1.3, 1e-12);
    /* outlasts: C' = 10 * 1.5 = 15 > 13: 0 + 10 * 0.3 + 2 / 1.5 */
    assert_close(overlapped_comm_cost_s(10.0, 10.0, 0.0, 0.3, 0.5), 3.0 + 2.0 / 1.5, 1e-12);
    /* continuous where C' = W (1 + sc): C = 13 / 1.5 */
    double at = 13.0 / 1.5;
    assert_close(overlapped_comm_cost_s(at * (1 - 1e-12), 10.0, 0.0, 0.3, 0.5), overlapped_comm_cost_s(at * (1 + 1e-12), 10.0, 0.0, 0.3, 0.5), 1e-9);
    /* never less than perfect hiding, more with a larger slowdown */
    for (double c = 0.5; c < 30.0; c += 0.5) {
        double none = overlapped_comm_cost_s(c, 10.0, 0.05, 0.0, 0.0);
        double some = overlapped_comm_cost_s(c, 10.0, 0.05, 0.2, 0.3), more = overlapped_comm_cost_s(c, 10.0, 0.05, 0.4, 0.3);
        assert_true(some >= none - 1e-12 && more >= some - 1e-12);
    }
    /* the parts: fits, the compute's loss C' sc / (1 + sc) and all of the collective but its tail beside it */
    overlap_cost fits = overlapped_comm_parts(3.0, 10.0, 0.1, 0.3, 0.5);
    assert_close(fits.slowdown_s, 4.05 * 0.3 / 1.3, 1e-12);
    assert_close(fits.beside_s, 2.7, 1e-12);
    assert_close(fits.cost_s, 0.3 + fits.slowdown_s, 1e-12);
    /* outlasts: the window's W sc, and W (1 + sc) / (1 + sm) of the collective beside it; the rest alone */
    overlap_cost outlasts = overlapped_comm_parts(10.0, 10.0, 0.0, 0.3, 0.5);
    assert_close(outlasts.slowdown_s, 3.0, 1e-12);
    assert_close(outlasts.beside_s, 13.0 / 1.5, 1e-12);
    assert_close(outlasts.cost_s - outlasts.slowdown_s, 10.0 - outlasts.beside_s, 1e-12);   /* alone: not stretched */
    overlap_cost nothing = overlapped_comm_parts(0.0, 10.0, 0.1, 0.3, 0.5);
    assert_true(nothing.cost_s == 0.0 && nothing.slowdown_s == 0.0 && nothing.beside_s == 0.0);
}

/* A collective beside compute that changes as it runs (overlapped_comm_walk): one segment is the rule above; with
 * segments in order, it spends its seconds segment by segment, at each one's slowdowns. */
static void overlapped_comm_walk_spends_the_collective_in_order(void **state)
{
    (void)state;
    /* one segment: the two-branch rule, both branches */
    overlap_segment one = {10.0, 0.3, 0.5};
    double cases[3][2] = {{3.0, 0.1}, {10.0, 0.0}, {40.0, 0.2}};
    for (int i = 0; i < 3; i++) {
        overlap_cost a = overlapped_comm_walk(cases[i][0], cases[i][1], &one, 1);
        overlap_cost b = overlapped_comm_parts(cases[i][0], 10.0, cases[i][1], 0.3, 0.5);
        assert_close(a.cost_s, b.cost_s, 1e-12);
        assert_close(a.slowdown_s, b.slowdown_s, 1e-12);
        assert_close(a.beside_s, b.beside_s, 1e-12);
    }
    /* two segments, a GEMM's 2 s (sc 0.4) then the experts' 10 s (sc 0.1), sm 0.5, a collective of 4 s alone: the
     * first takes 2 * 1.4 / 1.5 of it while the GEMM loses 0.8; the rest, 4 - 2.8 / 1.5, ends inside the experts'
     * after (4 - 2.8 / 1.5) * 1.5 s, the experts losing that * 0.1 / 1.1 */
    overlap_segment two[2] = {{2.0, 0.4, 0.5}, {10.0, 0.1, 0.5}};
    overlap_cost w = overlapped_comm_walk(4.0, 0.0, two, 2);
    double left = 4.0 - 2.8 / 1.5;
    assert_close(w.slowdown_s, 0.8 + left * 1.5 * 0.1 / 1.1, 1e-12);
    assert_close(w.beside_s, 4.0, 1e-12);
    assert_close(w.cost_s, w.slowdown_s, 1e-12);
    /* the order matters: the experts first, the collective is done before the GEMM */
    overlap_segment swapped[2] = {two[1], two[0]};
    overlap_cost v = overlapped_comm_walk(4.0, 0.0, swapped, 2);
    assert_close(v.slowdown_s, 4.0 * 1.5 * 0.1 / 1.1, 1e-12);
    /* outlasting both: each loses all of its t sc, the rest of the collective runs alone */
    overlap_cost x = overlapped_comm_walk(20.0, 0.1, two, 2);
    double done = 2.0 * 1.4 / 1.5 + 10.0 * 1.1 / 1.5;
    assert_close(x.slowdown_s, 0.8 + 1.0, 1e-12);
    assert_close(x.beside_s, done, 1e-12);
    assert_close(x.cost_s, 2.0 + x.slowdown_s + (18.0 - done), 1e-12);
    /* nothing to hide, no segments */
    overlap_cost none = overlapped_comm_walk(0.0, 0.1, two, 2);
    assert_true(none.cost_s == 0.0 && none.slowdown_s == 0.0 && none.beside_s == 0.0);
    assert_close(overlapped_comm_walk(3.0, 0.1, two, 0).cost_s, 3.0, 1e-12);
}

/* ZeRO-3's held units: a stage's 1F1B is F^w (F B)^(m-w) B^w; every backward there follows a forward and every forward
 * but the first of the steady phase follows a backward; with w >= m, F^m B^m: one backward after a forward. */
static void zero3_turns_of_one_f_one_b(void **state)
{
    (void)state;
    double bf, fb;
    zero3_turns(4, 0, &bf, &fb);   /* F B F B F B F B */
    assert_close(bf, 4.0, 0);
    assert_close(fb, 3.0, 0);
    zero3_turns(8, 3, &bf, &fb);   /* F F F (F B)^5 B B B */
    assert_close(bf, 5.0, 0);
    assert_close(fb, 4.0, 0);
    zero3_turns(2, 3, &bf, &fb);   /* F F B B */
    assert_close(bf, 1.0, 0);
    assert_close(fb, 0.0, 0);
    zero3_turns(1, 0, &bf, &fb);   /* F B */
    assert_close(bf, 1.0, 0);
    assert_close(fb, 0.0, 0);
}

/* "GEMM time over M, N, K": whole waves of 128 x 128 tiles over the SMs, split-K
 * when the tiles leave SMs idle, and the bytes as a floor. */
static void gemm_waves_and_tiles(void **state)
{
    (void)state;
    double waves, kc;
    /* 11 x 12 = 132 tiles: one full wave on 132 SMs; one more row of tiles: a second wave */
    gemm_waves(1, 11 * 128, 12 * 128, 4096, 132, &waves, &kc);
    assert_true(waves == 1.0 && kc == 4096.0);
    gemm_waves(1, 11 * 128 + 1, 12 * 128, 4096, 132, &waves, &kc);
    assert_true(waves == 2.0 && kc == 4096.0);
    /* 6 x 6 = 36 tiles: K split 3 ways (108 CTAs), never below 256 of K each */
    gemm_waves(1, 768, 768, 32768, 132, &waves, &kc);
    assert_true(waves == 1.0 && fabs(kc - 32768.0 / 3.0) < 1e-9);
    gemm_waves(1, 768, 768, 512, 132, &waves, &kc);
    assert_true(waves == 1.0 && kc == 256.0);
    /* a batch multiplies the tiles */
    gemm_waves(4, 11 * 128, 12 * 128, 4096, 132, &waves, &kc);
    assert_true(waves == 4.0);
    /* time: fixed + waves (tile + 2 TM TN k / (rate / sms)) */
    double rate = 132.0 * 2.0 * 128 * 128 * 1e9, t = gemm_tile_wave_s(1, 11 * 128 + 1, 12 * 128, 1000, 132, rate, 1e-6, 5e-6, 0, 0);
    assert_true(fabs(t - (5e-6 + 2.0 * (1e-6 + 1000e-9))) < 1e-15);
    /* the bytes floor, above the fixed cost */
    t = gemm_tile_wave_s(1, 128, 128, 128, 132, rate, 0.0, 5e-6, 1e6, 1e9);
    assert_true(fabs(t - (5e-6 + 1e-3)) < 1e-15);
}

/* the occupancy curve r = R b / (b + b_half) through two of its points gives every other point, between
 * them and beyond (a shard's fewer heads), and the first point where the two cannot make a line */
/* A weight gradient added into its gradient: the gradient read at HBM speed times the read factor, and a wider
 * gradient's extra store times the write factor; nothing for a GEMM that writes its output or has no bandwidth. */
static void gemm_accumulate_follows_its_derivation(void **state)
{
    (void)state;
    const double elements = 4096.0 * 28672.0, bw = 4.32e12, r = 0.642, w = 1.8;
    /* sextant's trainer: a bf16 gradient over a bf16 output, the read alone */
    assert_close(gemm_accumulate_s(elements, 2.0, 2.0, bw, r, w), elements * 2.0 * r / bw, 1e-12);
    /* Megatron's fp32 main_grad: read 4 bytes, and 2 more stored than the 16-bit output */
    assert_close(gemm_accumulate_s(elements, 4.0, 2.0, bw, r, w), elements * (4.0 * r + 2.0 * w) / bw, 1e-12);
    /* fp32 training writes 4 bytes either way: the read alone */
    assert_close(gemm_accumulate_s(elements, 4.0, 4.0, bw, r, w), elements * 4.0 * r / bw, 1e-12);
    assert_true(gemm_accumulate_s(elements, 0.0, 2.0, bw, r, w) == 0.0);
    assert_true(gemm_accumulate_s(elements, 2.0, 2.0, 0.0, r, w) == 0.0);
    /* Mixtral 8x7B's expert up projection's gradient on an H200: about 35 us, the 38-40 us dev/cuda/gemm_accumulate
     * measured beta 1 over beta 0 (docs/validation/2026-11-27-gemm-accumulate) */
    double t = gemm_accumulate_s(elements, 2.0, 2.0, 4.8e12 * 0.9, r, w);
    assert_true(t > 30e-6 && t < 40e-6);
}

static void occupancy_rate_follows_its_curve(void **state)
{
    (void)state;
    const double R = 200.0, half = 10.0;
#define ON_CURVE(b) (R * (b) / ((b) + half))
    assert_close(occupancy_rate(16.0, 32.0, ON_CURVE(32.0), 64.0, ON_CURVE(64.0)), ON_CURVE(16.0), 1e-12);
    assert_close(occupancy_rate(48.0, 32.0, ON_CURVE(32.0), 64.0, ON_CURVE(64.0)), ON_CURVE(48.0), 1e-12);
    assert_close(occupancy_rate(512.0, 32.0, ON_CURVE(32.0), 64.0, ON_CURVE(64.0)), ON_CURVE(512.0), 1e-12);
#undef ON_CURVE
    assert_close(occupancy_rate(16.0, 32.0, 150.0, 32.0, 170.0), 150.0, 0.0);   /* one point twice */
    assert_close(occupancy_rate(16.0, 32.0, 150.0, 0.0, 0.0), 150.0, 0.0);      /* one point */
    /* a rate that falls as the heads grow would make the line cross zero far out: the first point */
    assert_close(occupancy_rate(1.0, 32.0, 150.0, 64.0, 10.0), 150.0, 0.0);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(occupancy_rate_follows_its_curve),
        cmocka_unit_test(spec_gpt3_six_nd),
        cmocka_unit_test(spec_pipeline_group_compute),
        cmocka_unit_test(spec_llama2_70b_textbook_memory),
        cmocka_unit_test(spec_adam_bytes),
        cmocka_unit_test(spec_pcie_gradient_pass),
        cmocka_unit_test(flash_efficiency_rises_with_the_sequence),
        cmocka_unit_test(ring_collectives_and_bus_bandwidth),
        cmocka_unit_test(ring_latency_crosses_the_network_between_nodes),
        cmocka_unit_test(kv_counted_per_head),
        cmocka_unit_test(spec_tp_ratio_limits),
        cmocka_unit_test(pipeline_bubble_and_inflight),
        cmocka_unit_test(chinchilla),
        cmocka_unit_test(op_list_reproduces_korthikanti),
        cmocka_unit_test(op_list_reproduces_narayanan),
        cmocka_unit_test(gemm_ops_are_consistent),
        cmocka_unit_test(other_memory_allowance_counts_communicators),
        cmocka_unit_test(nccl_memory_prices_each_group_by_what_it_runs),
        cmocka_unit_test(expected_maximum_of_n_draws),
        cmocka_unit_test(backward_workspace_gpt2),
        cmocka_unit_test(moe_routed_grad_olmoe),
        cmocka_unit_test(attention_dkdv_split_as_the_kernel),
        cmocka_unit_test(attention_dkdv_blocks_match_the_kernel),
        cmocka_unit_test(unfused_attention_kernel_split),
        cmocka_unit_test(rope_ops_for_rotary_models),
        cmocka_unit_test(embedding_backward_reads_the_gradient_once),
        cmocka_unit_test(flash_attention_flops_convention),
        cmocka_unit_test(clock_scaling_of_compute_bound_times),
        cmocka_unit_test(power_cap_below_the_cap_keeps_the_top_clock),
        cmocka_unit_test(power_cap_exponent_zero_closed_form),
        cmocka_unit_test(power_cap_exponent_two_meets_the_cap),
        cmocka_unit_test(power_cap_clock_time_factor_and_exponent),
        cmocka_unit_test(power_cap_floor_at_x_min),
        cmocka_unit_test(power_cap_degenerate_inputs),
        cmocka_unit_test(overlapped_comm_cost_reduces_to_hiding_and_grows_with_slowdown),
        cmocka_unit_test(overlapped_comm_walk_spends_the_collective_in_order),
        cmocka_unit_test(zero3_turns_of_one_f_one_b),
        cmocka_unit_test(gemm_waves_and_tiles),
        cmocka_unit_test(gemm_accumulate_follows_its_derivation),
    };
    return cmocka_run_group_tests_name("formulas", tests, NULL, NULL);
}
