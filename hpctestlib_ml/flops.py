"""Analytic FLOPs per training sample, one function per model family.

A multiply-add counts as 2 FLOPs. Training costs 3x the forward pass
(forward + backward with twice its work); activation (gradient)
checkpointing recomputes the forward once more, 4x. The suite reports
MFU from the 3x figure (model FLOPs: recomputation is work the model does not
need, Chowdhery et al. 2022, "PaLM", appendix B) and HFU from the FLOPs the
hardware actually executes.
"""
import collections
import math

from hpctestlib_ml import program_tables

TRAINING_FACTOR = 3
RECOMPUTE_FACTOR = 4

#: Forward GFLOP per image-text pair of OpenCLIP models at their native
#: image size, from OpenCLIP's own profile (``docs/model_profile.csv``).
#: :func:`clip_forward_flops` reproduces each to 0.1% from the model's
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


def transformer_forward_flops(seq_len, width, layers, mlp_ratio=4.0):
    '''Forward FLOPs of a pre-norm transformer encoder over one sequence.

    Per token and layer: QKV and output projections 4 w^2 multiply-adds, the
    MLP 2 * mlp_ratio * w^2, and attention scores plus weighted values
    2 * n * w; norms, softmax and biases are left out (<1%).
    '''
    macs_per_token = (4 + 2 * mlp_ratio) * width**2 + 2 * seq_len * width
    return 2 * macs_per_token * seq_len * layers


def clip_forward_flops(model_cfg):
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
    image_tower = transformer_forward_flops(
        num_patches + 1, v_width, vision['layers'],
        vision.get('mlp_ratio', 4.0))
    text_tower = transformer_forward_flops(
        text['context_length'], t_width, text['layers'],
        text.get('mlp_ratio', 4.0))
    projections = 2 * (v_width + t_width) * embed_dim
    return patch_embed + image_tower + text_tower + projections


def training_flops(forward_flops, recompute=False):
    '''FLOPs of one training step per sample: 3x forward, 4x when recomputing.'''
    return forward_flops * (RECOMPUTE_FACTOR if recompute else TRAINING_FACTOR)


#: The mixture-of-experts MLPs of a Megatron model, as its arguments give
#: them: *layers*, how many of the model's layers have one
#: (``--moe-layer-freq``); *routed*, the experts each token goes to
#: (``--moe-router-topk``); *ffn_hidden*, each expert's MLP width
#: (``--moe-ffn-hidden-size``, else ``--ffn-hidden-size``);
#: *shared_ffn_hidden*, the shared experts' width
#: (``--moe-shared-expert-intermediate-size``, 0 for none).
MoE = collections.namedtuple(
    'MoE', 'layers routed ffn_hidden shared_ffn_hidden', defaults=(0,))


def megatron_padded_vocab(vocab, tp, divisible_by=128):
    '''The vocabulary Megatron-LM builds for a tokenizer of *vocab* tokens
    at tensor parallel size *tp*: padded to a multiple of
    ``--make-vocab-size-divisible-by`` x TP (Megatron-LM
    ``megatron/training/vocab_utils.py``, ``calculate_padded_vocab_size``;
    it prints "padded vocab (size: V) with N dummy tokens").'''
    multiple = divisible_by * tp
    return int(math.ceil(vocab / multiple) * multiple)


