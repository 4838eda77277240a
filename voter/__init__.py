"""One voter as processes, and the life of a write through them.

``metaquorum serve`` checks its flags, builds the QuorumNode and hands it to
``wiring.serve_voter``. Below 3 CPUs (or with ``--http-workers 0``) one
process does everything: the app (api/) over the QuorumNode, the orderer in
process. Otherwise a voter is three kinds of process:

* the core, the ``serve`` process (wiring.py): Raft (quorum/node.py,
  pysyncobj in quorum/raft/), the journal, the Raft port, membership. It
  reserves the API port and serves no HTTP; what needs its own state
  (status, metrics, probes, voter changes) the workers forward to its app;
* the orderer process (orderer_process.py): the controller (controller/)
  and group commit (quorum/orderer.py), the one place writes are ordered;
* N HTTP worker processes (worker_pool.py's ``worker_main``; their node is
  worker_node.py's ``WorkerNode``): HTTP, TLS, auth, limits, JSON, and reads
  from an image of their own, whose partitions they read from the voter's
  image file (shared_image.py): one copy of the partitions a voter.

Who talks to whom: the core has one link (link.py: frames on a socket pair,
core_link.py its end) to each worker and to the orderer: images, catch-ups,
state, forwarded requests, barriers, the orderer's proposals. Each worker
has a link of its own to the orderer for its writes (the core makes the
pair and hands the ends over each process's fd channel). The core writes
every committed batch once into shared memory (batch_ring.py), which each
worker and the orderer read into its image (log_follower.py), and now and
then its whole image into a memory file (shared_image.py) that every
process of the voter, the core too, reads its partitions from: a process
starts from the newest file and keeps of its own only what changed since
(metadata_records/image_file.py). The pool
(worker_pool.py) starts, watches and restarts the orderer and the workers.

The life of a write, an AlterPartition sent to the leader, with workers:

1. The kernel hands the connection to one worker (each listens on the port
   with SO_REUSEPORT, worker_pool.py). Its server (http_server.py, with
   api/connections.py's limits) runs the app: its edge, api/edge.py (body
   limits, auth in api/auth.py, admission in api/admission.py), then the
   route in api/direct_routes.py, which parses the body (api/models_fast.py)
   and calls ``node.submit`` (api/served_node.py).
2. ``WorkerNode.submit`` (worker_node.py) gathers the requests of one loop
   turn into one frame (link.py) on its link to the orderer process, each
   with who asked (the edge's caller: quorum/callers.py).
3. The orderer process (orderer_process.py) hands each to
   ``Orderer.submit_to`` (quorum/orderer.py): queued, or refused past its
   bound (429). While no batch is in flight, the orderer decides the whole
   queue with ``Controller.handle(request, now_ms)`` (controller/), which
   returns the records and the response and commits nothing; the queue's
   records are the next batch, with one ``Who`` per request that wrote
   (who asked for which records, replicated with them).
4. ``RemoteRaft.propose`` (orderer_process.py) encodes the batch, keeps it
   to adopt later (``MetadataStateMachine.expect``) and sends it to the core
   (PROPOSE, on the orderer's link).
5. The core's end (core_link.py's ``OrdererLink``) calls
   ``QuorumNode.propose_payload`` (quorum/node.py; held while a leadership
   handover runs, so that nothing follows its TimeoutNow): pysyncobj's one
   replicated method, ``apply_batch``, appends the entry to the leader's log
   and sends it to the followers over the Raft port (quorum/raft/).
6. Every voter syncs the entry to its journal before it counts as stored
   (quorum/raft/durability.py): a follower before it answers, the leader at
   the end of the tick that appended, after the AppendEntries went out.
7. Once a majority holds it synced, the entry commits, and each voter's Raft thread
   applies it (quorum/state_machine.py's ``apply_batch``): the image moves
   as one immutable object, and the retained log (quorum/record_log.py)
   copies the batch once into the batch ring (batch_ring.py).
8. The core answers the PROPOSE (core_link.py). The orderer's image reads
   the ring (log_follower.py) and adopts its own batch without decoding it;
   the orderer answers each write on the link it came from, with the offset
   the write ends at.
9. The worker reads the ring into its own image (log_follower.py; the
   partitions it has not changed since the voter's newest image file are
   read from that file) and
   answers its client once that image holds the offset: 200 with Kafka's
   ``errorCode``, and a read from that worker right after sees the write.
"""
