"""DeepCAM (MLPerf HPC): DeepLabV3+ climate segmentation."""
import reframe as rfm

from hpctestlib_ml.workloads.deeplabv3plus import DeepLabV3PlusTraining


@rfm.simple_test
class DeepLabV3Plus(DeepLabV3PlusTraining):
    descr = 'DeepLabV3+ climate segmentation (MLPerf HPC DeepCAM)'
    maintainers = ['hpcml']
    tags = {'deepcam', 'deeplabv3plus', 'mlperf-hpc', 'science'}


@rfm.simple_test
class DeepLabV3PlusContainer(DeepLabV3Plus):
    descr = 'DeepLabV3+ climate segmentation in the PyTorch Apptainer image'
    runs_in_container = True
