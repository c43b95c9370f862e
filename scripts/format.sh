#!/usr/bin/env bash
# clang-format by .clang-format, on every C++ file git tracks (the tree is
# formatted, and .ci/run checks that it stays so) or on the lines a change
# touches.
#   scripts/format.sh --check --all   say which files would change; exit 1
#                                     if any (what .ci/run runs)
#   scripts/format.sh --all           reformat every file
#   scripts/format.sh                 reformat the lines changed since HEAD
#   scripts/format.sh --check         only say which would change
#   scripts/format.sh [--check] REV   the lines changed since REV instead
set -euo pipefail
cd "$(dirname "${BASH_SOURCE[0]}")/.."
check=0
all=0
while [[ $# -gt 0 && "$1" == --* ]]; do
  case "$1" in
    --check) check=1 ;;
    --all) all=1 ;;
    *) echo "format.sh: unknown option $1" >&2; exit 2 ;;
  esac
  shift
done
base="${1:-HEAD}"
extensions=cpp,hpp,cu,h,cc
if ((all)); then
  if ! command -v clang-format >/dev/null; then
    echo "clang-format not found: apt-get install clang-format" >&2
    exit 2
  fi
  mapfile -t files < <(git ls-files '*.cpp' '*.hpp' '*.cu' '*.h' '*.cc')
  if ((check)); then
    report="$(mktemp)"
    trap 'rm -f "$report"' EXIT
    if ! clang-format --dry-run --Werror "${files[@]}" 2>"$report"; then
      grep -o '^[^:]*:[0-9]*:[0-9]*: error' "$report" \
        | cut -d: -f1 | sort -u | sed 's/^/format: not formatted: /'
      echo "format: scripts/format.sh --all formats them" >&2
      exit 1
    fi
    echo "format: all ${#files[@]} files follow .clang-format"
    exit 0
  fi
  clang-format -i "${files[@]}"
  exit 0
fi
if ! command -v git-clang-format >/dev/null; then
  echo "git-clang-format not found: apt-get install clang-format" >&2
  exit 2
fi
if ((check)); then
  out="$(git clang-format --diff --extensions "$extensions" "$base" || true)"
  if [[ -z "$out" || "$out" == "no modified files to format" \
        || "$out" == "clang-format did not modify any files" ]]; then
    echo "format: the changed lines follow .clang-format"
    exit 0
  fi
  printf '%s\n' "$out"
  echo "format: run scripts/format.sh $base to apply the changes above" >&2
  exit 1
fi
git clang-format --extensions "$extensions" "$base"
