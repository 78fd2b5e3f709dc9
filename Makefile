# Thin wrapper over CMake. `make run` and `make test` are the quick start.
BUILD_DIR ?= build
BUILD_TYPE ?= RelWithDebInfo
JOBS ?= $(shell nproc)
DEPS_STAMP := $(BUILD_DIR)/.deps-ok

.PHONY: all build run test bench deps clean

all: build

$(DEPS_STAMP): scripts/deps.sh
	./scripts/deps.sh
	@mkdir -p $(BUILD_DIR) && touch $@

deps: $(DEPS_STAMP)

$(BUILD_DIR)/CMakeCache.txt: $(DEPS_STAMP)
	cmake -S . -B $(BUILD_DIR) -DCMAKE_BUILD_TYPE=$(BUILD_TYPE)

build: $(BUILD_DIR)/CMakeCache.txt
	cmake --build $(BUILD_DIR) -j $(JOBS)

run: build
	./$(BUILD_DIR)/bin/banditd

test: build
	cd $(BUILD_DIR) && ctest --output-on-failure -j $(JOBS)

bench: build
	./bench/run_all.sh $(BUILD_DIR)

clean:
	rm -rf $(BUILD_DIR)
