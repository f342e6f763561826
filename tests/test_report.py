"""hpcml report on a generated history (two systems, header generations,
failures, dry-run lines) and on real perflogs and results DB of the suite."""
import json
import os
import sqlite3
import subprocess

import pytest

from conftest import BIN
from perflog import suite_line, write_suite_perflog
from perflog_history import NODES, SPEEDUP, WORKLOADS, generate
from hpctestlib_ml.history_refs import derive
from hpctestlib_ml.report import analysis, history

HPCML = BIN / 'hpcml'


@pytest.fixture(scope='module')
def generated(tmp_path_factory):
    root = tmp_path_factory.mktemp('history')
    lines = generate(root / 'perflogs', days=60,
                     slowdown=('BERTLarge', 4, 0.8))
    return root, lines


def report(*args, var=None):
    env = {**os.environ}
    if var:
        env['HPCML_VAR_DIR'] = str(var)
    return subprocess.run([HPCML, 'report', *map(str, args)], env=env,
                          capture_output=True, text=True, timeout=300)


def test_reads_every_generation_and_ignores_dry_runs(generated):
    root, lines = generated
    data = history.read_perflogs([root / 'perflogs'])
    assert len(data.runs) + data.dry_run_lines == lines
    assert data.dry_run_lines == 2 * len(WORKLOADS) * 5
    assert data.unreadable_lines == 0
    # Both header generations: provenance only in the newer one.
    old = [r for r in data.runs if 'suite_version' not in r.params]
    new = [r for r in data.runs if r.params.get('suite_version')]
    assert old and new and len(old) + len(new) == len(data.runs)
    assert {r.where for r in data.runs} == {'booster:gpu', 'newcluster:gpu'}


def test_table_counts_failures_and_sees_a_slowdown(generated):
    root, _ = generated
    runs = history.read_perflogs([root / 'perflogs']).runs
    rows = analysis.table(analysis.select(runs, system='booster:gpu'),
                          analysis.load_weights(), last=10)
    assert len(rows) == len(WORKLOADS) * len(NODES)
    assert sum(r.runs for r in rows) == 60 * len(rows)
    assert 0 < sum(r.failures for r in rows) < 0.12 * 60 * len(rows)
    bert4, = [r for r in rows if r.workload == 'bert' and 'scale=4_nodes'
              in r.case]
    assert bert4.change == pytest.approx(-0.2, abs=0.03)
    others = [r.change for r in rows if r is not bert4]
    assert max(abs(c) for c in others) < 0.05


def test_the_slowdown_is_flagged_dated_and_its_cause_named(generated):
    '''booster's driver update 10 days before the end slowed one case by
    20 %: only that case is flagged, dated to the first slow run, with the
    driver named first; every other case (2 % noise, 60 days, a driver
    update that did not slow it) is not a false alarm.'''
    root, _ = generated
    runs = history.read_perflogs([root / 'perflogs']).runs
    rows = analysis.table(runs, analysis.load_weights(), last=10)
    flagged = [r for r in rows if r.flagged]
    assert [(r.workload, r.where) for r in flagged] == [('bert',
                                                         'booster:gpu')]
    bert4, = flagged
    assert 'scale=4_nodes' in bert4.case
    found = bert4.detected
    assert found.worse and found.low < -0.15 and found.high > -0.25
    assert found.low <= found.effect <= found.high
    slow = [r for r in runs if r.display_name == bert4.case and
            r.where == 'booster:gpu' and r.result == 'pass' and
            r.params.get('gpu_driver') == '560.28']
    assert found.when == min(r.time for r in slow)
    assert bert4.cause.startswith('gpu_driver 550.54 -> 560.28')


def test_report_leads_with_what_changed(generated):
    root, _ = generated
    result = report('--perflogs', root / 'perflogs', '--system',
                    'booster:gpu')
    text = result.stdout
    assert text.index('What changed:') < text.index('workload  ')
    changed = text[text.index('What changed:'):text.index('workload  ')]
    assert 'bert booster:gpu' in changed and 'slower' in changed
    assert 'what changed: gpu_driver 550.54 -> 560.28' in changed


