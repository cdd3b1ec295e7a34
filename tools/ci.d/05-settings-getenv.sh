#!/usr/bin/env bash
# Two readers of the environment (issue 17): the settings table for the product
# (common/settings.cc, settings::envValue()) and tests/support/test_env.h for the tests
# (testing_support::testEnv()). No getenv anywhere else in node mesh collectives model tools
# common tests. Also a ctest (settings_getenv_check).
set -euo pipefail
cd "$(dirname "$0")/../.."
hits=$(grep -rn --include='*.cc' --include='*.h' --include='*.cu' --include='*.cuh' -E '\b(std::)?(secure_)?getenv\b' \
  node mesh collectives model tools common tests |
  grep -v -E '^(common/settings\.cc|tests/support/test_env\.h):' || true)
if [ -n "$hits" ]; then
  echo "[settings] getenv outside common/settings.cc and tests/support/test_env.h:"
  echo "  product: declare the variable in common/settings_table.cc, read it with settings::envValue()"
  echo "  tests:   list the variable in tests/support/test_env.h, read it with testEnv()"
  echo "$hits"
  exit 1
fi
echo "[settings] no getenv outside the settings table and tests/support/test_env.h"
