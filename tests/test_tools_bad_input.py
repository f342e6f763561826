"""The hpcml tools on files they cannot read (issue 31, item 3): the rows
of the bad-input trials (../shared/reviews/badinput-2026-11-26.md, "CLI
tools on bad files") and the variants a user would try next. Each
refusal is one line on stderr naming the fix, with no traceback; a file
the tool can read is read as before (the CLEAR rows stay clear)."""
import json
import os
import random
import sqlite3
import subprocess

import pytest

from conftest import BIN, DATA
from perflog import suite_line, write_suite_perflog
from hpctestlib_ml import cli

CFLOG = DATA / 'mllog' / 'cosmoflow_tiny_cpu_2ranks_torchrun.out'
OPENFOLD = DATA / 'mllog' / 'mlperf' / 'openfold_nvidia_v3.0_eos_n260.log'
CASE = {'workload': 'cosmoflow', 'resolved_size': 'tiny', 'scale': '1_proc',
        'launch_mode': 'per_task', 'num_nodes': 1, 'procs_per_node': 1,
        'batch_size': 4, 'precision': 'fp32',
        'reference_case': 'tiny 1x1 per_task batch=4 fp32'}
WEIGHTS = ('cosmoflow: {{metric: {metric}, better: {better}, '
           'weight: {weight}}}\n')


@pytest.fixture
def files(tmp_path):
    '''The trials' inputs, by the names the rows use: a var dir of six
    CosmoFlow runs (VAR, its perflogs PERFLOGS, a results DB), the same
    perflog with one header field fewer (SHORTHEAD), a corrupt DB, a
    CosmoFlow job log (CFLOG) and it cut at line 40 (CUT), EMPTY, BINARY,
    PROSE, weights files, a plain FILE (no directory can be made under
    it).'''
    var = tmp_path / 'var'
    lines = [suite_line(1.8e9 + 60 * i, 'CosmoFlow %scale=1_proc '
                        '%launch_mode=per_task', 'local:cpu', CASE,
                        {'samples_per_second': (10.0 + 0.1 * i,
                                                'samples/s')})
             for i in range(6)]
    perflog = var / 'perflogs' / 'local' / 'cpu' / 'CosmoFlow.log'
    write_suite_perflog(perflog, lines, ['samples_per_second'])
    short = tmp_path / 'shorthead' / 'local' / 'cpu' / 'CosmoFlow.log'
    short.parent.mkdir(parents=True)
    header, *body = perflog.read_text().splitlines()
    short.write_text('\n'.join([header.replace('|precision|', '|'), *body])
                     + '\n')
    db = var / 'results.db'
    con = sqlite3.connect(db)
    con.execute('CREATE TABLE sessions(uuid TEXT PRIMARY KEY, '
                'session_start_unix REAL, session_end_unix REAL, '
                'json_blob TEXT, report_file TEXT)')
    con.execute('INSERT INTO sessions VALUES (?, ?, ?, ?, ?)',
                ('a', 0, 0, json.dumps({'runs': []}) + ' ' * 8000, ''))
    con.commit()
    con.close()
    corrupt = tmp_path / 'corrupt.db'
    data = bytearray(db.read_bytes())
    data[:4096] = random.Random(4).randbytes(4096)
    corrupt.write_bytes(bytes(data))
    paths = {'VAR': var, 'PERFLOGS': var / 'perflogs', 'DB': db,
             'CORRUPTDB': corrupt, 'SHORTHEAD': tmp_path / 'shorthead',
             'CFLOG': CFLOG, 'OPENFOLD': OPENFOLD, 'FILE': tmp_path / 'file',
             'BASELINE': tmp_path / 'b1.json', 'PERFLOG': perflog}
    texts = {
        'CUT': ''.join(CFLOG.read_text().splitlines(True)[:40]),
        'CUTINIT': ''.join(CFLOG.read_text().splitlines(True)[:15]),
        'EMPTY': '', 'PROSE': 'Dear admin,\nthe job did not finish.\n',
        'BROKEN': '[unclosed\n', 'REFS_BROKEN': 'CosmoFlow: [unclosed\n',
        'HIHGER': WEIGHTS.format(metric='samples_per_second',
                                 better='hihger', weight=1),
        'LOWER': WEIGHTS.format(metric='samples_per_second', better='lower',
                                weight=1),
        'PER_SEC': WEIGHTS.format(metric='samples_per_sec', better='higher',
                                  weight=1),
        'NEGATIVE': WEIGHTS.format(metric='samples_per_second',
                                   better='higher', weight=-1),
        'BETER': 'cosmoflow: {metric: samples_per_second, beter: lower}\n',
        'COSMOFLW': 'cosmoflw: {metric: samples_per_second}\n',
        'LIST': '- cosmoflow\n', 'FILE': 'a file\n'}
    for name, text in texts.items():
        paths[name] = tmp_path / f'{name.lower()}.yaml'
        paths[name].write_text(text)
    # A directory of .log files that are not perflogs, one with a line
    # longer than csv's default field limit (128 KiB).
    paths['NOTPERFLOGS'] = tmp_path / 'notperflogs'
    paths['NOTPERFLOGS'].mkdir()
    (paths['NOTPERFLOGS'] / 'job.log').write_text(CFLOG.read_text())
    (paths['NOTPERFLOGS'] / 'dump.log').write_text(
        'a|' + 'x' * 200_000 + '\n' + 'x' * 200_000 + '|y\n')
    for name in ('BINARY', 'REFS_BINARY'):
        paths[name] = tmp_path / f'{name.lower()}.yaml'
        paths[name].write_bytes(random.Random(name).randbytes(10000))
    return paths


