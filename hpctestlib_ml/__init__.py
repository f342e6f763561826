"""hpctestlib_ml: ReFrame base classes, launch builders, log parsers and
reporting for the ML-training regression suite.

Importing this package does no work: the ReFrame parts live in
:mod:`hpctestlib_ml.base` and the workload modules, the pure parts
(parsers, FLOPs, launch builders) import nothing heavier than the standard
library. Where the suite keeps things (the repository, ``var/``, the
references): :mod:`hpctestlib_ml.paths`.
"""
