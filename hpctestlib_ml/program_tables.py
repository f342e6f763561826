"""The training programs' own tables (sizes, widths) and pure helpers,
read from their files.

A program under ``src/`` keeps its size table in a module without torch
(``deepcam/architecture.py``, ``cosmoflow/sizes.py``,
``bert_pretrain/sizes.py``, ``alphafold2/sizes.py``); the library reads
that same file for its FLOPs, check settings and model-info, so that the
numbers have one home. The file is loaded by its path, not imported as
``<program>.<module>``: the library then needs neither ``src`` on
``sys.path`` nor the program's package, whose other modules import torch.
"""
import functools
import importlib.util

from hpctestlib_ml.paths import SRC_DIR


@functools.cache
def load(program, module):
    '''``src/<program>/<module>.py`` as a module of its own (once per
    process: every caller gets the same tables).'''
    path = SRC_DIR / program / f'{module}.py'
    spec = importlib.util.spec_from_file_location(
        f'_{program}_{module}', path)
    loaded = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(loaded)
    return loaded


@functools.cache
def src_module(name):
    '''``src/<name>.py``, a pure module of the programs (standard library
    only, e.g. ``node_gpus``), as a module of its own, once per process:
    never by putting ``src`` on ``sys.path``. (A site configuration that
    did so inside ReFrame's loading of it, which puts back ``sys.path`` by
    index, took the venv's site-packages off instead: every later import
    from there failed, ReFrame's performance report with "No module named
    'polars'".)'''
    path = SRC_DIR / f'{name}.py'
    spec = importlib.util.spec_from_file_location(f'_src_{name}', path)
    loaded = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(loaded)
    return loaded
