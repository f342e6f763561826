"""What a check reads of its references at run time: its references file,
the loss curve it logs, its partition's noise floor, its case's entry in
the generated block (the runs the reference came from, the reference loss
curve, the known-good digest of its software stack) and whether its
losses leave that curve. The statistics
(:mod:`.derive`) and the command are not loaded with the checks.
"""
import os

import yaml

from hpctestlib_ml.history_refs.store import mapping_owners, read_block
from hpctestlib_ml.paths import REFERENCES_DIR

#: Points of the loss curve kept with each result (``loss_curve``).
LOSS_CURVE_POINTS = 20

#: The partition ``extras`` key of a site's noise floor: how far, in
#: percent, its figures move from night to night with nothing changed.
#: Logged with every result (``reference_noise_pct``); no history
#: threshold is narrower (:mod:`.derive`).
NOISE_FLOOR_EXTRA = 'reference_noise_pct'


def noise_floor(value):
    '''The fraction a noise floor in percent stands for (*value*: a
    number, or its text as the site config's environment or a perflog
    holds it); None where none is declared (None, ''). A ValueError naming
    what a floor must be for anything else.'''
    if value is None or str(value).strip() in ('', 'None', 'null'):
        return None
    try:
        percent = float(value)
    except (TypeError, ValueError):
        percent = None
    if isinstance(value, bool) or percent is None or not 0 < percent < 100:
        raise ValueError(f'{NOISE_FLOOR_EXTRA} must be a percentage above 0 '
                         f'and below 100 (e.g. 10), got {value!r}')
    return percent / 100


def format_loss_curve(losses):
    '''The ``loss_curve`` logged with a result: the first
    :data:`LOSS_CURVE_POINTS` logged losses, 8 significant digits.'''
    return ','.join(f'{v:.8g}' for v in list(losses)[:LOSS_CURVE_POINTS])


def parse_loss_curve(text):
    '''The losses of a logged ``loss_curve`` (:func:`format_loss_curve`);
    [] for none, or for text that is not one.'''
    try:
        return [float(v) for v in (text or '').split(',') if v.strip()]
    except ValueError:
        return []


def history_entry(path, check, partition, case):
    '''(source text, loss curve) of a case's history reference in the
    references file *path*, (None, None) where it has none.'''
    try:
        with open(path) as fp:
            data = yaml.safe_load(fp) or {}
    except OSError:
        return None, None
    block = read_block(data)
    owner = mapping_owners(data).get(check, check)

    def get(section):
        return block[section].get(owner, {}).get(partition, {}).get(case)

    return get('sources'), get('loss_curves')


def known_answer(path, check, partition, case, stack):
    '''The known-good digest entry (``{digest, runs, stack}``) of software
    stack *stack* (:func:`hpctestlib_ml.answers.stack_id`) of a case in
    the references file *path*; None where it has none.'''
    try:
        with open(path) as fp:
            data = yaml.safe_load(fp) or {}
    except OSError:
        return None
    owner = mapping_owners(data).get(check, check)
    cases = read_block(data)['answers'].get(owner, {}).get(partition, {})
    return (cases.get(case) or {}).get(stack)


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


def shape_problem(path, entry):
    '''What is wrong with the shape of references file *path* where
    ReFrame would read it for test *entry* and stop on a bare type error
    (the file not a mapping of test names, the test's entry not a mapping,
    its ``$index`` not a list of names); None where the shape is right or
    the file does not parse (ReFrame names the file and line then).'''
    try:
        with open(path) as fp:
            data = yaml.safe_load(fp)
    except (OSError, yaml.YAMLError, UnicodeDecodeError):
        return None
    fix = ('its comment shows an entry, and config/references holds the '
           "suite's own")
    if data is None:
        return None
    if not isinstance(data, dict):
        return (f'{path} is a {type(data).__name__}, not a mapping of test '
                f'names to their references ({fix})')
    if entry not in data:
        return None
    block = data[entry]
    if not isinstance(block, dict):
        return (f'{path}: {entry}: {block!r} is no mapping of $index and '
                f'partitions ({fix})')
    index = block.get('$index', [])
    if not (isinstance(index, list) and
            all(isinstance(name, str) for name in index)):
        return (f'{path}: {entry}: $index {index!r} is no list of names '
                f'such as [$partition, reference_case] ({fix})')
    return None


def references_file(workload, directory=None):
    '''The references file of *workload*: in *directory*, else in the one
    the checks read (:data:`~hpctestlib_ml.paths.REFERENCES_DIR`).'''
    return os.path.join(directory or REFERENCES_DIR, f'{workload}.yaml')

