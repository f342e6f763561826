"""The CosmoFlow network as mlcommons/hpc's ``build_model`` defines it:
``n_conv`` x [Conv3D(conv_size * 2**i, kernel, padding 'same') +
LeakyReLU + MaxPool3D(2)], Flatten, Dense(fc1) + LeakyReLU + Dropout,
Dense(fc2) + LeakyReLU + Dropout, Dense(4, tanh) x 1.2. LeakyReLU keeps
Keras' default slope, 0.3.

Each convolution's block pools before its activation: LeakyReLU (slope
0.3 > 0) is strictly increasing, so the largest of a 2x2x2 window is the
same element before and after it, and MaxPool(LeakyReLU(x)) equals
LeakyReLU(MaxPool(x)) exactly, gradients included (both route the
window's gradient to that element, times LeakyReLU's slope there). The
activation then runs on an eighth of the values (the first block's
output is 4 x 32 x 128^3 floats, 1 GiB at batch 4). The activations work
in place: the tensors they overwrite (pooling and Dense outputs) are not
what the layers' gradients read (pooling keeps its indices, Dense its
input), and LeakyReLU's gradient reads its output's sign, which is its
input's. The layer indices of the Sequential, and so the state_dict's
keys, are those of the reference's order (only modules without weights
swap places)."""
from torch import nn

KERAS_LEAKY_SLOPE = 0.3


class ScaleBy1p2(nn.Module):
    '''The reference's ``scale_1p2`` output layer.'''

    def forward(self, x):
        return 1.2 * x


def leaky_relu():
    '''Keras' LeakyReLU (slope 0.3), in place.'''
    return nn.LeakyReLU(KERAS_LEAKY_SLOPE, inplace=True)


def build_model(cube, channels=4, targets=4, conv_size=32, kernel=3,
                n_conv=5, fc1=128, fc2=64, dropout=0.5):
    layers, width, side = [], channels, cube
    for i in range(n_conv):
        out = conv_size * 2 ** i
        layers += [nn.Conv3d(width, out, kernel, padding='same'),
                   nn.MaxPool3d(2), leaky_relu()]
        width, side = out, side // 2
    if side < 1:
        raise ValueError(f'a {cube}^3 cube is too small for {n_conv} '
                         f'poolings')
    layers += [nn.Flatten(),
               nn.Linear(width * side ** 3, fc1),
               leaky_relu(), nn.Dropout(dropout),
               nn.Linear(fc1, fc2), leaky_relu(),
               nn.Dropout(dropout),
               nn.Linear(fc2, targets), nn.Tanh(), ScaleBy1p2()]
    return nn.Sequential(*layers)

