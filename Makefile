# lmq — one Makefile for the whole pipeline. Sources are found by folder: every .c under a
# stage folder goes into liblmq.a, tools/*.c into the lmq command, each tests/test_*.c is a
# Check suite of its own.

BUILD   ?= build
CC      ?= cc
OPT     ?= -O2
PKGS    := libzstd libxxhash yaml-0.1 jansson
# -fPIC: the same objects make liblmq.a and liblmq.so (make install).
# Hidden visibility: liblmq.so exports include/lmq.h's calls (LMQ_API) and nothing else.
CFLAGS  += -std=c11 $(OPT) -g -fPIC -fvisibility=hidden -Wall -Wextra -Werror -pthread -I. \
           -D_POSIX_C_SOURCE=200809L -D_DEFAULT_SOURCE -ffp-contract=off
LDLIBS  += -lzstd -lxxhash -lyaml -ljansson -lm -pthread
CHECK_LIBS := $(shell pkg-config --libs check 2>/dev/null || echo -lcheck -lsubunit -lrt -lm)

ifeq ($(SAN),1)
CFLAGS  += -fsanitize=address,undefined -fno-omit-frame-pointer -fno-sanitize-recover=undefined
LDFLAGS += -fsanitize=address,undefined
# Programs link the sanitizer runtimes statically: each start then costs 55 ms, not 78 (no
# relocation of libasan.so; make check-asan starts thousands), and export their entry points,
# which the CUDA plugin's instrumented objects (CUDA_C_OBJ) call when lmq opens it.
EXE_LDFLAGS := -static-libasan -static-libubsan \
  $(foreach p,__asan_ __ubsan_ __lsan_ __sanitizer_,-Wl,--export-dynamic-symbol='$(p)*')
# The kernel sets' tiles keep their accumulators in arrays of vectors, which ASan's stack redzones
# hold in memory: the sanitizer build's verify ran 3.7 times slower for it. Without stack checks
# there, the memory the kernels read and write (weights, activations, outputs) is still checked.
$(BUILD)/runtime/kernels_%.o: CFLAGS += --param=asan-stack=0
endif
# The library as libFuzzer targets link it (clang): coverage feedback plus ASan+UBSan.
ifeq ($(SAN),fuzz)
CFLAGS  += -fsanitize=fuzzer-no-link,address,undefined -fno-omit-frame-pointer -fno-sanitize-recover=undefined
endif

