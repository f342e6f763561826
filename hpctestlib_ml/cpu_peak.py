"""This CPU's fp32 matmul rate, measured once and cached: the CPU peak for MFU.

A CPU has no data-sheet peak that its BLAS reaches (clocks, vector units
and memory differ per model and setting), so the suite measures what a
large fp32 matmul achieves with all of the node's threads and uses that as
the denominator of MFU on CPU partitions. ``hpcml cpu-peak`` prints it.

The measurement runs in a child interpreter (``python cpu_peak.py
THREADS``): the site config that asks for it is loaded by ReFrame, and
importing PyTorch there would cost every ReFrame start 2-3 s and slow
ReFrame's own bookkeeping, which walks ``sys.modules``, for the rest of the
session.
"""
import os
import platform
import subprocess
import sys

from hpctestlib_ml import cache
from hpctestlib_ml.paths import SRC_DIR


def measure_matmul_flops(size=2048, seconds=2.0, threads=None):
    '''Best fp32 FLOP/s of ``size x size`` matmuls over about *seconds*
    (``matmul_rate.best_rate``, the measurement the ``MatmulRate``
    component and the GPU probes share, in ``src/``).'''
    import torch

    if str(SRC_DIR) not in sys.path:
        sys.path.insert(0, str(SRC_DIR))
    import matmul_rate
    if threads:
        torch.set_num_threads(threads)
    a, b, out = matmul_rate.operands(size, 'fp32', torch.device('cpu'))
    return matmul_rate.best_rate(a, b, out, seconds)


def _cpu_model():
    try:
        with open('/proc/cpuinfo') as fp:
            for line in fp:
                if line.startswith('model name'):
                    return line.split(':', 1)[1].strip()
    except OSError:
        pass
    return platform.processor() or 'unknown'


def _measure_in_child(threads):
    '''measure_matmul_flops() in a child interpreter; None where PyTorch
    is not importable.'''
    child = subprocess.run([sys.executable, __file__, str(threads)],
                           capture_output=True, text=True)
    if child.returncode == 3:
        return None
    if child.returncode:
        from hpctestlib_ml.parsers.failures import failure_line
        raise RuntimeError(f'measuring the CPU peak failed '
                           f'({sys.executable} {__file__} {threads}): '
                           f'{failure_line(child.stderr)}')
    return float(child.stdout)


def cached_peak(cache_dir, threads=None):
    '''The measured peak of this host, from *cache_dir* or measured now.

    The cache is keyed by host name, CPU model and thread count; None if
    PyTorch is not importable here.
    '''
    threads = threads or os.cpu_count()
    key = f'{platform.node()}|{_cpu_model()}|{threads}'
    return cache.cached_value(cache_dir, 'cpu_peak.json', key,
                              'fp32_matmul_flops',
                              lambda: _measure_in_child(threads))


if __name__ == '__main__':
    try:
        print(measure_matmul_flops(threads=int(sys.argv[1])))
    except ImportError:
        sys.exit(3)
