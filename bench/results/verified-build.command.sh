#!/bin/bash
# The whole of SWE-bench Verified (9fa5614 parquet), default options, ns, resumable (issue #39).
cd /work/cache39
PYTHONPATH=/work/run39/src exec /work/main/.venv/bin/python -c "from swe_rl.cli.app import main; main()" \
  env build --tasks /work/gold-data/verified-9fa5614.parquet --repo-cache /work/gold-data/repos \
  --cache-dir /work/cache39/envs --validate -b ns -j 2 --report /work/cache39/verified-report.json
