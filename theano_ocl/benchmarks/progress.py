"""The suite's progress display: tqdm's bar on a terminal when the ``[bench]`` extra is
installed, else one plain line per case, so that ``bench`` needs nothing beyond
theano_ocl's own requirements."""
import sys

HINT = "pip install 'theano_ocl[bench]'"


def missing(module):
    """True when ``module`` cannot be imported (an optional dependency absent)."""
    try:
        __import__(module)
    except ImportError:
        return True
    return False


class Lines(object):
    """The part of tqdm's interface the runner uses, as plain lines on stderr: one per
    case started (``[k/total] description``); ``write`` prints to stdout as tqdm's does."""

    def __init__(self, total, show):
        self.total, self.show, self.n = total, show, 0

    def __enter__(self):
        return self

    def __exit__(self, *exc):
        return False

    def set_description(self, text):
        if self.show:
            print('[%d/%d] %s' % (self.n + 1, self.total, text), file=sys.stderr, flush=True)

    def update(self, n=1):
        self.n += n

    def write(self, text):
        print(text, flush=True)


def bar(total, show=True):
    """A progress display over ``total`` cases: tqdm's when it is installed (on a terminal
    only, or never when ``show`` is false), else :class:`Lines`."""
    if missing('tqdm'):
        return Lines(total, show)
    from tqdm import tqdm
    return tqdm(total=total, disable=None if show else True, unit='case', dynamic_ncols=True)
