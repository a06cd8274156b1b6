# sextant: analytical planner (C11, no CUDA) + GPU validator (CUDA C, when nvcc exists).
#
#   make              build/sextant (and the GPU parts when nvcc is found)
#   make demo         build, then estimate the built-in default run
#   make test         CPU test suite (cmocka); SANITIZE=1 for ASan + UBSan
#   make bench        estimate throughput benchmark
#   make gpu-test     GPU tests; skips cleanly without a GPU
#   make install      PREFIX=/usr/local DESTDIR=

CC      ?= cc
PREFIX  ?= /usr/local
DATADIR  = $(PREFIX)/share/sextant
NVCC    ?= $(shell command -v nvcc 2>/dev/null || ls /usr/local/cuda/bin/nvcc 2>/dev/null)

ifeq ($(SANITIZE),1)
BUILD    = build-san
OPT      = -O1 -g -fno-omit-frame-pointer -fsanitize=address,undefined -fno-sanitize-recover=undefined
LDSAN    = -fsanitize=address,undefined
else
BUILD    = build
OPT      = -O2 -g
LDSAN    =
endif

CFLAGS  ?=
CFLAGS  += -std=c11 -D_GNU_SOURCE $(OPT) -Wall -Wextra -Wshadow -Wformat=2 -Wstrict-prototypes \
           -Wmissing-prototypes -Werror=implicit-function-declaration \
           -Ihwdb -Imodels -Iplanner -DSEXTANT_DATADIR='"$(DATADIR)"'
LDLIBS   = -lcsv -lcjson -lm

CORE_SRC = hwdb/csv_table.c hwdb/hwdb.c models/models.c models/hf_config.c \
           planner/formulas.c planner/oplist.c planner/estimate.c planner/report.c planner/explain.c \
           planner/plan.c planner/plan_report.c
CORE_OBJ = $(CORE_SRC:%.c=$(BUILD)/obj/%.o)
TESTS    = test_formulas test_models test_hwdb test_estimate test_cli
TEST_BIN = $(TESTS:%=$(BUILD)/tests/%)

.PHONY: all demo test bench gpu gpu-test install clean

all: $(BUILD)/sextant gpu

$(BUILD)/obj/%.o: %.c $(wildcard */*.h)
	@mkdir -p $(dir $@)
	$(CC) $(CFLAGS) -c $< -o $@

$(BUILD)/libsextant.a: $(CORE_OBJ)
	ar rcs $@ $^

$(BUILD)/sextant: $(BUILD)/obj/planner/cli.o $(BUILD)/libsextant.a
	$(CC) $(LDSAN) -o $@ $^ $(LDLIBS)

# The GPU half (kernels/, validator/) needs nvcc; the planner never does.
gpu:
ifeq ($(NVCC),)
	@echo "kernels/ and validator/: nvcc not found, skipping the GPU parts (the planner is complete without them)"
else
	@if ls kernels/*.cu >/dev/null 2>&1; then $(MAKE) -s -f kernels/gpu.mk NVCC=$(NVCC) BUILD=$(BUILD); \
	 else echo "kernels/ and validator/: no GPU sources yet, nothing to build with $(NVCC)"; fi
endif

demo: $(BUILD)/sextant
	$(BUILD)/sextant estimate

$(BUILD)/tests/%: tests/%.c tests/test_util.h $(BUILD)/libsextant.a
	@mkdir -p $(dir $@)
	$(CC) $(CFLAGS) -Itests -DSEXTANT_ROOT='"$(CURDIR)"' -DSEXTANT_BIN='"$(CURDIR)/$(BUILD)/sextant"' \
	    -o $@ $< $(BUILD)/libsextant.a $(LDSAN) $(LDLIBS) -lcmocka

test: $(BUILD)/sextant $(TEST_BIN)
	@failed=0; for t in $(TEST_BIN); do echo "== $$t"; $$t || failed=1; done; \
	if [ $$failed -ne 0 ]; then echo "make test: FAILED"; exit 1; fi; echo "make test: all suites passed"

$(BUILD)/bench_estimate: tests/bench_estimate.c $(BUILD)/libsextant.a
	$(CC) $(CFLAGS) -DSEXTANT_ROOT='"$(CURDIR)"' -o $@ $^ $(LDLIBS)

bench: $(BUILD)/bench_estimate
	$(BUILD)/bench_estimate

gpu-test:
	@if ! command -v nvidia-smi >/dev/null 2>&1 || ! nvidia-smi -L >/dev/null 2>&1; then \
	    echo "gpu-test: no GPU found, skipping"; exit 0; fi; \
	 if ! ls kernels/*.cu >/dev/null 2>&1; then echo "gpu-test: no GPU tests yet (kernels/ is empty), skipping"; exit 0; fi; \
	 $(MAKE) -f kernels/gpu.mk NVCC=$(NVCC) BUILD=$(BUILD) gpu-test

install: $(BUILD)/sextant
	install -d $(DESTDIR)$(PREFIX)/bin $(DESTDIR)$(DATADIR)/hwdb $(DESTDIR)$(DATADIR)/models \
	    $(DESTDIR)$(PREFIX)/share/man/man1
	install -m 755 $(BUILD)/sextant $(DESTDIR)$(PREFIX)/bin/sextant
	install -m 644 hwdb/*.csv $(DESTDIR)$(DATADIR)/hwdb/
	install -m 644 models/*.csv $(DESTDIR)$(DATADIR)/models/
	install -m 644 docs/sextant.1 $(DESTDIR)$(PREFIX)/share/man/man1/sextant.1

clean:
	rm -rf build build-san
