# Layers the build enforces. Every library of troupe is one folder and one
# target, made with troupe_library(); its USES are the troupe targets it
# links, and the folders of those targets (and theirs, down to runtime/base)
# are the only troupe folders its files may include from. A file that
# includes across a layer its target does not link stops the build with a
# line naming the file, the include and the folders it may use, before the
# compiler runs. Includes outside troupe's folders (CAF, the C++ library,
# nlohmann, httplib, CUDA) are not checked.
#
#   troupe_library(troupe_data FOLDER runtime/data
#                  SOURCES dataset.cpp ...
#                  USES troupe_base
#                  [PUBLIC_LIBS ...] [PRIVATE_LIBS ...]
#                  [MAY_INCLUDE folder-or-file ...])
#
# INTERNAL: a library of the programs' own (apps/), not installed.
# MAY_INCLUDE widens the check without a link: a header-only file another
# layer owns, or a folder included under #if (gpu/ from models/ when CUDA
# is built). troupe_program() applies the same check to an executable's
# own sources, and troupe_group() makes an interface target over several
# layers (troupe_runtime, troupe_actors) for the code above them. The global
# property TROUPE_LIBRARIES lists every library made here.

set(TROUPE_LAYER_ROOTS runtime models gpu actors apps bench tests python)

function(_troupe_allowed_of out)
  set(allowed)
  foreach(dep IN LISTS ARGN)
    if(TARGET ${dep})
      get_property(dep_allowed TARGET ${dep} PROPERTY TROUPE_ALLOWED)
      list(APPEND allowed ${dep_allowed})
    endif()
  endforeach()
  set(${out} ${allowed} PARENT_SCOPE)
endfunction()

# Writes what check_layers.cmake reads: target `name`'s `files`, the
# folders (or files) it may include from, relative to `source_dir`.
function(troupe_write_layer_list list_file name files allowed source_dir)
  file(WRITE "${list_file}"
       "set(TARGET \"${name}\")\nset(FILES \"${files}\")\n"
       "set(ALLOWED \"${allowed}\")\nset(ROOTS \"${TROUPE_LAYER_ROOTS}\")\n"
       "set(SOURCE_DIR \"${source_dir}\")\n")
endfunction()

function(_troupe_check_layers name files allowed)
  set(list_file "${CMAKE_CURRENT_BINARY_DIR}/${name}.layers.cmake")
  troupe_write_layer_list("${list_file}" ${name} "${files}" "${allowed}"
                          "${PROJECT_SOURCE_DIR}")
  set(stamp "${CMAKE_CURRENT_BINARY_DIR}/${name}.layers.stamp")
  add_custom_command(
    OUTPUT "${stamp}"
    COMMAND ${CMAKE_COMMAND} -DLIST_FILE=${list_file} -DSTAMP=${stamp}
            -P "${PROJECT_SOURCE_DIR}/cmake/check_layers.cmake"
    DEPENDS ${files} "${list_file}"
            "${PROJECT_SOURCE_DIR}/cmake/check_layers.cmake"
    COMMENT "Checking the includes of ${name} against its layers"
    VERBATIM)
  add_custom_target(${name}_layers DEPENDS "${stamp}")
  add_dependencies(${name} ${name}_layers)
endfunction()

function(troupe_library name)
  cmake_parse_arguments(A "INTERNAL" "FOLDER"
                        "SOURCES;USES;PUBLIC_LIBS;PRIVATE_LIBS;MAY_INCLUDE"
                        ${ARGN})
  add_library(${name} STATIC ${A_SOURCES})
  if(NOT A_INTERNAL)
    set_property(GLOBAL APPEND PROPERTY TROUPE_LIBRARIES ${name})
  endif()
  target_link_libraries(${name} PUBLIC ${A_USES} ${A_PUBLIC_LIBS}
                                PRIVATE ${A_PRIVATE_LIBS} troupe_warnings)
  _troupe_allowed_of(allowed ${A_USES})
  list(APPEND allowed ${A_FOLDER} ${A_MAY_INCLUDE})
  list(REMOVE_DUPLICATES allowed)
  set_property(TARGET ${name} PROPERTY TROUPE_ALLOWED ${allowed})
  # Every file of the folder, headers included, whether or not listed.
  file(GLOB files CONFIGURE_DEPENDS
       "${PROJECT_SOURCE_DIR}/${A_FOLDER}/*.hpp"
       "${PROJECT_SOURCE_DIR}/${A_FOLDER}/*.cpp"
       "${PROJECT_SOURCE_DIR}/${A_FOLDER}/*.cu")
  _troupe_check_layers(${name} "${files}" "${allowed}")
endfunction()

function(troupe_program name)
  cmake_parse_arguments(A "" "" "SOURCES;USES;PRIVATE_LIBS;MAY_INCLUDE" ${ARGN})
  add_executable(${name} ${A_SOURCES})
  target_link_libraries(${name} PRIVATE ${A_USES} ${A_PRIVATE_LIBS}
                                        troupe_warnings)
  troupe_check_sources(${name} SOURCES ${A_SOURCES} USES ${A_USES}
                       MAY_INCLUDE ${A_MAY_INCLUDE})
endfunction()

# The check of troupe_program() for a target made another way (the Python
# module, by pybind11_add_module): its own sources may include their own
# folders and the layers it USES.
function(troupe_check_sources name)
  cmake_parse_arguments(A "" "" "SOURCES;USES;MAY_INCLUDE" ${ARGN})
  _troupe_allowed_of(allowed ${A_USES})
  # A program may include the headers of its own folder (apps/, apps/shell/).
  set(files)
  foreach(source IN LISTS A_SOURCES)
    get_filename_component(path "${source}" ABSOLUTE)
    list(APPEND files "${path}")
    file(RELATIVE_PATH rel "${PROJECT_SOURCE_DIR}" "${path}")
    get_filename_component(folder "${rel}" DIRECTORY)
    list(APPEND allowed "${folder}")
  endforeach()
  list(APPEND allowed ${A_MAY_INCLUDE})
  list(REMOVE_DUPLICATES allowed)
  _troupe_check_layers(${name} "${files}" "${allowed}")
endfunction()

function(troupe_group name)
  add_library(${name} INTERFACE)
  target_link_libraries(${name} INTERFACE ${ARGN})
  _troupe_allowed_of(allowed ${ARGN})
  list(REMOVE_DUPLICATES allowed)
  set_property(TARGET ${name} PROPERTY TROUPE_ALLOWED ${allowed})
endfunction()
