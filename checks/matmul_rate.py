"""The device's achievable matrix-multiply rate per precision (component
benchmark), beside the data-sheet peak MFU divides by."""
import reframe as rfm

from hpctestlib_ml.workloads.matmul_rate import MatmulRateBenchmark


@rfm.simple_test
class MatmulRate(MatmulRateBenchmark):
    descr = 'square matrix products per precision on every rank\'s device'
    maintainers = ['hpcml']
    tags = {'component', 'matmul'}


@rfm.simple_test
class MatmulRateContainer(MatmulRate):
    descr = 'square matrix products per precision in the PyTorch image'
    runs_in_container = True
