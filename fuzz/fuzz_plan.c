/* Fuzz target: validate --plan's reader of a plan or estimate JSON (validator/plan_file.c, plain C and
 * cJSON, compiled in here).  A plan it accepts must hold a layout the planner can check. */
#include "fuzz_util.h"

#include "../validator/plan_file.c"

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
    plan_file p;
    if (read_plan(fuzz_file(data, size, ".json"), &p) != 0) return 0;
    /* what it read is bounded as the slice expects: positive degrees, a known ZeRO stage */
    if (p.layout.tp < 1 || p.layout.pp < 1 || p.layout.dp < 1 || p.layout.zero < 0 || p.layout.zero > 3) abort();
    return 0;
}
