"""Every setting of the suite, declared once: its name, type, default,
allowed values, who reads it and one line of documentation.

Three kinds of setting reach the suite:

- test variables, set with ``reframe -S NAME=VALUE`` (:data:`VARIABLE`):
  checked at the start of a case's setup
  (:class:`hpctestlib_ml.plugins.settings.Settings`), before any job is
  written;
- ``HPCML_*`` environment variables (:data:`ENVIRONMENT`): checked where
  they are read, when the site configuration loads
  (:mod:`hpctestlib_ml.siteconfig`);
- keys of a partition's ``extras`` in a site configuration
  (:data:`EXTRAS`): checked when the configuration loads, unknown keys
  included.

A value that cannot work raises :class:`SettingError`, one line: what was
given, what is allowed (the closest name, for a typo) and where to fix
it. :func:`rows` yields the declarations for the documentation's page of
settings. This module imports no ReFrame.
"""
import copy
import dataclasses
import difflib
import os
import re
import shlex
import string

from hpctestlib_ml import perflog_fields
from hpctestlib_ml.constants import SCALES, SIZES

#: A test variable: ``-S NAME=VALUE``.
VARIABLE = 'variable'
#: An ``HPCML_*`` environment variable read where ReFrame or a tool runs.
ENVIRONMENT = 'environment'
#: A key of a partition's ``extras`` in a site configuration.
EXTRAS = 'extras'
#: An ``HPCML_*`` variable the suite sets in a job for its programs, or
#: one its own tests and benchmarks read: declared so that a typo among
#: the others is found, never a site's setting.
INTERNAL = 'internal'

#: The kinds of setting, in the order the settings page lists them.
KINDS = (VARIABLE, ENVIRONMENT, EXTRAS, INTERNAL)

#: Who reads the test variables every check has.
ALL_CHECKS = 'every check'


class SettingError(ValueError):
    '''A setting that cannot work; the message (one line) names what was
    given, what is allowed and where to fix it.'''


@dataclasses.dataclass(frozen=True)
class Setting:
    '''One setting.'''
    #: Its name (``batch_size``, ``HPCML_GPUS_PER_NODE``, ``max_nodes``).
    name: str
    #: One of :data:`~hpctestlib_ml.settings.KINDS`.
    kind: str
    #: ``int``, ``float``, ``bool``, ``str``, ``word`` (text without
    #: blanks: a name that one shell word holds), ``list`` (comma- or
    #: space-separated words), ``words`` (shell words: options whose
    #: values hold commas), ``path``, ``dict``, ``assignments``
    #: (shell words ``NAME=value``), ``url`` (``http://`` or ``https://``
    #: and a host), ``template`` (text with :attr:`placeholders`) or
    #: ``duration`` (``2h``, ``1d12h``, ``90m``, or Slurm's
    #: ``[D-]HH:MM:SS``: seconds once read).
    type: str
    #: Its value where unset; None where unset means something the reader
    #: decides (said in :attr:`doc`: ``default: ...``).
    default: object
    #: One line.
    doc: str
    #: Who reads it: checks (``every check``, a workload's name), a
    #: module, a site configuration.
    reader: str
    #: The least value of a number.
    minimum: float = None
    #: The greatest value of a number.
    maximum: float = None
    #: Whether a number must lie strictly between :attr:`minimum` and
    #: :attr:`maximum` (equal to neither).
    exclusive: bool = False
    #: The values allowed (of a list: its items): a tuple, or a function
    #: that returns one (read when needed: a program's table).
    choices: object = None
    #: What is allowed, in words, where the type and choices do not say
    #: it all.
    allowed: str = ''
    #: Of a ``template``: the ``{name}`` fields it must hold, and the only
    #: ones it may (ReFrame drops a resource whose field it cannot fill).
    placeholders: tuple = ()
    #: Of a setting with choices: a function giving the choices nearest a
    #: refused value (default: those spelt most alike, ``closest``).
    near: object = None

    def choice_list(self):
        '''The allowed values, or None where any value of the type is.'''
        choices = self.choices() if callable(self.choices) else self.choices
        return tuple(choices) if choices is not None else None

    def allowed_words(self, choices=None):
        '''What this setting allows, in words (*choices* in place of its
        own, e.g. a workload's precisions).'''
        own = choices is None
        choices = self.choice_list() if own else choices
        if choices is not None:
            words = ('a comma-separated list of ' if self.type == 'list'
                     else 'one of ') + ', '.join(map(str, choices))
            return words + (f' ({self.allowed})' if own and self.allowed
                            else '')
        if self.type in ('int', 'float'):
            noun = 'an integer' if self.type == 'int' else 'a number'
            bounds = []
            if self.minimum is not None:
                bounds.append(f'{">" if self.exclusive else ">="} '
                              f'{self.minimum}')
            if self.maximum is not None:
                bounds.append(f'{"<" if self.exclusive else "<="} '
                              f'{self.maximum}')
            return ' and '.join([f'{noun} {bounds[0]}'] + bounds[1:]) \
                if bounds else noun
        if self.type == 'bool':
            return 'true or false'
        if self.type == 'duration' and not self.allowed:
            return "a time such as 2h, 90m, 1d12h or Slurm's 24:00:00"
        return self.allowed or f'a {self.type}'


