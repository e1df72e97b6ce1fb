"""Plugin tests start and end with a clean registry, loader and `sys` state."""

from plugin_fixtures import clean_plugin_state, pass_source, site, write  # noqa: F401
