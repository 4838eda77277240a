"""Record types, the codec, error codes, features, the image and ``apply``.

No I/O, threads, HTTP or Raft here: everything is deterministic data.
"""
