"""The spec table's web family: django, flask, requests and marshmallow (see :mod:`swe_rl.tasks.spec_table`)."""

from __future__ import annotations

from swe_rl.tasks.repospec import RepoSpec
from swe_rl.tasks.spec_families.shorthand import pins, spec

_UTF8 = (
    "export LANG=C.UTF-8",
    "export LC_ALL=C.UTF-8",
    "export PYTHONIOENCODING=utf8",
    "export LANGUAGE=en_US:en",
)
_UTF8_3 = ("export LANG=C.UTF-8", "export LANGUAGE=en_US:en", "export LC_ALL=C.UTF-8")
# requests' tests before 2.9 call the httpbin service at $HTTPBIN_URL (else http://httpbin.org/, which the
# official images reached over the network; sandboxes have none): the same service, httpbin, runs in the
# sandbox on loopback instead, started before the tests and waited for (2.9 on serve it from pytest-httpbin)
_LOCAL_HTTPBIN = (
    "python -m httpbin.core --host 127.0.0.1 --port 8765 >/tmp/swe-rl-httpbin.log 2>&1 &",
    "export HTTPBIN_URL=http://127.0.0.1:8765/",
    "for _ in $(seq 100); do python -c \"import urllib.request as u; u.urlopen('http://127.0.0.1:8765/get', timeout=1)\" "
    "2>/dev/null && break; sleep 0.1; done",
)
_DJANGO_TEST = "./tests/runtests.py --verbosity 2 --settings=test_sqlite --parallel 1"

_DJANGO = {
    "test_cmd": _DJANGO_TEST,
    "directives": "django_modules",
    "requirements": ("tests/requirements/py3.txt",),
}

_FLASK_20 = pins(
    "setuptools==70.0.0 Werkzeug==2.3.7 Jinja2==3.0.1 itsdangerous==2.1.2 click==8.0.1 MarkupSafe==2.1.3"
)
_FLASK_21 = pins(
    "setuptools==70.0.0 click==8.1.3 itsdangerous==2.1.2 Jinja2==3.1.2 MarkupSafe==2.1.1 Werkzeug==2.3.7"
)


WEB_SPECS: dict[str, list[tuple[str, RepoSpec]]] = {
    "django/django": [
        # 3.5 as the fact; setup.py install made editable (spec_table's docstring)
        ("1.4 1.5 1.6", RepoSpec(python="3.5", test_cmd=_DJANGO_TEST, directives="django_modules")),
        ("1.7 1.8 1.10", spec(_DJANGO, python="3.5", packages=("setuptools",), eval_commands=_UTF8)),
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
        ("1.11 2.0 2.1 2.2", spec(_DJANGO, python="3.6", packages=("setuptools",), eval_commands=_UTF8)),
        ("3.0 3.1 3.2", spec(_DJANGO, python="3.6", eval_commands=_UTF8_3)),
        ("4.0", spec(_DJANGO, python="3.8")),
        ("4.1 4.2", spec(_DJANGO, python="3.9")),
        ("5.0 5.1 5.2", spec(_DJANGO, python="3.11")),
    ],
    "marshmallow-code/marshmallow": [
        (
            "2.18 2.19 2.20 3.0 3.1 3.10 3.11 3.12 3.13 3.15 3.16 3.19 3.2 3.4 3.8 3.9",
            RepoSpec(python="3.9", install="python -m pip install -e '.[dev]'"),
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
            "0.7 0.8 0.9 0.11 0.13 0.14 1.1 1.2 2.0 2.2 2.3 2.4 2.5 2.7 2.8",
            RepoSpec(
                python="3.9",
                packages=("pytest", "httpbin"),
                install="python -m pip install .",
                eval_commands=_LOCAL_HTTPBIN,
            ),
        ),
        (
            "2.9 2.10 2.11 2.12 2.17 2.18 2.19 2.22 2.25 2.26 2.27 2.31 3.0",
            RepoSpec(python="3.9", packages=("pytest",), install="python -m pip install ."),
        ),
    ],
}
