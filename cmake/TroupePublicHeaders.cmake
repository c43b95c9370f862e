# troupe_public_headers(out): the headers `cmake --install` installs, as
# paths relative to the source folder. A header is public when a file of
# another library folder, a program or the Python module includes it (it
# is its folder's face to the rest; examples/ count, as programs of a
# user's), or when a public header includes it;
# a header included only inside its own folder (the chief's state, the
# config reader's helpers) is private and stays in the tree. Tests and
# benchmarks do not count: they may look inside a folder.
function(troupe_public_headers out)
  set(roots runtime models gpu actors apps python examples)
  set(sources)
  foreach(root IN LISTS roots)
    file(GLOB_RECURSE found CONFIGURE_DEPENDS
         RELATIVE "${PROJECT_SOURCE_DIR}"
         "${PROJECT_SOURCE_DIR}/${root}/*.hpp"
         "${PROJECT_SOURCE_DIR}/${root}/*.cpp"
         "${PROJECT_SOURCE_DIR}/${root}/*.cu")
    list(APPEND sources ${found})
  endforeach()
  list(FILTER sources EXCLUDE REGEX "^apps/bench/")
  # Each file's troupe includes, kept per file for the closure below.
  set(public)
  foreach(file IN LISTS sources)
    file(STRINGS "${PROJECT_SOURCE_DIR}/${file}" lines
         REGEX "^#include \"[a-z_]+/[^\"]+\\.hpp\"")
    get_filename_component(folder "${file}" DIRECTORY)
    set(includes)
    foreach(line IN LISTS lines)
      string(REGEX REPLACE "^#include \"([^\"]+)\".*" "\\1" header "${line}")
      if(NOT EXISTS "${PROJECT_SOURCE_DIR}/${header}")
        continue() # a generated header (build_config.hpp)
      endif()
      list(APPEND includes "${header}")
      get_filename_component(header_folder "${header}" DIRECTORY)
      if(NOT header_folder STREQUAL folder)
        list(APPEND public "${header}")
      endif()
    endforeach()
    string(MAKE_C_IDENTIFIER "${file}" id)
    set(includes_${id} ${includes})
  endforeach()
  list(REMOVE_DUPLICATES public)
  # The closure: what a public header includes is public too.
  set(todo ${public})
  while(todo)
    list(POP_FRONT todo header)
    string(MAKE_C_IDENTIFIER "${header}" id)
    foreach(inner IN LISTS includes_${id})
      if(NOT inner IN_LIST public)
        list(APPEND public "${inner}")
        list(APPEND todo "${inner}")
      endif()
    endforeach()
  endwhile()
  # Only the installed libraries' headers: not the programs' own (apps/,
  # apps/launch/, apps/shell/ ...) but the metrics library's, nor python/.
  list(FILTER public INCLUDE REGEX "^(runtime|models|gpu|actors|apps/metrics)/")
  list(SORT public)
  set(${out} ${public} PARENT_SCOPE)
endfunction()
