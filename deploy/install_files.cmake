# install_files.cmake — run by `cmake --install` (see deploy/CMakeLists.txt) with the
# install-time CMAKE_INSTALL_PREFIX; file(INSTALL) adds $DESTDIR itself.
#   PREFIX /usr or /usr/local: config /etc/nanoserve/config.json, state /var/lib/nanoserve
#   any other PREFIX:          PREFIX/etc/nanoserve/config.json, PREFIX/var/lib/nanoserve
#   unit: NS_UNITDIR, else PREFIX/lib/systemd/system
set(prefix "${CMAKE_INSTALL_PREFIX}")
if(prefix STREQUAL "/usr" OR prefix STREQUAL "/usr/local")
  set(root "")
else()
  set(root "${prefix}")
endif()
set(NS_CONFDIR "${root}/etc/nanoserve")
set(NS_CONFIG "${NS_CONFDIR}/config.json")
set(NS_STATEDIR "${root}/var/lib/nanoserve")
set(NS_MODEL "${NS_STATEDIR}/models/default")
set(NS_BINDIR "${prefix}/${NS_BINDIR_REL}")
set(NS_DOCDIR "${prefix}/${NS_DOCDIR_REL}")
if(NS_UNITDIR STREQUAL "")
  set(NS_UNITDIR "${prefix}/lib/systemd/system")
endif()

# files made for this DESTDIR + prefix go in their own folder, so that installs into
# different prefixes (the deploy tests run in parallel) do not share them
string(MD5 key "$ENV{DESTDIR}|${prefix}|${NS_UNITDIR}")
set(gen "${NS_DEPLOY_BIN}/gen/${key}")

# the unit, with this prefix's paths
configure_file("${NS_DEPLOY_SRC}/systemd/nanoserve.service.in" "${gen}/nanoserve.service" @ONLY)
file(INSTALL DESTINATION "${NS_UNITDIR}" TYPE FILE
     PERMISSIONS OWNER_READ OWNER_WRITE GROUP_READ WORLD_READ
     FILES "${gen}/nanoserve.service")

# the config: the example (every setting at its default) with an absolute engine.model
# under the state folder; an existing config is the operator's and is never replaced
if(EXISTS "$ENV{DESTDIR}${NS_CONFIG}")
  message(STATUS "Keeping: $ENV{DESTDIR}${NS_CONFIG} (exists; the example is in ${NS_DOCDIR})")
else()
  file(READ "${NS_EXAMPLE_CONFIG}" cfg)
  string(REGEX REPLACE "(\"engine\"[^}]*\"model\": *)\"[^\"]*\"" "\\1\"${NS_MODEL}\"" out "${cfg}")
  if(out STREQUAL cfg)
    message(FATAL_ERROR "install: no engine.model in ${NS_EXAMPLE_CONFIG} to point at ${NS_MODEL}")
  endif()
  file(WRITE "${gen}/config.json" "${out}")
  file(INSTALL DESTINATION "${NS_CONFDIR}" TYPE FILE
       PERMISSIONS OWNER_READ OWNER_WRITE GROUP_READ WORLD_READ
       FILES "${gen}/config.json")
endif()

# the state folder; checkpoint folders go in models/ (engine.model names one)
file(MAKE_DIRECTORY "$ENV{DESTDIR}${NS_STATEDIR}/models")
message(STATUS "Models: place a checkpoint folder at $ENV{DESTDIR}${NS_MODEL} (engine.model)")