# The floors of the house, from the bottom (docs/ARCHITECTURE.md): a folder may use the ones below
# its own, never one above it or beside it (folders sharing a floor are joined by commas). The
# library is the stages' objects; make deps-graph checks every include and call against this.
FLOORS  := common formats schemes,tokenizer convert,runtime quantize calibrate,verify audit,export api
comma   := ,
STAGES  := $(subst $(comma), ,$(FLOORS))
LIB_SRC := $(foreach d,$(STAGES),$(wildcard $(d)/*.c))
LIB_OBJ := $(LIB_SRC:%.c=$(BUILD)/%.o)
TOOL_SRC := $(wildcard tools/*.c)
TOOL_OBJ := $(TOOL_SRC:%.c=$(BUILD)/%.o)
TEST_SRC := $(wildcard tests/test_*.c)
TEST_BIN := $(TEST_SRC:tests/%.c=$(BUILD)/tests/%)
# Golden-table suites score whole texts for many artefacts: numbers, not memory safety, so they
# run in the optimised build only (the code they drive is under the sanitizers in test_*).
GOLDEN_SRC := $(wildcard tests/golden_*.c)
GOLDEN_BIN := $(if $(filter 1,$(SAN)),,$(GOLDEN_SRC:tests/%.c=$(BUILD)/tests/%))
TEST_SUPPORT := $(filter-out $(TEST_SRC) $(GOLDEN_SRC),$(wildcard tests/*.c))

# CUDA: the plugin $(BUILD)/liblmq_cuda.so (runtime/cuda/cuda.h), built when nvcc is on the PATH
# or in the toolkit's standard place and cuBLAS is in the folders nvcc links and includes from
# (nvcc names them, also when it is a wrapper elsewhere); skipped otherwise, with a message.
# Nothing else links CUDA: lmq opens the plugin only when a command asks for the cuda device.
NVCC ?= $(realpath $(firstword $(shell command -v nvcc 2>/dev/null) $(wildcard /usr/local/cuda/bin/nvcc)))
CUDA_SRC := $(wildcard runtime/cuda/*.cu)
ifneq ($(NVCC),)
CUDA_LIBDIR := $(shell $(NVCC) --dryrun -x cu -c /dev/null -o cuda-probe.o 2>&1 | \
                 sed -n 's/.*LIBRARIES=.*"-L\([^"]*\)"[[:space:]]*$$/\1/p')
endif
CUDA_FOUND := $(wildcard $(CUDA_LIBDIR)/libcublas.so $(CUDA_LIBDIR)/../include/cublas_v2.h)
ifneq ($(and $(NVCC),$(CUDA_SRC),$(word 2,$(CUDA_FOUND))),)
# nvcc's objects do not depend on SAN or OPT: the sanitizer build links the optimised build's
# (CUDA_OBJ_DIR, make check-asan), rather than spending another minute compiling linear.cu.
CUDA_OBJ_DIR ?= $(BUILD)
CUDA_OBJ    := $(CUDA_SRC:%.cu=$(CUDA_OBJ_DIR)/%.o)
CUDA_PLUGIN := $(BUILD)/liblmq_cuda.so
# The C objects the plugin calls (errors, the encoding table, the forward pass), linked into it as well.
CUDA_C_OBJ  := $(BUILD)/common/err.o $(BUILD)/formats/encoding.o $(BUILD)/runtime/pass.o
$(BUILD)/runtime/backend.o: CFLAGS += -DLMQ_CUDA_PLUGIN='"$(abspath $(CUDA_PLUGIN))"'
endif
# Ampere and Hopper code, plus Hopper PTX that newer devices compile when they load it.
CUDA_ARCH ?= -gencode arch=compute_80,code=sm_80 -gencode arch=compute_90,code=[sm_90,compute_90]
# The CUDA suite exists only where the backend is built (it says "skipped" without a device).
ifeq ($(CUDA_PLUGIN),)
TEST_SRC := $(filter-out tests/test_cuda.c,$(TEST_SRC))
TEST_BIN := $(TEST_SRC:tests/%.c=$(BUILD)/tests/%)
endif

.PHONY: all deps check check-start check-quick check-asan check-golden bench compare demo expected clean cuda-status fuzz fuzz-smoke fuzz-build install deps-graph
all: cuda-status $(BUILD)/lmq lmq $(CUDA_PLUGIN)

cuda-status:
ifeq ($(NVCC),)
	@echo "lmq: nvcc not found (PATH or /usr/local/cuda): building the CPU runtime only"
else ifeq ($(CUDA_PLUGIN),)
	@echo "lmq: nvcc at $(NVCC), but cuBLAS (libcublas.so, cublas_v2.h) not in $(or $(CUDA_LIBDIR),the folder it links from) and ../include: building the CPU runtime only"
else
	@echo "lmq: CUDA backend $(CUDA_PLUGIN) (nvcc $(NVCC), cuBLAS in $(CUDA_LIBDIR))"
endif

lmq: $(BUILD)/lmq
	@ln -sf $(BUILD)/lmq lmq

# Rebuilt from scratch: an object whose source was moved or renamed must not linger in it.
$(BUILD)/liblmq.a: $(LIB_OBJ)
	@mkdir -p $(dir $@)
	@rm -f $@
	$(AR) rcs $@ $^

$(BUILD)/lmq: $(TOOL_OBJ) $(BUILD)/liblmq.a
	$(CC) $(LDFLAGS) $(EXE_LDFLAGS) -o $@ $(TOOL_OBJ) $(BUILD)/liblmq.a $(LDLIBS)

# The library to link (include/lmq.h, README "Use as a library"): the shared object from the
# same objects as the archive; the man page from the command's own --help texts; lmq.pc with
# the dependencies for static links (Requires.private / Libs.private).
PREFIX  ?= /usr/local
VERSION := $(shell sed -n 's/.*LMQ_TOOL_VERSION "lmq \(.*\)".*/\1/p' formats/manifest.h)

$(BUILD)/liblmq.so: $(LIB_OBJ)
	$(CC) $(LDFLAGS) -shared -Wl,-soname,liblmq.so -o $@ $^ $(LDLIBS)

$(BUILD)/lmq.1: $(BUILD)/lmq tools/gen_man.sh
	bash tools/gen_man.sh $(BUILD)/lmq $(VERSION) > $@.tmp && mv $@.tmp $@

install: $(BUILD)/lmq $(BUILD)/liblmq.a $(BUILD)/liblmq.so $(BUILD)/lmq.1 $(CUDA_PLUGIN)
	install -d $(DESTDIR)$(PREFIX)/bin $(DESTDIR)$(PREFIX)/include $(DESTDIR)$(PREFIX)/lib/pkgconfig \
	  $(DESTDIR)$(PREFIX)/share/man/man1
	install -m 755 $(BUILD)/lmq $(DESTDIR)$(PREFIX)/bin/lmq
	install -m 644 $(BUILD)/liblmq.a $(DESTDIR)$(PREFIX)/lib/liblmq.a
	install -m 755 $(BUILD)/liblmq.so $(DESTDIR)$(PREFIX)/lib/liblmq.so
	install -m 644 include/lmq.h $(DESTDIR)$(PREFIX)/include/lmq.h
	install -m 644 $(BUILD)/lmq.1 $(DESTDIR)$(PREFIX)/share/man/man1/lmq.1
	$(if $(CUDA_PLUGIN),install -D -m 755 $(CUDA_PLUGIN) $(DESTDIR)$(PREFIX)/lib/lmq/liblmq_cuda.so)
	sed -e 's|@PREFIX@|$(PREFIX)|' -e 's|@VERSION@|$(VERSION)|' -e 's|@REQUIRES@|$(PKGS)|' \
	  -e 's|@LIBS@|$(filter-out -lzstd -lxxhash -lyaml -ljansson,$(LDLIBS))|' lmq.pc.in \
	  > $(DESTDIR)$(PREFIX)/lib/pkgconfig/lmq.pc

$(BUILD)/%.o: %.c
	@mkdir -p $(dir $@)
	$(CC) $(CFLAGS) -MMD -MP -c $< -o $@

$(CUDA_OBJ_DIR)/%.o: %.cu
	@mkdir -p $(dir $@)
	$(NVCC) -O2 -std=c++17 $(CUDA_ARCH) -I. -Xcompiler -fPIC,-Wall,-Wextra,-Werror -MMD -MP -c $< -o $@

ifneq ($(CUDA_PLUGIN),)
$(BUILD)/tests/test_cuda $(BUILD)/bench/bench_cuda: $(CUDA_PLUGIN)
# The CUDA runtime linked statically (nvcc's default), cuBLAS found where it was at build time.
$(CUDA_PLUGIN): $(CUDA_OBJ) $(CUDA_C_OBJ) runtime/cuda/exports.map
	$(NVCC) -shared -o $@ $(CUDA_OBJ) $(CUDA_C_OBJ) -lcublas -Xlinker -rpath,$(CUDA_LIBDIR) \
	  -Xlinker --version-script=runtime/cuda/exports.map
endif

$(BUILD)/tests/%: tests/%.c $(TEST_SUPPORT) $(BUILD)/liblmq.a
	@mkdir -p $(dir $@)
	$(CC) $(CFLAGS) $(LDFLAGS) $(EXE_LDFLAGS) -o $@ $< $(TEST_SUPPORT) $(BUILD)/liblmq.a $(CHECK_LIBS) $(LDLIBS)

# make check: every unit suite (tests/test_*, tests/golden_*) and every end-to-end script
# (tests/integration/*.sh, which drive the lmq command) is a target of its own,
# $(RESULTS)/<suite>.log, so that make -j2 check runs two at a time. Each writes the suite's output
# to that log and prints one line, PASS or SKIP (exit 77: nothing to run here, as test_cuda without
# a device) with its wall and CPU seconds; a failing suite prints its log (tests/suite.sh). They
# run on every make check: a stamp would let a pass stand after a change to what the suite reads
# (fixtures, recipes, the demo model), which make does not see.
# Without the fixtures folder (a clone on its own) the tests that need it are skipped and listed
# in $(SKIP_LOG) (tests/testutil.h); under CI=true they fail instead.
RESULTS  := $(BUILD)/results
SKIP_LOG := $(BUILD)/skipped.log
UNIT_SUITES   := $(notdir $(TEST_BIN) $(GOLDEN_BIN))
SCRIPT_SUITES := $(notdir $(wildcard tests/integration/*.sh))
# The longest suites first (CPU seconds measured on 2 cores, plain and sanitizer builds): make -j2
# starts prerequisites in order, so the long ones overlap each other and the short ones fill in
# after, rather than one long suite left running alone at the end. The rest in name order.
CHECK_FIRST := golden_schemes golden_calibrate export_ct.sh ci_story.sh target_bpw.sh test_metrics test_linear \
  test_runtime outliers.sh hostile.sh shard.sh kv_cache.sh test_compressed_tensors test_gguf test_convert
SUITES := $(foreach s,$(CHECK_FIRST),$(filter $(s),$(UNIT_SUITES) $(SCRIPT_SUITES))) \
  $(filter-out $(CHECK_FIRST),$(UNIT_SUITES) $(SCRIPT_SUITES))
# Check's time limits per test (tcase_set_timeout; 4 s where a suite sets none) are there to stop
# a hang, not to time the code: multiplied here so that a loaded machine does not fail a test for
# time. 4 in the optimised build (two suites at once beside another build: a process may get a
# quarter of a core); the sanitizer build (ASan+UBSan) runs the suites up to N times slower.
CK_TIMEOUT_MULTIPLIER ?= $(if $(filter 1,$(SAN)),20,4)
# Test cases tagged whole-text (tcase_set_tags: test_metrics' golden case) score whole texts against
# the golden numbers: numbers, not memory safety, so the sanitizer build leaves them out, as it
# leaves out golden_*.
CK_EXCLUDE_TAGS ?= $(if $(filter 1,$(SAN)),whole-text)
# The suites' python3 is the interpreter itself where the one on PATH is a version manager's shim
# (pyenv's: 0.3 s a start against 0.09; export_ct.sh alone starts it 39 times). Found once.
PYTHON_DIR = $(eval PYTHON_DIR := $(shell d=$$(python3 -c 'import os, sys; print(os.path.dirname(sys.executable))' \
  2>/dev/null) && [ "$$d" != "$$(dirname "$$(command -v python3)")" ] && echo "$$d"))$(PYTHON_DIR)
# One thread a suite where it asks for none (LMQ_THREADS): make -j2 runs two suites on two cores, and
# a second thread each only spun against the other suite (make check: 600 -> 556 s of CPU, 5m16
# -> 5m07 of wall time). The suites that test thread counts ask for theirs.
SUITE_ENV = LMQ_THREADS=1 LMQ_SKIP_LOG=$(SKIP_LOG) CK_TIMEOUT_MULTIPLIER=$(CK_TIMEOUT_MULTIPLIER) CK_EXCLUDE_TAGS=$(CK_EXCLUDE_TAGS) \
  $(if $(PYTHON_DIR),PATH="$(PYTHON_DIR):$$PATH")

# The skip list starts empty on every make check, before any suite runs (each depends on this).
check-start:
	@mkdir -p $(RESULTS)
	@rm -f $(SKIP_LOG)

# Every program a suite runs is built before any suite starts (order-only: SUITE_BINS): make -j
# starts the suites that are ready as it meets them, so a long suite whose program was still
# linking would otherwise be passed over and run last, alone. The CUDA plugin too: test_runtime and
# test_cuda load it.
SUITE_BINS := $(BUILD)/lmq $(TEST_BIN) $(GOLDEN_BIN) $(CUDA_PLUGIN)
$(UNIT_SUITES:%=$(RESULTS)/%.log): $(RESULTS)/%.log: $(BUILD)/tests/% check-start | $(SUITE_BINS)
	@$(SUITE_ENV) bash tests/suite.sh $* $@ $<

$(SCRIPT_SUITES:%=$(RESULTS)/%.log): $(RESULTS)/%.log: tests/integration/% $(BUILD)/lmq check-start | $(SUITE_BINS)
	@$(SUITE_ENV) LMQ=$(BUILD)/lmq LMQ_SAN=$(SAN) LMQ_OPT="$(OPT)" bash tests/suite.sh $* $@ bash $<

passed = @n=$$(cat $(SKIP_LOG) 2>/dev/null | wc -l); echo "lmq: $(1) passed$$([ $$n = 0 ] || \
	  echo ", $$n skipped: no fixtures folder (list in $(SKIP_LOG))")"

# The floors (make deps-graph) are checked with the suites: an edge up or sideways fails make check.
$(RESULTS)/deps-graph.log: $(BUILD)/lmq check-start
	@bash tests/suite.sh deps-graph $@ bash tools/deps-graph.sh $(BUILD) $(FLOORS) tools,interop

check: $(SUITES:%=$(RESULTS)/%.log) $(RESULTS)/deps-graph.log
	$(call passed,all checks)

# Before every commit (README "Two commands"): the unit suites (tests/test_*) in the optimised
# build, without the whole-text cases; under 2 minutes on 2 cores with -j2. make check runs the
# rest: the golden tables, the whole texts, the end-to-end scripts and the sanitizer build.
check-quick: CK_EXCLUDE_TAGS = whole-text
check-quick: $(patsubst %,$(RESULTS)/%.log,$(filter test_%,$(SUITES)))
	$(call passed,quick checks)

# At -O2, as the optimised build: its suites ran a quarter faster than at -O1 (test_linear, test_runtime).
check-asan: $(CUDA_OBJ)
	$(MAKE) BUILD=build-asan SAN=1 OPT=-O2 CUDA_OBJ_DIR=$(BUILD) check

# Which folder includes and calls which, and every edge that points up or sideways (the command
# and the tools above the library form the top floor).
deps-graph: $(BUILD)/lmq
	bash tools/deps-graph.sh $(BUILD) $(FLOORS) tools,interop

# Every row of every golden table (make check runs a subset of sotu-gpt2's: tests/golden_schemes.c).
check-golden: $(BUILD)/lmq $(GOLDEN_SRC:tests/%.c=$(BUILD)/tests/%)
	@set -e; for t in $(GOLDEN_SRC:tests/%.c=$(BUILD)/tests/%); do echo "== $$t"; LMQ_GOLDEN=all $$t; done

# Fuzzing (clang + libFuzzer, never part of check; tests/fuzz/README.md): each
# tests/fuzz/fuzz_<name>.c is one target, built in build-fuzz/fuzz/. fuzz-smoke replays the committed seeds only; fuzz mutates
# for FUZZ_TIME seconds per target, keeping what it finds in build-fuzz/corpus/<name>.
FUZZ_CC      ?= clang
FUZZ_TIME    ?= 180
FUZZ_OPTS    ?= -rss_limit_mb=2048 -timeout=10
FUZZ_TARGETS := $(patsubst tests/fuzz/fuzz_%.c,%,$(wildcard tests/fuzz/fuzz_*.c))

$(BUILD)/fuzz/fuzz_%: tests/fuzz/fuzz_%.c tests/fuzz/fuzz_util.h $(BUILD)/liblmq.a
	@mkdir -p $(dir $@)
	$(CC) $(CFLAGS) -fsanitize=fuzzer -o $@ $< $(BUILD)/liblmq.a $(LDLIBS)

# Writes the seed corpora (tests/fuzz/corpus/) from fixtures and synthetic models.
$(BUILD)/fuzz/make_seeds: tests/fuzz/make_seeds.c $(BUILD)/liblmq.a
	@mkdir -p $(dir $@)
	$(CC) $(CFLAGS) $(LDFLAGS) -o $@ $< $(BUILD)/liblmq.a $(LDLIBS)

fuzz-build:
	$(MAKE) BUILD=build-fuzz SAN=fuzz CC=$(FUZZ_CC) OPT=-O1 $(FUZZ_TARGETS:%=build-fuzz/fuzz/fuzz_%)

# Each target's output goes to build-fuzz/fuzz_<name>.log; a crash stops the loop and shows it.
fuzz_run = build-fuzz/fuzz/fuzz_$$t $(FUZZ_OPTS) -artifact_prefix=build-fuzz/fuzz_$$t- $(1) \
	  > build-fuzz/fuzz_$$t.log 2>&1 || { tail -40 build-fuzz/fuzz_$$t.log; exit 1; }; \
	  grep -E '^\#[0-9]+' build-fuzz/fuzz_$$t.log | tail -1

fuzz-smoke: fuzz-build
	@set -e; for t in $(FUZZ_TARGETS); do echo "== fuzz_$$t: seeds only"; \
	  $(call fuzz_run,-runs=0 tests/fuzz/corpus/$$t); done

fuzz: fuzz-build
	@set -e; for t in $(FUZZ_TARGETS); do echo "== fuzz_$$t: $(FUZZ_TIME) s"; mkdir -p build-fuzz/corpus/$$t; \
	  $(call fuzz_run,-max_total_time=$(FUZZ_TIME) build-fuzz/corpus/$$t tests/fuzz/corpus/$$t); done

# Speed and memory (never part of check): tests/bench/bench.sh drives lmq at real shapes and runs each
# tests/bench/*.c, a program against liblmq.a; with LLAMA_CPP=DIR (a llama.cpp build made by hand
# outside the repository) tests/bench/llamacpp.sh then runs both runtimes on the same GGUF files.
$(BUILD)/bench/%: tests/bench/%.c $(BUILD)/liblmq.a
	@mkdir -p $(dir $@)
	$(CC) $(CFLAGS) $(LDFLAGS) -o $@ $< $(BUILD)/liblmq.a $(LDLIBS)

bench: $(BUILD)/lmq $(BUILD)/bench/bench_runtime $(BUILD)/bench/bench_linear
	LMQ=$(BUILD)/lmq BUILD=$(BUILD) bash tests/bench/bench.sh
	@if [ -z "$(LLAMA_CPP)" ]; then echo "make bench: llama.cpp side by side skipped: no LLAMA_CPP=DIR (a llama.cpp build; tools/llamacpp-check.sh says how)"; \
	else LMQ=$(BUILD)/lmq bash tests/bench/llamacpp.sh $(LLAMA_CPP); fi

# Debian packages the build and its tests need, and the one-node Slurm cluster that
# tests/integration/slurm.sh brings up (its daemons alone: without the recommended extras); a
# no-op when they are installed.
DEB_PKGS   := build-essential pkg-config libzstd-dev libyaml-dev libxxhash-dev libjansson-dev check man-db jq
SLURM_PKGS := munge slurmctld slurmd slurm-client
SUDO       := $(if $(filter 0,$(shell id -u)),,sudo)
missing     = $$(for p in $(1); do dpkg -s $$p >/dev/null 2>&1 || echo $$p; done)
deps:
	@build="$(call missing,$(DEB_PKGS))"; slurm="$(call missing,$(SLURM_PKGS))"; \
	if [ -n "$$build$$slurm" ]; then \
	  echo "installing:" $$build $$slurm; \
	  $(SUDO) apt-get update -q && \
	  { [ -z "$$build" ] || $(SUDO) apt-get install -y -q $$build; } && \
	  { [ -z "$$slurm" ] || $(SUDO) env DEBIAN_FRONTEND=noninteractive apt-get install -y -q --no-install-recommends $$slurm; }; \
	else echo "lmq: build dependencies present"; fi

# lmq's GGUF files against llama-quantize --imatrix's, both scored by llama-perplexity --kl-divergence
# (tools/compare.sh); LLAMA_CPP names a llama.cpp build made by hand outside the repository.
compare: $(BUILD)/lmq
	@if [ -z "$(LLAMA_CPP)" ]; then echo "make compare: skipped: no LLAMA_CPP=DIR (a llama.cpp build; tools/llamacpp-check.sh says how)"; \
	else LMQ=$(BUILD)/lmq bash tools/compare.sh $(LLAMA_CPP) out/compare; fi

# The README's main job: convert → every shipped recipe → verify, on the demo model.
demo: $(BUILD)/lmq
	LMQ=$(BUILD)/lmq bash tools/demo.sh

# The demo artefacts' expected manifests (manifests/expected/<artefact>.yaml), rewritten from a fresh
# build of them; tests/integration/ci_story.sh audits a fresh build against them (lmq audit --expect).
expected: $(BUILD)/lmq
	rm -rf out/expected
	OUT=out/expected DEMO_STEPS=artefacts LMQ=$(BUILD)/lmq bash tools/demo.sh
	rm -f manifests/expected/*.yaml && mkdir -p manifests/expected
	@set -e; for a in out/expected/*.lmq; do $(BUILD)/lmq manifest $$a >manifests/expected/$$(basename $$a .lmq).yaml; done
	@echo "expected: $$(ls manifests/expected/*.yaml | wc -l) manifests in manifests/expected"

clean:
	rm -rf build build-asan lmq out

-include $(LIB_OBJ:.o=.d) $(TOOL_OBJ:.o=.d) $(CUDA_OBJ:.o=.d)
