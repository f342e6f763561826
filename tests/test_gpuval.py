"""bench/gpu/validate.sh, the one-command GPU validation: its wheel sets,
the nvidia-smi trace's integral, the table's verdicts, its errors, and
that ReFrame accepts what the GPU phases pass it. (CI runs the whole
validation on this CPU: .ci/run, `validate.sh run all --cpu .venv`.)"""
import math
import re
import os
import subprocess
import sys
import time

import pytest

from conftest import BIN, REPO

sys.path.insert(0, str(REPO / 'bench' / 'gpu'))

import phases                                            # noqa: E402
import table                                             # noqa: E402
import trace as smi                                      # noqa: E402
import wheelsets                                         # noqa: E402

VALIDATE = REPO / 'bench' / 'gpu' / 'validate.sh'


# Wheel sets

DISTS = {
    'reframe-hpc': ('4.10.4', ['polars', 'pyyaml', 'requests',
                               'colorama; sys_platform == "win32"']),
    'pyyaml': ('6.0.4', []),
    'requests': ('2.34.2', ['urllib3<3']),
    'urllib3': ('2.8.0', []),
    'polars': ('1.44.2', []),
    'open-clip-torch': ('3.3.0', ['torch>=2', 'numpy', 'regex',
                                  'webdataset; extra == "training"',
                                  'pandas; extra == "training"']),
    'webdataset': ('0.2.86', ['numpy', 'braceexpand']),
    'braceexpand': ('0.1.7', []),
    'regex': ('2026.11.19', []),
    'backports-x': ('1.0', []),
    'old-only': ('1', ['backports-x; python_version < "3.11"']),
}


def test_closure_follows_markers_and_extras_and_leaves_out_the_machines():
    pins = wheelsets.closure(['reframe-hpc', 'open_clip_torch[training]',
                              'old-only'], DISTS)
    assert pins == {'reframe-hpc': '4.10.4', 'pyyaml': '6.0.4',
                    'requests': '2.34.2', 'urllib3': '2.8.0',
                    'open-clip-torch': '3.3.0', 'webdataset': '0.2.86',
                    'braceexpand': '0.1.7', 'regex': '2026.11.19',
                    'old-only': '1'}
    # torch is the machine's, numpy and pandas too, polars is not needed,
    # colorama is Windows', backports-x below Python 3.11 only.


def test_closure_names_a_requirement_the_venv_lacks():
    with pytest.raises(wheelsets.WheelSetError, match='make setup'):
        wheelsets.closure(['requests', 'missing-pkg'],
                          {**DISTS, 'requests': ('1', ['missing-pkg'])})


def test_phases_share_a_set_while_they_fit_and_one_too_large_fails():
    sizes = {'a': 30, 'b': 20, 'c': 25, 'd': 70}
    sets = wheelsets.pack([('p1', {'a': '1'}), ('p2', {'a': '1', 'b': '1'}),
                           ('p3', {'c': '1'})], sizes, 60)
    assert [s[0] for s in sets] == [['p1', 'p2'], ['p3']]
    assert sets[0][1] == {'a': '1', 'b': '1'}
    with pytest.raises(wheelsets.WheelSetError,
                       match=r'phase p4 needs .* over the .* MiB'):
        wheelsets.pack([('p4', {'d': '1'})], sizes, 60)


def test_every_phase_has_its_workloads_packages():
    for phase, workloads in phases.wheel_phases():
        for workload in workloads:
            assert workload in wheelsets.WORKLOAD_PACKAGES, (phase, workload)


# The nvidia-smi trace

def _stamp(t):
    return (time.strftime('%Y/%m/%d %H:%M:%S', time.localtime(t)) +
            f'.{int(round((t % 1) * 1000)):03d}')


def write_trace(path, t0, watts, step=0.2, memory=1000):
    lines = ['timestamp, index, power.draw.instant [W], power.draw [W], '
             'memory.used [MiB], utilization.gpu [%]']
    for i, w in enumerate(watts):
        lines.append(f'{_stamp(t0 + i * step)}, 0, {w:.2f}, [N/A], '
                     f'{memory + i}, 50')
        lines.append(f'{_stamp(t0 + i * step)}, 1, 999.0, 999.0, 1, 0')
    path.write_text('\n'.join(lines) + '\n2026/11/2')     # cut short
    return path


