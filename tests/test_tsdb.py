"""The suite's performance records in VictoriaMetrics (hpctestlib_ml/tsdb):
each perflog line becomes series and reads back as the same run; a real
ReFrame session's records reach a real VictoriaMetrics through ReFrame's
httpjson handler and read back line for line as its perflog; a server
stopped mid-session loses no perflog line, fails no case, and gets the
records it missed from the next session; hpcml report --tsdb reads a
history back."""
import contextlib
import io
import math
import os
import pathlib
import threading
import urllib.request

import pytest

import victoria
from conftest import BIN
from perflog_history import generate
from hpctestlib_ml import cli
from hpctestlib_ml.report import history
from hpctestlib_ml.tsdb import push, read, series

HPCML = BIN / 'hpcml'
ONE_CASE = ('-n', '^CosmoFlow%scale=1_proc%launch_mode=per_task')


def lines_of(runs):
    return ''.join(series.import_lines(
        series.run_labels(r.system, r.partition, 'python', r.display_name,
                          r.params), r.time, r.result,
        {n: (m.value, m.unit, m.ref, m.lower, m.upper)
         for n, m in r.metrics.items()}) for r in runs)


def comparable(runs):
    '''What a run is, as both the perflog and the database hold it (the
    perflog's time to the second, the database's to the millisecond):
    (what names it, its numbers), in order.'''
    return sorted(((int(r.time), r.system, r.partition, r.display_name,
                    r.result, tuple((k, r.params.get(k))
                                    for k in series.LABELS),
                    tuple(sorted((n, m.unit) for n, m in r.metrics.items()))),
                   [number for _, m in sorted(r.metrics.items())
                    for number in (m.value, m.ref or 0.0, m.lower, m.upper)])
                  for r in runs)


def assert_same_runs(found, expected):
    '''*found* (read back) are the *expected* runs, their numbers equal
    to VictoriaMetrics' precision: it keeps a value as a decimal mantissa
    and exponent, of 10 to 13 significant digits (20,000 random values
    imported and exported: relative difference at most 1.0e-12;
    5863.187748994534 came back as 5863.187749).'''
    found, expected = comparable(found), comparable(expected)
    assert [name for name, _ in found] == [name for name, _ in expected]
    for (name, numbers), (_, wanted) in zip(found, expected):
        assert all(a == b or (a is not None and b is not None and
                              math.isclose(a, b, rel_tol=1e-11))
                   for a, b in zip(numbers, wanted)), (name, numbers, wanted)


def test_every_run_reads_back_as_it_was(tmp_path):
    generate(tmp_path / 'logs', days=8, slowdown=('BERTLarge', 4, 0.8))
    runs = history.read_perflogs([tmp_path / 'logs']).runs
    assert_same_runs(read.runs_of(lines_of(runs)), runs)


@pytest.fixture
def server(tmp_path):
    reason = victoria.why_unavailable()
    if reason:
        if os.environ.get('CI'):
            pytest.fail(f'VictoriaMetrics tests cannot run under CI: {reason}')
        pytest.skip(reason)
    found = victoria.Victoria(tmp_path / 'vm').start()
    yield found
    found.stop()


def samples(runs):
    '''Samples the runs make: a result, and each figure with its
    companions.'''
    return sum(lines_of([r]).count('\n') for r in runs)


def test_a_history_pushed_reads_back_and_reports(server, tmp_path):
    generate(tmp_path / 'logs', days=20, slowdown=('BERTLarge', 4, 0.8))
    runs = history.read_perflogs([tmp_path / 'logs']).runs
    request = urllib.request.Request(
        f'{server.url}/api/v1/import', data=lines_of(runs).encode(),
        method='POST')
    urllib.request.urlopen(request, timeout=60).read()
    server.export(expect=samples(runs))
    back = read.read_history(server.url)
    assert_same_runs(back.runs, runs)
    booster = read.read_history(server.url, 'booster:gpu').runs
    assert booster and {r.where for r in booster} == {'booster:gpu'}
    # PromQL over the same series: the latest value of one case.
    latest = max(r.time for r in runs if r.system == 'booster')
    found = server.query('last_over_time(hpcml_samples_per_second{'
                         'system="booster",scale="4_nodes"}[2d])', latest)
    assert len(found) >= 1 and found[0]['metric']['unit'] == 'samples/s'
    # hpcml report: the same tables from the database as from the perflogs.
    from_db = _report(['report', '--tsdb', server.url, '--no-plots'])
    from_logs = _report(['report', '--perflogs', tmp_path / 'logs',
                         '--no-plots'])
    assert from_db[1:] == from_logs[1:]
    assert any('bert' in line and '!' in line for line in from_db)


