#!/usr/bin/env bash
# tests/gpu/run_on_device.sh — everything the GPU machine checks, in one call.
# Expects .dev/ (made by tests/gpu/pack.sh here): GPU test binaries built on a
# Debian machine plus the shared libraries they need that the GPU image lacks.
# Prints every log (tee it into $OUT: at most 8 files come back), keeps the logs
# in $LOGS, writes generated fixtures under $OUT and prints a table last.
#   tests/gpu/run_on_device.sh [bench] [sanitize] [sanitize-model] [hf] [invariance] [serve]
#                              [perf-small] [perf-8b] [serve-8b] [itl-8b] [golden] [tokenizer]
#                              [gemm-alt] [bench-alt] [profile] [timeline] [dec-trace] [ncu-gemm]
#                              [ncu-step] [ncu-stall] [alt-tests] [persist]
# (the gpu_* tests run unless NO_TESTS is set; bench: gpu_kernels --bench; sanitize: memcheck and
# racecheck on gpu_kernels --small; sanitize-model: memcheck on gpu_model over the golden fixtures
# (the whole CUDA backend: step buffers, their uploads, captured graphs); hf: gpu_model --hf against
# transformers bf16 on a tinyllama-1.1b-shaped mkmodel checkpoint; invariance: gpu_model
# --invariance on that checkpoint, a llama3.2-1b-shaped and a qwen2.5-0.5b-shaped one (batch
# invariance of the whole forward); serve: the daemon on the CUDA backend, tests/gpu/serve_cuda.py;
# perf-small / perf-8b: bench/bench_decode.py for tinyllama-1.1b and llama3.2-1b / llama3-8b,
# reports in $OUT, and after the last stage the call's whole comparison appended to this copy of
# bench/RESULTS.md, which comes back as $OUT/RESULTS.md; serve-8b: bench/serve_sweep.py, the daemon
# under nanoserve-loadgen on llama3-8b; itl-8b: bench/itl_prefill.py; gemm-alt: the decode-GEMM
# checks and GEMM-only step timing of a second gpu_kernels in .dev/alt/ (a branch under test) next
# to this build's, and the GEMM-only timing of every .dev/alt*/gpu_kernels; bench-alt: nanoserve
# bench of this build and of each .dev/alt*/nanoserve (tests/gpu/build_alts.sh puts revisions there,
# tests/gpu/set_alts.sh variants in settings; BA_CASES the cases, BA_ROUNDS the rounds, the builds
# taking turns case by case, BA_SET settings every run gets, as "KEY=VALUE ...") on the same mkmodel
# checkpoints; COMMIT names the commit measured; NEED_GPU (say H200) stops the call with exit 3,
# before anything runs, on any other card, or runs the stages OTHER_STAGES names there instead of
# those given; SWEEP_SET one more daemon setting for serve-8b; profile: ncu kernel times of a
# tinyllama-1.1b batch-1 step, graphs off, in $OUT/profile.csv; timeline: kernel start and end times
# in the step graphs, tools/ktrace, CSVs in $OUT; dec-trace: the decode GEMM's per-block timeline
# from a NANOSERVE_DEC_TRACE build in .dev/trace/, tests/gpu/dec_trace.py; ncu-step: ncu's full
# report (with the stall reasons, summed up by tests/gpu/ncu_stall.py) on one launch of NCU_KERNEL
# (default decode attention) in a llama3-8b step at NCU_BATCH (128), NCU_CTX (512); ncu-stall: stall
# reasons, time and DRAM bytes per launch of NCU_KERNEL's kernels in a nanoserve bench step
# (NCU_MODEL, tinyllama-1.1b); alt-tests: every .dev/alt*/gpu_kernels in full, .dev/alt*/gpu_model
# on the golden fixtures and with --invariance on a tinyllama-1.1b-shaped checkpoint; ncu-gemm:
# ncu's full report with the stall reasons (as ncu-step) on one decode-GEMM call per shape,
# NCU_SHAPE="T,N,K ..." (default 128,28672,4096, llama3-8b gate_up at batch 128), the fourth launch
# of NCU_BIN (default .dev/bin/gpu_kernels) --gemm-shape, $OUT/ncu_gemm_T_N_K.txt); persist:
# bench_persist (a batch-1 step as one persistent kernel) and the engine's batch-1 step on the same
# shapes, $OUT/persist.md)
set -uo pipefail
OUT=${OUT:-/tmp/ns-out}
LOGS=${LOGS:-/tmp/ns-logs}
# SCRATCH: where checkpoints and work folders go (a path without spaces)
SCRATCH=${SCRATCH:-/tmp}
mkdir -p "$OUT" "$LOGS"
# cuBLASLt comes from the image: the CUDA toolkit, or the wheel PyTorch uses
CUBLAS_DIRS=/usr/local/cuda/lib64:/usr/local/cuda/targets/x86_64-linux/lib
PYCUBLAS=$(python3 -c 'import nvidia.cublas as m, os
print(os.path.join(list(m.__path__)[0], "lib"))' 2>/dev/null || true)
LIBS="$PWD/.dev/lib:$CUBLAS_DIRS${PYCUBLAS:+:$PYCUBLAS}"
export LD_LIBRARY_PATH="$LIBS${LD_LIBRARY_PATH:+:$LD_LIBRARY_PATH}"
export PYTHONUNBUFFERED=1
declare -a rows

# stall reasons (cycles a warp waits per issued instruction) added to ncu's full reports
NCU_STALLS='regex:^smsp__average_warps_issue_stalled_.*_per_issue_active\.ratio$'

row() { rows+=("$(printf '%-28s %-8s %s' "$1" "$2" "$3")"); }

# run NAME LIMIT_S CMD...: output to $LOGS/NAME.log and the screen, a summary row
run() {
  local n=$1 lim=$2 st
  shift 2
  local t0=$SECONDS
  if timeout "$lim" "$@" >"$LOGS/$n.log" 2>&1; then st=ok; else st="FAIL($?)"; fi
  cat "$LOGS/$n.log"
  row "$n" "$st" "$((SECONDS - t0)) s: $(tail -n 1 "$LOGS/$n.log" | cut -c1-90)"
}

# tl_model: a tinyllama-1.1b-shaped checkpoint in $SCRATCH/tl (mkmodel's default seed)
# unless one is there
tl_model() {
  [ -f $SCRATCH/tl/model.safetensors ] ||
    run mkmodel_tl 120 .dev/bin/nanoserve mkmodel --shape tinyllama-1.1b --out $SCRATCH/tl
}

# perf_model SHAPE: $SCRATCH/perf/SHAPE, a `nanoserve mkmodel --seed 1` checkpoint made once
# per machine (the .done marker says it is whole)
perf_model() {
  local m=$SCRATCH/perf/$1
  [ -f $m.done ] || { rm -rf $m && mkdir -p $SCRATCH/perf &&
    run "mkmodel_$1" 300 .dev/bin/nanoserve mkmodel --shape $1 --out $m --seed 1 &&
    touch $m.done; }
}

echo "== device =="
date -u
nvidia-smi --query-gpu=name,memory.total,driver_version,clocks.sm,clocks.mem --format=csv
# NEED_GPU=H200: figures of record are taken on one kind of card; on any other, stop at once,
# or run the stages OTHER_STAGES names instead (a call that found another card still measures)
gpu_name=$(nvidia-smi --query-gpu=name --format=csv,noheader | head -n 1)
case "$gpu_name" in
*"${NEED_GPU:-}"*) ;;
*)
  if [ -z "${OTHER_STAGES:-}" ]; then
    echo "NEED_GPU=$NEED_GPU: this is an $gpu_name; nothing run"
    exit 3
  fi
  echo "NEED_GPU=$NEED_GPU: this is an $gpu_name; running OTHER_STAGES instead: $OTHER_STAGES"
  set -- $OTHER_STAGES
  ;;
