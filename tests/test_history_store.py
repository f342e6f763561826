"""The history store (hpctestlib_ml/report/store*.py): the report's and the
references' figures are the same with it as from the perflogs line by
line, on generated histories (training cases over two systems and header
generations; node sweeps) and on the project's real ones; it reads only
what the perflogs gained; it is rebuilt when missing, stale, older or
unreadable (saying so, in one line, only for the last)."""
import collections
import contextlib
import gzip
import io
import json
import math
import os
import pathlib
import shutil
import subprocess

import pytest

from conftest import BIN, under_a_limit
from perflog_history import generate, generate_sweeps
from hpctestlib_ml import cli
from hpctestlib_ml.report import history, store, store_update

REAL = pathlib.Path(__file__).parent / 'data' / 'history'


def hpcml(argv, store_dir):
    '''(exit status, stdout lines without the timing, stderr) of an hpcml
    command run here, with the stores in *store_dir* (or ``off``).'''
    old = os.environ.get(store.STORE_ENV)
    os.environ[store.STORE_ENV] = str(store_dir)
    out, err = io.StringIO(), io.StringIO()
    try:
        with contextlib.redirect_stdout(out), contextlib.redirect_stderr(err):
            status = cli.main([str(a) for a in argv])
    finally:
        if old is None:
            os.environ.pop(store.STORE_ENV)
        else:
            os.environ[store.STORE_ENV] = old
    lines = [line for line in out.getvalue().splitlines()
             if not line.startswith('report took')]
    return status, lines, err.getvalue()


def same_with_and_without(argv, stores):
    '''The command's output with the store equals its output without.'''
    without = hpcml(argv, 'off')
    with_it = hpcml(argv, stores)
    assert with_it == without
    return with_it


@pytest.fixture(scope='module')
def histories(tmp_path_factory):
    root = tmp_path_factory.mktemp('histories')
    generate(root / 'training', days=60, slowdown=('BERTLarge', 4, 0.8))
    generate_sweeps(root / 'sweeps', nodes=40, days=30, checks=4,
                    slow_node=(7, 0.6))
    return root


REPORTS = [
    [],
    ['--system', 'booster:gpu'],
    ['--since', '2026-10-20', '--until', '2026-10-28'],
    ['--compare', 'booster:gpu', 'newcluster:gpu'],
    ['--workload', 'bert', '--last', '5'],
]


@pytest.mark.parametrize('extra', REPORTS, ids=lambda a: ' '.join(a) or
                         'plain')
def test_generated_training_history(histories, tmp_path, extra):
    status, lines, _ = same_with_and_without(
        ['report', '--perflogs', histories / 'training', '--no-plots',
         *extra], tmp_path / 'stores')
    assert status in (0, 1) and len(lines) > 5


def test_node_sweeps_with_the_training_history(histories, tmp_path):
    _, lines, _ = same_with_and_without(
        ['report', '--perflogs', histories / 'sweeps',
         histories / 'training', '--no-plots'], tmp_path / 'stores')
    assert any('slow: nid000007' in line for line in lines)


def test_baseline_saved_and_scored(histories, tmp_path):
    logs = histories / 'training'
    for name, store_dir in (('off', 'off'), ('on', tmp_path / 'stores')):
        saved = hpcml(['report', '--perflogs', logs, '--system',
                       'booster:gpu', '--save-baseline',
                       tmp_path / f'{name}.json', '--no-plots'], store_dir)
        assert saved[0] in (0, 1), saved
    cases = [json.loads((tmp_path / f'{n}.json').read_text())['cases']
             for n in ('off', 'on')]
    assert cases[0] == cases[1]
    same_with_and_without(['report', '--perflogs', logs, '--system',
                           'newcluster:gpu', '--baseline',
                           tmp_path / 'off.json', '--no-plots'],
                          tmp_path / 'stores')


def test_references(histories, tmp_path):
    same_with_and_without(['references', '--system', 'big:gpu',
                           '--perflogs', histories / 'sweeps'],
                          tmp_path / 'stores')


