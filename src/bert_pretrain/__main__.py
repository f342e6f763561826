"""python -m bert_pretrain [options]: BERT pretraining, MLPerf-style logs.

Trains BERT as MLPerf Training's BERT reference does
(:mod:`bert_pretrain.model`: masked LM at the gathered masked positions +
next sentence) on synthetic token batches (default) or a text file
(``--data FILE --tokenizer DIR``), with LAMB (the reference's optimizer,
:mod:`bert_pretrain.lamb`: no weight decay or trust ratio for LayerNorm and
bias tensors, gradients clipped to global norm 1.0; linear warm-up, then
polynomial decay of power 1 to 0 at the last step) or AdamW, data-parallel
over torch.distributed ranks (torchrun or srun's env://). Rank 0 logs
MLPerf Training events with the mlperf-logging package as the reference's
rules ask (``--usage training --ruleset 5.0.0``): ``run_start``, a
``tracked_stats`` event per step (global samples/s, step time, loss), the
masked-LM accuracy on held-out batches as ``eval_accuracy`` (its
``epoch_num``: samples trained, as MLPerf's BERT logs it), ``run_stop``
with its status.
"""
import argparse
import sys

import torch

from bert_pretrain.sizes import MODELS
import input_paths
from mlperf_train import run_main


def parse_args(argv):
    p = argparse.ArgumentParser(description=__doc__)
    p.add_argument('--model', choices=list(MODELS), default='tiny')
    tiny = MODELS['tiny']       # the default model's
    p.add_argument('--seq-length', type=int, default=tiny.seq_length)
    p.add_argument('--max-predictions', type=int,
                   default=tiny.max_predictions)
    p.add_argument('--batch-size', type=int, default=8, help='per rank')
    p.add_argument('--steps', type=int, default=10)
    p.add_argument('--eval-batches', type=int, default=2)
    p.add_argument('--optimizer', choices=('lamb', 'adamw'), default='lamb')
    p.add_argument('--lr', type=float, default=1e-3)
    p.add_argument('--warmup-steps', type=int, default=0)
    p.add_argument('--precision', choices=('fp32', 'fp16', 'bf16'),
                   default='fp32')
    p.add_argument('--data', default='synthetic',
                   help="'synthetic' or a text file, one sentence a line")
    p.add_argument('--tokenizer', help='WordPiece tokenizer directory '
                   '(with --data FILE)')
    p.add_argument('--seed', type=int, default=42)
    p.add_argument('--platform', help='submission_platform of the log '
                   '(default: $HPCML_PLATFORM, else the host name)')
    return p.parse_args(argv)


def poly_schedule(warmup, total, power=1.0):
    '''The reference's learning rate as a factor of the base rate: linear
    warm-up over *warmup* steps, then polynomial decay to 0 at *total*.'''
    def factor(step):
        if step < warmup:
            return step / warmup
        return max(0.0, 1 - step / total) ** power
    return factor


def evaluate(model, batches, count, device, world):
    '''The masked-LM accuracy over *count* batches of every rank.'''
    from mlperf_train import to_device
    from bert_pretrain.model import masked_lm_hits, model_inputs
    model.eval()
    hits = torch.zeros(2, device=device)
    with torch.no_grad():
        for _ in range(count):
            batch = to_device(next(batches), device)
            hits += torch.stack(masked_lm_hits(model(*model_inputs(batch)),
                                               batch))
    if world > 1:
        torch.distributed.all_reduce(hits)
    return (hits[0] / hits[1]).item()


