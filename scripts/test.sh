#!/usr/bin/env bash
# Runs every test: builds (via setup.sh), runs the CTest suite (unit + golden tests),
# the sanitizer build of the file-format tests, and a short fuzzing run.
# Exits non-zero when anything fails.
#   FUZZ_SECONDS   fuzzing time (default 60; 0 skips fuzzing)
set -euo pipefail
root="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
export GLIA_SHARED="${GLIA_SHARED:-$(cd "$root/.." && pwd)/shared}"
[ -d "$GLIA_SHARED" ] || { echo "test.sh: shared test data not found at $GLIA_SHARED (set GLIA_SHARED)" >&2; exit 2; }

"$root/scripts/setup.sh"
echo "== ctest"
(cd "$root/build" && ctest -j "$(nproc)" --output-on-failure --timeout 900)
echo "== sanitizers"
"$root/scripts/sanitize.sh"
if [ "${FUZZ_SECONDS:-60}" != "0" ]; then
  echo "== fuzzing"
  "$root/scripts/fuzz.sh"
fi
echo "test.sh: all tests passed"