@pytest.mark.parametrize('name', sorted(p.name for p in REAL.iterdir()
                                        if p.is_dir()))
def test_the_projects_real_histories(name, tmp_path):
    logs = REAL / name / 'perflogs'
    same_with_and_without(['report', '--perflogs', logs, '--no-plots'],
                          tmp_path / 'stores')
    same_with_and_without(['references', '--system', 'local',
                           '--perflogs', logs], tmp_path / 'stores')


def test_a_night_reads_only_the_new_lines(histories, tmp_path, monkeypatch):
    '''Appended lines are all an update reads; a file rotated by ReFrame
    (.log -> .log.h0, a new header) and a last line without its newline
    (a session killed while writing) read as the line reader reads them.'''
    logs = tmp_path / 'perflogs'
    shutil.copytree(histories / 'sweeps', logs)
    stores = tmp_path / 'stores'
    monkeypatch.setenv(store.STORE_ENV, str(stores))
    path = logs / 'big' / 'gpu' / 'Storage.log'
    lines = path.read_text().splitlines()
    with store.open_store(logs) as kept:
        assert kept.update() == 0           # up to date: nothing read
        runs = kept.counts()[0]
        with open(path, 'a') as fp:
            fp.write('\n'.join(lines[-3:]) + '\n')
        assert kept.update() == 3
        assert kept.counts()[0] == runs + 3
    with open(path, 'a') as fp:
        fp.write(lines[-1][:40])            # cut short: no newline
    same_with_and_without(['report', '--perflogs', logs, '--no-plots'],
                          stores)
    with open(path, 'a') as fp:
        fp.write(lines[-1][40:] + '\n' + lines[-2] + '\n')
    same_with_and_without(['report', '--perflogs', logs, '--no-plots'],
                          stores)
    os.rename(path, str(path) + '.h0')
    path.write_text(lines[0] + '|extra\n' + lines[-1] + '|x\n')
    status, out, err = same_with_and_without(
        ['report', '--perflogs', logs, '--no-plots'], stores)
    assert err == ''


def test_missing_stale_and_older_stores_are_rebuilt_silently(
        histories, tmp_path):
    logs = histories / 'training'
    stores = tmp_path / 'stores'
    first = hpcml(['report', '--perflogs', logs, '--no-plots'], stores)
    directory = store.store_dir(stores, logs)
    manifest = os.path.join(directory, 'manifest.json')
    data = json.loads(open(manifest).read())
    data['format'] = store.FORMAT - 1
    open(manifest, 'w').write(json.dumps(data))
    assert hpcml(['report', '--perflogs', logs, '--no-plots'],
                 stores) == first
    os.remove(manifest)
    assert hpcml(['report', '--perflogs', logs, '--no-plots'],
                 stores) == first
    assert first[2] == ''


@pytest.mark.parametrize('damage', ['part', 'manifest'])
def test_a_corrupt_store_is_rebuilt_with_one_line(histories, tmp_path,
                                                  damage):
    logs = histories / 'training'
    stores = tmp_path / 'stores'
    first = hpcml(['report', '--perflogs', logs, '--no-plots'], stores)
    directory = pathlib.Path(store.store_dir(stores, logs))
    if damage == 'part':
        part = sorted(directory.glob('part-*.parquet'))[0]
        part.write_bytes(part.read_bytes()[:100])
    else:
        (directory / 'manifest.json').write_text('{"format": 1, "sou')
    status, lines, err = hpcml(['report', '--perflogs', logs, '--no-plots'],
                               stores)
    assert (status, lines) == first[:2]
    assert len(err.splitlines()) == 1
    assert 'could not be read' in err and 'rebuilt from the perflogs' in err
    assert hpcml(['report', '--perflogs', logs, '--no-plots'],
                 stores) == first


