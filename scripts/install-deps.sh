#!/usr/bin/env bash
# Installs the Debian packages that ParaTwin's build and tests need, only when some are missing.
# Idempotent and quiet when everything is present; exits non-zero with a clear message otherwise.
set -euo pipefail

packages=(
  build-essential cmake ninja-build pkg-config ccache git
  libyaml-cpp-dev libeigen3-dev nlohmann-json3-dev libcli11-dev libdnnl-dev zlib1g-dev
  ocl-icd-opencl-dev  # Debian's dnnl-config.cmake requires OpenCL (only a Recommends of libdnnl-dev)
  libprotobuf-dev protobuf-compiler python3-protobuf
  libboost-test-dev
  libsimgrid-dev
  openmpi-bin libopenmpi-dev
  qt6-base-dev fonts-dejavu-core
  clang libfuzzer-14-dev
)

missing=()
for p in "${packages[@]}"; do
  dpkg-query -W -f='${Status}' "$p" 2>/dev/null | grep -q "install ok installed" || missing+=("$p")
done
[ ${#missing[@]} -eq 0 ] && exit 0

echo "install-deps: missing Debian packages: ${missing[*]}"
if [ "$(id -u)" -ne 0 ]; then
  if command -v sudo >/dev/null 2>&1 && sudo -n true 2>/dev/null; then
    SUDO=sudo
  else
    echo "install-deps: not root and no password-less sudo; run as root:" >&2
    echo "  apt-get install -y --no-install-recommends ${missing[*]}" >&2
    exit 1
  fi
else
  SUDO=
fi
export DEBIAN_FRONTEND=noninteractive
$SUDO apt-get update -qq
$SUDO apt-get install -y -qq --no-install-recommends "${missing[@]}" >/dev/null
echo "install-deps: installed ${#missing[@]} packages"
