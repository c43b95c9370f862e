# Run by the build (cmake -P) for one target: refuses an include of a troupe
# folder the target's layer may not use. See TroupeLayers.cmake.
cmake_minimum_required(VERSION 3.18)
include("${LIST_FILE}")
set(errors "")
foreach(file IN LISTS FILES)
  file(STRINGS "${file}" lines REGEX "^[ \t]*#[ \t]*include[ \t]*\"")
  file(RELATIVE_PATH rel "${SOURCE_DIR}" "${file}")
  foreach(line IN LISTS lines)
    string(REGEX REPLACE "^[ \t]*#[ \t]*include[ \t]*\"([^\"]*)\".*" "\\1"
           included "${line}")
    string(REGEX MATCH "^[^/]+" root "${included}")
    if(NOT root IN_LIST ROOTS)
      continue()
    endif()
    get_filename_component(folder "${included}" DIRECTORY)
    if(folder IN_LIST ALLOWED OR included IN_LIST ALLOWED)
      continue()
    endif()
    string(REPLACE ";" ", " may "${ALLOWED}")
    string(APPEND errors
           "${rel} includes \"${included}\", but ${TARGET} may use only: "
           "${may} (the folders of the targets it links)\n")
  endforeach()
endforeach()
if(errors)
  message(FATAL_ERROR "layering: ${errors}")
endif()
file(TOUCH "${STAMP}")