def test_merging_keeps_every_run(tmp_path, monkeypatch):
    '''FANOUT updates of one size merge into one part; the rows of a
    rewritten file are dropped then.'''
    logs = tmp_path / 'perflogs'
    generate_sweeps(logs, nodes=5, days=2, checks=1)
    monkeypatch.setenv(store.STORE_ENV, str(tmp_path / 'stores'))
    path = logs / 'big' / 'gpu' / 'Collectives.log'
    lines = path.read_text().splitlines()
    for _ in range(store_update.FANOUT + 1):
        with open(path, 'a') as fp:
            fp.write(lines[-1] + '\n')
        with store.open_store(logs) as kept:
            parts = kept.manifest['parts']
    assert len(parts) < store_update.FANOUT
    assert sum(p['rows'] for p in parts) == kept.counts()[0]
    same_with_and_without(['report', '--perflogs', logs, '--no-plots'],
                          tmp_path / 'stores')


def test_a_first_build_of_many_parts_merges_them(tmp_path, monkeypatch):
    '''A build that writes many parts, its last one smaller, merges them
    (the merges once looked at the newest parts only, which the small
    last part stopped: 10.95 million lines stayed 92 parts).'''
    logs = tmp_path / 'perflogs'
    generate_sweeps(logs, nodes=7, days=25, checks=1)
    monkeypatch.setenv(store.STORE_ENV, str(tmp_path / 'stores'))
    monkeypatch.setattr(store_update, 'CHUNK_BYTES', 2000)
    monkeypatch.setattr(store_update, 'CHUNK_ROWS', 10)
    with store.open_store(logs) as kept:
        parts = kept.manifest['parts']
        assert kept.counts()[0] == 7 * 25
    fanout = store_update.FANOUT
    classes = collections.Counter(int(math.log(p['rows'], fanout))
                                  for p in parts)
    assert max(classes.values()) < fanout, [p['rows'] for p in parts]
    assert sum(p['rows'] for p in parts) == 7 * 25
    same_with_and_without(['report', '--perflogs', logs, '--no-plots'],
                          tmp_path / 'stores')


def test_a_store_setting_that_is_no_directory_is_one_line(tmp_path):
    '''Before, a file or an unwritable place there was passed over in
    silence: every report read the perflogs line by line.'''
    (tmp_path / 'perflogs').mkdir()
    (tmp_path / 'a_file').write_text('')
    for setting, why in [(tmp_path / 'a_file', 'not a directory'),
                         (tmp_path / 'a_file' / 'below',
                          'Not a directory'),
                         # Second round, row 39: polars took it for a
                         # bucket; the lock went into ./s3:/bucket/...
                         ('s3://bucket/hpcml-history', 'a URL: the store '
                          'is a directory of this file system')]:
        status, lines, err = hpcml(['report', '--perflogs',
                                    tmp_path / 'perflogs'], setting)
        assert (status, lines) == (2, [])
        assert err == (f"hpcml report: error: HPCML_HISTORY_STORE must be a "
                       f"directory or off, got '{setting}' ({why}): fix "
                       f"the environment variable HPCML_HISTORY_STORE (read "
                       f"by hpctestlib_ml/report/store.py (hpcml report, "
                       f"hpcml references))\n")


def test_a_prefixs_store_lives_in_that_prefix(tmp_path):
    '''``hpcml report --prefix DIR`` keeps the store of DIR's perflogs in
    DIR/history, with the results it copies: before, it went to
    $HPCML_VAR_DIR/history, away from them, and stayed when DIR was
    moved or removed.'''
    results, var = tmp_path / 'results', tmp_path / 'var'
    shutil.copytree(REAL / 'network_degraded' / 'perflogs',
                    results / 'perflogs')
    env = {k: v for k, v in os.environ.items() if k != store.STORE_ENV}
    env['HPCML_VAR_DIR'] = str(var)
    for argv in (['report', '--prefix', results, '--no-plots'],
                 ['references', '--prefix', results, '--system',
                  'local:cpu', '--min-runs', '2']):
        proc = subprocess.run([str(BIN / 'hpcml'), *map(str, argv)], env=env,
                              capture_output=True, text=True, timeout=300)
        assert proc.returncode == 0, proc.stderr
    kept = list((results / 'history').glob('perflogs-*/manifest.json'))
    assert len(kept) == 1, sorted((results / 'history').rglob('*'))
    assert not (var / 'history').exists()


