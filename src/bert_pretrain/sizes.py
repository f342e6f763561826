"""BERT's model sizes as numbers (no torch here, so the suite's checks,
FLOPs and model-info read the same table the program builds from).

``bert-large`` is MLPerf Training's (mlcommons/training
``language_model/tensorflow/bert``, its ``bert_config.json``: 24 layers of
1024 hidden, 16 heads, intermediate 4096, vocabulary 30522; sequences of
512 tokens with at most 76 masked-LM predictions); ``tiny`` the suite's
CPU stand-in.
"""
import collections

#: A model's shape, and the sequence length and masked-LM predictions per
#: sequence that the suite's checks train it at.
Model = collections.namedtuple(
    'Model', 'layers hidden heads intermediate vocab seq_length '
    'max_predictions')

MODELS = {
    'tiny': Model(layers=2, hidden=256, heads=4, intermediate=1024,
                  vocab=8192, seq_length=128, max_predictions=20),
    'bert-large': Model(layers=24, hidden=1024, heads=16, intermediate=4096,
                        vocab=30522, seq_length=512, max_predictions=76),
}


def bert_config_fields(name):
    '''transformers' ``BertConfig`` fields of model *name*.'''
    m = MODELS[name]
    return dict(vocab_size=m.vocab, hidden_size=m.hidden,
                num_hidden_layers=m.layers, num_attention_heads=m.heads,
                intermediate_size=m.intermediate)
