"""The malloc settings of CPU partitions (constants.CPU_ALLOCATOR_ENV) do
what they are set for: training steps whose activations are larger than
glibc's mmap threshold stop faulting their memory in again every step
(CosmoFlow's reference size: 918,638 page faults a step, 3.5 GiB, with
glibc's defaults; none with the settings). Counted in page faults
(getrusage), not time: the same on a loaded machine."""
import os
import subprocess
import sys

from hpctestlib_ml.constants import CPU_ALLOCATOR_ENV

from conftest import REPO

#: CosmoFlow's network at a 64^3 cube (its first activation 128 MiB),
#: trained as the program trains it; prints the minor page faults of two
#: steps after two (the first steps grow the heap and make SGD's buffers).
STEPS = '''
import resource, torch
from cosmoflow.model import build_model
torch.set_num_threads(1)
torch.manual_seed(0)
model = build_model(64).to(memory_format=torch.channels_last_3d)
optimizer = torch.optim.SGD(model.parameters(), lr=1e-3, momentum=0.9)
x = torch.randn(4, 4, 64, 64, 64).contiguous(
    memory_format=torch.channels_last_3d)
def step():
    optimizer.zero_grad(set_to_none=True)
    torch.nn.functional.mse_loss(model(x), torch.zeros(4, 4)).backward()
    optimizer.step()
step()
step()
before = resource.getrusage(resource.RUSAGE_SELF).ru_minflt
for _ in range(2):
    step()
print(resource.getrusage(resource.RUSAGE_SELF).ru_minflt - before)
'''

#: The first activation, 4 x 32 x 64^3 fp32, in 4 KiB pages.
ACTIVATION_PAGES = 4 * 32 * 64 ** 3 * 4 // 4096


def faults(env):
    clean = {k: v for k, v in os.environ.items()
             if k not in CPU_ALLOCATOR_ENV}
    proc = subprocess.run([sys.executable, '-c', STEPS],
                          env={**clean, **env,
                               'PYTHONPATH': str(REPO / 'src')},
                          capture_output=True, text=True, timeout=300)
    assert proc.returncode == 0, proc.stderr[-3000:]
    return int(proc.stdout.split()[-1])


def test_glibc_defaults_fault_the_activations_in_every_step():
    # The premise: without the settings each step faults them in again.
    assert faults({}) > 2 * ACTIVATION_PAGES


def test_the_cpu_settings_keep_the_memory():
    assert faults(CPU_ALLOCATOR_ENV) < ACTIVATION_PAGES // 10
