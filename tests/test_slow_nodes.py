"""The slow node, named (hpctestlib_ml.report.nodes): a node sweep's
single-node runs scored against the partition's other nodes, in the
report's "Slow nodes" section, text and HTML; and the multi-node runs
whose check named a slowest rank. Real sweeps on the project's Slurm
cluster, a node slowed and not: tests/test_reframe_slurm.py."""
import os
import random
import subprocess

import pytest

from conftest import BIN, DATA
from perflog import suite_line, write_suite_perflog
from hpctestlib_ml.report import analysis, history, nodes
from hpctestlib_ml.report.history import Metric, Run

HPCML = BIN / 'hpcml'
NIGHT = 1.8e9
CASE = {'workload': 'cosmoflow', 'resolved_size': 'tiny',
        'scale': '1_node', 'launch_mode': 'per_task', 'num_nodes': 1,
        'procs_per_node': 1, 'batch_size': 4, 'precision': 'fp32',
        'reference_case': 'tiny 1x1 per_task batch=4 fp32'}
NAME = 'CosmoFlow %scale=1_node %launch_mode=per_task'


def sweep_lines(when, figures, name=NAME, case=CASE,
                metric='samples_per_second', unit='samples/s'):
    '''One --distribute=all sweep: a line per node of *figures* (node ->
    value, or None for a failed run), named as ReFrame names them.'''
    return [suite_line(when + i, f'{name} %.part=slurm:ci %.nid={node}',
                       'slurm:ci', case,
                       {} if value is None else {metric: (value, unit)},
                       result='fail' if value is None else 'pass',
                       nodelist=node)
            for i, (node, value) in enumerate(sorted(figures.items()))]


def noisy(count, slow=None, factor=1.0, seed=0, noise=0.02):
    '''Figures of *count* nodes n1..: 200 x (1 + noise), node *slow*
    times *factor*.'''
    rng = random.Random(seed)
    return {f'n{i}': 200 * (1 + rng.uniform(-noise, noise)) *
            (factor if f'n{i}' == slow else 1.0)
            for i in range(1, count + 1)}


def write(directory, lines, check='CosmoFlow',
          metrics=('samples_per_second',)):
    path = directory / 'perflogs' / 'slurm' / 'ci' / f'{check}.log'
    write_suite_perflog(path, lines, list(metrics))
    return directory / 'perflogs'


def report(*args):
    return subprocess.run([HPCML, 'report', *map(str, args)],
                          capture_output=True, text=True, timeout=300,
                          env={**os.environ})


def run(node, value, when=NIGHT, display_name=NAME, nodelist=None,
        result='pass', **params):
    return Run(when, 'slurm', 'ci', display_name, result,
               {**{k: str(v) for k, v in CASE.items()},
                'job_nodelist': node if nodelist is None else nodelist,
                **params},
               {'samples_per_second': Metric(value, 'samples/s')}
               if value is not None else {})


def test_the_score_is_iglewicz_and_hoaglin_s_against_the_others():
    others = [100, 102, 98, 104, 96, 101, 99]
    # median 100, MAD 2: M = 0.6745 (90 - 100) / 2
    score, center = nodes.modified_z(90, others, min_spread=0)
    assert (score, center) == (pytest.approx(-3.3725), 100)
    # the spread the MAD stands for (MAD / 0.6745) is never below
    # min_spread of the median: 5 of 100 here, so 10 below is -2
    score, _ = nodes.modified_z(90, others, min_spread=0.05)
    assert score == pytest.approx(-2.0)
    # lower is better (a step time): higher is slower, the sign turns
    score, _ = nodes.modified_z(110, others, higher_is_better=False,
                                min_spread=0)
    assert score == pytest.approx(-0.6745 * 10 / 2)


def test_every_node_is_scored_against_the_others_exactly():
    '''score_nodes' leave-one-out median and MAD (O(n log n)) are
    modified_z's against the other nodes, to the last bit: odd and even
    counts, ties, a node at the middle.'''
    rng = random.Random(5)
    cases = [[200.0, 60.0], [1.0, 1.0, 1.0], [3.0, 1.0, 2.0],
             [5.0, 5.0, 1.0, 9.0], [2.0, 2.0, 2.0, 7.0, 7.0]]
    for count in (2, 3, 4, 5, 6, 7, 50, 51, 400):
        cases.append([round(rng.gauss(100, 5), rng.choice((0, 1, 4)))
                      for _ in range(count)])
    for values in cases:
        figures = {f'n{i:03d}': [v] for i, v in enumerate(values)}
        for higher in (True, False):
            for floor in (0, 0.05):
                found = nodes.score_nodes(figures, higher, floor)
                for score in found:
                    others = [v[0] for n, v in figures.items()
                              if n != score.node]
                    assert (score.score, score.others) == nodes.modified_z(
                        score.value, others, higher, floor), values


