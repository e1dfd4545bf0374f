#!/usr/bin/env bash
# Does GRPO through swe-rl's rollouts make a real small model better on tasks it never trained on? (#26, #42)
#
# SmolLM2-135M on this CPU, tasks synthesized from the builtin libraries, held back once for every stage:
#   synth    tasks of the warm-start kinds (WARM_KINDS, N_WARM) and of the RL kind (RL_KIND, N_RL), each
#            synthesized once and not split, then ONE split of all of them (`swe-rl tasks split`,
#            docs/SYNTH.md "Splits"): whole functions held back (HELDBACK of the RL kind's tasks, seeded by
#            SEED; or whole libraries, HELDBACK_REPO), keeping the RL kind's tasks as the held-back set; a
#            held-back function has none of its tasks, of any kind, in any training stage, and a training
#            task that repeats a held-back bug string (`name_typo: `data` -> `daa``) is dropped. Every stage
#            draws from the training side only:
#              warm-start.jsonl   the warm-start kinds' training tasks and the first WARM_RL of the RL kind's
#              probe-tasks.jsonl  the next PROBE_TASKS of the RL kind's training tasks
#              grpo-tasks.jsonl   the RL kind's training tasks
#              heldback.jsonl     the held-back tasks (of the RL kind): the only ones evaluated before/after
#            bench/heldback_disjoint.py then reads these files and the script stops (exit 1) when any
#            training stage shares an id, function, bug string (or, holding back libraries, a repository)
#            with the held-back set; its table goes to disjoint.md/.json, each stage's ids to ids/STAGE.txt
#   oracle   golden trajectories (ORACLE) on warm-start.jsonl -> sft-data; the default,
#            scripted:oracle-debug, runs the failing test, then fixes the line its traceback names: every
#            action can be read off what came before (oracle-compact's blind one-line fix teaches no procedure)
#   sft      supervised warm start on them (`swe-rl train sft`, resumable)
#   probe    the warm-started model, sampled, on probe-tasks.jsonl: GRPO needs a kind it solves sometimes
#            (~10-40 %) but not always; the rate is printed and kept in probe.json
#   before   heldback.jsonl, sampled (SAMPLES a task, T=TEMP) and greedy
#   rl       GRPO from the warm start on grpo-tasks.jsonl (`swe-rl train rl`), once per seed of GRPO_SEEDS,
#            each from the same warm start into grpo-s<SEED>/ (a killed run is continued with --resume,
#            losing at most the step in flight; each seed resumes on its own)
#   after    heldback.jsonl again, sampled and greedy, with each seed's checkpoint: after-s<SEED>-sampled/,
#            after-s<SEED>-greedy/ (the `before` evaluation is one: the warm start's)
#   report   bench/heldback_report.py: results.json and report.md (the same, for people), run every time:
#            each evaluation under both conventions of "resolved" (submitted-only, mini-swe-agent's; graded
#            at the limit, SWE-agent's), per seed and pooled after-minus-before with 95 % intervals
#            clustered by function (a two-level bootstrap, functions and seeds, for the pooled one),
#            evaluation noise next to the seed sd, greedy per seed, each GRPO run's submit rate per step,
#            and whether #42's goal is met
#
# Every stage is resumable: one whose output is complete is skipped (task files are written whole or not
# at all); STAGES="rl after report" runs only those; the disjointness check runs every time. A folder made
# by the earlier design (two independent splits: rl.test.jsonl, no split.jsonl) is refused. A single-seed
# run's grpo/, after-sampled/ and after-greedy/ (before GRPO_SEEDS) are not read: its GRPO seed was SEED (3),
# so `mv grpo grpo-s3; mv after-sampled after-s3-sampled; mv after-greedy after-s3-greedy` reuses them
# (with 3 in GRPO_SEEDS). Sizes come
# from the environment (defaults in brackets): W [bench/results/learning-heldback], MODEL [smollm2], ORACLE
# [scripted:oracle-debug], WARM_RL [24], SEED [3], WARM_KINDS ["return_change constant_change stmt_delete
# off_by_one cond_negate"], RL_KIND [name_typo], N_WARM [80], N_RL [130], HELDBACK [0.3, of the RL kind's
# tasks, by function], HELDBACK_REPO [none: libraries held back whole, space-separated; with HELDBACK=0
# nothing else is], SFT_EPOCHS [2], SFT_LR [5e-5], PROBE_TASKS [16], SAMPLES [8], TEMP [1.0], TOP_P [0.95],
# STEPS [20], GRPO_SEEDS ["1 2 3": one GRPO run and one after-evaluation each], TASKS_PER_STEP [4],
# GENS [4], RL_LR [3e-5], RL_SCHEDULE [constant], UNSUBMITTED [unresolved], MICRO [4], MAX_TOKENS
# [128], STEP_LIMIT [3], AGENT [compact], J [16], WALL [900]. Why these kinds: the 135M model fixes only
# bugs whose fix can be read off the traceback (a misspelt name: docs/experiments/learning-smollm2.md), and
# the builtin libraries have ~130 of them (the other kinds 2-72 each). The split of the defaults (seed 3):
# 39 held-back name_typo tasks (8 functions, 13 misspellings), 43 name_typo and 46 warm-kind training
# tasks; 82 dropped (48 name_typo repeating a held-back misspelling, 34 of held-back functions' other kinds).
#
# Budget on 2 cores (measured on this project's machines: SmolLM2 fp32 generates ~42 tokens/s at batch 16, a forward+backward of
# 8 x 600 tokens takes ~51 s): an evaluation of ~240 episodes of up to 3 turns x 128 tokens is ~20-30 min,
# a GRPO step of 16 episodes a few minutes. Plan about 3 h for synth..after with one seed, and about 2 h (GRPO and the after-evaluation) for each
# further seed of GRPO_SEEDS; run it at a session's start.
set -euo pipefail
cd "$(dirname "$0")/.."

