/* The hardware database: required rows with sources and datasheet figures,
 * node links, calibration overlays and malformed CSV. */
#include "test_util.h"

#include <sys/stat.h>

#include "hwdb.h"

static hwdb db;

static const char *const required[] = {"v100-sxm2-16gb", "v100-sxm2-32gb", "a100-sxm4-40gb", "a100-sxm4-80gb",
                                       "a6000",          "rtx3090ti",      "rtx4090",        "l40s",
                                       "h100-sxm",       "h100-pcie",      "h800",           "h200",
                                       "b200"};

static int load_db(void **state)
{
    (void)state;
    char err[512];
    if (hwdb_load(SEXTANT_ROOT "/hwdb", &db, err, sizeof err) != 0) {
        fprintf(stderr, "%s\n", err);
        return -1;
    }
    return 0;
}

static int free_db(void **state)
{
    (void)state;
    hwdb_free(&db);
    return 0;
}

/* One overlay row that apply must refuse, naming `where` (":2:value", ":2:key", ...). */
static void expect_overlay_row_refused(hwdb *into, const char *row, const char *where)
{
    char path[] = "/tmp/sextant-overlay-XXXXXX", text[512], err[512];
    snprintf(text, sizeof text, "gpu,key,value,source\n%s", row);
    write_temp(path, text);
    assert_int_equal(hwdb_apply_overlay(into, path, err, sizeof err), -1);
    if (!strstr(err, where)) print_error("%s: %s\n", row, err);
    assert_non_null(strstr(err, where));
    unlink(path);
}

static void every_required_gpu_has_a_sourced_row(void **state)
{
    (void)state;
    for (size_t i = 0; i < sizeof required / sizeof required[0]; i++) {
        const hw_gpu *g = hwdb_find_gpu(&db, required[i]);
        if (!g) {
            print_error("GPU '%s' is missing from hwdb/gpus.csv\n", required[i]);
            fail();
        }
        assert_true(strlen(g->source) > 10);
        assert_true(g->memory_bytes > 0 && g->hbm_bytes_per_s > 0);
        assert_true(g->peak_flops[PREC_FP16] > g->peak_flops[PREC_FP32]);
        assert_true(g->gemm_efficiency > 0.3 && g->gemm_efficiency <= 1.0);
        assert_true(g->membound_efficiency > 0.3 && g->membound_efficiency <= 1.0);
        assert_true(g->cloud_usd_per_gpu_hour > 0);
        const hw_node *n = hwdb_find_node(&db, g->node);
        assert_non_null(n);
        assert_true(strlen(n->source) > 5);
        assert_true(n->gpus_per_node >= 1);
    }
}

static void datasheet_figures(void **state)
{
    (void)state;
    /* NVIDIA's datasheets: dense tensor rates, per-direction NVLink */
    const hw_gpu *h100 = hwdb_find_gpu(&db, "H100-SXM");
    assert_non_null(h100);
    assert_close(h100->peak_flops[PREC_BF16], 989.4e12, 0.005);
    assert_close(h100->peak_flops[PREC_FP8], 1978.9e12, 0.005);
    assert_close(h100->hbm_bytes_per_s, 3350e9, 0.01);
    assert_close(h100->nvlink_bytes_per_s_per_dir, 450e9, 0.001);
    assert_close(h100->memory_bytes, 80.0 * 1073741824.0, 0.001);
    const hw_gpu *a100 = hwdb_find_gpu(&db, "a100-sxm4-80gb");
    assert_close(a100->peak_flops[PREC_BF16], 312e12, 0.001);
    assert_close(a100->peak_flops[PREC_TF32], 156e12, 0.001);
    assert_close(a100->peak_flops[PREC_FP8], 0, 0);
    const hw_gpu *v100 = hwdb_find_gpu(&db, "v100-sxm2-32gb");
    assert_close(v100->peak_flops[PREC_BF16], 0, 0);
    assert_close(v100->peak_flops[PREC_FP16], 125e12, 0.001);
    const hw_gpu *h200 = hwdb_find_gpu(&db, "h200");
    assert_close(h200->hbm_bytes_per_s, 4800e9, 0.01);
    assert_close(h200->peak_flops[PREC_BF16], h100->peak_flops[PREC_BF16], 0.001);
}

static void node_networks(void **state)
{
    (void)state;
    /* DGX H100: 8 GPUs, 8 x NDR 400 Gb/s, so 50 GB/s per GPU per direction */
    const hw_node *n = hwdb_find_node(&db, hwdb_find_gpu(&db, "h100-sxm")->node);
    assert_int_equal(n->gpus_per_node, 8);
    assert_int_equal(n->intra_link, LINK_NVLINK);
    assert_close(hw_node_inter_bytes_per_s_per_gpu(n), 50e9, 0.001);
    const hw_node *a = hwdb_find_node(&db, hwdb_find_gpu(&db, "a100-sxm4-80gb")->node);
    assert_close(hw_node_inter_bytes_per_s_per_gpu(a), 25e9, 0.001);
    const hw_node *r = hwdb_find_node(&db, hwdb_find_gpu(&db, "rtx4090")->node);
    assert_int_equal(r->intra_link, LINK_PCIE);
    assert_close(r->intra_bytes_per_s_per_dir, 32e9, 0.001);
}

