#!/usr/bin/env bash
# Compiles each Tests/Diagnostics/*.swift.txt in the FidelitySupport target
# (one small file beside it, so the build is short), all in one build, and
# checks that the build fails with the diagnostic the file's first line
# names (`// expect: <message>`): bad model code must give a compile-time
# error that says what to write. Arguments go to `swift build` (CI passes
# the flags of its main build, whose products the check reuses).
set -uo pipefail
cd "$(dirname "$0")/../.."
status=0
# Every file goes into the target at once: one build reports each file's
# errors (the files declare different names).
sources=(Tests/Diagnostics/*.swift.txt)
copies=()
for source in "${sources[@]}"; do
  copy="Tests/FidelitySupport/Diagnostics_$(basename "$source" .txt)"
  cp "$source" "$copy"
  copies+=("$copy")
done
log=$(swift build --target FidelitySupport "$@" 2>&1)
build_status=$?
rm -f "${copies[@]}"
if [ "$build_status" -eq 0 ]; then
  echo "the build with the bad model files succeeded"
  exit 1
fi
for source in "${sources[@]}"; do
  expected=$(head -1 "$source" | sed -n 's|^// expect: ||p')
  if [ -z "$expected" ]; then
    echo "$source: its first line must be '// expect: <message>'"
    status=1
  elif ! grep -qF "$expected" <<<"$log"; then
    echo "$source: the build did not fail with the expected diagnostic"
    status=1
  else
    echo "$source: refused at compile time, with the message"
  fi
done
if [ "$status" -ne 0 ]; then tail -40 <<<"$log"; fi
exit $status
