"""ResNet-50 in TensorFlow: analytic FLOPs against Keras' network, the
tf_cnn_benchmarks log parser on real logs, TF_CONFIG rendezvous, the
program's TFRecord input on generated ImageNet-layout files, each worker's
one GPU on a 4-GPU node, two workers with and without XLA, and the
program's [hpcml] records."""
import os
import socket
import subprocess
import sys
import threading
import types

import pytest

from conftest import BIN, REPO, extract, read_data
from hpctestlib_ml import flops
from hpctestlib_ml.parsers import hpcml_records

sys.path.insert(0, str(REPO / 'src'))
from device_choice import DeviceChoiceError  # noqa: E402
from resnet50_tf import cluster, devices  # noqa: E402


def test_flops_are_keras_resnet50s_convolutions():
    keras = pytest.importorskip('keras')
    model = keras.applications.ResNet50(weights=None,
                                        input_shape=(96, 96, 3))
    counted = 0
    for layer in model.layers:
        if isinstance(layer, keras.layers.Conv2D):
            h, w, c_out = layer.output.shape[1:]
            kh, kw = layer.kernel_size
            counted += 2 * h * w * c_out * kh * kw * layer.input.shape[-1]
        elif isinstance(layer, keras.layers.Dense):
            counted += 2 * layer.input.shape[-1] * layer.units
    assert flops.resnet50_forward_flops(96, stride_on_3x3=False) == counted


def test_resnet50_v1_5_costs_24_5_gflop_per_trained_image():
    # 4.09 GMAC forward at 224 px (the "4.1 GFLOPs" of the literature).
    forward = flops.resnet50_forward_flops(224)
    assert forward / 2 == pytest.approx(4.09e9, rel=0.01)
    assert flops.training_flops(forward) == pytest.approx(24.5e9, rel=0.01)


def test_tf_cnn_benchmarks_log_from_upstream():
    m = extract('resnet50', read_data(
        'tf_cnn_benchmarks', 'tensorflow_benchmarks_pr63_resnet50_1gpu.log'))
    assert m['images_per_second'] == 138.95 and m['workers'] == 1
    assert m['steps'] == 100 and m['loss_last'] == 7.917
    assert m['losses_finite']


def test_suites_program_with_two_workers_prints_the_jobs_rate():
    '''As tf_cnn_benchmarks: each worker's total is its measurement of the
    job's rate (workers x its own rate), so the job's figure is their
    mean, not their sum.'''
    text = read_data('tf_cnn_benchmarks',
                     'resnet50_tf_tiny_cpu_2ranks_torchrun.out')
    m = extract('resnet50', text)
    totals = [float(line.split(':')[1]) for line in text.splitlines()
              if line.startswith('total images/sec')]
    assert m['workers'] == 2 and len(totals) == 2
    last_rates = [float(line.split('images/sec:')[1].split()[0])
                  for line in text.splitlines() if line.startswith('10\t')]
    assert totals == pytest.approx([2 * r for r in last_rates], rel=0.02)
    assert m['images_per_second'] == pytest.approx(sum(totals) / 2)
    assert m['devices'] == 2
    assert m['images_per_second_per_gpu'] == pytest.approx(sum(totals) / 4)
    assert m['global_batch_size'] == 16 and m['steps'] == 10
    assert m['time_per_step_secs'] == pytest.approx(
        16 / m['images_per_second'])


def test_rank_prefixes_and_a_nan_loss():
    text = ('0: 1\timages/sec: 10.0 +/- 0.0 (jitter = 0.0)\t7.1\n'
            '1: 1\timages/sec: 11.0 +/- 0.0 (jitter = 0.0)\tnan\n'
            '0: total images/sec: 10.00\n1: total images/sec: 11.00\n')
    m = extract('resnet50', text)
    assert m['workers'] == 2 and m['images_per_second'] == 10.5
    assert not m['losses_finite']


def test_rendezvous_returns_every_rank_in_order(tmp_path):
    results = {}

    def rank(r):
        results[r] = cluster.rendezvous(tmp_path, r, 3, f'10.0.0.{r}:{r}')
    threads = [threading.Thread(target=rank, args=(r,)) for r in (2, 0, 1)]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    expected = ['10.0.0.0:0', '10.0.0.1:1', '10.0.0.2:2']
    assert results == {0: expected, 1: expected, 2: expected}


def test_rendezvous_names_missing_ranks(tmp_path):
    with pytest.raises(TimeoutError, match=r'ranks \[1, 2\].*all nodes share'):
        cluster.rendezvous(tmp_path, 0, 3, 'a:1', timeout=0.3)