def path(files, arg):
    '''*arg* with the name of a file of *files* it starts with (``FILE`` or
    ``FILE/...``) replaced by its path.'''
    name, _, rest = str(arg).partition('/')
    if name not in files:
        return str(arg)
    return str(files[name] / rest) if rest else str(files[name])


def hpcml(files, capsys, *args):
    '''``hpcml ARGS`` in this process (names of *files* replaced by their
    paths): (exit status, stdout, stderr).'''
    status = cli.main([path(files, a) for a in args])
    out, err = capsys.readouterr()
    return status, out, err


#: The trials' rows and their variants: row, hpcml's arguments (names of
#: the *files* fixture), exit status, words of its answer (stdout and
#: stderr together).
ROWS = [
    # 44: another MLPerf workload's log is refused, naming the workload.
    ('44', ('extract', 'bert', 'CFLOG'), 1,
     "the log of MLPerf benchmark 'cosmoflow' (its submission_benchmark), "
     'not of bert: use hpcml extract cosmoflow'),
    ('44', ('extract', 'deeplabv3plus', 'CFLOG'), 1,
     "benchmark 'cosmoflow'"),
    ('44', ('extract', 'alphafold2', 'CFLOG'), 1, "benchmark 'cosmoflow'"),
    ('44', ('extract', 'cosmoflow', 'OPENFOLD'), 1,
     'use hpcml extract alphafold2'),
    # 48, 49: no training log in the file: refused, and said so.
    ('48', ('triage', 'EMPTY'), 1,
     'no training log recognised: the file is empty'),
    ('49', ('triage', 'BINARY'), 1,
     'no training log recognised: the file is binary data'),
    ('49', ('triage', 'PROSE'), 1,
     'no training log recognised: no line of a training run'),
    # 50: a log cut mid-run is not a run that ended well; extract refuses
    # it (issue 39: a run that did not end is not a result), --partial
    # prints what could be read, marked partial.
    ('50', ('triage', 'CUT'), 0,
     "the log ends mid-run: MLPerf's run_start but no run_stop"),
    ('50', ('extract', 'cosmoflow', 'CUT'), 1,
     "not a result (cut): the log ends mid-run: MLPerf's run_start but no "
     'run_stop (at epoch 1, step 12)'),
    ('50', ('extract', '--partial', 'cosmoflow', 'CUT'), 0,
     '"partial": true, "partial_reason": "cut: the log ends mid-run'),
    # The bad-input rerun: cut before run_start, it said "no failure".
    ('50', ('triage', 'CUTINIT'), 0,
     "the log ends mid-run: MLPerf's init_start but no run_start"),
    ('50', ('extract', 'cosmoflow', 'CUTINIT'), 1,
     "not a result (cut): the log ends mid-run: MLPerf's init_start but no "
     'run_start'),
    # 56-58: the unreadable lines are what is wrong, not a missing -r or
    # --system.
    ('56', ('report', '--perflogs', 'SHORTHEAD'), 2,
     'no readable results in'),
    ('56', ('report', '--perflogs', 'SHORTHEAD'), 2,
     'give the file back the header (first line) its lines were written '
     'with'),
    ('57', ('references', '--system', 'local:cpu', '--perflogs',
            'SHORTHEAD'), 2,
     '6 unreadable lines skipped (6 with more fields than their header'),
    ('57', ('references', '--system', 'nosuch', '--perflogs', 'SHORTHEAD'),
     2, 'no readable results in'),
    ('58', ('report', '--perflogs', 'CFLOG'), 2, 'is it a perflog?'),
    # 59, 60: a corrupt results DB, in one line with what to do.
    ('59', ('report', '--db', 'CORRUPTDB'), 2,
     'is not a readable results database (file is not a database): move '
     'it aside'),
    ('60', ('references', '--system', 'local:cpu', '--db', 'CORRUPTDB'), 2,
     'is not a readable results database'),
    ('60', ('report', '--db', 'EMPTY'), 2,
     'is not a readable results database (no such table: sessions)'),
    # 68, 69, 72 and their kin: the weights file is checked.
    ('68', ('report', '--perflogs', 'PERFLOGS', '--weights', 'BROKEN'), 2,
     "is not YAML (line 2, column 1: expected ',' or ']'"),
    ('68', ('report', '--perflogs', 'PERFLOGS', '--weights', 'BINARY'), 2,
     'is not text (byte'),
    ('68', ('report', '--perflogs', 'PERFLOGS', '--weights', 'LIST'), 2,
     'give one entry per workload'),
    ('69', ('report', '--perflogs', 'PERFLOGS', '--weights', 'HIHGER'), 2,
     "cosmoflow: better: 'hihger': use higher or lower"),
    ('69', ('report', '--perflogs', 'PERFLOGS', '--weights', 'NEGATIVE'), 2,
     'cosmoflow: weight: -1: use a number > 0'),
    ('69', ('report', '--perflogs', 'PERFLOGS', '--weights', 'BETER'), 2,
     "unknown key 'beter' (did you mean 'better'?)"),
    ('72', ('report', '--perflogs', 'PERFLOGS', '--weights', 'PER_SEC'), 2,
     "metric 'samples_per_sec' is not one its runs logged (did you mean "
     "'samples_per_second'?)"),
    ('72', ('report', '--perflogs', 'PERFLOGS', '--weights', 'COSMOFLW'), 2,
     "unknown workload 'cosmoflw' (did you mean 'cosmoflow'?)"),
    # 74: --write into a file that is not YAML: nothing written.
    ('74', ('references', '--system', 'local:cpu', '--perflogs', 'PERFLOGS',
            '--min-runs', '2', '--write', 'REFS_BROKEN'), 2,
     'is not YAML (line 2, column 1'),
    ('74', ('references', '--system', 'local:cpu', '--perflogs', 'PERFLOGS',
            '--min-runs', '2', '--write', 'REFS_BINARY'), 2,
     'is not UTF-8): fix it, or --write another file; nothing was written'),
    # 75: where nothing may be written (a file in the way here; a
    # read-only file system below).
    ('75', ('report', '--perflogs', 'PERFLOGS', '--no-plots', '--out',
            'FILE/report'), 2,
     'cannot write', ),
    ('75', ('report', '--perflogs', 'PERFLOGS', '--save-baseline',
            'FILE/b.json'), 2, '--save-baseline: cannot write'),
    # A directory of job logs given as perflogs: a line over 128 KiB
    # was csv's traceback.
    ('rerun', ('report', '--perflogs', 'NOTPERFLOGS'), 2,
     'unreadable lines skipped'),
    # The bad-input rerun: compliance on what is no MLPerf log.
    ('rerun', ('compliance', 'EMPTY'), 2,
     'not an MLPerf log: the file is empty'),
    ('rerun', ('compliance', 'BINARY'), 2,
     'not an MLPerf log: the file is binary data'),
    ('rerun', ('compliance', 'PROSE'), 2,
     'not an MLPerf log: no :::MLLOG line: give the output of an MLPerf '
     'program'),
    # --save-baseline onto results already written: refused, kept.
    ('LOST', ('report', '--perflogs', 'PERFLOGS', '--no-plots',
              '--save-baseline', 'PERFLOG'), 2,
     'is there and is not a baseline of hpcml report, so saving would '
     'destroy it: give another name or path (nothing was written)'),
    ('LOST', ('report', '--perflogs', 'PERFLOGS', '--no-plots',
              '--save-baseline', 'PROSE'), 2, 'is not a baseline'),
    ('LOST', ('report', '--perflogs', 'PERFLOGS', '--no-plots',
              '--save-baseline', 'VAR'), 2, 'is not a baseline'),
    # Second round, row 65: --dir was not checked, and a failed write
    # after the download was blamed on the hub.
    ('65', ('prepare', 'gpt2_finetune', '--dir', 'FILE'), 2,
     'is a file, not a directory: give another --dir'),
    # Second round, row 63: the layout was dropped without a word.
    ('63', ('model-info', 'cosmoflow', '--size', 'tiny', '--memory',
            '--layout', '2x1x1'), 2,
     'cosmoflow trains data-parallel only, so --layout 2x1x1 changes '
     'nothing per device: drop --layout'),
]


