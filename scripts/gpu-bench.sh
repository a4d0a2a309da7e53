#!/usr/bin/env bash
# The GPU machine's speed run, companion of gpu-check.sh: makes each shape's file with
# `glia synth` there (big files do not travel), then for every setting of an A/B (environment
# assignments) runs `glia bench` (pp/tg and the batched engine) and the sampled text of one
# prompt; checks that every setting gives the same text (a setting that should change no bits
# must not), that a batch changes nothing (`--check-alone`) and that every op at the shape is
# within its bound (`bench-ops`, for the shapes it knows); prints a short table last.
#
# Usage: scripts/gpu-bench.sh [--bin DIR] [--shapes LIST] [--type T] [--ab "A;B;..."]
#                             [--parallel LIST] [--ngl N] [--reps N] [--vocab-dir DIR]
#   --bin DIR        where glia is (default: the first of build-carry/, build/, gpu-data/bin/)
#   --shapes LIST    glia synth shapes, comma-separated (default llama3-1b,llama3-8b)
#   --type T         glia synth type (default q4_k_m)
#   --ab "A;B"       settings, ';'-separated, each space-separated VAR=value; "-" is the
#                    default environment (default: "-"). Example: --ab "GLIA_CUDA_PDL=0;-"
#   --parallel LIST  batched bench sequence counts (default 1,8,32,64; "" skips it)
#   --ngl N          layers on the GPU (default 99; 0 runs the same on the CPU)
#   --reps N         repetitions of pp/tg (default 2)
#   --vocab-dir DIR  where the ggml-vocab-*.gguf (or .gguf.xz) files are (default:
#                    $GLIA_SHARED/vocab, else gpu-data/, else ../shared/vocab)
# Environment: OUT (logs; default build-gpu-logs/), SYNTH_DIR (files; default /tmp/glia-synth),
#   SYNTH_THREADS (default: all cores). Exit status 0 when every check passed.
set -uo pipefail
root="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
cd "$root"