def test_tf_config_for_one_worker_is_none(monkeypatch):
    monkeypatch.setenv('WORLD_SIZE', '1')
    assert cluster.tf_config() is None


def test_program_trains_on_imagenet_tfrecords(tmp_path):
    tf = pytest.importorskip('tensorflow')
    for shard in range(2):
        with tf.io.TFRecordWriter(str(tmp_path / f'train-0000{shard}-of-'
                                               f'00002')) as writer:
            for i in range(4):
                image = tf.cast(tf.random.uniform((40, 50, 3)) * 255,
                                tf.uint8)
                feature = {
                    'image/encoded': tf.train.Feature(bytes_list=tf.train.
                        BytesList(value=[tf.io.encode_jpeg(image).numpy()])),
                    'image/class/label': tf.train.Feature(
                        int64_list=tf.train.Int64List(value=[1 + i])),
                }
                writer.write(tf.train.Example(features=tf.train.Features(
                    feature=feature)).SerializeToString())
    proc = subprocess.run(
        [BIN / 'python', '-m', 'resnet50_tf', '--image-size', '32',
         '--batch-size', '2', '--steps', '2', '--data', str(tmp_path)],
        cwd=REPO / 'src', capture_output=True, text=True, timeout=300)
    assert proc.returncode == 0, proc.stderr[-3000:]
    m = extract('resnet50', proc.stdout)
    assert m['steps'] == 2 and m['workers'] == 1 and m['losses_finite']

    proc = subprocess.run(
        [BIN / 'python', '-m', 'resnet50_tf', '--data', str(REPO / 'src')],
        cwd=REPO / 'src', capture_output=True, text=True, timeout=300)
    assert proc.returncode != 0
    assert 'no train-* TFRecord files' in proc.stderr


# What tf.config.list_physical_devices('GPU') lists on a 4-GPU node, where
# every task sees the node's GPUs (Slurm's default, torchrun), and where
# Slurm binds one GPU to each task (--gpus-per-task=1: the task sees one).
NODE_GPUS = [f'/physical_device:GPU:{i}' for i in range(4)]
BOUND_GPUS = ['/physical_device:GPU:0']


@pytest.mark.parametrize('local_world', [
    {'LOCAL_WORLD_SIZE': '4'}, {'SLURM_NTASKS_PER_NODE': '4'}])
def test_each_worker_of_an_unbound_4_gpu_node_takes_its_own_gpu(
        local_world):
    chosen = [devices.choose_gpu(NODE_GPUS, {**local_world,
                                             'LOCAL_RANK': str(r)})
              for r in range(4)]
    assert chosen == [(r, NODE_GPUS[r]) for r in range(4)]


def test_each_worker_bound_to_one_gpu_takes_it_whatever_its_local_rank():
    for r in range(4):
        env = {'LOCAL_RANK': str(r), 'SLURM_NTASKS_PER_NODE': '4',
               'CUDA_VISIBLE_DEVICES': str(r), 'SLURM_STEP_GPUS': '0,1,2,3'}
        assert devices.choose_gpu(BOUND_GPUS, env) == (0, BOUND_GPUS[0])


def test_two_gpus_for_four_workers_is_refused_naming_what_was_seen():
    env = {'LOCAL_RANK': '1', 'LOCAL_WORLD_SIZE': '4',
           'CUDA_VISIBLE_DEVICES': '0,1'}
    with pytest.raises(DeviceChoiceError,
                       match=r'sees 2 devices \(CUDA_VISIBLE_DEVICES=0,1\)'):
        devices.choose_gpu(NODE_GPUS[:2], env)


def test_no_gpu_is_the_cpu():
    assert devices.choose_gpu([], {'LOCAL_RANK': '3'}) is None


class FakeConfig:
    '''What the program calls of tf.config, on a node with *gpus* whose
    get_device_details are *details*.'''

    def __init__(self, gpus, details):
        self.calls = []
        self.gpus = gpus
        self.experimental = types.SimpleNamespace(
            set_memory_growth=lambda gpu, on: self.calls.append(
                ('growth', gpu, on)),
            get_device_details=lambda gpu: details,
            tensor_float_32_execution_enabled=lambda: True)

    def list_physical_devices(self, kind):
        return list(self.gpus) if kind == 'GPU' else []

    def set_visible_devices(self, devices_, kind):
        self.calls.append(('visible', devices_, kind))


