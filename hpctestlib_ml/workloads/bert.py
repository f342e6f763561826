"""BERT-Large pretraining, MLPerf Training style.

The model MLPerf Training's BERT reference trains (mlcommons/training
``language_model/tensorflow/bert/run_pretraining.py``): the encoder with
its pooler, the masked-LM head applied at the gathered masked positions
(at most 76 per sequence) and the next-sentence head, loss = masked LM +
next sentence; 336,226,108 parameters at ``bert-large`` (24 layers, 1024
hidden, 16 heads, sequence 512, 76 predictions), ``tiny`` on CPUs.
Synthetic token batches by default, or a text file and WordPiece tokenizer
(``-S data=`` and ``-S tokenizer=``, or the partition's
``extras['bert_data']``); LAMB or AdamW. The program logs ``:::MLLOG``
events as MLPerf Training 5.0's rules ask, read by the shared
:mod:`hpctestlib_ml.parsers.mllog`.
"""
from reframe.core.builtins import performance_function, variable

from hpctestlib_ml import (flops, inputs, model_info, precisions,
                           program_tables)
from hpctestlib_ml.errors import BadInputError
from hpctestlib_ml.parsers import mllog as parser
from hpctestlib_ml.workloads import Headline, Workload
from hpctestlib_ml.workloads.mlperf import MLLogTraining

#: Model -> (layers, hidden, heads, intermediate, vocab, seq_length,
#: max_predictions): the program's own table (``src/bert_pretrain/
#: sizes.py``, read from the file, no torch).
MODELS = program_tables.load('bert_pretrain', 'sizes').MODELS

#: Counts published for a model that the program does not build: BERT-Large
#: without the pooler and the next-sentence head (1,051,650 parameters),
#: transformers' ``BertForMaskedLM`` at bert-large's shape, the count
#: tables of model sizes often give; MLPerf trains both.
PUBLISHED_PARAMS = {
    'bert-large': ((335_174_458, "transformers' BertForMaskedLM at this "
                                 "shape: no pooler or next-sentence head"),),
}


class BERTLargeTraining(MLLogTraining):
    '''BertForPreTraining with MLPerf-style logging; a sample is a sequence,
    so ``samples_per_second_per_gpu`` is sequences/s per GPU. ``data`` is
    ``synthetic`` or a text file (one sentence per line) read with
    :attr:`tokenizer`; default: the partition's ``extras['bert_data']``
    (``{'data': FILE, 'tokenizer': DIR}``).

    .. list-table:: Summary (beside MLTrainingTest's)
       :header-rows: 0

       * - Parameters
         - none
       * - Variables
         - ``model``, ``data``, ``optimizer``, ``tokenizer``
       * - Metrics
         - ``samples_per_second`` (samples/s),
           ``samples_per_second_per_gpu`` (samples/s),
           ``time_per_step_secs`` (s), ``run_time_secs`` (s),
           ``eval_mlm_accuracy``
       * - Partition extras
         - ``bert_data``
    '''

    workload = 'bert'
    program = 'bert_pretrain'
    sizes = {
        'tiny': {'model': 'tiny', 'batch_size': 32, 'steps': 10,
                 'time_limit': '15m'},
        'benchmark': {'model': 'bert-large', 'batch_size': 24, 'steps': 100,
                      'precision': precisions.benchmark('bert'),
                      'time_limit': '1h'},
    }

    #: ``lamb`` (MLPerf's reference) or ``adamw``.
    #:
    #: :type: :class:`str`
    #: :default: ``'lamb'``
    optimizer = variable(str, value='lamb')

    #: WordPiece tokenizer directory for a text :attr:`data` file.
    #:
    #: :type: :class:`str` or :obj:`None`
    #: :default: :obj:`None` (``extras['bert_data']['tokenizer']``)
    tokenizer = variable(str, type(None), value=None)

    def finalize_settings(self):
        site = self.current_partition.extras.get('bert_data', {})
        self.data_source = '-S data'
        self.tokenizer_source = '-S tokenizer'
        if self.data is None:
            self.data_source = "extras['bert_data']['data']"
            self.data = site.get('data', 'synthetic')
            if not self.tokenizer:
                self.tokenizer_source = "extras['bert_data']['tokenizer']"
                self.tokenizer = site.get('tokenizer')
        if self.data != 'synthetic' and not self.tokenizer:
            raise BadInputError(f'data {self.data} needs a WordPiece '
                                f'tokenizer: set -S tokenizer=DIR')
        (self.layers, self.hidden, self.heads, self.intermediate,
         self.vocab, self.seq_length, self.max_predictions) = \
            MODELS[self.model]
        self.name_platform()

    def input_paths(self):
        '''The text file and its tokenizer, unless the data are
        synthetic.'''
        if self.data == 'synthetic':
            return []
        return [inputs.Input(self.data_source, self.data, 'file',
                             words=('synthetic',)),
                inputs.Input(self.tokenizer_source, self.tokenizer, 'dir')]

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
        return flops.training_flops(forward_flops(self.model))

    @performance_function('')
    def eval_mlm_accuracy(self):
        '''Masked-LM accuracy on held-out batches (MLPerf's quality
        metric; its target after a full run: 0.720).'''
        return self.metric('eval_accuracy')


def forward_flops(model):
    '''Forward FLOPs per sequence of BERT *model* (a key of MODELS).'''
    m = MODELS[model]
    return flops.bert_pretraining_forward_flops(
        m.seq_length, m.hidden, m.layers, m.vocab, m.intermediate,
        m.max_predictions)


def build_model_info(size, device):
    name = model_info.named_size(size, BERTLargeTraining.sizes, 'model')
    model_info.programs_importable()
    from bert_pretrain import data, model as program
    layers, hidden, _, _, vocab, seq, predictions = MODELS[name]
    device = device or ('cpu' if name == 'tiny' else 'meta')
    with model_info.built_on(device):
        model = program.build(name)
    batch = next(data.synthetic_batches(1, seq, predictions, vocab, 0))

    def inputs(dev):
        # No attention mask: an all-ones mask is the same computation, and
        # transformers reads a mask's values, which meta tensors have not.
        ids, segments, _, positions = program.model_inputs(batch)
        return ids.to(dev), segments.to(dev), None, positions.to(dev)

    return model_info.torch_info(
        'bert', size, name, model, inputs, forward_flops(name), device,
        f'BERT pretraining as MLPerf trains it: {layers} layers, hidden '
        f'{hidden}, vocabulary {vocab}, {seq} tokens, masked-LM head at '
        f'{predictions} positions',
        published_params=PUBLISHED_PARAMS.get(name, ()))


WORKLOAD = Workload(
    name='bert', check='BERTLarge', program='bert_pretrain', parser=parser,
    headline=Headline('samples_per_second'), model_info=build_model_info,
    optimizer='lamb',
    benchmark='bert',
    data="synthetic token batches (or a site's text and tokenizer)",
    names_note='BERT-Large is the model MLPerf Training trains',
    packages=('transformers', 'mlperf-logging'),
    precisions=precisions.PROGRAM)
