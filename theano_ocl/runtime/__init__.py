"""The runtime: what runs a linked function on a device.

``commit``: all-or-nothing updates (a call commits every update or none, Ctrl-C included);
``faults``: the test hook that interrupts a call at each of its step boundaries.
"""
