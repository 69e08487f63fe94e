#!/bin/bash
# run.sh - runs each libFuzzer target for a bounded time, seeded from
# test/fuzz/corpus/<target>/ (copied, so the repository is never written).
# Usage: test/fuzz/run.sh SECONDS BINARY...
set -euo pipefail
seconds=$1; shift
for bin in "$@"; do
  name=$(basename "$bin")
  work="build/fuzz/work/$name"
  rm -rf "$work"; mkdir -p "$work"
  if [[ -d "test/fuzz/corpus/$name" ]]; then
    cp -r "test/fuzz/corpus/$name/." "$work/"
  fi
  echo "fuzz: $name for ${seconds}s"
  "$bin" -max_total_time="$seconds" -max_len=65536 -timeout=10 \
    -artifact_prefix="build/fuzz/$name-" \
    -print_final_stats=1 "$work" 2>"build/fuzz/$name.log" || {
      tail -50 "build/fuzz/$name.log"; echo "fuzz: $name FAILED" >&2; exit 1; }
  grep -E "stat::number_of_executed_units" "build/fuzz/$name.log" | sed "s/^/fuzz: $name /"
done