esac
ldd .dev/bin/gpu_model | grep -E 'cublas|not found' || true

echo "== GPU tests =="
[ -n "${NO_TESTS:-}" ] && echo "NO_TESTS set: the gpu_* tests are not run this call"
for t in .dev/bin/gpu_*; do
  [ -n "${NO_TESTS:-}" ] && break
  [ -x "$t" ] || continue
  n=$(basename "$t")
  case $n in
  gpu_model) run "$n" 300 "$t" tests/data/golden ;;
  *) run "$n" 240 "$t" ;;
  esac
done

for what in "$@"; do
  case "$what" in
  bench) run gpu_kernels_bench 180 .dev/bin/gpu_kernels --bench ;;
  sanitize)
    run memcheck 240 compute-sanitizer --tool memcheck --leak-check no --error-exitcode 9 \
      .dev/bin/gpu_kernels --small
    # racecheck reports hazards inside cuBLASLt's own sm90 kernels (nvjet_*, seen
    # 2026-11-29) and excluding them by name crashed the sanitizer: GEMMs stay out
    run racecheck 240 compute-sanitizer --tool racecheck --error-exitcode 9 \
      .dev/bin/gpu_kernels --small --no-gemm
    # the decode GEMM's own checks (k_gemm_dec alone, no cuBLASLt)
    run racecheck_dec 240 compute-sanitizer --tool racecheck --error-exitcode 9 \
      .dev/bin/gpu_kernels --gemm-dec --small
    ;;
  sanitize-model)
    run memcheck_model 420 compute-sanitizer --tool memcheck --leak-check no --error-exitcode 9 \
      .dev/bin/gpu_model tests/data/golden
    ;;
  hf)
    echo "== HF transformers bf16 vs gpu_model (tinyllama-1.1b shape) =="
    rm -rf $SCRATCH/tl
    tl_model
    run hf_logits 300 python3 tests/gpu/hf_logits.py $SCRATCH/tl $SCRATCH/hf.json
    run gpu_model_hf 300 .dev/bin/gpu_model --hf $SCRATCH/tl $SCRATCH/hf.json
    ;;
  invariance)
    # batch invariance of the whole forward on a tinyllama-1.1b-shaped checkpoint: its split
    # decode GEMMs, lazy sums and the SwiGLU inside the down projection at one row (the golden
    # fixtures' tiny shapes have none of those)
    echo "== batch invariance (tinyllama-1.1b shape) =="
    tl_model
    run gpu_model_invariance 300 .dev/bin/gpu_model --invariance $SCRATCH/tl
    # and llama3.2-1b's (its gate|up at one row: whole tiles, the SwiGLU from the stored product)
    perf_model llama3.2-1b
    run gpu_model_invariance_l32 300 .dev/bin/gpu_model --invariance $SCRATCH/perf/llama3.2-1b
    # and qwen2.5-0.5b's (the q|k|v bias on split, lazy sums; 2 kv heads of 64, so the
    # attention rotates q itself at 16 rows)
    perf_model qwen2.5-0.5b
    run gpu_model_invariance_q05 300 .dev/bin/gpu_model --invariance $SCRATCH/perf/qwen2.5-0.5b
    ;;
  serve)
    echo "== the daemon on the CUDA backend (tinyllama-1.1b shape) =="
    tl_model
    run serve_cuda 420 python3 tests/gpu/serve_cuda.py .dev/bin/nanoserve $SCRATCH/serve \
      $SCRATCH/tl 64
    ;;
  perf-small | perf-8b)
    # bench/bench_decode.py: nanoserve bench and transformers (eager) on the same weights
    if [ "$what" = perf-small ]; then sh=tinyllama-1.1b,llama3.2-1b; else sh=llama3-8b; fi
    run "$what" $((${PERF_BUDGET:-540} + 20)) python3 bench/bench_decode.py --nanoserve .dev/bin/nanoserve \
      --scratch $SCRATCH/perf --shapes "$sh" --commit "${COMMIT:-unknown}" \
      --budget "${PERF_BUDGET:-540}"
    cp $SCRATCH/perf/results/report.md "$OUT/report-$what.md" 2>/dev/null || true
    perf_ran=1
    ;;
  serve-8b)
    # bench/serve_sweep.py: the daemon + nanoserve-loadgen on a llama3-8b-shaped checkpoint
    m=$SCRATCH/perf/llama3-8b
    perf_model llama3-8b
    run serve_sweep $((${SERVE_BUDGET:-480} + 60)) python3 bench/serve_sweep.py \
      --nanoserve .dev/bin/nanoserve --loadgen .dev/bin/nanoserve-loadgen --model $m \
      --scratch $SCRATCH/sweep --commit "${COMMIT:-unknown}" --budget "${SERVE_BUDGET:-480}" \
      --duration 15 --rates 0.9,1.1 --vocab-max 500 ${SWEEP_SET:+--set "$SWEEP_SET"} # mkmodel's tokenizer has 512 ids
    cp "$LOGS/serve_sweep.log" "$OUT/report-serve-8b.md" 2>/dev/null || true
    ;;
  itl-8b)
    # bench/itl_prefill.py: ITL of 32 streams while a 4096-token prompt is prefilled
    m=$SCRATCH/perf/llama3-8b
    perf_model llama3-8b
    run itl_prefill 300 python3 bench/itl_prefill.py --nanoserve .dev/bin/nanoserve \
      --model $m --scratch $SCRATCH/itl --out-tokens 300 --vocab 500
    cp "$LOGS/itl_prefill.log" "$OUT/report-itl-8b.md" 2>/dev/null || true
    ;;
  gemm-alt)
    run bench_gemm 120 .dev/bin/gpu_kernels --bench-gemm --no-checks
    if [ -x .dev/alt/gpu_kernels ]; then
      run alt_gemm_dec 240 .dev/alt/gpu_kernels --gemm-dec
    fi
    for b in .dev/alt*/gpu_kernels; do
      [ -x "$b" ] || continue
      v=$(basename "$(dirname "$b")")
      [ -f "$(dirname "$b")/REV" ] && echo "== $v: $(cat "$(dirname "$b")/REV")"
      run "${v}_bench_gemm" 120 "$b" --bench-gemm --no-checks
    done
    ;;
  alt-tests)
    # each .dev/alt*/ build's own gpu_kernels (every check), gpu_model (the golden fixtures)
    # and gpu_model --invariance on a tinyllama-1.1b-shaped checkpoint (as the invariance
    # stage), where tests/gpu/build_alts.sh put them (ALT_TESTS=1)
    for d in .dev/alt*/; do
      v=$(basename "$d")
      [ -x "$d/gpu_kernels" ] || continue
      [ -f "$d/REV" ] && echo "== $v: $(cat "$d/REV")"
      run "${v}_gpu_kernels" 300 "$d/gpu_kernels"
      [ -x "$d/gpu_model" ] || continue
      run "${v}_gpu_model" 300 "$d/gpu_model" tests/data/golden
      tl_model
      run "${v}_gpu_model_invariance" 300 "$d/gpu_model" --invariance $SCRATCH/tl
    done
    ;;
  bench-alt)
    # nanoserve bench of this build next to every .dev/alt*/nanoserve (a variant under test) on
    # the same checkpoints: BA_CASES ("SHAPE BATCHES CTX;..."), by default llama3-8b batch 1-64
    # at ctx 128 and 128 at ctx 512, the 1B shapes at batch 1 and 32. The builds take turns
    # case by case (drift during the call falls on all of them alike), BA_ROUNDS times (default
    # 1); a table of each case's p50 ms/step per build and round comes last.
    ba_default="llama3-8b 1,8,32,64 128;llama3-8b 128 512;tinyllama-1.1b 1,32 128"
    ba_default+=";llama3.2-1b 1,32 128"
    IFS=';' read -ra ba_cases <<<"${BA_CASES:-$ba_default}"
    for c in "${ba_cases[@]}"; do
      set -- $c
      perf_model $1
    done
    ba_sets=()
    for kv in ${BA_SET:-}; do ba_sets+=(--set "$kv"); done
    ba_bins=()
    for b in .dev/bin/nanoserve .dev/alt*/nanoserve; do
      [ -x "$b" ] || continue
      ba_bins+=("$b")
      [ -f "$(dirname "$b")/REV" ] && echo "== $(basename "$(dirname "$b")"): $(cat "$(dirname "$b")/REV")"
    done
    for ((r = 1; r <= ${BA_ROUNDS:-1}; r++)); do
      for c in "${ba_cases[@]}"; do
        set -- $c
        for b in "${ba_bins[@]}"; do
          run "ab_$(basename "$(dirname "$b")")_$1_b${2//,/-}_c$3_r$r" 150 "$b" bench \
            --model $SCRATCH/perf/$1 --set engine.backend=cuda --batch "$2" --ctx "$3" --steps 128 \
            --warmup 8 "${ba_sets[@]}"
        done
      done
    done
    echo "== bench-alt: p50 ms/step (% of the copy bandwidth each run measured), rounds in order =="
    for c in "${ba_cases[@]}"; do
      set -- $c
      for b in "${ba_bins[@]}"; do
        v=$(basename "$(dirname "$b")")
        printf '%-36s %-6s' "$1 b$2 ctx $3" "$v"
        for ((r = 1; r <= ${BA_ROUNDS:-1}; r++)); do
          # the bench's table rows: | batch | ctx | p50 | p90 | tok/s | MB | GB/s | % of copy | ..
          awk -F'|' '/^\| [0-9]+ \| [0-9]+ \|/ {printf " b%s:%s (%s%%)", $2 + 0, $4 + 0, $9 + 0}' \
            "$LOGS/ab_${v}_$1_b${2//,/-}_c$3_r$r.log"
          printf ' |'
        done
        echo
      done
    done
    ;;
  ncu-gemm)
    # NCU_BIN: the gpu_kernels profiled (default this build's); NCU_SHAPE: T,N,K shapes,
    # space-separated, each in $OUT/ncu_gemm_T_N_K.txt
    for sh in ${NCU_SHAPE:-128,28672,4096}; do
      run "ncu_gemm_${sh//,/_}" 300 /usr/local/cuda/bin/ncu --set full --metrics "$NCU_STALLS" \
        --kernel-name regex:gemm_dec --launch-skip 3 --launch-count 1 \
        "${NCU_BIN:-.dev/bin/gpu_kernels}" --bench-gemm --no-checks --dec-only --gemm-shape "$sh"
      cp "$LOGS/ncu_gemm_${sh//,/_}.log" "$OUT/ncu_gemm_${sh//,/_}.txt"
      python3 tests/gpu/ncu_stall.py "$OUT/ncu_gemm_${sh//,/_}.txt"
    done
    ;;
  ncu-step)
    # ncu's full report on one launch of a kernel in a llama3-8b step, graphs off: NCU_KERNEL
    # (a name regex, default dec_kernel: decode attention), NCU_BATCH (128), NCU_CTX (512),
    # NCU_SKIP (launches of it skipped first, 40: past the warm-up step); $OUT/ncu_step.txt
    perf_model llama3-8b
    run ncu_step_full 300 /usr/local/cuda/bin/ncu --set full --metrics "$NCU_STALLS" \
      --kernel-name "regex:${NCU_KERNEL:-dec_kernel}" --launch-skip "${NCU_SKIP:-40}" \
      --launch-count 1 .dev/bin/nanoserve bench --model $SCRATCH/perf/llama3-8b \
      --set engine.backend=cuda --set engine.cuda_graphs=false --batch "${NCU_BATCH:-128}" \
      --ctx "${NCU_CTX:-512}" --steps 2 --warmup 1
    cp "$LOGS/ncu_step_full.log" "$OUT/ncu_step.txt"
    python3 tests/gpu/ncu_stall.py "$OUT/ncu_step.txt"
    ;;
  ncu-stall)
    # per launch of the kernels matching NCU_KERNEL (a name regex, default gemm_dec) in a
    # nanoserve bench step of NCU_MODEL (tinyllama-1.1b) at NCU_BATCH (1), NCU_CTX (128),
    # graphs off, launches NCU_SKIP (180: past the warm-up step) to + NCU_COUNT (8): time, DRAM
    # bytes and throughput, instructions, warps and stall reasons (cycles a warp waits per
    # issued instruction), clocks and caches as in use; NCU_FRAC the pool's share of GPU memory
    # (0.06: ncu saves what the kernel may write between its replays). $OUT/ncu_stall_TAG.txt
    # (NCU_TAG, default x), summed up by tests/gpu/ncu_stall.py
    m=${NCU_MODEL:-tinyllama-1.1b}
    perf_model "$m"
    f="$OUT/ncu_stall_${NCU_TAG:-x}.txt"
    run "ncu_stall_${NCU_TAG:-x}" 300 /usr/local/cuda/bin/ncu --clock-control none \
      --cache-control none --kernel-name "regex:${NCU_KERNEL:-gemm_dec}" \
      --launch-skip "${NCU_SKIP:-180}" --launch-count "${NCU_COUNT:-8}" --metrics \
      "$NCU_STALLS,gpu__time_duration.sum,dram__throughput.avg.pct_of_peak_sustained_elapsed,smsp__inst_executed.sum,launch__grid_size,launch__block_size,dram__bytes_read.sum,smsp__warps_active.avg.per_cycle_active,smsp__issue_active.avg.per_cycle_active" \
      .dev/bin/nanoserve bench --model "$SCRATCH/perf/$m" --set engine.backend=cuda \
      --set engine.cuda_graphs=false --set "engine.gpu_memory_fraction=${NCU_FRAC:-0.06}" \
      --batch "${NCU_BATCH:-1}" --ctx "${NCU_CTX:-128}" --steps 2 --warmup 1
    cp "$LOGS/ncu_stall_${NCU_TAG:-x}.log" "$f"
    python3 tests/gpu/ncu_stall.py "$f"
    ;;
  profile)
    # kernel times (ncu, serialised, caches flushed) of a tinyllama-1.1b batch-1 prefill of 128
    # then 2 decode steps, graphs off; the CSV comes back as $OUT/profile.csv
    s=tinyllama-1.1b
    perf_model $s
    run ncu_step 300 /usr/local/cuda/bin/ncu --csv --metrics gpu__time_duration.sum \
      --log-file "$OUT/profile.csv" .dev/bin/nanoserve bench --model $SCRATCH/perf/$s \
      --set engine.backend=cuda --set engine.cuda_graphs=false --batch 1 --ctx 128 --steps 2 \
      --warmup 0
    ;;
  timeline)
    # kernel start/end times inside the replayed step graphs (CUPTI, .dev/lib/libktrace.so):
    # nanoserve bench per TL_CASES ("SHAPE BATCH CTX;...", default llama3-8b and tinyllama-1.1b
    # at batch 1 and llama3-8b at 32, ctx 128), one CSV each in $OUT (tl-SHAPE-bB.csv),
    # summarised by tests/gpu/timeline.py; TL_BIN: the nanoserve traced (default this build's),
    # TL_TAG: a tag for its CSV and log names
    IFS=';' read -ra tl_cases <<<"${TL_CASES:-llama3-8b 1 128;tinyllama-1.1b 1 128;llama3-8b 32 128}"
    for c in "${tl_cases[@]}"; do
      set -- $c
      perf_model $1
      f=$OUT/tl-${TL_TAG:+$TL_TAG-}$1-b$2.csv
      CUDA_INJECTION64_PATH=$PWD/.dev/lib/libktrace.so KTRACE_OUT=$f \
        run "timeline_${TL_TAG:+$TL_TAG-}$1_b$2" 150 "${TL_BIN:-.dev/bin/nanoserve}" bench \
        --model $SCRATCH/perf/$1 --set engine.backend=cuda --batch "$2" --ctx "$3" --steps 16 \
        --warmup 4
      run "timeline_sum_${TL_TAG:+$TL_TAG-}$1_b$2" 60 python3 tests/gpu/timeline.py "$f" --last 16
    done
    ;;
  dec-trace)
    # the decode GEMM's per-block timeline (a NANOSERVE_DEC_TRACE build in .dev/trace/):
    # nanoserve bench at batch 1 on llama3-8b and tinyllama-1.1b, summarised by
    # tests/gpu/dec_trace.py into $OUT/dec-trace-SHAPE.md
    for s in llama3-8b tinyllama-1.1b; do
      perf_model $s
      NS_DEC_TRACE=$SCRATCH/dt-$s.bin run "dec_trace_run_$s" 150 .dev/trace/nanoserve bench \
        --model $SCRATCH/perf/$s --set engine.backend=cuda --batch 1 --ctx 128 --steps 6 --warmup 2
      run "dec_trace_$s" 200 python3 tests/gpu/dec_trace.py $SCRATCH/dt-$s.bin --skip 3 --show 12
      cp "$LOGS/dec_trace_$s.log" "$OUT/dec-trace-$s.md" 2>/dev/null || true
    done
    ;;
  persist)
    # bench/bench_persist.cu: a batch-1 step as one persistent kernel (the shapes in
    # PERSIST_SHAPES, default all three), its table in $OUT/persist.md, then the engine's batch-1
    # step on the same shapes and machine (nanoserve bench, ctx 128) below it
    run bench_persist 300 .dev/bin/bench_persist ${PERSIST_SHAPES:-}
    cp "$LOGS/bench_persist.log" "$OUT/persist.md" 2>/dev/null || true
    for s in ${PERSIST_SHAPES:-tinyllama-1.1b llama3.2-1b llama3-8b}; do
      perf_model $s
      run "persist_engine_$s" 150 .dev/bin/nanoserve bench --model $SCRATCH/perf/$s \
        --set engine.backend=cuda --batch 1 --ctx 128 --steps 128 --warmup 8
      { echo && echo "engine, $s:" && grep '^|' "$LOGS/persist_engine_$s.log"; } >>"$OUT/persist.md"
    done
    ;;
  golden)
    echo "== HF transformers golden fixtures =="
    rm -rf "$OUT/golden" && mkdir -p "$OUT/golden"
    if python3 tests/golden/make_golden.py --out "$OUT/golden" 2>&1 | tee "$OUT/golden.log"; then
      tar -C "$OUT" -czf "$OUT/golden.tgz" golden && rm -rf "$OUT/golden"
      row make_golden ok "$(du -h "$OUT/golden.tgz" | cut -f1)"
    else
      row make_golden FAIL "see golden.log"
    fi
    ;;
  tokenizer)
    echo "== HF tokenizers byte-level fixture =="
    rm -rf "$OUT/tokenizers" && mkdir -p "$OUT/tokenizers"
    if python3 tests/data/tokenizers/make_bytelevel.py --out "$OUT/tokenizers" 2>&1 | tee "$OUT/tok.log"; then
      tar -C "$OUT" -czf "$OUT/tokenizers.tgz" tokenizers && rm -rf "$OUT/tokenizers"
      row make_bytelevel ok "$(du -h "$OUT/tokenizers.tgz" | cut -f1)"
    else
      row make_bytelevel FAIL "see tok.log"
    fi
    ;;
  *) row "$what" FAIL "no such stage" ;;
  esac
done

# the perf stages' comparison (everything $SCRATCH/perf/results holds) as the newest section of
# bench/RESULTS.md here; the file comes back whole, to replace the checkout's
if [ -n "${perf_ran:-}" ]; then
  if python3 bench/bench_decode.py --scratch $SCRATCH/perf --stages report \
    --commit "${COMMIT:-unknown}" --results bench/RESULTS.md >/dev/null 2>"$LOGS/perf_results.log" &&
    cp bench/RESULTS.md "$OUT/RESULTS.md"; then
    row perf_results ok "bench/RESULTS.md appended: \$OUT/RESULTS.md"
  else
    row perf_results FAIL "$(tail -n 1 "$LOGS/perf_results.log" | cut -c1-90)"
  fi
fi

echo
echo "== summary =="
printf '%s\n' "${rows[@]}"
