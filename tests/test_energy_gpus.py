"""The energy sampler counts the case's GPUs of its node, not the GPUs of
the task it runs in (src/energy_sampler.py, src/node_gpus.py): NVML and
jpwr's ROCm back-end replaced by fakes that number a node's devices as the
real libraries do (NVML: every GPU of the node by PCI order, whatever
CUDA_VISIBLE_DEVICES says, with each device file's minor number; jpwr:
``rocm:<i>`` for every device rocm-smi enumerates). Each fake GPU spends
a different power of two in joules, so a total names the GPUs in it."""
import sys
import types

import pytest

from conftest import REPO

sys.path.insert(0, str(REPO / 'src'))
import energy_sampler  # noqa: E402

VARIABLES = ('SLURM_STEP_GPUS', 'SLURM_JOB_GPUS', 'CUDA_VISIBLE_DEVICES',
             'HIP_VISIBLE_DEVICES', 'ROCR_VISIBLE_DEVICES',
             'HPCML_GPUS_PER_NODE', 'HPCML_POWERCAP_ROOT', 'SLURM_LOCALID')


class FakeNvml(types.ModuleType):
    '''pynvml over *minors* (the minor number of each NVML index).'''

    class NVMLError(Exception):
        pass

    def __init__(self, minors):
        super().__init__('pynvml')
        self.minors = minors
        self.millijoules = [0] * len(minors)

    def nvmlInit(self):
        pass

    def nvmlDeviceGetCount(self):
        return len(self.minors)

    def nvmlDeviceGetHandleByIndex(self, i):
        return i

    def nvmlDeviceGetUUID(self, i):
        return f'GPU-0000000{i}-aaaa-bbbb-cccc-dddddddddddd'

    def nvmlDeviceGetMinorNumber(self, i):
        return self.minors[i]

    def nvmlDeviceGetTotalEnergyConsumption(self, i):
        return self.millijoules[i]

    def spend(self):
        '''GPU i spends 2**i J.'''
        for i in range(len(self.minors)):
            self.millijoules[i] += 1000 * 2 ** i


@pytest.fixture
def node(monkeypatch):
    '''A GPU node: ``node(minors, **env)`` installs its NVML and the task's
    environment; jpwr and RAPL are absent.'''
    for name in VARIABLES:
        monkeypatch.delenv(name, raising=False)
    monkeypatch.setitem(sys.modules, 'jpwr', None)

    def make(minors, **env):
        nvml = FakeNvml(minors)
        monkeypatch.setitem(sys.modules, 'pynvml', nvml)
        for name, value in env.items():
            monkeypatch.setenv(name, value)
        return nvml
    return make


def gpus_in(joules):
    '''The fake GPUs whose energy sums to *joules*.'''
    return [i for i in range(16) if int(round(joules)) >> i & 1]


@pytest.mark.parametrize('task', range(4))
def test_a_task_bound_to_one_gpu_counts_the_nodes_four(node, task):
    # srun --gpus-per-task=1: the sampler's task sees one GPU; the step
    # has four on the node. (Before: nvml(1 GPUs), a quarter of the node.)
    nvml = node([0, 1, 2, 3], SLURM_STEP_GPUS='0,1,2,3',
                CUDA_VISIBLE_DEVICES=str(task), HPCML_GPUS_PER_NODE='4')
    source = energy_sampler.Nvml()
    nvml.spend()
    assert source.label == 'nvml(4 GPUs)'
    assert gpus_in(source.joules()) == [0, 1, 2, 3]


def test_unbound_tasks_count_the_four(node):
    nvml = node([0, 1, 2, 3], SLURM_STEP_GPUS='0,1,2,3',
                CUDA_VISIBLE_DEVICES='0,1,2,3', HPCML_GPUS_PER_NODE='4')
    source = energy_sampler.Nvml()
    nvml.spend()
    assert (source.label, gpus_in(source.joules())) == (
        'nvml(4 GPUs)', [0, 1, 2, 3])


def test_local_scheduler_counts_one_gpu_of_eight(node):
    nvml = node(list(range(8)), HPCML_GPUS_PER_NODE='1')
    source = energy_sampler.Nvml()
    nvml.spend()
    assert (source.label, gpus_in(source.joules())) == ('nvml(1 GPUs)', [0])


def test_slurm_ids_are_matched_by_minor_number(node):
    # A 2-GPU job on a shared 4-GPU node whose device files are not in PCI
    # order (NVML index 0 is /dev/nvidia2): Slurm's global ids 0,1 are
    # /dev/nvidia0 and /dev/nvidia1, NVML indices 2 and 3.
    nvml = node([2, 3, 0, 1], SLURM_STEP_GPUS='0,1',
                CUDA_VISIBLE_DEVICES='0,1', HPCML_GPUS_PER_NODE='2')
    source = energy_sampler.Nvml()
    nvml.spend()
    assert gpus_in(source.joules()) == [2, 3]


