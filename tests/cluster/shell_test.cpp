// troupe-shell against a running multi-process cluster, non-interactive:
// status as JSON, and commands that act (pause stops the shards' version
// counters, resume starts them again, stop ends the run); the embedded
// mode's --listen port; a shell at a node's port told where the chief is.
#include <boost/test/unit_test.hpp>

#include <chrono>
#include <csignal>
#include <ctime>
#include <fstream>
#include <iterator>
#include <poll.h>
#include <pty.h>
#include <sys/wait.h>
#include <thread>
#include <unistd.h>

#include "running_cluster.hpp"

using namespace troupe::test;
using json = nlohmann::json;

namespace {

int64_t version_of_shard0(const temp_dir& dir, const cluster_spec& spec) {
  auto [code, out] = run_shell(dir, spec, "shards");
  BOOST_REQUIRE_MESSAGE(code == 0, out);
  auto shard = json::parse(out).at(0);
  BOOST_REQUIRE_MESSAGE(shard.contains("version"), out); // it answered
  return shard["version"].get<int64_t>();
}

void sleep_s(double s) {
  std::this_thread::sleep_for(std::chrono::duration<double>(s));
}

/// troupe-shell in a pseudo-terminal, typed at as a person would: its line
/// editor runs as in a terminal (raw mode, Tab completion, echo).
class terminal_shell {
public:
  terminal_shell(const temp_dir& dir, const std::string& address) {
    pid_ = forkpty(&master_, nullptr, nullptr, nullptr);
    if (pid_ == 0) {
      setenv("TERM", "vt100", 1);
      // Its history file goes to a HOME of its own; the cluster key stays
      // where the nodes of the user found it.
      if (const char* home = getenv("HOME"); home != nullptr)
        setenv("XDG_CONFIG_HOME", (std::string{home} + "/.config").c_str(), 0);
      setenv("HOME", dir.path().c_str(), 1);
      std::string exe = std::string{TROUPE_BINARY_DIR} + "/apps/troupe-shell";
      execl(exe.c_str(), "troupe-shell", "--connect", address.c_str(),
            static_cast<char*>(nullptr));
      _exit(127);
    }
  }
  ~terminal_shell() {
    if (pid_ > 0) {
      kill(pid_, SIGKILL);
      waitpid(pid_, nullptr, 0);
    }
    if (master_ >= 0)
      close(master_);
  }
  bool started() const { return pid_ > 0; }
  void type(const std::string& keys) {
    BOOST_REQUIRE(write(master_, keys.data(), keys.size())
                  == static_cast<ssize_t>(keys.size()));
  }
  /// Reads what the terminal shows until `needle` appears after what was
  /// read before, or `seconds` pass; true if it appeared.
  bool wait_for(const std::string& needle, double seconds) {
    auto from = seen_.size();
    auto until = std::chrono::steady_clock::now()
                 + std::chrono::duration<double>(seconds);
    while (seen_.find(needle, from) == std::string::npos) {
      auto left = std::chrono::duration_cast<std::chrono::milliseconds>(
        until - std::chrono::steady_clock::now());
      if (left.count() <= 0)
        return false;
      pollfd p{master_, POLLIN, 0};
      if (poll(&p, 1, static_cast<int>(left.count())) <= 0)
        continue;
      char buf[4096];
      auto n = read(master_, buf, sizeof buf);
      if (n <= 0)
        return false; // the shell is gone
      seen_.append(buf, static_cast<size_t>(n));
    }
    return true;
  }
  /// Its exit code once it ends within `seconds`, else -1.
  int wait(double seconds) {
    for (int i = 0; i < static_cast<int>(seconds * 20); ++i) {
      int status = 0;
      char buf[4096];
      while (poll_readable() && read(master_, buf, sizeof buf) > 0) {}
      if (waitpid(pid_, &status, WNOHANG) == pid_) {
        pid_ = -1;
        return WIFEXITED(status) ? WEXITSTATUS(status) : -1;
      }
      sleep_s(0.05);
    }
    return -1;
  }
  const std::string& seen() const { return seen_; }

private:
  bool poll_readable() {
    pollfd p{master_, POLLIN, 0};
    return poll(&p, 1, 0) > 0;
  }
  int master_ = -1;
  pid_t pid_ = -1;
  std::string seen_;
};

} // namespace

BOOST_AUTO_TEST_SUITE(shell)