def test_trace_integrates_the_gpus_power_over_a_window(tmp_path):
    t0 = math.floor(time.time())
    # 100 W for 4 s, then 300 W: trapezoids over 0.2 s samples.
    watts = [100.0] * 21 + [300.0] * 30
    trace = smi.Trace.read(write_trace(tmp_path / 'smi.csv', t0, watts))
    assert trace.power_column() == 'power.draw.instant'
    joules, inside = trace.energy(t0 + 1.0, t0 + 3.0)
    assert joules == pytest.approx(200.0) and inside == 9
    joules, _ = trace.energy(t0 + 4.2, t0 + 6.2)
    assert joules == pytest.approx(600.0)
    # Across the step (4.0 -> 4.2 s: linear from 100 to 300 W).
    joules, _ = trace.energy(t0 + 3.9, t0 + 4.3)
    assert joules == pytest.approx(10 + 40 + 30)
    assert trace.peak('memory.used', t0 + 1, t0 + 2) == 1010
    with pytest.raises(smi.TraceError, match='does not cover'):
        trace.energy(t0 + 5, t0 + 60)


# The table's verdicts

def row(**changes):
    base = {'phase': 'defaults-a', 'case': 'CosmoFlow', 'workload': 'cosmoflow',
            'result': 'pass', 'device': 'gpu cuda NVIDIA H100 80GB HBM3 x1',
            'mfu_peak': 'H100-SXM bf16', 'throughput': 100.0,
            'throughput_unit': 'samples/s', 'mfu': 30.0, 'step_s': 0.04,
            'data_share': 5.0, 'gpu_mem_MiB': 9000.0, 'trace_mem_MiB': 9500,
            'energy_per_sample_J': 7.0, 'trace_per_sample_J': 7.1,
            'energy_counter': 'nvml(1 GPUs)', 'window': (0.0, 20.0),
            'trace_J': 14000.0, 'trace_samples': 100, 'notes': [],
            'fail': []}
    return {**base, **changes}


def test_the_memory_estimate_is_held_against_the_measured_peak():
    '''The table notes the suite's setup-time estimate beside the peak the
    GPU ranks measured, so a GPU run checks the estimate.'''
    assert table.memory_note('27.0 GiB', 25.0 * 1024) == (
        'memory: estimated 27.0 GiB per device, measured peak 25.0 GiB '
        '(allocator reserved), estimate +8%')
    assert table.memory_note('', 25.0 * 1024) is None
    assert table.memory_note('27.0 GiB', None) is None


def test_a_gpu_case_passes_when_it_ran_there_and_its_energy_agrees():
    judged = table.judge(row(), 'defaults-a', cpu=False, energy_j=14300.0,
                         fail_reason=None)
    assert judged['verdict'] == 'PASS', judged['fail']


@pytest.mark.parametrize('changes, energy, reason', [
    ({'device': None}, 14000.0, 'cannot tell that it ran on the GPU'),
    ({'device': 'cpu'}, 14000.0, 'ran on cpu, not the GPU'),
    ({'mfu': 130.0}, 14000.0, 'outside (0, 100]'),
    ({'throughput': float('nan')}, 14000.0, 'not a positive number'),
    ({}, 18000.0, r'1.29 x the trace'),
    ({}, None, 'no energy figure'),
    ({'result': 'fail'}, None, 'invalid device ordinal'),
])
def test_a_gpu_case_fails_with_the_reason(changes, energy, reason):
    judged = table.judge(row(**changes), 'defaults-a', cpu=False,
                         energy_j=energy,
                         fail_reason='job failed: CUDA error: invalid '
                                     'device ordinal\nmore')
    assert judged['verdict'] == 'FAIL'
    assert any(reason in f for f in judged['fail']), judged['fail']


