"""hpctestlib_ml: ReFrame base classes, launch builders, log parsers and
reporting for the ML-training regression suite.

Importing this package does no work: the ReFrame parts live in
:mod:`hpctestlib_ml.base` and the workload modules, the pure parts
(parsers, FLOPs, launch builders) import nothing heavier than the standard
library.
"""
import os
import pathlib

#: The repository this library was loaded from.
REPO_ROOT = pathlib.Path(__file__).resolve().parent.parent

#: Training programs, run as ``python -m <program>`` with ``PYTHONPATH=SRC_DIR``.
SRC_DIR = REPO_ROOT / 'src'

#: Per-workload reference files (ReFrame 4.10 external references):
#: published references, and those ``hpcml references`` derives from a
#: site's history. ``HPCML_REFERENCES_DIR`` points the checks at another
#: directory of such files (relative: to where the user runs).
REFERENCES_DIR = pathlib.Path(
    os.environ.get('PWD', os.getcwd()),
    os.environ.get('HPCML_REFERENCES_DIR') or REPO_ROOT / 'config' /
    'references')
