"""CARAML's Megatron-LM run, as data: the ``pretrain_gpt.py`` arguments
beyond the model's shape, per size, its environment and its global batch.

Source: FZJ-JSC/CARAML at :data:`COMMIT`, ``llm_training/
llm_benchmark_nvidia_amd.yaml`` (JUBE), NVIDIA systems (JEDI, GH200,
WAIH100, H100, A100): the ``gptargs``, ``modelargs``, ``optimizerargs``,
``additionalargs`` and ``outputargs`` parameters and the ``CMD`` its
``preprocess`` step builds; CARAML pins Megatron-LM at
f7727433293427bef04858f67b2889fe9b177d88 (``setup_nvidia_llm.sh``).
``tests/test_caraml_args.py`` expands that YAML (a copy in
``tests/data/caraml``) and compares the suite's command with it.

The suite's command departs from CARAML's where a regression run must
(:data:`DEPARTURES`): a fixed number of iterations instead of a 30-minute
budget, every iteration logged, no evaluation, checkpoint or TensorBoard
output. None of these changes what an iteration computes.
"""

#: The CARAML commit read.
COMMIT = '59cba3e4f2c3f12c6dee3b85133122c731909852'

#: ``gptargs`` beyond the shape, batch, data and tokenizer.
TRAINING = ['--init-method-std', '0.0048', '--seed', '42',
            '--sequence-parallel', '--recompute-activations',
            '--recompute-granularity', 'selective']

#: ``optimizerargs`` (Adam, cosine schedule in samples, distributed
#: optimizer); ``128_953_125`` and ``216_320`` written without the
#: underscores.
OPTIMIZER = ['--optimizer', 'adam', '--adam-beta1', '0.9',
             '--adam-beta2', '0.999', '--adam-eps', '1e-8', '--lr', '1e-4',
             '--min-lr', '1e-5', '--lr-decay-style', 'cosine',
             '--lr-decay-samples', '128953125',
             '--lr-warmup-samples', '216320', '--clip-grad', '1.0',
             '--weight-decay', '1e-1', '--use-distributed-optimizer']

#: ``additionalargs`` of NVIDIA systems: fp16's dynamic loss scaler and
#: flash attention (its ``--position-embedding-type rope`` is in
#: :func:`hpctestlib_ml.registry.megatron.models.model_arguments`).
NVIDIA = ['--loss-scale-window', '500', '--hysteresis', '2',
          '--min-loss-scale', '1.0', '--initial-loss-scale', '4096',
          '--use-flash-attn']

#: The training precision per size (``modelargs``; 13B's other
#: ``modelargs``, ``--ffn-hidden-size 20480``, is in its shape).
PRECISION = {'800M': 'fp16', '13B': 'fp16', '175B': 'bf16'}

#: Gradient-accumulation steps per size (``gas``): the global batch of 13B
#: and 175B is data parallel x micro batch x gas.
GRADIENT_ACCUMULATION = {'13B': 64, '175B': 64}

#: 800M's global batch: the YAML's value; it lists 16 to 4096 as the sweep
#: (``-S global_batch_size=`` runs another).
GLOBAL_BATCH_800M = 32

#: The environment of CARAML's job (``preprocess``):
#: Megatron-LM asserts on tensor parallelism without it.
ENVIRONMENT = {'CUDA_DEVICE_MAX_CONNECTIONS': '1'}

#: CARAML's ``outputargs`` and the ``CMD`` tail as the suite runs them.
OUTPUT = ['--log-interval', '1', '--eval-iters', '0', '--split', '7,3,1',
          '--distributed-backend', 'nccl']

#: Where the suite's arguments differ from CARAML's, and why.
DEPARTURES = {
    '--train-samples': 'iterations x global batch, where CARAML gives '
                       '300,000,000 and stops after --exit-duration-in-mins '
                       '30: a fixed amount of work per run',
    '--exit-duration-in-mins': 'left out (the run ends by --train-samples)',
    '--log-interval': '1 instead of 5: each iteration timed, the first '
                      'left out as warm-up',
    '--eval-interval': 'left out: no evaluation (CARAML evaluates 15 '
                       'iterations every 2000, after the measured ones)',
    '--eval-iters': '0 instead of 15 (see --eval-interval)',
    '--save-interval': 'left out, with --save: no checkpoint',
    '--save': 'left out: no checkpoint',
    '--tensorboard-dir': 'left out, with the other --tensorboard and '
                         '--log-*-to-tensorboard options: no TensorBoard',
    '--tensorboard-queue-size': 'see --tensorboard-dir',
    '--log-timers-to-tensorboard': 'see --tensorboard-dir',
    '--log-batch-size-to-tensorboard': 'see --tensorboard-dir',
    '--log-validation-ppl-to-tensorboard': 'see --tensorboard-dir',
    '--log-throughput': "added: Megatron-LM's own TFLOP/s in the log "
                        '(information; the suite computes its own)',
}


def global_batch(size, micro_batch, data_parallel):
    '''CARAML's global batch for *size*, or None where CARAML has none.'''
    if size == '800M':
        return GLOBAL_BATCH_800M
    if size in GRADIENT_ACCUMULATION:
        return data_parallel * micro_batch * GRADIENT_ACCUMULATION[size]
    return None


def arguments(precision):
    '''CARAML's arguments beyond the model's shape, batch and data, at
    *precision* (``fp16``, ``bf16`` or ``fp32``: none).'''
    args = TRAINING + ([f'--{precision}'] if precision in ('fp16', 'bf16')
                       else [])
    return args + OPTIMIZER + NVIDIA
