# Documentation checks (ctest -R docs_): the README stays true to the binaries.
# Included (OPTIONAL) by the top-level CMakeLists.txt after the test wiring.
find_program(BANDIT_DOCS_PYTHON python3 PATHS /usr/bin NO_DEFAULT_PATH)
if(NOT BANDIT_DOCS_PYTHON)
  set(BANDIT_DOCS_PYTHON python3)
endif()
# Every banditd flag has a row in README.md's "Server flags" table, with its default, and every
# row is a flag (tests/docs/readme_flags_check.py).
add_test(NAME docs_readme_flags
  COMMAND ${BANDIT_DOCS_PYTHON} ${CMAKE_SOURCE_DIR}/tests/docs/readme_flags_check.py
          $<TARGET_FILE:banditd> ${CMAKE_SOURCE_DIR}/README.md ${CMAKE_SOURCE_DIR})
set_tests_properties(docs_readme_flags PROPERTIES TIMEOUT 120)
# Every served policy (core/registry.cc) and every document under docs/ is named in README.md.
add_test(NAME docs_readme_lists
  COMMAND ${BANDIT_DOCS_PYTHON} ${CMAKE_SOURCE_DIR}/tests/docs/readme_lists_check.py
          ${CMAKE_SOURCE_DIR})
