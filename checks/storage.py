"""Storage as training uses it: each workload's data format read, and the
benchmark model's checkpoint written and read (component benchmark)."""
import reframe as rfm

from hpctestlib_ml.workloads.storage import StorageBenchmark


@rfm.simple_test
class Storage(StorageBenchmark):
    descr = 'data formats read and a checkpoint written and read'
    maintainers = ['hpcml']
    tags = {'component', 'storage', 'io'}


@rfm.simple_test
class StorageContainer(Storage):
    descr = 'storage measured from the PyTorch Apptainer image'
    runs_in_container = True
