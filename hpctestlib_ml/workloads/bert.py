"""BERT-Large pretraining, MLPerf Training style: the check. The workload
(the model table, FLOPs, precision, model builder):
:mod:`hpctestlib_ml.registry.bert`."""
from reframe.core.builtins import performance_function, variable

from hpctestlib_ml import inputs
from hpctestlib_ml.errors import BadInputError
from hpctestlib_ml.registry import bert
from hpctestlib_ml.workloads.mlperf import MLLogTraining


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

    #: ``lamb`` (MLPerf's reference) or ``adamw``.
    #:
    #: :type: :class:`str`
    #: :default: ``'lamb'``
    optimizer = variable(str, value='lamb')

    #: WordPiece tokenizer directory for a text
    #: :attr:`~hpctestlib_ml.workloads.mlperf.MLLogTraining.data` file.
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
        model = bert.MODELS[self.model]
        args = ['--model', self.model,
                '--seq-length', model.seq_length,
                '--max-predictions', model.max_predictions,
                '--batch-size', self.batch_size,
                '--steps', self.steps,
                '--optimizer', self.optimizer,
                '--precision', self.precision,
                '--data', self.data]
        if self.tokenizer:
            args += ['--tokenizer', self.tokenizer]
        return [str(a) for a in args]

    def model_flops_per_sample(self):
        return bert.training_flops(self.model)

    @performance_function('')
    def eval_mlm_accuracy(self):
        '''Masked-LM accuracy on held-out batches (MLPerf's quality
        metric; its target after a full run: 0.720).'''
        return self.metric('eval_accuracy')
