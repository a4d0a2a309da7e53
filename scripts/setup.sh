#!/usr/bin/env bash
# Installs every Debian package glia's build and tests need (idempotent), then
# configures and builds in build/. Usage: scripts/setup.sh [extra cmake args]
set -euo pipefail
root="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"

packages=(
  build-essential cmake ninja-build pkg-config   # toolchain
  libgtest-dev libgmock-dev                      # unit tests
  nlohmann-json3-dev                             # JSON in tests and tools
  libpcre2-dev                                   # BPE pre-tokenizer regexes
  clang libclang-rt-14-dev                       # libFuzzer + sanitizer runtimes
  libcpp-httplib-dev                             # glia serve
  nodejs                                         # server protocol tests (the openai npm package; npm too)
  chromium fonts-dejavu-core                     # the chat page's browser test (headless, via playwright-core)
  python3                                        # scripts/soak.py (the soak test)
)
missing=()
for p in "${packages[@]}"; do
  dpkg-query -W -f='${Status}' "$p" 2>/dev/null | grep -q "install ok installed" || missing+=("$p")
done
if [ ${#missing[@]} -gt 0 ]; then
  echo "setup.sh: installing ${missing[*]}"
  SUDO=""
  [ "$(id -u)" -ne 0 ] && SUDO="sudo"
  export DEBIAN_FRONTEND=noninteractive
  $SUDO apt-get update -qq
  $SUDO apt-get install -y -qq --no-install-recommends "${missing[@]}"
fi

cmake -S "$root" -B "$root/build" -G Ninja "$@"
cmake --build "$root/build" -j "${JOBS:-$(nproc)}"
