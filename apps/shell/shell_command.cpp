#include "apps/shell/shell_command.hpp"

#include <cmath>
#include <cstdint>
#include <cstdlib>
#include <sstream>

#include "runtime/base/errc.hpp"

namespace troupe {

namespace {

using verb = shell_command::verb;

caf::error usage(const std::string& what) {
  return make_error(errc::invalid_argument, what);
}

std::vector<std::string> words(const std::string& line) {
  std::istringstream in{line};
  std::vector<std::string> out;
  for (std::string w; in >> w;)
    out.push_back(w);
  return out;
}

/// "worker:3", "worker 3" -> worker 3; "feeder" -> the feeder. Nothing
/// for an unknown role or a number that is not one.
bool parse_actor(const std::vector<std::string>& w, size_t at, actor_ref& out,
                 bool& known_role) {
  known_role = false;
  if (w.size() <= at)
    return false;
  auto name = w[at];
  std::string role, num;
  auto colon = name.find(':');
  if (colon != std::string::npos) {
    role = name.substr(0, colon);
    num = name.substr(colon + 1);
  } else {
    role = name;
    if (w.size() > at + 1)
      num = w[at + 1];
  }
  if (role == "chief" || role == "feeder") {
    known_role = true;
    out.role = role == "chief" ? actor_role::chief : actor_role::feeder;
    out.index = -1;
    return num.empty();
  }
  if (role != "shard" && role != "worker")
    return false;
  known_role = true;
  out.role = role == "shard" ? actor_role::shard : actor_role::worker;
  char* end = nullptr;
  long index = std::strtol(num.c_str(), &end, 10);
  if (num.empty() || *end != '\0' || index < 0 || index > INT32_MAX)
    return false;
  out.index = static_cast<int32_t>(index);
  return true;
}

struct word_verb {
  const char* word;
  verb what;
  bool takes_arguments;
};

const word_verb table[] = {
  {"help", verb::help, false},
  {"status", verb::status, true},
  {"nodes", verb::nodes, true},
  {"workers", verb::workers, true},
  {"shards", verb::shards, false},
  {"inspect", verb::inspect, true},
  {"add-worker", verb::add_worker, true},
  {"kill", verb::kill, true},
  {"checkpoint", verb::checkpoint, false},
  {"export", verb::export_tables, false},
  {"set", verb::tune, true},
  {"pause", verb::pause, false},
  {"resume", verb::resume, false},
  {"stop", verb::stop, false},
  {"add-shard", verb::add_shard, true},
  {"drain", verb::drain, true},
};

} // namespace

const char* const shell_help =
  "status [all]           every actor: role, node, state, step/version, "
  "examples/s, staleness, restarts (past 40, the counts by state, those "
  "not running, then the first others; all: every one)\n"
  "inspect ACTOR          one actor's full state (chief, feeder, shard:N, "
  "worker:N)\n"
  "nodes [all] | workers [all] | shards\n"
  "add-worker [N] [NODE]  start N more workers (default 1, on the least "
  "loaded node)\n"
  "kill ACTOR             kill a worker or shard (fault drill)\n"
  "add-shard NODE         one shard more, on NODE: parameters and rows "
  "move while the workers go on\n"
  "drain shard:N          shard N's parameters and rows move to the "
  "others; it stops\n"
  "checkpoint             write a checkpoint now\n"
  "export                 write an export of the tables now (a delta "
  "after the first)\n"
  "set lr VALUE           the shards' base learning rate\n"
  "pause | resume         stop / restart handing out batches\n"
  "stop                   finish the run after the steps in flight\n"
  "help                   this list\n"
  "quit | exit            leave the shell (the run goes on)";

const std::vector<std::string>& shell_command_words() {
  static const std::vector<std::string> out = [] {
    std::vector<std::string> w;
    for (auto& e : table)
      w.emplace_back(e.word);
    w.emplace_back("quit");
    return w;
  }();
  return out;
}

caf::expected<shell_command> parse_shell_command(const std::string& line) {
  // A longer line is not split into words at all.
  if (line.size() > max_shell_line)
    return usage("a command line of " + std::to_string(line.size())
                 + " characters (at most " + std::to_string(max_shell_line)
                 + ")");
  auto w = words(line);
  if (w.empty())
    return usage("empty command; try help");
  shell_command c;
  c.word = w[0];
  const word_verb* found = nullptr;
  for (auto& e : table)
    if (c.word == e.word)
      found = &e;
  if (!found)
    return usage("unknown command \"" + c.word + "\"; try help");
  c.what = found->what;
  if (!found->takes_arguments) {
    if (w.size() > 1)
      return usage(c.word + " takes no arguments, got \"" + w[1] + "\"");
    return c;
  }
  switch (c.what) {
    case verb::status:
    case verb::nodes:
    case verb::workers:
      if (w.size() > 2 || (w.size() == 2 && w[1] != "all"))
        return usage("usage: " + c.word + " [all]");
      c.all = w.size() == 2;
      return c;
    case verb::inspect: {
      bool known = false;
      if (w.size() < 2)
        return usage("usage: inspect ACTOR (chief, feeder, shard:N, "
                     "worker:N)");
      if (!parse_actor(w, 1, c.target, known))
        return usage(known ? "usage: inspect ACTOR (chief, feeder, shard:N, "
                             "worker:N)"
                           : "unknown actor \"" + w[1]
                               + "\" (chief, feeder, shard:N, worker:N)");
      return c;
    }
    case verb::kill: {
      bool known = false;
      if (!parse_actor(w, 1, c.target, known)
          || (c.target.role != actor_role::shard
              && c.target.role != actor_role::worker))
        return usage("usage: kill worker:N | shard:N");
      return c;
    }
    case verb::add_worker: {
      if (w.size() > 3)
        return usage("usage: add-worker [N] [NODE]");
      if (w.size() > 1) {
        char* end = nullptr;
        long n = std::strtol(w[1].c_str(), &end, 10);
        if (*end != '\0' || n < 1 || n > 1024)
          return usage("add-worker: N must be 1..1024, got \"" + w[1] + "\"");
        c.count = static_cast<int32_t>(n);
      }
      if (w.size() > 2)
        c.node = w[2];
      return c;
    }
    case verb::add_shard:
      if (w.size() != 2)
        return usage("usage: add-shard NODE");
      c.node = w[1];
      return c;
    case verb::drain: {
      bool known = false;
      if (w.size() != 2 || !parse_actor(w, 1, c.target, known)
          || c.target.role != actor_role::shard)
        return usage("usage: drain shard:N");
      return c;
    }
    case verb::tune: {
      if (w.size() != 3 || w[1] != "lr")
        return usage("usage: set lr VALUE");
      c.key = tune_key::lr;
      char* end = nullptr;
      c.value = std::strtod(w[2].c_str(), &end);
      if (*end != '\0' || !(c.value > 0) || !std::isfinite(c.value))
        return usage("set lr: expected a number > 0, got \"" + w[2] + "\"");
      return c;
    }
    default: return c;
  }
}

} // namespace troupe
