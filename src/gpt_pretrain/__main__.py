"""python -m gpt_pretrain [--megatron-lm DIR] [Megatron-LM arguments...]

With ``--megatron-lm DIR`` (or ``$MEGATRON_LM``) naming a Megatron-LM
checkout, runs its ``pretrain_gpt.py`` with the arguments unchanged; else
trains Megatron-Core's GPTModel (:mod:`gpt_pretrain.mcore_train`).
"""
import os
import runpy
import sys

import input_paths

#: The data options of pretrain_gpt.py and what each names.
DATA_OPTIONS = {'--data-path': 'prefix', '--vocab-file': 'file',
                '--merge-file': 'file'}


def require_inputs(argv):
    '''End the program in one line where a data option of *argv* names a
    path that is not there (:mod:`input_paths`).'''
    for option, kind in DATA_OPTIONS.items():
        if option in argv[:-1]:
            path = argv[argv.index(option) + 1]
            input_paths.require('gpt_pretrain', option, path, kind)


def main():
    argv = sys.argv[1:]          # without torchrun's '--' (fast_exit.run)
    megatron_lm = os.environ.get('MEGATRON_LM')
    if argv[:1] == ['--megatron-lm']:
        megatron_lm, argv = argv[1], argv[2:]

    require_inputs(argv)
    if megatron_lm:
        input_paths.require('gpt_pretrain', '--megatron-lm', megatron_lm,
                            holds=('pretrain_gpt.py',),
                            hint='point -S megatron_lm= at a Megatron-LM '
                                 'checkout')
        script = os.path.join(megatron_lm, 'pretrain_gpt.py')
        # Upstream's script prints no device record (where the suite's
        # programs start watching their optimizer): watch it here.
        import heartbeat
        heartbeat.watch_torch()
        sys.path.insert(0, megatron_lm)
        sys.argv = [script, *argv]
        runpy.run_path(script, run_name='__main__')
    else:
        from gpt_pretrain import mcore_train
        mcore_train.main(argv)


if __name__ == '__main__':
    import fast_exit
    fast_exit.run(main)
