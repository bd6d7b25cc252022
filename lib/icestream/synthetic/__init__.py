"""A realistic, seeded stream of user events in the wire format of :mod:`icestream.lake.schema`.

- :mod:`~icestream.synthetic.model`: the event model (types, funnel, properties, devices, daily curve).
- :mod:`~icestream.synthetic.generator`: what to generate (:class:`GeneratorConfig`) and the generator
  itself: sessions, rates, the placement of anomalies, duplicates, late and malformed records.
- :mod:`~icestream.synthetic.schedule`: units happen in event-time order and leave in send order, within
  an exact record count.
- :mod:`~icestream.synthetic.ground_truth`: the anomalies to inject and the ground-truth file.
- :mod:`~icestream.synthetic.second_kind`: opt-in order events on the same stream, a field added mid-run,
  and the truth per table.
- :mod:`~icestream.synthetic.kinds`: record kinds (one per record) and flags (overlapping), counted apart.
- :mod:`~icestream.synthetic.malformed`: the malformed kinds and their payloads.
- :mod:`~icestream.synthetic.wire`: records, the timestamp format, encoding and reading payload files.
- :mod:`~icestream.synthetic.samples`: the committed samples in ``data/samples/``.

The names notebooks use are offered by :mod:`icestream.demos`; the command line, the producer and the
tests import from the modules.
"""
