"""The controller over a real ZooKeeper: topics, leaders after a broker goes, fencing of a zombie.

Brokers here are ZooKeeper sessions with a registration (what the controller
sees of a broker); each test's brokers live in their own chroot.
"""

from __future__ import annotations

from collections.abc import Callable, Iterator

import pytest
from kio.schema.errors import ErrorCode

from logstore.broker.cluster_member import PREFERRED, UNCLEAN
from logstore.cluster.controller import NO_LEADER, ControllerMovedError, ZkController
from logstore.cluster.zk import BrokerRegistration, KafkaZkClient, LeaderAndIsr
from logstore.errors import TopicExistsError

pytestmark = [pytest.mark.slow, pytest.mark.integration, pytest.mark.cluster]

Sessions = Callable[[int, "str | None"], KafkaZkClient]


@pytest.fixture
def broker_session(zk_connect: str) -> Iterator[Sessions]:
    made: list[KafkaZkClient] = []

    def make(broker_id: int, rack: str | None = None) -> KafkaZkClient:
        client = KafkaZkClient(zk_connect, session_timeout_ms=6000)
        client.start()
        client.register_broker(
            BrokerRegistration(broker_id, (("PLAINTEXT", "127.0.0.1", 9000 + broker_id),), rack)
        )
        made.append(client)
        return client

    yield make
    for client in made:
        client.close()


def states(zk: KafkaZkClient, topic: str) -> dict[int, tuple[int, int, tuple[int, ...]]]:
    assignment = zk.topic_assignment(topic)
    assert assignment is not None
    found = {}
    for partition in assignment.partitions:
        state = zk.partition_state(topic, partition)
        assert state is not None
        found[partition] = (state.leader, state.leader_epoch, state.isr)
    return found


def test_a_topic_gets_rack_aware_replicas_and_its_preferred_leaders(broker_session: Sessions) -> None:
    sessions = {b: broker_session(b, f"rack{b % 2}") for b in (1, 2, 3, 4)}
    controller = ZkController(sessions[1], 1)
    assert controller.elect() and controller.epoch == 1
    other = ZkController(sessions[2], 2)
    assert not other.elect() and not other.active
    made = controller.create_topic("orders", 8, 3, {"retention.ms": "1000"})
    assert sorted(made.partitions) == list(range(8))
    for replicas in made.partitions.values():
        assert len(set(replicas)) == 3 and {b % 2 for b in replicas} == {0, 1}  # both racks
    for partition, (leader, epoch, isr) in states(sessions[2], "orders").items():
        assert (leader, epoch, isr) == (made.partitions[partition][0], 0, made.partitions[partition])
    first = sessions[3].partition_state("orders", 0)
    assert first is not None and first.controller_epoch == 1
    with pytest.raises(TopicExistsError):
        controller.create_topic("orders", 1, 1)
    grown = controller.add_partitions("orders", 10)
    assert sorted(grown.partitions) == list(range(10)) and grown.topic_id == made.topic_id
    assert set(states(sessions[1], "orders")) == set(range(10))


def test_a_dead_leaders_partitions_move_within_the_isr(broker_session: Sessions) -> None:
    sessions = {b: broker_session(b, None) for b in (1, 2, 3)}
    controller = ZkController(sessions[1], 1)
    assert controller.elect()
    made = controller.create_topic(
        "t", 6, 3, assignment={p: [1 + (p % 3), 1 + (p + 1) % 3, 1 + (p + 2) % 3] for p in range(6)}
    )
    before = states(sessions[1], "t")
    sessions[2].close()  # broker 2 dies
    result = controller.on_brokers_changed()
    after = states(sessions[1], "t")
    for partition, (leader, epoch, isr) in after.items():
        assert 2 not in isr and leader in isr
        old_leader, old_epoch, _ = before[partition]
        if old_leader == 2:  # it moved, to the next replica in assignment order, with a new epoch
            assert leader == next(b for b in made.partitions[partition] if b != 2) and epoch == old_epoch + 1
        else:
            assert (leader, epoch) == (old_leader, old_epoch)
    assert set(result.changed) == {("t", p) for p in range(6)} and result.leaderless == []
    assert controller.on_brokers_changed().changed == {}  # nothing more to do


