"""The registry of workloads: one declaration each, in a module of this
package that imports no ReFrame.

A declaration (:class:`Workload`, its module's ``WORKLOAD``) says what a
workload is: the names it goes by in every layer, its program and the
parser of its logs, its sizes and the precisions it trains in, its FLOPs
(the module's formulas), its headline metric for the report's score, its
model builder for ``hpcml model-info``, what ``hpcml prepare`` fetches for
it, and what its program prints and its check reports. The ReFrame test
class (:mod:`hpctestlib_ml.workloads`) reads its declaration; the tools
(``hpcml extract``, ``report``, ``prepare``, ``model-info``, ``triage``)
read the declarations alone, so that they never load ReFrame. A new
workload adds a module here and touches no shared file (the developer
guide, "Adding a workload").

The component benchmarks (``collectives``, ``matmul_rate``, ``storage``:
what training leans on, measured alone) are declared here the same way,
with ``kind='component'``: they run as checks of the same plugins, in the
same perflogs, and ``hpcml extract`` reads their logs; they have no model
(no ``model_info``, no optimizer, no throughput) and the report's overall
score leaves them out.

Why names differ across layers, where they do: the check is the
benchmark's name as centres know it (MMoCLIP, MegatronGPT, BERTLarge,
DeepLabV3Plus, ResNet50TF), the program is the upstream code's (``src/``:
``clip_train``, ``gpt_pretrain``, ``deepcam`` as MLPerf HPC names it,
...), and the workload name keys the perflogs, references files and
``hpcml`` subcommands (it never changes, so that a site's history keeps
matching). Each declaration names all three; :attr:`Workload.names_note`
says why where they differ.
"""
import dataclasses
import importlib
import pkgutil
import re
import types

from hpctestlib_ml import model_info, settings


@dataclasses.dataclass(frozen=True)
class Headline:
    '''The figure the report scores a workload by.'''

    #: A performance variable of the check (a perflog column).
    metric: str
    #: Whether a larger value is better.
    higher_is_better: bool = True
    #: Weight in the score's weighted geometric mean.
    weight: float = 1.0


@dataclasses.dataclass(frozen=True)
class PrecisionChoice:
    '''What an MLPerf-style workload trains in at benchmark size, beside
    what its upstream reference program trains in (docs/guide/fidelity.md,
    "Precision").'''

    #: What the benchmark size trains in.
    benchmark: str
    #: What the upstream reference program trains in.
    reference: str
    #: Where the benchmark choice comes from (files read, with commits).
    basis: str


