#!/bin/sh
# CI's format check: every file named by .ci/format-files (git pathspecs) must be what
# clang-format 14 makes of it under .clang-format. Prints the files that are not, with the fix.
#   tools/check-format.sh      exit 0 if all are formatted, 1 if not, 2 if it cannot check
set -u
cd "$(dirname "$0")/.."
fmt=$(command -v clang-format-14 || command -v clang-format) ||
  { echo "check-format.sh: clang-format 14 not found (tools/install-deps.sh installs it)"; exit 2; }
case "$("$fmt" --version)" in
*" 14."*) ;;
*) echo "check-format.sh: $fmt is not clang-format 14: $("$fmt" --version)"; exit 2 ;;
esac
specs=$(grep -vE '^(#|$)' .ci/format-files)
# shellcheck disable=SC2086 # the pathspecs are words
files=$(git ls-files -- $specs) || { echo "check-format.sh: needs a git checkout"; exit 2; }
bad=""
for f in $files; do
  "$fmt" --dry-run -Werror "$f" > /dev/null 2>&1 || bad="$bad $f"
done
if [ -n "$bad" ]; then
  echo "not formatted as .clang-format says ($(echo $bad | wc -w) files):"
  for f in $bad; do echo "  $f"; done
  echo "fix: $fmt -i$bad"
  exit 1
fi
echo "format: $(echo $files | wc -w) files formatted"
