#!/usr/bin/env bash
# Builds the libFuzzer GGUF target with clang (ASan+UBSan) in build-fuzz/ (only src/gguf and
# its dtype table are compiled: see fuzz/CMakeLists.txt) and runs it for
# $FUZZ_SECONDS (default 60) on a seed corpus made from the shared files' headers: the first
# 64 KiB of every .gguf under $GLIA_SHARED/models and /vocab, plus a copy of each with
# tensor_count zeroed (so that the fuzzer also starts from files that parse completely).
# Exits non-zero when the fuzzer finds a crash (the reproducer is left in build-fuzz/).
#   FUZZ_SECONDS   run time (default 60)     JOBS   build jobs (default 2)
#   FUZZ_ARGS      extra libFuzzer arguments
set -euo pipefail
root="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
shared="${GLIA_SHARED:-$root/../shared}"
build="$root/build-fuzz"
seconds="${FUZZ_SECONDS:-60}"
jobs="${JOBS:-2}"

command -v clang++ >/dev/null || { echo "fuzz.sh: clang++ not found (apt-get install clang)" >&2; exit 2; }
[ -d "$shared" ] || { echo "fuzz.sh: shared data not found at $shared (set GLIA_SHARED)" >&2; exit 2; }

CC=clang CXX=clang++ cmake -S "$root" -B "$build" -G Ninja -DCMAKE_BUILD_TYPE=RelWithDebInfo \
  -DGLIA_FUZZ=ON -DGLIA_SANITIZE=ON -DGLIA_CUDA=OFF -DGLIA_TESTS=OFF >/dev/null
cmake --build "$build" -j "$jobs" --target fuzz_gguf

seeds="$build/seeds"
corpus="$build/corpus"
rm -rf "$seeds"
mkdir -p "$seeds" "$corpus"
n=0
for f in "$shared"/models/*.gguf "$shared"/vocab/*.gguf; do
  [ -f "$f" ] || continue
  b="$(basename "$f" .gguf)"
  head -c 65536 "$f" > "$seeds/$b.head"
  cp "$seeds/$b.head" "$seeds/$b.notensors"
  printf '\0\0\0\0\0\0\0\0' | dd of="$seeds/$b.notensors" bs=1 seek=8 conv=notrunc status=none
  n=$((n + 1))
done
[ "$n" -gt 0 ] || { echo "fuzz.sh: no .gguf files under $shared/models or $shared/vocab" >&2; exit 2; }
echo "fuzz.sh: $((2 * n)) seeds from $n files; fuzzing for ${seconds}s"

cd "$build"
export ASAN_OPTIONS="${ASAN_OPTIONS:-detect_leaks=1:allocator_may_return_null=0}"
export UBSAN_OPTIONS="${UBSAN_OPTIONS:-halt_on_error=1:print_stacktrace=1}"
# shellcheck disable=SC2086
./fuzz/fuzz_gguf -max_total_time="$seconds" -max_len=65536 -rss_limit_mb=2048 -timeout=10 \
  -dict="$root/fuzz/gguf.dict" -print_final_stats=1 ${FUZZ_ARGS:-} "$corpus" "$seeds"
