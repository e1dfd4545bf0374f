#!/usr/bin/env bash
# Issue #39: the env cache of a seeded random sample of SWE-bench Verified, loose and then packed (`swe-rl env pack`),
# and the verdicts graded again on the packed envs. Resumable: each stage leaves its file in $W and is skipped when
# it is there (env build itself resumes from its report).
#
#   W=/work/pack39 PARQUET=verified-9fa5614.parquet REPOS=/work/gold-data/repos bash bench/verified_packed.sh
#
# Stages: (1) 16 instances drawn with random.Random(2029).sample(sorted ids, 16), built and validated (ns, -j 2);
# (2) `env pack`; (3) `env pack --merge` (the repositories' packs join the image); the 16 graded again on it and
# compared; (4) 84 more, random.Random(2030).sample(the other 484, 84), built into the same cache (the first image's
# shared venvs and packs are reused from it); (5) `env pack --merge`; all 100 graded again and compared.
# (6) the whole set: the other 400 in the order random.Random(2031).shuffle(sorted ids) gives them, 50 at a time, into
# whole.json (started from the 100's packed report), each chunk's wall time appended to chunks.log; a stopped run
# resumes at its chunk, so what is built at any point is a random sample; then (7) `env pack --merge` (pack4.json)
# and the cache's `du` (du-final.txt); (8) 25 of the 250 built after the 250's merge, drawn with
# random.Random(2033).sample(rest[150:], 25), graded again on the final image and compared (compare-final.json).
# Results: $W/pack*.json (manifest, disk before and after), $W/compare-*.json; copied to bench/results/ by hand.
# Needs root, squashfs-tools, the mirrors named in docs/ENVIRONMENTS.md, and the host packages of verified-build.
set -euo pipefail
: "${W:?work dir}" "${PARQUET:?the Verified parquet (9fa5614)}" "${REPOS:?the repo cache}"
HERE="$(cd "$(dirname "$0")/.." && pwd)"
PY="${PY:-$HERE/.venv/bin/python}"
swe() { PYTHONPATH="$HERE/src" nice -n 10 "$PY" -c "from swe_rl.cli.app import main; main()" "$@"; }
mkdir -p "$W"
cd "$W"

if [ ! -f first.txt ]; then
  "$PY" - "$PARQUET" <<'EOF'
import random, sys
import pyarrow.parquet as pq
ids = sorted(pq.read_table(sys.argv[1], columns=["instance_id"]).column(0).to_pylist())
first = random.Random(2029).sample(ids, 16)
more = random.Random(2030).sample(sorted(set(ids) - set(first)), 84)
open("first.txt", "w").write("\n".join(sorted(first)) + "\n")
open("more.txt", "w").write("\n".join(sorted(more)) + "\n")
EOF
fi
ids() { local args=(); while read -r i; do args+=(-i "$i"); done < "$1"; printf '%s\n' "${args[@]}"; }
build() {  # build [--revalidate] REPORT IDS...
  swe env build --tasks "$PARQUET" --repo-cache "$REPOS" --cache-dir "$W/envs" --validate -b ns -j 2 "$@" || true
}

[ -f report-16-loose.json ] || { mapfile -t a < <(ids first.txt); build --report report.json "${a[@]}"; cp report.json report-16-loose.json; }
[ -f pack1.json ] || swe env pack --cache-dir "$W/envs" --json > pack1.json
[ -f pack2.json ] || swe env pack --merge --cache-dir "$W/envs" --json > pack2.json
if [ ! -f compare-16.json ]; then
  mapfile -t a < <(ids first.txt); build --report report-16-packed.json "${a[@]}"
  "$PY" "$HERE/bench/report_compare.py" report-16-loose.json report-16-packed.json --out compare-16.json || true
fi
[ -f report-100-loose.json ] || { mapfile -t a < <(ids more.txt); build --report report.json "${a[@]}"; cp report.json report-100-loose.json; }
[ -f pack3.json ] || swe env pack --merge --cache-dir "$W/envs" --json > pack3.json
if [ ! -f compare-100.json ]; then
  mapfile -t a < <(cat first.txt more.txt | sort > all.txt; ids all.txt); build --report report-100-packed.json "${a[@]}"
  "$PY" "$HERE/bench/report_compare.py" report-100-loose.json report-100-packed.json --out compare-100.json || true
fi
if [ ! -f rest.txt ]; then
  "$PY" - "$PARQUET" <<'EOF'
import random, sys
import pyarrow.parquet as pq
ids = sorted(pq.read_table(sys.argv[1], columns=["instance_id"]).column(0).to_pylist())
done = set(open("all.txt").read().split())
rest = sorted(set(ids) - done)
random.Random(2031).shuffle(rest)
open("rest.txt", "w").write("\n".join(rest) + "\n")
EOF
fi
[ -f whole.json ] || cp report-100-packed.json whole.json
n=$(wc -l < rest.txt)
for ((k = 0; k < n; k += 50)); do
  [ -f "chunk-$k.done" ] && continue
  sed -n "$((k + 1)),$((k + 50))p" rest.txt > chunk.txt
  mapfile -t a < <(ids chunk.txt)
  t0=$(date +%s); echo "chunk $k: started $(date -Is)" >> chunks.log; build --report whole.json "${a[@]}"
  echo "chunk $k: $(wc -l < chunk.txt) instances, $(($(date +%s) - t0)) s" >> chunks.log
  touch "chunk-$k.done"
done
[ -f pack4.json ] || swe env pack --merge --cache-dir "$W/envs" --json > pack4.json
du -s -B1 -x "$W/envs"/* > du-final.txt
if [ ! -f compare-final.json ]; then
  "$PY" - <<'EOF'
import random
rest = open("rest.txt").read().split()
open("recheck-final.txt", "w").write("\n".join(sorted(random.Random(2033).sample(rest[150:], 25))) + "\n")
EOF
  mapfile -t a < <(ids recheck-final.txt); build --report report-final-packed.json "${a[@]}"
  "$PY" "$HERE/bench/report_compare.py" whole.json report-final-packed.json --out compare-final.json || true
fi