def megatron_gpt_flops_per_token(num_layers, hidden, seq_len, vocab,
                                 ffn_hidden=None, query_groups_ratio=1.0,
                                 swiglu=False, attention_width_ratio=1.0,
                                 moe=None):
    '''Training FLOPs per token of a GPT (forward + backward, no
    recomputation), Megatron-LM's analytic formula with the full s x s
    attention counted: 12 L h^2 (2 + s/h + ffn/h + V/(2 L h)), with V the
    padded vocabulary (GPT-2: 50257 -> 50304). For ffn = 4h this is
    Narayanan et al. 2021 (SC'21, eq. 3): 72 L h^2 (1 + s/(6h) + V/(12 L h))
    per token.

    The 12 is 3 x 2 x 2: each GEMM runs three times (forward, backward for
    the data and for the weight gradient), the blocks stack two GEMMs (QKV
    and output projection, the MLP's up and down projection), and a
    multiply-add is 2 FLOPs. The logits add 6 h V per token: computed once,
    whether the output layer is tied to the input embedding or not (the
    embedding itself is a lookup). Activation recomputation is not counted:
    these are model FLOPs (MFU), as Megatron-LM's own TFLOP/s/GPU.

    Grouped-query attention and a SwiGLU MLP (Llama 3), as Megatron-LM's
    ``num_floating_point_operations`` counts them: the key and value
    projections are h x (h g/n) each (*query_groups_ratio* g/n: query
    groups / attention heads; 1 is multi-head attention), and the gated MLP
    has three ffn x h matrices instead of two. In general, per token,
    12 L h^2 ((1 + g/n + s/h) p + k ffn/(2h) + V/(2 L h)), k = 3 with
    SwiGLU, else 2, p = kv_channels x n / h (*attention_width_ratio*, 1
    unless ``--kv-channels`` makes the heads wider or narrower than h/n);
    the formula above for g = n, k = 2, p = 1. With *moe* (:class:`MoE`),
    its layers' MLP term is k (routed x expert ffn + shared ffn)/(2h)
    instead, the others' stays dense. The attention scores and weighted
    values (the s/h term) have every query head attend over the whole
    sequence whatever the groups: GQA shares keys and values, not the work.

    This is ``num_floating_point_operations`` of Megatron-LM
    (``megatron/training/training.py``) as it stood from 2bfe9be
    (2024-04-03, ``--kv-channels``; SwiGLU since e116d81, 2024-03-25;
    shared experts since 1fa9464, 2024-09-11) to 8873b55^, with the split
    of dense and MoE layers that 8873b55 (2025-03-06) added. 8873b55 also
    began to count the s/h term once for the causal half (at CARAML's 800M
    shape 6.4% lower; at Llama 3 8B's, s = 8192, 11.1% lower), and upstream
    prints it so since. The suite counts it whole for every size, the
    convention of Megatron-LM before the halving (Narayanan et al. 2021,
    CARAML's pinned Megatron-LM and its FLOPs patch, and AMD's ROCm
    Megatron-LM of 2025: ``tests/data/megatron/public/``): compare TFLOP/s
    between tools only with the same convention.

    CARAML's patched Megatron prints TFLOPs with a 4x (recompute) factor
    instead of 3x, a third more than this.
    '''
    L, h, s = num_layers, hidden, seq_len
    ffn = ffn_hidden or 4 * h
    k = 3 if swiglu else 2
    moe_layers = moe.layers if moe else 0
    mlp_width = (ffn * (L - moe_layers) +
                 ((moe.ffn_hidden * moe.routed + moe.shared_ffn_hidden) *
                  moe_layers if moe else 0)) / L
    return 12 * L * h * h * ((1 + query_groups_ratio + s / h) *
                             attention_width_ratio +
                             k * mlp_width / (2 * h) + vocab / (2 * L * h))


def causal_lm_forward_flops(seq_len, width, layers, vocab):
    '''Forward FLOPs of one sequence through a GPT-2-style causal LM: the
    transformer's (:func:`transformer_forward_flops`, full s x s attention
    as PyTorch's attention kernels compute it) plus the LM head's 2 s h V.
    Embedding lookups are free.'''
    return (transformer_forward_flops(seq_len, width, layers) +
            2 * seq_len * width * vocab)


def causal_lm_training_flops(seq_len, width, layers, vocab):
    '''Training FLOPs of one sequence through a GPT-2-style causal LM:
    3 x :func:`causal_lm_forward_flops`.'''
    return training_flops(causal_lm_forward_flops(seq_len, width, layers,
                                                  vocab))


