"""A lockstep sim's executor: commands on a wait set of their own, every callback in one thread.

Built on rclpy internals (``rclpy_implementation.WaitSet``, entity handles, the executor's
``wait_for_ready_callbacks``); kept apart from the sim node so that those stay in one place
(docs/sim.md, section 7).
"""

from __future__ import annotations

import threading
from collections import deque
from contextlib import ExitStack

from rclpy.callback_groups import ReentrantCallbackGroup
from rclpy.exceptions import InvalidHandle
from rclpy.executors import (
    ConditionReachedException,
    Executor,
    ExternalShutdownException,
    ShutdownException,
    TimeoutException,
)
from rclpy.guard_condition import GuardCondition
from rclpy.impl.implementation_singleton import rclpy_implementation as _rclpy
from rclpy.node import Node
from rclpy.signals import SignalHandlerGuardCondition
from rclpy.subscription import Subscription
from rclpy.task import Task


class _LoopServedGroup(ReentrantCallbackGroup):
    """Callback group of the command subscriptions a :class:`LockstepCommandLoop` serves: the executor
    leaves them alone, and their QoS event handlers too (rclpy puts those in the subscription's group).

    The loop serves both: a command must be taken once, by one thread, and with Fast DDS a subscription's
    event handle wakes a wait set whenever a message arrives, so an executor waiting on the event handlers
    would rebuild its whole wait set on every command anyway.
    """

    def can_execute(self, entity) -> bool:
        return False


class _HandOverExecutor(Executor):
    """An executor that only waits: every ready callback is handed to the loop's thread to run.

    Its wait set is rclpy's usual one (services, timers, event handlers, guard conditions), without the
    loop's command subscriptions; callback groups, tasks and the order of work are rclpy's.
    """

    def __init__(self, loop: LockstepCommandLoop, context):
        super().__init__(context=context)
        self._loop = loop
        self.stopping = False

    def stop_waiting(self) -> None:
        """From another thread: leave the wait set now and wait no more (the executor stays usable
        for :meth:`shutdown`, which must not run while a wait set holds its guard conditions)."""
        self.stopping = True
        self.wake()

    def _is_stopping(self) -> bool:
        return self.stopping

    def _spin_once_impl(self, timeout_sec=None, wait_condition=None) -> None:
        # the same condition object on every call: rclpy keeps the generator of ready callbacks (one
        # wait set) only while the arguments stay equal
        try:
            handler, _, _ = self.wait_for_ready_callbacks(
                timeout_sec, None, wait_condition or self._is_stopping
            )
        except (ShutdownException, TimeoutException, ConditionReachedException):
            return
        self._loop.hand_over(handler)

    def spin_once(self, timeout_sec: float | None = None) -> None:
        self._spin_once_impl(timeout_sec)

    def _spin_once_until_future_complete(self, future, timeout_sec=None) -> None:
        self._spin_once_impl(timeout_sec, lambda: self.stopping or future.done())

    def spin_once_until_future_complete(self, future, timeout_sec=None) -> None:
        future.add_done_callback(lambda _: self.wake())
        self._spin_once_until_future_complete(future, timeout_sec)


