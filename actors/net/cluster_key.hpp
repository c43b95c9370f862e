// The cluster's key: 256 random bits in a file only its user can read.
// Every process of a run proves that it holds the key before any of its
// bytes reach CAF's BASP or the data plane (actors/net/key_handshake.hpp), so
// on one host nothing needs setting up: the first node of a run makes the
// file in the user's config folder, and every node, joiner and shell of
// the same user finds it there. Across hosts the file is copied (or the
// cluster uses mutual TLS instead).
//
// Why a per-user folder and not the cluster file's or the checkpoint
// folder: the shell and a joiner know neither, and on clusters whose home
// folders are shared (NFS under Slurm) every host then finds the same key.
#pragma once

#include <array>
#include <cstdint>
#include <string>

#include "caf/expected.hpp"

namespace troupe {

class cluster_key {
public:
  static constexpr size_t size = 32;
  using bytes = std::array<uint8_t, size>;

  cluster_key(bytes secret, std::string path);

  const bytes& secret() const { return secret_; }

  /// The file the key came from (for messages: "copy it from there").
  const std::string& path() const { return path_; }

  /// A public name of the key (16 hex digits of an HMAC of a fixed text):
  /// two processes with different ids hold different keys. It reveals
  /// nothing of the key.
  const std::string& id() const { return id_; }

  /// The id's 8 bytes, as the handshake sends them.
  const std::array<uint8_t, 8>& id_bytes() const { return id_bytes_; }

private:
  bytes secret_;
  std::string path_;
  std::array<uint8_t, 8> id_bytes_{};
  std::string id_;
};

/// Where the key lives unless --key names a file:
/// $XDG_CONFIG_HOME/troupe/cluster.key, else ~/.config/troupe/cluster.key.
std::string default_key_path();

/// Reads the key in `path`: 64 hex digits (a newline may follow). Refused,
/// with the reason and the file named: a missing file (with how to get
/// one), a file that group or others may read or that another user owns,
/// anything but the 64 digits.
caf::expected<cluster_key> load_key(const std::string& path);

/// load_key, but a missing file is made first: a fresh random key, mode
/// 0600, its folder 0700. Several processes starting at once end up with
/// the same key (the file appears whole or not at all, and only the
/// first is kept). `made` says whether this call made it.
caf::expected<cluster_key> load_or_make_key(const std::string& path,
                                            bool& made);

/// "key <id> in <path>", for log lines.
std::string describe(const cluster_key& key);

} // namespace troupe
