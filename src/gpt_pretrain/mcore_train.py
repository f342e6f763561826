"""Pretrain Megatron-Core's GPTModel on mock data, taking Megatron-LM's
pretrain_gpt.py arguments and printing its iteration line.

Where Megatron-LM is not installed (this CPU, pip-only sites) the suite
still trains the real Megatron-Core model with tensor, pipeline and data
parallelism, with Megatron-Core's own parts: its parallel state for TP x
PP x DP, its GPT model split into pipeline stages (pre-/post-process), its
pipeline schedules (``get_forward_backward_func``: no pipelining, or 1F1B
across the stages). The rest of Megatron-LM's loop that matters for the
measurement is here: mock tokens, micro-batches, the data-parallel
gradient all-reduce and the tied embeddings' all-reduce between the first
and last stage (Megatron's ``finalize_model_grads``), Adam; and the log
line has Megatron-LM's format (megatron/training/training.py,
``training_log``), so one parser reads both programs. Weights are drawn
per parameter of the unsplit model (:mod:`gpt_pretrain.layout_init`), so a
seed gives the same model in every layout.

The model is the one Megatron-LM's ``pretrain_gpt.py`` builds from the same
arguments with its defaults (megatron/training/arguments.py): learned
absolute position embeddings, biases in every linear layer, LayerNorm, a
4h GeLU MLP, and the output layer tied to the word embeddings unless
``--untie-embeddings-and-output-weights`` (``share_embeddings_and_output_
weights = not untie``, as pretrain_gpt.py's model provider passes it). At
CARAML's 800M shape and the GPT-2 vocabulary padded to 50304 that is
912,953,344 parameters (``hpcml model-info megatron --size 800M``).
Llama 3 takes Megatron-LM's --normalization RMSNorm --norm-epsilon --swiglu
--disable-bias-linear --group-query-attention --num-query-groups
--rotary-base (8B: 8,030,261,248 parameters with 128256 tokens), GPT-J
--rotary-percent --rotary-interleaved (its layer as Megatron-Core builds
it: hpctestlib_ml/workloads/megatron.py says where that departs).

Training runs as Megatron-LM's does with CARAML's arguments, with
Megatron-Core's own parts: the model in Megatron's ``Float16Module`` for
fp16/bf16, Megatron-Core's ``DistributedDataParallel`` (contiguous
gradient buffers, fp32 gradient reduction for bf16), its optimizer
(``get_megatron_optimizer``: fp32 main weights for fp16/bf16, a dynamic
loss scaler for fp16 with ``--initial-loss-scale``, ``--loss-scale-window``,
``--hysteresis``, ``--min-loss-scale``, the distributed optimizer with
``--use-distributed-optimizer``, gradient clipping, no weight decay on
biases and norms), its learning-rate schedule (warm-up and decay in samples
or iterations), ``finalize_model_grads`` (data-parallel reduction, tied
embeddings between pipeline stages, sequence-parallel norms), sequence
parallelism (``--sequence-parallel``, TP > 1) and selective recomputation
(``--recompute-activations``). Attention and norms:
:mod:`gpt_pretrain.layer_spec`.
What it cannot do as Megatron-LM would is printed as one line, ``>
departures from Megatron-LM: ...`` (the check logs it).

Not here (use Megatron-LM): indexed datasets, interleaved pipelines,
evaluation and checkpoints.
"""
import argparse
import contextlib
import datetime
import math
import os
import sys
import time

import torch
import torch.distributed as dist

#: Megatron-LM arguments this program reads.
_KNOWN = ('num_layers', 'hidden_size', 'num_attention_heads',
          'ffn_hidden_size', 'seq_length', 'max_position_embeddings',
          'micro_batch_size', 'global_batch_size', 'train_iters',
          'train_samples', 'lr', 'min_lr', 'lr_decay_style',
          'lr_decay_samples', 'lr_warmup_samples', 'lr_decay_iters',
          'lr_warmup_iters', 'optimizer', 'adam_beta1', 'adam_beta2',
          'adam_eps', 'weight_decay', 'clip_grad', 'loss_scale',
          'initial_loss_scale', 'min_loss_scale', 'loss_scale_window',
          'hysteresis', 'use_distributed_optimizer', 'sequence_parallel',
          'recompute_granularity', 'use_flash_attn',
          'tensor_model_parallel_size', 'pipeline_model_parallel_size',
          'log_interval', 'mock_data', 'data_path', 'vocab_size',
          'make_vocab_size_divisible_by', 'seed', 'bf16', 'fp16',
          'log_throughput', 'untie_embeddings_and_output_weights',
          'position_embedding_type', 'init_method_std', 'hidden_dropout',
          'attention_dropout')

