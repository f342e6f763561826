"""The achievable matrix-multiply rate of a device, per precision: the one
home of the measurement that ``python -m matmul_rate`` (the ``MatmulRate``
component check), ``hpcml cpu-peak`` (:mod:`hpctestlib_ml.cpu_peak`, the
CPU's peak for MFU) and the GPU validation's probes
(``bench/gpu/probes.py``) make.

What is measured: ``torch.mm`` of two square ``n x n`` matrices of random
normal values, ``2 n^3`` FLOPs each (a multiply and an add per term; the
count MFU's analytic FLOPs use, ``hpctestlib_ml/flops.py``), in the
precision's dtype and math mode (:data:`PRECISIONS`): ``tf32`` is fp32
storage with TF32 tensor-core products (``torch.backends.cuda.matmul.
allow_tf32``), ``fp32`` IEEE fp32 products with it off. The output is
preallocated (``out=``), so that no product waits for the allocator, and
the device's queue is drained before the clock stops (a GPU product
returns when it is queued, not done).

Two ways to read the clock, both kept from where they came from:
:func:`mean_rate`, FLOPs of *iterations* products over their seconds
after a warm-up (the GPU probes' way: n 8192, 3 warm-up, 10 timed; also
the check's, per timed iteration), and :func:`best_rate`, the fastest
single product over a time budget (``hpcml cpu-peak``'s way since it was
written: a CPU's BLAS varies from call to call with what else runs, and
the peak MFU divides by is the best it reaches).

Standard library and torch only: it runs on compute nodes and in the
containers, with ``PYTHONPATH=src``.
"""
import math
import time

#: Precision -> (torch dtype, TF32 products): what :func:`operands` makes.
PRECISIONS = {'fp32': ('float32', False), 'tf32': ('float32', True),
              'bf16': ('bfloat16', False), 'fp16': ('float16', False)}

#: What a GPU is measured in, in this order (the GPU probes' order); a CPU
#: in fp32 only (MFU's CPU peak is fp32's: every workload trains fp32 on
#: CPUs).
GPU_PRECISIONS = ('bf16', 'fp16', 'tf32', 'fp32')
CPU_PRECISIONS = ('fp32',)


def chosen(text, device_type):
    '''The precisions *text* names (comma-separated, of
    :data:`PRECISIONS`), else those of a device of *device_type*
    (``cuda``: :data:`GPU_PRECISIONS`, else :data:`CPU_PRECISIONS`); a
    ValueError naming the unknown ones and the known.'''
    if not text:
        return GPU_PRECISIONS if device_type == 'cuda' else CPU_PRECISIONS
    names = tuple(text.split(','))
    unknown = [p for p in names if p not in PRECISIONS]
    if unknown:
        raise ValueError(f'unknown precision(s) {unknown}: use '
                         f'{", ".join(PRECISIONS)}')
    return names


def product_flops(n):
    '''FLOPs of one ``n x n`` by ``n x n`` product: ``2 n^3``.'''
    return 2 * n ** 3


def synchronize(device):
    '''Wait for *device*'s queued work (nothing on the CPU, whose
    products return when done).'''
    import torch
    if device.type == 'cuda':
        torch.cuda.synchronize(device)


def operands(n, precision, device, seed=0):
    '''(a, b, out): two random normal ``n x n`` matrices of *precision*
    on *device* and the output buffer, with the device's matmul math mode
    set for *precision* (TF32 products for ``tf32`` only).'''
    import torch
    dtype_name, tf32 = PRECISIONS[precision]
    if device.type == 'cuda':
        torch.backends.cuda.matmul.allow_tf32 = tf32
    dtype = getattr(torch, dtype_name)
    generator = torch.Generator(device).manual_seed(seed)
    a, b = (torch.randn(n, n, device=device, dtype=dtype,
                        generator=generator) for _ in range(2))
    return a, b, torch.empty(n, n, device=device, dtype=dtype)


def seconds(a, b, out, count):
    '''Seconds that *count* products ``a @ b`` take, the queue drained;
    a step of the rank's heartbeat (:mod:`heartbeat`), after the timing.'''
    import torch

    import heartbeat
    synchronize(a.device)
    start = time.perf_counter()
    for _ in range(count):
        torch.mm(a, b, out=out)
    synchronize(a.device)
    took = time.perf_counter() - start
    heartbeat.step()
    return took


def warm_up(a, b, out, count, min_seconds=0.0):
    '''Seconds one product takes once warm: *count* untimed products,
    then, where *min_seconds* > 0, batches twice as long each until the
    warm-up has lasted *min_seconds* (a GPU's clocks and power settle over
    about a second: n 8192 bf16 products on an H200 take 1.4 ms each, so
    3 of them warm nothing). The last batch's seconds per product; that
    of the *count* products where no batch ran (0 where none did).'''
    batch = max(count, 1)
    took = seconds(a, b, out, count) if count else 0.0
    per_product = took / count if count else 0.0
    while took < min_seconds:
        batch_seconds = seconds(a, b, out, batch)
        per_product = batch_seconds / batch
        took += batch_seconds
        batch *= 2
    return per_product


def products_per_iteration(per_product_s, iterations, min_seconds, least):
    '''Products in each of *iterations* timed iterations so that they
    last about *min_seconds* together at *per_product_s* seconds a
    product; never fewer than *least* (the count asked for).'''
    if min_seconds <= 0 or per_product_s <= 0:
        return least
    return max(least, math.ceil(min_seconds / iterations / per_product_s))


def mean_rate(a, b, out, iterations, warmup=3):
    '''FLOP/s of *iterations* products after *warmup* untimed ones.'''
    seconds(a, b, out, warmup)
    return product_flops(a.shape[0]) * iterations / seconds(a, b, out,
                                                            iterations)


def best_rate(a, b, out, budget_s=2.0):
    '''FLOP/s of the fastest single product over about *budget_s*
    seconds, after one untimed (thread pool, page faults).'''
    seconds(a, b, out, 1)
    best, deadline = 0.0, time.perf_counter() + budget_s
    while time.perf_counter() < deadline:
        best = max(best, product_flops(a.shape[0]) / seconds(a, b, out, 1))
    return best


def rates(device, precisions, n, iterations=10, warmup=3):
    '''Precision -> FLOP/s (:func:`mean_rate`) on *device*, each measured
    on its own operands, freed before the next.'''
    found = {}
    for precision in precisions:
        a, b, out = operands(n, precision, device)
        found[precision] = mean_rate(a, b, out, iterations, warmup)
        del a, b, out
    return found