def test_a_perflog_edited_in_place_is_read_again(histories, tmp_path):
    '''An edit that keeps the file's inode and size (an editor, ``dd
    conv=notrunc``, Python's ``r+``): the store read the old figure on
    (the bad-input round, issue 39, row 81); now the report with the store
    is the report without it, after the edit and after an append and a
    second edit (a few seconds).'''
    logs = tmp_path / 'perflogs'
    shutil.copytree(histories / 'training', logs)
    stores = tmp_path / 'stores'
    path = sorted(logs.rglob('BERTLarge.log'))[0]
    argv = ['report', '--perflogs', logs, '--no-plots', '--workload',
            'bert']
    same_with_and_without(argv, stores)
    text = path.read_bytes()
    lines = text.split(b'\n')
    digit = lines[0].split(b'|').index(b'samples_per_second_value')
    fields = lines[3].split(b'|')
    # An early run's figure (the store checks the last bytes it read),
    # its first digit changed: 3139.39 -> 9139.39, its case's maximum.
    changed = (b'9' if fields[digit][:1] != b'9' else b'1') + \
        fields[digit][1:]

    def edit(number, value):
        row = path.read_bytes().split(b'\n')
        cells = row[number].split(b'|')
        cells[digit] = value
        row[number] = b'|'.join(cells)
        with open(path, 'r+b') as fp:
            fp.write(b'\n'.join(row))
    before = os.stat(path)
    edit(3, changed)
    after = os.stat(path)
    assert (after.st_ino, after.st_size) == (before.st_ino, before.st_size)
    status, out, _ = same_with_and_without(argv, stores)
    assert any(changed.decode()[:4] in line for line in out)
    with open(path, 'ab') as fp:
        fp.write(lines[4] + b'\n')
    edit(3, fields[digit])
    same_with_and_without(argv, stores)


def summary(lines):
    '''(runs selected, runs read, files) of a report's summary line.'''
    words = lines[0].split()
    assert words[1:5] == ['runs', 'selected', 'of', words[4]], lines[0]
    return int(words[0]), int(words[4]), int(words[7])


def test_rotated_perflogs_are_read_and_each_run_counted_once(tmp_path):
    '''logrotate's rotated perflogs: a ``copytruncate`` (``C.log`` copied
    to ``C.log.1``, then cut to its header and a new line), then a
    rotation by rename (``.1`` -> ``.2``, compressed, ``C.log`` -> ``.1``
    and a new ``C.log``). Before, ``C.log.1`` dropped out of the report
    without a word (the bad-input round, issue 39, row 82); now every run
    is counted once, with the store and without it, a file renamed is not
    read again, and a cut ``.gz`` is left out in one line (about 1 s).'''
    logs = tmp_path / 'perflogs'
    generate(logs, days=10, dry_runs=0)
    stores = tmp_path / 'stores'
    argv = ['report', '--perflogs', logs, '--no-plots']
    _, lines, _ = same_with_and_without(argv, stores)
    runs = summary(lines)[1]
    assert runs == 2 * 3 * 10 * 4       # systems x checks x days x nodes
    path = logs / 'booster' / 'gpu' / 'BERTLarge.log'
    header, first, *_ = path.read_text().splitlines()

    shutil.copy(path, f'{path}.1')          # copytruncate
    path.write_text(f'{header}\n{first}\n')
    _, lines, err = same_with_and_without(argv, stores)
    assert summary(lines) == (runs + 1, runs + 1, 13) and err == ''

    with store.open_store(logs) as kept:    # rotation by rename
        rotated = pathlib.Path(f'{path}.1').read_bytes()
        with gzip.open(f'{path}.2.gz', 'wb') as out:
            out.write(rotated)
        os.remove(f'{path}.1')
        os.rename(path, f'{path}.1')
        path.write_text(f'{header}\n{first}\n')
        # the .gz (a new file) and the new C.log's line are read; C.log.1
        # is the old C.log renamed
        assert kept.update() == rotated.count(b'\n') - 1 + 1
    _, lines, err = same_with_and_without(argv, stores)
    assert summary(lines) == (runs + 2, runs + 2, 14) and err == ''

    cut = pathlib.Path(f'{path}.3.gz')      # logrotate killed compressing
    cut.write_bytes(pathlib.Path(f'{path}.2.gz').read_bytes()[:300])
    _, lines, err = same_with_and_without(argv, stores)
    assert summary(lines) == (runs + 2, runs + 2, 14)
    assert err.startswith(f'hpcml report: skipped {cut}: not a readable '
                          f'gzip file (') and len(err.splitlines()) == 1
    assert history.is_perflog('C.log.h0.3') and \
        history.is_perflog('C.log-20261128.gz') and \
        not history.is_perflog('C.log.orig')


