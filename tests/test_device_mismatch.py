"""A GPU case whose program finds no GPU fails, in one line, naming why.

Where a CUDA build of torch meets an older driver, or a container starts
without ``--nv``, ``torch.cuda.is_available()`` is False and a program
that falls back to the CPU trains there and passes with CPU figures. Here
a configuration says this CPU machine has an H100 (tests/configs/
pretend_gpu.py), and GPU cases of the suite's programs run on it.
"""
import re

import pytest

from conftest import BIN, REPO

pytestmark = pytest.mark.integration

CONFIG = REPO / 'tests' / 'configs' / 'pretend_gpu.py'


def reasons(stdout):
    return re.findall(r'\* Reason: (.*)', stdout)


@pytest.mark.parametrize('check', ['CosmoFlow', 'GPT2FineTune'])
def test_gpu_case_without_a_gpu_fails_in_one_line(run_reframe, check):
    proc, _ = run_reframe(
        BIN / 'reframe', '-C', CONFIG, '-c', REPO / 'checks', '-r',
        '-n', f'^{check}%scale=1_proc%launch_mode=per_task',
        '-S', 'size=tiny', '-x', '.*train_precision=(bf16|fp16).*')
    assert proc.returncode == 1, proc.stdout[-3000:]
    found = reasons(proc.stdout)
    assert len(found) == 1, proc.stdout[-3000:]
    assert re.search(r'job failed .*hpcml: error: this job expects a GPU, '
                     r'but torch \S+ \(built for cuda [\d.]+\) sees no GPU',
                     found[0]), found[0]


def test_v100_runs_fp16_where_the_size_says_bf16(run_reframe):
    '''V100s have no bf16 hardware (torch runs it emulated, many times
    slower): the benchmark size's bf16 becomes fp16, with its loss
    scaling; bf16 asked for is skipped with the reason.'''
    env = {'HPCML_PRETEND_GPU_MODEL': 'V100'}
    case = '^CosmoFlow%scale=1_proc%launch_mode=per_task'
    proc, var = run_reframe(
        BIN / 'reframe', '-C', CONFIG, '-c', REPO / 'checks', '-n', case,
        '--dry-run', env=env)
    assert proc.returncode == 0, proc.stdout[-3000:]
    script, = (var / 'stage').rglob('rfm_job.sh')
    assert '--size reference' in script.read_text()
    assert '--precision fp16' in script.read_text()
    proc, _ = run_reframe(
        BIN / 'reframe', '-C', CONFIG, '-c', REPO / 'checks', '-n', case,
        '--dry-run', '-S', 'precision=bf16', env=env)
    assert 'V100 has no bf16 hardware' in proc.stdout, proc.stdout[-3000:]
    assert '-S precision=fp16' in proc.stdout
