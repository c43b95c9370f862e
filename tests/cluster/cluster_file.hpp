// Cluster files for the multi-process tests: Fashion-MNIST, the
// 784-256-128-10 MLP, nodes on 127.0.0.1 (or a test's own addresses) at
// free ports; and what the tests read back: the chief's output, the
// shell's answers.
#pragma once

#include <chrono>
#include <filesystem>
#include <memory>
#include <ostream>
#include <sstream>
#include <stdexcept>
#include <string>
#include <thread>
#include <vector>

#include <nlohmann/json.hpp>

#include "proc_stats.hpp"
#include "process.hpp"
#include "runtime/base/errc.hpp"
#include "runtime/data/click_data.hpp"

namespace troupe::test {

struct node_spec {
  std::string name;
  int shards = 0;
  int workers = 0;
  uint16_t port = 0;    ///< 0: a free port
  std::string device{}; ///< the node's "device"; empty: none given
  std::string host = "127.0.0.1";
  /// A command the node runs under (process.hpp), as a memory cgroup's.
  std::vector<std::string> prefix{};
};

/// Bytes of the test model's parameters (784-256-128-10 MLP): what one
/// pull, or one push, of all shards together moves.
constexpr double mlp_param_bytes =
  4.0 * (784 * 256 + 256 + 256 * 128 + 128 + 128 * 10 + 10);

struct cluster_spec {
  std::vector<node_spec> nodes; ///< the first is the chief's
  std::string mode = "async";
  std::string data_partition{}; ///< empty: the default (shared)
  int epochs = 2;
  int64_t max_steps = 0;        ///< /training/max_steps, when > 0
  int64_t checkpoint_every = 0; ///< > 0: checkpoints in <dir>/ckpt
  int64_t export_every = 0;     ///< > 0: table exports in <dir>/exports
  std::string on_node_loss = "move";
  double node_timeout_s = 20;
  /// How long a silent link lasts before its node is lost.
  int64_t connection_timeout_ms = 1500;
  /// false: /cluster/shared_memory false, every data-plane link on TCP.
  bool shared_memory = true;
  /// Non-empty: the folder of make_certs' files; every node uses
  /// cluster.pem, and run_shell and joiners client.pem.
  std::string tls_dir;
  int64_t handshake_timeout_ms = 5000;
  /// Non-empty: a click model trains on the click logs train.tsv and
  /// test.tsv of this folder (2 numeric, 4 categorical fields; see
  /// make_click_logs) instead of the MLP on Fashion-MNIST.
  std::string click_dir;
  int64_t click_eval_every = 500; ///< a click run's evaluations, in steps
  /// The click logs' training set in click_dir (a file or a glob).
  std::string click_train = "train.tsv";
  /// Not null: /data/follow of the click logs (click_train then globs the
  /// folder that grows), and no /training/epochs.
  nlohmann::json click_follow;
  /// The click model's /model/embedding (its admit and evict, say).
  nlohmann::json click_table = {{"dim", 8}};
  /// Non-empty: the MLP trains on the .npy files of write_fashion_mnist_npy
  /// (tests/npy_files.hpp) in this folder instead of the IDX files; its
  /// training set's files (globs) are these.
  std::string npy_dir;
  std::string npy_train = "train_x.npy", npy_train_labels = "train_y.npy";
  int64_t shuffle_block = 1;     ///< /training/shuffle_block
  std::string on_file_change;    ///< /data/on_file_change, when not empty
  std::string cache_dir;         ///< /data/cache_dir (IDX), when not empty
  int shard_replicas = 0;        ///< /cluster/shard_replicas, when > 0
  int replicas_to_aggregate = 0; ///< /cluster/replicas_to_aggregate, when > 0
  int lease_ahead_ms = 0;        ///< /cluster/lease_ahead_ms, when > 0