def damage_a_data_page(part):
    '''300 bytes of zeros written over the middle of *part*'s data pages,
    its footer (the schema, which every report checks) intact, as the
    bad-input round did with random bytes (issue 39, rows 70 and 71).'''
    data = bytearray(part.read_bytes())
    footer = int.from_bytes(data[-8:-4], 'little') + 8
    middle = (4 + len(data) - footer) // 2
    data[middle:middle + 300] = bytes(300)
    part.write_bytes(bytes(data))
    pl = pytest.importorskip('polars')
    pl.read_parquet_schema(part)
    with pytest.raises(pl.exceptions.ComputeError):     # a page, not the
        pl.read_parquet(part)                            # footer


@pytest.mark.parametrize('which', ['part-000000.parquet',
                                   'part-000000.days.parquet'])
def test_a_damaged_data_page_is_rebuilt_with_one_line(histories, tmp_path,
                                                      which):
    '''Before, a page that polars cannot decode under an intact footer was
    a polars traceback at every report and ``hpcml references`` until
    ``history/`` was removed by hand; now the parts are read whole, the
    damaged store rebuilt with one line, and the figures and counts are
    the undamaged store's (about 1 s each).'''
    logs = histories / 'sweeps'
    stores = tmp_path / 'stores'
    commands = (['report', '--perflogs', logs, '--no-plots'],
                ['references', '--system', 'big:gpu', '--perflogs', logs])
    first = [hpcml(argv, stores) for argv in commands]
    assert summary(first[0][1])[1] == 40 * 30 * 4   # nodes x nights x checks
    directory = pathlib.Path(store.store_dir(stores, logs))
    for argv, before in zip(commands, first):
        damage_a_data_page(directory / which)
        status, lines, err = hpcml(argv, stores)
        assert (status, lines) == before[:2]
        assert len(err.splitlines()) == 1, err
        assert f'could not be read ({which}: ' in err and \
            err.endswith('rebuilt from the perflogs\n')
        assert hpcml(argv, stores) == before


@contextlib.contextmanager
def full_disk(directory, monkeypatch, how):
    '''*directory* on a disk that fills while the store is written: a 40
    KiB tmpfs (where this user may mount one), or polars' error injected
    at the write with no space left (``Invalid thrift: transport error``
    is what polars 1.x says of ENOSPC).'''
    directory.mkdir()
    if how == 'tmpfs':
        mounted = subprocess.run(['mount', '-t', 'tmpfs', '-o', 'size=40k',
                                  'tmpfs', str(directory)],
                                 capture_output=True)
        if mounted.returncode:
            pytest.skip('cannot mount a tmpfs here (the injected error '
                        'stands in)')
        try:
            yield
        finally:
            subprocess.run(['umount', str(directory)], check=True)
        return
    pl = pytest.importorskip('polars')
    from hpctestlib_ml.report import store_parts
    written = store_parts.write_part

    def write_part(frame, path):
        written(frame.head(1), f'{path}.partial.tmp')
        os.replace(f'{path}.partial.tmp', f'{path}.partial')
        raise pl.exceptions.ComputeError('parquet: File out of '
                                         'specification: Invalid thrift: '
                                         'transport error')
    statvfs = os.statvfs
    monkeypatch.setattr(store_parts, 'write_part', write_part)
    monkeypatch.setattr(os, 'statvfs', lambda path: os.statvfs_result(
        (4096, 4096, 10, 0, 0, 10, 0, 0, 0, 255))
        if str(path).startswith(str(directory)) else statvfs(path))
    yield


