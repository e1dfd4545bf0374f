"""The spec table's entries by repository family: ``scientific``, ``web`` and ``dev_tools``, each with the pin
lists and commands its repositories share, written in ``shorthand``; :mod:`swe_rl.tasks.spec_table` assembles
them into ``SPECS``."""
