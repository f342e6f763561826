"""The report ties a training change to the component benchmark that moved
with it (hpctestlib_ml.report.components), on runs as the perflogs hold
them: first the logic on runs written here, then a real history
(tests/data/history/network_degraded: the suite run on this machine, the
second half with its loopback network rate-limited; bench/
component_history.sh made it)."""
import pathlib

import pytest

from conftest import DATA
from hpctestlib_ml.report import analysis, components
from hpctestlib_ml.report.history import Metric, Run, read_perflogs

WHERE = ('local', 'cpu')
DAY = 86400.0


def run(day, workload, check, figures, node='n1', case='tiny 1x2'):
    return Run(1.8e9 + day * DAY, *WHERE,
               f'{check} %scale=2_procs %launch_mode=torchrun', 'pass',
               {'workload': workload, 'reference_case': case,
                'job_nodelist': node, 'resolved_size': 'tiny'},
               {name: Metric(value, unit) for name, (value, unit)
                in figures.items()})


def history(network_after=1.0, storage_after=1.0, days=12):
    '''Training slows by 30 % from day 6 on; the collectives' bus
    bandwidth and the storage's write rate change by the factors given.'''
    runs = []
    for day in range(days):
        late = day >= days // 2
        jitter = 1 + 0.01 * (day % 3)
        runs.append(run(day, 'cosmoflow', 'CosmoFlow', {
            'samples_per_second': (100 * jitter * (0.7 if late else 1),
                                   'samples/s')}))
        runs.append(run(day + 0.1, 'collectives', 'Collectives', {
            'allreduce_busbw_GBps': (
                2.0 * jitter * (network_after if late else 1), 'GB/s'),
            'allreduce_latency_us': (50 * jitter, 'us')}))
        runs.append(run(day + 0.2, 'storage', 'Storage', {
            'checkpoint_write_GBps': (
                1.0 * jitter * (storage_after if late else 1), 'GB/s')}))
    return runs


def flagged(runs):
    rows = analysis.table(runs, analysis.load_weights())
    return [r for r in rows if r.flagged and r.workload == 'cosmoflow']


def test_the_component_that_moved_with_the_change_is_named():
    row, = flagged(history(network_after=0.6))
    assert row.component.startswith(
        'likely cause: network, allreduce_busbw_GBps -40% since ')
    assert row.component.endswith(' on n1')


def test_the_largest_harmful_move_wins_and_gains_are_not_causes():
    row, = flagged(history(network_after=0.8, storage_after=0.5))
    assert row.component.startswith('likely cause: file system, '
                                    'checkpoint_write_GBps -50%')
    row, = flagged(history(network_after=1.5))       # got faster
    assert row.component == ''


def test_nothing_moved_names_nothing():
    row, = flagged(history())
    assert row.component == ''


def test_a_sweep_names_the_node_that_moved():
    runs = [r for r in history() if r.workload == 'cosmoflow']
    for day in range(12):
        for node in ('n1', 'n2'):
            slow = node == 'n2' and day >= 6
            runs.append(run(day + 0.1, 'collectives', 'Collectives', {
                'allreduce_busbw_GBps': (2.0 * (0.5 if slow else 1)
                                         * (1 + 0.01 * (day % 3)), 'GB/s')},
                node=node))
    moved = components.moved_components(
        runs, 'local:cpu', (1.8e9 + 5 * DAY, 1.8e9 + 7 * DAY))
    assert moved[0].nodes == ['n2']
    assert moved[0].describe().endswith(' on n2')


def test_a_component_that_changed_another_night_is_not_the_cause():
    '''The network slowed three nights after the training case did: not
    what changed with it.'''
    runs = [r for r in history() if r.workload == 'cosmoflow']
    for day in range(12):
        runs.append(run(day + 0.1, 'collectives', 'Collectives', {
            'allreduce_busbw_GBps': (2.0 * (0.5 if day >= 9 else 1)
                                     * (1 + 0.01 * (day % 3)), 'GB/s')}))
    row, = flagged(runs)
    assert row.component == ''


REAL = DATA / 'history' / 'network_degraded'


@pytest.mark.skipif(not REAL.is_dir(), reason='history not recorded')
def test_a_real_history_with_the_network_degraded_names_the_network():
    data = read_perflogs(sorted(str(p) for p in REAL.rglob('*.log')))
    rows = analysis.table(data.runs, analysis.load_weights())
    trained = [r for r in rows if r.flagged and r.workload != 'collectives']
    assert trained, [(r.workload, r.change) for r in rows]
    for row in trained:
        assert row.detected.worse
        assert row.component.startswith('likely cause: network, '), \
            (row.workload, row.component)
