#!/bin/bash
# The whole of SWE-bench Verified (9fa5614 parquet), default options, ns, resumable (issue #39).
# The run over the whole set (oldest first); run 2026-11-27/28 with swe-rl of the commits named in the notes
cd /work/cache39
PYTHONPATH=/work/run39/src exec /work/main/.venv/bin/python -c "from swe_rl.cli.app import main; main()" \
  env build --tasks /work/gold-data/verified-9fa5614.parquet --repo-cache /work/gold-data/repos \
  --cache-dir /work/cache39/envs --validate -b ns -j 2 --report /work/cache39/verified-report.json
# 2026-11-28 beside it, into its own report: the earliest instance of each (repository, version) not yet built
#   env build ... -i <62 ids: /work/groups39.txt> --cache-dir /work/cache39/envs --validate -b ns -j 2 \
#     --report /work/groups39/report.json
# then the invalid entries of the whole run graded again with the current validation:
#   env build ... -i <its 6 invalid ids> --validate --revalidate -b ns -j 1 --report /work/cache39/verified-report.json
# and the side reports put in (run while neither is going):
#   python bench/verified_merge.py /work/cache39/verified-report.json /work/groups39/report.json \
#     /work/mpl39/report.json /work/sp39/report.json --cache-dir /work/cache39/envs
# xarray 0.12's version venv and xarray-2905 built again after the numba fix (bebca25), into /work/xa39/report.json,
# merged the same way
# 2026-11-28 (second session): the whole run resumed at 5e76e5c, c49b68c and 6dbd65b (restarted at each); then the
# invalid entries whose class the day's fixes touch graded again, and sphinx-10614 built again (graphviz):
#   env build ... -i pydata__xarray-6721 -i pydata__xarray-3305 -i psf__requests-1724 -i psf__requests-1766 \
#     -i psf__requests-1921 -i psf__requests-2317 -i sphinx-doc__sphinx-10614 --validate --revalidate -b ns -j 2 \
#     --report /work/cache39/verified-report.json
# then the envs no entry uses removed, and the report's disk measured again after it (EnvCache.disk_usage):
#   swe-rl env gc --cache-dir /work/cache39/envs --keep-report /work/cache39/verified-report.json
# 2026-11-28 (third session): the whole run resumed at 8a7adfb (nice 15 beside a training run), stopped with SIGTERM after
# 35 more; then the same gc, `uv cache prune --ci` (download caches), and the disk measured again (EnvCache.disk_usage)
# then resumed at 1d4b258 alone on the machine for 20 minutes (65 more), stopped with SIGTERM, gc and disk again
# 2026-11-28 (fourth session): a new machine; the earlier env cache was gone, the report (this file's json) was not.
# Mirrors fetched again (the same forks; astropy/astropy-helpers added), host packages first:
#   apt-get install libeccodes0 graphviz libfreetype-dev libqhull-dev autoconf automake libtool make pkg-config
#   (ghostscript only after three matplotlib 3.4 builds had failed for want of `gs`: retried by the next run)
# The report copied to /work/cache39/verified-report.json, then the instances it did not hold (245) and its 5
# failed ones, from a cold cache, added to it with --instance (the ids in /work/cache39/todo.txt, date order):
#   env build --tasks verified-9fa5614.parquet --repo-cache repos --cache-dir /work/cache39/envs --validate -b ns \
#     -j 2 --report /work/cache39/verified-report.json -i <each id of todo.txt>
# restarted at 9ad21ea, 602b6a2 and 964965f (each a fix of the day; stopped with SIGTERM, resumed by the same
# command); stopped for good after 150 of the last 206. astropy 8707 and 8872 built again into their own report
# after the fix of pip's fallback (their envs and locks from the undated fallback removed first), and merged:
#   env build ... -i astropy__astropy-8707 -i astropy__astropy-8872 --validate -b ns -j 1 --report /work/as39/report.json
#   python bench/verified_merge.py /work/cache39/verified-report.json /work/as39/report.json
# then `env gc --keep-report` and the disk measured again (EnvCache.disk_usage): this machine's cache only
# 2026-11-28 (fifth session): the same machine, its cache kept. The ids the report did not hold or held as failed
# (61), in /work/cache39/todo.txt, by the same command; restarted at 59bb1fe (pins replaced; EMLINK: the run had
# died on one testbed's OSError), at 87e2460 (the replacement written into the commands, not uv's --override:
# scikit-learn 1.3's version venv, its two clones and their records removed first, their entries set to failed)
# and for the last five (astropy, unfetchable) at e78687a; then `env gc --keep-report` and the disk measured again
