"""Pieces every site configuration shares: run directories, logging, perflog
format, results DB, modes. Site files under ``config/`` describe their
systems and call :func:`make_site_configuration` with them.

A site setting that cannot work (an ``HPCML_*`` variable read with
:func:`env`, a partition's ``extras``, a partition that can run no test
case) raises :class:`SiteConfigError` while the configuration loads: ReFrame
says it in one line and exits 1, before anything is queued.
"""
import math
import os
import pathlib
import shutil
import socket
import subprocess
import sys
import urllib.parse

from reframe.core.exceptions import ConfigError

from hpctestlib_ml import (peaks, perflog_fields, registry, sessions,
                           settings, var_full)
from hpctestlib_ml.constants import (CONTAINER_FEATURE, CONTAINER_PLATFORMS,
                                     DEVICE_MEMORY_GIB, DEVICE_MEMORY_SIZES,
                                     DEVICE_PEAK_FLOPS, FRAMEWORKS,
                                     GPU_MODEL_NOTES, LAUNCH_MODES, SCALES)
from hpctestlib_ml.layout import (LayoutError, PartitionFacts, misfit,
                                  resolve_layout, runs_scale)
from hpctestlib_ml.paths import REPO_ROOT, VAR_DIR, user_path, writable_dir


class SiteConfigError(ConfigError, ValueError):
    '''A site setting that cannot work, raised while a configuration
    loads. ReFrame prints a :class:`~reframe.core.exceptions.ConfigError`
    raised while it imports a configuration file as one line, ``ERROR:
    failed to load configuration: MESSAGE``, and exits 1; any other
    exception reaches the user as a traceback of ReFrame's import.'''


def env(name, environ=None):
    '''``HPCML_*`` variable *name* (of *environ*, default the process's),
    converted and checked against its declaration
    (:mod:`hpctestlib_ml.settings`); its default where unset. A
    :class:`SiteConfigError` naming the variable otherwise.'''
    try:
        return settings.env(name, environ)
    except settings.SettingError as err:
        raise SiteConfigError(str(err)) from None

#: The perflog's columns before the performance values, as ReFrame's log
#: record attributes (:mod:`hpctestlib_ml.perflog_fields` declares them).
#: Performance values come last: ReFrame names their columns in the
#: header from format_perfvars, whose trailing '|' ends each value.
_PERFLOG_FORMAT = '|'.join(
    [column.format for column in perflog_fields.COLUMNS] +
    ['%(check_perfvalues)s'])

_PERFVAR_FORMAT = ('%(check_perf_value)s|%(check_perf_unit)s|'
                   '%(check_perf_ref)s|%(check_perf_lower_thres)s|'
                   '%(check_perf_upper_thres)s|')


#: Slurm pending reasons after which ReFrame cancels a job instead of waiting
#: for it (ReFrame compares the text before the first comma). Regression
#: runs want an answer now, not when a drained node returns: a job that
#: cannot start with the nodes now in service fails with the reason.
#: ReFrame's default has only ``ReqNodeNotAvail`` (a ``--nodelist`` node is
#: unavailable); a job needing more nodes than are up waits with "Nodes
#: required for job are DOWN, DRAINED or reserved for jobs in higher
#: priority partitions".
SLURM_CANCEL_REASONS = (
    'ReqNodeNotAvail',
    'Nodes required for job are DOWN',
    'PartitionNodeLimit',
    'PartitionConfig',
    'BadConstraints',
)


def slurm_sched_options():
    '''``sched_options`` of the suite's Slurm systems.'''
    return {'slurm_job_cancel_reasons': list(SLURM_CANCEL_REASONS)}


