#!/usr/bin/env bash
# Issue #39: what other mksquashfs settings would make of the env image. A seeded random sample of the trees of a
# mounted image (`env pack`'s packed/<id>/) is packed again with each setting, one processor each, and the size
# and time printed as JSON lines; the first setting is the one `env pack` uses (zstd 15, 128 KiB blocks).
#
#   IMAGE=/work/pack39/envs/packed/<id> N=12 SEED=7 bash bench/pack_settings.sh > bench/results/pack-settings.jsonl
set -euo pipefail
: "${IMAGE:?the directory of a mounted image}"
N="${N:-12}" SEED="${SEED:-7}"
out=$(mktemp -d)
trap 'rm -rf "$out"' EXIT
pick='import os, random, sys; e = sorted(os.listdir(sys.argv[1])); print("\n".join(random.Random(int(sys.argv[3])).sample(e, int(sys.argv[2]))))'
mapfile -t sample < <(python3 -c "$pick" "$IMAGE" "$N" "$SEED")
trees=(); for t in "${sample[@]}"; do trees+=("$IMAGE/$t"); done
raw=$(du -s -B1 --apparent-size "${trees[@]}" | awk '{s += $1} END {print s}')
settings=(
  "-comp zstd -Xcompression-level 15"
  "-comp zstd -Xcompression-level 15 -b 1M"
  "-comp zstd -Xcompression-level 19 -b 1M"
  "-comp zstd -Xcompression-level 22 -b 1M"
  "-comp xz -b 1M"
  "-comp xz -b 1M -Xbcj x86"
)
for s in "${settings[@]}"; do
  t0=$(date +%s.%N)
  # shellcheck disable=SC2086
  nice -n 19 mksquashfs "${trees[@]}" "$out/x.sqfs" -noappend -quiet -no-progress -processors 1 $s > /dev/null
  t1=$(date +%s.%N)
  printf '{"setting": "%s", "trees": %d, "seed": %d, "raw_bytes": %d, "bytes": %d, "seconds": %.1f}\n' \
    "$s" "$N" "$SEED" "$raw" "$(stat -c %s "$out/x.sqfs")" "$(echo "$t1 - $t0" | bc)"
  rm -f "$out/x.sqfs"
done
