# lmq — one Makefile for the whole pipeline. Sources are found by folder: every .c under a
# stage folder goes into liblmq.a, tools/*.c into the lmq command, each tests/test_*.c is a
# Check suite of its own.

BUILD   ?= build
CC      ?= cc
OPT     ?= -O2
PKGS    := libzstd libxxhash yaml-0.1 jansson
# -fPIC: the same objects make liblmq.a and liblmq.so (make install).
CFLAGS  += -std=c11 $(OPT) -g -fPIC -Wall -Wextra -Werror -pthread -I. \
           -D_POSIX_C_SOURCE=200809L -D_DEFAULT_SOURCE -ffp-contract=off
LDLIBS  += -lzstd -lxxhash -lyaml -ljansson -lm -pthread
CHECK_LIBS := $(shell pkg-config --libs check 2>/dev/null || echo -lcheck -lsubunit -lrt -lm)

ifeq ($(SAN),1)
CFLAGS  += -fsanitize=address,undefined -fno-omit-frame-pointer -fno-sanitize-recover=undefined
LDFLAGS += -fsanitize=address,undefined
endif
# The library as libFuzzer targets link it (clang): coverage feedback plus ASan+UBSan.
ifeq ($(SAN),fuzz)
CFLAGS  += -fsanitize=fuzzer-no-link,address,undefined -fno-omit-frame-pointer -fno-sanitize-recover=undefined
endif

STAGES  := common formats schemes tokenizer convert calibrate quantize runtime verify audit export api
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
CUDA_OBJ    := $(CUDA_SRC:%.cu=$(BUILD)/%.o)
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

.PHONY: all deps check check-asan check-golden bench demo expected clean cuda-status fuzz fuzz-smoke fuzz-build install
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
	$(CC) $(LDFLAGS) -o $@ $(TOOL_OBJ) $(BUILD)/liblmq.a $(LDLIBS)

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

$(BUILD)/%.o: %.cu
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
	$(CC) $(CFLAGS) $(LDFLAGS) -o $@ $< $(TEST_SUPPORT) $(BUILD)/liblmq.a $(CHECK_LIBS) $(LDLIBS)

# Unit suites, then the end-to-end scripts (which drive the lmq command).
# Without the fixtures folder (a clone on its own) the tests that need it are skipped and listed
# in $(BUILD)/skipped.log (tests/testutil.h); under CI=true they fail instead.
check: export LMQ_SKIP_LOG = $(BUILD)/skipped.log
check: $(BUILD)/lmq $(CUDA_PLUGIN) $(TEST_BIN) $(GOLDEN_BIN)
	@rm -f $(LMQ_SKIP_LOG)
	@set -e; for t in $(TEST_BIN) $(GOLDEN_BIN); do echo "== $$t"; \
	  $$t || { rc=$$?; [ $$rc = 77 ] || exit $$rc; echo "== $$t: skipped (exit 77)"; }; done
	@set -e; for s in $(sort $(wildcard tests/integration/*.sh)); do echo "== $$s"; LMQ=$(BUILD)/lmq LMQ_SAN=$(SAN) bash $$s; done
	@n=$$(cat $(LMQ_SKIP_LOG) 2>/dev/null | wc -l); echo "lmq: all checks passed$$([ $$n = 0 ] || \
	  echo ", $$n skipped: no fixtures folder (list in $(LMQ_SKIP_LOG))")"

check-asan:
	$(MAKE) BUILD=build-asan SAN=1 OPT=-O1 check

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
# tests/bench/*.c, a program against liblmq.a.
$(BUILD)/bench/%: tests/bench/%.c $(BUILD)/liblmq.a
	@mkdir -p $(dir $@)
	$(CC) $(CFLAGS) $(LDFLAGS) -o $@ $< $(BUILD)/liblmq.a $(LDLIBS)

bench: $(BUILD)/lmq $(BUILD)/bench/bench_runtime $(BUILD)/bench/bench_linear
	LMQ=$(BUILD)/lmq BUILD=$(BUILD) bash tests/bench/bench.sh

# Debian packages the build needs; a no-op when they are installed.
DEB_PKGS := build-essential pkg-config libzstd-dev libyaml-dev libxxhash-dev libjansson-dev check man-db
deps:
	@missing=$$(for p in $(DEB_PKGS); do dpkg -s $$p >/dev/null 2>&1 || echo $$p; done); \
	if [ -n "$$missing" ]; then \
	  echo "installing:" $$missing; \
	  $(if $(filter 0,$(shell id -u)),,sudo) apt-get update -q && \
	  $(if $(filter 0,$(shell id -u)),,sudo) apt-get install -y -q $$missing; \
	else echo "lmq: build dependencies present"; fi

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
