"""The wheels a GPU machine without network needs beyond what it has, in
sets that one device call can carry (``validate.sh prepare``).

Run by the project's ``.venv`` (``make setup``): the versions are the ones
installed there, so the GPU machine runs what CI tests. Each phase of
``validate.sh`` needs the suite (ReFrame, PyYAML) and the packages of the
workloads it runs (:data:`WORKLOAD_PACKAGES`); their closure over the
installed distributions' requirements (markers evaluated for the target:
CPython 3.12 on Linux x86_64), less what the machine brings
(:data:`MACHINE_PROVIDED`) and what no phase imports (:data:`NOT_NEEDED`),
is downloaded as wheels for that target. Phases are packed in their order
into sets of at most :func:`set_limit` bytes; each set is a directory with
its wheels and a ``requirements.txt`` of exact pins, installed with
``pip install --no-index --no-deps``, so nothing is resolved on the
machine. ``sets.json`` says which set each phase installs.

The machine the sets are for (the device tool's H100/H200 image): Python
3.12 in a virtual environment with PyTorch 2.11 (CUDA 13.0), torchvision,
transformers, accelerate, NumPy, pandas, pyarrow, SciPy, Pillow,
Matplotlib and nvidia-ml-py preinstalled (the image's package list);
no network.
"""
import argparse
import json
import os
import pathlib
import re
import subprocess
import sys

REPO = pathlib.Path(__file__).resolve().parents[2]

def workload_packages():
    '''What the phases import besides the torch stack, by workload: each
    workload's declared ``packages`` (hpctestlib_ml.registry).'''
    sys.path.insert(0, str(REPO))
    from hpctestlib_ml import registry
    return {name: list(declared.packages)
            for name, declared in registry.registered().items()}


#: Workload -> the pip requirements its program needs beyond the torch
#: stack.
WORKLOAD_PACKAGES = workload_packages()


#: What every phase needs: the suite's own dependencies (pyproject.toml)
#: without the report's figures (matplotlib: machine-provided anyway).
SUITE_PACKAGES = ['reframe-hpc', 'pyyaml']

#: Torch and what is built against it: the machine's, never carried (a
#: second torch would shadow the machine's CUDA build).
TORCH_STACK = ('torch', 'torchvision', 'torchaudio', 'triton')

#: Packages the GPU machine has (the device tool's KINDS.md package list),
#: taken from there: compiled against the machine's NumPy (a NumPy of ours
#: would shadow it and break them), and too large to carry (pyarrow alone
#: is 52 MiB).
MACHINE_PROVIDED = ('numpy', 'scipy', 'pandas', 'pyarrow', 'pillow',
                    'matplotlib', 'contourpy', 'kiwisolver', 'fonttools',
                    'cycler', 'pyparsing', 'psutil', 'nvidia-ml-py')

#: Requirements no phase imports, and why: left out (``pip check`` in the
#: install log names them).
NOT_NEEDED = {
    'polars': "ReFrame's results-storage queries (--performance-compare, "
              "stored sessions); running and storing tests do not import "
              "it (48 MiB)",
    'polars-runtime-32': 'polars',
    'tensorflow': 'ResNet50TF is not validated here (no TF GPU wheel fits)',
    'tensorflow-cpu': 'ResNet50TF is not validated here',
    'keras': 'ResNet50TF is not validated here',
}

#: The target interpreter's markers (PEP 508).
TARGET = {
    'python_version': '3.12', 'python_full_version': '3.12.3',
    'sys_platform': 'linux', 'platform_system': 'Linux',
    'platform_machine': 'x86_64', 'os_name': 'posix',
    'implementation_name': 'cpython',
    'platform_python_implementation': 'CPython',
}

#: ``pip download`` options for the target's wheels: manylinux tags pip
#: matches one by one, so every glibc level the machine (glibc 2.39)
#: supports that wheels are published for.
PLATFORMS = ['manylinux_2_39_x86_64', 'manylinux_2_35_x86_64',
             'manylinux_2_34_x86_64', 'manylinux_2_31_x86_64',
             'manylinux_2_28_x86_64', 'manylinux_2_27_x86_64',
             'manylinux_2_26_x86_64', 'manylinux_2_24_x86_64',
             'manylinux_2_17_x86_64', 'manylinux2014_x86_64',
             'manylinux1_x86_64']

#: What one device call carries, the working tree included (its README).
CARRY_LIMIT = 64 * 2 ** 20

