"""Sizing: the size, batch, precision and steps of a case (the decision:
:func:`hpctestlib_ml.sizes.resolve_size`), the precision the device has,
and whether the case fits the device's memory."""
from reframe.core.builtins import run_before, variable
from reframe.core.logging import getlogger
from reframe.core.pipeline import RegressionTestPlugin

from hpctestlib_ml import memory_estimate, peaks, sizes
from hpctestlib_ml.constants import DEVICE_MEMORY_GIB

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

    #: Skip, at setup, a case whose estimated memory per device
    #: (``memory_estimate``) exceeds what the partition's devices have
    #: (:meth:`device_memory_gib`); ``-S memory_check=false`` queues it
    #: anyway (to see the out-of-memory error, or where the estimate is
    #: wrong).
    #:
    #: :type: :class:`bool`
    #: :default: :obj:`True`
    memory_check = variable(str, bool, value=True)

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

    #: The memory per device the suite estimated at setup (as ``hpcml
    #: model-info --memory``), e.g. ``27.0 GiB``; '' where the workload
    #: has no estimate. Logged with every result, beside what a GPU run
    #: measures (``gpu_mem_peak_MiB``).
    #:
    #: :type: :class:`str`
    #: :default: ``''``
    memory_estimated = variable(str, value='')

    def resolve_size(self):
        '''Size, batch, precision and steps of the case, then the
        workload's own settings (``finalize_settings``) and the precision
        the device has; a skip where the size is not for this partition.'''
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

    def use_precision_the_device_has(self, sized_precision):
        '''bf16 on GPUs without bf16 hardware (V100) is emulated, many
        times slower (``torch.cuda.is_bf16_supported()`` still says yes):
        a size's bf16 default (*sized_precision*) becomes its fp16 one,
        with loss scaling in every program; a bf16 case asked for (``-S
        precision=``, a workload's parameter) is skipped with the
        reason.'''
        fp16 = peaks.fp16_for(self.precision)
        model = self.partition_gpu_model()
        if fp16 is None or peaks.has_bf16(model):
            return
        if self.precision == sized_precision:
            getlogger().info(f'{self.display_name}: {model} has no bf16: '
                             f'running {fp16} instead of {self.precision}')
            self.precision = fp16
        else:
            self.skip(f'{model} has no bf16 hardware: precision '
                      f'{self.precision} would run emulated; use '
                      f'-S precision={fp16}')

    @run_before('performance')
    def drop_whole_run_metrics(self):
        '''At size ``short`` the figures are the steady-state ones: the
        whole-run metrics (the declaration's ``whole_run_metrics``) are not
        reported.'''
        if self.resolved_size == 'short':
            for name in self.declaration().whole_run_metrics:
                self.perf_variables.pop(name, None)

    # Memory

    def device_memory_gib(self):
        '''(GiB of memory one rank's device has, where the figure comes
        from), or (None, why not).

        ``extras['device_memory_gib']`` of the partition (ReFrame's
        ``devices`` have no memory field), else on GPU partitions the
        model's size where it has one (:data:`~hpctestlib_ml.constants.
        DEVICE_MEMORY_GIB`). On CPU partitions the CPU is the device: the
        extras' figure is the node's memory, shared by its ranks
        (``config/local.py`` sets it from MemTotal).'''
        part = self.current_partition
        extras = part.extras.get('device_memory_gib')
        if not self.uses_gpus:
            if not extras:
                return None, (f"{part.fullname} says no "
                              f"extras['device_memory_gib'] (its nodes' "
                              f"memory)")
            ranks = self.layout.procs_per_node
            return float(extras) / ranks, (
                f"the node's {float(extras):.1f} GiB (extras"
                f"['device_memory_gib']) shared by {ranks} rank(s)")
        if extras:
            return float(extras), "extras['device_memory_gib']"
        model = self.partition_gpu_model()
        if model in DEVICE_MEMORY_GIB:
            return float(DEVICE_MEMORY_GIB[model]), f'{model} data sheet'
        return None, (f"{part.fullname}'s GPU model {model!r} has no known "
                      f"memory size: set extras['device_memory_gib']")

    def memory_fit_hints(self, estimate, device_gib):
        '''How to make *estimate* fit a device of *device_gib* GiB: the
        largest per-device batch that would fit, where one would.'''
        if estimate.static > memory_estimate.tensor_room(estimate,
                                                         device_gib):
            return [f'weights, gradients and optimizer state alone need '
                    f'{estimate.static / memory_estimate.GIB:.1f} GiB: '
                    f'devices with more memory, or more of them sharing '
                    f'the model']
        batch = memory_estimate.largest_batch(estimate, self.batch_size,
                                              device_gib)
        if batch:
            return [f'-S batch_size={batch} would fit']
        if batch == 0:
            return ['not even a batch of one fits']
        return []

    def skip_if_it_cannot_fit(self):
        '''Skip, at setup, a case that needs more memory per device than
        the partition's devices have (a reserve of
        :data:`~hpctestlib_ml.memory_estimate.RESERVE_FRACTION`, at least
        :data:`~hpctestlib_ml.memory_estimate.RESERVE_MIN_GIB`, kept free
        for the CUDA context and the allocator), with the numbers and
        what would fit. A case whose memory is unknown is not skipped (the
        log says so). The estimate is logged either way
        (:attr:`memory_estimated`).'''
        estimate = self.memory_estimate()
        if estimate is None:
            return
        self.memory_estimated = (f'{estimate.total / memory_estimate.GIB:.1f}'
                                 f' GiB')
        if not self.memory_check:
            return
        device_gib, source = self.device_memory_gib()
        if device_gib is None:
            getlogger().info(f'{self.display_name}: no memory check: '
                             f'{source}; {estimate.describe()}')
            return
        if memory_estimate.fits(estimate, device_gib):
            return
        usable = memory_estimate.usable_gib(device_gib)
        reserve = ('the CUDA context and allocator' if self.uses_gpus
                   else 'the system')
        self.skip(
            f'needs {estimate.describe()}; the partition\'s devices have '
            f'{device_gib:.1f} GiB ({source}), {usable:.1f} of them for '
            f'the run ({device_gib - usable:.1f} kept for {reserve}): '
            + '; '.join(self.memory_fit_hints(estimate, device_gib) + [
                "if the device memory is wrong, set extras"
                "['device_memory_gib']; to queue it anyway, -S "
                "memory_check=false"]))
