"""ge-example-passes: two ge pass plugins shipped as an installable distribution.

The entry points of group `ge.passes.plugins` (see pyproject.toml) name the modules
`ge_example_passes.pad_conv` (`FoldPadIntoConv`) and `ge_example_passes.hard_swish`
(`HardSwishFusion`); ge imports them when the compiler initialises and the decorators
register their passes. Importing this package itself registers nothing.
"""

__version__ = "0.1.0"
