"""BERT-Large pretraining, MLPerf Training style.

transformers' BertForPreTraining (masked LM + next-sentence prediction),
``bert-large`` (24 layers, 1024 hidden, 16 heads, sequence 512, 76
predictions) at benchmark size, ``tiny`` on CPUs; synthetic token batches by
default, or a text file and WordPiece tokenizer (``-S data=`` and
``-S tokenizer=``, or the partition's ``extras['bert_data']``); LAMB or
AdamW. The program logs ``:::MLLOG`` events, read by the shared
:mod:`hpctestlib_ml.parsers.mllog`.
"""
from reframe.core.builtins import variable

from hpctestlib_ml import flops
from hpctestlib_ml.base import BadInputError
from hpctestlib_ml.mlperf import MLLogTraining

#: (layers, hidden, heads, intermediate, vocab, sequence, max predictions)
MODELS = {
    'tiny': (2, 256, 4, 1024, 8192, 128, 20),
    'bert-large': (24, 1024, 16, 4096, 30522, 512, 76),
}


class BertPretraining(MLLogTraining):
    '''BertForPreTraining with MLPerf-style logging; a sample is a sequence,
    so ``samples_per_second_per_gpu`` is sequences/s per GPU. ``data`` is
    ``synthetic`` or a text file (one sentence per line) read with
    :attr:`tokenizer`; default: the partition's ``extras['bert_data']``
    (``{'data': FILE, 'tokenizer': DIR}``).'''

    workload = 'bert'
    program = 'bert_pretrain'
    sizes = {
        'tiny': {'model': 'tiny', 'batch_size': 32, 'steps': 10,
                 'time_limit': '15m'},
        'benchmark': {'model': 'bert-large', 'batch_size': 24, 'steps': 100,
                      'precision': 'bf16', 'time_limit': '1h'},
    }

    #: ``lamb`` (MLPerf's reference) or ``adamw``.
    #:
    #: :type: :class:`str`
    optimizer = variable(str, value='lamb')

    #: WordPiece tokenizer directory for a text :attr:`data` file.
    #:
    #: :type: :class:`str` or :obj:`None`
    tokenizer = variable(str, type(None), value=None)

    def finalize_settings(self):
        if self.model not in MODELS:
            raise BadInputError(f'unknown BERT model {self.model!r}: use '
                                f'-S model= one of {", ".join(MODELS)}')
        if self.optimizer not in ('lamb', 'adamw'):
            raise BadInputError(f'unknown optimizer {self.optimizer!r}: use '
                                f'-S optimizer=lamb or adamw')
        site = self.current_partition.extras.get('bert_data', {})
        if self.data is None:
            self.data = site.get('data', 'synthetic')
            self.tokenizer = self.tokenizer or site.get('tokenizer')
        if self.data != 'synthetic' and not self.tokenizer:
            raise BadInputError(f'data {self.data} needs a WordPiece '
                                f'tokenizer: set -S tokenizer=DIR')
        (self.layers, self.hidden, self.heads, self.intermediate,
         self.vocab, self.seq_length, self.max_predictions) = \
            MODELS[self.model]

    def program_args(self):
        args = ['--model', self.model,
                '--seq-length', self.seq_length,
                '--max-predictions', self.max_predictions,
                '--batch-size', self.batch_size,
                '--steps', self.steps,
                '--optimizer', self.optimizer,
                '--precision', self.precision,
                '--data', self.data]
        if self.tokenizer:
            args += ['--tokenizer', self.tokenizer]
        return [str(a) for a in args]

    def model_flops_per_sample(self):
        return flops.bert_pretraining_flops(self.seq_length, self.hidden,
                                            self.layers, self.vocab,
                                            self.intermediate)
