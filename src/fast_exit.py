"""Run a training program's ``main`` and leave without Python's teardown.

After a program with PyTorch (and ``torch._dynamo``, which every optimizer
imports), transformers, Megatron-Core or TensorFlow loaded has printed its
results, CPython's finalisation (freeing every module and object, one by
one) still takes 1.5-5 s on the suite's CPU VM, measured as the same import
with and without ``os._exit`` (bench/README.md). That is time every test
case waits for and nothing measures, so the suite's programs end as
``fast_exit.run(main)``: what ``main()`` returns becomes the exit status as
with ``sys.exit(main())``; the ``atexit`` handlers run (a framework's
shutdown hooks, e.g. TensorFlow's coordination service, and ``logging``'s
flush), the standard streams are flushed, then ``os._exit``. What is
skipped is the freeing of objects, so a file that a program leaves open
with unwritten buffers would lose them: the suite's programs close what
they write. ``HPCML_FULL_EXIT=1`` turns this off (for options that make a
program write through objects it never closes, such as OpenCLIP's
``--report-to tensorboard``). An exception still leaves the normal way,
with its traceback and status 1.

Every program also starts here, so this is where its standard streams
become line-buffered (:func:`whole_lines`): each line leaves in one
``write``, so that ranks sharing one output (torchrun's workers, a local
job's processes) cannot tear each other's lines; and where its heartbeat
for the hang watch starts (:func:`heartbeat.start`).

No imports beyond the standard library: TensorFlow's program uses it too.
"""
import atexit
import os
import sys
import threading

import heartbeat


def status_of(code):
    '''The exit status ``sys.exit(code)`` gives; a message is printed to
    stderr as ``sys.exit`` does, with status 1.'''
    if code is None:
        return 0
    if isinstance(code, int):
        return code
    print(code, file=sys.stderr)
    return 1


def whole_lines(streams=None):
    '''Make *streams* (default stdout and stderr) write whole lines.

    The jobs run ``python -u`` (so that nothing waits in a buffer when a
    rank dies), and unbuffered text streams send each piece of a
    ``print(a, b)`` with a write of its own: with four ranks on one file,
    ``1.8633\\timages/sec: 5.0`` came out of two of them. Line buffering
    collects a line and writes it at its newline, in one write (a line
    longer than the buffer, 8 KiB, may still leave in pieces).'''
    for stream in streams or (sys.stdout, sys.stderr):
        try:
            stream.reconfigure(line_buffering=True, write_through=False)
        except (AttributeError, ValueError):
            pass                       # not a TextIOWrapper (replaced)


def run(main, teardown=False):
    '''``sys.exit(main())``, without interpreter teardown unless
    *teardown* or ``HPCML_FULL_EXIT=1``. A leading ``--`` in ``sys.argv``
    (torchrun's separator between its options and the program's) is
    dropped first; the standard streams write whole lines
    (:func:`whole_lines`); the rank's heartbeat starts
    (:func:`heartbeat.start`).'''
    whole_lines()
    heartbeat.start()
    if sys.argv[1:2] == ['--']:
        del sys.argv[1]
    if teardown or os.environ.get('HPCML_FULL_EXIT') == '1':
        sys.exit(main())
    try:
        status = status_of(main())
    except SystemExit as exit_:
        status = status_of(exit_.code)
    # What CPython's own exit does before freeing: wait for the program's
    # non-daemon threads, then run the atexit handlers (logging.shutdown
    # among them).
    for thread in threading.enumerate():
        if not thread.daemon and thread is not threading.current_thread():
            thread.join()
    atexit._run_exitfuncs()
    for stream in (sys.stdout, sys.stderr):
        try:
            stream.flush()
        except (OSError, ValueError):
            status = status or 1
    os._exit(status)
