"""The device's achievable matrix-multiply rate per precision: the check
of the component benchmark ``matmul_rate`` (its sizes and what it
measures: :mod:`hpctestlib_ml.registry.matmul_rate`).

Beside each rate the check logs the peak it would be measured against,
as MFU does: the perflog's ``mfu_peak`` names them all
(``H100-SXM data sheet: bf16 989.4, fp16 989.4, tf32 494.7, fp32 67.0
TFLOP/s per GPU``; on CPUs the node's measured fp32 rate that
``extras['cpu_peak_flops']`` caches, shared by the node's ranks), and
``<precision>_peak_pct`` is the rate as a percentage of it (a percentage
like ``mfu``, not a fraction). A rate above its data-sheet peak means the
peak table is wrong for this product (e.g. an NVL card taken for SXM).
"""
import reframe.utility.sanity as sn
from reframe.core.builtins import performance_function, variable
import reframe.utility.typecheck as typ
from reframe.core.logging import getlogger

from hpctestlib_ml import peaks
from hpctestlib_ml.constants import DEVICE_PEAK_FLOPS, GPU_VENDORS
from hpctestlib_ml.base import ComponentTest
from hpctestlib_ml.registry import matmul_rate

#: What each device kind measures by default (``src/matmul_rate``'s).
DEVICE_PRECISIONS = {'cuda': ('bf16', 'fp16', 'tf32', 'fp32'),
                     'cpu': ('fp32',)}

#: Every precision the program knows (the variable's choices).
KNOWN = matmul_rate.PRECISIONS


def peak_table(model, precisions):
    '''Precision -> data-sheet FLOP/s of GPU *model*
    (:func:`hpctestlib_ml.peaks.device_peak`: ``tf32`` at the TF32 rate,
    ``fp32`` at IEEE fp32's), for the precisions it has a rate of.'''
    table = {}
    for precision in precisions:
        try:
            table[precision] = peaks.device_peak(
                model, precision, tf32=precision == 'tf32')[0]
        except LookupError:
            continue
    return table


def describe_peaks(source, table, unit='TFLOP/s per GPU'):
    '''``<source>: bf16 989.4, ... TFLOP/s per GPU`` (``mfu_peak``).'''
    rates = ', '.join(f'{p} {v / 1e12:.1f}' for p, v in table.items())
    return f'{source}: {rates} {unit}'


def math_mode_problems(figures, model, vendor):
    '''Why the log's ``tf32``/``fp32`` rates did not run in their math
    mode (the ``<precision>_tf32`` figures: what each rank's flags said):
    ``tf32`` on IEEE fp32 products on an NVIDIA GPU with a TF32 peak
    (``NVIDIA_TF32_OVERRIDE=0`` in the job's environment turns TF32 off in
    cuBLAS whatever torch asks), whose rate would be judged against the
    TF32 peak; ``fp32`` on TF32. *model*: the peak table's key, *vendor*
    the GPUs' (``nvidia``, ``amd``; None on CPUs).'''
    problems = []
    has_tf32 = 'tf32' in DEVICE_PEAK_FLOPS.get(model, {})
    if (figures.get('tf32_tf32') is False and vendor == 'nvidia' and
            has_tf32):
        problems.append(
            'tf32_tflops ran IEEE fp32 products, not TF32 (is '
            'NVIDIA_TF32_OVERRIDE=0 set for the job?): unset it, or leave '
            'tf32 out (-S precisions=bf16,fp16,fp32)')
    if figures.get('fp32_tf32') is True:
        problems.append(
            'fp32_tflops ran on TF32, not IEEE fp32: remove what turns '
            'TF32 on for the job (TORCH_ALLOW_TF32_CUBLAS_OVERRIDE=1 with '
            'an older torch)')
    return problems