def test_score_of_the_faster_system_against_the_baseline(generated, tmp_path):
    root, _ = generated
    logs = root / 'perflogs'
    saved = report('--perflogs', logs, '--system', 'booster:gpu',
                   '--until', '2026-10-01', '--save-baseline', 'booster',
                   var=tmp_path)
    assert saved.returncode in (0, 1), saved.stderr
    baseline = json.loads((tmp_path / 'baselines/booster.json').read_text())
    assert len(baseline['cases']) == len(WORKLOADS) * len(NODES)

    proc = report('--perflogs', logs, '--system', 'newcluster:gpu',
                  '--baseline', 'booster', var=tmp_path)
    assert proc.returncode in (0, 1), proc.stderr
    overall = float(proc.stdout.split('overall')[1].split()[0])
    # perf_adj carries each side's noise and failures: within a few percent.
    assert overall == pytest.approx(SPEEDUP, rel=0.08)
    for workload in ('clip', 'bert', 'resnet50'):
        assert f'  {workload:<16} ' in proc.stdout


def test_score_formula():
    def runs(values, fails=0):
        out = [history.Run(i, 's', 'p', 'W %scale=1_node', 'pass',
                           {'workload': 'w', 'resolved_size': 'tiny'},
                           {'rate': history.Metric(v, 'x/s')})
               for i, v in enumerate(values)]
        out += [history.Run(99 + i, 's', 'p', 'W %scale=1_node', 'fail',
                            {'workload': 'w', 'resolved_size': 'tiny'}, {})
                for i in range(fails)]
        return out
    headlines = {'w': analysis.Headline('rate', True, 2.0)}
    base = analysis.case_stats(runs([10.0, 10.0]), headlines)
    here = analysis.case_stats(runs([18.0, 22.0], fails=1), headlines)
    stats, = here.values()
    assert stats.rel_std == pytest.approx(0.1)
    assert stats.perf_adj == pytest.approx(20 * 0.9 * (1 - 1 / 3))
    result = analysis.score(here, base, headlines)
    assert result.overall == pytest.approx(1.2)
    lower = {'w': analysis.Headline('rate', False)}
    assert analysis.score(analysis.case_stats(runs([5.0]), lower),
                          analysis.case_stats(runs([10.0]), lower),
                          lower).overall == pytest.approx(2.0)


def test_plots_and_html(generated, tmp_path):
    root, _ = generated
    out = tmp_path / 'report'
    proc = report('--perflogs', root / 'perflogs', '--compare',
                  'booster:gpu', 'newcluster:gpu', '--out', out)
    assert proc.returncode in (0, 1), proc.stderr
    names = sorted(p.name for p in out.iterdir())
    assert names == sorted(['report.html', 'comparison.png'] +
                           [f'{k}_{w}.png' for k in ('timeseries', 'scaling')
                            for w in ('bert', 'clip', 'resnet50')])
    page = (out / 'report.html').read_text()
    assert page.count('data:image/png;base64,') == 7
    assert 'newcluster:gpu / booster:gpu' in proc.stdout
    ratios = [float(l.split()[-1]) for l in proc.stdout.splitlines()
              if l.startswith(('clip ', 'bert ', 'resnet50 ')) and
              l.split()[-1].replace('.', '').isdigit() and '.' in l.split()[-1]]
    assert ratios and all(1.05 < r < 1.4 for r in ratios)


def test_bad_input_names_the_fix(tmp_path):
    proc = report('--perflogs', tmp_path / 'nothing')
    assert proc.returncode == 2
    assert 'no perflogs at' in proc.stderr and '--perflogs' in proc.stderr
    proc = report('--perflogs', tmp_path, '--baseline', 'nope', var=tmp_path)
    assert proc.returncode == 2
    proc = report('--since', 'yesterday-ish', '--perflogs', tmp_path)
    assert 'use 7d, 12h, 30m or an ISO date' in proc.stderr


def test_saving_a_baseline_keeps_the_old_one_if_writing_fails(tmp_path):
    path = tmp_path / 'b.json'
    analysis.save_baseline(path, {}, 'first')
    with pytest.raises(TypeError):
        analysis.save_baseline(path, {'x': object()}, 'second')
    assert json.loads(path.read_text())['description'] == 'first'


def test_results_db_sessions(tmp_path):
    db = tmp_path / 'results.db'
    con = sqlite3.connect(db)
    con.execute('CREATE TABLE sessions(uuid TEXT PRIMARY KEY, '
                'session_start_unix REAL, session_end_unix REAL, '
                'json_blob TEXT, report_file TEXT)')
    for n, (uuid, rate) in enumerate((('aaaa', 10.0), ('bbbb', 12.0))):
        case = {'display_name': 'BERTLarge %scale=1_node', 'system': 'x',
                'partition': 'gpu', 'result': 'pass', 'workload': 'bert',
                'resolved_size': 'tiny', 'num_nodes': 1,
                'job_completion_time_unix': 1.79e9 + n,
                'perfvalues': {'x:gpu:samples_per_second':
                               [rate, 0, None, None, 'samples/s', 'pass']}}
        dry = dict(case, perfvalues={'x:gpu:samples_per_second':
                                     [None, 0, None, None, 'samples/s',
                                      'pass']})
        con.execute('INSERT INTO sessions VALUES (?, ?, ?, ?, ?)',
                    (uuid, n, n, json.dumps({'runs': [{'testcases':
                                                       [case, dry]}]}), ''))
    con.commit()
    con.close()
    data = history.read_results_db(db)
    assert len(data.runs) == 2 and data.dry_run_lines == 2
    proc = report('--db', db, '--compare', 'session:aaaa', 'session:bbbb')
    assert proc.returncode == 0, proc.stderr
    assert '1.200' in proc.stdout