static void calibration_overlay_replaces_figures(void **state)
{
    (void)state;
    hwdb copy;
    char err[512];
    assert_int_equal(hwdb_load(SEXTANT_ROOT "/hwdb", &copy, err, sizeof err), 0);
    char path[] = "/tmp/sextant-overlay-XXXXXX";
    write_temp(path, "gpu,key,value,source\n"
                     "h100-sxm,gemm_efficiency,0.61,calibrate test\n"
                     "h100-sxm,hbm_gbs,2990,calibrate test\n"
                     "h100-sxm,launch_overhead_us,4.5,calibrate test\n"
                     "h100-sxm,nccl_busbw_intra_gbs,360,calibrate test\n"
                     "h100-sxm,optimizer_membound_efficiency,0.83,calibrate test\n");
    assert_int_equal(hwdb_apply_overlay(&copy, path, err, sizeof err), 0);
    const hw_gpu *g = hwdb_find_gpu(&copy, "h100-sxm");
    assert_close(g->optimizer_membound_efficiency, 0.83, 1e-12);
    assert_true(hwdb_find_gpu(&copy, "h200")->optimizer_membound_efficiency == 0.0);   /* none until measured */
    assert_close(g->gemm_efficiency, 0.61, 1e-12);
    assert_close(g->hbm_bytes_per_s, 2990e9, 1e-12);
    assert_close(g->launch_overhead_s, 4.5e-6, 1e-12);
    assert_close(g->measured_intra_bytes_per_s, 360e9, 1e-12);
    assert_non_null(strstr(g->calibration, "calibrate test"));
    unlink(path);

    /* calibrate's GEMM table and the memory-bound kernels' fixed time */
    char table[] = "/tmp/sextant-overlay-XXXXXX";
    write_temp(table, "gpu,key,value,source\n"
                      "h100-sxm,gemm_us:8192x2304x768,150.5,calibrate test\n"
                      "h100-sxm,gemm_us:768x2304x8192,210,calibrate test\n"
                      "h100-sxm,membound_overhead_us,2.5,calibrate test\n"
                      "h100-sxm,flash_fwd_us:384x1024x64x96,500,calibrate test\n"
                      "h100-sxm,flash_bwd_us:384x1024x64x96,1500,calibrate test\n"
                      "h100-sxm,flash_bwd_us:192x1024x64x48,800,calibrate test\n"
                      "h100-sxm,unfused_fwd_us:384x1024x64x96,700,calibrate test\n"
                      "h100-sxm,unfused_bwd_us:384x1024x64x96,2100,calibrate test\n"
                      );
    assert_int_equal(hwdb_apply_overlay(&copy, table, err, sizeof err), 0);
    g = hwdb_find_gpu(&copy, "h100-sxm");
    assert_int_equal(g->gemm_times, 2);
    assert_true(g->gemm_time[0].m == 8192 && g->gemm_time[0].n == 2304 && g->gemm_time[0].k == 768);
    assert_close(g->gemm_time[0].seconds, 150.5e-6, 1e-12);
    assert_true(g->gemm_time[1].m == 768 && g->gemm_time[1].k == 8192);
    assert_close(g->gemm_time[1].seconds, 210e-6, 1e-12);
    assert_close(g->membound_overhead_s, 2.5e-6, 1e-12);
    assert_int_equal(g->attention_times[0], 1);
    assert_int_equal(g->attention_times[1], 2);
    assert_true(g->attention_time[0][0].m == 384 && g->attention_time[0][0].n == 1024 && g->attention_time[0][0].k == 64);
    assert_close(g->attention_time[0][0].seconds, 500e-6, 1e-12);
    assert_true(g->attention_time[0][0].kv == 96 && g->gemm_time[0].kv == 0);
    assert_close(g->attention_time[1][1].seconds, 800e-6, 1e-12);
    /* the unfused attention's tables apart from the fused one's */
    assert_int_equal(g->unfused_attention_times[0], 1);
    assert_int_equal(g->unfused_attention_times[1], 1);
    assert_true(g->unfused_attention_time[0][0].m == 384 && g->unfused_attention_time[0][0].kv == 96);
    assert_close(g->unfused_attention_time[0][0].seconds, 700e-6, 1e-12);
    assert_close(g->unfused_attention_time[1][0].seconds, 2100e-6, 1e-12);
    assert_int_equal(hwdb_find_gpu(&copy, "h200")->gemm_times, 0);
    unlink(table);
    const char *bad_gemm[][2] = {
        {"h100-sxm,gemm_us:8192x2304,150,x\n", ":2:key"},     {"h100-sxm,gemm_us:8192x2304x768x1,150,x\n", ":2:key"},
        {"h100-sxm,gemm_us:0x2304x768,150,x\n", ":2:key"},    {"h100-sxm,gemm_us:axbxc,150,x\n", ":2:key"},
        {"h100-sxm,gemm_us:8192x2304x768,-1,x\n", ":2:value"}, {"h100-sxm,gemm_us:8192x2304x768,,x\n", ":2:value"},
        {"h100-sxm,membound_overhead_us,5000,x\n", ":2:value"},   {"h100-sxm,flash_fwd_us:384x1024,5,x\n", ":2:key"},
        {"h100-sxm,flash_bwd_us:384x1024x64x96,0,x\n", ":2:value"}, {"h100-sxm,gemm_us:1x2x3x4,5,x\n", ":2:key"},   {"h100-sxm,flash_mid_us:1x2x3,5,x\n", ":2:key"},
        {"h100-sxm,unfused_fwd_us:384x1024x64,5,x\n", ":2:key"}, {"h100-sxm,unfused_bwd_us:384x1024x64x96,-2,x\n", ":2:value"},
    };
    for (size_t i = 0; i < sizeof bad_gemm / sizeof bad_gemm[0]; i++)
        expect_overlay_row_refused(&copy, bad_gemm[i][0], bad_gemm[i][1]);
    expect_overlay_row_refused(&copy, "h100-sxm,gemm_efficiency,1.7,x\n", ":2:value");
    expect_overlay_row_refused(&copy, "h100-sxm,optimizer_membound_efficiency,1.2,x\n", ":2:value");
    expect_overlay_row_refused(&copy, "h100-sxm,warp_drive,1,x\n", ":2:key");
    expect_overlay_row_refused(&copy, "h900,gemm_efficiency,0.5,x\n", ":2:gpu");
    hwdb_free(&copy);
}

/* The frameworks' fused attention has its priors (flash_*); calibrate writes sextant-gpu's own kernel's
 * measured efficiencies as two other overlay-only keys (attention_*), which leave the priors alone:
 * fractions of peak, 0 (the default: not calibrated) to 1. */
