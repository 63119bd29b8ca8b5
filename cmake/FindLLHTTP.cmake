# FindLLHTTP — llhttp from Debian's node-llhttp, which ships the generated C
# sources (/usr/share/llhttp) and the header (/usr/share/include/llhttp) but no
# library: build them here into a static library. Defines LLHTTP::LLHTTP.
find_path(LLHTTP_INCLUDE_DIR llhttp.h PATHS /usr/share/include/llhttp /usr/include/llhttp /usr/include)
find_path(LLHTTP_SOURCE_DIR llhttp.c PATHS /usr/share/llhttp NO_DEFAULT_PATH)
include(FindPackageHandleStandardArgs)
find_package_handle_standard_args(LLHTTP REQUIRED_VARS LLHTTP_INCLUDE_DIR LLHTTP_SOURCE_DIR)
if(LLHTTP_FOUND AND NOT TARGET LLHTTP::LLHTTP)
  add_library(ns_llhttp STATIC ${LLHTTP_SOURCE_DIR}/llhttp.c ${LLHTTP_SOURCE_DIR}/api.c
                               ${LLHTTP_SOURCE_DIR}/http.c)
  target_include_directories(ns_llhttp SYSTEM PUBLIC ${LLHTTP_INCLUDE_DIR})
  # generated third-party code: build it quietly
  target_compile_options(ns_llhttp PRIVATE -w)
  # strict: CRLF checked after chunk data (else any two bytes pass: request smuggling) and
  # no blank before a header's colon, as llhttp 9 does by default
  target_compile_definitions(ns_llhttp PRIVATE LLHTTP_STRICT_MODE=1)
  add_library(LLHTTP::LLHTTP ALIAS ns_llhttp)
endif()
mark_as_advanced(LLHTTP_INCLUDE_DIR LLHTTP_SOURCE_DIR)