BOOST_AUTO_TEST_CASE(status_json_and_commands_that_act) {
  temp_dir dir;
  cluster_spec spec;
  spec.epochs = 50; // ended by "stop"
  spec.checkpoint_every = 100000;
  spec.nodes = {{"chief"}, {"ps0", 2}, {"w0", 0, 1}};
  running_cluster cluster{dir, spec};
  auto& chief = cluster.chief();
  cluster.require_step(100);

  auto [code, out] = run_shell(dir, spec, "status");
  BOOST_REQUIRE_MESSAGE(code == 0, out);
  auto status = json::parse(out);
  BOOST_TEST(status["run"]["mode"] == "async");
  auto& actors = status["actors"];
  BOOST_REQUIRE_EQUAL(actors.size(), 5u); // chief, feeder, 2 shards, worker
  BOOST_TEST(actors[2]["id"] == "shard:0");
  BOOST_TEST(actors[2]["node"] == "ps0");
  BOOST_TEST(actors[4]["id"] == "worker:0");
  BOOST_TEST(actors[4]["node"] == "w0");
  BOOST_TEST(actors[4]["state"] == "running");
  for (auto key :
       {"step", "examples_per_sec", "staleness", "mean_staleness", "restarts"})
    BOOST_TEST(actors[4].contains(key), key);

  // The table for people has the same actors.
  auto [tcode, table] = run_shell(dir, spec, "status", false);
  BOOST_TEST(tcode == 0);
  BOOST_TEST(table.find("worker:0  worker  w0") != std::string::npos, table);

  // Each node's process says how much memory and CPU it uses.
  {
    auto [ncode, nodes_text] = run_shell(dir, spec, "nodes");
    BOOST_REQUIRE_MESSAGE(ncode == 0, nodes_text);
    auto nodes = json::parse(nodes_text);
    BOOST_REQUIRE_EQUAL(nodes.size(), 3u);
    for (auto& n : nodes) {
      BOOST_TEST(n["resident_bytes"].get<double>() > 20e6, n.dump());
      BOOST_TEST(n["heap_bytes"].get<double>() > 0, n.dump());
      BOOST_TEST(n["heap_bytes"].get<double>()
                   < n["resident_bytes"].get<double>(),
                 n.dump());
      BOOST_TEST(n["cpu_seconds"].get<double>() > 0, n.dump());
      // Started within this test, each process, and heard from as the
      // view was made (its agent answered; the chief is its own).
      const double now = static_cast<double>(std::time(nullptr));
      BOOST_TEST(n["process_started"].get<double>() > now - 600, n.dump());
      BOOST_TEST(n["process_started"].get<double>() <= now + 1, n.dump());
      BOOST_TEST(n["heard_seconds_ago"].get<double>() >= 0, n.dump());
      BOOST_TEST(n["heard_seconds_ago"].get<double>() < 1, n.dump());
    }
  }

  // A shell pointed at a worker node's port hears whose port it is and
  // where the chief is.
  {
    auto w0_address = "127.0.0.1:" + std::to_string(spec.nodes[2].port);
    process wrong{
      dir, "wrong", "troupe-shell", {"--connect", w0_address, "-c", "status"}};
    BOOST_TEST(wrong.wait(30) == 1);
    BOOST_TEST(wrong.err().find(w0_address
                                + " is node w0 of a troupe "
                                  "cluster, not its chief; the chief is at "
                                + chief_address(spec))
                 != std::string::npos,
               wrong.err());
  }

  // pause: once the leases out have settled the versions stop; resume:
  // they move again. Polled, since a loaded machine settles slower.
  BOOST_REQUIRE(run_shell(dir, spec, "pause").first == 0);
  int64_t v1 = -1;
  for (int i = 0; i < 30 && v1 < 0; ++i) {
    auto a = version_of_shard0(dir, spec);
    sleep_s(0.3);
    if (version_of_shard0(dir, spec) == a)
      v1 = a;
  }
  BOOST_REQUIRE(v1 >= 0);
  auto training_seconds = [&] {
    auto [c, text] = run_shell(dir, spec, "status");
    BOOST_REQUIRE_MESSAGE(c == 0, text);
    return json::parse(text)["run"]["seconds"].get<double>();
  };
  auto paused_at = training_seconds();
  sleep_s(0.7);
  auto v2 = version_of_shard0(dir, spec);
  BOOST_TEST(v1 == v2);
  // Paused time is not training time: the rates leave it out.
  BOOST_TEST(training_seconds() - paused_at < 0.1);
  const auto before_resume = chief.out().size();
  BOOST_REQUIRE(run_shell(dir, spec, "resume").first == 0);
  auto v3 = v2;
  for (int i = 0; i < 50 && v3 == v2; ++i) {
    sleep_s(0.2);
    v3 = version_of_shard0(dir, spec);
  }
  BOOST_TEST(v3 > v2);
  // The first evaluation line after the pause counts training time as the
  // status does, the pause left out, and its own duration apart:
  // "(N examples in E s; T s of training)".
  std::string line;
  for (int i = 0; i < 200 && line.empty(); ++i) {
    auto log = chief.out();
    auto at = log.find(" s of training)", before_resume);
    if (at != std::string::npos)
      line = log.substr(log.rfind('\n', at) + 1, at - log.rfind('\n', at) - 1);
    else
      sleep_s(0.1);
  }
  BOOST_REQUIRE_MESSAGE(!line.empty(), chief.out());
  auto status_seconds = training_seconds();
  double eval_seconds = std::stod(line.substr(line.rfind("; ") + 2));
  BOOST_TEST(line.find(" examples in ") != std::string::npos, line);
  BOOST_TEST(eval_seconds <= status_seconds + 0.05,
             line << " against " << status_seconds);

  auto [scode, set] = run_shell(dir, spec, "set lr 0.0005");
  BOOST_TEST(scode == 0, set);
  // The status has the rate the shards now use, the training loss, how
  // far the run is and how long it has left.
  auto [rcode, after_set] = run_shell(dir, spec, "status");
  BOOST_REQUIRE_MESSAGE(rcode == 0, after_set);
  auto run_now = json::parse(after_set)["run"];
  BOOST_TEST(run_now["learning_rate"] == 0.0005);
  BOOST_TEST(run_now["loss"].get<double>() > 0);
  BOOST_TEST(run_now["total_steps"].get<int64_t>()
             > run_now["steps"].get<int64_t>());
  BOOST_TEST(run_now["percent_done"].get<double>() > 0);
  BOOST_TEST(run_now["eta_seconds"].get<double>() > 0);
  auto [ccode, ck] = run_shell(dir, spec, "checkpoint");
  BOOST_TEST(ccode == 0, ck);
  BOOST_TEST(json::parse(ck)["checkpoint"].get<std::string>().find("/ckpt-")
             != std::string::npos);
  auto [icode, inspect] = run_shell(dir, spec, "inspect worker:0");
  BOOST_TEST(icode == 0, inspect);
  BOOST_TEST(json::parse(inspect)["node"] == "w0");

  // Fault drills: a killed worker is restarted by its node's agent; a
  // killed shard is started again and every shard restored from the
  // newest checkpoint, and the status says how many steps were lost.
  BOOST_REQUIRE(run_shell(dir, spec, "kill worker:0").first == 0);
  BOOST_REQUIRE(chief.wait_for_output("worker 0 failed", 20));
  BOOST_REQUIRE(run_shell(dir, spec, "kill shard:1").first == 0);
  BOOST_REQUIRE(chief.wait_for_output("steps lost, to be trained again", 30));
  json run;
  for (int i = 0; i < 50; ++i) { // until the workers run again
    auto [code2, st] = run_shell(dir, spec, "status");
    BOOST_REQUIRE_MESSAGE(code2 == 0, st);
    run = json::parse(st);
    if (run["actors"][4]["state"] == "running"
        && run["actors"][3]["state"] == "running")
      break;
    sleep_s(0.2);
  }
  BOOST_TEST(run["run"]["shard_recoveries"] == 1);
  BOOST_TEST(run["run"]["lost_steps"].get<int64_t>() > 0);
  BOOST_TEST(run["actors"][3]["state"] == "running"); // shard:1
  BOOST_TEST(run["actors"][3]["node"] == "ps0");
  BOOST_TEST(run["actors"][4]["restarts"] == 1); // worker:0

  // Bad commands: an error, exit 1, and the cluster goes on.
  auto [bcode, bad] = run_shell(dir, spec, "inspect shard:7");
  BOOST_TEST(bcode == 1);
  BOOST_TEST(bad.find("no shard 7") != std::string::npos, bad);
  for (auto [command, message] :
       std::vector<std::pair<std::string, std::string>>{
         {"set lr -1", "set lr: expected a number > 0, got \"-1\""},
         {"set momentum 0.5", "usage: set lr VALUE"},
         {"add-worker 0", "add-worker: N must be 1..1024, got \"0\""},
         {"add-worker 1 nowhere", "add-worker: no node \"nowhere\" is up"},
         {"add-worker 1 " + std::string(65, 'n'),
          "add-worker: a node name of 65 characters (at most 64)"},
         {"kill feeder", "usage: kill worker:N | shard:N"},
         {"inspect", "usage: inspect ACTOR"},
         {"status " + std::string(5000, 'x'),
          "a command line of 5007 characters (at most 4096)"}}) {
    auto [code3, said] = run_shell(dir, spec, command);
    BOOST_TEST(code3 == 1, command);
    BOOST_TEST(said.find(message) != std::string::npos, command + ": " + said);
  }
  auto [ucode, unknown] = run_shell(dir, spec, "frobnicate");
  BOOST_TEST(ucode == 1);
  BOOST_TEST(unknown.find("unknown command \"frobnicate\"")
               != std::string::npos,
             unknown);

  // Interactive, lines from a pipe: each command answered, "quit" leaves.
  write_file(dir.file("lines"), "nodes\nbogus\nworkers\nquit\nstatus\n");
  process repl{dir,
               "repl",
               "troupe-shell",
               {"--connect", chief_address(spec)},
               dir.file("lines")};
  BOOST_TEST(repl.wait(30) == 0);
  BOOST_TEST(repl.out().find("\nps0 ") != std::string::npos, repl.out());
  BOOST_TEST(repl.out().find("worker:0  worker  w0") != std::string::npos,
             repl.out());
  BOOST_TEST(repl.out().find("run multi-process-test") == std::string::npos,
             repl.out()); // nothing after quit
  BOOST_TEST(repl.err().find("unknown command \"bogus\"") != std::string::npos);

  // Interactive in a terminal: Tab after "inspect wor" completes to
  // "worker:" with no space after it (the chief lists worker:0 too, so
  // the longest common part is "worker:"), the 0 typed next makes
  // "inspect worker:0", and the worker's details come back.
  {
    terminal_shell term{dir, chief_address(spec)};
    BOOST_REQUIRE(term.started());
    BOOST_REQUIRE_MESSAGE(term.wait_for("> ", 30), term.seen());
    term.type("inspect wor\t");
    BOOST_REQUIRE_MESSAGE(term.wait_for("ker:", 10), term.seen());
    term.type("0\r");
    BOOST_TEST(term.wait_for("w0", 15), term.seen());
    BOOST_TEST(term.seen().find("usage: inspect") == std::string::npos,
               term.seen());
    term.type("quit\r");
    BOOST_TEST(term.wait(15) == 0, term.seen());
    std::ifstream in{dir.file(".troupe_history")};
    std::string history{std::istreambuf_iterator<char>{in}, {}};
    // libedit writes a space in its history file as \040.
    BOOST_TEST((history.find("inspect worker:0\n") != std::string::npos
                || history.find("inspect\\040worker:0\n") != std::string::npos),
               history);
  }

  // A shell left open while the run ends: its next command says at once
  // that the chief is gone, not after the answer timeout (60 s) as
  // "request_timeout".
  terminal_shell late{dir, chief_address(spec)};
  BOOST_REQUIRE(late.started());
  BOOST_REQUIRE_MESSAGE(late.wait_for("> ", 30), late.seen());

  BOOST_REQUIRE(run_shell(dir, spec, "stop").first == 0);
  cluster.require_finished(60);
  BOOST_TEST(chief.out().find("stop requested") != std::string::npos);

  late.type("status\r");
  BOOST_TEST(late.wait_for("troupe-shell: error: the chief at "
                             + chief_address(spec) + " is gone (",
                           15),
             late.seen());
  late.type("quit\r");
  BOOST_TEST(late.wait(15) == 0, late.seen());
}

