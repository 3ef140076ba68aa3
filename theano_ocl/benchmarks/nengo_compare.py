"""One Nengo network three ways, in one process, on one OpenCL device: ``nengo_ocl.Simulator``,
``SimulatorOCL.run_steps`` of the Theano graph of the same step, and Theano C calling that
graph in a loop. Needs the optional ``nengo`` extra (``pip install 'theano_ocl[nengo]'``:
nengo and nengo-ocl); without it the benchmark says so and runs nothing.

The network (:func:`network`): E ensembles of N one-dimensional LIF neurons, a constant
input into the first (no synapse), a 5 ms lowpass connection from each ensemble to the next,
a probe of the last one's decoded output (no synapse). Nengo's builder makes the model once,
for nengo-ocl; :func:`parameters` reads off that model what it computes with (scaled
encoders, biases, decoders, the LIF constants and initial voltages, the synapse's discrete
coefficients), and :func:`step_function` writes one simulator step over all ensembles at
once as a Theano graph, in float32 as nengo-ocl computes. In step ``t``, as nengo orders it
(``nengo.neurons.LIF.step``, ``LinearFilter.OneX``, nengo-ocl's ``plan_lif`` and
``plan_linearfilter``)::

    x_0 = u;  x_e = y_{e-1}                   (a synapse's output is an update: last step's)
    J = scaled_encoders @ x + bias
    w = w - dt;  dt' = clip(dt - w, 0, dt)    (refractory time left, effective dt)
    v = v - (J - v) * expm1(-dt' / tau_rc)
    spiked = v > 1;  s = spiked * amplitude / dt
    w = spiked ? tau_ref + dt + tau_rc * log1p(-(v - 1) / (J - 1)) : w
    v = spiked ? 0 : max(v, 0)                (min_voltage 0)
    y_e = a * y_e + b * (decoders_e @ s_e)    (zero-order hold: a = exp(-dt / tau))
    probe = decoders_probe @ s_{E-1}

Spiking is a threshold process: the three sum the decoders' products in other orders (and
the host's libm and the device's expm1/log1p may differ in the last bit), so a neuron
within a rounding of its threshold may spike in one and not in another, after which the
trajectories part. :func:`agreement` reports the steps until they part and how close the
filtered outputs stay after that.
"""
import numpy as np

from . import BASELINE, OCL, Case, Variant, register

F = np.float32
NENGO_OCL = 'nengo-ocl'
INSTALL = "pip install 'theano_ocl[nengo]' (nengo and nengo-ocl)"


def missing():
    """Why the comparison cannot run here (a sentence naming the install), or None."""
    for mod in ('nengo', 'nengo_ocl'):
        try:
            __import__(mod)
        except Exception as e:       # absent, or broken against this numpy
            return 'the Nengo comparison needs %s: %s (%s: %s)' % (
                mod, INSTALL, type(e).__name__, e)
    return None


def network(E, N, seed=0, u=0.5, tau_syn=0.005):
    """The Nengo network: (network, ensembles, connections between them, probe)."""
    import nengo
    with nengo.Network(seed=seed) as net:
        stim = nengo.Node([u])
        ens = [nengo.Ensemble(N, 1, neuron_type=nengo.LIF()) for _ in range(E)]
        nengo.Connection(stim, ens[0], synapse=None)
        conns = [nengo.Connection(a, b, synapse=nengo.Lowpass(tau_syn))
                 for a, b in zip(ens[:-1], ens[1:])]
        probe = nengo.Probe(ens[-1], synapse=None)
    return net, ens, conns, probe


def _probe_connection(model, probe):
    import nengo
    conns = [c for c in model.params if isinstance(c, nengo.Connection) and c.post_obj is probe]
    assert len(conns) == 1, 'the probe has %d connections' % len(conns)
    return conns[0]


