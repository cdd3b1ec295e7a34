# Settings that trade debugging detail for compile time. tools/test.sh and the CI stages use both;
# a plain `cmake -B build` keeps full debug information.
#
# TPNODE_DEBUG_INFO: debug information of RelWithDebInfo builds.
#   full   -g (CMake's default)
#   lines  line tables only (-g1): backtraces from gdb, sanitizers and crash handlers keep
#          file:line, variables and types are not described; compiles about a fifth faster.
set(TPNODE_DEBUG_INFO "full" CACHE STRING "RelWithDebInfo debug info: full (-g) or lines (line tables only)")
set_property(CACHE TPNODE_DEBUG_INFO PROPERTY STRINGS full lines)
if(TPNODE_DEBUG_INFO STREQUAL "lines")
  foreach(lang C CXX)
    string(REGEX REPLACE "(^| )-g( |$)" "\\1-g1\\2" CMAKE_${lang}_FLAGS_RELWITHDEBINFO
           "${CMAKE_${lang}_FLAGS_RELWITHDEBINFO}")
  endforeach()
elseif(NOT TPNODE_DEBUG_INFO STREQUAL "full")
  message(FATAL_ERROR "TPNODE_DEBUG_INFO='${TPNODE_DEBUG_INFO}': use 'full' or 'lines'")
endif()

# TPNODE_TEST_OPTIMIZE: the optimization flag of the test sources themselves (tests/) in
# optimized builds (Release, RelWithDebInfo). The product libraries the tests link keep the build
# type's; test bodies are not where tests spend their time, and -O1 compiles them in about 60 %
# of -O2's time (tests/node/api/api_server_test.cc: 11.9 against 20.0 CPU s). Empty: the build
# type's flag.
set(TPNODE_TEST_OPTIMIZE "-O1" CACHE STRING "Optimization flag of the test sources in optimized builds ('' = the build type's)")

# TPNODE_PCH: gtest and gmock precompiled once (tests/CMakeLists.txt) and reused by every test
# source, which parsed them for about 2.5 of its CPU seconds.
option(TPNODE_PCH "Precompile gtest and gmock once for every test source" ON)
