"""The CosmoFlow network as mlcommons/hpc's ``build_model`` defines it:
``n_conv`` x [Conv3D(conv_size * 2**i, kernel, padding 'same') +
LeakyReLU + MaxPool3D(2)], Flatten, Dense(fc1) + LeakyReLU + Dropout,
Dense(fc2) + LeakyReLU + Dropout, Dense(4, tanh) x 1.2. LeakyReLU keeps
Keras' default slope, 0.3."""
from torch import nn

KERAS_LEAKY_SLOPE = 0.3


class ScaleBy1p2(nn.Module):
    '''The reference's ``scale_1p2`` output layer.'''

    def forward(self, x):
        return 1.2 * x


def build_model(cube, channels=4, targets=4, conv_size=32, kernel=3,
                n_conv=5, fc1=128, fc2=64, dropout=0.5):
    layers, width, side = [], channels, cube
    for i in range(n_conv):
        out = conv_size * 2 ** i
        layers += [nn.Conv3d(width, out, kernel, padding='same'),
                   nn.LeakyReLU(KERAS_LEAKY_SLOPE), nn.MaxPool3d(2)]
        width, side = out, side // 2
    if side < 1:
        raise ValueError(f'a {cube}^3 cube is too small for {n_conv} '
                         f'poolings')
    layers += [nn.Flatten(),
               nn.Linear(width * side ** 3, fc1),
               nn.LeakyReLU(KERAS_LEAKY_SLOPE), nn.Dropout(dropout),
               nn.Linear(fc1, fc2), nn.LeakyReLU(KERAS_LEAKY_SLOPE),
               nn.Dropout(dropout),
               nn.Linear(fc2, targets), nn.Tanh(), ScaleBy1p2()]
    return nn.Sequential(*layers)

