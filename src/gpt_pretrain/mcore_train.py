"""Pretrain Megatron-Core's GPTModel on mock data, taking Megatron-LM's
pretrain_gpt.py arguments and printing its iteration line.

Where Megatron-LM is not installed (this CPU, pip-only sites) the suite
still trains the real Megatron-Core model with tensor parallelism: the
parts of Megatron-LM's loop that matter for the measurement are here
(mock tokens, micro-batches, data-parallel gradient all-reduce, Adam), and
the log line has Megatron-LM's format (megatron/training/training.py,
``training_log``), so one parser reads both programs.

The model is the one Megatron-LM's ``pretrain_gpt.py`` builds from the same
arguments with its defaults (megatron/training/arguments.py): learned
absolute position embeddings, biases in every linear layer, LayerNorm, a
4h GeLU MLP, and the output layer tied to the word embeddings unless
``--untie-embeddings-and-output-weights`` (``share_embeddings_and_output_
weights = not untie``, as pretrain_gpt.py's model provider passes it). At
CARAML's 800M shape and the GPT-2 vocabulary padded to 50304 that is
912,953,344 parameters (``hpcml model-info megatron --size 800M``).

Not here (use Megatron-LM): pipeline parallelism, indexed datasets,
distributed optimizer, mixed-precision loss scaling.
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
          'micro_batch_size', 'global_batch_size', 'train_iters', 'lr',
          'tensor_model_parallel_size', 'pipeline_model_parallel_size',
          'log_interval', 'mock_data', 'data_path', 'vocab_size',
          'make_vocab_size_divisible_by', 'seed', 'bf16', 'fp16',
          'log_throughput', 'untie_embeddings_and_output_weights',
          'position_embedding_type')


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
    p.add_argument('--train-iters', type=int, required=True)
    p.add_argument('--lr', type=float, default=1e-4)
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
    args, ignored = p.parse_known_args(argv)
    args.ignored = ignored
    return args


def padded_vocab_size(vocab, divisible_by, tp):
    '''Megatron-LM's padding: a multiple of divisible_by x TP (50257 -> 50304).'''
    multiple = divisible_by * tp
    return int(math.ceil(vocab / multiple) * multiple)


def training_flops_per_token(args, vocab):
    '''Megatron-LM's analytic model FLOPs per token (forward + backward, no
    recomputation): 12 L h^2 (2 + s/h + ffn/h + V/(2 L h)) for a GPT with
    full multi-head attention; the same formula as hpctestlib_ml.flops.'''
    L, h, s = args.num_layers, args.hidden_size, args.seq_length
    ffn = args.ffn_hidden_size or 4 * h
    return 12 * L * h * h * (2 + s / h + ffn / h + vocab / (2 * L * h))


def fail(message):
    print(f'gpt_pretrain: error: {message}', file=sys.stderr, flush=True)
    sys.exit(2)


def init_distributed():
    backend = 'nccl' if torch.cuda.is_available() else 'gloo'
    if 'RANK' not in os.environ:
        os.environ.update(RANK='0', WORLD_SIZE='1', LOCAL_RANK='0',
                          MASTER_ADDR='127.0.0.1',
                          MASTER_PORT=os.environ.get('MASTER_PORT', '29511'))
    if torch.cuda.is_available():
        torch.cuda.set_device(int(os.environ.get('LOCAL_RANK', 0)))
    dist.init_process_group(backend=backend)
    return dist.get_rank(), dist.get_world_size()


def build_model(args, vocab, device=None):
    '''Megatron-Core's GPTModel as pretrain_gpt.py builds it from *args*
    (the local layer spec; Transformer Engine's has the same parameters).
    *device* ``meta``: shapes only, no initialisation (``hpcml
    model-info``); parallel state must be initialised either way.'''
    from megatron.core.models.gpt import GPTModel
    from megatron.core.models.gpt.gpt_layer_specs import \
        get_gpt_layer_local_spec
    from megatron.core.transformer.transformer_config import TransformerConfig

    dtype = (torch.bfloat16 if args.bf16 else
             torch.float16 if args.fp16 else torch.float32)
    meta = str(device) == 'meta'
    config = TransformerConfig(
        num_layers=args.num_layers, hidden_size=args.hidden_size,
        num_attention_heads=args.num_attention_heads,
        ffn_hidden_size=args.ffn_hidden_size,
        tensor_model_parallel_size=args.tensor_model_parallel_size,
        pipeline_model_parallel_size=1,
        use_cpu_initialization=not torch.cuda.is_available() or meta,
        perform_initialization=not meta,
        params_dtype=dtype, pipeline_dtype=dtype,
        bf16=args.bf16, fp16=args.fp16,
    )
    with torch.device('meta') if meta else contextlib.nullcontext():
        model = GPTModel(
            config=config, transformer_layer_spec=get_gpt_layer_local_spec(),
            vocab_size=vocab,
            max_sequence_length=(args.max_position_embeddings or
                                 args.seq_length),
            share_embeddings_and_output_weights=(
                not args.untie_embeddings_and_output_weights),
            position_embedding_type=args.position_embedding_type,
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


def mock_batch(args, vocab, generator, device):
    '''Random tokens, as Megatron-LM's --mock-data.'''
    b, s = args.micro_batch_size, args.seq_length
    tokens = torch.randint(0, vocab, (b, s + 1), generator=generator)
    tokens = tokens.to(device)
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


def iteration_line(iteration, args, consumed, elapsed_ms, tflops, lr, loss):
    '''Megatron-LM's training_log line (elapsed time in ms).'''
    now = datetime.datetime.now().strftime('%Y-%m-%d %H:%M:%S')
    line = (f' [{now}] iteration {iteration:8d}/{args.train_iters:8d} |'
            f' consumed samples: {consumed:12d} |'
            f' elapsed time per iteration (ms): {elapsed_ms:.1f} |')
    if tflops is not None:
        line += f' throughput per GPU (TFLOP/s/GPU): {tflops:.1f} |'
    line += (f' learning rate: {lr:.6E} |'
             f' global batch size: {args.global_batch_size:5d} |'
             f' lm loss: {loss:.6E} |'
             f' loss scale: 1.0 |'
             f' number of skipped iterations:   0 |'
             f' number of nan iterations: {int(not math.isfinite(loss)):3d} |')
    return line


def main(argv=None):
    args = parse_args(sys.argv[1:] if argv is None else argv)
    if args.pipeline_model_parallel_size != 1:
        fail('pipeline parallelism needs Megatron-LM itself; set the '
             "check's megatron_lm path, or -S pipeline_parallel=1")
    if args.data_path and not args.mock_data:
        fail('indexed datasets need Megatron-LM itself; this fallback '
             'trains on --mock-data')

    from gpt_pretrain import cpu_patches
    patched = cpu_patches.apply()
    from megatron.core import parallel_state

    rank, world = init_distributed()
    tp = args.tensor_model_parallel_size
    if world % tp:
        fail(f'world size {world} is not a multiple of tensor parallel '
             f'size {tp}')
    dp = world // tp
    per_step = args.micro_batch_size * dp
    if args.global_batch_size % per_step:
        fail(f'global batch {args.global_batch_size} is not a multiple of '
             f'micro batch {args.micro_batch_size} x data parallel {dp}')
    num_micro = args.global_batch_size // per_step

    parallel_state.initialize_model_parallel(
        tensor_model_parallel_size=tp, pipeline_model_parallel_size=1)
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
              f'pipeline-model-parallel size: 1', flush=True)
        print_arguments(args, world)
        print(f' > padded vocab (size: {args.vocab_size}) with '
              f'{vocab - args.vocab_size} dummy tokens (new size: {vocab})',
              flush=True)
    model = build_model(args, vocab)
    params = sum(p.numel() for p in model.parameters())
    last = rank == world - 1
    if rank == 0:
        print(f'> Megatron-Core GPTModel (no Megatron-LM): {world} ranks, '
              f'tensor parallel {tp}, data parallel {dp}, '
              f'{num_micro} micro-batches of {args.micro_batch_size}'
              f'{" (CPU patches applied)" if patched else ""}', flush=True)
        if args.ignored:
            print(f'> ignored Megatron-LM-only arguments: '
                  f'{" ".join(args.ignored)}', flush=True)
    print(f' > number of parameters on (tensor, pipeline) model parallel '
          f'rank ({parallel_state.get_tensor_model_parallel_rank()}, 0): '
          f'{params}', flush=True)

    device = torch.device('cuda' if torch.cuda.is_available() else 'cpu')
    optimizer = torch.optim.Adam(model.parameters(), lr=args.lr)
    dp_group = parallel_state.get_data_parallel_group()
    # The same tokens on the ranks of a tensor-parallel group, different
    # ones across data-parallel replicas.
    generator = torch.Generator().manual_seed(
        args.seed + parallel_state.get_data_parallel_rank())
    flops_per_token = training_flops_per_token(args, vocab)
    tokens_per_iter = args.global_batch_size * args.seq_length

    interval_start, interval_losses = time.time(), []
    for iteration in range(1, args.train_iters + 1):
        optimizer.zero_grad(set_to_none=True)
        losses = []
        for _ in range(num_micro):
            tokens, position_ids, mask, labels = mock_batch(
                args, vocab, generator, device)
            loss = model(tokens, position_ids, mask, labels=labels).mean()
            (loss / num_micro).backward()
            losses.append(loss.detach())
        if dp > 1:
            for p in model.parameters():
                if p.grad is not None:
                    dist.all_reduce(p.grad, group=dp_group)
                    p.grad.div_(dp)
        optimizer.step()

        loss = torch.stack(losses).mean()
        dist.all_reduce(loss, group=dp_group)
        interval_losses.append(loss.item() / dp)
        if iteration % args.log_interval == 0:
            elapsed = (time.time() - interval_start) / len(interval_losses)
            tflops = (flops_per_token * tokens_per_iter / elapsed / world /
                      1e12 if args.log_throughput else None)
            if last:
                print(iteration_line(
                    iteration, args, iteration * args.global_batch_size,
                    elapsed * 1000, tflops, args.lr,
                    sum(interval_losses) / len(interval_losses)), flush=True)
            interval_start, interval_losses = time.time(), []

    dist.barrier()
    if last:
        print('[after training is done] datetime: '
              f'{datetime.datetime.now():%Y-%m-%d %H:%M:%S}', flush=True)
    parallel_state.destroy_model_parallel()
    dist.destroy_process_group()
