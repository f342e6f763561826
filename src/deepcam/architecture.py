"""The DeepCAM network's shape as numbers, per size (no torch here, so the
suite's FLOPs formula reads the same table the program builds from).

The network is the DeepLabv3+ of the MLPerf HPC DeepCAM reference
(mlcommons/hpc ``deepcam/src/deepCam/architecture/deeplab_xception.py``,
built by its ``train.py`` with 16 input channels, 3 classes, output stride
16), after Chen et al. 2018, "Encoder-Decoder with Atrous Separable
Convolution for Semantic Image Segmentation" (arXiv:1802.02611):

- encoder: an aligned Xception: a stem of two 3x3 convolutions, three
  entry-flow blocks that each halve the resolution with a strided separable
  convolution (output stride 16), a middle flow of identical 3-unit
  residual blocks (16, as the paper's deeper Xception), an exit block and
  three separable convolutions at dilation 2. A separable convolution is a
  3x3 depthwise convolution straight into a 1x1 pointwise one, without bias
  and without batch norm between them (the reference's choice; the paper
  puts BN+ReLU there);
- ASPP: a 1x1 branch and dense 3x3 atrous branches at rates 6, 12, 18, and
  an image-pooling branch (1x1 convolution and a learnt per-channel scale
  and shift), concatenated and projected by a 1x1 convolution;
- decoder: two stride-2 transposed convolutions from stride 16 to stride 4,
  concatenated with the entry flow's first block projected to 48 channels,
  two 3x3 convolutions and a biased 1x1 one, then two more transposed
  convolutions to full resolution, the last of which gives the logits.

``reference`` is the benchmark's network: 56,454,720 parameters at 16
channels and 3 classes. ``tiny`` is the same architecture, narrower and
with 2 middle blocks, for CPUs.
"""
import dataclasses


@dataclasses.dataclass(frozen=True)
class Architecture:
    '''Widths and depths of the DeepLabv3+ network.'''

    #: Output channels of the two stem convolutions (the first strided).
    stem: tuple = (32, 64)
    #: Output channels of the entry-flow blocks, each of stride 2; the
    #: first one's output is the decoder's low-level input (stride 4).
    entry: tuple = (128, 256, 728)
    #: Residual blocks of the middle flow (at the last entry width).
    middle_blocks: int = 16
    #: Output channels of the exit block.
    exit_block: int = 1024
    #: Output channels of the dilated separable convolutions after it.
    exit_convs: tuple = (1536, 1536, 2048)
    #: Dilation of those convolutions (output stride 16: rate 2).
    exit_dilation: int = 2
    #: Channels of every ASPP branch and of its projection.
    aspp: int = 256
    #: Dilation rates of the 3x3 ASPP branches.
    aspp_rates: tuple = (6, 12, 18)
    #: Channels the low-level features are projected to.
    low_level: int = 48
    #: Channels of the decoder.
    decoder: int = 256


REFERENCE = Architecture()
TINY = Architecture(stem=(16, 32), entry=(32, 64, 128), middle_blocks=2,
                    exit_block=192, exit_convs=(256, 256, 320), aspp=64,
                    low_level=16, decoder=64)

#: Size -> (input channels, height, width, architecture). The reference
#: samples are 16 x 768 x 1152 climate fields; height and width must be
#: multiples of 16.
SIZES = {
    'tiny': (16, 128, 192, TINY),
    'reference': (16, 768, 1152, REFERENCE),
}

#: Background, tropical cyclone, atmospheric river.
CLASSES = 3
