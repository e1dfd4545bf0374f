#!/usr/bin/env bash
# Recall of `swe-rl tasks mine` against SWE-bench (issue #41): each repository mined over the densest
# 31-day window of SWE-bench Lite ∪ Verified instances that `bench/mine_recall.py pick` chose
# (bench/results/mine-recall-pick.json; chosen by where the instances landed, before any mining), then
# scored with `bench/mine_recall.py score`. Resumable (each repository's state file).
#
#   W=/work/recall41 REFS="lite.parquet verified.parquet" bash bench/mine_recall.sh
#
# W/repos is a repo cache (OWNER/NAME.git) holding the mirrors; envs go to W/envs. With PATHS=gold (the
# default) only candidates changing a source file of a gold patch of the window are validated
# (`mine_recall.py paths`): a row is scored produced only with exactly a gold patch's source files, so the
# recall is the same as mining the whole window (PATHS=all), which decides every other candidate too.
set -euo pipefail
cd "$(dirname "$0")/.."
W=${W:-/work/recall41}
J=${J:-1}
SWE_RL=${SWE_RL:-swe-rl}
PYTHON=${PYTHON:-python}
PICK=${PICK:-bench/results/mine-recall-pick.json}
REPOS=${REPOS:-sympy/sympy pytest-dev/pytest sphinx-doc/sphinx pallets/flask}
read -r -a refs <<< "${REFS:-/work/gold-data/lite.parquet /work/gold-data/verified-9fa5614.parquet}"
for repo in $REPOS; do
  name=${repo//\//__}
  read -r since until < <($PYTHON - "$PICK" "$repo" <<'PY'
import json, sys
pick = json.load(open(sys.argv[1]))
(entry,) = [r for r in pick["repos"] if r["repo"] == sys.argv[2]]
(window,) = [w for w in entry["windows"] if w["days"] == 31]
print(window["since"].replace(" +0000", "Z").replace(" ", "T"), window["until"].replace(" +0000", "Z").replace(" ", "T"))
PY
)
  only=()
  if [ "${PATHS:-gold}" = gold ]; then
    while read -r path; do only+=(--path "$path"); done < <($PYTHON bench/mine_recall.py paths \
      "${refs[@]/#/--ref=}" --repos-dir "$W/repos" --repo "$repo" --since "$since" --until "$until")
  fi
  echo "== $repo ($since .. $until; $(( ${#only[@]} / 2 )) gold source files as --path)" >&2
  $SWE_RL tasks mine --repo "$repo" --repo-cache "$W/repos" --out "$W/$name.jsonl" --since "$since" \
    --until "$until" -j "$J" -b ns --cache-dir "$W/envs" "${only[@]}" --json > "$W/$name.summary.json"
  $PYTHON bench/mine_recall.py score "${refs[@]/#/--ref=}" --repos-dir "$W/repos" --repo "$repo" \
    --since "$since" --until "$until" --tasks "$W/$name.jsonl" --out "$W/$name.recall.json"
done
