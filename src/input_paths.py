"""The programs' check of their input paths, at their start: a missing
one ends the program in one line, as the file system says it, ``PROGRAM:
error: OPTION PATH: No such file or directory: 'MISSING'``, which the
suite's triage files under ``filesystem`` (``hpctestlib_ml/triage/``),
as the check's setup does where it can see the path
(``hpctestlib_ml/inputs.py``, which reads :func:`missing` from here).

Standard library only: every program imports it before torch.
"""
import os
import sys

#: What an input is: a directory, a file, or the path prefix of a
#: Megatron indexed dataset (``PREFIX.bin`` and ``PREFIX.idx``).
KINDS = ('dir', 'file', 'prefix')


def missing(path, kind='dir', holds=()):
    '''The path of input *path* (a *kind* of :data:`KINDS`; a directory
    that must hold the files *holds*) that is not there, or None.'''
    if kind == 'prefix':
        for suffix in ('.bin', '.idx'):
            if not os.path.isfile(path + suffix):
                return path + suffix
        return None
    if kind == 'file':
        return None if os.path.isfile(path) else path
    if not os.path.isdir(path):
        return path
    for name in holds:
        if not os.path.exists(os.path.join(path, name)):
            return os.path.join(path, name)
    return None


def require(program, option, path, kind='dir', holds=(), hint=''):
    '''End *program* in one line where its input *path* (given as
    *option*) is missing (:func:`missing`); *hint* says what it should
    be.'''
    gone = missing(path, kind, holds)
    if gone is not None:
        hint = f' ({hint})' if hint else ''
        sys.exit(f"{program}: error: {option} {path}: No such file or "
                 f"directory: '{gone}'{hint}")


def require_data(program, data, kind='dir'):
    ''':func:`require` of ``--data`` unless it is ``synthetic``.'''
    if data != 'synthetic':
        require(program, '--data', data, kind,
                hint="'synthetic' or the dataset's path")
