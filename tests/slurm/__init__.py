"""The project's throwaway Slurm cluster (cluster.sh), seen from the tests."""
import os
import pathlib
import shutil
import subprocess
import time

SCRIPT = pathlib.Path(__file__).resolve().parent / 'cluster.sh'


def why_unavailable(accounting=False):
    '''Why this machine cannot start the cluster, or None if it can.'''
    if os.geteuid() != 0:
        return 'the Slurm cluster needs root (slurmd starts jobs)'
    daemons = ['slurmctld', 'slurmd', 'munged', 'unshare']
    if accounting:
        daemons += ['slurmdbd', 'mariadbd']
    missing = [d for d in daemons if shutil.which(d) is None]
    if missing:
        flag = ' --accounting' if accounting else ''
        return (f'{", ".join(missing)} not installed: run '
                f'`tests/slurm/cluster.sh install{flag}` as root')
    return None


def read_env_file(path):
    '''The ``export NAME=value`` lines of cluster.sh's env.sh as a dict.'''
    env = {}
    for line in pathlib.Path(path).read_text().splitlines():
        if line.startswith('export '):
            name, _, value = line[len('export '):].partition('=')
            env[name] = value
    return env


class Cluster:
    '''A running cluster: its directory, environment and Slurm commands.'''

    def __init__(self, directory, accounting):
        self.directory = pathlib.Path(directory)
        self.accounting = accounting
        self.env = read_env_file(self.directory / 'env.sh')

    @classmethod
    def start(cls, directory, accounting):
        args = [str(SCRIPT), 'start', str(directory)]
        if accounting:
            args.append('--accounting')
        subprocess.run(args, check=True, timeout=180, stdin=subprocess.DEVNULL)
        return cls(directory, accounting)

    def stop(self):
        subprocess.run([str(SCRIPT), 'stop', str(self.directory)],
                       timeout=180, stdin=subprocess.DEVNULL)

    def run(self, *args, check=True):
        return subprocess.run(args, env={**os.environ, **self.env},
                              check=check, capture_output=True, text=True,
                              timeout=60)

    def active_jobs(self):
        '''Ids of the jobs pending, running or completing.'''
        out = self.run('squeue', '-h', '-o', '%i').stdout
        return out.split()

    def drain(self, node, reason='hpcml-test'):
        self.run('scontrol', 'update', f'nodename={node}', 'state=drain',
                 f'reason={reason}')

    def resume(self, node):
        self.run('scontrol', 'update', f'nodename={node}', 'state=resume')

    def _script(self, command, *args):
        subprocess.run([str(SCRIPT), command, str(self.directory),
                        *map(str, args)], check=True, timeout=60,
                       stdin=subprocess.DEVNULL, capture_output=True)

    def slow(self, node, percent=20):
        '''Hold *node*'s slurmd and its jobs to *percent* % of one core
        (``cluster.sh slow``; undo with :meth:`unslow`).'''
        self._script('slow', node, percent)

    def unslow(self, node):
        self._script('unslow', node)

    def limit_memory(self, node, mib):
        '''Limit *node*'s slurmd and its jobs to *mib* MiB of memory
        together (``cluster.sh limit-memory``; undo with
        :meth:`unlimit_memory`).'''
        self._script('limit-memory', node, mib)

    def unlimit_memory(self, node):
        self._script('unlimit-memory', node)

    def node_exec(self, node, *command):
        '''Run *command* in *node*'s mount namespace (``cluster.sh
        node-exec``): what it mounts is that node's own.'''
        self._script('node-exec', node, *command)

    def wait_idle(self, timeout=60):
        '''Wait until no job is active; True if that happened in time.'''
        deadline = time.monotonic() + timeout
        while time.monotonic() < deadline:
            if not self.active_jobs():
                return True
            time.sleep(1)
        return False

    def processes(self, **environ):
        '''PIDs of the cluster's job processes whose environment has all of
        *environ* (e.g. ``RANK='1'``).'''
        marker = f'HPCML_SLURM_CLUSTER={self.directory}'
        wanted = {f'{k}={v}' for k, v in environ.items()}
        pids = []
        for proc in pathlib.Path('/proc').iterdir():
            if not proc.name.isdigit():
                continue
            try:
                entries = set((proc / 'environ').read_bytes().decode(
                    errors='replace').split('\0'))
            except OSError:
                continue
            if marker in entries and wanted <= entries:
                pids.append(int(proc.name))
        return pids
