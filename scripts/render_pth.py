#!/usr/bin/env python
"""Regenerate theano_ocl_startup.pth from theano_ocl/_startup.py (``make pth``).

Loads _startup.py by file: the theano_ocl package (and Theano) are not imported.
With --check, exits 1 when the checked-in file is stale instead of writing it.
"""
import importlib.util
import os
import sys

REPO = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))


def main():
    spec = importlib.util.spec_from_file_location(
        '_theano_ocl_startup_render', os.path.join(REPO, 'theano_ocl', '_startup.py'))
    mod = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(mod)
    text = mod.render_pth()
    path = os.path.join(REPO, 'theano_ocl_startup.pth')
    with open(path) as f:
        current = f.read()
    if '--check' in sys.argv[1:]:
        if current != text:
            print('%s is stale: run `make pth`' % path, file=sys.stderr)
            return 1
        return 0
    if current != text:
        with open(path, 'w') as f:
            f.write(text)
        print('wrote', path)
    return 0


if __name__ == '__main__':
    sys.exit(main())
