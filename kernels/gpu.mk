# kernels/gpu.mk: the validator's CUDA kernels, their CPU references and GPU tests.
#
#   make -f kernels/gpu.mk NVCC=nvcc BUILD=build            libkernels.a, test_kernels, bench_kernels
#   make -f kernels/gpu.mk NVCC=nvcc BUILD=build gpu-test   CPU check of the references, then the GPU tests
#   make -f kernels/gpu.mk NVCC=nvcc BUILD=build gpu-bench  bandwidth benchmark (+ attention TFLOP/s; links cuBLAS)
#   make -f kernels/gpu.mk ... ref-test                      finite-difference check of the references (no GPU)
#
# GENCODE defaults to -arch=sm_90 (H100/H200); add A100 with
#   GENCODE="-gencode=arch=compute_90,code=sm_90 -gencode=arch=compute_80,code=sm_80".
# PTXAS_V=1 prints registers / spills per kernel.

NVCC      ?= nvcc
BUILD     ?= build
CC        ?= cc
GENCODE   ?= -arch=sm_90
NVCCFLAGS ?= -O3 -std=c++17 $(GENCODE) -Xcompiler -Wall -Ikernels
ifeq ($(PTXAS_V),1)
NVCCFLAGS += -Xptxas -v
endif
REFCFLAGS ?= -std=c11 -O2 -g -Wall -Wextra -Wshadow -Wstrict-prototypes -Wmissing-prototypes
LDCUDA    ?= -lcudart
LDBLAS    ?= -lcublas

KSRC  = kernels/embedding.cu kernels/embedding_grouped.cu kernels/norm.cu kernels/activation.cu kernels/softmax.cu kernels/attention.cu \
        kernels/rope.cu kernels/crossentropy.cu kernels/adamw.cu kernels/parallel.cu kernels/clock.cu \
        kernels/cp_attention.cu kernels/fp8.cu kernels/moe.cu
KOBJ  = $(KSRC:%.cu=$(BUILD)/gpu/obj/%.o)
KHDR  = kernels/kernels.h kernels/kernels_internal.h kernels/common.cuh kernels/norm_partial.cuh \
        kernels/crossentropy.cuh kernels/embedding_internal.cuh
REFO  = $(BUILD)/gpu/obj/kernels/reference.o
# context parallelism's ring blocks and positions (plain C): test_kernels runs the ring with them
CPRO  = $(BUILD)/gpu/obj/validator/cp_ring.o

LIB   = $(BUILD)/libkernels.a
TEST  = $(BUILD)/gpu/test_kernels
BENCH = $(BUILD)/gpu/bench_kernels
REFT  = $(BUILD)/gpu/test_reference
PROBE = $(BUILD)/gpu/launch_probe
FP8T  = $(BUILD)/gpu/test_fp8
MOET  = $(BUILD)/gpu/test_moe_kernels
MOEPO = $(BUILD)/gpu/obj/validator/moe_plan.o

.PHONY: all gpu-test gpu-bench ref-test clean-gpu

all: $(LIB) $(TEST) $(BENCH) $(REFT) $(PROBE) $(FP8T) $(MOET)

$(BUILD)/gpu/obj/kernels/%.o: kernels/%.cu $(KHDR)
	@mkdir -p $(dir $@)
	$(NVCC) $(NVCCFLAGS) -c $< -o $@

$(REFO): kernels/reference.c kernels/reference.h
	@mkdir -p $(dir $@)
	$(CC) $(REFCFLAGS) -c $< -o $@

$(CPRO): validator/cp_ring.c validator/cp_ring.h
	@mkdir -p $(dir $@)
	$(CC) $(REFCFLAGS) -c $< -o $@

$(LIB): $(KOBJ)
	ar rcs $@ $^

$(TEST): tests/gpu/test_kernels.cu tests/gpu/test_kernels_attention.cu tests/gpu/kernel_check.h tests/gpu/gpu_util.h \
         $(LIB) $(REFO) $(CPRO) $(KHDR) kernels/reference.h validator/cp_ring.h
	@mkdir -p $(dir $@)
	$(NVCC) $(NVCCFLAGS) -Ivalidator -Itests/gpu -o $@ tests/gpu/test_kernels.cu tests/gpu/test_kernels_attention.cu \
	    $(LIB) $(REFO) $(CPRO) $(LDCUDA) -lm

$(FP8T): tests/gpu/test_fp8.cu tests/gpu/gpu_util.h $(LIB) $(KHDR) kernels/reference.h
	@mkdir -p $(dir $@)
	$(NVCC) $(NVCCFLAGS) -o $@ $< $(LIB) $(LDCUDA) -lm

$(MOEPO): validator/moe_plan.c validator/moe_plan.h
	@mkdir -p $(dir $@)
	$(CC) $(REFCFLAGS) -c $< -o $@

# the MoE routing kernels against validator/moe_plan.c's float64 reference
$(MOET): tests/gpu/test_moe_kernels.cu tests/gpu/gpu_util.h $(LIB) $(MOEPO) $(KHDR)
	@mkdir -p $(dir $@)
	$(NVCC) $(NVCCFLAGS) -Ivalidator -o $@ $< $(LIB) $(MOEPO) $(LDCUDA) -lm

$(BENCH): tests/gpu/bench_kernels.cu tests/gpu/gpu_util.h $(LIB) $(KHDR)
	@mkdir -p $(dir $@)
	$(NVCC) $(NVCCFLAGS) -o $@ $< $(LIB) $(LDBLAS) $(LDCUDA) -lm

$(REFT): tests/gpu/test_reference.c $(REFO) kernels/reference.h
	@mkdir -p $(dir $@)
	$(CC) $(REFCFLAGS) -Ikernels -o $@ $< $(REFO) -lm

$(PROBE): tests/gpu/launch_probe.cu
	@mkdir -p $(dir $@)
	$(NVCC) $(NVCCFLAGS) -o $@ $< $(LDCUDA)

ref-test: $(REFT)
	$(REFT)

gpu-test: $(REFT) $(TEST) $(FP8T) $(MOET)
	$(REFT)
	$(TEST)
	$(FP8T)
	$(MOET)

gpu-bench: $(BENCH)
	$(BENCH)

clean-gpu:
	rm -rf $(BUILD)/gpu $(LIB)
