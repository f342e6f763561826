"""What a Megatron case runs: Megatron-LM's ``pretrain_gpt.py`` or the
Megatron-Core fallback, on which data, with which arguments, and where the
run departs from the benchmark's configuration."""
from hpctestlib_ml.errors import BadInputError
from hpctestlib_ml.parsers import megatron as parser
from hpctestlib_ml.registry.megatron import caraml
from hpctestlib_ml.registry.megatron.models import (
    CARAML_POSITION_EMBEDDING, GPT2_VOCAB, MODELS, model_arguments,
    model_departures)


def pretrain_arguments(shape, tp, pp, micro_batch, global_batch, iterations,
                       precision, data=None,
                       position_embedding_type=CARAML_POSITION_EMBEDDING,
                       untie_embeddings=False):
    '''``pretrain_gpt.py``'s arguments, as strings: CARAML's per size
    (:mod:`hpctestlib_ml.registry.megatron.caraml`) with *shape*, the layout, the batch,
    *iterations* of it, *precision* and *data* (``data_path``,
    ``vocab_file``, ``merge_file``; mock data without ``data_path``).'''
    data = data or {}
    args = ['--tensor-model-parallel-size', tp,
            '--pipeline-model-parallel-size', pp]
    args += model_arguments(shape, position_embedding_type, untie_embeddings)
    args += ['--micro-batch-size', micro_batch,
             '--global-batch-size', global_batch,
             '--train-samples', iterations * global_batch]
    if data.get('data_path'):
        args += ['--vocab-file', data.get('vocab_file', ''),
                 '--merge-file', data.get('merge_file', ''),
                 '--tokenizer-type', 'GPT2BPETokenizer',
                 '--data-path', data['data_path']]
    else:
        args += ['--mock-data', '--tokenizer-type', 'NullTokenizer',
                 '--vocab-size', shape['vocab']]
    args += caraml.arguments(precision)
    args += caraml.OUTPUT + ['--log-throughput']
    return [str(a) for a in args]


def program_and_data(model_size, extras, megatron_lm=None, data_path=None):
    '''(Megatron-LM checkout or None, data settings) of a case: the
    variables' values, else the partition's ``extras['megatron_lm']`` and
    ``extras['megatron_data']``; an indexed dataset needs Megatron-LM and
    the GPT-2 vocabulary (a :class:`~hpctestlib_ml.errors.BadInputError`
    naming the fix otherwise).'''
    if megatron_lm is None:
        megatron_lm = extras.get('megatron_lm')
    data = dict(extras.get('megatron_data', {}))
    if data_path:
        data['data_path'] = data_path
    vocab = MODELS[model_size]['vocab']
    if data.get('data_path') and vocab != GPT2_VOCAB:
        raise BadInputError(f'{model_size} trains on mock data with its own '
                            f'vocabulary ({vocab}); the indexed dataset is '
                            f'GPT-2 BPE: leave data_path unset')
    if data.get('data_path') and not megatron_lm:
        raise BadInputError("an indexed dataset needs Megatron-LM itself: set "
                            "-S megatron_lm= (or extras 'megatron_lm'), or "
                            "leave data_path unset for mock data")
    return megatron_lm, data


def departures(data, log_text, shape=None, vocab=None):
    '''The ``departures`` of a run: mock data where CARAML trains on
    OSCAR, where the model departs from the published one
    (:func:`model_departures` of *shape* and *vocab*), and what the
    Megatron-Core fallback says it runs otherwise than Megatron-LM would
    (its ``departures from Megatron-LM`` line); 'none' where none.'''
    found = [] if data.get('data_path') else [
        "mock data (no extras['megatron_data'] or -S data_path)"]
    if shape is not None:
        found += model_departures(shape, vocab)
    match = parser.departures(log_text)
    if match:
        found.append(match)
    return '; '.join(found) or 'none'
