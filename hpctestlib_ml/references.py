"""``hpcml references``: ReFrame references from a site's own history.

A regression suite can only fail on a regression where every case has a
reference. Published results cover a few systems; every other system gets
its references from its own passing runs (perflogs and/or the results DB):

- a case is a test class on a ``system:partition`` with one
  ``reference_case`` (size, nodes x ranks, launch mode, batch, precision,
  the test's parameters: :meth:`hpctestlib_ml.base.MLTrainingTest.
  reference_case_key`), logged with every result;
- the reference of a metric is the median of the case's last N passing
  runs (default 10), once it has at least ``--min-runs`` (default 5);
- its threshold is ``max(FLOOR, K x robust spread, second-worst run)``
  below the reference for higher-is-better metrics (throughput, MFU) and
  above it for lower-is-better ones (step time, energy per sample), where
  the robust spread is 1.4826 x the median absolute deviation over the
  median (the standard deviation for normal noise, not pulled by one odd
  run) and the second-worst run is the second-largest departure of the N
  runs from their median in the worse direction (a spread estimated from
  few runs can be too small; what the history saw twice is not a
  regression).
  ``FLOOR`` (3 %) keeps a perfectly quiet case from failing on noise it
  never showed in N runs; ``K`` = 4 is chosen from the measured noise of
  this suite's runs (bench/README.md, "Regression detection": 20 real
  runs each of three CPU cases, robust spreads 1.8-4.7 %). No real run
  failed the references of the 10 before it. In histories drawn from those
  runs an unchanged run fails 0.3-0.9 % of the time with K = 4 (1.3-2.0 %
  with K = 3 for the two noisier cases, 0.2-0.35 % with K = 5), and a
  single run 10 % slower fails 16 / 64 / 82 % of the time for spreads of
  4.7 / 2.6 / 1.8 % (K = 3: 33 / 85 / 94 %; K = 5: 8 / 43 / 64 %). K = 4
  halves to thirds K = 3's false alarms for a modest loss of power; a
  drop that one run cannot show is the report's to find, over several;
- each case's loss over its first logged steps (fixed seeds) becomes a
  reference curve with a tolerance per step from the same runs' spread
  (:data:`LOSS_K` x the largest deviation from their median, at least
  :data:`LOSS_FLOOR` of the loss): a run whose curve leaves it fails as a
  numerics regression (:func:`loss_curve_departure`).

``--write`` merges them into the per-workload files the checks read
(``config/references/<workload>.yaml``, or ``HPCML_REFERENCES_DIR``): one
generated block at the top of each file (between :data:`BEGIN` and
:data:`END`, under the top-level key :data:`BLOCK_KEY`, which ReFrame does
not read), pulled into each check's references with a YAML merge key
(``<<: *hpcml_history_<Check>``). Published references (JUWELS, CARAML)
are never changed, and where a partition has published references its
history references are not written. Every entry is commented with the
runs it came from; the same text is kept in the block's ``sources``, from
which a check names them when it fails.
"""
import dataclasses
import os
import re
import statistics
import time

import yaml

from hpctestlib_ml.paths import REFERENCES_DIR

BLOCK_KEY = 'hpcml_history'
BEGIN = ('# >>> hpcml references: generated from this site\'s history by '
         '`hpcml references --write`; rerun it to change this block')
END = '# <<< hpcml references'

#: The ``$index`` of every references file.
INDEX = ['$partition', 'reference_case']

#: Threshold rule: max(FLOOR, K x robust relative spread).
FLOOR = 0.03
K = 4.0
#: Median absolute deviation -> standard deviation for normal noise.
MAD_TO_SIGMA = 1.4826

DEFAULT_LAST = 10
DEFAULT_MIN_RUNS = 5

#: Points of the loss curve kept with each result (``loss_curve``).
LOSS_CURVE_POINTS = 20
#: Loss-curve tolerance per step: LOSS_K x the largest deviation of the
#: reference runs from their median, at least LOSS_FLOOR x |loss|.
LOSS_K = 3.0
LOSS_FLOOR = 1e-4


class ReferencesError(ValueError):
    '''Bad input to ``hpcml references``, with the fix.'''


