"""Launch builders: the commands, and the shell they emit run for real in bash."""
import importlib.util
import os
import subprocess
import sys
import tempfile

import pytest

from hpctestlib_ml import launch
from hpctestlib_ml.paths import SRC_DIR


def fake_scontrol(tmp_path, nodeaddr='10.1.2.3'):
    '''A directory with an scontrol that knows nodes jwb0042 and jwb0043.'''
    fake = tmp_path / 'bin'
    fake.mkdir(exist_ok=True)
    scontrol = fake / 'scontrol'
    scontrol.write_text(
        '#!/bin/sh\n'
        'if [ "$1 $2" = "show hostnames" ]; then\n'
        '  echo jwb0042; echo jwb0043; exit 0\n'
        'fi\n'
        'if [ "$1 $2 $3" = "-o show node" ]; then\n'
        '  echo "NodeName=jwb0042 Arch=x86_64 NodeAddr=10.1.2.42 Port=0"\n'
        '  echo "NodeName=jwb0043 Arch=x86_64 NodeAddr=10.1.2.43 Port=0"\n'
        '  exit 0\n'
        'fi\n'
        'if [ "$1 $2" = "show node" ]; then\n'
        '  echo "NodeName=$3 Arch=x86_64 CoresPerSocket=24"\n'
        f'  echo "   NodeAddr={nodeaddr} NodeHostName=$3 Version=22.05"\n'
        '  exit 0\n'
        'fi\n'
        'exit 1\n')
    scontrol.chmod(0o755)
    return fake


def run_shell(lines, tmp_path, env=None, nodeaddr='10.1.2.3'):
    '''Run *lines* in bash with a fake scontrol; (MASTER_ADDR, MASTER_PORT).'''
    fake = fake_scontrol(tmp_path, nodeaddr)
    script = '\n'.join(lines + ['echo "$MASTER_ADDR $MASTER_PORT"'])
    full_env = {'PATH': f'{fake}:{os.environ["PATH"]}',
                'SLURM_JOB_NODELIST': 'jwb[0042-0043]', **(env or {})}
    out = subprocess.run(['bash', '-c', script], env=full_env,
                         capture_output=True, text=True, check=True)
    addr, port = out.stdout.split()
    return addr, int(port)


def test_juwels_address_is_first_node_plus_i(tmp_path):
    lines = launch.rendezvous_env('slurm', '{hostname}i')
    addr, port = run_shell(lines, tmp_path, {'SLURM_JOB_ID': '12345678'})
    assert addr == 'jwb0042i'
    assert port == launch.PORT_BASE + 12345678 % launch.PORT_SPAN


def test_port_differs_between_jobs_on_one_node(tmp_path):
    lines = launch.rendezvous_env('slurm')
    ports = {run_shell(lines, tmp_path, {'SLURM_JOB_ID': str(job)})[1]
             for job in (1000, 1001, 1002)}
    assert len(ports) == 3
    assert all(launch.PORT_BASE <= p < launch.PORT_BASE + launch.PORT_SPAN
               for p in ports)


def test_nodeaddr_mode(tmp_path):
    lines = launch.rendezvous_env('squeue', 'nodeaddr')
    addr, _ = run_shell(lines, tmp_path, {'SLURM_JOB_ID': '7'},
                        nodeaddr='127.0.0.1')
    # From the job's map of every node's NodeAddr, one scontrol call.
    assert addr == '10.1.2.42'
    script = '\n'.join(lines + ['echo "$HPCML_NODE_ADDRESSES"'])
    out = subprocess.run(['bash', '-c', script], capture_output=True,
                         text=True, check=True, env={
                             'PATH': f'{tmp_path / "bin"}:{os.environ["PATH"]}',
                             'SLURM_JOB_NODELIST': 'jwb[0042-0043]',
                             'SLURM_JOB_ID': '7'})
    assert out.stdout.split() == ['jwb0042=10.1.2.42', 'jwb0043=10.1.2.43']


