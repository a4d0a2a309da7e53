#!/usr/bin/env bash
# The GPU machine's one command: checks every CUDA kernel against its scalar reference
# (glia bench-ops --ops all --device cuda, over every weight type and the family shapes),
# shows which ops of each family's tiny model still run on the CPU (glia run -v -ngl 99),
# then runs the golden suite with every layer on the GPU (GLIA_DEVICE=cuda), and prints a
# short summary table last. Exit status: 0 when everything ran and passed.
#
# That machine has the CUDA toolkit, cmake, ninja and g++ but none of our Debian packages
# (no GoogleTest, nlohmann-json, PCRE2, cpp-httplib). So either
#   - carry binaries built on a Debian machine: `scripts/gpu-check.sh --pack` there writes
#     stripped copies of glia and tests/test_golden into build-carry/ (ignored by git), or
#   - let this script build glia there (GLIA_TESTS=OFF: the engine needs only the toolkit;
#     the BPE tokenizers need PCRE2 and the tiny models do not use them). test_golden needs
#     GoogleTest and nlohmann-json, so without a carried one the golden step is skipped.
#
# Usage: scripts/gpu-check.sh [--pack [DIR]] [--bin DIR] [--sanitize] [--quick]
#   --pack [DIR]  (build machine) copy stripped glia and test_golden from build/ into DIR
#                 (default build-carry/) and stop
#   --bin DIR     where glia (and tests/test_golden or test_golden) are; default: the first
#                 of build-carry/, build/, build-gpu/ whose glia runs here, else build-gpu/
#                 is built
#   --sanitize    run the op table and a subset of the goldens under compute-sanitizer
#                 (memcheck; GOLDEN_FILTER chooses the goldens, default the short prompts)
#   --quick       the op table at one shape and the default types only
# Environment: OUT (logs go there when set, else build-gpu-logs/), GLIA_SHARED (test data:
#   default shared/ or gpu-data/shared/ in the checkout, else ../shared), TYPES (weight
#   types for the op table), SHAPES (named shapes), TOKENS (default 1,16), GOLDEN_FILTER
#   (a gtest filter), SKIP_OPS=1, SKIP_PLACEMENT=1, SKIP_GOLDEN=1.
set -uo pipefail
export LD_LIBRARY_PATH="${LD_LIBRARY_PATH:-}"
root="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
cd "$root"

pack=""
bin=""
sanitize=0
quick=0
while [ $# -gt 0 ]; do
  case "$1" in
    --pack) pack="build-carry"; if [ $# -gt 1 ] && [ "${2#--}" = "$2" ]; then pack="$2"; shift; fi ;;
    --bin) bin="$2"; shift ;;
    --sanitize) sanitize=1 ;;
    --quick) quick=1 ;;
    -h|--help) sed -n '2,30p' "$0"; exit 0 ;;
    *) echo "gpu-check.sh: unknown option '$1' (--help)" >&2; exit 2 ;;
  esac
  shift
done

if [ -n "$pack" ]; then
  [ -x build/glia ] || { echo "gpu-check.sh --pack: build/glia not found (build first)" >&2; exit 2; }
  mkdir -p "$pack/lib"
  cp build/glia "$pack/glia"
  [ -x build/tests/test_golden ] && cp build/tests/test_golden "$pack/test_golden"
  strip --strip-debug "$pack/glia" "$pack"/test_golden 2>/dev/null || true
  # The shared libraries they load beyond glibc and the compiler's runtime (PCRE2,
  # cpp-httplib, OpenSSL, zlib, brotli): that machine has none of our Debian packages, but
  # it has g++ (libstdc++, whose copy from here would need this machine's glibc 2.36). The
  # script puts lib/ on LD_LIBRARY_PATH.
  for f in "$pack/glia" "$pack"/test_golden; do
    [ -x "$f" ] || continue
    ldd "$f" | awk '$2 == "=>" && $3 ~ /^\// { print $3 }' |
      grep -vE '/(libc|libm|libpthread|libdl|librt|libstdc\+\+|libgcc_s|ld-linux[^/]*)\.so' |
      while read -r lib; do cp -L "$lib" "$pack/lib/"; done
  done
  echo "gpu-check.sh: packed into $pack/ (carry it; $(du -sh "$pack" | cut -f1)):"
  ls -l "$pack" "$pack/lib"
  exit 0
