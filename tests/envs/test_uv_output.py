"""Reading uv's hint of how a dependency came in: the releases that pin a dependency whose dated build fails."""

from __future__ import annotations

from swe_rl.envs.uv_output import DEPENDENCY_FAILED, pinned_by

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