// A node whose process is frozen (SIGSTOP) holds no view up: its agent is
// given a second, then the view shows what it last said, heard from
// longer ago, and once it runs again it is heard from now.
BOOST_AUTO_TEST_CASE(a_frozen_node_holds_no_view_up) {
  temp_dir dir;
  cluster_spec spec;
  spec.epochs = 50;                   // ended by "stop"
  spec.connection_timeout_ms = 10000; // frozen, not lost, in this test
  spec.nodes = {{"chief"}, {"ps0", 1}, {"w0", 0, 1}};
  running_cluster cluster{dir, spec};
  cluster.require_step(50);
  auto nodes_now = [&] {
    auto [code, text] = run_shell(dir, spec, "nodes");
    BOOST_REQUIRE_MESSAGE(code == 0, text);
    for (auto& n : json::parse(text))
      if (n["name"] == "w0")
        return n;
    BOOST_FAIL("no node w0 in " + text);
    return json{};
  };
  BOOST_TEST(nodes_now()["heard_seconds_ago"].get<double>() < 1);
  const pid_t w0 = cluster.node("w0").pid();
  ::kill(w0, SIGSTOP);
  std::this_thread::sleep_for(std::chrono::milliseconds(1500));
  const auto asked = std::chrono::steady_clock::now();
  auto frozen = nodes_now();
  const double took = std::chrono::duration<double>(
                        std::chrono::steady_clock::now() - asked)
                        .count();
  ::kill(w0, SIGCONT);
  // A shell's start and its connection, and the agent's second: the old
  // wait for a silent agent was 5 s.
  BOOST_TEST(took < 4.0, "nodes answered in " << took << " s");
  BOOST_TEST(frozen["state"] == "up", frozen.dump());
  BOOST_TEST(frozen["heard_seconds_ago"].get<double>() >= 1.5, frozen.dump());
  BOOST_TEST(frozen["resident_bytes"].is_number(), frozen.dump());
  BOOST_TEST(frozen["pid"] == w0, frozen.dump());
  // Running again: heard from now.
  auto deadline = std::chrono::steady_clock::now() + std::chrono::seconds(30);
  json back;
  do {
    back = nodes_now();
  } while (back["heard_seconds_ago"].get<double>() >= 1
           && std::chrono::steady_clock::now() < deadline);
  BOOST_TEST(back["heard_seconds_ago"].get<double>() < 1, back.dump());
  BOOST_REQUIRE(run_shell(dir, spec, "stop").first == 0);
  cluster.require_finished(60);
}

