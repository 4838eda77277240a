"""The replicated quorum around the pure controller: pysyncobj with an fsynced
journal, snapshots, group commit, the Raft port, node configuration.

Nothing here knows about HTTP, and no business rule lives here: decisions are
``controller/``'s.
"""
