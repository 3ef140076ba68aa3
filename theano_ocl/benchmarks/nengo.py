"""A naive Theano port of a Nengo network: Theano C calling the step function in a loop
against ``SimulatorOCL.run_steps``.

E ensembles of N LIF neurons, each its own small subgraph (as a line-by-line port of
Nengo's builder would make it): encoders as matrix-vector products, the LIF voltage /
refractory update and spikes, decoders, first-order lowpass synapses, and a connection
from every ensemble to the next. All state lives in float32 shared variables updated
every step; a per-step input drives ensemble 0.
"""
import numpy as np

from . import BASELINE, OCL, Case, Variant, register
from .timing import fallbacks

F = np.float32


def build(E, N=100, D=1, dt=0.001, tau_rc=0.02, tau_ref=0.002, tau_syn=0.005, seed=0):
    """The step function ``f(u) -> [decoded output of the last ensemble]`` (Theano's
    default mode) and the input dimension D."""
    import theano
    import theano.tensor as T
    rng = np.random.RandomState(seed)
    u = T.vector('u', dtype='float32')
    updates = []
    probes = []
    syn_in = [theano.shared(np.zeros(D, F), name='syn%d' % e) for e in range(E)]
    a_syn = F(np.exp(-dt / tau_syn))
    for e in range(E):
        enc = theano.shared(rng.randn(N, D).astype(F), name='enc%d' % e)
        gain = theano.shared(rng.uniform(0.5, 2, N).astype(F), name='gain%d' % e)
        bias = theano.shared(rng.uniform(-1, 1, N).astype(F), name='bias%d' % e)
        dec = theano.shared((rng.randn(D, N) * 1e-3).astype(F), name='dec%d' % e)
        v = theano.shared(np.zeros(N, F), name='v%d' % e)
        ref = theano.shared(np.zeros(N, F), name='ref%d' % e)
        x = syn_in[e] + (u if e == 0 else 0)
        J = gain * T.dot(enc, x) + bias                          # encoders
        dv = (J - v) * F(dt / tau_rc)
        ref_new = ref - F(dt)
        v_new = T.switch(ref_new > 0, F(0), T.maximum(v + dv, F(0)))
        spiked = v_new > 1
        spikes = T.cast(spiked, 'float32') * F(1 / dt)
        updates += [(v, T.switch(spiked, F(0), v_new)),
                    (ref, T.switch(spiked, F(tau_ref), ref_new))]
        out = T.dot(dec, spikes)                                 # decoders
        target = syn_in[(e + 1) % E]                             # connection to the next one
        updates.append((target, target * a_syn + out * F(1 - a_syn)))   # lowpass synapse
        if e == E - 1:
            probes.append(out)
    f = theano.function([u], probes, updates=updates)
    return f, D


@register('nengo', quick=dict(ensembles=5, neurons=50, steps=20, calls=1),
          full=dict(ensembles=500, neurons=100, steps=200, calls=1))
def nengo(ctx, ensembles, neurons, steps, calls):
    """Steps of a Nengo-like LIF network: Theano C in a loop vs SimulatorOCL.run_steps."""
    def setup():
        import theano_ocl
        # two copies of the network (the same seed): Theano C's loop and the simulator each
        # step their own state, as two users would; with one set of shared variables every
        # alternation would move all the state between host and device (thousands of small
        # transfers) inside both sides' timings
        f, D = build(ensembles, neurons)
        g, _ = build(ensembles, neurons)
        us = np.sin(np.arange(steps, dtype=F) * F(0.01))[:, None].astype(F).repeat(D, 1)
        shared = [i.variable for i in f.maker.inputs[1:]]
        init = [s.get_value() for s in shared]
        want = np.array([f(x)[0] for x in us[:5]])
        for s, v in zip(shared, init):
            s.set_value(v)
        sim = theano_ocl.SimulatorOCL(g, device=ctx.device)
        got = sim.run_steps(5, inputs={'u': us[:5]}, probes=[0], batch=True)[0]
        # LIF spiking is a threshold process: a rounding difference may flip a spike after
        # a few steps; the first steps' decoded outputs must agree
        np.testing.assert_allclose(got, want, rtol=1e-4, atol=1e-5,
                                   err_msg='run_steps differs from Theano C')

        def c_loop():
            for x in us:
                f(x)
        variants = [Variant(BASELINE, c_loop, per=steps),
                    Variant(OCL, lambda: sim.run_steps(steps, inputs={'u': us}, probes=[0],
                                                      batch=True), per=steps)]
        return variants, dict(launches=sim.stats.get('launches_per_step'),
                              launches_unbatched=sim.stats.get('launches_per_step_unbatched'),
                              fallbacks=fallbacks(sim.function))
    return [Case('E=%d x %d LIF neurons, %d steps' % (ensembles, neurons, steps), setup,
                 calls=calls, unit='step')]
