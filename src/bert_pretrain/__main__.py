"""python -m bert_pretrain [options]: BERT pretraining, MLPerf-style logs.

Trains transformers' BertForPreTraining (masked LM + next sentence) on
synthetic token batches (default) or a text file (``--data FILE
--tokenizer DIR``), with LAMB (MLPerf's reference optimizer) or AdamW,
data-parallel over torch.distributed ranks (torchrun or srun's env://).
Rank 0 logs MLPerf Training events with the mlperf-logging package:
``:::MLLOG {... "key": "run_start" ...}``, a ``tracked_stats`` event per
step (global samples/s, step time, loss), ``run_stop`` with its status.
"""
import argparse
import sys

import torch

from mlperf_train import run_main

#: BertConfig fields of the sizes; bert-large is MLPerf's (24 x 1024, 16
#: heads), tiny the suite's CPU stand-in.
MODELS = {
    'tiny': dict(vocab_size=8192, hidden_size=256, num_hidden_layers=2,
                 num_attention_heads=4, intermediate_size=1024),
    'bert-large': dict(vocab_size=30522, hidden_size=1024,
                       num_hidden_layers=24, num_attention_heads=16,
                       intermediate_size=4096),
}


def parse_args(argv):
    p = argparse.ArgumentParser(description=__doc__)
    p.add_argument('--model', choices=list(MODELS), default='tiny')
    p.add_argument('--seq-length', type=int, default=128)
    p.add_argument('--max-predictions', type=int, default=20)
    p.add_argument('--batch-size', type=int, default=8, help='per rank')
    p.add_argument('--steps', type=int, default=10)
    p.add_argument('--optimizer', choices=('lamb', 'adamw'), default='lamb')
    p.add_argument('--lr', type=float, default=1e-3)
    p.add_argument('--precision', choices=('fp32', 'fp16', 'bf16'),
                   default='fp32')
    p.add_argument('--data', default='synthetic',
                   help="'synthetic' or a text file, one sentence a line")
    p.add_argument('--tokenizer', help='WordPiece tokenizer directory '
                   '(with --data FILE)')
    p.add_argument('--seed', type=int, default=42)
    return p.parse_args(argv)


def main(argv=None):
    args = parse_args(sys.argv[1:] if argv is None else argv)
    from transformers import BertConfig, BertForPreTraining

    from bert_pretrain import data, lamb
    from mlperf_train import (autocast, finish, log_setup, run_steps, start,
                              wrap_ddp)

    rank, world, device, log = start('bert', args.seed)
    mlc = log.constants

    config = BertConfig(max_position_embeddings=max(512, args.seq_length),
                        **MODELS[args.model])
    model = BertForPreTraining(config).to(device)
    params = sum(p.numel() for p in model.parameters())
    model = wrap_ddp(model, device, world)
    optimizer = (lamb.Lamb(model.parameters(), lr=args.lr)
                 if args.optimizer == 'lamb' else
                 torch.optim.AdamW(model.parameters(), lr=args.lr))

    if args.data == 'synthetic':
        batches = data.synthetic_batches(
            args.batch_size, args.seq_length, args.max_predictions,
            config.vocab_size, args.seed + rank)
    else:
        from transformers import BertTokenizerFast
        if not args.tokenizer:
            sys.exit('bert_pretrain: error: --data FILE needs --tokenizer DIR')
        tokenizer = BertTokenizerFast.from_pretrained(args.tokenizer)
        batches = data.text_batches(args.data, tokenizer, args.batch_size,
                                    args.seq_length, args.max_predictions,
                                    args.seed + rank)

    global_batch = args.batch_size * world
    log_setup(log, ((mlc.GLOBAL_BATCH_SIZE, global_batch),
                    (mlc.OPT_NAME, args.optimizer), (mlc.OPT_BASE_LR, args.lr),
                    ('max_sequence_length', args.seq_length),
                    ('max_predictions_per_seq', args.max_predictions),
                    ('model_parameters', params), ('world_size', world)))
    log.end(mlc.INIT_STOP)

    scaler = torch.amp.GradScaler(enabled=args.precision == 'fp16')
    model.train()

    def step(_):
        batch = {k: v.to(device) for k, v in next(batches).items()}
        with autocast(device, args.precision):
            loss = model(**batch).loss
        optimizer.zero_grad(set_to_none=True)
        scaler.scale(loss).backward()
        scaler.step(optimizer)
        scaler.update()
        return loss.item()

    status = run_steps(log, step, args.steps, global_batch, device, world)
    finish(world)
    return 0 if status == 'success' else 1


if __name__ == '__main__':
    run_main(main)
