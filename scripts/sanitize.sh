#!/usr/bin/env bash
# Sanitizer runs of the test suite (CUDA off; only the needed executables are built).
#
#   scripts/sanitize.sh            CI's share: ASan+UBSan over test_gguf test_core
#                                  test_tokenizer test_jinja test_cpu test_server
#                                  test_runtime, and TSan over test_runtime test_server
#   scripts/sanitize.sh --all      every test executable under ASan+UBSan (test_golden
#                                  included) and the engine and server tests under TSan:
#                                  the whole suite, about an hour on 2 cores
#
# ASan+UBSan: clang, build-asan/ (shared with scripts/fuzz.sh: the fuzzers link the same
# library). TSan: clang, build-tsan/. Exits non-zero on any build error, test failure or
# sanitizer report (every report is fatal: halt_on_error).
#   JOBS=N         parallel build jobs (default 2)
#   RUN_JOBS=N     test executables run at once (default: JOBS)
#   ASAN_TESTS     test executables under ASan+UBSan (default: see below; "" skips)
#   TSAN_TESTS     test executables under TSan (default "": the TSan build alone takes ~20 minutes on
#                  CI's 2 cores; --all, or TSAN_TESTS="test_runtime test_server", runs them)
#   SANITIZE_FILTER  a --gtest_filter for every run (e.g. to bisect)
#   CMAKE_ARGS     extra configure arguments (e.g. a compiler launcher)
#   GLIA_SHARED    shared test data (default ../shared next to the checkout)
set -euo pipefail
root="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
export GLIA_SHARED="${GLIA_SHARED:-$(cd "$root/.." && pwd)/shared}"
jobs="${JOBS:-2}"
all=0
[ "${1:-}" = "--all" ] && all=1

# CI's share (kept lean for CI's time budget): the parsers', the CPU kernels', the
# engine's and server's suites. --all adds every other executable (test_golden and
# test_dispatch, the golden models on every prompt and layer split, take most of the time).
default_asan="test_server test_runtime test_cpu test_gguf test_core test_tokenizer test_jinja"  # longest first
if [ "$all" = 1 ]; then
  default_asan="$(cd "$root/tests" && for d in */; do d="${d%/}"; [ "$d" != common ] && ls "$d"/*.cpp >/dev/null 2>&1 && printf 'test_%s ' "$d"; done)"
fi
asan_tests="${ASAN_TESTS-$default_asan}"
default_tsan=""
[ "$all" = 1 ] && default_tsan="test_runtime test_server"
tsan_tests="${TSAN_TESTS-$default_tsan}"
# Only executables that exist as test folders.
keep() { local out=""; for t in $1; do [ -d "$root/tests/${t#test_}" ] && out="$out $t"; done; echo "$out"; }
asan_tests="$(keep "$asan_tests")"
tsan_tests="$(keep "$tsan_tests")"

command -v clang++ >/dev/null || { echo "sanitize.sh: clang++ not found (apt-get install clang)" >&2; exit 2; }
# Timing tests (speed bounds) mean nothing under sanitizers: left out unless a filter is given.
filter=(--gtest_filter="-*Under50ms*:*Speed*")
[ -n "${SANITIZE_FILTER:-}" ] && filter=(--gtest_filter="$SANITIZE_FILTER")
status=0

# The executables of a suite run RUN_JOBS at a time (default: the build's jobs), each into
# its own log, the logs printed in order once all have run: the server suite (the longest) waits
# on its servers much of the time, so the others run beside it.
run_suite() {  # name build-dir tests...
  local kind="$1" build="$2"; shift 2
  local logs; logs="$(mktemp -d)"
  local running=0 t
  for t in "$@"; do
    (
      t0=$SECONDS
      if (cd "$build" && "./tests/$t" --gtest_brief=1 "${filter[@]}") >"$logs/$t.log" 2>&1; then
        echo "   $t: $((SECONDS - t0)) s" >>"$logs/$t.log"
      else
        echo "sanitize.sh: $t FAILED under $kind" >>"$logs/$t.log"
        touch "$logs/$t.failed"
      fi
    ) &
    running=$((running + 1))
    if [ "$running" -ge "${RUN_JOBS:-$jobs}" ]; then wait -n || true; running=$((running - 1)); fi
  done
  wait
  for t in "$@"; do
    echo "== $t ($kind)"
    cat "$logs/$t.log"
    if [ -e "$logs/$t.failed" ]; then echo "sanitize.sh: $t FAILED under $kind" >&2; status=1; fi
  done
  rm -rf "$logs"
}

if [ -n "${asan_tests// /}" ]; then
  t0=$SECONDS
  # shellcheck disable=SC2086
  CC=clang CXX=clang++ cmake -S "$root" -B "$root/build-asan" -G Ninja -DCMAKE_BUILD_TYPE=RelWithDebInfo \
    -DGLIA_SANITIZE=ON -DGLIA_FUZZ=ON -DGLIA_CUDA=OFF -DGLIA_TESTS=ON ${CMAKE_ARGS:-} >/dev/null
  # shellcheck disable=SC2086
  cmake --build "$root/build-asan" -j "$jobs" --target glia $asan_tests
  echo "sanitize.sh: ASan+UBSan build $((SECONDS - t0)) s"
  # halt_on_error: the first report fails the run; detect_leaks: leaks are failures too.
  export ASAN_OPTIONS="${ASAN_OPTIONS:-detect_leaks=1:halt_on_error=1:abort_on_error=1:strict_string_checks=1:detect_stack_use_after_return=1}"
  export UBSAN_OPTIONS="${UBSAN_OPTIONS:-halt_on_error=1:print_stacktrace=1}"
  # shellcheck disable=SC2086
  run_suite "ASan+UBSan" "$root/build-asan" $asan_tests
fi

if [ -n "${tsan_tests// /}" ]; then
  t0=$SECONDS
  # shellcheck disable=SC2086
  CC=clang CXX=clang++ cmake -S "$root" -B "$root/build-tsan" -G Ninja -DCMAKE_BUILD_TYPE=RelWithDebInfo \
    -DGLIA_TSAN=ON -DGLIA_CUDA=OFF -DGLIA_TESTS=ON ${CMAKE_ARGS:-} >/dev/null
  # shellcheck disable=SC2086
  cmake --build "$root/build-tsan" -j "$jobs" --target glia $tsan_tests
  echo "sanitize.sh: TSan build $((SECONDS - t0)) s"
  export TSAN_OPTIONS="${TSAN_OPTIONS:-halt_on_error=1:second_deadlock_stack=1:suppressions=$root/scripts/tsan.supp}"
  # shellcheck disable=SC2086
  run_suite "TSan" "$root/build-tsan" $tsan_tests
fi

[ "$status" -eq 0 ] && echo "sanitize.sh: all sanitizer runs passed"
exit "$status"
