"""One CosmoFlow training step: our PyTorch port against the Keras reference.

    .venv/bin/python bench/cosmoflow_step.py [--pairs 5] [--steps 3]
        [--layout channels_last|channels_first] [--threads N] [--out FILE]
        [--glibc-defaults]

Times forward + backward + optimizer update of

- *torch*: the program's own pieces (``src/cosmoflow/__main__.py``:
  ``new_model``, ``new_optimizer``, ``loss_function``, its synthetic
  cubes, and ``mlperf_train.supervised_step``, the step it trains with),
  in ``--layout`` (default: the program's default on a CPU);
- *keras*: the network as mlcommons/hpc's ``cosmoflow/models/cosmoflow.py``
  ``build_model`` defines it (Keras Sequential, NDHWC input: Conv3D
  'same' + LeakyReLU + MaxPool3D(2) x 5, Flatten, Dense 128/64 + LeakyReLU
  + Dropout 0.5, Dense(4, tanh), x 1.2), compiled as the reference's
  ``train.py`` does (``compile(optimizer, loss='mse', metrics=['mae'])``,
  SGD momentum 0.9 from ``configs/cosmo.yaml``; no XLA, which Keras 3
  leaves off on CPU-only machines) and stepped with ``train_on_batch``;

at the reference size (128^3 cubes, batch 4, conv_size 32, fp32), each
run in a fresh process, the two alternating (torch, keras, torch, keras,
...). A run does ``--warmup`` untimed steps (TensorFlow traces its graph
in the first) and then ``--steps`` timed ones; its figure is their median.
Both use ``--threads`` intra-op threads (``torch.set_num_threads``,
``tf.config.threading.set_intra_op_parallelism_threads``); TensorFlow's
inter-op pool stays at its default, as the reference runs. Both run
with the malloc settings the suite gives programs on CPU partitions
(``hpctestlib_ml.constants.CPU_ALLOCATOR_ENV``: freed memory kept, not
unmapped and faulted in again each step); ``--glibc-defaults`` leaves
them out.

Prints every pair (each run's median wall time, its steps' wall times,
its median CPU time, the 1-minute load average before and after the
pair) and, at the end, the median step time of each and the median of
the pairs' ratios (torch / keras: below 1 is ours faster), of the wall
times and of the CPU times.
"""
import argparse
import json
import os
import pathlib
import statistics
import subprocess
import sys
import time

REPO = pathlib.Path(__file__).resolve().parent.parent
sys.path.insert(0, str(REPO))
from hpctestlib_ml.constants import CPU_ALLOCATOR_ENV  # noqa: E402
CUBE, BATCH, CONV_SIZE = 128, 4, 32


def torch_steps(args):
    '''Our port's step times (:func:`timed`), and its layout.'''
    sys.path.insert(0, str(REPO / 'src'))
    import torch
    torch.set_num_threads(args.threads)
    from cosmoflow import __main__ as program
    from mlperf_train import Batches, supervised_step
    device = torch.device('cpu')
    layout = args.layout or program.default_layout(device)[0]
    torch.manual_seed(1)
    model = program.new_model('reference', device, layout)
    model.train()
    optimizer = program.new_optimizer(model, BATCH)
    source = program.in_layout(program.synthetic(
        BATCH, CUBE, torch.Generator().manual_seed(1)), layout)
    batches = Batches(source, device, 1, pooled=True)
    step = supervised_step(model, batches, program.loss_function(),
                           optimizer, device, 'fp32')
    return timed(step, args.warmup, args.steps), layout


def keras_model(keras):
    '''The reference's build_model (mlcommons/hpc cosmoflow/models/
    cosmoflow.py) at configs/cosmo.yaml's settings, in Keras 3.'''
    layers = keras.layers
    model = keras.Sequential([keras.Input((CUBE, CUBE, CUBE, 4))])
    for i in range(5):
        model.add(layers.Conv3D(CONV_SIZE * 2 ** i, 3, padding='same'))
        model.add(layers.LeakyReLU())
        model.add(layers.MaxPool3D(2))
    model.add(layers.Flatten())
    for width in (128, 64):
        model.add(layers.Dense(width))
        model.add(layers.LeakyReLU())
        model.add(layers.Dropout(0.5))
    model.add(layers.Dense(4, activation='tanh'))
    model.add(layers.Lambda(lambda x: 1.2 * x))
    return model


def keras_steps(args):
    '''The Keras reference's step times (:func:`timed`), and its
    layout.'''
    import numpy as np
    import tensorflow as tf
    tf.config.threading.set_intra_op_parallelism_threads(args.threads)
    import keras
    keras.utils.set_random_seed(1)
    model = keras_model(keras)
    model.compile(optimizer=keras.optimizers.SGD(
        learning_rate=0.001 * BATCH / 64, momentum=0.9),
        loss='mse', metrics=['mae'], jit_compile=False)
    rng = np.random.default_rng(1)
    x = tf.constant(np.log1p(rng.poisson(2.0, (BATCH, CUBE, CUBE, CUBE, 4)))
                    .astype(np.float32))
    y = tf.constant(rng.uniform(-1, 1, (BATCH, 4)).astype(np.float32))

    def step(_):
        return float(model.train_on_batch(x, y, return_dict=True)['loss'])
    return timed(step, args.warmup, args.steps), 'NDHWC'


