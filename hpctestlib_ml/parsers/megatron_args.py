"""What a Megatron-LM log states of the model it trained, and the model
FLOPs per token that follow from it.

Where the facts come from, most trusted first:

1. Megatron's argument dump, which rank 0 prints after its own defaults and
   checks (``megatron/training/arguments.py``, ``_print_args``)::

       ------------------------ arguments ------------------------
         num_query_groups ................................ 24
         swiglu .......................................... True

2. a command line the log echoes (a job script's ``set -x`` or ``echo``, a
   launcher's ``MODEL_ARGS: ...`` line): ``--num-layers 56 ... --swiglu``;
   a flag's last readable value wins (``--seq-length ${SEQ}`` is not one);
3. Megatron-LM's defaults for what neither states (``arguments.py``): an
   MLP of 4h, or int(8h/3/64) x 64 with SwiGLU; heads of h/n channels;
   multi-head attention without ``--group-query-attention``; GeLU without
   ``--swiglu``; top-2 routing and every layer an MoE layer where
   ``--num-experts`` is given.

The padded vocabulary is Megatron's ``padded vocab (size: V) with N dummy
tokens (new size: P)`` line, else ``padded_vocab_size``, else a stated
``vocab_size`` padded as Megatron pads it
(:func:`~hpctestlib_ml.flops.megatron_padded_vocab`); a tokenizer file's
size is not in the log, and then there is no FLOPs figure: the logits are
up to a third of a small model's work. Nothing missing is guessed: the
figure is None and :func:`model_flops` says which facts the log lacks.
Standard library only.
"""
import dataclasses
import math
import re

from hpctestlib_ml import flops

#: Integer arguments the FLOPs read, by Megatron's names (its flags are
#: these with dashes: ``--num-query-groups``).
INTEGERS = ('num_layers', 'hidden_size', 'num_attention_heads', 'seq_length',
            'ffn_hidden_size', 'kv_channels', 'num_query_groups',
            'padded_vocab_size', 'vocab_size', 'make_vocab_size_divisible_by',
            'tensor_model_parallel_size', 'num_experts', 'moe_router_topk',
            'moe_ffn_hidden_size', 'moe_shared_expert_intermediate_size',
            'world_size')

#: Switches (``store_true`` flags; the dump prints True or False).
SWITCHES = ('group_query_attention', 'swiglu',
            'untie_embeddings_and_output_weights', 'multi_latent_attention')

#: Arguments read as text: ``--moe-layer-freq`` is an int or a pattern.
TEXTS = ('moe_layer_freq',)

#: A line of the argument dump (labels taken off before).
_DUMPED = re.compile(r'^[^\S\n]*(\w+) \.{3,} (.*?)[^\S\n]*$', re.MULTILINE)
#: A flag and the token after it, where that is not another flag; the flag
#: starts a word and ends one ("[--hidden-size HIDDEN_SIZE]" of argparse's
#: usage is neither).
_FLAG = re.compile(r'(?<![^\s\'"])--([a-z][a-z0-9-]*)(?=[\s\'"=]|$)'
                   r'(?:[=]|[^\S\n]+)?((?!-)[^\s\'"\\]+)?', re.MULTILINE)
_PADDED_VOCAB = re.compile(r'padded vocab \(size: (\d+)\) with \d+ dummy '
                           r'tokens \(new size: (\d+)\)')


@dataclasses.dataclass
class Stated:
    '''The arguments a log states: ``values`` (name -> int, bool or str)
    and ``sources`` (name -> ``'arguments'`` or ``'command line'``).'''
    values: dict
    sources: dict

    def get(self, name, default=None):
        return self.values.get(name, default)


def _typed(name, text):
    '''*text* as argument *name*'s value: an int, a bool, a string; None
    where it is not one (``None``, ``${SEQ}``).'''
    text = text.strip()
    if name in INTEGERS:
        return int(text) if text.isdigit() else None
    if name in SWITCHES:
        return {'True': True, 'False': False}.get(text)
    return text if text not in ('', 'None') else None


def _from_dump(text):
    found = {}
    for name, value in _DUMPED.findall(text):
        if name in INTEGERS + SWITCHES + TEXTS:
            value = _typed(name, value)
            if value is not None:
                found[name] = value
    return found


def _from_command_line(text):
    found = {}
    for flag, value in _FLAG.findall(text):
        name = flag.replace('-', '_')
        if name in SWITCHES:
            found[name] = True
        elif name in INTEGERS + TEXTS and value:
            value = _typed(name, value)
            if value is not None:
                found[name] = value
    return found


def stated(text):
    '''The model arguments *text* (labels taken off) states: its argument
    dump's, then its command line's where the dump has none.'''
    dump, line = _from_dump(text), _from_command_line(text)
    values = {**line, **dump}
    sources = {name: 'arguments' if name in dump else 'command line'
               for name in values}
    padded = _PADDED_VOCAB.findall(text)
    if padded:
        values['padded_vocab_size'] = int(padded[-1][1])
        sources['padded_vocab_size'] = 'padded vocab line'
    return Stated(values, sources)


def _moe_layers(value, layers):
    '''How many of *layers* have an MoE MLP under ``--moe-layer-freq``
    *value* (an int N: every N-th from the first; a list of 0/1 as the dump
    prints it); None for a pattern this does not expand.'''
    if isinstance(value, int) or (value or '1').isdigit():
        every = int(value or 1)
        return math.ceil(layers / every) if every > 0 else None
    pattern = re.fullmatch(r'\[([01](?:,\s*[01])*)\]', value)
    if pattern:
        marks = [int(m) for m in re.findall(r'[01]', pattern.group(1))]
        return sum(marks) if len(marks) == layers else None
    return None


