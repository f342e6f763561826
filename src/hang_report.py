"""What a hung job's ranks were doing, from their stacks, in one line:
which rank stopped where, and where the others wait.

The hang watch (:mod:`hang_watch`) writes one report per rank (its step,
its process state, its Python stack as ``faulthandler`` or ``py-spy``
wrote it); :func:`summary` reads them all into the line the case fails
with::

    rank 1 on n2 stopped at step 57 in the data loader (dataset.py:41
    __getitem__); rank 0 on n1 waits in all_reduce; no rank advanced for
    131 s (bound 120 s); who acts: the user (the data loader)

How a rank is placed, from its main thread's stack, innermost frame
first (:func:`place`): a frame in ``torch/distributed/`` is a wait in
that collective (``all_reduce``, ``barrier``, ...); in
``torch/autograd/`` a wait in the backward pass, where DDP all-reduces
the gradients; a frame in ``torch/utils/data/`` the data loader; anything
else the program's own code. A rank that waits in a collective or the
backward is waiting for others; the ranks that do not (stopped elsewhere,
their process stopped or in uninterruptible sleep, or no stack at all)
are the ones the others wait for. Where every rank waits, those with the
fewest steps are named; where they are level, none is: a collective is
stuck (the network, a node).

Who acts: the user where the rank stopped in the data loader or its own
code; the site's operators where it stopped in a collective, its process
was stopped (state T) or in uninterruptible sleep (state D: the kernel, a
file system, a device), or every rank waits.

Standard library only: the watch runs in the task's reaper.
"""
import re

#: Collectives by the names torch.distributed gives them.
COLLECTIVES = frozenset((
    'all_reduce', 'all_gather', 'all_gather_into_tensor', 'all_to_all',
    'all_to_all_single', 'reduce_scatter', 'reduce_scatter_tensor',
    'broadcast', 'reduce', 'gather', 'scatter', 'barrier', 'send', 'recv',
    'isend', 'irecv', 'monitored_barrier', 'batch_isend_irecv',
    'all_gather_object', 'broadcast_object_list', 'gather_object',
    'scatter_object_list', 'all_reduce_coalesced'))

#: The longest line, in characters (triage's limit).
LIMIT = 300

_FAULTHANDLER_THREAD = re.compile(
    r'^(Current thread|Thread) (0x[0-9a-f]+) \(most recent call first\):',
    re.M)
_FAULTHANDLER_FRAME = re.compile(r'^\s+File "(.*)", line (\d+) in (.+)$')
_PYSPY_THREAD = re.compile(r'^Thread (\d+) \(([^)]*)\)(?:: "(.*)")?\s*$')
_PYSPY_FRAME = re.compile(r'^\s+(.+) \((.*):(\d+)\)$')

#: The outermost frames of a process's main thread.
_MAIN_ENTRY = ('<module>', '_run_module_as_main', '_run_code')


def threads(text, pid=None):
    '''[(is_main, [(file, line, function), ...] innermost first)] of
    every thread in a ``faulthandler`` dump or a ``py-spy dump`` of
    process *pid*.'''
    found = []
    current = None
    for line in text.splitlines():
        head = _FAULTHANDLER_THREAD.match(line)
        spy = _PYSPY_THREAD.match(line)
        if head or spy:
            main = bool(spy and (spy.group(3) == 'MainThread' or
                                 (pid and spy.group(1) == str(pid))))
            current = [main, []]
            found.append(current)
            continue
        frame = _FAULTHANDLER_FRAME.match(line)
        if frame and current is not None:
            current[1].append((frame.group(1), int(frame.group(2)),
                               frame.group(3).strip()))
            continue
        frame = _PYSPY_FRAME.match(line)
        if frame and current is not None:
            current[1].append((frame.group(2), int(frame.group(3)),
                               frame.group(1).strip()))
    return [(main, frames) for main, frames in found]


def main_frames(text, pid=None):
    '''The main thread's frames, innermost first: the thread py-spy calls
    MainThread, else the one whose outermost frame is a program's entry
    (``<module>``, runpy's), else the first; [] where there is none.'''
    found = threads(text, pid)
    for main, frames in found:
        if main:
            return frames
    for _, frames in found:
        if frames and frames[-1][2] in _MAIN_ENTRY:
            return frames
    return found[0][1] if found else []


def _path(file):
    return file.replace('\\', '/')


def short(frame):
    '''``file.py:41 function`` of a frame (the file's last two parts
    where it is a package's ``__init__`` or ``__main__``).'''
    file, line, function = frame
    parts = _path(file).split('/')
    name = '/'.join(parts[-2:]) if parts[-1] in ('__init__.py',
                                                  '__main__.py') else \
        parts[-1]
    return f'{name}:{line} {function}'


