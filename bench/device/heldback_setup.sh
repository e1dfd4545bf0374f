#!/usr/bin/env bash
# The held-back GRPO experiment (#42) on a lent GPU machine, call 1 of 2: unpack what the call carried, check
# the imports, the GPU and one sandboxed oracle episode. Used for docs/experiments/learning-heldback.md's
# H200 run. The machine keeps its files only while it stays warm (30 s): call 2 (heldback_run.sh) follows at
# once. What travels is made by bench/device/heldback_prepare.sh, which says what and why. Then:
#   device run carry=[".dev1"] "bash .dev1/setup.sh"; at once carry=[".dev2"] "bash .dev2/run.sh"
set -u
R=$PWD
mkdir -p /root/dev /root/bin /root/hb && cp .dev1/p1 /root/dev/p1
python3 -m pip install -q --no-index --no-deps --no-compile --no-cache-dir --target /root/site .dev1/whl/*.whl 2>&1 | tail -3
ldconfig -p | grep -q libseccomp || { dpkg -x .dev1/libseccomp2_*.deb / && ldconfig && echo "libseccomp from the deb"; }
[ -f /root/hb/split.jsonl ] || tar -xf .dev1/hb.tar -C /root/hb
printf '#!/bin/sh\nexec python3 -c "from swe_rl.cli.app import main; main()" "$@"\n' > /root/bin/swe-rl && chmod +x /root/bin/swe-rl
cat > /root/dev/env.sh <<ENV
export PYTHONPATH=/root/site:$R/src PATH=/root/bin:/root/site/bin:\$PATH W=/root/hb SWE=swe-rl MALLOC_ARENA_MAX=2
export HF_HUB_OFFLINE=1 TRANSFORMERS_OFFLINE=1 TRL_EXPERIMENTAL_SILENCE=1 PYTHONUNBUFFERED=1 SWE_RL_CACHE=/root/cache
export TOKENIZERS_PARALLELISM=false OMP_NUM_THREADS=2  # four trainers and evaluations share 16 cores with the sandboxes
ENV
. /root/dev/env.sh
python3 -c "import sys, torch, transformers, trl, datasets, accelerate, pyarrow, huggingface_hub, numpy, pydantic, gguf, swebench.harness.grading, swe_rl.cli.app; print(sys.version.split()[0], 'torch', torch.__version__, 'tf', transformers.__version__, 'trl', trl.__version__, 'ds', datasets.__version__, 'acc', accelerate.__version__, 'pa', pyarrow.__version__, 'hub', huggingface_hub.__version__, 'np', numpy.__version__, torch.cuda.get_device_name())"
echo "cores $(nproc)"; free -g | sed -n 2p; df -h /root | tail -1; uname -r
head -2 /root/hb/heldback.jsonl > /root/hb/.smoke.jsonl
swe-rl eval --tasks /root/hb/.smoke.jsonl --llm scripted:oracle-debug -o /root/dev/smoke -j 2 --agent-config compact 2>&1 | tail -4