#: Model-shape arguments beyond GPT's defaults (Llama 3, GPT-J).
_KNOWN += ('normalization', 'norm_epsilon', 'swiglu', 'add_bias_linear',
           'group_query_attention', 'num_query_groups', 'rotary_base',
           'rotary_percent', 'rotary_interleaved')


def parse_args(argv):
    p = argparse.ArgumentParser(
        description=__doc__, formatter_class=argparse.RawTextHelpFormatter)
    p.add_argument('--num-layers', type=int, required=True)
    p.add_argument('--hidden-size', type=int, required=True)
    p.add_argument('--num-attention-heads', type=int, required=True)
    p.add_argument('--ffn-hidden-size', type=int)
    p.add_argument('--seq-length', type=int, required=True)
    p.add_argument('--max-position-embeddings', type=int)
    p.add_argument('--micro-batch-size', type=int, required=True)
    p.add_argument('--global-batch-size', type=int, required=True)
    p.add_argument('--train-iters', type=int)
    p.add_argument('--train-samples', type=int)
    # Optimizer and schedule (Megatron-LM's defaults).
    p.add_argument('--optimizer', default='adam', choices=('adam',))
    p.add_argument('--lr', type=float, default=1e-4)
    p.add_argument('--min-lr', type=float, default=0.0)
    p.add_argument('--lr-decay-style', default='linear',
                   choices=('constant', 'linear', 'cosine',
                            'inverse-square-root'))
    p.add_argument('--lr-decay-samples', type=int)
    p.add_argument('--lr-warmup-samples', type=int, default=0)
    p.add_argument('--lr-decay-iters', type=int)
    p.add_argument('--lr-warmup-iters', type=int, default=0)
    p.add_argument('--adam-beta1', type=float, default=0.9)
    p.add_argument('--adam-beta2', type=float, default=0.999)
    p.add_argument('--adam-eps', type=float, default=1e-8)
    p.add_argument('--weight-decay', type=float, default=0.01)
    p.add_argument('--clip-grad', type=float, default=1.0)
    p.add_argument('--loss-scale', type=float,
                   help='a constant fp16 loss scale (default: dynamic)')
    p.add_argument('--initial-loss-scale', type=float, default=2.0 ** 32)
    p.add_argument('--min-loss-scale', type=float, default=1.0)
    p.add_argument('--loss-scale-window', type=float, default=1000)
    p.add_argument('--hysteresis', type=int, default=2)
    p.add_argument('--use-distributed-optimizer', action='store_true')
    p.add_argument('--accumulate-allreduce-grads-in-fp32',
                   action='store_true')
    # Memory and speed.
    p.add_argument('--sequence-parallel', action='store_true')
    p.add_argument('--recompute-activations', action='store_true',
                   help='selective recomputation (core attention)')
    p.add_argument('--recompute-granularity', choices=('selective',))
    p.add_argument('--use-flash-attn', action='store_true')
    p.add_argument('--tensor-model-parallel-size', type=int, default=1)
    p.add_argument('--pipeline-model-parallel-size', type=int, default=1)
    p.add_argument('--log-interval', type=int, default=1)
    p.add_argument('--mock-data', action='store_true')
    p.add_argument('--data-path', nargs='*')
    p.add_argument('--vocab-size', type=int, default=50257,
                   help='tokenizer vocabulary (default: GPT-2 BPE, 50257)')
    p.add_argument('--make-vocab-size-divisible-by', type=int, default=128)
    p.add_argument('--seed', type=int, default=1234)
    p.add_argument('--bf16', action='store_true')
    p.add_argument('--fp16', action='store_true')
    p.add_argument('--log-throughput', action='store_true')
    # Megatron-LM's model defaults (megatron/training/arguments.py).
    p.add_argument('--untie-embeddings-and-output-weights',
                   action='store_true',
                   help='a separate output layer (default: tied to the '
                        'word embeddings, as Megatron-LM)')
    p.add_argument('--position-embedding-type', default='learned_absolute',
                   choices=('learned_absolute', 'rope', 'none'))
    p.add_argument('--init-method-std', type=float, default=0.02)
    p.add_argument('--hidden-dropout', type=float, default=0.1)
    p.add_argument('--attention-dropout', type=float, default=0.1)
    # Llama 3's architecture, Megatron-LM's names and defaults.
    p.add_argument('--normalization', default='LayerNorm',
                   choices=('LayerNorm', 'RMSNorm'))
    p.add_argument('--norm-epsilon', type=float, default=1e-5)
    p.add_argument('--swiglu', action='store_true',
                   help='gated MLP with SiLU (default: GeLU)')
    p.add_argument('--disable-bias-linear', dest='add_bias_linear',
                   action='store_false')
    p.add_argument('--group-query-attention', action='store_true')
    p.add_argument('--num-query-groups', type=int, default=1,
                   help='with --group-query-attention')
    p.add_argument('--rotary-base', type=int, default=10000)
    # GPT-J's partial, interleaved rotary embeddings.
    p.add_argument('--rotary-percent', type=float, default=1.0,
                   help='share of each head\'s dimensions rotated')
    p.add_argument('--rotary-interleaved', action='store_true',
                   help='rotate neighbouring pairs of dimensions '
                        '(default: the first half against the second)')
    # Accepted, not printed: the fallback never fuses RoPE.
    p.add_argument('--no-rope-fusion', dest='apply_rope_fusion',
                   action='store_false',
                   help='Megatron-LM\'s; the fallback never fuses RoPE')
    args, ignored = p.parse_known_args(argv)
    args.ignored = ignored
    # Megatron-LM's validate_args: what these arguments imply.
    if args.recompute_activations:
        args.recompute_granularity = 'selective'
    if args.tensor_model_parallel_size == 1:
        args.sequence_parallel = False
    if args.bf16:
        args.accumulate_allreduce_grads_in_fp32 = True
    if (args.train_iters is None) == (args.train_samples is None):
        fail('give one of --train-iters and --train-samples')
    if args.train_samples is not None:
        if args.train_samples % args.global_batch_size:
            fail(f'--train-samples {args.train_samples} is not a multiple '
                 f'of the global batch {args.global_batch_size}')
        args.train_iters = args.train_samples // args.global_batch_size
    return args


