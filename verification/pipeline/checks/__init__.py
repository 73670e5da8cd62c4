"""verify's checks, one module each: a function from the run's session to its result.

The order they run in, and which ones a run includes, is ``pipeline.verify``'s.
"""
