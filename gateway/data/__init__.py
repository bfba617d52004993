"""Files shipped inside the package: the default config, the starter config and the schema.

They make an installed wheel work with no repository at hand (issue 19):
``serve`` without ``-c`` falls back to ``default.yaml``, ``init`` writes
``starter.yaml``, and both point editors at ``gateway.schema.json``.
"""
