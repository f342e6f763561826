import importlib
import os
import pathlib
import subprocess
import sys

import pytest

REPO = pathlib.Path(__file__).resolve().parent.parent
DATA = REPO / 'tests' / 'data'
BIN = pathlib.Path(sys.executable).parent


@pytest.hookimpl(tryfirst=True)
def pytest_collection_modifyitems(config, items):
    '''Every test on the project's Slurm cluster is marked ``slurm`` and
    ``suite``, before ``-m`` selects (.ci/run runs the ``suite`` tests in a
    pass beside the others: one cluster a pytest process). The fullsize
    tests run only when -m names them: they take about 20 minutes and
    most of this machine's memory.'''
    for item in items:
        if 'slurm_cluster' in getattr(item, 'fixturenames', ()):
            item.add_marker(pytest.mark.slurm)
            item.add_marker(pytest.mark.suite)
    if 'fullsize' in (config.getoption('-m') or ''):
        return
    skip = pytest.mark.skip(reason='opt-in (about 20 min): pytest -m '
                                   'fullsize')
    for item in items:
        if 'fullsize' in item.keywords:
            item.add_marker(skip)


@pytest.fixture
def data():
    return DATA


def read_data(*parts):
    return (DATA.joinpath(*parts)).read_text()


#: Runs ``hpcml ARGV...`` with the address space this process has after
#: its imports (and polars' threads) and LIMIT_MIB more: a file read whole
#: does not fit (reading a stretch of N bytes with no newline took about 7N
#: before; now about 130 MiB for the line reader, 260 MiB with the store,
#: whatever N).
UNDER_A_LIMIT = '''
import os, re, resource, sys
import polars as pl
from hpctestlib_ml import cli
pl.DataFrame({'a': [1]}).lazy().collect(engine='streaming')
size = int(re.search(r'VmSize:\\s+(\\d+) kB',
                     open('/proc/self/status').read())[1]) * 1024
limit = size + int(os.environ['LIMIT_MIB']) * 2 ** 20
resource.setrlimit(resource.RLIMIT_AS, (limit, limit))
sys.exit(cli.main(sys.argv[1:]))
'''


def under_a_limit(argv, limit_mib, **env):
    '''(exit status, stdout, stderr) of ``hpcml ARGV`` run with
    :data:`UNDER_A_LIMIT`, polars and OpenBLAS on few threads (each
    thread's stack and arena is address space).'''
    proc = subprocess.run(
        [str(BIN / 'python'), '-c', UNDER_A_LIMIT, *map(str, argv)],
        env={**os.environ, 'POLARS_MAX_THREADS': '2',
             'OPENBLAS_NUM_THREADS': '1', 'LIMIT_MIB': str(limit_mib),
             **env},
        capture_output=True, text=True, timeout=120)
    return proc.returncode, proc.stdout, proc.stderr


@pytest.fixture(scope='session')
def cache_dir(tmp_path_factory):
    '''One CPU-peak cache for every reframe run of the test session, or of
    every pytest process that names it in ``HPCML_TEST_CACHE_DIR`` (.ci/run
    runs two side by side): the peak (MFU's denominator on CPUs) is
    measured once, by the first process that needs it, while any other
    waits on its lock (.ci/run measures it before both start).'''
    import fcntl
    from hpctestlib_ml import cpu_peak
    shared = os.environ.get('HPCML_TEST_CACHE_DIR', '').strip()
    directory = (pathlib.Path(shared) if shared else
                 tmp_path_factory.getbasetemp() / 'hpcml-cache')
    directory.mkdir(parents=True, exist_ok=True)
    with open(directory / '.lock', 'w') as lock:
        fcntl.flock(lock, fcntl.LOCK_EX)
        cpu_peak.cached_peak(str(directory), os.cpu_count())
    return directory


@pytest.fixture
def run_reframe(tmp_path, cache_dir):
    '''Run a command of the suite with its own var directory; returns
    (CompletedProcess, var_dir).'''
    def run(*args, env=None, timeout=900):
        var_dir = tmp_path / 'var'
        full_env = {**os.environ, 'HPCML_VAR_DIR': str(var_dir),
                    'HPCML_CACHE_DIR': str(cache_dir), **(env or {})}
        full_env.pop('RFM_CONFIG_FILES', None)
        proc = subprocess.run([str(a) for a in args], cwd=tmp_path,
                              env=full_env, capture_output=True, text=True,
                              timeout=timeout, stdin=subprocess.DEVNULL)
        return proc, var_dir

    return run


