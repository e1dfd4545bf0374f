#!/usr/bin/env bash
# The CPU learning run (issue #7): does GRPO raise a small model's reward on builtin tasks, on CPU?
#
#   1. golden trajectories: the compact scripted oracle on TASKS (builtin ids, one turn) -> `swe-rl data sft`
#   2. the warm start's data (WARM):
#      sets (default): each prompt with its own golden reply and the next SET_SIZE-1 tasks' (cyclically):
#        the model learns which few fixes may belong to each issue, so it already tells the issues apart,
#        and picks among them at random (1 in SET_SIZE resolves before RL); the reward must teach which
#        one is right
#      shuffled: every task's prompt with every task's golden reply: nothing ties a fix to its issue
#        (1 in len(TASKS) resolves before RL; GRPO did not learn from it on CPU, BENCHMARKS.md)
#      gold: each prompt with its own golden reply (the model memorizes them; RL can only sharpen)
#   3. supervised warm start of tiny-qwen-m (random 4-layer Qwen3, real Qwen vocabulary) on that data
#   4. sampled (T, TOP_P) and greedy evaluations of the SFT checkpoint
#   5. GRPO (`swe-rl train rl`) from the SFT checkpoint on the same tasks; report.html has the curves
#   6. the same evaluations of the GRPO model; results.json; small files copied to RESULTS
#
# A tiny model on a handful of tasks: a rising curve shows the RL loop learns from the graded reward (the
# reward reaches the right episode, the advantage has the right sign, the update moves the policy), not
# that it generalizes. Results: BENCHMARKS.md, "Learning on CPU".
# Stages are resumable: a stage whose output exists is skipped. Sizes come from the environment:
#   W (work dir, /tmp/learning-cpu), RESULTS (bench/results/learning-cpu/$WARM-lr$RL_LR; "" to skip the copy)
#   TASKS (builtin ids: the 8 whose golden fix is one sed line), WARM (sets), SET_SIZE (4), MODEL (tiny-qwen-m)
#   SEED (0), SFT_STEPS (240), SFT_LR (3e-3), SFT_BATCH (8)
#   STEPS (30), TASKS_PER_STEP (4), GENS (8), RL_LR (1e-3), FREEZE (1: --freeze-embeddings)
#   TRL_ARGS (lr_scheduler_type=constant; GRPOConfig fields, space-separated KEY=VALUE)
#   TEMP (1.0), TOP_P (0.9: rollouts and sampled evals), MAX_TOKENS (128), STEP_LIMIT (1)
#   EVAL_SAMPLES (8), J (sandboxes at once, 8), STAGES ("all" or e.g. "sft rl")
# STEP_LIMIT 1: the golden fix is one command and the working tree's diff is graded, so one turn per
# episode is enough and halves the tokens. TOP_P 0.9: the warm-started random model keeps a tail of junk
# tokens that derails many full-distribution samples. Torch uses OMP_NUM_THREADS (default
# here 1: on a shared 2-core machine more threads fight over the cores; 2 when the machine is yours).
set -euo pipefail
cd "$(dirname "$0")/.."

W=${W:-/tmp/learning-cpu}
WARM=${WARM:-sets}
SET_SIZE=${SET_SIZE:-4}
RL_LR=${RL_LR:-1e-3}
RESULTS=${RESULTS-bench/results/learning-cpu/$WARM-lr$RL_LR}
SED_TASKS="inikit-1 inikit-2 statkit-1 statkit-3 statkit-4 textkit-1 textkit-2 textkit-3"
TASKS=${TASKS:-$(printf 'swe-rl-builtin__%s ' $SED_TASKS)}
MODEL=${MODEL:-tiny-qwen-m}
SEED=${SEED:-0}
SFT_STEPS=${SFT_STEPS:-240}
SFT_LR=${SFT_LR:-3e-3}
SFT_BATCH=${SFT_BATCH:-8}
STEPS=${STEPS:-30}
TASKS_PER_STEP=${TASKS_PER_STEP:-4}
GENS=${GENS:-8}
FREEZE=${FREEZE:-1}
TRL_ARGS=${TRL_ARGS-lr_scheduler_type=constant}
TEMP=${TEMP:-1.0}
TOP_P=${TOP_P:-0.9}
MAX_TOKENS=${MAX_TOKENS:-128}
STEP_LIMIT=${STEP_LIMIT:-1}
EVAL_SAMPLES=${EVAL_SAMPLES:-8}
J=${J:-8}
STAGES=${STAGES:-all}
SWE=${SWE:-swe-rl}
export OMP_NUM_THREADS=${OMP_NUM_THREADS:-1}
mkdir -p "$W"