@dataclasses.dataclass(frozen=True)
class Workload:
    '''A workload, declared once (its module's ``WORKLOAD``).'''

    #: The workload's key: the perflogs' ``workload`` column,
    #: ``config/references/<name>.yaml``, ``hpcml extract NAME``.
    name: str
    #: The check class of ``checks/<name>.py`` (with its ``<check>Container``
    #: twin); its test class, in :mod:`hpctestlib_ml.workloads`, is
    #: ``<check>Training`` (a component's: ``<check>Benchmark``).
    check: str
    #: The training (or benchmark) program, ``python -m <program>`` from
    #: ``src/``.
    program: str
    #: The parser of its logs (a module of :mod:`hpctestlib_ml.parsers`:
    #: ``training_log(text)`` and ``extract_metrics(text)``).
    parser: types.ModuleType
    #: Its headline figure for the report's score.
    headline: Headline
    #: Size name (``tiny``, ``benchmark``, optionally ``short``) -> the
    #: defaults of the check's variables the user left unset, and
    #: ``time_limit`` (:mod:`hpctestlib_ml.sizes`).
    sizes: dict = dataclasses.field(default_factory=dict)
    #: Framework of the program: its container image is built from
    #: ``containers/<framework>.def``.
    framework: str = 'pytorch'
    #: The performance variable that counts samples/s over all ranks (MFU,
    #: energy per sample); None for a component, which trains nothing.
    throughput_metric: str = None
    #: Metrics of the whole run (MMoCLIP's total time, MLPerf's run time):
    #: not reported at size ``short``, whose figures are the steady-state
    #: ones.
    whole_run_metrics: tuple = ()
    #: The fewest ranks a case means anything at (one rank's collective
    #: moves nothing): scales of fewer ranks are not generated, and a
    #: layout of fewer (``-S num_nodes=``) fails with the reason.
    min_world_size: int = 1
    #: Whether the program computes on its GPUs, so that the largest device
    #: memory a rank held is reported on GPU partitions
    #: (``gpu_mem_peak_MiB``); a component that only moves data (Storage)
    #: holds none.
    reports_gpu_memory: bool = True
    #: Whether the program prints each rank's ``[hpcml] rank_compute``
    #: record (its own compute per step, timed by ``src/rank_compute.py``),
    #: so that ``rank_compute_spread`` and ``slowest_rank`` are reported.
    prints_rank_compute: bool = False
    #: The precisions its program trains in, as ``-S precision=`` names
    #: them (the program's ``--precision`` choices): a tuple, or by the
    #: kind of device (``{'cpu': (...), 'gpu': (...)}``) where that
    #: decides; None where it trains in none (a component that takes no
    #: precision). Checked at setup, before a job is written.
    precisions: object = None
    #: What the benchmark size trains in and what the upstream reference
    #: program does, with the sources, where the workload records them.
    precision_choice: PrecisionChoice = None
    #: Its check's own test variables that a user sets (``-S``), each a
    #: :class:`~hpctestlib_ml.settings.Setting`
    #: (:func:`hpctestlib_ml.settings.variables`): checked at setup.
    variables: tuple = ()
    #: Its check's own variables that it sets itself at setup from the
    #: others (``-S`` does not set them).
    derived: tuple = ()
    #: The partition ``extras`` keys its check reads, each a
    #: :class:`~hpctestlib_ml.settings.Setting`
    #: (:func:`hpctestlib_ml.settings.extras_keys`): checked when a site
    #: configuration loads.
    extras: tuple = ()
    #: ``(size, device or None) -> ModelInfo`` for ``hpcml model-info``.
    model_info: object = None
    #: Size (a key of :attr:`sizes`, or one of :attr:`models`) -> the
    #: parameter counts published for the model its program builds there,
    #: each with its source (a tuple of
    #: :class:`~hpctestlib_ml.model_info.Published`): ``hpcml model-info``
    #: prints them, the fidelity page's table lists them, and
    #: ``tests/test_model_info.py`` holds the model built to them.
    published: dict = dataclasses.field(default_factory=dict)
    #: The program's models that ``hpcml model-info --size`` builds beside
    #: those of its sizes (Megatron's CARAML, Llama 3 and GPT-J sizes),
    #: which :attr:`published` may name as it names a size.
    models: tuple = ()
    #: The MLPerf benchmark its program names in its log
    #: (``submission_benchmark``), where it logs MLPerf events: how
    #: ``hpcml extract`` tells one MLPerf workload's log from another's.
    benchmark: str = ''
    #: ``(usage, ruleset)`` of MLPerf's compliance checker for that
    #: benchmark (``hpcml compliance``), e.g. ``('hpc', '3.0.0')``.
    mlperf_rules: tuple = None
    #: ``(size, layout, batch, precision) -> (ModelInfo, MemoryEstimate)``
    #: where the workload estimates its memory its own way (else the
    #: generic estimate from :attr:`optimizer`).
    memory_info: object = None
    #: The program's optimizer, for the generic memory estimate
    #: (:data:`hpctestlib_ml.memory_estimate.OPTIMIZER_STATES`).
    optimizer: str = None
    #: ``(root) -> [directories written]``: what ``hpcml prepare`` fetches
    #: from a hub; None where the workload needs nothing fetched.
    prepare: object = None
    #: What it trains on where nothing is prepared (``hpcml prepare``
    #: says it).
    data: str = ''
    #: The Python packages (pip requirements) its program imports beyond
    #: the framework (torch, torchvision, TensorFlow) and the suite's own:
    #: what a machine without network must be given (bench/gpu/wheelsets),
    #: and whose versions its runs log beside the framework's
    #: (:attr:`logged_packages`).
    packages: tuple = ()
    #: Why its names differ across layers, where they do.
    names_note: str = ''
    #: ``workload`` (a training program: a model, its optimizer, its data)
    #: or ``component`` (a benchmark of one part of the system that
    #: training leans on: collectives, matrix products, storage). A
    #: component declares no model builder, optimizer or throughput, and
    #: its iterations read no batches (no ``data_share``); the report keeps
    #: it out of the overall score, whose question is how the system
    #: trains (:func:`hpctestlib_ml.report.analysis.score`).
    kind: str = 'workload'
    #: A component's: the part of the system it measures, as the report
    #: names a training change's likely cause (``network``, ``device
    #: compute``, ``file system``).
    explains: str = ''

    @property
    def trains(self):
        '''Whether it trains a model (a workload, not a component): its
        steps read batches, and it has a throughput and FLOPs.'''
        return self.kind == 'workload'

    @property
    def logged_packages(self):
        '''The distributions of :attr:`packages` (a requirement's name,
        without extras or version): what the job's provenance
        (``src/provenance.py``) logs the versions of, beside the
        framework's.'''
        return tuple(dict.fromkeys(
            re.split(r'[\s\[<>=!~;]', requirement.strip(), 1)[0]
            for requirement in self.packages))

    @property
    def reference_precision(self):
        '''What the upstream reference program trains in ('' where the
        declaration records none).'''
        return self.precision_choice.reference if self.precision_choice \
            else ''

    def published_for(self, size, model):
        '''The counts :attr:`published` for the model the program builds
        at *size* (``hpcml model-info --size``) and names *model*: those
        declared under *size*, under *model*, or under a size whose
        ``model`` it is.'''
        keys = dict.fromkeys([size, model, *(
            name for name, values in self.sizes.items()
            if values.get('model') == model)])
        return tuple(count for key in keys
                     for count in self.published.get(key, ()))

    def variable(self, name):
        '''The declaration of its check's test variable *name*, its own
        or every check's; None where neither has one.'''
        own = {s.name: s for s in self.variables}
        return own.get(name) or settings.variable(name)

    def precisions_on(self, device_kind):
        ''':attr:`precisions` on a device of *device_kind* (``cpu`` or
        ``gpu``); None where any is taken.'''
        if isinstance(self.precisions, dict):
            return tuple(self.precisions[device_kind])
        return tuple(self.precisions) if self.precisions else None