@pytest.mark.parametrize('row, args, status, words', ROWS,
                         ids=[f'{r[0]}:{" ".join(r[1])}' for r in ROWS])
def test_each_row(files, capsys, row, args, status, words):
    before = {p: p.read_bytes() for p in files.values() if p.is_file()}
    code, out, err = hpcml(files, capsys, *args)
    # Nothing that was there is changed, and no partial file is left.
    assert before == {p: p.read_bytes() for p in before}
    assert not list(files['VAR'].parent.rglob('*.partial'))
    assert code == status, (out, err)
    assert words in out + err, (out, err)
    if status:
        # The refusal is one line on stderr.
        assert len(err.strip().splitlines()) == 1, err


def test_the_files_a_tool_can_read_are_read_as_before(files, capsys):
    '''The CLEAR rows: a passing log, a log's own workload, a perflog.'''
    code, out, _ = hpcml(files, capsys, 'triage', 'CFLOG')
    assert code == 0 and json.loads(out)['reason'] == \
        'no failure found in the log'
    code, out, err = hpcml(files, capsys, 'extract', 'cosmoflow', 'CFLOG')
    assert code == 0 and err == '' and json.loads(out)['benchmark'] == \
        'cosmoflow'
    code, out, _ = hpcml(files, capsys, 'report', '--perflogs', 'PERFLOGS',
                         '--no-plots')
    assert code == 0 and '6 runs selected of 6' in out