W=${W:-bench/results/learning-heldback}
MODEL=${MODEL:-smollm2}
ORACLE=${ORACLE:-scripted:oracle-debug}
WARM_RL=${WARM_RL:-24}
SEED=${SEED:-3}
WARM_KINDS=${WARM_KINDS:-return_change constant_change stmt_delete off_by_one cond_negate}
RL_KIND=${RL_KIND:-name_typo}
N_WARM=${N_WARM:-80}
N_RL=${N_RL:-130}
HELDBACK=${HELDBACK:-0.3}
HELDBACK_REPO=${HELDBACK_REPO:-}
SFT_EPOCHS=${SFT_EPOCHS:-2}
SFT_LR=${SFT_LR:-5e-5}
PROBE_TASKS=${PROBE_TASKS:-16}
SAMPLES=${SAMPLES:-8}
TEMP=${TEMP:-1.0}
TOP_P=${TOP_P:-0.95}
STEPS=${STEPS:-20}
GRPO_SEEDS=${GRPO_SEEDS:-1 2 3}  # GRPO's seeds, every one from the same warm start (#42 asks for >= 3)
TASKS_PER_STEP=${TASKS_PER_STEP:-4}
GENS=${GENS:-4}
RL_LR=${RL_LR:-3e-5}
RL_SCHEDULE=${RL_SCHEDULE:-constant}  # TRL's default decays the rate to 0 over the run: half the movement
# the reward of an episode that never submitted: graded at the limit (SWE-agent's convention) paid the policy
# for not submitting in the first run (submits fell 164 -> 126 of 312); unresolved makes submitting the way
UNSUBMITTED=${UNSUBMITTED:-unresolved}
MICRO=${MICRO:-4}  # episodes per backward pass: 16 of ~900 tokens at once took 24 GiB and the OOM killer
# glibc's per-thread arenas let a long run's resident memory creep (micro-batches of 4 still reached 24 GiB
# at step 8 once); two arenas kept steps 8-19 under 15 GiB
export MALLOC_ARENA_MAX=${MALLOC_ARENA_MAX:-2}
MAX_TOKENS=${MAX_TOKENS:-128}
STEP_LIMIT=${STEP_LIMIT:-3}
AGENT=${AGENT:-compact}
J=${J:-16}
WALL=${WALL:-900}
STAGES=${STAGES:-all}
SWE=${SWE:-swe-rl}
mkdir -p "$W"

stage() { [ "$STAGES" = all ] || [[ " $STAGES " == *" $1 "* ]]; }
say() { printf '\n[heldback %s] %s\n' "$(date +%H:%M:%S)" "$*" >&2; }

