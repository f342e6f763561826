"""The workloads' ReFrame test classes: one module each (a package where
that reads better), ``<Check>Training`` (a component's
``<Check>Benchmark``), which the thin leaf ``checks/<name>.py`` runs.

A test class says what its check does its own way (its program's
arguments, its log's problems, its FLOPs per sample) and reads the rest
from its workload's declaration (:mod:`hpctestlib_ml.registry`: program,
sizes, parser, precisions, capabilities), which imports no ReFrame. The
tools never import this package.
"""
