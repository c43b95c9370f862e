#include "apps/metrics/metrics_history.hpp"
#include "apps/metrics/view_api.hpp"

#include <sys/stat.h>

#include <algorithm>
#include <cctype>
#include <cstdio>
#include <filesystem>
#include <fstream>
#include <map>
#include <nlohmann/json.hpp>
#include <sstream>

namespace troupe {

namespace {

using json = nlohmann::json;
namespace fs = std::filesystem;

constexpr char progress_suffix[] = ".progress.csv";
constexpr char evaluations_suffix[] = ".csv";

bool ends_with(const std::string& s, const std::string& tail) {
  return s.size() >= tail.size()
         && s.compare(s.size() - tail.size(), tail.size(), tail) == 0;
}

/// The run's stem of a CSV file's name ("" when it is none); `progress`:
/// the progress lines' file.
std::string stem_of(const std::string& name, bool& progress) {
  progress = ends_with(name, progress_suffix);
  if (progress)
    return name.substr(0, name.size() - (sizeof progress_suffix - 1));
  if (ends_with(name, evaluations_suffix))
    return name.substr(0, name.size() - (sizeof evaluations_suffix - 1));
  return "";
}

/// `text` as one segment of a URL's path: every byte but the unreserved
/// ones %-escaped (a run's name may hold spaces, '#' or '?').
std::string url_segment(const std::string& text) {
  std::string out;
  for (unsigned char c : text)
    if (std::isalnum(c) || c == '-' || c == '_' || c == '.' || c == '~') {
      out += static_cast<char>(c);
    } else {
      char buf[4];
      std::snprintf(buf, sizeof buf, "%%%02X", c);
      out += buf;
    }
  return out;
}

/// A file name for Content-Disposition: what is not plainly safe in a
/// header's quoted string becomes '_'.
std::string safe_file_name(const std::string& name) {
  std::string out = name;
  for (auto& c : out)
    if (!std::isalnum(static_cast<unsigned char>(c)) && c != '-' && c != '_'
        && c != '.')
      c = '_';
  return out;
}

struct run_files {
  std::string stem;
  bool evaluations = false, progress = false;
  int64_t modified_ms = 0;
  std::string label;
};

/// The runs of `dir`, by the stem of their CSV files.
std::map<std::string, run_files> runs_in(const std::string& dir) {
  std::map<std::string, run_files> runs;
  std::error_code ec;
  for (auto& entry : fs::directory_iterator(dir, ec)) {
    if (!entry.is_regular_file(ec))
      continue;
    auto name = entry.path().filename().string();
    bool progress = false;
    auto stem = stem_of(name, progress);
    if (stem.empty())
      continue;
    auto& r = runs[stem];
    r.stem = stem;
    (progress ? r.progress : r.evaluations) = true;
    struct stat st {};
    if (::stat(entry.path().c_str(), &st) == 0)
      r.modified_ms = std::max<int64_t>(
        r.modified_ms, static_cast<int64_t>(st.st_mtim.tv_sec) * 1000
                         + st.st_mtim.tv_nsec / 1000000);
    if (r.label.empty()) { // "# run=... mode=..." opens each CSV file
      std::ifstream in{entry.path()};
      std::string first;
      if (std::getline(in, first) && first.rfind("# ", 0) == 0)
        r.label = first.substr(2);
    }
  }
  return runs;
}

} // namespace

std::optional<http_response> metrics_history(const std::string& dir,
                                             const http_request& req) {
  const std::string root = "/api/runs";
  if (req.path != root && req.path.rfind(root + "/", 0) != 0)
    return std::nullopt;
  if (req.method != "GET" && req.method != "HEAD") {
    auto r = json_answer(405, {{"error", req.path + " is read with GET"}});
    r.headers.emplace_back("Allow", "GET, HEAD");
    return r;
  }
  auto runs = dir.empty() ? std::map<std::string, run_files>{} : runs_in(dir);
  if (req.path == root) {
    std::vector<const run_files*> order;
    for (auto& [stem, r] : runs)
      order.push_back(&r);
    std::sort(order.begin(), order.end(),
              [](auto* a, auto* b) { return a->modified_ms < b->modified_ms; });
    json list = json::array();
    for (auto* r : order) {
      json one;
      one["file"] = r->stem;
      one["label"] = r->label;
      one["modified_unix_ms"] = r->modified_ms;
      auto url = root + "/" + url_segment(r->stem);
      one["evaluations"] = r->evaluations ? json(url + evaluations_suffix)
                                          : json(nullptr);
      one["progress"] = r->progress ? json(url + progress_suffix)
                                    : json(nullptr);
      list.push_back(std::move(one));
    }
    return json_answer(200, list);
  }
  // A file: only one of a run the folder lists, by its exact name.
  auto name = req.path.substr(root.size() + 1);
  bool progress = false;
  auto stem = stem_of(name, progress);
  auto it = runs.find(stem);
  if (stem.empty() || it == runs.end()
      || !(progress ? it->second.progress : it->second.evaluations))
    return json_answer(
      404, {{"error", "no run's file " + name
                        + " in the metrics folder (see /api/runs)"}});
  auto path = dir + "/" + name;
  std::error_code ec;
  auto size = fs::file_size(path, ec);
  if (ec)
    return json_answer(404, {{"error", name + ": " + ec.message()}});
  if (size > max_history_file_bytes)
    return json_answer(
      413, {{"error", name + " is " + std::to_string(size >> 20)
                        + " MiB: read it from the metrics folder"}});
  std::ifstream in{path, std::ios::binary};
  std::ostringstream body;
  body << in.rdbuf();
  http_response r{200, "text/csv; charset=utf-8", body.str(), {}, {}};
  r.headers.emplace_back("Content-Disposition", "attachment; filename=\""
                                                  + safe_file_name(name)
                                                  + "\"");
  return r;
}

} // namespace troupe
