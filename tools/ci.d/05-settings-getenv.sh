#!/usr/bin/env bash
# The settings table is the only reader of the environment (common/settings.h, issue 17): no
# getenv in the product code outside common/settings.cc. Tests (tests/) may read their own
# harness variables (TPNODE_BIN, TPNODE_SOURCE_DIR, ...). Also a ctest (settings_getenv_check).
set -euo pipefail
cd "$(dirname "$0")/../.."
hits=$(grep -rn --include='*.cc' --include='*.h' --include='*.cu' --include='*.cuh' -E '\b(std::)?(secure_)?getenv\b' \
  node mesh collectives model tools common | grep -v '^common/settings\.\(cc\|h\):' || true)
if [ -n "$hits" ]; then
  echo "[settings] getenv outside common/settings.cc; declare the variable in common/settings_table.cc and read it with settings::envValue():"
  echo "$hits"
  exit 1
fi
echo "[settings] no getenv outside the settings table"