def parameters(model, ens, conns, probe):
    """What the built model computes with, as the float32 arrays of the Theano graph."""
    import nengo
    lif = ens[0].neuron_type
    for e in ens:
        t = e.neuron_type
        if not isinstance(t, nengo.LIF) or t.min_voltage != 0 or \
                (t.tau_rc, t.tau_ref, t.amplitude) != (lif.tau_rc, lif.tau_ref, lif.amplitude):
            raise ValueError('every ensemble must have the same LIF neurons, min_voltage 0')
    dt = model.dt
    # the synapse's discrete step as nengo makes it (zero-order hold): y <- a y + b u
    syn = conns[0].synapse if conns else nengo.Lowpass(0.005)
    state = syn.make_state((1,), (1,), dt, dtype=np.float64)
    step = syn.make_step((1,), (1,), dt, rng=None, state=state)
    node = [c for c in model.params if isinstance(c, nengo.Connection)
            and c.post_obj is ens[0] and isinstance(c.pre_obj, nengo.Node)][0].pre_obj
    sig = model.sig
    return dict(
        dt=dt, tau_rc=lif.tau_rc, tau_ref=lif.tau_ref, amplitude=lif.amplitude,
        a=float(step.a), b=float(step.b),
        u=np.asarray(node.output, F).reshape(-1),
        enc=np.stack([model.params[e].scaled_encoders for e in ens]).astype(F),      # E,N,D
        bias=np.stack([model.params[e].bias for e in ens]).astype(F),                # E,N
        dec=np.stack([model.params[c].weights for c in conns]).astype(F)              # E-1,D,N
        if conns else np.zeros((0, ens[0].dimensions, ens[0].n_neurons), F),
        dec_probe=np.asarray(model.params[_probe_connection(model, probe)].weights, F),  # D,N
        v0=np.stack([sig[e.neurons]['voltage'].initial_value for e in ens]).astype(F),
        w0=np.stack([sig[e.neurons]['refractory_time'].initial_value
                     for e in ens]).astype(F))


def step_function(p, mode=None):
    """``f() -> [decoded output of the last ensemble]``, one step of the network per call,
    its state (voltages, refractory times, synapse outputs) in shared variables updated
    every call; ``mode`` None: Theano's default (C)."""
    import theano
    import theano.tensor as T
    dt = F(p['dt'])
    enc = theano.shared(p['enc'], name='scaled_encoders')
    bias = theano.shared(p['bias'], name='bias')
    dec = theano.shared(p['dec'], name='decoders')
    dec_p = theano.shared(p['dec_probe'], name='probe_decoders')
    v = theano.shared(p['v0'].copy(), name='voltage')
    w = theano.shared(p['w0'].copy(), name='refractory_time')
    E, D = p['enc'].shape[0], p['enc'].shape[2]
    y = theano.shared(np.zeros((E - 1, D), F), name='synapse_out')
    x = T.concatenate([T.constant(p['u'])[None, :], y], axis=0)      # E, D
    # the products as broadcast multiplies and sums (Theano C's BatchedDot needs a BLAS
    # it links against; for D = 1 the encoders' one is a plain multiply)
    J = (enc * x[:, None, :]).sum(axis=2) + bias                        # E, N
    w1 = w - dt
    delta_t = T.clip(dt - w1, F(0), dt)
    v1 = v - (J - v) * T.expm1(-delta_t / F(p['tau_rc']))
    spiked = v1 > F(1)
    t_spike = dt + F(p['tau_rc']) * T.log1p(-(v1 - F(1)) / (J - F(1)))
    s = T.cast(spiked, 'float32') * F(p['amplitude'] / p['dt'])
    updates = [(v, T.switch(spiked, F(0), T.maximum(v1, F(0)))),
               (w, T.switch(spiked, F(p['tau_ref']) + t_spike, w1))]
    if E > 1:
        weighted = (dec * s[:-1, None, :]).sum(axis=2)                  # E-1, D
        updates.append((y, F(p['b']) * weighted + F(p['a']) * y))
    out = (dec_p * s[-1][None, :]).sum(axis=1)                          # D
    return theano.function([], [out], updates=updates, mode=mode)


def agreement(a, b, dt=0.001, tau=0.01):
    """How two probe traces (steps, D) agree: the steps before they first differ by more
    than 1e-4 (relative to the output's scale), the largest difference over those steps,
    and the RMS difference of the traces filtered by a 10 ms lowpass, relative to the
    filtered reference's RMS (spike timing apart, the decoded value they carry)."""
    a = np.asarray(a, np.float64)
    b = np.asarray(b, np.float64)
    scale = max(1.0, float(np.max(np.abs(b))) if b.size else 1.0)
    bad = np.nonzero(np.max(np.abs(a - b).reshape(len(a), -1), axis=1) > 1e-4 * scale)[0]
    same = int(bad[0]) if len(bad) else len(a)
    k = float(np.exp(-dt / tau))

    def lowpass(z):
        out = np.empty_like(z)
        acc = np.zeros(z.shape[1:])
        for t in range(len(z)):
            acc = k * acc + (1 - k) * z[t]
            out[t] = acc
        return out
    fa, fb = lowpass(a), lowpass(b)
    rms = float(np.sqrt(np.mean(fb ** 2))) or 1.0
    return dict(steps_equal=same, steps=len(a),
                max_diff_equal=float(np.max(np.abs(a[:same] - b[:same]))) if same else 0.0,
                filtered_rel_rms=float(np.sqrt(np.mean((fa - fb) ** 2))) / rms)


