# Shared compile settings and helper functions for every hubload target.

add_library(hubload_warnings INTERFACE)
target_compile_options(hubload_warnings INTERFACE
  $<$<COMPILE_LANGUAGE:CXX>:-Wall -Wextra -Wpedantic -Wno-unused-parameter>
  $<$<AND:$<COMPILE_LANGUAGE:CXX>,$<BOOL:${HUBLOAD_WERROR}>>:-Werror>)

if(HUBLOAD_SANITIZE)
  add_compile_options(-fsanitize=address,undefined -fno-omit-frame-pointer -fno-sanitize-recover=undefined)
  add_link_options(-fsanitize=address,undefined)
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
  target_compile_definitions(${name} PRIVATE HUBLOAD_VERSION="${PROJECT_VERSION}")
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
