"""The suite's own one-line records, printed by every training program
beside its native log (OpenCLIP's, Megatron's, MLLOG, ...)::

    [hpcml] device {"rank": 0, "kind": "gpu", "backend": "cuda", ...}
    [hpcml] memory {"rank": 0, "peak_allocated_MiB": 1234.5, ...}
    [hpcml] timing {"rank": 0, "steps": 99, "data_s": 0.01, ...}

``[hpcml] <type> <one JSON object>``: what ran where (the device a rank
used, its math mode), the device memory it held at its peak, and where its
step time went (data, compute) by its own timers. The checks read them with
:mod:`hpctestlib_ml.parsers.hpcml_records`; the fields of each type are
documented there, beside the code that reads them.

Each record is written with one ``write`` of a whole line, so that ranks
sharing a standard output (torchrun's workers) never tear each other's
records. Standard library only: TensorFlow's program uses it too.
"""
import json
import sys

PREFIX = '[hpcml]'


def record(type_, **fields):
    '''The record line of type *type_* (``device``, ...) with *fields*
    (no newline).'''
    return f'{PREFIX} {type_} {json.dumps(fields, sort_keys=True)}'


def emit(type_, stream=None, **fields):
    '''Print the record of type *type_* in one write, and flush.'''
    stream = stream or sys.stdout
    stream.write(record(type_, **fields) + '\n')
    stream.flush()


def emit_timing(rank, steps, data_s, compute_s, stream=None):
    '''Print rank *rank*'s ``timing`` record: its *steps* steady-state
    steps spent *data_s* seconds waiting for data and *compute_s* on the
    rest (microsecond resolution).'''
    emit('timing', stream, rank=rank, steps=steps, data_s=round(data_s, 6),
         compute_s=round(compute_s, 6))
