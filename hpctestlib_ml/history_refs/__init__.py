"""ReFrame references from a site's own history (``hpcml references``).

A regression suite can only fail on a regression where every case has a
reference. Published results cover a few systems; every other system gets
its references from its own passing runs (perflogs and/or the results DB).
A case is a test class on a ``system:partition`` with one
``reference_case`` (:attr:`hpctestlib_ml.report.history.Run.case_here`),
logged with every result. Its jobs, one module each:

- :mod:`.derive`: the statistics, a reference and threshold per case and
  metric, and a reference loss curve;
- :mod:`.store`: the generated block of the per-workload references files
  (``config/references/<workload>.yaml``): read, render, merge, verify;
- :mod:`.lookup`: what a check reads at run time (its references file, its
  case's source and loss curve, whether its losses leave the curve);
- the command itself is :mod:`hpctestlib_ml.commands.references`.
"""


class ReferencesError(ValueError):
    '''Bad input to ``hpcml references``, with the fix.'''
