"""PyTorch ResNet-50 (torchvision), as EESSI's and CSCS's PyTorch tests run
it: images/s total and per GPU on synthetic data under DDP."""
import reframe as rfm

from hpctestlib_ml.workloads.torchvision_resnet50 import TorchvisionResNet50Training


@rfm.simple_test
class TorchvisionResNet50(TorchvisionResNet50Training):
    descr = 'torchvision ResNet-50 training on synthetic ImageNet data (DDP)'
    maintainers = ['hpcml']
    tags = {'resnet50', 'torchvision', 'vision'}


@rfm.simple_test
class TorchvisionResNet50Container(TorchvisionResNet50):
    descr = 'torchvision ResNet-50 training in the PyTorch Apptainer image'
    runs_in_container = True