  /// The flags that give a shell or a joiner the cluster's client
  /// certificate (none without TLS).
  std::vector<std::string> client_flags() const {
    if (tls_dir.empty())
      return {};
    return {"--tls-ca",   tls_dir + "/ca.pem",
            "--tls-cert", tls_dir + "/client.pem",
            "--tls-key",  tls_dir + "/client.key"};
  }
};

/// Makes a CA and certificates for `names` in <dir>/<folder> with
/// scripts/make-certs.sh; returns the folder ("" if that failed).
inline std::string make_certs(const temp_dir& dir, const std::string& folder,
                              const std::vector<std::string>& names) {
  auto out = dir.file(folder);
  std::string cmd = std::string{TROUPE_SOURCE_DIR} + "/scripts/make-certs.sh "
                    + out;
  for (auto& n : names)
    cmd += " " + n;
  cmd += " > /dev/null";
  return std::system(cmd.c_str()) == 0 ? out : std::string{};
}

/// Writes the cluster file to <dir>/cluster.json, fills in the ports and
/// returns the path.
inline std::string write_cluster(const temp_dir& dir, cluster_spec& spec) {
  using json = nlohmann::json;
  json nodes = json::array();
  for (auto& n : spec.nodes) {
    if (n.port == 0)
      n.port = free_port();
    json j{{"name", n.name}, {"host", n.host}, {"port", n.port}};
    if (n.shards > 0)
      j["shards"] = n.shards;
    if (n.workers > 0)
      j["workers"] = n.workers;
    if (!n.device.empty())
      j["device"] = n.device;
    nodes.push_back(j);
  }
  json training{{"batch_size", 128},
                {"epochs", spec.epochs},
                {"seed", 1},
                {"log_every_steps", 100},
                {"optimizer", {{"type", "adam"}, {"learning_rate", 0.001}}}};
  if (!spec.data_partition.empty())
    training["data_partition"] = spec.data_partition;
  if (spec.max_steps > 0)
    training["max_steps"] = spec.max_steps;
  if (spec.shuffle_block != 1)
    training["shuffle_block"] = spec.shuffle_block;
  if (spec.checkpoint_every > 0)
    training["checkpoint"] = {{"dir", dir.file("ckpt")},
                              {"every_steps", spec.checkpoint_every}};
  if (spec.export_every > 0)
    training["export"] = {{"dir", dir.file("exports")},
                          {"every_steps", spec.export_every}};
  json model{{"type", "mlp"}, {"hidden", {256, 128}}, {"seed", 1}};
  json data{{"format", "idx"}, {"dir", "/usr/share/datasets/fashion-mnist"}};
  if (!spec.npy_dir.empty())
    data = {{"format", "npy"},         {"dir", spec.npy_dir},
            {"train", spec.npy_train}, {"train_labels", spec.npy_train_labels},
            {"test", "test_x.npy"},    {"test_labels", "test_y.npy"}};
  if (!spec.on_file_change.empty())
    data["on_file_change"] = spec.on_file_change;
  if (!spec.cache_dir.empty())
    data["cache_dir"] = spec.cache_dir;
  if (!spec.click_dir.empty()) {
    model = {{"type", "click"},
             {"hidden", {64, 32}},
             {"seed", 1},
             {"embedding", spec.click_table}};
    data = {{"format", "click"},
            {"dir", spec.click_dir},
            {"train", spec.click_train},
            {"test", "test.tsv"},
            {"numeric", 2},
            {"categorical", 4},
            {"vocabulary", 1 << 22}};
    training["batch_size"] = 256;
    training["eval_every_steps"] = spec.click_eval_every;
    training["sparse_optimizer"] = {{"type", "adagrad"},
                                    {"learning_rate", 0.05}};
    if (!spec.click_follow.is_null()) {
      data["follow"] = spec.click_follow;
      training.erase("epochs");
    }
  }
  json cfg{{"name", "multi-process-test"},
           {"model", model},
           {"data", data},
           {"training", training},
           {"cluster",
            {{"mode", spec.mode},
             {"chief", spec.nodes.front().name},
             {"nodes", nodes},
             {"node_timeout_s", spec.node_timeout_s},
             {"heartbeat_interval_ms", 200},
             {"connection_timeout_ms", spec.connection_timeout_ms},
             {"on_node_loss", spec.on_node_loss},
             {"max_restarts", 10}}}};
  if (!spec.shared_memory)
    cfg["cluster"]["shared_memory"] = false;
  if (spec.shard_replicas > 0)
    cfg["cluster"]["shard_replicas"] = spec.shard_replicas;
  if (spec.replicas_to_aggregate > 0)
    cfg["cluster"]["replicas_to_aggregate"] = spec.replicas_to_aggregate;
  if (spec.lease_ahead_ms > 0)
    cfg["cluster"]["lease_ahead_ms"] = spec.lease_ahead_ms;
  if (!spec.tls_dir.empty())
    cfg["cluster"]["tls"] = {{"ca", spec.tls_dir + "/ca.pem"},
                             {"certificate", spec.tls_dir + "/cluster.pem"},
                             {"key", spec.tls_dir + "/cluster.key"},
                             {"handshake_timeout_ms",
                              spec.handshake_timeout_ms}};
  auto path = dir.file("cluster.json");
  write_file(path, cfg.dump(2));
  return path;
}

/// The run of the cluster file at `cluster` in one process: the same file
/// without its nodes, written to <dir>/embedded.json; returns the path.
inline std::string write_embedded(const temp_dir& dir,
                                  const std::string& cluster, int shards,
                                  int workers) {
  auto j = nlohmann::json::parse(read_all(cluster));
  j["cluster"].erase("nodes");
  j["cluster"].erase("chief");
  j["cluster"]["shards"] = shards;
  j["cluster"]["workers"] = workers;
  auto path = dir.file("embedded.json");
  write_file(path, j.dump());
  return path;
}

/// The chief's "host:port".
inline std::string chief_address(const cluster_spec& spec) {
  return spec.nodes.front().host + ":"
         + std::to_string(spec.nodes.front().port);
}

/// Runs troupe-shell -c `command` [--json] against the chief of `spec`;
/// returns (exit code, stdout and stderr).
inline std::pair<int, std::string> run_shell(const temp_dir& dir,
                                             const cluster_spec& spec,
                                             const std::string& command,
                                             bool as_json = true) {
  std::vector<std::string> args{"--connect", chief_address(spec), "-c",
                                command};
  for (auto& f : spec.client_flags())
    args.push_back(f);
  if (as_json)
    args.push_back("--json");
  process p{dir, "shell", "troupe-shell", args};
  int code = p.wait(30);
  return {code, p.out() + p.err()};
}

/// run_shell, asked again (up to 20 times, 0.1 s apart) while the chief
/// answers that it cannot now: a checkpoint or another move under way
/// ("try again shortly"), or a move called off ("not made: "), as a person
/// would ask again.
inline std::pair<int, std::string>
run_shell_until_taken(const temp_dir& dir, const cluster_spec& spec,
                      const std::string& command) {
  auto answer = run_shell(dir, spec, command, false);
  auto busy = [](const std::string& out) {
    return out.find("try again shortly") != std::string::npos
           || out.find("not made: ") != std::string::npos;
  };
  for (int k = 0; k < 20 && answer.first != 0 && busy(answer.second); ++k) {
    std::this_thread::sleep_for(std::chrono::milliseconds(100));
    answer = run_shell(dir, spec, command, false);
  }
  return answer;
}

/// The version of shard `i` as the shell reports it; -1 when the shell
/// failed or did not say.
inline int64_t shard_version(const temp_dir& dir, const cluster_spec& spec,
                             size_t i = 0) {
  auto [code, out] = run_shell(dir, spec, "shards");
  if (code != 0)
    return -1;
  auto j = nlohmann::json::parse(out, nullptr, false);
  if (!j.is_array() || j.size() <= i || !j[i].contains("version"))
    return -1;
  return j[i]["version"].get<int64_t>();
}

/// The port of a member node's data plane, from its first line ("...,
/// data plane on HOST:PORT"); 0 when it has not said.
inline uint16_t data_port_of(const process& node) {
  auto out = node.out();
  auto at = out.find("data plane on ");
  if (at == std::string::npos)
    return 0;
  auto colon = out.find(':', at + 14);
  return colon == std::string::npos
           ? 0
           : static_cast<uint16_t>(std::atoi(out.c_str() + colon + 1));
}

/// The step of the chief's last progress line ("step N, epoch ..."), or 0.
inline long last_step(const std::string& out) {
  auto at = out.rfind("\nstep ");
  return at == std::string::npos ? 0 : std::atol(out.c_str() + at + 6);
}

/// The numbers of the chief's line "shard versions at the end: ...".
inline std::vector<long> final_versions(const std::string& out) {
  std::vector<long> v;
  const std::string key = "shard versions at the end:";
  auto at = out.rfind(key);
  if (at == std::string::npos)
    return v;
  std::istringstream in{
    out.substr(at + key.size(), out.find('\n', at) - at - key.size())};
  for (long x; in >> x;)
    v.push_back(x);
  return v;
}

/// A column of the summary table's data row ("test acc" is 8, "steps" 4).
inline std::string summary_field(const std::string& out, size_t column) {
  auto head = out.find("\nrun ");
  if (head == std::string::npos)
    return "";
  auto row = out.find('\n', head + 1);
  auto end = out.find('\n', row + 1);
  std::istringstream in{out.substr(row + 1, end - row - 1)};
  std::string word;
  for (size_t i = 0; i <= column && in >> word;)
    if (i++ == column)
      return word;
  return "";
}

using procs = std::vector<std::unique_ptr<process>>;

/// What every process of a cluster said, for a failed check: each one's
/// name, whether it still runs, its stderr and stdout. Read when printed,
/// not when made: Boost.Test builds a check's message before it evaluates
/// the check (g++ evaluates the arguments right to left), so a string made
/// here would show, after a failed wait_for_step(..., 120) in the same
/// check, every process as it was before the wait: running, with nothing
/// said yet.
class cluster_outputs {
public:
  cluster_outputs(const process& chief, const procs& members)
    : chief_(chief), members_(members) {}