def container_settings(platform, images=None, modules=()):
    '''Partition settings that enable the ``*Container`` checks:
    ``container_platforms`` (*platform*, one of
    :data:`hpctestlib_ml.container_launch.PLATFORMS`, with *modules*
    loaded in the job) and, where *images* names them,
    ``extras['container_images']`` ({framework: image}); without, the
    suite's image for the platform (``make image``).'''
    if platform not in CONTAINER_PLATFORMS:
        raise SiteConfigError(f'container platform {platform!r} unknown: '
                              f'use one of {", ".join(CONTAINER_PLATFORMS)}')
    found = {'container_platforms': [{'type': platform,
                                      'modules': list(modules)}],
             'extras': {}}
    if images:
        found['extras']['container_images'] = dict(images)
    return found


def with_container_platform(partition, platform, images=None, modules=()):
    '''*partition* with :func:`container_settings` merged in.'''
    found = container_settings(platform, images, modules)
    return {**partition,
            'environs': [*partition.get('environs', []), 'container'],
            'container_platforms': found['container_platforms'],
            'extras': {**partition.get('extras', {}), **found['extras']}}


def apptainer_images(image_dir):
    '''``<image_dir>/<framework>.sif`` of each framework (a site's
    directory of images); None without a directory.'''
    if not image_dir:
        return None
    return {fw: os.path.join(image_dir, f'{fw}.sif') for fw in FRAMEWORKS}


def with_apptainer(partition, image_dir=None, modules=()):
    '''*partition* with the Apptainer platform: images from *image_dir*
    (:func:`apptainer_images`), else the suite's.'''
    return with_container_platform(partition, 'Apptainer',
                                   apptainer_images(image_dir), modules)


def one_image(reference):
    '''{framework: *reference*} (``HPCML_CONTAINER_IMAGE``: one image
    for both frameworks, as the suite's own is); None without one.'''
    return {fw: reference for fw in FRAMEWORKS} if reference else None


def site_images(where, kind, suffix=None):
    '''{framework: image} of a site whose partitions run the suite in
    containers only (a centre that runs PyTorch so): ``HPCML_CONTAINER_IMAGE``
    for both frameworks, else ``HPCML_CONTAINER_DIR``'s
    ``<framework><suffix>``; a :class:`SiteConfigError` naming both
    where neither is set (*kind*: what the image must be, for the
    line).'''
    images = one_image(env('HPCML_CONTAINER_IMAGE'))
    directory = env('HPCML_CONTAINER_DIR')
    if not images and directory and suffix:
        images = {fw: os.path.join(directory, f'{fw}{suffix}')
                  for fw in FRAMEWORKS}
    if not images:
        raise SiteConfigError(
            f'{where} runs the suite in containers only: set '
            f'HPCML_CONTAINER_IMAGE to {kind} with the suite\'s packages '
            f'(docs/guide/cluster.md, real sites)' +
            (f', or HPCML_CONTAINER_DIR to the directory of '
             f'<framework>{suffix}' if suffix else ''))
    return images


def podman_image_exists(reference, run=subprocess.run):
    '''Whether Podman's storage holds *reference*.'''
    try:
        return run(['podman', 'image', 'exists', reference],
                   stdin=subprocess.DEVNULL, stdout=subprocess.DEVNULL,
                   stderr=subprocess.DEVNULL, timeout=60).returncode == 0
    except (OSError, subprocess.SubprocessError):
        return False


def local_container_platform(which=shutil.which, exists=podman_image_exists,
                             environ=None):
    '''(platform, images) of this machine's ``*Container`` checks (*environ*:
    the ``HPCML_*`` variables, default the process's): Podman
    where it is on PATH and its storage holds the image
    (``HPCML_CONTAINER_IMAGE``, else the suite's: ``make image``), so that
    ``make suite`` runs the container cases once the image is built and
    none before; else Apptainer where it is on PATH (images:
    ``HPCML_CONTAINER_DIR``, else the suite's); else (None, None).'''
    from hpctestlib_ml import image
    named = env('HPCML_CONTAINER_IMAGE', environ)
    if which('podman') and exists(named or image.podman_image()):
        return 'Podman', one_image(named)
    if which('apptainer'):
        return 'Apptainer', (one_image(named) or
                             apptainer_images(env('HPCML_CONTAINER_DIR',
                                                  environ)))
    return None, None