static void attention_efficiency_overlay(void **state)
{
    (void)state;
    hwdb hw;
    char err[512];
    assert_int_equal(hwdb_load(SEXTANT_ROOT "/hwdb", &hw, err, sizeof err), 0);
    const hw_gpu *g = hwdb_find_gpu(&hw, "h200");
    /* hwdb/priors.csv's Hopper priors for the frameworks' kernels; sextant's own not measured */
    assert_close(g->flash_fwd_efficiency, 0.50, 0);
    assert_close(g->flash_bwd_efficiency, 0.40, 0);
    assert_close(g->attention_fwd_efficiency, 0.0, 0);
    assert_close(hwdb_find_gpu(&hw, "a100-sxm4-80gb")->flash_fwd_efficiency, 0.55, 0);
    assert_close(g->fp8_gemm_relative_efficiency, 0.883, 0);
    /* the first-generation fused attention: half of FlashAttention-2 on Ampere, 0.7 / 2 of Hopper's FA3-level prior */
    assert_close(g->flash1_relative_speed, 0.35, 0);
    assert_close(hwdb_find_gpu(&hw, "a100-sxm4-80gb")->flash1_relative_speed, 0.50, 0);
    assert_close(hwdb_find_gpu(&hw, "v100-sxm2-32gb")->flash1_relative_speed, 0.0, 0);
    /* its Triton port: 1/1.80 of FlashAttention-2 (the middle of 1.3-2.5x), 0.7 / 1.80 of Hopper's prior */
    assert_close(g->flash1_triton_relative_speed, 0.39, 0);
    assert_close(hwdb_find_gpu(&hw, "a100-sxm4-80gb")->flash1_triton_relative_speed, 0.555, 0);
    assert_close(hwdb_find_gpu(&hw, "v100-sxm2-32gb")->flash1_triton_relative_speed, 0.0, 0);
    assert_close(hwdb_find_gpu(&hw, "v100-sxm2-32gb")->flash_fwd_efficiency, 0.0, 0);
    char path[] = "/tmp/sextant-overlay-XXXXXX";
    write_temp(path, "gpu,key,value,source\n"
                     "h200,attention_fwd_efficiency,0.1874,\"sextant-gpu calibrate test (flash, 4 shapes)\"\n"
                     "h200,attention_bwd_efficiency,0.1512,sextant-gpu calibrate test\n");
    assert_int_equal(hwdb_apply_overlay(&hw, path, err, sizeof err), 0);
    assert_close(g->attention_fwd_efficiency, 0.1874, 1e-12);
    assert_close(g->attention_bwd_efficiency, 0.1512, 1e-12);
    assert_close(g->flash_fwd_efficiency, 0.50, 0);   /* the frameworks' prior stays */
    assert_close(hwdb_find_gpu(&hw, "h100-sxm")->attention_fwd_efficiency, 0.0, 0); /* another GPU: untouched */
    assert_non_null(strstr(g->calibration, "sextant-gpu calibrate test"));
    unlink(path);
    const char *bad_rows[] = {"h200,attention_fwd_efficiency,1.2,x\n", "h200,attention_bwd_efficiency,-0.1,x\n",
                              "h200,attention_bwd_efficiency,fast,x\n"};
    for (int i = 0; i < 3; i++) expect_overlay_row_refused(&hw, bad_rows[i], ":2:value");
    hwdb_free(&hw);
}

/* calibrate's power model: seven overlay-only keys, in the units calibrate
 * prints (MHz, pJ per FLOP and per byte) and stored in SI (Hz, J).  A GPU
 * without them keeps zeros, which leaves the planner's power model off. */
static void power_model_overlay(void **state)
{
    (void)state;
    hwdb hw;
    char err[512];
    assert_int_equal(hwdb_load(SEXTANT_ROOT "/hwdb", &hw, err, sizeof err), 0);
    /* no gpus.csv row carries them */
    for (int i = 0; i < hw.ngpus; i++) {
        const hw_gpu *g = &hw.gpus[i];
        assert_true(g->power_cap_w == 0.0 && g->clock_max_hz == 0.0 && g->power_static_w == 0.0);
        assert_true(g->energy_gemm_j_per_flop == 0.0 && g->energy_attention_j_per_flop == 0.0);
        assert_true(g->energy_j_per_byte == 0.0 && g->clock_energy_exponent == 0.0);
    }
    char path[] = "/tmp/sextant-overlay-XXXXXX";
    write_temp(path, "gpu,key,value,source\n"
                     "h100-sxm,power_cap_w,700,calibrate power test\n"
                     "h100-sxm,clock_max_mhz,1980,calibrate power test\n"
                     "h100-sxm,power_static_w,124.5,calibrate power test\n"
                     "h100-sxm,energy_gemm_pj_per_flop,0.955,calibrate power test\n"
                     "h100-sxm,energy_attention_pj_per_flop,2.886,calibrate power test\n"
                     "h100-sxm,energy_pj_per_byte,149,calibrate power test\n"
                     "h100-sxm,clock_energy_exponent,2.25,calibrate power test\n");
    assert_int_equal(hwdb_apply_overlay(&hw, path, err, sizeof err), 0);
    unlink(path);
    const hw_gpu *g = hwdb_find_gpu(&hw, "h100-sxm");
    /* the scale is one multiplication: within a rounding of the literal */
    assert_close(g->power_cap_w, 700.0, 1e-15);
    assert_close(g->clock_max_hz, 1980e6, 1e-15);
    assert_close(g->power_static_w, 124.5, 1e-15);
    assert_close(g->energy_gemm_j_per_flop, 0.955e-12, 1e-15);
    assert_close(g->energy_attention_j_per_flop, 2.886e-12, 1e-15);
    assert_close(g->energy_j_per_byte, 149e-12, 1e-15);
    assert_close(g->clock_energy_exponent, 2.25, 1e-15);
    assert_non_null(strstr(g->calibration, "calibrate power test"));
    /* the other GPUs keep zeros, and the rest of the H100's row is untouched */
    const hw_gpu *h200 = hwdb_find_gpu(&hw, "h200");
    assert_true(h200->power_cap_w == 0.0 && h200->clock_max_hz == 0.0 && h200->power_static_w == 0.0);
    assert_true(h200->energy_gemm_j_per_flop == 0.0 && h200->energy_attention_j_per_flop == 0.0);
    assert_true(h200->energy_j_per_byte == 0.0 && h200->clock_energy_exponent == 0.0);
    assert_close(g->tdp_w, 700.0, 1e-12);
    assert_close(g->peak_flops[PREC_BF16], 989.4e12, 0.005);

    /* malformed values are refused at the value, like every other key's; the
     * ranges: a cap of at least 1 W, a top clock of 100 MHz to 10 GHz, energies
     * not negative, a static power of at least 1 W (0 would switch the model off
     * unseen), the exponent 0 to 8 */
    const char *bad_rows[] = {
        "h100-sxm,energy_gemm_pj_per_flop,cheap,x\n", "h100-sxm,energy_attention_pj_per_flop,-0.1,x\n",
        "h100-sxm,energy_pj_per_byte,,x\n",           "h100-sxm,energy_pj_per_byte,1e5,x\n",
        "h100-sxm,power_cap_w,0,x\n",                 "h100-sxm,power_cap_w,700W,x\n",
        "h100-sxm,clock_max_mhz,50,x\n",              "h100-sxm,clock_max_mhz,2e4,x\n",
        "h100-sxm,power_static_w,-1,x\n",             "h100-sxm,clock_energy_exponent,9,x\n",
        "h100-sxm,clock_energy_exponent,nan,x\n",    "h100-sxm,power_static_w,0,x\n",
    };
    for (size_t i = 0; i < sizeof bad_rows / sizeof bad_rows[0]; i++) expect_overlay_row_refused(&hw, bad_rows[i], ":2:value");
    /* a misspelt key is refused at the key */
    expect_overlay_row_refused(&hw, "h100-sxm,energy_gemm_j_per_flop,0.955e-12,x\n", ":2:key");
    /* the refusals left the calibrated figures as they were */
    assert_close(g->energy_gemm_j_per_flop, 0.955e-12, 1e-15);
    assert_close(g->power_cap_w, 700.0, 1e-15);
    assert_close(g->clock_max_hz, 1980e6, 1e-15);
    hwdb_free(&hw);
}