# How values read as text become a setting's type.

_TRUE = ('true', 'yes', 'on', '1')
_FALSE = ('false', 'no', 'off', '0')


def _as_int(value):
    if isinstance(value, bool):
        raise ValueError
    if isinstance(value, int):
        return value
    text = str(value).strip()
    if not re.fullmatch(r'[+-]?\d+', text):
        raise ValueError
    return int(text)


def _as_float(value):
    if isinstance(value, bool):
        raise ValueError
    try:
        number = float(value)
    except (TypeError, ValueError):
        raise ValueError from None
    if number != number or number in (float('inf'), float('-inf')):
        raise ValueError
    return number


def _as_bool(value):
    if isinstance(value, bool):
        return value
    text = str(value).strip().lower()
    if text in _TRUE:
        return True
    if text in _FALSE:
        return False
    raise ValueError


def _as_list(value):
    if isinstance(value, (list, tuple)):
        return [str(v) for v in value]
    return [item for item in str(value).replace(',', ' ').split() if item]


def _as_text(value):
    if not isinstance(value, str) or not value.strip():
        raise ValueError
    return value


def _as_word(value):
    text = _as_text(value).strip()
    if re.search(r'\s', text):
        raise ValueError('it has blanks')
    return text


def template_fields(value):
    '''The ``{name}`` fields of template *value*, in order.'''
    try:
        return [field for _, field, _, _ in string.Formatter().parse(value)
                if field is not None]
    except ValueError as err:
        raise ValueError(f'not a template: {err}') from None


def _as_words(value):
    '''Shell words (a list is taken as its words).'''
    if isinstance(value, (list, tuple)):
        return [str(v) for v in value]
    try:
        return shlex.split(str(value))
    except ValueError as err:
        raise ValueError(f'not shell words ({err})') from None


def _as_url(value):
    text = _as_text(value).strip()
    if not re.fullmatch(r'https?://[^/\s:]+(:\d+)?(/\S*)?', text):
        raise ValueError
    return text


def _as_dict(value):
    if not isinstance(value, dict):
        raise ValueError
    return value


def _as_assignments(value):
    '''``[[NAME, value], ...]`` of shell words ``NAME=value``.'''
    try:
        words = shlex.split(value)
    except ValueError as err:
        raise ValueError(f'not shell words ({err})') from None
    pairs = []
    for word in words:
        key, sep, text = word.partition('=')
        if not sep or not re.fullmatch(r'[A-Za-z_]\w*', key):
            raise ValueError(f'{word!r} is not NAME=value')
        pairs.append([key, text])
    return pairs


_DURATION_UNITS = re.compile(r'(?:(\d+)d)?(?:(\d+)h)?(?:(\d+)m)?(?:(\d+)s)?')


def _slurm_seconds(text):
    '''Seconds of Slurm's ``--time`` forms with a colon or a day:
    ``MM:SS``, ``HH:MM:SS``, ``D-HH``, ``D-HH:MM``, ``D-HH:MM:SS``; None
    otherwise.'''
    days, dash, rest = text.rpartition('-')
    if dash and not days.isdigit():
        return None
    parts = rest.split(':')
    if not all(p.isdigit() for p in parts) or len(parts) > 3 or \
            (not dash and len(parts) == 1):
        return None
    numbers = [int(p) for p in parts]
    if dash:                        # D-HH[:MM[:SS]]
        hours, minutes, seconds = (numbers + [0, 0])[:3]
    elif len(numbers) == 2:         # MM:SS
        hours, (minutes, seconds) = 0, numbers
    else:                           # HH:MM:SS
        hours, minutes, seconds = numbers
    return ((int(days or 0) * 24 + hours) * 60 + minutes) * 60 + seconds


def _as_duration(value):
    '''Seconds of a duration: ReFrame's ``1d2h3m4s`` form or Slurm's
    (``HH:MM:SS``, ``MM:SS``, ``D-HH[:MM[:SS]]``), or a number of seconds
    (a Python number, as ReFrame reads one); text that is a bare number is
    refused (seconds to ReFrame, minutes to Slurm).'''
    if isinstance(value, bool):
        raise ValueError
    if isinstance(value, (int, float)):
        if value <= 0 or value != value:
            raise ValueError('not a time')
        return float(value)
    text = str(value).strip()
    if re.fullmatch(r'\d+', text):
        raise ValueError('a bare number: give its unit')
    units = _DURATION_UNITS.fullmatch(text)
    if text and units and any(units.groups()):
        days, hours, minutes, seconds = (int(g or 0) for g in units.groups())
        total = ((days * 24 + hours) * 60 + minutes) * 60 + seconds
    else:
        total = _slurm_seconds(text)
        if total is None:
            raise ValueError
    if total <= 0:
        raise ValueError('not a time')
    return float(total)


