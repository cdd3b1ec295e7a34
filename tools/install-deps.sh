#!/usr/bin/env bash
# Installs tpnode's build and test dependencies from Debian packages and PyPI. Idempotent:
# does nothing when everything is present. Needs root (or sudo) for apt.
set -euo pipefail

APT_PACKAGES=(
  build-essential cmake ninja-build ccache pkg-config git python3 python3-numpy
  clang libclang-rt-14-dev clang-format
  libboost-dev libboost-program-options-dev libyaml-cpp-dev libspdlog-dev libfmt-dev
  libcli11-dev nlohmann-json3-dev libssl-dev openssl prometheus-cpp-dev
  libgtest-dev libgmock-dev libbenchmark-dev libicu-dev
  iproute2 iperf3 procps curl
  chromium chromium-driver python3-venv
  libgloo-dev openmpi-bin libopenmpi-dev
)

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

# PyPI packages for test scripts, in a venv (Debian's python is externally managed):
# ${TPNODE_VENV:-$HOME/.cache/tpnode/venv}. tools/venv-python.sh runs python from it.
#   openai    the official client, for tests/node/api/test_openai_client.py
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
if ((${#pip_missing[@]})); then
  echo "[deps] pip installing into $VENV: ${pip_missing[*]}"
  "$VENV/bin/python3" -m pip install -q --disable-pip-version-check "${pip_missing[@]}"
else
  echo "[deps] all PyPI packages present"
fi
