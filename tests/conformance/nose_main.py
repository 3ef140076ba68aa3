"""``python -m nose`` plus a crash-proof result stream.

Usage (what tests/conformance/run.py runs):

    CONFORMANCE_STREAM=results.jsonl python nose_main.py -v --with-xunit \
        --xunit-file=R.xml theano.tensor.tests.test_elemwise[:Class.method ...]

The xunit plugin writes its XML only when the run ends; if the interpreter dies (a
segfault in a driver, a kill on timeout) nothing is left.  The ``ConformanceStream``
plugin appends one JSON line per test start and per result, flushed at once, with the
same test ids the xunit plugin uses, so the runner can recover what finished and name
the test that was running when the process died.
"""
import json
import os
import sys
import time
import traceback

import nose
from nose.plugins.base import Plugin

try:
    from nose.plugins.xunit import id_split
except Exception:  # pragma: no cover
    def id_split(idval):
        return idval.rsplit('.', 1)


def _is_skip(exc_type):
    import unittest
    try:
        from nose.exc import SkipTest as NoseSkip
    except Exception:  # pragma: no cover
        NoseSkip = unittest.SkipTest
    try:
        return issubclass(exc_type, (unittest.SkipTest, NoseSkip))
    except TypeError:
        return False


class ConformanceStream(Plugin):
    name = 'conformance-stream'
    score = 2000  # before xunit's capture

    def options(self, parser, env):  # no command-line options
        pass

    def configure(self, options, conf):
        path = os.environ.get('CONFORMANCE_STREAM')
        self.enabled = bool(path)
        if self.enabled:
            self._fh = open(path, 'a', buffering=1)
            self._t0 = None

    def _write(self, **rec):
        self._fh.write(json.dumps(rec) + '\n')
        self._fh.flush()

    def _ids(self, test):
        cls, name = (id_split(test.id()) + [''])[:2]
        return cls, name

    def beforeTest(self, test):
        cls, name = self._ids(test)
        self._t0 = time.time()
        self._write(ev='start', classname=cls, name=name)

    def _end(self, test, outcome, err=None):
        cls, name = self._ids(test)
        rec = dict(ev='end', classname=cls, name=name, outcome=outcome,
                   time=round(time.time() - (self._t0 or time.time()), 3))
        if err is not None:
            try:
                rec['message'] = '%s: %s' % (getattr(err[0], '__name__', err[0]), err[1])
                rec['tb'] = ''.join(traceback.format_exception(*err))[-4000:]
            except Exception as e:  # pragma: no cover
                rec['message'] = repr(e)
        self._write(**rec)

    def addSuccess(self, test, *a):
        self._end(test, 'pass')

    def addFailure(self, test, err, *a):
        self._end(test, 'fail', err)

    def addError(self, test, err, *a):
        self._end(test, 'skip' if _is_skip(err[0]) else 'error', err)


if __name__ == '__main__':
    sys.argv[0] = 'nosetests'
    nose.main(addplugins=[ConformanceStream()])