def duration_text(seconds):
    '''``2h15m`` of *seconds* (ReFrame's form, the largest units).'''
    seconds = int(round(seconds))
    parts = []
    for unit, size in (('d', 86400), ('h', 3600), ('m', 60), ('s', 1)):
        count, seconds = divmod(seconds, size)
        if count:
            parts.append(f'{count}{unit}')
    return ''.join(parts) or '0s'


_CONVERT = {'int': _as_int, 'float': _as_float, 'bool': _as_bool,
            'str': _as_text, 'word': _as_word, 'path': _as_text,
            'list': _as_list, 'dict': _as_dict,
            'assignments': _as_assignments, 'url': _as_url,
            'template': _as_text, 'duration': _as_duration,
            'words': _as_words}


def _edits(a, b):
    '''Levenshtein distance: the fewest characters inserted, deleted or
    replaced that make *a* into *b*.'''
    row = list(range(len(b) + 1))
    for i, x in enumerate(a, 1):
        previous, row[0] = row[0], i
        for j, y in enumerate(b, 1):
            previous, row[j] = row[j], min(row[j] + 1, row[j - 1] + 1,
                                           previous + (x != y))
    return row[-1]


def closest(name, names, prefix=''):
    '''`` (did you mean X?)`` for the names in *names* closest to *name*
    (difflib's close matches, the fewest edits away: ``X or Y`` where
    they tie), or ''. *prefix*, which all share, is not compared.'''
    name, names = str(name), [str(n) for n in names]
    strip = (lambda n: n[len(prefix):] if n.startswith(prefix) else n)
    found = difflib.get_close_matches(strip(name), [strip(n) for n in names],
                                      n=3, cutoff=0.6)
    if not found:
        return ''
    # The fewest edits away, then the longest prefix in common (a typo is
    # more often late in a name: 1_nodes is 1_node, not 16_nodes).
    given = strip(name)
    key = {f: (_edits(given, f), -len(os.path.commonprefix([given, f])))
           for f in found}
    best = [prefix + f for f in found if key[f] == min(key.values())]
    return f' (did you mean {" or ".join(best)}?)'


def did_you_mean(names):
    '''`` (did you mean X or Y?)`` of *names*, or '' of none.'''
    return f' (did you mean {" or ".join(names)}?)' if names else ''


def convert(setting, value, fix, choices=None, label=None):
    '''*value* (of the setting's type, or text) as the setting's type,
    checked: a number against its minimum, a choice (or each item of a
    list) against *choices* or the setting's own; None stays None. A
    :class:`SettingError` otherwise: ``LABEL must be ALLOWED, got VALUE
    (did you mean ...?): FIX``, *label* the setting's name unless given.'''
    if value is None:
        return None
    label = label or setting.name
    choices = choices if choices is not None else setting.choice_list()

    def refuse(why='', near=''):
        why = f' ({why})' if why else ''
        raise SettingError(f'{label} must be {setting.allowed_words(choices)}'
                           f', got {value!r}{why}{near}: {fix}')

    try:
        converted = _CONVERT[setting.type](value)
    except (TypeError, ValueError) as err:
        refuse(str(err))
    if setting.type == 'template':
        try:
            fields = template_fields(converted)
        except ValueError as err:
            refuse(str(err))
        wanted = set(setting.placeholders)
        unknown = sorted(set(fields) - wanted)
        if unknown:
            refuse(f'{{{unknown[0]}}} is no field the suite fills',
                   closest(unknown[0], wanted))
        missing = sorted(wanted - set(fields))
        if missing:
            refuse(f'no {{{missing[0]}}}: every case would ask for the same '
                   f'count')
    if setting.minimum is not None and (
            converted < setting.minimum or
            (setting.exclusive and converted == setting.minimum)):
        refuse()
    if setting.maximum is not None and (
            converted > setting.maximum or
            (setting.exclusive and converted == setting.maximum)):
        refuse()
    if choices is not None:
        items = converted if setting.type == 'list' else [converted]
        for item in items:
            if item not in choices:
                refuse(near=(did_you_mean(setting.near(item))
                             if setting.near else closest(item, choices)))
    return converted


def _declare(kind, reader, table):
    return {(name, reader): Setting(name, kind, type_, default, doc, reader,
                                     **more)
            for name, type_, default, doc, *rest in table
            for more in [rest[0] if rest else {}]}


