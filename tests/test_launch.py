"""Launch builders: the commands, and the shell they emit run for real in bash."""
import os
import subprocess

import pytest

from hpctestlib_ml import SRC_DIR, launch


def run_shell(lines, tmp_path, env=None, nodes='jwb[0042-0045]',
              nodeaddr='10.1.2.3'):
    '''Run *lines* in bash with a fake scontrol; return the exported vars.'''
    fake = tmp_path / 'bin'
    fake.mkdir(exist_ok=True)
    scontrol = fake / 'scontrol'
    scontrol.write_text(
        '#!/bin/sh\n'
        'if [ "$1 $2" = "show hostnames" ]; then\n'
        f'  echo jwb0042; echo jwb0043; exit 0\n'
        'fi\n'
        f'if [ "$1 $2" = "show node" ]; then\n'
        f'  echo "NodeName=$3 Arch=x86_64 CoresPerSocket=24"\n'
        f'  echo "   NodeAddr={nodeaddr} NodeHostName=$3 Version=22.05"\n'
        f'  exit 0\n'
        'fi\n'
        'exit 1\n')
    scontrol.chmod(0o755)
    script = '\n'.join(lines + ['echo "$MASTER_ADDR $MASTER_PORT"'])
    full_env = {'PATH': f'{fake}:{os.environ["PATH"]}',
                'SLURM_JOB_NODELIST': nodes, **(env or {})}
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
    assert addr == '127.0.0.1'


def test_local_scheduler_uses_fixed_address_and_pid_port(tmp_path):
    lines = launch.rendezvous_env('local', '127.0.0.1')
    assert '$$' in lines[-1]
    addr, port = run_shell(lines, tmp_path)
    assert addr == '127.0.0.1'
    assert launch.PORT_BASE <= port < launch.PORT_BASE + launch.PORT_SPAN


def test_bad_rendezvous_settings():
    with pytest.raises(ValueError, match='needs a Slurm scheduler'):
        launch.rendezvous_env('local', 'nodeaddr')
    with pytest.raises(ValueError, match='only placeholder is {hostname}'):
        launch.rendezvous_env('slurm', '{host}-ib')


@pytest.mark.parametrize('nodes, ppn', [(1, 1), (2, 4), (8, 4), (16, 8)])
def test_torchrun_command(nodes, ppn):
    exe, opts = launch.torchrun_command(
        'python3', 'clip_train', ['--model', 'ViT-L-14'], nodes, ppn,
        '${SLURM_JOB_ID}')
    assert exe == 'python3'
    assert opts[:3] == ['-u', '-m', 'torch.distributed.run']
    assert f'--nnodes={nodes}' in opts
    assert f'--nproc-per-node={ppn}' in opts
    assert '--rdzv-backend=c10d' in opts
    assert '--rdzv-endpoint=$MASTER_ADDR:$MASTER_PORT' in opts
    assert '--rdzv-id=${SLURM_JOB_ID}' in opts
    # '--' keeps torchrun's argparse off the program's options.
    assert opts[-5:] == ['-m', 'clip_train', '--', '--model', 'ViT-L-14']


def test_per_task_command():
    exe, opts = launch.per_task_command('python3', 'clip_train', ['--x', '1'])
    assert exe == str(SRC_DIR / 'rank_env.sh')
    assert opts == ['python3', '-u', '-m', 'clip_train', '--x', '1']


def test_quote_args_leaves_shell_expressions():
    quoted = launch.quote_args(['--report-to', '', 'a b',
                                launch.ShellExpr('--name=x-${SLURM_JOB_ID}')])
    assert quoted == ['--report-to', "''", "'a b'", '--name=x-${SLURM_JOB_ID}']


def test_thread_env():
    assert launch.thread_env(24) == ['export OMP_NUM_THREADS=24']
    assert launch.thread_env(None) == []


def rank_env(env):
    script = SRC_DIR / 'rank_env.sh'
    out = subprocess.run(
        [str(script), 'sh', '-c', 'echo $RANK $LOCAL_RANK $WORLD_SIZE'],
        env={'PATH': os.environ['PATH'], **env}, capture_output=True,
        text=True, check=True)
    return tuple(int(x) for x in out.stdout.split())


def test_rank_env_from_slurm():
    assert rank_env({'SLURM_PROCID': '5', 'SLURM_LOCALID': '1',
                     'SLURM_NTASKS': '8'}) == (5, 1, 8)


def test_rank_env_from_open_mpi():
    assert rank_env({'OMPI_COMM_WORLD_RANK': '3',
                     'OMPI_COMM_WORLD_LOCAL_RANK': '3',
                     'OMPI_COMM_WORLD_SIZE': '4'}) == (3, 3, 4)


def test_rank_env_single_local_task_and_torchrun_values_win():
    assert rank_env({}) == (0, 0, 1)
    assert rank_env({'RANK': '2', 'LOCAL_RANK': '0', 'WORLD_SIZE': '3',
                     'SLURM_PROCID': '0', 'SLURM_NTASKS': '1'}) == (2, 0, 3)
