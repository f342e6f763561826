"""A wrong matrix product made from outside the suite's code, for the tests
of the check of silent data corruption: a ``sitecustomize.py`` (Python
loads it at start-up from the first directory of ``PYTHONPATH`` that has
one; the checks' ``-S python_path=`` puts it there) that, in the
processes a condition selects (a rank, a node), wraps ``torch.mm`` and
flips one bit of one element of one product's result: the product whose
first operand starts with the value ``src/sdc`` draws for product
*product* in fp32. Every other product, and every other process, is
untouched."""
import sys

from conftest import REPO

#: The module, formatted with the condition, the product's size, the first
#: element of its first operand, and the element and bit flipped.
SITECUSTOMIZE = '''\
import os
import socket

if {condition}:
    import torch

    _mm = torch.mm

    def mm(a, b, *args, **kwargs):
        out = _mm(a, b, *args, **kwargs)
        if (a.dim() == 2 and a.shape[0] == {n} and
                a.dtype == torch.float32 and a[0, 0].item() == {first!r}):
            result = kwargs.get('out', out)
            flat = result.view(-1)[{element}:{element} + 1]
            flat.view(torch.int32).bitwise_xor_(1 << {bit})
        return out

    torch.mm = mm
'''

#: The element whose bit is flipped, and the bit: mantissa bit 10 of 23,
#: a relative error of 2^-13 to 2^-14 (6e-05 to 1.2e-04).
ELEMENT, BIT = 7, 10


def first_element(n, product):
    '''The first element of the first operand of fp32 product *product*
    of ``n x n`` matrices, as ``src/sdc`` makes it on a CPU.'''
    sys.path.insert(0, str(REPO / 'src'))
    import torch

    import matmul_rate
    import sdc
    a, _, _ = matmul_rate.operands(
        n, 'fp32', torch.device('cpu'),
        seed=sdc.operand_seed('fp32', product))
    return a[0, 0].item()


def write(directory, condition, n, product=2):
    '''``sitecustomize.py`` in *directory* that makes fp32 product
    *product* of size *n* wrong where *condition* (Python, e.g.
    ``socket.gethostname() == 'n2'``) holds; *directory*.'''
    directory.mkdir(parents=True, exist_ok=True)
    (directory / 'sitecustomize.py').write_text(SITECUSTOMIZE.format(
        condition=condition, n=n, first=first_element(n, product),
        element=ELEMENT, bit=BIT))
    return directory
