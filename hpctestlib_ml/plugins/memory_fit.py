"""MemoryFit: whether a case fits its devices' memory, from the
workload's estimate (:mod:`hpctestlib_ml.memory_estimate`) and what the
partition's devices have; a case that cannot fit is skipped at setup,
naming what would fit."""
from reframe.core.builtins import variable
from reframe.core.logging import getlogger
from reframe.core.pipeline import RegressionTestPlugin

from hpctestlib_ml import memory_estimate
from hpctestlib_ml.constants import DEVICE_MEMORY_GIB


class MemoryFit(RegressionTestPlugin):
    '''Whether a case fits the memory of the partition's devices, and
    the estimate it is logged with.'''

    #: Skip, at setup, a case whose estimated memory per device
    #: (``memory_estimate``) exceeds what the partition's devices have
    #: (:meth:`device_memory_gib`); ``-S memory_check=false`` queues it
    #: anyway (to see the out-of-memory error, or where the estimate is
    #: wrong).
    #:
    #: :type: :class:`bool`
    #: :default: :obj:`True`
    memory_check = variable(str, bool, value=True)

    #: The memory per device the suite estimated at setup (as ``hpcml
    #: model-info --memory``), e.g. ``27.0 GiB``; '' where the workload
    #: has no estimate. Logged with every result, beside what a GPU run
    #: measures (``gpu_mem_peak_MiB``).
    #:
    #: :type: :class:`str`
    #: :default: ``''``
    memory_estimated = variable(str, value='')

    def device_memory_gib(self):
        '''(GiB of memory one rank's device has, where the figure comes
        from), or (None, why not).

        ``extras['device_memory_gib']`` of the partition (ReFrame's
        ``devices`` have no memory field), else on GPU partitions the
        model's size where it has one
        (:data:`~hpctestlib_ml.constants.DEVICE_MEMORY_GIB`). On CPU partitions
        the CPU is the device: the extras' figure is the node's memory, shared
        by its ranks (``config/local.py`` sets it from MemTotal).'''
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