def test_two_nodes_name_the_slower_one_when_it_is_far_enough():
    '''Scored against all nodes, two nodes always score +-0.6745; against
    the other node, the slow one is named, the fast one is not.'''
    scores = {s.node: s for s in nodes.score_nodes(
        {'n1': [200.0], 'n2': [60.0]})}
    assert scores['n2'].slow() and not scores['n1'].slow()
    assert scores['n2'].deviation == pytest.approx(-0.7)
    near = nodes.score_nodes({'n1': [200.0], 'n2': [190.0]})
    assert not any(s.slow() for s in near)


def test_a_slow_node_among_many_is_named_and_only_it():
    for seed in range(20):
        figures = {node: [value] for node, value in
                   noisy(16, slow='n7', factor=0.7, seed=seed).items()}
        slow = [s.node for s in nodes.score_nodes(figures) if s.slow()]
        assert slow == ['n7'], seed


def test_a_node_is_its_one_listed_node_or_the_distribute_parameter():
    assert run('n2', 1.0).node == 'n2'
    assert run('n1,n2', 1.0).node is None        # perflog
    assert run('n[1-2]', 1.0).node is None       # results DB
    # ReFrame's squeue scheduler may not learn a short job's node
    assert run('', 1.0, display_name=f'{NAME} %.part=slurm:ci '
                                                   f'%.nid=n3').node == 'n3'
    assert run('', 1.0).node is None


def test_a_sweep_is_one_case_s_single_node_runs_in_its_latest_window():
    '''Last night's slow n2 is not tonight's; a node's runs count as their
    median; multi-node runs and failed runs carry no figure.'''
    runs = [run('n1', 200.0, NIGHT - 86400), run('n2', 50.0, NIGHT - 86400),
            run('n1', 200.0), run('n2', 198.0), run('n2', 202.0),
            run('n2', 20.0, num_nodes=2, nodelist='n1,n2'),
            run('n3', None, result='fail')]
    found, = nodes.sweeps(runs, analysis.load_weights())
    assert [(s.node, s.value, s.runs) for s in found.nodes] == [
        ('n1', 200.0, 1), ('n2', 200.0, 2)]
    assert found.failed == ['n3'] and not found.slow()
    last_night, = nodes.sweeps(runs[:2], analysis.load_weights())
    assert [s.node for s in last_night.slow()] == ['n2']


def test_the_report_names_the_slow_node_in_text_and_html(tmp_path):
    perflogs = write(tmp_path, sweep_lines(NIGHT, noisy(
        8, slow='n5', factor=0.6)))
    out = report('--perflogs', perflogs, '--out', tmp_path / 'html',
                 '--no-plots')
    assert out.returncode == 0, out.stderr
    section = out.stdout.split('Slow nodes:')[1]
    assert '1 case(s) swept on 8 nodes; slow: n5.' in section
    row, = [line for line in section.splitlines() if ' n5 ' in line]
    assert 'cosmoflow' in row and 'samples_per_second' in row
    deviation, percent, score, count = row.split()[-4:]
    assert -45 < float(deviation) < -35 and percent == '%'    # 0.6 x
    assert float(score) < -nodes.THRESHOLD and count == '8'
    page = (tmp_path / 'html' / 'report.html').read_text()
    assert '<h2>Slow nodes</h2>' in page and '<td>n5</td>' in page


def test_an_even_sweep_names_none(tmp_path):
    perflogs = write(tmp_path, sweep_lines(NIGHT, noisy(8)))
    out = report('--perflogs', perflogs)
    assert out.returncode == 0, out.stderr
    assert '1 case(s) swept on 8 nodes (n1, n2, n3, n4, n5, n6, n7, n8): ' \
           'no slow node' in out.stdout


def test_any_check_joins_with_its_headline(tmp_path):
    '''A component check the registry does not know (a matmul rate per
    node): its first rate figure is its headline.'''
    lines = sweep_lines(NIGHT, noisy(4, slow='n3', factor=0.5),
                        name='MatmulRate %scale=1_node',
                        case={'num_nodes': 1}, metric='gflops',
                        unit='GFLOP/s')
    out = report('--perflogs', write(tmp_path, lines, 'MatmulRate',
                                     ('gflops',)))
    assert out.returncode == 0, out.stderr
    assert 'slow: n3.' in out.stdout


