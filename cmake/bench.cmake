# Performance part: the load generator, the gRPC echo server (the physical ceiling)
# and an optional smoke test. Included (OPTIONAL) by the top-level CMakeLists.txt.
#
#   bandit-loadgen   C++ callback-API gRPC client driving banditd (or the echo server)
#   bandit-echo      minimal callback-API gRPC server answering Select/Update with messages of the
#                    same types and sizes as banditd, without doing any work: the ceiling
#   make bench       runs ./bench/run_all.sh BUILD_DIR (micro benchmarks, echo vs banditd, plots)

# ---- echo proto: bench/echo/echo.proto imports bandit/v1/service.proto; the top-level glob only
#      covers proto/, so it is generated here into the same gen/ tree. ----
set(BENCH_ECHO_PROTO ${CMAKE_SOURCE_DIR}/bench/echo/echo.proto)
set(BENCH_ECHO_GEN ${CMAKE_BINARY_DIR}/gen/bench_echo)
file(MAKE_DIRECTORY ${BENCH_ECHO_GEN})
add_custom_command(
  OUTPUT ${BENCH_ECHO_GEN}/echo.pb.cc ${BENCH_ECHO_GEN}/echo.pb.h
         ${BENCH_ECHO_GEN}/echo.grpc.pb.cc ${BENCH_ECHO_GEN}/echo.grpc.pb.h
  COMMAND ${Protobuf_PROTOC_EXECUTABLE}
          --proto_path=${CMAKE_SOURCE_DIR}/bench/echo
          --proto_path=${CMAKE_SOURCE_DIR}/proto
          --cpp_out=${BENCH_ECHO_GEN}
          --grpc_out=${BENCH_ECHO_GEN}
          --plugin=protoc-gen-grpc=${GRPC_CPP_PLUGIN}
          ${BENCH_ECHO_PROTO}
  DEPENDS ${BENCH_ECHO_PROTO}
  COMMENT "protoc bench/echo/echo.proto")
add_library(bandit_bench_echo_proto STATIC ${BENCH_ECHO_GEN}/echo.pb.cc ${BENCH_ECHO_GEN}/echo.grpc.pb.cc)
target_include_directories(bandit_bench_echo_proto PUBLIC ${BENCH_ECHO_GEN})
target_link_libraries(bandit_bench_echo_proto PUBLIC bandit_grpc)
target_compile_options(bandit_bench_echo_proto PRIVATE -w)

# ---- the echo server ----
add_executable(bandit-echo ${CMAKE_SOURCE_DIR}/bench/echo/echo_server.cc)
target_include_directories(bandit-echo PRIVATE ${CMAKE_SOURCE_DIR})
target_link_libraries(bandit-echo PRIVATE bandit_bench_echo_proto absl::flags absl::flags_parse
  absl::str_format absl::synchronization Threads::Threads)

# ---- the load generator ----
file(GLOB LOADGEN_SRCS CONFIGURE_DEPENDS ${CMAKE_SOURCE_DIR}/bench/loadgen/*.cc)
add_executable(bandit-loadgen ${LOADGEN_SRCS})
target_include_directories(bandit-loadgen PRIVATE ${CMAKE_SOURCE_DIR})
target_link_libraries(bandit-loadgen PRIVATE bandit_bench_echo_proto bandit_client bandit_core
  nlohmann_json::nlohmann_json absl::flags absl::flags_parse absl::str_format Threads::Threads)

# tests/bench: the loadgen's policy configs (derived from the registry) checked in-process.
if(TARGET test_bench)
  target_sources(test_bench PRIVATE ${CMAKE_SOURCE_DIR}/bench/loadgen/workload.cc
                                    ${CMAKE_SOURCE_DIR}/bench/loadgen/inprocess.cc)
  target_link_libraries(test_bench PRIVATE nlohmann_json::nlohmann_json)
endif()

# ---- smoke check: loadgen runs 1 s against a banditd on port 0 (no timing asserted) ----
add_test(NAME bench_loadgen_smoke
  COMMAND /bin/sh ${CMAKE_SOURCE_DIR}/bench/loadgen/smoke.sh
          ${CMAKE_BINARY_DIR}/bin/banditd ${CMAKE_BINARY_DIR}/bin/bandit-loadgen
          ${CMAKE_BINARY_DIR}/bin/bandit-echo)
set_tests_properties(bench_loadgen_smoke PROPERTIES TIMEOUT 60)

# ---- the Personalizer HTTP API against gRPC (bench/http/personalizer_bench.cc) ----
add_executable(bandit-personalizer-bench ${CMAKE_SOURCE_DIR}/bench/http/personalizer_bench.cc)
target_include_directories(bandit-personalizer-bench PRIVATE ${CMAKE_SOURCE_DIR})
set_source_files_properties(${CMAKE_SOURCE_DIR}/bench/http/personalizer_bench.cc PROPERTIES
  COMPILE_OPTIONS "${HTTPLIB_CFLAGS}")
target_link_libraries(bandit-personalizer-bench PRIVATE bandit_client ${HTTPLIB_LINK_LIBRARIES}
  absl::flags absl::flags_parse Threads::Threads)

# ---- the client side of bench/vw/daemon_compare.py in C++ (bench/vw/daemon_load.cc) ----
add_executable(bandit-vw-daemon-load ${CMAKE_SOURCE_DIR}/bench/vw/daemon_load.cc)
target_include_directories(bandit-vw-daemon-load PRIVATE ${CMAKE_SOURCE_DIR})
target_link_libraries(bandit-vw-daemon-load PRIVATE bandit_client absl::flags absl::flags_parse
  Threads::Threads)