def metric_direction(name, unit):
    '''+1 where higher is better, -1 where lower is better, None for
    metrics that get no history reference (whole-run times, memory,
    quality, a program's own printed figures).'''
    if name.startswith('printed_') or name == 'hfu':
        return None
    if name == 'mfu':
        return +1
    if name == 'energy_per_sample_J':
        return -1
    if name.startswith('time_per_') and unit == 's':
        return -1
    if unit.endswith('/s'):
        return +1
    return None


def robust_spread(values):
    '''1.4826 x median absolute deviation / median: the relative standard
    deviation for normal noise, unmoved by a single odd run.'''
    center = statistics.median(values)
    mad = statistics.median(abs(v - center) for v in values)
    return MAD_TO_SIGMA * mad / abs(center) if center else 0.0


def threshold(values, direction=+1):
    '''(reference, relative tolerance, robust spread) of *values*: the
    median, and max(FLOOR, K x robust spread, the second-worst run's
    departure from the median in the worse *direction*). The last term
    keeps a spread underestimated from few runs from failing runs the
    history itself has seen more than once; one odd run does not widen
    it.'''
    spread = robust_spread(values)
    center = statistics.median(values)
    worse = sorted(-direction * (v / center - 1) for v in values) \
        if center else [0.0]
    seen = worse[-2] if len(worse) > 1 else 0.0
    return center, max(FLOOR, K * spread, seen), spread


def format_loss_curve(losses):
    '''The ``loss_curve`` logged with a result: the first
    :data:`LOSS_CURVE_POINTS` logged losses, 8 significant digits.'''
    return ','.join(f'{v:.8g}' for v in list(losses)[:LOSS_CURVE_POINTS])


def parse_loss_curve(text):
    try:
        return [float(v) for v in (text or '').split(',') if v.strip()]
    except ValueError:
        return []


@dataclasses.dataclass
class CaseReference:
    check: str              # test class name
    partition: str          # system:partition
    case: str               # reference_case
    metrics: dict           # name -> [ref, lower, upper, unit]
    spreads: dict           # name -> robust relative spread
    runs: int               # passing runs the references come from
    passing: int            # passing runs of the case in the history
    first: float            # time of the first and last run used
    last: float
    source: str             # where the runs came from (files)
    loss_curve: dict = None  # {'losses': [...], 'tolerance': [...], 'runs': n}
    workload: str = ''      # the references file it goes to

    def describe(self):
        return (f'median of the last {self.runs} of {self.passing} passing '
                f'runs, {_when(self.first)} .. {_when(self.last)} '
                f'({self.source})')


def _when(seconds):
    return time.strftime('%Y-%m-%d %H:%M UTC', time.gmtime(seconds))


def _loss_reference(runs):
    curves = [c for c in (parse_loss_curve(r.params.get('loss_curve'))
                          for r in runs) if c]
    if len(curves) < 2:
        return None
    points = min(len(c) for c in curves)
    centers, tolerances = [], []
    for i in range(points):
        values = [c[i] for c in curves]
        center = statistics.median(values)
        deviation = max(abs(v - center) for v in values)
        centers.append(center)
        tolerances.append(max(LOSS_K * deviation, LOSS_FLOOR * abs(center)))
    return {'losses': centers, 'tolerance': tolerances, 'runs': len(curves)}


def derive(runs, last=DEFAULT_LAST, min_runs=DEFAULT_MIN_RUNS, source=''):
    '''(references, notes): a :class:`CaseReference` per case with at
    least *min_runs* passing runs, and one line per case or run left out.'''
    if last < 2 or min_runs < 2:
        raise ReferencesError('--last and --min-runs must be at least 2: a '
                              'spread needs two runs')
    groups, unkeyed = {}, 0
    for run in sorted(runs, key=lambda r: r.time):
        if not run.params.get('reference_case'):
            unkeyed += 1
            continue
        _, where, check, case = run.case_here
        groups.setdefault((check, where, case), []).append(run)
    notes = []
    if unkeyed:
        notes.append(f'{unkeyed} runs have no reference_case (written '
                     f'before hpcml logged it): not used')
    references = []
    for (check, where, case), case_runs in sorted(groups.items()):
        passed = [r for r in case_runs if r.result == 'pass']
        if len(passed) < min_runs:
            notes.append(f'{check} {where} {case!r}: {len(passed)} passing '
                         f'runs, {min_runs} needed (--min-runs)')
            continue
        chosen = passed[-last:]
        metrics, spreads = {}, {}
        names = {n: m.unit for r in chosen for n, m in r.metrics.items()}
        for name, unit in sorted(names.items()):
            direction = metric_direction(name, unit)
            values = [r.metrics[name].value for r in chosen
                      if name in r.metrics]
            if direction is None or len(values) < min_runs:
                continue
            ref, tolerance, spread = threshold(values, direction)
            tolerance = round(tolerance, 4)
            metrics[name] = ([ref, -tolerance, None, unit] if direction > 0
                             else [ref, None, tolerance, unit])
            spreads[name] = spread
        references.append(CaseReference(
            check, where, case, metrics, spreads, len(chosen), len(passed),
            chosen[0].time, chosen[-1].time, source,
            _loss_reference(chosen), chosen[-1].workload))
    return references, notes


