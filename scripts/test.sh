#!/usr/bin/env bash
# Runs every test: builds (via setup.sh), runs the CTest suite (unit + golden tests and the
# short soak test), the sanitizer runs (scripts/sanitize.sh: ASan+UBSan over the suite
# but the golden runs, TSan over the engine and server tests) and a short fuzzing run of
# every fuzzer (scripts/fuzz.sh, sharing the ASan build). Prints the time of each part.
# Exits non-zero when anything fails.
#   FUZZ_SECONDS   fuzzing time (default 75; 0 skips fuzzing)
#   SANITIZE       0 skips the sanitizer runs
set -euo pipefail
root="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
export GLIA_SHARED="${GLIA_SHARED:-$(cd "$root/.." && pwd)/shared}"
[ -d "$GLIA_SHARED" ] || { echo "test.sh: shared test data not found at $GLIA_SHARED (set GLIA_SHARED)" >&2; exit 2; }

t0=$SECONDS
"$root/scripts/setup.sh"
echo "test.sh: build $((SECONDS - t0)) s"
echo "== ctest"
t0=$SECONDS
(cd "$root/build" && ctest -j "$(nproc)" --output-on-failure --timeout 900)
echo "test.sh: ctest $((SECONDS - t0)) s"
if [ "${SANITIZE:-1}" != "0" ]; then
  echo "== sanitizers"
  t0=$SECONDS
  "$root/scripts/sanitize.sh"
  echo "test.sh: sanitizers $((SECONDS - t0)) s"
fi
if [ "${FUZZ_SECONDS:-75}" != "0" ]; then
  echo "== fuzzing"
  t0=$SECONDS
  "$root/scripts/fuzz.sh"
  echo "test.sh: fuzzing $((SECONDS - t0)) s"
fi
echo "test.sh: all tests passed"