def test_replicas_in_a_failed_log_dir_leave_the_isr_and_their_leaderships(broker_session: Sessions) -> None:
    sessions = {b: broker_session(b, None) for b in (1, 2, 3)}
    controller = ZkController(sessions[1], 1)
    assert controller.elect()
    controller.create_topic("t", 3, 3, assignment={0: [2, 1, 3], 1: [2, 3, 1], 2: [1, 2, 3]})
    # Broker 2's log dir holding t-0 and t-2 failed (t-1 is in another, healthy dir).
    sessions[2].report_offline_log_dir(2, "/data/b", [("t", 0), ("t", 2)])
    assert sessions[1].offline_replicas() == {("t", 0): {2}, ("t", 2): {2}}
    result = controller.on_brokers_changed()
    after = states(sessions[1], "t")
    assert after[0] == (1, 1, (1, 3))  # led by 2: the next in sync leads, epoch bumped
    assert after[1] == (2, 0, (2, 3, 1))  # untouched: its replica on 2 is in a healthy dir
    assert after[2] == (1, 0, (1, 3))  # 2 only leaves the ISR
    assert set(result.changed) == {("t", 0), ("t", 2)}
    # A leader may not take the offline replica back into the ISR.
    state = sessions[1].partition_state("t", 0)
    assert state is not None
    error, _ = controller.alter_partition("t", 0, 1, 1, (1, 3, 2), state.zk_version)
    assert error == ErrorCode.ineligible_replica
    # Broker 2 restarts (a new session: its report is gone) and may join again.
    sessions[2].close()
    controller.on_brokers_changed()
    back = broker_session(2, None)
    assert back.offline_replicas() == {}
    assert controller.alter_partition("t", 0, 1, 1, (1, 3, 2), state.zk_version)[0] == ErrorCode.none


def test_no_leader_without_a_live_in_sync_replica_unless_unclean(broker_session: Sessions) -> None:
    one, two = broker_session(1, None), broker_session(2, None)
    controller = ZkController(one, 1)
    assert controller.elect()
    controller.create_topic("t", 1, 2, assignment={0: [2, 1]})
    # The ISR shrinks to broker 2 alone (as a leader does when 1 falls behind).
    state = one.partition_state("t", 0)
    assert state is not None
    assert one.update_partition_state("t", 0, LeaderAndIsr(2, 0, (2,), 1), state.zk_version) is not None
    two.close()
    result = controller.on_brokers_changed()
    assert result.leaderless == [("t", 0)]
    assert states(one, "t")[0] == (NO_LEADER, 1, (2,))  # offline; broker 2 may lead when it returns
    assert controller.on_brokers_changed().leaderless == [("t", 0)]  # stays offline, no new writes
    assert states(one, "t")[0] == (NO_LEADER, 1, (2,))
    unclean = ZkController(one, 1, unclean_leader_election=True)
    unclean.epoch, unclean.epoch_version = controller.epoch, controller.epoch_version
    assert unclean.on_brokers_changed().changed[("t", 0)].leader == 1  # may lose acknowledged records
    assert states(one, "t")[0] == (1, 2, (1,))


def test_controlled_shutdown_moves_leaders_first(broker_session: Sessions) -> None:
    sessions = {b: broker_session(b, None) for b in (1, 2, 3)}
    controller = ZkController(sessions[1], 1)
    assert controller.elect()
    controller.create_topic("t", 3, 3, assignment={0: [3, 1, 2], 1: [1, 3, 2], 2: [2, 1, 3]})
    controller.on_brokers_changed(shutting_down={3})  # broker 3 is still alive, about to stop
    after = states(sessions[1], "t")
    assert after[0][0] == 1 and all(3 not in isr and leader != 3 for leader, _, isr in after.values())


def test_a_zombie_controller_writes_nothing(broker_session: Sessions) -> None:
    one, two, three = broker_session(1, None), broker_session(2, None), broker_session(3, None)
    zombie = ZkController(one, 1)
    assert zombie.elect()
    zombie.create_topic("t", 1, 3, assignment={0: [3, 1, 2]})
    # The zombie pauses; its seat is taken (as when its session expires): a new controller.
    one.resign_controller(1)
    successor = ZkController(two, 2)
    assert successor.elect() and successor.epoch == 2
    zombie.epoch = 1  # it still believes it is the controller
    three.close()
    with pytest.raises(ControllerMovedError, match="was controller at epoch 1"):
        zombie.on_brokers_changed()
    assert not zombie.active
    assert states(two, "t")[0] == (3, 0, (3, 1, 2))  # the zombie changed nothing
    assert successor.on_brokers_changed().changed[("t", 0)].leader == 1
    assert states(two, "t")[0] == (1, 1, (1, 2))


