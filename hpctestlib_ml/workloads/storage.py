"""The storage training jobs read their data from and write checkpoints
to, as a check (component benchmark ``storage``): read throughput of each
workload's data format, and the checkpoint of the benchmark model's state
written and read back, by every rank at once.

``src/storage_bench`` measures it (the formats, how each is written and
read, what is done about the page cache and its limits: its docstrings).
Where: the partition's ``extras['storage_dir']`` (its parallel file
system's scratch, or a node-local disk; shell variables such as
``$SCRATCH`` are expanded by the job), ``-S storage_dir=`` over it, else
the case's stage directory (ReFrame's, wherever the site config puts it);
``reference_case`` says which (``dir=$SCRATCH``, ``dir=stage``), since
each is another measurement.

Sizes: ``benchmark`` 1 GiB of each format per rank in the benchmarks'
sample shapes (128^3 CosmoFlow cubes, 768 x 1152 DeepCAM fields,
ImageNet-sized TFRecord shards) and the checkpoint of Megatron 800M
(CARAML's, 908,759,040 parameters) with Adam, 10.9 GB shared by the
ranks, 3 rounds; ``tiny`` 4 MiB of each in small shapes and Megatron
tiny's checkpoint (173 MB), 2 rounds. The checkpoint's size comes from
the registry (:mod:`hpctestlib_ml.state_size`: the workload's model
builder and optimizer): ``-S checkpoint_workload=`` and ``-S
checkpoint_model_size=`` choose another model, ``-S checkpoint_bytes=`` a
size.
"""
import reframe.utility.sanity as sn
from reframe.core.builtins import performance_function, run_before, variable
import reframe.utility.typecheck as typ

from hpctestlib_ml import launch, settings, state_size
from hpctestlib_ml.base import ComponentTest
from hpctestlib_ml.errors import BadInputError, positive_int
from hpctestlib_ml.parsers import storage_bench as parser
from hpctestlib_ml.paths import CACHE_DIR
from hpctestlib_ml.workloads import Headline, Workload

#: The data formats, by the workload that reads each.
FORMATS = settings.STORAGE_FORMATS

#: The operations, as the perflog names their rates.
OPERATIONS = tuple(f'read_{f}' for f in FORMATS) + ('checkpoint_write',
                                                    'checkpoint_read')


