"""``hpcml model-info``: the model a workload's program builds at a size.

For each workload and size it builds the model with the program's own code
(``src/<program>``, the builder the training run calls), on the ``meta``
device where it is large (shapes without memory or arithmetic), and reports:

- ``params``: its parameter count;
- ``analytic_forward_flops``: the forward FLOPs per sample that the suite's
  MFU uses (:mod:`hpctestlib_ml.flops` and the workload modules; MFU counts
  3x this per trained sample);
- ``measured_forward_flops``: the forward FLOPs of that same model on one
  sample, counted by ``torch.utils.flop_counter.FlopCounterMode`` (matrix
  multiplications, convolutions, attention; elementwise work is not
  counted), or for TensorFlow by TensorFlow's graph profiler.

Everything is offline: no weights or data are loaded from a hub.
"""
import contextlib
import contextvars
import dataclasses
import os
import pathlib
import socket
import sys
import tempfile

from hpctestlib_ml.paths import SRC_DIR


class ModelInfoError(Exception):
    '''A workload or size model-info cannot build; the message says why.'''


@dataclasses.dataclass
class ModelInfo:
    workload: str
    size: str
    model: str                   # the program's name of the model
    params: int
    analytic_forward_flops: float
    measured_forward_flops: float = None
    measured_with: str = None    # how measured_forward_flops was counted
    device: str = 'cpu'          # where the model was built
    description: str = ''

    @property
    def flops_ratio(self):
        '''measured / analytic forward FLOPs, or None.'''
        if not self.measured_forward_flops or not self.analytic_forward_flops:
            return None
        return self.measured_forward_flops / self.analytic_forward_flops

    def as_dict(self):
        return {**dataclasses.asdict(self), 'flops_ratio': self.flops_ratio}


def _programs_importable():
    if str(SRC_DIR) not in sys.path:
        sys.path.insert(0, str(SRC_DIR))


def count_params(model):
    '''Parameters of a torch module, each shared tensor once.'''
    return sum(p.numel() for p in model.parameters())


def measure_forward_flops(model, inputs):
    '''FLOPs of ``model(*inputs(device))`` by FlopCounterMode, counted on
    the ``meta`` device (the model is moved there).

    Why meta: there attention runs PyTorch's math kernels (bmm), which
    FlopCounterMode counts; on a CPU, scaled_dot_product_attention runs a
    fused flash kernel that it has no formula for, and without gradients
    ``nn.MultiheadAttention`` a fused inference kernel: both would drop the
    attention scores from the count. Gradients stay enabled, as in
    training; the model is in eval mode, so batch norm uses its running
    statistics on a batch of one.'''
    import torch
    from torch.utils.flop_counter import FlopCounterMode
    model = model.to('meta').eval()
    with torch.device('meta'):
        args = inputs('meta')
        with FlopCounterMode(display=False) as counter:
            model(*args)
    return counter.get_total_flops()


#: The optimizer each program trains with (src/<program>): its states
#: per parameter, :data:`hpctestlib_ml.memory_estimate.OPTIMIZER_STATES`.
#: Every PyTorch program keeps fp32 parameters (autocast mixed precision).
PROGRAM_OPTIMIZERS = {
    'clip': 'adamw',                # OpenCLIP's training: AdamW
    'cosmoflow': 'sgd_momentum',    # SGD, momentum 0.9
    'deeplabv3plus': 'adamw',       # deepcam/__main__.py: AdamW
    'bert': 'lamb',                 # bert_pretrain/lamb.py (MLPerf's)
    'alphafold2': 'adam',           # OpenFold's Adam
    'gpt2_finetune': 'adamw',       # HF Trainer's default, torch AdamW
    'resnet50': 'sgd_momentum',     # keras SGD, momentum 0.9
}

#: Inside :func:`_measuring_activations`: a dict that :func:`_torch_info`
#: puts the bytes one forward pass saves for the backward in ('bytes').
_ACTIVATIONS = contextvars.ContextVar('hpcml_activations', default=None)