# -- preferred elections, the auto rebalance, reassignments -------------------------------------


def set_isr(zk: KafkaZkClient, topic: str, partition: int, leader: int, isr: tuple[int, ...]) -> None:
    """What a leader's AlterPartition would write (same leader epoch)."""
    state = zk.partition_state(topic, partition)
    assert state is not None
    new = LeaderAndIsr(leader, state.leader_epoch, isr, state.controller_epoch)
    assert zk.update_partition_state(topic, partition, new, state.zk_version) is not None


def test_a_preferred_election_gives_the_lead_back(broker_session: Sessions) -> None:
    sessions = {b: broker_session(b, None) for b in (1, 2, 3)}
    controller = ZkController(sessions[1], 1)
    assert controller.elect()
    controller.create_topic("t", 3, 3, assignment={0: [3, 1, 2], 1: [1, 2, 3], 2: [2, 3, 1]})
    sessions[3].close()  # broker 3 goes: partition 0 moves to broker 1
    controller.on_brokers_changed()
    assert states(sessions[1], "t")[0][0] == 1
    results = controller.elect_leaders(PREFERRED, [("t", 0), ("t", 1), ("t", 9), ("gone", 0)])
    assert results[("t", 0)][0] == ErrorCode.preferred_leader_not_available  # broker 3 is down
    assert results[("t", 1)] == (ErrorCode.election_not_needed, None)
    assert results[("t", 9)][0] == results[("gone", 0)][0] == ErrorCode.unknown_topic_or_partition
    sessions[3] = broker_session(3, None)  # back, and (as its leader would say) in sync again
    set_isr(sessions[1], "t", 0, 1, (1, 2, 3))
    _, epoch, _ = states(sessions[1], "t")[0]
    everything = controller.elect_leaders(PREFERRED, None)
    assert everything == {
        ("t", 0): (ErrorCode.none, None),
        ("t", 1): (ErrorCode.election_not_needed, None),
        ("t", 2): (ErrorCode.election_not_needed, None),
    }
    assert states(sessions[1], "t")[0] == (3, epoch + 1, (1, 2, 3))
    # Unclean: only a partition without a live leader needs one.
    assert controller.elect_leaders(UNCLEAN, [("t", 0)])[("t", 0)][0] == ErrorCode.election_not_needed


def test_the_auto_rebalance_moves_leaders_back_above_the_imbalance(broker_session: Sessions) -> None:
    sessions = {b: broker_session(b, None) for b in (1, 2, 3)}
    controller = ZkController(sessions[1], 1)
    assert controller.elect()
    assignment = {p: [1 + p % 3, 1 + (p + 1) % 3, 1 + (p + 2) % 3] for p in range(6)}
    controller.create_topic("t", 6, 3, assignment=assignment)
    sessions[2].close()
    controller.on_brokers_changed()  # broker 2 preferred for partitions 1 and 4: both moved
    assert controller.rebalance_leaders(10) == []  # broker 2 is down: nothing to give back
    sessions[2] = broker_session(2, None)
    set_isr(sessions[1], "t", 1, 3, (3, 1, 2))  # partition 1 in sync again, 4 not yet
    # Broker 2 leads 0 of its 2: 100% > 50%; only partition 1 (in sync) gets it back.
    assert controller.rebalance_leaders(50) == [("t", 1)]
    leaders = {p: s[0] for p, s in states(sessions[1], "t").items()}
    assert leaders[1] == 2 and leaders[4] != 2
    set_isr(sessions[1], "t", 4, leaders[4], (leaders[4], 1 + (4 + 2) % 3, 2))
    assert controller.rebalance_leaders(100) == []  # 1 of 2 behind = 50%, not above 100%
    assert controller.rebalance_leaders(10) == [("t", 4)]
    assert all(s[0] == assignment[p][0] for p, s in states(sessions[1], "t").items())