def timed(step, warmup, steps):
    '''(wall seconds, process CPU seconds) of each of *steps* calls of
    ``step(n)`` after *warmup* untimed ones (each step returns a Python
    float: its work is done). CPU seconds are those of all the process's
    threads: on a shared machine they move less than the wall time.'''
    for n in range(warmup):
        step(n)
    times = []
    for n in range(steps):
        start, cpu = time.perf_counter(), time.process_time()
        step(warmup + n)
        times.append((time.perf_counter() - start,
                      time.process_time() - cpu))
    return times


def run_child(impl, args):
    '''One run of *impl* in a fresh interpreter: (median s, step times).'''
    cmd = [sys.executable, __file__, '--child', impl,
           '--threads', str(args.threads), '--warmup', str(args.warmup),
           '--steps', str(args.steps)]
    if args.layout:
        cmd += ['--layout', args.layout]
    env = dict(os.environ, TF_CPP_MIN_LOG_LEVEL='2')
    if not args.glibc_defaults:
        # Both as the suite runs programs on CPU partitions.
        env.update(CPU_ALLOCATOR_ENV)
    out = subprocess.run(cmd, cwd=REPO, env=env, capture_output=True,
                         text=True)
    if out.returncode:
        sys.exit(f'{impl} run failed:\n{out.stderr[-3000:]}')
    result = json.loads(out.stdout.strip().splitlines()[-1])
    return result


def spaced(times):
    return ' '.join(f'{t:.2f}' for t in times)


def load():
    '''The 1-minute load average, or None where /proc has none.'''
    try:
        return float(pathlib.Path('/proc/loadavg').read_text().split()[0])
    except OSError:
        return None


def main(argv=None):
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument('--pairs', type=int, default=5)
    p.add_argument('--steps', type=int, default=3)
    p.add_argument('--warmup', type=int, default=2)
    p.add_argument('--threads', type=int, default=os.cpu_count())
    p.add_argument('--layout', choices=('channels_last', 'channels_first'))
    p.add_argument('--out', help='also write the report to this file')
    p.add_argument('--glibc-defaults', action='store_true',
                   help="run both without the suite's CPU malloc settings "
                   '(hpctestlib_ml.constants.CPU_ALLOCATOR_ENV)')
    p.add_argument('--child', choices=('torch', 'keras'),
                   help=argparse.SUPPRESS)
    args = p.parse_args(argv)
    if args.child:
        times, layout = (torch_steps if args.child == 'torch'
                         else keras_steps)(args)
        print(json.dumps({
            'median': statistics.median(t for t, _ in times),
            'cpu': statistics.median(c for _, c in times),
            'times': [t for t, _ in times], 'layout': layout}))
        return
    lines = []

    def say(text):
        print(text, flush=True)
        lines.append(text)
    say(f'cosmoflow_step: cube {CUBE}, batch {BATCH}, conv_size '
        f'{CONV_SIZE}, fp32, {args.threads} threads, {args.warmup} warm-up '
        f'+ {args.steps} timed steps a run, malloc '
        f'{"glibc defaults" if args.glibc_defaults else CPU_ALLOCATOR_ENV}, '
        f'{time.strftime("%Y-%m-%d %H:%M")}')
    ours, theirs, ratios, cpu_ratios = [], [], [], []
    for pair in range(1, args.pairs + 1):
        before = load()
        a = run_child('torch', args)
        b = run_child('keras', args)
        ours.append(a['median'])
        theirs.append(b['median'])
        ratios.append(a['median'] / b['median'])
        cpu_ratios.append(a['cpu'] / b['cpu'])
        say(f'pair {pair}: torch ({a["layout"]}) {a["median"]:.3f} s '
            f'[{spaced(a["times"])}] cpu {a["cpu"]:.2f} s | keras (NDHWC) '
            f'{b["median"]:.3f} s [{spaced(b["times"])}] cpu {b["cpu"]:.2f} s'
            f' | ratio {ratios[-1]:.3f} (cpu {cpu_ratios[-1]:.3f}) | load '
            f'{before} -> {load()}')
    say(f'median step: torch {statistics.median(ours):.3f} s, keras '
        f'{statistics.median(theirs):.3f} s; median ratio torch/keras '
        f'{statistics.median(ratios):.3f} (range {min(ratios):.3f}-'
        f'{max(ratios):.3f}); CPU-time ratio '
        f'{statistics.median(cpu_ratios):.3f} (range '
        f'{min(cpu_ratios):.3f}-{max(cpu_ratios):.3f})')
    if args.out:
        pathlib.Path(args.out).write_text('\n'.join(lines) + '\n')


if __name__ == '__main__':
    main()
