# llmk build. `make` builds the library and the CLI; `make run` and `make test`
# also do all set-up (packages, Python venv for tests, default model).

CC      ?= cc
ARCH    := $(shell uname -m)
BUILD   ?= build
PY      := .venv/bin/python

WARN    := -Wall -Wextra -Werror -Wshadow -Wno-unused-parameter
BASE    := -std=c11 -D_GNU_SOURCE -fPIC -fvisibility=hidden -g -Iinclude $(WARN)
OPT     ?= -O2
CFLAGS_ALL = $(BASE) $(OPT) $(EXTRA_CFLAGS)
LDLIBS  := -lpcre2-8 -lcjson -lpthread -lm
# The HTTP server (llmk serve) is the command's, not the library's: only the
# llmk binary links libmicrohttpd, and libedit (line editing in llmk chat).
APP_LDLIBS := -lmicrohttpd -ledit

# ISA-specific files are named *_avx2.c, *_avx512.c, *_neon.c and get their
# flags here; everything else is built for the baseline ISA so one binary runs
# on any x86-64 and chooses its kernels at start-up.
FLAGS_avx2   := -mavx2 -mfma -mf16c
FLAGS_avx512 := -mavx2 -mfma -mf16c -mavx512f -mavx512bw -mavx512vl -mavx512dq -mavx512vnni -mavx512bf16
ALL_SRC := $(shell find src -name '*.c' | sort)
ifeq ($(ARCH),x86_64)
  LIB_SRC := $(filter-out %_neon.c,$(ALL_SRC))
else ifeq ($(ARCH),aarch64)
  LIB_SRC := $(filter-out %_avx2.c %_avx512.c,$(ALL_SRC))
else
  LIB_SRC := $(filter-out %_avx2.c %_avx512.c %_neon.c,$(ALL_SRC))
