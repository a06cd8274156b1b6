/* What sextant-gpu's commands share (commands.h): flags, the databases, the device line. */
#include <cuda_runtime_api.h>
#include <limits.h>
#include <stdlib.h>
#include <stdio.h>
#include <string.h>

#include "commands.h"
#include "gpu_check.h"

const char *arg_value(int argc, char **argv, const char *flag, const char *fallback)
{
    for (int i = 1; i + 1 < argc; i++)
        if (!strcmp(argv[i], flag)) return argv[i + 1];
    return fallback;
}

/* Loads the hwdb (with the overlay `calibration` applied when not NULL; `plain`,
 * when not NULL, gets it without) and, when zoo is not NULL, the model zoo.
 * -1 after one stderr line. */
int load_data(hwdb *db, hwdb *plain, model_zoo *zoo, const char *calibration)
{
    char root[4096], path[4200], err[1024];
    find_data_root(root, sizeof root);
    snprintf(path, sizeof path, "%s/hwdb", root);
    if (hwdb_load(path, db, err, sizeof err) != 0 || (plain && hwdb_load(path, plain, err, sizeof err) != 0) ||
        (calibration && hwdb_apply_overlay(db, calibration, err, sizeof err) != 0)) {
        fprintf(stderr, "sextant-gpu: %s\n", err);
        return -1;
    }
    snprintf(path, sizeof path, "%s/models/zoo.csv", root);
    if (zoo && model_zoo_load(path, zoo, err, sizeof err) != 0) {
        fprintf(stderr, "sextant-gpu: %s\n", err);
        return -1;
    }
    return 0;
}

/* The first hwdb row that looks like the GPU at hand (hwdb_gpu_matches_device: the model in its name, its
 * memory, PCIe or not), NULL where none does or there is no GPU. */
static const char *device_gpu_row(const hwdb *db)
{
    struct cudaDeviceProp prop;
    int device;
    if (cudaGetDevice(&device) != cudaSuccess || cudaGetDeviceProperties(&prop, device) != cudaSuccess) return NULL;
    char why[256];
    for (int i = 0; i < db->ngpus; i++)
        if (hwdb_gpu_matches_device(&db->gpus[i], prop.name, (double)prop.totalGlobalMem, why, sizeof why))
            return db->gpus[i].name;
    return NULL;
}

const char *validate_gpu_name(int argc, char **argv, const hwdb *db, const char *plan_gpu)
{
    const char *named = arg_value(argc, argv, "--gpu", plan_gpu);
    if (named) return named;
    const char *here = device_gpu_row(db);
    return here ? here : "h100-sxm";
}

int apply_shipped_overlay(hwdb *db, const char *gpu_name, char *path, size_t len)
{
    char root[4096], dir[4200], err[1024];
    find_data_root(root, sizeof root);
    snprintf(dir, sizeof dir, "%s/hwdb", root);
    if (!hwdb_measured_overlay_path(dir, gpu_name, path, len)) return 0;
    /* named without the data root's "build/.." in the reports and gpu.calibration */
    char shown[PATH_MAX];
    if (realpath(path, shown) && strlen(shown) < len) snprintf(path, len, "%s", shown);
    if (hwdb_apply_overlay(db, path, err, sizeof err) != 0) {
        fprintf(stderr, "sextant-gpu: %s\n", err);
        return -1;
    }
    return 1;
}

/* One stderr line when --gpu names a row that does not look like the GPU at hand: the row's datasheet
 * figures stay in every prediction, and calibrate writes its efficiencies as fractions of them (an
 * H100 calibrated as h200 predicts itself well under that row and nothing else). */
void warn_if_other_gpu(const hw_gpu *g)
{
    struct cudaDeviceProp prop;
    int device;
    if (cudaGetDevice(&device) != cudaSuccess || cudaGetDeviceProperties(&prop, device) != cudaSuccess) return;
    char why[256];
    if (!hwdb_gpu_matches_device(g, prop.name, (double)prop.totalGlobalMem, why, sizeof why))
        fprintf(stderr, "sextant-gpu: warning: --gpu %s does not look like this GPU, %s (%s); predictions and overlays "
                        "use that row's datasheet figures\n", g->name, prop.name, why);
}

void device_line(char *out, size_t len)
{
    struct cudaDeviceProp prop;
    int driver = 0, runtime = 0;
    CUDA_CHECK(cudaGetDeviceProperties(&prop, 0));
    CUDA_CHECK(cudaDriverGetVersion(&driver));
    CUDA_CHECK(cudaRuntimeGetVersion(&runtime));
    snprintf(out, len, "%.100s, %d SMs, %.1f GiB, CUDA driver %d.%d, runtime %d.%d", prop.name, prop.multiProcessorCount,
             (double)prop.totalGlobalMem / 1073741824.0, driver / 1000, (driver % 1000) / 10, runtime / 1000,
             (runtime % 1000) / 10);
}
