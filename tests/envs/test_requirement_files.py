"""The repo files a recipe installs from are read at the commit it names (swebench's environment setup commit);
where that cannot be done they are read from the testbed (the base commit), and that is recorded, never silent.
Real git repositories."""

from __future__ import annotations

from pathlib import Path

from tests.envs.helpers import git

from swe_rl.envs.build.recipe import EnvRecipe
from swe_rl.envs.build.requirement_files import RecipeFiles


def _repo(tmp_path: Path) -> tuple[Path, str, str]:
    """A source with requirements at a setup commit (``six==1.16.0``) and at base (``six==1.10.0``)."""
    source = tmp_path / "source"
    source.mkdir()
    identity = ("-c", "user.name=t", "-c", "user.email=t@t")
    git(source, "init", "-q")
    (source / "requirements.txt").write_text("six==1.16.0\n")
    git(source, "add", "-A")
    git(source, *identity, "commit", "-qm", "setup")
    setup = git(source, "rev-parse", "HEAD")
    (source / "requirements.txt").write_text("six==1.10.0\n")
    git(source, *identity, "commit", "-qam", "base")
    return source, setup, git(source, "rev-parse", "HEAD")


def test_requirements_come_from_the_setup_commit(tmp_path):
    source, setup, _ = _repo(tmp_path)
    testbed = tmp_path / "testbed"
    testbed.mkdir()
    (testbed / "requirements.txt").write_text("six==1.10.0\n")  # the base commit's copy
    files = RecipeFiles(
        EnvRecipe(requirements=["requirements.txt"], requirements_at=setup), testbed, str(source)
    )
    assert files.requirements() == ["six==1.16.0"]
    assert files.read_at_base == {}


def test_a_setup_commit_missing_from_the_source_is_recorded_as_read_at_base(tmp_path):
    source, _, _ = _repo(tmp_path)
    testbed = tmp_path / "testbed"
    testbed.mkdir()
    (testbed / "requirements.txt").write_text("six==1.10.0\n")
    missing = "0123456789abcdef0123456789abcdef01234567"
    files = RecipeFiles(
        EnvRecipe(requirements=["requirements.txt"], requirements_at=missing), testbed, str(source)
    )
    assert files.requirements() == ["six==1.10.0"]  # the fallback: the testbed's copy
    assert files.read_at_base == {"requirements.txt": "0123456789ab is not in the repo's source"}


def test_a_file_the_setup_commit_lacks_is_recorded_as_read_at_base(tmp_path):
    source, setup, _ = _repo(tmp_path)
    testbed = tmp_path / "testbed"
    testbed.mkdir()
    (testbed / "environment.yml").write_text("dependencies:\n  - pip:\n    - six==1.10.0\n")
    recipe = EnvRecipe(env_yml=["environment.yml"], requirements_at=setup)
    files = RecipeFiles(recipe, testbed, str(source))
    assert files.conda_packages() == ["six==1.10.0"]
    assert files.read_at_base == {"environment.yml": f"no environment.yml at {setup[:12]}"}