def program_table(program, module, name):
    '''A program's table (its keys), read when first needed: a setting's
    choices.'''
    def read():
        from hpctestlib_ml import program_tables
        return tuple(getattr(program_tables.load(program, module), name))
    return read


def variables(reader, table):
    '''The :class:`Setting` of each test variable of *table* (rows of
    name, type, default, doc and optionally a dict of the other fields)
    that *reader* (a workload's name) reads: a workload's declaration's
    ``variables``.'''
    return tuple(_declare(VARIABLE, reader, table).values())


def extras_keys(reader, table):
    '''The :class:`Setting` of each partition extras key of *table* that
    *reader* reads: a workload's declaration's ``extras``.'''
    return tuple(_declare(EXTRAS, reader, table).values())


#: The test variables every check has, which a user sets (``-S
#: NAME=VALUE``), by (name, reader): reader ``every check``. A workload's
#: own are its declaration's
#: (:attr:`hpctestlib_ml.registry.Workload.variables`). A check's value is
#: checked at setup against the declaration of its workload, else of every
#: check.
VARIABLES = {
    **_declare(VARIABLE, ALL_CHECKS, [
        ('size', 'str', 'auto', 'what a case trains: tiny (runs anywhere), '
         'short (the benchmark model for a few minutes), benchmark, or auto '
         '(benchmark on gpu partitions, else tiny)', {'choices': SIZES}),
        ('batch_size', 'int', None, "per-rank batch; default: the size's",
         {'minimum': 1}),
        ('precision', 'str', None, "training precision as the program names "
         "it; default: the size's on GPUs, fp32 on CPUs",
         {'allowed': "the workload's precisions on the partition's device "
                     "(its declaration's precisions)"}),
        ('steps', 'int', None, "training steps (the first is warm-up); "
         "default: the size's, else 8", {'minimum': 2}),
        ('memory_check', 'bool', True, 'skip a case whose estimated memory '
         'per device exceeds the devices\''),
        ('num_nodes', 'int', None, "nodes; default: the scale's",
         {'minimum': 1}),
        ('procs_per_node', 'int', None, "ranks per node; default: the "
         "scale's (one per GPU)", {'minimum': 1}),
        ('threads_per_rank', 'int', None, "OpenMP threads per rank "
         "(OMP_NUM_THREADS); default: the node's CPUs shared by its ranks",
         {'minimum': 1}),
        ('python', 'str', 'python3', 'the Python that runs the program on '
         'the compute nodes', {'allowed': 'a command or path'}),
        ('python_path', 'list', [], 'directories put before src/ on the '
         "program's PYTHONPATH"),
        ('container_image', 'path', None, "the image of a *Container check; "
         "default: the partition's extras['container_images']",
         {'allowed': 'the path of an image file'}),
        ('hang_bound_s', 'float', None, 'seconds with no rank advancing '
         'after which a case is ended as hung, or 10 of its steps if '
         'longer; 0: no hang watch; default: HPCML_HANG_BOUND_S',
         {'minimum': 0}),
    ]),
}

#: Test variables the suite sets itself: those logged with every result
#: (the perflog's columns but the user's settings, the placement's
#: parameters and ReFrame's own), and those the check classes set. A
#: workload's own are its declaration's ``derived``. ``-S`` does not set
#: them.
RECORDED = tuple(
    name for name in perflog_fields.names(
        perflog_fields.CASE, perflog_fields.PROVENANCE,
        perflog_fields.RESULT, perflog_fields.RECORD)
    if (name, ALL_CHECKS) not in VARIABLES and
    name not in ('scale', 'launch_mode', 'job_nodelist')) + (
    'program', 'framework', 'runs_in_container', 'device', 'references_file')

_SLURM = 'config/slurm.py'


def _gpu_models():
    '''The GPU model keys (of the peak table).'''
    from hpctestlib_ml.constants import DEVICE_PEAK_FLOPS
    return tuple(DEVICE_PEAK_FLOPS)


def _nearest_models(name):
    from hpctestlib_ml import peaks
    return peaks.nearest_models(name)


def _container_platforms():
    '''The container platforms' names.'''
    from hpctestlib_ml.constants import CONTAINER_PLATFORMS
    return CONTAINER_PLATFORMS


_SITE_DIRS = 'hpctestlib_ml/paths.py (every configuration and tool)'

#: ReFrame's log levels (``HPCML_LOG_LEVEL``).
LOG_LEVELS = ('critical', 'error', 'warning', 'info', 'verbose', 'debug',
              'debug2', 'undefined')