@pytest.fixture(scope='session')
def slurm_cluster(tmp_path_factory):
    '''The project's two-node Slurm cluster (tests/slurm/cluster.sh), started
    once for the session and stopped at its end, whatever the tests did.

    With slurmdbd and MariaDB installed it runs accounting too, so that
    ReFrame's ``slurm`` scheduler (sacct) works beside ``squeue``. Where the
    cluster cannot start (not root, Slurm not installed) its tests skip,
    except under CI, where they fail.
    '''
    import slurm
    reason = slurm.why_unavailable()
    if reason:
        if os.environ.get('CI'):
            pytest.fail(f'Slurm tests cannot run under CI: {reason}')
        pytest.skip(reason)

    accounting = (os.environ.get('HPCML_TEST_SLURM_ACCOUNTING', '1') != '0'
                  and slurm.why_unavailable(accounting=True) is None)
    directory = (os.environ.get('HPCML_TEST_SLURM_DIR') or
                 tmp_path_factory.mktemp('slurm-cluster'))
    cluster = slurm.Cluster.start(directory, accounting)
    try:
        yield cluster
    finally:
        cluster.stop()


def extract(workload, text):
    '''The metrics ``hpcml extract WORKLOAD`` prints for *text*: the
    parser its declaration names (hpctestlib_ml.registry).'''
    from hpctestlib_ml import registry
    return registry.get(workload).parser.extract_metrics(text)


def check_class(declared):
    '''The ReFrame test class of the workload *declared*:
    ``<check>Training`` (a component's ``<check>Benchmark``) of
    ``hpctestlib_ml.workloads.<name>``.'''
    module = importlib.import_module(f'hpctestlib_ml.workloads.'
                                     f'{declared.name}')
    suffix = 'Training' if declared.trains else 'Benchmark'
    return getattr(module, f'{declared.check}{suffix}')


#: The cases config/local.py's cpu partition runs of a check: one and two
#: ranks, the two only under torchrun (the local launcher starts one
#: task).
LOCAL_CASES = frozenset({('1_proc', 'per_task'), ('1_proc', 'torchrun'),
                         ('2_procs', 'torchrun')})


def local_cases(declared):
    '''The (scale, launch mode) of *declared*'s cases on config/local.py's
    cpu partition: :data:`LOCAL_CASES` of its ``min_world_size`` ranks or
    more (the collectives: two).'''
    ranks = {'1_proc': 1, '2_procs': 2}
    fewest = declared.min_world_size
    return {case for case in LOCAL_CASES if ranks[case[0]] >= fewest}


def suite_image():
    '''The suite's image in Podman's storage (``make image``); the test
    skips where Podman or the image is missing, except under CI (which
    builds it first: .ci/run), where it fails.'''
    import shutil
    from hpctestlib_ml import image
    from hpctestlib_ml.siteconfig import podman_image_exists
    reason = None
    if shutil.which('podman') is None:
        reason = ('podman is not installed: containers/install-podman.sh, '
                  'then make image')
    elif not podman_image_exists(image.podman_image()):
        reason = f'{image.podman_image()} is not built: make image'
    if reason:
        if os.environ.get('CI'):
            pytest.fail(f'the container tests cannot run under CI: {reason}')
        pytest.skip(reason)
    return image.podman_image()


def local_containers():
    '''Whether config/local.py offers the ``*Container`` twins here (Podman
    with the suite's image built, or Apptainer:
    :func:`hpctestlib_ml.siteconfig.local_container_platform`).'''
    from hpctestlib_ml.siteconfig import local_container_platform
    return local_container_platform()[0] is not None


def local_case_count(containers=None):
    '''How many cases the local suite runs: every declaration's, twice
    where *containers* (default: :func:`local_containers`) its container
    twin runs too.'''
    from hpctestlib_ml import registry
    count = sum(len(local_cases(d)) for d in registry.registered().values())
    if containers is None:
        containers = local_containers()
    return count * (2 if containers else 1)


def free_port():
    '''A TCP port free on this host now (a torchrun rendezvous).'''
    import socket
    with socket.socket() as s:
        s.bind(('127.0.0.1', 0))
        return s.getsockname()[1]


def run_module(cwd, program, *args, procs=1, env=None, timeout=600):
    '''``python -m <program> ARGS`` of ``src/`` on this CPU (*program*
    may be ``['-c', code]``): one process, or *procs* under torchrun
    (Gloo); the completed process, which must have exited 0.'''
    program = [program] if isinstance(program, str) else list(program)
    command = program if program[0] == '-c' else ['-m', *program]
    if procs > 1:
        # '--': the program's options are its own, not torchrun's.
        command = ['-m', 'torch.distributed.run', '--nproc-per-node',
                   str(procs), '--master-port', str(free_port()), *command,
                   '--']
    proc = subprocess.run(
        [sys.executable, *command, *map(str, args)],
        env={**os.environ, 'PYTHONPATH': str(REPO / 'src'),
             'OMP_NUM_THREADS': '1', 'HPCML_DEVICE_KIND': 'cpu',
             **(env or {})},
        capture_output=True, text=True, timeout=timeout, cwd=cwd)
    assert proc.returncode == 0, proc.stderr[-3000:]
    return proc