def test_a_short_window_or_another_counter_is_not_judged():
    short = table.judge(row(window=(0.0, 2.0), trace_samples=9), 'defaults-a',
                        cpu=False, energy_j=30000.0, fail_reason=None)
    assert short['verdict'] == 'PASS'
    assert 'energy not judged: the timed window is 2.0 s' in short['notes'][0]
    both = table.judge(row(energy_counter='nvml(1 GPUs)+rapl(2 packages)'),
                       'defaults-a', cpu=False, energy_j=30000.0,
                       fail_reason=None)
    assert both['verdict'] == 'PASS' and 'GPU alone' in both['notes'][0]
    binding = table.judge(row(), 'variants-a', cpu=False, energy_j=None,
                          fail_reason=None)
    assert binding['verdict'] == 'PASS'


def test_a_cpu_case_needs_no_device_log_but_must_not_claim_a_gpu():
    cpu_row = row(device=None, mfu_peak=None, energy_per_sample_J=None)
    assert table.judge(cpu_row, 'defaults-a', cpu=True, energy_j=None,
                       fail_reason=None)['verdict'] == 'PASS'
    assert table.judge(row(), 'defaults-a', cpu=True, energy_j=None,
                       fail_reason=None)['verdict'] == 'FAIL'
    # A CPU's peak is its measured fp32 matrix rate: bf16 may pass it.
    over = table.judge(row(device=None, mfu=103.0), 'defaults-a', cpu=True,
                       energy_j=None, fail_reason=None)
    assert over['verdict'] == 'PASS' and 'not judged' in over['notes'][0]
    assert table.judge(row(device=None, mfu=0.0), 'defaults-a', cpu=True,
                       energy_j=None, fail_reason=None)['verdict'] == 'FAIL'


def test_missing_figures_show_as_dashes():
    cells = table.cells(row(device=None, mfu=None, mfu_peak=None,
                            data_share=None, gpu_mem_MiB=None,
                            trace_mem_MiB=None, energy_per_sample_J=None,
                            trace_per_sample_J=None, verdict='PASS'))
    assert cells[2] == '-' and cells[4] == '- (-)'
    assert cells[5] == '0.04 (-)' and cells[6] == '- (-)'


# validate.sh's errors

def validate(*args, env=None):
    return subprocess.run(['bash', str(VALIDATE), *map(str, args)],
                          capture_output=True, text=True, timeout=120,
                          env={**os.environ, **(env or {})})


def test_no_gpu_without_cpu_names_the_option(tmp_path):
    env = {'PATH': f'{tmp_path}:/usr/bin:/bin'}         # no nvidia-smi
    proc = validate('run', 'probes', REPO / '.venv', tmp_path / 'out',
                    env=env)
    assert proc.returncode == 2
    assert 'no NVIDIA GPU here' in proc.stderr and '--cpu' in proc.stderr


def test_a_directory_that_is_no_set_names_prepare(tmp_path):
    proc = validate('run', 'probes', tmp_path, tmp_path / 'out', '--cpu')
    assert proc.returncode == 2
    assert "validate.sh prepare var/gpuval" in proc.stderr


def test_a_set_without_the_phase_names_the_set_to_carry(tmp_path):
    wheel_set = tmp_path / 'set-b'
    wheel_set.mkdir()
    (wheel_set / 'requirements.txt').write_text('')
    (wheel_set / 'phases.txt').write_text('probes defaults-a\n')
    proc = validate('run', 'variants-a', wheel_set, tmp_path / 'out',
                    '--cpu')
    assert proc.returncode == 2
    assert "phases 'probes defaults-a" in proc.stderr
    assert 'not of variants-a' in proc.stderr


def test_an_unknown_phase_lists_the_phases(tmp_path):
    proc = validate('run', 'probes,bogus', REPO / '.venv', tmp_path, '--cpu')
    assert proc.returncode == 2
    assert 'unknown phase bogus' in proc.stderr
    assert 'variants-b' in proc.stderr


# The GPU phases' ReFrame options