/* calibrate --comm writes the node's intra-node link terms through the GPU's
 * row; they must land on that GPU's node and nowhere else. */
static void comm_overlay_replaces_node_link(void **state)
{
    (void)state;
    hwdb hw;
    char err[512];
    assert_int_equal(hwdb_load(SEXTANT_ROOT "/hwdb", &hw, err, sizeof err), 0);
    const hw_node *h200_node = hwdb_find_node(&hw, hwdb_find_gpu(&hw, "h200")->node);
    const hw_node *h100_node = hwdb_find_node(&hw, hwdb_find_gpu(&hw, "h100-sxm")->node);
    double h100_bw = h100_node->intra_bytes_per_s_per_dir, h100_lat = h100_node->intra_latency_s;
    char path[] = "/tmp/sextant-overlay-XXXXXX";
    write_temp(path, "gpu,key,value,source\n"
                     "h200,gemm_efficiency,0.7,calibrate test\n"
                     "# all_gather fit, for the record,1,x\n"
                     "h200,intra_gbs_per_dir,351.5,calibrate --comm test\n"
                     "h200,intra_latency_us,6.25,calibrate --comm test\n"
                     "h200,intra_gbs_per_dir_all_gather,238.1,calibrate --comm test\n"
                     "h200,intra_latency_us_all_gather,11.5,calibrate --comm test\n"
                     "h200,nccl_memory_gib,0.85,calibrate --comm test\n"
                     "h200,nccl_p2p_memory_gib,0.6,calibrate --comm test\n"
                     "h200,nccl_process_memory_gib,0.842,calibrate --comm test\n"
                     "h200,nccl_split_memory_gib,0.192,calibrate --comm test\n"
                     "h200,nccl_collective_memory_gib,0.281,calibrate --comm test\n"
                     "h200,nccl_p2p_buffers_memory_gib,0.375,calibrate --comm test\n"
                     "h200,nccl_p2p_first_memory_gib,0.436,calibrate --comm test\n");
    assert_int_equal(hwdb_apply_overlay(&hw, path, err, sizeof err), 0);
    assert_close(h200_node->intra_bytes_per_s_per_dir, 351.5e9, 1e-12);
    assert_close(h200_node->intra_ag_bytes_per_s, 238.1e9, 1e-12);
    assert_close(h200_node->intra_ag_latency_s, 11.5e-6, 1e-12);
    assert_true(h200_node->intra_rs_bytes_per_s == 0.0);   /* not measured: all-reduce's fit stands in */
    assert_close(hwdb_find_gpu(&hw, "h200")->nccl_comm_bytes, 0.85 * 1073741824.0, 1e-12);
    assert_close(hwdb_find_gpu(&hw, "h200")->nccl_p2p_comm_bytes, 0.6 * 1073741824.0, 1e-12);
    /* NCCL's memory by part (calibrate --comm since 2026-11-26) */
    assert_close(hwdb_find_gpu(&hw, "h200")->nccl_process_bytes, 0.842 * 1073741824.0, 1e-12);
    assert_close(hwdb_find_gpu(&hw, "h200")->nccl_split_bytes, 0.192 * 1073741824.0, 1e-12);
    assert_close(hwdb_find_gpu(&hw, "h200")->nccl_collective_bytes, 0.281 * 1073741824.0, 1e-12);
    assert_close(hwdb_find_gpu(&hw, "h200")->nccl_p2p_buffers_bytes, 0.375 * 1073741824.0, 1e-12);
    assert_close(hwdb_find_gpu(&hw, "h200")->nccl_p2p_first_bytes, 0.436 * 1073741824.0, 1e-12);
    assert_close(h200_node->intra_latency_s, 6.25e-6, 1e-12);
    assert_close(hwdb_find_gpu(&hw, "h200")->gemm_efficiency, 0.7, 1e-12);
    assert_non_null(strstr(hwdb_find_gpu(&hw, "h200")->calibration, "calibrate --comm test"));
    /* the other nodes keep their figures */
    assert_close(h100_node->intra_bytes_per_s_per_dir, h100_bw, 1e-12);
    assert_close(h100_node->intra_latency_s, h100_lat, 1e-12);
    unlink(path);

    expect_overlay_row_refused(&hw, "h200,intra_gbs_per_dir,0,x\n", ":2:value");
    expect_overlay_row_refused(&hw, "h200,intra_latency_us,-1,x\n", ":2:value");
    hwdb_free(&hw);
}

/* calibrate --comm's fits per number of ranks (KEY:N): each lands in the node's fit over N ranks, and a group is
 * priced with the fit over the number of ranks nearest its own (by ratio, ties to the fewer), among those that
 * measured its collective; the plain keys stay as they were. */