def test_tasks_find_their_nodeaddr_in_the_map_without_scontrol():
    # As inside a container: no scontrol on PATH.
    env = {'PATH': '/usr/bin:/bin', 'HPCML_RENDEZVOUS_ADDRESS': 'nodeaddr',
           'HPCML_NODE_ADDRESSES': 'n1=10.0.0.1 n10=10.0.0.10 '}
    out = subprocess.run([str(SRC_DIR / 'node_address.sh'), 'n10'], env=env,
                         capture_output=True, text=True, check=True)
    assert out.stdout == '10.0.0.10\n'


def test_local_scheduler_uses_fixed_address_and_pid_port(tmp_path):
    lines = launch.rendezvous_env('local', '127.0.0.1')
    assert '$$' in lines[-1]
    addr, port = run_shell(lines, tmp_path)
    assert addr == '127.0.0.1'
    assert launch.PORT_BASE <= port < launch.PORT_BASE + launch.PORT_SPAN


def test_bad_rendezvous_settings():
    with pytest.raises(ValueError, match='needs a Slurm scheduler'):
        launch.rendezvous_env('local', 'nodeaddr')
    with pytest.raises(ValueError, match='the only placeholder'):
        launch.rendezvous_env('slurm', '{host}-ib')
    with pytest.raises(ValueError, match='the only placeholder'):
        launch.rendezvous_env('slurm', ' ')


@pytest.mark.parametrize('nodes, ppn', [(1, 1), (2, 4), (8, 4), (16, 8)])
def test_torchrun_command(nodes, ppn):
    exe, opts = launch.torchrun_command(
        'python3', 'clip_train', ['--model', 'ViT-L-14'], nodes, ppn,
        '${SLURM_JOB_ID}')
    assert exe == str(SRC_DIR / 'task_env.sh')
    assert opts[:5] == ['torchrun', 'python3', '-u', '-m',
                        'torch.distributed.run']
    assert f'--nnodes={nodes}' in opts
    assert f'--nproc-per-node={ppn}' in opts
    assert '--rdzv-backend=c10d' in opts
    assert '--rdzv-endpoint=$MASTER_ADDR:$MASTER_PORT' in opts
    assert '--rdzv-id=${SLURM_JOB_ID}' in opts
    # '--' keeps torchrun's argparse off the program's options.
    assert opts[-5:] == ['-m', 'clip_train', '--', '--model', 'ViT-L-14']


def test_per_task_command():
    exe, opts = launch.per_task_command('python3', 'clip_train', ['--x', '1'])
    assert exe == str(SRC_DIR / 'task_env.sh')
    assert opts == ['per_task', 'python3', '-u', '-m', 'clip_train', '--x',
                    '1']


def test_quote_args_leaves_shell_expressions():
    quoted = launch.quote_args(['--report-to', '', 'a b',
                                launch.ShellExpr('--name=x-${SLURM_JOB_ID}')])
    assert quoted == ['--report-to', "''", "'a b'", '--name=x-${SLURM_JOB_ID}']


def test_thread_env():
    assert launch.thread_env(24) == ['export OMP_NUM_THREADS=24']
    assert launch.thread_env(None) == []


def task_env(mode, env, tmp_path=None, names=('RANK', 'LOCAL_RANK',
                                               'WORLD_SIZE', 'PET_LOCAL_ADDR')):
    '''What task_env.sh MODE exports: the values of *names* (RANK,
    LOCAL_RANK, WORLD_SIZE, PET_LOCAL_ADDR), '-' for unset.'''
    path = os.environ['PATH']
    if tmp_path is not None:
        path = f'{fake_scontrol(tmp_path, "10.9.9.9")}:{path}'
    # task_env.sh writes the job's provenance and samples where it runs;
    # in torchrun mode it runs src/rendezvous_host.py with the program's
    # Python.
    with tempfile.TemporaryDirectory() as cwd:
        out = subprocess.run(
            [str(SRC_DIR / 'task_env.sh'), mode, sys.executable, '-c',
             f'import os; print(*(os.environ.get(n, "-") for n in {names}))'],
            env={'PATH': path, **env}, cwd=cwd, capture_output=True,
            text=True, check=True)
    return tuple(out.stdout.split())


