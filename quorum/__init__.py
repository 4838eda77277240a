"""The controller (pure, time as an argument) and, around it, replication.

Nothing here knows about HTTP.
"""
