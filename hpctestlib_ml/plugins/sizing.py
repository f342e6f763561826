"""Sizing: the size, batch, precision and steps of a case (the decision:
:func:`hpctestlib_ml.sizes.resolve_size`). The precision the device has:
:mod:`hpctestlib_ml.plugins.device_precision`; whether the case fits the
device's memory: :mod:`hpctestlib_ml.plugins.memory_fit`."""
from reframe.core.builtins import run_before, variable
from reframe.core.pipeline import RegressionTestPlugin

from hpctestlib_ml import sizes

#: The variables every size may set, beside a workload's own.
SIZED = ('batch_size', 'precision', 'steps')


class Sizing(RegressionTestPlugin):
    '''What a case trains: its size and what the size decides.'''

    #: ``tiny``, ``short``, ``benchmark`` or ``auto`` (``benchmark`` on
    #: partitions with the ``gpu`` feature, else ``tiny``). ``short``: the
    #: benchmark's model, per-device batch and options for a fixed number
    #: of steps (:data:`~hpctestlib_ml.sizes.SHORT_SIZE`), the nightly
    #: regression run; on partitions without GPUs only when ``-S steps=``
    #: asks for it.
    #:
    #: :type: :class:`str`
    #: :default: ``'auto'``
    size = variable(str, value='auto')

    #: Local (per-rank) batch size.
    #:
    #: :type: :class:`int` or :obj:`None`
    #: :default: :obj:`None` (the size's)
    batch_size = variable(str, int, type(None), value=None)

    #: Training precision as the program names it.
    #:
    #: :type: :class:`str` or :obj:`None`
    #: :default: :obj:`None` (the size's on GPUs, ``fp32`` on CPUs)
    precision = variable(str, type(None), value=None)

    #: Training steps. At ``benchmark`` size a workload whose benchmark
    #: fixes the work (MMoCLIP's samples, GPT-2's epochs) refuses another
    #: value (``fixed_work``).
    #:
    #: :type: :class:`int` or :obj:`None`
    #: :default: :obj:`None` (the size's, else 8)
    steps = variable(str, int, type(None), value=None)

    #: The size the case runs (never ``auto``), set at setup.
    #:
    #: :type: :class:`str` or :obj:`None`
    #: :default: :obj:`None`
    resolved_size = variable(str, type(None), value=None)

    #: ``cuda`` or ``cpu``, set at setup.
    #:
    #: :type: :class:`str`
    #: :default: ``'cpu'``
    device = variable(str, value='cpu')

    def resolve_size(self):
        '''Size, batch, precision and steps of the case, then the
        workload's own settings (``finalize_settings``) and the precision
        the device has (:mod:`~hpctestlib_ml.plugins.device_precision`); a
        skip where the size is not for this partition.'''
        part = self.current_partition
        table = self.size_table()
        names = {n for size in table.values() for n in size} | set(SIZED)
        asked = {n: getattr(self, n) for n in names if n != 'time_limit'}
        resolved = sizes.resolve_size(
            self.workload, {**asked, 'size': self.size,
                            'time_limit': self.time_limit},
            table, sizes.default_size(part.features), self.uses_gpus,
            self.fixed_work(), part.fullname)
        self.resolved_size = resolved.size
        self.device = 'cuda' if self.uses_gpus else 'cpu'
        for name, value in resolved.values.items():
            setattr(self, name, value)
        if resolved.time_limit is not None:
            self.time_limit = resolved.time_limit
        if resolved.skip:
            self.skip(resolved.skip)
        self.finalize_settings()
        self.use_precision_the_device_has(resolved.sized_precision)

    @run_before('performance')
    def drop_whole_run_metrics(self):
        '''At size ``short`` the figures are the steady-state ones: the
        whole-run metrics (the declaration's ``whole_run_metrics``) are not
        reported.'''
        if self.resolved_size == 'short':
            for name in self.declaration().whole_run_metrics:
                self.perf_variables.pop(name, None)
