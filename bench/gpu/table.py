"""The table that ends ``validate.sh run``: one row per case of every
phase under OUT, with its verdict, and the probes' expectations above it.

Columns: phase, case, the device that ran it, throughput, MFU and the peak
it divided by, step time and the share of it spent waiting for data, peak
GPU memory (the framework's, and ``nvidia-smi``'s over the timed window),
energy per sample (the suite's, and the ``nvidia-smi`` trace's power
integrated over the same timed window), PASS/FAIL. A figure the checks do
not log (yet) shows '-'.

Sources, each read with the suite's own reader: the cases and their test
variables from ReFrame's run report (``--report-file``), the figures from
the perflogs (:mod:`hpctestlib_ml.report.history`), the timed window from
the job's log through the workload's parser
(its declaration's, :mod:`hpctestlib_ml.registry`), the device records
(:mod:`hpctestlib_ml.parsers.hpcml_records`), the trace (:mod:`trace`).

A case PASSes when ReFrame passed it (sanity: finite losses, every step;
performance), it ran on the device the phase is for (a GPU unless
``--cpu``), its throughput is a positive number, its MFU lies in (0, 100]
% (on a GPU: a CPU's peak is its measured fp32 matrix rate, which bf16
runs may pass), and, on a GPU, the suite's energy agrees with the trace
within :data:`ENERGY_TOLERANCE` over a window long enough to judge.
"""
import json
import math
import pathlib
import sys

REPO = pathlib.Path(__file__).resolve().parents[2]

from phases import NO_ENERGY_PHASES, PHASES              # noqa: E402
import trace as smi                                      # noqa: E402

#: How far the suite's energy may be from the trace's integral: NVML's
#: counter sampled each second against power read five times a second,
#: both over the same window.
ENERGY_TOLERANCE = 0.15

#: A window shorter than this, or with fewer trace samples, is not judged:
#: the edges' interpolation would dominate.
MIN_WINDOW_S = 5.0
MIN_TRACE_SAMPLES = 10

#: Step-time metrics, in the order they are preferred.
STEP_METRICS = ('time_per_step_secs', 'time_per_iteration_secs_avg',
                'time_per_iteration_secs')


def _fmt(value, digits=3):
    if value is None:
        return '-'
    if abs(value) >= 100:
        return f'{value:,.0f}'
    return f'{value:.{digits}g}'


def _finite(value):
    return isinstance(value, (int, float)) and math.isfinite(value)


def _job_text(case):
    '''The job's stdout and stderr, from its stage directory (kept) or its
    output directory.'''
    parts = []
    for directory in (case.get('stagedir'), case.get('outputdir')):
        if not directory or not pathlib.Path(directory).is_dir():
            continue
        for name in ('rfm_job.out', 'rfm_job.err'):
            path = pathlib.Path(directory) / name
            if path.is_file():
                parts.append(path.read_text(errors='replace'))
        if parts:
            break
    return '\n'.join(parts)


def device_of(case, text):
    '''What ran the case: the check's ``device_ran`` where it logs one,
    else rank 0's ``[hpcml] device`` record, else None.'''
    from hpctestlib_ml.parsers import hpcml_records
    if case.get('device_ran'):
        return case['device_ran']
    record = hpcml_records.by_rank(text, 'device').get(0)
    if not record:
        return None
    return ' '.join(str(record.get(k)) for k in ('kind', 'backend', 'name')
                    if record.get(k)) + (f' #{record["index"]}'
                                         if 'index' in record else '')


def _perflog_runs(phase_dir):
    from hpctestlib_ml.report import history
    perflogs = phase_dir / 'var' / 'perflogs'
    if not perflogs.is_dir():
        return []
    return history.read_perflogs([str(perflogs)]).runs


def _matching_run(case, runs):
    '''The perflog line of *case*: its display name, the completion time
    nearest the report's.'''
    same = [r for r in runs if r.display_name == case.get('display_name')]
    when = case.get('job_completion_time_unix') or 0
    return min(same, key=lambda r: abs(r.time - when)) if same else None


def _headline(workload, run):
    from hpctestlib_ml.report import analysis
    line = analysis.headline(workload, [run], analysis.load_weights())
    return line.metric if line else None


def _declared(workload):
    '''The registry's declaration of *workload* (None where unknown).'''
    from hpctestlib_ml import registry
    return registry.registered().get(workload)


def _window(workload, text):
    declared = _declared(workload)
    if declared is None:
        return None
    try:
        return declared.parser.training_log(text).timed_window
    except Exception:             # a log cut short: no window, said so
        return None


def memory_note(estimated, peak_mib):
    '''The suite's memory estimate (the case's ``memory_estimated``, e.g.
    ``27.0 GiB``) against the peak the ranks measured (the allocator's
    reserved peak, MiB); None where either is missing.'''
    if not estimated or not _finite(peak_mib) or peak_mib <= 0:
        return None
    peak_gib = peak_mib / 1024
    ratio = float(estimated.split()[0]) / peak_gib - 1
    return (f'memory: estimated {estimated} per device, measured peak '
            f'{peak_gib:.1f} GiB (allocator reserved), estimate '
            f'{ratio * 100:+.0f}%')


