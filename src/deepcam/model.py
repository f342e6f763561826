"""DeepLabv3+ for DeepCAM, built from an :class:`~deepcam.architecture.
Architecture` (see that module for the design and its sources).

Written for this suite from the DeepLabv3+ paper and the MLPerf HPC
reference's structure; it reproduces the reference's parameter count
(56,454,720) and its layer order. One deliberate difference: the reference
tiles the image-pooling branch to a fixed 48 x 72 grid, which only fits
768 x 1152 inputs; here it is broadcast to the feature map's size, which
gives the same values at that size and lets smaller crops run.
"""
import torch
from torch import nn

from deepcam.architecture import CLASSES, SIZES


def batch_norm(channels):
    return nn.BatchNorm2d(channels)


class SeparableConv(nn.Sequential):
    '''3x3 depthwise then 1x1 pointwise convolution, no bias, nothing
    between them; "same" padding for the dilation.'''

    def __init__(self, c_in, c_out, stride=1, dilation=1):
        super().__init__(
            nn.Conv2d(c_in, c_in, 3, stride, padding=dilation,
                      dilation=dilation, groups=c_in, bias=False),
            nn.Conv2d(c_in, c_out, 1, bias=False))


class XceptionBlock(nn.Module):
    '''*units* separable convolutions, each followed by batch norm and a
    ReLU but the last (no ReLU); the channels change in the first unit
    (``grow_first``) or the last. ``stride`` 2 adds a strided separable
    convolution (no norm); ``extra`` a stride-1 one (the exit block). The
    skip is a 1x1 convolution with batch norm where the shape changes,
    else the identity; ``relu_out`` applies a ReLU after the sum.'''

    def __init__(self, c_in, c_out, units, stride=1, dilation=1,
                 grow_first=True, extra=False, relu_out=True):
        super().__init__()
        widths = ([c_in] + [c_out] * units if grow_first else
                  [c_in] * units + [c_out])
        layers = []
        for i in range(units):
            layers += [SeparableConv(widths[i], widths[i + 1],
                                     dilation=dilation),
                       batch_norm(widths[i + 1])]
            if i < units - 1:
                layers.append(nn.ReLU())
        if stride != 1:
            layers.append(SeparableConv(c_out, c_out, stride=stride))
        elif extra:
            layers.append(SeparableConv(c_out, c_out))
        self.body = nn.Sequential(*layers)
        self.skip = (nn.Sequential(nn.Conv2d(c_in, c_out, 1, stride,
                                             bias=False), batch_norm(c_out))
                     if c_in != c_out or stride != 1 else nn.Identity())
        self.relu_out = relu_out

    def forward(self, x):
        y = self.body(x) + self.skip(x)
        return torch.relu(y) if self.relu_out else y