class Comparison(object):
    """The three runners of one network on one device, each from the initial state:
    ``theano_c(n)``, ``theano_ocl(n)``, ``nengo_ocl(n)`` run ``n`` steps and return the
    probe's outputs (steps, D); ``reset()`` puts every one back at the initial state."""

    def __init__(self, E, N, device=None, seed=0, steps_hint=1000):
        import nengo_ocl
        import theano_ocl
        from theano_ocl.device import get_device
        self.E, self.N = E, N
        self.dev = get_device(device)
        net, ens, conns, probe = network(E, N, seed=seed)
        # nengo-ocl on theano_ocl's device: its context (nengo-ocl makes its own queue)
        self.nsim = nengo_ocl.Simulator(net, context=self.dev.context, progress_bar=False,
                                        n_prealloc_probes=max(32, int(steps_hint)))
        self.probe = probe
        self.params = parameters(self.nsim.model, ens, conns, probe)
        # two copies of the state: Theano C's loop and the simulator step their own (one
        # set of shared variables would move all the state host <-> device each turn)
        self.f = step_function(self.params)
        self.sim = theano_ocl.SimulatorOCL(step_function(self.params), device=device)
        self._state = [[i.variable for i in g.maker.inputs if i.update is not None]
                       for g in (self.f, self.sim.function)]

    def reset(self):
        init = dict(voltage=self.params['v0'], refractory_time=self.params['w0'])
        for shared in self._state:
            for s in shared:
                s.set_value(init[s.name] if s.name in init else
                            np.zeros_like(s.get_value(borrow=True)))
        self.nsim.reset()

    def theano_c(self, n):
        f = self.f
        return np.array([f()[0] for _ in range(n)])

    def theano_ocl(self, n):
        return self.sim.run_steps(n, probes=[0])[0]

    def nengo_ocl(self, n):
        before = len(self.nsim.data[self.probe]) if self.nsim.n_steps else 0
        self.nsim.run_steps(n, progress_bar=False)
        return np.asarray(self.nsim.data[self.probe])[before:]

    def close(self):
        self.nsim.close()

    def check(self, n, rtol=1e-4, atol=1e-4):
        """Run ``n`` steps each from the initial state; raise AssertionError where the
        first ``n`` outputs disagree (theano_ocl against Theano C and against nengo-ocl);
        the outputs, as a dict."""
        self.reset()
        got = dict(c=self.theano_c(n), ocl=self.theano_ocl(n), nengo=self.nengo_ocl(n))
        np.testing.assert_allclose(got['ocl'], got['c'], rtol=rtol, atol=atol,
                                   err_msg='theano_ocl differs from Theano C')
        np.testing.assert_allclose(got['ocl'], got['nengo'], rtol=rtol, atol=atol,
                                   err_msg='theano_ocl differs from nengo-ocl')
        return got


@register('nengo_ocl', quick=dict(ensembles=5, neurons=50, steps=100),
          full=dict(ensembles=100, neurons=500, steps=1000))
def nengo_ocl(ctx, ensembles, neurons, steps):
    """A Nengo network: nengo-ocl's Simulator against SimulatorOCL.run_steps, Theano C."""
    from . import Skip
    why = missing()
    if why is not None:
        raise Skip(why)

    def setup():
        cmp = Comparison(ensembles, neurons, device=ctx.device, steps_hint=steps)
        # every step of a short run the same in all three (see the module's docstring for
        # why not a long one: a rounding difference at a threshold parts them)
        cmp.check(min(steps, 20))
        cmp.reset()
        got = dict(c=cmp.theano_c(steps), ocl=cmp.theano_ocl(steps), nengo=cmp.nengo_ocl(steps))
        stats = cmp.sim.stats
        variants = [Variant(BASELINE, lambda: cmp.theano_c(steps), per=steps),
                    Variant(OCL, lambda: cmp.theano_ocl(steps), per=steps),
                    Variant(NENGO_OCL, lambda: cmp.nengo_ocl(steps), per=steps)]
        return variants, dict(launches=stats.get('launches_per_step'),
                              launches_unbatched=stats.get('launches_per_step_unbatched'),
                              vs_c=agreement(got['ocl'], got['c']),
                              vs_nengo_ocl=agreement(got['ocl'], got['nengo']))
    return [Case('E=%d x %d LIF neurons, %d steps' % (ensembles, neurons, steps), setup,
                 unit='step')]