def padded_vocab_size(vocab, divisible_by, tp):
    '''Megatron-LM's padding: a multiple of divisible_by x TP (50257 -> 50304).'''
    multiple = divisible_by * tp
    return int(math.ceil(vocab / multiple) * multiple)


def training_flops_per_token(args, vocab):
    '''Megatron-LM's analytic model FLOPs per token (forward + backward, no
    recomputation), the full s x s attention counted: 12 L h^2 (1 + g/n +
    s/h + k ffn/(2h) + V/(2 L h)), g/n query groups per head (1: multi-head
    attention), k 3 with SwiGLU, else 2; 12 L h^2 (2 + s/h + ffn/h +
    V/(2 L h)) for a GPT; the same formula as hpctestlib_ml.flops.'''
    L, h, s = args.num_layers, args.hidden_size, args.seq_length
    ffn = args.ffn_hidden_size or 4 * h
    groups = (args.num_query_groups / args.num_attention_heads
              if args.group_query_attention else 1.0)
    k = 3 if args.swiglu else 2
    return 12 * L * h * h * (1 + groups + s / h + k * ffn / (2 * h) +
                             vocab / (2 * L * h))


def fail(message):
    print(f'gpt_pretrain: error: {message}', file=sys.stderr, flush=True)
    sys.exit(2)


