"""Everything that changes or reads pysyncobj (pinned at 0.3.17): the Raft
port (cipher, frames, pickle protocol, hello), the journal hookup
(``durability``), pre-vote, leader liveness, divergence and the membership
port.

Code outside this package asks the node, not pysyncobj.
"""
