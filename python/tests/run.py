"""Runs the package's tests with pytest (for meson's python_pytest test): the JSON counts go to
argv[1] for tools/test.sh; exit 77 (a skip) when this interpreter has no pytest."""
import os
import sys

try:
    import pytest
except ImportError:
    print("python_pytest: skipped: %s has no pytest (Debian: apt-get install python3-pytest)"
          % sys.executable)
    sys.exit(77)

here = os.path.dirname(os.path.abspath(__file__))
sys.exit(pytest.main(["-q", "-rs", "-p", "no:cacheprovider", here, "--nnprim-json", sys.argv[1]]))
