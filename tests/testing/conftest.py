from plugin_fixtures import clean_plugin_state  # noqa: F401  (no plugin outlives the test)
