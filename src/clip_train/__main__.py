"""Entry point: ``python -m clip_train [--] <open_clip_train arguments>``.

Before OpenCLIP's ``main``: this rank's device is chosen as every program
of the suite chooses it (:func:`torch_device.select_device`) and handed to
OpenCLIP (``--device cuda:N --no-set-device-rank``), which would otherwise
take ``cuda:LOCAL_RANK`` ("invalid device ordinal" where Slurm binds one
GPU to each task); its math mode is OpenCLIP's own (TF32 and cuDNN
autotuning on GPUs, set here too so that the ``device`` record says it).
After it: the rank's ``memory`` record. OpenCLIP logs its own data time
(``Data (t)``).
"""
import os
import sys

from clip_train import MODEL_CONFIGS


def device_arguments(argv, device):
    '''*argv* with the device this rank uses: on GPUs ``--device cuda:N
    --no-set-device-rank`` (the last ``--device`` wins in argparse).'''
    if device.type != 'cuda':
        return list(argv)
    return [*argv, '--device', f'cuda:{device.index}', '--no-set-device-rank']


def main(argv):
    # torchrun's '--' between its options and the program's is dropped by
    # fast_exit.run (below) before main sees argv.
    try:
        import open_clip
        from open_clip_train.main import main as open_clip_train_main
    except ImportError as err:
        sys.exit(f'clip_train: cannot import OpenCLIP ({err}); install it with '
                 f"`pip install 'open_clip_torch[training]'` or run in the "
                 f'suite\'s PyTorch container')

    import torch_device
    from clip_train.cpu_ddp import allow_ddp_on_cpu

    device = torch_device.select_device_or_exit()
    torch_device.refuse_emulated_bf16(device, any(
        'bf16' in a or 'bfloat16' in a for a in argv))
    torch_device.set_math_mode(device)
    rank = int(os.environ.get('RANK', os.environ.get('SLURM_PROCID', 0)))
    torch_device.emit_device(device, rank)
    open_clip.add_model_config(MODEL_CONFIGS)
    allow_ddp_on_cpu()

    # OpenCLIP returns -1 (and exits 0) when it refuses to run, e.g. when
    # the experiment name already exists: make that a failure.
    if open_clip_train_main(device_arguments(argv, device)) == -1:
        sys.exit('clip_train: open_clip_train refused to run (see the message '
                 'above); nothing was trained')
    torch_device.emit_memory(device, rank)


if __name__ == '__main__':
    import fast_exit
    fast_exit.run(lambda: main(sys.argv[1:]))
