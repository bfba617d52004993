"""The scale benchmark's growth rule (issue 17), without running a gateway.

``benchmarks.growth.growth`` turns figures at three sizes into per-unit
costs, their ratios and a verdict; the README's scale table quotes those
verdicts, so the rule is checked here on figures whose growth is known,
and so are the two ``crowd`` helpers the fan-out row relies on (draining
held streams between changes, the file-descriptor limit). No timing is
measured or asserted.
"""

from __future__ import annotations

import math
import resource
import select
import socket
import time

import pytest

from benchmarks import crowd
from benchmarks.growth import format_table, growth, row

SIZES = (2_500, 5_000, 10_000)


def test_a_cost_proportional_to_the_size_is_linear_with_flat_per_unit_cost() -> None:
    measured = growth(SIZES, [25.0, 50.0, 100.0])
    assert measured.per_unit == (0.01, 0.01, 0.01)
    assert measured.ratios == (1.0, 1.0, 1.0)
    assert measured.exponent == pytest.approx(1.0)
    assert measured.verdict == "linear"
    assert not measured.flat


def test_a_constant_cost_is_sub_linear_and_flat() -> None:
    measured = growth(SIZES, [3.0, 3.0, 3.0])
    assert measured.exponent == pytest.approx(0.0)
    assert measured.verdict == "sub-linear"
    assert measured.flat
    assert measured.ratios == pytest.approx((1.0, 0.5, 0.25))


def test_a_quadratic_cost_is_super_linear() -> None:
    measured = growth(SIZES, [1.0, 4.0, 16.0])
    assert measured.exponent == pytest.approx(2.0)
    assert measured.verdict == "super-linear"
    assert measured.ratios == pytest.approx((1.0, 2.0, 4.0))


@pytest.mark.parametrize(
    ("exponent", "verdict"),
    [(0.79, "sub-linear"), (0.81, "linear"), (1.19, "linear"), (1.21, "super-linear")],
)
def test_the_linear_band_is_an_exponent_within_a_fifth_of_one(
    exponent: float, verdict: str
) -> None:
    totals = [size**exponent for size in SIZES]
    assert growth(SIZES, totals).verdict == verdict


def test_the_verdict_reads_first_to_last_whatever_the_span() -> None:
    # a 10x span (the catalog) and a 4x span judged by the same exponent
    assert growth((10_000, 30_000, 100_000), [1.0, 2.0, 10.0**1.1]).verdict == "linear"
    assert growth((50, 100, 200), [1.0, 2.0, 4.0**1.3]).verdict == "super-linear"


def test_a_non_positive_total_is_undetermined_not_a_verdict() -> None:
    measured = growth(SIZES, [100.0, -20.0, 300.0])  # an RSS difference lost in noise
    assert measured.verdict == "undetermined"
    assert measured.exponent is None
    assert not measured.flat
    assert all(math.isnan(r) for r in measured.ratios)


@pytest.mark.parametrize(
    ("sizes", "totals", "message"),
    [
        ((1_000,), [1.0], "at least two"),
        ((1_000, 2_000), [1.0], "2 sizes but 1 totals"),
        ((2_000, 1_000), [1.0, 2.0], "increasing"),
        ((0, 1_000), [1.0, 2.0], "positive"),
    ],
)
def test_sizes_that_cannot_show_growth_are_refused(
    sizes: tuple[int, ...], totals: list[float], message: str
) -> None:
    with pytest.raises(ValueError, match=message):
        growth(sizes, totals)


def test_a_row_checks_its_target_on_the_growth_and_prints_pass_or_miss() -> None:
    passed = row(
        "fan-out",
        "ms",
        SIZES,
        [200.0, 400.0, 800.0],
        per="stream",
        target="<= 1,000 ms",
        ok=lambda g: g.totals[-1] <= 1000,
    )
    missed = row(
        "fan-out",
        "ms",
        SIZES,
        [300.0, 600.0, 1200.0],
        per="stream",
        target="<= 1,000 ms",
        ok=lambda g: g.totals[-1] <= 1000,
    )
    info = row("first stream", "ms", SIZES, [1.0, 1.0, 1.0], per="stream")
    assert (passed["pass"], missed["pass"], info["pass"]) == (True, False, None)
    text = "\n".join(format_table([passed, missed, info]))
    assert "target:   <= 1,000 ms at 10,000: PASS" in text
    assert "target:   <= 1,000 ms at 10,000: MISS" in text
    assert "verdict:  linear (k = 1.00)" in text
    assert "verdict:  sub-linear (k = 0.00)" in text
    assert "80.00 µs/stream" in text  # 800 ms over 10,000 streams


