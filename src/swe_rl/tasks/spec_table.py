"""The spec table: every repository and version of swebench 4.1.0's ``MAP_REPO_VERSION_TO_SPECS_PY``.

Data only (see :mod:`swe_rl.tasks.specs` for what each field means). Facts are swebench's: Python
version, packages (conda's installed with pip), requirement and environment files, install and test
commands, pre-install edits of the repo, eval environment. Where swe-rl departs from them it says so
on the entry, for one of these reasons:

- **No host changes.** ``apt-get`` steps, ``locale-gen`` and downloads (matplotlib's qhull) never run:
  compilers and libraries come from the host, named in ``system`` and checked before a build.
- **Locales.** The official images generate en_US.UTF-8; Debian hosts always have C.UTF-8, which gives
  django's tests the same UTF-8 file system and I/O encoding.
- **Editable installs.** django 1.x/2.x and matplotlib 1.x/2.x install with ``setup.py install`` in the
  images; here every repo is installed editable, so the tests run the testbed's code (the patch).
- **Python 3.5** (django 1.4-1.10, matplotlib 1.x/2.x) is kept as the fact; 3.5 must be installed on the
  host (``pyenv install 3.5``), and the build says so. django 1.11-2.2 support 3.6 and use it here.
- **pydicom-data** (pydicom) is swe-rl's: the test files pydicom downloads at test time, offline.
- **astropy-helpers** (astropy 0.4-3.2): astropy's setup.py clones its ``astropy_helpers`` submodule from
  GitHub at build time, which the images' builds could and sandboxes' cannot; here the release of the same
  series from PyPI is installed first, and the build takes it.
- **httpbin** (requests up to 2.8) is swe-rl's too: those tests call the httpbin service at ``$HTTPBIN_URL``,
  which the images reached on the network (httpbin.org); here the same service runs on the sandbox's
  loopback, started by the eval before the tests.
- **Not encoded**, as they concern the images, not the env: matplotlib 1.x/2.x running its tests as a
  non-root user, pylint's CPU quota (``nano_cpus``), xarray's ``no_use_env``, and the eval's reinstall of
  the repo before the tests (envs are shared read-only; an editable install already runs the patched code,
  though a patch to C or Cython sources is not rebuilt).
- ``swe-bench/humaneval`` (not a repository) is left out. ``dbt-labs/dbt-core`` names no test command in
  the official specs: it gets the default, ``pytest -rA``.
"""

from __future__ import annotations

from swe_rl.tasks.repospec import RepoSpec
from swe_rl.tasks.spec_families.dev_tools import DEV_TOOLS_SPECS
from swe_rl.tasks.spec_families.scientific import SCIENTIFIC_SPECS
from swe_rl.tasks.spec_families.web import WEB_SPECS

# repo -> [(versions, spec)]: the first entry whose space-separated versions list the task's version applies.
SPECS: dict[str, list[tuple[str, RepoSpec]]] = dict(
    sorted({**SCIENTIFIC_SPECS, **WEB_SPECS, **DEV_TOOLS_SPECS}.items())
)
