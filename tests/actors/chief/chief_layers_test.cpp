// The chief's files call downward only (actors/chief/chief_ops.hpp gives the
// order): a file may call the functions of the files below it, never of
// one beside or above it, so no circle can form again. Read from the
// sources: each file's functions are those it defines at column 0.
#include <boost/test/unit_test.hpp>

#include <fstream>
#include <iterator>
#include <map>
#include <regex>
#include <set>
#include <string>
#include <vector>

namespace {

struct layer {
  std::string file;
  int rank;
};

/// Lower ranks are called by higher ones; equal ranks not at all.
const std::vector<layer> layers{
  {"chief_base", 0},         {"chief_placement", 1}, {"chief_progress", 1},
  {"chief_takeover", 2},     {"chief_recovery", 3},  {"chief_start", 4},
  {"chief_registration", 5}, {"chief_shell", 6},     {"chief", 7},
};

std::string source_of(const std::string& file) {
  std::ifstream in{std::string{TROUPE_SOURCE_DIR} + "/actors/chief/" + file
                   + ".cpp"};
  return {std::istreambuf_iterator<char>{in}, {}};
}

/// The functions a file defines: a name and "(" at column 0 after a
/// return type, or alone (its type on the line before), on a line that
/// does not end a declaration.
std::set<std::string> defined_in(const std::string& text) {
  static const std::regex def{
    R"(^(?:[A-Za-z_][\w:<>,]*[ *&]+)*([a-z_][a-z0-9_]*)\()"};
  std::set<std::string> out;
  size_t at = 0;
  while (at < text.size()) {
    auto end = text.find('\n', at);
    if (end == std::string::npos)
      end = text.size();
    auto line = text.substr(at, end - at);
    std::smatch m;
    if (!line.empty() && line.back() != ';' && std::regex_search(line, m, def))
      out.insert(m[1]);
    at = end + 1;
  }
  return out;
}

} // namespace

BOOST_AUTO_TEST_SUITE(chief_layers)

BOOST_AUTO_TEST_CASE(the_chief_files_call_downward_only) {
  std::map<std::string, std::string> text;
  std::map<std::string, std::set<std::string>> defines;
  for (auto& l : layers) {
    text[l.file] = source_of(l.file);
    BOOST_REQUIRE_MESSAGE(!text[l.file].empty(),
                          "actors/chief/" << l.file << ".cpp is missing");
    defines[l.file] = defined_in(text[l.file]);
  }
  // A sanity check of the reading itself.
  BOOST_TEST(defines["chief_base"].count("fail_run") == 1u);
  BOOST_TEST(defines["chief_recovery"].count("on_shard_down") == 1u);
  size_t checked = 0;
  for (auto& caller : layers)
    for (auto& callee : layers) {
      if (callee.file == caller.file || callee.rank < caller.rank)
        continue;
      for (auto& fn : defines[callee.file]) {
        // The same name defined by the caller too is its own.
        if (defines[caller.file].count(fn) > 0)
          continue;
        std::regex call{"[^\\w.>]" + fn + "\\("};
        ++checked;
        BOOST_TEST(!std::regex_search(text[caller.file], call),
                   caller.file << ".cpp calls " << fn << " of " << callee.file
                               << ".cpp, which is not below it");
      }
    }
  BOOST_TEST(checked > 50u);
}

BOOST_AUTO_TEST_SUITE_END()
