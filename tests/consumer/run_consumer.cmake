# cmake -P script: install, configure + build the consumer, run it.
file(REMOVE_RECURSE ${WORK_DIR})
set(PREFIX ${WORK_DIR}/prefix)
execute_process(COMMAND ${CMAKE_COMMAND} --install ${BUILD_DIR} --prefix ${PREFIX}
                RESULT_VARIABLE rc OUTPUT_QUIET)
if(NOT rc EQUAL 0)
  message(FATAL_ERROR "cmake --install failed: ${rc}")
endif()
if(NOT EXISTS ${PREFIX}/lib/cmake/hubload/hubloadConfig.cmake)
  message(FATAL_ERROR "hubloadConfig.cmake not installed")
endif()
execute_process(COMMAND ${CMAKE_COMMAND} -S ${CONSUMER_SRC} -B ${WORK_DIR}/build -G ${GENERATOR}
                        -DCMAKE_PREFIX_PATH=${PREFIX} -DCMAKE_BUILD_TYPE=Release
                RESULT_VARIABLE rc)
if(NOT rc EQUAL 0)
  message(FATAL_ERROR "consumer configure failed: ${rc}")
endif()
execute_process(COMMAND ${CMAKE_COMMAND} --build ${WORK_DIR}/build RESULT_VARIABLE rc)
if(NOT rc EQUAL 0)
  message(FATAL_ERROR "consumer build failed: ${rc}")
endif()
function(run_consumer name)
  execute_process(COMMAND ${WORK_DIR}/build/${name} ${SHARED_DATA}
                  RESULT_VARIABLE rc OUTPUT_VARIABLE out ERROR_VARIABLE err)
  message(STATUS "${name} output: ${out}${err}")
  if(NOT rc EQUAL 0)
    message(FATAL_ERROR "${name} failed: ${rc}")
  endif()
endfunction()
run_consumer(consumer)

# hubload::core: links no LibTorch (no libtorch*/libc10* among the NEEDED entries) and runs.
execute_process(COMMAND readelf -d ${WORK_DIR}/build/consumer_core RESULT_VARIABLE rc OUTPUT_VARIABLE dyn)
if(NOT rc EQUAL 0)
  message(FATAL_ERROR "readelf -d consumer_core failed: ${rc}")
endif()
if(NOT dyn MATCHES "NEEDED")
  message(FATAL_ERROR "readelf -d consumer_core lists no NEEDED entry: ${dyn}")
endif()
if(dyn MATCHES "libtorch" OR dyn MATCHES "libc10")
  message(FATAL_ERROR "consumer_core (hubload::core) needs LibTorch: ${dyn}")
endif()
run_consumer(consumer_core)

# find_package(hubload COMPONENTS core) with LibTorch made unfindable: configures,
# builds and runs (a C++ user who only downloads needs no LibTorch installed).
execute_process(COMMAND ${CMAKE_COMMAND} -S ${CONSUMER_SRC} -B ${WORK_DIR}/build-core -G ${GENERATOR}
                        -DCMAKE_PREFIX_PATH=${PREFIX} -DCMAKE_BUILD_TYPE=Release -DCORE_ONLY=ON
                        -DCMAKE_DISABLE_FIND_PACKAGE_Torch=ON
                RESULT_VARIABLE rc)
if(NOT rc EQUAL 0)
  message(FATAL_ERROR "core-only consumer configure (no Torch) failed: ${rc}")
endif()
execute_process(COMMAND ${CMAKE_COMMAND} --build ${WORK_DIR}/build-core RESULT_VARIABLE rc)
if(NOT rc EQUAL 0)
  message(FATAL_ERROR "core-only consumer build failed: ${rc}")
endif()
execute_process(COMMAND ${WORK_DIR}/build-core/consumer_core ${SHARED_DATA} RESULT_VARIABLE rc)
if(NOT rc EQUAL 0)
  message(FATAL_ERROR "core-only consumer_core failed: ${rc}")
endif()

# The installed CLI: bin/hubload hands `load` over to libexec/hubload/hubload-torch.
if(EXISTS ${PREFIX}/libexec/hubload/hubload-torch)
  execute_process(COMMAND ${PREFIX}/bin/hubload load --help RESULT_VARIABLE rc OUTPUT_VARIABLE out ERROR_VARIABLE err)
  if(NOT rc EQUAL 0 OR NOT out MATCHES "--max-shards-in-flight")
    message(FATAL_ERROR "installed hubload load --help (hand-over to libexec/hubload/hubload-torch): ${rc} ${out}${err}")
  endif()
endif()
