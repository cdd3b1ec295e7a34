#!/usr/bin/env bash
# CI stage: every C++/CUDA source under node/ mesh/ collectives/ model/ tools/ common/ tests/ is
# formatted as .clang-format says (clang-format --dry-run -Werror: nothing is rewritten). To fix
# a failure, run clang-format -i on the files it names. Takes a few seconds.
set -euo pipefail
cd "$(dirname "$0")/../.."
FORMAT=${CLANG_FORMAT:-$(command -v clang-format-14 || command -v clang-format)}
git ls-files -z 'node/*' 'mesh/*' 'collectives/*' 'model/*' 'tools/*' 'common/*' 'tests/*' |
  grep -zE '\.(h|cc|cpp|hpp|cu|cuh)$' | xargs -0 "$FORMAT" --dry-run -Werror
echo "[format] all sources formatted"
