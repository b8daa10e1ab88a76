"""The work that runs beside and after turns: the persisted event queue (``events``: memory jobs,
self-triggers, proactive messages, each claimed before it runs), the per-user event log that
``GET /api/events`` streams (``user_events``), which follow-ups a response has shown
(``deliveries``), and the sweeper every ``serve`` and ``worker`` process runs (``worker``).
Their SQL lives in :mod:`novaberg.storage`."""