def bert_pretraining_forward_flops(seq_len, hidden, layers, vocab,
                                   intermediate, predictions):
    '''Forward FLOPs of one sequence through BERT pretraining as MLPerf's
    reference computes it: the encoder (:func:`transformer_forward_flops`),
    the masked-LM head at the *predictions* gathered positions only (a
    dense h x h transform and the h x V decoder), the pooler and the
    next-sentence head. BERT-Large at 512 tokens and 76 predictions:
    0.340 TFLOP (1.02 per trained sequence); a head at every position, as
    transformers' BertForPreTraining applies it, would add 28 GFLOP.'''
    encoder = transformer_forward_flops(seq_len, hidden, layers,
                                        intermediate / hidden)
    mlm_head = 2 * predictions * (hidden * hidden + hidden * vocab)
    pooler_and_nsp = 2 * (hidden * hidden + hidden * 2)
    return encoder + mlm_head + pooler_and_nsp


def cosmoflow_forward_flops(cube, conv_size=32, channels=4, kernel=3,
                            n_conv=5):
    '''Forward FLOPs of one CosmoFlow sample: its 3D convolutions
    (``same`` padding, each followed by a 2x pooling), > 99% of the work;
    the dense layers add < 0.1%. Reference size (4 x 128^3, conv_size 32,
    kernel 3): 68.9 GFLOP forward, 207 GFLOP per trained sample.'''
    total, width, side = 0, channels, cube
    for i in range(n_conv):
        out = conv_size * 2 ** i
        total += 2 * side ** 3 * width * out * kernel ** 3
        width, side = out, side // 2
    return total


