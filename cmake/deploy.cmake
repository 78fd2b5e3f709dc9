# Deployment part: the traffic generator and the checks of deploy/.
# Included (OPTIONAL) by the top-level CMakeLists.txt after the test wiring.

# ---- bandit-traffic: drives an instance over gRPC against a simulated environment ----
add_executable(bandit-traffic ${CMAKE_SOURCE_DIR}/bench/traffic/main.cc)
target_link_libraries(bandit-traffic PRIVATE bandit_client bandit_core absl::flags absl::flags_parse
  absl::flags_usage absl::str_format)

# ---- checks (ctest -R deploy); the tools come from scripts/deps.sh ----
find_program(BANDIT_PROMTOOL promtool)
find_program(BANDIT_PROMETHEUS prometheus)
find_program(BANDIT_DOCKER_COMPOSE docker-compose)
find_program(BANDIT_SYS_PYTHON python3 PATHS /usr/bin NO_DEFAULT_PATH)
foreach(tool BANDIT_PROMTOOL BANDIT_PROMETHEUS BANDIT_DOCKER_COMPOSE BANDIT_SYS_PYTHON)
  if(NOT ${tool})
    message(STATUS "deploy checks: ${tool} not found (run scripts/deps.sh); its tests will fail")
  endif()
endforeach()
if(NOT BANDIT_PROMTOOL)
  set(BANDIT_PROMTOOL promtool)
endif()
if(NOT BANDIT_PROMETHEUS)
  set(BANDIT_PROMETHEUS prometheus)
endif()
if(NOT BANDIT_DOCKER_COMPOSE)
  set(BANDIT_DOCKER_COMPOSE docker-compose)
endif()
if(NOT BANDIT_SYS_PYTHON)
  set(BANDIT_SYS_PYTHON python3)
endif()

set(DEPLOY_DIR ${CMAKE_SOURCE_DIR}/deploy)
set(DEPLOY_ENV
  "BANDITD=${CMAKE_BINARY_DIR}/bin/banditd"
  "BANDITCTL=${CMAKE_BINARY_DIR}/bin/banditctl"
  "BANDIT_TRAFFIC=${CMAKE_BINARY_DIR}/bin/bandit-traffic"
  "PROMETHEUS=${BANDIT_PROMETHEUS}"
  "BANDIT_SOURCE_DIR=${CMAKE_SOURCE_DIR}")

add_test(NAME deploy_promtool_check_config
  COMMAND ${BANDIT_PROMTOOL} check config ${DEPLOY_DIR}/prometheus/prometheus.yml)
add_test(NAME deploy_promtool_check_rules
  COMMAND ${BANDIT_PROMTOOL} check rules ${DEPLOY_DIR}/prometheus/alerts.yml)
# Unit tests of the alert rules on synthetic series: each alert fires when it should, not before.
add_test(NAME deploy_promtool_test_rules
  COMMAND ${BANDIT_PROMTOOL} test rules ${CMAKE_SOURCE_DIR}/tests/deploy/alerts_test.yml)
add_test(NAME deploy_compose_config
  COMMAND ${BANDIT_DOCKER_COMPOSE} -f ${DEPLOY_DIR}/docker-compose.yml config -q)
# The cluster stack (PostgreSQL, three --cluster nodes, HAProxy, Prometheus) and its HAProxy
# configuration; tests/cluster runs a real haproxy in front of real nodes.
find_program(BANDIT_HAPROXY haproxy PATHS /usr/sbin)
if(NOT BANDIT_HAPROXY)
  set(BANDIT_HAPROXY haproxy)
endif()
add_test(NAME deploy_cluster_compose_config
  COMMAND ${BANDIT_DOCKER_COMPOSE} -f ${DEPLOY_DIR}/cluster/docker-compose.yml config -q)
# The same cluster on a replicated PostgreSQL: Patroni (pg-1, pg-2) over etcd.
add_test(NAME deploy_cluster_patroni_compose_config
  COMMAND ${BANDIT_DOCKER_COMPOSE} -f ${DEPLOY_DIR}/cluster/docker-compose.patroni.yml config -q)
add_test(NAME deploy_haproxy_check
  COMMAND ${BANDIT_HAPROXY} -c -f ${DEPLOY_DIR}/cluster/haproxy.cfg)
# Dashboard JSON and alert expressions name only metrics a live banditd exports.
add_test(NAME deploy_dashboard_metrics
  COMMAND ${BANDIT_SYS_PYTHON} ${CMAKE_SOURCE_DIR}/tests/deploy/check_dashboard.py)
# The Dockerfile's runtime stage installs every package banditd/banditctl/bandit-traffic link to.
add_test(NAME deploy_dockerfile_runtime_libs
  COMMAND ${BANDIT_SYS_PYTHON} ${CMAKE_SOURCE_DIR}/tests/deploy/check_dockerfile.py)

# banditd + a real Prometheus on loopback: counts, reward sums and regret seen through the
# Prometheus HTTP API equal what the test sent.
add_executable(deploy_prometheus_integration
  ${CMAKE_SOURCE_DIR}/tests/deploy/prometheus_integration.cc)
target_link_libraries(deploy_prometheus_integration PRIVATE bandit_client bandit_core
  nlohmann_json::nlohmann_json GTest::gtest GTest::gmock GTest::gtest_main absl::strings)
target_include_directories(deploy_prometheus_integration PRIVATE ${CMAKE_SOURCE_DIR})
add_test(NAME deploy_prometheus_integration COMMAND deploy_prometheus_integration)

set_tests_properties(deploy_promtool_check_config deploy_promtool_check_rules
  deploy_promtool_test_rules deploy_compose_config deploy_dashboard_metrics
  deploy_dockerfile_runtime_libs deploy_prometheus_integration
  PROPERTIES ENVIRONMENT "${DEPLOY_ENV}" TIMEOUT 120)
