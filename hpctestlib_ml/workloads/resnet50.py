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

from reframe.core.builtins import performance_function, variable

from hpctestlib_ml import flops, inputs, model_info, precisions, settings
from hpctestlib_ml.base import MLTrainingTest
from hpctestlib_ml.errors import BadInputError
from hpctestlib_ml.metrics import common_problems
from hpctestlib_ml.parsers import tf_cnn_benchmarks as parser
from hpctestlib_ml.workloads import Headline, Workload

#: The programs that train ResNet-50 here (``-S implementation=``).
IMPLEMENTATIONS = settings.RESNET50_IMPLEMENTATIONS


def log_problems(log, steps, world_size):
    '''One-line reasons why a tf_cnn_benchmarks-style log (a
    :class:`~hpctestlib_ml.metrics.TrainingLog` of
    :func:`~hpctestlib_ml.parsers.tf_cnn_benchmarks.training_log`) shows a
    bad run of *steps* steps on *world_size* ranks; [] if none: the
    common checks, once some process printed the job's rate (each rank
    prints it last, so its world size counts the ranks that finished).'''
    if not log.world_size:
        return ['no "total images/sec" line in the log']
    return common_problems(log, steps, world_size)


class ResNet50TFTraining(MLTrainingTest):
    '''ResNet-50 image-classification training in TensorFlow.

    .. list-table:: Summary (beside MLTrainingTest's)
       :header-rows: 0

       * - Parameters
         - none
       * - Variables
         - ``implementation``, ``image_size``, ``data``
       * - Metrics
         - ``images_per_second`` (images/s),
           ``images_per_second_per_gpu`` (images/s),
           ``time_per_step_secs`` (s)
       * - Partition extras
         - ``imagenet_tfrecords``, ``tf_cnn_benchmarks``
    '''

    workload = 'resnet50'
    program = 'resnet50_tf'
    framework = 'tensorflow'
    valid_prog_environs = ['+tensorflow']
    throughput_metric = 'images_per_second'
    sizes = {
        'tiny': {'image_size': 64, 'batch_size': 8, 'steps': 10,
                 'time_limit': '15m'},
        'benchmark': {'image_size': 224, 'batch_size': 64, 'steps': 100,
                      'precision': 'fp16', 'time_limit': '30m'},
    }

    #: ``keras`` (``src/resnet50_tf``) or ``tf_cnn_benchmarks``.
    #:
    #: :type: :class:`str`
    #: :default: ``'keras'``
    implementation = variable(str, value='keras')

    #: Square image side in pixels; default: the size's.
    #:
    #: :type: :class:`int` or :obj:`None`
    #: :default: :obj:`None` (the size's)
    image_size = variable(str, int, type(None), value=None)

    #: ``synthetic`` or a directory of ImageNet TFRecords; default: the
    #: partition's ``extras['imagenet_tfrecords']``, else synthetic.
    #:
    #: :type: :class:`str` or :obj:`None`
    #: :default: :obj:`None` (``extras['imagenet_tfrecords']``, else ``synthetic``)
    data = variable(str, type(None), value=None)

    def runs_on(self, part):
        # Horovod's ranks are the launcher's tasks: no torchrun.
        return not (self.implementation == 'tf_cnn_benchmarks' and
                    self.launch_mode == 'torchrun')

    def prints_device_records(self):
        '''tf_cnn_benchmarks prints its own log only; src/resnet50_tf
        prints the suite's records.'''
        return self.implementation != 'tf_cnn_benchmarks'

    def finalize_settings(self):
        extras = self.current_partition.extras
        self.data_source = '-S data'
        if self.data is None:
            self.data_source = "extras['imagenet_tfrecords']"
            self.data = extras.get('imagenet_tfrecords', 'synthetic')
        if self.implementation == 'tf_cnn_benchmarks':
            directory = extras.get('tf_cnn_benchmarks')
            if not directory:
                raise BadInputError(
                    f'{self.current_partition.fullname} has no '
                    f"extras['tf_cnn_benchmarks'] (the directory of "
                    f'tf_cnn_benchmarks.py): add it to the site config, or '
                    f'run -S implementation=keras')
            if self.precision not in ('fp32', 'fp16'):
                raise BadInputError(
                    f'precision {self.precision}: tf_cnn_benchmarks trains '
                    f'fp32, or fp16 (--use_fp16): use -S precision=fp32 or '
                    f'fp16, or -S implementation=keras')
            self.python_path = [directory]
            self.program = 'tf_cnn_benchmarks'

    def input_paths(self):
        '''The TFRecords' directory (unless the data are synthetic) and
        tf_cnn_benchmarks' own.'''
        found = [] if self.data == 'synthetic' else [inputs.Input(
            self.data_source, self.data, 'dir', words=('synthetic',))]
        if self.implementation == 'tf_cnn_benchmarks':
            found.append(inputs.Input("extras['tf_cnn_benchmarks']",
                                      self.python_path[0], 'dir',
                                      holds=('tf_cnn_benchmarks.py',)))
        return found

    def program_args(self):
        if self.implementation == 'tf_cnn_benchmarks':
            args = ['--model', 'resnet50_v2', '--variable_update', 'horovod',
                    '--batch_size', self.batch_size,
                    '--num_batches', self.steps, '--num_warmup_batches', 1,
                    '--image_size', self.image_size]
            if self.precision == 'fp16':
                args.append('--use_fp16')
            if self.data != 'synthetic':
                args += ['--data_name', 'imagenet', '--data_dir', self.data]
        else:
            args = ['--image-size', self.image_size,
                    '--batch-size', self.batch_size, '--steps', self.steps,
                    '--precision', self.precision, '--data', self.data]
        return [str(a) for a in args]

    def log_problems(self, text):
        return log_problems(self.metrics(), self.steps,
                            self.layout.world_size)

    def model_flops_per_sample(self):
        # Keras' ResNet50 is v1; tf_cnn_benchmarks' resnet50_v2 downsamples
        # in the 3x3 convolutions, as v1.5.
        return flops.training_flops(flops.resnet50_forward_flops(
            self.image_size,
            stride_on_3x3=self.implementation == 'tf_cnn_benchmarks'))

    @performance_function('images/s')
    def images_per_second(self):
        '''The job's images/s: each worker's ``total images/sec`` is its
        measurement of the whole job's rate (tf_cnn_benchmarks' meaning);
        the mean of them.'''
        return self.metric('images_per_second')

    @performance_function('images/s')
    def images_per_second_per_gpu(self):
        '''The job's images/s / its devices (global / per-device batch).'''
        return self.metric('images_per_second_per_gpu')

    @performance_function('s')
    def time_per_step_secs(self):
        '''Global batch / the job's images/s.'''
        return self.metric('time_per_step_secs')


def build_model_info(size, device):
    '''Keras' parameter count; FLOPs from TensorFlow's graph profiler.'''
    sizes = ResNet50TFTraining.sizes
    if size not in sizes:
        raise model_info.ModelInfoError(
            f'resnet50: unknown size {size!r}: use {" or ".join(sizes)}')
    image = sizes[size]['image_size']
    model_info.programs_importable()
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


WORKLOAD = Workload(
    name='resnet50', check='ResNet50TF', program='resnet50_tf',
    parser=parser, headline=Headline('images_per_second'),
    model_info=build_model_info, optimizer='sgd_momentum',
    data="synthetic images (or a site's ImageNet TFRecords)",
    names_note='TF: TensorFlow (Keras, or tf_cnn_benchmarks), beside '
               'torchvision_resnet50',
    precisions=precisions.PROGRAM)