def container_environment(system, modules=()):
    '''The programming environment of container runs on *system*: nothing
    from the host but the runtime (the image brings the framework), with
    *modules*, which provide it, loaded by the job's own ``module load``:
    a system whose ``modules_system`` is ``nomod``, as the suite's are
    (module loads are the environments' ``prepare_cmds``, so that job
    scripts can be written where Lmod is not), drops a platform's
    ``modules`` with a warning.'''
    found = {'name': 'container', 'features': [CONTAINER_FEATURE],
             'target_systems': [system]}
    if modules:
        found['prepare_cmds'] = [f'module load {" ".join(modules)}']
    return found


def system_dirs():
    """``prefix`` of a system: VAR_DIR. Stage and output directories are
    ReFrame's defaults under it (``<prefix>/stage``, ``<prefix>/output``),
    so ``--prefix``, ``--stage`` and ``--output`` move them as ReFrame
    users expect; a session that finds another one running on VAR_DIR gets
    its own (:func:`~hpctestlib_ml.sessions.claim_var_dir`)."""
    return {'prefix': VAR_DIR, **sessions.session_dirs(VAR_DIR)}


def results_dir(in_session=None, argv=None, environ=None):
    '''Where a session's results go, together: its perflogs (under
    ReFrame's prefix), ``results.db``, the run reports and
    ``reframe.log``. That is ReFrame's ``--prefix`` (or ``RFM_PREFIX``)
    where the session is given one, else VAR_DIR; ``hpcml report --prefix
    DIR`` reads them there.'''
    in_session = (sessions.in_reframe_session() if in_session is None
                  else in_session)
    return (sessions.prefix_dir(VAR_DIR, argv, environ) if in_session
            else VAR_DIR)


def log_level():
    '''Level of ReFrame's own log file (``reframe.log``): ``info`` unless
    ``HPCML_LOG_LEVEL`` says otherwise (``debug`` to follow ReFrame's every
    step). Not ``debug`` by default because ReFrame 4.10 builds every debug
    record with a walk of the Python stack (``inspect.stack()``, once per
    deprecated check attribute), and it logs a few per job poll: at 4 polls
    per second that was 2.4 % of a core taken from the job it measures, and
    0.3 % at ``info`` (bench/README.md).'''
    return env('HPCML_LOG_LEVEL')


def logging_config(results=VAR_DIR):
    '''ReFrame's logging: ``reframe.log`` in *results*
    (:func:`results_dir`), and the perflogs under ReFrame's prefix.'''
    level = log_level()
    return [{
        'level': level,
        'handlers': [
            {'type': 'stream', 'name': 'stdout', 'level': 'info',
             'format': '%(message)s'},
            {'type': 'file', 'name': os.path.join(results, 'reframe.log'),
             'level': level, 'append': True,
             'format': '[%(asctime)s] %(levelname)s: %(check_info)s: '
                       '%(message)s'},
        ],
        # The perflog first: a handler that raises (ReFrame's httpjson on a
        # failed post) stops the handlers after it from getting the record.
        'handlers_perflog': [{
            'type': 'filelog',
            # Relative to the system's prefix (VAR_DIR, or --prefix):
            # paths.PERFLOG_DIR by default; --perflogdir moves it.
            'basedir': 'perflogs',
            # Sessions that overlap on one VAR_DIR append whole lines
            # under ReFrame's file lock (and write one header).
            'locking_enable': True,
            'prefix': '%(check_system)s/%(check_partition)s',
            'level': 'info',
            'format': _PERFLOG_FORMAT,
            'format_perfvars': _PERFVAR_FORMAT,
            'datefmt': '%Y-%m-%dT%H:%M:%S%z',
            'append': True,
        }, *httpjson_handlers(), *tsdb_handlers()],
    }]