fi

logs="${OUT:-$root/build-gpu-logs}"
mkdir -p "$logs"
summary=()
note() { summary+=("$1|$2|$3"); }  # step | result | detail
status=0

# The test data.
shared="${GLIA_SHARED:-}"
if [ -z "$shared" ]; then
  for d in "$root/shared" "$root/gpu-data/shared" "$root/../shared"; do
    [ -d "$d/models" ] && { shared="$d"; break; }
  done
fi
export GLIA_SHARED="$shared"

echo "== GPU"
nvidia-smi --query-gpu=name,memory.total,driver_version --format=csv,noheader 2>&1 | tee "$logs/gpu.txt" || true
nvcc --version 2>/dev/null | tail -1 || true

# Binaries: a carried or built glia that runs here.
runs() {
  local lp="$LD_LIBRARY_PATH"
  [ -d "$1/lib" ] && lp="$(cd "$1/lib" && pwd)${LD_LIBRARY_PATH:+:$LD_LIBRARY_PATH}"
  [ -x "$1/glia" ] && LD_LIBRARY_PATH="$lp" "$1/glia" --help >/dev/null 2>&1
}
if [ -z "$bin" ]; then
  for d in build-carry build build-gpu; do runs "$d" && { bin="$d"; break; }; done
fi
if [ -z "$bin" ]; then
  echo "== building glia (no runnable carried binary)"
  bin=build-gpu
  if cmake -S . -B build-gpu -G Ninja -DCMAKE_BUILD_TYPE=RelWithDebInfo -DGLIA_TESTS=OFF >"$logs/build.txt" 2>&1 &&
     cmake --build build-gpu --target glia -j "$(nproc)" >>"$logs/build.txt" 2>&1; then
    note build ok "build-gpu/glia (log build.txt)"
  else
    tail -30 "$logs/build.txt"
    note build FAILED "see build.txt"
    status=1
  fi
fi
[ -d "$bin/lib" ] && export LD_LIBRARY_PATH="$(cd "$bin/lib" && pwd)${LD_LIBRARY_PATH:+:$LD_LIBRARY_PATH}"
glia="$root/$bin/glia"
[ -x "$glia" ] || glia="$bin/glia"
golden=""
for g in "$bin/test_golden" "$bin/tests/test_golden"; do [ -x "$g" ] && golden="$g" && break; done
echo "binaries: $glia ${golden:-(no test_golden)}"
ldd "$glia" >"$logs/ldd.txt" 2>&1 || true

san=()
if [ "$sanitize" = 1 ]; then
  command -v compute-sanitizer >/dev/null || { echo "gpu-check.sh: compute-sanitizer not on PATH" >&2; exit 2; }
  san=(compute-sanitizer --tool memcheck --error-exitcode 86 --print-limit 20)
fi

# 1. The op table: every op's error against the scalar reference and its time.
if [ "${SKIP_OPS:-0}" != 1 ] && [ -x "$glia" ]; then
  all_types="f32,f16,bf16,q4_0,q4_1,q5_0,q5_1,q8_0,q2_k,q3_k,q4_k,q5_k,q6_k,iq4_nl,iq4_xs"
  if [ "$quick" = 1 ]; then
    shapes="${SHAPES:-llama3-1b}"; types="${TYPES:-q4_k,q6_k,q8_0}"
  else
    shapes="${SHAPES:-llama3-1b qwen35 kimi-k3 gemma4}"; types="${TYPES:-$all_types}"
  fi
  tokens="${TOKENS:-1,16}"
  first=1
  for shape in $shapes; do
    # Every type at the first shape; the family shapes with three types (their own ops differ).
    t="$types"; [ $first = 1 ] || t="${TYPES:-q4_k,q8_0,f16}"
    first=0
    log="$logs/ops-$shape.txt"
    echo "== bench-ops --ops all --device cuda --shape $shape --types $t --tokens $tokens"
    "${san[@]}" "$glia" bench-ops --ops all --device cuda --shape "$shape" --types "$t" --tokens "$tokens" -r 3 \
      >"$log" 2>&1
    rc=$?
    cat "$log"
    bad=$(grep -c '| NO |' "$log")
    unsup=$(grep -c 'unsupported' "$log")
    total=$(grep -c '^| [A-Z]' "$log")
    if [ $rc -ne 0 ] && [ "$bad" = 0 ]; then
      note "ops $shape" FAILED "exit $rc (see ops-$shape.txt)"; status=1
    elif [ "$bad" != 0 ]; then
      note "ops $shape" FAILED "$bad of $total over their bound, $unsup on the CPU"; status=1
    else
      note "ops $shape" ok "$total checked, $unsup unsupported (CPU)"
    fi
  done
