"""Pretraining batches: input ids, segments, attention mask, masked-LM labels
(-100 where not predicted) and next-sentence labels.

``synthetic``: random tokens, as MLPerf's synthetic-data mode (the work per
step is the real one). ``text``: a text file, one sentence per line, with a
WordPiece tokenizer directory; sentence pairs are consecutive lines (NSP
label 0) or a random line (label 1), 15% of tokens masked up to the
maximum number of predictions, as BERT's data preparation.
"""
import random

import torch

MASK_FRACTION = 0.15


def synthetic_batches(batch, seq_len, max_predictions, vocab, seed):
    generator = torch.Generator().manual_seed(seed)
    while True:
        ids = torch.randint(1000, vocab, (batch, seq_len), generator=generator)
        segments = torch.zeros_like(ids)
        segments[:, seq_len // 2:] = 1
        labels = torch.full_like(ids, -100)
        for row in range(batch):
            positions = torch.randperm(seq_len - 2, generator=generator)[
                :max_predictions] + 1
            labels[row, positions] = ids[row, positions]
            ids[row, positions] = 103  # [MASK] in BERT's vocabulary
        yield {'input_ids': ids, 'token_type_ids': segments,
               'attention_mask': torch.ones_like(ids), 'labels': labels,
               'next_sentence_label': torch.randint(0, 2, (batch,),
                                                    generator=generator)}


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
        ids = enc['input_ids']
        labels = torch.full_like(ids, -100)
        for row in range(batch):
            candidates = [j for j in range(seq_len)
                          if ids[row, j].item() not in special]
            rng.shuffle(candidates)
            count = min(max_predictions,
                        max(1, round(len(candidates) * MASK_FRACTION)))
            for j in candidates[:count]:
                labels[row, j] = ids[row, j]
                ids[row, j] = tokenizer.mask_token_id
        yield {'input_ids': ids, 'token_type_ids': enc['token_type_ids'],
               'attention_mask': enc['attention_mask'], 'labels': labels,
               'next_sentence_label': torch.tensor([r[2] for r in rows])}