@contextlib.contextmanager
def _measuring_activations():
    '''While a workload's builder runs: measure its model's saved tensors
    too (:func:`hpctestlib_ml.memory_estimate.saved_tensor_bytes`); yields
    the dict the figure lands in (no 'bytes' for TensorFlow).'''
    found = {}
    token = _ACTIVATIONS.set(found)
    try:
        yield found
    finally:
        _ACTIVATIONS.reset(token)


def _torch_info(workload, size, name, model, inputs, analytic, device,
                description=''):
    params = count_params(model)
    found = _ACTIVATIONS.get()
    if found is not None:
        from hpctestlib_ml import memory_estimate
        found['bytes'] = memory_estimate.saved_tensor_bytes(model, inputs)
    return ModelInfo(
        workload=workload, size=size, model=name, params=params,
        analytic_forward_flops=analytic,
        measured_forward_flops=measure_forward_flops(model, inputs),
        measured_with='FlopCounterMode (meta device)', device=device,
        description=description)


@contextlib.contextmanager
def _on(device):
    '''Build modules on *device* (``meta``: no memory, no initialisation).'''
    import torch
    with torch.device(device) if device == 'meta' else \
            contextlib.nullcontext():
        yield


# One function per workload: (size as the user wrote it, device or None)
# -> ModelInfo. Each resolves the size through its check's size table, as
# the check does, and builds the model with the program's own code.

def _clip(size, device):
    from hpctestlib_ml import clip
    name = _named_size(size, clip.ClipTraining.sizes, 'model')
    _programs_importable()
    import open_clip
    import torch
    from clip_train import MODEL_CONFIGS
    open_clip.add_model_config(MODEL_CONFIGS)
    config = open_clip.get_model_config(name)
    if config is None:
        raise ModelInfoError(f'clip: no OpenCLIP model {name!r}: use a name '
                             f'of open_clip.list_models() or CLIP-tiny')
    device = device or ('cpu' if name == 'CLIP-tiny' else 'meta')
    with _on(device):
        model = open_clip.create_model(name, device=device)
    image = config['vision_cfg']['image_size']
    image = image if isinstance(image, int) else image[0]
    context = config['text_cfg'].get('context_length', 77)

    def inputs(dev):
        return (torch.zeros(1, 3, image, image, device=dev),
                torch.zeros(1, context, dtype=torch.long, device=dev))

    return _torch_info('clip', size, name, model, inputs,
                       clip.clip_forward_flops(name), device,
                       f'OpenCLIP {name}, one {image} px image and '
                       f'{context} text tokens')


def _megatron(size, device):
    from hpctestlib_ml import megatron
    name = {'tiny': 'tiny', 'benchmark': '800M'}.get(size, size)
    if name not in megatron.MODELS:
        raise ModelInfoError(f'megatron: unknown size {size!r}: use tiny, '
                             f'benchmark or one of '
                             f'{", ".join(megatron.MODELS)}')
    shape = megatron.MODELS[name]
    vocab = megatron.padded_vocab(shape['vocab'], shape['tp'])
    _programs_importable()
    import torch
    from gpt_pretrain import cpu_patches, mcore_train
    # Always meta: RoPE's frequencies would not follow a move.
    device = 'meta'
    args = mcore_train.parse_args(
        megatron.model_arguments(shape) +
        ['--micro-batch-size', '1', '--global-batch-size', '1',
         '--train-iters', '1', '--mock-data',
         '--vocab-size', str(shape['vocab']),
         '--tensor-model-parallel-size', str(shape['tp'])])
    cpu_patches.apply()
    seq = shape['seq_length']
    with _single_process_group():
        from megatron.core import parallel_state
        # The whole model: tensor parallel 1, with the vocabulary padded
        # for the size's TP, which is what all TP ranks together hold.
        parallel_state.initialize_model_parallel(1, 1)
        try:
            model = mcore_train.build_model(args, vocab, device=device)

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
            tied = ('untied' if args.untie_embeddings_and_output_weights
                    else 'tied')
            return _torch_info(
                'megatron', size, name, model, inputs,
                megatron.forward_flops_per_sequence(shape, vocab), device,
                f'Megatron-Core GPTModel, {shape["num_layers"]} layers, '
                f'hidden {shape["hidden_size"]}, {seq} tokens, vocabulary '
                f'{vocab} (padded for TP {shape["tp"]}), '
                f'{args.position_embedding_type} positions{llama}, output '
                f'layer {tied}')
        finally:
            parallel_state.destroy_model_parallel()


