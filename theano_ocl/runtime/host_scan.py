"""The loop of a Scan the host's VM runs, with each step's bookkeeping worked out once.

Theano's ``Scan.execute`` (Python: its Cython version does not build on Python 3.11)
spends 10-25 us a step on bookkeeping beside the inner function: it walks every kind of
value with index arithmetic, and compares each reused output's bytes through memoryviews.
Measured on the 2-core Xeon (2026-12-01), the tutorial RNN's training step (20 steps
forward, 20 back, 32x64 float64): 17 us a step, a third of the step's whole time.

:func:`executor` gives a Scan copy the host's VM links (``host_tier._host_linker``) an
``execute`` that runs the same inner function over the same values in the same order, so
its results are ``Scan.execute``'s to the bit: per call it sets the non-sequence inputs
once, per step it points the inner inputs at their rows (sequences, state taps), hands the
outputs their rows where ``Scan.execute`` does (so the inner function writes there in
place), and copies what was not written in place, by object identity (an array cannot
change its memory). Where a Scan does more than that (a ``while`` condition, shared
variables it updates, an inner VM that leaves updates to its caller, no step or a
sequence too short, a profiled inner function), ``Scan.execute`` itself runs.
"""
import numpy as np


def executor(op, counts):
    """An ``execute(node, args, outs)`` for Scan ``op`` (its inner function compiled by
    ``Scan.make_thunk`` before the first call); ``counts``: [Scans, loops this module ran,
    loops ``Scan.execute`` ran], the first counted here."""
    plain = type(op).execute
    state = {}
    counts[0] += 1

    def execute(node, args, outs):
        loop = state.get('loop')
        if loop is None:
            loop = state['loop'] = _Loop(op) if _supported(op) else False
        n_steps = args[0]
        if (loop is False or n_steps <= 0
                or any(seq.shape[0] < n_steps for seq in args[1:loop.state_in])):
            counts[2] += 1
            return plain(op, node, args, outs)
        counts[1] += 1
        return loop.run(node, args, outs)
    return execute


def _supported(op):
    fn = op.fn.fn
    return (not op.as_while and op.n_shared_outs == 0
            and not getattr(fn, 'need_update_inputs', True)
            and not getattr(op.fn.maker, 'profile', None)
            and all(op.inps_is_tensor) and all(op.outs_is_tensor))


