# nvgkit - one non-recursive Makefile: build, check, install, bench, demo.
#
#   make                 every tool into bin/
#   make check           unit tests and tool tests through prove (TAP), the man
#                        pages linted, the fuzz targets' replays built
#   make SAN=1 check     the same, built with ASan+UBSan into build-san/
#   make install PREFIX=/usr/local DESTDIR=
#   make deps            install the Debian packages nvgkit needs (when missing)
#   make bench           benchmarks (tests/bench/bench-*.sh), not run by check
#   make demo            the main job: convert a real model end to end
#   make fuzz            libFuzzer targets for the format readers (FUZZ_TIME=s runs them)
#   V=1                  show full commands

VERSION   := 0.1.0
PREFIX    ?= /usr/local
DESTDIR   ?=
CC        ?= cc
CFLAGS    ?= -O2 -g
LDFLAGS   ?=
PROVE     ?= prove
PKG_CONFIG ?= pkg-config

# Debian packages (see DESIGN.md, "Dependencies"); pocl for the tests' OpenCL;
# Slurm and munge for the one-node cluster of tests/t0506-convert-slurm.sh
DEB_BUILD := libopenblas-dev liblapacke-dev ocl-icd-opencl-dev opencl-headers \
             libclblast-dev zlib1g-dev libcjson-dev pkg-config
DEB_TEST  := pocl-opencl-icd mandoc python3 python3-pip python3-venv perl \
             munge slurmctld slurmd slurm-client time procps
PKGS      := openblas lapacke libcjson zlib OpenCL clblast

ifeq ($(SAN),1)
BUILD     := build-san
BIN       := build-san/bin
SANFLAGS  := -fsanitize=address,undefined -fno-omit-frame-pointer -fno-sanitize-recover=undefined
# leaks that PoCL keeps for the life of a process are not ours (tests/lsan.supp)
SAN_ENV   := LSAN_OPTIONS='suppressions=$(CURDIR)/tests/lsan.supp:print_suppressions=0'
else
BUILD     := build
BIN       := bin
SANFLAGS  :=
SAN_ENV   :=
endif

# pkg-config is asked only when something is compiled (make deps must work without it)
NODEPS_GOALS := deps clean help
# nor when the flags are given on the command line (tests/bench/device.sh's private prefix)
ifneq ($(filter-out $(NODEPS_GOALS),$(or $(MAKECMDGOALS),all)),)
ifneq ($(origin PKG_CFLAGS),command line)
PKG_CFLAGS := $(shell $(PKG_CONFIG) --cflags $(PKGS))
endif
ifneq ($(origin PKG_LIBS),command line)
PKG_LIBS   := $(shell $(PKG_CONFIG) --libs $(PKGS))
endif
endif

ALL_CFLAGS := -std=c11 -D_GNU_SOURCE -DNVGKIT_VERSION='"$(VERSION)"' \
              -DNVGKIT_DATADIR='"$(PREFIX)/share/nvgkit"' \
              -Wall -Wextra -Wno-unused-parameter -Icommon -Icl -Itools \
              $(PKG_CFLAGS) $(CFLAGS) $(SANFLAGS) -pthread
ALL_LDFLAGS := $(LDFLAGS) $(SANFLAGS) -pthread
LIBS       := $(PKG_LIBS) -lm

