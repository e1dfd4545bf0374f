"""The spec table's scientific family: astropy, matplotlib, seaborn, xarray, pvlib, pydicom, pyvista,
scikit-learn and sympy (see :mod:`swe_rl.tasks.spec_table`)."""

from __future__ import annotations

from swe_rl.tasks.repospec import RepoSpec
from swe_rl.tasks.spec_families.shorthand import pins, spec

_ASTROPY_PINS = pins(
    "attrs==23.1.0 exceptiongroup==1.1.3 execnet==2.0.2 hypothesis==6.82.6 iniconfig==2.0.0 "
    "numpy==1.25.2 packaging==23.1 pluggy==1.3.0 psutil==5.9.5 pyerfa==2.0.0.3 "
    "pytest-arraydiff==0.5.0 pytest-astropy-header==0.2.2 pytest-astropy==0.10.0 pytest-cov==4.1.0 "
    "pytest-doctestplus==1.0.0 pytest-filter-subpackage==0.1.2 pytest-mock==3.11.1 "
    "pytest-openfiles==0.5.0 pytest-remotedata==0.4.0 pytest-xdist==3.3.1 pytest==7.4.0 PyYAML==6.0.1 "
    "setuptools==68.0.0 sortedcontainers==2.4.0 tomli==2.0.1"
)
_ASTROPY_OLD_PINS = pins(
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

_MPL_PINS = pins(
    "contourpy==1.1.0 cycler==0.11.0 fonttools==4.42.1 ghostscript kiwisolver==1.4.5 numpy==1.25.2 "
    "packaging==23.1 pillow==10.0.0 pikepdf pyparsing==3.0.9 python-dateutil==2.8.2 six==1.16.0 "
    "setuptools==68.1.2 setuptools-scm==7.1.0 typing-extensions==4.7.1"
)
_MPL_REQS = ("requirements/dev/dev-requirements.txt", "requirements/testing/travis_all.txt")
# FreeType from the host: matplotlib's build downloads it otherwise (3.3 on, unless mplsetup.cfg says
# system_freetype; 3.0-3.2 link the host's always); qhull from the host from 3.4, whose build downloads it
# unless told system_qhull (3.0-3.3 compile the copy in extern/). The installer tells the build (MPLSETUPCFG).
# Ghostscript's gs for the tests: without it every pdf image comparison is skipped (the official images had it
# from conda's ghostscript), and FAIL_TO_PASS lists hold such tests (24026's test_stackplot[pdf])
_MPL_OLD_SYSTEM = ("gcc", "g++", "pkg-config", "pc:freetype2", "gs")
# FreeType 2.6.1 from a mirror of freetype/freetype where the repo cache has one: its autogen.sh needs autotools
# (swe_rl.envs.build.build_settings.local_freetype)
_MPL_SYSTEM = (*_MPL_OLD_SYSTEM, "pc:qhull_r", "autoconf", "automake", "libtoolize", "make")

_SEABORN_PINS = pins(
    "contourpy==1.1.0 cycler==0.11.0 fonttools==4.42.1 importlib-resources==6.0.1 kiwisolver==1.4.5 "
    "matplotlib==3.7.2 numpy==1.25.2 packaging==23.1 pyparsing==3.0.9 pytest python-dateutil==2.8.2 "
    "pytz==2023.3.post1 scipy==1.11.2 six==1.16.0 tzdata==2023.1 zipp==3.16.2 pillow==10.0.0"
)

_PYDICOM = ("numpy", "pytest", "pydicom-data")  # + pydicom-data (swe-rl's)

_SKLEARN_INSTALL = "python -m pip install -v --no-use-pep517 --no-build-isolation -e ."

_SYMPY_TEST = "PYTHONWARNINGS='ignore::UserWarning,ignore::SyntaxWarning' bin/test -C --verbose"

_XARRAY_PINS = pins(
    "numpy==1.23.0 packaging==23.1 pandas==1.5.3 pytest==7.4.0 python-dateutil==2.8.2 pytz==2023.3 "
    "six==1.16.0 scipy==1.11.1 setuptools==68.0.0 dask==2022.8.1"
)


SCIENTIFIC_SPECS: dict[str, list[tuple[str, RepoSpec]]] = {
    "astropy/astropy": [
        # the helpers release is the one the astropy_helpers submodule of the version's environment setup
        # commit points at: 3.1's rows were made on the way to 4.0, and their setup commit (2e89d07) has
        # astropy-helpers v3.2.2 (3.1.1 has no ``setup_helpers.setup``, which their setup.py imports)
        *(
            (version, spec(_ASTROPY, python="3.9", packages=(*_ASTROPY_PINS, f"astropy-helpers=={helpers}")))
            for version, helpers in (("3.0", "3.0.2"), ("3.1", "3.2.2"), ("3.2", "3.2.2"))
        ),
        (
            "4.1 4.2 4.3 5.0 5.1 5.2",
            spec(_ASTROPY, python="3.9", packages=_ASTROPY_PINS, pre_install=_ASTROPY_SETUPTOOLS),
        ),
        (
            "v5.3",
            spec(_ASTROPY, python="3.10", packages=_ASTROPY_PINS, pre_install=_ASTROPY_SETUPTOOLS),
        ),
        *(
            (
                version,
                spec(
                    _ASTROPY,
                    python="3.6",
                    packages=(*_ASTROPY_OLD_PINS, *((f"astropy-helpers=={helpers}",) if helpers else ())),
                    test_cmd="pytest -rA -vv -o console_output_style=classic --tb=no",
                ),
            )
            for version, helpers in (
                ("0.1 0.2 0.3", ""),
                ("0.4", "0.4.8"),
                ("1.1", "1.1.2"),
                ("1.2", "1.2"),
                ("1.3", "1.3.1"),
            )
        ),
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
            "3.4",
            RepoSpec(
                python="3.8", requirements=_MPL_REQS, packages=("pytest", "ipython"), system=_MPL_SYSTEM
            ),
        ),
        (
            "3.1 3.2 3.3",
            RepoSpec(
                python="3.8",
                requirements=_MPL_REQS,
                packages=("pytest", "ipython"),
                system=_MPL_OLD_SYSTEM,
            ),
        ),
        (
            "3.0",
            RepoSpec(python="3.7", requirements=_MPL_REQS, packages=("pytest",), system=_MPL_OLD_SYSTEM),
        ),
        (
            "2.0 2.1 2.2 1.0 1.1 1.2 1.3 1.4 1.5",
            RepoSpec(python="3.5", packages=("pytest",), system=_MPL_OLD_SYSTEM),
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
