"""ResNet-50 in TensorFlow (CARAML's vision benchmark)."""
import reframe as rfm

from hpctestlib_ml.workloads.resnet50 import ResNet50TFTraining


@rfm.simple_test
class ResNet50TF(ResNet50TFTraining):
    descr = 'ResNet-50 ImageNet-style training in TensorFlow/Keras'
    maintainers = ['hpcml']
    tags = {'resnet50', 'caraml', 'vision', 'tensorflow'}


@rfm.simple_test
class ResNet50TFContainer(ResNet50TF):
    descr = 'ResNet-50 training in the TensorFlow Apptainer image'
    runs_in_container = True
