# engine/sources_cuda.cmake — the CUDA backend (be_cuda_create): ops, weights, the step
# bracket and cuBLASLt GEMMs over kernels/ns_kernels_cuda (included by engine/CMakeLists.txt
# when the build has CUDA).
if(NS_HAVE_CUDA)
  target_sources(ns_engine PRIVATE
    ${CMAKE_CURRENT_LIST_DIR}/backend_cuda.c
    ${CMAKE_CURRENT_LIST_DIR}/cuda_weights.c
    ${CMAKE_CURRENT_LIST_DIR}/cuda_step.c
    ${CMAKE_CURRENT_LIST_DIR}/cuda_graph.c
    ${CMAKE_CURRENT_LIST_DIR}/cuda_gemm.c)
  target_link_libraries(ns_engine PUBLIC ns_kernels_cuda CUDA::cublasLt CUDA::cudart_static)
  target_compile_definitions(ns_engine PUBLIC NS_HAVE_CUDA_BACKEND=1)
endif()