bin="" shapes="llama3-1b,llama3-8b" type="q4_k_m" ab="-" parallel="1,8,32,64" ngl=99 reps=2 vocab_dir=""
while [ $# -gt 0 ]; do
  case "$1" in
    --bin) bin="$2"; shift ;;
    --shapes) shapes="$2"; shift ;;
    --type) type="$2"; shift ;;
    --ab) ab="$2"; shift ;;
    --parallel) parallel="$2"; shift ;;
    --ngl) ngl="$2"; shift ;;
    --reps) reps="$2"; shift ;;
    --vocab-dir) vocab_dir="$2"; shift ;;
    -h|--help) sed -n '2,22p' "$0"; exit 0 ;;
    *) echo "gpu-bench.sh: unknown option '$1' (--help)" >&2; exit 2 ;;
  esac
  [ $# -gt 0 ] && shift
done

if [ -z "$bin" ]; then
  for d in build-carry build gpu-data/bin; do [ -x "$d/glia" ] && { bin="$d"; break; }; done
fi
[ -n "$bin" ] && [ -x "$bin/glia" ] || { echo "gpu-bench.sh: no glia found (--bin DIR)" >&2; exit 2; }
[ -d "$bin/lib" ] && export LD_LIBRARY_PATH="$(cd "$bin/lib" && pwd)${LD_LIBRARY_PATH:+:$LD_LIBRARY_PATH}"
glia="$(cd "$bin" && pwd)/glia"
logs="${OUT:-$root/build-gpu-logs}"
synth_dir="${SYNTH_DIR:-/tmp/glia-synth}"
mkdir -p "$logs" "$synth_dir"
if [ -z "$vocab_dir" ]; then
  for d in "${GLIA_SHARED:-/nonexistent}/vocab" "$root/gpu-data" "$root/../shared/vocab"; do
    [ -d "$d" ] && { vocab_dir="$d"; break; }
  done
fi
summary=()
note() { summary+=("$1|$2|$3"); }
status=0

# The vocabulary file a shape names (glia synth --list-shapes), from vocab_dir (.xz unpacked).
vocab_for() {
  local name f
  name="$("$glia" synth --list-shapes 2>/dev/null | awk -v s="$1:" '$1 == s { print $NF }')"
  name="$(basename "$name")"
  [ -n "$name" ] || return 1
  f="$vocab_dir/$name"
  if [ ! -f "$f" ] && [ -f "$f.xz" ]; then
    python3 -c 'import lzma,shutil,sys; shutil.copyfileobj(lzma.open(sys.argv[1]), open(sys.argv[2],"wb"))' \
      "$f.xz" "$synth_dir/$name" && f="$synth_dir/$name"
  fi
  [ -f "$f" ] || { [ "$name" = stories260K.gguf ] && f="${GLIA_SHARED:-$root/../shared}/models/$name"; }
  [ -f "$f" ] && echo "$f"
}

IFS=';' read -r -a settings <<<"$ab"
for shape in ${shapes//,/ }; do
  file="$synth_dir/$shape-$type.gguf"
  if [ ! -f "$file" ]; then
    vocab="$(vocab_for "$shape")" || { note "synth $shape" FAILED "no vocabulary for it in $vocab_dir"; status=1; continue; }
    start=$(date +%s)
    if ! "$glia" synth "$file" --shape "$shape" --type "$type" --vocab-from "$vocab" -t "${SYNTH_THREADS:-0}" \
         >"$logs/synth-$shape.txt" 2>&1; then
      note "synth $shape" FAILED "see synth-$shape.txt"; status=1; rm -f "$file"; continue
    fi
    note "synth $shape" ok "$(( $(date +%s) - start )) s"
  fi
  # Every op at the shape within its bound (launch limits of the real sizes included).
  case "$shape" in
    llama3-1b|llama3-8b|qwen3-0.6b)
      if [ "$ngl" != 0 ]; then
        log="$logs/ops-$shape.txt"
        "$glia" bench-ops --ops all --device cuda --shape "$shape" --types q4_k,q6_k,q8_0,f16 --tokens 1,64 -r 2 >"$log" 2>&1
        bad=$(grep -c '| NO |' "$log"); total=$(grep -c '^| [A-Z]' "$log")
        if [ "$bad" != 0 ] || [ "$total" = 0 ]; then note "ops $shape" FAILED "$bad of $total over their bound"; status=1
        else note "ops $shape" ok "$total within their bound"; fi
      fi ;;
  esac
  texts=()
  for s in "${settings[@]}"; do
    env_args=()
    [ "$s" = "-" ] || read -r -a env_args <<<"$s"
    tag="${s// /,}"
    log="$logs/bench-$shape-${tag//[^A-Za-z0-9_=,.-]/_}.txt"
    env "${env_args[@]}" "$glia" bench "$file" -ngl "$ngl" -p 512 -n 128 -r "$reps" >"$log" 2>&1 || status=1
    pp=$(awk -F'|' '$7 ~ /pp512/ { gsub(/ /, "", $8); print $8 }' "$log")
    tg=$(awk -F'|' '$7 ~ /tg128/ { gsub(/ /, "", $8); print $8 }' "$log")
    gen=""
    if [ -n "$parallel" ]; then
      env "${env_args[@]}" "$glia" bench "$file" -ngl "$ngl" --parallel "$parallel" --pp 128 --tg 128 -r 1 >>"$log" 2>&1 || status=1
      gen=$(awk -F'|' '$4 ~ /^ *[0-9]+ *$/ && $8 ~ /[0-9]/ { split($8, a, "±"); gsub(/ /, "", a[1]); printf "%s%s", sep, a[1]; sep="/" }' "$log")
    fi
    note "bench $shape [$s]" "$([ -n "$pp$tg" ] && echo ok || echo FAILED)" \
      "pp512 ${pp:-?}, tg128 ${tg:-?}${parallel:+; generated t/s at $parallel: ${gen:-?}}"
    texts+=("$(env "${env_args[@]}" "$glia" run "$file" -ngl "$ngl" -p "Once upon a time, in a land far away," -n 64 \
                --temp 0.8 --seed 7 2>/dev/null | md5sum | cut -c1-12)")
  done
  distinct=$(printf '%s\n' "${texts[@]}" | sort -u | wc -l)
  if [ "$distinct" = 1 ]; then note "same text $shape" ok "${#texts[@]} settings, one output"
  else note "same text $shape" DIFFERS "$distinct outputs for ${#texts[@]} settings (${texts[*]})"; status=1; fi
  log="$logs/alone-$shape.txt"
  "$glia" bench "$file" -ngl "$ngl" --parallel 16 --pp 128 --tg 32 -r 1 --check-alone >"$log" 2>&1
  line=$(grep -o '[0-9]* of [0-9]* sequences equal' "$log")
  if [ -n "$line" ] && [ "${line%% *}" = "$(echo "$line" | awk '{print $3}')" ]; then note "check-alone $shape" ok "$line"
  else note "check-alone $shape" FAILED "${line:-no result (see alone-$shape.txt)}"; status=1; fi
done

echo
echo "| step | result | detail |"
echo "| --- | --- | --- |"
for s in "${summary[@]}"; do IFS='|' read -r a b c <<<"$s"; echo "| $a | $b | $c |"; done
exit $status