#: The ``HPCML_*`` environment variables, by name.
ENVIRONMENT_VARIABLES = {name: setting for (name, _), setting in {
    **_declare(ENVIRONMENT, _SITE_DIRS, [
        ('HPCML_VAR_DIR', 'path', None, 'where runs write: stage, output, '
         'perflogs, results.db, reports, reframe.log; default: var/ in the '
         'repository',
         {'allowed': 'a directory'}),
        ('HPCML_CACHE_DIR', 'path', None, 'measurements kept between runs '
         '(the CPU peak); default: $HPCML_VAR_DIR/cache',
         {'allowed': 'a directory'}),
        ('HPCML_PREPARED_DIR', 'path', None, 'what hpcml prepare fetched; '
         'default: $HPCML_VAR_DIR/prepared', {'allowed': 'a directory'}),
        ('HPCML_REFERENCES_DIR', 'path', None, 'the per-workload reference '
         'files the checks read; default: config/references',
         {'allowed': 'an existing directory'}),
    ]),
    **_declare(ENVIRONMENT, 'hpctestlib_ml/report/store.py (hpcml report, '
               'hpcml references)', [
        ('HPCML_HISTORY_STORE', 'str', None, 'where the history store '
         '(Parquet copies of the perflogs) lives, or off: read the perflogs '
         'line by line; default: history/ in hpcml report --prefix DIR, '
         'else in $HPCML_VAR_DIR',
         {'allowed': 'a directory or off'}),
    ]),
    **_declare(ENVIRONMENT, 'hpctestlib_ml/siteconfig.py, for every '
               'configuration', [
        ('HPCML_LOG_LEVEL', 'str', 'info', "level of ReFrame's reframe.log",
         {'choices': LOG_LEVELS}),
        ('HPCML_POLL_RATE_MIN', 'float', 4.0, 'job polls per second at '
         'least, on the local scheduler (fewer than 100: faster polling '
         'takes the cores the case measures)',
         {'minimum': 0, 'maximum': 100, 'exclusive': True}),
        ('HPCML_BATCH_POLL_RATE_MIN', 'float', None, 'job polls per second '
         "at least, on a batch scheduler (unset: ReFrame's, which decays to "
         'one poll every 10 s; each poll is an squeue or sacct call to the '
         "site's controller, so raise it where jobs are short)",
         {'minimum': 0, 'maximum': 10, 'exclusive': True}),
        ('HPCML_HTTPJSON_URL', 'url', None, 'post every performance record '
         'as JSON there (Elasticsearch, Logstash)',
         {'allowed': 'an http(s) URL, http://host:9200/index/_doc'}),
        ('HPCML_SITE', 'word', '', "the site's name in every posted record",
         {'allowed': 'a word'}),
        ('HPCML_TSDB_URL', 'url', None, 'send every performance record to '
         "this VictoriaMetrics too (hpctestlib_ml/tsdb/push.py); default: "
         "none", {'allowed': "a VictoriaMetrics base URL, "
                             "http://host:8428"}),
        ('HPCML_HANG_BOUND_S', 'float', 120.0, 'every check\'s hang_bound_s '
         'where -S does not set it: seconds with no rank advancing after '
         'which a case is ended as hung (or 10 of its steps, if longer); '
         '0: no hang watch', {'minimum': 0}),
    ]),
    **_declare(ENVIRONMENT, 'config/local.py, config/slurm.py', [
        ('HPCML_STORAGE_DIR', 'path', None, "where the Storage component "
         "reads and writes (extras['storage_dir']); default: the stage "
         "directory", {'allowed': 'a directory'}),
        ('HPCML_REFERENCE_NOISE_PCT', 'float', None, "how far, in percent, "
         "the partition's figures move from night to night with nothing "
         "changed (extras['reference_noise_pct']); default: config/local.py"
         "'s 30 on its cpu partition, else none (3 %)",
         {'minimum': 0, 'maximum': 100, 'exclusive': True}),
    ]),
    **_declare(ENVIRONMENT, _SLURM, [
        ('HPCML_SLURM_PARTITION', 'word', None, 'the Slurm partition to '
         'submit to (sbatch --partition)', {'allowed': 'a partition name'}),
        ('HPCML_ACCOUNT', 'word', None, 'the account to charge (sbatch '
         '--account); config/systems/*.py read it too',
         {'allowed': 'an account name'}),
        ('HPCML_SCHEDULER', 'str', 'slurm', "ReFrame's scheduler: slurm "
         "(needs sacct) or squeue", {'choices': ('slurm', 'squeue')}),
        ('HPCML_GPUS_PER_NODE', 'int', 0, 'GPUs per node; 0: a CPU '
         'partition', {'minimum': 0}),
        ('HPCML_GPU_MODEL', 'str', None, "GPU model: its peak for MFU, its "
         "memory where it has one size, its vendor (the table of GPU models "
         "below)", {'choices': _gpu_models, 'near': _nearest_models,
                    'allowed': 'a GPU model key'}),
        ('HPCML_DEVICE_MEMORY_GIB', 'float', None, "GiB of one GPU's memory "
         "(extras['device_memory_gib']); default: the GPU model's where it "
         "has one size (a GPU partition needs one or the other)",
         {'minimum': 0, 'exclusive': True}),
        ('HPCML_GPU_RESOURCE', 'template',
         '--gpus-per-node={num_gpus_per_node}', "how jobs ask for GPUs",
         {'allowed': 'an sbatch option with {num_gpus_per_node}',
          'placeholders': ('num_gpus_per_node',)}),
        ('HPCML_CPUS_PER_NODE', 'int', None, "CPUs Slurm gives one node "
         "(at least its GPUs; no node has more than 4096); default: "
         "sinfo's count (a GPU partition needs one)",
         {'minimum': 1, 'maximum': 4096}),
        ('HPCML_MAX_NODES', 'int', 2, 'most nodes one test may use',
         {'minimum': 1}),
        ('HPCML_MAX_TIME_LIMIT', 'duration', None, "the partition's longest "
         "job (Slurm's MaxTime, extras['max_time_limit']): a case asking "
         "more is capped to it; default: none"),
        ('HPCML_EXCLUSIVE', 'bool', None, "jobs take whole nodes "
         "(--exclusive, extras['exclusive']); default: true on a GPU "
         "partition"),
        ('HPCML_RANK_BINDING', 'words', [], "srun options binding each rank "
         "where a task is one rank (extras['rank_binding']), e.g. "
         "'--gpus-per-task=1'", {'allowed': 'srun options (shell words)'}),
        ('HPCML_SBATCH_OPTIONS', 'words', [], "sbatch options every job of "
         "the partition gets (its access), e.g. '--mem=0 --export=NONE'",
         {'allowed': 'sbatch options (shell words)'}),
        ('HPCML_LOADER_WORKERS', 'int', None, "data-loader workers per rank "
         "(extras['loader_workers']); default: the rank's CPUs",
         {'minimum': 0}),
        ('HPCML_SCALES', 'list', None, 'scales to run; default: all that '
         'fit', {'choices': tuple(SCALES)}),
        ('HPCML_RENDEZVOUS_ADDRESS', 'str', '{hostname}', 'how ranks reach '
         "the first node: a template with {hostname}, 'nodeaddr' or an "
         'address', {'allowed': 'a template with {hostname}, nodeaddr or '
                                'an address'}),
        ('HPCML_MODULES', 'list', [], 'modules to load in jobs',
         {'allowed': 'module names'}),
        ('HPCML_ENV', 'assignments', [], 'variables every job exports, '
         "e.g. 'NCCL_SOCKET_IFNAME=ib0 GLOO_SOCKET_IFNAME=ib0'",
         {'allowed': 'shell words NAME=value'}),
        ('HPCML_VENV', 'path', None, 'virtual environment to activate in '
         'jobs; default: the one running ReFrame',
         {'allowed': 'a directory'}),
        ('HPCML_CPU_PEAK_FLOPS', 'float', None, "a node's fp32 peak FLOP/s, "
         "for MFU on CPUs", {'minimum': 0, 'exclusive': True}),
        ('HPCML_CONTAINER_PLATFORM', 'str', None, 'the *Container checks\' '
         'platform; default: Apptainer where HPCML_CONTAINER_DIR or '
         'HPCML_APPTAINER_MODULES is set or apptainer is on PATH, else none',
         {'choices': _container_platforms}),
        ('HPCML_CONTAINER_MODULES', 'list', [], 'modules that provide the '
         'container runtime in jobs; default: HPCML_APPTAINER_MODULES',
         {'allowed': 'module names'}),
        ('HPCML_CONTAINER_DIR', 'path', None, 'Apptainer: directory of the '
         'built images (<framework>.sif), which enables the *Container '
         "checks; default: the suite's image (make image); "
         'config/local.py and config/systems/*.py read it too',
         {'allowed': 'a directory'}),
        ('HPCML_APPTAINER_MODULES', 'list', [], 'modules that provide '
         'apptainer in jobs', {'allowed': 'module names'}),
    ]),
    **_declare(ENVIRONMENT, 'config/local.py, config/slurm.py', [
        ('HPCML_CONTAINER_IMAGE', 'str', None, 'the *Container checks\' '
         'image, for both frameworks (a Podman reference, a SIF or squashfs '
         "path, an enroot URI); default: the suite's (make image)",
         {'allowed': 'an image reference or path'}),
    ]),
    **_declare(ENVIRONMENT, 'config/systems/juwels_booster.py', [
        ('HPCML_TF_MODULES', 'str', 'Stages/2025 GCC OpenMPI TensorFlow',
         "the modules of ResNet50TF's environment",
         {'allowed': 'module names'}),
    ]),
    **_declare(INTERNAL, 'the suite, in every job', [
        ('HPCML_DEVICE_KIND', 'str', None, 'cpu or gpu: what the case '
         'computes on'),
        ('HPCML_RENDEZVOUS_NODE', 'str', None, 'the first node of the job'),
        ('HPCML_NODE_ADDRESSES', 'str', None, "the nodes' Slurm NodeAddr"),
        ('HPCML_PLATFORM', 'str', None, "MLLOG's submission_platform"),
        ('HPCML_FULL_EXIT', 'str', None, 'the exit status of a full file '
         'system'),
        ('HPCML_COLLECTIVE_TIMEOUT_S', 'float', None, 'seconds before a '
         'collective times out'),
        ('HPCML_POWERCAP_ROOT', 'path', None, "where the energy sampler "
         "reads RAPL's counters"),
        ('HPCML_PROVENANCE_PACKAGES', 'list', [], 'the distributions whose '
         "versions the job's provenance logs beside the framework's: the "
         "workload's declared packages"),
        ('HPCML_REAPER', 'int', None, "the PID of the task's src/reaper.py, "
         'which ends every process of the task with it'),
        ('HPCML_REAPER_GRACE', 'float', None, 'seconds from the signal that '
         'ends a task to SIGKILL of what is left (src/reaper.py); default: '
         '2, in a Slurm step 30'),
        ('HPCML_HANG_DIR', 'path', None, "where the hang watch keeps a hung "
         "job's stacks (src/hang_watch.py): the stage directory's "
         "hpcml_hang/"),
        ('HPCML_HANG_BEATS', 'path', None, "the node-local directory of a "
         "task's heartbeats (src/heartbeat.py), made by its reaper"),
    ]),
    **_declare(INTERNAL, 'tests/ and bench/', [
        ('HPCML_TEST_SLURM_DIR', 'path', None, 'the test cluster\'s '
         'directory'),
        ('HPCML_TEST_SLURM_ACCOUNTING', 'bool', True, 'the test cluster '
         'with accounting'),
        ('HPCML_SLURM_PORT_BASE', 'int', None, "the test cluster's ports"),
        ('HPCML_SLURM_CLUSTER', 'str', None, "the test cluster's name"),
        ('HPCML_SLURM_NODES', 'str', None, "the test cluster's nodes"),
        ('HPCML_SLURM_ACCOUNTING', 'bool', None, 'the test cluster has '
         'accounting'),
        ('HPCML_PRETEND_GPU_MODEL', 'str', None, 'tests/configs/'
         "pretend_gpu.py's GPU model"),
        ('HPCML_PRETEND_DEVICE_MEMORY_GIB', 'float', None,
         "tests/configs/pretend_gpu.py's device memory"),
        ('HPCML_UPDATE_GOLDEN', 'bool', None, 'rewrite the golden files'),
        ('HPCML_TEST_CACHE_DIR', 'path', None, "the CPU-peak cache that "
         "pytest processes run side by side share (.ci/run)"),
        ('HPCML_GPUVAL_VENV', 'path', None, "bench/gpu's environment"),
    ]),
}.items()}

