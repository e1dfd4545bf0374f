#!/usr/bin/env bash
# Qwen3-8B with process rewards (PRM), 5 nodes (40 GPUs) in the seed: 4 train the policy, 1 serves the judge
# (--prm-m 3 judgements per step, --prm-step-coef 1.0; reward = outcome + coef * mean step score).
#
# NOT RUNNABLE YET: swe-rl has the PRM scoring (swe_rl.rl.rewards.prm_step_scores and combined_reward), but
# no adapter calls it, so this script refuses to start rather than train on outcome rewards while claiming
# PRM. When the slime adapter reads a judge endpoint, this becomes: the judge's SGLang router on the 5th
# node, then `launch_slime 4 2 qwen3-8B.sh` from common.sh with the judge settings exported.
set -euo pipefail
echo "PRM rewards are not wired into swe_rl.integrations.slime yet; slime_8b_2nodes.sh trains the 8B" \
  "model on outcome rewards" >&2
exit 2