class MatmulRateBenchmark(ComponentTest):
    '''Square matrix products per precision on every rank's device.

    .. list-table:: Summary (beside ComponentTest's)
       :header-rows: 0

       * - Parameters
         - none
       * - Variables
         - ``matrix_size``, ``products_per_iteration``, ``warmup_products``,
           ``warmup_seconds``, ``measure_seconds``, ``precisions``
       * - Metrics
         - ``fp32_tflops``, ``tf32_tflops``, ``bf16_tflops``,
           ``fp16_tflops`` (TFLOP/s per device, the ranks' mean; those
           measured), and for each ``<precision>_tflops_min`` (the
           slowest rank's) and ``<precision>_peak_pct`` (% of the peak in
           ``mfu_peak``, where one is known)
       * - Partition extras
         - ``cpu_peak_flops`` (CPUs' peak)
    '''

    workload = 'matmul_rate'

    #: Side of the square matrices.
    #:
    #: :type: :class:`int` or :obj:`None`
    #: :default: :obj:`None` (the size's: 8192, ``tiny`` 512)
    matrix_size = variable(str, int, type(None), value=None)

    #: Products timed together in one iteration (``steps`` iterations per
    #: precision).
    #:
    #: :type: :class:`int` or :obj:`None`
    #: :default: :obj:`None` (the size's: 10, ``tiny`` 8)
    products_per_iteration = variable(str, int, type(None), value=None)

    #: Untimed products before each precision's timed ones.
    #:
    #: :type: :class:`int` or :obj:`None`
    #: :default: :obj:`None` (the size's: 3, ``tiny`` 4)
    warmup_products = variable(str, int, type(None), value=None)

    #: Least seconds of untimed products before each precision's timed
    #: ones (more than ``warmup_products`` where these take less).
    #:
    #: :type: :class:`float` or :obj:`None`
    #: :default: :obj:`None` (the size's: 1.0, ``tiny`` 0.0)
    warmup_seconds = variable(str, float, type(None), value=None)

    #: Least seconds that each precision's timed iterations last together:
    #: more products per iteration than ``products_per_iteration`` where
    #: these would take less, at the rate the warm-up measured.
    #:
    #: :type: :class:`float` or :obj:`None`
    #: :default: :obj:`None` (the size's: 2.0, ``tiny`` 0.0)
    measure_seconds = variable(str, float, type(None), value=None)

    #: Precisions to measure, of ``bf16``, ``fp16``, ``tf32``, ``fp32``.
    #:
    #: :type: :class:`List[str]`
    #: :default: ``[]`` (bf16, fp16, tf32, fp32 on GPUs; fp32 on CPUs)
    precisions = variable(typ.List[str], value=[])

    def finalize_settings(self):
        '''The precisions of the device, the figures of each and the
        peaks they are set against
        (:attr:`~hpctestlib_ml.plugins.utilisation.Utilisation.mfu_peak`).'''
        self.precisions = list(self.precisions or
                               DEVICE_PRECISIONS[self.device])
        for precision in KNOWN:
            if precision not in self.precisions:
                self.perf_variables.pop(f'{precision}_tflops', None)
        peak = self.peaks_per_rank()
        for precision in self.precisions:
            self.add_rate_figures(precision, peak.get(precision))

    def peaks_per_rank(self):
        '''Precision -> the peak FLOP/s one rank's rate is set against,
        and :attr:`~hpctestlib_ml.plugins.utilisation.Utilisation.mfu_peak`
        naming them; {} (and a warning) where none is known.'''
        extras = self.current_partition.extras
        if not self.uses_gpus:
            node = extras.get('cpu_peak_flops')
            if not node:
                getlogger().warning(f"{self.display_name}: no peak: set "
                                    f"extras['cpu_peak_flops']")
                return {}
            ranks = self.layout.procs_per_node
            self.mfu_peak = (f'cpu fp32 {node / 1e9:.1f} GFLOP/s per node '
                             f'(measured, cached), {ranks} rank(s)')
            return {'fp32': node / ranks}
        model = self.partition_gpu_model()
        table = peak_table(model, self.precisions)
        if table:
            self.mfu_peak = describe_peaks(f'{model} data sheet', table)
        else:
            getlogger().warning(f'{self.display_name}: no data-sheet peak '
                                f'of GPU model {model!r}')
        return table

    def add_rate_figures(self, precision, peak):
        '''``<precision>_tflops_min`` and, against *peak* (FLOP/s),
        ``<precision>_peak_pct``.'''
        self.perf_variables[f'{precision}_tflops_min'] = \
            sn.make_performance_function(
                lambda: self.metric(f'{precision}_tflops_min'), 'TFLOP/s')
        if peak:
            self.perf_variables[f'{precision}_peak_pct'] = \
                sn.make_performance_function(
                    lambda: 100 * self.metric(f'{precision}_tflops') * 1e12
                    / peak, '%')

    def case_settings(self):
        return [f'n={self.matrix_size}',
                f'precisions={",".join(self.precisions)}']

    def program_args(self):
        args = ['--matrix-size', self.matrix_size,
                '--iterations', self.steps,
                '--products', self.products_per_iteration,
                '--warmup', self.warmup_products,
                '--warmup-seconds', self.warmup_seconds,
                '--measure-seconds', self.measure_seconds,
                '--precisions', ','.join(self.precisions)]
        if not self.uses_gpus:
            args.append('--cpu')
        return [str(a) for a in args]

    def component_problems(self, log):
        missing = [p for p in self.precisions
                   if log.figures.get(f'{p}_tflops') is None]
        model = self.partition_gpu_model()
        vendor = (GPU_VENDORS.get(model) or
                  self.current_partition.extras.get('gpu_vendor')
                  if self.uses_gpus else None)
        return ([f'no rate of {", ".join(missing)} in the log']
                if missing else []) + math_mode_problems(log.figures,
                                                         model, vendor)

    @performance_function('TFLOP/s')
    def fp32_tflops(self):
        '''IEEE fp32 products per device (the ranks' mean).'''
        return self.metric('fp32_tflops')

    @performance_function('TFLOP/s')
    def tf32_tflops(self):
        '''fp32 storage, TF32 tensor-core products, per device.'''
        return self.metric('tf32_tflops')

    @performance_function('TFLOP/s')
    def bf16_tflops(self):
        return self.metric('bf16_tflops')

    @performance_function('TFLOP/s')
    def fp16_tflops(self):
        return self.metric('fp16_tflops')
