/* The shipped hardware database and model zoo as a cmocka group fixture:
 * `cmocka_run_group_tests(tests, setup_shipped, teardown_shipped)` loads
 * hwdb/ (with its priors) and models/zoo.csv once into `db` and `zoo`;
 * setup_datasheets loads only the datasheets' rows, for tests of one
 * mechanism that must not move when a prior does. */
#ifndef SEXTANT_TEST_SHIPPED_H
#define SEXTANT_TEST_SHIPPED_H

#include "test_util.h"

#include "planner.h"

static hwdb db;
static model_zoo zoo;

static inline int load_shipped(int datasheets_only)
{
    char err[512];
    int rc = datasheets_only ? hwdb_load_datasheets(SEXTANT_ROOT "/hwdb", &db, err, sizeof err)
                             : hwdb_load(SEXTANT_ROOT "/hwdb", &db, err, sizeof err);
    if (rc != 0 || model_zoo_load(SEXTANT_ROOT "/models/zoo.csv", &zoo, err, sizeof err) != 0) {
        fprintf(stderr, "%s\n", err);
        return -1;
    }
    return 0;
}

static inline int setup_shipped(void **state) { (void)state; return load_shipped(0); }
static inline int setup_datasheets(void **state) { (void)state; return load_shipped(1); }

static inline int teardown_shipped(void **state)
{
    (void)state;
    hwdb_free(&db);
    model_zoo_free(&zoo);
    return 0;
}

#endif
