"""Build and run the image on this machine with whatever engine, base and GPUs it offers
(docs/building-here.md); `make run` runs this on a distribution's stock python3 (standard library only)."""
