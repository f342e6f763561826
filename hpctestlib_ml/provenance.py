"""What a result was measured with, for the perflog: the suite's version and
commit (here, once per ReFrame session) and what the job found on the node
(``src/provenance.py`` writes ``hpcml_provenance.json`` in the stage
directory: framework versions, the CUDA/HIP runtime each was built with,
GPU driver, NCCL, switches), with NCCL's version and transport from the
job's log where NCCL printed them (:mod:`hpctestlib_ml.parsers.nccl`).

The fields:

``cuda_version``  the runtime the run's framework was built with (``12.8``,
                  ``hip 6.2``, ``cpu``): what changes with a new wheel or
                  image. Not nvidia-smi's "CUDA Version", which is the
                  driver's API level and moves with the driver only.
``gpu_driver``    the driver, with that API level: ``550.54.15 (CUDA
                  12.4)``; ``ROCm 6.2.0`` on AMD nodes.
``nccl_version``  the NCCL the processes loaded (their log; else the wheel
                  or the image's NCCL_VERSION) and the transport they chose:
                  ``2.21.5 (IB)``; ``2.21.5 (Socket)`` where NCCL fell back
                  to TCP on a cluster without its IB or net plugin.
"""
import functools
import json
import os
import subprocess

from hpctestlib_ml.paths import REPO_ROOT
from hpctestlib_ml.parsers import nccl

#: The job's provenance file, in the stage directory.
PROVENANCE_FILE = 'hpcml_provenance.json'


@functools.cache
def suite_version():
    '''``<package version>+g<commit>[.dirty]``, or the version alone
    outside a git checkout.'''
    from importlib import metadata
    try:
        version = metadata.version('hpctestlib-ml')
    except metadata.PackageNotFoundError:
        version = 'unknown'
    try:
        commit = subprocess.run(
            ['git', '-C', str(REPO_ROOT), 'rev-parse', '--short', 'HEAD'],
            capture_output=True, text=True, timeout=10).stdout.strip()
        dirty = subprocess.run(
            ['git', '-C', str(REPO_ROOT), 'status', '--porcelain',
             '--untracked-files=no'],
            capture_output=True, text=True, timeout=10).stdout.strip()
    except (OSError, subprocess.SubprocessError):
        return version
    if not commit:
        return version
    return f'{version}+g{commit}' + ('.dirty' if dirty else '')


def _pairs(mapping):
    '''``k=v;k=v`` (perflog fields are '|'-separated: no '|' inside).'''
    return ';'.join(f'{k}={v}' for k, v in sorted(mapping.items())
                    ).replace('|', '/')


#: The runtime entry (``src/provenance.py``'s ``runtimes``) of each
#: framework a check names (``MLTrainingTest.framework``).
RUNTIME_OF = {'pytorch': 'torch', 'tensorflow': 'tensorflow'}


def _driver(facts):
    driver = facts.get('gpu_driver', '')
    if driver and facts.get('cuda_driver_api'):
        return f'{driver} (CUDA {facts["cuda_driver_api"]})'
    if not driver and facts.get('rocm'):
        return f'ROCm {facts["rocm"]}'
    return driver


def _nccl(versions, log_text, loaded=''):
    logged = nccl.nccl_facts(log_text or '')
    version = (logged.get('nccl_version') or loaded or
               versions.get('nccl', ''))
    if 'nccl_net' in logged:
        return f'{version or "unknown"} ({logged["nccl_net"]})'
    return version


def job_provenance(stagedir, log_text='', framework='pytorch',
                   loaded_nccl=''):
    '''The perflog fields from the job's provenance file and its log
    (*log_text*: NCCL's INFO lines), for a check of *framework*; ''
    where unknown. NCCL's version: NCCL's own log line, else what the
    ranks say their framework loaded (*loaded_nccl*, from their
    ``device`` records), else the wheel's.'''
    path = os.path.join(stagedir, PROVENANCE_FILE)
    try:
        with open(path) as fp:
            facts = json.load(fp)
    except (OSError, ValueError):
        facts = {}
    versions = dict(facts.get('versions', {}))
    runtime = facts.get('runtimes', {}).get(
        RUNTIME_OF.get(framework, framework), '')
    return {
        'framework_versions': _pairs({k: v for k, v in versions.items()
                                      if k != 'nccl'}),
        'nccl_version': _nccl(versions, log_text, loaded_nccl),
        'gpu_driver': _driver(facts),
        'cuda_version': runtime,
        'env_switches': _pairs(facts.get('switches', {})),
    }
