"""Answers: the ranks' answers compared with each other and with the
known-good digest of the software stack in the case's references file,
where the program prints them (``SilentDataCorruption``: the reading is
:mod:`hpctestlib_ml.answers`)."""
from reframe.core.builtins import variable
from reframe.core.pipeline import RegressionTestPlugin

from hpctestlib_ml import answers, device_check
from hpctestlib_ml.history_refs import lookup


class Answers(RegressionTestPlugin):
    '''Which rank computed a wrong answer.'''

    #: The right answer of the case's ranks (the digest of their results'
    #: digests, ``v1:3f0c9a...``: :func:`hpctestlib_ml.answers.combined`),
    #: '' where the program prints none or no answer can be told right.
    #: Logged with every result: ``hpcml references`` keeps a passing
    #: run's as the known-good digest of its software stack.
    #:
    #: :type: :class:`str`
    #: :default: set after the run
    answer_digest = variable(str, value='')

    #: The line naming each rank whose answer was wrong, with its node,
    #: device, what differed and by how much (``silent data corruption:
    #: rank 1 on n2 (...): matmul fp32 #2 (1 of 65536 elements, max
    #: relative error 1.2e-04) differs from ...``), '' where none was.
    #: Logged with every result: ``hpcml report`` lists its nodes.
    #:
    #: :type: :class:`str`
    #: :default: set after the run
    wrong_answer = variable(str, value='')

    def answer_stack(self):
        '''The fields of :data:`hpctestlib_ml.answers.STACK_FIELDS` of
        this run, as its perflog line will hold them.'''
        fields = {name: getattr(self, name, '')
                  for name in answers.STACK_FIELDS}
        fields['device_ran'] = device_check.device_summary(
            self.device_records())
        return fields

    def known_answer(self):
        '''The :class:`~hpctestlib_ml.answers.KnownGood` digest of this
        case's software stack in its references file, None where it has
        none.'''
        return answers.known_good(lookup.known_answer(
            self.references_file, type(self).__name__,
            self.current_partition.fullname, self.reference_case,
            answers.stack_id(self.answer_stack())))

    def answer_problems(self):
        '''Why the ranks' answers show a wrong one ([] where they do not),
        after setting :attr:`answer_digest` and :attr:`wrong_answer`.'''
        found = answers.verdict(
            self.log_records('answer'), self.log_records('answer_error'),
            {r.get('rank'): r for r in self.device_records()},
            self.known_answer())
        self.answer_digest, self.wrong_answer = found.digest, found.wrong
        return found.problems