def httpjson_handlers():
    '''ReFrame's ``httpjson`` perflog handler, which posts each performance
    record as JSON (to Elasticsearch, or a Grafana/Logstash endpoint), when
    ``HPCML_HTTPJSON_URL`` is set; none otherwise. ``extras`` tag every
    record (``facility: hpcml``); ``ignore_keys`` drop the bulky ones.'''
    url = env('HPCML_HTTPJSON_URL')
    if not url:
        return []
    say_if_down('HPCML_HTTPJSON_URL', url, 'posted nowhere')
    return [{
        'type': 'httpjson',
        'url': url,
        'level': 'info',
        'extras': {'facility': 'hpcml',
                   'site': env('HPCML_SITE')},
        'ignore_keys': ['check_perfvalues', 'check_executable_opts',
                        'check_prerun_cmds', 'check_sizes'],
    }]


def tsdb_handlers():
    '''The handler that sends every performance record to a time-series
    database (VictoriaMetrics) when ``HPCML_TSDB_URL`` is set
    (:mod:`hpctestlib_ml.tsdb.push`); none otherwise.'''
    from hpctestlib_ml.tsdb import push
    try:
        found = push.handler()
    except settings.SettingError as err:
        raise SiteConfigError(str(err)) from None
    if found:
        say_if_down('HPCML_TSDB_URL', push.url(), 'sent to no database')
    return [found] if found else []


def say_if_down(name, url, lost):
    '''One line on stderr, naming setting *name*, where the server at *url*
    does not accept a connection: ReFrame then leaves its handler out of
    the session with a warning that names neither the setting nor what
    becomes of the records (they are in the perflogs only). The same
    test as ReFrame's (a TCP connection, 1 s), once per process.'''
    parsed = urllib.parse.urlparse(url)
    port = parsed.port or (443 if parsed.scheme == 'https' else 80)
    try:
        with socket.create_connection((parsed.hostname, port), timeout=1):
            return
    except OSError as err:
        why = err.strerror or str(err) or type(err).__name__
    if name in _warned:
        return
    _warned.add(name)
    print(f'hpcml: {name} {url} does not answer ({why}): this session\'s '
          f'performance records are {lost}, only in its perflogs: start the '
          f'server, or fix or unset {name}', file=sys.stderr)


def modes():
    return [
        {'name': 'smoke', 'options': ['-S', 'size=tiny']},
        # The benchmarks' models for a few minutes: nightly regression.
        {'name': 'short', 'options': ['-S', 'size=short']},
        {'name': 'benchmark', 'options': ['-S', 'size=benchmark']},
    ]


def _polling(rate):
    '''ReFrame's ``general`` settings that poll jobs at least *rate* times
    a second (none where *rate* is None: ReFrame's default).'''
    return {} if rate is None else {'poll_rate_min': rate,
                                    'poll_rate_max': max(10.0, rate)}


def local_general():
    '''``general`` settings of configs whose jobs are local processes:
    ReFrame's job polling at least ``HPCML_POLL_RATE_MIN`` times a second
    (4 by default; ReFrame's default decays to 0.1 Hz, which adds up to 10
    s to every case that runs longer than a few seconds: most of the
    smoke suite's fixed cost per case, bench/harness_bench.py). Polling a
    local process is a waitpid; a batch scheduler's polls are calls to
    its controller (:func:`batch_general`).'''
    return _polling(env('HPCML_POLL_RATE_MIN'))


def batch_general():
    '''``general`` settings of configs whose jobs go to a batch scheduler:
    ReFrame's job polling, which decays to one poll every 10 s (a job
    that ends is seen up to 10 s late), at least
    ``HPCML_BATCH_POLL_RATE_MIN`` times a second where it is set.'''
    return _polling(env('HPCML_BATCH_POLL_RATE_MIN'))


