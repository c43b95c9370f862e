#!/usr/bin/env bash
# Fuzzes the data plane with libFuzzer: installs clang and libFuzzer where
# missing, builds the fuzz targets in build-fuzz/ (clang, ASan+UBSan), and
# runs each one for N seconds (default 60) from a copy of its seed corpus.
# Exits non-zero when a target finds a crash, hang or memory blow-up,
# printing the reproducer. Usage: scripts/fuzz.sh [seconds per target]
set -euo pipefail
source "$(dirname "${BASH_SOURCE[0]}")/setup.sh"

seconds="${1:-60}"
fuzz_build="${TROUPE_FUZZ_BUILD:-$TROUPE_ROOT/build-fuzz}"
targets=(data_plane) # tests/fuzz/<t>_fuzz.cpp, seeds in tests/fuzz/corpus/<t>/

# clang is the compiler, libclang-rt-14-dev holds libFuzzer and the
# sanitizer runtimes, llvm gives llvm-symbolizer for readable stacks.
troupe_packages+=(clang libclang-rt-14-dev llvm)
troupe_install_missing

# A clang folder of its own (the gcc build/ is untouched). TROUPE_WERROR=OFF:
# clang warns where gcc does not (-Wunused-private-field in
# runtime/batch_plan.hpp), and a -Wno-error in CMAKE_CXX_FLAGS would come
# before the targets' -Werror and lose. RelWithDebInfo: stacks with lines.
# Configured every time (a second or so), so these settings always hold.
cmake -S "$TROUPE_ROOT" -B "$fuzz_build" -DCMAKE_CXX_COMPILER=clang++ \
  -DCMAKE_BUILD_TYPE=RelWithDebInfo -DTROUPE_BUILD_FUZZERS=ON \
  -DTROUPE_ENABLE_CUDA=OFF -DTROUPE_BUILD_TESTS=OFF -DTROUPE_WERROR=OFF \
  >/dev/null
cmake --build "$fuzz_build" -j2 --target "${targets[@]/%/_fuzz}"

# Each run works on a copy of the seeds, so the repository's stay as they
# are; the grown corpus, log and any reproducer stay under build-fuzz/.
run_dir="$fuzz_build/runs/$(date +%Y%m%d-%H%M%S)"
status=0
for t in "${targets[@]}"; do
  dir="$run_dir/$t"
  mkdir -p "$dir/corpus" "$dir/artifacts"
  cp "$TROUPE_ROOT/tests/fuzz/corpus/$t/"* "$dir/corpus/"
  echo "troupe: fuzzing $t for ${seconds}s (log: $dir/log)"
  # -close_fd_mask=2: the target's stderr (the server's "closing the
  # connection" lines) is dropped; libFuzzer's and the sanitizers' reports
  # still print. The target's shard holds 3 floats, so no allocation a peer
  # causes may come near -malloc_limit_mb (a size check that lets a header
  # through is a finding); -rss_limit_mb catches steady growth.
  # -timeout: the target's own waits end within about 12 s (it reports a
  # server that has not closed 10 s after the input's end itself).
  rc=0
  "$fuzz_build/tests/fuzz/${t}_fuzz" "$dir/corpus" \
    -max_total_time="$seconds" -timeout=30 -rss_limit_mb=2048 \
    -malloc_limit_mb=64 -close_fd_mask=2 -print_final_stats=1 \
    -artifact_prefix="$dir/artifacts/" >"$dir/log" 2>&1 || rc=$?
  grep -E "^(stat::|Done )" "$dir/log" || true
  found=$(find "$dir/artifacts" -type f)
  if [ "$rc" -ne 0 ] || [ -n "$found" ]; then
    status=1
    grep -E "ERROR|SUMMARY|==[0-9]+==" "$dir/log" | head -20 >&2 || true
    echo "troupe: $t: the fuzzer found a problem (exit $rc); see $dir/log" >&2
    for f in $found; do
      echo "troupe: reproducer: $f" >&2
      echo "troupe:   replay: $fuzz_build/tests/fuzz/${t}_fuzz $f" >&2
    done
  else
    echo "troupe: $t: nothing found"
  fi
done
exit "$status"
