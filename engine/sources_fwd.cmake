# engine/sources_fwd.cmake — the backend interface, the CPU backend, the forward pass,
# sampling glue, stop strings, `generate` and `bench` (included by engine/CMakeLists.txt).
target_sources(ns_engine PRIVATE
  ${CMAKE_CURRENT_LIST_DIR}/batch.c
  ${CMAKE_CURRENT_LIST_DIR}/cpu_pool.c
  ${CMAKE_CURRENT_LIST_DIR}/backend_cpu.c
  ${CMAKE_CURRENT_LIST_DIR}/forward.c
  ${CMAKE_CURRENT_LIST_DIR}/stop.c
  ${CMAKE_CURRENT_LIST_DIR}/gen.c
  ${CMAKE_CURRENT_LIST_DIR}/generate.c
  ${CMAKE_CURRENT_LIST_DIR}/bench.c)
target_link_libraries(ns_engine PUBLIC ns_kernels_ref PRIVATE ns_config)