LIB_SRC    := $(sort $(wildcard common/*.c) $(wildcard cl/*.c))
LIB_OBJ    := $(LIB_SRC:%.c=$(BUILD)/%.o)
LIB        := $(BUILD)/libnvgkit.a
TOOL_SRC   := $(sort $(wildcard tools/*.c))
TOOLS      := $(TOOL_SRC:tools/%.c=$(BIN)/%)
UNIT_SRC   := $(sort $(wildcard tests/unit/*.c))
UNITS      := $(UNIT_SRC:tests/unit/%.c=$(BUILD)/unit/%)
SHELL_TESTS := $(sort $(wildcard tests/t[0-9][0-9][0-9][0-9]-*.sh))
MAN1       := $(sort $(wildcard man/man1/*.1))
MAN5       := $(sort $(wildcard man/man5/*.5))
CL_KERNELS := $(sort $(wildcard cl/*.cl))

ifeq ($(V),1)
Q :=
quiet =
else
Q := @
quiet = @printf '  %-6s %s\n' $(1) $(2);
endif

.PHONY: all check unit-check tool-check man-check fuzz-check install deps bench bench-convert demo fuzz clean help
.DELETE_ON_ERROR:
.SECONDARY:

all: $(TOOLS)

$(BUILD)/%.o: %.c
	@mkdir -p $(dir $@)
	$(call quiet,CC,$<)$(CC) $(ALL_CFLAGS) -MMD -MP -c -o $@ $<

# the vectorized exponentials (vmath.h): libmvec's through OpenMP SIMD, in this file only
$(BUILD)/common/vmath.o: ALL_CFLAGS += -ffast-math -fopenmp-simd
# the encoder's element-wise loops (kern.h) and the dequantization's: vectorized
# by -O3, no sum reordered
$(BUILD)/common/kern.o $(BUILD)/common/blrdeq.o: ALL_CFLAGS += -O3

$(LIB): $(LIB_OBJ)
	$(call quiet,AR,$@)rm -f $@ && ar rcs $@ $^

$(BIN)/%: $(BUILD)/tools/%.o $(LIB)
	@mkdir -p $(dir $@)
	$(call quiet,LINK,$@)$(CC) $(ALL_LDFLAGS) -o $@ $< $(LIB) $(LIBS)

$(BUILD)/unit/%: $(BUILD)/tests/unit/%.o $(LIB)
	@mkdir -p $(dir $@)
	$(call quiet,LINK,$@)$(CC) $(ALL_LDFLAGS) -o $@ $< $(LIB) $(LIBS)

# the environment every test runs in: the tools under test, the real data,
# PoCL's kernel cache inside the build tree, and one OpenBLAS thread per test
# process unless the caller says otherwise (prove runs two at a time)
TEST_ENV := NVG_BIN='$(CURDIR)/$(BIN)' NVG_TOP='$(CURDIR)' \
            NVG_BUILD='$(CURDIR)/$(BUILD)' NVG_PY='$(CURDIR)/$(BUILD)/venv/bin/python3' \
            NVG_DATA="$${NVG_DATA:-$(CURDIR)/../shared/data}" \
            POCL_CACHE_DIR='$(CURDIR)/$(BUILD)/pocl-cache' \
            OPENBLAS_NUM_THREADS="$${OPENBLAS_NUM_THREADS:-1}" $(SAN_ENV)

check: unit-check tool-check man-check fuzz-check

# python packages some tests use as independent references (numpy, safetensors,
# the tokenizers library that reads tokenizer.json),
# in a virtual environment inside the build tree
PY_PKGS := numpy safetensors tokenizers==0.22.1 transformers==4.57.1
VENV    := $(BUILD)/venv
# the stamp holds the package list: a venv made for another list is brought up to date
ifneq ($(file <$(VENV)/.ok),$(PY_PKGS))
.PHONY: $(VENV)/.ok
endif
$(VENV)/.ok:
	$(call quiet,VENV,$(VENV))python3 -m venv $(VENV) && $(VENV)/bin/pip install -q $(PY_PKGS) && \
	  echo '$(PY_PKGS)' >$@

unit-check: $(UNITS)
	$(Q)$(TEST_ENV) $(PROVE) $(PROVE_FLAGS) --exec '' $(UNITS)

tool-check: $(TOOLS) $(UNITS) $(VENV)/.ok
	$(Q)$(TEST_ENV) $(PROVE) $(PROVE_FLAGS) -j2 --exec bash $(SHELL_TESTS)

man-check:
	$(Q)for f in $(MAN1) $(MAN5); do mandoc -Tlint -Wwarning $$f || exit 1; done

install: $(TOOLS)
	install -d '$(DESTDIR)$(PREFIX)/bin' '$(DESTDIR)$(PREFIX)/share/man/man1' \
	           '$(DESTDIR)$(PREFIX)/share/man/man5' '$(DESTDIR)$(PREFIX)/share/nvgkit/cl' \
	           '$(DESTDIR)$(PREFIX)/share/nvgkit/pipelines'
	install -m 755 $(TOOLS) '$(DESTDIR)$(PREFIX)/bin'
	$(if $(MAN1),install -m 644 $(MAN1) '$(DESTDIR)$(PREFIX)/share/man/man1')
	$(if $(MAN5),install -m 644 $(MAN5) '$(DESTDIR)$(PREFIX)/share/man/man5')
	$(if $(CL_KERNELS),install -m 644 $(CL_KERNELS) '$(DESTDIR)$(PREFIX)/share/nvgkit/cl')
	$(if $(wildcard pipelines/*),install -m 644 $(wildcard pipelines/*.mk pipelines/*.sh pipelines/*.plan) '$(DESTDIR)$(PREFIX)/share/nvgkit/pipelines')

# install the Debian packages that are missing; without root, say what to run
deps:
	@missing=; for p in $(DEB_BUILD) $(DEB_TEST); do \
	  dpkg-query -W -f='$${Status}' $$p 2>/dev/null | grep -q 'ok installed' || missing="$$missing $$p"; \
	done; \
	if [ -z "$$missing" ]; then exit 0; fi; \
	echo "deps: installing$$missing" >&2; \
	if [ "$$(id -u)" = 0 ]; then \
	  apt-get update -qq && DEBIAN_FRONTEND=noninteractive apt-get install -y -qq --no-install-recommends $$missing >&2; \
	elif command -v sudo >/dev/null && sudo -n true 2>/dev/null; then \
	  sudo apt-get update -qq && sudo DEBIAN_FRONTEND=noninteractive apt-get install -y -qq --no-install-recommends $$missing >&2; \
	else \
	  echo "deps: missing Debian packages; run: sudo apt-get install$$missing" >&2; exit 1; \
	fi

bench: $(TOOLS) $(VENV)/.ok
	$(Q)for b in $(sort $(wildcard tests/bench/bench-*.sh)); do \
	  $(TEST_ENV) OPENBLAS_NUM_THREADS= bash $$b || exit 1; done

bench-convert: $(TOOLS) $(VENV)/.ok
	$(Q)$(TEST_ENV) OPENBLAS_NUM_THREADS= bash tests/bench/convert.sh

# until pipelines/demo.sh (the conversion) exists, the demo shows blr-pack on a real matrix
DEMO := $(firstword $(wildcard pipelines/demo.sh) tests/demo-blr-pack.sh)
demo: $(TOOLS) $(VENV)/.ok
	$(Q)$(TEST_ENV) OPENBLAS_NUM_THREADS= bash $(DEMO)

# fuzzing the untrusted-format readers (clang + libFuzzer), see tests/fuzz/README
FUZZ_CC   ?= clang
FUZZ_TIME ?= 0
FUZZ_DATA ?= $(CURDIR)/../shared/data
FUZZ_LIB  := common/blr.c common/blrdeq.c common/tiles.c common/par.c common/linalg.c \
             common/nvgg.c common/f16.c common/err.c common/mem.c \
             common/aout.c common/fileio.c
FUZZ_FLAGS := -std=c11 -D_GNU_SOURCE -g -O1 -Icommon -Ibuild-fuzz -fsanitize=address,undefined \
              -fno-sanitize-recover=undefined $(PKG_CFLAGS)
# what each target needs of the library beyond FUZZ_LIB (and OpenBLAS, cJSON, zlib)
FUZZ_CMF  := common/cmf.c common/cmf_arch.c
FUZZ_TOK  := $(FUZZ_CMF) common/tok.c common/vocab.c common/unicat.c
FUZZ_IMPORT := $(FUZZ_CMF) $(wildcard common/import*.c) common/hfconfig.c common/vocab.c \
             common/names.c common/hftok.c common/tok.c common/unicat.c
FUZZ_PLAN := common/plan.c common/lines.c
FUZZ_TARGETS := blr nvgg cmf gguf hctx state llama2c tok512 safetensors plan curves ids text \
             rawf32 prov hftok
build-fuzz/fuzz-cmf build-fuzz/replay-cmf: $(FUZZ_CMF)
build-fuzz/fuzz-gguf build-fuzz/replay-gguf: $(FUZZ_IMPORT)
build-fuzz/fuzz-llama2c build-fuzz/replay-llama2c: $(FUZZ_IMPORT)
build-fuzz/fuzz-safetensors build-fuzz/replay-safetensors: $(FUZZ_IMPORT)
build-fuzz/fuzz-hctx build-fuzz/replay-hctx: common/hctx.c
build-fuzz/fuzz-state build-fuzz/replay-state: common/state.c
build-fuzz/fuzz-tok512 build-fuzz/replay-tok512: $(FUZZ_TOK)
build-fuzz/fuzz-hftok build-fuzz/replay-hftok: $(FUZZ_TOK) common/hftok.c
build-fuzz/fuzz-ids build-fuzz/replay-ids: $(FUZZ_TOK)
build-fuzz/fuzz-text build-fuzz/replay-text: $(FUZZ_TOK) build-fuzz/tok512.inc
build-fuzz/fuzz-plan build-fuzz/replay-plan: $(FUZZ_PLAN)
build-fuzz/fuzz-curves build-fuzz/replay-curves: common/alloc.c $(FUZZ_PLAN)
build-fuzz/fuzz-prov build-fuzz/replay-prov: common/provenance.c
build-fuzz/fuzz-%: tests/fuzz/fuzz-%.c $(FUZZ_LIB) $(wildcard tests/fuzz/*.h)
	@mkdir -p $(dir $@)
	$(call quiet,FUZZCC,$@)$(FUZZ_CC) $(FUZZ_FLAGS) -fsanitize=fuzzer -o $@ $(filter %.c,$^) $(PKG_LIBS) -lm
build-fuzz/replay-%: tests/fuzz/fuzz-%.c tests/fuzz/replay.c $(FUZZ_LIB) $(wildcard tests/fuzz/*.h)
	@mkdir -p $(dir $@)
	$(call quiet,FUZZCC,$@)$(FUZZ_CC) $(FUZZ_FLAGS) -o $@ $(filter %.c,$^) $(PKG_LIBS) -lm
# the text target's sentencepiece vocabulary: the real tok512.bin, built in
build-fuzz/tok512.inc: $(FUZZ_DATA)/tok512.bin
	@mkdir -p $(dir $@)
	$(Q)python3 -c 'import sys; b = open(sys.argv[1], "rb").read(); print("static const unsigned char tok512[] = {%s};" % ",".join(map(str, b)))' $< >$@
# seeds: small payloads, a Gram, a cmf file holding both codecs, a one-layer
# llama GGUF with a tokenizer; the rest from real files and the tools'
# own output (tests/fuzz/seeds.sh)
build-fuzz/corpus/.ok: tests/blr-writer.py tests/fuzz/seed-cmf.py tests/fuzz/seed-gguf.py tests/hftok.py \
		tests/fuzz/seeds.sh $(TOOLS) $(VENV)/.ok
	@mkdir -p $(FUZZ_TARGETS:%=build-fuzz/corpus/%)
	$(Q)$(VENV)/bin/python3 tests/blr-writer.py write build-fuzz/corpus/blr/a 24 16 16 2 1 && \
	  $(VENV)/bin/python3 tests/blr-writer.py write build-fuzz/corpus/blr/b 8 8 8 1 2 && \
	  mv build-fuzz/corpus/blr/b.numpy.f32 build-fuzz/corpus/rawf32/b && \
	  rm -f build-fuzz/corpus/blr/*.f32 && \
	  printf 'GGVN\002\000\000\000\003\000\000\000\000\000\000\000\000\000\200\077\000\000\000\000\000\000\000\000\000\000\200\077' \
	    >build-fuzz/corpus/nvgg/a && \
	  $(VENV)/bin/python3 tests/fuzz/seed-cmf.py build-fuzz/corpus/blr/a build-fuzz/corpus/cmf/a && \
	  $(VENV)/bin/python3 tests/fuzz/seed-gguf.py build-fuzz/corpus/gguf/a && \
	  $(TEST_ENV) NVG_DATA='$(FUZZ_DATA)' bash tests/fuzz/seeds.sh build-fuzz/corpus && \
	  touch $@
fuzz: $(FUZZ_TARGETS:%=build-fuzz/fuzz-%) $(FUZZ_TARGETS:%=build-fuzz/replay-%) build-fuzz/corpus/.ok
	$(Q)if [ "$(FUZZ_TIME)" -gt 0 ]; then for t in $(FUZZ_TARGETS); do \
	  build-fuzz/fuzz-$$t -max_total_time=$(FUZZ_TIME) -artifact_prefix=build-fuzz/ \
	    build-fuzz/corpus/$$t || exit 1; done; fi

# the fuzz targets' replays link (with CC: no clang needed), so that each
# target's list of sources above stays whole
fuzz-check: FUZZ_CC = $(CC)
fuzz-check: $(FUZZ_TARGETS:%=build-fuzz/replay-%)

clean:
	rm -rf build build-san build-fuzz bin

help:
	@sed -n '1,/^$$/p' Makefile

-include $(LIB_OBJ:.o=.d) $(TOOL_SRC:tools/%.c=$(BUILD)/tools/%.d) $(UNIT_SRC:tests/unit/%.c=$(BUILD)/tests/unit/%.d)