evaluate() {  # evaluate TASKS MODEL_DIR OUT MODE: MODE sampled (SAMPLES a task) or greedy
  local tasks=$1 model=$2 out=$3 mode=$4
  # done only when nothing is missing: an evaluation that was stopped leaves a summary with "missing" > 0
  [ -f "$out/summary.json" ] && python3 -c 'import json, sys; sys.exit(json.load(open(sys.argv[1]))["missing"] > 0)' \
    "$out/summary.json" && return 0
  local sampling=(--temperature 0)
  [ "$mode" = sampled ] && sampling=(--temperature "$TEMP" --top-p "$TOP_P" --n-samples "$SAMPLES")
  say "eval $(basename "$out") ($mode)"
  local resume=()
  [ -f "$out/results.jsonl" ] && resume=(--resume)  # an interrupted evaluation goes on where it stopped
  $SWE eval --tasks "$tasks" --llm "hf:$model" -o "$out" -j "$J" "${sampling[@]}" "${resume[@]}" \
    --step-limit "$STEP_LIMIT" --max-tokens "$MAX_TOKENS" --agent-config "$AGENT" --wall-time "$WALL" >/dev/null
}

synth() {  # synth NAME N KIND...: tasks of these kinds, not split (the split comes once, after)
  local name=$1 n=$2
  shift 2
  [ -f "$W/$name.jsonl" ] && return 0
  local kinds=()
  for k in "$@"; do kinds+=(--kind "$k"); done
  say "synthesize $n tasks ($*)"
  $SWE tasks synth --repo builtin -o "$W/$name.jsonl" -n "$n" --seed "$SEED" --multi 0 \
    --difficulty one-line -j 2 "${kinds[@]}"
}

pick() {  # pick FILE FIRST COUNT KIND...: COUNT records ("all": every one) of these kinds, from FIRST (1-based)
  python3 - "$@" <<'PY'
import json, sys
path, first, count, kinds = sys.argv[1], int(sys.argv[2]), sys.argv[3], set(sys.argv[4:])
rows = [x for x in open(path) if x.strip() and set(json.loads(x)["synth"]["kinds"]) <= kinds][first - 1 :]
sys.stdout.write("".join(rows if count == "all" else rows[: int(count)]))
PY
}

warm_start_tasks() {  # the warm-start kinds' training tasks and the first WARM_RL of the RL kind's
  # shellcheck disable=SC2086
  pick "$W/split.train.jsonl" 1 all $WARM_KINDS
  pick "$W/split.train.jsonl" 1 "$WARM_RL" "$RL_KIND"
}

derive() {  # derive NAME COMMAND...: W/NAME.jsonl from COMMAND's output, whole or not at all
  [ -f "$W/$1.jsonl" ] && return 0
  local name=$1
  shift
  "$@" > "$W/.$name.jsonl.tmp"
  [ -s "$W/.$name.jsonl.tmp" ] || { say "no tasks for $name"; rm -f "$W/.$name.jsonl.tmp"; exit 1; }
  mv "$W/.$name.jsonl.tmp" "$W/$name.jsonl"
}

if [ -f "$W/rl.test.jsonl" ] && [ ! -f "$W/split.jsonl" ]; then
  say "$W holds tasks split the old way (rl.test.jsonl): use a new W"
  exit 1
fi
if stage synth; then
  # shellcheck disable=SC2086
  synth warm "$N_WARM" $WARM_KINDS
  synth rl "$N_RL" "$RL_KIND"
  if [ ! -f "$W/split.jsonl" ]; then
    say "one split of every task: held back by function${HELDBACK_REPO:+ and library ($HELDBACK_REPO)}, then by bug string"
    repos=()
    for r in $HELDBACK_REPO; do repos+=(--heldback-repo "$r"); done
    $SWE tasks split --tasks "$W/warm.jsonl" --tasks "$W/rl.jsonl" -o "$W/split.jsonl" --heldback "$HELDBACK" \
      --seed "$SEED" --heldback-kind "$RL_KIND" "${repos[@]}" --report "$W/split.json"
  fi
  derive warm-start warm_start_tasks
  derive probe-tasks pick "$W/split.train.jsonl" "$((WARM_RL + 1))" "$PROBE_TASKS" "$RL_KIND"
  derive grpo-tasks pick "$W/split.train.jsonl" 1 all "$RL_KIND"
  derive heldback pick "$W/split.heldback.jsonl" 1 all "$RL_KIND"
