"""Runs MLPerf Training's reference LAMB and writes its trajectory as JSON:
    python reference_lamb.py REFDIR > reference_lamb.json
REFDIR: mlcommons/training aa344c7, retired_benchmarks/bert (its
lamb_optimizer_v1.py). The update is what optimization.create_optimizer
builds for ``--optimizer=lamb`` with the default flags: the gradients
clipped by tf.clip_by_global_norm(grads, clip_norm=1.0), then
LAMBOptimizer(weight_decay_rate=0.01, beta_1=0.9, beta_2=0.999,
epsilon=10**-6, exclude_from_weight_decay=["LayerNorm", "layer_norm",
"bias"]).apply_gradients. Variables carry BERT names (a kernel, a bias,
LayerNorm gamma and beta, the next-sentence output weights) plus a kernel
that starts at 0 (trust ratio 1); the gradients alternate between large
(global norm above 1: clipped) and small (not clipped) steps. Random
numbers from NumPy's default_rng(0); learning rate 0.05. TensorFlow 2.21,
CPU, float32."""
import json
import sys

import numpy as np
import tensorflow.compat.v1 as tf

SHAPES = {'bert/encoder/layer_0/attention/self/query/kernel': [6, 5],
          'bert/encoder/layer_0/attention/self/query/bias': [5],
          'bert/encoder/layer_0/output/LayerNorm/gamma': [5],
          'bert/encoder/layer_0/output/LayerNorm/beta': [5],
          'cls/seq_relationship/output_weights': [2, 5],
          'zero/kernel': [3]}
STEPS, LR = 5, 0.05


def inputs():
    '''Initial values and per-step gradients, float32.'''
    rng = np.random.default_rng(0)
    init = {n: rng.standard_normal(s).astype(np.float32)
            for n, s in SHAPES.items()}
    init['zero/kernel'][:] = 0
    grads = [{n: (rng.standard_normal(s) * (3.0 if k % 2 == 0 else 0.01))
              .astype(np.float32) for n, s in SHAPES.items()}
             for k in range(STEPS)]
    return init, grads


def run(init, grads):
    '''The variables after each reference step.'''
    import lamb_optimizer_v1
    tf.disable_eager_execution()
    names = list(SHAPES)
    variables = [tf.get_variable(n, initializer=init[n]) for n in names]
    fed = [tf.placeholder(tf.float32, SHAPES[n]) for n in names]
    optimizer = lamb_optimizer_v1.LAMBOptimizer(
        learning_rate=LR, weight_decay_rate=0.01, beta_1=0.9, beta_2=0.999,
        epsilon=10 ** -6.0,
        exclude_from_weight_decay=['LayerNorm', 'layer_norm', 'bias'])
    clipped, _ = tf.clip_by_global_norm(fed, clip_norm=1.0)
    train = optimizer.apply_gradients(
        zip(clipped, variables),
        global_step=tf.train.get_or_create_global_step())
    after = []
    with tf.Session() as session:
        session.run(tf.global_variables_initializer())
        for step in grads:
            session.run(train, {f: step[n] for f, n in zip(fed, names)})
            after.append(dict(zip(names, session.run(variables))))
    return after


def main(refdir):
    sys.path.insert(0, refdir)
    init, grads = inputs()
    after = run(init, grads)

    def lists(values):
        return {n: v.tolist() for n, v in values.items()}
    json.dump({'lr': LR, 'init': lists(init),
               'grads': [lists(g) for g in grads],
               'after': [lists(a) for a in after]}, sys.stdout, indent=1)


if __name__ == '__main__':
    main(sys.argv[1])
