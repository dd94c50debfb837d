"""A local server's start is waited for by a selector, so a process that holds more than 1,024
descriptors (a test worker late in a run, a long console session) can still start one: select()
refuses a descriptor numbered 1024 or more with "filedescriptor out of range"."""

import os
import resource
import subprocess
import sys

import pytest

from infra.local.dynamodb_process import READY, wait_until_ready

pytestmark = pytest.mark.unit

HIGH_FD = 1500


def test_a_ready_pipe_numbered_past_1024_is_read() -> None:
    soft, hard = resource.getrlimit(resource.RLIMIT_NOFILE)
    if hard != resource.RLIM_INFINITY and hard <= HIGH_FD:
        pytest.skip(f"this machine allows {hard} descriptors")
    resource.setrlimit(resource.RLIMIT_NOFILE, (max(soft, HIGH_FD + 1), hard))
    read_end, write_end = os.pipe()
    high = os.dup2(read_end, HIGH_FD)
    process = subprocess.Popen([sys.executable, "-c", "pass"])
    try:
        os.write(write_end, READY)
        wait_until_ready(process, high, timeout_s=5)
    finally:
        process.wait()
        for fd in (read_end, write_end, high):
            os.close(fd)
        resource.setrlimit(resource.RLIMIT_NOFILE, (soft, hard))
