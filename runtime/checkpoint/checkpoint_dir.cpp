#include "runtime/checkpoint/checkpoint_dir.hpp"

#include "runtime/sparse/table_file.hpp"

#include <algorithm>
#include <cerrno>
#include <cstdio>
#include <cstring>

#include <dirent.h>
#include <sys/stat.h>
#include <unistd.h>

#include "runtime/base/errc.hpp"

namespace troupe {

namespace {

std::string meta(const checkpoint& c, const char* key) {
  auto it = c.metadata.find(key);
  return it == c.metadata.end() ? std::string{} : it->second;
}

std::string file_name(const std::string& path) {
  auto slash = path.rfind('/');
  return slash == std::string::npos ? path : path.substr(slash + 1);
}

} // namespace

void stamp_checkpoint(checkpoint& ckpt, const run_stamp& stamp) {
  ckpt.metadata["run_id"] = stamp.run_id;
  ckpt.metadata["config_digest"] = stamp.digest;
  ckpt.metadata["resume_digest"] = stamp.resume_digest;
  ckpt.metadata["config"] = identity_text(stamp.identity);
}

std::vector<checkpoint_file> list_checkpoints(const std::string& dir) {
  std::vector<checkpoint_file> out;
  DIR* d = ::opendir(dir.c_str());
  if (d == nullptr)
    return out;
  while (auto* entry = ::readdir(d)) {
    std::string name = entry->d_name;
    const std::string head = "ckpt-", tail = ".safetensors";
    if (name.size() <= head.size() + tail.size()
        || name.compare(0, head.size(), head) != 0
        || name.compare(name.size() - tail.size(), tail.size(), tail) != 0)
      continue;
    auto digits = name.substr(head.size(),
                              name.size() - head.size() - tail.size());
    if (digits.size() > 18
        || !std::all_of(digits.begin(), digits.end(),
                        [](char c) { return c >= '0' && c <= '9'; }))
      continue;
    auto path = dir + "/" + name;
    struct stat st {};
    if (::stat(path.c_str(), &st) != 0 || !S_ISREG(st.st_mode))
      continue;
    out.push_back({path, std::stoll(digits)});
  }
  ::closedir(d);
  std::sort(out.begin(), out.end(),
            [](const checkpoint_file& a, const checkpoint_file& b) {
              return a.step > b.step;
            });
  return out;
}

caf::expected<std::optional<loaded_checkpoint>>
load_newest(const std::string& dir, const run_stamp& stamp,
            checkpoint_pick pick, const param_layout& layout,
            const restart_words& words) {
  auto files = list_checkpoints(dir);
  if (files.empty())
    return std::optional<loaded_checkpoint>{};
  std::string passed;
  auto pass = [&](const checkpoint_file& f, const std::string& why) {
    passed += (passed.empty() ? "" : "; ") + file_name(f.path) + " (" + why
              + ")";
  };
  for (auto& f : files) {
    auto head = read_checkpoint_metadata(f.path);
    if (!head) {
      pass(f, describe(head.error()));
      continue;
    }
    auto run = meta(*head, "run_id");
    auto digest = meta(*head, "config_digest");
    if (pick == checkpoint_pick::this_run && run != stamp.run_id) {
      pass(f,
           run.empty() ? "written by no run of this troupe" : "of run " + run);
      continue;
    }
    // A file written before resume digests matches its whole config.
    auto resume = meta(*head, "resume_digest");
    bool by_resume = !resume.empty();
    if (pick == checkpoint_pick::compatible && !digest.empty()
        && (by_resume ? resume != stamp.resume_digest
                      : digest != stamp.digest)) {
      auto theirs = parse_identity(meta(*head, "config"));
      auto diff = by_resume
                    ? identity_difference(resume_identity(theirs), "checkpoint",
                                          resume_identity(stamp.identity),
                                          "this run", 3)
                    : identity_difference(theirs, "checkpoint", stamp.identity,
                                          "this run", 3);
      pass(f, (by_resume
                 ? "resume digest " + resume + ", this run's "
                     + stamp.resume_digest
                 : "config digest " + digest + ", this run's " + stamp.digest)
                + (diff.empty() ? "" : ": " + diff));
      continue;
    }
    auto full = read_checkpoint(f.path);
    if (!full) {
      pass(f, describe(full.error()));
      continue;
    }
    if (auto err = check_layout(*full, layout, f.path)) {
      pass(f, "its layout differs: " + describe(err));
      continue;
    }
    return std::optional<loaded_checkpoint>{
      loaded_checkpoint{f.path, std::move(*full)}};
  }
  return make_error(errc::layout_mismatch,
                    "no checkpoint in " + dir + " fits this "
                      + (pick == checkpoint_pick::this_run
                           ? std::string{"run (" + stamp.run_id + ")"}
                           : std::string{"config"})
                      + ": " + passed
                      + (pick == checkpoint_pick::compatible
                           ? "; to start over, " + words.fresh
                               + " (or /training/checkpoint/resume false) "
                                 "sets them aside, or give this run a "
                                 "folder of its own ("
                               + words.own_folder + ")"
                           : std::string{}));
}

caf::expected<std::string> set_aside_checkpoints(const std::string& dir,
                                                 const run_stamp& stamp) {
  const auto aside = dir + "/set-aside-" + stamp.run_id;
  bool made = false;
  for (auto& f : list_checkpoints(dir)) {
    auto head = read_checkpoint_metadata(f.path);
    if (head && meta(*head, "run_id") == stamp.run_id)
      continue;
    if (!made && ::mkdir(aside.c_str(), 0755) != 0 && errno != EEXIST)
      return make_error(errc::io_error, "cannot make " + aside + " to set "
                                          + f.path
                                          + " aside: " + std::strerror(errno));
    made = true;
    // Its embedding tables go with it (runtime/sparse/table_file.hpp).
    auto files = table_files_beside(f.path);
    files.insert(files.begin(), f.path);
    for (auto& from : files) {
      auto to = aside + "/" + file_name(from);
      if (::rename(from.c_str(), to.c_str()) != 0 && errno != ENOENT)
        return make_error(errc::io_error, "cannot move " + from + " to " + to
                                            + ": " + std::strerror(errno));
    }
  }
  return made ? aside : std::string{};
}

size_t prune_checkpoints(const std::string& dir, const run_stamp& stamp,
                         int keep) {
  if (keep <= 0)
    return 0;
  size_t kept = 0, removed = 0;
  for (auto& f : list_checkpoints(dir)) {
    auto head = read_checkpoint_metadata(f.path);
    if (!head || meta(*head, "run_id") != stamp.run_id)
      continue; // never another run's files
    if (++kept > static_cast<size_t>(keep) && ::unlink(f.path.c_str()) == 0) {
      // Its embedding tables, beside it (runtime/sparse/table_file.hpp).
      for (auto& table : table_files_beside(f.path))
        ::unlink(table.c_str());
      ++removed;
    }
  }
  return removed;
}

} // namespace troupe
