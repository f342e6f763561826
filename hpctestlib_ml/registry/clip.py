"""CLIP training with OpenCLIP, and the MMoCLIP benchmark's rules.

The program is ``src/clip_train``: ``open_clip_train.main`` itself on
OpenCLIP's synthetic dataset. The ``benchmark`` size is the MMoCLIP
benchmark of the JUPITER Benchmark Suite (jubench-mmoclip, DESCRIPTION.md):
ViT-L-14, 3.2M samples, 1 epoch, ``--local-loss --gather-with-grad``,
optional ``--grad-checkpointing``, ``--log-every-n-steps 1``; its metric is
``total_time_secs``.
"""
import importlib.util
import json
import pathlib

from hpctestlib_ml import flops, model_info, program_tables, settings
from hpctestlib_ml.model_info import Published
from hpctestlib_ml.parsers import open_clip as parser
from hpctestlib_ml.paths import SRC_DIR
from hpctestlib_ml.registry import Headline, Workload

#: The MMoCLIP rules (jubench-mmoclip DESCRIPTION.md, "Execution").
MMOCLIP_RULES = {
    'model': 'ViT-L-14',
    'train_num_samples': '3200000',
    'epochs': '1',
    'dataset_type': 'synthetic',
    'local_loss': 'True',
    'gather_with_grad': 'True',
    'log_every_n_steps': '1',
}

#: OpenCLIP's ``--precision`` choices (open_clip_train/params.py).
PRECISIONS = ('amp', 'amp_bf16', 'amp_bfloat16', 'bf16', 'fp16', 'pure_bf16',
              'pure_fp16', 'fp32')

#: Forward GFLOP per image-text pair of OpenCLIP models at their native
#: image size, from OpenCLIP's own profile (``docs/model_profile.csv``).
#: :func:`config_forward_flops` reproduces each to 0.1% from the model's
#: config (``tests/test_flops.py``); the table lets the suite compute MFU
#: where OpenCLIP is not installed beside ReFrame.
OPENCLIP_FORWARD_GFLOPS = {
    'ViT-B-32': 14.78,
    'ViT-B-16': 41.09,
    'ViT-L-14': 175.33,
    'ViT-H-14': 381.68,
    'ViT-g-14': 581.15,
    'ViT-bigG-14': 1065.36,
}

_OPEN_CLIP_CONFIGS = SRC_DIR / 'clip_train' / 'model_configs'


def model_config(name):
    '''The OpenCLIP model config of *name* (suite configs first).'''
    local = _OPEN_CLIP_CONFIGS / f'{name}.json'
    if local.is_file():
        return json.loads(local.read_text())

    # Upstream configs ship inside open_clip; read the file, not the package
    # (importing torch here would cost every test seconds).
    spec = importlib.util.find_spec('open_clip')
    path = (pathlib.Path(spec.origin).parent / 'model_configs' /
            f'{name}.json' if spec else None)
    if path is None or not path.is_file():
        raise LookupError(f'no OpenCLIP model config {name!r} here (suite '
                          f'configs: {_OPEN_CLIP_CONFIGS}; open_clip '
                          f'{"installed" if spec else "not installed"})')
    return json.loads(path.read_text())


