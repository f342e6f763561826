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
from hpctestlib_ml import flops, model_info, program_tables, settings
from hpctestlib_ml.model_info import Published
from hpctestlib_ml.registry import PrecisionChoice
from hpctestlib_ml.registry.mlperf import mllog_workload

#: Model -> (layers, hidden, heads, intermediate, vocab, seq_length,
#: max_predictions): the program's own table (``src/bert_pretrain/
#: sizes.py``, read from the file, no torch).
MODELS = program_tables.load('bert_pretrain', 'sizes').MODELS

#: The counts published for BERT-Large: the model MLPerf trains, and
#: BERT-Large without its pooler and next-sentence head (1,051,650
#: parameters), transformers' ``BertForMaskedLM`` at bert-large's shape,
#: the count tables of model sizes often give.
PUBLISHED = {
    'benchmark': (
        Published(336_226_108, "MLPerf Training's BERT reference: encoder, "
                  "pooler, masked-LM head tied to the embeddings with its "
                  "bias, next-sentence head, vocabulary 30,522",
                  'https://github.com/mlcommons/training/tree/master/'
                  'retired_benchmarks/bert'),
        Published(335_174_458, "transformers' BertForMaskedLM at this "
                  "shape: no pooler or next-sentence head",
                  'https://github.com/huggingface/transformers/blob/main/'
                  'src/transformers/models/bert/modeling_bert.py',
                  built=False),
    ),
}

#: What the benchmark size trains in, and the reference.
PRECISION = PrecisionChoice(
    'fp16', 'fp32',
    'MLPerf Training closed BERT: NVIDIA\'s pytorch implementation '
    '(training_results_v2.0-v4.0 run_and_time.sh --fp16, fp32 master '
    'weights in DistributedFusedLAMB, a loss scale), v4.0 Dell, HPE, '
    'Fujitsu, Supermicro, ASUSTeK --fp16; the reference (mlcommons/'
    'training aa344c7 retired_benchmarks/bert, TF) trains fp32')


def pretraining_forward_flops(seq_len, hidden, layers, vocab, intermediate,
                              predictions):
    '''Forward FLOPs of one sequence through BERT pretraining as MLPerf's
    reference computes it: the encoder (:func:`~hpctestlib_ml.flops.
    transformer_forward_flops`), the masked-LM head at the *predictions*
    gathered positions only (a dense h x h transform and the h x V
    decoder), the pooler and the next-sentence head. BERT-Large at 512
    tokens and 76 predictions: 0.340 TFLOP (1.02 per trained sequence); a
    head at every position, as transformers' BertForPreTraining applies
    it, would add 28 GFLOP.'''
    encoder = flops.transformer_forward_flops(seq_len, hidden, layers,
                                              intermediate / hidden)
    mlm_head = 2 * predictions * (hidden * hidden + hidden * vocab)
    pooler_and_nsp = 2 * (hidden * hidden + hidden * 2)
    return encoder + mlm_head + pooler_and_nsp


def forward_flops(model):
    '''Forward FLOPs per sequence of BERT *model* (a key of MODELS).'''
    m = MODELS[model]
    return pretraining_forward_flops(m.seq_length, m.hidden, m.layers,
                                     m.vocab, m.intermediate,
                                     m.max_predictions)


def training_flops(model):
    '''Training FLOPs per sequence of BERT *model*.'''
    return flops.training_flops(forward_flops(model))


def build_model_info(size, device):
    name = model_info.named_size(size, WORKLOAD.sizes, 'model')
    program_tables.importable()
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
        f'{predictions} positions')


WORKLOAD = mllog_workload(
    name='bert', check='BERTLarge', program='bert_pretrain',
    sizes={
        'tiny': {'model': 'tiny', 'batch_size': 32, 'steps': 10,
                 'time_limit': '15m'},
        'benchmark': {'model': 'bert-large', 'batch_size': 24, 'steps': 100,
                      'precision': PRECISION.benchmark, 'time_limit': '1h'},
    },
    precision_choice=PRECISION, model_info=build_model_info,
    published=PUBLISHED,
    optimizer='lamb', benchmark='bert',
    # MLPerf Training 5.0.0: the last round with BERT; its BERT rules are
    # those of 3.0.0 to 5.0.0.
    mlperf_rules=('training', '5.0.0'),
    data="synthetic token batches (or a site's text and tokenizer)",
    names_note='BERT-Large is the model MLPerf Training trains',
    packages=('transformers', 'mlperf-logging'),
    variables=settings.variables('bert', [
        ('model', 'str', None, "BERT model; default: the size's",
         {'choices': settings.program_table('bert_pretrain', 'sizes',
                                               'MODELS')}),
        ('data', 'path', None, "'synthetic' or a text file; default: "
         "extras['bert_data']['data'], else synthetic",
         {'allowed': "'synthetic' or an absolute file"}),
        ('optimizer', 'str', 'lamb', "LAMB (MLPerf's reference) or AdamW",
         {'choices': ('lamb', 'adamw')}),
        ('tokenizer', 'path', None, 'WordPiece tokenizer directory, for a '
         "text data file; default: extras['bert_data']['tokenizer']",
         {'allowed': 'an absolute directory'}),
    ]),
    extras=settings.extras_keys('bert', [
        ('bert_data', 'dict', None, 'a text dataset: data, tokenizer',
         {'allowed': 'a mapping'}),
    ]))
