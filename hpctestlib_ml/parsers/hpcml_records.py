"""The records the suite's programs print beside their native logs
(``src/hpcml_log.py``): ``[hpcml] <type> <JSON object>``, one a line.

Types and their fields:

``device`` (each rank, once, after choosing its device)
    ``rank``, ``local_rank``; ``kind`` ``gpu`` or ``cpu`` (what the
    program computes on); ``backend`` ``cuda``, ``hip`` or ``cpu``;
    ``index`` (the device ordinal the rank uses among those it sees),
    ``count`` (devices it sees), ``name`` (the device's product name),
    ``capability`` (``9.0``); ``tf32`` (whether fp32 matrix products run
    on TF32 tensor cores: decides the peak of fp32 MFU); ``runtime``
    (``cuda 12.8``: the runtime the framework was built with),
    ``framework`` (``torch 2.11.0``), ``nccl`` (the version the framework
    loads), ``visible`` (the visibility variable as the rank saw it).
    On the CPU: ``index``, ``capability`` and ``nccl`` None, ``count``
    the machine's CPUs, ``name`` its processor
    (``device_choice.cpu_device_fields``).
``memory`` (each rank, once, after training)
    ``rank``, ``peak_allocated_MiB`` (the framework allocator's peak of
    live tensors), ``peak_reserved_MiB`` (what the allocator held from the
    device at its peak: what an out-of-memory compares with the
    device's capacity), ``total_MiB`` (the device's capacity);
    ``peaks_over``: ``timed`` (the peaks of the timed steps, the first
    step's in ``first_step_peak_reserved_MiB``: its cuDNN autotuning tries
    workspaces as large as the free memory) or ``run`` (every step;
    records written before 2026-11-26 have no such field and are ``run``).
``timing`` (each rank, once, after training)
    ``rank``, ``steps`` (steady-state steps: the first is not counted),
    ``data_s`` (seconds waiting for the next batch, its copy to the
    device included), ``compute_s`` (the rest of the steps).
``rank_compute`` (each rank, once, after training; the programs of
``mlperf_train`` and ``torchvision_resnet50``)
    The rank's own compute per steady-state step, before it waits for the
    others: ``measure`` ``forward`` (the model's forward pass, which holds
    no collective under DDP: ``src/rank_compute.py`` says why), ``rank``,
    ``node`` (its host name), ``steps``, ``mean_s``, ``median_s``,
    ``max_s`` (seconds per step). The check's ``rank_compute_spread`` and
    ``slowest_rank`` come from them (:mod:`hpctestlib_ml.device_check`).

``answer`` (each rank, once per repetition; ``src/sdc``)
    ``rank``, ``repetition`` (1, 2, ...), ``node`` (its host name),
    ``digests`` (item -> the first 16 hex digits of the SHA-256 of the
    item's result: ``matmul bf16 #2``, ``step fp32 grads``), ``threads``
    (torch's CPU threads), ``isa`` (the CPU instructions torch's kernels
    use; None on a GPU), ``version`` (of the computation), ``seconds``
    (the repetition's). Compared by :mod:`hpctestlib_ml.answers`.
``answer_error`` (a rank whose result differed from another's)
    ``rank``, ``repetition``, ``item``, ``against`` (the rank whose result
    it was measured against), ``differ`` (elements not bit-identical),
    ``elements``, ``max_rel_error`` (the largest ``|mine - theirs| /
    |theirs|`` over them; ``Infinity`` where theirs is 0 or either is not
    finite).

Standard library only (``hpcml extract`` uses it).
"""
import json
import re

_LINE = re.compile(r'^(?:.*?)\[hpcml\] (device|memory|timing|rank_compute|'
                   r'answer|answer_error) '
                   r'(\{.*\})\s*$', re.M)


def records(text, type_):
    '''Every record of type *type_* in *text*, in order; a line that is not a
    whole JSON object (cut short) is skipped.'''
    found = []
    for match in _LINE.finditer(text):
        if match.group(1) != type_:
            continue
        try:
            value = json.loads(match.group(2))
        except ValueError:
            continue
        if isinstance(value, dict):
            found.append(value)
    return found


def by_rank(text, type_):
    '''{rank: record} of type *type_* (a rank's last record wins).'''
    return {r.get('rank'): r for r in records(text, type_)}
