"""Every speed switch, in one list: what it speeds up, its plain twin, and the
test that checks the two agree.

Each speed trick sits behind one seam beside the plain code it must agree
with, and one module-level switch turns it off: with the switch False, every
call takes the plain twin. The agreement tests feed both the same inputs
(most flip the switch; a few call both twins directly).

The convention, checked by tests/test_speed_switches.py: **a module-level
upper-case name bound to a bool literal** (``NAME = True``, ``NAME: bool =
False``) in a product package (metadata_records, controller, quorum, api,
metaquorum, brokers, pipeline) is a speed switch and must be listed here;
the test fails on one that is not, on a listed one that is gone or not a
bool, and on a listed agreement test its module does not define. A
module-level bool that is not a speed switch would need a name other than an
upper-case constant's.

Speed paths with no module-level switch, listed in docs/performance.md
instead: the direct broker routes (``create_app(direct_routes=False)``,
tests/test_api_direct_routes.py), and the indexes whose plain twin is a plain
structure checked by property tests (``PartitionMap`` against a dict,
tests/test_partition_map.py; ``AclsImage.matching`` against ``matching_plain``,
tests/test_acls_image.py).

Plain data: the modules are named, not imported, so reading the list costs
nothing and breaks no layering contract.
"""

from __future__ import annotations

from dataclasses import dataclass


@dataclass(frozen=True, slots=True)
class SpeedSwitch:
    module: str  # dotted module path, e.g. "api.models_fast"
    attribute: str  # the module-level bool; True takes the fast path
    speeds_up: str  # what the fast path does
    plain_twin: str  # the function or path taken when the switch is False
    agreement_tests: tuple[str, ...]  # "tests/path.py::test_name", each checking the two agree


