"""Clock helpers: zones with DST, ISO offsets, month names, the yearless-syslog year walk."""
from __future__ import annotations

from datetime import datetime, timedelta, timezone

import polars as pl
from hypothesis import given, settings
from hypothesis import strategies as st

from forensics.clock import infer_years, localize, month_number, parse_offset_datetime, syslog_years

UTC = timezone.utc


def _utc(naive: list[datetime | None], zone: str) -> list[datetime | None]:
    df = pl.DataFrame({"t": naive}, schema={"t": pl.Datetime("us")})
    return df.select(localize(pl.col("t"), zone))["t"].to_list()


def _z(*a) -> datetime:
    return datetime(*a, tzinfo=UTC)


def test_fold_read_in_file_order_berlin_2024_10_27():
    # 03:00 CEST -> 02:00 CET: the hour 02:00-03:00 happens twice
    local = [datetime(2024, 10, 27, 1, 50), datetime(2024, 10, 27, 2, 10), datetime(2024, 10, 27, 2, 50),
             datetime(2024, 10, 27, 2, 5), datetime(2024, 10, 27, 2, 40), datetime(2024, 10, 27, 3, 5)]
    got = _utc(local, "Europe/Berlin")
    assert got == [_z(2024, 10, 26, 23, 50), _z(2024, 10, 27, 0, 10), _z(2024, 10, 27, 0, 50),
                   _z(2024, 10, 27, 1, 5), _z(2024, 10, 27, 1, 40), _z(2024, 10, 27, 2, 5)]
    assert got == sorted(got)  # one hour of log, monotonic in UTC


def test_fold_jitter_does_not_switch_to_second_pass():
    # two writers a few seconds out of order inside the fold: still the first pass
    local = [datetime(2024, 10, 27, 2, 10, 5), datetime(2024, 10, 27, 2, 10, 1), datetime(2024, 10, 27, 2, 10, 9)]
    assert _utc(local, "Europe/Berlin") == [_z(2024, 10, 27, 0, 10, 5), _z(2024, 10, 27, 0, 10, 1),
                                            _z(2024, 10, 27, 0, 10, 9)]


def test_fold_second_pass_only_on_that_day():
    # a new day (next year's fold is another date anyway) starts again with the first pass
    local = [datetime(2024, 10, 27, 2, 50), datetime(2024, 10, 27, 2, 5), datetime(2025, 10, 26, 2, 30)]
    assert _utc(local, "Europe/Berlin") == [_z(2024, 10, 27, 0, 50), _z(2024, 10, 27, 1, 5), _z(2025, 10, 26, 0, 30)]


def test_gap_berlin_2024_03_31_reads_old_offset():
    # 02:00 CET -> 03:00 CEST: 02:30 does not exist; a clock not yet adjusted wrote it, in CET
    local = [datetime(2024, 3, 31, 1, 59), datetime(2024, 3, 31, 2, 30), datetime(2024, 3, 31, 3, 1), None]
    assert _utc(local, "Europe/Berlin") == [_z(2024, 3, 31, 0, 59), _z(2024, 3, 31, 1, 30), _z(2024, 3, 31, 1, 1), None]


def test_gap_of_half_an_hour_lord_howe():
    # Australia/Lord_Howe springs forward by 30 min (02:00 -> 02:30, UTC+10:30 -> +11)
    assert _utc([datetime(2024, 10, 6, 2, 15)], "Australia/Lord_Howe") == [_z(2024, 10, 5, 15, 45)]


def test_new_york_and_utc():
    assert _utc([datetime(2024, 7, 1, 12)], "America/New_York") == [_z(2024, 7, 1, 16)]
    assert _utc([datetime(2024, 7, 1, 12)], "UTC") == [_z(2024, 7, 1, 12)]


def test_parse_offset_datetime_variants():
    s = pl.Series(["2024-04-29T14:55:41,678628+02:00", "2023-09-08T17:20:30+0200", "2023-09-08T17:20:30.655028+0200",
                   "2026-04-22T21:27:51.291882381Z", "2024-01-01 10:00:00+01", "2022-11-24T03:00:35.886257+00:00",
                   "May 15 23:09:30", "", None])
    got = pl.DataFrame({"s": s}).select(parse_offset_datetime(pl.col("s")))["s"].to_list()
    assert got == [_z(2024, 4, 29, 12, 55, 41, 678628), _z(2023, 9, 8, 15, 20, 30), _z(2023, 9, 8, 15, 20, 30, 655028),
                   _z(2026, 4, 22, 21, 27, 51, 291882), _z(2024, 1, 1, 9), _z(2022, 11, 24, 3, 0, 35, 886257),
                   None, None, None]


