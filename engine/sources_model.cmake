# engine/sources_model.cmake — model loading: config.json, safetensors, weights.
target_sources(ns_engine PRIVATE
  ${CMAKE_CURRENT_LIST_DIR}/model_config.c
  ${CMAKE_CURRENT_LIST_DIR}/safetensors.c
  ${CMAKE_CURRENT_LIST_DIR}/model_load.c)
