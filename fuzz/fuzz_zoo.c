/* Fuzz target: the model zoo.  The bytes are loaded as a zoo CSV (models/zoo.csv's
 * format); each model it yields is validated again, counted and, for the first
 * few, estimated on one H100. */
#include "fuzz_util.h"

static hwdb db;

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
    char err[1024];
    if (!db.gpus && hwdb_load(SEXTANT_ROOT "/hwdb", &db, err, sizeof err) != 0) abort();
    model_zoo zoo;
    if (model_zoo_load(fuzz_file(data, size, ".csv"), &zoo, err, sizeof err) != 0) return 0;
    const hw_gpu *h100 = hwdb_find_gpu(&db, "h100-sxm");
    for (int i = 0; i < zoo.count; i++) {
        const model_t *m = &zoo.models[i];
        if (model_validate(m, "fuzz", err, sizeof err) != 0) abort();  /* the loader let it through */
        model_params_total(m);
        model_params_active(m);
        model_zoo_find(&zoo, m->name);
        if (i < 4) fuzz_estimate_small(m, h100, hwdb_find_node(&db, h100->node));
    }
    model_zoo_free(&zoo);
    return 0;
}
