"""The training data formats and the checkpoint of the storage component
(``python -m storage_bench``, :mod:`.__main__`): each written as the
suite's programs read it, read back as they read it, with the page cache
dropped first.

The formats, by the workload whose program reads them with ``-S
data=DIR`` (sizes: :data:`SAMPLES`):

- ``npy``: CosmoFlow's NumPy samples (``src/cosmoflow``: ``*.npy`` of
  shape (cube, cube, cube, 4) and ``*.target.npy`` beside, each read with
  ``np.load``); int16 counts, 16 MiB a 128^3 sample, as MLPerf HPC's
  CosmoFlow data holds them;
- ``npz``: DeepCAM's samples (``src/deepcam``: ``*.npz`` of ``data``
  (16, H, W) float32 and ``labels`` (H, W), ``np.load`` then each array);
  57 MB a 768 x 1152 sample;
- ``tfrecord``: ImageNet's TFRecord shards (``src/resnet50_tf``:
  ``train-*`` files, which ``tf.data.TFRecordDataset`` reads sequentially,
  record by record): records framed as TFRecord frames them (length,
  length CRC, data, data CRC), 1024 records of 112 KiB a shard, about the
  140 MB of an ImageNet shard; the CRCs are written as zeros and not
  checked (TensorFlow checks CRC32C: processor time, not storage's);
- ``text``: WikiText's plain text (``src/gpt2_finetune``'s ``train.txt``
  and BERT's ``-S data=FILE``), read line by line.

The page cache: after each file is written it is flushed to storage
(``fsync``), and before each timed read every file to be read is dropped
from this node's page cache (``posix_fadvise(POSIX_FADV_DONTNEED)``,
which drops clean pages only, hence the ``fsync``). Its limits: it is
advice the kernel may not take; file systems with a cache of their own
(GPFS's pagepool, a Lustre OSS's, an NFS server's) keep theirs. So that a
read on several nodes comes from storage whatever the client caches, each
rank reads what a rank of the next node wrote (rank r reads writer
``(r + ranks per node) % ranks``); on one node a rank reads its own files,
and the server's cache may serve them. ``O_DIRECT`` is not used: NumPy,
TensorFlow and PyTorch do not read with it, and its alignment rules differ
by file system.

Standard library and NumPy only here (torch: the checkpoint, in
:mod:`.__main__`).
"""
import os
import struct

import numpy as np

FORMATS = ('npy', 'npz', 'tfrecord', 'text')

#: Per size: the CosmoFlow cube, the DeepCAM field (H, W), a TFRecord's
#: record bytes and records per shard, a text line's characters.
SAMPLES = {
    'tiny': {'cube': 32, 'field': (128, 192), 'record_bytes': 16 * 1024,
             'shard_records': 64, 'line_chars': 100},
    'benchmark': {'cube': 128, 'field': (768, 1152),
                  'record_bytes': 112 * 1024, 'shard_records': 1024,
                  'line_chars': 100},
}


def drop_cache(path):
    '''Drop *path*'s pages from this node's page cache (flushed first:
    ``POSIX_FADV_DONTNEED`` drops clean pages only); False where the
    system has no ``posix_fadvise``.'''
    if not hasattr(os, 'posix_fadvise'):
        return False
    fd = os.open(path, os.O_RDONLY)
    try:
        os.fsync(fd)
        os.posix_fadvise(fd, 0, 0, os.POSIX_FADV_DONTNEED)
    finally:
        os.close(fd)
    return True


def durable(fp):
    '''Flush *fp* (an open binary file) to storage.'''
    fp.flush()
    os.fsync(fp.fileno())


def _sample_bytes(fmt, spec):
    if fmt == 'npy':
        return spec['cube'] ** 3 * 4 * 2
    if fmt == 'npz':
        height, width = spec['field']
        return 17 * height * width * 4
    if fmt == 'tfrecord':
        return spec['shard_records'] * (spec['record_bytes'] + 16)
    return 2 ** 20                                  # text: 1 MiB blocks


def file_count(fmt, spec, budget):
    '''Files of *fmt* that make up about *budget* bytes (at least one).'''
    return max(1, round(budget / _sample_bytes(fmt, spec)))


def write_npy(directory, spec, count, rng):
    '''*count* CosmoFlow samples (and targets) in *directory*.'''
    cube = rng.integers(0, 64, (spec['cube'],) * 3 + (4,), dtype=np.int16)
    target = rng.random(4, dtype=np.float32)
    for i in range(count):
        for name, array in ((f'univ_{i:05d}.npy', cube),
                            (f'univ_{i:05d}.target.npy', target)):
            with open(os.path.join(directory, name), 'wb') as fp:
                np.save(fp, array)
                durable(fp)


def write_npz(directory, spec, count, rng):
    '''*count* DeepCAM samples in *directory*.'''
    height, width = spec['field']
    data = rng.random((16, height, width), dtype=np.float32)
    labels = rng.integers(0, 3, (height, width)).astype(np.float32)
    for i in range(count):
        with open(os.path.join(directory, f'data-{i:05d}.npz'), 'wb') as fp:
            np.savez(fp, data=data, labels=labels)
            durable(fp)


def write_tfrecord(directory, spec, count, rng):
    '''*count* TFRecord shards in *directory* (CRCs zero).'''
    payload = rng.bytes(spec['record_bytes'])
    frame = (struct.pack('<QI', len(payload), 0) + payload +
             struct.pack('<I', 0))
    for i in range(count):
        name = f'train-{i:05d}-of-{count:05d}'
        with open(os.path.join(directory, name), 'wb') as fp:
            for _ in range(spec['shard_records']):
                fp.write(frame)
            durable(fp)


def write_text(directory, spec, count, rng):
    '''One text file of *count* MiB of lines in *directory*.'''
    letters = np.frombuffer(b'abcdefghijklmnopqrstuvwxyz    ', np.uint8)
    block = bytearray(letters[rng.integers(0, len(letters), 2 ** 20)]
                      .tobytes())
    block[spec['line_chars']::spec['line_chars'] + 1] = \
        b'\n' * len(block[spec['line_chars']::spec['line_chars'] + 1])
    with open(os.path.join(directory, 'train.txt'), 'wb') as fp:
        for _ in range(count):
            fp.write(block)
        durable(fp)


WRITERS = {'npy': write_npy, 'npz': write_npz, 'tfrecord': write_tfrecord,
           'text': write_text}


def read_npy(path):
    np.load(path)


def read_npz(path):
    with np.load(path) as sample:
        sample['data'], sample['labels']


def read_tfrecord(path):
    '''Every record of a shard, in order, as TFRecordDataset reads it.'''
    with open(path, 'rb') as fp:
        while header := fp.read(12):
            length, _ = struct.unpack('<QI', header)
            fp.read(length + 4)


def read_text(path):
    with open(path, encoding='utf-8') as fp:
        for _ in fp:
            pass


READERS = {'npy': read_npy, 'npz': read_npz, 'tfrecord': read_tfrecord,
           'text': read_text}


def read_all(fmt, paths):
    '''Bytes of *paths* read as *fmt*'s program reads them.'''
    total = 0
    for path in paths:
        READERS[fmt](path)
        total += os.path.getsize(path)
    return total