class StorageBenchmark(ComponentTest):
    '''Data read in each workload's format, and a checkpoint written and
    read, by every rank at once.

    .. list-table:: Summary (beside ComponentTest's)
       :header-rows: 0

       * - Parameters
         - none
       * - Variables
         - ``storage_dir``, ``formats``, ``data_bytes_per_rank``,
           ``checkpoint_workload``, ``checkpoint_model_size``,
           ``checkpoint_bytes``; ``steps`` are the rounds
       * - Metrics
         - ``read_npy_GBps``, ``read_npz_GBps``, ``read_tfrecord_GBps``,
           ``read_text_GBps``, ``checkpoint_write_GBps``,
           ``checkpoint_read_GBps`` (GB/s, all ranks: bytes over the
           slowest rank's time), each with ``<op>_GBps_per_rank``
       * - Partition extras
         - ``storage_dir``
    '''

    #: It moves data only: its ranks hold no device memory (Gloo, no
    #: CUDA context), so no ``gpu_mem_peak_MiB`` on any partition.
    reports_gpu_memory = False

    workload = 'storage'
    program = 'storage_bench'
    sizes = {
        'tiny': {'steps': 2, 'data_bytes_per_rank': 4 * 2 ** 20,
                 'checkpoint_model_size': 'tiny', 'time_limit': '10m'},
        'benchmark': {'steps': 3, 'data_bytes_per_rank': 2 ** 30,
                      'checkpoint_model_size': '800M', 'time_limit': '30m'},
        'short': {'steps': 3, 'time_limit': '30m'},
    }

    #: Directory to measure (shell variables are expanded by the job).
    #:
    #: :type: :class:`str` or :obj:`None`
    #: :default: :obj:`None`: the partition's ``extras['storage_dir']``,
    #:     else the stage directory
    storage_dir = variable(str, type(None), value=None)

    #: Data formats to read, of ``npy``, ``npz``, ``tfrecord``, ``text``.
    #:
    #: :type: :class:`List[str]`
    #: :default: ``[]`` (all four)
    formats = variable(typ.List[str], value=[])

    #: Bytes of each format every rank writes, then reads.
    #:
    #: :type: :class:`int` or :obj:`None`
    #: :default: :obj:`None` (the size's: 1 GiB, ``tiny`` 4 MiB)
    data_bytes_per_rank = variable(str, int, type(None), value=None)

    #: The workload whose model's state the checkpoint holds.
    #:
    #: :type: :class:`str`
    #: :default: ``'megatron'``
    checkpoint_workload = variable(str, value='megatron')

    #: That model's size (``hpcml model-info --size``).
    #:
    #: :type: :class:`str` or :obj:`None`
    #: :default: :obj:`None` (the size's: ``800M``, ``tiny`` ``tiny``)
    checkpoint_model_size = variable(str, type(None), value=None)

    #: The checkpoint's bytes, all ranks together; 0: none.
    #:
    #: :type: :class:`int` or :obj:`None`
    #: :default: :obj:`None`: the model's parameters and optimizer state
    #:     in fp32 (:mod:`hpctestlib_ml.state_size`)
    checkpoint_bytes = variable(str, int, type(None), value=None)

    def finalize_settings(self):
        self.formats = list(self.formats or FORMATS)
        self.data_bytes_per_rank = positive_int('data_bytes_per_rank',
                                                self.data_bytes_per_rank)
        if self.checkpoint_bytes is None:
            self.checkpoint_bytes = self.model_checkpoint_bytes()
        for op in OPERATIONS:
            if not self.measures(op):
                self.perf_variables.pop(f'{op}_GBps', None)
                continue
            self.perf_variables[f'{op}_GBps_per_rank'] = \
                sn.make_performance_function(
                    lambda op=op: self.metric(f'{op}_GBps_per_rank'), 'GB/s')

    def measures(self, op):
        '''Whether this case measures operation *op*.'''
        if op.startswith('checkpoint'):
            return self.checkpoint_bytes > 0
        return op[len('read_'):] in self.formats

    def model_checkpoint_bytes(self):
        '''The checkpoint of :attr:`checkpoint_workload`'s model.'''
        try:
            total, _ = state_size.checkpoint_bytes(
                self.checkpoint_workload, self.checkpoint_model_size,
                CACHE_DIR)
        except (state_size.StateSizeError, KeyError) as err:
            raise BadInputError(f'checkpoint of {self.checkpoint_workload} '
                                f'{self.checkpoint_model_size}: {err}; set '
                                f'-S checkpoint_bytes=') from None
        return total

    def storage_place(self):
        '''(directory as the job's shell reads it, its name in
        ``reference_case``).'''
        place = (self.storage_dir or
                 self.current_partition.extras.get('storage_dir'))
        if place:
            return place, place
        return self.stagedir, 'stage'

    def container_directories(self):
        '''The measured directory, at its own path in the image.'''
        return [self.storage_place()[0]]

    def case_settings(self):
        formats = ('' if len(self.formats) == len(FORMATS)
                   else f' formats={",".join(self.formats)}')
        return [f'dir={self.storage_place()[1]}',
                f'data={self.data_bytes_per_rank}{formats}',
                f'checkpoint={self.checkpoint_bytes}']

    def program_args(self):
        directory = self.storage_place()[0].replace('"', r'\"')
        args = ['--dir', launch.ShellExpr(f'"{directory}"'),
                '--size', 'tiny' if self.resolved_size == 'tiny'
                else 'benchmark',
                '--formats', ','.join(self.formats),
                '--bytes-per-rank', str(self.data_bytes_per_rank),
                '--checkpoint-bytes', str(self.checkpoint_bytes),
                '--rounds', str(self.steps)]
        return args + ([] if self.uses_gpus else ['--cpu'])

    def component_problems(self, log):
        missing = [op for op in OPERATIONS if self.measures(op)
                   and log.figures.get(f'{op}_GBps') is None]
        return [f'no {", ".join(missing)} in the log'] if missing else []

    @run_before('performance')
    def record_page_cache(self):
        '''``departures`` names the reads whose page cache could not be
        dropped (no ``posix_fadvise``): their rates may be memory's.'''
        figures = self.metrics().figures
        kept = [op for op in OPERATIONS if op != 'checkpoint_write'
                and figures.get(f'{op}_cache') == 'none']
        self.departures = (f'page cache not dropped before '
                           f'{", ".join(kept)}' if kept else 'none')

    @performance_function('GB/s')
    def read_npy_GBps(self):
        '''CosmoFlow's ``.npy`` samples read, all ranks.'''
        return self.metric('read_npy_GBps')

    @performance_function('GB/s')
    def read_npz_GBps(self):
        '''DeepCAM's ``.npz`` samples read, all ranks.'''
        return self.metric('read_npz_GBps')

    @performance_function('GB/s')
    def read_tfrecord_GBps(self):
        '''ImageNet TFRecord shards read, all ranks.'''
        return self.metric('read_tfrecord_GBps')

    @performance_function('GB/s')
    def read_text_GBps(self):
        '''WikiText-like text read line by line, all ranks.'''
        return self.metric('read_text_GBps')

    @performance_function('GB/s')
    def checkpoint_write_GBps(self):
        '''The checkpoint's shards saved and on storage, all ranks.'''
        return self.metric('checkpoint_write_GBps')

    @performance_function('GB/s')
    def checkpoint_read_GBps(self):
        '''The checkpoint's shards loaded, all ranks.'''
        return self.metric('checkpoint_read_GBps')


WORKLOAD = Workload(
    name='storage', check='Storage', program='storage_bench',
    parser=parser, kind='component',
    explains='file system',
    # A synchronous checkpoint stops training while it is written.
    headline=Headline('checkpoint_write_GBps'),
    data="files it writes in the partition's storage directory",
    # Not the program's: the check's setup counts the checkpoint's
    # parameters with Megatron-Core's model (hpcml model-info megatron).
    packages=('megatron-core',),
    names_note='the program is storage_bench: a module called storage '
               'would be too generic a name on PYTHONPATH')