def make_site_configuration(systems, environments, general=None):
    '''A complete ReFrame configuration around *systems* and
    *environments*; *general* adds to the shared ``general`` settings.
    A full file system under VAR_DIR is said in one line
    (:mod:`hpctestlib_ml.var_full`). The ``HPCML_*`` variables set and
    every partition are checked first (:func:`check_site`).'''
    check_site(systems, _caller_file())
    results = results_dir()
    writable_dir(VAR_DIR)
    writable_dir(results)
    var_full.install(VAR_DIR)
    return {
        'systems': systems,
        'environments': environments,
        'logging': logging_config(results),
        'modes': modes(),
        'general': [{
            'report_file': os.path.join(results, 'reports',
                                        'run-report-{sessionid}.json'),
            'topology_prefix': os.path.join(VAR_DIR, 'topology'),
            'check_search_recursive': True,
            # --performance-report: each figure next to the same test's
            # last one of the past week in the results DB.
            'perf_report_spec': 'now-7d:now/last:/+result',
            **(general or {}),
        }],
        'storage': [{
            'enable': True,
            'sqlite_db_file': os.path.join(results, 'results.db'),
        }],
    }


def _caller_file():
    '''The site configuration that called :func:`make_site_configuration`
    (relative to the repository where it lies in it).'''
    path = os.path.abspath(sys._getframe(2).f_code.co_filename)
    root = str(REPO_ROOT) + os.sep
    return path[len(root):] if path.startswith(root) else path


#: The unknown ``HPCML_*`` variables already warned of (ReFrame may load
#: a configuration more than once).
_warned = set()


def check_site(systems, where):
    '''Refuse, as a :class:`SiteConfigError`, an ``HPCML_*`` variable set
    that is a typo of one the suite reads or whose value cannot work
    (``HPCML_HANG_BOUND_S``, which the checks read), and any partition of
    *systems* (the configuration *where*) with an unknown or bad
    ``extras`` key or that can run no test case; the partitions' extras
    are replaced by their checked values. An ``HPCML_*`` variable near no
    known name is said in one line, and ignored.'''
    for name, near in settings.unknown_environment():
        if near:
            raise SiteConfigError(f'{name} is set, but the suite reads no '
                                  f'such variable{near}: fix the '
                                  f'environment variable')
        if name not in _warned:
            _warned.add(name)
            print(f'hpcml: {name} is set, but the suite reads no such '
                  f'variable: it is ignored', file=sys.stderr)
    # Read by every check at setup: a bad value stops the session here,
    # not each case.
    env('HPCML_HANG_BOUND_S')
    check_directories()
    extras_keys = registry.extras_keys()
    for system in systems:
        for part in system.get('partitions', []):
            fullname = f'{system["name"]}:{part["name"]}'
            try:
                part['extras'] = settings.check_extras(
                    fullname, part.get('extras', {}), where, extras_keys)
            except settings.SettingError as err:
                raise SiteConfigError(str(err)) from None
            why = (contradiction(fullname, part, where) or
                   unknown_gpu(fullname, part, where))
            if why:
                raise SiteConfigError(why)
            why = why_no_case_runs(facts_of(fullname, part))
            if why:
                raise SiteConfigError(f'partition {fullname} can run no test '
                                      f'case: {why}: fix it in {where}')