def test_per_task_ranks_from_slurm():
    env = {'SLURM_PROCID': '5', 'SLURM_LOCALID': '1', 'SLURM_NTASKS': '8',
           'SLURMD_NODENAME': 'jwb0007',
           'HPCML_RENDEZVOUS_ADDRESS': '{hostname}i'}
    assert task_env('per_task', env) == ('5', '1', '8', 'jwb0007i')


def test_per_task_ranks_from_open_mpi():
    assert task_env('per_task', {'OMPI_COMM_WORLD_RANK': '3',
                                 'OMPI_COMM_WORLD_LOCAL_RANK': '3',
                                 'OMPI_COMM_WORLD_SIZE': '4',
                                 'HPCML_RENDEZVOUS_ADDRESS': '127.0.0.1'}
                    )[:3] == ('3', '3', '4')


def test_single_local_task_and_torchrun_values_win():
    env = {'HPCML_RENDEZVOUS_ADDRESS': '127.0.0.1'}
    assert task_env('per_task', env) == ('0', '0', '1', '127.0.0.1')
    assert task_env('per_task', {**env, 'RANK': '2', 'LOCAL_RANK': '0',
                                 'WORLD_SIZE': '3', 'SLURM_PROCID': '0',
                                 'SLURM_NTASKS': '1'})[:3] == ('2', '0', '3')


def test_torchrun_node_gets_its_own_address_and_no_ranks(tmp_path):
    env = {'SLURM_PROCID': '1', 'SLURM_NTASKS': '2',
           'SLURMD_NODENAME': 'jwb0043', 'HPCML_RENDEZVOUS_ADDRESS': 'nodeaddr',
           'HPCML_RENDEZVOUS_NODE': 'jwb0042'}
    assert task_env('torchrun', env, tmp_path) == ('-', '-', '-', '10.9.9.9')


def test_each_task_says_where_it_landed(tmp_path):
    env = {'SLURM_PROCID': '1', 'SLURMD_NODENAME': 'jwb0043',
           'HPCML_RENDEZVOUS_ADDRESS': '{hostname}i',
           'HPCML_RENDEZVOUS_NODE': 'jwb0042',
           'MASTER_ADDR': 'jwb0042i', 'MASTER_PORT': '21234',
           'PATH': os.environ['PATH']}
    out = subprocess.run([str(SRC_DIR / 'task_env.sh'), 'torchrun',
                          sys.executable, '-c', ''],
                         env=env, cwd=tmp_path, capture_output=True,
                         text=True, check=True)
    assert out.stdout == ''
    assert out.stderr == ('hpcml launch: node=jwb0043 task=1 mode=torchrun '
                          'address=jwb0043i master=jwb0042i:21234 '
                          'rdzv_conf=is_host=0\n')


def load_rendezvous_host():
    '''src/rendezvous_host.py (src/ is the programs' path, not the
    tests').'''
    spec = importlib.util.spec_from_file_location(
        'rendezvous_host', SRC_DIR / 'rendezvous_host.py')
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


def slurm_task_env(node_id, node):
    '''What srun gives the one task on node *node_id* of a 2-node job on
    JUWELS Booster, plus the job script's exports.'''
    return {'SLURM_JOB_ID': '12345678', 'SLURM_JOB_NODELIST': 'jwb[0042-0043]',
            'SLURM_JOB_NUM_NODES': '2', 'SLURM_NNODES': '2',
            'SLURM_NTASKS': '2', 'SLURM_PROCID': str(node_id),
            'SLURM_NODEID': str(node_id), 'SLURM_LOCALID': '0',
            'SLURMD_NODENAME': node, 'HPCML_RENDEZVOUS_ADDRESS': '{hostname}i',
            'HPCML_RENDEZVOUS_NODE': 'jwb0042', 'MASTER_ADDR': 'jwb0042i',
            'MASTER_PORT': '21234'}


