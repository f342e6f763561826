"""hpcml references: references from a site's history (threshold rule,
merging beside published references, what a failing check says), unit
tests on generated histories, and the loop for real with ReFrame: history,
references, an unchanged rerun that passes, a real slowdown (half the
threads) and a changed loss curve that fail with their reasons."""
import os
import re
import shutil
import subprocess

import pytest
import yaml

from conftest import BIN, REPO
from hpctestlib_ml.history_refs import derive, lookup, store
from hpctestlib_ml.report.history import Metric, Run

HPCML = BIN / 'hpcml'
CASE = 'tiny 1x1 per_task batch=4 fp32'


def run(when, value, result='pass', check='CosmoFlow', case=CASE,
        losses=(1.0, 0.9, 0.8), step_time=None):
    metrics = {'samples_per_second': Metric(value, 'samples/s'),
               'mfu': Metric(value / 10, '%'),
               'run_time_secs': Metric(5.0, 's'),
               'max_rss_MiB': Metric(700.0, 'MiB')}
    if step_time:
        metrics['time_per_step_secs'] = Metric(step_time, 's')
    return Run(when, 'local', 'cpu', f'{check} %scale=1_proc', result,
               {'workload': check.lower(), 'reference_case': case,
                'loss_curve': lookup.format_loss_curve(losses)},
               metrics)


def test_threshold_is_max_of_floor_and_k_robust_spreads():
    quiet = [100.0, 100.5, 99.5, 100.2, 99.8]
    ref, tolerance, spread = derive.threshold(quiet)
    assert ref == 100.0 and tolerance == derive.FLOOR
    noisy = [100.0, 110.0, 90.0, 105.0, 95.0]
    ref, tolerance, spread = derive.threshold(noisy)
    assert spread == pytest.approx(1.4826 * 5 / 100)
    assert tolerance == pytest.approx(derive.K * spread)
    # One odd run does not widen it: the median absolute deviation.
    odd = quiet[:-1] + [20.0]
    assert derive.threshold(odd)[1] == derive.FLOOR


@pytest.mark.parametrize('value, floor', [
    (None, None), ('', None), ('None', None), (30, 0.3), ('2.5', 0.025),
    (' 10 ', 0.1)])
def test_noise_floor_reads_a_percentage(value, floor):
    assert lookup.noise_floor(value) == (pytest.approx(floor) if floor
                                         else None)


@pytest.mark.parametrize('value', ['abc', 0, '-5', 100, '250', True, [30],
                                   'nan'])
def test_noise_floor_refuses_what_is_not_one(value):
    with pytest.raises(ValueError, match='reference_noise_pct must be a '
                                         'percentage above 0 and below 100'):
        lookup.noise_floor(value)


def test_derive_per_case_with_directions_and_notes():
    runs = [run(i, 100.0 + 0.1 * (i % 3), step_time=0.1) for i in range(12)]
    runs += [run(50, 1.0, result='fail')]
    runs += [run(i, 50.0, case='tiny 1x2 per_task batch=4 fp32')
             for i in range(3)]
    refs, notes = derive.derive(runs, last=10, min_runs=5)
    (ref,) = refs
    assert ref.case == CASE and ref.runs == 10 and ref.passing == 12
    assert ref.workload == 'cosmoflow'
    # Higher is better: a lower bound; lower is better: an upper bound;
    # whole-run times and memory get none.
    assert ref.metrics['samples_per_second'][1:] == [-0.03, None,
                                                     'samples/s']
    assert ref.metrics['time_per_step_secs'][1:] == [None, 0.03, 's']
    assert set(ref.metrics) == {'samples_per_second', 'mfu',
                                'time_per_step_secs'}
    assert ref.metrics['samples_per_second'][0] == pytest.approx(100.1)
    assert any('3 passing runs, 5 needed' in n for n in notes)
    assert ref.loss_curve['losses'] == [1.0, 0.9, 0.8]