fi
for f in split warm-start probe-tasks grpo-tasks heldback; do
  [ -f "$W/$f.jsonl" ] || { say "no $W/$f.jsonl: run the synth stage first"; exit 1; }
done
# the held-back set against every training stage, from the files themselves; one library's tasks share
# their repository unless whole libraries are held back (HELDBACK_REPO, HELDBACK=0)
allow=(--allow repositories)
[ -n "$HELDBACK_REPO" ] && python3 -c 'import sys; sys.exit(float(sys.argv[1]) != 0)' "$HELDBACK" && allow=()
python3 bench/heldback_disjoint.py --heldback "$W/heldback.jsonl" --stage warm-start="$W/warm-start.jsonl" \
  --stage probe="$W/probe-tasks.jsonl" --stage grpo="$W/grpo-tasks.jsonl" "${allow[@]}" \
  --json "$W/disjoint.json" > "$W/disjoint.md" || { cat "$W/disjoint.md" >&2; say "held-back set not disjoint"; exit 1; }
mkdir -p "$W/ids"
for f in warm-start probe-tasks grpo-tasks heldback split.heldback split.train split.dropped; do
  python3 -c 'import json, sys; print("\n".join(json.loads(x)["instance_id"] for x in open(sys.argv[1]) if x.strip()))' \
    "$W/$f.jsonl" > "$W/ids/$f.txt"
done
if stage oracle && [ ! -d "$W/sft-data" ]; then
  say "golden trajectories on the warm-start tasks (training side: the warm-start kinds and $WARM_RL of the RL kind)"
  [ -f "$W/oracle/summary.json" ] || $SWE eval --tasks "$W/warm-start.jsonl" --llm "$ORACLE" \
    -o "$W/oracle" -j "$J" --agent-config "$AGENT" >/dev/null
  $SWE data sft "$W/oracle" -o "$W/sft-data"
fi
if stage sft && [ ! -d "$W/sft/final" ]; then
  say "supervised warm start"
  resume=()
  [ -d "$W/sft" ] && resume=(--resume "$W/sft")
  $SWE train sft "$W/sft-data" --model "$MODEL" -o "$W/sft" --epochs "$SFT_EPOCHS" --lr "$SFT_LR" \
    --seed "$SEED" "${resume[@]}"
fi
if stage probe; then  # training tasks of the RL kind the warm start did not see
  evaluate "$W/probe-tasks.jsonl" "$W/sft/final" "$W/probe" sampled
fi
if stage before; then
  evaluate "$W/heldback.jsonl" "$W/sft/final" "$W/before-sampled" sampled
  evaluate "$W/heldback.jsonl" "$W/sft/final" "$W/before-greedy" greedy
fi
if [ -d "$W/grpo" ] && ! compgen -G "$W/grpo-s*" >/dev/null; then
  say "$W/grpo is a single-seed run's, not read now: mv it to grpo-s<its seed> (and after-* to after-s<seed>-*)"
fi
for s in $GRPO_SEEDS; do  # every seed from the same warm start, each resumable on its own
  g="$W/grpo-s$s"
  if stage rl && [ ! -d "$g/final" ]; then
    say "GRPO seed $s from the warm start on the RL kind's training tasks"
    resume=()
    [ -f "$g/rollouts.jsonl" ] && resume=(--resume "$g")
    $SWE train rl --tasks "$W/grpo-tasks.jsonl" --model "$W/sft/final" --steps "$STEPS" \
      --tasks-per-step "$TASKS_PER_STEP" -g "$GENS" --lr "$RL_LR" --max-tokens "$MAX_TOKENS" \
      --temperature "$TEMP" --top-p "$TOP_P" --step-limit "$STEP_LIMIT" -j "$J" --seed "$s" \
      --agent-config "$AGENT" --micro-batch "$MICRO" --trl lr_scheduler_type="$RL_SCHEDULE" -o "$g" \
      --unsubmitted "$UNSUBMITTED" "${resume[@]}"
  fi
  if stage after; then
    [ -d "$g/final" ] || { say "no $g/final: run the rl stage for seed $s first"; exit 1; }
    evaluate "$W/heldback.jsonl" "$g/final" "$W/after-s$s-sampled" sampled
    evaluate "$W/heldback.jsonl" "$g/final" "$W/after-s$s-greedy" greedy
  fi
done
# the report, every time (it only reads): report.md and results.json
python3 bench/heldback_report.py "$W"
