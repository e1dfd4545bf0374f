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
- **Not encoded**, as they concern the images, not the env: matplotlib 1.x/2.x running its tests as a
  non-root user, pylint's CPU quota (``nano_cpus``), xarray's ``no_use_env``, and the eval's reinstall of
  the repo before the tests (envs are shared read-only; an editable install already runs the patched code,
  though a patch to C or Cython sources is not rebuilt).
- ``swe-bench/humaneval`` (not a repository) is left out. ``dbt-labs/dbt-core`` names no test command in
  the official specs: it gets the default, ``pytest -rA``.
"""

from __future__ import annotations

import shlex
from typing import Any

from swe_rl.tasks.repospec import RepoSpec

_UTF8 = (
    "export LANG=C.UTF-8",
    "export LC_ALL=C.UTF-8",
    "export PYTHONIOENCODING=utf8",
    "export LANGUAGE=en_US:en",
)
_UTF8_3 = ("export LANG=C.UTF-8", "export LANGUAGE=en_US:en", "export LC_ALL=C.UTF-8")
_DJANGO_TEST = "./tests/runtests.py --verbosity 2 --settings=test_sqlite --parallel 1"


def _pins(text: str) -> tuple[str, ...]:
    """Requirements written as one space-separated string (a pin list per line would double the table)."""
    return tuple(text.split())


def _spec(defaults: dict[str, Any], **fields: Any) -> RepoSpec:
    return RepoSpec.model_validate({**defaults, **fields})


_DJANGO = {
    "test_cmd": _DJANGO_TEST,
    "directives": "django_modules",
    "requirements": ("tests/requirements/py3.txt",),
}

_ASTROPY_PINS = _pins(
    "attrs==23.1.0 exceptiongroup==1.1.3 execnet==2.0.2 hypothesis==6.82.6 iniconfig==2.0.0 "
    "numpy==1.25.2 packaging==23.1 pluggy==1.3.0 psutil==5.9.5 pyerfa==2.0.0.3 "
    "pytest-arraydiff==0.5.0 pytest-astropy-header==0.2.2 pytest-astropy==0.10.0 pytest-cov==4.1.0 "
    "pytest-doctestplus==1.0.0 pytest-filter-subpackage==0.1.2 pytest-mock==3.11.1 "
    "pytest-openfiles==0.5.0 pytest-remotedata==0.4.0 pytest-xdist==3.3.1 pytest==7.4.0 PyYAML==6.0.1 "
    "setuptools==68.0.0 sortedcontainers==2.4.0 tomli==2.0.1"
)
_ASTROPY_OLD_PINS = _pins(
    "setuptools==38.2.4 attrs==17.3.0 exceptiongroup==0.0.0a0 execnet==1.5.0 hypothesis==3.44.2 "
    "cython==0.27.3 jinja2==2.10 MarkupSafe==1.0 numpy==1.16.0 packaging==16.8 pluggy==0.6.0 "
    "psutil==5.4.2 pyerfa==1.7.0 pytest-arraydiff==0.1 pytest-astropy-header==0.1 "
    "pytest-astropy==0.2.1 pytest-cov==2.5.1 pytest-doctestplus==0.1.2 pytest-filter-subpackage==0.1 "
    "pytest-forked==0.2 pytest-mock==1.6.3 pytest-openfiles==0.2.0 pytest-remotedata==0.2.0 "
    "pytest-xdist==1.20.1 pytest==3.3.1 PyYAML==3.12 sortedcontainers==1.5.9 tomli==0.2.0"
)
_ASTROPY_SETUPTOOLS = (
    'sed -i \'s/requires = \\["setuptools",/requires = \\["setuptools==68.0.0",/\' pyproject.toml',
)
_ASTROPY = {"install": "python -m pip install -e .[test] --verbose", "system": ("gcc",)}

_MPL_PINS = _pins(
    "contourpy==1.1.0 cycler==0.11.0 fonttools==4.42.1 ghostscript kiwisolver==1.4.5 numpy==1.25.2 "
    "packaging==23.1 pillow==10.0.0 pikepdf pyparsing==3.0.9 python-dateutil==2.8.2 six==1.16.0 "
    "setuptools==68.1.2 setuptools-scm==7.1.0 typing-extensions==4.7.1"
)
_MPL_REQS = ("requirements/dev/dev-requirements.txt", "requirements/testing/travis_all.txt")
_MPL_SYSTEM = ("gcc", "g++", "pkg-config")

_SEABORN_PINS = _pins(
    "contourpy==1.1.0 cycler==0.11.0 fonttools==4.42.1 importlib-resources==6.0.1 kiwisolver==1.4.5 "
    "matplotlib==3.7.2 numpy==1.25.2 packaging==23.1 pyparsing==3.0.9 pytest python-dateutil==2.8.2 "
    "pytz==2023.3.post1 scipy==1.11.2 six==1.16.0 tzdata==2023.1 zipp==3.16.2 pillow==10.0.0"
)

_FLASK_20 = _pins(
    "setuptools==70.0.0 Werkzeug==2.3.7 Jinja2==3.0.1 itsdangerous==2.1.2 click==8.0.1 MarkupSafe==2.1.3"
)
_FLASK_21 = _pins(
    "setuptools==70.0.0 click==8.1.3 itsdangerous==2.1.2 Jinja2==3.1.2 MarkupSafe==2.1.1 Werkzeug==2.3.7"
)

_PYDICOM = ("numpy", "pytest", "pydicom-data")  # + pydicom-data (swe-rl's)

_PYTEST_44 = _pins(
    "atomicwrites==1.4.1 attrs==23.1.0 more-itertools==10.1.0 pluggy==0.13.1 py==1.11.0 "
    "setuptools==68.0.0 six==1.16.0"
)
_PYTEST_45 = _pins(
    "atomicwrites==1.4.1 attrs==23.1.0 more-itertools==10.1.0 pluggy==0.11.0 py==1.11.0 "
    "setuptools==68.0.0 six==1.16.0 wcwidth==0.2.6"
)
_PYTEST_46 = _pins(
    "atomicwrites==1.4.1 attrs==23.1.0 more-itertools==10.1.0 packaging==23.1 pluggy==0.13.1 "
    "py==1.11.0 six==1.16.0 wcwidth==0.2.6"
)
_PYTEST_50 = _pins(
    "atomicwrites==1.4.1 attrs==23.1.0 more-itertools==10.1.0 packaging==23.1 pluggy==0.13.1 "
    "py==1.11.0 wcwidth==0.2.6"
)
_PYTEST_53 = _pins(
    "attrs==23.1.0 more-itertools==10.1.0 packaging==23.1 pluggy==0.13.1 py==1.11.0 wcwidth==0.2.6"
)
_PYTEST_54 = _pins("py==1.11.0 packaging==23.1 attrs==23.1.0 more-itertools==10.1.0 pluggy==0.13.1")
_PYTEST_60 = _pins(
    "attrs==23.1.0 iniconfig==2.0.0 more-itertools==10.1.0 packaging==23.1 pluggy==0.13.1 py==1.11.0 "
    "toml==0.10.2"
)
_PYTEST_62 = _pins("attrs==23.1.0 iniconfig==2.0.0 packaging==23.1 pluggy==0.13.1 py==1.11.0 toml==0.10.2")
_PYTEST_70 = _pins("attrs==23.1.0 iniconfig==2.0.0 packaging==23.1 pluggy==0.13.1 py==1.11.0")
_PYTEST_71 = _pins("attrs==23.1.0 iniconfig==2.0.0 packaging==23.1 pluggy==0.13.1 py==1.11.0 tomli==2.0.1")
_PYTEST_74 = _pins("iniconfig==2.0.0 packaging==23.1 pluggy==1.3.0 exceptiongroup==1.1.3 tomli==2.0.1")

_SKLEARN_INSTALL = "python -m pip install -v --no-use-pep517 --no-build-isolation -e ."

_SPHINX_TOX = ("tox==4.16.0", "tox-current-env==0.0.11", "Jinja2==3.0.3")
_SPHINX_TEST = "tox --current-env -epy39 -v --"
_SPHINX_RA = "sed -i 's/pytest/pytest -rA/' tox.ini"
_SPHINX_PINS_3 = (
    _SPHINX_RA,
    "sed -i 's/Jinja2>=2.3/Jinja2<3.0/' setup.py",
    "sed -i 's/sphinxcontrib-applehelp/sphinxcontrib-applehelp<=1.0.7/' setup.py",
    "sed -i 's/sphinxcontrib-devhelp/sphinxcontrib-devhelp<=1.0.5/' setup.py",
    "sed -i 's/sphinxcontrib-qthelp/sphinxcontrib-qthelp<=1.0.6/' setup.py",
    "sed -i 's/alabaster>=0.7,<0.8/alabaster>=0.7,<0.7.12/' setup.py",
    "sed -i \"s/'packaging',/'packaging', 'markupsafe<=2.0.1',/\" setup.py",
)
# The caps on htmlhelp and serializinghtml: 3.0-4.0 name them bare, 4.2-4.4 with a lower bound (a bare
# cap there would make 'sphinxcontrib-htmlhelp<=2.0.4>=2.0.0'), 4.1 either way.
_SPHINX_HTML_BARE = (
    "sed -i 's/sphinxcontrib-htmlhelp/sphinxcontrib-htmlhelp<=2.0.4/' setup.py",
    "sed -i 's/sphinxcontrib-serializinghtml/sphinxcontrib-serializinghtml<=1.1.9/' setup.py",
)
_SPHINX_HTML_BOUNDED = (
    "sed -i 's/sphinxcontrib-htmlhelp>=2.0.0/sphinxcontrib-htmlhelp>=2.0.0,<=2.0.4/' setup.py",
    "sed -i 's/sphinxcontrib-serializinghtml>=1.1.5/sphinxcontrib-serializinghtml>=1.1.5,<=1.1.9/' setup.py",
)
_SPHINX_HTML_EITHER = (
    "grep -q 'sphinxcontrib-htmlhelp>=2.0.0' setup.py && "
    "sed -i 's/sphinxcontrib-htmlhelp>=2.0.0/sphinxcontrib-htmlhelp>=2.0.0,<=2.0.4/' setup.py || "
    "sed -i 's/sphinxcontrib-htmlhelp/sphinxcontrib-htmlhelp<=2.0.4/' setup.py",
    "grep -q 'sphinxcontrib-serializinghtml>=1.1.5' setup.py && "
    "sed -i 's/sphinxcontrib-serializinghtml>=1.1.5/sphinxcontrib-serializinghtml>=1.1.5,<=1.1.9/' setup.py || "
    "sed -i 's/sphinxcontrib-serializinghtml/sphinxcontrib-serializinghtml<=1.1.9/' setup.py",
)
# swe-rl's: tox-current-env links .tox/<env>/bin/python to the running interpreter, which works for the
# images' conda python but not for a venv's (a link to a venv's python starts outside the venv). A script
# there instead, made before tox runs (tox keeps what exists), runs the python first on tox's PATH: the venv's.
# tox puts .tox/<env>/bin first on PATH: the script runs the first python on PATH outside any .tox directory
# (a plain `exec python` found itself and looped forever)
_TOX_SHIM = (
    "#!/bin/sh\n"
    'p=; IFS=:; for e in $PATH; do case "$e" in */.tox/*) ;; *) p="$p${p:+:}$e";; esac; done\n'
    'PATH=$p exec python "$@"\n'
)
_TOX_VENV_PYTHON = (
    "for e in py39 py310; do mkdir -p .tox/$e/bin; for n in python python3 python3.9 python3.10; do "
    f"printf '%s' {shlex.quote(_TOX_SHIM)} > .tox/$e/bin/$n; chmod +x .tox/$e/bin/$n; done; done"
)
_SPHINX = {"install": "python -m pip install -e .[test]", "packages": _SPHINX_TOX, "test_cmd": _SPHINX_TEST}

_SYMPY_TEST = "PYTHONWARNINGS='ignore::UserWarning,ignore::SyntaxWarning' bin/test -C --verbose"

_XARRAY_PINS = _pins(
    "numpy==1.23.0 packaging==23.1 pandas==1.5.3 pytest==7.4.0 python-dateutil==2.8.2 pytz==2023.3 "
    "six==1.16.0 scipy==1.11.1 setuptools==68.0.0 dask==2022.8.1"
)

# repo -> [(versions, spec)]: the first entry whose space-separated versions list the task's version applies.
SPECS: dict[str, list[tuple[str, RepoSpec]]] = {
    "astropy/astropy": [
        ("3.0 3.1 3.2", _spec(_ASTROPY, python="3.9", packages=_ASTROPY_PINS)),
        (
            "4.1 4.2 4.3 5.0 5.1 5.2",
            _spec(_ASTROPY, python="3.9", packages=_ASTROPY_PINS, pre_install=_ASTROPY_SETUPTOOLS),
        ),
        (
            "v5.3",
            _spec(_ASTROPY, python="3.10", packages=_ASTROPY_PINS, pre_install=_ASTROPY_SETUPTOOLS),
        ),
        (
            "0.1 0.2 0.3 0.4 1.1 1.2 1.3",
            _spec(
                _ASTROPY,
                python="3.6",
                packages=_ASTROPY_OLD_PINS,
                test_cmd="pytest -rA -vv -o console_output_style=classic --tb=no",
            ),
        ),
    ],
    "dbt-labs/dbt-core": [
        (
            "0.13 0.14 0.15 0.16 0.17 0.18 0.19 0.20 0.21 1.0 1.1 1.2 1.3 1.4 1.5 1.6 1.7",
            RepoSpec(python="3.9", requirements=("dev-requirements.txt", "dev_requirements.txt")),
        ),
    ],
    "django/django": [
        # 3.5 as the fact; setup.py install made editable (module docstring)
        ("1.4 1.5 1.6", RepoSpec(python="3.5", test_cmd=_DJANGO_TEST, directives="django_modules")),
        ("1.7 1.8 1.10", _spec(_DJANGO, python="3.5", packages=("setuptools",), eval_commands=_UTF8)),
        (
            "1.9",
            RepoSpec(
                python="3.5",
                packages=("setuptools",),
                eval_commands=_UTF8,
                requirements=("tests/requirements/py3.txt",),
                test_cmd="./tests/runtests.py --verbosity 2",
                directives="django_modules",
            ),
        ),
        # 1.11-2.2: 3.5 in the images; 3.6, which these releases support, here
        ("1.11 2.0 2.1 2.2", _spec(_DJANGO, python="3.6", packages=("setuptools",), eval_commands=_UTF8)),
        ("3.0 3.1 3.2", _spec(_DJANGO, python="3.6", eval_commands=_UTF8_3)),
        ("4.0", _spec(_DJANGO, python="3.8")),
        ("4.1 4.2", _spec(_DJANGO, python="3.9")),
        ("5.0 5.1 5.2", _spec(_DJANGO, python="3.11")),
    ],
    "matplotlib/matplotlib": [
        (
            "3.5 3.6 3.7",
            RepoSpec(python="3.11", env_yml=("environment.yml",), packages=_MPL_PINS, system=_MPL_SYSTEM),
        ),
        (
            "3.8 3.9",
            RepoSpec(
                python="3.11",
                env_yml=("environment.yml",),
                packages=_MPL_PINS,
                install='python -m pip install --no-build-isolation -e ".[dev]"',
                system=_MPL_SYSTEM,
            ),
        ),
        (
            "3.1 3.2 3.3 3.4",
            RepoSpec(
                python="3.8", requirements=_MPL_REQS, packages=("pytest", "ipython"), system=_MPL_SYSTEM
            ),
        ),
        ("3.0", RepoSpec(python="3.7", requirements=_MPL_REQS, packages=("pytest",), system=_MPL_SYSTEM)),
        (
            "2.0 2.1 2.2 1.0 1.1 1.2 1.3 1.4 1.5",
            RepoSpec(python="3.5", packages=("pytest",), system=_MPL_SYSTEM),
        ),
    ],
    "marshmallow-code/marshmallow": [
        (
            "2.18 2.19 2.20 3.0 3.1 3.10 3.11 3.12 3.13 3.15 3.16 3.19 3.2 3.4 3.8 3.9",
            RepoSpec(python="3.9", install="python -m pip install -e '.[dev]'"),
        ),
    ],
    "mwaskom/seaborn": [
        (
            "0.11",
            RepoSpec(
                python="3.9", packages=(*_SEABORN_PINS, "pandas==1.3.5"), test_cmd="pytest --no-header -rA"
            ),
        ),
        (
            "0.12 0.13 0.14",
            RepoSpec(
                python="3.9",
                packages=(*_SEABORN_PINS, "pandas==2.0.0"),
                install="python -m pip install -e .[dev]",
                test_cmd="pytest --no-header -rA",
            ),
        ),
    ],
    "pallets/flask": [
        ("2.0", RepoSpec(python="3.9", packages=_FLASK_20, requirements=("requirements/dev.txt",))),
        ("2.1", RepoSpec(python="3.10", packages=_FLASK_21, requirements=("requirements/dev.txt",))),
        (
            "2.2 2.3 3.0 3.1",
            RepoSpec(python="3.11", packages=_FLASK_21, requirements=("requirements/dev.txt",)),
        ),
    ],
    "psf/requests": [
        (
            "0.7 0.8 0.9 0.11 0.13 0.14 1.1 1.2 2.0 2.2 2.3 2.4 2.5 2.7 2.8 2.9 2.10 2.11 2.12 2.17 2.18 2.19 2.22 "
            "2.25 2.26 2.27 2.31 3.0",
            RepoSpec(python="3.9", packages=("pytest",), install="python -m pip install ."),
        ),
    ],
    "pvlib/pvlib-python": [
        (
            "0.1 0.2 0.3 0.4 0.5 0.6 0.7 0.8 0.9",
            RepoSpec(
                python="3.9",
                packages=("pandas", "scipy", "jupyter", "ipython", "matplotlib", "pytest", "flake8"),
                install="python -m pip install -e .[all]",
            ),
        ),
    ],
    "pydata/xarray": [
        (
            "0.12 0.18 0.19 0.20 2022.03 2022.06 2022.09 2023.07 2024.05",
            RepoSpec(
                python="3.10",
                env_yml=("ci/requirements/environment.yml", "environment.yml"),
                packages=_XARRAY_PINS,
                # cfgrib (in its environment.yml) loads the ecCodes C library, which conda gave the official
                # images; without it `import cfgrib` raises RuntimeError and xarray's tests fail to collect
                system=("lib:eccodes",),
            ),
        ),
    ],
    "pydicom/pydicom": [
        ("1.0 1.1 1.2 1.3", RepoSpec(python="3.6", packages=_PYDICOM, undated=("pydicom-data",))),
        ("1.4 2.0", RepoSpec(python="3.8", packages=_PYDICOM, undated=("pydicom-data",))),
        ("2.1 2.2", RepoSpec(python="3.9", packages=_PYDICOM, undated=("pydicom-data",))),
        ("2.3", RepoSpec(python="3.10", packages=_PYDICOM, undated=("pydicom-data",))),
        ("2.4 3.0", RepoSpec(python="3.11", packages=_PYDICOM, undated=("pydicom-data",))),
    ],
    "pylint-dev/astroid": [
        (
            "2.10 2.12 2.13 2.14 2.15 2.16 2.5 2.6 2.7 2.8 2.9 3.0",
            RepoSpec(python="3.9", packages=("pytest",)),
        ),
    ],
    "pylint-dev/pylint": [
        (
            "2.10 2.11 2.13 2.16 2.9 2.14 2.15 2.17",
            RepoSpec(python="3.9", requirements=("requirements_test.txt",)),
        ),
        (
            "2.8",
            RepoSpec(python="3.9", requirements=("requirements_test.txt",), packages=("pyenchant==3.2",)),
        ),
        (
            "3.0 3.1 3.2 3.3 4.0",
            RepoSpec(
                python="3.9",
                requirements=("requirements_test.txt",),
                packages=("astroid==3.0.0a6", "setuptools"),
            ),
        ),
    ],
    "pytest-dev/pytest": [
        ("4.4", RepoSpec(python="3.9", packages=_PYTEST_44)),
        ("4.5", RepoSpec(python="3.9", packages=_PYTEST_45)),
        ("4.6", RepoSpec(python="3.9", packages=_PYTEST_46)),
        ("5.0 5.1 5.2", RepoSpec(python="3.9", packages=_PYTEST_50)),
        ("5.3", RepoSpec(python="3.9", packages=_PYTEST_53)),
        ("5.4", RepoSpec(python="3.9", packages=_PYTEST_54)),
        ("6.0", RepoSpec(python="3.9", packages=_PYTEST_60)),
        ("6.2", RepoSpec(python="3.9", packages=_PYTEST_62)),
        ("6.3", RepoSpec(python="3.9", packages=_PYTEST_62, pre_install=("sed -i 's/>=>=/>=/' setup.cfg",))),
        ("7.0", RepoSpec(python="3.9", packages=_PYTEST_70)),
        ("7.1 7.2", RepoSpec(python="3.9", packages=_PYTEST_71)),
        ("7.4 8.0 8.1 8.2 8.3 8.4", RepoSpec(python="3.9", packages=_PYTEST_74)),
    ],
    "pyvista/pyvista": [
        ("0.20 0.21 0.22 0.23", RepoSpec(python="3.9", packages=("pytest",))),
        (
            "0.24 0.25 0.26 0.27 0.28 0.29 0.30 0.31 0.32 0.33 0.34 0.35 0.36 0.37 0.38 0.39 0.40 0.41 0.42 0.43",
            RepoSpec(
                python="3.9", packages=("pytest",), requirements=("requirements_test.txt", "requirements.txt")
            ),
        ),
    ],
    "scikit-learn/scikit-learn": [
        (
            "0.20 0.21 0.22",
            RepoSpec(
                python="3.6",
                packages=(
                    "numpy==1.19.2",
                    "scipy==1.5.2",
                    "cython",
                    "pytest",
                    "pandas",
                    "matplotlib",
                    "setuptools",
                ),
                install=_SKLEARN_INSTALL,
                system=("gcc", "g++"),
            ),
        ),
        (
            "1.3 1.4 1.5 1.6",
            RepoSpec(
                python="3.9",
                packages=(
                    "numpy==1.19.2",
                    "scipy==1.5.2",
                    "cython==3.0.10",
                    "pytest",
                    "pandas<2.0.0",
                    "matplotlib<3.9.0",
                    "setuptools",
                    "joblib",
                    "threadpoolctl",
                ),
                install=_SKLEARN_INSTALL,
                system=("gcc", "g++"),
            ),
        ),
    ],
    "sphinx-doc/sphinx": [
        (
            "1.5 1.6 1.7 1.8 2.0 2.1 2.2 2.3 2.4 4.5 5.0 5.1 5.2 5.3 6.0 6.2 7.0 7.1",
            _spec(_SPHINX, python="3.9", pre_install=(_SPHINX_RA, _TOX_VENV_PYTHON)),
        ),
        (
            "3.0 3.1 3.2 3.3 3.4 3.5 4.0",
            _spec(_SPHINX, python="3.9", pre_install=(*_SPHINX_PINS_3, *_SPHINX_HTML_BARE, _TOX_VENV_PYTHON)),
        ),
        (
            "4.1",
            _spec(
                _SPHINX, python="3.9", pre_install=(*_SPHINX_PINS_3, *_SPHINX_HTML_EITHER, _TOX_VENV_PYTHON)
            ),
        ),
        (
            "4.2 4.3 4.4",
            _spec(
                _SPHINX, python="3.9", pre_install=(*_SPHINX_PINS_3, *_SPHINX_HTML_BOUNDED, _TOX_VENV_PYTHON)
            ),
        ),
        # + graphviz (apt) in the images: the host's `dot`, when present, serves the tests that need it
        ("7.2 7.3 7.4", _spec(_SPHINX, python="3.9", pre_install=(_SPHINX_RA, _TOX_VENV_PYTHON))),
        ("8.0 8.1", _spec(_SPHINX, python="3.10", pre_install=(_SPHINX_RA, _TOX_VENV_PYTHON))),
    ],
    "sqlfluff/sqlfluff": [
        (
            "0.10 0.11 0.12 0.13 0.4 0.5 0.6 0.8 0.9 1.0 1.1 1.2 1.3 1.4 2.0 2.1 2.2",
            RepoSpec(python="3.9", requirements=("requirements_dev.txt",)),
        ),
    ],
    "sympy/sympy": [
        (
            "0.7 1.0 1.1 1.10 1.11 1.12 1.2 1.4 1.5 1.6 1.7 1.8 1.9",
            RepoSpec(
                python="3.9",
                packages=("mpmath==1.3.0", "flake8", "flake8-comprehensions"),
                test_cmd=_SYMPY_TEST,
            ),
        ),
        (
            "1.13 1.14",
            RepoSpec(
                python="3.9",
                packages=("mpmath==1.3.0",),
                requirements=("requirements-dev.txt", "requirements-test.txt"),
                test_cmd=_SYMPY_TEST,
            ),
        ),
    ],
}
