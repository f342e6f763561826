"""ReFrame for real on config/local.py: the suite as a user runs it."""
import math
import re
import subprocess

import pytest

from conftest import BIN, local_case_count, local_cases
from hpctestlib_ml import registry
from perflog import read_perflog

# suite: .ci/run runs this file's local suite (some 10 minutes) in the
# pass beside the other tests, with the Slurm cluster's.
pytestmark = [pytest.mark.integration, pytest.mark.suite]

HPCML = BIN / 'hpcml'


#: Every training workload, by its check: the suite's local run covers
#: each one (hpctestlib_ml.registry; a new workload is in by declaring
#: itself).
WORKLOADS = {declared.check: declared
             for declared in registry.registered().values()
             if declared.kind == 'workload'}

#: Every component benchmark, by its check: in the local run too.
COMPONENTS = {declared.check: declared
              for declared in registry.registered().values()
              if declared.kind == 'component'}


@pytest.fixture(scope='module')
def local_suite(tmp_path_factory, cache_dir):
    '''`hpcml suite` as README's quick start runs it: every workload
    (without their *Container twins, where the image is built: one case
    per launch mode runs in tests/test_containers_podman.py). Over 30 s
    (4-9 minutes): it is the quick start, run once for all this file's
    tests.'''
    import os
    import subprocess
    var = tmp_path_factory.mktemp('local-suite') / 'var'
    env = {**os.environ, 'HPCML_VAR_DIR': str(var),
           'HPCML_CACHE_DIR': str(cache_dir)}
    env.pop('RFM_CONFIG_FILES', None)
    proc = subprocess.run([str(HPCML), 'suite', '-x', 'Container'], env=env,
                          cwd=var.parent,
                          capture_output=True, text=True, timeout=1800,
                          stdin=subprocess.DEVNULL)
    return proc, var


def test_suite_runs_every_workload_locally(local_suite):
    proc, var = local_suite
    assert proc.returncode == 0, proc.stdout[-3000:] + proc.stderr[-3000:]
    count = local_case_count(containers=False)
    assert f'Ran {count}/{count} test case(s)' in proc.stdout
    assert (var / 'results.db').stat().st_size > 0


#: Figures a program prints to a fixed resolution, by the suite's own
#: figure for the same quantity and that resolution: Megatron-LM prints
#: TFLOP/s per GPU to one decimal (``src/gpt_pretrain`` as upstream).
PRINTED_TO = {'printed_tflops_per_gpu': ('tflops_per_gpu', 0.1)}


def figures_of(row):
    '''{name: (value, unit)} of a perflog row's performance variables.'''
    return {column[:-len('_value')]: (float(row[column]),
                                      row[column[:-len('_value')] + '_unit'])
            for column in row if column.endswith('_value')}


@pytest.mark.parametrize('check', list(WORKLOADS))
def test_workload_logs_real_numbers_in_one_and_two_processes(local_suite,
                                                             check):
    '''Every figure is finite; the headline, MFU and every figure with a
    unit but the data share and the ranks' spread are positive (quality
    figures, unitless, may be 0 after a few tiny steps).'''
    _, var = local_suite
    declared = WORKLOADS[check]
    rows = read_perflog(var / 'perflogs' / 'local' / 'cpu' / f'{check}.log')
    cases = {(r['scale'], r['launch_mode']) for r in rows}
    assert cases == {('1_proc', 'per_task'), ('1_proc', 'torchrun'),
                     ('2_procs', 'torchrun')}
    for row in rows:
        assert row['result'] == 'pass'
        assert row['resolved_size'] == 'tiny'
        assert row['workload'] == declared.name
        figures = figures_of(row)
        assert figures[declared.headline.metric][1].endswith('/s')
        assert 'mfu' in figures, sorted(figures)
        for name, (value, unit) in figures.items():
            assert math.isfinite(value), (name, row)
            if name in PRINTED_TO:
                # The program's own figure, rounded as it prints it: 0.0
                # where a slow runner's 2 processes make 0.04 TFLOP/s. It
                # is the mean of each step's rate, the suite's the rate of
                # the mean step: uneven steps part them (by 6 % where one
                # step in seven takes twice as long), within half.
                computed = figures[PRINTED_TO[name][0]][0]
                assert abs(value - computed) <= \
                    PRINTED_TO[name][1] / 2 + 0.5 * computed, (name, row)
            elif unit and name not in ('data_share', 'rank_compute_spread'):
                assert value > 0, (name, row)
        # What the ranks said they ran on, and the peak MFU used.
        assert re.fullmatch(r'cpu \S+ x' + row['procs_per_node'],
                            row['device_ran']), row['device_ran']
        assert row['mfu_peak'].startswith('cpu '), row['mfu_peak']
        share = float(row['data_share_value'])
        assert 0 <= share < 50 and row['data_share_unit'] == '%'
        # Device memory: absent on CPUs, not zero.
        assert 'gpu_mem_peak_MiB_value' not in row
    two = next(r for r in rows if r['scale'] == '2_procs')
    assert two['procs_per_node'] == '2'