def test_month_number_localized():
    s = pl.Series(["Jan", "dec", "Mär", "okt", "févr", "ago", "Dez.", "xyz", None])
    assert pl.DataFrame({"m": s}).select(month_number(pl.col("m")))["m"].to_list() == [1, 12, 3, 10, 2, 8, 12, None, None]


def test_new_year_rollover_walks_back_from_mtime():
    month = pl.Series([12, 12, 1, 1])
    day = pl.Series([30, 31, 1, 2])
    mtime = datetime(2025, 1, 2, 12, tzinfo=UTC).timestamp()
    g = syslog_years(month, day, mtime=mtime, zone="UTC")
    assert g.years.to_list() == [2024, 2024, 2025, 2025]
    assert "file mtime 2025-01-02" in g.how and "1 New Year crossed" in g.how


def test_log_copied_in_january_ended_last_year():
    # last line 31 Dec, the file was copied (mtime) on 3 Jan: the log is from the year before
    g = syslog_years(pl.Series([12, 12]), pl.Series([30, 31]), mtime=datetime(2025, 1, 3, tzinfo=UTC).timestamp())
    assert g.years.to_list() == [2024, 2024]
    # month-only signature keeps working
    assert infer_years(pl.Series([11, 12]), 2025, 1).to_list() == [2024, 2024]


def test_mtime_read_in_the_files_zone():
    # mtime 2024-12-31T23:30Z is already 1 January in Berlin: a last line of 1 Jan belongs to 2025
    mtime = datetime(2024, 12, 31, 23, 30, tzinfo=UTC).timestamp()
    assert syslog_years(pl.Series([1]), pl.Series([1]), mtime=mtime, zone="Europe/Berlin").years.to_list() == [2025]


def test_out_of_order_line_at_month_boundary_is_not_a_new_year():
    month = pl.Series([2, 3, 2, 3])
    day = pl.Series([28, 1, 28, 1])
    assert infer_years(month, 2024, day=day).to_list() == [2024, 2024, 2024, 2024]


def test_gap_of_months_going_backwards_is_a_new_year():
    # Nov then Feb: the Nov lines are from the year before
    assert infer_years(pl.Series([11, 2]), 2024, day=pl.Series([3, 4])).to_list() == [2023, 2024]


def test_leap_day_moves_back_to_a_leap_year():
    g = syslog_years(pl.Series([2, 3]), pl.Series([29, 1]), year=2023)
    assert g.years.to_list() == [2020, 2020]
    assert any("29 February" in n for n in g.notes)
    assert "29 February" in g.how


def test_leap_day_in_leap_year_stays():
    g = syslog_years(pl.Series([2, 3]), pl.Series([29, 1]), year=2024)
    assert g.years.to_list() == [2024, 2024] and not g.notes


def test_leap_day_across_new_year_walk():
    # Dec 2023 ... Feb 29 2024 ... mtime 2024: the walk gives 2024 for Feb 29, valid
    g = syslog_years(pl.Series([12, 1, 2, 3]), pl.Series([31, 1, 29, 1]),
                     mtime=datetime(2024, 3, 2, tzinfo=UTC).timestamp())
    assert g.years.to_list() == [2023, 2024, 2024, 2024]
    assert not g.notes


def test_year_flag_names_the_last_line():
    g = syslog_years(pl.Series([12, 1]), pl.Series([31, 1]), year=2024)
    assert g.years.to_list() == [2023, 2024] and "--year 2024" in g.how


def test_empty_and_null_months():
    assert infer_years(pl.Series([], dtype=pl.Int32), 2024).to_list() == []
    assert infer_years(pl.Series([None, 12, None, 1], dtype=pl.Int32), 2024).to_list() == [2023, 2023, 2023, 2024]


@settings(max_examples=60, deadline=None)
@given(start=st.datetimes(min_value=datetime(2001, 1, 1), max_value=datetime(2030, 1, 1)),
       gaps=st.lists(st.integers(min_value=0, max_value=40 * 86400), min_size=1, max_size=40))
def test_year_walk_recovers_true_years(start, gaps):
    """Any log whose consecutive lines are less than ~10 months apart gets its true years back from the
    mtime of its last line."""
    times = [start]
    for g in gaps:
        times.append(times[-1] + timedelta(seconds=g))
    month = pl.Series([t.month for t in times])
    day = pl.Series([t.day for t in times])
    last = times[-1].replace(tzinfo=UTC) + timedelta(hours=3)
    got = syslog_years(month, day, mtime=last.timestamp(), zone="UTC").years.to_list()
    assert got == [t.year for t in times]
