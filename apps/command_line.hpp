// Command-line parsing for troupe's commands, with one error format:
// "<program>: error: <what> (see --help)" and exit code 2.
#pragma once

#include <iostream>
#include <optional>

#include <CLI/CLI.hpp>

namespace troupe {

/// Parses argv into `app`. Returns the exit code when the program should
/// stop now (0 after printing --help, 2 after a bad flag), nullopt to go
/// on.
inline std::optional<int> parse_command_line(CLI::App& app, int argc,
                                             char** argv,
                                             const char* program) {
  try {
    app.parse(argc, argv);
  } catch (const CLI::CallForHelp& e) {
    return app.exit(e);
  } catch (const CLI::ParseError& e) {
    std::cerr << program << ": error: " << e.what() << " (see --help)"
              << std::endl;
    return 2;
  }
  return std::nullopt;
}

} // namespace troupe
