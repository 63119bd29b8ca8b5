# engine/sources_tok.cmake — the tokenizer (tok_*): tokenizer.json loading, normalization
# and pre-tokenization, BPE merges, decoding and streaming, the `tokenize` CLI.
target_sources(ns_engine PRIVATE
  tok_util.c
  tok_load.c
  tok_steps.c
  tok_pre.c
  tok_bpe.c
  tok_decode.c
  tok_cli.c)

# NFC normalization (Qwen2) is exact with ICU; without it NFC is applied as the identity
# (documented in tokenizer.h; tests/unit/tok checks whichever the build has).
option(NANOSERVE_ICU "Use ICU (icu-uc) for exact NFC in tokenizers when it is found" ON)
set(NS_TOK_ICU OFF)
if(NANOSERVE_ICU)
  pkg_check_modules(NS_ICU QUIET IMPORTED_TARGET icu-uc)
  if(NS_ICU_FOUND)
    target_link_libraries(ns_engine PRIVATE PkgConfig::NS_ICU)
    target_compile_definitions(ns_engine PRIVATE NS_TOK_HAVE_ICU=1)
    set(NS_TOK_ICU ON)
  endif()
endif()
message(STATUS "nanoserve: tokenizer NFC via ICU ${NS_TOK_ICU}")
