"""The suite's own lines, from the programs to the checks: each has one
writer (``src/hpcml_log.py``, which every program uses) and the parser
reads what it writes."""
import re
import sys

import pytest

from conftest import REPO
from hpctestlib_ml.parsers import hpcml_records, timed_window

sys.path.insert(0, str(REPO / 'src'))
import hpcml_log  # noqa: E402


@pytest.mark.parametrize('start, stop', [(1764000000.125, 1764000012.625),
                                         (1.0, 2.0)])
def test_the_timed_region_written_is_the_one_read(start, stop, capsys):
    hpcml_log.emit_timed_region(start, stop)
    text = 'loss 1.0\n' + capsys.readouterr().out + 'done\n'
    assert timed_window.from_suite_line(text) == (start, stop)


def test_the_records_written_are_the_ones_read(capsys):
    hpcml_log.emit('device', rank=1, kind='cpu', backend='cpu')
    hpcml_log.emit_timing(1, 9, 0.5, 4.5)
    text = capsys.readouterr().out
    device, = hpcml_records.records(text, 'device')
    timing, = hpcml_records.records(text, 'timing')
    assert device['rank'] == 1 and device['kind'] == 'cpu'
    assert (timing['steps'], timing['data_s'], timing['compute_s']) == (
        9, 0.5, 4.5)


#: What a program wrote by hand that hpcml_log writes: a record's or the
#: timed region's text in a literal.
BY_HAND = re.compile(r'\[hpcml\] (timed region|device|memory|timing|'
                     r'rank_compute)\b')


def test_no_program_writes_them_by_hand():
    '''The timed region's line was printed by hand in six programs while
    a writer of it sat in the parser, called by tests alone.'''
    found = []
    for path in sorted((REPO / 'src').rglob('*.py')):
        if path.name == 'hpcml_log.py':
            continue
        for number, line in enumerate(path.read_text().splitlines(), 1):
            code = line.split('#')[0]
            if BY_HAND.search(code) and ("f'" in code or "'" in code) and \
                    '``' not in code:
                found.append(f'{path.relative_to(REPO)}:{number}')
    assert found == []
