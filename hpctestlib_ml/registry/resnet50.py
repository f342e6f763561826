"""ResNet-50 in TensorFlow (the CARAML vision benchmark).

Two implementations, one log format (:mod:`~hpctestlib_ml.parsers.
tf_cnn_benchmarks`):

``keras`` (default)
    ``src/resnet50_tf``: ``keras.applications.ResNet50(weights=None)``
    (v1), a custom ``strategy.run`` loop under MultiWorkerMirroredStrategy,
    synthetic images or ImageNet TFRecords (``-S data=DIR`` or
    ``extras['imagenet_tfrecords']``). Both launch modes.
``tf_cnn_benchmarks``
    CARAML's program (tensorflow/benchmarks ``scripts/tf_cnn_benchmarks``,
    its directory in ``extras['tf_cnn_benchmarks']``) with ``--model
    resnet50_v2 --variable_update horovod``: per_task only (Horovod ranks
    are the launcher's tasks).

Metrics: total and per-GPU images/s over the timed steps (warm-up
excluded), MFU from the analytic FLOPs of the network the implementation
trains (:func:`hpctestlib_ml.flops.resnet50_forward_flops`).
"""
import os

from hpctestlib_ml import (flops, model_info, precisions, program_tables,
                           settings)
from hpctestlib_ml.model_info import Published
from hpctestlib_ml.parsers import tf_cnn_benchmarks as parser
from hpctestlib_ml.registry import Headline, Workload

#: How ResNet50TF runs: the suite's Keras program or tf_cnn_benchmarks.
IMPLEMENTATIONS = ('keras', 'tf_cnn_benchmarks')


def training_flops(image_size, implementation):
    '''Training FLOPs per image of *implementation* at *image_size*:
    Keras' ResNet50 is v1; tf_cnn_benchmarks' resnet50_v2 downsamples in
    the 3x3 convolutions, as v1.5.'''
    return flops.training_flops(flops.resnet50_forward_flops(
        image_size, stride_on_3x3=implementation == 'tf_cnn_benchmarks'))


def build_model_info(size, device):
    '''Keras' parameter count; FLOPs from TensorFlow's graph profiler.'''
    sizes = WORKLOAD.sizes
    if size not in sizes:
        raise model_info.ModelInfoError(
            f'resnet50: unknown size {size!r}: use {" or ".join(sizes)}')
    image = sizes[size]['image_size']
    program_tables.importable()
    os.environ.setdefault('TF_CPP_MIN_LOG_LEVEL', '2')
    from resnet50_tf import __main__ as program
    model = program.build_model(image)
    measured = program.forward_flops(model, image)
    return model_info.ModelInfo(
        workload='resnet50', size=size, model=f'ResNet-50 v1 {image} px',
        params=int(model.count_params()),
        analytic_forward_flops=flops.resnet50_forward_flops(
            image, stride_on_3x3=False),
        measured_forward_flops=measured,
        measured_with='TensorFlow profiler (float_ops)' if measured else None,
        device='cpu',
        description=f'keras.applications.ResNet50(weights=None), one '
                    f'{image} x {image} image')


#: The count published for the model at benchmark size: Keras'
#: ResNet50.
PUBLISHED = {'benchmark': (Published(
    25_636_712, "keras.applications.ResNet50 (v1), 1000 classes (Keras' "
    "table of applications: 25.6M)",
    'https://keras.io/api/applications/'),)}


WORKLOAD = Workload(
    name='resnet50', check='ResNet50TF', program='resnet50_tf',
    parser=parser, headline=Headline('images_per_second'),
    framework='tensorflow',
    sizes={
        'tiny': {'image_size': 64, 'batch_size': 8, 'steps': 10,
                 'time_limit': '15m'},
        'benchmark': {'image_size': 224, 'batch_size': 64, 'steps': 100,
                      'precision': 'fp16', 'time_limit': '30m'},
    },
    throughput_metric='images_per_second',
    model_info=build_model_info,
    published=PUBLISHED, optimizer='sgd_momentum',
    data="synthetic images (or a site's ImageNet TFRecords)",
    names_note='TF: TensorFlow (Keras, or tf_cnn_benchmarks), beside '
               'torchvision_resnet50',
    precisions=precisions.PROGRAM,
    variables=settings.variables('resnet50', [
        ('implementation', 'str', 'keras', "the suite's Keras program or "
         "tf_cnn_benchmarks (extras['tf_cnn_benchmarks'])",
         {'choices': IMPLEMENTATIONS}),
        ('image_size', 'int', None, "image side in pixels; default: the "
         "size's", {'minimum': 1}),
        ('data', 'path', None, "'synthetic' or a directory of ImageNet "
         "TFRecords; default: extras['imagenet_tfrecords'], else synthetic",
         {'allowed': "'synthetic' or an absolute directory"}),
    ]),
    extras=settings.extras_keys('resnet50', [
        ('imagenet_tfrecords', 'path', None, 'a directory of ImageNet '
         'TFRecords', {'allowed': 'a directory'}),
        ('tf_cnn_benchmarks', 'path', None, 'the directory of '
         'tf_cnn_benchmarks.py', {'allowed': 'a directory'}),
    ]))
