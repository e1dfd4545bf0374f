"""Building an env's two halves: the testbed (the repository at its base commit, from a mirror or a URL) and the
venv (the interpreter, a recipe's installs resolved as of a date, the lock it leaves).

The venv side, in build order: ``recipe`` (what to install), ``interpreters`` and ``venv`` (a Python and a venv
of it), ``venvbuild`` (one venv of the cache, shared or an instance's clone), ``installer`` (running the recipe's
installs: ``install_tools`` for uv and pip, ``pip_tool`` and ``pip_fallback`` for what only pip runs,
``requirement_files`` and ``build_settings`` for what the repo's files and build read), what a dated resolution
needs (``dating``, ``remedies`` from ``uv_output``, ``import_check`` after the build), the lock's lines
(``pins``) and the host's Debian packages (``system_deps``). The testbed side: ``repo_sources`` and ``testbed``.
"""