  friend std::ostream& operator<<(std::ostream& out, const cluster_outputs& c) {
    auto one = [&out](const std::string& name, const process& p) {
      out << "--- " << name << " (pid " << p.pid() << ", " << p.how_it_ended()
          << ")\n"
          << p.err() << p.out();
    };
    one("chief " + c.chief_.name(), c.chief_);
    for (auto& m : c.members_)
      one(m->name(), *m);
    return out;
  }

private:
  const process& chief_;
  const procs& members_;
};

/// The summary table's test accuracy, or -1 when there is no table.
inline double test_accuracy(const std::string& out) {
  auto s = summary_field(out, 8);
  return s.empty() ? -1 : std::stod(s);
}

/// Click logs shaped as write_cluster's click data section reads them (2
/// numeric and 4 categorical fields of 200 Zipf values each, vocabulary
/// 2^22): `train` lines in <dir>/<folder>/<train_name>, `test` in
/// <dir>/<folder>/test.tsv. Returns the planted model's scores.
inline troupe::planted_scores
make_click_logs(const temp_dir& dir, const std::string& folder, int64_t train,
                int64_t test, const std::string& train_name = "train.tsv") {
  troupe::click_generator_config gen;
  gen.schema = {2, 4, uint64_t{1} << 22};
  gen.train = train;
  gen.test = test;
  gen.values_per_field = 200;
  gen.seed = 3;
  std::string out = dir.file(folder);
  std::filesystem::create_directories(out);
  auto planted = troupe::generate_click_logs(gen, out + "/" + train_name,
                                             out + "/test.tsv");
  if (!planted)
    throw std::runtime_error("click logs: " + describe(planted.error()));
  return *planted;
}

/// The number after `key` in the last line of `out` that has it; -1 when
/// none does.
inline double last_value(const std::string& out, const std::string& key) {
  auto at = out.rfind(key);
  if (at == std::string::npos)
    return -1;
  std::istringstream in{out.substr(at + key.size(), 32)};
  double x = -1;
  in >> x;
  return x;
}

/// Whether `part` occurs in `text` (a process's output).
inline bool has(const std::string& text, const std::string& part) {
  return text.find(part) != std::string::npos;
}

/// How often `part` occurs in `text`.
inline size_t count_of(const std::string& text, const std::string& part) {
  size_t n = 0;
  for (auto at = text.find(part); at != std::string::npos;
       at = text.find(part, at + 1))
    ++n;
  return n;
}

/// The first line of `out` that holds `part` (empty: none).
inline std::string line_with(const std::string& out, const std::string& part) {
  auto at = out.find(part);
  if (at == std::string::npos)
    return {};
  auto begin = out.rfind('\n', at);
  begin = begin == std::string::npos ? 0 : begin + 1;
  return out.substr(begin, out.find('\n', at) - begin);
}

/// The numbers after "samples trained per epoch:".
inline std::vector<long> epoch_samples(const std::string& out) {
  std::vector<long> v;
  auto at = out.find("samples trained per epoch:");
  if (at == std::string::npos)
    return v;
  std::istringstream in{out.substr(at + 26, out.find('\n', at) - at - 26)};
  for (long x; in >> x;)
    v.push_back(x);
  return v;
}

/// The numbers of the chief's line "worker W samples per epoch (...):"
/// (replicated, sharded); empty without one.
inline std::vector<long> worker_samples(const std::string& out, int worker) {
  std::vector<long> v;
  auto at = out.find("worker " + std::to_string(worker)
                     + " samples per epoch (");
  if (at == std::string::npos)
    return v;
  auto colon = out.find("):", at);
  std::istringstream in{out.substr(colon + 2, out.find('\n', at) - colon - 2)};
  for (long x; in >> x;)
    v.push_back(x);
  return v;
}

/// What the sockets of the chief and of some worker processes carried
/// while a run trained some steps, and the parameter bytes the workers
/// pulled and pushed meanwhile (the whole MLP once each way per step).
struct socket_traffic {
  bool reached = false; ///< the run got that far in time
  long steps = 0;
  double moved = 0;
  long long chief_bytes = 0, worker_bytes = 0;
};

/// socket_traffic over the next `steps` steps of the chief's run, for the
/// worker processes `workers`, waiting at most `seconds`.
inline socket_traffic traffic_over(const process& chief,
                                   const std::vector<pid_t>& workers,
                                   long steps, double seconds) {
  auto worker_bytes = [&] {
    long long sum = 0;
    for (auto pid : workers)
      sum += tcp_bytes(pid);
    return sum;
  };
  const auto chief_before = tcp_bytes(chief.pid());
  const auto workers_before = worker_bytes();
  const auto from = last_step(chief.out());
  socket_traffic t;
  t.reached = chief.wait_for_step(from + steps, seconds);
  if (!t.reached)
    return t;
  // The steps are read before the sockets' counters, as `from` was read
  // after them: the counters then hold at least these steps' bytes. (Read
  // after, under load, the log ran on while the counters were read, and
  // the workers seemed to move 14% less than the steps needed.)
  t.steps = last_step(chief.out()) - from;
  t.chief_bytes = tcp_bytes(chief.pid()) - chief_before;
  t.worker_bytes = worker_bytes() - workers_before;
  t.moved = static_cast<double>(t.steps) * 2 * mlp_param_bytes;
  return t;
}

/// The bytes through the chief's sockets while the workers train `steps`
/// more steps, as a share of the parameter bytes the workers pull and push
/// meanwhile; -1 if the run did not get that far within 120 s. A chief
/// that relayed the data plane would show about 2 (every byte in and out).
inline double chief_relay_share(const process& chief, long steps) {
  auto t = traffic_over(chief, {}, steps, 120);
  return t.reached ? static_cast<double>(t.chief_bytes) / t.moved : -1;
}

} // namespace troupe::test
