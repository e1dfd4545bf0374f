#!/usr/bin/env bash
# The learning demo (issues #7, #11, #14): does a small model learn to fix bugs with swe-rl?
#
#   1. synthesize one-line-bug tasks from the builtin libraries, split by source function (train/test)
#   2. golden trajectories: the compact scripted oracle on the train split -> `swe-rl data sft`
#   3. evaluate the base model (greedy) on both splits
#   4. supervised warm start (`swe-rl train sft`) on the golden trajectories; evaluate again
#   5. GRPO (`swe-rl train rl`) from the SFT checkpoint on the train split; evaluate again
#   6. results.json: resolve and format-error rates per split and stage, the GRPO curve
#
# Stages are resumable: a stage whose output exists is skipped. Sizes come from the environment:
#   W (work dir, default bench/results/learning), MODEL (smollm2), N (tasks, 60), SEED (1),
#   SFT_EPOCHS (2), SFT_LR (5e-5), STEPS (12), TASKS_PER_STEP (8), GENS (8), RL_LR (1e-5),
#   MAX_TOKENS (256), STEP_LIMIT (3), J (sandboxes at once, 32), STAGES ("all" or e.g. "synth sft"),
#   KINDS (mutation kinds, e.g. "name_typo"; default all), ORACLE (scripted:oracle-compact),
#   AGENT (agent config, swebench), TEST_MAX (evaluate at most this many test tasks; default all),
#   SPLITS (the splits each stage is evaluated on, "test train"), WALL (agent seconds per eval attempt, 600).
# On a GPU machine the whole run takes minutes; on a 2-core CPU use MODEL=tiny-qwen-ish sizes only.
set -euo pipefail
cd "$(dirname "$0")/.."

W=${W:-bench/results/learning}
MODEL=${MODEL:-smollm2}
N=${N:-60}
SEED=${SEED:-1}
SFT_EPOCHS=${SFT_EPOCHS:-2}
SFT_LR=${SFT_LR:-5e-5}
STEPS=${STEPS:-12}
TASKS_PER_STEP=${TASKS_PER_STEP:-8}
GENS=${GENS:-8}
RL_LR=${RL_LR:-1e-5}
MAX_TOKENS=${MAX_TOKENS:-256}
STEP_LIMIT=${STEP_LIMIT:-3}
J=${J:-32}
STAGES=${STAGES:-all}
KINDS=${KINDS:-}
ORACLE=${ORACLE:-scripted:oracle-compact}
AGENT=${AGENT:-swebench}
TEST_MAX=${TEST_MAX:-}
SPLITS=${SPLITS:-test train}
WALL=${WALL:-600}
SWE=${SWE:-swe-rl}
mkdir -p "$W"

stage() { [ "$STAGES" = all ] || [[ " $STAGES " == *" $1 "* ]]; }
say() { printf '\n[learning %s] %s\n' "$(date +%H:%M:%S)" "$*" >&2; }

evaluate() {  # evaluate SPLIT MODEL_DIR NAME: greedy eval, summary kept as NAME-SPLIT.json
  local split=$1 model=$2 name=$3 out="$W/eval-$3-$1"
  [ -f "$out/summary.json" ] && return 0
  [[ " $SPLITS " == *" $split "* ]] || return 0
  say "eval $name on $split"
  local limit=()
  [ "$split" = test ] && [ -n "$TEST_MAX" ] && limit=(--max-instances "$TEST_MAX")
  $SWE eval --tasks "$W/tasks.$split.jsonl" --llm "hf:$model" -o "$out" -j "$J" --temperature 0 \
    --step-limit "$STEP_LIMIT" --max-tokens "$MAX_TOKENS" --agent-config "$AGENT" --wall-time "$WALL" "${limit[@]}" >/dev/null || true
}

if stage synth && [ ! -f "$W/tasks.jsonl" ]; then
  say "synthesize $N one-line tasks"
  kinds=()
  for k in $KINDS; do kinds+=(--kind "$k"); done
  $SWE tasks synth --repo builtin -o "$W/tasks.jsonl" -n "$N" --seed "$SEED" --multi 0 \
    --difficulty one-line --split train:0.7,test:0.3 -j "$J" "${kinds[@]}"
fi
if stage oracle && [ ! -f "$W/oracle/summary.json" ]; then
  say "golden trajectories on the train split"
  $SWE eval --tasks "$W/tasks.train.jsonl" --llm "$ORACLE" -o "$W/oracle" -j "$J" --agent-config "$AGENT" >/dev/null
fi
if stage sftdata && [ ! -d "$W/sft-data" ]; then
  $SWE data sft "$W/oracle" -o "$W/sft-data"
fi
if stage base; then
  evaluate test "$MODEL" base
  evaluate train "$MODEL" base
fi
if stage sft; then
  if [ ! -d "$W/sft/final" ]; then
    say "supervised warm start"
    $SWE train sft "$W/sft-data" --model "$MODEL" -o "$W/sft" --epochs "$SFT_EPOCHS" --lr "$SFT_LR" --seed "$SEED"
  fi
  evaluate test "$W/sft/final" sft
  evaluate train "$W/sft/final" sft
fi
if stage rl; then
  if [ ! -f "$W/grpo/summary.json" ]; then
    say "GRPO from the SFT checkpoint"
    rm -rf "$W/grpo"
    $SWE train rl --tasks "$W/tasks.train.jsonl" --model "$W/sft/final" --steps "$STEPS" \
      --tasks-per-step "$TASKS_PER_STEP" -g "$GENS" --lr "$RL_LR" --max-tokens "$MAX_TOKENS" \
      --step-limit "$STEP_LIMIT" -j "$J" --seed "$SEED" --agent-config "$AGENT" -o "$W/grpo"
  fi
  evaluate test "$W/grpo/final" grpo
  evaluate train "$W/grpo/final" grpo
fi

python3 - "$W" <<'PY'
import json, sys
from pathlib import Path

w = Path(sys.argv[1])
out = {"stages": {}}
for name in ("base", "sft", "grpo"):
    for split in ("train", "test"):
        run = w / f"eval-{name}-{split}"
        if not (run / "results.jsonl").is_file():
            continue
        rows = [json.loads(x) for x in (run / "results.jsonl").read_text().splitlines() if x.strip()]
        fmt = 0
        for folder in run.glob("*/traj.json"):
            steps = json.loads(folder.read_text()).get("steps", [])
            fmt += any(s.get("error") == "format_error" for s in steps)
        done = [r for r in rows if not r.get("error")]
        out["stages"][f"{name}/{split}"] = {
            "tasks": len(rows),
            "infra_errors": len(rows) - len(done),
            "resolved": sum(bool(r.get("resolved")) for r in done),
            "resolve_rate": sum(bool(r.get("resolved")) for r in done) / max(1, len(done)),
            "format_error_rate": fmt / max(1, len(rows)),
        }
grpo = w / "grpo" / "summary.json"
if grpo.is_file():
    out["grpo_curve"] = json.loads(grpo.read_text())["curve"]
(w / "results.json").write_text(json.dumps(out, indent=1))
print(json.dumps(out, indent=1))
PY