#: Room left for files the tree gains between prepare and the call.
MARGIN = 1 * 2 ** 20


class WheelSetError(Exception):
    '''A set cannot be made; the message names the fix.'''


def canonical(name):
    return re.sub(r'[-_.]+', '-', name).lower()


def _split(spec):
    '''``name[extra,...]`` -> (canonical name, set of extras).'''
    name, _, extras = spec.partition('[')
    return canonical(name), {e.strip() for e in extras.rstrip(']').split(',')
                             if e.strip()}


def installed():
    '''{canonical name: (version, [requirement strings])} of the running
    interpreter's distributions.'''
    from importlib import metadata
    found = {}
    for dist in metadata.distributions():
        name = dist.metadata['Name']
        if name:
            found.setdefault(canonical(name), (dist.version,
                                               list(dist.requires or [])))
    return found


def requirements(requires, extras):
    '''[(name, extras)] of the requirement strings *requires* that apply
    to the target with *extras* of their distribution asked for.'''
    from packaging.requirements import Requirement
    out = []
    for text in requires:
        req = Requirement(text)
        if req.marker and not any(req.marker.evaluate({**TARGET, 'extra': e})
                                  for e in (extras or {''})):
            continue
        out.append((canonical(req.name), set(req.extras)))
    return out


def skipped(name):
    return (name in TORCH_STACK or name in MACHINE_PROVIDED or
            name in NOT_NEEDED or name.startswith(('nvidia-', 'cuda-')))


def closure(roots, dists):
    '''{name: version} of *roots* (``name[extra]`` strings) and everything
    they require on the target, less what :func:`skipped` leaves out;
    WheelSetError naming a requirement that *dists* lacks.'''
    wanted, stack = {}, [_split(r) for r in roots]
    while stack:
        name, extras = stack.pop()
        if skipped(name):
            continue
        if name not in dists:
            raise WheelSetError(f'{name} is required but not installed in '
                                f'{sys.prefix}: run `make setup` first')
        if name in wanted and extras <= wanted[name]:
            continue
        wanted[name] = wanted.get(name, set()) | extras
        stack += requirements(dists[name][1], wanted[name])
    return {name: dists[name][0] for name in wanted}


def phase_roots(workloads):
    '''The root requirements of a phase that runs *workloads*.'''
    roots = list(SUITE_PACKAGES)
    for workload in workloads:
        roots += WORKLOAD_PACKAGES[workload]
    return roots


def pack(phase_needs, sizes, limit):
    '''Phases in order into sets: [(phases, {name: version})], each set's
    wheels (*sizes*: name -> bytes) at most *limit* bytes; a phase joins
    the current set while the union fits. WheelSetError where one phase
    alone is over the limit.'''
    sets = []
    for phase, needs in phase_needs:
        alone = sum(sizes[n] for n in needs)
        if alone > limit:
            largest = ', '.join(f'{n} {sizes[n] / 2**20:.1f} MiB' for n in
                                sorted(needs, key=sizes.get)[-3:])
            raise WheelSetError(
                f'phase {phase} needs {alone / 2**20:.1f} MiB of wheels, over '
                f'the {limit / 2**20:.1f} MiB a device call carries beside '
                f'the working tree (largest: {largest}): split the phase in '
                f'bench/gpu/phases.py or add what the machine has to '
                f'MACHINE_PROVIDED')
        if sets:
            union = {**sets[-1][1], **needs}
            if sum(sizes[n] for n in union) <= limit:
                sets[-1] = (sets[-1][0] + [phase], union)
                continue
        sets.append(([phase], dict(needs)))
    return sets


def tree_bytes(repo=REPO):
    '''Bytes of what a device call sends besides carried paths: tracked
    files and untracked ones git does not ignore.'''
    listed = subprocess.run(
        ['git', '-C', str(repo), 'ls-files', '-z', '--cached', '--others',
         '--exclude-standard'], capture_output=True, check=True).stdout
    total = 0
    for name in filter(None, listed.decode().split('\0')):
        path = repo / name
        if path.is_file() and not path.is_symlink():
            total += path.stat().st_size
    return total


def set_limit(repo=REPO):
    '''Bytes of wheels one set may hold: the carry limit less the working
    tree and a margin.'''
    return CARRY_LIMIT - tree_bytes(repo) - MARGIN


