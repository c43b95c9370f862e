// troupe-shell: inspect and steer a running cluster through its chief.
//   troupe-shell --connect HOST:PORT              interactive (line editing,
//                                                 history, tab completion)
//   troupe-shell --connect HOST:PORT -c "status"  one command, for scripts
//                                 [--json]        the chief's JSON as is
//                                 [--run ID]      only if the chief runs ID
//                                 [--key F | --tls-ca F --tls-cert F --tls-key
//                                 F]
// Exit codes: 0 done; 1 the command failed or the chief is unreachable;
// 2 bad command line.
#include <chrono>
#include <functional>
#include <future>
#include <cstdlib>
#include <cstring>
#include <iostream>
#include <string>
#include <vector>

#include <CLI/CLI.hpp>

#include "actors/protocol/chief_protocol.hpp"
#include "actors/net/remote.hpp"
#include "runtime/base/errc.hpp"
#include "actors/protocol/system_config.hpp"
#include "apps/command_line.hpp"
#include "apps/launch/link_options.hpp"
#include "apps/launch/reach_chief.hpp"
#include "apps/shell/chief_request.hpp"
#include "apps/shell/shell_command.hpp"
#include "apps/shell/shell_render.hpp"

#ifdef TROUPE_HAVE_LIBEDIT
#include <editline/readline.h>
#endif

namespace {

using namespace troupe;

/// How long the shell waits for the chief's answer to a command.
constexpr auto answer_patience = std::chrono::seconds(60);

/// Prints `text` and returns 0, or prints the error and returns 1.
int report(const caf::expected<std::string>& text) {
  if (!text) {
    std::cerr << "troupe-shell: error: " << describe(text.error()) << std::endl;
    return 1;
  }
  std::cout << *text << std::flush;
  return 0;
}

/// The chief this shell talks to, and where it was reached.
struct session {
  caf::actor_system& sys;
  chief_actor chief;
  std::string where; ///< host:port
};

/// Parses one command line, sends the chief the typed request and prints
/// the answer. Returns the exit code.
int execute(const session& s, const std::string& line, bool raw_json) {
  auto parsed = parse_shell_command(line);
  if (!parsed)
    return report(parsed.error());
  // Shared with the actor that sets it, which may outlive this frame.
  auto slot = std::make_shared<std::promise<caf::expected<std::string>>>();
  auto answer = slot->get_future();
  request_chief(s.sys, s.chief, s.where, *parsed, raw_json, answer_patience,
                [slot](caf::expected<std::string> text) {
                  slot->set_value(std::move(text));
                });
  return report(answer.get());
}

#ifdef TROUPE_HAVE_LIBEDIT
// Completion. The first word completes to a command; later words to an
// actor: the roles, and the shards' and workers' ids as the chief lists
// them at that moment (asked with a short timeout on each Tab).
const std::vector<std::string> actor_roles{"chief", "feeder",
                                           "shard:", "worker:"};

struct completion_source {
  caf::actor_system* sys = nullptr;
  chief_actor chief;
};
completion_source completing;

/// "shard:0", ..., "worker:0", ... from the chief's status; none when it
/// does not answer within a second (the roles still complete).
std::vector<std::string> live_actor_ids() {
  std::vector<std::string> ids;
  if (completing.sys == nullptr)
    return ids;
  caf::scoped_actor self{*completing.sys};
  self->request(completing.chief, std::chrono::seconds(1), stats_atom_v)
    .receive(
      [&](cluster_view& v) {
        for (auto& s : v.shards)
          ids.push_back("shard:" + std::to_string(s.id));
        for (auto& w : v.workers)
          ids.push_back("worker:" + std::to_string(w.id));
      },
      [](caf::error&) {});
  return ids;
}

std::vector<std::string> candidates; // of the completion in progress

char* next_match(const char* text, int state) {
  static size_t index;
  if (state == 0) {
    index = 0;
    bool first_word = rl_line_buffer == nullptr
                      || std::strchr(rl_line_buffer, ' ') == nullptr;
    if (first_word) {
      candidates = shell_command_words();
    } else {
      candidates = actor_roles;
      for (auto& id : live_actor_ids())
        candidates.push_back(std::move(id));
    }
  }
  auto len = std::strlen(text);
  while (index < candidates.size()) {
    auto& w = candidates[index++];
    if (w.compare(0, len, text) == 0)
      return strdup(w.c_str());
  }
  return nullptr;
}

char** complete(const char* text, int, int) {
  rl_attempted_completion_over = 1;
  char** matches = rl_completion_matches(text, next_match);
  // A lone "worker:" or "shard:" wants its number next, not a space:
  // with one, "inspect wor<Tab>0" would read "inspect worker: 0".
  bool role_only = matches != nullptr && matches[1] == nullptr
                   && std::strchr(matches[0], ':') != nullptr
                   && matches[0][std::strlen(matches[0]) - 1] == ':';
  rl_completion_append_character = role_only ? '\0' : ' ';
  return matches;
}
#endif

/// The chief's run id and config digest, or an error.
caf::expected<std::pair<std::string, std::string>>
run_identity_of(caf::actor_system& sys, const chief_actor& chief) {
  caf::scoped_actor self{sys};
  caf::expected<std::pair<std::string, std::string>> out{
    caf::sec::request_timeout};
  self->request(chief, std::chrono::seconds(30), who_atom_v)
    .receive(
      [&](std::string& run_id, std::string& digest) {
        if (run_id.empty())
          out = make_error(errc::bad_format, "the chief names no run yet");
        else
          out = std::make_pair(std::move(run_id), std::move(digest));
      },
      [&](caf::error& err) { out = std::move(err); });
  return out;
}

/// Reads lines until "quit" or end of input.
int interactive(const session& s, bool raw_json) {
  const auto& where = s.where;
  std::cout << "connected to the chief at " << where
            << "; \"help\" lists the commands, \"quit\" leaves" << std::endl;
  std::string prompt = "troupe " + where + "> ";
#ifdef TROUPE_HAVE_LIBEDIT
  std::string history;
  if (const char* home = std::getenv("HOME"))
    history = std::string{home} + "/.troupe_history";
  rl_attempted_completion_function = complete;
  completing = {&s.sys, s.chief};
  if (!history.empty())
    read_history(history.c_str());
#endif
  for (;;) {
    std::string line;
#ifdef TROUPE_HAVE_LIBEDIT
    char* raw = readline(prompt.c_str());
    if (raw == nullptr)
      break;
    line = raw;
    std::free(raw);
#else
    std::cout << prompt << std::flush;
    if (!std::getline(std::cin, line))
      break;
#endif
    auto begin = line.find_first_not_of(" \t");
    if (begin == std::string::npos)
      continue;
    line = line.substr(begin);
#ifdef TROUPE_HAVE_LIBEDIT
    add_history(line.c_str());
    if (!history.empty())
      write_history(history.c_str());
#endif
    if (line == "quit" || line == "exit")
      break;
    execute(s, line, raw_json);
  }
#ifdef TROUPE_HAVE_LIBEDIT
  completing = {}; // no actor handle outlives the actor system
#endif
  return 0;
}

} // namespace