def fake_tf(gpus, details=None, build_info=None):
    return types.SimpleNamespace(
        __version__='2.21.0', config=FakeConfig(gpus, details or {}),
        sysconfig=types.SimpleNamespace(
            get_build_info=lambda: build_info or {}))


def test_a_worker_makes_only_its_gpu_visible_with_growing_memory():
    tf = fake_tf(NODE_GPUS)
    gpus, chosen = devices.use_one_gpu(tf, {'LOCAL_RANK': '2',
                                            'LOCAL_WORLD_SIZE': '4'})
    assert gpus == NODE_GPUS and chosen == (2, NODE_GPUS[2])
    assert tf.config.calls == [('visible', [NODE_GPUS[2]], 'GPU'),
                               ('growth', NODE_GPUS[2], True)]


def test_device_record_of_an_h100_worker():
    tf = fake_tf(NODE_GPUS, {'device_name': 'NVIDIA H100 80GB HBM3',
                             'compute_capability': (9, 0)},
                 {'is_cuda_build': True, 'cuda_version': '12.5.1'})
    env = {'LOCAL_RANK': '1', 'LOCAL_WORLD_SIZE': '4'}
    record = devices.device_record(tf, env, 5, 1, NODE_GPUS,
                                   (1, NODE_GPUS[1]))
    assert record == dict(
        rank=5, local_rank=1, kind='gpu', backend='cuda', index=1, count=4,
        name='NVIDIA H100 80GB HBM3', capability='9.0', tf32=True,
        runtime='cuda 12.5.1', framework='tensorflow 2.21.0', nccl=None,
        visible='')
    # cuBLAS and cuDNN leave TF32 off whatever TensorFlow allows.
    assert not devices.device_record(
        tf, {**env, 'NVIDIA_TF32_OVERRIDE': '0'}, 5, 1, NODE_GPUS,
        (1, NODE_GPUS[1]))['tf32']


def test_no_driver_library_no_capacity():
    assert devices.total_memory_bytes('cpu', 0) is None
    if not os.path.exists('/dev/nvidia0'):
        assert devices.total_memory_bytes('cuda', 0) is None


def free_port():
    with socket.socket() as s:
        s.bind(('127.0.0.1', 0))
        return s.getsockname()[1]


@pytest.mark.parametrize('xla', ['on', 'off'])
def test_two_workers_train_together_with_and_without_xla(tmp_path, xla):
    '''XLA compiles each replica's forward and backward pass, not the
    cross-worker all-reduce (which XLA cannot compile: on CPUs TensorFlow
    says "Collectives are not yet implemented for CPU devices when
    compiling with XLA"). Both workers print the same losses and the
    suite's records: a device and a timing record each, no memory record
    on CPUs.'''
    pytest.importorskip('tensorflow')
    base = {**os.environ, 'PYTHONPATH': str(REPO / 'src'), 'WORLD_SIZE': '2',
            'LOCAL_WORLD_SIZE': '2', 'MASTER_ADDR': '127.0.0.1',
            'MASTER_PORT': str(free_port()), 'OMP_NUM_THREADS': '1'}
    procs = [subprocess.Popen(
        [BIN / 'python', '-m', 'resnet50_tf', '--image-size', '32',
         '--batch-size', '2', '--steps', '2', '--xla', xla],
        cwd=tmp_path, env={**base, 'RANK': str(r), 'LOCAL_RANK': str(r)},
        stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
        for r in range(2)]
    outs = [p.communicate(timeout=600) for p in procs]
    for p, (out, err) in zip(procs, outs):
        assert p.returncode == 0, err[-3000:]
    text = outs[0][0] + outs[1][0]
    m = extract('resnet50', text)
    assert m['workers'] == 2 and m['steps'] == 2 and m['losses_finite']
    losses = [[line.split('\t')[-1] for line in out.splitlines()
               if line[:2] in ('1\t', '2\t')] for out, _ in outs]
    assert losses[0] == losses[1] and len(losses[0]) == 2
    assert f'; XLA {xla}' in text
    device = hpcml_records.by_rank(text, 'device')
    assert sorted(device) == [0, 1]
    assert {(d['kind'], d['backend'], d['local_rank'], d['index'])
            for d in device.values()} == {('cpu', 'cpu', 0, None),
                                          ('cpu', 'cpu', 1, None)}
    timing = hpcml_records.by_rank(text, 'timing')
    assert sorted(timing) == [0, 1]
    for t in timing.values():
        assert t['steps'] == 2 and t['compute_s'] > 0
        assert 0 <= t['data_s'] < t['compute_s']
    assert hpcml_records.records(text, 'memory') == []
