"""Pretraining batches in the features of MLPerf BERT's TFRecords
(``run_pretraining.py``'s ``input_fn_builder``): ``input_ids``,
``token_type_ids`` (segment ids), ``attention_mask`` (input mask),
``masked_lm_positions``, ``masked_lm_ids`` and ``masked_lm_weights`` (one
slot per prediction up to the maximum, padding slots at position 0 with
weight 0) and ``next_sentence_labels``.

``synthetic``: random tokens, as MLPerf's synthetic-data mode (the work per
step is the real one), every prediction slot used (15% of 512 tokens is
above the 76 slots, so the reference's data fill them too). ``text``: a
text file, one sentence per line, with a WordPiece tokenizer directory;
sentence pairs are consecutive lines (NSP label 0) or a random line (label
1), 15% of tokens masked up to the maximum number of predictions, as BERT's
data preparation.
"""
import random

import torch

MASK_FRACTION = 0.15
#: [MASK] in BERT's WordPiece vocabulary.
MASK_ID = 103


def _batch(ids, segments, mask, positions, weights, original, nsp):
    return {'input_ids': ids, 'token_type_ids': segments,
            'attention_mask': mask,
            'masked_lm_positions': positions,
            'masked_lm_ids': torch.gather(original, 1, positions),
            'masked_lm_weights': weights,
            'next_sentence_labels': nsp}


def synthetic_batches(batch, seq_len, max_predictions, vocab, seed):
    generator = torch.Generator().manual_seed(seed)
    while True:
        original = torch.randint(1000, vocab, (batch, seq_len),
                                 generator=generator)
        segments = torch.zeros_like(original)
        segments[:, seq_len // 2:] = 1
        positions = torch.stack([
            torch.randperm(seq_len - 2, generator=generator)[
                :max_predictions] + 1 for _ in range(batch)])
        ids = original.scatter(1, positions, MASK_ID)
        yield _batch(ids, segments, torch.ones_like(ids), positions,
                     torch.ones(positions.shape), original,
                     torch.randint(0, 2, (batch,), generator=generator))


def text_batches(path, tokenizer, batch, seq_len, max_predictions, seed):
    rng = random.Random(seed)
    with open(path) as fp:
        lines = [ln.strip() for ln in fp if ln.strip()]
    if len(lines) < 2:
        raise ValueError(f'{path}: need at least two sentences')
    special = set(tokenizer.all_special_ids)
    while True:
        rows = []
        for _ in range(batch):
            i = rng.randrange(len(lines) - 1)
            random_next = rng.random() < 0.5
            second = lines[rng.randrange(len(lines))] if random_next \
                else lines[i + 1]
            rows.append((lines[i], second, int(random_next)))
        enc = tokenizer([a for a, _, _ in rows], [b for _, b, _ in rows],
                        truncation=True, max_length=seq_len,
                        padding='max_length', return_tensors='pt')
        original = enc['input_ids']
        positions = torch.zeros(batch, max_predictions, dtype=torch.long)
        weights = torch.zeros(batch, max_predictions)
        for row in range(batch):
            candidates = [j for j in range(seq_len)
                          if original[row, j].item() not in special]
            rng.shuffle(candidates)
            count = min(max_predictions,
                        max(1, round(len(candidates) * MASK_FRACTION)))
            chosen = sorted(candidates[:count])
            positions[row, :count] = torch.tensor(chosen)
            weights[row, :count] = 1
        ids = original.clone()
        for row in range(batch):
            count = int(weights[row].sum())
            ids[row, positions[row, :count]] = tokenizer.mask_token_id
        yield _batch(ids, enc['token_type_ids'], enc['attention_mask'],
                     positions, weights, original,
                     torch.tensor([r[2] for r in rows]))