def _padded_vocab(args):
    '''(padded vocabulary, how it was found) or (None, None).'''
    if args.get('padded_vocab_size'):
        return args.get('padded_vocab_size'), None
    vocab = args.get('vocab_size')
    if not vocab:
        return None, None
    divisible = args.get('make_vocab_size_divisible_by', 128)
    tp = args.get('tensor_model_parallel_size', 1)
    padded = flops.megatron_padded_vocab(vocab, tp, divisible)
    return padded, f'vocab_size {vocab} padded to {divisible} x TP {tp}'


@dataclasses.dataclass
class ModelFlops:
    '''Model FLOPs per token of a Megatron log's model: ``per_token``
    (None where the log does not state enough) and ``formula``: which
    form was used and from what, or which facts are missing.'''
    per_token: float | None
    formula: str


#: How :attr:`ModelFlops.formula` names the places a fact came from.
_SOURCE_NAMES = {'arguments': 'arguments block',
                 'command line': 'command line',
                 'padded vocab line': '"padded vocab" line'}

#: The formula's name in :attr:`ModelFlops.formula`.
FORMULA = ('Megatron-LM num_floating_point_operations, s x s attention whole '
           '(flops.megatron_gpt_flops_per_token)')


def model_flops(text, seq_length=None):
    '''The model FLOPs per token (forward and backward, no recomputation)
    of the model *text* (labels taken off) states, with *seq_length* in
    place of the log's where given: a :class:`ModelFlops`.'''
    args = stated(text)
    if args.get('multi_latent_attention'):
        return ModelFlops(None, 'none: multi-latent attention, which '
                          'megatron_gpt_flops_per_token does not count')
    L, h = args.get('num_layers'), args.get('hidden_size')
    heads = args.get('num_attention_heads')
    seq = seq_length or args.get('seq_length')
    vocab, vocab_note = _padded_vocab(args)
    gqa = args.get('group_query_attention', False)
    needs = {'num_layers': L, 'hidden_size': h, 'seq_length': seq,
             'padded vocabulary (padded vocab line, padded_vocab_size or '
             'vocab_size)': vocab}
    if gqa or args.get('kv_channels'):
        needs['num_attention_heads'] = heads
    if gqa:
        needs['num_query_groups'] = args.get('num_query_groups')
    missing = [name for name, value in needs.items() if not value]
    if missing:
        return ModelFlops(None, 'none: the log does not state '
                          + ', '.join(missing))

    groups = args.get('num_query_groups') if gqa else heads
    group_ratio = groups / heads if gqa else 1.0
    width = (args.get('kv_channels') * heads / h
             if args.get('kv_channels') else 1.0)
    swiglu = args.get('swiglu', False)
    ffn = args.get('ffn_hidden_size')
    ffn_note = ''
    if not ffn:
        ffn = (int((4 * h * 2 / 3) / 64) * 64 if swiglu else 4 * h)
        ffn_note = " (not stated: Megatron's default)"
    moe, moe_note = None, ''
    if args.get('num_experts'):
        moe_layers = _moe_layers(args.get('moe_layer_freq'), L)
        if moe_layers is None:
            return ModelFlops(None, 'none: moe_layer_freq '
                              f'{args.get("moe_layer_freq")} is a layer '
                              'pattern this reader does not expand')
        moe = flops.MoE(
            moe_layers, args.get('moe_router_topk', 2),
            args.get('moe_ffn_hidden_size') or ffn,
            args.get('moe_shared_expert_intermediate_size') or 0)
        moe_note = (f', MoE top-{moe.routed} of {args.get("num_experts")} '
                    f'experts of ffn {moe.ffn_hidden}'
                    + (f' and shared ffn {moe.shared_ffn_hidden}'
                       if moe.shared_ffn_hidden else '')
                    + f' in {moe_layers} of {L} layers')
    per_token = flops.megatron_gpt_flops_per_token(
        L, h, seq, vocab, ffn_hidden=ffn, query_groups_ratio=group_ratio,
        swiglu=swiglu, attention_width_ratio=width, moe=moe)

    attention = (f'GQA {groups} query groups of {heads} heads' if gqa
                 else f'MHA{f" {heads} heads" if heads else ""}')
    if width != 1.0:
        attention += f', kv_channels {args.get("kv_channels")}'
    mlp = f'{"SwiGLU" if swiglu else "GeLU"} ffn {ffn}{ffn_note}'
    output = ('untied output layer'
              if args.get('untie_embeddings_and_output_weights')
              else 'output layer tied or not stated')
    used = ('num_layers', 'hidden_size', 'num_attention_heads',
            'seq_length', 'ffn_hidden_size', 'kv_channels',
            'group_query_attention', 'num_query_groups', 'swiglu',
            'padded_vocab_size', 'vocab_size', 'num_experts',
            'moe_router_topk', 'moe_ffn_hidden_size',
            'moe_shared_expert_intermediate_size', 'moe_layer_freq')
    sources = [source for source in _SOURCE_NAMES if source in
               {args.sources.get(name) for name in used}]
    return ModelFlops(per_token, (
        f'{FORMULA}: {attention}, {mlp}{moe_note}, {L} layers, hidden {h}, '
        f'sequence {seq}{" (given)" if seq_length else ""}, padded '
        f'vocabulary {vocab}{f" ({vocab_note})" if vocab_note else ""}, '
        f'{output} (the logits count once either way); read from the '
        f'log\'s {", ".join(_SOURCE_NAMES[s] for s in sources)}'))
