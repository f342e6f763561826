"""Entry point: ``python -m clip_train [--] <open_clip_train arguments>``."""
import sys

from clip_train import MODEL_CONFIGS


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

    from clip_train.cpu_ddp import allow_ddp_on_cpu

    open_clip.add_model_config(MODEL_CONFIGS)
    allow_ddp_on_cpu()

    # OpenCLIP returns -1 (and exits 0) when it refuses to run, e.g. when
    # the experiment name already exists: make that a failure.
    if open_clip_train_main(argv) == -1:
        sys.exit('clip_train: open_clip_train refused to run (see the message '
                 'above); nothing was trained')


if __name__ == '__main__':
    import fast_exit
    fast_exit.run(lambda: main(sys.argv[1:]))