def conv_bn_relu(c_in, c_out, kernel, stride=1, dilation=1):
    return [nn.Conv2d(c_in, c_out, kernel, stride,
                      padding=dilation * (kernel // 2), dilation=dilation,
                      bias=False),
            batch_norm(c_out), nn.ReLU()]


class Encoder(nn.Module):
    '''The aligned Xception at output stride 16; returns the features and
    the first entry block's output (stride 4) for the decoder.'''

    def __init__(self, channels, arch):
        super().__init__()
        s0, s1 = arch.stem
        self.stem = nn.Sequential(*conv_bn_relu(channels, s0, 3, stride=2),
                                  *conv_bn_relu(s0, s1, 3))
        widths = (s1, *arch.entry)
        self.entry = nn.ModuleList(
            XceptionBlock(widths[i], widths[i + 1], units=2, stride=2)
            for i in range(len(arch.entry)))
        width = arch.entry[-1]
        self.middle = nn.Sequential(*(XceptionBlock(width, width, units=3)
                                      for _ in range(arch.middle_blocks)))
        self.exit = XceptionBlock(width, arch.exit_block, units=2,
                                  grow_first=False, extra=True,
                                  relu_out=False)
        layers, width = [], arch.exit_block
        for out in arch.exit_convs:
            layers += [SeparableConv(width, out,
                                     dilation=arch.exit_dilation),
                       batch_norm(out), nn.ReLU()]
            width = out
        self.exit_convs = nn.Sequential(*layers)

    def forward(self, x):
        x = self.stem(x)
        low_level = None
        for block in self.entry:
            x = block(x)
            if low_level is None:
                # The reference's first block ends without a ReLU, and then
                # rectifies its output in place: both paths see it rectified.
                x = low_level = torch.relu(x)
        x = self.middle(x)
        return self.exit_convs(self.exit(x)), low_level


class ChannelAffine(nn.Module):
    '''A learnt per-channel scale and shift (the image-pooling branch's
    normalisation in the reference, which has no batch statistics for a
    1x1 map).'''

    def __init__(self, channels):
        super().__init__()
        self.weight = nn.Parameter(torch.ones(channels, 1, 1))
        self.bias = nn.Parameter(torch.zeros(channels, 1, 1))

    def forward(self, x):
        return x * self.weight + self.bias


class ASPP(nn.Module):
    '''Atrous spatial pyramid pooling: 1x1, three dense 3x3 atrous
    branches and image pooling, concatenated and projected.'''

    def __init__(self, c_in, arch):
        super().__init__()
        out = arch.aspp
        self.branches = nn.ModuleList(
            [nn.Sequential(*conv_bn_relu(c_in, out, 1))] +
            [nn.Sequential(*conv_bn_relu(c_in, out, 3, dilation=rate))
             for rate in arch.aspp_rates])
        self.image_pool = nn.Sequential(
            nn.AdaptiveAvgPool2d(1), nn.Conv2d(c_in, out, 1, bias=False),
            ChannelAffine(out), nn.ReLU())
        self.project = nn.Sequential(
            *conv_bn_relu(out * (len(self.branches) + 1), out, 1))

    def forward(self, x):
        pooled = self.image_pool(x).expand(-1, -1, *x.shape[-2:])
        return self.project(torch.cat(
            [branch(x) for branch in self.branches] + [pooled], dim=1))


def upsample(c_in, c_out, norm=True):
    '''A stride-2 transposed convolution that exactly doubles height and
    width (kernel 3, padding 1, output padding 1), no bias.'''
    conv = nn.ConvTranspose2d(c_in, c_out, 3, stride=2, padding=1,
                              output_padding=1, bias=False)
    return [conv, batch_norm(c_out), nn.ReLU()] if norm else [conv]


class Decoder(nn.Module):
    '''Transposed convolutions from stride 16 to 4, the low-level
    features, three convolutions, and transposed convolutions to the full
    resolution; the last gives the class logits.'''

    def __init__(self, c_low, classes, arch):
        super().__init__()
        d = arch.decoder
        self.low_level = nn.Sequential(*conv_bn_relu(c_low, arch.low_level,
                                                     1))
        self.up_to_low = nn.Sequential(*upsample(arch.aspp, d),
                                       *upsample(d, d))
        self.fuse = nn.Sequential(
            *conv_bn_relu(d + arch.low_level, d, 3), *conv_bn_relu(d, d, 3),
            nn.Conv2d(d, d, 1))                   # the one biased layer
        self.up_to_full = nn.Sequential(*upsample(d, d),
                                        *upsample(d, classes, norm=False))

    def forward(self, x, low_level):
        x = torch.cat([self.up_to_low(x), self.low_level(low_level)], dim=1)
        return self.up_to_full(self.fuse(x))


class DeepLabV3Plus(nn.Module):
    '''DeepLabv3+ with an aligned Xception encoder, output stride 16.'''

    def __init__(self, channels, classes, arch):
        super().__init__()
        self.encoder = Encoder(channels, arch)
        self.aspp = ASPP(arch.exit_convs[-1], arch)
        self.decoder = Decoder(arch.entry[0], classes, arch)
        for module in (self.encoder, self.aspp):
            # The reference's initialisation of the Xception and ASPP
            # convolutions; the rest keep PyTorch's defaults.
            for m in module.modules():
                if isinstance(m, nn.Conv2d):
                    nn.init.kaiming_normal_(m.weight)

    def forward(self, x):
        if x.shape[-1] % 16 or x.shape[-2] % 16:
            raise ValueError(f'DeepLabV3Plus needs height and width that are '
                             f'multiples of 16, got {tuple(x.shape[-2:])}')
        features, low_level = self.encoder(x)
        return self.decoder(self.aspp(features), low_level)


def build(size):
    '''The network of *size* (a key of :data:`~deepcam.architecture.SIZES`).'''
    channels, _, _, arch = SIZES[size]
    return DeepLabV3Plus(channels, CLASSES, arch)


def example_input(size, batch=1, device=None):
    '''A zero batch of *size*'s sample shape.'''
    channels, height, width, _ = SIZES[size]
    return torch.zeros(batch, channels, height, width, device=device)
