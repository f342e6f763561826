"""Every benchmark configuration starts and trains, on this CPU.

Each case runs a workload's real program through ReFrame at ``--mode
short``: the benchmark's model and options, changed only where a CPU must
(``-S steps=2``, a batch of one, fp32 where the benchmark trains in mixed
precision on GPUs). So the options are accepted by the upstream program
(OpenCLIP's parser, HF Trainer, Megatron-Core's model), the shapes divide,
the first steps run and the log parses. Megatron's 13B, 175B, Llama 3 and
GPT-J sizes cannot fit this machine: their generated arguments go through
the fallback's parser and layout checks (tests/test_reframe_dryrun.py),
and model-info builds them on the meta device (tests/test_model_info.py).

Opt-in (``-m fullsize``): about 20 minutes and up to ~20 GiB on a 2-core
machine, more than CI's budget allows (docs/developer/testing.md).
"""
import math

import pytest

from conftest import BIN
from hpctestlib_ml import registry
from perflog import read_perflog

pytestmark = pytest.mark.fullsize

HPCML = BIN / 'hpcml'

#: A check's (parameters, options besides --mode short -S steps=2) where
#: they are not ``-S batch_size=1``.
NEEDS = {
    # Two samples: the sanity check expects loss ln(global batch).
    'MMoCLIP': ('', ['-S', 'batch_size=2']),
    # CARAML's 800M; one micro-batch per iteration (the benchmark's 2048
    # would be hours).
    'MegatronGPT': ('%model_size=800M', ['-S', 'batch_size=1', '-S',
                                         'global_batch_size=1']),
    'GPT2FineTune': ('%train_precision=fp32', ['-S', 'batch_size=1']),
}

#: check (and parameter) -> (options besides --mode short -S steps=2,
#: its throughput column): every training workload the registry declares.
CASES = {}
for _declared in registry.registered().values():
    if _declared.trains:
        _param, _options = NEEDS.get(_declared.check,
                                     ('', ['-S', 'batch_size=1']))
        CASES[_declared.check + _param] = (_options,
                                           _declared.throughput_metric)


@pytest.fixture(scope='module')
def prepared(tmp_path_factory):
    '''What `hpcml prepare gpt2_finetune` would fetch, from local sources:
    the published gpt2 config (124M, random weights) and a generated
    corpus.'''
    from hpctestlib_ml.registry.gpt2_finetune import prepare
    return prepare.prepare_gpt2_stand_in(tmp_path_factory.mktemp('prepare'))


@pytest.mark.parametrize('check', list(CASES))
def test_benchmark_configuration_trains(run_reframe, prepared, check):
    name, _, param = check.partition('%')
    options, throughput = CASES[check]
    pattern = f'^{name}%scale=1_proc%launch_mode=per_task'
    if param:
        pattern += f'%{param}'
    proc, var = run_reframe(
        HPCML, 'suite', '-n', pattern, '--mode', 'short', '-S', 'steps=2',
        *options, env={'HPCML_PREPARED_DIR': str(prepared)}, timeout=3000)
    if 'SKIP' in proc.stdout and 'needs an estimated' in proc.stdout:
        # A machine too small for Megatron's 800M in fp32 (~18.1 GiB with
        # CARAML's selective recomputation): the memory check skips it
        # (tests/test_memory_fit.py) where the kernel would kill it.
        pytest.skip(proc.stdout.split('needs an estimated', 1)[1][:300])
    assert proc.returncode == 0, proc.stdout[-4000:] + proc.stderr[-2000:]
    row, = read_perflog(var / 'perflogs' / 'local' / 'cpu' / f'{name}.log')
    assert row['result'] == 'pass' and row['resolved_size'] == 'short'
    assert math.isfinite(float(row[f'{throughput}_value']))
    assert float(row[f'{throughput}_value']) > 0
    outputs = list((var / 'output').glob(f'**/{name}_*/rfm_job.out'))
    text = outputs[0].read_text()
    if ':::MLLOG' in text:
        from hpctestlib_ml import compliance
        report = compliance.check(text)
        assert report.violations == [], [f.message for f in
                                          report.violations]