def init_distributed(bf16=False):
    backend = 'nccl' if torch.cuda.is_available() else 'gloo'
    if 'RANK' not in os.environ:
        os.environ.update(RANK='0', WORLD_SIZE='1', LOCAL_RANK='0',
                          MASTER_ADDR='127.0.0.1',
                          MASTER_PORT=os.environ.get('MASTER_PORT', '29511'))
    import torch_device
    device = torch_device.select_device_or_exit()
    torch_device.refuse_emulated_bf16(device, bf16)
    torch_device.init_process_group(backend)
    torch_device.emit_device(device, dist.get_rank())
    return dist.get_rank(), dist.get_world_size()


def build_model(args, vocab, device=None, choice=None):
    '''Megatron-Core's GPTModel as pretrain_gpt.py builds it from *args*
    with the layers of *choice* (:func:`gpt_pretrain.layer_spec.choose`,
    by default this node's; Transformer Engine's have the same parameters).
    *device* ``meta``: shapes only, no initialisation (``hpcml
    model-info``); parallel state must be initialised either way.'''
    from gpt_pretrain import layer_spec
    from megatron.core import parallel_state
    import torch.nn.functional as F
    from megatron.core.models.gpt import GPTModel
    from megatron.core.transformer.transformer_config import TransformerConfig

    dtype = (torch.bfloat16 if args.bf16 else
             torch.float16 if args.fp16 else torch.float32)
    meta = str(device) == 'meta'
    config = TransformerConfig(
        num_layers=args.num_layers, hidden_size=args.hidden_size,
        num_attention_heads=args.num_attention_heads,
        ffn_hidden_size=args.ffn_hidden_size,
        tensor_model_parallel_size=args.tensor_model_parallel_size,
        pipeline_model_parallel_size=args.pipeline_model_parallel_size,
        init_method_std=args.init_method_std,
        hidden_dropout=args.hidden_dropout,
        attention_dropout=args.attention_dropout,
        # Megatron-LM's defaults, or Llama 3's (core_transformer_config_
        # from_args: --swiglu is a gated MLP with SiLU; query groups only
        # with --group-query-attention).
        normalization=args.normalization,
        layernorm_epsilon=args.norm_epsilon,
        gated_linear_unit=args.swiglu,
        activation_func=F.silu if args.swiglu else F.gelu,
        add_bias_linear=args.add_bias_linear,
        num_query_groups=(args.num_query_groups
                          if args.group_query_attention else None),
        rotary_interleaved=args.rotary_interleaved,
        # gloo sends stage to stage one by one (no batched p2p on CPUs).
        batch_p2p_comm=torch.cuda.is_available(),
        use_cpu_initialization=not torch.cuda.is_available() or meta,
        perform_initialization=not meta,
        params_dtype=dtype, pipeline_dtype=dtype,
        bf16=args.bf16, fp16=args.fp16,
        sequence_parallel=args.sequence_parallel,
        recompute_granularity=args.recompute_granularity,
    )
    choice = choice or layer_spec.choose(args)
    with torch.device('meta') if meta else contextlib.nullcontext():
        model = GPTModel(
            config=config, transformer_layer_spec=choice.block(config),
            vocab_size=vocab,
            max_sequence_length=(args.max_position_embeddings or
                                 args.seq_length),
            share_embeddings_and_output_weights=(
                not args.untie_embeddings_and_output_weights),
            position_embedding_type=args.position_embedding_type,
            rotary_base=args.rotary_base,
            rotary_percent=args.rotary_percent,
            pre_process=parallel_state.is_pipeline_first_stage(),
            post_process=parallel_state.is_pipeline_last_stage(),
        )
    if meta:
        # RoPE's frequency table is not a parameter and is made on an
        # explicit device ('cpu' with CPU initialisation): move it too.
        for module in model.modules():
            if isinstance(getattr(module, 'inv_freq', None), torch.Tensor):
                module.inv_freq = module.inv_freq.to('meta')
    elif torch.cuda.is_available():
        model.cuda()
    return model