@pytest.mark.integration
@pytest.mark.parametrize('phase', [p for p in phases.PHASES
                                   if phases.PHASES[p]])
def test_reframe_accepts_the_gpu_phases_options(run_reframe, tmp_path,
                                                phase):
    '''Each GPU session's options as ReFrame reads them (--dry-run, on
    this CPU's partition): every check selected, every -S/-P accepted.'''
    prepared = tmp_path / 'prepared'
    from hpctestlib_ml.registry.gpt2_finetune import prepare
    model, data = prepare.gpt2_paths(prepared)
    for path, marker in ((model, 'config.json'),
                         (data, 'dataset_dict.json')):
        path.mkdir(parents=True)
        (path / marker).write_text('{}')
    for session in phases.PHASES[phase]:
        # ResNet-50's --use-amp is fp16 on a GPU, bf16 on a CPU (fp16 is
        # refused here, as it should be); ReFrame's -x does not see the
        # cases that -P makes.
        args = [a.replace('TorchvisionResNet50.precision=fp16',
                          'TorchvisionResNet50.precision=bf16')
                for a in session.arguments(cpu=False)]
        proc, var = run_reframe(
            BIN / 'reframe', '-C', REPO / 'config' / 'local.py', '-c',
            REPO / 'checks', '--dry-run', '--system', 'local:cpu', *args,
            # A GPU's cases on this CPU's memory: the memory check would
            # skip Megatron's 800M; the options are what is looked at.
            '-S', 'memory_check=false',
            env={'HPCML_PREPARED_DIR': str(prepared)}, timeout=300)
        out = proc.stdout + proc.stderr
        assert proc.returncode == 0, out[-3000:]
        # One case per check and precision (this CPU's partition makes
        # GPT-2's fp32 case only; a GPU partition makes fp16 and bf16 too).
        expected = session.case_count(cpu=False)
        if session.variants and 'GPT2FineTune' in session.names:
            expected -= len(phases.plan('GPT2FineTune').variants)
        assert f'Ran {expected}/{expected} test case(s)' in out, out[-3000:]


# The probes' expectations on a GPU (what an H100 machine reports)

def gpu_facts(**changes):
    import probes                                        # noqa: F401
    torch_facts = {'cuda_available': True, 'device_count': 1,
                   'name': 'NVIDIA H100 80GB HBM3', 'cuda_runtime': '13.0',
                   'hip_runtime': None, 'capability': '9.0',
                   'bf16_native': True}
    facts = {'torch_facts': {**torch_facts, **changes.pop('torch', {})},
             'local_partitions': [
                 {'name': 'cpu', 'descr': '16 CPUs'},
                 {'name': 'gpu', 'descr': '1 x H100-SXM of this machine',
                  'devices': [{'type': 'gpu', 'num_devices': 1,
                               'model': 'H100-SXM'}]}],
             'sampler': 'nvml(1 GPUs)',
             'provenance': {'cuda_version': '13.0'},
             'matmul_flops': {'bf16': 790e12, 'fp16': 780e12,
                              'tf32': 400e12, 'fp32': 50e12}}
    return {**facts, **changes}


def test_the_probes_pass_on_an_h100_as_the_suite_should_see_it():
    import probes
    found = probes.checks(gpu_facts(), gpu=True)
    assert all(ok for ok, _, _ in found), [f for f in found if not f[0]]


@pytest.mark.parametrize('changes, expect', [
    ({'torch': {'cuda_available': False, 'device_count': 0}},
     'torch sees a GPU'),
    ({'local_partitions': [{'name': 'cpu', 'descr': '16 CPUs'}]},
     'makes a gpu partition'),
    ({'torch': {'name': 'NVIDIA H100 NVL'}}, "this product's"),
    ({'torch': {'bf16_native': False, 'capability': '7.0'}},
     'bf16 runs in hardware'),
    ({'sampler': 'none: pynvml (nvidia-ml-py) is not installed'},
     'NVML energy counter'),
    ({'provenance': {'cuda_version': '13.1'}}, 'CUDA runtime'),
    ({'matmul_flops': {'bf16': 1200e12}}, 'below the peaks'),
])
def test_each_probe_fails_on_what_it_guards(changes, expect):
    import probes
    failed = [what for ok, what, _ in probes.checks(gpu_facts(**changes),
                                                    gpu=True) if not ok]
    # The first failure is the one guarded (no partition also leaves the
    # peaks unknown).
    assert failed and expect in failed[0], failed


