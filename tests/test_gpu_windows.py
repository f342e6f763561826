"""What the first GPU run (H200, 2026-11-26,
``bench/results/gpuval-h200-2026-11-26``) found measured outside the timed
steps, held here with the inputs a GPU node gives.

- Memory: DeepLabV3+ in fp32 logged a framework peak of 140,366 MiB (of
  143,156) against ``nvidia-smi``'s 12,069 MiB over the timed steps: the
  first step's cuDNN autotuning tries workspaces as large as the free
  memory. The ``memory`` record's peaks are now those of the timed steps,
  the first step's kept beside them.
- Data time: Megatron's fallback copied each micro-batch from pageable
  memory, which makes the host wait for every kernel queued before the
  copy: 33 % of the 800M's step was counted as data. The copy now goes
  from pinned memory without a wait, as Megatron-LM's
  ``get_batch_on_this_tp_rank``.
"""
import sys
import types

import torch

from conftest import REPO

sys.path.insert(0, str(REPO / 'src'))

MIB = 2 ** 20


class FakeAllocator:
    '''torch.cuda's peak counters as a GPU's caching allocator keeps them.'''

    def __init__(self):
        self.peak_reserved = self.peak_allocated = 0

    def use(self, reserved_mib, allocated_mib):
        self.peak_reserved = max(self.peak_reserved, reserved_mib * MIB)
        self.peak_allocated = max(self.peak_allocated, allocated_mib * MIB)

    def install(self, monkeypatch, torch_device):
        cuda = types.SimpleNamespace(
            max_memory_reserved=lambda device: self.peak_reserved,
            max_memory_allocated=lambda device: self.peak_allocated,
            reset_peak_memory_stats=self.reset,
            get_device_properties=lambda device: types.SimpleNamespace(
                total_memory=143155.9 * MIB))
        monkeypatch.setattr(torch_device, 'torch',
                            types.SimpleNamespace(cuda=cuda))
        monkeypatch.setattr(torch_device, '_FIRST_STEP_PEAK', {})

    def reset(self, device):
        self.peak_reserved = self.peak_allocated = 0


def test_the_memory_record_holds_the_timed_steps_peak(monkeypatch):
    import torch_device
    allocator = FakeAllocator()
    allocator.install(monkeypatch, torch_device)
    gpu = torch.device('cuda', 0)
    allocator.use(140366.0, 140035.4)    # step 1: cuDNN's autotuning
    torch_device.end_warmup(gpu)
    for _ in range(14):                  # the timed steps
        allocator.use(12069.0, 11500.0)
    facts = torch_device.memory_facts(gpu, 0)
    assert facts['peak_reserved_MiB'] == 12069.0
    assert facts['peak_allocated_MiB'] == 11500.0
    assert facts['first_step_peak_reserved_MiB'] == 140366.0
    assert facts['peaks_over'] == 'timed'


def test_without_end_warmup_the_record_says_it_covers_the_run(monkeypatch):
    import torch_device
    allocator = FakeAllocator()
    allocator.install(monkeypatch, torch_device)
    allocator.use(20658.0, 18526.2)
    facts = torch_device.memory_facts(torch.device('cuda', 0), 0)
    assert facts['peaks_over'] == 'run'
    assert 'first_step_peak_reserved_MiB' not in facts
    assert torch_device.memory_facts(torch.device('cpu'), 0) is None


class Log:
    '''mlperf_train's logger, keeping nothing.'''
    rank = 0
    constants = types.SimpleNamespace(RUN_START='run_start',
                                      EPOCH_START='epoch_start',
                                      EPOCH_STOP='epoch_stop')

    def start(self, *args, **kwargs):
        pass

    end = event = start


def test_mlperf_programs_restart_the_peaks_after_the_first_step(monkeypatch):
    import mlperf_train
    import torch_device
    steps_before_reset = []
    ran = []
    monkeypatch.setattr(torch_device, 'end_warmup',
                        lambda device: steps_before_reset.append(len(ran)))
    status = mlperf_train.train(Log(), lambda n: ran.append(n) or 1.0, 5, 4,
                                torch.device('cpu'), 1)
    assert status == 'success'
    assert steps_before_reset == [1]


def test_gpt2_restarts_the_peaks_after_the_first_step():
    import gpt2_finetune.__main__ as program
    calls = []
    callback = program.step_times(8, False, 0, lambda: None,
                                  lambda: calls.append(state.global_step))
    state = types.SimpleNamespace(global_step=0, max_steps=4)
    for _ in range(4):
        callback.on_step_begin(None, state, None)
        state.global_step += 1
        callback.on_step_end(None, state, None)
    assert calls == [1]


class HostTensor:
    '''A host tensor that says how it was sent to the device.'''

    def __init__(self):
        self.calls = []

    def pin_memory(self):
        self.calls.append('pin_memory')
        return self

    def to(self, device, non_blocking=False):
        self.calls.append(('to', str(device), non_blocking))
        return self


def test_megatron_batches_go_to_the_gpu_without_a_wait():
    from gpt_pretrain import mcore_train
    tensor = HostTensor()
    mcore_train.to_device_without_wait(tensor, torch.device('cuda', 0))
    assert tensor.calls == ['pin_memory', ('to', 'cuda:0', True)]
    on_cpu = HostTensor()
    mcore_train.to_device_without_wait(on_cpu, 'cpu')
    assert on_cpu.calls == [('to', 'cpu', False)]


def test_megatron_mock_batches_use_it(monkeypatch):
    from gpt_pretrain import mcore_train
    sent = []
    monkeypatch.setattr(mcore_train, 'to_device_without_wait',
                        lambda tensor, device: sent.append(tensor.shape)
                        or tensor)
    args = types.SimpleNamespace(micro_batch_size=2, seq_length=8, seed=1)
    tokens, _, _, labels = mcore_train.mock_batch(args, 50, 0,
                                                  torch.device('cpu'))
    assert sent == [torch.Size([2, 9])]
    assert tokens.shape == labels.shape == (2, 8)
