"""``hpcml cpu-peak``: this CPU's measured fp32 matmul FLOP/s, as JSON."""
import json

from hpctestlib_ml.commands import counting

#: The command's line in ``hpcml --help``.
HELP = "measure this CPU's fp32 matmul FLOP/s"


def add_arguments(parser):
    parser.add_argument('--threads', type=counting(), default=None)


def run(args):
    from hpctestlib_ml import cpu_peak
    flops = cpu_peak.measure_matmul_flops(threads=args.threads)
    print(json.dumps({'fp32_matmul_flops': flops}))
    return 0
