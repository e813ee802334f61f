"""The accuracy bench's check of "What ended the job" against the recordings' truth files."""
from evaluation.recordings import ENDED_BY, incident_ending


def test_the_incident_is_the_last_leaking_job():
    jobs = [{"ending": "oom_kill", "leaks": False}, {"ending": "cuda_oom", "leaks": True},
            {"ending": "exit", "leaks": False}]
    assert incident_ending(jobs) == "cuda_oom"


def test_without_a_leaking_job_the_last_job():
    assert incident_ending([{"ending": "cuda_oom"}, {"ending": "oom_kill"}]) == "oom_kill"
    assert incident_ending([]) is None


def test_a_kill_from_outside_or_an_exit_names_nothing_fatal():
    assert None in ENDED_BY["sigkill"] and None in ENDED_BY["exit"]
    assert ENDED_BY["cuda_oom"] == ("gpu_oom",) and ENDED_BY["oom_kill"] == ("oom_kill",)