def main(argv=None):
    args = parse_args(sys.argv[1:] if argv is None else argv)
    input_paths.require_data('bert_pretrain', args.data, 'file')
    if args.tokenizer:
        input_paths.require('bert_pretrain', '--tokenizer', args.tokenizer,
                            hint='a WordPiece tokenizer directory')
    from bert_pretrain import data, lamb
    from bert_pretrain.model import build, model_inputs, pretraining_loss
    from mlperf_train import (Batches, autocast, grad_scaler,
                              log_evaluation, log_setup, start, stop, train,
                              wrap_ddp)

    closed = args.model == 'bert-large' and args.optimizer == 'lamb'
    rank, world, device, log = start('bert', args,
                                     'closed' if closed else 'open')
    mlc = log.constants

    model = build(args.model, max(512, args.seq_length)).to(device)
    vocab = model.pretraining.config.vocab_size
    params = sum(p.numel() for p in model.parameters())
    model = wrap_ddp(model, device, world)
    betas, eps, decay = (0.9, 0.999), 1e-6, 0.01
    # The reference's LAMB: LayerNorm and bias tensors without weight
    # decay or trust ratio, gradients clipped to global norm 1.0.
    optimizer = (lamb.Lamb(lamb.parameter_groups(model.named_parameters(),
                                                 decay),
                           lr=args.lr, betas=betas, eps=eps,
                           max_grad_norm=1.0)
                 if args.optimizer == 'lamb' else
                 torch.optim.AdamW(model.parameters(), lr=args.lr))
    scheduler = torch.optim.lr_scheduler.LambdaLR(
        optimizer, poly_schedule(args.warmup_steps, args.steps))

    if args.data == 'synthetic':
        source = data.synthetic_batches(
            args.batch_size, args.seq_length, args.max_predictions,
            vocab, args.seed + rank)
    else:
        from transformers import BertTokenizerFast
        if not args.tokenizer:
            sys.exit('bert_pretrain: error: --data FILE needs --tokenizer DIR')
        tokenizer = BertTokenizerFast.from_pretrained(args.tokenizer)
        source = data.text_batches(args.data, tokenizer, args.batch_size,
                                   args.seq_length, args.max_predictions,
                                   args.seed + rank)
    batches = Batches(source, device, args.steps,
                      pooled=args.data == 'synthetic')

    global_batch = args.batch_size * world
    settings = [(mlc.GLOBAL_BATCH_SIZE, global_batch),
                (mlc.GRADIENT_ACCUMULATION_STEPS, 1),
                (mlc.OPT_NAME, args.optimizer), (mlc.OPT_BASE_LR, args.lr),
                (mlc.OPT_LR_TRAINING_STEPS, args.steps),
                (mlc.OPT_LR_WARMUP_STEPS, args.warmup_steps),
                (mlc.NUM_WARMUP_STEPS, args.warmup_steps),
                (mlc.START_WARMUP_STEP, 0)]
    if args.optimizer == 'lamb':
        settings += [(mlc.OPT_LAMB_EPSILON, eps),
                     (mlc.OPT_LAMB_BETA_1, betas[0]),
                     (mlc.OPT_LAMB_BETA_2, betas[1]),
                     (mlc.OPT_LAMB_WEIGHT_DECAY, decay),
                     (mlc.OPT_LAMB_LR_DECAY_POLY_POWER, 1.0)]
    settings += [('max_sequence_length', args.seq_length),
                 ('max_predictions_per_seq', args.max_predictions),
                 # Synthetic data: the run's training set is what it
                 # generates.
                 (mlc.TRAIN_SAMPLES, args.steps * global_batch),
                 (mlc.EVAL_SAMPLES, args.eval_batches * global_batch),
                 ('model_parameters', params)]
    log_setup(log, settings)
    log.end(mlc.INIT_STOP)

    scaler = grad_scaler(device, args.precision)
    model.train()

    def step(_):
        batch = next(batches)
        with autocast(device, args.precision):
            loss = pretraining_loss(model(*model_inputs(batch)), batch)
        optimizer.zero_grad(set_to_none=True)
        scaler.scale(loss).backward()
        scaler.step(optimizer)
        scaler.update()
        scheduler.step()
        return loss.item()

    status = train(log, step, args.steps, global_batch, device, world,
                   batches=batches)
    log_evaluation(log, mlc.EVAL_ACCURACY, lambda: evaluate(
        model, source, args.eval_batches, device, world),
        epoch=args.steps * global_batch)
    return stop(log, status, world)


if __name__ == '__main__':
    run_main(main)