fi

# 2. Where each family's ops run with every layer on the GPU (glia run -v): the ops left on
#    the CPU are the kernels still missing (or shapes their supports() refuses), and the
#    allocation summary after load (GLIA_TRACE_ALLOC).
if [ "${SKIP_PLACEMENT:-0}" != 1 ] && [ -x "$glia" ] && [ -d "$GLIA_SHARED/models" ]; then
  for m in stories260K tiny-llama-q4_k_m tiny-llama-q2_k tiny-llama-iq4_xs tiny-qwen3moe-q4_k_m tiny-gemma4-q4_k_m \
           tiny-qwen35-q4_k_m tiny-kimi-k3-q4_k_m tiny-lfm2-q4_k_m; do
    f="$GLIA_SHARED/models/$m.gguf"
    [ -f "$f" ] || continue
    log="$logs/run-$m.txt"
    GLIA_TRACE_ALLOC=1 "${san[@]}" "$glia" run "$f" -p "Once upon a time" -n 8 --temp 0 -ngl 99 -v >"$log" 2>&1
    rc=$?
    # Every plan printed (prompt and decode steps): the ops any of them runs on the CPU.
    cpu_ops=$(grep -E '^  cpu:' "$log" | sed 's/^  cpu://' | tr ' ' '\n' | grep -E '^[A-Z_]+$' | sort -u | tr '\n' ' ')
    if [ $rc -ne 0 ]; then note "run $m" FAILED "exit $rc (run-$m.txt)"; status=1
    elif [ -n "$cpu_ops" ]; then note "run $m" ok "on the CPU: $cpu_ops"
    else note "run $m" ok "every op on the GPU"; fi
  done
fi

# 3. The goldens with every layer on the GPU.
if [ "${SKIP_GOLDEN:-0}" != 1 ]; then
  if [ -z "$golden" ]; then
    note goldens skipped "no test_golden here (needs GoogleTest + nlohmann-json: carry it, --pack)"
  elif [ ! -d "$GLIA_SHARED/models" ]; then
    note goldens skipped "no test data (set GLIA_SHARED)"
  else
    filter="${GOLDEN_FILTER:-Shared/Golden.*}"
    [ "$sanitize" = 1 ] && filter="${GOLDEN_FILTER:-Shared/Golden.*p1_short*:Shared/Golden.*p4_single_token*}"
    export GLIA_DEVICE=cuda
    if [ "$sanitize" = 1 ]; then export GLIA_BINARY="${san[*]} $glia"; else export GLIA_BINARY="$glia"; fi
    echo "== goldens on the GPU: GLIA_DEVICE=cuda $golden --gtest_filter='$filter'"
    "$golden" --gtest_filter="$filter" >"$logs/golden.txt" 2>&1
    rc=$?
    grep -E '^\[golden\]|FAILED|PASSED' "$logs/golden.txt" | tail -150
    passed=$(grep -c '^\[       OK \]' "$logs/golden.txt")
    failed=$(grep -c '^\[  FAILED  \].*ms)$' "$logs/golden.txt")
    if [ $rc -eq 0 ]; then note goldens ok "$passed passed"; else note goldens FAILED "$failed failed, $passed passed (golden.txt)"; status=1; fi
    unset GLIA_DEVICE GLIA_BINARY
  fi
fi

echo
echo "== summary (logs in $logs)"
printf '| %-26s | %-7s | %s\n' step result detail
for line in "${summary[@]}"; do
  IFS='|' read -r a b c <<<"$line"
  printf '| %-26s | %-7s | %s\n' "$a" "$b" "$c"
done
exit $status
