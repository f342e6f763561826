"""ResNet-50 in TensorFlow: analytic FLOPs against Keras' network, the
tf_cnn_benchmarks log parser on real logs, TF_CONFIG rendezvous, the
program's TFRecord input on generated ImageNet-layout files, and two
workers with and without XLA."""
import os
import socket
import subprocess
import sys
import threading

import pytest

from conftest import BIN, REPO, read_data
from hpctestlib_ml import flops
from hpctestlib_ml.parsers import EXTRACTORS

sys.path.insert(0, str(REPO / 'src'))
from resnet50_tf import cluster  # noqa: E402


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
    m = EXTRACTORS['resnet50'](read_data(
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
    m = EXTRACTORS['resnet50'](text)
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
    m = EXTRACTORS['resnet50'](text)
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
    m = EXTRACTORS['resnet50'](proc.stdout)
    assert m['steps'] == 2 and m['workers'] == 1 and m['losses_finite']

    proc = subprocess.run(
        [BIN / 'python', '-m', 'resnet50_tf', '--data', str(REPO / 'src')],
        cwd=REPO / 'src', capture_output=True, text=True, timeout=300)
    assert proc.returncode != 0
    assert 'no train-* TFRecord files' in proc.stderr


def free_port():
    with socket.socket() as s:
        s.bind(('127.0.0.1', 0))
        return s.getsockname()[1]


@pytest.mark.parametrize('xla', ['on', 'off'])
def test_two_workers_train_together_with_and_without_xla(tmp_path, xla):
    '''XLA compiles each replica's forward and backward pass, not the
    cross-worker all-reduce (which XLA cannot compile: on CPUs TensorFlow
    says "Collectives are not yet implemented for CPU devices when
    compiling with XLA"). Both workers print the same losses.'''
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
    m = EXTRACTORS['resnet50'](text)
    assert m['workers'] == 2 and m['steps'] == 2 and m['losses_finite']
    losses = [[line.split('\t')[-1] for line in out.splitlines()
               if line[:2] in ('1\t', '2\t')] for out, _ in outs]
    assert losses[0] == losses[1] and len(losses[0]) == 2
    assert f'; XLA {xla}' in text
