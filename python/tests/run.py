"""Runs the package's tests with pytest (for meson's python_pytest test): the JSON counts go to
argv[1] for tools/test.sh; exit 77 (a skip) when this interpreter has no pytest.
NNPRIM_PYTHON names another interpreter to run them with (one whose torch has CUDA, on a GPU
machine whose /usr/bin/python3 has none)."""
import os
import sys

other = os.environ.get("NNPRIM_PYTHON")
# abspath, not realpath: a virtual environment's python3 links to the system's binary, and only
# started through the link does it see the environment's packages.
if other and os.path.abspath(other) != os.path.abspath(sys.executable) and \
        not os.environ.get("NNPRIM_PYTHON_REEXEC"):
    os.environ["NNPRIM_PYTHON_REEXEC"] = "1"
    os.execv(other, [other] + sys.argv)

try:
    import pytest
except ImportError:
    print("python_pytest: skipped: %s has no pytest (Debian: apt-get install python3-pytest)"
          % sys.executable)
    sys.exit(77)

here = os.path.dirname(os.path.abspath(__file__))
sys.exit(pytest.main(["-q", "-rs", "-p", "no:cacheprovider", here, "--nnprim-json", sys.argv[1]]))
