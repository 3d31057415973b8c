"""Shared fixtures, and the Criterion-style JSON counts tools/test.sh adds up (--nnprim-json)."""
import json
import os
import sys

import pytest

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, os.path.dirname(HERE))  # the package from this checkout, not an installed one
ROOT = os.path.dirname(os.path.dirname(HERE))

if "NNPRIM_LIBRARY" not in os.environ:
    built = os.path.join(ROOT, "build", "src", "libnnprim.so")
    if os.path.exists(built):
        os.environ["NNPRIM_LIBRARY"] = built


def pytest_addoption(parser):
    parser.addoption("--nnprim-json", default=None, help="write the counts as Criterion's JSON")


_results = []


def pytest_runtest_logreport(report):
    if report.when == "call" or (report.when == "setup" and report.outcome != "passed") or \
            (report.when == "teardown" and report.outcome == "failed"):
        msg = []
        if report.skipped and isinstance(report.longrepr, tuple):
            msg = [report.longrepr[2]]
        elif report.failed:
            msg = [str(report.longrepr)[-2000:]]
        _results.append((report.nodeid, report.outcome, msg))


def pytest_collectreport(report):
    # a module skipped whole (no CUDA): one skip, with its reason
    if report.skipped:
        why = report.longrepr[2] if isinstance(report.longrepr, tuple) else str(report.longrepr)
        _results.append((report.nodeid, "skipped", [why]))


def pytest_sessionfinish(session, exitstatus):
    path = session.config.getoption("--nnprim-json")
    if not path:
        return
    status = {"passed": "PASSED", "failed": "FAILED", "skipped": "SKIPPED"}
    tests = [{"name": n, "status": status[o], "messages": m} for n, o, m in _results]
    count = {o: sum(1 for _, oo, _ in _results if oo == o) for o in status}
    if exitstatus not in (0, 1, 5) or (exitstatus == 1 and count["failed"] == 0):
        count["failed"] += 1  # a collection error or an internal error
    with open(path, "w") as f:
        json.dump({"id": "pytest", "passed": count["passed"], "failed": count["failed"],
                   "errored": 0, "skipped": count["skipped"],
                   "test_suites": [{"name": "python", "tests": tests}]}, f)


def cuda_available():
    try:
        import torch
    except ImportError:
        return False
    return torch.cuda.is_available()


needs_cuda = pytest.mark.skipif(not cuda_available(), reason="no CUDA device for torch")


@pytest.fixture
def ctx():
    import nnprim
    with nnprim.Context(backend="ref", env=False) as c:
        yield c
