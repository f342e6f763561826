"""The MatmulRate component: the one matrix-product measurement (the
program, hpcml cpu-peak and the GPU probes share it), the program on this
CPU with 1 and 2 ranks, its parser, and the peaks the rates are set
against."""
import sys

import pytest

from conftest import REPO, run_module
from hpctestlib_ml import cpu_peak
from hpctestlib_ml.parsers import matmul_rate as parser
from hpctestlib_ml.workloads import matmul_rate as workload

sys.path.insert(0, str(REPO / 'src'))
import matmul_rate  # noqa: E402


def test_a_product_is_2n3_flops_and_the_rate_is_theirs_over_the_time():
    import torch
    a, b, out = matmul_rate.operands(64, 'fp32', torch.device('cpu'))
    assert matmul_rate.product_flops(64) == 2 * 64 ** 3
    assert torch.allclose(out.copy_(a @ b), a @ b)
    rate = matmul_rate.mean_rate(a, b, out, iterations=3, warmup=1)
    assert 1e6 < rate < 1e14
    assert matmul_rate.best_rate(a, b, out, budget_s=0.05) >= rate * 0.5


def test_every_precision_has_its_dtype_and_math_mode():
    import torch
    for precision, (dtype, tf32) in matmul_rate.PRECISIONS.items():
        a, _, _ = matmul_rate.operands(8, precision, torch.device('cpu'))
        assert a.dtype == getattr(torch, dtype)
        assert tf32 == (precision == 'tf32')


def test_hpcml_cpu_peak_measures_with_the_shared_code():
    assert cpu_peak.measure_matmul_flops(size=128, seconds=0.05,
                                         threads=1) > 1e6


def check_own_log(text, world):
    log = parser.training_log(text)
    assert log.world_size == world and log.steps == 3
    assert log.ranks == frozenset(range(world))
    assert log.figures['precisions'] == ['fp32'] and log.figures['n'] == 64
    assert log.figures['fp32_tflops'] >= log.figures['fp32_tflops_min'] > 0
    assert log.figures['fp32_tf32'] is False
    start, stop = log.timed_window
    assert 0 <= stop - start < 600      # ms-resolution stamps
    assert text.count('matmul_rate: ') == 1          # rank 0's settings
    return log


@pytest.mark.parametrize('procs', [1, 2])
def test_the_program_on_cpu_ranks(tmp_path, procs):
    proc = run_module(tmp_path, 'matmul_rate', '--cpu', '--matrix-size',
                      '64', '--iterations', '3', '--products', '2',
                      '--warmup', '1', procs=procs)
    check_own_log(proc.stdout, procs)


def test_gpu_products_run_for_seconds_not_a_few_milliseconds():
    # n 8192 bf16 on an H200 (790 TFLOP/s): 1.39 ms a product; 10 x 10
    # of them were 0.14 s timed. At least 2 s now: 144 per iteration.
    per_product = matmul_rate.product_flops(8192) / 790e12
    assert matmul_rate.products_per_iteration(per_product, 10, 2.0, 10) \
        == 144
    # fp32 (2.2 s for the 100 products) keeps its count; so does a size
    # that asks for no minimum (tiny, on CPUs).
    assert matmul_rate.products_per_iteration(0.022, 10, 2.0, 10) == 10
    assert matmul_rate.products_per_iteration(1e-6, 5, 0.0, 8) == 8


def test_the_warm_up_lasts_its_seconds_and_says_a_product_s_time():
    import time

    import torch
    a, b, out = matmul_rate.operands(64, 'fp32', torch.device('cpu'))
    start = time.perf_counter()
    per_product = matmul_rate.warm_up(a, b, out, 1, min_seconds=0.2)
    assert time.perf_counter() - start >= 0.2
    assert 0 < per_product < 0.2
    assert matmul_rate.warm_up(a, b, out, 0) == 0.0


def test_the_program_times_more_products_where_they_would_be_short(
        tmp_path):
    proc = run_module(tmp_path, 'matmul_rate', '--cpu', '--matrix-size',
                      '64', '--iterations', '3', '--products', '1',
                      '--warmup', '1', '--warmup-seconds', '0.2',
                      '--measure-seconds', '0.5', procs=2)
    products = [int(line.split(' products ')[1].split()[0])
                for line in proc.stdout.splitlines()
                if line.startswith('[matmul_rate]')]
    assert len(products) == 2 and len(set(products)) == 1  # ranks agree
    assert products[0] > 1
    check_own_log(proc.stdout, 2)


def test_the_sizes_time_gpus_and_keep_the_cpu_default_quick():
    sizes = workload.MatmulRateBenchmark.sizes
    assert sizes['benchmark']['warmup_seconds'] >= 1
    assert sizes['benchmark']['measure_seconds'] >= 2
    assert sizes['tiny']['warmup_seconds'] == 0
    assert sizes['tiny']['measure_seconds'] == 0


def test_parser_means_ranks_and_keeps_the_slowest():
    line = ('[matmul_rate] rank {} precision bf16 n 8192 iterations 10 '
            'products 10 tflops {} min 1 max 2 tf32 False\n')
    log = parser.training_log(line.format(0, 700.0) + 'noise\n' +
                              '0: ' + line.format(1, 500.0))
    assert log.figures['bf16_tflops'] == 600.0
    assert log.figures['bf16_tflops_min'] == 500.0
    assert log.world_size == 2 and log.steps == 10


def test_the_data_sheet_peaks_of_each_precision():
    '''tf32 at the TF32 tensor-core rate, fp32 at IEEE fp32's (8x apart
    on an A100), as constants.DEVICE_PEAK_FLOPS has them.'''
    table = workload.peak_table('A100', ('bf16', 'tf32', 'fp32'))
    assert table == {'bf16': 312e12, 'tf32': 156e12, 'fp32': 19.5e12}
    assert workload.describe_peaks('A100 data sheet', table) == \
        'A100 data sheet: bf16 312.0, tf32 156.0, fp32 19.5 TFLOP/s per GPU'
    assert workload.peak_table('nope', ('bf16',)) == {}


def test_a_tf32_rate_that_ran_ieee_fp32_is_a_problem():
    # NVIDIA_TF32_OVERRIDE=0: the tf32 line says tf32 False; its rate is
    # fp32's, judged against the TF32 peak (an H100's 494.7 TFLOP/s).
    line = ('[matmul_rate] rank 0 precision {} n 8192 iterations 10 '
            'products 10 tflops 50 min 50 max 50 tf32 {}\n')
    overridden = parser.training_log(line.format('tf32', False) +
                                     line.format('fp32', False)).figures
    problems = workload.math_mode_problems(overridden, 'H100-SXM', 'nvidia')
    assert len(problems) == 1 and 'NVIDIA_TF32_OVERRIDE' in problems[0]
    # As it should run: no problem; nor where nothing has TF32 (V100, an
    # AMD GPU, the CPU).
    right = parser.training_log(line.format('tf32', True) +
                                line.format('fp32', False)).figures
    assert workload.math_mode_problems(right, 'H100-SXM', 'nvidia') == []
    assert workload.math_mode_problems(overridden, 'V100', 'nvidia') == []
    assert workload.math_mode_problems(overridden, 'MI300X', 'amd') == []
    assert workload.math_mode_problems(overridden, None, None) == []
    # fp32 on TF32 is one too, wherever it happens.
    tf32_fp32 = parser.training_log(line.format('fp32', True)).figures
    assert 'fp32_tflops ran on TF32' in workload.math_mode_problems(
        tf32_fp32, 'A100', 'nvidia')[0]
