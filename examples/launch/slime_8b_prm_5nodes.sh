#!/usr/bin/env bash
# Qwen3-8B with process rewards (PRM), 5 nodes (40 GPUs) in the seed: 4 train the policy, the 5th serves the
# judge. Every step of every rollout is judged SWE_RL_PRM_M times (seed: 3) with \boxed{+1}/\boxed{-1};
# reward = outcome + SWE_RL_PRM_COEF (seed: 1.0) * mean step score (swe_rl.integrations.settings, rl.rewards).
# Start the judge first on the 5th node (any OpenAI-compatible server), e.g.
#   python -m sglang.launch_server --model-path /models/judge --port 30000 --host 0.0.0.0
# then, on the head node:
#   SLIME_DIR=... HF_CKPT=... PROMPT_DATA=data/train.jsonl SWE_RL_PRM_URL=http://judge-node:30000/v1 \
#   bash examples/launch/slime_8b_prm_5nodes.sh
set -euo pipefail
RUN_NAME=${RUN_NAME:-swe-rl-8b-prm}
: "${SWE_RL_PRM_URL:?set SWE_RL_PRM_URL to the OpenAI-compatible base URL of the judge (http://host:port/v1)}"
export SWE_RL_PRM_MODEL=${SWE_RL_PRM_MODEL:-judge}   # the model name the judge server answers to
export SWE_RL_PRM_M=${SWE_RL_PRM_M:-3}               # seed: --prm-m 3
export SWE_RL_PRM_COEF=${SWE_RL_PRM_COEF:-1.0}       # seed: --prm-step-coef 1.0
source "$(dirname "$0")/common.sh"
launch_slime 4 2 qwen3-8B.sh "$@"
