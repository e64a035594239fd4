#!/usr/bin/env bash
# Installs what dockyard needs to build on Debian 12, or says exactly what to install.
# Packages: bazel-bootstrap (Bazel 4.2.3 + JDK), g++, libcli11-dev, nlohmann-json3-dev,
# libfmt-dev, doctest-dev, libssl-dev (SHA-256 of inputs), libtomlplusplus-dev (torchtitan TOML job
# files), libyaml-cpp-dev (Megatron-Bridge YAML configs). CUDA (optional, for the GPU backend) is detected separately.
set -euo pipefail

PACKAGES=(bazel-bootstrap g++ libcli11-dev nlohmann-json3-dev libfmt-dev doctest-dev libssl-dev libtomlplusplus-dev libyaml-cpp-dev)
missing=()
for p in "${PACKAGES[@]}"; do
  dpkg-query -W -f='${Status}' "$p" 2>/dev/null | grep -q "install ok installed" || missing+=("$p")
done
[ ${#missing[@]} -eq 0 ] && exit 0

echo "dockyard: installing missing Debian packages: ${missing[*]}" >&2
if [ "$(id -u)" -eq 0 ]; then
  SUDO=""
elif command -v sudo >/dev/null 2>&1 && sudo -n true 2>/dev/null; then
  SUDO="sudo"
else
  echo "dockyard: cannot install as a normal user. Run:" >&2
  echo "  sudo apt-get update && sudo apt-get install -y ${missing[*]}" >&2
  exit 1
fi
export DEBIAN_FRONTEND=noninteractive
$SUDO apt-get update -qq >&2
$SUDO apt-get install -y -qq "${missing[@]}" >&2
