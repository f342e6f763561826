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
