"""All-or-nothing updates: a call commits every one of its updates or none of them.

A commit has two phases. *Prepare* reads every new value and does whatever may fail
(downloads, allocations): an exception or an interrupt there commits nothing. *Apply* then
writes: a list of actions, each of which cannot fail and may run twice with the same result
(an enqueued device copy from a buffer nobody writes meanwhile, setting a cell, setting a
resident's coherence flags).

The commit point is one statement: the actions are published as a journal
(``pending.append``) before the first one runs. An interrupt (Ctrl-C) while they run
cannot split them: whatever the interrupted call did not finish, the next observer
finishes first (``finish_pending``: every OCL call, any read or write of a shared
variable's container, any non-OCL Theano call, pickling), so nobody ever sees some of a
call's updates without the others. This costs no signal handling per call (swapping the
SIGINT handler costs ~7 us, more than a whole steady-state call on a GPU).
"""
import threading

from . import faults

pending = []    # journals published and not yet known finished (a list: tested on hot paths)
_lock = threading.RLock()


class Journal(object):
    __slots__ = ('actions', 'done')

    def __init__(self, actions):
        self.actions = actions
        self.done = 0

    def run(self):
        actions = self.actions
        hooked = faults.hook is not None
        while self.done < len(actions):
            if hooked:
                faults.at('commit %d' % self.done)
            actions[self.done]()
            self.done += 1


def apply(actions):
    """Apply ``actions`` (infallible, idempotent) as one commit (see the module doc)."""
    if not actions:
        return
    journal = Journal(actions)
    pending.append(journal)          # the commit point
    journal.run()
    forget(journal)


def forget(journal):
    """``journal`` is finished: no longer pending (a journal may be published again once it
    is: a caller that commits the same actions every call keeps one)."""
    try:
        pending.remove(journal)
    except ValueError:                # another thread finished it first
        pass


def finish_pending():
    """Finish the commits an interrupt left half-applied (cheap to call: one list test when
    there is none; callers test ``pending`` first on hot paths)."""
    if not pending:
        return
    with _lock:
        while pending:
            journal = pending[0]
            journal.run()
            forget(journal)