def check_directories(environ=None):
    '''Refuse, as a :class:`SiteConfigError`, an ``HPCML_*`` variable
    declared to name a directory that names something else (a file:
    ``HPCML_CACHE_DIR`` would be measured again at every start, never
    kept), and an ``HPCML_REFERENCES_DIR`` that is no directory or holds
    no reference file: every check would run without references, and
    the nightly gate would pass every figure.'''
    environ = os.environ if environ is None else environ
    for name, setting in settings.ENVIRONMENT_VARIABLES.items():
        value = environ.get(name, '')
        if (setting.kind != settings.ENVIRONMENT or setting.type != 'path'
                or 'directory' not in setting.allowed or not value.strip()):
            continue
        path = user_path(value)
        if os.path.exists(path) and not os.path.isdir(path):
            raise SiteConfigError(f'{name} {path}: not a directory: '
                                  f'{settings.env_fix(name)}')
    if not environ.get('HPCML_REFERENCES_DIR', '').strip():
        return
    refs = pathlib.Path(user_path(environ['HPCML_REFERENCES_DIR']))
    if not refs.is_dir():
        raise SiteConfigError(
            f'HPCML_REFERENCES_DIR {refs}: No such directory (the '
            f'reference files the checks read): '
            f'{settings.env_fix("HPCML_REFERENCES_DIR")}')
    if not any(refs.glob('*.yaml')):
        raise SiteConfigError(
            f'HPCML_REFERENCES_DIR {refs} holds no reference file '
            f'(<workload>.yaml), so every check would run without '
            f'references and pass: point it at the directory hpcml '
            f'references --write filled, or copy config/references there')


def job_venv(where):
    '''``HPCML_VENV`` (None where unset), refused where it holds no
    ``bin/activate``: the jobs would source a missing file and fail on
    their first import, where triage can only name the module.'''
    venv = env('HPCML_VENV')
    if venv and not os.path.isfile(os.path.join(user_path(venv), 'bin',
                                                'activate')):
        raise SiteConfigError(
            f'HPCML_VENV {venv} has no bin/activate: give the virtual '
            f'environment the nodes activate (make setup makes .venv), '
            f'or unset it for the one running ReFrame ({where})')
    return venv


def gpu_devices(gpus, model, where):
    '''The ``devices`` of a partition of *gpus* GPUs of *model* a node
    (``[]`` for a CPU partition); a :class:`SiteConfigError` for a model
    without a count, which would make a CPU partition of a GPU cluster.'''
    if model and not gpus:
        raise SiteConfigError(
            f'HPCML_GPU_MODEL={model} is set but HPCML_GPUS_PER_NODE is not, '
            f'which makes a CPU partition: set HPCML_GPUS_PER_NODE to the '
            f'GPUs of a node, or unset HPCML_GPU_MODEL ({where})')
    if not gpus:
        return []
    return [{'type': 'gpu', 'num_devices': gpus,
             **({'model': model} if model else {})}]


def contradiction(fullname, part, where):
    '''What, in a partition as a site configuration writes it, the facts
    say against each other (None where nothing), on a batch scheduler's
    partition (a local one's are the machine's, as found): fewer CPUs
    than GPUs (a rank per GPU needs a CPU at least), GPUs without a
    resource to ask for them or with one that does not ask for a case's
    count.'''
    facts = facts_of(fullname, part)
    if part.get('scheduler') in (None, 'local'):
        # The machine's own counts, as found: no setting to contradict.
        return None
    if facts.gpus_per_node and facts.cpus_per_node is not None and \
            facts.cpus_per_node < facts.gpus_per_node:
        return (f'partition {fullname} has {facts.gpus_per_node} GPUs a node '
                f'but {facts.cpus_per_node} CPUs (processor.num_cpus): a rank '
                f'per GPU needs a CPU at least: give the CPUs Slurm gives one '
                f'node in {where}')
    if not facts.gpus_per_node:
        return None
    options = [option for r in part.get('resources', [])
               if r.get('name') == 'gpu' for option in r.get('options', [])]
    example = ("{'name': 'gpu', 'options': "
               "['--gpus-per-node={num_gpus_per_node}']}")
    if not options:
        return (f"partition {fullname} has GPUs but no resource 'gpu' to ask "
                f"for them, so its jobs would get none: add one, e.g. "
                f"{example}, in {where}")
    try:
        fields = set(settings.template_fields(' '.join(options)))
    except ValueError as err:
        fields = {f'({err})'}
    if fields != {'num_gpus_per_node'}:
        return (f"partition {fullname} asks for GPUs with {' '.join(options)}"
                f", which ReFrame fills with {{num_gpus_per_node}} alone (a "
                f"case's GPUs a node): write it so, as in {example}, in "
                f"{where} (HPCML_GPU_RESOURCE for config/slurm.py)")
    return None


