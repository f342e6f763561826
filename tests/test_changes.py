"""Change detection (hpctestlib_ml.report.changes) and the provenance beside
a change (hpctestlib_ml.report.causes) on series with known answers."""
import random

import pytest

from hpctestlib_ml.report import causes, changes
from hpctestlib_ml.report.history import Run


def noisy(rng, n, center=100.0, spread=0.05):
    return [rng.gauss(center, spread * center) for _ in range(n)]


def test_unchanged_histories_are_not_flagged():
    '''Pure noise of 10 % (this VM's worst case): at most 2 of 50
    histories of 30 runs flagged (alpha 0.01 on two tests).'''
    rng = random.Random(3)
    flagged = 0
    for _ in range(50):
        values = noisy(rng, 30, spread=0.10)
        found = changes.latest_change(values, list(range(30)))
        flagged += bool(found and found.flagged)
    assert flagged <= 2


def test_a_step_is_found_dated_and_measured():
    rng = random.Random(4)
    values = noisy(rng, 25, spread=0.02) + noisy(rng, 8, 80.0, 0.02)
    found = changes.latest_change(values, [1000 + i for i in range(33)])
    assert found.flagged and found.worse
    assert found.index == 25 and found.when == 1025
    assert found.low < -0.2 + 0.03 and found.high > -0.2 - 0.03
    assert found.p_value < 0.01 and (found.before, found.after) == (10, 8)


def test_lower_is_better_metrics_rise_when_worse():
    rng = random.Random(5)
    step_time = noisy(rng, 20, 1.0, 0.02) + noisy(rng, 6, 1.2, 0.02)
    found = changes.latest_change(step_time, list(range(26)),
                                  higher_is_better=False)
    assert found.flagged and found.worse and found.effect > 0.15


def test_small_changes_are_not_flagged_however_certain():
    values = [100.0 + 0.01 * (i % 3) for i in range(20)] + \
             [98.0 + 0.01 * (i % 3) for i in range(10)]
    found = changes.latest_change(values, list(range(30)))
    assert found is not None and found.p_value < 0.01
    assert not found.flagged        # -2 % < the 5 % practical threshold


def test_two_shifts_each_get_a_change_point():
    rng = random.Random(6)
    values = (noisy(rng, 15, spread=0.02) + noisy(rng, 15, 80.0, 0.02) +
              noisy(rng, 15, 100.0, 0.02))
    points = [k for k, _ in changes.change_points(values)]
    assert points == [15, 30]
    latest = changes.latest_change(values, list(range(45)))
    assert latest.index == 30 and not latest.worse       # the recovery
    assert latest.before == 10 and latest.after == 10


def test_one_odd_run_is_not_a_change():
    rng = random.Random(7)
    values = noisy(rng, 30, spread=0.02)
    values[20] = 40.0
    found = changes.latest_change(values, list(range(30)))
    assert not (found and found.flagged)


def run(when, **provenance):
    return Run(when, 'sys', 'gpu', 'BERTLarge %scale=1_node', 'pass',
               dict(provenance), {})


def test_the_field_that_changed_with_the_slowdown_comes_first():
    base = {'framework_versions': 'torch=2.5.1;transformers=4.40.0',
            'env_switches': 'NCCL_ALGO=Ring', 'gpu_driver': '550.54'}
    nodes = ['n001', 'n002', 'n003']
    before = [run(i, job_nodelist=nodes[i % 3], **base) for i in range(10)]
    after_facts = {**base, 'gpu_driver': '560.28',
                   'framework_versions': 'torch=2.5.1;transformers=4.41.0'}
    after = [run(10 + i, job_nodelist=nodes[(i + 1) % 3], **after_facts)
             for i in range(5)]
    found = causes.differences(before, after)
    assert [d.field for d in found] == ['gpu_driver',
                                        'framework/transformers']
    assert found[0].describe() == 'gpu_driver 550.54 -> 560.28'
    assert causes.likely_cause(before, after).startswith(
        'gpu_driver 550.54 -> 560.28; framework/transformers 4.40.0 -> '
        '4.41.0')


def test_nothing_changed_is_said():
    same = [run(i, gpu_driver='550.54') for i in range(6)]
    assert causes.likely_cause(same[:3], same[3:]).startswith(
        'no provenance difference')


def test_a_gpu_case_that_ran_on_the_cpu_is_named_first():
    '''The runs after a slowdown ran on another device (a driver update
    left torch without a GPU): that, not the driver, is named first.'''
    gpu = 'gpu cuda NVIDIA A100-SXM4-40GB x4'
    before = [run(i, device_ran=gpu, gpu_driver='550.54') for i in range(6)]
    after = [run(6 + i, device_ran='cpu x86_64 x4', gpu_driver='560.28')
             for i in range(4)]
    assert causes.likely_cause(before, after).startswith(
        f'device_ran {gpu} -> cpu x86_64 x4; gpu_driver 550.54 -> 560.28')