def test_merge_keeps_published_references_and_is_idempotent(tmp_path):
    path = tmp_path / 'clip.yaml'
    shutil.copy(REPO / 'config' / 'references' / 'clip.yaml', path)
    before = yaml.safe_load(path.read_text())
    runs = [run(i, 100.0 + i % 2, check='MMoCLIP') for i in range(6)]
    refs, _ = derive.derive(runs)
    lines = store.merge_into_file(str(path), 'clip', refs)
    assert 'MMoCLIP local:cpu' in lines[0]
    text = path.read_text()
    after = yaml.safe_load(text)
    for name in ('MMoCLIP', 'MMoCLIPContainer'):
        published = before[name]['juwels-booster:booster']
        assert after[name]['juwels-booster:booster'] == published
        assert after[name]['local:cpu'][CASE]['samples_per_second'][0] == \
            100.5
    assert 'median of the last 6 of 6 passing runs' in text
    # Again with the same runs: the same file.
    store.merge_into_file(str(path), 'clip', refs)
    assert path.read_text() == text
    # A partition with published references is left alone.
    booster = [Run(i, 'juwels-booster', 'booster', 'MMoCLIP %scale=8',
                   'pass', {'workload': 'clip', 'reference_case': 'x'},
                   {'throughput_avg': Metric(1.0, 'samples/s')})
               for i in range(6)]
    refs, _ = derive.derive(booster)
    lines = store.merge_into_file(str(path), 'clip', refs)
    assert lines[0].startswith('left out') and path.read_text() == text


def test_history_entry_and_loss_departure(tmp_path):
    path = tmp_path / 'cosmoflow.yaml'
    shutil.copy(REPO / 'config' / 'references' / 'cosmoflow.yaml', path)
    runs = [run(i, 100.0, losses=(4.5, 4.4 + 0.01 * (i % 2), 4.3))
            for i in range(5)]
    refs, _ = derive.derive(runs)
    store.merge_into_file(str(path), 'cosmoflow', refs)
    source, curve = lookup.history_entry(str(path), 'CosmoFlow',
                                             'local:cpu', CASE)
    assert source.startswith('median of the last 5 of 5 passing runs')
    # Shared through the YAML alias with the container variant.
    assert lookup.history_entry(str(path), 'CosmoFlowContainer',
                                    'local:cpu', CASE)[1] == curve
    assert lookup.loss_curve_departure([4.5, 4.41, 4.3], curve) is None
    reason = lookup.loss_curve_departure([4.5, 4.52, 4.3], curve)
    assert reason.startswith('loss curve departs from reference at logged '
                             'step 2: 4.52 vs 4.4 +/- 0.03')
    # Bit-identical runs (this CPU's tiny runs): the floor, 1e-4 of the loss.
    exact = [run(i, 100.0, losses=(4.5, 4.4)) for i in range(5)]
    curve = derive.derive(exact)[0][0].loss_curve
    assert curve['tolerance'] == [pytest.approx(4.5e-4), pytest.approx(4.4e-4)]
    assert lookup.loss_curve_departure([4.5, 4.4005], curve)


def hpcml(*args, **env):
    return subprocess.run([str(HPCML), *map(str, args)], capture_output=True,
                          text=True, env={**os.environ, **env}, timeout=300)


def perflog(directory, runs):
    '''A perflog of *runs* as the suite writes it (the fields references
    reads).'''
    directory.mkdir(parents=True, exist_ok=True)
    fields = ['job_completion_time', 'display_name', 'system', 'partition',
              'workload', 'reference_case', 'loss_curve', 'result',
              'samples_per_second_value', 'samples_per_second_unit']
    lines = ['|'.join(fields)]
    for r in runs:
        lines.append('|'.join([
            str(r.time), r.display_name, r.system, r.partition,
            r.params['workload'], r.params['reference_case'],
            r.params['loss_curve'], r.result,
            str(r.metrics['samples_per_second'].value), 'samples/s']))
    (directory / 'x.log').write_text('\n'.join(lines) + '\n')


