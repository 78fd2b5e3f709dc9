#!/usr/bin/env bash
# Installs the Debian 12 packages the build and tests need. Idempotent and non-interactive:
# does nothing when every package is already installed.
set -euo pipefail
PKGS=(
  cmake make g++ pkg-config ccache lld
  libgrpc++-dev protobuf-compiler-grpc libprotobuf-dev protobuf-compiler
  libabsl-dev libeigen3-dev libboost-dev prometheus-cpp-dev nlohmann-json3-dev libmurmurhash-dev rapidjson-dev libcpp-httplib-dev zlib1g-dev libisal-dev
  libgtest-dev libgmock-dev libbenchmark-dev
  python3-grpcio python3-protobuf python3-numpy python3-matplotlib
  python3-venv python3-pip python3-setuptools python3-wheel
  prometheus docker-compose python3-yaml
  openssl libssl-dev clang libclang-rt-14-dev
  postgresql libpq-dev
  haproxy
  patroni etcd-server
)
# client/node (tests: node --test, deps: npm ci): Debian's nodejs (18) + npm, unless a Node.js
# with npm is already there (NodeSource's nodejs bundles npm and conflicts with Debian's npm).
command -v npm >/dev/null 2>&1 || PKGS+=(nodejs npm)
missing=()
for p in "${PKGS[@]}"; do
  dpkg-query -W -f='${Status}' "$p" 2>/dev/null | grep -q 'install ok installed' || missing+=("$p")
done
if [ ${#missing[@]} -eq 0 ]; then
  exit 0
fi
echo "deps: installing ${missing[*]}"
SUDO=""
[ "$(id -u)" -ne 0 ] && SUDO="sudo"
export DEBIAN_FRONTEND=noninteractive
$SUDO apt-get update -qq
$SUDO apt-get install -y -qq --no-install-recommends "${missing[@]}"
