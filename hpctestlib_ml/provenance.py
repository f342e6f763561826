"""What a result was measured with, for the perflog: the suite's version and
commit (here, once per ReFrame session) and what the job found on the node
(``src/provenance.py`` writes ``hpcml_provenance.json`` in the stage
directory: framework versions, GPU driver, CUDA, NCCL, switches)."""
import functools
import json
import os
import subprocess

from hpctestlib_ml import REPO_ROOT

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


def job_provenance(stagedir):
    '''The perflog fields from the job's provenance file, '' where unknown.'''
    path = os.path.join(stagedir, PROVENANCE_FILE)
    try:
        with open(path) as fp:
            facts = json.load(fp)
    except (OSError, ValueError):
        facts = {}
    versions = dict(facts.get('versions', {}))
    return {
        'framework_versions': _pairs({k: v for k, v in versions.items()
                                      if k != 'nccl'}),
        'nccl_version': versions.get('nccl', ''),
        'gpu_driver': facts.get('gpu_driver', ''),
        'cuda_version': facts.get('cuda', facts.get('rocm', '')),
        'env_switches': _pairs(facts.get('switches', {})),
    }