def test_cli_previews_writes_and_names_bad_input(tmp_path):
    logs = tmp_path / 'perflogs'
    perflog(logs, [run(1.8e9 + i, 100.0 + i) for i in range(6)])
    out = hpcml('references', '--system', 'local:cpu', '--perflogs', logs)
    assert out.returncode == 0, out.stderr
    assert 'not written' in out.stdout and "'tiny 1x1" in out.stdout
    refs_dir = tmp_path / 'refs'
    refs_dir.mkdir()
    out = hpcml('references', '--system', 'local', '--perflogs', logs,
                '--write', refs_dir)
    assert out.returncode == 0, out.stderr
    written = yaml.safe_load((refs_dir / 'cosmoflow.yaml').read_text())
    assert written['CosmoFlow']['local:cpu'][CASE]['samples_per_second'][
        0] == 102.5
    out = hpcml('references', '--system', 'other', '--perflogs', logs)
    assert out.returncode == 2 and 'no runs of other' in out.stderr
    out = hpcml('references', '--system', 'local', '--perflogs', logs,
                '--min-runs', '7')
    assert out.returncode == 2 and 'lower --min-runs' in out.stderr
    out = hpcml('references', '--system', 'local', '--perflogs',
                tmp_path / 'none')
    assert out.returncode == 2 and 'no perflogs at' in out.stderr


# The loop for real: ReFrame, this CPU.

SELECT = ('-n', 'MegatronGPT', '-x', 'Container', '-x', '2_procs', '-x',
          'torchrun')


@pytest.mark.integration
def test_a_bad_noise_floor_fails_each_case_at_setup(run_reframe):
    '''A partition's extras['reference_noise_pct'] that is not a
    percentage: each case fails at setup, before a job exists, in one line
    naming the fix.'''
    proc, var = run_reframe(BIN / 'reframe', '-C', REPO / 'config/local.py',
                            '-c', REPO / 'checks', *SELECT, '--dry-run',
                            env={'HPCML_REFERENCE_NOISE_PCT': '3O'})
    assert proc.returncode == 1, proc.stdout[-2000:]
    reason = re.search(r'\* Reason: (.*)', proc.stdout).group(1)
    assert reason == (
        "bad_input: extras['reference_noise_pct'] of local:cpu: "
        "reference_noise_pct must be a percentage above 0 and below 100 "
        "(e.g. 10), got '3O': fix the partition's extras in the site config "
        "(config/local.py and config/slurm.py take HPCML_REFERENCE_NOISE_PCT)")
    assert 'Traceback' not in proc.stdout + proc.stderr
    assert not list((var / 'stage').rglob('rfm_job.sh'))


@pytest.mark.integration
def test_history_references_catch_a_real_slowdown(run_reframe, tmp_path):
    '''Five runs make the history; the references derived from it pass an
    unchanged rerun, fail a run with half the threads (naming the
    reference and the runs it came from), and fail a run whose loss curve
    changed (a patched torch) as a numerics regression.'''
    refs_dir = tmp_path / 'references'
    shutil.copytree(REPO / 'config' / 'references', refs_dir)
    env = {'HPCML_REFERENCES_DIR': str(refs_dir)}
    proc, var = run_reframe(HPCML, 'suite', *SELECT, '--repeat', '5',
                            env=env)
    assert proc.returncode == 0, proc.stdout[-3000:]
    out = hpcml('references', '--system', 'local:cpu', '--perflogs',
                var / 'perflogs', '--write', refs_dir)
    assert out.returncode == 0, out.stdout + out.stderr
    assert 'MegatronGPT local:cpu' in out.stdout
    text = (refs_dir / 'megatron.yaml').read_text()
    assert 'juwels-booster:booster' in text     # published, kept

    same, _ = run_reframe(HPCML, 'suite', *SELECT, env=env)
    assert same.returncode == 0, same.stdout[-3000:]

    slow, _ = run_reframe(HPCML, 'suite', *SELECT, '-S',
                          'threads_per_rank=1', env=env)
    assert slow.returncode != 0
    assert 'tokens_per_second' in slow.stdout
    assert 'median of the last 5 of 5 passing runs' in slow.stdout
    assert str(refs_dir / 'megatron.yaml') in slow.stdout

    # A framework that draws other random numbers (as torch releases have
    # done): the same seed, another model at step 1.
    patched = tmp_path / 'patched_torch'
    patched.mkdir()
    (patched / 'sitecustomize.py').write_text(
        'import torch\n'
        '_seed = torch.manual_seed\n'
        'torch.manual_seed = lambda s: _seed(s + 1)\n')
    changed, _ = run_reframe(HPCML, 'suite', *SELECT, '-S',
                             f'python_path={patched}', env=env)
    assert changed.returncode != 0
    assert 'numerics: loss curve departs from reference at logged step' \
        in changed.stdout
