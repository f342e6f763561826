"""Utilisation: MFU and HFU against the peak of the precision that ran,
what the ranks say they ran on, and the figures of the suite's
``[hpcml]`` records (data share, device memory)."""
import reframe.utility.sanity as sn
from reframe.core.builtins import run_before, variable
from reframe.core.exceptions import SanityError
from reframe.core.logging import getlogger
from reframe.core.pipeline import RegressionTestPlugin

from hpctestlib_ml import device_check, peaks
from hpctestlib_ml.flops import RECOMPUTE_FACTOR, TRAINING_FACTOR


class Utilisation(RegressionTestPlugin):
    '''How much of the hardware a case used.'''

    #: What the ranks say they ran on (their ``[hpcml] device`` records):
    #: kind, backend, product name and ranks, e.g. ``gpu cuda NVIDIA H100
    #: 80GB HBM3 x4``; '' where the program prints no record. Logged with
    #: every result.
    #:
    #: :type: :class:`str`
    #: :default: ``''``
    device_ran = variable(str, value='')

    #: The slowest rank and its node where the ranks' own compute per step
    #: (their ``[hpcml] rank_compute`` records) spreads by more than the
    #: measured noise
    #: (:data:`~hpctestlib_ml.device_check.RANK_SPREAD_NOISE_PCT`), e.g. ``rank
    #: 3 on n2, +27 %`` (27 % above the median rank); '' where the spread is
    #: within it, or the case has one rank or no such records. Logged with
    #: every result.
    #:
    #: :type: :class:`str`
    #: :default: ``''``
    slowest_rank = variable(str, value='')

    #: The peak MFU divides by, as used: device model, the precision's
    #: rate (fp32 at ``tf32`` only where the ranks say TF32 was on) and
    #: its FLOP/s, e.g. ``H100-SXM bf16 989.4 TFLOP/s per GPU``; '' without
    #: MFU. Logged with every result.
    #:
    #: :type: :class:`str`
    #: :default: ``''``
    mfu_peak = variable(str, value='')

    def add_utilisation_metrics(self):
        '''At setup: ``mfu`` (model FLOPs) and, with activation
        recomputation, ``hfu`` (FLOPs executed: the forward once more),
        where the peak and the FLOPs per sample are known. Both are
        computed after the run: a workload may read its model's shape
        from the log, and the peak follows the math mode the ranks report
        (:mod:`hpctestlib_ml.peaks`).'''
        try:
            self.peak_flops_per_node(records=[])       # before the run
            self.check_flops_known()
        except LookupError as err:
            getlogger().warning(f'{self.display_name}: no MFU: {err}')
            return
        self.perf_variables['mfu'] = sn.make_performance_function(
            lambda: self._utilisation(1.0), '%')
        if self.recomputes_activations():
            executed = self.recomputed_flops_factor()
            self.perf_variables['hfu'] = sn.make_performance_function(
                lambda: self._utilisation(executed), '%')

    def recomputes_activations(self):
        '''Whether the run recomputes the forward pass in the backward
        (activation checkpointing): then ``hfu`` is reported beside
        ``mfu``. A workload whose runs do says when.'''
        return False

    def recomputed_flops_factor(self):
        '''Executed FLOPs over model FLOPs when activations are recomputed:
        4/3 (one more forward per three).'''
        return RECOMPUTE_FACTOR / TRAINING_FACTOR

    def _utilisation(self, factor):
        throughput = self.metrics().figures[
            self.declaration().throughput_metric]
        flops = factor * self.model_flops_per_sample()
        peak = self.peak_flops_per_node() * self.layout.num_nodes
        return 100 * throughput * flops / peak

    def peak_flops_per_node(self, records=None):
        '''Peak FLOP/s of one node at the precision that ran; sets
        :attr:`mfu_peak`. LookupError where none is known. *records*: the
        ranks' ``device`` records (default: the log's).

        GPU partitions: the ``devices`` ``model`` looked up in
        :data:`~hpctestlib_ml.constants.DEVICE_PEAK_FLOPS` at the
        precision's rate (:func:`hpctestlib_ml.peaks.device_peak`; fp32 at
        the TF32 rate where the ranks' ``device`` records say TF32 ran, or
        say nothing), or ``extras['device_peak_flops']``; CPU partitions:
        ``extras['cpu_peak_flops']``.
        '''
        extras = self.current_partition.extras
        if not self.uses_gpus:
            peak = extras.get('cpu_peak_flops')
            if not peak:
                raise LookupError(f'no peak FLOP/s known for '
                                  f'{self.current_partition.fullname}: '
                                  f"set extras['cpu_peak_flops']")
            self.mfu_peak = (f'cpu {peak / 1e9:.1f} GFLOP/s per node '
                             f'(fp32, measured)')
            return peak
        peak = extras.get('device_peak_flops')
        if peak:
            self.mfu_peak = (f"extras['device_peak_flops'] "
                             f'{peak / 1e12:.1f} TFLOP/s per GPU')
        else:
            tf32 = device_check.tf32(self.device_records() if records is None
                                     else records)
            model = self.partition_gpu_model()
            peak, key = peaks.device_peak(model, self.precision, tf32)
            self.mfu_peak = peaks.describe(
                model, key, peak,
                assumed_tf32=key == 'tf32' and tf32 is None)
        return peak * self.layout.gpus_per_node

    @run_before('performance')
    def add_device_metrics(self):
        '''What the ranks' records say: :attr:`device_ran` (and
        :attr:`mfu_peak`, from the math mode they report).'''
        records = self.device_records()
        self.device_ran = device_check.device_summary(records)
        if 'mfu' in self.perf_variables:
            self.peak_flops_per_node(records)        # sets mfu_peak

    def add_record_metrics(self):
        '''At setup, so that every run of a case logs the same columns
        (a perflog's header changes, and ReFrame starts a new file, when a
        case's figures do), where the program prints the suite's records:
        ``data_share`` (% of the steady-state step time spent waiting for
        data: the workload's parser's figure where its program logs its
        own, else the ``timing`` records), on GPUs ``gpu_mem_peak_MiB``
        (the largest device memory a rank held over the timed steps;
        absent on CPUs, not zero, and where the declaration's
        ``reports_gpu_memory`` is False) and, where the program prints
        ``rank_compute`` records, ``rank_compute_spread`` (% of the slowest
        rank's compute per step over the median rank's; 0 for one rank).
        Which figures a case logs depends on its check and partition only,
        never on its scale: its cases share one perflog file.'''
        if not self.prints_device_records():
            return
        declared = self.declaration()
        if declared.trains:             # a component reads no batches
            self.perf_variables['data_share'] = \
                sn.make_performance_function(self._data_share, '%')
        if self.uses_gpus and declared.reports_gpu_memory:
            self.perf_variables['gpu_mem_peak_MiB'] = \
                sn.make_performance_function(self._gpu_memory_peak, 'MiB')
        if declared.prints_rank_compute:
            self.perf_variables['rank_compute_spread'] = \
                sn.make_performance_function(self._rank_compute_spread, '%')

    def _data_share(self):
        share = self.metrics().figures.get('data_share')
        if share is None:
            share = device_check.data_share(self.log_records('timing'))
        if share is None:
            raise SanityError('data_share: no [hpcml] timing record in the '
                              'log')
        return share

    def _rank_compute_spread(self):
        found = device_check.rank_compute_spread(
            self.log_records('rank_compute'))
        if found is None:
            raise SanityError('rank_compute_spread: no rank printed an '
                              '[hpcml] rank_compute record')
        return found[0]

    @run_before('performance')
    def name_slowest_rank(self):
        ''':attr:`slowest_rank`, from the ranks' ``rank_compute``
        records.'''
        self.slowest_rank = device_check.slowest_rank(
            self.log_records('rank_compute'))

    def _gpu_memory_peak(self):
        peak = device_check.gpu_memory_peak(self.log_records('memory'))
        if peak is None:
            raise SanityError('gpu_mem_peak_MiB: no [hpcml] memory record '
                              'in the log')
        return peak
