#!/bin/bash
# Gold patches of the whole-set run's valid instances (verified-build.json, at the time: 41), graded strict on ns,
# in the env cache that run built (issue #38: strict resolves every gold patch that official resolves).
# gold.json: [{"instance_id", "model_name_or_path": "gold", "model_patch": <the row's patch>}] for each valid instance.
swe-rl grade -p gold.json --tasks verified-9fa5614.parquet --run-id strict-gold -o out -b ns \
  --cache-dir /work/cache39/envs --repo-cache /work/gold-data/repos --grading strict -j 1