def conv2d_flops(height, width, c_in, c_out, kernel=1, groups=1):
    '''FLOPs of a 2D convolution with an output of *height* x *width*
    (a transposed convolution: its input's size).'''
    return 2 * height * width * (c_in // groups) * c_out * kernel * kernel


def deeplabv3plus_forward_flops(arch, channels, height, width, classes):
    '''Forward FLOPs of one sample through DeepCAM's DeepLabv3+
    (``src/deepcam``; *arch* is its :class:`deepcam.architecture.
    Architecture`): every convolution, layer by layer at its resolution;
    batch norm, ReLU, pooling and the residual sums add < 1%. Reference
    (16 x 768 x 1152, 3 classes): 0.655 TFLOP forward per sample.'''
    def separable(h, w, c_in, c_out):
        return (conv2d_flops(h, w, c_in, c_in, 3, groups=c_in) +
                conv2d_flops(h, w, c_in, c_out))

    def half(n):
        return (n + 1) // 2

    h, w = half(height), half(width)                # strided stem conv
    s0, s1 = arch.stem
    total = conv2d_flops(h, w, channels, s0, 3) + conv2d_flops(h, w, s0, s1, 3)
    c, low = s1, None
    for out in arch.entry:                          # 2 units + strided conv
        total += separable(h, w, c, out) + separable(h, w, out, out)
        h, w = half(h), half(w)
        total += separable(h, w, out, out) + conv2d_flops(h, w, c, out)
        c = out
        low = low or (h, w, out)
    total += arch.middle_blocks * 3 * separable(h, w, c, c)
    e = arch.exit_block                             # units grow last, extra
    total += (separable(h, w, c, c) + separable(h, w, c, e) +
              separable(h, w, e, e) + conv2d_flops(h, w, c, e))
    c = e
    for out in arch.exit_convs:
        total += separable(h, w, c, out)
        c = out
    a = arch.aspp                                   # ASPP
    total += (conv2d_flops(h, w, c, a) +
              len(arch.aspp_rates) * conv2d_flops(h, w, c, a, 3) +
              conv2d_flops(1, 1, c, a) +
              conv2d_flops(h, w, a * (len(arch.aspp_rates) + 2), a))
    d = arch.decoder                                # decoder
    lh, lw, lc = low
    total += (conv2d_flops(h, w, a, d, 3) + conv2d_flops(2 * h, 2 * w, d, d, 3)
              + conv2d_flops(lh, lw, lc, arch.low_level))
    total += (conv2d_flops(lh, lw, d + arch.low_level, d, 3) +
              conv2d_flops(lh, lw, d, d, 3) + conv2d_flops(lh, lw, d, d))
    total += (conv2d_flops(lh, lw, d, d, 3) +
              conv2d_flops(2 * lh, 2 * lw, d, classes, 3))
    return total


#: Forward FLOPs of one run of the suite's AlphaFold2 (``src/alphafold2``:
#: OpenFold's initial-training model: embedders, templates, extra-MSA
#: stack, Evoformer, structure module, heads) on one crop, no recycling,
#: by size: measured once with torch.utils.flop_counter.FlopCounterMode
#: (torch 2.14.1; the reference size on the ``meta`` device, which counts
#: without computing). Matmuls and attention only; the same counter over
#: forward + backward gives 2.99x, so a trained run is taken as 3x.
#: Reference (256 residues, 124 clusters, 1024 extra sequences, 4
#: templates): 11.8 TFLOP a run.
ALPHAFOLD2_FORWARD_FLOPS = {
    'tiny': 8.448840832e9,          # 64 residues x 32, 64 extra, 2 templ.
    'reference': 11.810919240192e12,
}


def alphafold2_mean_recycles(size):
    '''Recycles per training sample of AlphaFold2 *size*: uniform over 0
    to the size's maximum (AlphaFold2 1.10), so on average half of it;
    each is a forward without gradients. The maximum is the program's own
    (``src/alphafold2/sizes.py``), not a copy of it.'''
    sizes = program_tables.load('alphafold2', 'sizes').SIZES
    return sizes[size].max_recycles / 2


def alphafold2_training_flops(size):
    '''Model FLOPs of one AlphaFold2 training sample of *size*: the
    trained run (3 forwards) and the mean number of recycling runs (one
    forward each); block recomputation not counted (MFU, not HFU).
    Reference: 4.5 x 11.8 = 53.1 TFLOP.'''
    forward = ALPHAFOLD2_FORWARD_FLOPS[size]
    return training_flops(forward) + alphafold2_mean_recycles(size) * forward


#: ResNet-50's stages: (bottleneck width, output channels, blocks, stride).
RESNET50_STAGES = ((64, 256, 3, 1), (128, 512, 4, 2), (256, 1024, 6, 2),
                   (512, 2048, 3, 2))


def resnet50_forward_flops(image_size=224, stride_on_3x3=True,
                           classes=1000):
    '''Forward FLOPs of one image through ResNet-50 (He et al. 2015): its
    convolutions and the classifier; batch norm, ReLU and pooling add < 1%.

    ``stride_on_3x3`` places each stage's downsampling on the 3x3
    convolution (ResNet v1.5, as MLPerf, torchvision and NVIDIA's
    implementations do) rather than on the first 1x1 (v1, as
    ``keras.applications.ResNet50``). At 224 px: v1.5 8.18 GFLOP forward,
    24.5 per trained image; v1 7.72 and 23.2. The often-quoted "4.1 GFLOPs"
    are v1.5's multiply-accumulates. v1.5 is FlopCounterMode's count of
    ``torchvision.models.resnet50`` exactly (the torchvision_resnet50
    workload; tests/test_torchvision_resnet50.py).'''
    def conv(side, c_in, c_out, kernel):
        return 2 * side * side * c_in * c_out * kernel * kernel

    side = image_size // 2                        # 7x7/2 stem
    total = conv(side, 3, 64, 7)
    side = (side + 1) // 2                        # 3x3/2 max pool
    c_in = 64
    for width, c_out, blocks, stride in RESNET50_STAGES:
        for block in range(blocks):
            s = stride if block == 0 else 1
            out_side = (side + s - 1) // s
            total += conv(side if stride_on_3x3 else out_side, c_in, width, 1)
            total += conv(out_side, width, width, 3)
            total += conv(out_side, width, c_out, 1)
            if block == 0:                        # projection shortcut
                total += conv(out_side, c_in, c_out, 1)
            c_in, side = c_out, out_side
    return total + 2 * c_in * classes
