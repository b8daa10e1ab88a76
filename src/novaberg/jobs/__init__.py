"""The work that runs beside and after turns: the persisted event queue (``events``: memory jobs,
self-triggers, proactive messages, each claimed before it runs), the per-user event log that
``GET /api/events`` streams (``user_events``), and the sweeper every ``serve`` and ``worker``
process runs (``worker``). Which follow-ups a response has shown is a table of its own,
:mod:`novaberg.storage.deliveries`."""
