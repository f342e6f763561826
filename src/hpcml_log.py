"""The suite's own one-line records, printed by every training program
beside its native log (OpenCLIP's, Megatron's, MLLOG, ...)::

    [hpcml] device {"rank": 0, "kind": "gpu", "backend": "cuda", ...}
    [hpcml] memory {"rank": 0, "peak_allocated_MiB": 1234.5, ...}
    [hpcml] timing {"rank": 0, "steps": 99, "data_s": 0.01, ...}
    [hpcml] timed region 1764000000.125 1764000012.625

``[hpcml] <type> <one JSON object>``: what ran where (the device a rank
used, its math mode), the device memory it held at its peak, and where its
step time went (data, compute) by its own timers. The checks read them with
:mod:`hpctestlib_ml.parsers.hpcml_records`; the fields of each type are
documented there, beside the code that reads them. The timed region, the
window the energy figures integrate over, is two Unix times on one line
(:func:`emit_timed_region`), read by :mod:`hpctestlib_ml.parsers.
timed_window` (the programs whose native log has no timestamps print it).

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


def timed_region(start, stop):
    '''The timed region's line: the steady-state steps' *start* and *stop*,
    Unix seconds (ms resolution; no newline).'''
    return f'{PREFIX} timed region {start:.3f} {stop:.3f}'


def emit_timed_region(start, stop, stream=None):
    '''Print the timed region's line (:func:`timed_region`) in one write,
    and flush: once per run (rank 0).'''
    stream = stream or sys.stdout
    stream.write(timed_region(start, stop) + '\n')
    stream.flush()
