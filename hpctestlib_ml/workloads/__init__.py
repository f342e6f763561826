"""The workloads: one module each, the one place a workload is declared.

Each module of this package holds a workload's ReFrame test class
(``<Check>Training``, which the thin leaf ``checks/<name>.py`` runs), what
its program needs to know (its sizes, arguments, FLOPs, log checks) and,
as ``WORKLOAD``, its :class:`Workload` declaration: the names it goes by
in every layer, its log parser, its model builder for ``hpcml
model-info``, what ``hpcml prepare`` fetches for it, and its headline
metric for the report's score. ``hpcml extract``, ``hpcml model-info``,
``hpcml prepare``, the report's score and the references' directions read
the declarations found here (:func:`registered`); a new workload adds a
module here and touches no shared file (docs/developer/adding_a_workload.rst).

The component benchmarks (``collectives``, ``matmul_rate``, ``storage``:
what training leans on, measured alone) are declared here the same way,
with ``kind='component'``: they run as checks of the same plugins, in the
same perflogs, and ``hpcml extract`` reads their logs; they have no model
(no ``model_info``, no optimizer) and the report's overall score leaves
them out.

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
import types


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
class Workload:
    '''A workload, declared once (its module's ``WORKLOAD``).'''

    #: The workload's key: the perflogs' ``workload`` column,
    #: ``config/references/<name>.yaml``, ``hpcml extract NAME``.
    name: str
    #: The check class of ``checks/<name>.py`` (with its ``<check>Container``
    #: twin); its test class here is ``<check>Training`` (a component's:
    #: ``<check>Benchmark``).
    check: str
    #: The training (or benchmark) program, ``python -m <program>`` from
    #: ``src/``.
    program: str
    #: The parser of its logs (a module of :mod:`hpctestlib_ml.parsers`:
    #: ``training_log(text)`` and ``extract_metrics(text)``).
    parser: types.ModuleType
    #: Its headline figure for the report's score.
    headline: Headline
    #: ``(size, device or None) -> ModelInfo`` for ``hpcml model-info``.
    model_info: object = None
    #: The MLPerf benchmark its program names in its log
    #: (``submission_benchmark``), where it logs MLPerf events: how
    #: ``hpcml extract`` tells one MLPerf workload's log from another's.
    benchmark: str = ''
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
    #: what a machine without network must be given (bench/gpu/wheelsets).
    packages: tuple = ()
    #: Why its names differ across layers, where they do.
    names_note: str = ''
    #: ``workload`` (a training program: a model, its optimizer, its data)
    #: or ``component`` (a benchmark of one part of the system that
    #: training leans on: collectives, matrix products, storage). A
    #: component declares no model builder or optimizer; the report keeps
    #: it out of the overall score, whose question is how the system
    #: trains (:func:`hpctestlib_ml.report.analysis.score`).
    kind: str = 'workload'
    #: A component's: the part of the system it measures, as the report
    #: names a training change's likely cause (``network``, ``device
    #: compute``, ``file system``).
    explains: str = ''
    #: The precisions its program trains in, as ``-S precision=`` names
    #: them (the program's ``--precision`` choices): a tuple, or by the
    #: kind of device (``{'cpu': (...), 'gpu': (...)}``) where that
    #: decides; None where it trains in none (a component that takes no
    #: precision). Checked at setup, before a job is written.
    precisions: object = None

    def precisions_on(self, device_kind):
        ''':attr:`precisions` on a device of *device_kind* (``cpu`` or
        ``gpu``); None where any is taken.'''
        if isinstance(self.precisions, dict):
            return tuple(self.precisions[device_kind])
        return tuple(self.precisions) if self.precisions else None

    def test_class(self):
        '''The workload's ReFrame test class: ``<check>Training``, or a
        component's ``<check>Benchmark``.'''
        module = importlib.import_module(f'{__name__}.{self.name}')
        suffix = 'Benchmark' if self.kind == 'component' else 'Training'
        return getattr(module, f'{self.check}{suffix}')


#: The kinds of :attr:`Workload.kind`.
KINDS = ('workload', 'component')


def registered():
    '''Workload name -> :class:`Workload`, of every module of this package
    that declares one, imported once.'''
    if _REGISTERED is None:
        found = {}
        for info in pkgutil.iter_modules(__path__):
            module = importlib.import_module(f'{__name__}.{info.name}')
            declared = getattr(module, 'WORKLOAD', None)
            if declared is not None:
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
