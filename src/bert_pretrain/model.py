"""BERT pretraining as MLPerf Training's BERT reference trains it.

The reference (mlcommons/training ``language_model/tensorflow/bert``,
``run_pretraining.py`` and ``modeling.py``) trains the whole pretraining
network: the encoder with its pooler, the masked-LM head (a dense +
GeLU + LayerNorm transform, then a decoder tied to the word embeddings plus
an output bias) and the next-sentence head on the pooled output; the loss
is ``masked_lm_loss + next_sentence_loss``. Its masked-LM head runs only at
the masked positions, gathered (``gather_indexes``) from the sequence: at
most ``max_predictions_per_seq`` (76) per 512-token sequence, padding slots
weighted 0; the masked-LM loss is sum(weight x loss) / (sum(weight) +
1e-5).

Here the modules are transformers' ``BertForPreTraining``, whose
parameters are the reference's one for one (BERT-Large, vocabulary 30522:
336,226,108; the embedding and the decoder are one tensor), and
:class:`MLPerfBertPretraining` gives them the reference's forward pass.
"""
import torch
from torch import nn

from bert_pretrain.sizes import bert_config_fields


class MLPerfBertPretraining(nn.Module):
    '''BertForPreTraining's modules with MLPerf's forward: masked-LM
    logits at the gathered positions only, and the reference's loss.'''

    def __init__(self, config):
        super().__init__()
        from transformers import BertForPreTraining
        self.pretraining = BertForPreTraining(config)

    def forward(self, input_ids, token_type_ids, attention_mask,
                masked_lm_positions):
        '''(masked-LM logits [batch, predictions, vocab], next-sentence
        logits [batch, 2]).'''
        net = self.pretraining
        encoded = net.bert(input_ids=input_ids,
                           token_type_ids=token_type_ids,
                           attention_mask=attention_mask)
        sequence = encoded.last_hidden_state
        index = masked_lm_positions.unsqueeze(-1).expand(
            -1, -1, sequence.shape[-1])
        at_masks = torch.gather(sequence, 1, index)
        return (net.cls.predictions(at_masks),
                net.cls.seq_relationship(encoded.pooler_output))


def pretraining_loss(outputs, batch):
    '''The reference's ``total_loss``: the weighted masked-LM loss plus the
    next-sentence loss.'''
    mlm_logits, nsp_logits = outputs
    per_prediction = nn.functional.cross_entropy(
        mlm_logits.float().flatten(0, 1), batch['masked_lm_ids'].flatten(),
        reduction='none')
    weights = batch['masked_lm_weights'].flatten()
    masked_lm = (weights * per_prediction).sum() / (weights.sum() + 1e-5)
    next_sentence = nn.functional.cross_entropy(
        nsp_logits.float(), batch['next_sentence_labels'])
    return masked_lm + next_sentence


def masked_lm_hits(outputs, batch):
    '''(correct, counted) masked-LM predictions, weighted as the
    reference's ``masked_lm_accuracy``.'''
    mlm_logits, _ = outputs
    weights = batch['masked_lm_weights']
    correct = (mlm_logits.argmax(-1) == batch['masked_lm_ids']).float()
    return (weights * correct).sum(), weights.sum()


def build(name, max_position_embeddings=512):
    '''The network of model *name* (a key of
    :data:`bert_pretrain.sizes.MODELS`).'''
    from transformers import BertConfig
    config = BertConfig(max_position_embeddings=max_position_embeddings,
                        **bert_config_fields(name))
    return MLPerfBertPretraining(config)


def model_inputs(batch):
    '''The forward's arguments from a batch dict.'''
    return (batch['input_ids'], batch['token_type_ids'],
            batch['attention_mask'], batch['masked_lm_positions'])