def test_70_a_baseline_is_scored_by_the_weights_it_was_saved_with(
        files, capsys):
    code, _, err = hpcml(files, capsys, 'report', '--perflogs', 'PERFLOGS',
                         '--no-plots', '--weights', 'LOWER',
                         '--save-baseline', 'BASELINE')
    assert code == 0, err
    # The same runs, scored without --weights: 1.000, not 118.5.
    code, out, err = hpcml(files, capsys, 'report', '--perflogs',
                           'PERFLOGS', '--no-plots', '--baseline',
                           'BASELINE')
    assert code == 0, err
    assert '  cosmoflow        1.000' in out
    # Weights that disagree with the baseline's are refused.
    hpcml(files, capsys, 'report', '--perflogs', 'PERFLOGS', '--no-plots',
          '--save-baseline', files['VAR'] / 'b2.json')
    code, out, err = hpcml(files, capsys, 'report', '--perflogs',
                           'PERFLOGS', '--no-plots', '--baseline',
                           files['VAR'] / 'b2.json', '--weights', 'LOWER')
    assert code == 2 and err.count('\n') == 1, err
    assert ('scores cosmoflow: samples_per_second lower is better, the '
            'baseline samples_per_second higher is better') in err


def test_75_out_on_a_read_only_file_system(files, capsys, monkeypatch):
    '''The trials' read-only bind mount, as os.makedirs meets it.'''
    def read_only(path, *args, **kwargs):
        raise OSError(30, 'Read-only file system', str(path))
    monkeypatch.setattr(os, 'makedirs', read_only)
    code, out, err = hpcml(files, capsys, 'report', '--perflogs', 'PERFLOGS',
                           '--out', files['VAR'] / 'rep')
    assert code == 2 and '6 runs selected' in out
    assert err.endswith(f"error: --out {files['VAR'] / 'rep'}: cannot write "
                        f"{files['VAR'] / 'rep'} (Read-only file system): "
                        'pass --out a directory you may write (the report '
                        'above is complete)\n')


