# trapkit: the two commands a newcomer runs are `make report` and `make test`.
# Both install what is missing (scripts/install-deps.sh), then build.

BUILD      ?= build
ASAN_BUILD ?= build-asan
TSAN_BUILD ?= build-tsan
JOBS       ?= $(shell nproc)
PREFIX     ?= /usr/local
DESTDIR    ?=
LDCONFIG   ?= /sbin/ldconfig
CMAKE_GEN  := -G Ninja

.PHONY: all deps build asan tsan test report kernel-test kernel-test-fastexc kernel-test-cxx format format-check clean \
        install uninstall deb

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

# Only the fast exception path (kernel/fastexc): its kernel built (or taken
# from build-kernel/fastexc), its tests and figures in that kernel and in
# Debian's own.
kernel-test-fastexc: build
	@bash scripts/install-deps.sh kernel-test
	@python3 scripts/kernel-test.py --build $(BUILD) --part fastexc

# Only the C++ module (kernel/cxx) in Debian's own kernel: its tests, 100
# loads and unloads, and its measurements beside the same code in a process.
kernel-test-cxx: build
	@bash scripts/install-deps.sh kernel-test
	@python3 scripts/kernel-test.py --build $(BUILD) --part cxx

# Long trials, not part of `make test` (which runs short versions): the
# collector's four mutator threads for a minute on each write barrier, with
# the world stopped, with the concurrent marker beside them, and stopped at
# safepoints; then a heap of small objects grown past 16 GiB (12 GiB of them
# live: about 20 GiB of memory), generational and concurrent; then 1,000
# kill -9 trials and 1,000 power cuts of the persistent heap on each
# mechanism that serves it.
.PHONY: soak
soak: build
	@for m in posix uffd-sigbus uffd-thread; do \
		$(BUILD)/tests/pheap_crash $$m 1000 || exit 1; \
		$(BUILD)/tests/pheap_crash $$m 1000 $(BUILD)/tests/libtk_powercut.so || exit 1; \
	done
	@for m in none pagemap-scan uffd-sigbus uffd-thread posix; do \
		$(BUILD)/tests/gc_threads $$m 60 || exit 1; \
	done
	@for m in pagemap-scan uffd-sigbus posix; do \
		TRAPKIT_GC_CONCURRENT=1 $(BUILD)/tests/gc_threads $$m 60 || exit 1; \
	done
	@TRAPKIT_GC_STOP=safepoints $(BUILD)/tests/gc_threads pagemap-scan 60
	@TRAPKIT_GC_STOP=safepoints TRAPKIT_GC_CONCURRENT=1 $(BUILD)/tests/gc_threads pagemap-scan 60
	@$(BUILD)/tests/gc_big pagemap-scan 12288
	@TRAPKIT_GC_CONCURRENT=1 $(BUILD)/tests/gc_big pagemap-scan 12288

# Installs the build into $(DESTDIR)$(PREFIX) (default /usr/local): the
# libraries, headers, trapkit.pc, the CMake package, trapkit and tksim, the
# man pages.  Installing to the system (no DESTDIR, as root) runs ldconfig;
# a prefix the dynamic linker does not search gets a hint (README.md, "Use
# it in your program").
install: build
	@DESTDIR="$(DESTDIR)" cmake --install $(BUILD) --prefix "$(PREFIX)"
	@libdir="$(PREFIX)/$$(sed -n 's/^CMAKE_INSTALL_LIBDIR:[A-Z]*=//p' $(BUILD)/CMakeCache.txt)"; \
	if [ -z "$(DESTDIR)" ]; then \
	  if [ "$$(id -u)" = 0 ]; then $(LDCONFIG); fi; \
	  $(LDCONFIG) -p | grep -qF "=> $$libdir/libtrapkit.so.0" || \
	    echo "install: the dynamic linker does not search $$libdir: link with" \
	         "-Wl,-rpath,$$libdir or run with LD_LIBRARY_PATH=$$libdir"; \
	fi

# Removes what `make install` with the same PREFIX and DESTDIR installed (the
# list is what installing the build would install), and the directories of
# trapkit's own it leaves empty.
uninstall: build
	@stage=$$(mktemp -d) && trap 'rm -rf "$$stage"' EXIT && \
	DESTDIR="$$stage" cmake --install $(BUILD) --prefix "$(PREFIX)" >/dev/null && \
	(cd "$$stage" && find . ! -type d && find . -depth -type d -path '*/trapkit*') | \
	while read -r f; do \
	  f="$(DESTDIR)$${f#.}"; \
	  if [ -d "$$f" ] && [ ! -L "$$f" ]; then rmdir "$$f" 2>/dev/null || true; \
	  elif [ -e "$$f" ] || [ -L "$$f" ]; then echo "-- Removing: $$f"; rm -f "$$f"; fi; \
	done; \
	if [ -z "$(DESTDIR)" ] && [ "$$(id -u)" = 0 ]; then $(LDCONFIG); fi

# The Debian package: $(BUILD)/package/trapkit_<version>_<arch>.deb, for /usr
# (cmake/install.cmake), its dependencies computed by dpkg-shlibdeps.
deb: build
	@cpack --config $(BUILD)/CPackConfig.cmake -B $(BUILD)/package
	@rm -rf $(BUILD)/package/_CPack_Packages

format:
	@clang-format -i $$(git ls-files --cached --others --exclude-standard '*.c' '*.h' '*.cpp' '*.hpp' ':!kernel/fastexc/' ':!kernel/cxx/module.c' ':!kernel/cxx/include/tkcxx.h' ':!kernel/cxx/include/string.h')

format-check: deps
	@clang-format --dry-run -Werror $$(git ls-files --cached --others --exclude-standard '*.c' '*.h' '*.cpp' '*.hpp' ':!kernel/fastexc/' ':!kernel/cxx/module.c' ':!kernel/cxx/include/tkcxx.h' ':!kernel/cxx/include/string.h') || \
	  (echo "format-check: run 'make format'"; exit 1)

clean:
	rm -rf $(BUILD) $(ASAN_BUILD) $(TSAN_BUILD) build-kernel