def test_alter_partition_without_zookeeper_is_a_retriable_not_controller(broker_session: Sessions) -> None:
    """ZooKeeper out of reach mid-call (bench/chaos.py's network faults: a controller cut off
    from ZooKeeper): NOT_CONTROLLER, which the leader retries, not an exception that closes
    the leader's connection."""
    session = broker_session(1, None)
    controller = ZkController(session, 1)
    assert controller.elect()
    controller.create_topic("t", 1, 1, assignment={0: [1]})
    state = session.partition_state("t", 0)
    assert state is not None
    assert (
        controller.alter_partition("t", 0, 1, state.leader_epoch, (1,), state.zk_version)[0] == ErrorCode.none
    )
    state = session.partition_state("t", 0)
    assert state is not None
    session.zk.stop()  # the client's connection closed: every ZooKeeper call now raises
    answer = controller.alter_partition("t", 0, 1, state.leader_epoch, (1,), state.zk_version)
    assert answer == (ErrorCode.not_controller, None)


def test_a_reassignment_adds_then_removes_replicas(broker_session: Sessions) -> None:
    sessions = {b: broker_session(b, None) for b in (1, 2, 3, 4)}
    controller = ZkController(sessions[1], 1)
    assert controller.elect()
    controller.create_topic("t", 2, 2, assignment={0: [1, 2], 1: [2, 1]})
    results = controller.alter_reassignments(
        {("t", 0): [3, 4], ("t", 1): [2, 2], ("t", 5): [1], ("t", 1 + 0): None}
    )
    assert results[("t", 0)] == (ErrorCode.none, None)
    assert results[("t", 1)][0] == ErrorCode.no_reassignment_in_progress  # the later entry for t-1 won
    assert results[("t", 5)][0] == ErrorCode.unknown_topic_or_partition
    bad = controller.alter_reassignments({("t", 1): [2, 2]})[("t", 1)]
    assert bad[0] == ErrorCode.invalid_replica_assignment and "Duplicate" in str(bad[1])
    dead = controller.alter_reassignments({("t", 1): [9]})[("t", 1)]
    assert dead[0] == ErrorCode.invalid_replica_assignment and "not alive" in str(dead[1])
    assignment = sessions[1].topic_assignment("t")
    assert assignment is not None
    assert (assignment.partitions[0], assignment.adding[0], assignment.removing[0]) == (
        (3, 4, 1, 2),
        (3, 4),
        (1, 2),
    )
    assert controller.list_reassignments(None) == {("t", 0): ((3, 4, 1, 2), (3, 4), (1, 2))}
    assert states(sessions[1], "t")[0] == (1, 0, (1, 2))  # nothing moves until 3 and 4 are in sync
    # Broker 3 catches up: still waiting for 4.
    set_isr(sessions[1], "t", 0, 1, (1, 2, 3))
    controller.on_brokers_changed()  # a pass over every partition: broker 4 not in sync yet
    assert sessions[1].topic_assignment("t").partitions[0] == (3, 4, 1, 2)  # type: ignore[union-attr]
    # Broker 4 too, through AlterPartition: the reassignment completes there.
    state = sessions[1].partition_state("t", 0)
    assert state is not None
    error, _ = controller.alter_partition("t", 0, 1, state.leader_epoch, (1, 2, 3, 4), state.zk_version)
    assert error == ErrorCode.none
    done = sessions[1].topic_assignment("t")
    assert done is not None and done.partitions[0] == (3, 4) and not done.reassigning(0)
    leader, epoch, isr = states(sessions[1], "t")[0]
    assert (leader, epoch, isr) == (3, 1, (3, 4))  # the leader moved into the target, epoch bumped
    assert controller.list_reassignments(None) == {}


def test_a_reassignment_is_cancelled_back_to_the_original_replicas(broker_session: Sessions) -> None:
    sessions = {b: broker_session(b, None) for b in (1, 2, 3)}
    controller = ZkController(sessions[1], 1)
    assert controller.elect()
    controller.create_topic("t", 1, 2, assignment={0: [1, 2]})
    assert controller.alter_reassignments({("t", 0): [1, 3]})[("t", 0)] == (ErrorCode.none, None)
    set_isr(sessions[1], "t", 0, 1, (1, 2))
    assert controller.alter_reassignments({("t", 0): None})[("t", 0)] == (ErrorCode.none, None)
    back = sessions[1].topic_assignment("t")
    assert back is not None and back.partitions[0] == (1, 2) and not back.reassigning(0)
    assert controller.list_reassignments([("t", 0)]) == {}
    assert states(sessions[1], "t")[0] == (1, 0, (1, 2))
