# Shared compile settings and helper functions for every hubload target.

add_library(hubload_warnings INTERFACE)
target_compile_options(hubload_warnings INTERFACE
  $<$<COMPILE_LANGUAGE:CXX>:-Wall -Wextra -Wpedantic -Wno-unused-parameter>
  $<$<AND:$<COMPILE_LANGUAGE:CXX>,$<BOOL:${HUBLOAD_WERROR}>>:-Werror>)
if(HUBLOAD_SANITIZE)
  # GCC 12's flow-sensitive warnings report false positives in instrumented code
  # (-Wmaybe-uninitialized inside std::regex at -O1 with ASan, off here): under
  # the sanitizers they are not errors; the plain build checks them with -Werror.
  set(_flow_warnings uninitialized array-bounds stringop-overflow stringop-overread
      restrict free-nonheap-object dangling-pointer use-after-free null-dereference)
  list(TRANSFORM _flow_warnings PREPEND "-Wno-error=")
  target_compile_options(hubload_warnings INTERFACE "$<$<COMPILE_LANGUAGE:CXX>:-Wno-maybe-uninitialized;${_flow_warnings}>")
endif()

if(HUBLOAD_SANITIZE)
  # -O1, as the AddressSanitizer documentation advises: reports stay exact and
  # the LibTorch TUs build about a quarter faster than at -O2 (CI builds the
  # whole suite this way).
  add_compile_options(-fsanitize=address,undefined -fno-omit-frame-pointer -fno-sanitize-recover=undefined
                      $<$<COMPILE_LANGUAGE:CXX>:-O1>)
  add_link_options(-fsanitize=address,undefined)
endif()

# LLVM's lld links the test and CLI executables several times faster than GNU
# ld (pipeline_tests under ASan: 10.6 s -> 2.9 s); used when the compiler
# accepts it (tools/install-deps.sh installs it), HUBLOAD_LLD=OFF keeps the default.
option(HUBLOAD_LLD "Link with lld when available" ON)
if(HUBLOAD_LLD)
  include(CheckLinkerFlag)
  check_linker_flag(CXX "-fuse-ld=lld" HUBLOAD_HAS_LLD)
  if(HUBLOAD_HAS_LLD)
    add_link_options($<$<LINK_LANGUAGE:CXX>:-fuse-ld=lld>)
  endif()
endif()

# hubload_add_library(NAME SOURCES ... [PUBLIC_LIBS ...] [PRIVATE_LIBS ...])
# A static component library, installed and exported as hubload::NAME.
function(hubload_add_library name)
  cmake_parse_arguments(A "" "" "SOURCES;PUBLIC_LIBS;PRIVATE_LIBS" ${ARGN})
  add_library(${name} STATIC ${A_SOURCES})
  add_library(hubload::${name} ALIAS ${name})
  target_include_directories(${name} PUBLIC
    $<BUILD_INTERFACE:${PROJECT_SOURCE_DIR}/include>
    $<INSTALL_INTERFACE:${CMAKE_INSTALL_INCLUDEDIR}>
    PRIVATE ${PROJECT_SOURCE_DIR})
  target_link_libraries(${name} PUBLIC ${A_PUBLIC_LIBS} PRIVATE ${A_PRIVATE_LIBS} $<BUILD_INTERFACE:hubload_warnings>)
  # No implicit nlohmann::json conversions in any library: JSON from outside
  # is read through util::JsonIn (util/json.h; tools/lint-json.sh checks the rest).
  target_compile_definitions(${name} PRIVATE HUBLOAD_VERSION="${PROJECT_VERSION}" JSON_USE_IMPLICIT_CONVERSIONS=0)
  if(HUBLOAD_SANITIZE)
    # A package built with the sanitizers links their runtimes into its users
    # (the find_package consumer test runs against such an install).
    target_link_options(${name} INTERFACE -fsanitize=address,undefined)
  endif()
  install(TARGETS ${name} EXPORT hubloadTargets
          ARCHIVE DESTINATION ${CMAKE_INSTALL_LIBDIR})
endfunction()

# hubload_add_test(NAME SOURCES ... [LIBS ...] [LABELS ...] [TIMEOUT s])
# A GoogleTest executable registered with ctest (tests discovered per case).
function(hubload_add_test name)
  cmake_parse_arguments(A "" "TIMEOUT" "SOURCES;LIBS;LABELS" ${ARGN})
  add_executable(${name} ${A_SOURCES})
  target_include_directories(${name} PRIVATE ${PROJECT_SOURCE_DIR} ${PROJECT_SOURCE_DIR}/tests)
  target_link_libraries(${name} PRIVATE ${A_LIBS} hubload_testing GTest::gtest GTest::gmock GTest::gtest_main hubload_warnings)
  if(HUBLOAD_SANITIZE)
    # Test code itself at -O0 under the sanitizers (the libraries it checks stay
    # at -O1): the large gtest TUs build much faster, and the checks lose nothing.
    # Test code also without UBSan's vptr check (every member access of a
    # polymorphic object: gtest fixtures, mocks); the libraries and the CLI keep
    # it. At -O0 that check alone is ~30% of a test TU's compile time
    # (answers_test.cc: 17.2 s -> 12.3 s); every other ASan/UBSan check stays.
    target_compile_options(${name} PRIVATE $<$<COMPILE_LANGUAGE:CXX>:-O0 -fno-sanitize=vptr>)
  endif()
  if(NOT A_TIMEOUT)
    set(A_TIMEOUT 300)
  endif()
  if(NOT A_LABELS)
    set(A_LABELS unit)
  endif()
  gtest_discover_tests(${name}
    DISCOVERY_TIMEOUT 60
    PROPERTIES TIMEOUT ${A_TIMEOUT} LABELS "${A_LABELS}"
               ENVIRONMENT "HUBLOAD_SHARED_DATA=${HUBLOAD_SHARED_DATA}")
  # HUBLOAD_BIN / HUBLOAD_SOURCE_DIR: set by hubload_testing (tests/testing/util.cc) from
  # compile definitions, since gtest_discover_tests keeps only one ENVIRONMENT entry.
endfunction()
