"""What an instance's venv clone shares with its version's venv (envs/store/venv_clones.py): package files are hard links,
what installs rewrite in place is the clone's own. Checked on a venv tree laid out as the installers leave it."""

from __future__ import annotations

from pathlib import Path

from swe_rl.envs.store.venv_clones import clone_venv

SITE = "lib/python3.9/site-packages"
FILES = {
    "pyvenv.cfg": "home = /usr/bin\n",
    "bin/activate": "VIRTUAL_ENV={venv}\n",
    f"{SITE}/easy-install.pth": "/testbed\n",
    f"{SITE}/__editable___acme_finder.py": "MAPPING = {}\n",
    f"{SITE}/six.py": "# a module at the top\n",
    f"{SITE}/a64f60bb4641b67cb20c__mypyc.cpython-39-x86_64-linux-gnu.so": "\x7fELF mypyc runtime",
    f"{SITE}/numpy/core/_multiarray_umath.cpython-39-x86_64-linux-gnu.so": "\x7fELF",
    f"{SITE}/numpy/__init__.py": "",
    f"{SITE}/numpy-1.21.2.dist-info/RECORD": "numpy/__init__.py,,\n",
}
# a copy of its own (an install or swe-rl may rewrite it in place) or a link to the shared venv's inode
OWN = {"pyvenv.cfg", "activate", "easy-install.pth", "__editable___acme_finder.py", "six.py", "RECORD"}


def test_a_clone_links_package_files_and_the_extension_modules_at_the_top_and_owns_what_is_rewritten(
    tmp_path,
):
    base, dest = tmp_path / "shared", tmp_path / "clone"
    for rel, text in FILES.items():
        (base / rel).parent.mkdir(parents=True, exist_ok=True)
        (base / rel).write_text(text.replace("{venv}", str(base)))
    clone = clone_venv(base, dest)
    for rel in FILES:
        shared = (base / rel).stat().st_ino == (dest / rel).stat().st_ino
        assert shared == (Path(rel).name not in OWN), rel
        assert (rel in clone.linked) == shared, rel
    assert (dest / "bin/activate").read_text() == f"VIRTUAL_ENV={dest}\n"  # pointed at the clone
    assert clone.changed() == {}  # nothing written in place


def test_a_clones_conda_only_packages_are_its_shared_venvs(tmp_path):
    """The conda packages without a PyPI release were skipped when the version's venv was built; its clones'
    own records name none, and the validator must still hear of them (xarray 0.12's cdms2)."""
    import json

    from swe_rl.envs.build.venvbuild import skipped_conda_packages

    shared, clone = tmp_path / "venvs" / "aaaa", tmp_path / "venvs" / "bbbb"
    for venv, record in (
        (shared, {"skipped_conda_packages": ["cdms2", "hdf5"]}),
        (clone, {"skipped_conda_packages": [], "shared_env": "aaaa"}),
    ):
        venv.mkdir(parents=True)
        (venv / "swe-rl-env.json").write_text(json.dumps(record))
    assert skipped_conda_packages(clone) == ["cdms2", "hdf5"]
    assert skipped_conda_packages(tmp_path / "venvs" / "missing") == [] and skipped_conda_packages(None) == []