def test_damaged_perflog_lines_are_skipped_and_counted_with_why(tmp_path):
    '''A session killed mid-line, a line from another version (an extra
    field) and a column this version does not know: every whole line is
    read, and the report says what it skipped and why.'''
    logs = tmp_path / 'perflogs' / 'sys' / 'gpu'
    logs.mkdir(parents=True)
    header = ('job_completion_time|display_name|system|partition|result|'
              'a_field_from_the_future|samples_per_second_value|'
              'samples_per_second_unit')
    good = [f'2026-11-0{d}T10:00:00+0000|CosmoFlow %scale=1_node|sys|gpu|'
            f'pass|x|{100 + d}|samples/s' for d in range(1, 6)]
    text = '\n'.join([header, *good[:3],
                      good[3] + '|an extra field',
                      '"' + good[4],               # a stray quote
                      good[4],
                      '2026-11-06T10:00:00+0000|CosmoFlow %scale=1_no'])
    (logs / 'CosmoFlow.log').write_text(text)
    data = history.read_perflogs([tmp_path / 'perflogs'])
    assert len(data.runs) == 4 and data.unreadable_lines == 3
    assert data.skipped == {'short': 1, 'long': 1, 'time': 1}
    result = report('--perflogs', tmp_path / 'perflogs')
    assert result.returncode == 0, result.stderr
    assert '4 runs selected of 4' in result.stdout
    assert '3 unreadable lines skipped (1 with more fields than their ' \
           'header' in result.stdout
    assert '1 cut short: fewer fields than their header' in result.stdout


def repeated_history(directory):
    '''``reframe --repeat 5`` of one MegatronGPT case as the suite logs it
    (ReFrame numbers the runs in their names: ``%.repeat_no=0`` .. ``4``),
    then one run of it with another batch (``-S batch_size=8``: the same
    name, another ``reference_case``).'''
    case = {'workload': 'megatron', 'resolved_size': 'tiny',
            'scale': '1_proc', 'launch_mode': 'per_task', 'num_nodes': 1,
            'procs_per_node': 1, 'batch_size': 4, 'precision': 'fp32',
            'reference_case': 'tiny 1x1 per_task batch=4 fp32 gbs=4'}
    name = 'MegatronGPT %scale=1_proc %launch_mode=per_task'
    lines = [suite_line(1.8e9 + 60 * i, f'{name} %.repeat_no={i}',
                        'local:cpu', case,
                        {'tokens_per_second': (1000.0 + i, 'tokens/s')})
             for i in range(5)]
    lines.append(suite_line(
        1.8e9 + 600, name, 'local:cpu',
        dict(case, batch_size=8,
             reference_case='tiny 1x1 per_task batch=8 fp32 gbs=8'),
        {'tokens_per_second': (1900.0, 'tokens/s')}))
    write_suite_perflog(directory / 'local' / 'cpu' / 'MegatronGPT.log',
                        lines, ['tokens_per_second'])


def test_the_runs_of_a_repeat_are_one_case_in_report_and_references(
        tmp_path):
    '''The five runs of ``--repeat 5`` are one case: one row of 5 runs,
    one case in the score, the same runs as the reference pools; another
    batch is another case in both.'''
    repeated_history(tmp_path / 'perflogs')
    runs = history.read_perflogs([tmp_path / 'perflogs']).runs
    rows = analysis.table(runs, analysis.load_weights())
    assert [(r.case, r.runs, r.median) for r in rows] == [
        ('MegatronGPT %scale=1_proc %launch_mode=per_task', 5, 1002.0),
        ('MegatronGPT %scale=1_proc %launch_mode=per_task', 1, 1900.0)]
    refs, _ = derive.derive(runs, min_runs=2)
    assert [(r.case, r.runs) for r in refs] == [
        ('tiny 1x1 per_task batch=4 fp32 gbs=4', 5)]
    assert list(analysis.case_stats(runs, analysis.load_weights())) == [
        'megatron|MegatronGPT %scale=1_proc %launch_mode=per_task|tiny']
    out = report('--perflogs', tmp_path / 'perflogs')
    assert out.returncode == 0, out.stderr
    assert 'repeat_no' not in out.stdout


