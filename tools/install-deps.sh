#!/usr/bin/env bash
# Installs tpnode's build and test dependencies from Debian packages and PyPI. Idempotent:
# does nothing when everything is present. Needs root (or sudo) for apt.
set -euo pipefail

APT_PACKAGES=(
  build-essential cmake ninja-build ccache pkg-config git python3 python3-numpy
  clang libclang-rt-14-dev clang-format
  libboost-dev libboost-program-options-dev libyaml-cpp-dev libspdlog-dev libfmt-dev
  libcli11-dev nlohmann-json3-dev libssl-dev openssl
  libgtest-dev libgmock-dev libbenchmark-dev
  iproute2 iperf3 procps curl
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
