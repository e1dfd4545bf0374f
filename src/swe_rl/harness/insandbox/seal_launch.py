"""What the seal's launchers share (``swe_rl_seal_launch.py``, staged beside them; never imported by swe-rl): the
watch on the repository's test framework and the run of the runner as ``python`` would run it.

A launcher (``swe_rl_seal_unittest.py`` for django's and unittest's runners, ``swe_rl_seal_sympy.py`` for
sympy's) becomes the test process: it adds the audit hook (``swe_rl_seal_core``), puts its recorders in place,
then runs the runner's script as ``__main__``.

Written for Python 3.6+: no newer syntax.
"""

import importlib.util
import os
import runpy
import sys

import swe_rl_seal_checks as _checks  # staged beside this file
import swe_rl_seal_core as _core


class Watch:
    """An import finder that finds nothing itself: for a module of the test framework (``django.test.*``,
    ``sympy.testing.*``: the repository's own code its tests call and inherit from) it hands on the spec the
    other finders give, with a loader that takes the module's namespaces when its code has run, before any later
    code can change them; the seal's checks then see what was added or replaced there."""

    def __init__(self, prefixes, watched):
        self.prefixes, self.watched, self.busy = tuple(prefixes), watched, set()

    def find_spec(self, name, path=None, target=None):
        if not (name in self.prefixes or name.startswith(tuple(p + "." for p in self.prefixes))):
            return None
        if name in self.busy:
            return None
        self.busy.add(name)
        try:
            spec = importlib.util.find_spec(name)
        finally:
            self.busy.discard(name)
        if spec is not None and spec.loader is not None:
            spec.loader = _Taking(spec.loader, name, self.watched)
        return spec


class _Taking:
    """A module's loader, which also takes the module's namespaces once its code has run."""

    def __init__(self, loader, name, watched):
        self._loader, self._name, self._watched = loader, name, watched

    def create_module(self, spec):
        return self._loader.create_module(spec)

    def exec_module(self, module):
        self._loader.exec_module(module)
        self._watched.extend(_checks.module_snapshot(self._name, module, framework=True))

    def __getattr__(self, attr):  # what else the import system or a library asks of the loader
        return getattr(self._loader, attr)


def watch(prefixes, watched):
    """The finder of :class:`Watch`, first on ``sys.meta_path``."""
    sys.meta_path.insert(0, Watch(prefixes, watched))


def run(argv, usage):
    """The runner as ``python`` would run it: a script, or ``-m module``."""
    if argv[:1] == ["-m"] and len(argv) > 1:
        sys.argv = [argv[1], *argv[2:]]
        sys.path[0] = os.getcwd()  # as ``python -m`` has it
        runpy.run_module(argv[1], run_name="__main__", alter_sys=True)
        return
    if not argv:
        raise SystemExit(usage)
    sys.argv = list(argv)
    sys.path[0] = os.path.dirname(os.path.abspath(argv[0]))
    runpy.run_path(argv[0], run_name="__main__")


def main(install, usage):
    """The launcher's run: the grading's key file taken, ``install(prefix, conf)`` (the hook and the recorders;
    it adds this function's code to the seal's own), the runner run, then the signed results written."""
    prefix, conf = _core.take_conf()
    if conf:
        install(prefix, conf)
    try:
        run(sys.argv[1:], usage)
    finally:
        if conf:
            _core.audit(_core.FINISH, None)
