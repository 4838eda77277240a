"""How one voter runs as processes: a core process (Raft and the
controller's log), an orderer process, N HTTP worker processes, linked by
frames over sockets (link.py) and a shared-memory batch ring
(batch_ring.py); wiring.py starts and links them.
"""