class _Loop(object):
    """What ``Scan.execute`` works out every step, worked out once for ``op``."""

    def __init__(self, op):
        self.op = op
        self.n_seqs = n_seqs = op.n_seqs
        self.n_mit_mot = op.n_mit_mot
        self.n_outs = op.n_outs
        self.n_nit_sot = op.n_nit_sot
        self.state_in = 1 + n_seqs
        self.nit_in = self.state_in + op.n_outs + op.n_shared_outs
        self.mintaps = [int(m) for m in op.mintaps]
        self.destroyed = set(getattr(op, 'destroy_map', None) or {})
        self.fn = op.fn.fn
        ins = [c.storage for c in op.fn.input_storage]
        outs = [c.storage for c in op.fn.output_storage]
        self.in_cells, self.out_cells = ins, outs
        self.seq_cells = [(ins[k], bool(op.vector_seqs[k])) for k in range(n_seqs)]
        # inner inputs of the states' taps: (cell, state, tap, 0-d)
        self.tap_cells = []
        k = n_seqs
        for idx in range(op.n_outs):
            for tap in op.tap_array[idx]:
                self.tap_cells.append((ins[k], idx, tap, bool(op.vector_outs[idx])))
                k += 1
        self.other_first = k + op.n_shared_outs
        # mit-mot outputs: (state, tap, cell to read it from, whether it is an inner
        # input updated in place (preallocated) or an inner output)
        self.mit_mot = []
        o = 0
        taps_in = n_seqs
        flat = 0
        for j in range(op.n_mit_mot):
            for tap in op.mit_mot_out_slices[j]:
                if op.mitmots_preallocated[flat]:
                    cell = ins[taps_in + list(op.tap_array[j]).index(tap)]
                    self.mit_mot.append((j, tap, cell, True))
                else:
                    self.mit_mot.append((j, tap, outs[o], False))
                    o += 1
                flat += 1
            taps_in += len(op.tap_array[j])
        self.mit_mot_cleared = [outs[p] for p in range(o)]
        # mit-sot, sit-sot, nit-sot outputs: (state, cell, 0-d)
        self.single = [(j, outs[o + j - op.n_mit_mot], bool(op.vector_outs[j]))
                       for j in range(op.n_mit_mot, op.n_outs + op.n_nit_sot)]

    def run(self, node, args, outs):
        n_steps = int(args[0])
        n_outs, n_nit = self.n_outs, self.n_nit_sot
        seqs = args[1:self.state_in]
        store = [args[self.state_in + idx].shape[0] for idx in range(n_outs)]
        store += [int(args[self.nit_in + j]) for j in range(n_nit)]
        mintaps = self.mintaps
        pos = [(-mintaps[idx]) % store[idx] for idx in range(n_outs + n_nit)]
        for idx in range(n_outs):
            init = args[self.state_in + idx]
            cur = outs[idx][0]
            if idx in self.destroyed:
                outs[idx][0] = init
            elif (cur is not None and cur.shape[1:] == init.shape[1:]
                  and cur.shape[0] >= store[idx]):
                cur = outs[idx][0] = cur[:store[idx]]
                if idx > self.n_mit_mot:
                    cur[:-mintaps[idx]] = init[:-mintaps[idx]]
                else:
                    cur[:] = init
            else:
                outs[idx][0] = init.copy()
        for k, value in enumerate(args[self.nit_in + n_nit:]):
            self.in_cells[self.other_first + k][0] = value
        fn = self.fn
        seq_cells, tap_cells = self.seq_cells, self.tap_cells
        mit_mot, cleared, single = self.mit_mot, self.mit_mot_cleared, self.single
        n_mm = self.n_mit_mot
        # (whether an output's row is handed to the inner function: Scan.execute's rule)
        handed = [not (store[j] == 1 or vec) for j, _, vec in single]
        try:
            for i in range(n_steps):
                for k, (cell, vec) in enumerate(seq_cells):
                    cell[0] = seqs[k][i:i + 1].reshape(()) if vec else seqs[k][i]
                for cell, idx, tap, vec in tap_cells:
                    r = (pos[idx] + tap) % store[idx]
                    buf = outs[idx][0]
                    cell[0] = buf[r:r + 1].reshape(()) if vec else buf[r]
                for cell in cleared:
                    cell[0] = None
                given = []
                for (j, cell, vec), hand in zip(single, handed):
                    row = outs[j][0][pos[j]] if (hand and i) else None
                    cell[0] = row
                    given.append(row)
                before = [cell[0] for _, _, cell, pre in mit_mot if pre]
                try:
                    fn()
                except Exception:
                    _raise_with_op(fn)
                b = 0
                for j, tap, cell, pre in mit_mot:
                    value = cell[0]
                    if pre:
                        if value is not before[b]:
                            outs[j][0][tap + pos[j]] = value
                        b += 1
                    else:
                        outs[j][0][tap + pos[j]] = value
                for (j, cell, vec), row in zip(single, given):
                    value = cell[0]
                    if i == 0 and j >= n_outs:                    # a nit-sot's first row
                        shape = (store[j],) + value.shape
                        buf = outs[j][0]
                        if (buf is None or buf.shape[0] < store[j]
                                or buf.shape[1:] != shape[1:] or buf.dtype != value.dtype):
                            outs[j][0] = node.outputs[j].type.value_zeros(shape)
                        elif buf.shape[0] != store[j]:
                            outs[j][0] = buf[:store[j]]
                        outs[j][0][pos[j]] = value
                    elif value is not row or row is None:
                        try:
                            outs[j][0][pos[j]] = value
                        except ValueError as e:
                            if i == 0 or j >= n_outs:
                                raise
                            raise ValueError(
                                'An output of the scan has changed shape. This may be '
                                'caused by a pushout optimization. Try adding '
                                "'optimizer_excluding=scanOp_pushout_output' to your "
                                'Theano flags.') from e
                for idx in range(n_outs + n_nit):
                    p = pos[idx] + 1
                    pos[idx] = p if p < store[idx] else p % store[idx]
        finally:
            for cell in self.in_cells:
                cell[0] = None
            for cell in self.out_cells:
                cell[0] = None
        self._rotate(node, outs, store, pos, n_steps, n_mm)

    def _rotate(self, node, outs, store, pos, i, n_mm):
        """After ``i`` steps: a state kept in a ring of ``store`` rows put in order (the
        oldest first), rows of a state the steps did not reach zeroed (truncated
        gradients), as ``Scan.execute`` leaves them."""
        for idx in range(n_mm, self.n_outs + self.n_nit_sot):
            s, p = store[idx], pos[idx]
            buf = outs[idx][0]
            if s < i - self.mintaps[idx] and p < s:
                if p >= s // 2:
                    tmp = np.array(buf[:p])
                    buf[:s - p] = buf[p:]
                    buf[s - p:] = tmp
                else:
                    tmp = np.array(buf[p:])
                    buf[s - p:] = buf[:p]
                    buf[:s - p] = tmp
            elif s > i - self.mintaps[idx]:
                buf[i - self.mintaps[idx]:] = 0


def _raise_with_op(fn):
    """Re-raise the inner function's error with its node, as ``Scan.execute`` does."""
    from theano import gof
    pos = getattr(fn, 'position_of_error', None)
    if pos is None:
        raise
    if hasattr(fn, 'thunks'):
        gof.link.raise_with_op(fn.nodes[pos], fn.thunks[pos])
    gof.vm.raise_with_op(fn.nodes[pos])
