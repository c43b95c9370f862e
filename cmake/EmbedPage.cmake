# cmake -DPAGE_DIR=... -DOUT=... -P EmbedPage.cmake: writes OUT, a C++ file
# holding the files of the metrics port's page (apps/web/page/) as raw
# string literals, so that the programs serve the page with no file of
# their own to find at run time (apps/web/page_files.hpp).
set(entries "")
foreach(spec "index.html|/|text/html" "page.js|/page.js|text/javascript"
             "hmac.js|/hmac.js|text/javascript"
             "events.js|/events.js|text/javascript"
             "history.js|/history.js|text/javascript"
             "steer.js|/steer.js|text/javascript"
             "page.css|/page.css|text/css"
             "favicon.svg|/favicon.svg|image/svg+xml")
  string(REPLACE "|" ";" parts "${spec}")
  list(GET parts 0 name)
  list(GET parts 1 path)
  list(GET parts 2 type)
  file(READ "${PAGE_DIR}/${name}" body)
  string(FIND "${body}" ")troupe_page\"" clash)
  if(NOT clash EQUAL -1)
    message(FATAL_ERROR "${PAGE_DIR}/${name} holds the raw string's end")
  endif()
  string(APPEND entries
         "    {\"${path}\", \"${type}; charset=utf-8\",\n"
         "     R\"troupe_page(${body})troupe_page\"},\n")
endforeach()
file(WRITE "${OUT}.new"
"// Generated from apps/web/page/ by cmake/EmbedPage.cmake: do not edit.
#include \"apps/web/page_files.hpp\"

namespace troupe {

const std::vector<page_file>& page_files() {
  static const std::vector<page_file> files{
${entries}  };
  return files;
}

} // namespace troupe
")
# Rewritten only when it changed, so an unchanged page compiles nothing.
file(COPY_FILE "${OUT}.new" "${OUT}" ONLY_IF_DIFFERENT)
file(REMOVE "${OUT}.new")