#: The keys of a partition's ``extras`` every check reads, by name (a
#: workload's own: its declaration's ``extras``).
EXTRAS_KEYS = {name: setting for (name, _), setting in {
    **_declare(EXTRAS, ALL_CHECKS, [
        ('max_nodes', 'int', None, 'most nodes one test may use; default: '
         '1 on the local scheduler, else no limit', {'minimum': 1}),
        ('scales', 'list', None, 'the scales this partition runs; default: '
         'all that fit', {'choices': tuple(SCALES)}),
        ('rendezvous_address', 'str', '{hostname}', 'how ranks reach the '
         "first node: a template with {hostname}, 'nodeaddr' or an address",
         {'allowed': 'a template with {hostname}, nodeaddr or an address'}),
        ('device_memory_gib', 'float', None, "GiB of one device's memory "
         "(on CPU partitions the node's, shared by its ranks); default: "
         "the GPU model's where it has one size (a GPU partition on a batch "
         "scheduler without either does not load)",
         {'minimum': 0, 'exclusive': True}),
        ('max_time_limit', 'duration', None, "the partition's longest job "
         "(Slurm's MaxTime): a case whose size asks more is capped to it, "
         "its own limit said beside; default: none"),
        ('exclusive', 'bool', None, "jobs take whole nodes (--exclusive: "
         "no other job's traffic in the figures); default: true on a "
         "partition with GPUs and a batch scheduler, else false"),
        ('rank_binding', 'words', [], "launcher options binding each rank "
         "to its CPUs and GPU where a task is one rank (launch mode "
         "per_task), e.g. ['--gpus-per-task=1']; default: none (every rank "
         "sees its node's GPUs and takes its local rank's)",
         {'allowed': 'launcher options'}),
        ('loader_workers', 'int', None, "data-loader worker processes per "
         "rank (MMoCLIP, GPT2FineTune) on GPU partitions, never more than "
         "the rank's CPUs; default: the rank's CPUs (jubench-mmoclip's "
         "--workers is its --cpus-per-task)", {'minimum': 0}),
        ('device_peak_flops', 'float', None, "one GPU's peak FLOP/s for "
         "MFU; default: the GPU model's, for the precision that ran",
         {'minimum': 0, 'exclusive': True}),
        ('cpu_peak_flops', 'float', None, "a node's fp32 peak FLOP/s, for "
         "MFU on CPUs", {'minimum': 0, 'exclusive': True}),
        ('gpu_vendor', 'str', None, "the GPUs' vendor; default: the GPU "
         "model's", {'choices': ('nvidia', 'amd')}),
        ('container_images', 'dict', None, 'framework -> image of the '
         "*Container checks; default: the suite's (make image)",
         {'allowed': 'a mapping of framework to image reference or '
                     'path'}),
        ('container_options', 'list', [], "the site's own options of the "
         "container runtime (e.g. --security-opt label=disable)",
         {'allowed': 'runtime options'}),
        ('container_gpu_options', 'words', None, "the runtime's options "
         "that give the container its GPUs, in place of the platform's "
         "(--nv, --rocm, ...); [] for none", {'allowed': 'runtime options'}),
        ('container_annotations', 'dict', None, "CSCS's Container "
         "Engine: the EDF's [annotations] (hooks, e.g. "
         "com.hooks.aws_ofi_nccl.enabled)",
         {'allowed': 'a mapping of annotation to value'}),
        ('storage_dir', 'path', None, 'where the Storage component reads '
         'and writes; default: the stage directory',
         {'allowed': 'a directory'}),
        ('prepared_dir', 'path', None, 'what hpcml prepare fetched; '
         'default: HPCML_PREPARED_DIR', {'allowed': 'a directory'}),
        ('reference_noise_pct', 'float', None, "how far, in percent, the "
         "partition's figures move from night to night with nothing "
         "changed: hpcml references sets no threshold narrower; default: "
         "none (3 %)", {'minimum': 0, 'maximum': 100, 'exclusive': True}),
    ]),
}.items()}