def case_row(phase, case, run, trace, cpu):
    '''One row of the table (a dict) for a ReFrame test case.'''
    workload = case.get('workload', '')
    text = _job_text(case)
    name = case.get('display_name', case.get('name', '?'))
    short = name.replace(' %scale=1_proc', '').replace(
        ' %launch_mode=per_task', '')
    row = {'phase': phase, 'case': short, 'workload': workload,
           'result': case.get('result'), 'device': device_of(case, text),
           'mfu_peak': case.get('mfu_peak') or None, 'notes': [],
           'fail': []}
    metrics = run.metrics if run else {}
    value = lambda n: metrics[n].value if n in metrics else None  # noqa
    throughput = _headline(workload, run) if run else None
    row['throughput'] = value(throughput) if throughput else None
    row['throughput_unit'] = (metrics[throughput].unit
                              if throughput in metrics else '')
    row['mfu'] = value('mfu')
    row['step_s'] = next((value(m) for m in STEP_METRICS if m in metrics),
                         None)
    row['data_share'] = value('data_share')
    row['gpu_mem_MiB'] = value('gpu_mem_peak_MiB')
    note = memory_note(case.get('memory_estimated'), row['gpu_mem_MiB'])
    if note:
        row['notes'].append(note)
    row['energy_per_sample_J'] = value('energy_per_sample_J')
    row['energy_counter'] = case.get('energy_counter')
    window = _window(workload, text)
    row['window'] = window
    row['trace_mem_MiB'] = row['trace_per_sample_J'] = None
    if trace and window:
        row['trace_mem_MiB'] = trace.peak('memory.used', *window)
        try:
            joules, samples = trace.energy(*window)
        except smi.TraceError as err:
            row['notes'].append(f'trace: {err}')
        else:
            seconds = window[1] - window[0]
            row['trace_J'], row['trace_samples'] = joules, samples
            # A component's headline is no rate of samples.
            component = getattr(_declared(workload), 'kind', '') == \
                'component'
            if (_finite(row['throughput']) and row['throughput'] > 0
                    and not component):
                row['trace_per_sample_J'] = (joules / seconds /
                                             row['throughput'])
    judge(row, phase, cpu, value('energy_J'), case.get('fail_reason'))
    return row


def judge(row, phase, cpu, energy_j, fail_reason):
    '''Fill ``row['fail']`` with what is wrong, and the verdict.'''
    fail, notes = row['fail'], row['notes']
    if row['result'] != 'pass':
        fail.append((fail_reason or f'ReFrame: {row["result"]}')
                    .strip().splitlines()[0][:300])
    device = row['device']
    if cpu:
        if device and device.startswith(('gpu', 'cuda')):
            fail.append(f'ran on {device} in a --cpu run')
    elif device is None:
        fail.append('no device logged (device_ran, [hpcml] device): cannot '
                    'tell that it ran on the GPU (review finding 11)')
    elif not device.startswith('gpu'):
        fail.append(f'ran on {device}, not the GPU (review finding 11)')
    if row['result'] == 'pass':
        if not (_finite(row['throughput']) and row['throughput'] > 0):
            fail.append(f'throughput {row["throughput"]}: not a positive '
                        f'number')
        if row['mfu'] is not None and not 0 < row['mfu'] <= 100:
            if cpu and row['mfu'] > 100:
                notes.append(f'MFU {row["mfu"]:.4g} %: over this CPU\'s '
                             f'measured fp32 matrix rate, which bf16 and a '
                             f'rate measured under load can pass (not '
                             f'judged on CPUs)')
            else:
                fail.append(f'MFU {row["mfu"]:.4g} % is outside (0, 100]: '
                            f'the FLOPs or the peak '
                            f'({row["mfu_peak"] or "-"}) are wrong')
    if not cpu and row['result'] == 'pass' and phase not in NO_ENERGY_PHASES:
        judge_energy(row, energy_j)
    row['verdict'] = 'FAIL' if fail else 'PASS'
    return row


def judge_energy(row, energy_j):
    fail, notes = row['fail'], row['notes']
    window = row['window']
    if energy_j is None:
        fail.append(f'no energy figure: {row["energy_counter"] or "-"}')
        return
    if 'trace_J' not in row:
        notes.append('energy not compared: no trace over the timed window')
        return
    counter = row['energy_counter'] or ''
    if not counter.startswith('nvml') or '+' in counter:
        notes.append(f'energy not compared: the suite counts {counter}, '
                     f'the trace the GPU alone')
        return
    seconds = window[1] - window[0]
    ratio = energy_j / row['trace_J'] if row['trace_J'] else math.inf
    row['energy_ratio'] = ratio
    if seconds < MIN_WINDOW_S or row['trace_samples'] < MIN_TRACE_SAMPLES:
        notes.append(f'energy not judged: the timed window is {seconds:.1f} s'
                     f' ({row["trace_samples"]} trace samples; at least '
                     f'{MIN_WINDOW_S:g} s and {MIN_TRACE_SAMPLES} needed: '
                     f'more -S <Check>.steps=)')
    elif abs(ratio - 1) > ENERGY_TOLERANCE:
        fail.append(f'energy {energy_j:.0f} J is {ratio:.2f} x the trace\'s '
                    f'{row["trace_J"]:.0f} J over the same {seconds:.1f} s')


