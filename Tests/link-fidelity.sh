#!/usr/bin/env bash
# Links every file of Tests/FidelityTests into the other three fidelity folders.
set -euo pipefail
cd "$(dirname "$0")/.."
for dir in FidelitySwift5Tests FidelityMainActorTests FidelityMainActorSwift5Tests; do
  mkdir -p "Tests/$dir"
  find "Tests/$dir" -maxdepth 1 -type l -delete
  for file in Tests/FidelityTests/*.swift; do
    ln -s "../FidelityTests/$(basename "$file")" "Tests/$dir/$(basename "$file")"
  done
done