SWITCHES: tuple[SpeedSwitch, ...] = (
    SpeedSwitch(
        "metadata_records.codec",
        "GENERATED",
        "records coded by one generated function per (type, version) (codec_fast.py)",
        "codec.py's field-by-field record_to_obj / decoding",
        (
            "tests/test_codec_fast.py::test_a_record_decodes_alike_or_fails_alike_either_way",
            "tests/test_codec_fast.py::test_a_batch_decodes_alike_or_fails_alike_either_way",
            "tests/test_codec_fast.py::test_encode_batch_gives_the_same_bytes_either_way",
        ),
    ),
    SpeedSwitch(
        "metadata_records.delta",
        "QUICK_REPLAY",
        "PartitionChangeRecords that change only the ISR and leader replayed in one loop "
        "(ImageDelta._replay_quick)",
        "ImageDelta.replay, record by record",
        (
            "tests/test_delta_quick.py::test_the_quick_loop_replays_what_replay_does",
            "tests/test_delta_quick.py::"
            "test_replay_records_is_what_a_batch_and_record_by_record_replay_give",
        ),
    ),
    SpeedSwitch(
        "metadata_records.partition_states",
        "COMPACT_PARTITIONS",
        "each partition of an image kept as its registration's marshal encoding, decoded "
        "on read: about 105 bytes a partition against 790 (memory, not time)",
        "PartitionMap of PartitionRegistration objects",
        (
            "tests/test_partition_states.py::"
            "test_a_log_replayed_with_and_without_the_switch_gives_the_same_image",
            "tests/test_partition_states.py::test_updates_agree_with_a_dict_copied_and_updated",
        ),
    ),
    SpeedSwitch(
        "metadata_records.hot_chunks",
        "HOT_CHUNKS",
        "a chunk read whole from an image file keeps its slots read out (the first "
        "read out let go past 65,536 slots), so a hot topic's next read does not slice "
        "the mapping again",
        "FileChunk._slots_read_out on every whole-chunk read",
        ("tests/test_hot_chunks.py::test_reads_through_a_small_hot_set_are_the_plain_reads",),
    ),
    SpeedSwitch(
        "voter.shared_image",
        "SHARED_IMAGE",
        "the HTTP workers and the orderer read their partitions from the core's image "
        "file (one copy a voter) and start from it instead of an encoded image (memory, "
        "and the seconds a process takes to start at millions of partitions)",
        "each link sent the image encoded (encode_image / decode_image), a copy of its own",
        (
            "tests/test_image_file.py::"
            "test_a_process_following_files_holds_the_plain_image_at_every_offset",
        ),
    ),
    SpeedSwitch(
        "controller.partition_change",
        "QUICK_ISR_CHANGE",
        "an AlterPartition ISR change built without the builder (quick_isr_change)",
        "PartitionChangeBuilder",
        (
            "tests/controller/test_partition_change.py::"
            "test_the_quick_isr_change_is_what_the_builder_builds_wherever_it_vouches",
        ),
    ),
    SpeedSwitch(
        "controller.replication_control",
        "FUSED_ALTER_PARTITION",
        "AlterPartition's common case decided in one loop per topic (_alter_quick)",
        "ReplicationControlManager._alter_one, partition by partition",
        (
            "tests/controller/test_alter_partition_fused.py::"
            "test_the_fused_path_decides_every_request_as_the_plain_one",
        ),
    ),
    SpeedSwitch(
        "controller.heartbeats",
        "ORDERED_WALK",
        "the oldest unfenced session found from sessions kept in contact order",
        "a walk comparing every session (oldest_unfenced)",
        (
            "tests/controller/test_heartbeats.py::"
            "test_the_ordered_walk_finds_the_oldest_unfenced_session_as_a_full_walk_does",
        ),
    ),
    SpeedSwitch(
        "quorum.raft.raft_port",
        "STORED_SMALL_FRAMES",
        "a Raft message under 4 KiB framed as stored zlib blocks, not deflated "
        "(deflate's setup was nearly all of its cost)",
        "pysyncobj's zlib.compress(data, 3) for every message (FrameZlib.compress)",
        ("tests/test_raft_port.py::test_a_frame_reads_back_alike_stored_or_deflated",),
    ),
    SpeedSwitch(
        "quorum.raft.durability",
        "GROW_AHEAD",
        "the journal's zero-filled room grown and synced ahead by a thread of its own, "
        "not by the append that runs out of it (1 MiB of zeros synced with a write)",
        "the append that finds no room fills the next step (JournalFile.write)",
        ("tests/test_journal.py::test_room_grown_ahead_or_by_the_append_holds_the_same_entries",),
    ),
    SpeedSwitch(
        "quorum.history",
        "LINGER",
        "the history writer looks for batches at most every LINGER_S while they flow, "
        "so a stream of lone commits does not wake its thread once a batch",
        "the writer woken by every put (HistoryWriter._run without the linger)",
        ("tests/test_history.py::test_the_store_holds_the_same_files_with_and_without_the_linger",),
    ),
    SpeedSwitch(
        "quorum.state_machine",
        "ADOPT_VIEW",
        "the leader takes its controller's view of a batch it proposed as the next image",
        "ImageDelta replay of every batch",
        (
            "tests/test_adopt_view.py::"
            "test_the_view_is_the_image_only_when_it_holds_exactly_the_batch",
            "tests/test_node.py::"
            "test_the_leader_applies_its_controllers_registrations_and_every_voter_agrees",
        ),
    ),
    SpeedSwitch(
        "api.models_fast",
        "QUICK",
        "the hot request bodies parsed by msgspec and their answers built as dicts",
        "api/models/brokers.py's pydantic models",
        (
            "tests/test_api_models_fast.py::"
            "test_every_body_is_parsed_alike_with_the_quick_parser_on_and_off",
            "tests/test_api_models_fast.py::"
            "test_broker_writes_answer_alike_with_the_quick_path_on_and_off",
        ),
    ),
    SpeedSwitch(
        "api.explain",
        "PAYLOAD_FILTER",
        "explain's look-back decodes only the retained batches whose bytes name the target",
        "every batch of the look-back decoded (scan_back's read loop)",
        ("tests/test_explain.py::test_payload_filter_finds_what_decoding_every_batch_finds",),
    ),
)