def test_drain_drops_what_a_previous_change_left_so_it_cannot_count_as_the_next() -> None:
    left, right = socket.socketpair()
    with left, right:
        right.setblocking(False)
        stale = b"event: message\ndata: notifications/tools/list_changed\n\n"
        left.sendall(stale)
        assert crowd.drain([right]) == len(stale)
        assert crowd.drain([right]) == 0  # nothing waits now, and it did not block
        left.sendall(b": keep-alive\n\n")
        left.close()
        assert crowd.drain([right]) == 14  # then end of stream: it stops, no loop


def _tcp_pair() -> tuple[socket.socket, socket.socket]:
    with socket.create_server(("127.0.0.1", 0)) as server:
        client = socket.create_connection(server.getsockname())
        accepted, _ = server.accept()
    client.setblocking(False)
    return accepted, client


def test_the_watch_reports_when_the_kernel_received_the_event_not_when_it_was_read() -> None:
    # The arrival must not include the time this process took to get round
    # to the socket (10,000 of them are read in Python): the event is sent,
    # then read only after a pause, and the arrival predates the pause.
    sender, stream = _tcp_pair()
    quiet_sender, quiet = _tcp_pair()
    with sender, stream, quiet_sender, quiet:
        watch = crowd.Watch([stream, quiet])
        # Linux turns receive timestamps on for the whole host through
        # deferred work when the first socket asks (net_enable_timestamp):
        # a packet that lands before it ran carries no stamp, and recvmsg
        # then reports the time of the read. Give that work its moment.
        time.sleep(0.05)
        try:
            before = time.clock_gettime(time.CLOCK_MONOTONIC)
            sender.sendall(b": keep-alive\n\n")
            sender.sendall(b"event: message\ndata: " + crowd.MARKER + b"\n\n")
            # On a loaded machine loopback delivery can lag the send: wait
            # until the kernel holds the bytes (select reads nothing), so the
            # pause below starts after the arrival, however busy the cores.
            select.select([stream], [], [], 10.0)
            time.sleep(0.2)  # the reader is late, on purpose
            read_from = time.clock_gettime(time.CLOCK_MONOTONIC)
            arrivals = watch.await_marker(timeout=0.6)  # the quiet stream never gets it
        finally:
            watch.close()
    assert len(arrivals) == 1
    # The kernel stamps in wall time and the watch maps it onto the monotonic
    # clock through an offset read with two clock calls, good to about a
    # millisecond on a loaded machine; the pause it must predate is 200 ms.
    assert before - 0.05 <= arrivals[0] < read_from - 0.1


def test_the_watch_stops_waiting_for_a_stream_that_ended() -> None:
    sender, stream = _tcp_pair()
    with sender, stream:
        watch = crowd.Watch([stream])
        sender.close()
        started = time.monotonic()
        try:
            assert watch.await_marker(timeout=30) == []
        finally:
            watch.close()
        assert time.monotonic() - started < 25  # it did not wait out the timeout


def test_the_fd_limit_already_high_enough_is_left_as_it_is() -> None:
    soft, hard = resource.getrlimit(resource.RLIMIT_NOFILE)
    assert crowd.raise_fd_limit(min(64, soft)) == soft
    assert resource.getrlimit(resource.RLIMIT_NOFILE) == (soft, hard)


def test_an_fd_limit_past_the_hard_one_is_refused_before_the_run_not_halfway() -> None:
    _soft, hard = resource.getrlimit(resource.RLIMIT_NOFILE)
    if hard == resource.RLIM_INFINITY:
        pytest.skip("no hard limit on this machine to exceed")
    with pytest.raises(RuntimeError, match="hard limit"):
        crowd.raise_fd_limit(hard + 1)
