"""Every rank of every node computes the same products and training step
from one seed; a rank whose answer differs is named (silent data
corruption, component benchmark)."""
import reframe as rfm

from hpctestlib_ml.workloads.sdc import SilentDataCorruptionBenchmark


@rfm.simple_test
class SilentDataCorruption(SilentDataCorruptionBenchmark):
    descr = 'the same answer on every rank, or the wrong one named'
    maintainers = ['hpcml']
    tags = {'component', 'sdc'}


@rfm.simple_test
class SilentDataCorruptionContainer(SilentDataCorruption):
    descr = 'the same answer on every rank, in the PyTorch image'
    runs_in_container = True