class LockstepCommandLoop:
    """Spins a sim node in lockstep: commands on a wait set of their own, everything in one thread.

    rclpy's executor rebuilds its wait set from every entity of the node (lifecycle, parameter and reset
    services, timers, event handlers) in Python on each wake-up; in lockstep that is at least once per step,
    CPU taken from the evaluator and the renderer on a small machine. Here the calling thread waits on the
    command subscriptions alone (as rclpy's ``wait_for_message`` does), takes a command, steps and
    publishes. An executor in a background thread waits on the rest and hands each ready callback (reset,
    lifecycle transitions, parameters, timers) over to the same thread, so every callback still runs in
    one thread, one at a time, as under ``rclpy.spin``: the environment (and its OpenGL context) is only
    ever touched by the thread that created it (docs/sim.md, section 7).
    """

    def __init__(self, node: Node):
        self._node = node
        self._context = node.context
        self.group = _LoopServedGroup()
        self._subs: list[Subscription] = []
        self._generation = 0
        self._handed: deque = deque()
        self._closed = False
        # not node.create_guard_condition: the executor must not wait on these
        self._wake = GuardCondition(None, None, context=self._context)
        self._sigint = SignalHandlerGuardCondition(self._context)
        self._executor = _HandOverExecutor(self, self._context)
        self._executor.add_node(node)
        self._executor_error: BaseException | None = None

    @property
    def subscription_count(self) -> int:
        return len(self._subs)

    def serve(self, subscriptions: list[Subscription]) -> None:
        """Wait on these subscriptions from now on (an empty list: on none)."""
        self._subs = list(subscriptions)
        self._generation += 1
        if not self._closed:
            self._wake.trigger()

    def hand_over(self, handler) -> None:
        """Called by the executor's thread: run ``handler`` in the loop's thread."""
        self._handed.append(handler)
        self._wake.trigger()

    def spin(self) -> None:
        """Serve the node until the context shuts down; callbacks' exceptions propagate, as in rclpy.spin."""
        waiter = threading.Thread(target=self._wait_for_callbacks, name="sim_executor", daemon=True)
        waiter.start()
        try:
            while self._context.ok() and self._executor_error is None:
                try:
                    self._serve_generation()
                except _rclpy.RCLError:
                    if self._context.ok():
                        raise
                    break  # shut down (Ctrl-C, SIGTERM) while the wait set was made or waited on
            if self._executor_error is not None:
                raise self._executor_error
        finally:
            self._closed = True
            # the executor's thread leaves its wait set before the executor is shut down: shutdown()
            # destroys guard conditions that wait set holds, a race with a wait in another thread
            # (ros2/rclpy#968). The sim died of SIGSEGV at shutdown twice in ~20 full suite runs
            # with that thread in its wait; this race is the suspect, not proven the cause.
            self._executor.stop_waiting()
            waiter.join(5.0)
            self._executor.shutdown(timeout_sec=0)
            self._sigint.destroy()
            self._wake.destroy()

    def _wait_for_callbacks(self) -> None:
        try:
            while self._context.ok() and not self._executor.stopping:
                self._executor.spin_once()
        except ExternalShutdownException:
            pass
        except BaseException as exc:
            self._executor_error = exc
        if not self._closed:
            self._wake.trigger()

    def _run_handed(self) -> None:
        while self._handed:
            self._run(self._handed.popleft())

    @staticmethod
    def _run(task: Task) -> None:
        task()
        exception = task.exception()
        if exception is not None:
            raise exception

    def _serve_generation(self) -> None:
        """Serve one set of subscriptions until :meth:`serve` replaces it (or the context ends)."""
        generation, subs = self._generation, self._subs
        with ExitStack() as held:  # in use: a destroy waits until we let go of them
            live, events = [], []
            for sub in subs:
                try:
                    held.enter_context(sub.handle)
                    live.append(sub)
                except InvalidHandle:  # destroyed meanwhile; serve() follows with the new set
                    continue
                for handler in sub.event_handlers:  # incompatible QoS / type: logged, as by the executor
                    try:
                        held.enter_context(handler)
                        events.append(handler)
                    except InvalidHandle:
                        pass
            for entity in (self._wake.handle, self._sigint.handle, self._context.handle):
                held.enter_context(entity)
            wait_set = _rclpy.WaitSet(len(live), 2, 0, 0, 0, len(events), self._context.handle)
            while generation == self._generation and self._executor_error is None:
                wait_set.clear_entities()
                for sub in live:
                    wait_set.add_subscription(sub.handle)
                for handler in events:
                    handler.add_to_wait_set(wait_set)
                wait_set.add_guard_condition(self._wake.handle)
                wait_set.add_guard_condition(self._sigint.handle)
                wait_set.wait(-1)
                if not self._context.ok():
                    return
                ready = wait_set.get_ready_entities("subscription")
                for sub in live:  # one message per ready subscription and wake-up, like the executor
                    if sub.handle.pointer in ready:
                        taken = sub.handle.take_message(sub.msg_type, sub.raw)
                        if taken is not None:
                            sub.callback(taken[0])
                for handler in events:
                    if handler.is_ready(wait_set):
                        self._run(Task(handler.execute, (handler.take_data(),)))
                self._run_handed()
