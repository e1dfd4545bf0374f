#!/usr/bin/env bash
# Yield of `swe-rl tasks mine` on repositories no spec covers (issue #41): six of SWE-Gym's eleven
# repositories, each over January 2023 (UTC committer dates), every candidate of the window validated
# (no --max-candidates), envs inferred, default options, ns. Resumable: each repository's state file
# keeps its decisions; rerun the same command after an interruption.
#
#   W=/work/mine41 MIRRORS=/work/.mirror bash bench/mine_yield.sh
#
# W holds the task files (W/<name>.jsonl), their state, the summaries (W/<name>.summary.json) and the
# env cache (W/envs); MIRRORS holds <owner>+<name>/repo (the `fetch` tool's layout; any git repository
# works). The window is fixed in advance, the same for every repository, not chosen by yield.
# The second window, the first half of February 2023 (fixed before it was mined, the same for all six):
#   W=/work/mine41b SINCE=2023-02-01T00:00:00Z UNTIL=2023-02-15T00:00:00Z \
#     REPOS="conan-io+conan pydantic+pydantic getmoto+moto facebookresearch+hydra iterative+dvc dask+dask" \
#     bash bench/mine_yield.sh   # W/envs a link to the first window's env cache
set -euo pipefail
cd "$(dirname "$0")/.."
W=${W:-/work/mine41}
MIRRORS=${MIRRORS:-/work/.mirror}
SINCE=${SINCE:-2023-01-01T00:00:00Z}
UNTIL=${UNTIL:-2023-02-01T00:00:00Z}
J=${J:-2}
REPOS=${REPOS:-getmoto+moto conan-io+conan iterative+dvc dask+dask pydantic+pydantic facebookresearch+hydra}
SWE_RL=${SWE_RL:-swe-rl}
mkdir -p "$W"
for r in $REPOS; do
  owner=${r%%+*} repo=${r#*+} name=${r//+/__}
  mkdir -p "$W/repos/$owner"
  ln -sfn "$MIRRORS/$r/repo" "$W/repos/$owner/$repo.git"  # a repo cache: rows are named owner__name
  echo "== $owner/$repo ($SINCE .. $UNTIL)" >&2
  $SWE_RL tasks mine --repo "$owner/$repo" --repo-cache "$W/repos" --out "$W/$name.jsonl" --since "$SINCE" \
    --until "$UNTIL" -j "$J" -b ns --cache-dir "$W/envs" --json > "$W/$name.summary.json"
done