class MockSamples:
    '''Which samples this rank's micro-batches hold, in Megatron's order
    (its pretraining sampler): iteration *i* trains samples ``i x global
    batch`` onwards; a micro-batch step takes ``micro batch x data
    parallel`` of them, data-parallel rank *r* the *r*-th slice. Every
    pipeline stage and tensor-parallel rank counts alike, so all of a
    model replica's ranks see the same tokens.'''

    def __init__(self, args, dp, dp_rank, num_micro):
        self.args, self.dp, self.dp_rank = args, dp, dp_rank
        self.num_micro, self.calls = num_micro, 0

    def next_first_sample(self):
        iteration, micro = divmod(self.calls, self.num_micro)
        self.calls += 1
        mbs = self.args.micro_batch_size
        return (iteration * self.args.global_batch_size +
                micro * mbs * self.dp + self.dp_rank * mbs)


def to_device_without_wait(tensor, device):
    '''*tensor* on *device*; to a GPU from pinned host memory, queued
    behind the work already there rather than waiting for it.'''
    if torch.device(device).type != 'cuda':
        return tensor.to(device)
    return tensor.pin_memory().to(device, non_blocking=True)


def mock_batch(args, vocab, first_sample, device):
    '''Random tokens, as Megatron-LM's --mock-data: sample *n*'s tokens
    come from a generator seeded by the seed and *n*, so that a seed
    trains the same samples in every parallel layout.

    On a GPU the tokens go from pinned memory without a wait, as
    Megatron-LM's ``get_batch_on_this_tp_rank`` copies its loader's
    pinned batches (``.cuda(non_blocking=True)``): a copy from pageable
    memory makes the host wait for every kernel queued before it, which
    the data time then counted as data (33 % of the 800M's step on an
    H200, ``bench/results/gpuval-h200-2026-11-26``).'''
    b, s = args.micro_batch_size, args.seq_length
    tokens = torch.stack([
        torch.randint(0, vocab, (s + 1,), generator=torch.Generator()
                      .manual_seed((args.seed << 32) + first_sample + i))
        for i in range(b)])
    tokens = to_device_without_wait(tokens, device)
    position_ids = torch.arange(s, device=device).unsqueeze(0).expand(b, s)
    # True where attention is masked (Megatron's convention): the future.
    mask = torch.triu(torch.ones(s, s, dtype=torch.bool, device=device),
                      diagonal=1).view(1, 1, s, s)
    return tokens[:, :-1], position_ids, mask, tokens[:, 1:]


def print_arguments(args, world):
    '''Megatron-LM's argument dump, for the arguments read here.'''
    values = {name: getattr(args, name) for name in _KNOWN}
    values['ffn_hidden_size'] = args.ffn_hidden_size or 4 * args.hidden_size
    values['world_size'] = world
    print('------------------------ arguments ------------------------')
    for name in sorted(values):
        print(f'  {name} {"." * (48 - len(name))} {values[name]}')
    print('-------------------- end of arguments ---------------------',
          flush=True)


def iteration_line(iteration, args, consumed, elapsed_ms, tflops, lr, loss,
                   loss_scale=1.0, grad_norm=None, skipped=0):
    '''Megatron-LM's training_log line (elapsed time in ms); *loss* 0.0
    where every iteration of the interval was skipped, as Megatron-LM
    prints it.'''
    now = datetime.datetime.now().strftime('%Y-%m-%d %H:%M:%S')
    line = (f' [{now}] iteration {iteration:8d}/{args.train_iters:8d} |'
            f' consumed samples: {consumed:12d} |'
            f' elapsed time per iteration (ms): {elapsed_ms:.1f} |')
    if tflops is not None:
        line += f' throughput per GPU (TFLOP/s/GPU): {tflops:.1f} |'
    line += (f' learning rate: {lr:.6E} |'
             f' global batch size: {args.global_batch_size:5d} |'
             f' lm loss: {loss:.6E} |'
             f' loss scale: {loss_scale:.1f} |')
    if grad_norm is not None:
        line += f' grad norm: {grad_norm:.3f} |'
    line += (f' number of skipped iterations: {skipped:3d} |'
             f' number of nan iterations: {int(not math.isfinite(loss)):3d} |')
    return line


