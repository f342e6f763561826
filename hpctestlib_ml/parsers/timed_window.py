"""The timed region of a training log as (start, stop) Unix seconds: the
window the energy figures integrate over (steady-state steps, not start-up,
model build or evaluation). One function per log format; None where a log
carries no timestamps.

Local-time stamps (OpenCLIP's logger, Megatron's iteration lines) are read
in the time zone of the process that parses them: ReFrame runs on a login
node of the same site as the compute nodes.
"""
import re
import time

# Lines may carry a launcher's or a copy's prefix ("[rank0]:", "> ").
_OPEN_CLIP = re.compile(r'(\d{4}-\d\d-\d\d,\d\d:\d\d:\d\d) \| INFO \| Train Epoch')
# Current Megatron-LM stamps microseconds too ("[2025-03-01 12:00:00.123456]").
_MEGATRON = re.compile(r'\[(\d{4}-\d\d-\d\d \d\d:\d\d:\d\d)(?:\.\d+)?\] '
                       r'iteration\s+\d+/', re.M)
#: Printed by the suite's programs that have no timestamped log of their
#: own (src/resnet50_tf, src/gpt2_finetune, the components, ...), written
#: by ``src/hpcml_log.py``'s ``emit_timed_region``.
SUITE_LINE = re.compile(r'^\[hpcml\] timed region (\d+\.?\d*) (\d+\.?\d*)',
                        re.M)


def _local(stamps, fmt):
    if len(stamps) < 2:
        return None
    first, last = (time.mktime(time.strptime(s, fmt))
                   for s in (stamps[0], stamps[-1]))
    return (first, last) if last > first else None


def from_open_clip(text):
    '''First to last ``Train Epoch`` line (1 s resolution).'''
    return _local(_OPEN_CLIP.findall(text), '%Y-%m-%d,%H:%M:%S')


def from_megatron(text):
    '''First to last timestamped iteration line (1 s resolution).'''
    return _local(_MEGATRON.findall(text), '%Y-%m-%d %H:%M:%S')


def from_mllog(events, records=()):
    '''The steady-state training records' span: from the first training
    record (the end of the warm-up step or block) to the last, where there
    are two (*records*: those events); else MLPerf's run_start to run_stop,
    which also holds staging and evaluations (ms resolution).'''
    stamps = [e.get('time_ms') for e in records]
    if len(stamps) >= 2 and None not in stamps and stamps[-1] > stamps[0]:
        return stamps[0] / 1000, stamps[-1] / 1000
    times = {e['key']: e.get('time_ms') for e in events
             if e['key'] in ('run_start', 'run_stop')}
    if times.get('run_start') and times.get('run_stop'):
        return times['run_start'] / 1000, times['run_stop'] / 1000
    return None


def from_suite_line(text):
    '''The timed region the program said (its ``[hpcml] timed region``
    line, ms resolution).'''
    match = SUITE_LINE.search(text)
    return (float(match.group(1)), float(match.group(2))) if match else None