@pytest.mark.parametrize('args', [
    ('report', '--perflogs', 'PERFLOGS', '--no-plots'),
    ('references', '--system', 'local:cpu', '--perflogs', 'PERFLOGS',
     '--min-runs', '2'),
    ('triage', 'CFLOG'),
    ('extract', 'cosmoflow', 'CFLOG'),
], ids=['73:report', '73:references', '73:triage', '73:extract'])
def test_73_a_closed_pipe_ends_quietly(files, args):
    '''``hpcml report | head -1``, with the reader gone before the
    command writes (whether ``head`` has gone by then is a race; here it
    always has): no traceback, the exit status a shell gives a process
    SIGPIPE ended.'''
    read_end, write_end = os.pipe()
    os.close(read_end)
    try:
        proc = subprocess.run([BIN / 'hpcml', *(path(files, a)
                                                for a in args)],
                              stdout=write_end, stderr=subprocess.PIPE,
                              text=True, timeout=300)
    finally:
        os.close(write_end)
    assert proc.stderr == ''
    assert proc.returncode == cli.CLOSED_PIPE_STATUS


@pytest.mark.parametrize('args', [
    ('model-info', 'cosmoflow', '--size', 'tiny', '--memory', '--batch',
     '-4'),
    ('model-info', 'cosmoflow', '--size', 'tiny', '--memory', '--batch', '0'),
    ('report', '--perflogs', 'PERFLOGS', '--last', '0'),
    ('references', '--system', 'local:cpu', '--perflogs', 'PERFLOGS',
     '--min-runs', '-1'),
    ('cpu-peak', '--threads', '0'),
], ids=lambda args: ' '.join(args))
def test_a_count_below_one_is_refused(files, capsys, args):
    '''The bad-input rerun: model-info --batch -4 estimated the memory of
    a negative batch.'''
    with pytest.raises(SystemExit) as stop:
        cli.main([path(files, a) for a in args])
    err = capsys.readouterr().err
    assert stop.value.code == 2
    assert f"must be an integer >= 1, got '{args[-1]}'" in err
    assert err.splitlines()[-1].startswith(f'hpcml {args[0]}: error: '
                                           f'argument {args[-2]}: ')


def test_66_a_build_tool_that_is_missing_is_said_before_the_base(
        files, capsys, monkeypatch):
    """Second round, row 66: --tool apptainer without apptainer ran
    debootstrap first (minutes, with a network), then failed."""
    import shutil
    from hpctestlib_ml.commands import image as image_command
    started = []
    monkeypatch.setattr(shutil, 'which',
                        lambda name: None if name == 'apptainer' else name)
    monkeypatch.setattr(image_command.Steps, 'run',
                        lambda *args, **kwargs: started.append(args))
    status, out, err = hpcml(files, capsys, 'image', '--tool', 'apptainer')
    assert (status, out, started) == (2, '', [])
    assert err == ('hpcml image: error: --tool apptainer: apptainer is not '
                   'on PATH: install it, or build with the other tool '
                   '(podman or apptainer)\n')