IDS=()
for id in $TASKS; do IDS+=(-i "$id"); done
AGENT=(--agent-config compact --step-limit "$STEP_LIMIT" --max-tokens "$MAX_TOKENS")

RL_OPTS=()
[ "$FREEZE" = 1 ] && RL_OPTS=(--freeze-embeddings)
for kv in $TRL_ARGS; do RL_OPTS+=(--trl "$kv"); done

stage() { [ "$STAGES" = all ] || [[ " $STAGES " == *" $1 "* ]]; }
say() { printf '\n[learning-cpu %s] %s\n' "$(date +%H:%M:%S)" "$*" >&2; }

evaluate() {  # evaluate MODEL_DIR NAME: sampled (T, EVAL_SAMPLES per task) and greedy evals
  local model=$1 name=$2
  if [ ! -f "$W/eval-$name-sampled/summary.json" ]; then
    say "eval $name: $EVAL_SAMPLES samples a task at T $TEMP, top-p $TOP_P"
    $SWE eval --tasks builtin "${IDS[@]}" --llm "hf:$model" -o "$W/eval-$name-sampled" -j "$J" \
      --temperature "$TEMP" --top-p "$TOP_P" --n-samples "$EVAL_SAMPLES" "${AGENT[@]}" >/dev/null || true
  fi
  if [ ! -f "$W/eval-$name-greedy/summary.json" ]; then
    say "eval $name: greedy"
    $SWE eval --tasks builtin "${IDS[@]}" --llm "hf:$model" -o "$W/eval-$name-greedy" -j "$J" \
      --temperature 0 "${AGENT[@]}" >/dev/null || true
  fi
}

if stage oracle && [ ! -f "$W/oracle/summary.json" ]; then
  say "golden trajectories (compact oracle, $STEP_LIMIT turn) on: $TASKS"
  $SWE eval --tasks builtin "${IDS[@]}" --llm scripted:oracle-compact "${AGENT[@]}" -o "$W/oracle" -j "$J" \
    >/dev/null
fi
if stage sftdata && [ ! -d "$W/gold-data" ]; then  # one turn never submits: keep the truncated episodes
  $SWE data sft "$W/oracle" -o "$W/gold-data" --keep-truncated
fi
if stage sftdata && [ ! -f "$W/sft-data/chat.jsonl" ]; then
  mkdir -p "$W/sft-data"
  python3 - "$W/gold-data/chat.jsonl" "$W/sft-data/chat.jsonl" "$WARM" "$SET_SIZE" <<'PY'
import json, sys

rows = [json.loads(line) for line in open(sys.argv[1]) if line.strip()]
warm, size = sys.argv[3], int(sys.argv[4])
if warm not in ("gold", "shuffled", "sets"):
    sys.exit(f"WARM must be gold, shuffled or sets, not {warm!r}")
if warm == "sets" and not 1 <= size <= len(rows):
    sys.exit(f"SET_SIZE must be between 1 and the number of tasks ({len(rows)}), not {size}")
replies = {"gold": 1, "shuffled": len(rows), "sets": size}[warm]
with open(sys.argv[2], "w") as out:
    for r, row in enumerate(rows):  # messages: system, task, the golden reply (one turn)
        for j in range(replies):  # j == 0 is the task's own reply
            other = rows[(r + j) % len(rows)]
            messages = row["messages"][:2] + other["messages"][2:3]
            out.write(json.dumps({**row, "messages": messages, "reply_of": other["instance_id"]}) + "\n")
