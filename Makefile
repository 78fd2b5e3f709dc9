# Thin wrapper over CMake. `make run` and `make test` are the quick start.
BUILD_DIR ?= build
BUILD_TYPE ?= RelWithDebInfo
JOBS ?= $(shell nproc)
# Tests run twice as many at once as there are build jobs: most of their time they wait on
# processes they started (PostgreSQL, Patroni, etcd, banditd, npm), not on the CPU.
TEST_JOBS ?= $(shell echo $$(( $(JOBS) * 2 )))
DEPS_STAMP := $(BUILD_DIR)/.deps-ok

.PHONY: all build build-tests build-serve run test bench deps clean sanitize fuzz fuzz-check build-fuzz-clang soak repro-glb repro-kernel-mixture

all: build

$(DEPS_STAMP): scripts/deps.sh
	./scripts/deps.sh
	@mkdir -p $(BUILD_DIR) && touch $@

deps: $(DEPS_STAMP)

$(BUILD_DIR)/CMakeCache.txt: $(DEPS_STAMP)
	cmake -S . -B $(BUILD_DIR) -DCMAKE_BUILD_TYPE=$(BUILD_TYPE)

# Everything: libraries, binaries, tests, benchmarks.
build: $(BUILD_DIR)/CMakeCache.txt
	cmake --build $(BUILD_DIR) -j $(JOBS) --target all benchmarks

# What the tests run: CMake's `all` (everything but the benchmarks).
build-tests: $(BUILD_DIR)/CMakeCache.txt
	cmake --build $(BUILD_DIR) -j $(JOBS)

# Only what `make run` runs: the server and its CLI (a fraction of the full build).
build-serve: $(BUILD_DIR)/CMakeCache.txt
	cmake --build $(BUILD_DIR) -j $(JOBS) --target banditd banditctl

run: build-serve
	./$(BUILD_DIR)/bin/banditd

test: build-tests
	cd $(BUILD_DIR) && ctest --output-on-failure -j $(TEST_JOBS)

bench: build
	./bench/run_all.sh $(BUILD_DIR)

clean:
	rm -rf $(BUILD_DIR)

# ---- hardening ----
# ASan+UBSan and TSan builds of the C++ test suite, each in its own build dir.
SAN_TESTS ?= ^test_
sanitize: deps
	cmake -S . -B build-asan -DCMAKE_BUILD_TYPE=RelWithDebInfo \
	  -DCMAKE_CXX_FLAGS="-fsanitize=address,undefined -fno-sanitize-recover=undefined -fno-omit-frame-pointer" \
	  -DCMAKE_EXE_LINKER_FLAGS="-fsanitize=address,undefined"
	cmake --build build-asan -j $(JOBS) --target banditd banditctl bandit-ope $$(cd build-asan && ctest -N -R '$(SAN_TESTS)' | sed -n 's/^ *Test *#[0-9]*: //p')
	cd build-asan && ASAN_OPTIONS=detect_leaks=1:abort_on_error=1 UBSAN_OPTIONS=print_stacktrace=1 \
	  ctest --output-on-failure -j $(JOBS) -R '$(SAN_TESTS)'
	@mkdir -p build-tsan
	$(CXX) -std=c++20 -O1 -g -fPIC -fsanitize=thread -c tests/security/tsan_absl_shim.cc -o build-tsan/tsan_absl_shim.o
	# -U__SANITIZE_THREAD__: protobuf's map_field.h adds members under that macro, so instrumented
	# code would disagree with Debian's (uninstrumented) libprotobuf on the layout of every map field.
	cmake -S . -B build-tsan -DCMAKE_BUILD_TYPE=RelWithDebInfo \
	  -DCMAKE_CXX_FLAGS="-fsanitize=thread -U__SANITIZE_THREAD__ -fno-omit-frame-pointer" \
	  -DCMAKE_EXE_LINKER_FLAGS="-fsanitize=thread $(CURDIR)/build-tsan/tsan_absl_shim.o -ldl"
	cmake --build build-tsan -j $(JOBS) --target banditd banditctl bandit-ope $$(cd build-tsan && ctest -N -R '$(SAN_TESTS)' | sed -n 's/^ *Test *#[0-9]*: //p')
	cd build-tsan && TSAN_OPTIONS="halt_on_error=1 second_deadlock_stack=1 suppressions=$(CURDIR)/tests/security/tsan.supp" \
	  ctest --output-on-failure -j $(JOBS) -R '$(SAN_TESTS)'

# libFuzzer (clang, ASan/UBSan, coverage on core and server) in build-fuzz. `make test` runs the
# fuzz targets only through the g++ replay driver (fuzz_replay_*: corpus + deterministic mutations).
# fuzz: each target for FUZZ_SECONDS; new coverage is merged into fuzz/corpus/.
FUZZ_SECONDS ?= 120
fuzz: build-fuzz-clang
	./fuzz/run.sh build-fuzz/bin $(FUZZ_SECONDS)

# fuzz-check: each target for FUZZ_CHECK_SECONDS, corpus left as committed (CI runs it after
# `make test`; run it before merging a change to request handling, snapshots or the journal).
FUZZ_CHECK_SECONDS ?= 60
fuzz-check: build-fuzz-clang
	FUZZ_MERGE=0 ./fuzz/run.sh build-fuzz/bin $(FUZZ_CHECK_SECONDS)

build-fuzz-clang: deps
	cmake -S . -B build-fuzz -DCMAKE_CXX_COMPILER=clang++ -DBANDIT_FUZZ=ON -DCMAKE_BUILD_TYPE=RelWithDebInfo
	cmake --build build-fuzz -j $(JOBS) --target fuzz_all

# Bounded soak (mixed load + malformed requests against a real banditd), SOAK_SECONDS long.
SOAK_SECONDS ?= 60
soak: build
	SOAK_SECONDS=$(SOAK_SECONDS) BANDITD=$(BUILD_DIR)/bin/banditd ./$(BUILD_DIR)/bin/test_soak

# GLB papers' comparisons at their settings (figures in docs/img/, tables in docs/); each paper's
# part is its own script. Long: see docs/reproductions/glb-omd.md and domd-glb.md for the wall time.
repro-glb: build
	./bench/repro/glb_omd.sh $(BUILD_DIR)
	./bench/repro/glb_domd.sh $(BUILD_DIR)

# The kernel and mixture papers' own comparisons (OKS equal-time tables, BKB Fig. 2, Mixture-Greedy
# Figs. 2/6/9/10, fidelity term, exact vs random-feature Vendi): JSON in build/runs/km/, plots in
# docs/img/km_*.png, tables in build/runs/km/tables.md (docs/reproductions/ quotes them).
repro-kernel-mixture: $(BUILD_DIR)/CMakeCache.txt
	cmake --build $(BUILD_DIR) -j $(JOBS) --target bandit-sim
	BANDIT_SIM=$(BUILD_DIR)/bin/bandit-sim ./bench/repro/kernel_mixture.sh
