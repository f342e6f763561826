"""The subcommands of ``hpcml``, one module each.

Every module has ``HELP`` (its line in ``hpcml --help``),
``add_arguments(parser)`` and ``run(args)``, which returns the exit status
and says what went wrong on stderr as ``hpcml <command>: ...``.
:mod:`hpctestlib_ml.cli` only registers them.
"""