def layout(args, world):
    '''(data parallel size, micro-batches per iteration) of *world* ranks
    in TP x PP groups; a one-line error where they do not divide.'''
    tp, pp = args.tensor_model_parallel_size, args.pipeline_model_parallel_size
    if world % (tp * pp):
        fail(f'world size {world} is not a multiple of tensor parallel {tp} '
             f'x pipeline parallel {pp}')
    if args.num_layers % pp:
        fail(f'{args.num_layers} layers do not split into {pp} pipeline '
             f'stages')
    dp = world // (tp * pp)
    per_step = args.micro_batch_size * dp
    if args.global_batch_size % per_step:
        fail(f'global batch {args.global_batch_size} is not a multiple of '
             f'micro batch {args.micro_batch_size} x data parallel {dp}')
    return dp, args.global_batch_size // per_step


def forward_step(args, vocab, samples, device, clock):
    '''The schedules' ``forward_step_func``: one mock micro-batch, the
    next of *samples* (:class:`MockSamples`; every stage draws the same,
    each uses its part), the stage's forward, and
    on the last stage the mean token loss. *clock* ``['data']`` adds up
    the seconds spent making the batches (Megatron-LM's mock data is
    made on the host too, by its data loader).'''
    def step(data_iterator, model):
        start = time.perf_counter()
        tokens, position_ids, mask, labels = mock_batch(
            args, vocab, samples.next_first_sample(), device)
        clock['data'] += time.perf_counter() - start
        output = model(tokens, position_ids, mask, labels=labels)

        def loss_func(per_token):
            loss = per_token.float().mean()
            # The schedule divides the loss it is given by the number of
            # micro-batches, in place: report a copy.
            return loss, {'lm loss': loss.detach().clone()}
        return output, loss_func
    return step


