"""The storage training jobs read their data from and write checkpoints
to, as a check (component benchmark ``storage``): read throughput of each
workload's data format, and the checkpoint of the benchmark model's state
written and read back, by every rank at once.

``src/storage_bench`` measures it (the formats, how each is written and
read, what is done about the page cache and its limits: its docstrings).
Sizes: ``benchmark`` 1 GiB of each format per rank in the benchmarks'
sample shapes (128^3 CosmoFlow cubes, 768 x 1152 DeepCAM fields,
ImageNet-sized TFRecord shards) and the checkpoint of Megatron 800M
(CARAML's, 908,759,040 parameters) with Adam, 10.9 GB shared by the
ranks, 3 rounds; ``tiny`` 4 MiB of each in small shapes and Megatron
tiny's checkpoint (173 MB), 2 rounds.
"""
from hpctestlib_ml import settings
from hpctestlib_ml.parsers import storage_bench as parser
from hpctestlib_ml.registry import Headline, Workload

#: The data formats it reads, by the workload that reads each.
FORMATS = {'npy': 'cosmoflow', 'npz': 'deeplabv3plus',
           'tfrecord': 'resnet50', 'text': 'gpt2_finetune'}

WORKLOAD = Workload(
    name='storage', check='Storage', program='storage_bench',
    parser=parser, kind='component',
    explains='file system',
    # A synchronous checkpoint stops training while it is written.
    headline=Headline('checkpoint_write_GBps'),
    sizes={
        'tiny': {'steps': 2, 'data_bytes_per_rank': 4 * 2 ** 20,
                 'checkpoint_model_size': 'tiny', 'time_limit': '10m'},
        'benchmark': {'steps': 3, 'data_bytes_per_rank': 2 ** 30,
                      'checkpoint_model_size': '800M', 'time_limit': '30m'},
        'short': {'steps': 3, 'time_limit': '30m'},
    },
    # It moves data only: its ranks hold no device memory (Gloo, no CUDA
    # context), so no gpu_mem_peak_MiB on any partition.
    reports_gpu_memory=False,
    data="files it writes in the partition's storage directory",
    # Not the program's: the check's setup counts the checkpoint's
    # parameters with Megatron-Core's model (hpcml model-info megatron).
    packages=('megatron-core',),
    names_note='the program is storage_bench: a module called storage '
               'would be too generic a name on PYTHONPATH',
    variables=settings.variables('storage', [
        ('storage_dir', 'path', None, "directory to measure (shell variables "
         "expanded by the job); default: extras['storage_dir'], else the "
         "stage directory", {'allowed': 'a directory'}),
        ('formats', 'list', [], 'data formats to read; default: all',
         {'choices': tuple(FORMATS)}),
        ('data_bytes_per_rank', 'int', None, "bytes of each format every "
         "rank writes and reads; default: the size's", {'minimum': 1}),
        ('checkpoint_workload', 'str', 'megatron', "the workload whose "
         "model's state the checkpoint holds",
         {'allowed': 'a workload with a model'}),
        ('checkpoint_model_size', 'str', None, "that model's size (hpcml "
         "model-info --size); default: the size's"),
        ('checkpoint_bytes', 'int', None, "the checkpoint's bytes, all ranks "
         "together (0: none); default: the model's state", {'minimum': 0}),
    ]))