static void comm_fits_per_number_of_ranks(void **state)
{
    (void)state;
    hwdb hw;
    char err[512];
    assert_int_equal(hwdb_load(SEXTANT_ROOT "/hwdb", &hw, err, sizeof err), 0);
    const hw_node *node = hwdb_find_node(&hw, hwdb_find_gpu(&hw, "h200")->node);
    double plain = node->intra_bytes_per_s_per_dir;
    assert_int_equal(node->intra_fit_count, 0);
    assert_null(hw_node_intra_fit(node, 4.0, 0));
    char path[] = "/tmp/sextant-overlay-XXXXXX";
    write_temp(path, "gpu,key,value,source\n"
                     "h200,intra_gbs_per_dir:2,283.8,calibrate --comm --gpus 2\n"
                     "h200,intra_latency_us:2,8.08,calibrate --comm --gpus 2\n"
                     "h200,intra_gbs_per_dir_all_gather:2,229.3,calibrate --comm --gpus 2\n"
                     "h200,intra_latency_us_all_gather:2,14.8,calibrate --comm --gpus 2\n"
                     "h200,intra_gbs_per_dir:4,328.3,calibrate --comm --gpus 4\n"
                     "h200,intra_latency_us:4,3.28,calibrate --comm --gpus 4\n");
    assert_int_equal(hwdb_apply_overlay(&hw, path, err, sizeof err), 0);
    unlink(path);
    assert_int_equal(node->intra_fit_count, 2);
    assert_close(node->intra_bytes_per_s_per_dir, plain, 1e-12);
    const hw_intra_fit *f = hw_node_intra_fit(node, 4.0, 0);
    assert_non_null(f);
    assert_int_equal(f->ranks, 4);
    assert_close(f->ar_bytes_per_s, 328.3e9, 1e-12);
    assert_close(f->ar_latency_s, 3.28e-6, 1e-12);
    assert_int_equal(hw_node_intra_fit(node, 3.0, 0)->ranks, 4);   /* nearest by ratio */
    assert_int_equal(hw_node_intra_fit(node, 2.0, 0)->ranks, 2);
    assert_int_equal(hw_node_intra_fit(node, 2.828427, 0)->ranks, 2);   /* half-way by ratio: the fewer */
    assert_int_equal(hw_node_intra_fit(node, 5.9, 0)->ranks, 4);
    /* twice the nearest's ranks or more: the node's own figures (NCCL gains bandwidth with the ranks) */
    assert_null(hw_node_intra_fit(node, 8.0, 0));
    /* the all-gather was measured over two ranks only: a group of three takes that, one of four does not */
    f = hw_node_intra_fit(node, 3.0, 2);
    assert_non_null(f);
    assert_int_equal(f->ranks, 2);
    assert_close(f->ag_bytes_per_s, 229.3e9, 1e-12);
    assert_null(hw_node_intra_fit(node, 4.0, 2));
    assert_null(hw_node_intra_fit(node, 4.0, 1));   /* no reduce-scatter fit anywhere */
    /* calibrate --comm's measured times per size: sorted as they load, a size again replaces its time, linear
     * between two sizes, none outside them */
    char times[] = "/tmp/sextant-overlay-XXXXXX";
    write_temp(times, "gpu,key,value,source\n"
                      "h200,intra_us_all_gather:2:16777216,56.0,calibrate --comm --gpus 2\n"
                      "h200,intra_us_all_gather:2:4194304,27.6,calibrate --comm --gpus 2\n"
                      "h200,intra_us_all_gather:2:8388608,40.0,calibrate --comm --gpus 2\n");
    assert_int_equal(hwdb_apply_overlay(&hw, times, err, sizeof err), 0);
    unlink(times);
    char again[] = "/tmp/sextant-overlay-XXXXXX";   /* a later overlay measured that size again */
    write_temp(again, "gpu,key,value,source\nh200,intra_us_all_gather:2:8388608,36.7,calibrate --comm --gpus 2\n");
    assert_int_equal(hwdb_apply_overlay(&hw, again, err, sizeof err), 0);
    unlink(again);
    f = hw_node_intra_fit(node, 2.0, 2);
    assert_non_null(f);
    assert_int_equal(f->sizes[2], 3);
    assert_int_equal(f->sizes[0], 0);
    assert_close(f->size_bytes[2][0], 4194304.0, 0);
    assert_close(f->size_s[2][1], 36.7e-6, 1e-12);
    assert_close(hw_intra_fit_time_s(f, 2, 8388608.0), 36.7e-6, 1e-12);
    assert_close(hw_intra_fit_time_s(f, 2, 12582912.0), 36.7e-6 + 0.5 * (56.0e-6 - 36.7e-6), 1e-12);
    assert_close(hw_intra_fit_time_s(f, 2, 4194304.0), 27.6e-6, 1e-12);
    assert_close(hw_intra_fit_time_s(f, 2, 4194303.0), 0.0, 0);    /* below the smallest */
    /* above the largest: that size's bandwidth */
    assert_close(hw_intra_fit_time_s(f, 2, 33554432.0), 56.0e-6 * 33554432.0 / 16777216.0, 1e-12);
    assert_close(hw_intra_fit_time_s(f, 0, 8388608.0), 0.0, 0);    /* no all-reduce times */
    /* measured times without a fit over those ranks still find their group */
    char only[] = "/tmp/sextant-overlay-XXXXXX";
    write_temp(only, "gpu,key,value,source\nh200,intra_us_sendrecv:8:1048576,20.0,x\nh200,intra_us_sendrecv:8:2097152,30.0,x\n");
    assert_int_equal(hwdb_apply_overlay(&hw, only, err, sizeof err), 0);
    unlink(only);
    f = hw_node_intra_fit(node, 8.0, 3);
    assert_non_null(f);
    assert_int_equal(f->ranks, 8);
    assert_close(f->sr_bytes_per_s, 0.0, 0);
    assert_close(hw_intra_fit_time_s(f, 3, 1572864.0), 25.0e-6, 1e-12);
    expect_overlay_row_refused(&hw, "h200,intra_us_all_gather:2:0,30,x\n", ":2:key");
    expect_overlay_row_refused(&hw, "h200,intra_us_all_gather:1:1024,30,x\n", ":2:key");
    expect_overlay_row_refused(&hw, "h200,intra_us_gather:2:1024,30,x\n", ":2:key");
    expect_overlay_row_refused(&hw, "h200,intra_us_all_gather:2:1024x,30,x\n", ":2:key");
    expect_overlay_row_refused(&hw, "h200,intra_us_all_gather:2:1024,0,x\n", ":2:value");
    expect_overlay_row_refused(&hw, "h200,intra_gbs_per_dir:1,300,x\n", ":2:key");
    expect_overlay_row_refused(&hw, "h200,intra_gbs_per_dir:four,300,x\n", ":2:key");
    expect_overlay_row_refused(&hw, "h200,intra_gbs_per_dir:4x,300,x\n", ":2:key");
    expect_overlay_row_refused(&hw, "h200,intra_latency_us:4,-1,x\n", ":2:value");
    expect_overlay_row_refused(&hw, "h200,nccl_memory_gib:4,1,x\n", ":2:key");
    hwdb_free(&hw);
}

/* calibrate --comm's overlap measurement: four overlay-only fractions, 0 (the
 * default: not measured) on every GPU until an overlay sets them. */
