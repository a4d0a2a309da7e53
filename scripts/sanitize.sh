#!/usr/bin/env bash
# Builds the reader tests (test_gguf, test_core) and the glia binary with AddressSanitizer
# and UndefinedBehaviorSanitizer in build-asan/, then runs them. Exits non-zero on any build
# error, test failure or sanitizer report.
#   JOBS=N            parallel build jobs (default 2)
#   SANITIZE_TESTS    test executables to run (default "test_gguf test_core")
#   GLIA_SHARED       shared test data (default ../shared next to the checkout)
set -euo pipefail
root="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
build="$root/build-asan"
jobs="${JOBS:-2}"
tests="${SANITIZE_TESTS:-test_gguf test_core}"

cmake -S "$root" -B "$build" -G Ninja -DCMAKE_BUILD_TYPE=RelWithDebInfo \
  -DGLIA_SANITIZE=ON -DGLIA_CUDA=OFF -DGLIA_TESTS=ON >/dev/null
# shellcheck disable=SC2086
cmake --build "$build" -j "$jobs" --target glia $tests

# halt_on_error: the first report fails the run; detect_leaks: leaks are failures too.
export ASAN_OPTIONS="${ASAN_OPTIONS:-detect_leaks=1:halt_on_error=1:abort_on_error=1:strict_string_checks=1:detect_stack_use_after_return=1}"
export UBSAN_OPTIONS="${UBSAN_OPTIONS:-halt_on_error=1:print_stacktrace=1}"
status=0
for t in $tests; do
  echo "== $t (ASan+UBSan)"
  if ! "$build/tests/$t" --gtest_brief=1; then
    echo "sanitize.sh: $t FAILED" >&2
    status=1
  fi
done
[ "$status" -eq 0 ] && echo "sanitize.sh: all sanitizer runs passed"
exit "$status"
