# engine/sources_engine.cmake — the engine thread and its API, the continuous-batching
# scheduler, requests and backend selection (included by engine/CMakeLists.txt).
target_sources(ns_engine PRIVATE
  ${CMAKE_CURRENT_LIST_DIR}/request.c
  ${CMAKE_CURRENT_LIST_DIR}/sched.c
  ${CMAKE_CURRENT_LIST_DIR}/engine.c
  ${CMAKE_CURRENT_LIST_DIR}/engine_load.c
  ${CMAKE_CURRENT_LIST_DIR}/engine_step.c
  ${CMAKE_CURRENT_LIST_DIR}/backend_select.c)
# engine.h includes cfg.h: users of the engine API see the settings
target_link_libraries(ns_engine PUBLIC ns_config Threads::Threads)