static void overlap_slowdown_overlay(void **state)
{
    (void)state;
    hwdb hw;
    char err[512];
    assert_int_equal(hwdb_load(SEXTANT_ROOT "/hwdb", &hw, err, sizeof err), 0);
    for (int i = 0; i < hw.ngpus; i++) {
        const hw_gpu *g = &hw.gpus[i];
        /* hwdb/priors.csv: the 2 x H200 measurement beside a step's GEMMs stands for every GPU until measured there */
        assert_close(g->overlap_compute_slowdown_allgather, 0.390, 0);
        assert_close(g->overlap_compute_slowdown_reducescatter, 0.361, 0);
        assert_close(g->overlap_compute_slowdown_allreduce, 0.499, 0);
        assert_close(g->overlap_comm_slowdown, 0.545, 0);
        /* the collectives' power, measured on 2 x H200, for the two 700 W Hopper boards only */
        int hopper = !strcmp(g->name, "h100-sxm") || !strcmp(g->name, "h200");
        assert_true(g->collective_power_w == (hopper ? 279.0 : 0.0));
        /* the chips' static power spread, from the clocks of 2 and 4 H200s at the cap */
        assert_true(g->power_static_spread_w == (hopper ? 27.0 : 0.0));
    }
    char path[] = "/tmp/sextant-overlay-XXXXXX";
    write_temp(path, "gpu,key,value,source\n"
                     "h100-sxm,overlap_compute_slowdown_allgather,0.2,calibrate --comm overlap test\n"
                     "h100-sxm,overlap_compute_slowdown_reducescatter,0.137,calibrate --comm overlap test\n"
                     "h100-sxm,overlap_compute_slowdown_allreduce,0.161,calibrate --comm overlap test\n"
                     "h100-sxm,overlap_comm_slowdown,1.75,calibrate --comm overlap test\n");
    assert_int_equal(hwdb_apply_overlay(&hw, path, err, sizeof err), 0);
    unlink(path);
    /* a key given twice in one file is refused (duplicate_overlay_keys_are_refused); a later overlay wins */
    char again[] = "/tmp/sextant-overlay-XXXXXX";
    write_temp(again, "gpu,key,value,source\n"
                      "h100-sxm,overlap_compute_slowdown_allgather,0.118,calibrate --comm overlap test again\n");
    assert_int_equal(hwdb_apply_overlay(&hw, again, err, sizeof err), 0);
    unlink(again);
    const hw_gpu *g = hwdb_find_gpu(&hw, "h100-sxm");
    assert_close(g->overlap_compute_slowdown_allgather, 0.118, 1e-15); /* the later overlay wins */
    assert_close(g->overlap_compute_slowdown_reducescatter, 0.137, 1e-15);
    assert_close(g->overlap_compute_slowdown_allreduce, 0.161, 1e-15);
    assert_close(g->overlap_comm_slowdown, 1.75, 1e-15);
    assert_non_null(strstr(g->calibration, "overlap test again"));
    /* the other GPUs and the rest of the row are untouched */
    const hw_gpu *h200 = hwdb_find_gpu(&hw, "h200");
    assert_true(h200->overlap_compute_slowdown_allgather == 0.390 && h200->overlap_comm_slowdown == 0.545);
    assert_close(g->peak_flops[PREC_BF16], 989.4e12, 0.005);

    /* fractions: the compute slowdowns 0 to 1, the collective's 0 to 10 */
    const char *bad_rows[] = {
        "h100-sxm,overlap_compute_slowdown_allgather,-0.01,x\n", "h100-sxm,overlap_compute_slowdown_allgather,1.5,x\n",
        "h100-sxm,overlap_compute_slowdown_reducescatter,12%,x\n", "h100-sxm,overlap_compute_slowdown_allreduce,,x\n",
        "h100-sxm,overlap_compute_slowdown_allreduce,nan,x\n",   "h100-sxm,overlap_comm_slowdown,11,x\n",
        "h100-sxm,overlap_comm_slowdown,-1,x\n",
    };
    for (size_t i = 0; i < sizeof bad_rows / sizeof bad_rows[0]; i++) expect_overlay_row_refused(&hw, bad_rows[i], ":2:value");
    /* the collective's own names are not the keys */
    expect_overlay_row_refused(&hw, "h100-sxm,overlap_compute_slowdown_all_gather,0.1,x\n", ":2:key");
    expect_overlay_row_refused(&hw, "h100-sxm,overlap_compute_slowdown,0.1,x\n", ":2:key");
    /* the refusals left the measured figures as they were */
    assert_close(g->overlap_compute_slowdown_allgather, 0.118, 1e-15);
    assert_close(g->overlap_comm_slowdown, 1.75, 1e-15);
    hwdb_free(&hw);
}

/* Copies the real hwdb into a temporary folder with gpus.csv replaced. */
static void expect_gpus_csv_error(const char *gpus_csv, const char *where)
{
    char dir[] = "/tmp/sextant-hwdb-XXXXXX";
    assert_non_null(mkdtemp(dir));
    char path[256], cmd[512], err[512];
    snprintf(cmd, sizeof cmd, "cp %s/hwdb/nodes.csv %s/", SEXTANT_ROOT, dir);
    assert_int_equal(system(cmd), 0);
    snprintf(path, sizeof path, "%s/gpus.csv", dir);
    FILE *f = fopen(path, "w");
    fputs(gpus_csv, f);
    fclose(f);
    hwdb d;
    int rc = hwdb_load(dir, &d, err, sizeof err);
    snprintf(cmd, sizeof cmd, "rm -rf %s", dir);
    assert_int_equal(system(cmd), 0);
    if (rc == 0) {
        hwdb_free(&d);
        print_error("expected an error at %s\n", where);
        fail();
    }
    char expected[512];
    snprintf(expected, sizeof expected, "%s:%s", path, where);
    if (!strstr(err, expected)) {
        print_error("error '%s' does not name '%s'\n", err, expected);
        fail();
    }
}

static const char *gpu_header =
    "name,full_name,arch,memory_gib,hbm_gbs,fp32_tflops,tf32_tflops,bf16_tflops,fp16_tflops,fp8_tflops,"
    "nvlink_gbs_per_dir,pcie_gen,pcie_lanes,tdp_w,list_price_usd,cloud_usd_per_gpu_hour,gemm_efficiency,"
    "membound_efficiency,node,source\n";

static void malformed_gpus_csv(void **state)
{
    (void)state;
    char node[128];
    snprintf(node, sizeof node, "%s", hwdb_find_gpu(&db, "h100-sxm")->node);
    char good[512], text[2048];
    snprintf(good, sizeof good,
             "g1,Good,Hopper,80,3350,66.9,494.7,989.4,989.4,1978.9,450,5,16,700,30000,2.5,0.7,0.85,%s,datasheet\n", node);
    snprintf(text, sizeof text, "%s%sg2,Bad,Hopper,80,fast,66.9,494.7,989.4,989.4,0,450,5,16,700,1,1,0.7,0.85,%s,x\n",
             gpu_header, good, node);
    expect_gpus_csv_error(text, "3:hbm_gbs");
    snprintf(text, sizeof text, "%s%sg2,Bad,Hopper,80,3350,66.9\n", gpu_header, good);
    expect_gpus_csv_error(text, "3: expected 20 fields");
    snprintf(text, sizeof text, "%sg2,Bad,Hopper,-80,3350,66.9,494.7,989.4,989.4,0,450,5,16,700,1,1,0.7,0.85,%s,x\n",
             gpu_header, node);
    expect_gpus_csv_error(text, "2:memory_gib");
    snprintf(text, sizeof text, "%sg2,Bad,Hopper,80,3350,66.9,494.7,989.4,989.4,0,450,5,16,700,1,1,0.7,0.85,nowhere,x\n",
             gpu_header);
    expect_gpus_csv_error(text, " GPU 'g2' names node 'nowhere'");
    snprintf(text, sizeof text, "%sg2,Bad,Hopper,80,3350,66.9,494.7,989.4,989.4,0,450,5,16,700,1,1,0.7,0.85,%s,\n",
             gpu_header, node);
    expect_gpus_csv_error(text, "2:source");
    snprintf(text, sizeof text, "%s%s%s", gpu_header, good, good);
    expect_gpus_csv_error(text, "3:name");
    expect_gpus_csv_error("", "1: empty file");
    snprintf(text, sizeof text, "%s%sg2,\"Bad,Hopper,80\n", gpu_header, good);
    expect_gpus_csv_error(text, "3:");
}

