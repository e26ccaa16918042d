"""Stack wing, the lowest: the pinned versions read from versions.toml (`ftenv versions`) and the
build-time check that the image installed exactly them (`ftenv buildcheck`).
"""
