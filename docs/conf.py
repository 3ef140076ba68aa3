"""Sphinx configuration of the theano_ocl documentation (Markdown pages through myst-parser).

Build: ``make docs`` (``sphinx-build -W --keep-going docs docs/_build/html``); the test
suite runs the same build (tests/test_docs.py), so a warning fails CI.
"""
import os
import sys

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, os.path.dirname(HERE))

project = 'theano_ocl'
author = 'the theano_ocl developers'
copyright = '2026, ' + author
release = version = '0.1.0'

extensions = ['myst_parser']
source_suffix = {'.md': 'markdown'}
master_doc = root_doc = 'index'
# _data: recorded benchmark runs (JSON); _generated: rendered tables and plots, pulled into
# the pages with MyST's include directive, never pages of their own
exclude_patterns = ['_build', '_data', '_generated', 'Thumbs.db', '.DS_Store']

myst_enable_extensions = ['colon_fence', 'deflist']
# anchors for '#section' links between pages (page.md#the-start-up-hook)
myst_heading_anchors = 3

html_theme = 'alabaster'
html_title = 'theano_ocl'
html_theme_options = {
    'description': 'An OpenCL backend for Theano 1.0.5',
    'fixed_sidebar': True,
}
pygments_style = 'sphinx'
