"""python -m resnet50_tf [options]: ResNet-50 training in TensorFlow/Keras,
data-parallel over the launcher's ranks, logged as tf_cnn_benchmarks logs.

The network is ``keras.applications.ResNet50(weights=None)`` (ResNet v1, He
et al. 2015), trained with SGD momentum 0.9 and softmax cross-entropy on
synthetic images (a fixed random batch, as tf_cnn_benchmarks' synthetic
data) or ImageNet TFRecords (``--data DIR`` of ``train-*`` files in the
standard ``image/encoded`` + ``image/class/label`` layout). Several ranks
train under MultiWorkerMirroredStrategy with a custom ``strategy.run`` loop
(Keras 3's ``fit`` fails under that strategy: keras-team/keras#20585);
TF_CONFIG comes from ``cluster.py``. Each worker computes on one GPU of its
node (``devices.py``), or on the CPU where it sees none.

Every rank prints what tf_cnn_benchmarks prints per worker under Horovod,
with the same meaning, so one parser reads both: ``Step\\tImg/sec\\t
total_loss``, one line per step ``N\\timages/sec: X +/- U (jitter = J)\\t
LOSS`` (this worker's own running mean after the warm-up steps), and
``total images/sec: X``, the whole job's rate as this worker measured it:
workers x its own rate (tf_cnn_benchmarks' ``num_workers x local_step x
batch_size / elapsed_time``; the workers step together, so each one's
figure estimates the same job rate). Beside them each worker prints the
suite's ``[hpcml] device`` and ``timing`` records and, on a GPU, ``memory``
(``hpcml_log``). Each step is a step of its heartbeat for the hang watch
(:mod:`heartbeat`).
"""
import argparse
import os
import sys
import time

import heartbeat
import input_paths

WARMUP_STEPS = 1
NUM_CLASSES = 1000
POLICIES = {'fp32': 'float32', 'bf16': 'mixed_bfloat16',
            'fp16': 'mixed_float16'}


def parse_args(argv):
    p = argparse.ArgumentParser(description=__doc__.split('\n\n')[0])
    p.add_argument('--image-size', type=int, default=224)
    p.add_argument('--batch-size', type=int, default=32, help='per rank')
    p.add_argument('--steps', type=int, default=20,
                   help=f'timed steps, after {WARMUP_STEPS} warm-up step(s)')
    p.add_argument('--data', default='synthetic',
                   help='"synthetic" or a directory of ImageNet TFRecords')
    p.add_argument('--precision', choices=list(POLICIES), default='fp32')
    p.add_argument('--xla', choices=('auto', 'on', 'off'), default='auto',
                   help='XLA-compile the step; auto: on GPUs only (on CPUs '
                        'XLA is slower at small sizes)')
    p.add_argument('--seed', type=int, default=0)
    return p.parse_args(argv)


def synthetic_dataset(tf, batch, size):
    images = tf.random.stateless_uniform((batch, size, size, 3), (1, 2))
    labels = tf.random.stateless_uniform((batch,), (3, 4), maxval=NUM_CLASSES,
                                         dtype=tf.int32)
    return tf.data.Dataset.from_tensors((images, labels)).repeat()


def tfrecord_dataset(tf, directory, batch, size, context):
    files = tf.io.gfile.glob(os.path.join(directory, 'train-*'))
    if not files:
        sys.exit(f'resnet50_tf: error: no train-* TFRecord files in '
                 f'{directory} (ImageNet in the TF-slim/tf_cnn_benchmarks '
                 f'layout)')
    features = {'image/encoded': tf.io.FixedLenFeature([], tf.string),
                'image/class/label': tf.io.FixedLenFeature([], tf.int64)}

    def decode(record):
        example = tf.io.parse_single_example(record, features)
        image = tf.io.decode_jpeg(example['image/encoded'], channels=3)
        image = tf.image.resize(image, (size, size)) / 255.0
        # Labels are 1-based in these files (0 is 'background').
        return image, tf.cast(example['image/class/label'] - 1, tf.int32)

    ds = tf.data.Dataset.from_tensor_slices(sorted(files))
    ds = ds.shard(context.num_input_pipelines, context.input_pipeline_id)
    ds = ds.interleave(tf.data.TFRecordDataset,
                       num_parallel_calls=tf.data.AUTOTUNE)
    return (ds.map(decode, num_parallel_calls=tf.data.AUTOTUNE).repeat()
            .shuffle(1024).batch(batch, drop_remainder=True)
            .prefetch(tf.data.AUTOTUNE))