def gpu_models(part):
    '''The models the ``devices`` of type ``gpu`` of *part* name (None
    where one names none).'''
    return [d.get('model') for d in part.get('devices', [])
            if d.get('type') == 'gpu']


def unknown_gpu(fullname, part, where):
    '''What the suite cannot know of a partition's GPUs, as the line that
    refuses it (None where it knows enough): a model that is no key of the
    peak table (:data:`~hpctestlib_ml.constants.DEVICE_PEAK_FLOPS`; a
    site may name another where ``extras['device_peak_flops']`` and
    ``['device_memory_gib']`` say its figures), and, on a batch
    scheduler's partition, GPUs of unknown memory: without it the
    memory-fit check cannot skip a case that does not fit, which would
    wait in the queue to die out of memory. The memory is known from
    ``extras['device_memory_gib']``, else from a model of one size
    (:data:`~hpctestlib_ml.constants.DEVICE_MEMORY_GIB`); a model of two
    (:data:`~hpctestlib_ml.constants.DEVICE_MEMORY_SIZES`) does not
    say which. A local partition's memory is the machine's, as found
    (``nvidia-smi``), else said by each case.'''
    models = gpu_models(part)
    if not models:
        return None
    extras = part.get('extras', {})
    fix = (f"(HPCML_DEVICE_MEMORY_GIB for config/slurm.py) in {where}")
    for model in models:
        if model is None or model in DEVICE_PEAK_FLOPS or (
                extras.get('device_peak_flops') and
                extras.get('device_memory_gib')):
            continue
        near = peaks.nearest_models(model)
        note = (f': {near[0]} is {GPU_MODEL_NOTES[near[0]]}'
                if len(near) == 1 and near[0] in GPU_MODEL_NOTES else '')
        return (f"partition {fullname} has GPUs of model {model!r}, which is "
                f"no GPU model key{settings.did_you_mean(near)}{note}: name "
                f"one of {', '.join(DEVICE_PEAK_FLOPS)}, or give "
                f"extras['device_peak_flops'] and extras['device_memory_gib'] "
                f"for another, in {where} (HPCML_GPU_MODEL for "
                f"config/slurm.py)")
    if part.get('scheduler') in (None, 'local') or \
            extras.get('device_memory_gib'):
        return None
    model = models[0]
    if model in DEVICE_MEMORY_GIB:
        return None
    if model in DEVICE_MEMORY_SIZES:
        sizes = ' or '.join(map(str, DEVICE_MEMORY_SIZES[model]))
        sizes = f' ({model} comes with {sizes} GB)'
    else:
        sizes = ' (no GPU model named)' if model is None else ''

    return (f"partition {fullname}: the memory of its GPUs is unknown"
            f"{sizes}, so the memory check could not skip a case that "
            f"cannot fit, which would wait in the queue to die out of "
            f"memory: set extras['device_memory_gib'] to one GPU's GiB "
            f"{fix}")


def facts_of(fullname, part):
    '''The :class:`~hpctestlib_ml.layout.PartitionFacts` of a partition as
    a site configuration writes it (as
    :func:`hpctestlib_ml.plugins.placement.partition_facts` reads it from
    ReFrame).'''
    extras = part.get('extras', {})
    local = part.get('scheduler') == 'local'
    scales = extras.get('scales')
    return PartitionFacts(
        name=fullname,
        max_nodes=extras.get('max_nodes', 1 if local else math.inf),
        gpus_per_node=sum(d.get('num_devices', 1)
                          for d in part.get('devices', [])
                          if d.get('type') == 'gpu'),
        cpus_per_node=part.get('processor', {}).get('num_cpus'),
        launcher=part.get('launcher', 'srun'),
        scales=tuple(scales) if scales is not None else None)


