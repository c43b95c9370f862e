#!/usr/bin/env bash
# Fuzzes the data plane, the front door (key handshake, BASP check) and the
# file readers with libFuzzer: installs clang and libFuzzer where missing,
# builds the fuzz targets in build-fuzz/ (clang, ASan+UBSan), and runs each
# one from a copy of its seed corpus.
# Exits non-zero when a target finds a crash, hang or memory blow-up,
# printing the reproducer.
#
# Usage: scripts/fuzz.sh [seconds per target] [target...]
#        scripts/fuzz.sh --runs N [target...]
# The first runs each target for N seconds (default 60); the second for N
# inputs (libFuzzer's -runs), e.g. scripts/fuzz.sh --runs 100000 config.
# Without targets, all of them run, one after the other.
set -euo pipefail
source "$(dirname "${BASH_SOURCE[0]}")/setup.sh"

# tests/fuzz/<t>_fuzz.cpp, seeds in tests/fuzz/corpus/<t>/
all_targets=(data_plane key_handshake basp_check config cluster_file idx cifar
             safetensors npy npz csv feeder_plan click_log table_file
             layer_list http_request)

limit=(-max_total_time=60)
what="60s"
if [ "${1:-}" = "--runs" ]; then
  if ! [[ "${2:-}" =~ ^[0-9]+$ ]]; then
    echo "usage: $0 --runs N [target...]" >&2
    exit 2
  fi
  limit=(-runs="$2")
  what="$2 inputs"
  shift 2
elif [[ "${1:-}" =~ ^[0-9]+$ ]]; then
  limit=(-max_total_time="$1")
  what="${1}s"
  shift
