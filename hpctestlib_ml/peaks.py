"""The peak FLOP/s that MFU divides by: which device, which precision,
and whether fp32 ran on TF32. Pure functions over
:data:`~hpctestlib_ml.constants.DEVICE_PEAK_FLOPS`, tested with the inputs
GPU nodes give (product names, precisions, the programs' ``device``
records).

fp32's peak is decided by what ran, not by a guess: the program's
``device`` record says whether TF32 was on (the suite's PyTorch programs
turn it on explicitly on Ampere and later, ``NVIDIA_TF32_OVERRIDE=0``
turns it off); where a program prints no record (Megatron-LM's own
``pretrain_gpt.py``), fp32 is taken at the TF32 peak, the higher one, so
that MFU is never overstated, and the peak's description says so.
"""
import difflib

from hpctestlib_ml import program_tables
from hpctestlib_ml.constants import (DEVICE_PEAK_FLOPS, FP16_FOR_BF16,
                                     GPU_BACKENDS, GPU_CAPABILITIES,
                                     GPU_PRODUCT_NAMES, GPU_VENDORS,
                                     PRECISION_PEAK)


def model_key(product_name):
    '''The :data:`DEVICE_PEAK_FLOPS` key of a GPU product name ("NVIDIA
    H100 80GB HBM3" -> ``H100-SXM``), or None.'''
    name = product_name or ''
    return next((key for pattern, key in GPU_PRODUCT_NAMES
                 if pattern.lower() in name.lower()), None)


def nearest_models(name, table=DEVICE_PEAK_FLOPS):
    '''The keys of *table* nearest GPU model *name*, which is none of
    them: the key whose product name *name* contains (``A100-SXM4-80GB``
    -> ``A100``, ``MI250X`` -> ``MI250X-GCD``), else those spelt most
    alike; [] where none is near.'''
    key = model_key(name)
    if key in table:
        return [key]
    by_lower = {k.lower(): k for k in table}
    return [by_lower[near] for near in difflib.get_close_matches(
        str(name).lower(), list(by_lower), n=3, cutoff=0.6)]


def peak_key(precision, tf32):
    '''The key of the peak *precision* runs at; *tf32*: whether fp32
    matrix products ran on TF32 (None: not known, taken as True).'''
    key = PRECISION_PEAK.get(precision, 'fp32')
    if key == 'fp32' and tf32 is not False:
        return 'tf32'
    return key


def device_peak(model, precision, tf32, table=DEVICE_PEAK_FLOPS):
    '''(FLOP/s of one device, the key used) for *model* running
    *precision*; LookupError naming what is missing. A model without a
    TF32 rate (V100, MI250) runs fp32 at its fp32 rate.'''
    if model not in table:
        raise LookupError(f'no peak FLOP/s known for GPU model {model!r} '
                          f'(known: {", ".join(table)}); set the '
                          f"partition's devices model to one of them, or "
                          f"extras['device_peak_flops']")
    rates = table[model]
    key = peak_key(precision, tf32)
    if key == 'tf32' and 'tf32' not in rates:
        key = 'fp32'
    if key not in rates:
        raise LookupError(f'{model} has no {key} rate (precision '
                          f'{precision!r})')
    return rates[key], key


def describe(model, key, flops, assumed_tf32=False):
    '''``H100-SXM bf16 989.4 TFLOP/s per GPU`` (the perflog's
    ``mfu_peak``).'''
    text = f'{model} {key} {flops / 1e12:.1f} TFLOP/s per GPU'
    if assumed_tf32:
        text += ' (TF32 assumed: the program did not say)'
    return text


def has_bf16(model):
    '''Whether GPU *model* computes bf16 in hardware, by the rule the
    programs apply to the device they run on (``src/device_choice.py``'s
    ``bf16_native``, read by path): its vendor's backend and its compute
    capability. True for a model the suite does not know (nothing known
    against it).'''
    if model not in GPU_VENDORS:
        return True
    rule = program_tables.load('', 'device_choice').bf16_native
    return rule(GPU_BACKENDS[GPU_VENDORS[model]], GPU_CAPABILITIES.get(model))


def fp16_for(precision):
    '''The fp16 precision standing in for bf16 *precision*, or None where
    *precision* is not a bf16 one.'''
    return FP16_FOR_BF16.get(precision)
