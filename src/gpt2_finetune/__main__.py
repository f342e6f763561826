"""python -m gpt2_finetune [options]: fine-tune a causal LM with HF Trainer.

Data and model, as run_clm's: ``--model gpt2 --dataset wikitext
--dataset-config wikitext-2-raw-v1`` from the Hugging Face cache, or the
directories ``hpcml prepare`` writes (``--model DIR --dataset-dir DIR``;
the suite's jobs, offline), or ``--tiny``: a random-init tiny
GPT-2, a corpus generated here (gpt2_finetune.corpus) and a byte-level BPE
trained on it, so nothing comes from a hub. Both go through the same
``datasets`` pipeline: load, tokenize, concatenate into blocks of the
model's context, train with ``--do-train``, evaluate with ``--do-eval``.

Trainer prints its metric tables (``***** train metrics *****``); each
step's time goes to one line, ``[hpcml] step N/M time T s samples S``, so
that steady-state throughput can be told from Trainer's (which includes
start-up). The model line, ``[hpcml] model gpt2 N parameters, vocabulary
V, layers L, width W, block size B, world size R, ...``, gives the shape
that was built, from which the check computes FLOPs (the tiny tokenizer's
vocabulary is whatever BPE learnt from the corpus, not a table's number).
"""
import argparse
import math
import os
import pathlib
import sys
import time


def parse_args(argv):
    p = argparse.ArgumentParser(description=__doc__)
    p.add_argument('--model', default='gpt2')
    p.add_argument('--dataset', default='wikitext')
    p.add_argument('--dataset-config', default='wikitext-2-raw-v1')
    p.add_argument('--dataset-dir', help='a dataset saved with '
                   'save_to_disk (hpcml prepare), instead of --dataset')
    p.add_argument('--tiny', action='store_true',
                   help='random-init tiny GPT-2 on a generated corpus')
    p.add_argument('--per-device-train-batch-size', type=int, default=8)
    p.add_argument('--per-device-eval-batch-size', type=int, default=8)
    p.add_argument('--block-size', type=int,
                   help="default: the model's context length")
    p.add_argument('--precision', choices=('fp32', 'fp16', 'bf16'),
                   default='fp32')
    p.add_argument('--num-train-epochs', type=float, default=3.0)
    p.add_argument('--max-steps', type=int, default=-1)
    p.add_argument('--do-train', action='store_true')
    p.add_argument('--do-eval', action='store_true')
    p.add_argument('--output-dir', default='gpt2-finetune-output')
    p.add_argument('--seed', type=int, default=42)
    p.add_argument('--logging-steps', type=int, default=1)
    p.add_argument('--workers', type=int, default=0)
    return p.parse_args(argv)


def tiny_model_and_data(workdir):
    '''A tokenizer trained on the generated corpus, and a tiny GPT-2.'''
    from tokenizers import ByteLevelBPETokenizer
    from transformers import GPT2Config, GPT2LMHeadModel, GPT2TokenizerFast

    from gpt2_finetune import corpus

    # Called by the first rank, then by the others (main_process_first):
    # they reuse its corpus and tokenizer instead of racing to write them.
    tok_dir = workdir / 'tokenizer'
    if (tok_dir / 'merges.txt').exists():
        files = {split: str(workdir / 'corpus' / f'{split}.txt')
                 for split in ('train', 'validation')}
    else:
        files = corpus.write(workdir / 'corpus')
        tok_dir.mkdir(parents=True, exist_ok=True)
        bpe = ByteLevelBPETokenizer()
        bpe.train(files=[files['train']], vocab_size=2000, min_frequency=2,
                  special_tokens=['<|endoftext|>'], show_progress=False)
        bpe.save_model(str(tok_dir))
    # GPT2TokenizerFast(vocab_file=..., merges_file=...) yields a 1-token
    # vocabulary in transformers 5.x; from_pretrained(dir) reads them right.
    tokenizer = GPT2TokenizerFast.from_pretrained(str(tok_dir))
    tokenizer.pad_token = tokenizer.eos_token = '<|endoftext|>'
    config = GPT2Config(vocab_size=len(tokenizer), n_positions=128,
                        n_embd=256, n_layer=2, n_head=4,
                        bos_token_id=tokenizer.eos_token_id,
                        eos_token_id=tokenizer.eos_token_id)
    model = GPT2LMHeadModel(config)
    data = ('text', {'data_files': files})
    return tokenizer, model, data


