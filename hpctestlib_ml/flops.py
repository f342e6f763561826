"""Analytic FLOPs per training sample, one function per model family.

A multiply-add counts as 2 FLOPs. Training costs 3x the forward pass
(forward + backward with twice its work); activation (gradient)
checkpointing recomputes the forward once more, 4x. The suite reports
MFU from the 3x figure (model FLOPs: recomputation is work the model does not
need, Chowdhery et al. 2022, "PaLM", appendix B) and HFU from the FLOPs the
hardware actually executes.
"""

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


def megatron_gpt_flops_per_token(num_layers, hidden, seq_len, vocab,
                                 ffn_hidden=None):
    '''Training FLOPs per token of a GPT (forward + backward, no
    recomputation), Megatron-LM's analytic formula for full multi-head
    attention: 12 L h^2 (2 + s/h + ffn/h + V/(2 L h)), with V the padded
    vocabulary (GPT-2: 50257 -> 50304). For ffn = 4h this is Narayanan et al.
    2021 (SC'21, eq. 3): 72 L h^2 (1 + s/(6h) + V/(12 L h)) per token.

    CARAML's patched Megatron prints TFLOPs with a 4x (recompute) factor
    instead of 3x, a third more than this.
    '''
    L, h, s = num_layers, hidden, seq_len
    ffn = ffn_hidden or 4 * h
    return 12 * L * h * h * (2 + s / h + ffn / h + vocab / (2 * L * h))


def causal_lm_training_flops(seq_len, width, layers, vocab):
    '''Training FLOPs of one sequence through a GPT-2-style causal LM:
    3 x (the transformer's forward, :func:`transformer_forward_flops`, plus
    the LM head's 2 s h V). Embedding lookups are free.'''
    forward = (transformer_forward_flops(seq_len, width, layers) +
               2 * seq_len * width * vocab)
    return training_flops(forward)


def bert_pretraining_flops(seq_len, hidden, layers, vocab, intermediate):
    '''Training FLOPs of one sequence through BertForPreTraining: 3 x the
    forward of the encoder (:func:`transformer_forward_flops`) and of the
    masked-LM head, which transformers applies at every position (a dense
    h x h transform and the h x V decoder); pooler and NSP head are < 0.1%.
    BERT-Large at 512 tokens: 1.1 TFLOP (MLPerf's implementations, which
    decode only the <= 76 masked positions, do ~1.0).'''
    encoder = transformer_forward_flops(seq_len, hidden, layers,
                                        intermediate / hidden)
    mlm_head = 2 * seq_len * (hidden * hidden + hidden * vocab)
    return training_flops(encoder + mlm_head)


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


#: Forward FLOPs per sample of the DeepCAM network (segmentation-models-
#: pytorch 0.6.0 DeepLabV3Plus, in_channels 16, classes 3), by size:
#: measured once with torch.utils.flop_counter.FlopCounterMode over a
#: forward pass of one sample (torch 2.14.1). Forward only, times 3 for
#: training: FlopCounterMode over-counts the backward of depthwise
#: convolutions, which Xception and MobileNet are full of.
DEEPCAM_FORWARD_FLOPS = {
    'tiny': 1.159217152e9,       # 16 x 128 x 192, mobilenet_v2 encoder
    'reference': 0.419e12,       # 16 x 768 x 1152, tu-xception71 encoder
}


#: Forward FLOPs per crop of the suite's AlphaFold2 trunk (``src/alphafold2``:
#: input embedding, Evoformer, distogram head), by size: measured once with
#: torch.utils.flop_counter.FlopCounterMode over a forward pass of one crop
#: (torch 2.14.1; the reference size on the ``meta`` device, which counts
#: without computing). Matmuls and attention only; the same counter over
#: forward + backward gives 2.99x, so training is taken as 3x. Reference
#: (c_m 256, c_z 128, 48 blocks, 256 residues, 128 MSA clusters): 10.4 TFLOP
#: forward, 31.1 TFLOP per trained crop, before block recomputation.
ALPHAFOLD2_FORWARD_FLOPS = {
    'tiny': 5.571805184e9,          # c_m 128, c_z 64, 2 blocks, 64 x 32
    'reference': 10.375338131456e12,
}


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
    are v1.5's multiply-accumulates.'''
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