@pytest.mark.parametrize('check', list(COMPONENTS))
def test_component_logs_real_numbers(local_suite, check):
    '''Every case of each component passed with finite, positive figures:
    no MFU, no data share (a component trains no model and reads no
    batch), the ranks' device records, no loss curve.'''
    _, var = local_suite
    declared = COMPONENTS[check]
    rows = read_perflog(var / 'perflogs' / 'local' / 'cpu' / f'{check}.log')
    assert {(r['scale'], r['launch_mode']) for r in rows} == \
        local_cases(declared)
    for row in rows:
        assert row['result'] == 'pass' and row['workload'] == declared.name
        figures = figures_of(row)
        assert declared.headline.metric in figures
        assert not {'mfu', 'data_share', 'energy_per_sample_J'} & set(
            figures)
        for name, (value, unit) in figures.items():
            assert math.isfinite(value) and value > 0, (name, row)
        assert re.fullmatch(r'cpu \S+ x' + row['procs_per_node'],
                            row['device_ran']), row['device_ran']
        assert row['loss_curve'] == ''


def test_every_rank_of_every_local_case_computes_the_same_answer(
        local_suite):
    '''SilentDataCorruption's local cases (one rank in either launch mode
    on the machine's two threads, two ranks on one thread each) pass with
    the right answer logged and none named wrong; the two one-rank cases,
    the same computation launched two ways, logged the same digest.'''
    _, var = local_suite
    rows = read_perflog(var / 'perflogs' / 'local' / 'cpu' /
                        'SilentDataCorruption.log')
    assert all(r['result'] == 'pass' and r['wrong_answer'] == '' and
               re.fullmatch(r'v1:[0-9a-f]{16}', r['answer_digest'])
               for r in rows), rows
    one = {r['answer_digest'] for r in rows if r['scale'] == '1_proc'}
    assert len(one) == 1, rows


@pytest.mark.parametrize('check', sorted(
    declared.check for declared in WORKLOADS.values() if declared.benchmark))
def test_mllog_of_the_local_runs_meets_mlperfs_rules(local_suite, check):
    '''MLPerf's compliance checker on every MLLOG log the suite wrote: no
    violation; what remains is what only a full run meets.'''
    from hpctestlib_ml import compliance
    _, var = local_suite
    outputs = sorted((var / 'output').glob(f'**/{check}_*/rfm_job.out'))
    assert len(outputs) == 3
    for path in outputs:
        report = compliance.check(path.read_text())
        assert report.violations == [], (path, [f.message for f in
                                                report.violations])
        assert all(f.run_length_only for f in report.findings)


def test_clip_figures_are_consistent(local_suite):
    _, var = local_suite
    rows = read_perflog(var / 'perflogs' / 'local' / 'cpu' / 'MMoCLIP.log')
    for row in rows:
        assert float(row['done_percent_last_value']) == 100
    two = next(r for r in rows if r['scale'] == '2_procs')
    assert float(two['throughput_per_gpu_avg_value']) == pytest.approx(
        float(two['throughput_avg_value']) / 2, rel=0.01)


def reason(proc):
    match = re.search(r'\* Reason: (.*)', proc.stdout)
    return match.group(1) if match else proc.stdout[-2000:] + proc.stderr


ONE_CASE = ['-n', '^MMoCLIP%scale=1_proc%launch_mode=per_task']


@pytest.mark.parametrize('option, message', [
    ('batch_size=0', "batch_size must be an integer >= 1, got '0': fix -S "
                     'batch_size'),
    ('num_nodes=-1', 'num_nodes must be an integer >= 1'),
    ('num_nodes=abc', "num_nodes must be an integer >= 1, got 'abc'"),
    ('num_nodes=1.5', "num_nodes must be an integer >= 1, got '1.5'"),
    ('num_nodes=4', '4 nodes requested but partition local:cpu allows 1'),
    ('procs_per_node=2', 'the local launcher of local:cpu starts one task'),
    ('size=huge', "size must be one of auto, tiny, short, benchmark, got "
                  "'huge': fix -S size"),
])
def test_bad_input_fails_with_one_line_reason(run_reframe, option, message):
    proc, _ = run_reframe(HPCML, 'suite', *ONE_CASE, '-S', option)
    assert proc.returncode == 1
    assert reason(proc).startswith('bad_input: ')
    assert message in reason(proc)
    assert 'Traceback' not in proc.stdout + proc.stderr


