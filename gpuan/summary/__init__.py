"""Summaries of a whole trace (``gpuan info``)."""
