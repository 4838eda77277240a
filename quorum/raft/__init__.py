"""Everything that changes or reads pysyncobj (pinned at 0.3.17): ``host``,
the one SyncObj of a voter, built and driven there only; the Raft
port (cipher, frames, pickle protocol, hello), the journal hookup
(``durability``), pre-vote, leader liveness, divergence and the membership
port. ``patches`` lists every replacement made in pysyncobj and installs
them in order; ``status`` is what code outside quorum/ reads of Raft
(``QuorumNode.status()``).
"""