fi
targets=("$@")
[ ${#targets[@]} -eq 0 ] && targets=("${all_targets[@]}")
for t in "${targets[@]}"; do
  [[ " ${all_targets[*]} " == *" $t "* ]] \
    || { echo "troupe: no fuzz target $t (${all_targets[*]})" >&2; exit 2; }
done

# Per target: the largest input (-max_len), the largest single allocation
# allowed (-malloc_limit_mb; ASan reports anything above it, with its
# stack) and the time one input may take (-timeout). A reader must never
# allocate on a header's word, only in proportion to the bytes it has
# read, so each bound is the most the largest input may legitimately cost:
#  - data_plane: the served shard holds 3 floats and a table of 4-float
#    rows, and row ids are read in pieces, so no allocation a peer causes
#    may come near 64 MB (a size check that lets a header through is a
#    finding). The target's own waits end within about 12 s (it
#    reports a server that has not closed 10 s after the input's end
#    itself). -close_fd_mask=2 drops the server's "closing the connection"
#    lines; libFuzzer's and the sanitizers' reports still print.
#  - key_handshake: 256 bytes, more than the 80 a client sends and the 72
#    a server answers (plus the relay face's piece sizes); nothing is
#    allocated in proportion to the input at all: 64 MB. One input is a
#    few HMACs and, in the relay face, a few dozen socket calls: 10 s.
#  - basp_check: 4 KB of BASP stream: the check keeps one 32-byte header
#    and skips payloads without storing them, whatever their announced
#    size (up to 4 GiB): 64 MB; an input takes microseconds: 10 s.
#  - config, cluster_file: 16 KB of JSON; nothing is allocated from a
#    number in the file (synthetic data is not made by the parser), so the
#    DOM of the text is all: 64 MB.
#  - idx: 4 KB, which gzip data of the input's own can inflate to at most
#    about 4.2 MB of pixels (deflate's limit is 1032:1); 4 bytes a pixel as
#    floats is about 17 MB: 64 MB. (Under the sanitizers such an input
#    takes about 0.3 s; a longer -max_len would mostly buy slower runs.)
#  - cifar: 4 KB, likewise at most about 4.2 MB inflated, 17 MB of floats,
#    which grow by doubling (a record at a time) to at most 34 MB: 64 MB.
#  - safetensors: 64 KB files (room for more tensors than the reader
#    takes), read whole; tensors are bounded by the file: 64 MB.
#  - npy: 4 KB; the reader checks the data's size against the file's
#    before it allocates, so 4 KB of bytes become at most 16 KB of floats
#    (uint8 features): 64 MB is far above anything legitimate.
#  - npz: 8 KB; members are read by the sizes the central directory
#    gives, checked against the file first, and inflated data grows with
#    what zlib produces (at most 1032 times 8 KB, about 8.5 MB, then 4
#    bytes a float for uint8 features): 64 MB.
#  - csv: 4 KB of text, each value a float or a label: 64 MB likewise.
#  - click_log: 4 KB of text: a float or a 8-byte id per value: 64 MB.
#  - layer_list: 4 KB of JSON, the value of /model/layers; a list that
#    builds runs only when under 2^20 parameters and activations (4 MB
#    each as floats, and as much again for gradients, optimizer-free):
#    256 MB leaves room for the backend's buffers.
#  - table_file: 64 KB files (an embedding table's checkpoint); the
#    reader checks the rows its metadata announces against the file's
#    size before it lays out their pieces, and reads a piece at a time:
#    64 MB.
#  - feeder_plan: 4 KB of a checkpoint's plan text for a plan of 97
#    samples and 4 epochs: each stream is at most 40 batches.
#  - http_request: 2 KB, past the target's 1 KB head and 256-byte body
#    limits; the reader copies at most its input: 64 MB.
declare -A max_len=([data_plane]=0 [key_handshake]=256 [basp_check]=4096
                    [config]=16384 [cluster_file]=16384
                    [idx]=4096 [cifar]=4096 [safetensors]=65536
                    [npy]=4096 [npz]=8192 [csv]=4096 [feeder_plan]=4096
                    [click_log]=4096 [table_file]=65536 [layer_list]=4096
                    [http_request]=2048)
declare -A malloc_mb=([data_plane]=64 [key_handshake]=64 [basp_check]=64
                      [config]=64 [cluster_file]=64
                      [idx]=64 [cifar]=64 [safetensors]=64 [npy]=64
                      [npz]=64 [csv]=64 [feeder_plan]=64 [click_log]=64
                      [table_file]=64 [layer_list]=256 [http_request]=64)
declare -A timeout_s=([data_plane]=30 [key_handshake]=10 [basp_check]=10
                      [config]=10 [cluster_file]=10
                      [idx]=10 [cifar]=10 [safetensors]=10 [npy]=10
                      [npz]=10 [csv]=10 [feeder_plan]=10 [click_log]=10
                      [table_file]=10 [layer_list]=10 [http_request]=10)
# Keys and values of the JSON formats, so mutations make words the
# readers know.
declare -A dict=([config]=config.dict [cluster_file]=config.dict
                 [safetensors]=safetensors.dict
                 [table_file]=safetensors.dict [layer_list]=layers.dict)

# clang is the compiler, libclang-rt-14-dev holds libFuzzer and the
# sanitizer runtimes, llvm gives llvm-symbolizer for readable stacks.
troupe_install_missing clang libclang-rt-14-dev llvm

fuzz_build="${TROUPE_FUZZ_BUILD:-$TROUPE_ROOT/build-fuzz}"
# A clang folder of its own (the gcc build/ is untouched). TROUPE_WERROR=OFF:
# clang warns where gcc does not (e.g. -Wunused-private-field), and a -Wno-error in CMAKE_CXX_FLAGS would come
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
  opts=(-max_len="${max_len[$t]}" -malloc_limit_mb="${malloc_mb[$t]}"
        -timeout="${timeout_s[$t]}" -rss_limit_mb=2048 -print_final_stats=1
        -artifact_prefix="$dir/artifacts/")
  [ "$t" = data_plane ] && opts+=(-close_fd_mask=2)
  [ -n "${dict[$t]:-}" ] && opts+=(-dict="$TROUPE_ROOT/tests/fuzz/${dict[$t]}")
  echo "troupe: fuzzing $t for $what (log: $dir/log)"
  rc=0
  "$fuzz_build/tests/fuzz/${t}_fuzz" "$dir/corpus" "${limit[@]}" "${opts[@]}" \
    >"$dir/log" 2>&1 || rc=$?
  grep -E "^(stat::|Done )" "$dir/log" || true
  found=$(find "$dir/artifacts" -type f)
  if [ "$rc" -ne 0 ] || [ -n "$found" ]; then
    status=1
    grep -E "ERROR|SUMMARY|==[0-9]+==|troupe fuzz:" "$dir/log" | head -20 >&2 \
      || true
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
