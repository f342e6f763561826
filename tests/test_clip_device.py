"""OpenCLIP is told the device each rank chose (review finding 1).

OpenCLIP's own start-up takes ``cuda:LOCAL_RANK`` and calls
``torch.cuda.set_device`` with it (open_clip_train/distributed.py): where
Slurm binds one GPU to each task, local ranks 1-3 die with "invalid device
ordinal". src/clip_train passes the device it chose instead."""
import sys

import torch

from conftest import REPO

sys.path.insert(0, str(REPO / 'src'))


def test_a_gpu_rank_hands_its_device_to_openclip():
    from clip_train.__main__ import device_arguments
    argv = ['--model', 'ViT-L-14', '--device', 'cuda']
    assert device_arguments(argv, torch.device('cuda', 0)) == \
        argv + ['--device', 'cuda:0', '--no-set-device-rank']
    assert device_arguments(argv, torch.device('cpu')) == argv


def test_openclip_takes_those_arguments():
    from open_clip_train.params import parse_args
    args = parse_args(['--device', 'cuda', '--device', 'cuda:0',
                       '--no-set-device-rank'])
    assert args.device == 'cuda:0' and args.no_set_device_rank
