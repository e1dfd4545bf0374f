#!/usr/bin/env bash
# Qwen3-8B, 2 nodes (16 GPUs): the seed's lightweight experiment.
# Run from the node where `ray start --head` ran (Ray cluster of 2 GPU nodes), with swe-rl installed:
#   SLIME_DIR=/path/to/slime HF_CKPT=/path/to/qwen3-8B PROMPT_DATA=data/train.jsonl \
#   SWE_RL_EXECUTOR=service:http://cpu1:18100,http://cpu2:18100 bash examples/launch/slime_8b_2nodes.sh
# See README.md in this folder for what runs where.
set -euo pipefail
RUN_NAME=${RUN_NAME:-swe-rl-8b-2nodes}
source "$(dirname "$0")/common.sh"
launch_slime 2 2 qwen3-8B.sh "$@"