def build_model(image_size):
    '''The network trained: Keras' ResNet50 (v1), random init.'''
    import keras
    return keras.applications.ResNet50(
        weights=None, input_shape=(image_size, image_size, 3),
        classes=NUM_CLASSES)


def forward_flops(model, image_size):
    '''Forward FLOPs of one image through *model*, as TensorFlow's graph
    profiler counts them (``float_ops`` of the frozen inference graph:
    convolutions and matmuls as 2 per multiply-add, plus batch norm, bias
    and activation arithmetic); None where the profiler is unavailable.'''
    import tensorflow as tf
    try:
        from tensorflow.python.framework.convert_to_constants import \
            convert_variables_to_constants_v2
        profiler = tf.compat.v1.profiler
    except (ImportError, AttributeError):
        return None
    forward = tf.function(lambda x: model(x, training=False))
    graph = convert_variables_to_constants_v2(forward.get_concrete_function(
        tf.TensorSpec([1, image_size, image_size, 3], tf.float32))).graph
    options = profiler.ProfileOptionBuilder.float_operation()
    options['output'] = 'none'
    return profiler.profile(graph=graph, run_meta=tf.compat.v1.RunMetadata(),
                            cmd='op', options=options).total_float_ops


def timing(batch, times):
    '''tf_cnn_benchmarks' per-worker figures: mean images/s, its standard
    error, and the jitter (1.4826 x median absolute deviation).'''
    import statistics
    speeds = [batch / t for t in times]
    mean = batch * len(times) / sum(times)
    error = (statistics.pstdev(speeds) / len(speeds) ** 0.5
             if len(speeds) > 1 else 0.0)
    median = statistics.median(speeds)
    jitter = 1.4826 * statistics.median(abs(s - median) for s in speeds)
    return mean, error, jitter