def rows(more=()):
    '''``(kind, name, type, default, allowed, reader, doc)`` of every
    setting, and of the settings *more* (the workloads' own:
    :func:`hpctestlib_ml.registry.setting_rows` gives them all), for the
    documentation's page of settings.'''
    for table in (VARIABLES.values(), ENVIRONMENT_VARIABLES.values(),
                  EXTRAS_KEYS.values(), more):
        for s in sorted(table, key=lambda s: (s.kind, s.reader, s.name)):
            yield (s.kind, s.name, s.type, s.default, s.allowed_words(),
                   s.reader, s.doc)


def variable(name):
    '''The declaration of test variable *name* that every check has;
    None where there is none (a workload's own:
    :func:`hpctestlib_ml.registry.variable`).'''
    return VARIABLES.get((name, ALL_CHECKS))


# HPCML_* variables

def env_fix(name):
    setting = ENVIRONMENT_VARIABLES[name]
    return (f'fix the environment variable {name} (read by '
            f'{setting.reader})')


def env(name, environ=None):
    '''The value of ``HPCML_*`` variable *name*, converted and checked
    (its declaration's default where unset or empty).'''
    setting = ENVIRONMENT_VARIABLES[name]
    environ = os.environ if environ is None else environ
    raw = environ.get(name)
    if raw is None or not raw.strip():
        return copy.copy(setting.default)
    return convert(setting, raw, env_fix(name))


