"""The Nengo comparison (theano_ocl/benchmarks/nengo_compare.py, bench/nengo_compare.py):
the Theano graph of a Nengo network's step, run by SimulatorOCL.run_steps, gives the probe
outputs of Theano C calling it and of nengo-ocl running the Nengo model; without nengo and
nengo-ocl (the optional ``nengo`` extra) the benchmark says how to install them."""
import sys

import numpy as np
import pytest

from theano_ocl.benchmarks import nengo_compare as nc


def test_a_tiny_network_agrees_step_by_step():
    pytest.importorskip('nengo', reason="needs the nengo extra: pip install 'theano_ocl[nengo]'")
    pytest.importorskip('nengo_ocl', reason="needs the nengo extra: pip install "
                                            "'theano_ocl[nengo]'")
    cmp = nc.Comparison(2, 10, steps_hint=20)
    try:
        got = cmp.check(20)
        assert got['ocl'].shape == (20, 1)
        assert np.any(got['ocl'] != 0)           # the last ensemble spiked: something probed
        # float32 sums of the decoders' products in other orders: the last bits only
        for other in ('c', 'nengo'):
            agree = nc.agreement(got['ocl'], got[other])
            assert agree['steps_equal'] == 20, (other, agree)
            assert agree['max_diff_equal'] <= 1e-6 * max(1, np.abs(got[other]).max())
        # a second run from the state kept continues where the first stopped, in all three
        more = dict(c=cmp.theano_c(5), ocl=cmp.theano_ocl(5), nengo=cmp.nengo_ocl(5))
        np.testing.assert_allclose(more['ocl'], more['c'], rtol=1e-5, atol=1e-5)
        np.testing.assert_allclose(more['ocl'], more['nengo'], rtol=1e-5, atol=1e-5)
    finally:
        cmp.close()


def test_without_nengo_the_benchmark_says_how_to_install(monkeypatch):
    monkeypatch.setitem(sys.modules, 'nengo_ocl', None)      # import nengo_ocl fails
    why = nc.missing()
    assert why is not None and "pip install 'theano_ocl[nengo]'" in why and 'nengo' in why
    from theano_ocl.benchmarks import runner
    rec = runner.run(['nengo_ocl'], quick=True, repeat=1, progress=False, log=False)
    entry, = rec['benchmarks']
    assert entry['cases'] == [] and entry['skipped'] == why
    from theano_ocl.benchmarks import record
    assert '| nengo_ocl | | | | | skipped |' in record.markdown(rec)
