"""Code the tests share: plain modules, imported by test modules and never the other way round.

A ``test_*.py`` module holds tests only; what two of them need lives here (or, for fixtures, in
``tests/conftest.py``), so importing a helper never collects or runs another file's tests.

- ``waiting``: :func:`~tests.helpers.waiting.wait_until`, the one way a test waits for something.
- ``crash``: :func:`~tests.helpers.crash.crash_at`, the fault hook that stops an ingest or a load at a phase.
- ``streams``: records to send (events, mixed good/bad/duplicate, KPL aggregates), sending them,
  and reading a stream back with bare boto3.
- ``ingest``: draining a stream through the ingest and reading what the tables hold.
- ``fake_kinesis``: in-memory stand-ins for the Kinesis client (unit tests).
- ``samples``: what the parser must say about each malformed sample.
- ``cloudformation``: resolving a template's ``Fn::Sub`` the way CloudFormation does.
- ``security``: what a leaked credential looks like, and names that must never reach SQL.
"""
