"""The console's pure parts: how records and settings are shown, how pages of offsets and a search's records are
chosen (never the whole partition), a page as JSON, and how rates come out of Prometheus scrapes."""

from __future__ import annotations

from odradek.client import Message
from odradek.console import render
from odradek.console.rates import LagHistory, RateHistory, parse_scrape


def test_record_bytes_as_text_json_and_hex():
    assert render.render_bytes(b'{"a":[1,2]}', "json") == '{\n  "a": [\n    1,\n    2\n  ]\n}'
    assert render.render_bytes(b"not json \xff", "json") == "not json \ufffd"
    assert render.render_bytes(b"\x00\x01hi", "hex") == "00 01 68 69"
    assert render.render_bytes(None, "text") == ""
    big = render.render_bytes(b"x" * 100_000, "text")
    assert len(big) < 17_000 and big.endswith("(100,000 bytes in all)")


def test_time_and_size_settings_in_human_units():
    assert render.human_setting("retention.ms", "604800000") == "7 d"
    assert render.human_setting("segment.bytes", "1073741824") == "1 GiB"
    assert render.human_setting("log.retention.hours", "168") == "7 d"
    assert render.human_setting("segment.ms", "90000") == "≈ 1.5 min"
    assert render.human_setting("max.message.bytes", "1048588") == "≈ 1.0 MiB"
    assert render.human_setting("log.cleaner.dedupe.buffer.size", "134217728") == "128 MiB"
    assert render.human_setting("message.timestamp.after.max.ms", str((1 << 63) - 1)) == "no limit"
    assert render.human_setting("retention.bytes", "-1") == ""  # Kafka's -1: no limit, shown raw
    assert render.human_setting("cleanup.policy", "delete") == "" and render.human_setting("flush.messages", "1") == ""
    assert render.human_bytes(512) == "512 B" and render.human_bytes(None) == ""


def test_search_windows_share_the_bound_and_give_what_a_short_partition_leaves():
    # the newest records of each partition; partition 1 has only 3, partition 2 ten: partition 0 takes the rest
    assert render.search_windows({0: (0, 100), 1: (0, 3), 2: (50, 60)}, 30) == {0: (83, 100), 1: (0, 3), 2: (50, 60)}
    assert render.search_windows({0: (0, 10), 1: (0, 10), 2: (0, 10)}, 12) == {0: (6, 10), 1: (6, 10), 2: (6, 10)}
    assert render.search_windows({0: (0, 100), 1: (5, 5)}, 1000) == {0: (0, 100), 1: (5, 5)}


def test_messages_as_json_keep_text_and_mark_bytes():
    message = Message("t", 2, 7, b"k", b"\xff\x00", [("h", b"v"), ("n", None)], 0)
    assert render.messages_json([message]) == [{
        "topic": "t", "partition": 2, "offset": 7, "timestamp_ms": 0, "timestamp": "1970-01-01T00:00:00.000Z",
        "key": "k", "value": {"base64": "/wA="}, "headers": [["h", "v"], ["n", None]]}]


def test_pages_of_a_list():
    page = render.page_of(list(range(120)), 3, 50)
    assert (list(page.items), page.number, page.pages, page.previous, page.next) == (list(range(100, 120)), 3, 3, 2,
                                                                                       None)
    assert render.page_of([], 7, 50).number == 1


def test_message_chunks_walk_from_either_end():
    # newest first from the end, then back; oldest first from an offset, then on; clamped to the log
    assert render.first_chunk(10, 200, None, True, 50) == (150, 200)
    assert render.next_chunk(10, 200, (150, 200), True, 50) == (100, 150)
    assert render.next_chunk(10, 200, (10, 40), True, 50) == (10, 10)
    assert render.first_chunk(10, 200, 99, True, 50) == (50, 100)
    assert render.first_chunk(10, 200, None, False, 50) == (10, 60)
    assert render.first_chunk(10, 200, 5, False, 50) == (10, 60)
    assert render.first_chunk(10, 200, 180, False, 50) == (180, 200)
    assert render.next_chunk(10, 200, (180, 200), False, 50) == (200, 200)


SCRAPE = """\
# HELP odradek_topic_messages_in_total Records appended
# TYPE odradek_topic_messages_in_total counter
odradek_topic_messages_in_total{topic="a"} 100.0
odradek_topic_messages_in_total{topic="b"} 50.0
odradek_topic_messages_in_created{topic="a"} 1.7e9
# TYPE odradek_topic_messages_out_total counter
odradek_topic_messages_out_total{topic="a"} 30.0
# TYPE odradek_log_size_bytes gauge
odradek_log_size_bytes{partition="0",topic="a"} 4096.0
"""  # as prometheus_client writes it


def test_rates_from_scrapes_sum_topics_and_survive_a_restart():
    totals, sizes = parse_scrape(SCRAPE)
    assert totals["produced"] == 150 and totals["fetched"] == 30 and sizes == {("a", 0): 4096.0}
    history = RateHistory()
    history.add(1000.0, totals)
    history.add(1005.0, {**totals, "produced": 250.0})
    history.add(1010.0, {**totals, "produced": 20.0})  # the broker restarted: its counters began again
    series = history.series()
    assert series["time"] == [1005.0, 1010.0] and series["produced"] == [20.0, 4.0] and series["fetched"] == [0, 0]


def test_lag_history_keeps_the_most_recently_watched_groups():
    history = LagHistory(limit=2, groups=2)
    for at, lag in [(1, 10), (2, 7), (3, 4)]:
        history.record("g1", at, lag)
    history.record("g2", 4, 1)
    history.record("g3", 5, 0)
    assert history.series("g1") == {"time": [], "lag": []}  # dropped: least recently watched
    assert history.series("g2") == {"time": [4], "lag": [1]}
    history.record("g3", 6, 2)
    history.record("g3", 7, 3)
    assert history.series("g3") == {"time": [6, 7], "lag": [2, 3]}