@contextlib.contextmanager
def _single_process_group():
    '''A one-process gloo group (Megatron-Core's layers need one).'''
    import torch.distributed as dist
    if dist.is_initialized():
        yield
        return
    with socket.socket() as probe:
        probe.bind(('127.0.0.1', 0))
        port = probe.getsockname()[1]
    dist.init_process_group('gloo', init_method=f'tcp://127.0.0.1:{port}',
                            rank=0, world_size=1)
    try:
        yield
    finally:
        dist.destroy_process_group()


def _gpt2(size, device):
    from hpctestlib_ml import flops, gpt2_finetune
    name = _named_size(size, gpt2_finetune.Gpt2FineTuning.sizes, 'model')
    _programs_importable()
    import torch
    from gpt2_finetune import __main__ as program
    if name == 'tiny':
        device = device or 'cpu'
        with tempfile.TemporaryDirectory() as workdir:
            # The program's own tokenizer, trained on its generated corpus:
            # the vocabulary the tiny model really has.
            _, model, _ = program.tiny_model_and_data(pathlib.Path(workdir))
    else:
        device = device or 'meta'
        from transformers import AutoModelForCausalLM
        config = program.model_config(name)
        with _on(device):
            model = AutoModelForCausalLM.from_config(config)
    config = model.config
    block = program.block_size_of(config)
    shape = (config.n_layer, config.n_embd, block, config.vocab_size)

    def inputs(dev):
        return (torch.zeros(1, block, dtype=torch.long, device=dev),)

    return _torch_info(
        'gpt2_finetune', size, name, model, inputs,
        flops.causal_lm_forward_flops(block, config.n_embd, config.n_layer,
                                      config.vocab_size), device,
        f'GPT-2 {name}: {shape[0]} layers, width {shape[1]}, block '
        f'{shape[2]}, vocabulary {shape[3]}')


def _cosmoflow(size, device):
    from hpctestlib_ml import cosmoflow, flops
    name = _named_size(size, cosmoflow.CosmoFlowTraining.sizes, 'model')
    _programs_importable()
    import torch
    from cosmoflow.model import build_model
    cube, conv_size = cosmoflow.SIZES[name]
    device = device or 'cpu'
    with _on(device):
        model = build_model(cube, conv_size=conv_size)

    def inputs(dev):
        return (torch.zeros(1, 4, cube, cube, cube, device=dev),)

    return _torch_info('cosmoflow', size, name, model, inputs,
                       flops.cosmoflow_forward_flops(cube, conv_size), device,
                       f'CosmoFlow 3D CNN, 4 x {cube}^3 cube, conv_size '
                       f'{conv_size}')


def _deeplabv3plus(size, device):
    from hpctestlib_ml import deepcam
    name = _named_size(size, deepcam.DeepCamTraining.sizes, 'model')
    _programs_importable()
    from deepcam import model as program
    channels, height, width, _ = deepcam.architecture().SIZES[name]
    device = device or ('cpu' if name == 'tiny' else 'meta')
    with _on(device):
        model = program.build(name)
    return _torch_info(
        'deeplabv3plus', size, name, model,
        lambda dev: (program.example_input(name, device=dev),),
        deepcam.forward_flops(name), device,
        f'DeepLabv3+ (MLPerf HPC DeepCAM reference network), one '
        f'{channels} x {height} x {width} sample, 3 classes')


