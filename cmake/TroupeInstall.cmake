# What `cmake --install` puts under the prefix, and the Debian package
# `cpack -G DEB` makes of it:
#   bin/                       the programs (troupe-node, troupe-train, ...)
#   lib/libtroupe_*.a          every library of cmake/TroupeLayers.cmake
#   include/troupe/...         their public headers, under the paths troupe's
#                              own files include them by
#                              ("runtime/base/errc.hpp")
#   lib/cmake/troupe/          the CMake package: find_package(troupe) and
#                              target_link_libraries(app troupe::troupe)
#   share/man/man1/            a page per program, made by help2man from its
#                              --help and --version (when help2man is there)
#   lib/python3/dist-packages/troupe/   the Python module, when it is built
#                              (python/CMakeLists.txt)
# troupe::troupe is everything (the actors, the models, the runtime and the
# metrics endpoint); troupe::troupe_runtime and the other layers can be
# linked alone.
# (GNUInstallDirs is included at the top: runtime/ names the include
# folder in troupe_base's install interface.)
include(CMakePackageConfigHelpers)

set(TROUPE_INSTALL_CMAKEDIR "${CMAKE_INSTALL_LIBDIR}/cmake/troupe")
set(TROUPE_INSTALL_INCLUDEDIR "${CMAKE_INSTALL_INCLUDEDIR}/troupe")
set(TROUPE_PROGRAMS troupe-node troupe-train troupe-shell troupe-predict
                    troupe-clicks)
# What each man page's NAME line says.
set(TROUPE_ABOUT_troupe-node "run a node of a troupe training cluster")
set(TROUPE_ABOUT_troupe-train "train a model in one process")
set(TROUPE_ABOUT_troupe-shell "inspect and steer a running troupe cluster")
set(TROUPE_ABOUT_troupe-predict "predict classes with a troupe checkpoint")
set(TROUPE_ABOUT_troupe-clicks "write click logs drawn from a planted model")

add_library(troupe INTERFACE)
target_link_libraries(troupe INTERFACE troupe_actors troupe_metrics)
add_library(troupe::troupe ALIAS troupe)

get_property(troupe_libraries GLOBAL PROPERTY TROUPE_LIBRARIES)
install(TARGETS ${troupe_libraries} troupe_runtime troupe_actors
                troupe_warnings troupe
        EXPORT troupeTargets
        ARCHIVE DESTINATION "${CMAKE_INSTALL_LIBDIR}"
        INCLUDES DESTINATION "${TROUPE_INSTALL_INCLUDEDIR}")
install(EXPORT troupeTargets NAMESPACE troupe::
        DESTINATION "${TROUPE_INSTALL_CMAKEDIR}")

# Headers: the libraries' public ones (cmake/TroupePublicHeaders.cmake
# says which), and the generated build switches.
include(TroupePublicHeaders)
troupe_public_headers(troupe_headers)
foreach(header IN LISTS troupe_headers)
  get_filename_component(folder "${header}" DIRECTORY)
  install(FILES "${PROJECT_SOURCE_DIR}/${header}"
          DESTINATION "${TROUPE_INSTALL_INCLUDEDIR}/${folder}")
endforeach()
install(FILES "${PROJECT_BINARY_DIR}/generated/runtime/base/build_config.hpp"
        DESTINATION "${TROUPE_INSTALL_INCLUDEDIR}/runtime/base")

configure_package_config_file(
  "${PROJECT_SOURCE_DIR}/cmake/troupeConfig.cmake.in"
  "${PROJECT_BINARY_DIR}/troupeConfig.cmake"
  INSTALL_DESTINATION "${TROUPE_INSTALL_CMAKEDIR}")
write_basic_package_version_file(
  "${PROJECT_BINARY_DIR}/troupeConfigVersion.cmake"
  COMPATIBILITY SameMinorVersion)
# FindCAF.cmake goes along: Debian's CAF 0.17 has no CMake package.
install(FILES "${PROJECT_BINARY_DIR}/troupeConfig.cmake"
              "${PROJECT_BINARY_DIR}/troupeConfigVersion.cmake"
              "${PROJECT_SOURCE_DIR}/cmake/FindCAF.cmake"
        DESTINATION "${TROUPE_INSTALL_CMAKEDIR}")

install(TARGETS ${TROUPE_PROGRAMS} RUNTIME DESTINATION "${CMAKE_INSTALL_BINDIR}")

# Man pages from each program's --help and --version, built with the
# programs (help2man runs them; they print and exit without a cluster).
find_program(TROUPE_HELP2MAN help2man)
if(TROUPE_HELP2MAN)
  set(pages)
  # Compressed as Debian's policy wants them (gzip -9n: no name or time
  # stamp, so the same page makes the same bytes).
  find_program(TROUPE_GZIP gzip REQUIRED)
  foreach(program IN LISTS TROUPE_PROGRAMS)
    set(page "${PROJECT_BINARY_DIR}/man/${program}.1")
    add_custom_command(
      OUTPUT "${page}.gz"
      COMMAND ${CMAKE_COMMAND} -E make_directory "${PROJECT_BINARY_DIR}/man"
      COMMAND "${TROUPE_HELP2MAN}" --no-info --no-discard-stderr
              --source=troupe "--name=${TROUPE_ABOUT_${program}}"
              --output=${page} $<TARGET_FILE:${program}>
      COMMAND "${TROUPE_GZIP}" -9nf "${page}"
      DEPENDS ${program}
      COMMENT "Writing the man page of ${program}"
      VERBATIM)
    list(APPEND pages "${page}.gz")
  endforeach()
  add_custom_target(man_pages ALL DEPENDS ${pages})
  install(FILES ${pages} DESTINATION "${CMAKE_INSTALL_MANDIR}/man1")
else()
  message(STATUS "help2man not found: no man pages "
                 "(apt-get install help2man)")
endif()

# cpack -G DEB: one package with the programs, the libraries, the headers
# and the CMake package. The shared libraries the programs link are found
# by dpkg-shlibdeps; OpenBLAS is opened at run time, so it is named here.
# Building against the package needs the -dev packages of what troupe's
# headers include, and the Python module needs NumPy: it recommends them.
set(CPACK_PACKAGE_NAME troupe)
set(CPACK_PACKAGE_VENDOR troupe)
set(CPACK_PACKAGE_DESCRIPTION_SUMMARY
    "parameter-server training runtime built on CAF actors")
set(CPACK_PACKAGE_CONTACT "troupe developers <troupe@localhost>")
set(CPACK_GENERATOR DEB)
set(CPACK_DEBIAN_FILE_NAME DEB-DEFAULT)
set(CPACK_DEBIAN_PACKAGE_SECTION science)
set(CPACK_DEBIAN_PACKAGE_SHLIBDEPS ON)
set(CPACK_DEBIAN_PACKAGE_DEPENDS "libopenblas0")
set(CPACK_DEBIAN_PACKAGE_RECOMMENDS
    "libcaf-dev, libssl-dev, nlohmann-json3-dev, zlib1g-dev, python3-numpy")
include(CPack)
