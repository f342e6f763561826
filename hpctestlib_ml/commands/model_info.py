"""``hpcml model-info WORKLOAD``: parameters, analytic and measured forward
FLOPs of the model a workload's program builds (offline), and with
``--memory`` the per-device memory estimate."""
import json
import sys

from hpctestlib_ml.commands import counting

#: The command's line in ``hpcml --help``.
HELP = ('parameters, analytic and measured forward FLOPs of the model a '
        'workload builds (offline)')


def add_arguments(parser):
    from hpctestlib_ml import registry
    parser.add_argument('workload', choices=[
        name for name, declared in registry.registered().items()
        if declared.model_info])
    parser.add_argument('--size', default='benchmark',
                        help='tiny, benchmark (default), or a model name the '
                             'program takes (megatron: 800M, 13B, 175B, '
                             'llama3-8B, llama3-70B, gptj-6B; clip: an '
                             'OpenCLIP model; gpt2_finetune: gpt2)')
    parser.add_argument('--device', choices=('cpu', 'meta'),
                        help='where to build the model (default: meta for '
                             'the large ones); FLOPs are counted on meta')
    parser.add_argument('--memory', action='store_true',
                        help='also the per-device memory estimate: weights, '
                             'gradients, optimizer, activations (GiB); and '
                             'the state at 16 B/param (fp32 Adam, MB)')
    parser.add_argument('--layout', metavar='TPxPPxDP',
                        help='with --memory, megatron: parallel layout '
                             "(default: the size's TP and PP, DP 1)")
    parser.add_argument('--batch', type=counting(), metavar='B',
                        help='with --memory: (micro) batch per device')
    parser.add_argument('--precision', choices=('fp32', 'fp16', 'bf16'),
                        help='with --memory (megatron default: CARAML\'s, '
                             'fp16 for 800M/13B, bf16 for 175B, Llama 3 '
                             'and GPT-J)')
    parser.add_argument('--json', action='store_true',
                        help='one JSON object: params, '
                             'analytic_forward_flops, measured_forward_flops,'
                             ' ...')


def _layout(text):
    '''(TP, PP, DP) of ``--layout``, None where it is not given.'''
    from hpctestlib_ml.model_info import ModelInfoError
    if not text:
        return None
    try:
        layout = tuple(int(n) for n in text.lower().split('x'))
        assert len(layout) == 3 and min(layout) >= 1
    except (ValueError, AssertionError):
        raise ModelInfoError(f'--layout {text!r}: use TPxPPxDP, e.g. '
                             f'2x2x44') from None
    return layout


def run(args):
    '''Print the model's figures (text or ``--json``); exit status 2 on a
    workload, size or layout it cannot build, named on stderr.'''
    from hpctestlib_ml import memory_estimate, model_info, registry
    estimate = None
    declared = registry.get(args.workload)
    try:
        if args.memory:
            info, estimate = model_info.memory_info(
                declared, args.size, _layout(args.layout), args.batch,
                args.precision)
        else:
            info = model_info.model_info(declared, args.size, args.device)
    except model_info.ModelInfoError as err:
        print(f'hpcml model-info: error: {err}', file=sys.stderr)
        return 2
    if args.json:
        data = info.as_dict()
        if estimate is not None:
            data['memory'] = {
                **estimate.as_dict(),
                'fp32_adam_mb': memory_estimate.fp32_adam_megabytes(
                    info.params),
                'published_fp32_adam_mb': [
                    memory_estimate.fp32_adam_megabytes(count.params)
                    for count in info.counts_beside]}
        print(json.dumps(data))
    else:
        print(model_info.format_info(info))
        if estimate is not None:
            print(memory_estimate.format_estimate(estimate))
            print(memory_estimate.format_fp32_adam(info))
    return 0