def model_config(name):
    '''The config of model *name*: from the Hugging Face cache (never the
    network), else, for ``gpt2``, transformers' ``GPT2Config()``, whose
    defaults are the published gpt2 (124M) config (12 layers, width 768,
    12 heads, context 1024, vocabulary 50257).'''
    from transformers import AutoConfig, GPT2Config
    try:
        return AutoConfig.from_pretrained(name, local_files_only=True)
    except OSError:
        if name == 'gpt2':
            return GPT2Config()
        raise


def block_size_of(config):
    '''Tokens per training block: the model's context, at most 1024
    (run_clm's default).'''
    return min(config.n_positions, 1024)


def hub_model_and_data(args):
    '''The model and tokenizer *args.model* (a name in the Hugging Face
    cache or a directory, e.g. one ``hpcml prepare`` wrote) and the
    dataset: ``--dataset-dir`` (``save_to_disk``'s) or the named one.'''
    from transformers import AutoModelForCausalLM, AutoTokenizer
    tokenizer = AutoTokenizer.from_pretrained(args.model)
    model = AutoModelForCausalLM.from_pretrained(args.model)
    if args.dataset_dir:
        return tokenizer, model, ('from_disk', args.dataset_dir)
    return tokenizer, model, (args.dataset, {'name': args.dataset_config})


def lm_datasets(tokenizer, data, block_size, main_first):
    '''Tokenize and cut the text into blocks of *block_size* tokens (the
    remainder of each map batch is dropped), labels = inputs.'''
    import datasets
    name, kwargs = data
    raw = (datasets.load_from_disk(kwargs) if name == 'from_disk' else
           datasets.load_dataset(name, **kwargs))

    def tokenize(batch):
        return tokenizer(batch['text'])

    def group(batch):
        joined = {k: sum(batch[k], []) for k in batch}
        length = len(joined['input_ids']) // block_size * block_size
        blocks = {k: [v[i:i + block_size] for i in range(0, length,
                                                         block_size)]
                  for k, v in joined.items()}
        blocks['labels'] = [ids[:] for ids in blocks['input_ids']]
        return blocks

    with main_first():
        tokenized = raw.map(tokenize, batched=True,
                            remove_columns=raw['train'].column_names)
        return tokenized.map(group, batched=True)


def step_times(global_batch, is_main, rank, synchronize,
               end_warmup=lambda: None):
    '''A Trainer callback printing one line per optimizer step with its
    wall time, and each rank's ``timing`` record at the end (transformers
    is imported here, once main() runs).

    A step's time runs from the end of the previous step to the end of
    this one, both after *synchronize* (the GPU's queue drained): the
    optimizer's last kernels, the next batch and Trainer's logging of the
    previous step (which Trainer does between the two callbacks) all fall
    in some step. Of it, the time before ``on_step_begin`` is the
    ``timing`` record's data time (the batch fetch and that logging); the
    first step's time runs from its own begin.'''
    from transformers import TrainerCallback

    import hpcml_log

    class StepTimes(TrainerCallback):
        last_end = None
        data_s = compute_s = 0.0
        steps = 0

        def on_step_begin(self, args, state, control, **kw):
            synchronize()
            self.begin = time.perf_counter()

        def on_step_end(self, args, state, control, **kw):
            synchronize()
            now = time.perf_counter()
            start = self.begin if self.last_end is None else self.last_end
            if self.last_end is not None:      # steady state: from step 2
                self.data_s += self.begin - self.last_end
                self.compute_s += now - self.begin
                self.steps += 1
            self.last_end = now
            if state.global_step == 1:
                self.timed_start = time.time()
                end_warmup()       # the memory peaks of the timed steps
            if is_main and state.global_step == state.max_steps:
                # The timed region in Unix time, for the energy figures.
                hpcml_log.emit_timed_region(self.timed_start, time.time())
            if is_main:
                print(f'[hpcml] step {state.global_step}/{state.max_steps}'
                      f' time {now - start:.4f} s samples {global_batch}',
                      flush=True)

        def on_train_end(self, args, state, control, **kw):
            hpcml_log.emit_timing(rank, self.steps, self.data_s,
                                  self.compute_s)

    return StepTimes()