def test_the_first_node_hosts_the_rendezvous_under_slurm():
    rh = load_rendezvous_host()
    # The host name is not the node's address; under Slurm the node's name
    # decides, whatever the host name is.
    assert rh.hosts_rendezvous(slurm_task_env(0, 'jwb0042'),
                               'jwb0042.juwels')
    assert not rh.hosts_rendezvous(slurm_task_env(1, 'jwb0043'),
                                   'jwb0043.juwels')
    assert rh.rdzv_conf(slurm_task_env(0, 'jwb0042'), 'x') == 'is_host=1'
    assert rh.rdzv_conf(slurm_task_env(1, 'jwb0043'), 'x') == 'is_host=0'


def test_the_local_launchers_one_node_hosts_the_rendezvous():
    rh = load_rendezvous_host()
    # The local job script's first node is $(hostname).
    assert rh.hosts_rendezvous({'HPCML_RENDEZVOUS_NODE': 'vm'}, 'vm')


def test_rendezvous_host_keeps_other_options_and_fails_clearly():
    rh = load_rendezvous_host()
    env = {**slurm_task_env(1, 'jwb0043'),
           'PET_RDZV_CONF': 'read_timeout=120,is_host=1'}
    assert rh.rdzv_conf(env, 'x') == 'read_timeout=120,is_host=0'
    with pytest.raises(rh.RendezvousHostError,
                       match='HPCML_RENDEZVOUS_NODE is not set'):
        rh.hosts_rendezvous({'SLURMD_NODENAME': 'jwb0043'}, 'x')
    out = subprocess.run([sys.executable, str(SRC_DIR / 'rendezvous_host.py')],
                         env={'PATH': os.environ['PATH']},
                         capture_output=True, text=True)
    assert out.returncode == 2
    assert out.stderr.startswith('rendezvous_host.py: HPCML_RENDEZVOUS_NODE '
                                 'is not set')


@pytest.mark.parametrize('node_id, node, is_host', [(0, 'jwb0042', True),
                                                    (1, 'jwb0043', False)])
def test_torch_reads_the_rendezvous_host_from_each_task(node_id, node,
                                                        is_host):
    '''task_env.sh's PET_RDZV_CONF, parsed the way torchrun and its c10d
    handler parse --rdzv-conf.'''
    from torch.distributed.elastic.rendezvous import RendezvousParameters
    from torch.distributed.elastic.rendezvous.utils import \
        _parse_rendezvous_config
    conf, = task_env('torchrun', slurm_task_env(node_id, node),
                     names=('PET_RDZV_CONF',))
    params = RendezvousParameters('c10d', 'jwb0042i:21234', '12345678', 2, 2,
                                  **_parse_rendezvous_config(conf))
    assert params.get_as_bool('is_host') is is_host


def test_job_script_names_the_rendezvous_node(tmp_path):
    lines = launch.rendezvous_env('slurm', '{hostname}i')
    script = '\n'.join(lines + ['echo "$HPCML_RENDEZVOUS_NODE"'])
    out = subprocess.run(['bash', '-c', script], capture_output=True,
                         text=True, check=True, env={
                             'PATH': f'{fake_scontrol(tmp_path)}:'
                                     f'{os.environ["PATH"]}',
                             'SLURM_JOB_NODELIST': 'jwb[0042-0043]',
                             'SLURM_JOB_ID': '7'})
    assert out.stdout == 'jwb0042\n'


def test_node_address_fails_clearly_for_unknown_node(tmp_path):
    fake = tmp_path / 'bin'
    fake.mkdir()
    (fake / 'scontrol').write_text('#!/bin/sh\nexit 1\n')
    (fake / 'scontrol').chmod(0o755)
    out = subprocess.run(
        [str(SRC_DIR / 'node_address.sh'), 'nosuchnode'],
        env={'PATH': f'{fake}:{os.environ["PATH"]}',
             'HPCML_RENDEZVOUS_ADDRESS': 'nodeaddr'},
        capture_output=True, text=True)
    assert out.returncode == 1
    assert "no NodeAddr for node 'nosuchnode'" in out.stderr