@pytest.mark.integration
def test_the_probes_phase_on_this_cpu_reads_provenance_as_the_checks_do(
        tmp_path, cache_dir):
    '''probes.py here, for real: every expectation of a CPU machine holds,
    and the provenance it judges is the perflog's fields (cuda_version,
    ...), as provenance.job_provenance reads a job's file.'''
    proc = subprocess.run(
        [sys.executable, str(REPO / 'bench' / 'gpu' / 'probes.py'),
         str(tmp_path), sys.executable], capture_output=True, text=True,
        timeout=600, env={**os.environ, 'HPCML_CACHE_DIR': str(cache_dir)})
    assert proc.returncode == 0, proc.stderr[-2000:]
    import json
    facts = json.loads((tmp_path / 'probes' / 'probes.json').read_text())
    assert all(c['ok'] for c in facts['checks']), facts['checks']
    assert {'cuda_version', 'gpu_driver', 'nccl_version',
            'framework_versions'} <= set(facts['provenance'])
    assert 'torch=' in facts['provenance']['framework_versions']
    for name in ('pip-list-machine.txt', 'pip-freeze-venv.txt',
                 'collect_env.txt', 'local-partitions.txt'):
        assert (tmp_path / 'probes' / name).stat().st_size > 0, name


def test_the_table_reads_each_logs_window_by_its_declared_parser():
    '''The timed window through the registry's parser, the components'
    too (hpctestlib_ml.parsers has no list of extractors any more).'''
    text = ('[matmul_rate] rank 0 precision fp32 n 64 iterations 3 '
            'products 2 tflops 0.1 min 0.1 max 0.1 tf32 False\n'
            '[hpcml] timed region 100.000 112.500\n')
    assert table._window('matmul_rate', text) == (100.0, 112.5)
    assert table._window('no_such_workload', text) is None


def test_the_phases_run_every_check_and_precision_once():
    '''Each one-rank PyTorch check in one defaults phase, each of its
    other precisions in one variants phase, none twice; the calls run
    every phase but the probes once.'''
    seen = []
    for phase, sessions in phases.PHASES.items():
        for session in sessions:
            for check in session.checks(cpu=False):
                for precision in (session.precisions(check, False) or
                                  (phases.plan(check).default,)):
                    seen.append((check, precision))
    assert len(seen) == len(set(seen))
    expected = {(c, p) for c in phases.pytorch_checks()
                for p in (phases.plan(c).default, *phases.plan(c).variants)}
    assert set(seen) == expected
    called = [p for call in phases.CALLS for p in call]
    assert sorted(called) == sorted(phases.PHASES)


def test_the_usage_and_the_guide_name_the_phases_there_are():
    '''validate.sh's usage listed the seven phases of an old layout, and
    the guide a phase, ``other``, that no longer existed: both name
    phases.py's.'''
    proc = subprocess.run(['bash', str(VALIDATE)], capture_output=True,
                          text=True, timeout=60)
    assert proc.returncode == 2
    listed = [line.split(':', 1)[1].split() for line in
              proc.stderr.splitlines() if line.strip().startswith('Phases:')]
    assert listed == [list(phases.PHASES)], proc.stderr
    guide = (REPO / 'docs' / 'guide' / 'gpu_validation.md').read_text()
    table = {name for row in re.findall(
        r'^\| `([\w-]+)`(?:, `([\w-]+)`)? \|', guide, re.M)
        for name in row if name}
    assert table == set(phases.PHASES)
    named = set(re.findall(r'`([\w-]+)` phase', guide))
    assert named <= set(phases.PHASES), named
