"""Ranks that share one standard output write whole lines.

Seen in a CI run: ResNet50TF's two torchrun workers tore each other's
lines (``1.8633\\timages/sec: 5.0 ...``), so the parser missed a rank's
figures and the case failed. On a GPU node four to eight ranks print at
once. Here four ranks of a program that prints like the suite's programs
run through the suite's own torchrun command line and all write to one
file; every line must come out whole.
"""
import os
import re
import socket
import subprocess
import sys

from conftest import REPO
from hpctestlib_ml import launch

LINE = re.compile(r'^rank[0-3] \timages/sec: \d+ \+/- 0\.5 x{40}$')


def free_port():
    with socket.socket() as s:
        s.bind(('127.0.0.1', 0))
        return s.getsockname()[1]


def test_torchrun_ranks_on_one_output_write_whole_lines(tmp_path):
    lines_per_rank = 20000
    executable, options = launch.torchrun_command(
        sys.executable, 'print_storm', [str(lines_per_rank)], 1, 4, '$$')
    script = ' '.join([executable, *options])
    out = tmp_path / 'out.txt'
    env = {**os.environ, 'MASTER_ADDR': '127.0.0.1',
           'MASTER_PORT': str(free_port()), 'HPCML_RENDEZVOUS_ADDRESS':
           '127.0.0.1', 'PET_LOCAL_ADDR': '127.0.0.1',
           'HPCML_RENDEZVOUS_NODE': socket.gethostname(),
           'PYTHONPATH': f'{REPO / "tests" / "programs"}:{REPO / "src"}'}
    with open(out, 'w') as fp:
        subprocess.run(['sh', '-c', script], stdout=fp,
                       stderr=subprocess.PIPE, env=env, cwd=tmp_path,
                       check=True, timeout=300)
    lines = [line for line in out.read_text().splitlines()
             if not line.startswith('hpcml launch:')]
    torn = [line for line in lines if not LINE.match(line)]
    assert not torn[:5], f'{len(torn)} torn lines of {len(lines)}'
    assert len(lines) == 4 * lines_per_rank
