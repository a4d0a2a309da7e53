#!/usr/bin/env bash
# Builds the libFuzzer targets with clang (ASan+UBSan) in build-asan/ (the build
# scripts/sanitize.sh uses; the fuzzers link its library, whose parsing folders carry the
# coverage instrumentation) and runs each for its share of $FUZZ_SECONDS on seed corpora
# made from the shared data:
#   fuzz_gguf       the GGUF reader: the first 64 KiB of every .gguf under models/ and
#                   vocab/, plus a copy of each with tensor_count zeroed
#   fuzz_tokenizer  every tokenizer of vocab/*.gguf: the test strings of vocab/*.inp, one
#                   seed per (vocabulary, string)
#   fuzz_jinja      the chat templates of templates/*.jinja with the conversations of
#                   templates/cases/, and each case against each template
#   fuzz_openai     request bodies (fuzz/seeds/openai) and the cases' message lists
#   fuzz_http       raw HTTP connections (fuzz/seeds/http) against stories260K
#   fuzz_schema     the JSON-schema compiler and its matcher on any JSON (fuzz/seeds/schema)
#   fuzz_ollama     ollama's /api/chat and /api/generate bodies and /infill's (fuzz/seeds/ollama)
# Corpora grow in build-asan/fuzz-corpus/<target> between runs. Exits non-zero when a
# fuzzer finds a crash (the reproducer is left in build-asan/).
#   FUZZ_SECONDS   total run time, shared equally (default 75)
#   FUZZ_TARGETS   which fuzzers (default: all seven)
#   JOBS           build jobs (default 2)     FUZZ_ARGS   extra libFuzzer arguments
#   CMAKE_ARGS     extra configure arguments (e.g. a compiler launcher)
set -euo pipefail
root="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
shared="${GLIA_SHARED:-$root/../shared}"
export GLIA_SHARED="$shared"
build="$root/build-asan"
seconds="${FUZZ_SECONDS:-75}"
jobs="${JOBS:-2}"
targets="${FUZZ_TARGETS:-fuzz_gguf fuzz_tokenizer fuzz_jinja fuzz_openai fuzz_http fuzz_schema fuzz_ollama}"

command -v clang++ >/dev/null || { echo "fuzz.sh: clang++ not found (apt-get install clang)" >&2; exit 2; }
[ -d "$shared" ] || { echo "fuzz.sh: shared data not found at $shared (set GLIA_SHARED)" >&2; exit 2; }

t0=$SECONDS
# shellcheck disable=SC2086
CC=clang CXX=clang++ cmake -S "$root" -B "$build" -G Ninja -DCMAKE_BUILD_TYPE=RelWithDebInfo \
  -DGLIA_FUZZ=ON -DGLIA_SANITIZE=ON -DGLIA_CUDA=OFF -DGLIA_TESTS=ON ${CMAKE_ARGS:-} >/dev/null
# shellcheck disable=SC2086
cmake --build "$build" -j "$jobs" --target $targets
echo "fuzz.sh: build $((SECONDS - t0)) s"

seeds="$build/fuzz-seeds"
rm -rf "$seeds"
mkdir -p "$seeds"

# Splits a vocab .inp file into its test strings (separator "\n__ggml_vocab_test__\n").
split_inp() {  # file out-prefix selector-byte-octal
  awk -v RS='\n__ggml_vocab_test__\n' -v pre="$2" -v sel="$3" \
    'length($0) > 0 { f = sprintf("%s%03d", pre, NR); printf "%c%s", sel, $0 > f; close(f) }' "$1"
}

make_seeds() {
  local t="$1" d="$seeds/$1" n=0
  mkdir -p "$d"
  case "$t" in
    fuzz_gguf)
      for f in "$shared"/models/*.gguf "$shared"/vocab/*.gguf; do
        [ -f "$f" ] || continue
        local b; b="$(basename "$f" .gguf)"
        head -c 65536 "$f" > "$d/$b.head"
        cp "$d/$b.head" "$d/$b.notensors"
        printf '\0\0\0\0\0\0\0\0' | dd of="$d/$b.notensors" bs=1 seek=8 conv=notrunc status=none
      done ;;
    fuzz_tokenizer)
      # The fuzzer loads vocab/*.gguf in name order; byte 0 selects one (mod their count).
      local i=0
      for f in $(cd "$shared/vocab" && ls ./*.gguf | sort); do
        f="${f#./}"
        [ -f "$shared/vocab/$f.inp" ] && split_inp "$shared/vocab/$f.inp" "$d/${f%.gguf}." "$i"
        i=$((i + 1))
      done ;;
    fuzz_jinja)
      local k=0
      for tpl in "$shared"/templates/*.jinja; do
        for c in "$shared"/templates/cases/a_single_user.json "$shared"/templates/cases/f_tool_call.json; do
          [ -f "$c" ] && { cat "$tpl"; printf '\0'; cat "$c"; } > "$d/$(basename "$tpl" .jinja).$(basename "$c" .json)"
        done
      done
      for c in "$shared"/templates/cases/*.json; do
        for j in 0 7 19 33 51; do
          { printf "\\001\\$(printf '%03o' "$j")"; cat "$c"; } > "$d/case$j.$(basename "$c" .json)"
        done
        k=$((k + 1))
      done ;;
    fuzz_openai)
      cp "$root"/fuzz/seeds/openai/* "$d/"
      for c in "$shared"/templates/cases/*.json; do
        { printf '\0'; cat "$c"; } > "$d/case.$(basename "$c" .json)"
      done ;;
    fuzz_http)
      cp "$root"/fuzz/seeds/http/* "$d/" ;;
    fuzz_schema)
      cp "$root"/fuzz/seeds/schema/* "$d/" ;;
    fuzz_ollama)
      cp "$root"/fuzz/seeds/ollama/* "$d/" ;;
  esac
  n=$(find "$d" -type f | wc -l)
  echo "$n"
}

export ASAN_OPTIONS="${ASAN_OPTIONS:-detect_leaks=1:allocator_may_return_null=0}"
export UBSAN_OPTIONS="${UBSAN_OPTIONS:-halt_on_error=1:print_stacktrace=1}"
set -- $targets
share=$(( seconds / $# ))
[ "$share" -ge 1 ] || share=1
status=0
for t in $targets; do
  n="$(make_seeds "$t")"
  corpus="$build/fuzz-corpus/$t"
  mkdir -p "$corpus"
  args=(-max_total_time="$share" -rss_limit_mb=2048 -timeout=10 -print_final_stats=1)
  case "$t" in
    fuzz_gguf) args+=(-max_len=65536 -dict="$root/fuzz/gguf.dict") ;;
    fuzz_http) args+=(-max_len=16384) ;;
    *) args+=(-max_len=32768) ;;
  esac
  echo "== $t: $n seeds, ${share}s"
  # shellcheck disable=SC2086
  if ! (cd "$build" && "./fuzz/$t" "${args[@]}" ${FUZZ_ARGS:-} "$corpus" "$seeds/$t" 2>&1 | tail -n 60); then
    echo "fuzz.sh: $t found a problem (see above; reproducer in $build)" >&2
    status=1
  fi
done
[ "$status" -eq 0 ] && echo "fuzz.sh: no findings"
exit "$status"