def _bert(size, device):
    from hpctestlib_ml import bert
    name = _named_size(size, bert.BertPretraining.sizes, 'model')
    _programs_importable()
    from bert_pretrain import data, model as program
    layers, hidden, _, _, vocab, seq, predictions = bert.MODELS[name]
    device = device or ('cpu' if name == 'tiny' else 'meta')
    with _on(device):
        model = program.build(name)
    batch = next(data.synthetic_batches(1, seq, predictions, vocab, 0))

    def inputs(dev):
        # No attention mask: an all-ones mask is the same computation, and
        # transformers reads a mask's values, which meta tensors have not.
        ids, segments, _, positions = program.model_inputs(batch)
        return ids.to(dev), segments.to(dev), None, positions.to(dev)

    return _torch_info(
        'bert', size, name, model, inputs, bert.forward_flops(name), device,
        f'BERT pretraining as MLPerf trains it: {layers} layers, hidden '
        f'{hidden}, vocabulary {vocab}, {seq} tokens, masked-LM head at '
        f'{predictions} positions')


def _alphafold2(size, device):
    from hpctestlib_ml import alphafold2, flops
    name = _named_size(size, alphafold2.AlphaFold2Training.sizes, 'model')
    _programs_importable()
    import torch
    from alphafold2 import proteins, sizes
    spec = sizes.SIZES[name]
    device = device or ('cpu' if name == 'tiny' else 'meta')
    with _on(device):
        model = proteins.build_model(spec)
    features, _ = next(proteins.synthetic_proteins(
        1, spec, torch.Generator().manual_seed(0)))

    def inputs(dev):
        # One run through the network: no recycling (the FLOPs per
        # sample add the recycles' forwards, flops.alphafold2_...).
        return tuple(t.to(dev) for t in features) + (0,)

    cfg = model.cfg
    return _torch_info('alphafold2', size, name, model, inputs,
                       flops.ALPHAFOLD2_FORWARD_FLOPS[name], device,
                       f'AlphaFold2 (OpenFold initial training), '
                       f'{cfg.blocks} Evoformer blocks, c_m {cfg.c_m}, '
                       f'c_z {cfg.c_z}, {cfg.extra_blocks} extra-MSA and '
                       f'{cfg.template_blocks} template blocks, structure '
                       f'module; {spec.crop} residues x {spec.msa_depth} '
                       f'clusters, {spec.extra_msa} extra sequences, '
                       f'{spec.templates} templates; FLOPs of one run, '
                       f'MFU adds a forward per recycle '
                       f'({spec.max_recycles / 2:g} on average)')


def _resnet50(size, device):
    '''Keras' parameter count; FLOPs from TensorFlow's graph profiler.'''
    from hpctestlib_ml import flops, resnet50
    sizes = resnet50.ResNet50Training.sizes
    if size not in sizes:
        raise ModelInfoError(f'resnet50: unknown size {size!r}: use '
                             f'{" or ".join(sizes)}')
    image = sizes[size]['image_size']
    _programs_importable()
    os.environ.setdefault('TF_CPP_MIN_LOG_LEVEL', '2')
    from resnet50_tf import __main__ as program
    model = program.build_model(image)
    measured = program.forward_flops(model, image)
    return ModelInfo(
        workload='resnet50', size=size, model=f'ResNet-50 v1 {image} px',
        params=int(model.count_params()),
        analytic_forward_flops=flops.resnet50_forward_flops(
            image, stride_on_3x3=False),
        measured_forward_flops=measured,
        measured_with='TensorFlow profiler (float_ops)' if measured else None,
        device='cpu',
        description=f'keras.applications.ResNet50(weights=None), one '
                    f'{image} x {image} image')


def _named_size(size, check_sizes, key):
    '''The program's model name for *size*: a size of the check (``tiny``,
    ``benchmark``) or a model name the program takes directly.'''
    if size in check_sizes:
        return check_sizes[size][key]
    return size