int main(int argc, char** argv) {
  CLI::App app{"Inspect and steer a running troupe cluster."};
  std::string address, command;
  bool raw_json = false;
  double timeout_s = 5;
  app.add_option("--connect", address, "the chief's HOST:PORT")->required();
  app.add_option("-c,--command", command, "run one command and exit");
  app.add_flag("--json", raw_json,
               "print the chief's JSON replies as they are");
  app.add_option("--timeout", timeout_s, "seconds to wait for the chief")
    ->check(CLI::PositiveNumber);
  std::string expected_run;
  app.add_option("--run", expected_run,
                 "the run id this shell is for: refuse a chief that runs "
                 "another (it prints its id when the run starts)");
  link_options links;
  add_link_options(app, links);
  if (auto code = troupe::parse_command_line(app, argc, argv, "troupe-shell"))
    return *code;
  auto addr = parse_address(address);
  if (!addr) {
    std::cerr << "troupe-shell: error: --connect: " << describe(addr.error())
              << std::endl;
    return 2;
  }
  auto guard = load_link_guard(links, nullptr, "", key_use::must_exist);
  if (!guard) {
    std::cerr << "troupe-shell: error: " << describe(guard.error())
              << std::endl;
    return 2;
  }
  caf::actor_system_config cfg;
  init_config(cfg);
  init_network(cfg, cluster_config{});
  caf::actor_system sys{cfg};
  apply_link_security(sys, std::move(*guard), links);
  auto chief = reach_chief(sys, addr->first, addr->second, timeout_s);
  if (!chief) {
    std::cerr << "troupe-shell: error: " << describe(chief.error())
              << std::endl;
    return 1;
  }
  auto run = run_identity_of(sys, *chief);
  if (!run) {
    std::cerr << "troupe-shell: error: " << describe(run.error()) << std::endl;
    return 1;
  }
  if (!expected_run.empty() && run->first != expected_run) {
    std::cerr << "troupe-shell: error: the chief at " << address << " runs run "
              << run->first << ", not " << expected_run << std::endl;
    return 1;
  }
  if (!command.empty())
    return execute(session{sys, *chief, address}, command, raw_json);
  std::cout << "run " << run->first << ", config digest " << run->second
            << std::endl;
  return interactive(session{sys, *chief, address}, raw_json);
}
