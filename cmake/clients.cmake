# Python and Node clients (client/python, client/node): stubs generated at build time from proto/,
# npm dependencies installed from the committed lockfile, and their test suites in ctest
# (client_python, client_node), each against a real banditd started on port 0.
#
# Included by the top-level CMakeLists.txt after PROTO_FILES and banditd are defined.

# ---- Python: protoc + grpc_python_plugin -> ${CMAKE_BINARY_DIR}/python_gen/bandit_pb ----
find_program(BANDIT_PYTHON3 NAMES python3 PATHS /usr/bin NO_DEFAULT_PATH)  # Debian's, with python3-grpcio
find_program(GRPC_PYTHON_PLUGIN grpc_python_plugin)
set(BANDIT_PYTHON_GEN ${CMAKE_BINARY_DIR}/python_gen)
if(BANDIT_PYTHON3 AND GRPC_PYTHON_PLUGIN)
  set(_py_stamp ${BANDIT_PYTHON_GEN}/bandit_pb.stamp)
  add_custom_command(
    OUTPUT ${_py_stamp}
    COMMAND ${BANDIT_PYTHON3} ${CMAKE_SOURCE_DIR}/client/python/gen_stubs.py
            --proto_dir ${CMAKE_SOURCE_DIR}/proto --out ${BANDIT_PYTHON_GEN}
            --protoc ${Protobuf_PROTOC_EXECUTABLE} --plugin ${GRPC_PYTHON_PLUGIN}
            --stamp ${_py_stamp}
    DEPENDS ${PROTO_FILES} ${CMAKE_SOURCE_DIR}/client/python/gen_stubs.py
    COMMENT "Python stubs (bandit_pb) from proto/ -> ${BANDIT_PYTHON_GEN}"
    VERBATIM)
  add_custom_target(python_stubs ALL DEPENDS ${_py_stamp})

  add_test(NAME client_python
           COMMAND ${BANDIT_PYTHON3} -m unittest discover -s ${CMAKE_SOURCE_DIR}/client/python/tests -v)
  set_tests_properties(client_python PROPERTIES
    ENVIRONMENT "BANDITD=${CMAKE_BINARY_DIR}/bin/banditd;PYTHONPATH=${CMAKE_SOURCE_DIR}/client/python:${BANDIT_PYTHON_GEN};PYTHONDONTWRITEBYTECODE=1"
    TIMEOUT 120)
else()
  message(WARNING "clients: /usr/bin/python3 or grpc_python_plugin (protobuf-compiler-grpc) missing; "
                  "Python stubs and the client_python test are skipped (run scripts/deps.sh)")
endif()

# ---- Node: npm ci from the committed lockfile, only when node_modules is missing or stale ----
find_program(BANDIT_NODE node)
find_program(BANDIT_NPM npm)
set(_node_dir ${CMAKE_SOURCE_DIR}/client/node)
if(BANDIT_NODE AND BANDIT_NPM)
  set(_node_stamp ${CMAKE_BINARY_DIR}/client_node_deps.stamp)
  # Offline-safe: with node_modules present and not older than the lockfile, npm is not run.
  # A failed npm ci (no network) warns instead of failing the C++ build; client_node then fails.
  add_custom_command(
    OUTPUT ${_node_stamp}
    COMMAND sh -c "if [ ! -d node_modules/@grpc/grpc-js ] || [ package-lock.json -nt node_modules/.package-lock.json ]; then '${BANDIT_NPM}' ci --no-audit --no-fund --loglevel=error || { echo 'clients: npm ci failed in client/node; client_node will fail' >&2; exit 0; }; fi; touch '${_node_stamp}'"
    WORKING_DIRECTORY ${_node_dir}
    DEPENDS ${_node_dir}/package.json ${_node_dir}/package-lock.json
    COMMENT "npm ci in client/node (skipped when node_modules is current)"
    VERBATIM)
  add_custom_target(node_deps ALL DEPENDS ${_node_stamp})

  add_test(NAME client_node COMMAND ${BANDIT_NODE} --test test/client.test.js
           WORKING_DIRECTORY ${_node_dir})
  set_tests_properties(client_node PROPERTIES
    ENVIRONMENT "BANDITD=${CMAKE_BINARY_DIR}/bin/banditd;BANDIT_PROTO_DIR=${CMAKE_SOURCE_DIR}/proto"
    TIMEOUT 120)

  # src/policy_config.d.ts is what scripts/gen-types.js derives from proto/bandit/v1/policy.proto.
  add_test(NAME client_node_types COMMAND ${BANDIT_NODE} scripts/gen-types.js --check
           WORKING_DIRECTORY ${_node_dir})
  set_tests_properties(client_node_types PROPERTIES
    ENVIRONMENT "BANDIT_PROTO_DIR=${CMAKE_SOURCE_DIR}/proto" TIMEOUT 60)

  # Azure Personalizer's official Node SDKs (pinned versions, installed by the test into a temp
  # dir outside the repository) against banditd's Personalizer HTTP API.
  add_test(NAME personalizer_sdk COMMAND ${BANDIT_NODE} --test ${CMAKE_SOURCE_DIR}/tests/personalizer_sdk/sdk.test.js
           WORKING_DIRECTORY ${CMAKE_BINARY_DIR})
  set_tests_properties(personalizer_sdk PROPERTIES
    ENVIRONMENT "BANDITD=${CMAKE_BINARY_DIR}/bin/banditd"
    TIMEOUT 600)
else()
  message(WARNING "clients: node or npm missing; the client_node test is skipped (run scripts/deps.sh)")
endif()

# ---- Both packages as a user outside the repository gets them (pip wheel, npm pack) ----
if(BANDIT_PYTHON3 AND GRPC_PYTHON_PLUGIN AND BANDIT_NODE AND BANDIT_NPM)
  add_test(NAME client_packages
           COMMAND ${BANDIT_PYTHON3} ${CMAKE_SOURCE_DIR}/tests/clients/package_test.py)
  set_tests_properties(client_packages PROPERTIES
    ENVIRONMENT "BANDITD=${CMAKE_BINARY_DIR}/bin/banditd;PYTHONDONTWRITEBYTECODE=1"
    TIMEOUT 600)
endif()
