// The TLS context of a benchmark's --tls DIR (scripts/make-certs.sh's
// ca.pem, bench.pem and bench.key), shared by bench-transfer and
// bench-rows, and the cluster key of bench-transfer's --key FILE.
#pragma once

#include <cstdlib>
#include <iostream>
#include <memory>
#include <string>

#include "actors/net/link_guard.hpp"
#include "runtime/base/errc.hpp"

namespace troupe {

/// Null without a DIR; exits with 2, naming `program` and what is wrong,
/// on bad files (a benchmark has nothing to fall back on).
inline std::shared_ptr<const tls_context> load_bench_tls(const std::string& dir,
                                                         const char* program) {
  if (dir.empty())
    return nullptr;
  auto ctx = tls_context::load(
    {dir + "/ca.pem", dir + "/bench.pem", dir + "/bench.key"});
  if (!ctx) {
    std::cerr << program << ": error: " << describe(ctx.error()) << std::endl;
    std::exit(2);
  }
  return *ctx;
}

/// The guard of a benchmark's links: TLS with --tls DIR, the cluster key
/// in --key FILE (made when missing), else none. Exits with 2 on bad
/// files.
inline std::shared_ptr<const link_guard>
load_bench_guard(const std::string& tls_dir, const std::string& key_file,
                 const char* program) {
  if (!tls_dir.empty())
    return make_tls_guard(load_bench_tls(tls_dir, program));
  if (key_file.empty())
    return nullptr;
  bool made = false;
  auto key = load_or_make_key(key_file, made);
  if (!key) {
    std::cerr << program << ": error: " << describe(key.error()) << std::endl;
    std::exit(2);
  }
  return make_key_guard(std::move(*key));
}

} // namespace troupe
