# engine/sources_chat.cmake — chat templates: Jinja fingerprints and C renderers
# (included by engine/CMakeLists.txt).
target_sources(ns_engine PRIVATE ${CMAKE_CURRENT_LIST_DIR}/chat_tmpl.c)
