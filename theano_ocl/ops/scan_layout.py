"""Where a Scan node's values sit: :class:`ScanLayout`, the index arithmetic of its outer
inputs and outputs and of its inner function's inputs and outputs, in the order Theano's
``Scan.execute`` reads them (sequences, mit-mot, mit-sot and sit-sot states, shared
variables, nit-sot sizes, other inputs). A device Scan (``ops/scan.py``) keeps one as
``lay``, which its planning and its lowered loop (``ops/scan_lower.py``) read."""


class ScanLayout(object):
    """Where each kind of value sits among a Scan node's outer inputs and outputs and its
    inner function's inputs and outputs (the order ``Scan.execute`` reads them in)."""

    def __init__(self, op):
        self.n_seqs = op.n_seqs
        self.n_mit_mot = op.n_mit_mot
        self.n_outs = op.n_mit_mot + op.n_mit_sot + op.n_sit_sot
        self.n_nit_sot = op.n_nit_sot
        self.n_shared = op.n_shared_outs
        self.taps = [list(t) for t in op.tap_array]
        self.mit_mot_out_slices = [list(s) for s in op.mit_mot_out_slices]
        self.n_mit_mot_outs = sum(len(s) for s in self.mit_mot_out_slices)
        self.mintaps = [int(m) for m in op.mintaps]
        self.as_while = bool(op.as_while)
        # outer inputs
        self.state_in = 1 + self.n_seqs                     # seqs_arg_offset
        self.shared_in = self.state_in + self.n_outs         # shared_arg_offset
        self.nit_in = self.shared_in + self.n_shared         # nit_sot_arg_offset
        self.other_in = self.nit_in + self.n_nit_sot
        # inner inputs
        self.inner_taps = self.n_seqs
        self.inner_shared = self.n_seqs + sum(len(t) for t in self.taps)
        self.inner_other = self.inner_shared + self.n_shared
        # inner outputs: mit-mot slices, mit-sot/sit-sot/nit-sot, shared, condition
        self.inner_single = self.n_mit_mot_outs
        self.inner_shared_out = self.inner_single + self.n_outs - self.n_mit_mot + self.n_nit_sot

    def staged_inputs(self):
        """(inner input index, outer output index or None, tap) of every inner input read
        per step: sequences (outer index None), state taps, shared variables (tap None)."""
        rows = [(k, None, None) for k in range(self.n_seqs)]
        k = self.inner_taps
        for idx, taps in enumerate(self.taps):
            for tap in taps:
                rows.append((k, idx, tap))
                k += 1
        for j in range(self.n_shared):
            rows.append((k, self.n_outs + self.n_nit_sot + j, None))
            k += 1
        return rows

    def sinks(self):
        """(inner output index, outer output index, mit-mot tap or None) of every inner
        output written per step (the condition excluded)."""
        rows = []
        k = 0
        for j, slices in enumerate(self.mit_mot_out_slices):
            for tap in slices:
                rows.append((k, j, tap))
                k += 1
        for j in range(self.n_mit_mot, self.n_outs + self.n_nit_sot + self.n_shared):
            rows.append((k, j, None))
            k += 1
        return rows
