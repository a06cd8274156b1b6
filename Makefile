# sextant: analytical planner (C11, no CUDA) + GPU validator (CUDA C, when nvcc exists).
#
#   make              build/sextant (and the GPU parts when nvcc is found)
#   make demo         build, then estimate the built-in default run
#   make test         CPU test suite (cmocka); SANITIZE=1 for ASan + UBSan
#   make bench        estimate throughput benchmark
#   make gpu-test     GPU tests; skips cleanly without a GPU
#   make dev          the kernels' experiments, dev/cuda/ (needs nvcc; not part of `make test`)
#   make install      PREFIX=/usr/local DESTDIR=
#   make fuzz         libFuzzer targets (clang), FUZZ_SECONDS each (default 900); fails on any crash

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
CFLAGS  += -std=c11 -D_GNU_SOURCE $(OPT) -Wall -Wextra -Wshadow -Wformat=2 -Wstrict-prototypes -Werror=float-conversion \
           -Wmissing-prototypes -Werror=implicit-function-declaration \
           -Ihwdb -Imodels -Iplanner -DSEXTANT_DATADIR='"$(DATADIR)"'
LDLIBS   = -lcsv -lcjson -lm

CORE_SRC = hwdb/csv_table.c hwdb/hwdb.c models/models.c models/hf_config.c \
           planner/formulas.c planner/oplist.c planner/op_cost.c planner/estimate.c planner/report.c planner/explain.c \
           planner/plan.c planner/plan_report.c planner/published_row.c planner/published.c planner/uncertainty.c planner/fit_power.c planner/fit_gemm.c \
           planner/outfile.c planner/gnuplot.c planner/data_root.c planner/layout_flags.c
CORE_OBJ = $(CORE_SRC:%.c=$(BUILD)/obj/%.o)
TESTS    = test_formulas test_models test_hwdb test_estimate test_estimate_power test_plan test_cp test_cli test_cli_published \
           test_cli_calibration test_model_ref test_plot test_schedule test_overlap test_docs test_zero test_moe test_plan_file \
           test_fp8 test_fit_gemm test_cp_ring test_loss_trend test_moe_route
TEST_BIN = $(TESTS:%=$(BUILD)/tests/%)

.PHONY: all demo test bench gpu gpu-test dev install clean published fuzz fuzz-build

all: $(BUILD)/sextant gpu

