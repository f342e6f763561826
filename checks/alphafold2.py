"""AlphaFold2 (MLPerf HPC OpenFold): OpenFold's initial training."""
import reframe as rfm

from hpctestlib_ml.workloads.alphafold2 import AlphaFold2Training


@rfm.simple_test
class AlphaFold2(AlphaFold2Training):
    descr = 'AlphaFold2 training (MLPerf HPC OpenFold)'
    maintainers = ['hpcml']
    tags = {'alphafold2', 'mlperf-hpc', 'science'}


@rfm.simple_test
class AlphaFold2Container(AlphaFold2):
    descr = 'AlphaFold2 training in the PyTorch Apptainer image'
    runs_in_container = True