def test_the_overall_score_leaves_the_components_out():
    '''A component's ratio is shown (per workload) but not weighed into
    the overall score, which asks how the system trains; a component that
    failed every run does not zero it.'''
    from hpctestlib_ml.report.analysis import CaseStats, score
    from hpctestlib_ml.report import render

    def stats(perf):
        return CaseStats('m', 'x/s', True, 5, 0 if perf else 5, perf, 0.0,
                         perf or 0.0)
    base = {'bert|BERTLarge|tiny': stats(10.0),
            'collectives|Collectives|tiny': stats(2.0)}
    here = {'bert|BERTLarge|tiny': stats(12.0),
            'collectives|Collectives|tiny': stats(0.0)}
    result = score(here, base, {})
    assert result.per_workload == {'bert': 1.2, 'collectives': 0.0}
    assert result.components == ['collectives']
    assert result.overall == pytest.approx(1.2)
    lines = render.score_lines(result, 'base', here, base)
    assert ('  collectives      0.000 (component: not in the overall '
            'score)') in lines


def test_figures_that_cannot_be_are_said_and_judge_nothing():
    '''A case whose timer broke on three nights (0, inf, NaN between
    normal runs): no change is dated from them, the table's median and
    range are the real runs', and the report says so in one line.'''
    from hpctestlib_ml.report import render
    from hpctestlib_ml.report.history import Metric, Run
    values = [100.0 + i % 3 for i in range(20)]
    values[5], values[11], values[17] = 0.0, float('inf'), float('nan')
    runs = [Run(86400 * i, 'sys', 'cpu', 'CosmoFlow %scale=1_proc', 'pass',
                {'workload': 'cosmoflow'},
                {'samples_per_second': Metric(v, 'samples/s')})
            for i, v in enumerate(values)]
    (row,) = analysis.table(runs, analysis.load_weights())
    assert not row.flagged and row.minimum == 100.0 and row.maximum == 102.0
    assert row.impossible == ('3 run(s) logged a figure that cannot be '
                              '(0, inf, nan): left out')
    assert render.change_lines([row])[-1].endswith(
        'samples_per_second: 3 run(s) logged a figure that cannot be (0, '
        'inf, nan): left out')


def test_overlapping_perflog_inputs_are_read_once(generated, tmp_path):
    '''``--perflogs D D/`` locked the history store twice and waited on
    itself forever; ``--perflogs D D/x/C.log`` counted C's runs twice (the
    bad-input round, issue 39). Each run is now read once: the same count
    as ``--perflogs D`` alone (a few seconds each).'''
    root, _ = generated
    perflogs = root / 'perflogs'
    one_log = sorted(perflogs.rglob('*.log'))[0]
    var = tmp_path / 'var'

    def selected(*paths):
        proc = report('--perflogs', *paths, '--no-plots', '--out',
                      tmp_path / 'out', var=var)
        # 1: a case's latest run failed (the generated history has some).
        assert proc.returncode == 1 and proc.stderr == '', proc.stderr
        return proc.stdout.splitlines()[0]
    alone = selected(perflogs)
    assert selected(perflogs, f'{perflogs}/') == alone
    assert selected(perflogs, one_log) == alone
    assert selected(one_log, perflogs) == alone
    assert history.distinct_sources([f'{perflogs}/', perflogs, one_log]) \
        == [f'{perflogs}/']


# Wrong answers (the SilentDataCorruption check), beside the slow nodes

SDC = 'SilentDataCorruption %scale=1_node %launch_mode=per_task'
WRONG_LINE = ('silent data corruption: rank 0 on n2 (cpu x86_64 AVX512, 1 '
              'thread): its answer v1:bad differs from the known-good digest '
              'of this stack v1:good (5 passing runs), and no other rank '
              'computed beside it: its device computed wrongly, or something '
              'changed that the provenance does not show')


