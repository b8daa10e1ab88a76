"""Nova over HTTP: ``novaberg serve``, a thin layer that turns requests into engine calls.

``app.py`` builds the FastAPI app (one Engine per process, opened in its lifespan),
``users.py`` users and their API keys, ``auth.py`` the bearer-key check, ``errors.py`` the
error shapes, ``limits.py`` the body cap, ``health.py`` ``/healthz`` and ``/readyz``,
``openai.py`` the OpenAI-compatible ``/v1`` routes, ``conversations.py`` which conversation a
request continues.
"""