$(BUILD)/obj/%.o: %.c $(wildcard */*.h)
	@mkdir -p $(dir $@)
	$(CC) $(CFLAGS) -c $< -o $@

$(BUILD)/libsextant.a: $(CORE_OBJ)
	ar rcs $@ $^

$(BUILD)/sextant: $(BUILD)/obj/planner/cli.o $(BUILD)/libsextant.a
	$(CC) $(LDSAN) -o $@ $^ $(LDLIBS)

# The GPU half (kernels/, validator/) needs nvcc; the planner never does.
gpu: $(BUILD)/libsextant.a
ifeq ($(NVCC),)
	@echo "kernels/ and validator/: nvcc not found, skipping the GPU parts (the planner is complete without them)"
else
	@$(MAKE) -s -f kernels/gpu.mk NVCC=$(NVCC) BUILD=$(BUILD)
	@$(MAKE) -s $(BUILD)/sextant-gpu NVCC=$(NVCC)
endif

# The kernels' experiments (dev/cuda/README.md): built on request only.
dev:
ifeq ($(NVCC),)
	@echo "dev: nvcc not found, nothing to build (dev/cuda/ needs CUDA)"
else
	@$(MAKE) -s -f dev/cuda/Makefile NVCC=$(NVCC) BUILD=$(BUILD)
endif

CUDA_HOME ?= $(patsubst %/bin/nvcc,%,$(NVCC))
# NCCL: with the CUDA toolkit by default; NCCL_HOME=/opt/nccl for a separate install.
# -isystem: nccl.h has old-style declarations that -Wstrict-prototypes would flag.
NCCL_HOME ?= $(CUDA_HOME)
NCCL_INC   = -isystem $(NCCL_HOME)/include
NCCL_LIB   = -L$(NCCL_HOME)/lib64 -L$(NCCL_HOME)/lib -lnccl
VALIDATOR_SRC = validator/validator.c validator/command_util.c validator/bench.c validator/calibrate.c validator/calibrate_issue.c validator/calibrate_optimizer.c validator/calibrate_power.c \
                validator/calibrate_step_fit.c validator/ops.c validator/slice.c validator/plan_file.c validator/train.c validator/train_check.c validator/step_layout.c \
                validator/step_profile.c validator/linear.c validator/step_model.c validator/step_comm.c validator/step_pass.c \
                validator/step_schedule.c validator/step_report.c validator/gradient_check.c validator/gpu_context.c validator/gpu_timing.c validator/comm.c validator/launch.c validator/model_ref.c validator/plot.c validator/schedule.c validator/power.c \
                validator/overlap.c validator/overlap_report.c validator/zero.c validator/zero_plan.c \
                validator/cp.c validator/cp_ring.c validator/loss_trend.c validator/fp8.c validator/fp8_calibrate.c validator/moe.c validator/moe_plan.c
# The validator: C with the CUDA runtime, cuBLAS, NCCL, our kernels and the planner's own op list.
# MPI is never linked: launch.c loads libmpi with dlopen (-ldl) when mpirun or srun started the ranks.
$(BUILD)/sextant-gpu: $(VALIDATOR_SRC) validator/model_ref.h validator/plot.h validator/schedule.h validator/train.h validator/comm.h validator/launch.h validator/power.h validator/overlap.h validator/zero.h validator/zero_plan.h validator/schedule.h validator/cp.h validator/cp_ring.h validator/gpu_check.h validator/gpu_context.h validator/gpu_timing.h validator/bench.h validator/calibrate_power.h validator/calibrate_optimizer.h validator/commands.h validator/step.h validator/loss_trend.h validator/fp8.h validator/fp8_calibrate.h validator/moe.h validator/moe_plan.h $(BUILD)/libsextant.a $(BUILD)/libkernels.a kernels/kernels.h kernels/reference.h
	$(CC) $(CFLAGS) -Ikernels -Ivalidator -I$(CUDA_HOME)/include $(NCCL_INC) -o $@ $(VALIDATOR_SRC) $(BUILD)/libsextant.a \
	    $(BUILD)/libkernels.a -L$(CUDA_HOME)/lib64 $(NCCL_LIB) -lcublasLt -lcublas -lcudart -lgsl -lgslcblas -ldl -lpthread -lstdc++ $(LDSAN) $(LDLIBS)

# The launcher's process handling and calibrate --comm's flag errors, on the CPU
# (no GPU needed, but CUDA and NCCL must be there to build): part of `make test` when nvcc is found.
$(BUILD)/tests/test_launch: tests/test_launch.c validator/launch.c validator/launch.h validator/power.c validator/power.h \
                           tests/test_util.h $(BUILD)/sextant
	@mkdir -p $(dir $@)
	$(CC) $(CFLAGS) -Itests -Ivalidator -I$(CUDA_HOME)/include $(NCCL_INC) -DSEXTANT_ROOT='"$(CURDIR)"' \
	    -DSEXTANT_BIN='"$(CURDIR)/$(BUILD)/sextant"' -DSEXTANT_GPU_BIN='"$(CURDIR)/$(BUILD)/sextant-gpu"' \
	    -o $@ tests/test_launch.c validator/launch.c validator/power.c -L$(CUDA_HOME)/lib64 $(NCCL_LIB) -lcudart -ldl \
	    -lpthread $(LDSAN) -lcmocka

# The built-in default run: LLaMA-2 70B for 2T tokens on 1024 H100s, one layout estimated, then every layout searched.
DEMO_RUN = llama2-70b --gpu h100-sxm --gpus 1024 --tokens 2T
demo: $(BUILD)/sextant
	$(BUILD)/sextant estimate $(DEMO_RUN) --tp 8 --pp 4 --mbs 1 --gbs 1024 --seq 4096 --recompute selective --sp --zero 1
	$(BUILD)/sextant plan $(DEMO_RUN)

$(BUILD)/tests/%: tests/%.c tests/test_util.h tests/test_shipped.h $(BUILD)/libsextant.a
	@mkdir -p $(dir $@)
	$(CC) $(CFLAGS) -Itests -DSEXTANT_ROOT='"$(CURDIR)"' -DSEXTANT_BIN='"$(CURDIR)/$(BUILD)/sextant"' \
	    -o $@ $< $(BUILD)/libsextant.a $(LDSAN) $(LDLIBS) -lcmocka

# The estimate's two suites share their helpers through one header (built by the rule above).
$(BUILD)/tests/test_estimate $(BUILD)/tests/test_estimate_power: tests/test_estimate_util.h

# The float64 model reference (the oracle for the GPU trainer's gradients) and
# the kernels' float64 references it is cross-checked against: plain C with
# libm, no CUDA, so this suite runs wherever the planner's do.
MODEL_REF_OBJ = $(BUILD)/obj/validator/model_ref.o $(BUILD)/obj/kernels/reference.o
$(BUILD)/tests/test_model_ref: tests/test_model_ref.c tests/test_util.h $(MODEL_REF_OBJ)
	@mkdir -p $(dir $@)
	$(CC) $(CFLAGS) -Itests -Ivalidator -Ikernels -o $@ $< $(MODEL_REF_OBJ) $(LDSAN) -lm -lcmocka

# The pipeline schedule the training step runs: plain C, no CUDA.
# and the planner's count of what it holds (formulas.c: plain C, libm).
$(BUILD)/tests/test_schedule: tests/test_schedule.c tests/test_util.h validator/schedule.c validator/schedule.h planner/formulas.c
	@mkdir -p $(dir $@)
	$(CC) $(CFLAGS) -Itests -Ivalidator -Iplanner -Ihwdb -Imodels -o $@ tests/test_schedule.c validator/schedule.c \
		planner/formulas.c $(LDSAN) -lm -lcmocka

# ZeRO-2/3's shards, buffers and order of gathers: plain C, no CUDA; the buffers against
# the planner's count of what ZeRO-3 holds (formulas.c).
$(BUILD)/tests/test_zero: tests/test_zero.c tests/test_util.h validator/zero_plan.c validator/zero_plan.h validator/schedule.c validator/schedule.h planner/formulas.c
	@mkdir -p $(dir $@)
	$(CC) $(CFLAGS) -Itests -Ivalidator -Iplanner -Ihwdb -Imodels -o $@ tests/test_zero.c validator/zero_plan.c validator/schedule.c \
		planner/formulas.c $(LDSAN) -lm -lcmocka

# Context parallelism's ring (chunks, blocks, the float64 merge) against whole causal attention
# (kernels/reference.c): plain C, no CUDA.
CP_RING_OBJ = $(BUILD)/obj/validator/cp_ring.o $(BUILD)/obj/kernels/reference.o
$(BUILD)/tests/test_cp_ring: tests/test_cp_ring.c tests/test_util.h validator/cp_ring.h $(CP_RING_OBJ)
	@mkdir -p $(dir $@)
	$(CC) $(CFLAGS) -Itests -Ivalidator -Ikernels -o $@ $< $(CP_RING_OBJ) $(LDSAN) -lm -lcmocka

# Whether a run learns, from its losses' trend: plain C and GSL's t quantile, no CUDA.
$(BUILD)/tests/test_loss_trend: tests/test_loss_trend.c tests/test_util.h validator/loss_trend.c validator/loss_trend.h
	@mkdir -p $(dir $@)
	$(CC) $(CFLAGS) -Itests -Ivalidator -o $@ tests/test_loss_trend.c validator/loss_trend.c $(LDSAN) -lm -lcmocka

# A MoE layer's routing, permutation, exchange plan and their backward: plain C, no CUDA.
$(BUILD)/tests/test_moe_route: tests/test_moe_route.c tests/test_util.h validator/moe_plan.c validator/moe_plan.h
	@mkdir -p $(dir $@)
	$(CC) $(CFLAGS) -Itests -Ivalidator -o $@ tests/test_moe_route.c validator/moe_plan.c $(LDSAN) -lm -lcmocka

# calibrate --comm's overlap summary, CSV and overlay rows: plain C, no CUDA;
# the overlay rows are loaded back through the hwdb.
$(BUILD)/tests/test_overlap: tests/test_overlap.c tests/test_util.h validator/overlap_report.c validator/overlap.h $(BUILD)/libsextant.a
	@mkdir -p $(dir $@)
	$(CC) $(CFLAGS) -Itests -Ivalidator -DSEXTANT_ROOT='"$(CURDIR)"' -o $@ tests/test_overlap.c validator/overlap_report.c \
	    $(BUILD)/libsextant.a $(LDSAN) $(LDLIBS) -lcmocka

# validate --plan's reader: plain C and cJSON, no CUDA.
$(BUILD)/tests/test_plan_file: tests/test_plan_file.c tests/test_util.h validator/plan_file.c validator/plan_file.h $(BUILD)/libsextant.a $(BUILD)/sextant
	@mkdir -p $(dir $@)
	$(CC) $(CFLAGS) -Itests -Ivalidator -DSEXTANT_ROOT='"$(CURDIR)"' -DSEXTANT_BIN='"$(CURDIR)/$(BUILD)/sextant"' \
	    -o $@ tests/test_plan_file.c validator/plan_file.c $(BUILD)/libsextant.a $(LDSAN) $(LDLIBS) -lcmocka

# The validator's per-op plot: plain C calling gnuplot (planner/gnuplot.c), no CUDA.
$(BUILD)/tests/test_plot: tests/test_plot.c tests/test_util.h validator/plot.c validator/plot.h $(BUILD)/libsextant.a
	@mkdir -p $(dir $@)
	$(CC) $(CFLAGS) -Itests -Ivalidator -o $@ tests/test_plot.c validator/plot.c $(BUILD)/libsextant.a $(LDSAN) $(LDLIBS) -lcmocka

# zero.c's streams and events against mocked CUDA and NCCL calls: their headers, not their libraries.
$(BUILD)/tests/test_zero_streams: tests/test_zero_streams.c tests/test_util.h validator/zero.c validator/zero.h validator/gpu_check.h validator/zero_plan.c validator/zero_plan.h validator/schedule.c
	@mkdir -p $(dir $@)
	$(CC) $(CFLAGS) -Itests -Ivalidator -Ikernels -I$(CUDA_HOME)/include $(NCCL_INC) -o $@ tests/test_zero_streams.c validator/zero.c \
	    validator/zero_plan.c validator/schedule.c $(LDSAN) -lm -lcmocka

ifneq ($(NVCC),)
TEST_BIN += $(BUILD)/tests/test_launch $(BUILD)/tests/test_zero_streams
test: gpu
endif

test: $(BUILD)/sextant $(TEST_BIN)
	@failed=0; for t in $(TEST_BIN); do echo "== $$t"; $$t || failed=1; done; \
	if [ $$failed -ne 0 ]; then echo "make test: FAILED"; exit 1; fi; echo "make test: all suites passed"

$(BUILD)/bench_estimate: tests/bench_estimate.c $(BUILD)/libsextant.a
	$(CC) $(CFLAGS) -DSEXTANT_ROOT='"$(CURDIR)"' -o $@ $^ $(LDLIBS)

bench: $(BUILD)/bench_estimate
	$(BUILD)/bench_estimate

# Every published run against its estimate (and, for the project's own list, its plan), kept as
# docs/validation/published.md; test_cli_published fails when the committed copy is stale.
published: $(BUILD)/sextant
	docs/validation/published.sh $(BUILD) > docs/validation/published.md.tmp && mv docs/validation/published.md.tmp docs/validation/published.md
	$(BUILD)/sextant published --runs data/published/runs.csv --bands-out hwdb/uncertainty.csv
	@tail -n 20 docs/validation/published.md

gpu-test:
	@if ! command -v nvidia-smi >/dev/null 2>&1 || ! nvidia-smi -L >/dev/null 2>&1; then \
	    echo "gpu-test: no GPU found, skipping"; exit 0; fi; \
	 if ! ls kernels/*.cu >/dev/null 2>&1; then echo "gpu-test: no GPU sources, skipping"; exit 0; fi; \
	 $(MAKE) -f kernels/gpu.mk NVCC=$(NVCC) BUILD=$(BUILD) gpu-test && \
	 $(MAKE) -s $(BUILD)/sextant-gpu NVCC=$(NVCC) && $(BUILD)/sextant-gpu check-gradients && \
	 $(MAKE) -s $(BUILD)/sextant && tests/gpu/calibrate_check.sh $(BUILD) && \
	 tests/gpu/parallel_equivalence.sh $(BUILD)/sextant-gpu && tests/gpu/fp8_loss.sh $(BUILD)/sextant-gpu

install: $(BUILD)/sextant
	install -d $(DESTDIR)$(PREFIX)/bin $(DESTDIR)$(DATADIR)/hwdb/measured $(DESTDIR)$(DATADIR)/models \
	    $(DESTDIR)$(PREFIX)/share/man/man1
	install -m 755 $(BUILD)/sextant $(DESTDIR)$(PREFIX)/bin/sextant
	install -m 644 hwdb/*.csv $(DESTDIR)$(DATADIR)/hwdb/
	install -m 644 hwdb/measured/*.csv $(DESTDIR)$(DATADIR)/hwdb/measured/
	install -m 644 models/*.csv $(DESTDIR)$(DATADIR)/models/
	install -m 644 docs/sextant.1 $(DESTDIR)$(PREFIX)/share/man/man1/sextant.1

# Fuzzing (fuzz/, docs/guide.md "Fuzzing"): each target feeds libFuzzer's bytes to the library's own readers,
# built with clang under ASan + UBSan; FUZZ_SECONDS per target, started from fuzz/corpus/<target>/, the
# corpus grown under build-fuzz/corpus/, a crash's input under build-fuzz/artifacts/.  CI runs 60 s each.
FUZZ_CC      ?= clang
FUZZ_BUILD    = build-fuzz
FUZZ_SECONDS ?= 900
FUZZ_TARGETS ?= overlay zoo hf_config published cli plan
FUZZ_CFLAGS   = -std=c11 -D_GNU_SOURCE -O1 -g -fno-omit-frame-pointer -fsanitize=address,undefined \
                -fno-sanitize-recover=undefined -Wall -Wextra -Wshadow -Wstrict-prototypes -Wmissing-prototypes \
                -Ihwdb -Imodels -Iplanner -Ivalidator -DSEXTANT_DATADIR='"$(DATADIR)"' -DSEXTANT_ROOT='"$(CURDIR)"'
FUZZ_OBJ      = $(CORE_SRC:%.c=$(FUZZ_BUILD)/obj/%.o)
FUZZ_BIN      = $(FUZZ_TARGETS:%=$(FUZZ_BUILD)/fuzz_%)

$(FUZZ_BUILD)/obj/%.o: %.c $(wildcard */*.h)
	@mkdir -p $(dir $@)
	$(FUZZ_CC) $(FUZZ_CFLAGS) -fsanitize=fuzzer-no-link -c $< -o $@

# fuzz_cli compiles planner/cli.c in (its main renamed): hence cli.c among every target's inputs
$(FUZZ_BUILD)/fuzz_%: fuzz/fuzz_%.c fuzz/fuzz_util.h planner/cli.c validator/plan_file.c $(FUZZ_OBJ)
	$(FUZZ_CC) $(FUZZ_CFLAGS) -fsanitize=fuzzer -o $@ $< $(FUZZ_OBJ) $(LDLIBS)

# kept between runs, not deleted as intermediate files of the pattern rule above
.SECONDARY: $(FUZZ_OBJ)

fuzz-build: $(FUZZ_BIN)

fuzz: fuzz-build
	fuzz/run.sh $(FUZZ_BUILD) $(FUZZ_SECONDS) $(FUZZ_TARGETS)

clean:
	rm -rf build build-san build-fuzz