def _report(argv):
    out = io.StringIO()
    old = os.environ.get('HPCML_HISTORY_STORE')
    os.environ['HPCML_HISTORY_STORE'] = 'off'
    try:
        with contextlib.redirect_stdout(out):
            cli.main([str(a) for a in argv])
    finally:
        if old is None:
            os.environ.pop('HPCML_HISTORY_STORE')
        else:
            os.environ['HPCML_HISTORY_STORE'] = old
    return [line for line in out.getvalue().splitlines()
            if not line.startswith('report took')]


def test_a_database_that_is_down_is_a_clear_error(tmp_path):
    status = cli.main(['report', '--tsdb',
                       f'http://127.0.0.1:{victoria.free_port()}'])
    assert status == 2


@pytest.mark.parametrize('value', ['localhost:8428', 'http://', 'ftp://h'])
def test_a_bad_url_stops_the_configuration_in_one_line(monkeypatch, value):
    '''Before it was declared, 'localhost:8428' made a handler that posted
    nowhere, each record's failure a line of its own.'''
    from hpctestlib_ml import siteconfig
    monkeypatch.setenv(push.URL_ENV, value)
    with pytest.raises(siteconfig.SiteConfigError) as err:
        siteconfig.tsdb_handlers()
    assert str(err.value) == (
        f"HPCML_TSDB_URL must be a VictoriaMetrics base URL, http://host:"
        f"8428, got {value!r}: fix the environment variable HPCML_TSDB_URL "
        f"(read by hpctestlib_ml/siteconfig.py, for every configuration)")


#: tests/pause_after_push: with it on PYTHONPATH, the session pauses after
#: the first record the database took, until the test says go on.
PAUSE_AFTER_PUSH = pathlib.Path(__file__).parent / 'pause_after_push'


@pytest.mark.integration
def test_a_session_reaches_victoriametrics_and_survives_its_stop(
        run_reframe, server, tmp_path):
    '''Three runs of one case; the server is stopped after the first
    record arrived (the session paused there: tests/pause_after_push), so
    the other two runs' records are kept. Every case passes, the perflog
    has every line, the session says in one line what it kept; the next
    session (server back) sends it: the database then holds the perflog,
    line for line. Over 30 s (about 30 s on a quiet machine, 2 to 3 min
    with both cores busy): four runs of the case in two ReFrame sessions,
    the fewest that show a record sent, records kept and then sent by the
    next session. (A thread that polled the server's export and stopped
    it raced the session: on a quick machine all three records were in
    before it saw the first, and nothing was kept.)'''
    pause = tmp_path / 'pause'
    pause.mkdir()
    env = {push.URL_ENV: server.url, 'TEST_PUSH_PAUSE_DIR': str(pause),
           'PYTHONPATH': os.pathsep.join(
               filter(None, [str(PAUSE_AFTER_PUSH),
                             os.environ.get('PYTHONPATH')]))}
    session_over = threading.Event()

    def stop_after_first_record():
        while not (pause / 'pushed').exists():
            if session_over.wait(0.05):
                return
        server.stop()
        (pause / 'go_on').touch()

    watcher = threading.Thread(target=stop_after_first_record)
    watcher.start()
    try:
        proc, var = run_reframe(HPCML, 'suite', *ONE_CASE, '--repeat', '3',
                                env=env)
    finally:
        session_over.set()
        watcher.join()
    assert (pause / 'pushed').exists(), proc.stderr[-2000:]
    assert proc.returncode == 0, proc.stdout[-3000:]
    logs = var / 'perflogs'
    runs = history.read_perflogs([logs]).runs
    assert len(runs) == 3
    kept = [line for line in (proc.stdout + proc.stderr).splitlines()
            if 'not taken by' in line]
    assert len(kept) == 1, proc.stdout[-2000:] + proc.stderr[-2000:]
    outbox = var / 'tsdb' / 'outbox.jsonl'
    # The second and third runs' records, none of the first's.
    assert len(outbox.read_text().splitlines()) == samples(runs[1:])
    assert kept[0].startswith(f'hpcml: {samples(runs[1:])} performance ')

    server.start()
    proc, _ = run_reframe(HPCML, 'suite', *ONE_CASE, env=env)
    assert proc.returncode == 0, proc.stdout[-3000:]
    runs = history.read_perflogs([logs]).runs
    assert len(runs) == 4
    server.export(expect=samples(runs))
    back = read.read_history(server.url).runs
    assert_same_runs(back, runs)
    assert outbox.read_text() == ''
