#!/usr/bin/env bash
# clang-format on the lines a change touches, by .clang-format.
#   scripts/format.sh            reformat the lines changed since HEAD
#   scripts/format.sh --check    only say which would change; exit 1 if any
#   scripts/format.sh [--check] REV   the lines changed since REV instead
# Whole files are left alone: the code predates the file, and a check of
# every line would make each change carry unrelated reformatting.
set -euo pipefail
cd "$(dirname "${BASH_SOURCE[0]}")/.."
check=0
if [[ "${1:-}" == "--check" ]]; then
  check=1
  shift
fi
base="${1:-HEAD}"
if ! command -v git-clang-format >/dev/null; then
  echo "git-clang-format not found: apt-get install clang-format" >&2
  exit 2
fi
extensions=cpp,hpp,cu,h,cc
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
