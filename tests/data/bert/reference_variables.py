"""Prints the trainable variables (name, shape) of MLPerf Training's
reference BERT-Large pretraining graph: run with the reference's directory
(mlcommons/training aa344c7, retired_benchmarks/bert) as the argument,
    python reference_variables.py REFDIR > reference_variables.txt
It builds what run_pretraining.model_fn builds: modeling.BertModel (the
BERT-Large bert_config.json: 24 x 1024, 16 heads, vocabulary 30522, 2
token types) and the two heads (get_masked_lm_output,
get_next_sentence_output). Two stand-ins let TensorFlow 2.21 with Keras 3
build the graph without changing a name: tf.layers.dense (absent with Keras
3) is a get_variable dense under the same scope ('dense' or its name,
variables 'kernel' and 'bias'), and deferred_grad_optimizer (imported by
optimization.py, unused here, needs XLA's sharding module) is an empty
module."""
import sys
import types

import tensorflow.compat.v1 as tf


def dense(inputs, units, activation=None, kernel_initializer=None,
          name=None):
    with tf.variable_scope(name or 'dense'):
        kernel = tf.get_variable('kernel', [inputs.shape[-1], units],
                                 initializer=kernel_initializer)
        bias = tf.get_variable('bias', [units],
                               initializer=tf.zeros_initializer())
    out = tf.matmul(inputs, kernel) + bias
    return activation(out) if activation else out


def main(refdir):
    tf.disable_eager_execution()
    tf.layers = types.SimpleNamespace(dense=dense)
    sys.modules['deferred_grad_optimizer'] = types.ModuleType(
        'deferred_grad_optimizer')
    sys.path.insert(0, refdir)
    import modeling
    import run_pretraining
    run_pretraining.FLAGS(['reference_variables'])
    config = modeling.BertConfig(
        vocab_size=30522, hidden_size=1024, num_hidden_layers=24,
        num_attention_heads=16, intermediate_size=4096,
        max_position_embeddings=512, type_vocab_size=2)
    ids = tf.placeholder(tf.int32, [2, 16])
    model = modeling.BertModel(config, is_training=True, input_ids=ids,
                               input_mask=ids, token_type_ids=ids)
    positions = tf.placeholder(tf.int32, [2, 4])
    weights = tf.placeholder(tf.float32, [2, 4])
    run_pretraining.get_masked_lm_output(
        config, model.get_sequence_output(), model.get_embedding_table(),
        positions, positions, weights)
    run_pretraining.get_next_sentence_output(
        config, model.get_pooled_output(), tf.placeholder(tf.int32, [2, 1]))
    for variable in tf.trainable_variables():
        print(variable.name, variable.shape.as_list())


if __name__ == '__main__':
    main(sys.argv[1])