def download(pins, directory):
    '''Wheels of *pins* ({name: version}) for the target into *directory*:
    {name: path}.'''
    directory.mkdir(parents=True, exist_ok=True)
    command = [sys.executable, '-m', 'pip', 'download', '--quiet',
               '--no-deps', '--only-binary=:all:', '--python-version', '3.12',
               '--implementation', 'cp', '--abi', 'cp312', '--abi', 'abi3',
               '--abi', 'none', '-d', str(directory)]
    for platform in PLATFORMS + ['any']:
        command += ['--platform', platform]
    command += [f'{n}=={v}' for n, v in sorted(pins.items())]
    proc = subprocess.run(command, capture_output=True, text=True)
    if proc.returncode:
        errors = [line for line in proc.stderr.splitlines()
                  if line.startswith('ERROR')]
        raise WheelSetError(f'pip download failed: {" ".join(errors)[:600]} '
                            f'(is PyPI reachable?)')
    return wheel_files(directory, pins)


def wheel_files(directory, pins):
    '''{name: wheel path} in *directory* for each of *pins*.'''
    found = {}
    for path in directory.glob('*.whl'):
        name, version = path.name.split('-')[:2]
        found[(canonical(name), version)] = path
    missing = [f'{n}=={v}' for n, v in pins.items() if (n, v) not in found]
    if missing:
        raise WheelSetError(f'no wheel for {", ".join(missing)} in '
                            f'{directory}')
    return {n: found[(n, v)] for n, v in pins.items()}


def du_bytes(path):
    '''``du -sb`` of *path* (apparent size, what is copied).'''
    out = subprocess.run(['du', '-sb', str(path)], capture_output=True,
                         text=True, check=True).stdout
    return int(out.split()[0])


def prepare(directory, phases):
    '''Download and split: *phases* is [(phase, workloads)]; writes
    ``<directory>/wheels`` (every wheel), ``<directory>/set-<x>/``
    (hard links, ``requirements.txt``) and ``sets.json``; returns the
    latter's content.'''
    import shutil
    directory = pathlib.Path(directory)
    dists = installed()
    needs = [(phase, closure(phase_roots(workloads), dists))
             for phase, workloads in phases]
    every = {}
    for _, pins in needs:
        every.update(pins)
    wheels = download(every, directory / 'wheels')
    sizes = {n: p.stat().st_size for n, p in wheels.items()}
    limit = set_limit()
    sets = pack(needs, sizes, limit)
    for old in directory.glob('set-*'):
        shutil.rmtree(old)
    index = {'python': '3.12', 'limit_bytes': limit,
             'tree_bytes': tree_bytes(), 'phases': {}, 'sets': {},
             'machine_provided': list(MACHINE_PROVIDED),
             'torch_stack': list(TORCH_STACK), 'not_needed': NOT_NEEDED}
    for i, (set_phases, pins) in enumerate(sets):
        name = f'set-{chr(ord("a") + i)}'
        target = directory / name
        target.mkdir()
        for pkg in pins:
            os.link(wheels[pkg], target / wheels[pkg].name)
        (target / 'requirements.txt').write_text(
            ''.join(f'{n}=={v}\n' for n, v in sorted(pins.items())))
        (target / 'phases.txt').write_text(' '.join(set_phases) + '\n')
        size = du_bytes(target)
        if size > limit:
            raise WheelSetError(f'{target} is {size / 2**20:.1f} MiB (du), '
                                f'over the {limit / 2**20:.1f} MiB limit')
        index['sets'][name] = {'phases': set_phases, 'bytes': size,
                               'wheels': len(pins)}
        for phase in set_phases:
            index['phases'][phase] = name
    (directory / 'sets.json').write_text(json.dumps(index, indent=1) + '\n')
    return index


def main(argv=None):
    import phases as phase_table
    parser = argparse.ArgumentParser(description=__doc__.split('\n\n')[0])
    parser.add_argument('directory')
    args = parser.parse_args(argv)
    try:
        index = prepare(args.directory, phase_table.wheel_phases())
    except WheelSetError as err:
        sys.exit(f'validate.sh prepare: {err}')
    for name, info in index['sets'].items():
        print(f'{args.directory}/{name}: {info["wheels"]} wheels, '
              f'{info["bytes"] / 2**20:.1f} MiB (limit '
              f'{index["limit_bytes"] / 2**20:.1f} MiB beside a '
              f'{index["tree_bytes"] / 2**20:.1f} MiB tree): phases '
              f'{", ".join(info["phases"])}')


if __name__ == '__main__':
    main()