def synchronize(device):
    '''A function that waits for *device*'s queued work (nothing on the
    CPU).'''
    import torch
    if device.type == 'cuda':
        return lambda: torch.cuda.synchronize(device)
    return lambda: None


def main(argv=None):
    args = parse_args(sys.argv[1:] if argv is None else argv)
    import torch
    from transformers import Trainer, TrainingArguments, set_seed

    import torch_device
    # The device Trainer takes (accelerate: local process index modulo the
    # devices seen) is the one chosen here: checked, made current, and its
    # math mode set (Trainer's tf32=None leaves PyTorch's, IEEE fp32).
    device = torch_device.select_device_or_exit()
    torch_device.refuse_emulated_bf16(device, args.precision == 'bf16')
    torch_device.set_math_mode(device)
    set_seed(args.seed)
    workdir = pathlib.Path(args.output_dir)
    training_args = TrainingArguments(
        output_dir=str(workdir), do_train=args.do_train,
        do_eval=args.do_eval,
        per_device_train_batch_size=args.per_device_train_batch_size,
        per_device_eval_batch_size=args.per_device_eval_batch_size,
        num_train_epochs=args.num_train_epochs, max_steps=args.max_steps,
        fp16=args.precision == 'fp16', bf16=args.precision == 'bf16',
        logging_steps=args.logging_steps, save_strategy='no',
        report_to=[], seed=args.seed, disable_tqdm=True,
        dataloader_num_workers=args.workers,
        # transformers 5.x defaults this to True; then, with gloo DDP, the
        # logged train loss and eval_loss come out multiplied by the world
        # size (measured: 12.5 with 2 ranks vs 6.25 with 1, same data).
        average_tokens_across_devices=False,
        ddp_backend=('gloo' if not torch.cuda.is_available() and
                     int(os.environ.get('WORLD_SIZE', 1)) > 1 else None),
    )
    with training_args.main_process_first(local=False):
        if args.tiny:
            tokenizer, model, data = tiny_model_and_data(workdir)
        else:
            tokenizer, model, data = hub_model_and_data(args)
    block_size = args.block_size or block_size_of(model.config)

    datasets = lm_datasets(tokenizer, data, block_size,
                           training_args.main_process_first)
    world = training_args.world_size
    rank = training_args.process_index
    is_main = rank == 0
    torch_device.emit_device(training_args.device, rank)
    if is_main:
        config = model.config
        print(f'[hpcml] model {config.model_type} '
              f'{sum(p.numel() for p in model.parameters())} parameters, '
              f'vocabulary {config.vocab_size}, layers {config.n_layer}, '
              f'width {config.n_embd}, '
              f'block size {block_size}, world size {world}, '
              f'train blocks {len(datasets["train"])}, '
              f'validation blocks {len(datasets["validation"])}', flush=True)

    trainer = Trainer(
        model=model, args=training_args,
        train_dataset=datasets['train'] if args.do_train else None,
        eval_dataset=datasets['validation'] if args.do_eval else None,
        callbacks=[step_times(args.per_device_train_batch_size * world,
                              is_main, rank,
                              synchronize(training_args.device),
                              lambda: torch_device.end_warmup(
                                  training_args.device))],
    )
    if args.do_train:
        result = trainer.train()
        metrics = dict(result.metrics)
        metrics['train_samples'] = len(datasets['train'])
        trainer.log_metrics('train', metrics)
        torch_device.emit_memory(training_args.device, rank)
    if args.do_eval:
        metrics = trainer.evaluate()
        metrics['eval_samples'] = len(datasets['validation'])
        try:
            metrics['perplexity'] = math.exp(metrics['eval_loss'])
        except OverflowError:
            metrics['perplexity'] = float('inf')
        trainer.log_metrics('eval', metrics)


if __name__ == '__main__':
    import fast_exit
    fast_exit.run(main)