#: The kinds of :attr:`Workload.kind`.
KINDS = ('workload', 'component')


class DeclarationError(ValueError):
    '''A declaration that cannot work, said in one line naming the
    workload, what is wrong and the fix.'''


#: A pip requirement: a distribution, its extras, a version specifier.
_REQUIREMENT = re.compile(r'^[A-Za-z0-9][A-Za-z0-9._-]*(\[[\w.,-]+\])?'
                          r'\s*([<>=!~]=?\s*[\w.*+!-]+\s*,?\s*)*$')


def check_declaration(declared):
    '''Refuse, as a :class:`DeclarationError`, a size key that is not a
    test variable of the workload's check (setup would end in an
    ``AttributeError``), a package that is no pip requirement and a
    published count that does not match the declaration
    (:func:`check_published`).'''
    for size, values in declared.sizes.items():
        for key in values:
            if key != 'time_limit' and declared.variable(key) is None:
                raise DeclarationError(
                    f'workload {declared.name}: size {size!r} sets {key!r}, '
                    f'which is no test variable of its check: declare it in '
                    f'the workload\'s variables (settings.variables) or '
                    f'drop it from the size')
    for requirement in declared.packages:
        if not _REQUIREMENT.match(requirement.strip()):
            raise DeclarationError(
                f'workload {declared.name}: package {requirement!r} is no '
                f'pip requirement: write a distribution, its extras and a '
                f'version, e.g. transformers==5.23.0')
    check_published(declared)


