// Command-line parsing for troupe's commands, with one error format:
// "<program>: error: <what> (see --help)" and exit code 2, and one
// --version: "<program> (troupe) <version>", the form help2man reads.
#pragma once

#include <iostream>
#include <optional>
#include <string>

#include <CLI/CLI.hpp>

#include "runtime/base/build_config.hpp"

namespace troupe {

/// What --version prints: the program, the package and its version, then
/// whether the build has the GPU backend.
inline std::string version_text(const char* program) {
  return std::string{program} + " (troupe) " + TROUPE_VERSION
         + (TROUPE_HAVE_CUDA ? "\nbuilt with the CUDA backend"
                             : "\nbuilt without the CUDA backend");
}

/// Parses argv into `app`. Returns the exit code when the program should
/// stop now (0 after printing --help or --version, 2 after a bad flag),
/// nullopt to go on.
inline std::optional<int> parse_command_line(CLI::App& app, int argc,
                                             char** argv, const char* program) {
  app.set_version_flag("--version", version_text(program),
                       "Print the version and exit");
  try {
    app.parse(argc, argv);
  } catch (const CLI::CallForHelp& e) {
    return app.exit(e);
  } catch (const CLI::CallForVersion& e) {
    return app.exit(e);
  } catch (const CLI::ParseError& e) {
    std::cerr << program << ": error: " << e.what() << " (see --help)"
              << std::endl;
    return 2;
  }
  return std::nullopt;
}

} // namespace troupe