def phase_rows(out, phase, cpu):
    '''The rows of *phase* under OUT, and its sessions' problems.'''
    phase_dir = pathlib.Path(out) / phase
    record = json.loads((phase_dir / 'phase.json').read_text())
    trace_path = phase_dir / 'smi.csv'
    trace, problems = None, []
    if trace_path.is_file():
        try:
            trace = smi.Trace.read(trace_path)
        except (smi.TraceError, OSError) as err:
            problems.append(f'{phase}: nvidia-smi trace unreadable: {err}')
    elif not cpu:
        problems.append(f'{phase}: no nvidia-smi trace ({trace_path})')
    runs = _perflog_runs(phase_dir)
    rows = []
    for session in record['sessions']:
        if session['status'] != 'ran':
            problems.append(f'{phase}: session {session["report"]} '
                            f'{session["status"]}')
        report = phase_dir / session['report']
        if not report.is_file():
            if session['status'] == 'ran':
                problems.append(f'{phase}: ReFrame wrote no report '
                                f'{report.name} (see reframe-*.log)')
            continue
        data = json.loads(report.read_text())
        cases = [c for r in data.get('runs', [])[-1:]
                 for c in r.get('testcases', [])]
        if not cases:
            problems.append(f'{phase}: session {report.name} selected no '
                            f'test case')
        for case in cases:
            rows.append(case_row(phase, case, _matching_run(case, runs),
                                 trace, cpu))
    return rows, problems


def collect(out):
    '''{'probes': [...], 'rows': [...], 'problems': [...], 'ok': bool}
    of every phase found under OUT.'''
    out = pathlib.Path(out)
    summary = {'probes': [], 'rows': [], 'problems': []}
    probes = out / 'probes' / 'probes.json'
    if probes.is_file():
        summary['probes'] = json.loads(probes.read_text())['checks']
    for phase in PHASES:
        if phase == 'probes' or not (out / phase / 'phase.json').is_file():
            continue
        record = json.loads((out / phase / 'phase.json').read_text())
        rows, problems = phase_rows(out, phase, record['cpu'])
        summary['rows'] += rows
        summary['problems'] += problems
    summary['ok'] = (all(p['ok'] for p in summary['probes']) and
                     all(r['verdict'] == 'PASS' for r in summary['rows']) and
                     not summary['problems'] and
                     bool(summary['probes'] or summary['rows']))
    return summary


COLUMNS = ('phase', 'case', 'device', 'throughput', 'MFU (peak)',
           'step s (data %)', 'GPU MiB (smi)', 'J/sample (trace)', 'verdict')


def cells(row):
    throughput = (f'{_fmt(row["throughput"])} {row["throughput_unit"]}'
                  if row['throughput'] is not None else '-')
    mfu = _fmt(row['mfu']) + (' %' if row['mfu'] is not None else '')
    return (row['phase'], row['case'], row['device'] or '-', throughput,
            f'{mfu} ({row["mfu_peak"] or "-"})',
            f'{_fmt(row["step_s"])} ({_fmt(row["data_share"])})',
            f'{_fmt(row["gpu_mem_MiB"])} ({_fmt(row["trace_mem_MiB"])})',
            f'{_fmt(row["energy_per_sample_J"])} '
            f'({_fmt(row["trace_per_sample_J"])})',
            row['verdict'])


def render(summary):
    lines = []
    for check in summary['probes']:
        lines.append(f'probes  {"ok  " if check["ok"] else "FAIL"}  '
                     f'{check["expect"]}: {check["found"]}')
    table = [COLUMNS] + [cells(r) for r in summary['rows']]
    widths = [max(len(str(t[i])) for t in table) for i in range(len(COLUMNS))]
    if summary['rows']:
        lines.append('')
        for i, line in enumerate(table):
            lines.append('  '.join(str(c).ljust(w) for c, w in
                                   zip(line, widths)).rstrip())
            if i == 0:
                lines.append('  '.join('-' * w for w in widths))
    details = [f'{r["verdict"]} {r["phase"]} {r["case"]}: '
               + '; '.join(r['fail'] + r['notes'])
               for r in summary['rows'] if r['fail'] or r['notes']]
    if details or summary['problems']:
        lines.append('')
    lines += details + [f'PROBLEM {p}' for p in summary['problems']]
    lines.append('')
    lines.append('validation: ' + ('PASS' if summary['ok'] else 'FAIL'))
    return '\n'.join(lines) + '\n'


def main(out):
    summary = collect(out)
    text = render(summary)
    pathlib.Path(out, 'table.txt').write_text(text)
    pathlib.Path(out, 'summary.json').write_text(
        json.dumps(summary, indent=1, default=str) + '\n')
    sys.stdout.write(text)
    return 0 if summary['ok'] else 1


if __name__ == '__main__':
    sys.exit(main(sys.argv[1]))