BOOST_AUTO_TEST_CASE(the_embedded_mode_listens_for_the_shell) {
  temp_dir dir;
  cluster_spec spec;
  spec.nodes = {{"chief", 1, 1}};
  auto cluster = write_cluster(dir, spec);
  auto embedded = write_embedded(dir, cluster, 2, 2);
  running_cluster run{
    dir,
    {"node",
     {"--config", embedded, "--epochs", "50", "--listen", "127.0.0.1:0"}}};
  const std::string said = "shell: troupe-shell --connect 127.0.0.1:";
  BOOST_REQUIRE_MESSAGE(run.chief().wait_for_output(said, 60), run.logs());
  auto out = run.chief().out();
  spec.nodes[0].port = static_cast<uint16_t>(
    std::stoi(out.substr(out.find(said) + said.size())));
  BOOST_REQUIRE(spec.nodes[0].port > 0);
  run.require_step(100);

  auto [code, text] = run_shell(dir, spec, "status");
  BOOST_REQUIRE_MESSAGE(code == 0, text);
  auto status = json::parse(text);
  auto& actors = status["actors"];
  BOOST_REQUIRE_EQUAL(actors.size(), 6u); // chief, feeder, 2 shards, 2 workers
  for (auto& a : actors)
    BOOST_TEST(a["node"] == "local");
  BOOST_TEST(status["run"]["steps"].get<int64_t>() >= 100);
  // The shell steers it as it does a cluster's chief.
  BOOST_REQUIRE(run_shell(dir, spec, "stop").first == 0);
  run.require_finished(60);

  // A cluster's chief listens at its node's address, not at --listen. (The
  // nodes that must fail to start are started by hand, alone.)
  process both{dir,
               "both",
               "troupe-node",
               {"--config", cluster, "--node", "chief", "--listen",
                "127.0.0.1:0"}};
  BOOST_TEST(both.wait(30) == 2);
  BOOST_TEST(both.err().find("--listen is for the embedded mode")
               != std::string::npos,
             both.err());
  process bad{
    dir, "bad", "troupe-node", {"--config", embedded, "--listen", "127.0.0.1"}};
  BOOST_TEST(bad.wait(30) == 2);
  BOOST_TEST(bad.err().find("--listen: ") != std::string::npos, bad.err());
}

BOOST_AUTO_TEST_CASE(an_unreachable_chief_is_a_clear_error) {
  temp_dir dir;
  cluster_spec spec;
  spec.nodes = {{"chief"}};
  spec.nodes[0].port = free_port();
  process p{dir,
            "shell",
            "troupe-shell",
            {"--connect", chief_address(spec), "-c", "status", "--timeout",
             "1"}};
  BOOST_TEST(p.wait(20) == 1);
  BOOST_TEST(p.err().find("cannot reach the chief at " + chief_address(spec))
               != std::string::npos,
             p.err());
  process bad{dir, "bad", "troupe-shell", {"--connect", "nocolon"}};
  BOOST_TEST(bad.wait(20) == 2);
  BOOST_TEST(bad.err().find("expected HOST:PORT") != std::string::npos,
             bad.err());
}

BOOST_AUTO_TEST_SUITE_END()