def check_published(declared):
    '''Refuse, as a :class:`DeclarationError`, published counts of a
    workload without a model builder, or under a size it does not declare
    (:attr:`Workload.sizes`, :attr:`Workload.models`); a count that is no
    :class:`~hpctestlib_ml.model_info.Published` or names no source; and
    two different counts the program builds at one size.'''
    name = declared.name
    if declared.published and declared.model_info is None:
        raise DeclarationError(
            f'workload {name}: publishes parameter counts but declares no '
            f'model builder (model_info) to hold them to: declare one or '
            f'drop published')
    known = (*declared.sizes, *declared.models)
    for size, counts in declared.published.items():
        if size not in known:
            raise DeclarationError(
                f'workload {name}: a published count names size {size!r}, '
                f'which it does not declare: name one of its sizes or '
                f'models ({", ".join(known)})')
        if not isinstance(counts, tuple) or not all(
                isinstance(c, model_info.Published) for c in counts):
            raise DeclarationError(
                f'workload {name}: published[{size!r}] is no tuple of '
                f'model_info.Published: declare each count as '
                f'Published(params, whose, source)')
        for count in counts:
            if not count.source.strip():
                raise DeclarationError(
                    f'workload {name}: the published count '
                    f'{count.params:,} of size {size!r} names no source: '
                    f'give its URL or a paper\'s citation')
        built = sorted({c.params for c in counts if c.built})
        if len(built) > 1:
            raise DeclarationError(
                f'workload {name}: size {size!r} declares '
                f'{" and ".join(f"{c:,}" for c in built)} as the count the '
                f'program builds, which has one: mark the others '
                f'built=False')


def registered():
    '''Workload name -> :class:`Workload`, of every module of this package
    that declares one (``WORKLOAD``), imported once, each checked
    (``check_declaration``).'''
    if _REGISTERED is None:
        found = {}
        for info in pkgutil.iter_modules(__path__):
            module = importlib.import_module(f'{__name__}.{info.name}')
            declared = getattr(module, 'WORKLOAD', None)
            if declared is not None:
                check_declaration(declared)
                found[declared.name] = declared
        globals()['_REGISTERED'] = dict(sorted(found.items()))
    return _REGISTERED


_REGISTERED = None


class UnknownWorkload(KeyError):
    '''A workload name no module declares; the message lists them.'''

    def __str__(self):
        return self.args[0]


def get(name):
    '''The :class:`Workload` called *name*; :class:`UnknownWorkload`
    naming the known ones otherwise.'''
    workloads = registered()
    if name not in workloads:
        raise UnknownWorkload(f'unknown workload {name!r}: use one of '
                              f'{", ".join(workloads)}')
    return workloads[name]


# The settings of every workload, with those every check has

def variable(name, workload):
    '''The declaration of test variable *name* of a check of *workload*:
    the workload's own, else every check's; None where neither has one.'''
    return get(workload).variable(name)


def all_variables():
    '''(name, reader) -> :class:`~hpctestlib_ml.settings.Setting` of every
    test variable: every check's and each workload's own.'''
    return {**settings.VARIABLES,
            **{(s.name, s.reader): s for declared in registered().values()
               for s in declared.variables}}


def extras_keys():
    '''Name -> :class:`~hpctestlib_ml.settings.Setting` of every partition
    extras key the suite reads: every check's and each workload's.'''
    return {**settings.EXTRAS_KEYS,
            **{s.name: s for declared in registered().values()
               for s in declared.extras}}


def recorded():
    '''The test variables the suite sets itself: every check's
    (:data:`~hpctestlib_ml.settings.RECORDED`) and each workload's
    ``derived``.'''
    return settings.RECORDED + tuple(
        name for declared in registered().values()
        for name in declared.derived)


def setting_rows():
    ''':func:`hpctestlib_ml.settings.rows` of every setting, the
    workloads' own included: the documentation's page of settings.'''
    return settings.rows([s for declared in registered().values()
                          for s in (*declared.variables, *declared.extras)])

