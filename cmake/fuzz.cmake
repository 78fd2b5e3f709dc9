# Hardening part: test wiring for tests/security and tests/soak, and libFuzzer targets.
# Included (OPTIONAL) by the top-level CMakeLists.txt after the test wiring.
#
# libFuzzer needs clang (Debian: clang + libclang-rt-14-dev, see scripts/deps.sh): `make fuzz` and
# `make fuzz-check` configure build-fuzz with clang (-DBANDIT_FUZZ=ON), coverage and ASan/UBSan.
# The default (g++) build instead links each fuzz target with a standalone driver
# (fuzz/replay_main.cc) and registers fuzz_replay_* in ctest: the corpus and a bounded number of
# deterministic mutations of it, through the same LLVMFuzzerTestOneInput and its oracles.

# ---- tests/security and tests/soak talk to the server: link it like test_server ----
foreach(t test_security test_soak)
  if(TARGET ${t})
    target_link_libraries(${t} PRIVATE bandit_server bandit_client)
  endif()
endforeach()
if(TARGET test_soak)
  set_tests_properties(test_soak PROPERTIES TIMEOUT 300)
endif()

set(BANDIT_FUZZ_TARGETS request_fuzz round_stream_fuzz snapshot_fuzz journal_fuzz features_fuzz
    personalizer_fuzz)
option(BANDIT_FUZZ "Build the libFuzzer targets in this (clang) build" OFF)

if(BANDIT_FUZZ)
  if(NOT CMAKE_CXX_COMPILER_ID STREQUAL "Clang")
    message(FATAL_ERROR "BANDIT_FUZZ=ON needs clang++ (-DCMAKE_CXX_COMPILER=clang++)")
  endif()
  # Coverage + ASan/UBSan on everything the targets exercise (system libraries stay plain).
  set(_fuzz_flags -fsanitize=address,undefined -fno-sanitize-recover=undefined
      -fno-omit-frame-pointer -gline-tables-only)
  foreach(lib bandit_env bandit_core bandit_server)
    target_compile_options(${lib} PRIVATE -fsanitize=fuzzer-no-link ${_fuzz_flags})
  endforeach()
  foreach(t ${BANDIT_FUZZ_TARGETS})
    add_executable(${t} EXCLUDE_FROM_ALL ${CMAKE_SOURCE_DIR}/fuzz/${t}.cc)
    target_compile_options(${t} PRIVATE -fsanitize=fuzzer ${_fuzz_flags})
    target_link_options(${t} PRIVATE -fsanitize=fuzzer ${_fuzz_flags})
    target_link_libraries(${t} PRIVATE bandit_server)
  endforeach()
  # Debian's RapidJSON 1.1.0 computes `stackTop_ + n` on its still-null document stack before the
  # first allocation (internal/stack.h, Reserve; fixed upstream after 1.1.0): UBSan's
  # pointer-overflow check stops on it at every DOM parse and every Writer. Off for the files that
  # use RapidJSON only (all of them: the linker keeps one copy of each inline RapidJSON function,
  # from whichever file it meets first); every other check stays on there, and everywhere else.
  # Out of the server's unity batches, or the batch's flags would apply to them instead.
  file(GLOB _personalizer_srcs ${CMAKE_SOURCE_DIR}/server/api/http/personalizer_*.cc)
  set_source_files_properties(${_personalizer_srcs}
    ${CMAKE_SOURCE_DIR}/fuzz/personalizer_fuzz.cc PROPERTIES COMPILE_OPTIONS
    -fno-sanitize=pointer-overflow SKIP_UNITY_BUILD_INCLUSION ON)
  add_custom_target(fuzz_all DEPENDS ${BANDIT_FUZZ_TARGETS})
  return()
endif()

# ---- default build: the fuzz targets through a standalone driver (fuzz_replay_*) ----
# Each fuzz/<target>.cc is linked with fuzz/replay_main.cc and the normal build's libraries, and
# ctest's fuzz_replay_<target> replays fuzz/corpus/<target> plus BANDIT_FUZZ_MUTATIONS_<target>
# deterministic mutations of every input through the target's oracles. No clang, no second
# build of core and server. Coverage-guided fuzzing with ASan/UBSan stays in the clang build:
# `make fuzz` (long, merges new coverage into the corpus) and `make fuzz-check` (short, CI).
# Mutations per corpus input, per target, sized so each test takes a few seconds on 2 cores
# (request_fuzz builds a service and snapshots after every operation, round_stream_fuzz builds two
# and snapshots both after every step; snapshot_fuzz rejects most mutants at the CRC or the
# protobuf parse).
set(BANDIT_FUZZ_MUTATIONS_request_fuzz 8 CACHE STRING "Mutations per input, fuzz_replay_request_fuzz")
set(BANDIT_FUZZ_MUTATIONS_round_stream_fuzz 32 CACHE STRING "Mutations per input, fuzz_replay_round_stream_fuzz")
set(BANDIT_FUZZ_MUTATIONS_journal_fuzz 32 CACHE STRING "Mutations per input, fuzz_replay_journal_fuzz")
set(BANDIT_FUZZ_MUTATIONS_snapshot_fuzz 256 CACHE STRING "Mutations per input, fuzz_replay_snapshot_fuzz")
set(BANDIT_FUZZ_MUTATIONS_features_fuzz 20000 CACHE STRING "Mutations per input, fuzz_replay_features_fuzz")
set(BANDIT_FUZZ_MUTATIONS_personalizer_fuzz 2000 CACHE STRING "Mutations per input, fuzz_replay_personalizer_fuzz")
set(BANDIT_FUZZ_REPLAY_DIR ${CMAKE_BINARY_DIR}/fuzz-replay)
file(MAKE_DIRECTORY ${BANDIT_FUZZ_REPLAY_DIR})
# The seed configs (fuzz/seed_configs.h, derived from the policy registry) for fuzz/make_seeds.py.
add_executable(fuzz_seed_configs ${CMAKE_SOURCE_DIR}/fuzz/seed_configs_main.cc)
target_link_libraries(fuzz_seed_configs PRIVATE bandit_core)
add_library(bandit_fuzz_replay_main OBJECT ${CMAKE_SOURCE_DIR}/fuzz/replay_main.cc)
foreach(t ${BANDIT_FUZZ_TARGETS})
  add_executable(fuzz_replay_${t} ${CMAKE_SOURCE_DIR}/fuzz/${t}.cc
                 $<TARGET_OBJECTS:bandit_fuzz_replay_main>)
  # LLVM's FuzzedDataProvider.h (header only), which g++ does not ship.
  target_include_directories(fuzz_replay_${t} PRIVATE ${CMAKE_SOURCE_DIR}/fuzz/include)
  target_link_libraries(fuzz_replay_${t} PRIVATE bandit_server)
  add_test(NAME fuzz_replay_${t}
    COMMAND fuzz_replay_${t} --mutations=${BANDIT_FUZZ_MUTATIONS_${t}} --seed=1
            --artifact_prefix=${BANDIT_FUZZ_REPLAY_DIR}/${t}-
            ${CMAKE_SOURCE_DIR}/fuzz/corpus/${t}
    WORKING_DIRECTORY ${BANDIT_FUZZ_REPLAY_DIR})
  set_tests_properties(fuzz_replay_${t} PROPERTIES TIMEOUT 600)
endforeach()
