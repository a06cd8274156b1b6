/* Fuzz target: the Hugging Face config.json importer.  A config it accepts is
 * counted and estimated on one H100, as --model-config would be. */
#include "fuzz_util.h"

static hwdb db;

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
    char err[1024];
    if (!db.gpus && hwdb_load(SEXTANT_ROOT "/hwdb", &db, err, sizeof err) != 0) abort();
    model_t m;
    if (model_from_hf_config(fuzz_file(data, size, ".json"), &m, err, sizeof err) != 0) return 0;
    model_params_total(&m);
    model_params_active(&m);
    const hw_gpu *h100 = hwdb_find_gpu(&db, "h100-sxm");
    fuzz_estimate_small(&m, h100, hwdb_find_node(&db, h100->node));
    return 0;
}