print(f"{warm} warm start: {len(rows)} tasks x {replies} replies -> {len(rows) * replies} examples")
PY
fi
if stage sft; then
  if [ ! -d "$W/sft/final" ]; then
    say "supervised warm start ($WARM): $MODEL, $SFT_STEPS steps of $SFT_BATCH at lr $SFT_LR"
    start=$(date +%s)
    $SWE train sft "$W/sft-data" --model "$MODEL" -o "$W/sft" --max-steps "$SFT_STEPS" --lr "$SFT_LR" \
      --batch-size "$SFT_BATCH" --seed "$SEED"
    echo $(($(date +%s) - start)) >"$W/sft/wall_s"
  fi
  evaluate "$W/sft/final" sft
fi
if stage rl; then
  if [ ! -f "$W/grpo/summary.json" ]; then
    say "GRPO from the SFT checkpoint: $STEPS steps x $TASKS_PER_STEP tasks x $GENS episodes, lr $RL_LR"
    rm -rf "$W/grpo"
    $SWE train rl --tasks builtin "${IDS[@]}" --model "$W/sft/final" --steps "$STEPS" \
      --tasks-per-step "$TASKS_PER_STEP" -g "$GENS" --lr "$RL_LR" --temperature "$TEMP" --top-p "$TOP_P" "${AGENT[@]}" \
      -j "$J" --seed "$SEED" -o "$W/grpo" "${RL_OPTS[@]}"
  fi
  evaluate "$W/grpo/final" grpo
fi

python3 - "$W" <<'PY'
import json, sys
from pathlib import Path

w = Path(sys.argv[1])
out = {"evals": {}}
for name in ("sft", "grpo"):
    for mode in ("sampled", "greedy"):
        summary = w / f"eval-{name}-{mode}" / "summary.json"
        if summary.is_file():
            s = json.loads(summary.read_text())
            out["evals"][f"{name}/{mode}"] = {
                k: s.get(k) for k in ("attempts", "resolved", "resolve_rate", "errors", "exit_statuses")
            }
metrics = w / "grpo" / "metrics.jsonl"
if metrics.is_file():
    rows = [json.loads(x) for x in metrics.read_text().splitlines() if x.strip()]
    curve = {}
    for r in rows:
        if "rl/resolve_rate" in r:
            curve[r["step"]] = {
                k.split("/")[1]: r[k]
                for k in ("rl/resolve_rate", "rl/reward_mean", "rl/format_error_rate", "rl/rollout_time_s")
                if k in r
            }
    out["grpo_curve"] = [{"step": s, **v} for s, v in sorted(curve.items())]
summary = w / "grpo" / "summary.json"
if summary.is_file():
    out["grpo_train_time_s"] = json.loads(summary.read_text()).get("train_time_s")
if (w / "sft" / "train_sft.json").is_file():
    sft = json.loads((w / "sft" / "train_sft.json").read_text())
    out["sft"] = {k: sft.get(k) for k in ("examples", "trained_tokens", "steps")}
    out["sft"]["loss_first_last"] = [sft["losses"][0], sft["losses"][-1]] if sft.get("losses") else None
    if (w / "sft" / "wall_s").is_file():
        out["sft"]["wall_s"] = int((w / "sft" / "wall_s").read_text())
(w / "results.json").write_text(json.dumps(out, indent=1))
print(json.dumps(out, indent=1))
PY

if [ -n "$RESULTS" ]; then  # small files only: never model weights
  mkdir -p "$RESULTS"
  cp "$W/results.json" "$RESULTS/"
  [ -f "$W/gold-data/data_card.json" ] && cp "$W/gold-data/data_card.json" "$RESULTS/"
  [ -f "$W/sft/train_sft.json" ] && cp "$W/sft/train_sft.json" "$RESULTS/"
  for run in "$W"/eval-*; do
    [ -f "$run/summary.json" ] && cp "$run/summary.json" "$RESULTS/$(basename "$run").summary.json"
  done
  if [ -d "$W/grpo" ]; then
    mkdir -p "$RESULTS/grpo"
    # the run's summary and curves only: rollouts.jsonl and report.html stay in $W (`swe-rl report` renders it)
    for f in metrics.jsonl summary.json config.json; do
      [ -f "$W/grpo/$f" ] && cp "$W/grpo/$f" "$RESULTS/grpo/"
    done
  fi
  say "results in $RESULTS/"
fi