#: The program: it ends once the sampler beside it has walked its
#: processes (its RSS file is there: SIGTERM is blocked by then), 60 s at
#: most, then as {end} says.
TASK_PROGRAM = (
    'import os, time\n'
    'deadline = time.monotonic() + 60\n'
    "while not os.path.exists('hpcml_rss.n1.txt') and "
    'time.monotonic() < deadline:\n'
    '    time.sleep(0.05)\n'
    '{end}\n')


def test_task_env_gives_the_program_status_and_a_last_sample(tmp_path):
    '''On a node with a sampler, task_env.sh waits for the program, stops
    the sampler after one last sample, and exits with the program's
    status. The program ends once the sampler has started: a program of
    1.2 s timed against 5 s failed on a loaded machine, and one that ended
    before the sampler had blocked SIGTERM left no RSS file. A sampler
    task_env.sh did not stop would never end (its parent lives): the
    timeout says so.'''
    env = {'PATH': os.environ['PATH'], 'HPCML_RENDEZVOUS_ADDRESS': '127.0.0.1',
           'SLURMD_NODENAME': 'n1'}
    # A program killed by a signal kills its task with it, as under exec:
    # srun reports the signal (status -9 here).
    for status, end in ((0, 'raise SystemExit(0)'),
                        (3, 'raise SystemExit(3)'),
                        (-9, 'import os; os.kill(os.getpid(), 9)')):
        for name in ('hpcml_rss.n1.txt', 'hpcml_energy.n1.csv'):
            (tmp_path / name).unlink(missing_ok=True)
        proc = subprocess.run(
            [str(SRC_DIR / 'task_env.sh'), 'per_task', sys.executable, '-c',
             TASK_PROGRAM.format(end=end)],
            env=env, cwd=tmp_path, capture_output=True, text=True,
            timeout=120)
        assert proc.returncode == status
        rss = (tmp_path / 'hpcml_rss.n1.txt').read_text().split()
        assert rss[0] == 'max_rss_kib' and int(rss[1]) > 1000


@pytest.mark.parametrize('access, exported', [
    (['--partition=gpu', '--export=NONE'], False),
    (['--export=None'], False),
    (['--export=NIL'], False),
    (['--export NONE'], False),
    (['--export=HOME,PATH'], False),
    (['--export=ALL,FOO=bar'], True),
    (['--partition=gpu'], True),
])
def test_a_job_that_exports_nothing_passes_its_own_environment(access,
                                                               exported):
    '''sbatch --export=NONE sets SLURM_EXPORT_ENV=NONE in the job, which
    srun reads: the job script's exports would not reach its tasks.'''
    assert launch.exports_nothing(access) == (not exported)
    assert launch.export_lines(access, 'slurm') == (
        [] if exported else ['export SLURM_EXPORT_ENV=ALL'])
    assert launch.export_lines(access, 'local') == []


@pytest.mark.parametrize('exclusive, gpus, scheduler, whole', [
    (None, 4, 'slurm', True), (None, 4, 'squeue', True),
    (None, 0, 'slurm', False), (None, 1, 'local', False),
    (False, 4, 'slurm', False), (True, 0, 'slurm', True),
])
def test_whole_nodes_by_default_on_a_batch_gpu_partition(exclusive, gpus,
                                                          scheduler, whole):
    assert launch.takes_whole_nodes(exclusive, gpus, scheduler) is whole


def test_rank_binding_only_where_a_task_is_one_rank():
    binding = ['--cpu-bind=mask_cpu:0xfe,0xfe00', '--gpus-per-task=1']
    assert launch.binding_options(binding, 'per_task') == binding
    assert launch.binding_options(binding, 'torchrun') == []
    assert launch.binding_options(None, 'per_task') == []