@pytest.mark.parametrize('how', ['tmpfs', 'injected'])
def test_a_full_disk_is_one_line_and_the_perflogs_are_read(
        tmp_path, monkeypatch, how):
    '''Before, a disk that filled while the store was written was a polars
    traceback (``Invalid thrift: transport error``) at every report, and
    left a ``.partial`` file (the bad-input round, issue 39, row 80). Now
    one line says the disk is full, the report is the line reader's, with
    every run, and what the failed update wrote is removed (under 1 s
    each).'''
    logs = tmp_path / 'perflogs'
    generate(logs, days=10, dry_runs=0)
    argv = ['report', '--perflogs', logs, '--no-plots']
    without = hpcml(argv, 'off')
    assert summary(without[1])[1] == 240
    stores = tmp_path / 'full'
    with full_disk(stores, monkeypatch, how):
        for _ in range(2):                  # while the disk stays full
            status, lines, err = hpcml(argv, stores)
            assert (status, lines) == without[:2]
            assert len(err.splitlines()) == 1, err
            assert err.startswith(f'hpcml: the history store {stores}/') \
                and 'could not be written: the disk is full (0 KiB free)' \
                in err and 'HPCML_HISTORY_STORE=DIR' in err
            left = sorted(p.name for p in stores.rglob('*') if p.is_file())
            assert left == ['lock'], left


def test_nul_bytes_are_read_past_in_bounded_memory(tmp_path):
    '''A perflog of 384 MiB of NUL bytes with no newline (what a crash can
    leave), and another whose lines stop for as long: before, both
    readers held the whole stretch, several times over (2 GB ended every
    report in a MemoryError at 6.4 GB; the bad-input round, issue 39, row
    88). Now, under 1 GiB more than the process starts with, the first
    file is left out with one line naming it, the other's long line is
    skipped and counted, and every other run is read, with the store and
    without (about 6 s).'''
    logs = tmp_path / 'perflogs'
    generate(logs, days=10, dry_runs=0)
    with open(logs / 'booster' / 'gpu' / 'Crash.log', 'wb') as fp:
        fp.truncate(384 << 20)
    cut = logs / 'newcluster' / 'gpu' / 'MMoCLIP.log'
    header, first, *_ = cut.read_text().splitlines()
    with open(cut, 'r+b') as fp:
        fp.truncate(cut.stat().st_size + (384 << 20))
    with open(cut, 'a') as fp:
        fp.write(f'\n{first}\n')
    argv = ['report', '--perflogs', logs, '--no-plots']
    found = []
    for setting in ('off', tmp_path / 'stores'):
        status, out, err = under_a_limit(argv, 1024,
                                         HPCML_HISTORY_STORE=str(setting))
        assert err == (f'hpcml report: skipped {logs}/booster/gpu/Crash.log: '
                       f'its first line is over 1 MiB long (NUL bytes a '
                       f'crash left?), so it is not a perflog: move it out '
                       f'of the perflog directory\n'), err
        lines = [line for line in out.splitlines()
                 if not line.startswith('report took')]
        assert lines[0].startswith(
            '241 runs selected of 241 read from 12 files; ignored: 0 '
            'dry-run lines (no values), 1 unreadable lines skipped (1 over '
            '1 MiB long')
        found.append((status, lines))
    assert found[0] == found[1]
