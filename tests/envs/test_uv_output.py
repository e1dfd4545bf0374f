"""Reading uv's words: the releases that pin a dependency whose dated build fails, and what a resolution with
wheels only could not do without building."""

from __future__ import annotations

from swe_rl.envs.build.uv_output import DEPENDENCY_FAILED, NO_WHEEL, SDIST_DISABLED, pinned_by

# uv's own words, from building pvlib 0.6's `-e .[all]` as of 2020-10 on this machine (LLVM 14 on the host)
PVLIB_NUMBA = """\
   Building numba==0.51.2
error: Failed to build `llvmlite==0.34.0`
  cause: The build backend returned an error
         RuntimeError: Building llvmlite requires LLVM 10.0.x or 9.0.x, got '14.0.6'.
hint: `llvmlite` (v0.34.0) was included because `pvlib[all]` (v0.6.3+14.g0a14b27) depends on `numba` (v0.51.2) which depends on `llvmlite`
"""


def test_the_release_that_pins_a_failed_build_is_named() -> None:
    assert DEPENDENCY_FAILED.findall(PVLIB_NUMBA) == [("llvmlite", "0.34.0")]
    assert pinned_by(PVLIB_NUMBA, "llvmlite") == ["numba"]  # numba 0.51.2 pins llvmlite < 0.35


def test_a_direct_dependency_has_nothing_between_and_a_chain_comes_nearest_first() -> None:
    direct = "hint: `netcdf4` (v1.5.4) was included because `pvlib[all]` (v0.6.3) depends on `netcdf4`"
    assert pinned_by(direct, "netcdf4") == []
    chain = "hint: `b` (v1) was included because `root` (v0) depends on `a[x]` (v2) which depends on `c` (v3) which depends on `b`"
    assert pinned_by(chain, "b") == ["c", "a"]
    assert pinned_by(PVLIB_NUMBA, "numexpr") == []  # a package the hint is not about


# uv's own words, resolving with wheels only (`--only-binary :all:`, a dry run) on this machine: pvlib 0.5's
# packages as of Python 3.9's release, and astroid 2.5's own editable install
PANDAS_NUMPY = """\
  cause: Because pandas<=1.1.2 has no usable wheels and only the following versions of pandas are available:
         Because numpy>=1.15.4 has no usable wheels and pandas>=1.1.3 depends on numpy>=1.15.4, we can conclude that pandas>=1.1.3 cannot be used.
hint: Wheels are required for `pandas` because building from source is disabled for all packages (i.e., with `--no-build`)

hint: Wheels are required for `numpy` because building from source is disabled for all packages (i.e., with `--no-build`)
"""
ASTROID = """\
error: Failed to build `astroid @ file:///root/.cache/swe-rl/envs/testbeds/05bcb139158e3828`
  cause: Building source distributions for `astroid` is disabled
"""


def test_what_a_wheels_only_resolution_could_not_do_is_named() -> None:
    assert NO_WHEEL.findall(PANDAS_NUMPY) == ["pandas", "numpy"]
    assert SDIST_DISABLED.findall(ASTROID) == ["astroid"] and NO_WHEEL.findall(ASTROID) == []
