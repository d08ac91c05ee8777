#!/bin/sh
# The scale curve (issue 44): model-bench's scale workloads on Strata and
# GRDB, then engine-bench beside LMDB and SQLite, at each size; the lines
# go to scale/model.txt and scale/engine-N.txt, and scale-plot.py draws
# scale/scale.png from them.
#
#     sh scale.sh                   # 10k, 100k, 1M and 10M
#     SIZES="10000 100000" sh scale.sh
#     ENGINE=0 sh scale.sh          # the model layer only
set -eu
cd "$(dirname "$0")"
SIZES=${SIZES:-"10000 100000 1000000 10000000"}
mkdir -p scale
swift build -c release --product model-bench
if [ "${ENGINE:-1}" != 0 ]; then swift build -c release --product engine-bench; fi
: > scale/model.txt
for n in $SIZES; do
    for side in strata grdb; do
        .build/release/model-bench --scale "$side" --count "$n" | tee -a scale/model.txt
    done
done
if [ "${ENGINE:-1}" != 0 ]; then
    for n in $SIZES; do
        .build/release/engine-bench --count "$n" | tee "scale/engine-$n.txt"
    done
fi
python3 scale-plot.py scale