endif
APP_SRC  := $(sort $(wildcard app/*.c))
TEST_SRC := $(sort $(wildcard tests/test_*.c))
BENCH_SRC := $(sort $(wildcard bench/*.c))

LIB_OBJ  := $(LIB_SRC:%.c=$(BUILD)/obj/%.o)
APP_OBJ  := $(APP_SRC:%.c=$(BUILD)/obj/%.o)
TEST_BIN := $(TEST_SRC:tests/%.c=$(BUILD)/tests/%)
BENCH_BIN := $(BENCH_SRC:bench/%.c=$(BUILD)/bench/%)

isa_flags = $(if $(findstring _avx512.c,$1),$(FLAGS_avx512),$(if $(findstring _avx2.c,$1),$(FLAGS_avx2)))

.PHONY: all lib setup run test test-builds test-slow check-clang check-arm64 bench bench-kernels fuzz clean
all: $(BUILD)/libllmk.a $(BUILD)/libllmk.so $(BUILD)/llmk
lib: $(BUILD)/libllmk.a

# The command is built against the public headers only (-Iinclude), as any
# application would be; the library's own files also see src/.
src_inc = $(if $(filter app/%,$1),,-Isrc)

# -MMD: each object's own header dependencies (build/obj/**/*.d), so a
# header change rebuilds the files that include it, not the whole tree.
$(BUILD)/obj/%.o: %.c
	@mkdir -p $(dir $@)
	$(CC) $(CFLAGS_ALL) -MMD -MP $(call src_inc,$<) $(call isa_flags,$<) -c $< -o $@

-include $(shell find $(BUILD)/obj -name '*.d' 2>/dev/null)

$(BUILD)/libllmk.a: $(LIB_OBJ)
	@rm -f $@
	ar rcs $@ $^

$(BUILD)/libllmk.so: $(LIB_OBJ)
	$(CC) -shared -o $@ $^ $(LDLIBS) $(EXTRA_LDFLAGS)

$(BUILD)/llmk: $(APP_OBJ) $(BUILD)/libllmk.a
	$(CC) -o $@ $(APP_OBJ) $(BUILD)/libllmk.a $(APP_LDLIBS) $(LDLIBS) $(EXTRA_LDFLAGS)

$(BUILD)/tests/%: tests/%.c $(wildcard tests/*.h) $(BUILD)/libllmk.a
	@mkdir -p $(dir $@)
	$(CC) $(CFLAGS_ALL) -Isrc -Itests -o $@ $< $(BUILD)/libllmk.a $(LDLIBS) $(EXTRA_LDFLAGS)

# The fuzz corpora's replay also runs llmk serve's request parser
# (fuzz/fuzz_serve.c): the command's objects it needs are linked in.
SERVE_PARSE_OBJ := $(addprefix $(BUILD)/obj/app/,serve_api.o serve_embed.o embed_pool.o gen_opts.o cli.o)
$(BUILD)/tests/test_fuzz_corpus: tests/test_fuzz_corpus.c tests/check.h $(wildcard fuzz/*.c fuzz/*.h) \
		$(SERVE_PARSE_OBJ) $(BUILD)/libllmk.a
	@mkdir -p $(dir $@)
	$(CC) $(CFLAGS_ALL) -Isrc -Itests -o $@ $< $(SERVE_PARSE_OBJ) $(BUILD)/libllmk.a $(LDLIBS) $(EXTRA_LDFLAGS)

$(BUILD)/bench/%: bench/%.c $(BUILD)/libllmk.a
	@mkdir -p $(dir $@)
	$(CC) $(CFLAGS_ALL) -Isrc -o $@ $< $(BUILD)/libllmk.a $(LDLIBS) $(EXTRA_LDFLAGS)

tests-bin: $(TEST_BIN)
benches-bin: $(BENCH_BIN)

# ---- set-up -------------------------------------------------------------
setup:
	bash scripts/setup.sh

# ---- the two commands ---------------------------------------------------
# A question the default (instruct) model answers through its chat template;
# a fixed seed so the answer is the README's, and -n high enough that the
# answer ends at the end of its turn rather than at the limit.
PROMPT ?= What is the capital of France? Answer in one sentence.
run: setup
	$(MAKE) all
	$(BUILD)/llmk run -p "$(PROMPT)" -n 256 --seed 42

# The three builds run in parallel jobs (one per core): serially they were
# a quarter of CI's time.
JOBS ?= $(shell nproc 2>/dev/null || echo 2)
test: setup test-builds
	bash scripts/run_tests.sh

test-builds:
	$(MAKE) -j$(JOBS) all tests-bin
	$(MAKE) -j$(JOBS) BUILD=build/san OPT=-O1 \
	  EXTRA_CFLAGS="-fsanitize=address,undefined -fno-omit-frame-pointer -fno-sanitize-recover=all" \
	  EXTRA_LDFLAGS="-fsanitize=address,undefined" all tests-bin
	$(MAKE) -j$(JOBS) check-clang

# The end-to-end tests marked slow (minutes each: the 64-client load test,
# speculation through serve and batch, ...): not in `make test`.
test-slow: setup test-builds
	bash scripts/run_tests.sh --slow

# gcc is the default compiler; clang must build the same tree warning-free.
check-clang:
	$(MAKE) BUILD=build/clang CC=clang all tests-bin

# arm64 build check: the library (NEON kernels, no x86 files) and the llmk
# binary, with Debian's cross compiler and arm64 libraries (dpkg
# --add-architecture arm64; apt install gcc-aarch64-linux-gnu
# libpcre2-dev:arm64 libcjson-dev:arm64 libmicrohttpd-dev:arm64 libedit-dev:arm64); not in CI.
check-arm64:
	@if command -v aarch64-linux-gnu-gcc >/dev/null; then \
	  $(MAKE) BUILD=build/arm64 CC=aarch64-linux-gnu-gcc ARCH=aarch64 build/arm64/libllmk.a build/arm64/llmk && \
	  echo "check-arm64: libllmk.a and llmk build for aarch64 warning-free"; \
	else echo "check-arm64: aarch64-linux-gnu-gcc not installed, skipped"; fi

# ---- measuring ----------------------------------------------------------
bench: all benches-bin
	bash scripts/run_bench.sh

fuzz:
	bash scripts/fuzz.sh

clean:
	rm -rf build

bench-kernels: benches-bin
	$(BUILD)/bench/bench_kernels
