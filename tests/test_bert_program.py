"""src/bert_pretrain on a text file, the option beside synthetic batches:
a WordPiece tokenizer trained on the suite's generated corpus, two steps."""
import os
import subprocess
import sys

from conftest import REPO
from hpctestlib_ml.parsers import mllog

import pytest

pytestmark = pytest.mark.integration


def test_text_data_path_trains_and_logs_mllog(tmp_path):
    sys.path.insert(0, str(REPO / 'src'))
    from gpt2_finetune import corpus
    from tokenizers import BertWordPieceTokenizer

    files = corpus.write(tmp_path / 'corpus')
    sentences = tmp_path / 'sentences.txt'
    sentences.write_text('\n'.join(corpus.sentences(400, seed=3)) + '\n')
    wordpiece = BertWordPieceTokenizer(lowercase=True)
    wordpiece.train([files['train']], vocab_size=1000)
    (tmp_path / 'tok').mkdir()
    wordpiece.save_model(str(tmp_path / 'tok'))

    proc = subprocess.run(
        [sys.executable, '-m', 'bert_pretrain', '--model', 'tiny',
         '--steps', '2', '--batch-size', '4', '--seq-length', '64',
         '--data', str(sentences), '--tokenizer', str(tmp_path / 'tok')],
        env={**os.environ, 'PYTHONPATH': str(REPO / 'src'),
             'OMP_NUM_THREADS': '1'},
        capture_output=True, text=True, timeout=300, cwd=tmp_path)
    assert proc.returncode == 0, proc.stderr[-3000:]
    m = mllog.extract_metrics(proc.stdout + proc.stderr)
    assert m['status'] == 'success' and m['steps'] == 2
    assert m['losses_finite']