def test_no_section_without_a_sweep(tmp_path):
    lines = [suite_line(NIGHT + i, NAME, 'slurm:ci', CASE,
                        {'samples_per_second': (200.0, 'samples/s')},
                        nodelist='n1') for i in range(3)]
    out = report('--perflogs', write(tmp_path, lines))
    assert out.returncode == 0, out.stderr
    assert 'Slow nodes' not in out.stdout


def test_the_slowest_rank_of_a_multi_node_run_is_listed(tmp_path):
    two = dict(CASE, scale='2_nodes', num_nodes=2,
               slowest_rank='rank 1 on n2, +58 %')
    lines = [suite_line(NIGHT, 'CosmoFlow %scale=2_nodes '
                        '%launch_mode=per_task', 'slurm:ci', two,
                        {'samples_per_second': (95.0, 'samples/s')},
                        nodelist='n1,n2')]
    out = report('--perflogs', write(tmp_path, lines))
    assert out.returncode == 0, out.stderr
    assert 'rank 1 on n2, +58 %' in out.stdout.split('Slow nodes:')[1]


def test_perflogs_without_the_slowest_rank_column_are_read(tmp_path):
    '''Perflogs written before slowest_rank was logged.'''
    path = tmp_path / 'old.log'
    path.write_text(
        'job_completion_time|version|display_name|system|partition|environ|'
        'workload|num_nodes|job_nodelist|result|samples_per_second_value|'
        'samples_per_second_unit\n'
        '2026-11-01T00:00:00+0000|4.10.4|CosmoFlow %scale=1_node '
        '%.nid=n1|slurm|ci|python|cosmoflow|1|n1|pass|200|samples/s\n'
        '2026-11-01T00:00:01+0000|4.10.4|CosmoFlow %scale=1_node '
        '%.nid=n2|slurm|ci|python|cosmoflow|1|n2|pass|50|samples/s\n')
    runs = history.read_perflog(path).runs
    assert [r.params.get('slowest_rank', '') for r in runs] == ['', '']
    found, = nodes.sweeps(runs, analysis.load_weights())
    assert [s.node for s in found.slow()] == ['n2']
    assert nodes.slow_ranks(runs) == []


#: The CI's unslowed sweep: n2 24.9 % below n1 on one VM (SOURCES.md).
UNSLOWED_SWEEP = DATA / 'slurm' / 'unslowed_sweep_ci.log'


def test_a_node_slower_by_no_more_than_the_declared_noise_is_not_slow():
    '''Two nodes of one VM, nothing slowed, 24.9 % apart in the CI: below
    -3.5 against a single other node, but within the 40 % the CI's
    cluster declares; the same gap is slow where the partition declares
    20 % or nothing.'''
    runs = history.read_perflog(UNSLOWED_SWEEP).runs
    for declared, slow in (('40', []), ('20', ['n2']), ('', ['n2'])):
        for r in runs:
            r.params['reference_noise_pct'] = declared
        found, = nodes.sweeps(runs, analysis.load_weights())
        n2 = {s.node: s for s in found.nodes}['n2']
        assert n2.score < -nodes.THRESHOLD
        assert [s.node for s in found.slow()] == slow, declared


def test_the_noise_bounds_a_figure_where_lower_is_better_too():
    score = nodes.NodeScore('n2', 1.3, 1, 1.0, -6.0)
    assert nodes.within_noise(score, 0.35, higher_is_better=False)
    assert not nodes.within_noise(score, 0.25, higher_is_better=False)
    assert not nodes.within_noise(score, None, higher_is_better=False)
    faster = nodes.NodeScore('n2', 0.7, 1, 1.0, 6.0)
    assert nodes.within_noise(faster, 0.0, higher_is_better=False)


def test_the_report_says_a_low_score_was_within_the_noise(tmp_path):
    case = dict(CASE, reference_noise_pct=40)
    perflogs = write(tmp_path, sweep_lines(NIGHT, {'n1': 162.0,
                                                   'n2': 121.7}, case=case))
    out = report('--perflogs', perflogs)
    assert out.returncode == 0, out.stderr
    section = out.stdout.split('Slow nodes:')[1]
    assert ('1 case(s) swept on 2 nodes (n1, n2): no slow node (lowest '
            'score -5.0). Below -3.5 but within its partition\'s declared '
            'noise: n2 -24.9 % (slurm:ci, noise 40 %).') in section, section
