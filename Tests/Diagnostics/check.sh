#!/usr/bin/env bash
# Compiles each Tests/Diagnostics/*.swift.txt in the FidelitySupport target
# (one small file beside it, so each build is short) and
# checks that the build fails with the diagnostic the file's first line
# names (`// expect: <message>`): bad model code must give a compile-time
# error that says what to write. Arguments go to `swift build` (CI passes
# the flags of its main build, whose products the check reuses).
set -uo pipefail
cd "$(dirname "$0")/../.."
status=0
for source in Tests/Diagnostics/*.swift.txt; do
  expected=$(head -1 "$source" | sed -n 's|^// expect: ||p')
  if [ -z "$expected" ]; then
    echo "$source: its first line must be '// expect: <message>'"
    status=1
    continue
  fi
  target="Tests/FidelitySupport/Diagnostics_$(basename "$source" .txt)"
  cp "$source" "$target"
  log=$(swift build --target FidelitySupport "$@" 2>&1)
  rm -f "$target"
  if ! grep -qF "$expected" <<<"$log"; then
    echo "$source: the build did not fail with the expected diagnostic"
    tail -20 <<<"$log"
    status=1
  else
    echo "$source: refused at compile time, with the message"
  fi
done
exit $status