def config_forward_flops(model_cfg):
    '''Forward FLOPs of one image-text pair through an OpenCLIP ViT CLIP.

    *model_cfg* is an OpenCLIP model config (``open_clip/model_configs/*.json``).
    For ViT-L-14 this gives 175.3 GFLOP, OpenCLIP's own profile
    (``docs/model_profile.csv``: 175.33 GFLOPs for ViT-L-14 at 224 px).
    '''
    vision, text = model_cfg['vision_cfg'], model_cfg['text_cfg']
    patch = vision['patch_size']
    image_size = vision['image_size']
    num_patches = (image_size // patch) ** 2
    v_width = vision['width']
    t_width = text['width']
    embed_dim = model_cfg['embed_dim']

    patch_embed = 2 * 3 * patch**2 * v_width * num_patches
    image_tower = flops.transformer_forward_flops(
        num_patches + 1, v_width, vision['layers'],
        vision.get('mlp_ratio', 4.0))
    text_tower = flops.transformer_forward_flops(
        text['context_length'], t_width, text['layers'],
        text.get('mlp_ratio', 4.0))
    projections = 2 * (v_width + t_width) * embed_dim
    return patch_embed + image_tower + text_tower + projections


def forward_flops(model):
    '''Forward FLOPs per image-text pair of OpenCLIP model *model*.'''
    if model in OPENCLIP_FORWARD_GFLOPS:
        return OPENCLIP_FORWARD_GFLOPS[model] * 1e9
    return config_forward_flops(model_config(model))


def training_flops(model):
    '''Training FLOPs per image-text pair of OpenCLIP model *model*.'''
    return flops.training_flops(forward_flops(model))


def build_model_info(size, device):
    name = model_info.named_size(size, WORKLOAD.sizes, 'model')
    program_tables.importable()
    import open_clip
    import torch
    from clip_train import MODEL_CONFIGS
    open_clip.add_model_config(MODEL_CONFIGS)
    config = open_clip.get_model_config(name)
    if config is None:
        raise model_info.ModelInfoError(
            f'clip: no OpenCLIP model {name!r}: use a name of '
            f'open_clip.list_models() or CLIP-tiny')
    device = device or ('cpu' if name == 'CLIP-tiny' else 'meta')
    with model_info.built_on(device):
        model = open_clip.create_model(name, device=device)
    image = config['vision_cfg']['image_size']
    image = image if isinstance(image, int) else image[0]
    context = config['text_cfg'].get('context_length', 77)

    def inputs(dev):
        return (torch.zeros(1, 3, image, image, device=dev),
                torch.zeros(1, context, dtype=torch.long, device=dev))

    return model_info.torch_info(
        'clip', size, name, model, inputs, forward_flops(name), device,
        f'OpenCLIP {name}, one {image} px image and {context} text tokens')


#: The count (and FLOPs) published for the model at benchmark size:
#: OpenCLIP's profile of ViT-L-14 (427.62 M parameters), its forward FLOPs
#: those of :data:`OPENCLIP_FORWARD_GFLOPS`.
PUBLISHED = {'benchmark': (Published(
    427_616_513, "OpenCLIP's ViT-L-14 (image and text towers), its model "
    "profile's 427.62 M",
    'https://github.com/mlfoundations/open_clip/blob/main/docs/'
    'model_profile.csv',
    flops=OPENCLIP_FORWARD_GFLOPS[MMOCLIP_RULES['model']] * 1e9),)}


WORKLOAD = Workload(
    name='clip', check='MMoCLIP', program='clip_train', parser=parser,
    headline=Headline('throughput_avg'),
    sizes={
        'tiny': {'model': 'CLIP-tiny', 'batch_size': 32,
                 'grad_checkpointing': False, 'time_limit': '15m'},
        'benchmark': {'model': MMOCLIP_RULES['model'], 'batch_size': 512,
                      'train_num_samples': 3_200_000,
                      'grad_checkpointing': True, 'precision': 'amp'},
        # The benchmark's run for `steps` steps: not its 3.2M samples.
        'short': {'train_num_samples': None},
    },
    throughput_metric='throughput_avg',
    whole_run_metrics=('total_time_secs', 'done_percent_last'),
    model_info=build_model_info,
    published=PUBLISHED,
    optimizer='adamw', data="OpenCLIP's synthetic dataset",
    names_note='MMoCLIP is the JUPITER Benchmark Suite\'s name of the '
               'benchmark; clip_train starts OpenCLIP\'s open_clip_train',
    packages=('open-clip-torch[training]',), precisions=PRECISIONS,
    variables=settings.variables('clip', [
        ('model', 'str', None, "OpenCLIP model name; default: the size's",
         {'allowed': 'an OpenCLIP model name'}),
        ('train_num_samples', 'int', None, "samples in the epoch; default: "
         "the benchmark's 3.2M, or steps x global batch", {'minimum': 1}),
        ('grad_checkpointing', 'bool', None, "recompute activations in the "
         "backward pass; default: the size's"),
        ('workers', 'int', None, "data-loader workers per rank; default: "
         "the rank's CPUs, 0 on CPUs", {'minimum': 0}),
    ]))
