# Hardening part: test wiring for tests/security and tests/soak, and libFuzzer targets.
# Included (OPTIONAL) by the top-level CMakeLists.txt after the test wiring.
#
# Fuzzing needs clang (Debian: clang + libclang-rt-14-dev, see scripts/deps.sh). The default
# (g++) build defines `bandit_fuzz_build`, a nested clang build of the fuzz targets under
# <build>/fuzz, and registers a short run of each target in ctest (fuzz_short_*). The nested build
# is not part of `all` (it doubles a full build); `make test` builds it before ctest, and a
# fuzz_short_* test whose binary was not built reports itself skipped rather than passing.
# `make fuzz` configures build-fuzz with clang directly (-DBANDIT_FUZZ=ON) and runs longer.

# ---- tests/security and tests/soak talk to the server: link it like test_server ----
foreach(t test_security test_soak)
  if(TARGET ${t})
    target_link_libraries(${t} PRIVATE bandit_server bandit_client)
  endif()
endforeach()
if(TARGET test_soak)
  set_tests_properties(test_soak PROPERTIES TIMEOUT 300)
endif()

set(BANDIT_FUZZ_TARGETS request_fuzz snapshot_fuzz journal_fuzz features_fuzz)
option(BANDIT_FUZZ "Build the libFuzzer targets in this (clang) build" OFF)
set(BANDIT_FUZZ_SECONDS 8 CACHE STRING "Seconds per fuzz target in the ctest short run")

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
  add_custom_target(fuzz_all DEPENDS ${BANDIT_FUZZ_TARGETS})
  return()
endif()

# ---- default build: nested clang build of the fuzz targets + short ctest runs ----
find_program(BANDIT_CLANGXX NAMES clang++ clang++-14)
set(_fuzz_rt_ok FALSE)
if(BANDIT_CLANGXX)
  execute_process(COMMAND ${BANDIT_CLANGXX} -print-file-name=libclang_rt.fuzzer-x86_64.a
                  OUTPUT_VARIABLE _fuzz_rt OUTPUT_STRIP_TRAILING_WHITESPACE ERROR_QUIET)
  if(_fuzz_rt AND EXISTS "${_fuzz_rt}")
    set(_fuzz_rt_ok TRUE)
  else()
    # Debian keeps the runtime under the resource dir; ask for it there.
    execute_process(COMMAND ${BANDIT_CLANGXX} -print-resource-dir
                    OUTPUT_VARIABLE _rdir OUTPUT_STRIP_TRAILING_WHITESPACE ERROR_QUIET)
    file(GLOB _fuzz_rt_glob "${_rdir}/lib/linux/libclang_rt.fuzzer-*.a")
    if(_fuzz_rt_glob)
      set(_fuzz_rt_ok TRUE)
    endif()
  endif()
endif()
if(NOT _fuzz_rt_ok)
  message(STATUS "fuzz: clang++ with libFuzzer not found (scripts/deps.sh installs clang and "
                 "libclang-rt-14-dev); fuzz targets and fuzz_short_* tests are skipped")
  return()
endif()

include(ExternalProject)
set(BANDIT_FUZZ_DIR ${CMAKE_BINARY_DIR}/fuzz)
cmake_host_system_information(RESULT _fuzz_jobs QUERY NUMBER_OF_LOGICAL_CORES)
ExternalProject_Add(bandit_fuzz_build
  SOURCE_DIR ${CMAKE_SOURCE_DIR}
  BINARY_DIR ${BANDIT_FUZZ_DIR}
  CMAKE_ARGS -DCMAKE_CXX_COMPILER=${BANDIT_CLANGXX} -DBANDIT_FUZZ=ON
             -DCMAKE_BUILD_TYPE=RelWithDebInfo
  BUILD_COMMAND ${CMAKE_COMMAND} --build ${BANDIT_FUZZ_DIR} --target fuzz_all -j ${_fuzz_jobs}
  INSTALL_COMMAND ""
  BUILD_ALWAYS ON
  USES_TERMINAL_BUILD ON)
set_target_properties(bandit_fuzz_build PROPERTIES EXCLUDE_FROM_ALL TRUE)

foreach(t ${BANDIT_FUZZ_TARGETS})
  # A fresh scratch corpus first (new inputs land there), the committed corpus read-only second.
  add_test(NAME fuzz_short_${t}
    COMMAND /bin/sh -c "test -x ${BANDIT_FUZZ_DIR}/bin/${t} || { echo 'not built: cmake --build . --target bandit_fuzz_build (make test does)'; exit 77; }; rm -rf scratch-${t} && mkdir -p scratch-${t} artifacts && exec ${BANDIT_FUZZ_DIR}/bin/${t} scratch-${t} ${CMAKE_SOURCE_DIR}/fuzz/corpus/${t} -max_total_time=${BANDIT_FUZZ_SECONDS} -rss_limit_mb=2048 -timeout=10 -close_fd_mask=2 -print_final_stats=1 -artifact_prefix=artifacts/${t}-"
    WORKING_DIRECTORY ${BANDIT_FUZZ_DIR})
  set_tests_properties(fuzz_short_${t} PROPERTIES TIMEOUT 120 SKIP_RETURN_CODE 77)
endforeach()
