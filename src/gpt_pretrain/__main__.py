"""python -m gpt_pretrain [--megatron-lm DIR] [Megatron-LM arguments...]

With ``--megatron-lm DIR`` (or ``$MEGATRON_LM``) naming a Megatron-LM
checkout, runs its ``pretrain_gpt.py`` with the arguments unchanged; else
trains Megatron-Core's GPTModel (:mod:`gpt_pretrain.mcore_train`).
"""
import os
import runpy
import sys


def main():
    argv = sys.argv[1:]          # without torchrun's '--' (fast_exit.run)
    megatron_lm = os.environ.get('MEGATRON_LM')
    if argv[:1] == ['--megatron-lm']:
        megatron_lm, argv = argv[1], argv[2:]

    if megatron_lm:
        script = os.path.join(megatron_lm, 'pretrain_gpt.py')
        if not os.path.isfile(script):
            sys.exit(f'gpt_pretrain: error: no pretrain_gpt.py in '
                     f'{megatron_lm}: point -S megatron_lm= at a Megatron-LM '
                     f'checkout')
        sys.path.insert(0, megatron_lm)
        sys.argv = [script, *argv]
        runpy.run_path(script, run_name='__main__')
    else:
        from gpt_pretrain import mcore_train
        mcore_train.main(argv)


if __name__ == '__main__':
    import fast_exit
    fast_exit.run(main)