def why_no_case_runs(facts):
    '''Why a partition of *facts* runs none of its scales in any launch
    mode (each scale's reason), or None where one runs.'''
    names = facts.scales if facts.scales is not None else tuple(SCALES)
    if any(runs_scale(name, facts, mode) for name in names
           for mode in LAUNCH_MODES):
        return None
    reasons = []
    for name in names:
        try:
            layout = resolve_layout(name, facts)
        except LayoutError as err:
            reasons.append(f'{name}: {err}')
            continue
        # A misfit's advice after ': ' is for -S; the site fixes its facts.
        why = {misfit(layout, facts, mode).split(': ')[0]
               for mode in LAUNCH_MODES if misfit(layout, facts, mode)}
        reasons.append(f'{name}: ' + '; '.join(sorted(why)))
    source = ("its extras['scales'] " if facts.scales is not None else
              'every scale ')
    return source + '(' + ', '.join(names) + ') misfit: ' + ' | '.join(
        reasons)


#: How Slurm is asked for a partition's CPUs per node: sinfo's ``%c``
#: (CPUs per node; with nodes that differ, the least followed by ``+``,
#: sinfo(1) ``--exact``), per partition (``%P``: the default one ends in
#: ``*``). Slurm's CPUs are what ``--cpus-per-task`` counts.
SINFO_CPUS = ['sinfo', '--noheader', '--format=%P %c']


def sinfo_cpus(text, partition=None):
    '''CPUs per node of *partition* (None: the default partition) in
    :data:`SINFO_CPUS`'s output *text*: the least over its lines, so that
    ``--cpus-per-task`` fits on every node; None if *text* does not list
    it.'''
    counts = []
    for line in text.splitlines():
        fields = line.split()
        if len(fields) != 2:
            continue
        name, cpus = fields
        default = name.endswith('*')
        if (name.rstrip('*') == partition if partition else default) and \
                cpus.rstrip('+').isdigit():
            counts.append(int(cpus.rstrip('+')))
    return min(counts) if counts else None


def slurm_cpus_per_node(partition=None, run=subprocess.run):
    '''``(cpus, None)`` from Slurm for *partition*, or ``(None, why)``
    where sinfo cannot say.'''
    try:
        proc = run(SINFO_CPUS, capture_output=True, text=True, timeout=30,
                   stdin=subprocess.DEVNULL)
    except FileNotFoundError:
        return None, 'sinfo is not on PATH'
    except subprocess.TimeoutExpired:
        return None, 'sinfo did not answer in 30 s'
    if proc.returncode != 0:
        lines = proc.stderr.strip().splitlines() or [
            f'exit status {proc.returncode}']
        return None, f'sinfo failed: {lines[-1]}'
    cpus = sinfo_cpus(proc.stdout, partition)
    if cpus is None:
        return None, (f'sinfo lists no partition '
                      f'{partition or "marked default (*)"}')
    return cpus, None


def cpus_per_node(configured, gpus, partition=None, query=slurm_cpus_per_node):
    '''CPUs per node of a generic Slurm partition: *configured*
    (``HPCML_CPUS_PER_NODE``) if set, else Slurm's own count; None on a CPU
    partition where neither says. A GPU partition needs it: without
    ``--cpus-per-task`` srun gives each task one CPU, and a node's ranks
    and their loader workers share it, so the config refuses to load.'''
    if configured:
        return configured
    cpus, why = query(partition)
    if cpus is None and gpus:
        raise SiteConfigError(
            f'CPUs per node of the GPU partition '
            f'{partition or "(default)"} unknown ({why}): set '
            f'HPCML_CPUS_PER_NODE to the CPUs Slurm gives one node, or its '
            f'ranks share one CPU')
    return cpus
