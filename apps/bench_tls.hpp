// The TLS context of a benchmark's --tls DIR (scripts/make-certs.sh's
// ca.pem, bench.pem and bench.key), shared by bench-transfer and
// bench-rows.
#pragma once

#include <cstdlib>
#include <iostream>
#include <memory>
#include <string>

#include "actors/tls.hpp"
#include "runtime/errc.hpp"

namespace troupe {

/// Null without a DIR; exits with 2, naming `program` and what is wrong,
/// on bad files (a benchmark has nothing to fall back on).
inline std::shared_ptr<const tls_context>
load_bench_tls(const std::string& dir, const char* program) {
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

} // namespace troupe
