"""template_workload: a multilayer perceptron trained to regress synthetic
data, data-parallel (DDP): the suite's template of a training program
(``python -m template_workload``, :mod:`.__main__`). Replace the model,
the data and the step with the benchmark's; keep what it prints.

What it prints (the contract with the suite's check; the parser is
``hpctestlib_ml/parsers/template_workload.py``):

- rank 0, once: ``template_workload: world size W, batch B per rank, ...``;
- rank 0, every step: ``template_workload: step N/M loss L time T s
  samples S`` (S: the samples of the step, all ranks);
- rank 0, at the end: ``[hpcml] timed region START STOP`` (Unix seconds
  of the steps after the first: ``hpcml_log.emit_timed_region``);
- every rank: its ``[hpcml] device`` record at the start and, on GPUs,
  ``memory`` at the end (``torch_device.start_ranks`` and ``end_ranks``),
  and its ``[hpcml] timing`` record (``hpcml_log.emit_timing``).

This module holds the lines (standard library only); the sizes are in
:mod:`.sizes`, read by the suite's declaration too.
"""


def start_line(world, batch, width, depth, precision, device):
    '''The run's first line: what it trains, on what.'''
    return (f'template_workload: world size {world}, batch {batch} per '
            f'rank, width {width}, depth {depth}, {precision}, {device}')


def step_line(step, steps, loss, seconds, samples):
    '''The line of one training step.'''
    return (f'template_workload: step {step}/{steps} loss {loss:.6f} '
            f'time {seconds:.6f} s samples {samples}')
