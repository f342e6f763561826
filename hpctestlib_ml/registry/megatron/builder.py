"""The model Megatron-Core builds for a size of the Megatron workload, for
``hpcml model-info megatron``: its parameters and the FLOPs counted on
the meta device, beside the analytic ones (:mod:`.models`)."""
from hpctestlib_ml import model_info, program_tables
from hpctestlib_ml.registry.megatron.models import (
    MODELS, forward_flops_per_sequence, model_arguments, model_departures,
    padded_vocab)


def build_model_info(size, device):
    name = {'tiny': 'tiny', 'benchmark': '800M'}.get(size, size)
    if name not in MODELS:
        raise model_info.ModelInfoError(
            f'megatron: unknown size {size!r}: use tiny, benchmark or one '
            f'of {", ".join(MODELS)}')
    shape = MODELS[name]
    vocab = padded_vocab(shape['vocab'], shape['tp'])
    program_tables.importable()
    import torch
    from gpt_pretrain import cpu_patches, layer_spec, mcore_train
    # Always meta: RoPE's frequencies would not follow a move.
    device = 'meta'
    args = mcore_train.parse_args(
        model_arguments(shape) +
        ['--micro-batch-size', '1', '--global-batch-size', '1',
         '--train-iters', '1', '--mock-data',
         '--vocab-size', str(shape['vocab']),
         '--tensor-model-parallel-size', str(shape['tp'])])
    cpu_patches.apply()
    seq = shape['seq_length']
    # On any node the same layers, built and run on meta with no CUDA
    # (cpu_patches.device_free): a GPU node's unseeded CUDA RNG tracker
    # refused the attention's dropout there (Storage on an H100).
    with model_info.single_process_group(), cpu_patches.device_free():
        from megatron.core import parallel_state
        # The whole model: tensor parallel 1, with the vocabulary padded
        # for the size's TP, which is what all TP ranks together hold.
        parallel_state.initialize_model_parallel(1, 1)
        try:
            model = mcore_train.build_model(
                args, vocab, device=device,
                choice=layer_spec.choose(args, on_gpu=False))

            def inputs(dev):
                return (torch.zeros(1, seq, dtype=torch.long, device=dev),
                        torch.arange(seq, device=dev).unsqueeze(0),
                        torch.ones(1, 1, seq, seq, dtype=torch.bool,
                                   device=dev))

            llama = (f', {args.normalization}, '
                     f'{"SwiGLU" if args.swiglu else "GeLU"} MLP '
                     f'{args.ffn_hidden_size or 4 * args.hidden_size}, '
                     f'{args.num_query_groups} query groups, '
                     f'{"no " if not args.add_bias_linear else ""}biases, '
                     f'RoPE base {args.rotary_base}'
                     if args.normalization != 'LayerNorm' else '')
            head = args.hidden_size // args.num_attention_heads
            pairs = ', neighbouring pairs' if args.rotary_interleaved else ''
            rotary = (f' on {int(head * args.rotary_percent)} of {head} '
                      f'dimensions a head{pairs}'
                      if args.rotary_percent < 1 else '')
            tied = ('untied' if args.untie_embeddings_and_output_weights
                    else 'tied')
            return model_info.torch_info(
                'megatron', size, name, model, inputs,
                forward_flops_per_sequence(shape, vocab), device,
                f'Megatron-Core GPTModel, {shape["num_layers"]} layers, '
                f'hidden {shape["hidden_size"]}, {seq} tokens, vocabulary '
                f'{vocab} (padded for TP {shape["tp"]}), '
                f'{args.position_embedding_type} positions{rotary}{llama}, '
                f'output layer {tied}',
                departures=tuple(model_departures(shape, vocab)))
        finally:
            parallel_state.destroy_model_parallel()
