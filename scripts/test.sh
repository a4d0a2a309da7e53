#!/usr/bin/env bash
# Runs every test: builds (via setup.sh), runs the CTest suite (unit + golden tests and the
# short soak test), the sanitizer runs (scripts/sanitize.sh: ASan+UBSan over the suite
# but the golden runs, TSan over the engine and server tests) and a short fuzzing run of
# every fuzzer (scripts/fuzz.sh, sharing the ASan build). Prints the time of each part.
# Exits non-zero when anything fails.
#   FUZZ_SECONDS   fuzzing time (default 75; 0 skips fuzzing)
#   SANITIZE       0 skips the sanitizer runs
#   LOAD_TESTS     0 skips the run of the golden and CLI tests beside a CPU hog
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
if [ "${LOAD_TESTS:-1}" != "0" ]; then
  # Results never depend on machine load: the CLI tests, the goldens' two short prompts on
  # every model, the thread-count bit checks and the slow-consumer test (the thread pool must
  # not starve other threads) again, with a busy process on every core beside them
  # (scripts/under_load.sh; estimated 2-3 minutes on CI's 2 cores). CTest names a parameterized
  # golden "NAME  # GetParam() = ...", hence "( |$)" rather than "$" after the prompt.
  echo "== golden and CLI tests under load"
  t0=$SECONDS
  load_tests='^(Cli|RunCli|ThreadCountBits\.|Engine\.SlowConsumer)|Golden\.MatchesReference/.*__p(1_short|2_story40)( |$)'
  "$root/scripts/under_load.sh" ctest --test-dir "$root/build" -j "$(nproc)" --output-on-failure --timeout 900 \
    -R "$load_tests"
  echo "test.sh: tests under load $((SECONDS - t0)) s"
fi
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
