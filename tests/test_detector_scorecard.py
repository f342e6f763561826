"""bench/detector_scorecard.py: its matching, its limits, its reading of
the detector's events, and a small run without Otava (issue 38; about
10 s)."""
import importlib.util
import json

import numpy
import pytest

from conftest import REPO

SPEC = importlib.util.spec_from_file_location(
    'detector_scorecard', REPO / 'bench' / 'detector_scorecard.py')
scorecard = importlib.util.module_from_spec(SPEC)
SPEC.loader.exec_module(scorecard)


def test_matching_pairs_the_closest_first_and_each_once():
    assert scorecard.match([10, 12], [11]) == {0: 0}
    assert scorecard.match([10, 12], [12, 11]) == {1: 0, 0: 1}
    assert scorecard.match([10], [13]) == {}
    assert scorecard.match([10], [8, 12]) == {0: 0}


def test_precision_recall_f1():
    assert scorecard.prf(3, 1, 1) == (0.75, 0.75, 0.75)
    assert scorecard.prf(0, 0, 0) == (None, None, None)
    assert scorecard.prf(0, 2, 0)[0] == 0.0


def test_the_limit_is_the_issues_z_test():
    '''Issue 38: 4.7 %, 20 runs before, 3 after, a 10 % drop: about 87 %
    at a 1 % false-alarm rate, 64 % at 0.1 %; 5 after, 88 % at 0.1 %.'''
    power = scorecard.z_power
    assert round(power(0.10, 0.047, 3, 20, 0.01), 2) == 0.87
    assert round(power(0.10, 0.047, 3, 20, 0.001), 2) == 0.64
    assert round(power(0.10, 0.047, 5, 20, 0.001), 2) == 0.88
    assert power(0.10, 0.047, 3, 20, 0.0) == 0.0


def test_false_detections_name_the_truths_they_sat_near():
    case = scorecard.Case('otava', 'combine', 'x', [0.0] * 40,
                          [(10, 'step', True), (25, 'outlier', None)])
    Detection = scorecard.Detection
    found = [Detection('shift', 11, True, False, 0.1),
             Detection('shift', 24, True, True, -0.2)]
    tp, fp, fn, wrong, near = scorecard.score_shifts(case, found)
    assert (tp, fp, fn, wrong, near) == (1, 1, 0, 1, ['outlier'])


def test_the_suite_side_reads_the_detectors_events():
    rng = numpy.random.default_rng(0)
    values = list(100 * (1 + 0.02 * rng.standard_normal(30)))
    values[20:] = [v * 0.8 for v in values[20:]]
    shifts = scorecard.Suite.shifts(scorecard.Suite().detect(values))
    assert [(d.index, d.worse) for d in shifts] == [(20, True)]


def test_the_t_limit_is_below_the_z_limit_and_the_same_far_out():
    '''The issue's 10 % drop at 4.7 %, 20 runs before, 3 after: the
    spread estimated from 20 runs costs a quarter of the power at 0.1 %
    (70 % -> 53 %: below the issue's target of 60 %).'''
    import math
    delta = abs(math.log(0.9))
    z = scorecard.z_power(delta, 0.047, 3, 20, 0.001)
    t = scorecard.t_power(delta, 0.047, 3, 20, 0.001)
    assert 0.5 < t < 0.55 < 0.7 < z < 0.71
    assert scorecard.t_power(delta, 0.047, 3, 2000, 0.001) == \
        pytest.approx(scorecard.z_power(delta, 0.047, 3, 2000, 0.001),
                      abs=0.01)


def test_missing_otava_is_one_line_with_the_install_command(tmp_path,
                                                             capsys):
    assert scorecard.main(['--otava-dir', str(tmp_path)]) == 2
    out = capsys.readouterr().out.strip().splitlines()
    assert len(out) == 1
    assert f'pip install --no-deps --target {tmp_path} apache-otava==' \
        in out[0]


def test_the_corpus_is_the_same_for_a_seed():
    first = scorecard.nightly_cases(2, 2, seed=5)
    again = scorecard.nightly_cases(2, 2, seed=5)
    other = scorecard.nightly_cases(2, 2, seed=6)

    def values(cases):
        return [c.values for group in cases for c in group]
    assert values(first) == values(again) != values(other)


def test_a_small_nightly_run_of_the_suite_alone(tmp_path, capsys):
    '''Needs no Otava.'''
    assert scorecard.main([
        '--only', 'suite', '--corpus', 'nightly', '--trials', '1',
        '--histories', '1', '--otava-dir', str(tmp_path),
        '--json', str(tmp_path / 'a.json')]) == 0
    text = capsys.readouterr().out
    assert '| 4.7 % | -10 % | 20 | 3 |' in text
    result = json.loads((tmp_path / 'a.json').read_text())
    assert set(result['false_alarms']['all']) == {'suite'}
    row = next(r for r in result['detection'] if r['spread'] == '4.7 %'
               and r['effect'] == -0.1 and r['before'] == 20
               and r['after'] == 3)
    assert row['suite']['series'] == 1
    assert 0 <= row['limit_0.1%'] <= 1
