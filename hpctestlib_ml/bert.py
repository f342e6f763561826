"""BERT-Large pretraining, MLPerf Training style.

transformers' BertForPreTraining (masked LM + next-sentence prediction),
``bert-large`` (24 layers, 1024 hidden, 16 heads, sequence 512, 76
predictions) at benchmark size, ``tiny`` on CPUs; synthetic token batches by
default, or a text file and WordPiece tokenizer (``-S data=`` and
``-S tokenizer=``, or the partition's ``extras['bert_data']``); LAMB or
AdamW. The program logs ``:::MLLOG`` events, read by the shared
:mod:`hpctestlib_ml.parsers.mllog`.
"""
from reframe.core.builtins import performance_function, variable

from hpctestlib_ml import flops
from hpctestlib_ml.base import BadInputError, MLTrainingTest
from hpctestlib_ml.parsers import mllog as parser

#: (layers, hidden, heads, intermediate, vocab, sequence, max predictions)
MODELS = {
    'tiny': (2, 128, 2, 512, 8192, 128, 20),
    'bert-large': (24, 1024, 16, 4096, 30522, 512, 76),
}


class BertPretraining(MLTrainingTest):
    '''BertForPreTraining with MLPerf-style logging.'''

    workload = 'bert'
    program = 'bert_pretrain'
    throughput_metric = 'samples_per_second'
    sizes = {
        'tiny': {'model': 'tiny', 'batch_size': 8, 'steps': 10,
                 'time_limit': '15m'},
        'benchmark': {'model': 'bert-large', 'batch_size': 24, 'steps': 100,
                      'precision': 'bf16', 'time_limit': '1h'},
    }

    #: ``tiny`` or ``bert-large``; default: the size's.
    #:
    #: :type: :class:`str` or :obj:`None`
    model = variable(str, type(None), value=None)

    #: ``lamb`` (MLPerf's reference) or ``adamw``.
    #:
    #: :type: :class:`str`
    optimizer = variable(str, value='lamb')

    #: ``synthetic``, or a text file (one sentence per line) read with
    #: :attr:`tokenizer`; default: the partition's ``extras['bert_data']``
    #: (``{'data': FILE, 'tokenizer': DIR}``), else synthetic.
    #:
    #: :type: :class:`str` or :obj:`None`
    data = variable(str, type(None), value=None)

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

    def extract_metrics(self, text):
        metrics = parser.extract_metrics(text)
        world = metrics['world_size']
        metrics['sequences_per_second_per_gpu'] = (
            metrics['samples_per_second'] / world
            if metrics['samples_per_second'] and world else None)
        return metrics

    def log_problems(self, text):
        m = self.metrics()
        if not m['events']:
            return ['no :::MLLOG event in the log']
        problems = []
        if m['status'] != 'success':
            problems.append(f'run_stop status {m["status"]!r}, not success')
        if m['steps'] != self.steps:
            problems.append(f'{m["steps"]} of {self.steps} steps logged')
        if m['world_size'] != self.layout.world_size:
            problems.append(f'BERT ran with world size {m["world_size"]}, '
                            f'the job has {self.layout.world_size} ranks')
        if not m['losses_finite']:
            problems.append('training loss is not finite')
        return problems

    @performance_function('samples/s')
    def samples_per_second(self):
        '''Sequences/s over all ranks, steady state (first step skipped).'''
        return self.metric('samples_per_second')

    @performance_function('samples/s')
    def sequences_per_second_per_gpu(self):
        return self.metric('sequences_per_second_per_gpu')

    @performance_function('s')
    def time_per_step_secs(self):
        return self.metric('time_per_step_secs')

    @performance_function('s')
    def run_time_secs(self):
        '''run_stop - run_start, as MLPerf times a run.'''
        return self.metric('run_time_secs')
