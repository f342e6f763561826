"""CosmoFlow (MLPerf HPC), PyTorch port of the reference model."""
import reframe as rfm

from hpctestlib_ml.workloads.cosmoflow import CosmoFlowTraining


@rfm.simple_test
class CosmoFlow(CosmoFlowTraining):
    descr = 'CosmoFlow 3D CNN training (MLPerf HPC reference model)'
    maintainers = ['hpcml']
    tags = {'cosmoflow', 'mlperf-hpc', 'science'}


@rfm.simple_test
class CosmoFlowContainer(CosmoFlow):
    descr = 'CosmoFlow training in the PyTorch Apptainer image'
    runs_in_container = True
