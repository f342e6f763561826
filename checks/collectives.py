"""All-reduce, all-gather and reduce-scatter through torch.distributed,
timed as nccl-tests times them (component benchmark)."""
import reframe as rfm

from hpctestlib_ml.workloads.collectives import CollectivesBenchmark


@rfm.simple_test
class Collectives(CollectivesBenchmark):
    descr = 'nccl-tests\' collectives through torch.distributed'
    maintainers = ['hpcml']
    tags = {'component', 'collectives', 'nccl'}


@rfm.simple_test
class CollectivesContainer(Collectives):
    descr = 'nccl-tests\' collectives in the PyTorch Apptainer image'
    runs_in_container = True