def sdc_sweep(tmp_path, wrong_on=None, night=1.78e9):
    '''A node sweep of the check on n1..n3 (perflog lines), the run on
    *wrong_on* failed naming its rank.'''
    lines = []
    for i, node in enumerate(('n1', 'n2', 'n3')):
        wrong = node == wrong_on
        fields = {'workload': 'sdc', 'resolved_size': 'tiny', 'num_nodes': 1,
                  'reference_case': 'tiny 1x1 per_task n=256',
                  'answer_digest': '' if wrong else 'v1:good',
                  'wrong_answer': WRONG_LINE if wrong else ''}
        lines.append(suite_line(night + 60 * i, SDC, 'slurm:ci', fields,
                                {'answer_s': (0.1, 's')},
                                result='fail' if wrong else 'pass',
                                nodelist=node))
    path = tmp_path / 'perflogs' / 'slurm' / 'ci' / 'SilentDataCorruption.log'
    write_suite_perflog(path, lines, ['answer_s'])
    return tmp_path / 'perflogs'


def test_the_node_that_computed_a_wrong_answer_is_listed(tmp_path):
    out = report('--perflogs', sdc_sweep(tmp_path, 'n2'), '--no-plots',
                 '--out', tmp_path / 'html')
    assert out.returncode == 1, out.stderr         # its latest run failed
    section = out.stdout.split('Wrong answers:')[1].split('Slow nodes:')[0]
    row, = [line for line in section.splitlines() if line.startswith('sdc')]
    assert row.split()[:2] == ['sdc', 'slurm:ci']
    assert ' n2 ' in row and ' 0 ' in row
    assert 'its answer v1:bad differs from the known-good digest' in row
    assert '3 run(s) compared answers on 3 nodes (n1, n2, n3); wrong ' \
           'answers on: n2 (1 run).' in section
    page = (tmp_path / 'html' / 'report.html').read_text()
    assert '<h2>Wrong answers</h2>' in page and '<td>n2</td>' in page


def test_a_sweep_of_right_answers_says_so_and_old_perflogs_say_nothing(
        tmp_path):
    out = report('--perflogs', sdc_sweep(tmp_path / 'right'))
    assert out.returncode == 0, out.stderr
    assert '3 run(s) compared answers on 3 nodes (n1, n2, n3): no wrong ' \
           'answer.' in out.stdout
    lines = [suite_line(1.78e9, 'CosmoFlow %scale=1_proc', 'slurm:ci',
                        {'workload': 'cosmoflow'},
                        {'samples_per_second': (9.0, 'samples/s')})]
    path = tmp_path / 'old' / 'perflogs' / 'slurm' / 'ci' / 'CosmoFlow.log'
    write_suite_perflog(path, lines, ['samples_per_second'])
    out = report('--perflogs', tmp_path / 'old' / 'perflogs')
    assert out.returncode == 0, out.stderr
    assert 'Wrong answers' not in out.stdout


def test_a_baseline_of_another_system_is_not_replaced_silently(tmp_path):
    '''``--save-baseline nightly`` for newcluster:gpu replaced booster:gpu's
    baseline of that name without a word, so that a later ``--baseline
    nightly`` scored against the other system (the bad-input round, issue
    39, row 69). Now it is refused in one line naming the fixes, nothing
    written; booster's own baseline is updated as before; and
    ``--replace-baseline`` replaces it (about 8 s).'''
    generate(tmp_path / 'perflogs', days=10)
    var = tmp_path / 'var'
    path = var / 'baselines' / 'nightly.json'

    def save(system, *extra):
        proc = report('--perflogs', tmp_path / 'perflogs', '--no-plots',
                      '--system', system, '--save-baseline', 'nightly',
                      *extra, var=var)
        return proc.returncode, proc.stderr

    def saved():
        data = json.loads(path.read_text())
        runs = sum(c['runs'] for c in data['cases'].values())
        return data.get('system'), len(data['cases']), runs
    assert save('booster:gpu') == (0, '')
    # 3 workloads x 4 node counts, 10 nights each
    assert saved()[1:] == (12, 12 * 10)
    before = path.read_bytes()
    status, err = save('newcluster:gpu')
    assert (status, path.read_bytes()) == (2, before)
    assert err == (f'hpcml report: error: --save-baseline nightly: {path} '
                   f'holds the baseline of --system booster:gpu (saved '
                   f'{json.loads(before)["created"]}), and this report '
                   f'selects --system newcluster:gpu: give another name '
                   f'(e.g. nightly-newcluster-gpu), or add '
                   f'--replace-baseline to replace it (nothing was '
                   f'written)\n')
    assert saved() == ('booster:gpu', 12, 12 * 10)
    assert save('booster:gpu') == (0, '')
    assert saved() == ('booster:gpu', 12, 12 * 10)
    assert save('newcluster:gpu', '--replace-baseline') == (0, '')
    assert saved() == ('newcluster:gpu', 12, 12 * 10)
