"""Host-side tooling for the images, never installed in them: the bake file, tags and release checks.

Imports ftenv.stack (versions) and the standard library.
"""
