"""``hpcml changes FILE.csv``: the report's detector on series from
anywhere; each kind, each direction, and bad files refused in one line
(one subprocess each: about 1 s)."""
import json
import random
import subprocess

import pytest

from conftest import BIN


def hpcml(*args):
    return subprocess.run([str(BIN / 'hpcml'), 'changes', *map(str, args)],
                          capture_output=True, text=True)


def write(path, header, rows):
    path.write_text(','.join(header) + '\n' +
                    ''.join(','.join(map(str, r)) + '\n' for r in rows))
    return path


@pytest.fixture
def history(tmp_path):
    '''30 nights: throughput 2 % noise, one odd night (row 10), 15 % slower
    from night 25; step time its inverse; a column of names.'''
    rng = random.Random(1)
    rows = []
    for i in range(30):
        value = rng.gauss(100, 2) * (0.85 if i >= 25 else 1)
        value = 60.0 if i == 10 else value
        rows.append((f'2026-10-{i + 1:02d}', f'{value:.3f}',
                     f'{1 / value:.6f}', f'commit{i}'))
    return write(tmp_path / 'nightly.csv',
                 ('time', 'throughput', 'step_time', 'commit'), rows)


def events(proc):
    assert proc.stderr == ''
    return [json.loads(line) for line in proc.stdout.splitlines()]


def test_each_event_a_json_line_in_the_metrics_direction(history):
    proc = hpcml(history, '--column', 'throughput', '--now', '2026-10-31')
    assert proc.returncode == 0
    found = events(proc)
    assert [(e['kind'], e['index'], e['direction']) for e in found] == [
        ('outlier', 10, 'slower'), ('shift', 25, 'slower')]
    shift = found[1]
    assert shift['time'] == '2026-10-26T00:00:00Z' and shift['flagged']
    assert shift['low'] < shift['effect'] < shift['high']
    assert shift['effect'] == pytest.approx(-0.15, abs=0.03)
    assert shift['p'] < 0.001 and shift['file'] == str(history)


def test_lower_is_better_turns_a_rise_into_a_slowdown(history):
    found = events(hpcml(history, '--column', 'step_time',
                         '--lower-is-better', '--now', '2026-10-31'))
    shift, = [e for e in found if e['kind'] == 'shift']
    assert shift['direction'] == 'slower' and shift['effect'] > 0.1
    # Without the option, the same rise is a speed-up.
    found = events(hpcml(history, '--column', 'step_time',
                         '--now', '2026-10-31'))
    shift, = [e for e in found if e['kind'] == 'shift']
    assert shift['direction'] == 'faster' and shift['flagged']


def test_every_numeric_column_is_a_series_and_silence_is_told(history):
    found = events(hpcml(history, '--now', '2026-11-28'))
    assert sorted({e['column'] for e in found}) == ['step_time',
                                                    'throughput']
    silent = [e for e in found if e['kind'] == 'silent']
    assert [(e['column'], e['index']) for e in silent] == [
        ('throughput', 30), ('step_time', 30)]
    assert silent[0]['detail'].startswith('no run for 29.0 days')


def test_a_change_of_spread_is_noise(tmp_path):
    rng = random.Random(2)
    rows = [(rng.gauss(100, 1 if i < 30 else 6),) for i in range(60)]
    found = events(hpcml(write(tmp_path / 'fan.csv', ('throughput',), rows)))
    assert [e['kind'] for e in found] == ['noise']
    assert found[0]['time'] is None and found[0]['direction'] is None
    assert found[0]['detail'].startswith('spread ')


@pytest.mark.parametrize('text, said', [
    ('time,x\n1,2\n0,3\n', 'row 3: time goes back (0): sort the rows'),
    ('time,x\nmonday,2\n', "row 2: time 'monday' is neither Unix seconds"),
    ('x,y\n1,2\n3\n', 'row 3: 1 cells under a header of 2'),
    ('x\n1\nnan\n', "row 3: column 'x': 'nan' is not a finite number"),
    ('x\n1\n2x\n', "row 3: column 'x': '2x' is not a finite number"),
    ('x,x\n1,2\n', "row 1: column 'x' named twice"),
    ('', 'empty: a header row and one row a run are needed'),
    ('time,name\n1,a\n', "no numeric column besides 'time'"),
])
def test_a_bad_file_is_refused_in_one_line_and_the_others_judged(
        tmp_path, history, text, said):
    bad = tmp_path / 'bad.csv'
    bad.write_text(text)
    proc = hpcml(bad, history, '--now', '2026-10-31')
    assert proc.returncode == 2
    assert proc.stderr == f'hpcml changes: {bad}: {said}' + \
        proc.stderr[len(f'hpcml changes: {bad}: {said}'):]
    assert proc.stderr.count('\n') == 1 and 'Traceback' not in proc.stderr
    assert any(json.loads(line)['kind'] == 'shift'
               for line in proc.stdout.splitlines())


def test_a_missing_column_or_file_is_named(tmp_path, history):
    proc = hpcml(history, tmp_path / 'none.csv', '--column', 'tput')
    assert proc.returncode == 2 and proc.stdout == ''
    assert proc.stderr.splitlines() == [
        f"hpcml changes: {history}: no column 'tput' (columns: time, "
        f"throughput, step_time, commit)",
        f'hpcml changes: {tmp_path / "none.csv"}: cannot read: No such file '
        f'or directory']