/* A (gpu, key) given twice in one overlay is refused naming both lines: the
 * second row used to win silently (issue 26: gemm_efficiency 0.9 then gave
 * MFU 87.9%).  The GPU name matches without case, as everywhere. */
static void duplicate_overlay_keys_are_refused(void **state)
{
    (void)state;
    hwdb copy;
    char err[512], path[] = "/tmp/sextant-overlay-XXXXXX";
    assert_int_equal(hwdb_load(SEXTANT_ROOT "/hwdb", &copy, err, sizeof err), 0);
    write_temp(path, "gpu,key,value,source\n"
                     "h100-sxm,gemm_efficiency,0.6,x\n"
                     "h200,gemm_efficiency,0.6,x\n"
                     "h100-sxm,gemm_us:8192x2304x768,150,x\n"
                     "H100-SXM,gemm_efficiency,0.9,y\n");
    double before = hwdb_find_gpu(&copy, "h100-sxm")->gemm_efficiency;
    assert_int_equal(hwdb_apply_overlay(&copy, path, err, sizeof err), -1);
    assert_non_null(strstr(err, ":5:key: 'gemm_efficiency'"));
    assert_non_null(strstr(err, "first at line 2"));
    assert_close(hwdb_find_gpu(&copy, "h100-sxm")->gemm_efficiency, before, 0); /* nothing applied */
    unlink(path);
    char shapes[] = "/tmp/sextant-overlay-XXXXXX";
    write_temp(shapes, "gpu,key,value,source\n"
                       "h100-sxm,gemm_us:8192x2304x768,150,x\n"
                       "# a comment line\n"
                       "h100-sxm,gemm_us:8192x2304x768,151,x\n");
    assert_int_equal(hwdb_apply_overlay(&copy, shapes, err, sizeof err), -1);
    assert_non_null(strstr(err, ":4:key:"));
    assert_non_null(strstr(err, "first at line 2"));
    /* the GPUs an overlay names, each once, for estimate and plan's note */
    char names[256];
    assert_int_equal(hwdb_overlay_gpus(path, names, sizeof names, err, sizeof err), -1); /* removed above */
    char gpus[] = "/tmp/sextant-overlay-XXXXXX";
    write_temp(gpus, "gpu,key,value,source\nh100-sxm,gemm_efficiency,0.6,x\nh200,hbm_gbs,4000,x\nH100-SXM,hbm_gbs,3000,x\n");
    assert_int_equal(hwdb_overlay_gpus(gpus, names, sizeof names, err, sizeof err), 2);
    assert_string_equal(names, "h100-sxm, h200");
    unlink(gpus);
    unlink(shapes);
    hwdb_free(&copy);
}

/* A CSV file of `field_bytes` bytes in one quoted field (over `lines` lines), behind a valid overlay row */
static void write_long_field_csv(char *path, size_t field_bytes, int lines)
{
    int fd = mkstemp(path);
    assert_true(fd >= 0);
    FILE *f = fdopen(fd, "w");
    fputs("gpu,key,value,source\nh100-sxm,gemm_efficiency,0.6,\"", f);
    size_t per_line = field_bytes / (size_t)lines;
    for (int l = 0; l < lines; l++) {
        for (size_t i = 0; i + 1 < per_line; i++) fputc('a', f);
        fputc(l + 1 < lines ? '\n' : '"', f);
    }
    fputs("\n", f);
    fclose(f);
}

/* Fields are read in time linear in their length and refused past
 * CSV_FIELD_MAX with file:line (issue 26: a 2 MB field took 12.8 s under
 * ASan, quadratic in libcsv's 128-byte growth).  The test must finish; make
 * bench times it. */
static void long_csv_fields_are_linear_or_refused(void **state)
{
    (void)state;
    hwdb copy;
    char err[512];
    assert_int_equal(hwdb_load(SEXTANT_ROOT "/hwdb", &copy, err, sizeof err), 0);
    char big[] = "/tmp/sextant-field-XXXXXX";
    write_long_field_csv(big, 4u << 20, 1); /* 4 MiB on one line */
    assert_int_equal(hwdb_apply_overlay(&copy, big, err, sizeof err), -1);
    assert_non_null(strstr(err, ":2: a line longer than"));
    unlink(big);
    char many[] = "/tmp/sextant-field-XXXXXX";
    write_long_field_csv(many, 4u << 20, 4096); /* 4 MiB in 1 KiB lines: one quoted field */
    assert_int_equal(hwdb_apply_overlay(&copy, many, err, sizeof err), -1);
    assert_non_null(strstr(err, ":2: a field longer than"));
    unlink(many);
    /* just under the limit: read whole (the source is only kept as text) */
    char under[] = "/tmp/sextant-field-XXXXXX";
    write_long_field_csv(under, CSV_FIELD_MAX - 4096, 1);
    csv_table t;
    assert_int_equal(csv_table_read(under, &t, err, sizeof err), 0);
    assert_int_equal(t.nrows, 1);
    assert_true(strlen(csv_table_cell(&t, 0, "source")) > (size_t)CSV_FIELD_MAX - 8192);
    csv_table_free(&t);
    unlink(under);
    /* a directory is named as one, not as an empty file */
    char dir[] = "/tmp/sextant-csvdir-XXXXXX";
    assert_non_null(mkdtemp(dir));
    assert_int_equal(hwdb_apply_overlay(&copy, dir, err, sizeof err), -1);
    assert_non_null(strstr(err, "is a directory"));
    rmdir(dir);
    hwdb_free(&copy);
}