def unknown_environment(environ=None):
    '''``(name, closest)`` of each ``HPCML_*`` variable set in *environ*
    that the suite does not read, with the declared name it is closest to
    ('' where none is close).'''
    environ = os.environ if environ is None else environ
    known = ENVIRONMENT_VARIABLES
    return [(name, closest(name, known, 'HPCML_'))
            for name in sorted(environ)
            if name.startswith('HPCML_') and name not in known]


# Partition extras

def check_extras(partition, extras, where, keys=None):
    '''*extras* of *partition* (its full name) converted and checked
    against *keys* (name -> :class:`Setting`; default: every check's, the
    workloads' own are :func:`hpctestlib_ml.registry.extras_keys`): an
    unknown key or a value that cannot work is a :class:`SettingError`
    naming *where* (the site configuration) to fix it.'''
    keys = EXTRAS_KEYS if keys is None else keys
    checked = {}
    for key, value in extras.items():
        setting = keys.get(key)
        if setting is None:
            raise SettingError(
                f"extras key {key!r} of partition {partition} is not one "
                f"the suite reads{closest(key, keys)}: fix it in "
                f"{where} (the keys: {', '.join(sorted(keys))})")
        checked[key] = convert(setting, value, f'fix it in {where}',
                               label=f"extras[{key!r}] of partition "
                                     f"{partition}")
        if setting.type == 'list':
            checked[key] = list(checked[key])
    return checked
