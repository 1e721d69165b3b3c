"""A second implementation of the bundle and receipt verifiers, written from docs/ alone.

Everything here but ``test_*.py`` imports only the standard library, ``cryptography`` (Ed25519)
and ``rfc8785`` (the canonical JSON docs/audit.md names): nothing of ``gnau_service``, the
clients or the other tests (``test_independent_imports.py`` holds it to that). The tests play
live rounds through a real service and hold these verifiers to ``gnau audit verify`` and
``gnau receipt verify``, which they run as commands. See README.md.
"""