def main(argv=None):
    args = parse_args(sys.argv[1:] if argv is None else argv)
    input_paths.require_data('resnet50_tf', args.data)
    from resnet50_tf.cluster import export_tf_config, remove_rendezvous
    world = export_tf_config()
    os.environ.setdefault('TF_CPP_MIN_LOG_LEVEL', '1')
    import keras
    import tensorflow as tf

    from device_choice import DeviceChoiceError
    from hpcml_log import emit, emit_timed_region, emit_timing
    from resnet50_tf import devices
    rank = int(os.environ.get('RANK', 0))
    local_rank = int(os.environ.get('LOCAL_RANK') or 0)
    try:
        # Before anything starts TensorFlow's runtime: one GPU per worker.
        gpus, chosen = devices.use_one_gpu(tf, os.environ)
    except DeviceChoiceError as err:
        sys.exit(f'resnet50_tf: error: {err}')

    threads = int(os.environ.get('OMP_NUM_THREADS', 0))
    if threads:
        # TensorFlow's thread pools ignore OpenMP's variable; the job
        # script sets it to this rank's share of the node's CPUs.
        tf.config.threading.set_intra_op_parallelism_threads(threads)
        tf.config.threading.set_inter_op_parallelism_threads(min(threads, 2))
    tf.random.set_seed(args.seed)
    keras.mixed_precision.set_global_policy(POLICIES[args.precision])
    strategy = (tf.distribute.MultiWorkerMirroredStrategy() if world > 1
                else tf.distribute.get_strategy())
    record = devices.device_record(tf, os.environ, rank, local_rank, gpus,
                                   chosen)
    emit('device', **record)
    if strategy.num_replicas_in_sync != world:
        sys.exit(f'resnet50_tf: error: {strategy.num_replicas_in_sync} '
                 f'replicas in sync for {world} workers (one each was '
                 f'expected): this worker sees '
                 f'{tf.config.get_visible_devices()}')
    xla = args.xla == 'on' or (args.xla == 'auto' and bool(gpus))
    global_batch = args.batch_size * world

    with strategy.scope():
        model = build_model(args.image_size)
        # Goyal et al. 2017: lr 0.1 per 256 images.
        optimizer = keras.optimizers.SGD(learning_rate=0.1 * global_batch
                                         / 256, momentum=0.9)
        if args.precision == 'fp16':
            optimizer = keras.optimizers.LossScaleOptimizer(optimizer)
        loss_fn = keras.losses.SparseCategoricalCrossentropy(
            reduction='none')

    def dataset(context):
        batch = context.get_per_replica_batch_size(global_batch)
        if args.data == 'synthetic':
            return synthetic_dataset(tf, batch, args.image_size)
        return tfrecord_dataset(tf, args.data, batch, args.image_size,
                                context)

    batches = iter(strategy.distribute_datasets_from_function(dataset))

    def replica_gradients(images, labels):
        with tf.GradientTape() as tape:
            probabilities = model(images, training=True)
            loss = tf.nn.compute_average_loss(
                loss_fn(labels, probabilities), global_batch_size=global_batch)
            scaled = (optimizer.scale_loss(loss) if args.precision == 'fp16'
                      else loss)
        return loss, tape.gradient(scaled, model.trainable_variables)

    # XLA compiles the replica's forward and backward pass only: the
    # gradients' all-reduce (in apply_gradients) and the loss's reduction
    # stay outside, since XLA cannot compile cross-worker collectives
    # (tensorflow/tensorflow#45940, #58961; on CPUs: "Collectives are not
    # yet implemented for CPU devices when compiling with XLA").
    if xla:
        replica_gradients = tf.function(replica_gradients, jit_compile=True)

    def replica_step(images, labels):
        loss, gradients = replica_gradients(images, labels)
        optimizer.apply_gradients(zip(gradients, model.trainable_variables))
        return loss

    @tf.function
    def train_step(images, labels):
        return strategy.reduce(tf.distribute.ReduceOp.SUM, strategy.run(
            replica_step, args=(images, labels)), axis=None)

    print(f'TensorFlow:  {tf.__version__}')
    print('Model:       resnet50 (keras.applications.ResNet50, v1)')
    print(f'Image size:  {args.image_size}')
    print(f'Batch size:  {global_batch} global')
    print(f'             {args.batch_size} per device')
    print(f'Num workers: {world} (rank {rank})')
    device = (f'GPU {chosen[0]} of {len(gpus)} ({record["name"]})' if chosen
              else 'CPU')
    print(f'Devices:     {device}; XLA {"on" if xla else "off"}')
    print(f'Precision:   {args.precision}')
    print(f'Data:        {args.data}')
    print('=' * 64, flush=True)

    times, data_s = [], 0.0
    print('Step\tImg/sec\ttotal_loss')
    for step in range(WARMUP_STEPS + args.steps):
        start = time.perf_counter()
        images, labels = next(batches)
        fetched = time.perf_counter()
        loss = float(train_step(images, labels))  # float() waits for it
        elapsed = time.perf_counter() - fetched
        heartbeat.step()
        if step + 1 == WARMUP_STEPS:
            print('Done warm up', flush=True)
        if step < WARMUP_STEPS:
            continue
        if not times:
            timed_start = time.time() - elapsed
        times.append(elapsed)
        data_s += fetched - start
        mean, error, jitter = timing(args.batch_size, times)
        print(f'{step + 1 - WARMUP_STEPS}\timages/sec: {mean:.1f} +/- '
              f'{error:.1f} (jitter = {jitter:.1f})\t{loss:.3f}', flush=True)
        if loss != loss:
            print('resnet50_tf: error: the loss is NaN', file=sys.stderr)
            return 1
    # The timed region in Unix time, for the energy figures.
    emit_timed_region(timed_start, time.time())
    mean, _, _ = timing(args.batch_size, times)
    if chosen is not None:
        emit('memory', **devices.memory_record(tf, rank, record['backend'],
                                               chosen[0]))
    emit_timing(rank, len(times), data_s, sum(times))
    print('-' * 64)
    print(f'total images/sec: {world * mean:.2f}')
    print('-' * 64, flush=True)
    if rank == 0:
        remove_rendezvous()
    return 0


if __name__ == '__main__':
    import fast_exit
    # Several workers leave TensorFlow's runtime together, through a
    # shutdown barrier of its coordination service that runs in the
    # interpreter's teardown: a worker that skips it leaves the others
    # waiting for its heartbeat to time out (a minute and more).
    fast_exit.run(main, teardown=int(os.environ.get('WORLD_SIZE', 1)) > 1)
