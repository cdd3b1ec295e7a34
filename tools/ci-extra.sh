#!/usr/bin/env bash
# Extra CI stages (sanitizer builds, bounded fuzzing, ...). Each area adds an executable
# tools/ci.d/NN-name.sh; they run in name order from the repository root.
set -euo pipefail
cd "$(dirname "$0")/.."
for stage in tools/ci.d/*.sh; do
  [ -x "$stage" ] || continue
  echo "[ci-extra] $stage"
  start=$SECONDS
  "$stage"
  echo "[ci-extra] $stage took $((SECONDS - start)) s"
done