# The references files

def _scalar(value):
    '''*value* as one line of YAML (flow style).'''
    text = yaml.safe_dump(value, default_flow_style=True, width=10 ** 6)
    return text.strip().removesuffix('...').strip()


def _key(text):
    return _scalar(str(text))


def _owners(data):
    '''Test class -> the class whose mapping it shares (YAML aliases:
    ``CosmoFlowContainer: *cosmoflow`` shares CosmoFlow's).'''
    owners = {}
    for name, value in data.items():
        if name == BLOCK_KEY or not isinstance(value, dict):
            continue
        owners[name] = next(k for k, v in data.items() if v is value)
    return owners


def _published(data, name, block):
    '''Partitions of *name*'s mapping that are not from the block (which
    keys its entries by the class owning the mapping: a YAML alias such as
    ``CosmoFlowContainer: *cosmoflow`` shares CosmoFlow's).'''
    mapping = data.get(name) or {}
    owner = _owners(data).get(name, name)
    generated = set((block.get('references') or {}).get(owner) or {})
    return {k: v for k, v in mapping.items()
            if k != '$index' and k not in generated}


def read_block(data):
    block = data.get(BLOCK_KEY) or {}
    return {part: dict(block.get(part) or {})
            for part in ('references', 'sources', 'loss_curves')}


def render_block(block):
    '''The generated block's text, sorted by check, partition and case.'''
    lines = [BEGIN, f'{BLOCK_KEY}:', '  references:']
    for owner in sorted(block['references']):
        lines.append(f'    {owner}: &hpcml_history_{owner}')
        for part in sorted(block['references'][owner]):
            lines.append(f'      {_key(part)}:')
            cases = block['references'][owner][part]
            for case in sorted(cases):
                source = (block['sources'].get(owner, {}).get(part, {})
                          .get(case))
                if source:
                    lines.append(f'        # {source}')
                lines.append(f'        {_key(case)}:')
                for name, value in sorted(cases[case].items()):
                    lines.append(f'          {name}: {_scalar(list(value))}')
    for section in ('sources', 'loss_curves'):
        lines.append(f'  {section}:')
        for owner in sorted(block[section]):
            lines.append(f'    {owner}:')
            for part in sorted(block[section][owner]):
                lines.append(f'      {_key(part)}:')
                for case, value in sorted(block[section][owner][part]
                                          .items()):
                    lines.append(f'        {_key(case)}: {_scalar(value)}')
    lines.append(END)
    return '\n'.join(lines) + '\n'


_NEW_FILE = '''# References of {workload} (ReFrame 4.10 external references,
# $ref/$index; index: system:partition, then the case as the check logs it
# in ``reference_case``).
'''


def _insert_block(text, block_text):
    '''*text* with the generated block replaced, or inserted after the
    leading comment lines.'''
    if BEGIN in text and END in text:
        start = text.index(BEGIN)
        end = text.index(END, start) + len(END)
        end += 1 if text[end:end + 1] == '\n' else 0
        return text[:start] + block_text + text[end:]
    lines = text.splitlines(keepends=True)
    head = 0
    while head < len(lines) and (lines[head].startswith('#') or
                                 not lines[head].strip()):
        head += 1
    return ''.join(lines[:head]) + block_text + '\n' + ''.join(lines[head:])


def _merge_line(owner):
    return f'  <<: *hpcml_history_{owner}'


