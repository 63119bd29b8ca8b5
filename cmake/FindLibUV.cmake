# FindLibUV — libuv from Debian's libuv1-dev. Prefers the static archive
# (libuv_a.a) so the binary runs where libuv is not installed.
# Defines LibUV::LibUV and LibUV_FOUND.
find_package(PkgConfig QUIET)
if(PkgConfig_FOUND)
  pkg_check_modules(PC_LIBUV QUIET libuv)
endif()
find_path(LIBUV_INCLUDE_DIR uv.h HINTS ${PC_LIBUV_INCLUDE_DIRS})
find_library(LIBUV_STATIC_LIBRARY NAMES libuv_a.a libuv.a HINTS ${PC_LIBUV_LIBRARY_DIRS})
find_library(LIBUV_SHARED_LIBRARY NAMES uv HINTS ${PC_LIBUV_LIBRARY_DIRS})
if(LIBUV_STATIC_LIBRARY)
  set(LIBUV_LIBRARY ${LIBUV_STATIC_LIBRARY})
else()
  set(LIBUV_LIBRARY ${LIBUV_SHARED_LIBRARY})
endif()
include(FindPackageHandleStandardArgs)
find_package_handle_standard_args(LibUV REQUIRED_VARS LIBUV_LIBRARY LIBUV_INCLUDE_DIR)
if(LibUV_FOUND AND NOT TARGET LibUV::LibUV)
  add_library(LibUV::LibUV UNKNOWN IMPORTED)
  set_target_properties(LibUV::LibUV PROPERTIES IMPORTED_LOCATION ${LIBUV_LIBRARY}
                        INTERFACE_INCLUDE_DIRECTORIES ${LIBUV_INCLUDE_DIR})
  # the static archive needs libuv's own system libraries
  target_link_libraries(LibUV::LibUV INTERFACE Threads::Threads ${CMAKE_DL_LIBS} rt)
endif()
mark_as_advanced(LIBUV_INCLUDE_DIR LIBUV_STATIC_LIBRARY LIBUV_SHARED_LIBRARY)
