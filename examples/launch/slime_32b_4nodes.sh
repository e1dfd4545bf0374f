#!/usr/bin/env bash
# Qwen3-32B, 4 nodes (32 GPUs): the seed's smaller 32B scale.
# Run from the node where `ray start --head` ran (Ray cluster of 4 GPU nodes), with swe-rl installed:
#   SLIME_DIR=/path/to/slime HF_CKPT=/path/to/qwen3-32B PROMPT_DATA=data/train.jsonl \
#   SWE_RL_EXECUTOR=service:http://cpu1:18100,http://cpu2:18100 bash examples/launch/slime_32b_4nodes.sh
# See README.md in this folder for what runs where.
set -euo pipefail
RUN_NAME=${RUN_NAME:-swe-rl-32b-4nodes}
source "$(dirname "$0")/common.sh"
launch_slime 4 8 qwen3-32B.sh "$@"
