"""hpcml prepare: what GPT-2 fine-tuning would fetch from the hub, stored
for offline jobs. No hub is reachable here, so the sources are files the
tests make: a GPT-2 saved from a config and a generated corpus."""
import os
import subprocess
import sys

import pytest

from conftest import BIN, REPO
from hpctestlib_ml.prepare import PrepareError
from hpctestlib_ml.registry.gpt2_finetune import prepare

sys.path.insert(0, str(REPO / 'src'))


def test_missing_directories_name_the_command(tmp_path):
    reason = prepare.gpt2_missing(tmp_path)
    assert f'run `hpcml prepare gpt2_finetune --dir {tmp_path}`' in reason
    assert 'config.json' not in reason      # directories, not files


def test_unknown_workload_is_refused(tmp_path):
    from hpctestlib_ml.commands.prepare import prepare as prepare_all
    with pytest.raises(PrepareError, match="unknown workload 'x'"):
        prepare_all(['x'], tmp_path)


def local_sources(tmp_path, layers=2):
    '''A GPT-2 (its tokenizer trained on the suite's corpus) and the corpus
    as train/validation text files, the way a hub would give them.'''
    from gpt2_finetune import corpus
    from gpt2_finetune.__main__ import tiny_model_and_data
    from transformers import GPT2Config, GPT2LMHeadModel
    tokenizer, _, (_, kwargs) = tiny_model_and_data(tmp_path / 'work')
    source = tmp_path / 'hub' / 'gpt2'
    tokenizer.save_pretrained(source)
    GPT2LMHeadModel(GPT2Config(n_layer=layers)).save_pretrained(source)
    return source, ('text', kwargs)


@pytest.mark.integration
def test_prepared_model_and_data_train_offline(tmp_path):
    source, dataset = local_sources(tmp_path)
    root = tmp_path / 'prepared'
    written = prepare.prepare_gpt2_finetune(root, source=str(source),
                                            dataset=dataset)
    assert written == list(prepare.gpt2_paths(root))
    assert prepare.gpt2_missing(root) is None

    model_dir, data_dir = written
    proc = subprocess.run(
        [sys.executable, '-m', 'gpt2_finetune', '--model', str(model_dir),
         '--dataset-dir', str(data_dir), '--do-train', '--do-eval',
         '--max-steps', '2', '--per-device-train-batch-size', '1',
         '--per-device-eval-batch-size', '1', '--block-size', '128',
         '--output-dir', str(tmp_path / 'out')],
        env={**os.environ, 'PYTHONPATH': str(REPO / 'src'),
             'HF_HUB_OFFLINE': '1', 'HF_DATASETS_OFFLINE': '1',
             'OMP_NUM_THREADS': '2'},
        capture_output=True, text=True, timeout=600, cwd=tmp_path)
    assert proc.returncode == 0, proc.stderr[-3000:]
    out = proc.stdout + proc.stderr
    assert '***** eval metrics *****' in out
    assert 'layers 2, width 768' in out       # the prepared model


def test_command_prints_what_it_did(tmp_path):
    proc = subprocess.run(
        [str(BIN / 'hpcml'), 'prepare', 'clip', 'megatron', '--dir',
         str(tmp_path)], capture_output=True, text=True, timeout=120)
    assert proc.returncode == 0, proc.stderr
    assert "clip: nothing to fetch: OpenCLIP's synthetic dataset" in \
        proc.stdout
    assert f'prepared under {tmp_path}' in proc.stdout


def test_the_stand_in_corpus_makes_the_blocks_asked_for(tmp_path):
    '''The GPU validation's stand-in for WikiText-2 has as many 1024-token
    blocks as run_clm makes of WikiText-2 (2318 and 240), so that an epoch
    is as many steps; here at a tenth of that, counted with the
    tokenizer the program uses.'''
    import pathlib
    from gpt2_finetune.__main__ import tiny_model_and_data
    tokenizer, _, (_, kwargs) = tiny_model_and_data(tmp_path / 'work')
    asked = {'train': 232, 'validation': 24}
    written = prepare.sized_corpus(tokenizer, kwargs['data_files'], asked,
                                   tmp_path / 'corpus')
    for split, count in asked.items():
        lines = pathlib.Path(written['data_files'][split]).read_text() \
            .splitlines()
        tokens = sum(len(ids) for ids in tokenizer(lines)['input_ids'])
        assert count <= tokens // 1024 <= count * 1.02, split
    assert prepare.WIKITEXT2_BLOCKS == {'train': 2318, 'validation': 240}
