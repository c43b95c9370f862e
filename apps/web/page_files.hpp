// The metrics port's page: its files (apps/web/page/, built into the
// program by cmake/EmbedPage.cmake, so nothing is fetched from elsewhere
// when it is viewed) and how they are served. The page only reads the
// port's /api/ views and posts steering commands to it; its headers keep a
// browser from running anything but the page's own script
// (Content-Security-Policy), from framing it and from sending its address
// elsewhere.
#pragma once

#include <optional>
#include <string_view>
#include <vector>

#include "apps/web/http_server.hpp"

namespace troupe {

struct page_file {
  const char* path;         ///< "/", "/page.js", "/steer.js", ...
  const char* content_type; ///< "text/html; charset=utf-8", ...
  std::string_view body;
};

/// Generated at build time.
const std::vector<page_file>& page_files();

/// The answer to a GET or HEAD of one of the page's files; nullopt for any
/// other path; 405 for another method.
std::optional<http_response> page_answer(const http_request& req);

} // namespace troupe
