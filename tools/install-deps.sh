#!/usr/bin/env bash
# Installs tpnode's dependencies from Debian packages and PyPI. Idempotent: does nothing when
# everything is present. Needs root (or sudo) for apt.
#   tools/install-deps.sh            build + test + benchmark dependencies (tools/test.sh)
#   tools/install-deps.sh --runtime  only what building and running tpnode needs
#                                    (tools/quickstart.sh): no test, browser, MPI or clang packages
set -euo pipefail
MODE=all
case "${1:-}" in
  --runtime) MODE=runtime ;;
  "") ;;
  *) echo "install-deps: unknown argument '$1' (--runtime or nothing)" >&2; exit 2 ;;
esac

# Building and running tpnode.
RUNTIME_PACKAGES=(
  build-essential cmake ninja-build ccache pkg-config git python3 curl
  libboost-dev libboost-program-options-dev libyaml-cpp-dev libspdlog-dev libfmt-dev
  libcli11-dev nlohmann-json3-dev libssl-dev openssl libicu-dev prometheus-cpp-dev
  libhiredis-dev
)
# Tests, fuzzing, sanitizers, the browser test, network namespaces, the comparison libraries
# and a Redis server (the redis tests start their own on a loopback port).
TEST_PACKAGES=(
  python3-numpy python3-venv clang libclang-rt-14-dev clang-format
  libgtest-dev libgmock-dev libbenchmark-dev
  iproute2 iperf3 procps
  chromium chromium-driver
  libgloo-dev openmpi-bin libopenmpi-dev
  redis-server
)
APT_PACKAGES=("${RUNTIME_PACKAGES[@]}")
[ "$MODE" = all ] && APT_PACKAGES+=("${TEST_PACKAGES[@]}")

missing=()
for p in "${APT_PACKAGES[@]}"; do
  dpkg-query -W -f='${Status}' "$p" 2>/dev/null | grep -q "install ok installed" || missing+=("$p")
done
if ((${#missing[@]})); then
  echo "[deps] installing: ${missing[*]}"
  SUDO=""
  [ "$(id -u)" -ne 0 ] && SUDO="sudo"
  export DEBIAN_FRONTEND=noninteractive
  $SUDO apt-get update -qq
  $SUDO apt-get install -y -qq --no-install-recommends "${missing[@]}"
else
  echo "[deps] all Debian packages present"
fi

[ "$MODE" = runtime ] && exit 0

# PyPI packages for test scripts, in a venv (Debian's python is externally managed):
# ${TPNODE_VENV:-$HOME/.cache/tpnode/venv}. tools/venv-python.sh runs python from it.
#   openai    the official client (1.66 or later: the Responses API), for
#             tests/node/api/test_openai_client.py
#   selenium  drives Debian's chromium + chromedriver for tests/node/api/test_chat_ui.py
#   prometheus-client  its parser checks /metrics in tests/node/operator_test.py
PIP_PACKAGES=(openai selenium numpy gguf prometheus-client)
VENV=${TPNODE_VENV:-$HOME/.cache/tpnode/venv}
if [ ! -x "$VENV/bin/python3" ]; then
  echo "[deps] creating python venv $VENV"
  python3 -m venv "$VENV"
fi
pip_missing=()
for p in "${PIP_PACKAGES[@]}"; do
  "$VENV/bin/python3" -m pip show -q "$p" >/dev/null 2>&1 || pip_missing+=("$p")
done
# client.responses (tests/node/api/test_openai_client.py) needs openai 1.66 or later.
if ! "$VENV/bin/python3" -c 'import sys, openai
sys.exit(tuple(int(x) for x in openai.__version__.split(".")[:2]) < (1, 66))' 2>/dev/null; then
  rest=()
  for p in "${pip_missing[@]}"; do [ "$p" = openai ] || rest+=("$p"); done
  pip_missing=("${rest[@]}" "openai>=1.66")
fi
if ((${#pip_missing[@]})); then
  echo "[deps] pip installing into $VENV: ${pip_missing[*]}"
  "$VENV/bin/python3" -m pip install -q --disable-pip-version-check "${pip_missing[@]}"
else
  echo "[deps] all PyPI packages present"
fi