static void missing_directory(void **state)
{
    (void)state;
    hwdb d;
    char err[512];
    assert_int_equal(hwdb_load("/nonexistent-sextant", &d, err, sizeof err), -1);
    assert_non_null(strstr(err, "/nonexistent-sextant/gpus.csv"));
}

static void precision_names(void **state)
{
    (void)state;
    precision_t p;
    assert_int_equal(precision_parse("BF16", &p), 0);
    assert_int_equal(p, PREC_BF16);
    assert_int_equal(precision_parse("fp4", &p), -1);
    assert_string_equal(precision_name(PREC_FP8), "fp8");
}

/* The overlays shipped in hwdb/measured/ load over the database, every row
 * has a source, and the H100's carries a power model. */
static void measured_overlays_load(void **state)
{
    (void)state;
    hwdb hw;
    char err[512];
    assert_int_equal(hwdb_load(SEXTANT_ROOT "/hwdb", &hw, err, sizeof err), 0);
    if (hwdb_apply_overlay(&hw, SEXTANT_ROOT "/hwdb/measured/h100-sxm.csv", err, sizeof err) != 0) {
        print_error("%s\n", err);
        fail();
    }
    const hw_gpu *g = hwdb_find_gpu(&hw, "h100-sxm");
    assert_true(g->clock_max_hz == 1980e6 && g->power_cap_w == 700.0);
    assert_true(g->power_static_w > 100.0 && g->power_static_w < 200.0);
    assert_true(g->clock_energy_exponent > 0.1 && g->clock_energy_exponent < 3.0);
    /* the GEMMs' measured clock time (docs/model.md, "GEMM time against the clock") */
    assert_true(g->clock_time_factor > 1.0 && g->clock_time_factor < 1.2);
    assert_true(g->clock_time_exponent > 0.2 && g->clock_time_exponent < 1.0);
    assert_true(g->gemm_times > 100 && g->attention_times[0] > 0 && g->attention_times[1] > 0);
    assert_non_null(strstr(g->calibration, "sextant"));
    hwdb_free(&hw);
}

/* The overlay estimate, explain, plan and validate take when --calibration is not given: the shipped file for the
 * named GPU where there is one, none for a GPU never calibrated, and no path cut short by the buffer. */
static void measured_overlay_path_is_the_shipped_file(void **state)
{
    (void)state;
    char path[4096], tiny[16];
    assert_int_equal(hwdb_measured_overlay_path(SEXTANT_ROOT "/hwdb", "h100-sxm", path, sizeof path), 1);
    assert_string_equal(path, SEXTANT_ROOT "/hwdb/measured/h100-sxm.csv");
    assert_int_equal(hwdb_measured_overlay_path(SEXTANT_ROOT "/hwdb", "h200", path, sizeof path), 1);
    assert_int_equal(hwdb_measured_overlay_path(SEXTANT_ROOT "/hwdb", "a100-sxm4-80gb", path, sizeof path), 0);
    assert_int_equal(hwdb_measured_overlay_path(SEXTANT_ROOT "/hwdb", "h100-sxm", tiny, sizeof tiny), 0);
    assert_int_equal(hwdb_measured_overlay_path("/nonexistent", "h100-sxm", path, sizeof path), 0);
}

/* calibrate and validate warn when --gpu names another GPU than the one CUDA sees: names and memory
 * as CUDA reports them (an H100 SXM said "NVIDIA H100 80GB HBM3" with 79.2 GiB on the lent machines;
 * an H200 "NVIDIA H200" with 139.8 GiB). */
static void device_names_match_their_rows(void **state)
{
    (void)state;
    const double gib = 1073741824.0;
    const struct {
        const char *row, *device;
        double gib;
        int match;
        const char *why;
    } cases[] = {
        {"h100-sxm", "NVIDIA H100 80GB HBM3", 79.2, 1, NULL},
        {"h200", "NVIDIA H200", 139.8, 1, NULL},
        {"h200", "NVIDIA H100 80GB HBM3", 79.2, 0, "is not a H100"},
        {"h100-pcie", "NVIDIA H100 80GB HBM3", 79.2, 0, "PCIe card"},
        {"h100-pcie", "NVIDIA H100 PCIe", 79.2, 1, NULL},
        {"h100-sxm", "NVIDIA H100 PCIe", 79.2, 0, "PCIe card"},
        {"a100-sxm4-80gb", "NVIDIA A100-SXM4-80GB", 79.1, 1, NULL},
        {"a100-sxm4-40gb", "NVIDIA A100-SXM4-80GB", 79.1, 0, "has 40 GiB, this GPU 79.1 GiB"},
        {"a100-sxm4-40gb", "NVIDIA A100-SXM4-40GB", 39.4, 1, NULL},
        {"rtx4090", "NVIDIA GeForce RTX 4090", 23.6, 1, NULL},
        {"l40s", "NVIDIA GeForce RTX 4090", 23.6, 0, "is not a 4090"},
        {"h100-sxm", "NVIDIA H100 80GB HBM3", 0.0, 1, NULL}, /* memory unknown: not held against it */
    };
    for (size_t i = 0; i < sizeof cases / sizeof cases[0]; i++) {
        const hw_gpu *g = hwdb_find_gpu(&db, cases[i].row);
        assert_non_null(g);
        char why[256] = "";
        int match = hwdb_gpu_matches_device(g, cases[i].device, cases[i].gib * gib, why, sizeof why);
        if (match != cases[i].match) print_error("%s on %s: %d (%s)\n", cases[i].row, cases[i].device, match, why);
        assert_int_equal(match, cases[i].match);
        if (cases[i].why) assert_non_null(strstr(why, cases[i].why));
    }
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(every_required_gpu_has_a_sourced_row),
        cmocka_unit_test(datasheet_figures),
        cmocka_unit_test(node_networks),
        cmocka_unit_test(calibration_overlay_replaces_figures),
        cmocka_unit_test(measured_overlays_load),
        cmocka_unit_test(measured_overlay_path_is_the_shipped_file),
        cmocka_unit_test(attention_efficiency_overlay),
        cmocka_unit_test(power_model_overlay),
        cmocka_unit_test(comm_overlay_replaces_node_link),
        cmocka_unit_test(comm_fits_per_number_of_ranks),
        cmocka_unit_test(overlap_slowdown_overlay),
        cmocka_unit_test(malformed_gpus_csv),
        cmocka_unit_test(missing_directory),
        cmocka_unit_test(duplicate_overlay_keys_are_refused),
        cmocka_unit_test(long_csv_fields_are_linear_or_refused),
        cmocka_unit_test(precision_names),
        cmocka_unit_test(device_names_match_their_rows),
    };
    return cmocka_run_group_tests_name("hwdb", tests, load_db, free_db);
}
