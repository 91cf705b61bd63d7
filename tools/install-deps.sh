#!/usr/bin/env bash
# Installs every build/test dependency of hubload from Debian packages.
# Idempotent: when everything is present it only runs dpkg-query (well under a second).
# Set HUBLOAD_SKIP_DEPS=1 to skip entirely (e.g. in a prepared container).
set -euo pipefail
[[ "${HUBLOAD_SKIP_DEPS:-0}" == 1 ]] && exit 0

PKGS=(
  build-essential cmake ninja-build pkg-config git ca-certificates
  libcurl4-openssl-dev libssl-dev openssl curl nlohmann-json3-dev
  libboost1.81-dev libtorch-dev libgloo-dev
  libgtest-dev libgmock-dev libbenchmark-dev
  libcli11-dev libspdlog-dev ccache libzip-dev libminizip-dev python3-torch
  clang libclang-rt-14-dev lld
  python3
)
command -v node >/dev/null 2>&1 || PKGS+=(nodejs)
command -v npm >/dev/null 2>&1 || PKGS+=(npm)

missing=()
for p in "${PKGS[@]}"; do
  status=$(dpkg-query -W -f='${Status}' "$p" 2>/dev/null || true)
  [[ "$status" == "install ok installed" ]] || missing+=("$p")
done
if ((${#missing[@]})); then
  echo "install-deps: installing ${missing[*]}" >&2
  SUDO=""
  [[ $(id -u) -ne 0 ]] && SUDO="sudo"
  export DEBIAN_FRONTEND=noninteractive
  # A fresh machine has empty or stale package lists.
  $SUDO apt-get update -qq
  $SUDO apt-get install -y -qq --no-install-recommends "${missing[@]}" >/dev/null
fi