def test_missing_open_clip_is_reported(run_reframe, tmp_path):
    # A Python without site-packages: what a node without OpenCLIP sees.
    bare = tmp_path / 'bare-python'
    bare.write_text(f'#!/bin/sh\nexec {BIN / "python"} -S "$@"\n')
    bare.chmod(0o755)
    proc, _ = run_reframe(HPCML, 'suite', *ONE_CASE, '-S', f'python={bare}')
    assert proc.returncode == 1
    assert ("cannot import OpenCLIP (No module named 'open_clip')"
            in reason(proc))


def test_missing_prepared_data_fails_at_setup(run_reframe, tmp_path):
    '''GPT-2's model and data at short size come from hpcml prepare: where
    they are missing, the case fails before a job exists, naming it.'''
    empty = tmp_path / 'prepared'
    proc, var = run_reframe(
        HPCML, 'suite', '-n',
        '^GPT2FineTune%scale=1_proc%launch_mode=per_task', '-S', 'size=short',
        '-S', 'steps=2', env={'HPCML_PREPARED_DIR': str(empty)})
    assert proc.returncode == 1
    assert (f'run `hpcml prepare gpt2_finetune --dir {empty}` once on a '
            f'machine with internet') in reason(proc)
    assert not list((var / 'stage').glob('**/rfm_job.sh'))


def test_selecting_no_test_fails(run_reframe):
    proc, _ = run_reframe(HPCML, 'suite', '-n', 'NoSuchTest')
    assert proc.returncode == 2
    assert 'no test case was selected' in proc.stderr


def test_bad_input_keeps_earlier_results(run_reframe):
    '''A failing run appends; it never rewrites what earlier runs logged.'''
    proc, var = run_reframe(HPCML, 'suite', *ONE_CASE, '-S', 'steps=2')
    assert proc.returncode == 0, proc.stdout[-2000:]
    perflog = var / 'perflogs' / 'local' / 'cpu' / 'MMoCLIP.log'
    before = perflog.read_text()
    proc, _ = run_reframe(HPCML, 'suite', *ONE_CASE, '-S', 'batch_size=0')
    assert proc.returncode == 1
    assert perflog.read_text() == before
    assert len(read_perflog(perflog)) == 1


def test_report_on_the_suites_own_perflogs_and_db(local_suite):
    '''hpcml report on the suite's real perflogs and results DB: the
    same cases either way, every one of them.'''
    _, var = local_suite
    report = lambda *args: subprocess.run(
        [HPCML, 'report', *map(str, args)], capture_output=True, text=True,
        timeout=300)
    proc = report('--perflogs', var / 'perflogs')
    assert proc.returncode == 0, proc.stdout + proc.stderr
    proc_db = report('--db', var / 'results.db')
    assert proc_db.returncode == 0, proc_db.stderr
    table = lambda text: sorted(l.split()[:4] for l in text.splitlines()
                                if 'local:cpu' in l)
    assert table(proc.stdout) == table(proc_db.stdout)
    assert len(table(proc.stdout)) == local_case_count(containers=False)


def test_megatron_logs_how_it_departs_from_caraml(local_suite):
    '''The perflog's ``departures`` of the local Megatron runs: mock data
    (no OSCAR subset configured) and the fallback's own line (no flash
    attention on a CPU); '' for workloads that do not check.'''
    _, var = local_suite
    rows = read_perflog(var / 'perflogs' / 'local' / 'cpu' /
                        'MegatronGPT.log')
    for row in rows:
        assert row['departures'] == (
            "mock data (no extras['megatron_data'] or -S data_path); "
            'attention: unfused math path, no flash-attn (no GPU)'), row
        assert row['reference_case'].endswith(' program=megatron-core')
        # The setup's memory estimate, logged beside the results.
        assert re.fullmatch(r'\d+\.\d GiB', row['memory_estimated']), row
    other = {(r['departures'], r['memory_estimated']) for r in read_perflog(
        var / 'perflogs' / 'local' / 'cpu' / 'CosmoFlow.log')}
    assert other == {('', '')}
