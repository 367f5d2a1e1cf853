# trapkit: the two commands a newcomer runs are `make report` and `make test`.
# Both install what is missing (scripts/install-deps.sh), then build.

BUILD      ?= build
ASAN_BUILD ?= build-asan
TSAN_BUILD ?= build-tsan
JOBS       ?= $(shell nproc)
CMAKE_GEN  := -G Ninja

.PHONY: all deps build asan tsan test report kernel-test format format-check clean

all: build

deps:
	@bash scripts/install-deps.sh

build: deps
	@cmake -S . -B $(BUILD) $(CMAKE_GEN) -DCMAKE_BUILD_TYPE=RelWithDebInfo >/dev/null
	@cmake --build $(BUILD) -j $(JOBS)

asan: deps
	@cmake -S . -B $(ASAN_BUILD) $(CMAKE_GEN) -DCMAKE_BUILD_TYPE=Debug -DTK_SANITIZE=ON >/dev/null
	@cmake --build $(ASAN_BUILD) -j $(JOBS)

# ThreadSanitizer: the library and the tests where threads meet (label tsan).
tsan: deps
	@cmake -S . -B $(TSAN_BUILD) $(CMAKE_GEN) -DCMAKE_BUILD_TYPE=Debug -DTK_TSAN=ON >/dev/null
	@cmake --build $(TSAN_BUILD) -j $(JOBS)

# Every test, in the normal build and again in the ASan+UBSan build; the
# threaded ones again under TSan.
test: build asan tsan format-check
	@echo "== tests (RelWithDebInfo) =="
	@ctest --test-dir $(BUILD) --output-on-failure -j $(JOBS)
	@echo "== tests (ASan + UBSan) =="
	@ctest --test-dir $(ASAN_BUILD) --output-on-failure -j $(JOBS)
	@echo "== tests (TSan, threaded tests) =="
	@ctest --test-dir $(TSAN_BUILD) --output-on-failure -j $(JOBS) -L tsan

# The benchmark suite: report/results.json, report/index.html, docs/results.md.
report: build
	@$(BUILD)/trapkit report

# The checkpoint benchmark's whole matrix: every kv-server mechanism and
# redis-server at 25%, 50% and 75% load, 1 and 4 GiB (hours, not part of
# `make report`), written to $(BUILD)/report-full/.
.PHONY: bench-full
bench-full: build
	@TK_BENCH_FULL=1 $(BUILD)/trapkit report --only checkpoint --out $(BUILD)/report-full --docs ''

# The tests again inside other kernels (Debian 12's own 6.1 first), booted
# under qemu-system-x86_64; not part of `make test`.  See scripts/kernel-test.py.
kernel-test: build
	@bash scripts/install-deps.sh kernel-test
	@python3 scripts/kernel-test.py --build $(BUILD)

format:
	@clang-format -i $$(git ls-files --cached --others --exclude-standard '*.c' '*.h' '*.cpp' '*.hpp')

format-check: deps
	@clang-format --dry-run -Werror $$(git ls-files --cached --others --exclude-standard '*.c' '*.h' '*.cpp' '*.hpp') || \
	  (echo "format-check: run 'make format'"; exit 1)

clean:
	rm -rf $(BUILD) $(ASAN_BUILD) $(TSAN_BUILD) build-kernel