def _add_merge_line(text, owner):
    '''*owner*'s mapping in *text* with the merge of its history block (or
    a new mapping at the end).'''
    if re.search(rf'^{re.escape(_merge_line(owner))}\s*$', text, re.M):
        return text
    lines = text.splitlines(keepends=True)
    for i, line in enumerate(lines):
        if re.match(rf'^{re.escape(owner)}:', line):
            if not (i + 1 < len(lines) and lines[i + 1].startswith('  ')):
                raise ReferencesError(
                    f'{owner} is not a block mapping in this file: write its '
                    f'references as "{owner}:" with indented entries')
            at = i + 1
            if lines[at].strip().startswith('$index'):
                at += 1
            lines.insert(at, _merge_line(owner) + '\n')
            return ''.join(lines)
    if text and not text.endswith('\n'):
        text += '\n'
    return (text + f'\n{owner}:\n  $index: [{", ".join(INDEX)}]\n'
            f'{_merge_line(owner)}\n')


def _put(block, owner, ref):
    '''*ref*'s entries in the generated *block*, under *owner*'s mapping
    (a case without a loss curve drops the one it had).'''
    for section, value in (('references', ref.metrics),
                           ('sources', ref.describe()),
                           ('loss_curves', ref.loss_curve)):
        cases = block[section].setdefault(owner, {}).setdefault(
            ref.partition, {})
        if value is None:
            cases.pop(ref.case, None)
        else:
            cases[ref.case] = value


def merge_into_file(path, workload, references):
    '''Merge *references* (:class:`CaseReference`, one workload) into the
    references file *path*; returns one line per case written or left out.
    Published entries stay as they are (checked by reading the result back)
    and the file is replaced atomically.'''
    text = (open(path).read() if os.path.exists(path)
            else _NEW_FILE.format(workload=workload))
    data = yaml.safe_load(text) or {}
    block = read_block(data)
    owners = _owners(data)
    written = []
    for ref in references:
        owner = owners.get(ref.check, ref.check)
        index = (data.get(owner) or {}).get('$index')
        if index is not None and list(index) != INDEX:
            raise ReferencesError(
                f'{path}: {owner} is indexed by {list(index)}, not {INDEX}: '
                f'history references need the case level; re-index it')
        if ref.partition in _published(data, owner, block):
            written.append(f'left out {ref.check} {ref.partition} '
                           f'{ref.case!r}: {ref.partition} has published '
                           f'references in {path}, which hpcml references '
                           f'does not change')
            continue
        if not ref.metrics:
            continue
        _put(block, owner, ref)
        written.append(f'{ref.check} {ref.partition} {ref.case!r}: '
                       f'{len(ref.metrics)} metrics from {ref.describe()}')
    if not block['references']:
        return written
    new_text = _insert_block(text, render_block(block))
    for owner in block['references']:
        new_text = _add_merge_line(new_text, owner)
    _verify(path, data, new_text, block)
    partial = f'{path}.partial'
    with open(partial, 'w') as fp:
        fp.write(new_text)
    os.replace(partial, path)
    return written


def _verify(path, old, new_text, block):
    '''The new text parses, holds the block as meant, and every published
    entry is what it was.'''
    new = yaml.safe_load(new_text)
    if read_block(new) != block:
        raise ReferencesError(f'{path}: the generated block did not read '
                              f'back as written (file left unchanged)')
    old_block = read_block(old)
    for name in old:
        if name == BLOCK_KEY:
            continue
        if (isinstance(old[name], dict) and
                _published(old, name, old_block) !=
                _published(new, name, block)):
            raise ReferencesError(f'{path}: writing would change the '
                                  f'published references of {name} (file '
                                  f'left unchanged)')


# What a check reads

def history_entry(path, check, partition, case):
    '''(source text, loss curve) of a case's history reference in the
    references file *path*, (None, None) where it has none.'''
    try:
        with open(path) as fp:
            data = yaml.safe_load(fp) or {}
    except OSError:
        return None, None
    block = read_block(data)
    owner = _owners(data).get(check, check)

    def get(section):
        return block[section].get(owner, {}).get(partition, {}).get(case)

    return get('sources'), get('loss_curves')


