"""Stack wing, the lowest: the versions of the pinned stack read from versions.toml (`ftenv
versions`) and the build-time check that the image installed exactly them (`ftenv buildcheck`).

Imports nothing of ftenv but the shared floor-0 modules; every other wing may import it.
"""