def place(frames):
    '''(kind, words) of a rank stopped in *frames* (innermost first):
    kind ``wait`` (a collective or the backward pass: waiting for
    others), ``collective`` (in a function named as a collective but not
    yet in torch's), ``data`` (the data loader) or ``code``; the words
    say where.'''
    if not frames:
        return 'none', 'with no stack'
    for file, _, function in frames:
        path = _path(file)
        if '/torch/distributed/' in path:
            name = next((f for fl, _, f in frames
                         if _path(fl).endswith('distributed_c10d.py')),
                        function)
            return 'wait', name
        if '/torch/autograd/' in path:
            return 'wait', 'backward'
    named = next((f for f in frames if f[2] in COLLECTIVES), None)
    if named:
        return 'collective', f'in {named[2]} ({short(frames[0])})'
    if any('/torch/utils/data/' in _path(f[0]) for f in frames):
        own = next((f for f in frames if not _library(f[0])), frames[0])
        return 'data', f'in the data loader ({short(own)})'
    return 'code', f'in {short(frames[0])}'


def _library(file):
    '''Whether *file* is Python's or an installed package's.'''
    path = _path(file)
    return ('/site-packages/' in path or '/dist-packages/' in path or
            path.startswith('<') or re.search(r'/lib/python3\.\d+/', path)
            is not None)


#: Process states (``/proc/PID/stat``) of a rank that cannot move.
STATES = {'T': 'its process is stopped (state T: SIGSTOP or a debugger)',
          't': 'its process is stopped by a debugger (state t)',
          'D': 'its process is in uninterruptible sleep (state D: the '
               'kernel, a file system or a device)',
          'Z': 'its process has exited (state Z)'}


def describe(report):
    '''(kind, words) of one rank's *report*: its process state where it
    cannot move (kind ``stopped``), else :func:`place` of its stack.'''
    kind, words = place(report.get('frames') or [])
    state = STATES.get(report.get('state') or '')
    if state:
        where = {'none': '', 'wait': f', in {words}'}.get(kind, f', {words}')
        return 'stopped', f'{state}{where}'
    return kind, words


def ranks_text(ranks):
    '''``rank 3``, ``ranks 0-2``, ``ranks 0, 2-3`` of sorted *ranks*.'''
    ranks = sorted(ranks)
    spans, start = [], None
    for i, rank in enumerate(ranks):
        if start is None:
            start = rank
        if i + 1 == len(ranks) or ranks[i + 1] != rank + 1:
            spans.append(str(start) if start == rank else f'{start}-{rank}')
            start = None
    return ('rank ' if len(ranks) == 1 else 'ranks ') + ', '.join(spans)


def culprits(reports):
    '''The reports of the ranks the others wait for (see the module's
    docstring); [] where every rank waits at the same step.'''
    kinds = {r['rank']: describe(r)[0] for r in reports}
    found = [r for r in reports if kinds[r['rank']] != 'wait']
    if found or not reports:
        return found
    fewest = min(r['steps'] for r in reports)
    if all(r['steps'] == fewest for r in reports):
        return []
    return [r for r in reports if r['steps'] == fewest]


def who_acts(named):
    '''Who acts on the hang of ranks *named* (their reports), in words.'''
    if not named:
        return 'the operators (a collective stuck: the network or a node)'
    kinds = [describe(r)[0] for r in named]
    nodes = sorted({r['node'] for r in named})
    if 'stopped' in kinds or 'none' in kinds:
        return f'the operators (the node: {", ".join(nodes)})'
    if 'collective' in kinds or 'wait' in kinds:
        return (f'the operators (a collective stuck on '
                f'{", ".join(nodes)})')
    if 'data' in kinds:
        return 'the user (the data loader)'
    return "the user (the program's code)"


def seconds(value):
    '''``131 s``, ``5.3 s``: whole seconds from 10 on.'''
    return f'{value:.0f} s' if value >= 10 else f'{value:.1f} s'


def summary(reports, world, idle_s, bound_s):
    '''The one line (at most :data:`LIMIT` characters) of a hang: the
    ranks the others wait for, each with its node, step and where it
    stopped; where the others wait; the ranks with no report; how long
    no rank advanced, the bound, and who acts.'''
    reports = sorted(reports, key=lambda r: r['rank'])
    named = culprits(reports)
    parts = []
    for r in named:
        kind, words = describe(r)
        words = {'wait': f' in {words}', 'stopped': f': {words}'}.get(
            kind, f' {words}')
        parts.append(f"rank {r['rank']} on {r['node']} stopped at step "
                     f"{r['steps']}{words}")
    waiting = {}
    for r in reports:
        if r in named:
            continue
        kind, words = describe(r)
        waiting.setdefault(words, []).append(r)
    for words, group in waiting.items():
        ranks = ranks_text([r['rank'] for r in group])
        verb = 'waits' if len(group) == 1 else 'wait'
        on = f" on {group[0]['node']}" if len(group) == 1 else ''
        if not named:
            at = f" at step {group[0]['steps']}"
            parts.append(f'{ranks}{on} {verb} in {words}{at}')
        else:
            parts.append(f'{ranks}{on} {verb} in {words}')
    missing = sorted(set(range(world)) - {r['rank'] for r in reports})
    if missing:
        parts.append(f'no report from {ranks_text(missing)}')
    tail = (f'no rank advanced for {seconds(idle_s)} (bound '
            f'{seconds(bound_s)}); who acts: {who_acts(named)}')
    head = '; '.join(parts)
    room = LIMIT - len(tail) - 2
    if len(head) > room:
        head = head[:room - 3] + '...'
    return f'{head}; {tail}'
