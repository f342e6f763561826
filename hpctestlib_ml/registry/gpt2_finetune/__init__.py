"""GPT-2 fine-tuning on WikiText-2 with Hugging Face Trainer (the workload
of transformers' run_clm example, as NVIDIA and others publish it).

Benchmark size: ``gpt2`` (124M) on ``wikitext-2-raw-v1``, per-device batch 8,
blocks of 1024 tokens, 3 epochs, from the directory ``hpcml prepare
gpt2_finetune`` fills once on a machine with internet (jobs run offline;
a case whose directory lacks them fails at setup, naming that command;
:mod:`.prepare`). Tiny size: a
random-init 2-layer GPT-2, a corpus and tokenizer the program generates,
the same Trainer and datasets code. Precision is a parameter: fp32, fp16,
bf16 (CPU partitions: fp32 only).
"""
import pathlib
import tempfile

from hpctestlib_ml import (flops, model_info, precisions, program_tables,
                           settings)
from hpctestlib_ml.model_info import Published
from hpctestlib_ml.parsers import hf_trainer as parser
from hpctestlib_ml.registry import Headline, Workload
from hpctestlib_ml.registry.gpt2_finetune import prepare


def causal_lm_forward_flops(seq_len, width, layers, vocab):
    '''Forward FLOPs of one sequence through a GPT-2-style causal LM: the
    transformer's (:func:`~hpctestlib_ml.flops.transformer_forward_flops`,
    full s x s attention as PyTorch's attention kernels compute it) plus
    the LM head's 2 s h V. Embedding lookups are free.'''
    return (flops.transformer_forward_flops(seq_len, width, layers) +
            2 * seq_len * width * vocab)


def causal_lm_training_flops(seq_len, width, layers, vocab):
    '''Training FLOPs of one sequence through a GPT-2-style causal LM:
    3 x :func:`causal_lm_forward_flops`.'''
    return flops.training_flops(causal_lm_forward_flops(seq_len, width,
                                                        layers, vocab))


def build_model_info(size, device):
    name = model_info.named_size(size, WORKLOAD.sizes, 'model')
    program_tables.importable()
    import torch
    from gpt2_finetune import __main__ as program
    if name == 'tiny':
        device = device or 'cpu'
        with tempfile.TemporaryDirectory() as workdir:
            # The program's own tokenizer, trained on its generated corpus:
            # the vocabulary the tiny model really has.
            _, model, _ = program.tiny_model_and_data(pathlib.Path(workdir))
    else:
        device = device or 'meta'
        from transformers import AutoModelForCausalLM
        config = program.model_config(name)
        with model_info.built_on(device):
            model = AutoModelForCausalLM.from_config(config)
    config = model.config
    block = program.block_size_of(config)
    shape = (config.n_layer, config.n_embd, block, config.vocab_size)

    def inputs(dev):
        return (torch.zeros(1, block, dtype=torch.long, device=dev),)

    return model_info.torch_info(
        'gpt2_finetune', size, name, model, inputs,
        causal_lm_forward_flops(block, config.n_embd, config.n_layer,
                                config.vocab_size), device,
        f'GPT-2 {name}: {shape[0]} layers, width {shape[1]}, block '
        f'{shape[2]}, vocabulary {shape[3]}')


#: The count published for the model at benchmark size: GPT-2 small.
PUBLISHED = {'benchmark': (Published(
    124_439_808, 'GPT-2 small ("124M"), output layer tied: the Hub\'s gpt2 '
    'checkpoint (Radford et al. 2019, "Language Models are Unsupervised '
    'Multitask Learners", list it as 117M)',
    'https://huggingface.co/openai-community/gpt2'),)}


WORKLOAD = Workload(
    name='gpt2_finetune', check='GPT2FineTune', program='gpt2_finetune',
    parser=parser, headline=Headline('samples_per_second'),
    sizes={
        'tiny': {'model': 'tiny', 'batch_size': 16, 'steps': 40,
                 'time_limit': '15m'},
        'benchmark': {'model': 'gpt2', 'batch_size': 8, 'time_limit': '2h'},
    },
    throughput_metric='samples_per_second',
    whole_run_metrics=('train_runtime', 'train_samples_per_second'),
    model_info=build_model_info,
    published=PUBLISHED, optimizer='adamw',
    prepare=prepare.prepare_gpt2_finetune,
    packages=('transformers', 'accelerate', 'datasets'),
    precisions=precisions.PROGRAM,
    variables=settings.variables('gpt2_finetune', [
        ('model', 'str', None, "tiny or a Hugging Face model name; default: "
         "the size's", {'allowed': 'tiny or a Hugging Face model name'}),
        ('prepared_dir', 'path', None, "where hpcml prepare put the model "
         "and dataset; default: extras['prepared_dir'], else "
         "HPCML_PREPARED_DIR", {'allowed': 'an absolute directory'}),
        ('epochs', 'float', 3.0, 'epochs at benchmark size',
         {'minimum': 0, 'exclusive': True}),
    ]))