def loss_curve_departure(losses, reference):
    '''A one-line reason where *losses* leave the reference curve, else
    None: the first logged step outside its tolerance.'''
    if not reference:
        return None
    expected, tolerance = reference['losses'], reference['tolerance']
    if len(losses) < len(expected):
        return (f'loss curve has {len(losses)} logged losses, the reference '
                f'{len(expected)}')
    for step, (value, center, tol) in enumerate(zip(losses, expected,
                                                    tolerance), 1):
        if not abs(value - center) <= tol:
            return (f'loss curve departs from reference at logged step '
                    f'{step}: {value:.6g} vs {center:.6g} +/- {tol:.2g}')
    return None


def references_file(workload, directory=None):
    return os.path.join(directory or REFERENCES_DIR, f'{workload}.yaml')


# The command

def _targets(references, write):
    '''Workload -> the references file its entries go to: ``<write>/
    <workload>.yaml`` for a directory, *write* itself for a ``.yaml`` file
    (then every entry must be of one workload).'''
    workloads = sorted({r.workload for r in references})
    if write.endswith(('.yaml', '.yml')) and not os.path.isdir(write):
        if len(workloads) > 1:
            raise ReferencesError(
                f'--write {write}: one file, but the runs are of '
                f'{len(workloads)} workloads ({", ".join(workloads)}): pass '
                f'--workload NAME, or a directory to --write')
        return {w: write for w in workloads}
    if not os.path.isdir(write):
        raise ReferencesError(f'--write {write}: no such directory (give the '
                              f'references directory, or a .yaml file)')
    return {w: references_file(w, write) for w in workloads}


def preview(references):
    '''The generated block *references* would make, as text.'''
    block = {'references': {}, 'sources': {}, 'loss_curves': {}}
    for ref in references:
        if ref.metrics:
            _put(block, ref.check, ref)
    return render_block(block)


def run(args, out=print):
    '''``hpcml references``; returns the exit status.'''
    from hpctestlib_ml import report
    from hpctestlib_ml.report import analysis
    data = report.load(args)
    since = analysis.parse_since(args.since) if args.since else None
    runs = analysis.select(data.runs, args.system, None, args.workload,
                           since)
    out(f'{len(runs)} runs of {args.system} selected of {len(data.runs)} '
        f'read from {len(data.files)} files')
    if not runs:
        raise ReferencesError(
            f'no runs of {args.system} in {", ".join(data.files) or "the input"}'
            f' (--system takes system or system:partition as the perflogs '
            f'name them; check --since and --workload)')
    source = ', '.join(sorted({os.path.dirname(f) if f.endswith(
        ('.log',)) or '.log.h' in f else f for f in data.files}))
    refs, notes = derive(runs, args.last, args.min_runs, source)
    for note in notes:
        out(f'  {note}')
    if not any(r.metrics for r in refs):
        raise ReferencesError(
            f'no case of {args.system} has {args.min_runs} passing runs with '
            f'figures: run the suite more often, or lower --min-runs')
    for ref in refs:
        spread = ', '.join(f'{n} {100 * s:.1f}%' for n, s in
                           sorted(ref.spreads.items()))
        out(f'{ref.check} {ref.partition} {ref.case!r}: {ref.runs} runs; '
            f'robust spread: {spread}')
    if not args.write:
        out('')
        out(preview(refs))
        out('(not written: pass --write [DIR|FILE] to merge these into the '
            'references files the checks read)')
        return 0
    for workload, path in sorted(_targets(refs, args.write).items()):
        chosen = [r for r in refs if r.workload == workload]
        for line in merge_into_file(path, workload, chosen):
            out(f'  {path}: {line}')
    return 0


def add_arguments(parser):
    from hpctestlib_ml.report import add_history_arguments
    add_history_arguments(parser, system_required=True)
    parser.add_argument('--last', type=int, default=DEFAULT_LAST,
                        metavar='N', help='passing runs in the median '
                                          f'(default {DEFAULT_LAST})')
    parser.add_argument('--min-runs', type=int, default=DEFAULT_MIN_RUNS,
                        metavar='N', help='passing runs a case needs '
                                          f'(default {DEFAULT_MIN_RUNS})')
    parser.add_argument('--write', nargs='?', const=str(REFERENCES_DIR),
                        metavar='DIR|FILE',
                        help='merge into the references files (default '
                             'directory: the one the checks read, '
                             'HPCML_REFERENCES_DIR or config/references); '
                             'without it, print what would be written')
