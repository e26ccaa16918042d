"""The release's tooling: the bake file's checks, tags on the registry, scans, manifests and the
parts of the docs that spell versions (docs/releasing.md)."""