def main(argv=None):
    args = parse_args(sys.argv[1:] if argv is None else argv)
    if args.data_path and not args.mock_data:
        fail('indexed datasets need Megatron-LM itself; this fallback '
             'trains on --mock-data')

    from gpt_pretrain import cpu_patches, layout_init
    patched = cpu_patches.apply()
    from gpt_pretrain import layer_spec, optim
    from megatron.core import parallel_state
    from megatron.core.distributed import finalize_model_grads
    from megatron.core.pipeline_parallel import get_forward_backward_func

    rank, world = init_distributed(args.bf16)
    tp, pp = args.tensor_model_parallel_size, args.pipeline_model_parallel_size
    dp, num_micro = layout(args, world)
    parallel_state.initialize_model_parallel(
        tensor_model_parallel_size=tp, pipeline_model_parallel_size=pp)
    torch.manual_seed(args.seed)
    if not patched:
        from megatron.core.tensor_parallel import \
            model_parallel_cuda_manual_seed
        model_parallel_cuda_manual_seed(args.seed)

    vocab = padded_vocab_size(args.vocab_size,
                              args.make_vocab_size_divisible_by, tp)
    if rank == 0:
        # Megatron-LM's own line (megatron/training/arguments.py).
        print(f'using world size: {world}, data-parallel size: {dp}, '
              f'context-parallel size: 1, tensor-model-parallel size: {tp}, '
              f'pipeline-model-parallel size: {pp}', flush=True)
        print_arguments(args, world)
        print(f' > padded vocab (size: {args.vocab_size}) with '
              f'{vocab - args.vocab_size} dummy tokens (new size: {vocab})',
              flush=True)
    choice = layer_spec.choose(args)
    model = build_model(args, vocab, choice=choice)
    layout_init.initialise(
        model, args.seed, args.init_method_std, args.num_layers,
        parallel_state.get_tensor_model_parallel_rank(), tp)
    params = sum(p.numel() for p in model.parameters())
    ddp_model = optim.wrap(model, args)
    optimizer = optim.optimizer(ddp_model, args)
    scheduler = optim.schedule(optimizer, args)
    model.config.finalize_model_grads_func = finalize_model_grads
    model.config.grad_scale_func = optimizer.scale_loss
    last = rank == world - 1
    if rank == 0:
        print(f'> Megatron-Core GPTModel (no Megatron-LM): {world} ranks, '
              f'tensor parallel {tp}, pipeline parallel {pp}, data parallel '
              f'{dp}, {num_micro} micro-batches of {args.micro_batch_size}'
              f'{" (CPU patches applied)" if patched else ""}', flush=True)
        print(f'> attention: {choice.description}; optimizer: '
              f'{type(optimizer).__name__}'
              f'{" (distributed)" if args.use_distributed_optimizer else ""}'
              f'; sequence parallel: {args.sequence_parallel}; '
              f'recomputation: {args.recompute_granularity}', flush=True)
        print(f'> departures from Megatron-LM: '
              f'{"; ".join(choice.departures) or "none"}', flush=True)
        if args.ignored:
            print(f'> ignored Megatron-LM-only arguments: '
                  f'{" ".join(args.ignored)}', flush=True)
    print(f' > number of parameters on (tensor, pipeline) model parallel '
          f'rank ({parallel_state.get_tensor_model_parallel_rank()}, '
          f'{parallel_state.get_pipeline_model_parallel_rank()}): '
          f'{params}', flush=True)

    import torch_device
    device = torch.device('cuda' if torch.cuda.is_available() else 'cpu')
    samples = MockSamples(args, dp, parallel_state.get_data_parallel_rank(),
                          num_micro)
    clock = {'data': 0.0}
    step_func = forward_step(args, vocab, samples, device, clock)
    forward_backward = get_forward_backward_func()
    flops_per_token = training_flops_per_token(args, vocab)
    tokens_per_iter = args.global_batch_size * args.seq_length

    # The logging interval's iterations: (loss, whether it updated).
    interval_start, interval = time.time(), []
    timed = {'data': 0.0, 'total': 0.0}
    for iteration in range(1, args.train_iters + 1):
        iteration_start, data_before = time.perf_counter(), clock['data']
        ddp_model.zero_grad_buffer()
        optimizer.zero_grad()
        losses = forward_backward(
            forward_step_func=step_func, data_iterator=None,
            model=[ddp_model], num_microbatches=num_micro,
            seq_length=args.seq_length,
            micro_batch_size=args.micro_batch_size)
        # Unscale, check for inf/NaN (fp16: skip the update and lower the
        # scale), clip, step (main weights, copied back to the model's).
        with cpu_patches.cuda_type_names():
            updated, grad_norm, _ = optimizer.step()
        if updated:
            scheduler.step(increment=args.global_batch_size)

        # The mean loss of the iteration, on the last stage, over data
        # parallel replicas; printed by the last rank (a last stage's).
        loss = torch.zeros(1, device=device)
        if parallel_state.is_pipeline_last_stage():
            loss = torch.stack([x['lm loss'] for x in losses]).mean()
            dist.all_reduce(loss, group=parallel_state.get_data_parallel_group())
            loss = loss / dp
        interval.append((float(loss), updated))  # waits for the step
        if iteration > 1:                        # steady state
            timed['data'] += clock['data'] - data_before
            timed['total'] += time.perf_counter() - iteration_start
        else:
            torch_device.end_warmup(device)
        if iteration % args.log_interval == 0:
            elapsed = (time.time() - interval_start) / len(interval)
            tflops = (flops_per_token * tokens_per_iter / elapsed / world /
                      1e12 if args.log_throughput else None)
            losses_kept = [loss for loss, kept in interval if kept]
            if last:
                print(iteration_line(
                    iteration, args, iteration * args.global_batch_size,
                    elapsed * 1000, tflops,
                    optimizer.param_groups[0]['lr'],
                    sum(losses_kept) / max(1, len(losses_kept)),
                    loss_scale=float(optimizer.get_loss_scale()),
                    grad_norm=grad_norm if updated else None,
                    skipped=len(interval) - len(losses_kept)), flush=True)
            interval_start, interval = time.time(), []

    import hpcml_log
    hpcml_log.emit_timing(rank, max(0, args.train_iters - 1), timed['data'],
                          timed['total'] - timed['data'])
    torch_device.emit_memory(device, rank)
    dist.barrier()
    if last:
        print('[after training is done] datetime: '
              f'{datetime.datetime.now():%Y-%m-%d %H:%M:%S}', flush=True)
    parallel_state.destroy_model_parallel()
    dist.destroy_process_group()
