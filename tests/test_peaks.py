"""The peak MFU divides by (hpctestlib_ml/peaks.py): the product names GPU
nodes print, each precision's rate, fp32 with and without TF32."""
import pytest

from hpctestlib_ml import peaks
from hpctestlib_ml.constants import DEVICE_PEAK_FLOPS, GPU_VENDORS


@pytest.mark.parametrize('name, key', [
    ('NVIDIA A100-SXM4-40GB', 'A100'),
    ('NVIDIA A100 80GB PCIe', 'A100'),
    ('NVIDIA H100 80GB HBM3', 'H100-SXM'),
    ('NVIDIA H100 PCIe', 'H100-PCIe'),
    ('NVIDIA H100 NVL', 'H100-NVL'),
    ('NVIDIA GH200 480GB', 'GH200'),
    ('NVIDIA H200', 'H200'),
    ('NVIDIA H200 NVL', 'H200-NVL'),
    ('Tesla V100-SXM2-32GB', 'V100'),
    ('Tesla V100-PCIE-16GB', 'V100-PCIe'),
    ('AMD Instinct MI250X', 'MI250X-GCD'),
    ('AMD INSTINCT MI250X', 'MI250X-GCD'),
    ('AMD Instinct MI250', 'MI250-GCD'),
    ('AMD Instinct MI300X', 'MI300X'),
    ('NVIDIA L40S', None),
])
def test_product_names(name, key):
    assert peaks.model_key(name) == key


@pytest.mark.parametrize('model, precision, tf32, flops, key', [
    # fp32 on an A100: 8x apart with and without TF32.
    ('A100', 'fp32', True, 156e12, 'tf32'),
    ('A100', 'fp32', False, 19.5e12, 'fp32'),
    ('A100', 'fp32', None, 156e12, 'tf32'),       # unknown: the higher
    ('A100', 'bf16', False, 312e12, 'bf16'),
    ('A100', 'amp', True, 312e12, 'fp16'),
    ('H100-SXM', 'amp_bf16', True, 989.4e12, 'bf16'),
    ('H100-NVL', 'bf16', True, 835.5e12, 'bf16'),
    ('H200-NVL', 'fp32', True, 417.5e12, 'tf32'),
    ('GH200', 'fp32', False, 67e12, 'fp32'),
    # AMD: fp32 products run on the matrix cores; no TF32 on MI250.
    ('MI250X-GCD', 'fp32', False, 47.85e12, 'fp32'),
    ('MI250X-GCD', 'fp32', True, 47.85e12, 'fp32'),
    ('MI250-GCD', 'bf16', False, 181.05e12, 'bf16'),
    ('MI250X-GCD', 'bf16', False, 191.5e12, 'bf16'),
    ('V100', 'fp16', False, 125e12, 'fp16'),
])
def test_device_peak(model, precision, tf32, flops, key):
    assert peaks.device_peak(model, precision, tf32) == (flops, key)


def test_unknown_model_names_the_fix():
    with pytest.raises(LookupError, match="devices model.*device_peak_flops"):
        peaks.device_peak('H100', 'bf16', True)


def test_v100_has_no_bf16_and_fp16_stands_in():
    assert not peaks.has_bf16('V100')
    assert peaks.has_bf16('A100') and peaks.has_bf16('unknown')
    with pytest.raises(LookupError, match='V100 has no bf16'):
        peaks.device_peak('V100', 'bf16', False)
    assert [peaks.fp16_for(p) for p in ('bf16', 'amp_bf16', 'fp32')] == \
        ['fp16', 'amp', None]


def test_describe():
    assert peaks.describe('H100-SXM', 'bf16', 989.4e12) == \
        'H100-SXM bf16 989.4 TFLOP/s per GPU'
    assert 'assumed' in peaks.describe('A100', 'tf32', 156e12, True)


def test_every_model_has_a_vendor_and_an_fp32_rate():
    assert set(GPU_VENDORS) == set(DEVICE_PEAK_FLOPS)
    assert all('fp32' in rates for rates in DEVICE_PEAK_FLOPS.values())


def test_bf16_emulation_has_one_rule_on_both_sides(monkeypatch):
    '''The harness decides by the partition's GPU model what the programs
    decide by their device (src/device_choice.bf16_native: the backend
    and the compute capability): the same function, read by path; and
    the peak table has a bf16 rate exactly where it says bf16 runs in
    hardware.'''
    from hpctestlib_ml import program_tables
    from hpctestlib_ml.constants import (DEVICE_PEAK_FLOPS, GPU_CAPABILITIES,
                                         GPU_VENDORS)
    for model, rates in DEVICE_PEAK_FLOPS.items():
        assert peaks.has_bf16(model) == ('bf16' in rates), model
        if GPU_VENDORS[model] == 'nvidia':
            assert model in GPU_CAPABILITIES, model
    rule = program_tables.load('', 'device_choice')
    monkeypatch.setattr(rule, 'bf16_native', lambda backend, capability:
                        capability == (9, 0))
    assert peaks.has_bf16('H100-SXM') and not peaks.has_bf16('A100')