def test_gpus_the_counter_cannot_see_give_no_energy(node, tmp_path):
    # A device cgroup per task: NVML in the first task sees its one GPU.
    node([0], SLURM_STEP_GPUS='0,1,2,3', CUDA_VISIBLE_DEVICES='0',
         HPCML_GPUS_PER_NODE='4')
    sources, reasons = energy_sampler.open_sources()
    assert sources == []
    assert reasons == [
        'GPUs 1,2,3 of SLURM_STEP_GPUS=0,1,2,3 are not among the 1 the '
        'energy counter sees (minor numbers 0): a device cgroup per task, '
        'or ids the counter cannot match']


def rapl_root(tmp_path):
    (tmp_path / 'intel-rapl:0').mkdir()
    (tmp_path / 'intel-rapl:0' / 'energy_uj').write_text('0')
    return str(tmp_path)


def test_a_gpu_case_without_a_gpu_counter_gets_no_energy(node, tmp_path,
                                                          monkeypatch):
    # Not the CPU packages alone, labelled as the node's energy.
    monkeypatch.setitem(sys.modules, 'pynvml', None)
    monkeypatch.setenv('HPCML_POWERCAP_ROOT', rapl_root(tmp_path))
    monkeypatch.setenv('HPCML_GPUS_PER_NODE', '4')
    sources, reasons = energy_sampler.open_sources()
    assert sources == []
    assert reasons[0] == ('no GPU energy counter for a case with GPUs '
                          '(HPCML_GPUS_PER_NODE=4)')
    # A CPU case on the same node: RAPL, and the GPUs left out.
    node([0, 1, 2, 3], HPCML_GPUS_PER_NODE='0')
    sources, reasons = energy_sampler.open_sources()
    assert [s.label for s in sources] == ['rapl(1 packages)']
    assert 'the case uses no GPU on this node (HPCML_GPUS_PER_NODE=0)' \
        in reasons


class FakeRocm:
    '''jpwr.gpu.rocm's ``power`` over 8 MI250 GCDs: sensor ``rocm:i``
    draws 2**i W.'''

    def init(self, values):
        values.update({f'rocm:{i}': [] for i in range(8)})

    def measure(self, values):
        for i in range(8):
            values[f'rocm:{i}'].append(float(2 ** i))


@pytest.fixture
def rocm_node(node, monkeypatch):
    monkeypatch.setitem(sys.modules, 'pynvml', None)
    monkeypatch.setitem(sys.modules, 'jpwr.gpu.rocm',
                        types.SimpleNamespace(power=FakeRocm))

    def watts(**env):
        for name, value in env.items():
            monkeypatch.setenv(name, value)
        sources, reasons = energy_sampler.open_sources()
        assert len(sources) == 1, reasons
        source, = sources
        return source.label, gpus_in(source._watts())
    return watts


def test_rocm_counts_the_case_s_gcds_not_every_device(rocm_node):
    # Bound per task on an 8-GCD node: all eight.
    assert rocm_node(SLURM_STEP_GPUS='0,1,2,3,4,5,6,7',
                     ROCR_VISIBLE_DEVICES='0', HPCML_GPUS_PER_NODE='8') == (
        'jpwr(rocm: 8 GPUs)', list(range(8)))


def test_rocm_honours_rocr_and_hip_visibility(rocm_node):
    # Before, jpwr.gpu.rocm summed all eight whatever these said.
    assert rocm_node(ROCR_VISIBLE_DEVICES='4,5,6,7',
                     HIP_VISIBLE_DEVICES='1,2') == (
        'jpwr(rocm: 2 GPUs)', [5, 6])


def test_rocm_local_scheduler_one_of_eight(rocm_node):
    assert rocm_node(HPCML_GPUS_PER_NODE='1') == ('jpwr(rocm: 1 GPUs)', [0])


def test_rocm_uuids_cannot_be_matched(node, monkeypatch):
    monkeypatch.setitem(sys.modules, 'pynvml', None)
    monkeypatch.setitem(sys.modules, 'jpwr.gpu.rocm',
                        types.SimpleNamespace(power=FakeRocm))
    monkeypatch.setenv('ROCR_VISIBLE_DEVICES', 'GPU-4d3a1b2c3d4e5f60')
    sources, reasons = energy_sampler.open_sources()
    assert sources == [] and 'GPUs GPU-4d3a1b2c3d4e5f60 of ' \
        'ROCR_VISIBLE_DEVICES=GPU-4d3a1b2c3d4e5f60 are not among' in reasons[0]