#: Workload -> its model-info function(size, device or None).
WORKLOADS = {
    'clip': _clip,
    'megatron': _megatron,
    'gpt2_finetune': _gpt2,
    'bert': _bert,
    'cosmoflow': _cosmoflow,
    'deeplabv3plus': _deeplabv3plus,
    'alphafold2': _alphafold2,
    'resnet50': _resnet50,
}


def model_info(workload, size='benchmark', device=None):
    '''The :class:`ModelInfo` of *workload* at *size*; *device* overrides
    where the model is built (default: ``meta`` for the large ones).'''
    try:
        build = WORKLOADS[workload]
    except KeyError:
        raise ModelInfoError(f'unknown workload {workload!r}: use one of '
                             f'{", ".join(sorted(WORKLOADS))}') from None
    try:
        return build(size, device)
    except KeyError as err:
        raise ModelInfoError(f'{workload}: unknown size {size!r} '
                             f'({err})') from None


def memory_info(workload, size='benchmark', layout=None, batch=None,
                precision=None):
    '''(ModelInfo, MemoryEstimate per device) of *workload* at *size*.
    Megatron: analytic (:func:`hpctestlib_ml.memory_estimate.
    megatron_estimate`), *layout* (tp, pp, dp) default the size's TP and
    PP and DP 1, with CARAML's options (on a GPU). Others: parameters x
    the program's optimizer's bytes, and the activations one forward pass
    at batch 1 saves for the backward, measured on the meta device, x
    *batch* (ResNet-50, TensorFlow: not estimated).'''
    from hpctestlib_ml import memory_estimate as me
    if workload == 'megatron':
        from hpctestlib_ml import megatron
        info = model_info(workload, size)
        shape = megatron.MODELS[info.model]
        tp, pp, dp = layout or (shape['tp'], shape['pp'], 1)
        batch = batch or shape['micro_batch']
        # The check's: fp32 at tiny (as on CPUs), else the size's.
        precision = precision or ('fp32' if info.model == 'tiny' else
                                  megatron.benchmark_precision(info.model))
        vocab = megatron.padded_vocab(shape['vocab'], tp)
        global_batch = megatron.default_global_batch(info.model, batch, dp)
        return info, megatron.estimate_memory(
            shape, vocab, tp, pp, dp, batch, global_batch, precision)
    optimizer = PROGRAM_OPTIMIZERS[workload]
    batch = batch or 1
    precision = precision or 'fp32'
    with _measuring_activations() as found:
        info = model_info(workload, size, 'meta'
                          if workload != 'resnet50' else None)
    measured = found.get('bytes')
    notes = [f'{optimizer}, fp32 parameters (autocast mixed precision '
             f'keeps them fp32 too, with no master copy)']
    if measured is None:
        notes.append('activations not estimated (TensorFlow: no saved-'
                     'tensor measure)')
    else:
        notes.append('activations: tensors one forward pass at batch 1 '
                     'saves for the backward (meta device, fp32, no '
                     'gradient checkpointing: an upper bound under mixed '
                     'precision or checkpointing), x the batch')
    return info, me.generic_estimate(info.params, optimizer, measured, batch,
                                     precision, assumptions=notes)


def format_info(info):
    '''Human-readable lines of *info*.'''
    lines = [f'{info.workload} {info.size} ({info.model}): '
             f'{info.description}',
             f'  parameters              {info.params:,}',
             f'  analytic forward FLOPs  {info.analytic_forward_flops:,.0f}'
             f' per sample (MFU counts 3x per trained sample)']
    if info.measured_forward_flops:
        lines.append(f'  measured forward FLOPs  '
                     f'{info.measured_forward_flops:,.0f} by '
                     f'{info.measured_with}, '
                     f'{100 * (info.flops_ratio - 1):+.2f}% vs analytic')
    else:
        lines.append('  measured forward FLOPs  not measured')
    return '\n'.join(lines)
