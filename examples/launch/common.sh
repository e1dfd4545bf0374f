#!/usr/bin/env bash
# Shared by the launch scripts in this folder; source it, do not run it.
# slime/miles GRPO on SWE tasks with swe-rl's rollout and reward functions. The values marked "seed" are the
# seed's (slime SWE-RL example); everything marked "choose" is a starting point for your cluster, not a
# measured recipe. Nothing here has been run in the swe-rl repository (no GPUs there).

set -euo pipefail

: "${SLIME_DIR:?set SLIME_DIR to your slime (or miles) checkout}"
: "${HF_CKPT:?set HF_CKPT to the policy model directory (Hugging Face format)}"
: "${PROMPT_DATA:?set PROMPT_DATA to a train.jsonl from: swe-rl data prepare --tasks ... -o data/}"
EXPORT_ROOT=${EXPORT_ROOT:-$PWD/output}
RUN_NAME=${RUN_NAME:?}
STAMP=$(date +%Y%m%d_%H%M%S)
SAVE_CKPT=${SAVE_CKPT:-$EXPORT_ROOT/ckpt/${RUN_NAME}_$STAMP}
GPUS_PER_NODE=${GPUS_PER_NODE:-8}

# --- swe-rl settings, read by swe_rl.integrations.slime in every rollout worker -------------------------------
# Where rollouts run: local (agent + sandboxes in the trainer's rollout process), service:<URL>[,<URL>...]
# (swe-rl serve rollout on CPU machines), or ray[:<address>]. Sandboxes of a local executor: SWE_RL_BACKEND
# (ns on this machine, or http://<pool>:18090 for swe-rl serve pool in front of swe-rl serve exec nodes).
export SWE_RL_EXECUTOR=${SWE_RL_EXECUTOR:-local}
export SWE_RL_BACKEND=${SWE_RL_BACKEND:-ns}
export SWE_RL_TOKENIZER=${SWE_RL_TOKENIZER:-$HF_CKPT}   # must exist on rollout servers too (or: qwen)
export SWE_RL_MAX_CONTEXT=${SWE_RL_MAX_CONTEXT:-16384}  # seed: --rollout-max-context-len 16384
export SWE_RL_DYNAMIC_HISTORY=${SWE_RL_DYNAMIC_HISTORY:-1}  # seed: dynamic_history on (one sample per step)
export SWE_RL_STEP_LIMIT=${SWE_RL_STEP_LIMIT:-}         # empty: the agent config's own limit
export SWE_RL_AGENT_CONFIG=${SWE_RL_AGENT_CONFIG:-}     # empty: the shipped swebench config

preflight() {
  # the functions slime will load must import here, and the rollout servers (if any) must answer
  python -c "import swe_rl.integrations.slime as m; m.generate; m.reward_func; m.reward_post_process"
  case "$SWE_RL_EXECUTOR" in
    service:*)
      IFS=, read -ra urls <<<"${SWE_RL_EXECUTOR#service:}"
      for url in "${urls[@]}"; do
        curl -fsS -H "Authorization: Bearer ${SWE_RL_TOKEN:-}" "$url/healthz" >/dev/null \
          || { echo "rollout server $url does not answer /healthz" >&2; exit 1; }
      done ;;
  esac
  case "$SWE_RL_BACKEND" in
    http://*|https://*)
      curl -fsS -H "Authorization: Bearer ${SWE_RL_TOKEN:-}" "$SWE_RL_BACKEND/status" >/dev/null \
        || { echo "pool server $SWE_RL_BACKEND does not answer /status" >&2; exit 1; } ;;
  esac
}

# launch_slime NODES TP MODEL_SCRIPT [extra slime args...]
#   NODES: GPU nodes in the Ray cluster (seed); TP: tensor parallel size (choose); MODEL_SCRIPT: slime's
#   scripts/models/<model>.sh, which defines MODEL_ARGS.
launch_slime() {
  local nodes=$1 tp=$2 model_script=$3
  shift 3
  # shellcheck disable=SC1090
  source "$SLIME_DIR/scripts/models/$model_script"
  preflight
  mkdir -p "$SAVE_CKPT"
  local args=(
    "${MODEL_ARGS[@]}"
    --hf-checkpoint "$HF_CKPT" --save "$SAVE_CKPT" --save-interval "${SAVE_INTERVAL:-20}"
    # data: swe-rl data prepare rows; generate reads the task from metadata["instance"]
    --prompt-data "$PROMPT_DATA" --input-key text --metadata-key metadata --rollout-shuffle
    # swe-rl's rollout and reward. The reward is a float (no --reward-key: slime's get_reward_value hands
    # it on as it is); the post-process groups by group_index, counts each rollout once however many step
    # samples it fanned out into, and leaves infrastructure failures (remove_sample) out of the statistics
    --custom-generate-function-path swe_rl.integrations.slime.generate
    --custom-rm-path swe_rl.integrations.slime.reward_func
    --custom-reward-post-process-path swe_rl.integrations.slime.reward_post_process
    # seed values
    --rollout-max-context-len 16384 --rollout-max-response-len 4096 --n-samples-per-prompt 8
    --optimizer adam --lr 1e-6 --lr-decay-style constant
    # choose: batch sizes, sampling, GRPO clipping
    --num-rollout "${NUM_ROLLOUT:-300}" --rollout-batch-size "${ROLLOUT_BATCH_SIZE:-16}"
    --global-batch-size "${GLOBAL_BATCH_SIZE:-128}" --rollout-temperature 1.0
    --advantage-estimator grpo --eps-clip 0.2 --eps-clip-high 0.28
    # choose: parallelism
    --actor-num-nodes "$nodes" --actor-num-gpus-per-node "$GPUS_PER_NODE" --colocate
    --tensor-model-parallel-size "$tp" --sequence-parallel --use-dynamic-batch-size
    --max-tokens-per-gpu "${MAX_TOKENS_PER_GPU:-16384}" --rollout-num-gpus-per-engine "$tp"
    "$@"
  )
  ray job submit --address="${RAY_ADDRESS:-http://127.0.0.1:8265}" \
    --runtime-env-json="$(runtime_env)" \
    -- python3 "$SLIME_DIR/train.py" "${args[@]}"
}

runtime_env() {
  # the SWE_RL_* settings and swe-rl's token reach every Ray worker (the rollout workers call generate)
  python - <<'PY'
import json, os
env = {k: v for k, v in os.environ.items() if k.startswith(("SWE_RL_", "SWE_EXEC_")) and v}
env["PYTHONPATH"] = os.environ.get("PYTHONPATH", "")
print(json.dumps({"env_vars": env}))
PY
}
