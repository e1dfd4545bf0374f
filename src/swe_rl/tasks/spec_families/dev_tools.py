"""The spec table's developer-tools family: pytest, pylint, astroid, sphinx, sqlfluff and dbt-core (see
:mod:`swe_rl.tasks.spec_table`)."""

from __future__ import annotations

import shlex

from swe_rl.tasks.repospec import RepoSpec
from swe_rl.tasks.spec_families.shorthand import pins, spec

_PYTEST_44 = pins(
    "atomicwrites==1.4.1 attrs==23.1.0 more-itertools==10.1.0 pluggy==0.13.1 py==1.11.0 "
    "setuptools==68.0.0 six==1.16.0"
)
_PYTEST_45 = pins(
    "atomicwrites==1.4.1 attrs==23.1.0 more-itertools==10.1.0 pluggy==0.11.0 py==1.11.0 "
    "setuptools==68.0.0 six==1.16.0 wcwidth==0.2.6"
)
_PYTEST_46 = pins(
    "atomicwrites==1.4.1 attrs==23.1.0 more-itertools==10.1.0 packaging==23.1 pluggy==0.13.1 "
    "py==1.11.0 six==1.16.0 wcwidth==0.2.6"
)
_PYTEST_50 = pins(
    "atomicwrites==1.4.1 attrs==23.1.0 more-itertools==10.1.0 packaging==23.1 pluggy==0.13.1 "
    "py==1.11.0 wcwidth==0.2.6"
)
_PYTEST_53 = pins(
    "attrs==23.1.0 more-itertools==10.1.0 packaging==23.1 pluggy==0.13.1 py==1.11.0 wcwidth==0.2.6"
)
_PYTEST_54 = pins("py==1.11.0 packaging==23.1 attrs==23.1.0 more-itertools==10.1.0 pluggy==0.13.1")
_PYTEST_60 = pins(
    "attrs==23.1.0 iniconfig==2.0.0 more-itertools==10.1.0 packaging==23.1 pluggy==0.13.1 py==1.11.0 "
    "toml==0.10.2"
)
_PYTEST_62 = pins("attrs==23.1.0 iniconfig==2.0.0 packaging==23.1 pluggy==0.13.1 py==1.11.0 toml==0.10.2")
_PYTEST_70 = pins("attrs==23.1.0 iniconfig==2.0.0 packaging==23.1 pluggy==0.13.1 py==1.11.0")
_PYTEST_71 = pins("attrs==23.1.0 iniconfig==2.0.0 packaging==23.1 pluggy==0.13.1 py==1.11.0 tomli==2.0.1")
_PYTEST_74 = pins("iniconfig==2.0.0 packaging==23.1 pluggy==1.3.0 exceptiongroup==1.1.3 tomli==2.0.1")

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


DEV_TOOLS_SPECS: dict[str, list[tuple[str, RepoSpec]]] = {
    "dbt-labs/dbt-core": [
        (
            "0.13 0.14 0.15 0.16 0.17 0.18 0.19 0.20 0.21 1.0 1.1 1.2 1.3 1.4 1.5 1.6 1.7",
            RepoSpec(python="3.9", requirements=("dev-requirements.txt", "dev_requirements.txt")),
        ),
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
    "sphinx-doc/sphinx": [
        (
            "1.5 1.6 1.7 1.8 2.0 2.1 2.2 2.3 2.4 4.5 5.0 5.1 5.2 5.3 6.0 6.2 7.0 7.1",
            spec(_SPHINX, python="3.9", pre_install=(_SPHINX_RA, _TOX_VENV_PYTHON)),
        ),
        (
            "3.0 3.1 3.2 3.3 3.4 3.5 4.0",
            spec(_SPHINX, python="3.9", pre_install=(*_SPHINX_PINS_3, *_SPHINX_HTML_BARE, _TOX_VENV_PYTHON)),
        ),
        (
            "4.1",
            spec(
                _SPHINX, python="3.9", pre_install=(*_SPHINX_PINS_3, *_SPHINX_HTML_EITHER, _TOX_VENV_PYTHON)
            ),
        ),
        (
            "4.2 4.3 4.4",
            spec(
                _SPHINX, python="3.9", pre_install=(*_SPHINX_PINS_3, *_SPHINX_HTML_BOUNDED, _TOX_VENV_PYTHON)
            ),
        ),
        # + graphviz (apt) in the images: sphinx.ext.graphviz and inheritance_diagram's tests run `dot`
        (
            "7.2 7.3 7.4",
            spec(_SPHINX, python="3.9", pre_install=(_SPHINX_RA, _TOX_VENV_PYTHON), system=("dot",)),
        ),
        (
            "8.0 8.1",
            spec(_SPHINX, python="3.10", pre_install=(_SPHINX_RA, _TOX_VENV_PYTHON), system=("dot",)),
        ),
    ],
    "sqlfluff/sqlfluff": [
        (
            "0.10 0.11 0.12 0.13 0.4 0.5 0.6 0.8 0.9 1.0 1.1 1.2 1.3 1.4 2.0 2.1 2.2",
            RepoSpec(python="3.9", requirements=("requirements_dev.txt",)),
        ),
    ],
}
